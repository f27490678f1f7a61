# k-means for anchor points: Lloyd steps, k-means++ seeding and Sculley's mini-batch
# update, over CSR rows.
#
# Lloyd (one call = one assignment or one update):
#     assign:  c(i) = argmin_j ||x_i - v_j||^2       (BLAS distance blocks, _dist.pxd;
#                                                     ties -> smaller centre index)
#     update:  v_j = mean of {x_i : c(i) = j}
# k-means++ (Arthur & Vassilvitskii 2007): first centre uniform, each next one drawn
# with probability proportional to the squared distance to the closest centre so far.
# Mini-batch (Sculley 2010): per sample of a batch, n_j += 1, v_j += (x - v_j) / n_j.
# Randomness comes from the caller's splitmix64 state (_rng.pxd).  The seeding (one
# pass over the rows per centre) returns early, between centres, when the optional
# stop flag is raised (Ctrl-C, _stop.pxd); its output is then incomplete.
from libc.stdint cimport int64_t, uint64_t

from lcoding.core._dist cimport CSRView, make_csr, row_sqnorm, block_sqdist
from lcoding.core._rng cimport rng_below, rng_uniform
from lcoding.core._stop cimport stop_pointer, stop_requested

import numpy as np


def kmeans_assign(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features,
        const double[:, ::1] V,     # IN (m, d) centres
        const double[:, ::1] VT,    # IN (d, m)
        const double[::1] v_sq,     # IN (m,)
        int[::1] labels,            # OUT (n,) closest centre
        double[::1] min_sqdist,     # OUT (n,) its squared distance
        bint dense, Py_ssize_t block=256):
    """Assignment step; returns the inertia ``sum_i min_j ||x_i - v_j||^2``."""
    cdef CSRView X = make_csr(X_data, X_indices, X_indptr, n_features)
    cdef Py_ssize_t n = labels.shape[0], m = V.shape[0], d = V.shape[1]
    cdef Py_ssize_t r0, r1, i, j, best
    cdef double bestd, inertia = 0.0
    cdef double* row
    cdef double[::1] xbuf = np.zeros(max(block * d if dense else 1, 1))
    cdef double[::1] dbuf = np.zeros(max(block * m, 1))
    cdef double[::1] xsq = np.zeros(block)
    if n == 0:
        return 0.0
    with nogil:
        r0 = 0
        while r0 < n:
            r1 = min(r0 + block, n)
            for i in range(r0, r1):
                xsq[i - r0] = row_sqnorm(&X, i, d)
            block_sqdist(&X, r0, r1, &V[0, 0], &VT[0, 0], &v_sq[0], m, d, dense,
                         &xbuf[0], &xsq[0], &dbuf[0])
            for i in range(r0, r1):
                row = &dbuf[(i - r0) * m]
                best = 0
                bestd = row[0]
                for j in range(1, m):
                    if row[j] < bestd:
                        bestd = row[j]
                        best = j
                labels[i] = <int>best
                min_sqdist[i] = bestd
                inertia += bestd
            r0 = r1
    return inertia


def kmeans_sums(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        const int[::1] labels,      # IN (n,)
        double[:, ::1] sums,        # OUT (m, d) sum of the rows of each cluster
        int64_t[::1] counts):       # OUT (m,)
    """Per-cluster sums and sizes (the Lloyd update is ``sums / counts``)."""
    cdef Py_ssize_t n = labels.shape[0], m = sums.shape[0], d = sums.shape[1]
    cdef Py_ssize_t i, j, c
    cdef int64_t p
    with nogil:
        for c in range(m):
            counts[c] = 0
            for j in range(d):
                sums[c, j] = 0.0
        for i in range(n):
            c = labels[i]
            counts[c] += 1
            for p in range(X_indptr[i], X_indptr[i + 1]):
                if X_indices[p] < d:
                    sums[c, X_indices[p]] += X_data[p]


def kmeanspp_seed(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        double[:, ::1] centres,     # OUT (m, d)
        int[::1] chosen,            # OUT (m,) row ids of the seeds
        uint64_t[::1] rng_state,    # INOUT
        const unsigned char[::1] stop=None):  # IN  stop flag (None: never stop)
    """k-means++ seeding by D^2 sampling (one candidate per step).  Returns False when
    the stop flag ended it early (the centres are then incomplete), else True."""
    cdef Py_ssize_t n = X_indptr.shape[0] - 1, m = centres.shape[0], d = centres.shape[1]
    cdef Py_ssize_t i, j, c, pick
    cdef int64_t p
    cdef double total, u, acc, dist, c_sq, dot
    cdef double[::1] closest = np.empty(max(n, 1))
    cdef double[::1] xsq = np.empty(max(n, 1))
    cdef uint64_t* state = &rng_state[0]
    cdef const unsigned char* stop_p = stop_pointer(stop)
    if n == 0 or m == 0:
        return True
    with nogil:
        for i in range(n):
            dist = 0.0
            for p in range(X_indptr[i], X_indptr[i + 1]):
                if X_indices[p] < d:
                    dist += X_data[p] * X_data[p]
            xsq[i] = dist
            closest[i] = 1.0e300
        pick = rng_below(state, n)
        for c in range(m):
            if stop_requested(stop_p):
                break
            if c > 0:
                total = 0.0
                for i in range(n):
                    total += closest[i]
                if total > 0.0:
                    u = rng_uniform(state) * total
                    acc = 0.0
                    pick = n - 1
                    for i in range(n):
                        acc += closest[i]
                        if acc > u and closest[i] > 0.0:
                            pick = i
                            break
                else:
                    # every row sits on a centre already: any row will do
                    pick = rng_below(state, n)
            chosen[c] = <int>pick
            for j in range(d):
                centres[c, j] = 0.0
            for p in range(X_indptr[pick], X_indptr[pick + 1]):
                if X_indices[p] < d:
                    centres[c, X_indices[p]] = X_data[p]
            c_sq = xsq[pick]
            for i in range(n):
                dot = 0.0
                for p in range(X_indptr[i], X_indptr[i + 1]):
                    if X_indices[p] < d:
                        dot += X_data[p] * centres[c, X_indices[p]]
                dist = xsq[i] - 2.0 * dot + c_sq
                if dist < 0.0:
                    dist = 0.0
                if dist < closest[i]:
                    closest[i] = dist
    return not stop_requested(stop_p)


def minibatch_update(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN batch
        const int[::1] labels,      # IN (b,) closest centre of each batch row
        double[:, ::1] centres,     # INOUT (m, d)
        int64_t[::1] counts):       # INOUT (m,) samples seen per centre
    """Sculley's per-centre learning-rate update for one mini-batch."""
    cdef Py_ssize_t b = labels.shape[0], d = centres.shape[1]
    cdef Py_ssize_t i, j, c
    cdef int64_t p
    cdef double eta
    with nogil:
        for i in range(b):
            c = labels[i]
            counts[c] += 1
            eta = 1.0 / counts[c]
            for j in range(d):
                centres[c, j] *= 1.0 - eta
            for p in range(X_indptr[i], X_indptr[i + 1]):
                if X_indices[p] < d:
                    centres[c, X_indices[p]] += eta * X_data[p]
