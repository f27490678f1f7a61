"""Threads: lcoding's kernels release the GIL, so Python threads run them in
parallel (``-m``); BLAS is kept to one thread inside them."""
from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor

try:    # ships with scikit-learn; without it BLAS keeps its own thread count
    from threadpoolctl import threadpool_limits as _threadpool_limits
except ImportError:     # pragma: no cover - depends on the environment
    _threadpool_limits = None


def blas_threads(n_threads: int):
    """Context in which BLAS/LAPACK calls use at most ``n_threads`` threads.

    Small dense problems (k q-metrics' q x d metrics, 256-row distance blocks) lose
    to OpenBLAS's one spinning thread per core: a 256 x 256 eigendecomposition took
    1.0 s instead of 4 ms on a loaded 2-core machine.  Without ``threadpoolctl`` the
    BLAS default stands."""
    if _threadpool_limits is None:
        return contextlib.nullcontext()
    return _threadpool_limits(limits=int(n_threads), user_api="blas")


def single_threaded_blas(n_rows: int | None = None):
    """Context in which BLAS runs on one thread.

    lcoding's distance kernels call dgemm on small blocks (256 rows) and run
    their own threads over row ranges (``-m``); a multi-threaded BLAS inside
    them only spins and fights those threads (measured on MNIST coding, 2 cores:
    3.8 s with OpenBLAS's default threads, 0.55 s with one).  Batches of at most
    ``n_rows`` <= one block skip the (sub-millisecond) switch.  Without
    ``threadpoolctl`` this is a no-op.
    """
    if n_rows is not None and n_rows <= CODE_BLOCK:
        return contextlib.nullcontext()
    return blas_threads(1)


CODE_BLOCK = 256   # rows per distance block; thread ranges start at multiples of it


def split_ranges(n: int, parts: int, align: int = CODE_BLOCK):
    """``parts`` contiguous row ranges whose starts are multiples of ``align``, so
    the distance blocks (and their rounding) do not depend on the thread count."""
    n_blocks = -(-n // align)
    parts = max(1, min(parts, n_blocks))
    bounds = [min(n, align * (n_blocks * i // parts)) for i in range(parts + 1)]
    bounds[-1] = n
    return [(bounds[i], bounds[i + 1]) for i in range(parts) if bounds[i + 1] > bounds[i]]


def map_threads(fn, items, n_threads: int) -> list:
    """``[fn(item) for item in items]``, in at most ``n_threads`` threads when there is
    more than one item (the kernels release the GIL); results in the items' order."""
    items = list(items)
    if n_threads > 1 and len(items) > 1:
        with ThreadPoolExecutor(max_workers=min(n_threads, len(items))) as pool:
            return list(pool.map(fn, items))
    return [fn(item) for item in items]


def run_ranges(work, n: int, n_threads: int) -> None:
    """``work((start, stop))`` over the :func:`split_ranges` of ``n`` rows, in
    ``n_threads`` threads (the kernels release the GIL)."""
    map_threads(work, split_ranges(n, n_threads), n_threads)

