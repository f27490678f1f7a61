"""Reliability through the public interfaces: models without features, -B, Ctrl-C.

Paths that used to kill the interpreter (a remainder by a zero stride under
``cdivision``) run in a subprocess, so that a regression fails the test instead of
taking pytest down with it.
"""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import LCODING_HOME, child_env, run_python


from lcoding.liblinear import parameter, problem
from lcoding.liblinearutil import load_model, predict, save_model, train



def assert_clean_exit(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, (
        f"exit code {proc.returncode} (negative: killed by signal {-proc.returncode})\n"
        f"stdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}")


# ----------------------------------------------------------- models of no features
# every option set of the crash report, and the other codings on the same kernels
NO_FEATURE_OPTIONS = [
    "-s 1 -L 2 -A 2 -k 1",
    "-s 3 -L 2 -A 2 -k 1",
    "-s 30 -L 2 -A 2 -k 1",
    "-s 31 -L 2 -A 2",
    "-s 31 -L 3 -A 2",
    "-s 1 -L 2 -A 2 -k 1 -K 3",
    "-s 1 -L 1 -A 2 -k 1",
    "-s 1 -L 6 -A 2 -k 1",
    "-s 4 -L 2 -A 2 -k 1",
    "-s 32 -L 2 -A 2 -k 1",
    "-s 1",
]


@pytest.mark.slow      # 11 CLI runs beside liblinear-official, 5 s: the full suite's
@pytest.mark.parametrize("options", NO_FEATURE_OPTIONS)
def test_model_without_features_predicts_like_liblinear(options, tmp_path):
    """Training rows without any feature give a model of input dimension 0; without a
    bias every decision value is 0, so it predicts label[1] as LIBLINEAR's linear model
    does -- before and after a save/load (it used to die of SIGFPE in prediction)."""
    proc = run_python(f"""
        import sys
        from lcoding.liblinearutil import train, predict, save_model, load_model
        m = train([1, 2] * 60, [{{}}] * 120, '{options} -q')
        print(predict([], [{{}}], m, '-q')[0], predict([], [{{3: 1.0}}], m, '-q')[0])
        save_model(sys.argv[1], m)
        m = load_model(sys.argv[1])
        print(predict([], [{{}}], m, '-q')[0], m.get_nr_feature())
        """, tmp_path / "m.model")
    assert_clean_exit(proc)
    assert proc.stdout.split("\n")[:2] == ["[2.0] [2.0]", "[2.0] 0"]


@pytest.mark.slow
def test_model_without_features_with_bias_predicts_from_the_bias(tmp_path):
    proc = run_python("""
        from lcoding.liblinearutil import train, predict
        m = train([1] * 30 + [2] * 90, [{}] * 120, '-s 1 -L 2 -A 2 -k 1 -B 1 -q')
        labels, _, values = predict([], [{}, {}], m, '-q')
        print(labels, values[0][0] < 0)
        """)
    assert_clean_exit(proc)
    assert proc.stdout.strip() == "[2.0, 2.0] True"


NO_FEATURE_MODEL = """\
solver_type L2R_L2LOSS_SVC_DUAL
nr_class 2
label 1 2
nr_feature 0
bias -1
lcoding_format 1
coding KNN_GAUSSIAN
nr_anchor 2
nr_neighbor 1
coding_param 1
kernel_map none
kernel_map_order 0
kernel_map_period 0
nr_dim 0
anchors
w
"""


@pytest.mark.slow
def test_sixteen_line_model_file_without_features(tmp_path):
    path = tmp_path / "dim0.model"
    path.write_text(NO_FEATURE_MODEL)
    assert len(NO_FEATURE_MODEL.splitlines()) == 16
    proc = run_python("""
        import sys
        from lcoding.liblinearutil import load_model, predict
        m = load_model(sys.argv[1])
        print(predict([], [{}, {1: 5.0}], m, '-q')[0])
        """, path)
    assert_clean_exit(proc)
    assert proc.stdout.strip() == "[2.0, 2.0]"


@pytest.mark.slow
def test_cli_without_features(tmp_path):
    train_file = tmp_path / "empty.train"
    train_file.write_text("1\n2\n" * 60)
    test_file = tmp_path / "empty.test"
    test_file.write_text("1\n2 5:1\n")
    proc = run_python("""
        import sys
        from lcoding.cli import predict_main, train_main
        tr, te, model, out = sys.argv[1:5]
        for opts in (['-s', '1', '-L', '2', '-A', '2', '-k', '1'], ['-s', '31', '-L', '3', '-A', '2'],
                     ['-s', '1', '-L', '2', '-A', '2', '-k', '1', '-K', '3']):
            assert train_main(opts + ['-q', tr, model]) == 0
            assert predict_main(['-q', te, model, out]) == 0
            print(open(out).read().split())
        """, train_file, test_file, tmp_path / "m.model", tmp_path / "out.txt")
    assert_clean_exit(proc)
    assert proc.stdout.split("\n")[:3] == ["['2', '2']"] * 3


def test_k_q_metrics_refuse_rows_without_features():
    with pytest.raises(ValueError, match="no features"):
        train([1, 2] * 10, [{}] * 20, "-s 40 -k 1 -Q 2 -q")
    with pytest.raises(ValueError, match="no features"):
        train([1, 2] * 10, [{}] * 20, "-s 41 -k 1 -Q 2 -q")


def test_anchor_planes_refuse_rows_without_features():
    with pytest.raises(ValueError, match="rank bound"):
        train([1, 2] * 10, [{}] * 20, "-s 1 -L 4 -A 2 -q")


# ------------------------------------------------------ values near the float limit
def _huge_problem():
    """Finite rows, one of them 1e300: its squared norm overflows to inf."""
    X = np.random.default_rng(0).random((40, 3))
    X[5, 1] = 1e300
    return (np.arange(40) % 2).astype(float), X


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("options,block", [
    ("-s 7", "w"),                          # dual logistic regression: w was nan
    ("-s 1 -L 2 -A 4 -k 2", "anchors"),     # anchors that are such rows: a file that
    ("-s 33 -L 2 -A 4 -k 2", "anchors"),    # would not load, NaN decision values
    ("-s 1 -L 3 -A 4", "anchors"),
])
def test_training_refuses_a_model_it_could_not_keep(options, block):
    """The loader's checks at the end of training: a clear error that names the block
    and the data's largest value, instead of a NaN model or an unloadable file."""
    y, X = _huge_problem()
    with pytest.raises(ValueError, match=rf"cannot keep \({block} block holds .*largest "
                                         rf"\|value\| in x is 1e\+300: scale the features"):
        train(y, X, options + " -q")


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_a_failed_linear_algebra_step_names_the_method_and_the_remedy():
    y, X = _huge_problem()
    with pytest.raises(ValueError, match=r"^occ .*linear-algebra step failed .*1e\+300: scale"):
        train(y, X, "-s 1 -L 4 -A 2 -q")


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("options", ["-s 0", "-s 1", "-s 40 -k 1 -Q 2", "-s 1 -t 2 -X 5"])
def test_solvers_that_cope_with_huge_values_still_train(options, tmp_path):
    y, X = _huge_problem()
    m = train(y, X, options + " -q")
    save_model(str(tmp_path / "m"), m)
    assert np.isfinite(predict(y, X, load_model(str(tmp_path / "m")), "-q")[2]).all()


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("options", ["-s 1", "-s 1 -L 1 -A 4 -k 2", "-s 1 -L 2 -A 4 -k 2",
                                     "-s 1 -L 6 -A 4 -k 2", "-s 33 -L 2 -A 4 -k 2",
                                     "-s 1 -L 3 -A 4", "-s 1 -L 4 -A 2", "-s 40 -k 1 -Q 2",
                                     "-s 1 -t 2 -X 5", "-s 1 -L 2 -A 4 -k 2 -K 3"])
def test_rows_near_the_float_limit_get_finite_decision_values(options):
    """Test rows whose squared distances overflow (1e155 and up): the Gaussian coding
    used to give exp(inf - inf) = NaN; its limit far from the anchors puts the weight
    on one neighbour."""
    rng = np.random.default_rng(0)
    X = rng.random((60, 3))
    y = (X[:, 0] > 0.5).astype(float)
    far = [{1: 1e300, 2: 0.5, 3: 0.5}, {1: 1e200}, {1: 1e155, 2: 1.0, 3: 1.0}, {1: -1e300}]
    _, _, values = predict([1] * 4, far, train(y, X, options + " -q"), "-q")
    assert np.isfinite(np.asarray(values)).all(), values


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_a_kernel_that_overflows_on_a_test_row_is_a_clear_error():
    """A polynomial kernel of a row near the float limit is inf, and sums of infinite
    kernel values are NaN: an error naming the row, not a NaN decision value."""
    rng = np.random.default_rng(0)
    X = rng.random((60, 3))
    m = train((X[:, 0] > 0.5).astype(float), X, "-s 1 -t 1 -X 5 -q")
    with pytest.raises(ValueError, match=r"^x: row 2: its polynomial kernel values overflow "
                                         r"\(largest \|value\| 1e\+300\); scale"):
        predict([1, 1], [{1: 0.5}, {1: 1e300}], m, "-q")


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_decision_values_that_overflow_to_nan_are_a_clear_error():
    """Anchor planes' plane responses to a row of 1e308 features sum to inf - inf:
    every model's decision_values names the row instead of returning NaN.  A single
    overflowing score stays +-inf, as in LIBLINEAR (the linear model on the same row)."""
    rng = np.random.default_rng(1)
    X = rng.random((60, 4))
    y = np.floor(X[:, 0] * 3)
    far = {1: 1e308, 2: 1e308}
    planes = train(y, X, "-s 1 -L 4 -A 2 -B 1 -q")
    with pytest.raises(ValueError, match=r"^x: row 2: its decision values overflow to NaN "
                                         r"\(largest \|value\| 1e\+308\); scale"):
        predict([1, 1], [{1: 0.5}, far], planes, "-q")
    _, _, values = predict([1], [far], train(y, X, "-s 1 -B 1 -q"), "-q")
    assert np.isinf(values).any() and not np.isnan(values).any()


@pytest.mark.slow
def test_cli_writes_no_model_file_when_training_refuses(tmp_path):
    y, X = _huge_problem()
    data = tmp_path / "huge.train"
    data.write_text("".join(f"{int(t)} " + " ".join(f"{j + 1}:{float(v)!r}" for j, v in enumerate(row))
                            + "\n" for t, row in zip(y, X)))
    proc = run_python("""
        import sys
        from lcoding.cli import train_main
        sys.exit(train_main(['-s', '7', '-q', sys.argv[1], sys.argv[2]]))
        """, data, tmp_path / "m.model")
    assert proc.returncode == 1, proc.stderr
    assert "scale the features" in proc.stderr + proc.stdout
    assert not (tmp_path / "m.model").exists()


# ----------------------------------------------------------------------- -B
@pytest.mark.parametrize("bias", ["inf", "-inf", "1e200"])
def test_bias_must_be_finite(bias):
    with pytest.raises(ValueError, match=r"option -B"):
        train([1, 2, 1, 2], [{1: 1}, {2: 1}, {1: 2}, {2: 3}], f"-B {bias} -q")


def test_bias_nan_is_refused_by_the_option_parser():
    with pytest.raises(ValueError, match="-B"):
        train([1, 2, 1, 2], [{1: 1}, {2: 1}, {1: 2}, {2: 3}], "-B nan -q")


@pytest.mark.parametrize("bias", [float("inf"), float("nan"), -float("inf"), 1e200])
def test_problem_set_bias_refuses_non_finite(bias):
    prob = problem([1, 2], [{1: 1}, {2: 1}])
    with pytest.raises(ValueError, match="-B"):
        prob.set_bias(bias)
    with pytest.raises(ValueError, match="-B"):
        problem([1, 2], [{1: 1}, {2: 1}], bias=bias)


def test_parameter_with_infinite_bias_is_refused_by_train():
    prob = problem([1, 2, 1, 2], [{1: 1}, {2: 1}, {1: 2}, {2: 3}])
    with pytest.raises(ValueError, match="-B"):
        train(prob, parameter("-B inf -q"))


def test_finite_bias_still_trains(tmp_path):
    m = train([1, 2, 1, 2], [{1: 1}, {2: 1}, {1: 2}, {2: 3}], "-B 2.5 -q")
    assert m.bias == 2.5
    save_model(str(tmp_path / "m"), m)
    assert np.isfinite(predict([1], [{1: 1}], load_model(str(tmp_path / "m")), "-q")[2]).all()


# ------------------------------------------------------------------- Ctrl-C
CTRL_C_CHILD = """
import signal, sys, numpy as np, scipy.sparse as sp
# Python's own Ctrl-C handler even when the suite runs as a background job (whose
# children start with SIGINT ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
rng = np.random.default_rng(0)
n, d, nnz = 60000, 784, 150                      # MNIST-size: 60000 x 784, ~19 % dense
idx = np.sort(rng.integers(0, d, size=(n, nnz)), axis=1)
X = sp.csr_matrix((rng.random((n, nnz)).ravel(), idx.ravel(), np.arange(0, n * nnz + 1, nnz)),
                  shape=(n, d))
X.sum_duplicates()
y = rng.integers(0, 10, n).astype(float)
from lcoding.liblinearutil import train, save_model
import time
print("ready", flush=True)
try:
    m = train(y, X, sys.argv[1])
except KeyboardInterrupt:
    # on a line of its own (training may have printed LIBLINEAR's progress dots), before
    # the interpreter's teardown
    print(f"\\ninterrupted {time.time()!r}", flush=True)
    raise
print("trained", flush=True)
save_model(sys.argv[2], m)
"""


@pytest.mark.slow
@pytest.mark.parametrize("options,stage", [
    ("-s 1 -m 2 -q", None),                          # one-vs-rest solves in 2 threads
    ("-s 1 -L 2 -A 100 -k 8 -a 1 -m 2", "anchors:"), # LL-SVM: the per-class dual CD
    ("-s 31 -L 2 -A 200 -k 50 -a 1 -m 2", "-T 0:"),  # LLC-SAPL: inside a 5 s joint epoch
    ("-s 1 -m 1 -q", None),                          # no worker threads at all
    ("-s 40 -l 50 -m 2", None),                      # k q-metrics: inside the PCA's gram
    ("-s 40 -m 2", "preprocessing:"),                # k q-metrics: k-subspaces' LAPACK
])
def test_ctrl_c_stops_training_within_a_second(options, stage, tmp_path):
    """SIGINT 1 s into training (or 1 s into ``stage``, the line announcing it) on
    MNIST-size data: KeyboardInterrupt within 1 s, no model file.  (Before: with -m 2
    the per-class solves already running in worker threads finished first, 15-36 s;
    one LLC-JO epoch ran 4-5 s without returning to Python.)"""
    out = tmp_path / "m.model"
    env = child_env()
    child = subprocess.Popen([sys.executable, "-c", CTRL_C_CHILD, options, str(out)],
                             cwd=str(LCODING_HOME), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        if stage is not None:
            for line in child.stdout:
                if line.startswith(stage):
                    break
            else:
                raise AssertionError(f"the training never printed {stage!r}")
        time.sleep(1.0)
        sent = time.time()
        child.send_signal(signal.SIGINT)
        rest, err = child.communicate(timeout=60)
        # the child's own clock when train() raised: what the user waits for (the
        # interpreter's teardown after it is not training, and on a loaded machine
        # freeing the 60000-row input alone can take a good part of a second)
        stamps = [float(stamp) for stamp in re.findall(r"interrupted (\S+)", rest)]
        assert stamps, rest[-2000:] + err[-2000:]
        latency = stamps[0] - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert "KeyboardInterrupt" in err, err[-2000:]
    assert child.returncode != 0
    assert latency < 1.0, f"{options}: exited {latency:.2f} s after SIGINT"
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
