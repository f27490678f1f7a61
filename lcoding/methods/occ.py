"""Anchor planes / orthogonal coordinate coding (OCC; seed 000, algorithms.md §B).

Basis (uncentred, as in the paper): the top ``M`` (``-A``) right singular vectors
``v_j`` and singular values ``s_j`` of the training matrix X (rows = samples) --
of all rows (``-L 4``, G-OCC) or of the positive class of each one-vs-rest
problem (``-L 5``, C-OCC).  A randomised range finder (Halko et al. 2011, with
power iterations) works on the CSR rows through sparse products only, so sparse
input is never densified.  Code::

    gamma(x) = g / ||g||_1,   g_j = v_j . x / s_j          (dense, M values)

computed in row batches by one BLAS product per batch (dense batches) or a
sparse-dense product (sparse batches).

Classifiers (one-vs-rest, ``argmax_c f_c(x)``):

* ``-s 1`` / ``-s 3`` (LIB-LLSVM): ``f_c(x) = sum_j gamma_j (w_{c,j} . x) + b_c B``,
  **one bias** per class as in the paper's eq. 9; LIBLINEAR's dual CD on the
  implicit feature ``[gamma (x) x; B]`` (the shared dual-CD kernel with a shared bias, :func:`lcoding.linear.dual_cd.solve_l2r_l1l2_svc`).
* ``-s 30`` (PEG-LLSVM): the LL-SVM SGD of :mod:`lcoding.linear.sgd` with one bias per
  plane, ``f_c(x) = sum_j gamma_j (w_{c,j} . x + b_{c,j} B)``.
* ``-u 0`` with any of those solvers: linear SVM on the codes alone,
  ``f_c(x) = w_c . gamma_c(x) + b_c B`` (the paper's "Linear SVM + OCC"; for C-OCC
  each class on its own code).
* ``-u 3`` with ``-s 1``/``-s 3`` and ``-B B >= 0``: LIB-LLSVM with a bias per plane
  as well, ``f_c(x) = sum_j gamma_j (w_{c,j} . x + b_{c,j} B) + b_c B`` (dual CD on
  ``[gamma (x) [x; B]; B]``; the basis is still learned on x alone).
* ``-u 2`` (C-OCC only): linear SVM on the codes of all classes concatenated,
  ``f_c(x) = w_c . [gamma_1(x); ...; gamma_K(x)] + b_c B`` (``K M`` features).
"""
from __future__ import annotations

import contextlib
import time

import numpy as np
import scipy.sparse as sp

from lcoding.core.rows import Rows
from lcoding.local.coding import KernelMap, is_dense, kernel_map_of
from lcoding.core.threads import check_stop, map_threads, single_threaded_blas
from lcoding.core.model import VALUE_LIMIT, Model, ModelFieldError, check_count
from lcoding.local.model import checked_kernel_map_header
from lcoding.core.options import SGD_SOLVERS, SolverType, TrainParams
from lcoding.core.params import CodingType, OCCClassifier, OCCParams
from lcoding.linear.solvers import BINARY_SOLVERS
from lcoding.linear.problem import BinaryProblem, Coding, SolveResult, reported_solve
from lcoding.linear.dual_cd import (LOCAL_CAP_REMEDY, solve_l2r_l1l2_svc,
                                    train_l2loss_svc_dual_switching)
from lcoding.core.messages import Messages
from lcoding.core.classes import class_costs, group_classes, one_vs_rest_jobs
from lcoding.core.seeds import PURPOSE_SOLVER, PURPOSE_SVD, rng_state
from lcoding.linear.sgd import check_sgd_params, solve_sgd_hinge

FORMAT_VERSION = "1"
OCC_CODINGS = {4: "G_OCC", 5: "C_OCC"}
OCC_BY_NAME = {name: kind for kind, name in OCC_CODINGS.items()}
# the linear SVM on the (few, dense) codes may also use LIBLINEAR's primal Newton -s 2
PRIMAL_L2_SOLVER = int(SolverType.L2R_L2LOSS_SVC)
OCC_SOLVERS = frozenset({int(SolverType.L2R_L2LOSS_SVC_DUAL),
                         int(SolverType.L2R_L1LOSS_SVC_DUAL)}) | SGD_SOLVERS
# classifier on the codes, written to model files as occ_classifier
LIB_LLSVM, PEG_LLSVM, LINEAR_CODES = "LIB_LLSVM", "PEG_LLSVM", "LINEAR_CODES"
LINEAR_ALL_CODES = "LINEAR_ALL_CODES"     # C-OCC, -u 2: linear SVM on all classes' codes
LIB_LLSVM_PB = "LIB_LLSVM_PB"             # -s 1/3 -u 3: LIB-LLSVM + a bias per plane
CLASSIFIERS = (LIB_LLSVM, PEG_LLSVM, LINEAR_CODES, LINEAR_ALL_CODES, LIB_LLSVM_PB)
CODE_BATCH = 2048          # rows per coding batch
OVERSAMPLE = 10            # extra columns of the randomised range finder
POWER_ITER = 4             # power iterations of the range finder
RANK_TOL = 1e-10           # s_M <= RANK_TOL * s_1: -A exceeds the rank of the data



def occ_basis(rows: Rows, n_planes: int, seed: int = 1, power_iter: int = POWER_ITER,
              oversample: int = OVERSAMPLE):
    """Top ``n_planes`` right singular vectors (``(M, d)``, unit rows, sign fixed so
    that each row's largest-magnitude entry is positive) and singular values
    (``(M,)``, descending) of the uncentred rows, by a randomised SVD."""
    n, d = rows.n_rows, rows.n_features
    M = int(n_planes)
    if M < 1:
        raise ValueError(f"-A {M}: the number of planes must be >= 1")
    if M > min(n, d):
        raise ValueError(f"-A {M}: more planes than the rank bound min(rows, features) = "
                         f"{min(n, d)} of the data the basis is learned on")
    X = rows.to_csr()
    ell = min(M + oversample, n, d)
    rng = np.random.Generator(np.random.PCG64(int(seed)))
    # range of X^T (d-dimensional): Q spans the top right singular subspace
    Q = X.T @ rng.standard_normal((n, ell))
    Q, _ = np.linalg.qr(Q)
    for _ in range(power_iter):
        check_stop()
        Q, _ = np.linalg.qr(X.T @ np.asarray(X @ Q))
    B = np.asarray(X @ Q)                           # (n, ell) = U S (Q Wb)^T
    _, s, Wt = np.linalg.svd(B, full_matrices=False)
    V = (Q @ Wt.T).T[:M]                            # (M, d)
    s = s[:M]
    if not s[0] > 0:
        raise ValueError(f"-A {M}: the rows the basis is learned on are all zero: they "
                         f"have no plane (no non-zero singular value)")
    if s[-1] <= RANK_TOL * s[0]:
        raise ValueError(f"-A {M}: the data has fewer than {M} non-zero singular values "
                         f"(s_M / s_1 = {s[-1] / s[0]:.3g}); use fewer planes")
    flip = np.sign(V[np.arange(M), np.argmax(np.abs(V), axis=1)])
    V *= flip[:, None]
    return np.ascontiguousarray(V), np.ascontiguousarray(s)


def _row_batches(rows: Rows, d: int, batch: int):
    """``(a, b, X_ab)`` over row batches: ``X_ab`` a dense array when the rows are
    dense enough for BLAS, else a CSR matrix."""
    dense = is_dense(rows, d)
    for a in range(0, rows.n_rows, batch):
        check_stop()
        b = min(a + batch, rows.n_rows)
        p0, p1 = int(rows.indptr[a]), int(rows.indptr[b])
        Xb = sp.csr_matrix((rows.data[p0:p1], rows.indices[p0:p1], rows.indptr[a:b + 1] - p0),
                           shape=(b - a, d))
        yield a, b, (Xb.toarray() if dense else Xb)


def _scaled_planes(planes: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """``(d, K)``: column j = ``planes[j] / sigma[j]`` (the un-normalised code map)."""
    return np.ascontiguousarray((planes / sigma[:, None]).T)


def _normalise(G: np.ndarray, M: int) -> np.ndarray:
    """L1-normalise every group of ``M`` consecutive columns of ``G`` in place
    (groups with ``g = 0`` stay 0); returns ``G`` viewed as ``(n, groups, M)``."""
    G3 = G.reshape(G.shape[0], -1, M)
    norm = np.abs(G3).sum(axis=2, keepdims=True)
    norm[norm == 0] = 1.0
    G3 /= norm
    return G3


def occ_codes(rows: Rows, planes: np.ndarray, sigma: np.ndarray, batch: int = CODE_BATCH,
              n_features: int | None = None) -> np.ndarray:
    """Codes ``(n_rows, M)``: ``gamma = g / ||g||_1``, ``g = diag(1/sigma) planes x``
    (rows with ``g = 0`` get ``gamma = 0``) of one coding (``M`` = ``len(sigma)``)."""
    return occ_codes_multi(rows, planes, sigma, planes.shape[0], batch, n_features)


def occ_codes_multi(rows: Rows, planes: np.ndarray, sigma: np.ndarray, n_planes: int,
                    batch: int = CODE_BATCH, n_features: int | None = None) -> np.ndarray:
    """Codes of ``K = len(sigma) / n_planes`` stacked codings at once, ``(n_rows, K *
    n_planes)`` (coding k in columns ``k*M:(k+1)*M``, each L1-normalised): one BLAS
    product per row batch for all codings."""
    d = planes.shape[1] if n_features is None else n_features
    P = _scaled_planes(planes, sigma)
    out = np.empty((rows.n_rows, P.shape[1]))
    for a, b, Xb in _row_batches(rows, d, batch):
        if isinstance(Xb, np.ndarray):
            np.matmul(Xb, P, out=out[a:b])
        else:
            out[a:b] = Xb @ P
    _normalise(out, int(n_planes))
    return out


class OCCModel(Model):
    """OCC model: ``planes`` ``(n_codings * M, dim)`` and ``sigma`` of each coding
    (one coding for G-OCC, one per decision function for C-OCC), classifier kind and
    ``w`` of shape ``(w_size, nr_w)`` with

    * LIB_LLSVM: ``w_size = M*d + (B >= 0)``, row ``j*d + f`` = weight of feature f
      at plane j, the single bias last;
    * PEG_LLSVM: ``w_size = M*(d + (B >= 0))``, plane-major, per-plane bias last in
      each plane's row (LocalModel's layout);
    * LIB_LLSVM_PB: ``w_size = M*(d + 1) + 1``, PEG_LLSVM's layout and the single
      bias last;
    * LINEAR_CODES: ``w_size = M + (B >= 0)``;
    * LINEAR_ALL_CODES: ``w_size = n_codings*M + (B >= 0)``.

    ``d`` is :attr:`dim`: the input features, or the output of ``kernel_map`` (``-K``)
    when the additive kernel map runs before the SVD and the coding."""

    def __init__(self, solver_type, nr_class, label, nr_feature, bias, coding_name, classifier,
                 planes, sigma, w, param=None, kernel_map: KernelMap | None = None):
        self._set_header(solver_type, nr_class, label, nr_feature, bias)
        self.param = param
        self.kernel_map = kernel_map
        if coding_name not in OCC_BY_NAME:
            raise ValueError(f"unknown OCC coding {coding_name!r}")
        if classifier not in CLASSIFIERS:
            raise ValueError(f"unknown occ_classifier {classifier!r}")
        self.coding_name = coding_name
        self.classifier = classifier
        planes = np.ascontiguousarray(planes, dtype=np.float64)
        sigma = np.ascontiguousarray(sigma, dtype=np.float64).reshape(-1)
        if planes.ndim != 2 or planes.shape[1] != self.dim:
            raise ValueError(f"planes have shape {planes.shape}, expected (*, {self.dim})")
        if planes.shape[0] % self.n_codings or sigma.shape[0] != planes.shape[0]:
            raise ValueError(f"{planes.shape[0]} planes / {sigma.shape[0]} singular values do "
                             f"not split into {self.n_codings} codings")
        if not (sigma > 0).all():
            raise ValueError("singular values must be > 0")
        if classifier == LIB_LLSVM_PB and not self.bias >= 0:
            raise ValueError(f"occ_classifier {classifier} needs a bias >= 0")
        if classifier == LINEAR_ALL_CODES and coding_name != "C_OCC":
            raise ValueError(f"occ_classifier {classifier} needs coding C_OCC")
        self.planes, self.sigma = planes, sigma
        self.w = self._checked_weights(w, self.w_size, self.nr_w)

    @property
    def dim(self) -> int:
        """Columns of the planes: the features after the ``-K`` map, if any."""
        km = self.kernel_map
        return self.nr_feature if km is None else km.output_features(self.nr_feature)

    @property
    def n_codings(self) -> int:
        return 1 if self.coding_name == "G_OCC" else self.nr_w

    @property
    def n_planes(self) -> int:
        return self.planes.shape[0] // self.n_codings

    @property
    def w_size(self) -> int:
        return _w_size(self.classifier, self.n_planes, self.dim, self.bias, self.n_codings)

    def coding(self, c: int):
        """``(planes, sigma)`` of the coding used by decision function ``c``."""
        M = self.n_planes
        k = 0 if self.n_codings == 1 else c
        return self.planes[k * M:(k + 1) * M], self.sigma[k * M:(k + 1) * M]

    def _predict_maps(self):
        """``(P, Wx, plane_bias, extra)`` for :meth:`decision_values`:
        ``P`` ``(d, K*M)`` the code maps of all codings; for LIB/PEG-LLSVM ``Wx``
        ``(d, nr_w*M)`` the plane weights of all decision functions (column
        ``c*M + j`` = ``w_{c,j}``), ``plane_bias`` ``(nr_w*M,)`` the per-plane
        biases times B, ``extra`` ``(nr_w,)`` the single bias times B; for the
        linear SVM on the codes ``Wx`` ``(M, nr_w)`` and ``plane_bias`` None."""
        d, M, nr_w = self.dim, self.n_planes, self.nr_w
        hb = self.bias >= 0
        B = self.bias if hb else 0.0
        P = _scaled_planes(self.planes, self.sigma)
        if self.classifier == LINEAR_ALL_CODES:
            K = self.n_codings
            maps = (P, np.ascontiguousarray(self.w[:K * M]),
                    None, self.w[K * M] * B if hb else np.zeros(nr_w))
        elif self.classifier == LINEAR_CODES:
            maps = (P, np.ascontiguousarray(self.w[:M]),
                    None, self.w[M] * B if hb else np.zeros(nr_w))
        elif self.classifier == LIB_LLSVM:
            Wx = self.w[:M * d].reshape(M, d, nr_w).transpose(1, 2, 0).reshape(d, nr_w * M)
            maps = (P, np.ascontiguousarray(Wx), np.zeros(nr_w * M),
                    self.w[M * d] * B if hb else np.zeros(nr_w))
        else:     # PEG_LLSVM, LIB_LLSVM_PB: plane-major rows [w_{c,j}; b_{c,j}]
            stride = d + (1 if hb else 0)
            W3 = self.w[:M * stride].reshape(M, stride, nr_w)
            Wx = W3[:, :d].transpose(1, 2, 0).reshape(d, nr_w * M)
            pb = (W3[:, d].T.reshape(-1) * B) if hb else np.zeros(nr_w * M)
            extra = (self.w[M * stride] * B if self.classifier == LIB_LLSVM_PB
                     else np.zeros(nr_w))
            maps = (P, np.ascontiguousarray(Wx), np.ascontiguousarray(pb), extra)
        return maps

    def _decision_values(self, rows: Rows, n_threads: int = 1, batch: int = CODE_BATCH) -> np.ndarray:
        """``(n, nr_w)`` decision values.  Per row batch: one BLAS product codes the
        batch for every coding at once (all classes of C-OCC), one more gives the
        plane responses ``w_{c,j} . x`` of every class and plane; the rest is
        elementwise."""
        rows = rows.truncated(self.nr_feature)
        if self.kernel_map is not None:
            rows = self.kernel_map(rows)
        n, d, M, nr_w = rows.n_rows, self.dim, self.n_planes, self.nr_w
        out = np.empty((n, nr_w))
        if n == 0:
            return out
        P, Wx, plane_bias, extra = self._predict_maps()
        for a, b, Xb in _row_batches(rows, d, batch):
            G = _normalise(np.asarray(Xb @ P), M)                  # (nb, K, M)
            if self.classifier == LINEAR_ALL_CODES:
                out[a:b] = G.reshape(b - a, -1) @ Wx
            elif self.classifier == LINEAR_CODES:
                if self.n_codings == 1:
                    out[a:b] = G[:, 0, :] @ Wx
                else:
                    out[a:b] = np.einsum("ikj,jk->ik", G, Wx)
            else:
                S = np.asarray(Xb @ Wx).reshape(b - a, nr_w, M)
                S += plane_bias.reshape(nr_w, M)
                if self.n_codings == 1:
                    out[a:b] = np.einsum("icj,ij->ic", S, G[:, 0, :])
                else:
                    out[a:b] = np.einsum("icj,icj->ic", S, G)
            out[a:b] += extra
        return out

    # ---------------------------------------------------------------- model files
    def file_header(self):
        header = [("lcoding_format", FORMAT_VERSION), ("coding", self.coding_name),
                  ("occ_classifier", self.classifier), ("nr_plane", str(self.n_planes)),
                  ("nr_coding", str(self.n_codings))]
        km = self.kernel_map
        if km is not None:    # absent = no map (files written before -K had no such keys)
            header += km.file_header() + [("nr_dim", str(self.dim))]
        return header

    def file_blocks(self):
        return [("planes", self.planes), ("sigma", self.sigma.reshape(-1, 1)), ("w", self.w)]

    _HEADER_KEYS = frozenset({"lcoding_format", "coding", "occ_classifier", "nr_plane",
                              "nr_coding", "kernel_map", "kernel_map_order", "kernel_map_period",
                              "nr_dim"})

    @classmethod
    def block_shapes(cls, header, base):
        """Block shapes of a model file, after the checks training implies: known keys
        and classifier, a solver type that trains this classifier, ``nr_coding`` 1 for
        G-OCC and one per decision function for C-OCC, ``1 <= nr_plane <= nr_dim`` (the
        rank bound), ``nr_dim`` = the features after the kernel map (if any)."""
        unknown = set(header) - cls._HEADER_KEYS
        if unknown:
            key = sorted(unknown)[0]
            raise ModelFieldError(key, f"unknown key(s) {', '.join(sorted(unknown))} for "
                                       f"{header['coding']}")
        kind = header.get("occ_classifier")
        if kind not in CLASSIFIERS:
            raise ModelFieldError("occ_classifier", f"unknown occ_classifier {kind!r}")
        st = int(base["solver_type"])
        if st not in _CLASSIFIER_SOLVERS[kind]:
            raise ModelFieldError("solver_type", f"solver_type {SolverType(st).name} does not "
                                                 f"train the {kind} classifier of {header['coding']}")
        if kind == LINEAR_ALL_CODES and header["coding"] != "C_OCC":
            raise ModelFieldError("occ_classifier", f"occ_classifier {kind} needs coding C_OCC")
        bias = float(base["bias"])
        if kind == LIB_LLSVM_PB and not bias >= 0:
            raise ModelFieldError("bias", f"occ_classifier {kind} needs a bias >= 0")
        nr_w = 1 if int(base["nr_class"]) == 2 else int(base["nr_class"])
        ncod = check_count("nr_coding", header["nr_coding"], 1)
        if ncod != (1 if header["coding"] == "G_OCC" else nr_w):
            raise ModelFieldError("nr_coding", f"nr_coding {ncod} does not match {header['coding']}"
                                               f" with {nr_w} decision functions")
        nr_feature = int(base["nr_feature"])
        width = checked_kernel_map_header(header)
        if width is None:
            d = nr_feature
            if "nr_dim" in header and check_count("nr_dim", header["nr_dim"], 0) != d:
                raise ModelFieldError("nr_dim", f"nr_dim {header['nr_dim']} differs from "
                                                f"nr_feature {d} (no kernel map)")
        else:
            d = check_count("nr_dim", header.get("nr_dim"), 0)
            if d != nr_feature * width:
                raise ModelFieldError("nr_dim", f"nr_dim {d} is not the {header['kernel_map']} "
                                                f"map's output for nr_feature {nr_feature}")
        M = check_count("nr_plane", header["nr_plane"], 1)
        if M > d:
            raise ModelFieldError("nr_plane", f"nr_plane {M}: more planes than the {d} "
                                              f"dimensions of the data (training's rank bound)")
        return [("planes", (ncod * M, d)), ("sigma", (ncod * M, 1)),
                ("w", (_w_size(kind, M, d, bias, ncod), nr_w))]

    @classmethod
    def from_file(cls, header, base, blocks):
        sigma = blocks["sigma"]
        if not (sigma >= 1.0 / VALUE_LIMIT).all():
            # training keeps singular values above a relative rank tolerance; the code
            # map divides by them, so a tiny one would overflow to inf / nan
            raise ModelFieldError("sigma", f"sigma block: the singular values must be at "
                                           f"least {1.0 / VALUE_LIMIT:g}")
        km = KernelMap.from_header(header)
        model = cls(base["solver_type"], base["nr_class"], base.get("label"), base["nr_feature"],
                    base["bias"], header["coding"], header["occ_classifier"], blocks["planes"],
                    sigma, blocks["w"], kernel_map=km)
        if model.n_codings != int(header["nr_coding"]):
            raise ModelFieldError("nr_coding", f"nr_coding {header['nr_coding']} does not match "
                                               f"{header['coding']} with {model.nr_w} decision "
                                               f"functions")
        return model

    def __repr__(self):
        km = "" if self.kernel_map is None else f", kernel_map={self.kernel_map.name}"
        return (f"OCCModel({SolverType(self.solver_type).name}, {self.coding_name}, "
                f"{self.classifier}, n_planes={self.n_planes}, nr_class={self.nr_class}, "
                f"nr_feature={self.nr_feature}, bias={self.bias:g}{km})")


# the solver types that train each classifier (train_occ_model's choice of kind)
_CLASSIFIER_SOLVERS = {
    LIB_LLSVM: frozenset({int(SolverType.L2R_L2LOSS_SVC_DUAL), int(SolverType.L2R_L1LOSS_SVC_DUAL)}),
    LIB_LLSVM_PB: frozenset({int(SolverType.L2R_L2LOSS_SVC_DUAL),
                             int(SolverType.L2R_L1LOSS_SVC_DUAL)}),
    PEG_LLSVM: frozenset(SGD_SOLVERS),
    LINEAR_CODES: OCC_SOLVERS | {PRIMAL_L2_SOLVER},
    LINEAR_ALL_CODES: OCC_SOLVERS | {PRIMAL_L2_SOLVER},
}


def _w_size(kind: str, M: int, d: int, bias: float, n_codings: int = 1) -> int:
    hb = 1 if bias >= 0 else 0
    if kind == LINEAR_ALL_CODES:
        return n_codings * M + hb
    if kind == LIB_LLSVM:
        return M * d + hb
    if kind == PEG_LLSVM:
        return M * (d + hb)
    if kind == LIB_LLSVM_PB:
        return M * (d + 1) + 1
    return M + hb


# the coding names of anchor-plane model files
FILE_TAGS = tuple(OCC_CODINGS.values())


# ------------------------------------------------------------------------ training
def solve_occ_dual(rows: Rows, codes: np.ndarray, y: np.ndarray, C: np.ndarray, bias: float,
                   rng_state: np.ndarray, params: TrainParams, info: Messages,
                   loss: str) -> SolveResult:
    """LIB-LLSVM: LIBLINEAR's dual CD (-s 3 ``loss="l1"``, -s 1 ``"l2"``) on
    ``[gamma (x) x; B]`` -- the shared dual-CD kernel fed the dense OCC code with one
    shared bias; returns ``w`` of length ``M*d + 1`` (bias last; 0 when ``bias < 0``)."""
    n, M = rows.n_rows, codes.shape[1]
    idx = np.ascontiguousarray(np.broadcast_to(np.arange(M, dtype=np.int32), (n, M)))
    codes = np.ascontiguousarray(codes, dtype=np.float64)
    prob = BinaryProblem(rows, np.ascontiguousarray(y, dtype=np.int8), 0.0, 0.0, bias, rng_state,
                         coding=Coding(idx, codes, M), sample_C=np.asarray(C, dtype=np.float64),
                         shared_bias=True)
    if loss == "l2":
        # a stalled dual CD hands over to the primal Newton solver on the coded rows,
        # as LL-SVM's -s 1 does
        return train_l2loss_svc_dual_switching(prob, params, info)
    res = solve_l2r_l1l2_svc(prob, params, info, loss)
    if res.n_iter >= params.max_iter:
        info("\nWARNING: reaching max number of iterations\n" + LOCAL_CAP_REMEDY + "\n")
    return res


def check_occ_params(params: TrainParams) -> None:
    """Consistency of the anchor-plane options beyond their domains."""
    st = int(params.solver_type)
    if params.coding not in OCC_CODINGS:
        raise ValueError(f"-L {params.coding} is not an OCC coding (4 or 5)")
    op = OCCParams.from_train_params(params)      # checks -u
    linear_on_codes = op.classifier in (OCCClassifier.LINEAR_ON_CODES,
                                        OCCClassifier.LINEAR_ON_ALL_CODES)
    if st not in OCC_SOLVERS and not (linear_on_codes and st == PRIMAL_L2_SOLVER):
        raise ValueError(f"-s {st} ({SolverType(st).name}) with -L {params.coding}: "
                         f"OCC training supports -s 1, 3, 30 and 32 (and -s 2 with -u 0 or 2)")
    if op.classifier == OCCClassifier.LOCALLY_LINEAR_PLANE_BIAS \
            and (st in SGD_SOLVERS or not params.bias >= 0):
        raise ValueError("-u 3 (a bias per plane) needs -s 1 or 3 and -B >= 0 (-s 30 and "
                         "32 always have one bias per plane)")
    if op.classifier == OCCClassifier.LINEAR_ON_ALL_CODES and op.planes != CodingType.C_OCC:
        raise ValueError(f"-u 2 (linear SVM on all classes' codes) needs -L 5, "
                         f"not -L {params.coding}")
    if st in SGD_SOLVERS:
        check_sgd_params(params)


def _code_rows(codes: np.ndarray) -> Rows:
    """The dense codes as CSR rows (input of the linear SVM on the codes)."""
    n, M = codes.shape
    return Rows(np.ascontiguousarray(codes.reshape(-1)),
                np.ascontiguousarray(np.tile(np.arange(M, dtype=np.int32), n)),
                np.arange(0, n * M + 1, M, dtype=np.int64), M)


def classifier_kind(op: OCCParams, solver_type: int) -> str:
    """The classifier on the codes (the model file's ``occ_classifier``) that ``-u``
    and ``-s`` ask for."""
    if op.classifier == OCCClassifier.LINEAR_ON_ALL_CODES:
        return LINEAR_ALL_CODES
    if op.classifier == OCCClassifier.LINEAR_ON_CODES:
        return LINEAR_CODES
    if op.classifier == OCCClassifier.LOCALLY_LINEAR_PLANE_BIAS:
        return LIB_LLSVM_PB
    return PEG_LLSVM if int(solver_type) in SGD_SOLVERS else LIB_LLSVM


def basis_seed(seed: int, seed_path: tuple = (), c: int | None = None) -> int:
    """Seed of the randomised SVD of the planes: of all rows (``c`` None, G-OCC) or
    of class ``c``'s rows (C-OCC)."""
    state = int(rng_state(seed, PURPOSE_SVD, *seed_path, 0 if c is None else c + 1)[0])
    return state % (1 << 63)


def train_occ_model(y: np.ndarray, rows: Rows, params: TrainParams, info: Messages | None = None,
                    seed_path: tuple = (), sample_weight: np.ndarray | None = None) -> OCCModel:
    """Train an OCC model (``-L 4``/``5``, ``-A`` planes) with ``-s 1``/``3``
    (LIB-LLSVM; ``-u 0``: linear SVM on the codes) or ``-s 30`` (PEG-LLSVM).
    ``sample_weight`` multiplies each row's C (the planes are learned unweighted)."""
    check_occ_params(params)
    sw = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    op = OCCParams.from_train_params(params)
    info = info if info is not None else Messages(params.quiet)
    st = int(params.solver_type)
    bias = float(params.bias)
    nr_feature = rows.n_features
    kernel_map = kernel_map_of(params)
    if kernel_map is not None:      # -K: the additive kernel map first (as for -L 1, 2, 6)
        rows = kernel_map(rows)
    M = op.n_planes
    labels, class_index = group_classes(y)
    nr_class = labels.size
    weighted_C = class_costs(labels, params)
    jobs = one_vs_rest_jobs(class_index, nr_class, weighted_C, params.C, rows.n_rows)
    nr_w = len(jobs)
    kind = classifier_kind(op, st)

    def basis(c: int | None):
        sub = rows if c is None else rows.take(np.flatnonzero(class_index == c))
        with single_threaded_blas(sub.n_rows) if params.n_threads > 1 else \
                contextlib.nullcontext():
            return occ_basis(sub, M, seed=basis_seed(params.seed, seed_path, c))

    t = time.perf_counter()
    if op.planes == CodingType.G_OCC:
        shared = basis(None)
        bases = [shared]
        shared_codes = occ_codes(rows, *shared)
        info(f"G-OCC: {M} planes ({time.perf_counter() - t:.2f} s with coding)\n")
    else:
        bases = [None] * nr_w
        shared_codes = None
    if kind == LINEAR_ALL_CODES:
        # every problem sees all classes' codes: learn the bases first, code once
        bases = map_threads(basis, [job[0] for job in jobs], params.n_threads)
        shared_codes = occ_codes_multi(rows, np.vstack([b[0] for b in bases]),
                                       np.concatenate([b[1] for b in bases]), M)
        info(f"C-OCC: {nr_w} x {M} planes ({time.perf_counter() - t:.2f} s with coding)\n")

    # -u 3: the per-plane bias is a constant feature B appended to every row
    rows_pb = _with_constant(rows, bias) if kind == LIB_LLSVM_PB else None

    def solve_one(job) -> SolveResult:
        c, y_pm, Cp, Cn = job
        if shared_codes is None:
            bases[c] = basis(c)
            codes = occ_codes(rows, *bases[c])
        else:
            codes = shared_codes
        state = rng_state(params.seed, PURPOSE_SOLVER, *seed_path, c)
        row_C = None if sw is None else np.where(y_pm > 0, Cp, Cn) * sw
        if kind in (LIB_LLSVM, LIB_LLSVM_PB):
            C = np.where(y_pm > 0, Cp, Cn).astype(np.float64) if row_C is None else row_C
            res = solve_occ_dual(rows_pb if kind == LIB_LLSVM_PB else rows, codes, y_pm, C,
                                 bias, state, params, info,
                                 "l2" if st == int(SolverType.L2R_L2LOSS_SVC_DUAL) else "l1")
            return res
        if kind == PEG_LLSVM:
            idx = np.ascontiguousarray(np.broadcast_to(np.arange(M, dtype=np.int32),
                                                       codes.shape))
            prob = BinaryProblem(rows, y_pm, Cp, Cn, bias, state,
                                 coding=Coding(idx, codes, M), sample_C=row_C)
            return solve_sgd_hinge(prob, params, info)
        prob = BinaryProblem(_code_rows(codes), y_pm, Cp, Cn, bias, state, sample_C=row_C)
        return BINARY_SOLVERS[st](prob, params, info)

    def solve(job):
        w = reported_solve(info, labels, job[0], nr_class, solve_one, job).w
        # LIB-LLSVM's shared bias weight is 0 without -B: the model stores none
        return w[:-1] if kind in (LIB_LLSVM, LIB_LLSVM_PB) and bias < 0 else w

    w = np.column_stack(map_threads(solve, jobs, params.n_threads))
    planes = np.vstack([b[0] for b in bases])
    sigma = np.concatenate([b[1] for b in bases])
    info(f"OCC training: {time.perf_counter() - t:.2f} s\n")
    return OCCModel(st, nr_class, labels, nr_feature, bias, OCC_CODINGS[params.coding], kind,
                    planes, sigma, w, param=params, kernel_map=kernel_map)


def _with_constant(rows: Rows, value: float) -> Rows:
    """``[x; value]``: one more column (index ``n_features``) of value ``value``."""
    n, d = rows.n_rows, rows.n_features
    indptr = rows.indptr + np.arange(n + 1, dtype=np.int64)
    last = indptr[1:] - 1                               # slot of the new entry per row
    data = np.empty(rows.data.shape[0] + n)
    indices = np.empty(rows.data.shape[0] + n, dtype=np.int32)
    keep = np.ones(data.shape[0], dtype=bool)
    keep[last] = False
    data[keep], indices[keep] = rows.data, rows.indices
    data[last], indices[last] = value, d
    return Rows(data, indices, indptr, d + 1)

