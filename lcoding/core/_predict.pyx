# Decision values of a linear model for a batch of CSR rows.
#
#     dec[i, c] = sum_{j in x_i, j < nr_feature} W[j, c] x_ij  +  B * W[nr_feature, c]
#
# W is LIBLINEAR's feature-major (w_size x nr_w) matrix; columns of x at or beyond
# the model's nr_feature are dropped, as LIBLINEAR's predict does.
from libc.stdint cimport int64_t


def linear_decision_values(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        const double[:, ::1] W,   # IN (w_size, nr_w)
        Py_ssize_t nr_feature, double bias,
        double[:, ::1] out):      # OUT (n_rows, nr_w)
    cdef Py_ssize_t n_rows = out.shape[0], nr_w = W.shape[1]
    cdef Py_ssize_t i, c, col
    cdef int64_t p
    cdef double v
    with nogil:
        for i in range(n_rows):
            for c in range(nr_w):
                out[i, c] = 0.0
            for p in range(X_indptr[i], X_indptr[i + 1]):
                col = X_indices[p]
                if col < nr_feature:
                    v = X_data[p]
                    for c in range(nr_w):
                        out[i, c] += W[col, c] * v
            if bias >= 0:
                for c in range(nr_w):
                    out[i, c] += W[nr_feature, c] * bias
