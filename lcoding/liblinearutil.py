"""Drop-in for ``liblinear.liblinearutil``: a LIBLINEAR script runs on lcoding with
only its import line changed::

    from lcoding.liblinearutil import *

``train``, ``predict``, ``load_model`` and ``save_model`` keep LIBLINEAR's call
forms, return values and printed lines.  Differences (all deliberate, see
``docs/usage.md``): bad input raises a clear exception instead of crashing or
being silently accepted; ``load_model`` raises on a missing or corrupt file
instead of returning None; ``save_model`` is atomic and raises on failure;
``predict`` is vectorised (no Python loop per row); runs are reproducible (``-S``).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from lcoding import commonutil as _commonutil
from lcoding import liblinear as _liblinear
from lcoding.auto_option import select_from_options
from lcoding.core.rows import as_labels, as_rows
from lcoding.commonutil import *  # noqa: F401,F403
from lcoding.commonutil import evaluations
from lcoding.liblinear import *  # noqa: F401,F403
from lcoding.liblinear import model, parameter, problem, toPyModel
from lcoding.core.messages import Messages
from lcoding.core.options import (CODING_AUTO, REGRESSION_SOLVERS, check_parameter,
                                  parse_predict_options, searches_locally)
from lcoding.io.model_files import save_model_file
from lcoding.linear.param_search import find_parameters as find_linear_parameters
from lcoding.training import (best_parameters_line, cross_validation, find_parameters,
                              load_model_file, train_model, with_data_scaled_width)

__all__ = ["load_model", "save_model", "train", "predict"] + _liblinear.__all__ + _commonutil.__all__


def load_model(model_file_name):
    """load_model(model_file_name) -> model

    Load a model written by lcoding or by LIBLINEAR.  A missing file raises
    ``FileNotFoundError``; a truncated or corrupt one ``lcoding.io.model_files.ModelFileError``
    naming the line.
    """
    return toPyModel(load_model_file(model_file_name))


def save_model(model_file_name, model):
    """save_model(model_file_name, model) -> None

    Write the model in LIBLINEAR's text format (temporary file + rename)."""
    core = model.core if hasattr(model, "core") else model
    save_model_file(model_file_name, core)


def _is_instances(x):
    return isinstance(x, (list, tuple, np.ndarray)) or sp.issparse(x)


def train(arg1, arg2=None, arg3=None):
    """train(y, x [, options]) -> model | ACC | MSE | (best_C, best_p, best_score)
    train(prob [, options]) -> ...
    train(prob, param) -> ...

    y: labels (list/tuple/ndarray); x: list of dicts or sequences, 2-D ndarray, or
    scipy sparse matrix/array.  ``options`` is a LIBLINEAR option string or token
    list (see ``docs/options.md``).  With ``-v n`` returns the cross-validation
    accuracy (percent; MSE for regression); with ``-C`` returns
    ``(best_C, best_p, best_score)`` (``-s 0, 2, 11``, as LIBLINEAR), or with a local
    coding ``-L`` the named tuple ``(best_C, best_options, best_rate)``: the best C, the
    option string that trains the best model (``train(y, x, best_options)``) and its
    CV accuracy as a fraction (``docs/search.md``); ``-C -L auto [-b seconds]`` returns
    the same tuple for the method and parameters chosen by :mod:`lcoding.select`.
    """
    if isinstance(arg1, (list, tuple, np.ndarray)):
        if not _is_instances(arg2):
            raise TypeError(f"x must be a list/tuple of instances, a numpy array or a scipy "
                            f"sparse matrix, not {type(arg2).__name__}")
        prob = problem(arg1, arg2)
        param = parameter(arg3)
    elif isinstance(arg1, problem):
        prob = arg1
        param = arg2 if isinstance(arg2, parameter) else parameter(arg2)
    else:
        raise TypeError("Wrong types for the arguments")

    prob.set_bias(param.bias)
    check_parameter(param, prob.bias)
    info = Messages(param.quiet)

    if param.flag_find_parameters and searches_locally(param):
        # a local coding: C, -u and -A; a kernel PCA map (-t): C and -g
        # (lcoding.methods.local_search, docs/search.md);
        # -L auto: the method too (lcoding.auto_option: the selector is above the router)
        search = select_from_options if param.coding == CODING_AUTO else find_parameters
        result = search(prob.y, prob.rows, param, info)
        print(best_parameters_line(param, result))
        return result
    if param.flag_find_parameters:
        best_C, best_p, best_score = find_linear_parameters(prob.y, prob.rows, param, info)
        if param.solver_type in (0, 2):
            print("Best C = %g  CV accuracy = %g%%\n" % (best_C, 100.0 * best_score))
        else:
            print("Best C = %g Best p = %g  CV MSE = %g\n" % (best_C, best_p, best_score))
        return best_C, best_p, best_score
    # -L 2, 3 without -u: the width from the rows, as the estimators' 'scale'
    param = with_data_scaled_width(param, prob.rows)
    if param.flag_cross_validation:
        target = cross_validation(prob.y, prob.rows, param, param.nr_fold, info)
        acc, mse, scc = evaluations(prob.y, target)
        if param.solver_type in REGRESSION_SOLVERS:
            print("Cross Validation Mean squared error = %g" % mse)
            print("Cross Validation Squared correlation coefficient = %g" % scc)
            return mse
        print("Cross Validation Accuracy = %g%%" % acc)
        return acc
    core = train_model(prob.y, prob.rows, param, info, checked=True)
    return toPyModel(core)


def predict(y, x, m, options=""):
    """predict(y, x, m [, options]) -> (p_labels, (ACC, MSE, SCC), p_vals)

    options: ``-b 1`` probability estimates (logistic regression models), ``-q``
    quiet.  ``p_vals`` holds one decision value per row for binary models (two
    classes, not Crammer-Singer), else one per class in ``m.get_labels()`` order,
    or the class probabilities with ``-b 1``.  Features beyond the model's
    ``nr_feature`` are ignored, as in LIBLINEAR.  ``y`` may be ``[]``.
    """
    if not _is_instances(x):
        raise TypeError("type of x: {0} is not supported!".format(type(x)))
    if not isinstance(y, (list, tuple, np.ndarray)):
        raise TypeError("type of y: {0} is not supported!".format(type(y)))
    opts = parse_predict_options(options)
    core = m.core if hasattr(m, "core") else m
    rows = as_rows(x, "x").truncated(core.nr_feature)
    n = rows.n_rows
    if opts.probability and not core.is_probability_model():
        raise TypeError("probability output is only supported for logistic regression")
    dec = core.decision_values(rows)
    labels = core.labels_from_values(dec)
    if opts.probability:
        values = core.probabilities_from_values(dec)
    else:
        nr_classifier = 1 if core.nr_class <= 2 else core.nr_class
        if dec.shape[1] < nr_classifier:
            dec = np.hstack([dec, np.zeros((n, nr_classifier - dec.shape[1]))])
        values = dec[:, :nr_classifier]
    truth = np.zeros(n) if len(y) == 0 else as_labels(y, "y")
    acc, mse, scc = evaluations(truth, labels)
    if not opts.quiet:
        if core.is_regression_model():
            print("Mean squared error = %g (regression)" % mse)
            print("Squared correlation coefficient = %g (regression)" % scc)
        else:
            print("Accuracy = %g%% (%d/%d) (classification)" % (acc, int(round(n * acc / 100)), n))
    return labels.tolist(), (acc, mse, scc), values.tolist()
