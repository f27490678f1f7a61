"""Automatic selection of a method and its parameters (issue 18, part 2: the core).

:func:`select` runs *successive halving* (Jamieson & Talwalkar 2016; Li et al.'s
Hyperband rung schedule) over candidate option strings -- methods x settings, from
:func:`candidate_options` -- on cross-validation folds of the training rows, under a
time budget ``budget_s``:

* rung ``r`` evaluates the surviving candidates by ``nr_fold``-fold cross validation
  (:func:`lcoding.training.cross_validation`, the folds of ``-v``) on the first
  ``n_r`` rows of one seeded permutation of the training rows, ``n_r`` growing by
  :data:`ETA` per rung up to all rows (the first rung at least :data:`MIN_ROWS` rows
  and :data:`ROWS_PER_CLASS` per class); the best ``1 / ETA`` (at least one) go on
  -- from the second rung on, the best ``1 / ETA`` by their CV error and those by the
  error their own learning curve expects on the next rung's rows
  (:func:`curve_error`, :func:`_survivors`): a model that gains more from more rows
  is not dropped for a subsample's ranking; and (a few) within one standard error of
  the last one kept, which the subsample cannot tell from it;
* ``LocallyLinearSVC()``'s options (:data:`DEFAULTS_POSITION`) are a recipe: on a
  rung of fewer rows than all they are the estimator's options for the rung's rows
  (``sqrt(n_r)`` anchors, the width and C from those rows), so that the rung judges
  and the learning curve follows the estimator as it would train there; so are
  ``KQMetricsClassifier(solver='flats')``'s (:data:`FLATS_RECIPE`, three classes or
  more: its flats per class follow the rows);
* candidates that differ only in ``-c`` and whose folds' work does not depend on C
  (kernel maps; local codings by ``-s 1, 3``: :func:`_families`) run as one unit:
  each fold's map (anchors, codes) is built once, every C trains cold on it
  (:class:`~lcoding.methods.local_search.SharedFolds`; the same CV errors as one by
  one), and a rung keeps it for the members it passed over;
* a candidate that fails (e.g. more planes than the rank allows) is skipped with a
  line in the table, never aborting the search;
* before a rung starts, its cost is predicted from its candidates' trials in the
  last rung (``ETA`` times more rows, times :data:`GROWTH` for the superlinear
  solvers); when it would not fit in what is
  left of the budget, the rung runs only its best-ranked candidates that fit (in
  rank order, passing over a dear one for cheaper ones after it; at least two, else
  the search stops; then a passed-over one runs after all if its own cost, without
  the GROWTH margin, fits in what they left), and within a rung no candidate starts
  once the budget is spent, and a trial that runs into the time the best candidate's
  refit needs is stopped at its next check (:func:`lcoding.core.threads.deadline`,
  :data:`STOP_SLACK`; the table says ``stopped: budget spent``).  The winner is the
  best-ranked candidate of the highest rung run to its end (the first rung's best when
  none was): on all rows, the lowest CV error;
  when the budget stopped the schedule earlier, the lowest extrapolated one; and
  when that rung passed over the best of the rung before it for its cost (and that
  one's refit fits), the rung before decides, where both were measured on the same
  rows (:func:`_unmatched_lead`);
* parsimony (``parsimony=True``): the winner gives way to the candidate of its rung
  cheapest to predict (multiply-adds a row, :func:`lcoding.methods.kq.prediction_work`;
  the k q-metrics and flats, whose sizes -- :func:`~lcoding.methods.defaults.flats_ladder`
  -- cost several times apart) whose CV error is within one paired standard
  error of the winner's on the same rows and folds (:func:`_parsimonious`): the
  one-standard-error rule, the folds cannot tell the two apart;
* the screen (``screen=True``): a winner of affine k q-flats gets one restart of
  smaller flats in front of its restarts, labelling the rows whose class leads by a
  margin -- the most rows whose labels keep the folds' CV error within one paired
  standard error of the winner's (:func:`_fold_screen`, :func:`_screen_margin`); its
  options then carry ``-U margin``;
* the budget holds the refit on all rows as well (``refit``, or ``plan_refit`` for
  a refit the caller runs, as ``AutoLocalClassifier`` does): a candidate's refit
  is predicted from its latest trial, linear in the rows (its folds trained on
  ``(k - 1) n_r`` rows in all, the refit trains once on ``n``), with a margin of
  :data:`REFIT_MARGIN`;
  a rung runs only with room for its dearest refit after it (a partial rung: for the
  refit of the dearest candidate it runs), and the winner is the best-ranked
  candidate whose refit fits in what is left (none: the quickest refit), so that the
  whole call keeps to ``budget_s`` as far as the predictions hold;
* a budget too small for even one candidate fits the cheapest applicable method
  (the linear SVM) and says so in :attr:`Selection.note`;
* ``n_threads`` > 1 runs the candidates of a rung side by side (one thread each; the
  trials do not change) and refits the winner with ``-m n_threads``;
* ``refine_C``: when the winner is a local coding trained by ``-s 1, 3`` and the
  budget allows, its ``C`` is refined by the warm-started ``-C`` path of
  :mod:`lcoding.methods.local_search` at its anchors and ``-u``, on the rows and
  folds of the rung that chose it (a table line ``C refinement``), and the new C is
  taken only when a cold ``-v`` on the same folds confirms a lower error;
* the winner is refitted on all training rows (``refit``).

Deterministic for a seed: the candidates (their data-dependent widths come from a
seeded sample of the training rows) and the row permutation of the rungs derive from
``seed`` under the selector's own purpose :data:`~lcoding.core.seeds.PURPOSE_SELECT`
(paths :data:`WIDTH_STREAM`, :data:`ORDER_STREAM`), the folds of every trial are
``-v``'s for ``-S seed``; the errors, ranking and table are the same on every run,
as long as the budget does not cut the schedule (where it cuts depends on the
machine's speed; a budget large enough for the whole schedule gives the same winner
everywhere).

It is placed above the router (:mod:`lcoding.training`): it only writes option
strings and calls ``cross_validation`` / ``train_model``.  The scikit-learn front end
is :class:`lcoding.sklearn.AutoLocalClassifier`.
"""
from __future__ import annotations

import dataclasses
import math
import re
import time
from dataclasses import dataclass, field

import numpy as np

from lcoding.core.messages import Messages
from lcoding.core.model import Model
from lcoding.core.options import check_search_parameter, float_text, parse_train_options
from lcoding.core.rows import Rows, as_labels, as_rows
from lcoding.core.seeds import PURPOSE_SELECT, rng_state
from lcoding.core.threads import DeadlinePassed, blas_for_training, deadline, map_threads
from lcoding.local.anchors import dense_rows
from lcoding.methods.defaults import (KMEANS_ITER, flats_dimension, flats_ladder,
                                      flats_suit, spanned_dimension, llsvm_default_options)
from lcoding.methods.kq import (SCREEN_MIN_GAIN, class_lead, prediction_work,
                                screen_fold_scores, screenable)
from lcoding.methods.local_search import (coding_scale, cross_validation_at_Cs,
                                          find_kernel_map_parameters, find_local_parameters,
                                          shares_fold_work)
from lcoding.training import cross_validation, cv_folds, train_model

ETA = 3                   # 1 / ETA of the candidates survive a rung; rows grow ETA-fold
MIN_ROWS = 600            # rows of the first rung (all rows when there are fewer) ...
ROWS_PER_CLASS = 50       # ... and at least this many per class (letter: 26 classes, 1300)
KPCA_MAX_FEATURES = 64   # the kernel PCA map is a candidate for at most this many features
KPCA_MIN_DENSITY = 0.5   # ... stored as at least this fraction of non-zero values
KPCA_LANDMARKS = 1000    # -X of that candidate (InvariantSVC's default)
KQ_MIN_FEATURES = 50      # k q-metrics (PCA to 50 dimensions) for more features than this
KQ_MAX_FEATURES = 100_000  # ... and at most this many (the PCA's 50 x d directions: 40 MB;
                           # past 2048 features it runs Lanczos, no d x d gram)
KQ_CANDIDATE = "-s 40 -k 8 -Q 20 -l 50 -Z 1 -z 0.5 -W 1 -U 1.05 -V 0.95 -D 0.1"
GROWTH = 1.5              # predicted cost of a rung / the cost of the previous one
# a refit's prediction (linear in the rows from the candidate's latest trial) times
# this: the refits ran 0.97-1.26x their linear predictions (letter's kernel map 9.7-
# 10.1 s for 10.3, MNIST's LL-SVM 17.4 for 16.2, ijcnn1's kernel map 8.7 for 6.9, and
# LocallyLinearSVC()'s options 0.67 s where 0.6 s was left: sized for all rows they
# train more anchors than the rung's trial), and ijcnn1 at a tenth of the RBF SVM's
# time ended 0.11 s past its 9.18 s budget
REFIT_MARGIN = 1.25
# when no candidate's refit fits in what the search left (a busy machine), the winner
# may overrun the budget by this fraction of it for a better model than the quickest
REFIT_GRACE = 0.1
# a family's shared fold work (SharedFolds: kernel maps, anchors, codes) is kept through
# its rung for the members the rung passed over while all kept take at most this much
# (magic04's kernel map on all 12 680 rows: 3 folds of mapped rows, 0.3 GB)
KEEP_SHARED_BYTES = 1 << 30
# learning-curve ranking (from the second rung on): a candidate's CV error is
# extrapolated to the next rung's rows by the power law through its last two rungs,
# err(n) ~ n^-b with b clipped to [0, CURVE_MAX_EXPONENT] (more rows never hurt, and
# no faster than n^-1/2)
CURVE_MAX_EXPONENT = 0.5
ORDER_STREAM = 0          # path under PURPOSE_SELECT: the row permutation of the rungs
WIDTH_STREAM = 1          # path under PURPOSE_SELECT: the width rule's row sample
WIDTH_SAMPLE = 2000       # rows measured by the width rule
WIDTH_ANCHORS = 100       # random training rows standing in for the anchors there
CHEAPEST = "-s 2 -B 1 -c 1"
# where candidate_options puts LocallyLinearSVC()'s options: on a rung of fewer rows
# than all, select() trains that candidate as the estimator would train on the rung's
# rows (its anchors sqrt(n_r), width and C from them), so that its learning curve is
# the estimator's; all rows get the options for all rows.  Sized for all rows, ijcnn1's
# 200 anchors judged on a 1851-row rung had 9 rows each (CV error 7.02 %, 5.35 % with
# the 43 anchors of sqrt(1851)) and were cut.
DEFAULTS_POSITION = 3
# the k q-flats candidate (three classes or more) is KQMetricsClassifier(solver='flats')'s
# options, a recipe as well: its flats per class (about 3 q rows each) follow the rung's
# rows -- 16 flats a class fitted to letter's 1777-row rung had 3 rows each (CV error
# 21.3 %; the rule's 3 flats, 16.2 %)
FLATS_RECIPE = "-s 41 "
# a trial is stopped (DeadlinePassed) where the refit of the best candidate so far
# would no longer fit, this fraction of the budget (at least STOP_SLACK_MIN seconds)
# before it: the trial ends at its next check (between passes or blocks of rows), and
# the refit must still fit after that, or a worse candidate whose refit fits would win
# (letter at RBF / 10: the flats' refit, predicted 1.0 s, missed the 1.0 s left by
# milliseconds and the linear SVM won)
STOP_SLACK = 0.01
STOP_SLACK_MIN = 0.05
# a trial's note when the budget left no room to start it, or stopped it part-way
NOT_RUN = "not run: budget spent"
STOPPED = "stopped: budget spent"


@dataclass(frozen=True)
class Trial:
    """One evaluation: rung, candidate, rows used, CV error (percent; None when it
    was skipped), seconds, and a note (why it was skipped)."""
    rung: int
    options: str
    n_rows: int
    cv_error: float | None
    seconds: float
    note: str = ""


@dataclass
class Selection:
    """What :func:`select` found: the winner's options and CV error at the rung that
    chose it, every trial, the refitted model (``None`` without ``refit``), a note
    (the budget's effect), the whole call's seconds and the refit's."""
    best_options: str
    cv_error: float | None
    trials: list = field(default_factory=list)
    model: Model | None = None
    note: str = ""
    seconds: float = 0.0
    refit_seconds: float | None = None
    # the margin of the winner's screen (-U in best_options, with -s 41: the refit
    # has it), None without one
    screen_margin: float | None = None

    def table(self) -> str:
        """The trials as a Markdown table."""
        lines = ["| rung | rows | options | CV error % | time s | note |",
                 "| --- | --- | --- | --- | --- | --- |"]
        for t in self.trials:
            err = "" if t.cv_error is None else f"{t.cv_error:.2f}"
            lines.append(f"| {t.rung} | {t.n_rows} | `{t.options}` | {err} | "
                         f"{t.seconds:.2f} | {t.note} |")
        return "\n".join(lines) + "\n"


def _width(rows: Rows, k: int, rng: np.random.Generator) -> float:
    """``3 / median(d_k - d_1)`` (docs/llsvm.md's rule) against random training rows
    standing in for the anchors, two significant digits."""
    n = rows.n_rows
    sample = rows.take(np.sort(rng.permutation(n)[:min(n, WIDTH_SAMPLE)]))
    anchor_ids = np.sort(rng.permutation(n)[:min(n, WIDTH_ANCHORS)])
    anchors = dense_rows(rows, anchor_ids, rows.n_features)
    return float(f"{coding_scale(sample, anchors, k):.2g}")


def candidate_options(y, rows: Rows, seed: int = 1) -> list:
    """The candidates for these rows: the linear SVM, LL-SVM with the Gaussian and the
    inverse-distance codings (the Gaussian width from the training rows; also
    ``LocallyLinearSVC()``'s data-scaled defaults), the k*
    coding, the Hellinger map first when every value is >= 0, anchor planes when
    there are enough features for planes, k q-metrics when there are 51 to 100 000
    features, affine k q-flats when there are three classes or more, and the RBF
    kernel PCA map when there are few dense features.
    The linear SVM first, then the estimators' defaults (a budget that cuts the first
    rung still tries them), then the grids, the dearest (the kernel maps) last; ties
    in the CV error go to the earlier candidate."""
    n, d = rows.n_rows, rows.n_features
    rng = np.random.Generator(np.random.PCG64(rng_state(seed, PURPOSE_SELECT, WIDTH_STREAM)[0]))
    out = [f"-s 2 -B 1 -c {c}" for c in ("0.1", "1", "10")]
    assert len(out) == DEFAULTS_POSITION
    # the estimators' defaults next, chosen by CV across the shared sets: a tight
    # budget that cuts the first rung still tries them.  LocallyLinearSVC()'s: sqrt(n)
    # anchors (>= 4 per class), 16 neighbours, the width and C scaled to the data
    # (lcoding.methods.defaults) -- the selector then never does worse on its folds
    # than the estimator at its defaults
    out.append(llsvm_default_options(rows, int(np.unique(y).size), seed))
    if KQ_MIN_FEATURES < d <= KQ_MAX_FEATURES:
        # many features (images, text): discriminative k q-metrics on a 50-dimensional
        # PCA, KQMetricsClassifier(solver='metrics')'s setting -- on MNIST and USPS
        # it was the best of the estimators at their defaults (1.33 % and 4.58 % test
        # error); the PCA's 50 x d directions bound d
        out.append(KQ_CANDIDATE)
    span = spanned_dimension(rows, flats_dimension(d)[0]) if d <= KQ_MAX_FEATURES else 0
    if d <= KQ_MAX_FEATURES and flats_suit(int(np.unique(y).size), span):
        # many classes: affine k q-flats, KQMetricsClassifier(solver='flats')'s options
        # (a recipe, FLATS_RECIPE: the flats per class follow the rung's rows) -- 5
        # restarts of nearest-flat rules (their mean distance decides), trained in 0.5 s
        # on letter's 10 667-row folds with 2.35 % 3-fold CV error (the RBF kernel map:
        # 3.3 % test error in 10 s); on two classes flats are poor (magic04 23 %,
        # ijcnn1 13 % at 8000 rows)
        # ... in FLATS_LADDER sizes, each about half the multiply-adds a row of the one
        # before (flats_ladder); the smallest the paired folds cannot tell from the best
        # wins (select's parsimony)
        for option in flats_ladder(rows, int(np.unique(y).size), span):
            if option not in out:
                out.append(option)
    A = max(1, min(100, n // 10))
    k = min(8, A)
    beta = _width(rows, k, rng)
    # the LL-SVM candidates' k-means runs LocallyLinearSVC()'s KMEANS_ITER Lloyd steps
    # (-I; as good on CV as 20, at half the anchors' cost)
    it = f"-I {KMEANS_ITER}"
    for anchors in sorted({max(k, A // 2), A}):
        for u in (beta / 2, beta, 2 * beta):
            for c in ("1", "10"):
                out.append(f"-s 1 -L 2 -B 1 -A {anchors} -k {k} -u {float_text(float(f'{u:.2g}'))} "
                           f"{it} -c {c}")
    out += [f"-s 1 -L 1 -B 1 -A {A} -k {k} -u 1 {it} -c {c}" for c in ("1", "10")]
    out.append(f"-s 1 -L 3 -B 1 -A {max(1, A // 2)} -u {float_text(beta)} {it} -c 1")
    if rows.data.size and float(rows.data.min()) >= 0:
        mapped = Rows(np.sqrt(rows.data), rows.indices, rows.indptr, rows.n_features)
        beta_h = _width(mapped, k, rng)
        out += [f"-s 1 -L 2 -K 3 -B 1 -A {A} -k {k} -u {float_text(beta_h)} {it} -c {c}"
                for c in ("1", "10")]
    if d >= 8:
        out += [f"-s 1 -L 4 -B 1 -A {min(d, 32)} -u 1 -c {c}" for c in ("1", "10")]
    if d <= KPCA_MAX_FEATURES and rows.data.size >= KPCA_MIN_DENSITY * n * d:
        # few dense features (magic04, letter): the RBF kernel PCA map (-t 2, Nystroem
        # landmarks) is what the anchors cannot match -- on magic04 its CV error was
        # 13.06 % against 13.60 % for the best local coding (RBF SVM: 12.99 %)
        gamma = _gamma_scale(rows)
        # C up to 100: RBF machines often want a large C (magic04's 3-fold CV error at
        # -c 10 / 100: 13.06 / 12.86 %)
        out += [f"-s 1 -t 2 -g {float_text(float(f'{gamma * f:.3g}'))} -X {min(KPCA_LANDMARKS, n)}"
                f" -B 1 -c {c}" for f in (1, 4) for c in ("1", "10", "100")]
    return out


def _gamma_scale(rows: Rows) -> float:
    """scikit-learn's ``gamma='scale'``: 1 / (d Var(x)) over every entry of the rows."""
    n, d = rows.n_rows, rows.n_features
    total = float(n) * d
    mean = float(rows.data.sum()) / total
    var = float(np.dot(rows.data, rows.data)) / total - mean * mean
    return 1.0 / (d * var) if var > 0 else 1.0


def _rung_sizes(n: int, n_candidates: int, n_classes: int = 2) -> list:
    least = max(MIN_ROWS, ROWS_PER_CLASS * n_classes)
    rungs = 1
    while n / ETA ** rungs >= least and n_candidates / ETA ** rungs > 1:
        rungs += 1
    return [n if r == rungs - 1 else max(least, int(n / ETA ** (rungs - 1 - r)))
            for r in range(rungs)]


def curve_error(prev: tuple | None, last: tuple, n_target: int) -> float:
    """A candidate's CV error (percent) expected on ``n_target`` rows, from its errors
    ``(n_rows, error)`` at its previous rung (``prev``, None at the first) and its last:
    the power law through the two, its exponent clipped to [0, CURVE_MAX_EXPONENT].

    Why: successive halving ranks candidates by their error on a subsample, which
    favours the models that learn fastest from few rows over those that end lower.
    On ijcnn1 (49 990 rows) the RBF kernel maps (1000 landmarks) led at 16 663 rows
    with 2.01 % against the LL-SVM's 2.30 %, while their errors had fallen from 2.72
    and 3.85 % at 5554 rows; trained on all rows, the LL-SVM's test error is 1.14 %,
    the kernel map's 1.25 % (benchmarks/results/auto.md).  Extrapolated to 49 990
    rows: 1.38 % and 1.49 %."""
    n_last, e_last = last
    if prev is None or n_target <= n_last:
        return e_last
    n_prev, e_prev = prev
    if not (n_prev < n_last and e_prev > 0 and e_last > 0):
        return e_last
    slope = math.log(e_prev / e_last) / math.log(n_last / n_prev)
    slope = min(max(slope, 0.0), CURVE_MAX_EXPONENT)
    return e_last * (n_last / n_target) ** slope


def _survivors(results: list, keep: int, n_rows: int | None = None) -> list:
    """The candidates that go on from ``results`` = sorted ``(expected error, error,
    candidate)``: those among the best ``keep`` by their error on this rung's rows *or*
    by the error their learning curve expects on the next rung's (:func:`curve_error`),
    best first by the better of the two places.  The curve rescues a model that gains
    more from more rows; it never drops one the subsample ranks high, because a
    curve through two noisy points can mislead: on magic04 the kernel map at ``-c 100``
    was the fourth of 10 at 4226 rows by its error (14.51 %, up from 14.28 %: flat by
    its curve, the sixth) and the best on all 12 680 rows (12.86 %).

    With ``n_rows`` (the rows the errors were measured on; from the second rung on,
    as the curves), the candidates whose error is within one standard error
    ``sqrt(e (1 - e) / n_rows)`` of the last one kept by its error go on as well, the
    best ``ceil(keep / ETA)`` of them, after the others (so that a tight budget runs
    them last): the subsample cannot tell them apart.  The same kernel map fell out as
    the fifth of 10 at 14.72 % against the fourth's 14.60 %, when one standard error
    there is 0.54 points.  The first rung keeps its plain cut: on its few hundred rows
    one standard error (1-2 points) would let most candidates through."""
    curve_place = {c: i for i, (_, _, c) in enumerate(results)}
    by_error = sorted(results, key=lambda t: t[1:])
    error_place = {c: i for i, (_, _, c) in enumerate(by_error)}
    place = {c: min(curve_place[c], error_place[c]) for c in curve_place}
    chosen = sorted((c for c in place if place[c] < keep),
                    key=lambda c: (place[c], curve_place[c]))
    if n_rows and 0 < keep < len(by_error):
        last = by_error[keep - 1][1]
        rate = min(max(last / 100.0, 0.0), 1.0)
        margin = 100.0 * math.sqrt(rate * (1.0 - rate) / n_rows)
        ties = [c for _, err, c in by_error[keep:] if err <= last + margin and c not in chosen]
        chosen += ties[:math.ceil(keep / ETA)]
    return chosen


def _unmatched_lead(earlier: list | None, last: list | None, failed: set, refit_seconds,
                    left: float):
    """The candidate that must decide the winner on the rung before the last complete
    one, or None: the best-ranked of ``earlier`` (that rung's ranking, ``(error,
    candidate, rung)``) whose refit (``refit_seconds(candidate)``) fits in ``left``
    seconds, when the last complete rung (``last``) did not run it -- the budget
    passed it over for its cost.

    Why: errors measured on more rows are lower, so the candidates that did run on the
    larger rung would win over the leader by their rows, not by their merit.  magic04
    at a tenth of the RBF SVM's time: the kernel map led the second rung (4226 rows,
    13.96 %), its trial on all rows did not fit, the anchor planes' did (13.69 %
    there, 14.03 % beside the map); the planes won with 14.56 % test error against
    the map's 13.66 %.  Compared on the same rows, the map leads."""
    if not earlier or not last:
        return None
    ran = {c for _, c, _ in last}
    for _, c, _ in earlier:
        if c in failed:
            continue
        if refit_seconds(c) <= max(left, 0.0):
            return c if c not in ran else None
    return None


# the solvers whose settings the selector groups into families and whose winner's C
# it refines: the dual CD.  -s 2 (Newton) settings can share their folds too
# (SharedFolds) and -C searches them, but taken in here they changed the choice for
# the worse: ijcnn1 at a tenth of the RBF SVM's time took LocallyLinearSVC()'s
# setting at 16 times its C, refined on the first rung's 5554 rows, 1.31 -> 1.46 %
# test error; they stay single, unrefined candidates until the rung cost model is
# re-checked with them
FAMILY_SOLVERS = (1, 3)


def _parsimonious(winner: tuple, ranked: list, wrong_of: dict, work: dict, fits) -> tuple | None:
    """The candidate of ``ranked`` (``(error, candidate, rung)``) that replaces
    ``winner`` for being cheaper to predict, or None: of those measured on the winner's
    rung and rows whose ``work`` (multiply-adds a row, :func:`prediction_work`; None:
    not comparable) is lower than the winner's and whose refit ``fits(candidate)``,
    the one of least work whose CV error exceeds the winner's by at most one standard
    error of the difference -- paired, both judged on the same rows by the same folds
    (``wrong_of``: candidate -> (rung, its wrong rows)): with ``b`` rows only the
    winner gets wrong and ``c`` only the candidate, ``sqrt(b + c - (b - c)^2 / n) /
    n``.  The one-standard-error rule (Breiman et al. 1984; Hastie, Tibshirani &
    Friedman, ESL 7.10) with the cost to predict as the model's size.

    Why: the sizes of the k q-flats (``flats_ladder``) are alike on the
    folds where they cost several times apart: on usps's 7291 training rows (3-fold
    ``-v``, ``-S 1``) ``-k 20 -Q 12 -l 50`` had 1.66 % CV error and ``-k 16 -Q 7 -l 30``
    1.70 % (one standard error of the difference: 0.11 points), and they predict in
    9.3 and 3.3 µs a row; the same model's CV error moves by 0.26 points between two
    fold seeds.  Where the folds do tell them apart the larger stays (letter: 2.44
    against 2.90 %, SE 0.11; usps on ``-S 0``'s folds: 1.40 against 1.54 %, SE 0.10).
    The paired SE counts the rows' noise, not the training's (the flats' seeding), so
    the rule is conservative."""
    _, c_w, rung_w = winner
    if work.get(c_w) is None or wrong_of.get(c_w, (None,))[0] != rung_w:
        return None
    mask_w = wrong_of[c_w][1]
    n = mask_w.size
    best = None
    for t in ranked:
        _, c, rung = t
        if c == c_w or rung != rung_w or work.get(c) is None or not work[c] < work[c_w] or \
                wrong_of.get(c, (None,))[0] != rung_w or not fits(c):
            continue
        mask = wrong_of[c][1]
        if mask.size != n:
            continue
        b = int(np.count_nonzero(mask_w & ~mask))
        d = int(np.count_nonzero(mask & ~mask_w))
        if _within_paired_se(b, d, n) and (best is None or work[c] < work[best[1]]):
            best = t
    return best


def _within_paired_se(b, c, n: int):
    """Whether ``c - b`` more wrong rows of ``n`` (``b`` rows only the first model
    gets wrong, ``c`` only the second) are at most one standard error of the paired
    difference, ``sqrt(b + c - (b - c)^2 / n)`` rows (arrays: elementwise)."""
    b = np.asarray(b, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    return c - b <= np.sqrt(np.maximum(b + c - (b - c) ** 2 / n, 0.0))


def _screen_margin(y: np.ndarray, full: np.ndarray, screen: np.ndarray,
                   margins: np.ndarray, screen_work: float, full_work: float):
    """The margin of a k q-flats model's screen (:class:`lcoding.methods.kq.KQScreen`)
    from its folds, or None: ``full`` the model's CV labels of the rows ``y``,
    ``screen`` and ``margins`` the screen's (its best class and that class's lead
    over the second).  Screening the m rows of largest margin labels them by the
    screen: the largest m whose screened CV labels err on at most one paired standard
    error more rows than the model's (:func:`_within_paired_se`; the rule of
    :func:`_parsimonious`, over the cascades of every m: the cheapest of those the
    folds cannot tell from the model).  The margin is the m-th row's, positive (rows
    of equal margin are screened together, so a tie at the cut moves it up).  usps
    (3-fold CV of its winner, 7291 rows): 88 % of the rows, 3 wrong rows more (1.40
    -> 1.44 %).  None when the screen would
    not save :data:`~lcoding.methods.kq.SCREEN_MIN_GAIN` of ``full_work`` (the
    restarts' multiply-adds a row, at least: the screen's own ``screen_work`` is
    paid on every row).  Returns ``(margin or None, rows screened, extra wrong rows)``."""
    n = y.size
    key = np.where(np.isnan(margins), -np.inf, margins)
    order = np.argsort(-key, kind="stable")
    full_wrong = (full != y)[order]
    screen_wrong = (screen != y)[order]
    b = np.cumsum(full_wrong & ~screen_wrong)
    c = np.cumsum(screen_wrong & ~full_wrong)
    ok = np.flatnonzero(_within_paired_se(b, c, n) & (key[order] > 0))
    m = int(ok[-1]) + 1 if ok.size else 0
    while m > 0 and m < n and key[order[m]] == key[order[m - 1]]:
        m -= 1          # the cut falls inside a tie: screen none of it
    gain = m / n - screen_work / full_work if full_work > 0 else -1.0
    if m == 0 or gain < SCREEN_MIN_GAIN:
        return None, m, int(c[m - 1] - b[m - 1]) if m else 0
    return float(key[order[m - 1]]), m, int(c[m - 1] - b[m - 1])


def _fold_screen(y, rows: Rows, ids, trial: tuple, extra: str, nr_fold: int, notes: list,
                 until: float):
    """The winner's screen margin (:func:`_screen_margin`) on the folds of its rung,
    or None: ``ids`` the rung's rows (before sorting), ``trial`` the winner's
    ``(rung, CV labels, options there)``.  Each fold's screen trains on the fold's
    rows (:func:`lcoding.methods.kq.screen_fold_scores`, the folds of
    :func:`lcoding.training.cross_validation`, so its rows meet the winner's own fold
    labels); stopped at ``until`` (the refit's time) or failing: no screen, and a
    note."""
    rung, full, options = trial
    n_classes = int(np.unique(y).size)
    params = parse_train_options(options + extra)
    if not screenable(params, n_classes):
        return None
    ids = np.sort(ids)
    sub_y, sub_rows = y[ids], rows.take(ids)
    n_r = ids.size
    margins = np.empty(n_r)
    labels = np.empty(n_r)
    t = time.perf_counter()
    try:
        with deadline(until):
            for f, (train, test) in enumerate(cv_folds(n_r, params.seed,
                                                       min(nr_fold, n_r))):
                classes, scores, work_s, work_f = screen_fold_scores(
                    sub_y[train], sub_rows.take(train), sub_rows.take(test), params, (f + 1,))
                margins[test] = class_lead(scores)
                labels[test] = np.asarray(classes, dtype=np.float64)[np.argmax(scores, axis=1)]
    except (DeadlinePassed, ValueError, ArithmeticError, MemoryError) as e:
        notes.append("no screen: " + ("the budget left no room for its folds"
                                      if isinstance(e, DeadlinePassed) else str(e)))
        return None
    margin, m, extra_wrong = _screen_margin(sub_y, full, labels, margins, work_s, work_f)
    what = (f"{m} of the rung's {n_r} rows ({100.0 * m / n_r:.1f} %) within one paired "
            f"standard error ({extra_wrong:+d} wrong rows), its {work_s:.3g} multiply-adds a "
            f"row against the restarts' {work_f:.3g} ({time.perf_counter() - t:.2f} s)")
    notes.append(f"screen -U {float_text(margin)}: the flats' screen labels the rows whose "
                 f"class leads by that, on its folds " + what if margin is not None
                 else f"no screen: on its folds it screens {what}")
    return margin


def _families(cands: list, extra: str) -> dict:
    """candidate -> its options without ``-c``, for the candidates whose folds' work
    does not depend on C (:func:`~lcoding.methods.local_search.shares_fold_work`: a
    kernel PCA map, a local coding) trained by the dual CD (:data:`FAMILY_SOLVERS`).
    Candidates of a rung with the same key are one setting at several C:
    :func:`cross_validation_at_Cs` builds each fold's map (anchors, codes) once for
    all of them and trains every C cold, so that their CV errors are the ones ``-v``
    gives each alone.  On magic04 (1408 rows) the three C of a kernel map took 0.91 s
    together, 1.74 s one by one; letter's (1300 rows) 3.8 s and 6.9 s; the local
    codings' anchors and codes are a few percent of their trials."""
    out = {}
    for c, options in enumerate(cands):
        try:
            params = parse_train_options(options + extra)
        except ValueError:
            continue            # the trial reports it
        if shares_fold_work(params) and int(params.solver_type) in FAMILY_SOLVERS:
            out[c] = re.sub(r"(^| )-c \S+", "", options).strip()
    return out


def _units(candidates: list, families: dict) -> list:
    """``candidates`` cut into the units a rung evaluates: those of one family (the
    same key in ``families``) together, at the place of the first of them, the others
    (key None or absent) alone."""
    units, at = [], {}
    for c in candidates:
        key = families.get(c)
        if key is None:
            units.append([c])
        elif key in at:
            units[at[key]].append(c)
        else:
            at[key] = len(units)
            units.append([c])
    return units


def _rung_cost(candidates: list, cost: dict, shared_cost: dict, families: dict) -> float:
    """The predicted seconds of running ``candidates`` (in this order): each its
    ``cost``, less its ``shared_cost`` (the folds' map) when one of its family ran
    before it in the list."""
    total, seen = 0.0, set()
    for c in candidates:
        key = families.get(c)
        total += cost[c] - (shared_cost[c] if key is not None and key in seen else 0.0)
        if key is not None:
            seen.add(key)
    return total


def _refine_C(y, rows, order, n_r, options, error, trials, extra, nr_fold, left, info,
              cost: float):
    """The winner's ``C`` refined by the warm-started ``-C`` path of
    :mod:`lcoding.methods.local_search` at its anchors and ``-u`` (local codings with
    ``-s 1, 3``) or its ``-g`` (the kernel PCA map: each fold's map built once), on the
    rows and folds of the rung that chose it, from ``C / 4`` up.
    Runs when the predicted cost (4 of the winner's trials of ``cost`` seconds) fits
    in ``left``, its path stopped where a next C would not fit before one trial's
    ``cost`` is left for the new C's confirming cold ``-v`` (skin at a tenth of the
    RBF SVM's 360 s: 9 values of C on 54 457 rows took 22.5 s, predicted 5.8 s, and
    the budget was overrun by 24 %); returns
    ``(cv error, options)`` when the new C's cold ``-v`` error is lower, else None."""
    parsed = parse_train_options(options + extra)
    if parsed.coding == 0 and parsed.kernel_type < 0:
        return None             # not a local coding or kernel map (linear, k q-metrics...)
    if int(parsed.solver_type) not in FAMILY_SOLVERS:
        # -C runs every solver now, but a -s 2 winner refined on its rung's rows did
        # worse on all of them (FAMILY_SOLVERS)
        return None
    try:
        params = parse_train_options("-C " + options + extra + f" -v {min(nr_fold, n_r)}")
        check_search_parameter(params)
    except ValueError:
        return None
    if not 4 * cost < left:
        trials.append(Trial(len({t.rung for t in trials}), options, n_r, None, 0.0,
                            "C refinement not run: budget"))
        return None
    ids = np.sort(order[:n_r])
    params.C = params.C / 4
    t = time.perf_counter()
    rung = len({trial.rung for trial in trials})     # the table's line for it
    try:
        # a C or the confirmation that runs past what is left is stopped (the winner
        # stays): the refit's time is not the refinement's
        with deadline(t + left):
            search = (find_kernel_map_parameters if params.kernel_type >= 0
                      else find_local_parameters)
            result, points = search(y[ids], rows.take(ids), params, c_only=True,
                                    deadline=t + left - cost)
            err = 100.0 * (1.0 - result.best_rate)
            c_text = f"-c {float_text(result.best_C)}"
            new = re.sub(r"(^| )-c \S+", lambda m: f"{m.group(1)}{c_text}", options) \
                if re.search(r"(^| )-c ", options) else f"{options} {c_text}"
            note = f"C refinement: {len(points)} values of C"
            improved = new != options and err < error
            if improved and time.perf_counter() - t + cost > left:
                trials.append(Trial(rung, new, n_r, None, time.perf_counter() - t,
                                    f"{note}; its confirmation not run: budget"))
                return None
            if improved:
                # confirmed by a cold -v of the new C on the same rows and folds: where
                # the dual CD stops at its iteration cap (large C) the warm-started
                # path's solution is not the one a cold training reaches, and the
                # refit is cold
                target = cross_validation(y[ids], rows.take(ids),
                                          parse_train_options(new + extra), min(nr_fold, n_r))
                warm, err = err, 100.0 * float(np.mean(target != y[ids]))
                note += f" (warm-started path {warm:.2f} %, cold -v {err:.2f} %)"
            trials.append(Trial(rung, new, n_r, err, time.perf_counter() - t, note))
            info(f"{note}: {new}: CV error {err:.2f} %\n")
            return (err, new) if err < error else None
    except DeadlinePassed:
        trials.append(Trial(rung, options, n_r, None, time.perf_counter() - t,
                            "C refinement stopped: budget spent"))
        return None


def select(y, x, budget_s: float = 60.0, seed: int = 1, nr_fold: int = 3, n_threads: int = 1,
           candidates: list | None = None, refit: bool = True, refine_C: bool = True,
           info: Messages | None = None, plan_refit: bool | None = None,
           parsimony: bool = True, screen: bool = True) -> Selection:
    """Choose a method and its parameters by successive halving (module doc).

    ``y``, ``x``: training labels and rows (anything ``train`` accepts).  Returns a
    :class:`Selection`; ``info`` (default silent) gets one line per trial.
    ``plan_refit`` (default: ``refit``): the budget holds a refit of the winner on all
    rows after the search -- with ``refit=False``, one the caller runs
    (:class:`lcoding.sklearn.AutoLocalClassifier` refits through the estimator's own
    path, and its ``budget_s`` bounds the whole ``fit``).  ``parsimony``: the winner
    gives way to a cheaper model its folds cannot tell from it (:func:`_parsimonious`);
    False keeps the lowest CV error.  ``screen``: an affine k q-flats winner gets the
    screen its folds allow (:func:`_fold_screen`; ``Selection.screen_margin``, and the
    refit carries it); False: none."""
    t_start = time.perf_counter()
    plan = refit if plan_refit is None else bool(plan_refit)
    info = info if info is not None else Messages(quiet=True)
    rows = as_rows(x, "x")
    y = as_labels(y, "y")
    if y.shape[0] != rows.n_rows or rows.n_rows == 0:
        raise ValueError(f"select: {y.shape[0]} labels for {rows.n_rows} rows")
    if not budget_s > 0:
        raise ValueError(f"select: budget_s must be > 0, got {budget_s!r}")
    n = rows.n_rows
    extra = f" -S {int(seed)} -q"
    cands = list(candidate_options(y, rows, seed) if candidates is None else candidates)
    if not cands:
        raise ValueError("select: no candidates")
    # the estimators' defaults are recipes (module doc, DEFAULTS_POSITION): on a rung
    # of fewer rows than all they are the estimator's options for the rung's rows
    recipes = {}
    if candidates is None:
        recipes[DEFAULTS_POSITION] = lambda r, c: llsvm_default_options(r, c, seed)
        if any(o.startswith(FLATS_RECIPE) for o in cands):
            # the ladder of a rung's rows is measured once for its steps
            rung_ladder: list = [None, None]        # (rows, their ladder)

            def flats_step(r, c, step):
                if rung_ladder[0] is not r:
                    rung_ladder[:] = [r, flats_ladder(r, c)]
                return rung_ladder[1][step]
            for step, option in enumerate(flats_ladder(rows, int(np.unique(y).size))):
                at = cands.index(option) if option in cands else -1
                if at >= 0 and at not in recipes:
                    recipes[at] = (lambda r, c, step=step: flats_step(r, c, step))
    # one setting at several C shares each fold's map (a recipe's options change by rung)
    families = {c: key for c, key in _families(cands, extra).items() if c not in recipes}
    order = np.random.Generator(
        np.random.PCG64(rng_state(seed, PURPOSE_SELECT, ORDER_STREAM)[0])).permutation(n)
    sizes = _rung_sizes(n, len(cands), int(np.unique(y).size))
    trials: list = []
    survivors = list(range(len(cands)))
    complete: list | None = None    # the ranked results of the highest complete rung
    earlier: list | None = None     # ... and of the complete rung before it
    first_rung: list | None = None  # ... and of the first rung (however far it ran)
    failed: set = set()             # candidates a trial skipped for an error
    notes = []                  # what the budget did, in order
    last_seconds: dict = {}     # candidate -> seconds of its trial in the last rung
    alone: dict = {}            # candidate -> seconds its latest trial would take alone
    shared_of: dict = {}        # candidate -> of which the fold work shared with others
    fixed_of: dict = {}         # candidate -> of which the part not growing with the rows
    measured: dict = {}         # candidate -> (rows, CV error) of its trials, rung by rung
    latest: dict = {}           # candidate -> (rows, seconds, CV error) of its latest trial
    wrong_of: dict = {}         # candidate -> (rung, its CV's wrong rows) of its latest trial
    cv_labels: dict = {}        # candidate -> (rung, its CV labels, its options there)
    out_of_budget = False
    last_trial = [0.0]          # seconds of the latest trial
    stop_slack = max(STOP_SLACK * budget_s, STOP_SLACK_MIN)

    def reserve() -> float:
        # no trial starts unless the refit of the best candidate so far whose refit
        # still fits would fit after it (ijcnn1 at 9 s: the first rung's kernel maps
        # lead with a 15 s refit, the LL-SVM's 2.5 s is kept free)
        elapsed = time.perf_counter() - t_start
        refits = [(err, refit_cost(n_c, s, shared_of.get(c, 0.0), fixed_of.get(c, 0.0)))
                  for c, (n_c, s, err) in list(latest.items())]
        fitting = [v for v in refits if elapsed + v[1] <= budget_s]
        return min(fitting)[1] if fitting else 0.0

    def refit_cost(n_c: int, seconds: float, shared: float = 0.0,
                   fixed: float = 0.0) -> float:
        # the refit on all n rows, predicted from a trial of ``seconds`` on n_c rows,
        # ``shared`` of them the folds' C-free work (a kernel map, anchors and codes):
        # the k folds' solvers trained on (k - 1) n_c rows in all, but each fold's
        # shared work covered all its n_c rows (the held-out ones are mapped or coded
        # too), k n_c in all; the refit does both once on n (0 without a refit: the
        # budget then holds the search alone).  Counting the shared work as the
        # solvers' predicted magic04's -c 100 map refit at 3.0 s from its trial on all
        # rows, which then did not fit in the 2.8 s left; it takes 2.0 s.  ``fixed``
        # of the shared work does not grow with the rows (SharedFolds.fixed_seconds:
        # the map's landmark work, once per fold).  The rest is linear in the rows:
        # GROWTH on top predicted 36.5 s for MNIST's LL-SVM refit from its 3.6 s trial
        # on 6666 rows, 2.1x the 17.4 s it takes
        if not plan or n_c <= 0:
            return 0.0
        k = max(2, min(nr_fold, n_c))
        shared = min(max(shared, 0.0), seconds)
        fixed = min(max(fixed, 0.0), shared)
        return REFIT_MARGIN * (fixed / k + n / n_c * ((shared - fixed) / k
                                                      + (seconds - shared) / (k - 1)))

    for r, n_r in enumerate(sizes):
        elapsed = time.perf_counter() - t_start
        # the rung's cost: each survivor's own last trial, ETA times the rows, times
        # GROWTH (the best-ranked are often the dearest: kernel maps); a rung of 1 / ETA
        # of the last one's candidates costs GROWTH times the last rung, more when
        # statistical ties went on (_survivors)
        # -- a candidate that shares its folds' map with one ranked before it (the same
        # setting at another C, _families) pays only its own training
        # -- the part of a trial that does not grow with the rows (a kernel map's
        # landmark work once all -X landmarks are drawn) is not scaled by ETA: magic04's
        # maps on all rows were predicted at 1.7x what they took, and never ran
        threads = max(1, int(n_threads))
        fixed_cost = {c: GROWTH / threads * fixed_of.get(c, 0.0) for c in survivors}

        def grown(c, seconds):
            # a trial's seconds on the next rung: ETA times the rows, GROWTH on top
            return GROWTH / threads * (ETA * seconds - (ETA - 1) * fixed_of.get(c, 0.0))
        cost = {c: grown(c, last_seconds.get(c, 0.0)) for c in survivors}
        shared_cost = {c: grown(c, shared_of.get(c, 0.0)) for c in survivors}
        predicted = _rung_cost(survivors, cost, shared_cost, families)
        # the budget holds the refit too: a rung runs only if the refit of whichever
        # of its candidates wins still fits after it
        refits = {c: refit_cost(n_r, threads * cost[c], threads * shared_cost[c],
                                threads * fixed_cost[c]) for c in survivors}
        passed_over = []
        if r > 0 and elapsed + predicted + max(refits.values(), default=0.0) > budget_s:
            # the whole rung does not fit: run its best-ranked candidates that do (at
            # least two, or there is nothing to compare), else stop
            left = budget_s - elapsed
            # in rank order, every candidate whose predicted cost (and refit) still
            # fits (a dear one that does not is passed over for cheaper ones ranked
            # after it: ijcnn1's kernel maps, predicted at 23-34 s each on all rows,
            # and two LL-SVMs at 2-4 s)
            fitting, spent, held, paid_for = [], 0.0, 0.0, set()
            for c in survivors:
                hold = max(held, refits[c])
                # as _rung_cost: the family's map is paid by the first of it that runs
                key = families.get(c)
                extra_cost = cost[c] - (shared_cost[c] if key in paid_for else 0.0)
                if spent + extra_cost + hold <= left:
                    fitting.append(c)
                    spent, held = spent + extra_cost, hold
                    if key is not None:
                        paid_for.add(key)
            if len(fitting) < 2:
                notes.append(f"stopped before rung {r} ({len(survivors)} candidates on {n_r} "
                             f"rows): predicted {predicted:.1f} s"
                             + (f" and a refit of up to {max(refits.values()):.1f} s"
                                if plan else "") + f", {budget_s - elapsed:.1f} s left")
                break
            notes.append(f"rung {r} ran the best {len(fitting)} of its {len(survivors)} "
                         f"candidates that fit (budget: predicted {predicted:.1f} s"
                         + (f" and a refit of up to {max(refits.values()):.1f} s"
                            if plan else "") + f", {budget_s - elapsed:.1f} s left)")
            passed_over = [c for c in survivors if c not in fitting]
            survivors = fitting
        ids = np.sort(order[:n_r])
        sub_y, sub_rows = y[ids], rows.take(ids)
        rung_options = {}
        # family -> its SharedFolds in this rung, for passed-over members (memory bound)
        rung_work: dict = {}
        wanted = {families[c] for c in passed_over if c in families}

        def add_rung_options(cs, sub_y=sub_y, sub_rows=sub_rows):
            # a recipe candidate trains on a rung of fewer rows as the estimator would
            if n_r < n:
                rung_options.update({c: recipes[c](sub_rows, int(np.unique(sub_y).size))
                                     for c in cs if c in recipes})
        add_rung_options(survivors)

        def _family_refit(c, predicted, n_r=n_r):
            # the refit of c predicted from the latest trial of its family on this
            # rung's rows (the same map and rows; the dearest if several), else as
            # before the rung: magic04's -c 100 at a tenth of the RBF SVM's time was
            # held back by a refit predicted at 4.5 s from the second rung's trial
            # (x 4.5 for the rows and GROWTH), where -c 10's trial on all rows tells
            # 2.1 s (its refit: 1.5 s)
            key = families.get(c)
            seen = [refit_cost(n_r, latest[m][1], shared_of.get(m, 0.0), fixed_of.get(m, 0.0))
                    for m, k in families.items()
                    if k == key and key is not None and m in latest and latest[m][0] == n_r]
            return max(seen) if seen else predicted

        def evaluate(unit, guess=True, r=r, n_r=n_r, sub_y=sub_y, sub_rows=sub_rows):
            # the unit's candidates (one, or one setting at several C sharing each
            # fold's map: _families) -> their trials; the unit's own cost guessed as
            # the rung's last trial's (cheapest first), unless the caller predicted it
            options = [rung_options.get(c, cands[c]) for c in unit]
            held = reserve()
            if time.perf_counter() - t_start + held + \
                    (last_trial[0] if latest and guess else 0.0) > budget_s:
                return [Trial(r, o, n_r, None, 0.0, NOT_RUN) for o in options]
            t = time.perf_counter()
            k = min(nr_fold, n_r)
            try:
                # no trial runs into the time the best so far needs for its refit
                # (a stopped one ends at its next check, within STOP_SLACK)
                with deadline(t_start + budget_s - held - stop_slack):
                    key = families.get(unit[0])
                    parsed = [parse_train_options(o + extra) for o in options]
                    Cs = [p.C for p in parsed]
                    if key is None:
                        targets = [cross_validation(sub_y, sub_rows, parsed[0], k)]
                        work, paid, own, note = None, 0.0, [time.perf_counter() - t], ""
                    elif key in rung_work:
                        # passed-over members of a family that ran: its folds' map was kept
                        work = rung_work[key]
                        targets, paid, own = work.targets_at(Cs)
                        note = "each fold's map kept from the same setting's other C"
                    else:
                        # kept only for a member the rung passed over (its second chance)
                        kept = sum(w.nbytes for w in list(rung_work.values()))
                        room = max(0, KEEP_SHARED_BYTES - kept) if key in wanted else 0
                        targets, work, paid, own = cross_validation_at_Cs(
                            sub_y, sub_rows, parse_train_options(key + extra), Cs, k,
                            keep_bytes=room)
                        note = (f"each fold's map shared by {len(unit)} values of C "
                                f"({paid:.2f} s, a share here)" if len(unit) > 1 else "")
                        if work.complete:
                            rung_work[key] = work
            except (DeadlinePassed, ValueError, ArithmeticError, MemoryError) as e:
                # DeadlinePassed: the trial ran into the time the refit of the best so
                # far needs (its cost was guessed from the trial before: letter's first
                # rung started a kernel map at three C, 9.6 s, with 5 s left, and the
                # whole call ended 4.8 s past its 31.6 s budget); else it failed
                seconds = (time.perf_counter() - t) / len(unit)
                note = STOPPED if isinstance(e, DeadlinePassed) else f"skipped: {e}"
                return [Trial(r, o, n_r, None, seconds, note) for o in options]
            out = []
            shared = work.seconds if work is not None else 0.0
            for c, o, target, s in zip(unit, options, targets, own):
                error = 100.0 * float(np.mean(target != sub_y))
                wrong_of[c] = (r, target != sub_y)
                cv_labels[c] = (r, target, o)
                # alone: what the trial would have cost on its own (the next rung's and
                # the refit's predictions); the table: what it cost here
                latest[c] = (n_r, shared + s, error)
                alone[c], shared_of[c] = shared + s, shared
                fixed_of[c] = work.fixed_seconds if work is not None else 0.0
                out.append(Trial(r, o, n_r, error, paid / len(unit) + s, note))
            last_trial[0] = time.perf_counter() - t
            return out

        # n_threads > 1: the rung's candidates run side by side, each on one thread (the
        # kernels release the GIL); the trials are the same, in the same order
        results = []
        units = _units(survivors, families)
        with blas_for_training(n_threads):     # the trials' own BLAS on one thread each
            by_candidate = {c: trial for unit, unit_trials
                            in zip(units, map_threads(evaluate, units, n_threads))
                            for c, trial in zip(unit, unit_trials)}
            rung_trials = [by_candidate[c] for c in survivors]
            # a second chance for the candidates the rung passed over, in rank order,
            # now that the rung's own time is known: each runs if its own last trial
            # times the rows' growth (without the rung's GROWTH margin) and its refit
            # fit in what is left.  The margin covers the rung as a whole (its best-
            # ranked are often its dearest); once they ran, what is left is known.
            # magic04 at a tenth of the RBF SVM's 190 s: the second rung ran its best
            # 6 of 10, then a kernel map it had passed over, with 10.5 s left
            for c in passed_over:
                left = budget_s - (time.perf_counter() - t_start)
                # the folds' map of its family may be kept from the rung (rung_work),
                # and the refit is better told by a member's trial on this rung's rows
                own = cost[c] - (shared_cost[c] if families.get(c) in rung_work else 0.0)
                if own / GROWTH + _family_refit(c, refits[c]) > left:
                    continue
                add_rung_options([c])
                trial = evaluate([c], guess=False)[0]
                if trial.note in (NOT_RUN, STOPPED):
                    break
                survivors = survivors + [c]
                rung_trials = list(rung_trials) + [trial]
                notes.append(f"rung {r} then ran {cands[c]} too ({left:.1f} s left)")
        # rank by the error expected on the next rung's rows (all rows after the
        # last), from each candidate's learning curve (curve_error)
        n_next = sizes[r + 1] if r + 1 < len(sizes) else n
        for c, trial in zip(survivors, rung_trials):
            if trial.cv_error is not None:
                history = measured.setdefault(c, [])
                history.append((n_r, trial.cv_error))
                expected = curve_error(history[-2] if len(history) > 1 else None,
                                       history[-1], n_next)
                results.append((expected, trial.cv_error, c))
                if expected != trial.cv_error:
                    curve = f"learning curve: {expected:.2f} % on {n_next} rows"
                    trial = dataclasses.replace(
                        trial, note=f"{trial.note}; {curve}" if trial.note else curve)
            elif trial.note in (NOT_RUN, STOPPED):
                out_of_budget = True
            elif trial.note.startswith("skipped:"):
                failed.add(c)
            trials.append(trial)
            info(f"rung {r} rows {n_r}: {trial.options}: "
                 + (f"CV error {trial.cv_error:.2f} %" if trial.cv_error is not None
                    else trial.note) + f" ({trial.seconds:.2f} s)"
                 + (f"; {trial.note}" if trial.cv_error is not None and trial.note else "")
                 + "\n")
        last_seconds = {c: alone[c] if latest.get(c, (None,))[0] == n_r and c in alone
                        else t.seconds for c, t in zip(survivors, trials[-len(survivors):])}
        results.sort()
        if r == 0 and results:
            first_rung = [(err, c, 0) for _, err, c in results]
        if out_of_budget:
            notes.append(f"budget spent during rung {r}; the winner comes from the "
                         + ("last complete rung" if r > 0 else "trials that ran"))
            break
        if results:
            earlier, complete = complete, [(err, c, r) for _, err, c in results]
        survivors = _survivors(results, max(1, math.ceil(len(results) / ETA)),
                               n_r if r > 0 else None)
        if not survivors:
            break
    ranked = complete or first_rung

    def predicted_refit(c):
        return (refit_cost(*latest[c][:2], shared_of.get(c, 0.0), fixed_of.get(c, 0.0))
                if c in latest else 0.0)

    lead = _unmatched_lead(earlier, complete, failed, predicted_refit,
                           budget_s - (time.perf_counter() - t_start))
    if lead is not None:
        notes.append(f"the budget passed over {cands[lead]}, the best of rung "
                     f"{earlier[0][2]} whose refit fits, on rung {complete[0][2]}: the "
                     f"winner comes from rung {earlier[0][2]}, where the candidates were "
                     f"compared on the same rows")
        ranked = [t for t in earlier if t[1] not in failed]
    winner = ranked[0] if ranked else None

    if winner is not None and plan:
        # the best-ranked candidate whose refit fits in what is left of the budget
        # (ijcnn1 at a 9 s budget: the kernel map leads the first rung, but its refit
        # on all 49 990 rows takes 9 s, the LL-SVM's 0.8 s); none: the quickest refit
        # When none fits, the budget is overrun whatever wins: then the best-ranked
        # whose refit overruns it by at most REFIT_GRACE of the budget, else the
        # quickest.  (letter at a tenth of the RBF SVM's 316 s on a machine busy
        # with another job: the first rung spent the budget, and the quickest refit
        # -- the linear SVM's, 36 % CV error, 0.7 s -- won over the flats' 14.7 %,
        # 0.8 s, with 0.4 s left)
        left = budget_s - (time.perf_counter() - t_start)
        fits = [t for t in ranked if predicted_refit(t[1]) <= left]
        graced = [t for t in ranked
                  if predicted_refit(t[1]) <= max(left, 0.0) + REFIT_GRACE * budget_s]
        chosen = (fits or graced or [min(ranked, key=lambda t: predicted_refit(t[1]))])[0]
        if chosen is not winner or not fits:
            how = ("fits" if fits else f"overruns the budget by at most "
                   f"{REFIT_GRACE * budget_s:.1f} s" if graced else "is quickest")
            if chosen is not winner:
                notes.append(f"the refit of {cands[winner[1]]} (predicted "
                             f"{predicted_refit(winner[1]):.1f} s) does not fit in the "
                             f"{max(left, 0.0):.1f} s left; the best-ranked candidate "
                             f"whose refit {how} won")
            else:
                notes.append(f"no refit fits in the {max(left, 0.0):.1f} s left; the "
                             f"best-ranked candidate's refit {how}")
            winner = chosen
    if winner is not None and parsimony:
        left = budget_s - (time.perf_counter() - t_start)
        nnz = rows.data.size / max(1, n)
        n_classes = int(np.unique(y).size)
        work_of = {}
        for _, c, _ in ranked:
            try:
                work_of[c] = prediction_work(parse_train_options(cands[c] + extra),
                                             rows.n_features, nnz, n_classes)
            except ValueError:
                work_of[c] = None
        cheaper = _parsimonious(winner, ranked, wrong_of, work_of,
                                lambda c: not plan or predicted_refit(c) <= max(left, 0.0))
        if cheaper is not None:
            notes.append(f"parsimony: {cands[cheaper[1]]} ({cheaper[0]:.2f} % CV error, "
                         f"{work_of[cheaper[1]]:.3g} multiply-adds a row) won over "
                         f"{cands[winner[1]]} ({winner[0]:.2f} %, {work_of[winner[1]]:.3g}): "
                         f"its folds cannot tell them apart")
            winner = cheaper
    if winner is not None and refine_C:
        left = budget_s - (time.perf_counter() - t_start) - predicted_refit(winner[1])
        n_w, seconds_w, _ = latest.get(winner[1], (0, math.inf, None))
        refined = _refine_C(y, rows, order, sizes[winner[2]], cands[winner[1]], winner[0],
                            trials, extra, nr_fold, left, info,
                            seconds_w if n_w == sizes[winner[2]] else math.inf)
        if refined is not None:
            cands = cands + [refined[1]]
            if winner[1] in latest:
                latest[len(cands) - 1] = latest[winner[1]]
            winner = (refined[0], len(cands) - 1, winner[2])
    screen_margin = None
    if winner is not None and screen and winner[1] in cv_labels and \
            cv_labels[winner[1]][0] == winner[2]:
        screen_margin = _fold_screen(y, rows, order[:sizes[winner[2]]], cv_labels[winner[1]],
                                     extra, nr_fold, notes,
                                     t_start + budget_s - predicted_refit(winner[1])
                                     - stop_slack)
    if winner is None:
        best_options, best_err = CHEAPEST, None
        notes.append("budget too small for even one candidate (or every candidate failed): "
                     f"fitted the cheapest applicable method, {CHEAPEST}")
    else:
        best_err, best_options = winner[0], cands[winner[1]]
        if screen_margin is not None:
            best_options += f" -U {float_text(screen_margin)}"
    model, refit_seconds = None, None
    if refit:
        t = time.perf_counter()
        model = train_model(y, rows,
                            parse_train_options(best_options + extra + f" -m {int(n_threads)}"))
        refit_seconds = time.perf_counter() - t
    return Selection(best_options, best_err, trials, model, "; ".join(notes),
                     time.perf_counter() - t_start, refit_seconds, screen_margin)

