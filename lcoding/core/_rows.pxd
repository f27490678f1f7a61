# The row abstraction every linear-in-parameters solver runs on.
#
# A training row is the implicit feature vector
#
#     z_i = gamma(x_i) (x) [x_i; B]                      (design.md, LL-SVM eq. 3)
#
# where gamma(x_i) is a local coding with k non-zeros (anchor ids anchor_idx[i, :],
# weights coding_weight[i, :]) and B is the bias value (-B; no bias coordinate when
# B < 0).  The weight vector is W, a (n_anchors x stride) row-major matrix with
# stride = n_features + (B >= 0), so that
#
#     <W, z_i>  = sum_j gamma_ij * (W[a_ij] . [x_i; B])
#     ||z_i||^2 = ||gamma_i||^2 * (||x_i||^2 + B^2)
#
# Shared-bias variant (anchor-plane LIB-LLSVM, seed 000 eq. 9): with shared_bias = B'
# >= 0 (and the per-anchor bias B < 0), z_i = [gamma(x_i) (x) x_i; B'] has ONE bias
# coordinate whose weight is W[shared_bias_pos], the slot after the anchor rows.
#
# A plain linear model is the coding gamma = [1] with one anchor: anchor_idx is
# NULL and the loops reduce to LIBLINEAR's sparse_operator::dot / axpy / nrm2_sq.
# z_i is never materialised.
from libc.stdint cimport int64_t


cdef struct CodedRows:
    const double* data          # CSR values of x
    const int* indices          # CSR column indices (0-based, sorted, < n_features)
    const int64_t* indptr       # CSR row pointers
    double bias                 # value of the virtual bias coordinate; < 0: none
    Py_ssize_t n_features       # columns of x (the bias coordinate is column n_features)
    Py_ssize_t stride           # length of one row of W
    const int* anchor_idx       # (n_rows, k) row-major, or NULL for the linear coding
    const double* coding_weight # (n_rows, k) row-major, or NULL
    Py_ssize_t k                # non-zeros per coding row (1 for linear)
    double shared_bias          # value of one bias coordinate shared by all anchors; < 0: none
    Py_ssize_t shared_bias_pos  # index of its weight in W


cdef inline double x_dot(const CodedRows* rows, Py_ssize_t i, const double* w) noexcept nogil:
    # [x_i; B] . w  for one row w of W
    cdef int64_t p
    cdef double s = 0.0
    for p in range(rows.indptr[i], rows.indptr[i + 1]):
        s += w[rows.indices[p]] * rows.data[p]
    if rows.bias >= 0:
        s += w[rows.n_features] * rows.bias
    return s


cdef inline void x_axpy(const CodedRows* rows, Py_ssize_t i, double a, double* w) noexcept nogil:
    # w += a * [x_i; B]
    cdef int64_t p
    for p in range(rows.indptr[i], rows.indptr[i + 1]):
        w[rows.indices[p]] += a * rows.data[p]
    if rows.bias >= 0:
        w[rows.n_features] += a * rows.bias


cdef inline double x_sqnorm(const CodedRows* rows, Py_ssize_t i) noexcept nogil:
    cdef int64_t p
    cdef double s = 0.0
    for p in range(rows.indptr[i], rows.indptr[i + 1]):
        s += rows.data[p] * rows.data[p]
    if rows.bias >= 0:
        s += rows.bias * rows.bias
    return s


cdef enum:
    # anchors whose dot products coded_dot accumulates side by side
    CODED_DOT_CHUNK = 16


cdef inline double coded_dot(const CodedRows* rows, Py_ssize_t i, const double* W) noexcept nogil:
    # <W, z_i> = sum_j gamma_ij (W[a_ij] . [x_i; B]).  The k anchors' dot products are
    # accumulated side by side, x_i's non-zeros outer: k independent sums instead of
    # one dependent chain per anchor (ijcnn1's LL-SVM: Hessian products 0.46 -> 0.42 s,
    # Newton's X s 0.080 -> 0.063 s a fit).
    # Each acc[j] adds the same terms in the same order as x_dot, and the sum over j
    # is in anchor order, so the value is x_dot's bit for bit.
    cdef Py_ssize_t j, j0, nc, base, col
    cdef int64_t p, p0, p1
    cdef double g, xv, s = 0.0
    cdef double acc[CODED_DOT_CHUNK]
    cdef const double* wrow[CODED_DOT_CHUNK]
    if rows.anchor_idx == NULL:
        s = x_dot(rows, i, W)
    else:
        base = i * rows.k
        p0 = rows.indptr[i]
        p1 = rows.indptr[i + 1]
        j0 = 0
        while j0 < rows.k:
            nc = rows.k - j0 if rows.k - j0 < CODED_DOT_CHUNK else CODED_DOT_CHUNK
            for j in range(nc):
                acc[j] = 0.0
                wrow[j] = W + rows.anchor_idx[base + j0 + j] * rows.stride
            for p in range(p0, p1):
                col = rows.indices[p]
                xv = rows.data[p]
                for j in range(nc):
                    acc[j] += wrow[j][col] * xv
            if rows.bias >= 0:
                for j in range(nc):
                    acc[j] += wrow[j][rows.n_features] * rows.bias
            for j in range(nc):
                g = rows.coding_weight[base + j0 + j]
                if g != 0.0:
                    s += g * acc[j]
            j0 += nc
    if rows.shared_bias >= 0:
        s += W[rows.shared_bias_pos] * rows.shared_bias
    return s


cdef inline void coded_axpy(const CodedRows* rows, Py_ssize_t i, double a, double* W) noexcept nogil:
    # W += a * z_i: W[a_ij] += (a gamma_ij) [x_i; B] for the anchors with gamma_ij != 0,
    # side by side as in coded_dot.  The k anchors are distinct, so every entry of W
    # gets the same single update as with one x_axpy per anchor, bit for bit.
    cdef Py_ssize_t j, j0, nc, nz, base, col
    cdef int64_t p, p0, p1
    cdef double g, xv
    cdef double coef[CODED_DOT_CHUNK]
    cdef double* wrow[CODED_DOT_CHUNK]
    if rows.anchor_idx == NULL:
        x_axpy(rows, i, a, W)
    else:
        base = i * rows.k
        p0 = rows.indptr[i]
        p1 = rows.indptr[i + 1]
        j0 = 0
        while j0 < rows.k:
            nc = rows.k - j0 if rows.k - j0 < CODED_DOT_CHUNK else CODED_DOT_CHUNK
            nz = 0
            for j in range(nc):
                g = rows.coding_weight[base + j0 + j]
                if g != 0.0:
                    coef[nz] = a * g
                    wrow[nz] = W + rows.anchor_idx[base + j0 + j] * rows.stride
                    nz += 1
            for p in range(p0, p1):
                col = rows.indices[p]
                xv = rows.data[p]
                for j in range(nz):
                    wrow[j][col] += coef[j] * xv
            if rows.bias >= 0:
                for j in range(nz):
                    wrow[j][rows.n_features] += coef[j] * rows.bias
            j0 += nc
    if rows.shared_bias >= 0:
        W[rows.shared_bias_pos] += a * rows.shared_bias


cdef inline double coded_sqnorm(const CodedRows* rows, Py_ssize_t i) noexcept nogil:
    # ||z_i||^2 = ||gamma_i||^2 (||x_i||^2 + B^2)
    cdef Py_ssize_t j, base
    cdef double g2 = 0.0, s
    if rows.anchor_idx == NULL:
        s = x_sqnorm(rows, i)
    else:
        base = i * rows.k
        for j in range(rows.k):
            g2 += rows.coding_weight[base + j] * rows.coding_weight[base + j]
        s = g2 * x_sqnorm(rows, i)
    if rows.shared_bias >= 0:
        s += rows.shared_bias * rows.shared_bias
    return s


cdef inline double coded_bias(const CodedRows* rows, Py_ssize_t i, const double* b) noexcept nogil:
    # gamma(x_i) . b: the per-anchor biases b (one per anchor) weighted by the coding
    # (b[0] for the linear coding) -- the bias term of the SGD LL-SVM's f(x).
    cdef Py_ssize_t j, base
    cdef double s = 0.0
    if rows.anchor_idx == NULL:
        return b[0]
    base = i * rows.k
    for j in range(rows.k):
        s += rows.coding_weight[base + j] * b[rows.anchor_idx[base + j]]
    return s


cdef inline CodedRows make_rows(const double[::1] X_data, const int[::1] X_indices,
                                const int64_t[::1] X_indptr, Py_ssize_t n_features,
                                double bias, const int[:, ::1] anchor_idx,
                                const double[:, ::1] coding_weight,
                                double shared_bias=-1.0,
                                Py_ssize_t shared_bias_pos=0) noexcept:
    # Pack validated arrays into a CodedRows view.  An anchor_idx with no rows
    # selects the linear coding gamma = [1].  The memoryviews must outlive the
    # struct (the calling def function holds them).
    cdef CodedRows rows
    rows.data = &X_data[0] if X_data.shape[0] > 0 else NULL
    rows.indices = &X_indices[0] if X_indices.shape[0] > 0 else NULL
    rows.indptr = &X_indptr[0]
    rows.bias = bias
    rows.n_features = n_features
    rows.stride = n_features + (1 if bias >= 0 else 0)
    if anchor_idx.shape[0] == 0:
        rows.anchor_idx = NULL
        rows.coding_weight = NULL
        rows.k = 1
    else:
        rows.anchor_idx = &anchor_idx[0, 0]
        rows.coding_weight = &coding_weight[0, 0]
        rows.k = anchor_idx.shape[1]
    rows.shared_bias = shared_bias
    rows.shared_bias_pos = shared_bias_pos
    return rows
