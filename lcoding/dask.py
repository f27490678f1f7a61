"""Training and prediction on Dask collections (optional: ``dask[array]`` and
``distributed``; ``import lcoding`` never imports them).

::

    from distributed import Client, LocalCluster
    import lcoding.dask

    client = Client(LocalCluster(n_workers=2, threads_per_worker=1))
    y, X = lcoding.dask.read_libsvm("mnist.train", blocksize=32 << 20, n_features=784)
    model = lcoding.dask.train(y, X, "-s 1 -L 2 -a 3 -A 200 -k 30 -u 0.05 -K 3 -c 2 -B 1")
    labels = lcoding.dask.predict(model, X).compute()

What trains on a Dask cluster (the option strings of the single-process methods):

* LIBLINEAR's dual CD, ``-s 1`` and ``-s 3`` (linear models);
* the LL-SVM codings ``-L 1, 2, 3, 6`` with ``-s 1, 3``;
* anchor planes with LIB-LLSVM, ``-L 4, 5`` with ``-s 1, 3`` and ``-u 1`` or ``-u 3``.

How (``docs/scale.md``):

1. every row chunk of ``X`` (with its chunk of ``y``) becomes validated rows on a
   worker, kernel-mapped there with ``-K``; the labels are collected first, so the
   label order is LIBLINEAR's (first appearance over all rows) even when a class
   appears in some chunks only;
2. the anchors (``-a``, k-means, mini-batch k-means with ``-M``) or the planes are
   learned on the driver from a seeded sample of the rows, uniform over all rows
   (per class for the per-class modes and C-OCC), of ``sample_size`` rows, and
   broadcast once;
3. every chunk is coded on its worker;
4. the one-vs-rest problems are solved one of two ways (``strategy``):

   * ``"classes"`` (the default when there are several problems and all rows fit a
     worker): each worker fetches all coded chunks once, worker to worker, and
     solves whole problems with the sequential dual CD, a problem per worker thread
     at a time -- the single-process model for the same anchors, in about the time
     ``-m`` threads take on one machine;
   * ``"cocoa"`` (binary problems; rows too big for one worker): CoCoA+
     (:mod:`lcoding.linear.cocoa`), all classes in the same rounds (C-OCC one class
     after the other, each with its own coding): per round one task per chunk takes
     (its coded rows, its dual variables, ``W``) and returns (``u_k``, its new dual
     variables, its projected-gradient extremes); the driver adds the ``u_k`` and
     applies LIBLINEAR's stopping rule; the coded rows never leave their workers;
5. the result is the same model class the single-process method returns (model
   files in the same format).

A worker lost in the middle of training: Dask recomputes the chunk's rows and codes
from their lineage.  Strategy "classes": the solves are pure tasks, recomputed
elsewhere, and the model is the same.  CoCoA+: the dual variables of that chunk restart from zero and its
accumulated update is taken out of ``W`` (the driver keeps each chunk's sum of
updates), so ``W`` stays the weight vector of the dual variables and training goes
on.  Only then does the result depend on the timing of the loss.  Nothing is
written to disk by :func:`train`: a failure leaves no partial model file.
"""
from __future__ import annotations

import math
import operator
import sys
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from lcoding.core.classes import class_costs, group_classes, one_vs_rest_jobs
from lcoding.core.messages import Messages
from lcoding.core.model import LinearModel, Model, check_trained
from lcoding.core.options import SolverType, TrainParams, check_parameter, parse_train_options
from lcoding.core.params import AnchorInit, CodingType, LLSVMParams, OCCParams
from lcoding.core.rows import INT32_MAX, Rows, as_rows
from lcoding.core.seeds import PURPOSE_DASK_SAMPLE, PURPOSE_SOLVER, rng_state
from lcoding.io._reader import Status
from lcoding.io.parallel import byte_ranges, is_splittable, lines_before, parse_range
from lcoding.io.reader import _raise_format_error, read_libsvm as _read_whole
from lcoding.linear import cocoa
from lcoding.linear.problem import EMPTY_IDX, EMPTY_WEIGHT, BinaryProblem, Coding
from lcoding.linear.solvers import BINARY_SOLVERS, METHOD_BINARY_SOLVERS
from lcoding.local.coding import kernel_map_of
from lcoding.local.model import LocalModel
from lcoding.methods import llsvm, occ
from lcoding.training import select_method, with_data_scaled_width

__all__ = ["train", "predict", "decision_function", "read_libsvm", "is_dask_collection"]

# rows the anchors / planes are learned from (uniform over all rows)
SAMPLE_SIZE = 50_000
# at least this many sampled rows per class when the anchors or planes are per class
MIN_CLASS_SAMPLE = 2_000
DUAL_SOLVERS = frozenset({int(SolverType.L2R_L2LOSS_SVC_DUAL),
                          int(SolverType.L2R_L1LOSS_SVC_DUAL)})
INF = float("inf")


# ------------------------------------------------------------------ inputs
def is_dask_collection(x) -> bool:
    """Whether ``x`` is a Dask collection (False without importing dask when dask
    was never imported: no Dask collection can exist then)."""
    if "dask" not in sys.modules:
        return False
    import dask
    return dask.is_dask_collection(x)


def _dask_array(x, name: str):
    """``x`` as a dask array: arrays as they are, a dask DataFrame / Series through
    ``to_dask_array(lengths=True)`` (which computes the partition lengths)."""
    import dask.array as da
    if isinstance(x, da.Array):
        return x
    if is_dask_collection(x) and hasattr(x, "to_dask_array"):
        return x.to_dask_array(lengths=True)
    raise TypeError(f"{name}: expected a dask.array.Array or a dask DataFrame / Series, got "
                    f"{type(x).__name__} (in-memory data: lcoding.liblinearutil.train)")


def _unknown(chunks) -> bool:
    return any(isinstance(c, float) and math.isnan(c) for c in chunks)


def _checked_inputs(y, X):
    """``(X, y_blocks, sizes)``: X a row-chunked dask array with one column chunk;
    ``y_blocks`` one entry per row chunk (a Delayed or an in-memory array).  Every
    check here runs on metadata only: nothing is scheduled."""
    X = _dask_array(X, "X")
    if X.ndim != 2:
        raise ValueError(f"X: expected a 2-D dask array, got {X.ndim}-D with shape {X.shape}")
    if _unknown(X.chunks[0]) or _unknown(X.chunks[1]):
        raise ValueError("X has unknown chunk sizes (NaN in X.chunks, e.g. after boolean "
                         "indexing or from a DataFrame without lengths): call "
                         "X.compute_chunk_sizes() or to_dask_array(lengths=True) first")
    if X.dtype.kind not in "biuf":
        raise TypeError(f"X: dask array of dtype {X.dtype} is not numeric")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})          # one column chunk: every task sees whole rows
    sizes = tuple(int(c) for c in X.chunks[0])
    n = int(sum(sizes))
    if is_dask_collection(y):
        yd = _dask_array(y, "y")
        if yd.ndim == 2 and yd.shape[1] == 1:
            yd = yd[:, 0]
        if yd.ndim != 1:
            raise ValueError(f"y: expected a 1-D dask array, got shape {yd.shape}")
        if _unknown(yd.chunks[0]):
            raise ValueError("y has unknown chunk sizes (NaN in y.chunks): call "
                             "y.compute_chunk_sizes() first")
        if yd.dtype.kind not in "biuf":
            raise TypeError(f"y: labels of dtype {yd.dtype} are not numbers")
        ysizes = tuple(int(c) for c in yd.chunks[0])
        if ysizes != sizes:
            raise ValueError(f"X and y are partitioned differently: X's row chunks "
                             f"{_short(sizes)}, y's chunks {_short(ysizes)} (len(y) = "
                             f"{sum(ysizes)}, rows of X = {n}); rechunk y to X.chunks[0]")
        y_blocks = list(yd.to_delayed().ravel())
    else:
        try:
            arr = np.asarray(y, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise TypeError("y: labels must be numbers") from None
        if arr.shape[0] != n:
            raise ValueError(f"len(y) = {arr.shape[0]} differs from the {n} rows of X")
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise ValueError(f"y: label {int(bad[0])} is {float(arr[bad[0]])!r}; labels must be finite")
        y_blocks = np.split(arr, np.cumsum(sizes)[:-1])
    if n == 0:
        raise ValueError("empty training problem: X has no rows")
    return X, y_blocks, sizes


def _short(sizes) -> str:
    s = tuple(sizes)
    return str(s) if len(s) <= 6 else f"({', '.join(map(str, s[:3]))}, ..., {s[-1]}; {len(s)} chunks)"


def _client(client):
    if client is not None:
        return client
    try:
        from distributed import default_client
        return default_client()
    except (ImportError, ValueError):
        raise ValueError("lcoding.dask.train needs a distributed Client: pass client=, or "
                         "create one first (from distributed import Client, LocalCluster; "
                         "Client(LocalCluster(n_workers=2, threads_per_worker=1)))") from None


# ------------------------------------------------------------ worker tasks
@dataclass
class _Part:
    """One row chunk on a worker: validated rows (kernel-mapped), labels, and once
    the labels are known, the class index and the one-vs-rest problems."""
    rows: Rows
    y: np.ndarray
    index: int                       # chunk number
    class_index: np.ndarray | None = None
    jobs: dict | None = None         # column -> (y_pm int8, Cp, Cn)


@dataclass
class _Coded:
    """A chunk coded for one group of problems: what the dual-CD pass reads."""
    part: _Part
    rows: Rows                       # the rows the kernel sees (OCC -u 3: [x; B])
    anchor_idx: np.ndarray
    coding_weight: np.ndarray
    bias: float                      # per-anchor bias value (< 0: none)
    shared_bias: float               # one bias for all anchors / planes (< 0: none)
    sqnorm: np.ndarray               # ||z_i||^2
    n_main: int = -1                 # W[:n_main] anchor-major weights (W[-1]: shared bias)
    kind: str = "linear"             # the coding spec's kind: linear, local or occ
    n_anchors: int = 1               # blocks of W (anchors; OCC: planes)


def _prepare_block(xb, yb, index: int, offset: int, n_features: int, kernel_map):
    """Validated rows and labels of chunk ``index`` (rows ``offset`` on)."""
    yb = np.asarray(yb, dtype=np.float64).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(yb))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"y: label {offset + i} (chunk {index}, row {i}) is {float(yb[i])!r}; "
                         f"labels must be finite")
    if hasattr(xb, "to_numpy") and not sp.issparse(xb):
        xb = xb.to_numpy()
    rows = as_rows(xb, f"X chunk {index}")
    if rows.n_rows != yb.shape[0]:
        raise ValueError(f"X chunk {index} has {rows.n_rows} rows, its y chunk {yb.shape[0]}")
    if rows.n_features > n_features:
        raise ValueError(f"X chunk {index} has {rows.n_features} columns, X has {n_features}")
    rows = Rows(rows.data, rows.indices, rows.indptr, n_features)
    if kernel_map is not None:
        rows = kernel_map(rows)
    return _Part(rows, yb, index)


def _label_summary(part: _Part):
    """``(labels in order of first appearance, their counts, bytes of the rows)`` of a
    chunk (labels truncated to int, as LIBLINEAR's group_classes does)."""
    yi = np.trunc(part.y)
    if yi.size and (np.abs(yi) > 2147483647).any():
        i = int(np.flatnonzero(np.abs(yi) > 2147483647)[0])
        raise ValueError(f"y: chunk {part.index}, row {i}: label {float(part.y[i])!r} is outside the "
                         f"32-bit integer range")
    uniq, first, counts = np.unique(yi, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    r = part.rows
    return uniq[order], counts[order], int(r.data.nbytes + r.indices.nbytes + r.indptr.nbytes)


def _with_classes(part: _Part, labels: np.ndarray, weighted_C: np.ndarray, C: float) -> _Part:
    """The chunk with its class index (model order) and one-vs-rest problems."""
    yi = np.trunc(part.y).astype(np.int64)
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order].astype(np.int64)
    pos = np.searchsorted(sorted_labels, yi)
    class_index = order[np.minimum(pos, sorted_labels.size - 1)].astype(np.int64)
    jobs = one_vs_rest_jobs(class_index, labels.size, weighted_C, C, part.rows.n_rows)
    return _Part(part.rows, part.y, part.index, class_index,
                 {col: (np.ascontiguousarray(y_pm, dtype=np.int8), float(Cp), float(Cn))
                  for col, y_pm, Cp, Cn in jobs})


def _take_sample(part: _Part, spec):
    """Sampled rows of a chunk: ``("rows", local row ids)`` or ``("class", {class:
    ordinals among the chunk's rows of that class})``; returns ``(Rows, class index)``."""
    kind, what = spec
    if kind == "rows":
        ids = np.asarray(what, dtype=np.int64)
    else:
        ids = np.sort(np.concatenate(
            [np.flatnonzero(part.class_index == c)[np.asarray(o, dtype=np.int64)]
             for c, o in what.items()] or [np.zeros(0, np.int64)]))
    return part.rows.take(ids), part.class_index[ids]


class _Box:
    """One object as a task argument (Dask would walk a bare tuple of arrays)."""

    def __init__(self, value):
        self.value = value


def _unbox(box: _Box):
    return box.value


def _with_coding(part: _Part, spec) -> _Coded:
    """The chunk coded as ``spec`` says: ``("linear", bias)``, ``("local", coder,
    bias)`` or ``("occ", planes, sigma, bias, plane_bias)``; coded here, next to
    the rows."""
    rows = part.rows
    kind = spec[0]
    if kind == "linear":
        bias = spec[1]
        idx, wt, b, sb = EMPTY_IDX, EMPTY_WEIGHT, bias, -1.0
    elif kind == "local":
        coder, bias = spec[1], spec[2]
        idx, wt = coder.code(rows, n_threads=1)
        b, sb = bias, -1.0
    elif kind == "occ":
        planes, sigma, bias, plane_bias = spec[1:]
        wt = np.ascontiguousarray(occ.occ_codes(rows, planes, sigma))
        M = wt.shape[1]
        idx = np.ascontiguousarray(np.broadcast_to(np.arange(M, dtype=np.int32),
                                                   (rows.n_rows, M)))
        if plane_bias:                     # -u 3: the per-plane bias is a feature B
            rows = occ._with_constant(rows, bias)
        b, sb = -1.0, bias
    else:
        raise ValueError(f"unknown coding spec {kind!r}")
    sq = cocoa.row_sqnorms(rows, b, sb, idx, wt)
    stride = rows.n_features + (1 if b >= 0 else 0)
    n_blocks = 1 if kind == "linear" else wt.shape[1] if kind == "occ" else spec[1].n_anchors
    return _Coded(part, rows, idx, wt, b, sb, sq, stride * n_blocks, kind, n_blocks)


def _concat_rows(pieces) -> Rows:
    """The rows of ``pieces`` (Rows of the same width) one after the other."""
    pieces = list(pieces)
    data = np.concatenate([r.data for r in pieces])
    indices = np.concatenate([r.indices for r in pieces])
    lengths = np.concatenate([np.diff(r.indptr) for r in pieces])
    indptr = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    return Rows(data, indices, indptr, pieces[0].n_features)


@dataclass
class _Whole:
    """All coded chunks joined in chunk order on one worker (strategy "classes"):
    the rows and codes a single-process solve of a one-vs-rest problem reads."""
    rows: Rows
    anchor_idx: np.ndarray
    coding_weight: np.ndarray
    kind: str
    n_anchors: int
    parts: list                      # the chunks' _Part (their one-vs-rest targets)


def _assemble(*coded: _Coded) -> _Whole:
    """Join the coded chunks (fetched from the workers holding them) into one problem."""
    first = coded[0]
    if first.anchor_idx.shape[0] == 0:
        idx, wt = first.anchor_idx, first.coding_weight
    else:
        idx = np.ascontiguousarray(np.concatenate([c.anchor_idx for c in coded]))
        wt = np.ascontiguousarray(np.concatenate([c.coding_weight for c in coded]))
    return _Whole(_concat_rows(c.rows for c in coded), idx, wt, first.kind, first.n_anchors,
                  [c.part for c in coded])


def _solve_problem(whole: _Whole, col: int, stream: np.ndarray, params: TrainParams,
                   bias: float):
    """One one-vs-rest problem on all rows by the single-process solver of its method
    (the sequential dual CD, LIBLINEAR's -s 1 / -s 3; the methods' -s 1 with its
    hand-over to Newton when it stalls); pure: ``(w, passes,
    objective, nSV)``, the same for the same inputs on any worker."""
    y_pm = np.ascontiguousarray(np.concatenate([p.jobs[col][0] for p in whole.parts]))
    _, Cp, Cn = whole.parts[0].jobs[col]
    quiet = Messages(True)
    state = np.array(stream, dtype=np.uint64).reshape(1)
    st = int(params.solver_type)
    if whole.kind == "occ":
        C = np.where(y_pm > 0, Cp, Cn).astype(np.float64)
        loss = "l2" if st == int(SolverType.L2R_L2LOSS_SVC_DUAL) else "l1"
        res = occ.solve_occ_dual(whole.rows, whole.coding_weight, y_pm, C, bias, state, params,
                                 quiet, loss)
    else:
        coding = None if whole.kind == "linear" else \
            Coding(whole.anchor_idx, whole.coding_weight, whole.n_anchors)
        prob = BinaryProblem(whole.rows, y_pm, Cp, Cn, bias, state, coding=coding)
        # LL-SVM's -s 1 hands a stalled dual CD over to Newton, as in one process
        res = (BINARY_SOLVERS if coding is None else METHOD_BINARY_SOLVERS)[st](prob, params,
                                                                                quiet)
    nsv = -1 if res.alpha is None else int(np.count_nonzero(res.alpha > 0))
    return res.w, int(res.n_iter), float(res.objective), nsv


def _round(coded: _Coded, prev, W: np.ndarray, ctl: dict):
    """One CoCoA+ round of one chunk for the problems ``ctl["cols"]`` (column i of
    ``W`` belongs to ``cols[i]``).  Pure: ``prev`` (the previous round's output of
    this chunk, or None) and ``W`` are not modified.  Returns ``(state, results)``,
    ``state[col] = (alpha, PartState)``, ``results[col] = (u_k, PGmax, PGmin,
    all rows active, alpha.(D alpha - 2), nSV, gap terms)`` -- the gap terms (the
    chunk's primal loss at the round's ``W`` and its ``alpha.(D alpha - 2)`` before
    the pass) when ``ctl["gap"]`` asks for them, else None."""
    state = {} if prev is None else prev[0]
    sigma, loss, passes = ctl["sigma"], ctl["loss"], ctl["local_passes"]
    n = coded.rows.n_rows
    new_state, results = {}, {}
    for i, col in enumerate(ctl["cols"]):
        if col in state:
            alpha, ps = state[col]
            alpha, ps = alpha.copy(), ps.copy()
        else:
            alpha = np.zeros(n)
            ps = cocoa.PartState.fresh(np.arange(n, dtype=np.int32), ctl["fresh"][col])
        if ctl["unshrink"][i]:
            ps.active_size = ps.n_rows
        y_pm, Cp, Cn = coded.part.jobs[col]
        diag, upper = cocoa.loss_terms(np.where(y_pm > 0, Cp, Cn).astype(np.float64), loss)
        QD = cocoa.subproblem_qd(coded.sqnorm, diag, sigma)
        W0 = np.ascontiguousarray(W[:, i])
        Wk = W0.copy()
        gap_terms = None
        if ctl["gap"][i]:       # the duality gap's terms at the round's start (W0, alpha)
            f = cocoa.decision_values(coded.rows, coded.bias, coded.shared_bias,
                                      coded.anchor_idx, coded.coding_weight, W0, coded.n_main)
            gap_terms = (cocoa.loss_sum(f, y_pm, np.where(y_pm > 0, Cp, Cn), loss),
                         float(np.dot(alpha, alpha * diag - 2.0)))
        PGmax_old, PGmin_old = ctl["PGmax_old"][i], ctl["PGmin_old"][i]
        PGmax, PGmin = -INF, INF
        for _ in range(passes):
            PGmax, PGmin = cocoa.partition_pass(
                coded.rows, coded.bias, coded.shared_bias, coded.anchor_idx,
                coded.coding_weight, y_pm, QD, diag, upper, alpha, Wk, ps, PGmax_old,
                PGmin_old, sigma)
            if not ctl["unshrink"][i]:       # a round checking all rows shrinks none
                PGmax_old = PGmax if PGmax > 0 else INF
                PGmin_old = PGmin if PGmin < 0 else -INF
        results[col] = ((Wk - W0) / sigma, PGmax, PGmin, ps.active_size == ps.n_rows,
                        float(np.dot(alpha, alpha * diag - 2.0)),
                        int(np.count_nonzero(alpha > 0)), gap_terms)
        new_state[col] = (alpha, ps)
    return new_state, results


# ------------------------------------------------------------------ driver
def _timed_out(what: str, timeout) -> RuntimeError:
    return RuntimeError(f"lcoding.dask.train: {what} took longer than timeout={timeout} s "
                        f"(workers busy, stuck or gone); nothing was returned")


def _gather(client, futures, timeout, what: str):
    """``client.gather(futures)`` within ``timeout`` seconds (None: no limit); a
    RuntimeError naming ``what`` past it."""
    from distributed import wait
    try:
        wait(futures, timeout=timeout)
    except TimeoutError:
        raise _timed_out(what, timeout) from None
    except Exception:               # cancelled futures: gather raises the real error
        pass
    return client.gather(futures)


def _wait_results(futures, timeout=None):
    """Results of ``futures`` in order; None for a future whose data was lost
    (cancelled after a worker died); a task's own exception is raised; a
    RuntimeError when the round takes longer than ``timeout`` seconds."""
    from distributed import wait
    try:
        wait(futures, timeout=timeout)
    except TimeoutError:
        raise _timed_out("a CoCoA+ round", timeout) from None
    except Exception:               # CancelledError when a future was cancelled
        pass
    out = []
    for fut in futures:
        if fut.status == "finished":
            try:
                out.append(fut.result(timeout=timeout))
            except TimeoutError:
                raise _timed_out("a CoCoA+ round", timeout) from None
            except Exception:       # lost between the status and the result
                out.append(None)
        elif fut.status == "error":
            fut.result()            # raises the task's exception (a real error)
        else:
            out.append(None)
    return out


SCATTER_TIMEOUT = 10.0      # seconds; a broadcast to a worker that just died can hang


def _holders(client, futures) -> list:
    """For each future, the workers holding its data (None when unknown)."""
    try:
        who = client.who_has(futures)
    except Exception:               # noqa: BLE001 - cancelled futures: place anywhere
        return [None] * len(futures)
    return [list(who.get(f.key, ())) or None for f in futures]


def _scatter(client, obj, attempts: int = 5):
    """``client.scatter(obj, broadcast=True)``, tried again when a worker dies under
    it (the broadcast then goes to the workers still alive)."""
    for attempt in range(attempts):
        try:
            return client.scatter(obj, broadcast=True, hash=False, timeout=SCATTER_TIMEOUT)
        except (OSError, TimeoutError) as err:      # CommClosedError is an OSError
            if attempt == attempts - 1:
                raise RuntimeError(f"lcoding.dask.train: cannot send data to the workers "
                                   f"({type(err).__name__}: {err})") from err
            time.sleep(0.5 * (attempt + 1))


class _Progress:
    def __init__(self, callback):
        self.callback = callback
        self.rounds = 0

    def __call__(self, n_active):
        self.rounds += 1
        if self.callback is not None:
            self.callback(self.rounds, n_active)


def _cocoa_rounds(client, coded, cols, w_size, streams, params, loss, local_passes, info,
                  progress, max_resets: int = 3, timeout=None):
    """CoCoA+ over the chunks ``coded`` (futures) for the problems ``cols``; returns
    ``{col: (W, rounds, objective, nSV)}``."""
    K = len(coded)
    sigma = float(K)
    rules = {c: cocoa.StopRule.for_partitions(params.resolved_eps(), params.max_iter, K)
             for c in cols}
    gap_pending = {c: False for c in cols}
    W = {c: np.zeros(w_size) for c in cols}
    # each chunk's sum of updates, to take it out of W when the chunk's duals are lost
    sums = {c: [np.zeros(w_size) for _ in range(K)] for c in cols}
    prev = [None] * K
    resets = [0] * K
    last = {}
    active = list(cols)
    while active:
        Wmat = np.column_stack([W[c] for c in active])
        W_fut = _scatter(client, Wmat)
        base = {"cols": active, "sigma": sigma, "loss": loss, "local_passes": local_passes,
                "PGmax_old": [rules[c].PGmax_old for c in active],
                "PGmin_old": [rules[c].PGmin_old for c in active],
                "unshrink": [rules[c].unshrink for c in active],
                "gap": [gap_pending[c] for c in active]}
        w_sq = {c: float(W[c] @ W[c]) for c in active}     # ||W||^2 at the round's start
        futs, res_futs = [], []
        where = _holders(client, coded)
        for k in range(K):
            ctl = dict(base, fresh={c: cocoa.partition_stream(streams[c], k) for c in active})
            # the chunk's round and the extraction of its results run where its coded
            # rows are (no state crosses workers; elsewhere only if that worker is gone)
            place = {} if where[k] is None else {"workers": where[k],
                                                 "allow_other_workers": True}
            futs.append(client.submit(_round, coded[k], prev[k], W_fut, ctl, pure=False,
                                      **place))
            res_futs.append(client.submit(operator.itemgetter(1), futs[k], pure=False,
                                          **place))
        results = _wait_results(res_futs, timeout)
        lost = [k for k in range(K) if results[k] is None]
        change = {}
        for c in active:
            step = np.zeros(w_size)
            for k in range(K):
                if results[k] is not None:
                    u = results[k][c][0]
                    W[c] += u
                    sums[c][k] += u
                    step += u
            change[c] = cocoa.w_change(W[c], step)
        for k in lost:
            resets[k] += 1
            if resets[k] > max_resets:
                raise RuntimeError(f"lcoding.dask.train: the dual variables of chunk {k} were "
                                   f"lost {resets[k]} times (workers died); giving up")
            info(f"\nchunk {k}: its worker was lost; its dual variables restart\n")
            for c in active:
                W[c] -= sums[c][k]
                sums[c][k][:] = 0.0
        prev = [None if results[k] is None else futs[k] for k in range(K)]
        del W_fut, res_futs
        still = []
        for c in active:
            ok = [results[k][c] for k in range(K) if results[k] is not None]
            action = None
            if lost:
                action = rules[c].update(INF, -INF, False)
            else:
                if gap_pending[c]:
                    primal = 0.5 * w_sq[c] + sum(r[6][0] for r in ok)
                    dual = 0.5 * (w_sq[c] + sum(r[6][1] for r in ok))
                    if rules[c].gap_checked(primal, dual) == "stop":
                        action = "stop"
                if action is None:
                    action = rules[c].update(max(r[1] for r in ok), min(r[2] for r in ok),
                                             all(r[3] for r in ok), change[c])
                last[c] = (sum(r[4] for r in ok), sum(r[5] for r in ok))
            gap_pending[c] = action == "gap"
            if action == "unshrink":
                info("*")
            if action != "stop":
                still.append(c)
        if rules[active[0]].rounds % 10 == 0:
            info(".")
        progress(len(still))
        active = still
    out = {}
    for c in cols:
        term, nsv = last.get(c, (float("nan"), 0))
        out[c] = (W[c], rules[c].rounds, 0.5 * (float(W[c] @ W[c]) + term), nsv)
    return out


def _class_solves(client, coded, cols, streams, params, bias, info, progress, timeout=None,
                  nbytes: int = 0):
    """Strategy "classes": every worker joins all coded chunks once (``_assemble``,
    fetched worker to worker, never through the driver) and solves whole one-vs-rest
    problems with the sequential solver, as ``-m`` threads do in one process; a
    worker gets its next problem when one of its own finishes.  Returns ``{col: (W,
    passes, objective, nSV)}``, the single-process solves' results for the same
    coded rows.  A lost worker: its tasks (pure) are recomputed elsewhere by Dask."""
    from distributed import wait
    from distributed.scheduler import KilledWorker
    nthreads = client.nthreads()
    workers = sorted(nthreads)[:len(cols)]
    if not workers:
        raise RuntimeError("lcoding.dask.train: the cluster has no workers")
    wholes = {w: client.submit(_assemble, *coded, workers=[w], allow_other_workers=True,
                               pure=False) for w in workers}
    info(f"one-vs-rest problems on {len(workers)} worker(s), all rows on each\n")
    pending = list(cols)
    running, out = {}, {}

    def launch(w):
        c = pending.pop(0)
        fut = client.submit(_solve_problem, wholes[w], c, streams[c], params, bias,
                            workers=[w], allow_other_workers=True, pure=False)
        running[fut] = (c, w)

    for w in workers:
        for _ in range(max(1, int(nthreads[w]))):
            if pending:
                launch(w)
    while running:
        try:
            done, _ = wait(list(running), timeout=timeout, return_when="FIRST_COMPLETED")
        except TimeoutError:
            raise _timed_out("a one-vs-rest problem", timeout) from None
        for fut in sorted(done, key=lambda f: running[f][0]):
            c, w = running.pop(fut)
            try:
                out[c] = fut.result()        # a task's own exception is raised here
            except KilledWorker as err:
                # the same task killed its worker again and again: most often memory,
                # as every worker holds all rows under this strategy
                raise RuntimeError(
                    f"lcoding.dask.train: the workers solving one-vs-rest problem {c} died "
                    f"again and again ({err}); strategy='classes' joins all rows on every "
                    f"worker ({nbytes / 2 ** 20:.0f} MB with the codes): give the workers "
                    f"more memory, or use strategy='cocoa'") from err
            info(".")
            progress(len(pending) + len(running))
            if pending:
                launch(w)
    return out


def _choose_strategy(strategy: str, n_problems: int, client, nbytes: int) -> str:
    """``"classes"`` when there are several problems and all rows (with their codes)
    fit three times into the smallest worker's memory limit; else ``"cocoa"``."""
    if strategy != "auto":
        return strategy
    if n_problems < 2:
        return "cocoa"
    limits = [w.get("memory_limit") or 0 for w in client.scheduler_info()["workers"].values()]
    if limits and all(limits) and 3 * nbytes > min(limits):
        return "cocoa"
    return "classes"


STRATEGIES = ("auto", "classes", "cocoa")


def _sample_specs(sizes, class_counts, n_sample, per_class, seed, class_min=0):
    """Per chunk, the rows to sample: uniform over all rows (``per_class`` False) or,
    per class, ``max(its share of n_sample, class_min)`` rows (at most the class)."""
    rng = np.random.Generator(np.random.PCG64(int(rng_state(seed, PURPOSE_DASK_SAMPLE)[0])))
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    n = int(offsets[-1])
    if not per_class:
        ids = np.sort(rng.choice(n, min(n, n_sample), replace=False))
        cut = np.searchsorted(ids, offsets)
        return [("rows", ids[cut[k]:cut[k + 1]] - offsets[k]) for k in range(len(sizes))]
    counts = np.asarray(class_counts)               # (chunks, classes)
    totals = counts.sum(axis=0)
    specs = [("class", {}) for _ in sizes]
    for c in range(counts.shape[1]):
        if totals[c] == 0:
            continue
        want = int(min(totals[c], max(math.ceil(n_sample * totals[c] / n), class_min)))
        ords = np.sort(rng.choice(int(totals[c]), want, replace=False))
        starts = np.concatenate([[0], np.cumsum(counts[:, c])])
        cut = np.searchsorted(ords, starts)
        for k in range(len(sizes)):
            if cut[k + 1] > cut[k]:
                specs[k][1][c] = ords[cut[k]:cut[k + 1]] - starts[k]
    return specs


def _gather_sample(client, parts, specs, timeout=None):
    futs = [client.submit(_take_sample, p, s, pure=False) for p, s in zip(parts, specs)]
    pieces = _gather(client, futs, timeout, "sampling the rows")
    ci = np.concatenate([c for _, c in pieces])
    return _concat_rows(r for r, _ in pieces), ci


def _supported(params: TrainParams) -> str:
    """``"linear"``, ``"llsvm"`` or ``"occ"``; a ValueError for what lcoding.dask
    does not train."""
    method = select_method(params)
    st = int(params.solver_type)
    if params.flag_cross_validation or params.flag_find_parameters:
        raise ValueError("lcoding.dask.train: -v and -C are not supported (train once per "
                         "setting)")
    if method.name not in ("linear", "llsvm", "occ") or st not in DUAL_SOLVERS:
        raise ValueError(f"lcoding.dask.train trains -s 1 and -s 3: linear, LL-SVM (-L 1, 2, 3,"
                         f" 6) and anchor planes with LIB-LLSVM (-L 4, 5 -u 1 or 3); not the "
                         f"{method.name} method with -s {st}")
    if method.name == "occ":
        kind = occ.classifier_kind(OCCParams.from_train_params(params), st)
        if kind not in (occ.LIB_LLSVM, occ.LIB_LLSVM_PB):
            raise ValueError(f"lcoding.dask.train: anchor planes train LIB-LLSVM (-u 1, 3) "
                             f"only, not {kind}")
    method.check(params)
    return method.name


def _options(options) -> TrainParams:
    if isinstance(options, TrainParams):
        params = options
    elif isinstance(options, str):
        params = parse_train_options(options)
    else:
        raise TypeError(f"options: an option string or TrainParams, not {type(options).__name__}")
    check_parameter(params)
    return params


def train(y, X, options: str | TrainParams = "", client=None, *, sample_size: int = SAMPLE_SIZE,
          local_passes: int = 1, progress=None, timeout: float | None = None,
          strategy: str = "auto") -> Model:
    """Train an lcoding model on Dask collections; returns the model the same option
    string gives in one process (:func:`lcoding.liblinearutil.train`), of the same
    class, saved and loaded the same way.

    Parameters
    ----------
    y : dask array (1-D), dask Series, or array-like
        Labels, partitioned like the rows of ``X`` (an in-memory array is split to
        match).  Every label must be finite.
    X : dask array (2-D) or dask DataFrame
        Rows chunked along axis 0 (known chunk sizes; columns are joined into one
        chunk); chunks may be numpy arrays or scipy sparse matrices.
    options : str
        LIBLINEAR / lcoding training options: ``-s 1`` or ``-s 3``, linear, with an
        LL-SVM coding ``-L 1, 2, 3, 6`` or anchor planes ``-L 4, 5`` (``-u 1, 3``).
        ``-m N``: the driver learns the anchors in ``N`` threads (the same
        anchors for any ``N``); the workers do the rest.
    client : distributed.Client, optional
        Default: the current client (``distributed.default_client()``).
    sample_size : int
        Rows the anchors / planes are learned from (uniform sample; with ``-M``, at
        least ``-I`` times ``-M``).
    local_passes : int
        Dual-CD passes per chunk in one CoCoA+ round (more passes: fewer rounds,
        each longer).
    progress : callable, optional
        Called as ``progress(step, problems_still_training)`` after every CoCoA+
        round, or (strategy "classes") after every solved problem.
    timeout : float, optional
        Seconds any one wait for the workers may take (reading the chunks, the
        sample, one CoCoA+ round); past it a RuntimeError, and no model.  Default:
        no limit.  The rounds themselves are capped by ``-e`` and the iteration cap
        (LIBLINEAR's 300 outer iterations).
    strategy : {"auto", "classes", "cocoa"}
        How the one-vs-rest problems use the workers.  ``"classes"``: every worker
        gathers all coded rows once (worker to worker) and solves whole problems with
        the sequential solver, a problem per worker thread at a time -- the model is
        the single-process model for the same anchors (with ``sample_size`` at least
        the number of rows, the same model bit for bit), in about the time ``-m``
        threads take on one machine.  ``"cocoa"``: CoCoA+ rounds over the chunks;
        the rows never leave their workers (data larger than one worker's memory).
        ``"auto"`` (default): ``"classes"`` when there are two or more problems and
        all rows fit three times into the smallest worker memory limit, else
        ``"cocoa"``.

    Raises
    ------
    ValueError, TypeError
        Bad inputs (unknown chunk sizes, ``X`` and ``y`` chunked differently,
        non-finite labels, options lcoding.dask does not train) -- the checks on
        the collections' metadata run before anything is scheduled.
    RuntimeError
        Workers lost again and again during training, or a wait longer than
        ``timeout``.
    """
    params = _options(options)
    method = _supported(params)
    X, y_blocks, sizes = _checked_inputs(y, X)
    if int(local_passes) < 1:
        raise ValueError(f"local_passes={local_passes} must be >= 1")
    if int(sample_size) < 1:
        raise ValueError(f"sample_size={sample_size} must be >= 1")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy={strategy!r} must be one of {', '.join(STRATEGIES)}")
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout={timeout!r} must be a positive number of seconds or None")
    client = _client(client)
    from dask import delayed

    info = Messages(params.quiet)
    t0 = time.perf_counter()
    st = int(params.solver_type)
    loss = "l2" if st == int(SolverType.L2R_L2LOSS_SVC_DUAL) else "l1"
    bias = float(params.bias)
    seed = params.seed
    nr_feature = int(X.shape[1])
    kernel_map = kernel_map_of(params) if method != "linear" else None
    x_blocks = list(X.to_delayed().ravel())
    keep = [k for k, s in enumerate(sizes) if s > 0]       # empty chunks hold no problem
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    prep = [delayed(_prepare_block, pure=True)(x_blocks[k], y_blocks[k], k, int(offsets[k]),
                                               nr_feature, kernel_map) for k in keep]
    parts = client.compute(prep)
    sizes = [sizes[k] for k in keep]
    summaries = _gather(client, client.map(_label_summary, parts, pure=False), timeout,
                        "reading the chunks and their labels")
    labels, _ = group_classes(np.concatenate([s[0] for s in summaries]).astype(np.float64))
    nr_class = labels.size
    weighted_C = class_costs(labels, params)
    class_counts = np.zeros((len(parts), nr_class), dtype=np.int64)
    label_pos = {int(v): i for i, v in enumerate(labels)}
    for k, (labs, counts, _) in enumerate(summaries):
        for v, cnt in zip(labs, counts):
            class_counts[k, label_pos[int(v)]] += cnt
    parts = [client.submit(_with_classes, p, labels, weighted_C, float(params.C), pure=False)
             for p in parts]
    n = int(sum(sizes))
    nbytes = sum(s[2] for s in summaries)          # the validated rows on the workers
    info(f"lcoding.dask: {n} rows in {len(parts)} chunks, {nr_class} classes "
         f"({time.perf_counter() - t0:.2f} s)\n")
    cols = list(range(1 if nr_class <= 2 else nr_class))
    streams = {c: rng_state(seed, PURPOSE_SOLVER, c) for c in cols}

    # what each group of problems is coded with
    coder = planes = sigma = None
    kind = None
    if method == "linear":
        w_size = nr_feature + (1 if bias >= 0 else 0)
        groups = [(cols, ("linear", bias))]
    elif method == "llsvm":
        mp = LLSVMParams.from_train_params(params)
        per_class = mp.anchors.init in (AnchorInit.KMEANS_PER_CLASS,
                                        AnchorInit.RANDOM_SAMPLES_PER_CLASS)
        want = int(sample_size)
        if mp.anchors.kmeans_batch > 0:
            want = max(want, mp.anchors.kmeans_iter * mp.anchors.kmeans_batch)
        want = max(want, mp.anchors.n_anchors)
        specs = _sample_specs(sizes, class_counts, want, per_class, seed,
                              class_min=MIN_CLASS_SAMPLE if per_class else 0)
        s_rows, s_ci = _gather_sample(client, parts, specs, timeout)
        # -L 2, 3 without -u: the width from the sampled rows (mapped by -K already),
        # as train's from all rows
        params = with_data_scaled_width(params, s_rows, mapped=True)
        mp = LLSVMParams.from_train_params(params)
        t = time.perf_counter()
        # -m: the driver's threads for k-means (the same anchors for any count)
        anchors = llsvm.learn_local_anchors(s_rows, s_ci, mp, seed,
                                            n_threads=params.n_threads)
        coder = llsvm.local_coder(mp, anchors)
        info(f"anchors: {coder.n_anchors} from {s_rows.n_rows} sampled rows "
             f"({time.perf_counter() - t:.2f} s), coding {coder.name} k={coder.k}\n")
        w_size = coder.n_anchors * (coder.dim + (1 if bias >= 0 else 0))
        groups = [(cols, ("local", coder, bias))]
    else:
        op = OCCParams.from_train_params(params)
        kind = occ.classifier_kind(op, st)
        M = op.n_planes
        d = s_dim = None
        if op.planes == CodingType.G_OCC:
            specs = _sample_specs(sizes, class_counts, int(sample_size), False, seed)
            s_rows, _ = _gather_sample(client, parts, specs, timeout)
            V, s = occ.occ_basis(s_rows, M, seed=occ.basis_seed(seed, (), None))
            bases = [(V, s * math.sqrt(n / s_rows.n_rows))]
            groups = [(cols, ("occ", V, bases[0][1], bias, kind == occ.LIB_LLSVM_PB))]
        else:
            specs = _sample_specs(sizes, class_counts, int(sample_size), True, seed,
                                  class_min=MIN_CLASS_SAMPLE)
            s_rows, s_ci = _gather_sample(client, parts, specs, timeout)
            bases, groups = [], []
            totals = class_counts.sum(axis=0)
            for c in cols:
                sub = s_rows.take(np.flatnonzero(s_ci == c))
                V, s = occ.occ_basis(sub, M, seed=occ.basis_seed(seed, (), c))
                s = s * math.sqrt(totals[c] / sub.n_rows)
                bases.append((V, s))
                groups.append(([c], ("occ", V, s, bias, kind == occ.LIB_LLSVM_PB)))
        s_dim = s_rows.n_features
        d = s_dim + (1 if kind == occ.LIB_LLSVM_PB else 0)
        w_size = M * d + 1
        planes = np.vstack([b[0] for b in bases])
        sigma = np.concatenate([b[1] for b in bases])
        info(f"planes: {len(bases)} x {M} from {s_rows.n_rows} sampled rows\n")

    counter = _Progress(progress)
    solved = {}
    for group_cols, spec in groups:
        # a task holding the spec, not scattered data: Dask can recompute it when the
        # workers holding it die (a scatter made while a worker restarts may have one
        # copy only, and lost scattered data is gone for good)
        spec_fut = client.submit(_unbox, _Box(spec), pure=False)
        coded = [client.submit(_with_coding, p, spec_fut, pure=False) for p in parts]
        # the codes: k (anchor id, weight) pairs per row, or the group's plane weights
        width = 0 if spec[0] == "linear" else spec[1].k if spec[0] == "local" \
            else spec[1].shape[0]
        code_bytes = n * 12 * width
        if _choose_strategy(strategy, len(group_cols), client, nbytes + code_bytes) == "classes":
            solved.update(_class_solves(client, coded, group_cols, streams, params, bias,
                                        info, counter, timeout=timeout,
                                        nbytes=nbytes + code_bytes))
        else:
            info(f"CoCoA+: {len(coded)} chunks, {len(group_cols)} problem(s)\n")
            solved.update(_cocoa_rounds(client, coded, group_cols, w_size, streams, params,
                                        loss, int(local_passes), info, counter,
                                        timeout=timeout))
        del coded, spec_fut
    for c in cols:
        w_c, rounds, objective, nsv = solved[c]
        info(f"\noptimization finished, #iter = {rounds}\nObjective value = {objective:f}\n"
             f"nSV = {nsv}\n")
        if rounds >= params.max_iter:
            info("\nWARNING: reaching max number of iterations\n"
                 + (cocoa.LOCAL_CAP_REMEDY if method != "linear" else "") + "\n")
    w = np.column_stack([solved[c][0] for c in cols])
    info(f"lcoding.dask: trained in {time.perf_counter() - t0:.2f} s\n")
    if method == "linear":
        model = LinearModel(st, nr_class, labels, nr_feature, bias, w, param=params)
    elif method == "llsvm":
        model = LocalModel(st, nr_class, labels, nr_feature, bias, coder, w,
                           kernel_map=kernel_map, param=params)
    else:
        if kind == occ.LIB_LLSVM and bias < 0:
            w = w[:-1]
        model = occ.OCCModel(st, nr_class, labels, nr_feature, bias,
                             occ.OCC_CODINGS[params.coding], kind, planes, sigma, w,
                             param=params, kernel_map=kernel_map)
    return check_trained(model)


# ---------------------------------------------------------------- prediction
def _block_values(block, model: Model) -> np.ndarray:
    rows = as_rows(block.to_numpy() if hasattr(block, "to_numpy") and not sp.issparse(block)
                   else block, "X chunk").truncated(model.nr_feature)
    return model.decision_values(rows)


def _block_labels(block, model: Model) -> np.ndarray:
    return model.labels_from_values(_block_values(block, model)).astype(np.float64)


def _model_and_array(model, X):
    from dask import delayed
    core = model.core if hasattr(model, "core") else model
    if not isinstance(core, Model):
        raise TypeError(f"model: an lcoding model, not {type(model).__name__}")
    X = _dask_array(X, "X")
    if X.ndim != 2:
        raise ValueError(f"X: expected a 2-D dask array, got {X.ndim}-D")
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    return core, delayed(core, pure=True), X


def predict(model, X):
    """Predicted labels of the rows of ``X`` (a dask array or DataFrame), lazily: a
    1-D float64 dask array chunked like ``X``'s rows (``X.map_blocks``; the model
    is one shared graph key)."""
    core, m, X = _model_and_array(model, X)
    return X.map_blocks(_block_labels, m, drop_axis=1, dtype=np.float64,
                        meta=np.empty(0, dtype=np.float64))


def decision_function(model, X):
    """Decision values ``(n_rows, nr_w)`` of the rows of ``X``, lazily (as
    :func:`predict`; the columns follow ``model.label``, one column for binary
    models)."""
    core, m, X = _model_and_array(model, X)
    return X.map_blocks(_block_values, m, dtype=np.float64, chunks=(X.chunks[0], (core.nr_w,)),
                        meta=np.empty((0, 0), dtype=np.float64))


# ---------------------------------------------------------------- reading
class _Block:
    """A parsed byte range of a LIBSVM file (labels and CSR arrays)."""

    def __init__(self, labels, indptr, indices, values, max_index):
        self.labels, self.indptr, self.indices, self.values = labels, indptr, indices, values
        self.max_index = max_index


def _parse_block(path: str, start: int, stop: int, index_limit: int, whole: bool) -> _Block:
    if whole:       # a compressed file: read as one block
        y, rows = _read_whole(path, None if index_limit == INT32_MAX else index_limit)
        return _Block(y, rows.indptr, rows.indices, rows.data, rows.n_features)
    with open(path, "rb") as stream:
        stream.seek(start)
        data = stream.read(stop - start)
    parser = parse_range(memoryview(data), index_limit)
    if parser.status != Status.OK:
        _raise_format_error(parser, path, lines_before(path, start))
    labels, indptr, indices, values = parser.take_arrays()
    return _Block(labels, indptr, indices, values, parser.max_index)


def _block_shape(block: _Block):
    return block.labels.shape[0], block.max_index


def _block_csr(block: _Block, n_features: int):
    return sp.csr_matrix((block.values, block.indices, block.indptr),
                         shape=(block.labels.shape[0], n_features))


def _block_y(block: _Block):
    return block.labels


def read_libsvm(path, blocksize: int = 64 << 20, n_features: int | None = None):
    """``(y, X)``: a LIBSVM file as dask arrays, ``X`` chunked by rows into scipy CSR
    matrices (one chunk per ``blocksize`` bytes of the file, cut at line ends),
    ``y`` chunked alike.

    The blocks are parsed once, when this function runs (on the current
    distributed client, else on dask's default scheduler), and kept in memory
    (persisted) so that the chunk sizes and ``n_features`` (default: the largest
    index in the file) are known.  A compressed file is one block.  Format errors
    raise :class:`~lcoding.io.reader.LibsvmFormatError` naming the file and its
    line (counted from the start of the file)."""
    import os

    import dask
    import dask.array as da
    from dask import delayed
    if n_features is not None:
        if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) \
                or not 0 <= n_features <= INT32_MAX:
            raise ValueError(f"n_features={n_features!r} must be an int in [0, {INT32_MAX}]")
    name = os.fsdecode(os.fspath(path))
    if not os.path.exists(name):
        raise FileNotFoundError(f"{name}: no such file")
    limit = INT32_MAX if n_features is None else int(n_features)
    whole = not is_splittable(name)
    ranges = [(0, 0)] if whole else byte_ranges(name, blocksize=int(blocksize))
    blocks = dask.persist(*[delayed(_parse_block, pure=True)(name, a, b, limit, whole)
                            for a, b in ranges])
    shapes = dask.compute(*[delayed(_block_shape)(b) for b in blocks])
    width = int(n_features) if n_features is not None else max((s[1] for s in shapes), default=0)
    meta_x = sp.csr_matrix((0, width))
    xs = [da.from_delayed(delayed(_block_csr, pure=True)(b, width), shape=(s[0], width),
                          dtype=np.float64, meta=meta_x) for b, s in zip(blocks, shapes)]
    ys = [da.from_delayed(delayed(_block_y, pure=True)(b), shape=(s[0],), dtype=np.float64,
                          meta=np.empty(0)) for b, s in zip(blocks, shapes)]
    return da.concatenate(ys), da.concatenate(xs, axis=0)
