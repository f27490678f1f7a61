"""LIBLINEAR's warm-start parameter search (``-C``) for -s 0, 2 and 11.

:func:`find_parameters` is LIBLINEAR 2.50's ``find_parameters`` /
``find_parameter_C`` / ``calc_start_C`` / ``calc_max_p`` (Chu, Hsieh & Lin,
"Warm start for parameter selection of linear classifiers", KDD 2015):

* the rows are cut into ``nr_fold`` folds once (the permutation of
  :func:`lcoding.training.cross_validation`, so ``-C`` and ``-v`` share folds for
  a seed);
* C runs over ``start_C, 2 start_C, 4 start_C, ...`` up to ``max_C`` (1024 for
  classification, 2^20 for -s 11); every fold's model is warm-started from its
  model at the previous C; the path stops early once the models of all folds have
  stayed unchanged (|w_new - w_old| <= 1e-15) for 5 consecutive C values;
* ``start_C`` is ``-c`` when given, else ``2^floor(log2(C_min))`` with
  ``C_min = 1/(l max|x|^2)`` (-s 0), ``1/(2 l max|x|^2)`` (-s 2), or for -s 11
  ``0.01 sum_i max(|y_i| - p, 0)^2 / (8 (sum_i |y_i|)^2 max|x|^2)``;
* -s 11 also searches p over ``i max|y| / 20`` for ``i = 19, ..., 0`` (starting
  at the step just below ``-p`` when given), a fresh C path for each p;
* the best score is the highest CV accuracy (the first C reaching it wins) or
  the lowest CV mean squared error (the first (p, C) reaching it wins).

Printing: like LIBLINEAR's C library, :func:`find_parameters` prints the solver
output of no fold, one ``log2c=...`` line per C value (and ``WARNING: maximum C
reached.``) through ``info`` (silent under ``-q``), and *returns* the numbers.  The
summary line ``Best C = ...`` is printed by LIBLINEAR's Python ``train`` even
under ``-q``; the interface prints it, with :func:`best_parameters_line` giving its
exact text.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from lcoding.core.rows import Rows
from lcoding.core.model import LinearModel
from lcoding.core.options import SolverType, TrainParams, check_parameter
from lcoding.linear.solvers import BINARY_SOLVERS
from lcoding.linear.problem import BinaryProblem
from lcoding.core.messages import Messages
from lcoding.linear.solvers import REGRESSION_SOLVERS_TABLE
from lcoding.core.seeds import PURPOSE_CV, PURPOSE_SOLVER, rng_state
from lcoding.core.classes import class_costs, group_classes

SEARCHABLE_SOLVERS = (int(SolverType.L2R_LR), int(SolverType.L2R_L2LOSS_SVC),
                      int(SolverType.L2R_L2LOSS_SVR))
MAX_C_CLASSIFICATION = 1024.0
MAX_C_REGRESSION = 1048576.0
C_RATIO = 2.0                 # consecutive C values differ by this factor
UNCHANGED_PATH_STOP = 5       # stop after this many C values with unchanged models
P_STEPS = 20                  # -s 11: p runs over i * max|y| / P_STEPS
W_UNCHANGED = 1e-15


def _log2(x: float) -> float:
    # LIBLINEAR's log(x)/log(2.0), kept so floor() agrees at exact powers of two
    return math.log(x) / math.log(2.0)


def max_row_sqnorm(rows: Rows, bias: float) -> float:
    """max_i |[x_i; B]|^2 (the bias coordinate included when B >= 0)."""
    row_of = np.repeat(np.arange(rows.n_rows), np.diff(rows.indptr))
    sq = np.bincount(row_of, weights=rows.data * rows.data, minlength=rows.n_rows)
    if bias >= 0:
        sq = sq + bias * bias
    return float(sq.max()) if sq.size else 0.0


def calc_start_C(y: np.ndarray, rows: Rows, solver_type: int, p: float, bias: float) -> float:
    """LIBLINEAR's ``calc_start_C``: the power of two at or below the smallest C
    that can change the trivial solution w = 0 (inf when none can)."""
    l = rows.n_rows
    max_xTx = max_row_sqnorm(rows, bias)
    with np.errstate(divide="ignore"):
        if solver_type == SolverType.L2R_LR:
            min_C = 1.0 / (l * max_xTx) if l * max_xTx > 0 else math.inf
        elif solver_type == SolverType.L2R_L2LOSS_SVC:
            min_C = 1.0 / (2 * l * max_xTx) if l * max_xTx > 0 else math.inf
        else:
            y_abs = np.abs(y)
            sum_y = float(y_abs.sum())
            loss = float(np.sum(np.maximum(y_abs - p, 0.0) ** 2))
            delta2 = 0.1
            denom = 8 * sum_y * sum_y * max_xTx
            min_C = delta2 * delta2 * loss / denom if loss > 0 and denom > 0 else math.inf
    if not math.isfinite(min_C) or min_C <= 0:
        return math.inf
    return math.pow(2.0, math.floor(_log2(min_C)))


def calc_max_p(y: np.ndarray) -> float:
    """LIBLINEAR's ``calc_max_p``: max_i |y_i|."""
    return float(np.abs(y).max()) if y.size else 0.0


def best_parameters_line(solver_type: int, best_C: float, best_p: float, best_score: float) -> str:
    """The summary LIBLINEAR's Python ``train`` prints after ``-C`` (its ``print``
    adds one more newline)."""
    if int(solver_type) == SolverType.L2R_L2LOSS_SVR:
        return "Best C = %g Best p = %g  CV MSE = %g\n" % (best_C, best_p, best_score)
    return "Best C = %g  CV accuracy = %g%%\n" % (best_C, 100.0 * best_score)


class _Fold:
    """One cross-validation fold: its training rows with their class grouping
    (fixed along the C path) and its held-out rows."""

    def __init__(self, index: int, y: np.ndarray, rows: Rows, train_ids, test_ids,
                 regression: bool):
        self.index = index
        self.y = y[train_ids]
        self.rows = rows.take(train_ids)
        self.test_ids = test_ids
        self.test_rows = rows.take(test_ids)
        if not regression:
            self.labels, self.class_index = group_classes(self.y)

    def train(self, params: TrainParams, init_w, quiet: Messages) -> LinearModel:
        """LIBLINEAR's ``train`` on this fold with ``init_sol = init_w``."""
        solver_type = int(params.solver_type)
        bias = float(params.bias)
        nr_feature = self.rows.n_features
        w_size = nr_feature + (1 if bias >= 0 else 0)
        seed = params.seed
        if solver_type == SolverType.L2R_L2LOSS_SVR:
            prob = BinaryProblem(self.rows, self.y.astype(np.float64), params.C, params.C, bias,
                                 rng_state(seed, PURPOSE_SOLVER, self.index, 0))
            res = REGRESSION_SOLVERS_TABLE[solver_type](prob, params, quiet, init_w=init_w)
            return LinearModel(solver_type, 2, None, nr_feature, bias, res.w.reshape(w_size, 1))
        labels = self.labels
        nr_class = labels.size
        weighted_C = class_costs(labels, params)
        solver = BINARY_SOLVERS[solver_type]
        if nr_class == 2:
            problems = [(np.where(self.class_index == 0, 1, -1), weighted_C[0], weighted_C[1])]
        elif nr_class == 1:
            problems = [(np.ones(self.rows.n_rows), weighted_C[0], params.C)]
        else:
            problems = [(np.where(self.class_index == c, 1, -1), weighted_C[c], params.C)
                        for c in range(nr_class)]
        nr_w = 1 if nr_class == 2 else nr_class
        w = np.zeros((w_size, nr_w))
        for c, (y_pm, Cp, Cn) in enumerate(problems):
            prob = BinaryProblem(self.rows, y_pm.astype(np.int8), Cp, Cn, bias,
                                 rng_state(seed, PURPOSE_SOLVER, self.index, c))
            start = None if init_w is None else init_w[:, c]
            w[:, c] = solver(prob, params, quiet, init_w=start).w
        return LinearModel(solver_type, nr_class, labels, nr_feature, bias, w)


def _find_parameter_C(y, params: TrainParams, start_C: float, max_C: float, folds,
                      info: Messages) -> tuple[float, float]:
    """The warm-started C path at fixed p; returns ``(best_C, best_score)``."""
    regression = params.solver_type == SolverType.L2R_L2LOSS_SVR
    l = y.shape[0]
    quiet = Messages(quiet=True)
    target = np.empty(l)
    prev_w = [None] * len(folds)
    num_unchanged_w = 0
    best_score = math.inf if regression else 0.0
    best_C = start_C
    C = start_C
    while C <= max_C:
        params.C = C
        for f, fold in enumerate(folds):
            model = fold.train(params, prev_w[f], quiet)
            if prev_w[f] is not None and num_unchanged_w >= 0:
                if float(np.linalg.norm(model.w - prev_w[f])) > W_UNCHANGED:
                    num_unchanged_w = -1
            prev_w[f] = model.w
            target[fold.test_ids] = model.labels_from_values(model.decision_values(fold.test_rows))
        if regression:
            current = float(np.sum((target - y) ** 2)) / l
            if current < best_score:
                best_C, best_score = C, current
            info("log2c=%7.2f\tp=%7.2f\tMean squared error=%g\n" % (_log2(C), params.p, current))
        else:
            current = int(np.count_nonzero(target == y)) / l
            if current > best_score:
                best_C, best_score = C, current
            info("log2c=%7.2f\trate=%g\n" % (_log2(C), 100.0 * current))
        num_unchanged_w += 1
        if num_unchanged_w == UNCHANGED_PATH_STOP:
            break
        C *= C_RATIO
    if C > max_C:
        info("WARNING: maximum C reached.\n")
    return best_C, best_score


def search_folds(l: int, params: TrainParams, perm=None):
    """``(nr_fold, perm, fold_start)`` of the ``-C`` search on ``l`` rows: the ``-v``
    fold count (default 5, at most ``l``, as LIBLINEAR), the row permutation (the
    ``-v`` one of ``-S``, or ``perm`` checked), and fold ``f``'s slice
    ``perm[fold_start[f]:fold_start[f + 1]]``."""
    nr_fold = int(params.nr_fold) if params.nr_fold else 5
    if nr_fold < 2:
        raise ValueError("n-fold cross validation: n must >= 2 (option -v)")
    if nr_fold > l:
        nr_fold = l
        sys.stderr.write("WARNING: # folds > # data. Will use # folds = # data instead "
                         "(i.e., leave-one-out cross validation)\n")
    if perm is None:
        rng = np.random.Generator(np.random.PCG64(rng_state(params.seed, PURPOSE_CV)[0]))
        perm = rng.permutation(l)
    else:
        perm = np.asarray(perm, dtype=np.int64)
        if perm.shape != (l,) or not np.array_equal(np.sort(perm), np.arange(l)):
            raise ValueError("parameter search: perm must be a permutation of the row ids")
    return nr_fold, perm, [i * l // nr_fold for i in range(nr_fold + 1)]


def find_parameters(y, rows: Rows, params: TrainParams, info: Messages,
                    perm: np.ndarray | None = None) -> tuple[float, float, float]:
    """``-C``: the best C (and p for -s 11) by warm-started cross validation.

    ``rows`` are without the bias column (``params.bias`` adds it).  The start
    C is ``params.C`` when ``params.flag_C_specified``, the largest p
    ``params.p`` when ``params.flag_p_specified``.  ``perm`` (a permutation of
    the rows) overrides the fold permutation drawn from ``params.seed``.

    Returns ``(best_C, best_p, best_score)`` as LIBLINEAR's Python ``train``
    does: ``best_p`` is -1 for classification, ``best_score`` the CV accuracy as a
    fraction (classification) or the CV mean squared error (-s 11).
    """
    check_parameter(params)
    solver_type = int(params.solver_type)
    if solver_type not in SEARCHABLE_SOLVERS:
        raise ValueError("Warm-start parameter search only available for -s 0, -s 2 and -s 11")
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    l = rows.n_rows
    if y.shape[0] != l:
        raise ValueError(f"parameter search: {y.shape[0]} labels for {l} rows")
    if l == 0:
        raise ValueError("parameter search needs at least one training instance")
    nr_fold, perm, fold_start = search_folds(l, params, perm)
    regression = solver_type == SolverType.L2R_L2LOSS_SVR
    folds = [
        _Fold(f + 1, y, rows,
              np.concatenate([perm[:fold_start[f]], perm[fold_start[f + 1]:]]),
              perm[fold_start[f]:fold_start[f + 1]], regression)
        for f in range(nr_fold)]

    start_C = float(params.C) if params.flag_C_specified else -1.0
    start_p = float(params.p) if params.flag_p_specified else -1.0
    # the search moves C and p on a copy; the caller's parameters stay as given
    search = params.replaced()
    bias = float(params.bias)

    if not regression:
        if start_C <= 0:
            start_C = calc_start_C(y, rows, solver_type, search.p, bias)
        start_C = min(start_C, MAX_C_CLASSIFICATION)
        best_C, best_score = _find_parameter_C(y, search, start_C, MAX_C_CLASSIFICATION,
                                               folds, info)
        return best_C, -1.0, best_score

    max_p = calc_max_p(y)
    best_C, best_p, best_score = start_C, -1.0, math.inf
    first = P_STEPS - 1
    if start_p > 0 and max_p > 0:
        steps_below = start_p / (max_p / P_STEPS)
        if steps_below < first:
            first = int(steps_below)
    for i in range(first, -1, -1):
        search.p = i * max_p / P_STEPS
        start_C_p = calc_start_C(y, rows, solver_type, search.p, bias) if start_C <= 0 else start_C
        start_C_p = min(start_C_p, MAX_C_REGRESSION)
        C_p, score_p = _find_parameter_C(y, search, start_C_p, MAX_C_REGRESSION, folds, info)
        if score_p < best_score:
            best_C, best_p, best_score = C_p, search.p, score_p
    return best_C, best_p, best_score
