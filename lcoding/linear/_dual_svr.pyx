# Dual coordinate descent for L2-regularised epsilon-SVR (-s 12 and -s 13), over coded rows.
#
# Solves (Ho & Lin, "Large-scale linear support vector regression", JMLR 2012,
# Algorithm 4; LIBLINEAR's solve_l2r_l1l2_svr)
#
#     min_beta  1/2 beta^T (Q + diag(lambda)) beta - sum_i y_i beta_i + p sum_i |beta_i|,
#               -U_i <= beta_i <= U_i,          Q_ij = <z_i, z_j>,
#
# L1 loss (-s 13): lambda_i = 0, U_i = C_i;  L2 loss (-s 12): lambda_i = 1/(2 C_i), U_i = inf.
# W = sum_i beta_i z_i is kept up to date, so the smooth part of the gradient of
# coordinate i is G_i = <W, z_i> - y_i + lambda_i beta_i, and the one-variable
# problem min_d  G_i d + H_i d^2 / 2 + p |beta_i + d|  (H_i = ||z_i||^2 + lambda_i)
# has the closed-form "soft-threshold" Newton step taken below.
#
# One call = one outer iteration (a random permutation of the active set and one
# sweep with shrinking).  The Python driver owns the stopping rule
# (||violation||_1 <= eps * ||violation at iteration 0||_1), the shrinking threshold
# Gmax_old between calls, and the iteration cap.
from libc.math cimport fabs
from libc.stdint cimport int64_t, uint64_t

from lcoding.core._rng cimport rng_shuffle_prefix
from lcoding.core._rows cimport CodedRows, make_rows, coded_dot, coded_axpy


def svr_dual_pass(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features, double bias,
        const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,  # IN
        const double[::1] y,               # IN  regression targets
        const double[::1] QD,              # IN  ||z_i||^2
        const double[::1] lam,             # IN  lambda_i (diagonal added to Q)
        const double[::1] upper_bound,     # IN  U_i
        double p,                          # IN  width of the insensitive tube
        double[::1] beta,                  # INOUT
        double[::1] W,                     # INOUT  n_anchors * stride
        int[::1] index,                    # INOUT  active set first, in visiting order
        Py_ssize_t active_size,
        double Gmax_old,
        uint64_t[::1] rng_state):          # INOUT
    """One outer iteration; returns ``(active_size, Gmax_new, Gnorm1_new)``."""
    cdef Py_ssize_t n = X_indptr.shape[0] - 1
    if (y.shape[0] != n or QD.shape[0] != n or lam.shape[0] != n or upper_bound.shape[0] != n
            or beta.shape[0] != n or index.shape[0] != n or not 0 <= active_size <= n
            or W.shape[0] < n_features + (1 if bias >= 0 else 0) or rng_state.shape[0] < 1):
        raise ValueError("svr_dual_pass: arrays disagree with the number of rows or features")
    cdef CodedRows rows = make_rows(X_data, X_indices, X_indptr, n_features, bias,
                                    anchor_idx, coding_weight)
    cdef Py_ssize_t s, i, j
    cdef int tmp
    cdef double G, H, Gp, Gn, violation, d, beta_old, U, b
    cdef double Gmax_new = 0.0
    cdef double Gnorm1_new = 0.0
    cdef double* Wp = &W[0] if W.shape[0] > 0 else NULL
    cdef uint64_t* state = &rng_state[0]

    with nogil:
        rng_shuffle_prefix(&index[0], active_size, state)

        s = 0
        while s < active_size:
            i = index[s]
            b = beta[i]
            U = upper_bound[i]
            H = QD[i] + lam[i]
            G = coded_dot(&rows, i, Wp) - y[i] + lam[i] * b
            Gp = G + p
            Gn = G - p
            violation = 0.0
            if b == 0.0:
                if Gp < 0.0:
                    violation = -Gp
                elif Gn > 0.0:
                    violation = Gn
                elif Gp > Gmax_old and Gn < -Gmax_old:
                    # shrink: beta_i = 0 sits well inside the tube
                    active_size -= 1
                    tmp = index[s]; index[s] = index[active_size]; index[active_size] = tmp
                    continue
            elif b >= U:
                if Gp > 0.0:
                    violation = Gp
                elif Gp < -Gmax_old:
                    active_size -= 1
                    tmp = index[s]; index[s] = index[active_size]; index[active_size] = tmp
                    continue
            elif b <= -U:
                if Gn < 0.0:
                    violation = -Gn
                elif Gn > Gmax_old:
                    active_size -= 1
                    tmp = index[s]; index[s] = index[active_size]; index[active_size] = tmp
                    continue
            elif b > 0.0:
                violation = fabs(Gp)
            else:
                violation = fabs(Gn)

            if violation > Gmax_new:
                Gmax_new = violation
            Gnorm1_new += violation

            # Newton step of the one-variable problem, then clipped to [-U, U]
            if Gp < H * b:
                d = -Gp / H
            elif Gn > H * b:
                d = -Gn / H
            else:
                d = -b
            s += 1
            if fabs(d) < 1.0e-12:
                continue
            beta_old = b
            b = b + d
            if b < -U:
                b = -U
            if b > U:
                b = U
            beta[i] = b
            d = b - beta_old
            if d != 0.0:
                coded_axpy(&rows, i, d, Wp)

    return active_size, Gmax_new, Gnorm1_new
