# SGD for the L2-regularised hinge loss over coded rows: the LL-SVM paper's
# Algorithm 1 (Ladicky & Torr 2011), i.e. SVMSGD2 (Bordes et al. 2009) on the
# implicit features z = gamma(x) (x) x, with one bias per anchor.
#
#     min_W,b  lambda/2 ||W||_F^2 + 1/n sum_i c_i max(0, 1 - y_i f(x_i)),
#     f(x) = sum_j gamma_j(x) (w_j . x + B b_j)
#
# Step t = 1, 2, ... (global across epochs), eta_t = 1 / (lambda (t + t0)):
#     if y f(x) < 1:  w_j += eta_t c_i y gamma_j x,  b_j += eta_t c_i y gamma_j B   (j in N_k(x))
#     every `skip` steps:  W *= 1 - skip / (t + t0)      (the biases are not decayed)
#
# W is stored as scale * W_stored, so the decay is O(1); the scale is folded back
# into W_stored when it gets small.  One call = one epoch in the caller's order;
# (scale, t, count) persist across calls in `state`.  An optional stop flag (Ctrl-C,
# _stop.pxd) ends an epoch or a loss sum early; the driver then raises.
from libc.stdint cimport int64_t

from lcoding.core._rows cimport CodedRows, make_rows, coded_dot, coded_axpy, coded_bias
from lcoding.core._stop cimport stop_pointer, stop_requested

cdef double RESCALE_BELOW = 1e-9


def sgd_epoch(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features,
        const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,  # IN (0 rows: linear)
        const signed char[::1] y,   # IN +1 / -1
        const double[::1] cost,     # IN per-row loss weight C_i / C (class weights -wi)
        const int[::1] order,       # IN rows in visiting order
        double[::1] W,              # INOUT (n_anchors * n_features) scaled local weights
        double[::1] b,              # INOUT (n_anchors,) biases (unscaled)
        double[::1] state,          # INOUT [scale, t, count]
        double lam, double t0, double skip, double bias,
        const unsigned char[::1] stop=None):  # IN stop flag: return mid-epoch when set
    """One epoch; returns ``(sum of hinge losses before each step, #violations)``.

    ``bias < 0`` trains no biases; otherwise the bias coordinate has value ``bias``.
    """
    cdef CodedRows rows = make_rows(X_data, X_indices, X_indptr, n_features, -1.0,
                                    anchor_idx, coding_weight)
    cdef Py_ssize_t n = order.shape[0], n_w = W.shape[0], k = rows.k
    cdef Py_ssize_t s, i, j, base
    cdef double scale = state[0], t = state[1], count = state[2]
    cdef double f, g, eta, step, margin, loss = 0.0
    cdef Py_ssize_t n_viol = 0
    cdef bint linear = rows.anchor_idx == NULL
    cdef double* Wp = &W[0]
    cdef const unsigned char* stop_p = stop_pointer(stop)
    with nogil:
        for s in range(n):
            if stop_requested(stop_p):
                break               # Ctrl-C: the caller discards this epoch
            i = order[s]
            t += 1.0
            eta = 1.0 / (lam * (t + t0))
            f = scale * coded_dot(&rows, i, Wp)
            if bias >= 0:
                f += bias * coded_bias(&rows, i, &b[0])
            margin = y[i] * f
            if margin < 1.0:
                loss += cost[i] * (1.0 - margin)
                n_viol += 1
                step = eta * y[i] * cost[i]
                coded_axpy(&rows, i, step / scale, Wp)
                if bias >= 0:
                    if linear:
                        b[0] += step * bias
                    else:
                        base = i * k
                        for j in range(k):
                            g = rows.coding_weight[base + j]
                            b[rows.anchor_idx[base + j]] += step * g * bias
            count -= 1.0
            if count <= 0.0:
                scale *= 1.0 - skip / (t + t0)
                count = skip
                if scale < RESCALE_BELOW:
                    for j in range(n_w):
                        Wp[j] *= scale
                    scale = 1.0
    state[0] = scale
    state[1] = t
    state[2] = count
    return loss, n_viol


def hinge_loss_sum(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        Py_ssize_t n_features,
        const int[:, ::1] anchor_idx, const double[:, ::1] coding_weight,  # IN (0 rows: linear)
        const signed char[::1] y,   # IN +1 / -1
        const double[::1] cost,     # IN per-row loss weight
        const double[::1] W,        # IN (n_anchors * n_features) local weights (unscaled)
        const double[::1] b,        # IN (n_anchors,) biases
        double bias,
        const unsigned char[::1] stop=None):  # IN stop flag: return a partial sum when set
    """``sum_i cost_i max(0, 1 - y_i f(x_i))`` for the final weights: the data term
    of the primal objective that ``-s 30`` reports (one pass of dot products)."""
    cdef CodedRows rows = make_rows(X_data, X_indices, X_indptr, n_features, -1.0,
                                    anchor_idx, coding_weight)
    cdef Py_ssize_t n = y.shape[0]
    cdef Py_ssize_t i
    cdef double f, margin, total = 0.0
    cdef const double* Wp = &W[0]
    cdef const unsigned char* stop_p = stop_pointer(stop)
    with nogil:
        for i in range(n):
            if stop_requested(stop_p):
                break
            f = coded_dot(&rows, i, Wp)
            if bias >= 0:
                f += bias * coded_bias(&rows, i, &b[0])
            margin = y[i] * f
            if margin < 1.0:
                total += cost[i] * (1.0 - margin)
    return total
