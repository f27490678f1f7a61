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
from lcoding.core.threads import run_ranges
from lcoding.linear import _dual_cd


EMPTY_IDX = np.zeros((0, 1), dtype=np.int32)


EMPTY_WEIGHT = np.zeros((0, 1), dtype=np.float64)


@dataclass
class Coding:
    """A fixed-width local coding of the rows: ``gamma(x_i)`` has ``k`` non-zeros
    at ``anchor_idx[i]`` with values ``coding_weight[i]``."""
    anchor_idx: np.ndarray      # int32 (n, k)
    coding_weight: np.ndarray   # float64 (n, k)
    n_anchors: int
    # the coded rows written out by materialized_problem, kept for the other
    # one-vs-rest problems of the same rows: (id(rows), bias, shared) -> (rows, Rows)
    written: dict = field(default_factory=dict, repr=False, compare=False)


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


# the most non-zeros a coded problem is written out with for the primal Newton solver
# (12 bytes each: 768 MB); more and -s 2 asks for the dual solver instead
MATERIALIZE_MAX_NONZEROS = 1 << 26


def _coded_row_lengths(prob: BinaryProblem) -> np.ndarray:
    """Non-zeros of every written-out row ``z_i``: per non-zero coding weight, the
    row's own non-zeros and its bias; one more for a shared bias."""
    rows = prob.rows
    anchor_idx, coding_weight = prob.coding_arrays()
    bias, shared_bias = prob.kernel_bias
    per_anchor = np.diff(rows.indptr) + (1 if bias >= 0 else 0)
    anchors = (np.count_nonzero(coding_weight, axis=1) if anchor_idx.shape[0]
               else np.ones(rows.n_rows, dtype=np.int64))
    return anchors.astype(np.int64) * per_anchor + (1 if shared_bias >= 0 else 0)


def coded_nonzeros_bound(prob: BinaryProblem) -> int:
    """:func:`coded_nonzeros` when no coding weight is 0 (else more), without a pass
    over the coding: ``k`` anchors per row, each with the row's non-zeros and bias."""
    rows = prob.rows
    anchor_idx, _ = prob.coding_arrays()
    bias, shared_bias = prob.kernel_bias
    k = anchor_idx.shape[1] if anchor_idx.shape[0] else 1
    per_rows = int(rows.indptr[-1]) + (rows.n_rows if bias >= 0 else 0)
    return k * per_rows + (rows.n_rows if shared_bias >= 0 else 0)


def coded_nonzeros(prob: BinaryProblem) -> int:
    """Non-zeros of the coded rows ``z_i`` written out (:func:`materialized_problem`)."""
    return int(_coded_row_lengths(prob).sum())


def materialized_problem(prob: BinaryProblem, n_threads: int = 1) -> BinaryProblem:
    """The same problem on explicit rows ``z_i = gamma(x_i) (x) [x_i; B]`` (CSR, one
    column per entry of ``W``, the bias columns included), for the solvers that need
    a design matrix (the primal Newton ``-s 2``).  Its ``w`` is the coded problem's
    ``W`` entry for entry.  Raises ValueError when the rows would take more than
    :data:`MATERIALIZE_MAX_NONZEROS` non-zeros.  The rows are written once per coding
    (the one-vs-rest problems of a coding share them, :attr:`Coding.written`), their
    row ranges in ``n_threads`` threads (most of the time is the first touch of the
    new pages)."""
    if prob.coding is None and not prob.shared_bias:
        return prob
    bias, shared_bias = prob.kernel_bias
    key = (id(prob.rows), bias, shared_bias)
    kept = prob.coding.written.get(key) if prob.coding is not None else None
    if kept is not None and kept[0] is prob.rows:
        coded = kept[1]
    else:
        coded = _written_out(prob, n_threads)
        if prob.coding is not None:
            prob.coding.written[key] = (prob.rows, coded)
    return BinaryProblem(coded, prob.y, prob.Cp, prob.Cn, -1.0, prob.rng_state,
                         sample_C=prob.sample_C)


def _written_out(prob: BinaryProblem, n_threads: int) -> Rows:
    """The rows of :func:`materialized_problem`, by the Cython kernel."""
    rows = prob.rows
    counts = _coded_row_lengths(prob)
    nnz = int(counts.sum())
    if nnz > MATERIALIZE_MAX_NONZEROS:
        raise ValueError(
            f"-s 2 with a local coding writes the coded rows out: {nnz} non-zeros "
            f"({nnz * 12 / 2 ** 20:.0f} MB) is more than the {MATERIALIZE_MAX_NONZEROS} "
            f"allowed; train with the dual solver -s 1 (the same objective)")
    anchor_idx, coding_weight = prob.coding_arrays()
    if not anchor_idx.shape[0]:
        # no coding (a shared bias only): the one-anchor coding gamma = [1], written out
        anchor_idx = np.zeros((rows.n_rows, 1), dtype=np.int32)
        coding_weight = np.ones((rows.n_rows, 1))
    else:
        order = np.argsort(anchor_idx, axis=1, kind="stable")    # columns come out sorted
        anchor_idx = np.ascontiguousarray(np.take_along_axis(anchor_idx, order, axis=1))
        coding_weight = np.ascontiguousarray(np.take_along_axis(coding_weight, order, axis=1))
    bias, shared_bias = prob.kernel_bias
    indptr = np.zeros(rows.n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    data = np.empty(int(indptr[-1]))
    indices = np.empty(int(indptr[-1]), dtype=np.int32)
    shared_pos = prob.w_size - 1 if shared_bias >= 0 else 0

    def fill(span):
        _dual_cd.coded_rows_fill(rows.data, rows.indices, rows.indptr, rows.n_features, bias,
                                 anchor_idx, coding_weight, shared_bias, shared_pos, indptr,
                                 data, indices, span[0], span[1])
    run_ranges(fill, rows.n_rows, n_threads)
    return Rows(data, indices, indptr, prob.w_size)


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
