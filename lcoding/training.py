"""Training driver: LIBLINEAR's ``train`` / ``cross_validation`` semantics on
validated :class:`~lcoding._validation.Rows`.

Label handling follows LIBLINEAR exactly: labels are truncated to int, ordered by
first appearance, and a two-class problem whose labels are {-1, +1} with -1 first
is swapped so that +1 is ``label[0]``.  Binary problems train one vector (positive
= ``label[0]``, C scaled by the class weights of both classes); more classes train
one-vs-rest (positive side ``weight_i * C``, rest ``C``).
"""
from __future__ import annotations

import sys
import warnings

import numpy as np

from lcoding._validation import Rows
from lcoding.coding import map_threads
from lcoding.model import LinearModel
from lcoding.options import (JOINT_SOLVERS, REGRESSION_SOLVERS, SGD_SOLVERS, SolverType,
                             TrainParams, check_parameter)
from lcoding.solvers import BINARY_SOLVERS, BinaryProblem, Messages

# Solvers that are not "one binary problem per class" register here:
#   MULTICLASS_SOLVERS[s](rows, class_index, nr_class, weighted_C, params, info, rng) -> w (w_size, nr_class)
#   REGRESSION_SOLVERS_TABLE[s](prob: BinaryProblem with float y, params, info) -> SolveResult
#   ONECLASS_SOLVERS[s](rows, params, info, rng_state) -> (w, rho)
MULTICLASS_SOLVERS: dict = {}
REGRESSION_SOLVERS_TABLE: dict = {}
ONECLASS_SOLVERS: dict = {}

_PURPOSE_SOLVER = 1
_PURPOSE_CV = 2


def rng_state(seed: int, *purpose: int) -> np.ndarray:
    """A kernel RNG state (uint64[1]) derived from the user seed and a purpose path,
    so every class, fold and stage draws an independent, reproducible stream."""
    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFFFFFFFFFF, *purpose])
    return ss.generate_state(1, dtype=np.uint64)


def group_classes(y: np.ndarray):
    """LIBLINEAR's ``group_classes``: (labels in model order, class index per row)."""
    yi = np.trunc(y)
    if yi.size and (np.abs(yi) > 2147483647).any():
        bad = int(np.flatnonzero(np.abs(yi) > 2147483647)[0])
        raise ValueError(f"y: label {bad} ({y[bad]!r}) is outside the 32-bit integer range")
    yi = yi.astype(np.int64)
    uniq, first, inverse = np.unique(yi, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")          # order of first appearance
    labels = uniq[order]
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    class_index = rank[inverse]
    if labels.size == 2 and labels[0] == -1 and labels[1] == 1:
        labels = labels[::-1].copy()
        class_index = 1 - class_index
    return labels.astype(np.int32), class_index.astype(np.int64)


def _weighted_C(labels, params: TrainParams):
    weighted = np.full(labels.size, float(params.C))
    for wl, wv in zip(params.weight_label, params.weight):
        hit = np.flatnonzero(labels == wl)
        if hit.size == 0:
            sys.stderr.write(f"WARNING: class label {wl} specified in weight is not found\n")
        else:
            weighted[hit[0]] *= wv
    return weighted


def one_vs_rest_jobs(class_index, nr_class, weighted_C, C, n_rows):
    """LIBLINEAR's binary sub-problems, one per weight column: ``(column, y_pm, Cp, Cn)``.

    Two classes: one problem, ``label[0]`` positive, both classes' weighted C; one
    class: every row positive; more: one-vs-rest with ``weight_c * C`` against ``C``.
    """
    if nr_class == 2:
        return [(0, np.where(class_index == 0, 1, -1).astype(np.int8),
                 weighted_C[0], weighted_C[1])]
    if nr_class == 1:
        return [(0, np.ones(n_rows, dtype=np.int8), weighted_C[0], C)]
    return [(c, np.where(class_index == c, 1, -1).astype(np.int8), weighted_C[c], C)
            for c in range(nr_class)]


def train_model(y: np.ndarray, rows: Rows, params: TrainParams, info: Messages | None = None,
                seed_path: tuple = ()) -> LinearModel:
    """Train a LIBLINEAR model on validated data (``rows`` without bias column)."""
    check_parameter(params)
    if rows.n_rows == 0:
        raise ValueError("empty training problem: no instances to train on")
    if y.shape[0] != rows.n_rows:
        raise ValueError(f"len(y) = {y.shape[0]} differs from the {rows.n_rows} instances in x")
    solver_type = int(params.solver_type)
    if params.kernel_type >= 0 or params.invariance or params.tangents:   # -t / -H / -J
        from lcoding.invariant import train_kernel_model
        return train_kernel_model(y, rows, params, info, seed_path=seed_path)
    if solver_type in (SolverType.KQ_METRICS, SolverType.KQ_FLATS):
        from lcoding.kq_metrics import train_kq_model
        return train_kq_model(y, rows, params, info, seed_path=seed_path)
    if getattr(params, "kernel_map", 0) != 0 and getattr(params, "coding", 0) == 0:
        # only the local codings and -s 40, 41 apply -K: refuse it instead of ignoring it
        raise ValueError(f"-K {params.kernel_map} needs a local coding (-L 1-6) or "
                         f"-s 40, 41; -s {solver_type} without -L does not use it")
    if getattr(params, "coding", 0) != 0 or solver_type in SGD_SOLVERS | JOINT_SOLVERS:
        # -s 31 -L 0 goes there too, to get the "-s 31 needs -L 2 or -L 3" error
        from lcoding.local_model import train_local_model
        return train_local_model(y, rows, params, info, seed_path=seed_path)
    info = info if info is not None else Messages(params.quiet)
    bias = float(params.bias)
    nr_feature = rows.n_features
    w_size = nr_feature + (1 if bias >= 0 else 0)
    seed = params.seed

    if solver_type in REGRESSION_SOLVERS:
        prob = BinaryProblem(rows, y.astype(np.float64), params.C, params.C, bias,
                             rng_state(seed, _PURPOSE_SOLVER, *seed_path, 0))
        res = REGRESSION_SOLVERS_TABLE[solver_type](prob, params, info)
        return LinearModel(solver_type, 2, None, nr_feature, bias, res.w.reshape(w_size, 1), param=params)
    if solver_type == SolverType.ONECLASS_SVM:
        w, rho = ONECLASS_SOLVERS[solver_type](rows, params, info,
                                               rng_state(seed, _PURPOSE_SOLVER, *seed_path, 0))
        return LinearModel(solver_type, 2, None, nr_feature, bias, np.asarray(w).reshape(w_size, 1),
                           rho=rho, param=params)

    labels, class_index = group_classes(y)
    nr_class = labels.size
    weighted_C = _weighted_C(labels, params)
    if solver_type in MULTICLASS_SOLVERS:
        w = MULTICLASS_SOLVERS[solver_type](rows, class_index, nr_class, weighted_C, params, info,
                                            rng_state(seed, _PURPOSE_SOLVER, *seed_path, 0))
        return LinearModel(solver_type, nr_class, labels, nr_feature, bias,
                           np.asarray(w).reshape(w_size, nr_class), param=params)
    solver = BINARY_SOLVERS[solver_type]
    jobs = one_vs_rest_jobs(class_index, nr_class, weighted_C, params.C, rows.n_rows)
    w = np.zeros((w_size, len(jobs)))

    def fit(job):
        column, y_pm, Cp, Cn = job
        prob = BinaryProblem(rows, y_pm, Cp, Cn, bias,
                             rng_state(seed, _PURPOSE_SOLVER, *seed_path, column))
        w[:, column] = solver(prob, params, info).w

    n_threads = int(getattr(params, "n_threads", 1))
    if n_threads < 1:
        raise ValueError(f"-m {n_threads}: the number of threads must be >= 1")
    # each class has its own RNG stream, so the model does not depend on the thread
    # count or the finishing order
    map_threads(fit, jobs, n_threads)
    return LinearModel(solver_type, nr_class, labels, nr_feature, bias, w, param=params)


def cross_validation(y: np.ndarray, rows: Rows, params: TrainParams, nr_fold: int,
                     info: Messages | None = None) -> np.ndarray:
    """LIBLINEAR's ``cross_validation``: a seeded random permutation cut into
    ``nr_fold`` contiguous folds; returns the prediction for every row."""
    n = rows.n_rows
    if n == 0:
        raise ValueError("cross validation needs at least one training instance")
    if nr_fold > n:
        nr_fold = n
        sys.stderr.write("WARNING: # folds > # data. Will use # folds = # data instead "
                         "(i.e., leave-one-out cross validation)\n")
    rng = np.random.Generator(np.random.PCG64(rng_state(params.seed, _PURPOSE_CV)[0]))
    perm = rng.permutation(n)
    fold_start = [i * n // nr_fold for i in range(nr_fold + 1)]
    target = np.empty(n)
    for f in range(nr_fold):
        test = perm[fold_start[f]:fold_start[f + 1]]
        train = np.concatenate([perm[:fold_start[f]], perm[fold_start[f + 1]:]])
        sub = rows.take(train)
        model = train_model(y[train], sub, params, info, seed_path=(f + 1,))
        test_rows = rows.take(test).truncated(model.nr_feature)
        target[test] = model.labels_from_values(model.decision_values(test_rows))
    return target


from lcoding import _registry  # noqa: E402,F401  (registers the solvers of later modules)
