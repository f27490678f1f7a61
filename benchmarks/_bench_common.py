"""Helpers shared by the benchmark scripts (run as ``python benchmarks/bench_*.py``,
so this directory is on ``sys.path``)."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np


def load_avg() -> float:
    """The 1-minute load average, recorded next to every timing."""
    return round(os.getloadavg()[0], 2)


class Clock:
    """Wall and process-CPU seconds of a block."""

    def __enter__(self):
        self.w, self.c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.w
        self.cpu = time.process_time() - self.c


def timed_fit_predict(fit, predict):
    """The final model of a peer, timed: ``fit()`` trains, ``predict(model)`` predicts
    the test set.  Returns ``(model, prediction, train Clock, predict Clock,
    [load average before, after])``."""
    before = load_avg()
    with Clock() as ct:
        model = fit()
    with Clock() as cp:
        out = predict(model)
    return model, out, ct, cp, [before, load_avg()]


def cv_splits(n, folds, seed=0):
    """``folds`` (train, validation) sorted index pairs of a seeded permutation of
    ``range(n)``: every row is validated exactly once."""
    parts = np.array_split(np.random.default_rng(seed).permutation(n), folds)
    return [(np.sort(np.concatenate(parts[:f] + parts[f + 1:])), np.sort(parts[f]))
            for f in range(folds)]


def read_records(path):
    """Newest record per (dataset, method) of the JSON-lines file."""
    latest = {}
    if Path(path).exists():
        for line in Path(path).read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                latest[(rec["dataset"], rec["method"])] = rec
    return latest


def unit_pixels(rows):
    """LIBSVM's USPS values (``datasets.load("usps_libsvm")``, on [-1, 1]) mapped to [0, 1],
    the range of the shared usps that the LL-SVM settings were validated on."""
    from lcoding.core.rows import rows_from_dense
    return rows_from_dense((rows.to_csr().toarray() + 1.0) / 2.0)
