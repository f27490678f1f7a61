"""k-means and the other anchor initialisations (lcoding._kmeans, lcoding.anchors)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import splitmix64

from lcoding.local import _kmeans
from lcoding.core.rows import as_rows
from lcoding.core.threads import ThreadTeam
from lcoding.local.anchors import kmeans, kmeanspp_seed, learn_anchors
from lcoding.core.seeds import rng_state


def blobs(rng, n_per=100, centres=None, spread=0.1):
    centres = rng.normal(size=(5, 4)) * 5 if centres is None else centres
    X = np.vstack([c + spread * rng.normal(size=(n_per, centres.shape[1])) for c in centres])
    return X, centres


def inertia(X, C):
    return ((X[:, None] - C[None]) ** 2).sum(-1).min(1).sum()


@pytest.mark.parametrize("dense", [True, False])
def test_assign_and_sums_match_numpy(rng, dense):
    X = sp.random(300, 20, density=0.3, random_state=2, format="csr")
    rows = as_rows(X)
    C = rng.random((7, 20)) * 0.5
    labels = np.empty(300, dtype=np.int32)
    mind = np.empty(300)
    total = _kmeans.kmeans_assign(rows.data, rows.indices, rows.indptr, 20, C,
                                  np.ascontiguousarray(C.T), (C * C).sum(1), labels, mind, dense)
    D = ((X.toarray()[:, None] - C[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(labels, D.argmin(1))
    np.testing.assert_allclose(mind, D.min(1), rtol=1e-10, atol=1e-12)
    assert total == pytest.approx(D.min(1).sum(), rel=1e-10)
    sums = np.empty_like(C)
    counts = np.empty(7, dtype=np.int64)
    _kmeans.kmeans_sums(rows.data, rows.indices, rows.indptr, labels, sums, counts)
    np.testing.assert_array_equal(counts, np.bincount(labels, minlength=7))
    ref = np.vstack([X.toarray()[labels == c].sum(0) for c in range(7)])
    np.testing.assert_allclose(sums, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("init", ["k-means++", "random"])
def test_kmeans_finds_separated_blobs(rng, init):
    X, centres = blobs(rng)
    best = inertia(X, centres)
    C = kmeans(as_rows(X), 5, 4, rng_state(3, 1), init=init, max_iter=50)
    if init == "k-means++":
        # D^2 seeding lands in every blob here; Lloyd then finds the true centres
        assert inertia(X, C) <= 1.01 * best
    else:
        # random seeds may merge two blobs; Lloyd still only lowers the inertia
        seeds = kmeans(as_rows(X), 5, 4, rng_state(3, 1), init=init, max_iter=0)
        assert inertia(X, C) < inertia(X, seeds)
    assert C.shape == (5, 4)


def test_kmeans_is_no_worse_than_sklearn(rng):
    from sklearn.cluster import KMeans
    X = rng.normal(size=(600, 6))
    C = kmeans(as_rows(X), 12, 6, rng_state(1, 1), max_iter=100)
    sk = KMeans(12, n_init=1, random_state=0, max_iter=100).fit(X)
    assert inertia(X, C) <= 1.05 * sk.inertia_


def test_kmeans_reproducible_and_seeded(rng):
    X = rng.normal(size=(300, 5))
    a = kmeans(as_rows(X), 8, 5, rng_state(7, 1))
    b = kmeans(as_rows(X), 8, 5, rng_state(7, 1))
    c = kmeans(as_rows(X), 8, 5, rng_state(8, 1))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_kmeans_iteration_cap_zero_returns_seeds(rng):
    X = rng.normal(size=(100, 3))
    C = kmeans(as_rows(X), 6, 3, rng_state(1, 1), max_iter=0)
    # every seed is a training row
    assert all(np.any(np.all(X == c, axis=1)) for c in C)


def test_kmeanspp_seeds_are_distinct_rows(rng):
    X = rng.normal(size=(50, 3))
    C, chosen = kmeanspp_seed(as_rows(X), 50, 3, rng_state(1, 2))
    assert len(set(chosen.tolist())) == 50      # D^2 never re-picks a chosen row
    np.testing.assert_array_equal(C, X[chosen])


def kmeanspp_reference(X, m, seed):
    """D^2 sampling in NumPy with the kernels' generator; integer data keeps every
    distance and running sum exact, so the draws must agree row for row."""
    state = [int(seed)]
    n = X.shape[0]
    closest = np.full(n, np.inf)
    picks = [splitmix64(state) % n]
    for c in range(m):
        if c > 0:
            total = closest.sum()
            u = (splitmix64(state) >> 11) * (1.0 / 2 ** 53) * total
            pick = int(np.flatnonzero((np.cumsum(closest) > u) & (closest > 0))[0])
            picks.append(pick)
        closest = np.minimum(closest, ((X - X[picks[-1]]) ** 2).sum(1))
    return np.array(picks)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_kmeanspp_matches_a_numpy_reference_for_any_thread_count(n_threads):
    # 1300 rows: the threads' ranges cut inside and between 256-row blocks
    X = np.random.default_rng(4).integers(-3, 4, size=(1300, 5)).astype(float)
    X[::7, 2] = 0.0                 # sparse rows too
    state = rng_state(3, 4)
    with ThreadTeam(n_threads) as team:
        C, chosen = kmeanspp_seed(as_rows(X), 40, 5, state, team)
    np.testing.assert_array_equal(chosen, kmeanspp_reference(X, 40, int(state[0])))
    np.testing.assert_array_equal(C, X[chosen])


def test_empty_clusters_are_restarted():
    # two distinct points, three clusters seeded on duplicates: no centre stays empty
    X = np.array([[0.0, 0.0]] * 5 + [[10.0, 0.0]] * 5 + [[0.0, 7.0]])
    C = kmeans(as_rows(X), 3, 2, rng_state(1, 1), init="random", max_iter=20)
    assert inertia(X, C) == pytest.approx(0.0, abs=1e-12)


def test_minibatch_kmeans(rng):
    X, centres = blobs(rng, n_per=400)
    C = kmeans(as_rows(X), 5, 4, rng_state(2, 1), max_iter=60, batch_size=100)
    assert inertia(X, C) <= 1.5 * inertia(X, centres)


def test_learn_anchors_modes(rng):
    X = rng.normal(size=(200, 3))
    y = np.repeat(np.arange(4), 50)
    rows = as_rows(X)
    for mode in (0, 1, 2, 3, 4):
        A = learn_anchors(rows, y, 10, mode, rng_state(1, 10), max_iter=5)
        assert A.shape == (10, 3)
        assert np.isfinite(A).all()
    # random samples are training rows; per class: 3,3,2,2 of each class
    A = learn_anchors(rows, y, 10, 3, rng_state(1, 10))
    owner = [int(np.flatnonzero(np.all(X == a, axis=1))[0]) // 50 for a in A]
    assert np.bincount(owner).tolist() == [3, 3, 2, 2]
    A1 = learn_anchors(rows, y, 10, 1, rng_state(1, 10))
    assert all(np.any(np.all(X == a, axis=1)) for a in A1)


def test_learn_anchors_errors(rng):
    rows = as_rows(rng.normal(size=(5, 2)))
    with pytest.raises(ValueError, match="-A"):
        learn_anchors(rows, None, 6, 0, rng_state(1, 1))
    with pytest.raises(ValueError, match="-a"):
        learn_anchors(rows, None, 2, 9, rng_state(1, 1))
    with pytest.raises(ValueError, match="class"):
        learn_anchors(rows, None, 2, 2, rng_state(1, 1))


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("mode,batch", [(0, 0), (2, 0), (0, 300)])
def test_anchors_are_the_same_for_any_thread_count(rng, dense, mode, batch):
    """k-means assigns the rows in -m threads; every row meets the same 256-row
    distance block whatever the split, so the anchors are equal bit for bit (5000
    rows: the two threads' ranges split inside a RANGE_CHUNK)."""
    X = rng.standard_normal((5000, 12))
    if not dense:
        X = sp.random(5000, 40, density=0.2, format="csr", random_state=3)
    rows = as_rows(X)
    ci = (np.arange(5000) % 3).astype(np.int64)
    got = [learn_anchors(rows, ci, 30, mode, rng_state(7, 1), batch_size=batch, n_threads=t)
           for t in (1, 2, 3)]
    assert np.array_equal(got[0], got[1]) and np.array_equal(got[0], got[2])


@pytest.mark.parametrize("n_threads", [1, 2])
def test_kmeanspp_seeding_stops_between_centres_on_ctrl_c(monkeypatch, n_threads):
    """Ctrl-C (the stop request) ends the seeding at the next centre, in any thread
    count, with TrainingInterrupted (a KeyboardInterrupt), not after all centres."""
    from lcoding.core import threads
    from lcoding.local import anchors
    real = _kmeans.kmeanspp_update
    calls = []

    def update(*args):
        calls.append(1)
        if len(calls) == 3 * n_threads:
            threads._request_stop()
        return real(*args)

    monkeypatch.setattr(anchors._kmeans, "kmeanspp_update", update)
    X = np.random.default_rng(0).normal(size=(2000, 4))
    try:
        with pytest.raises(threads.TrainingInterrupted):
            kmeans(as_rows(X), 50, 4, rng_state(1, 1), n_threads=n_threads)
    finally:
        threads._clear_stop()
    assert len(calls) <= 4 * n_threads
