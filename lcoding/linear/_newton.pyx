# Function, gradient, Hessian-vector and preconditioner kernels for the primal
# L2-regularised ERM problems that LIBLINEAR 2.50 solves by a truncated Newton
# method (l2r_erm_fun / l2r_lr_fun / l2r_l2_svc_fun / l2r_l2_svr_fun in
# linear.cpp; the Newton driver is newton.cpp, here lcoding/solvers_newton.py):
#
#     f(w) = 1/2 w_r^T w_r + sum_i C_i xi_i(t_i),      t_i = w^T [x_i; B]
#
# w_r is w, or w without its last (bias) coordinate under -R.  Losses:
#
#     logistic       (-s 0):  xi_i(t) = log(1 + exp(-y_i t))
#     squared hinge  (-s 2):  xi_i(t) = max(0, 1 - y_i t)^2
#     squared eps-insensitive (-s 11):  xi_i(t) = max(0, |t - y_i| - p)^2
#
# Gradient and (generalised) Hessian:
#
#     g = w_r + sum_i v_i x_i,        H = I_r + sum_{i in I} h_i x_i x_i^T
#
#     logistic:  sigma_i = 1 / (1 + exp(-y_i t_i)),  v_i = C_i (sigma_i - 1) y_i,
#                h_i = C_i sigma_i (1 - sigma_i),  I = all rows
#     sq. hinge: I = {i : y_i t_i < 1},  v_i = 2 C_i y_i (y_i t_i - 1),  h_i = 2 C_i
#     SVR:       d_i = t_i - y_i,  I = {i : |d_i| > p},
#                v_i = 2 C_i (d_i + p) (d_i < -p) or 2 C_i (d_i - p) (d_i > p),  h_i = 2 C_i
#
# (I_r: the identity, without the bias diagonal entry under -R.)  The diagonal
# preconditioner is diag(H); the driver blends it as (1 - a) + a diag(H), a = 0.01
# (Hsia, Chiang & Lin, ACML 2018).  Line search works on t + alpha X s, so each
# trial step costs O(l), not O(nnz) (Galli & Lin, IEEE TNNLS 2021).
#
# One method call = one evaluation (f, g, Hv, diag(H), Xs or a trial step); the
# Python driver owns the Newton / CG iterations and every stopping rule.  Rows are
# plain CSR with the bias as a virtual last coordinate, or -- for -s 2 on a local
# coding -- the coded rows z_i = gamma(x_i) (x) [x_i; B] of _rows.pxd, never written
# out: x_i . w becomes <W, z_i> (coded_dot) and x_i's axpy coded_axpy, the same f, g
# and H on the m * stride weights (+1 for a shared bias).  Reading x_i and its k
# coding weights instead of k (d + 1) stored values (ijcnn1's LL-SVM: 0.26 KB + 0.19
# KB against 4.4 KB a row) is what makes the products cheaper than on the CSR.
from libc.math cimport exp, log1p
from libc.stdint cimport int64_t
from libc.string cimport memset

import numpy as np

from lcoding.core._csr_check cimport csr_problem
from lcoding.core._rows cimport CodedRows, coded_axpy, coded_dot

LOSS_LOGISTIC = 0
LOSS_SQUARED_HINGE = 1
LOSS_SQUARED_EPS_INSENSITIVE = 2

cdef enum:
    LOGISTIC = 0
    SQUARED_HINGE = 1
    SQUARED_EPS_INSENSITIVE = 2


cdef inline double c_times_loss(int loss, double C, double y, double p, double t) noexcept nogil:
    # C_i xi_i(t), written so that exp never overflows
    cdef double z, d
    if loss == LOGISTIC:
        z = y * t
        if z >= 0:
            return C * log1p(exp(-z))
        return C * (log1p(exp(z)) - z)
    if loss == SQUARED_HINGE:
        d = 1.0 - y * t
        return C * d * d if d > 0 else 0.0
    d = t - y
    if d < -p:
        return C * (d + p) * (d + p)
    if d > p:
        return C * (d - p) * (d - p)
    return 0.0


cdef class ErmObjective:
    """One primal problem: rows, targets, per-row C, loss and -R.

    Holds the work vectors of LIBLINEAR's function object: ``t = Xw`` of the
    current iterate, ``Xs`` of the current direction, and the active set ``I``
    with the Hessian weights ``h`` computed by the last :meth:`gradient`.
    """
    cdef const double[::1] X_data
    cdef const int[::1] X_indices
    cdef const int64_t[::1] X_indptr
    cdef const int[:, ::1] anchor_idx
    cdef const double[:, ::1] coding_weight
    cdef CodedRows rows
    cdef const double[::1] y
    cdef const double[::1] C
    cdef int loss
    cdef double p
    cdef bint regularize_bias
    cdef double[::1] t          # X w of the current iterate
    cdef double[::1] ts         # X s of the current search direction
    cdef double[::1] h          # Hessian weight of the k-th active row
    cdef double[::1] D          # logistic only: sigma (1 - sigma) of the k-th row
    cdef int64_t[::1] active    # ids of the active rows (I)
    cdef Py_ssize_t n_active
    cdef readonly Py_ssize_t n_rows
    cdef readonly Py_ssize_t n_vars
    cdef readonly double wTw    # w_r^T w_r of the current iterate

    def __cinit__(self, const double[::1] X_data, const int[::1] X_indices,
                  const int64_t[::1] X_indptr, Py_ssize_t n_features, double bias,
                  const double[::1] y, const double[::1] C, int loss, double p,
                  bint regularize_bias, const int[:, ::1] anchor_idx=None,
                  const double[:, ::1] coding_weight=None, Py_ssize_t n_anchors=1,
                  double shared_bias=-1.0):
        """Linear rows, or coded rows with ``anchor_idx`` / ``coding_weight`` (n, k) of
        ``n_anchors`` anchors (``bias``: the per-anchor bias value; ``shared_bias``:
        one bias weight shared by all anchors, the last variable)."""
        cdef Py_ssize_t n = X_indptr.shape[0] - 1
        cdef str problem = csr_problem(X_indices, X_indptr, X_data.shape[0], n_features)
        cdef bint coded = anchor_idx is not None
        if problem is not None:
            raise ValueError(f"ErmObjective: {problem}")
        if y.shape[0] != n or C.shape[0] != n:
            raise ValueError(f"ErmObjective: {n} rows but {y.shape[0]} targets and {C.shape[0]} costs")
        if loss not in (LOGISTIC, SQUARED_HINGE, SQUARED_EPS_INSENSITIVE):
            raise ValueError(f"ErmObjective: unknown loss {loss}")
        if coded:
            # the kernels trust these shapes (bounds checks are off)
            if coding_weight is None or anchor_idx.shape[0] != n or \
                    coding_weight.shape[0] != n or coding_weight.shape[1] != anchor_idx.shape[1]:
                raise ValueError(f"ErmObjective: the coding must be two (n, k) arrays for the "
                                 f"{n} rows")
            if n_anchors < 1 or (n > 0 and anchor_idx.shape[1] > 0 and (
                    np.min(anchor_idx) < 0 or np.max(anchor_idx) >= n_anchors)):
                raise ValueError(f"ErmObjective: anchor ids must lie in [0, {n_anchors})")
            if not regularize_bias:
                raise ValueError("ErmObjective: -R (an unregularised bias) applies to linear "
                                 "models only")
            if n > 0 and anchor_idx.shape[1] == 0:
                raise ValueError("ErmObjective: the coding has no column")
        elif shared_bias >= 0:
            raise ValueError("ErmObjective: a shared bias needs a coding")
        if not regularize_bias and bias < 0:
            raise ValueError("ErmObjective: an unregularised bias needs a bias coordinate (-B 1)")
        self.X_data = X_data
        self.X_indices = X_indices
        self.X_indptr = X_indptr
        self.rows.data = &X_data[0] if X_data.shape[0] > 0 else NULL
        self.rows.indices = &X_indices[0] if X_indices.shape[0] > 0 else NULL
        self.rows.indptr = &X_indptr[0]
        self.rows.bias = bias
        self.rows.n_features = n_features
        self.rows.stride = n_features + (1 if bias >= 0 else 0)
        if coded and anchor_idx.shape[1] > 0 and n > 0:
            self.anchor_idx = anchor_idx
            self.coding_weight = coding_weight
            self.rows.anchor_idx = &anchor_idx[0, 0]
            self.rows.coding_weight = &coding_weight[0, 0]
            self.rows.k = anchor_idx.shape[1]
        elif coded:
            # no rows: nothing to read
            self.rows.anchor_idx = NULL
            self.rows.coding_weight = NULL
            self.rows.k = 0
        else:
            self.rows.anchor_idx = NULL
            self.rows.coding_weight = NULL
            self.rows.k = 1
        self.rows.shared_bias = shared_bias
        self.y = y
        self.C = C
        self.loss = loss
        self.p = p
        self.regularize_bias = regularize_bias
        self.n_rows = n
        self.n_vars = (n_anchors * self.rows.stride + (1 if shared_bias >= 0 else 0) if coded
                       else self.rows.stride)
        self.rows.shared_bias_pos = self.n_vars - 1
        self.t = np.zeros(n, dtype=np.float64)
        self.ts = np.zeros(n, dtype=np.float64)
        self.h = np.zeros(n, dtype=np.float64)
        self.D = np.zeros(n if loss == LOGISTIC else 0, dtype=np.float64)
        self.active = np.zeros(n, dtype=np.int64)
        self.n_active = 0
        self.wTw = 0.0

    cdef void _check(self, Py_ssize_t size, str what) except *:
        if size != self.n_vars:
            raise ValueError(f"ErmObjective: {what} has length {size}, expected {self.n_vars}")

    def value(self, const double[::1] w):
        """f(w); also stores t = Xw and w_r^T w_r for the later calls."""
        self._check(w.shape[0], "w")
        cdef Py_ssize_t i, n = self.n_rows, m = self.n_vars
        cdef double wTw = 0.0, f = 0.0
        cdef const double* wp = &w[0] if m > 0 else NULL
        cdef double* t = &self.t[0] if n > 0 else NULL
        cdef const double* y = &self.y[0] if n > 0 else NULL
        cdef const double* C = &self.C[0] if n > 0 else NULL
        cdef const CodedRows* rows = &self.rows
        cdef int loss = self.loss
        cdef double p = self.p
        with nogil:
            for i in range(m):
                wTw += wp[i] * wp[i]
            if not self.regularize_bias:
                wTw -= wp[m - 1] * wp[m - 1]
            for i in range(n):
                t[i] = coded_dot(rows, i, wp)
                f += c_times_loss(loss, C[i], y[i], p, t[i])
        self.wTw = wTw
        return f + 0.5 * wTw

    def margins(self, double[::1] out):
        """out = t = Xw, the rows' decision values at the iterate of the last
        value()/take_step() (the squared hinge's dual point is read from them)."""
        if out.shape[0] != self.n_rows:
            raise ValueError(f"ErmObjective.margins: out has length {out.shape[0]}, "
                             f"expected {self.n_rows}")
        out[:] = self.t

    def gradient(self, const double[::1] w, double[::1] g):
        """g = grad f(w) at the iterate of the last value()/take_step(); also
        fixes the active set and Hessian weights used by hessian_vector().
        Returns the size of the active set."""
        self._check(w.shape[0], "w")
        self._check(g.shape[0], "g")
        cdef Py_ssize_t i, k = 0, n = self.n_rows, m = self.n_vars
        cdef double sigma, z, d, Ci, yi
        cdef const double* wp = &w[0] if m > 0 else NULL
        cdef double* gp = &g[0] if m > 0 else NULL
        cdef const double* t = &self.t[0] if n > 0 else NULL
        cdef const double* y = &self.y[0] if n > 0 else NULL
        cdef const double* C = &self.C[0] if n > 0 else NULL
        cdef double* h = &self.h[0] if n > 0 else NULL
        cdef double* D = &self.D[0] if self.D.shape[0] > 0 else NULL
        cdef int64_t* active = &self.active[0] if n > 0 else NULL
        cdef const CodedRows* rows = &self.rows
        cdef int loss = self.loss
        cdef double p = self.p
        with nogil:
            if m > 0:
                memset(gp, 0, m * sizeof(double))
            if loss == LOGISTIC:
                for i in range(n):
                    Ci = C[i]
                    yi = y[i]
                    sigma = 1.0 / (1.0 + exp(-yi * t[i]))
                    D[k] = sigma * (1.0 - sigma)
                    h[k] = Ci * D[k]
                    active[k] = i
                    k += 1
                    coded_axpy(rows, i, Ci * (sigma - 1.0) * yi, gp)
            elif loss == SQUARED_HINGE:
                for i in range(n):
                    yi = y[i]
                    z = yi * t[i]
                    if z < 1.0:
                        Ci = C[i]
                        h[k] = 2.0 * Ci
                        active[k] = i
                        k += 1
                        coded_axpy(rows, i, 2.0 * Ci * yi * (z - 1.0), gp)
            else:
                for i in range(n):
                    d = t[i] - y[i]
                    if d < -p or d > p:
                        Ci = C[i]
                        h[k] = 2.0 * Ci
                        active[k] = i
                        k += 1
                        coded_axpy(rows, i, 2.0 * Ci * (d + p if d < -p else d - p), gp)
            for i in range(m):
                gp[i] += wp[i]
            if not self.regularize_bias:
                gp[m - 1] -= wp[m - 1]
        self.n_active = k
        return k

    def hessian_vector(self, const double[::1] s, double[::1] out):
        """out = H s, with H at the point of the last gradient()."""
        self._check(s.shape[0], "s")
        self._check(out.shape[0], "out")
        cdef Py_ssize_t k, i, m = self.n_vars, n_active = self.n_active
        cdef const double* sp = &s[0] if m > 0 else NULL
        cdef double* op = &out[0] if m > 0 else NULL
        cdef const double* h = &self.h[0] if self.n_rows > 0 else NULL
        cdef const int64_t* active = &self.active[0] if self.n_rows > 0 else NULL
        cdef const CodedRows* rows = &self.rows
        with nogil:
            if m > 0:
                memset(op, 0, m * sizeof(double))
            for k in range(n_active):
                i = active[k]
                coded_axpy(rows, i, h[k] * coded_dot(rows, i, sp), op)
            for i in range(m):
                op[i] += sp[i]
            if not self.regularize_bias:
                op[m - 1] -= sp[m - 1]

    def diag_preconditioner(self, double[::1] M):
        """M = diag(H) at the point of the last gradient()."""
        self._check(M.shape[0], "M")
        cdef Py_ssize_t k, i, j, m = self.n_vars, n_active = self.n_active
        cdef int64_t q, base
        cdef double Ci, curv, v, g
        cdef double* Mp = &M[0] if m > 0 else NULL
        cdef const double* C = &self.C[0] if self.n_rows > 0 else NULL
        cdef const double* D = &self.D[0] if self.D.shape[0] > 0 else NULL
        cdef const int64_t* active = &self.active[0] if self.n_rows > 0 else NULL
        cdef const CodedRows* rows = &self.rows
        cdef bint logistic = self.loss == LOGISTIC
        with nogil:
            for j in range(m):
                Mp[j] = 1.0
            if not self.regularize_bias:
                Mp[m - 1] = 0.0
            for k in range(n_active):
                i = active[k]
                Ci = C[i]
                curv = D[k] if logistic else 2.0
                if rows.anchor_idx == NULL and rows.k == 1:
                    # (x^2 C) curv, in LIBLINEAR's order of rounding
                    for q in range(rows.indptr[i], rows.indptr[i + 1]):
                        v = rows.data[q]
                        Mp[rows.indices[q]] += v * v * Ci * curv
                    if rows.bias >= 0:
                        Mp[rows.n_features] += rows.bias * rows.bias * Ci * curv
                    continue
                # coded rows: the entries gamma_j x_q of block a_j, as written out
                for j in range(rows.k):
                    g = rows.coding_weight[i * rows.k + j]
                    if g == 0.0:
                        continue
                    base = rows.anchor_idx[i * rows.k + j] * rows.stride
                    for q in range(rows.indptr[i], rows.indptr[i + 1]):
                        v = g * rows.data[q]
                        Mp[base + rows.indices[q]] += v * v * Ci * curv
                    if rows.bias >= 0:
                        v = g * rows.bias
                        Mp[base + rows.n_features] += v * v * Ci * curv
                if rows.shared_bias >= 0:
                    Mp[rows.shared_bias_pos] += rows.shared_bias * rows.shared_bias * Ci * curv

    def set_direction(self, const double[::1] s):
        """Store X s for the trial steps of the line search."""
        self._check(s.shape[0], "s")
        cdef Py_ssize_t i, n = self.n_rows
        cdef const double* sp = &s[0] if self.n_vars > 0 else NULL
        cdef double* ts = &self.ts[0] if n > 0 else NULL
        cdef const CodedRows* rows = &self.rows
        with nogil:
            for i in range(n):
                ts[i] = coded_dot(rows, i, sp)

    def loss_at_step(self, double alpha):
        """sum_i C_i xi_i(t_i + alpha (Xs)_i): the loss part of f(w + alpha s)."""
        cdef Py_ssize_t i, n = self.n_rows
        cdef double f = 0.0
        cdef const double* t = &self.t[0] if n > 0 else NULL
        cdef const double* ts = &self.ts[0] if n > 0 else NULL
        cdef const double* y = &self.y[0] if n > 0 else NULL
        cdef const double* C = &self.C[0] if n > 0 else NULL
        cdef int loss = self.loss
        cdef double p = self.p
        with nogil:
            for i in range(n):
                f += c_times_loss(loss, C[i], y[i], p, t[i] + alpha * ts[i])
        return f

    def take_step(self, double alpha, double new_wTw):
        """Move the stored t = Xw to X(w + alpha s); the driver updates w itself."""
        cdef Py_ssize_t i, n = self.n_rows
        cdef double* t = &self.t[0] if n > 0 else NULL
        cdef const double* ts = &self.ts[0] if n > 0 else NULL
        with nogil:
            for i in range(n):
                t[i] += alpha * ts[i]
        self.wTw = new_wTw
