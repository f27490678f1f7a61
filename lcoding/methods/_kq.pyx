# Discriminative k q-metrics (Szlam & Sapiro, ICML 2009, Sec. 3): squared norms in
# every metric and one stochastic pass of the margin updates.
#
# Metrics.  M = C*k matrices F_m (q x d), stored as the rows of one (M*q, d) row-major
# array W (rows m*q .. m*q+q-1 are F_m); class i owns m = i*k .. i*k+k-1.  The score
# of x in metric m is z_m(x) = ||F_m x||^2.  Read as column-major BLAS matrices, F_m
# is G_m = F_m^T (d x q, leading dimension d), so
#     F_m x            = dgemv('T', G_m) x      (all metrics at once: one dgemv on W)
#     F_m += c (F_m x) x^T   is   G_m += c x (F_m x)^T = dger(c, x, F_m x, G_m).
#
# Energy (paper eq. 5), over points x of class i_x with cluster j_x:
#     E = sum_m [ sum_{x in K_m} g1(z_m(x)) + sum_{x not in class(m)} g2(z_m(x)) ]
#     g1(z) = alpha1 ((mu1 - z)_+)^2,  g2(z) = alpha2 ((z - mu2)_+)^2
# and dE/dF_m = 2 g'(z) F_m x x^T.  Every update below is the step
#     F_m <- F_m + c F_m x x^T,   c = s1 (mu1 - z)  (own cluster, z < mu1)
#                                 c = s2 (mu2 - z)  (other classes, z > mu2)
# with (s1, s2) chosen by the Python driver: (dt, dt) = the rule as printed in the
# paper, (4 alpha1 dt, 4 alpha2 dt) = the exact gradient step, (alpha1 dt, alpha2 dt)
# = algorithms.md D-1.  For ||x|| = 1 the step multiplies F_m's response on x by
# (1 + c), so it only rescales z_m(x) by (1 + c)^2.
#
# Pass variants (the driver picks the rows to visit):
#   current  (stale == 0): for each visited x, all z_m are computed with the current
#            metrics, j_x = argmax over x's own class, then the updates (the paper's
#            loop; visiting only the pass-start violators is footnote 2's scheme);
#   stale    (stale == 1): j_x and the violated metrics come from the pass-start norms
#            Z (footnote 2, vectorised); only those metrics are recomputed with the
#            current F_m, and each is updated if it still violates its margin.
from libc.stdlib cimport malloc, free
from libc.stdint cimport int64_t
from scipy.linalg.cython_blas cimport dgemm, dgemv, dger


def metric_norms(const double[:, ::1] X,   # IN (n, d) rows (preprocessed, dense)
                 const double[:, ::1] W,   # IN (M*q, d) metric rows
                 Py_ssize_t q,
                 double[:, ::1] out,        # OUT (n, M) out[r, m] = ||F_m x_r||^2
                 Py_ssize_t block=256):
    """All squared metric norms, one dgemm per block of rows."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], mq = W.shape[0]
    cdef Py_ssize_t M, r0, r1, i, m, t
    cdef int imq, ib, idd
    cdef double one = 1.0, zero = 0.0, s, v
    cdef double* P
    cdef const double* prow
    if q < 1 or mq % q != 0:
        raise ValueError(f"metric rows ({mq}) are not a multiple of q = {q}")
    M = mq // q
    if W.shape[1] != d:
        raise ValueError(f"metrics have {W.shape[1]} columns, the rows have {d}")
    if out.shape[0] != n or out.shape[1] != M:
        raise ValueError(f"out has shape ({out.shape[0]}, {out.shape[1]}), expected ({n}, {M})")
    if n == 0 or M == 0:
        return
    if d == 0:
        for i in range(n):
            for m in range(M):
                out[i, m] = 0.0
        return
    P = <double*>malloc(block * mq * sizeof(double))
    if P == NULL:
        raise MemoryError("metric_norms: cannot allocate the product block")
    imq = <int>mq
    idd = <int>d
    try:
        with nogil:
            r0 = 0
            while r0 < n:
                r1 = min(r0 + block, n)
                ib = <int>(r1 - r0)
                # column-major P^T (mq x ib) = W^T(as d x mq)^T . X_block^T (d x ib)
                dgemm(b"T", b"N", &imq, &ib, &idd, &one, <double*>&W[0, 0], &idd,
                      <double*>&X[r0, 0], &idd, &zero, P, &imq)
                for i in range(r1 - r0):
                    prow = P + i * mq
                    for m in range(M):
                        s = 0.0
                        for t in range(m * q, m * q + q):
                            v = prow[t]
                            s += v * v
                        out[r0 + i, m] = s
                r0 = r1
    finally:
        free(P)


def flat_scores(const double[:, ::1] X,        # IN (n, d) rows
                const double[:, ::1] W,        # IN (M*q, d) flat bases (orthonormal rows)
                const double[:, ::1] centres,  # IN (M, d) flat centres c_m
                Py_ssize_t q,
                double[:, ::1] out,            # OUT (n, M) minus the squared distance
                Py_ssize_t block=256):
    """Affine flats: out[r, m] = ||F_m (x_r - c_m)||^2 - ||x_r - c_m||^2, i.e. minus the
    squared distance of x_r to the flat c_m + span(F_m) when F_m has orthonormal rows
    (the largest score is the nearest flat).  Two dgemm per block of rows."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], mq = W.shape[0]
    cdef Py_ssize_t M, r0, r1, i, m, t, u
    cdef int imq, ib, idd, iM
    cdef double one = 1.0, zero = 0.0, s, v, xx
    cdef double* P = NULL
    cdef double* Q = NULL
    cdef double* B = NULL
    cdef double* cc = NULL
    cdef const double* prow
    cdef const double* xrow
    if q < 1 or mq % q != 0:
        raise ValueError(f"flat rows ({mq}) are not a multiple of q = {q}")
    M = mq // q
    if W.shape[1] != d or centres.shape[1] != d:
        raise ValueError(f"flats have {W.shape[1]} / centres {centres.shape[1]} columns, the "
                         f"rows have {d}")
    if centres.shape[0] != M:
        raise ValueError(f"{centres.shape[0]} centres for {M} flats")
    if out.shape[0] != n or out.shape[1] != M:
        raise ValueError(f"out has shape ({out.shape[0]}, {out.shape[1]}), expected ({n}, {M})")
    if n == 0 or M == 0:
        return
    P = <double*>malloc(block * mq * sizeof(double))
    Q = <double*>malloc(block * M * sizeof(double))
    B = <double*>malloc(mq * sizeof(double))
    cc = <double*>malloc(M * sizeof(double))
    if P == NULL or Q == NULL or B == NULL or cc == NULL:
        free(P)
        free(Q)
        free(B)
        free(cc)
        raise MemoryError("flat_scores: cannot allocate the product blocks")
    imq = <int>mq
    idd = <int>d
    iM = <int>M
    try:
        with nogil:
            for m in range(M):            # B = F_m c_m, cc = ||c_m||^2
                s = 0.0
                for u in range(d):
                    s += centres[m, u] * centres[m, u]
                cc[m] = s
                for t in range(m * q, m * q + q):
                    s = 0.0
                    for u in range(d):
                        s += W[t, u] * centres[m, u]
                    B[t] = s
            r0 = 0
            while r0 < n:
                r1 = min(r0 + block, n)
                ib = <int>(r1 - r0)
                if d > 0:
                    dgemm(b"T", b"N", &imq, &ib, &idd, &one, <double*>&W[0, 0], &idd,
                          <double*>&X[r0, 0], &idd, &zero, P, &imq)
                    dgemm(b"T", b"N", &iM, &ib, &idd, &one, <double*>&centres[0, 0], &idd,
                          <double*>&X[r0, 0], &idd, &zero, Q, &iM)
                for i in range(r1 - r0):
                    xrow = &X[r0 + i, 0]
                    xx = 0.0
                    for u in range(d):
                        xx += xrow[u] * xrow[u]
                    prow = P + i * mq
                    for m in range(M):
                        s = 0.0
                        if d > 0:
                            for t in range(m * q, m * q + q):
                                v = prow[t] - B[t]
                                s += v * v
                            s -= xx - 2.0 * Q[i * M + m] + cc[m]
                        out[r0 + i, m] = s
                r0 = r1
    finally:
        free(P)
        free(Q)
        free(B)
        free(cc)


cdef inline double metric_response(double* Fm, const double* x, double* y,
                                   int d, int q) noexcept nogil:
    # y = F_m x (q values); returns ||y||^2
    cdef int inc = 1, t
    cdef double one = 1.0, zero = 0.0, s = 0.0
    dgemv(b"T", &d, &q, &one, Fm, &d, <double*>x, &inc, &zero, y, &inc)
    for t in range(q):
        s += y[t] * y[t]
    return s


cdef inline void metric_step(double* Fm, const double* x, double* y, double c,
                             int d, int q) noexcept nogil:
    # F_m += c (F_m x) x^T, with y = F_m x computed before the step
    cdef int inc = 1
    dger(&d, &q, &c, <double*>x, &inc, y, &inc, Fm, &d)


def kq_pass(const double[:, ::1] X,          # IN (n, d) rows, unit norm in the paper
            const int64_t[::1] class_index,  # IN (n,) class of each row, 0..C-1
            const int64_t[::1] order,        # IN rows to visit, in this order
            double[:, ::1] W,                # IN/OUT (C*k*q, d) metric rows
            Py_ssize_t k, Py_ssize_t q,
            double mu1, double mu2,          # margins, mu1 > mu2
            double s1, double s2,            # step factors (see header)
            const double[:, ::1] Z,          # IN (n, C*k) pass-start norms (stale only)
            bint stale):
    """One pass of the discriminative updates; returns (own-cluster updates,
    other-class updates)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], mq = W.shape[0]
    cdef Py_ssize_t M, C, t, r, m, ci, first, jx
    cdef int id_, iq, imq, inc = 1
    cdef double one = 1.0, zero = 0.0, z, best, c
    cdef long n_own = 0, n_other = 0
    cdef double* Y
    cdef double* z_all
    cdef const double* x
    if k < 1 or q < 1 or mq % (k * q) != 0:
        raise ValueError(f"metric rows ({mq}) are not a multiple of k*q = {k * q}")
    M = mq // q
    C = M // k
    if W.shape[1] != d:
        raise ValueError(f"metrics have {W.shape[1]} columns, the rows have {d}")
    if class_index.shape[0] != n:
        raise ValueError(f"class_index has {class_index.shape[0]} entries, X has {n} rows")
    if stale and (Z.shape[0] != n or Z.shape[1] != M):
        raise ValueError(f"Z has shape ({Z.shape[0]}, {Z.shape[1]}), expected ({n}, {M})")
    for t in range(order.shape[0]):
        if not 0 <= order[t] < n:
            raise ValueError(f"order[{t}] = {order[t]} is not a row index (n = {n})")
    for r in range(n):
        if not 0 <= class_index[r] < C:
            raise ValueError(f"class_index[{r}] = {class_index[r]} outside 0..{C - 1}")
    if n == 0 or order.shape[0] == 0 or d == 0:
        return 0, 0
    Y = <double*>malloc(mq * sizeof(double))
    z_all = <double*>malloc(M * sizeof(double))
    if Y == NULL or z_all == NULL:
        free(Y)
        free(z_all)
        raise MemoryError("kq_pass: cannot allocate the response buffers")
    id_ = <int>d
    iq = <int>q
    imq = <int>mq
    try:
        with nogil:
            for t in range(order.shape[0]):
                r = order[t]
                x = &X[r, 0]
                ci = class_index[r]
                first = ci * k
                if not stale:
                    # every response with the current metrics: Y = W x
                    dgemv(b"T", &id_, &imq, &one, &W[0, 0], &id_, <double*>x, &inc,
                          &zero, Y, &inc)
                    for m in range(M):
                        z = 0.0
                        for jx in range(m * q, m * q + q):
                            z += Y[jx] * Y[jx]
                        z_all[m] = z
                    jx = first
                    best = z_all[first]
                    for m in range(first + 1, first + k):
                        if z_all[m] > best:
                            best = z_all[m]
                            jx = m
                    if best < mu1:
                        metric_step(&W[jx * q, 0], x, Y + jx * q, s1 * (mu1 - best), id_, iq)
                        n_own += 1
                    for m in range(M):
                        if (m < first or m >= first + k) and z_all[m] > mu2:
                            metric_step(&W[m * q, 0], x, Y + m * q, s2 * (mu2 - z_all[m]),
                                        id_, iq)
                            n_other += 1
                else:
                    jx = first
                    best = Z[r, first]
                    for m in range(first + 1, first + k):
                        if Z[r, m] > best:
                            best = Z[r, m]
                            jx = m
                    if best < mu1:
                        z = metric_response(&W[jx * q, 0], x, Y, id_, iq)
                        if z < mu1:
                            metric_step(&W[jx * q, 0], x, Y, s1 * (mu1 - z), id_, iq)
                            n_own += 1
                    for m in range(M):
                        if (m < first or m >= first + k) and Z[r, m] > mu2:
                            z = metric_response(&W[m * q, 0], x, Y, id_, iq)
                            if z > mu2:
                                metric_step(&W[m * q, 0], x, Y, s2 * (mu2 - z), id_, iq)
                                n_other += 1
    finally:
        free(Y)
        free(z_all)
    return n_own, n_other
