# Coordinate descent over features for L1-regularised linear classifiers, on a
# column-major (CSC) copy of the data.
#
# -s 5, L1-regularised L2-loss SVC (Yuan, Chang, Hsieh & Lin, JMLR 2010, the CDN method;
# appendix of the LIBLINEAR paper, Fan et al. 2008; LIBLINEAR's solve_l1r_l2_svc):
#
#     min_w  sum_j |w_j| + sum_i C_i max(0, 1 - y_i w . x_i)^2 ,
#
# keeps b_i = 1 - y_i w . x_i; each feature j takes the Newton direction of the
# one-variable problem (soft-thresholded at +-1) and an Armijo line search whose
# sufficient-decrease test first tries the cheap upper bound
# xj_sq_j d^2 + G_loss d + ... (xj_sq_j = sum_i C_i x_ij^2) before evaluating the loss.
#
# -s 6, L1-regularised logistic regression (Yuan, Ho & Lin, JMLR 2012, newGLMNET;
# LIBLINEAR's solve_l1r_lr):
#
#     min_w  sum_j |w_j| + sum_i C_i log(1 + exp(-y_i w . x_i)) ,
#
# each Newton iteration builds the quadratic model with D_i = C_i sigma(1 - sigma) and
# tau_i = C_i (1 - sigma_i) (sigma_i = 1 / (1 + exp(-w.x_i)) written via exp(w.x_i)),
# minimises model + L1 term by coordinate descent cycles over wpd (the proposed point)
# with xTd = X (wpd - w) kept up to date, then backtracks along wpd - w.
#
# In both, the column `unregularized` (the bias column under -R, else -1) has no L1
# term: its step is the plain Newton step and it is never shrunk.  The caller appends
# the bias as an ordinary dense column of the CSC copy.
#
# One call = one pass: a CD sweep (-s 5 outer iteration, -s 6 inner QP cycle), the
# gradient/shrinking pass of a -s 6 Newton iteration, or the -s 6 line search.  The
# Python driver owns tolerances, shrinking thresholds between calls and iteration caps.
from libc.math cimport fabs, exp, log
from libc.stdint cimport int64_t, uint64_t

from lcoding.core._rng cimport rng_shuffle_prefix

cdef double SIGMA = 0.01            # Armijo sufficient-decrease constant
cdef int MAX_NUM_LINESEARCH = 20


def column_weighted_sums(
        const int64_t[::1] col_ptr, const int[::1] row_idx, const double[::1] val,  # IN CSC
        const double[::1] row_weight,      # IN
        bint squared,
        double[::1] out):                  # OUT  sum_i row_weight_i x_ij (or x_ij^2)
    cdef Py_ssize_t j
    cdef int64_t q
    cdef double s
    if col_ptr.shape[0] != out.shape[0] + 1 or row_idx.shape[0] != val.shape[0]:
        raise ValueError("column_weighted_sums: out must have one entry per column")
    with nogil:
        for j in range(out.shape[0]):
            s = 0.0
            for q in range(col_ptr[j], col_ptr[j + 1]):
                if squared:
                    s += row_weight[row_idx[q]] * val[q] * val[q]
                else:
                    s += row_weight[row_idx[q]] * val[q]
            out[j] = s


def l1r_l2svc_pass(
        const int64_t[::1] col_ptr, const int[::1] row_idx,  # IN CSC
        const double[::1] yx,              # IN  y_i x_ij
        const double[::1] C,               # IN  C_i
        const double[::1] xj_sq,           # IN  sum_i C_i x_ij^2
        double[::1] b,                     # INOUT  1 - y_i w . x_i
        double[::1] w,                     # INOUT
        int[::1] index,                    # INOUT  active features first
        Py_ssize_t active_size,
        double Gmax_old,
        Py_ssize_t unregularized,          # column without L1 term, or -1
        uint64_t[::1] rng_state):          # INOUT
    """One -s 5 outer iteration; returns ``(active_size, Gmax_new, Gnorm1_new,
    n_recomputed)``, the last being how many line searches hit their step limit (each
    followed by recomputing b from scratch)."""
    cdef Py_ssize_t l = b.shape[0], w_size = w.shape[0]
    cdef Py_ssize_t s, j, k, r
    cdef int64_t q
    cdef int tmp, num_linesearch, n_recomputed = 0
    cdef double G_loss, G, H, Gp, Gn, violation, d, delta, d_old, d_diff, t, v
    cdef double cond, appxcond, loss_old = 0.0, loss_new, b_new
    cdef double Gmax_new = 0.0, Gnorm1_new = 0.0
    cdef double shrink_at = Gmax_old / l if l > 0 else Gmax_old
    cdef bint free_col
    if (col_ptr.shape[0] != w_size + 1 or yx.shape[0] != row_idx.shape[0] or C.shape[0] != l
            or xj_sq.shape[0] != w_size or index.shape[0] != w_size
            or not 0 <= active_size <= w_size or rng_state.shape[0] < 1):
        raise ValueError("l1r_l2svc_pass: arrays disagree with the rows or columns")

    with nogil:
        if active_size > 0:
            rng_shuffle_prefix(&index[0], active_size, &rng_state[0])
        s = 0
        while s < active_size:
            j = index[s]
            free_col = j == unregularized
            G_loss = 0.0
            H = 0.0
            for q in range(col_ptr[j], col_ptr[j + 1]):
                r = row_idx[q]
                if b[r] > 0.0:
                    v = yx[q]
                    t = C[r] * v
                    G_loss -= t * b[r]
                    H += t * v
            G_loss *= 2.0
            G = G_loss
            H *= 2.0
            if H < 1e-12:
                H = 1e-12

            violation = 0.0
            Gp = 0.0
            Gn = 0.0
            if free_col:
                violation = fabs(G)
            else:
                Gp = G + 1.0
                Gn = G - 1.0
                if w[j] == 0.0:
                    if Gp < 0.0:
                        violation = -Gp
                    elif Gn > 0.0:
                        violation = Gn
                    elif Gp > shrink_at and Gn < -shrink_at:
                        # shrink: w_j = 0 is optimal with margin
                        active_size -= 1
                        tmp = index[s]; index[s] = index[active_size]; index[active_size] = tmp
                        continue
                elif w[j] > 0.0:
                    violation = fabs(Gp)
                else:
                    violation = fabs(Gn)
            if violation > Gmax_new:
                Gmax_new = violation
            Gnorm1_new += violation
            s += 1

            # Newton direction of the one-variable problem
            if free_col:
                d = -G / H
            elif Gp < H * w[j]:
                d = -Gp / H
            elif Gn > H * w[j]:
                d = -Gn / H
            else:
                d = -w[j]
            if fabs(d) < 1.0e-12:
                continue

            if free_col:
                delta = G * d
            else:
                delta = fabs(w[j] + d) - fabs(w[j]) + G * d
            d_old = 0.0
            num_linesearch = 0
            while num_linesearch < MAX_NUM_LINESEARCH:
                d_diff = d_old - d
                if free_col:
                    cond = -SIGMA * delta
                else:
                    cond = fabs(w[j] + d) - fabs(w[j]) - SIGMA * delta
                appxcond = xj_sq[j] * d * d + G_loss * d + cond
                if appxcond <= 0.0:
                    # the upper bound already proves sufficient decrease
                    for q in range(col_ptr[j], col_ptr[j + 1]):
                        b[row_idx[q]] += d_diff * yx[q]
                    break
                loss_new = 0.0
                if num_linesearch == 0:
                    loss_old = 0.0
                    for q in range(col_ptr[j], col_ptr[j + 1]):
                        r = row_idx[q]
                        if b[r] > 0.0:
                            loss_old += C[r] * b[r] * b[r]
                        b_new = b[r] + d_diff * yx[q]
                        b[r] = b_new
                        if b_new > 0.0:
                            loss_new += C[r] * b_new * b_new
                else:
                    for q in range(col_ptr[j], col_ptr[j + 1]):
                        r = row_idx[q]
                        b_new = b[r] + d_diff * yx[q]
                        b[r] = b_new
                        if b_new > 0.0:
                            loss_new += C[r] * b_new * b_new
                cond = cond + loss_new - loss_old
                if cond <= 0.0:
                    break
                d_old = d
                d *= 0.5
                delta *= 0.5
                num_linesearch += 1

            w[j] += d

            if num_linesearch >= MAX_NUM_LINESEARCH:
                # b drifted through many partial updates: rebuild it from w
                n_recomputed += 1
                for r in range(l):
                    b[r] = 1.0
                for k in range(w_size):
                    if w[k] == 0.0:
                        continue
                    for q in range(col_ptr[k], col_ptr[k + 1]):
                        b[row_idx[q]] -= w[k] * yx[q]

    return active_size, Gmax_new, Gnorm1_new, n_recomputed


def l1r_lr_gradient_pass(
        const int64_t[::1] col_ptr, const int[::1] row_idx, const double[::1] x,  # IN CSC
        const double[::1] D,               # IN  C_i sigma_i (1 - sigma_i)
        const double[::1] tau,             # IN  C_i (1 - sigma_i)
        const double[::1] xjneg_sum,       # IN  sum_{y_i = -1} C_i x_ij
        const double[::1] w,               # IN
        double[::1] Hdiag,                 # OUT  diagonal of the Hessian (+ nu)
        double[::1] Grad,                  # OUT  gradient of the loss
        int[::1] index,                    # INOUT  active features first
        double Gmax_old,
        Py_ssize_t unregularized,          # column without L1 term, or -1
        double nu):                        # IN  Hessian damping
    """Start of a -s 6 Newton iteration: gradient and Hessian diagonal of every feature
    and outer-level shrinking; returns ``(active_size, Gmax_new, Gnorm1_new)``."""
    cdef Py_ssize_t l = D.shape[0], w_size = w.shape[0]
    cdef Py_ssize_t active_size = w_size
    cdef Py_ssize_t s, j, r
    cdef int64_t q
    cdef int tmp
    cdef double t, h, v, Gp, Gn, violation
    cdef double Gmax_new = 0.0, Gnorm1_new = 0.0
    cdef double shrink_at = Gmax_old / l if l > 0 else Gmax_old
    if (col_ptr.shape[0] != w_size + 1 or x.shape[0] != row_idx.shape[0] or tau.shape[0] != l
            or xjneg_sum.shape[0] != w_size or Hdiag.shape[0] != w_size
            or Grad.shape[0] != w_size or index.shape[0] != w_size):
        raise ValueError("l1r_lr_gradient_pass: arrays disagree with the rows or columns")

    with nogil:
        s = 0
        while s < active_size:
            j = index[s]
            h = nu
            t = 0.0
            for q in range(col_ptr[j], col_ptr[j + 1]):
                r = row_idx[q]
                v = x[q]
                h += v * v * D[r]
                t += v * tau[r]
            Hdiag[j] = h
            Grad[j] = -t + xjneg_sum[j]

            violation = 0.0
            if j == unregularized:
                violation = fabs(Grad[j])
            else:
                Gp = Grad[j] + 1.0
                Gn = Grad[j] - 1.0
                if w[j] == 0.0:
                    if Gp < 0.0:
                        violation = -Gp
                    elif Gn > 0.0:
                        violation = Gn
                    elif Gp > shrink_at and Gn < -shrink_at:
                        active_size -= 1
                        tmp = index[s]; index[s] = index[active_size]; index[active_size] = tmp
                        continue
                elif w[j] > 0.0:
                    violation = fabs(Gp)
                else:
                    violation = fabs(Gn)
            if violation > Gmax_new:
                Gmax_new = violation
            Gnorm1_new += violation
            s += 1

    return active_size, Gmax_new, Gnorm1_new


def l1r_lr_cd_cycle(
        const int64_t[::1] col_ptr, const int[::1] row_idx, const double[::1] x,  # IN CSC
        const double[::1] D,               # IN
        const double[::1] Grad,            # IN
        const double[::1] Hdiag,           # IN
        const double[::1] w,               # IN  current iterate
        double[::1] wpd,                   # INOUT  proposed point
        double[::1] xTd,                   # INOUT  X (wpd - w)
        int[::1] index,                    # INOUT  active features first
        Py_ssize_t QP_active_size,
        double QP_Gmax_old,
        Py_ssize_t unregularized,          # column without L1 term, or -1
        double nu,                         # IN  Hessian damping
        uint64_t[::1] rng_state):          # INOUT
    """One coordinate descent cycle on the -s 6 quadratic model; returns
    ``(QP_active_size, QP_Gmax_new, QP_Gnorm1_new)``."""
    cdef Py_ssize_t l = D.shape[0]
    cdef Py_ssize_t s, j, r
    cdef int64_t q
    cdef int tmp
    cdef double G, H, Gp, Gn, z, violation
    cdef double QP_Gmax_new = 0.0, QP_Gnorm1_new = 0.0
    cdef Py_ssize_t w_size = w.shape[0]
    cdef double shrink_at = QP_Gmax_old / l if l > 0 else QP_Gmax_old
    if (col_ptr.shape[0] != w_size + 1 or x.shape[0] != row_idx.shape[0] or xTd.shape[0] != l
            or Grad.shape[0] != w_size or Hdiag.shape[0] != w_size or wpd.shape[0] != w_size
            or index.shape[0] != w_size or not 0 <= QP_active_size <= w_size
            or rng_state.shape[0] < 1):
        raise ValueError("l1r_lr_cd_cycle: arrays disagree with the rows or columns")

    with nogil:
        if QP_active_size > 0:
            rng_shuffle_prefix(&index[0], QP_active_size, &rng_state[0])
        s = 0
        while s < QP_active_size:
            j = index[s]
            H = Hdiag[j]
            G = Grad[j] + (wpd[j] - w[j]) * nu
            for q in range(col_ptr[j], col_ptr[j + 1]):
                r = row_idx[q]
                G += x[q] * D[r] * xTd[r]

            violation = 0.0
            if j == unregularized:
                violation = fabs(G)
                z = -G / H
            else:
                Gp = G + 1.0
                Gn = G - 1.0
                if wpd[j] == 0.0:
                    if Gp < 0.0:
                        violation = -Gp
                    elif Gn > 0.0:
                        violation = Gn
                    elif Gp > shrink_at and Gn < -shrink_at:
                        QP_active_size -= 1
                        tmp = index[s]; index[s] = index[QP_active_size]; index[QP_active_size] = tmp
                        continue
                elif wpd[j] > 0.0:
                    violation = fabs(Gp)
                else:
                    violation = fabs(Gn)
                if Gp < H * wpd[j]:
                    z = -Gp / H
                elif Gn > H * wpd[j]:
                    z = -Gn / H
                else:
                    z = -wpd[j]
            if violation > QP_Gmax_new:
                QP_Gmax_new = violation
            QP_Gnorm1_new += violation
            s += 1

            if fabs(z) < 1.0e-12:
                continue
            # a trust-region-like cap on one coordinate step
            if z > 10.0:
                z = 10.0
            elif z < -10.0:
                z = -10.0
            wpd[j] += z
            for q in range(col_ptr[j], col_ptr[j + 1]):
                xTd[row_idx[q]] += z * x[q]

    return QP_active_size, QP_Gmax_new, QP_Gnorm1_new


cdef inline double l1_norm(const double* v, Py_ssize_t n, Py_ssize_t unregularized) noexcept nogil:
    cdef Py_ssize_t j
    cdef double s = 0.0
    for j in range(n):
        if v[j] != 0.0:
            s += fabs(v[j])
    if unregularized >= 0:
        s -= fabs(v[unregularized])
    return s


def l1r_lr_line_search(
        const int64_t[::1] col_ptr, const int[::1] row_idx, const double[::1] x,  # IN CSC
        const signed char[::1] y,          # IN  +1 / -1
        const double[::1] C,               # IN  C_i
        const double[::1] Grad,            # IN
        double[::1] w,                     # INOUT  becomes wpd on success
        double[::1] wpd,                   # INOUT  halved towards w on each failed step
        double[::1] xTd,                   # INOUT  halved with wpd
        double[::1] exp_wTx,               # INOUT  exp(w . x_i)
        double[::1] exp_wTx_new,           # SCRATCH
        double[::1] tau,                   # INOUT
        double[::1] D,                     # INOUT
        double w_norm,                     # IN  L1 norm of w (without the free column)
        Py_ssize_t unregularized):         # column without L1 term, or -1
    """Backtracking line search of a -s 6 Newton iteration from w towards wpd; on
    success w, exp_wTx, tau and D move to the accepted point.  Returns
    ``(num_linesearch, w_norm)``; ``num_linesearch == 20`` means every step failed
    (w is kept and exp_wTx recomputed from it)."""
    cdef Py_ssize_t l = xTd.shape[0], w_size = w.shape[0]
    cdef Py_ssize_t i, j
    cdef int64_t q
    cdef int num_linesearch = 0
    cdef double delta = 0.0, w_norm_new, negsum_xTd = 0.0, cond, e, t
    cdef double* wpdp = &wpd[0] if w_size > 0 else NULL
    if (col_ptr.shape[0] != w_size + 1 or x.shape[0] != row_idx.shape[0] or y.shape[0] != l
            or C.shape[0] != l or exp_wTx.shape[0] != l or exp_wTx_new.shape[0] != l
            or tau.shape[0] != l or D.shape[0] != l or Grad.shape[0] != w_size
            or wpd.shape[0] != w_size or not -1 <= unregularized < w_size):
        raise ValueError("l1r_lr_line_search: arrays disagree with the rows or columns")

    with nogil:
        for j in range(w_size):
            delta += Grad[j] * (wpd[j] - w[j])
        w_norm_new = l1_norm(wpdp, w_size, unregularized)
        delta += w_norm_new - w_norm
        for i in range(l):
            if y[i] == -1:
                negsum_xTd += C[i] * xTd[i]

        while num_linesearch < MAX_NUM_LINESEARCH:
            cond = w_norm_new - w_norm + negsum_xTd - SIGMA * delta
            for i in range(l):
                e = exp(xTd[i])
                exp_wTx_new[i] = exp_wTx[i] * e
                cond += C[i] * log((1.0 + exp_wTx_new[i]) / (e + exp_wTx_new[i]))
            if cond <= 0.0:
                w_norm = w_norm_new
                for j in range(w_size):
                    w[j] = wpd[j]
                for i in range(l):
                    exp_wTx[i] = exp_wTx_new[i]
                    t = 1.0 / (1.0 + exp_wTx[i])
                    tau[i] = C[i] * t
                    D[i] = C[i] * exp_wTx[i] * t * t
                break
            for j in range(w_size):
                wpd[j] = (w[j] + wpd[j]) * 0.5
            w_norm_new = l1_norm(wpdp, w_size, unregularized)
            delta *= 0.5
            negsum_xTd *= 0.5
            for i in range(l):
                xTd[i] *= 0.5
            num_linesearch += 1

        if num_linesearch >= MAX_NUM_LINESEARCH:
            # refresh exp(w . x_i) from w to shed accumulated rounding
            for i in range(l):
                exp_wTx[i] = 0.0
            for j in range(w_size):
                if w[j] == 0.0:
                    continue
                for q in range(col_ptr[j], col_ptr[j + 1]):
                    exp_wTx[row_idx[q]] += w[j] * x[q]
            for i in range(l):
                exp_wTx[i] = exp(exp_wTx[i])

    return num_linesearch, w_norm
