"""Anchor points for the local codings (``-a``, ``-A``, ``-I``, ``-M``).

Modes of ``-a``:

0. k-means on all rows, k-means++ seeding;
1. random training samples (no Lloyd steps; Ladicky's re-implementation);
2. k-means per class (the ``-A`` anchors split evenly over the classes);
3. random training samples per class (Ladicky's setting for MNIST and USPS);
4. k-means seeded by random training samples (litekmeans, BudgetedSVM).

k-means runs Lloyd steps (BLAS distance blocks in :mod:`lcoding._kmeans`) until the
squared centre shift is at most ``tol`` times the mean feature variance or after
``max_iter`` steps; with ``batch_size > 0`` it runs ``max_iter`` mini-batch steps
(Sculley 2010) instead.  Every draw comes from the splitmix64/PCG streams derived
from the user seed, so the anchors are reproducible bit for bit.
"""
from __future__ import annotations

import numpy as np

from lcoding.local import _kmeans
from lcoding.core.rows import Rows
from lcoding.core.threads import ThreadTeam, check_stop, run_ranges, split_ranges
from lcoding.local.coding import is_dense, row_slice

ANCHOR_MODES = {0: "k-means", 1: "random samples", 2: "k-means per class",
                3: "random samples per class", 4: "k-means, random-sample seeding"}
KMEANS_TOL = 1e-4


def _generator(state: np.ndarray) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(int(state[0])))


def dense_rows(rows: Rows, row_ids, n_features: int) -> np.ndarray:
    """Rows ``row_ids`` as a dense ``(len, n_features)`` array."""
    sub = rows.take(np.asarray(row_ids, dtype=np.int64))
    out = np.zeros((sub.n_rows, n_features))
    row_of = np.repeat(np.arange(sub.n_rows), np.diff(sub.indptr))
    keep = sub.indices < n_features
    out[row_of[keep], sub.indices[keep]] = sub.data[keep]
    return out


def _mean_variance(rows: Rows, n_features: int, column_sums: np.ndarray) -> float:
    """The features' mean variance ``(sum_ij x_ij^2 / n - ||mean||^2) / d`` over the first
    ``n_features`` columns, from their ``column_sums`` (a Lloyd step's cluster sums
    added up: no pass of its own) and one dot product."""
    n = max(rows.n_rows, 1)
    data = rows.data
    if rows.indices.size and int(rows.indices.max()) >= n_features:  # else no copy
        data = data[rows.indices < n_features]
    if not n_features:
        return 0.0
    mean = column_sums / n
    return max(float(np.dot(data, data)) / n - float(mean @ mean), 0.0) / n_features


def _assign(rows: Rows, centres: np.ndarray, dense: bool, n_threads: int = 1,
            team: ThreadTeam | None = None):
    """Closest centre and its squared distance for every row, and the inertia.

    The rows go to the kernel in chunks whose starts are multiples of its 256-row
    distance block (:func:`lcoding.core.threads.run_ranges`), with a Ctrl-C check
    between them, in ``n_threads`` threads: every row meets the same block, so the
    labels and distances are the same bit for bit for any thread count.  The inertia
    is summed from the distances (in row order), not from the chunks.  ``team``: the
    threads to use (kept for all the steps of one k-means)."""
    labels = np.empty(rows.n_rows, dtype=np.int32)
    mind = np.empty(rows.n_rows)
    c_sq = np.einsum("ij,ij->i", centres, centres)
    centres_t = np.ascontiguousarray(centres.T)

    def work(span):
        a, b = span
        part = row_slice(rows, a, b)
        _kmeans.kmeans_assign(part.data, part.indices, part.indptr, rows.n_features,
                              centres, centres_t, c_sq, labels[a:b], mind[a:b], dense)
    run_ranges(work, rows.n_rows, max(1, int(n_threads)), team)
    return labels, mind, float(mind.sum())


def kmeanspp_seed(rows: Rows, n_clusters: int, n_features: int, rng_state: np.ndarray,
                  team: ThreadTeam | None = None):
    """k-means++ seeds (Arthur & Vassilvitskii 2007): ``(centres, chosen rows)``.

    The first centre is a uniform row, each next one a row drawn with probability
    proportional to its squared distance to the closest centre so far.  The
    distance updates (one pass over the non-zeros per centre) run over row ranges in
    the ``team``'s threads and sum the distances per fixed block of rows; the draw
    walks those block sums in order, then one block's rows
    (:func:`lcoding.local._kmeans.kmeanspp_draw`), so the seeds are the same bit for
    bit for any thread count.  Ctrl-C is checked between centres."""
    n = rows.n_rows
    centres = np.zeros((n_clusters, n_features))
    chosen = np.empty(n_clusters, dtype=np.int32)
    xsq = np.empty(n)
    closest = np.empty(n)
    state = np.array(rng_state, dtype=np.uint64).reshape(1)
    block_sum = np.zeros(-(-n // _kmeans.DRAW_BLOCK))
    X = (rows.data, rows.indices, rows.indptr, n_features)
    spans = split_ranges(n, team.n_threads if team is not None else 1, _kmeans.DRAW_BLOCK)

    def each_range(fn, *args):
        def work(span):
            fn(*X, span[0], span[1], *args)
        if team is None:
            for span in spans:
                work(span)
        else:
            team.map(work, spans)

    each_range(_kmeans.kmeanspp_init, xsq, closest)
    for c in range(n_clusters):
        check_stop()
        pick = int(_kmeans.kmeanspp_draw(closest, block_sum, state, c == 0))
        chosen[c] = pick
        p0, p1 = int(rows.indptr[pick]), int(rows.indptr[pick + 1])
        cols = rows.indices[p0:p1]
        keep = cols < n_features
        centres[c, cols[keep]] = rows.data[p0:p1][keep]
        each_range(_kmeans.kmeanspp_update, centres[c], float(xsq[pick]), xsq, closest,
                   block_sum)
    return centres, chosen


def kmeans(rows: Rows, n_clusters: int, n_features: int, rng_state: np.ndarray, *,
           init: str = "k-means++", max_iter: int = 20, tol: float = KMEANS_TOL,
           batch_size: int = 0, n_threads: int = 1, events=None,
           name: str = "k-means") -> np.ndarray:
    """k-means centres ``(n_clusters, n_features)`` of ``rows``.

    ``init`` is ``"k-means++"`` or ``"random"`` (distinct random rows).  The
    seeding's distance updates and the assignment steps run in ``n_threads``
    threads, started once (the same centres for any count).
    ``events`` (optional callable) gets one line per Lloyd step: its inertia (the
    sum of squared distances to the closest centres) and the centres' squared shift.
    """
    n = rows.n_rows
    if not 1 <= n_clusters <= n:
        raise ValueError(f"k-means: {n_clusters} clusters need between 1 and {n} rows")
    rng = _generator(rng_state)
    seed_rows = rows
    if batch_size > 0:
        # seed from a random subsample, as mini-batch k-means does
        init_size = min(n, max(3 * batch_size, 10 * n_clusters))
        if init_size < n:
            seed_rows = rows.take(np.sort(rng.choice(n, init_size, replace=False)))
    if init not in ("k-means++", "random"):
        raise ValueError(f"unknown k-means initialisation {init!r}")
    # the threads are started once for the seeding and every step
    with ThreadTeam(n_threads) as team:
        if init == "k-means++":
            state = rng.integers(0, 2 ** 63, size=1, dtype=np.int64).astype(np.uint64)
            centres, _ = kmeanspp_seed(seed_rows, n_clusters, n_features, state, team)
        else:
            pick = rng.choice(seed_rows.n_rows, n_clusters, replace=False)
            centres = dense_rows(seed_rows, pick, n_features)
        return _lloyd(rows, centres, n_features, rng, max_iter, tol, batch_size, team,
                      events, name)


def _lloyd(rows: Rows, centres: np.ndarray, n_features: int, rng, max_iter: int,
           tol: float, batch_size: int, team: ThreadTeam, events, name: str) -> np.ndarray:
    """The steps of :func:`kmeans` from seeded ``centres``: Lloyd's, or mini-batch
    steps when ``batch_size > 0``."""
    n, n_clusters = rows.n_rows, centres.shape[0]
    dense = is_dense(rows, n_features)
    if batch_size > 0:
        counts = np.zeros(n_clusters, dtype=np.int64)
        for _ in range(max_iter):
            check_stop()
            batch = rows.take(np.sort(rng.choice(n, min(batch_size, n), replace=False)))
            labels, _, _ = _assign(batch, centres, dense, team=team)
            _kmeans.minibatch_update(batch.data, batch.indices, batch.indptr, labels,
                                     centres, counts)
        return centres

    threshold = None
    sums = np.empty_like(centres)
    counts = np.empty(n_clusters, dtype=np.int64)
    for step in range(max_iter):
        check_stop()
        labels, mind, inertia = _assign(rows, centres, dense, team=team)
        _kmeans.kmeans_sums(rows.data, rows.indices, rows.indptr, labels, sums, counts)
        if threshold is None:
            # the stopping threshold: tol times the data's mean variance
            threshold = tol * _mean_variance(rows, n_features, sums.sum(axis=0))
        new = sums / np.maximum(counts, 1)[:, None]
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            # an empty cluster restarts at the rows farthest from their centres
            far = np.argsort(-mind, kind="stable")[:empty.size]
            new[empty] = dense_rows(rows, far, n_features)
        shift = float(np.sum((new - centres) ** 2))
        centres = new
        if events is not None:
            events(f"{name} iteration {step + 1}: inertia {inertia:.6g}, "
                   f"centre shift {shift:.3g}")
        if shift <= threshold:
            break
    return centres


def _per_class_counts(n_anchors: int, class_sizes: np.ndarray) -> np.ndarray:
    n_classes = class_sizes.size
    counts = np.full(n_classes, n_anchors // n_classes)
    counts[:n_anchors % n_classes] += 1
    return np.minimum(counts, class_sizes)


def learn_anchors(rows: Rows, class_index: np.ndarray | None, n_anchors: int, mode: int,
                  rng_state: np.ndarray, *, max_iter: int = 20, batch_size: int = 0,
                  tol: float = KMEANS_TOL, n_threads: int = 1, events=None) -> np.ndarray:
    """Anchor matrix ``(n_anchors, rows.n_features)`` by mode ``-a`` (module doc).

    Per-class modes need ``class_index`` (class of every row, 0-based).  ``events``:
    see :func:`kmeans` (one line per Lloyd step)."""
    n, d = rows.n_rows, rows.n_features
    if mode not in ANCHOR_MODES:
        raise ValueError(f"-a {mode}: anchor initialisation must be one of {sorted(ANCHOR_MODES)}")
    if n_anchors < 1:
        raise ValueError(f"-A {n_anchors}: the number of anchors must be >= 1")
    if n_anchors > n:
        raise ValueError(f"-A {n_anchors}: more anchors than training rows ({n})")
    rng = _generator(rng_state)
    if mode in (0, 1, 4):
        if mode == 1:
            return dense_rows(rows, np.sort(rng.choice(n, n_anchors, replace=False)), d)
        init = "k-means++" if mode == 0 else "random"
        sub_state = rng.integers(0, 2 ** 63, size=1, dtype=np.int64).astype(np.uint64)
        return kmeans(rows, n_anchors, d, sub_state, init=init, max_iter=max_iter,
                      batch_size=batch_size, tol=tol, n_threads=n_threads, events=events)
    if class_index is None:
        raise ValueError(f"-a {mode}: per-class anchors need class labels")
    n_classes = int(class_index.max()) + 1 if n else 0
    sizes = np.bincount(class_index, minlength=n_classes)
    counts = _per_class_counts(n_anchors, sizes)
    parts = []
    for c in range(n_classes):
        if counts[c] == 0:
            continue
        members = np.flatnonzero(class_index == c)
        if mode == 3:
            parts.append(dense_rows(rows, np.sort(rng.choice(members, counts[c], replace=False)), d))
        else:
            sub_state = rng.integers(0, 2 ** 63, size=1, dtype=np.int64).astype(np.uint64)
            parts.append(kmeans(rows.take(members), int(counts[c]), d, sub_state,
                                max_iter=max_iter, batch_size=batch_size, tol=tol,
                                n_threads=n_threads, events=events,
                                name=f"k-means of class index {c}"))
    return np.ascontiguousarray(np.vstack(parts))
