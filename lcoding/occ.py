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
  implicit feature ``[gamma (x) x; B]`` (the shared dual-CD kernel with a shared bias, :func:`lcoding.solvers.solve_l2r_l1l2_svc`).
* ``-s 30`` (PEG-LLSVM): the LL-SVM SGD of :mod:`lcoding.sgd` with one bias per
  plane, ``f_c(x) = sum_j gamma_j (w_{c,j} . x + b_{c,j} B)``.
* ``-u 0`` with any of those solvers: linear SVM on the codes alone,
  ``f_c(x) = w_c . gamma(x) + b_c B`` (the paper's "Linear SVM + OCC").
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from lcoding._validation import Rows
from lcoding.coding import is_dense, single_threaded_blas
from lcoding.model import Model
from lcoding.options import SolverType, TrainParams
from lcoding.solvers import (BINARY_SOLVERS, BinaryProblem, Coding, LOCAL_CAP_REMEDY, Messages,
                             SolveResult, solve_l2r_l1l2_svc)

FORMAT_VERSION = "1"
OCC_CODINGS = {4: "G_OCC", 5: "C_OCC"}
OCC_BY_NAME = {name: kind for kind, name in OCC_CODINGS.items()}
SGD_SOLVER = int(SolverType.L2R_L1LOSS_SVC_SGD)
OCC_SOLVERS = frozenset({int(SolverType.L2R_L2LOSS_SVC_DUAL),
                         int(SolverType.L2R_L1LOSS_SVC_DUAL), SGD_SOLVER})
# classifier on the codes, written to model files as occ_classifier
LIB_LLSVM, PEG_LLSVM, LINEAR_CODES = "LIB_LLSVM", "PEG_LLSVM", "LINEAR_CODES"
CLASSIFIERS = (LIB_LLSVM, PEG_LLSVM, LINEAR_CODES)
CODE_BATCH = 2048          # rows per coding batch
OVERSAMPLE = 10            # extra columns of the randomised range finder
POWER_ITER = 4             # power iterations of the range finder
RANK_TOL = 1e-10           # s_M <= RANK_TOL * s_1: -A exceeds the rank of the data

_PURPOSE_SOLVER = 1        # same seed paths as local_model.py
_PURPOSE_SVD = 11


def _csr(rows: Rows, n_features: int | None = None) -> sp.csr_matrix:
    d = rows.n_features if n_features is None else n_features
    return sp.csr_matrix((rows.data, rows.indices, rows.indptr), shape=(rows.n_rows, d))


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
    X = _csr(rows)
    ell = min(M + oversample, n, d)
    rng = np.random.Generator(np.random.PCG64(int(seed)))
    # range of X^T (d-dimensional): Q spans the top right singular subspace
    Q = X.T @ rng.standard_normal((n, ell))
    Q, _ = np.linalg.qr(Q)
    for _ in range(power_iter):
        Q, _ = np.linalg.qr(X.T @ np.asarray(X @ Q))
    B = np.asarray(X @ Q)                           # (n, ell) = U S (Q Wb)^T
    _, s, Wt = np.linalg.svd(B, full_matrices=False)
    V = (Q @ Wt.T).T[:M]                            # (M, d)
    s = s[:M]
    if not s[0] > 0 or s[-1] <= RANK_TOL * s[0]:
        raise ValueError(f"-A {M}: the data has fewer than {M} non-zero singular values "
                         f"(s_M / s_1 = {s[-1] / s[0] if s[0] > 0 else 0:.3g}); use fewer planes")
    flip = np.sign(V[np.arange(M), np.argmax(np.abs(V), axis=1)])
    V *= flip[:, None]
    return np.ascontiguousarray(V), np.ascontiguousarray(s)


def occ_codes(rows: Rows, planes: np.ndarray, sigma: np.ndarray, batch: int = CODE_BATCH,
              n_features: int | None = None) -> np.ndarray:
    """Codes ``(n_rows, M)``: ``gamma = g / ||g||_1``, ``g = diag(1/sigma) planes x``
    (rows with ``g = 0`` get ``gamma = 0``)."""
    M, d = planes.shape
    P = np.ascontiguousarray((planes / sigma[:, None]).T)     # (d, M)
    out = np.empty((rows.n_rows, M))
    dense = is_dense(rows, d)
    for a in range(0, rows.n_rows, batch):
        b = min(a + batch, rows.n_rows)
        p0, p1 = int(rows.indptr[a]), int(rows.indptr[b])
        Xb = sp.csr_matrix((rows.data[p0:p1], rows.indices[p0:p1], rows.indptr[a:b + 1] - p0),
                           shape=(b - a, d))
        if dense:
            np.matmul(Xb.toarray(), P, out=out[a:b])
        else:
            out[a:b] = Xb @ P
    norm = np.abs(out).sum(axis=1)
    norm[norm == 0] = 1.0
    out /= norm[:, None]
    return out


class OCCModel(Model):
    """OCC model: ``planes`` ``(n_codings * M, dim)`` and ``sigma`` of each coding
    (one coding for G-OCC, one per decision function for C-OCC), classifier kind and
    ``w`` of shape ``(w_size, nr_w)`` with

    * LIB_LLSVM: ``w_size = M*d + (B >= 0)``, row ``j*d + f`` = weight of feature f
      at plane j, the single bias last;
    * PEG_LLSVM: ``w_size = M*(d + (B >= 0))``, plane-major, per-plane bias last in
      each plane's row (LocalModel's layout);
    * LINEAR_CODES: ``w_size = M + (B >= 0)``."""

    def __init__(self, solver_type, nr_class, label, nr_feature, bias, coding_name, classifier,
                 planes, sigma, w, param=None):
        self._set_header(solver_type, nr_class, label, nr_feature, bias)
        self.param = param
        if coding_name not in OCC_BY_NAME:
            raise ValueError(f"unknown OCC coding {coding_name!r}")
        if classifier not in CLASSIFIERS:
            raise ValueError(f"unknown occ_classifier {classifier!r}")
        self.coding_name = coding_name
        self.classifier = classifier
        planes = np.ascontiguousarray(planes, dtype=np.float64)
        sigma = np.ascontiguousarray(sigma, dtype=np.float64).reshape(-1)
        if planes.ndim != 2 or planes.shape[1] != self.nr_feature:
            raise ValueError(f"planes have shape {planes.shape}, expected (*, {self.nr_feature})")
        if planes.shape[0] % self.n_codings or sigma.shape[0] != planes.shape[0]:
            raise ValueError(f"{planes.shape[0]} planes / {sigma.shape[0]} singular values do "
                             f"not split into {self.n_codings} codings")
        if not (sigma > 0).all():
            raise ValueError("singular values must be > 0")
        self.planes, self.sigma = planes, sigma
        w = np.ascontiguousarray(w, dtype=np.float64)
        expected = (self.w_size, self.nr_w)
        if w.shape != expected:
            raise ValueError(f"weight matrix has shape {w.shape}, expected {expected}")
        self.w = w

    @property
    def n_codings(self) -> int:
        return 1 if self.coding_name == "G_OCC" else self.nr_w

    @property
    def n_planes(self) -> int:
        return self.planes.shape[0] // self.n_codings

    @property
    def w_size(self) -> int:
        return _w_size(self.classifier, self.n_planes, self.nr_feature, self.bias)

    def coding(self, c: int):
        """``(planes, sigma)`` of the coding used by decision function ``c``."""
        M = self.n_planes
        k = 0 if self.n_codings == 1 else c
        return self.planes[k * M:(k + 1) * M], self.sigma[k * M:(k + 1) * M]

    def decision_values(self, rows: Rows, n_threads: int = 1) -> np.ndarray:
        rows = rows.truncated(self.nr_feature)
        n, d, M = rows.n_rows, self.nr_feature, self.n_planes
        out = np.empty((n, self.nr_w))
        if n == 0:
            return out
        B = self.bias if self.bias >= 0 else 0.0
        codes = None
        for c in range(self.nr_w):
            if codes is None or self.n_codings > 1:
                codes = occ_codes(rows, *self.coding(c), n_features=d)
            wc = self.w[:, c]
            if self.classifier == LINEAR_CODES:
                out[:, c] = codes @ wc[:M] + (wc[M] * B if self.bias >= 0 else 0.0)
                continue
            if self.classifier == LIB_LLSVM:
                Wc = wc[:M * d].reshape(M, d)
                bc = np.full(M, 0.0)
                extra = wc[M * d] * B if self.bias >= 0 else 0.0
            else:
                stride = d + (1 if self.bias >= 0 else 0)
                Wp = wc.reshape(M, stride)
                Wc = Wp[:, :d]
                bc = Wp[:, d] * B if self.bias >= 0 else np.zeros(M)
                extra = 0.0
            S = np.asarray(_csr(rows, d) @ np.ascontiguousarray(Wc.T)) + bc  # (n, M)
            out[:, c] = np.einsum("ij,ij->i", S, codes) + extra
        return out

    # ---------------------------------------------------------------- model files
    def file_header(self):
        return [("lcoding_format", FORMAT_VERSION), ("coding", self.coding_name),
                ("occ_classifier", self.classifier), ("nr_plane", str(self.n_planes)),
                ("nr_coding", str(self.n_codings))]

    def file_blocks(self):
        return [("planes", self.planes), ("sigma", self.sigma.reshape(-1, 1)), ("w", self.w)]

    @classmethod
    def block_shapes(cls, header, base):
        M, ncod = int(header["nr_plane"]), int(header["nr_coding"])
        d = int(base["nr_feature"])
        if M < 1 or ncod < 1 or d < 0:
            raise ValueError(f"nr_plane {M} / nr_coding {ncod} / nr_feature {d} out of range")
        kind = header.get("occ_classifier")
        if kind not in CLASSIFIERS:
            raise ValueError(f"unknown occ_classifier {kind!r}")
        nr_w = 1 if int(base["nr_class"]) == 2 else int(base["nr_class"])
        return [("planes", (ncod * M, d)), ("sigma", (ncod * M, 1)),
                ("w", (_w_size(kind, M, d, float(base["bias"])), nr_w))]

    @classmethod
    def from_file(cls, header, base, blocks):
        model = cls(base["solver_type"], base["nr_class"], base.get("label"), base["nr_feature"],
                    base["bias"], header["coding"], header["occ_classifier"], blocks["planes"],
                    blocks["sigma"], blocks["w"])
        if model.n_codings != int(header["nr_coding"]):
            raise ValueError(f"nr_coding {header['nr_coding']} does not match {header['coding']}"
                             f" with {model.nr_w} decision functions")
        return model

    def __repr__(self):
        return (f"OCCModel({SolverType(self.solver_type).name}, {self.coding_name}, "
                f"{self.classifier}, n_planes={self.n_planes}, nr_class={self.nr_class}, "
                f"nr_feature={self.nr_feature}, bias={self.bias:g})")


def _w_size(kind: str, M: int, d: int, bias: float) -> int:
    hb = 1 if bias >= 0 else 0
    if kind == LIB_LLSVM:
        return M * d + hb
    if kind == PEG_LLSVM:
        return M * (d + hb)
    return M + hb


MODEL_TYPES = {name: OCCModel for name in OCC_CODINGS.values()}


def _register_model_types() -> None:
    try:
        from lcoding import model_io
    except ImportError:       # pragma: no cover
        return
    for name, cls in MODEL_TYPES.items():
        model_io.MODEL_TYPES.setdefault(name, cls)


_register_model_types()


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
    res = solve_l2r_l1l2_svc(prob, params, info, loss)
    if res.n_iter >= params.max_iter:
        info("\nWARNING: reaching max number of iterations\n" + LOCAL_CAP_REMEDY + "\n")
    return res


def check_occ_params(params: TrainParams) -> None:
    st = int(params.solver_type)
    if st not in OCC_SOLVERS:
        raise ValueError(f"-s {st} ({SolverType(st).name}) with -L {params.coding}: "
                                  f"OCC training supports -s 1, 3 and 30")
    if params.coding not in OCC_CODINGS:
        raise ValueError(f"-L {params.coding} is not an OCC coding (4 or 5)")
    if params.n_anchors < 1:
        raise ValueError(f"-A {params.n_anchors}: the number of planes must be >= 1")
    if params.coding_param not in (0.0, 1.0):
        raise ValueError(f"-u {params.coding_param:g} with -L {params.coding}: must be 1 "
                         f"(locally linear on gamma (x) x) or 0 (linear SVM on the codes)")
    if params.kernel_map != 0:
        raise ValueError(f"-K {params.kernel_map} is not supported with -L {params.coding}")
    if params.n_threads < 1:
        raise ValueError(f"-m {params.n_threads}: the number of threads must be >= 1")
    if st == SGD_SOLVER:
        from lcoding.sgd import check_sgd_params
        check_sgd_params(params)


def _code_rows(codes: np.ndarray) -> Rows:
    """The dense codes as CSR rows (input of the linear SVM on the codes)."""
    n, M = codes.shape
    return Rows(np.ascontiguousarray(codes.reshape(-1)),
                np.ascontiguousarray(np.tile(np.arange(M, dtype=np.int32), n)),
                np.arange(0, n * M + 1, M, dtype=np.int64), M)


def train_occ_model(y: np.ndarray, rows: Rows, params: TrainParams, info: Messages | None = None,
                    seed_path: tuple = ()) -> OCCModel:
    """Train an OCC model (``-L 4``/``5``, ``-A`` planes) with ``-s 1``/``3``
    (LIB-LLSVM; ``-u 0``: linear SVM on the codes) or ``-s 30`` (PEG-LLSVM)."""
    from lcoding.training import _weighted_C, group_classes, one_vs_rest_jobs, rng_state
    from lcoding.sgd import solve_sgd_hinge
    check_occ_params(params)
    info = info if info is not None else Messages(params.quiet)
    st = int(params.solver_type)
    bias = float(params.bias)
    d = rows.n_features
    M = int(params.n_anchors)
    labels, class_index = group_classes(y)
    nr_class = labels.size
    weighted_C = _weighted_C(labels, params)
    jobs = one_vs_rest_jobs(class_index, nr_class, weighted_C, params.C, rows.n_rows)
    nr_w = len(jobs)
    linear_codes = params.coding_param == 0.0
    kind = LINEAR_CODES if linear_codes else (PEG_LLSVM if st == SGD_SOLVER else LIB_LLSVM)

    def basis(c: int | None):
        sub = rows if c is None else _select(rows, class_index == c)
        seed = int(rng_state(params.seed, _PURPOSE_SVD, *seed_path, 0 if c is None else c + 1)[0])
        with single_threaded_blas(sub.n_rows) if params.n_threads > 1 else _null():
            return occ_basis(sub, M, seed=seed % (1 << 63))

    t = time.perf_counter()
    if params.coding == 4:
        shared = basis(None)
        bases = [shared]
        shared_codes = occ_codes(rows, *shared)
        info(f"G-OCC: {M} planes ({time.perf_counter() - t:.2f} s with coding)\n")
    else:
        bases = [None] * nr_w
        shared_codes = None

    def solve(job):
        c, y_pm, Cp, Cn = job
        if shared_codes is None:
            bases[c] = basis(c)
            codes = occ_codes(rows, *bases[c])
        else:
            codes = shared_codes
        state = rng_state(params.seed, _PURPOSE_SOLVER, *seed_path, c)
        if kind == LIB_LLSVM:
            C = np.where(y_pm > 0, Cp, Cn).astype(np.float64)
            res = solve_occ_dual(rows, codes, y_pm, C, bias, state, params, info,
                                 "l2" if st == int(SolverType.L2R_L2LOSS_SVC_DUAL) else "l1")
            return res.w if bias >= 0 else res.w[:-1]
        if kind == PEG_LLSVM:
            idx = np.ascontiguousarray(np.broadcast_to(np.arange(M, dtype=np.int32),
                                                       codes.shape))
            prob = BinaryProblem(rows, y_pm, Cp, Cn, bias, state,
                                 coding=Coding(idx, codes, M))
            return solve_sgd_hinge(prob, params, info).w
        prob = BinaryProblem(_code_rows(codes), y_pm, Cp, Cn, bias, state)
        solver = solve_sgd_hinge if st == SGD_SOLVER else BINARY_SOLVERS[st]
        return solver(prob, params, info).w

    if params.n_threads > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=min(params.n_threads, len(jobs))) as pool:
            results = list(pool.map(solve, jobs))
    else:
        results = [solve(job) for job in jobs]
    w = np.column_stack(results)
    planes = np.vstack([b[0] for b in bases])
    sigma = np.concatenate([b[1] for b in bases])
    info(f"OCC training: {time.perf_counter() - t:.2f} s\n")
    return OCCModel(st, nr_class, labels, d, bias, OCC_CODINGS[params.coding], kind,
                    planes, sigma, w, param=params)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _select(rows: Rows, mask: np.ndarray) -> Rows:
    X = _csr(rows)[np.flatnonzero(mask)]
    return Rows(np.ascontiguousarray(X.data, dtype=np.float64),
                np.ascontiguousarray(X.indices, dtype=np.int32),
                np.ascontiguousarray(X.indptr, dtype=np.int64), rows.n_features)
