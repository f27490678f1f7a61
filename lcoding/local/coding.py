"""Local codings gamma(x) over anchor points, and the additive kernel maps.

A :class:`LocalCoding` holds the anchors and the coding rule (``-L``, ``-k``,
``-u``) and codes a batch of validated :class:`~lcoding.core.rows.Rows` into the
fixed-width arrays every solver and the predictor use::

    anchor_idx[n, k]     int32, the k nearest anchors, nearest first
    coding_weight[n, k]  float64, gamma_j(x) on them (each row sums to 1)

The work is done by :func:`lcoding._knn.knn_code` (BLAS distance blocks for dense
data, sparse row loops for sparse data, partial top-k selection).
:class:`KernelMap` is the explicit additive-kernel feature map applied before the
local model (``-K``, ``-O``; the LL-SVM paper's locally additive SVM).
"""
from __future__ import annotations

import math

import numpy as np

from lcoding.core.rows import Rows
from lcoding.core.threads import (CODE_BLOCK, RANGE_CHUNK, check_stop, run_ranges,
                                  single_threaded_blas)
from lcoding.local import _kernel_map, _knn

# -L value -> coding name written to model files
CODING_NAMES = {
    int(_knn.CodingKind.CODING_INVERSE): "KNN_INVERSE_DISTANCE",
    int(_knn.CodingKind.CODING_GAUSSIAN): "KNN_GAUSSIAN",
    int(_knn.CodingKind.CODING_LLC): "LLC",
}
CODING_BY_NAME = {name: kind for kind, name in CODING_NAMES.items()}

# LLC's ridge unit (Wang et al. 2010 use 1e-4 * trace(C)); -u multiplies it
LLC_RIDGE_UNIT = 1e-4
# fraction of non-zeros above which distances go through the dense BLAS path
DENSE_FRACTION = 0.05


def row_slice(rows: Rows, start: int, stop: int) -> Rows:
    """Rows ``start:stop`` as a view (no copy of the non-zeros)."""
    a, b = int(rows.indptr[start]), int(rows.indptr[stop])
    indptr = rows.indptr[start:stop + 1] - a
    return Rows(rows.data[a:b], rows.indices[a:b], np.ascontiguousarray(indptr), rows.n_features)


def is_dense(rows: Rows, n_features: int) -> bool:
    """Whether the BLAS path pays off for these rows."""
    cells = rows.n_rows * max(n_features, 1)
    return cells > 0 and rows.data.shape[0] >= DENSE_FRACTION * cells


def kernel_map_of(params) -> "KernelMap | None":
    """The additive kernel map that ``-K`` / ``-O`` of ``params`` ask for (None for
    ``-K 0``; both options are checked by their domains)."""
    return KernelMap(params.kernel_map, params.kernel_map_order) if params.kernel_map else None


# anchors per block of nearby_anchors' distance matrix, and the most anchors it is
# computed for (m^2 d multiply-adds: 2048 anchors of 784 features, 0.21 s on one core)
NEARBY_BLOCK = 512
NEARBY_MAX_ANCHORS = 4096
NEARBY_MIN_NEIGHBORS = 8
NO_NEARBY = np.zeros((0, 1), dtype=np.int32)


class AnchorSet:
    """Anchors (n_anchors, dim) with the layouts the distance kernels read: the
    transposed copy for the BLAS blocks and the squared norms.  Shared by the
    k-nearest-anchor codings and the k* coding (:mod:`lcoding.local.kstar`)."""

    def __init__(self, anchors: np.ndarray):
        anchors = np.ascontiguousarray(anchors, dtype=np.float64)
        if anchors.ndim != 2 or anchors.shape[0] < 1:
            raise ValueError(f"anchors must be a non-empty 2-D array, got shape {anchors.shape}")
        if not np.isfinite(anchors).all():
            raise ValueError("anchors contain non-finite values")
        self.anchors = anchors
        self.anchors_t = np.ascontiguousarray(anchors.T)
        self.anchor_sq = np.einsum("ij,ij->i", anchors, anchors)

    @property
    def n_anchors(self) -> int:
        return self.anchors.shape[0]

    def nearby_anchors(self, k: int) -> np.ndarray:
        """``(n_anchors, k)`` int32: each anchor's ``k`` nearest anchors (itself
        first), which bound a row's ``k`` nearest distances in the selection of
        :func:`lcoding.local._knn.knn_code` (``anchor_nn``).  Computed once per ``k``
        (in blocks of anchors: ``m^2 d`` work, paid back by coding ``m`` rows); any
        ``k`` anchors give the same codes, these the fastest."""
        cache = self.__dict__.setdefault("_nearby", {})
        if k not in cache:
            m = self.n_anchors
            out = np.empty((m, k), dtype=np.int32)
            with single_threaded_blas(m):
                for a in range(0, m, NEARBY_BLOCK):
                    b = min(m, a + NEARBY_BLOCK)
                    d2 = self.anchor_sq[a:b, None] - 2.0 * (self.anchors[a:b] @ self.anchors_t)
                    d2 += self.anchor_sq[None, :]
                    d2[np.arange(b - a), np.arange(a, b)] = -1.0     # itself first
                    near = np.argpartition(d2, k - 1, axis=1)[:, :k] if k < m else \
                        np.broadcast_to(np.arange(m), (b - a, m))
                    order = np.argsort(np.take_along_axis(d2, near, axis=1), axis=1,
                                       kind="stable")
                    out[a:b] = np.take_along_axis(near, order, axis=1)
            cache[k] = out
        return cache[k]

    @property
    def dim(self) -> int:
        return self.anchors.shape[1]


class LocalCoding(AnchorSet):
    """k-nearest-anchor coding (``-L 1``, ``2`` or ``6``) over fixed anchors.

    Parameters
    ----------
    kind : int
        1 inverse distance, 2 Gaussian soft assignment, 6 LLC reconstruction.
    anchors : ndarray of shape (n_anchors, dim)
    k : int
        Nearest anchors per point (``-k``).
    param : float
        ``-u``: the power ``p`` of ``gamma ~ d^-p`` (d = squared distance), the
        Gaussian ``beta``, or the LLC ridge in units of ``1e-4 trace(C)``.
    """

    def __init__(self, kind: int, anchors: np.ndarray, k: int, param: float):
        if kind not in CODING_NAMES:
            raise ValueError(f"coding {kind} is not a k-nearest-anchor coding "
                             f"(valid: {sorted(CODING_NAMES)})")
        super().__init__(anchors)
        anchors = self.anchors
        if not 1 <= k <= anchors.shape[0]:
            raise ValueError(f"-k {k}: the number of nearest anchors must be in "
                             f"[1, {anchors.shape[0]}] (the number of anchors)")
        if not math.isfinite(param) or (kind != int(_knn.CodingKind.CODING_INVERSE) and param < 0):
            raise ValueError(f"-u {param}: the coding parameter must be finite and >= 0")
        self.kind = int(kind)
        self.k = int(k)
        self.param = float(param)
        if self.kind == int(_knn.CodingKind.CODING_LLC):
            gram = anchors @ anchors.T
            vv = self.anchor_sq[:, None] - 2.0 * gram + self.anchor_sq[None, :]
            np.maximum(vv, 0.0, out=vv)
            np.fill_diagonal(vv, 0.0)
            self.anchor_sqdist = np.ascontiguousarray(vv)
        else:
            self.anchor_sqdist = np.zeros((0, 0))

    @property
    def name(self) -> str:
        return CODING_NAMES[self.kind]

    @property
    def kernel_param(self) -> float:
        return self.param * LLC_RIDGE_UNIT if self.kind == int(_knn.CodingKind.CODING_LLC) else self.param

    def code(self, rows: Rows, n_threads: int = 1, early_reject: bool = False,
             dense: bool | None = None):
        """``(anchor_idx, coding_weight)`` of every row (columns >= dim ignored)."""
        n = rows.n_rows
        idx = np.empty((n, self.k), dtype=np.int32)
        wt = np.empty((n, self.k), dtype=np.float64)
        if n == 0:
            return idx, wt
        use_dense = is_dense(rows, self.dim) if dense is None else bool(dense)
        # the bound of the k nearest (nearby_anchors): paid back from m rows on, and
        # a gain from 8 neighbours on (ijcnn1, 200 anchors: k = 16 1.17 -> 0.80 us a
        # row, k = 4 even); the kernel drops it where it admits too many anchors
        nearby = self.nearby_anchors(self.k) if n >= self.n_anchors and \
            self.k >= NEARBY_MIN_NEIGHBORS and self.n_anchors <= NEARBY_MAX_ANCHORS \
            and not early_reject else NO_NEARBY

        def work(rng):
            a, b = rng
            part = row_slice(rows, a, b)
            _knn.knn_code(part.data, part.indices, part.indptr, part.n_features,
                          self.anchors, self.anchors_t, self.anchor_sq, self.anchor_sqdist,
                          self.kind, self.kernel_param, idx[a:b], wt[a:b],
                          use_dense, early_reject, CODE_BLOCK, nearby)

        with single_threaded_blas(n):
            run_ranges(work, n, n_threads)
        return idx, wt

    def sq_distances(self, rows: Rows) -> np.ndarray:
        """All squared distances to the anchors, ``(n_rows, n_anchors)``."""
        out = np.empty((rows.n_rows, self.n_anchors))
        with single_threaded_blas(rows.n_rows):
            _knn.sq_distances(rows.data, rows.indices, rows.indptr, rows.n_features,
                              self.anchors, self.anchors_t, self.anchor_sq, out,
                              is_dense(rows, self.dim))
        return out


# ----------------------------------------------------------------- kernel maps
KERNEL_MAP_NAMES = {0: "none", 1: "intersection", 2: "chi2", 3: "hellinger"}
KERNEL_MAP_BY_NAME = {name: kind for kind, name in KERNEL_MAP_NAMES.items()}


def _spectrum(kind: int, omega: np.ndarray) -> np.ndarray:
    if kind == 1:   # intersection: kappa(w) = 2 / (pi (1 + 4 w^2))
        return 2.0 / (math.pi * (1.0 + 4.0 * omega ** 2))
    if kind == 2:   # chi-squared: kappa(w) = sech(pi w)
        return 1.0 / np.cosh(math.pi * omega)
    raise ValueError(f"kernel map {kind} has no spectrum")


def default_period(kind: int, order: int) -> float:
    """VLFeat's default period (uniform window) of the homogeneous kernel map."""
    if kind == 1:
        period = 2.38 * math.log(order + 0.8) + 5.6
    elif kind == 2:
        period = 5.86 * math.sqrt(order) + 3.65
    else:
        raise ValueError(f"kernel map {kind} has no period")
    return max(period, 1.0)


class KernelMap:
    """Explicit feature map of an additive kernel (``-K``), order ``n`` (``-O``).

    ``kind`` 1 intersection, 2 chi-squared (homogeneous kernel map, 2n+1 values per
    input feature), 3 Hellinger (exact map ``sign(x) sqrt(|x|)``, one value).
    """

    def __init__(self, kind: int, order: int = 1, period: float | None = None):
        if kind not in (1, 2, 3):
            raise ValueError(f"-K {kind}: kernel map must be 0, 1, 2 or 3")
        if kind != 3 and order < 0:
            raise ValueError(f"-O {order}: the kernel map order must be >= 0")
        self.kind = int(kind)
        self.order = int(order) if kind != 3 else 0
        if kind == 3:
            self.period = 0.0
            self.step = 0.0
            self.kappa = np.zeros(0)
        else:
            self.period = float(default_period(kind, self.order) if period is None else period)
            if not self.period > 0:
                raise ValueError(f"kernel map period must be > 0, got {self.period}")
            self.step = 2.0 * math.pi / self.period
            self.kappa = np.ascontiguousarray(
                _spectrum(kind, self.step * np.arange(self.order + 1)), dtype=np.float64)

    @property
    def name(self) -> str:
        return KERNEL_MAP_NAMES[self.kind]

    @property
    def width(self) -> int:
        return 1 if self.kind == 3 else 2 * self.order + 1

    def output_features(self, n_features: int) -> int:
        return n_features * self.width

    def file_header(self) -> list:
        """The model-file keys of this map (read back by :meth:`from_header`)."""
        return [("kernel_map", self.name), ("kernel_map_order", str(self.order)),
                ("kernel_map_period", format(self.period, ".17g"))]

    @staticmethod
    def from_header(header) -> "KernelMap | None":
        """The map a model file's keys describe; ``None`` for ``kernel_map none`` or
        no key at all."""
        name = header.get("kernel_map", "none")
        if name not in KERNEL_MAP_BY_NAME:
            raise ValueError(f"unknown kernel_map {name!r}")
        if name == "none":
            return None
        return KernelMap(KERNEL_MAP_BY_NAME[name], int(header["kernel_map_order"]),
                         float(header["kernel_map_period"]) or None)

    def __call__(self, rows: Rows) -> Rows:
        w = self.width
        nnz = rows.data.shape[0] * w
        if self.output_features(rows.n_features) > np.iinfo(np.int32).max:
            raise ValueError("the kernel map output exceeds the int32 feature index range")
        # one value per input value (Hellinger): the pattern is the input's, so the
        # mapped rows share its indices and indptr (on MNIST x 21 shifts, 765 MB less)
        same_pattern = w == 1
        chunk = 4 * RANGE_CHUNK
        try:
            data = np.empty(nnz)
            if same_pattern:
                most = max((int(rows.indptr[min(rows.n_rows, a + chunk)] - rows.indptr[a])
                            for a in range(0, rows.n_rows, chunk)), default=0)
                indices = np.empty(most, dtype=np.int32)      # scratch per chunk
            else:
                indices = np.empty(nnz, dtype=np.int32)
        except MemoryError:
            raise MemoryError(f"-K {self.kind} -O {self.order}: the mapped rows need {nnz} "
                              f"values ({nnz * 12 / 2 ** 30:.1f} GiB)") from None
        indptr = np.empty((chunk if same_pattern else rows.n_rows) + 1, dtype=np.int64)
        # in chunks of rows (each row's values keep their place: value p of the input
        # becomes values p*w .. p*w+w-1), with a Ctrl-C check between them
        for a in range(0, rows.n_rows, chunk):
            check_stop()
            b = min(rows.n_rows, a + chunk)
            p0, p1 = int(rows.indptr[a]) * w, int(rows.indptr[b]) * w
            part = row_slice(rows, a, b)
            if same_pattern:
                _kernel_map.homogeneous_map(part.data, part.indices, part.indptr, self.kappa,
                                            self.step, data[p0:p1], indices[:p1 - p0],
                                            indptr[:b - a + 1])
                continue
            _kernel_map.homogeneous_map(part.data, part.indices, part.indptr, self.kappa,
                                        self.step, data[p0:p1], indices[p0:p1], indptr[a:b + 1])
            indptr[a:b + 1] += p0
        if same_pattern:
            return Rows(data, rows.indices, rows.indptr, self.output_features(rows.n_features))
        if rows.n_rows == 0:
            indptr[0] = 0
        return Rows(data, indices, indptr, self.output_features(rows.n_features))
