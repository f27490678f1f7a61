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
# K(x_i + dx_i, x) - K(x_i, x) (eq. 7).  The RBF kernel's exponentials come from _exp.h
# (vectorised, within 1 ulp of libm's exp, the same bits on every x86-64 CPU).
from libc.math cimport tanh
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from scipy.linalg.cython_blas cimport dgemm

from lcoding.core._dist cimport CSRView, make_csr, row_sqnorm, scatter_rows

cdef extern from "_exp.h" nogil:
    # exp over an array, four values at a time with AVX2 and FMA, bit-identical to
    # its scalar path (see the header)
    int lcoding_exp_array(double* v, Py_ssize_t n, int path)


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
            lcoding_exp_array(row, m, 0)
        elif kernel_type == SIGMOID:
            for j in range(m):
                row[j] = tanh(gamma * row[j] + coef0)


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
    cdef Py_ssize_t r0, r1, i
    cdef int im = <int>m, ib, idd = <int>d
    cdef double one = 1.0, zero = 0.0
    cdef double* xbuf
    cdef double* x_sq
    cdef double* orow
    if n == 0 or m == 0:
        return 0
    if d > 0 and block * d > MAX_BLOCK_DOUBLES:
        block = max(1, MAX_BLOCK_DOUBLES // d)
    xbuf = <double*>malloc(block * (d if d > 0 else 1) * sizeof(double))
    x_sq = <double*>malloc(block * sizeof(double))
    if xbuf == NULL or x_sq == NULL:
        free(xbuf)
        free(x_sq)
        return -1
    with nogil:
        r0 = 0
        while r0 < n:
            r1 = min(n, r0 + block)
            ib = <int>(r1 - r0)
            orow = &out[r0, 0]
            if d > 0:
                scatter_rows(&X, r0, r1, d, xbuf)
                # column-major view: out^T (m x ib) = V^T^T (m x d) . xbuf^T (d x ib)
                dgemm(b"T", b"N", &im, &ib, &idd, &one, <double*>&V[0, 0], &idd, xbuf, &idd,
                      &zero, orow, &im)
            else:
                for i in range((r1 - r0) * m):
                    orow[i] = 0.0
            if kernel_type == RBF:
                for i in range(r0, r1):
                    x_sq[i - r0] = row_sqnorm(&X, i, d)
            apply_kernel(orow, r1 - r0, m, x_sq, &v_sq[0], kernel_type, degree, gamma, coef0)
            r0 = r1
        free(xbuf)
        free(x_sq)
    return 0


def exp_array(double[::1] v not None, int path=0):
    """``v[i] = exp(v[i])`` in place, as the RBF kernel computes its values; ``path``
    0: AVX2 where the CPU has it, 1: the scalar path, 2: AVX2 (scalar without it).
    Returns the path taken (1 scalar, 2 AVX2) -- for the tests of ``_exp.h``."""
    if path not in (0, 1, 2):
        raise ValueError(f"path must be 0, 1 or 2, got {path}")
    with nogil:
        path = lcoding_exp_array(&v[0] if v.shape[0] else NULL, v.shape[0], path)
    return path
