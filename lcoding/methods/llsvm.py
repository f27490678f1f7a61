"""LL-SVM (Ladicky & Torr, ICML 2011): the locally linear SVM's training.

Training = anchors (:mod:`lcoding.local.anchors`) -> code all rows once -> one
binary problem per class (one-vs-rest, anchors and codes shared), solved by

* ``-s 1`` / ``-s 3``: LIBLINEAR's dual coordinate descent on the implicit
  features z = gamma(x) (x) [x; B] (:func:`lcoding.linear.dual_cd.solve_l2r_l1l2_svc`
  fed the coding; the m*d features are never materialised);
* ``-s 4``: Crammer-Singer on the same implicit features, one joint problem;
* ``-s 30`` / ``-s 32``: the paper's SGD (:mod:`lcoding.linear.sgd`).

Classes run in ``-m`` threads (the kernels release the GIL).  ``-K`` applies an
additive-kernel feature map first (the paper's locally additive SVM).  The
result is a :class:`~lcoding.local.model.LocalModel`.
"""
from __future__ import annotations

import math
import time

import numpy as np

from lcoding.core.classes import group_classes, one_vs_rest_jobs, class_costs
from lcoding.core.messages import Messages
from lcoding.core.model import LinearModel, Model
from lcoding.core.options import SGD_SOLVERS, SolverType, TrainParams
from lcoding.core.rows import Rows
from lcoding.core.seeds import PURPOSE_ANCHORS, PURPOSE_SOLVER, rng_state
from lcoding.core.threads import map_threads, single_threaded_blas
from lcoding.linear.dual_more import solve_mcsvm_cs
from lcoding.linear.problem import BinaryProblem, Coding
from lcoding.linear.sgd import check_sgd_params, solve_sgd_hinge
from lcoding.linear.solvers import BINARY_SOLVERS
from lcoding.local.anchors import learn_anchors
from lcoding.local.coding import CODING_NAMES, kernel_map_of
from lcoding.local.kstar import KSTAR_CODING, make_coder
from lcoding.local.model import LocalModel

# -s values that train a locally linear model
LOCAL_SOLVERS = frozenset({int(SolverType.L2R_L2LOSS_SVC_DUAL),
                           int(SolverType.L2R_L1LOSS_SVC_DUAL),
                           int(SolverType.MCSVM_CS)}) | SGD_SOLVERS


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
    ``-L 0``).  Labels follow LIBLINEAR's order (:func:`lcoding.core.classes.group_classes`).
    """
    check_local_params(params)
    info = info if info is not None else Messages(params.quiet)
    solver_type = int(params.solver_type)
    bias = float(params.bias)
    seed = params.seed
    nr_feature = rows.n_features
    labels, class_index = group_classes(y)
    nr_class = labels.size
    weighted_C = class_costs(labels, params)

    kernel_map = kernel_map_of(params)
    if kernel_map is not None:
        rows = kernel_map(rows)
    dim = rows.n_features

    coding = None
    if params.coding != 0:
        t = time.perf_counter()
        with single_threaded_blas(rows.n_rows):
            anchors = learn_anchors(rows, class_index, params.n_anchors, params.anchor_init,
                                    rng_state(seed, PURPOSE_ANCHORS, *seed_path),
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
        w = solve_mcsvm_cs(rows, class_index, nr_class, weighted_C, params, info,
                           rng_state(seed, PURPOSE_SOLVER, *seed_path, 0), coding=coding)
    else:
        solver = _binary_solver(solver_type)

        def solve(c_pos: int, y_pm: np.ndarray, Cp: float, Cn: float) -> np.ndarray:
            prob = BinaryProblem(rows, y_pm, Cp, Cn, bias,
                                 rng_state(seed, PURPOSE_SOLVER, *seed_path, c_pos),
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
