"""Shared fixtures: the shared data sets (cached per session) and helpers to run
liblinear-official, the reference implementation, side by side with lcoding."""
from __future__ import annotations

import contextlib
import ctypes
import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

import lcoding
from lcoding.io import datasets

# the folder holding the lcoding this test run imports (site-packages after `pip
# install .`, the repository after an in-place build): children import the same build
LCODING_HOME = pathlib.Path(lcoding.__file__).resolve().parents[1]



MASK64 = (1 << 64) - 1


def splitmix64(state):
    """lcoding/core/_rng.pxd's generator in Python (``state``: a one-item list)."""
    state[0] = (state[0] + 0x9E3779B97F4A7C15) & MASK64
    z = state[0]
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)

@contextlib.contextmanager
def no_hang(seconds: float, what: str = "example"):
    """Fail (instead of hanging the suite) when the block runs longer than ``seconds``
    (the fuzz tests: one example that runs too long is a hang)."""
    def expired(signum, frame):
        raise AssertionError(f"{what} still running after {seconds} s: a hang")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def child_env() -> dict:
    """The environment of a child interpreter that imports the same lcoding."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(LCODING_HOME) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_python(code: str, *args, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter that imports the same lcoding."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                          cwd=str(LCODING_HOME), env=child_env(), capture_output=True,
                          text=True, timeout=timeout)


def _require_data(name):
    try:
        datasets.dataset_path(name, "train")
        datasets.dataset_path(name, "test")
    except FileNotFoundError as err:  # pragma: no cover - CI always has the data
        pytest.skip(str(err))


_CACHE: dict = {}


@pytest.fixture(scope="session")
def shared_data():
    """``shared_data(name) -> (y, X csr, ty, tX csr)`` with the MANIFEST's n_features."""
    def load(name):
        if name not in _CACHE:
            _require_data(name)
            y, rows = datasets.load(name, "train")
            ty, trows = datasets.load(name, "test")
            n = max(rows.n_features, trows.n_features)
            X = sp.csr_matrix((rows.data, rows.indices, rows.indptr), shape=(rows.n_rows, n))
            tX = sp.csr_matrix((trows.data, trows.indices, trows.indptr), shape=(trows.n_rows, n))
            _CACHE[name] = (y, X, ty, tX)
        return _CACHE[name]
    return load


_libc = ctypes.CDLL(None)


@pytest.fixture(autouse=True)
def _seed_c_rand():
    """liblinear-official draws its sample orders from the C library's rand(), whose
    state carries over from test to test: seed it before every test so that a
    reference run does not depend on which tests ran before it."""
    _libc.srand(1)


def flush_c_stdout():
    """Flush C stdio so that output printed by liblinear-official's C code reaches
    pytest's fd capture."""
    _libc.fflush(None)


def squared_hinge_primal(w, f, y_pm, C) -> float:
    """LIBLINEAR's -s 1 / -s 2 primal objective 1/2 |w|^2 + C sum max(0, 1 - y f)^2 of
    weights ``w`` whose decision values are ``f`` (the bias regularised with w)."""
    return 0.5 * float(w @ w) + C * float((np.maximum(0.0, 1.0 - y_pm * f) ** 2).sum())


def objectives_from_output(text: str) -> list[float]:
    """The 'Objective value = ...' lines printed by LIBLINEAR's dual solvers."""
    return [float(v) for v in re.findall(r"Objective value = (\S+)", text)]


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
