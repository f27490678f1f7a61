# k-means for anchor points: Lloyd steps, k-means++ seeding and Sculley's mini-batch
# update, over CSR rows.
#
# Lloyd (one call = one assignment or one update):
#     assign:  c(i) = argmin_j ||x_i - v_j||^2       (BLAS distance blocks, _dist.pxd;
#                                                     ties -> smaller centre index)
#     update:  v_j = mean of {x_i : c(i) = j}
# k-means++ (Arthur & Vassilvitskii 2007): first centre uniform, each next one drawn
# with probability proportional to the squared distance to the closest centre so far
# (kmeanspp_init / kmeanspp_draw / kmeanspp_update; the driver loops over centres).
# Mini-batch (Sculley 2010): per sample of a batch, n_j += 1, v_j += (x - v_j) / n_j.
# Randomness comes from the caller's splitmix64 state (_rng.pxd).
from libc.stdint cimport int64_t, uint64_t

from lcoding.core._dist cimport CSRView, make_csr, row_sqnorm, block_sqdist
from lcoding.core._rng cimport rng_below, rng_uniform

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


# k-means++ in pieces, so the driver (lcoding.local.anchors) can run the distance
# updates -- one pass over the non-zeros per centre -- over row ranges in -m threads:
# every row's update is its own, so the centres are the same bit for bit for any
# thread count.  The updates also sum the distances of every fixed block of
# DRAW_BLOCK rows (in row order; thread ranges start at multiples of it), so the
# serial draw walks n / DRAW_BLOCK block sums and one block's rows instead of the
# whole distance array twice -- that walk is a chain of dependent additions (ijcnn1,
# 50 000 rows, 100 centres: 13 ms of the seeding's 24 on two threads).  The block
# sums depend on the blocks only, never on the threads.
cdef enum:
    DRAW_BLOCK_ROWS = 256
DRAW_BLOCK = DRAW_BLOCK_ROWS


def kmeanspp_init(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features, Py_ssize_t start, Py_ssize_t stop,
        double[::1] xsq,            # OUT (n,) ||x_i||^2 over the first n_features columns
        double[::1] closest):       # OUT (n,) squared distance to the closest centre: none yet
    """Rows ``start:stop``: their squared norms, and "no centre yet" (1e300)."""
    cdef Py_ssize_t i
    cdef int64_t p
    cdef double s
    with nogil:
        for i in range(start, stop):
            s = 0.0
            for p in range(X_indptr[i], X_indptr[i + 1]):
                if X_indices[p] < n_features:
                    s += X_data[p] * X_data[p]
            xsq[i] = s
            closest[i] = 1.0e300


def kmeanspp_draw(
        const double[::1] closest,  # IN (n,)
        const double[::1] block_sum,  # IN (ceil(n / DRAW_BLOCK),) sums of closest per block
        uint64_t[::1] rng_state,    # INOUT
        bint first):
    """The next seed row: uniform for the first centre, else drawn with probability
    proportional to ``closest`` (D^2 sampling; any row when every row sits on a
    centre already).

    ``u`` is uniform on ``[0, total)``, ``total`` the sum of the block sums in order;
    the pick is the first row with ``closest > 0`` where the running sum (the block
    sums before its block, then its block's rows) exceeds ``u``.  Should rounding leave
    no such row, the last row with ``closest > 0`` is taken."""
    cdef Py_ssize_t n = closest.shape[0], nb = block_sum.shape[0], i, b, pick, last
    cdef double total = 0.0, u, acc = 0.0, inner
    cdef uint64_t* state = &rng_state[0]
    if n == 0:
        return 0
    if nb != (n + DRAW_BLOCK_ROWS - 1) // DRAW_BLOCK_ROWS:
        raise ValueError("kmeanspp_draw: block_sum needs one entry per DRAW_BLOCK rows")
    if first:
        return rng_below(state, n)
    with nogil:
        for b in range(nb):
            total += block_sum[b]
        if total > 0.0:
            u = rng_uniform(state) * total
            pick = -1
            last = -1
            for b in range(nb):
                if block_sum[b] > 0.0:
                    inner = acc
                    for i in range(b * DRAW_BLOCK_ROWS, min(n, (b + 1) * DRAW_BLOCK_ROWS)):
                        if closest[i] > 0.0:
                            inner += closest[i]
                            last = i
                            if inner > u:
                                pick = i
                                break
                    if pick >= 0:
                        break
                    acc += block_sum[b]
            if pick < 0:
                pick = last if last >= 0 else n - 1
        else:
            pick = rng_below(state, n)
    return pick


def kmeanspp_update(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features, Py_ssize_t start, Py_ssize_t stop,
        const double[::1] centre,   # IN (n_features,) the new centre (a row, dense)
        double c_sq,                # IN ||centre||^2
        const double[::1] xsq,      # IN (n,)
        double[::1] closest,        # INOUT (n,)
        double[::1] block_sum):     # OUT the blocks of start:stop: sums of closest
    """Rows ``start:stop`` (``start`` a multiple of ``DRAW_BLOCK``, ``stop`` one or the
    last row): ``closest_i = min(closest_i, ||x_i - centre||^2)``, the distance as
    ``||x||^2 - 2 x.c + ||c||^2`` clipped at 0, and the sums of ``closest`` over the
    range's blocks, each in row order."""
    cdef Py_ssize_t i, b
    cdef int64_t p
    cdef double dot, dist, s
    if start % DRAW_BLOCK_ROWS != 0 or (stop % DRAW_BLOCK_ROWS != 0 and stop != closest.shape[0]):
        raise ValueError("kmeanspp_update: the range must cover whole DRAW_BLOCK blocks")
    with nogil:
        b = start // DRAW_BLOCK_ROWS
        s = 0.0
        for i in range(start, stop):
            dot = 0.0
            for p in range(X_indptr[i], X_indptr[i + 1]):
                if X_indices[p] < n_features:
                    dot += X_data[p] * centre[X_indices[p]]
            dist = xsq[i] - 2.0 * dot + c_sq
            if dist < 0.0:
                dist = 0.0
            if dist < closest[i]:
                closest[i] = dist
            s += closest[i]
            if (i + 1) % DRAW_BLOCK_ROWS == 0 or i + 1 == stop:
                block_sum[b] = s
                b += 1
                s = 0.0


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
