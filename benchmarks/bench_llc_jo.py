"""LLC-JO / LLC-SAPL benchmark (seed 001, algorithms.md §C.6): accuracy and test
hinge loss of the last epoch, mean +- std over runs with different seeds (the
seed drives the k-means anchors and the sample permutation).

    python benchmarks/bench_llc_jo.py banana "-s 31 -L 3 -A 40 -u 5 ..." [runs]
"""
from __future__ import annotations

import sys
import time

import numpy as np

from lcoding import datasets
from lcoding.options import parse_train_options
from lcoding.training import train_model


def run(name: str, opts: str, runs: int = 5):
    y, rows = datasets.load(name, "train")
    ty, trows = datasets.load(name, "test")
    accs, hinges, trains, kst, secs = [], [], [], [], []
    for seed in range(1, runs + 1):
        t = time.perf_counter()
        model = train_model(y, rows, parse_train_options(f"{opts} -S {seed} -q"))
        secs.append(time.perf_counter() - t)
        dv = model.decision_values(trows.truncated(model.nr_feature))
        accs.append(100 * np.mean(model.labels_from_values(dv) == ty))
        if model.nr_class == 2:
            ys = np.where(ty == model.label[0], 1.0, -1.0)
            hinges.append(float(np.mean(np.maximum(0.0, 1.0 - ys * dv[:, 0]))))
        curve = getattr(model, "training_curve", None)
        if curve:
            trains.append(curve["hinge"][-1])
            kst.append(curve["mean_kstar"][-1])
    fmt = lambda v, p: f"{np.mean(v):.{p}f} ± {np.std(v):.{p}f}" if v else "-"  # noqa: E731
    print(f"| {name} | `{opts}` | {fmt(accs, 2)} | {fmt(hinges, 4)} | {fmt(trains, 4)} | "
          f"{fmt(kst, 2)} | {np.mean(secs):.1f} |", flush=True)


if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5)
