# k* coding kernels (see _kstar.pxd for the algorithm).
#
#   kstar_eta(eta)              one point from its eta vector (tests, debugging)
#   kstar_code(X, anchors, mu)  a batch of CSR rows: distances in BLAS / sparse
#                               blocks (_dist.pxd), then the greedy loop per row
from libc.math cimport sqrt
from libc.stdint cimport int64_t

import numpy as np

from lcoding.core._dist cimport CSRView, make_csr, row_sqnorm, block_sqdist


cdef inline void _sift_down(double* key, int* ids, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    cdef Py_ssize_t c
    cdef double kv = key[i]
    cdef int iv = ids[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        # ties broken by the smaller anchor index, so the order is deterministic
        if c + 1 < n and (key[c + 1] < key[c] or (key[c + 1] == key[c] and ids[c + 1] < ids[c])):
            c += 1
        if key[c] < kv or (key[c] == kv and ids[c] < iv):
            key[i] = key[c]
            ids[i] = ids[c]
            i = c
        else:
            break
    key[i] = kv
    ids[i] = iv


cdef void heap_build(double* key, int* ids, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    i = n // 2 - 1
    while i >= 0:
        _sift_down(key, ids, n, i)
        i -= 1


cdef void heap_pop(double* key, int* ids, Py_ssize_t* n, double* out_key, int* out_id) noexcept nogil:
    out_key[0] = key[0]
    out_id[0] = ids[0]
    n[0] -= 1
    if n[0] > 0:
        key[0] = key[n[0]]
        ids[0] = ids[n[0]]
        _sift_down(key, ids, n[0], 0)


cdef Py_ssize_t kstar_row(const double* dist, Py_ssize_t m, double mu,
                          double* hkey, int* hid, int* out_idx, double* out_raw,
                          double* out_gamma, double* out_sum, double* out_lam) noexcept nogil:
    # dist: squared distances to the m anchors.  Writes the k* active anchors
    # (nearest first), their raw weights lambda - eta_i, gamma, the sum S of the raw
    # weights and lambda; returns k*.  hkey / hid: m-element workspaces.
    cdef Py_ssize_t j, k = 0, heap_n = m
    cdef double eta, lam, s1 = 0.0, s2 = 0.0, disc, w, total = 0.0
    cdef int a
    for j in range(m):
        hkey[j] = mu * dist[j]
        hid[j] = <int>j
    heap_build(hkey, hid, heap_n)
    heap_pop(hkey, hid, &heap_n, &eta, &a)
    lam = eta + 1.0
    while k < m and lam > eta:
        out_idx[k] = a
        out_raw[k] = eta            # eta for now; turned into lambda - eta below
        k += 1
        s1 += eta
        s2 += eta * eta
        disc = k + s1 * s1 - k * s2
        if disc < 0.0:
            disc = 0.0
        lam = (s1 + sqrt(disc)) / k
        if k < m:
            heap_pop(hkey, hid, &heap_n, &eta, &a)
    for j in range(k):
        w = lam - out_raw[j]
        if w < 0.0:
            w = 0.0
        out_raw[j] = w
        total += w
    if total <= 0.0:        # unreachable in exact arithmetic (w_1 > 0); keep gamma defined
        for j in range(k):
            out_raw[j] = 1.0 if j == 0 else 0.0
        total = 1.0
    for j in range(k):
        out_gamma[j] = out_raw[j] / total
    out_sum[0] = total
    out_lam[0] = lam
    return k


def kstar_eta(const double[::1] eta):
    """k* coding of one point given ``eta`` (already scaled by mu): returns
    ``(anchor_idx, gamma, lam)`` with the k* active anchors, nearest first."""
    cdef Py_ssize_t m = eta.shape[0], k
    if m < 1:
        raise ValueError("kstar_eta: need at least one anchor")
    hkey = np.empty(m)
    hid = np.empty(m, dtype=np.int32)
    idx = np.empty(m, dtype=np.int32)
    raw = np.empty(m)
    gam = np.empty(m)
    cdef double[::1] hk = hkey, rw = raw, gm = gam
    cdef int[::1] hi = hid, ix = idx
    cdef double S, lam
    k = kstar_row(&eta[0], m, 1.0, &hk[0], &hi[0], &ix[0], &rw[0], &gm[0], &S, &lam)
    return idx[:k].copy(), gam[:k].copy(), float(lam)


def kstar_code(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features,
        const double[:, ::1] V,         # IN (m, d) anchors
        const double[:, ::1] VT,        # IN (d, m) transposed anchors
        const double[::1] v_sq,         # IN (m,) squared anchor norms
        double mu,
        int[:, ::1] anchor_idx,         # OUT (n, m): the k* anchors, then padding
        double[:, ::1] coding_weight,   # OUT (n, m): gamma, then zeros
        int[::1] kstar,                 # OUT (n,)
        double[::1] lam,                # OUT (n,)
        bint dense, Py_ssize_t block):
    """k* coding of every CSR row (columns >= d ignored).  Padding columns repeat
    the nearest anchor with weight 0."""
    cdef CSRView X = make_csr(X_data, X_indices, X_indptr, n_features)
    cdef Py_ssize_t n = anchor_idx.shape[0], m = V.shape[0], d = V.shape[1]
    cdef Py_ssize_t r0, r1, i, j, k
    cdef double S, L
    if anchor_idx.shape[1] != m or coding_weight.shape[1] != m or coding_weight.shape[0] != n \
            or kstar.shape[0] != n or lam.shape[0] != n or X_indptr.shape[0] != n + 1:
        raise ValueError("kstar_code: inconsistent output shapes")
    if VT.shape[0] != d or VT.shape[1] != m or v_sq.shape[0] != m:
        raise ValueError("kstar_code: inconsistent anchor arrays")
    if block < 1:
        raise ValueError("kstar_code: block must be >= 1")
    cdef double[::1] xbuf = np.zeros(block * d if dense else 1)
    cdef double[::1] dbuf = np.zeros(block * m)
    cdef double[::1] xsq = np.zeros(block)
    cdef double[::1] hkey = np.zeros(m)
    cdef int[::1] hid = np.zeros(m, dtype=np.int32)
    cdef double[::1] raw = np.zeros(m)
    if n == 0:
        return
    with nogil:
        r0 = 0
        while r0 < n:
            r1 = r0 + block if r0 + block < n else n
            for i in range(r0, r1):
                xsq[i - r0] = row_sqnorm(&X, i, d)
            block_sqdist(&X, r0, r1, &V[0, 0], &VT[0, 0], &v_sq[0], m, d, dense,
                         &xbuf[0], &xsq[0], &dbuf[0])
            for i in range(r0, r1):
                k = kstar_row(&dbuf[(i - r0) * m], m, mu, &hkey[0], &hid[0],
                              &anchor_idx[i, 0], &raw[0], &coding_weight[i, 0], &S, &L)
                kstar[i] = <int>k
                lam[i] = L
                for j in range(k, m):
                    anchor_idx[i, j] = anchor_idx[i, 0]
                    coding_weight[i, j] = 0.0
            r0 = r1
