# Explicit feature maps of additive homogeneous kernels (Vedaldi & Zisserman,
# "Efficient additive kernels via explicit feature maps", PAMI 2012), so that a
# linear / locally linear model on Psi(x) approximates an additive-kernel SVM
# (the LL-SVM paper's "locally additive" extension, Sec. 3.2).
#
# Per input value x > 0 (a negative value maps to -Psi(|x|), zero stays zero, so
# sparsity is kept), with sampling step L and kernel spectrum kappa:
#     Psi_0(x)      = sqrt(L x kappa(0))
#     Psi_{2j-1}(x) = sqrt(2 L x kappa(jL)) cos(jL log x)        j = 1..n
#     Psi_{2j}(x)   = sqrt(2 L x kappa(jL)) sin(jL log x)
# The Hellinger kernel sum_j sqrt(x_j y_j) has the exact map sqrt(x) (one value).
# Input column c maps to output columns c*(2n+1) .. c*(2n+1)+2n.
from libc.math cimport cos, log, sin, sqrt
from libc.stdint cimport int64_t


def homogeneous_map(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        const double[::1] kappa,    # IN (n+1,) kappa(jL), j = 0..n; empty: Hellinger
        double L,
        double[::1] out_data,       # OUT (nnz * (2n+1),)
        int[::1] out_indices,       # OUT (nnz * (2n+1),)
        int64_t[::1] out_indptr):   # OUT (n_rows + 1,)
    """Map every stored value; the output keeps the row structure of the input."""
    cdef Py_ssize_t n_rows = X_indptr.shape[0] - 1
    cdef Py_ssize_t order = kappa.shape[0] - 1 if kappa.shape[0] > 0 else 0
    cdef Py_ssize_t width = 2 * order + 1
    cdef bint hellinger = kappa.shape[0] == 0
    cdef Py_ssize_t i, j
    cdef int64_t p, q
    cdef double x, sign, lx, amp
    with nogil:
        q = 0
        out_indptr[0] = 0
        for i in range(n_rows):
            for p in range(X_indptr[i], X_indptr[i + 1]):
                x = X_data[p]
                sign = 1.0
                if x < 0.0:
                    sign = -1.0
                    x = -x
                if hellinger:
                    out_data[q] = sign * sqrt(x)
                    out_indices[q] = X_indices[p]
                    q += 1
                    continue
                lx = log(x)
                out_data[q] = sign * sqrt(L * x * kappa[0])
                out_indices[q] = <int>(X_indices[p] * width)
                for j in range(1, order + 1):
                    amp = sign * sqrt(2.0 * L * x * kappa[j])
                    out_data[q + 2 * j - 1] = amp * cos(j * L * lx)
                    out_indices[q + 2 * j - 1] = <int>(X_indices[p] * width + 2 * j - 1)
                    out_data[q + 2 * j] = amp * sin(j * L * lx)
                    out_indices[q + 2 * j] = <int>(X_indices[p] * width + 2 * j)
                q += width
            out_indptr[i + 1] = q
