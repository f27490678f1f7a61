"""The k* coding (``-L 3``, LLC-JO; Anava & Levy 2016, algorithms.md §C.3).

``gamma(x) = argmin_{gamma in simplex} ||gamma||_2 + gamma . eta`` with
``eta_i = mu ||x - v_i||^2`` (``-u`` = mu).  The number of active anchors k*(x)
adapts per point: mu -> 0 uses all anchors uniformly, large mu the nearest one.
:class:`KStarCoding` has the :class:`~lcoding.local.coding.LocalCoding` interface
(``code`` -> fixed-width ``(anchor_idx, coding_weight)``), so every locally
linear solver (``-s 1, 3, 30, 31``) and the predictor use it unchanged; the
width is the largest k* of the batch (padding has weight 0).
"""
from __future__ import annotations

import math

import numpy as np

from lcoding.local import _kstar
from lcoding.core.rows import Rows
from lcoding.core.threads import CODE_BLOCK, run_ranges, single_threaded_blas
from lcoding.local.coding import AnchorSet, LocalCoding, is_dense, row_slice

KSTAR_CODING = 3
KSTAR_NAME = "KSTAR"


class KStarCoding(AnchorSet):
    """k* coding over fixed anchors; ``param`` = mu (> 0 finite, or 0: uniform)."""

    kind = KSTAR_CODING
    name = KSTAR_NAME

    def __init__(self, anchors: np.ndarray, param: float):
        super().__init__(anchors)
        if not math.isfinite(param) or param < 0:
            raise ValueError(f"-u {param}: mu of the k* coding must be finite and >= 0")
        self.param = float(param)
        self.last_kstar = np.zeros(0, dtype=np.int32)

    @property
    def k(self) -> int:
        """Upper bound of k* (written to model files as nr_neighbor)."""
        return self.anchors.shape[0]

    def code_full(self, rows: Rows, n_threads: int = 1, dense: bool | None = None):
        """``(anchor_idx, coding_weight, kstar, lam)`` with width n_anchors."""
        n, m = rows.n_rows, self.n_anchors
        idx = np.zeros((n, m), dtype=np.int32)
        wt = np.zeros((n, m))
        kst = np.zeros(n, dtype=np.int32)
        lam = np.zeros(n)
        if n == 0:
            return idx, wt, kst, lam
        use_dense = (is_dense(rows, self.dim) if dense is None else bool(dense)) and self.dim > 0

        def work(rng):
            a, b = rng
            part = row_slice(rows, a, b)
            _kstar.kstar_code(part.data, part.indices, part.indptr, part.n_features,
                              self.anchors, self.anchors_t, self.anchor_sq, self.param,
                              idx[a:b], wt[a:b], kst[a:b], lam[a:b], use_dense, CODE_BLOCK)

        with single_threaded_blas(n):
            run_ranges(work, n, n_threads)
        return idx, wt, kst, lam

    def code(self, rows: Rows, n_threads: int = 1, early_reject: bool = False,
             dense: bool | None = None):
        """``(anchor_idx, coding_weight)`` trimmed to the largest k* of the batch;
        the per-row k* of the last call is kept in ``last_kstar``."""
        idx, wt, kst, _ = self.code_full(rows, n_threads=n_threads, dense=dense)
        width = max(int(kst.max()), 1) if kst.size else 1
        self.last_kstar = kst
        return np.ascontiguousarray(idx[:, :width]), np.ascontiguousarray(wt[:, :width])


def make_coder(kind: int, anchors: np.ndarray, k: int, param: float):
    """The coder of ``-L kind`` over ``anchors``: k* (``-L 3``, ``k`` unused) or a
    k-nearest-anchor coding (``-L 1, 2, 6``)."""
    if kind == KSTAR_CODING:
        return KStarCoding(anchors, param)
    return LocalCoding(kind, anchors, k, param)


def kstar_coding_brute(eta: np.ndarray) -> np.ndarray:
    """Reference solution of ``min ||g|| + g . eta`` over the simplex by a generic
    convex solver (scipy SLSQP on the squared-norm-free epigraph form); tests only."""
    from scipy.optimize import minimize
    eta = np.asarray(eta, dtype=float)
    m = eta.size
    x0 = np.full(m, 1.0 / m)
    res = minimize(lambda g: math.sqrt(float(g @ g)) + float(g @ eta), x0,
                   jac=lambda g: g / math.sqrt(float(g @ g)) + eta,
                   bounds=[(0.0, 1.0)] * m, method="SLSQP",
                   constraints=[{"type": "eq", "fun": lambda g: g.sum() - 1.0,
                                 "jac": lambda g: np.ones(m)}],
                   options={"ftol": 1e-14, "maxiter": 500})
    return res.x
