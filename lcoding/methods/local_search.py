"""``-C`` for the local codings: C, the coding's ``-u`` and the anchors ``-A``,
searched on the cross-validation folds of ``-v`` with warm starts along C -- and for
the kernel PCA map (``-t``, ``-H 0``): C and ``-g``, each fold's map built once per
``-g`` (:func:`find_kernel_map_parameters`).

LIBLINEAR's ``-C`` (:mod:`lcoding.linear.param_search`) runs a warm-started path of
C values on fixed folds.  Here the same path runs for every *setting* of the local
model -- a number of anchors (LL-SVM, ``-L 1, 2, 3, 6``) or of planes (anchor
planes, ``-L 4, 5``) and, for LL-SVM, a value of the coding parameter ``-u``:

* the rows are cut into ``nr_fold`` folds once, by the permutation of
  :func:`lcoding.training.cross_validation` (``-v`` and ``-C`` share folds for a
  seed); fold ``f`` learns its anchors (planes) from the seed path ``(f + 1,)``
  exactly as ``-v`` does, so the first point of every path (cold start) is the
  model ``-v`` trains with the same options;
* **shared costs**: the anchors (planes) are learned once per fold and number of
  anchors, the codes of the fold's training and held-out rows once per fold and
  setting; every C of the path reuses them;
* **warm start**: along C (doubling, as LIBLINEAR), every fold's and class's dual
  CD starts from its dual solution at the previous C (``init_alpha`` of
  :func:`lcoding.linear.dual_cd.solve_l2r_l1l2_svc`; a dual point at a smaller C
  is feasible at a larger one); with ``-s 2`` its primal Newton solve starts from its
  ``w`` at the previous C (``init_w``, as LIBLINEAR's ``-C`` for ``-s 2``);
* the SGD solvers on an LL-SVM coding (``-s 30, 32``) have nothing to carry: every C
  is trained cold on the shared anchors and codes, C over powers of
  :data:`COLD_C_RATIO` from ``-c`` or :data:`COLD_C_START` (each point is exactly
  ``-v``'s); the other local solvers' ``-C`` is :mod:`lcoding.methods.grid_search`;
* the C path starts at ``-c`` when given, else at LIBLINEAR's ``calc_start_C``
  rule for the L2-loss SVM (the power of two at or below ``1 / (2 l max|x|^2)``,
  below which every coded model is trivial -- ``|z|^2 <= |x|^2`` for the
  non-negative codings), and stops at C = 1024 (LIBLINEAR's cap), after 5 C values
  with unchanged models (LIBLINEAR's rule), or -- once the CV rate has risen above
  its value at the start -- after :data:`PATIENCE` C values without a better rate.

The grid of settings (defaults reasoned from the method, never from a test set):

* anchors / planes: ``A/4, A/2, A`` with ``A = -A`` (default 100): more anchors
  help until a few hundred on the project's sets, at a cost linear in ``A``;
  settings with fewer anchors than ``-k`` are left out (LL-SVM); for the planes
  (OCC) ``A`` is first capped at the rank bound ``min(features, fold rows)``;
* ``-u`` with ``-L 1`` (power of the inverse distance, scale free): ``u/2, u, 2u``
  around ``-u`` (default 1: 0.5 is the paper's inverse Euclidean distance);
* ``-u`` with ``-L 6`` (LLC ridge, scale free): ``u, 10u, 100u`` (larger ridges
  also condition the dual CD, docs/llsvm.md);
* ``-u`` with ``-L 2`` (Gaussian beta) and ``-L 3`` (k* mu), which multiply
  squared distances and so depend on the scale of the data: around ``-u`` when
  given, else around ``u0 = 3 / median(d_k - d_1)`` -- docs/llsvm.md's rule, ``d_1``
  and ``d_k`` the squared distances of a training row to its nearest and ``k``-th
  nearest anchor (``k = -k``, capped at the anchors), measured on fold 1's training
  rows (at most :data:`SCALE_SAMPLE` of them) and anchors of each anchor setting,
  rounded to two significant digits; ``u0/2, u0, 2u0`` (Gaussian) and ``u0/4, u0,
  4u0`` (k*, whose support size reacts more slowly to mu);
* OCC: only the planes (``-u`` there picks the classifier, not a width).

The best point is the highest CV accuracy; ties go to the first point reached
(fewer anchors, smaller ``-u``, smaller C).  Every point prints one line through
``info`` (silent under ``-q``); the interfaces print :func:`best_parameters_line`.
The result's ``best_options`` is the option string that trains the winner.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lcoding.core.classes import class_costs, group_classes, one_vs_rest_jobs
from lcoding.core.messages import Messages
from lcoding.core.options import (CODING_AUTO, TrainParams, check_parameter,
                                  check_search_parameter, float_text, options_string)
from lcoding.core.params import CodingType, LLSVMParams, OCCParams
from lcoding.core.model import LinearModel
from lcoding.core.rows import Rows, rows_from_dense
from lcoding.core.seeds import PURPOSE_SOLVER, rng_state
from lcoding.core.threads import map_threads
from lcoding.linear import cocoa, dual_cd
from lcoding.linear.newton import squared_hinge_dual_point, train_l2r_l2loss_svc
from lcoding.linear.solvers import METHOD_BINARY_SOLVERS
from lcoding.linear.param_search import search_folds
from lcoding.linear.problem import BinaryProblem, Coding, SolveResult
from lcoding.local import _knn
from lcoding.local.coding import LocalCoding, kernel_map_of
from lcoding.local.kstar import KSTAR_CODING
from lcoding.local.model import LocalModel
from lcoding.methods import invariant, llsvm, occ

MAX_C = 1024.0                # LIBLINEAR's cap for classification
C_RATIO = 2.0
UNCHANGED_PATH_STOP = 5       # LIBLINEAR: stop after 5 C values with unchanged models
W_UNCHANGED = 1e-15
PATIENCE = 3                  # C values without a better CV rate that end a path
ANCHOR_FRACTIONS = (0.25, 0.5, 1.0)
SCALE_SAMPLE = 2000           # rows measured by the width rule of -L 2, 3
SCALE_TARGET = 3.0            # u0 * median(d_k - d_1)
CODING_FACTORS = {
    int(CodingType.INVERSE_DISTANCE): (0.5, 1.0, 2.0),
    int(CodingType.GAUSSIAN): (0.5, 1.0, 2.0),
    int(CodingType.KSTAR): (0.25, 1.0, 4.0),
    int(CodingType.LLC): (1.0, 10.0, 100.0),
}
SCALED_CODINGS = (int(CodingType.GAUSSIAN), int(CodingType.KSTAR))
OCC_CODINGS = (int(CodingType.G_OCC), int(CodingType.C_OCC))
LLSVM_CODINGS = tuple(int(c) for c in llsvm.LLSVM_CODINGS)
# -s values with warm-started C paths here: the dual CD (1, 3), primal Newton (2)
WARM_SOLVERS = (1, 2, 3)
# the SGD solvers on an LL-SVM coding: no warm start along C, but each fold's anchors
# and codes are still shared by every C and -u of a setting (most of an SGD point's
# cost: banana's -s 30 training is 0.07 of 0.08 s anchors and codes); every point is
# trained cold, on the coarse path below.  The other solvers' -C is
# lcoding.methods.grid_search's grid, each point a whole -v.
SHARED_COLD_SOLVERS = (30, 32)
# the same for the one-vs-rest linear solvers after a kernel PCA map (logistic
# regression -s 0, 7, the L1-regularised -s 5, 6, SGD): each fold's map, most of a
# trial, built once per -g for every C (Crammer-Singer -s 4, one joint problem, stays
# grid_search's)
KERNEL_COLD_SOLVERS = (0, 5, 6, 7, 30, 32)
COLD = "cold"                 # _loss of a solver trained cold at every C
# the cold C path (a cold point is a whole training): powers of COLD_C_RATIO from -c
# (COLD_C_START without it) up to MAX_C, COLD_PATIENCE values without a better rate
# ending it once its rate rose above its start
COLD_C_START = 1.0 / 64.0
COLD_C_RATIO = 4.0
COLD_PATIENCE = 2
# what the search sets itself, left out of the options echoed in best_options
SEARCH_FLAGS = ("-C", "-v", "-c", "-A", "-u")


class LocalSearchResult(NamedTuple):
    """What ``-C`` with a local coding returns: the best C, the option string that
    trains the best model (``-c``, ``-A`` and ``-u`` set to the winner, ``-C`` and
    ``-v`` left out) and its CV accuracy as a fraction -- index 0 and 2 as in
    LIBLINEAR's ``(best_C, best_p, best_score)``."""
    best_C: float
    best_options: str
    best_rate: float


@dataclass(frozen=True)
class SearchPoint:
    """One point of the search: its setting, C and CV accuracy (a fraction)."""
    n_anchors: int
    coding_param: float
    C: float
    rate: float
    options: str


def _log2(x: float) -> float:
    return math.log(x) / math.log(2.0)


def _round2(value: float) -> float:
    """``value`` to two significant digits (a short, exactly re-parsed -u)."""
    return float(f"{value:.2g}")


def start_C(rows: Rows, bias: float) -> float:
    """LIBLINEAR's ``calc_start_C`` of the L2-loss SVM (-s 2): the power of two at or
    below ``1 / (2 l max_i |[x_i; B]|^2)`` (1 for empty rows)."""
    row_of = np.repeat(np.arange(rows.n_rows), np.diff(rows.indptr))
    sq = np.bincount(row_of, weights=rows.data * rows.data, minlength=rows.n_rows)
    max_sq = float(sq.max()) + (bias * bias if bias >= 0 else 0.0) if sq.size else 0.0
    if not max_sq > 0:
        return 1.0
    return math.pow(2.0, math.floor(_log2(1.0 / (2.0 * rows.n_rows * max_sq))))


def plane_grid(params: TrainParams, n_features: int, fold_rows: int) -> list:
    """The numbers of planes tried with ``-L 4, 5``: :func:`anchor_grid` of ``-A``
    capped first at the rank bound ``min(features, fold rows)`` (``fold_rows``: the
    fewest training rows of a fold), beyond which planes cannot be learned."""
    rank = min(int(n_features), int(fold_rows))
    return anchor_grid(params.replaced(n_anchors=max(1, min(params.n_anchors, rank))))


def anchor_grid(params: TrainParams) -> list:
    """The numbers of anchors (planes) tried: ``A/4, A/2, A`` (``A = -A``), each >= 1,
    LL-SVM's at least ``-k`` (k* has no ``-k``)."""
    A = int(params.n_anchors)
    grid = sorted({max(1, int(round(A * f))) for f in ANCHOR_FRACTIONS})
    if params.coding in LLSVM_CODINGS and params.coding != KSTAR_CODING:
        grid = [a for a in grid if a >= params.n_neighbors] or [A]
    return grid


def coding_scale(rows: Rows, anchors: np.ndarray, k: int) -> float:
    """``SCALE_TARGET / median(d_k - d_1)`` over ``rows`` (docs/llsvm.md's rule for
    the Gaussian beta), or 1 when the spread is 0."""
    if rows.n_rows > SCALE_SAMPLE:      # the fold's rows are in random order already
        rows = rows.take(np.arange(SCALE_SAMPLE))
    d = LocalCoding(1, anchors, 1, 1.0).sq_distances(rows)
    k = max(1, min(int(k), d.shape[1]))
    part = np.partition(d, k - 1, axis=1) if k > 1 else d
    spread = float(np.median(part[:, k - 1] - d.min(axis=1))) if k > 1 else 0.0
    if k == 1 and d.shape[1] > 1:     # one neighbour: the gap to the second anchor
        two = np.partition(d, 1, axis=1)
        spread = float(np.median(two[:, 1] - two[:, 0]))
    return SCALE_TARGET / spread if spread > 0 and math.isfinite(spread) else 1.0


def coding_grid(params: TrainParams, fold_rows: Rows | None = None,
                anchors: np.ndarray | None = None) -> list:
    """The ``-u`` values tried with ``-L 1, 2, 3, 6`` (module doc); for ``-L 2, 3``
    without ``-u`` the centre comes from ``fold_rows`` and ``anchors``."""
    coding = int(params.coding)
    factors = CODING_FACTORS[coding]
    centre = float(params.coding_param)
    if coding in SCALED_CODINGS and "-u" not in params.given:
        # k*: -k (unused by its coding) stands for the typical support size
        centre = _round2(coding_scale(fold_rows, anchors, params.n_neighbors))
    return sorted({_round2(centre * f) if coding in SCALED_CODINGS and "-u" not in params.given
                   else centre * f for f in factors})


class _Fold:
    """One fold: its training rows, classes and held-out rows (kernel-mapped)."""

    def __init__(self, index: int, y, rows: Rows, train_ids, test_ids, params: TrainParams):
        self.index = index
        self.seed_path = (index,)
        self.y = y[train_ids]
        self.rows = rows.take(train_ids)
        self.test_ids = test_ids
        self.test_rows = rows.take(test_ids)
        self.labels, self.class_index = group_classes(self.y)
        self.nr_class = self.labels.size
        # class C factors (-wi): C of a point = C * factor, LIBLINEAR's class_costs
        self.cost_factor = class_costs(self.labels, params.replaced(C=1.0))


class _LLSVMSetting:
    """One fold at one setting (anchors, -u) of LL-SVM: coder, codes, problems."""

    def __init__(self, fold: _Fold, coder, params: TrainParams, nr_feature: int, kernel_map):
        self.fold = fold
        self.coder = coder
        self.params = params
        self.nr_feature = nr_feature
        self.kernel_map = kernel_map
        idx, wt = coder.code(fold.rows, n_threads=params.n_threads)
        self.coding = Coding(idx, wt, coder.n_anchors)
        self.test_idx, self.test_wt = coder.code(fold.test_rows, n_threads=params.n_threads)

    def problem(self, y_pm, Cp, Cn, c_pos) -> BinaryProblem:
        p = self.params
        return BinaryProblem(self.fold.rows, y_pm, Cp, Cn, float(p.bias),
                             rng_state(p.seed, PURPOSE_SOLVER, *self.fold.seed_path, c_pos),
                             coding=self.coding)

    def finish(self, c_pos, res):
        return res.w

    def predict(self, w: np.ndarray, params: TrainParams) -> np.ndarray:
        f = self.fold
        model = LocalModel(int(params.solver_type), f.nr_class, f.labels, self.nr_feature,
                           float(params.bias), self.coder, w, kernel_map=self.kernel_map,
                           param=params)
        rows = f.test_rows
        out = np.empty((rows.n_rows, model.nr_w))
        if rows.n_rows:
            _knn.local_decision_values(rows.data, rows.indices, rows.indptr, self.test_idx,
                                       self.test_wt, model.w, model.dim, model.bias, out, 0,
                                       rows.n_rows)
        return model.labels_from_values(out)


class _OCCSetting:
    """One fold at one number of planes of the anchor-plane classifier."""

    def __init__(self, fold: _Fold, n_planes: int, params: TrainParams, nr_feature: int,
                 counter: dict):
        self.fold = fold
        self.params = params
        self.nr_feature = nr_feature
        op = OCCParams.from_train_params(params.replaced(n_anchors=n_planes))
        self.M = n_planes
        st = int(params.solver_type)
        self.kind = occ.classifier_kind(op, st)
        rows = fold.rows
        nr_w = 1 if fold.nr_class == 2 else fold.nr_class
        seed = params.seed

        def basis(c):
            counter["bases"] = counter.get("bases", 0) + 1
            sub = rows if c is None else rows.take(np.flatnonzero(fold.class_index == c))
            return occ.occ_basis(sub, n_planes, seed=occ.basis_seed(seed, fold.seed_path, c))

        if op.planes == CodingType.G_OCC:
            b = basis(None)
            self.bases = [b]
            self.codes = [occ.occ_codes(rows, *b)] * nr_w
        elif self.kind == occ.LINEAR_ALL_CODES:
            self.bases = [basis(c) for c in range(nr_w)]
            all_codes = occ.occ_codes_multi(rows, np.vstack([b[0] for b in self.bases]),
                                            np.concatenate([b[1] for b in self.bases]),
                                            n_planes)
            self.codes = [all_codes] * nr_w
        else:
            self.bases = [basis(c) for c in range(nr_w)]
            self.codes = [occ.occ_codes(rows, *b) for b in self.bases]
        counter["codes"] = counter.get("codes", 0) + 1
        self.rows = occ._with_constant(rows, float(params.bias)) \
            if self.kind == occ.LIB_LLSVM_PB else rows
        self._prob_rows = {}

    def problem(self, y_pm, Cp, Cn, c_pos) -> BinaryProblem:
        p = self.params
        state = rng_state(p.seed, PURPOSE_SOLVER, *self.fold.seed_path, c_pos)
        codes = self.codes[c_pos]
        if self.kind in (occ.LIB_LLSVM, occ.LIB_LLSVM_PB):
            n, M = codes.shape
            idx = np.ascontiguousarray(np.broadcast_to(np.arange(M, dtype=np.int32), (n, M)))
            C = np.where(y_pm > 0, Cp, Cn).astype(np.float64)
            return BinaryProblem(self.rows, np.ascontiguousarray(y_pm, dtype=np.int8), 0.0, 0.0,
                                 float(p.bias), state,
                                 coding=Coding(idx, np.ascontiguousarray(codes), M),
                                 sample_C=C, shared_bias=True)
        if c_pos not in self._prob_rows:
            self._prob_rows[c_pos] = occ._code_rows(codes)
        return BinaryProblem(self._prob_rows[c_pos], y_pm, Cp, Cn, float(self.params.bias),
                             state)

    def finish(self, c_pos, res):
        if self.kind in (occ.LIB_LLSVM, occ.LIB_LLSVM_PB) and not self.params.bias >= 0:
            return res.w[:-1]
        return res.w

    def predict(self, w: np.ndarray, params: TrainParams) -> np.ndarray:
        f = self.fold
        model = occ.OCCModel(int(params.solver_type), f.nr_class, f.labels, self.nr_feature,
                             float(params.bias), occ.OCC_CODINGS[int(params.coding)], self.kind,
                             np.vstack([b[0] for b in self.bases]),
                             np.concatenate([b[1] for b in self.bases]), w, param=params)
        return model.labels_from_values(model.decision_values(f.test_rows))


class _KernelMapSetting:
    """One fold at one kernel (one ``-g``) of the kernel PCA map (``-t``, ``-H 0``):
    the fold's landmarks, map and mapped training and held-out rows, as
    :func:`lcoding.methods.invariant.train_kernel_model` builds them for ``-v``'s fold
    (the same landmark draw, seed path ``(f + 1,)``), once for every C of the path."""

    # the methods' -s 1 on mapped rows: a stalled dual CD hands over to Newton
    stall_uncoded = True

    def __init__(self, fold: _Fold, kernel, params: TrainParams, counter: dict):
        self.fold = fold
        self.params = params
        t = time.perf_counter()
        _, drawn = invariant.drawn_landmarks(fold.rows, params, fold.seed_path)
        landmarks, gram = invariant.map_landmarks(kernel, drawn)
        P = invariant.kernel_pca_map(kernel, landmarks, gram=gram)
        # the landmarks' own work (their Gram matrix, pivots and eigenproblem) does not
        # grow with the rows once all -X landmarks are drawn (SharedFolds.fixed_seconds)
        self.fixed_seconds = (time.perf_counter() - t
                              if drawn.shape[0] == int(params.n_landmarks) else 0.0)
        counter["maps"] = counter.get("maps", 0) + 1
        self.mapped = rows_from_dense(
            invariant.rowwise_matmul(kernel.matrix(fold.rows, landmarks), P.T),
            "mapped rows", copy=False)
        self.test_Z = invariant.rowwise_matmul(kernel.matrix(fold.test_rows, landmarks), P.T)

    def problem(self, y_pm, Cp, Cn, c_pos) -> BinaryProblem:
        p = self.params
        return BinaryProblem(self.mapped, y_pm, Cp, Cn, float(p.bias),
                             rng_state(p.seed, PURPOSE_SOLVER, *self.fold.seed_path, c_pos))

    def finish(self, c_pos, res):
        return res.w

    def predict(self, w: np.ndarray, params: TrainParams) -> np.ndarray:
        f = self.fold
        r = self.test_Z.shape[1]
        dec = self.test_Z @ w[:r]
        if params.bias >= 0:
            dec += float(params.bias) * w[r]
        model = LinearModel(int(params.solver_type), f.nr_class, f.labels, r,
                            float(params.bias), w, param=params)
        return model.labels_from_values(dec)


def _solve_point(prob: BinaryProblem, point: TrainParams, quiet: Messages, loss: str,
                 row_threads: int, start, stall_uncoded: bool = False) -> SolveResult:
    """One fold's and class's solve at one C of the path, warm-started from ``start``
    (the solution at the previous C), as the method trains it.

    * ``-s 1, 3``: the dual CD -- in ``row_threads`` partitions (CoCoA+) when that
      pays -- started from the previous dual point; for the squared hinge (``-s 1``)
      the methods' hand-over to Newton when a coded solve stalls or any solve reaches
      the pass cap (:func:`lcoding.linear.dual_cd.continue_l2loss`).  After a
      hand-over the dual point is read back from Newton's ``w``
      (:func:`lcoding.linear.newton.squared_hinge_dual_point`) for the next C.
    * ``-s 2`` (``loss == "primal"``): the primal Newton solver started from the
      previous ``w`` -- LIBLINEAR's ``-C`` for ``-s 2`` does the same -- or, cold, from
      the coded subsample's solution, exactly as the methods train it; ``row_threads``
      split its products.  The result's ``alpha`` is that ``w`` (the next start).
    * ``-s 30, 32`` (``loss == "cold"``): the SGD solver as the method runs it, from
      its own start at every C."""
    if loss == PRIMAL:
        res = train_l2r_l2loss_svc(prob, point, quiet, init_w=start,
                                   n_threads=row_threads)
        res.alpha = res.w
        return res
    if loss == COLD:                    # as the method trains it: no start to carry
        return METHOD_BINARY_SOLVERS[int(point.solver_type)](prob, point, quiet)
    stall = (dual_cd.STALL_PASSES if loss == "l2" and (prob.coding is not None or stall_uncoded)
             else None)
    if row_threads > 1 and cocoa.worth_threads(prob):
        res = cocoa.solve_l2r_l1l2_svc_cocoa(prob, point, quiet, loss, row_threads,
                                             init_alpha=start, newton_finish=False,
                                             stall_passes=stall)
        unit, n_threads = "rounds", (row_threads if prob.coding is not None else 1)
    else:
        res = dual_cd.solve_l2r_l1l2_svc(prob, point, quiet, loss, init_alpha=start,
                                         stall_passes=stall)
        unit, n_threads = "passes", 1
    if loss != "l2":
        return res
    done = dual_cd.continue_l2loss(prob, point, quiet, res, unit, n_threads)
    if done is not res:
        done.alpha = squared_hinge_dual_point(prob, point, done.w)
    return done


def _solve_fold(fold, setting, point: TrainParams, loss: str, quiet: Messages,
                starts: dict, n_threads: int):
    """One fold's one-vs-rest solves at one C (``point``) on its shared ``setting``,
    each class's dual CD started from ``starts[class]`` (absent: cold, as ``-v``
    trains it).  ``n_threads``: one binary problem's rows in that many threads (the
    block-synchronous dual CD of :mod:`lcoding.linear.cocoa`, warm-started the same
    way), else the one-vs-rest problems side by side.  Returns ``(alphas, w)``: each
    class's dual point and the weight columns."""
    C = float(point.C)
    jobs = one_vs_rest_jobs(fold.class_index, fold.nr_class, fold.cost_factor * C, C,
                            fold.rows.n_rows)
    row_threads = n_threads if len(jobs) == 1 else 1

    def solve(job):
        c_pos, y_pm, Cp, Cn = job
        prob = setting.problem(y_pm, Cp, Cn, c_pos)
        return c_pos, _solve_point(prob, point, quiet, loss, row_threads, starts.get(c_pos),
                                   getattr(setting, "stall_uncoded", False))

    results = map_threads(solve, jobs, 1 if row_threads > 1 else n_threads)
    alphas = {c_pos: res.alpha for c_pos, res in results}
    return alphas, np.column_stack([setting.finish(c_pos, res) for c_pos, res in results])


PRIMAL = "primal"             # _loss of -s 2: the primal Newton solver, warm-started by w


def _loss(params: TrainParams) -> str:
    st = int(params.solver_type)
    if st not in WARM_SOLVERS:          # SHARED_COLD_SOLVERS, KERNEL_COLD_SOLVERS
        return COLD
    return PRIMAL if st == 2 else "l2" if st == 1 else "l1"


# a path with a deadline starts a point only if the last one, times this, still fits
# (a point at a larger C takes more passes)
DEADLINE_MARGIN = 1.5


class PathStop:
    """When a C path ends: once its rate has risen above its first and ``patience``
    values of C in a row brought no better rate (:data:`PATIENCE` on the warm paths,
    :data:`COLD_PATIENCE` on the cold ones and :mod:`lcoding.methods.grid_search`'s)."""

    def __init__(self, patience: int):
        self.patience = int(patience)
        self.first: float | None = None
        self.best = -1.0
        self.since_best = 0

    def done(self, rate: float) -> bool:
        """Record the rate at the next C; whether the path ends there."""
        if self.first is None:
            self.first = rate
        if rate > self.best:
            self.best, self.since_best = rate, 0
        else:
            self.since_best += 1
        return self.best > self.first and self.since_best >= self.patience


def _run_path(y, folds, settings, search: TrainParams, C0: float, label: str,
              info: Messages, quiet: Messages, on_point, deadline: float | None = None) -> None:
    """The C path of one setting (one ``_*Setting`` per fold): warm-started, or for
    the solvers without a warm start (:func:`_loss` ``COLD``) cold at every C on the
    coarse path (:data:`COLD_C_RATIO`, :data:`COLD_PATIENCE`).  ``deadline`` (a
    ``time.perf_counter()`` value; the selector's C refinement): no point starts that
    would end after it, by the last point's time (:data:`DEADLINE_MARGIN`); the first
    always runs."""
    l = y.shape[0]
    loss = _loss(search)
    ratio, patience = (COLD_C_RATIO, COLD_PATIENCE) if loss == COLD else (C_RATIO, PATIENCE)
    target = np.empty(l)
    prev_alpha = [dict() for _ in folds]
    prev_w = [None] * len(folds)
    num_unchanged = 0
    stop = PathStop(patience)
    C = C0
    last_seconds = 0.0
    while C <= MAX_C:
        if deadline is not None and stop.first is not None \
                and time.perf_counter() + DEADLINE_MARGIN * last_seconds > deadline:
            info(f"{label}stopped at log2c={_log2(C):.2f}: the time given is spent\n")
            return
        started = time.perf_counter()
        point = search.replaced(C=C)
        for f, (fold, setting) in enumerate(zip(folds, settings)):
            prev_alpha[f], w = _solve_fold(fold, setting, point, loss, quiet, prev_alpha[f],
                                           search.n_threads)
            if prev_w[f] is not None and num_unchanged >= 0 \
                    and float(np.linalg.norm(w - prev_w[f])) > W_UNCHANGED:
                num_unchanged = -1
            prev_w[f] = w
            target[fold.test_ids] = setting.predict(w, point)
        rate = int(np.count_nonzero(target == y)) / l
        last_seconds = time.perf_counter() - started
        info("%slog2c=%7.2f\trate=%g\n" % (label, _log2(C), 100.0 * rate))
        on_point(C, rate)
        ends = stop.done(rate)
        num_unchanged += 1
        if num_unchanged == UNCHANGED_PATH_STOP or ends:
            break
        C *= ratio
    if C > MAX_C:
        info("WARNING: maximum C reached.\n")


def fold_at(f: int, y, rows: Rows, params: TrainParams, perm, start) -> _Fold:
    """Fold ``f`` of ``-v``'s permutation ``perm`` cut at ``start`` (seed path
    ``(f + 1,)``)."""
    return _Fold(f + 1, y, rows, np.concatenate([perm[:start[f]], perm[start[f + 1]:]]),
                 perm[start[f]:start[f + 1]], params)


def _folds(y, rows: Rows, params: TrainParams, perm) -> list:
    nr_fold, perm, start = search_folds(rows.n_rows, params, perm)
    return [fold_at(f, y, rows, params, perm, start) for f in range(nr_fold)]


def point_options(params: TrainParams, C: float, n_anchors: int, coding_param: float) -> str:
    """The option string that trains the model of one point."""
    rest = options_string(params, drop=SEARCH_FLAGS)
    head = f"-s {int(params.solver_type)}" if "-s" not in params.given else ""
    tail = f"-c {float_text(C)} -A {int(n_anchors)} -u {float_text(coding_param)}"
    return " ".join(part for part in (head, rest, tail) if part)


def searches_here(params: TrainParams) -> bool:
    """Whether these options' ``-C`` runs here: ``-s 1, 2, 3`` (warm-started) on a local
    coding, anchor planes or a kernel map; ``-s 30, 32`` (cold, on shared anchors and
    codes) on an LL-SVM coding; the other one-vs-rest linear solvers
    (:data:`KERNEL_COLD_SOLVERS`, cold, on each fold's shared map) after a kernel
    map.  The router sends the others to :mod:`lcoding.methods.grid_search`."""
    st = int(params.solver_type)
    if params.kernel_type >= 0:
        return st in WARM_SOLVERS or st in KERNEL_COLD_SOLVERS
    return st in WARM_SOLVERS or (st in SHARED_COLD_SOLVERS
                                  and params.coding in LLSVM_CODINGS)


def cold_path_start(params: TrainParams) -> float:
    """The first C of a cold path (here and :mod:`lcoding.methods.grid_search`'s):
    ``-c`` when given, else :data:`COLD_C_START`; at most :data:`MAX_C`."""
    return min(float(params.C) if params.flag_C_specified else COLD_C_START, MAX_C)


def _path_start(params: TrainParams, rows: Rows) -> float:
    """The first C of a path: ``-c`` when given, else LIBLINEAR's start for the warm
    paths (:func:`start_C` of the rows the solver sees), :func:`cold_path_start` for
    the cold ones; at most :data:`MAX_C`."""
    if _loss(params) == COLD:
        return cold_path_start(params)
    if params.flag_C_specified:
        return min(float(params.C), MAX_C)
    return min(start_C(rows, float(params.bias)), MAX_C)


def _require_here(params: TrainParams) -> None:
    if not searches_here(params):
        raise ValueError(f"-C: this search trains -s 1, 2 or 3 (and -s 30, 32 on an LL-SVM "
                         f"coding, -s 0, 5, 6, 7, 30, 32 on a kernel map), not "
                         f"-s {int(params.solver_type)} here "
                         f"(lcoding.methods.grid_search searches the others; option -s)")


def _search_inputs(y, rows: Rows, params: TrainParams, info, counter):
    """``(info, quiet, counter, y)`` of a search, the labels checked against the rows."""
    info = info if info is not None else Messages(params.quiet)
    counter = {} if counter is None else counter
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if y.shape[0] != rows.n_rows:
        raise ValueError(f"parameter search: {y.shape[0]} labels for {rows.n_rows} rows")
    if rows.n_rows == 0:
        raise ValueError("parameter search needs at least one training instance")
    return info, Messages(quiet=True), counter, y


def fold_anchors(folds, params: TrainParams, counter: dict) -> list:
    """Each fold's LL-SVM anchors at ``params``' ``-A`` (seed path of ``-v``'s fold)."""
    mp = LLSVMParams.from_train_params(params)
    anchors = []
    for f in folds:
        counter["anchors"] = counter.get("anchors", 0) + 1
        anchors.append(llsvm.learn_local_anchors(f.rows, f.class_index, mp, params.seed,
                                                 f.seed_path))
    return anchors


def _llsvm_settings(folds, anchors, params: TrainParams, nr_feature: int, kernel_map,
                    counter: dict) -> list:
    """Each fold's codes at ``params``' coding (``-L``, ``-u``) of its anchors."""
    mp = LLSVMParams.from_train_params(params)
    settings = []
    for f, a in zip(folds, anchors):
        counter["codes"] = counter.get("codes", 0) + 1
        settings.append(_LLSVMSetting(f, llsvm.local_coder(mp, a), params, nr_feature,
                                      kernel_map))
    return settings


def shares_fold_work(params: TrainParams) -> bool:
    """Whether :func:`cross_validation_at_Cs` evaluates these options: what ``-C``
    searches besides LIBLINEAR's linear solvers -- the kernel PCA map (``-t``, ``-H
    0``) or a local coding (LL-SVM ``-L 1, 2, 3, 6``, anchor planes ``-L 4, 5``),
    trained by ``-s 1``, ``2`` or ``3``."""
    if params.coding == CODING_AUTO:
        return False
    try:
        check_search_parameter(params)
    except ValueError:
        return False
    return (int(params.solver_type) in WARM_SOLVERS
            and (params.kernel_type >= 0 or params.coding in LLSVM_CODINGS + OCC_CODINGS))


def _held_bytes(obj, depth: int = 3) -> int:
    """The bytes of the arrays an object holds (its attributes, rows, codes, lists of
    them; ``depth`` levels down)."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if depth == 0:
        return 0
    if isinstance(obj, (list, tuple)):
        return sum(_held_bytes(v, depth - 1) for v in obj)
    if isinstance(obj, dict):
        return sum(_held_bytes(v, depth - 1) for v in obj.values())
    if hasattr(obj, "__dict__"):
        return sum(_held_bytes(v, depth - 1) for v in vars(obj).values())
    if hasattr(obj, "_fields"):
        return sum(_held_bytes(v, depth - 1) for v in obj)
    return 0


class SharedFolds:
    """``-v``'s folds of one setting, each fold's work that does not depend on C done
    once for several C: the kernel PCA map (landmarks, eigenproblem, mapped rows), or
    the anchors, planes and codes of a local coding (options :func:`shares_fold_work`
    accepts).  :meth:`targets_at` trains every fold cold at each C on it, as ``-v``
    at that C (the first point of a ``-C`` path): the labels
    :func:`lcoding.training.cross_validation` returns for the options at that C.

    Why: the selector tries a setting at several C (:mod:`lcoding.select`); on
    magic04 each fold's map of 1000 landmarks is 80-90 % of a trial's time at C = 1.

    Memory: a fold at a time, as ``-v`` -- its map is dropped before the next fold's
    is built -- unless ``keep_bytes`` holds it: then the folds' work is kept (while
    all kept take at most ``keep_bytes``) and a later :meth:`targets_at` reuses it.
    ``seconds``: the time one pass over the folds' shared work takes, and
    ``fixed_seconds`` the part of it that does not grow with the rows (the kernel
    map's landmark work once all ``-X`` landmarks are drawn: the selector's cost
    predictions); ``nbytes``: the bytes kept; ``complete``: every fold's work is kept."""

    def __init__(self, y, rows: Rows, params: TrainParams, nr_fold: int,
                 counter: dict | None = None, keep_bytes: int = 0):
        if not shares_fold_work(params):
            raise ValueError("SharedFolds: the options are neither a kernel PCA map nor a "
                             "local coding trained by -s 1, 2 or 3")
        params = params.replaced(nr_fold=int(nr_fold))
        check_parameter(params)
        _, self._quiet, self._counter, self.y = _search_inputs(y, rows, params, None, counter)
        if params.kernel_type < 0:
            if params.coding in LLSVM_CODINGS:
                llsvm.check_local_params(params)
            else:
                occ.check_occ_params(params)
        self._params = params
        self._kernel_map = kernel_map_of(params) if params.kernel_type < 0 else None
        self._rows = self._kernel_map(rows) if self._kernel_map is not None else rows
        self._nr_feature = rows.n_features
        self._nr_fold, self._perm, self._start = search_folds(self._rows.n_rows, params, None)
        self.search = (invariant.linear_params(params) if params.kernel_type >= 0
                       else params.replaced())
        self._keep_bytes = int(keep_bytes)
        self._kept: dict = {}
        self.seconds = 0.0
        self.fixed_seconds = 0.0
        self.nbytes = 0

    @property
    def complete(self) -> bool:
        return len(self._kept) == self._nr_fold

    def _fold_work(self, f: int):
        """Fold f (``-v``'s, seed path ``(f + 1,)``) and its C-free work."""
        params = self._params
        fold = fold_at(f, self.y, self._rows, params, self._perm, self._start)
        if params.kernel_type >= 0:
            kernel = invariant.kernel_from_params(params, self._nr_feature)
            return fold, _KernelMapSetting(fold, kernel, params, self._counter)
        if params.coding in OCC_CODINGS:
            return fold, _OCCSetting(fold, int(params.n_anchors), params,
                                     self._rows.n_features, self._counter)
        anchors = fold_anchors([fold], params, self._counter)
        return fold, _llsvm_settings([fold], anchors, params, self._nr_feature,
                                     self._kernel_map, self._counter)[0]

    def targets_at(self, C_values):
        """``(targets, shared_seconds, seconds)``: for each C of ``C_values`` every
        row's label predicted by the model of the fold that held it out, trained cold
        at C; the seconds spent on the folds' shared work in this call (0 when all was
        kept), and each C's seconds of training and prediction."""
        Cs = [float(C) for C in C_values]
        targets = [np.empty(self.y.shape[0]) for _ in Cs]
        seconds = [0.0] * len(Cs)
        shared = fixed = 0.0
        loss = _loss(self.search)
        for f in range(self._nr_fold):
            if f in self._kept:
                fold, setting = self._kept[f]
            else:
                t = time.perf_counter()
                fold, setting = self._fold_work(f)
                shared += time.perf_counter() - t
                fixed += getattr(setting, "fixed_seconds", 0.0)
            for i, C in enumerate(Cs):
                t = time.perf_counter()
                point = self.search.replaced(C=C)
                _, w = _solve_fold(fold, setting, point, loss, self._quiet, {},
                                   self.search.n_threads)
                targets[i][fold.test_ids] = setting.predict(w, point)
                seconds[i] += time.perf_counter() - t
            if f not in self._kept:
                held = _held_bytes(fold) + _held_bytes(setting)
                if self.nbytes + held <= self._keep_bytes:
                    self._kept[f] = (fold, setting)
                    self.nbytes += held
            del fold, setting            # a fold not kept is freed before the next
        if shared > self.seconds:
            self.seconds, self.fixed_seconds = shared, fixed
        return targets, shared, seconds


def cross_validation_at_Cs(y, rows: Rows, params: TrainParams, C_values, nr_fold: int,
                           counter: dict | None = None, keep_bytes: int = 0):
    """``-v``'s predictions at each C of ``C_values`` on one :class:`SharedFolds`
    (``keep_bytes``: see there).  Returns ``(targets, shared, shared_seconds,
    seconds)``: one prediction array per C, the :class:`SharedFolds`, the seconds of
    the folds' shared work, and each C's seconds."""
    shared = SharedFolds(y, rows, params, nr_fold, counter, keep_bytes)
    targets, shared_seconds, seconds = shared.targets_at(C_values)
    return targets, shared, shared_seconds, seconds


def find_local_parameters(y, rows: Rows, params: TrainParams, info: Messages | None = None,
                          perm: np.ndarray | None = None, counter: dict | None = None,
                          c_only: bool = False, deadline: float | None = None):
    """``-C`` with a local coding (module doc).  ``rows`` are without the bias column.

    Returns ``(LocalSearchResult, points)``: the best point and every point tried
    (:class:`SearchPoint`, in the order tried).  ``counter`` (optional dict) counts
    the shared work: ``anchors`` (anchor sets learned), ``codes`` (codings of a
    fold's rows at one setting), ``bases`` (OCC plane bases).  ``c_only``: search C
    alone, at the given ``-A`` and ``-u`` (one setting); ``deadline``: its path's
    (:func:`_run_path`)."""
    check_parameter(params)
    check_search_parameter(params)
    _require_here(params)
    if params.coding not in LLSVM_CODINGS + OCC_CODINGS:
        raise ValueError(f"-C: -L {params.coding} has no local parameter search (option -L)")
    if params.coding in LLSVM_CODINGS:
        llsvm.check_local_params(params)      # -k <= -A: the grid keeps -A >= -k
    else:
        occ.check_occ_params(params)
    info, quiet, counter, y = _search_inputs(y, rows, params, info, counter)
    nr_feature = rows.n_features
    kernel_map = kernel_map_of(params)
    mapped = kernel_map(rows) if kernel_map is not None else rows
    folds = _folds(y, mapped, params, perm)
    search = params.replaced()
    C0 = _path_start(params, mapped)
    points: list = []
    if params.coding in OCC_CODINGS:
        grid = plane_grid(params, mapped.n_features, min(f.rows.n_rows for f in folds))
    else:
        grid = anchor_grid(params)
    if c_only:
        grid = [int(params.n_anchors)]

    def record(n_anchors, u):
        def on_point(C, rate):
            points.append(SearchPoint(n_anchors, u, C, rate,
                                      point_options(params, C, n_anchors, u)))
        return on_point

    for A in grid:
        if params.coding in OCC_CODINGS:
            u = float(params.coding_param)
            try:
                # the planes live in the -K mapped space: the models see mapped rows
                settings = [_OCCSetting(f, A, params, mapped.n_features, counter)
                            for f in folds]
            except ValueError as err:
                info(f"-A {A}: skipped ({err})\n")
                continue
            _run_path(y, folds, settings, search.replaced(n_anchors=A), C0,
                      "A=%d\t" % A, info, quiet, record(A, u), deadline)
            continue
        sp = search.replaced(n_anchors=A)
        try:
            anchors = fold_anchors(folds, sp, counter)
        except ValueError as err:        # e.g. more anchors than a fold's rows
            info(f"-A {A}: skipped ({err})\n")
            continue
        us = [float(params.coding_param)] if c_only else coding_grid(sp, folds[0].rows,
                                                                      anchors[0])
        for u in us:
            su = sp.replaced(coding_param=u)
            settings = _llsvm_settings(folds, anchors, su, nr_feature, kernel_map, counter)
            _run_path(y, folds, settings, su, C0, "A=%d\tu=%g\t" % (A, u), info, quiet,
                      record(A, u), deadline)
    if not points:
        raise ValueError(f"-C: no setting of -A could be trained (option -A {params.n_anchors})")
    best = max(points, key=lambda p: p.rate)      # the first of the best (max keeps it)
    return LocalSearchResult(best.C, best.options, best.rate), points


KERNEL_SEARCH_FLAGS = ("-C", "-v", "-c", "-g")


def kernel_gamma_grid(params: TrainParams, n_features: int) -> list:
    """``-g`` values the kernel map's ``-C`` tries: ``g/4, g, 4g`` around ``-g`` (LIBSVM's
    ``1 / features`` when not given) -- the width of an RBF (the scale of a polynomial
    or sigmoid) is the kernel's one parameter besides C; the linear kernel has none."""
    g = invariant.kernel_from_params(params, n_features).gamma
    if int(params.kernel_type) == 0:
        return [g]
    return [g / 4.0, g, 4.0 * g]


def find_kernel_map_parameters(y, rows: Rows, params: TrainParams,
                               info: Messages | None = None, counter: dict | None = None,
                               c_only: bool = False, deadline: float | None = None):
    """``-C`` with a kernel PCA map (``-t``, ``-H 0``): the warm-started C path of
    :func:`_run_path` for each ``-g`` of :func:`kernel_gamma_grid` (``c_only``: the
    given one), on ``-v``'s folds; each fold's landmarks, map and mapped rows are
    computed once per ``-g`` and shared by every C.  The first C of a path is the model
    ``-v`` trains at that C.  Returns ``(LocalSearchResult, points)`` as
    :func:`find_local_parameters` (``SearchPoint.coding_param`` holds ``-g``;
    ``counter['maps']`` counts the maps built; ``deadline`` as there)."""
    check_parameter(params)
    check_search_parameter(params)
    _require_here(params)
    info, quiet, counter, y = _search_inputs(y, rows, params, info, counter)
    folds = _folds(y, rows, params, None)
    search = invariant.linear_params(params)
    gammas = ([invariant.kernel_from_params(params, rows.n_features).gamma] if c_only
              else kernel_gamma_grid(params, rows.n_features))
    points: list = []
    rest = options_string(params, drop=KERNEL_SEARCH_FLAGS)
    head = f"-s {int(params.solver_type)}" if "-s" not in params.given else ""
    for g in gammas:
        kernel = invariant.kernel_from_params(params.replaced(kernel_gamma=g), rows.n_features)
        settings = [_KernelMapSetting(f, kernel, params, counter) for f in folds]
        C0 = _path_start(params, settings[0].mapped)

        def on_point(C, rate, g=g):
            tail = f"-g {float_text(g)} -c {float_text(C)}"
            points.append(SearchPoint(int(params.n_landmarks), g, C, rate,
                                      " ".join(part for part in (head, rest, tail) if part)))
        _run_path(y, folds, settings, search, C0, "g=%g\t" % g, info, quiet, on_point,
                  deadline)
    best = max(points, key=lambda p: p.rate)      # the first of the best (max keeps it)
    return LocalSearchResult(best.C, best.options, best.rate), points


def best_parameters_line(result: LocalSearchResult) -> str:
    """The summary the interfaces print after ``-C`` with a local method (LIBLINEAR's
    ``Best C = ...  CV accuracy = ...%`` and the options of the best model).  A rate
    of NaN is a winner no cross-validation measured (``-C -L auto`` with a budget
    too small for one candidate): "not measured", not "nan%".  A ``best_C`` of NaN
    is a method without C (the k q-metrics): the line leaves it out."""
    rate = ("not measured" if math.isnan(result.best_rate)
            else "%g%%" % (100.0 * result.best_rate))
    head = "" if math.isnan(result.best_C) else "Best C = %g  " % result.best_C
    return "%sCV accuracy = %s  Best options: %s\n" % (head, rate, result.best_options)
