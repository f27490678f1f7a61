"""Driver of the SGD solver ``-s 30`` (SVMSGD2 / the LL-SVM paper's Algorithm 1).

The kernel :func:`lcoding._sgd.sgd_epoch` does one pass; this driver owns the
epochs (``-E``), the per-epoch seeded shuffle, lambda = 1 / (C l) (so ``-c`` stays
the one regularisation knob, as in design.md), the schedule offset ``-T`` and the
regularisation period ``-P``, and assembles the anchor-major weight vector with
the bias coordinate (``-B``) in LIBLINEAR's layout.
"""
from __future__ import annotations

import numpy as np

from lcoding import _sgd
from lcoding.options import TrainParams
from lcoding.solvers import BinaryProblem, Messages, SolveResult


def check_sgd_params(params: TrainParams) -> None:
    if params.epochs < 1:
        raise ValueError(f"-E {params.epochs}: the number of epochs must be >= 1")
    if not params.t0 > 0:
        raise ValueError(f"-T {params.t0}: t0 must be > 0")
    if params.skip < 1:
        raise ValueError(f"-P {params.skip}: skip must be >= 1")


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
    order = np.arange(n, dtype=np.int32)
    loss = 0.0
    for epoch in range(params.epochs):
        rng.shuffle(order)
        loss, n_viol = _sgd.sgd_epoch(rows.data, rows.indices, rows.indptr, d,
                                      anchor_idx, coding_weight, y, cost, order, W, b, state,
                                      lam, float(params.t0), float(params.skip), prob.bias)
        if not np.isfinite(loss):
            raise FloatingPointError(f"-s 30 diverged in epoch {epoch + 1} (non-finite loss); "
                                     f"try a larger -T or a smaller -c")
        info(".")
    W *= state[0]
    stride = prob.stride
    w = np.zeros((m, stride))
    w[:, :d] = W.reshape(m, d)
    if prob.bias >= 0:
        w[:, d] = b
    # the true primal objective of the returned weights (one extra pass of dot
    # products), not the running loss of the last epoch
    hinge = _sgd.hinge_loss_sum(rows.data, rows.indices, rows.indptr, d, anchor_idx,
                                coding_weight, y, cost, W, b, prob.bias)
    objective = 0.5 * lam * float(W @ W) + hinge / max(n, 1)
    info(f"\noptimization finished, #epoch = {params.epochs}\n")
    info(f"Objective value = {objective:f} (lambda/2 ||W||^2 + mean hinge loss, "
         f"lambda = {lam:g}; last-epoch running hinge loss {loss / max(n, 1):f})\n")
    return SolveResult(w.reshape(-1), params.epochs, objective,
                       extra={"hinge_loss": hinge / max(n, 1),
                              "running_hinge_loss": loss / max(n, 1)})
