"""Reading one big plain LIBSVM file in parallel: byte ranges parsed in threads.

A plain (uncompressed) file is memory-mapped and cut into byte ranges at line
boundaries (just past a ``"\\n"``, so a ``"\\r\\n"`` pair stays whole); every
range is parsed by its own :class:`lcoding.io._reader.LibsvmParser` in a thread
(the parser releases the GIL), and the blocks are joined in file order into one
:class:`~lcoding.core.rows.Rows` -- the same labels, rows and ``n_features`` as
:func:`lcoding.io.reader.read_libsvm`.  A format error names the file and the
line as counted from the start of the file (the lines of the ranges before it).

Compressed files (gzip, bzip2, xz) and file objects cannot be cut without
decompressing them first: they are read as one block by
:func:`~lcoding.io.reader.read_libsvm`.

:func:`byte_ranges` and :func:`parse_range` are also what
:func:`lcoding.dask.read_libsvm` runs per Dask block.
"""
from __future__ import annotations

import mmap
import os
from concurrent.futures import ThreadPoolExecutor

from lcoding.core.rows import INT32_MAX, Rows
from lcoding.io import _reader
from lcoding.io.reader import (_EXTENSIONS, _MAGIC_LENGTH, _compression_of, _joined,
                               _raise_format_error, read_libsvm)

__all__ = ["byte_ranges", "parse_range", "read_libsvm_parallel", "is_splittable",
           "lines_before"]

# default bytes per range when only the thread count is given: at least this much
# per thread, so small files are not cut into pieces that cost more than they save
MIN_RANGE_BYTES = 1 << 20


def _checked_n_features(n_features):
    if n_features is None:
        return None
    if isinstance(n_features, bool) or not isinstance(n_features, int):
        raise TypeError(f"n_features must be an int or None, not {type(n_features).__name__}")
    if not 0 <= n_features <= INT32_MAX:
        raise ValueError(f"n_features={n_features} is outside [0, {INT32_MAX}]")
    return int(n_features)


def is_splittable(path) -> bool:
    """Whether ``path`` is a plain, non-empty regular file (cut into byte ranges);
    compressed files (by extension or magic bytes) are not."""
    name = os.fsdecode(os.fspath(path))
    if os.path.splitext(name)[1].lower() in _EXTENSIONS:
        return False
    try:
        if os.path.getsize(name) == 0:
            return False
        with open(name, "rb") as stream:
            return _compression_of(stream.read(_MAGIC_LENGTH)) is None
    except OSError:
        return False


def byte_ranges(path, n_ranges: int | None = None, blocksize: int | None = None) -> list:
    """``[(start, stop), ...]``: byte ranges of a plain file that cover it, each
    starting at the beginning of a line; about ``blocksize`` bytes each, or
    ``n_ranges`` ranges (blocksize wins when both are given).  Fewer ranges when
    the file has few lines; one ``(0, size)`` for a compressed or empty file."""
    name = os.fsdecode(os.fspath(path))
    size = os.path.getsize(name)
    if size == 0 or not is_splittable(name):
        return [(0, size)]
    if blocksize is not None:
        if int(blocksize) < 1:
            raise ValueError(f"blocksize={blocksize} must be >= 1 byte")
        n_ranges = -(-size // int(blocksize))
    n_ranges = max(1, int(n_ranges or 1))
    if n_ranges == 1:
        return [(0, size)]
    cuts = [0]
    with open(name, "rb") as stream, \
            mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as mapped, \
            memoryview(mapped) as view:
        for i in range(1, n_ranges):
            target = size * i // n_ranges
            if target <= cuts[-1]:
                continue
            # the first line start at or after target (a line end just before it counts)
            cut = _reader.line_start_after(view, target - 1)
            if cut < 0 or cut >= size:
                break
            if cut > cuts[-1]:
                cuts.append(cut)
    cuts.append(size)
    return [(cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1)]


def lines_before(path, start: int) -> int:
    """Line ends in the first ``start`` bytes of a plain file, counted as the
    parser counts them (``\\n``, ``\\r\\n`` and a lone ``\\r`` each end a line)."""
    if start <= 0:
        return 0
    name = os.fsdecode(os.fspath(path))
    with open(name, "rb") as stream, \
            mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        head = mapped[:start]
    return head.count(b"\n") + head.count(b"\r") - head.count(b"\r\n")


def parse_range(view, index_limit: int = INT32_MAX):
    """Parse the bytes ``view`` (whole lines) with a new parser; returns the parser,
    finished, or spent with its error (``parser.status`` says which)."""
    parser = _reader.LibsvmParser(False, index_limit)
    if parser.feed(view) == _reader.Status.OK:
        parser.finish()
    return parser


def read_libsvm_parallel(source, n_features=None, n_threads: int | None = None,
                         blocksize: int | None = None):
    """:func:`lcoding.io.reader.read_libsvm`, with a plain file parsed as byte ranges
    in ``n_threads`` threads (default: the CPU count).

    ``blocksize`` (bytes) sets the size of the ranges (default: the file split in
    ``n_threads`` ranges of at least 1 MiB).  Returns ``(y, Rows)`` identical to
    ``read_libsvm(source, n_features)``; format errors raise
    :class:`~lcoding.io.reader.LibsvmFormatError` naming the file and its line.
    Compressed files and file objects are read by ``read_libsvm`` (one block).
    """
    n_features = _checked_n_features(n_features)
    if not isinstance(source, (str, bytes, os.PathLike)) or not is_splittable(source):
        return read_libsvm(source, n_features)
    n_threads = max(1, int(n_threads or os.cpu_count() or 1))
    name = os.fsdecode(os.fspath(source))
    size = os.path.getsize(name)
    if blocksize is None:
        n_ranges = max(1, min(n_threads, size // MIN_RANGE_BYTES))
        ranges = byte_ranges(name, n_ranges=n_ranges)
    else:
        ranges = byte_ranges(name, blocksize=blocksize)
    if len(ranges) == 1:
        return read_libsvm(name, n_features)
    limit = INT32_MAX if n_features is None else n_features
    with open(name, "rb") as stream, \
            mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as mapped, \
            memoryview(mapped) as view:
        def work(rng):
            start, stop = rng
            with view[start:stop] as part:
                return parse_range(part, limit)

        with ThreadPoolExecutor(max_workers=min(n_threads, len(ranges)),
                                thread_name_prefix="lcoding-read") as pool:
            parsers = list(pool.map(work, ranges))
    # the first failing range in file order names its line from the file's start
    lines = 0
    for parser in parsers:
        if parser.status != _reader.Status.OK:
            _raise_format_error(parser, name, lines)
        lines += parser.lines_done
    labels, indptr, indices, values, max_index = _joined(parsers)
    return labels, Rows(values, indices, indptr, max(n_features or 0, max_index))
