"""The drop-in API against liblinear-official: model files both ways, accessors,
label conventions, input types, a legacy script, bad input."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

import lcoding.liblinearutil as lc
from lcoding.io.model_files import ModelFileError

ll = pytest.importorskip("liblinear.liblinearutil")


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 6))
    X[rng.random(X.shape) < 0.3] = 0.0
    y2 = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, 1.0, -1.0)
    y3 = np.digitize(X[:, 0] - X[:, 2], [-0.6, 0.6]) + 1.0
    yr = X @ np.arange(1, 7) + 0.1 * rng.normal(size=240)
    return sp.csr_matrix(X), y2, y3, yr


# every solver type LIBLINEAR writes: binary, multi-class, bias, class weights
REFERENCE_MODELS = [
    ("y2", "-s 0"), ("y3", "-s 0 -B 1 -w2 3"), ("y2", "-s 1 -B 2.5"), ("y3", "-s 2"),
    ("y3", "-s 3 -B 1"), ("y2", "-s 4"), ("y3", "-s 4 -B 1"), ("y2", "-s 5 -B 1 -w-1 2"),
    ("y3", "-s 6"), ("y2", "-s 7 -B 1"), ("yr", "-s 11 -B 1"), ("yr", "-s 12"), ("yr", "-s 13"),
    ("y2", "-s 21"), ("y2", "-s 2 -B 1 -R"),
]


@pytest.mark.parametrize("target,options", REFERENCE_MODELS)
def test_liblinear_model_files_load_and_predict_identically(small, target, options, tmp_path):
    X, y2, y3, yr = small
    y = {"y2": y2, "y3": y3, "yr": yr}[target]
    ref = ll.train(y, X, options + " -q")
    path = str(tmp_path / "ref.model")
    ll.save_model(path, ref)
    ours = lc.load_model(path)
    assert ours.get_labels() == ref.get_labels()
    assert ours.get_nr_class() == ref.get_nr_class()
    assert ours.get_nr_feature() == ref.get_nr_feature()
    assert ours.is_probability_model() == ref.is_probability_model()
    assert ours.is_regression_model() == ref.is_regression_model()
    assert ours.is_oneclass_model() == ref.is_oneclass_model()
    for opt in ["-q"] + (["-b 1 -q"] if ref.is_probability_model() else []):
        rl, racc, rv = ll.predict(y, X, ref, opt)
        ol, oacc, ov = lc.predict(y, X, ours, opt)
        assert ol == rl
        np.testing.assert_allclose(np.array(ov), np.array(rv), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(oacc, racc, rtol=1e-12)
    for label_idx in range(max(1, ref.get_nr_class())):
        rw, rb = ref.get_decfun(label_idx)
        ow, ob = ours.get_decfun(label_idx)
        np.testing.assert_allclose(ow, rw, rtol=1e-15)
        assert ob == pytest.approx(rb, rel=1e-15)
    # save again: byte-identical file, and it loads back in liblinear-official
    again = str(tmp_path / "again.model")
    lc.save_model(again, ours)
    assert open(again).read() == open(path).read()


# every solver lcoding trains: its model file loads in liblinear-official and predicts
# identically there (labels, decision values, probabilities)
OUR_MODELS = [
    ("y2", "-s 1"), ("y3", "-s 3 -B 1"), ("y2", "-s 1 -B 1 -w1 2"), ("y3", "-s 3 -c 0.5"),
    ("y2", "-s 0"), ("y3", "-s 0 -B 1"), ("y3", "-s 2"), ("y2", "-s 2 -B 1 -R"),
    ("y2", "-s 4"), ("y3", "-s 4 -B 1"), ("y2", "-s 5 -B 1"), ("y3", "-s 6"), ("y2", "-s 7 -B 1"),
    ("yr", "-s 11 -B 1"), ("yr", "-s 12"), ("yr", "-s 13 -B 1"), ("y2", "-s 21"),
]


@pytest.mark.parametrize("target,options", OUR_MODELS)
def test_lcoding_model_files_load_in_liblinear(small, target, options, tmp_path):
    X, y2, y3, yr = small
    y = {"y2": y2, "y3": y3, "yr": yr}[target]
    ours = lc.train(y, X, options + " -q")
    path = str(tmp_path / "ours.model")
    lc.save_model(path, ours)
    ref = ll.load_model(path)
    assert ref is not None
    for opt in ["-q"] + (["-b 1 -q"] if ref.is_probability_model() else []):
        rl, _, rv = ll.predict(y, X, ref, opt)
        ol, _, ov = lc.predict(y, X, ours, opt)
        assert rl == ol
        np.testing.assert_allclose(np.array(ov), np.array(rv), rtol=1e-12, atol=1e-14)


def test_label_order_swap_and_decision_sign(small):
    X, y2, y3, _ = small
    y = y2.copy()
    y[0] = -1.0  # -1 appears first: LIBLINEAR swaps so that +1 is label[0]
    for yy in (y, -y, y3, np.where(y2 > 0, 7.0, 3.0)):
        ref = ll.train(yy, X, "-q")
        ours = lc.train(yy, X, "-q")
        assert ours.get_labels() == ref.get_labels()
        rl, _, rv = ll.predict(yy, X, ref, "-q")
        ol, _, ov = lc.predict(yy, X, ours, "-q")
        assert (np.array(rl) == np.array(ol)).mean() > 0.99
        assert (np.sign(np.array(rv)) == np.sign(np.array(ov))).mean() > 0.99


def test_unseen_features_are_dropped_at_predict(small):
    X, y2, _, _ = small
    m = lc.train(y2, X, "-q -B 1")
    wide = sp.hstack([X, sp.random(X.shape[0], 5, density=0.5, random_state=1)]).tocsr()
    dicts = [{j + 1: v for j, v in zip(r.indices, r.data)} for r in wide]
    assert lc.predict(y2, wide, m, "-q")[2] == lc.predict(y2, X, m, "-q")[2]
    assert lc.predict(y2, dicts, m, "-q")[2] == lc.predict(y2, X, m, "-q")[2]
    assert lc.predict(y2, wide.toarray(), m, "-q")[2] == lc.predict(y2, X, m, "-q")[2]


def test_all_input_types_give_the_same_model(small):
    X, y2, _, _ = small
    dense = X.toarray()
    dicts = [{j + 1: v for j, v in zip(r.indices, r.data)} for r in X]
    lists = dense.tolist()
    inputs = [X, sp.csr_array(X), X.tocsc(), X.tocoo(), sp.coo_array(X), dense, dicts, lists,
              tuple(dicts)]
    weights = [lc.train(list(y2), x, "-q -B 1").get_weights() for x in inputs]
    for w in weights[1:]:
        np.testing.assert_array_equal(w, weights[0])
    prob = lc.problem(y2, dicts)
    assert (prob.l, prob.n) == (X.shape[0], X.shape[1])
    np.testing.assert_array_equal(lc.train(prob, lc.parameter("-q -B 1")).get_weights(), weights[0])


def test_train_overwrites_problem_bias(small):
    X, y2, _, _ = small
    prob = lc.problem(y2, X, bias=1)
    assert prob.n == X.shape[1] + 1
    m = lc.train(prob, "-q")
    assert m.bias == -1 and m.get_weights().shape == (X.shape[1], 1)


def test_weights_reachable_as_numpy_and_ctypes(small):
    X, y2, y3, _ = small
    m = lc.train(y3, X, "-q -B 1")
    flat = np.ctypeslib.as_array(m.w, (m.get_weights().size,))
    np.testing.assert_array_equal(flat, m.get_weights().ravel())
    assert [m.label[i] for i in range(3)] == m.get_labels()


def test_cross_validation_and_its_return(small, capsys):
    X, y2, y3, yr = small
    acc = lc.train(y3, X, "-v 5 -q")
    assert isinstance(acc, float) and 50 < acc <= 100
    assert "Cross Validation Accuracy" in capsys.readouterr().out
    ref = ll.train(y3, X, "-v 5 -q")
    assert abs(acc - ref) < 5
    # the same seed gives the same folds and the same number
    assert lc.train(y3, X, "-v 5 -q -S 3") == lc.train(y3, X, "-v 5 -q -S 3")


def test_evaluations_match(small):
    rng = np.random.default_rng(2)
    ty, pv = rng.integers(0, 3, 50).astype(float), rng.integers(0, 3, 50).astype(float)
    np.testing.assert_allclose(lc.evaluations(ty, pv), ll.evaluations(ty, pv))
    np.testing.assert_allclose(lc.evaluations(list(ty), list(pv)), ll.evaluations(list(ty), list(pv)))
    with pytest.raises(ValueError, match="len"):
        lc.evaluations([1, 2], [1])


def test_scale_helpers_match(small):
    X = small[0]
    ref = ll.csr_find_scale_param(X, lower=0)
    ours = lc.csr_find_scale_param(X, lower=0)
    np.testing.assert_allclose(ours["coef"], ref["coef"])
    np.testing.assert_allclose(ours["offset"], ref["offset"])
    np.testing.assert_allclose(lc.csr_scale(X, ours).toarray(), ll.csr_scale(X, ref).toarray())
    # the mismatched-dimension path (broken upstream) pads with zeros
    wider = sp.hstack([X, sp.csr_matrix(np.ones((X.shape[0], 2)))]).tocsr()
    scaled = lc.csr_scale(wider, ours)
    assert scaled.shape == wider.shape and scaled[:, -2:].nnz == 0


LEGACY_SCRIPT = """
import numpy as np
{imports}
y, x = svm_read_problem({train!r})
ty, tx = svm_read_problem({test!r})
m = train(y, x, '-s 1 -c 4 -B 1 -q')
acc_cv = train(y, x, '-s 3 -v 3 -q')
p_labels, p_acc, p_vals = predict(ty, tx, m, '-q')
ACC, MSE, SCC = evaluations(ty, p_labels)
save_model({model!r}, m)
m2 = load_model({model!r})
p2, _, _ = predict(ty, tx, m2)
assert p2 == p_labels
np.save({out!r}, np.array(p_labels))
print("RESULT", ACC, acc_cv, m2.get_nr_class(), m2.get_labels(), len(m2.get_decfun()[0]))
"""


@pytest.mark.slow
def test_legacy_script_runs_with_only_the_import_changed(tmp_path, shared_data):
    from lcoding.io import datasets
    shared_data("w8a")  # skip cleanly when the data is missing
    import bz2
    files = {}
    for split in ("train", "test"):
        plain = tmp_path / f"w8a.{split}"
        # liblinear-official cannot read bz2: give both the same plain files (first 6000 rows)
        with bz2.open(datasets.dataset_path("w8a", split), "rt") as src:
            plain.write_text("".join(line for _, line in zip(range(6000), src)))
        files[split] = str(plain)
    import lcoding
    # the subprocesses import the same lcoding as this test (installed or in-place build)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(lcoding.__file__)))
    base_env = dict(os.environ, PYTHONPATH=package_root)
    results = {}
    for name, imports in [("ref", "from liblinear.liblinearutil import *"),
                          ("ours", "from lcoding.liblinearutil import *")]:
        script = LEGACY_SCRIPT.format(imports=imports, train=files["train"], test=files["test"],
                                      model=str(tmp_path / f"{name}.model"),
                                      out=str(tmp_path / f"{name}.npy"))
        # cwd outside the source tree, so the subprocess imports the installed package
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=300, cwd=tmp_path, env=base_env)
        assert proc.returncode == 0, proc.stderr
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][0]
        results[name] = line.split(None, 3)
    ref, ours = results["ref"], results["ours"]
    assert abs(float(ref[1]) - float(ours[1])) <= 0.1          # test accuracy
    assert abs(float(ref[2]) - float(ours[2])) <= 1.0          # 3-fold CV accuracy
    assert ref[3] == ours[3]                                    # classes, labels, n
    agree = (np.load(tmp_path / "ref.npy") == np.load(tmp_path / "ours.npy")).mean()
    assert agree >= 0.995
    # the same script through the old top-level module names
    legacy = LEGACY_SCRIPT.format(imports="from liblinearutil import *", train=files["train"],
                                  test=files["test"], model=str(tmp_path / "legacy.model"),
                                  out=str(tmp_path / "legacy.npy"))
    import lcoding.legacy
    env = dict(base_env, PYTHONPATH=lcoding.legacy.PATH + os.pathsep + package_root)
    proc = subprocess.run([sys.executable, "-c", legacy], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "legacy.npy"), np.load(tmp_path / "ours.npy"))


# ---- bad input -------------------------------------------------------------------

BAD_OPTIONS = [
    ("-h 1", "unknown option '-h'"), ("-c", "option -c needs a value"),
    ("-c abc", "option -c"), ("-s 8", "not a valid solver type"), ("-v 1", "n must >= 2"),
    ("-c 0", "C <= 0"), ("-c -1", "C <= 0"), ("-e 0", "eps <= 0"), ("-s 11 -p -1", "p < 0"),
    ("-R", "must specify -B 1 along with -R"), ("-R -B 2", "must specify -B 1"),
    ("-R -B 1 -s 1", "-R option supported only"), ("-s 1 -C", "only available for -s 0, -s 2"),
    ("-wx 2", "-wx"), ("-s 21 -B 1", "ONECLASS"), ("-c nan", "NaN"), ("-s1", "unknown option"),
]


@pytest.mark.parametrize("options,message", BAD_OPTIONS)
def test_bad_options_raise_naming_the_option(small, options, message):
    X, y2, _, yr = small
    with pytest.raises(ValueError, match=None) as info:
        lc.train(yr if "-s 11" in options else y2, X, options)
    assert message in str(info.value)


def test_bad_data_raises_clearly(small):
    X, y2, _, _ = small
    with pytest.raises(ValueError, match="feature index 0"):
        lc.train([1, -1], [{0: 1.0}, {1: 1.0}])
    with pytest.raises(ValueError, match="non-finite"):
        lc.train([1, -1], [{1: float("nan")}, {1: 1.0}])
    with pytest.raises(ValueError, match="non-finite"):
        lc.train([1, -1], np.array([[1.0, np.inf], [0, 1]]))
    with pytest.raises(ValueError, match="non-finite"):
        bad = X.copy()
        bad.data[3] = np.nan
        lc.train(y2, bad)
    with pytest.raises(ValueError, match="label"):
        lc.train([1, float("nan")], [{1: 1.0}, {1: 2.0}])
    with pytest.raises(ValueError, match="empty training problem"):
        lc.train([], [])
    with pytest.raises(ValueError, match=r"len\(y\) != len\(x\)"):
        lc.train([1, -1, 1], [{1: 1.0}, {1: 2.0}])
    with pytest.raises(TypeError, match="Wrong types"):
        lc.train("abc", X)
    with pytest.raises(TypeError):
        lc.train(list(y2), "abc")
    with pytest.raises(TypeError, match="arg 1 should be a list or a str"):
        lc.parameter(123)
    with pytest.raises(TypeError, match="integers"):
        lc.train([1, -1], [{"a": 1.0}, {1: 2.0}])


def test_predict_bad_input(small):
    X, y2, _, _ = small
    m = lc.train(y2, X, "-q")
    with pytest.raises(TypeError, match="only supported for logistic regression"):
        lc.predict(y2, X, m, "-b 1")
    with pytest.raises(ValueError, match="Wrong options"):
        lc.predict(y2, X, m, "-z")
    with pytest.raises(ValueError, match="len"):
        lc.predict([1, 2], X, m, "-q")
    with pytest.raises(TypeError, match="type of y"):
        lc.predict(None, X, m)
    with pytest.raises(TypeError, match="type of x"):
        lc.predict(y2, {1: 2.0}, m)
    # labels unknown: y = []
    labels, _, _ = lc.predict([], X, m, "-q")
    assert len(labels) == X.shape[0]


def test_every_solver_of_the_option_table_trains():
    """Every -s number is served by a method of the METHODS table (the linear
    solver tables, or the method that owns it), so none loads-and-predicts only."""
    from lcoding.core.options import SolverType, TrainParams
    from lcoding.linear import solvers
    from lcoding.training import select_method
    linear = (set(solvers.BINARY_SOLVERS) | set(solvers.MULTICLASS_SOLVERS)
              | set(solvers.REGRESSION_SOLVERS_TABLE) | set(solvers.ONECLASS_SOLVERS))
    for st in SolverType:
        method = select_method(TrainParams(solver_type=int(st)))
        assert int(st) in linear or method.name in ("kq", "llc_jo"), st


# ---- model files ---------------------------------------------------------------

GOOD = "solver_type L2R_L2LOSS_SVC_DUAL\nnr_class 2\nlabel 1 -1\nnr_feature 2\nbias -1\nw\n0.5 \n-0.25 \n"


def _write(tmp_path, text, name="m.model"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("text,line,message", [
    (GOOD.replace("0.5 \n-0.25 \n", "0.5 \n"), 7, "truncated w block"),
    (GOOD.replace("-0.25", "abc"), 8, "'abc' is not a number"),
    (GOOD.replace("L2R_L2LOSS_SVC_DUAL", "FOO"), 1, "unknown solver type"),
    (GOOD.replace("nr_class 2\nlabel 1 -1\n", "label 1 -1\nnr_class 2\n"), 2, "after nr_class"),
    (GOOD.replace("bias -1", "color blue"), 5, "unknown text in model file: [color]"),
    (GOOD.replace("nr_feature 2", "nr_feature two"), 4, "not an integer"),
    (GOOD + "1.0\n", 9, "unexpected text after"),
    ("solver_type L2R_LR\nnr_class 2\n", 2, "unexpected end of file"),
    (GOOD.replace("label 1 -1\n", ""), 5, "missing label"),
    ("__import__('os').system('echo pwned')\n", 1, "unknown text"),
])
def test_corrupt_model_files_raise_naming_the_line(tmp_path, text, line, message):
    path = _write(tmp_path, text)
    with pytest.raises(ModelFileError) as info:
        lc.load_model(path)
    assert f"{path}:{line}:" in str(info.value)
    assert message in str(info.value)


def test_model_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        lc.load_model(str(tmp_path / "missing.model"))
    good = lc.load_model(_write(tmp_path, GOOD))
    with pytest.raises(FileNotFoundError):
        lc.save_model(str(tmp_path / "no" / "dir" / "m.model"), good)


def test_save_is_atomic(tmp_path, monkeypatch):
    path = _write(tmp_path, GOOD, "keep.model")
    m = lc.load_model(path)
    m.get_weights()[0, 0] = 42.0

    def fail(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        lc.save_model(path, m)
    assert open(path).read() == GOOD                      # the old file is intact
    assert sorted(os.listdir(tmp_path)) == ["keep.model"]  # no temporary left behind
    monkeypatch.undo()
    lc.save_model(path, m)
    assert lc.load_model(path).get_weights()[0, 0] == 42.0


def test_model_round_trip_is_exact(tmp_path, small):
    X, _, y3, _ = small
    m = lc.train(y3, X, "-q -B 1")
    path = str(tmp_path / "m.model")
    lc.save_model(path, m)
    np.testing.assert_array_equal(lc.load_model(path).get_weights(), m.get_weights())
