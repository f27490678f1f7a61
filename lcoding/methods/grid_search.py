"""``-C`` for the local methods that neither carry a solution from one C to the next
nor share their anchors across C: a grid of settings, each point trained cold on
``-v``'s folds.

:mod:`lcoding.methods.local_search` runs warm-started C paths for the solvers that
have a dual or primal point to carry (``-s 1, 2, 3``), and cold paths on shared
anchors and codes for the SGD solvers on an LL-SVM coding (``-s 30, 32``) or on a
shared kernel map for the other one-vs-rest linear solvers (``-s 0, 5, 6, 7, 30,
32`` after ``-t``).  The
other local methods are trained here point by point, exactly as ``-v`` trains them
(the same permutation of the rows for a seed, fold ``f`` at seed path ``(f + 1,)``),
so every rate printed is the rate ``-v`` gives with that point's options:

============================  ===============================================  =========
method (options)              grid                                             C path
============================  ===============================================  =========
LL-SVM ``-L 1, 2, 3, 6`` with  ``-A``: ``A/4, A/2, A``; ``-u``: as             yes
``-s 4`` (Crammer-Singer)      :func:`~lcoding.methods.local_search.coding_grid`
anchor planes ``-L 4, 5``      ``-A`` (planes): ``A/4, A/2, A``, at most the    yes
with ``-s 30, 32``             rank bound ``min(features, fold rows)``
LLC-JO / LLC-SAPL              ``-A`` and ``-u`` as LL-SVM (k* ``mu`` /         yes
``-s 31, 33``                  the Gaussian ``beta``)
kernel PCA map ``-t`` with     ``-g``: ``g/4, g, 4g``                           yes
``-s 4`` (Crammer-Singer)
k q-metrics / k q-flats        ``-k``: ``k/2, k, 2k``; ``-Q``: ``q/4, q/2, q``   no (no C)
``-s 40, 41``                  with ``q = min(-Q, dimension)``
============================  ===============================================  =========

The C path is local_search's cold one: a cold point costs a whole training (a
joint anchor optimisation, a Crammer-Singer solve), so C runs over powers of
:data:`~lcoding.methods.local_search.COLD_C_RATIO` (4) from ``-c`` when given, else
from :data:`~lcoding.methods.local_search.COLD_C_START` (1/64), up to LIBLINEAR's cap
1024, and a path ends after :data:`~lcoding.methods.local_search.COLD_PATIENCE` (2)
values without a better rate once its rate has risen above the start (the warm
path's rule, at a coarser step).

The best point is the highest CV accuracy; ties go to the first point reached.  Each
point prints one line (``A=..  u=..  log2c=..  rate=..`` or ``k=..  Q=..  rate=..``)
through ``info``; the result is the warm path's
:class:`~lcoding.methods.local_search.LocalSearchResult` (``best_C`` NaN for the k
q-metrics, which have no C).  The method layer cannot train through the router, so
the caller passes ``cross_validate(params) -> labels``: the router's ``-v``.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from lcoding.core.messages import Messages
from lcoding.core.options import (JOINT_SOLVERS, KQ_SOLVER_TYPES, TrainParams, float_text,
                                  options_string)
from lcoding.core.rows import Rows
from lcoding.linear.param_search import search_folds
from lcoding.local.coding import kernel_map_of
from lcoding.methods import kq
from lcoding.methods.local_search import (COLD_C_RATIO, COLD_PATIENCE, LLSVM_CODINGS,
                                          MAX_C, OCC_CODINGS, LocalSearchResult, PathStop,
                                          SearchPoint, anchor_grid, coding_grid,
                                          cold_path_start, fold_anchors, fold_at,
                                          kernel_gamma_grid, plane_grid, searches_here)

K_FACTORS = (0.5, 1.0, 2.0)
Q_FRACTIONS = (0.25, 0.5, 1.0)

CrossValidate = Callable[[TrainParams], np.ndarray]


def searches_cold(params: TrainParams) -> bool:
    """Whether ``-C`` with these options runs here (module doc) rather than on the
    warm-started paths of :mod:`lcoding.methods.local_search`."""
    st = int(params.solver_type)
    if st in KQ_SOLVER_TYPES or st in JOINT_SOLVERS:
        return True
    if params.kernel_type >= 0 or params.coding in LLSVM_CODINGS + OCC_CODINGS:
        return not searches_here(params)
    return False


def kq_grid(params: TrainParams, n_features: int) -> list:
    """``(k, q)`` pairs the k q-metrics' ``-C`` tries (module doc); ``q`` at most the
    dimension the metrics see (``-l``'s PCA, else the features, ``+ 1`` with ``-z``)."""
    kp = kq.KQParams.from_train_params(params)
    km = kernel_map_of(params)
    features = km.output_features(n_features) if km is not None else n_features
    dim = max(1, (kp.pca_dim or features) + (1 if kp.offset else 0))
    q = max(1, min(int(kp.q), dim))
    qs = sorted({max(1, int(round(q * f))) for f in Q_FRACTIONS})
    ks = sorted({max(1, int(round(kp.clusters_per_class * f))) for f in K_FACTORS})
    return [(k, qq) for k in ks for qq in qs]


def _c_path(params: TrainParams):
    """The cold C values, smallest first (module doc)."""
    C = cold_path_start(params)
    while C <= MAX_C:
        yield C
        C *= COLD_C_RATIO


def _settings(y, rows: Rows, params: TrainParams):
    """``(label, {attribute: value}, options tail)`` of every setting of the grid; in
    place of the values, the ValueError of a setting that cannot be prepared."""
    st = int(params.solver_type)
    if st in KQ_SOLVER_TYPES:
        for k, q in kq_grid(params, rows.n_features):
            yield (f"k={k}\tQ={q}\t", {"n_neighbors": k, "kq_dim": q}, f"-k {k} -Q {q}")
        return
    if params.kernel_type >= 0:
        for g in kernel_gamma_grid(params, rows.n_features):
            yield (f"g={g:g}\t", {"kernel_gamma": g}, f"-g {float_text(g)}")
        return
    # the codings see the -K mapped rows (as training does): their scale and rank
    kernel_map = kernel_map_of(params)
    mapped = kernel_map(rows) if kernel_map is not None else rows
    nr_fold, perm, start = search_folds(rows.n_rows, params)
    fold = fold_at(0, y, mapped, params, perm, start)
    if params.coding in OCC_CODINGS:
        largest_fold = max(start[f + 1] - start[f] for f in range(nr_fold))
        for A in plane_grid(params, mapped.n_features, rows.n_rows - largest_fold):
            yield (f"A={A}\t", {"n_anchors": A}, f"-A {A}")
        return
    for A in anchor_grid(params):
        sp = params.replaced(n_anchors=A)
        try:                            # the width rule's anchors (fold 1's, as -C's)
            anchors = (fold_anchors([fold], sp, {})[0] if "-u" not in params.given
                       else None)
        except ValueError as err:       # e.g. more anchors than the fold's rows
            yield (f"A={A}\t", err, "")
            continue
        for u in coding_grid(sp, fold.rows, anchors):
            yield (f"A={A}\tu={u:g}\t", {"n_anchors": A, "coding_param": u},
                   f"-A {A} -u {float_text(u)}")


def _searched_flags(params: TrainParams) -> tuple:
    """The flags a point sets itself (left out of the options it echoes)."""
    if int(params.solver_type) in KQ_SOLVER_TYPES:
        return ("-C", "-v", "-k", "-Q")
    if params.kernel_type >= 0:
        return ("-C", "-v", "-c", "-g")
    return ("-C", "-v", "-c", "-A", "-u")


def _check(params: TrainParams, rows: Rows, check) -> None:
    """The method's own checks (``check``: its row of the router's METHODS table), once,
    before the first point -- for the k q-metrics with the grid's ``q`` (capped at the
    dimension, so ``-Q`` is not checked) and against the data's features (``-l``)."""
    if int(params.solver_type) in KQ_SOLVER_TYPES:
        params = params.replaced(kq_dim=1)
        kq.check_kq_params(params, rows.n_features)
    if check is not None:
        check(params)


def find_grid_parameters(y, rows: Rows, params: TrainParams, cross_validate: CrossValidate,
                         info: Messages | None = None, check=None):
    """``-C`` by cold cross-validation of a grid (module doc).  ``cross_validate(p)``
    returns ``-v``'s label for every row with options ``p`` (the router's
    ``cross_validation`` on ``params``' folds); ``check(p)``, the method's checks of
    its options (the router's METHODS table), runs once before the first point.  Returns ``(LocalSearchResult,
    points)``; a setting the method cannot train (e.g. more planes than the fold's
    rank) is skipped with a line, and only when every setting fails is that an
    error."""
    info = info if info is not None else Messages(params.quiet)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if y.shape[0] != rows.n_rows:
        raise ValueError(f"parameter search: {y.shape[0]} labels for {rows.n_rows} rows")
    if rows.n_rows == 0:
        raise ValueError("parameter search needs at least one training instance")
    _check(params, rows, check)
    searches_C = int(params.solver_type) not in KQ_SOLVER_TYPES
    rest = options_string(params, drop=_searched_flags(params))
    head = f"-s {int(params.solver_type)}" if "-s" not in params.given else ""
    points: list = []
    errors: list = []
    for label, values, tail in _settings(y, rows, params):
        if isinstance(values, ValueError):
            info(f"{label}skipped ({values})\n")
            errors.append(str(values))
            continue
        setting = params.replaced(**values)
        stop = PathStop(COLD_PATIENCE)
        Cs = list(_c_path(params)) if searches_C else [float(params.C)]
        for C in Cs:
            point = setting.replaced(C=C)
            try:
                target = cross_validate(point)
            except ValueError as err:
                info(f"{label}skipped ({err})\n")
                errors.append(str(err))
                break
            rate = int(np.count_nonzero(target == y)) / y.shape[0]
            c_text = f" -c {float_text(C)}" if searches_C else ""
            options = " ".join(part for part in (head, rest, tail) if part) + c_text
            points.append(SearchPoint(int(setting.n_anchors), float(setting.coding_param),
                                      C if searches_C else math.nan, rate, options))
            if searches_C:
                info("%slog2c=%7.2f\trate=%g\n" % (label, math.log2(C), 100.0 * rate))
            else:
                info("%srate=%g\n" % (label, 100.0 * rate))
            if stop.done(rate):
                break
        else:                            # the path ran to its last C, as the warm paths say
            if searches_C:
                info("WARNING: maximum C reached.\n")
    if not points:
        raise ValueError(f"-C: no setting could be trained ({errors[0] if errors else 'none'})")
    winner = max(points, key=lambda p: p.rate)    # the first of the best (max keeps it)
    return LocalSearchResult(winner.C, winner.options, winner.rate), points
