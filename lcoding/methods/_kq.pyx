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
from libc.stdint cimport int32_t, int64_t
from libc.math cimport INFINITY, NAN, fabs, sqrt
from scipy.linalg.cython_blas cimport dgemm, dgemv, dger, dsyrk, sgemm
from scipy.linalg.cython_lapack cimport dsyevr, dlamch

from cython.view cimport array as cvarray
from numpy.linalg import LinAlgError

from lcoding.core._stop cimport stop_pointer, stop_requested

cdef extern from "_small_eigh.h" nogil:
    # the top q eigenpairs of a small symmetric matrix (Householder, bisection, inverse
    # iteration)
    int lcoding_top_eigh(int n, int q, double* A, double* vals, double* vecs, double* work,
                         int* iwork)
    int lcoding_top_eigh_path(int n, int q, double* A, double* vals, double* vecs,
                              double* work, int* iwork, int path)
    long lcoding_top_eigh_work(long n)

cdef extern from "_csr_dense.h" nogil:
    # CSR rows times a dense matrix in scipy's summation order
    int lcoding_csr_dense_avx2_ok(int path)
    void lcoding_csr_dense(const int64_t* indptr, const int32_t* indices, const double* data,
                           Py_ssize_t r0, Py_ssize_t r1, const double* B, Py_ssize_t p,
                           double* out, Py_ssize_t ldo, int avx2)

cdef extern from "_flats32.h" nogil:
    # the single-precision scores: the fused AVX2 pass, or the passes after sgemm
    int lcoding_flats32_avx2(int path)
    void lcoding_flat_scores_f32(const float* g, Py_ssize_t M, Py_ssize_t q, float xx,
                                 float* score)
    int lcoding_class_max_f32(const float* score, Py_ssize_t C, Py_ssize_t k, double* out,
                              int avx2)
    int lcoding_flat_scores_fused(const float* At, Py_ssize_t groups, Py_ssize_t q,
                                  Py_ssize_t d1, const float* xa, const float* xx,
                                  Py_ssize_t n, float* score, Py_ssize_t Mp, int avx2)


def csr_times_dense(const int64_t[::1] indptr,     # IN CSR rows (the caller checks
                    const int32_t[::1] indices,    #    every index < B's rows)
                    const double[::1] data,
                    Py_ssize_t r0, Py_ssize_t r1,  # IN the rows r0 .. r1 - 1
                    const double[:, ::1] B,        # IN (features, p)
                    double[:, :] out,              # OUT (r1 - r0, p), rows of
                                                   #    contiguous values
                    int path=0):
    """``out = X[r0:r1] @ B`` for the CSR rows X, each output summed from 0 in the
    rows' storage order, a product then a sum -- scipy's ``csr_matvecs`` order, so
    the values are the bits ``X @ B`` gives (``_csr_dense.h``; AVX2 with ``path`` 0
    where the CPU has it, the plain loop with ``path`` 1: the same bits).  ``out`` may
    be the first ``p`` columns of a wider array (the PCA writes its rows in place,
    the constant coordinate after them: usps 0.71 -> 0.6 us a row)."""
    cdef Py_ssize_t n = indptr.shape[0] - 1, p = B.shape[1], ldo = p
    cdef int avx2
    if path not in (0, 1):
        raise ValueError(f"path must be 0 or 1, got {path}")
    if not (0 <= r0 <= r1 <= n):
        raise ValueError(f"rows {r0} .. {r1} outside the {n} rows")
    if out.shape[0] != r1 - r0 or out.shape[1] != p:
        raise ValueError(f"out has shape ({out.shape[0]}, {out.shape[1]}), expected "
                         f"({r1 - r0}, {p})")
    if r1 == r0 or p == 0:
        return
    if out.strides[1] != sizeof(double):
        raise ValueError("out's rows must be contiguous")
    if r1 - r0 > 1:
        if out.strides[0] < p * <Py_ssize_t>sizeof(double) or out.strides[0] % sizeof(double):
            raise ValueError(f"out's rows are {out.strides[0]} bytes apart; they need "
                             f"at least {p * sizeof(double)}, whole doubles")
        ldo = out.strides[0] // sizeof(double)
    if B.shape[0] == 0:             # no features: every row is empty
        out[:, :] = 0.0
        return
    if indptr[r0] < 0 or indptr[r1] > min(indices.shape[0], data.shape[0]):
        raise ValueError(f"indptr[{r0}:{r1 + 1}] points outside the {data.shape[0]} values")
    avx2 = lcoding_csr_dense_avx2_ok(path)
    with nogil:
        lcoding_csr_dense(&indptr[0], &indices[0] if indices.shape[0] else NULL,
                          &data[0] if data.shape[0] else NULL, r0, r1, &B[0, 0], p,
                          &out[0, 0], ldo, avx2)


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
    (the largest score is the nearest flat): :func:`flat_class_scores` with one flat a
    class."""
    flat_class_scores(X, W, centres, q, 1, out, block)


ctypedef fused real_t:
    float
    double


cdef void _rows_with_one(const double[:, ::1] X, Py_ssize_t r0, Py_ssize_t r1,
                         Py_ssize_t d, real_t* Xa) noexcept nogil:
    # Xa ((r1 - r0) x (d + 1), row-major) = the rows r0 .. r1 - 1 of X with a constant 1
    # appended (the column that takes _fill_flat_rows' offsets), in Xa's precision
    cdef Py_ssize_t i, u, d1 = d + 1
    for i in range(r1 - r0):
        for u in range(d):
            Xa[i * d1 + u] = <real_t>X[r0 + i, u]
        Xa[i * d1 + d] = 1


cdef inline double _sqnorm(const double[:, ::1] X, Py_ssize_t i, Py_ssize_t d) noexcept nogil:
    cdef Py_ssize_t u
    cdef double s = 0.0
    for u in range(d):
        s += X[i, u] * X[i, u]
    return s


cdef double _fill_flat_rows(const double[:, ::1] W, const double[:, ::1] centres,
                            Py_ssize_t M, Py_ssize_t q, Py_ssize_t d,
                            double* A) noexcept nogil:
    # A's rows (d + 1 wide): flat m's centre row [-2 c_m, ||c_m||^2] at m, its direction
    # t [F_mt, -F_mt . c_m] at M + t M + m.  Returns the largest ||c_m||^2.
    cdef Py_ssize_t m, t, u, d1 = d + 1
    cdef double v, cmax = 0.0
    cdef double* grow
    for m in range(M):
        v = 0.0
        for u in range(d):
            A[m * d1 + u] = -2.0 * centres[m, u]
            v += centres[m, u] * centres[m, u]
        A[m * d1 + d] = v
        if v > cmax:
            cmax = v
        for t in range(q):
            grow = A + (M + t * M + m) * d1
            v = 0.0
            for u in range(d):
                grow[u] = W[m * q + t, u]
                v += W[m * q + t, u] * centres[m, u]
            grow[d] = -v
    return cmax


def _flat_class_shape(Py_ssize_t n, Py_ssize_t d, const double[:, ::1] W,
                      const double[:, ::1] centres, Py_ssize_t q, Py_ssize_t k,
                      Py_ssize_t out_rows, Py_ssize_t out_cols, Py_ssize_t block):
    """``(M, C)``: the flats and classes of the class-score kernels' arguments, checked."""
    cdef Py_ssize_t mq = W.shape[0], M
    if q < 1 or mq % q != 0:
        raise ValueError(f"flat rows ({mq}) are not a multiple of q = {q}")
    M = mq // q
    if k < 1 or M % k != 0:
        raise ValueError(f"{M} flats are not a multiple of k = {k}")
    if W.shape[1] != d or centres.shape[1] != d:
        raise ValueError(f"flats have {W.shape[1]} / centres {centres.shape[1]} columns, the "
                         f"rows have {d}")
    if centres.shape[0] != M:
        raise ValueError(f"{centres.shape[0]} centres for {M} flats")
    if out_rows != n or out_cols != M // k:
        raise ValueError(f"out has shape ({out_rows}, {out_cols}), expected ({n}, {M // k})")
    if block < 1:
        raise ValueError(f"block = {block}: must be >= 1")
    return M, M // k


def flat_class_scores(const double[:, ::1] X,        # IN (n, d) rows
                      const double[:, ::1] W,        # IN (C*k*q, d) flat bases
                      const double[:, ::1] centres,  # IN (C*k, d) flat centres
                      Py_ssize_t q, Py_ssize_t k,
                      double[:, ::1] out,            # OUT (n, C) best score of each class
                      Py_ssize_t block=256):
    """``out[r, c] = max_j flat_scores[r, c*k + j]``: each class's score, minus the
    squared distance to the nearest of its k flats (a NaN score makes the class's
    NaN, as NumPy's max).  Prediction scores every row against every flat (letter:
    832 a restart), so the products are arranged for it (the training kernel's
    :func:`flat_scores_rows` keeps its own): the rows get a constant 1 appended and one
    dgemm a block of rows gives, against ``M (q + 1)`` precomputed rows,
    ``-2 x.c_m + ||c_m||^2`` and ``F_mt x - F_mt c_m`` -- the direction products
    direction-major (all flats' first direction, then their second...), so the
    score ``sum_t (F_mt x - F_mt c_m)^2 - ||x||^2 - (-2 x.c_m + ||c_m||^2)`` is a
    few contiguous, vectorised passes over the flats.  The scores equal
    :func:`flat_scores_rows`' up to rounding (the offsets enter the products).
    letter, one restart of 832 flats: 6.5 us a row, against 8.0 us with
    :func:`flat_scores_rows`' two dgemm, its offsets subtracted flat by flat in
    q-strided loops; the dgemm is now half of it, at the machine's peak rate."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], M, C
    cdef double* A = NULL
    M, C = _flat_class_shape(n, d, W, centres, q, k, out.shape[0], out.shape[1], block)
    if n == 0 or C == 0:
        return
    A = <double*>malloc(M * (q + 1) * (d + 1) * sizeof(double))
    if A == NULL:
        raise MemoryError("flat_class_scores: cannot allocate the flats' rows")
    try:
        with nogil:
            _fill_flat_rows(W, centres, M, q, d, A)
        _flat_class_scores_filled(X, A, M, C, q, k, out, block)
    finally:
        free(A)


cdef Py_ssize_t _checked_flats(const double[:, ::1] W, const double[:, ::1] centres,
                               Py_ssize_t q) except -1:
    # M: the flats of bases W (M q, d) and centres (M, d), their shapes checked
    cdef Py_ssize_t M, d = W.shape[1]
    if q < 1 or W.shape[0] % q != 0:
        raise ValueError(f"flat rows ({W.shape[0]}) are not a multiple of q = {q}")
    M = W.shape[0] // q
    if centres.shape[0] != M or centres.shape[1] != d:
        raise ValueError(f"centres have shape ({centres.shape[0]}, {centres.shape[1]}), "
                         f"expected ({M}, {d})")
    return M


def fill_flats_f64(const double[:, ::1] W,        # IN (M*q, d) flat bases
                   const double[:, ::1] centres,  # IN (M, d) flat centres
                   Py_ssize_t q,
                   double[::1] A):                # OUT M (q + 1) (d + 1) values
    """The rows :func:`flat_class_scores` computes from the flats before it scores any
    row (``_fill_flat_rows``), into ``A``, for :func:`flat_class_scores_filled`: a
    model that scores a few rows at a time keeps them.  usps's flats, 5 rows left open
    by the branch and bound: 190 us a restart, most of it this fill (135 000 values)
    and product blocks sized for 256 rows."""
    cdef Py_ssize_t M, d = W.shape[1]
    M = _checked_flats(W, centres, q)
    if A.shape[0] != M * (q + 1) * (d + 1):
        raise ValueError(f"A has {A.shape[0]} values, expected {M * (q + 1) * (d + 1)}")
    if M == 0:
        return
    with nogil:
        _fill_flat_rows(W, centres, M, q, d, &A[0])


def flat_class_scores_filled(const double[:, ::1] X,   # IN (n, d) rows
                             const double[::1] A,      # IN fill_flats_f64's rows
                             Py_ssize_t M, Py_ssize_t q, Py_ssize_t k,
                             double[:, ::1] out,       # OUT (n, M / k) class scores
                             Py_ssize_t block=256):
    """:func:`flat_class_scores` against the rows :func:`fill_flats_f64` filled for
    its M flats (k a class): the same numbers."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], C
    if q < 1 or k < 1 or M < 0 or M % k != 0:
        raise ValueError(f"{M} flats of q = {q} directions are not classes of k = {k}")
    if A.shape[0] != M * (q + 1) * (d + 1):
        raise ValueError(f"A has {A.shape[0]} values, expected {M * (q + 1) * (d + 1)} for "
                         f"{M} flats of q = {q} in {d} dimensions")
    C = M // k
    if out.shape[0] != n or out.shape[1] != C:
        raise ValueError(f"out has shape ({out.shape[0]}, {out.shape[1]}), expected "
                         f"({n}, {C})")
    if block < 1:
        raise ValueError(f"block = {block}: must be >= 1")
    if n == 0 or C == 0:
        return
    _flat_class_scores_filled(X, &A[0], M, C, q, k, out, block)


cdef _flat_class_scores_filled(const double[:, ::1] X, const double* A, Py_ssize_t M,
                               Py_ssize_t C, Py_ssize_t q, Py_ssize_t k,
                               double[:, ::1] out, Py_ssize_t block):
    # flat_class_scores' scoring, A filled: one dgemm a block of rows, then the scores.
    # The work arrays hold min(block, n) rows (the blocks, and so the bits, are those
    # of block rows)
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    cdef Py_ssize_t r0, r1, i, c, j, m, t, width, d1, nb
    cdef double best, v, xx
    cdef bint nan
    cdef double* Xa = NULL
    cdef double* G = NULL
    cdef double* score = NULL
    cdef double* grow
    cdef double* gt
    cdef const double* srow
    cdef int iw, ib, id1
    cdef double one = 1.0, zero = 0.0
    width = M * (q + 1)
    d1 = d + 1
    nb = min(block, n)
    # one allocation: the rows Xa (nb, d + 1), the products G (nb, width) and one
    # row's flat scores (M)
    Xa = <double*>malloc((nb * d1 + nb * width + M) * sizeof(double))
    if Xa == NULL:
        raise MemoryError("flat_class_scores: cannot allocate the product blocks")
    G = Xa + nb * d1
    score = G + nb * width
    iw = <int>width
    id1 = <int>d1
    try:
        with nogil:
            r0 = 0
            while r0 < n:
                r1 = min(r0 + block, n)
                ib = <int>(r1 - r0)
                _rows_with_one(X, r0, r1, d, Xa)
                # column-major: G^T (width x ib) = A (width x d1, stored d1 x width)^T Xa^T
                dgemm(b"T", b"N", &iw, &ib, &id1, &one, <double*>A, &id1, Xa, &id1, &zero,
                      G, &iw)
                for i in range(r1 - r0):
                    xx = _sqnorm(X, r0 + i, d)
                    grow = G + i * width
                    for m in range(M):
                        score[m] = -xx - grow[m]
                    for t in range(q):
                        gt = grow + M + t * M
                        for m in range(M):
                            score[m] += gt[m] * gt[m]
                    for c in range(C):
                        srow = score + c * k
                        best = srow[0]
                        nan = best != best
                        for j in range(1, k):
                            v = srow[j]
                            nan = nan or v != v
                            if v > best:
                                best = v
                        out[r0 + i, c] = NAN if nan else best
                r0 = r1
    finally:
        free(Xa)


# the squared magnitudes (||x|| + max ||c_m||)^2 whose scores the float path bounds:
# above 1e-20 an underflowing product (< 1.2e-38 each) is far below the bound's
# K 2^-24 1e-20; below 1e30 no product or sum of q + 2 terms overflows (3.4e38)
cdef double F32_MIN_SCALE = 1e-20
cdef double F32_MAX_SCALE = 1e30


def flats32_avx2(int path=0):
    """Whether the single-precision flats run AVX2's fused pass: ``path`` 0 and a CPU
    with AVX2 (1), else sgemm (0; ``path`` 1 asks for it)."""
    if path not in (0, 1):
        raise ValueError(f"path must be 0 or 1, got {path}")
    return lcoding_flats32_avx2(path)


def packed_flats_size(Py_ssize_t M, Py_ssize_t q, Py_ssize_t d, int avx2):
    """Floats of :func:`pack_flats_f32`'s array for M flats of q directions in d
    dimensions: with AVX2 groups of eight flats (zero past M), else sgemm's rows."""
    if avx2:
        return ((M + 7) // 8) * (q + 1) * (d + 1) * 8
    return M * (q + 1) * (d + 1)


def pack_flats_f32(const double[:, ::1] W,        # IN (M*q, d) flat bases
                   const double[:, ::1] centres,  # IN (M, d) flat centres
                   Py_ssize_t q, int avx2,
                   float[::1] packed):            # OUT packed_flats_size(M, q, d, avx2)
    """The flats' precomputed rows rounded to float into ``packed``, laid out for
    :func:`flat_class_scores_packed` (AVX2's groups of eight flats with ``avx2``,
    :func:`flats32_avx2`, else sgemm's rows); returns ``max_m ||c_m||`` (in double,
    for the bound).

    Why apart from the scoring: the flats are the model's, the rows the caller's.
    ``KQModel``'s branch and bound scores a few hundred rows a call against one
    class's flats, about 50 calls a chunk of rows (usps); repacking them every call
    cost 17 us a restart's 20 flats, 62 us four restarts' (usps, q = 12, d = 51),
    1.3 ms a 2007-row prediction.  The model packs each slice once and keeps it."""
    cdef Py_ssize_t M, d = W.shape[1], width, d1, groups, g, t, u, lane, m, i
    cdef double cmax = 0.0
    cdef double* A = NULL
    M = _checked_flats(W, centres, q)
    if avx2 and not lcoding_flats32_avx2(0):
        raise ValueError("flats packed for AVX2, which this CPU lacks")
    if packed.shape[0] != packed_flats_size(M, q, d, avx2):
        raise ValueError(f"packed has {packed.shape[0]} values, expected "
                         f"{packed_flats_size(M, q, d, avx2)}")
    if M == 0:
        return 0.0
    width = M * (q + 1)
    d1 = d + 1
    groups = (M + 7) // 8
    # the precomputed rows in double (as flat_class_scores), then rounded to float
    A = <double*>malloc(width * d1 * sizeof(double))
    if A == NULL:
        raise MemoryError("pack_flats_f32: cannot allocate the flats' rows")
    try:
        with nogil:
            cmax = sqrt(_fill_flat_rows(W, centres, M, q, d, A))
            if avx2:
                # packed[g][t][u][lane] = A's row of term t (0: the centre row) of flat
                # 8 g + lane, zero past M
                for g in range(groups):
                    for t in range(q + 1):
                        for u in range(d1):
                            for lane in range(8):
                                m = 8 * g + lane
                                packed[((g * (q + 1) + t) * d1 + u) * 8 + lane] = (
                                    <float>A[(t * M + m) * d1 + u] if m < M else 0.0)
            else:
                for i in range(width * d1):
                    packed[i] = <float>A[i]
    finally:
        free(A)
    return cmax


def flat_class_scores_f32(const double[:, ::1] X,        # IN (n, d) rows
                          const double[:, ::1] W,        # IN (C*k*q, d) flat bases
                          const double[:, ::1] centres,  # IN (C*k, d) flat centres
                          Py_ssize_t q, Py_ssize_t k,
                          double[:, ::1] out,            # OUT (n, C) class scores, approx.
                          double[::1] bound,             # OUT (n,) |out - exact| <= bound
                          Py_ssize_t block=256, int path=0):
    """:func:`flat_class_scores` in single precision, with a bound on every class
    score's distance to the exact one (and so to :func:`flat_class_scores`'): the
    flats packed (:func:`pack_flats_f32`), then scored
    (:func:`flat_class_scores_packed`) -- the same values as those two calls."""
    _flat_class_shape(X.shape[0], X.shape[1], W, centres, q, k, out.shape[0],
                      out.shape[1], block)
    cdef int avx2 = flats32_avx2(path)
    cdef Py_ssize_t size = packed_flats_size(centres.shape[0], q, X.shape[1], avx2)
    cdef float[::1] packed = cvarray(shape=(max(1, size),), itemsize=sizeof(float), format="f")
    cmax = pack_flats_f32(W, centres, q, avx2, packed[:size])
    flat_class_scores_packed(X, packed[:size], centres.shape[0], q, k, cmax, avx2, out, bound,
                             block)


def flat_class_scores_packed(const double[:, ::1] X,    # IN (n, d) rows
                             const float[::1] packed,   # IN pack_flats_f32's flats
                             Py_ssize_t M, Py_ssize_t q, Py_ssize_t k,
                             double cmax, int avx2,     # IN pack_flats_f32's
                             double[:, ::1] out,        # OUT (n, M / k) class scores
                             double[::1] bound,         # OUT (n,) |out - exact| <= bound
                             Py_ssize_t block=256):
    """The class scores of :func:`flat_class_scores` in single precision against flats
    packed by :func:`pack_flats_f32` (M flats, k a class), with a bound on every
    score's distance to the exact one: with AVX2 (``avx2``) the products and scores in
    one pass over groups of eight flats (``_flats32.h``, ``lcoding_flat_scores_fused``:
    letter's restart 3.2 -> 1.9 us a row, usps 4.0 -> 3.1, against sgemm and AVX2
    score passes), else the products by sgemm and the scores one float at a time.
    ``KQModel.predict_labels`` decides from these the rows the bound allows and leaves
    the others to the double path, so the labels do not change.

    Bound (u = 2^-24, flats with orthonormal rows -- the caller checks ``||F_mt||
    <= 1``; R = ||x||, c = ||c_m||): with x and the precomputed rows rounded to float,
    each product of d + 1 terms is off by at most (d + 4) u times the sum of its terms'
    magnitudes (Higham's gamma), so ``F_mt (x - c_m)`` by (d + 4) u (R + c) and
    ``-2 x.c_m + c^2`` by (d + 4) u (R + c)^2; squaring and summing the q + 2 terms
    in float adds (2 d + 9) u (R + c)^2 a direction and (q + 2)(2 + q) u (R + c)^2.
    So every flat's score, and each class's best, is within
        K (u + 2^-53) (R + max_m ||c_m||)^2,
        K = 2 (q (2 d + 9) + d + 5 + (q + 2)(q + 2))
    of the exact score -- twice the sum, and the double path's own rounding on top."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    cdef Py_ssize_t C, r0, r1, i, width, d1, Mp
    cdef double K, xx
    cdef float* scratch = NULL
    cdef float* Xa = NULL
    cdef float* G = NULL
    cdef float* score = NULL
    cdef float* xx32 = NULL
    cdef const float* A32 = NULL
    if q < 1 or k < 1 or M < 0 or M % k != 0:
        raise ValueError(f"{M} flats of q = {q} directions are not classes of k = {k}")
    if packed.shape[0] != packed_flats_size(M, q, d, avx2):
        raise ValueError(f"packed flats have {packed.shape[0]} values, expected "
                         f"{packed_flats_size(M, q, d, avx2)} for {M} flats of q = {q} "
                         f"in {d} dimensions")
    if not (cmax >= 0.0 and cmax < INFINITY):
        raise ValueError(f"cmax = {cmax}: must be finite and >= 0")
    C = M // k
    if out.shape[0] != n or out.shape[1] != C:
        raise ValueError(f"out has shape ({out.shape[0]}, {out.shape[1]}), expected "
                         f"({n}, {C})")
    if bound.shape[0] != n:
        raise ValueError(f"bound has shape ({bound.shape[0]},), expected ({n},)")
    if block < 1:
        raise ValueError(f"block = {block}: must be >= 1")
    if avx2 and not lcoding_flats32_avx2(0):
        raise ValueError("flats packed for AVX2, which this CPU lacks")
    if n == 0 or C == 0:
        return
    width = M * (q + 1)
    d1 = d + 1
    Mp = 8 * ((M + 7) // 8)
    K = _flats32_bound_factor(q, d)
    # scratch: the rows Xa (block, d + 1), with AVX2 the scores of a block (block, Mp),
    # else sgemm's products G (block, width) and one row's scores (M); the norms
    if avx2:
        scratch = <float*>malloc((block * d1 + block * Mp + block) * sizeof(float))
    else:
        scratch = <float*>malloc((block * d1 + block * width + M + block) * sizeof(float))
    if scratch == NULL:
        raise MemoryError("flat_class_scores_packed: cannot allocate the product blocks")
    Xa = scratch
    if avx2:
        score = Xa + block * d1
        xx32 = score + block * Mp
    else:
        G = Xa + block * d1
        score = G + block * width
        xx32 = score + M
    A32 = &packed[0]
    try:
        with nogil:
            r0 = 0
            while r0 < n:
                r1 = min(r0 + block, n)
                _rows_with_one(X, r0, r1, d, Xa)
                for i in range(r1 - r0):
                    xx = _sqnorm(X, r0 + i, d)
                    xx32[i] = <float>xx
                    bound[r0 + i] = _flats32_bound(K, xx, cmax)
                _packed_block_scores(A32, M, q, k, d1, avx2, Xa, xx32, r1 - r0, score, G,
                                     &out[r0, 0], C)
                r0 = r1
    finally:
        free(scratch)


cdef double _flats32_bound_factor(Py_ssize_t q, Py_ssize_t d) noexcept nogil:
    # K of flat_class_scores_packed's bound K (u + 2^-53) (R + cmax)^2, u included
    return 2.0 * (q * (2 * d + 9) + d + 5 + (q + 2) * (q + 2)) * (5.9604644775390625e-08
                                                                + 1.1102230246251565e-16)


cdef inline double _flats32_bound(double K, double xx, double cmax) noexcept nogil:
    # a row's bound from its squared norm xx (in double): within float's normal range
    # with room to spare (the bound is relative to R^2: values that underflow or
    # overflow in float would escape it), else infinite -- the row takes the double path
    cdef double R = sqrt(xx) + cmax
    return K * R * R if F32_MIN_SCALE <= R * R <= F32_MAX_SCALE else INFINITY


cdef void _packed_block_scores(const float* A32, Py_ssize_t M, Py_ssize_t q, Py_ssize_t k,
                               Py_ssize_t d1, int avx2, const float* Xa, const float* xx32,
                               Py_ssize_t nb, float* score, float* G, double* out,
                               Py_ssize_t out_stride) noexcept nogil:
    # The class scores (nb, M / k) of nb rows Xa (nb x d1 floats, the constant 1 last;
    # xx32 their squared norms) against M flats A32 packed by pack_flats_f32, row i at
    # out + i * out_stride; a row with a NaN score gets NaN class scores.  Scratch:
    # score (nb, Mp) with AVX2, else one row's M and sgemm's products G (nb, M (q + 1)).
    # A row's numbers do not depend on the others in the block (the fused pass keeps
    # each row's sums apart; sgemm's column by column).
    cdef Py_ssize_t i, c, C = M // k, width = M * (q + 1), Mp = 8 * ((M + 7) // 8)
    cdef int iw = <int>width, ib = <int>nb, id1 = <int>d1
    cdef float one = 1.0, zero = 0.0
    if avx2:
        lcoding_flat_scores_fused(A32, Mp // 8, q, d1, Xa, xx32, nb, score, Mp, avx2)
    else:
        # column-major: G^T (width x ib) = A32 (width x d1, stored d1 x width)^T Xa^T
        sgemm(b"T", b"N", &iw, &ib, &id1, &one, <float*>A32, &id1, <float*>Xa, &id1,
              &zero, G, &iw)
    for i in range(nb):
        if not avx2:
            lcoding_flat_scores_f32(G + i * width, M, q, xx32[i], score)
        if lcoding_class_max_f32(score + (i * Mp if avx2 else 0), C, k, out + i * out_stride,
                                 avx2):
            for c in range(C):
                out[i * out_stride + c] = NAN


cdef void _counting_sort(const int64_t* key, Py_ssize_t n, Py_ssize_t n_keys,
                         int64_t* counts, int64_t* order) noexcept nogil:
    # order (n) = 0 .. n - 1 by key (each in 0 .. n_keys - 1), stable; afterwards
    # counts[c] (n_keys + 1 entries) is the end of key c's run in order
    cdef Py_ssize_t i, c
    cdef int64_t pos
    for c in range(n_keys + 1):
        counts[c] = 0
    for i in range(n):
        counts[key[i] + 1] += 1
    for c in range(n_keys):
        counts[c + 1] += counts[c]
    for i in range(n):
        pos = counts[key[i]]
        order[pos] = i
        counts[key[i]] = pos + 1


cdef enum:
    BB_BLOCK = 256    # rows a block of bound_labels_packed's gathered rows


cdef inline double _bb_slack(double a, double b) noexcept nogil:
    # the rounding slack of sums in double that the branch and bound allows around
    # a and b: 1e-9 of their magnitudes
    return 1e-9 * (fabs(a) + fabs(b)) + 1e-300


cdef struct BoundScratch:
    # what bound_labels_packed's steps share: the chunk's rows in float, their norms,
    # and one block's rows, scores and class scores
    float* xa           # (n, d1) the rows, the constant 1 last
    float* xx32         # (n,) their squared norms in float ...
    double* xx          # ... and in double (the bounds)
    float* xa_blk       # (BB_BLOCK, d1) a block of gathered rows
    float* xx_blk       # (BB_BLOCK,)
    float* score        # AVX2: (BB_BLOCK, Mp) the flats' scores; else one row's M
    float* G            # without AVX2: sgemm's products (BB_BLOCK, M (q + 1))


cdef void _bb_score_rows(const BoundScratch* S, const int64_t* rows, Py_ssize_t m,
                         const float* A32, Py_ssize_t M, Py_ssize_t q, Py_ssize_t k,
                         Py_ssize_t d1, int avx2, double* out, double* row_bound,
                         double K, double cmax) noexcept nogil:
    # the class scores (m, M / k) of the chunk's rows rows[0 .. m - 1] against one
    # packed slice, block by block, and each row's bound for the slice: the rows
    # gathered into a block, or (rows NULL: rows 0 .. m - 1) read where they are
    cdef Py_ssize_t a, b, i, u, C = M // k
    cdef int64_t row
    cdef const float* xa
    cdef const float* xx32
    a = 0
    while a < m:
        b = min(a + BB_BLOCK, m)
        if rows == NULL:
            xa, xx32 = S.xa + a * d1, S.xx32 + a
            for i in range(b - a):
                row_bound[a + i] = _flats32_bound(K, S.xx[a + i], cmax)
        else:
            xa, xx32 = S.xa_blk, S.xx_blk
            for i in range(b - a):
                row = rows[a + i]
                for u in range(d1):
                    S.xa_blk[i * d1 + u] = S.xa[row * d1 + u]
                S.xx_blk[i] = S.xx32[row]
                row_bound[a + i] = _flats32_bound(K, S.xx[row], cmax)
        _packed_block_scores(A32, M, q, k, d1, avx2, xa, xx32, b - a, S.score, S.G,
                             out + a * C, C)
        a = b


def bound_labels_packed(const double[:, ::1] X,      # IN (n, d) preprocessed rows
                        const float[::1] packed,     # IN the slices below, each packed by
                        const int64_t[::1] offsets,  #    pack_flats_f32: slice s is
                        const double[::1] cmaxes,    #    packed[offsets[s]:offsets[s + 1]],
                                                     #    its largest centre norm cmaxes[s]
                        Py_ssize_t nr_class, Py_ssize_t k, Py_ssize_t q,
                        Py_ssize_t n_restarts, int avx2,
                        int64_t[::1] winners):       # OUT (n,) class index; -1: left open
    """The affine flats' labels by branch and bound over classes and restarts in single
    precision (``KQModel._bound_labels``, which documents the rule), in one call for a
    chunk of rows.  Returns ``(nan, scored)``: ``nan`` 1 when a score was NaN (then
    ``winners`` means nothing and the caller takes the checked path), and the number
    of class-and-restart scores it took (rows x classes x restarts: at most ``n C W``).

    The slices, for C classes, W restarts and k flats a class: slice 0 restart 0 of
    every class (C k flats); for W > 1 then slice 1 + c class c's restarts 1 .. W - 1
    side by side ((W - 1) k flats), and slice 1 + C + c (W - 1) + r - 1 its restart r
    (k flats).  Every score is within its row's bound of the exact one
    (:func:`flat_class_scores_packed`, the same kernel and bound on the same rows), and
    the rule adds the bounds up: a decided row's class is the exact mean's argmax.

    Why one call: in Python the rule called the kernel ~50 times a chunk (a call per
    class and restart on the rows where the class is in the running), with a copy of
    those rows each time (usps's winner, paired runs: 8.7 -> 7.8 us a row)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], C = nr_class, W = n_restarts
    cdef Py_ssize_t d1 = d + 1, n_slices, s, M, Mmax, i, j, c, r, a, b
    cdef Py_ssize_t n_pairs = 0, kept
    cdef int64_t row, scored = 0
    cdef int nan = 0
    cdef double K, best, maxabs, low, rival, h
    cdef BoundScratch S
    if nr_class < 1 or k < 1 or q < 1 or n_restarts < 1:
        raise ValueError(f"nr_class = {nr_class}, k = {k}, q = {q}, n_restarts = "
                         f"{n_restarts}: each must be >= 1")
    n_slices = 1 + (C + C * (W - 1) if W > 1 else 0)
    if offsets.shape[0] != n_slices + 1 or cmaxes.shape[0] != n_slices:
        raise ValueError(f"{offsets.shape[0]} offsets and {cmaxes.shape[0]} cmaxes, "
                         f"expected {n_slices + 1} and {n_slices} for {C} classes and "
                         f"{W} restarts")
    if avx2 and not lcoding_flats32_avx2(0):
        raise ValueError("flats packed for AVX2, which this CPU lacks")
    if offsets[0] != 0 or offsets[n_slices] != packed.shape[0]:
        raise ValueError(f"offsets run from {offsets[0]} to {offsets[n_slices]}, the "
                         f"packed flats from 0 to {packed.shape[0]}")
    Mmax = 0
    for s in range(n_slices):
        M = C * k if s == 0 else ((W - 1) * k if s <= C else k)
        Mmax = max(Mmax, M)
        if offsets[s + 1] - offsets[s] != packed_flats_size(M, q, d, avx2):
            raise ValueError(f"slice {s} has {offsets[s + 1] - offsets[s]} values, "
                             f"expected {packed_flats_size(M, q, d, avx2)} for {M} flats")
        if not (cmaxes[s] >= 0.0 and cmaxes[s] < INFINITY):
            raise ValueError(f"cmaxes[{s}] = {cmaxes[s]}: must be finite and >= 0")
    if winners.shape[0] != n:
        raise ValueError(f"winners has {winners.shape[0]} entries, X {n} rows")
    if n == 0:
        return 0, 0
    K = _flats32_bound_factor(q, d)
    cdef Py_ssize_t Mp = 8 * ((Mmax + 7) // 8), width = Mmax * (q + 1)
    cdef Py_ssize_t n_cols = max(C, W - 1)
    cdef double* part = NULL         # (n, C) restart 0's class scores
    cdef double* bound0 = NULL       # (n,) their bounds
    cdef int64_t* lead = NULL        # (n,) the leading class after restart 0
    cdef double* lead_total = NULL   # (n,) its sum over the restarts ...
    cdef double* lead_err = NULL     # ... and that sum's bound
    cdef double* floor_ = NULL       # (n,) lead_total - lead_err
    cdef double* row_bound = NULL    # (n (C - 1),) a slice's bounds of the rows it scores
    cdef int64_t* order = NULL       # (n,) the rows by their lead
    cdef int64_t* counts = NULL      # (C + 1,) rows a class
    cdef int64_t* pair_row = NULL    # (n (C - 1),) (row, class) pairs in the running,
    cdef int64_t* pair_class = NULL  #    by class, rows ascending
    cdef double* pair_sum = NULL
    cdef double* pair_err = NULL
    cdef double* scores = NULL       # (n, max(C, W - 1)) a slice's class scores
    cdef double* thr_row = NULL      # (n,) restart 0's score a class needs to stay
    cdef double* tot = NULL          # (n, C) the open rows' totals ...
    cdef double* bnd = NULL          # ... and their bounds
    cdef char* is_open = NULL        # (n,) rows with classes left after the last restart
    cdef Py_ssize_t npair_max = n * max(C - 1, 1)
    S.xa = <float*>malloc(n * d1 * sizeof(float))
    S.xx32 = <float*>malloc(n * sizeof(float))
    S.xx = <double*>malloc(n * sizeof(double))
    S.xa_blk = <float*>malloc(BB_BLOCK * d1 * sizeof(float))
    S.xx_blk = <float*>malloc(BB_BLOCK * sizeof(float))
    S.score = <float*>malloc((BB_BLOCK * Mp if avx2 else Mmax) * sizeof(float))
    S.G = <float*>malloc((1 if avx2 else BB_BLOCK * width) * sizeof(float))
    part = <double*>malloc(n * C * sizeof(double))
    bound0 = <double*>malloc(n * sizeof(double))
    lead = <int64_t*>malloc(n * sizeof(int64_t))
    lead_total = <double*>malloc(n * sizeof(double))
    lead_err = <double*>malloc(n * sizeof(double))
    floor_ = <double*>malloc(n * sizeof(double))
    row_bound = <double*>malloc(npair_max * sizeof(double))
    order = <int64_t*>malloc(n * sizeof(int64_t))
    counts = <int64_t*>malloc((C + 1) * sizeof(int64_t))
    pair_row = <int64_t*>malloc(npair_max * sizeof(int64_t))
    pair_class = <int64_t*>malloc(npair_max * sizeof(int64_t))
    pair_sum = <double*>malloc(npair_max * sizeof(double))
    pair_err = <double*>malloc(npair_max * sizeof(double))
    scores = <double*>malloc(max(n * n_cols, npair_max) * sizeof(double))
    thr_row = <double*>malloc(n * sizeof(double))
    tot = <double*>malloc(n * C * sizeof(double))
    bnd = <double*>malloc(n * C * sizeof(double))
    is_open = <char*>malloc(n * sizeof(char))
    try:
        if (S.xa == NULL or S.xx32 == NULL or S.xx == NULL or S.xa_blk == NULL
                or S.xx_blk == NULL or S.score == NULL or S.G == NULL or part == NULL
                or bound0 == NULL or lead == NULL or lead_total == NULL or lead_err == NULL
                or floor_ == NULL or row_bound == NULL or order == NULL or counts == NULL
                or pair_row == NULL or pair_class == NULL or pair_sum == NULL
                or pair_err == NULL or scores == NULL or thr_row == NULL or tot == NULL
                or bnd == NULL or is_open == NULL):
            raise MemoryError(f"bound_labels_packed: cannot allocate the work arrays of "
                              f"{n} rows x {C} classes")
        with nogil:
            # the rows in float (as flat_class_scores_packed rounds them) and their norms
            _rows_with_one(X, 0, n, d, S.xa)
            for i in range(n):
                S.xx[i] = _sqnorm(X, i, d)
                S.xx32[i] = <float>S.xx[i]
            # 1. restart 0, every class
            _bb_score_rows(&S, NULL, n, &packed[offsets[0]], C * k, q, k, d1, avx2, part,
                           bound0, K, cmaxes[0])
            scored += n * C
            for i in range(n * C):
                if part[i] != part[i]:
                    nan = 1
            if not nan:
                for i in range(n):
                    best = part[i * C]
                    lead[i] = 0
                    for c in range(1, C):
                        if part[i * C + c] > best:
                            best = part[i * C + c]
                            lead[i] = c
                    lead_total[i] = best
                    lead_err[i] = bound0[i]
            # 2. each row's lead: its restarts 1 .. W - 1, rows grouped by lead
            if not nan and W > 1:
                _counting_sort(lead, n, C, counts, order)   # rows ascending in a class
                a = 0
                for c in range(C):
                    b = counts[c]               # now the end of class c's rows
                    if b > a:
                        _bb_score_rows(&S, order + a, b - a, &packed[offsets[1 + c]],
                                       (W - 1) * k, q, k, d1, avx2, scores, row_bound, K,
                                       cmaxes[1 + c])
                        scored += (b - a) * (W - 1)
                        for j in range(b - a):
                            row = order[a + j]
                            for r in range(W - 1):      # in restart order
                                lead_total[row] += scores[j * (W - 1) + r]
                            lead_err[row] += (W - 1) * row_bound[j]
                    a = b
                for i in range(n):
                    if lead_total[i] != lead_total[i]:
                        nan = 1
            if not nan:
                # 3. the classes still in the running: their restart 0 score plus its
                # bound (later restarts add at most 0) reaches the lead's floor
                # (the slack here: the row's largest magnitude for every class)
                n_pairs = 0
                for i in range(n):
                    floor_[i] = lead_total[i] - lead_err[i]
                    maxabs = 0.0
                    for j in range(C):
                        maxabs = max(maxabs, fabs(part[i * C + j]))
                    thr_row[i] = floor_[i] - bound0[i] - _bb_slack(maxabs, lead_total[i])
                # (every comparison here is written so that a NaN -- an infinite
                # bound plus a score that overflowed in float -- keeps the class in
                # the running, and so leaves the row to the double path; the rows are
                # beyond float's range, R ~ 1e19 and up)
                for c in range(C):
                    for i in range(n):
                        if c != lead[i] and not (part[i * C + c] < thr_row[i]):
                            pair_row[n_pairs] = i
                            pair_class[n_pairs] = c
                            pair_sum[n_pairs] = part[i * C + c]
                            pair_err[n_pairs] = bound0[i]
                            n_pairs += 1
                for r in range(1, W):
                    if n_pairs == 0 or nan:
                        break
                    a = 0
                    while a < n_pairs:          # runs of one class
                        c = pair_class[a]
                        b = a
                        while b < n_pairs and pair_class[b] == c:
                            b += 1
                        s = 1 + C + c * (W - 1) + r - 1
                        _bb_score_rows(&S, pair_row + a, b - a, &packed[offsets[s]], k, q,
                                       k, d1, avx2, scores, row_bound, K, cmaxes[s])
                        scored += b - a
                        for j in range(b - a):
                            pair_sum[a + j] += scores[j]
                            pair_err[a + j] += row_bound[j]
                        a = b
                    kept = 0
                    for j in range(n_pairs):
                        if pair_sum[j] != pair_sum[j]:
                            nan = 1
                        row = pair_row[j]
                        if not (pair_sum[j] + pair_err[j] + _bb_slack(pair_sum[j], lead_total[row])
                                < floor_[row]):
                            pair_row[kept] = row
                            pair_class[kept] = pair_class[j]
                            pair_sum[kept] = pair_sum[j]
                            pair_err[kept] = pair_err[j]
                            kept += 1
                    n_pairs = kept
            if not nan:
                for i in range(n):
                    winners[i] = lead[i]
                # 4. rows with classes left after the last restart: the best total
                # wins if its low end clears every other's high end, else left open
                for i in range(n):
                    is_open[i] = 0
                for j in range(n_pairs):
                    row = pair_row[j]
                    if not is_open[row]:
                        is_open[row] = 1
                        for c in range(C):
                            tot[row * C + c] = -INFINITY
                            bnd[row * C + c] = 0.0
                    tot[row * C + pair_class[j]] = pair_sum[j]
                    bnd[row * C + pair_class[j]] = pair_err[j]
                for row in range(n):
                    if not is_open[row]:
                        continue
                    tot[row * C + lead[row]] = lead_total[row]
                    bnd[row * C + lead[row]] = lead_err[row]
                    i = 0
                    for c in range(1, C):
                        if tot[row * C + c] > tot[row * C + i]:
                            i = c
                    low = tot[row * C + i] - bnd[row * C + i]
                    rival = -INFINITY
                    for c in range(C):
                        if c != i:
                            h = tot[row * C + c] + bnd[row * C + c]
                            if h != h:          # an infinite bound on an overflow
                                h = INFINITY
                            if h > rival:
                                rival = h
                    winners[row] = i if low - _bb_slack(tot[row * C + i], rival) > rival else -1
    finally:
        free(S.xa); free(S.xx32); free(S.xx); free(S.xa_blk); free(S.xx_blk); free(S.score)
        free(S.G); free(part); free(bound0); free(lead); free(lead_total); free(lead_err)
        free(floor_); free(row_bound); free(order); free(counts); free(pair_row)
        free(pair_class); free(pair_sum); free(pair_err); free(scores); free(thr_row)
        free(tot); free(bnd); free(is_open)
    return nan, scored


cdef void flat_scores_rows(const double* X, Py_ssize_t n, Py_ssize_t d, const double* W,
                           const double* centres, Py_ssize_t M, Py_ssize_t q, double* out,
                           Py_ssize_t block, double* P, double* Q, double* B,
                           double* cc) noexcept nogil:
    # flat_scores on raw arrays: X (n, d), W (M*q, d), centres (M, d), out (n, M), all
    # row-major; scratch P (block*M*q), Q (block*M), B (M*q), cc (M).
    cdef Py_ssize_t mq = M * q, r0, r1, i, m, t, u
    cdef int imq = <int>mq, idd = <int>d, iM = <int>M, ib
    cdef double one = 1.0, zero = 0.0, s, v, xx
    cdef const double* prow
    cdef const double* xrow
    for m in range(M):            # B = F_m c_m, cc = ||c_m||^2
        s = 0.0
        for u in range(d):
            s += centres[m * d + u] * centres[m * d + u]
        cc[m] = s
        for t in range(m * q, m * q + q):
            s = 0.0
            for u in range(d):
                s += W[t * d + u] * centres[m * d + u]
            B[t] = s
    r0 = 0
    while r0 < n:
        r1 = min(r0 + block, n)
        ib = <int>(r1 - r0)
        if d > 0:
            dgemm(b"T", b"N", &imq, &ib, &idd, &one, <double*>W, &idd,
                  <double*>&X[r0 * d], &idd, &zero, P, &imq)
            dgemm(b"T", b"N", &iM, &ib, &idd, &one, <double*>centres, &idd,
                  <double*>&X[r0 * d], &idd, &zero, Q, &iM)
        for i in range(r1 - r0):
            xrow = X + (r0 + i) * d
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
                out[(r0 + i) * M + m] = s
        r0 = r1


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
    cdef double one = 1.0, zero = 0.0, z, best
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


# ------------------------------------------------------------------ k q-flats
# Representational k q-flats of every class (Szlam & Sapiro 2009, eq. 1 with affine
# flats): class c's rows are clustered into k flats {c_m + span(F_m)}, F_m q x d with
# orthonormal rows, minimising sum_x min_m dist(x, flat_m)^2, where
#     dist(x, flat_m)^2 = ||x - c_m||^2 - ||F_m (x - c_m)||^2.
# Seeding (k-means++ on flats): seed j of class c is row floor(u n_c) for j = 0 (u the
# j-th draw of the class), else the row where u times the class's summed squared
# distances to its nearest seed flat so far falls in their running sum; the seed's
# flat is the best fit (mean, top-q principal directions) of its
# max(q + 1, ceil(n_c / k)) nearest rows (ties: lower row first).
# Lloyd steps: every row to its nearest flat (first on ties; in the first step, the
# nearest seed flat by the seeding's distances), every non-empty cluster whose members
# changed refitted (an empty one keeps its flat), until the assignment repeats or
# n_steps steps.  A best-fit flat: the cluster's mean and the eigenvectors
# of the q largest eigenvalues of its centred scatter (lcoding_top_eigh of
# _small_eigh.h up to SMALL_EIGH_MAX_DIM dimensions, LAPACK dsyevr above), each scaled
# so its largest-magnitude entry is positive.  kq.k_flats is the slow NumPy reference.
#
# Why a kernel: letter's default (26 classes x 32 flats a restart) solves ~2 500
# 17 x 17 eigenproblems a restart; in NumPy, with the stacked problems and the small
# array calls around them, a restart of 10 Lloyd steps took 0.21 s, here 0.12 s
# (about half of it in LAPACK's dsyev); at the 3 steps kq.init_flats runs, ~0.09 s.
# The package's own eigensolver (_small_eigh.h) then took letter's default training
# (5 restarts) from 0.68 to 0.53 s, paired runs (25-37 -> 11-15 us a 17 x 17 scatter);
# its eigenpairs side by side (12.5 -> 5 us), the seeds' nearest rows by a heap, the
# first Lloyd step from the seeding's distances, 2 steps, not 3, and the constant
# coordinate left out (kq._train_kq) to ~0.28 s (alternating runs, median of 8 fits:
# 0.43-0.52 -> 0.27-0.32 s).

cdef enum:
    SMALL_EIGH_MAX_DIM = 64

ctypedef double* double_ptr
ctypedef int64_t* int64_ptr


cdef inline bint _before(const double* key, int64_t a, int64_t b) noexcept nogil:
    # row a before row b: smaller key, the lower row on ties (a stable sort's order)
    return key[a] < key[b] or (key[a] == key[b] and a < b)


cdef inline void _sift_down(const double* key, int64_t* heap, Py_ssize_t size,
                            Py_ssize_t at) noexcept nogil:
    # restore the max-heap (the row last in _before's order at the root) below at
    cdef Py_ssize_t child
    cdef int64_t row = heap[at]
    while True:
        child = 2 * at + 1
        if child >= size:
            break
        if child + 1 < size and _before(key, heap[child], heap[child + 1]):
            child += 1
        if not _before(key, row, heap[child]):
            break
        heap[at] = heap[child]
        at = child
    heap[at] = row


cdef void _smallest_first(const double* key, int64_t* idx, Py_ssize_t n,
                          Py_ssize_t size) noexcept nogil:
    # idx[0:size] = the size rows first in _before's order (the keys are distinct
    # under it), in that order; all n rows in row order when size >= n.  A max-heap
    # of the size best so far (letter's seeds: 20 of ~615 rows): most rows cost one
    # comparison with its root, a branch mostly taken one way, where quickselect's
    # partitions branched on every key with no pattern to predict (its share of
    # letter's kernel, perf: ~6 %)
    cdef Py_ssize_t i, end
    cdef int64_t tmp
    if size >= n:
        for i in range(n):
            idx[i] = i
        return
    if size <= 0:
        return
    for i in range(size):
        idx[i] = i
    for i in range(size // 2 - 1, -1, -1):
        _sift_down(key, idx, size, i)
    for i in range(size, n):
        if _before(key, i, idx[0]):
            idx[0] = i
            _sift_down(key, idx, size, 0)
    for end in range(size - 1, 0, -1):      # heapsort: ascending
        tmp = idx[0]
        idx[0] = idx[end]
        idx[end] = tmp
        _sift_down(key, idx, end, 0)


cdef struct EigWork:
    double* w           # (d) eigenvalues
    double* z           # (d*d) eigenvectors, column-major
    int small           # 1: lcoding_top_eigh (d <= SMALL_EIGH_MAX_DIM), 0: dsyevr
    int* isuppz         # (2*d)
    double* work
    int* iwork
    int lwork
    int liwork


cdef int _fit_flat(double* G, Py_ssize_t count, Py_ssize_t d, Py_ssize_t q, double* S,
                   EigWork* ew, double* mean, double* F) noexcept nogil:
    # best-fit flat of the count rows G (count, d) (centred in place): mean (d) and
    # F (q, d), the top-q principal directions, largest first; 0, or the eigensolver's
    # failure code (lcoding_top_eigh's, or LAPACK dsyevr's info)
    cdef Py_ssize_t r, u, t, col
    cdef int n_ = <int>d, k_ = <int>count, il = <int>(d - q + 1), iu = <int>d, found = 0
    cdef int info = 0
    cdef double one = 1.0, zero = 0.0, vl = 0.0, vu = 0.0, abstol, inv
    for u in range(d):
        mean[u] = 0.0
    for r in range(count):
        for u in range(d):
            mean[u] += G[r * d + u]
    inv = 1.0 / <double>count
    for u in range(d):
        mean[u] *= inv
    for r in range(count):
        for u in range(d):
            G[r * d + u] -= mean[u]
    # S = G^T G: column-major G^T is (d x count) with leading dimension d
    dsyrk(b"U", b"N", &n_, &k_, &one, G, &n_, &zero, S, &n_)
    if ew.small:
        # small scatters: the q wanted pairs by lcoding_top_eigh (see _small_eigh.h),
        # rows of F directly; the scatter is full (dsyrk filled the upper triangle of
        # the column-major S, the lower of the row-major one the solver reads)
        for u in range(d):
            for r in range(u):
                S[r * d + u] = S[u * d + r]
        info = lcoding_top_eigh(n_, <int>q, S, ew.w, F, ew.work, ew.iwork)
        if info != 0:
            return info
        for t in range(q):
            _positive_largest(&F[t * d], d)
        return 0
    abstol = 2.0 * dlamch(b"S")
    dsyevr(b"V", b"I", b"U", &n_, S, &n_, &vl, &vu, &il, &iu, &abstol, &found, ew.w,
           ew.z, &n_, ew.isuppz, ew.work, &ew.lwork, ew.iwork, &ew.liwork, &info)
    if info != 0:
        return info
    for t in range(q):                     # ascending columns: the largest is the last
        col = found - 1 - t
        for u in range(d):
            F[t * d + u] = ew.z[col * d + u]
        _positive_largest(&F[t * d], d)
    return 0


def top_eigenpairs(const double[:, ::1] symmetric,  # IN (d, d) symmetric, both triangles
                   double[::1] values,               # OUT (q) the q largest eigenvalues
                   double[:, ::1] vectors,           # OUT (q, d) their orthonormal eigenvectors
                   int path=0):
    """The best-fit flats' eigensolver (lcoding_top_eigh, _small_eigh.h) on one
    matrix, largest first, signs as it leaves them: 0, 1 when inverse iteration
    broke down, 2 for a non-finite entry.  ``path`` 0: the AVX2 build where the CPU
    has it, 1: the baseline build (the same bits).  (The flats call it in the
    kernel; this is its door for the tests.)"""
    cdef int d = <int>symmetric.shape[0], q = <int>values.shape[0], info
    if path not in (0, 1):
        raise ValueError(f"path must be 0 or 1, got {path}")
    if symmetric.shape[1] != d or d < 1 or d > SMALL_EIGH_MAX_DIM:
        raise ValueError(f"symmetric must be square, 1 to {SMALL_EIGH_MAX_DIM} rows; "
                         f"got ({symmetric.shape[0]}, {symmetric.shape[1]})")
    if q < 1 or q > d or vectors.shape[0] != q or vectors.shape[1] != d:
        raise ValueError(f"values ({q}) and vectors ({vectors.shape[0]}, {vectors.shape[1]}) "
                         f"must hold 1 <= q <= {d} pairs")
    cdef Py_ssize_t i, j
    cdef double* A = <double*>malloc((d * d + lcoding_top_eigh_work(d)) * sizeof(double))
    cdef int* iwork = <int*>malloc(d * sizeof(int))
    if A == NULL or iwork == NULL:
        free(A)
        free(iwork)
        raise MemoryError("top_eigenpairs: no memory for the work arrays")
    for i in range(d):
        for j in range(d):
            A[i * d + j] = symmetric[i, j]
    with nogil:
        info = lcoding_top_eigh_path(d, q, A, &values[0], &vectors[0, 0], A + d * d, iwork,
                                     path)
    free(A)
    free(iwork)
    return info


cdef inline void _positive_largest(double* v, Py_ssize_t d) noexcept nogil:
    # the sign convention of every basis row: its largest-magnitude entry (the first
    # on ties) positive
    cdef Py_ssize_t u, top = 0
    cdef double big = -1.0, a
    for u in range(d):
        a = v[u] if v[u] >= 0 else -v[u]
        if a > big:
            big = a
            top = u
    if v[top] < 0:
        for u in range(d):
            v[u] = -v[u]


cdef void _rows_dot(const double* XT, Py_ssize_t n_c, Py_ssize_t d, const double* v,
                    double* out) noexcept nogil:
    # out[i] = x_i . v for the rows stored feature-major (XT: d x n_c), an axpy per
    # feature: the loop over rows is contiguous and vectorises, where one short dot
    # per row (dgemv on the row-major rows) or dgemm's packing of a one-column
    # product is several times slower on letter's 17 dimensions (the seed row's
    # distances to its class)
    cdef Py_ssize_t i, u
    cdef double w
    cdef const double* col
    for i in range(n_c):
        out[i] = 0.0
    for u in range(d):
        w = v[u]
        col = XT + u * n_c
        for i in range(n_c):
            out[i] += w * col[i]


cdef void _flat_distances(const double* Xc, const double* sq, Py_ssize_t n_c,
                          Py_ssize_t d, Py_ssize_t q, const double* F,
                          const double* centre, double* A, double* P,
                          double* out) noexcept nogil:
    # out[i] = max(||x_i - c||^2 - ||F (x_i - c)||^2, 0), the squared distance of row i
    # (Xc: n_c x d, row-major) to the flat (c, F), as ||x||^2 - 2 x.c + ||c||^2 -
    # sum_t (F_t x - F_t c)^2 (the form of flat_scores), the products P (n_c, q + 1) =
    # Xc A^T by one dgemm, A's rows the centre and F's q rows.  q + 1 feature-major
    # axpy passes over the rows (a flat at a time) took 1.3x as long on MNIST's 12 of
    # 51 dimensions -- they stream the class's rows 13 times a seed, dgemm once, in
    # cache-sized blocks -- and 1.07x on letter's 4 of 17; the same at 1 of 3.  Not
    # flat_scores_rows with one flat: its two dgemm (the centre's a single row) made
    # MNIST's KQMetricsClassifier() fit 1.06x as long (5.9 against 5.5 s)
    cdef Py_ssize_t i, t, u, w = q + 1
    cdef int iw = <int>w, in_c = <int>n_c, idd = <int>d
    cdef double one = 1.0, zero = 0.0, cc = 0.0, v
    cdef const double* prow
    for u in range(d):
        A[u] = centre[u]
        cc += centre[u] * centre[u]
    for t in range(q * d):
        A[d + t] = F[t]
    # column-major: P^T (w x n_c) = A (w x d, stored d x w) ^T . Xc^T (d x n_c)
    dgemm(b"T", b"N", &iw, &in_c, &idd, &one, A, &idd, <double*>Xc, &idd, &zero, P, &iw)
    for t in range(q):                    # b_t = F_t . c, into A's first row
        v = 0.0
        for u in range(d):
            v += F[t * d + u] * centre[u]
        A[t] = v
    for i in range(n_c):
        prow = P + i * w
        v = sq[i] - 2.0 * prow[0] + cc
        for t in range(q):
            v -= (prow[1 + t] - A[t]) * (prow[1 + t] - A[t])
        out[i] = v if v > 0.0 else 0.0


cdef int _fit_neighbourhood(const double* Xc, const double* XT, Py_ssize_t n_c, Py_ssize_t d,
                            Py_ssize_t q, const double* sq, Py_ssize_t seed, Py_ssize_t size,
                            double* key, int64_t* idx, double* G, double* S, EigWork* ew,
                            double* centre, double* F) noexcept nogil:
    # the best-fit flat of the size rows nearest to row seed (ties: the lower row);
    # key holds their squared distances to the seed row on return
    cdef Py_ssize_t i, a, u
    _rows_dot(XT, n_c, d, &Xc[seed * d], key)
    for i in range(n_c):
        key[i] = sq[i] - 2.0 * key[i] + sq[seed]
    _smallest_first(key, idx, n_c, size)
    for a in range(size):
        for u in range(d):
            G[a * d + u] = Xc[idx[a] * d + u]
    return _fit_flat(G, size, d, q, S, ew, centre, F)


cdef int _refit_clusters(const double* Xc, Py_ssize_t n_c, Py_ssize_t d, Py_ssize_t k,
                         Py_ssize_t q, const int64_t* assign, const int64_t* changed,
                         int64_t* counts, int64_t* order, double* G, double* S, EigWork* ew,
                         double* Cc, double* Fc) noexcept nogil:
    # refit every non-empty cluster m with changed[m] to its members (in row order);
    # an empty one keeps its flat.  The LAPACK info of a failure, else 0.
    cdef Py_ssize_t m, a, u, r0, r1
    cdef int info
    _counting_sort(assign, n_c, k, counts, order)   # members in row order
    for m in range(k):                   # counts[m]: the end of cluster m
        r0 = counts[m - 1] if m > 0 else 0
        r1 = counts[m]
        if not changed[m] or r1 == r0:
            continue
        for a in range(r1 - r0):
            for u in range(d):
                G[a * d + u] = Xc[order[r0 + a] * d + u]
        info = _fit_flat(G, r1 - r0, d, q, S, ew, &Cc[m * d], &Fc[m * q * d])
        if info != 0:
            return info
    return 0


def k_flats_classes(const double[:, ::1] X,         # IN (n, d) rows grouped by class
                    const int64_t[::1] starts,       # IN (C+1) class c: rows starts[c]:starts[c+1]
                    const double[:, ::1] uniforms,   # IN (C, k) the seeding's draws in [0, 1)
                    Py_ssize_t q,
                    Py_ssize_t n_steps,              # at most this many Lloyd steps
                    double[:, ::1] F,                # OUT (C*k*q, d) flat bases
                    double[:, ::1] centres,          # OUT (C*k, d) flat centres
                    int64_t[::1] steps,              # OUT (C) Lloyd assignments computed
                    const unsigned char[::1] stop=None):
    """The k q-flats of every class (see the header above): 0, or 1 when stopped."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], C = starts.shape[0] - 1
    cdef Py_ssize_t k = uniforms.shape[1], n_max = 0, c, size, block = 256
    cdef Py_ssize_t i, j, m, u, n_c, seed, drawn, step, best
    cdef const double* Xc
    cdef double* Fc
    cdef double* Cc
    cdef double total, run, target, s, v, bestv
    cdef int info = 0, status = 0
    cdef bint moved
    cdef const unsigned char* flag = stop_pointer(stop)
    cdef EigWork ew
    # the work arrays, carved out of three blocks (see the allocation below)
    cdef double_ptr S, sq, nearest, key, G, XT, scores, P, Q, B, cc, A
    cdef int64_ptr idx, assign, order, counts, changed
    cdef double* dbl = NULL
    cdef int64_t* i64 = NULL
    cdef int* i32 = NULL
    cdef Py_ssize_t n_dbl, n_i64, n_i32
    if C < 0 or starts.shape[0] < 1:
        raise ValueError("starts must hold the C + 1 class boundaries")
    if uniforms.shape[0] != C:
        raise ValueError(f"uniforms has {uniforms.shape[0]} rows for {C} classes")
    if k < 1 or q < 1 or q > d:
        raise ValueError(f"k = {k}, q = {q}: need k >= 1 and 1 <= q <= d = {d}")
    if F.shape[0] != C * k * q or F.shape[1] != d:
        raise ValueError(f"F has shape ({F.shape[0]}, {F.shape[1]}), expected ({C * k * q}, {d})")
    if centres.shape[0] != C * k or centres.shape[1] != d:
        raise ValueError(f"centres has shape ({centres.shape[0]}, {centres.shape[1]}), "
                         f"expected ({C * k}, {d})")
    if steps.shape[0] != C:
        raise ValueError(f"steps has {steps.shape[0]} entries for {C} classes")
    if starts[0] != 0 or starts[C] != n:
        raise ValueError(f"starts must run from 0 to n = {n}")
    for c in range(C):
        if starts[c + 1] <= starts[c]:
            raise ValueError(f"class {c} has no rows")
        n_max = max(n_max, starts[c + 1] - starts[c])
    if C == 0:
        return 0
    # small scatters: lcoding_top_eigh (lcoding_top_eigh_work(d) doubles, d ints of
    # work); larger ones dsyevr, workspaces above its optima ((block + 6) d, 10 d)
    ew.small = d <= SMALL_EIGH_MAX_DIM
    ew.lwork = <int>max(70 * d, lcoding_top_eigh_work(d))
    ew.liwork = <int>(10 * d)
    n_dbl = (d * d + d + d * q + ew.lwork + 3 * n_max + 2 * n_max * d
             + n_max * max(k, q + 1) + block * k * q + block * k + k * q + k + (q + 1) * d)
    n_i64 = 3 * n_max + 2 * k + 1
    n_i32 = 2 * d + ew.liwork
    dbl = <double*>malloc(n_dbl * sizeof(double))
    i64 = <int64_t*>malloc(n_i64 * sizeof(int64_t))
    i32 = <int*>malloc(n_i32 * sizeof(int))
    if dbl == NULL or i64 == NULL or i32 == NULL:
        free(dbl)
        free(i64)
        free(i32)
        raise MemoryError(f"k_flats_classes: cannot allocate the work arrays of {n_max} "
                          f"rows x {d} dimensions ({8 * (n_dbl + n_i64) / 2 ** 20:.0f} MiB)")
    S = dbl                                 # (d, d) scatter
    ew.w = S + d * d                        # (d) eigenvalues
    ew.z = ew.w + d                         # (d, q) dsyevr's eigenvectors
    ew.work = ew.z + d * q
    sq = ew.work + ew.lwork                 # (n_max) squared row norms
    nearest = sq + n_max                    # (n_max) distance to the nearest seed flat
    key = nearest + n_max                   # (n_max) distances to a seed / a flat
    G = key + n_max                         # (n_max, d) the rows of one fit
    XT = G + n_max * d                      # (d, n_max) the class's rows, feature-major
    scores = XT + n_max * d                 # (n_max, max(k, q + 1)) Lloyd scores /
                                            # the seeds' products / (n_max) scratch
    P = scores + n_max * max(k, q + 1)      # flat_scores_rows' products
    Q = P + block * k * q
    B = Q + block * k
    cc = B + k * q
    A = cc + k                              # ((q + 1), d) a seed flat's centre and basis
    idx = i64                               # (n_max) row ids by distance to a seed
    assign = idx + n_max                    # (n_max) cluster of each row
    order = assign + n_max                  # (n_max) rows by cluster
    counts = order + n_max                  # (k + 1) cluster ends
    changed = counts + k + 1                # (k) clusters to refit
    ew.isuppz = i32
    ew.iwork = i32 + 2 * d
    try:
        with nogil:
            for c in range(C):
                n_c = starts[c + 1] - starts[c]
                Xc = &X[starts[c], 0]
                Fc = &F[c * k * q, 0]
                Cc = &centres[c * k, 0]
                steps[c] = 0
                for i in range(n_c):
                    s = 0.0
                    for u in range(d):
                        s += Xc[i * d + u] * Xc[i * d + u]
                        XT[u * n_c + i] = Xc[i * d + u]
                    sq[i] = s
                size = min(n_c, max(q + 1, (n_c + k - 1) // k))
                # ---- seeding
                for j in range(k):
                    if stop_requested(flag):
                        status = 1
                        break
                    seed = min(<Py_ssize_t>(uniforms[c, j] * n_c), n_c - 1)
                    if j > 0:
                        total = 0.0
                        for i in range(n_c):
                            total += nearest[i]
                        if total > 0.0 and total < INFINITY:
                            target = uniforms[c, j] * total
                            run = 0.0
                            drawn = 0
                            for i in range(n_c):
                                run += nearest[i]
                                if run > target:
                                    break
                                drawn += 1
                            seed = min(drawn, n_c - 1)
                    info = _fit_neighbourhood(Xc, XT, n_c, d, q, sq, seed, size, key, idx, G,
                                              S, &ew, &Cc[j * d], &Fc[j * q * d])
                    if info != 0:
                        status = 2
                        break
                    if j + 1 < k or n_steps > 0:
                        # squared distances to the new flat; the nearest so far, and
                        # which it is: after the last seed, the first Lloyd step's
                        # assignment (the scores of every row against every flat,
                        # again, cost a third of the Lloyd steps' products)
                        _flat_distances(Xc, sq, n_c, d, q, &Fc[j * q * d], &Cc[j * d], A,
                                        scores, key)
                        for i in range(n_c):
                            v = key[i]
                            if j == 0 or v < nearest[i]:
                                nearest[i] = v
                                assign[i] = j
                if status:
                    break
                # ---- Lloyd steps
                for step in range(n_steps):
                    if stop_requested(flag):
                        status = 1
                        break
                    moved = False
                    for m in range(k):
                        changed[m] = step == 0
                    if step == 0:
                        # the seeds' nearest flats (above): refit every cluster
                        steps[c] += 1
                        info = _refit_clusters(Xc, n_c, d, k, q, assign, changed, counts,
                                               order, G, S, &ew, Cc, Fc)
                        if info != 0:
                            status = 2
                            break
                        continue
                    # all the class's scores in one call: the flats' offsets F_m c_m
                    # once a step, the rows in blocks inside
                    flat_scores_rows(Xc, n_c, d, Fc, Cc, k, q, scores, block, P, Q, B, cc)
                    for i in range(n_c):
                        best = 0
                        bestv = scores[i * k]
                        for m in range(1, k):
                            if scores[i * k + m] > bestv:
                                bestv = scores[i * k + m]
                                best = m
                        if best != assign[i]:
                            changed[best] = 1
                            changed[assign[i]] = 1
                            assign[i] = best
                            moved = True
                    if not moved:
                        break
                    steps[c] += 1
                    info = _refit_clusters(Xc, n_c, d, k, q, assign, changed, counts, order,
                                           G, S, &ew, Cc, Fc)
                    if info != 0:
                        status = 2
                        break
                if status:
                    break
        if status == 2:
            # a LinAlgError: training names the method, the largest value and the
            # remedy (lcoding.training._checked)
            raise LinAlgError(
                f"k q-flats: a {d} x {d} scatter of the rows is not finite, values too large "
                f"for their squares" if info == 2 and ew.small else
                f"k q-flats: the eigensolver failed ({info}) on a {d} x {d} scatter")
        return status
    finally:
        free(dbl)
        free(i64)
        free(i32)
