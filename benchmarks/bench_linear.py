"""Linear solvers side by side with liblinear-official, in one run.

For each data set and option string: training time of LIBLINEAR's C ``train``
(problem construction excluded) against lcoding's ``train_model`` (validated rows
prepared beforehand), best of ``--repeat`` runs; the primal objective each reaches;
test accuracy and agreement; and ``predict`` on the whole test set through each
package's Python API.  Prints one JSON line per measurement and writes a markdown
table (default ``benchmarks/results/linear.md``).

    python benchmarks/bench_linear.py                 # ijcnn1, w8a, mnist; -s 1 and -s 3
    python benchmarks/bench_linear.py --quick         # ijcnn1 only, one repeat
    python benchmarks/bench_linear.py --data w8a --options "-s 1" "-s 3 -B 1"
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

from lcoding.io import datasets
from lcoding.core.rows import as_rows
from lcoding.liblinearutil import predict as lc_predict
from lcoding.liblinear import model as lc_model
from lcoding.core.options import parse_train_options
from lcoding.training import train_model


def primal_objective(w, X, y_pm, C, solver_type, bias):
    """0.5 ||w||^2 + C sum loss for the binary sub-problem (L1/L2 hinge)."""
    if bias >= 0:
        X = sp.hstack([X, np.full((X.shape[0], 1), bias)]).tocsr()
    margin = 1.0 - y_pm * (X @ w)
    loss = np.maximum(margin, 0.0)
    if solver_type in (1, 2):
        loss = loss ** 2
    return 0.5 * float(w @ w) + C * float(loss.sum())


def best_time(fn, repeat):
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def run_case(name, options, repeat, emit):
    from liblinear import liblinear as ll_c
    from liblinear import liblinearutil as ll

    y, rows = datasets.load(name, "train")
    ty, trows = datasets.load(name, "test")
    n = max(rows.n_features, trows.n_features)
    X = sp.csr_matrix((rows.data, rows.indices, rows.indptr), shape=(rows.n_rows, n))
    tX = sp.csr_matrix((trows.data, trows.indices, trows.indptr), shape=(trows.n_rows, n))
    params = parse_train_options(options + " -q")
    rows = as_rows(X)

    ll_prob = ll.problem(y, X)
    ll_param = ll.parameter(options + " -q")
    ll_prob.set_bias(ll_param.bias)

    # interleaved, so that a load spike on the shared machine hits both sides alike
    t_ll = t_lc = np.inf
    for _ in range(repeat):
        t, ll_ptr = best_time(lambda: ll_c.liblinear.train(ll_prob, ll_param), 1)
        t_ll = min(t_ll, t)
        t, lc_core = best_time(lambda: train_model(y, rows, params), 1)
        t_lc = min(t_lc, t)
    ll_m = ll.toPyModel(ll_ptr)
    lc_m = lc_model(lc_core)

    # objectives of the first binary sub-problem (label[0] against the rest)
    labels = lc_core.label
    y_pm = np.where(np.trunc(y) == labels[0], 1.0, -1.0)
    w_size = lc_core.w.shape[0]
    ll_w = np.ctypeslib.as_array(ll_m.w, (w_size * lc_core.nr_w,)).reshape(w_size, -1)[:, 0]
    obj_ll = primal_objective(ll_w, X, y_pm, params.C, params.solver_type, params.bias)
    obj_lc = primal_objective(lc_core.w[:, 0], X, y_pm, params.C, params.solver_type, params.bias)

    t_pll, (p_ll, _, _) = best_time(lambda: ll.predict(ty, tX, ll_m, "-q"), 1)
    t_plc, (p_lc, _, _) = best_time(lambda: lc_predict(ty, tX, lc_m, "-q"), repeat)
    p_ll, p_lc = np.array(p_ll), np.array(p_lc)
    rec = {
        "bench": "linear", "data": name, "options": options, "n_train": int(X.shape[0]),
        "n_test": int(tX.shape[0]), "n_features": int(n), "nnz": int(X.nnz),
        "train_s_liblinear": t_ll, "train_s_lcoding": t_lc, "train_ratio": t_lc / t_ll,
        "primal_obj_liblinear": obj_ll, "primal_obj_lcoding": obj_lc,
        "obj_rel_diff": (obj_lc - obj_ll) / abs(obj_ll),
        "acc_liblinear": float((p_ll == ty).mean() * 100), "acc_lcoding": float((p_lc == ty).mean() * 100),
        "agreement": float((p_ll == p_lc).mean()),
        "predict_s_liblinear": t_pll, "predict_s_lcoding": t_plc, "predict_speedup": t_pll / t_plc,
    }
    emit(rec)
    return rec


def markdown(records):
    lines = ["# Linear solvers: lcoding vs liblinear-official (one run)", "",
             f"Machine: {os.cpu_count()} cores; `python benchmarks/bench_linear.py`; training = best of "
             "repeats, LIBLINEAR's C `train` only (problem construction excluded); objective = "
             "primal objective of the first one-vs-rest sub-problem; predict = whole test set "
             "through each package's Python `predict`.", "",
             "| data | options | train LIBLINEAR s | train lcoding s | ratio | primal obj rel. diff "
             "| acc LIBLINEAR % | acc lcoding % | agreement | predict LIBLINEAR s | predict lcoding s | "
             "predict speed-up |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in records:
        lines.append(
            f"| {r['data']} | `{r['options']}` | {r['train_s_liblinear']:.3f} | {r['train_s_lcoding']:.3f} | "
            f"{r['train_ratio']:.2f} | {r['obj_rel_diff']:+.1e} | {r['acc_liblinear']:.2f} | "
            f"{r['acc_lcoding']:.2f} | {r['agreement']:.4f} | {r['predict_s_liblinear']:.2f} | "
            f"{r['predict_s_lcoding']:.4f} | {r['predict_speedup']:.0f}x |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=["ijcnn1", "w8a", "mnist"])
    ap.add_argument("--options", nargs="+", default=["-s 1", "-s 3", "-s 1 -B 1", "-s 3 -B 1"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="ijcnn1, one repeat")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "linear.md"))
    args = ap.parse_args(argv)
    if args.quick:
        args.data, args.repeat = ["ijcnn1"], 1
    records = []

    def emit(rec):
        print(json.dumps(rec), flush=True)

    for name in args.data:
        for options in args.options:
            records.append(run_case(name, options, args.repeat, emit))
    with open(args.out, "w") as fh:
        fh.write(markdown(records))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
