# Blocks of LIBSVM kernel values between CSR rows x_i and dense points v_j
# (landmarks, support vectors, shifted images), used by lcoding/invariant.py:
#
#     K[i, j] = k(x_i, v_j) with, as in LIBSVM (-t, -d, -g, -r):
#       0 linear       x.v
#       1 polynomial   (gamma x.v + coef0)^degree
#       2 RBF          exp(-gamma ||x - v||^2),  ||x - v||^2 = ||x||^2 - 2 x.v + ||v||^2
#       3 sigmoid      tanh(gamma x.v + coef0)
#
# Every kernel is a function of the inner products x.v (and, for RBF, of the two
# squared norms), so a block of rows is scattered into a dense buffer and all its
# inner products come from one BLAS dgemm against the row-major (m x d) points
# (the helpers of _dist.pxd); the kernel function is then applied in place.
# Chapelle & Schoelkopf (NIPS 2001) need these values for the Gram matrix, the
# kernel PCA map psi(x) = Lambda^(-1/2) U^T k(x) (eq. 9) and the tangent terms
# K(x_i + dx_i, x) - K(x_i, x) (eq. 7).  Prediction (kernel_decision) multiplies each
# block of kernel values by the expansion's weights while it is in cache,
#     f(x) = offset + sum_j k(x, v_j) W[j].
# RBF rows of at most 4 features skip dgemm: ||x - v||^2 summed feature by feature.
# The RBF kernel's exponentials come from _exp.h (vectorised, within 1 ulp of libm's
# exp, the same bits on every x86-64 CPU).
from libc.math cimport NAN, tanh
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from scipy.linalg.cython_blas cimport dgemm, dgemv

from lcoding.core._dist cimport CSRView, make_csr, row_sqnorm, scatter_rows

cdef extern from "_exp.h" nogil:
    # exp over an array, four values at a time with AVX2 and FMA, bit-identical to
    # its scalar path (see the header)
    int lcoding_exp_array(double* v, Py_ssize_t n, int path)
    # -gamma ||x - v_j||^2 of one row against feature-major points, one pass
    int lcoding_rbf_exponents(const double* x, Py_ssize_t d, const double* VT, Py_ssize_t m,
                              double neg_gamma, double* out, int path)

cdef extern from "_rbf32.h" nogil:
    # a two-class RBF expansion's sums for one row, the exponentials in float (see the
    # header), 32 points a pass with AVX2 and FMA
    int lcoding_rbf_sums_mixed(const double* x, double x_sq, Py_ssize_t d, const double* VT,
                               const double* v_sq, Py_ssize_t m, double neg_gamma,
                               const double* a, const float* absa, double* f, double* A,
                               double* Ae, int path)


cpdef enum KernelType:
    LINEAR = 0
    POLY = 1
    RBF = 2
    SIGMOID = 3


# rows per dgemm call; capped so that the dense row buffer stays below 32 MiB
cdef Py_ssize_t MAX_BLOCK_ROWS = 256
cdef Py_ssize_t MAX_BLOCK_DOUBLES = 4194304


cdef inline double int_power(double base, int degree) noexcept nogil:
    # base^degree for an integer degree >= 0 by repeated squaring (LIBSVM's powi idea:
    # exact for negative bases, unlike pow() with a non-integer exponent)
    cdef double result = 1.0
    while degree > 0:
        if degree & 1:
            result *= base
        base *= base
        degree >>= 1
    return result


cdef void apply_kernel(double* out, Py_ssize_t n_block, Py_ssize_t m, const double* x_sq,
                       const double* v_sq, int kernel_type, int degree, double gamma,
                       double coef0) noexcept nogil:
    # out holds inner products (n_block x m, row-major); replace them by kernel values
    cdef Py_ssize_t i, j
    cdef double* row
    cdef double dist
    for i in range(n_block):
        row = out + i * m
        if kernel_type == POLY:
            for j in range(m):
                row[j] = int_power(gamma * row[j] + coef0, degree)
        elif kernel_type == RBF:
            for j in range(m):
                dist = x_sq[i] - 2.0 * row[j] + v_sq[j]
                if dist < 0.0:        # rounding of the expanded square
                    dist = 0.0
                row[j] = -gamma * dist
        elif kernel_type == SIGMOID:
            for j in range(m):
                row[j] = tanh(gamma * row[j] + coef0)
    if kernel_type == RBF:
        # one call for the block, not a row: a row's last m % 4 values would take the
        # scalar path (~30 ns each)
        lcoding_exp_array(out, n_block * m, 0)


# RBF rows of at most this many features: squared distances summed feature by feature
# against the points stored feature-major (rbf_direct_rows), not by dgemm's inner
# products -- a dgemm with an inner dimension of 2 is all packing and overhead
# (banana's two features: 1.2 ns a landmark against the direct sum's 0.3)
cdef Py_ssize_t DIRECT_RBF_MAX_D = 4
# ... and the kernel values of this many doubles a block of kernel_decision (L1/L2-sized)
cdef Py_ssize_t DIRECT_BLOCK_DOUBLES = 8192


cdef inline bint direct_rbf(int kernel_type, Py_ssize_t d) noexcept nogil:
    return kernel_type == RBF and 0 < d <= DIRECT_RBF_MAX_D


cdef double* transposed_points(const double[:, ::1] V) noexcept nogil:
    # VT (d x m, feature-major) of the row-major points V (m x d); NULL when out of memory
    cdef Py_ssize_t m = V.shape[0], d = V.shape[1], j, u
    cdef double* VT = <double*>malloc(m * d * sizeof(double))
    if VT != NULL:
        for j in range(m):
            for u in range(d):
                VT[u * m + j] = V[j, u]
    return VT


cdef void rbf_direct_rows(const double* xbuf, Py_ssize_t n_block, Py_ssize_t d,
                          const double* VT, Py_ssize_t m, double gamma,
                          double* out) noexcept nogil:
    # out (n_block x m, row-major) = exp(-gamma ||x_i - v_j||^2), the squared distance
    # summed over the d features as (x_u - v_u)^2 (exact to rounding, no cancellation of
    # the expanded ||x||^2 - 2 x.v + ||v||^2), in one pass over the points (_exp.h)
    cdef Py_ssize_t i
    for i in range(n_block):
        lcoding_rbf_exponents(xbuf + i * d, d, VT, m, -gamma, out + i * m, 0)
    # one call for the block: a row's last m % 4 values would take the scalar path
    # (~30 ns each; banana's 79 landmarks: 3 a row, a third of the exponentials' time)
    lcoding_exp_array(out, n_block * m, 0)


cdef struct RowScratch:
    double* xbuf        # (block x d) the block's rows, dense
    double* x_sq        # (block,) their squared norms (RBF by dgemm)
    double* VT          # (d x m) the points feature-major (direct RBF), else NULL


cdef int scratch_alloc(RowScratch* sc, Py_ssize_t block, const double[:, ::1] V,
                       bint direct) noexcept:
    # the row buffers of kernel_rows; -1 (nothing left allocated) when memory is short
    cdef Py_ssize_t d = V.shape[1]
    sc.xbuf = <double*>malloc(block * (d if d > 0 else 1) * sizeof(double))
    sc.x_sq = <double*>malloc(block * sizeof(double))
    sc.VT = transposed_points(V) if direct else NULL
    if sc.xbuf == NULL or sc.x_sq == NULL or (direct and sc.VT == NULL):
        scratch_free(sc)
        return -1
    return 0


cdef void scratch_free(RowScratch* sc) noexcept nogil:
    free(sc.xbuf)
    free(sc.x_sq)
    free(sc.VT)
    sc.xbuf = sc.x_sq = sc.VT = NULL


cdef void kernel_rows(const CSRView* X, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t d,
                      const double[:, ::1] V, const double* v_sq, RowScratch* sc,
                      double* out, int kernel_type, int degree, double gamma,
                      double coef0) noexcept nogil:
    # out ((r1 - r0) x m, row-major) = k(x_i, v_j) for the CSR rows r0 <= i < r1: the
    # direct RBF sums where VT is given (direct_rbf), else dgemm's inner products
    # (column-major: out^T (m x ib) = V (m x d) . xbuf^T (d x ib)) and the kernel
    cdef Py_ssize_t m = V.shape[0], i
    cdef int im = <int>m, ib = <int>(r1 - r0), idd = <int>d
    cdef double one = 1.0, zero = 0.0
    if sc.VT != NULL:
        scatter_rows(X, r0, r1, d, sc.xbuf)
        rbf_direct_rows(sc.xbuf, r1 - r0, d, sc.VT, m, gamma, out)
        return
    if d > 0:
        scatter_rows(X, r0, r1, d, sc.xbuf)
        dgemm(b"T", b"N", &im, &ib, &idd, &one, <double*>&V[0, 0], &idd, sc.xbuf, &idd,
              &zero, out, &im)
    else:
        for i in range((r1 - r0) * m):
            out[i] = 0.0
    if kernel_type == RBF:
        for i in range(r0, r1):
            sc.x_sq[i - r0] = row_sqnorm(X, i, d)
    apply_kernel(out, r1 - r0, m, sc.x_sq, v_sq, kernel_type, degree, gamma, coef0)


def kernel_block(
        const double[::1] X_data not None, const int[::1] X_indices not None,
        const int64_t[::1] X_indptr not None,   # IN  CSR rows (n x d, columns >= d ignored)
        const double[:, ::1] V not None,         # IN  points (m x d), row-major
        const double[::1] v_sq not None,         # IN  (m,) squared norms of the points
        double[:, ::1] out not None,             # OUT (n x m) kernel values
        int kernel_type, int degree, double gamma, double coef0):
    """``out[i, j] = k(x_i, v_j)`` for every CSR row and point (see the module
    header for the four kernels).  Returns 0, or -1 when scratch memory is short."""
    cdef Py_ssize_t n = X_indptr.shape[0] - 1
    cdef Py_ssize_t m = V.shape[0], d = V.shape[1]
    cdef CSRView X = make_csr(X_data, X_indices, X_indptr, d)
    cdef Py_ssize_t block = MAX_BLOCK_ROWS
    cdef Py_ssize_t r0, r1
    cdef RowScratch sc
    if n == 0 or m == 0:
        return 0
    if d > 0 and block * d > MAX_BLOCK_DOUBLES:
        block = max(1, MAX_BLOCK_DOUBLES // d)
    if scratch_alloc(&sc, block, V, direct_rbf(kernel_type, d)) != 0:
        return -1
    with nogil:
        r0 = 0
        while r0 < n:
            r1 = min(n, r0 + block)
            kernel_rows(&X, r0, r1, d, V, &v_sq[0], &sc, &out[r0, 0], kernel_type, degree,
                        gamma, coef0)
            r0 = r1
        scratch_free(&sc)
    return 0


def kernel_decision(
        const double[::1] X_data not None, const int[::1] X_indices not None,
        const int64_t[::1] X_indptr not None,   # IN  CSR rows (n x d, columns >= d ignored)
        const double[:, ::1] V not None,         # IN  points (m x d), row-major
        const double[::1] v_sq not None,         # IN  (m,) squared norms of the points
        const double[:, ::1] W not None,         # IN  (m x nr_w) the expansion's weights
        const double[::1] offset not None,       # IN  (nr_w,) added to every row (bias term)
        double[:, ::1] out not None,             # OUT (n x nr_w) decision values
        signed char[::1] bad not None,           # OUT (n,) 1: a kernel value of the row is not finite
        int kernel_type, int degree, double gamma, double coef0):
    """``out[i] = offset + sum_j k(x_i, v_j) W[j]``: a kernel expansion's decision
    values, a block of rows at a time -- the block's kernel values (as
    :func:`kernel_block`) stay in a cache-sized buffer and go straight into a second
    dgemm with ``W``, where writing all n x m values out and reducing them in NumPy
    cost banana's 79-landmark map 0.1 us a row (0.35 against 0.25).
    ``bad[i]`` flags a row with an infinite or NaN kernel value (the caller's error).
    Returns 0, or -1 when scratch memory is short."""
    cdef Py_ssize_t n = X_indptr.shape[0] - 1
    cdef Py_ssize_t m = V.shape[0], d = V.shape[1], nw = W.shape[1]
    cdef CSRView X = make_csr(X_data, X_indices, X_indptr, d)
    cdef Py_ssize_t block = MAX_BLOCK_ROWS
    cdef Py_ssize_t r0, r1, i, c
    cdef int im = <int>m, ib, inw = <int>nw, ione = 1
    cdef double one = 1.0
    cdef RowScratch sc
    cdef double* kbuf
    cdef double* orow
    cdef double* krow
    cdef double v
    cdef int flag
    if n == 0:
        return 0
    if m == 0:
        for i in range(n):
            bad[i] = 0
            for c in range(nw):
                out[i, c] = offset[c]
        return 0
    cdef bint direct = direct_rbf(kernel_type, d)
    if direct:
        block = max(8, min(MAX_BLOCK_ROWS, DIRECT_BLOCK_DOUBLES // m))
    if d > 0 and block * d > MAX_BLOCK_DOUBLES:
        block = max(1, MAX_BLOCK_DOUBLES // d)
    if block * m > MAX_BLOCK_DOUBLES:
        block = max(1, MAX_BLOCK_DOUBLES // m)
    kbuf = <double*>malloc(block * m * sizeof(double))
    if kbuf == NULL:
        return -1
    if scratch_alloc(&sc, block, V, direct) != 0:
        free(kbuf)
        return -1
    with nogil:
        r0 = 0
        while r0 < n:
            r1 = min(n, r0 + block)
            ib = <int>(r1 - r0)
            kernel_rows(&X, r0, r1, d, V, &v_sq[0], &sc, kbuf, kernel_type, degree, gamma,
                        coef0)
            if kernel_type != RBF:
                for i in range(ib):
                    # v - v is 0 for a finite v, NaN for +-inf and NaN
                    krow = kbuf + i * m
                    flag = 0
                    for c in range(m):
                        v = krow[c]
                        flag |= (v - v != 0.0)
                    bad[r0 + i] = <signed char>flag
            orow = &out[r0, 0]
            for i in range(ib):
                for c in range(nw):
                    orow[i * nw + c] = offset[c]
            if nw == 1:
                # one class column: dgemv (dgemm of one column costs banana's
                # 79-landmark map 0.03 us a row more)
                dgemv(b"T", &im, &ib, &one, kbuf, &im, <double*>&W[0, 0], &ione, &one,
                      orow, &ione)
            else:
                # column-major: out^T (nw x ib) += W^T (nw x m) . kbuf^T (m x ib)
                dgemm(b"N", b"N", &inw, &ib, &im, &one, <double*>&W[0, 0], &inw, kbuf, &im,
                      &one, orow, &inw)
            if kernel_type == RBF:
                # RBF values lie in [0, 1] or are NaN (a row whose squared norm
                # overflows), and a NaN makes the row's decision values NaN (the
                # weights are finite): the nr_w values tell, not the m kernel values
                for i in range(ib):
                    flag = 0
                    for c in range(nw):
                        v = orow[i * nw + c]
                        flag |= (v - v != 0.0)
                    bad[r0 + i] = <signed char>flag
            r0 = r1
        scratch_free(&sc)
        free(kbuf)
    return 0


def rbf_exponents(const double[::1] x not None, const double[:, ::1] VT not None,
                  double neg_gamma, double[::1] out not None, int path=0):
    """``out[j] = neg_gamma * sum_u (x[u] - VT[u, j])^2`` (``VT``: d x m, the points
    feature-major) by ``_exp.h``'s ``path`` (as :func:`exp_array`); returns the path
    taken -- for the tests of the direct RBF path."""
    if path not in (0, 1, 2):
        raise ValueError(f"path must be 0, 1 or 2, got {path}")
    if x.shape[0] != VT.shape[0] or out.shape[0] != VT.shape[1]:
        raise ValueError(f"rbf_exponents: x has {x.shape[0]} values, VT is "
                         f"{VT.shape[0]} x {VT.shape[1]}, out has {out.shape[0]}")
    if VT.shape[0] == 0 or VT.shape[1] == 0:        # no feature or no point
        out[:] = 0.0
        return 1
    return lcoding_rbf_exponents(&x[0], x.shape[0], &VT[0, 0], VT.shape[1], neg_gamma,
                                 &out[0], path)


def exp_array(double[::1] v not None, int path=0):
    """``v[i] = exp(v[i])`` in place, as the RBF kernel computes its values; ``path``
    0: AVX2 where the CPU has it, 1: the scalar path, 2: AVX2 (scalar without it).
    Returns the path taken (1 scalar, 2 AVX2) -- for the tests of ``_exp.h``."""
    if path not in (0, 1, 2):
        raise ValueError(f"path must be 0, 1 or 2, got {path}")
    with nogil:
        path = lcoding_exp_array(&v[0] if v.shape[0] else NULL, v.shape[0], path)
    return path


def rbf_sums_mixed(
        const double[::1] X_data not None, const int[::1] X_indices not None,
        const int64_t[::1] X_indptr not None,   # IN  CSR rows (n x d, columns >= d ignored)
        const double[:, ::1] VT not None,        # IN  (d x m) the points feature-major
        const double[::1] v_sq not None,         # IN  (m,) their squared norms
        const double[::1] a not None,            # IN  (m,) the expansion's weights
        const float[::1] absa not None,          # IN  (m,) their magnitudes, float
        double gamma,
        double[::1] f not None,                  # OUT (n,) sum_j a_j k(x, v_j); NaN: not summed
        double[::1] A not None,                  # OUT (n,) sum_j |a_j| k(x, v_j)
        double[::1] Ae not None,                 # OUT (n,) sum_j |a_j| k(x, v_j) gamma ||x - v_j||^2
        double[::1] x_sq not None,               # OUT (n,) ||x||^2
        int path=0):
    """A two-class RBF expansion's sums row by row (``_rbf32.h``: the exponentials in
    float, everything else in double), for :meth:`KernelExpansionModel.predict_labels`'
    error bound.  A row of ``||x||^2`` above 1e300 is not summed (``f`` NaN: its
    products could overflow).  ``path`` 0: AVX2 where the CPU has it, 1: scalar.
    Returns the path taken, or -1 when scratch memory is short."""
    cdef Py_ssize_t n = X_indptr.shape[0] - 1, d = VT.shape[0], m = VT.shape[1], i
    cdef CSRView X = make_csr(X_data, X_indices, X_indptr, d)
    cdef int taken = path + 1
    cdef double sq
    cdef double* xbuf
    if path not in (0, 1):
        raise ValueError(f"path must be 0 or 1, got {path}")
    if d < 1 or m < 1 or v_sq.shape[0] != m or a.shape[0] != m or absa.shape[0] != m:
        raise ValueError(f"rbf_sums_mixed: {d} x {m} points (at least 1 x 1), "
                         f"{v_sq.shape[0]} norms, {a.shape[0]} and {absa.shape[0]} weights")
    if f.shape[0] != n or A.shape[0] != n or Ae.shape[0] != n or x_sq.shape[0] != n:
        raise ValueError(f"rbf_sums_mixed: {n} rows, outputs of {f.shape[0]}, {A.shape[0]}, "
                         f"{Ae.shape[0]} and {x_sq.shape[0]}")
    xbuf = <double*>malloc(d * sizeof(double))
    if xbuf == NULL:
        return -1
    with nogil:
        for i in range(n):
            scatter_rows(&X, i, i + 1, d, xbuf)
            sq = row_sqnorm(&X, i, d)
            x_sq[i] = sq
            if sq <= 1e300:
                taken = lcoding_rbf_sums_mixed(xbuf, sq, d, &VT[0, 0], &v_sq[0], m, -gamma,
                                               &a[0], &absa[0], &f[i], &A[i], &Ae[i], path)
            else:
                f[i] = NAN
                A[i] = 0.0
                Ae[i] = 0.0
    free(xbuf)
    return taken
