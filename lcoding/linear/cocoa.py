"""CoCoA+: one binary dual-CD problem (``-s 1``, ``-s 3``) on several cores.

Ma, Smith, Jaggi, Jordan, Richtarik, Takac, *Adding vs. averaging in distributed
primal-dual optimization* (ICML 2015).  The rows (linear, or coded by a local
coding) are split into ``K`` fixed partitions.  A *round*:

1. every partition starts from the current ``W`` and runs LIBLINEAR's dual-CD pass
   (:func:`lcoding.linear._dual_cd.dual_cd_pass`) over its own rows on the local
   subproblem with ``sigma' = K`` (the kernel's header gives the math: the
   partition's working copy moves ``sigma'`` times its update ``u_k``, the
   curvature of its coordinates is ``sigma' ||z_i||^2 + D_ii``);
2. the driver adds the updates, ``W <- W + sum_k u_k`` (gamma = 1, "adding"), in
   partition order;
3. LIBLINEAR's stopping rule runs on the projected gradients of all rows -- the
   largest and smallest over the partitions' passes -- with LIBLINEAR's shrinking
   thresholds shared by all partitions and its unshrink-and-check before stopping;
   the rounds are capped by ``params.max_iter`` as LIBLINEAR caps its passes.

Partitions and their sample orders are drawn from the problem's own solver stream,
so the result depends on ``-S`` and the number of partitions (``-m``) only, not on
thread timing.  With one partition and ``sigma' = 1`` the round is LIBLINEAR's pass.

The same pieces serve two drivers: threads over one in-memory problem
(:func:`solve_l2r_l1l2_svc_cocoa`, ``-m N`` on a binary problem) and Dask tasks over
data partitions held by workers (:mod:`lcoding.dask`), which call
:func:`partition_pass` on their own rows and return ``u_k``.

In memory the threads can do better than CoCoA+'s rounds: they meet every
:data:`BLOCK_ROWS` rows instead of once per pass, inside one kernel call
(:func:`lcoding.linear._dual_cd.dual_cd_block_pass`, a spin barrier between blocks),
add their steps unscaled (``sigma' = 1``) and damp a merge only when the added steps
would raise the dual objective.  Its sweeps converge in the passes of the sequential
solver, where CoCoA+ needs 2-3x more on wide codings (ijcnn1 with the MNIST LL-SVM
options: 8 passes against 22 rounds).  The blocks are used when merging ``W`` costs
less than a block's work (:func:`use_blocks`); the rounds, partitions, streams and
stopping rule are the same, so the result still depends on ``-S`` and ``-m`` only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lcoding.core.messages import Messages
from lcoding.core.options import SolverType, TrainParams
from lcoding.core._predict import linear_decision_values
from lcoding.core.seeds import PURPOSE_COCOA, rng_state
from lcoding.core.threads import (STOP_FLAG, ThreadTeam, TrainingInterrupted, check_stop,
                                  map_threads, single_threaded_blas, split_ranges,
                                  usable_cores)
from lcoding.linear import _dual_cd
from lcoding.linear.dual_cd import (STALL_PASSES, StallWatch, at_iteration_cap,
                                    continue_l2loss, dual_start)
from lcoding.linear.newton import train_l2r_l2loss_svc
from lcoding.linear.problem import BinaryProblem, SolveResult, coded_nonzeros_bound
from lcoding.linear.solvers import BINARY_SOLVERS, METHOD_BINARY_SOLVERS
from lcoding.local._knn import local_decision_values

INF = float("inf")
# CoCoA+ hands a coded -s 1 problem to the primal Newton solver when W has stopped
# moving while the duality gap is still above this many times its tolerance (close
# to it, CoCoA+'s next rounds are cheaper: ijcnn1's LL-SVM, gap 1.8e-3 against 1e-3,
# stops 4 rounds later; skin's, gap 0.11 at its first check, ran to the 300-round cap)
NEWTON_FINISH_GAP = 10.0
# ... and the Newton steps' tolerance, a factor on LIBLINEAR's primal tolerance: the
# primal objective within 1e-3 of the optimum, as CoCoA+'s own gap rule certifies
# (skin: 6e-4 above the -m 1 objective; LIBLINEAR's 0.1 of its -s 1 -> -s 2 switch
# left 2.5 %)
NEWTON_FINISH_TOL = 0.001
# the block-synchronous sweep (module doc): rows per thread between two merges.  With
# 64 or 128 its sweeps need the sequential solver's passes (ijcnn1 with -k 8 and with
# the MNIST options, skin: the same passes to LIBLINEAR's rule, within one pass to
# every tolerance); at 256 ijcnn1's -k 8 LL-SVM needed 12 passes instead of 9.  128
# halves the merges, whose cost is mostly w crossing between the cores: ijcnn1 with
# the MNIST options, -m 2 against -m 1 over 21 paired trainings, 1.54x at 64 and
# 1.61x at 128; its -k 8 LL-SVM 1.78x and 1.83x; skin 1.92x and 1.85x
BLOCK_ROWS = 128
# ... and at most 1/BLOCKS_PER_PASS of a thread's rows, at least MIN_BLOCK_ROWS: on a
# small problem a 128-row block is most of a pass, the threads see each other's steps
# about once per pass, and large-C problems stall (-C on 333 banana rows per fold,
# C = 128: CV rate 0.75 against 0.87 at -m 1)
BLOCKS_PER_PASS = 16
MIN_BLOCK_ROWS = 8
# reads of the block barrier before a waiting thread yields its core (_barrier.pxd):
# with a core per thread, spin (a block is tens of microseconds); with more threads
# than cores, yield almost at once (ijcnn1's MNIST-options LL-SVM on 2 cores, -m 16:
# 1.63 s spinning, 1.03 s yielding, 0.88-1.40 s by CoCoA+'s rounds).  Timing only:
# the merges are the same.
BARRIER_SPINS = 4000
BARRIER_SPINS_OVERSUBSCRIBED = 20
# a problem with fewer coded non-zeros than this is solved by the sequential solver
# even at -m N: its passes take microseconds, and thread hand-offs cost more than
# they share out (-m 2 against -m 1, whole trainings: banana's linear -s 1, 11 000
# non-zeros, 0.21x; its -L 2 -k 8 LL-SVM, 85 000, 0.67x; magic04's linear, 139 000,
# 1.0-1.3x; its -L 2 -k 4 LL-SVM, 560 000, 1.2x; ijcnn1's linear, 700 000, 1.4-1.7x).
# A rule on the problem, never the machine: the same -S and -m, the same model
PARALLEL_MIN_NONZEROS = 200_000


# ------------------------------------------------------------- shared pieces
def loss_terms(C: np.ndarray, loss: str):
    """``(D_ii, U_i)`` of LIBLINEAR's dual for per-row costs ``C``: L2 loss
    ``(1 / (2 C), inf)``, L1 loss ``(0, C)``."""
    C = np.asarray(C, dtype=np.float64)
    if loss == "l2":
        with np.errstate(divide="ignore"):      # a class weight of 0: inf, as in LIBLINEAR
            return 0.5 / C, np.full(C.shape[0], np.inf)
    if loss == "l1":
        return np.zeros(C.shape[0]), C.copy()
    raise ValueError(f"unknown loss {loss!r}")


def row_sqnorms(rows, bias: float, shared_bias: float, anchor_idx, coding_weight) -> np.ndarray:
    """``||z_i||^2`` of the (coded) rows, by the dual-CD kernel."""
    out = np.empty(rows.n_rows)
    _dual_cd.coded_row_sqnorms(rows.data, rows.indices, rows.indptr, rows.n_features, bias,
                               anchor_idx, coding_weight, out, shared_bias)
    return out


def subproblem_qd(sqnorm: np.ndarray, diag: np.ndarray, sigma: float) -> np.ndarray:
    """Curvature of the local subproblem's coordinates, ``sigma ||z_i||^2 + D_ii``
    (``||z_i||^2 + D_ii`` exactly when ``sigma = 1``)."""
    return sigma * sqnorm + diag if sigma != 1.0 else sqnorm + diag


def padded(length: int) -> int:
    """A row length for per-thread arrays: ``length`` rounded up to whole 64-byte
    lines of doubles, plus one line, so that no line holds two threads' entries
    whatever the array's alignment."""
    return ((length + 7) // 8 + 1) * 8


def block_rows(n: int, n_parts: int) -> int:
    """Rows per thread between two merges of the block-synchronous sweep:
    :data:`BLOCK_ROWS`, or fewer so that a thread's pass has
    :data:`BLOCKS_PER_PASS` blocks (0: too few rows for blocks)."""
    rows = min(BLOCK_ROWS, n // (max(1, n_parts) * BLOCKS_PER_PASS))
    return rows if rows >= MIN_BLOCK_ROWS else 0


def use_blocks(prob: BinaryProblem, n_parts: int) -> bool:
    """Whether the ``n_parts`` threads of one in-memory problem use the
    block-synchronous sweep (module doc) rather than CoCoA+'s rounds: when a merge,
    ``n_parts + 2`` passes over ``W``, costs at most a block's work, its
    :func:`block_rows` coded rows' dot product and update (a linear or LL-SVM model on
    few features; a wide ``W`` over sparse rows -- w8a's 200 anchors x 301 features
    -- keeps the rounds).  The choice depends on the problem and ``n_parts`` only,
    never on the machine, so the same ``-S`` and ``-m`` give the same model
    anywhere.  (More threads than cores slow both schemes, the blocks less, as their
    waiting threads then yield at once (:data:`BARRIER_SPINS_OVERSUBSCRIBED`):
    ijcnn1's LL-SVM with the MNIST options on 2 cores, ``-m 2 / 3 / 4 / 8 / 16``:
    0.16 / 0.20 / 0.20 / 0.34 / 1.03 s by blocks, 0.25 / 0.41 / 0.50 / 1.23 / 1.40 s
    by rounds.)"""
    n = prob.rows.n_rows
    rows = block_rows(n, n_parts)
    if n_parts <= 1 or rows == 0:
        return False
    mean_nonzeros = coded_nonzeros_bound(prob) / n       # (no pass over the coding)
    return (n_parts + 2) * prob.w_size <= 2 * rows * mean_nonzeros


def partition_stream(solver_state: np.ndarray, k: int) -> np.ndarray:
    """The sample-order stream of partition ``k`` of a problem whose solver stream
    is ``solver_state`` (the same in the thread and the Dask drivers)."""
    return rng_state(int(solver_state[0]), PURPOSE_COCOA, k + 1)


def split_rows(n: int, n_parts: int, solver_state: np.ndarray) -> list:
    """``n_parts`` fixed, balanced partitions of ``range(n)`` (int32 row ids, sorted):
    a seeded permutation cut into contiguous pieces, so sorted data (rows grouped
    by label) does not give one partition one class."""
    rng = np.random.Generator(np.random.PCG64(int(rng_state(int(solver_state[0]),
                                                            PURPOSE_COCOA, 0)[0])))
    perm = rng.permutation(n)
    bounds = [n * k // n_parts for k in range(n_parts + 1)]
    return [np.sort(perm[bounds[k]:bounds[k + 1]]).astype(np.int32)
            for k in range(n_parts)]


@dataclass
class PartState:
    """What a partition keeps between rounds: its rows in visiting order (the
    active set first), the size of the active set and its sample-order stream."""
    index: np.ndarray           # int32 row ids (into the arrays the pass sees)
    active_size: int
    rng_state: np.ndarray       # uint64[1]

    @classmethod
    def fresh(cls, index: np.ndarray, stream: np.ndarray) -> "PartState":
        index = np.ascontiguousarray(index, dtype=np.int32)
        return cls(index, index.shape[0], np.array(stream, dtype=np.uint64).reshape(1))

    def copy(self) -> "PartState":
        return PartState(self.index.copy(), self.active_size, self.rng_state.copy())

    @property
    def n_rows(self) -> int:
        return self.index.shape[0]


def partition_pass(rows, bias: float, shared_bias: float, anchor_idx, coding_weight,
                   y: np.ndarray, QD: np.ndarray, diag: np.ndarray, upper: np.ndarray,
                   alpha: np.ndarray, W_work: np.ndarray, state: PartState,
                   PGmax_old: float, PGmin_old: float, sigma: float):
    """One local pass of the CoCoA+ subproblem over ``state.index`` (in place on
    ``alpha``, ``W_work``, ``state``); returns ``(PGmax, PGmin)`` of the pass.
    ``QD`` is :func:`subproblem_qd` of the same ``sigma``."""
    if state.n_rows == 0:
        return -INF, INF
    active, PGmax, PGmin = _dual_cd.dual_cd_pass(
        rows.data, rows.indices, rows.indptr, rows.n_features, bias, anchor_idx,
        coding_weight, y, QD, diag, upper, alpha, W_work, state.index, state.active_size,
        PGmax_old, PGmin_old, state.rng_state, shared_bias, sigma, stop=STOP_FLAG)
    check_stop()            # Ctrl-C: the pass may have ended early
    state.active_size = int(active)
    return PGmax, PGmin


class StopRule:
    """LIBLINEAR's stopping rule and shrinking thresholds, on the projected
    gradients of all partitions of one problem, round by round -- and, with more
    than one partition, a duality-gap check once ``W`` has stopped moving.

    Why the second rule: CoCoA+'s dual variables converge slowly in the directions
    that shift weight between partitions without changing ``W`` much (similar rows
    in different partitions: there the local curvature ``sigma' Q_kk`` dwarfs the
    true one).  The projected gradients, which include ``D alpha``, can then stall
    above ``eps`` while ``W`` -- the model -- is converged.  So once
    ``||sum_k u_k|| <= w_tol ||W||`` (``w_tol = W_TOL_PER_EPS * eps``) in
    ``PATIENCE`` consecutive rounds, the driver computes the duality gap
    ``P(W) - D(alpha)`` (one pass of decision values over the rows) and the rounds
    stop when it is at most ``gap_tol P(W)`` (``gap_tol = GAP_TOL_PER_EPS * eps``):
    the model's primal objective is then certified within that fraction of the
    optimum.  Otherwise the rounds go on and the next check waits twice as many
    rounds as the last (``PATIENCE``, 2 ``PATIENCE``, 4 ``PATIENCE``, ...: the
    checks cost at most a few passes in all).

    LIBLINEAR's rule met on all rows still stops, though with partitions the
    passes' projected gradients are taken at the partitions' working copies of
    ``W``: on one MNIST LL-SVM problem (2 partitions) it stopped with ``P(W)``
    0.25 % above the optimum, gap 3.9e-3 (``docs/scale.md``).  Asking for the gap
    there instead made small problems whose dual variables lag run to the cap.

    ``stall_passes`` (None: never): stop with the reason ``"stalled"`` when the
    projected-gradient spread has not halved in that many rounds and is above
    ``STALL_GAPS * eps`` -- the sequential dual CD's rule
    (:class:`lcoding.linear.dual_cd.StallWatch`), counted in rounds."""

    W_TOL_PER_EPS = 0.1
    GAP_TOL_PER_EPS = 0.01
    PATIENCE = 2

    def __init__(self, eps: float, max_iter: int, w_tol: float | None = None,
                 gap_tol: float | None = None, stall_passes: int | None = None):
        self.eps = float(eps)
        self.max_iter = int(max_iter)
        self.stall = StallWatch(stall_passes) if stall_passes else None
        self.gap = INF              # the last round's projected-gradient spread
        self.w_tol = w_tol
        self.gap_tol = gap_tol if gap_tol is not None or w_tol is None \
            else self.GAP_TOL_PER_EPS * self.eps
        self.PGmax_old, self.PGmin_old = INF, -INF
        self.rounds = 0
        self.done = False
        self.unshrink = False       # the next round runs on all rows
        self.unshrinks = 0
        self.still = 0              # consecutive rounds with W (nearly) unchanged
        self.wait = self.PATIENCE   # such rounds before the next gap check
        self.gaps = []              # relative duality gaps computed
        self.reason = ""

    @classmethod
    def for_partitions(cls, eps: float, max_iter: int, n_parts: int,
                       stall_passes: int | None = None) -> "StopRule":
        """LIBLINEAR's rule alone for one partition; with the gap check for more."""
        return cls(eps, max_iter, None if n_parts == 1 else cls.W_TOL_PER_EPS * eps,
                   stall_passes=stall_passes)

    def update(self, PGmax: float, PGmin: float, all_active: bool,
               w_change: float = INF) -> str:
        """After a round (``w_change`` = ``||sum_k u_k|| / ||W||``): ``"stop"``,
        ``"unshrink"`` (converged on the active rows: check all rows next),
        ``"gap"`` (compute the duality gap and call :meth:`gap_checked`) or
        ``"continue"``."""
        self.rounds += 1
        self.gap = PGmax - PGmin
        eps = self.eps
        self.unshrink = False
        converged = PGmax - PGmin <= eps and abs(PGmax) <= eps and abs(PGmin) <= eps
        if converged and all_active:
            return self.stop("projected gradient")
        if self.rounds >= self.max_iter:        # LIBLINEAR's cap counts every pass
            return self.stop("iteration cap")
        if converged:
            self.unshrink = True
            self.unshrinks += 1
            self.PGmax_old, self.PGmin_old = INF, -INF
            return "unshrink"
        if self.stall is not None and self.stall.stalled(self.gap, self.rounds, eps):
            return self.stop("stalled")
        self.PGmax_old = PGmax if PGmax > 0 else INF
        self.PGmin_old = PGmin if PGmin < 0 else -INF
        if self.w_tol is not None:
            self.still = self.still + 1 if w_change <= self.w_tol else 0
            if self.still >= self.wait:
                return "gap"
        return "continue"

    def gap_checked(self, primal: float, dual: float) -> str:
        """The duality gap at the current ``(W, alpha)``: ``primal`` = P(W),
        ``dual`` = LIBLINEAR's dual objective (``-D``).  ``"stop"`` or ``"continue"``."""
        gap = (primal + dual) / max(abs(primal), 1e-300)
        self.gaps.append(gap)
        self.still = 0
        if gap <= self.gap_tol:
            return self.stop(f"duality gap {gap:.1e}")
        self.wait *= 2
        return "continue"

    def stop(self, reason: str) -> str:
        """End the rounds for ``reason`` (the rule's own, or the driver's: its hand-over
        of a lagging coded problem to the Newton solver)."""
        self.done = True
        self.reason = reason
        return "stop"


def decision_values(rows, bias: float, shared_bias: float, anchor_idx, coding_weight,
                    W: np.ndarray, n_main: int, n_threads: int = 1) -> np.ndarray:
    """``<W, z_i>`` of every (coded) row, by the prediction kernels: ``W[:n_main]``
    the anchor-major weights, ``W[-1]`` the shared bias weight when
    ``shared_bias >= 0``.  Row ranges in ``n_threads`` threads."""
    n = rows.n_rows
    out = np.empty((n, 1))
    Wm = np.ascontiguousarray(W[:n_main]).reshape(-1, 1)

    def work(rng):
        a, b = rng
        if anchor_idx.shape[0] == 0:
            p0, p1 = int(rows.indptr[a]), int(rows.indptr[b])
            linear_decision_values(rows.data[p0:p1], rows.indices[p0:p1],
                                   np.ascontiguousarray(rows.indptr[a:b + 1] - p0), Wm,
                                   rows.n_features, bias, out[a:b])
        else:
            local_decision_values(rows.data, rows.indices, rows.indptr, anchor_idx,
                                  coding_weight, Wm, rows.n_features, bias, out, a, b)

    if n:
        map_threads(work, split_ranges(n, max(1, n_threads)), n_threads)
    values = out[:, 0]
    if shared_bias >= 0:
        values += W[-1] * shared_bias
    return values


def loss_sum(values: np.ndarray, y: np.ndarray, C: np.ndarray, loss: str) -> float:
    """``sum_i C_i loss(y_i f_i)``: squared hinge (``"l2"``) or hinge (``"l1"``)."""
    m = np.maximum(0.0, 1.0 - y * values)
    return float(np.dot(C, m * m if loss == "l2" else m))


def w_change(W: np.ndarray, step: np.ndarray) -> float:
    """``||step|| / ||W||`` (inf while ``W`` is 0)."""
    nw = float(np.linalg.norm(W))
    return float(np.linalg.norm(step)) / nw if nw > 0 else INF


def add_updates(W: np.ndarray, updates) -> None:
    """``W += u_0 + u_1 + ...`` in the given (partition) order, in place."""
    for u in updates:
        W += u


def dual_objective(W: np.ndarray, alpha: np.ndarray, diag: np.ndarray) -> float:
    """LIBLINEAR's printed objective of the dual, ``(W.W + alpha.(D alpha - 2)) / 2``,
    with ``alpha_i^2 D_ii = 0`` where ``alpha_i = 0``: rows of a class weight 0 have
    ``D_ii = inf`` and stay at 0 (LIBLINEAR's 0 * inf would make the duality gap NaN
    and the gap check fail for good)."""
    with np.errstate(invalid="ignore"):
        value = 0.5 * (float(W @ W) + float(np.dot(alpha, alpha * diag - 2.0)))
    if np.isfinite(value) or np.isfinite(diag).all():
        return value
    moving = alpha != 0.0
    return 0.5 * (float(W @ W) + float(np.dot(alpha[moving], alpha[moving] * diag[moving] - 2.0)))


# ------------------------------------------------------------ thread driver
def solve_l2r_l1l2_svc_cocoa(prob: BinaryProblem, params: TrainParams, info: Messages,
                             loss: str, n_parts: int, max_iter: int | None = None,
                             init_alpha: np.ndarray | None = None,
                             newton_finish: bool = True,
                             stall_passes: int | None = None) -> SolveResult:
    """:func:`lcoding.linear.dual_cd.solve_l2r_l1l2_svc` over ``n_parts`` row
    partitions, one thread each, by the block-synchronous sweep or CoCoA+'s rounds
    (module doc); ``init_alpha`` as there (a warm start).  Its ``alpha`` is None
    when the primal Newton steps finished the solve; ``newton_finish=False`` keeps
    the dual steps to the end (a path of warm starts needs every ``alpha``, and
    writing the coded rows out for each of its points would cost more than it
    saves: ``-C`` on 20 000 ijcnn1 rows, 777 solves, 35.5 s with the hand-off)."""
    rows = prob.rows
    n = rows.n_rows
    K = max(1, min(int(n_parts), n))
    sigma = float(K)                   # sigma' = gamma K with gamma = 1
    y = np.ascontiguousarray(prob.y, dtype=np.int8)
    diag, upper = loss_terms(prob.per_row_C(), loss)
    anchor_idx, coding_weight = prob.coding_arrays()
    bias, shared_bias = prob.kernel_bias
    sqnorm = row_sqnorms(rows, bias, shared_bias, anchor_idx, coding_weight)
    W = np.zeros(prob.w_size)
    alpha = dual_start(prob, y, upper, init_alpha, W)
    blocks = use_blocks(prob, K)
    # the threads' own steps unscaled in the blocks (module doc)
    QD = subproblem_qd(sqnorm, diag, 1.0 if blocks else sigma)
    if K == 1:
        # one partition is LIBLINEAR's solver: its rows in order, the problem's own
        # stream, the pass straight on W
        parts = [PartState(np.arange(n, dtype=np.int32), n, prob.rng_state)]
        work = [W]
    else:
        parts = [PartState.fresh(ids, partition_stream(prob.rng_state, k))
                 for k, ids in enumerate(split_rows(n, K, prob.rng_state))]
        work = [] if blocks else [np.empty_like(W) for _ in range(K)]
    rule = StopRule.for_partitions(params.resolved_eps(),
                                   params.max_iter if max_iter is None else max_iter, K,
                                   stall_passes)
    C = prob.per_row_C()
    n_main = W.shape[0] - (1 if prob.shared_bias else 0)
    B = block_rows(n, K) if blocks else 0
    info(f"block-synchronous dual CD: {K} threads, {B} rows per block\n" if blocks
         else f"CoCoA+: {K} partitions\n")
    if blocks:
        # every array a thread writes is its own or padded by a cache line beyond its
        # part (the kernel's doc): W's copies, the dual variables (one copy per thread,
        # each holding that thread's rows), the scratch and the block statistics
        w_size = W.shape[0]
        W_local = np.zeros((K, 2, padded(w_size)))
        W_local[:, 0, :w_size] = W      # parity 0 holds the start (0, or a warm start)
        W_base = np.zeros((K, padded(w_size)))
        W_base[:, :w_size] = W
        alphas = np.zeros((K, padded(n)))
        for k in range(K):
            alphas[k, parts[k].index] = alpha[parts[k].index]
        block_stats = np.zeros((2, K, 16))
        moved_rows = np.zeros((K, padded(B)), dtype=np.int32)
        moved_alpha_old = np.zeros((K, padded(B)))
        barrier = np.zeros(2, dtype=np.int64)
        team_state = {"parity": 0, "damped": 0}
        spins = BARRIER_SPINS if K <= usable_cores() else BARRIER_SPINS_OVERSUBSCRIBED
    # a coded -s 1 problem: when W has stopped moving but the duality gap says the dual
    # lags (the StopRule doc), the primal Newton solver finishes from W with its
    # products in the same threads (a few steps; CoCoA+'s rounds there only shift
    # weight between the partitions' dual variables)
    newton_finish = newton_finish and K > 1 and loss == "l2" and prob.coding is not None

    def gather_alpha():
        """The threads' dual variables into ``alpha`` (each copy holds its rows; done
        for a duality gap and at the end, not after every pass)."""
        for k in range(K):
            alpha[parts[k].index] = alphas[k, parts[k].index]

    def local_blocks(k):
        out = _dual_cd.dual_cd_block_pass(
            rows.data, rows.indices, rows.indptr, rows.n_features, bias, anchor_idx,
            coding_weight, y, QD, diag, upper, alphas[k], W_local, W_base, w_size,
            block_stats, moved_rows[k], moved_alpha_old[k], barrier, k, team_state["parity"],
            B, parts[k].index, parts[k].active_size, rule.PGmax_old,
            rule.PGmin_old, parts[k].rng_state, shared_bias, stop=STOP_FLAG,
            barrier_spins=spins)
        active, PGmax, PGmin, parity, _, damped, stopped = out
        check_stop()            # Ctrl-C: the sweep ended early
        if stopped:             # (the flag is set after the request: never reached)
            raise TrainingInterrupted("training stopped by KeyboardInterrupt")
        parts[k].active_size = int(active)
        return PGmax, PGmin, parity, damped

    def local(k):
        if blocks:
            return local_blocks(k)
        if work[k] is not W:
            np.copyto(work[k], W)
        return partition_pass(rows, bias, shared_bias, anchor_idx, coding_weight, y, QD,
                              diag, upper, alpha, work[k], parts[k], rule.PGmax_old,
                              rule.PGmin_old, sigma)

    # the partitions' passes run in -m threads, started once for all rounds (a round
    # of a small problem is a millisecond; Ctrl-C stops them); BLAS on
    # one thread: the driver's vector sums are small, and a threaded BLAS's workers
    # keep spinning after each call, taking the core a partition's pass needs
    # (ijcnn1 LL-SVM, 300 rounds: 1.02 s -> 0.69-0.74 s on 2 cores)
    with ThreadTeam(K) as team, single_threaded_blas():
        while not rule.done:
            if rule.unshrink:
                for part in parts:
                    part.active_size = part.n_rows
            pgs = team.map(local, range(K))
            change = INF
            if blocks:
                # every thread holds the merged W, after the same number of merges
                if len({pg[2] for pg in pgs}) != 1:
                    raise RuntimeError("block-synchronous dual CD: the threads' sweeps "
                                       "ended after different numbers of blocks")
                team_state["parity"] = pgs[0][2]
                team_state["damped"] += pgs[0][3]
                change = w_change(W_base[0, :w_size], W_base[0, :w_size] - W)
                np.copyto(W, W_base[0, :w_size])
            elif K > 1:
                # u_k = (W~_k - W) / sigma', added in partition order
                updates = [(work[k] - W) / sigma for k in range(K)]
                step = np.sum(updates, axis=0)
                add_updates(W, updates)
                change = w_change(W, step)
            action = rule.update(max(pg[0] for pg in pgs), min(pg[1] for pg in pgs),
                                 all(p.active_size == p.n_rows for p in parts), change)
            if action == "gap":
                if blocks:
                    gather_alpha()
                f = decision_values(rows, bias, shared_bias, anchor_idx, coding_weight, W,
                                    n_main, K)
                primal = 0.5 * float(W @ W) + loss_sum(f, y, C, loss)
                action = rule.gap_checked(primal, dual_objective(W, alpha, diag))
                if action == "continue" and newton_finish and \
                        rule.gaps[-1] > NEWTON_FINISH_GAP * rule.gap_tol:
                    rule.stop(f"duality gap {rule.gaps[-1]:.1e} with W still: Newton")
                    break
            if rule.rounds % 10 == 0:
                info(".")
            if action == "unshrink":
                info("*")
    it = rule.rounds
    extra = {"partitions": K, "stop": rule.reason, "blocks": blocks, "gap": rule.gap}
    if blocks:
        gather_alpha()
        extra["damped merges"] = team_state["damped"]
        info(f"\nblock-synchronous dual CD stopped: {rule.reason} "
             f"({team_state['damped']} damped merges)")
    elif K > 1:
        info(f"\nCoCoA+ stopped: {rule.reason}")
    info(f"\noptimization finished, #iter = {it}\n")
    if rule.reason.endswith(": Newton"):
        info("Continuing with -s 2 (the primal Newton solver on the coded rows) from W\n")
        res = train_l2r_l2loss_svc(prob, params, info, tol_scale=NEWTON_FINISH_TOL, init_w=W,
                                   n_threads=K)
        return SolveResult(res.w, it + res.n_iter, res.objective, None, extra=extra)
    objective = dual_objective(W, alpha, diag)
    info(f"Objective value = {objective:f}\n")
    info(f"nSV = {int(np.count_nonzero(alpha > 0))}\n")
    return SolveResult(W, it, objective, alpha, extra=extra)


def train_l2loss_svc_cocoa(prob: BinaryProblem, params: TrainParams, info: Messages,
                           n_parts: int, newton_when_stalled: bool = False) -> SolveResult:
    """``-s 1`` on ``n_parts`` cores; at the round cap as LIBLINEAR's ``-s 1``: the
    primal Newton ``-s 2`` continues (a coded one with its products on the coded rows
    in ``n_parts`` threads; :func:`~lcoding.linear.dual_cd.at_iteration_cap`).
    ``newton_when_stalled``: the methods' rule -- Newton takes over as soon as the
    rounds stall (:data:`~lcoding.linear.dual_cd.STALL_PASSES`), as in
    :func:`~lcoding.linear.dual_cd.train_l2loss_svc_dual_switching`."""
    res = solve_l2r_l1l2_svc_cocoa(prob, params, info, "l2", n_parts,
                                   stall_passes=STALL_PASSES if newton_when_stalled else None)
    return continue_l2loss(prob, params, info, res, "rounds",
                           n_parts if prob.coding is not None else 1)


def train_l1loss_svc_cocoa(prob: BinaryProblem, params: TrainParams, info: Messages,
                           n_parts: int) -> SolveResult:
    """``-s 3`` on ``n_parts`` cores (warnings at the round cap as LIBLINEAR's)."""
    res = solve_l2r_l1l2_svc_cocoa(prob, params, info, "l1", n_parts)
    if res.extra["stop"] == "iteration cap":
        return at_iteration_cap(prob, params, info, res, "l1")
    return res


# -s -> the CoCoA+ form of the binary solver, ``solver(prob, params, info, n_parts)``
COCOA_SOLVERS = {int(SolverType.L2R_L2LOSS_SVC_DUAL): train_l2loss_svc_cocoa,
                 int(SolverType.L2R_L1LOSS_SVC_DUAL): train_l1loss_svc_cocoa}


def worth_threads(prob: BinaryProblem) -> bool:
    """Whether one binary problem is big enough to split its rows over threads
    (:data:`PARALLEL_MIN_NONZEROS`)."""
    return coded_nonzeros_bound(prob) >= PARALLEL_MIN_NONZEROS


def parallel_binary_solver(solver_type: int, n_jobs: int, n_threads: int,
                           newton_when_stalled: bool = False):
    """The solver a method should use for its binary problems: the ``n_threads``-thread
    form (block-synchronous or CoCoA+) when there is exactly one binary problem of
    ``-s 1`` or ``-s 3`` and more than one thread (else None: keep the sequential
    solver and run the problems in threads).  A problem below
    :data:`PARALLEL_MIN_NONZEROS` gets the sequential solver, the ``-m 1`` model.
    ``newton_when_stalled``: ``-s 1`` hands a stalled solve over to Newton, as the
    methods' sequential ``-s 1`` does (:data:`METHOD_BINARY_SOLVERS`)."""
    if n_jobs != 1 or n_threads <= 1 or int(solver_type) not in COCOA_SOLVERS:
        return None
    solver = COCOA_SOLVERS[int(solver_type)]
    table = METHOD_BINARY_SOLVERS if newton_when_stalled else BINARY_SOLVERS
    sequential = table[int(solver_type)]     # -m 1's solver
    extra = {"newton_when_stalled": True} if newton_when_stalled and \
        int(solver_type) == int(SolverType.L2R_L2LOSS_SVC_DUAL) else {}

    def solve(prob, params, info):
        if not worth_threads(prob):
            return sequential(prob, params, info)
        return solver(prob, params, info, n_threads, **extra)
    return solve
