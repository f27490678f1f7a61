"""Joint SGD of the local weights and the anchors (``-s 31``): LLC-SAPL
(``-L 2``, Mao et al. IJCAI 2015) and LLC-JO (``-L 3``, k* coding; seed 001).

Algorithm (algorithms.md §C.1, §C.4; kernel :func:`lcoding._joint_sgd.joint_epoch`):
k-means anchors (``-A``, ``-a``, ``-I``), W = 0, b = 0; every epoch (``-E``) one
seeded permutation; per sample: code with the current anchors, hinge test per
class, SVMSGD2 step on W, b (``lambda = 1/(C l)``, ``-T`` t0, ``-P`` skip) and an
anchor step with rate ``-f / (t + t0)``, capped so one step moves an anchor at most
half-way to x (``-f 0`` freezes the anchors: plain LL-SVM SGD with the same coding).
``-u`` is beta (``-L 2``) or mu (``-L 3``); ``-j`` picks the LLC-JO anchor
gradient: 0 exact (lambda depends on eta), 1 the seed's (lambda held fixed), 2 the
reference code's (extra factor w_i).

Multi-class: shared anchors, per-class W_c, b_c (one-vs-rest +-1 targets, loss
summed over classes), anchor steps summed over the violated classes; ``-wi`` as in
LIBLINEAR's one-vs-rest (problem c: rows of class c weighted weight_c * C, the rest C).

``-s 33`` runs the same updates and returns the tail average (as ``-s 32`` does for
``-s 30``, lcoding/sgd.py): W, b and the anchors averaged over their values at the
ends of epochs ``floor(E/2) + 1 .. E``, so ``-s 33 -E 4`` is the mean of the
``-s 31 -E 3`` and ``-s 31 -E 4`` models' parameters.  The training curve and
``epoch_callback`` see the iterates as ``-s 31`` does.

The model is a :class:`~lcoding.local.model.LocalModel` (learned anchors and
mu / beta in the model file); :attr:`training_curve` holds the progressive
hinge loss (mean over rows of the per-row loss summed over classes, measured
before each update) and the mean k* of every epoch.
"""
from __future__ import annotations

import time

import numpy as np

from lcoding.methods import _joint_sgd
from lcoding.core.rows import Rows
from lcoding.local.anchors import learn_anchors
from lcoding.local.coding import kernel_map_of
from lcoding.core.threads import STOP_FLAG, check_stop, single_threaded_blas
from lcoding.local.kstar import make_coder
from lcoding.core.options import SolverType, TrainParams
from lcoding.core.seeds import CALIBRATION_STREAM
from lcoding.linear.sgd import TailAverage, calibrate_t0, check_sgd_params
from lcoding.core.messages import Messages, progress_line
from lcoding.core.classes import class_costs, group_classes, one_vs_rest_jobs
from lcoding.core.params import CodingType, LLCJointParams
from lcoding.core.seeds import PURPOSE_ANCHORS, PURPOSE_SOLVER, rng_state
from lcoding.local.model import LocalModel

JOINT_CODINGS = (CodingType.GAUSSIAN, CodingType.KSTAR)



def check_joint_params(params: TrainParams) -> None:
    if params.coding not in JOINT_CODINGS:
        raise ValueError(f"-s {int(params.solver_type)} needs -L 2 (LLC-SAPL) or -L 3 "
                         f"(LLC-JO), got -L {params.coding}")
    check_sgd_params(params)
    if params.coding_param < 0:
        raise ValueError(f"-u {params.coding_param}: must be >= 0 for "
                         f"-s {int(params.solver_type)}")


def _automatic_t0(rows: Rows, V: np.ndarray, k: int, jp: LLCJointParams, Y: np.ndarray,
                  cost: np.ndarray, lam: float, bias: float, solver_state: int) -> float:
    """``-T 0``: the ``-s 30`` calibration (:func:`lcoding.linear.sgd.calibrate_t0`) on the
    coding by the initial anchors, per one-vs-rest problem; the joint epoch has one
    schedule for all classes, so the median.  A binary problem draws the subsample
    ``-s 30`` draws, so ``-s 31 -f 0 -T 0`` stays ``-s 30 -T 0``."""
    if rows.n_rows == 0:
        return 1.0
    idx, wt = make_coder(jp.coding, V, k, jp.coding_param).code(rows)
    values = [calibrate_t0(rows, idx, wt, np.ascontiguousarray(Y[:, c]),
                           np.ascontiguousarray(cost[:, c]), lam, float(jp.sgd.skip), bias,
                           V.shape[0], np.random.Generator(np.random.PCG64(
                               solver_state ^ CALIBRATION_STREAM)))
              for c in range(Y.shape[1])]
    return float(np.median(values))


def train_joint(y: np.ndarray, rows: Rows, params: TrainParams, info: Messages | None = None,
                seed_path: tuple = (), epoch_callback=None, sample_weight: np.ndarray | None = None):
    """Train ``-s 31`` or ``-s 33``.  ``epoch_callback(epoch, model)``, if given, sees
    a model of the current iterate after every epoch (for test curves).
    ``sample_weight`` multiplies each row's loss weight (its C)."""
    check_joint_params(params)
    jp = LLCJointParams.from_train_params(params)
    info = info if info is not None else Messages(params.quiet)
    bias = float(params.bias)
    nr_feature = rows.n_features
    kernel_map = kernel_map_of(params)
    if kernel_map is not None:      # -K: anchors, codes and local models on the mapped rows
        rows = kernel_map(rows)
    n, d = rows.n_rows, rows.n_features
    labels, class_index = group_classes(y)
    nr_class = labels.size
    # LIBLINEAR's one-vs-rest problems, one per column of Y: the label and the loss
    # weight C_i / C of every row (problem c weights class c by weight_c, the rest by 1)
    jobs = one_vs_rest_jobs(class_index, nr_class, class_costs(labels, params), params.C, n)
    nr_w = len(jobs)
    Y = np.ascontiguousarray(np.column_stack([y_pm for _, y_pm, _, _ in jobs]))
    cost = np.ascontiguousarray(np.column_stack(
        [np.where(y_pm > 0, Cp, Cn) for _, y_pm, Cp, Cn in jobs]) / params.C)
    if sample_weight is not None:
        cost = np.ascontiguousarray(cost * np.asarray(sample_weight, dtype=np.float64)[:, None])

    t = time.perf_counter()
    with single_threaded_blas(n):
        anchors = learn_anchors(rows, class_index, jp.anchors.n_anchors, jp.anchors.init,
                                rng_state(params.seed, PURPOSE_ANCHORS, *seed_path),
                                max_iter=jp.anchors.kmeans_iter,
                                batch_size=jp.anchors.kmeans_batch,
                                n_threads=params.n_threads)
    info(f"anchors: {anchors.shape[0]} ({time.perf_counter() - t:.2f} s)\n")
    V = np.array(anchors, dtype=np.float64, order="C")
    m = V.shape[0]
    k = min(jp.n_neighbors, m)
    v_sq = np.einsum("ij,ij->i", V, V)
    W = np.zeros((nr_w, m * d))
    b = np.zeros((nr_w, m))
    state = np.array([1.0, 0.0, float(jp.sgd.skip)])
    lam = 1.0 / (params.C * max(n, 1))
    solver_state = int(rng_state(params.seed, PURPOSE_SOLVER, *seed_path, 0)[0])
    rng = np.random.Generator(np.random.PCG64(solver_state))
    t0 = jp.sgd.t0
    if t0 == 0.0:
        t0 = _automatic_t0(rows, V, k, jp, Y, cost, lam, bias, solver_state)
        info(f"-T 0: t0 = {t0:.6g} (first step {1.0 / (lam * t0):.3g})\n")
    order = np.arange(n, dtype=np.int32)
    curve = {"hinge": [], "mean_kstar": []}
    data, indices, indptr = rows.data, rows.indices, rows.indptr

    def snapshot(W_now, b_now, V_now):
        """The model of weights ``W_now`` (unscaled), biases and anchors."""
        w = np.zeros((m, d + (1 if bias >= 0 else 0), nr_w))
        for c in range(nr_w):
            w[:, :d, c] = W_now[c].reshape(m, d)
            if bias >= 0:
                w[:, d, c] = b_now[c]
        coder = make_coder(jp.coding, V_now, k, jp.coding_param)
        model = LocalModel(int(params.solver_type), nr_class, labels, nr_feature, bias, coder,
                           w.reshape(m * w.shape[1], nr_w), kernel_map=kernel_map,
                           param=params)
        model.training_curve = {key: list(val) for key, val in curve.items()}
        return model

    tail = (TailAverage(jp.sgd.epochs, W, b, V)
            if int(params.solver_type) == int(SolverType.LLC_JOINT_SGD_AVERAGED) else None)
    for epoch in range(jp.sgd.epochs):
        check_stop()
        rng.shuffle(order)
        loss, n_viol, kst = _joint_sgd.joint_epoch(
            data, indices, indptr, Y, cost, order, V, v_sq, W, b, state,
            int(jp.coding), jp.coding_param, k, int(jp.anchor_gradient),
            lam, t0, float(jp.sgd.skip), bias, jp.anchor_lr, stop=STOP_FLAG)
        check_stop()            # Ctrl-C: the epoch may have ended early
        if not (np.isfinite(loss) and np.isfinite(V).all()):
            raise FloatingPointError(f"-s {int(params.solver_type)} diverged in epoch "
                                     f"{epoch + 1}; try a larger -T, a smaller -f or a "
                                     f"smaller -c")
        if tail is not None:
            tail.add(epoch, W * state[0], b, V)  # W is stored as state[0] * W (scale trick)
        curve["hinge"].append(loss / max(n, 1))
        curve["mean_kstar"].append(kst / max(n, 1))
        line = (f"epoch {epoch + 1}: progressive hinge {loss / max(n, 1):.6f}, "
                f"mean k* {kst / max(n, 1):.3f}")
        progress_line(info, line)
        if epoch_callback is not None:
            epoch_callback(epoch + 1, snapshot(W * state[0], b, V))
    if tail is not None:
        return snapshot(*tail.mean())
    return snapshot(W * state[0], b, V)
