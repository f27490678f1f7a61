"""``-C`` with a local coding vs the naive loop of ``-v 5`` per point (issue 18 part 1).

For each data set: the search ``train(y, x, '-C <options>')`` (time, points, best CV
error), the naive alternative -- ``train(y, x, '<point> -v 5')`` for the same points
(every ``--stride``-th point timed, the total extrapolated to all points) -- and the
test error of the winner retrained on all training rows.  Every choice is made on the
training folds; the test set is read only to report the winner's error.

    python benchmarks/bench_search.py banana "-L 2 -B 1"
    python benchmarks/bench_search.py ijcnn1 "-L 2 -B 1" --subset 10000 --stride 8
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from lcoding.core.messages import Messages
from lcoding.core.options import parse_train_options
from lcoding.io import datasets
from lcoding.liblinearutil import predict, train
from lcoding.methods.local_search import find_local_parameters
from lcoding.training import cross_validation


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("options")
    ap.add_argument("--subset", type=int, default=0, help="seeded subset of training rows")
    ap.add_argument("--stride", type=int, default=1, help="time every n-th naive point")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    y, rows = datasets.load(args.data, "train")
    ty, trows = datasets.load(args.data, "test")
    if args.subset and args.subset < rows.n_rows:
        ids = np.sort(np.random.default_rng(0).choice(rows.n_rows, args.subset, replace=False))
        y, rows = y[ids], rows.take(ids)
    X = rows.to_csr()
    options = f"-C {args.options} -q"
    t = time.perf_counter()
    result, points = find_local_parameters(y, rows, parse_train_options(options), Messages(True))
    t_search = time.perf_counter() - t
    timed = points[::args.stride]
    t = time.perf_counter()
    naive_rates = []
    for p in timed:
        params = parse_train_options(p.options + " -v 5 -q")
        naive_rates.append(float(np.mean(cross_validation(y, rows, params, 5) == y)))
    t_naive_timed = time.perf_counter() - t
    t_naive = t_naive_timed * len(points) / len(timed)
    diffs = [abs(a - p.rate) for a, p in zip(naive_rates, timed)]
    t = time.perf_counter()
    model = train(y, X, result.best_options + " -q")
    t_final = time.perf_counter() - t
    _, (acc, _, _), _ = predict(ty, trows.to_csr(), model, "-q")
    naive_best = max(zip(naive_rates, timed), key=lambda r: r[0])
    rec = {
        "data": args.data, "rows": rows.n_rows, "options": options, "points": len(points),
        "settings": len({(p.n_anchors, p.coding_param) for p in points}),
        "search_s": round(t_search, 2), "naive_s": round(t_naive, 2),
        "naive_points_timed": len(timed), "speedup": round(t_naive / t_search, 1),
        "best_options": result.best_options, "cv_error": round(100 * (1 - result.best_rate), 2),
        "test_error": round(100 - acc, 2), "final_train_s": round(t_final, 2),
        "max_rate_diff_vs_naive": round(100 * max(diffs), 2),
        "mean_rate_diff_vs_naive": round(100 * float(np.mean(diffs)), 3),
        "naive_best_cv_error_on_timed_points": round(100 * (1 - naive_best[0]), 2),
        "load": os.getloadavg()[0],
    }
    print(json.dumps(rec))
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
