"""``lcoding-train`` and ``lcoding-predict``: LIBLINEAR's ``train`` and ``predict``
programs (same arguments, usage text, output files and exit codes).

    lcoding-train [options] training_set_file [model_file]
    lcoding-predict [options] test_file model_file output_file

Errors go to stderr with exit code 1, as in LIBLINEAR; the usage text is printed
for a wrong command line.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from lcoding.auto_option import select_from_options
from lcoding.commonutil import evaluations
from lcoding.core.messages import Messages
from lcoding.core.options import (CODING_AUTO, REGRESSION_SOLVERS, TRAIN_OPTIONS, OptionError,
                                  check_parameter, parse_predict_options, parse_train_options,
                                  predict_usage, searches_locally, train_usage)
from lcoding.io.atomic import write_text_atomic
from lcoding.io.model_files import ModelFileError, save_model_file
from lcoding.io.reader import read_libsvm
from lcoding.linear.param_search import find_parameters as find_linear_parameters
from lcoding.training import (best_parameters_line, cross_validation, find_parameters,
                              load_model_file, train_model, with_data_scaled_width)

_FLAGS_WITHOUT_VALUE = {opt.flag for opt in TRAIN_OPTIONS if opt.kind is None}


class _Exit(Exception):
    def __init__(self, code, message=""):
        super().__init__(message)
        self.code = code
        self.message = message


def _split_train_argv(argv):
    """(option tokens, positional arguments), LIBLINEAR's way: options come first."""
    i = 0
    while i < len(argv) and argv[i].startswith("-") and len(argv[i]) > 1:
        i += 1 if argv[i] in _FLAGS_WITHOUT_VALUE else 2
    if i > len(argv):
        raise _Exit(1, f"option {argv[-1]} needs a value\n" + train_usage())
    return argv[:i], argv[i:]


def _read(path, n_features=None):
    return read_libsvm(path, n_features=n_features)


def _wants_help(argv, flags_without_value) -> bool:
    """``-h`` / ``--help`` among the options (before the first file name)."""
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok in ("-h", "--help"):
            return True
        if not tok.startswith("-"):
            return False
        i += 1 if tok in flags_without_value else 2
    return False


def _train(argv):
    if _wants_help(argv, _FLAGS_WITHOUT_VALUE):
        print(train_usage(), end="")
        return 0
    opt_tokens, files = _split_train_argv(argv)
    if not files or len(files) > 2:
        raise _Exit(1, train_usage())
    try:
        params = parse_train_options(opt_tokens)
    except OptionError as err:
        raise _Exit(1, f"{err}\n{train_usage()}") from None
    train_file = files[0]
    model_file = files[1] if len(files) == 2 else os.path.basename(train_file) + ".model"
    try:
        y, rows = _read(train_file)
    except FileNotFoundError:
        raise _Exit(1, f"can't open input file {train_file}\n") from None
    except ValueError as err:
        raise _Exit(1, f"Wrong input format: {err}\n") from None
    try:
        check_parameter(params)
    except ValueError as err:
        raise _Exit(1, f"ERROR: {str(err).removeprefix('Error: ')}\n") from None
    info = Messages(params.quiet)
    if params.flag_find_parameters and searches_locally(params):
        # a local coding: C, -u and -A; a kernel PCA map (-t): C and -g
        # (lcoding.methods.local_search, docs/search.md);
        # -L auto: the method too (lcoding.auto_option: the selector is above the router)
        print(f"Doing parameter search with {params.nr_fold}-fold cross validation.")
        search = select_from_options if params.coding == CODING_AUTO else find_parameters
        result = search(y, rows, params, info)
        print(best_parameters_line(params, result), end="")
        return 0
    if params.flag_find_parameters:
        print(f"Doing parameter search with {params.nr_fold}-fold cross validation.")
        best_C, best_p, best_score = find_linear_parameters(y, rows, params, info)
        if params.solver_type in (0, 2):
            print("Best C = %g  CV accuracy = %g%%" % (best_C, 100.0 * best_score))
        else:
            print("Best C = %g Best p = %g  CV MSE = %g" % (best_C, best_p, best_score))
        return 0
    # -L 2, 3 without -u: the width from the rows, as the estimators' 'scale'
    params = with_data_scaled_width(params, rows)
    if params.flag_cross_validation:
        target = cross_validation(y, rows, params, params.nr_fold, info)
        acc, mse, scc = evaluations(y, target)
        if params.solver_type in REGRESSION_SOLVERS:
            print("Cross Validation Mean squared error = %g" % mse)
            print("Cross Validation Squared correlation coefficient = %g" % scc)
        else:
            print("Cross Validation Accuracy = %g%%" % acc)
        return 0
    model = train_model(y, rows, params, info, checked=True)
    try:
        save_model_file(model_file, model)
    except OSError as err:
        raise _Exit(1, f"can't save model to file {model_file}: {err}\n") from None
    return 0


def _split_predict_argv(argv):
    i = 0
    while i < len(argv) and argv[i].startswith("-") and len(argv[i]) > 1:
        i += 1 if argv[i] == "-q" else 2
    return argv[:min(i, len(argv))], argv[i:]


def _predict(argv):
    if _wants_help(argv, {"-q"}):
        print(predict_usage(), end="")
        return 0
    opt_tokens, files = _split_predict_argv(argv)
    if len(files) != 3:
        raise _Exit(1, predict_usage())
    try:
        opts = parse_predict_options(opt_tokens)
    except OptionError as err:
        raise _Exit(1, f"{err}\n{predict_usage()}") from None
    test_file, model_file, output_file = files
    if not os.path.exists(test_file):
        raise _Exit(1, f"can't open input file {test_file}\n")
    try:
        model = load_model_file(model_file)
    except FileNotFoundError as err:      # the message names the file already
        raise _Exit(1, f"{err}\n") from None
    except (OSError, ModelFileError) as err:
        raise _Exit(1, f"can't open model file {model_file}: {err}\n") from None
    if opts.probability and not model.is_probability_model():
        raise _Exit(1, "probability output is only supported for logistic regression\n")
    try:
        y, rows = _read(test_file)
    except ValueError as err:
        raise _Exit(1, f"Wrong input format: {err}\n") from None
    rows = rows.truncated(model.nr_feature)
    if opts.probability:
        dec = model.decision_values(rows)
        labels = model.labels_from_values(dec)
        probs = model.probabilities_from_values(dec)
        head = "labels" + "".join(f" {int(v)}" for v in model.label) + "\n"
        body = "".join(("%g" % lab) + "".join(" %g" % p for p in row) + "\n"
                       for lab, row in zip(labels.tolist(), probs.tolist()))
        text = head + body
    else:
        labels = model.predict_labels(rows)
        text = "".join("%.17g\n" % lab for lab in labels.tolist())
    try:
        # a unique temporary file in the output's folder, renamed over it (io/atomic.py)
        write_text_atomic(output_file, text, encoding="ascii", what="output file")
    except OSError as err:
        raise _Exit(1, f"can't open output file {output_file}: {err}\n") from None
    acc, mse, scc = evaluations(y, labels)
    if not opts.quiet:
        if model.is_regression_model():
            print("Mean squared error = %g (regression)" % mse)
            print("Squared correlation coefficient = %g (regression)" % scc)
        else:
            correct = int(np.count_nonzero(labels == y))
            print("Accuracy = %g%% (%d/%d)" % (acc, correct, y.shape[0]))
    return 0


def _run(func, argv):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return func(argv)
    except _Exit as ex:
        stream = sys.stdout if ex.message.startswith("Usage") else sys.stderr
        stream.write(ex.message)
        return ex.code
    except (ValueError, TypeError, ArithmeticError, MemoryError) as err:
        # ArithmeticError: a diverged SGD / k q-metrics run (FloatingPointError);
        # MemoryError: a kernel block that does not fit
        sys.stderr.write(f"ERROR: {err}\n")
        return 1


def train_main(argv=None) -> int:
    """Entry point of ``lcoding-train``."""
    return _run(_train, argv)


def predict_main(argv=None) -> int:
    """Entry point of ``lcoding-predict``."""
    return _run(_predict, argv)
