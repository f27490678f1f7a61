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

from lcoding.core.model import Model, ModelFieldError, check_count, check_number
from lcoding.core.options import TRAIN_OPTIONS, SolverType
from lcoding.core.rows import INT32_MAX, Rows
from lcoding.core.threads import run_ranges
from lcoding.local import _knn
from lcoding.local.coding import (CODING_BY_NAME, CODING_NAMES, KERNEL_MAP_BY_NAME, KernelMap,
                                  LocalCoding)
from lcoding.local.kstar import KSTAR_CODING, KSTAR_NAME, make_coder

FORMAT_VERSION = "1"
# the coding names this model writes to (and reads from) model files
FILE_TAGS = tuple(CODING_NAMES.values()) + (KSTAR_NAME,)
# solver types that train a locally linear model: LL-SVM (-s 1, 2, 3, 4, 30, 32) and
# the joint SGD (-s 31, 33), which codes with KNN_GAUSSIAN (-L 2) or KSTAR (-L 3)
JOINT_FILE_SOLVER_TYPES = frozenset({int(SolverType.LLC_JOINT_SGD),
                                     int(SolverType.LLC_JOINT_SGD_AVERAGED)})
FILE_SOLVER_TYPES = frozenset({int(SolverType.L2R_L2LOSS_SVC_DUAL),
                               int(SolverType.L2R_L2LOSS_SVC),
                               int(SolverType.L2R_L1LOSS_SVC_DUAL), int(SolverType.MCSVM_CS),
                               int(SolverType.L2R_L1LOSS_SVC_SGD),
                               int(SolverType.L2R_L1LOSS_SVC_SGD_AVERAGED)}) \
    | JOINT_FILE_SOLVER_TYPES
JOINT_FILE_CODINGS = frozenset({int(CODING_BY_NAME["KNN_GAUSSIAN"]), KSTAR_CODING})


def max_kernel_map_order() -> int:
    """The largest kernel map order training accepts: the upper end of ``-O``'s
    domain in the option table (100 when the table gives none)."""
    for opt in TRAIN_OPTIONS:
        if opt.flag == "-O":
            hi = getattr(getattr(opt, "domain", None), "hi", None)
            if hi is not None:
                return int(hi)
    return 100


def checked_kernel_map_header(header) -> int | None:
    """Values per input feature of the kernel map the keys describe (None: no map),
    checked as training checks ``-K`` / ``-O`` and without building the map (whose
    spectrum table has ``kernel_map_order + 1`` entries)."""
    name = header.get("kernel_map", "none")
    if name not in KERNEL_MAP_BY_NAME:
        raise ModelFieldError("kernel_map", f"unknown kernel_map {name!r} (known: "
                                            f"{', '.join(KERNEL_MAP_BY_NAME)})")
    if name == "none":
        return None
    order = check_count("kernel_map_order", header.get("kernel_map_order"), 0,
                        max_kernel_map_order())
    period = check_number("kernel_map_period", header.get("kernel_map_period"), lo=0)
    if KERNEL_MAP_BY_NAME[name] == 3:       # Hellinger: exact, one value, no order
        if order != 0 or period != 0:
            raise ModelFieldError("kernel_map_order", "the hellinger map has no order and no "
                                                      "period (both 0)")
        return 1
    return 2 * order + 1


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

    def _decision_values(self, rows: Rows, n_threads: int = 1) -> np.ndarray:
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
        binary = int(base["nr_class"]) == 2 and \
            int(base.get("solver_type", 1)) != SolverType.MCSVM_CS
        return 1 if binary else int(base["nr_class"])

    # the header keys of this model's files (LocalModel.file_header)
    _HEADER_KEYS = frozenset({"lcoding_format", "coding", "nr_anchor", "nr_neighbor",
                              "coding_param", "kernel_map", "kernel_map_order",
                              "kernel_map_period", "nr_dim"})

    @classmethod
    def block_shapes(cls, header, base):
        """Block shapes of a model file, after the checks that need no block: the keys,
        the solver type, ``nr_anchor >= 1`` and ``nr_dim`` = the input features as the
        ``kernel_map`` (if any) maps them.  (Keys absent from ``header`` / ``base`` are
        not checked: the model-file reader passes them all.)"""
        unknown = set(header) - cls._HEADER_KEYS
        if unknown:
            key = sorted(unknown)[0]
            raise ModelFieldError(key, f"unknown key(s) {', '.join(sorted(unknown))} for the "
                                       f"{header.get('coding')} coding")
        if "solver_type" in base and int(base["solver_type"]) not in FILE_SOLVER_TYPES:
            raise ModelFieldError("solver_type", f"solver_type {SolverType(base['solver_type']).name}"
                                                 f" does not train a locally linear model")
        if "coding" in header:
            coding_kind(header["coding"])
        m = check_count("nr_anchor", header["nr_anchor"], 1)
        dim = check_count("nr_dim", header["nr_dim"], 0, INT32_MAX)
        width = checked_kernel_map_header(header)
        if "nr_feature" in base:
            nr_feature = int(base["nr_feature"])
            expected = nr_feature if width is None else nr_feature * width
            if dim != expected:
                raise ModelFieldError("nr_dim", f"nr_dim {dim} differs from {expected}, the "
                                                f"{nr_feature} features"
                                                + ("" if width is None else f" times {width} "
                                                   f"values per feature of the kernel map"))
        stride = dim + (1 if float(base["bias"]) >= 0 else 0)
        return [("anchors", (m, dim)), ("w", (m * stride, cls._nr_w(base)))]

    @classmethod
    def from_file(cls, header, base, blocks):
        kind = coding_kind(header["coding"])
        m = blocks["anchors"].shape[0]
        k = check_count("nr_neighbor", header["nr_neighbor"], 1, m)
        if kind == KSTAR_CODING and k != m:
            raise ModelFieldError("nr_neighbor", f"nr_neighbor {k}: the k* coding writes the "
                                                 f"number of anchors ({m})")
        param = check_number("coding_param", header["coding_param"])
        if kind != CODING_BY_NAME["KNN_INVERSE_DISTANCE"] and param < 0:
            raise ModelFieldError("coding_param", f"coding_param {param:g}: the {header['coding']}"
                                                  f" coding takes a parameter >= 0")
        if int(base["solver_type"]) in JOINT_FILE_SOLVER_TYPES and kind not in JOINT_FILE_CODINGS:
            raise ModelFieldError("coding", f"coding {header['coding']}: -s 31 and 33 train the "
                                            f"KNN_GAUSSIAN and KSTAR codings only")
        try:
            coding = make_coder(kind, blocks["anchors"], k, param)
        except ValueError as err:
            raise ModelFieldError("anchors", str(err)) from None
        km = KernelMap.from_header(header)
        return cls(base["solver_type"], base["nr_class"], base.get("label"), base["nr_feature"],
                   base["bias"], coding, blocks["w"], kernel_map=km)

    def __repr__(self):
        name = SolverType(self.solver_type).name
        km = "" if self.kernel_map is None else f", kernel_map={self.kernel_map.name}"
        return (f"LocalModel({name}, coding={self.coding.name}, n_anchors={self.n_anchors}, "
                f"k={self.coding.k}, nr_class={self.nr_class}, nr_feature={self.nr_feature}, "
                f"bias={self.bias:g}{km})")
