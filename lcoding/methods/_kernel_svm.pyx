# C-SVC dual on a precomputed kernel matrix, solved by SMO with second-order working
# set selection (Fan, Chen & Lin, JMLR 2005 -- the method of LIBSVM), no shrinking:
#
#     min_a  1/2 a^T Q a - e^T a    s.t.  y^T a = 0,  0 <= a_t <= U_t
#     Q_st = y_s y_t K_st + [s == t] D_t
#
# L1 loss (hinge, lcoding -s 3): D_t = 0, U_t = C_t.  L2 loss (-s 1): D_t = 1/(2 C_t),
# U_t = inf.  Decision function f(x) = sum_t a_t y_t K(x_t, x) - rho.
#
# Each step moves the pair (i, j) along d = (y_i e_i - y_j e_j), which keeps y^T a:
#   i = argmax over I_up  of -y_t G_t       I_up  = {a_t < U_t, y_t = +1} u {a_t > 0, y_t = -1}
#   j = argmin over I_low of -b_t^2 / q_t   I_low = {a_t > 0, y_t = +1} u {a_t < U_t, y_t = -1}
#       among b_t = -y_i G_i + y_t G_t > 0, q_t = K_ii + K_tt - 2 K_it + D_i + D_t (TAU if <= 0)
# The step length b/q is cut where a variable reaches its bound; G = Q a - e is
# updated with rows i and j of K.  Stop when the maximal violation
# m(a) - M(a) = max_up(-y G) - min_low(-y G) < eps.
# rho: the mean of y_t G_t over free a_t, else the middle of the feasible interval.
# An optional stop flag (Ctrl-C, _stop.pxd), read every iteration, ends the solve
# early; the driver then raises.
from libc.math cimport INFINITY
from libc.stdint cimport int64_t

from lcoding.core._stop cimport stop_pointer, stop_requested


cdef double TAU = 1e-12


cdef inline bint in_up(double a, double upper, signed char y) noexcept nogil:
    return (y > 0 and a < upper) or (y < 0 and a > 0.0)


cdef inline bint in_low(double a, double upper, signed char y) noexcept nogil:
    return (y > 0 and a > 0.0) or (y < 0 and a < upper)


def smo_solve(
        const double[:, ::1] K not None,        # IN  (n x n) kernel matrix, symmetric
        const signed char[::1] y not None,      # IN  (n,) labels +1 / -1
        const double[::1] upper not None,       # IN  (n,) box U_t (inf for L2 loss)
        const double[::1] diag not None,        # IN  (n,) D_t added to Q_tt
        double[::1] alpha not None,             # OUT (n,) dual solution
        double[::1] grad not None,              # OUT (n,) G = Q alpha - e
        double eps, int64_t max_iter,
        const unsigned char[::1] stop=None):    # IN  stop flag: return early when set
    """Solve the dual from alpha = 0; returns ``(n_iter, rho, converged)``."""
    cdef Py_ssize_t n = K.shape[0]
    cdef Py_ssize_t t, i, j
    cdef int64_t it = 0
    cdef double g_max, g_max2, v, b, q, obj, best, step, hi_i, hi_j, ai_new, aj_new
    cdef double d_ai, d_aj, ub, lb, free_sum, yg
    cdef Py_ssize_t n_free
    cdef bint converged = False
    cdef bint clip_i, clip_j
    cdef double rho
    cdef const double* Ki
    cdef const double* Kj
    cdef const unsigned char* stop_p = stop_pointer(stop)
    with nogil:
        for t in range(n):
            alpha[t] = 0.0
            grad[t] = -1.0
        while it < max_iter:
            if stop_requested(stop_p):
                break               # Ctrl-C: the caller discards this solution
            # first index: the maximal violator among I_up
            g_max = -INFINITY
            i = -1
            for t in range(n):
                if in_up(alpha[t], upper[t], y[t]):
                    v = -y[t] * grad[t]
                    if v >= g_max:
                        g_max = v
                        i = t
            # second index: the largest second-order decrease among I_low
            g_max2 = -INFINITY
            j = -1
            best = INFINITY
            if i >= 0:
                Ki = &K[i, 0]
                for t in range(n):
                    if not in_low(alpha[t], upper[t], y[t]):
                        continue
                    v = y[t] * grad[t]
                    if v > g_max2:
                        g_max2 = v
                    b = g_max + v
                    if b > 0.0:
                        q = Ki[i] + K[t, t] - 2.0 * Ki[t] + diag[i] + diag[t]
                        if q <= 0.0:
                            q = TAU
                        obj = -b * b / q
                        if obj <= best:
                            best = obj
                            j = t
            if i < 0 or j < 0 or g_max + g_max2 < eps:
                converged = True
                break
            it += 1
            Kj = &K[j, 0]
            b = -y[i] * grad[i] + y[j] * grad[j]
            q = Ki[i] + Kj[j] - 2.0 * Ki[j] + diag[i] + diag[j]
            if q <= 0.0:
                q = TAU
            step = b / q        # > 0, since b > 0 by the choice of j
            # largest steps keeping a_i + y_i step and a_j - y_j step inside [0, U]
            hi_i = upper[i] - alpha[i] if y[i] > 0 else alpha[i]
            hi_j = alpha[j] if y[j] > 0 else upper[j] - alpha[j]
            clip_i = step >= hi_i
            clip_j = step >= hi_j
            if clip_i and clip_j:
                if hi_i < hi_j:
                    clip_j = False
                elif hi_j < hi_i:
                    clip_i = False
            if clip_i:
                step = hi_i
            elif clip_j:
                step = hi_j
            # a clipped variable is set to its bound exactly, so the index sets see it there
            if clip_i:
                ai_new = upper[i] if y[i] > 0 else 0.0
            else:
                ai_new = min(max(alpha[i] + y[i] * step, 0.0), upper[i])
            if clip_j:
                aj_new = 0.0 if y[j] > 0 else upper[j]
            else:
                aj_new = min(max(alpha[j] - y[j] * step, 0.0), upper[j])
            d_ai = ai_new - alpha[i]
            d_aj = aj_new - alpha[j]
            alpha[i] = ai_new
            alpha[j] = aj_new
            # G_t += Q_ti d_ai + Q_tj d_aj
            for t in range(n):
                grad[t] += y[t] * (y[i] * d_ai * Ki[t] + y[j] * d_aj * Kj[t])
            grad[i] += diag[i] * d_ai
            grad[j] += diag[j] * d_aj
        # rho
        ub = INFINITY
        lb = -INFINITY
        free_sum = 0.0
        n_free = 0
        for t in range(n):
            yg = y[t] * grad[t]
            if alpha[t] >= upper[t]:
                if y[t] < 0:
                    ub = min(ub, yg)
                else:
                    lb = max(lb, yg)
            elif alpha[t] <= 0.0:
                if y[t] > 0:
                    ub = min(ub, yg)
                else:
                    lb = max(lb, yg)
            else:
                free_sum += yg
                n_free += 1
    if n_free > 0:
        rho = free_sum / n_free
    elif ub < INFINITY and lb > -INFINITY:
        rho = (ub + lb) / 2.0
    else:
        rho = ub if ub < INFINITY else (lb if lb > -INFINITY else 0.0)
    return it, rho, converged
