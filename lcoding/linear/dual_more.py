"""Dual solvers beyond binary SVC: epsilon-SVR (-s 12, -s 13), one-class SVM (-s 21)
and Crammer-Singer multi-class SVM (-s 4), with LIBLINEAR's stopping rules, caps,
fallbacks and messages.

Python drives the outer iterations (one kernel call = one pass over the active set)
and owns every stopping decision; the kernels ``_dual_svr``, ``_oneclass`` and
``_mcsvm_cs`` do the per-sample work.  :mod:`lcoding.linear.solvers` lists them
by ``-s`` number.
"""
from __future__ import annotations

import numpy as np

from lcoding.linear import _dual_svr, _dual_cd, _mcsvm_cs, _oneclass
from lcoding.core.rows import Rows
from lcoding.core.options import TrainParams
from lcoding.linear.problem import EMPTY_IDX, EMPTY_WEIGHT, BinaryProblem, Coding, SolveResult
from lcoding.core.messages import Messages
from lcoding.core.threads import STOP_FLAG, check_stop
from lcoding.linear.newton import train_l2r_l2loss_svr

# LIBLINEAR's iteration caps of the solvers that do not use the dual cap (-s 12/13 use
# params.max_iter, LIBLINEAR's dual_solver_max_iter = 300)
ONECLASS_MAX_ITER = 1000
MCSVM_CS_MAX_ITER = 100000


def solve_l2r_l1l2_svr(prob: BinaryProblem, params: TrainParams, info: Messages,
                       loss: str, tol_scale: float = 1.0,
                       max_iter: int | None = None) -> SolveResult:
    """Dual coordinate descent for L2-regularised epsilon-SVR with L1 loss
    (``loss="l1"``, -s 13) or L2 loss (``loss="l2"``, -s 12): LIBLINEAR's
    ``solve_l2r_l1l2_svr``.

    Stops when the 1-norm of the dual violation falls to ``eps`` times its value at
    the first iteration on the full set (after unshrinking), or after ``max_iter``
    outer iterations.  ``prob.y`` holds the float targets.
    """
    rows = prob.rows
    n = rows.n_rows
    y = np.ascontiguousarray(prob.y, dtype=np.float64)
    C = prob.sample_C if prob.sample_C is not None else np.full(n, float(prob.Cp))
    C = np.ascontiguousarray(C, dtype=np.float64)
    if loss == "l2":
        lam = 0.5 / C
        upper = np.full(n, np.inf)
    elif loss == "l1":
        lam = np.zeros(n)
        upper = C.copy()
    else:
        raise ValueError(f"unknown loss {loss!r}")
    p = float(params.p)
    anchor_idx, coding_weight = prob.coding_arrays()
    QD = np.empty(n)
    _dual_cd.coded_row_sqnorms(rows.data, rows.indices, rows.indptr, rows.n_features,
                               prob.bias, anchor_idx, coding_weight, QD)
    beta = np.zeros(n)
    W = np.zeros(prob.n_anchors * prob.stride)
    index = np.arange(n, dtype=np.int32)
    eps = params.resolved_eps() * tol_scale
    max_iter = params.max_iter if max_iter is None else max_iter
    active_size = n
    Gmax_old = np.inf
    Gnorm1_init = -1.0
    it = 0
    while it < max_iter:
        check_stop()
        active_size, Gmax_new, Gnorm1_new = _dual_svr.svr_dual_pass(
            rows.data, rows.indices, rows.indptr, rows.n_features, prob.bias,
            anchor_idx, coding_weight, y, QD, lam, upper, p, beta, W, index,
            active_size, Gmax_old, prob.rng_state)
        if it == 0:
            Gnorm1_init = Gnorm1_new
        it += 1
        if it % 10 == 0:
            info(".")
        if Gnorm1_new <= eps * Gnorm1_init:
            if active_size == n:
                break
            active_size = n
            info("*")
            Gmax_old = np.inf
            continue
        Gmax_old = Gmax_new
    info(f"\noptimization finished, #iter = {it}\n")
    objective = 0.5 * float(W @ W) + float(
        np.sum(p * np.abs(beta) - y * beta + 0.5 * lam * beta * beta))
    info(f"Objective value = {objective:f}\n")
    info(f"nSV = {int(np.count_nonzero(beta))}\n")
    return SolveResult(W, it, objective, beta)


# The registered solvers share the table signature (prob, params, info, tol_scale=1.0,
# init_w=None).  Like LIBLINEAR, the dual solvers ignore an initial w (its init_sol only
# warm-starts the primal solvers): they start from beta = 0.

def train_l2loss_svr_dual(prob: BinaryProblem, params: TrainParams, info: Messages,
                          tol_scale: float = 1.0, init_w=None) -> SolveResult:
    """-s 12; after ``params.max_iter`` outer iterations switches to the primal -s 11,
    warm-started from the dual's w, with a tolerance 1000 times tighter, as LIBLINEAR
    does."""
    res = solve_l2r_l1l2_svr(prob, params, info, "l2", tol_scale)
    if res.n_iter >= params.max_iter:
        if prob.coding is None:
            info("\nWARNING: reaching max number of iterations\nSwitching to use -s 11\n\n")
            return train_l2r_l2loss_svr(prob, params, info, tol_scale=tol_scale * 0.001, init_w=res.w)
        info("\nWARNING: reaching max number of iterations\n\n")
    return res


def train_l1loss_svr_dual(prob: BinaryProblem, params: TrainParams, info: Messages,
                          tol_scale: float = 1.0, init_w=None) -> SolveResult:
    """-s 13; only warns when the iteration cap is reached."""
    res = solve_l2r_l1l2_svr(prob, params, info, "l1", tol_scale)
    if res.n_iter >= params.max_iter:
        info("\nWARNING: reaching max number of iterations\nUsing -s 11 may be faster "
             "(also see FAQ)\n\n")
    return res


def solve_oneclass_svm(rows: Rows, params: TrainParams, info: Messages,
                       rng_state: np.ndarray, max_iter: int = ONECLASS_MAX_ITER):
    """Linear one-class SVM (-s 21): LIBLINEAR's ``solve_oneclass_svm``.

    Starts from the first ``floor(nu l)`` rows at alpha = 1 and the next one at the
    fractional remainder (so ``sum alpha = nu l``), runs two-level coordinate descent
    until the maximal violation ``max_{I_up} -G - min_{I_low} -G`` is below ``eps`` on
    the full set, and returns ``(w, rho)`` with rho the mean gradient of the free
    variables (the midpoint of the bounds' gradients when none is free).  The
    random state only drives quick-select pivots, which do not change the result.
    """
    n = rows.n_rows
    nu = float(params.nu)
    eps = params.resolved_eps()
    alpha = np.zeros(n)
    n_upper = int(nu * n)
    alpha[:n_upper] = 1.0
    if n_upper < n:
        alpha[n_upper] = nu * n - n_upper
    w = np.zeros(rows.n_features)
    _oneclass.weighted_row_sum(rows.data, rows.indices, rows.indptr, alpha, w)
    QD = np.empty(n)
    _dual_cd.coded_row_sqnorms(rows.data, rows.indices, rows.indptr, rows.n_features, -1.0,
                               EMPTY_IDX, EMPTY_WEIGHT, QD)
    G = np.zeros(n)
    index = np.arange(n, dtype=np.int32)
    scratch = np.empty(_oneclass.scored_rows_nbytes(2 * n), dtype=np.uint8)
    active_size = n
    it = 0
    while it < max_iter:
        check_stop()
        converged, active_size = _oneclass.oneclass_pass(
            rows.data, rows.indices, rows.indptr, QD, eps, alpha, w, G, index,
            active_size, scratch, rng_state)
        if converged:
            if active_size == n:
                break
            active_size = n
            info("*")
            continue
        it += 1
        if it % 10 == 0:
            info(".")
    info(f"\noptimization finished, #iter = {it}\n")
    if it >= max_iter:
        info("\nWARNING: reaching max number of iterations\n\n")
    objective = 0.5 * float(w @ w)
    info(f"Objective value = {objective:f}\n")
    info(f"nSV = {int(np.count_nonzero(alpha > 0))}\n")

    _oneclass.rows_times_vector(rows.data, rows.indices, rows.indptr, w, G)
    free = (alpha > 0) & (alpha < 1)
    if free.any():
        rho = float(np.sum(G[free])) / int(np.count_nonzero(free))
    else:
        at_upper = G[alpha == 1]
        at_lower = G[alpha == 0]
        lb = float(at_upper.max()) if at_upper.size else -np.inf
        ub = float(at_lower.min()) if at_lower.size else np.inf
        rho = (ub + lb) / 2
    info(f"rho = {rho:f}\n")
    return w, rho


def train_oneclass_svm(rows: Rows, params: TrainParams, info: Messages, rng_state: np.ndarray):
    return solve_oneclass_svm(rows, params, info, rng_state)


def solve_mcsvm_cs(rows: Rows, class_index: np.ndarray, nr_class: int,
                   weighted_C: np.ndarray, params: TrainParams, info: Messages,
                   rng_state: np.ndarray, max_iter: int = MCSVM_CS_MAX_ITER,
                   coding: Coding | None = None) -> np.ndarray:
    """Crammer-Singer multi-class SVM (-s 4): LIBLINEAR's ``Solver_MCSVM_CS``.

    Returns W of shape ``(w_size, nr_class)`` (LIBLINEAR's feature-major layout; two
    columns for a binary problem).  With a local ``coding`` the rows are the implicit
    features gamma(x) (x) [x; B] of the LL-SVM (``-s 4 -L ...``) and W has
    ``n_anchors * w_size`` rows, anchor-major.  Shrinking runs with a tolerance that starts at
    ``max(10 eps, 1)`` and halves down to ``eps`` each time the shrunk problem is
    solved; training stops when a pass that started from all rows and classes has
    its largest gradient spread below ``eps``.
    """
    n = rows.n_rows
    bias = float(params.bias)
    w_size = rows.n_features + (1 if bias >= 0 else 0)
    if coding is None:
        anchor_idx, coding_weight, n_anchors = EMPTY_IDX, EMPTY_WEIGHT, 1
    else:
        anchor_idx, coding_weight = coding.anchor_idx, coding.coding_weight
        n_anchors = int(coding.n_anchors)
    eps = params.resolved_eps()
    y = np.ascontiguousarray(class_index, dtype=np.int32)
    class_C = np.ascontiguousarray(weighted_C, dtype=np.float64)
    if class_C.shape[0] != nr_class:
        raise ValueError(f"weighted_C has {class_C.shape[0]} entries for {nr_class} classes")
    if n and (y.min() < 0 or y.max() >= nr_class):
        raise ValueError(f"class_index must lie in 0..{nr_class - 1}")
    QD = np.empty(n)
    _dual_cd.coded_row_sqnorms(rows.data, rows.indices, rows.indptr, rows.n_features, bias,
                               anchor_idx, coding_weight, QD)
    alpha = np.zeros((n, nr_class))
    W = np.zeros((n_anchors * w_size, nr_class))
    alpha_index = np.empty((n, nr_class), dtype=np.int32)
    alpha_index[:] = np.arange(nr_class, dtype=np.int32)
    y_index = y.copy()
    active_size_i = np.full(n, nr_class, dtype=np.int32)
    index = np.arange(n, dtype=np.int32)
    work = np.empty((5, max(nr_class, 1)))
    changed_class = np.empty(max(nr_class, 1), dtype=np.int32)
    active_size = n
    eps_shrink = max(10.0 * eps, 1.0)
    start_from_all = True
    it = 0
    while it < max_iter:
        active_size, stopping = _mcsvm_cs.mcsvm_cs_pass(
            rows.data, rows.indices, rows.indptr, rows.n_features, bias, anchor_idx,
            coding_weight, y, class_C, QD,
            alpha, W, alpha_index, y_index, active_size_i, index, active_size, work,
            changed_class, rng_state, stop=STOP_FLAG)
        check_stop()            # Ctrl-C: the pass may have ended early
        it += 1
        if it % 10 == 0:
            info(".")
        if stopping < eps_shrink:
            if stopping < eps and start_from_all:
                break
            active_size = n
            active_size_i.fill(nr_class)
            info("*")
            eps_shrink = max(eps_shrink / 2, eps)
            start_from_all = True
        else:
            start_from_all = False
    info(f"\noptimization finished, #iter = {it}\n")
    if it >= max_iter:
        info("\nWARNING: reaching max number of iterations\n")
    objective = 0.5 * float(np.sum(W * W)) + float(alpha.sum())
    if n:
        objective -= float(alpha[np.arange(n), y].sum())
    info(f"Objective value = {objective:f}\n")
    info(f"nSV = {int(np.count_nonzero(alpha))}\n")
    return W


def train_mcsvm_cs(rows, class_index, nr_class, weighted_C, params, info, rng_state):
    return solve_mcsvm_cs(rows, class_index, nr_class, weighted_C, params, info, rng_state)
