# Linear one-class SVM (-s 21) by two-level coordinate descent on the scaled dual.
#
# Solves (Chou, Lin et al., SDM 2020, supplementary Algorithm 7; LIBLINEAR's
# solve_oneclass_svm)
#
#     min_alpha  1/2 alpha^T Q alpha,   0 <= alpha_i <= 1,   e^T alpha = nu l,
#     Q_ij = x_i . x_j ,
#
# keeping w = sum_i alpha_i x_i so that the gradient is G_i = w . x_i.  Because of
# the equality constraint, variables move in pairs (i, j): i from
# I_up = {alpha_i < 1} with large -G_i, j from I_low = {alpha_i > 0} with small -G_j.
# The step  delta = (G_i - G_j) / (Q_ii + Q_jj - 2 Q_ij)  moves alpha_i down and
# alpha_j up, then is clipped to the box keeping alpha_i + alpha_j fixed.
#
# One call = one outer iteration: the gradient over the active set, the stopping
# test  max_{I_up} -G - min_{I_low} -G < eps  (returned to the driver before any
# other work), shrinking, selection of the max(active/10, 1) most violating
# candidates of each side (a quick-select plus a sort of the selected ones, under
# the total order (value, row id), so the selection does not depend on the random
# pivots), and the pair updates.  The Python driver owns the iteration count, the
# un-shrinking after convergence on the active set, and the iteration cap.
#
# One-class problems never carry a bias coordinate (LIBLINEAR rejects -B >= 0), so
# rows are plain CSR rows here; w must cover every column index of the rows (the
# driver sizes it n_features, which validated Rows guarantee).
from libc.math cimport INFINITY
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport qsort

from lcoding.core._rng cimport rng_below


cdef struct ScoredRow:
    double value      # -G_i
    int index         # row id


cdef inline bint scored_less(const ScoredRow* a, const ScoredRow* b) noexcept nogil:
    # total order: by value, ties by row id
    return a.value < b.value or (a.value == b.value and a.index < b.index)


cdef int compare_scored(const void* a, const void* b) noexcept nogil:
    if scored_less(<const ScoredRow*>a, <const ScoredRow*>b):
        return -1
    if scored_less(<const ScoredRow*>b, <const ScoredRow*>a):
        return 1
    return 0


cdef inline void swap_scored(ScoredRow* nodes, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    cdef ScoredRow t = nodes[a]
    nodes[a] = nodes[b]
    nodes[b] = t


cdef void select_kth(ScoredRow* nodes, Py_ssize_t low, Py_ssize_t high, Py_ssize_t k,
                     uint64_t* state) noexcept nogil:
    # Rearrange nodes[low..high] so that nodes[k] is in its sorted position, everything
    # before it is smaller and everything after it larger (iterative quick-select with a
    # random pivot: expected linear time).
    cdef Py_ssize_t i, store
    while low < high:
        swap_scored(nodes, low + rng_below(state, high - low + 1), high)
        store = low
        for i in range(low, high):
            if scored_less(&nodes[i], &nodes[high]):
                swap_scored(nodes, store, i)
                store += 1
        swap_scored(nodes, high, store)
        if store == k:
            return
        elif k < store:
            high = store - 1
        else:
            low = store + 1


cdef inline double row_dot(const double* data, const int* indices, const int64_t* indptr,
                           Py_ssize_t i, const double* w) noexcept nogil:
    cdef int64_t q
    cdef double s = 0.0
    for q in range(indptr[i], indptr[i + 1]):
        s += w[indices[q]] * data[q]
    return s


cdef inline void row_axpy(const double* data, const int* indices, const int64_t* indptr,
                          Py_ssize_t i, double a, double* w) noexcept nogil:
    cdef int64_t q
    for q in range(indptr[i], indptr[i + 1]):
        w[indices[q]] += a * data[q]


cdef inline double rows_dot(const double* data, const int* indices, const int64_t* indptr,
                            Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    # x_i . x_j by merging the two sorted index lists
    cdef int64_t a = indptr[i], a_end = indptr[i + 1]
    cdef int64_t b = indptr[j], b_end = indptr[j + 1]
    cdef double s = 0.0
    while a < a_end and b < b_end:
        if indices[a] == indices[b]:
            s += data[a] * data[b]
            a += 1
            b += 1
        elif indices[a] < indices[b]:
            a += 1
        else:
            b += 1
    return s


def scored_rows_nbytes(Py_ssize_t n):
    """Bytes of scratch space for ``n`` (score, row id) candidates."""
    return n * sizeof(ScoredRow)


def rows_times_vector(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        const double[::1] w,               # IN
        double[::1] out):                  # OUT  x_i . w
    cdef Py_ssize_t i
    cdef const double* data = &X_data[0] if X_data.shape[0] > 0 else NULL
    cdef const int* indices = &X_indices[0] if X_indices.shape[0] > 0 else NULL
    cdef const double* wp = &w[0] if w.shape[0] > 0 else NULL
    if out.shape[0] != X_indptr.shape[0] - 1:
        raise ValueError("rows_times_vector: out must have one entry per row")
    with nogil:
        for i in range(out.shape[0]):
            out[i] = row_dot(data, indices, &X_indptr[0], i, wp)


def weighted_row_sum(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        const double[::1] alpha,           # IN
        double[::1] w):                    # INOUT  w += sum_i alpha_i x_i
    cdef Py_ssize_t i
    cdef const double* data = &X_data[0] if X_data.shape[0] > 0 else NULL
    cdef const int* indices = &X_indices[0] if X_indices.shape[0] > 0 else NULL
    cdef double* wp = &w[0] if w.shape[0] > 0 else NULL
    if alpha.shape[0] != X_indptr.shape[0] - 1:
        raise ValueError("weighted_row_sum: alpha must have one entry per row")
    with nogil:
        for i in range(alpha.shape[0]):
            if alpha[i] != 0.0:
                row_axpy(data, indices, &X_indptr[0], i, alpha[i], wp)


def oneclass_pass(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        const double[::1] QD,              # IN  ||x_i||^2
        double eps,
        double[::1] alpha,                 # INOUT
        double[::1] w,                     # INOUT  sum_i alpha_i x_i
        double[::1] G,                     # SCRATCH  gradient of the active rows
        int[::1] index,                    # INOUT  active set first
        Py_ssize_t active_size,
        unsigned char[::1] scratch,        # SCRATCH  scored_rows_nbytes(2 * l) bytes
        uint64_t[::1] rng_state):          # INOUT  quick-select pivots only
    """One outer iteration; returns ``(converged, active_size)``.  When the active set
    already meets the stopping test nothing is changed and ``converged`` is True."""
    cdef const double* data = &X_data[0] if X_data.shape[0] > 0 else NULL
    cdef const int* indices = &X_indices[0] if X_indices.shape[0] > 0 else NULL
    cdef const int64_t* indptr = &X_indptr[0]
    cdef double* wp = &w[0] if w.shape[0] > 0 else NULL
    cdef Py_ssize_t n_rows = alpha.shape[0]
    cdef ScoredRow* up
    cdef ScoredRow* low
    cdef uint64_t* state
    cdef Py_ssize_t s, i, j, len_up, len_low, n_pairs
    cdef int tmp
    cdef double negGmax = -INFINITY, negGmin = INFINITY
    cdef double Gi, Gj, quad_coef, delta, total, old_alpha_i
    cdef bint converged = False

    if (X_indptr.shape[0] != n_rows + 1 or QD.shape[0] != n_rows or G.shape[0] != n_rows
            or index.shape[0] != n_rows or not 0 <= active_size <= n_rows
            or rng_state.shape[0] < 1):
        raise ValueError("oneclass_pass: arrays disagree with the number of rows")
    if scratch.shape[0] < <Py_ssize_t>(2 * n_rows * sizeof(ScoredRow)):
        raise ValueError("oneclass_pass: scratch buffer smaller than scored_rows_nbytes(2 * l)")
    state = &rng_state[0]
    # candidates of I_up in the first half, of I_low in the second half
    up = <ScoredRow*>&scratch[0] if n_rows > 0 else NULL
    low = up + n_rows if n_rows > 0 else NULL

    with nogil:
        for s in range(active_size):
            i = index[s]
            G[i] = row_dot(data, indices, indptr, i, wp)
            if alpha[i] < 1.0 and -G[i] > negGmax:
                negGmax = -G[i]
            if alpha[i] > 0.0 and -G[i] < negGmin:
                negGmin = -G[i]

        if negGmax - negGmin < eps:
            converged = True
        else:
            # shrink rows at a bound whose gradient points further out of the box
            s = 0
            while s < active_size:
                i = index[s]
                if (alpha[i] == 1.0 and -G[i] > negGmax) or (alpha[i] == 0.0 and -G[i] < negGmin):
                    active_size -= 1
                    tmp = index[s]; index[s] = index[active_size]; index[active_size] = tmp
                else:
                    s += 1

            len_up = 0
            len_low = 0
            for s in range(active_size):
                i = index[s]
                if alpha[i] < 1.0:
                    up[len_up].value = -G[i]
                    up[len_up].index = <int>i
                    len_up += 1
                if alpha[i] > 0.0:
                    low[len_low].value = -G[i]
                    low[len_low].index = <int>i
                    len_low += 1
            n_pairs = active_size // 10
            if n_pairs < 1:
                n_pairs = 1
            if len_up < n_pairs:
                n_pairs = len_up
            if len_low < n_pairs:
                n_pairs = len_low

            if n_pairs > 0:
                # the n_pairs largest of I_up, ascending, at the end of up[]
                select_kth(up, 0, len_up - 1, len_up - n_pairs, state)
                qsort(&up[len_up - n_pairs], n_pairs, sizeof(ScoredRow), compare_scored)
                # the n_pairs smallest of I_low, ascending, at the start of low[]
                select_kth(low, 0, len_low - 1, n_pairs - 1, state)
                qsort(low, n_pairs, sizeof(ScoredRow), compare_scored)

            for s in range(n_pairs):
                i = up[len_up - s - 1].index
                j = low[s].index
                if (alpha[i] == 0.0 and alpha[j] == 0.0) or (alpha[i] == 1.0 and alpha[j] == 1.0):
                    continue
                Gi = row_dot(data, indices, indptr, i, wp)
                Gj = row_dot(data, indices, indptr, j, wp)
                if not ((alpha[i] < 1.0 and alpha[j] > 0.0 and -Gj + 1e-12 < -Gi) or
                        (alpha[i] > 0.0 and alpha[j] < 1.0 and -Gi + 1e-12 < -Gj)):
                    continue
                quad_coef = QD[i] + QD[j] - 2.0 * rows_dot(data, indices, indptr, i, j)
                if quad_coef <= 0.0:
                    quad_coef = 1e-12
                delta = (Gi - Gj) / quad_coef
                old_alpha_i = alpha[i]
                total = alpha[i] + alpha[j]
                alpha[i] = alpha[i] - delta
                alpha[j] = alpha[j] + delta
                # clip to the box along alpha_i + alpha_j = total
                if total > 1.0:
                    if alpha[i] > 1.0:
                        alpha[i] = 1.0
                        alpha[j] = total - 1.0
                else:
                    if alpha[j] < 0.0:
                        alpha[j] = 0.0
                        alpha[i] = total
                if total > 1.0:
                    if alpha[j] > 1.0:
                        alpha[j] = 1.0
                        alpha[i] = total - 1.0
                else:
                    if alpha[i] < 0.0:
                        alpha[i] = 0.0
                        alpha[j] = total
                delta = alpha[i] - old_alpha_i
                row_axpy(data, indices, indptr, i, delta, wp)
                row_axpy(data, indices, indptr, j, -delta, wp)

    return converged, active_size
