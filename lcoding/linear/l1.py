"""L1-regularised classifiers: L2-loss SVC (-s 5, LIBLINEAR's ``solve_l1r_l2_svc``) and
logistic regression (-s 6, ``solve_l1r_lr``, newGLMNET), by coordinate descent over
features on a column-major copy of the data.

Both honour ``-R`` (the bias column carries no L1 term), per-class C (``Cp``/``Cn``, or
per-row ``sample_C``) and LIBLINEAR's tolerance ``eps * max(min(#pos, #neg), 1) / l``.
Python drives the iterations; each call into ``_l1r`` is one pass.  Both are listed
in :data:`lcoding.linear.solvers.BINARY_SOLVERS` with the table signature ``(prob, params, info, tol_scale=1.0, init_w=None)``; as in
LIBLINEAR (whose L1 solvers zero w before starting) ``init_w`` is not used.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lcoding.linear import _l1r
from lcoding.core.options import TrainParams
from lcoding.linear.problem import BinaryProblem, SolveResult
from lcoding.core.messages import Messages
from lcoding.core.threads import check_stop

L1R_L2SVC_MAX_ITER = 1000       # LIBLINEAR's outer cap of solve_l1r_l2_svc
L1R_LR_MAX_NEWTON_ITER = 100    # newGLMNET outer (Newton) iterations
L1R_LR_MAX_CD_CYCLES = 1000     # CD cycles per Newton iteration
L1R_LR_HESSIAN_DAMPING = 1e-12  # nu added to the Hessian diagonal


@dataclass
class Columns:
    """The training rows column by column (CSC), the bias as an extra dense last column."""
    col_ptr: np.ndarray     # int64[w_size + 1]
    row_idx: np.ndarray     # int32[nnz]
    value: np.ndarray       # float64[nnz]
    w_size: int


def columns_of(prob: BinaryProblem) -> Columns:
    """Column-major copy of ``prob.rows`` for coordinate descent over features.

    scipy's CSR->CSC conversion is a linear-time counting transpose that keeps the row
    ids of every column increasing -- the same layout LIBLINEAR's ``transpose`` builds
    -- and it is already compiled, so there is nothing to gain from a kernel of our own.
    The virtual bias coordinate becomes a real dense column here, because these solvers
    visit the bias weight exactly like any other feature.
    """
    if prob.coding is not None:
        raise ValueError("the L1-regularised solvers (-s 5, -s 6) train plain linear models "
                         "only; they do not accept a local coding")
    rows = prob.rows
    n = rows.n_rows
    csc = rows.to_csr().tocsc()
    csc.sort_indices()      # a no-op flag check: tocsc already sorts
    col_ptr = csc.indptr.astype(np.int64, copy=False)
    row_idx = csc.indices.astype(np.int32, copy=False)
    value = csc.data.astype(np.float64, copy=False)
    w_size = rows.n_features
    if prob.bias >= 0:
        col_ptr = np.append(col_ptr, col_ptr[-1] + n)
        row_idx = np.concatenate([row_idx, np.arange(n, dtype=np.int32)])
        value = np.concatenate([value, np.full(n, float(prob.bias))])
        w_size += 1
    return Columns(np.ascontiguousarray(col_ptr), np.ascontiguousarray(row_idx),
                   np.ascontiguousarray(value), w_size)


def primal_tolerance(prob: BinaryProblem, params: TrainParams, tol_scale: float) -> float:
    """LIBLINEAR's primal stopping tolerance ``eps * max(min(pos, neg), 1) / l``."""
    n = prob.rows.n_rows
    pos = int(np.count_nonzero(np.asarray(prob.y) > 0))
    return params.resolved_eps() * max(min(pos, n - pos), 1) / max(n, 1) * tol_scale


def unregularized_column(prob: BinaryProblem, params: TrainParams, w_size: int) -> int:
    """Index of the column without L1 term (the bias under -R), else -1."""
    if params.regularize_bias == 0:
        if prob.bias < 0:
            raise ValueError("-R (unregularised bias) needs a bias column: use -B 1")
        return w_size - 1
    return -1


def solve_l1r_l2_svc(prob: BinaryProblem, params: TrainParams, info: Messages,
                     tol_scale: float = 1.0, init_w=None) -> SolveResult:
    """-s 5: min_w ||w||_1 + sum_i C_i max(0, 1 - y_i w.x_i)^2 by coordinate descent
    with shrinking.  Stops when the 1-norm of the minimum-norm subgradient falls to
    ``tol`` times its first-iteration value on the full feature set."""
    cols = columns_of(prob)
    n = prob.rows.n_rows
    y = np.where(np.asarray(prob.y) > 0, 1.0, -1.0)
    C = np.ascontiguousarray(prob.per_row_C(), dtype=np.float64)
    yx = cols.value * y[cols.row_idx]            # the solver works with y_i x_ij
    xj_sq = np.empty(cols.w_size)
    _l1r.column_weighted_sums(cols.col_ptr, cols.row_idx, yx, C, True, xj_sq)
    w = np.zeros(cols.w_size)
    b = np.ones(n)                               # 1 - y_i w.x_i at w = 0
    index = np.arange(cols.w_size, dtype=np.int32)
    unreg = unregularized_column(prob, params, cols.w_size)
    eps = primal_tolerance(prob, params, tol_scale)
    active_size = cols.w_size
    Gmax_old = np.inf
    Gnorm1_init = -1.0
    it = 0
    while it < L1R_L2SVC_MAX_ITER:
        check_stop()
        active_size, Gmax_new, Gnorm1_new, n_recomputed = _l1r.l1r_l2svc_pass(
            cols.col_ptr, cols.row_idx, yx, C, xj_sq, b, w, index, active_size,
            Gmax_old, unreg, prob.rng_state)
        if n_recomputed:
            info("#" * n_recomputed)
        if it == 0:
            Gnorm1_init = Gnorm1_new
        it += 1
        if it % 10 == 0:
            info(".")
        if Gnorm1_new <= eps * Gnorm1_init:
            if active_size == cols.w_size:
                break
            active_size = cols.w_size
            info("*")
            Gmax_old = np.inf
            continue
        Gmax_old = Gmax_new
    info(f"\noptimization finished, #iter = {it}\n")
    if it >= L1R_L2SVC_MAX_ITER:
        info("\nWARNING: reaching max number of iterations\n")
    objective = float(np.abs(w).sum())
    if unreg >= 0:
        objective -= abs(float(w[unreg]))
    objective += float(np.sum(C * np.square(np.maximum(b, 0.0))))
    info(f"Objective value = {objective:f}\n")
    info(f"#nonzeros/#features = {int(np.count_nonzero(w))}/{cols.w_size}\n")
    return SolveResult(w, it, objective)


def solve_l1r_lr(prob: BinaryProblem, params: TrainParams, info: Messages,
                 tol_scale: float = 1.0, init_w=None) -> SolveResult:
    """-s 6: min_w ||w||_1 + sum_i C_i log(1 + exp(-y_i w.x_i)) by newGLMNET: per
    Newton iteration, coordinate descent cycles on the quadratic model (inner
    tolerance 1, divided by 4 whenever a single cycle suffices) and a backtracking
    line search.  Stops when the subgradient 1-norm falls to ``tol`` times its
    first value."""
    cols = columns_of(prob)
    n = prob.rows.n_rows
    y = np.where(np.asarray(prob.y) > 0, 1, -1).astype(np.int8)
    C = np.ascontiguousarray(prob.per_row_C(), dtype=np.float64)
    w_size = cols.w_size
    nu = L1R_LR_HESSIAN_DAMPING
    xjneg_sum = np.empty(w_size)
    _l1r.column_weighted_sums(cols.col_ptr, cols.row_idx, cols.value, np.where(y == -1, C, 0.0),
                              False, xjneg_sum)
    w = np.zeros(w_size)
    wpd = w.copy()
    exp_wTx = np.ones(n)                       # exp(w.x_i) at w = 0
    exp_wTx_new = np.empty(n)
    tau = C * 0.5                              # C_i / (1 + exp(w.x_i))
    D = C * 0.25                               # C_i exp(w.x_i) / (1 + exp(w.x_i))^2
    xTd = np.zeros(n)
    Hdiag = np.empty(w_size)
    Grad = np.empty(w_size)
    index = np.arange(w_size, dtype=np.int32)
    unreg = unregularized_column(prob, params, w_size)
    eps = primal_tolerance(prob, params, tol_scale)
    w_norm = 0.0
    inner_eps = 1.0
    Gmax_old = np.inf
    Gnorm1_init = -1.0
    newton_iter = 0
    while newton_iter < L1R_LR_MAX_NEWTON_ITER:
        check_stop()
        active_size, Gmax_new, Gnorm1_new = _l1r.l1r_lr_gradient_pass(
            cols.col_ptr, cols.row_idx, cols.value, D, tau, xjneg_sum, w, Hdiag, Grad,
            index, Gmax_old, unreg, nu)
        if newton_iter == 0:
            Gnorm1_init = Gnorm1_new
        if Gnorm1_new <= eps * Gnorm1_init:
            break

        cycles = 0
        QP_Gmax_old = np.inf
        QP_active_size = active_size
        xTd.fill(0.0)
        while cycles < L1R_LR_MAX_CD_CYCLES:
            check_stop()
            QP_active_size, QP_Gmax_new, QP_Gnorm1_new = _l1r.l1r_lr_cd_cycle(
                cols.col_ptr, cols.row_idx, cols.value, D, Grad, Hdiag, w, wpd, xTd, index,
                QP_active_size, QP_Gmax_old, unreg, nu, prob.rng_state)
            cycles += 1
            if QP_Gnorm1_new <= inner_eps * Gnorm1_init:
                if QP_active_size == active_size:
                    break
                # reactivate the features shrunk during this Newton iteration
                QP_active_size = active_size
                QP_Gmax_old = np.inf
                continue
            QP_Gmax_old = QP_Gmax_new
        if cycles >= L1R_LR_MAX_CD_CYCLES:
            info("WARNING: reaching max number of inner iterations\n")

        _, w_norm = _l1r.l1r_lr_line_search(
            cols.col_ptr, cols.row_idx, cols.value, y, C, Grad, w, wpd, xTd, exp_wTx,
            exp_wTx_new, tau, D, w_norm, unreg)
        if cycles == 1:
            inner_eps *= 0.25
        newton_iter += 1
        Gmax_old = Gmax_new
        info(f"iter {newton_iter:3d}  #CD cycles {cycles}\n")

    info("=========================\n")
    info(f"optimization finished, #iter = {newton_iter}\n")
    if newton_iter >= L1R_LR_MAX_NEWTON_ITER:
        info("WARNING: reaching max number of iterations\n")
    objective = float(np.abs(w).sum())
    if unreg >= 0:
        objective -= abs(float(w[unreg]))
    with np.errstate(over="ignore", divide="ignore"):
        objective += float(np.sum(np.where(y == 1, C * np.log1p(1.0 / exp_wTx),
                                           C * np.log1p(exp_wTx))))
    info(f"Objective value = {objective:f}\n")
    info(f"#nonzeros/#features = {int(np.count_nonzero(w))}/{w_size}\n")
    return SolveResult(w, newton_iter, objective)
