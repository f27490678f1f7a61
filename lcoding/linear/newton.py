"""LIBLINEAR's primal Newton solvers (-s 0, 2, 11) and the dual logistic
regression solver (-s 7), registered into the solver tables on import.

Primal (``_newton.ErmObjective`` does the O(nnz) work):

* -s 0  L2R_LR          min 1/2 w'w + sum C_i log(1 + exp(-y_i w'x_i))
* -s 2  L2R_L2LOSS_SVC  min 1/2 w'w + sum C_i max(0, 1 - y_i w'x_i)^2
* -s 11 L2R_L2LOSS_SVR  min 1/2 w'w + sum C max(0, |w'x_i - y_i| - p)^2

solved by LIBLINEAR 2.50's truncated Newton method (newton.cpp): a preconditioned
conjugate-gradient direction, stopped by the quadratic-model rule of Galli & Lin
(IEEE TNNLS 2021), then a backtracking line search (Armijo, eta = 0.01, at most 20
halvings).  Newton stops when ``|g(w)| <= tol * |g(0)|`` with
``tol = eps * max(min(#pos, #neg), 1) / l`` for classification and ``tol = eps``
for regression, times ``tol_scale`` (the dual solvers' fallbacks pass 0.1 or
0.001, as LIBLINEAR's ``train_one`` does).  ``-R`` leaves the bias coordinate
(the last one, ``-B 1`` required) out of the regulariser.

Dual (``_dual_lr.lr_dual_cd_pass`` does one sweep): -s 7, Yu, Huang & Lin (MLJ
2011); after ``params.max_iter`` (300) outer iterations it switches to -s 0 from
the dual's w with the primal tolerance times 0.1, as LIBLINEAR does.

Every solver here takes ``(prob, params, info, *, tol_scale=1.0, init_w=None)``;
``init_w`` warm-starts the primal solvers (LIBLINEAR's ``init_sol``, used by the
``-C`` search of :mod:`lcoding.linear.param_search`).  The primal solvers train plain
linear models only; -s 7 also runs on a local coding (without the -s 0 fallback).
Printed progress text is LIBLINEAR's, character for character.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import xlogy

from lcoding.linear import _dual_cd, _dual_lr, _newton
from lcoding.core.options import SolverType, TrainParams
from lcoding.linear.problem import BinaryProblem, Coding, SolveResult
from lcoding.core.messages import Messages
from lcoding.core.threads import ThreadTeam, check_stop, single_threaded_blas

# newton.cpp's constants
NEWTON_MAX_ITER = 1000
CG_EPS = 0.5                  # eps_cg: CG stops once the quadratic model's relative
                              # decrease per step falls below min(CG_EPS, sqrt(|g|_M^-1))
PRECONDITIONER_BLEND = 0.01   # M = (1 - a) I + a diag(H)
ARMIJO_ETA = 0.01
MAX_LINE_SEARCH = 20

# subsample_start: -s 2 on coded rows of at least this many rows first solves a tenth
# of them (at least a quarter of this many) at a tolerance this many times looser
SUBSAMPLE_START_MIN_ROWS = 20000
SUBSAMPLE_START_TOL_SCALE = 10.0

# solve_l2r_lr_dual's constants
LR_DUAL_INNER_EPS = 1e-2      # first inner Newton tolerance, shrunk 10x per quiet sweep
LR_DUAL_INNER_EPS_MIN = 1e-8


def primal_tolerance(prob: BinaryProblem, params: TrainParams, regression: bool,
                     tol_scale: float = 1.0) -> float:
    """LIBLINEAR's ``primal_solver_tol``: the factor on ``|g(0)|`` that stops Newton."""
    eps = params.resolved_eps()
    if regression:
        return eps * tol_scale
    n = prob.rows.n_rows
    pos = int(np.count_nonzero(np.asarray(prob.y) > 0))
    neg = n - pos
    return eps * max(min(pos, neg), 1) / max(n, 1) * tol_scale


def _require_linear(prob: BinaryProblem, solver_type: int) -> BinaryProblem:
    """The problem the Newton solver runs on: a linear one, or a coded ``-s 2`` one
    (the objective reads its coded rows in place, :func:`_objective_for`: the same
    objective as on the rows ``z_i`` written out, ``w`` = the coded ``W``); other
    coded problems are refused."""
    if prob.coding is None and not prob.shared_bias:
        return prob
    if solver_type == int(SolverType.L2R_L2LOSS_SVC):
        return prob
    raise ValueError(
        f"-s {solver_type} ({SolverType(solver_type).name}): the primal Newton solver trains "
        f"plain linear models and -s 2 on coded rows only; use a dual or SGD solver with a "
        f"local coding")


def _objective_for(prob: BinaryProblem, params: TrainParams, loss: int,
                   n_parts: int = 1) -> list:
    """The problem's objective as ``n_parts`` :class:`ErmObjective` of consecutive row
    ranges (one: the whole problem)."""
    rows = prob.rows
    if loss == _newton.LOSS_SQUARED_EPS_INSENSITIVE:
        # regression has one C for every row (LIBLINEAR: param->C), carried as Cp
        y = np.ascontiguousarray(prob.y, dtype=np.float64)
        C = np.full(rows.n_rows, float(prob.Cp)) if prob.sample_C is None \
            else np.ascontiguousarray(prob.sample_C, dtype=np.float64)
    else:
        y = np.where(np.asarray(prob.y) > 0, 1.0, -1.0)
        C = np.ascontiguousarray(prob.per_row_C(), dtype=np.float64)
    bias = float(prob.bias)
    coding = {}
    if prob.coding is not None or prob.shared_bias:
        # coded rows, read in place: never written out (ijcnn1's LL-SVM at the
        # defaults: 18 M coded non-zeros, 220 MB and 0.1-0.3 s to write, and the
        # products 1.7x slower on them)
        anchor_idx, coding_weight = prob.coding_arrays()
        if not anchor_idx.shape[0]:
            # no coding (a shared bias only): the one-anchor coding gamma = [1]
            anchor_idx = np.zeros((rows.n_rows, 1), dtype=np.int32)
            coding_weight = np.ones((rows.n_rows, 1))
        bias, shared_bias = prob.kernel_bias
        if prob.shared_bias and shared_bias < 0:
            # a shared-bias problem without -B keeps the slot (w_size), a value of 0:
            # its weight stays 0
            shared_bias = 0.0
        coding = {"anchor_idx": anchor_idx, "coding_weight": coding_weight,
                  "n_anchors": prob.n_anchors, "shared_bias": float(shared_bias)}
    bounds = [rows.n_rows * k // n_parts for k in range(n_parts + 1)]
    parts = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        p0, p1 = int(rows.indptr[a]), int(rows.indptr[b])
        indptr = rows.indptr if n_parts == 1 else np.ascontiguousarray(rows.indptr[a:b + 1] - p0)
        own = coding if not coding or n_parts == 1 else dict(
            coding, anchor_idx=coding["anchor_idx"][a:b], coding_weight=coding["coding_weight"][a:b])
        parts.append(_newton.ErmObjective(
            rows.data[p0:p1], rows.indices[p0:p1], indptr, rows.n_features,
            float(bias), y[a:b], C[a:b], loss, float(params.p),
            bool(params.regularize_bias), **own))
    return parts


# rows per thread below which -m does not split one problem's objective
SPLIT_MIN_ROWS = 2048


class SplitObjective:
    """One problem's objective as the sum of its row ranges' :class:`ErmObjective`,
    each range's products run in a thread of ``team`` (``-m N`` on one binary
    problem; the kernels release the GIL).  Every range's objective carries the
    regulariser; the sum counts it once by taking it out ``K - 1`` times.  The
    ranges and the order of the sums are fixed by ``K``: the same model for the same
    ``-m``, as multi-core LIBLINEAR's ``-m`` splits its ``-s 2`` products."""

    def __init__(self, parts: list, team, regularize_bias: bool):
        self.parts = parts
        self.team = team
        self.extra = len(parts) - 1
        self.n_vars = parts[0].n_vars
        self.n_rows = sum(p.n_rows for p in parts)
        self.regularize_bias = regularize_bias
        self._buffers = [np.empty(self.n_vars) for _ in parts]

    @property
    def wTw(self) -> float:
        return self.parts[0].wTw

    def _regulariser(self, v: np.ndarray) -> np.ndarray:
        out = np.array(v, dtype=np.float64, copy=True)
        if not self.regularize_bias and out.size:
            out[-1] = 0.0
        return out

    def _summed(self, method, *args) -> np.ndarray:
        """``out = sum_k part_k.method(*args, buffer_k)``, in part order (into ``args[-1]``)."""
        *inputs, out = args
        bufs = self._buffers
        self.team.map(lambda k: getattr(self.parts[k], method)(*inputs, bufs[k]),
                      range(len(bufs)))
        out[:] = bufs[0]
        for b in bufs[1:]:
            out += b
        return out

    def value(self, w) -> float:
        return sum(self.team.map(lambda p: p.value(w), self.parts)) \
            - self.extra * 0.5 * self.parts[0].wTw

    def gradient(self, w, g) -> None:
        self._summed("gradient", w, g)
        g -= self.extra * self._regulariser(w)

    def hessian_vector(self, s, out) -> None:
        self._summed("hessian_vector", s, out)
        out -= self.extra * self._regulariser(s)

    def diag_preconditioner(self, M) -> None:
        self._summed("diag_preconditioner", M)
        M -= self.extra * self._regulariser(np.ones(self.n_vars))

    def set_direction(self, s) -> None:
        self.team.map(lambda p: p.set_direction(s), self.parts)

    def loss_at_step(self, alpha: float) -> float:
        return sum(self.team.map(lambda p: p.loss_at_step(alpha), self.parts))

    def take_step(self, alpha: float, new_wTw: float) -> None:
        self.team.map(lambda p: p.take_step(alpha, new_wTw), self.parts)


def _preconditioned_cg(fun: _newton.ErmObjective, g: np.ndarray, M: np.ndarray,
                       s: np.ndarray, info: Messages) -> int:
    """Approximately solve H s = -g by CG preconditioned with ``M``; returns the
    number of CG steps.  Stops on the relative decrease of the quadratic model
    Q(s) = g's + s'Hs/2 (newton.cpp's ``pcg``)."""
    n = g.shape[0]
    s[:] = 0.0
    r = -g
    z = r / M
    d = z.copy()
    Hd = np.empty(n)
    zTr = float(z @ r)
    cgtol = min(CG_EPS, math.sqrt(math.sqrt(zTr)))
    Q = 0.0
    cg_iter = 0
    max_cg_iter = max(n, 5)
    while cg_iter < max_cg_iter:
        check_stop()
        cg_iter += 1
        fun.hessian_vector(d, Hd)
        dHd = float(d @ Hd)
        if dHd <= 1.0e-16:        # d is (numerically) a zero-curvature direction
            break
        step = zTr / dHd
        s += step * d
        r -= step * Hd
        new_Q = -0.5 * (float(s @ r) - float(s @ g))
        Q_diff = new_Q - Q
        if new_Q <= 0 and Q_diff <= 0:
            if cg_iter * Q_diff >= cgtol * new_Q:
                break
        else:
            info("WARNING: quadratic approximation > 0 or increasing in CG\n")
            break
        Q = new_Q
        np.divide(r, M, out=z)
        new_zTr = float(z @ r)
        d *= new_zTr / zTr
        d += z
        zTr = new_zTr
    if cg_iter == max_cg_iter:
        info("WARNING: reaching maximal number of CG steps\n")
    return cg_iter


def _line_search(fun: _newton.ErmObjective, w: np.ndarray, s: np.ndarray, f: float,
                 g: np.ndarray, regularize_bias: bool) -> tuple[float, float]:
    """Backtracking from step 1 until the Armijo condition holds; updates ``w``
    in place and returns ``(step, f_new)`` (step 0: failed, w unchanged)."""
    fun.set_direction(s)
    sTs = float(s @ s)
    wTs = float(w @ s)
    gTs = float(g @ s)
    if not regularize_bias:      # the bias is not in the regulariser
        sTs -= s[-1] * s[-1]
        wTs -= s[-1] * w[-1]
    wTw = fun.wTw
    alpha = 1.0
    for _ in range(MAX_LINE_SEARCH):
        f_new = fun.loss_at_step(alpha) + (alpha * alpha * sTs + wTw) / 2.0 + alpha * wTs
        if f_new - f <= ARMIJO_ETA * alpha * gTs:
            fun.take_step(alpha, wTw + (alpha * alpha * sTs + 2.0 * alpha * wTs))
            w += alpha * s
            return alpha, f_new
        alpha *= 0.5
    return 0.0, f


def newton(fun: _newton.ErmObjective, w: np.ndarray, eps: float, info: Messages,
           regularize_bias: bool, max_iter: int = NEWTON_MAX_ITER) -> tuple[float, int]:
    """Minimise ``fun`` from ``w`` (updated in place) until ``|g| <= eps |g(0)|``.
    Returns ``(f, number of Newton steps taken)``."""
    n = w.shape[0]
    g = np.empty(n)
    if np.any(w):
        # the stopping rule is relative to the gradient at w = 0
        fun.value(np.zeros(n))
        fun.gradient(np.zeros(n), g)
        gnorm0 = float(np.linalg.norm(g))
    f = fun.value(w)
    fun.gradient(w, g)
    gnorm = float(np.linalg.norm(g))
    if not np.any(w):
        gnorm0 = gnorm
    info("init f %5.3e |g| %5.3e\n" % (f, gnorm))

    s = np.empty(n)
    M = np.empty(n)
    it = 1               # newton.cpp's counter: the number of the step under way
    steps = 0
    search = not gnorm <= eps * gnorm0
    while it <= max_iter and search:
        check_stop()
        fun.diag_preconditioner(M)
        M *= PRECONDITIONER_BLEND
        M += 1.0 - PRECONDITIONER_BLEND
        cg_iter = _preconditioned_cg(fun, g, M, s, info)
        f_old = f
        step, f = _line_search(fun, w, s, f, g, regularize_bias)
        if step == 0:
            info("WARNING: line search fails\n")
            break
        steps += 1
        fun.gradient(w, g)
        gnorm = float(np.linalg.norm(g))
        info("iter %2d f %5.3e |g| %5.3e CG %3d step_size %4.2e \n"
             % (it, f, gnorm, cg_iter, step))
        if gnorm <= eps * gnorm0:
            break
        if f < -1.0e+32:
            info("WARNING: f < -1.0e+32\n")
            break
        if abs(f_old - f) <= 1.0e-12 * abs(f):
            info("WARNING: actred too small\n")
            break
        it += 1
    if it >= max_iter:
        info("\nWARNING: reaching max number of Newton iterations\n")
    return f, steps


def subsample_start(prob: BinaryProblem, params: TrainParams, info: Messages,
                    n_threads: int = 1) -> np.ndarray | None:
    """A starting point for ``-s 2`` on coded rows: the Newton solution on a random
    tenth of the rows, their costs scaled by ``n / m`` (the same objective in
    expectation), at a ten times looser tolerance.  ``None`` below
    ``SUBSAMPLE_START_MIN_ROWS`` rows, and for plain linear problems (which stay
    LIBLINEAR's, step for step).

    Why: from ``w = 0`` every row is inside the margin, so the first Newton steps
    multiply the Hessian over all rows; from the subsample's solution only the few
    rows near the boundary are active.  ijcnn1's LL-SVM at ``LocallyLinearSVC()``'s
    defaults (200 anchors, k 16), 3-fold CV: 1.74 -> 1.33 s, CV error 1.515 ->
    1.510 %, for the same stopping rule ``|g| <= eps |g(0)|``.  The sample is drawn
    from the problem's own seed."""
    n = prob.rows.n_rows
    if prob.coding is None or n < SUBSAMPLE_START_MIN_ROWS:
        return None
    m = max(SUBSAMPLE_START_MIN_ROWS // 4, n // 10)
    rng = np.random.default_rng(np.asarray(prob.rng_state, dtype=np.uint64))
    ids = np.sort(rng.choice(n, m, replace=False))
    y = np.asarray(prob.y)[ids]
    if np.all(y > 0) or np.all(y <= 0):
        return None
    coding = prob.coding
    sub = BinaryProblem(prob.rows.take(ids), y, prob.Cp, prob.Cn, prob.bias, prob.rng_state,
                        coding=Coding(coding.anchor_idx[ids], coding.coding_weight[ids],
                                      coding.n_anchors),
                        sample_C=prob.per_row_C()[ids] * (n / m), shared_bias=prob.shared_bias)
    info(f"Newton start on {m} of {n} rows\n")
    return _solve_primal(sub, params, info, _newton.LOSS_SQUARED_HINGE, 2,
                         SUBSAMPLE_START_TOL_SCALE, None, n_threads, subsample=False).w


def _solve_primal(prob: BinaryProblem, params: TrainParams, info: Messages, loss: int,
                  solver_type: int, tol_scale: float, init_w, n_threads: int = 1,
                  subsample: bool = True) -> SolveResult:
    prob = _require_linear(prob, solver_type)
    regression = loss == _newton.LOSS_SQUARED_EPS_INSENSITIVE
    if subsample and init_w is None and loss == _newton.LOSS_SQUARED_HINGE:
        init_w = subsample_start(prob, params, info, n_threads)
    n_threads = max(1, min(int(n_threads), prob.rows.n_rows // SPLIT_MIN_ROWS))
    if n_threads > 1 and not regression:
        with ThreadTeam(n_threads) as team, single_threaded_blas():
            fun = SplitObjective(_objective_for(prob, params, loss, n_threads), team,
                                 bool(params.regularize_bias))
            return _newton_solve(prob, params, info, fun, regression, tol_scale, init_w)
    return _newton_solve(prob, params, info, _objective_for(prob, params, loss)[0], regression,
                         tol_scale, init_w)


def _newton_solve(prob, params, info, fun, regression, tol_scale, init_w) -> SolveResult:
    w = np.zeros(prob.w_size)
    if init_w is not None:
        init_w = np.asarray(init_w, dtype=np.float64).reshape(-1)
        if init_w.shape[0] != w.shape[0]:
            raise ValueError(f"init_w has {init_w.shape[0]} values, the model has {w.shape[0]}")
        w[:] = init_w
    eps = primal_tolerance(prob, params, regression, tol_scale)
    f, it = newton(fun, w, eps, info, bool(params.regularize_bias))
    return SolveResult(w, it, f)


def train_l2r_lr(prob, params, info, *, tol_scale=1.0, init_w=None) -> SolveResult:
    """-s 0: L2-regularised logistic regression, primal Newton."""
    return _solve_primal(prob, params, info, _newton.LOSS_LOGISTIC, 0, tol_scale, init_w)


def train_l2r_l2loss_svc(prob, params, info, *, tol_scale=1.0, init_w=None,
                         n_threads: int = 1) -> SolveResult:
    """-s 2: L2-regularised squared-hinge SVM, primal Newton; ``n_threads`` > 1 splits
    the rows' products over threads (:class:`SplitObjective`; one problem at a time)."""
    return _solve_primal(prob, params, info, _newton.LOSS_SQUARED_HINGE, 2, tol_scale, init_w,
                         n_threads)


def squared_hinge_dual_point(prob: BinaryProblem, params: TrainParams,
                             w: np.ndarray) -> np.ndarray:
    """The ``-s 1`` dual point of a primal ``w`` of the squared hinge (``-s 2``):
    ``alpha_i = 2 C_i max(0, 1 - y_i w . z_i)``, the KKT condition of the L2-loss
    SVM's dual (LIBLINEAR's ``D_ii = 1 / (2 C_i)``), exact at the optimum, feasible
    (>= 0) anywhere.  One product over the (coded) rows.  ``-C``'s path warm-starts
    the next C's dual CD from it after a Newton hand-over."""
    fun = _objective_for(prob, params, _newton.LOSS_SQUARED_HINGE)[0]
    fun.value(np.ascontiguousarray(w, dtype=np.float64))
    t = np.empty(prob.rows.n_rows)
    fun.margins(t)
    y = np.where(np.asarray(prob.y) > 0, 1.0, -1.0)
    return 2.0 * prob.per_row_C() * np.maximum(0.0, 1.0 - y * t)


def train_l2r_l2loss_svr(prob, params, info, *, tol_scale=1.0, init_w=None) -> SolveResult:
    """-s 11: L2-regularised squared epsilon-insensitive SVR, primal Newton."""
    return _solve_primal(prob, params, info, _newton.LOSS_SQUARED_EPS_INSENSITIVE, 11,
                         tol_scale, init_w)


def solve_l2r_lr_dual(prob: BinaryProblem, params: TrainParams, info: Messages,
                      max_iter: int | None = None) -> SolveResult:
    """Dual CD for L2-regularised logistic regression (no fallback).  Stops when
    the largest sub-problem gradient of a sweep is below ``eps``, or after
    ``max_iter`` sweeps; ``n_iter`` is the number of sweeps."""
    rows = prob.rows
    n = rows.n_rows
    y = np.ascontiguousarray(prob.y, dtype=np.int8)
    C = np.ascontiguousarray(prob.per_row_C(), dtype=np.float64)
    eps = params.resolved_eps()
    max_iter = params.max_iter if max_iter is None else max_iter
    anchor_idx, coding_weight = prob.coding_arrays()

    # start strictly inside (0, C): the entropy terms have infinite slope at the bounds
    alpha = np.empty(2 * n)
    alpha[0::2] = np.minimum(0.001 * C, 1e-8)
    alpha[1::2] = C - alpha[0::2]
    W = np.zeros(prob.n_anchors * prob.stride)
    _dual_lr.accumulate_rows(rows.data, rows.indices, rows.indptr, rows.n_features, prob.bias,
                             anchor_idx, coding_weight, y * alpha[0::2], W)
    sqnorm = np.empty(n)
    _dual_cd.coded_row_sqnorms(rows.data, rows.indices, rows.indptr, rows.n_features,
                               prob.bias, anchor_idx, coding_weight, sqnorm)
    index = np.arange(n, dtype=np.int64)

    inner_eps = LR_DUAL_INNER_EPS
    inner_eps_min = min(LR_DUAL_INNER_EPS_MIN, eps)
    it = 0
    while it < max_iter:
        check_stop()
        Gmax, newton_steps = _dual_lr.lr_dual_cd_pass(
            rows.data, rows.indices, rows.indptr, rows.n_features, prob.bias,
            anchor_idx, coding_weight, y, C, sqnorm, alpha, W, index, inner_eps,
            prob.rng_state)
        it += 1
        if it % 10 == 0:
            info(".")
        if Gmax < eps:
            break
        # the sub-problems were cheap: solve them more accurately from now on
        if newton_steps <= n // 10:
            inner_eps = max(inner_eps_min, 0.1 * inner_eps)
    info("\noptimization finished, #iter = %d\n" % it)

    a, rest = alpha[0::2], alpha[1::2]
    objective = 0.5 * float(W @ W) + float(np.sum(xlogy(a, a) + xlogy(rest, rest) - xlogy(C, C)))
    info("Objective value = %f\n" % objective)
    return SolveResult(W, it, objective, alpha=a.copy())


def train_l2r_lr_dual(prob, params, info, *, tol_scale=1.0, init_w=None) -> SolveResult:
    """-s 7, with LIBLINEAR's switch to -s 0 after ``params.max_iter`` sweeps.
    (``init_w`` is accepted for the common signature; the dual starts from its own
    feasible point, as LIBLINEAR's does.)"""
    res = solve_l2r_lr_dual(prob, params, info)
    if res.n_iter < params.max_iter:
        return res
    if prob.coding is not None:
        info("\nWARNING: reaching max number of iterations\n\n")
        return res
    info("\nWARNING: reaching max number of iterations\nSwitching to use -s 0\n\n")
    # the tolerance derived from the dual's eps may be too loose for the primal
    return train_l2r_lr(prob, params, info, tol_scale=0.1 * tol_scale, init_w=res.w)
