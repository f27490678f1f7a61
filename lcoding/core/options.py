"""The one option table of lcoding.

Every option string (``train``, ``predict``, the CLI, ``parameter``) is parsed
against :data:`TRAIN_OPTIONS` / :data:`PREDICT_OPTIONS`; the same tables render
the CLI usage text and ``docs/options.md``.  LIBLINEAR's letters keep their exact
meaning; lcoding's own letters collide with nothing in LIBLINEAR, nor with the
LIBSVM letters lcoding takes over (``-t -d -g -r``).  One exception to know: the
training ``-b`` is the budget of ``-C -L auto``, not LIBSVM ``svm-train``'s ``-b``
(probability estimates), which lcoding does not have.

Parsing errors raise :class:`OptionError` (a ``ValueError``) naming the option.
Parameter consistency (LIBLINEAR's ``check_parameter``) lives in
:func:`check_parameter`, shared by every interface.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from enum import IntEnum

__all__ = [
    "SolverType", "OptionError", "TrainParams", "PredictParams", "TRAIN_OPTIONS",
    "PREDICT_OPTIONS", "parse_train_options", "parse_predict_options",
    "check_parameter", "check_search_parameter", "options_string", "float_text",
    "default_eps", "train_usage", "predict_usage", "options_markdown",
    "SGD_SOLVERS", "JOINT_SOLVERS", "REGRESSION_SOLVERS", "PROBABILITY_SOLVERS",
    "CODING_AUTO", "AUTO_NR_FOLD",
]


class SolverType(IntEnum):
    """Solver numbers; 0-21 are LIBLINEAR's and keep its names."""
    L2R_LR = 0
    L2R_L2LOSS_SVC_DUAL = 1
    L2R_L2LOSS_SVC = 2
    L2R_L1LOSS_SVC_DUAL = 3
    MCSVM_CS = 4
    L1R_L2LOSS_SVC = 5
    L1R_LR = 6
    L2R_LR_DUAL = 7
    L2R_L2LOSS_SVR = 11
    L2R_L2LOSS_SVR_DUAL = 12
    L2R_L1LOSS_SVR_DUAL = 13
    ONECLASS_SVM = 21
    L2R_L1LOSS_SVC_SGD = 30
    LLC_JOINT_SGD = 31
    L2R_L1LOSS_SVC_SGD_AVERAGED = 32
    LLC_JOINT_SGD_AVERAGED = 33
    KQ_METRICS = 40
    KQ_FLATS = 41


SOLVER_DESCRIPTIONS = {
    0: "L2-regularized logistic regression (primal)",
    1: "L2-regularized L2-loss support vector classification (dual)",
    2: "L2-regularized L2-loss support vector classification (primal)",
    3: "L2-regularized L1-loss support vector classification (dual)",
    4: "support vector classification by Crammer and Singer",
    5: "L1-regularized L2-loss support vector classification",
    6: "L1-regularized logistic regression",
    7: "L2-regularized logistic regression (dual)",
    11: "L2-regularized L2-loss support vector regression (primal)",
    12: "L2-regularized L2-loss support vector regression (dual)",
    13: "L2-regularized L1-loss support vector regression (dual)",
    21: "one-class support vector machine (dual)",
    30: "L2-regularized L1-loss (hinge) support vector classification by SGD "
        "(SVMSGD2; the LL-SVM paper's Algorithm 1)",
    31: "joint SGD of local weights and anchors: -L 2 LLC-SAPL, -L 3 LLC-JO (k* coding)",
    32: "the -s 30 SGD with tail averaging: returns the mean of the iterates at the ends "
        "of the last half of the epochs",
    33: "the -s 31 joint SGD with tail averaging (W, b and the anchors) over the last half "
        "of the epochs",
    40: "discriminative k q-metrics (Szlam & Sapiro 2009)",
    41: "supervised k q-flats (k-subspaces per class, nearest subspace)",
}

REGRESSION_SOLVERS = frozenset({11, 12, 13})
PROBABILITY_SOLVERS = frozenset({0, 6, 7})
DUAL_SVC_SOLVERS = frozenset({1, 3})
# the hinge-loss SGD of lcoding/linear/sgd.py: last iterate (-s 30) or tail average (-s 32)
SGD_SOLVERS = frozenset({30, 32})
# joint SGD of weights and anchors: last iterate (-s 31) or tail average (-s 33)
JOINT_SOLVERS = frozenset({31, 33})


# ``-L auto`` (with ``-C``): lcoding.select chooses the method and its parameters.  The
# value params.coding holds for the word: no coding has a negative number, and
# ``coding != 0`` stays true, so every "is there a local coding" test sends auto to the
# -C branch of the interfaces, which route it to lcoding.select.
CODING_AUTO = -1
# folds of -C -L auto without -v: lcoding.select's default (LIBLINEAR's -C takes 5; the
# selector runs many candidates, and 3 folds keep their cost down)
AUTO_NR_FOLD = 3


class OptionError(ValueError):
    """A bad option string: unknown letter, missing or malformed value."""


class MissingOptionValue(OptionError, IndexError):
    """An option that takes a value came last.  Also an ``IndexError``, which is
    what LIBLINEAR's own parser raises here."""


def default_eps(solver_type: int) -> float:
    """LIBLINEAR's per-solver default stopping tolerance (``-e``)."""
    if solver_type in (0, 2, 5, 6, 21):
        return 0.01
    if solver_type == 11:
        return 0.0001
    return 0.1


@dataclass
class TrainParams:
    """Every training parameter; attribute names follow LIBLINEAR's ``parameter``."""
    solver_type: int = 1
    eps: float = math.inf          # inf = "not given": resolved by default_eps()
    C: float = 1.0
    p: float = 0.1
    nu: float = 0.5
    bias: float = -1.0
    regularize_bias: int = 1
    weight_label: list = field(default_factory=list)
    weight: list = field(default_factory=list)
    nr_fold: int = 0
    flag_cross_validation: bool = False
    flag_find_parameters: bool = False
    flag_C_specified: bool = False
    flag_p_specified: bool = False
    flag_solver_specified: bool = False
    quiet: bool = False
    seed: int = 1
    max_iter: int = 300            # LIBLINEAR's dual-solver outer-iteration cap
    init_sol: object = None
    w_recalc: bool = False
    # lcoding's local coding (design.md core options)
    coding: int = 0                # -L
    n_anchors: int = 100           # -A
    n_neighbors: int = 8           # -k
    coding_param: float = 1.0      # -u
    anchor_init: int = 0           # -a
    n_threads: int = 1             # -m
    budget_s: float = 60.0         # -b  seconds of -C -L auto (lcoding.select)
    # LL-SVM extras (issue 4)
    epochs: int = 10               # -E  SGD passes (-s 30, 32)
    t0: float = 0.0                # -T  SGD schedule offset (0: automatic)
    skip: int = 16                 # -P  SGD regularisation period
    kmeans_iter: int = 20          # -I  k-means iterations (mini-batch steps with -M)
    kmeans_batch: int = 0          # -M  mini-batch size for k-means (0: full Lloyd)
    kernel_map: int = 0            # -K  additive kernel map before the local model / k q-metrics
    kernel_map_order: int = 1      # -O  terms of the homogeneous kernel map
    # k q-metrics (issue 7, lcoding/kq_metrics.py); -k = clusters per class, -E = passes
    kq_dim: int = 20               # -Q  rows q of every metric F_ij
    # -U  -s 40: own-class margin mu1 (not given: KQ_MU1); -s 41: the screen's margin
    # (not given: no screen)
    kq_mu1: float = math.inf
    kq_mu2: float = 0.95           # -V  other-class margin mu2
    kq_dt: float = 0.1             # -D  time step
    kq_alpha1: float = 2.0         # -i  weight of the own-class term
    kq_alpha2: float = 1.0         # -o  weight of the other-class term
    kq_update: int = 0             # -G  0 printed rule, 1 exact gradient, 2 alpha-weighted
    kq_pass: int = 2               # -F  0 stochastic, 1 / 2 semi-stochastic
    kq_pca: int = 0                # -l  PCA dimensions (0: none)
    kq_sphere: int = 1             # -Z  project onto the unit sphere
    kq_restarts: int = 1           # -W  restarts in one model (vote or mean)
    kq_affine: int = 0             # -y  -s 41: affine flats (the paper's eq. 1) instead of subspaces
    kq_select: int = 0             # -x  choose (k, q, mu) on the last 20 % of the training rows
    kq_offset: float = 0.0         # -z  constant coordinate appended to every point (0: none)
    # LLC-SAPL / LLC-JO (issue 6, lcoding/llc_jo.py)
    anchor_lr: float = 100.0       # -f  -s 31 anchor learning rate anchor_lr / (t + t0)
    anchor_grad: int = 0           # -j  -s 31 -L 3 anchor gradient: 0 exact, 1 seed, 2 code
    # kernels and invariances (issue 8, lcoding/invariant.py)
    kernel_type: int = -1          # -t  LIBSVM kernel; -1 (not given): no kernel
    degree: int = 3                # -d  LIBSVM polynomial degree
    kernel_gamma: float = 0.0      # -g  LIBSVM gamma; 0: 1/nr_feature (LIBSVM's default)
    coef0: float = 0.0             # -r  LIBSVM coef0
    invariance: int = 0            # -H  0 kPCA map, 1 IHKPCA, 2 ISVM, 3 VSV, 4 IHKPCA + virtual
    tangents: int = 0              # -J  image translations used as tangent vectors
    image_width: int = 0           # -N  image width in pixels (0: square images)
    invariance_gamma: float = 0.0  # -Y  gamma of C_gamma = (1-gamma) I + gamma sum dx dx^T
    n_landmarks: int = 3000        # -X  landmarks of the kernel PCA map
    # the option letters given, in order (the router reports those the method ignores)
    given: list = field(default_factory=list)

    @property
    def nr_weight(self) -> int:
        return len(self.weight_label)

    def replaced(self, **changes) -> "TrainParams":
        """A copy with some fields changed.  A shallow copy, not
        ``dataclasses.replace``: it keeps subclasses such as liblinearutil's
        ``parameter``, whose constructor takes an option string, not fields."""
        out = copy.copy(self)
        out.weight_label = list(self.weight_label)
        out.weight = list(self.weight)
        out.given = list(self.given)
        for name, value in changes.items():
            if not hasattr(out, name):
                raise AttributeError(f"TrainParams has no field {name!r}")
            setattr(out, name, value)
        return out

    def resolved_eps(self) -> float:
        return default_eps(self.solver_type) if math.isinf(self.eps) else self.eps


@dataclass
class PredictParams:
    probability: int = 0
    quiet: bool = False


@dataclass(frozen=True)
class Domain:
    """The values an option may take: ``choices``, or a range ``[lo, hi]`` whose ends
    are open with ``lo_open`` / ``hi_open`` (``None``: unbounded).  Numbers are
    always finite (NaN is refused by the parser).  ``words``: ``(word, value)`` pairs,
    a word the parser takes in place of a number and the sentinel value it stores
    (``-L auto``); the number itself is refused, so only the word gives the value."""
    choices: tuple = ()
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    words: tuple = ()

    def word_value(self, text: str):
        """The value of the word ``text``, or None when it is not one of the words."""
        return dict(self.words).get(text)

    def word_of(self, value):
        """The word whose value is ``value``, or None."""
        return next((w for w, v in self.words if v == value), None)

    def contains(self, value) -> bool:
        if self.word_of(value) is not None:
            return True
        if self.choices:
            return value in self.choices
        if not math.isfinite(value):
            return False
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        if self.hi is not None and (value >= self.hi if self.hi_open else value > self.hi):
            return False
        return True

    def __str__(self) -> str:
        if self.choices:
            return "one of " + ", ".join([str(c) for c in self.choices]
                                         + [w for w, _ in self.words])
        if self.lo is not None and self.hi is not None:
            return (f"in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}"
                    f"{')' if self.hi_open else ']'}")
        if self.lo is not None:
            return f"{'>' if self.lo_open else '>='} {self.lo:g}"
        if self.hi is not None:
            return f"{'<' if self.hi_open else '<='} {self.hi:g}"
        return "finite"


def _choices(*values) -> Domain:
    return Domain(choices=tuple(values))


def _at_least(lo, open_=False) -> Domain:
    return Domain(lo=lo, lo_open=open_)


_FINITE = Domain()

# Option groups, in the order --help prints them: (group, heading)
OPTION_GROUPS = (
    ("common", "common to every method"),
    ("linear", "for LIBLINEAR's solvers (-s 0-21)"),
    ("local", "for the local codings: LL-SVM (-L 1, 2, 6), anchor planes (-L 4, 5), "
              "LLC-JO / LLC-SAPL (-s 31, 33 with -L 3, 2)"),
    ("sgd", "for the SGD solvers (-s 30-33)"),
    ("kq", "for discriminative k q-metrics / k q-flats (-s 40, 41)"),
    ("kernel", "for the kernel PCA map and invariant SVMs (-t, -H, -J)"),
)


@dataclass(frozen=True)
class Option:
    """One row of the option table.

    ``kind`` is ``int``, ``float`` or ``None`` (a flag without value).  ``group`` is
    the method group of :data:`OPTION_GROUPS` the option belongs to; ``domain`` the
    values it may take (``None``: LIBLINEAR's own option, checked as LIBLINEAR's
    ``check_parameter`` does).  ``unset`` is a sentinel default meaning "not
    given" that the domain check lets through (e.g. ``-t``'s -1).
    """
    flag: str
    attr: str
    kind: object
    default: str
    help: str
    origin: str = "LIBLINEAR"      # LIBLINEAR | LIBSVM | lcoding
    metavar: str = ""
    group: str = "common"
    domain: Domain | None = None
    unset: object = None


def _solver_help() -> str:
    return "set type of solver"


TRAIN_OPTIONS = (
    Option("-s", "solver_type", int, "1", _solver_help(), metavar="type"),
    Option("-c", "C", float, "1", "set the parameter C", metavar="cost"),
    Option("-p", "p", float, "0.1", "set the epsilon in loss function of SVR", metavar="epsilon", group="linear"),
    Option("-n", "nu", float, "0.5", "set the parameter nu of one-class SVM", metavar="nu", group="linear"),
    Option("-e", "eps", float, "per solver",
           "set tolerance of termination criterion (-s 0, 2: 0.01; -s 11: 0.0001; "
           "-s 1, 3, 4, 7: 0.1; -s 5, 6: 0.01; -s 12, 13: 0.1; -s 21: 0.01)", metavar="epsilon"),
    Option("-B", "bias", float, "-1",
           "if bias >= 0, instance x becomes [x; bias]; if < 0, no bias term added", metavar="bias"),
    Option("-R", "regularize_bias", None, "off",
           "do not regularize the bias; must come with -B 1 (for -s 0, 2, 5, 6, 11)", group="linear"),
    Option("-wi", "weight", float, "1",
           "weight: multiply the parameter C of class i by weight", metavar="weight"),
    Option("-v", "nr_fold", int, "off", "n-fold cross validation mode", metavar="n"),
    Option("-C", "flag_find_parameters", None, "off",
           "find parameters (C for -s 0, 2 and C, p for -s 11; with a local coding -L: C, "
           "the coding's -u and the anchors -A; with a kernel -t: C and -g of the kernel "
           "PCA map; warm-started along C with -s 1, 2, 3, a coarser grid trained cold "
           "with the other solvers and LLC-JO; with -s 40, 41: -k and -Q; with -L auto: "
           "the method too; see docs/search.md)"),
    Option("-b", "budget_s", float, "60",
           "time budget in seconds of -C -L auto (automatic method selection)",
           origin="lcoding", metavar="seconds", domain=_at_least(0, open_=True)),
    Option("-q", "quiet", None, "off", "quiet mode (no outputs)"),
    Option("-S", "seed", int, "1",
           "random seed for sample order, cross-validation folds and anchors; the same "
           "seed gives the same model bit for bit", origin="lcoding", metavar="seed", domain=_FINITE),
    Option("-L", "coding", int, "0",
           "local coding: 0 none (plain linear model), 1 kNN inverse distance (LL-SVM), "
           "2 kNN Gaussian soft assignment (LLC-SAPL), 3 k* optimal (LLC-JO), 4 G-OCC planes, "
           "5 C-OCC planes, 6 LLC reconstruction; codings 1, 2, 6 train with -s 1, 3 "
           "(one-vs-rest dual CD), 4 (Crammer-Singer dual CD) or 30, 32 (SGD); auto (with -C "
           "only): choose the method and its parameters by cross-validation within the -b "
           "budget (lcoding.select)",
           origin="lcoding", metavar="coding", group="local",
           domain=Domain(choices=(0, 1, 2, 3, 4, 5, 6), words=(("auto", CODING_AUTO),))),
    Option("-A", "n_anchors", int, "100", "number of anchor points (planes for -L 4, 5)",
           origin="lcoding", metavar="n", group="local", domain=_at_least(1)),
    Option("-k", "n_neighbors", int, "8", "nearest anchors used by codings 1, 2, 6; "
           "clusters per class for -s 40, 41",
           origin="lcoding", metavar="n", group="local", domain=_at_least(1)),
    Option("-u", "coding_param", float, "1",
           "coding parameter: -L 1 power p of gamma ~ 1/d^p (d = squared distance; 0.5 = "
           "inverse Euclidean distance), -L 2 beta, -L 3 mu, -L 6 ridge of the LLC solve in "
           "units of 1e-4 trace(C); -L 4, 5: 1 locally linear on gamma (x) x (LIB-/PEG-LLSVM), "
           "0 linear SVM on the codes, 2 (-L 5) linear SVM on all classes' codes, 3 (-s 1, 3) "
           "as 1 with a bias per plane too.  Left out with -L 2, 3 (not with -C): from the "
           "rows, 2 / the median mean squared distance of sampled rows to their -k nearest "
           "anchors (the estimators' beta='scale'; the model file records the value)",
           origin="lcoding", metavar="value", group="local", domain=_FINITE),
    Option("-a", "anchor_init", int, "0",
           "anchor initialisation: 0 k-means (k-means++ seeding), 1 random training samples, "
           "2 k-means per class, 3 random samples per class, 4 k-means seeded by random samples",
           origin="lcoding", metavar="mode", group="local", domain=_choices(0, 1, 2, 3, 4)),
    Option("-m", "n_threads", int, "1",
           "number of threads (one-vs-rest classes, k-means, coding; one binary problem: "
           "row partitions for -s 1, 3, split products for -s 2)",
           origin="lcoding", metavar="threads", domain=_at_least(1)),
    Option("-E", "epochs", int, "10", "passes over the data for -s 30-33, 40", origin="lcoding",
           metavar="epochs", group="sgd", domain=_at_least(0)),
    Option("-T", "t0", float, "0",
           "-s 30-33 learning rate 1/(lambda (t + t0)), lambda = 1/(C l); 0: automatic, "
           "t0 = 1/(lambda eta0) with the first step eta0 calibrated on a 1000-row "
           "subsample (Bottou's SvmSgd: doubled or halved from 1 while one epoch's "
           "objective falls)", origin="lcoding", metavar="t0", group="sgd", domain=_at_least(0)),
    Option("-P", "skip", int, "16", "-s 30-33 apply the regularisation every skip steps",
           origin="lcoding", metavar="skip", group="sgd", domain=_at_least(1)),
    Option("-f", "anchor_lr", float, "100", "-s 31, 33 anchor learning rate f / (t + t0) "
           "(0 freezes the anchors)", origin="lcoding", metavar="rate", group="sgd", domain=_at_least(0)),
    Option("-j", "anchor_grad", int, "0", "-s 31, 33 -L 3 anchor gradient: 0 exact (lambda "
           "depends on eta), 1 fixed lambda (the LLC-JO paper's code), 2 reference code (extra factor w_i)",
           origin="lcoding", metavar="variant", group="sgd", domain=_choices(0, 1, 2)),
    Option("-I", "kmeans_iter", int, "20",
           "k-means iterations for the anchors (mini-batch steps with -M)", origin="lcoding",
           metavar="n", group="local", domain=_at_least(0)),
    Option("-M", "kmeans_batch", int, "0", "mini-batch k-means with this batch size (0: Lloyd)",
           origin="lcoding", metavar="size", group="local", domain=_at_least(0)),
    Option("-K", "kernel_map", int, "0",
           "additive kernel map before the local model (locally additive SVM; -L 1, 2, 6 "
           "and -s 31, 33 -L 2, 3; before the SVD of the OCC planes -L 4, 5) or before the PCA "
           "of -s 40, 41: "
           "0 none, 1 intersection, 2 chi-squared, 3 Hellinger",
           origin="lcoding", metavar="kernel", group="local", domain=_choices(0, 1, 2, 3)),
    Option("-O", "kernel_map_order", int, "1",
           "order n of the homogeneous kernel map (2n+1 features per input feature)",
           origin="lcoding", metavar="n", group="local", domain=Domain(lo=0, hi=100)),
    Option("-t", "kernel_type", int, "none",
           "LIBSVM kernel, mapped by kernel PCA (or used by -H 2, 3): 0 linear u'v, "
           "1 polynomial (gamma u'v + coef0)^degree, 2 radial basis exp(-gamma |u-v|^2), "
           "3 sigmoid tanh(gamma u'v + coef0); not given: no kernel (LIBLINEAR)",
           origin="LIBSVM", metavar="kernel_type", group="kernel", domain=_choices(0, 1, 2, 3), unset=-1),
    Option("-d", "degree", int, "3", "set degree in kernel function", origin="LIBSVM",
           metavar="degree", group="kernel", domain=_at_least(0)),
    Option("-g", "kernel_gamma", float, "1/num_features", "set gamma in kernel function",
           origin="LIBSVM", metavar="gamma", group="kernel", domain=Domain(lo=0, hi=1e100)),
    Option("-r", "coef0", float, "0", "set coef0 in kernel function", origin="LIBSVM",
           metavar="coef0", group="kernel", domain=Domain(lo=-1e100, hi=1e100)),
    Option("-H", "invariance", int, "0",
           "kernel machine: 0 kernel PCA map + the -s solver, 1 IHKPCA (invariant hyperplane "
           "in kernel PCA coordinates; without -t: invariant linear SVM), 2 ISVM (kernel SVM "
           "with the tangent kernel, SMO; -Y 0: plain kernel SVM), 3 VSV (kernel SVM on the "
           "training set plus its translated copies), 4 IHKPCA with the map on the landmarks "
           "plus their transformed copies (spans the tangents)", origin="lcoding",
           metavar="method", group="kernel", domain=_choices(0, 1, 2, 3, 4)),
    Option("-J", "tangents", int, "0",
           "tangent vectors from 1-pixel image translations (finite differences, vacated "
           "pixels = 0): 0 none, 1 horizontal (right), 2 vertical (up), 3 both",
           origin="lcoding", metavar="kind", group="kernel", domain=_choices(0, 1, 2, 3)),
    Option("-N", "image_width", int, "0",
           "image width for -J (pixels row by row); 0: square images", origin="lcoding",
           metavar="width", group="kernel", domain=_at_least(0)),
    Option("-Y", "invariance_gamma", float, "0",
           "invariance weight gamma in [0, 1) for -H 1, 2, 4: 0 plain SVM, towards 1 invariant",
           origin="lcoding", metavar="gamma", group="kernel", domain=Domain(lo=0, hi=1, hi_open=True)),
    Option("-X", "n_landmarks", int, "3000",
           "landmarks of the kernel PCA map (-H 0, 1, 4): random training points; all of them "
           "when there are fewer; with a linear, RBF or polynomial (coef0 >= 0) kernel, only "
           "the pivots their Gram matrix's span needs are kept (the others lie within 1e-8 "
           "of its largest eigenvalue)", origin="lcoding", metavar="n", group="kernel", domain=_at_least(1)),
    Option("-Q", "kq_dim", int, "20", "-s 40, 41: dimension q of every metric / subspace",
           origin="lcoding", metavar="q", group="kq", domain=_at_least(1)),
    Option("-U", "kq_mu1", float, "1.05 (-s 40), none (-s 41)",
           "-s 40: own-class margin mu1 (> mu2); -s 41 -y 1: the screen's margin (> 0): "
           "one restart of smaller flats (half the flats, a third of the directions) "
           "labels the rows whose class leads the second by at least this, the restarts "
           "the others (-C -L auto chooses it on its folds; see docs/kq_metrics.md)",
           origin="lcoding", metavar="mu1", group="kq", domain=_FINITE, unset=math.inf),
    Option("-V", "kq_mu2", float, "0.95", "-s 40: other-class margin mu2",
           origin="lcoding", metavar="mu2", group="kq", domain=_FINITE),
    Option("-D", "kq_dt", float, "0.1", "-s 40: time step dt", origin="lcoding", metavar="dt", group="kq", domain=_at_least(0, open_=True)),
    Option("-i", "kq_alpha1", float, "2", "-s 40: weight alpha1 of the own-class term (-G 1, 2)",
           origin="lcoding", metavar="alpha1", group="kq", domain=_at_least(0)),
    Option("-o", "kq_alpha2", float, "1", "-s 40: weight alpha2 of the other-class term (-G 1, 2)",
           origin="lcoding", metavar="alpha2", group="kq", domain=_at_least(0)),
    Option("-G", "kq_update", int, "0",
           "-s 40 step F += s (mu - z) F x x': 0 as printed in the paper (s = dt), 1 exact "
           "gradient (s = 4 alpha dt), 2 alpha-weighted (s = alpha dt)", origin="lcoding",
           metavar="rule", group="kq", domain=_choices(0, 1, 2)),
    Option("-F", "kq_pass", int, "2",
           "-s 40 pass: 0 stochastic (all norms per point), 1 semi-stochastic (pass-start "
           "violators, current norms), 2 semi-stochastic (pass-start violators and "
           "assignments)", origin="lcoding", metavar="type", group="kq", domain=_choices(0, 1, 2)),
    Option("-l", "kq_pca", int, "0", "-s 40, 41: PCA to p dimensions before the metrics (0: none)",
           origin="lcoding", metavar="p", group="kq", domain=_at_least(0)),
    Option("-Z", "kq_sphere", int, "1", "-s 40, 41: project points onto the unit sphere (0/1)",
           origin="lcoding", metavar="0/1", group="kq", domain=_choices(0, 1)),
    Option("-W", "kq_restarts", int, "1",
           "-s 40, 41: independent restarts in one model; affine flats (-y 1) predict by "
           "their mean distance to each class, the others by majority vote",
           origin="lcoding", metavar="r", group="kq", domain=_at_least(1)),
    Option("-y", "kq_affine", int, "0",
           "-s 41: 1 affine flats (centre + q directions, nearest flat; the paper's k q-flats), "
           "0 subspaces through the origin", origin="lcoding", metavar="0/1", group="kq", domain=_choices(0, 1)),
    Option("-x", "kq_select", int, "0",
           "-s 40, 41: 1 first choose (k, q, mu1, mu2) (-s 41: k, q, -y) on the last 20 % of "
           "the training rows over the paper's grid, then train on all rows", origin="lcoding",
           metavar="0/1", group="kq", domain=_choices(0, 1)),
    Option("-z", "kq_offset", float, "0",
           "-s 40, 41: append the constant coordinate b to every point after the PCA and the "
           "unit sphere, then project back onto the sphere (0: none)", origin="lcoding",
           metavar="b", group="kq", domain=_at_least(0)),
)

PREDICT_OPTIONS = (
    Option("-b", "probability", int, "0",
           "whether to output probability estimates, 0 or 1; for logistic regression only",
           metavar="probability_estimates"),
    Option("-q", "quiet", None, "off", "quiet mode (no outputs)"),
)

_TRAIN_BY_FLAG = {opt.flag: opt for opt in TRAIN_OPTIONS}
_PREDICT_BY_FLAG = {opt.flag: opt for opt in PREDICT_OPTIONS}


def _tokens(options) -> list:
    if options is None:
        return []
    if isinstance(options, str):
        return options.split()
    if isinstance(options, (list, tuple)):
        out = []
        for tok in options:
            if not isinstance(tok, str):
                raise TypeError("arg 1 should be a list or a str.")
            out.append(tok)
        return out
    raise TypeError("arg 1 should be a list or a str.")


def _convert(opt_name: str, kind, text: str):
    try:
        if kind is int:
            return int(text)
        value = float(text)
    except ValueError:
        raise OptionError(
            f"option {opt_name}: {text!r} is not a valid "
            f"{'integer' if kind is int else 'number'}") from None
    if math.isnan(value):
        raise OptionError(f"option {opt_name}: value must not be NaN")
    return value


def _value(argv, i, flag):
    if i + 1 >= len(argv):
        raise MissingOptionValue(f"option {flag} needs a value")
    return argv[i + 1]


def parse_train_options(options, params: TrainParams | None = None) -> TrainParams:
    """Parse a LIBLINEAR-style training option string (or token list).

    Mirrors LIBLINEAR's ``parameter.parse_options``: defaults first, tokens left
    to right, ``-C`` implies ``-s 2`` and 5 folds when unspecified, ``eps``
    resolved per solver when ``-e`` is absent.
    """
    argv = _tokens(options)
    p = TrainParams() if params is None else params
    i = 0
    while i < len(argv):
        tok = argv[i]
        # -w<label>: "-wi" is the option table's name for the family, not an option
        # (a literal "-wi" has the label "i", which is not an integer)
        if tok.startswith("-w"):
            label_text = tok[2:]
            try:
                label = int(label_text)
            except ValueError:
                raise OptionError(
                    f"option {tok}: class label {label_text!r} after -w is not an integer") from None
            p.weight_label.append(label)
            p.weight.append(_convert(tok, float, _value(argv, i, tok)))
            p.given.append("-wi")
            i += 2
            continue
        opt = _TRAIN_BY_FLAG.get(tok)
        if opt is None:
            raise OptionError(f"Wrong options: unknown option {tok!r}")
        p.given.append(tok)
        if opt.kind is None:
            if tok == "-R":
                p.regularize_bias = 0
            elif tok == "-C":
                p.flag_find_parameters = True
            elif tok == "-q":
                p.quiet = True
            i += 1
            continue
        text = _value(argv, i, tok)
        value = opt.domain.word_value(text) if opt.domain is not None else None
        if value is None:
            value = _convert(tok, opt.kind, text)
            if opt.domain is not None and opt.domain.word_of(value) is not None:
                # the sentinel's number (-L -1) is not the word: only "auto" means auto
                raise _domain_error(opt, value)
            if opt.domain is not None and opt.kind is float and not math.isfinite(value):
                # numbers are finite (-U's "not given" sentinel is inf: typed, refused)
                raise _domain_error(opt, value)
        if tok == "-s":
            try:
                value = int(SolverType(value))
            except ValueError:
                raise OptionError(
                    f"option -s: {value} is not a valid solver type "
                    f"(valid: {', '.join(str(int(s)) for s in SolverType)})") from None
            p.flag_solver_specified = True
        elif tok == "-c":
            p.flag_C_specified = True
        elif tok == "-p":
            p.flag_p_specified = True
        elif tok == "-v":
            p.flag_cross_validation = True
            if value < 2:
                raise OptionError("n-fold cross validation: n must >= 2 (option -v)")
        setattr(p, opt.attr, value)
        i += 2
    if p.flag_find_parameters:
        if not p.flag_cross_validation:
            p.nr_fold = AUTO_NR_FOLD if p.coding == CODING_AUTO else 5
        if searches_locally(p):
            # a local coding, a kernel PCA map (-t) or the k q-metrics: the searches
            # of lcoding.methods.local_search (-s 1, 2, 3) and grid_search (the
            # others), which check_parameter checks
            pass
        elif not p.flag_solver_specified:
            p.solver_type = int(SolverType.L2R_L2LOSS_SVC)
            p.flag_solver_specified = True
        elif p.solver_type not in (0, 2, 11):
            raise OptionError(
                "Warm-start parameter search only available for -s 0, -s 2 and -s 11 (option -C)")
    if math.isinf(p.eps):
        p.eps = default_eps(p.solver_type)
    check_domains(p)
    return p


def parse_predict_options(options) -> PredictParams:
    argv = _tokens(options)
    p = PredictParams()
    i = 0
    while i < len(argv):
        tok = argv[i]
        opt = _PREDICT_BY_FLAG.get(tok)
        if opt is None:
            raise OptionError(f"Wrong options: unknown predict option {tok!r}")
        if opt.kind is None:
            p.quiet = True
            i += 1
            continue
        value = _convert(tok, int, _value(argv, i, tok))
        if value not in (0, 1):
            raise OptionError(f"option -b: probability estimates must be 0 or 1, got {value}")
        p.probability = value
        i += 2
    return p


def check_domains(params) -> None:
    """Every option value against its domain, whatever the method (an option the
    chosen method does not read must still be a possible value of that option)."""
    for opt in TRAIN_OPTIONS:
        if opt.domain is None:
            continue
        value = getattr(params, opt.attr)
        if opt.unset is not None and value == opt.unset:
            continue
        if not opt.domain.contains(value):
            raise _domain_error(opt, value)


def _domain_error(opt: Option, value) -> OptionError:
    shown = f"{value:g}" if isinstance(value, float) else str(value)
    return OptionError(f"option {opt.flag} {shown}: must be {opt.domain}")


def check_parameter(params: TrainParams, bias: float | None = None) -> None:
    """LIBLINEAR's ``check_parameter`` as exceptions (message names the option),
    and every lcoding option against its domain."""
    check_domains(params)
    bias = params.bias if bias is None else bias
    if not (math.isfinite(bias) and abs(bias) <= 1e100):
        # LIBLINEAR takes any -B; inf/nan give inf/nan decision values, and a model
        # holding a bias beyond 1e100 would not load (lcoding.core.model.VALUE_LIMIT)
        raise ValueError(f"Error: bias {bias!r} must be finite and at most 1e+100 in "
                         f"magnitude (option -B)")
    if not params.eps > 0:
        raise ValueError("Error: eps <= 0 (option -e)")
    if not params.C > 0:
        raise ValueError("Error: C <= 0 (option -c)")
    if math.isinf(params.C):
        raise ValueError("Error: C must be finite (option -c)")
    if params.p < 0 and params.solver_type == SolverType.L2R_L2LOSS_SVR:
        raise ValueError("Error: p < 0 (option -p)")
    if params.solver_type == SolverType.ONECLASS_SVM:
        if bias >= 0:
            raise ValueError("Error: prob->bias >=0, but this is ignored in ONECLASS_SVM (option -B)")
        if not 0 < params.nu <= 1:
            raise ValueError("Error: nu must be in (0, 1] (option -n)")
    if params.regularize_bias == 0:
        if bias != 1.0:
            raise ValueError("Error: To not regularize bias, must specify -B 1 along with -R")
        if params.solver_type not in (0, 2, 5, 6, 11):
            raise ValueError(
                "Error: -R option supported only for solver L2R_LR, L2R_L2LOSS_SVC, "
                "L1R_L2LOSS_SVC, L1R_LR, and L2R_L2LOSS_SVR")
    for label, weight in zip(params.weight_label, params.weight):
        if not (weight >= 0 and math.isfinite(weight)):
            raise ValueError(f"Error: weight of class {label} must be finite and >= 0 (option -w{label})")
    if params.coding == CODING_AUTO and not params.flag_find_parameters:
        # "auto" is no coding a model could be trained with: only the search picks one
        raise ValueError("-L auto selects a method by cross-validation: it needs -C "
                         "(options -L, -C)")
    if "-b" in params.given and params.coding != CODING_AUTO:
        # a budget nothing reads would look like it bounded the training time
        raise ValueError("-b is the time budget of automatic method selection: it only "
                         "applies to -C -L auto (option -b)")
    if params.flag_find_parameters:
        check_search_parameter(params)


# -s 40, 41: the k q-metrics / k q-flats, searched by -C without a local coding
KQ_SOLVER_TYPES = (int(SolverType.KQ_METRICS), int(SolverType.KQ_FLATS))


def searches_locally(params) -> bool:
    """Whether ``-C`` runs a search of the local methods (a local coding ``-L``,
    ``-L auto``, a kernel PCA map ``-t`` or the k q-metrics ``-s 40, 41``:
    :mod:`lcoding.methods.local_search`, :mod:`lcoding.methods.grid_search`) rather
    than LIBLINEAR's."""
    return (params.coding != 0 or params.kernel_type >= 0
            or int(params.solver_type) in KQ_SOLVER_TYPES)


def check_search_parameter(params) -> None:
    """What ``-C`` can search: LIBLINEAR's -s 0, 2, 11 (linear); a local coding
    ``-L 1, 2, 3, 6`` (LL-SVM) / ``-L 4, 5`` (anchor planes) or the kernel PCA map
    (``-t``, ``-H 0``) with any solver the method trains (``-s 1, 2, 3``: warm-started
    C paths, :mod:`lcoding.methods.local_search`; the others, LLC-JO ``-s 31, 33``
    and the k q-metrics ``-s 40, 41``: a grid trained cold,
    :mod:`lcoding.methods.grid_search`).  The method's own checks run in the search.
    A ValueError names the option that cannot be searched.  ``-L auto`` searches
    anything: the selector chooses the method, and the interfaces name the method
    options it ignores."""
    if params.coding == CODING_AUTO:
        return
    if params.invariance or params.tangents:
        raise ValueError("-C: the parameter search cannot be combined with an invariance "
                         "method (-H 1 to 4, -J); it searches the plain kernel PCA map "
                         "(-t with -H 0)")
    if params.kernel_type >= 0:
        if params.coding or params.kernel_map:
            raise ValueError("-C with -t: the kernel PCA map's search takes no local "
                             "coding (-L) or additive kernel map (-K)")
        st = int(params.solver_type)
        if st in REGRESSION_SOLVERS or st == int(SolverType.ONECLASS_SVM):
            raise ValueError(f"-C with -t: the kernel PCA map's search scores classifiers "
                             f"by their cross-validation accuracy; -s {st} is a "
                             f"{'regression' if st in REGRESSION_SOLVERS else 'one-class'} "
                             f"solver (option -s)")
        return
    if params.coding == 0 and int(params.solver_type) not in KQ_SOLVER_TYPES:
        if params.kernel_map:
            raise ValueError("-C: a kernel map (-K) needs a local coding (-L) to be searched; "
                             "the linear search runs LIBLINEAR's -s 0, 2, 11 on the raw rows")
        if params.solver_type not in (0, 2, 11):
            raise ValueError("Warm-start parameter search only available for -s 0, -s 2 and "
                             "-s 11 (option -C)")
        return
    if params.coding in (4, 5) and params.coding_param not in (0.0, 1.0, 2.0, 3.0):
        raise ValueError(f"-C with -L {params.coding}: -u {params.coding_param:g} is not a "
                         f"classifier of the anchor planes (option -u)")


def options_string(params, drop=()) -> str:
    """The option string of the options given in ``params`` (``params.given``, in the
    order given, each once, with its current value), leaving out the flags in
    ``drop``.  Floats are written so that they parse back to the same value."""
    out = []
    for flag in dict.fromkeys(params.given):
        if flag in drop:
            continue
        if flag == "-wi":
            for label, weight in zip(params.weight_label, params.weight):
                out.append(f"-w{label} {float_text(weight)}")
            continue
        opt = _TRAIN_BY_FLAG[flag]
        if opt.kind is None:
            out.append(flag)
            continue
        value = getattr(params, opt.attr)
        word = opt.domain.word_of(value) if opt.domain is not None else None
        if word is not None:         # -L auto: the number would not parse back
            out.append(f"{flag} {word}")
            continue
        out.append(f"{flag} {int(value)}" if opt.kind is int else f"{flag} {float_text(value)}")
    return " ".join(out)


def float_text(value: float) -> str:
    """The shortest text that parses back to ``value`` (``1`` for 1.0)."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def _option_line(opt: Option) -> str:
    head = f"{opt.flag} {opt.metavar}".rstrip()
    return (f"{head} : {opt.help} (default {opt.default})"
            + ("" if opt.origin == "LIBLINEAR" else f" [{opt.origin}]"))


def _solver_lines() -> list:
    lines = ["  for multi-class classification"]
    lines += [f"\t{k:2d} -- {SOLVER_DESCRIPTIONS[k]}" for k in (0, 1, 2, 3, 4, 5, 6, 7)]
    lines.append("  for regression")
    lines += [f"\t{k:2d} -- {SOLVER_DESCRIPTIONS[k]}" for k in (11, 12, 13)]
    lines.append("  for outlier detection")
    lines.append(f"\t21 -- {SOLVER_DESCRIPTIONS[21]}")
    lines.append("  for classification by SGD (linear, or locally linear with -L)")
    lines += [f"\t{k} -- {SOLVER_DESCRIPTIONS[k]}" for k in (30, 31, 32, 33)]
    lines.append("  for multi-class classification by class-wise metrics")
    lines += [f"\t{k} -- {SOLVER_DESCRIPTIONS[k]}" for k in (40, 41)]
    return lines


def _usage(prog_line: str, options, grouped: bool = False) -> str:
    """The usage text; ``grouped``: one section per option group (the method the
    options belong to), in :data:`OPTION_GROUPS` order."""
    lines = [prog_line]
    sections = OPTION_GROUPS if grouped else (("", ""),)
    for group, heading in sections:
        lines.append(f"options {heading}:" if heading else "options:")
        for opt in options:
            if grouped and opt.group != group:
                continue
            lines.append(_option_line(opt))
            if opt.flag == "-s":
                lines += _solver_lines()
    return "\n".join(lines) + "\n"


def train_usage() -> str:
    return _usage("Usage: lcoding-train [options] training_set_file [model_file]", TRAIN_OPTIONS,
                  grouped=True)


def predict_usage() -> str:
    return _usage("Usage: lcoding-predict [options] test_file model_file output_file", PREDICT_OPTIONS)


def options_markdown() -> str:
    """``docs/options.md``, generated from the tables above."""
    out = ["# Options", "",
           "Generated from `lcoding/core/options.py` by "
           "`python -m lcoding.core.options > docs/options.md`; do not edit by hand.", "",
           "Every value given is checked against its domain, whatever the method; an",
           "option the chosen method does not read is accepted (LIBLINEAR's rule), and the",
           "training output (without `-q`) names the lcoding options it ignored.",
           "LIBLINEAR's own options are checked as LIBLINEAR checks them.", "",
           "## Training (`train`, `lcoding-train`, `parameter`)"]
    for group, heading in OPTION_GROUPS:
        out += ["", f"### Options {heading}", "",
                "| option | meaning | default | domain | origin |",
                "| --- | --- | --- | --- | --- |"]
        for opt in TRAIN_OPTIONS:
            if opt.group != group:
                continue
            flag = f"`{opt.flag} {opt.metavar}`" if opt.metavar else f"`{opt.flag}`"
            domain = "LIBLINEAR's checks" if opt.domain is None else str(opt.domain)
            out.append(f"| {flag} | {opt.help} | {opt.default} | {domain} | {opt.origin} |")
    out += ["", "### Solvers (`-s`)", "", "| -s | solver | default -e |", "| --- | --- | --- |"]
    for st in SolverType:
        out.append(f"| {int(st)} | {st.name}: {SOLVER_DESCRIPTIONS[int(st)]} | "
                   f"{default_eps(int(st)):g} |")
    out += ["", "## Prediction (`predict`, `lcoding-predict`)", "",
            "| option | meaning | default |", "| --- | --- | --- |"]
    for opt in PREDICT_OPTIONS:
        flag = f"`{opt.flag} {opt.metavar}`" if opt.metavar else f"`{opt.flag}`"
        out.append(f"| {flag} | {opt.help} | {opt.default} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(options_markdown(), end="")
