"""``lcoding-demo`` (or ``python -m lcoding.demo`` outside the source tree): train and evaluate on real data, print the results.

Uses the shared benchmark sets when they are reachable (``$LCODING_DATA`` or
``../shared/data``), else the banana set shipped inside the package.  Every run is
a LIBLINEAR-style script: read, train with an option string, predict, save, load.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

from lcoding.io import datasets
from lcoding.liblinearutil import load_model, predict, save_model, svm_read_problem, train

# (data set, option string, what it is)
RUNS = [
    ("banana", "-s 1 -B 1", "linear SVM, L2 loss (dual CD)"),
    ("banana", "-s 1 -L 1 -A 100 -k 8 -B 1 -c 10", "LL-SVM: 100 k-means anchors, 8-NN coding, dual CD"),
    ("banana", "-s 30 -L 1 -A 100 -k 8 -B 1", "LL-SVM: the paper's SGD (10 epochs)"),
    ("banana", "-s 31 -L 3 -A 200 -u 1 -f 1000 -B 1 -P 10 -T 100000 -E 30",
     "LLC-JO: k* coding, anchors learned by SGD"),
    ("banana", "-s 33 -L 3 -A 200 -u 1 -f 1000 -B 1 -P 10 -T 100000 -E 30",
     "LLC-JO, tail-averaged joint SGD"),
    ("ijcnn1", "-s 1 -B 1", "linear SVM, L2 loss (dual CD)"),
    ("ijcnn1", "-s 1 -L 1 -A 100 -k 8 -B 1", "LL-SVM, dual CD"),
    ("w8a", "-s 1 -B 1", "linear SVM, L2 loss (dual CD)"),
    ("usps", "-s 1 -B 1", "linear SVM, one-vs-rest, 10 classes"),
    ("usps", "-s 1 -L 1 -A 100 -k 8 -B 1", "LL-SVM, one-vs-rest, 10 classes"),
    ("usps", "-s 1 -L 2 -a 2 -A 200 -k 45 -u 0.1 -K 1 -c 10 -B 1 -m 2",
     "LL-SVM, Gaussian coding (docs/llsvm.md's setting)"),
    ("usps", "-s 1 -L 4 -A 40 -c 10 -B 1", "anchor planes: G-OCC, LIB-LLSVM"),
    ("letter", "-s 1 -L 2 -a 0 -A 400 -k 20 -u 0.1 -c 1 -B 1 -m 2",
     "LL-SVM, 26 classes (linear SVM: ~70 %)"),
    ("letter", "-s 30 -L 1 -A 100 -k 8 -B 1 -u 1 -c 1 -T 10000 -m 2",
     "LL-SVM: the paper's SGD, 10 epochs (last iterate)"),
    ("letter", "-s 32 -L 1 -A 100 -k 8 -B 1 -u 1 -c 1 -T 10000 -m 2",
     "the same, tail-averaged SGD"),
    ("letter", "-s 41 -k 32 -Q 4 -l 16 -Z 0 -z 0.5 -y 1 -W 5",
     "affine k q-flats, the mean of 5 restarts: KQMetricsClassifier() on 26 classes"),
]


def _available(name):
    try:
        datasets.dataset_path(name, "train")
        datasets.dataset_path(name, "test")
        return True
    except FileNotFoundError:
        return False


def run(runs=RUNS, out=print):
    out(f"{'data':8s} {'options':60s} {'read s':>7s} {'train s':>8s} {'predict s':>9s} "
        f"{'test acc %':>10s}  model")
    results = []
    for name, options, what in runs:
        if not _available(name):
            out(f"{name:8s} (not found: set LCODING_DATA to the shared data folder)")
            continue
        t0 = time.perf_counter()
        y, x = svm_read_problem(str(datasets.dataset_path(name, "train")), return_scipy=True)
        ty, tx = svm_read_problem(str(datasets.dataset_path(name, "test")), return_scipy=True)
        t1 = time.perf_counter()
        m = train(y, x, options + " -q")
        t2 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, f"{name}.model")
            save_model(path, m)
            m = load_model(path)
        t3 = time.perf_counter()
        _, (acc, _, _), _ = predict(ty, tx, m, "-q")
        t4 = time.perf_counter()
        out(f"{name:8s} {options:60s} {t1 - t0:7.2f} {t2 - t1:8.2f} {t4 - t3:9.3f} {acc:10.2f}  {what}")
        results.append({"data": name, "options": options, "accuracy": acc,
                        "train_seconds": t2 - t1, "predict_seconds": t4 - t3})
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    where = datasets.data_dir()
    print(f"lcoding demo -- data from {where if where else 'the packaged banana set'}")
    run()


if __name__ == "__main__":
    main()
