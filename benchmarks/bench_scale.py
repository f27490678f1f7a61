"""Scale-out benchmark: one process (-m 1, -m 2), a LocalCluster of 2 workers
(lcoding.dask) and liblinear-official on the same rows.

Data sets (built here from the shared files, written once as .npy under --data-dir):

* ``mnist60k``  -- MNIST train (60 000 rows, pixels in [0, 1]);
* ``mnist300k`` -- the same plus the four 1-pixel shifts (left, right, up, down) of
  every image: 300 000 rows;
* ``mnist1260k`` -- the same plus every shift with |dx|, |dy| <= 2 except the four
  (+-2, +-2) corners: 21 copies, 1 260 000 rows.  (An exact 1.2M would need an
  arbitrary cut of the shift set; this one is symmetric.)
  Shifted pixels move by whole pixels with zero fill (the image border is
  background).  Rows are ordered image by image (every copy of an image next to
  the others), so row chunks are random samples of the images;
* ``skin`` -- the skin train split (163 371 rows, B, G, R divided by 255);
* ``mnist1260k_60k``, ``mnist1260k_300k`` -- seeded random row samples of
  ``mnist1260k``: one distribution at three sizes, for the cost against n alone.

Test sets: the MNIST test split (10 000, unshifted), the skin test split.

Modes (each run in its own process; wall and CPU seconds of training, the peak
resident memory of that process -- for ``dask`` the largest of the driver and the
workers -- the test error and the primal objective of the model on its training
rows):

* ``m1``, ``m2`` -- ``train_model`` with ``-m 1`` / ``-m 2`` (MNIST: the ten classes
  in two threads; binary skin: CoCoA+ on two partitions);
* ``dask`` -- ``lcoding.dask.train`` on ``LocalCluster(n_workers=2,
  threads_per_worker=1)``, default strategy (multi-class: "classes", every worker
  solves whole one-vs-rest problems), the anchors from all rows (``sample_size=n``,
  the driver's k-means in 2 threads); the rows cut into two CSR chunks in file
  order (shuffled first for a binary problem, which CoCoA+ trains) and sent to the
  workers first (the send is timed apart);
* ``dask_cocoa`` -- the same with ``strategy="cocoa"`` (CoCoA+ rounds over the two
  chunks), the anchors from a 50 000-row sample, the rows shuffled (seeded);
* ``liblinear`` -- liblinear-official ``-s 1`` (linear) on the same rows.

Also: ``speedup`` (``-m 2`` against ``-m 1`` on binary problems, paired runs in one
process, medians) and ``rounds`` (CoCoA+ rounds with many partitions, for the
estimate in ``docs/scale.md``).

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_scale.py prepare
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_scale.py run --set mnist300k --mode m2
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_scale.py all      # every set and mode
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_scale.py speedup
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_scale.py rounds --set mnist1260k --parts 32
    python benchmarks/bench_scale.py table                             # results/scale.md

Records are JSON lines in ``benchmarks/results/scale.jsonl`` (newest per key wins).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# the repository's lcoding when it is built in place (else an installed copy, which
# may be older than the tree being measured); the package directory goes into
# PYTHONPATH too, for the processes this script and LocalCluster start
if any((HERE.parent / "lcoding" / "linear").glob("_dual_cd*.so")):
    sys.path.insert(0, str(HERE.parent))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(HERE.parent)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
from _bench_common import load_avg  # noqa: E402

from lcoding.core.rows import Rows  # noqa: E402

RESULTS = HERE / "results"
RECORDS = RESULTS / "scale.jsonl"
TABLE = RESULTS / "scale.md"
DEFAULT_DATA = Path(os.environ.get("LCODING_SCALE_DATA", "/tmp/lcoding_scale"))

MNIST_LLSVM = "-s 1 -L 2 -a 3 -A 200 -k 30 -u 0.05 -K 3 -c 2 -B 1"
SKIN_LINEAR = "-s 1 -c 1 -B 1"
SKIN_LLSVM = "-s 1 -L 1 -A 50 -k 8 -c 10 -B 1"
LIBLINEAR_MNIST = "-s 1 -c 2 -B 1"
SETS = {
    # name: (base data, shifts, [(label, options), ...])
    "mnist60k": ("mnist", [(0, 0)], [("llsvm", MNIST_LLSVM)]),
    "mnist300k": ("mnist", [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)], [("llsvm", MNIST_LLSVM)]),
    "mnist1260k": ("mnist", [(dx, dy) for dy in range(-2, 3) for dx in range(-2, 3)
                             if not (abs(dx) == 2 and abs(dy) == 2)], [("llsvm", MNIST_LLSVM)]),
    "skin": ("skin", [(0, 0)], [("linear", SKIN_LINEAR), ("llsvm", SKIN_LLSVM)]),
}
# seeded random row samples of mnist1260k (kept in its order): the same distribution
# at three sizes, to see how the cost grows with n alone (the sets above also get
# harder as they grow: 1-pixel shifts at 300k, 2-pixel shifts at 1.26M)
SUBSETS = {"mnist1260k_60k": ("mnist1260k", 60_000), "mnist1260k_300k": ("mnist1260k", 300_000)}
for _name, (_of, _) in SUBSETS.items():
    SETS[_name] = (SETS[_of][0], None, SETS[_of][2])
LIBLINEAR_OPTIONS = {"mnist": LIBLINEAR_MNIST, "skin": SKIN_LINEAR}
MODES = ("m1", "m2", "dask", "dask_cocoa", "liblinear")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ------------------------------------------------------------------ data
def shifted(rows: Rows, dx: int, dy: int, side: int = 28) -> Rows:
    """Every 28 x 28 image moved by (dx, dy) pixels (zero fill): entries that leave
    the image are dropped, the others keep their order (index + dy*28 + dx)."""
    if dx == 0 and dy == 0:
        return rows
    r, c = np.divmod(rows.indices.astype(np.int64), side)
    r2, c2 = r + dy, c + dx
    keep = (r2 >= 0) & (r2 < side) & (c2 >= 0) & (c2 < side)
    row_of = np.repeat(np.arange(rows.n_rows), np.diff(rows.indptr))
    counts = np.bincount(row_of[keep], minlength=rows.n_rows)
    indptr = np.zeros(rows.n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return Rows(rows.data[keep], (r2 * side + c2)[keep].astype(np.int32), indptr,
                rows.n_features)


def interleave(copies) -> Rows:
    """Rows of the copies ordered image by image: image i of copy 0, of copy 1, ..."""
    n, S = copies[0].n_rows, len(copies)
    lengths = np.stack([np.diff(c.indptr) for c in copies], axis=1).reshape(-1)  # (n*S,)
    indptr = np.zeros(n * S + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    data = np.empty(int(indptr[-1]))
    indices = np.empty(int(indptr[-1]), dtype=np.int32)
    for s, c in enumerate(copies):
        dst_rows = np.arange(n) * S + s
        starts = indptr[dst_rows]
        cl = np.diff(c.indptr)
        pos = np.repeat(starts - c.indptr[:-1], cl) + np.arange(c.indptr[-1])
        data[pos] = c.data
        indices[pos] = c.indices
    return Rows(data, indices, indptr, copies[0].n_features)


def prepare(data_dir: Path, names):
    from lcoding.io.datasets import load
    data_dir.mkdir(parents=True, exist_ok=True)
    cache = {}
    for name in names:
        base, shifts, _ = SETS[name]
        if (data_dir / f"{name}.y.npy").exists():
            log(f"{name}: already prepared")
            continue
        if name in SUBSETS:
            of, size = SUBSETS[name]
            prepare(data_dir, [of])
            y, rows = load_set(data_dir, of)
            pick = np.sort(np.random.default_rng(20261124).choice(rows.n_rows, size, replace=False))
            _save(data_dir, name, y[pick], rows.take(pick))
            log(f"{name}: {size} of the {rows.n_rows} rows of {of}")
            continue
        if base not in cache:
            y, rows = load(base, "train")
            ty, trows = load(base, "test")
            if base == "skin":      # B, G, R to [0, 1]
                rows = Rows(rows.data / 255.0, rows.indices, rows.indptr, rows.n_features)
                trows = Rows(trows.data / 255.0, trows.indices, trows.indptr, trows.n_features)
            cache[base] = (y, rows, ty, trows)
            _save(data_dir, f"{base}_test", ty, trows)
        y, rows, _, _ = cache[base]
        t = time.perf_counter()
        big = interleave([shifted(rows, dx, dy) for dx, dy in shifts]) if len(shifts) > 1 else rows
        yy = np.repeat(y, len(shifts)) if len(shifts) > 1 else y
        _save(data_dir, name, yy, big)
        log(f"{name}: {big.n_rows} rows, {big.data.size} non-zeros "
            f"({time.perf_counter() - t:.1f} s)")


def _save(data_dir, name, y, rows):
    np.save(data_dir / f"{name}.y.npy", y)
    np.save(data_dir / f"{name}.data.npy", rows.data)
    np.save(data_dir / f"{name}.indices.npy", rows.indices)
    np.save(data_dir / f"{name}.indptr.npy", rows.indptr)
    (data_dir / f"{name}.json").write_text(json.dumps({"n_features": rows.n_features}))


def load_set(data_dir, name):
    meta = json.loads((data_dir / f"{name}.json").read_text())
    y = np.load(data_dir / f"{name}.y.npy")
    rows = Rows(np.load(data_dir / f"{name}.data.npy"), np.load(data_dir / f"{name}.indices.npy"),
                np.load(data_dir / f"{name}.indptr.npy"), meta["n_features"])
    return y, rows


def csr_bytes(rows: Rows) -> int:
    return rows.data.nbytes + rows.indices.nbytes + rows.indptr.nbytes


# ----------------------------------------------------------- objectives
def primal_objective(model, y, rows, C: float, loss: str = "l2", batch: int = 100_000) -> float:
    """Sum over the one-vs-rest problems of ``1/2 ||w_c||^2 + C sum_i loss(y_ic f_c(x_i))``
    (no -wi weights), on the training rows, in batches."""
    labels = np.asarray(model.label)
    total = 0.5 * float(np.sum(model.w ** 2))
    yi = np.trunc(y)
    for a in range(0, rows.n_rows, batch):
        b = min(a + batch, rows.n_rows)
        p0, p1 = int(rows.indptr[a]), int(rows.indptr[b])
        part = Rows(rows.data[p0:p1], rows.indices[p0:p1], rows.indptr[a:b + 1] - p0,
                    rows.n_features)
        f = model.decision_values(part)
        if f.shape[1] == 1:
            ypm = np.where(yi[a:b] == labels[0], 1.0, -1.0)[:, None]
        else:
            ypm = np.where(yi[a:b, None] == labels[None, :], 1.0, -1.0)
        m = np.maximum(0.0, 1.0 - ypm * f)
        total += C * float(np.sum(m ** 2 if loss == "l2" else m))
    return total


def test_error(model, ty, trows) -> float:
    pred = model.labels_from_values(model.decision_values(trows.truncated(model.nr_feature)))
    return 100.0 * float(np.mean(pred != ty))


# ------------------------------------------------------------------ runs
def run_one(data_dir, name, mode, label, options, extra=""):
    """One training run in this process; returns its record."""
    from lcoding.core.messages import Messages
    from lcoding.core.options import parse_train_options
    from lcoding.training import train_model
    base = SETS[name][0]
    y, rows = load_set(data_dir, name)
    ty, trows = load_set(data_dir, f"{base}_test")
    rec = {"set": name, "mode": mode, "method": label, "rows": rows.n_rows,
           "nnz": int(rows.data.size), "csr_mb": round(csr_bytes(rows) / 2 ** 20, 1),
           "load_before": load_avg(), "python": platform.python_version()}
    base_mb = peak_mb()
    if mode in ("m1", "m2"):
        opts = f"{options} -m {1 if mode == 'm1' else 2} {extra}".strip()
        params = parse_train_options(opts)
        events = []
        info = Messages(False, sys.stderr, events=events.append, print_events=True)
        t, c = time.perf_counter(), time.process_time()
        model = train_model(y, rows, params, info)
        rec["train_s"], rec["cpu_s"] = time.perf_counter() - t, time.process_time() - c
        rec["peak_mb"] = peak_mb()
        # the LL-SVM's own account: k-means steps, and each class's passes and seconds
        solves = [re.search(r": (\d+) passes, (\S+) s$", e) for e in events]
        rec["passes"] = [int(m.group(1)) for m in solves if m]
        rec["solve_s"] = [float(m.group(2)) for m in solves if m]
        rec["kmeans_steps"] = sum(1 for e in events if "k-means" in e and "iteration" in e)
    elif mode in ("dask", "dask_cocoa"):
        opts = f"{options} {extra}".strip()
        model, extra_rec = _run_dask(y, rows, opts, "auto" if mode == "dask" else "cocoa")
        rec.update(extra_rec)
        params = parse_train_options(opts)
    elif mode == "liblinear":
        from liblinear.liblinearutil import train
        opts = LIBLINEAR_OPTIONS[base]
        params = parse_train_options(opts)
        X = rows.to_csr()
        t, c = time.perf_counter(), time.process_time()
        ref = train(y, X, opts + " -q")
        rec["train_s"], rec["cpu_s"] = time.perf_counter() - t, time.process_time() - c
        rec["peak_mb"] = peak_mb()
        model = _liblinear_as_lcoding(ref, rows.n_features, params)
        rec["method"] = "linear"
    else:
        raise ValueError(mode)
    rec["options"] = opts if mode != "liblinear" else LIBLINEAR_OPTIONS[base]
    rec["input_peak_mb"] = round(base_mb, 1)
    rec["test_error"] = test_error(model, ty, trows)
    rec["primal"] = primal_objective(model, y, rows, params.C,
                                     "l2" if params.solver_type == 1 else "l1")
    rec["model_mb"] = round(model.w.nbytes / 2 ** 20, 1)
    rec["load_after"] = load_avg()
    return rec


def _liblinear_as_lcoding(ref, n_features, params):
    """liblinear-official's model as an lcoding LinearModel (for the same error and
    objective code)."""
    from lcoding.core.model import LinearModel
    nr_class = ref.get_nr_class()
    nr_w = 1 if nr_class == 2 else nr_class
    w_size = n_features + (1 if params.bias >= 0 else 0)
    w = np.array([ref.w[i] for i in range(w_size * nr_w)]).reshape(w_size, nr_w)
    return LinearModel(params.solver_type, nr_class, np.array(ref.get_labels()), n_features,
                       params.bias, w)


def _run_dask(y, rows, options, strategy):
    """``strategy="auto"``: the anchors from all rows with the driver's 2 threads
    (``-m 2``: the anchors of ``-m 1``), the chunks in file order, so with the
    "classes" strategy the model is the single-process one; ``"cocoa"``: a
    50 000-row anchor sample, the rows shuffled (seeded) before the chunks are cut."""
    import dask.array as da
    import scipy.sparse as sp
    from distributed import Client, LocalCluster
    import lcoding.dask as ldask
    cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                           dashboard_address=None, memory_limit=0)
    client = Client(cluster)
    try:
        n = rows.n_rows
        half = -(-n // 2)
        # the chunks are random halves of the rows (skin's file is sorted by label;
        # CoCoA+ on sorted chunks converges far slower -- docs/scale.md)
        binary = np.unique(np.trunc(np.asarray(y))).size <= 2
        if strategy == "cocoa" or binary:
            perm = np.random.default_rng(0).permutation(n)
            X = rows.to_csr()[perm]
            y = np.asarray(y)[perm]
        else:
            X = rows.to_csr()
            y = np.asarray(y)
        t = time.perf_counter()
        workers = sorted(client.scheduler_info()["workers"])
        xs, ys = [], []
        for k, (a, b) in enumerate(((0, half), (half, n))):
            fx = client.scatter(X[a:b], workers=[workers[k]])
            fy = client.scatter(np.ascontiguousarray(y[a:b]), workers=[workers[k]])
            xs.append(da.from_delayed(fx, shape=(b - a, X.shape[1]), dtype=np.float64,
                                      meta=sp.csr_matrix((0, X.shape[1]))))
            ys.append(da.from_delayed(fy, shape=(b - a,), dtype=np.float64, meta=np.empty(0)))
        Xd, yd = da.concatenate(xs), da.concatenate(ys)
        send = time.perf_counter() - t
        del X
        t, c = time.perf_counter(), time.process_time()
        if strategy == "cocoa":
            model = ldask.train(yd, Xd, options, client=client, strategy="cocoa")
        else:
            model = ldask.train(yd, Xd, options + " -m 2", client=client, sample_size=n)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        worker_cpu = client.run(lambda: time.process_time())
        worker_peak = client.run(
            lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
        return model, {"train_s": wall, "cpu_s": cpu + sum(worker_cpu.values()),
                       "send_s": send, "peak_mb": max([peak_mb(), *worker_peak.values()]),
                       "driver_peak_mb": peak_mb(),
                       "worker_peak_mb": sorted(worker_peak.values())}
    finally:
        client.close()
        cluster.close()


def append_record(rec):
    RESULTS.mkdir(exist_ok=True)
    with open(RECORDS, "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec), flush=True)


def run_all(data_dir, names, modes, timeout):
    for name in names:
        for label, options in SETS[name][2]:
            for mode in modes:
                if mode == "liblinear" and label != SETS[name][2][0][0] and label != "linear":
                    continue
                cmd = [sys.executable, __file__, "run", "--set", name, "--mode", mode,
                       "--method", label, "--data-dir", str(data_dir)]
                log(f"== {name} {label} {mode}")
                try:
                    subprocess.run(cmd, timeout=timeout, check=True)
                except subprocess.TimeoutExpired:
                    append_record({"set": name, "mode": mode, "method": label,
                                   "error": f"timeout after {timeout} s"})
                except subprocess.CalledProcessError as err:
                    append_record({"set": name, "mode": mode, "method": label,
                                   "error": f"exit {err.returncode}"})


# ---------------------------------------------------------------- speedup
SPEEDUP_CASES = [
    ("ijcnn1", "linear", "-s 1 -c 1 -B 1"),
    ("ijcnn1", "llsvm", "-s 1 -L 2 -A 100 -k 8 -u 1 -c 1 -B 1"),
    # the same LL-SVMs by the primal Newton solver (-s 2, the same objective as -s 1):
    # -m 2 splits its products over row ranges instead of CoCoA+
    ("ijcnn1", "llsvm -s 2", "-s 2 -L 2 -A 100 -k 8 -u 1 -c 1 -B 1"),
    ("skin", "linear", SKIN_LINEAR),
    ("skin", "llsvm", SKIN_LLSVM),
    ("skin", "llsvm -s 2", SKIN_LLSVM.replace("-s 1 ", "-s 2 ")),
    # the issue's own LL-SVM options (tuned for MNIST: Hellinger map, wide Gaussian
    # coding over 30 of 200 random anchors) on the two binary sets
    ("ijcnn1", "llsvm (MNIST options)", MNIST_LLSVM),
    ("skin", "llsvm (MNIST options)", MNIST_LLSVM),
]


def speedup(data_dir, repeats):
    """-m 2 against -m 1 on binary problems, runs paired (m1, m2, m1, m2, ...)."""
    import io
    from lcoding.core.messages import Messages
    from lcoding.core.options import parse_train_options
    from lcoding.io.datasets import load
    from lcoding.training import train_model
    for name, label, options in SPEEDUP_CASES:
        if name == "skin":
            y, rows = load_set(data_dir, "skin")
            ty, trows = load_set(data_dir, "skin_test")
        else:
            y, rows = load(name, "train")
            ty, trows = load(name, "test")
        times = {1: [], 2: []}
        cpus = {1: [], 2: []}
        phases = {1: [], 2: []}
        out = {}
        before = load_avg()
        for _ in range(repeats):
            for m in (1, 2):
                buf = io.StringIO()
                t, c = time.perf_counter(), time.process_time()
                model = train_model(y, rows, parse_train_options(f"{options} -m {m}"),
                                    Messages(False, buf))
                times[m].append(time.perf_counter() - t)
                cpus[m].append(time.process_time() - c)
                text = buf.getvalue()
                # anchors and coding seconds, as the LL-SVM prints them
                ph = re.findall(r"anchors: \d+ \((\S+) s\), coding .*?\((\S+) s\)", text)
                phases[m].append([float(v) for v in ph[0]] if ph else [0.0, 0.0])
                newton = re.findall(r"^iter\s+(\d+) ", text, re.M)
                out[m] = (model, re.findall(r"#iter = (\d+)", text) or newton[-1:],
                          re.findall(r"(?:CoCoA\+|block-synchronous dual CD) stopped: (.*)", text)
                          or (["Newton steps, rows split"] if newton and m == 2 else []))
        p = {m: primal_objective(out[m][0], y, rows, parse_train_options(options).C)
             for m in (1, 2)}
        med = {m: np.median(np.array(phases[m]), axis=0).tolist() for m in (1, 2)}
        rec = {"kind": "speedup", "set": name, "method": label, "options": options,
               "m1_s": float(np.median(times[1])), "m2_s": float(np.median(times[2])),
               "m1_all": times[1], "m2_all": times[2],
               "m1_cpu": float(np.median(cpus[1])), "m2_cpu": float(np.median(cpus[2])),
               "m1_anchor_code_s": med[1], "m2_anchor_code_s": med[2],
               "speedup": float(np.median(times[1]) / np.median(times[2])),
               "paired_ratio_median": float(np.median(np.array(times[1]) / np.array(times[2]))),
               "m1_iter": out[1][1], "m2_rounds": out[2][1], "m2_stop": out[2][2],
               "primal_m1": p[1], "primal_m2": p[2], "primal_rel": (p[2] - p[1]) / p[1],
               "err_m1": test_error(out[1][0], ty, trows),
               "err_m2": test_error(out[2][0], ty, trows),
               "load_before": before, "load_after": load_avg()}
        append_record(rec)


# ----------------------------------------------------------------- rounds
def rounds(data_dir, name, parts, cls, max_rounds, local_passes):
    """CoCoA+ rounds to converge with ``parts`` partitions on one binary problem of
    the set (class ``cls`` against the rest), timed per round; the partitions run in
    turn (what is measured is the number of rounds and the cost of a pass)."""
    from lcoding.core.classes import group_classes
    from lcoding.core.options import parse_train_options
    from lcoding.core.params import LLSVMParams
    from lcoding.core.seeds import PURPOSE_SOLVER, rng_state
    from lcoding.linear import cocoa
    from lcoding.local.coding import kernel_map_of
    from lcoding.methods import llsvm
    y, rows = load_set(data_dir, name)
    label, options = SETS[name][2][0]
    params = parse_train_options(options)
    mp = LLSVMParams.from_train_params(params)
    km = kernel_map_of(params)
    if km is not None:
        rows = km(rows)
    labels, ci = group_classes(y)
    t = time.perf_counter()
    sample = np.sort(np.random.default_rng(0).choice(rows.n_rows, min(rows.n_rows, 50_000),
                                                     replace=False))
    coder = llsvm.local_coder(mp, llsvm.learn_local_anchors(rows.take(sample), ci[sample], mp,
                                                            params.seed))
    idx, wt = coder.code(rows, n_threads=2)
    t_code = time.perf_counter() - t
    c = int(np.flatnonzero(labels == cls)[0])
    y_pm = np.where(ci == c, 1, -1).astype(np.int8)
    n = rows.n_rows
    diag, upper = cocoa.loss_terms(np.full(n, params.C), "l2")
    sq = cocoa.row_sqnorms(rows, params.bias, -1.0, idx, wt)
    stream = rng_state(params.seed, PURPOSE_SOLVER, c)
    sigma = float(parts)
    QD = cocoa.subproblem_qd(sq, diag, sigma)
    if parts == 1:          # the sequential dual CD (LIBLINEAR's solver), for reference
        states = [cocoa.PartState(np.arange(n, dtype=np.int32), n, stream.copy())]
    else:
        states = [cocoa.PartState.fresh(ids, cocoa.partition_stream(stream, k))
                  for k, ids in enumerate(cocoa.split_rows(n, parts, stream))]
    alpha = np.zeros(n)
    W = np.zeros(coder.n_anchors * (rows.n_features + 1))
    eps = params.resolved_eps()
    rule = cocoa.StopRule.for_partitions(eps, max_rounds, parts)
    C = np.full(n, params.C)
    n_main = W.shape[0]

    def gap():
        f = cocoa.decision_values(rows, params.bias, -1.0, idx, wt, W, n_main, 2)
        primal = 0.5 * float(W @ W) + cocoa.loss_sum(f, y_pm, C, "l2")
        return primal, cocoa.dual_objective(W, alpha, diag)

    per_round, trace = [], []
    work = np.empty_like(W)
    while not rule.done:
        t = time.perf_counter()
        step = np.zeros_like(W)
        pgmax, pgmin, full = -np.inf, np.inf, True
        for k, st in enumerate(states):
            if rule.unshrink:
                st.active_size = st.n_rows
            np.copyto(work, W)
            a, b = cocoa.partition_pass(rows, params.bias, -1.0, idx, wt, y_pm, QD, diag, upper,
                                        alpha, work, st, rule.PGmax_old, rule.PGmin_old, sigma)
            for _ in range(local_passes - 1):
                a, b = cocoa.partition_pass(rows, params.bias, -1.0, idx, wt, y_pm, QD, diag,
                                            upper, alpha, work, st, a if a > 0 else np.inf,
                                            b if b < 0 else -np.inf, sigma)
            step += (work - W) / sigma
            pgmax, pgmin = max(pgmax, a), min(pgmin, b)
            full &= st.active_size == st.n_rows
        W += step
        action = rule.update(pgmax, pgmin, full, cocoa.w_change(W, step))
        per_round.append(time.perf_counter() - t)
        if action == "gap":
            rule.gap_checked(*gap())
        if rule.rounds % 10 == 0 or rule.done:      # the duality gap, every 10 rounds
            primal, dual = gap()
            trace.append((rule.rounds, (primal + dual) / primal, primal))
            log(f"round {rule.rounds}: PG {pgmax - pgmin:.4f} dW/W "
                f"{cocoa.w_change(W, step):.2e} gap {trace[-1][1]:.2e} P {primal:.6g} "
                f"({per_round[-1]:.2f} s)")

    def first(tol):
        return next((r for r, g, _ in trace if g <= tol), None)
    rec = {"kind": "rounds", "set": name, "parts": parts, "class": cls, "rows": n,
           "local_passes": local_passes, "rounds": rule.rounds, "stop": rule.reason,
           "round_s_median": float(np.median(per_round)), "code_s": t_code,
           "w_bytes": int(W.nbytes), "dual": cocoa.dual_objective(W, alpha, diag),
           "primal": trace[-1][2], "gap_final": trace[-1][1],
           "rounds_gap_1e-2": first(1e-2), "rounds_gap_1e-3": first(1e-3),
           "trace": trace, "load_after": load_avg()}
    append_record(rec)


# ------------------------------------------------------------------ table
def _latest():
    recs = {}
    if RECORDS.exists():
        for line in RECORDS.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                key = (r.get("kind", "run"), r.get("set"), r.get("method"), r.get("mode"),
                       r.get("parts"), r.get("local_passes"))
                recs[key] = r
    return recs


def table():
    recs = _latest()
    lines = ["# Scaling out: -m threads, CoCoA+ and a Dask LocalCluster",
             "",
             f"Generated by `python benchmarks/bench_scale.py table` from "
             f"`benchmarks/results/scale.jsonl` ({time.strftime('%Y-%m-%d %H:%M')}, "
             f"{os.cpu_count()} CPUs, a machine shared with other jobs: the load average "
             f"before/after every run is in the last column).  How the sets are built and "
             f"what each mode does: the docstring of `benchmarks/bench_scale.py` and "
             f"`docs/scale.md`.",
             "",
             "## Training: time, peak memory, test error",
             "",
             "`peak` is the peak resident memory of the training process (for `dask` the "
             "largest of the driver and the two workers); `CSR` the size of the training "
             "rows as CSR (float64 values, int32 indices); `primal` the sum over the "
             "one-vs-rest problems of the primal objective on the training rows "
             "(liblinear: its linear model, a different problem).  `dask`: the default "
             "strategy (MNIST: \"classes\", whole one-vs-rest problems on the workers; "
             "skin, binary: CoCoA+), the anchors from all rows, so its MNIST models are "
             "the `m1` models bit for bit (same primal).  `dask_cocoa`: CoCoA+ rounds over "
             "the two chunks, anchors from a 50 000-row sample (another coding: its primal "
             "is not comparable with `m1`/`m2`'s, its test error is), rows shuffled "
             "(seeded) before the chunks are cut.",
             "",
             "| set | rows | CSR MB | method | mode | train s | CPU s | peak MB | test error % "
             "| primal | load |",
             "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---|"]
    order = {m: i for i, m in enumerate(MODES)}
    runs = sorted((r for k, r in recs.items() if k[0] == "run"),
                  key=lambda r: (list(SETS).index(r["set"]) if r["set"] in SETS else 99,
                                 r.get("method", ""), order.get(r["mode"], 9)))
    for r in runs:
        if "error" in r:
            lines.append(f"| {r['set']} | | | {r['method']} | {r['mode']} | {r['error']} "
                         f"| | | | | |")
            continue
        extra = f" (+{r['send_s']:.1f} s send)" if "send_s" in r else ""
        lines.append(
            f"| {r['set']} | {r['rows']} | {r['csr_mb']} | {r['method']} | {r['mode']} | "
            f"{r['train_s']:.1f}{extra} | {r['cpu_s']:.1f} | {r['peak_mb']:.0f} | "
            f"{r['test_error']:.2f} | {r['primal']:.6g} | {r['load_before']}/{r['load_after']} |")
    series = [r for r in runs if r["mode"] == "m2" and "passes" in r and r.get("passes")
              and r["set"] in ("mnist1260k", *SUBSETS)]
    if series:
        lines += ["", "## Cost against n on one distribution (-m 2)", "",
                  "`mnist1260k_60k` and `mnist1260k_300k` are seeded random row samples of "
                  "`mnist1260k`, so the three rows differ in n only (the `mnist60k` / "
                  "`mnist300k` sets above also get harder as they grow).  `passes`: the "
                  "ten one-vs-rest dual-CD solves' passes (min / median / max), as the "
                  "solves report them; `us per row-pass` = the solves' seconds over "
                  "(passes x rows): LIBLINEAR's shrinking visits fewer rows per pass as "
                  "the passes go on.",
                  "",
                  "| set | rows | train s | us per row | passes min / median / max | "
                  "solve s (sum) | us per row-pass | test error % |",
                  "|---|---:|---:|---:|---|---:|---:|---:|"]
        for r in sorted(series, key=lambda r: r["rows"]):
            ps = np.array(r["passes"])
            solve = float(np.sum(r["solve_s"]))
            lines.append(
                f"| {r['set']} | {r['rows']} | {r['train_s']:.1f} | "
                f"{1e6 * r['train_s'] / r['rows']:.0f} | {ps.min()} / {np.median(ps):g} / "
                f"{ps.max()} | {solve:.1f} | {1e6 * solve / (ps.sum() * r['rows']):.2f} | "
                f"{r['test_error']:.2f} |")
    sp_recs = [r for k, r in recs.items() if k[0] == "speedup"]
    if sp_recs:
        lines += ["", "## -m 2 on one binary problem (two threads: the block-synchronous "
                  "dual CD, or CoCoA+ for a wide w)", "",
                  "Median wall and CPU seconds over paired runs (m1, m2, m1, m2, ...) in one "
                  "process; `anchors + coding` the LL-SVM's own timing of those phases "
                  "(median, -m 1 / -m 2); `primal rel` = (P(-m 2) - P(-m 1)) / P(-m 1) of "
                  "the models' primal objectives.  On a machine whose load average is above "
                  "its 2 cores the second thread often has no core: compare CPU and wall.",
                  "",
                  "| set | method | options | -m 1 s (CPU) | -m 2 s (CPU) | speed-up | "
                  "anchors + coding s | passes -m 1 | rounds -m 2 (stop) | primal rel | "
                  "test error -m 1 / -m 2 % | load |",
                  "|---|---|---|---:|---:|---:|---|---:|---|---:|---|---|"]
        for r in sp_recs:
            stop = ", ".join(r["m2_stop"]) if r["m2_stop"] else ""
            cpu1 = f" ({r['m1_cpu']:.2f})" if "m1_cpu" in r else ""
            cpu2 = f" ({r['m2_cpu']:.2f})" if "m2_cpu" in r else ""
            ph = ""
            if "m1_anchor_code_s" in r and r["method"] != "linear":
                ph = (f"{sum(r['m1_anchor_code_s']):.2f} / "
                      f"{sum(r['m2_anchor_code_s']):.2f}")
            lines.append(
                f"| {r['set']} | {r['method']} | `{r['options']}` | {r['m1_s']:.2f}{cpu1} | "
                f"{r['m2_s']:.2f}{cpu2} | {r['speedup']:.2f}x | {ph} | "
                f"{', '.join(r['m1_iter'])} | "
                f"{', '.join(r['m2_rounds'])} ({stop}) | {r['primal_rel']:.1e} | "
                f"{r['err_m1']:.2f} / {r['err_m2']:.2f} | {r['load_before']}/{r['load_after']} |")
    rd = [r for k, r in recs.items() if k[0] == "rounds"]
    if rd:
        lines += ["", "## CoCoA+ rounds with many partitions (one binary problem)", "",
                  "Partitions 1 = the sequential dual CD (LIBLINEAR's solver).  `gap` = the "
                  "relative duality gap (P(w) - D(alpha)) / P(w), computed every 10 rounds; "
                  "`rounds to gap` the first of those checks below 1e-2 / 1e-3 (-- : not "
                  "within the rounds run).", "",
                  "| set | rows | class vs rest | partitions | local passes | rounds (stop) | "
                  "rounds to gap 1e-2 / 1e-3 | final gap | primal | s per round (partitions "
                  "in turn, 1 core) | W bytes |",
                  "|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|"]
        rd.sort(key=lambda r: (r["set"], r["rows"], r["parts"], r["local_passes"]))
        for r in rd:
            if "trace" not in r:
                continue                   # an older record without the gap trace
            g2, g3 = r.get("rounds_gap_1e-2"), r.get("rounds_gap_1e-3")
            lines.append(f"| {r['set']} | {r['rows']} | {r['class']} | {r['parts']} | "
                         f"{r['local_passes']} | {r['rounds']} ({r['stop']}) | "
                         f"{g2 if g2 is not None else '--'} / {g3 if g3 is not None else '--'} | "
                         f"{r['gap_final']:.1e} | {r['primal']:.6g} | "
                         f"{r['round_s_median']:.2f} | {r['w_bytes']} |")
    TABLE.write_text("\n".join(lines) + "\n")
    print(TABLE)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("prepare", "run", "all", "speedup", "rounds", "table"))
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--set", default="mnist60k")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--mode", default="m2", choices=MODES)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--method", default=None, help="which option set of the data set")
    ap.add_argument("--extra", default="", help="options appended (e.g. -e 0.1)")
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--parts", type=int, default=32)
    ap.add_argument("--cls", type=int, default=8)
    ap.add_argument("--max-rounds", type=int, default=300)
    ap.add_argument("--local-passes", type=int, default=1)
    a = ap.parse_args(argv)
    if a.command == "prepare":
        prepare(a.data_dir, a.sets.split(","))
    elif a.command == "run":
        methods = dict(SETS[a.set][2])
        label = a.method or next(iter(methods))
        append_record(run_one(a.data_dir, a.set, a.mode, label, methods[label], a.extra))
    elif a.command == "all":
        prepare(a.data_dir, a.sets.split(","))
        run_all(a.data_dir, a.sets.split(","), a.modes.split(","), a.timeout)
        table()
    elif a.command == "speedup":
        prepare(a.data_dir, ["skin"])
        speedup(a.data_dir, a.repeats)
        table()
    elif a.command == "rounds":
        rounds(a.data_dir, a.set, a.parts, a.cls, a.max_rounds, a.local_passes)
        table()
    else:
        table()


if __name__ == "__main__":
    main()
