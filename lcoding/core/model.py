"""Trained models: what prediction needs, and nothing that executes.

:class:`LinearModel` is LIBLINEAR's model exactly: ``w`` is the feature-major
``(w_size, nr_w)`` matrix of the model file (``w_size = nr_feature + (bias >= 0)``,
``nr_w = 1`` for binary non-Crammer-Singer, regression and one-class models, else
``nr_class``).  Locally linear models (later issues) subclass :class:`Model` and
add their coding; the interfaces only use the methods defined here.
"""
from __future__ import annotations

import abc
import math

import numpy as np

from lcoding.core._predict import linear_decision_values
from lcoding.core.rows import INT32_MAX, Rows
from lcoding.core.options import PROBABILITY_SOLVERS, REGRESSION_SOLVERS, SolverType

# Largest magnitude of a number a model may hold.  No training run on finite data
# gets near it; a model file beyond it is corrupt, and its squares and products
# (distances to anchors, metric scores, kernel values) would overflow to inf/nan.
VALUE_LIMIT = 1e100

# solver types whose models are LIBLINEAR's linear models (the others need their
# method's coding block in a model file)
LINEAR_SOLVER_TYPES = frozenset(int(st) for st in SolverType) - {
    int(SolverType.LLC_JOINT_SGD), int(SolverType.LLC_JOINT_SGD_AVERAGED),
    int(SolverType.KQ_METRICS), int(SolverType.KQ_FLATS)}


class ModelFieldError(ValueError):
    """A model field holds a value training never produces.  ``key`` names the
    field (a header key such as ``gamma`` or a block such as ``w``), so that the
    model-file reader can point at its line."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def check_number(key: str, value, *, lo=None, hi=None, lo_open=False, hi_open=False,
                 what: str = "") -> float:
    """``value`` as a float, finite, within ``VALUE_LIMIT`` and the given range;
    else a :class:`ModelFieldError` naming ``key``."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ModelFieldError(key, f"{key} {value!r} is not a number") from None
    bad = not math.isfinite(x) or abs(x) > VALUE_LIMIT
    if not bad and lo is not None:
        bad = x <= lo if lo_open else x < lo
    if not bad and hi is not None:
        bad = x >= hi if hi_open else x > hi
    if bad:
        rng = []
        if lo is not None:
            rng.append(f"{'>' if lo_open else '>='} {lo:g}")
        if hi is not None:
            rng.append(f"{'<' if hi_open else '<='} {hi:g}")
        rule = " and ".join(rng) if rng else f"at most {VALUE_LIMIT:g} in magnitude"
        raise ModelFieldError(key, f"{key} {value!r}: {what or 'must be'} finite and {rule}")
    return x


def check_count(key: str, value, lo: int = 0, hi: int | None = None) -> int:
    """``value`` as an int in ``[lo, hi]``; else a :class:`ModelFieldError` naming ``key``."""
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        raise ModelFieldError(key, f"{key} {value!r} is not an integer") from None
    if n < lo or (hi is not None and n > hi):
        rule = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ModelFieldError(key, f"{key} {n} must be {rule}")
    return n


def check_block(key: str, block: np.ndarray) -> np.ndarray:
    """Every value of ``block`` finite and within ``VALUE_LIMIT``."""
    block = np.asarray(block, dtype=np.float64)
    bad = ~(np.abs(block) <= VALUE_LIMIT)          # catches nan too
    if bad.any():
        v = float(block.reshape(-1)[int(np.flatnonzero(bad.reshape(-1))[0])])
        raise ModelFieldError(key, f"{key} block holds {v!r}: values must be finite and at "
                                   f"most {VALUE_LIMIT:g} in magnitude")
    return block


def overflow_error(rows: Rows, i: int, what: str, first_row: int = 0) -> ValueError:
    """The error for row ``i`` of ``rows`` (reported as row ``first_row + i + 1``)
    whose ``what`` went past the float range at prediction."""
    return ValueError(f"x: row {first_row + i + 1}: its {what} (largest |value| "
                      f"{rows.largest_magnitude(i):.3g}); scale the features as the training "
                      f"rows were")


def model_blocks(model: "Model") -> list:
    """``(name, array)`` of every number a model holds besides its header fields:
    its file blocks (lcoding's models), LIBLINEAR's ``w`` (linear models) and the
    one-class offset ``rho``."""
    file_blocks = getattr(model, "file_blocks", None)
    blocks = list(file_blocks()) if file_blocks is not None else [("w", model.w)]
    if model.is_oneclass_model():
        blocks.append(("rho", np.array([float(getattr(model, "rho", 0.0))])))
    return blocks


def check_trained(model: "Model", largest_input=None) -> "Model":
    """Training's last step: every number of ``model`` checked as the model-file
    loader checks it (finite, at most ``VALUE_LIMIT`` in magnitude), so that no
    training returns a model that predicts NaN or writes a file that will not load.
    ``largest_input`` (optional; called only on failure) gives the largest magnitude
    in the training rows, named in the message: values near the top of the
    float range make the solvers' squared norms and distances overflow (dual logistic
    regression on a row holding 1e300, or anchors that are such rows)."""
    for key, block in model_blocks(model):
        try:
            check_block(key, block)
        except ModelFieldError as err:
            scale = "" if largest_input is None else \
                f"the largest |value| in x is {largest_input():.3g}: "
            raise ValueError(f"training produced a model it cannot keep ({err}); "
                             f"{scale}scale the features (e.g. to [-1, 1]) or lower -c"
                             ) from None
    return model


class Model(abc.ABC):
    """Common surface of every lcoding model (subclasses define decision_values)."""
    solver_type: int
    nr_class: int
    nr_feature: int
    label: np.ndarray | None
    bias: float

    def _set_header(self, solver_type, nr_class, label, nr_feature, bias) -> None:
        """LIBLINEAR's header fields, normalised (every model file starts with them)
        and checked as training would make them (:func:`check_header`)."""
        self.solver_type, self.nr_class, self.label, self.nr_feature, self.bias = \
            check_header(solver_type, nr_class, label, nr_feature, bias)

    @staticmethod
    def _checked_weights(w, rows: int, nr_w: int, vector_ok: bool = False) -> np.ndarray:
        """``w`` as a C-contiguous float64 ``(rows, nr_w)`` matrix (with ``vector_ok``
        a vector is one column), or a ValueError naming both shapes."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        if vector_ok and w.ndim == 1:
            w = w.reshape(-1, 1)
        if w.shape != (rows, nr_w):
            raise ValueError(f"weight matrix has shape {w.shape}, expected {(rows, nr_w)}")
        return w

    def is_regression_model(self) -> bool:
        return self.solver_type in REGRESSION_SOLVERS

    def is_oneclass_model(self) -> bool:
        return self.solver_type == SolverType.ONECLASS_SVM

    def is_probability_model(self) -> bool:
        return self.solver_type in PROBABILITY_SOLVERS

    @property
    def nr_w(self) -> int:
        if self.nr_class == 2 and self.solver_type != SolverType.MCSVM_CS:
            return 1
        return self.nr_class

    def decision_values(self, rows: Rows, **options) -> np.ndarray:
        """Decision values ``(n_rows, nr_w)`` of validated rows (``options``: the
        model's own, e.g. ``n_threads``).  Never NaN: a row whose values overflow to
        inf - inf (finite values near the float limit, against weights of both signs)
        is a ValueError that names it; a single overflowing score stays +-inf, as
        LIBLINEAR's."""
        values = self._decision_values(rows, **options)
        bad = np.isnan(values)
        if bad.any():
            raise overflow_error(rows, int(np.flatnonzero(bad.any(axis=1))[0]),
                                 "decision values overflow to NaN")
        return values

    @abc.abstractmethod
    def _decision_values(self, rows: Rows, **options) -> np.ndarray:
        """The model's decision values (:meth:`decision_values` checks them)."""

    def predict_labels(self, rows: Rows, **options) -> np.ndarray:
        """The predicted labels of validated rows: :meth:`labels_from_values` of
        :meth:`decision_values`.  A model may reach the same labels with less work
        when the caller does not need the values (k q-flats' vote)."""
        return self.labels_from_values(self.decision_values(rows, **options))

    def labels_from_values(self, dec: np.ndarray) -> np.ndarray:
        """LIBLINEAR's predict_values rule, vectorised over rows."""
        n = dec.shape[0]
        if self.is_regression_model():
            return dec[:, 0].copy()
        if self.is_oneclass_model():
            return np.where(dec[:, 0] > 0, 1.0, -1.0)
        label = np.asarray(self.label if self.label is not None else [], dtype=np.float64)
        if self.nr_class == 2:
            # NaN > 0 is False, so a NaN value predicts label[1], as in LIBLINEAR
            return np.where(dec[:, 0] > 0, label[0], label[1])
        if self.nr_class == 0:
            return np.zeros(n)
        if self.nr_class == 1:
            return np.full(n, label[0])
        return label[np.argmax(dec, axis=1)]  # first maximum wins, as in LIBLINEAR

    def probabilities_from_values(self, dec: np.ndarray) -> np.ndarray:
        """Logistic outputs (LIBLINEAR's predict_probability) for LR models."""
        if not self.is_probability_model():
            raise TypeError("probability output is only supported for logistic regression")
        with np.errstate(over="ignore"):
            p = 1.0 / (1.0 + np.exp(-dec))
        if self.nr_class == 2:
            return np.column_stack([p[:, 0], 1.0 - p[:, 0]])
        with np.errstate(invalid="ignore", divide="ignore"):
            return p / p.sum(axis=1, keepdims=True)


def check_header(solver_type, nr_class, label, nr_feature, bias):
    """LIBLINEAR's header fields as training makes them, normalised: a known solver
    type; classifiers with ``nr_class >= 1`` distinct labels (training refuses empty
    data, so LIBLINEAR's ``nr_class 0`` model of no data is refused), regression and
    one-class models with ``nr_class 2``; ``0 <= nr_feature <= 2**31 - 1``; a finite
    bias (``< 0`` for one-class models, which take none).  Raises
    :class:`ModelFieldError`."""
    try:
        st = SolverType(int(solver_type))
    except (TypeError, ValueError):
        raise ModelFieldError("solver_type", f"unknown solver type {solver_type!r}") from None
    nr_feature = check_count("nr_feature", nr_feature, 0, INT32_MAX)
    bias = check_number("bias", bias)
    classifier = st not in REGRESSION_SOLVERS and st != SolverType.ONECLASS_SVM
    if classifier:
        if nr_class == 0:
            raise ModelFieldError("nr_class", "nr_class 0: a classifier needs at least one class "
                                              "(training refuses empty data; LIBLINEAR's model "
                                              "of no data predicts nothing)")
        nr_class = check_count("nr_class", nr_class, 1)
        if label is None:
            raise ModelFieldError("label", f"a {st.name} model needs its {nr_class} labels")
        label = np.asarray(label)
        if label.ndim != 1 or label.shape[0] != nr_class:
            raise ModelFieldError("label", f"label: expected {nr_class} labels, found "
                                           f"{label.size}")
        if label.dtype.kind not in "iuf" or (label.size and not (
                (np.trunc(label) == label).all() and label.min() >= -2 ** 31
                and label.max() <= INT32_MAX)):
            raise ModelFieldError("label", "labels must be 32-bit integers")
        if np.unique(label).size != nr_class:
            raise ModelFieldError("label", f"label {' '.join(str(v) for v in label.tolist())}: "
                                           f"the labels must be distinct")
        label = label.astype(np.int32)
    else:
        nr_class = check_count("nr_class", nr_class, 2, 2)
        label = None if label is None else np.asarray(label, dtype=np.int32)
    if st == SolverType.ONECLASS_SVM and bias >= 0:
        raise ModelFieldError("bias", f"bias {bias:g}: a one-class model takes no bias "
                                      f"(LIBLINEAR's check_parameter refuses -B >= 0 with -s 21)")
    return int(st), nr_class, label, nr_feature, bias


class LinearModel(Model):
    """LIBLINEAR's linear model (any solver type that trains one)."""

    def __init__(self, solver_type, nr_class, label, nr_feature, bias, w, rho=0.0, param=None):
        self._set_header(solver_type, nr_class, label, nr_feature, bias)
        if self.solver_type not in LINEAR_SOLVER_TYPES:
            raise ModelFieldError("solver_type", f"solver_type {SolverType(self.solver_type).name} "
                                                 f"does not train a linear model")
        self.rho = check_number("rho", rho)
        self.param = param
        self.w = self._checked_weights(w, self.nr_feature + (1 if self.bias >= 0 else 0),
                                       self.nr_w, vector_ok=True)

    @property
    def w_size(self) -> int:
        return self.w.shape[0]

    def _decision_values(self, rows: Rows) -> np.ndarray:
        out = np.empty((rows.n_rows, self.nr_w), dtype=np.float64)
        linear_decision_values(rows.data, rows.indices, rows.indptr, self.w,
                               self.nr_feature, self.bias, out)
        if self.is_oneclass_model():
            out[:, 0] -= self.rho
        return out

    def __repr__(self):
        name = SolverType(self.solver_type).name
        return (f"LinearModel({name}, nr_class={self.nr_class}, nr_feature={self.nr_feature}, "
                f"bias={self.bias:g})")
