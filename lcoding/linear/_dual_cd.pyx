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
#
# Block-synchronous sweep (dual_cd_block_pass, -m N in one process): the K threads
# take sigma' = 1 and meet every block of rows instead of once per pass; a merge
# adds their steps and is damped to the exact minimum of the dual along them only
# when the plain sum would raise the objective (the function's doc gives the math).
# Both kernels share LIBLINEAR's coordinate step (coordinate_step).
from libc.math cimport fabs
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy

from lcoding.core._barrier cimport barrier_wait

from lcoding.core._rng cimport rng_shuffle_prefix
from lcoding.core._rows cimport CodedRows, make_rows, coded_dot, coded_axpy, coded_sqnorm
from lcoding.core._stop cimport stop_pointer, stop_requested

cdef double INF = float("inf")


cdef struct Step:
    double G                # the coordinate's gradient before the step
    double alpha_old        # alpha_i before the step
    bint shrink             # shrunk: the caller moves i out of the active set
    bint moved              # |PG| > 1e-12: alpha_i took its step (maybe to where it was)


cdef inline Step coordinate_step(const CodedRows* rows, Py_ssize_t i, const double* W,
                                 signed char yi, double* alpha, double diag_i, double U,
                                 double QD_i, double PGmax_old, double PGmin_old,
                                 double* PGmax_new, double* PGmin_new) noexcept nogil:
    # LIBLINEAR's step on coordinate i (solve_l2r_l1l2_svc's inner loop): gradient,
    # shrinking test, projected gradient, the exact step clipped to [0, U]; the
    # caller updates W by (alpha_i - alpha_old) y_i z_i (scaled as its scheme asks)
    cdef Step st
    cdef double PG = 0.0
    st.G = yi * coded_dot(rows, i, W) - 1.0 + alpha[i] * diag_i
    st.alpha_old = alpha[i]
    st.shrink = False
    st.moved = False
    if alpha[i] == 0.0:
        if st.G > PGmax_old:
            st.shrink = True        # a bound variable that is unlikely to move
            return st
        elif st.G < 0.0:
            PG = st.G
    elif alpha[i] == U:
        if st.G < PGmin_old:
            st.shrink = True
            return st
        elif st.G > 0.0:
            PG = st.G
    else:
        PG = st.G
    if PG > PGmax_new[0]:
        PGmax_new[0] = PG
    if PG < PGmin_new[0]:
        PGmin_new[0] = PG
    if fabs(PG) > 1.0e-12:
        st.moved = True
        if QD_i > 0.0:
            alpha[i] = alpha[i] - st.G / QD_i
        else:
            # an empty row under the L1 loss (no bias): the step is G / 0, i.e. the
            # bound in the descent direction (LIBLINEAR's -inf, then clipped)
            alpha[i] = U if st.G < 0.0 else 0.0
        if alpha[i] < 0.0:
            alpha[i] = 0.0
        elif alpha[i] > U:
            alpha[i] = U
    return st


cdef inline double merge_pair(const double* local0, const double* local1, const double* base,
                              double* nxt, Py_ssize_t j) noexcept nogil:
    # coordinate j of a two-thread merge: nxt = W + u_0 + u_1; returns u_0 u_1 (the
    # cross term of the dual's change, dual_cd_block_pass)
    cdef double b = base[j]
    cdef double u0 = local0[j] - b
    cdef double u1 = local1[j] - b
    nxt[j] = b + (u0 + u1)
    return u0 * u1


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
    cdef Py_ssize_t s, i
    cdef int tmp
    cdef double d
    cdef Step st
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
            st = coordinate_step(&rows, i, Wp, yi, &alpha[0], diag[i], upper_bound[i], QD[i],
                                 PGmax_old, PGmin_old, &PGmax_new, &PGmin_new)
            if st.shrink:
                active_size -= 1
                tmp = index[s]; index[s] = index[active_size]; index[active_size] = tmp
                continue
            if st.moved:
                d = (alpha[i] - st.alpha_old) * yi
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


def dual_cd_block_pass(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features, double bias,
        const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,  # IN
        const signed char[::1] y,          # IN  +1 / -1
        const double[::1] QD,              # IN  ||z_i||^2 + D_ii
        const double[::1] diag,            # IN  D_ii
        const double[::1] upper_bound,     # IN  U_i
        double[::1] alpha,                 # INOUT this thread's rows (its own copy: no line
                                           #   shared with another thread's writes)
        double[:, :, ::1] W_local,         # INOUT shared (K, 2, >= w_size): [thread, parity]
        double[:, ::1] W_base,             # INOUT (K, >= w_size): W at the last merge
        Py_ssize_t w_size,                 # IN  the length of W (the rows beyond: padding)
        double[:, :, ::1] block_stats,     # INOUT shared (2, K, >= 4): [parity, thread, stat]
        int[::1] moved_rows,               # SCRATCH (block_rows,) this thread's
        double[::1] moved_alpha_old,       # SCRATCH (block_rows,) this thread's
        int64_t[::1] barrier,              # INOUT shared (2,) zeroed: _barrier.pxd
        Py_ssize_t thread, Py_ssize_t parity, Py_ssize_t block_rows,
        int[::1] index,                    # INOUT this thread's rows, active set first
        Py_ssize_t active_size,
        double PGmax_old, double PGmin_old,
        uint64_t[::1] rng_state,           # INOUT this thread's stream
        double shared_bias=-1.0,
        const unsigned char[::1] stop=None,
        long barrier_spins=4000):          # reads of the barrier before yielding the core
    """One outer iteration of the block-synchronous parallel dual CD, run by each of
    the K threads of a team at once (thread ``thread`` of ``W_local.shape[0]``) on
    its own fixed rows.

    Math (LIBLINEAR's dual, header; Hsieh et al. 2008 Algorithm 3 per thread): the
    threads run LIBLINEAR's sweep -- shuffle of the active set, shrinking, the exact
    coordinate step ``alpha_i -= G_i / QD_i`` clipped to ``[0, U_i]`` -- each on its
    own copy ``W_k`` of ``W``, and meet every ``block_rows`` steps.  There the block's
    updates are merged: with ``u = sum_k (W_k - W)`` and ``dalpha`` the block's moves
    of all threads, the dual objective along ``W + t u`` is

        f(alpha + t dalpha) - f(alpha) = t lin + t^2 / 2 quad,
        lin  = <W, u> + sum_i (D_ii alpha_i - 1) dalpha_i,
        quad = ||u||^2 + sum_i D_ii dalpha_i^2 ,

    and every thread sets ``W <- W + t u`` with ``t = 1`` (the threads' steps simply
    added, as if the rows had been visited one after another) unless the full step
    would raise the objective (``lin + quad / 2 > 0``: the threads' rows pulled ``W``
    the same way at once), then ``t = -lin / quad`` in ``[0, 1]``, the exact minimum,
    and each thread moves its block's ``alpha_i`` back to ``alpha_i^old + t
    dalpha_i`` (inside the box: both ends are).  The test needs no pass over ``W``
    of its own: ``lin + quad / 2 = sum_k c_k + sum_{k<l} <u_k, u_l>``, where ``c_k``,
    the change of ``f`` by thread ``k``'s steps alone, is the sum of its exact
    coordinate decreases ``G_i d_i + QD_i d_i^2 / 2``, and the cross term is summed
    while ``W + u`` is written; ``lin`` and ``quad`` are computed only for a merge
    that is damped.  Every merge lowers the dual objective, so the sweep cannot
    diverge; with blocks this short the threads see each other's steps at most
    ``block_rows`` rows late and the sweeps converge in the passes of the sequential
    solver (ijcnn1 and skin LL-SVMs, docs/scale.md), where CoCoA+'s safe ``sigma' =
    K`` needs 2-3x more.

    Every thread computes the merge itself, over all of ``W``, in the same order
    (``W_local[0] - W``, ``W_local[1] - W``, ...), so the threads' copies stay equal
    bit for bit and the result does not depend on timing: ``W_local[k, parity]`` is
    thread ``k``'s working copy, the merge writes ``W_local[k, 1 - parity]``, which no
    other thread reads until the next meeting, and ``block_stats`` (the thread's
    rows' terms of ``lin`` and ``quad``, whether its sweep is done, and ``c_k``)
    alternate the same way.  The sweep ends when every thread's sweep is done.

    Every array a thread writes in the sweep is its own, and the driver pads the
    shared ones so that no cache line holds two threads' entries: ``alpha`` is this
    thread's copy, ``W_local``'s and ``W_base``'s rows are at least a line longer
    than ``w_size``.  (With one ``alpha`` for all threads and unpadded rows, the
    lines two threads wrote in turn cost ijcnn1's linear model twice its sequential
    time per row.)

    Returns ``(active_size, PGmax_new, PGmin_new, parity, blocks, damped, stopped)``:
    ``W_base[thread]`` (= ``W_local[thread, parity]``) holds the merged ``W``;
    ``damped`` counts the merges with ``t < 1``; ``stopped`` is True when the stop
    flag ended the sweep (the driver discards it and raises)."""
    cdef CodedRows rows = make_rows(X_data, X_indices, X_indptr, n_features, bias,
                                    anchor_idx, coding_weight, shared_bias, w_size - 1)
    cdef Py_ssize_t n_threads = W_local.shape[0]
    cdef Py_ssize_t s = 0, i, j, kk, m, n_moved, steps
    cdef Py_ssize_t blocks = 0, damped = 0
    cdef int tmp
    cdef bint stopped = False, all_done
    cdef Step st
    cdef double d, r_lin, r_quad, r_change, lin, quad, t, b, step
    cdef double gain, u0, u1
    cdef double lanes[4]
    cdef Py_ssize_t r
    cdef double PGmax_new = -INF
    cdef double PGmin_new = INF
    cdef signed char yi
    cdef double* Wp
    cdef double* nxt
    cdef const double* local0
    cdef const double* local1
    cdef Py_ssize_t local_stride = 2 * W_local.shape[2]   # W_local[k + 1, p] - W_local[k, p]
    cdef double* base
    cdef uint64_t* state
    cdef const unsigned char* stop_p = stop_pointer(stop)
    cdef int64_t* bar
    # the shapes the loops below trust (bounds checks are off in the release build)
    if w_size > W_base.shape[1] or w_size > W_local.shape[2] or w_size < 1:
        raise ValueError(f"w_size {w_size} does not fit W_base {W_base.shape[1]} "
                         f"/ W_local {W_local.shape[2]}")
    if not (0 <= thread < n_threads and W_base.shape[0] == n_threads and W_local.shape[1] == 2
            and block_stats.shape[0] == 2 and block_stats.shape[1] == n_threads
            and block_stats.shape[2] >= 4 and 1 <= block_rows <= moved_rows.shape[0]
            and block_rows <= moved_alpha_old.shape[0] and 0 <= parity <= 1
            and 0 <= active_size <= index.shape[0] and barrier.shape[0] >= 2):
        raise ValueError("dual_cd_block_pass: the team's arrays do not match its "
                         f"{n_threads} threads, thread {thread} or {block_rows}-row blocks")
    base = &W_base[thread, 0]
    state = &rng_state[0]
    bar = &barrier[0]

    with nogil:
        rng_shuffle_prefix(&index[0], active_size, state)
        while True:
            Wp = &W_local[thread, parity, 0]
            steps = 0
            n_moved = 0
            r_lin = 0.0
            r_quad = 0.0
            r_change = 0.0
            if stop_requested(stop_p):
                stopped = True
                break
            while steps < block_rows and s < active_size:
                steps += 1
                i = index[s]
                yi = y[i]
                st = coordinate_step(&rows, i, Wp, yi, &alpha[0], diag[i], upper_bound[i],
                                     QD[i], PGmax_old, PGmin_old, &PGmax_new, &PGmin_new)
                if st.shrink:
                    active_size -= 1
                    tmp = index[s]; index[s] = index[active_size]; index[active_size] = tmp
                    continue
                if st.moved:
                    d = alpha[i] - st.alpha_old
                    if d != 0.0:
                        coded_axpy(&rows, i, d * yi, Wp)
                        # (a row of class weight 0 has D_ii = inf and never moves)
                        r_lin += (diag[i] * st.alpha_old - 1.0) * d
                        r_quad += diag[i] * d * d
                        r_change += st.G * d + 0.5 * QD[i] * d * d
                        moved_rows[n_moved] = <int>i
                        moved_alpha_old[n_moved] = st.alpha_old
                        n_moved += 1
                s += 1
            block_stats[parity, thread, 0] = r_lin
            block_stats[parity, thread, 1] = r_quad
            block_stats[parity, thread, 2] = 1.0 if s >= active_size else 0.0
            block_stats[parity, thread, 3] = r_change
            if barrier_wait(bar, n_threads, stop_p, barrier_spins):
                stopped = True
                break
            blocks += 1
            # the merge, the same arithmetic in every thread.  gain = f(alpha +
            # dalpha) - f(alpha) = sum_k (thread k's own change, its steps' exact
            # decreases) + sum_{k<l} <u_k, u_l> (f is quadratic; the threads' rows are
            # disjoint), the cross term summed in four lanes (no chain of dependent
            # adds; the lanes are combined in a fixed order)
            gain = 0.0
            all_done = True
            for kk in range(n_threads):
                gain += block_stats[parity, kk, 3]
                if block_stats[parity, kk, 2] == 0.0:
                    all_done = False
            nxt = &W_local[thread, 1 - parity, 0]
            local0 = &W_local[0, parity, 0]
            for r in range(4):
                lanes[r] = 0.0
            if n_threads == 2:
                local1 = local0 + local_stride
                j = 0
                while j + 4 <= w_size:
                    for r in range(4):
                        lanes[r] += merge_pair(local0, local1, base, nxt, j + r)
                    j += 4
                while j < w_size:
                    lanes[0] += merge_pair(local0, local1, base, nxt, j)
                    j += 1
                gain += (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])
            else:
                # sum_{k<l} u_k u_l = ((sum_k u_k)^2 - sum_k u_k^2) / 2
                for j in range(w_size):
                    b = base[j]
                    step = 0.0
                    u1 = 0.0
                    for kk in range(n_threads):
                        u0 = local0[kk * local_stride + j] - b
                        step += u0
                        u1 += u0 * u0
                    lanes[0] += step * step - u1
                    nxt[j] = b + step
                gain += 0.5 * lanes[0]
            if gain > 0.0:
                # the added steps raise the objective: the exact minimum along them
                lin = 0.0
                quad = 0.0
                for kk in range(n_threads):
                    lin += block_stats[parity, kk, 0]
                    quad += block_stats[parity, kk, 1]
                for j in range(w_size):
                    b = base[j]
                    step = 0.0
                    for kk in range(n_threads):
                        step += local0[kk * local_stride + j] - b
                    lin += b * step
                    quad += step * step
                t = -lin / quad if quad > 0.0 else 0.0
                if t < 0.0:
                    t = 0.0
                elif t > 1.0:
                    t = 1.0
                damped += 1
                for j in range(w_size):
                    b = base[j]
                    step = 0.0
                    for kk in range(n_threads):
                        step += local0[kk * local_stride + j] - b
                    nxt[j] = b + t * step
                for m in range(n_moved):
                    i = moved_rows[m]
                    alpha[i] = moved_alpha_old[m] + t * (alpha[i] - moved_alpha_old[m])
            memcpy(base, nxt, w_size * sizeof(double))
            parity = 1 - parity
            if all_done:
                break

    return active_size, PGmax_new, PGmin_new, parity, blocks, damped, stopped
