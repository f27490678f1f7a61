"""Every estimator of :mod:`lcoding.sklearn` at its defaults on every shared set (and
``KQMetricsClassifier(solver='metrics')``, reported apart from the defaults), beside scikit-learn's ``SVC()``, ``LinearSVC()`` and ``Nystroem() + LinearSVC()``
at theirs.  Writes ``benchmarks/results/defaults.md`` (test error %, train seconds).

Nothing is tuned here: every model is built with its constructor's defaults (only
``random_state=0`` where the estimator has one) and trained on the training split;
the test split is used for the reported error only.  Train seconds: the wall clock of
``fit``; where a fit takes under ``REPEAT_BELOW_S``, the median of ``FITS`` fits of
fresh estimators (every model alike, lcoding's and scikit-learn's: on this shared
machine one sub-second fit varies by +-20 % from run to run, and the first fit in a
process pays one-time costs), else the one fit.  The error is the first fit's.

    python benchmarks/bench_defaults.py                      # everything, one process
    python benchmarks/bench_defaults.py --sets banana,usps --models LocallyLinearSVC,SVC

``--sets`` takes any set of ``$LCODING_DATA`` (``<set>.train.bz2`` and
``<set>.test.bz2``), not only the shared ones; its rows follow theirs in the table.

``--cache FILE`` appends every measurement to a JSON-lines file and skips the
(set, model) pairs already in it, so a long run (``SVC()`` on mnist takes many
minutes on 2 cores) can be resumed; the table is written from the cache plus the
new rows.  The lcoding estimators get the CSR matrix of the file; scikit-learn's
baselines get a dense float64 array (faster for libsvm on these sets).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))   # the repository (in-place build)
from _bench_common import Clock, load_avg  # noqa: E402

from lcoding.io import datasets  # noqa: E402

SETS = ("banana", "magic04", "ijcnn1", "w8a", "usps", "letter", "mnist")
LCODING = ("LocallyLinearSVC", "AnchorPlanesSVC", "LLCJointSVC", "KQMetricsClassifier",
           "InvariantSVC", "LinearClassifier")
# one-argument variants of an estimator, reported beside the defaults but not as
# "the defaults" (never the bold best): a documented constructor choice
VARIANTS = {"KQMetricsClassifier(solver='metrics')": ("KQMetricsClassifier",
                                                       {"solver": "metrics"})}
BASELINES = ("SVC", "LinearSVC", "Nystroem+LinearSVC")
MODELS = LCODING + tuple(VARIANTS) + BASELINES
HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "defaults.md"
FITS = 3                # fits timed where one takes under REPEAT_BELOW_S
REPEAT_BELOW_S = 10.0


def load(name):
    y, rows = datasets.load(name, "train")
    ty, trows = datasets.load(name, "test")
    n = max(rows.n_features, trows.n_features)
    X = sp.csr_matrix((rows.data, rows.indices, rows.indptr), shape=(rows.n_rows, n))
    tX = sp.csr_matrix((trows.data, trows.indices, trows.indptr), shape=(trows.n_rows, n))
    return y, X, ty, tX


def make(model):
    if model in LCODING or model in VARIANTS:
        import lcoding.sklearn as lsk
        name, kwargs = VARIANTS.get(model, (model, {}))
        return getattr(lsk, name)(random_state=0, **kwargs), "csr"
    from sklearn.kernel_approximation import Nystroem
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import SVC, LinearSVC
    if model == "SVC":
        return SVC(), "dense"
    if model == "LinearSVC":
        return LinearSVC(random_state=0), "dense"
    if model == "Nystroem+LinearSVC":
        return make_pipeline(Nystroem(random_state=0), LinearSVC(random_state=0)), "dense"
    raise ValueError(f"unknown model {model!r}")


def run_one(name, data, model):
    y, X, ty, tX = data
    est, kind = make(model)
    Xf, tXf = (X, tX) if kind == "csr" else (X.toarray(), tX.toarray())
    before = load_avg()
    rec = {"dataset": name, "model": model, "n_train": int(X.shape[0]),
           "n_test": int(tX.shape[0])}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with Clock() as ct:
                est.fit(Xf, y)
            with Clock() as cp:
                pred = est.predict(tXf)
            walls, cpus = [ct.wall], [ct.cpu]
            while ct.wall < REPEAT_BELOW_S and len(walls) < FITS:
                again, _ = make(model)
                with Clock() as c2:
                    again.fit(Xf, y)
                walls.append(c2.wall)
                cpus.append(c2.cpu)
        rec.update(error=float(np.mean(pred != ty) * 100.0), train_s=float(np.median(walls)),
                   train_cpu=float(np.median(cpus)), train_runs=walls,
                   predict_s=cp.wall,
                   warnings=sorted({f"{w.category.__name__}: {str(w.message)[:120]}"
                                    for w in caught}))
        if hasattr(est, "to_options"):
            rec["options"] = est.to_options()
    except Exception as err:                       # noqa: BLE001 - recorded in the table
        rec.update(error=None, failure=f"{type(err).__name__}: {str(err)[:200]}")
    rec["load"] = [before, load_avg()]
    return rec


def read_cache(path):
    out = {}
    if path and Path(path).exists():
        for line in Path(path).read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                out[(rec["dataset"], rec["model"])] = rec
    return out


def table(records, sets, models):
    lines = [
        "# Defaults benchmark",
        "",
        "Generated by `python benchmarks/bench_defaults.py` (do not edit by hand). Every "
        "model at its constructor defaults (`random_state=0`), trained on the training "
        "split as shipped (no scaling), test error on the test split; train = wall-clock "
        f"seconds of `fit`, the median of {FITS} fits where one takes under "
        f"{REPEAT_BELOW_S:g} s (every model alike) (lcoding: CSR input; scikit-learn: "
        "dense float64). Machine: "
        f"{platform.machine()}, {os.cpu_count()} cores, shared with other jobs; Python "
        f"{platform.python_version()}. How the defaults were chosen: "
        "`benchmarks/results/notes/defaults.md` (cross-validation on training data only).",
        "",
        "| data | n train | model | test error % | train s | vs SVC() error | SVC() train s / train s | load avg | options |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in sets:
        svc = records.get((name, "SVC"))
        lc = [records[(name, m)] for m in LCODING if (name, m) in records
              and records[(name, m)].get("error") is not None]
        best = min(lc, key=lambda r: r["error"])["model"] if lc else None
        for m in models:
            rec = records.get((name, m))
            if rec is None:
                lines.append(f"| {name} | | {m} | not run | | | | | |")
                continue
            if rec.get("error") is None:
                lines.append(f"| {name} | {rec['n_train']} | {m} | failed: "
                             f"{rec.get('failure', '')[:80]} | | | | | |")
                continue
            diff = speed = ""
            if svc and svc.get("error") is not None and m != "SVC":
                diff = f"{rec['error'] - svc['error']:+.2f}"
                speed = f"{svc['train_s'] / max(rec['train_s'], 1e-9):.1f}x"
            label = f"**{m}**" if m == best else m
            opts = f"`{rec['options']}`" if rec.get("options") else ""
            load = "–".join(f"{v:.1f}" for v in rec.get("load", []))
            lines.append(f"| {name} | {rec['n_train']} | {label} | {rec['error']:.2f} | "
                         f"{rec['train_s']:.2f} | {diff} | {speed} | {load} | {opts} |")
    lines += ["", "Bold: the lcoding estimator with the lowest test error on the set at its "
              "defaults (the variant rows, one constructor argument away from them, are "
              "not counted). "
              "`vs SVC() error`: test error minus SVC()'s (points); the speed column is "
              "SVC()'s training time over the model's.", ""]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--cache", default="", help="JSON-lines file of measurements to resume from")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--no-table", action="store_true")
    args = ap.parse_args(argv)
    sets = [s for s in args.sets.split(",") if s]
    models = [m for m in args.models.split(",") if m]
    records = read_cache(args.cache)
    for name in sets:
        todo = [m for m in models if (name, m) not in records]
        if not todo:
            continue
        data = load(name)
        for m in todo:
            t = time.perf_counter()
            rec = run_one(name, data, m)
            records[(name, m)] = rec
            print(f"{name:8s} {m:22s} error {rec.get('error')} train "
                  f"{rec.get('train_s', float('nan')):.2f} s ({time.perf_counter() - t:.1f} s) "
                  f"{rec.get('failure', '')}", flush=True)
            if args.cache:
                with open(args.cache, "a") as fh:
                    fh.write(json.dumps(rec) + "\n")
    if not args.no_table:
        seen = {s for s, _ in records}
        all_sets = [s for s in SETS if s in seen] + sorted(seen - set(SETS))
        Path(args.out).write_text(table(records, all_sets, list(MODELS)))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
