# Squared Euclidean distances between a block of CSR rows and a set of points
# (anchors or k-means centres), shared by _knn.pyx and _kmeans.pyx.
#
#     D[r, j] = ||x_r||^2 - 2 x_r . v_j + ||v_j||^2        (clamped at 0)
#
# Dense path: the block is scattered into a dense (rows x d) buffer and the cross
# term is one BLAS dgemm against the row-major (m x d) point matrix.  Sparse path:
# the cross term is a loop over the non-zeros of each row, an axpy over the
# transposed (d x m) point matrix, so each non-zero touches m contiguous doubles.
# Both write the block into a row-major (rows x m) buffer.
from libc.stdint cimport int64_t
from libc.string cimport memset
from scipy.linalg.cython_blas cimport dgemm


cdef struct CSRView:
    const double* data
    const int* indices
    const int64_t* indptr
    Py_ssize_t n_features


cdef inline CSRView make_csr(const double[::1] data, const int[::1] indices,
                             const int64_t[::1] indptr, Py_ssize_t n_features) noexcept:
    cdef CSRView v
    v.data = &data[0] if data.shape[0] > 0 else NULL
    v.indices = &indices[0] if indices.shape[0] > 0 else NULL
    v.indptr = &indptr[0]
    v.n_features = n_features
    return v


cdef inline double row_sqnorm(const CSRView* X, Py_ssize_t i, Py_ssize_t d) noexcept nogil:
    # ||x_i||^2 over the columns < d
    cdef int64_t p
    cdef double s = 0.0
    for p in range(X.indptr[i], X.indptr[i + 1]):
        if X.indices[p] < d:
            s += X.data[p] * X.data[p]
    return s


cdef inline void scatter_rows(const CSRView* X, Py_ssize_t r0, Py_ssize_t r1,
                              Py_ssize_t d, double* buf) noexcept nogil:
    # buf[(i - r0) * d + col] = x_i[col] for rows r0 <= i < r1 (columns >= d dropped)
    cdef Py_ssize_t i
    cdef int64_t p
    cdef double* row
    memset(buf, 0, (r1 - r0) * d * sizeof(double))
    for i in range(r0, r1):
        row = buf + (i - r0) * d
        for p in range(X.indptr[i], X.indptr[i + 1]):
            if X.indices[p] < d:
                row[X.indices[p]] = X.data[p]


cdef inline void block_sqdist(const CSRView* X, Py_ssize_t r0, Py_ssize_t r1,
                              const double* V, const double* VT, const double* v_sq,
                              Py_ssize_t m, Py_ssize_t d, bint dense,
                              double* xbuf, const double* x_sq, double* out) noexcept nogil:
    # out[(i - r0) * m + j] = ||x_i - v_j||^2.  V is (m x d) row-major (dense path),
    # VT its (d x m) transpose (sparse path); x_sq[i - r0] = ||x_i||^2.
    cdef int im = <int>m, ib = <int>(r1 - r0), idd = <int>d
    cdef double one = 1.0, zero = 0.0
    cdef Py_ssize_t i, j, col
    cdef int64_t p
    cdef double xv, v, dist
    cdef double* orow
    cdef const double* vrow
    if r1 <= r0 or m == 0:
        return
    if dense and d > 0:
        scatter_rows(X, r0, r1, d, xbuf)
        # column-major view: out^T (m x ib) = V (as d x m, transposed) . xbuf^T (d x ib)
        dgemm(b"T", b"N", &im, &ib, &idd, &one, <double*>V, &idd, xbuf, &idd,
              &zero, out, &im)
    else:
        memset(out, 0, (r1 - r0) * m * sizeof(double))
        for i in range(r0, r1):
            orow = out + (i - r0) * m
            for p in range(X.indptr[i], X.indptr[i + 1]):
                col = X.indices[p]
                if col >= d:
                    continue
                xv = X.data[p]
                vrow = VT + col * m
                for j in range(m):
                    orow[j] += xv * vrow[j]
    for i in range(r1 - r0):
        orow = out + i * m
        for j in range(m):
            dist = x_sq[i] - 2.0 * orow[j] + v_sq[j]
            orow[j] = dist if dist > 0.0 else 0.0
