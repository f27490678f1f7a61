"""LL-SVM (Ladicky & Torr, ICML 2011): the locally linear SVM's training.

Training = anchors (:mod:`lcoding.local.anchors`) -> code all rows once -> one
binary problem per class (one-vs-rest, anchors and codes shared), solved by

* ``-s 1`` / ``-s 3``: LIBLINEAR's dual coordinate descent on the implicit
  features z = gamma(x) (x) [x; B] (:func:`lcoding.linear.dual_cd.solve_l2r_l1l2_svc`
  fed the coding; the m*d features are never materialised), ``-s 1`` handing a
  stalled solve over to the primal Newton solver
  (:func:`lcoding.linear.dual_cd.train_l2loss_svc_dual_switching`);
* ``-s 2``: LIBLINEAR's primal Newton solver on the same objective as ``-s 1``, its
  products on the coded rows (:class:`lcoding.linear._newton.ErmObjective`; for
  problems where the dual CD crawls: many rows, few coded dimensions, small C);
* ``-s 4``: Crammer-Singer on the same implicit features, one joint problem;
* ``-s 30`` / ``-s 32``: the paper's SGD (:mod:`lcoding.linear.sgd`).

Classes run in ``-m`` threads (the kernels release the GIL).  ``-K`` applies an
additive-kernel feature map first (the paper's locally additive SVM).  The
result is a :class:`~lcoding.local.model.LocalModel`.
"""
from __future__ import annotations

import time

import numpy as np

from lcoding.core.classes import group_classes, one_vs_rest_jobs, class_costs
from lcoding.core.messages import Messages, event
from lcoding.core.options import SGD_SOLVERS, SolverType, TrainParams
from lcoding.core.params import CodingType, LLSVMParams
from lcoding.core.rows import Rows
from lcoding.core.seeds import PURPOSE_ANCHORS, PURPOSE_SOLVER, rng_state
from lcoding.core.threads import map_threads, single_threaded_blas
from lcoding.linear.cocoa import parallel_binary_solver
from lcoding.linear.dual_more import solve_mcsvm_cs
from lcoding.linear.newton import train_l2r_l2loss_svc
from lcoding.linear.problem import BinaryProblem, Coding, reported_solve
from lcoding.linear.sgd import check_sgd_params
from lcoding.linear.solvers import METHOD_BINARY_SOLVERS
from lcoding.local.anchors import learn_anchors
from lcoding.local.coding import kernel_map_of
from lcoding.local.kstar import KSTAR_CODING, make_coder
from lcoding.local.model import LocalModel

# -s values that train a locally linear model
LOCAL_SOLVERS = frozenset({int(SolverType.L2R_L2LOSS_SVC_DUAL),
                           int(SolverType.L2R_L2LOSS_SVC),
                           int(SolverType.L2R_L1LOSS_SVC_DUAL),
                           int(SolverType.MCSVM_CS)}) | SGD_SOLVERS
LLSVM_CODINGS = (CodingType.INVERSE_DISTANCE, CodingType.GAUSSIAN, CodingType.KSTAR,
                 CodingType.LLC)


def check_local_params(params: TrainParams) -> None:
    """Consistency of the LL-SVM options beyond their domains (messages name the option)."""
    st = int(params.solver_type)
    if st not in LOCAL_SOLVERS:
        raise ValueError(
            f"-s {st} ({SolverType(st).name}) with -L {params.coding}: locally linear "
            f"training supports -s 1, 2, 3, 4, 30 and 32")
    if params.coding not in LLSVM_CODINGS:
        raise ValueError(f"-L {params.coding}: LL-SVM codings are "
                         f"{', '.join(str(int(c)) for c in LLSVM_CODINGS)}")
    if params.coding != KSTAR_CODING and not params.n_neighbors <= params.n_anchors:
        raise ValueError(f"-k {params.n_neighbors}: must be between 1 and -A ({params.n_anchors})")
    if st in SGD_SOLVERS:
        check_sgd_params(params)


def learn_local_anchors(rows: Rows, class_index: np.ndarray, mp: LLSVMParams, seed: int,
                        seed_path: tuple = (), n_threads: int = 1, events=None) -> np.ndarray:
    """The anchors ``-a``, ``-A``, ``-I``, ``-M`` ask for, learned on ``rows`` (all the
    training rows here; a sample of them in :mod:`lcoding.dask`); k-means assigns the
    rows in ``n_threads`` threads (``-m``; the same anchors for any count)."""
    with single_threaded_blas(rows.n_rows):
        return learn_anchors(rows, class_index, mp.anchors.n_anchors, mp.anchors.init,
                             rng_state(seed, PURPOSE_ANCHORS, *seed_path),
                             max_iter=mp.anchors.kmeans_iter,
                             batch_size=mp.anchors.kmeans_batch, n_threads=n_threads,
                             events=events)


def local_coder(mp: LLSVMParams, anchors: np.ndarray):
    """The coding ``-L``, ``-k``, ``-u`` over ``anchors`` (what the model stores)."""
    return make_coder(mp.coding, anchors, min(mp.n_neighbors, anchors.shape[0]), mp.coding_param)


def train_local_model(y: np.ndarray, rows: Rows, params: TrainParams, info: Messages | None = None,
                      seed_path: tuple = (), sample_weight: np.ndarray | None = None) -> LocalModel:
    """Train an LL-SVM (``-L 1, 2, 3, 6``; one-vs-rest ``-s 1, 3, 30, 32`` or
    Crammer-Singer ``-s 4``).  Labels follow LIBLINEAR's order
    (:func:`lcoding.core.classes.group_classes`).  ``sample_weight`` (one-vs-rest
    solvers only) multiplies each row's C."""
    check_local_params(params)
    if sample_weight is not None and int(params.solver_type) == SolverType.MCSVM_CS:
        raise ValueError("sample_weight: -s 4 (MCSVM_CS, Crammer-Singer) cannot take "
                         "per-sample weights; use -s 1, 3, 30 or 32")
    mp = LLSVMParams.from_train_params(params)
    info = info if info is not None else Messages(params.quiet)
    solver_type = int(params.solver_type)
    bias = float(params.bias)
    seed = params.seed
    nr_feature = rows.n_features
    labels, class_index = group_classes(y)
    nr_class = labels.size
    costs = class_costs(labels, params)

    kernel_map = kernel_map_of(params)
    if kernel_map is not None:
        rows = kernel_map(rows)

    t = time.perf_counter()
    anchors = learn_local_anchors(rows, class_index, mp, seed, seed_path, params.n_threads,
                                  events=lambda line: event(info, line))
    coder = local_coder(mp, anchors)
    t_anchor = time.perf_counter() - t
    idx, wt = coder.code(rows, n_threads=params.n_threads)
    coding = Coding(idx, wt, coder.n_anchors)
    info(f"anchors: {coder.n_anchors} ({t_anchor:.2f} s), coding {coder.name} "
         f"k={coder.k} ({time.perf_counter() - t - t_anchor:.2f} s)\n")
    if solver_type == SolverType.MCSVM_CS:
        # Crammer-Singer on the implicit features: one joint problem over the classes
        # (the paper's alternative to one-vs-all), anchors and codes shared
        w = solve_mcsvm_cs(rows, class_index, nr_class, costs, params, info,
                           rng_state(seed, PURPOSE_SOLVER, *seed_path, 0), coding=coding)
    else:
        solver = METHOD_BINARY_SOLVERS[solver_type]

        def solve(job) -> np.ndarray:
            c_pos, y_pm, Cp, Cn = job
            prob = BinaryProblem(rows, y_pm, Cp, Cn, bias,
                                 rng_state(seed, PURPOSE_SOLVER, *seed_path, c_pos),
                                 coding=coding, sample_C=None if sample_weight is None
                                 else np.where(y_pm > 0, Cp, Cn) * sample_weight)
            return reported_solve(info, labels, c_pos, nr_class, solver, prob, params, info).w

        jobs = one_vs_rest_jobs(class_index, nr_class, costs, params.C, rows.n_rows)
        # one binary -s 1 / -s 3 problem and -m > 1: CoCoA+ over -m row partitions;
        # -s 2: the Newton solver's products over -m row ranges
        solver = parallel_binary_solver(solver_type, len(jobs), params.n_threads,
                                        newton_when_stalled=True) or solver
        if solver_type == SolverType.L2R_L2LOSS_SVC and len(jobs) == 1 and params.n_threads > 1:
            def solver(prob, params, info):
                return train_l2r_l2loss_svc(prob, params, info, n_threads=params.n_threads)
        w = np.column_stack(map_threads(solve, jobs, params.n_threads))
    return LocalModel(solver_type, nr_class, labels, nr_feature, bias, coder, w,
                      kernel_map=kernel_map, param=params)
