# One O(nnz) consistency check of CSR arrays, for kernels that write through
# column indices: a Rows built by _validation.py always passes; arrays assembled
# by hand that would make a kernel read or write out of bounds raise instead.
from libc.stdint cimport int64_t


cdef inline str csr_problem(const int[::1] X_indices, const int64_t[::1] X_indptr,
                            Py_ssize_t nnz, Py_ssize_t n_features):
    # None when the arrays are consistent, else what is wrong with them
    cdef Py_ssize_t n = X_indptr.shape[0] - 1
    cdef Py_ssize_t i, bad_row = -1
    cdef int64_t q
    if n < 0:
        return "indptr is empty"
    if X_indptr[0] != 0 or X_indptr[n] > nnz or X_indptr[n] > X_indices.shape[0]:
        return "indptr does not span the data and index arrays"
    with nogil:
        for i in range(n):
            if X_indptr[i + 1] < X_indptr[i]:
                bad_row = i
                break
            for q in range(X_indptr[i], X_indptr[i + 1]):
                if X_indices[q] < 0 or X_indices[q] >= n_features:
                    bad_row = i
                    break
            if bad_row >= 0:
                break
    if bad_row >= 0:
        return f"row {bad_row} has a decreasing indptr or a column index outside [0, {n_features})"
    return None
