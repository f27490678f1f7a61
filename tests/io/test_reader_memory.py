"""The LIBSVM reader allocates in proportion to the values, never to the largest index,
and a MemoryError says what it was allocating."""
from __future__ import annotations

import os

import pytest

from conftest import run_python


from lcoding.commonutil import svm_read_problem
from lcoding.io.reader import read_libsvm



PEAK = """
import resource, sys
from lcoding.commonutil import svm_read_problem
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
y, x = svm_read_problem(sys.argv[1])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) // 1024, x)
"""


@pytest.mark.parametrize("index", [100_000_000, 2 ** 31 - 1])
@pytest.mark.slow
def test_dict_mode_memory_does_not_grow_with_the_index(tmp_path, index):
    """A 2-line file with index 1e8 took 3.9 GB (a table of one int object per index up
    to the largest); index 2**31 - 1 raised an empty MemoryError."""
    path = tmp_path / "big.txt"
    path.write_text(f"1 {index}:1\n-1 5:2\n")
    proc = run_python(PEAK, path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    grown_mb, text = proc.stdout.split(" ", 1)
    assert int(grown_mb) < 50, proc.stdout
    assert text.strip() == f"[{{{index}: 1.0}}, {{5: 2.0}}]"


def test_dict_mode_keys_are_shared_ints_and_sorted(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("1 3000000:1 3:0 7:2\n2 7:1.5 3000000:4\n")
    y, x = svm_read_problem(str(path))
    assert y == [1.0, 2.0]
    assert x == [{3: 0.0, 7: 2.0, 3000000: 1.0}, {7: 1.5, 3000000: 4.0}]
    assert list(x[0]) == [3, 7, 3000000]
    k0 = next(k for k in x[0] if k == 3000000)
    k1 = next(k for k in x[1] if k == 3000000)
    assert k0 is k1          # one int object per distinct index, as for small indices


def test_dense_index_range_keeps_the_direct_table(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text("".join(f"{i % 2} {i + 1}:{i}.5\n" for i in range(300)))
    y, x = svm_read_problem(str(path))
    assert x[299] == {300: 299.5} and len(x) == 300


NO_MEMORY = """
import resource, sys
from lcoding.io.reader import read_libsvm
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
usage = int(open('/proc/self/statm').read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (usage + (64 << 20), hard))
try:
    read_libsvm(sys.argv[1])
except MemoryError as err:
    print("MemoryError:", err)
"""


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_memory_error_names_the_allocation(tmp_path):
    path = tmp_path / "many.txt"
    line = " ".join(f"{j}:1" for j in range(1, 1001))
    with open(path, "w") as fh:
        for i in range(12000):                  # 12 M values: ~144 MB of arrays
            fh.write(f"{i % 2} {line}\n")
    proc = run_python(NO_MEMORY, path)
    out = proc.stdout + proc.stderr
    if "MemoryError:" not in out:
        pytest.skip(f"the address-space limit did not bite here: {out[-500:]}")
    message = out.split("MemoryError:", 1)[1].strip()
    assert "many.txt" in message and "bytes" in message, message


def test_read_libsvm_still_reads_large_indices(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text(f"1 {2 ** 31 - 1}:1\n")
    y, rows = read_libsvm(str(path))
    assert rows.n_features == 2 ** 31 - 1 and rows.indices.tolist() == [2 ** 31 - 2]
