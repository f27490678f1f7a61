"""Automatic selection (``lcoding.select``) beside a tuned RBF SVM and ``SVC()``.

One process per data set (``python benchmarks/bench_auto.py run SET``) appends one
JSON line per model to ``benchmarks/results/auto.jsonl``; ``python
benchmarks/bench_auto.py table`` writes ``benchmarks/results/auto.md`` from it.

Models, every choice made on the training split only (the test split is read once,
for the reported error and the prediction time):

* ``lcoding auto``: :func:`lcoding.select.select` with ``--budget`` seconds
  (successive halving over methods x settings on 3 cross-validation folds of the
  training rows), then the refit on all rows.  ``select`` s = the whole call;
  ``train`` s = the final refit alone (included in ``select`` s).  The budget holds
  the refit too.
* ``lcoding auto, budget RBF / 10`` (``--models auto-rbf10``): the same with the
  budget set to a tenth of the tuned RBF SVM's selection + training time on this
  machine (its latest row in the results file): the error the automatic selection
  reaches in the time the speed target allows.
* ``RBF tuned``: LIBSVM's C-SVC with the RBF kernel (scikit-learn's build of LIBSVM,
  ``SVC(C, gamma)``, 12x faster here than the libsvm-official wheel on the same
  problem; see :func:`libsvm_train`), tuned as the LIBSVM guide does it: every feature scaled by its largest absolute training value
  (sparse rows stay sparse), a grid of 7 C x 6 gamma = 42 points, C = 2^-3, 2^-1, ...,
  2^9 and gamma = g0 * 2^-4, 2^-2, ..., 2^6 around scikit-learn's ``gamma='scale'``
  g0 = 1 / (d Var(x)) of the scaled rows, each point scored on 3 folds of a seeded
  permutation of the training rows (on sets of more than ``--grid-rows`` rows, on a
  seeded subsample of that many: a grid over all of MNIST would take hours on 2 cores,
  and subsampling is what users of grid.py do), then trained on all training rows
  at the best point.  ``select`` s = the grid + the final training.  libsvm gets
  dense float64 rows, its faster form on the shared sets, and the sparse rows above
  ``SPARSE_PEER_FEATURES`` features (reuters' 8315-feature text).
* ``SVC()``: scikit-learn's defaults on the raw rows (dense float64, sparse as above),
  untuned.

Prediction: microseconds per test row of the whole call that predicts the labels
(one thread; lcoding: ``Model.predict_labels`` of the validated rows, the path of
``lcoding-predict`` and the estimators' ``predict``); for every model the fastest of
repeated calls (at least three, and as many as fit in a second, :func:`predict_timed`;
one when a call takes longer).  Rows measured before 2026-11-28 12:00 timed the peers
by one call and lcoding by the fastest of three.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))   # the repository (in-place build)
from _bench_common import load_avg  # noqa: E402

from lcoding.io import datasets  # noqa: E402

SETS = ("banana", "magic04", "ijcnn1", "w8a", "usps", "letter", "mnist")
RESULTS = Path(__file__).resolve().parent / "results"
LOG2_C = (-3, -1, 1, 3, 5, 7, 9)
LOG2_GAMMA_FACTOR = (-4, -2, 0, 2, 4, 6)
N_FOLD = 3
SEED = 0


def read_set(name: str):
    y, rows = datasets.load(name, "train")
    yt, trows = datasets.load(name, "test")
    d = max(rows.n_features, trows.n_features)
    X = sp.csr_matrix((rows.data, rows.indices, rows.indptr), shape=(rows.n_rows, d))
    Xt = sp.csr_matrix((trows.data, trows.indices, trows.indptr), shape=(trows.n_rows, d))
    return np.asarray(y, float), X, np.asarray(yt, float), Xt


def folds(n: int, seed: int = SEED) -> np.ndarray:
    """Fold number of each row: a seeded permutation cut in N_FOLD parts."""
    fold = np.empty(n, dtype=np.int64)
    fold[np.random.default_rng(seed).permutation(n)] = np.arange(n) % N_FOLD
    return fold


# ------------------------------------------------------------------ RBF (libsvm)
def maxabs_scale(X: sp.csr_matrix, Xt: sp.csr_matrix):
    scale = np.asarray(abs(X).max(axis=0).todense()).ravel()
    scale[scale == 0] = 1.0
    inv = sp.diags(1.0 / scale)
    # sorted column indices: libsvm's sparse dot product assumes them (unsorted ones
    # give wrong kernel values, and slow training)
    return (X @ inv).tocsr().sorted_indices(), (Xt @ inv).tocsr().sorted_indices()


def gamma_scale(X: sp.csr_matrix) -> float:
    n, d = X.shape
    mean = np.asarray(X.mean(axis=0)).ravel()
    sq = np.asarray(X.multiply(X).mean(axis=0)).ravel()
    var = float((sq - mean ** 2).sum() / d)
    return 1.0 / (d * var) if var > 0 else 1.0


# more features than this: libsvm gets the sparse rows (text: reuters' 8315 features,
# where a dense kernel evaluation costs 8315 multiply-adds for ~100 non-zeros); the
# shared sets (at most 784 features) get dense rows, the faster form for them
SPARSE_PEER_FEATURES = 1000


def _peer_rows(X):
    return X if X.shape[1] > SPARSE_PEER_FEATURES else X.toarray()


def libsvm_train(y, X, C: float, gamma: float):
    """LIBSVM's C-SVC with the RBF kernel, through scikit-learn's build of it (dense
    rows; sparse ones above SPARSE_PEER_FEATURES features).  The libsvm-official wheel
    solves the same problem with the same support vectors 12x slower here (magic04,
    8500 rows, C 0.125: 45-54 s against 3.8 s), so timing it would flatter lcoding;
    the faster build is the fair peer."""
    from sklearn.svm import SVC
    return SVC(C=C, gamma=gamma, cache_size=1000).fit(_peer_rows(X), y)


def libsvm_labels(model, X) -> np.ndarray:
    return model.predict(_peer_rows(X))


def run_rbf(y, X, yt, Xt, grid_rows: int) -> dict:
    t0 = time.perf_counter()
    X, Xt = maxabs_scale(X, Xt)
    rows = np.arange(X.shape[0])
    if rows.size > grid_rows:
        rows = np.sort(np.random.default_rng(SEED).choice(rows.size, grid_rows, replace=False))
    Xg, yg = X[rows], y[rows]
    fold = folds(rows.size)
    g0 = gamma_scale(X)
    grid = []
    for lc in LOG2_C:
        for lg in LOG2_GAMMA_FACTOR:
            C, gamma = 2.0 ** lc, g0 * 2.0 ** lg
            wrong = 0
            for f in range(N_FOLD):
                tr, va = fold != f, fold == f
                m = libsvm_train(yg[tr], Xg[tr], C, gamma)
                wrong += int((libsvm_labels(m, Xg[va]) != yg[va]).sum())
            grid.append((100.0 * wrong / rows.size, lc, lg, C, gamma))
            print(f"  RBF C 2^{lc} gamma g0*2^{lg}: CV error {grid[-1][0]:.2f} %", flush=True)
    err, lc, lg, C, gamma = min(grid)
    t1 = time.perf_counter()
    model = libsvm_train(y, X, C, gamma)
    t2 = time.perf_counter()
    labels, predict_s = predict_timed(lambda: libsvm_labels(model, Xt))
    return {"model": "RBF tuned", "select_s": t2 - t0, "train_s": t2 - t1,
            "test_error": 100.0 * float((labels != yt).mean()),
            "predict_us": 1e6 * predict_s / Xt.shape[0], "cv_error": err,
            "setting": f"C 2^{lc}, gamma {gamma:.4g} (g0 * 2^{lg}); grid on {rows.size} rows",
            "n_sv": int(model.support_.size)}


# ------------------------------------------------------------------ SVC()
def run_svc(y, X, yt, Xt) -> dict:
    from sklearn.svm import SVC
    Xd, Xtd = _peer_rows(X), _peer_rows(Xt)
    t0 = time.perf_counter()
    model = SVC().fit(Xd, y)
    t1 = time.perf_counter()
    labels, predict_s = predict_timed(lambda: model.predict(Xtd))
    return {"model": "SVC()", "select_s": t1 - t0, "train_s": t1 - t0,
            "test_error": 100.0 * float((labels != yt).mean()),
            "predict_us": 1e6 * predict_s / Xt.shape[0], "setting": "defaults",
            "n_sv": int(model.support_.size)}


# ------------------------------------------------------------------ lcoding
RBF10 = "lcoding auto, budget RBF / 10"
PREDICT_REPEAT_S = 1.0    # predict calls are repeated while they take less than this
PREDICT_MIN_CALLS = 3     # ... at least this many calls (unless one takes longer)
PREDICT_MAX_CALLS = 50


def predict_timed(call):
    """``(result, seconds)`` of ``call()``: the fastest of repeated calls, at least
    PREDICT_MIN_CALLS and as many as fit in PREDICT_REPEAT_S in all (at most
    PREDICT_MAX_CALLS; one call when the first takes longer).  Every model's
    prediction is timed this way, lcoding's and the peers' alike: a 15 000-row predict
    of 25 ms is noisy on a shared machine (w8a's LL-SVM measured 1.6 and 3.1 us a row
    in two runs), banana's 1767 rows of 0.2-0.3 us even more."""
    best, spent, calls = None, 0.0, 0
    while True:
        t = time.perf_counter()
        result = call()
        seconds = time.perf_counter() - t
        best = seconds if best is None else min(best, seconds)
        spent, calls = spent + seconds, calls + 1
        if seconds >= PREDICT_REPEAT_S or calls >= PREDICT_MAX_CALLS or \
                (calls >= PREDICT_MIN_CALLS and spent >= PREDICT_REPEAT_S):
            return result, best


def rbf_seconds(name: str, out: Path) -> float:
    """The tuned RBF SVM's selection + training seconds for ``name``: its latest row
    in ``out`` (run ``--models rbf`` first)."""
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()] \
        if out.exists() else []
    found = [r["select_s"] for r in rows if r["set"] == name and r["model"] == "RBF tuned"]
    if not found:
        raise SystemExit(f"{name}: no 'RBF tuned' row in {out}; run --models rbf first")
    return float(found[-1])


def run_auto(y, X, yt, Xt, budget: float, n_threads: int) -> dict:
    from lcoding.core.rows import as_rows
    from lcoding.select import select
    t0 = time.perf_counter()
    sel = select(y, X, budget_s=budget, seed=SEED, nr_fold=N_FOLD, n_threads=n_threads)
    select_s = time.perf_counter() - t0

    def labels():
        # the labels, as the RBF SVM's predict gives them (lcoding-predict and the
        # estimators' predict take this path; liblinearutil.predict also returns every
        # decision value, which a vote of k q-flats needs all its restarts for)
        return sel.model.predict_labels(as_rows(Xt, "x").truncated(sel.model.nr_feature))
    predicted, predict_s = predict_timed(labels)
    return {"model": "lcoding auto", "select_s": select_s, "train_s": sel.refit_seconds,
            "test_error": 100.0 * float((predicted != yt).mean()),
            "predict_us": 1e6 * predict_s / Xt.shape[0],
            "cv_error": sel.cv_error, "setting": sel.best_options, "note": sel.note,
            "budget_s": budget, "trials": sel.table()}


def run(name: str, models, budget: float, grid_rows: int, n_threads: int, out: Path):
    y, X, yt, Xt = read_set(name)
    for model in models:
        load0 = load_avg()
        print(f"{name}: {model}", flush=True)
        if model == "auto":
            row = run_auto(y, X, yt, Xt, budget, n_threads)
        elif model == "auto-rbf10":
            row = run_auto(y, X, yt, Xt, rbf_seconds(name, out) / 10, n_threads)
            row["model"] = RBF10
        elif model == "rbf":
            row = run_rbf(y, X, yt, Xt, grid_rows)
        elif model == "svc":
            row = run_svc(y, X, yt, Xt)
        else:
            raise SystemExit(f"unknown model {model!r} (auto, auto-rbf10, rbf, svc)")
        row.update({"set": name, "n_train": int(X.shape[0]), "load": [load0, load_avg()],
                    "when": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count()})
        print({k: v for k, v in row.items() if k != "trials"}, flush=True)
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")


# ------------------------------------------------------------------ paired prediction
PAIRED_ROUNDS = 15


def paired(name: str, src: Path, dst: Path, rounds: int = PAIRED_ROUNDS) -> None:
    """Prediction side by side: the tuned RBF SVM (its recorded C and gamma, trained
    again on all training rows) and lcoding's RBF / 10 winner (its recorded options,
    trained again with the bench's seed), the labels of the test rows timed in turns,
    each the fastest of three calls, ``rounds`` times; the ratio of each round's pair.
    The bench's own rows time the two models in runs hours apart, and this machine's
    speed drifts by 10-30 % between them; a ratio from one process, its rounds
    interleaved, does not drift.  Appends a row to ``dst`` (markdown)."""
    import re
    from lcoding.core.options import parse_train_options
    from lcoding.core.rows import as_rows
    from lcoding.training import train_model
    rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    rbf = [r for r in rows if r["set"] == name and r["model"] == "RBF tuned"][-1]
    ours = [r for r in rows if r["set"] == name and r["model"] == RBF10][-1]
    y, X, yt, Xt = read_set(name)
    Xs, Xts = maxabs_scale(X, Xt)
    lg = int(re.search(r"g0 \* 2\^(-?\d+)", rbf["setting"]).group(1))
    lc = int(re.search(r"C 2\^(-?\d+)", rbf["setting"]).group(1))
    svm = libsvm_train(y, Xs, 2.0 ** lc, gamma_scale(Xs) * 2.0 ** lg)
    model = train_model(y, as_rows(X, "x"),
                        parse_train_options(ours["setting"] + f" -S {SEED} -q"))

    def ours_labels():
        return model.predict_labels(as_rows(Xt, "x").truncated(model.nr_feature))

    def best_of_three(call):
        best = math.inf
        for _ in range(3):
            t = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - t)
        return 1e6 * best / Xt.shape[0]
    load0 = load_avg()
    err_rbf = 100.0 * float((libsvm_labels(svm, Xts) != yt).mean())
    err_ours = 100.0 * float((ours_labels() != yt).mean())
    pairs = []
    for _ in range(rounds):
        pairs.append((best_of_three(lambda: libsvm_labels(svm, Xts)),
                      best_of_three(ours_labels)))
        print(f"  RBF {pairs[-1][0]:.1f} us, lcoding {pairs[-1][1]:.2f} us: "
              f"{pairs[-1][0] / pairs[-1][1]:.0f}x", flush=True)
    ratios = sorted(a / b for a, b in pairs)
    line = (f"| {name} | {time.strftime('%Y-%m-%d %H:%M')} | `{ours['setting']}` | "
            f"{err_ours:.2f} ({err_rbf:.2f}) | {np.median([b for _, b in pairs]):.2f} "
            f"({np.median([a for a, _ in pairs]):.1f}) | {_ratio(float(np.median(ratios)))} | "
            f"{_ratio(ratios[0])} - {_ratio(ratios[-1])} | {rounds} | "
            f"{load0}/{load_avg()} |")
    if not dst.exists():
        dst.write_text(
            "# Prediction side by side with the tuned RBF SVM\n\n"
            "Generated by `python benchmarks/bench_auto.py paired SET` (see its docstring): "
            "the tuned RBF SVM and lcoding's winner at a tenth of its time, trained again "
            "from their rows in `auto.jsonl`, their labels of the test rows timed in turns "
            "in one process (each the fastest of three calls).  Test errors: the same "
            "models' (RBF in brackets).\n\n"
            "| set | when | lcoding | test error % | predict us/row, median (RBF) | "
            "RBF / lcoding, median of rounds | range | rounds | load |\n"
            "| --- | --- | --- | --- | --- | ---: | --- | ---: | --- |\n")
    with dst.open("a") as f:
        f.write(line + "\n")
    print(line)


# ------------------------------------------------------------------ table
def _ratio(x: float) -> str:
    # one decimal from 10 to 100, so that a ratio just under a 10x or 100x target
    # (99.6) does not print as the target ("1e+02x" with two significant digits)
    if x >= 100:
        return f"{x:.0f}x"
    return f"{x:.1f}x" if x >= 10 else f"{x:.2g}x"


def table(src: Path, dst: Path) -> None:
    rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    latest = {}
    for r in rows:                          # the last run of each (set, model) counts
        latest[(r["set"], r["model"])] = r
    out = ["# Automatic selection beside a tuned RBF SVM and SVC()", "",
           f"Generated by `python benchmarks/bench_auto.py table` from `{src.name}` "
           f"({platform.machine()}, {os.cpu_count()} CPUs, a machine shared with other jobs: "
           "the load average before/after each run is in the last column).  How each model "
           "is selected and timed: the docstring of `benchmarks/bench_auto.py`.  Every "
           "choice is made on the training split; the test split is used for the reported "
           "error and the prediction time only.", "",
           "| set | n train | model | test error % | select + train s | final train s | "
           "predict us/row | vs RBF error | RBF time / time | RBF predict / predict | "
           "chosen | load |",
           "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    names = list(SETS) + sorted({k[0] for k in latest} - set(SETS))   # then any other set
    for name in names:
        rbf = latest.get((name, "RBF tuned"))
        for model in ("lcoding auto", RBF10, "RBF tuned", "SVC()"):
            r = latest.get((name, model))
            if r is None:
                continue
            vs = speed = pspeed = ""
            if rbf is not None and model != "RBF tuned":
                vs = f"{r['test_error'] - rbf['test_error']:+.2f}"
                speed = _ratio(rbf["select_s"] / r["select_s"])
                pspeed = _ratio(rbf["predict_us"] / r["predict_us"])
            train = "" if r.get("train_s") is None else f"{r['train_s']:.2f}"
            out.append(f"| {name} | {r['n_train']} | {model} | {r['test_error']:.2f} | "
                       f"{r['select_s']:.1f} | {train} | {r['predict_us']:.1f} | {vs} | "
                       f"{speed} | {pspeed} | `{r.get('setting', '')}` | "
                       f"{r['load'][0]}/{r['load'][1]} |")
    dst.write_text("\n".join(out) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="one data set, one process")
    r.add_argument("set", help=f"a data set of $LCODING_DATA: <set>.train.bz2 and "
                               f"<set>.test.bz2 (the shared ones: {', '.join(SETS)})")
    r.add_argument("--models", default="auto,rbf,svc")
    r.add_argument("--budget", type=float, default=60.0, help="lcoding's budget_s")
    r.add_argument("--grid-rows", type=int, default=10000)
    r.add_argument("--threads", type=int, default=1, help="lcoding's n_threads")
    r.add_argument("--out", type=Path, default=RESULTS / "auto.jsonl")
    pr = sub.add_parser("paired", help="prediction side by side with the tuned RBF SVM")
    pr.add_argument("set")
    pr.add_argument("--rounds", type=int, default=PAIRED_ROUNDS)
    pr.add_argument("--src", type=Path, default=RESULTS / "auto.jsonl")
    pr.add_argument("--dst", type=Path, default=RESULTS / "auto_paired.md")
    t = sub.add_parser("table", help="write the markdown table")
    t.add_argument("--src", type=Path, default=RESULTS / "auto.jsonl")
    t.add_argument("--dst", type=Path, default=RESULTS / "auto.md")
    a = ap.parse_args(argv)
    if a.cmd == "run":
        run(a.set, a.models.split(","), a.budget, a.grid_rows, a.threads, a.out)
    elif a.cmd == "paired":
        paired(a.set, a.src, a.dst, a.rounds)
    else:
        table(a.src, a.dst)


if __name__ == "__main__":
    main()
