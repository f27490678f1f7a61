"""The binary problem every solver of lcoding trains, linear or locally linear.

A *binary solver* trains one weight vector for targets ``y_pm`` in {+1, -1}::

    solver(problem: BinaryProblem, params: TrainParams, out: Messages) -> SolveResult

The same drivers serve linear models (``coding=None``) and locally linear models
(a coding with ``anchor_idx``/``coding_weight`` of shape ``(n, k)`` and
``n_anchors`` blocks of ``W``), because the kernels run on the coded-row
abstraction of ``lcoding/core/_rows.pxd``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from lcoding.core.messages import event
from lcoding.core.rows import Rows


EMPTY_IDX = np.zeros((0, 1), dtype=np.int32)


EMPTY_WEIGHT = np.zeros((0, 1), dtype=np.float64)


@dataclass
class Coding:
    """A fixed-width local coding of the rows: ``gamma(x_i)`` has ``k`` non-zeros
    at ``anchor_idx[i]`` with values ``coding_weight[i]``."""
    anchor_idx: np.ndarray      # int32 (n, k)
    coding_weight: np.ndarray   # float64 (n, k)
    n_anchors: int


@dataclass
class BinaryProblem:
    rows: Rows
    y: np.ndarray               # int8 +1/-1 (regression: float64 targets)
    Cp: float                   # C of the +1 rows
    Cn: float                   # C of the -1 rows
    bias: float                 # -B value (< 0: none)
    rng_state: np.ndarray       # uint64[1], consumed by the solver
    coding: Coding | None = None
    sample_C: np.ndarray | None = None   # per-row C (overrides Cp/Cn when given)
    # one bias weight shared by all anchors (W[-1]) instead of one per anchor
    # (anchor-plane LIB-LLSVM, seed 000 eq. 9); W then has n_anchors * n_features + 1 entries
    shared_bias: bool = False

    @property
    def stride(self) -> int:
        return self.rows.n_features + (1 if self.bias >= 0 and not self.shared_bias else 0)

    @property
    def kernel_bias(self) -> tuple[float, float]:
        """(per-anchor bias value, shared bias value) as the kernels take them."""
        if self.shared_bias:
            return -1.0, self.bias
        return self.bias, -1.0

    @property
    def w_size(self) -> int:
        return self.n_anchors * self.stride + (1 if self.shared_bias else 0)

    @property
    def n_anchors(self) -> int:
        return 1 if self.coding is None else self.coding.n_anchors

    def coding_arrays(self):
        if self.coding is None:
            return EMPTY_IDX, EMPTY_WEIGHT
        return self.coding.anchor_idx, self.coding.coding_weight

    def per_row_C(self) -> np.ndarray:
        if self.sample_C is not None:
            return self.sample_C
        return np.where(self.y > 0, self.Cp, self.Cn).astype(np.float64)


def coded_nonzeros_bound(prob: BinaryProblem) -> int:
    """The non-zeros of the coded rows ``z_i`` (exact when no coding weight is 0, else
    more), without a pass over the coding: ``k`` anchors per row, each with the row's
    non-zeros and bias; one more per row for a shared bias.  The kernels never write
    ``z_i`` out: this measures a problem's work (:mod:`lcoding.linear.cocoa`)."""
    rows = prob.rows
    anchor_idx, _ = prob.coding_arrays()
    bias, shared_bias = prob.kernel_bias
    k = anchor_idx.shape[1] if anchor_idx.shape[0] else 1
    per_rows = int(rows.indptr[-1]) + (rows.n_rows if bias >= 0 else 0)
    return k * per_rows + (rows.n_rows if shared_bias >= 0 else 0)


@dataclass
class SolveResult:
    w: np.ndarray               # (n_anchors * stride,)
    n_iter: int
    objective: float = float("nan")
    alpha: np.ndarray | None = None
    extra: dict = field(default_factory=dict)



def solve_event(labels, column: int, nr_class: int, result: SolveResult,
                seconds: float) -> str:
    """The event line of one one-vs-rest solve (:func:`lcoding.core.messages.event`):
    which class against which, the solver's passes (LIBLINEAR's ``#iter``) and time."""
    def text(v):
        v = float(v)
        return str(int(v)) if v.is_integer() else repr(v)
    if nr_class <= 2:
        who = (f"class {text(labels[0])} vs {text(labels[1])}" if len(labels) > 1
               else f"class {text(labels[0])}")
    else:
        who = f"class {text(labels[column])} vs rest"
    return f"{who}: {result.n_iter} passes, {seconds:.2f} s"


def reported_solve(info, labels, column: int, nr_class: int, solve, *args) -> SolveResult:
    """``solve(*args)`` for the one-vs-rest problem ``column``, its
    :func:`solve_event` line sent through ``info``."""
    start = time.perf_counter()
    result = solve(*args)
    event(info, solve_event(labels, column, nr_class, result, time.perf_counter() - start))
    return result
