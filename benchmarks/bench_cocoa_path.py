"""-m 2 on one binary problem without the machine's load in the way: the
critical path of CoCoA+ (two partitions) against the sequential dual CD, in thread
CPU seconds.

For each case the sequential dual CD (LIBLINEAR's solver, one partition) and
CoCoA+ with two partitions run their passes one after the other in this thread;
each pass is timed with ``time.thread_time()`` (CPU of this thread only, so other
jobs on the machine hardly change it).  A CoCoA+ round's *critical path* is the
slower of its two partitions' passes: the round's time on two idle cores without
any thread hand-off.  The primal objective is computed after every pass / round
(not timed), and the table gives the time to reach the sequential solver's final
objective within 1e-3 and 1e-4 relative, and to each method's own stop.

    python benchmarks/bench_cocoa_path.py            # the four cases of bench_scale's speedup

The problems: ``class 0`` of the set against the rest, the same anchors / coding
for both methods (learned once), C and -e of the options.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if any((HERE.parent / "lcoding" / "linear").glob("_dual_cd*.so")):
    sys.path.insert(0, str(HERE.parent))
from bench_scale import DEFAULT_DATA, SPEEDUP_CASES, load_set  # noqa: E402
from _bench_common import load_avg  # noqa: E402

from lcoding.core.classes import group_classes  # noqa: E402
from lcoding.core.options import parse_train_options  # noqa: E402
from lcoding.core.params import LLSVMParams  # noqa: E402
from lcoding.core.seeds import PURPOSE_SOLVER, rng_state  # noqa: E402
from lcoding.io.datasets import load  # noqa: E402
from lcoding.linear import cocoa  # noqa: E402
from lcoding.linear.problem import EMPTY_IDX, EMPTY_WEIGHT  # noqa: E402
from lcoding.methods import llsvm  # noqa: E402


def case(name, options, max_rounds=300):
    y, rows = load_set(DEFAULT_DATA, "skin") if name == "skin" else load(name, "train")
    params = parse_train_options(options)
    _, ci = group_classes(y)
    y_pm = np.where(ci == 0, 1, -1).astype(np.int8)
    if params.coding is not None and int(params.coding) > 0:
        mp = LLSVMParams.from_train_params(params)
        coder = llsvm.local_coder(mp, llsvm.learn_local_anchors(rows, ci, mp, params.seed))
        idx, wt = coder.code(rows, n_threads=1)
        w_size = coder.n_anchors * (rows.n_features + 1)
    else:
        idx, wt, w_size = EMPTY_IDX, EMPTY_WEIGHT, rows.n_features + 1
    n = rows.n_rows
    C = np.full(n, params.C)
    diag, upper = cocoa.loss_terms(C, "l2")
    sq = cocoa.row_sqnorms(rows, params.bias, -1.0, idx, wt)
    stream = rng_state(params.seed, PURPOSE_SOLVER, 0)

    def primal(W):
        f = cocoa.decision_values(rows, params.bias, -1.0, idx, wt, W, w_size)
        return 0.5 * float(W @ W) + cocoa.loss_sum(f, y_pm, C, "l2")

    def run(K):
        sigma = float(K)
        QD = cocoa.subproblem_qd(sq, diag, sigma)
        if K == 1:
            parts = [cocoa.PartState(np.arange(n, dtype=np.int32), n, stream.copy())]
        else:
            parts = [cocoa.PartState.fresh(ids, cocoa.partition_stream(stream, k))
                     for k, ids in enumerate(cocoa.split_rows(n, K, stream))]
        alpha, W = np.zeros(n), np.zeros(w_size)
        rule = cocoa.StopRule.for_partitions(params.resolved_eps(), max_rounds, K)
        work = [W] if K == 1 else [np.empty_like(W) for _ in range(K)]
        trace, total = [], 0.0
        while not rule.done:
            pgs, slowest = [], 0.0
            for k in range(K):
                if rule.unshrink:
                    parts[k].active_size = parts[k].n_rows
                if K > 1:
                    np.copyto(work[k], W)
                t = time.thread_time()
                pgs.append(cocoa.partition_pass(rows, params.bias, -1.0, idx, wt, y_pm, QD, diag,
                                                upper, alpha, work[k], parts[k], rule.PGmax_old,
                                                rule.PGmin_old, sigma))
                slowest = max(slowest, time.thread_time() - t)
            change = np.inf
            if K > 1:
                step = sum((work[k] - W) / sigma for k in range(K))
                W += step
                change = cocoa.w_change(W, step)
            action = rule.update(max(p[0] for p in pgs), min(p[1] for p in pgs),
                                 all(p.active_size == p.n_rows for p in parts), change)
            if action == "gap":
                rule.gap_checked(primal(W), cocoa.dual_objective(W, alpha, diag))
            total += slowest
            trace.append((rule.rounds, total, primal(W)))
        return trace, rule.reason

    seq, _ = run(1)
    par, why = run(2)
    p_ref = seq[-1][2]
    out = {"set": name, "options": options, "passes": len(seq), "rounds": len(par),
           "stop": why, "seq_s": seq[-1][1], "par_s": par[-1][1],
           "primal_rel": (par[-1][2] - p_ref) / p_ref}
    for tol in (1e-3, 1e-4):
        hits = [next((t for _, t, p in tr if p <= p_ref * (1 + tol)), None) for tr in (seq, par)]
        out[f"to_{tol:g}"] = hits
    return out


def main():
    print(f"load average before: {load_avg()}")
    print("| set | options | passes -m 1 | rounds -m 2 (stop) | -m 1 s | -m 2 critical s | "
          "ratio at the stops | ratio to P within 1e-3 | ratio to P within 1e-4 | primal rel |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for name, _, options in SPEEDUP_CASES:
        r = case(name, options)

        def ratio(pair):
            a, b = pair
            return "--" if a is None or b is None else f"{a / b:.2f}x"
        print(f"| {name} | `{options}` | {r['passes']} | {r['rounds']} ({r['stop']}) | "
              f"{r['seq_s']:.3f} | {r['par_s']:.3f} | {r['seq_s'] / r['par_s']:.2f}x | "
              f"{ratio(r['to_0.001'])} | {ratio(r['to_0.0001'])} | {r['primal_rel']:.1e} |",
              flush=True)
    print(f"load average after: {load_avg()}")


if __name__ == "__main__":
    main()
