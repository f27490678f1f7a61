# Dual coordinate descent for L2-regularised L1- and L2-loss SVMs, over coded rows.
#
# Solves (Hsieh et al., ICML 2008, Algorithm 3; LIBLINEAR's solve_l2r_l1l2_svc)
#
#     min_alpha  1/2 alpha^T (Q + D) alpha - e^T alpha,   0 <= alpha_i <= U_i,
#     Q_ij = y_i y_j <z_i, z_j>,
#
# L1 loss (-s 3): D_ii = 0, U_i = C_i;  L2 loss (-s 1): D_ii = 1/(2 C_i), U_i = inf,
# keeping W = sum_i y_i alpha_i z_i so that the gradient of coordinate i is
#
#     G_i = y_i <W, z_i> - 1 + D_ii alpha_i .
#
# z_i is the implicit feature gamma(x_i) (x) [x_i; B] of _rows.pxd: with the linear
# coding this is LIBLINEAR's solver, with a local coding it is the dual-CD LL-SVM
# (LL-SVM paper eq. 3 solved "as a QP"; anchor-plane LIB-LLSVM, seed 000 eq. 9, whose
# single bias is the shared_bias coordinate of _rows.pxd, weight W[-1]).
#
# One call = one outer iteration (a random permutation of the active set and one
# sweep with shrinking).  The Python driver owns the stopping rule, the shrinking
# thresholds PGmax_old / PGmin_old between calls and the iteration cap.  An optional
# stop flag (Ctrl-C, _stop.pxd) ends the sweep early; the driver then raises.
#
# CoCoA+ local subproblem (Ma, Smith, Jaggi et al., ICML 2015, "Adding vs.
# averaging in distributed primal-dual optimization", eq. (9), G_k^{sigma'}):
# with the rows split into K partitions P_k, partition k improves its own
# coordinates alpha_i + dalpha_i (i in P_k) on
#
#     min_dalpha  <W, u_k> + sigma'/2 ||u_k||^2
#                 + sum_{i in P_k} [ D_ii/2 (alpha_i + dalpha_i)^2 - (alpha_i + dalpha_i) ],
#     u_k = sum_{i in P_k} y_i dalpha_i z_i ,
#
# (eq. (9) in LIBLINEAR's scaling, lambda n = 1, up to its constant terms), and the
# driver adds the updates, W <- W + gamma sum_k u_k with gamma = 1 and sigma' =
# gamma K (the paper's safe choice).  Coordinate i of the subproblem has gradient
# y_i <W + sigma' u_k, z_i> - 1 + D_ii (alpha_i + dalpha_i) and curvature
# sigma' ||z_i||^2 + D_ii, so this pass solves it unchanged when it runs on the
# partition's working copy  W~ = W + sigma' u_k  with
#
#     sigma = sigma'  (the scale of every axpy into W~),
#     QD_i  = sigma' ||z_i||^2 + D_ii ,
#
# over an index holding the partition's rows only.  The driver recovers
# u_k = (W~ - W) / sigma'.  sigma = 1 with one partition is LIBLINEAR's pass (the
# axpy scale 1.0 * d is d exactly).
from libc.math cimport fabs
from libc.stdint cimport int64_t, uint64_t

from lcoding.core._rng cimport rng_shuffle_prefix
from lcoding.core._rows cimport CodedRows, make_rows, coded_dot, coded_axpy, coded_sqnorm
from lcoding.core._stop cimport stop_pointer, stop_requested

cdef double INF = float("inf")


def coded_row_sqnorms(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features, double bias,
        const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,  # IN
        double[::1] out,   # OUT ||z_i||^2
        double shared_bias=-1.0):
    cdef CodedRows rows = make_rows(X_data, X_indices, X_indptr, n_features, bias,
                                    anchor_idx, coding_weight, shared_bias, 0)
    cdef Py_ssize_t i
    with nogil:
        for i in range(out.shape[0]):
            out[i] = coded_sqnorm(&rows, i)


def coded_rows_fill(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features, double bias,
        const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,  # IN, anchors ascending per row
        double shared_bias, Py_ssize_t shared_bias_pos,
        const int64_t[::1] Z_indptr,       # IN  (n + 1,) from the callers' counts
        double[::1] Z_data,                # OUT
        int[::1] Z_indices,                # OUT
        Py_ssize_t start, Py_ssize_t stop):  # the rows written (threads take ranges)
    """z_i written out as CSR (what the primal Newton solver takes): for every anchor
    a_ij with a non-zero weight g_ij, in the row's (ascending) anchor order, the
    entries g_ij x_ic at columns a_ij * stride + c, then g_ij B at a_ij * stride +
    n_features when B >= 0; the shared bias B' at ``shared_bias_pos`` last.  Columns
    come out sorted when the anchors of each row are ascending."""
    cdef CodedRows rows = make_rows(X_data, X_indices, X_indptr, n_features, bias,
                                    anchor_idx, coding_weight, shared_bias, shared_bias_pos)
    cdef Py_ssize_t i, j, base, a
    cdef int64_t p, q
    cdef double g
    with nogil:
        for i in range(start, stop):
            q = Z_indptr[i]
            base = i * rows.k
            for j in range(rows.k):
                g = rows.coding_weight[base + j]
                if g == 0.0:
                    continue
                a = rows.anchor_idx[base + j] * rows.stride
                for p in range(X_indptr[i], X_indptr[i + 1]):
                    Z_data[q] = g * X_data[p]
                    Z_indices[q] = <int>(a + X_indices[p])
                    q += 1
                if bias >= 0:
                    Z_data[q] = g * bias
                    Z_indices[q] = <int>(a + n_features)
                    q += 1
            if shared_bias >= 0:
                Z_data[q] = shared_bias
                Z_indices[q] = <int>shared_bias_pos
                q += 1


def dual_cd_pass(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features, double bias,
        const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,  # IN
        const signed char[::1] y,          # IN  +1 / -1
        const double[::1] QD,              # IN  sigma ||z_i||^2 + D_ii
        const double[::1] diag,            # IN  D_ii
        const double[::1] upper_bound,     # IN  U_i
        double[::1] alpha,                 # INOUT
        double[::1] W,                     # INOUT  n_anchors * stride
        int[::1] index,                    # INOUT  active set first, in visiting order
        Py_ssize_t active_size,
        double PGmax_old, double PGmin_old,
        uint64_t[::1] rng_state,           # INOUT
        double shared_bias=-1.0,           # one bias shared by all anchors, weight W[-1]
        double sigma=1.0,                  # CoCoA+ sigma': scale of the axpy into W
        const unsigned char[::1] stop=None):  # IN stop flag: return mid-sweep when set
    """One outer iteration; returns ``(active_size, PGmax_new, PGmin_new)``.

    ``sigma`` != 1: a pass of the CoCoA+ local subproblem (header; ``W`` is the
    partition's working copy, ``QD`` holds ``sigma ||z_i||^2 + D_ii``)."""
    cdef CodedRows rows = make_rows(X_data, X_indices, X_indptr, n_features, bias,
                                    anchor_idx, coding_weight, shared_bias, W.shape[0] - 1)
    cdef Py_ssize_t s, i, j
    cdef int tmp
    cdef double G, PG, U, alpha_old, d
    cdef double PGmax_new = -INF
    cdef double PGmin_new = INF
    cdef signed char yi
    cdef double* Wp = &W[0]
    cdef uint64_t* state = &rng_state[0]
    cdef const unsigned char* stop_p = stop_pointer(stop)

    with nogil:
        rng_shuffle_prefix(&index[0], active_size, state)

        s = 0
        while s < active_size:
            if stop_requested(stop_p):
                break               # Ctrl-C: the caller discards this pass
            i = index[s]
            yi = y[i]
            G = yi * coded_dot(&rows, i, Wp) - 1.0 + alpha[i] * diag[i]
            U = upper_bound[i]
            PG = 0.0
            if alpha[i] == 0.0:
                if G > PGmax_old:
                    # shrink: bound variable that is unlikely to move
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
                if QD[i] > 0.0:
                    alpha[i] = alpha[i] - G / QD[i]
                else:
                    # an empty row under the L1 loss (no bias): the step is G / 0, i.e.
                    # the bound in the descent direction (LIBLINEAR's -inf, then clipped)
                    alpha[i] = U if G < 0.0 else 0.0
                if alpha[i] < 0.0:
                    alpha[i] = 0.0
                elif alpha[i] > U:
                    alpha[i] = U
                d = (alpha[i] - alpha_old) * yi
                coded_axpy(&rows, i, sigma * d, Wp)
            s += 1

    return active_size, PGmax_new, PGmin_new


def dual_w_from_alpha(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features, double bias,
        const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,  # IN
        const signed char[::1] y,          # IN  +1 / -1
        const double[::1] alpha,           # IN  a dual point (warm start)
        double[::1] W,                     # OUT W = sum_i y_i alpha_i z_i
        double shared_bias=-1.0,
        const unsigned char[::1] stop=None):  # IN stop flag: return early when set
    """``W = sum_i y_i alpha_i z_i``: the primal point of a given dual point, so that
    :func:`dual_cd_pass` can start from ``alpha`` (the warm start of the ``-C``
    parameter search along C).  Returns False when the stop flag ended it early."""
    cdef CodedRows rows = make_rows(X_data, X_indices, X_indptr, n_features, bias,
                                    anchor_idx, coding_weight, shared_bias, W.shape[0] - 1)
    cdef Py_ssize_t i, j
    cdef double* Wp = &W[0]
    cdef const unsigned char* stop_p = stop_pointer(stop)
    cdef bint done = True
    with nogil:
        for j in range(W.shape[0]):
            Wp[j] = 0.0
        for i in range(alpha.shape[0]):
            if (i & 1023) == 0 and stop_requested(stop_p):
                done = False
                break
            if alpha[i] != 0.0:
                coded_axpy(&rows, i, y[i] * alpha[i], Wp)
    return done
