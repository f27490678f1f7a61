"""Data-scaled defaults of the locally linear methods: the number of anchors, the
Gaussian coding's width and ``C`` from the training rows.

They are what the scikit-learn estimators use for ``n_anchors='auto'``,
``beta='scale'`` / ``mu='scale'`` and ``C='scale'`` (:mod:`lcoding.sklearn`), and one
of the candidates the automatic selector (:mod:`lcoding.select`) always tries.  The
constants were chosen by cross-validation on training data only
(``benchmarks/results/notes/defaults.md``).  Option strings keep their fixed defaults
for ``-A`` and ``-c`` (LIBLINEAR's ``C = 1``); one that leaves ``-u`` out with the
Gaussian or k* coding (``-L 2, 3``) takes the width :func:`scale_beta` gives
(:func:`lcoding.training.with_data_scaled_width`): those widths multiply squared
distances, so no fixed value means the same on two data sets.
"""
from __future__ import annotations

import math

import numpy as np

from lcoding.core.options import float_text
from lcoding.core.rows import Rows

AUTO_ANCHORS_MIN = 16
AUTO_ANCHORS_MAX = 200
AUTO_ANCHORS_PER_SQRT_N = 1.0
AUTO_ANCHORS_PER_CLASS = 4
BETA_SCALE_FACTOR = 2.0
C_SCALE_FACTOR = 100.0
# ... of d times the median variance of the features that vary (not their sum): the sum
# is set by the widest feature alone where ranges differ -- scikit-learn's wine, raw
# (standard deviations 0.12 to 314): C = 0.001 and LocallyLinearSVC() 25.87 % 5-fold CV
# error, 2.81 % with the median's C = 10.5.  Where features share a range the two agree:
# 3-fold CV on 8000 training rows of every shared set, seeds 0 and 1, sum / median:
# banana 9.89 / 9.89, magic04 14.21 / 14.21, ijcnn1 3.04 / 3.01, w8a 1.93 / 1.93, usps
# 2.64 / 2.62, letter 8.73 / 8.76, mnist 4.97 / 4.95, skin 0.21 / 0.19, reuters 1.67 /
# 1.68 % (benchmarks/results/notes/defaults.md)
C_SCALE_BY = "median_variance"
# a feature varies when its variance is above this fraction of its mean square (a
# constant one's variance, computed as E[x^2] - E[x]^2, is rounding)
VARYING_FEATURE = 1e-9
# LocallyLinearSVC()'s nearest anchors per row
DEFAULT_NEIGHBORS = 16
# solver='auto': the primal Newton solver (-s 2, on the coded rows) when there
# are at least this many rows per coded weight, else the dual CD (-s 1).  Both minimise
# the same objective; on the shared training sets at the defaults the Newton solver
# was 1.4-7.5x faster at 10-204 rows per weight (ijcnn1, magic04, banana, skin) and
# 1.5-4x slower at 0.3-7.5 (usps, letter): the dual CD's passes grow with the rows'
# redundancy, Newton's steps do not.
NEWTON_ROWS_PER_WEIGHT = 8
# LocallyLinearSVC()'s Lloyd steps for its k-means anchors (-I; the option string's
# default stays LIBLINEAR-style 20): 3-fold CV of the defaults on the training splits,
# two seeds, -I 20 / 10 / 5 mean error % -- banana 9.96 / 10.03 / 10.05, magic04
# 13.86 / 13.77 / 13.79, ijcnn1 1.55 / 1.53 / 1.55, usps 2.56 / 2.49 / 2.57, letter
# 5.89 / 5.77 / 5.85, w8a 1.34 / 1.30 / 1.31, mnist (15k rows) 3.35 / 3.41 / 3.46:
# no loss beyond the seeds' spread at 10 (the inertia is within 1 % of the 20th
# step's), and k-means is 30-45 % of a default fit on ijcnn1 and w8a
KMEANS_ITER = 10
# ... and from KMEANS_BATCH_MIN_ROWS rows on, KMEANS_BATCH_STEPS mini-batch steps of
# KMEANS_BATCH rows (-M; seeded by k-means++ on 6000 sampled rows) instead: 3-fold CV
# of the defaults, two seeds, Lloyd -I 10 / mini-batch -I 30 -M 2000 mean error % and
# CV time -- ijcnn1 1.52 / 1.52 % (2.32 / 1.80 s), w8a 1.31 / 1.34 % (2.76 / 1.60 s),
# mnist (30k rows) 2.86 / 2.88 % (18.4 / 14.8 s); k-means was 0.35 s of ijcnn1's 1.1 s
# fit and 0.58 s of w8a's 1.4 s.  Below 20 000 rows Lloyd's steps cost little and see
# every row
KMEANS_BATCH = 2000
KMEANS_BATCH_STEPS = 30
KMEANS_BATCH_MIN_ROWS = 20000
# KQMetricsClassifier(solver='flats'): affine k q-flats of a quarter of the dimension
# (after a centring PCA to at most 50), each flat fitted to about 3 q of its class's
# rows, at most 32 flats a class.  3-fold CV on the training splits, error % for
# 1 / 2 / 4 / 8 / 16 / 32 flats a class: letter (q 4) on 1777 rows 24.7 / 18.5 / 16.2 /
# 17.4 / 21.3 / 21.3 (the rule: 3), on 5333 rows 22.2 / 14.6 / 11.0 / 9.3 / 9.2 / 11.0
# (11), on all 16 000 21.4 / 11.8 / 7.4 / 5.5 / 4.7 / 4.1 (32); usps (q 12) 8 / 16 /
# 32: 2.06 / 2.13 / 2.32 (13); mnist (8000 rows, q 12) 4.22 / 4.02 / 4.36 (14).
# A q-flat needs q + 1 rows to be determined at all; a few times that to be estimated
FLATS_Q_DIVISOR = 4
KQ_PCA = 50         # KQMetricsClassifier's pca_components='auto': at most this many
FLATS_ROWS_PER_DIMENSION = 3
FLATS_MAX_CLUSTERS = 32
# ... and 5 restarts (-W): 3-fold CV of their vote, 1 / 3 / 5 / 9 restarts: letter 4.17 /
# 3.13 / 2.79 / 2.51 %, usps 1.91 / 1.44 / 1.43 / 1.39 %, mnist (16 000 rows) 3.14 / 2.48 /
# 2.37 % (training and prediction cost grow with the restarts).  Their mean distance
# (kq.RESTART_RULES, the affine flats' rule since) keeps gaining to 5: letter 4.18 /
# 3.05 / 2.75 / 2.64 / 2.54 % for 1-5 restarts, usps 2.06 / 1.90 / 1.68 / 1.67 / 1.65 %,
# mnist (20 000 rows) 2.67 / 2.15 / 2.04 / 2.01 / 1.92 %
FLATS_RESTARTS = 5
# The selector tries the flats in FLATS_LADDER sizes (flats_ladder), each about
# half the multiply-adds a row of the one before, and keeps the smallest whose CV error
# the paired folds cannot tell from the best (lcoding.select, "parsimony").  On usps's
# training split (3-fold -v, -S 1) every size ties -- -k 20 -Q 12 -l 50 1.66 %, -k 16
# -Q 7 -l 30 1.70 % (paired standard error of the difference 0.11) -- while a row costs
# 9.3 and 3.3 µs (on -S 0's folds 1.40 and 1.54 %, SE 0.10: the larger stays); on
# letter's the halved flats lose (2.44 -> 2.90 %, SE 0.11)
FLATS_SMALL_PCA = 30
FLATS_LADDER = 3
# ... for three classes or more: flats / metrics at their defaults, 3-fold CV, letter
# 2.79 / 8.45 %, usps 1.43 / 1.82 %, mnist (16 000 rows) 2.37 / 2.58 %
FLATS_MIN_CLASSES = 3


# The flats' defaults read the dimension the rows span, not their feature count: rows
# spanning fewer dimensions than they have features (constant, repeated or collinear
# features) got flats of their whole span -- every row at distance 0 from every
# class's flats, the labels left to rounding (KQMetricsClassifier() on 3 classes along
# one varying feature of six: 2.5 % training accuracy).  The rank is measured on this
# many evenly spaced rows (no seed: the same rows every time), centred; more features
# than RANK_MAX_FEATURES are not measured (the flats' PCA keeps at most KQ_PCA of them)
RANK_SAMPLE_ROWS = 2000
RANK_SAMPLE_VALUES = 1 << 18      # ... fewer rows where they have many features
RANK_MAX_FEATURES = 4096


def flats_q(dim: int) -> int:
    """The default flat dimension q for flats living in ``dim`` dimensions."""
    return max(1, dim // FLATS_Q_DIVISOR)


def _rank_sample(rows: Rows, cap: int):
    """At most :data:`RANK_SAMPLE_ROWS` evenly spaced rows (about
    :data:`RANK_SAMPLE_VALUES` values, at least ``cap + 1`` rows), dense; None where
    the rank is not measured (no rows, ``cap <= 0``, more than
    :data:`RANK_MAX_FEATURES` features)."""
    n, d = rows.n_rows, rows.n_features
    if cap <= 0 or n == 0 or d > RANK_MAX_FEATURES:
        return None
    m = min(n, RANK_SAMPLE_ROWS, max(cap + 1, RANK_SAMPLE_VALUES // max(1, d)))
    ids = np.unique(np.linspace(0, n - 1, m).round().astype(np.int64))
    return rows.take(ids).to_csr().toarray()


def spanned_dimension(rows: Rows, cap: int) -> int:
    """``min(cap, r)``, ``r`` the numerical rank (NumPy's ``matrix_rank``) of the
    centred rows: the dimension of the affine span they fill, measured on a sample of
    them (:func:`_rank_sample`); ``cap`` itself where it is not measured (0 for no
    rows)."""
    sample = _rank_sample(rows, cap)
    if sample is None:
        return max(0, cap) if rows.n_rows else 0
    sample -= sample.mean(axis=0)
    return min(cap, int(np.linalg.matrix_rank(sample)))


def plane_rank(rows: Rows, cap: int, tol: float) -> int:
    """``min(cap, r)``, ``r`` the singular values of the (uncentred) rows above
    ``tol`` times the largest, on a sample of them (:func:`_rank_sample`; a sample's
    rank is at most the rows'): the anchor planes a basis of these rows can have
    (``AnchorPlanesSVC(n_planes='auto')``; ``tol``: the OCC basis's own test).  0 for
    rows that are all zero; ``cap`` where it is not measured."""
    sample = _rank_sample(rows, cap)
    if sample is None:
        return max(0, cap) if rows.n_rows else 0
    s = np.linalg.svd(sample, compute_uv=False)
    if not s.size or not s[0] > 0:
        return 0
    return min(cap, int(np.count_nonzero(s > tol * s[0])))


def flats_dimension(n_features: int) -> tuple:
    """``(pca, q)`` of the default k q-flats for rows of ``n_features`` features."""
    pca = min(KQ_PCA, n_features)
    return pca, flats_q(pca)


def flats_clusters(n_rows: int, n_classes: int, q: int, halvings: int = 0) -> int:
    """Flats per class: about ``FLATS_ROWS_PER_DIMENSION q`` rows each, 1 to
    ``FLATS_MAX_CLUSTERS``; with ``halvings``, half as many (twice the rows each, half
    the cap) that many times (:func:`flats_ladder`)."""
    per_class = n_rows // max(1, n_classes)
    return max(1, min(FLATS_MAX_CLUSTERS >> halvings,
                      per_class // (FLATS_ROWS_PER_DIMENSION * q << halvings)))


def flats_suit(n_classes: int, dim: int) -> bool:
    """Whether the affine k q-flats apply: three classes or more (on two they were
    poor, magic04 23 %, ijcnn1 13 % 3-fold CV error) in two dimensions or more (in
    one, every flat is the whole line).  ``KQMetricsClassifier(solver='auto')`` and
    the selector's flats candidate."""
    return n_classes >= FLATS_MIN_CLASSES and dim >= 2


def flats_ladder(rows: Rows, n_classes: int, span: int | None = None) -> list:
    """The selector's flats in :data:`FLATS_LADDER` sizes on these rows, one option
    string a step (without ``-S`` / ``-q``; two steps may coincide): step 0 is
    ``KQMetricsClassifier(solver='flats')``'s options (default offset); each step
    after it costs about half the multiply-adds a row of the one before -- first the
    PCA to :data:`FLATS_SMALL_PCA` dimensions (q a quarter of it: ~3/5 of the work),
    then half the flats a class (:func:`flats_clusters` ``halvings``); where the PCA
    is that small already, each step halves the flats.  ``span``: the rows'
    :func:`spanned_dimension` up to the default PCA's, when the caller has it (it is
    measured once for every step)."""
    pca0, _ = flats_dimension(rows.n_features)
    if span is None:
        span = spanned_dimension(rows, pca0)
    out = []
    for step in range(FLATS_LADDER):
        pca, halvings = pca0, step
        if step and FLATS_SMALL_PCA < pca0:
            pca, halvings = FLATS_SMALL_PCA, step - 1
        q = flats_q(min(span, pca))
        k = flats_clusters(rows.n_rows, n_classes, q, halvings)
        out.append(f"-s 41 -k {k} -Q {q} -l {pca} -Z 0 -z 0.5 -y 1 -W {FLATS_RESTARTS}")
    return out


def kmeans_schedule(n: int) -> tuple[int, int]:
    """``(kmeans_batch, kmeans_iter)`` of ``LocallyLinearSVC()`` on ``n`` rows:
    ``(0, KMEANS_ITER)`` Lloyd steps, or mini-batch steps from
    :data:`KMEANS_BATCH_MIN_ROWS` rows on."""
    batch = KMEANS_BATCH if n >= KMEANS_BATCH_MIN_ROWS else 0
    return batch, kmeans_steps(batch)


def kmeans_steps(batch: int) -> int:
    """``kmeans_iter='auto'``: Lloyd steps, or mini-batch steps with a ``batch``."""
    return KMEANS_BATCH_STEPS if batch else KMEANS_ITER


def kmeans_options(n: int) -> str:
    """:func:`kmeans_schedule` as ``-I`` / ``-M`` options."""
    batch, steps = kmeans_schedule(n)
    return f"-I {steps} -M {batch}" if batch else f"-I {steps}"


def auto_anchors(n: int, n_classes: int | None) -> int:
    """``n_anchors='auto'``: ``sqrt(n)``, at least 4 per class and 16, at most 200
    (and at most n)."""
    m = max(AUTO_ANCHORS_PER_SQRT_N * math.sqrt(n), AUTO_ANCHORS_PER_CLASS * (n_classes or 0),
            AUTO_ANCHORS_MIN)
    return int(min(n, AUTO_ANCHORS_MAX, round(m)))


def mean_sq_norm(rows: Rows) -> float:
    """Mean squared Euclidean norm of the rows."""
    if rows.n_rows == 0:
        return 0.0
    return float(np.dot(rows.data, rows.data)) / rows.n_rows


def total_variance(rows: Rows) -> float:
    """Sum of the feature variances of the rows (the trace of their covariance)."""
    n = rows.n_rows
    if n == 0:
        return 0.0
    mean = np.bincount(rows.indices, weights=rows.data, minlength=rows.n_features) / n
    return max(float(np.dot(rows.data, rows.data)) / n - float(np.dot(mean, mean)), 0.0)


def median_variance_spread(rows: Rows) -> float:
    """``d`` times the median variance of the features that vary
    (:data:`VARYING_FEATURE`): the summed variance the rows would have if every feature
    had a typical one; 0 when none varies."""
    n, d = rows.n_rows, rows.n_features
    if n == 0 or d == 0:
        return 0.0
    mean = np.bincount(rows.indices, weights=rows.data, minlength=d) / n
    square = np.bincount(rows.indices, weights=rows.data * rows.data, minlength=d) / n
    var = square - mean * mean
    varying = var[var > VARYING_FEATURE * square]
    return float(d * np.median(varying)) if varying.size else 0.0


def scale_C(rows: Rows, bias: float) -> float:
    """``C='scale'``: 100 / (d times the median variance of the varying features +
    bias^2) -- the hinge terms then weigh the same against ``||w||^2`` whatever the
    units of the features, and one wide feature does not set C for all
    (:data:`C_SCALE_BY`)."""
    if C_SCALE_BY == "median_variance":
        spread = median_variance_spread(rows)
    elif C_SCALE_BY == "variance":
        spread = total_variance(rows)
    else:
        spread = mean_sq_norm(rows)
    return C_SCALE_FACTOR / max(spread + bias * bias, 1e-12)


def _dense_sample(rows: Rows, ids, row_map=None) -> np.ndarray:
    sub = rows.take(np.asarray(ids, dtype=np.int64))
    return (sub if row_map is None else row_map(sub)).to_csr().toarray()


def _sample_ids(n, size, rng) -> np.ndarray:
    return np.sort(rng.choice(n, size, replace=False)) if size < n else np.arange(n)


def _sq_dists(A, B):
    """Squared distances between the rows of dense ``A`` and ``B``."""
    d = (np.einsum("ij,ij->i", A, A)[:, None] - 2.0 * (A @ B.T)
         + np.einsum("ij,ij->i", B, B)[None, :])
    return np.maximum(d, 0.0)


def anchor_distance_scale(rows: Rows, n_anchors: int, k: int, seed: int,
                          row_map=None) -> float:
    """Median over a sample of training rows of the mean squared distance to their
    ``k`` nearest anchors, the anchors from a few Lloyd steps of k-means on a
    subsample (the scale of ``beta='scale'``, ``mu='scale'``).  ``row_map``: a map of
    each row on its own (the ``-K`` kernel map), applied to the sampled rows only --
    the same numbers as mapping every row first."""
    n = rows.n_rows
    d = rows.n_features if row_map is None or n == 0 else \
        row_map(rows.take(np.zeros(1, dtype=np.int64))).n_features
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 77])
    budget = max(1000, int(2e7 // max(d, 1)))          # at most ~160 MB dense
    m = min(n_anchors, n)
    fit_ids = _sample_ids(n, min(n, max(10 * m, 2000), budget), rng)
    X = _dense_sample(rows, fit_ids, row_map)
    centres = X[rng.choice(X.shape[0], m, replace=False)].copy()
    for _ in range(5):
        lab = np.argmin(_sq_dists(X, centres), axis=1)
        counts = np.bincount(lab, minlength=m)
        sums = np.zeros_like(centres)
        np.add.at(sums, lab, X)
        full = counts > 0
        centres[full] = sums[full] / counts[full, None]
    probe = X[:min(X.shape[0], 2000)]
    D = _sq_dists(probe, centres)
    kk = max(1, min(k, m))
    near = np.partition(D, kk - 1, axis=1)[:, :kk] if kk < m else D
    scale = float(np.median(near.mean(axis=1)))
    return scale if scale > 0 else 1.0


def scale_beta(rows: Rows, n_anchors: int, k: int, seed: int, row_map=None) -> float:
    """``beta='scale'``: 2 / :func:`anchor_distance_scale`."""
    return BETA_SCALE_FACTOR / anchor_distance_scale(rows, n_anchors, k, seed, row_map)


def newton_suits(rows: Rows, n_anchors: int, intercept: bool) -> bool:
    """``solver='auto'``: whether the primal Newton solver (``-s 2``) should train
    this LL-SVM -- at least :data:`NEWTON_ROWS_PER_WEIGHT` rows per coded weight."""
    weights = n_anchors * (rows.n_features + (1 if intercept else 0))
    return rows.n_rows >= NEWTON_ROWS_PER_WEIGHT * weights


def llsvm_default_options(rows: Rows, n_classes: int, seed: int) -> str:
    """The option string ``LocallyLinearSVC()`` fits on these rows (Gaussian coding,
    k-means anchors, squared hinge by the solver :func:`newton_suits` picks,
    intercept 1), without ``-S`` / ``-q``."""
    m = auto_anchors(rows.n_rows, n_classes)
    k = min(DEFAULT_NEIGHBORS, m)
    beta = scale_beta(rows, m, k, seed)
    s = 2 if newton_suits(rows, m, True) else 1
    return (f"-s {s} -L 2 -A {m} -k {k} -u {float_text(beta)} -a 0 "
            f"{kmeans_options(rows.n_rows)} -c {float_text(scale_C(rows, 1.0))} -B 1")
