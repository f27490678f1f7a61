# Dual coordinate descent for L2-regularised logistic regression (-s 7), over
# coded rows.
#
# Solves (Yu, Huang & Lin, "Dual coordinate descent methods for logistic
# regression and maximum entropy models", MLJ 2011, Algorithm 5; LIBLINEAR's
# solve_l2r_lr_dual)
#
#     min_alpha  1/2 alpha^T Q alpha
#                + sum_i [alpha_i log alpha_i + (C_i - alpha_i) log(C_i - alpha_i)],
#     0 <= alpha_i <= C_i,    Q_ij = y_i y_j <z_i, z_j>,
#
# keeping W = sum_i y_i alpha_i z_i.  Each variable is stored as the pair
# (alpha_i, C_i - alpha_i) = (alpha[2i], alpha[2i+1]), so that whichever of the two
# is the small one can be updated without cancellation.  With a = ||z_i||^2 and
# b = y_i <W, z_i>, the one-variable sub-problem over the chosen member z of the
# pair (sign = +1 for alpha_i, -1 for C_i - alpha_i) is
#
#     g(z) = z log z + (C - z) log(C - z) + a/2 (z - z_old)^2 + sign b (z - z_old),
#     g'(z) = a (z - z_old) + sign b + log(z / (C - z)),   g''(z) = a + C / (z (C - z)),
#
# minimised by a guarded Newton method (a step leaving (0, C) on the left is
# replaced by z <- xi z, xi = 0.1) until |g'| < innereps.
#
# z_i is the implicit feature gamma(x_i) (x) [x_i; B] of _rows.pxd (the plain
# [x_i; B] for the linear coding).  Rows with C_i = 0 (class weight 0) have the
# single feasible point alpha_i = 0 and are skipped (LIBLINEAR would divide 0/0).
#
# One call = one outer iteration (a random permutation of all rows and one sweep).
# The Python driver owns innereps, the Gmax stopping rule and the iteration cap.
from libc.math cimport fabs, log
from libc.stdint cimport int64_t, uint64_t

from lcoding.core._csr_check cimport csr_problem
from lcoding.core._rng cimport rng_below
from lcoding.core._rows cimport CodedRows, make_rows, coded_dot, coded_axpy

cdef int MAX_INNER_NEWTON = 100      # LIBLINEAR's max_inner_iter
cdef double INNER_SHRINK = 0.1       # xi of the paper: z <- xi z on a step out of (0, C)


cdef void check_shapes(const double[::1] X_data, const int[::1] X_indices,
                       const int64_t[::1] X_indptr, Py_ssize_t n_features, double bias,
                       const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,
                       Py_ssize_t W_size, bint check_rows, str caller) except *:
    # Everything the loops index must lie inside its array: the CSR arrays (an
    # O(nnz) scan, done when check_rows), the coding, and W, which needs a row of
    # length `stride` for the largest anchor id the coding names.
    cdef Py_ssize_t n = X_indptr.shape[0] - 1
    cdef Py_ssize_t r, q, largest = 0
    cdef bint negative = False
    cdef Py_ssize_t stride = n_features + (1 if bias >= 0 else 0)
    cdef str problem
    if n < 0:
        raise ValueError(f"{caller}: indptr is empty")
    if check_rows:
        problem = csr_problem(X_indices, X_indptr, X_data.shape[0], n_features)
        if problem is not None:
            raise ValueError(f"{caller}: {problem}")
    if anchor_idx.shape[0] > 0:
        if anchor_idx.shape[0] != n or coding_weight.shape[0] != n \
                or coding_weight.shape[1] != anchor_idx.shape[1]:
            raise ValueError(f"{caller}: the coding arrays must have one row per data row")
        with nogil:
            for r in range(n):
                for q in range(anchor_idx.shape[1]):
                    if anchor_idx[r, q] < 0:
                        negative = True
                    elif anchor_idx[r, q] > largest:
                        largest = anchor_idx[r, q]
        if negative:
            raise ValueError(f"{caller}: negative anchor index in the coding")
    if (largest + 1) * stride > W_size:
        raise ValueError(f"{caller}: W has {W_size} values, the rows need {(largest + 1) * stride}")


def accumulate_rows(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features, double bias,
        const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,  # IN
        const double[::1] coef,            # IN  one coefficient per row
        double[::1] W):                    # INOUT  W += sum_i coef_i z_i
    check_shapes(X_data, X_indices, X_indptr, n_features, bias, anchor_idx, coding_weight,
                 W.shape[0], True, "accumulate_rows")
    if coef.shape[0] != X_indptr.shape[0] - 1:
        raise ValueError("accumulate_rows: one coefficient per row expected")
    cdef CodedRows rows = make_rows(X_data, X_indices, X_indptr, n_features, bias,
                                    anchor_idx, coding_weight)
    cdef Py_ssize_t i
    cdef double* Wp = &W[0] if W.shape[0] > 0 else NULL
    with nogil:
        for i in range(coef.shape[0]):
            if coef[i] != 0.0:
                coded_axpy(&rows, i, coef[i], Wp)


def lr_dual_cd_pass(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features, double bias,
        const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,  # IN
        const signed char[::1] y,          # IN  +1 / -1
        const double[::1] upper_bound,     # IN  C_i
        const double[::1] sqnorm,          # IN  ||z_i||^2
        double[::1] alpha,                 # INOUT (2 l): alpha_i, C_i - alpha_i
        double[::1] W,                     # INOUT n_anchors * stride
        int64_t[::1] index,                # INOUT visiting order, a permutation of 0..l-1
        double innereps,
        uint64_t[::1] rng_state):          # INOUT
    """One outer iteration; returns ``(Gmax, newton_steps)``: the largest |g'(z)|
    at the start of each sub-problem and the number of inner Newton steps.  The CSR
    arrays are trusted (the driver checked them through accumulate_rows)."""
    cdef Py_ssize_t l = y.shape[0]
    cdef Py_ssize_t s, i, j, ind1, ind2
    if alpha.shape[0] != 2 * l or upper_bound.shape[0] != l or sqnorm.shape[0] != l \
            or index.shape[0] != l or X_indptr.shape[0] - 1 != l or rng_state.shape[0] < 1:
        raise ValueError("lr_dual_cd_pass: array lengths disagree with the number of rows")
    check_shapes(X_data, X_indices, X_indptr, n_features, bias, anchor_idx, coding_weight,
                 W.shape[0], False, "lr_dual_cd_pass")
    for s in range(l):
        if index[s] < 0 or index[s] >= l:
            raise ValueError("lr_dual_cd_pass: index holds a row id outside [0, l)")
    cdef CodedRows rows = make_rows(X_data, X_indices, X_indptr, n_features, bias,
                                    anchor_idx, coding_weight)
    cdef int64_t tmp
    cdef int sign, inner
    cdef Py_ssize_t newton_steps = 0
    cdef double C, a, b, z, z_old, gp, gpp, z_next, Gmax = 0.0
    cdef double* Wp = &W[0] if W.shape[0] > 0 else NULL
    cdef uint64_t* state = &rng_state[0]

    with nogil:
        for s in range(l):
            j = s + rng_below(state, l - s)
            tmp = index[s]; index[s] = index[j]; index[j] = tmp

        for s in range(l):
            i = index[s]
            C = upper_bound[i]
            if C <= 0.0:
                continue
            a = sqnorm[i]
            b = y[i] * coded_dot(&rows, i, Wp)
            # minimise over alpha_i or over C_i - alpha_i, whichever moves towards 0
            ind1 = 2 * i
            ind2 = 2 * i + 1
            sign = 1
            if 0.5 * a * (alpha[ind2] - alpha[ind1]) + b < 0:
                ind1 = 2 * i + 1
                ind2 = 2 * i
                sign = -1
            z_old = alpha[ind1]
            z = z_old
            if C - z < 0.5 * C:
                z = 0.1 * z
            gp = a * (z - z_old) + sign * b + log(z / (C - z))
            if fabs(gp) > Gmax:
                Gmax = fabs(gp)

            inner = 0
            while inner <= MAX_INNER_NEWTON:
                if fabs(gp) < innereps:
                    break
                gpp = a + C / (C - z) / z
                z_next = z - gp / gpp
                if z_next <= 0:
                    z = z * INNER_SHRINK
                else:
                    z = z_next
                gp = a * (z - z_old) + sign * b + log(z / (C - z))
                newton_steps += 1
                inner += 1

            if inner > 0:
                alpha[ind1] = z
                alpha[ind2] = C - z
                coded_axpy(&rows, i, sign * (z - z_old) * y[i], Wp)

    return Gmax, newton_steps
