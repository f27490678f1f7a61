"""scikit-learn estimators for lcoding's methods (an interface layer).

One estimator per method, each a thin front end of the option string::

    LocallyLinearSVC     LL-SVM on a local coding (-L 1, 2, 3, 6; -s 1, 2, 3, 4, 30, 32)
    AnchorPlanesSVC      anchor planes G-OCC / C-OCC (-L 4, 5; LIB-/PEG-LLSVM, linear on codes)
    LLCJointSVC          LLC-SAPL / LLC-JO, joint SGD of weights and anchors (-s 31, 33)
    KQMetricsClassifier  discriminative k q-metrics / k q-flats (-s 40, 41)
    InvariantSVC         kernel PCA map and invariant SVMs (-t -g -d -r -H -J -N -Y -X)
    LinearClassifier     LIBLINEAR's classification solvers (-s 0-7, 30, 32)

and :class:`AutoLocalClassifier`, which chooses the method and its option string on
the training rows under a time budget (:func:`lcoding.select.select`).

Every constructor parameter maps to exactly one option letter (the table of each
class is ``_OPTION_TABLE``; ``docs/sklearn.md`` prints them).  ``fit`` resolves the
data-dependent defaults (``'auto'``, ``'scale'``), builds the option string
(:meth:`to_options`), parses it with the option table and trains through
:func:`lcoding.training.train_model` -- so ``liblinearutil.train(y, X,
est.to_options())`` trains the same model, byte for byte in the model file, when
the labels are integers.

scikit-learn is imported here only: ``import lcoding`` and ``lcoding.liblinearutil``
do not need it.
"""
from __future__ import annotations

import logging
import math
import numbers
import os
import sys
import time
import warnings
from abc import ABCMeta, abstractmethod
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from lcoding.core.options import parse_train_options
from lcoding.core.rows import as_rows
from lcoding.methods.defaults import (BETA_SCALE_FACTOR, FLATS_RESTARTS, KQ_PCA,
                                      anchor_distance_scale, auto_anchors as _auto_anchors,
                                      flats_clusters, flats_q, flats_suit, kmeans_schedule,
                                      plane_rank, spanned_dimension,
                                      kmeans_steps, newton_suits, scale_C)
from lcoding.io.model_files import model_to_text
from lcoding.methods.occ import RANK_TOL as OCC_RANK_TOL
from lcoding.select import select
from lcoding.training import METHOD_BY_NAME, load_model_file, model_from_text, train_model

__all__ = ["LocallyLinearSVC", "AnchorPlanesSVC", "LLCJointSVC", "KQMetricsClassifier",
           "InvariantSVC", "LinearClassifier", "AutoLocalClassifier", "ESTIMATORS"]

LOG = logging.getLogger("lcoding")
# AutoLocalClassifier's search when the input checks used up budget_s: select() then
# fits the cheapest method and says so in selection_.note
MIN_SEARCH_S = 1e-6
INT32_MAX = 2147483647


# ----------------------------------------------------------------------------- helpers
@dataclass(frozen=True)
class Param:
    """One row of an estimator's option table: constructor parameter -> option letter."""
    name: str
    letter: str | None       # None: no option letter
    doc: str


# option-table rows several estimators share (one text, one place)
_RANDOM_STATE = Param("random_state", "-S", "None: 1")
_INTERCEPT_SCALING = Param("intercept_scaling", "-B", "the -B value when fit_intercept")
_FIT_INTERCEPT = Param("fit_intercept", "-B", "False: no -B")
_CLASS_WEIGHT = Param("class_weight", "-wi", "'balanced': n / (n_classes n_i)")
_VERBOSE = Param("verbose", "-q", "0, 1: -q (1 logs phases); 2: LIBLINEAR's text")
_VERBOSE_PLAIN = Param("verbose", "-q", "0, 1: -q; 2: LIBLINEAR's text")
_TOL = Param("tol", "-e", "stopping tolerance (None: the solver's)")
_KERNEL_MAP_ORDER = Param("kernel_map_order", "-O", "order of the homogeneous kernel map")
_KERNEL_MAP = Param("kernel_map", "-K", "None 0, 'intersection' 1, 'chi2' 2, 'hellinger' 3")
_N_JOBS = Param("n_jobs", "-m", "threads (None: 1, -1: all cores)")
_MAX_ITER_SGD = Param("max_iter", "-E", "epochs of the SGD solvers (None: 10; unused by the others)")
_C_SCALE = Param("C", "-c", "'scale': 100 / (d x the median variance of the varying features "
                            "+ intercept_scaling^2)")
_C_PLAIN = Param("C", "-c", "regularisation")
_N_ANCHORS_AUTO = Param("n_anchors", "-A", "'auto': sqrt(n), >= 4 per class and 16, <= 200")
_MU_KSTAR = Param("mu", "-u", "coding='kstar' only; 'scale' as beta")
_LOSS_DUAL_CD = Param("loss", "-s", "dual_cd: 'squared_hinge' (None) -s 1, 'hinge' -s 3")
# the tail of every classifier's table that has an intercept and class weights
_INTERCEPT_WEIGHTS_SEED = (_FIT_INTERCEPT, _INTERCEPT_SCALING, _CLASS_WEIGHT, _RANDOM_STATE)


def _num(value) -> str:
    """A number as option text that parses back to the same float/int."""
    if isinstance(value, (bool, np.bool_)):
        return str(int(value))
    if isinstance(value, numbers.Integral):
        return str(int(value))
    v = float(value)
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def _choice(name, value, table):
    if value not in table:
        raise ValueError(f"{name}={value!r}: must be one of {', '.join(repr(k) for k in table)}")
    return table[value]


def _check_number(name, value, low=None, high=None, integer=False, low_open=False):
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind) or \
            (not integer and not math.isfinite(float(value))):
        raise ValueError(f"{name}={value!r}: must be {'an integer' if integer else 'a finite number'}")
    if low is not None and (value <= low if low_open else value < low):
        raise ValueError(f"{name}={value!r}: must be {'>' if low_open else '>='} {low}")
    if high is not None and value > high:
        raise ValueError(f"{name}={value!r}: must be <= {high}")
    return value


def _seed(random_state) -> int:
    """``-S``: an int as it is, None -> 1 (lcoding's default seed: fits are
    reproducible), a RandomState / Generator -> one draw from it."""
    if random_state is None:
        return 1
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, INT32_MAX))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, INT32_MAX))
    raise ValueError(f"random_state={random_state!r}: must be None, an int, a "
                     f"numpy RandomState or Generator")


def _threads(n_jobs) -> int:
    """``-m``: None -> 1, -1 -> all cores, -2 -> all but one, ..."""
    if n_jobs is None:
        return 1
    _check_number("n_jobs", n_jobs, integer=True)
    if n_jobs == 0:
        raise ValueError("n_jobs=0: must be a positive number of threads or negative "
                         "(-1: all cores)")
    if n_jobs < 0:
        return max(1, (os.cpu_count() or 1) + 1 + n_jobs)
    return int(n_jobs)


def _as_csr_rows(X, name="X"):
    """Validated input (dense float64 array or sparse) -> :class:`~lcoding.core.rows.Rows`
    via CSR float64 with sorted int32 indices."""
    if sp.issparse(X):
        csr = sp.csr_matrix(X, dtype=np.float64)
        if csr.indices.dtype != np.int32:
            if csr.shape[1] > INT32_MAX:
                raise ValueError(f"{name}: {csr.shape[1]} features exceed the int32 range")
            csr = sp.csr_matrix((csr.data, csr.indices.astype(np.int32), csr.indptr),
                                shape=csr.shape)
        if not csr.has_sorted_indices:
            csr = csr.copy()
            csr.sort_indices()
        return as_rows(csr, name)
    return as_rows(np.asarray(X, dtype=np.float64), name)


def _ensure_log_handler():
    """``verbose >= 1`` with no logging configured: show the lcoding phase lines on
    stderr (a library adds a handler only when asked to be verbose)."""
    if LOG.getEffectiveLevel() > logging.INFO:
        LOG.setLevel(logging.INFO)
    if not LOG.hasHandlers():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        LOG.addHandler(handler)


class _Progress:
    """The ``info()`` text of the trainers: printed as LIBLINEAR prints it with
    ``verbose >= 2``; its phase lines (anchors, planes, kernel map) and the trainers'
    events (:func:`lcoding.core.messages.event`: each k-means step with its inertia,
    each class's solve with its passes and time) logged with ``verbose >= 1``, one
    log record per line, so the ``n_jobs`` threads never mix their lines."""

    PHASES = ("anchors:", "G-OCC:", "C-OCC:", "OCC training:", "kernel PCA map:")

    def __init__(self, name: str, verbose: int):
        self.name, self.verbose, self.buf = name, int(verbose), ""
        self.n_iter = 0         # the largest #iter / #epoch a solver reported

    def __call__(self, text: str) -> None:
        if self.verbose >= 2:
            sys.stdout.write(text)
            sys.stdout.flush()
        self.buf += text
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            if line.startswith("optimization finished, #"):
                try:
                    self.n_iter = max(self.n_iter, int(line.split("=")[1].split()[0]))
                except (IndexError, ValueError):
                    pass
            elif self.verbose >= 1 and line.startswith(self.PHASES):
                LOG.info("%s: %s", self.name, line.strip())

    def event(self, text: str) -> None:
        if self.verbose >= 1:
            LOG.info("%s: %s", self.name, text)


def _platt(dec: np.ndarray, target: np.ndarray):
    """Platt's sigmoid ``P(y=1|f) = 1 / (1 + exp(A f + B))`` fitted by the Newton
    method of Lin, Lin & Weng (2007), LIBSVM's ``sigmoid_train``."""
    dec = np.asarray(dec, dtype=np.float64)
    target = np.asarray(target, dtype=bool)
    prior1 = float(target.sum())
    prior0 = float(target.size - prior1)
    t = np.where(target, (prior1 + 1.0) / (prior1 + 2.0), 1.0 / (prior0 + 2.0))
    A, B = 0.0, math.log((prior0 + 1.0) / (prior1 + 1.0))

    def fval(A, B):
        z = dec * A + B
        return float(np.sum(np.where(z >= 0, t * z + np.log1p(np.exp(-np.abs(z))),
                                     (t - 1.0) * z + np.log1p(np.exp(-np.abs(z))))))

    f = fval(A, B)
    for _ in range(100):
        z = dec * A + B
        ez = np.exp(-np.abs(z))
        p = np.where(z >= 0, ez / (1.0 + ez), 1.0 / (1.0 + ez))
        q = 1.0 - p
        d2 = p * q
        h11 = 1e-12 + float(np.sum(dec * dec * d2))
        h22 = 1e-12 + float(np.sum(d2))
        h21 = float(np.sum(dec * d2))
        d1 = t - p
        g1, g2 = float(np.sum(dec * d1)), float(np.sum(d1))
        if abs(g1) < 1e-5 and abs(g2) < 1e-5:
            break
        det = h11 * h22 - h21 * h21
        dA = -(h22 * g1 - h21 * g2) / det
        dB = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= 1e-10:
            nA, nB = A + step * dA, B + step * dB
            nf = fval(nA, nB)
            if nf < f + 1e-4 * step * gd:
                A, B, f = nA, nB, nf
                break
            step /= 2.0
        else:
            break
    return A, B


def _sigmoid(dec, A, B):
    """``1 / (1 + exp(A f + B))`` without overflow: ``e = exp(-|z|)`` is at most 1, and
    each side of the ``where`` is the form that is exact on its side (the same
    numbers as ``exp(-z) / (1 + exp(-z))`` for z >= 0 and ``1 / (1 + exp(z))`` below)."""
    z = dec * A + B
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, e / (1.0 + e), 1.0 / (1.0 + e))


# ------------------------------------------------------------------------ the base
class _LcodingClassifier(ClassifierMixin, BaseEstimator, metaclass=ABCMeta):
    """Shared machinery: validation, labels, options, training, prediction, files,
    pickling.  Subclasses define ``_METHOD``, ``_OPTION_TABLE`` and ``_options``."""

    _METHOD = "linear"
    _OPTION_TABLE: tuple = ()
    _SAMPLE_WEIGHT = False         # whether fit takes sample_weight
    _PROGRESS_NAME = None

    # ---------------------------------------------------------- option building
    def _common_tail(self, opts, classes_int, *, intercept=True, weights=True):
        """-c -e -B -wi -S -m -q, in that order (``opts`` is a list of (letter, text))."""
        if getattr(self, "tol", None) is not None:
            opts.append(("-e", _num(_check_number("tol", self.tol, low=0, low_open=True))))
        if intercept:
            if self.fit_intercept:
                opts.append(("-B", _num(_check_number("intercept_scaling",
                                                      self.intercept_scaling, low=0))))
        if weights and getattr(self, "class_weight", None) is not None:
            opts.extend(self._class_weight_options(classes_int))
        opts.append(("-S", str(_seed(self.random_state))))
        if hasattr(self, "n_jobs"):
            threads = _threads(self.n_jobs)
            if threads != 1:
                opts.append(("-m", str(threads)))
        if int(self.verbose) < 2:
            opts.append(("-q", None))
        return opts

    def _class_weight_options(self, classes_int):
        cw = self.class_weight
        if classes_int is None or not hasattr(self, "_class_counts_"):
            raise _NeedsData("class_weight")
        counts = self._class_counts_
        n_classes = len(self.classes_)
        if isinstance(cw, str):
            if cw != "balanced":
                raise ValueError(f"class_weight={cw!r}: must be 'balanced', a dict or None")
            total = counts.sum()
            weights = total / (n_classes * np.maximum(counts, 1e-300))
            weights = np.where(counts > 0, weights, 1.0)
        elif isinstance(cw, dict):
            weights = np.ones(n_classes)
            for key, value in cw.items():
                hit = np.flatnonzero(self.classes_ == key)
                if hit.size == 0:
                    raise ValueError(f"class_weight: label {key!r} is not a class of y "
                                     f"(classes: {list(self.classes_)})")
                weights[hit[0]] = _check_number(f"class_weight[{key!r}]", value, low=0)
        else:
            raise ValueError(f"class_weight={cw!r}: must be 'balanced', a dict or None")
        return [(f"-w{int(classes_int[c])}", _num(float(weights[c])))
                for c in range(n_classes) if weights[c] != 1.0]

    @abstractmethod
    def _options(self, rows, y_train, sample_weight):
        """The option list ``[(letter, text or None), ...]`` of this fit, and the
        resolved data-dependent values (a dict, stored as fitted attributes).  Every
        estimator below defines this hook."""

    @staticmethod
    def _join(opts) -> str:
        return " ".join(flag if text is None else f"{flag} {text}" for flag, text in opts)

    def to_options(self) -> str:
        """The option string that trains the same model (``liblinearutil.train(y, X,
        est.to_options())``).  After ``fit`` the data-dependent defaults are the values
        ``fit`` resolved; before it, an estimator with such defaults (``'auto'``,
        ``'scale'``) raises ``NotFittedError``."""
        if hasattr(self, "options_"):
            return self.options_
        try:
            opts, _ = self._options(None, None, None)
        except _NeedsData as err:
            raise NotFittedError(
                f"{type(self).__name__}.to_options(): {err} depends on the training data; "
                f"call fit first or give it a value") from None
        return self._join(opts)

    # ------------------------------------------------------------------ fitting
    def _validate_X(self, X, reset):
        return validate_data(self, X, reset=reset, accept_sparse=("csr", "csc", "coo"),
                             dtype=np.float64, accept_large_sparse=True)

    def _fit_labels(self, y):
        check_classification_targets(y)
        classes, y_enc = np.unique(y, return_inverse=True)
        self.classes_ = classes
        integral = False
        if classes.dtype.kind in "iu":
            integral = bool(np.all(np.abs(classes.astype(np.float64)) <= INT32_MAX))
        elif classes.dtype.kind == "f":
            integral = bool(np.all(np.isfinite(classes)) and np.all(classes == np.trunc(classes))
                            and np.all(np.abs(classes) <= INT32_MAX))
        # the labels the model is trained with: the classes themselves when they are
        # 32-bit integers (model files then carry them), else 0..K-1 (classes_ order)
        self._classes_int = (classes.astype(np.int64) if integral
                             else np.arange(classes.size, dtype=np.int64))
        return y_enc

    def fit(self, X, y, sample_weight=None):
        """Fit the model on ``X`` (dense, sparse, DataFrame, lists) and labels ``y``
        of any type; ``sample_weight`` multiplies the C of each row (where the solver
        supports it)."""
        if sample_weight is not None and not self._SAMPLE_WEIGHT:
            raise TypeError(f"{type(self).__name__}.fit() takes no sample_weight")
        t_start = time.perf_counter()
        verbose = int(self.verbose)
        if verbose >= 1:
            _ensure_log_handler()
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc", "coo"),
                             dtype=np.float64, accept_large_sparse=True)
        y_enc = self._fit_labels(y)
        n = X.shape[0]
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                                 ensure_non_negative=True)
            keep = sample_weight > 0
        else:
            keep = np.ones(n, dtype=bool)
        self._class_counts_ = np.bincount(y_enc[keep], minlength=self.classes_.size)
        if np.count_nonzero(self._class_counts_) < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes (with positive "
                f"sample_weight); got 1 class")
        rows = _as_csr_rows(X)
        y_train = self._classes_int[y_enc].astype(np.float64)
        t = time.perf_counter()
        opts, resolved = self._options(rows, y_train, sample_weight)
        self.options_ = self._join(opts)
        for key, value in resolved.items():
            setattr(self, key, value)
        if verbose >= 1:
            LOG.info("%s: options %s (defaults resolved in %.2f s)", type(self).__name__,
                     self.options_, time.perf_counter() - t)
        params = parse_train_options(self.options_)
        self._params = params
        progress = _Progress(type(self).__name__, verbose)
        t = time.perf_counter()
        self.model_ = self._train(y_train, rows, params, progress, sample_weight)
        if "max_iter" in self.get_params():
            self.n_iter_ = max(1, progress.n_iter)
        if verbose >= 1:
            LOG.info("%s: training done (%.2f s)", type(self).__name__,
                     time.perf_counter() - t)
        self._set_class_map()
        if getattr(self, "probability", False):
            t = time.perf_counter()
            self._fit_platt(y_enc, rows, y_train, params, sample_weight)
            if verbose >= 1:
                LOG.info("%s: Platt scaling on %d-fold decision values done (%.2f s)",
                         type(self).__name__, self.n_probability_folds_,
                         time.perf_counter() - t)
        self.fit_time_ = time.perf_counter() - t_start
        return self

    def _train(self, y_train, rows, params, progress, sample_weight, seed_path=()):
        return train_model(y_train, rows, params, progress, seed_path=seed_path,
                           sample_weight=sample_weight)

    def _set_class_map(self):
        """Columns of the model's decision values -> classes_ positions."""
        label = np.asarray(self.model_.label, dtype=np.int64)
        pos = np.searchsorted(self._classes_int, label)
        pos = np.minimum(pos, self._classes_int.size - 1)
        if not np.array_equal(self._classes_int[pos], label):
            raise ValueError("the model's labels are not the classes it was trained on")
        self._label_pos = pos

    # --------------------------------------------------------------- prediction
    def _rows(self, X):
        check_is_fitted(self, "model_")
        X = self._validate_X(X, reset=False)
        return _as_csr_rows(X).truncated(self.model_.nr_feature)

    def _decision_from_values(self, dec, label_pos=None):
        """Model decision values (model label order) -> sklearn's decision_function
        (``classes_`` order; 1-d for two classes, positive = ``classes_[1]``).  A
        class the model never saw (all its rows had sample_weight 0) gets a column
        below every other value."""
        pos = self._label_pos if label_pos is None else label_pos
        K = self.classes_.size
        n = dec.shape[0]
        if dec.shape[1] == 1 and K == 2:           # binary: the column of label[0]
            return dec[:, 0] if pos[0] == 1 else -dec[:, 0]
        if dec.shape[1] == 1:                      # binary model, more classes_
            dec = np.column_stack([dec[:, 0], -dec[:, 0]])
        out = np.empty((n, K))
        if pos.size < K:
            out[:] = (dec.min() - 1.0) if dec.size else -1.0
        out[:, pos] = dec[:, :pos.size]
        if K == 2:
            return out[:, 1] - out[:, 0]
        return out

    def decision_function(self, X):
        """Decision values: ``(n,)`` for two classes (> 0 means ``classes_[1]``), else
        ``(n, n_classes)`` in ``classes_`` order."""
        rows = self._rows(X)
        return self._decision_from_values(self.model_.decision_values(rows))

    def predict(self, X):
        """Class labels (LIBLINEAR's rule on the model's decision values)."""
        rows = self._rows(X)
        labels = self.model_.predict_labels(rows).astype(np.int64)
        pos = np.searchsorted(self._classes_int, labels)
        return self.classes_[np.minimum(pos, self.classes_.size - 1)]

    # ------------------------------------------------------------- probabilities
    def _has_proba(self):
        return bool(getattr(self, "probability", False))

    def _fit_platt(self, y_enc, rows, y_train, params, sample_weight):
        """Platt scaling on decision values of an internal stratified cross-validation
        (as ``SVC(probability=True)``): one sigmoid for two classes, one per class
        (one-vs-rest, then normalised) for more."""
        K = self.classes_.size
        n = rows.n_rows
        min_count = int(np.bincount(y_enc, minlength=K).min())
        folds = min(5, min_count)
        seed = _seed(self.random_state)
        dec = np.zeros((n, 1 if K == 2 else K))
        quiet = _Progress(type(self).__name__, 0)
        if folds >= 2:
            skf = StratifiedKFold(folds, shuffle=True, random_state=seed % (2 ** 32))
            for f, (tr, te) in enumerate(skf.split(np.zeros(n), y_enc)):
                sw = None if sample_weight is None else sample_weight[tr]
                if np.unique(y_enc[tr if sw is None else tr[sw > 0]]).size < 2:
                    continue
                model = self._train(y_train[tr], rows.take(tr), params, quiet, sw,
                                    seed_path=(1000 + f,))
                lab = np.asarray(model.label, dtype=np.int64)
                pos = np.searchsorted(self._classes_int, lab)
                values = model.decision_values(rows.take(te).truncated(model.nr_feature))
                out = self._decision_from_values(values, pos)
                dec[te] = out.reshape(te.size, -1)
        else:
            warnings.warn(f"{type(self).__name__}: probability=True with a class of "
                          f"{min_count} sample(s): the sigmoid is fitted on the training "
                          f"decision values", UserWarning)
            out = self._decision_from_values(self.model_.decision_values(rows))
            dec[:] = out.reshape(n, -1)
            folds = 1
        if K == 2:
            self.probA_, self.probB_ = map(np.atleast_1d, _platt(dec[:, 0], y_enc == 1))
        else:
            ab = np.array([_platt(dec[:, c], y_enc == c) for c in range(K)])
            self.probA_, self.probB_ = ab[:, 0].copy(), ab[:, 1].copy()
        self.n_probability_folds_ = folds

    @available_if(lambda self: self._has_proba())
    def predict_proba(self, X):
        """Class probabilities (``probability=True``): Platt scaling of the decision
        values, fitted on internal cross-validation; columns in ``classes_`` order."""
        return self._predict_proba(X)

    @available_if(lambda self: self._has_proba())
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        return np.log(self.predict_proba(X))

    def _predict_proba(self, X):
        check_is_fitted(self, "probA_")
        dec = self.decision_function(X)
        if self.classes_.size == 2:
            p1 = _sigmoid(dec, self.probA_[0], self.probB_[0])
            return np.column_stack([1.0 - p1, p1])
        P = _sigmoid(dec, self.probA_[None, :], self.probB_[None, :])
        P = np.clip(P, 1e-12, None)
        return P / P.sum(axis=1, keepdims=True)

    # ------------------------------------------------------------ model files
    def save_model(self, path) -> None:
        """Write the model file (LIBLINEAR's format; ``liblinearutil.load_model`` reads
        it).  The file stores integer labels: the classes themselves when they are
        integers, else their positions 0..K-1 in ``classes_``."""
        check_is_fitted(self, "model_")
        from lcoding.io.model_files import save_model_file
        save_model_file(path, self.model_)

    @classmethod
    def from_model_file(cls, path):
        """A fitted estimator around the model in ``path`` (predicts as the file
        does).  ``classes_`` are the file's labels, sorted; the constructor
        parameters the file records (solver, coding, anchors, bias, ...) are set, the
        others keep their defaults."""
        return cls._from_model(load_model_file(path))

    @classmethod
    def _from_model(cls, model):
        est = cls()
        est._params_from_model(model)
        if model.label is None:
            raise ValueError("the model file holds no class labels (not a classifier)")
        labels = np.asarray(model.label, dtype=np.int64)
        est.classes_ = np.sort(labels)
        est._classes_int = est.classes_.copy()
        est.n_features_in_ = int(model.nr_feature)
        est.model_ = model
        est._set_class_map()
        return est

    def _params_from_model(self, model) -> None:
        """Set the constructor parameters a model file records (subclasses)."""
        self.fit_intercept = model.bias >= 0
        if model.bias >= 0:
            self.intercept_scaling = float(model.bias)

    # ----------------------------------------------------------------- pickling
    def __getstate__(self):
        state = dict(super().__getstate__())
        model = state.pop("model_", None)
        state.pop("_params", None)
        if model is not None:
            state["_model_text"] = model_to_text(model)
        return state

    def __setstate__(self, state):
        state = dict(state)
        text = state.pop("_model_text", None)
        super().__setstate__(state)
        if text is not None:
            self.model_ = model_from_text(text, "<pickled model>")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class _NeedsData(Exception):
    """A data-dependent default asked for before fit (to_options)."""


def _data(rows, what):
    if rows is None:
        raise _NeedsData(what)
    return rows


# --------------------------------------------------------------- shared resolvers
_LOSS_SVC = {"squared_hinge": "l2", "hinge": "l1"}


def _local_solver(solver, loss, allow_cs=True):
    """(solver, loss) -> -s of the locally linear trainers."""
    table = {"dual_cd": None, "primal_newton": 2, "sgd": 30, "averaged_sgd": 32}
    if allow_cs:
        table["crammer_singer"] = 4
    _choice("solver", solver, table)
    if solver == "dual_cd":
        loss = "squared_hinge" if loss is None else loss
        _choice("loss", loss, _LOSS_SVC)
        return 1 if loss == "squared_hinge" else 3
    if solver == "primal_newton":
        if loss not in (None, "squared_hinge"):
            raise ValueError("solver='primal_newton' minimises the squared hinge loss")
        return 2
    if loss not in (None, "hinge"):
        raise ValueError(f"loss={loss!r}: solver={solver!r} minimises the hinge loss "
                         f"(loss=None or 'hinge')")
    return table[solver]


_KERNEL_MAPS = {None: 0, "intersection": 1, "chi2": 2, "hellinger": 3}
_ANCHOR_INIT = {"kmeans": 0, "random": 1, "kmeans_per_class": 2, "random_per_class": 3,
                "kmeans_random_seeds": 4}
_ANCHOR_INIT_BY_CODE = {v: k for k, v in _ANCHOR_INIT.items()}
_KMEANS_INITS = (0, 2, 4)       # the -a modes that run Lloyd steps (-I)
_KERNEL_MAP_BY_CODE = {v: k for k, v in _KERNEL_MAPS.items()}


def _kernel_map_rows(rows, kernel_map, order):
    """The rows after the ``-K`` map (for scales measured where the coding runs)."""
    if not kernel_map:
        return rows
    from lcoding.core.rows import Rows
    if kernel_map == 3:               # Hellinger: sign(x) sqrt(|x|), same pattern
        return Rows(np.sign(rows.data) * np.sqrt(np.abs(rows.data)), rows.indices,
                    rows.indptr, rows.n_features)
    # homogeneous maps: the scale of sqrt(|x|) is a fair proxy of their norms
    return Rows(np.sqrt(np.abs(rows.data)), rows.indices, rows.indptr, rows.n_features)


# ----------------------------------------------------------------- LocallyLinearSVC
_CODINGS = {"inverse_distance": 1, "gaussian": 2, "kstar": 3, "llc": 6}
_CODING_BY_CODE = {v: k for k, v in _CODINGS.items()}
_CODING_PARAM = {1: "power", 2: "beta", 3: "mu", 6: "ridge"}
_PARAM_OWNER = {"power": "inverse_distance", "beta": "gaussian", "mu": "kstar", "ridge": "llc"}


class LocallyLinearSVC(_LcodingClassifier):
    """LL-SVM (Ladicky & Torr 2011): a linear SVM per anchor, mixed by a local coding
    gamma(x) over the ``n_anchors`` nearest anchors, ``f(x) = sum_j gamma_j(x) w_j . [x; B]``.

    Parameters (option letter)
    --------------------------
    C : float or 'scale' (-c)
        Regularisation; 'scale' = 100 / (d times the median variance of the training
        rows' varying features + intercept_scaling^2): rescaling or shifting the
        features leaves the model's fit unchanged, as ``gamma='scale'`` does for
        ``SVC``, and one feature of a much wider range does not set C for all.
    n_anchors : int or 'auto' (-A)
        'auto': ``sqrt(n)``, at least 4 per class and 16, at most 200.
    n_neighbors : int (-k)
        Nearest anchors of the coding (not used by 'kstar'); capped at n_anchors.
        Default 16.
    coding : {'gaussian', 'inverse_distance', 'llc', 'kstar'} (-L 2, 1, 6, 3)
    beta : float or 'scale' ('gaussian' only; -u)
        Gaussian coding ``gamma_j ~ exp(-beta (d_j - d_min))``; 'scale' = 2 / the
        median (over a sample of rows) of the mean squared distance to the
        ``n_neighbors`` nearest anchors.
    power : float or None ('inverse_distance' only; -u)
        ``gamma_j ~ d_j^-power`` (d = squared distance); None: 1.
    mu : float or 'scale' ('kstar' only; -u)
        k* coding's mu; 'scale' as beta.
    ridge : float or None ('llc' only; -u)
        LLC ridge in units of 1e-4 trace(C); None: 1.
    solver : {'auto', 'dual_cd', 'primal_newton', 'sgd', 'averaged_sgd',
        'crammer_singer'} (-s with loss)
        'auto' (default): 'primal_newton' when there are at least 8 rows per coded
        weight (``n_anchors * (n_features + 1)``), else 'dual_cd' (``solver_`` says
        which).
    loss : {None, 'squared_hinge', 'hinge'} (-s with solver)
        dual_cd: squared_hinge -s 1 (default), hinge -s 3; primal_newton: squared
        hinge -s 2, LIBLINEAR's Newton solver, its products on the coded rows (the
        faster one when the dual CD crawls: many rows, few features, a small C);
        SGD: hinge only.
    anchor_init : {'kmeans', 'random', 'kmeans_per_class', 'random_per_class',
        'kmeans_random_seeds'} (-a)
    kmeans_iter : int or 'auto' (-I)
        Lloyd steps of the k-means anchors (at most: they stop earlier once the
        centres settle), or its mini-batch steps with ``kmeans_batch``.  'auto'
        (default): 10 Lloyd steps -- on 3-fold CV of the shared training sets as good
        as the option strings' 20 (``lcoding.methods.defaults.KMEANS_ITER``) -- or 30
        mini-batch steps.
    kmeans_batch : int or 'auto' (-M)
        Rows per mini-batch k-means step; 0: Lloyd's steps over all rows.  'auto'
        (default): 2000 from 20 000 training rows on, else 0 -- as good on 3-fold CV
        and 1.5-1.7x faster CV there (``lcoding.methods.defaults.kmeans_schedule``).
    kernel_map : {None, 'intersection', 'chi2', 'hellinger'} (-K)
    kernel_map_order : int (-O)
    max_iter : int or None (-E; epochs of the SGD solvers, unused by the dual CD)
    t0 : float (-T; SGD, 0 = calibrated from the data)
    tol : float or None (-e)
    fit_intercept, intercept_scaling : (-B intercept_scaling, absent without intercept)
    class_weight : dict, 'balanced' or None (-wi)
    probability : bool (no letter: Platt scaling in the estimator)
    random_state : int, RandomState or None (-S; None -> 1)
    n_jobs : int or None (-m)
    verbose : int (-q unless verbose >= 2)
    """

    _METHOD = "llsvm"
    _SAMPLE_WEIGHT = True
    _OPTION_TABLE = (
        Param("solver", "-s", "'auto': 'primal_newton' at >= 8 rows per coded weight, "
                              "else 'dual_cd'; 'dual_cd' (with loss) 1 / 3, "
                              "'primal_newton' 2, 'crammer_singer' 4, 'sgd' 30, "
                              "'averaged_sgd' 32"),
        _LOSS_DUAL_CD,
        Param("coding", "-L", "'inverse_distance' 1, 'gaussian' 2, 'kstar' 3, 'llc' 6"),
        _N_ANCHORS_AUTO,
        Param("n_neighbors", "-k", "nearest anchors (capped at n_anchors)"),
        Param("beta", "-u", "coding='gaussian' only; 'scale': 2 / median mean squared "
                            "distance to the n_neighbors nearest anchors"),
        Param("power", "-u", "coding='inverse_distance' only (None: 1)"),
        _MU_KSTAR,
        Param("ridge", "-u", "coding='llc' only (None: 1)"),
        Param("anchor_init", "-a", "'kmeans' 0, 'random' 1, 'kmeans_per_class' 2, "
                                   "'random_per_class' 3, 'kmeans_random_seeds' 4"),
        Param("kmeans_iter", "-I", "'auto': 10 Lloyd steps of the k-means anchors, 30 "
                                   "mini-batch steps with kmeans_batch (the option "
                                   "strings' default is 20)"),
        Param("kmeans_batch", "-M", "'auto': 2000 rows a mini-batch k-means step from "
                                    "20 000 rows on, else 0 (Lloyd)"),
        _KERNEL_MAP,
        _KERNEL_MAP_ORDER,
        _C_SCALE,
        _MAX_ITER_SGD,
        Param("t0", "-T", "SGD solvers only: schedule offset (0: calibrated)"),
        _TOL,
        *_INTERCEPT_WEIGHTS_SEED,
        _N_JOBS,
        _VERBOSE,
    )

    def __init__(self, C="scale", n_anchors="auto", n_neighbors=16, coding="gaussian",
                 beta="scale", power=None, mu=None, ridge=None, solver="auto", loss=None,
                 anchor_init="kmeans", kmeans_iter="auto", kmeans_batch="auto", kernel_map=None,
                 kernel_map_order=1, max_iter=None, t0=0.0, tol=None, fit_intercept=True, intercept_scaling=1.0,
                 class_weight=None, probability=False, random_state=None, n_jobs=None,
                 verbose=0):
        self.C = C
        self.n_anchors = n_anchors
        self.n_neighbors = n_neighbors
        self.coding = coding
        self.beta = beta
        self.power = power
        self.mu = mu
        self.ridge = ridge
        self.solver = solver
        self.loss = loss
        self.anchor_init = anchor_init
        self.kmeans_iter = kmeans_iter
        self.kmeans_batch = kmeans_batch
        self.kernel_map = kernel_map
        self.kernel_map_order = kernel_map_order
        self.max_iter = max_iter
        self.t0 = t0
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.class_weight = class_weight
        self.probability = probability
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _coding_param(self, code, rows, n_anchors, k, seed, km_rows):
        """-u of the coding, with the other codings' parameters refused."""
        own = _CODING_PARAM[code]
        for name in ("power", "beta", "mu", "ridge"):
            value = getattr(self, name)
            if name != own and value is not None and not (name == "beta" and value == "scale"):
                raise ValueError(f"{name}={value!r} is the -u parameter of coding="
                                 f"{_PARAM_OWNER[name]!r}; this estimator has coding="
                                 f"{self.coding!r}, whose -u parameter is {own}")
        value = getattr(self, own)
        if value is None:
            value = "scale" if own == "mu" else 1.0
        if value == "scale":
            if own not in ("beta", "mu"):
                raise ValueError(f"{own}='scale' is only for beta and mu")
            scale = anchor_distance_scale(km_rows if km_rows is not None else _data(rows, own),
                                          n_anchors, k, seed)
            return BETA_SCALE_FACTOR / scale, True
        low = None if own == "power" else 0
        return float(_check_number(own, value, low=low)), False

    def _options(self, rows, y_train, sample_weight):
        resolved = {}
        code = _choice("coding", self.coding, _CODINGS)
        # 'auto' is the squared hinge's dual CD until the anchors are known (below)
        st = _local_solver("dual_cd" if self.solver == "auto" else self.solver, self.loss)
        n_classes = None if y_train is None else np.unique(y_train).size
        if self.n_anchors == "auto":
            m = _auto_anchors(_data(rows, "n_anchors='auto'").n_rows, n_classes)
            resolved["n_anchors_"] = m
        else:
            m = int(_check_number("n_anchors", self.n_anchors, low=1, integer=True))
            if rows is not None and m > rows.n_rows:
                raise ValueError(f"n_anchors={m}: more anchors than the {rows.n_rows} "
                                 f"training rows")
        k = int(_check_number("n_neighbors", self.n_neighbors, low=1, integer=True))
        k = min(k, m)
        km = _choice("kernel_map", self.kernel_map, _KERNEL_MAPS)
        order = int(_check_number("kernel_map_order", self.kernel_map_order, low=0,
                                  integer=True))
        seed = _seed(self.random_state)
        km_rows = None if rows is None or not km else _kernel_map_rows(rows, km, order)
        if self.solver == "auto" and st == 1:
            # the squared hinge by the faster of its two solvers for this shape (the
            # rows as the coding sees them; the homogeneous maps multiply the features
            # by 2 kernel_map_order + 1, which their proxy rows do not show: dual CD)
            coded_from = km_rows if km_rows is not None else _data(rows, "solver='auto'")
            st = 2 if km in (0, 3) and newton_suits(coded_from, m, bool(self.fit_intercept)) \
                else 1
            resolved["solver_"] = "primal_newton" if st == 2 else "dual_cd"
        u, data_u = self._coding_param(code, rows, m, k, seed, km_rows)
        if data_u:
            resolved[f"{_CODING_PARAM[code]}_"] = u
        opts = [("-s", str(st)), ("-L", str(code)), ("-A", str(m))]
        if code != 3:
            opts.append(("-k", str(k)))
        opts.append(("-u", _num(u)))
        init = _choice("anchor_init", self.anchor_init, _ANCHOR_INIT)
        opts.append(("-a", str(init)))
        if init in _KMEANS_INITS:           # -I, -M: only the k-means modes run steps
            batch, n_steps = self._kmeans_schedule(rows, resolved)
            opts.append(("-I", str(n_steps)))
            if batch:
                opts.append(("-M", str(batch)))
        if km:
            opts += [("-K", str(km)), ("-O", str(order))]
        if self.max_iter is not None:       # -E: epochs of the SGD solvers (dual CD: unused)
            opts.append(("-E", str(_check_number("max_iter", self.max_iter, low=1,
                                                 integer=True))))
        if st in (30, 32) and self.t0:
            opts.append(("-T", _num(_check_number("t0", self.t0, low=0))))
        C = self._resolve_C(rows, km_rows, resolved)
        opts.append(("-c", _num(C)))
        self._common_tail(opts, getattr(self, "_classes_int", None))
        if sample_weight is not None and st == 4:
            raise ValueError("sample_weight: solver='crammer_singer' (-s 4) cannot take "
                             "per-sample weights; use solver='dual_cd' or 'sgd'")
        return opts, resolved

    def _kmeans_schedule(self, rows, resolved):
        """(-M, -I): ``kmeans_batch`` and ``kmeans_iter``, 'auto' by the rows."""
        if isinstance(self.kmeans_batch, str):
            if self.kmeans_batch != "auto":
                raise ValueError(f"kmeans_batch={self.kmeans_batch!r}: must be an integer "
                                 f">= 0 or 'auto'")
            batch = kmeans_schedule(_data(rows, "kmeans_batch='auto'").n_rows)[0]
            resolved["kmeans_batch_"] = batch
        else:
            batch = int(_check_number("kmeans_batch", self.kmeans_batch, low=0, integer=True))
        if isinstance(self.kmeans_iter, str):
            if self.kmeans_iter != "auto":
                raise ValueError(f"kmeans_iter={self.kmeans_iter!r}: must be an integer "
                                 f">= 1 or 'auto'")
            n_steps = kmeans_steps(batch)
            resolved["kmeans_iter_"] = n_steps
        else:
            n_steps = int(_check_number("kmeans_iter", self.kmeans_iter, low=1, integer=True))
        return batch, n_steps

    def _resolve_C(self, rows, km_rows, resolved):
        if isinstance(self.C, str):
            if self.C != "scale":
                raise ValueError(f"C={self.C!r}: must be a positive number or 'scale'")
            r = km_rows if km_rows is not None else _data(rows, "C='scale'")
            B = float(self.intercept_scaling) if self.fit_intercept else 0.0
            C = scale_C(r, B)
            resolved["C_"] = C
            return C
        return float(_check_number("C", self.C, low=0, low_open=True))

    def _params_from_model(self, model):
        super()._params_from_model(model)
        st = int(model.solver_type)
        self.solver = {1: "dual_cd", 3: "dual_cd", 2: "primal_newton", 4: "crammer_singer",
                       30: "sgd", 32: "averaged_sgd"}.get(st, "dual_cd")
        self.loss = "hinge" if st == 3 else None
        coder = getattr(model, "coding", None)
        if coder is not None:
            code = int(coder.kind)
            self.coding = _CODING_BY_CODE.get(code, "gaussian")
            self.n_anchors = int(coder.n_anchors)
            if code != 3:
                self.n_neighbors = int(coder.k)
            self.beta = None
            setattr(self, _CODING_PARAM.get(code, "beta"), float(coder.param))
        km = getattr(model, "kernel_map", None)
        if km is not None:
            self.kernel_map = _KERNEL_MAP_BY_CODE[km.kind]
            self.kernel_map_order = int(km.order)


# ----------------------------------------------------------------- AnchorPlanesSVC
_CLASSIFIERS = {"local": 1, "linear": 0, "linear_all": 2, "local_plane_bias": 3}
_CLASSIFIER_BY_NAME = {"LIB_LLSVM": "local", "PEG_LLSVM": "local", "LINEAR_CODES": "linear",
                       "LINEAR_ALL_CODES": "linear_all", "LIB_LLSVM_PB": "local_plane_bias"}
_PLANES = {"global": 4, "per_class": 5}


class AnchorPlanesSVC(_LcodingClassifier):
    """Anchor planes / orthogonal coordinate coding (Zhang et al. 2011): the code of
    ``x`` is its L1-normalised coordinates on the top ``n_planes`` right singular
    vectors (``planes='global'``, G-OCC; ``'per_class'``, C-OCC), and the classifier
    is locally linear on it (LIB-LLSVM with ``solver='dual_cd'``, PEG-LLSVM with
    ``'sgd'``) or linear on the codes.

    ``n_planes='auto'`` is 40 planes capped at the rows' rank (at most ``min(n, d)``;
    C-OCC: the smallest of a class's rows; measured on a sample of them,
    ``lcoding.methods.defaults.plane_rank``) with a ``UserWarning`` when capped;
    ``C='scale'`` as in
    :class:`LocallyLinearSVC`.  The parameter -> option letter table is
    ``_OPTION_TABLE`` (``docs/sklearn.md``).
    """

    _METHOD = "occ"
    _SAMPLE_WEIGHT = True
    AUTO_PLANES = 40
    _OPTION_TABLE = (
        Param("solver", "-s", "'dual_cd' (with loss) 1 / 3, 'sgd' 30, 'averaged_sgd' 32, "
                              "'primal_newton' 2 (linear classifiers only)"),
        _LOSS_DUAL_CD,
        Param("planes", "-L", "'global' 4 (G-OCC), 'per_class' 5 (C-OCC)"),
        Param("n_planes", "-A", "'auto': 40, capped at the rows' rank (at most min(n, d); "
                                "UserWarning)"),
        Param("classifier", "-u", "'local' 1 (LIB-/PEG-LLSVM), 'linear' 0 (on the codes), "
                                  "'linear_all' 2 (per_class only), 'local_plane_bias' 3"),
        _KERNEL_MAP,
        _KERNEL_MAP_ORDER,
        _C_SCALE,
        _MAX_ITER_SGD,
        _TOL,
        *_INTERCEPT_WEIGHTS_SEED,
        _N_JOBS,
        _VERBOSE,
    )

    def __init__(self, C="scale", n_planes="auto", planes="global", classifier="local",
                 solver="dual_cd", loss=None, kernel_map=None, kernel_map_order=1,
                 max_iter=None, tol=None, fit_intercept=True, intercept_scaling=1.0,
                 class_weight=None, probability=False, random_state=None, n_jobs=None,
                 verbose=0):
        self.C = C
        self.n_planes = n_planes
        self.planes = planes
        self.classifier = classifier
        self.solver = solver
        self.loss = loss
        self.kernel_map = kernel_map
        self.kernel_map_order = kernel_map_order
        self.max_iter = max_iter
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.class_weight = class_weight
        self.probability = probability
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _options(self, rows, y_train, sample_weight):
        resolved = {}
        code = _choice("planes", self.planes, _PLANES)
        kind = _choice("classifier", self.classifier, _CLASSIFIERS)
        if self.solver == "primal_newton" and kind not in (0, 2):
            raise ValueError("solver='primal_newton' (-s 2) trains the linear "
                             "classifiers on the codes only (classifier='linear' or "
                             "'linear_all')")
        st = _local_solver(self.solver, self.loss, allow_cs=False)
        km = _choice("kernel_map", self.kernel_map, _KERNEL_MAPS)
        order = int(_check_number("kernel_map_order", self.kernel_map_order, low=0,
                                  integer=True))
        if self.n_planes == "auto":
            r = _data(rows, "n_planes='auto'")
            d = r.n_features * (1 if not km else (1 if km == 3 else 2 * order + 1))
            cap = r.n_rows
            if code == 5:      # C-OCC: the planes of each class's rows
                classes = np.unique(y_train, return_inverse=True)[1]
                counts = np.bincount(classes)
                cap = int(counts.min())
            M = min(self.AUTO_PLANES, d, cap)
            if not km and M > 0:
                # the rows' rank, not only its bound min(n, d): constant or collinear
                # features left fewer non-zero singular values than planes, and the
                # basis refused them (a ValueError for a default); a kernel map's
                # features are not measured
                parts = ([r.take(np.flatnonzero(classes == c)) for c in range(counts.size)]
                         if code == 5 else [r])
                M = max(1, min(plane_rank(part, M, OCC_RANK_TOL) for part in parts))
            if M < self.AUTO_PLANES:
                warnings.warn(f"AnchorPlanesSVC: n_planes='auto' capped at {M} (the data "
                              f"allow at most {M} planes: the rows' rank, at most "
                              f"min(rows, features))", UserWarning)
            resolved["n_planes_"] = M
        else:
            M = int(_check_number("n_planes", self.n_planes, low=1, integer=True))
            if rows is not None and M > min(rows.n_rows, rows.n_features):
                raise ValueError(f"n_planes={M}: more planes than the rank bound "
                                 f"min(n_samples, n_features) of the data (n_samples = "
                                 f"{rows.n_rows}, n_features = {rows.n_features})")
        km_rows = None if rows is None or not km else _kernel_map_rows(rows, km, order)
        opts = [("-s", str(st)), ("-L", str(code)), ("-A", str(M)), ("-u", str(kind))]
        if km:
            opts += [("-K", str(km)), ("-O", str(order))]
        if self.max_iter is not None:       # -E: epochs of the SGD solvers (others: unused)
            opts.append(("-E", str(_check_number("max_iter", self.max_iter, low=1,
                                                 integer=True))))
        opts.append(("-c", _num(LocallyLinearSVC._resolve_C(self, rows, km_rows, resolved))))
        self._common_tail(opts, getattr(self, "_classes_int", None))
        return opts, resolved

    def _params_from_model(self, model):
        super()._params_from_model(model)
        st = int(model.solver_type)
        self.solver = {1: "dual_cd", 3: "dual_cd", 2: "primal_newton", 30: "sgd",
                       32: "averaged_sgd"}.get(st, "dual_cd")
        self.loss = "hinge" if st == 3 else None
        self.planes = "global" if model.coding_name == "G_OCC" else "per_class"
        self.classifier = _CLASSIFIER_BY_NAME[model.classifier]
        self.n_planes = int(model.n_planes)
        km = getattr(model, "kernel_map", None)
        if km is not None:
            self.kernel_map = _KERNEL_MAP_BY_CODE[km.kind]
            self.kernel_map_order = int(km.order)


# ----------------------------------------------------------------- LLCJointSVC
class LLCJointSVC(_LcodingClassifier):
    """LLC-SAPL / LLC-JO: joint SGD of the local weights and the anchors (``-s 31``;
    ``solver='averaged_sgd'``: the tail-averaged ``-s 33``), Gaussian (``coding=
    'gaussian'``, ``-L 2``, with ``beta``) or k* coding (``'kstar'``, ``-L 3``, with
    ``mu``).  ``n_anchors='auto'``, ``beta='scale'``, ``mu='scale'`` and ``C='scale'``
    as in :class:`LocallyLinearSVC`."""

    _METHOD = "llc_jo"
    _SAMPLE_WEIGHT = True
    _OPTION_TABLE = (
        Param("solver", "-s", "'sgd' 31, 'averaged_sgd' 33"),
        Param("coding", "-L", "'gaussian' 2 (LLC-SAPL), 'kstar' 3 (LLC-JO)"),
        _N_ANCHORS_AUTO,
        Param("n_neighbors", "-k", "coding='gaussian': nearest anchors"),
        Param("beta", "-u", "coding='gaussian' only; 'scale' as LocallyLinearSVC"),
        _MU_KSTAR,
        Param("anchor_lr", "-f", "anchor learning rate (0 freezes the anchors)"),
        Param("anchor_init", "-a", "as LocallyLinearSVC"),
        _KERNEL_MAP,
        _KERNEL_MAP_ORDER,
        _C_SCALE,
        Param("max_iter", "-E", "epochs (None: 10)"),
        Param("t0", "-T", "schedule offset (0: calibrated)"),
        *_INTERCEPT_WEIGHTS_SEED,
        _VERBOSE,
    )

    def __init__(self, C="scale", n_anchors="auto", n_neighbors=8, coding="gaussian",
                 beta="scale", mu=None, solver="averaged_sgd", anchor_lr=100.0,
                 anchor_init="kmeans", kernel_map=None, kernel_map_order=1, max_iter=None,
                 t0=0.0, fit_intercept=True, intercept_scaling=1.0, class_weight=None,
                 probability=False, random_state=None, verbose=0):
        self.C = C
        self.n_anchors = n_anchors
        self.n_neighbors = n_neighbors
        self.coding = coding
        self.beta = beta
        self.mu = mu
        self.solver = solver
        self.anchor_lr = anchor_lr
        self.anchor_init = anchor_init
        self.kernel_map = kernel_map
        self.kernel_map_order = kernel_map_order
        self.max_iter = max_iter
        self.t0 = t0
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.class_weight = class_weight
        self.probability = probability
        self.random_state = random_state
        self.verbose = verbose

    def _options(self, rows, y_train, sample_weight):
        resolved = {}
        st = _choice("solver", self.solver, {"sgd": 31, "averaged_sgd": 33})
        code = _choice("coding", self.coding, {"gaussian": 2, "kstar": 3})
        n_classes = None if y_train is None else np.unique(y_train).size
        if self.n_anchors == "auto":
            m = _auto_anchors(_data(rows, "n_anchors='auto'").n_rows, n_classes)
            resolved["n_anchors_"] = m
        else:
            m = int(_check_number("n_anchors", self.n_anchors, low=1, integer=True))
        k = min(int(_check_number("n_neighbors", self.n_neighbors, low=1, integer=True)), m)
        km = _choice("kernel_map", self.kernel_map, _KERNEL_MAPS)
        order = int(_check_number("kernel_map_order", self.kernel_map_order, low=0,
                                  integer=True))
        km_rows = None if rows is None or not km else _kernel_map_rows(rows, km, order)
        own, other = ("beta", "mu") if code == 2 else ("mu", "beta")
        if getattr(self, other) is not None and not (other == "beta" and self.beta == "scale"):
            raise ValueError(f"{other}={getattr(self, other)!r} is not a parameter of "
                             f"coding={self.coding!r} (use {own})")
        value = getattr(self, own)
        value = "scale" if value is None else value
        if value == "scale":
            scale = anchor_distance_scale(km_rows if km_rows is not None else _data(rows, own),
                                          m, k, _seed(self.random_state))
            u = BETA_SCALE_FACTOR / scale
            resolved[f"{own}_"] = u
        else:
            u = float(_check_number(own, value, low=0))
        opts = [("-s", str(st)), ("-L", str(code)), ("-A", str(m))]
        if code == 2:
            opts.append(("-k", str(k)))
        opts += [("-u", _num(u)), ("-a", str(_choice("anchor_init", self.anchor_init,
                                                     _ANCHOR_INIT))),
                 ("-f", _num(_check_number("anchor_lr", self.anchor_lr, low=0)))]
        if km:
            opts += [("-K", str(km)), ("-O", str(order))]
        if self.max_iter is not None:
            opts.append(("-E", str(_check_number("max_iter", self.max_iter, low=1,
                                                 integer=True))))
        if self.t0:
            opts.append(("-T", _num(_check_number("t0", self.t0, low=0))))
        opts.append(("-c", _num(LocallyLinearSVC._resolve_C(self, rows, km_rows, resolved))))
        self._common_tail(opts, getattr(self, "_classes_int", None))
        return opts, resolved

    def _params_from_model(self, model):
        super()._params_from_model(model)
        self.solver = "sgd" if int(model.solver_type) == 31 else "averaged_sgd"
        coder = model.coding
        self.coding = "kstar" if int(coder.kind) == 3 else "gaussian"
        self.n_anchors = int(coder.n_anchors)
        if self.coding == "gaussian":
            self.beta, self.n_neighbors = float(coder.param), int(coder.k)
        else:
            self.beta, self.mu = None, float(coder.param)


# ----------------------------------------------------------------- KQMetricsClassifier
class KQMetricsClassifier(_LcodingClassifier):
    """Discriminative k q-metrics (``solver='metrics'``, ``-s 40``) or supervised k
    q-flats (``'flats'``, ``-s 41``; Szlam & Sapiro 2009): ``n_clusters`` q-dimensional
    metrics per class, the class of the largest score wins.  ``solver='auto'``
    (default): the flats for three classes or more, the metrics for two
    (``solver_`` says which).

    ``q='auto'`` is 20 capped at the input dimension (with a ``UserWarning``) for
    the metrics, a quarter of the dimension for the flats: the PCA's, or fewer where
    the rows span fewer (``lcoding.methods.defaults.spanned_dimension``; rows spanning
    one dimension get the metrics from ``solver='auto'``);
    ``sphere='auto'`` projects onto the sphere for the metrics only, ``affine='auto'``
    makes the flats affine, ``n_clusters='auto'`` is 8 metrics or about 3 q class rows
    a flat (at most 32), ``n_restarts='auto'`` one set of metrics or 5 sets of flats,
    whose mean distance to each class decides (``lcoding.methods.defaults``; several
    sets of metrics vote); ``n_jobs`` runs the restarts side by
    side (the same model);
    ``pca_components='auto'`` is 50 capped at the features: the PCA centres the rows,
    and the metrics score subspaces through the origin, so raw features far from 0
    (letter's integers 0-15) need it even at full dimension (3-fold CV error on
    letter 53.9 % without, 10.5 % with).  No intercept and no class weights (the
    method has neither); no sample weights."""

    _METHOD = "kq"
    AUTO_Q = 20
    METRICS_CLUSTERS = 8
    AUTO_PCA = KQ_PCA
    _OPTION_TABLE = (
        Param("solver", "-s", "'metrics' 40, 'flats' 41; 'auto': flats for three classes "
                              "or more, else metrics"),
        Param("n_clusters", "-k", "metrics per class ('auto': metrics 8; flats about 3 q "
                                  "rows of a class each, at most 32)"),
        Param("q", "-Q", "'auto': metrics 20, capped at the input dimension (UserWarning); "
                         "flats a quarter of the dimension the rows span (after the "
                         "PCA)"),
        Param("pca_components", "-l", "'auto': 50 capped at the features (a centring "
                                      "PCA); None: no PCA"),
        Param("sphere", "-Z", "project onto the unit sphere ('auto': metrics yes, flats no)"),
        Param("offset", "-z", "constant coordinate appended (0: none)"),
        Param("affine", "-y", "solver='flats': affine flats ('auto': yes for the flats)"),
        Param("n_restarts", "-W", "restarts in one model ('auto': metrics 1, flats 5); "
                                  "affine flats average them, metrics vote"),
        Param("mu1", "-U", "own-class margin"),
        Param("mu2", "-V", "other-class margin"),
        Param("dt", "-D", "time step"),
        Param("max_iter", "-E", "passes (None: 10)"),
        _KERNEL_MAP,
        _KERNEL_MAP_ORDER,
        _RANDOM_STATE,
        _N_JOBS,
        _VERBOSE_PLAIN,
    )

    def __init__(self, solver="auto", n_clusters="auto", q="auto", pca_components="auto",
                 sphere="auto", offset=0.5, affine="auto", n_restarts="auto", mu1=1.05, mu2=0.95,
                 dt=0.1, max_iter=None, kernel_map=None, kernel_map_order=1,
                 probability=False, random_state=None, n_jobs=None, verbose=0):
        self.solver = solver
        self.n_clusters = n_clusters
        self.q = q
        self.pca_components = pca_components
        self.sphere = sphere
        self.offset = offset
        self.affine = affine
        self.n_restarts = n_restarts
        self.mu1 = mu1
        self.mu2 = mu2
        self.dt = dt
        self.max_iter = max_iter
        self.kernel_map = kernel_map
        self.kernel_map_order = kernel_map_order
        self.probability = probability
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _options(self, rows, y_train, sample_weight):
        resolved = {}
        auto_solver = self.solver == "auto"
        # 'auto' is the metrics until the classes and the dimension are known (below)
        st = _choice("solver", self.solver, {"auto": 40, "metrics": 40, "flats": 41})
        km = _choice("kernel_map", self.kernel_map, _KERNEL_MAPS)
        order = int(_check_number("kernel_map_order", self.kernel_map_order, low=0,
                                  integer=True))
        d = None
        if rows is not None:
            d = rows.n_features * (1 if not km else (1 if km == 3 else 2 * order + 1))
        if self.pca_components == "auto":
            p = min(self.AUTO_PCA, _data(rows, "pca_components='auto'") and d)
            resolved["pca_components_"] = p
        elif self.pca_components is None:
            p = 0
        else:
            p = int(_check_number("pca_components", self.pca_components, low=1, integer=True))
        spanned = None

        def flats_dim(what):
            # the dimension the flats live in: the PCA's (or the features'), at most
            # the dimension the rows span (lcoding.methods.defaults.spanned_dimension;
            # a kernel map's features are not measured)
            nonlocal spanned
            if spanned is None:
                dim = p or _data(rows, what) and d
                spanned = dim if km else spanned_dimension(_data(rows, what), dim)
            return spanned
        if auto_solver:
            # the flats' restarts where they suit (three classes or more, two dimensions
            # or more: lcoding.methods.defaults.flats_suit), else the metrics
            n_classes = int(np.unique(_data(y_train, "solver='auto'")).size)
            flats = flats_suit(n_classes, flats_dim("solver='auto'"))
            st = 41 if flats else 40
            resolved["solver_"] = "flats" if flats else "metrics"
        offset = float(_check_number("offset", self.offset, low=0))
        if self.q == "auto" and st == 41:
            # flats: a quarter of the dimension the flats live in (3-fold CV on the
            # training splits, lcoding.methods.defaults); q >= that dimension makes
            # every flat the whole space
            dim = flats_dim("q='auto'")
            if dim < 2:
                raise ValueError(f"KQMetricsClassifier(solver='flats'): q='auto' needs rows "
                                 f"spanning at least 2 dimensions, they span {dim}: a flat "
                                 f"of dimension 1 or more is then their whole span")
            q = flats_q(dim)
            resolved["q_"] = q
        elif self.q == "auto":
            dim = (p or _data(rows, "q='auto'") and d) + (1 if offset else 0)
            q = min(self.AUTO_Q, dim)
            if q < self.AUTO_Q:
                warnings.warn(f"KQMetricsClassifier: q='auto' capped at {q} (the input "
                              f"dimension)", UserWarning)
            resolved["q_"] = q
        else:
            q = int(_check_number("q", self.q, low=1, integer=True))
        if self.n_clusters == "auto":
            # the metrics: the paper's 8; the flats: about 3 q rows of a class each
            # (lcoding.methods.defaults.flats_clusters: 3-fold CV on letter, usps and
            # mnist's training splits)
            if st == 41:
                n_classes = int(np.unique(_data(y_train, "n_clusters='auto'")).size)
                n_clusters = flats_clusters(_data(rows, "n_clusters='auto'").n_rows,
                                            n_classes, q)
            else:
                n_clusters = self.METRICS_CLUSTERS
            resolved["n_clusters_"] = n_clusters
        else:
            n_clusters = _check_number("n_clusters", self.n_clusters, low=1, integer=True)
        opts = [("-s", str(st)), ("-k", str(n_clusters)), ("-Q", str(q))]
        if p:
            opts.append(("-l", str(p)))
        # 'auto': the metrics project onto the sphere (the paper's setting) and score
        # subspaces through the origin; the flats are affine and keep the raw
        # geometry (3-fold CV on the training splits: letter 6.5 % against 7.6 % with
        # the sphere and 10.8 % through the origin; benchmarks/results/notes/defaults.md)
        sphere = (st == 40) if self.sphere == "auto" else bool(self.sphere)
        affine = (st == 41) if self.affine == "auto" else bool(self.affine)
        if self.sphere == "auto":
            resolved["sphere_"] = sphere
        if self.affine == "auto":
            resolved["affine_"] = affine
        opts.append(("-Z", "1" if sphere else "0"))
        if offset:
            opts.append(("-z", _num(offset)))
        if affine:
            if st != 41:
                raise ValueError("affine=True: affine flats are solver='flats' (-s 41)")
            opts.append(("-y", "1"))
        if self.n_restarts == "auto":
            # the flats average FLATS_RESTARTS restarts (cheap, and the largest gain of
            # any flats setting: 3-fold CV on letter 4.17 -> 2.79 %, usps 1.91 -> 1.43 %,
            # mnist (16k rows) 3.14 -> 2.37 %); a metrics restart costs its passes
            restarts = FLATS_RESTARTS if st == 41 else 1
            resolved["n_restarts_"] = restarts
        else:
            restarts = _check_number("n_restarts", self.n_restarts, low=1, integer=True)
        opts.append(("-W", str(restarts)))
        if st == 40:
            opts += [("-U", _num(_check_number("mu1", self.mu1))),
                     ("-V", _num(_check_number("mu2", self.mu2))),
                     ("-D", _num(_check_number("dt", self.dt, low=0, low_open=True)))]
            if self.max_iter is not None:
                opts.append(("-E", str(_check_number("max_iter", self.max_iter, low=0,
                                                     integer=True))))
        if km:
            opts += [("-K", str(km)), ("-O", str(order))]
        self._common_tail(opts, None, intercept=False, weights=False)
        return opts, resolved

    def fit(self, X, y):
        """Fit on ``X``, ``y`` (k q-metrics take no sample weights)."""
        return super().fit(X, y)

    def _params_from_model(self, model):
        self.solver = "metrics" if int(model.solver_type) == 40 else "flats"
        self.n_clusters, self.q = int(model.k), int(model.q)
        self.n_restarts = int(model.n_restarts)
        self.pca_components = int(model.preprocess.pca_dim) or None
        self.sphere = bool(model.preprocess.sphere)
        self.offset = float(model.preprocess.offset)
        self.affine = bool(model.affine)


# ----------------------------------------------------------------- InvariantSVC
_KERNELS = {"linear": 0, "poly": 1, "rbf": 2, "sigmoid": 3, None: -1}
_KERNEL_BY_CODE = {v: k for k, v in _KERNELS.items()}
_INV_METHODS = {"kpca": 0, "ihkpca": 1, "isvm": 2, "vsv": 3, "ihkpca_virtual": 4}
_INV_BY_NAME = {"KPCA": "kpca", "IHKPCA": "ihkpca", "ISVM": "isvm", "VSV": "vsv",
                "IHKPCA_VIRTUAL": "ihkpca_virtual"}
_TANGENTS = {None: 0, "horizontal": 1, "vertical": 2, "both": 3}


class InvariantSVC(_LcodingClassifier):
    """Kernel SVMs by a kernel PCA map on ``n_landmarks`` landmark rows (``method=
    'kpca'``), and the invariant SVMs of Chapelle & Schoelkopf (2001): IHKPCA, ISVM,
    VSV and IHKPCA on landmarks plus their translated copies, invariant to one-pixel
    translations of ``image_shape`` images (``tangents``).

    ``gamma='scale'`` is scikit-learn's ``1 / (n_features X.var())``;
    ``n_landmarks='auto'`` is 1000 capped at n; of those drawn, a linear, RBF or
    polynomial map keeps only the ones its span needs (the pivots of their Gram
    matrix's pivoted Cholesky, to 1e-8 of its largest eigenvalue: on smooth
    low-dimensional data far fewer, and prediction costs one kernel value per kept
    landmark).  ``background`` (no option letter;
    the option string's translations fill vacated pixels with 0) is the value of
    vacated pixels; an estimator with ``background != 0`` has no equivalent option
    string (``to_options`` raises)."""

    _METHOD = "invariant"
    _SAMPLE_WEIGHT = False
    AUTO_LANDMARKS = 1000
    _OPTION_TABLE = (
        Param("kernel", "-t", "'linear' 0, 'poly' 1, 'rbf' 2, 'sigmoid' 3, None: no kernel"),
        Param("gamma", "-g", "'scale': 1 / (n_features X.var()); 'auto': 1 / n_features"),
        Param("degree", "-d", "polynomial degree"),
        Param("coef0", "-r", "kernel coef0"),
        Param("method", "-H", "'kpca' 0, 'ihkpca' 1, 'isvm' 2, 'vsv' 3, 'ihkpca_virtual' 4"),
        Param("tangents", "-J", "None 0, 'horizontal' 1, 'vertical' 2, 'both' 3"),
        Param("image_shape", "-N", "(height, width): -N width"),
        Param("invariance", "-Y", "invariance weight gamma in [0, 1)"),
        Param("n_landmarks", "-X", "'auto': 1000 capped at n"),
        Param("solver", "-s", "the linear solver on the map (LinearClassifier's names)"),
        Param("loss", "-s", "with solver"),
        _C_PLAIN,
        _TOL,
        *_INTERCEPT_WEIGHTS_SEED,
        _VERBOSE,
    )

    def __init__(self, C=1.0, kernel="rbf", gamma="scale", degree=3, coef0=0.0,
                 method="kpca", tangents=None, image_shape=None, invariance=0.0,
                 n_landmarks="auto", background=0.0, solver="dual_cd", loss=None, tol=None,
                 fit_intercept=True, intercept_scaling=1.0, class_weight=None,
                 probability=False, random_state=None, verbose=0):
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.method = method
        self.tangents = tangents
        self.image_shape = image_shape
        self.invariance = invariance
        self.n_landmarks = n_landmarks
        self.background = background
        self.solver = solver
        self.loss = loss
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.class_weight = class_weight
        self.probability = probability
        self.random_state = random_state
        self.verbose = verbose

    def to_options(self):
        if float(self.background) != 0.0:
            raise ValueError(f"background={self.background!r} has no option letter (the "
                             f"option string's translations fill vacated pixels with 0)")
        return super().to_options()

    def _options(self, rows, y_train, sample_weight):
        resolved = {}
        t = _choice("kernel", self.kernel, _KERNELS)
        H = _choice("method", self.method, _INV_METHODS)
        J = _choice("tangents", self.tangents, _TANGENTS)
        opts = []
        if t >= 0:
            opts.append(("-t", str(t)))
            if t != 0:
                if self.gamma in ("scale", "auto"):
                    r = _data(rows, f"gamma={self.gamma!r}")
                    d = max(r.n_features, 1)
                    if self.gamma == "scale":
                        n = max(r.n_rows, 1)
                        mean = np.bincount(r.indices, weights=r.data, minlength=d) / n
                        sq = float(np.dot(r.data, r.data)) / (n * d)
                        var = sq - float(np.mean(mean ** 2))
                        g = 1.0 / (d * var) if var > 0 else 1.0
                    else:
                        g = 1.0 / d
                    resolved["gamma_"] = g
                else:
                    g = float(_check_number("gamma", self.gamma, low=0, low_open=True))
                opts.append(("-g", _num(g)))
            if t == 1:
                opts.append(("-d", str(_check_number("degree", self.degree, low=0,
                                                     integer=True))))
            if t in (1, 3):
                opts.append(("-r", _num(_check_number("coef0", self.coef0))))
        if H:
            opts.append(("-H", str(H)))
        if J:
            opts.append(("-J", str(J)))
            if self.image_shape is not None:
                h, w = (int(v) for v in self.image_shape)
                if rows is not None and h * w != rows.n_features:
                    raise ValueError(f"image_shape={tuple(self.image_shape)}: {h * w} pixels, "
                                     f"the data have {rows.n_features} features")
                opts.append(("-N", str(w)))
        elif self.image_shape is not None:
            raise ValueError("image_shape is only used with tangents")
        if self.invariance:
            opts.append(("-Y", _num(_check_number("invariance", self.invariance, low=0))))
        if H in (0, 1, 4) and t >= 0:
            if self.n_landmarks == "auto":
                X_ = min(self.AUTO_LANDMARKS, _data(rows, "n_landmarks='auto'").n_rows)
                resolved["n_landmarks_"] = X_
            else:
                X_ = int(_check_number("n_landmarks", self.n_landmarks, low=1, integer=True))
            opts.append(("-X", str(X_)))
        st = _linear_solver(self.solver, self.loss, "l2")
        opts.insert(0, ("-s", str(st)))
        opts.append(("-c", _num(_check_number("C", self.C, low=0, low_open=True))))
        self._common_tail(opts, getattr(self, "_classes_int", None))
        if not (t >= 0 or H or J):
            raise ValueError("InvariantSVC needs a kernel, a method other than 'kpca' or "
                             "tangents (else use LinearClassifier)")
        return opts, resolved

    def _train(self, y_train, rows, params, progress, sample_weight, seed_path=()):
        if float(self.background) != 0.0:
            return METHOD_BY_NAME["invariant"].train(y_train, rows, params, progress,
                                                      seed_path=seed_path,
                                                      background=float(self.background))
        return super()._train(y_train, rows, params, progress, sample_weight, seed_path)

    def fit(self, X, y):
        """Fit on ``X``, ``y`` (no sample weights: the kernel methods take none)."""
        super().fit(X, y)
        if float(self.background) != 0.0:
            del self.options_          # no option string trains this model
        return self

    def _params_from_model(self, model):
        super()._params_from_model(model)
        kernel = getattr(model, "kernel", None)
        if kernel is not None:
            self.kernel = _KERNEL_BY_CODE.get(int(getattr(kernel, "kernel_type", 2)), "rbf")
            if hasattr(kernel, "gamma"):
                self.gamma = float(kernel.gamma)
        method = getattr(model, "method", None)
        if method in _INV_BY_NAME:
            self.method = _INV_BY_NAME[method]


# ----------------------------------------------------------------- LinearClassifier
_LINEAR_TABLE = {
    ("l2", "log", "primal_newton"): 0,
    ("l2", "squared_hinge", "dual_cd"): 1,
    ("l2", "squared_hinge", "primal_newton"): 2,
    ("l2", "hinge", "dual_cd"): 3,
    ("l1", "squared_hinge", "cd"): 5,
    ("l1", "log", "cd"): 6,
    ("l2", "log", "dual_cd"): 7,
    ("l2", "hinge", "sgd"): 30,
    ("l2", "hinge", "averaged_sgd"): 32,
}
_LINEAR_BY_CODE = {v: k for k, v in _LINEAR_TABLE.items()}


def _auto_linear_solver(loss, penalty, n_rows: int, n_features: int) -> str:
    """``solver='auto'``: the primal Newton solver where (penalty, loss) has one and the
    rows outnumber the features, else the dual (or, for L1, the primal) coordinate
    descent -- the rule of scikit-learn's ``LinearSVC(dual='auto')``.  Why: with many
    more rows than features the dual CD's passes cost a sweep over the rows each and
    often reach LIBLINEAR's cap (skin, 163 371 rows of 3 unscaled features: 11.6 s
    against 0.07 s; letter 8.8 s against 0.64 s; mnist 61 s against 8.8 s; the same
    test error to the solvers' tolerances); with more features than rows (text) the
    dual is the faster (reuters: equal)."""
    loss = "squared_hinge" if loss is None else loss
    if n_rows > n_features and (penalty, loss, "primal_newton") in _LINEAR_TABLE:
        return "primal_newton"
    return "dual_cd" if (penalty, loss, "dual_cd") in _LINEAR_TABLE else "cd"


def _linear_solver(solver, loss, penalty, auto: bool = False):
    if solver == "crammer_singer":
        return 4
    if loss is None:
        loss = {"dual_cd": "squared_hinge", "primal_newton": "squared_hinge",
                "cd": "squared_hinge", "sgd": "hinge", "averaged_sgd": "hinge"}.get(solver)
        if loss is None:
            raise ValueError(f"solver={solver!r}: must be one of 'dual_cd', 'primal_newton', "
                             f"'cd', 'sgd', 'averaged_sgd', 'crammer_singer'"
                             + (" or 'auto'" if auto else ""))
    key = (penalty, loss, solver)
    if key not in _LINEAR_TABLE:
        raise ValueError(f"penalty={penalty!r}, loss={loss!r}, solver={solver!r}: no LIBLINEAR "
                         f"solver (available: " + "; ".join(
                             f"{p}/{lo}/{s} = -s {c}" for (p, lo, s), c in
                             _LINEAR_TABLE.items()) + "; crammer_singer = -s 4)")
    return _LINEAR_TABLE[key]


class LinearClassifier(_LcodingClassifier):
    """LIBLINEAR's classification solvers: ``(penalty, loss, solver)`` picks ``-s``::

        l2 log           primal_newton 0 / dual_cd 7      (logistic regression)
        l2 squared_hinge dual_cd 1 / primal_newton 2
        l2 hinge         dual_cd 3 / sgd 30 / averaged_sgd 32
        crammer_singer   4
        l1 squared_hinge cd 5;  l1 log cd 6

    ``solver='auto'`` (the default): ``primal_newton`` where the loss has it and the
    rows outnumber the features, else ``dual_cd`` (L1: ``cd``), as scikit-learn's
    ``LinearSVC(dual='auto')`` -- on many rows of few features the dual CD is slow
    (skin: 11.6 against 0.07 s, the same model).  ``solver='dual_cd'`` is LIBLINEAR's
    own default (``-s 1``).  ``C=1`` as LIBLINEAR (a number; no data-dependent default).  Logistic-regression
    models give ``predict_proba`` without ``probability=True`` (LIBLINEAR's ``-b 1``
    values)."""

    _METHOD = "linear"
    _SAMPLE_WEIGHT = True
    _OPTION_TABLE = (
        Param("penalty", "-s", "'l2' or 'l1' (with loss, solver)"),
        Param("loss", "-s", "'squared_hinge', 'hinge', 'log' (None: the solver's)"),
        Param("solver", "-s", "'auto' (primal Newton for more rows than features, else "
                              "the dual CD), 'dual_cd', 'primal_newton', 'cd', 'sgd', "
                              "'averaged_sgd', 'crammer_singer'"),
        _C_PLAIN,
        _MAX_ITER_SGD,
        _TOL,
        *_INTERCEPT_WEIGHTS_SEED,
        _N_JOBS,
        _VERBOSE_PLAIN,
    )

    def __init__(self, C=1.0, penalty="l2", loss=None, solver="auto", max_iter=None,
                 tol=None, fit_intercept=True, intercept_scaling=1.0, class_weight=None,
                 probability=False, random_state=None, n_jobs=None, verbose=0):
        self.C = C
        self.penalty = penalty
        self.loss = loss
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.class_weight = class_weight
        self.probability = probability
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _options(self, rows, y_train, sample_weight):
        resolved = {}
        solver = self.solver
        if solver == "auto":
            data = _data(rows, "solver='auto'")
            solver = resolved["solver_"] = _auto_linear_solver(self.loss, self.penalty,
                                                               data.n_rows, data.n_features)
        st = _linear_solver(solver, self.loss, self.penalty, auto=True)
        opts = [("-s", str(st))]
        if self.max_iter is not None:       # -E: epochs of the SGD solvers (others: unused)
            opts.append(("-E", str(_check_number("max_iter", self.max_iter, low=1,
                                                 integer=True))))
        opts.append(("-c", _num(_check_number("C", self.C, low=0, low_open=True))))
        self._common_tail(opts, getattr(self, "_classes_int", None))
        if sample_weight is not None and st == 4:
            raise ValueError("sample_weight: solver='crammer_singer' (-s 4) cannot take "
                             "per-sample weights; use solver='dual_cd'")
        return opts, resolved

    def _has_proba(self):
        return bool(self.probability) or self.loss == "log"

    def _predict_proba(self, X):
        """Platt scaling with ``probability=True``; else logistic regression's own
        probabilities (LIBLINEAR's ``-b 1``)."""
        if self.probability:
            return super()._predict_proba(X)
        rows = self._rows(X)
        P = self.model_.probabilities_from_values(self.model_.decision_values(rows))
        out = np.zeros((rows.n_rows, self.classes_.size))
        out[:, self._label_pos] = P[:, :self._label_pos.size]
        return out

    def _params_from_model(self, model):
        super()._params_from_model(model)
        st = int(model.solver_type)
        if st == 4:
            self.solver, self.loss, self.penalty = "crammer_singer", None, "l2"
        elif st in _LINEAR_BY_CODE:
            self.penalty, self.loss, self.solver = _LINEAR_BY_CODE[st]


# ----------------------------------------------------------------- AutoLocalClassifier
def _log_lines(name, verbose):
    """An ``info`` for :func:`lcoding.select.select`: its lines logged with
    ``verbose >= 1`` (one per trial)."""
    def info(text):
        if verbose >= 1:
            for line in text.splitlines():
                if line.strip():
                    LOG.info("%s: %s", name, line)
    return info


class AutoLocalClassifier(_LcodingClassifier):
    """The method and its parameters chosen on the training rows, under a time budget:
    :func:`lcoding.select.select` (successive halving over the linear SVM, LL-SVM with
    the Gaussian, inverse-distance and k* codings, the Hellinger map for
    non-negative data, anchor planes, k q-metrics and k q-flats, and the RBF kernel
    PCA map, on ``cv``-fold cross-validation of growing seeded subsets of the rows;
    a k q model cheaper to predict that the folds cannot tell from the winner takes
    its place, and affine k q-flats get the screen their folds allow, ``-U``), then
    the winner refitted on all training rows.

    Parameters (option letter)
    --------------------------
    budget_s : float (-b of ``-C -L auto``)
        Seconds for the whole fit: the search and the final refit on all rows (the
        refit predicted from the candidates' trials).  A rung whose predicted time
        and refit do not fit runs only its best-ranked candidates that do (at least
        two), no trial starts that would leave no room for a refit, a trial that
        runs into that room is stopped within a solver pass, and the winner is
        the best-ranked candidate whose refit fits; a budget too small for one
        candidate fits the linear SVM ``-s 2 -B 1 -c 1`` (``selection_.note`` says
        so).
    cv : int (-v)
        Folds of the search's cross-validation (the folds of ``-v``), >= 2.
    n_jobs : int or None (-m)
        Candidates of a rung side by side on ``n_jobs`` threads (same trials) and the
        refit with ``-m n_jobs``; -1: all cores.
    random_state : int, RandomState or None (-S; None -> 1)
        The seed of the candidates' widths, the rows of each rung, the folds and the
        refit: the same seed gives the same model while the budget does not cut the
        schedule (where it cuts depends on the machine's speed).
    verbose : int (-q unless verbose >= 2)
        1 logs one line per trial and the winner (logger ``lcoding``); 2 also prints
        the refit's LIBLINEAR text.

    Fitted attributes: ``best_options_`` (the winner's options, without ``-S -m
    -q``), ``cv_error_`` (its CV error in percent at the rung that chose it; None
    when no candidate ran), ``selection_`` (the :class:`lcoding.select.Selection`:
    ``.trials``, ``.table()``, ``.note``, ``.seconds``), ``options_`` (the refit's
    option string, :meth:`to_options`), ``model_``, ``classes_``,
    ``n_features_in_``, ``fit_time_``.  No ``sample_weight``: the search's
    cross-validation has no row weights.
    """

    _METHOD = "auto"
    _SAMPLE_WEIGHT = False
    _OPTION_TABLE = (
        Param("budget_s", "-b", "seconds for the search and the refit on all rows; too "
                                "small for one candidate: -s 2 -B 1 -c 1"),
        Param("cv", "-v", "folds of the search's cross-validation (>= 2)"),
        Param("n_jobs", "-m", "threads: a rung's candidates side by side, and the refit "
                              "(None: 1, -1: all cores)"),
        _RANDOM_STATE,
        Param("verbose", "-q", "0, 1: -q (1 logs one line per trial); 2: LIBLINEAR's text "
                               "of the refit"),
    )

    def __init__(self, budget_s=60.0, cv=3, n_jobs=1, random_state=None, verbose=0):
        self.budget_s = budget_s
        self.cv = cv
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _options(self, rows, y_train, sample_weight):
        budget = float(_check_number("budget_s", self.budget_s, low=0, low_open=True))
        folds = int(_check_number("cv", self.cv, low=2, integer=True))
        threads = _threads(self.n_jobs)
        verbose = int(self.verbose)
        _data(rows, "the method and its parameters (chosen by the search)")
        seed = _seed(self.random_state)         # one draw: the search's and the refit's
        name = type(self).__name__
        # budget_s bounds the whole fit: the search gets what the input checks left,
        # and plans for the refit that fit() then runs (the search alone used to take
        # all of it: letter at 8 s, 7.9 s of search and the flats' 0.6 s refit after)
        started = getattr(self, "_fit_started", None)
        spent = time.perf_counter() - started if started is not None else 0.0
        selection = select(y_train, rows, budget_s=max(budget - spent, MIN_SEARCH_S),
                           seed=seed, nr_fold=folds, n_threads=threads, refit=False,
                           plan_refit=True, info=_log_lines(name, verbose))
        if verbose >= 1:
            err = "none ran" if selection.cv_error is None else f"{selection.cv_error:.2f} %"
            LOG.info("%s: chose %s (CV error %s) in %.2f s of %.4g s%s", name,
                     selection.best_options, err, selection.seconds, budget,
                     f"; {selection.note}" if selection.note else "")
        opts = [(selection.best_options, None), ("-S", str(seed))]
        if threads != 1:
            opts.append(("-m", str(threads)))
        if verbose < 2:
            opts.append(("-q", None))
        resolved = {"best_options_": selection.best_options, "cv_error_": selection.cv_error,
                    "selection_": selection}
        return opts, resolved

    def fit(self, X, y):
        """Search on ``X``, ``y`` and refit the winner on all rows (no sample weights:
        the search's cross-validation has none), within ``budget_s`` in all."""
        self._fit_started = time.perf_counter()
        try:
            return super().fit(X, y)
        finally:
            del self._fit_started

    def _params_from_model(self, model):
        """A model file records the method, not the search: nothing to set."""


ESTIMATORS = (LocallyLinearSVC, AnchorPlanesSVC, LLCJointSVC, KQMetricsClassifier,
              InvariantSVC, LinearClassifier, AutoLocalClassifier)


def option_tables_markdown() -> str:
    """The parameter -> option letter table of every estimator (``docs/sklearn.md``)."""
    out = []
    for cls in ESTIMATORS:
        out += [f"### `{cls.__name__}`", "", "| parameter | option | values / default rule |",
                "| --- | --- | --- |"]
        for p in cls._OPTION_TABLE:
            letter = "(none)" if p.letter is None else f"`{p.letter}`"
            out.append(f"| `{p.name}` | {letter} | {p.doc} |")
        out.append("")
    return "\n".join(out)
