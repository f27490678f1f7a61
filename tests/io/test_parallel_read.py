"""The parallel LIBSVM reader: byte ranges cut at line ends, parsed in threads,
joined into exactly read_libsvm's result; errors name the file and global line."""
from __future__ import annotations

import bz2

import numpy as np
import pytest

from lcoding.io import datasets
from lcoding.io.parallel import byte_ranges, lines_before, read_libsvm_parallel
from lcoding.io.reader import LibsvmFormatError, read_libsvm


def _same(a, b):
    (y0, r0), (y1, r1) = a, b
    assert np.array_equal(y0, y1)
    assert np.array_equal(r0.indptr, r1.indptr)
    assert np.array_equal(r0.indices, r1.indices)
    assert np.array_equal(r0.data, r1.data)           # float64, bit for bit
    assert r0.n_features == r1.n_features
    assert r0.indptr.dtype == r1.indptr.dtype and r0.indices.dtype == r1.indices.dtype


def _plain(tmp_path, name, max_lines=None):
    try:
        src = datasets.dataset_path(name, "train")
    except FileNotFoundError as err:    # pragma: no cover
        pytest.skip(str(err))
    with bz2.open(src, "rb") as f:
        if max_lines is None:
            data = f.read()
        else:
            data = b"".join(line for _, line in zip(range(max_lines), f))
    path = tmp_path / f"{name}.train"
    path.write_bytes(data)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("name", ["banana", "ijcnn1", "w8a", "skin"])
def test_equals_read_libsvm_on_the_shared_files(tmp_path, name):
    path = _plain(tmp_path, name)
    ref = read_libsvm(path)
    for blocksize in (None, 1 << 16, 4099):
        _same(ref, read_libsvm_parallel(path, blocksize=blocksize, n_threads=2))
    _same(read_libsvm(path, n_features=400),
          read_libsvm_parallel(path, n_features=400, blocksize=1 << 15))


@pytest.mark.slow
def test_equals_read_libsvm_on_mnist(tmp_path):
    path = _plain(tmp_path, "mnist", max_lines=20000)      # 67 MB of text
    _same(read_libsvm(path), read_libsvm_parallel(path, blocksize=8 << 20))


def test_ranges_start_at_line_starts_and_cover_the_file(tmp_path):
    text = b"1 1:1\r\n-1 2:2 # comment\n\n+1 3:3\n1\n-1 1:0.5 2:0.25"
    path = tmp_path / "small.txt"
    path.write_bytes(text)
    for blocksize in range(1, len(text) + 2):
        ranges = byte_ranges(path, blocksize=blocksize)
        assert ranges[0][0] == 0 and ranges[-1][1] == len(text)
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert all(r[0] == 0 or text[r[0] - 1:r[0]] == b"\n" for r in ranges)
        _same(read_libsvm(path), read_libsvm_parallel(path, blocksize=blocksize))


def test_compressed_files_are_read_as_one_block():
    try:
        path = datasets.dataset_path("banana", "train")
    except FileNotFoundError as err:    # pragma: no cover
        pytest.skip(str(err))
    assert byte_ranges(path, blocksize=100) == [(0, path.stat().st_size)]
    _same(read_libsvm(path), read_libsvm_parallel(path, blocksize=100))


@pytest.mark.parametrize("bad_line", [1, 777, 4000])
def test_errors_name_the_file_and_the_global_line(tmp_path, bad_line):
    lines = [f"{1 if i % 2 else -1} 1:{i * 0.5} 3:{i}\n".encode() for i in range(4000)]
    lines[bad_line - 1] = b"1 2:0.5 2:oops\n"
    lines[2000] = b"1 1:1\r\n"                   # a CRLF line on the way
    path = tmp_path / "corrupt.txt"
    path.write_bytes(b"".join(lines))
    with pytest.raises(LibsvmFormatError) as ref:
        read_libsvm(path)
    for blocksize in (512, 4096, None):
        with pytest.raises(LibsvmFormatError) as err:
            read_libsvm_parallel(path, blocksize=blocksize)
        assert str(err.value) == str(ref.value)
        assert err.value.line == bad_line and str(path) in str(err.value)


def test_lines_before_counts_as_the_parser_does(tmp_path):
    path = tmp_path / "ends.txt"
    path.write_bytes(b"1 1:1\r\n2 1:2\r3 1:3\n4 1:4\n")
    assert lines_before(path, 0) == 0
    assert lines_before(path, 7) == 1
    assert lines_before(path, 13) == 2
    assert lines_before(path, 19) == 3
