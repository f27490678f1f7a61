"""Threads: lcoding's kernels release the GIL, so Python threads run them in
parallel (``-m``); BLAS is kept to one thread inside them.  Ctrl-C stops training
within a pass, whatever ``-m`` is (:func:`run_interruptible`, :func:`check_stop`)."""
from __future__ import annotations

import contextlib
import contextvars
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

try:    # ships with scikit-learn; without it BLAS keeps its own thread count
    from threadpoolctl import ThreadpoolController
except ImportError:     # pragma: no cover - depends on the environment
    ThreadpoolController = None

_controller = None
_controller_lock = threading.Lock()


def _blas_controller():
    """The process's BLAS libraries, found once: ``threadpool_limits`` searches the
    loaded libraries on every call (1.5 ms, a Ctrl-C waits for it); a kept controller
    switches limits in 10 us.  scipy's own BLAS is loaded before the search."""
    global _controller
    if _controller is None and ThreadpoolController is not None:
        with _controller_lock:
            if _controller is None:
                import scipy.linalg  # noqa: F401  (loads scipy's BLAS/LAPACK)
                _controller = ThreadpoolController()
    return _controller


def blas_threads(n_threads: int):
    """Context in which BLAS/LAPACK calls use at most ``n_threads`` threads.

    Small dense problems (k q-metrics' q x d metrics, 256-row distance blocks) lose
    to OpenBLAS's one spinning thread per core: a 256 x 256 eigendecomposition took
    1.0 s instead of 4 ms on a loaded 2-core machine.  Without ``threadpoolctl`` the
    BLAS default stands."""
    controller = _blas_controller()
    if controller is None:
        return contextlib.nullcontext()
    return controller.limit(limits=int(n_threads), user_api="blas")


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


def blas_for_training(n_threads: int):
    """Context for a whole training (or a search) with ``-m n_threads``: BLAS on one
    thread when lcoding runs its own threads (``n_threads > 1``), else BLAS's default.

    One BLAS thread inside lcoding's thread pools is not enough: OpenBLAS's workers
    keep spinning for about 0.1 s after every threaded call, and a threaded call
    *between* the pools (a solver's dual objective over 50 000 rows, the previous
    training's last steps) left them on the core the next pool needed.  Measured
    without ``OPENBLAS_NUM_THREADS=1``, back-to-back ``-m 2`` trainings of ijcnn1's
    LL-SVM ``-s 1 -L 2 -A 100 -k 8``: 0.215-0.220 s a training, 0.169-0.187 s under
    this context.  The k q-metrics' large dense steps ask for ``n_threads`` BLAS
    threads inside it (a nested limit)."""
    return blas_threads(1) if int(n_threads) > 1 else contextlib.nullcontext()


CODE_BLOCK = 256   # rows per distance block; thread ranges start at multiples of it


def split_ranges(n: int, parts: int, align: int = CODE_BLOCK):
    """``parts`` contiguous row ranges whose starts are multiples of ``align``, so
    the distance blocks (and their rounding) do not depend on the thread count."""
    n_blocks = -(-n // align)
    parts = max(1, min(parts, n_blocks))
    bounds = [min(n, align * (n_blocks * i // parts)) for i in range(parts + 1)]
    bounds[-1] = n
    return [(bounds[i], bounds[i + 1]) for i in range(parts) if bounds[i + 1] > bounds[i]]


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the platform tells
    (a container or ``taskset`` may allow fewer than the machine has), else the
    machine's count.  For timing choices only (how long a thread spins before it
    yields), never for a result."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# ------------------------------------------------------------------ Ctrl-C
# Python runs signal handlers in the main thread only, between bytecodes.  Training
# runs in a worker thread (:func:`run_interruptible`) or in pools of them
# (:func:`map_threads`) while the main thread waits; a KeyboardInterrupt there sets
# the stop request below, which every pass loop checks between passes
# (:func:`check_stop`) and the long kernels read between blocks of rows
# (:data:`STOP_FLAG`), so training stops within a pass instead of finishing the
# solves already running.

class TrainingInterrupted(KeyboardInterrupt):
    """Raised in lcoding's worker threads when the main thread got KeyboardInterrupt
    (Ctrl-C); the main thread re-raises its own KeyboardInterrupt."""


_stop = threading.Event()
# The same request for the kernels: a uint8[::1] they read between blocks of rows
# (``stop[0] != 0``: return early; the caller then raises through check_stop).
STOP_FLAG = np.zeros(1, dtype=np.uint8)
_lock = threading.Lock()
_busy_workers = 0          # lcoding worker threads still running (guarded by _lock)


def stop_requested() -> bool:
    """Whether Ctrl-C asked the training under way to stop."""
    return _stop.is_set()


class DeadlinePassed(Exception):
    """Raised by :func:`check_stop` in work run under :func:`deadline` once its time
    is spent (:func:`lcoding.select.select`'s trials: a budget is kept, not overrun by
    whatever trial was under way when it ran out).  Not a KeyboardInterrupt: the
    caller that set the deadline catches it and drops the half-done work."""


# the perf_counter() time at which work in this context stops (DeadlinePassed); a
# context variable, so the worker threads of map_threads / ThreadTeam / run_
# interruptible (they copy the caller's context) keep it, and other work does not
_deadline: contextvars.ContextVar = contextvars.ContextVar("lcoding_deadline",
                                                          default=math.inf)


@contextlib.contextmanager
def deadline(at: float):
    """Context in which :func:`check_stop` raises :class:`DeadlinePassed` once
    ``time.perf_counter()`` passes ``at`` (nested deadlines: the earliest holds).  The
    pass loops and chunked kernels check between passes and chunks, so work stops
    within one of them; a long kernel between two checks (a kernel map's landmark
    work) finishes first."""
    token = _deadline.set(min(float(at), _deadline.get()))
    try:
        yield
    finally:
        _deadline.reset(token)


def check_stop() -> None:
    """Raise :class:`TrainingInterrupted` when Ctrl-C asked training to stop, and
    :class:`DeadlinePassed` when the :func:`deadline` of the work under way has passed
    (called by the pass loops between passes; costs an attribute lookup and a context
    variable, and a clock read under a deadline: ~0.1 us)."""
    if _stop.is_set():
        raise TrainingInterrupted("training stopped by KeyboardInterrupt in the main thread")
    at = _deadline.get()
    if at != math.inf and time.perf_counter() > at:
        raise DeadlinePassed("the time set aside for this work is spent")


def _request_stop() -> bool:
    """Set the stop request; True when this call set it (the caller then clears it)."""
    with _lock:
        if _stop.is_set():
            return False
        _stop.set()             # first: a kernel that sees the flag returns to a check
        STOP_FLAG[0] = 1        # that raises
        return True


def _clear_stop() -> None:
    with _lock:
        STOP_FLAG[0] = 0
        _stop.clear()


def _forget_stale_stop() -> None:
    """A stop request left set by an interrupted wait (a second Ctrl-C) is cleared
    once its workers are gone, before new work starts in the main thread."""
    with _lock:
        if _stop.is_set() and _busy_workers == 0:
            _stop.clear()
            STOP_FLAG[0] = 0


def _in_worker(context, fn, *args):
    """``fn(*args)`` in the caller's context (numpy's errstate lives there), counted
    as a busy worker."""
    global _busy_workers
    with _lock:
        _busy_workers += 1
    try:
        return context.run(fn, *args)
    finally:
        with _lock:
            _busy_workers -= 1


def _wait_all(pool: ThreadPoolExecutor, futures) -> list:
    """Results of ``futures`` in order.  On KeyboardInterrupt in the main thread (or a
    worker's TrainingInterrupted): request the stop, drop the items not started, wait
    for the running ones (they stop at their next check) and re-raise; on any other
    error, drop the items not started and re-raise."""
    main = threading.current_thread() is threading.main_thread()
    try:
        return [future.result() for future in futures]
    except KeyboardInterrupt:
        owner = main and _request_stop()
        pool.shutdown(wait=True, cancel_futures=True)
        if owner:
            _clear_stop()
        raise
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)


def map_threads(fn, items, n_threads: int) -> list:
    """``[fn(item) for item in items]``, in at most ``n_threads`` threads when there is
    more than one item (the kernels release the GIL); results in the items' order.

    Ctrl-C (in the main thread, or a stop request) stops the items under way at their
    next check and skips the others; KeyboardInterrupt is raised."""
    items = list(items)
    if n_threads > 1 and len(items) > 1:
        if threading.current_thread() is threading.main_thread():
            _forget_stale_stop()
        pool = ThreadPoolExecutor(max_workers=min(n_threads, len(items)),
                                  thread_name_prefix="lcoding")
        futures = [pool.submit(_in_worker, contextvars.copy_context(), fn, item)
                   for item in items]
        return _wait_all(pool, futures)
    results = []
    for item in items:
        check_stop()
        results.append(fn(item))
    return results


def run_interruptible(fn, *args):
    """``fn(*args)``, run in a worker thread when called from the main thread, so that
    the main thread stays free to take Ctrl-C: a KeyboardInterrupt then sets the stop
    request, waits for the worker to stop at its next check (the pass loops and long
    kernels check between passes and blocks of rows) and is re-raised.  From any other
    thread ``fn`` runs in place."""
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    _forget_stale_stop()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lcoding-train")
    future = pool.submit(_in_worker, contextvars.copy_context(), fn, *args)
    return _wait_all(pool, [future])[0]


# rows per kernel call of run_ranges: a multiple of CODE_BLOCK, small enough that one
# call (coding MNIST-size rows against 200 anchors) returns well within 0.1 s
RANGE_CHUNK = 16 * CODE_BLOCK


def run_ranges(work, n: int, n_threads: int, team: "ThreadTeam | None" = None) -> None:
    """``work((start, stop))`` over the :func:`split_ranges` of ``n`` rows, in
    ``n_threads`` threads (the kernels release the GIL) -- those of ``team`` when
    given (many short steps: no thread start per call).  Each thread's range is
    worked in chunks of at most :data:`RANGE_CHUNK` rows (chunk starts stay multiples
    of ``CODE_BLOCK``, so the results do not change) with a stop check between them."""
    def chunked(rng):
        a, b = rng
        for start in range(a, b, RANGE_CHUNK):
            check_stop()
            work((start, min(b, start + RANGE_CHUNK)))

    if team is not None:
        team.map(chunked, split_ranges(n, team.n_threads))
    else:
        map_threads(chunked, split_ranges(n, n_threads), n_threads)


class ThreadTeam:
    """``n_threads`` threads kept for the many short parallel steps of one phase
    (k-means steps, the seeding's distance updates, CoCoA+ rounds): the first item
    of every :meth:`map` runs in the calling thread, the others in ``n_threads - 1``
    pool threads started once.  A pool per step costs a thread start and join each
    time -- 2 ms of a 7 ms k-means assignment of ijcnn1 on 2 cores.

    Ctrl-C as in :func:`map_threads`: the items under way stop at their next check
    (the stop request is set when the interrupt reaches the main thread) and
    KeyboardInterrupt (TrainingInterrupted in a worker thread) is raised."""

    def __init__(self, n_threads: int):
        self.n_threads = max(1, int(n_threads))
        self.pool = None
        if self.n_threads > 1:
            if threading.current_thread() is threading.main_thread():
                _forget_stale_stop()
            self.pool = ThreadPoolExecutor(max_workers=self.n_threads - 1,
                                           thread_name_prefix="lcoding-team")

    def map(self, fn, items) -> list:
        """``[fn(item) for item in items]`` (at most ``n_threads`` items at once), in
        the items' order."""
        items = list(items)
        if self.pool is None or len(items) <= 1:
            results = []
            for item in items:
                check_stop()
                results.append(fn(item))
            return results
        ctx = contextvars.copy_context
        futures = [self.pool.submit(_in_worker, ctx(), fn, item) for item in items[1:]]
        main = threading.current_thread() is threading.main_thread()
        try:
            first = fn(items[0])
            return [first] + [f.result() for f in futures]
        except KeyboardInterrupt:
            owner = main and _request_stop()
            for f in futures:           # they stop at their next check
                try:
                    f.result()
                except BaseException:   # noqa: BLE001 - the interrupt is re-raised
                    pass
            if owner:
                _clear_stop()
            raise
        except BaseException:
            for f in futures:
                f.cancel()
            for f in futures:           # none may still write into the caller's arrays
                try:
                    f.result()
                except BaseException:   # noqa: BLE001 - the first error is re-raised
                    pass
            raise

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def __enter__(self) -> "ThreadTeam":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
