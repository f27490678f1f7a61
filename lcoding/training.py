"""The training router: one METHODS table, one function that picks the method
from the options, LIBLINEAR's ``train`` / ``cross_validation`` on validated rows.

A method is chosen by the options, in this order (the first that applies):

==========  ============================================  ==========================
method      chosen by                                     module
==========  ============================================  ==========================
invariant   ``-t``, ``-H`` or ``-J`` given                :mod:`lcoding.methods.invariant`
kq          ``-s 40`` / ``-s 41``                         :mod:`lcoding.methods.kq`
occ         ``-L 4`` / ``-L 5`` (anchor planes)           :mod:`lcoding.methods.occ`
llc_jo      ``-s 31`` / ``-s 33`` (joint SGD)             :mod:`lcoding.methods.llc_jo`
llsvm       ``-L 1, 2, 3, 6`` (a local coding)            :mod:`lcoding.methods.llsvm`
linear      otherwise (every LIBLINEAR solver)            :mod:`lcoding.methods.linear`
==========  ============================================  ==========================

Model files name their method through the tag of their ``coding`` line
(:attr:`Method.file_tags`); LIBLINEAR's linear models have none and stay
byte-compatible with LIBLINEAR.
"""
from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

from lcoding.core.messages import Messages
from lcoding.core.model import LinearModel, Model, check_trained
from lcoding.core.options import (CODING_AUTO, JOINT_SOLVERS, TRAIN_OPTIONS, SolverType,
                                  TrainParams, check_parameter, searches_locally)
from lcoding.core.params import (KernelParams, KQParams, LinearParams, LLCJointParams,
                                 LLSVMParams, OCCParams)
from lcoding.core.rows import Rows
from lcoding.core.seeds import PURPOSE_CV, rng_state
from lcoding.core.threads import blas_for_training, run_interruptible
from lcoding.io import model_files
from lcoding.local.coding import kernel_map_of
from lcoding.local.model import FILE_TAGS as LOCAL_FILE_TAGS
from lcoding.local.model import LocalModel
from lcoding.linear import param_search
from lcoding.methods import (grid_search, invariant, kq, linear, llc_jo, llsvm, local_search,
                             occ)
from lcoding.methods.defaults import scale_beta


@dataclass(frozen=True)
class Method:
    """One training method: what picks it, what it reads, how it trains, what it writes."""
    name: str
    title: str
    params: type               # the method's typed parameters (lcoding.core.params)
    # the option letters the method reads beyond the common ones (-s -c -e -B -wi -v -C -q -S -m)
    options: tuple
    applies: Callable[[TrainParams], bool]
    check: Callable[[TrainParams], None]
    train: Callable[..., Model]
    model_class: type
    file_tags: tuple
    # whether -m runs threads of the method's own (then BLAS gets one thread for the
    # whole training, core.threads.blas_for_training); the kernel PCA map's dense
    # steps are BLAS's, which keeps its own threads
    own_threads: bool = True


METHODS = (
    Method("invariant", "kernel PCA map and invariant SVMs (Chapelle & Schoelkopf 2001)",
           KernelParams,
           ("-t", "-d", "-g", "-r", "-H", "-J", "-N", "-Y", "-X"),
           invariant.uses_kernel_options, invariant.check_kernel_params,
           invariant.train_kernel_model, invariant.KernelExpansionModel, invariant.FILE_TAGS,
           own_threads=False),
    Method("kq", "discriminative k q-metrics / k q-flats (Szlam & Sapiro 2009)",
           KQParams,
           ("-k", "-Q", "-U", "-V", "-D", "-i", "-o", "-G", "-F", "-l", "-Z", "-W", "-y", "-x",
            "-z", "-E", "-K", "-O"),
           lambda p: int(p.solver_type) in (SolverType.KQ_METRICS, SolverType.KQ_FLATS),
           lambda p: kq.check_kq_params(p, None),
           kq.train_kq_model, kq.KQModel, kq.FILE_TAGS),
    Method("occ", "anchor planes G-OCC / C-OCC with LIB- or PEG-LLSVM (Zhang et al. 2011)",
           OCCParams,
           ("-L", "-A", "-u", "-K", "-O", "-E", "-T", "-P"),
           lambda p: p.coding in occ.OCC_CODINGS, occ.check_occ_params,
           occ.train_occ_model, occ.OCCModel, occ.FILE_TAGS),
    Method("llc_jo", "LLC-SAPL / LLC-JO: joint SGD of local weights and anchors",
           LLCJointParams,
           ("-L", "-A", "-k", "-u", "-a", "-I", "-M", "-K", "-O", "-E", "-T", "-P", "-f", "-j"),
           lambda p: int(p.solver_type) in JOINT_SOLVERS, llc_jo.check_joint_params,
           llc_jo.train_joint, LocalModel, ()),
    Method("llsvm", "LL-SVM: locally linear SVM on a local coding (Ladicky & Torr 2011)",
           LLSVMParams,
           ("-L", "-A", "-k", "-u", "-a", "-I", "-M", "-K", "-O", "-E", "-T", "-P"),
           lambda p: p.coding != 0, llsvm.check_local_params,
           llsvm.train_local_model, LocalModel, LOCAL_FILE_TAGS),
    Method("linear", "LIBLINEAR's linear solvers",
           LinearParams,
           ("-p", "-n", "-R", "-E", "-T", "-P"),
           lambda p: True, linear.check_linear_params,
           linear.train_linear_model, LinearModel, ()),
)
METHOD_BY_NAME = {m.name: m for m in METHODS}

# model-file tag (the ``coding`` line of lcoding's files) -> model class
MODEL_TYPES = {tag: m.model_class for m in METHODS for tag in m.file_tags}


def select_method(params: TrainParams) -> Method:
    """The method the options ask for (the first row of :data:`METHODS` that applies)."""
    _refuse_auto(params)
    for method in METHODS:
        if method.applies(params):
            return method
    raise AssertionError("the linear method applies to every option set")


def train_model(y: np.ndarray, rows: Rows, params: TrainParams, info: Messages | None = None,
                seed_path: tuple = (), sample_weight: np.ndarray | None = None, *,
                checked: bool = False) -> Model:
    """Train the model the options ask for on validated rows (without the bias column).

    ``sample_weight`` (optional, finite, >= 0): per-row factors of C (row i's cost is
    ``sample_weight[i]`` times its class's C), for the methods and solvers whose
    train function takes it; rows of weight 0 are left out.  Others raise ValueError."""
    if not checked:         # the interfaces check once, before -v / -C / train
        check_parameter(params)
    if rows.n_rows == 0:
        raise ValueError("empty training problem: no instances to train on")
    if y.shape[0] != rows.n_rows:
        raise ValueError(f"len(y) = {y.shape[0]} differs from the {rows.n_rows} instances in x")
    method = select_method(params)
    info = info if info is not None else Messages(params.quiet)
    if type(info) is Messages and not info.quiet and not info.print_events \
            and method.name != "linear":
        # the lcoding methods' events (k-means steps, each class's solve) on their own
        # lines in the non-quiet text; the plain LIBLINEAR solvers' text stays LIBLINEAR's
        info = info.printing_events()
    if not params.quiet and not seed_path:
        ignored = ignored_options(method, params)
        if ignored:
            info(f"{method.name}: ignoring option{'s' if len(ignored) > 1 else ''} "
                 f"{' '.join(ignored)} (not used by this method)\n")
    weights = {}
    if sample_weight is not None:
        sw = np.ascontiguousarray(sample_weight, dtype=np.float64).reshape(-1)
        if sw.shape[0] != rows.n_rows:
            raise ValueError(f"sample_weight has {sw.shape[0]} values for {rows.n_rows} "
                             f"instances")
        if not (np.isfinite(sw).all() and (sw >= 0).all()):
            raise ValueError("sample_weight: values must be finite and >= 0")
        if "sample_weight" not in inspect.signature(method.train).parameters:
            raise ValueError(f"sample_weight: the {method.name} method ({method.title}; "
                             f"-s {params.solver_type}) cannot take per-sample weights")
        keep = np.flatnonzero(sw > 0)
        if keep.size == 0:
            raise ValueError("sample_weight: every weight is 0; no instances to train on")
        if keep.size < rows.n_rows:
            y, rows, sw = y[keep], rows.take(keep), sw[keep]
        weights = {"sample_weight": sw}
    # in a worker thread, so that Ctrl-C stops it within a pass (core/threads.py)
    with blas_for_training(params.n_threads if method.own_threads else 1):
        return _checked(method, rows, lambda: run_interruptible(
            lambda: method.train(y, rows, params, info, seed_path=seed_path, **weights)))


def _checked(method: Method, rows: Rows, train) -> Model:
    """``train()``'s model after :func:`~lcoding.core.model.check_trained`; a failed
    linear-algebra step (an SVD or eigensolver that did not converge on extreme
    values) as a ValueError that names the method and the remedy."""
    try:
        model = train()
    except np.linalg.LinAlgError as err:
        raise ValueError(f"{method.name} ({method.title}): a linear-algebra step failed "
                         f"({err}); the largest |value| in x is {rows.largest_magnitude():.3g}: scale "
                         f"the features (e.g. to [-1, 1])") from err
    return check_trained(model, rows.largest_magnitude)


# lcoding's options that every method reads
_COMMON = frozenset(opt.flag for opt in TRAIN_OPTIONS if opt.group == "common")
# LIBLINEAR's own options are never reported: LIBLINEAR accepts and ignores them too,
# and its scripts' output stays LIBLINEAR's
_LIBLINEAR = frozenset(opt.flag for opt in TRAIN_OPTIONS if opt.origin == "LIBLINEAR")


def ignored_options(method: Method, params: TrainParams) -> list:
    """The lcoding options given that ``method`` does not read (accepted, as LIBLINEAR
    accepts an option its solver does not use, but worth a word)."""
    used = _COMMON | _LIBLINEAR | set(method.options)
    return [flag for flag in dict.fromkeys(params.given) if flag not in used]


def with_data_scaled_width(params: TrainParams, rows: Rows, mapped: bool = False) -> TrainParams:
    """``params`` with the Gaussian coding's beta (``-L 2``) or the k* coding's mu
    (``-L 3``) taken from the rows when ``-u`` was left out: ``beta='scale'`` of the
    estimators, ``2 / median`` over sampled rows of the mean squared distance to their
    ``-k`` nearest anchors (:func:`lcoding.methods.defaults.scale_beta`, anchors of a
    few seeded Lloyd steps on a subsample, ``-S``'s seed; measured after the ``-K``
    map).  Both multiply squared distances, so a fixed default means something else on
    every data set: ``-u 1`` on pixels in [0, 255] puts all the weight on the nearest
    anchor, on [0, 0.01] spreads it evenly.  The width is then an option like any
    other (the model file records it; the interfaces train and cross-validate with
    it).  Other codings, ``-C`` (which searches ``-u`` around its own data-scaled
    centre) and a given ``-u``: ``params`` itself.  ``mapped``: ``rows`` went through
    the ``-K`` map already (lcoding.dask's sample)."""
    if ("-u" in params.given or params.coding not in (2, 3) or params.flag_find_parameters
            or rows.n_rows == 0):
        return params
    # the -K map on the sampled rows only (the method maps all of them once, itself)
    beta = scale_beta(rows, int(params.n_anchors), int(params.n_neighbors), int(params.seed),
                      row_map=None if mapped else kernel_map_of(params))
    out = params.replaced(coding_param=float(beta))
    out.given = list(params.given) + ["-u"]
    return out


def cv_folds(n: int, seed: int, nr_fold: int) -> list:
    """:func:`cross_validation`'s folds of ``n`` rows for the seed ``-S``: a list of
    (training rows, held-out rows), LIBLINEAR's seeded permutation cut into
    ``nr_fold`` contiguous parts (what else is fitted on the same folds -- the
    selector's screen -- takes them from here)."""
    rng = np.random.Generator(np.random.PCG64(rng_state(seed, PURPOSE_CV)[0]))
    perm = rng.permutation(n)
    fold_start = [i * n // nr_fold for i in range(nr_fold + 1)]
    return [(np.concatenate([perm[:fold_start[f]], perm[fold_start[f + 1]:]]),
             perm[fold_start[f]:fold_start[f + 1]]) for f in range(nr_fold)]


def cross_validation(y: np.ndarray, rows: Rows, params: TrainParams, nr_fold: int,
                     info: Messages | None = None) -> np.ndarray:
    """LIBLINEAR's ``cross_validation``: a seeded random permutation cut into
    ``nr_fold`` contiguous folds; returns the prediction for every row."""
    check_parameter(params)
    n = rows.n_rows
    if n == 0:
        raise ValueError("cross validation needs at least one training instance")
    if nr_fold > n:
        nr_fold = n
        sys.stderr.write("WARNING: # folds > # data. Will use # folds = # data instead "
                         "(i.e., leave-one-out cross validation)\n")
    target = np.empty(n)
    for f, (train, test) in enumerate(cv_folds(n, params.seed, nr_fold)):
        sub = rows.take(train)
        model = train_model(y[train], sub, params, info, seed_path=(f + 1,), checked=True)
        test_rows = rows.take(test).truncated(model.nr_feature)
        target[test] = model.predict_labels(test_rows)
    return target


def find_parameters(y: np.ndarray, rows: Rows, params: TrainParams,
                    info: Messages | None = None):
    """``-C``: LIBLINEAR's warm-start search of C (and p) for ``-s 0, 2, 11``, returning
    ``(best_C, best_p, best_score)`` (:mod:`lcoding.linear.param_search`), or with a
    kernel PCA map ``-t`` the search of C and ``-g``, or with a
    local coding ``-L`` the search of C, ``-u`` and ``-A`` (warm-started along C for
    ``-s 1, 2, 3``; a grid trained cold for the other solvers, LLC-JO and the k
    q-metrics, :mod:`lcoding.methods.grid_search`), returning
    :class:`~lcoding.methods.local_search.LocalSearchResult` ``(best_C, best_options,
    best_rate)`` (:mod:`lcoding.methods.local_search`).  The interfaces print the
    summary line (:func:`best_parameters_line`)."""
    _refuse_auto(params)
    info = info if info is not None else Messages(params.quiet)
    if grid_search.searches_cold(params):
        # no warm start along C: each point is -v's training on the same folds
        check_parameter(params)
        nr_fold = int(params.nr_fold) if params.nr_fold else 5
        quiet = Messages(quiet=True)

        def cross_validate(point: TrainParams) -> np.ndarray:
            return cross_validation(y, rows, point, nr_fold, quiet)
        return run_interruptible(
            lambda: grid_search.find_grid_parameters(y, rows, params, cross_validate,
                                                     info, select_method(params).check)[0])
    if params.kernel_type >= 0:
        return run_interruptible(
            lambda: local_search.find_kernel_map_parameters(y, rows, params, info)[0])
    if params.coding:
        return run_interruptible(
            lambda: local_search.find_local_parameters(y, rows, params, info)[0])
    return param_search.find_parameters(y, rows, params, info)


def _refuse_auto(params: TrainParams) -> None:
    """``-L auto`` names no method: the selector above this layer (lcoding.select)
    tries the methods, and only the interfaces send ``-C -L auto`` there -- the
    router cannot, as lcoding.select imports it.  Without this the LL-SVM row
    (``coding != 0``) would take it and fail on a coding ``-1``."""
    if params.coding == CODING_AUTO:
        raise ValueError("-L auto is no method to train: -C -L auto chooses one through "
                         "lcoding.select (train and lcoding-train route it there; "
                         "option -L)")


def best_parameters_line(params: TrainParams, result) -> str:
    """The line printed after ``-C`` (LIBLINEAR's text for ``-s 0, 2, 11``)."""
    if searches_locally(params):
        return local_search.best_parameters_line(result)
    best_C, best_p, best_score = result
    return param_search.best_parameters_line(params.solver_type, best_C, best_p, best_score)


def load_model_file(path) -> Model:
    """Read a model file of any method (strict; errors name the file and line)."""
    return model_files.load_model_file(path, MODEL_TYPES)


def model_from_text(text: str, name: str = "<model>") -> Model:
    """Parse model file content of any method."""
    return model_files.model_from_text(text, name, MODEL_TYPES)


def method_of(model: Model) -> Method:
    """The method that trained ``model`` (or wrote its file): the row of
    :data:`METHODS` whose model class and options match.  A model file names its
    method by the tag on its ``coding`` line (none: a LIBLINEAR linear model), the
    joint-SGD solver types telling LLC-JO's locally linear models from LL-SVM's."""
    if type(model) is LinearModel:
        return METHOD_BY_NAME["linear"]
    if isinstance(model, LocalModel):
        joint = int(model.solver_type) in JOINT_SOLVERS
        return METHOD_BY_NAME["llc_jo" if joint else "llsvm"]
    for method in METHODS:
        if type(model) is method.model_class:
            return method
    raise ValueError(f"{type(model).__name__} is not a model of any lcoding method")
