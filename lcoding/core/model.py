"""Trained models: what prediction needs, and nothing that executes.

:class:`LinearModel` is LIBLINEAR's model exactly: ``w`` is the feature-major
``(w_size, nr_w)`` matrix of the model file (``w_size = nr_feature + (bias >= 0)``,
``nr_w = 1`` for binary non-Crammer-Singer, regression and one-class models, else
``nr_class``).  Locally linear models (later issues) subclass :class:`Model` and
add their coding; the interfaces only use the methods defined here.
"""
from __future__ import annotations

import abc

import numpy as np

from lcoding.core._predict import linear_decision_values
from lcoding.core.rows import Rows
from lcoding.core.options import PROBABILITY_SOLVERS, REGRESSION_SOLVERS, SolverType


class Model(abc.ABC):
    """Common surface of every lcoding model (subclasses define decision_values)."""
    solver_type: int
    nr_class: int
    nr_feature: int
    label: np.ndarray | None
    bias: float

    def _set_header(self, solver_type, nr_class, label, nr_feature, bias) -> None:
        """LIBLINEAR's header fields, normalised (every model file starts with them)."""
        self.solver_type = int(solver_type)
        self.nr_class = int(nr_class)
        self.label = None if label is None else np.asarray(label, dtype=np.int32)
        self.nr_feature = int(nr_feature)
        self.bias = float(bias)

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

    @abc.abstractmethod
    def decision_values(self, rows: Rows) -> np.ndarray:
        """Decision values ``(n_rows, nr_w)`` of validated rows."""

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


class LinearModel(Model):
    """LIBLINEAR's linear model (any solver type)."""

    def __init__(self, solver_type, nr_class, label, nr_feature, bias, w, rho=0.0, param=None):
        self._set_header(solver_type, nr_class, label, nr_feature, bias)
        self.rho = float(rho)
        self.param = param
        self.w = self._checked_weights(w, self.nr_feature + (1 if self.bias >= 0 else 0),
                                       self.nr_w, vector_ok=True)

    @property
    def w_size(self) -> int:
        return self.w.shape[0]

    def decision_values(self, rows: Rows) -> np.ndarray:
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
