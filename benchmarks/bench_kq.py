"""k q-metrics benchmark (issue 7): discriminative k q-metrics (-s 40) and the
supervised k q-flats baseline (-s 41) side by side with lcoding's LL-SVM,
liblinear-official (linear) and libsvm-official (RBF), on MNIST, USPS and LETTER.

Protocol (algorithms.md §D.4, the paper's Table 1)
--------------------------------------------------
* MNIST: PCA-50 + unit sphere, the paper's chosen k = 8, q = 20, mu = (1.05, 0.95),
  dt = 0.1, 40 passes, no new model selection (the paper's grid costs 80 x 40
  passes).  One model with ``-W 5`` trains five restarts (seeds 1..5 of the
  restart path); the test error is measured after every pass.  "single" = mean
  over the 5 restarts and over passes 20-40 (the paper: 25 runs, passes 20-40);
  "(m)" = majority vote of the 5 restarts, averaged over passes 20-40; the final
  models (pass 40) are reported too.
* MNIST with the constant coordinate ``-z 0.5`` (lcoding's addition; b chosen on the
  validation split, docs/kq_metrics.md): parts ``kq_z1`` / ``kq_z2`` / ``kq_z3``, one
  ``-W 5`` model each with ``-S 1`` / ``-S 2`` / ``-S 3``, reported like the
  paper-setting rows.
* Ablation (MNIST, restart 1): update rule -G 0/1/2 x pass type -F 0/1/2, error
  averaged over passes 20-40 and seconds per pass.  It sets the defaults.
* k q-flats baseline: (PCA, k, q, through-origin -y 0 / affine -y 1) chosen on the
  last 20 % of the training set by ``select_kq_params`` (the paper: "best manual k,
  q"; its flats are affine, eq. 1 and 4), then retrained on everything.
* USPS, LETTER (no ISOLET / 20 Newsgroups in the shared data): the paper's model
  selection on the last 20 % of the training set over a reduced (k, q, mu) grid
  (q <= the 16 features on LETTER), 40 passes, 5-restart vote.
* Baselines: liblinear-official ``-s 1 -B 1`` (C on the validation split),
  libsvm-official RBF (fixed C, gamma per data set; MNIST full 60k), lcoding
  LL-SVM ``-s 1 -L 2`` (Gaussian kNN coding, -u/-c on the validation split).
* Timings are wall clock on the shared 2-core machine with BLAS limited to one
  thread (``-m 1``); the load average is recorded with the results.

Usage::

    python benchmarks/bench_kq.py                    # everything -> results/kq.md
    python benchmarks/bench_kq.py --parts ablation --datasets mnist
    python benchmarks/bench_kq.py --parts kq_z1,kq_z2 --datasets mnist --json other.json
    python benchmarks/bench_kq.py --parts none --merge other.json --note "how"   # merge
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from lcoding.io import datasets
from lcoding.local.coding import kernel_map_of
from lcoding.core.threads import blas_threads
from lcoding.methods.kq import (KQPreprocess, class_scores, select_kq_params,
                                train_kq_model)
from lcoding.core.options import parse_train_options
from lcoding.core.messages import Messages
from lcoding.core.classes import group_classes
from lcoding.training import train_model

HERE = Path(__file__).resolve().parent
PAPER = {"single": 1.36, "vote": 1.15, "flats": 1.6, "svm": 1.4, "pass_s": 300.0 / 40}
MNIST_OPTS = "-s 40 -l 50 -k 8 -Q 20 -U 1.05 -V 0.95 -D 0.1 -E 40"
# the constant coordinate -z b (lcoding's addition, not the paper's setting): b chosen
# on the MNIST validation split (first 48 000 / last 12 000 training rows; docs page)
Z_MNIST = 0.5
SELECT_GRID = {
    "usps": {"k": (1, 4), "q": (20, 40), "mu": ((1.05, 0.95), (1.2, 0.8), (1.4, 0.6))},
    "letter": {"k": (4, 8, 16), "q": (4, 8), "mu": ((1.05, 0.95), (1.2, 0.8), (1.4, 0.6))},
}
# k q-flats: through the origin (-y 0, the issue's definition) and affine (-y 1, the
# paper's eq. 1 and 4), (k, q, -y) chosen on the validation split
FLATS_GRID = {"mnist": {"k": (32, 64), "q": (10, 15, 20), "affine": (0, 1)},
              "usps": {"k": (1, 4, 16, 32), "q": (10, 20), "affine": (0, 1)},
              "letter": {"k": (4, 16, 32, 64), "q": (2, 4, 8), "affine": (0, 1)}}
FLATS_PCA = {"mnist": (50, 100), "usps": (0,), "letter": (0, 16)}
# PCA settings tried on validation: LETTER's raw features (integers 0-15) all lie in
# one orthant, so centring (PCA to all 16 dimensions) is tried beside none
PCA = {"mnist": (50,), "usps": (0,), "letter": (0, 16)}
LINEAR_C = (0.1, 1, 10)
# libsvm RBF (C, gamma): fixed on MNIST and USPS (pixels in [0, 1]); on LETTER (raw
# integers 0-15) chosen on the validation split from this grid
RBF = {"mnist": (10, 0.02), "usps": (10, 0.02),
       "letter": {"C": (10, 100), "gamma": (0.005, 0.02)}}
LLSVM = {"mnist": ("-s 1 -L 2 -B 1 -A 100 -k 8", (0.1,), (1,)),
         "usps": ("-s 1 -L 2 -B 1 -A 200 -k 8", (0.1, 0.3), (1, 10)),
         "letter": ("-s 1 -L 2 -B 1 -A 400 -k 8", (0.05, 0.2), (1, 10))}


def load(name):
    y, X = datasets.load(name, "train")
    ty, tX = datasets.load(name, "test")
    return y, X, ty, tX.truncated(X.n_features)


def err(pred, y):
    return 100.0 * float(np.mean(np.asarray(pred) != y))


def last20(n):
    n_tr = int(round(0.8 * n))
    return np.arange(n_tr), np.arange(n_tr, n)


def per_pass_run(y, X, ty, tX, opts, log, passes_from=20):
    """Train ``opts`` (may hold -W r) recording every restart's test predictions
    after each pass; returns (model, predictions[r][pass], seconds per pass, train s)."""
    params = parse_train_options(opts + " -q")
    labels, _ = group_classes(y)
    with blas_threads(1):
        TX = KQPreprocess.fit(X, params.kq_pca, bool(params.kq_sphere), params.kq_offset,
                              kernel_map_of(params)).transform(tX)
    preds, secs = {}, []

    def on_pass(r, p, W, seconds):
        secs.append(seconds)
        if p >= passes_from:
            s = class_scores(TX, W, labels.size, params.n_neighbors, params.kq_dim)
            preds.setdefault(r, {})[p] = labels[np.argmax(s, axis=1)]
    t = time.perf_counter()
    model = train_kq_model(y, X, params, Messages(True), on_pass=on_pass)
    train_s = time.perf_counter() - t
    return model, preds, secs, train_s


def vote(pred_list, labels):
    """Majority of several label vectors (ties: the smallest tied label)."""
    P = np.stack(pred_list)
    counts = np.stack([(P == lab).sum(axis=0) for lab in labels], axis=1)
    return labels[np.argmax(counts, axis=1)]


def summarise_passes(preds, ty, labels):
    restarts = sorted(preds)
    passes = sorted(preds[restarts[0]])
    single = [[err(preds[r][p], ty) for p in passes] for r in restarts]
    voted = [err(vote([preds[r][p] for r in restarts], np.sort(labels)), ty) for p in passes]
    return dict(single_mean=float(np.mean(single)), single_std_runs=float(np.std(np.mean(single, 1))),
                single_pass40=[row[-1] for row in single], vote_mean=float(np.mean(voted)),
                vote_pass40=voted[-1], passes=passes, single_curve=np.mean(single, 0).tolist(),
                vote_curve=voted)


def predict_err(model, tX, ty):
    t = time.perf_counter()
    pred = model.labels_from_values(model.decision_values(tX))
    return err(pred, ty), 1e6 * (time.perf_counter() - t) / tX.n_rows


# ---------------------------------------------------------------- parts
def part_ablation(name, data, log):
    y, X, ty, tX = data
    out = []
    for G, F in itertools.product((0, 1, 2), (0, 1, 2)):
        opts = f"{MNIST_OPTS if name == 'mnist' else ''} -G {G} -F {F}"
        try:
            model, preds, secs, tt = per_pass_run(y, X, ty, tX, opts, log)
        except FloatingPointError as exc:
            log(f"  ablation -G {G} -F {F}: {exc}")
            out.append(dict(G=G, F=F, err_20_40=float("nan"), err_40=float("nan"),
                            pass_s=float("nan"), train_s=float("nan")))
            continue
        errs = [err(preds[0][p], ty) for p in sorted(preds[0])]
        row = dict(G=G, F=F, err_20_40=float(np.mean(errs)), err_40=errs[-1],
                   pass_s=float(np.mean(secs)), train_s=tt)
        log(f"  ablation -G {G} -F {F}: {row}")
        out.append(row)
    return out


def part_kq(name, data, log):
    y, X, ty, tX = data
    if name == "mnist":
        opts, table = MNIST_OPTS, None
    else:
        t = time.perf_counter()
        table, best = [], None
        for pca in PCA[name]:
            base = parse_train_options(f"-s 40 -E 40 -l {pca} -q")
            with blas_threads(1):
                cand, rows = select_kq_params(y, X, base, SELECT_GRID[name],
                                              info=lambda s: log("    " + s.rstrip()))
            table += [dict(row, pca=pca) for row in rows]
            e = min(row["error"] for row in rows)
            best = (e, cand) if best is None or e < best[0] else best
        best = best[1]
        log(f"  model selection {time.perf_counter() - t:.0f} s")
        opts = (f"-s 40 -E 40 -l {best.kq_pca} -k {best.n_neighbors} -Q {best.kq_dim} "
                f"-U {best.kq_mu1:g} -V {best.kq_mu2:g}")
    model, preds, secs, tt = per_pass_run(y, X, ty, tX, opts + " -W 5", log)
    res = summarise_passes(preds, ty, model.label)
    res.update(opts=opts, train_s_5=tt, pass_s=float(np.mean(secs)), selection=table)
    res["final_vote_err"], res["predict_us_vote"] = predict_err(model, tX, ty)
    log(f"  k q-metrics {name}: single {res['single_mean']:.2f}% vote {res['vote_mean']:.2f}% "
        f"final vote {res['final_vote_err']:.2f}% ({res['pass_s']:.2f} s/pass)")
    return res


def part_kq_seed2(name, data, log):
    """The MNIST setting again with seed 2 (five more restarts, ten runs in all)."""
    y, X, ty, tX = data
    model, preds, secs, tt = per_pass_run(y, X, ty, tX, MNIST_OPTS + " -W 5 -S 2", log)
    res = summarise_passes(preds, ty, model.label)
    res.update(opts=MNIST_OPTS + " -S 2", train_s_5=tt, pass_s=float(np.mean(secs)))
    res["final_vote_err"], res["predict_us_vote"] = predict_err(model, tX, ty)
    log(f"  k q-metrics {name} -S 2: single {res['single_mean']:.2f}% vote {res['vote_mean']:.2f}%")
    return res


def part_flats(name, data, log):
    """(k, q, -y) by select_kq_params (first 80 % / last 20 %) for every PCA setting."""
    y, X, ty, tX = data
    best, table = None, []
    for pca in FLATS_PCA[name]:
        with blas_threads(1):
            cand, rows = select_kq_params(y, X, parse_train_options(f"-s 41 -l {pca} -q"),
                                          FLATS_GRID[name],
                                          info=lambda s: log(f"    flats val pca={pca} " + s.rstrip()))
        table += [dict(row, pca=pca) for row in rows]
        e = min(row["error"] for row in rows)
        opts = f"-s 41 -l {pca} -k {cand.n_neighbors} -Q {cand.kq_dim} -y {cand.kq_affine}"
        best = (e, opts) if best is None or e < best[0] else best
    t, c = time.perf_counter(), time.process_time()
    m = train_model(y, X, parse_train_options(best[1] + " -q"))
    tt, tc = time.perf_counter() - t, time.process_time() - c
    e, pus = predict_err(m, tX, ty)
    log(f"  k q-flats {name}: {e:.2f}% ({best[1]}; train {tt:.1f} s wall, {tc:.1f} s cpu)")
    return dict(err=e, opts=best[1], train_s=tt, train_cpu_s=tc, predict_us=pus, table=table)


def part_liblinear(name, data, log):
    from liblinear.liblinearutil import predict, train
    y, X, ty, tX = data
    tr, val = last20(X.n_rows)
    Xc, tXc = X.to_csr(), tX.to_csr()
    best = None
    for c in LINEAR_C:
        m = train(y[tr], Xc[tr], f"-s 1 -B 1 -c {c} -q")
        e = err(predict(y[val], Xc[val], m, "-q")[0], y[val])
        best = (e, c) if best is None or e < best[0] else best
    t = time.perf_counter()
    m = train(y, Xc, f"-s 1 -B 1 -c {best[1]} -q")
    tt = time.perf_counter() - t
    t = time.perf_counter()
    e = err(predict(ty, tXc, m, "-q")[0], ty)
    pus = 1e6 * (time.perf_counter() - t) / tX.n_rows
    log(f"  liblinear {name}: {e:.2f}% (-c {best[1]})")
    return dict(err=e, opts=f"-s 1 -B 1 -c {best[1]}", train_s=tt, predict_us=pus)


def part_libsvm(name, data, log):
    from libsvm.svmutil import svm_predict, svm_train
    y, X, ty, tX = data
    Xc, tXc = X.to_csr(), tX.to_csr()
    if isinstance(RBF[name], dict):
        tr, val = last20(X.n_rows)
        best = None
        for c, g in itertools.product(RBF[name]["C"], RBF[name]["gamma"]):
            m = svm_train(y[tr], Xc[tr], f"-t 2 -c {c} -g {g} -m 2000 -q")
            e = err(svm_predict(y[val], Xc[val], m, "-q")[0], y[val])
            log(f"    libsvm val -c {c} -g {g}: {e:.2f}%")
            best = (e, c, g) if best is None or e < best[0] else best
        c, g = best[1], best[2]
    else:
        c, g = RBF[name]
    t = time.perf_counter()
    m = svm_train(y, Xc, f"-t 2 -c {c} -g {g} -m 2000 -q")
    tt = time.perf_counter() - t
    t = time.perf_counter()
    e = err(svm_predict(ty, tXc, m, "-q")[0], ty)
    pus = 1e6 * (time.perf_counter() - t) / tX.n_rows
    log(f"  libsvm {name}: {e:.2f}% ({tt:.0f} s)")
    return dict(err=e, opts=f"-t 2 -c {c} -g {g}", train_s=tt, predict_us=pus, n_sv=int(m.l))


def part_llsvm(name, data, log):
    y, X, ty, tX = data
    base, us, cs = LLSVM[name]
    best = (None, f"{base} -u {us[0]} -c {cs[0]}")
    if len(us) * len(cs) > 1:
        tr, val = last20(X.n_rows)
        Xtr, Xval = X.take(tr), X.take(val)
        for u, c in itertools.product(us, cs):
            opts = f"{base} -u {u} -c {c}"
            m = train_model(y[tr], Xtr, parse_train_options(opts + " -q"))
            e = predict_err(m, Xval, y[val])[0]
            best = (e, opts) if best[0] is None or e < best[0] else best
    t = time.perf_counter()
    m = train_model(y, X, parse_train_options(best[1] + " -q"))
    tt = time.perf_counter() - t
    e, pus = predict_err(m, tX, ty)
    log(f"  LL-SVM {name}: {e:.2f}% ({best[1]})")
    return dict(err=e, opts=best[1], train_s=tt, predict_us=pus)


def part_kq_offset(seed, extra=""):
    """The MNIST setting plus the constant coordinate -z Z_MNIST (and ``extra``
    options, e.g. the Hellinger map -K 3), one -W 5 model."""
    def part(name, data, log):
        y, X, ty, tX = data
        opts = f"{MNIST_OPTS}{extra} -z {Z_MNIST:g} -S {seed}"
        model, preds, secs, tt = per_pass_run(y, X, ty, tX, opts + " -W 5", log)
        res = summarise_passes(preds, ty, model.label)
        res.update(opts=opts, train_s_5=tt, pass_s=float(np.mean(secs)))
        res["final_vote_err"], res["predict_us_vote"] = predict_err(model, tX, ty)
        log(f"  k q-metrics {name} {opts}: single {res['single_mean']:.2f}% "
            f"vote {res['vote_mean']:.2f}% final vote {res['final_vote_err']:.2f}%")
        return res
    return part


PARTS = {"ablation": part_ablation, "kq": part_kq, "kq_seed2": part_kq_seed2,
         "kq_z1": part_kq_offset(1), "kq_z2": part_kq_offset(2), "kq_z3": part_kq_offset(3),
         "kq_h1": part_kq_offset(1, " -K 3"), "kq_h2": part_kq_offset(2, " -K 3"),
         "kq_h3": part_kq_offset(3, " -K 3"),
         "flats": part_flats,
         "liblinear": part_liblinear, "libsvm": part_libsvm, "llsvm": part_llsvm}


# ---------------------------------------------------------------- report
def _selection_row(row):
    """A model-selection row as a dict (older result files hold tuples
    ([pca,] k, q, mu1, mu2, error))."""
    if isinstance(row, dict):
        return row
    k, q, mu1, mu2, error = row[-5:]
    return dict(pca=row[0] if len(row) > 5 else 0, k=k, q=q, mu1=mu1, mu2=mu2, error=error)


def _flats_cell(row, show_pca):
    if isinstance(row, dict):
        return (f"pca={row['pca']} " if show_pca else "") + \
            f"k={row['k']} q={row['q']} -y {row['affine']}: {row['error']:.2f}"
    return (f"pca={row[0]} " if len(row) == 4 else "") + f"k={row[-3]} q={row[-2]}: {row[-1]:.2f}"


def _offset_rows(lines, zs, label):
    """Rows of the -W 5 models of one variant (one per seed) and their mean."""
    for zr in zs:
        lines.append(f"| {label}: single (5 restarts x passes 20-40) / (m) passes 20-40 / "
                     f"(m) pass 40 | {zr['single_mean']:.2f} / {zr['vote_mean']:.2f} / "
                     f"{zr['final_vote_err']:.2f} | {zr['train_s_5']:.1f} | "
                     f"{zr['predict_us_vote']:.1f} | `{zr['opts']} -W 5` |")
        lines.append(f"| {label}, single, pass 40 of each restart | "
                     f"{', '.join(f'{e:.2f}' for e in zr['single_pass40'])} | | | |")
    if len(zs) > 1:
        lines.append(f"| {label}, all {5 * len(zs)} runs: single / (m) (mean of the {len(zs)} "
                     f"votes) passes 20-40 | {np.mean([z['single_mean'] for z in zs]):.3f} / "
                     f"{np.mean([z['vote_mean'] for z in zs]):.3f} | | | |")


def write_markdown(results, path):
    env = results["_env"]
    lines = ["# k q-metrics benchmark (issue 7)", "",
             "Generated by `benchmarks/bench_kq.py`; Szlam & Sapiro, ICML 2009 (algorithms.md §D).",
             f"Machine: {env['machine']}; load average at start {env['load_start']}, at end "
             f"{env.get('load_end', '?')} (2 cores shared with other jobs: timings are upper bounds). "
             "BLAS limited to one thread.  Prediction times of liblinear-official and "
             "libsvm-official include their Python wrappers' conversion of the test rows."]
    lines += [""] + [f"* {note}" for note in env.get("notes", [])] + [""]
    for name in [n for n in ("mnist", "usps", "letter") if n in results]:
        r = results[name]
        lines += [f"## {name.upper()}", "",
                  "| method | test error % | train s | predict µs/sample | setting |",
                  "| --- | --- | --- | --- | --- |"]
        kq = r.get("kq")
        if kq:
            lines.append(f"| k q-metrics, single (mean of 5 restarts x passes 20-40) | "
                         f"{kq['single_mean']:.2f} (std over restarts {kq['single_std_runs']:.2f}) | "
                         f"{kq['train_s_5'] / 5:.1f} | | `{kq['opts']}` |")
            lines.append(f"| k q-metrics, single, pass 40 of each restart | "
                         f"{', '.join(f'{e:.2f}' for e in kq['single_pass40'])} | | | |")
            lines.append(f"| k q-metrics (m), vote of 5 (mean over passes 20-40) | "
                         f"{kq['vote_mean']:.2f} | {kq['train_s_5']:.1f} | | `-W 5` |")
            lines.append(f"| k q-metrics (m), the `-W 5` model (pass 40) | {kq['final_vote_err']:.2f} | "
                         f"{kq['train_s_5']:.1f} | {kq['predict_us_vote']:.1f} | |")
        kq2 = r.get("kq_seed2")
        if kq and kq2:
            lines.append(f"| k q-metrics, second `-W 5` model (`-S 2`): single / (m) passes 20-40 / "
                         f"(m) pass 40 | {kq2['single_mean']:.2f} / {kq2['vote_mean']:.2f} / "
                         f"{kq2['final_vote_err']:.2f} | {kq2['train_s_5']:.1f} | | |")
            lines.append(f"| k q-metrics, all 10 runs: single / (m) (mean of the two votes), "
                         f"passes 20-40 | {(kq['single_mean'] + kq2['single_mean']) / 2:.3f} / "
                         f"{(kq['vote_mean'] + kq2['vote_mean']) / 2:.3f} | | | |")
        _offset_rows(lines, [r[key] for key in ("kq_z1", "kq_z2", "kq_z3") if r.get(key)],
                     "k q-metrics + constant coordinate")
        _offset_rows(lines, [r[key] for key in ("kq_h1", "kq_h2", "kq_h3") if r.get(key)],
                     "k q-metrics + Hellinger map (`-K 3`) + constant coordinate")
        if r.get("flats"):
            f = r["flats"]
            cpu = f" (cpu {f['train_cpu_s']:.1f})" if "train_cpu_s" in f else ""
            lines.append(f"| supervised k q-flats (PCA, k, q, -y on validation) | {f['err']:.2f} | "
                         f"{f['train_s']:.1f}{cpu} | {f['predict_us']:.1f} | `{f['opts']}` |")
        for key, label in (("llsvm", "lcoding LL-SVM"), ("liblinear", "liblinear-official linear"),
                           ("libsvm", "libsvm-official RBF")):
            if r.get(key):
                b = r[key]
                lines.append(f"| {label} | {b['err']:.2f} | {b['train_s']:.1f} | "
                             f"{b['predict_us']:.1f} | `{b['opts']}` |")
        for part, why in r.get("_failed", {}).items():
            lines.append(f"| {part}: failed in this run | {why} | | | |")
        if name == "mnist":
            lines.append(f"| paper (Table 1): k q-metrics / (m) / k q-flats / SVM | "
                         f"{PAPER['single']} / {PAPER['vote']} / {PAPER['flats']} / {PAPER['svm']} | "
                         f"~300 per 40 passes (MATLAB) | | k=8, q=20, mu=(1.05, .95) |")
        lines.append("")
        if kq:
            lines += [f"Seconds per pass (mean over the 5 x 40 passes): {kq['pass_s']:.2f} "
                      + (f"(paper: {PAPER['pass_s']:.1f} s, MATLAB)" if name == "mnist" else ""),
                      "", "Error by pass (mean of restarts / vote): " + ", ".join(
                          f"{p}: {s:.2f}/{v:.2f}" for p, s, v in
                          zip(kq["passes"], kq["single_curve"], kq["vote_curve"])
                          if p % 5 == 0), ""]
            if kq.get("selection"):
                lines += ["Model selection (validation = last 20 % of the training set):", "",
                          "| PCA -l | k | q | mu1 | mu2 | validation error % |",
                          "| --- | --- | --- | --- | --- | --- |"]
                lines += [f"| {row['pca']} | {row['k']} | {row['q']} | {row['mu1']:g} | "
                          f"{row['mu2']:g} | {row['error']:.2f} |" for row in
                          map(_selection_row, kq["selection"])]
                lines.append("")
        if r.get("flats"):
            lines += ["k q-flats validation errors (-y 0 through the origin, -y 1 affine): "
                      + ", ".join(_flats_cell(row, len(FLATS_PCA[name]) > 1)
                                  for row in r["flats"]["table"]), ""]
        if r.get("ablation"):
            lines += ["### Ablation: update rule (-G) x pass type (-F), restart 1", "",
                      "| -G | -F | error % (mean passes 20-40) | error % pass 40 | s / pass |",
                      "| --- | --- | --- | --- | --- |"]
            lines += [f"| {a['G']} | {a['F']} | {a['err_20_40']:.2f} | {a['err_40']:.2f} | "
                      f"{a['pass_s']:.2f} |" for a in r["ablation"]]
            lines.append("")
    path.write_text("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="mnist,usps,letter")
    ap.add_argument("--parts", default="ablation,kq,flats,llsvm,liblinear,libsvm")
    ap.add_argument("--json", default=str(HERE / "results" / "kq.json"))
    ap.add_argument("--out", default=str(HERE / "results" / "kq.md"))
    ap.add_argument("--merge", action="append", default=[],
                    help="JSON results of another run (e.g. a parallel libsvm run) to merge in")
    ap.add_argument("--note", action="append", default=[],
                    help="a line for the header of the table (with --parts none: how the "
                         "merged results were produced)")
    args = ap.parse_args(argv)
    jpath = Path(args.json)
    results = json.loads(jpath.read_text()) if jpath.exists() else {}
    for extra in args.merge:
        for name, parts in json.loads(Path(extra).read_text()).items():
            if name != "_env":
                results.setdefault(name, {}).update(parts)
    if args.note:
        results.setdefault("_env", {}).setdefault("notes", []).extend(args.note)
    if args.parts == "none":        # re-render (after merging) without running anything
        write_markdown(results, Path(args.out))
        jpath.write_text(json.dumps(results, indent=1, default=lambda o: o.tolist()))
        return 0

    results["_env"] = dict(machine=f"{platform.machine()} {os.cpu_count()} cpus, "
                                   f"Python {platform.python_version()}",
                           load_start=" ".join(f"{v:.2f}" for v in os.getloadavg()))

    def log(text):
        print(text, flush=True)
    for name in args.datasets.split(","):
        log(f"== {name}")
        data = load(name)
        for part in args.parts.split(","):
            if part in ("ablation", "kq_seed2", "kq_z1", "kq_z2", "kq_z3", "kq_h1", "kq_h2",
                        "kq_h3") and name != "mnist":
                continue        # MNIST-only parts (the paper's setting)
            t, c = time.perf_counter(), time.process_time()
            try:
                results.setdefault(name, {})[part] = PARTS[part](name, data, log)
                if isinstance(results[name][part], dict):
                    results[name][part]["_part"] = dict(
                        wall_s=time.perf_counter() - t, cpu_s=time.process_time() - c,
                        finished=time.strftime("%Y-%m-%d %H:%M"),
                        load_end=" ".join(f"{v:.2f}" for v in os.getloadavg()))
            except Exception as exc:   # a failing baseline must not lose the other results
                log(f"  {part} failed: {type(exc).__name__}: {exc}")
                results.setdefault(name, {}).setdefault("_failed", {})[part] = repr(exc)
            log(f"  [{part} {time.perf_counter() - t:.0f} s, load {os.getloadavg()[0]:.2f}]")
            results["_env"]["load_end"] = " ".join(f"{v:.2f}" for v in os.getloadavg())
            jpath.write_text(json.dumps(results, indent=1, default=lambda o: o.tolist()))
            write_markdown(results, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
