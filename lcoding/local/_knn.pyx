# k-nearest-anchor search and local coding weights (LL-SVM, Ladicky & Torr 2011).
#
# For every row x: squared distances d_j = ||x - v_j||^2 to all m anchors (BLAS
# blocks for dense data, sparse row loops for CSR, or a per-row scan with the
# paper's early rejection), the k smallest kept by a bounded insertion buffer
# (a partial selection, not a sort; ties go to the smaller anchor index, so the
# result equals a stable argsort) -- with anchor_nn, only the anchors within the
# distance of the row's nearest anchor's k nearest anchors (topk_row_near: the same
# result) -- then one of the codings on N_k(x):
#
#   CODING_INVERSE   gamma_j ∝ d_j^(-p)                   (p = 1: Ladicky's code;
#                    p = 1/2: the paper's inverse Euclidean distance); a point on
#                    an anchor (d_j ~ 0) gets all the weight on it; when the powers
#                    overflow (a large negative p) the same weights come from logs
#   CODING_GAUSSIAN  gamma_j ∝ exp(-beta (d_j - d_min))   (localized soft assignment,
#                    shifted so it never underflows to 0/0)
#   CODING_LLC       min ||x - sum_j gamma_j v_j||^2 s.t. sum gamma = 1 with the
#                    ridge reg * trace(C) (Wang et al. 2010's approximated LLC):
#                    C_jl = (v_j - x).(v_l - x) = (d_j + d_l - ||v_j - v_l||^2) / 2,
#                    solve C w = 1 by Cholesky, gamma = w / sum w
#
# Every coding sums to one.  Output: anchor_idx[n, k] (int32, nearest first) and
# coding_weight[n, k] (float64).
from libc.math cimport exp, log, pow, sqrt
from libc.stdint cimport int64_t, uint64_t

from lcoding.core._dist cimport CSRView, make_csr, row_sqnorm, scatter_rows, block_sqdist

cdef extern from "_local_dot.h" nogil:
    # the per-anchor inner loop, compiled for AVX2 and baseline x86-64 (see the header)
    void lcoding_local_dot_rows(const double* X_data, const int* X_indices,
                                const int64_t* X_indptr, const int* bucket_row,
                                const double* bucket_wt, Py_ssize_t pos0, Py_ssize_t pos1,
                                const double* wa, Py_ssize_t nr_feature, Py_ssize_t nr_w,
                                double bias, double* out)
    Py_ssize_t lcoding_local_dot_width(Py_ssize_t nr_w)
    Py_ssize_t BITSET_ANCHORS "LCODING_LOCAL_DOT_BITSET_ANCHORS"
    void lcoding_local_dot_bucket(const double* X_data, const int* X_indices,
                                  const int64_t* X_indptr, const int* bucket_row,
                                  const double* bucket_wt, Py_ssize_t pos0, Py_ssize_t pos1,
                                  const double* wa, double* wpad, Py_ssize_t width,
                                  Py_ssize_t nr_feature, Py_ssize_t nr_w, double bias,
                                  double* out)
    void lcoding_local_dot_by_row(const double* X_data, const int* X_indices,
                                  const int64_t* X_indptr, const int* anchor_idx,
                                  const double* coding_weight, Py_ssize_t k,
                                  Py_ssize_t row_start, Py_ssize_t row_stop, const double* W,
                                  Py_ssize_t nr_feature, Py_ssize_t nr_w, double bias,
                                  double* out, Py_ssize_t* order, uint64_t* seen,
                                  Py_ssize_t* slot, Py_ssize_t n_words)

cdef extern from "_admit.h" nogil:
    # the ids j < m with dist[j] <= t, in order, into cand (see the header)
    Py_ssize_t lcoding_admit(const double* dist, Py_ssize_t m, double t, int* cand, int path)

cdef double INF = float("inf")
# relative size below which a squared distance counts as zero (BLAS cancellation
# in ||x||^2 - 2 x.v + ||v||^2 is ~1e-13 relative for d ~ 1000)
cdef double ZERO_REL = 1e-10
cdef double[::1] _zeros(Py_ssize_t size):
    import numpy as np
    return np.zeros(max(size, 1))


cdef int[::1] _int_buffer(Py_ssize_t size):
    import numpy as np
    return np.zeros(max(size, 1), dtype=np.int32)


cpdef enum CodingKind:
    CODING_INVERSE = 1
    CODING_GAUSSIAN = 2
    CODING_LLC = 6


cdef inline void topk_push(double dj, int j, Py_ssize_t k, Py_ssize_t* cnt,
                           double* bd, int* bi) noexcept nogil:
    # insert (dj, j) into the sorted buffer of the k best; equal distances keep
    # the earlier (smaller) anchor index first
    cdef Py_ssize_t pos
    if cnt[0] < k:
        pos = cnt[0]
        cnt[0] += 1
    elif dj < bd[k - 1]:
        pos = k - 1
    else:
        return
    while pos > 0 and bd[pos - 1] > dj:
        bd[pos] = bd[pos - 1]
        bi[pos] = bi[pos - 1]
        pos -= 1
    bd[pos] = dj
    bi[pos] = j


cdef inline void topk_row(const double* dist, Py_ssize_t m, Py_ssize_t k,
                          double* bd, int* bi) noexcept nogil:
    cdef Py_ssize_t cnt = 0
    cdef Py_ssize_t j
    for j in range(m):
        topk_push(dist[j], <int>j, k, &cnt, bd, bi)


cdef inline Py_ssize_t topk_row_near(const double* dist, Py_ssize_t m, Py_ssize_t k,
                                     const int* anchor_nn, double* bd, int* bi,
                                     int* cand) noexcept nogil:
    # topk_row's k, found faster: the insertion buffer above costs a misread branch
    # and up to k moves for every anchor that beats its current k-th distance, about
    # k (1 + ln(m / k)) of them (ijcnn1, k = 16 of 200: 0.8 of the 1.1 us a row's
    # coding took).  Any k anchors' largest distance t bounds the k-th smallest, so
    # the anchors farther than t can never enter; the k anchors nearest to the row's
    # nearest anchor (anchor_nn, the anchors' own k nearest) give a tight t, and the
    # anchors within it go through the same buffer in the same (index) order: the
    # same k anchors and order, ties included.  The distances are >= 0 and never NaN
    # (block_sqdist clips); should a bound admit fewer than k, the full scan runs.
    # Returns how many anchors the bound admitted (the caller's cue: in high
    # dimensions the distances crowd together, nearly all pass, and the extra scan
    # costs more than it saves -- MNIST's 784 features, 6.8 -> 6.9 us a row).
    cdef Py_ssize_t j, best = 0, cnt = 0, admitted = 0
    cdef double dmin, t = 0.0, m0, m1, m2, m3
    cdef const int* near
    # the nearest anchor (the first on ties): the smallest distance by four running
    # minima side by side, then its first position.  One running minimum with its
    # index is a chain of dependent minsd, ~4 cycles an anchor (ijcnn1: a third of
    # the selection)
    m0 = m1 = m2 = m3 = dist[0]
    j = 0
    while j + 4 <= m:
        m0 = dist[j] if dist[j] < m0 else m0
        m1 = dist[j + 1] if dist[j + 1] < m1 else m1
        m2 = dist[j + 2] if dist[j + 2] < m2 else m2
        m3 = dist[j + 3] if dist[j + 3] < m3 else m3
        j += 4
    while j < m:
        m0 = dist[j] if dist[j] < m0 else m0
        j += 1
    m0 = m1 if m1 < m0 else m0
    m2 = m3 if m3 < m2 else m2
    dmin = m2 if m2 < m0 else m0
    while dist[best] != dmin:
        best += 1
    near = anchor_nn + best * k
    for j in range(k):
        if dist[near[j]] > t:
            t = dist[near[j]]
    # the admitted anchors' ids, in index order, without a branch per anchor (the
    # admitted ones are few and scattered, a branch on each mispredicts): four at a
    # time with AVX2 (_admit.h)
    admitted = lcoding_admit(dist, m, t, cand, 0)
    for j in range(admitted):
        topk_push(dist[cand[j]], cand[j], k, &cnt, bd, bi)
    if cnt < k:
        topk_row(dist, m, k, bd, bi)
    return admitted


cdef inline int cholesky_solve_ones(double* C, Py_ssize_t k, double* w) noexcept nogil:
    # C (k x k, row-major, SPD) <- its lower Cholesky factor; w <- C^{-1} 1.
    # Returns 0, or -1 when a pivot is not positive.
    cdef Py_ssize_t i, j, l
    cdef double s
    for j in range(k):
        s = C[j * k + j]
        for l in range(j):
            s -= C[j * k + l] * C[j * k + l]
        if not s > 0.0:
            return -1
        C[j * k + j] = sqrt(s)
        for i in range(j + 1, k):
            s = C[i * k + j]
            for l in range(j):
                s -= C[i * k + l] * C[j * k + l]
            C[i * k + j] = s / C[j * k + j]
    for i in range(k):              # L y = 1
        s = 1.0
        for l in range(i):
            s -= C[i * k + l] * w[l]
        w[i] = s / C[i * k + i]
    for i in range(k - 1, -1, -1):  # L^T w = y
        s = w[i]
        for l in range(i + 1, k):
            s -= C[l * k + i] * w[l]
        w[i] = s / C[i * k + i]
    return 0


cdef inline void code_row(int coding, double param, Py_ssize_t k, const double* bd,
                          const int* bi, double x_sq, const double* v_sq,
                          const double* VV, Py_ssize_t m, double* C, double* w) noexcept nogil:
    # coding weights of one row from its sorted neighbour distances bd / ids bi
    cdef Py_ssize_t j, l, nzero = 0
    cdef double s, tr, ridge
    cdef int attempt
    if coding != CODING_GAUSSIAN:       # rows on an anchor: only these codings care
        for j in range(k):
            if bd[j] <= ZERO_REL * (x_sq + v_sq[bi[j]]):
                nzero += 1
    if coding == CODING_INVERSE or coding == CODING_LLC and nzero == k:
        if nzero > 0:
            # on an anchor (or several coinciding ones): split the weight among them
            for j in range(k):
                w[j] = 1.0 / nzero if bd[j] <= ZERO_REL * (x_sq + v_sq[bi[j]]) else 0.0
            return
        s = 0.0
        for j in range(k):
            if param == 1.0:
                w[j] = bd[0] / bd[j]
            else:
                w[j] = pow(bd[0] / bd[j], param)
            s += w[j]
        if not s < INF:
            # (d_0 / d_j)^p overflowed (p < 0 far from 0): normalise in log space,
            # log w_j = p (log d_0 - log d_j) - max_l (...)  (every d_j > 0 here)
            tr = -INF
            for j in range(k):
                w[j] = param * (log(bd[0]) - log(bd[j]))
                if w[j] > tr:
                    tr = w[j]
            s = 0.0
            for j in range(k):
                w[j] = exp(w[j] - tr)
                s += w[j]
        for j in range(k):
            w[j] /= s
        return
    if coding == CODING_GAUSSIAN:
        if not bd[0] < INF:
            # every squared distance overflowed (a row near the float limit, 1e155 and
            # up): the weights' limit far from the anchors, all on one neighbour --
            # the first listed -- instead of exp(inf - inf) = NaN
            for j in range(k):
                w[j] = 0.0
            w[0] = 1.0
            return
        s = 0.0
        for j in range(k):
            # a neighbour whose distance overflowed (or is NaN) weighs nothing
            w[j] = exp(-param * (bd[j] - bd[0])) if bd[j] < INF else 0.0
            s += w[j]
        for j in range(k):
            w[j] /= s
        return
    # CODING_LLC
    tr = 0.0
    for j in range(k):
        tr += bd[j]
    ridge = param * tr
    for attempt in range(8):
        for j in range(k):
            for l in range(k):
                C[j * k + l] = 0.5 * (bd[j] + bd[l] - VV[bi[j] * m + bi[l]])
            C[j * k + j] = bd[j] + ridge
        if cholesky_solve_ones(C, k, w) == 0:
            s = 0.0
            for j in range(k):
                s += w[j]
            if s > 0.0:
                for j in range(k):
                    w[j] /= s
                return
        ridge = ridge * 10.0 if ridge > 0.0 else 1e-12 * tr
    for j in range(k):
        w[j] = 1.0 if j == 0 else 0.0


def sq_distances(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features,
        const double[:, ::1] V,     # IN (m, d)
        const double[:, ::1] VT,    # IN (d, m)
        const double[::1] v_sq,     # IN (m,)
        double[:, ::1] out,         # OUT (n, m)
        bint dense, Py_ssize_t block=256):
    """All squared distances ``out[i, j] = ||x_i - v_j||^2`` (BLAS or sparse path)."""
    cdef CSRView X = make_csr(X_data, X_indices, X_indptr, n_features)
    cdef Py_ssize_t n = out.shape[0], m = V.shape[0], d = V.shape[1]
    cdef Py_ssize_t r0, r1, i
    cdef double[::1] xbuf = _zeros(block * d if dense else 1)
    cdef double[::1] xsq = _zeros(block)
    if n == 0 or m == 0:
        return
    with nogil:
        r0 = 0
        while r0 < n:
            r1 = min(r0 + block, n)
            for i in range(r0, r1):
                xsq[i - r0] = row_sqnorm(&X, i, d)
            block_sqdist(&X, r0, r1, &V[0, 0], &VT[0, 0], &v_sq[0], m, d, dense,
                         &xbuf[0], &xsq[0], &out[r0, 0])
            r0 = r1



def knn_code(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features,
        const double[:, ::1] V,     # IN (m, d) anchors
        const double[:, ::1] VT,    # IN (d, m)
        const double[::1] v_sq,     # IN (m,) ||v_j||^2
        const double[:, ::1] VV,    # IN (m, m) ||v_j - v_l||^2 for CODING_LLC, else (0, 0)
        int coding, double param,
        int[:, ::1] anchor_idx,     # OUT (n, k)
        double[:, ::1] coding_weight,  # OUT (n, k)
        bint dense, bint early_reject=False, Py_ssize_t block=256,
        const int[:, ::1] anchor_nn=None):  # IN (m, k) each anchor's k nearest anchors
    """Code every row: nearest ``k`` anchors and their weights (see module header).

    ``dense`` selects the BLAS block path (else sparse row loops); ``early_reject``
    selects the paper's per-row scan that drops an anchor as soon as its partial
    distance exceeds the current k-th best (dense rows, no BLAS).  ``anchor_nn``
    (``k`` anchor ids per anchor, best each anchor's ``k`` nearest; any ids give the
    same result) speeds up the selection of the distance paths (``topk_row_near``).
    """
    cdef CSRView X = make_csr(X_data, X_indices, X_indptr, n_features)
    cdef Py_ssize_t n = anchor_idx.shape[0], k = anchor_idx.shape[1]
    cdef Py_ssize_t m = V.shape[0], d = V.shape[1]
    cdef Py_ssize_t r0, r1, i, j, l, cnt, l_end
    cdef double dist, diff, thr
    cdef const double* vrow
    cdef double* xrow
    cdef double[::1] xbuf = _zeros(block * d if (dense or early_reject) else 1)
    cdef double[::1] dbuf = _zeros(block * m)
    cdef double[::1] xsq = _zeros(block)
    cdef double[::1] Cbuf = _zeros(k * k)
    cdef double[::1] bd = _zeros(k)
    cdef int[::1] cand = _int_buffer(m)
    cdef const double* VVp = &VV[0, 0] if VV.shape[0] > 0 else NULL
    if k > m:
        raise ValueError(f"k = {k} nearest anchors requested but there are only {m} anchors")
    if coding == CODING_LLC and VVp == NULL:
        raise ValueError("the LLC coding needs the anchor distance matrix VV")
    if coding not in (CODING_INVERSE, CODING_GAUSSIAN, CODING_LLC):
        raise ValueError(f"unknown coding {coding}")
    cdef const int* nn = NULL
    cdef bint near_on = False
    cdef Py_ssize_t admitted = 0
    cdef double buffer_entries = 0.0
    if anchor_nn is not None and anchor_nn.shape[0] > 0:
        if anchor_nn.shape[0] != m or anchor_nn.shape[1] != k:
            raise ValueError(f"anchor_nn must be ({m}, {k}), got "
                             f"({anchor_nn.shape[0]}, {anchor_nn.shape[1]})")
        for i in range(m):
            for l in range(k):
                if not 0 <= anchor_nn[i, l] < m:
                    raise ValueError(f"anchor_nn[{i}, {l}] = {anchor_nn[i, l]} is not an "
                                     f"anchor id in [0, {m})")
        nn = &anchor_nn[0, 0]
        near_on = True
        buffer_entries = k * (1.0 + log(<double>m / k))
    if n == 0 or k == 0:
        return
    with nogil:
        r0 = 0
        while r0 < n:
            r1 = min(r0 + block, n)
            for i in range(r0, r1):
                xsq[i - r0] = row_sqnorm(&X, i, d)
            if early_reject:
                scatter_rows(&X, r0, r1, d, &xbuf[0])
                for i in range(r0, r1):
                    xrow = &xbuf[(i - r0) * d]
                    cnt = 0
                    for j in range(m):
                        vrow = &V[j, 0]
                        thr = bd[k - 1] if cnt == k else INF
                        dist = 0.0
                        l = 0
                        while l < d:
                            # two dimensions at a time as in the paper, checked every 8
                            l_end = min(l + 8, d)
                            while l < l_end:
                                diff = xrow[l] - vrow[l]
                                dist += diff * diff
                                l += 1
                            if dist > thr:
                                break
                        if dist <= thr:
                            topk_push(dist, <int>j, k, &cnt, &bd[0], &anchor_idx[i, 0])
                    code_row(coding, param, k, &bd[0], &anchor_idx[i, 0], xsq[i - r0],
                             &v_sq[0], VVp, m, &Cbuf[0], &coding_weight[i, 0])
            else:
                block_sqdist(&X, r0, r1, &V[0, 0], &VT[0, 0], &v_sq[0], m, d, dense,
                             &xbuf[0], &xsq[0], &dbuf[0])
                admitted = 0
                for i in range(r0, r1):
                    if near_on:
                        admitted += topk_row_near(&dbuf[(i - r0) * m], m, k, nn, &bd[0],
                                                  &anchor_idx[i, 0], &cand[0])
                    else:
                        topk_row(&dbuf[(i - r0) * m], m, k, &bd[0], &anchor_idx[i, 0])
                    code_row(coding, param, k, &bd[0], &anchor_idx[i, 0], xsq[i - r0],
                             &v_sq[0], VVp, m, &Cbuf[0], &coding_weight[i, 0])
                # the bound pays while it admits fewer anchors than the plain buffer
                # takes in, about k (1 + ln(m / k)) a row (a choice of speed only:
                # both selections give the same codes)
                if near_on and admitted > (r1 - r0) * buffer_entries:
                    near_on = False
            r0 = r1


cdef int _by_row(const double* x_data, const int* x_indices, const int64_t[::1] X_indptr,
                 const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,
                 const double[:, ::1] W, Py_ssize_t nr_feature, double bias,
                 double[:, ::1] out, Py_ssize_t row_start, Py_ssize_t row_stop) except -1:
    """The row-major form of :func:`local_decision_values` (checked arguments)."""
    cdef Py_ssize_t k = anchor_idx.shape[1], nr_w = out.shape[1], i, c
    cdef Py_ssize_t stride = nr_feature + (1 if bias >= 0 else 0)
    cdef Py_ssize_t n_anchors = W.shape[0] // stride
    # the bitset that orders a row's anchors (up to LCODING_LOCAL_DOT_BITSET_ANCHORS;
    # past it the insertion sort): zero words, and a slot per anchor id
    cdef Py_ssize_t n_words = (n_anchors + 63) // 64 if n_anchors <= BITSET_ANCHORS else 0
    import numpy as np
    cdef Py_ssize_t[::1] order = np.empty(max(k, 1), dtype=np.intp)
    cdef uint64_t[::1] seen = np.zeros(max(n_words, 1), dtype=np.uint64)
    cdef Py_ssize_t[::1] slot = np.empty(max(n_anchors if n_words else 1, 1), dtype=np.intp)
    with nogil:
        for i in range(row_start, row_stop):
            for c in range(nr_w):
                out[i, c] = 0.0
        if k > 0:
            lcoding_local_dot_by_row(x_data, x_indices, &X_indptr[0], &anchor_idx[0, 0],
                                     &coding_weight[0, 0], k, row_start, row_stop, &W[0, 0],
                                     nr_feature, nr_w, bias, &out[0, 0], &order[0],
                                     &seen[0], &slot[0], n_words)
    return 0


def local_decision_values(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        const int[:, ::1] anchor_idx,       # IN (n, k)
        const double[:, ::1] coding_weight, # IN (n, k)
        const double[:, ::1] W,             # IN (n_anchors * stride, nr_w), anchor-major
        Py_ssize_t nr_feature, double bias,
        double[:, ::1] out,                 # OUT (n, nr_w)
        Py_ssize_t row_start=0, Py_ssize_t row_stop=-1, int by_row=-1):
    """``out[i, c] = sum_j gamma_ij (W_c[a_ij] . [x_i; B])`` for rows
    ``row_start <= i < row_stop`` (columns >= nr_feature are ignored).

    Anchor-major: the (row, weight) pairs are bucketed by anchor (a counting sort),
    then every anchor's ``(stride, nr_w)`` block of ``W`` (63 KB for MNIST) stays in
    cache while all rows coded by it stream past.  Gathering ``W`` per row instead
    reads k * nnz scattered rows of the whole ``W`` (12.5 MB for MNIST, 200 anchors)
    and was memory-bound.  The per-anchor loop is C (``_local_dot.h``), built for
    AVX2 and baseline x86-64 with the same summation order in both.  A row's value
    is summed over its anchors in increasing anchor index, whatever the row range,
    so chunks in threads give the same numbers as one call.  A model without
    features and bias (stride 0) has the decision value 0 everywhere.

    For a one-column ``W`` (a binary model, or one class of CoCoA+'s duality-gap
    check) the bucketing is skipped (``by_row=-1`` decides so; 0 / 1 force a form):
    each row is read once and its anchors' weight rows are gathered, in increasing
    anchor index, so the values are bit-identical to the bucketed form's.  With one
    column there is no class block to keep in cache, and the buckets' scattered row
    reads cost more than the gathers: ijcnn1 (100 anchors, k = 8) 6.8 against 31 ms
    per 50 000 rows, MNIST-sized rows with 200 or 2000 anchors (k = 30) 44 / 53
    against 286 / 305 ms per 20 000.  From two columns on the bucketed form is faster
    (13 against 20 ms at ijcnn1's size)."""
    cdef Py_ssize_t n = out.shape[0], nr_w = out.shape[1], k = anchor_idx.shape[1]
    cdef Py_ssize_t stride = nr_feature + (1 if bias >= 0 else 0)
    cdef Py_ssize_t n_anchors, i, j, c, a, e, pos, n_rows
    cdef double g
    cdef const double* x_data = NULL
    cdef const int* x_indices = NULL
    if anchor_idx.shape[0] != n or coding_weight.shape[0] != n or X_indptr.shape[0] != n + 1:
        raise ValueError("local_decision_values: inconsistent row counts")
    if row_stop < 0 or row_stop > n:
        row_stop = n
    if row_start < 0:
        row_start = 0
    if row_start >= row_stop:
        return
    if stride == 0:
        # no features and no bias (nr_feature 0, -B < 0): every local function is
        # the empty dot product, so every decision value is 0 (W has no rows)
        if W.shape[0] != 0:
            raise ValueError("local_decision_values: W has rows but the stride is 0")
        for i in range(row_start, row_stop):
            for c in range(nr_w):
                out[i, c] = 0.0
        return
    if W.shape[0] % stride != 0:
        raise ValueError("local_decision_values: W rows are not a multiple of the stride")
    n_anchors = W.shape[0] // stride
    n_rows = row_stop - row_start
    if X_data.shape[0] > 0:
        x_data = &X_data[0]
        x_indices = &X_indices[0]
    import numpy as np
    for i in range(row_start, row_stop):
        for j in range(k):
            a = anchor_idx[i, j]
            if a < 0 or a >= n_anchors:
                raise ValueError(f"local_decision_values: anchor index {a} out of range")
    if by_row < 0:
        by_row = nr_w == 1
    if by_row:
        return _by_row(x_data, x_indices, X_indptr, anchor_idx, coding_weight, W, nr_feature,
                       bias, out, row_start, row_stop)
    cdef Py_ssize_t[::1] start = np.zeros(n_anchors + 1, dtype=np.intp)
    cdef int[::1] bucket_row = np.empty(max(n_rows * k, 1), dtype=np.int32)
    cdef double[::1] bucket_wt = np.empty(max(n_rows * k, 1), dtype=np.float64)
    cdef Py_ssize_t width = lcoding_local_dot_width(nr_w)
    cdef double[::1] wpad = np.empty(max(stride * width, 1), dtype=np.float64)
    with nogil:
        for i in range(row_start, row_stop):
            for c in range(nr_w):
                out[i, c] = 0.0
            for j in range(k):
                if coding_weight[i, j] != 0.0:
                    start[anchor_idx[i, j] + 1] += 1
        for a in range(n_anchors):
            start[a + 1] += start[a]
        # rows enter each bucket in increasing order (stable counting sort)
        for i in range(row_start, row_stop):
            for j in range(k):
                g = coding_weight[i, j]
                if g != 0.0:
                    a = anchor_idx[i, j]
                    pos = start[a]
                    bucket_row[pos] = <int>i
                    bucket_wt[pos] = g
                    start[a] = pos + 1
        # start[a] now holds the end of bucket a, the start of bucket a + 1
        e = 0
        for a in range(n_anchors):
            if start[a] > e:
                lcoding_local_dot_bucket(x_data, x_indices, &X_indptr[0],
                                         &bucket_row[0], &bucket_wt[0], e, start[a],
                                         &W[a * stride, 0], &wpad[0], width, nr_feature,
                                         nr_w, bias, &out[0, 0])
            e = start[a]


def admitted_ids(const double[::1] dist not None, double t, int path=0):
    """The ids ``j`` with ``dist[j] <= t`` in increasing order, as the kNN search's
    bound admits them (``_admit.h``); ``path`` 0: AVX2 where the CPU has it, 1: the
    scalar loop -- for the tests."""
    import numpy as np
    cdef Py_ssize_t m = dist.shape[0], count
    cdef int[::1] cand = np.zeros(max(m, 1), dtype=np.int32)
    if path not in (0, 1):
        raise ValueError(f"path must be 0 or 1, got {path}")
    with nogil:
        count = lcoding_admit(&dist[0] if m else NULL, m, t, &cand[0], path)
    return np.asarray(cand[:count]).copy()
