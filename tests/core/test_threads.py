"""Ctrl-C with threads: the stop request of lcoding.core.threads."""
from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest

from lcoding.core import threads
from lcoding.core.threads import (STOP_FLAG, DeadlinePassed, TrainingInterrupted, check_stop,
                                  deadline, map_threads,
                                  run_interruptible, run_ranges, stop_requested)
from lcoding.linear import _dual_cd


def busy(seconds_limit=5.0, outcomes=None, stop=TrainingInterrupted):
    """A work item that runs until stopped (or the limit): a pass loop's shape.
    ``outcomes`` gets "stopped" or "finished" for every item that started; ``stop``:
    the exception check_stop() raises that counts as stopped."""
    outcomes = [] if outcomes is None else outcomes

    def work(_):
        start = time.perf_counter()
        while time.perf_counter() - start < seconds_limit:
            try:
                check_stop()
            except stop:
                outcomes.append("stopped")
                raise
            time.sleep(0.005)
        outcomes.append("finished")
        return "finished"
    return work


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """Every test here with Python's own SIGINT handler (KeyboardInterrupt): a shell
    starts background jobs (``cmd &``, nohup) with SIGINT ignored, Python then installs
    no handler, and the Ctrl-C tests below would wait for an interrupt that never
    comes."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def interrupt_main_after(delay):
    """A real SIGINT to the main thread after ``delay`` seconds (as Ctrl-C delivers it:
    it interrupts the main thread's wait; _thread.interrupt_main would not)."""
    main = threading.main_thread().ident
    timer = threading.Timer(delay, signal.pthread_kill, (main, signal.SIGINT))
    timer.start()
    return timer


@pytest.mark.parametrize("n_threads", [1, 2, 4])
def test_keyboard_interrupt_stops_running_workers(n_threads):
    """The main thread's KeyboardInterrupt stops the items already running in worker
    threads at their next check (before: they finished first)."""
    timer = interrupt_main_after(0.2)
    outcomes = []
    with pytest.raises(KeyboardInterrupt):
        run_interruptible(map_threads, busy(outcomes=outcomes), range(6), n_threads)
    timer.join()
    # every item that started stopped at a check: none ran to its 5 s end
    assert outcomes and set(outcomes) == {"stopped"}
    assert not stop_requested() and STOP_FLAG[0] == 0     # cleared for the next run
    assert threads._busy_workers == 0
    assert map_threads(lambda i: i * i, range(4), n_threads) == [0, 1, 4, 9]


def test_map_threads_in_the_main_thread_stops_its_pool():
    timer = interrupt_main_after(0.2)
    outcomes = []
    with pytest.raises(KeyboardInterrupt):
        map_threads(busy(outcomes=outcomes), range(4), 2)
    timer.join()
    assert outcomes and set(outcomes) == {"stopped"}
    assert not stop_requested()


def test_run_ranges_checks_between_chunks():
    calls = []

    def work(rng):
        calls.append(rng)
        if len(calls) == 2:
            threads._request_stop()

    try:
        with pytest.raises(TrainingInterrupted):
            run_ranges(work, 10 * threads.RANGE_CHUNK, 1)
    finally:
        threads._clear_stop()
    assert len(calls) == 2
    assert calls[0] == (0, threads.RANGE_CHUNK)


def test_run_ranges_chunks_cover_the_rows_once():
    seen = np.zeros(3 * threads.RANGE_CHUNK + 17, dtype=int)

    def work(rng):
        seen[rng[0]:rng[1]] += 1

    run_ranges(work, seen.size, 3)
    assert (seen == 1).all()


def test_errors_other_than_interrupts_pass_through_and_skip_the_rest():
    started = []

    def work(i):
        started.append(i)
        if i == 0:
            raise ValueError("bad item")
        time.sleep(0.05)
        return i

    with pytest.raises(ValueError, match="bad item"):
        map_threads(work, range(50), 2)
    assert len(started) < 50


def test_worker_sees_the_callers_numpy_errstate():
    def divide(_):
        return np.float64(1.0) / np.float64(0.0)

    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            run_interruptible(divide, None)


def test_kernel_returns_early_on_the_flag():
    """dual_cd_pass reads the flag between rows: with it raised, nothing is done."""
    n = 1000
    rng = np.random.default_rng(0)
    X = rng.random((n, 5))
    data = np.ascontiguousarray(X.ravel())
    indices = np.tile(np.arange(5, dtype=np.int32), n)
    indptr = np.arange(0, 5 * n + 1, 5, dtype=np.int64)
    y = np.where(rng.random(n) > 0.5, 1, -1).astype(np.int8)
    QD = np.einsum("ij,ij->i", X, X) + 0.5
    empty_idx, empty_wt = np.zeros((0, 1), np.int32), np.zeros((0, 1))
    args = lambda W, alpha: (data, indices, indptr, 5, -1.0, empty_idx, empty_wt, y, QD,
                             np.full(n, 0.5), np.full(n, np.inf), alpha, W,
                             np.arange(n, dtype=np.int32), n, np.inf, -np.inf,
                             np.array([1], dtype=np.uint64))
    W, alpha = np.zeros(5), np.zeros(n)
    _dual_cd.dual_cd_pass(*args(W, alpha), stop=np.ones(1, dtype=np.uint8))
    assert not W.any() and not alpha.any()
    _dual_cd.dual_cd_pass(*args(W, alpha), stop=np.zeros(1, dtype=np.uint8))
    assert W.any()


def test_thread_team_maps_in_order_and_runs_the_first_item_in_the_caller():
    caller = threading.get_ident()
    with threads.ThreadTeam(3) as team:
        for _ in range(3):          # the same threads serve every step
            seen = team.map(lambda i: (i * i, threading.get_ident()), range(3))
            assert [v for v, _ in seen] == [0, 1, 4]
            assert seen[0][1] == caller and seen[1][1] != caller
        assert team.map(lambda i: i + 1, [41]) == [42]    # one item: in the caller
    assert team.pool is None


def test_thread_team_passes_a_workers_error_on_after_the_others_finish():
    done = []

    def work(i):
        if i == 1:
            raise ValueError("item 1 failed")
        time.sleep(0.05)
        done.append(i)
        return i

    with threads.ThreadTeam(3) as team:
        with pytest.raises(ValueError, match="item 1"):
            team.map(work, range(3))
        assert sorted(done) == [0, 2]       # nothing still writes after the raise
        assert team.map(lambda i: -i, range(2)) == [0, -1]


@pytest.mark.parametrize("n_threads", [1, 2])
def test_thread_team_stops_on_keyboard_interrupt(n_threads):
    timer = interrupt_main_after(0.2)
    outcomes = []

    def steps():
        with threads.ThreadTeam(n_threads) as team:
            while True:
                team.map(busy(outcomes=outcomes), range(n_threads))

    with pytest.raises(KeyboardInterrupt):
        run_interruptible(steps)
    timer.join()
    assert outcomes and set(outcomes) == {"stopped"}
    assert not stop_requested() and STOP_FLAG[0] == 0
    assert threads._busy_workers == 0


class _BlasThreadsSeen:
    """A Messages stream that records BLAS's thread limit whenever training writes."""

    def __init__(self, controller):
        self.controller = controller
        self.seen = set()

    def write(self, text):
        for lib in self.controller.info():
            if lib["user_api"] == "blas":
                self.seen.add(lib["num_threads"])

    def flush(self):
        pass


@pytest.mark.parametrize("n_threads", [1, 2])
def test_training_with_threads_runs_blas_on_one_thread(n_threads):
    """-m N > 1: the whole training runs with one BLAS thread (threads.blas_for_training:
    OpenBLAS's spinning workers would take the cores lcoding's threads need); -m 1
    leaves BLAS's own count."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from lcoding.core.messages import Messages
    from lcoding.core.options import parse_train_options
    from lcoding.core.rows import as_rows
    from lcoding.training import train_model
    controller = threads._blas_controller()

    def blas_threads_now():
        return {lib["num_threads"] for lib in controller.info() if lib["user_api"] == "blas"}

    if not blas_threads_now():
        pytest.skip("no BLAS library found by threadpoolctl")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1.0, -1.0)
    stream = _BlasThreadsSeen(controller)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads_now()
        train_model(y, as_rows(X), parse_train_options(f"-s 1 -L 2 -A 8 -k 3 -m {n_threads}"),
                    Messages(False, stream))
        assert blas_threads_now() == before          # restored after training
    assert stream.seen == ({1} if n_threads > 1 else before)


def test_usable_cores_counts_the_affinity(monkeypatch):
    import os
    n = threads.usable_cores()
    assert 1 <= n <= (os.cpu_count() or n)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert threads.usable_cores() == 3

    def no_affinity(pid):
        raise OSError("not here")
    monkeypatch.setattr(os, "sched_getaffinity", no_affinity, raising=False)
    assert threads.usable_cores() == max(1, os.cpu_count() or 1)


@pytest.mark.slow
def test_block_sweeps_give_the_same_model_whatever_the_barrier_spins(monkeypatch):
    """The barrier's spin count (spin long with a core per thread, yield at once when
    oversubscribed) changes timing only: -m 2 and -m 3 models are equal bit for bit
    either way."""
    import scipy.sparse as sp

    from lcoding.core.options import parse_train_options
    from lcoding.core.rows import rows_from_sparse
    from lcoding.linear import cocoa
    from lcoding.linear.problem import BinaryProblem, Coding
    from lcoding.training import train_model
    rng = np.random.default_rng(0)
    X = sp.random(3000, 12, density=0.6, random_state=2, format="csr")
    y = np.where(X @ rng.standard_normal(12) > 0.2, 1.0, 2.0)
    rows = rows_from_sparse(X)
    monkeypatch.setattr(cocoa, "PARALLEL_MIN_NONZEROS", 0)     # 98 000 non-zeros: small
    for m in (2, 3):
        options = parse_train_options(f"-s 1 -L 2 -A 20 -k 4 -u 1 -c 1 -B 1 -m {m} -q")
        models = []
        for spins in (0, 100000):
            monkeypatch.setattr(cocoa, "BARRIER_SPINS", spins)
            monkeypatch.setattr(cocoa, "BARRIER_SPINS_OVERSUBSCRIBED", spins)
            models.append(train_model(y, rows, options))
        assert np.array_equal(models[0].w, models[1].w)
    assert cocoa.use_blocks(BinaryProblem(rows, np.ones(3000, np.int8), 1.0, 1.0, 1.0,
                                          np.zeros(1, np.uint64), coding=Coding(
                                              np.zeros((3000, 4), np.int32),
                                              np.full((3000, 4), 0.25), 20)), 3)


def test_a_deadline_stops_work_at_its_next_check():
    """check_stop raises DeadlinePassed once the deadline of the work under way has
    passed, only inside the deadline's context; nested deadlines keep the earliest."""
    check_stop()
    with deadline(time.perf_counter() + 60.0):
        check_stop()                                    # not yet
        with deadline(time.perf_counter() - 1.0):
            with pytest.raises(DeadlinePassed):
                check_stop()
            with deadline(time.perf_counter() + 60.0):  # a later one does not extend it
                with pytest.raises(DeadlinePassed):
                    check_stop()
        check_stop()                                    # the outer one again
    check_stop()
    assert not issubclass(DeadlinePassed, KeyboardInterrupt)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_a_deadline_reaches_the_worker_threads(n_threads):
    """Work items in map_threads' workers (they copy the caller's context) stop at the
    caller's deadline; threads started outside it do not see it."""
    outcomes = []
    work = busy(5.0, outcomes, stop=DeadlinePassed)
    with deadline(time.perf_counter() + 0.2), pytest.raises(DeadlinePassed):
        map_threads(work, range(2), n_threads)
    # every item that started was stopped, none ran to its end
    assert outcomes and set(outcomes) == {"stopped"}
    seen = []
    with deadline(time.perf_counter() - 1.0):
        thread = threading.Thread(target=lambda: seen.append(threads._deadline.get()))
        thread.start()
        thread.join()
    assert seen == [float("inf")]


def test_a_training_under_a_passed_deadline_stops_and_the_next_one_runs():
    """A real training stops at its first check once its deadline has passed; the
    deadline leaves nothing behind."""
    from lcoding.core.options import parse_train_options
    from lcoding.core.rows import as_rows
    from lcoding.training import train_model
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1.0, -1.0)
    rows = as_rows(X, "x")
    params = parse_train_options("-s 1 -L 2 -A 10 -k 4 -B 1 -q")
    with deadline(time.perf_counter() - 1.0), pytest.raises(DeadlinePassed):
        train_model(y, rows, params)
    model = train_model(y, rows, params)
    assert np.mean(model.predict_labels(rows) == y) > 0.8
