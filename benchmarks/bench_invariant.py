"""Invariant SVM benchmark (issue 8; Chapelle & Schoelkopf, NIPS 2001, algorithms.md §E.7).

Parts (each writes ``results/invariant_<part>.json``; ``report`` turns the JSON
files present into ``results/invariant.md`` and the plots):

``toy``
    30 points uniform in [-1, 1]^2, label sign(|x|^2 - 0.7), 100 repeats, one fixed
    test sample of 10^4 points, RBF kernel exp(-|x-y|^2 / (2 sigma^2)) (LIBSVM
    ``-g 1/(2 sigma^2)``), rotation tangents (-x2, x1) as finite differences with
    step 1e-3 rad.  Left: error vs log sigma at gamma = 0.9 (SVM, VSV, ISVM, IHKPCA);
    right: IHKPCA and ISVM error vs -ln(1 - gamma) for log sigma in {-0.8, 0, 1.4}.
    VSV adds the training points rotated by +delta and -delta; the best delta of
    {0.1, 0.2, 0.4} rad per sigma is reported (the paper reports VSV at its best sigma).
    Reference rules on the same training sets: thresholds on the radius half-way between
    the largest inner and the smallest outer training point (in r and in r^2) -- what any
    fully rotation-invariant max-margin rule does.  ``--toy-points n`` runs the same
    protocol with n training points (``invariant_toy_n<n>.json``, a sensitivity check:
    the invariant limit scales as 1 / (2 n)).
``usps-binary``
    USPS digits 0-4 vs 5-9; the 7291 training images randomly permuted and cut into
    23 disjoint subsets of 317, each trained alone and tested on the 2007 test
    images (default: train and test pooled and permuted first, the paper's "random
    permutation of the training and test set"; ``--original-test`` keeps the original
    split); polynomial kernel of degree 3 in the form chosen on validation among
    ``USPS_KERNEL_FORMS`` (it is (x.y / 256)^3 on pixels in [-1, 1], Schoelkopf's
    convention: the shared file's [0, 1] pixels mapped by 2x - 1, background -1);
    horizontal (right) and vertical (up) 1-pixel translations; -ln(1 - gamma) in
    0 .. 3.5 (the paper's axis) and 5, 8 (3.5 in log10 is 8.06 in ln).  The kernel form
    and C are chosen once, before any test error is seen: plain SVMs trained on subset 0
    are scored on subsets 1-3; gamma per method and translation (a secondary table; the
    curves are reported whole) from models on subsets 0, 1, 2 scored on subsets 3-5.
    Methods: plain SVM, VSV, ISVM, IHKPCA (the paper's: kernel PCA map on the 317
    training images, ``-H 1``) and IHKPCA on the training images plus their translated
    copies (``-H 4``: the map spans the feature-space tangents, so it is ISVM solved in
    634 kernel PCA coordinates by the linear solver).  ``--usps-copy libsvm`` runs the
    same on LIBSVM's copy of USPS (the shared images smoothed by a 0.75-pixel Gaussian,
    ``datasets.usps_libsvm_pixels``, docs/data.md), written to
    ``invariant_usps_binary_libsvm.json``.
``usps-10``
    10-class USPS, all 7291 training images: lcoding's landmark kernel PCA map
    (``-X`` landmarks, random training images) + dual CD (one-vs-rest), with and
    without IHKPCA translation invariance (``-H 1``, and ``-H 4`` -- the map on the
    landmarks and their two translated copies -- for up to 1000 landmarks), against
    libsvm-official (one-vs-one C-SVC) with the same RBF and polynomial kernels
    (literature settings: RBF width 0.5 * 256, i.e. -g 1/128; polynomial (x.y/256)^3;
    C = 10).

BLAS threads: run with ``OPENBLAS_NUM_THREADS=1`` on the shared 2-core machine; with
two OpenBLAS threads on a loaded machine a 317 x 317 eigendecomposition took 1.7 s
instead of 0.07 s (thread spinning), which would dominate every timing here.

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_invariant.py toy usps-binary usps-10 report
    python benchmarks/bench_invariant.py toy --quick        # 5 repeats, smoke run
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from lcoding.io import datasets
from lcoding.core.rows import rows_from_dense
from lcoding.methods.invariant import train_kernel_model
from lcoding.core.options import parse_train_options
from lcoding.core.messages import Messages

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
QUIET = Messages(True)

TOY_LOG_SIGMAS = [-1.5, -1.0, -0.8, -0.5, 0.0, 0.5, 1.0, 1.4]
TOY_CURVE_SIGMAS = [-0.8, 0.0, 1.4]
TOY_CURVE_T = list(range(0, 13))             # -ln(1 - gamma)
TOY_VSV_DELTAS = [0.1, 0.2, 0.4]
TOY_C = 1000.0
TOY_STEP = 1e-3
TOY_POINTS = 30
USPS_T = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 5.0, 8.0]
USPS_METHODS = {"isvm": "ISVM", "ihkpca": "IHKPCA", "ihkpca_virtual": "IHKPCA+virtual"}
USPS_C_GRID = [1.0, 10.0, 100.0, 1000.0]
USPS_POLY = "-t 1 -d 3 -g 0.00390625 -r 0"
# kernel forms compared on the validation subsets (the paper gives only "polynomial of
# degree 3"): name -> (pixel range, options); background = the low end of the range
USPS_KERNEL_FORMS = {
    "(x.y/256)^3 on [-1, 1] pixels": ("pm1", USPS_POLY),
    "(x.y/256 + 1)^3 on [-1, 1] pixels": ("pm1", "-t 1 -d 3 -g 0.00390625 -r 1"),
    "(x.y/256)^3 on [0, 1] pixels": ("01", USPS_POLY),
    "(x.y/256 + 1)^3 on [0, 1] pixels": ("01", "-t 1 -d 3 -g 0.00390625 -r 1"),
    "(x.y/64 + 1)^3 on [0, 1] pixels": ("01", "-t 1 -d 3 -g 0.015625 -r 1"),
}
USPS10_KERNELS = {"rbf": "-t 2 -g 0.0078125", "poly3": "-t 1 -d 3 -g 0.00390625 -r 0"}
USPS10_C = 10.0
USPS10_VIRTUAL_MAX = 1000     # -H 4 (3 m map points) only up to this many landmarks
# every method of the toy and USPS-binary parts uses the squared-hinge SVM: SMO for the
# kernel SVMs (-H 2, 3) and dual CD on the kernel PCA coordinates (-H 1), which converges on
# these ill-conditioned coordinates where the hinge-loss dual CD (-s 3) stalls
SOLVER = "-s 1 -e 0.001"
PAPER_TOY = {"svm": 6.25, "vsv": 3.87, "invariant": 1.11}


def gamma_of(t: float) -> float:
    return 1.0 - np.exp(-t)


def machine() -> dict:
    return {"load_1min": os.getloadavg()[0], "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default")}


def train(y, X, options, tangents=None, background=0.0):
    params = parse_train_options(options + " -q")
    return train_kernel_model(y, rows_from_dense(X), params, QUIET, tangents=tangents,
                              background=background)


def error(model, rows, y) -> float:
    return float((model.labels_from_values(model.decision_values(rows)) != y).mean())


# ------------------------------------------------------------------------------- toy
def circle(rng, n):
    X = rng.uniform(-1.0, 1.0, (n, 2))
    return X, np.where((X ** 2).sum(1) > 0.7, 1.0, -1.0)


def rotate(X, angle):
    c, s = np.cos(angle), np.sin(angle)
    return X @ np.array([[c, s], [-s, c]])


def radius_threshold_error(draws: int = 20000, n: int = TOY_POINTS) -> float:
    """Expected error (%) of the ideal rotation-invariant max-margin rule on n points:
    threshold the radius half-way between the largest inner and the smallest outer
    training radius -- what ISVM and IHKPCA approach as gamma -> 1.  The error is the
    exact area between that circle and the true one, over 4."""
    rng = np.random.default_rng(7)
    r_true = np.sqrt(0.7)

    def inside_fraction(r):    # area of the disc of radius r inside [-1, 1]^2, over 4 (r < sqrt 2)
        r = np.asarray(r, dtype=float)
        big = np.maximum(r, 1.0)
        corner = r * r * np.arccos(1.0 / big) - np.sqrt(big * big - 1.0)
        return np.pi * r * r / 4.0 - np.where(r > 1.0, corner, 0.0)

    radius = np.sqrt((rng.uniform(-1.0, 1.0, (draws, n, 2)) ** 2).sum(-1))
    inner = np.where(radius < r_true, radius, 0.0).max(1)
    outer = np.where(radius >= r_true, radius, np.sqrt(2.0)).min(1)
    threshold = (inner + outer) / 2.0
    return float(100.0 * np.abs(inside_fraction(threshold) - inside_fraction(r_true)).mean())


def midpoint_error(X, y, Xt, yt, power: float) -> float:
    """Test error of the radius threshold half-way (in r^power) between the largest inner
    and the smallest outer training point: a perfectly rotation-invariant max-margin rule."""
    s = (X ** 2).sum(1) ** (power / 2.0)
    inner = s[y < 0].max() if (y < 0).any() else 0.0
    outer = s[y > 0].min() if (y > 0).any() else 2.0 ** (power / 2.0)
    st = (Xt ** 2).sum(1) ** (power / 2.0)
    return float((np.where(st > (inner + outer) / 2.0, 1.0, -1.0) != yt).mean())


def run_toy(repeats: int, n_points: int = TOY_POINTS) -> dict:
    rng = np.random.default_rng(2001)
    Xt, yt = circle(rng, 10000)
    test = rows_from_dense(Xt)
    keys = [f"{m}@{ls}" for ls in TOY_LOG_SIGMAS for m in ("svm", "vsv", "isvm", "ihkpca")]
    keys += [f"vsv{d}@{ls}" for ls in TOY_LOG_SIGMAS for d in TOY_VSV_DELTAS]
    keys += [f"{m}@{ls}@{t}" for ls in TOY_CURVE_SIGMAS for t in TOY_CURVE_T
             for m in ("isvm", "ihkpca")]
    keys += ["midpoint_r", "midpoint_r2"]
    errors = {k: [] for k in keys}
    t0, c0 = time.perf_counter(), time.process_time()
    for rep in range(repeats):
        X, y = circle(np.random.default_rng([2001, rep]), n_points)
        tangents = TOY_STEP * np.column_stack([-X[:, 1], X[:, 0]])
        errors["midpoint_r"].append(midpoint_error(X, y, Xt, yt, 1.0))
        errors["midpoint_r2"].append(midpoint_error(X, y, Xt, yt, 2.0))
        for ls in sorted(set(TOY_LOG_SIGMAS) | set(TOY_CURVE_SIGMAS)):
            base = f"-t 2 -g {1.0 / (2.0 * np.exp(ls) ** 2):.17g} -c {TOY_C:g} {SOLVER}"
            if ls in TOY_LOG_SIGMAS:
                errors[f"svm@{ls}"].append(error(train(y, X, base + " -H 2 -Y 0"), test, yt))
                for d in TOY_VSV_DELTAS:
                    Xv = np.vstack([X, rotate(X, d), rotate(X, -d)])
                    errors[f"vsv{d}@{ls}"].append(
                        error(train(np.tile(y, 3), Xv, base + " -H 2 -Y 0"), test, yt))
                errors[f"isvm@{ls}"].append(
                    error(train(y, X, base + " -H 2 -Y 0.9", tangents), test, yt))
                errors[f"ihkpca@{ls}"].append(
                    error(train(y, X, base + " -H 1 -Y 0.9 -B 1", tangents), test, yt))
            if ls in TOY_CURVE_SIGMAS:
                for t in TOY_CURVE_T:
                    g = gamma_of(t)
                    errors[f"isvm@{ls}@{t}"].append(
                        error(train(y, X, base + f" -H 2 -Y {g:.17g}", tangents), test, yt))
                    errors[f"ihkpca@{ls}@{t}"].append(
                        error(train(y, X, base + f" -H 1 -Y {g:.17g} -B 1", tangents), test, yt))
    for ls in TOY_LOG_SIGMAS:   # VSV at its best rotation angle for this sigma
        best = min(TOY_VSV_DELTAS, key=lambda d: np.mean(errors[f"vsv{d}@{ls}"]))
        errors[f"vsv@{ls}"] = errors[f"vsv{best}@{ls}"]
    return {"repeats": repeats, "n_points": n_points, "C": TOY_C, "step": TOY_STEP,
            "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
            "machine": machine(), "errors": errors}


# ------------------------------------------------------------------------------ USPS
def usps_pm1(copy: str = "shared"):
    """USPS pixels on [-1, 1] (background -1), dense: the shared copy mapped by 2x - 1,
    or (``copy="libsvm"``) LIBSVM's copy, the shared images smoothed by a 0.75-pixel
    Gaussian (``datasets.usps_libsvm_pixels``)."""
    if copy == "libsvm":
        y, rows = datasets.load("usps_libsvm", "train")
        ty, trows = datasets.load("usps_libsvm", "test")
        return y, rows.to_csr().toarray(), ty, trows.to_csr().toarray()
    y, rows = datasets.load("usps", "train")
    ty, trows = datasets.load("usps", "test")
    X = 2.0 * rows.to_csr().toarray() - 1.0
    Xt = 2.0 * trows.to_csr().toarray() - 1.0
    return y, X, ty, Xt


def run_usps_binary(n_splits: int, pooled: bool, copy: str = "shared") -> dict:
    y, X, ty, Xt = usps_pm1(copy)
    if pooled:
        # "after a random permutation of the training and test set": the 9298 images are
        # pooled and permuted; 7291 of them make the 23 subsets, the other 2007 the test set
        X, y = np.vstack([X, Xt]), np.concatenate([y, ty])
        perm = np.random.default_rng(317).permutation(X.shape[0])
        X, y, Xt, ty = X[perm[:7291]], y[perm[:7291]], X[perm[7291:]], y[perm[7291:]]
    yb = np.where(y <= 4, 1.0, -1.0)
    tyb = np.where(ty <= 4, 1.0, -1.0)
    perm = np.random.default_rng(317).permutation(X.shape[0])
    splits = perm.reshape(23, 317)
    # kernel form and C before any test error: plain SVM on subset 0 scored on subsets 1-3
    val = splits[1:4].ravel()
    val_err, choice = {}, None
    for rank, (form, (pixels, kopts)) in enumerate(USPS_KERNEL_FORMS.items()):
        Xf = X if pixels == "pm1" else (X + 1.0) / 2.0
        val_rows = rows_from_dense(Xf[val])
        for C in USPS_C_GRID:
            err = error(train(yb[splits[0]], Xf[splits[0]], f"{kopts} -c {C:g} {SOLVER} -H 2 -Y 0"),
                        val_rows, yb[val])
            val_err[f"{form} | {C:g}"] = err
            if choice is None or (err, rank, C) < choice[0]:
                choice = ((err, rank, C), form, C)
    _, form, C = choice
    pixels, kernel_opts = USPS_KERNEL_FORMS[form]
    background = -1.0 if pixels == "pm1" else 0.0
    if pixels == "01":
        X, Xt = (X + 1.0) / 2.0, (Xt + 1.0) / 2.0
    test = rows_from_dense(Xt)
    base = f"{kernel_opts} -c {C:g} {SOLVER} -N 16"
    errors: dict = {}

    def add(key, value):
        errors.setdefault(key, []).append(value)

    flags = {"isvm": "-H 2", "ihkpca": "-H 1 -B 1", "ihkpca_virtual": "-H 4 -B 1"}
    # gamma per method and translation on training data only: models trained on subsets
    # 0, 1, 2 each, scored on subsets 3-5; mean validation error
    gval = splits[3:6].ravel()
    val_rows = rows_from_dense(X[gval])
    gamma_val: dict = {}
    for J, name in ((1, "horizontal"), (2, "vertical")):
        for m, flag in flags.items():
            for t in USPS_T:
                gamma_val[f"{m}/{name}/{t}"] = float(np.mean([error(
                    train(yb[splits[k]], X[splits[k]], base + f" {flag} -Y {gamma_of(t):.17g} "
                          f"-J {J}", background=background), val_rows, yb[gval])
                    for k in range(3)]))
    gamma_choice = {f"{m}/{name}": min(USPS_T, key=lambda t: (gamma_val[f"{m}/{name}/{t}"], t))
                    for m in flags for name in ("horizontal", "vertical")}
    t0, c0 = time.perf_counter(), time.process_time()
    times: dict = {}
    for s in range(n_splits):
        idx = splits[s]
        Xs, ys = X[idx], yb[idx]
        add("svm", error(train(ys, Xs, base + " -H 2 -Y 0"), test, tyb))
        for J, name in ((1, "horizontal"), (2, "vertical")):
            tic = time.perf_counter()
            add(f"vsv/{name}", error(train(ys, Xs, base + f" -H 3 -J {J}", background=background),
                                     test, tyb))
            times.setdefault("vsv", []).append(time.perf_counter() - tic)
            for t in USPS_T:
                g = gamma_of(t)
                for m, flag in flags.items():
                    tic = time.perf_counter()
                    add(f"{m}/{name}/{t}", error(train(ys, Xs, base + f" {flag} -Y {g:.17g} "
                                                       f"-J {J}", background=background),
                                                 test, tyb))
                    times.setdefault(m, []).append(time.perf_counter() - tic)
        print(f"split {s}: svm {errors['svm'][-1]:.4f}", flush=True)
    return {"splits": n_splits, "pooled": pooled, "copy": copy, "C": C, "kernel_form": form,
            "gamma_validation_error": gamma_val, "gamma_choice": gamma_choice,
            "validation_error": val_err, "kernel": kernel_opts, "seconds": time.perf_counter() - t0,
            "cpu_seconds": time.process_time() - c0,
            "mean_seconds_per_model": {k: float(np.mean(v)) for k, v in times.items()},
            "machine": machine(), "errors": errors}


def run_usps_10(landmarks: list) -> dict:
    from libsvm import svmutil
    y, X, ty, Xt = usps_pm1()
    test = rows_from_dense(Xt)
    runs = []
    for kname, kopts in USPS10_KERNELS.items():
        # libsvm-official: one-vs-one C-SVC, full kernel
        prob = svmutil.svm_problem(y.tolist(), X.tolist())
        tic, cpu = time.perf_counter(), time.process_time()
        model = svmutil.svm_train(prob, f"{kopts} -c {USPS10_C:g} -m 1000 -q")
        train_s, train_cpu = time.perf_counter() - tic, time.process_time() - cpu
        tic, cpu = time.perf_counter(), time.process_time()
        pred, _, _ = svmutil.svm_predict(ty.tolist(), Xt.tolist(), model, "-q")
        runs.append({"kernel": kname, "method": "libsvm C-SVC (one-vs-one)", "landmarks": None,
                     "gamma_inv": None, "error": float((np.asarray(pred) != ty).mean()),
                     "train_s": train_s, "test_s": time.perf_counter() - tic,
                     "train_cpu_s": train_cpu, "test_cpu_s": time.process_time() - cpu,
                     "n_points": int(model.get_nr_sv()), "load": os.getloadavg()[0]})
        print(runs[-1], flush=True)
        for m in landmarks:
            runs_m = [("kernel PCA map + -s 3", "-H 0"),
                      ("IHKPCA both translations", "-H 1 -J 3 -Y 0.5"),
                      ("IHKPCA both translations", "-H 1 -J 3 -Y 0.9")]
            if m <= USPS10_VIRTUAL_MAX:     # the -H 4 map has 3 m points (both translations)
                runs_m += [("map on landmarks + translated copies (γ = 0)", "-H 4 -J 3 -Y 0"),
                           ("IHKPCA+virtual both translations", "-H 4 -J 3 -Y 0.9")]
            for method, extra in runs_m:
                opts = f"{kopts} -c {USPS10_C:g} -s 3 -B 1 -X {m} {extra}"
                tic, cpu = time.perf_counter(), time.process_time()
                lm = train(y, X, opts, background=-1.0)
                train_s, train_cpu = time.perf_counter() - tic, time.process_time() - cpu
                tic, cpu = time.perf_counter(), time.process_time()
                err = error(lm, test, ty)
                runs.append({"kernel": kname, "method": method, "landmarks": m, "options": opts,
                             "gamma_inv": lm.invariance_gamma, "error": err, "train_s": train_s,
                             "test_s": time.perf_counter() - tic, "train_cpu_s": train_cpu,
                             "test_cpu_s": time.process_time() - cpu, "n_points": lm.n_points,
                             "load": os.getloadavg()[0]})
                print(runs[-1], flush=True)
    return {"runs": runs, "machine": machine()}


# ---------------------------------------------------------------------------- report
def mean_sem(values):
    v = 100.0 * np.asarray(values, dtype=float)
    return v.mean(), (v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else 0.0)


def fmt(values):
    m, s = mean_sem(values)
    return f"{m:.2f} ± {s:.2f}"


def toy_summary(e: dict) -> dict:
    """Best mean errors of the toy run: SVM / VSV over sigma (gamma = 0.9 scan), ISVM /
    IHKPCA over the right-hand curves (mean, log sigma, -ln(1-gamma)), and the per-repeat
    test-set oracle over those curves (not a valid protocol; shown only as an explanation)."""
    out = {m: min(mean_sem(e[f"{m}@{ls}"])[0] for ls in TOY_LOG_SIGMAS) for m in ("svm", "vsv")}
    for m in ("isvm", "ihkpca"):
        out[m] = min((mean_sem(e[f"{m}@{ls}@{t}"])[0], ls, t) for ls in TOY_CURVE_SIGMAS
                     for t in TOY_CURVE_T)
    curves = np.array([e[f"{m}@{ls}@{t}"] for m in ("isvm", "ihkpca") for ls in TOY_CURVE_SIGMAS
                       for t in TOY_CURVE_T])
    out["oracle"] = float(100.0 * curves.min(0).mean())
    return out


def usps_binary_section(ub: dict, title: str, png: str, plt) -> list:
    """Markdown lines (and the plot ``png``) of one usps-binary result."""
    out: list = []
    e = ub["errors"]
    ts = [t for t in USPS_T if f"isvm/horizontal/{t}" in e]
    methods = [m for m in USPS_METHODS if f"{m}/horizontal/0.0" in e]
    out += [f"## USPS 0-4 vs 5-9, 23 × 317, polynomial degree 3 (Fig. 2){title}", "",
            f"{ub['splits']} splits ("
            + ("train and test pooled and permuted, 2007 of them held out" if ub["pooled"]
               else "original 2007 test images")
            + f"); kernel {ub.get('kernel_form', 'on [-1, 1] pixels')} (`{ub['kernel']}`), "
            f"C = {ub['C']:g}, both chosen on the validation errors of the plain SVM (subset 0 "
            "→ subsets 1-3; table below); "
            f"{ub['seconds']:.0f} s wall, {ub.get('cpu_seconds', float('nan')):.0f} s CPU "
            "for the splits (after the validation), mean wall seconds per model (train + "
            "2007 test): "
            + ", ".join(f"{k} {v:.2f}" for k, v in ub["mean_seconds_per_model"].items())
            + f" (load {ub['machine']['load_1min']:.1f} on {ub['machine']['cpus']} shared "
            "cores).", "",
            f"Plain SVM (γ = 0, LIBSVM's C-SVC by SMO): **{fmt(e['svm'])}**.  "
            "IHKPCA is the paper's (kernel PCA map on the 317 training images, `-H 1`); "
            "IHKPCA+virtual builds the map on the training images and their translated copies "
            "(`-H 4`, 634 points), so the feature-space tangents lie in the map and it solves "
            "the ISVM problem (up to LIBLINEAR's regularised bias `-B 1`).", "",
            "| -ln(1-γ) | " + " | ".join(f"{USPS_METHODS[m]} {d}" for d in
                                         ("horiz.", "vert.") for m in methods) + " |",
            "| --- " * (1 + 2 * len(methods)) + "|"]
    for t in ts:
        out.append(f"| {t:g} | " + " | ".join(fmt(e[f"{m}/{d}/{t}"]) for d in
                                              ("horizontal", "vertical")
                                              for m in methods) + " |")
    out.append(f"| VSV | {fmt(e['vsv/horizontal'])} |" + " |" * (len(methods) - 1)
               + f" {fmt(e['vsv/vertical'])} |" + " |" * (len(methods) - 1))
    forms = {k.split(" | ")[0] for k in ub["validation_error"]} \
        if "kernel_form" in ub else set()
    if forms:
        out += ["", "Validation errors (%) of the plain SVM (train: subset 0, score: subsets "
                "1-3; no test image involved):", "",
                "| kernel | " + " | ".join(f"C = {c:g}" for c in USPS_C_GRID) + " |",
                "| --- " * (1 + len(USPS_C_GRID)) + "|"]
        for form in USPS_KERNEL_FORMS:
            if form in forms:
                out.append(f"| {form} | " + " | ".join(
                    f"{100 * ub['validation_error'][f'{form} | {c:g}']:.2f}"
                    for c in USPS_C_GRID) + " |")
    paper_t = [t for t in ts if t <= 3.5]
    out += ["", "Best point of each curve on the paper's axis (-ln(1-γ) ≤ 3.5; the curves are "
            "reported whole, no γ is selected for a model):", "",
            "| translation | SVM | VSV | " + " | ".join(USPS_METHODS[m] for m in methods)
            + " |", "| --- " * (3 + len(methods)) + "|"]
    for d in ("horizontal", "vertical"):
        out.append(f"| {d} | {mean_sem(e['svm'])[0]:.2f} | {mean_sem(e[f'vsv/{d}'])[0]:.2f} | "
                   + " | ".join(
                       "{:.2f} (at {:g})".format(*min((mean_sem(e[f'{m}/{d}/{t}'])[0], t)
                                                      for t in paper_t)) for m in methods)
                   + " |")
    if "gamma_choice" in ub:
        gc = ub["gamma_choice"]
        out += ["", "With γ chosen on training data only (models on subsets 0, 1, 2 each, "
                "mean error on subsets 3-5, from the grid above; the test error at that γ, "
                "read off the curves):", "",
                "| translation | SVM | VSV | " + " | ".join(USPS_METHODS[m] for m in methods)
                + " |", "| --- " * (3 + len(methods)) + "|"]
        for d in ("horizontal", "vertical"):
            cells = []
            for m in methods:
                t = gc[f"{m}/{d}"]
                cells.append(f"{fmt(e[f'{m}/{d}/{t}'])} (-ln(1-γ) = {t:g})")
            out.append(f"| {d} | {fmt(e['svm'])} | {fmt(e[f'vsv/{d}'])} | "
                       + " | ".join(cells) + " |")
    out += ["", "Paper (Fig. 2, read off the plot): errors between ≈ 5.4 and ≈ 6.8 %; "
            "IHKPCA and ISVM below VSV below the plain SVM; horizontal gains larger.", ""]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    styles = {"ihkpca": "r-", "isvm": "b-", "ihkpca_virtual": "g--"}
    for a, d in zip(ax, ("vertical", "horizontal")):
        for m in methods:
            ms = [mean_sem(e[f"{m}/{d}/{t}"]) for t in ts]
            a.errorbar(ts, [v[0] / 100 for v in ms], [v[1] / 100 for v in ms],
                       fmt=styles[m], capsize=2, label=USPS_METHODS[m])
        v = mean_sem(e[f"vsv/{d}"])[0] / 100
        a.plot([0, ts[-1]], [v, v], "k--", label="VSV")
        s = mean_sem(e["svm"])[0] / 100
        a.plot([0], [s], "ko", label="SVM")
        a.axvline(3.5, color="gray", lw=0.6, ls=":")
        a.set(xlabel="-ln(1-gamma)  (paper's axis ends at 3.5)", title=f"{d} translation")
        a.legend()
    ax[0].set_ylabel("test error")
    fig.tight_layout()
    fig.savefig(RESULTS / png, dpi=110)
    out += [f"![usps]({png})", ""]
    return out


def report() -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out = ["# Invariant SVMs (Chapelle & Schölkopf, NIPS 2001): benchmark", "",
           "Generated by `python benchmarks/bench_invariant.py report` from the JSON files of "
           "the runs (`toy`, `usps-binary`, `usps-10`); protocol in the script's docstring and "
           "in `docs/invariant.md`. Errors in %, mean ± standard error of the mean.", ""]
    toy_path = RESULTS / "invariant_toy.json"
    if toy_path.exists():
        toy = json.loads(toy_path.read_text())
        e = toy["errors"]
        n_points = toy.get("n_points", TOY_POINTS)
        out += ["## Toy problem (30 points, circle, RBF, rotation invariance)", "",
                f"{toy['repeats']} repeats, {n_points} training points, 10^4 test points, "
                f"C = {toy['C']:g}, tangent step {toy['step']:g} rad; {toy['seconds']:.0f} s wall, "
                f"{toy.get('cpu_seconds', float('nan')):.0f} s CPU in all (load "
                f"{toy['machine']['load_1min']:.1f} on {toy['machine']['cpus']} shared cores).", "",
                "Error vs log σ at γ = 0.9 (Fig. 1 left):", "",
                "| log σ | SVM | VSV (best δ) | ISVM | IHKPCA |",
                "| --- | --- | --- | --- | --- |"]
        for ls in TOY_LOG_SIGMAS:
            out.append(f"| {ls:g} | " + " | ".join(fmt(e[f"{m}@{ls}"])
                                                  for m in ("svm", "vsv", "isvm", "ihkpca")) + " |")
        summary = toy_summary(e)
        out += ["", "Error vs -ln(1-γ) (Fig. 1 right; ISVM / IHKPCA):", "",
                "| -ln(1-γ) | " + " | ".join(f"log σ = {ls:g}" for ls in TOY_CURVE_SIGMAS) + " |",
                "| --- | --- | --- | --- |"]
        for t in TOY_CURVE_T:
            out.append(f"| {t} | " + " | ".join(
                f"{mean_sem(e[f'isvm@{ls}@{t}'])[0]:.2f} / {mean_sem(e[f'ihkpca@{ls}@{t}'])[0]:.2f}"
                for ls in TOY_CURVE_SIGMAS) + " |")
        floor = radius_threshold_error(n=n_points)
        out += ["",
                "| | SVM (best σ) | VSV (best σ, δ) | ISVM (best σ, γ) | IHKPCA (best σ, γ) |",
                "| --- | --- | --- | --- | --- |",
                f"| lcoding | {summary['svm']:.2f} | {summary['vsv']:.2f} | "
                f"{summary['isvm'][0]:.2f} (log σ {summary['isvm'][1]:g}, -ln(1-γ) "
                f"{summary['isvm'][2]}) | {summary['ihkpca'][0]:.2f} (log σ "
                f"{summary['ihkpca'][1]:g}, -ln(1-γ) {summary['ihkpca'][2]}) |",
                f"| paper | {PAPER_TOY['svm']} | {PAPER_TOY['vsv']} | {PAPER_TOY['invariant']} | "
                f"{PAPER_TOY['invariant']} |", "| target | | | ≤ 1.2 | ≤ 1.2 |", "",
                "**Why ≤ 1.2 % is out of reach with 30 points.** As γ → 1 ISVM and IHKPCA become "
                "rotation-invariant rules: they can only threshold the radius, and the training "
                "set says nothing about the true radius beyond the gap between the largest inner "
                "and the smallest outer training radius.  For a threshold placed in that gap by "
                "the data alone (a location-equivariant rule, as every max-margin rule is) the "
                "expected error is about 1 / (2n) of the square — 1.67 % for n = 30 — whatever "
                "the kernel, C or γ: the radial density cancels between the width of the gap and "
                "the mass per unit radius.  Measured references on the same training sets and "
                "test points:", "",
                "| fully invariant reference rule | error % |", "| --- | --- |",
                *([f"| radius threshold half-way (in r) between the nearest inner and outer "
                   f"training points | {fmt(e['midpoint_r'])} |",
                   f"| the same half-way in r² (what the large-σ RBF limit gives) | "
                   f"{fmt(e['midpoint_r2'])} |"] if "midpoint_r" in e else []),
                f"| expected error of the half-way rule in r (exact areas, 20000 draws) | "
                f"{floor:.2f} |",
                f"| *not a valid protocol*: best (σ, γ) of the right-hand curves chosen per repeat "
                f"on the test set | {summary['oracle']:.2f} |", "",
                "So ISVM and IHKPCA at γ → 1 sit at the invariant limit of this problem (the "
                "half-way rule on the same training sets), and no setting the paper leaves open "
                "— C, test-set size, log base of σ and γ, tangent scaling — moves that limit, "
                "because any max-margin rule puts its threshold inside the gap.  The paper's "
                "1.11 % (and its 6.25 / 3.87 % for SVM / VSV, 20-25 % below ours) needs more "
                "information per run than 30 uniform points — 1 / (2n) = 1.11 % is n = 45, see "
                "the sensitivity run below — or a choice of σ and γ on the test errors of each "
                "repeat (last row).", ""]
        for extra in sorted(RESULTS.glob("invariant_toy_n*.json")):
            other = json.loads(extra.read_text())
            so = toy_summary(other["errors"])
            n_o = other["n_points"]
            out += [f"Sensitivity: the same protocol with **{n_o} training points** "
                    f"({other['repeats']} repeats, {other['seconds']:.0f} s wall, "
                    f"{other.get('cpu_seconds', float('nan')):.0f} s CPU, load "
                    f"{other['machine']['load_1min']:.1f}; `--toy-points {n_o}`):", "",
                    "| n | SVM (best σ) | VSV (best σ, δ) | ISVM (best σ, γ) | "
                    "IHKPCA (best σ, γ) | half-way rule (r) | expected half-way |",
                    "| --- | --- | --- | --- | --- | --- | --- |",
                    f"| {n_points} | {summary['svm']:.2f} | {summary['vsv']:.2f} | "
                    f"{summary['isvm'][0]:.2f} | {summary['ihkpca'][0]:.2f} | "
                    f"{mean_sem(e['midpoint_r'])[0]:.2f} | {floor:.2f} |",
                    f"| {n_o} | {so['svm']:.2f} | {so['vsv']:.2f} | {so['isvm'][0]:.2f} | "
                    f"{so['ihkpca'][0]:.2f} | {mean_sem(other['errors']['midpoint_r'])[0]:.2f} | "
                    f"{radius_threshold_error(n=n_o):.2f} |",
                    f"| paper (30) | {PAPER_TOY['svm']} | {PAPER_TOY['vsv']} | "
                    f"{PAPER_TOY['invariant']} | {PAPER_TOY['invariant']} | | |", ""]
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        for m, style in (("svm", "k-"), ("vsv", "k--"), ("isvm", "b-"), ("ihkpca", "r-")):
            ms = [mean_sem(e[f"{m}@{ls}"]) for ls in TOY_LOG_SIGMAS]
            ax[0].errorbar(TOY_LOG_SIGMAS, [v[0] / 100 for v in ms], [v[1] / 100 for v in ms],
                           fmt=style, label=m.upper(), capsize=2)
        ax[0].set(xlabel="log sigma", ylabel="test error", title="gamma = 0.9")
        ax[0].legend()
        for ls, color in zip(TOY_CURVE_SIGMAS, ("b", "g", "r")):
            for m, style in (("ihkpca", "-"), ("isvm", ":")):
                ms = [mean_sem(e[f"{m}@{ls}@{t}"]) for t in TOY_CURVE_T]
                ax[1].errorbar(TOY_CURVE_T, [v[0] / 100 for v in ms], [v[1] / 100 for v in ms],
                               fmt=color + style, capsize=2, label=f"{m.upper()} log sigma={ls:g}")
        ax[1].axhline(floor / 100, color="k", lw=0.8, ls="--",
                      label="invariant limit (half-way rule)")
        ax[1].axhline(PAPER_TOY["invariant"] / 100, color="gray", lw=0.8, ls=":",
                      label="paper 1.11 %")
        ax[1].set(xlabel="-ln(1-gamma)", ylabel="test error", title="IHKPCA (solid), ISVM (dotted)")
        ax[1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(RESULTS / "invariant_toy.png", dpi=110)
        out += ["![toy](invariant_toy.png)", ""]
    for stem, title, png in (
            ("invariant_usps_binary", "", "invariant_usps.png"),
            ("invariant_usps_binary_libsvm", ", LIBSVM's copy of USPS (smoothed images)",
             "invariant_usps_libsvm.png")):
        bin_path = RESULTS / f"{stem}.json"
        if bin_path.exists():
            out += usps_binary_section(json.loads(bin_path.read_text()), title, png, plt)
    ten_path = RESULTS / "invariant_usps10.json"
    if ten_path.exists():
        ut = json.loads(ten_path.read_text())
        out += ["## 10-class USPS, 7291 training images: landmark kernel PCA map vs libsvm", "",
                "One run each; times are seconds (train, then the 2007 test images), wall-clock "
                "and CPU (process time), with the 1-minute load average at the end of the run "
                "(2 cores, shared with other jobs: wall times are inflated).", "",
                "| kernel | method | landmarks | γ | error % | train s wall / CPU | "
                "test s wall / CPU | points | load |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in ut["runs"]:
            out.append(f"| {r['kernel']} | {r['method']} | {r['landmarks'] or 'all (SVs)'} | "
                       f"{'' if r['gamma_inv'] is None else format(r['gamma_inv'], 'g')} | "
                       f"{100 * r['error']:.2f} | {r['train_s']:.1f} / "
                       f"{r.get('train_cpu_s', float('nan')):.1f} | {r['test_s']:.1f} / "
                       f"{r.get('test_cpu_s', float('nan')):.1f} | "
                       f"{r['n_points']} | {r['load']:.1f} |")
        out.append("")
    (RESULTS / "invariant.md").write_text("\n".join(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("parts", nargs="+", choices=["toy", "usps-binary", "usps-10", "report"])
    ap.add_argument("--quick", action="store_true", help="a few repeats/splits only (smoke run)")
    ap.add_argument("--original-test", action="store_true",
                    help="usps-binary: test on the original 2007 test images instead of pooling "
                         "and re-splitting train + test")
    ap.add_argument("--usps-copy", choices=["shared", "libsvm"], default="shared",
                    help="usps-binary: the shared USPS file, or LIBSVM's copy rebuilt from it "
                         "(smoothed images; writes invariant_usps_binary_libsvm.json)")
    ap.add_argument("--landmarks", type=int, nargs="+", default=[1000, 2000])
    ap.add_argument("--toy-points", type=int, default=TOY_POINTS,
                    help="toy: training points per repeat (30 in the paper; other values write "
                         "invariant_toy_n<points>.json, a sensitivity run)")
    args = ap.parse_args()
    RESULTS.mkdir(exist_ok=True)
    suffix = "_quick" if args.quick else ""
    for part in args.parts:
        if part == "toy":
            res = run_toy(5 if args.quick else 100, args.toy_points)
            name = "invariant_toy" + ("" if args.toy_points == TOY_POINTS
                                      else f"_n{args.toy_points}")
            (RESULTS / f"{name}{suffix}.json").write_text(json.dumps(res))
        elif part == "usps-binary":
            res = run_usps_binary(2 if args.quick else 23, not args.original_test,
                                  args.usps_copy)
            name = ("invariant_usps_binary" + ("_original_test" if args.original_test else "")
                    + ("_libsvm" if args.usps_copy == "libsvm" else ""))
            (RESULTS / f"{name}{suffix}.json").write_text(json.dumps(res))
        elif part == "usps-10":
            res = run_usps_10([500] if args.quick else args.landmarks)
            (RESULTS / f"invariant_usps10{suffix}.json").write_text(json.dumps(res))
        else:
            report()


if __name__ == "__main__":
    main()
