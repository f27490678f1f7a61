"""LIBLINEAR's solvers as a method: one linear model ``w . [x; B]`` per class.

Regression (``-s 11, 12, 13``) and one-class (``-s 21``) train one vector;
Crammer-Singer (``-s 4``) one joint problem; every other solver runs its binary
problems one-vs-rest (:func:`lcoding.core.classes.one_vs_rest_jobs`), the classes
in ``-m`` threads, each with its own seeded stream, so the model does not depend
on the thread count.
"""
from __future__ import annotations

import numpy as np

from lcoding.core.classes import class_costs, group_classes, one_vs_rest_jobs
from lcoding.core.messages import Messages
from lcoding.core.model import LinearModel
from lcoding.core.options import REGRESSION_SOLVERS, SGD_SOLVERS, SolverType, TrainParams
from lcoding.core.rows import Rows
from lcoding.core.seeds import PURPOSE_SOLVER, rng_state
from lcoding.core.threads import map_threads
from lcoding.linear.cocoa import parallel_binary_solver
from lcoding.linear.problem import BinaryProblem, reported_solve
from lcoding.linear.sgd import check_sgd_params
from lcoding.linear.solvers import (BINARY_SOLVERS, METHOD_BINARY_SOLVERS, MULTICLASS_SOLVERS,
                                    ONECLASS_SOLVERS, REGRESSION_SOLVERS_TABLE)

# -s values this method trains
SOLVERS = frozenset(BINARY_SOLVERS) | frozenset(MULTICLASS_SOLVERS) \
    | frozenset(REGRESSION_SOLVERS_TABLE) | frozenset(ONECLASS_SOLVERS)


def check_linear_params(params: TrainParams) -> None:
    """What only the linear method checks (LIBLINEAR's own checks run for every method)."""
    if params.kernel_map != 0:
        # only the local codings and -s 40, 41 apply -K: refuse it instead of ignoring it
        raise ValueError(f"-K {params.kernel_map} needs a local coding (-L 1-6) or "
                         f"-s 40, 41; -s {params.solver_type} without -L does not use it")
    if int(params.solver_type) not in SOLVERS:
        raise ValueError(f"-s {params.solver_type} ({SolverType(params.solver_type).name}) "
                         f"does not train a linear model")
    if int(params.solver_type) in SGD_SOLVERS:
        check_sgd_params(params)


def train_linear_model(y: np.ndarray, rows: Rows, params: TrainParams,
                       info: Messages | None = None, seed_path: tuple = (),
                       sample_weight: np.ndarray | None = None, *,
                       newton_when_stalled: bool = False) -> LinearModel:
    """Train a LIBLINEAR model on validated rows (without the bias column).
    ``sample_weight`` multiplies each row's C (every solver but -s 4 and -s 21).
    ``newton_when_stalled``: the solvers of
    :data:`~lcoding.linear.solvers.METHOD_BINARY_SOLVERS` (a method's linear solve on
    mapped rows) instead of LIBLINEAR's own."""
    check_linear_params(params)
    if sample_weight is not None and int(params.solver_type) in (SolverType.MCSVM_CS,
                                                                 SolverType.ONECLASS_SVM):
        raise ValueError(f"sample_weight: -s {int(params.solver_type)} "
                         f"({SolverType(params.solver_type).name}) cannot take per-sample "
                         f"weights")
    sw = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    info = info if info is not None else Messages(params.quiet)
    solver_type = int(params.solver_type)
    bias = float(params.bias)
    nr_feature = rows.n_features
    w_size = nr_feature + (1 if bias >= 0 else 0)
    seed = params.seed

    if solver_type in REGRESSION_SOLVERS:
        prob = BinaryProblem(rows, y.astype(np.float64), params.C, params.C, bias,
                             rng_state(seed, PURPOSE_SOLVER, *seed_path, 0),
                             sample_C=None if sw is None else params.C * sw)
        res = REGRESSION_SOLVERS_TABLE[solver_type](prob, params, info)
        return LinearModel(solver_type, 2, None, nr_feature, bias, res.w.reshape(w_size, 1),
                           param=params)
    if solver_type == SolverType.ONECLASS_SVM:
        w, rho = ONECLASS_SOLVERS[solver_type](rows, params, info,
                                               rng_state(seed, PURPOSE_SOLVER, *seed_path, 0))
        return LinearModel(solver_type, 2, None, nr_feature, bias,
                           np.asarray(w).reshape(w_size, 1), rho=rho, param=params)

    labels, class_index = group_classes(y)
    nr_class = labels.size
    costs = class_costs(labels, params)
    if solver_type in MULTICLASS_SOLVERS:
        w = MULTICLASS_SOLVERS[solver_type](rows, class_index, nr_class, costs, params, info,
                                            rng_state(seed, PURPOSE_SOLVER, *seed_path, 0))
        return LinearModel(solver_type, nr_class, labels, nr_feature, bias,
                           np.asarray(w).reshape(w_size, nr_class), param=params)
    solver = (METHOD_BINARY_SOLVERS if newton_when_stalled else BINARY_SOLVERS)[solver_type]
    jobs = one_vs_rest_jobs(class_index, nr_class, costs, params.C, rows.n_rows)
    # one binary -s 1 / -s 3 problem and -m > 1: CoCoA+ over -m row partitions
    solver = parallel_binary_solver(solver_type, len(jobs), params.n_threads,
                                    newton_when_stalled) or solver
    w = np.zeros((w_size, len(jobs)))

    def fit(job):
        column, y_pm, Cp, Cn = job
        prob = BinaryProblem(rows, y_pm, Cp, Cn, bias,
                             rng_state(seed, PURPOSE_SOLVER, *seed_path, column),
                             sample_C=None if sw is None else np.where(y_pm > 0, Cp, Cn) * sw)
        w[:, column] = reported_solve(info, labels, column, nr_class, solver, prob, params,
                                      info).w

    # each class has its own RNG stream, so the model does not depend on the thread
    # count or the finishing order
    map_threads(fit, jobs, params.n_threads)
    return LinearModel(solver_type, nr_class, labels, nr_feature, bias, w, param=params)
