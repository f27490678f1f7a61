"""k-nearest-anchor search, the local codings and the kernel maps against NumPy
references (lcoding._knn, lcoding.coding)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from lcoding.local import _knn
from lcoding.core.rows import as_rows
from lcoding.local.coding import KernelMap, LocalCoding

INV, GAUSS, LLC = 1, 2, 6
PATHS = [dict(dense=True), dict(dense=False), dict(early_reject=True)]


def np_sqdist(X, V):
    return ((X[:, None, :] - V[None, :, :]) ** 2).sum(-1)


def brute_knn(X, V, k):
    D = np_sqdist(X, V)
    idx = np.argsort(D, axis=1, kind="stable")[:, :k]
    return idx, np.take_along_axis(D, idx, axis=1)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("k", [1, 5, 30])
def test_knn_indices_equal_bruteforce_dense(rng, path, k):
    X = rng.normal(size=(300, 13))
    V = rng.normal(size=(30, 13))
    coder = LocalCoding(INV, V, k, 1.0)
    idx, wt = coder.code(as_rows(X), **path)
    ref, _ = brute_knn(X, V, k)
    np.testing.assert_array_equal(idx, ref)
    assert idx.dtype == np.int32 and wt.dtype == np.float64 and idx.shape == (300, k)


@pytest.mark.parametrize("path", PATHS)
def test_knn_indices_equal_bruteforce_sparse(rng, path):
    X = sp.random(400, 60, density=0.08, random_state=3, format="csr") * 3
    V = rng.normal(size=(25, 60)) * 0.3
    coder = LocalCoding(INV, V, 6, 1.0)
    idx, _ = coder.code(as_rows(X), **path)
    ref, _ = brute_knn(X.toarray(), V, 6)
    np.testing.assert_array_equal(idx, ref)


@pytest.mark.parametrize("path", PATHS)
def test_ties_go_to_the_smaller_anchor_index(rng, path):
    # integer data and repeated anchors: many exact ties in the distances
    X = rng.integers(-2, 3, size=(200, 4)).astype(float)
    base = rng.integers(-2, 3, size=(6, 4)).astype(float)
    V = np.vstack([base, base, base[::-1]])
    coder = LocalCoding(GAUSS, V, 7, 0.5)
    idx, _ = coder.code(as_rows(X), **path)
    ref, _ = brute_knn(X, V, 7)
    np.testing.assert_array_equal(idx, ref)


def test_threads_give_the_same_coding(rng):
    X = rng.normal(size=(1000, 20))
    coder = LocalCoding(GAUSS, rng.normal(size=(40, 20)), 8, 0.3)
    a = coder.code(as_rows(X), n_threads=1)
    b = coder.code(as_rows(X), n_threads=2)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_sq_distances_match_numpy(rng):
    X = rng.normal(size=(50, 9))
    V = rng.normal(size=(12, 9))
    D = LocalCoding(INV, V, 3, 1.0).sq_distances(as_rows(X))
    np.testing.assert_allclose(D, np_sqdist(X, V), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("p", [1.0, 0.5, 2.0])
def test_inverse_distance_coding_matches_numpy(rng, p):
    X = rng.normal(size=(200, 5))
    V = rng.normal(size=(20, 5))
    idx, wt = LocalCoding(INV, V, 8, p).code(as_rows(X))
    _, d = brute_knn(X, V, 8)
    ref = d ** -p
    ref /= ref.sum(1, keepdims=True)
    np.testing.assert_allclose(wt, ref, rtol=1e-9)
    np.testing.assert_allclose(wt.sum(1), 1.0, rtol=1e-14)


@pytest.mark.parametrize("beta", [0.1, 2.0, 1e6])
def test_gaussian_coding_matches_numpy_and_never_underflows(rng, beta):
    X = rng.normal(size=(200, 5)) * 10
    V = rng.normal(size=(20, 5)) * 10
    idx, wt = LocalCoding(GAUSS, V, 8, beta).code(as_rows(X))
    _, d = brute_knn(X, V, 8)
    # raw exp(-beta d) underflows to 0/0 for large beta; the shifted form does not
    ref = np.exp(-beta * (d - d[:, :1]))
    ref /= ref.sum(1, keepdims=True)
    assert np.isfinite(wt).all()
    np.testing.assert_allclose(wt, ref, rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(wt.sum(1), 1.0, rtol=1e-14)


def llc_reference(x, Vs, ridge):
    Z = Vs - x
    C = Z @ Z.T
    C = C + ridge * np.trace(C) * np.eye(len(Vs))
    w = np.linalg.solve(C, np.ones(len(Vs)))
    return w / w.sum()


@pytest.mark.parametrize("u", [1.0, 100.0])
def test_llc_coding_matches_numpy(rng, u):
    X = rng.normal(size=(100, 6))
    V = rng.normal(size=(15, 6))
    idx, wt = LocalCoding(LLC, V, 5, u).code(as_rows(X))
    for i in range(X.shape[0]):
        ref = llc_reference(X[i], V[idx[i]], 1e-4 * u)
        np.testing.assert_allclose(wt[i], ref, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(wt.sum(1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("path", PATHS)
def test_point_on_an_anchor(rng, path):
    V = rng.normal(size=(10, 4)) * 5
    X = V[[3, 7]].copy()
    for kind, param in [(INV, 1.0), (INV, 0.5), (GAUSS, 1.0), (LLC, 1.0)]:
        idx, wt = LocalCoding(kind, V, 4, param).code(as_rows(X), **path)
        assert np.isfinite(wt).all()
        np.testing.assert_array_equal(idx[:, 0], [3, 7])
        np.testing.assert_allclose(wt.sum(1), 1.0, rtol=1e-12)
        if kind == INV:
            np.testing.assert_array_equal(wt[:, 0], 1.0)
        else:
            assert (wt[:, 0] > 0.99).all()


def test_coinciding_anchors_share_the_weight(rng):
    V = np.vstack([np.ones((2, 3)), rng.normal(size=(5, 3)) + 5])
    idx, wt = LocalCoding(INV, V, 3, 1.0).code(as_rows(np.ones((1, 3))))
    np.testing.assert_array_equal(idx[0, :2], [0, 1])
    np.testing.assert_allclose(wt[0], [0.5, 0.5, 0.0])


def test_zero_rows_and_empty_input(rng):
    V = rng.normal(size=(6, 3))
    X = np.zeros((3, 3))
    idx, wt = LocalCoding(INV, V, 2, 1.0).code(as_rows(X))
    ref, _ = brute_knn(X, V, 2)
    np.testing.assert_array_equal(idx, ref)
    idx, wt = LocalCoding(INV, V, 2, 1.0).code(as_rows(np.zeros((0, 3))))
    assert idx.shape == (0, 2)


def test_bad_parameters(rng):
    V = rng.normal(size=(4, 3))
    with pytest.raises(ValueError, match="-k"):
        LocalCoding(INV, V, 5, 1.0)
    with pytest.raises(ValueError, match="-u"):
        LocalCoding(GAUSS, V, 2, -1.0)
    with pytest.raises(ValueError):
        LocalCoding(3, V, 2, 1.0)


@pytest.mark.parametrize("nr_w", [1, 4, 5, 13, 16, 17, 70])   # fixed widths, generic, > 64
def test_local_decision_values_match_numpy(rng, nr_w):
    n, d, m, k = 80, 7, 9, 3
    X = sp.random(n, d + 2, density=0.5, random_state=1, format="csr")  # 2 unseen columns
    rows = as_rows(X)
    idx = rng.integers(0, m, size=(n, k)).astype(np.int32)
    wt = rng.random((n, k))
    wt[5, 1] = 0.0                      # a zero weight is skipped
    for bias in (-1.0, 1.0, 0.5):
        stride = d + (bias >= 0)
        W = rng.normal(size=(m * stride, nr_w))
        out = np.empty((n, nr_w))
        _knn.local_decision_values(rows.data, rows.indices, rows.indptr, idx, wt, W, d, bias, out)
        Xd = X.toarray()[:, :d]
        if bias >= 0:
            Xd = np.hstack([Xd, np.full((n, 1), bias)])
        W3 = W.reshape(m, stride, nr_w)
        ref = np.einsum("ij,ijc->ic", wt, np.einsum("id,ijdc->ijc", Xd, W3[idx]))
        np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
        # row ranges (one per thread) give the very same numbers as one call
        chunked = np.full((n, nr_w), np.nan)
        for a, b in ((0, 13), (13, 14), (14, 61), (61, n)):
            _knn.local_decision_values(rows.data, rows.indices, rows.indptr, idx, wt, W, d,
                                       bias, chunked, a, b)
        np.testing.assert_array_equal(chunked, out)
        # the row-major and the anchor-bucketed forms (one column picks the first, more
        # the second) add the same terms in the same order: the very same numbers
        for by_row in (0, 1):
            forced = np.full((n, nr_w), np.nan)
            for a, b in ((0, 13), (13, n)):
                _knn.local_decision_values(rows.data, rows.indices, rows.indptr, idx, wt, W,
                                           d, bias, forced, a, b, by_row)
            np.testing.assert_array_equal(forced, out)


@pytest.mark.parametrize("m, k", [(9, 16), (130, 16),   # one or several bitset words
                                  (5000, 16),            # past the bitset
                                  (300, 70)])            # more anchors a row than one chunk
def test_local_decision_values_one_column_orders_anchors_by_index(rng, m, k):
    """One column (the row-major form) sums a row's anchors in increasing index --
    through a bitset of the ids up to 4096 anchors, by insertion past it, and by
    insertion for a row listing an anchor twice -- so it gives the bucketed form's
    numbers bit for bit."""
    n, d = 60, 5
    rows = as_rows(sp.random(n, d, density=0.6, random_state=3, format="csr"))
    idx = np.array([rng.choice(m, size=k, replace=m < k) for _ in range(n)], dtype=np.int32)
    idx[7, 3] = idx[7, 9]                # an anchor listed twice
    wt = rng.random((n, k))
    wt[4, :5] = 0.0
    W = rng.normal(size=(m * (d + 1), 1))
    out = {}
    for by_row in (0, 1):
        out[by_row] = np.empty((n, 1))
        _knn.local_decision_values(rows.data, rows.indices, rows.indptr, idx, wt, W, d, 1.0,
                                   out[by_row], 0, n, by_row)
    np.testing.assert_array_equal(out[0], out[1])
    Xd = np.hstack([rows.to_csr().toarray(), np.ones((n, 1))])
    ref = np.einsum("ij,ijd,id->i", wt, W.reshape(m, d + 1)[idx], Xd)
    np.testing.assert_allclose(out[1][:, 0], ref, rtol=1e-12, atol=1e-12)


def test_local_decision_values_rejects_bad_anchor_index(rng):
    rows = as_rows(sp.random(5, 4, density=0.5, random_state=2, format="csr"))
    idx = np.zeros((5, 2), dtype=np.int32)
    idx[3, 1] = 7                       # only 3 anchors
    for nr_w in (1, 2):                 # the row-major and the bucketed form
        W = np.ones((3 * 4, nr_w))
        with pytest.raises(ValueError, match="anchor index 7"):
            _knn.local_decision_values(rows.data, rows.indices, rows.indptr, idx,
                                       np.full((5, 2), 0.5), W, 4, -1.0, np.empty((5, nr_w)))


# ------------------------------------------------------------------ kernel maps
def chi2(x, y):
    s = x + y
    return np.where(s > 0, 2 * x * y / np.where(s > 0, s, 1), 0.0).sum(-1)


def test_hellinger_map_is_exact(rng):
    X = rng.random((20, 5))
    Y = rng.random((20, 5))
    km = KernelMap(3)
    px, py = km(as_rows(X)).to_csr().toarray(), km(as_rows(Y)).to_csr().toarray()
    np.testing.assert_allclose(px @ py.T, np.sqrt(X[:, None] * Y[None]).sum(-1), rtol=1e-12)


@pytest.mark.parametrize("kind,kernel,order,tol", [
    (2, chi2, 1, 0.05), (2, chi2, 3, 0.01),
    (1, lambda x, y: np.minimum(x, y).sum(-1), 3, 0.08)])
def test_homogeneous_kernel_map_approximates_the_kernel(rng, kind, kernel, order, tol):
    X = rng.random((40, 8))
    Y = rng.random((40, 8))
    km = KernelMap(kind, order)
    px, py = km(as_rows(X)).to_csr().toarray(), km(as_rows(Y)).to_csr().toarray()
    assert px.shape[1] == 8 * (2 * order + 1)
    K = kernel(X[:, None, :], Y[None, :, :])
    err = np.abs(px @ py.T - K).max() / K.max()
    assert err < tol


def test_kernel_map_keeps_zeros_and_signs(rng):
    X = np.array([[0.0, 0.25, -0.25]])
    out = KernelMap(2, 1)(as_rows(X)).to_csr().toarray()[0]
    np.testing.assert_array_equal(out[:3], 0.0)
    np.testing.assert_allclose(out[3:6], -out[6:9])


# -- the bound of the k nearest (knn_code's anchor_nn) ---------------------------------

def _tied_problem(rng, sparse):
    """Integer data with many exact ties: repeated rows, anchors repeated and equal
    to rows, so that equal distances meet at the k-th place."""
    X = rng.integers(0, 3, size=(700, 6)).astype(float)
    V = np.vstack([X[:40], X[:40], rng.integers(0, 3, size=(20, 6))]).astype(float)
    return (sp.csr_matrix(X) if sparse else X), V


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("kind", [INV, GAUSS, LLC])
@pytest.mark.parametrize("k", [8, 13, 100])
def test_the_nearby_bound_gives_the_same_codes(rng, sparse, kind, k):
    """knn_code with any anchor_nn -- the anchors' own nearest, arbitrary ids, one id
    repeated -- gives the codes of the plain selection bit for bit, ties included."""
    X, V = _tied_problem(rng, sparse)
    coder = LocalCoding(kind, V, k, 1.0 if kind != LLC else 10.0)
    rows = as_rows(X)
    m = V.shape[0]

    def code(anchor_nn):
        idx = np.empty((rows.n_rows, k), dtype=np.int32)
        wt = np.empty((rows.n_rows, k))
        _knn.knn_code(rows.data, rows.indices, rows.indptr, rows.n_features, coder.anchors,
                      coder.anchors_t, coder.anchor_sq, coder.anchor_sqdist, coder.kind,
                      coder.kernel_param, idx, wt, not sparse, False, 256, anchor_nn)
        return idx, wt

    plain = code(None)
    ref, _ = brute_knn(rows.to_csr().toarray(), V, k)
    np.testing.assert_array_equal(plain[0], ref)
    for anchor_nn in (coder.nearby_anchors(k),
                      rng.integers(0, m, size=(m, k)).astype(np.int32),
                      np.zeros((m, k), dtype=np.int32)):
        bounded = code(np.ascontiguousarray(anchor_nn))
        np.testing.assert_array_equal(bounded[0], plain[0])
        np.testing.assert_array_equal(bounded[1], plain[1])


def test_local_coding_uses_the_bound_and_codes_alike(rng, monkeypatch):
    """LocalCoding.code takes the bound from m rows and 8 neighbours on: the same codes
    as without it."""
    from lcoding.local import coding
    X = rng.normal(size=(2000, 5))
    V = rng.normal(size=(120, 5))
    coder = LocalCoding(GAUSS, V, 16, 0.7)
    with_bound = coder.code(as_rows(X))
    assert 16 in coder.__dict__["_nearby"]
    monkeypatch.setattr(coding, "NEARBY_MAX_ANCHORS", 0)
    without = LocalCoding(GAUSS, V, 16, 0.7).code(as_rows(X))
    np.testing.assert_array_equal(with_bound[0], without[0])
    np.testing.assert_array_equal(with_bound[1], without[1])


def test_nearby_anchors_are_each_anchors_nearest(rng, monkeypatch):
    from lcoding.local import coding
    monkeypatch.setattr(coding, "NEARBY_BLOCK", 7)       # several blocks
    V = rng.normal(size=(30, 4))
    near = LocalCoding(INV, V, 5, 1.0).nearby_anchors(5)
    assert near.shape == (30, 5) and near.dtype == np.int32
    np.testing.assert_array_equal(near[:, 0], np.arange(30))           # itself first
    D = np_sqdist(V, V)
    np.fill_diagonal(D, -1.0)
    np.testing.assert_allclose(np.take_along_axis(D, near, axis=1),
                               np.sort(D, axis=1)[:, :5], atol=1e-12)
    assert all(len(set(row)) == 5 for row in near.tolist())


def test_anchor_nn_is_checked(rng):
    V = rng.normal(size=(10, 3))
    coder = LocalCoding(INV, V, 3, 1.0)
    rows = as_rows(rng.normal(size=(5, 3)))
    idx, wt = np.empty((5, 3), dtype=np.int32), np.empty((5, 3))
    args = (rows.data, rows.indices, rows.indptr, rows.n_features, coder.anchors,
            coder.anchors_t, coder.anchor_sq, coder.anchor_sqdist, coder.kind,
            coder.kernel_param, idx, wt, True, False, 256)
    with pytest.raises(ValueError, match="anchor_nn must be"):
        _knn.knn_code(*args, np.zeros((10, 2), dtype=np.int32))
    with pytest.raises(ValueError, match="not an anchor id"):
        _knn.knn_code(*args, np.full((10, 3), 10, dtype=np.int32))


@pytest.mark.parametrize("m", [0, 1, 3, 4, 5, 8, 17, 64, 203])
def test_the_bound_admits_the_same_ids_on_both_paths(m):
    """_admit.h: the AVX2 compaction (a 4-bit mask's table of positions) and the scalar
    loop list exactly the ids within the bound, in order -- ties on the bound, NaN
    (never admitted) and every tail length of the 4-wide blocks."""
    rng = np.random.default_rng(m)
    dist = rng.random(m)
    if m > 4:
        dist[::3] = 0.5                  # distances equal to the bound
        dist[1] = np.nan
    for t in (-1.0, 0.0, 0.25, 0.5, 0.75, 2.0):
        want = np.flatnonzero(dist <= t)
        for path in (0, 1):
            np.testing.assert_array_equal(_knn.admitted_ids(dist, t, path), want)
    with pytest.raises(ValueError, match="path"):
        _knn.admitted_ids(dist, 0.5, 2)
