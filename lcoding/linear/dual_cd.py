"""LIBLINEAR's dual coordinate descent for L2-regularised SVC (``-s 1``, ``-s 3``).

Python owns iteration counts, stopping rules and messages; the typed kernel
``_dual_cd`` does the per-sample work.  The same driver serves linear models
(``coding=None``) and locally linear models (a coding with ``anchor_idx`` /
``coding_weight`` of shape ``(n, k)`` and ``n_anchors`` blocks of ``W``), because
the kernels run on the coded-row abstraction of ``lcoding/core/_rows.pxd``.
"""
from __future__ import annotations

import numpy as np

from lcoding.linear import _dual_cd
from lcoding.core.messages import Messages
from lcoding.core.options import TrainParams
from lcoding.core.threads import STOP_FLAG, check_stop
from lcoding.linear.newton import train_l2r_l2loss_svc
from lcoding.linear.problem import BinaryProblem, SolveResult


def dual_start(prob: BinaryProblem, y: np.ndarray, upper: np.ndarray,
               init_alpha: np.ndarray | None, W: np.ndarray) -> np.ndarray:
    """The dual CD's starting point: ``alpha = 0`` (LIBLINEAR's), or ``init_alpha``
    clipped to the box ``[0, U_i]`` with ``W = sum_i y_i alpha_i z_i`` written into
    ``W`` (zeros on entry) -- a warm start (``-C``'s path along C)."""
    rows = prob.rows
    n = rows.n_rows
    if init_alpha is None:
        return np.zeros(n)
    alpha = np.array(init_alpha, dtype=np.float64).reshape(-1)
    if alpha.shape[0] != n or not np.isfinite(alpha).all():
        raise ValueError(f"init_alpha: {n} finite values expected")
    np.clip(alpha, 0.0, upper, out=alpha)
    anchor_idx, coding_weight = prob.coding_arrays()
    bias, shared_bias = prob.kernel_bias
    _dual_cd.dual_w_from_alpha(rows.data, rows.indices, rows.indptr, rows.n_features,
                               bias, anchor_idx, coding_weight, y, alpha, W, shared_bias,
                               stop=STOP_FLAG)
    check_stop()
    return alpha


# The lcoding methods' -s 1 (LL-SVM on coded rows, the linear solve on a kernel map's
# rows; :func:`train_l2loss_svc_dual_switching`) hands over to the primal Newton solver
# once the dual CD's stopping gap -- the projected-gradient spread PGmax - PGmin that
# LIBLINEAR stops on at eps -- has not halved in this many passes.  A dual CD that
# stalls like this runs to the 300-pass cap and then switches anyway: on LETTER's raw
# 0..15 features every LocallyLinearSVC() class did (the gap fell from 3.9 to 0.23 in 300
# passes), so did magic04's kernel map at C = 100 and w8a's LL-SVM.  Solves that
# converge halve it every 3-15 passes (USPS at the defaults: 20-63 passes, none would
# switch); a gap that halves every 20 passes needs ~100 passes from 4 to LIBLINEAR's 0.1.
STALL_PASSES = 20
# ... unless the gap is within this factor of eps (two halvings): a nearly converged
# solve finishes by its own passes, as LIBLINEAR's does (600-row USPS one-vs-rest
# problems stalled at gaps 0.19-0.23 for eps 0.1; the stalls above were at 1-6.4)
STALL_GAPS = 4.0


class StallWatch:
    """The stall rule over a dual CD's passes (or CoCoA+'s rounds): :meth:`stalled`
    is true once the projected-gradient spread has not halved in ``passes`` passes
    and is still above ``STALL_GAPS * eps``."""

    def __init__(self, passes: int):
        self.passes = passes
        self.halved_spread, self.halved_at = np.inf, 0

    def stalled(self, spread: float, it: int, eps: float) -> bool:
        if spread <= 0.5 * self.halved_spread:
            self.halved_spread, self.halved_at = spread, it
            return False
        return it - self.halved_at >= self.passes and spread > STALL_GAPS * eps


def newton_after_stall(prob: BinaryProblem, params: TrainParams, info: Messages, res,
                       unit: str = "passes", n_threads: int = 1):
    """The hand-over of a stalled ``-s 1`` solve (:class:`StallWatch`): LIBLINEAR's
    answer at the pass cap, Newton from the dual's ``w`` to 0.1 of its tolerance,
    its products in ``n_threads`` threads."""
    info(f"\nWARNING: the dual CD's stopping gap ({res.extra['gap']:.3g}, -e "
         f"{params.resolved_eps():g}) did not halve in {STALL_PASSES} {unit}\n"
         f"Switching to use -s 2 (the primal Newton solver)\n\n")
    return train_l2r_l2loss_svc(prob, params, info, tol_scale=0.1, init_w=res.w,
                                n_threads=n_threads)


def solve_l2r_l1l2_svc(prob: BinaryProblem, params: TrainParams, info: Messages,
                       loss: str, max_iter: int | None = None,
                       init_alpha: np.ndarray | None = None,
                       stall_passes: int | None = None) -> SolveResult:
    """Dual coordinate descent for L2-regularised L1-loss (``loss="l1"``, -s 3)
    or L2-loss (``loss="l2"``, -s 1) SVC, with LIBLINEAR's shrinking and stopping.

    Stops when the projected-gradient spread is within ``eps`` on the full set
    (after unshrinking), or after ``max_iter`` outer iterations, or -- with
    ``stall_passes`` (None: never, LIBLINEAR's behaviour) -- when that spread has not
    halved in ``stall_passes`` passes and is still above ``STALL_GAPS * eps``;
    ``extra["stalled"]`` then says so (``extra["gap"]``: the last pass's spread), and
    ``extra["stop"]`` is ``"stalled"``, ``"iteration cap"`` or ``""`` (converged), as
    CoCoA+'s stop reasons (:func:`continue_l2loss` reads it).

    ``init_alpha`` (optional, one value per row): start from this dual point, clipped
    to the box ``[0, U_i]`` of this problem, with ``W`` computed from it -- the warm
    start of the ``-C`` parameter search along C (a solution at a smaller C is
    feasible at a larger one).  Without it the start is ``alpha = 0`` as in LIBLINEAR.
    """
    rows = prob.rows
    n = rows.n_rows
    y = np.ascontiguousarray(prob.y, dtype=np.int8)
    C = prob.per_row_C()
    if loss == "l2":
        with np.errstate(divide="ignore"):
            diag = 0.5 / C          # a class weight of 0 (-w<label> 0): inf, as in LIBLINEAR
        upper = np.full(n, np.inf)
    elif loss == "l1":
        diag = np.zeros(n)
        upper = C.copy()
    else:
        raise ValueError(f"unknown loss {loss!r}")
    anchor_idx, coding_weight = prob.coding_arrays()
    bias, shared_bias = prob.kernel_bias
    QD = np.empty(n)
    _dual_cd.coded_row_sqnorms(rows.data, rows.indices, rows.indptr, rows.n_features,
                               bias, anchor_idx, coding_weight, QD, shared_bias)
    QD += diag
    W = np.zeros(prob.w_size)
    alpha = dual_start(prob, y, upper, init_alpha, W)
    index = np.arange(n, dtype=np.int32)
    eps = params.resolved_eps()
    max_iter = params.max_iter if max_iter is None else max_iter
    active_size = n
    PGmax_old, PGmin_old = np.inf, -np.inf
    it = 0
    watch, stalled = StallWatch(stall_passes) if stall_passes else None, False
    while it < max_iter:
        active_size, PGmax_new, PGmin_new = _dual_cd.dual_cd_pass(
            rows.data, rows.indices, rows.indptr, rows.n_features, bias,
            anchor_idx, coding_weight, y, QD, diag, upper, alpha, W, index,
            active_size, PGmax_old, PGmin_old, prob.rng_state, shared_bias, stop=STOP_FLAG)
        check_stop()            # Ctrl-C: the pass may have ended early
        it += 1
        if it % 10 == 0:
            info(".")
        if PGmax_new - PGmin_new <= eps and abs(PGmax_new) <= eps and abs(PGmin_new) <= eps:
            if active_size == n:
                break
            active_size = n
            info("*")
            PGmax_old, PGmin_old = np.inf, -np.inf
            continue
        if watch is not None and watch.stalled(PGmax_new - PGmin_new, it, eps):
            stalled = True
            break
        PGmax_old = PGmax_new if PGmax_new > 0 else np.inf
        PGmin_old = PGmin_new if PGmin_new < 0 else -np.inf
    info(f"\noptimization finished, #iter = {it}\n")
    with np.errstate(invalid="ignore"):       # 0 * inf of a weight-0 class: nan, as LIBLINEAR prints
        objective = 0.5 * (float(W @ W) + float(np.dot(alpha, alpha * diag - 2.0)))
    info(f"Objective value = {objective:f}\n")
    info(f"nSV = {int(np.count_nonzero(alpha > 0))}\n")
    stop = "stalled" if stalled else "iteration cap" if it >= max_iter else ""
    return SolveResult(W, it, objective, alpha,
                       extra={"stalled": stalled, "stop": stop,
                              "gap": PGmax_new - PGmin_new if it else np.inf})


# What to do when the dual CD of a locally linear model stops at the iteration cap
# and cannot switch to the primal -s 2 (the L1 loss, -s 3).  The dual CD slows down
# when the implicit features gamma(x) (x) [x; B] are badly conditioned: unscaled
# inputs with a large common component (LETTER's raw 0..15 values), or LLC weights of
# mixed sign (-L 6 with a small ridge).  The model is still usable (the weights of the
# last pass), as LIBLINEAR's is.  docs/llsvm.md, "Scaling the inputs" and "Speed and
# memory".
LOCAL_CAP_REMEDY = (
    "The locally linear dual CD converges slowly on badly conditioned codes: scale the "
    "features (e.g. to [-1, 1] as svm-scale does), lower -c, raise the LLC ridge -u with "
    "-L 6 or use the Gaussian coding -L 2, or train with -s 30; see docs/llsvm.md\n")


def at_iteration_cap(prob, params, info, res, loss: str, n_threads: int = 1):
    """LIBLINEAR's answer when the dual CD (or its CoCoA+ form) stopped at the pass
    cap: ``-s 1`` continues by the primal Newton solver from the dual's ``w`` (with a
    warning) -- a local model too, its products on the coded rows (skin's LL-SVM at
    LocallyLinearSVC()'s defaults: the primal objective 8.01 after 300 passes, 3.38
    after 4 Newton steps, 0.12 s); ``-s 3`` warns, a local model with
    :data:`LOCAL_CAP_REMEDY`.  ``n_threads``: the threads of a coded problem's Newton
    steps (CoCoA+'s partitions)."""
    if prob.coding is not None:
        if loss == "l2":
            info("\nWARNING: reaching max number of iterations\nSwitching to use -s 2 "
                 "(the primal Newton solver on the coded rows)\n\n")
            return train_l2r_l2loss_svc(prob, params, info, tol_scale=0.1, init_w=res.w,
                                        n_threads=n_threads)
        info("\nWARNING: reaching max number of iterations\n" + LOCAL_CAP_REMEDY + "\n")
    elif loss == "l2":
        info("\nWARNING: reaching max number of iterations\nSwitching to use -s 2\n\n")
        # LIBLINEAR continues Newton from the dual solution's w
        return train_l2r_l2loss_svc(prob, params, info, tol_scale=0.1, init_w=res.w)
    else:
        info("\nWARNING: reaching max number of iterations\nUsing -s 2 may be faster "
             "(also see FAQ)\n\n")
    return res


def continue_l2loss(prob: BinaryProblem, params: TrainParams, info: Messages, res,
                    unit: str = "passes", n_threads: int = 1):
    """``-s 1`` after its dual steps, by their stop reason ``res.extra["stop"]`` (the
    sequential dual CD's or CoCoA+'s): a stall hands over to Newton
    (:func:`newton_after_stall`), the pass cap gets LIBLINEAR's answer
    (:func:`at_iteration_cap`); a converged solve is ``res`` itself.  ``unit``:
    "passes" or CoCoA+'s "rounds"; ``n_threads``: the threads of Newton's products."""
    stop = res.extra.get("stop")
    if stop == "stalled":
        return newton_after_stall(prob, params, info, res, unit, n_threads)
    if stop == "iteration cap":
        return at_iteration_cap(prob, params, info, res, "l2", n_threads)
    return res


def train_l2loss_svc_dual(prob, params, info):
    return continue_l2loss(prob, params, info, solve_l2r_l1l2_svc(prob, params, info, "l2"))


def train_l2loss_svc_dual_switching(prob, params, info):
    """``-s 1`` as the lcoding methods run it: LIBLINEAR's dual CD, handed over to the
    primal Newton solver (from the dual's ``w``, to 0.1 of its tolerance as at the pass
    cap) when it stalls (:data:`STALL_PASSES`); the same objective.  The linear method
    keeps LIBLINEAR's :func:`train_l2loss_svc_dual`, byte for byte."""
    return continue_l2loss(prob, params, info, solve_l2r_l1l2_svc(
        prob, params, info, "l2", stall_passes=STALL_PASSES))


def train_l1loss_svc_dual(prob, params, info):
    res = solve_l2r_l1l2_svc(prob, params, info, "l1")
    if res.n_iter >= params.max_iter:
        return at_iteration_cap(prob, params, info, res, "l1")
    return res
