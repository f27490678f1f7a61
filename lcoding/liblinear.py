"""Drop-in for ``liblinear.liblinear`` (LIBLINEAR's ctypes layer).

Same public names and call forms: ``feature_node``, ``gen_feature_nodearray``,
``problem``, ``parameter``, ``model``, ``toPyModel``, ``solver_names``,
``print_null`` and ``liblinear``.  There is no C library handle behind them:
``problem`` holds a validated CSR matrix, ``model`` wraps an lcoding model.  The
ctypes-style fields real scripts read still work: ``model.w`` and ``model.label``
are ctypes pointers into the model's numpy arrays (so
``numpy.ctypeslib.as_array(m.w, (n,))`` works); :meth:`model.get_weights` gives the
``(w_size, nr_w)`` numpy array directly.
"""
from __future__ import annotations

import math
import sys
from ctypes import POINTER, Structure, c_double, c_int, cast

import numpy as np
import scipy.sparse as sp

from lcoding.core.rows import Rows, as_labels, as_rows
from lcoding.core.model import VALUE_LIMIT, LinearModel, Model
from lcoding.core.options import SolverType, TrainParams, parse_train_options

__all__ = ["liblinear", "feature_node", "gen_feature_nodearray", "problem", "parameter",
           "model", "toPyModel", "solver_names", "print_null"]

solver_names = SolverType


def print_null(s):
    """The no-op print function that ``-q`` installs."""
    return None


class _NoCLibrary:
    """Stands where LIBLINEAR's ctypes library handle was: lcoding has none."""

    liblinear_version = 250

    def __getattr__(self, name):
        raise AttributeError(
            f"liblinear.{name}: lcoding has no C library handle; use train, predict, "
            f"load_model and save_model from lcoding.liblinearutil")

    def __repr__(self):
        return "<lcoding: no LIBLINEAR C library handle>"


liblinear = _NoCLibrary()


class feature_node(Structure):
    _fields_ = [("index", c_int), ("value", c_double)]

    def __str__(self):
        return "%d:%g" % (self.index, self.value)


def gen_feature_nodearray(xi, feature_max=None):
    """One instance -> (ctypes array of feature_node with two spare slots, max index).

    Accepts a dict, a list/tuple, a 1-D ndarray, or an ``(indices, values)`` pair of
    ndarrays with 0-based indices, like LIBLINEAR; zeros are skipped and indices
    above ``feature_max`` dropped.
    """
    if feature_max is not None and not isinstance(feature_max, (int, np.integer)):
        raise TypeError("feature_max must be an int")
    if isinstance(xi, tuple) and len(xi) == 2 and isinstance(xi[0], np.ndarray) \
            and isinstance(xi[1], np.ndarray):
        idx = np.asarray(xi[0], dtype=np.int64) + 1
        val = np.asarray(xi[1], dtype=np.float64)
        order = np.argsort(idx, kind="stable")
        idx, val = idx[order], val[order]
    elif isinstance(xi, dict):
        keys = sorted(xi)
        idx = np.array(keys, dtype=np.int64)
        val = np.array([xi[k] for k in keys], dtype=np.float64)
    elif isinstance(xi, (list, tuple, np.ndarray)):
        val = np.asarray(xi, dtype=np.float64).reshape(-1)
        idx = np.arange(1, val.size + 1, dtype=np.int64)
    else:
        raise TypeError("xi should be a dictionary, list, tuple, 1-d numpy array, or tuple of "
                        "(index, data)")
    keep = val != 0
    if feature_max:
        keep &= idx <= feature_max
    idx, val = idx[keep], val[keep]
    ret = (feature_node * (idx.size + 2))()
    for j in range(idx.size):
        ret[j].index = int(idx[j])
        ret[j].value = float(val[j])
    ret[-1].index = -1
    ret[-2].index = -1
    return ret, int(idx[-1]) if idx.size else 0


class problem:
    """Training data: labels ``y`` and instances ``x`` (any accepted container).

    Fields as in LIBLINEAR: ``l`` rows, ``n`` features (plus one when a bias is
    set), ``y`` (float64 array), ``bias``.  ``x`` is the validated data as a
    scipy CSR matrix (0-based columns).
    """

    def __init__(self, y, x, bias=-1):
        labels = as_labels(y, "y")
        if isinstance(x, (list, tuple)) or isinstance(x, np.ndarray) or sp.issparse(x):
            n_rows = x.shape[0] if (isinstance(x, np.ndarray) or sp.issparse(x)) else len(x)
            if len(labels) != n_rows:
                raise ValueError("len(y) != len(x)")
        else:
            raise TypeError("type of x: {0} is not supported!".format(type(x)))
        self.rows = as_rows(x, "x")
        self.y = labels
        self.l = labels.shape[0]
        self.bias = -1.0
        self.n = self.rows.n_features
        self.set_bias(bias)

    @classmethod
    def _from_rows(cls, y, rows: Rows, bias=-1.0):
        self = cls.__new__(cls)
        self.rows, self.y, self.l = rows, y, y.shape[0]
        self.bias, self.n = -1.0, rows.n_features
        self.set_bias(bias)
        return self

    @property
    def x(self):
        return self.rows.to_csr()

    def set_bias(self, bias):
        bias = float(bias)
        if not (math.isfinite(bias) and abs(bias) <= VALUE_LIMIT):
            raise ValueError(f"bias {bias!r} must be finite and at most {VALUE_LIMIT:g} in "
                             f"magnitude (option -B)")
        self.n = self.rows.n_features + (1 if bias >= 0 else 0)
        self.bias = bias

    def copy(self):
        return problem._from_rows(self.y, self.rows, self.bias)


class parameter(TrainParams):
    """Training parameters parsed from a LIBLINEAR option string or token list."""

    def __init__(self, options=None):
        super().__init__()
        self.print_func = None
        self.parse_options("" if options is None else options)

    def set_to_default_values(self):
        TrainParams.__init__(self)
        self.print_func = None

    def parse_options(self, options):
        if not isinstance(options, (str, list)):
            raise TypeError("arg 1 should be a list or a str.")
        self.set_to_default_values()
        parse_train_options(options, self)
        self.print_func = print_null if self.quiet else None

    def __str__(self):
        names = ["solver_type", "eps", "C", "nr_weight", "weight_label", "weight", "p", "nu",
                 "init_sol", "regularize_bias", "w_recalc", "bias", "flag_cross_validation",
                 "flag_C_specified", "flag_p_specified", "flag_solver_specified",
                 "flag_find_parameters", "nr_fold", "seed", "print_func"]
        return "\n".join(f" {k}: {getattr(self, k)}" for k in names).strip()


class _LoadedParam:
    """``model.param`` of a loaded model: only ``solver_type`` is meaningful (as in
    LIBLINEAR, training parameters are not stored in model files)."""

    def __init__(self, solver_type):
        self.solver_type = solver_names(solver_type)

    def __repr__(self):
        return f"<param solver_type={self.solver_type.name}>"


class model:
    """A trained model with LIBLINEAR's fields and accessor methods."""

    def __init__(self, core: Model | None = None):
        if core is None:
            raise ValueError("Null pointer")
        self._core = core
        params = getattr(core, "param", None)
        self.param = params if isinstance(params, TrainParams) else _LoadedParam(core.solver_type)
        self.__createfrom__ = "python"

    # --- LIBLINEAR struct fields -------------------------------------------
    @property
    def nr_class(self) -> int:
        return self._core.nr_class

    @property
    def nr_feature(self) -> int:
        return self._core.nr_feature

    @property
    def bias(self) -> float:
        return self._core.bias

    @property
    def rho(self) -> float:
        return getattr(self._core, "rho", 0.0)

    @property
    def w(self):
        """ctypes ``POINTER(c_double)`` into the weights (LIBLINEAR's flat layout)."""
        return self._core.w.ctypes.data_as(POINTER(c_double))

    @property
    def label(self):
        lab = self._core.label
        if lab is None:
            return cast(None, POINTER(c_int))
        return lab.ctypes.data_as(POINTER(c_int))

    # --- numpy access ---------------------------------------------------------
    def get_weights(self) -> np.ndarray:
        """The weight matrix, shape ``(w_size, nr_w)`` as in the model file (a view)."""
        return self._core.w

    @property
    def core(self) -> Model:
        """The underlying lcoding model object."""
        return self._core

    # --- accessors -------------------------------------------------------------
    def get_nr_feature(self):
        return self._core.nr_feature

    def get_nr_class(self):
        return self._core.nr_class

    def get_labels(self):
        if self._core.label is None:
            return [0] * self._core.nr_class
        return [int(v) for v in self._core.label]

    def _linear(self, what):
        if not isinstance(self._core, LinearModel) or type(self._core) is not LinearModel:
            raise TypeError(f"{what} is defined for linear models only; this model uses a "
                            f"local coding")
        return self._core

    def _w_value(self, idx, label_idx):
        core = self._linear("get_decfun_coef")
        if idx < 0 or idx > core.nr_feature or idx >= core.w.shape[0]:
            return 0.0
        if core.is_regression_model() or core.is_oneclass_model():
            return float(core.w[idx, 0])
        if label_idx < 0 or label_idx >= core.nr_class:
            return 0.0
        if core.nr_class == 2 and core.solver_type != SolverType.MCSVM_CS:
            return float(core.w[idx, 0]) if label_idx == 0 else -float(core.w[idx, 0])
        return float(core.w[idx, label_idx])

    def get_decfun_coef(self, feat_idx, label_idx=0):
        if feat_idx > self._core.nr_feature:
            return 0.0
        return self._w_value(feat_idx - 1, label_idx)

    def get_decfun_bias(self, label_idx=0):
        if self._core.is_oneclass_model():
            sys.stderr.write("ERROR: get_decfun_bias can not be called for a one-class SVM model\n")
            return 0.0
        if self._core.bias <= 0:
            return 0.0
        return self._core.bias * self._w_value(self._core.nr_feature, label_idx)

    def get_decfun_rho(self):
        if self._core.is_oneclass_model():
            return self._core.rho
        sys.stderr.write("ERROR: get_decfun_rho can be called only for a one-class SVM model\n")
        return 0.0

    def get_decfun(self, label_idx=0):
        w = [self.get_decfun_coef(j, label_idx) for j in range(1, self._core.nr_feature + 1)]
        if self.is_oneclass_model():
            return (w, -self.get_decfun_rho())
        return (w, self.get_decfun_bias(label_idx))

    def is_probability_model(self):
        return self._core.is_probability_model()

    def is_regression_model(self):
        return self._core.is_regression_model()

    def is_oneclass_model(self):
        return self._core.is_oneclass_model()

    def __repr__(self):
        return f"<lcoding model: {self._core!r}>"


def toPyModel(model_ptr):
    """Wrap an lcoding model object (LIBLINEAR: a C model pointer) as a ``model``."""
    if model_ptr is None:
        raise ValueError("Null pointer")
    if isinstance(model_ptr, model):
        return model_ptr
    if isinstance(model_ptr, Model):
        m = model(model_ptr)
        m.__createfrom__ = "C"
        return m
    raise TypeError(f"toPyModel expects an lcoding model, got {type(model_ptr).__name__}")
