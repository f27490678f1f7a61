"""Typed parameters, one object per method, filled from the same option letters.

The option table (:mod:`lcoding.core.options`) parses a LIBLINEAR-style string into
one flat :class:`~lcoding.core.options.TrainParams` (LIBLINEAR's ``parameter``
keeps that shape).  Each method then reads its own object from it, where every
field has one meaning: ``-u`` is the power of the inverse-distance coding, the
Gaussian coding's beta, the k* coding's mu or the LLC ridge, each a field of its
own; the anchor-plane classifier is an enum, not a float.  The shared solver
settings (``-c``, ``-e``, ``-B``, ``-wi``, ``-S``, ``-m``) stay on ``TrainParams``,
which the solvers take.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

# -U's value for -s 40 when not given: the paper's own-class margin mu1
KQ_MU1 = 1.05


class CodingType(IntEnum):
    """``-L``: the local coding gamma(x)."""
    NONE = 0
    INVERSE_DISTANCE = 1     # LL-SVM's kNN inverse distance, gamma ~ 1/d^power
    GAUSSIAN = 2             # kNN Gaussian soft assignment exp(-beta d) (LLC-SAPL)
    KSTAR = 3                # k* optimal coding (LLC-JO), smoothness mu
    G_OCC = 4                # anchor planes of all classes
    C_OCC = 5                # anchor planes per class
    LLC = 6                  # locality-constrained linear coding, ridge


class AnchorInit(IntEnum):
    """``-a``: how the anchors are placed."""
    KMEANS = 0
    RANDOM_SAMPLES = 1
    KMEANS_PER_CLASS = 2
    RANDOM_SAMPLES_PER_CLASS = 3
    KMEANS_FROM_SAMPLES = 4


class KernelMapKind(IntEnum):
    """``-K``: additive kernel map applied before the local model."""
    NONE = 0
    INTERSECTION = 1
    CHI2 = 2
    HELLINGER = 3


class OCCClassifier(IntEnum):
    """``-u`` with ``-L 4, 5``: the classifier on the anchor-plane codes."""
    LINEAR_ON_CODES = 0              # a linear SVM on the codes
    LOCALLY_LINEAR = 1               # LIB-LLSVM (-s 1, 3) / PEG-LLSVM (-s 30, 32) on gamma (x) x
    LINEAR_ON_ALL_CODES = 2          # C-OCC: a linear SVM on every class's codes
    LOCALLY_LINEAR_PLANE_BIAS = 3    # LIB-LLSVM with a bias per plane


class AnchorGradient(IntEnum):
    """``-j``: the anchor gradient of LLC-JO's joint SGD."""
    EXACT = 0
    FIXED_LAMBDA = 1
    REFERENCE_CODE = 2


@dataclass(frozen=True)
class AnchorParams:
    n_anchors: int            # -A
    init: AnchorInit          # -a
    kmeans_iter: int          # -I
    kmeans_batch: int         # -M (0: full Lloyd)

    @classmethod
    def from_train_params(cls, p) -> "AnchorParams":
        return cls(int(p.n_anchors), AnchorInit(p.anchor_init), int(p.kmeans_iter),
                   int(p.kmeans_batch))


@dataclass(frozen=True)
class KernelMapParams:
    kind: KernelMapKind       # -K
    order: int                # -O

    @classmethod
    def from_train_params(cls, p) -> "KernelMapParams":
        return cls(KernelMapKind(p.kernel_map), int(p.kernel_map_order))


@dataclass(frozen=True)
class SGDParams:
    epochs: int               # -E
    t0: float                 # -T (0: calibrated)
    skip: int                 # -P

    @classmethod
    def from_train_params(cls, p) -> "SGDParams":
        return cls(int(p.epochs), float(p.t0), int(p.skip))


def _coding_values(coding: CodingType, value: float) -> dict:
    """``-u``'s meaning for ``coding``, as the one field it fills."""
    field = {CodingType.INVERSE_DISTANCE: "power", CodingType.GAUSSIAN: "beta", CodingType.KSTAR: "mu",
             CodingType.LLC: "ridge"}.get(coding)
    return {field: float(value)} if field else {}


@dataclass(frozen=True)
class LLSVMParams:
    """LL-SVM (``-L 1, 2, 3, 6`` with ``-s 1, 2, 3, 4, 30, 32``)."""
    coding: CodingType
    anchors: AnchorParams
    n_neighbors: int                  # -k
    kernel_map: KernelMapParams
    sgd: SGDParams
    power: float | None = None        # -u with -L 1
    beta: float | None = None         # -u with -L 2
    mu: float | None = None           # -u with -L 3
    ridge: float | None = None        # -u with -L 6 (units of 1e-4 trace(C))

    @property
    def coding_param(self) -> float:
        """The coding's own parameter, as the coding kernels take it."""
        for value in (self.power, self.beta, self.mu, self.ridge):
            if value is not None:
                return value
        return 0.0

    @classmethod
    def from_train_params(cls, p) -> "LLSVMParams":
        coding = CodingType(p.coding)
        return cls(coding, AnchorParams.from_train_params(p), int(p.n_neighbors),
                   KernelMapParams.from_train_params(p), SGDParams.from_train_params(p),
                   **_coding_values(coding, p.coding_param))


@dataclass(frozen=True)
class OCCParams:
    """Anchor planes (``-L 4`` G-OCC, ``-L 5`` C-OCC)."""
    planes: CodingType                    # -L: G_OCC or C_OCC
    n_planes: int                     # -A
    classifier: OCCClassifier         # -u
    kernel_map: KernelMapParams
    sgd: SGDParams

    @classmethod
    def from_train_params(cls, p) -> "OCCParams":
        if p.coding_param not in (0.0, 1.0, 2.0, 3.0):
            raise ValueError(f"-u {p.coding_param:g} with -L {p.coding}: must be 1 "
                             f"(locally linear on gamma (x) x), 0 (linear SVM on the codes), 2 "
                             f"(-L 5: linear SVM on all classes' codes) or 3 (1 with a bias "
                             f"per plane)")
        return cls(CodingType(p.coding), int(p.n_anchors), OCCClassifier(int(p.coding_param)),
                   KernelMapParams.from_train_params(p), SGDParams.from_train_params(p))


@dataclass(frozen=True)
class LLCJointParams:
    """LLC-SAPL (``-s 31, 33 -L 2``) / LLC-JO (``-s 31, 33 -L 3``)."""
    coding: CodingType
    anchors: AnchorParams
    n_neighbors: int                  # -k (LLC-SAPL)
    anchor_lr: float                  # -f
    anchor_gradient: AnchorGradient   # -j
    kernel_map: KernelMapParams
    sgd: SGDParams
    beta: float | None = None         # -u with -L 2
    mu: float | None = None           # -u with -L 3

    @property
    def coding_param(self) -> float:
        return self.beta if self.beta is not None else (self.mu if self.mu is not None else 0.0)

    @classmethod
    def from_train_params(cls, p) -> "LLCJointParams":
        coding = CodingType(p.coding)
        return cls(coding, AnchorParams.from_train_params(p), int(p.n_neighbors),
                   float(p.anchor_lr), AnchorGradient(p.anchor_grad),
                   KernelMapParams.from_train_params(p), SGDParams.from_train_params(p),
                   **_coding_values(coding, p.coding_param))


@dataclass(frozen=True)
class KQParams:
    """Discriminative k q-metrics (``-s 40``) / k q-flats (``-s 41``)."""
    clusters_per_class: int           # -k
    q: int                            # -Q
    mu1: float                        # -U (-s 40; not given: KQ_MU1)
    mu2: float                        # -V
    dt: float                         # -D
    alpha1: float                     # -i
    alpha2: float                     # -o
    update_rule: int                  # -G
    pass_type: int                    # -F
    pca_dim: int                      # -l (0: none)
    sphere: bool                      # -Z
    restarts: int                     # -W
    affine: bool                      # -y
    select: bool                      # -x
    offset: float                     # -z
    epochs: int                       # -E
    kernel_map: KernelMapParams
    screen_margin: float | None       # -U with -s 41 (None: not given, no screen)

    @classmethod
    def from_train_params(cls, p) -> "KQParams":
        # -U is the -s 40 metrics' own-class margin and the -s 41 flats' screen margin;
        # not given (its sentinel, inf): KQ_MU1 and no screen
        given = math.isfinite(float(p.kq_mu1))
        flats = int(p.solver_type) == 41
        return cls(int(p.n_neighbors), int(p.kq_dim),
                   float(p.kq_mu1) if given else KQ_MU1, float(p.kq_mu2),
                   float(p.kq_dt), float(p.kq_alpha1), float(p.kq_alpha2), int(p.kq_update),
                   int(p.kq_pass), int(p.kq_pca), bool(p.kq_sphere), int(p.kq_restarts),
                   bool(p.kq_affine), bool(p.kq_select), float(p.kq_offset), int(p.epochs),
                   KernelMapParams.from_train_params(p),
                   float(p.kq_mu1) if given and flats else None)


class KernelType(IntEnum):
    """``-t``: LIBSVM's kernels."""
    LINEAR = 0
    POLYNOMIAL = 1
    RBF = 2
    SIGMOID = 3


class Invariance(IntEnum):
    """``-H``: the kernel machine."""
    KPCA_MAP = 0
    IHKPCA = 1
    ISVM = 2
    VSV = 3
    IHKPCA_VIRTUAL = 4


@dataclass(frozen=True)
class KernelParams:
    """Kernel PCA map and invariant SVMs (``-t``, ``-H``, ``-J``)."""
    kernel_type: KernelType | None    # -t (None: no kernel, the invariant linear SVM)
    degree: int                       # -d
    gamma: float                      # -g (0: 1 / n_features)
    coef0: float                      # -r
    invariance: Invariance            # -H
    tangents: int                     # -J (bit 1 horizontal, bit 2 vertical)
    image_width: int                  # -N (0: square)
    invariance_gamma: float           # -Y
    n_landmarks: int                  # -X

    @classmethod
    def from_train_params(cls, p) -> "KernelParams":
        kernel = None if p.kernel_type < 0 else KernelType(p.kernel_type)
        return cls(kernel, int(p.degree), float(p.kernel_gamma), float(p.coef0),
                   Invariance(p.invariance), int(p.tangents), int(p.image_width),
                   float(p.invariance_gamma), int(p.n_landmarks))


@dataclass(frozen=True)
class LinearParams:
    """LIBLINEAR's solvers: the options only some of them read."""
    p: float                          # -p (SVR)
    nu: float                         # -n (one-class)
    regularize_bias: bool             # not -R
    sgd: SGDParams                    # -s 30, 32

    @classmethod
    def from_train_params(cls, p) -> "LinearParams":
        return cls(float(p.p), float(p.nu), bool(p.regularize_bias),
                   SGDParams.from_train_params(p))
