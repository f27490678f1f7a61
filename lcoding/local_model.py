"""Locally linear SVM (LL-SVM, Ladicky & Torr, ICML 2011): model and training.

Decision function of class c (algorithms.md §1.1)::

    f_c(x) = sum_j gamma_j(x) (w_{c,j} . [x; B])

with gamma a k-nearest-anchor coding (:mod:`lcoding.coding`) and, with ``-B 1``,
one bias per anchor.  Training = anchors (:mod:`lcoding.anchors`) -> code all
rows once -> one binary problem per class (one-vs-rest, anchors and codes
shared), solved by

* ``-s 1`` / ``-s 3``: LIBLINEAR's dual coordinate descent on the implicit
  features z = gamma(x) (x) [x; B] (:func:`lcoding.solvers.solve_l2r_l1l2_svc`
  fed the coding; the m*d features are never materialised);
* ``-s 30``: the paper's SGD (:mod:`lcoding.sgd`).

Classes run in ``-m`` threads (the kernels release the GIL).  ``-K`` applies an
additive-kernel feature map first (the paper's locally additive SVM).
"""
from __future__ import annotations

import math
import time

import numpy as np

from lcoding import _knn
from lcoding._validation import Rows
from lcoding.anchors import learn_anchors
from lcoding.coding import (CODING_BY_NAME, CODING_NAMES, KernelMap, LocalCoding, kernel_map_of,
                            map_threads, run_ranges, single_threaded_blas)
from lcoding.kstar import KSTAR_CODING, KSTAR_NAME, make_coder
from lcoding.model import LinearModel, Model
from lcoding.options import JOINT_SOLVERS, SGD_SOLVERS, SolverType, TrainParams
from lcoding.sgd import check_sgd_params, solve_sgd_hinge
from lcoding.solvers import BINARY_SOLVERS, BinaryProblem, Coding, Messages

FORMAT_VERSION = "1"
# -s values that train a locally linear model
LOCAL_SOLVERS = frozenset({int(SolverType.L2R_L2LOSS_SVC_DUAL),
                           int(SolverType.L2R_L1LOSS_SVC_DUAL),
                           int(SolverType.MCSVM_CS)}) | SGD_SOLVERS

# seed purposes (lcoding.training.rng_state paths)
_PURPOSE_SOLVER = 1      # same path as training.py, so -A 1 -k 1 equals the linear solver
_PURPOSE_ANCHORS = 10


def coding_kind(name: str) -> int:
    if name == KSTAR_NAME:
        return KSTAR_CODING
    if name not in CODING_BY_NAME:
        raise ValueError(f"unknown coding {name!r}")
    return CODING_BY_NAME[name]


def _rng_state(seed, *purpose):
    from lcoding.training import rng_state
    return rng_state(seed, *purpose)


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


# coding name -> model class (read by lcoding.model_io)
MODEL_TYPES = {name: LocalModel for name in CODING_NAMES.values()}
MODEL_TYPES[KSTAR_NAME] = LocalModel


def _register_model_types() -> None:
    try:
        from lcoding import model_io
    except ImportError:       # the model-file module is optional for training
        return
    table = getattr(model_io, "MODEL_TYPES", None)
    if isinstance(table, dict):
        for name, cls in MODEL_TYPES.items():
            table.setdefault(name, cls)


_register_model_types()


def check_local_params(params: TrainParams) -> None:
    """Consistency of the locally linear options (messages name the option)."""
    st = int(params.solver_type)
    if st not in LOCAL_SOLVERS:
        raise ValueError(
            f"-s {st} ({SolverType(st).name}) with -L {params.coding}: locally linear "
            f"training supports -s 1, 3, 4, 30 and 32")
    if params.coding not in (0, KSTAR_CODING) and params.coding not in CODING_NAMES:
        raise ValueError(
            f"-L {params.coding}: this coding is not available in this version of lcoding "
            f"(available: 0, {', '.join(str(c) for c in sorted(CODING_NAMES))})")
    if params.n_anchors < 1:
        raise ValueError(f"-A {params.n_anchors}: the number of anchors must be >= 1")
    if params.coding != KSTAR_CODING and not 1 <= params.n_neighbors <= params.n_anchors:
        raise ValueError(f"-k {params.n_neighbors}: must be between 1 and -A ({params.n_anchors})")
    if not math.isfinite(params.coding_param):
        raise ValueError(f"-u {params.coding_param}: must be finite")
    if params.n_threads < 1:
        raise ValueError(f"-m {params.n_threads}: the number of threads must be >= 1")
    if params.kmeans_iter < 0:
        raise ValueError(f"-I {params.kmeans_iter}: must be >= 0")
    if params.kmeans_batch < 0:
        raise ValueError(f"-M {params.kmeans_batch}: must be >= 0")
    kernel_map_of(params)           # checks -K and -O
    if st in SGD_SOLVERS:
        check_sgd_params(params)


def _binary_solver(solver_type: int):
    if solver_type in SGD_SOLVERS:
        return solve_sgd_hinge
    return BINARY_SOLVERS[solver_type]


def train_local_model(y: np.ndarray, rows: Rows, params: TrainParams, info: Messages | None = None,
                      seed_path: tuple = ()) -> Model:
    """Train an LL-SVM (``-L 1/2/6``; one-vs-rest ``-s 1, 3, 30, 32`` or Crammer-Singer
    ``-s 4``) or a linear SGD model (``-s 30 -L 0``).

    Returns a :class:`LocalModel` (a :class:`~lcoding.model.LinearModel` for
    ``-L 0``).  Labels follow LIBLINEAR's order (:func:`lcoding.training.group_classes`).
    """
    from lcoding.training import _weighted_C, group_classes, one_vs_rest_jobs
    if params.coding in (4, 5):     # anchor planes (G-OCC / C-OCC), lcoding/occ.py
        from lcoding.occ import train_occ_model
        return train_occ_model(y, rows, params, info, seed_path=seed_path)
    if int(params.solver_type) in JOINT_SOLVERS:   # lcoding/llc_jo.py
        from lcoding.llc_jo import train_joint
        return train_joint(y, rows, params, info, seed_path=seed_path)
    check_local_params(params)
    info = info if info is not None else Messages(params.quiet)
    solver_type = int(params.solver_type)
    bias = float(params.bias)
    seed = params.seed
    nr_feature = rows.n_features
    labels, class_index = group_classes(y)
    nr_class = labels.size
    weighted_C = _weighted_C(labels, params)

    kernel_map = kernel_map_of(params)
    if kernel_map is not None:
        rows = kernel_map(rows)
    dim = rows.n_features

    coding = None
    if params.coding != 0:
        t = time.perf_counter()
        with single_threaded_blas(rows.n_rows):
            anchors = learn_anchors(rows, class_index, params.n_anchors, params.anchor_init,
                                    _rng_state(seed, _PURPOSE_ANCHORS, *seed_path),
                                    max_iter=params.kmeans_iter, batch_size=params.kmeans_batch)
        coder = make_coder(params.coding, anchors, min(params.n_neighbors, anchors.shape[0]),
                           params.coding_param)
        t_anchor = time.perf_counter() - t
        idx, wt = coder.code(rows, n_threads=params.n_threads)
        coding = Coding(idx, wt, coder.n_anchors)
        info(f"anchors: {coder.n_anchors} ({t_anchor:.2f} s), coding {coder.name} "
             f"k={coder.k} ({time.perf_counter() - t - t_anchor:.2f} s)\n")
    if solver_type == SolverType.MCSVM_CS:
        # Crammer-Singer on the implicit features: one joint problem over the classes
        # (the paper's alternative to one-vs-all), anchors and codes shared
        from lcoding.solvers_dual_more import solve_mcsvm_cs
        w = solve_mcsvm_cs(rows, class_index, nr_class, weighted_C, params, info,
                           _rng_state(seed, _PURPOSE_SOLVER, *seed_path, 0), coding=coding)
    else:
        solver = _binary_solver(solver_type)

        def solve(c_pos: int, y_pm: np.ndarray, Cp: float, Cn: float) -> np.ndarray:
            prob = BinaryProblem(rows, y_pm, Cp, Cn, bias,
                                 _rng_state(seed, _PURPOSE_SOLVER, *seed_path, c_pos),
                                 coding=coding)
            return solver(prob, params, info).w

        jobs = one_vs_rest_jobs(class_index, nr_class, weighted_C, params.C, rows.n_rows)
        n_anchors = 1 if coding is None else coding.n_anchors
        stride = dim + (1 if bias >= 0 else 0)
        w = np.zeros((n_anchors * stride, 1 if nr_class == 2 else nr_class))
        results = map_threads(lambda job: solve(*job), jobs, params.n_threads)
        for c, res in enumerate(results):
            w[:, c] = res

    if coding is None:
        return LinearModel(solver_type, nr_class, labels, nr_feature, bias, w, param=params)
    return LocalModel(solver_type, nr_class, labels, nr_feature, bias, coder, w,
                      kernel_map=kernel_map, param=params)
