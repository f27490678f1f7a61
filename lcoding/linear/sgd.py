"""Driver of the SGD solvers ``-s 30`` (SVMSGD2 / the LL-SVM paper's Algorithm 1)
and ``-s 32`` (the same updates, tail-averaged).

The kernel :func:`lcoding._sgd.sgd_epoch` does one pass; this driver owns the
epochs (``-E``), the per-epoch seeded shuffle, lambda = 1 / (C l) (so ``-c`` stays
the one regularisation knob, as in design.md), the schedule offset ``-T`` and the
regularisation period ``-P``, and assembles the anchor-major weight vector with
the bias coordinate (``-B``) in LIBLINEAR's layout.

``-s 32`` returns the mean of the iterates (W, b) at the ends of epochs
``floor(E/2) + 1 .. E`` instead of the last one: a tail (Polyak-Ruppert) average at
epoch granularity, as in stochastic weight averaging.  The last iterate of the
1/(lambda (t + t0)) schedule still carries the noise of its last steps; its tail
average does not, which matters most when few epochs are run (LETTER, the paper's
setting, seed 1: 17.6 % test error after 10 epochs for ``-s 30``, 11.4 % for
``-s 32``).  The updates, the shuffles and ``-T 0`` are those of ``-s 30``, so
``-s 32 -E 4`` is exactly the mean of the ``-s 30 -E 3`` and ``-s 30 -E 4`` models.
"""
from __future__ import annotations

import numpy as np

from lcoding.linear import _sgd
from lcoding.core.options import SolverType, TrainParams
from lcoding.linear.problem import BinaryProblem, SolveResult
from lcoding.core.messages import Messages
from lcoding.core.threads import STOP_FLAG, check_stop
from lcoding.core.seeds import CALIBRATION_STREAM


# automatic t0 (-T 0): Bottou's SvmSgd "determineEta0" on a subsample
CALIBRATION_ROWS = 1000
_ETA_FACTOR = 2.0
_ETA_STEPS = 40          # at most 2^40 up or down from eta = 1


class TailAverage:
    """Running sums of arrays over the tail epochs ``floor(E/2) + 1 .. E`` of an
    ``epochs``-epoch run (``-s 32``, ``-s 33``); :meth:`mean` is their average."""

    def __init__(self, epochs: int, *arrays: np.ndarray):
        self.first = epochs // 2                 # 0-based index of the first tail epoch
        self.count = epochs - self.first
        self.sums = [np.zeros_like(a) for a in arrays]

    def add(self, epoch: int, *arrays: np.ndarray) -> None:
        """Adds the values at the end of 0-based ``epoch`` if it is in the tail."""
        if epoch >= self.first:
            for total, a in zip(self.sums, arrays):
                total += a

    def mean(self) -> list:
        return [total / self.count for total in self.sums]


def check_sgd_params(params: TrainParams) -> None:
    """The SGD solvers need at least one pass (``-T`` and ``-P`` are checked by their
    option domains)."""
    if params.epochs < 1:
        raise ValueError(f"-E {params.epochs}: the number of epochs must be >= 1")


def calibrate_t0(rows, anchor_idx, coding_weight, y, cost, lam: float, skip: float,
                 bias: float, n_anchors: int, rng: np.random.Generator) -> float:
    """The schedule offset ``t0 = 1 / (lambda eta0)`` for ``-T 0``, so that the first
    step is ``eta0``: Bottou's SvmSgd calibration.  One epoch on a random subsample of
    at most ``CALIBRATION_ROWS`` rows from zero weights for ``eta = 1``, then ``eta``
    is doubled (or halved) while the subsample's primal objective
    ``lambda/2 ||W||^2 + mean cost_i hinge_i`` keeps falling; ``eta0`` is the last
    improving value.  Deterministic given ``rng``; a diverged trial counts as +inf."""
    n, d = rows.n_rows, rows.n_features
    sub = np.sort(rng.permutation(n)[:min(n, CALIBRATION_ROWS)]).astype(np.int64)
    part = rows.take(sub)
    linear = anchor_idx.shape[0] == 0
    idx = anchor_idx if linear else np.ascontiguousarray(anchor_idx[sub])
    wt = coding_weight if linear else np.ascontiguousarray(coding_weight[sub])
    y_sub, cost_sub = np.ascontiguousarray(y[sub]), np.ascontiguousarray(cost[sub])
    order = np.arange(sub.size, dtype=np.int32)

    def objective(eta: float) -> float:
        check_stop()
        W, b = np.zeros(n_anchors * d), np.zeros(n_anchors)
        state = np.array([1.0, 0.0, skip])
        with np.errstate(all="ignore"):
            _sgd.sgd_epoch(part.data, part.indices, part.indptr, d, idx, wt, y_sub, cost_sub,
                           order, W, b, state, lam, 1.0 / (lam * eta), skip, bias,
                           stop=STOP_FLAG)
            W *= state[0]
            hinge = _sgd.hinge_loss_sum(part.data, part.indices, part.indptr, d, idx, wt,
                                        y_sub, cost_sub, W, b, bias, stop=STOP_FLAG)
            value = 0.5 * lam * float(W @ W) + hinge / sub.size
        check_stop()            # Ctrl-C: the trial epoch may have ended early
        return value if np.isfinite(value) else np.inf

    lo_eta, lo = 1.0, objective(1.0)
    hi_eta, hi = _ETA_FACTOR, objective(_ETA_FACTOR)
    if lo < hi:                     # smaller steps are better: halve while improving
        for _ in range(_ETA_STEPS):
            hi_eta, hi = lo_eta, lo
            lo_eta = hi_eta / _ETA_FACTOR
            lo = objective(lo_eta)
            if not lo < hi:
                lo_eta = hi_eta
                break
    elif hi < lo:                   # larger steps are better: double while improving
        for _ in range(_ETA_STEPS):
            lo_eta, lo = hi_eta, hi
            hi_eta = lo_eta * _ETA_FACTOR
            hi = objective(hi_eta)
            if not hi < lo:
                break
    return 1.0 / (lam * lo_eta)


def solve_sgd_hinge(prob: BinaryProblem, params: TrainParams, info: Messages) -> SolveResult:
    """Hinge-loss SGD on the coded rows of ``prob``; returns the weight vector of
    length ``n_anchors * stride`` (anchor-major, bias coordinate last in each row)."""
    check_sgd_params(params)
    rows = prob.rows
    n, d = rows.n_rows, rows.n_features
    m = prob.n_anchors
    anchor_idx, coding_weight = prob.coding_arrays()
    y = np.ascontiguousarray(prob.y, dtype=np.int8)
    C = float(params.C)
    cost = prob.per_row_C() / C
    lam = 1.0 / (C * max(n, 1))
    W = np.zeros(m * d)
    b = np.zeros(m)
    state = np.array([1.0, 0.0, float(params.skip)])
    rng = np.random.Generator(np.random.PCG64(int(prob.rng_state[0])))
    t0 = float(params.t0)
    if t0 == 0.0 and n > 0:
        # its own stream, so -T 0 and -T t0 shuffle the epochs alike
        t0 = calibrate_t0(rows, anchor_idx, coding_weight, y, cost, lam, float(params.skip),
                          prob.bias, m, np.random.Generator(
                              np.random.PCG64(int(prob.rng_state[0]) ^ CALIBRATION_STREAM)))
        info(f"-T 0: t0 = {t0:.6g} (first step {1.0 / (lam * t0):.3g})\n")
    elif t0 == 0.0:
        t0 = 1.0
    order = np.arange(n, dtype=np.int32)
    loss = 0.0
    tail = (TailAverage(params.epochs, W, b)
            if int(params.solver_type) == int(SolverType.L2R_L1LOSS_SVC_SGD_AVERAGED) else None)
    for epoch in range(params.epochs):
        check_stop()
        rng.shuffle(order)
        loss, n_viol = _sgd.sgd_epoch(rows.data, rows.indices, rows.indptr, d,
                                      anchor_idx, coding_weight, y, cost, order, W, b, state,
                                      lam, t0, float(params.skip), prob.bias, stop=STOP_FLAG)
        check_stop()            # Ctrl-C: the epoch may have ended early
        if not np.isfinite(loss):
            raise FloatingPointError(f"-s {int(params.solver_type)} diverged in epoch "
                                     f"{epoch + 1} (non-finite loss); "
                                     f"try a larger -T or a smaller -c")
        if tail is not None:
            tail.add(epoch, W * state[0], b)     # W is stored as state[0] * W (scale trick)
        info(".")
    if tail is not None:
        W, b = tail.mean()
    else:
        W *= state[0]
    stride = prob.stride
    w = np.zeros((m, stride))
    w[:, :d] = W.reshape(m, d)
    if prob.bias >= 0:
        w[:, d] = b
    # the true primal objective of the returned weights (one extra pass of dot
    # products), not the running loss of the last epoch
    hinge = _sgd.hinge_loss_sum(rows.data, rows.indices, rows.indptr, d, anchor_idx,
                                coding_weight, y, cost, W, b, prob.bias, stop=STOP_FLAG)
    check_stop()
    objective = 0.5 * lam * float(W @ W) + hinge / max(n, 1)
    info(f"\noptimization finished, #epoch = {params.epochs}\n")
    info(f"Objective value = {objective:f} (lambda/2 ||W||^2 + mean hinge loss, "
         f"lambda = {lam:g}; last-epoch running hinge loss {loss / max(n, 1):f})\n")
    return SolveResult(w.reshape(-1), params.epochs, objective,
                       extra={"hinge_loss": hinge / max(n, 1),
                              "running_hinge_loss": loss / max(n, 1)})
