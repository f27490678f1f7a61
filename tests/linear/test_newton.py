"""-s 0, 2, 11 (primal Newton), -s 7 (dual LR) and the -C parameter search
against liblinear-official 2.50 on subsamples of the shared data sets."""
from __future__ import annotations

import ctypes
import io

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import flush_c_stdout
from lcoding.linear import newton as solvers_newton
from lcoding.core.rows import as_rows
from lcoding.core.options import parse_train_options
from lcoding.linear.param_search import best_parameters_line, calc_start_C, find_parameters
from lcoding.linear.solvers import BINARY_SOLVERS
from lcoding.linear.problem import BinaryProblem, Coding
from lcoding.core.messages import Messages
from lcoding.linear.dual_cd import train_l2loss_svc_dual
from lcoding.linear.solvers import REGRESSION_SOLVERS_TABLE
from lcoding.core.seeds import rng_state
from lcoding.training import train_model

liblinear = pytest.importorskip("liblinear.liblinear")
liblinearutil = pytest.importorskip("liblinear.liblinearutil")

OBJECTIVE_RTOL = 1e-3
MIN_PREDICTION_AGREEMENT = 0.995


def subsample(shared_data, name, n, seed=0):
    """``(y, X)``: ``n`` rows of a shared training set, in file order."""
    y, X, _, _ = shared_data(name)
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(X.shape[0], size=min(n, X.shape[0]), replace=False))
    return y[ids], X[ids]


def regression_data(n=800, d=30, seed=3):
    """Sparse features with a real-valued linear target plus noise."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.3, random_state=seed, format="csr") * 2.0
    y = X @ rng.normal(size=d) + 0.5 + 0.1 * rng.normal(size=n)
    return y, X


def liblinear_weights(y, X, options):
    """liblinear-official's model: ``(w (w_size, nr_w), labels)`` in LIBLINEAR's layout."""
    model = liblinearutil.train(y, X, options)
    nr_class = model.get_nr_class()
    nr_w = 1 if nr_class == 2 else nr_class
    w_size = model.nr_feature + (1 if model.bias >= 0 else 0)
    w = np.ctypeslib.as_array(model.w, (w_size * nr_w,)).reshape(w_size, nr_w).copy()
    labels = None if model.is_regression_model() else np.array(model.get_labels())
    return w, labels


def augmented(X, bias):
    Z = X.toarray()
    return Z if bias < 0 else np.hstack([Z, np.full((Z.shape[0], 1), bias)])


def primal_objective(solver, w, Z, y_solver, C, p=0.1, regularize_bias=True):
    """The objective -s ``solver`` minimises (-s 7: the -s 0 primal), at ``w``;
    ``C`` a scalar or per-row array."""
    t = Z @ w
    wr = w if regularize_bias else w[:-1]
    reg = 0.5 * float(wr @ wr)
    if solver in (0, 7):
        return reg + float(np.sum(C * np.logaddexp(0.0, -y_solver * t)))
    if solver == 2:
        return reg + float(np.sum(C * np.maximum(0.0, 1.0 - y_solver * t) ** 2))
    return reg + float(np.sum(C * np.maximum(0.0, np.abs(t - y_solver) - p) ** 2))


def compare_with_liblinear(y, X, options, solver):
    """Train both; check the objective of every one-vs-rest problem and the
    predictions.  Returns the largest relative objective difference."""
    params = parse_train_options(options + " -q")
    model = train_model(y, as_rows(X), params)
    w_ref, labels_ref = liblinear_weights(y, X, options + " -q")
    assert model.w.shape == w_ref.shape
    Z = augmented(X, params.bias)
    regularize_bias = bool(params.regularize_bias)
    worst = 0.0
    if solver == 11:
        f = primal_objective(11, model.w[:, 0], Z, y, params.C, params.p, regularize_bias)
        f_ref = primal_objective(11, w_ref[:, 0], Z, y, params.C, params.p, regularize_bias)
        worst = abs(f - f_ref) / abs(f_ref)
        mse = np.mean((Z @ model.w[:, 0] - y) ** 2)
        mse_ref = np.mean((Z @ w_ref[:, 0] - y) ** 2)
        assert mse == pytest.approx(mse_ref, rel=0.01)
    else:
        np.testing.assert_array_equal(model.label, labels_ref)
        weight = dict(zip(params.weight_label, params.weight))
        for c in range(model.w.shape[1]):
            positive = y.astype(int) == model.label[c]
            y_pm = np.where(positive, 1.0, -1.0)
            Cp = params.C * weight.get(int(model.label[c]), 1.0)
            Cn = params.C * weight.get(int(model.label[1]), 1.0) if model.w.shape[1] == 1 else params.C
            C = np.where(positive, Cp, Cn)
            f = primal_objective(solver, model.w[:, c], Z, y_pm, C, regularize_bias=regularize_bias)
            f_ref = primal_objective(solver, w_ref[:, c], Z, y_pm, C, regularize_bias=regularize_bias)
            worst = max(worst, abs(f - f_ref) / abs(f_ref))
        pred = model.labels_from_values(model.decision_values(as_rows(X)))
        pred_ref, _, _ = liblinearutil.predict(y, X, liblinearutil.train(y, X, options + " -q"), "-q")
        assert np.mean(pred == np.asarray(pred_ref)) >= MIN_PREDICTION_AGREEMENT
    assert worst <= OBJECTIVE_RTOL, f"{options}: relative objective difference {worst:.2e}"
    return worst


def test_solvers_are_registered_with_the_common_signature():
    for s in (0, 2, 7):
        assert BINARY_SOLVERS[s].__kwdefaults__["tol_scale"] == 1.0
    assert REGRESSION_SOLVERS_TABLE[11].__kwdefaults__["tol_scale"] == 1.0


# ijcnn1 and w8a are well conditioned: at the default -e both libraries stop next to
# the optimum.  On usps and letter (dense, nearly separable) the default -e stops
# Newton while the objective is still a few percent above the optimum, and rounding
# differences (row order, BLAS) send the two trajectories to different stopping
# points; with a tighter -e both reach the same optimum.
CLASSIFICATION_CASES = [
    ("ijcnn1", 6000, "-s 0"), ("ijcnn1", 6000, "-s 2"), ("ijcnn1", 6000, "-s 7"),
    ("ijcnn1", 6000, "-s 0 -B 1"), ("ijcnn1", 6000, "-s 2 -c 4 -B 1"),
    ("w8a", 6000, "-s 0 -c 2"), ("w8a", 6000, "-s 2 -e 0.001"), ("w8a", 6000, "-s 7 -B 1"),
    ("usps", 1500, "-s 0 -e 0.0001"), ("usps", 1500, "-s 2 -B 1 -e 0.0001"),
    ("usps", 1500, "-s 7 -c 0.5"),
    ("letter", 3000, "-s 0 -c 0.1 -e 0.0001"), ("letter", 3000, "-s 2 -B 1 -e 0.0001"),
    ("ijcnn1", 6000, "-s 0 -w1 3 -w-1 0.5"), ("usps", 1500, "-s 2 -w3 2 -e 0.0001"),
]


@pytest.mark.parametrize("name,n,options", CLASSIFICATION_CASES)
@pytest.mark.slow
def test_classification_agrees_with_liblinear(shared_data, name, n, options):
    y, X = subsample(shared_data, name, n)
    compare_with_liblinear(y, X, options, int(options.split()[1]))


@pytest.mark.parametrize("options", ["-s 11", "-s 11 -p 0.5 -c 3", "-s 11 -B 1", "-s 11 -e 0.01"])
def test_regression_agrees_with_liblinear(options):
    y, X = regression_data()
    compare_with_liblinear(y, X, options, 11)


@pytest.mark.slow
def test_regression_on_shared_features(shared_data):
    # usps pixels with the digit as a real-valued target
    y, X = subsample(shared_data, "usps", 1500)
    compare_with_liblinear(y.astype(float), X, "-s 11 -p 0.2", 11)


@pytest.mark.parametrize("options", ["-s 0 -B 1 -R", "-s 2 -B 1 -R -c 8"])
def test_unregularised_bias_agrees_with_liblinear(shared_data, options):
    y, X = subsample(shared_data, "ijcnn1", 6000)
    compare_with_liblinear(y, X, options, int(options.split()[1]))


def test_unregularised_bias_regression_agrees_with_liblinear():
    y, X = regression_data()
    y = y + 20.0         # a large offset, so that regularising the bias would matter
    compare_with_liblinear(y, X, "-s 11 -B 1 -R", 11)
    plain = train_model(y, as_rows(X), parse_train_options("-s 11 -B 1 -q"))
    free = train_model(y, as_rows(X), parse_train_options("-s 11 -B 1 -R -q"))
    assert abs(free.w[-1, 0]) > abs(plain.w[-1, 0])


@pytest.mark.parametrize("options", ["-s 0", "-s 2 -B 1", "-s 11 -B 1 -R"])
def test_progress_lines_match_liblinear(shared_data, capfd, options):
    if options.startswith("-s 11"):
        y, X = regression_data()
    else:
        y, X = subsample(shared_data, "ijcnn1", 4000)
    out = io.StringIO()
    train_model(y, as_rows(X), parse_train_options(options), Messages(stream=out))
    capfd.readouterr()
    liblinearutil.train(y, X, options)
    flush_c_stdout()
    reference = capfd.readouterr().out
    assert out.getvalue() == reference
    assert out.getvalue().startswith("init f ")
    assert "iter  1 f " in out.getvalue()


def test_quiet_prints_nothing(shared_data, capfd):
    y, X = subsample(shared_data, "ijcnn1", 2000)
    for options in ("-s 0 -q", "-s 2 -q", "-s 7 -q", "-s 11 -q"):
        train_model(y, as_rows(X), parse_train_options(options))
    assert capfd.readouterr().out == ""


def test_dual_lr_prints_liblinear_messages(shared_data):
    y, X = subsample(shared_data, "ijcnn1", 3000)
    out = io.StringIO()
    train_model(y, as_rows(X), parse_train_options("-s 7"), Messages(stream=out))
    text = out.getvalue()
    assert "\noptimization finished, #iter = " in text
    assert "Objective value = " in text


def test_dual_lr_objective_is_the_dual_of_the_primal(shared_data):
    # at a tight tolerance, primal objective = -dual objective (strong duality)
    y, X = subsample(shared_data, "ijcnn1", 2000)
    rows = as_rows(X)
    y_pm = np.where(y > 0, 1, -1).astype(np.int8)
    prob = BinaryProblem(rows, y_pm, 1.0, 1.0, -1.0, rng_state(1, 0))
    res = solvers_newton.solve_l2r_lr_dual(prob, parse_train_options("-s 7 -e 1e-6 -q"),
                                           Messages(True))
    primal = primal_objective(0, res.w, X.toarray(), y_pm.astype(float), 1.0)
    assert primal == pytest.approx(-res.objective, rel=1e-6)


def test_dual_lr_switches_to_primal_after_max_iter(shared_data):
    y, X = subsample(shared_data, "ijcnn1", 3000)
    params = parse_train_options("-s 7 -e 1e-12")
    params.max_iter = 3
    out = io.StringIO()
    model = train_model(y, as_rows(X), params, Messages(stream=out))
    text = out.getvalue()
    assert "#iter = 3\n" in text
    assert "\nWARNING: reaching max number of iterations\nSwitching to use -s 0\n\n" in text
    assert "init f " in text
    # the primal fallback runs at tolerance eps * 0.1: it solves -s 0 tightly
    reference = train_model(y, as_rows(X), parse_train_options("-s 0 -e 1e-6 -q"))
    y_pm = np.where(y == model.label[0], 1.0, -1.0)
    f = primal_objective(0, model.w[:, 0], X.toarray(), y_pm, 1.0)
    f_ref = primal_objective(0, reference.w[:, 0], X.toarray(), y_pm, 1.0)
    assert f == pytest.approx(f_ref, rel=1e-6)


def test_dual_lr_zero_weight_class_stays_finite(shared_data):
    y, X = subsample(shared_data, "ijcnn1", 2000)
    model = train_model(y, as_rows(X), parse_train_options("-s 7 -w-1 0 -q"))
    assert np.isfinite(model.w).all()


def test_dual_lr_runs_on_a_local_coding(shared_data):
    y, X = subsample(shared_data, "ijcnn1", 1500)
    rows = as_rows(X)
    n = rows.n_rows
    rng = np.random.default_rng(0)
    coding = Coding(rng.integers(0, 4, size=(n, 2)).astype(np.int32),
                    rng.dirichlet([1.0, 1.0], size=n), 4)
    prob = BinaryProblem(rows, np.where(y > 0, 1, -1).astype(np.int8), 1.0, 1.0, 1.0,
                         rng_state(1, 0), coding=coding)
    res = BINARY_SOLVERS[7](prob, parse_train_options("-s 7 -B 1 -q"), Messages(True))
    assert res.w.shape == (4 * (rows.n_features + 1),)
    assert np.isfinite(res.w).all() and np.any(res.w)


def test_primal_solvers_refuse_a_local_coding(shared_data):
    y, X = subsample(shared_data, "ijcnn1", 200)
    rows = as_rows(X)
    coding = Coding(np.zeros((rows.n_rows, 1), np.int32), np.ones((rows.n_rows, 1)), 1)
    prob = BinaryProblem(rows, np.where(y > 0, 1, -1).astype(np.int8), 1.0, 1.0, -1.0,
                         rng_state(1, 0), coding=coding)
    with pytest.raises(ValueError, match="plain linear models and -s 2 on coded rows only"):
        BINARY_SOLVERS[0](prob, parse_train_options("-s 0 -q"), Messages(True))
    # -s 2 writes the coded rows out (here one anchor of weight 1: the rows themselves)
    coded = BINARY_SOLVERS[2](prob, parse_train_options("-s 2 -q"), Messages(True))
    plain = BINARY_SOLVERS[2](BinaryProblem(rows, prob.y, 1.0, 1.0, -1.0, rng_state(1, 0)),
                              parse_train_options("-s 2 -q"), Messages(True))
    np.testing.assert_array_equal(coded.w, plain.w)


def test_tol_scale_tightens_the_primal_stopping_rule(shared_data):
    y, X = subsample(shared_data, "ijcnn1", 3000)
    rows = as_rows(X)
    prob = BinaryProblem(rows, np.where(y > 0, 1, -1).astype(np.int8), 1.0, 1.0, -1.0,
                         rng_state(1, 0))
    params = parse_train_options("-s 2 -q")
    loose = BINARY_SOLVERS[2](prob, params, Messages(True))
    tight = BINARY_SOLVERS[2](prob, params, Messages(True), tol_scale=0.001)
    assert tight.n_iter > loose.n_iter
    assert tight.objective <= loose.objective
    reg = REGRESSION_SOLVERS_TABLE[11](
        BinaryProblem(rows, y.astype(float), 1.0, 1.0, -1.0, rng_state(1, 0)),
        parse_train_options("-s 12 -q"), Messages(True), tol_scale=0.001)
    assert np.isfinite(reg.w).all()


def test_dual_svc_fallback_reaches_the_primal_solution(shared_data):
    y, X = subsample(shared_data, "ijcnn1", 3000)
    rows = as_rows(X)
    y_pm = np.where(y > 0, 1, -1).astype(np.int8)
    params = parse_train_options("-s 1")
    params.max_iter = 2
    out = io.StringIO()
    res = train_l2loss_svc_dual(BinaryProblem(rows, y_pm, 1.0, 1.0, -1.0, rng_state(1, 0)),
                                 params, Messages(stream=out))
    assert "Switching to use -s 2" in out.getvalue()
    ref = train_model(y, rows, parse_train_options("-s 2 -e 1e-6 -q"))
    f = primal_objective(2, res.w, X.toarray(), y_pm.astype(float), 1.0)
    f_ref = primal_objective(2, ref.w[:, 0] * (1 if ref.label[0] == 1 else -1), X.toarray(),
                             y_pm.astype(float), 1.0)
    assert f == pytest.approx(f_ref, rel=1e-4)


def test_warm_start_keeps_a_converged_solution(shared_data):
    y, X = subsample(shared_data, "ijcnn1", 2000)
    rows = as_rows(X)
    prob = BinaryProblem(rows, np.where(y > 0, 1, -1).astype(np.int8), 1.0, 1.0, -1.0,
                         rng_state(1, 0))
    params = parse_train_options("-s 0 -q")
    first = BINARY_SOLVERS[0](prob, params, Messages(True))
    out = io.StringIO()
    again = BINARY_SOLVERS[0](prob, params, Messages(stream=out), init_w=first.w)
    assert np.array_equal(again.w, first.w)
    assert out.getvalue().startswith("init f ") and "iter" not in out.getvalue()[6:]
    with pytest.raises(ValueError, match="init_w"):
        BINARY_SOLVERS[0](prob, params, Messages(True), init_w=np.zeros(3))


def test_empty_problem_gives_zero_weights():
    rows = as_rows(sp.csr_matrix((0, 5)))
    prob = BinaryProblem(rows, np.zeros(0), 1.0, 1.0, 1.0, rng_state(1, 0))
    res = REGRESSION_SOLVERS_TABLE[11](prob, parse_train_options("-s 11 -B 1 -R -q"), Messages(True))
    assert res.w.shape == (6,) and not np.any(res.w)


# -C: the same folds as LIBLINEAR (its permutation is drawn with the C library's
# rand(), which this process shares with liblinear-official), so the whole search
# path must agree.
_libc = ctypes.CDLL(None)


def glibc_fold_permutation(n, seed):
    """The permutation LIBLINEAR's find_parameters draws after ``srand(seed)``."""
    _libc.srand(seed)
    perm = np.arange(n)
    for i in range(n):
        j = i + _libc.rand() % (n - i)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def liblinear_find_parameters(y, X, options, seed):
    _libc.srand(seed)
    return liblinearutil.train(y, X, options)


def run_both_searches(y, X, options, seed, capfd):
    """``(lcoding result, its printed text, LIBLINEAR result, its printed text)``."""
    params = parse_train_options(options)
    out = io.StringIO()
    best = find_parameters(y, as_rows(X), params, Messages(stream=out),
                           perm=glibc_fold_permutation(X.shape[0], seed))
    capfd.readouterr()
    ref = liblinear_find_parameters(y, X, options, seed)
    flush_c_stdout()
    return best, out.getvalue(), ref, capfd.readouterr().out


@pytest.mark.parametrize("options", ["-C -s 0", "-C", "-C -s 2 -B 1 -R"])
@pytest.mark.slow
def test_find_parameters_path_identical_to_liblinear(shared_data, capfd, options):
    # ijcnn1 is well conditioned: every fold model agrees, so every printed CV rate does
    y, X = subsample(shared_data, "ijcnn1", 3000)
    best, text, ref, ref_text = run_both_searches(y, X, options, 11, capfd)
    assert best == pytest.approx(ref, rel=1e-12)
    assert best[1] == -1.0
    # LIBLINEAR prints the log2c lines from C and the summary from Python's print
    solver = parse_train_options(options).solver_type
    assert ref_text == text + best_parameters_line(solver, *best) + "\n"


@pytest.mark.parametrize("name,n,options", [
    ("w8a", 3000, "-C -s 2 -B 1 -R"), ("usps", 800, "-C -s 2"), ("letter", 1500, "-C -s 0 -c 0.5"),
])
@pytest.mark.slow
def test_find_parameters_picks_liblinears_C(shared_data, capfd, name, n, options):
    # at large C the default -e leaves fold models that differ slightly between the
    # libraries (see CLASSIFICATION_CASES), so a CV rate may differ by a row or two
    y, X = subsample(shared_data, name, n)
    best, text, ref, ref_text = run_both_searches(y, X, options, 11, capfd)
    assert best[0] == ref[0] and best[1] == ref[1] == -1.0
    assert best[2] == pytest.approx(ref[2], abs=0.002)
    # the same C grid, point for point; where a CV rate differs by a row the search's
    # stop rule (no better rate for a few steps) may end it one point earlier or later,
    # so the shorter log is a prefix of the longer one
    log2c = [line.split("\t")[0] for line in text.splitlines() if line.startswith("log2c=")]
    ref_log2c = [line.split("\t")[0] for line in ref_text.splitlines() if line.startswith("log2c=")]
    common = min(len(log2c), len(ref_log2c))
    assert common >= 5 and log2c[:common] == ref_log2c[:common]
    assert abs(len(log2c) - len(ref_log2c)) <= 3


def test_find_parameters_regression_matches_liblinear(capfd):
    y, X = regression_data(n=400, d=10)
    out = io.StringIO()
    best = find_parameters(y, as_rows(X), parse_train_options("-C -s 11 -p 1"), Messages(stream=out),
                           perm=glibc_fold_permutation(X.shape[0], 5))
    capfd.readouterr()
    ref = liblinear_find_parameters(y, X, "-C -s 11 -p 1", 5)
    flush_c_stdout()
    ref_text = capfd.readouterr().out
    assert best[0] == ref[0] and best[1] == pytest.approx(ref[1], rel=1e-12)
    assert best[2] == pytest.approx(ref[2], rel=1e-9)
    assert ref_text.startswith(out.getvalue())
    assert best_parameters_line(11, *best) in ref_text


def test_find_parameters_own_folds_and_options(shared_data):
    y, X = subsample(shared_data, "ijcnn1", 1500)
    rows = as_rows(X)
    params = parse_train_options("-C -s 2 -c 0.25 -v 3 -q")
    first = find_parameters(y, rows, params, Messages(True))
    again = find_parameters(y, rows, params, Messages(True))
    assert first == again                      # folds drawn from -S: reproducible
    assert first[0] >= 0.25 and 0.8 < first[2] <= 1.0
    assert params.C == 0.25                    # the caller's parameters are untouched
    with pytest.raises(ValueError, match="only available for -s 0, -s 2 and -s 11"):
        p = parse_train_options("-s 1 -q")
        p.flag_find_parameters = True
        find_parameters(y, rows, p, Messages(True))


def test_calc_start_C_matches_liblinear_formula(shared_data):
    y, X = subsample(shared_data, "ijcnn1", 1000)
    rows = as_rows(X)
    max_sq = float(X.multiply(X).sum(axis=1).max())
    assert calc_start_C(y, rows, 0, 0.1, -1.0) == 2.0 ** np.floor(np.log2(1 / (1000 * max_sq)))
    assert calc_start_C(y, rows, 2, 0.1, 1.0) == \
        2.0 ** np.floor(np.log2(1 / (2 * 1000 * (max_sq + 1))))
    assert calc_start_C(np.zeros(1000), rows, 11, 0.1, -1.0) == np.inf


def test_best_parameters_line_text():
    assert best_parameters_line(0, 0.5, -1, 0.9218) == "Best C = 0.5  CV accuracy = 92.18%\n"
    assert best_parameters_line(11, 2, 0.05, 0.27308) == "Best C = 2 Best p = 0.05  CV MSE = 0.27308\n"


def test_kernels_reject_inconsistent_arrays():
    from lcoding.linear import _dual_lr, _newton
    data = np.ones(3)
    ptr = np.array([0, 2, 3], np.int64)
    no_idx, no_weight = np.zeros((0, 1), np.int32), np.zeros((0, 1))
    with pytest.raises(ValueError, match="column index outside"):
        _newton.ErmObjective(data, np.array([0, 5, 1], np.int32), ptr, 3, -1.0, np.ones(2),
                             np.ones(2), _newton.LOSS_LOGISTIC, 0.1, True)
    with pytest.raises(ValueError, match="does not span"):
        _newton.ErmObjective(data, np.array([0, 1, 1], np.int32), np.array([0, 2, 9], np.int64),
                             3, -1.0, np.ones(2), np.ones(2), _newton.LOSS_LOGISTIC, 0.1, True)
    fun = _newton.ErmObjective(data, np.array([0, 1, 1], np.int32), ptr, 3, -1.0, np.ones(2),
                               np.ones(2), _newton.LOSS_LOGISTIC, 0.1, True)
    with pytest.raises(ValueError, match="expected 3"):
        fun.value(np.zeros(4))
    with pytest.raises(ValueError, match="W has 3 values"):
        _dual_lr.accumulate_rows(data, np.array([0, 1, 1], np.int32), ptr, 3, 1.0, no_idx,
                                 no_weight, np.ones(2), np.zeros(3))
    with pytest.raises(ValueError, match="row id outside"):
        _dual_lr.lr_dual_cd_pass(data, np.array([0, 1, 1], np.int32), ptr, 3, -1.0, no_idx,
                                 no_weight, np.ones(2, np.int8), np.ones(2), np.ones(2),
                                 np.ones(4), np.zeros(3), np.array([0, 7]), 0.01,
                                 np.zeros(1, np.uint64))


@pytest.mark.parametrize("regularize_bias", [True, False])
def test_split_objective_sums_its_row_ranges(shared_data, regularize_bias):
    """-m N on one -s 2 problem: the objective, gradient, Hessian products and
    preconditioner over 3 row ranges (threads) equal the whole problem's."""
    from lcoding.core.threads import ThreadTeam
    from lcoding.linear import newton as nt
    y, X = subsample(shared_data, "ijcnn1", 3000)
    rows = as_rows(X)
    prob = BinaryProblem(rows, np.where(y > 0, 1, -1).astype(np.int8), 2.0, 0.5, 1.0,
                         rng_state(1, 0))
    params = parse_train_options("-s 2 -B 1 -q" + ("" if regularize_bias else " -R"))
    whole = nt._objective_for(prob, params, nt._newton.LOSS_SQUARED_HINGE)[0]
    rng = np.random.default_rng(3)
    w, s = rng.normal(size=whole.n_vars), rng.normal(size=whole.n_vars)
    with ThreadTeam(3) as team:
        split = nt.SplitObjective(nt._objective_for(prob, params, nt._newton.LOSS_SQUARED_HINGE, 3),
                                  team, regularize_bias)
        assert split.n_rows == rows.n_rows and len(split.parts) == 3
        assert split.value(w) == pytest.approx(whole.value(w), rel=1e-12)
        assert split.wTw == whole.wTw
        g1, g2 = np.empty(whole.n_vars), np.empty(whole.n_vars)
        whole.gradient(w, g1)
        split.gradient(w, g2)
        np.testing.assert_allclose(g2, g1, rtol=1e-11, atol=1e-11 * np.abs(g1).max())
        whole.hessian_vector(s, g1)
        split.hessian_vector(s, g2)
        np.testing.assert_allclose(g2, g1, rtol=1e-11, atol=1e-11 * np.abs(g1).max())
        whole.diag_preconditioner(g1)
        split.diag_preconditioner(g2)
        np.testing.assert_allclose(g2, g1, rtol=1e-12)
        whole.set_direction(s)
        split.set_direction(s)
        assert split.loss_at_step(0.5) == pytest.approx(whole.loss_at_step(0.5), rel=1e-12)


def test_newton_in_threads_reaches_the_same_model(shared_data):
    y, X = subsample(shared_data, "ijcnn1", 6000)
    rows = as_rows(X)
    prob = BinaryProblem(rows, np.where(y > 0, 1, -1).astype(np.int8), 1.0, 1.0, 1.0,
                         rng_state(1, 0))
    params = parse_train_options("-s 2 -B 1 -q")
    one = BINARY_SOLVERS[2](prob, params, Messages(True))
    from lcoding.linear.newton import train_l2r_l2loss_svc
    two = train_l2r_l2loss_svc(prob, params, Messages(True), n_threads=2)
    again = train_l2r_l2loss_svc(prob, params, Messages(True), n_threads=2)
    np.testing.assert_array_equal(two.w, again.w)          # the same for the same -m
    np.testing.assert_allclose(two.w, one.w, rtol=1e-6, atol=1e-8 * np.abs(one.w).max())


def _written_out(prob):
    """z_i = gamma(x_i) (x) [x_i; B] (and the shared bias last) of every row, dense."""
    X = prob.rows.to_csr().toarray()
    n, d = X.shape
    bias, shared = prob.kernel_bias
    idx, wt = prob.coding_arrays()
    block = np.hstack([X, np.full((n, 1), bias)]) if bias >= 0 else X
    stride = block.shape[1]
    Z = np.zeros((n, prob.w_size))
    for j in range(idx.shape[1]):
        for i in range(n):
            a = idx[i, j] * stride
            Z[i, a:a + stride] += wt[i, j] * block[i]
    if shared >= 0:
        Z[:, -1] = shared
    return Z


def _objective_calls(fun, w, s):
    """Every evaluation of an objective at w along s: f, g, Hs, diag(H), the trial loss."""
    g, Hs, M = np.empty(fun.n_vars), np.empty(fun.n_vars), np.empty(fun.n_vars)
    f = fun.value(w)
    fun.gradient(w, g)
    fun.hessian_vector(s, Hs)
    fun.diag_preconditioner(M)
    fun.set_direction(s)
    return f, g, Hs, M, fun.loss_at_step(0.3)


@pytest.mark.parametrize("loss", ["squared_hinge", "logistic"])
@pytest.mark.parametrize("bias,shared", [(1.0, False), (-1.0, False), (2.0, True)])
@pytest.mark.parametrize("n_parts", [1, 3])
def test_coded_objective_equals_it_on_the_rows_written_out(shared_data, loss, bias, shared,
                                                           n_parts):
    """-s 2 on a local coding: the objective reads the coded rows in place; f, g, Hs,
    diag(H) and the line search's loss equal those of the plain objective on the rows
    written out (in NumPy), for per-anchor and shared biases, per-row C, zero coding
    weights and row ranges (threads)."""
    from lcoding.core.threads import ThreadTeam
    from lcoding.linear import newton as nt
    y, X = subsample(shared_data, "ijcnn1", 2000)
    rows = as_rows(X)
    rng = np.random.default_rng(5)
    # 3 distinct anchors of 7 per row, in no particular order (as a coding's nearest)
    idx = np.ascontiguousarray(np.argsort(rng.random((rows.n_rows, 7)), axis=1)[:, :3],
                               dtype=np.int32)
    wt = rng.random((rows.n_rows, 3))
    wt[::5, 2] = 0.0                        # zero weights are skipped by both
    prob = BinaryProblem(rows, np.where(y > 0, 1, -1).astype(np.int8), 2.0, 0.5, bias,
                         rng_state(1, 0), coding=Coding(idx, wt, 7), shared_bias=shared,
                         sample_C=rng.random(rows.n_rows) + 0.5)
    params = parse_train_options("-s 2 -B 1 -q")
    kind = nt._newton.LOSS_SQUARED_HINGE if loss == "squared_hinge" else nt._newton.LOSS_LOGISTIC
    Z = sp.csr_matrix(_written_out(prob))
    written = nt._objective_for(BinaryProblem(as_rows(Z), prob.y, 2.0, 0.5, -1.0, None,
                                              sample_C=prob.sample_C), params, kind)[0]
    w = 0.1 * rng.normal(size=written.n_vars)
    s = rng.normal(size=written.n_vars)
    expected = _objective_calls(written, w, s)
    with ThreadTeam(n_parts) as team:
        parts = nt._objective_for(prob, params, kind, n_parts)
        coded = parts[0] if n_parts == 1 else nt.SplitObjective(parts, team, True)
        assert coded.n_vars == written.n_vars == prob.w_size
        got = _objective_calls(coded, w, s)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-11 * np.abs(b).max())


def test_coded_objective_checks_what_its_kernels_trust():
    from lcoding.linear import _newton
    data, indices, indptr = np.ones(2), np.array([0, 1], np.int32), np.array([0, 1, 2], np.int64)
    y, C = np.ones(2), np.ones(2)
    args = (data, indices, indptr, 2, 1.0, y, C, _newton.LOSS_SQUARED_HINGE, 0.0, True)
    with pytest.raises(ValueError, match="anchor ids"):
        _newton.ErmObjective(*args, anchor_idx=np.array([[0], [3]], np.int32),
                             coding_weight=np.ones((2, 1)), n_anchors=3)
    with pytest.raises(ValueError, match=r"two \(n, k\) arrays"):
        _newton.ErmObjective(*args, anchor_idx=np.zeros((1, 1), np.int32),
                             coding_weight=np.ones((1, 1)), n_anchors=3)
    with pytest.raises(ValueError, match="-R"):
        _newton.ErmObjective(*args[:-1], False, anchor_idx=np.zeros((2, 1), np.int32),
                             coding_weight=np.ones((2, 1)), n_anchors=1)
