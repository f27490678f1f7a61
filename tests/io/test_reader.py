"""The LIBSVM reader (lcoding.io, lcoding._reader).

Reference: liblinear-official's pure-Python ``svm_read_problem``.  Every shared
data set is read by both readers and compared bit for bit; the big mnist train
set is compared fully in CSR mode and on a prefix of its lines in dict mode.
"""
import bz2
import gzip
import io
import itertools
import lzma
import math
import os
import random
import re
import struct
from decimal import Decimal

import numpy as np
import pytest
import scipy.sparse as sp

from lcoding.io import reader as lio
from lcoding.io.datasets import data_dir
from lcoding.io.reader import LibsvmFormatError, read_libsvm, svm_read_problem

try:
    from liblinear import commonutil as reference
except ImportError:       # the [test] extra installs it; the other tests still run
    reference = None
needs_reference = pytest.mark.skipif(reference is None, reason="liblinear-official not installed")

# Decompressed files larger than this (mnist train, 200 MB) are compared in dict
# mode on a prefix only, and read by lcoding from the decompressed copy rather
# than decompressed again (the bz2 path is covered by every other file); the
# reference needs about 40 s per GB of text per mode.
BIG_FILE_BYTES = 64 << 20
PREFIX_LINES = 5000


def _shared_files():
    folder = data_dir()
    files = sorted(folder.glob("*.bz2")) if folder is not None and folder.is_dir() else []
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(
            reason="shared data not found (set LCODING_DATA)"))]
    return [pytest.param(path, id=path.name,
                         marks=[pytest.mark.slow] if path.stat().st_size > (8 << 20) else [])
            for path in files]


@pytest.fixture(scope="module")
def plain_copy(tmp_path_factory):
    """Decompressed copy of a shared .bz2 file (liblinear-official reads no bz2)."""
    folder = tmp_path_factory.mktemp("plain")
    copies = {}

    def get(path):
        if path not in copies:
            target = folder / path.name[:-len(".bz2")]
            with bz2.open(path, "rb") as src, open(target, "wb") as dst:
                while block := src.read(1 << 22):
                    dst.write(block)
            copies[path] = target
        return copies[path]
    return get


def bits(values):
    return np.asarray(values, dtype=np.float64).view(np.int64)


def flat_dicts(rows):
    """(row lengths, keys, values) of a list of dicts, in iteration order."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    total = int(lengths.sum())
    keys = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=total)
    values = np.fromiter(itertools.chain.from_iterable(d.values() for d in rows),
                         dtype=np.float64, count=total)
    return lengths, keys, values


def assert_same_dict_problem(ours, ref, same_order=True):
    """Bit-identical labels and dicts; ``same_order``: also the same key order."""
    (y, x), (ref_y, ref_x) = ours, ref
    if not same_order:
        x = [dict(sorted(row.items())) for row in x]
        ref_x = [dict(sorted(row.items())) for row in ref_x]
    assert type(y) is list and type(x) is list
    assert all(type(label) is float for label in y)
    assert np.array_equal(bits(y), bits(ref_y))
    assert len(x) == len(ref_x)
    assert all(type(row) is dict for row in x)
    lengths, keys, values = flat_dicts(x)
    ref_lengths, ref_keys, ref_values = flat_dicts(ref_x)
    assert np.array_equal(lengths, ref_lengths)
    assert np.array_equal(keys, ref_keys)
    assert np.array_equal(bits(values), bits(ref_values))
    assert {type(k) for k in itertools.chain.from_iterable(x)} <= {int}
    assert {type(v) for v in itertools.chain.from_iterable(d.values() for d in x)} <= {float}


def assert_same_scipy_problem(ours, ref, same_order=True):
    """Bit-identical CSR problems; ``same_order=False`` sorts the reference rows first."""
    (y, x), (ref_y, ref_x) = ours, ref
    assert x.has_sorted_indices
    if not same_order:
        ref_x = ref_x.sorted_indices()
    assert type(y) is np.ndarray and y.dtype == np.float64
    assert np.array_equal(bits(y), bits(ref_y))
    assert type(x) is sp.csr_matrix and x.dtype == np.float64
    assert x.shape == ref_x.shape
    assert x.indices.dtype == ref_x.indices.dtype and x.indptr.dtype == ref_x.indptr.dtype
    assert np.array_equal(x.indptr, ref_x.indptr)
    assert np.array_equal(x.indices, ref_x.indices)
    assert np.array_equal(bits(x.data), bits(ref_x.data))


# ---------------------------------------------------------------- shared data


@needs_reference
@pytest.mark.parametrize("path", _shared_files())
@pytest.mark.slow
def test_scipy_mode_matches_reference(path, plain_copy):
    plain = plain_copy(path)
    ref = reference.svm_read_problem(str(plain), return_scipy=True)
    source = plain if plain.stat().st_size > BIG_FILE_BYTES else path
    assert_same_scipy_problem(svm_read_problem(source, return_scipy=True), ref)
    y, rows = read_libsvm(source)
    assert np.array_equal(bits(y), bits(ref[0]))
    assert np.array_equal(rows.indptr, ref[1].indptr) and rows.indptr.dtype == np.int64
    assert np.array_equal(rows.indices, ref[1].indices) and rows.indices.dtype == np.int32
    assert np.array_equal(bits(rows.data), bits(ref[1].data))
    assert rows.n_features == ref[1].shape[1]


@needs_reference
@pytest.mark.parametrize("path", _shared_files())
@pytest.mark.slow
def test_dict_mode_matches_reference(path, plain_copy, tmp_path):
    plain = plain_copy(path)
    if plain.stat().st_size <= BIG_FILE_BYTES:
        compared = path
    else:
        compared = tmp_path / "prefix.txt"
        with open(plain, "rb") as src, open(compared, "wb") as dst:
            dst.writelines(itertools.islice(src, PREFIX_LINES))
        plain = compared
    assert_same_dict_problem(svm_read_problem(compared),
                             reference.svm_read_problem(str(plain)))


# ---------------------------------------------------------------- sources

SAMPLE = (b"1 1:0.5 3:-2 10:1e-3\n"
          b"-1 2:1.25\n"
          b"+1\n"
          b"2 1:3 4:0 5:7\n")
SAMPLE_Y = [1.0, -1.0, 1.0, 2.0]
SAMPLE_X = [{1: 0.5, 3: -2.0, 10: 1e-3}, {2: 1.25}, {}, {1: 3.0, 4: 0.0, 5: 7.0}]
COMPRESS = {"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}
EXTENSION = {"gzip": ".gz", "bz2": ".bz2", "xz": ".xz"}


def assert_is_sample(result):
    y, x = result
    assert y == SAMPLE_Y and x == SAMPLE_X


def test_plain_path_str_and_pathlike(tmp_path):
    path = tmp_path / "sample.txt"
    path.write_bytes(SAMPLE)
    assert_is_sample(svm_read_problem(path))
    assert_is_sample(svm_read_problem(str(path)))
    assert_is_sample(svm_read_problem(os.fsencode(path)))


@pytest.mark.parametrize("kind", sorted(COMPRESS))
@pytest.mark.parametrize("with_extension", [True, False], ids=["ext", "no-ext"])
def test_compressed_paths(tmp_path, kind, with_extension):
    path = tmp_path / ("sample" + (EXTENSION[kind] if with_extension else ".data"))
    path.write_bytes(COMPRESS[kind](SAMPLE))
    assert_is_sample(svm_read_problem(path))
    y, x = svm_read_problem(path, return_scipy=True)
    assert y.tolist() == SAMPLE_Y
    assert x.shape == (4, 10) and x.nnz == 6          # 4:0 dropped


@pytest.mark.parametrize("kind", sorted(COMPRESS))
def test_compressed_binary_streams(tmp_path, kind):
    assert_is_sample(svm_read_problem(io.BytesIO(COMPRESS[kind](SAMPLE))))
    path = tmp_path / "sample.bin"
    path.write_bytes(COMPRESS[kind](SAMPLE))
    with open(path, "rb") as stream:
        assert_is_sample(svm_read_problem(stream))


@pytest.mark.parametrize("kind", sorted(COMPRESS))
def test_concatenated_compressed_streams_are_read_whole(tmp_path, kind):
    # pbzip2, `cat a.gz b.gz` and multi-stream xz produce several streams in one file
    head, tail = SAMPLE[:21], SAMPLE[21:]
    path = tmp_path / ("two" + EXTENSION[kind])
    path.write_bytes(COMPRESS[kind](head) + COMPRESS[kind](tail))
    assert_is_sample(svm_read_problem(path))


def test_text_and_binary_file_objects(tmp_path):
    path = tmp_path / "sample.txt"
    path.write_bytes(SAMPLE)
    with open(path) as text:
        assert_is_sample(svm_read_problem(text))
    with open(path, "rb") as binary:
        assert_is_sample(svm_read_problem(binary))
    assert_is_sample(svm_read_problem(io.StringIO(SAMPLE.decode())))
    assert_is_sample(svm_read_problem(io.BytesIO(SAMPLE)))
    with gzip.open(io.BytesIO(gzip.compress(SAMPLE)), "rt") as decoded_text:
        assert_is_sample(svm_read_problem(decoded_text))


def test_file_object_is_left_open(tmp_path):
    path = tmp_path / "sample.txt"
    path.write_bytes(SAMPLE)
    with open(path, "rb") as stream:
        svm_read_problem(stream)
        assert not stream.closed


def test_missing_file_names_it(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        svm_read_problem(missing)
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        read_libsvm(str(missing))


def test_extension_without_matching_content_is_an_error(tmp_path):
    path = tmp_path / "plain.gz"
    path.write_bytes(SAMPLE)
    with pytest.raises(ValueError, match=r"plain\.gz.*gzip"):
        svm_read_problem(path)


@pytest.mark.parametrize("kind", sorted(COMPRESS))
def test_truncated_compressed_file_names_it(tmp_path, kind):
    path = tmp_path / ("cut" + EXTENSION[kind])
    path.write_bytes(COMPRESS[kind](SAMPLE * 50)[:-8])
    with pytest.raises(OSError, match=r"cut\." + EXTENSION[kind][1:]):
        svm_read_problem(path)


def test_unsupported_source_type():
    with pytest.raises(TypeError, match="path or an open file object"):
        svm_read_problem(12)


# ---------------------------------------------------------------- layout


def test_whitespace_line_ends_comments_and_blank_lines(tmp_path):
    text = (b"# header comment\r\n"
            b"\r\n"
            b"  1\t1:1  3:2   \r\n"          # tabs, leading and trailing blanks, CRLF
            b"2 2:5 # trailing comment\r"    # lone CR ends a line too
            b"3\x0b1:4\x0c2:6\x1f\n"        # other ASCII blanks of str.split()
            b"   \n"
            b"-1  \n"                         # label only, trailing spaces
            b"4 1:7#comment glued to a token\n"
            b"5 1:8")                         # last line without line end
    path = tmp_path / "layout.txt"
    path.write_bytes(text)
    y, x = svm_read_problem(path)
    assert y == [1.0, 2.0, 3.0, -1.0, 4.0, 5.0]
    assert x == [{1: 1.0, 3: 2.0}, {2: 5.0}, {1: 4.0, 2: 6.0}, {}, {1: 7.0}, {1: 8.0}]


@needs_reference
def test_liblinear_compatible_layout_matches_reference(tmp_path):
    # CRLF, tabs, trailing blanks, unsorted indices, '+' labels, explicit zeros and
    # a label-only line: all of which liblinear-official reads too
    text = (b"+1 3:1\t1:2  \r\n"
            b"-1\r\n"
            b"2.5 7:0 2:-0 1:3e2 \r\n"
            b"0 00012:+4\r\n")
    path = tmp_path / "compatible.txt"
    path.write_bytes(text)
    # lcoding's dicts list keys in increasing order, liblinear-official's in file order
    assert_same_dict_problem(svm_read_problem(path), reference.svm_read_problem(str(path)),
                             same_order=False)
    assert_same_scipy_problem(svm_read_problem(path, return_scipy=True),
                              reference.svm_read_problem(str(path), return_scipy=True),
                              same_order=False)


def test_unsorted_rows_are_sorted(tmp_path):
    path = tmp_path / "unsorted.txt"
    path.write_bytes(b"1 5:1 2:2 9:3 1:4\n2 3:1 3000:2 30:3\n")
    y, rows = read_libsvm(path)
    assert rows.indices.tolist() == [0, 1, 4, 8, 2, 29, 2999]
    assert rows.data.tolist() == [4.0, 2.0, 1.0, 3.0, 1.0, 3.0, 2.0]
    _, x = svm_read_problem(path)
    assert list(x[0].items()) == [(1, 4.0), (2, 2.0), (5, 1.0), (9, 3.0)]
    _, csr = svm_read_problem(path, return_scipy=True)
    assert csr.has_sorted_indices


def test_zeros_kept_in_dicts_dropped_elsewhere(tmp_path):
    path = tmp_path / "zeros.txt"
    path.write_bytes(b"1 1:0 2:3 7:0.0\n-1 4:-0\n")
    _, x = svm_read_problem(path)
    assert x == [{1: 0.0, 2: 3.0, 7: 0.0}, {4: 0.0}]
    assert math.copysign(1.0, x[1][4]) == -1.0
    _, csr = svm_read_problem(path, return_scipy=True)
    assert csr.shape == (2, 2) and csr.nnz == 1        # columns = largest index with a non-zero
    y, rows = read_libsvm(path)
    assert rows.n_features == 2 and rows.data.tolist() == [3.0]
    assert rows.indptr.tolist() == [0, 1, 1]


def test_empty_file(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    assert svm_read_problem(path) == ([], [])
    y, x = svm_read_problem(path, return_scipy=True)
    assert y.shape == (0,) and x.shape == (0, 0)
    y, rows = read_libsvm(path, n_features=5)
    assert rows.n_rows == 0 and rows.n_features == 5 and rows.indptr.tolist() == [0]
    assert svm_read_problem(io.BytesIO(b"")) == ([], [])
    assert svm_read_problem(io.StringIO("\n\n# nothing\n")) == ([], [])


def test_labels_only(tmp_path):
    path = tmp_path / "labels.txt"
    path.write_bytes(b"1\n-1\n")
    y, x = svm_read_problem(path, return_scipy=True)
    assert y.tolist() == [1.0, -1.0] and x.shape == (2, 0)
    assert svm_read_problem(path) == ([1.0, -1.0], [{}, {}])


def test_read_libsvm_layout_and_n_features(tmp_path):
    path = tmp_path / "rows.txt"
    path.write_bytes(b"1 2:1 4:2\n0 1:3\n")
    y, rows = read_libsvm(path)
    assert y.dtype == np.float64 and y.tolist() == [1.0, 0.0]
    assert rows.data.dtype == np.float64 and rows.data.flags.c_contiguous
    assert rows.indices.dtype == np.int32 and rows.indptr.dtype == np.int64
    assert rows.indptr.tolist() == [0, 2, 3] and rows.indices.tolist() == [1, 3, 0]
    assert rows.n_features == 4
    assert read_libsvm(path, n_features=10)[1].n_features == 10
    assert read_libsvm(path, n_features=np.int64(4))[1].n_features == 4
    with pytest.raises(LibsvmFormatError, match=r"rows\.txt:1: .*'4:2'.*n_features=3"):
        read_libsvm(path, n_features=3)
    with pytest.raises(ValueError, match="n_features"):
        read_libsvm(path, n_features=-1)
    with pytest.raises(TypeError, match="n_features"):
        read_libsvm(path, n_features=2.5)


# ---------------------------------------------------------------- malformed input

MALFORMED = [
    # (file content, line of the error, words of the message)
    (b"1 1:2\n\nabc 1:2\n", 3, "bad label 'abc'"),
    (b"1 1:2\n1:2 3:4\n", 2, "no label"),
    (b"1 1:2 3\n", 1, "'3' has no ':'"),
    (b"1 1:1\n2 1.5:2\n", 2, "'1.5:2': the index is not an integer"),
    (b"1 a:2\n", 1, "'a:2': the index is not an integer"),
    (b"1 :2\n", 1, "':2': the index is not an integer"),
    (b"1 1_0:2\n", 1, "the index is not an integer"),
    (b"1 1:1\n1 0:2\n", 2, "'0:2': the index must be >= 1"),
    (b"1 -3:2\n", 1, "'-3:2': the index must be >= 1"),
    (b"1 2147483648:1\n", 1, "exceeds 2147483647"),
    (b"nan 1:2\n", 1, "label 'nan' is not finite"),
    (b"1\n-inf\n", 2, "label '-inf' is not finite"),
    (b"1e400 1:1\n", 1, "label '1e400' is not finite"),
    (b"1 1:nan\n", 1, "'1:nan': the value is not finite"),
    (b"1 1:1\n1 2:Infinity\n", 2, "'2:Infinity': the value is not finite"),
    (b"1 3:-1e999\n", 1, "'3:-1e999': the value is not finite"),
    (b"1 1:abc\n", 1, "'1:abc': the value is not a number"),
    (b"1 1:\n", 1, "'1:': the value is not a number"),
    (b"1 1:2:3\n", 1, "'1:2:3': the value is not a number"),
    (b"1 1:1_000\n", 1, "the value is not a number"),
    (b"1 1:0x10\n", 1, "the value is not a number"),
    (b"1 1:2 1:3\n", 1, "feature index 1 appears more than once"),
    (b"1 1:1\n1 3:1 1:2 3:4\n", 2, "feature index 3 appears more than once"),
    (b"1 1:0 1:0\n", 1, "feature index 1 appears more than once"),
    (b"1 qid:3 1:2\n", 1, "qid (svmlight query id) tokens are not supported"),
    (b"1 1:2\n1 1:\xc3\xa9\n", 2, "the value is not a number"),
]


@pytest.mark.parametrize("mode", ["dict", "scipy", "rows"])
@pytest.mark.parametrize("content, line, words", MALFORMED,
                         ids=[str(i) for i in range(len(MALFORMED))])
def test_malformed_file_names_file_and_line(tmp_path, content, line, words, mode):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(LibsvmFormatError) as caught:
        if mode == "rows":
            read_libsvm(path)
        else:
            svm_read_problem(path, return_scipy=mode == "scipy")
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: ")
    assert words in message
    assert caught.value.line == line and caught.value.filename == str(path)
    assert isinstance(caught.value, ValueError)


def test_malformed_stream_is_called_stream():
    with pytest.raises(LibsvmFormatError, match=r"^<stream>:2: .*'x:1'"):
        svm_read_problem(io.StringIO("1 1:1\n1 x:1\n"))
    with pytest.raises(LibsvmFormatError, match=r"^<stream>:3: "):
        svm_read_problem(io.BytesIO(bz2.compress(b"1\n2\n3 0:1\n")), return_scipy=True)


def test_long_bad_token_is_shortened(tmp_path):
    path = tmp_path / "long.txt"
    path.write_bytes(b"1 1:" + b"9" * 20 + b"x" * 500 + b"\n")
    with pytest.raises(LibsvmFormatError) as caught:
        svm_read_problem(path)
    assert "..." in str(caught.value) and len(str(caught.value)) < 200


# ---------------------------------------------------------------- chunking


def _layout_torture_text(n_lines=300, seed=5):
    rng = random.Random(seed)
    ends = [b"\n", b"\r\n", b"\r"]
    lines = []
    for i in range(n_lines):
        label = rng.choice([b"1", b"-1", b"+1", b"2.5", b"0"])
        indices = sorted(rng.sample(range(1, 60), rng.randint(0, 6)))
        tokens = [b"%d:%s" % (j, repr(rng.uniform(-5, 5)).encode()) for j in indices]
        line = label + b"".join(rng.choice([b" ", b"\t", b"  "]) + t for t in tokens)
        if rng.random() < 0.1:
            line += b" # note %d" % i
        if rng.random() < 0.05:
            lines.append(rng.choice([b"", b"   ", b"# only a comment"]) + rng.choice(ends))
        lines.append(line + rng.choice(ends))
    return b"".join(lines)


@pytest.mark.parametrize("chunk_size, parallel_min", [(1, 1 << 30), (2, 1 << 30), (3, 100),
                                                      (7, 1 << 30), (64, 64), (1000, 1000)])
@pytest.mark.slow
def test_chunk_boundaries_do_not_matter(tmp_path, monkeypatch, chunk_size, parallel_min):
    # streams are read in chunks of chunk_size; chunks (and memory-mapped files) of
    # parallel_min bytes or more are parsed in two halves at once
    text = _layout_torture_text()
    path = tmp_path / "torture.txt"
    path.write_bytes(text)
    expected_dicts = svm_read_problem(path)
    expected_csr = svm_read_problem(path, return_scipy=True)
    assert len(expected_dicts[0]) == 300
    monkeypatch.setattr(lio, "CHUNK_SIZE", chunk_size)
    monkeypatch.setattr(lio, "PARALLEL_MIN_BYTES", parallel_min)
    for source in (lambda: path, lambda: io.BytesIO(text),
                   lambda: io.StringIO(text.decode(), newline=""),
                   lambda: io.BytesIO(gzip.compress(text))):
        assert svm_read_problem(source()) == expected_dicts
        y, x = svm_read_problem(source(), return_scipy=True)
        assert np.array_equal(y, expected_csr[0])
        assert (x != expected_csr[1]).nnz == 0 and x.shape == expected_csr[1].shape
        y, rows = read_libsvm(source())
        assert np.array_equal(rows.indptr, expected_csr[1].indptr)
        assert np.array_equal(rows.indices, expected_csr[1].indices)
        assert np.array_equal(rows.data, expected_csr[1].data)


@pytest.mark.parametrize("chunk_size", [1, 5, 64, 1 << 20])
@pytest.mark.parametrize("bad_line", [2, 31, 33])
def test_line_numbers_survive_chunking_and_splitting(tmp_path, monkeypatch, chunk_size,
                                                     bad_line):
    monkeypatch.setattr(lio, "CHUNK_SIZE", chunk_size)
    monkeypatch.setattr(lio, "PARALLEL_MIN_BYTES", 1)
    lines = [b"1 1:1\r\n"] * 20 + [b"\r"] + [b"1 1:1\n"] * 12     # line 21 is empty
    lines[bad_line - 1] = b"1 1:1 2:x\n"
    text = b"".join(lines)
    path = tmp_path / "late.txt"
    path.write_bytes(text)
    for source in (lambda: path, lambda: io.BytesIO(text)):
        for return_scipy in (False, True):
            with pytest.raises(LibsvmFormatError, match=rf":{bad_line}: .*'2:x'"):
                svm_read_problem(source(), return_scipy=return_scipy)
        with pytest.raises(LibsvmFormatError, match=rf":{bad_line}: .*'2:x'"):
            read_libsvm(source())


# ---------------------------------------------------------------- exact numbers

TRICKY = [
    "0", "-0", "+0", "0.0", "-0.0", "0e10", "00000", "-.0e-5",
    "1", "+1", "-1", ".5", "5.", "+.5", "-5.", "1e5", "1E5", "1e+5", "1e-5", "1.e3",
    "0.1", "0.2", "0.3", "0.30000000000000004", "1e22", "1e23", "1e-22", "1e-23",
    "9007199254740992", "9007199254740993", "9007199254740995", "18014398509481985",
    "123456789012345678", "1234567890123456789", "12345678901234567890",
    "0.011764705882352941", "0.07058823529411765", "0.9921568627450981",
    "1.7976931348623157e308", "1.7976931348623158e308", "2.2250738585072011e-308",
    "2.2250738585072014e-308", "2.225073858507201e-308", "4.9406564584124654e-324",
    "5e-324", "1e-320", "2.4703282292062328e-324", "2.4703282292062327e-324",
    "1e-400", "123e-330", "0.000000000000000000000000000000000000001",
    "3.141592653589793238462643383279502884197169399375105820974944592307816406286",
    "1" + "0" * 400 + "e-400", "0." + "0" * 350 + "1e350",
    "7.0e-10", "-0.731854", "0.00027", "9.86899159742946E-02", "000123.4500", "1e0",
    "4503599627370496.5", "4503599627370497.5", "2.5", "3.5", "1e-1", "1e-07",
]


def _random_tokens(n, seed):
    rng = random.Random(seed)
    tokens = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.4:   # shortest repr of a random double (17-digit values)
            x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
            if not math.isfinite(x):
                continue
            tokens.append(repr(x))
        elif kind < 0.7:  # random digits with a random exponent
            tokens.append("%s%d.%de%d" % (rng.choice(["", "-", "+"]),
                                          rng.getrandbits(rng.randint(1, 70)),
                                          rng.getrandbits(rng.randint(1, 40)),
                                          rng.randint(-340, 300)))
        else:            # halfway between two neighbouring doubles, and just off it
            x = abs(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0])
            if not math.isfinite(x) or not math.isfinite(math.nextafter(x, math.inf)):
                continue
            mid = (Decimal(x) + Decimal(math.nextafter(x, math.inf))) / 2
            digits = rng.choice([17, 20, 25, 40])
            tokens.append(f"{mid:.{digits}e}")
    return tokens


@pytest.mark.parametrize("tokens", [TRICKY, _random_tokens(20000, 1)], ids=["tricky", "random"])
def test_numbers_are_bit_identical_to_python_float(tmp_path, tokens):
    # every token as a feature value (dict mode keeps zeros and signs) and as a label
    tokens = [t for t in tokens if math.isfinite(float(t))]
    path = tmp_path / "numbers.txt"
    path.write_text("".join(f"{t} 1:{t}\n" for t in tokens))
    y, x = svm_read_problem(path)
    expected = bits([float(t) for t in tokens])
    assert np.array_equal(bits(y), expected)
    assert np.array_equal(bits([row[1] for row in x]), expected)


def test_parse_float_kernel_rejects_what_float_rejects():
    from lcoding.io._reader import parse_float
    for bad in [b"", b".", b"+", b"-", b"e5", b"1e", b"1e+", b"1.2.3", b"1 ", b"--1", b"1_0",
                b"0x1p3"]:
        with pytest.raises(ValueError):
            parse_float(bad)
    assert parse_float(b"1e400") == math.inf
    assert parse_float(b"5.") == 5.0


# ---------------------------------------------------------------- fuzzing against a slow reader

_BLANK_RUN = re.compile(rb"[ \t\x0b\x0c\x1c-\x1f]+")
_LINE_END = re.compile(rb"\r\n|\r|\n")
_NUMBER = re.compile(rb"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")
_INDEX = re.compile(rb"[+-]?\d+\Z")


def slow_read(data):
    """The documented grammar, spelled out with regular expressions and float().

    Returns ``(labels, dicts)``, or ``("error", line)`` for the first bad line.
    """
    labels, rows = [], []
    for number, line in enumerate(_LINE_END.split(data), 1):
        tokens = [t for t in _BLANK_RUN.split(line.split(b"#", 1)[0]) if t]
        if not tokens:
            continue
        if not _NUMBER.match(tokens[0]) or not math.isfinite(float(tokens[0])):
            return "error", number
        row = {}
        for token in tokens[1:]:
            index, colon, value = token.partition(b":")
            if (not colon or not _INDEX.match(index) or not 1 <= int(index) <= 2**31 - 1
                    or not _NUMBER.match(value) or not math.isfinite(float(value))
                    or int(index) in row):
                return "error", number
            row[int(index)] = float(value)
        labels.append(float(tokens[0]))
        rows.append(dict(sorted(row.items())))
    return labels, rows


_FRAGMENTS = [b"1", b"0", b"7", b"12", b"-", b"+", b".", b"e", b"E", b":", b" ", b" ", b"\t",
              b"\n", b"\n", b"\r", b"\r\n", b"#", b"qid", b"nan", b"inf", b"x", b"\x00", b"\xff",
              b"\x0b", b"1:1", b" 2:0.5", b" 3:-1e-3", b"99999999999", b"1e400", b"0:"]


def _fuzzed_input(rng):
    if rng.random() < 0.3:   # fragments in any order: mostly errors
        return b"".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(0, 60)))
    # valid lines with a few mutations: mostly valid, errors on later lines
    data = bytearray(_layout_torture_text(rng.randint(1, 8), rng.randrange(1 << 30)))
    for _ in range(rng.choice([0, 0, 1, 2, 3])):
        at = rng.randint(0, len(data))
        if rng.random() < 0.5 and at < len(data):
            del data[at]
        else:
            data[at:at] = rng.choice(_FRAGMENTS)
    return bytes(data)


@pytest.mark.parametrize("seed", range(4))
def test_fuzzed_input_matches_slow_reader(monkeypatch, seed):
    rng = random.Random(seed)
    for trial in range(400):
        data = _fuzzed_input(rng)
        monkeypatch.setattr(lio, "CHUNK_SIZE", rng.choice([1, 3, 8, 4096]))
        monkeypatch.setattr(lio, "PARALLEL_MIN_BYTES", rng.choice([1, 16, 1 << 30]))
        expected = slow_read(data)
        if expected[0] == "error":
            with pytest.raises(LibsvmFormatError) as caught:
                svm_read_problem(io.BytesIO(data))
            assert caught.value.line == expected[1], data
        else:
            y, x = svm_read_problem(io.BytesIO(data))
            assert np.array_equal(bits(y), bits(expected[0])), data
            assert [list(r.items()) for r in x] == [list(r.items()) for r in expected[1]], data
            assert np.array_equal(bits([v for r in x for v in r.values()]),
                                  bits([v for r in expected[1] for v in r.values()])), data
