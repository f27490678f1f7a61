"""The locally linear model (LL-SVM, Ladicky & Torr, ICML 2011): prediction and files.

Decision function of class c::

    f_c(x) = sum_j gamma_j(x) (w_{c,j} . [x; B])

with gamma a k-nearest-anchor coding (:mod:`lcoding.local.coding`) or the k*
coding (:mod:`lcoding.local.kstar`) and, with ``-B 1``, one bias per anchor.
Training lives with the methods that produce this model
(:mod:`lcoding.methods.llsvm`, :mod:`lcoding.methods.llc_jo`).
"""
from __future__ import annotations

import numpy as np

from lcoding.core.model import Model
from lcoding.core.options import SolverType
from lcoding.core.rows import Rows
from lcoding.core.threads import run_ranges
from lcoding.local import _knn
from lcoding.local.coding import CODING_BY_NAME, CODING_NAMES, KernelMap, LocalCoding
from lcoding.local.kstar import KSTAR_CODING, KSTAR_NAME, make_coder

FORMAT_VERSION = "1"
# the coding names this model writes to (and reads from) model files
FILE_TAGS = tuple(CODING_NAMES.values()) + (KSTAR_NAME,)


def coding_kind(name: str) -> int:
    if name == KSTAR_NAME:
        return KSTAR_CODING
    if name not in CODING_BY_NAME:
        raise ValueError(f"unknown coding {name!r}")
    return CODING_BY_NAME[name]


class LocalModel(Model):
    """A trained locally linear model: coding (anchors, k, parameter), optional
    kernel map, and ``w`` of shape ``(n_anchors * stride, nr_w)`` with row
    ``a * stride + j`` = weight of feature j (bias last) at anchor a."""

    def __init__(self, solver_type, nr_class, label, nr_feature, bias, coding: LocalCoding,
                 w, kernel_map: KernelMap | None = None, param=None):
        self._set_header(solver_type, nr_class, label, nr_feature, bias)
        self.coding = coding
        self.kernel_map = kernel_map
        self.param = param
        dim = nr_feature if kernel_map is None else kernel_map.output_features(nr_feature)
        if coding.dim != dim:
            raise ValueError(f"anchors have {coding.dim} columns, expected {dim}")
        self.w = self._checked_weights(w, coding.n_anchors * self.stride, self.nr_w)

    @property
    def dim(self) -> int:
        return self.coding.dim

    @property
    def stride(self) -> int:
        return self.coding.dim + (1 if self.bias >= 0 else 0)

    @property
    def n_anchors(self) -> int:
        return self.coding.n_anchors

    def local_weights(self, c: int = 0) -> np.ndarray:
        """``(n_anchors, stride)`` local weight vectors of decision function ``c``."""
        return self.w[:, c].reshape(self.n_anchors, self.stride)

    def transform(self, rows: Rows) -> Rows:
        """The rows the local model sees (truncated, kernel-mapped)."""
        rows = rows.truncated(self.nr_feature)
        if self.kernel_map is not None:
            rows = self.kernel_map(rows)
        return rows

    def decision_values(self, rows: Rows, n_threads: int = 1) -> np.ndarray:
        """Decision values ``(n_rows, nr_w)``; coding and the local dot products
        run in ``n_threads`` threads over row ranges."""
        rows = self.transform(rows)
        idx, wt = self.coding.code(rows, n_threads=n_threads)
        out = np.empty((rows.n_rows, self.nr_w), dtype=np.float64)
        if rows.n_rows == 0:
            return out
        # each thread takes a contiguous chunk of rows; a row's value does not
        # depend on the chunking (the kernel sums its anchors in index order)
        def work(rng):
            a, b = rng
            _knn.local_decision_values(rows.data, rows.indices, rows.indptr, idx, wt,
                                       self.w, self.dim, self.bias, out, a, b)

        run_ranges(work, rows.n_rows, n_threads)
        return out

    # ---------------------------------------------------------------- model files
    def file_header(self):
        km = self.kernel_map
        return [
            ("lcoding_format", FORMAT_VERSION),
            ("coding", self.coding.name),
            ("nr_anchor", str(self.n_anchors)),
            ("nr_neighbor", str(self.coding.k)),
            ("coding_param", format(self.coding.param, ".17g")),
            ("kernel_map", "none" if km is None else km.name),
            ("kernel_map_order", str(0 if km is None else km.order)),
            ("kernel_map_period", format(0.0 if km is None else km.period, ".17g")),
            ("nr_dim", str(self.dim)),
        ]

    def file_blocks(self):
        return [("anchors", self.coding.anchors), ("w", self.w)]

    @staticmethod
    def _nr_w(base) -> int:
        binary = int(base["nr_class"]) == 2 and int(base["solver_type"]) != SolverType.MCSVM_CS
        return 1 if binary else int(base["nr_class"])

    @classmethod
    def block_shapes(cls, header, base):
        m = int(header["nr_anchor"])
        dim = int(header["nr_dim"])
        if m < 1 or dim < 0:
            raise ValueError(f"nr_anchor {m} / nr_dim {dim} out of range")
        stride = dim + (1 if float(base["bias"]) >= 0 else 0)
        return [("anchors", (m, dim)), ("w", (m * stride, cls._nr_w(base)))]

    @classmethod
    def from_file(cls, header, base, blocks):
        coding = make_coder(coding_kind(header["coding"]), blocks["anchors"],
                            int(header["nr_neighbor"]), float(header["coding_param"]))
        km = KernelMap.from_header(header)
        return cls(base["solver_type"], base["nr_class"], base.get("label"), base["nr_feature"],
                   base["bias"], coding, blocks["w"], kernel_map=km)

    def __repr__(self):
        name = SolverType(self.solver_type).name
        km = "" if self.kernel_map is None else f", kernel_map={self.kernel_map.name}"
        return (f"LocalModel({name}, coding={self.coding.name}, n_anchors={self.n_anchors}, "
                f"k={self.coding.k}, nr_class={self.nr_class}, nr_feature={self.nr_feature}, "
                f"bias={self.bias:g}{km})")
