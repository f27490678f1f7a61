"""Kernels and transformation invariances (Chapelle & Schoelkopf, NIPS 2001).

The method is reconstructed in ``algorithms.md`` §E (the seed text is garbled);
``docs/invariant.md`` is the user's page.  Options (``lcoding.core.options``):

* ``-t -d -g -r``: LIBSVM's kernels, ``k(u, v)`` computed in BLAS blocks
  (``lcoding._kernels``).
* ``-H 0`` kernel PCA map ``psi(x) = Lambda^(-1/2) U^T k(x)`` on ``-X`` landmarks
  (random training points; all of them when fewer), then any ``-s`` solver on psi:
  ``-s 3 -t 2 -g 0.05`` is an approximate RBF SVM.
* ``-H 1`` IHKPCA: the invariant linear SVM on psi with the tangents
  ``dpsi_i = psi(x_i + dx_i) - psi(x_i)``: train on ``C_gamma^(-1/2) psi(x)`` with
  ``C_gamma = (1 - gamma) I + gamma sum_i dpsi_i dpsi_i^T`` (tangents normalised by
  their average length).  Without ``-t`` the same in input space (the invariant
  linear SVM; the result is a plain LIBLINEAR model ``w = C_gamma^(-1/2) w~``).
* ``-H 2`` ISVM: the kernel SVM with the tangent kernel (§E.3, Woodbury form)
  ``K~(x, y) = [K(x, y) - gamma g(x)^T ((1-gamma) I + gamma K_t)^(-1) g(y)] / (1 - gamma)``,
  solved exactly by SMO on the Gram matrix (``lcoding._kernel_svm``), because the
  kernel PCA map would only see the projection of the tangents onto span Phi(x_i).
  ``-Y 0`` is the plain kernel SVM (LIBSVM's C-SVC).
* ``-H 3`` VSV: the same kernel SVM on the training set plus its translated copies.
* ``-H 4`` IHKPCA on a kernel PCA map of the landmarks *and their transformed copies*
  ``x_l + dx_l`` (the virtual examples): the map then spans the feature-space tangents
  ``dPhi_l``, so nothing of them is lost in the projection; with every training point a
  landmark it is ISVM (``z_i . z_j = K~(x_i, x_j)``) solved by the ``-s`` solver.

Every trained kernel model is a kernel expansion ``f(x) = sum_k a_k K(z_k, x) + b``
(:class:`KernelExpansionModel`): for ``-H 0, 1, 4`` the linear weights on psi are
folded back through the map (``a = P^T w``, z = landmarks); for ISVM the tangent
terms ``g(x)`` are themselves kernel values at the shifted points, so z = the
training points and their shifted copies.  Prediction needs only the points, the
kernel and ``a``: that is what the model file stores.

Dense linear algebra (symmetric eigendecompositions, Cholesky solves) is done by
numpy / scipy.linalg (LAPACK).
"""
from __future__ import annotations

import dataclasses
import math
import time
import warnings

import numpy as np
import scipy.linalg
import scipy.linalg.lapack

from lcoding.methods import _kernel_svm, _kernels
from lcoding.core.rows import Rows, as_labels, as_rows, rows_from_dense
from lcoding.core.model import (LINEAR_SOLVER_TYPES, LinearModel, Model, ModelFieldError,
                                check_count, check_number, overflow_error)
from lcoding.core.options import JOINT_SOLVERS, SolverType, TrainParams, parse_train_options
from lcoding.core.messages import Messages, event
from lcoding.core.classes import class_costs, group_classes
from lcoding.core.params import Invariance, KernelParams, KernelType
from lcoding.core.seeds import PURPOSE_LANDMARKS, rng_state
from lcoding.core.threads import STOP_FLAG, check_stop
from lcoding.local.coding import row_slice
from lcoding.core.options import check_parameter
from lcoding.methods.linear import train_linear_model

FORMAT_VERSION = "1"
MODEL_NAME = "kernel_expansion"
KERNEL_NAMES = {0: "linear", 1: "polynomial", 2: "rbf", 3: "sigmoid"}   # LIBSVM's names
KERNEL_BY_NAME = {name: kt for kt, name in KERNEL_NAMES.items()}
METHOD_NAMES = {0: "kpca_map", 1: "ihkpca", 2: "isvm", 3: "vsv", 4: "ihkpca_virtual"}
METHOD_BY_NAME = {name: m for m, name in METHOD_NAMES.items()}
TANGENT_NAMES = {0: "none", 1: "horizontal", 2: "vertical", 3: "both", 4: "user"}
TANGENT_BY_NAME = {name: t for t, name in TANGENT_NAMES.items()}
# -J bits: which 1-pixel translations give tangent vectors
SHIFT_RIGHT = 1
SHIFT_UP = 2

# kernel PCA keeps eigenvalues above this fraction of the largest (§E.4: "small
# eigenvalues dropped"); below it psi would amplify rounding noise
EIGEN_RTOL = 1e-10
# the map's landmarks: the pivots of the Gram matrix's pivoted Cholesky down to this
# fraction of its largest eigenvalue (spanning_landmarks).  3-fold CV, 1e-10 / 1e-8 /
# 1e-6, error % (landmarks kept of 1000): banana 9.48 (107) / 9.48 (79) / 9.54 (56),
# second seed 9.40 / 9.51 / 9.43; magic04 12.93 (998) / 12.93 (775) / 13.14 (364),
# second seed 13.04 / 13.11 / 13.20; ijcnn1 (20 000 rows) 1.90 (1000) / 1.92 (995) /
# 1.93 (855); letter 6.41 / 6.41 / 6.40 (994); usps 2.87 (1000) at all three
SPAN_RTOL = 1e-8
SVC_SOLVERS = frozenset({int(SolverType.L2R_L2LOSS_SVC_DUAL), int(SolverType.L2R_L1LOSS_SVC_DUAL)})



class InvarianceWarning(UserWarning):
    """The kernel SVM stopped at its iteration limit."""


# ----------------------------------------------------------------------------- kernels
@dataclasses.dataclass(frozen=True)
class Kernel:
    """A LIBSVM kernel (``-t -d -g -r``) with a resolved ``gamma``."""
    kernel_type: int
    degree: int = 3
    gamma: float = 1.0
    coef0: float = 0.0

    @property
    def name(self) -> str:
        return KERNEL_NAMES[self.kernel_type]

    def matrix(self, x, points: np.ndarray, points_sq: np.ndarray | None = None) -> np.ndarray:
        """``K[i, j] = k(x_i, points_j)`` for :class:`Rows` or a dense 2-D array ``x``
        (columns beyond ``points.shape[1]`` ignored).  The rows go to the kernel in
        chunks of about :data:`KERNEL_CALL_WORK` multiply-adds (multiples of its row
        block, so the same numbers), with a Ctrl-C check between them."""
        rows = x if isinstance(x, Rows) else rows_from_dense(x, "x")
        points = np.ascontiguousarray(points, dtype=np.float64)
        if points_sq is None:
            points_sq = np.einsum("ij,ij->i", points, points)
        m, d = points.shape
        out = np.empty((rows.n_rows, m))
        step = _kernel_row_chunk(m, d)
        for a in range(0, rows.n_rows, step):
            check_stop()
            b = min(rows.n_rows, a + step)
            part = row_slice(rows, a, b)
            status = _kernels.kernel_block(part.data, part.indices, part.indptr, points,
                                           points_sq, out[a:b], self.kernel_type, self.degree,
                                           self.gamma, self.coef0)
            if status != 0:
                raise MemoryError(f"kernel block: cannot allocate the row buffer of "
                                  f"{min(b - a, 256)} x {d} values")
        return out


# multiply-adds per kernel_block call of Kernel.matrix (a fraction of a second)
KERNEL_CALL_WORK = 1 << 27


def rowwise_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A @ B`` in chunks of rows (multiples of 256 rows) with a Ctrl-C check between
    them, so that one BLAS call stays short on MNIST-size data."""
    n, inner = A.shape
    out = np.empty((n, B.shape[1]), dtype=np.result_type(A, B))
    step = max(256, KERNEL_CALL_WORK // max(1, inner * B.shape[1]) // 256 * 256)
    for a in range(0, n, step):
        check_stop()
        np.matmul(A[a:a + step], B, out=out[a:a + step])
    return out


def _kernel_row_chunk(m: int, d: int) -> int:
    """Rows per kernel_block call for m points of d features: a multiple of the
    kernel's row block (256 rows, fewer when 256 * d exceeds its 4 Mi-double buffer)."""
    block = 256 if d * 256 <= 4194304 else max(1, 4194304 // max(d, 1))
    rows = KERNEL_CALL_WORK // max(1, m * max(d, 1))
    return max(block, rows // block * block)


def kernel_from_params(params: TrainParams, n_features: int) -> Kernel:
    """The ``-t -d -g -r`` kernel; ``-g 0`` means 1/n_features, as in LIBSVM."""
    gamma = params.kernel_gamma if params.kernel_gamma > 0 else 1.0 / max(n_features, 1)
    kernel_type = params.kernel_type if params.kernel_type >= 0 else 0
    return Kernel(int(kernel_type), int(params.degree), float(gamma), float(params.coef0))


# ----------------------------------------------------------------------------- tangents
def image_shape(n_features: int, width: int) -> tuple:
    """``(height, width)`` of images stored row by row in ``n_features`` pixels."""
    if width == 0:
        side = math.isqrt(n_features)
        if side * side != n_features:
            raise ValueError(f"-N 0 means square images, but {n_features} features are not a "
                             f"square number of pixels; give the image width with -N")
        return side, side
    if width < 0 or n_features % width != 0:
        raise ValueError(f"-N {width}: the image width must divide the {n_features} features")
    return n_features // width, width


def translated_images(X: np.ndarray, width: int, kinds: int, background: float = 0.0) -> list:
    """The 1-pixel translations of the images in the rows of ``X`` (row-major pixels):
    to the right (``kinds & 1``) and up (``kinds & 2``); vacated pixels get
    ``background`` (0: the implicit value of an absent feature)."""
    n, d = X.shape
    height, wide = image_shape(d, width)
    images = X.reshape(n, height, wide)
    out = []
    if kinds & SHIFT_RIGHT:
        right = np.full_like(images, background)
        right[:, :, 1:] = images[:, :, :-1]
        out.append(right.reshape(n, d))
    if kinds & SHIFT_UP:
        up = np.full_like(images, background)
        up[:, :-1, :] = images[:, 1:, :]
        out.append(up.reshape(n, d))
    return out


def image_tangents(X: np.ndarray, width: int, kinds: int, background: float = 0.0) -> np.ndarray:
    """Finite-difference tangent vectors ``L_1 x - x`` (§E.1): shape ``(n_kinds, n, d)``."""
    X = np.asarray(X, dtype=np.float64)
    return np.stack([shifted - X for shifted in translated_images(X, width, kinds, background)])


def _check_tangents(tangents, n: int, d: int) -> np.ndarray:
    arr = np.asarray(tangents)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"tangents: dtype {arr.dtype} is not numeric")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3 or arr.shape[1:] != (n, d):
        raise ValueError(f"tangents: expected shape ({n}, {d}) or (n_kinds, {n}, {d}) for {n} "
                         f"rows of {d} features, got {np.shape(tangents)}")
    if not np.isfinite(arr).all():
        raise ValueError("tangents: values must be finite")
    return arr


# ------------------------------------------------------------------- kernel PCA / C_gamma
def landmark_gram(kernel: Kernel, landmarks: np.ndarray) -> np.ndarray:
    """The landmarks' Gram matrix, symmetrised (the kernel's rounding is not)."""
    gram = kernel.matrix(landmarks, landmarks)
    return (gram + gram.T) / 2.0


def kernel_pca_map(kernel: Kernel, landmarks: np.ndarray, rtol: float = EIGEN_RTOL,
                   gram: np.ndarray | None = None) -> np.ndarray:
    """``P = Lambda^(-1/2) U^T`` (r x m) from the uncentred landmark Gram matrix
    ``K = U Lambda U^T``, eigenvalues below ``rtol * max`` dropped, so that
    ``psi(x) = P k(x)`` and ``psi(x_i) . psi(x_j) = K(x_i, x_j)`` on the landmarks (eq. 9).
    ``gram``: :func:`landmark_gram` of the landmarks when the caller has it."""
    gram = landmark_gram(kernel, landmarks) if gram is None else gram
    lam, U = scipy.linalg.eigh(gram)
    top = lam[-1] if lam.size else 0.0
    keep = lam > rtol * top if top > 0 else np.zeros(lam.size, dtype=bool)
    if not keep.any():
        raise ValueError(f"kernel PCA map: the {kernel.name} Gram matrix of the landmarks has no "
                         f"positive eigenvalue (check -t -d -g -r)")
    lam, U = lam[keep][::-1], U[:, keep][:, ::-1]
    return np.ascontiguousarray(U.T / np.sqrt(lam)[:, None])


# power-iteration steps for the Gram matrix's largest eigenvalue (the scale of the
# landmarks' span tolerance; from the all-ones start, within 1 % by 10 steps on the
# shared sets' RBF Grams, whose entries are positive)
TOP_EIGENVALUE_STEPS = 30


def top_eigenvalue(gram: np.ndarray) -> float:
    """A lower bound on the largest eigenvalue of the symmetric ``gram`` that is close to
    it: the Rayleigh quotient after :data:`TOP_EIGENVALUE_STEPS` power steps from the
    all-ones vector (m^2 work a step, not the eigendecomposition's m^3)."""
    v = np.ones(gram.shape[0])
    for _ in range(TOP_EIGENVALUE_STEPS):
        u = gram @ v
        norm = float(np.sqrt(u @ u))
        if not norm > 0.0:
            return 0.0
        v = u / norm
    return float(v @ (gram @ v))


def psd_kernel(kernel: Kernel) -> bool:
    """Whether every Gram matrix of the kernel is positive semi-definite (what the
    pivoted Cholesky of :func:`spanning_landmarks` needs): linear, RBF, and polynomial
    with ``coef0 >= 0``; not the sigmoid."""
    kt = kernel.kernel_type
    return (kt in (KernelType.LINEAR, KernelType.RBF)
            or (kt == KernelType.POLYNOMIAL and kernel.coef0 >= 0.0))


def spanning_landmarks(gram: np.ndarray, rtol: float = EIGEN_RTOL) -> np.ndarray:
    """The landmarks the map needs (indices into ``gram``'s rows, ascending): the
    pivots of a pivoted Cholesky factorisation of the Gram matrix (LAPACK dpstrf),
    stopped when every other landmark's squared distance in feature space to the
    pivots' span, ``K_jj - k_j^T K_pp^-1 k_j``, is at most ``rtol`` times the largest
    eigenvalue (:func:`kernel_pca_map` itself drops directions below ``EIGEN_RTOL``).
    The map on the pivots spans the same functions up to that level, while prediction
    evaluates the kernel at the pivots only.  At the maps' ``SPAN_RTOL`` (1e-8) of
    1000 RBF landmarks: banana keeps 79 (its kernel is smooth in two dimensions),
    magic04 775, ijcnn1 995, usps all 1000."""
    m = gram.shape[0]
    top = top_eigenvalue(gram)
    if m <= 1 or not top > 0.0:
        return np.arange(m)
    _, piv, rank, info = scipy.linalg.lapack.dpstrf(gram, tol=rtol * top, lower=1)
    if info < 0:                # pragma: no cover - an argument LAPACK rejects
        raise RuntimeError(f"pivoted Cholesky of the landmarks' Gram matrix: LAPACK dpstrf "
                           f"info {info}")
    rank = max(1, int(rank))
    return np.sort(piv[:rank] - 1) if rank < m else np.arange(m)


def map_landmarks(kernel: Kernel, landmarks: np.ndarray) -> tuple:
    """``(landmarks, gram)``: the drawn landmarks a kernel PCA map keeps and their Gram
    matrix (:func:`landmark_gram`).  A positive semi-definite kernel keeps only those
    whose span the map needs (:func:`spanning_landmarks` at :data:`SPAN_RTOL`): the
    others add kernel evaluations to every prediction and nothing the map keeps."""
    gram = landmark_gram(kernel, landmarks)
    if psd_kernel(kernel):
        keep = spanning_landmarks(gram, SPAN_RTOL)
        if keep.size < landmarks.shape[0]:
            return landmarks[keep], gram[np.ix_(keep, keep)]
    return landmarks, gram


def invariant_whitening(tangents: np.ndarray, gamma: float) -> np.ndarray:
    """``C_gamma^(-1/2)`` (symmetric) for ``C_gamma = (1 - gamma) I + gamma sum_i t_i t_i^T``
    over the rows ``t_i`` of ``tangents``, each divided by the average tangent length
    ``sqrt(sum_i |t_i|^2 / n)`` (§E.2, §E.6)."""
    T = np.asarray(tangents, dtype=np.float64)
    dim = T.shape[1]
    if gamma == 0.0:
        return np.eye(dim)
    mean_sq = float(np.einsum("ij,ij->", T, T)) / T.shape[0]
    if not mean_sq > 0.0:
        raise ValueError("tangents: all tangent vectors are zero, so there is no invariance to "
                         "enforce (use -Y 0, or other tangents)")
    cov = (1.0 - gamma) * np.eye(dim) + (gamma / mean_sq) * (T.T @ T)
    ev, V = scipy.linalg.eigh((cov + cov.T) / 2.0)
    ev = np.maximum(ev, 1.0 - gamma)     # the exact spectrum is >= 1 - gamma; rounding aside
    return (V / np.sqrt(ev)[None, :]) @ V.T


def virtual_landmarks(landmarks: np.ndarray, tangents: np.ndarray) -> np.ndarray:
    """The landmarks followed by their transformed copies ``l + dl`` for every tangent kind
    (``tangents``: ``(n_kinds, m, d)``, the tangents of the landmarks): the points of the
    ``-H 4`` kernel PCA map, ``m (1 + n_kinds)`` rows."""
    return np.vstack([landmarks] + [landmarks + tangents[k] for k in range(tangents.shape[0])])


def ihkpca_map(kernel: Kernel, X: np.ndarray, dX, landmarks: np.ndarray, gamma: float,
               KX: np.ndarray | None = None, gram: np.ndarray | None = None) -> np.ndarray:
    """``P = C_gamma^(-1/2) Lambda^(-1/2) U^T`` (r x m) of IHKPCA (§E.4): the kernel PCA map
    of ``landmarks`` followed by the invariant whitening with the tangents
    ``dpsi_i = psi(x_i + dx_i) - psi(x_i)`` of the training points ``X`` (``dX``:
    ``(n_kinds, n, d)``), so that ``z(x) = P k(x)``, ``k(x) = (K(x, l_1), ..., K(x, l_m))``.
    With ``landmarks = virtual_landmarks(X, dX)`` the map spans every ``Phi(x_i + dx_i)``,
    hence ``dPhi_i``, and ``z(x) . z(y)`` is the ISVM kernel ``K~(x, y)`` of :class:`TangentKernel`
    (Woodbury: the same ``Phi(x)^T C_gamma^(-1) Phi(y)``).  ``KX``: ``kernel.matrix(X,
    landmarks)``, ``gram``: :func:`landmark_gram`, when the caller has them already."""
    P = kernel_pca_map(kernel, landmarks, gram=gram)
    if gamma > 0:
        KX = kernel.matrix(X, landmarks) if KX is None else KX
        dpsi = np.concatenate([rowwise_matmul(kernel.matrix(X + dX[k], landmarks) - KX, P.T)
                               for k in range(dX.shape[0])])
        P = invariant_whitening(dpsi, gamma) @ P
    return P


class TangentKernel:
    """The ISVM kernel of §E.3 for training points ``X`` with tangent vectors ``dX``
    (finite differences in feature space, eq. 7)::

        g_l(x)  = [K(x_l + dx_l, x) - K(x_l, x)] / s        (one l per tangent)
        K_t     = [g_l(x_l' + dx_l') - g_l(x_l')] / s       (tangent Gram matrix)
        K~(x,y) = [K(x, y) - gamma g(x)^T M^-1 g(y)] / (1 - gamma),  M = (1-gamma) I + gamma K_t

    with ``s^2 = mean(diag K_t)`` before scaling (average tangent length, §E.6)."""

    def __init__(self, kernel: Kernel, X: np.ndarray, dX: np.ndarray, gamma: float):
        if not 0.0 <= gamma < 1.0:
            raise ValueError(f"-Y {gamma}: gamma must be in [0, 1)")
        self.kernel = kernel
        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.gamma = float(gamma)
        n = self.X.shape[0]
        self.K = kernel.matrix(self.X, self.X)
        if gamma == 0.0:
            self.shifted = np.zeros((0, self.X.shape[1]))
            self.base = np.zeros(0, dtype=np.int64)
            return
        dX = _check_tangents(dX, n, self.X.shape[1])
        self.shifted = (self.X[None] + dX).reshape(-1, self.X.shape[1])
        self.base = np.tile(np.arange(n), dX.shape[0])
        A = kernel.matrix(self.shifted, self.X)                      # K(x_l + dx_l, x_i)
        G = A - self.K[self.base]                                    # unscaled g_l(x_i)
        B = kernel.matrix(self.shifted, self.shifted)
        Kt = B - A[:, self.base] - A[:, self.base].T + self.K[np.ix_(self.base, self.base)]
        mean_sq = float(np.mean(np.diag(Kt)))
        if not mean_sq > 0.0:
            raise ValueError("tangents: all feature-space tangents are zero, so there is no "
                             "invariance to enforce (use -Y 0, or other tangents)")
        self.scale = math.sqrt(mean_sq)
        self.G = G / self.scale
        # M^-1 from the eigendecomposition of K_t (PSD in exact arithmetic; the finite
        # differences of eq. 7 cancel, so rounding can leave tiny negative eigenvalues,
        # which are clipped to 0 -- with gamma near 1 they would make M indefinite)
        lam, self.M_vectors = scipy.linalg.eigh((Kt + Kt.T) / (2.0 * mean_sq))
        self.M_inverse_values = 1.0 / ((1.0 - gamma) + gamma * np.maximum(lam, 0.0))

    def _solve_M(self, rhs: np.ndarray) -> np.ndarray:
        """``((1 - gamma) I + gamma K_t)^-1 rhs``."""
        V = self.M_vectors
        return V @ (self.M_inverse_values[:, None] * (V.T @ rhs))

    def gram(self) -> np.ndarray:
        """``K~`` on the training points (n x n)."""
        if self.gamma == 0.0:
            return self.K
        sub = self.G.T @ self._solve_M(self.G)
        out = (self.K - self.gamma * sub) / (1.0 - self.gamma)
        return np.ascontiguousarray((out + out.T) / 2.0)

    def cross(self, x) -> np.ndarray:
        """``K~(x_i, x)`` for the training points x_i and new rows x: (n, n_rows)."""
        Kx = self.kernel.matrix(x, self.X).T
        if self.gamma == 0.0:
            return Kx
        gx = (self.kernel.matrix(x, self.shifted).T - Kx[self.base]) / self.scale
        return (Kx - self.gamma * self.G.T @ self._solve_M(gx)) \
            / (1.0 - self.gamma)

    def expansion(self, beta: np.ndarray):
        """Points z and coefficients a with ``sum_i beta_i K~(x_i, x) = sum_k a_k K(z_k, x)``
        for every x (beta: (n, n_columns))."""
        beta = np.asarray(beta, dtype=np.float64).reshape(self.X.shape[0], -1)
        if self.gamma == 0.0:
            return self.X, beta
        c = 1.0 / (1.0 - self.gamma)
        v = self._solve_M(self.G @ beta)                                # M^-1 G beta, (T, cols)
        on_shifted = -(self.gamma * c / self.scale) * v
        on_x = c * beta
        np.add.at(on_x, self.base, -on_shifted)
        return np.vstack([self.X, self.shifted]), np.vstack([on_x, on_shifted])


# ----------------------------------------------------------------------------- model
# predict_labels' mixed-precision sums (_rbf32.h) read every point once a row: for
# models of at most this many features and values (1 MiB of points), else dgemm's
# blocks of rows (kernel_decision) do better
RBF32_MAX_FEATURES = 64
RBF32_MAX_VALUES = 1 << 17


class KernelExpansionModel(Model):
    """``f_c(x) = sum_k w[k, c] K(z_k, x) (+ bias * w[m, c])``: the points ``z`` are
    landmarks (``-H 0, 1``; ``-H 4``: and their transformed copies) or training points and
    their shifted copies (``-H 2, 3``)."""

    def __init__(self, solver_type, nr_class, label, nr_feature, bias, kernel: Kernel, points, w,
                 method: str = "kpca_map", invariance_gamma: float = 0.0, tangents: str = "none",
                 rho: float = 0.0, param=None):
        self._set_header(solver_type, nr_class, label, nr_feature, bias)
        self.rho = float(rho)
        self.kernel = kernel
        if method not in METHOD_BY_NAME:
            raise ValueError(f"unknown method {method!r} (known: {', '.join(METHOD_BY_NAME)})")
        if tangents not in TANGENT_BY_NAME:
            raise ValueError(f"unknown tangents {tangents!r} (known: {', '.join(TANGENT_BY_NAME)})")
        self.method = method
        self.invariance_gamma = float(invariance_gamma)
        self.tangents = tangents
        self.param = param
        points = np.ascontiguousarray(points, dtype=np.float64)
        if points.ndim != 2 or points.shape[1] != self.nr_feature:
            raise ValueError(f"points have shape {points.shape}, expected (m, {self.nr_feature})")
        self.points = points
        self.w = self._checked_weights(w, points.shape[0] + (1 if self.bias >= 0 else 0),
                                       self.nr_w, vector_ok=True)
        self._points_sq = np.einsum("ij,ij->i", points, points)
        self._rbf32 = None          # predict_labels' single-precision plan, when first asked

    @property
    def n_points(self) -> int:
        return self.points.shape[0]

    def _decision_values(self, rows: Rows) -> np.ndarray:
        m = self.n_points
        W = np.ascontiguousarray(self.w[:m].reshape(m, self.nr_w))
        offset = (self.bias * self.w[m].reshape(self.nr_w) if self.bias >= 0
                  else np.zeros(self.nr_w))
        out = np.empty((rows.n_rows, self.nr_w))
        bad = np.empty(rows.n_rows, dtype=np.int8)
        step = _kernel_row_chunk(m, self.nr_feature)
        for a in range(0, rows.n_rows, step):
            check_stop()
            b = min(rows.n_rows, a + step)
            part = row_slice(rows, a, b)
            status = _kernels.kernel_decision(part.data, part.indices, part.indptr, self.points,
                                              self._points_sq, W, offset, out[a:b], bad[a:b],
                                              self.kernel.kernel_type, self.kernel.degree,
                                              self.kernel.gamma, self.kernel.coef0)
            if status != 0:
                raise MemoryError(f"kernel decision values: cannot allocate the buffers of "
                                  f"{min(b - a, 256)} rows x {max(m, self.nr_feature)} values")
        if bad.any():
            # a polynomial or linear kernel of a row near the float limit (or an RBF
            # row whose squared norm overflows): sums of its infinite kernel values
            # would be inf - inf = NaN
            first = int(np.flatnonzero(bad)[0])
            raise overflow_error(rows, first, f"{self.kernel.name} kernel values overflow")
        if self.is_oneclass_model():
            out[:, 0] -= self.rho
        return out

    def predict_labels(self, rows: Rows, **options) -> np.ndarray:
        """The labels of :meth:`labels_from_values` on the decision values.  A
        two-class RBF expansion of few features (:meth:`_rbf32_plan`) sums its kernel
        values with their exponentials in single precision (``_rbf32.h``; distances
        and sums in double): a row whose sum is farther from 0 than its error bound
        (:meth:`_rbf32_bound`) has the label the double-precision value gives, the
        others are computed again in double -- the same labels, in less time."""
        plan = self._rbf32_plan()
        if plan is None or rows.n_rows == 0:
            return super().predict_labels(rows, **options)
        VT, v_sq, a, absa = plan[:4]
        n = rows.n_rows
        f, A, Ae, x_sq = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
        step = _kernel_row_chunk(self.n_points, self.nr_feature)
        for lo in range(0, n, step):
            check_stop()
            hi = min(n, lo + step)
            part = row_slice(rows, lo, hi)
            if _kernels.rbf_sums_mixed(part.data, part.indices, part.indptr, VT, v_sq, a, absa,
                                       self.kernel.gamma, f[lo:hi], A[lo:hi], Ae[lo:hi],
                                       x_sq[lo:hi]) < 0:
                raise MemoryError("kernel decision values: cannot allocate a row buffer")
        m = self.n_points
        offset = self.bias * float(self.w[m, 0]) if self.bias >= 0 else 0.0
        with np.errstate(invalid="ignore", over="ignore"):
            total = f + offset
            decided = np.abs(total) > self._rbf32_bound(A, Ae, x_sq, abs(offset))
        label = np.asarray(self.label, dtype=np.float64)
        labels = np.where(total > 0, label[0], label[1])
        open_rows = np.flatnonzero(~decided)        # NaN sums too: the checked path
        if open_rows.size:
            labels[open_rows] = super().predict_labels(rows.take(open_rows), **options)
        return labels

    def _rbf32_plan(self):
        """``(VT, ||v||^2, a, |a| as float, max ||v||^2, sum |a|)``, the points
        feature-major and the expansion's weights for :meth:`predict_labels`' mixed
        precision sums; None where they do not apply: not RBF, more than two classes,
        one-class, no point, more than :data:`RBF32_MAX_FEATURES` features or points
        of more than :data:`RBF32_MAX_VALUES` values (the sums read the points once a
        row: they must stay in cache; dgemm's blocks do better above), a gamma not
        positive and finite (the float exponential takes exponents <= 0), points of
        squared norm above 1e300."""
        if getattr(self, "_rbf32", None) is None:    # (a model built without __init__)
            self._rbf32 = (self._make_rbf32_plan(),)
        return self._rbf32[0]

    def __getstate__(self):
        # the plan is a cache of the points and weights: rebuilt when first asked,
        # not carried in a pickle
        state = self.__dict__.copy()
        state["_rbf32"] = None
        return state

    def _make_rbf32_plan(self):
        k, m, d = self.kernel, self.n_points, self.nr_feature
        if (k.kernel_type != KernelType.RBF or self.nr_w != 1 or self.nr_class != 2
                or self.is_oneclass_model() or self.is_regression_model() or m == 0
                or not 1 <= d <= RBF32_MAX_FEATURES or m * d > RBF32_MAX_VALUES
                or not 0.0 < k.gamma < math.inf or not self._points_sq.max() <= 1e300):
            return None
        # padded to a multiple of the kernel's 32 points a pass with points of weight 0
        # (they add exactly 0): the remainder would take the scalar path, libm's expf
        # one value at a time (banana's 79 points: 0.43 against 0.24 us a row)
        m32 = -(-m // 32) * 32
        VT = np.zeros((d, m32))
        VT[:, :m] = self.points.T
        v_sq = np.zeros(m32)
        v_sq[:m] = self._points_sq
        a = np.zeros(m32)
        a[:m] = self.w[:m, 0]
        return (VT, v_sq, a, np.abs(a).astype(np.float32), float(self._points_sq.max()),
                float(np.abs(a).sum()))

    def _rbf32_bound(self, A: np.ndarray, Ae: np.ndarray, x_sq: np.ndarray,
                     abs_offset: float) -> np.ndarray:
        """A bound on |f - f64| per row: :meth:`predict_labels`' sum ``f`` against the
        decision value of :meth:`_decision_values`, from ``A`` = sum_j |a_j| k_j and
        ``Ae`` = sum_j |a_j| k_j |e_j| (float sums: within (m + 16) u of themselves,
        u = 2^-24) of the float kernel values k_j = exp(float(e_j)).

        - The two paths' exponents e_j (inner products in another order, or the
          direct squares of few features) differ by at most
          delta = 2 gamma (4d + 16) 2^-53 (||x||^2 + max_j ||v_j||^2);
        - rounding e_j to float moves exp(e_j) by a factor within exp(+-u |e_j|);
          the float exponential is within 3 u of exp(float(e_j)) (its polynomial's
          roundings ~1.3 u at most, measured; the tests hold it to 3 u), the double
          one within an ulp (2^-52);
        - so each k_j is within (3 u + u |e_j| + 2^-52 + 1.01 delta)(1 + 1e-4) k_j of
          the double path's; exponents below -87 (float value 0, double value below
          1.7e-38 e^delta) add that much times sum_j |a_j|;
        - the two paths' sums of m terms in double round within (m + 2) 2^-53
          sum_j |a_j| k_j each, the bias term within 2^-51 of itself."""
        VT, _, _, _, v_max_sq, abs_total = self._rbf32_plan()
        d, m = VT.shape
        u, ud, gamma = 2.0 ** -24, 2.0 ** -53, self.kernel.gamma
        delta = 2.0 * gamma * (4 * d + 16) * ud * (x_sq + v_max_sq)
        grow = 1.0 + (m + 16) * u
        A, Ae = A * grow, Ae * grow
        return ((1.0001 * ((3.0 * u + 2.0 * ud + 1.01 * delta) * A + u * Ae)
                 + 2.0 * (m + 2) * ud * A * 1.0001
                 + 1.7e-38 * abs_total * np.exp(delta)
                 + abs_offset * 2.0 ** -51) * (1.0 + 1e-3))

    # ------------------------------------------------------------ model files
    def file_header(self):
        k = self.kernel
        return [
            ("lcoding_format", FORMAT_VERSION),
            ("coding", MODEL_NAME),
            ("kernel_type", k.name),
            ("degree", str(k.degree)),
            ("gamma", format(k.gamma, ".17g")),
            ("coef0", format(k.coef0, ".17g")),
            ("method", self.method),
            ("invariance_gamma", format(self.invariance_gamma, ".17g")),
            ("tangents", self.tangents),
            ("nr_point", str(self.n_points)),
        ]

    def file_blocks(self):
        return [("points", self.points), ("w", self.w)]

    _HEADER_KEYS = frozenset({"lcoding_format", "coding", "kernel_type", "degree", "gamma", "coef0",
                              "method", "invariance_gamma", "tangents", "nr_point"})

    @classmethod
    def block_shapes(cls, header, base):
        """Block shapes of a model file, after the header checks training implies
        (:meth:`_checked_header`)."""
        unknown = set(header) - cls._HEADER_KEYS
        if unknown:
            key = sorted(unknown)[0]
            raise ModelFieldError(key, f"unknown key(s) {', '.join(sorted(unknown))} for "
                                       f"{MODEL_NAME}")
        cls._checked_header(header, base)
        m = check_count("nr_point", header["nr_point"], 0)
        nr_class = int(base["nr_class"])
        nr_w = 1 if (nr_class == 2 and int(base["solver_type"]) != SolverType.MCSVM_CS) \
            else nr_class
        rows = m + (1 if float(base["bias"]) >= 0 else 0)
        return [("points", (m, int(base["nr_feature"]))), ("w", (rows, nr_w))]

    @staticmethod
    def _checked_header(header, base) -> Kernel:
        """The kernel and method keys as training writes them: LIBSVM's kernel with a
        resolved ``gamma > 0``, ``degree >= 0``, finite ``coef0``; a known method
        trained by a solver it uses; ``0 <= invariance_gamma < 1`` (0 and no tangents
        for the kernel PCA map and VSV)."""
        if header.get("kernel_type") not in KERNEL_BY_NAME:
            raise ModelFieldError("kernel_type", f"unknown kernel_type {header.get('kernel_type')!r}"
                                                 f" (known: {', '.join(KERNEL_BY_NAME)})")
        degree = check_count("degree", header["degree"], 0, 2 ** 31 - 1)
        gamma = check_number("gamma", header["gamma"], lo=0, lo_open=True)
        coef0 = check_number("coef0", header["coef0"])
        method = header.get("method")
        if method not in METHOD_BY_NAME:
            raise ModelFieldError("method", f"unknown method {method!r} (known: "
                                            f"{', '.join(METHOD_BY_NAME)})")
        tangents = header.get("tangents")
        if tangents not in TANGENT_BY_NAME:
            raise ModelFieldError("tangents", f"unknown tangents {tangents!r} (known: "
                                              f"{', '.join(TANGENT_BY_NAME)})")
        inv_gamma = check_number("invariance_gamma", header["invariance_gamma"], lo=0, hi=1,
                                 hi_open=True)
        if method in ("kpca_map", "vsv") and inv_gamma != 0:
            raise ModelFieldError("invariance_gamma", f"invariance_gamma {inv_gamma:g}: the "
                                                      f"{method} method has none (0)")
        if method == "kpca_map" and tangents != "none":
            raise ModelFieldError("tangents", "the kpca_map method uses no tangents (none)")
        st = int(base["solver_type"])
        solvers = SVC_SOLVERS if method in ("isvm", "vsv") else LINEAR_SOLVER_TYPES
        if st not in solvers:
            raise ModelFieldError("solver_type", f"solver_type {SolverType(st).name} does not "
                                                 f"train the {method} method")
        return Kernel(KERNEL_BY_NAME[header["kernel_type"]], degree, gamma, coef0)

    @classmethod
    def from_file(cls, header, base, blocks):
        kernel = cls._checked_header(header, base)
        return cls(base["solver_type"], base["nr_class"], base.get("label"), base["nr_feature"],
                   base["bias"], kernel, blocks["points"], blocks["w"], method=header["method"],
                   invariance_gamma=float(header["invariance_gamma"]),
                   tangents=header["tangents"], rho=base.get("rho", 0.0))

    def __repr__(self):
        k = self.kernel
        return (f"KernelExpansionModel({SolverType(self.solver_type).name}, method={self.method}, "
                f"kernel={k.name}(degree={k.degree}, gamma={k.gamma:g}, coef0={k.coef0:g}), "
                f"n_points={self.n_points}, nr_class={self.nr_class}, gamma_inv="
                f"{self.invariance_gamma:g}, tangents={self.tangents})")


# the coding name of kernel-expansion model files
FILE_TAGS = (MODEL_NAME,)


# ----------------------------------------------------------------------------- training
def uses_kernel_options(params: TrainParams) -> bool:
    """True when ``-t``, ``-H`` or ``-J`` asks for this module."""
    return params.kernel_type >= 0 or params.invariance != 0 or params.tangents != 0


def check_kernel_params(params: TrainParams, user_tangents: bool = False) -> None:
    """Consistency of ``-t -d -g -r -H -J -N -Y -X`` beyond their domains (messages
    name the option)."""
    kp = KernelParams.from_train_params(params)
    if kp.tangents and user_tangents:
        raise ValueError(f"-J {kp.tangents} and a tangents array both given; give one")
    has_tangents = bool(kp.tangents) or user_tangents
    method = kp.invariance
    no_kernel = kp.kernel_type is None
    if method == Invariance.KPCA_MAP and has_tangents:
        raise ValueError("tangents (-J or an array) are only used by -H 1, 2, 3, 4")
    if method == Invariance.KPCA_MAP and no_kernel:
        raise ValueError("-H 0 (kernel PCA map) needs a kernel (-t)")
    if method in (Invariance.IHKPCA, Invariance.ISVM) and kp.invariance_gamma > 0 \
            and not has_tangents:
        raise ValueError(f"-H {int(method)} -Y {kp.invariance_gamma:g} needs tangent vectors "
                         f"(-J, or a tangents array through lcoding.methods.invariant.train_invariant)")
    if method == Invariance.VSV and not has_tangents:
        raise ValueError("-H 3 (VSV) needs transformations to add (-J, or a tangents array)")
    if method == Invariance.IHKPCA_VIRTUAL and not has_tangents:
        raise ValueError("-H 4 (IHKPCA on landmarks + virtual examples) needs transformations "
                         "(-J, or a tangents array)")
    if method == Invariance.IHKPCA_VIRTUAL and no_kernel:
        raise ValueError("-H 4 needs a kernel (-t; -t 0 for the linear kernel)")
    if method in (Invariance.ISVM, Invariance.VSV) and int(params.solver_type) not in SVC_SOLVERS:
        raise ValueError(f"-s {params.solver_type}: -H {int(method)} solves the kernel C-SVC by "
                         f"SMO, with -s 3 (hinge loss, LIBSVM's C-SVC) or -s 1 (squared hinge)")
    if params.coding != 0:
        raise ValueError(f"-L {params.coding}: a local coding cannot follow a kernel map (-t/-H)")
    if int(params.solver_type) in JOINT_SOLVERS | {SolverType.KQ_METRICS, SolverType.KQ_FLATS}:
        raise ValueError(f"-s {params.solver_type} cannot follow a kernel map (-t/-H/-J): the "
                         f"mapped rows go to a linear solver (-s 0-7, 11-13, 21, 30 or 32)")
    if params.kernel_map != 0:
        raise ValueError(f"-K {params.kernel_map}: the additive kernel map cannot be combined "
                         f"with -t/-H")


def dense_rows(rows: Rows, n_features: int) -> np.ndarray:
    """The rows as a dense ``(n, n_features)`` array, filled in chunks of rows (a Ctrl-C
    check between them)."""
    rows = rows.truncated(n_features)
    out = np.zeros((rows.n_rows, n_features))
    step = max(256, (1 << 22) // max(n_features, 1))
    for a in range(0, rows.n_rows, step):
        check_stop()
        part = row_slice(rows, a, min(rows.n_rows, a + step))
        row_of = np.repeat(np.arange(part.n_rows), np.diff(part.indptr))
        out[a + row_of, part.indices] = part.data
    return out


def linear_params(params: TrainParams) -> TrainParams:
    """The options of the linear solver that runs on the mapped rows."""
    return params.replaced(kernel_type=-1, invariance=0, tangents=0)


def _train_linear(y, Z: np.ndarray, params: TrainParams, info, seed_path,
                  newton_when_stalled: bool = False) -> LinearModel:
    """The linear solver on mapped rows: LIBLINEAR's own (the whitened input space), or
    with ``newton_when_stalled`` (a kernel map, whose dense well-filled rows often
    stall the dual CD: magic04's map at C = 100 ran 300 passes, then Newton) the
    methods' -s 1 that hands over to Newton
    (:data:`~lcoding.linear.solvers.METHOD_BINARY_SOLVERS`)."""
    model = train_linear_model(y, rows_from_dense(Z, "mapped rows", copy=False),
                               linear_params(params), info,
                               seed_path=seed_path, newton_when_stalled=newton_when_stalled)
    if not isinstance(model, LinearModel):      # pragma: no cover - guarded by -L check
        raise TypeError("the solver after the kernel map must give a linear model")
    return model


def _choose_landmarks(n: int, count: int, seed: int, seed_path: tuple) -> np.ndarray:
    if count >= n:
        return np.arange(n)
    rng = np.random.Generator(np.random.PCG64(rng_state(seed, PURPOSE_LANDMARKS, *seed_path)[0]))
    return np.sort(rng.choice(n, size=count, replace=False))


def drawn_landmarks(rows: Rows, params: TrainParams, seed_path: tuple,
                    X: np.ndarray | None = None) -> tuple:
    """``(ids, landmarks)``: the ``-X`` landmark rows drawn for the seed path (ascending
    ids) and their dense values -- from ``X`` when the caller has every row dense, else
    only those rows made dense (a sparse set of many features would need 8 n d bytes)."""
    ids = _choose_landmarks(rows.n_rows, int(params.n_landmarks), params.seed, seed_path)
    return ids, (X[ids] if X is not None else dense_rows(rows.take(ids), rows.n_features))


def _smo(K: np.ndarray, y_pm: np.ndarray, Cp: float, Cn: float, squared_hinge: bool, eps: float,
         info: Messages):
    """LIBSVM's C-SVC dual on the Gram matrix K: ``(alpha * y, rho)``."""
    n = K.shape[0]
    C = np.where(y_pm > 0, Cp, Cn).astype(np.float64)
    if squared_hinge:
        upper = np.where(C > 0, np.inf, 0.0)
        diag = np.where(C > 0, 0.5 / np.where(C > 0, C, 1.0), 0.0)
    else:
        upper, diag = C, np.zeros(n)
    alpha, grad = np.zeros(n), np.zeros(n)
    max_iter = max(10_000_000, 100 * n)
    n_iter, rho, converged = _kernel_svm.smo_solve(np.ascontiguousarray(K), y_pm, upper, diag,
                                                   alpha, grad, eps, max_iter, stop=STOP_FLAG)
    check_stop()                # Ctrl-C: the solve may have ended early
    if not converged:
        warnings.warn(f"SMO reached the iteration limit {max_iter} before the -e {eps:g} "
                      f"stopping rule", InvarianceWarning, stacklevel=3)
    info(f"optimization finished, #iter = {n_iter}, #SV = {int(np.count_nonzero(alpha))}\n")
    return alpha * y_pm, rho


def _train_kernel_svm(y, K: np.ndarray, params: TrainParams, info):
    """One-vs-rest C-SVC by SMO on a precomputed Gram matrix: (labels, beta (n x nr_w),
    intercepts (nr_w,))."""
    labels, class_index = group_classes(y)
    weighted_C = class_costs(labels, params)
    squared = int(params.solver_type) == SolverType.L2R_L2LOSS_SVC_DUAL
    if labels.size == 2:
        jobs = [(np.where(class_index == 0, 1, -1).astype(np.int8), weighted_C[0], weighted_C[1])]
    elif labels.size == 1:
        jobs = [(np.ones(y.shape[0], dtype=np.int8), weighted_C[0], params.C)]
    else:
        jobs = [(np.where(class_index == c, 1, -1).astype(np.int8), weighted_C[c], params.C)
                for c in range(labels.size)]
    beta = np.zeros((y.shape[0], len(jobs)))
    intercept = np.zeros(len(jobs))
    for c, (y_pm, Cp, Cn) in enumerate(jobs):
        t_solve = time.perf_counter()
        beta[:, c], rho = _smo(K, y_pm, Cp, Cn, squared, params.eps, info)
        intercept[c] = -rho
        who = (f"class {labels[0]:g} vs {labels[1]:g}" if labels.size == 2
               else f"class {labels[c]:g} vs rest")
        event(info, f"{who}: SMO on the Gram matrix, {time.perf_counter() - t_solve:.2f} s")
    return labels, beta, intercept


def train_kernel_model(y: np.ndarray, rows: Rows, params: TrainParams,
                       info: Messages | None = None, seed_path: tuple = (), tangents=None,
                       background: float = 0.0) -> Model:
    """Train the model that ``-t`` / ``-H`` / ``-J`` ask for (see the module docstring).

    ``tangents``: user tangent vectors, ``(n, d)`` or ``(n_kinds, n, d)`` (instead of ``-J``);
    ``background``: the value of vacated pixels for ``-J`` translations.
    """
    check_kernel_params(params, tangents is not None)
    info = info if info is not None else Messages(params.quiet)
    n, d = rows.n_rows, rows.n_features
    method = params.invariance
    gamma_inv = float(params.invariance_gamma)
    # the plain kernel PCA map needs only its landmarks dense, not every row
    # (drawn_landmarks)
    X = dense_rows(rows, d) if method != 0 or tangents is not None or params.tangents else None
    if tangents is not None:
        dX, tangent_name = _check_tangents(tangents, n, d), "user"
    elif params.tangents:
        dX = image_tangents(X, params.image_width, params.tangents, background)
        tangent_name = TANGENT_NAMES[params.tangents]
    else:
        dX, tangent_name = None, "none"
    kernel = kernel_from_params(params, d)
    t0 = time.perf_counter()

    if method == 1 and params.kernel_type < 0:
        # invariant linear SVM in input space: train on C^-1/2 x, then w = C^-1/2 w~
        W = invariant_whitening(dX.reshape(-1, d), gamma_inv) if gamma_inv > 0 else np.eye(d)
        inner = _train_linear(y, rowwise_matmul(X, W), params, info, seed_path)
        w = inner.w.copy()
        w[:d] = W @ inner.w[:d]
        return LinearModel(inner.solver_type, inner.nr_class, inner.label, d, inner.bias, w,
                           rho=inner.rho, param=params)

    if method in (0, 1, 4):
        landmark_ids, landmarks = drawn_landmarks(rows, params, seed_path, X)
        if method == 4:
            landmarks = virtual_landmarks(landmarks, dX[:, landmark_ids])
        invariant = method in (1, 4)
        drawn = landmarks.shape[0]
        landmarks, gram = map_landmarks(kernel, landmarks)
        KX = kernel.matrix(rows, landmarks)
        P = ihkpca_map(kernel, X, dX, landmarks, gamma_inv if invariant else 0.0, KX, gram)
        spanned = (f" (of {drawn} drawn; their span's pivots)"
                   if landmarks.shape[0] < drawn else "")
        info(f"kernel PCA map: {landmarks.shape[0]} landmarks{spanned}, {P.shape[0]} components "
             f"({time.perf_counter() - t0:.2f} s)\n")
        inner = _train_linear(y, rowwise_matmul(KX, P.T), params, info, seed_path,
                              newton_when_stalled=True)
        r = P.shape[0]
        w = np.vstack([P.T @ inner.w[:r], inner.w[r:]])
        return KernelExpansionModel(inner.solver_type, inner.nr_class, inner.label, d, inner.bias,
                                    kernel, landmarks, w, method=METHOD_NAMES[method],
                                    invariance_gamma=gamma_inv if invariant else 0.0,
                                    tangents=tangent_name if invariant else "none",
                                    rho=inner.rho, param=params)

    if method == 3:
        # VSV as run in the paper: a plain kernel SVM on the points and their translates
        X_train = np.vstack([X] + [X + dX[k] for k in range(dX.shape[0])])
        y_train = np.tile(y, 1 + dX.shape[0])
        tk = TangentKernel(kernel, X_train, None, 0.0)
        gamma_inv = 0.0
    else:
        X_train, y_train = X, y
        tk = TangentKernel(kernel, X, dX, gamma_inv)
    K = tk.gram()
    info(f"{METHOD_NAMES[method]} Gram matrix: {K.shape[0]} points "
         f"({time.perf_counter() - t0:.2f} s)\n")
    labels, beta, intercept = _train_kernel_svm(y_train, K, params, info)
    points, coef = tk.expansion(beta)
    used = np.flatnonzero(np.any(coef != 0.0, axis=1))
    w = np.vstack([coef[used], intercept[None, :]])
    return KernelExpansionModel(params.solver_type, labels.size, labels, d, 1.0, kernel,
                                points[used], w, method=METHOD_NAMES[method],
                                invariance_gamma=gamma_inv, tangents=tangent_name, param=params)


def train_invariant(y, x, options="", tangents=None, background: float = 0.0) -> Model:
    """``train(y, x, options)`` with user-supplied tangent vectors: ``tangents`` of
    shape ``(n, d)`` or ``(n_kinds, n, d)`` (d = number of features of ``x``), e.g.
    ``eps * (L_eps x - x)`` for a transformation ``L``.  Returns the model."""
    params = parse_train_options(options)
    check_parameter(params)
    labels = as_labels(y)
    rows = as_rows(x)
    if labels.shape[0] != rows.n_rows:
        raise ValueError(f"len(y) = {labels.shape[0]} differs from the {rows.n_rows} "
                         f"instances in x")
    if not uses_kernel_options(params) and tangents is not None:
        raise ValueError("tangents given without -H 1, 2, 3 or 4 in the options")
    return train_kernel_model(labels, rows, params, Messages(params.quiet), tangents=tangents,
                              background=background)
