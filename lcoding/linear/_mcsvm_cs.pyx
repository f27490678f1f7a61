# Crammer-Singer multi-class SVM (-s 4) by sequential dual coordinate descent.
#
# Solves (Crammer & Singer, JMLR 2001; Keerthi et al., KDD 2008; appendix of the
# LIBLINEAR paper, Fan et al. 2008; LIBLINEAR's Solver_MCSVM_CS)
#
#     min_alpha  1/2 sum_m ||w_m||^2 + sum_i sum_m e^m_i alpha^m_i,
#     s.t.       sum_m alpha^m_i = 0,   alpha^m_i <= C^m_i,
#     w_m = sum_i alpha^m_i x_i,   e^m_i = [y_i != m],   C^m_i = C_{y_i} [y_i == m],
#
# where x_i carries the virtual bias coordinate B when B >= 0.  With a local coding
# (anchor_idx / coding_weight, _rows.pxd) x_i is the implicit feature
# z_i = gamma(x_i) (x) [x_i; B]: the Crammer-Singer alternative to one-vs-all the
# LL-SVM paper names (Ladicky & Torr 2011, sec. 3), anchors and codes shared by the
# classes; W then has n_anchors * stride rows and row a * stride + j holds feature j
# at anchor a for every class (no rows when stride = 0: no features and no bias, so
# every z_i is zero and nothing is trained).  z_i is never materialised.  Each visit of a row
# i solves its whole nr_class-variable sub-problem exactly: with A = ||x_i||^2 and
# B_m = G_m - A alpha^m_i (G_m = w_m . x_i + e^m_i), the solution is
# alpha^m_i = min(C^m_i, (beta - B_m) / A) with beta found by sorting B (plus A C_{y_i}
# at the true class) in decreasing order and accumulating until the threshold holds.
#
# Shrinking: per row, classes whose alpha sits at its bound with a gradient below the
# row's smallest free gradient drop out (alpha_index[i] keeps the active classes first,
# y_index[i] is where the true class sits in it); rows with at most one active class
# drop out of the sweep.
#
# One call = one outer iteration (random permutation of the active rows and one
# sweep); the Python driver owns the shrinking tolerance schedule, the un-shrinking,
# the stopping rule and the iteration cap.  An optional stop flag (Ctrl-C,
# _stop.pxd) ends the sweep early; the driver then raises.
from libc.math cimport fabs, INFINITY
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport qsort

from lcoding.core._rng cimport rng_shuffle_prefix
from lcoding.core._rows cimport CodedRows, make_rows
from lcoding.core._stop cimport stop_pointer, stop_requested

# Above this many active classes the sub-problem sorts with qsort; below, insertion
# sort is faster (no call per comparison) and the usual case.
cdef enum:
    INSERTION_SORT_MAX = 32


cdef int compare_descending(const void* a, const void* b) noexcept nogil:
    cdef double x = (<const double*>a)[0]
    cdef double y = (<const double*>b)[0]
    if x > y:
        return -1
    if x < y:
        return 1
    return 0


cdef inline void sort_descending(double* D, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t r, q
    cdef double v
    if n > INSERTION_SORT_MAX:
        qsort(D, n, sizeof(double), compare_descending)
        return
    for r in range(1, n):
        v = D[r]
        q = r
        while q > 0 and D[q - 1] < v:
            D[q] = D[q - 1]
            q -= 1
        D[q] = v


cdef inline void solve_sub_problem(double A, Py_ssize_t yi, double C_yi, Py_ssize_t n_active,
                                   const double* B, double* D, double* alpha_new) noexcept nogil:
    # Exact minimiser of the row's sub-problem over its n_active active classes
    # (B[m] and alpha_new[m] are indexed by position in alpha_index).
    cdef Py_ssize_t r
    cdef double beta
    for r in range(n_active):
        D[r] = B[r]
    if yi < n_active:
        D[yi] += A * C_yi
    sort_descending(D, n_active)
    beta = D[0] - A * C_yi
    r = 1
    while r < n_active and beta < r * D[r]:
        beta += D[r]
        r += 1
    beta /= r
    for r in range(n_active):
        if r == yi:
            alpha_new[r] = min(C_yi, (beta - B[r]) / A)
        else:
            alpha_new[r] = min(0.0, (beta - B[r]) / A)


cdef inline void x_class_dots(const CodedRows* rows, Py_ssize_t i, const double* W,
                              Py_ssize_t nr_class, double g, const int* classes,
                              Py_ssize_t n_act, double* G) noexcept nogil:
    # G[m] += g * (W_{classes[m]} . [x_i; B]) for W's block starting at W (one anchor)
    cdef int64_t q
    cdef Py_ssize_t m
    cdef const double* w_row
    cdef double v
    for q in range(rows.indptr[i], rows.indptr[i + 1]):
        w_row = W + rows.indices[q] * nr_class
        v = g * rows.data[q]
        for m in range(n_act):
            G[m] += w_row[classes[m]] * v
    if rows.bias >= 0:
        w_row = W + rows.n_features * nr_class
        v = g * rows.bias
        for m in range(n_act):
            G[m] += w_row[classes[m]] * v


cdef inline void x_class_axpy(const CodedRows* rows, Py_ssize_t i, double* W,
                              Py_ssize_t nr_class, double g, const int* classes,
                              const double* d, Py_ssize_t n_d) noexcept nogil:
    # W_{classes[m]} += g * d[m] * [x_i; B] for W's block starting at W (one anchor)
    cdef int64_t q
    cdef Py_ssize_t m
    cdef double* w_row
    cdef double v
    for q in range(rows.indptr[i], rows.indptr[i + 1]):
        w_row = W + rows.indices[q] * nr_class
        v = g * rows.data[q]
        for m in range(n_d):
            w_row[classes[m]] += d[m] * v
    if rows.bias >= 0:
        w_row = W + rows.n_features * nr_class
        v = g * rows.bias
        for m in range(n_d):
            w_row[classes[m]] += d[m] * v


cdef inline Py_ssize_t row_anchor(const CodedRows* rows, Py_ssize_t i, Py_ssize_t j,
                                  double* g) noexcept nogil:
    # anchor id and coding weight of the j-th of row i's rows.k codes (the linear
    # coding: anchor 0, weight 1)
    if rows.anchor_idx == NULL:
        g[0] = 1.0
        return 0
    g[0] = rows.coding_weight[i * rows.k + j]
    return rows.anchor_idx[i * rows.k + j]


cdef inline void coded_class_dots(const CodedRows* rows, Py_ssize_t i, const double* W,
                                  Py_ssize_t nr_class, const int* classes, Py_ssize_t n_act,
                                  double* G) noexcept nogil:
    # G[m] += <W_{classes[m]}, z_i>, z_i = gamma(x_i) (x) [x_i; B]
    cdef Py_ssize_t j, a
    cdef double g
    for j in range(rows.k):
        a = row_anchor(rows, i, j, &g)
        if g != 0.0:
            x_class_dots(rows, i, W + a * rows.stride * nr_class, nr_class, g, classes,
                         n_act, G)


cdef inline void coded_class_axpy(const CodedRows* rows, Py_ssize_t i, double* W,
                                  Py_ssize_t nr_class, const int* classes, const double* d,
                                  Py_ssize_t n_d) noexcept nogil:
    # W_{classes[m]} += d[m] * z_i
    cdef Py_ssize_t j, a
    cdef double g
    for j in range(rows.k):
        a = row_anchor(rows, i, j, &g)
        if g != 0.0:
            x_class_axpy(rows, i, W + a * rows.stride * nr_class, nr_class, g, classes, d, n_d)


cdef inline bint be_shrunk(Py_ssize_t m, Py_ssize_t yi, double alpha_im, double C_yi,
                           const double* G, double minG) noexcept nogil:
    cdef double bound = C_yi if m == yi else 0.0
    return alpha_im == bound and G[m] < minG


def mcsvm_cs_pass(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features, double bias,
        const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,  # IN (0 rows: linear)
        const int[::1] y,                  # IN  class index 0..nr_class-1
        const double[::1] class_C,         # IN  C of each class
        const double[::1] QD,              # IN  ||[x_i; B]||^2 (> 0 for the rows to train)
        double[:, ::1] alpha,              # INOUT (l, nr_class), by class
        double[:, ::1] W,                  # INOUT (n_anchors * stride, nr_class), feature-major
        int[:, ::1] alpha_index,           # INOUT (l, nr_class) active classes first
        int[::1] y_index,                  # INOUT position of y_i in alpha_index[i]
        int[::1] active_size_i,            # INOUT active classes of each row
        int[::1] index,                    # INOUT active rows first, in visiting order
        Py_ssize_t active_size,
        double[:, ::1] work,               # SCRATCH (5, nr_class)
        int[::1] changed_class,            # SCRATCH (nr_class,)
        uint64_t[::1] rng_state,           # INOUT
        const unsigned char[::1] stop=None):  # IN stop flag: return mid-sweep when set
    """One outer iteration; returns ``(active_size, stopping)`` where ``stopping`` is
    the largest gradient spread max G - min G over the rows updated (-inf if none)."""
    cdef Py_ssize_t nr_class = alpha.shape[1]
    cdef Py_ssize_t s, i, j, m, q_m, n_act, yi, nz_d
    cdef int tmp
    cdef double Ai, C_yi, minG, maxG, d, v
    cdef double stopping = -INFINITY
    cdef double* Gv
    cdef double* Bv
    cdef double* Dv
    cdef double* alpha_new
    cdef double* d_val
    cdef double* alpha_i
    cdef int* alpha_index_i
    cdef int* d_ind
    cdef double* Wp
    cdef uint64_t* state

    cdef Py_ssize_t n = X_indptr.shape[0] - 1
    if (y.shape[0] != n or QD.shape[0] != n or alpha.shape[0] != n or alpha_index.shape[0] != n
            or y_index.shape[0] != n or active_size_i.shape[0] != n or index.shape[0] != n
            or not 0 <= active_size <= n or class_C.shape[0] != nr_class
            or alpha_index.shape[1] != nr_class or W.shape[1] != nr_class
            or rng_state.shape[0] < 1):
        raise ValueError("mcsvm_cs_pass: arrays disagree with the rows, features or classes")
    cdef Py_ssize_t stride = n_features + (1 if bias >= 0 else 0)
    if anchor_idx.shape[0] > 0:
        # the caller (lcoding.local.coding) guarantees anchor ids in [0, W.shape[0] / stride)
        if (anchor_idx.shape[0] != n or coding_weight.shape[0] != n
                or (stride == 0 and W.shape[0] != 0)
                or (stride > 0 and W.shape[0] % stride != 0)):
            raise ValueError("mcsvm_cs_pass: the coding disagrees with the rows or W")
    elif W.shape[0] < stride:
        raise ValueError("mcsvm_cs_pass: W has fewer rows than the features (and bias)")
    cdef CodedRows rows = make_rows(X_data, X_indices, X_indptr, n_features, bias,
                                    anchor_idx, coding_weight, -1.0, 0)
    if nr_class == 0 or n == 0:
        return active_size, stopping
    if work.shape[0] < 5 or work.shape[1] < nr_class or changed_class.shape[0] < nr_class:
        raise ValueError("mcsvm_cs_pass: work must have shape (5, nr_class) and "
                         "changed_class (nr_class,)")
    state = &rng_state[0]
    Gv = &work[0, 0]
    Bv = &work[1, 0]
    Dv = &work[2, 0]
    alpha_new = &work[3, 0]
    d_val = &work[4, 0]
    d_ind = &changed_class[0]
    Wp = &W[0, 0] if W.shape[0] > 0 else NULL

    cdef const unsigned char* stop_p = stop_pointer(stop)
    with nogil:
        rng_shuffle_prefix(&index[0], active_size, state)

        s = 0
        while s < active_size:
            if stop_requested(stop_p):
                break               # Ctrl-C: the caller discards this pass
            i = index[s]
            Ai = QD[i]
            if Ai <= 0.0:
                s += 1
                continue
            alpha_i = &alpha[i, 0]
            alpha_index_i = &alpha_index[i, 0]
            n_act = active_size_i[i]
            yi = y_index[i]
            C_yi = class_C[y[i]]

            # G_m = w_m . x_i + [m != y_i], for the active classes in alpha_index order
            for m in range(n_act):
                Gv[m] = 1.0
            if yi < n_act:
                Gv[yi] = 0.0
            coded_class_dots(&rows, i, Wp, nr_class, alpha_index_i, n_act, Gv)

            minG = INFINITY
            maxG = -INFINITY
            for m in range(n_act):
                if alpha_i[alpha_index_i[m]] < 0.0 and Gv[m] < minG:
                    minG = Gv[m]
                if Gv[m] > maxG:
                    maxG = Gv[m]
            if yi < n_act:
                if alpha_i[y[i]] < C_yi and Gv[yi] < minG:
                    minG = Gv[yi]

            # shrink classes: swap each shrunk class behind the active ones
            m = 0
            while m < n_act:
                if be_shrunk(m, yi, alpha_i[alpha_index_i[m]], C_yi, Gv, minG):
                    n_act -= 1
                    while n_act > m:
                        if not be_shrunk(n_act, yi, alpha_i[alpha_index_i[n_act]], C_yi, Gv, minG):
                            tmp = alpha_index_i[m]
                            alpha_index_i[m] = alpha_index_i[n_act]
                            alpha_index_i[n_act] = tmp
                            v = Gv[m]; Gv[m] = Gv[n_act]; Gv[n_act] = v
                            if yi == n_act:
                                yi = m
                            elif yi == m:
                                yi = n_act
                            break
                        n_act -= 1
                m += 1
            active_size_i[i] = <int>n_act
            y_index[i] = <int>yi

            if n_act <= 1:
                active_size -= 1
                tmp = index[s]; index[s] = index[active_size]; index[active_size] = tmp
                continue
            s += 1

            if maxG - minG <= 1e-12:
                continue
            if maxG - minG > stopping:
                stopping = maxG - minG

            for m in range(n_act):
                Bv[m] = Gv[m] - Ai * alpha_i[alpha_index_i[m]]
            solve_sub_problem(Ai, yi, C_yi, n_act, Bv, Dv, alpha_new)

            nz_d = 0
            for m in range(n_act):
                q_m = alpha_index_i[m]
                d = alpha_new[m] - alpha_i[q_m]
                alpha_i[q_m] = alpha_new[m]
                if fabs(d) >= 1e-12:
                    d_ind[nz_d] = <int>q_m
                    d_val[nz_d] = d
                    nz_d += 1

            coded_class_axpy(&rows, i, Wp, nr_class, d_ind, d_val, nz_d)

    return active_size, stopping
