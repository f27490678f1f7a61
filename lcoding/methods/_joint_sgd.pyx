# Joint SGD of W, b and the anchors (algorithms.md §C.1, §C.4; seed Algorithm 2):
# LLC-SAPL (Gaussian soft assignment on the k nearest anchors, kind 2) and LLC-JO
# (k* coding, kind 3).  Multi-class: shared anchors, per-class W_c, b_c, loss
# sum_c cost_ic max(0, 1 - y_ic f_c(x_i)); the anchor steps of the violated classes
# are summed.  cost_ic = C_ic / C (LIBLINEAR's one-vs-rest -wi: weight_c for the rows
# of class c in problem c, 1 for the rest).
#
# Step t (global), eta_t = 1 / (lambda (t + t0)), eta_v = anchor_lr / (t + t0):
#   code x with the current anchors; local scores s_cj = w_cj . x + B b_cj; f_c;
#   for violated c:  w_cj += eta_t y_c cost gamma_j x,  b_cj += eta_t y_c cost gamma_j B
#   anchors (pre-update scores):  v_j += eta_v sum_{c viol} y_c cost g_cj (x - v_j),
#   the factor eta_v sum(...) clipped to [-STEP_CAP, STEP_CAP] (no overshoot past x)
#   every skip steps W *= 1 - skip/(t + t0)   (scale trick; b and anchors never decay)
# with df_c/dv_j = g_cj (x - v_j):
#   Gaussian:            g = 2 beta gamma_j (s_j - f)
#   k*, 0 exact:         g = 2 mu [(s_j - f) - gamma_j (sum_l s_l - k* f)] / S
#   k*, 1 seed:          g = 2 mu (s_j - f) / S                (lambda held fixed)
#   k*, 2 reference code: g = 2 mu w_j (s_j - f) / S          (extra factor w_j)
# (w_j = lambda - eta_j, S = sum w).  One call = one epoch; an optional stop flag
# (Ctrl-C, _stop.pxd) ends it early, and the driver then raises.
from libc.math cimport exp
from libc.stdint cimport int64_t

import numpy as np

from lcoding.core._stop cimport stop_pointer, stop_requested
from lcoding.local._kstar cimport heap_build, heap_pop, kstar_row

cdef double RESCALE_BELOW = 1e-9
cdef double STEP_CAP = 0.5


cdef Py_ssize_t code_point(const double* dist, Py_ssize_t m, int kind, double param,
                           Py_ssize_t k, double* hkey, int* hid, int* idx, double* raw,
                           double* gam, double* S) noexcept nogil:
    cdef Py_ssize_t j, heap_n = m
    cdef double lam, dmin, e, total = 0.0
    cdef int a
    if kind == 3:
        return kstar_row(dist, m, param, hkey, hid, idx, raw, gam, S, &lam)
    # Gaussian on the k nearest, shift-invariant exponent
    for j in range(m):
        hkey[j] = dist[j]
        hid[j] = <int>j
    heap_build(hkey, hid, heap_n)
    for j in range(k):
        heap_pop(hkey, hid, &heap_n, &raw[j], &a)
        idx[j] = a
    dmin = raw[0]
    for j in range(k):
        e = exp(-param * (raw[j] - dmin))
        raw[j] = e
        total += e
    for j in range(k):
        gam[j] = raw[j] / total
    S[0] = total
    return k


cdef void anchor_coef(int kind, int variant, double param, Py_ssize_t K, const double* gam,
                      const double* raw, double S, const double* s, double f,
                      double* g) noexcept nogil:
    # g[j] with df/dv_j = g[j] (x - v_j) for the active anchors j < K
    cdef Py_ssize_t j
    cdef double ssum = 0.0
    if kind != 3:
        for j in range(K):
            g[j] = 2.0 * param * gam[j] * (s[j] - f)
        return
    if variant == 0:
        for j in range(K):
            ssum += s[j]
        for j in range(K):
            g[j] = 2.0 * param * ((s[j] - f) - gam[j] * (ssum - K * f)) / S
    elif variant == 1:
        for j in range(K):
            g[j] = 2.0 * param * (s[j] - f) / S
    else:
        for j in range(K):
            g[j] = 2.0 * param * raw[j] * (s[j] - f) / S


cdef inline double sparse_dot(const double* xd, const int* xi, int64_t p0, int64_t p1,
                              const double* w) noexcept nogil:
    cdef int64_t p
    cdef double s = 0.0
    for p in range(p0, p1):
        s += w[xi[p]] * xd[p]
    return s


def joint_epoch(
        const double[::1] X_data, const int[::1] X_indices, const int64_t[::1] X_indptr,  # IN
        const signed char[:, ::1] Y,    # IN (n, nr_w) +1 / -1 targets
        const double[:, ::1] cost,      # IN (n, nr_w) per-row, per-class loss weight
        const int[::1] order,           # IN rows in visiting order
        double[:, ::1] V,               # INOUT (m, d) anchors
        double[::1] v_sq,               # INOUT (m,) squared anchor norms
        double[:, ::1] W,               # INOUT (nr_w, m * d) scaled local weights
        double[:, ::1] b,               # INOUT (nr_w, m) biases
        double[::1] state,              # INOUT [scale, t, count]
        int kind, double param, Py_ssize_t k, int variant,
        double lam, double t0, double skip, double bias, double anchor_lr,
        const unsigned char[::1] stop=None):  # IN stop flag: return mid-epoch when set
    """One epoch; returns ``(progressive hinge-loss sum, #violations, sum of k*)``.
    Column indices must be < d (the caller truncates)."""
    cdef Py_ssize_t n = order.shape[0], m = V.shape[0], d = V.shape[1], nr_w = W.shape[0]
    cdef Py_ssize_t s_i, i, j, c, a, K, col
    cdef int64_t p, p0, p1
    cdef double scale = state[0], t = state[1], count = state[2]
    cdef double eta, eta_v, step, f, margin, xsq, dist, S, yc, loss = 0.0, kst_sum = 0.0
    cdef double gj, vsum, coefv
    cdef Py_ssize_t n_viol = 0
    cdef bint any_viol
    if Y.shape[1] != nr_w or b.shape[0] != nr_w or b.shape[1] != m or W.shape[1] != m * d \
            or v_sq.shape[0] != m or X_indptr.shape[0] != Y.shape[0] + 1 or cost.shape[0] != Y.shape[0] \
            or cost.shape[1] != nr_w:
        raise ValueError("joint_epoch: inconsistent array shapes")
    if kind != 3 and not 1 <= k <= m:
        raise ValueError(f"joint_epoch: k = {k} out of [1, {m}]")
    cdef double[::1] dbuf = np.zeros(m), hkey = np.zeros(m), raw = np.zeros(m)
    cdef double[::1] gam = np.zeros(m), coef = np.zeros(m), gbuf = np.zeros(m)
    cdef int[::1] hid = np.zeros(m, dtype=np.int32), idx = np.zeros(m, dtype=np.int32)
    cdef double[:, ::1] sloc = np.zeros((nr_w, m))
    cdef double[::1] xdense = np.zeros(d)
    cdef const double* xd = &X_data[0] if X_data.shape[0] > 0 else NULL
    cdef const int* xi = &X_indices[0] if X_indices.shape[0] > 0 else NULL
    cdef const unsigned char* stop_p = stop_pointer(stop)
    with nogil:
        for s_i in range(n):
            if stop_requested(stop_p):
                break               # Ctrl-C: the caller discards this epoch
            i = order[s_i]
            t += 1.0
            eta = 1.0 / (lam * (t + t0))
            eta_v = anchor_lr / (t + t0)
            p0 = X_indptr[i]
            p1 = X_indptr[i + 1]
            xsq = 0.0
            for p in range(p0, p1):
                xsq += xd[p] * xd[p]
            for a in range(m):
                dist = xsq - 2.0 * sparse_dot(xd, xi, p0, p1, &V[a, 0]) + v_sq[a]
                dbuf[a] = dist if dist > 0.0 else 0.0
            K = code_point(&dbuf[0], m, kind, param, k, &hkey[0], &hid[0], &idx[0],
                           &raw[0], &gam[0], &S)
            kst_sum += K
            any_viol = False
            for j in range(K):
                coef[j] = 0.0
            for c in range(nr_w):
                f = 0.0
                for j in range(K):
                    a = idx[j]
                    sloc[c, j] = scale * sparse_dot(xd, xi, p0, p1, &W[c, a * d])
                    if bias >= 0:
                        sloc[c, j] += bias * b[c, a]
                    f += gam[j] * sloc[c, j]
                yc = Y[i, c]
                margin = yc * f
                if margin < 1.0:
                    loss += cost[i, c] * (1.0 - margin)
                    n_viol += 1
                    any_viol = True
                    if anchor_lr != 0.0:
                        anchor_coef(kind, variant, param, K, &gam[0], &raw[0], S,
                                    &sloc[c, 0], f, &gbuf[0])
                        for j in range(K):
                            coef[j] += yc * cost[i, c] * gbuf[j]
                    step = eta * yc * cost[i, c]
                    for j in range(K):
                        a = idx[j]
                        gj = step * gam[j]
                        for p in range(p0, p1):
                            W[c, a * d + xi[p]] += (gj / scale) * xd[p]
                        if bias >= 0:
                            b[c, a] += gj * bias
            if any_viol and anchor_lr != 0.0:
                for p in range(p0, p1):
                    xdense[xi[p]] = xd[p]
                for j in range(K):
                    a = idx[j]
                    coefv = eta_v * coef[j]
                    # trust region: one step moves v_j at most STEP_CAP of the way to x
                    # (or that far away from it); without it a large rate overshoots
                    if coefv > STEP_CAP:
                        coefv = STEP_CAP
                    elif coefv < -STEP_CAP:
                        coefv = -STEP_CAP
                    if coefv == 0.0:
                        continue
                    vsum = 0.0
                    for col in range(d):
                        V[a, col] += coefv * (xdense[col] - V[a, col])
                        vsum += V[a, col] * V[a, col]
                    v_sq[a] = vsum
                for p in range(p0, p1):
                    xdense[xi[p]] = 0.0
            count -= 1.0
            if count <= 0.0:
                scale *= 1.0 - skip / (t + t0)
                count = skip
                if scale < RESCALE_BELOW:
                    for c in range(nr_w):
                        for j in range(m * d):
                            W[c, j] *= scale
                    scale = 1.0
    state[0] = scale
    state[1] = t
    state[2] = count
    return loss, n_viol, kst_sum


def point_gradient(const double[::1] x, const double[:, ::1] V, const double[::1] w,
                   const double[::1] b, double bias, int kind, double param, Py_ssize_t k,
                   int variant):
    """``(f, active anchors, grad)`` for one dense point and one class: f(x) and the
    anchor-gradient rows ``g_j (x - v_j)`` the training step uses (tests)."""
    cdef Py_ssize_t m = V.shape[0], d = V.shape[1], j, a, col, K
    cdef double dist, f = 0.0, S
    if x.shape[0] != d or w.shape[0] != m * d or b.shape[0] != m:
        raise ValueError("point_gradient: inconsistent shapes")
    dbuf = np.zeros(m); hkey = np.zeros(m); raw = np.zeros(m); gam = np.zeros(m)
    sl = np.zeros(m); g = np.zeros(m)
    hid = np.zeros(m, dtype=np.int32); idx = np.zeros(m, dtype=np.int32)
    cdef double[::1] db = dbuf, hk = hkey, rw = raw, gm = gam, sv = sl, gv = g
    cdef int[::1] hi = hid, ix = idx
    for a in range(m):
        dist = 0.0
        for col in range(d):
            dist += (x[col] - V[a, col]) ** 2
        db[a] = dist
    K = code_point(&db[0], m, kind, param, k, &hk[0], &hi[0], &ix[0], &rw[0], &gm[0], &S)
    for j in range(K):
        a = ix[j]
        sv[j] = 0.0
        for col in range(d):
            sv[j] += w[a * d + col] * x[col]
        if bias >= 0:
            sv[j] += bias * b[a]
        f += gm[j] * sv[j]
    anchor_coef(kind, variant, param, K, &gm[0], &rw[0], S, &sv[0], f, &gv[0])
    grad = np.zeros((m, d))
    xa = np.asarray(x)
    for j in range(K):
        a = ix[j]
        grad[a] = gv[j] * (xa - np.asarray(V[a]))
    return f, idx[:K].copy(), grad
