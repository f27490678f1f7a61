"""Discriminative k q-metrics and supervised k q-flats (Szlam & Sapiro, ICML 2009).

Every class i owns k matrices ``F_ij`` (q x d); a point scores ``||F_ij x||^2`` in
each and is given the class of its largest score (algorithms.md §D.1)::

    predict(x) = argmax_i max_j ||F_ij P(x)||^2

with ``P`` the preprocessing the paper uses: optional PCA to p dimensions (centred,
fitted on the training rows, ``-l p``) and projection onto the unit sphere
(``-Z 1``).  For orthonormal F this is the nearest subspace through the origin.

* ``-s 41`` (supervised k q-flats): per class, the representational k-subspaces
  algorithm (Lloyd alternation of "assign to the subspace with the largest
  projection" and "refit each subspace by the top q right singular vectors of its
  points, uncentred"), seeded by the neighbourhoods of k random class points.
* ``-s 40`` (discriminative k q-metrics): the k q-flats as initialiser, then ``-E``
  stochastic passes of the margin updates of the paper's Sec. 3 (kernel:
  :mod:`lcoding._kq`).  ``-G`` picks the step (printed rule / exact gradient /
  α-weighted, ambiguity D-1), ``-F`` the pass (fully sequential, or footnote 2's
  "semi-stochastic" pass: violators found by one batched BLAS pass, D-2).
* ``-s 41 -y 1``: affine k q-flats (centre + q directions, nearest flat), the
  paper's own definition of the baseline (eq. 1 and 4); scores are minus the
  squared distances (kernel ``_kq.flat_scores``).
* ``-W r``: r independent restarts in one model (the paper's "(m)" rows).  The
  metrics (and the flats through the origin) predict by the restarts' majority
  vote, as the paper does; the affine flats by the restarts' mean class score --
  the mean squared distance to each class's nearest flat (:data:`RESTART_RULES`).

:func:`select_kq_params` is the paper's model selection over (k, q, mu1, mu2)
(``-s 41``: k, q, affine) on the last 20 % of the training data; ``-x 1`` runs it
inside training and then trains on all rows with the best setting.
"""
from __future__ import annotations

import itertools
import math
import time

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from lcoding.methods import _kq
from lcoding.core.rows import Rows
from lcoding.local.coding import KernelMap, kernel_map_of
from lcoding.core.model import Model, ModelFieldError, check_count, check_number
from lcoding.local.model import checked_kernel_map_header
from lcoding.core.options import KQ_SOLVER_TYPES, SolverType, TrainParams
from lcoding.core.messages import Messages, progress_line
from lcoding.core.classes import group_classes
from lcoding.core.params import KQParams
from lcoding.core.threads import (STOP_FLAG, TrainingInterrupted, blas_threads, check_stop,
                                  map_threads)
from lcoding.core.seeds import PURPOSE_KQ_INIT, PURPOSE_KQ_ORDER, PURPOSE_KQ_SCREEN, rng_state

FORMAT_VERSION = "1"
KQ_METRICS = int(SolverType.KQ_METRICS)
KQ_FLATS = int(SolverType.KQ_FLATS)
CODING_NAMES = {KQ_METRICS: "KQ_METRICS", KQ_FLATS: "KQ_FLATS"}

# -G: how the step factors (s1, s2) of F <- F + s (mu - z) F x x^T are formed
UPDATE_PRINTED = 0      # (dt, dt): the rule as printed in the paper (alphas unused)
UPDATE_EXACT = 1        # (4 alpha1 dt, 4 alpha2 dt): dt times the exact gradient 2 g'(z)
UPDATE_ALPHA = 2        # (alpha1 dt, alpha2 dt): algorithms.md D-1
UPDATE_NAMES = {UPDATE_PRINTED: "printed", UPDATE_EXACT: "exact", UPDATE_ALPHA: "alpha"}
# -F: which rows a pass visits and with which norms
PASS_STOCHASTIC = 0     # every row, all norms recomputed per row (the paper's loop)
PASS_SEMI_CURRENT = 1   # pass-start violators only, norms recomputed per row
PASS_SEMI_STALE = 2     # pass-start violators, assignment and violated metrics from the start
PASS_NAMES = {PASS_STOCHASTIC: "stochastic", PASS_SEMI_CURRENT: "semi-current",
              PASS_SEMI_STALE: "semi-stale"}

LLOYD_STEPS = 10        # k-subspaces alternations (D-3: at most 10, stop when stable)
# k q-flats (-s 41) training: at most 2 Lloyd steps after the k-means++-style seeds
# (the first assigns the rows by the seeding's distances).  3-fold CV of
# KQMetricsClassifier()'s options on the training splits, three seeds x 3 folds, mean
# error % at 1 / 2 / 3 steps: letter 2.62 / 2.57 / 2.56, usps 1.49 / 1.50 / 1.49,
# mnist (20 000 rows) 2.00 / 2.03 / 2.04 (the spread over the nine fits: 0.2-0.3);
# earlier, 3 against 10 steps: letter 2.63 / 2.62, usps 1.56 / 1.56, mnist 2.09 /
# 2.10.  2 steps: no step further changes the CV error by more than its noise, and
# the third took 18 % of letter's fit.  The seeds already place the flats; the
# restarts gain far more (letter's vote, 1 -> 5 restarts: 4.1 -> 2.6 %).
FLATS_LLOYD_STEPS = 2
# How a model of several restarts (-W) combines them (the model file's ``restart_rule``;
# a file without one votes, as every model did before).  "vote": the majority vote of
# the restarts' predictions, ties broken by the mean class score (the paper's rule).
# "mean": the mean class score alone -- for the affine flats, the squared distance to
# the class's nearest flat averaged over the restarts.  3-fold CV of
# KQMetricsClassifier()'s options on the training splits (two seeds x 3 folds), mean
# error %, vote / mean, with 3 and 5 restarts: letter 2.96 / 2.75 and 2.69 / 2.54,
# usps 1.80 / 1.68 and 1.68 / 1.65, mnist (20 000 rows) 2.16 / 2.04 and 2.02 / 1.92:
# the mean is ahead on all three sets at every count from 3 restarts on (a vote
# discards by how much a restart prefers its class).  Affine flats train with "mean";
# the metrics keep the paper's vote.
RESTART_RULES = ("vote", "mean")


def _checked_restart_rule(rule: str) -> str:
    """``rule`` when it is one of :data:`RESTART_RULES`, else the error a model file
    reports at its ``restart_rule`` line."""
    if rule not in RESTART_RULES:
        raise ModelFieldError("restart_rule", f"restart_rule must be one of "
                                              f"{', '.join(RESTART_RULES)}, got {rule!r}")
    return rule
SMALL_EIGH = 64         # eigenproblems up to this dimension: full, stacked (top_eigenvectors_stack)
TRANSFORM_VALUES = 1 << 22   # dense values per preprocessing block (32 MB)
GRAM_WORK = 1 << 24          # multiply-adds per block of the PCA's sparse gram (~0.06 s: scipy takes ~3.5 ns each)
DENSE_GRAM_RATIO = 100       # the PCA's gram by dense blocks when n d^2 <= this times sum nnz_i^2
# more input features than this (and at most a quarter of them kept): the PCA runs
# Lanczos on the covariance operator instead of the dense d x d eigendecomposition
DENSE_PCA_MAX_FEATURES = 2048

def _rng(seed, *purpose) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(int(rng_state(seed, *purpose)[0])))


# ------------------------------------------------------------------ preprocessing
class KQPreprocess:
    """Optional additive kernel map (``-K``, e.g. Hellinger ``sign(x) sqrt|x|``), then
    PCA (centred, ``components`` rows are the principal directions), then the
    optional projection onto the unit sphere, then an optional constant coordinate
    ``offset`` = b appended to every row (``-z``; 0: none) and, with the sphere, the
    row scaled back to norm 1: ``(x / ||x||, b) / sqrt(1 + b^2)``.  Rows of zero norm
    stay zero (before the constant coordinate).

    With the constant coordinate a metric ``||F (x, b)||^2 = ||A x + b a||^2`` is a
    quadratic around a centre, not only through the origin (the paper's footnote 1:
    a q-dimensional affine set lies in a (q + 1)-dimensional subspace)."""

    def __init__(self, nr_feature: int, mean=None, components=None, sphere: bool = True,
                 offset: float = 0.0, kernel_map: KernelMap | None = None):
        self.nr_feature = int(nr_feature)
        self.kernel_map = kernel_map
        # features after the kernel map: what the PCA sees
        self.in_dim = self.nr_feature if kernel_map is None else \
            kernel_map.output_features(self.nr_feature)
        self.sphere = bool(sphere)
        self.offset = float(offset)
        if not (math.isfinite(self.offset) and self.offset >= 0):
            raise ValueError(f"the constant coordinate must be finite and >= 0, got {offset}")
        if (mean is None) != (components is None):
            raise ValueError("PCA needs both the mean and the components")
        if components is not None:
            components = np.ascontiguousarray(components, dtype=np.float64)
            mean = np.ascontiguousarray(mean, dtype=np.float64).reshape(-1)
            if components.ndim != 2 or components.shape[1] != self.in_dim:
                raise ValueError(f"pca_components has shape {components.shape}, expected "
                                 f"(p, {self.in_dim})")
            if mean.shape[0] != self.in_dim:
                raise ValueError(f"pca_mean has {mean.shape[0]} values, expected {self.in_dim}")
        self.mean = mean
        self.components = components
        self._by_feature = None     # _components_by_feature's copy

    _by_feature = None              # (a preprocessing pickled before it existed)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_by_feature"] = None         # rebuilt on first use, not shipped
        return state

    @property
    def pca_dim(self) -> int:
        return 0 if self.components is None else self.components.shape[0]

    @property
    def out_dim(self) -> int:
        return (self.pca_dim or self.in_dim) + (1 if self.offset else 0)

    @classmethod
    def fit(cls, rows: Rows, pca_dim: int, sphere: bool, offset: float = 0.0,
            kernel_map: KernelMap | None = None) -> "KQPreprocess":
        nr_feature = rows.n_features
        if pca_dim == 0:
            return cls(nr_feature, sphere=sphere, offset=offset, kernel_map=kernel_map)
        if kernel_map is not None:
            rows = kernel_map(rows)
        in_dim = rows.n_features
        X = rows.to_csr()
        n = X.shape[0]
        mean = np.asarray(X.mean(axis=0)).reshape(-1)
        if in_dim > DENSE_PCA_MAX_FEATURES and pca_dim <= in_dim // 4:
            comps = top_covariance_eigenvectors(X, mean, pca_dim)
        else:
            gram = dense_gram(X) if gram_by_dense_blocks(X) else sparse_gram(X)
            cov = gram / n - np.outer(mean, mean)
            comps = top_eigenvectors(cov, pca_dim)
        return cls(nr_feature, mean, _fix_signs(comps), sphere, offset, kernel_map)

    def transform(self, rows: Rows) -> np.ndarray:
        """Dense (n, out_dim) rows the metrics see.

        Row blocks, with a stop check between them: a whole-set densification of
        MNIST (376 MB) took 2 s on a loaded machine, which Ctrl-C waited for.  Every
        step is row by row, so the blocks do not change a value."""
        rows = rows.truncated(self.nr_feature)
        if self.kernel_map is not None:
            rows = self.kernel_map(rows)
        indptr = np.ascontiguousarray(rows.indptr, dtype=np.int64)
        indices = np.ascontiguousarray(rows.indices, dtype=np.int32)
        data = np.ascontiguousarray(rows.data, dtype=np.float64)
        if indices.size and int(indices.max()) >= self.in_dim:  # the kernel reads B's rows
            raise ValueError(f"rows have feature index {int(indices.max()) + 1}, the "
                             f"preprocessing {self.in_dim} features")
        n = rows.n_rows
        out = np.empty((n, self.out_dim))
        step = max(256, TRANSFORM_VALUES // max(1, self.in_dim))
        for a in range(0, n, step):
            check_stop()
            self._transform_block(indptr, indices, data, a, min(a + step, n), out[a:a + step])
        return out

    def _components_by_feature(self) -> np.ndarray:
        """(in_dim, pca_dim) the principal directions feature by feature, for
        :func:`lcoding.methods._kq.csr_times_dense`.  Built on first use."""
        if self._by_feature is None:
            self._by_feature = np.ascontiguousarray(self.components.T)
        return self._by_feature

    def _transform_block(self, indptr, indices, data, a: int, b: int,
                         block: np.ndarray) -> None:
        """Rows a .. b - 1 into ``block`` (b - a, out_dim), in place."""
        width = self.pca_dim or self.in_dim
        out = block[:, :width]
        if self.components is None:
            start, stop = indptr[a], indptr[b]
            out[:] = sp.csr_matrix((data[start:stop], indices[start:stop],
                                    indptr[a:b + 1] - start),
                                   shape=(b - a, self.in_dim)).toarray()
        else:
            # the rows' products with the directions in scipy's csr_matvecs order
            # (the same bits as X @ components.T), with AVX2 2.5 -> 1.0 us a usps row,
            # straight into the output rows
            _kq.csr_times_dense(indptr, indices, data, a, b, self._components_by_feature(),
                                out)
            out -= self.components @ self.mean
        if self.sphere:
            norms = np.sqrt(np.einsum("ij,ij->i", out, out))
            np.divide(out, norms[:, None], out=out, where=norms[:, None] > 0)
        if self.offset:
            block[:, width] = self.offset
            if self.sphere:     # (x / ||x||, b) / sqrt(1 + b^2): back onto the sphere
                block /= np.sqrt(np.einsum("ij,ij->i", block, block))[:, None]


def gram_by_dense_blocks(X: sp.csr_matrix) -> bool:
    """Whether :func:`dense_gram` is the cheaper way to ``X.T @ X``: scipy's sparse
    product costs ``sum_i nnz_i^2`` multiply-adds at ~3 ns each, BLAS on dense blocks
    ``n d^2`` at ~0.02 ns (one thread).  MNIST (19 % non-zero): 4.4 s sparse, 0.7 s
    dense; w8a (4 % of 300 features): 0.03 s sparse, 0.10 s dense.  Decided by the
    data alone, so a model does not depend on the machine."""
    n, d = X.shape
    nnz = np.diff(X.indptr).astype(np.float64)
    return float(n) * d * d <= DENSE_GRAM_RATIO * float(nnz @ nnz)


def dense_gram(X: sp.csr_matrix) -> np.ndarray:
    """Dense ``X.T @ X`` of a CSR matrix, summed over blocks of rows made dense (at
    most :data:`TRANSFORM_VALUES` values each), in row order, with a stop check
    between blocks."""
    n, d = X.shape
    gram = np.zeros((d, d))
    step = max(256, TRANSFORM_VALUES // max(1, d))
    for a in range(0, n, step):
        check_stop()
        block = X[a:a + step].toarray()
        gram += block.T @ block
    return gram


def sparse_gram(X: sp.csr_matrix) -> np.ndarray:
    """Dense ``X.T @ X`` of a CSR matrix, in blocks of output rows with a stop check
    between them (one whole product of MNIST's rows took 5-8 s on a loaded machine,
    which Ctrl-C waited for).

    scipy forms row i of the product from the rows of X holding feature i, in row
    order; a block of output rows takes the same rows of ``X.T`` in the same order,
    so every entry is the one the whole product gives, bit for bit."""
    XT = X.T.tocsr()
    d = XT.shape[0]
    gram = np.empty((d, d))
    # the work of output row i: its nonzeros times the mean nonzeros of a row of X
    work = np.diff(XT.indptr) * max(1.0, X.nnz / max(1, X.shape[0]))
    ends = np.searchsorted(np.cumsum(work), np.arange(1, 1 + int(work.sum() // GRAM_WORK))
                           * GRAM_WORK, side="right")
    start = 0
    for stop in [*np.unique(ends[(ends > 0) & (ends < d)]), d]:
        check_stop()
        gram[start:stop] = (XT[start:stop] @ X).toarray()
        start = stop
    return gram


def top_covariance_eigenvectors(X: sp.csr_matrix, mean: np.ndarray, count: int) -> np.ndarray:
    """(count, d) rows: the top principal directions of the rows of ``X`` (centred by
    ``mean``), largest first, by Lanczos iterations (ARPACK) on the covariance as an
    operator, ``v -> X^T (X v) / n - mean (mean . v)``: two sparse products per step
    instead of the dense d x d Gram and its O(d^3) reduction -- reuters (8315
    features): 0.15 s instead of 42 s, the same 50-dimensional subspace (smallest
    principal-angle cosine 1 - 4e-16).  Fixed start vector, one BLAS thread: the
    same directions on every run; a stop check per product (Ctrl-C)."""
    from scipy.sparse.linalg import LinearOperator, eigsh
    n, d = X.shape
    XT = X.T.tocsr()

    def covariance_times(v):
        check_stop()
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        return (XT @ (X @ v)) / n - mean * float(mean @ v)

    op = LinearOperator((d, d), matvec=covariance_times, dtype=np.float64)
    with blas_threads(1):
        vals, vecs = eigsh(op, k=count, which="LA", v0=np.ones(d), tol=0.0)
    order = np.argsort(-vals, kind="stable")
    return np.ascontiguousarray(vecs[:, order].T)


def _fix_signs(vectors: np.ndarray) -> np.ndarray:
    """Deterministic signs: the largest-magnitude entry of every row is positive
    (rows along the last axis; a stack ``(m, count, d)`` is fixed row by row)."""
    if vectors.size == 0:
        return vectors
    pick = np.argmax(np.abs(vectors), axis=-1)
    signs = np.sign(np.take_along_axis(vectors, pick[..., None], axis=-1))
    signs[signs == 0] = 1.0
    return vectors * signs


# ------------------------------------------------------------------ k-subspaces
def top_subspace(points: np.ndarray, q: int) -> np.ndarray:
    """(q, d) orthonormal rows: the top q right singular vectors of ``points``
    (uncentred; eigenvectors of pointsᵀpoints, padded by its null space when the
    points span fewer than q directions)."""
    return _fix_signs(top_eigenvectors(points.T @ points, q))


def top_eigenvectors(symmetric: np.ndarray, count: int) -> np.ndarray:
    """(count, d) rows: the eigenvectors of the ``count`` largest eigenvalues of a
    symmetric (d, d) matrix, largest first.

    Up to :data:`SMALL_EIGH` dimensions: :func:`top_eigenvectors_stack` (LAPACK's
    full ``syevd``, the same numbers alone or in a stack).  Above it, only the
    ``count`` wanted pairs (``syevr``), on one BLAS thread whatever ``-m`` is: its
    reduction to tridiagonal form makes ~d small threaded BLAS-2 calls, and with two
    BLAS threads on a loaded 2-core machine each call waits for a descheduled partner
    -- one 784 x 784 eigendecomposition took 3.6-7.4 s instead of 0.1 s, and Ctrl-C
    waits for it (the results do not depend on the thread count)."""
    d = symmetric.shape[0]
    if d <= SMALL_EIGH:
        return top_eigenvectors_stack(symmetric[None], count)[0]
    check_stop()        # k-subspaces runs one per cluster: ~k per Lloyd step
    with blas_threads(1):
        vals, vecs = scipy.linalg.eigh(symmetric, subset_by_index=(d - count, d - 1))
    return vecs[:, ::-1].T.copy()


def top_eigenvectors_stack(symmetric: np.ndarray, count: int) -> np.ndarray:
    """(m, count, d): :func:`top_eigenvectors` of each of a stack of m symmetric
    (d, d) matrices, d <= :data:`SMALL_EIGH`, in one LAPACK call per matrix and one
    Python call per stack.  k q-flats on letter (26 classes x 16 flats, 16 features)
    refit 3918 flats a training: one ``scipy.linalg.eigh`` each, with its checks and
    thread-limit switch, was 75 us a flat, 0.3 s of a 0.45 s training.  A 64 x 64
    ``syevd`` runs on one thread in any BLAS; the caller may still hold one limit
    (:func:`blas_threads`) around a whole loop of these calls."""
    if symmetric.shape[-1] > SMALL_EIGH:
        raise ValueError(f"top_eigenvectors_stack: dimension {symmetric.shape[-1]} "
                         f"> {SMALL_EIGH}")
    if symmetric.shape[0] == 0:
        return np.empty((0, count, symmetric.shape[-1]))
    check_stop()
    _, vecs = np.linalg.eigh(symmetric)          # ascending eigenvalues
    top = vecs[:, :, ::-1][:, :, :count]         # (m, d, count), largest first
    return _fix_signs(np.ascontiguousarray(np.swapaxes(top, 1, 2)))


def _cluster_scatters(X: np.ndarray, assign: np.ndarray, k: int, clusters: np.ndarray,
                      centred: bool):
    """For each (non-empty) cluster j of ``clusters`` under ``assign``, in order:
    ``(mean, scatter)``, the mean (zeros when not ``centred``) and the (d, d) scatter
    ``(X_j - c_j)ᵀ(X_j - c_j)`` -- the members in row order, as ``X[assign == j]``
    gives them, found by one sort of the assignment."""
    order = np.argsort(assign, kind="stable")
    ends = np.cumsum(np.bincount(assign, minlength=k))
    zero = np.zeros(X.shape[1])
    for j in clusters:
        members = X[order[(ends[j - 1] if j > 0 else 0):ends[j]]]
        mean = members.mean(axis=0) if centred else zero
        if centred:
            members = members - mean
        yield mean, members.T @ members


def _refit_subspaces(X, assign, k, q, F, centres=None, changed=None) -> None:
    """Refit the q-subspace (``centres`` given: the mean and the top-q principal
    directions around it) of every non-empty cluster in ``changed`` (None: all) in
    place; an empty one keeps its model.  Small dimensions stack the eigenproblems
    (:func:`top_eigenvectors_stack`); larger ones solve them one by one, only the q
    wanted pairs each (a stack of 784 x 784 scatters would not fit)."""
    live = np.flatnonzero(np.bincount(assign, minlength=k))
    if changed is not None:
        live = np.intersect1d(live, changed)
    fits = _cluster_scatters(X, assign, k, live, centres is not None)
    if X.shape[1] > SMALL_EIGH:
        for j, (mean, scatter) in zip(live, fits):
            F[j] = _fix_signs(top_eigenvectors(scatter, q))
            if centres is not None:
                centres[j] = mean
        return
    if live.size:
        means, scatters = zip(*fits)
        F[live] = top_eigenvectors_stack(np.array(scatters), q)
        if centres is not None:
            centres[live] = np.array(means)


def k_subspaces(X: np.ndarray, k: int, q: int, rng: np.random.Generator,
                n_steps: int = LLOYD_STEPS):
    """Representational k-subspaces (k q-flats through the origin) of the rows of X.

    Seeds: k random rows, each replaced by the top-q subspace of its ceil(n/k)
    nearest rows by |cosine| (a subspace contains x and -x).  Then Lloyd steps:
    assign each row to ``argmax_j ||F_j x||^2``, refit each non-empty cluster (an
    empty one keeps its subspace), until the assignment repeats.
    Returns ``(F (k, q, d), assignment (n,))``.
    """
    n, d = X.shape
    if n == 0:
        raise ValueError("k-subspaces needs at least one row")
    seeds = rng.choice(n, size=k, replace=n < k)
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    norms[norms == 0] = 1.0
    cos = np.abs((X @ X[seeds].T) / norms[:, None] / norms[seeds][None, :])
    size = min(n, max(q, -(-n // k)))
    F = np.empty((k, q, d))
    for j in range(k):
        nearest = np.argpartition(-cos[:, j], size - 1)[:size] if size < n else np.arange(n)
        F[j] = top_subspace(X[nearest], q)
    def scores():
        proj = (X @ F.reshape(k * q, d).T).reshape(n, k, q)
        return np.einsum("nkq,nkq->nk", proj, proj)

    def refit(assign, changed):
        _refit_subspaces(X, assign, k, q, F, changed=changed)
    return F, _lloyd(X, n_steps, scores, refit)


def _lloyd(X: np.ndarray, n_steps: int, scores, refit, first=None) -> np.ndarray:
    """Lloyd steps shared by k-subspaces and k-flats: assign every row to the
    cluster of largest ``scores()`` (n, k) (the first step: ``first``, where given),
    refit the non-empty clusters among those whose members changed with
    ``refit(assign, changed)`` (``changed`` None: all; an empty one keeps its model),
    until the assignment repeats (at most ``n_steps``).  Returns the assignment."""
    assign = None
    for step in range(n_steps):
        check_stop()
        new = first if step == 0 and first is not None else np.argmax(scores(), axis=1)
        if assign is None:
            changed = None
        else:
            moved = new != assign
            if not moved.any():
                break
            # only the clusters a row left or joined: the others have the same members
            # in the same order, hence the same model (bit for bit); after the first
            # steps most clusters keep theirs
            changed = np.union1d(new[moved], assign[moved])
        assign = new
        refit(assign, changed)
    return assign


def k_flats(X: np.ndarray, k: int, q: int, rng: np.random.Generator,
            n_steps: int = LLOYD_STEPS, seeding: str = "pp", uniforms=None):
    """Representational k q-flats (affine, the paper's eq. 1) of the rows of X, in
    plain NumPy: the slow reference of the kernel :func:`_kq.k_flats_classes` (which
    :func:`init_flats` runs), and the ``"random"`` seeding.

    A flat is a centre c and q orthonormal rows F; the squared distance of x to it
    is ``||x - c||^2 - ||F (x - c)||^2``.  Seeds: k random rows (``seeding=
    "random"``, the paper's "neighborhoods of random points") or, k-means++ style
    (``"pp"``), with one uniform u_j per seed (``uniforms``, else k drawn from
    ``rng``): row ``floor(u_0 n)`` first, then the row where u_j times the summed
    squared distances to the nearest seed flat so far falls in their running sum;
    each seed is the best-fit flat (mean, top-q principal directions of the centred
    points) of its ``max(q + 1, ceil(n/k))`` nearest rows (Euclidean, the lower row
    first on ties).  Lloyd steps: assign each row to its nearest flat, refit each
    non-empty cluster, until the assignment repeats (at most ``n_steps``).
    Returns ``(F (k, q, d), centres (k, d), assignment (n,))``.
    """
    n, d = X.shape
    if n == 0:
        raise ValueError("k-flats needs at least one row")
    if seeding not in ("random", "pp"):
        raise ValueError(f"seeding must be 'random' or 'pp', got {seeding!r}")
    sq = np.einsum("ij,ij->i", X, X)
    size = min(n, max(q + 1, -(-n // k)))
    F = np.zeros((k, q, d))
    centres = np.zeros((k, d))
    scores = np.empty((n, k))
    nearest = np.zeros(n)                  # squared distance to the nearest seed flat
    first = np.zeros(n, dtype=np.int64)    # ... which one ("pp": the first assignment)
    if seeding == "random":
        seeds = rng.choice(n, size=k, replace=n < k)
    else:
        seeds = None
        u = rng.random(k) if uniforms is None else np.asarray(uniforms, dtype=np.float64)
    for j in range(k):
        if seeds is not None:
            seed = seeds[j]
        else:
            seed = min(int(u[j] * n), n - 1)
            running = np.cumsum(nearest)
            if j and running[-1] > 0 and np.isfinite(running[-1]):
                seed = min(int(np.sum(running <= u[j] * running[-1])), n - 1)
        dist = sq - 2.0 * (X @ X[seed]) + sq[seed]
        members = X[np.argsort(dist, kind="stable")[:size]]
        centres[j] = members.mean(axis=0)
        F[j] = top_subspace(members - centres[j], q)
        if seeds is None:
            one = np.empty((n, 1))
            flat_scores(X, F[j], centres[j:j + 1], q, one)
            dist = np.maximum(-one[:, 0], 0.0)
            closer = dist < nearest if j else np.ones(n, dtype=bool)
            nearest = np.where(closer, dist, nearest)
            first[closer] = j                  # the first seed flat on ties, as argmin

    def all_scores():
        flat_scores(X, F.reshape(k * q, d), centres, q, scores)
        return scores

    def refit(assign, changed):
        _refit_subspaces(X, assign, k, q, F, centres, changed)
    # "pp": the first step assigns each row to its nearest seed flat by the seeding's
    # distances (the kernel does not score the rows against the flats again)
    return F, centres, _lloyd(X, n_steps, all_scores, refit,
                              first=None if seeds is not None else first)


# ------------------------------------------------------------------ the model
def class_lead(S: np.ndarray) -> np.ndarray:
    """(n,) each row's best class score less its second best (two classes or more;
    NaN where a score is)."""
    top2 = np.partition(S, S.shape[1] - 2, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def contractive(bases: np.ndarray, q: int) -> bool:
    """Whether every flat's ``q`` direction rows (``bases`` (M q, d)) shrink:
    ``||F_m v|| <= ||v||``, largest singular value at most 1 (as for the orthonormal
    rows training fits; a model file may hold anything) -- what the single-precision
    bound needs."""
    F = bases.reshape(-1, q, bases.shape[-1])
    top = np.linalg.svd(F, compute_uv=False)[:, 0] if F.size else np.zeros(0)
    return bool(np.all(top <= 1.0 + 1e-12))


class KQScreen:
    """The screen of an affine k q-flats model (-s 41 -y 1): one restart of ``k``
    smaller flats a class (``q`` directions), in the model's own preprocessed
    coordinates, that labels the rows it is sure of and leaves the others to the
    model's restarts -- a prediction cascade (Viola & Jones, CVPR 2001).  Its class
    scores are minus the squared distances to the class's nearest screen flat; a row
    whose best class leads the second by at least ``margin`` takes that class, and
    its decision values are the screen's scores (so the label is still their
    argmax); every other row is the model's as without a screen.

    Why: usps's restarts cost ~240 000 multiply-adds a row after the branch and
    bound (five restarts of 20 flats of 13 products in 51 dimensions); the screen
    (10 flats of 4 directions, 5 products) costs 26 000 and, with the margin its
    folds chose, labels seven rows in eight.  Training ``-s 41 -y 1 -U margin`` fits it (:func:`screen_sizes`,
    after the restarts); the selector chooses the margin on its folds
    (``lcoding.select._screen_margin``: one paired standard error, as its
    parsimony)."""

    def __init__(self, k: int, q: int, bases, centres, margin: float, nr_class: int,
                 dim: int):
        self.k = int(k)
        self.q = int(q)
        if self.k < 1 or self.q < 1:
            raise ValueError(f"screen: k = {self.k}, q = {self.q}; both must be >= 1")
        self.bases = np.ascontiguousarray(bases, dtype=np.float64)
        self.centres = np.ascontiguousarray(centres, dtype=np.float64)
        if self.bases.shape != (nr_class * self.k * self.q, dim):
            raise ValueError(f"screen flats have shape {self.bases.shape}, expected "
                             f"({nr_class * self.k * self.q}, {dim})")
        if self.centres.shape != (nr_class * self.k, dim):
            raise ValueError(f"screen centres have shape {self.centres.shape}, expected "
                             f"({nr_class * self.k}, {dim})")
        if int(nr_class) < 2:
            raise ValueError(f"screen: {nr_class} class; a screen needs two or more")
        self.margin = float(margin)
        if not (math.isfinite(self.margin) and self.margin > 0):
            raise ValueError(f"screen margin {margin!r}: must be finite and > 0")
        self.nr_class = int(nr_class)
        self._packed = None         # the float flats (decide), packed on first use
        self._filled = None         # the double flats' filled rows (scores), likewise

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_packed"] = state["_filled"] = None
        return state

    def scores(self, X: np.ndarray) -> np.ndarray:
        """(n, nr_class) the screen's class scores in double precision."""
        if self._filled is None:
            self._filled = filled_flats(self.bases, self.centres, self.q)
        return class_scores(X, self.bases, self.nr_class, self.k, self.q, self.centres,
                            self._filled)

    def screened(self, S: np.ndarray) -> np.ndarray:
        """Rows whose best class score leads the second by at least ``margin``
        (a NaN score: not screened)."""
        with np.errstate(invalid="ignore"):
            return class_lead(S) >= self.margin

    def decide(self, X: np.ndarray):
        """(screened rows, their class indices) -- :meth:`screened` of the double
        :meth:`scores` and their argmax, reached in single precision where the
        kernel's bound b on every score allows (a margin m in float is within 2 b of
        the double one: screened when m - 2 b >= margin, a lead over 2 b also fixes the
        class; not screened when m + 2 b < margin); the other rows (near the margin,
        out of float's range, NaN) in double."""
        n = X.shape[0]
        if self._packed is None:
            if contractive(self.bases, self.q):
                avx2 = _kq.flats32_avx2()
                M, d = self.centres.shape
                packed = np.empty(_kq.packed_flats_size(M, self.q, d, avx2), dtype=np.float32)
                cmax = _kq.pack_flats_f32(self.bases, self.centres, self.q, avx2, packed)
                self._packed = (packed, cmax, avx2)
            else:
                self._packed = ()
        if not self._packed or self.nr_class < 2:
            S = self.scores(X)
            mask = self.screened(S) if self.nr_class >= 2 else np.zeros(n, dtype=bool)
            return mask, np.argmax(S, axis=1)
        packed, cmax, avx2 = self._packed
        S = np.empty((n, self.nr_class))
        bound = np.empty(n)
        _kq.flat_class_scores_packed(X, packed, self.centres.shape[0], self.q, self.k,
                                     cmax, avx2, S, bound)
        lead = class_lead(S)
        with np.errstate(invalid="ignore"):
            mask = lead - 2.0 * bound >= self.margin
            unsure = ~(mask | (lead + 2.0 * bound < self.margin))
        winners = np.argmax(S, axis=1)
        unsure = np.flatnonzero(unsure)
        if unsure.size:
            exact = self.scores(X[unsure])
            mask[unsure] = self.screened(exact)
            winners[unsure] = np.argmax(exact, axis=1)
        return mask, winners


class KQModel(Model):
    """k q-metrics / k q-flats model: preprocessing and ``metrics`` of shape
    ``(n_restarts, nr_class * k * q, dim)`` (restart r, class i, cluster j, row t at
    ``metrics[r, (i * k + j) * q + t]``).  Affine k q-flats (``-s 41 -y 1``) also
    hold ``centres`` ``(n_restarts, nr_class * k, dim)``; their scores are minus the
    squared distances to the flats.  ``restart_rule`` (:data:`RESTART_RULES`): how
    several restarts combine."""

    # class-level defaults: a model pickled before these attributes existed votes, as
    # it did, and finds out on first use whether its flats are contractive
    restart_rule = "vote"
    _contractive_flats = None
    _metrics_as_flats = None    # _single_flats' for the metrics: scaled rows, zero centres
    _packed = None              # _bound_pack's float slices (code editing metrics in place
                                # resets these)
    screen = None               # a KQScreen (affine flats chosen by the selector), or None
    _filled = None              # class_scores' filled rows of the affine flats, by restart

    def __init__(self, solver_type, nr_class, label, nr_feature, preprocess: KQPreprocess,
                 k: int, q: int, metrics, param=None, centres=None, restart_rule: str = "vote",
                 screen: KQScreen | None = None):
        self._set_header(solver_type, nr_class, label, nr_feature, -1.0)
        if self.solver_type not in KQ_SOLVER_TYPES:
            raise ModelFieldError("solver_type", f"solver_type {self.solver_type} is not a k "
                                                 f"q-metrics solver (40, 41)")
        self.preprocess = preprocess
        self.k = int(k)
        self.q = int(q)
        self.param = param
        metrics = np.ascontiguousarray(metrics, dtype=np.float64)
        expected = (self.nr_class * self.k * self.q, preprocess.out_dim)
        if metrics.ndim != 3 or metrics.shape[1:] != expected or metrics.shape[0] < 1:
            raise ValueError(f"metrics have shape {metrics.shape}, expected (restarts, "
                             f"{expected[0]}, {expected[1]})")
        if preprocess.nr_feature != self.nr_feature:
            raise ValueError(f"preprocessing expects {preprocess.nr_feature} features, the "
                             f"model {self.nr_feature}")
        self.metrics = metrics
        if centres is not None:
            if self.solver_type != KQ_FLATS:
                raise ValueError("only k q-flats (-s 41) models have flat centres")
            centres = np.ascontiguousarray(centres, dtype=np.float64)
            if centres.shape != (metrics.shape[0], self.nr_class * self.k, expected[1]):
                raise ValueError(f"centres have shape {centres.shape}, expected "
                                 f"({metrics.shape[0]}, {self.nr_class * self.k}, {expected[1]})")
        self.centres = centres
        self.restart_rule = _checked_restart_rule(restart_rule)
        if screen is not None:
            if centres is None:
                raise ValueError("only affine k q-flats (-s 41 -y 1) models have a screen")
            if screen.nr_class != self.nr_class or screen.centres.shape[1] != expected[1]:
                raise ValueError(f"the screen has {screen.nr_class} classes in "
                                 f"{screen.centres.shape[1]} dimensions, the model "
                                 f"{self.nr_class} in {expected[1]}")
        self.screen = screen
        self._contractive_flats = None      # computed on first use (_contractive)
        self._metrics_as_flats = None       # ... and _single_flats' for the metrics
        self._packed = None                 # ... and _bound_pack's
        self._filled = None                 # ... and class_scores' (affine flats)

    def __getstate__(self):
        # what prediction derives from the flats is rebuilt on first use, not
        # shipped (to Dask's workers: the packed floats alone are ~2x the metrics')
        state = dict(self.__dict__)
        for key in ("_contractive_flats", "_metrics_as_flats", "_packed", "_filled"):
            state[key] = None
        return state

    @property
    def affine(self) -> bool:
        return self.centres is not None

    @property
    def nr_w(self) -> int:
        return self.nr_class

    @property
    def n_restarts(self) -> int:
        return self.metrics.shape[0]

    @property
    def dim(self) -> int:
        return self.metrics.shape[2]

    def metric(self, i: int, j: int, restart: int = 0) -> np.ndarray:
        """``F_ij`` (q, dim) of restart ``restart``."""
        start = (i * self.k + j) * self.q
        return self.metrics[restart, start:start + self.q]

    def class_scores(self, X: np.ndarray, restart: int = 0) -> np.ndarray:
        """(n, nr_class) ``max_j ||F_ij x||^2`` of preprocessed rows X (affine flats:
        minus the squared distance to the class's nearest flat; their filled rows
        kept, :func:`filled_flats`)."""
        if self.centres is None:
            return class_scores(X, self.metrics[restart], self.nr_class, self.k, self.q)
        if self._filled is None:
            self._filled = [None] * self.n_restarts
        if self._filled[restart] is None:
            self._filled[restart] = filled_flats(self.metrics[restart], self.centres[restart],
                                                 self.q)
        return class_scores(X, self.metrics[restart], self.nr_class, self.k, self.q,
                            self.centres[restart], self._filled[restart])

    def _decision_values(self, rows: Rows, n_threads: int = 1) -> np.ndarray:
        """One restart: the class scores.  Several, ``restart_rule`` "mean": the mean
        class score; "vote": the votes of the restarts plus ``s / (1 + s)`` of the mean
        class score s (in [0, 1), so it only breaks ties; affine flats, whose scores s
        are <= 0: ``exp(s) / 2``).
        ``n_threads`` caps the BLAS threads (see :func:`blas_threads`)."""
        # scores that overflow (+inf and -inf summed: NaN) are caught and named by
        # decision_values, without NumPy's warning on top
        with blas_threads(n_threads), np.errstate(invalid="ignore"):
            X = self.preprocess.transform(rows)
            if self.screen is None:
                return self._values_of(X)
            # the screened rows' values are the screen's scores (their argmax is the
            # label), the others' the restarts'
            values = self.screen.scores(X)
            rest = np.flatnonzero(~self.screen.screened(values))
            if rest.size:
                values[rest] = self._values_of(X[rest])
            return values

    def _values_of(self, X: np.ndarray) -> np.ndarray:
        if self.n_restarts == 1:
            return self.class_scores(X)
        if self.restart_rule == "mean":
            return self._mean_scores(X)
        votes = np.zeros((X.shape[0], self.nr_class))
        mean = np.zeros_like(votes)
        rows_idx = np.arange(X.shape[0])
        for r in range(self.n_restarts):
            scores = self.class_scores(X, r)
            votes[rows_idx, np.argmax(scores, axis=1)] += 1.0
            mean += scores
        mean /= self.n_restarts
        return votes + self._tie_term(mean)

    def _mean_scores(self, X: np.ndarray) -> np.ndarray:
        """(n, nr_class) the restarts' mean class score, summed restart by restart."""
        total = self.class_scores(X, 0)
        for r in range(1, self.n_restarts):
            total += self.class_scores(X, r)
        return total / self.n_restarts

    def _tie_term(self, mean: np.ndarray) -> np.ndarray:
        """The vote's tie-breaker from the restarts' mean class scores, in [0, 1):
        ``s / (1 + s)``, affine flats (scores <= 0) ``exp(s) / 2``."""
        if self.affine:
            return 0.5 * np.exp(np.minimum(mean, 0.0))
        return mean / (1.0 + mean)

    def predict_labels(self, rows: Rows, n_threads: int = 1) -> np.ndarray:
        """The labels of :meth:`labels_from_values` on the decision values, scoring
        fewer restarts (or classes) where a row is already decided
        (:meth:`_vote_labels`, :meth:`_bound_labels`; a screen's rows:
        :meth:`KQScreen.decide`)."""
        bound = self._single_precision_ok()
        if self.n_restarts == 1 and not bound and self.screen is None:
            return super().predict_labels(rows, n_threads=n_threads)
        with blas_threads(n_threads), np.errstate(invalid="ignore"):
            X = self.preprocess.transform(rows)
            if self.screen is None:
                winners = self._winners(X, bound)
            else:
                screened, winners = self.screen.decide(X)
                rest = np.flatnonzero(~screened)
                if rest.size:
                    rest_winners = self._winners(X[rest], bound)
                    if rest_winners is None:
                        winners = None
                    else:
                        winners[rest] = rest_winners
        if winners is None:     # a NaN score: the checked path names the row
            return super().predict_labels(rows, n_threads=n_threads)
        return np.asarray(self.label, dtype=np.float64)[winners]

    def _winners(self, X: np.ndarray, bound: bool):
        """The restarts' class indices of preprocessed rows (None: a NaN score)."""
        if self.restart_rule == "vote" and self.n_restarts > 1:
            return self._vote_labels(X)
        if bound:
            # one restart too (-W 1, the option strings' default), and the metrics of
            # one restart as flats through the origin: its scores in single precision
            # with their bound, the open rows in double (usps -s 41 -y 1 -W 1: 10.2 ->
            # 4.6 us a row, the same labels)
            return self._bound_labels(X)
        return self._mean_labels(X)

    def _contractive(self) -> bool:
        """Whether every flat's directions shrink: ``||F_m v|| <= ||v||`` (largest
        singular value at most 1, as for the orthonormal rows training fits; a model
        file may hold anything).  Then an affine flat's score ``||F_m (x - c_m)||^2 -
        ||x - c_m||^2`` lies in ``[-||x - c_m||^2, 0]``, which :meth:`_bound_labels`
        needs."""
        if self._contractive_flats is None:
            self._contractive_flats = contractive(self.metrics, self.q)
        return self._contractive_flats

    def _single_precision_ok(self) -> bool:
        """Whether the labels may be scored in single precision
        (:func:`lcoding.methods._kq.flat_class_scores_f32`), two classes or more:
        affine flats whose directions do not stretch (its error bound assumes
        ``||F_mt|| <= 1``), and metrics of one restart, as flats through the origin
        (:meth:`_single_flats`)."""
        if self.nr_class < 2:
            return False
        if self.affine:
            return self._contractive()
        return self.n_restarts == 1 and self._single_flats(0) is not None

    def _single_flats(self, restart: int):
        """(rows (C k q, dim), centres (C k, dim)) the single-precision kernel scores
        restart ``restart`` with.  Affine flats: their own.  Metrics (one restart): the
        metric rows divided by ``s``, the power of two at or above their largest
        singular value (exact, and contractive as the kernel's bound needs), with
        centres at 0 -- a flat's score ``||F x||^2 / s^2 - ||x||^2`` ranks the
        classes as the metrics' ``max_j ||F_ij x||^2`` does (the same shift and
        positive factor for every class).  None for metrics whose rows are 0 or not
        finite (the double path)."""
        if self.affine:
            return self.metrics[restart], self.centres[restart]
        if self._metrics_as_flats is None:
            F = self.metrics[0].reshape(-1, self.q, self.dim)
            top = float(np.linalg.svd(F, compute_uv=False)[:, 0].max()) if F.size else 0.0
            if not (np.isfinite(top) and top > 0):
                self._metrics_as_flats = ()
            else:
                scale = 2.0 ** math.ceil(math.log2(top)) if top > 1.0 else 1.0
                self._metrics_as_flats = (
                    np.ascontiguousarray(self.metrics[0] / scale),
                    np.zeros((self.nr_class * self.k, self.dim)))
        return self._metrics_as_flats or None

    def _mean_labels(self, X: np.ndarray):
        """Class indices of the argmax of the restarts' mean class scores
        (:meth:`_mean_scores`, every restart in double precision): the mean rule where
        no bound applies (flats that stretch, one class, subspaces), and the rows
        :meth:`_bound_labels` leaves open.  None when a score is NaN (the checked path
        then names the row)."""
        mean = self._mean_scores(X)
        if np.isnan(mean).any():            # a NaN score, or +inf and -inf summed
            return None
        return np.argmax(mean, axis=1)

    def _bound_labels(self, X: np.ndarray):
        """:meth:`_mean_labels`' classes by branch and bound over classes and restarts,
        in single precision with a bound on every score (affine, contractive flats of
        two classes or more).  A class's score in a restart is at most 0, so a class
        whose sum over the restarts scored so far is below the lead's total over all
        restarts can never win, and its later restarts are not scored.  In chunks of
        rows (at most :data:`BOUND_CHUNK`, and :data:`BOUND_CALL_WORK` multiply-adds
        were every class scored in every restart), one kernel call a chunk
        (:func:`lcoding.methods._kq.bound_labels_packed`, the flats packed once:
        :meth:`_bound_pack`):

        1. restart 0, every class;
        2. each row's leading class there: its scores in every other restart, so its
           total is known (the rows grouped by their lead, the class's flats of those
           restarts side by side);
        3. restart by restart, the other classes still in the running (their sum plus
           its bound at least the lead's total less its bound): their scores in that
           restart (class by class, on the rows where it runs);
        4. a row is decided when no other class is left, or when the best of those
           left after the last restart leads the others by more than their summed
           bounds.

        Every score in single precision is within its row's bound of the exact one
        (:func:`lcoding.methods._kq.flat_class_scores_packed`; the bound also holds the
        double path's rounding), and the sums add those bounds, so a decided row's
        class is the exact mean's argmax, which the double path computes.  Rows left
        open (near-ties within the bounds, magnitudes outside float's range) are
        scored in double precision, every restart (:meth:`_mean_labels`).
        Class-and-restart scores a row against the restart by restart rule it replaced
        (the lead's nearest centres as its bound; letter's test set, 26 classes x 5
        restarts): ~34 of 130 against ~84; usps ~18 of 50 against ~33; letter 13.5 ->
        5.9 us a row."""
        n = X.shape[0]
        winners = np.empty(n, dtype=np.int64)
        work = self.n_restarts * self.nr_class * self.k * (self.q + 1) * (self.dim + 1)
        step = min(BOUND_CHUNK, max(256, BOUND_CALL_WORK // work // 256 * 256))
        for a in range(0, n, step):
            check_stop()
            chunk = self._bound_labels_chunk(X[a:a + step])
            if chunk is None:
                return None
            winners[a:a + step] = chunk
        left = np.flatnonzero(winners < 0)
        if left.size:
            # what single precision left open (a few rows): the full rule
            rest = self._mean_labels(X[left])
            if rest is None:
                return None
            winners[left] = rest
        return winners

    def _bound_labels_chunk(self, X: np.ndarray):
        """:meth:`_bound_labels` on one chunk of rows
        (:func:`lcoding.methods._kq.bound_labels_packed`, one call): class indices, -1
        where a row is left open; None for a NaN score."""
        packed, offsets, cmaxes, avx2 = self._bound_pack()
        winners = np.empty(X.shape[0], dtype=np.int64)
        nan, _ = _kq.bound_labels_packed(X, packed, offsets, cmaxes, self.nr_class, self.k,
                                         self.q, self.n_restarts, avx2, winners)
        return None if nan else winners

    def _class_flats(self, c: int):
        """Class ``c``'s flats in every restart, restart after restart: bases (W k q,
        d) and centres (W k, d), so that restarts r0 .. r1 - 1 are one slice (one
        kernel call scores them as r1 - r0 classes of k flats)."""
        W, C, k, q, d = self.n_restarts, self.nr_class, self.k, self.q, self.dim
        bases = self.metrics.reshape(W, C, k * q, d)
        centres = self.centres.reshape(W, C, k, d)
        return (np.ascontiguousarray(bases[:, c].reshape(W * k * q, d)),
                np.ascontiguousarray(centres[:, c].reshape(W * k, d)))

    def _bound_pack(self):
        """The flats :func:`lcoding.methods._kq.bound_labels_packed` scores, packed
        for the single-precision kernel (:func:`lcoding.methods._kq.pack_flats_f32`)
        into one array: ``(packed, offsets, cmaxes, avx2)``.  Slice 0: restart 0 of
        every class (:meth:`_single_flats`); with W > 1 restarts then each class's
        restarts 1 .. W - 1 side by side (the lead's), then each class's restart r
        alone (a class in the running).  Packed on first use and kept (not pickled):
        the same slices serve every chunk of rows."""
        if self._packed is None:
            W, C, k, q = self.n_restarts, self.nr_class, self.k, self.q
            slices = [self._single_flats(0)]
            if W > 1:
                per_class = [self._class_flats(c) for c in range(C)]
                slices += [(bases[k * q:], centres[k:]) for bases, centres in per_class]
                slices += [(bases[r * k * q:(r + 1) * k * q], centres[r * k:(r + 1) * k])
                           for bases, centres in per_class for r in range(1, W)]
            avx2 = _kq.flats32_avx2()
            sizes = [_kq.packed_flats_size(centres.shape[0], q, self.dim, avx2)
                     for _, centres in slices]
            offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
            packed = np.empty(int(offsets[-1]), dtype=np.float32)
            cmaxes = np.array([_kq.pack_flats_f32(np.ascontiguousarray(bases),
                                                  np.ascontiguousarray(centres), q, avx2,
                                                  packed[offsets[s]:offsets[s + 1]])
                               for s, (bases, centres) in enumerate(slices)])
            self._packed = (packed, offsets, cmaxes, avx2)
        return self._packed

    def _vote_labels(self, X: np.ndarray):
        """Class indices of the argmax of :meth:`_values_of`'s values, restart by
        restart: after restart r of W, a row whose leading class has v1 votes against
        the runner-up's v2 with ``v1 >= v2 + (W - r) + 1`` keeps that class whatever
        the other restarts vote (the tie term of the values is below 1), so the later
        restarts score only the rows still open.  letter's vote of 5: most rows are
        unanimous after 3 restarts.  The open rows' values are summed in restart
        order, as :meth:`_values_of` sums them.  None when a sum is NaN or a score
        +inf."""
        n, n_class, W = X.shape[0], self.nr_class, self.n_restarts
        winners = np.empty(n, dtype=np.int64)
        # the open rows, their votes and score sums, kept compact: one gather a
        # restart, where rows were decided
        open_rows, Xo = np.arange(n), X
        votes, total = np.zeros((n, n_class)), np.zeros((n, n_class))
        for r in range(W):
            scores = self.class_scores(Xo, r)
            total += scores
            # a NaN score, or +inf and -inf summed; or a norm that overflowed to +inf
            # (rows ~1e150 and up): its tie term s / (1 + s) is NaN in the values, so
            # the checked path refuses the row rather than a vote among infinities
            if np.isnan(total).any() or np.isposinf(scores).any():
                return None
            votes[np.arange(open_rows.size), np.argmax(scores, axis=1)] += 1.0
            if r == W - 1 or n_class < 2:
                break
            top2 = np.partition(votes, n_class - 2, axis=1)[:, n_class - 2:]
            decided = top2[:, 1] >= top2[:, 0] + (W - 1 - r) + 1
            if decided.any():
                winners[open_rows[decided]] = np.argmax(votes[decided], axis=1)
                keep = ~decided
                open_rows, Xo, votes, total = (open_rows[keep], Xo[keep], votes[keep],
                                               total[keep])
                if not open_rows.size:
                    return winners
        winners[open_rows] = np.argmax(votes + self._tie_term(total / W), axis=1)
        return winners

    def labels_from_values(self, dec: np.ndarray) -> np.ndarray:
        if self.nr_class == 2:   # two score columns, not LIBLINEAR's single binary value
            label = np.asarray(self.label, dtype=np.float64)
            return label[np.argmax(dec, axis=1)]
        return super().labels_from_values(dec)

    # ---------------------------------------------------------------- model files
    def file_header(self):
        return [
            ("lcoding_format", FORMAT_VERSION),
            ("coding", CODING_NAMES[self.solver_type]),
            ("nr_cluster", str(self.k)),
            ("metric_dim", str(self.q)),
            ("nr_restart", str(self.n_restarts)),
            ("pca_dim", str(self.preprocess.pca_dim)),
            ("unit_sphere", "1" if self.preprocess.sphere else "0"),
            ("nr_dim", str(self.dim)),
        ] + ([("offset_coord", "%.17g" % self.preprocess.offset)] if self.preprocess.offset
             else []) + ([("affine", "1")] if self.affine else []) + (
            # written only where it matters (several restarts) and differs from what a
            # file without it means, so that a vote's files stay as they were
            [("restart_rule", self.restart_rule)]
            if self.restart_rule != "vote" and self.n_restarts > 1 else []) + (
            [] if self.preprocess.kernel_map is None else self.preprocess.kernel_map.file_header()
        ) + ([] if self.screen is None else [
            ("screen_cluster", str(self.screen.k)), ("screen_dim", str(self.screen.q)),
            ("screen_margin", "%.17g" % self.screen.margin)])

    def file_blocks(self):
        blocks = []
        if self.preprocess.pca_dim:
            blocks.append(("pca_mean", self.preprocess.mean.reshape(1, -1)))
            blocks.append(("pca_components", self.preprocess.components))
        blocks.append(("w", self.metrics.reshape(-1, self.dim)))
        if self.affine:
            blocks.append(("centres", self.centres.reshape(-1, self.dim)))
        if self.screen is not None:
            blocks.append(("screen_w", self.screen.bases))
            blocks.append(("screen_centres", self.screen.centres))
        return blocks

    _HEADER_KEYS = frozenset({"lcoding_format", "coding", "nr_cluster", "metric_dim",
                              "nr_restart", "pca_dim", "unit_sphere", "nr_dim", "offset_coord",
                              "affine", "restart_rule", "kernel_map", "kernel_map_order",
                              "kernel_map_period", "screen_cluster", "screen_dim",
                              "screen_margin"})
    _SCREEN_KEYS = ("screen_cluster", "screen_dim", "screen_margin")

    @classmethod
    def block_shapes(cls, header, base):
        """Block shapes of a model file, after the checks training implies (keys, the
        solver type of the coding, counts >= 1, ``pca_dim <= `` the features,
        ``nr_dim >= 1`` consistent with the PCA and the constant coordinate)."""
        unknown = set(header) - cls._HEADER_KEYS
        if unknown:
            key = sorted(unknown)[0]
            raise ModelFieldError(key, f"unknown key(s) {', '.join(sorted(unknown))} for "
                                       f"{header['coding']}")
        solver_type = int(base["solver_type"])
        if CODING_NAMES.get(solver_type) != header["coding"]:
            raise ModelFieldError("solver_type", f"coding {header['coding']} does not match "
                                                 f"solver_type {SolverType(solver_type).name}")
        k = check_count("nr_cluster", header["nr_cluster"], 1)
        q = check_count("metric_dim", header["metric_dim"], 1)
        r = check_count("nr_restart", header["nr_restart"], 1)
        p = check_count("pca_dim", header["pca_dim"], 0)
        dim = check_count("nr_dim", header["nr_dim"], 1)
        nr_feature = int(base["nr_feature"])
        if nr_feature == 0:         # training refuses rows without features
            raise ModelFieldError("nr_feature", "nr_feature 0: k q-metrics need at least one "
                                                "feature")
        width = checked_kernel_map_header(header)
        if width is not None:
            nr_feature *= width                 # what the PCA and metrics see
        if p > nr_feature:
            raise ModelFieldError("pca_dim", f"pca_dim {p}: more PCA dimensions than the "
                                             f"{nr_feature} features")
        if header["unit_sphere"] not in ("0", "1"):
            raise ModelFieldError("unit_sphere", f"unit_sphere must be 0 or 1, got "
                                                 f"{header['unit_sphere']!r}")
        offset = 0.0
        if "offset_coord" in header:
            offset = check_number("offset_coord", header["offset_coord"], lo=0, lo_open=True)
        if dim != (p or nr_feature) + (1 if offset else 0):
            raise ModelFieldError("nr_dim", f"nr_dim {dim} differs from pca_dim/nr_feature "
                                            f"{p or nr_feature}"
                                            + (" + 1 (offset_coord)" if offset else ""))
        shapes = []
        if p:
            shapes += [("pca_mean", (1, nr_feature)), ("pca_components", (p, nr_feature))]
        shapes.append(("w", (r * int(base["nr_class"]) * k * q, dim)))
        affine = header.get("affine", "0")
        if affine not in ("0", "1"):
            raise ModelFieldError("affine", f"affine must be 0 or 1, got {affine!r}")
        if affine == "1":
            if solver_type != KQ_FLATS:
                raise ModelFieldError("affine", "only k q-flats (-s 41) models have flat centres")
            shapes.append(("centres", (r * int(base["nr_class"]) * k, dim)))
        _checked_restart_rule(header.get("restart_rule", "vote"))
        given = [key for key in cls._SCREEN_KEYS if key in header]
        if given:
            missing = [key for key in cls._SCREEN_KEYS if key not in header]
            if missing:
                raise ModelFieldError(missing[0], f"{given[0]} without {missing[0]}: a "
                                                  f"screen needs all of "
                                                  f"{', '.join(cls._SCREEN_KEYS)}")
            if affine != "1":
                raise ModelFieldError(given[0], "only affine k q-flats (affine 1) have a "
                                                "screen")
            if int(base["nr_class"]) < 2:
                raise ModelFieldError(given[0], f"nr_class {base['nr_class']}: a screen "
                                                f"needs two classes or more")
            ks = check_count("screen_cluster", header["screen_cluster"], 1)
            qs = check_count("screen_dim", header["screen_dim"], 1)
            check_number("screen_margin", header["screen_margin"], lo=0, lo_open=True)
            shapes += [("screen_w", (int(base["nr_class"]) * ks * qs, dim)),
                       ("screen_centres", (int(base["nr_class"]) * ks, dim))]
        return shapes

    @classmethod
    def from_file(cls, header, base, blocks):
        solver_type = base["solver_type"]
        p = int(header["pca_dim"])
        pre = KQPreprocess(base["nr_feature"],
                           blocks["pca_mean"] if p else None,
                           blocks["pca_components"] if p else None,
                           header["unit_sphere"] == "1",
                           float(header.get("offset_coord", "0")),
                           KernelMap.from_header(header))
        k, q, r = int(header["nr_cluster"]), int(header["metric_dim"]), int(header["nr_restart"])
        metrics = blocks["w"].reshape(r, -1, int(header["nr_dim"]))
        centres = blocks["centres"].reshape(r, -1, int(header["nr_dim"])) \
            if "centres" in blocks else None
        screen = None
        if "screen_margin" in header:
            screen = KQScreen(int(header["screen_cluster"]), int(header["screen_dim"]),
                              blocks["screen_w"], blocks["screen_centres"],
                              float(header["screen_margin"]), int(base["nr_class"]),
                              int(header["nr_dim"]))
        return cls(solver_type, base["nr_class"], base.get("label"), base["nr_feature"], pre,
                   k, q, metrics, centres=centres,
                   restart_rule=header.get("restart_rule", "vote"), screen=screen)

    def __repr__(self):
        return (f"KQModel({SolverType(self.solver_type).name}, nr_class={self.nr_class}, "
                f"k={self.k}, q={self.q}, restarts={self.n_restarts}, affine={int(self.affine)}, "
                f"pca={self.preprocess.pca_dim}, offset={self.preprocess.offset:g}, "
                f"sphere={int(self.preprocess.sphere)}"
                + (f", restart_rule={self.restart_rule!r}" if self.n_restarts > 1 else "")
                + ("" if self.screen is None else
                   f", screen=(k={self.screen.k}, q={self.screen.q}, "
                   f"margin={self.screen.margin:.6g})") + ")")


def class_scores(X: np.ndarray, W: np.ndarray, nr_class: int, k: int, q: int,
                 centres: np.ndarray | None = None, filled: np.ndarray | None = None
                 ) -> np.ndarray:
    """(n, nr_class) ``max_j ||F_ij x||^2`` for metric rows W (C*k*q, d); with flat
    ``centres`` (C*k, d): ``max_j -dist(x, flat_ij)^2`` (W orthonormal per flat) --
    against ``filled`` (:func:`filled_flats`) when given, the same numbers."""
    if centres is not None:
        out = np.empty((X.shape[0], nr_class))
        step = _row_chunk(W.shape[0] + centres.shape[0], X.shape[1])
        for a in range(0, X.shape[0], step):
            check_stop()
            if filled is None:
                _kq.flat_class_scores(X[a:a + step], W, centres, q, k, out[a:a + step])
            else:
                _kq.flat_class_scores_filled(X[a:a + step], filled, centres.shape[0], q, k,
                                             out[a:a + step])
        return out
    Z = np.empty((X.shape[0], nr_class * k))
    metric_norms(X, W, q, Z)
    return Z.reshape(X.shape[0], nr_class, k).max(axis=2)


def filled_flats(W: np.ndarray, centres: np.ndarray, q: int) -> np.ndarray:
    """The double rows the flats' class scores multiply the rows by
    (:func:`lcoding.methods._kq.fill_flats_f64`), for a model to keep: a call on a few
    rows (the branch and bound's open rows, a screen's near-margin rows) then costs
    the rows' products, not the flats' (usps, 5 rows: 190 -> ~10 us a restart)."""
    M, d = centres.shape
    A = np.empty(M * (q + 1) * (d + 1))
    _kq.fill_flats_f64(np.ascontiguousarray(W), np.ascontiguousarray(centres), q, A)
    return A


# multiply-adds per kernel call of the norms, scores and passes below: the rows are
# handed over in chunks of about this much work (a small fraction of a second on
# MNIST-size data, whatever C k q), with a Ctrl-C check between chunks
CALL_WORK = 1 << 27
# rows per chunk of KQModel._bound_labels, at most (one kernel call a chunk: its work
# arrays stay small, 8192 x 26 doubles 1.7 MB each) ...
BOUND_CHUNK = 8192
# ... and at most this many multiply-adds for every class in every restart of a chunk
# (~0.1 s at the fused pass's rate): a Ctrl-C waits for the call to end
BOUND_CALL_WORK = 1 << 32


def _row_chunk(width: int, d: int) -> int:
    """Rows per kernel call for ``width`` metric rows of ``d`` columns: a multiple of
    the kernels' 256-row block, so the blocks (and their rounding) do not change."""
    return max(256, CALL_WORK // max(1, width * d) // 256 * 256)


def metric_norms(X: np.ndarray, W: np.ndarray, q: int, out: np.ndarray) -> None:
    """:func:`lcoding.methods._kq.metric_norms` in chunks of rows (same numbers)."""
    step = _row_chunk(W.shape[0], X.shape[1])
    for a in range(0, X.shape[0], step):
        check_stop()
        _kq.metric_norms(X[a:a + step], W, q, out[a:a + step])


def flat_scores(X: np.ndarray, W: np.ndarray, centres: np.ndarray, q: int,
                out: np.ndarray) -> None:
    """:func:`lcoding.methods._kq.flat_scores` in chunks of rows (same numbers)."""
    step = _row_chunk(W.shape[0] + centres.shape[0], X.shape[1])
    for a in range(0, X.shape[0], step):
        check_stop()
        _kq.flat_scores(X[a:a + step], W, centres, q, out[a:a + step])


def kq_pass(X, class_index, order, W, k, q, mu1, mu2, s1, s2, Z, stale):
    """:func:`lcoding.methods._kq.kq_pass` over ``order`` in chunks (the pass visits the
    rows one by one, so the chunks give the same metrics and counts)."""
    # the pass visits one row at a time (no blocks to keep aligned): small chunks
    step = max(16, CALL_WORK // max(1, W.shape[0] * X.shape[1]))
    own = other = 0
    for a in range(0, order.shape[0], step):
        check_stop()
        o, t = _kq.kq_pass(X, class_index, order[a:a + step], W, k, q, mu1, mu2, s1, s2,
                           Z, stale)
        own += o
        other += t
    return own, other


# the coding names of k q-metrics / k q-flats model files
FILE_TAGS = tuple(CODING_NAMES.values())


# ------------------------------------------------------------------ training
def check_kq_params(params: TrainParams, n_features: int | None) -> None:
    """Consistency of the -s 40, 41 options beyond their domains, for rows of
    ``n_features`` features (before ``-K``; None: the checks that need no data)."""
    kp = KQParams.from_train_params(params)
    km = kernel_map_of(params)
    if km is not None and n_features is not None:
        n_features = km.output_features(n_features)
    if n_features is not None and kp.pca_dim > n_features:
        raise ValueError(f"-l {kp.pca_dim}: more PCA dimensions than the {n_features} features")
    dim = (kp.pca_dim or n_features or 0) + (1 if kp.offset else 0)
    # -x 1 skips such q itself
    if (kp.pca_dim or n_features) and kp.q > dim and not kp.select:
        raise ValueError(f"-Q {kp.q}: q exceeds the input dimension {dim}")
    if params.bias >= 0:
        raise ValueError(f"-B {params.bias:g}: k q-metrics (-s 40, 41) take no bias term")
    if params.weight_label:
        raise ValueError("-wi: class weights are not supported by -s 40, 41")
    if kp.affine and int(params.solver_type) != KQ_FLATS:
        raise ValueError("-y 1: affine flats are the -s 41 baseline; the metrics of -s 40 "
                         "pass through the origin")
    if kp.screen_margin is not None:
        if not kp.affine:
            raise ValueError(f"-U {kp.screen_margin:g}: with -s 41 the screen's margin; the "
                             f"screen is for affine flats (-y 1)")
        if not kp.screen_margin > 0:
            raise ValueError(f"-U {kp.screen_margin:g}: the screen's margin must be > 0")
        if screen_sizes(kp.clusters_per_class, kp.q)[1] > dim and (kp.pca_dim or n_features):
            raise ValueError(f"-U {kp.screen_margin:g}: the screen's q exceeds the input "
                             f"dimension {dim}")
    if int(params.solver_type) == KQ_METRICS and not kp.mu1 > kp.mu2:
        raise ValueError(f"-U {kp.mu1:g} / -V {kp.mu2:g}: the margins must have mu1 > mu2")


def prediction_work(params: TrainParams, n_features: int, nnz_per_row: float,
                    n_classes: int) -> float | None:
    """Multiply-adds a row to score every class of the -s 40 / 41 model these options
    train on rows of ``n_features`` features (``nnz_per_row`` stored values a row):
    the PCA's ``nnz_per_row x l``, then per class, restart and cluster ``q`` products
    of length ``l`` (the metric ``F x``; a flat's projection ``V^T x``) and, for an
    affine flat, its centre's -- before the branch and bound prunes any (it prunes
    about alike across sizes).  None for other solvers and for a kernel map's
    options (their cost is the map's).  The selector's parsimony compares it."""
    if int(params.solver_type) not in (KQ_METRICS, KQ_FLATS) or \
            kernel_map_of(params) is not None:
        return None
    kp = KQParams.from_train_params(params)
    dim = kp.pca_dim or n_features
    per_cluster = (kp.q + (1 if kp.affine else 0)) * dim
    pca = nnz_per_row * kp.pca_dim if kp.pca_dim else 0.0
    return float(pca + n_classes * max(1, kp.restarts) * kp.clusters_per_class * per_cluster)


def step_factors(params: TrainParams):
    """(s1, s2) of the update ``F += s (mu - z) F x xᵀ`` for ``-G``."""
    kp = KQParams.from_train_params(params)
    dt = float(kp.dt)
    if kp.update_rule == UPDATE_PRINTED:
        return dt, dt
    factor = 4.0 if kp.update_rule == UPDATE_EXACT else 1.0
    return factor * kp.alpha1 * dt, factor * kp.alpha2 * dt


def violators(Z: np.ndarray, class_index: np.ndarray, nr_class: int, k: int,
              mu1: float, mu2: float) -> np.ndarray:
    """Rows violating a margin: own-class best score < mu1, or any score of
    another class > mu2 (Z = (n, C*k) norms)."""
    n = Z.shape[0]
    per_class = Z.reshape(n, nr_class, k).max(axis=2)
    own = per_class[np.arange(n), class_index].copy()
    per_class[np.arange(n), class_index] = -np.inf
    return (own < mu1) | (per_class.max(axis=1) > mu2)


def init_metrics(X, class_index, nr_class, k, q, rng) -> np.ndarray:
    """(C*k*q, d) metric rows: the k-subspaces of every class."""
    W = np.empty((nr_class * k * q, X.shape[1]))
    for c in range(nr_class):
        F, _ = k_subspaces(X[class_index == c], k, q, rng)
        W[c * k * q:(c + 1) * k * q] = F.reshape(k * q, -1)
    return W


def init_flats(X, class_index, nr_class, k, q, rng, seeding="pp", n_steps=FLATS_LLOYD_STEPS):
    """((C*k*q, d) flat rows, (C*k, d) centres): the affine k q-flats of every class.

    The ``"pp"`` seeding runs in the kernel :func:`_kq.k_flats_classes` (all classes,
    one call; the class's uniforms are columns of one ``(k, C)`` draw), the
    ``"random"`` one class by class in :func:`k_flats`."""
    d = X.shape[1]
    if seeding == "pp":
        if np.all(class_index[1:] >= class_index[:-1]):      # grouped already
            grouped = np.ascontiguousarray(X, dtype=np.float64)
        else:
            grouped = np.ascontiguousarray(X[np.argsort(class_index, kind="stable")],
                                           dtype=np.float64)
        starts = np.zeros(nr_class + 1, dtype=np.int64)
        starts[1:] = np.cumsum(np.bincount(class_index, minlength=nr_class))
        uniforms = np.ascontiguousarray(rng.random((k, nr_class)).T)
        W = np.empty((nr_class * k * q, d))
        centres = np.empty((nr_class * k, d))
        steps = np.empty(nr_class, dtype=np.int64)
        if _kq.k_flats_classes(grouped, starts, uniforms, q, n_steps, W, centres, steps,
                               stop=STOP_FLAG):
            check_stop()
            raise TrainingInterrupted("k q-flats stopped")
        return W, centres
    W = np.empty((nr_class * k * q, d))
    centres = np.empty((nr_class * k, d))
    for c in range(nr_class):
        F, centres[c * k:(c + 1) * k], _ = k_flats(X[class_index == c], k, q, rng,
                                                    n_steps=n_steps, seeding=seeding)
        W[c * k * q:(c + 1) * k * q] = F.reshape(k * q, -1)
    return W, centres


def discriminative_passes(X, class_index, nr_class, W, params: TrainParams, rng,
                          info=None, on_pass=None, restart=0):
    """``-E`` passes of the margin updates on metric rows W (modified in place).

    ``on_pass(restart, pass_number, W, seconds)`` runs after every pass (the
    benchmark measures test error per pass through it)."""
    kp = KQParams.from_train_params(params)
    k, q = kp.clusters_per_class, kp.q
    mu1, mu2 = float(kp.mu1), float(kp.mu2)
    s1, s2 = step_factors(params)
    n = X.shape[0]
    Z = np.empty((n, nr_class * k))
    no_norms = np.empty((0, nr_class * k))
    for p in range(kp.epochs):
        t = time.perf_counter()
        order = rng.permutation(n).astype(np.int64)
        if kp.pass_type == PASS_STOCHASTIC:
            n_viol = n
            own, other = kq_pass(X, class_index, order, W, k, q, mu1, mu2, s1, s2,
                                 no_norms, False)
        else:
            metric_norms(X, W, q, Z)
            order = order[violators(Z, class_index, nr_class, k, mu1, mu2)[order]]
            n_viol = order.size
            stale = kp.pass_type == PASS_SEMI_STALE
            own, other = kq_pass(X, class_index, order, W, k, q, mu1, mu2, s1, s2,
                                 Z if stale else no_norms, stale)
        seconds = time.perf_counter() - t
        if info is not None:
            line = (f"restart {restart + 1} pass {p + 1}: {n_viol} rows visited, {own} "
                    f"own-cluster and {other} other-class updates ({seconds:.2f} s)")
            progress_line(info, line)
        if not np.isfinite(W).all():
            raise FloatingPointError(
                f"k q-metrics diverged in pass {p + 1} (non-finite metric entries); lower the "
                f"time step -D {kp.dt:g}"
                + ("" if kp.update_rule == 0 else f" or use -G 0 instead of -G {kp.update_rule}"))
        if on_pass is not None:
            on_pass(restart, p + 1, W, seconds)
    return W


def train_kq_model(y: np.ndarray, rows: Rows, params: TrainParams, info: Messages | None = None,
                   seed_path: tuple = (), on_pass=None) -> KQModel:
    """Train ``-s 40`` (discriminative k q-metrics) or ``-s 41`` (supervised k q-flats).

    Restart r (``-W``) draws its k-subspace seeds from the seed path
    ``(-S, 40, *seed_path, r)`` and its pass orders from ``(-S, 41, *seed_path, r)``.
    """
    check_kq_params(params, rows.n_features)
    if rows.n_features == 0:
        raise ValueError(f"-s {int(params.solver_type)}: the training rows have no features "
                         f"(no non-zero value); k q-metrics need at least one")
    if params.n_threads < 1:
        raise ValueError(f"-m {params.n_threads}: the number of threads must be >= 1")
    info = info if info is not None else Messages(params.quiet)
    if params.kq_select:
        params, _ = select_kq_params(y, rows, params.replaced(kq_select=0), grid=None,
                                     info=info)
        info(f"selected -k {params.n_neighbors} -Q {params.kq_dim}"
             + (f" -U {KQParams.from_train_params(params).mu1:g} -V {params.kq_mu2:g}"
                if int(params.solver_type) == KQ_METRICS else f" -y {params.kq_affine}")
             + "; training on all rows\n")
    try:
        with blas_threads(params.n_threads):
            return _train_kq(y, rows, params, info, seed_path, on_pass)
    except MemoryError as err:
        # name the arrays the options size: (C k q) metric rows of the input dimension
        kp = KQParams.from_train_params(params)
        n_class = np.unique(np.trunc(y)).size
        dim = (kp.pca_dim or rows.n_features) + (1 if kp.offset else 0)
        values = n_class * kp.clusters_per_class * kp.q * dim
        raise MemoryError(f"-s {int(params.solver_type)} -k {kp.clusters_per_class} -Q {kp.q}: "
                          f"the metrics of {n_class} classes need {values} values "
                          f"({values * 8 / 2 ** 30:.1f} GiB) per restart ({err})") from None


def _train_kq(y, rows, params, info, seed_path, on_pass) -> KQModel:
    kp = KQParams.from_train_params(params)
    solver_type = int(params.solver_type)
    labels, class_index = group_classes(y)
    nr_class = labels.size
    k, q = kp.clusters_per_class, kp.q
    t = time.perf_counter()
    pre = KQPreprocess.fit(rows, kp.pca_dim, bool(kp.sphere), kp.offset,
                           kernel_map_of(params))
    X = pre.transform(rows)
    info(f"preprocessing: pca {pre.pca_dim}, constant coordinate {pre.offset:g}, "
         f"unit sphere {int(pre.sphere)} "
         f"({time.perf_counter() - t:.2f} s)\n")
    metrics = np.empty((kp.restarts, nr_class * k * q, X.shape[1]))
    affine = bool(kp.affine) and solver_type == KQ_FLATS
    centres = np.empty((kp.restarts, nr_class * k, X.shape[1])) if affine else None
    if affine:
        # the flats' kernel reads each class's rows in one block: group them once
        # here (each class keeps its row order, so the flats are the same), not in
        # every restart (mnist without a PCA: a 376 MB copy each)
        order = np.argsort(class_index, kind="stable")
        X, class_index = X[order], class_index[order]
    # the flats are fitted without the coordinates that are the same on every row
    # (the constant coordinate -z adds, off the unit sphere): they add nothing to any
    # distance to an affine flat, whose centre takes their value and whose directions
    # are 0 there (letter's default: 16 of 17 dimensions, its fit 10 % faster)
    X_flats, varying = _flats_input(X, q) if affine else (X, None)

    def restart(r):
        # restart r draws only from its own streams (path ..., r), so the restarts
        # are the same bit for bit whether they run one after another or side by side
        t = time.perf_counter()
        rng = _rng(params.seed, PURPOSE_KQ_INIT, *seed_path, r)
        if affine:
            W, centres[r] = _affine_flats(X, X_flats, varying, class_index, nr_class, k, q,
                                          rng)
        else:
            W = init_metrics(X, class_index, nr_class, k, q, rng)
        line = (f"restart {r + 1}: k-{'flats' if affine else 'subspaces'} "
                f"({time.perf_counter() - t:.2f} s)")
        progress_line(info, line)
        if solver_type == KQ_METRICS:
            discriminative_passes(X, class_index, nr_class, W, params,
                                  _rng(params.seed, PURPOSE_KQ_ORDER, *seed_path, r), info,
                                  on_pass, r)
        metrics[r] = W

    # -m N with -W r > 1: the restarts run N at a time, BLAS on one thread inside
    # them (each line of progress names its restart); a pass callback (the
    # benchmarks' per-pass evaluation) keeps them in order
    threads = min(int(params.n_threads), kp.restarts) if on_pass is None else 1
    if threads > 1:
        with blas_threads(1):
            map_threads(restart, range(kp.restarts), threads)
    else:
        for r in range(kp.restarts):
            restart(r)
    screen = None
    if kp.screen_margin is not None:
        # -s 41 -y 1 -U t: the screen, from its own stream (the restarts are the same
        # with or without it)
        if nr_class < 2:
            raise ValueError(f"-U {kp.screen_margin:g}: the screen needs two classes or "
                             f"more; the training rows have {nr_class}")
        t = time.perf_counter()
        ks, qs, bases, screen_centres = _screen_flats(X, class_index, nr_class, k, q,
                                                      params.seed, seed_path)
        screen = KQScreen(ks, qs, bases, screen_centres, kp.screen_margin, nr_class,
                          X.shape[1])
        info(f"screen: {ks} flats of {qs} a class, margin {kp.screen_margin:g} "
             f"({time.perf_counter() - t:.2f} s)\n")
    return KQModel(solver_type, nr_class, labels, rows.n_features, pre, k, q, metrics,
                   param=params, centres=centres,
                   restart_rule="mean" if affine else "vote", screen=screen)


def _flats_input(X: np.ndarray, q: int):
    """(the columns of X the affine flats are fitted on, their indices): the ones that
    vary, when at least q do and some do not, else X itself (and all indices)."""
    varying = np.flatnonzero(np.ptp(X, axis=0) > 0)
    if q <= varying.size < X.shape[1]:
        return np.ascontiguousarray(X[:, varying]), varying
    return X, varying


def _affine_flats(X, X_flats, varying, class_index, nr_class, k, q, rng):
    """(bases (C k q, d), centres (C k, d)): :func:`init_flats` on ``X_flats``
    (:func:`_flats_input`), put back into X's columns -- directions 0 and the
    centres' values ``X[0]``'s on the columns that do not vary."""
    if X_flats is X:
        return init_flats(X, class_index, nr_class, k, q, rng)
    W = np.zeros((nr_class * k * q, X.shape[1]))
    centres = np.empty((nr_class * k, X.shape[1]))
    centres[:] = X[0]
    W[:, varying], centres[:, varying] = init_flats(X_flats, class_index, nr_class, k, q, rng)
    return W, centres


# ------------------------------------------------------------------ the screen
# A screen's flats against the model's (screen_sizes): half the flats a class and a
# third of the directions, one restart.  usps's winner (-k 20 -Q 12, 5 restarts):
# 10 flats of 4, 26 000 multiply-adds a row against ~240 000 after the branch and
# bound; the sizes were set for that ratio (a few per cent of the model), before its
# margin was chosen on any fold.
SCREEN_FLATS_DIVISOR = 2
SCREEN_DIM_DIVISOR = 3
# A screen is kept only where its folds say it saves at least this fraction of the
# restarts' work a row (screen_gain): its own work is paid on every row
SCREEN_MIN_GAIN = 0.1


def screen_sizes(k: int, q: int) -> tuple:
    """(flats a class, directions) of the screen of a model of ``k`` flats of ``q``
    directions a class."""
    return max(1, -(-int(k) // SCREEN_FLATS_DIVISOR)), max(1, -(-int(q) // SCREEN_DIM_DIVISOR))


def screenable(params: TrainParams, n_classes: int) -> bool:
    """Whether these options train a model that may take a screen: affine k q-flats
    (-s 41 -y 1) of two classes or more, without one (-U) yet."""
    return (int(params.solver_type) == KQ_FLATS and bool(params.kq_affine)
            and n_classes >= 2 and KQParams.from_train_params(params).screen_margin is None)


def restarts_work(params: TrainParams, n_classes: int, dim: int) -> float:
    """Multiply-adds a row the restarts' branch and bound spends at least
    (:meth:`KQModel._bound_labels`: every class in one restart, the lead in the
    others), without the PCA; ``dim`` the preprocessed dimension."""
    kp = KQParams.from_train_params(params)
    slices = n_classes + max(1, kp.restarts) - 1
    return float(slices * kp.clusters_per_class * (kp.q + 1) * (dim + 1))


def _screen_flats(X, class_index, nr_class, k, q, seed, seed_path):
    """(k', q', bases, centres): the screen of a model of ``k`` flats of ``q``
    directions a class (:func:`screen_sizes`) fitted on its preprocessed rows X, from
    the stream ``(seed, 42, *seed_path)`` -- training's and the selector's folds'."""
    ks, qs = screen_sizes(k, q)
    if qs > X.shape[1]:
        raise ValueError(f"screen: q = {qs} exceeds the input dimension {X.shape[1]}")
    X_flats, varying = _flats_input(X, qs)
    bases, centres = _affine_flats(X, X_flats, varying, class_index, nr_class, ks, qs,
                                   _rng(seed, PURPOSE_KQ_SCREEN, *seed_path))
    return ks, qs, bases, centres


def screen_fold_scores(y_train: np.ndarray, rows_train: Rows, rows_test: Rows,
                       params: TrainParams, seed_path: tuple = ()):
    """One cross-validation fold of a screen: (the classes' labels, the screen's
    class scores of ``rows_test`` (n, C), the screen's work a row, the restarts' --
    :func:`restarts_work`).  The screen of the model ``params`` trains on the fold's
    rows -- the same preprocessing, fitted on the same rows -- with the flats of
    :func:`screen_sizes`, drawn from ``(-S, 42, *seed_path)``."""
    kp = KQParams.from_train_params(params)
    labels, class_index = group_classes(y_train)
    pre = KQPreprocess.fit(rows_train, kp.pca_dim, bool(kp.sphere), kp.offset,
                           kernel_map_of(params))
    X = pre.transform(rows_train)
    ks, qs, bases, centres = _screen_flats(X, class_index, labels.size, kp.clusters_per_class,
                                           kp.q, params.seed, seed_path)
    Xt = pre.transform(rows_test.truncated(rows_train.n_features))
    scores = class_scores(Xt, bases, labels.size, ks, qs, centres)
    screen = labels.size * ks * (qs + 1) * (X.shape[1] + 1)
    return labels, scores, float(screen), restarts_work(params, labels.size, X.shape[1])


# ------------------------------------------------------------------ model selection
PAPER_GRID = {"k": (1, 2, 4, 8, 16), "q": (20, 40, 80, 160),
              "mu": ((1.05, 0.95), (1.1, 0.9), (1.2, 0.8), (1.4, 0.6))}
# -s 41 (no margins): the paper picks k and q by hand; affine and through-origin flats
FLATS_GRID = {"k": (1, 4, 16, 64), "q": (5, 10, 20, 40), "affine": (0, 1)}


def select_kq_params(y: np.ndarray, rows: Rows, params: TrainParams, grid=None,
                     val_fraction: float = 0.2, info: Messages | None = None):
    """The paper's model selection: train on the first ``1 - val_fraction`` of the
    rows, measure error on the last ``val_fraction``, over every combination of the
    ``grid`` values (keys ``"k"``, ``"q"``, ``"mu"`` = (mu1, mu2) pairs, ``"affine"``;
    a missing key keeps the value of ``params``).  Default grid: ``PAPER_GRID`` for
    ``-s 40``, ``FLATS_GRID`` for ``-s 41`` (whose margins are unused).  Settings with
    q larger than the input dimension are skipped; ties go to the earlier setting;
    every candidate is one run (``-W`` applies to the returned parameters).
    ``-x 1`` runs this inside training (then trains on all rows with the best).

    Returns ``(best TrainParams, table)``, the table a list of dicts with keys
    ``k, q, mu1, mu2, affine, error`` (validation error in %).
    """
    flats = int(params.solver_type) == KQ_FLATS
    if grid is None:
        grid = FLATS_GRID if flats else PAPER_GRID
    unknown = set(grid) - {"k", "q", "mu", "affine"}
    if unknown:
        raise ValueError(f"unknown grid keys {sorted(unknown)} (use k, q, mu, affine)")
    if not 0 < val_fraction < 1:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    n = rows.n_rows
    if y.shape[0] != n:
        raise ValueError(f"model selection: {y.shape[0]} labels for {n} rows")
    n_train = int(round((1.0 - val_fraction) * n))
    if not 0 < n_train < n:
        raise ValueError(f"{n} rows cannot be split into training and validation parts")
    train_rows, val_rows = rows.take(np.arange(n_train)), rows.take(np.arange(n_train, n))
    km = kernel_map_of(params)
    n_features = rows.n_features if km is None else km.output_features(rows.n_features)
    dim = (params.kq_pca or n_features) + (1 if params.kq_offset else 0)
    # the flats pass -U (their screen, or its absence) through; the metrics' margins
    mus = ((params.kq_mu1, params.kq_mu2),) if flats else grid.get(
        "mu", ((KQParams.from_train_params(params).mu1, params.kq_mu2),))
    affines = grid.get("affine", (params.kq_affine,)) if flats else (0,)
    table = []
    best = None
    for k, q, (mu1, mu2), affine in itertools.product(
            grid.get("k", (params.n_neighbors,)), grid.get("q", (params.kq_dim,)), mus, affines):
        if q > dim:
            continue
        cand = params.replaced(n_neighbors=int(k), kq_dim=int(q), kq_mu1=float(mu1),
                     kq_mu2=float(mu2), kq_affine=int(affine), kq_select=0, kq_restarts=1)
        model = train_kq_model(y[:n_train], train_rows, cand, Messages(True))
        pred = model.labels_from_values(model.decision_values(val_rows, n_threads=cand.n_threads))
        error = 100.0 * float(np.mean(pred != y[n_train:]))
        table.append(dict(k=int(k), q=int(q), mu1=float(mu1), mu2=float(mu2),
                          affine=int(affine), error=error))
        if info is not None:
            info(f"k={k} q={q} " + (f"affine={affine}" if flats else f"mu=({mu1:g}, {mu2:g})")
                 + f": validation error {error:.2f}%\n")
        if best is None or error < best[1]:
            best = (cand, error)
    if best is None:
        raise ValueError(f"no grid setting has q <= the input dimension {dim} (grid q: "
                         f"{', '.join(str(q) for q in grid.get('q', (params.kq_dim,)))})")
    return best[0].replaced(kq_restarts=params.kq_restarts), table
