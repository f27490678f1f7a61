# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# Dual coordinate descent of LIB-LLSVM with orthogonal coordinate coding (seed 000, eq. 9).
#
# The implicit feature of row i is
#
#     z_i = [gamma(x_i) (x) x_i ; B]          (one bias coordinate, not one per plane)
#
# with the dense OCC code gamma(x_i) of M planes.  The M*d block is the coded row of
# _rows.pxd with the bias switched off (anchor_idx[i] = 0..M-1, coding_weight[i] =
# gamma(x_i)); the single bias weight is W[M*d].  Otherwise this is LIBLINEAR's
# solve_l2r_l1l2_svc pass, line for line the same as _dual_cd.dual_cd_pass.
from libc.math cimport fabs
from libc.stdint cimport int64_t, uint64_t

from lcoding._rng cimport rng_shuffle_prefix
from lcoding._rows cimport CodedRows, make_rows, coded_dot, coded_axpy, coded_sqnorm

cdef double INF = float("inf")


def occ_row_sqnorms(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features, double bias,
        const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,  # IN
        double[::1] out):  # OUT ||z_i||^2 = ||gamma_i||^2 ||x_i||^2 + B^2 (B >= 0)
    cdef CodedRows rows = make_rows(X_data, X_indices, X_indptr, n_features, -1.0,
                                    anchor_idx, coding_weight)
    cdef Py_ssize_t i
    cdef double b2 = bias * bias if bias >= 0 else 0.0
    with nogil:
        for i in range(out.shape[0]):
            out[i] = coded_sqnorm(&rows, i) + b2


def occ_dual_cd_pass(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features, double bias,
        const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,  # IN (n, M)
        const signed char[::1] y,          # IN  +1 / -1
        const double[::1] QD,              # IN  ||z_i||^2 + D_ii
        const double[::1] diag,            # IN  D_ii
        const double[::1] upper_bound,     # IN  U_i
        double[::1] alpha,                 # INOUT
        double[::1] W,                     # INOUT  M * d + 1 (last: the single bias weight)
        int[::1] index,                    # INOUT  active set first, in visiting order
        Py_ssize_t active_size,
        double PGmax_old, double PGmin_old,
        uint64_t[::1] rng_state):          # INOUT
    """One outer iteration; returns ``(active_size, PGmax_new, PGmin_new)``."""
    cdef CodedRows rows = make_rows(X_data, X_indices, X_indptr, n_features, -1.0,
                                    anchor_idx, coding_weight)
    cdef Py_ssize_t M = anchor_idx.shape[1]
    if W.shape[0] != M * n_features + 1:
        raise ValueError(f"W has {W.shape[0]} entries, expected {M * n_features + 1}")
    if anchor_idx.shape[0] != y.shape[0] or coding_weight.shape[0] != y.shape[0]:
        raise ValueError("coding arrays and labels differ in length")
    cdef Py_ssize_t s, i
    cdef int tmp
    cdef double G, PG, U, alpha_old, d
    cdef double PGmax_new = -INF
    cdef double PGmin_new = INF
    cdef double B = bias if bias >= 0 else 0.0
    cdef signed char yi
    cdef double* Wp = &W[0]
    cdef double* wb = &W[M * n_features]
    cdef uint64_t* state = &rng_state[0]

    with nogil:
        rng_shuffle_prefix(&index[0], active_size, state)

        s = 0
        while s < active_size:
            i = index[s]
            yi = y[i]
            G = yi * (coded_dot(&rows, i, Wp) + wb[0] * B) - 1.0 + alpha[i] * diag[i]
            U = upper_bound[i]
            PG = 0.0
            if alpha[i] == 0.0:
                if G > PGmax_old:
                    active_size -= 1
                    tmp = index[s]; index[s] = index[active_size]; index[active_size] = tmp
                    continue
                elif G < 0.0:
                    PG = G
            elif alpha[i] == U:
                if G < PGmin_old:
                    active_size -= 1
                    tmp = index[s]; index[s] = index[active_size]; index[active_size] = tmp
                    continue
                elif G > 0.0:
                    PG = G
            else:
                PG = G

            if PG > PGmax_new:
                PGmax_new = PG
            if PG < PGmin_new:
                PGmin_new = PG

            if fabs(PG) > 1.0e-12:
                alpha_old = alpha[i]
                alpha[i] = alpha[i] - G / QD[i]
                if alpha[i] < 0.0:
                    alpha[i] = 0.0
                elif alpha[i] > U:
                    alpha[i] = U
                d = (alpha[i] - alpha_old) * yi
                coded_axpy(&rows, i, d, Wp)
                wb[0] += d * B
            s += 1

    return active_size, PGmax_new, PGmin_new
