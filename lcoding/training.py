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

import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

from lcoding.core.messages import Messages
from lcoding.core.model import LinearModel, Model
from lcoding.core.options import JOINT_SOLVERS, SolverType, TrainParams, check_parameter
from lcoding.core.rows import Rows
from lcoding.core.seeds import PURPOSE_CV, rng_state
from lcoding.io import model_files
from lcoding.local.model import FILE_TAGS as LOCAL_FILE_TAGS
from lcoding.local.model import LocalModel
from lcoding.methods import invariant, kq, linear, llc_jo, llsvm, occ


@dataclass(frozen=True)
class Method:
    """One training method: what picks it, what it reads, how it trains, what it writes."""
    name: str
    title: str
    # the option letters the method reads beyond LIBLINEAR's common ones (-s -c -e -B -wi -S -m -q)
    options: tuple
    applies: Callable[[TrainParams], bool]
    check: Callable[[TrainParams], None]
    train: Callable[..., Model]
    model_class: type
    file_tags: tuple


METHODS = (
    Method("invariant", "kernel PCA map and invariant SVMs (Chapelle & Schoelkopf 2001)",
           ("-t", "-d", "-g", "-r", "-H", "-J", "-N", "-Y", "-X"),
           invariant.uses_kernel_options, invariant.check_kernel_params,
           invariant.train_kernel_model, invariant.KernelExpansionModel, invariant.FILE_TAGS),
    Method("kq", "discriminative k q-metrics / k q-flats (Szlam & Sapiro 2009)",
           ("-k", "-Q", "-U", "-V", "-D", "-i", "-o", "-G", "-F", "-l", "-Z", "-W", "-y", "-x",
            "-z", "-E", "-K", "-O"),
           lambda p: int(p.solver_type) in (SolverType.KQ_METRICS, SolverType.KQ_FLATS),
           lambda p: kq.check_kq_params(p, None),
           kq.train_kq_model, kq.KQModel, kq.FILE_TAGS),
    Method("occ", "anchor planes G-OCC / C-OCC with LIB- or PEG-LLSVM (Zhang et al. 2011)",
           ("-L", "-A", "-u", "-K", "-O", "-E", "-T", "-P"),
           lambda p: p.coding in occ.OCC_CODINGS, occ.check_occ_params,
           occ.train_occ_model, occ.OCCModel, occ.FILE_TAGS),
    Method("llc_jo", "LLC-SAPL / LLC-JO: joint SGD of local weights and anchors",
           ("-L", "-A", "-k", "-u", "-a", "-I", "-M", "-K", "-O", "-E", "-T", "-P", "-f", "-j"),
           lambda p: int(p.solver_type) in JOINT_SOLVERS, llc_jo.check_joint_params,
           llc_jo.train_joint, LocalModel, ()),
    Method("llsvm", "LL-SVM: locally linear SVM on a local coding (Ladicky & Torr 2011)",
           ("-L", "-A", "-k", "-u", "-a", "-I", "-M", "-K", "-O", "-E", "-T", "-P"),
           lambda p: p.coding != 0, llsvm.check_local_params,
           llsvm.train_local_model, LocalModel, LOCAL_FILE_TAGS),
    Method("linear", "LIBLINEAR's linear solvers",
           ("-p", "-n", "-R", "-E", "-T", "-P"),
           lambda p: True, linear.check_linear_params,
           linear.train_linear_model, LinearModel, ()),
)
METHOD_BY_NAME = {m.name: m for m in METHODS}

# model-file tag (the ``coding`` line of lcoding's files) -> model class
MODEL_TYPES = {tag: m.model_class for m in METHODS for tag in m.file_tags}


def select_method(params: TrainParams) -> Method:
    """The method the options ask for (the first row of :data:`METHODS` that applies)."""
    for method in METHODS:
        if method.applies(params):
            return method
    raise AssertionError("the linear method applies to every option set")


def train_model(y: np.ndarray, rows: Rows, params: TrainParams, info: Messages | None = None,
                seed_path: tuple = ()) -> Model:
    """Train the model the options ask for on validated rows (without the bias column)."""
    check_parameter(params)
    if rows.n_rows == 0:
        raise ValueError("empty training problem: no instances to train on")
    if y.shape[0] != rows.n_rows:
        raise ValueError(f"len(y) = {y.shape[0]} differs from the {rows.n_rows} instances in x")
    method = select_method(params)
    return method.train(y, rows, params, info, seed_path=seed_path)


def cross_validation(y: np.ndarray, rows: Rows, params: TrainParams, nr_fold: int,
                     info: Messages | None = None) -> np.ndarray:
    """LIBLINEAR's ``cross_validation``: a seeded random permutation cut into
    ``nr_fold`` contiguous folds; returns the prediction for every row."""
    n = rows.n_rows
    if n == 0:
        raise ValueError("cross validation needs at least one training instance")
    if nr_fold > n:
        nr_fold = n
        sys.stderr.write("WARNING: # folds > # data. Will use # folds = # data instead "
                         "(i.e., leave-one-out cross validation)\n")
    rng = np.random.Generator(np.random.PCG64(rng_state(params.seed, PURPOSE_CV)[0]))
    perm = rng.permutation(n)
    fold_start = [i * n // nr_fold for i in range(nr_fold + 1)]
    target = np.empty(n)
    for f in range(nr_fold):
        test = perm[fold_start[f]:fold_start[f + 1]]
        train = np.concatenate([perm[:fold_start[f]], perm[fold_start[f + 1]:]])
        sub = rows.take(train)
        model = train_model(y[train], sub, params, info, seed_path=(f + 1,))
        test_rows = rows.take(test).truncated(model.nr_feature)
        target[test] = model.labels_from_values(model.decision_values(test_rows))
    return target


def load_model_file(path) -> Model:
    """Read a model file of any method (strict; errors name the file and line)."""
    return model_files.load_model_file(path, MODEL_TYPES)


def model_from_text(text: str, name: str = "<model>") -> Model:
    """Parse model file content of any method."""
    return model_files.model_from_text(text, name, MODEL_TYPES)
