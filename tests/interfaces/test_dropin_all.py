"""The drop-in interface (``lcoding.liblinearutil``) and the CLI across every
training method of the option table.

For each option string, on a small synthetic problem:

1. ``train`` with x as a list of dicts, a dense ndarray, a scipy CSR matrix, and
   ``train(problem(y, x), parameter(opts))`` give identical decision values;
2. ``predict(..., '-q')`` works and ``-b 1`` works exactly for the logistic
   regression solvers (0, 6, 7), else fails with LIBLINEAR's TypeError;
3. ``save_model`` / ``load_model`` round trips (text file, same labels and values);
4. ``lcoding-train`` + ``lcoding-predict`` on a LIBSVM file give the same model
   file and the same predictions (and the same probabilities under ``-b 1``);
5. ``-v 3`` returns a number through the API and the CLI.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from lcoding.core.rows import as_rows
from lcoding.cli import predict_main, train_main
from lcoding.liblinearutil import load_model, parameter, predict, problem, save_model, train

PROB_SOLVERS = {0, 6, 7}


# ------------------------------------------------------------------ data
def _blobs(n=150, d=4, k=2, seed=0, nonneg=False):
    r = np.random.default_rng(seed)
    c = r.integers(0, k, n)
    X = r.normal(size=(n, d)) + 3.0 * np.eye(k, d)[c]
    if nonneg:
        X = np.abs(X)
    X[r.random((n, d)) < 0.15] = 0.0          # some sparsity for the CSR / dict forms
    y = np.where(c == 0, 1.0, -1.0) if k == 2 else (c + 1).astype(float)
    return y, X


def _regression(n=150, d=4, seed=1):
    r = np.random.default_rng(seed)
    X = r.normal(size=(n, d))
    X[r.random((n, d)) < 0.15] = 0.0
    return X @ np.arange(1.0, d + 1) + 0.1 * r.normal(size=n), X


def _images(n=120, k=2, seed=2):
    """4x4 images: a horizontal bar (class 1), a vertical bar (2), the diagonal (3)."""
    r = np.random.default_rng(seed)
    c = r.integers(0, k, n)
    X = 0.3 * r.random((n, 16))
    for i in range(n):
        img = X[i].reshape(4, 4)
        if c[i] == 0:
            img[r.integers(0, 4), :] += 1.0
        elif c[i] == 1:
            img[:, r.integers(0, 4)] += 1.0
        else:
            img[np.arange(4), np.arange(4)] += 1.0
    return (c + 1).astype(float), X


DATA = {
    "bin": lambda: _blobs(k=2),
    "multi": lambda: _blobs(k=3),
    "bin+": lambda: _blobs(k=2, nonneg=True),
    "multi+": lambda: _blobs(k=3, nonneg=True),
    "multi8": lambda: _blobs(k=3, d=8),
    "bin24": lambda: _blobs(n=120, k=2, d=24),
    "reg": _regression,
    "img2": lambda: _images(k=2),
    "img3": lambda: _images(k=3),
}
_CACHE: dict = {}


def _data(kind):
    if kind not in _CACHE:
        _CACHE[kind] = DATA[kind]()
    return _CACHE[kind]


# ------------------------------------------------------------------ option strings
def _both(*opts):
    return [(o, k) for o in opts for k in ("bin", "multi")]


CASES = (
    # LIBLINEAR's own solvers
    _both("-s 0", "-s 0 -B 1", "-s 1", "-s 2 -B 1 -R", "-s 3 -B 1", "-s 4", "-s 5",
          "-s 6 -B 1", "-s 7")
    + [("-s 1 -w1 2 -w3 0.5", "multi"), ("-s 0 -m 2", "multi")]
    + [("-s 11", "reg"), ("-s 12", "reg"), ("-s 13 -B 1", "reg"),
       ("-s 21", "bin"), ("-s 21 -n 0.3", "multi")]
    # SGD, linear and locally linear (LL-SVM codings -L 1, 2, 3, 6)
    + _both("-s 30", "-s 30 -L 0 -B 1",
            "-s 1 -L 1 -A 8 -k 3 -B 1", "-s 3 -L 2 -A 8 -k 3 -u 0.5", "-s 1 -L 3 -A 8 -u 2 -B 1",
            "-s 3 -L 6 -A 8 -k 3", "-s 30 -L 1 -A 8 -k 3 -B 1 -T 1000", "-s 30 -L 3 -A 6",
            "-s 32 -L 2 -A 8 -k 3 -B 1 -E 3", "-s 32 -B 1")
    + [("-s 1 -L 1 -A 8 -k 3 -a 2 -M 20", "multi"), ("-s 1 -L 1 -A 8 -k 3 -m 2", "multi")]
    # additive kernel maps before the local model
    + [("-s 1 -L 1 -A 8 -k 3 -K 1", "bin+"), ("-s 3 -L 2 -A 8 -k 3 -K 2 -O 1 -B 1", "multi+"),
       ("-s 30 -L 6 -A 8 -k 3 -K 3 -O 2", "multi+")]
    # OCC anchor planes -L 4 / 5 with -u 0, 1, 2, 3
    + _both("-s 1 -L 4 -A 2", "-s 3 -L 5 -A 2 -B 1", "-s 1 -L 4 -A 2 -u 0",
            "-s 2 -L 5 -A 2 -u 2 -B 1", "-s 1 -L 4 -A 3 -u 3 -B 1", "-s 30 -L 4 -A 2 -B 1",
            "-s 32 -L 5 -A 2 -B 1")
    + [("-s 3 -L 5 -A 2 -u 2", "multi"), ("-s 3 -L 5 -A 2 -u 3 -B 1", "multi"),
       ("-s 30 -L 5 -A 2 -u 0", "multi"), ("-s 1 -L 5 -A 2 -m 2", "multi")]
    # joint SGD of weights and anchors
    + _both("-s 31 -L 2 -A 8 -k 3 -B 1 -E 2 -c 10 -T 1000 -f 10",
            "-s 31 -L 3 -A 8 -u 2 -B 1 -E 2 -c 10 -T 1000 -f 10 -j 1",
            "-s 33 -L 2 -A 8 -k 3 -B 1 -E 3 -c 10 -T 1000 -f 10")
    + [("-s 31 -L 3 -A 8 -E 2 -T 1000 -f 1 -j 2", "multi")]
    # k q-metrics / k q-flats
    + _both("-s 40 -k 2 -Q 2 -E 3", "-s 41 -k 2 -Q 2", "-s 41 -k 1 -Q 2 -y 1")
    + [("-s 40 -k 1 -Q 2 -E 2 -W 2 -G 1 -F 0", "multi"),
       ("-s 40 -k 1 -Q 2 -E 2 -l 3 -z 0.5 -G 2 -F 1", "multi"),
       ("-s 40 -k 1 -Q 2 -E 2 -K 1", "multi+"), ("-s 41 -k 1 -Q 2 -W 3 -K 2 -O 1", "multi+"),
       ("-s 41 -x 1 -Z 0", "multi8"), ("-s 40 -x 1 -E 1", "bin24")]
    # LIBSVM kernels through the kernel PCA map, then a linear solver
    + [("-s 1 -t 2 -X 40", "img2"), ("-s 3 -t 1 -d 2 -X 40 -B 1", "img3"),
       ("-s 0 -t 2 -X 40", "img2"), ("-s 0 -t 2 -X 40", "img3"), ("-s 2 -t 3 -g 0.1 -X 40", "img3"),
       ("-s 1 -t 0", "img2"), ("-s 4 -t 2 -X 40", "img3"), ("-s 7 -t 2 -X 30", "img3"),
       ("-s 6 -t 2 -X 30", "img2"), ("-s 5 -t 2 -X 30", "img3"), ("-s 30 -t 2 -X 30", "img3"),
       ("-s 21 -t 2 -X 40", "img2"), ("-s 11 -t 2 -X 30", "reg"), ("-s 13 -t 2 -X 30 -B 1", "reg")]
    # invariances: IHKPCA (-H 1, 4), ISVM (-H 2), VSV (-H 3), image tangents (-J)
    + [("-s 3 -H 2 -t 2", "img3"), ("-s 1 -H 2 -t 2 -J 3 -N 4 -Y 0.5", "img2"),
       ("-s 3 -H 3 -t 2 -J 1 -N 4", "img3"), ("-s 1 -H 1", "img2"),
       ("-s 1 -H 1 -J 3 -N 4 -Y 0.5", "img3"), ("-s 0 -H 1 -J 3 -Y 0.5", "img2"),
       ("-s 3 -H 1 -t 2 -J 2 -N 4 -Y 0.5 -X 40", "img3"),
       ("-s 1 -H 4 -t 2 -J 1 -N 4 -Y 0.3 -X 20", "img2"), ("-s 3 -H 2 -t 0 -J 1 -Y 0.3", "img3"),
       ("-s 1 -H 3 -t 1 -d 2 -J 3", "img2"), ("-s 21 -H 1 -t 2 -X 20", "img2"),
       ("-s 11 -H 1", "reg")]
)


def _write_libsvm(path, y, X):
    with open(path, "w") as fh:
        for yi, row in zip(y, X):
            fh.write("%.17g" % yi + "".join(" %d:%.17g" % (j + 1, v)
                                            for j, v in enumerate(row) if v != 0) + "\n")


def _dicts(X):
    return [{j + 1: float(v) for j, v in enumerate(row) if v != 0} for row in X]


def _solver(opts):
    tok = opts.split()
    return int(tok[tok.index("-s") + 1])


# the image-shaped kernel and invariance cases and the k q selection cases take ~0.3-1.7 s
# each: the full suite runs them, the quick subset keeps one case of every other method
_SLOW_KINDS = ("img2", "img3", "multi8", "bin24")


@pytest.mark.parametrize("opts,kind", [
    pytest.param(o, k, id=f"{o} [{k}]", marks=[pytest.mark.slow] if k in _SLOW_KINDS else [])
    for o, k in CASES])
def test_dropin(opts, kind, tmp_path, capsys):
    y, X = _data(kind)
    q = opts + " -q"
    rows = as_rows(X)

    # 1. every input form, and problem + parameter, give the same model
    models = [train(list(y), _dicts(X), q), train(y, X, q), train(y, sp.csr_matrix(X), q),
              train(problem(y, X), parameter(q))]
    dec = models[0]._core.decision_values(rows)
    for m in models[1:]:
        np.testing.assert_array_equal(m._core.decision_values(rows), dec)
    m = models[1]

    # 2. predict; -b 1 only for logistic regression
    labels, (acc, mse, scc), values = predict(y, X, m, "-q")
    assert len(labels) == len(values) == y.shape[0]
    if not m.is_regression_model() and not m.is_oneclass_model():
        assert acc > 50.0, f"{opts}: accuracy {acc}"
    prob = _solver(opts) in PROB_SOLVERS
    assert m.is_probability_model() == prob
    if prob:
        p_labels, _, probs = predict(y, X, m, "-b 1 -q")
        assert p_labels == labels
        np.testing.assert_allclose(np.sum(probs, axis=1), 1.0)
    else:
        with pytest.raises(TypeError, match="only supported for logistic regression"):
            predict(y, X, m, "-b 1 -q")

    # 3. save / load
    path = tmp_path / "api.model"
    save_model(str(path), m)
    text = path.read_bytes()
    text.decode("ascii")
    m2 = load_model(str(path))
    labels2, _, values2 = predict(y, X, m2, "-q")
    assert labels2 == labels
    np.testing.assert_array_equal(np.asarray(values2), np.asarray(values))

    # 4. the CLI: same model file, same predictions
    data_file = str(tmp_path / "data.txt")
    _write_libsvm(data_file, y, X)
    cli_model = str(tmp_path / "cli.model")
    assert train_main(q.split() + [data_file, cli_model]) == 0, capsys.readouterr().err
    assert open(cli_model, "rb").read() == text
    out = str(tmp_path / "out.txt")
    assert predict_main(["-q", data_file, cli_model, out]) == 0, capsys.readouterr().err
    assert [float(v) for v in open(out).read().split()] == [float(v) for v in labels]
    if prob:
        assert predict_main(["-b", "1", "-q", data_file, cli_model, out]) == 0
        lines = open(out).read().splitlines()
        assert lines[0] == "labels" + "".join(f" {v}" for v in m.get_labels())
        assert lines[1:] == [("%g" % lab) + "".join(" %g" % v for v in row)
                             for lab, row in zip(labels, probs)]
    else:
        assert predict_main(["-b", "1", "-q", data_file, cli_model, out]) == 1
        assert "only supported for logistic regression" in capsys.readouterr().err

    # 5. cross validation, API and CLI
    capsys.readouterr()
    score = train(y, X, q + " -v 3")
    assert isinstance(score, float) and math.isfinite(score)
    if not m.is_regression_model():
        assert 0.0 <= score <= 100.0
    assert train_main((q + " -v 3").split() + [data_file]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    key = "Mean squared error" if m.is_regression_model() else "Accuracy"
    assert f"Cross Validation {key} = %g" % score in printed


# ------------------------------------------------------------------ -C parameter search
@pytest.mark.parametrize("opts,kind", [("-C -s 0", "multi"), ("-C -s 2 -B 1", "bin"),
                                       ("-C", "multi"), ("-C -s 2 -v 3", "bin"),
                                       ("-C -s 11", "reg")])
@pytest.mark.slow
def test_parameter_search(opts, kind, tmp_path, capsys):
    y, X = _data(kind)
    q = opts + " -q"
    results = [train(list(y), _dicts(X), q), train(y, X, q), train(y, sp.csr_matrix(X), q),
               train(problem(y, X), parameter(q))]
    assert all(r == results[0] for r in results)
    best_C, best_p, score = results[0]
    assert best_C > 0 and math.isfinite(score)
    assert (best_p >= 0) == ("-s 11" in opts)
    api_lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("Best C")]
    data_file = str(tmp_path / "data.txt")
    _write_libsvm(data_file, y, X)
    assert train_main(q.split() + [data_file]) == 0
    cli_lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("Best C")]
    assert cli_lines == api_lines[:1]


# ------------------------------------------------------------------ option combinations that
# were silently ignored or crashed, now refused with a message naming the option
@pytest.mark.parametrize("opts,kind,match", [
    # -C searches what the method trains, and nothing it cannot
    ("-C -s 5 -L 1 -A 8 -k 3", "bin", "locally linear training supports"),
    ("-C -s 2 -L 5 -A 2 -u 1", "multi", "OCC training supports"),
    ("-C -s 2 -J 1 -N 2", "bin", "-J"),
    ("-C -s 0 -K 1", "bin+", "kernel map"),
    ("-C -s 2 -t 2 -L 2", "bin", "no local coding"),
    # -K needs a local coding or -s 40/41 (the linear solvers ignored it)
    ("-s 1 -K 1", "bin+", "-K 1"),
    ("-s 0 -K 2", "multi+", "-K 2"),
    ("-s 30 -K 1", "bin+", "-K 1"),
    # -s 31 without -L 2/3 (was a KeyError)
    ("-s 31", "bin", "-s 31 needs -L 2"),
    ("-s 31 -L 0 -A 4", "multi", "-s 31 needs -L 2"),
    # -s 31/40/41 after a kernel map (was a TypeError from an internal guard)
    ("-s 40 -t 2 -k 1 -Q 2", "multi", "-s 40 cannot follow a kernel map"),
    ("-s 41 -H 1 -k 1 -Q 2", "multi", "-s 41 cannot follow a kernel map"),
    ("-s 31 -t 2 -A 4", "bin", "-s 31 cannot follow a kernel map"),
    # existing clear errors
    ("-s 1 -J 1 -N 2", "bin", "only used by -H"),
    ("-s 4 -H 2 -t 2", "multi", "SMO"),
    ("-s 0 -L 1", "bin", "locally linear training supports"),
    ("-s 31 -L 1", "bin", "-s 31 needs -L 2"),
])
def test_refused_combinations(opts, kind, match, tmp_path, capsys):
    y, X = _data(kind)
    with pytest.raises(ValueError, match=match):
        train(y, X, opts + " -q")
    with pytest.raises(ValueError, match=match):
        train(problem(y, X), parameter(opts + " -q"))
    data_file = str(tmp_path / "data.txt")
    _write_libsvm(data_file, y, X)
    capsys.readouterr()
    assert train_main((opts + " -q").split() + [data_file, str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and "Traceback" not in err


def test_cli_reports_divergence_as_an_error(tmp_path, capsys):
    """A diverged run (FloatingPointError) is an ``ERROR:`` line and exit code 1,
    not a traceback."""
    y, X = _blobs(n=60)
    data_file = str(tmp_path / "data.txt")
    _write_libsvm(data_file, y, 100.0 * X)
    opts = "-s 40 -k 1 -Q 2 -E 2 -D 1e6 -Z 0 -q"
    with pytest.raises(FloatingPointError):
        train(y, 100.0 * X, opts)
    capsys.readouterr()
    assert train_main(opts.split() + [data_file, str(tmp_path / "m")]) == 1
    assert capsys.readouterr().err.startswith("ERROR: k q-metrics diverged")
    assert train_main(opts.split() + ["-v", "3", data_file]) == 1
    assert capsys.readouterr().err.startswith("ERROR: k q-metrics diverged")


# ------------------------------------------------------------------ -u left out
def test_a_left_out_width_comes_from_the_rows(tmp_path, capsys):
    """-L 2 (Gaussian beta) and -L 3 (k* mu) without -u: the width is the estimators'
    beta='scale' of the rows (lcoding.methods.defaults.scale_beta), the same through
    train and the CLI, and it moves with the scale of the data (rows x 10: width /
    100); the option string with that -u trains the same model file; a given -u is
    kept, and the other codings keep -u's default 1."""
    from lcoding.methods.defaults import scale_beta
    y, X = _blobs(n=200, k=3, seed=4)
    rows = as_rows(X)
    m = train(y, X, "-s 1 -L 2 -A 12 -k 3 -q")
    beta = m._core.coding.param
    assert beta == scale_beta(rows, 12, 3, 1) and beta != 1.0
    wide = train(y, 10.0 * X, "-s 1 -L 2 -A 12 -k 3 -q")._core.coding.param
    assert wide == pytest.approx(beta / 100.0, rel=1e-9)
    assert train(y, X, "-s 31 -L 3 -A 12 -E 2 -q")._core.coding.param == \
        scale_beta(rows, 12, 8, 1)
    assert train(y, X, "-s 1 -L 2 -A 12 -k 3 -u 0.7 -q")._core.coding.param == 0.7
    assert train(y, X, "-s 1 -L 1 -A 12 -k 3 -q")._core.coding.param == 1.0
    # the resolved width is an option like any other: the same model file
    save_model(str(tmp_path / "left_out.model"), m)
    save_model(str(tmp_path / "given.model"), train(y, X, f"-s 1 -L 2 -A 12 -k 3 -u {beta!r} -q"))
    assert (tmp_path / "left_out.model").read_bytes() == (tmp_path / "given.model").read_bytes()
    # the CLI resolves it the same way
    data_file = str(tmp_path / "data.txt")
    _write_libsvm(data_file, y, X)
    cli_model = str(tmp_path / "cli.model")
    assert train_main(["-s", "1", "-L", "2", "-A", "12", "-k", "3", "-q", data_file,
                       cli_model]) == 0, capsys.readouterr().err
    assert open(cli_model, "rb").read() == (tmp_path / "left_out.model").read_bytes()
