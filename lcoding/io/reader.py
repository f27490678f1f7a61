"""Reading LIBSVM / svmlight sparse text files.

Two entry points share one Cython parser (:mod:`lcoding._reader`):

* :func:`read_libsvm` returns ``(y, Rows)``, the layout the kernels use;
* :func:`svm_read_problem` is a drop-in for liblinear-official's function of the
  same name, with its return types.

Sources are paths (``str``, ``bytes`` or ``os.PathLike``) or open file objects
in text or binary mode.  gzip, bzip2 and xz data are decompressed on the fly;
they are recognised by their magic bytes, so a compressed file needs no
extension, and a ``.gz``/``.bz2``/``.xz`` file whose content is not of that
format is an error.  Compressed data are decompressed in a helper thread while
the parser (which releases the GIL) works on the previous chunk; a large plain
file is memory-mapped and its two halves are parsed at the same time.

Format, and where it departs from liblinear-official's reader (which fails
with an unlabelled ``ValueError`` on most malformed input, or silently accepts
it):

* a line is ``label index:value index:value ...``; blanks are the ASCII
  characters Python's ``str.split()`` splits on; lines end at ``\\n``,
  ``\\r\\n`` or ``\\r``;
* blank lines are skipped (liblinear-official fails on them); ``#`` starts a
  comment that runs to the end of the line, wherever it appears (svmlight's
  convention; liblinear-official fails);
* a line holding only a label is a sample without features;
* labels and values are ASCII numbers as Python's ``float()`` reads them, and
  are converted to the identical float64; NaN, infinities and values beyond the
  float64 range are rejected (liblinear-official accepts them), as are digit
  separators (``1_000``) and non-ASCII digits;
* indices are positive decimal integers up to 2**31 - 1 (``+`` and leading zeros
  allowed); index 0 is rejected (liblinear-official then switches to 0-based
  columns for the rest of the file); an index repeated within a row is rejected
  (liblinear-official keeps the last value in dicts and both values in CSR);
  indices out of order are accepted, as by liblinear-official, and sorted (also
  the keys of the dicts, which liblinear-official leaves in file order);
* ``qid:`` tokens (svmlight ranking) are rejected with a message saying so.

Every format error raises :class:`LibsvmFormatError` whose message starts with
``<file>:<line>: `` (``<stream>`` for file objects).  A missing file raises
``FileNotFoundError`` naming it.
"""
from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import mmap
import os
import queue
import stat
import threading

import numpy as np
import scipy.sparse as sp

from lcoding.io import _reader
from lcoding.io._reader import Status
from lcoding.core.rows import INT32_MAX, Rows

__all__ = ["LibsvmFormatError", "read_libsvm", "svm_read_problem"]

# Bytes handed to the parser per call when reading streams and compressed data.
# Large enough that the per-chunk Python work is negligible, small enough to keep
# decompression (in a helper thread) and parsing overlapped.
CHUNK_SIZE = 1 << 22
# A plain file given by path is memory-mapped and parsed in one go; from this
# size on, as two parts at once: the tail in a helper thread (the parser
# releases the GIL) while this thread parses the head.  For arrays the parts
# are joined; for dicts this thread turns the head's rows into dicts while the
# helper still parses, so there the head is the smaller part.
PARALLEL_MIN_BYTES = 1 << 20
HEAD_FRACTION_ARRAYS = 0.5
HEAD_FRACTION_DICTS = 0.3

STREAM_NAME = "<stream>"

_MAGIC = (("gzip", b"\x1f\x8b"), ("bz2", b"BZh"), ("xz", b"\xfd7zXZ\x00"))
_MAGIC_LENGTH = max(len(magic) for _, magic in _MAGIC)
_EXTENSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz"}
_DECOMPRESSING_FILE = {
    "gzip": lambda stream: gzip.GzipFile(fileobj=stream, mode="rb"),
    "bz2": lambda stream: bz2.BZ2File(stream, mode="rb"),
    "xz": lambda stream: lzma.LZMAFile(stream, mode="rb"),
}
_DECOMPRESSION_ERRORS = (OSError, EOFError, lzma.LZMAError)

_MESSAGES = {
    Status.BAD_LABEL: "bad label {token}: a line must start with a number",
    Status.NO_COLON: "feature {token} has no ':' (expected index:value)",
    Status.BAD_INDEX: "feature {token}: the index is not an integer",
    Status.INDEX_NOT_POSITIVE: "feature {token}: the index must be >= 1 (indices are 1-based)",
    Status.INDEX_TOO_LARGE: "feature {token}: the index exceeds 2147483647",
    Status.INDEX_ABOVE_LIMIT: "feature {token}: the index exceeds n_features={detail}",
    Status.BAD_VALUE: "feature {token}: the value is not a number",
    Status.NONFINITE_LABEL: "label {token} is not finite (nan, inf or beyond the float64 range)",
    Status.NONFINITE_VALUE: "feature {token}: the value is not finite "
                            "(nan, inf or beyond the float64 range)",
    Status.DUPLICATE_INDEX: "feature index {detail} appears more than once in the row",
    Status.QID_TOKEN: "{token}: qid (svmlight query id) tokens are not supported",
}


class LibsvmFormatError(ValueError):
    """A malformed LIBSVM file; ``filename`` and ``line`` (1-based) locate the problem."""

    def __init__(self, filename: str, line: int, problem: str):
        super().__init__(f"{filename}:{line}: {problem}")
        self.filename = filename
        self.line = line


def read_libsvm(source, n_features=None):
    """Read a LIBSVM/svmlight file into labels and :class:`~lcoding.core.rows.Rows`.

    Parameters
    ----------
    source : str, bytes, os.PathLike or file object
        Path of a plain, gzip, bzip2 or xz file, or an open file (text or binary
        mode; binary streams may hold compressed data).
    n_features : int, optional
        Number of features (columns) of the data set; an index above it is an
        error.  Default: the largest index that holds a non-zero value.

    Returns
    -------
    y : ndarray of float64, shape (n_rows,)
    rows : Rows
        Explicit zeros dropped, 0-based int32 indices sorted within each row,
        int64 row pointers.

    Raises
    ------
    LibsvmFormatError
        On malformed input; the message starts with ``<file>:<line>: ``.
    """
    if n_features is not None:
        if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)):
            raise TypeError(f"n_features must be an int or None, not {type(n_features).__name__}")
        if not 0 <= n_features <= INT32_MAX:
            raise ValueError(f"n_features={n_features} is outside [0, {INT32_MAX}]")
        n_features = int(n_features)
    limit = INT32_MAX if n_features is None else n_features
    parts = _parsed_parts(source, False, limit, HEAD_FRACTION_ARRAYS)
    labels, indptr, indices, values, max_index = _joined(list(parts))
    rows = Rows(values, indices, indptr, max(n_features or 0, max_index))
    return labels, rows


def svm_read_problem(data_source, return_scipy=False):
    """Read LIBSVM-format data, with liblinear-official's return types.

    ``svm_read_problem(data_source)`` -> ``(y, x)``: ``y`` a list of floats, ``x``
    a list of dicts ``{index: value}`` (1-based int keys in increasing order,
    explicit zeros kept).

    ``svm_read_problem(data_source, return_scipy=True)`` -> ``(y, x)``: ``y`` a
    float64 ndarray, ``x`` a float64 ``scipy.sparse.csr_matrix`` of shape
    ``(n_rows, largest index)`` with 0-based columns and zeros dropped (a file
    without any non-zero value gives zero columns, where liblinear-official fails).

    ``data_source`` may be a path or an open file object (text or binary, plain
    or compressed); see the module docstring for the accepted format.
    """
    if return_scipy:
        parts = _parsed_parts(data_source, False, INT32_MAX, HEAD_FRACTION_ARRAYS)
        labels, indptr, indices, values, max_index = _joined(list(parts))
        x = sp.csr_matrix((values, indices, indptr), shape=(labels.shape[0], max_index))
        return labels, x
    y, x = [], []
    parts = _parsed_parts(data_source, True, INT32_MAX, HEAD_FRACTION_DICTS)
    with contextlib.closing(parts):
        for parser in parts:
            labels, indptr, indices, values = parser.take_arrays()
            y += labels.tolist()
            x += _reader.row_dicts(indptr, indices, values)
    return y, x


def _parsed_parts(source, keep_zeros, index_limit, head_fraction):
    """Parse a whole source; yields the parsers holding its rows, in file order.

    Each parser is yielded once its part is parsed without error (a format error
    raises LibsvmFormatError).  Usually one parser; a large memory-mapped file
    is parsed in two parts at once (see PARALLEL_MIN_BYTES).
    """
    parser = _reader.LibsvmParser(keep_zeros, index_limit)
    with _source_chunks(source) as (name, chunks, mapped):
        for chunk in chunks:
            if mapped and len(chunk) >= PARALLEL_MIN_BYTES:
                yield from _parsed_in_two_parts(parser, chunk, name, head_fraction)
                return
            parser.feed(chunk)
            _check(parser, name, 0)
        parser.finish()
        _check(parser, name, 0)
    yield parser


def _parsed_in_two_parts(head_parser, chunk, name, head_fraction):
    """Parse ``chunk`` (a whole file) as a head, here, and a tail, in a helper thread.

    Yields the head's parser while the helper may still be parsing the tail,
    then the tail's parser.  The cut is at a line end after ``head_fraction`` of
    the bytes; without one, the head parser takes everything.
    """
    with memoryview(chunk) as view:
        cut = _reader.line_start_after(view, int(len(view) * head_fraction))
        if cut <= 0 or cut >= len(view):
            head_parser.feed(view)
            _check(head_parser, name, 0)
            head_parser.finish()
            _check(head_parser, name, 0)
            yield head_parser
            return
        tail_parser = _reader.LibsvmParser(head_parser.keep_zeros, head_parser.index_limit)
        failure = []

        def parse_tail():
            try:
                if tail_parser.feed(tail) == Status.OK:
                    tail_parser.finish()
            except BaseException as err:  # re-raised in the calling thread
                failure.append(err)

        with view[:cut] as head, view[cut:] as tail:
            helper = threading.Thread(target=parse_tail, name="lcoding-read-tail")
            helper.start()
            try:
                head_parser.feed(head)
                _check(head_parser, name, 0)
                head_parser.finish()      # the head ends with a line end: nothing left
                yield head_parser         # the caller uses it while the helper parses
            finally:
                helper.join()
    if failure:
        raise failure[0]
    _check(tail_parser, name, head_parser.lines_done)
    yield tail_parser


def _check(parser, name, lines_before):
    """Raise the parser's format error, if any; its lines follow ``lines_before`` lines."""
    if parser.status != Status.OK:
        _raise_format_error(parser, name, lines_before)


def _joined(parsers):
    """``(labels, indptr, indices, values, max_index)`` of all rows of the parsers."""
    parts = [parser.take_arrays() for parser in parsers]
    max_index = max(parser.max_index for parser in parsers)
    if len(parts) == 1:
        return (*parts[0], max_index)
    labels = np.concatenate([part[0] for part in parts])
    indices = np.concatenate([part[2] for part in parts])
    values = np.concatenate([part[3] for part in parts])
    offsets = np.cumsum([0] + [part[1][-1] for part in parts[:-1]])
    indptr = np.concatenate([parts[0][1][:1]]
                            + [part[1][1:] + offset for part, offset in zip(parts, offsets)])
    return labels, indptr, indices, values, max_index


def _raise_format_error(parser, name, lines_before):
    status = parser.status
    line = lines_before + parser.error_line
    if status == Status.NO_MEMORY:
        wanted = parser.error_detail
        what = (f": cannot allocate {wanted} bytes ({wanted / 2 ** 20:.1f} MiB) for the "
                f"parsed labels, indices and values" if wanted > 0 else "")
        raise MemoryError(f"{name}:{line}: out of memory while reading{what}")
    token = parser.error_token.decode("ascii", "backslashreplace")
    if len(token) > 60:
        token = token[:57] + "..."
    problem = _MESSAGES[status].format(token=repr(token), detail=parser.error_detail)
    if status == Status.BAD_LABEL and ":" in token:
        problem += " (this line has no label)"
    raise LibsvmFormatError(name, line, problem)


@contextlib.contextmanager
def _source_chunks(source):
    """``(name, iterator of bytes-like chunks, mapped)`` for a path or a file object.

    ``mapped``: the only chunk is a memory map of the whole (plain) file.

    A chunk may be a view of a buffer that the next chunk reuses, or of a memory
    map: consume each one before asking for the next (the parser does, copying
    only a cut line).
    """
    chunk_size = CHUNK_SIZE
    if isinstance(source, (str, bytes, os.PathLike)):
        path = os.fspath(source)
        name = os.fsdecode(path)
        expected = _EXTENSIONS.get(os.path.splitext(name)[1].lower())
        with open(path, "rb") as stream:
            mapped = _mapped_file(stream) if expected is None else None
            if mapped is not None:
                with mapped, memoryview(mapped) as view:
                    if _compression_of(bytes(view[:_MAGIC_LENGTH])) is None:
                        yield name, [view], True
                        return
            chunks = _stream_chunks(stream, name, expected, chunk_size)
            with contextlib.closing(chunks):
                yield name, chunks, False
    elif hasattr(source, "read"):
        chunks = _stream_chunks(source, STREAM_NAME, None, chunk_size)
        with contextlib.closing(chunks):
            yield STREAM_NAME, chunks, False
    else:
        raise TypeError(f"data_source must be a path or an open file object, "
                        f"not {type(source).__name__}")


def _stream_chunks(stream, name, expected, chunk_size):
    """Chunks of a stream's (decompressed) content; ``expected``: compression
    announced by the file name."""
    head = stream.read(_MAGIC_LENGTH)
    if isinstance(head, str):        # text mode: already decoded, never compressed
        while head:
            yield head.encode("utf-8", "backslashreplace")
            head = stream.read(chunk_size)
        return
    head = bytes(head)
    while 0 < len(head) < _MAGIC_LENGTH:   # short reads (pipes, sockets)
        more = stream.read(_MAGIC_LENGTH - len(head))
        if not more:
            break
        head += more
    kind = _compression_of(head)
    if expected is not None and kind != expected and head:
        raise ValueError(f"{name}: the file name says {expected} data, but the content "
                         f"does not start with the {expected} magic bytes")
    if kind is not None:
        decompressed = _decompressed_chunks(_Replayed(head, stream), kind, name, chunk_size)
        yield from _prefetched(decompressed)
    elif head:
        yield head
        yield from _plain_chunks(stream, chunk_size)


def _compression_of(head):
    """"gzip", "bz2", "xz" or None, from the first bytes of a file."""
    return next((kind for kind, magic in _MAGIC if head.startswith(magic)), None)


def _mapped_file(stream):
    """A read-only memory map of the regular file ``stream``, or None."""
    try:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            return None
        return mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError, AttributeError):
        return None


def _plain_chunks(stream, chunk_size):
    """The rest of a binary stream, read into one reused buffer when possible.

    The buffer starts small and doubles up to chunk_size while reads fill it, so
    small inputs do not pay for a large buffer.
    """
    if not hasattr(stream, "readinto"):
        while chunk := stream.read(chunk_size):
            yield chunk
        return
    size = min(1 << 16, chunk_size)
    while True:
        buffer = bytearray(size)
        with memoryview(buffer) as view:
            while n_read := stream.readinto(view):
                with view[:n_read] as chunk:
                    yield chunk
                if n_read == size and size < chunk_size:
                    break
            else:
                return
        size = min(size * 2, chunk_size)


def _decompressed_chunks(stream, kind, name, chunk_size):
    with _DECOMPRESSING_FILE[kind](stream) as decompressing:
        while True:
            try:
                chunk = decompressing.read(chunk_size)
            except _DECOMPRESSION_ERRORS as err:
                raise OSError(f"{name}: cannot decompress the {kind} data: {err}") from err
            if not chunk:
                return
            yield chunk


class _Replayed:
    """A read-only stream: ``head`` (bytes already read), then the rest of ``stream``."""

    def __init__(self, head, stream):
        self._head = head
        self._stream = stream

    def read(self, size=-1):
        if self._head:
            if size is None or size < 0:
                data = self._head + self._stream.read()
                self._head = b""
                return data
            data, self._head = self._head[:size], self._head[size:]
            return data
        return self._stream.read(size)

    def readable(self):
        return True


_ITEM, _END, _ERROR = object(), object(), object()


def _prefetched(items, depth=2):
    """Iterate the generator ``items`` in a worker thread, up to ``depth`` items ahead.

    Decompression releases the GIL, so the caller parses one chunk while the
    worker decompresses the next.  The first item is made in the calling thread:
    an input of one chunk costs no thread.  Closing this generator stops the
    worker.
    """
    handoff = queue.Queue(maxsize=depth)
    stop = threading.Event()
    worker = None

    def put(item):
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    def produce():
        try:
            for item in items:
                if not put((_ITEM, item)):
                    return
            put((_END, None))
        except BaseException as err:  # handed to the consumer, which re-raises it
            put((_ERROR, err))
        finally:
            items.close()

    try:
        first = next(items, _END)
        if first is _END:
            return
        yield first
        worker = threading.Thread(target=produce, name="lcoding-read-prefetch", daemon=True)
        worker.start()
        while True:
            kind, item = handoff.get()
            if kind == _END:
                return
            if kind == _ERROR:
                raise item
            yield item
    finally:
        stop.set()
        if worker is not None:
            worker.join()
        else:
            items.close()
