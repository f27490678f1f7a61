"""``-C`` with a local coding (lcoding.methods.local_search): the search of C, -u and
-A on the -v folds, warm-started along C, with anchors and codes shared."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from lcoding.cli import train_main
from lcoding.core.messages import Messages
from lcoding.core.options import OptionError, options_string, parse_train_options
from lcoding.io.model_files import model_to_text
from lcoding.linear import _dual_cd, dual_cd
from lcoding.linear.problem import BinaryProblem, Coding
from lcoding.liblinearutil import train
from lcoding.local.coding import LocalCoding
from lcoding.methods import llsvm, local_search
from lcoding.methods.local_search import LocalSearchResult, find_local_parameters
from lcoding.core.rows import as_rows
from lcoding.core.seeds import rng_state
from lcoding.training import cross_validation

N_SMALL = 500


@pytest.fixture(scope="module")
def small(request):
    """A seeded 500-row subset of banana's training set (2 features, 2 classes)."""
    from lcoding.io import datasets
    try:
        y, rows = datasets.load("banana", "train")
    except FileNotFoundError as err:    # pragma: no cover
        pytest.skip(str(err))
    ids = np.sort(np.random.default_rng(0).choice(rows.n_rows, N_SMALL, replace=False))
    return y[ids], rows.take(ids)


def _search(y, rows, options, counter=None):
    return find_local_parameters(y, rows, parse_train_options(options), Messages(True),
                                 counter=counter)


def _cv_rate(y, rows, options):
    params = parse_train_options(options + " -q")
    return float(np.mean(cross_validation(y, rows, params, params.nr_fold) == y))


@pytest.mark.slow
@pytest.mark.parametrize("options", ["-C -L 2 -B 1 -A 12 -k 4",
                                     "-C -s 2 -L 2 -B 1 -A 12 -k 4",
                                     "-C -s 2 -L 5 -u 0 -B 1 -A 2 -v 3",
                                     "-C -L 1 -A 8 -k 4 -v 4",
                                     "-C -L 5 -u 3 -B 1 -K 1 -A 6 -e 0.01"])
def test_cv_rate_of_a_point_equals_cross_validation(small, options):
    """The first point of each C path (cold start) is -v's model on the same folds:
    the same rate exactly; warm-started points agree within a few rows while the
    dual CD converges (C <= 1 here)."""
    y, rows = small
    _, points = _search(y, rows, options)
    firsts = {}
    for p in points:
        firsts.setdefault((p.n_anchors, p.coding_param), p)
    nr_fold = 4 if "-v 4" in options else 3 if "-v 3" in options else 5
    for p in firsts.values():
        assert p.rate == _cv_rate(y, rows, f"{p.options} -v {nr_fold}")
    warm = [p for p in points if p not in firsts.values() and p.C <= 1.0][::4]
    assert warm
    for p in warm:
        assert abs(p.rate - _cv_rate(y, rows, f"{p.options} -v {nr_fold}")) <= 3.0 / N_SMALL


@pytest.mark.slow
@pytest.mark.parametrize("options", ["-C -s 30 -L 2 -B 1 -A 12 -k 4 -v 3",
                                     "-C -s 32 -L 1 -A 8 -k 4 -c 0.25 -v 3"])
def test_sgd_points_are_cross_validation_on_shared_anchors(small, options):
    """-s 30, 32 on an LL-SVM coding: no warm start, so every point is -v's model at
    its options, exactly -- on each fold's anchors and codes, learned once per fold and
    setting for all the C; C runs over powers of 4 (from -c, else 1/64)."""
    y, rows = small
    counter = {}
    _, points = _search(y, rows, options, counter)
    settings = {(p.n_anchors, p.coding_param) for p in points}
    assert counter["codes"] == 3 * len(settings)
    assert counter["anchors"] == 3 * len({a for a, _ in settings})
    for p in points[::3]:
        assert p.rate == _cv_rate(y, rows, p.options + " -v 3"), p.options
    first = points[0].C
    assert first == (0.25 if "-c 0.25" in options else 1.0 / 64)
    Cs = [p.C for p in points if (p.n_anchors, p.coding_param) == (points[0].n_anchors,
                                                                     points[0].coding_param)]
    assert all(b == 4 * a for a, b in zip(Cs, Cs[1:]))


@pytest.mark.slow
def test_anchors_and_codes_are_computed_once_per_fold_and_setting(small, monkeypatch):
    y, rows = small
    calls = {"anchors": 0, "code": 0}
    learn, code = llsvm.learn_local_anchors, LocalCoding.code

    def counting_learn(*args, **kwargs):
        calls["anchors"] += 1
        return learn(*args, **kwargs)

    def counting_code(self, *args, **kwargs):
        calls["code"] += 1
        return code(self, *args, **kwargs)

    monkeypatch.setattr(llsvm, "learn_local_anchors", counting_learn)
    monkeypatch.setattr(LocalCoding, "code", counting_code)
    counter = {}
    result, points = _search(y, rows, "-C -L 2 -B 1 -A 16 -k 4 -v 3", counter)
    n_anchor_settings = len({p.n_anchors for p in points})
    settings = {(p.n_anchors, p.coding_param) for p in points}
    assert n_anchor_settings == 3 and len(settings) == 9
    assert len(points) > 3 * len(settings)          # several C values per setting
    assert calls["anchors"] == 3 * n_anchor_settings == counter["anchors"]
    # every fold's training and held-out rows coded once per setting, not per C
    assert calls["code"] == 2 * 3 * len(settings)
    assert counter["codes"] == 3 * len(settings)


@pytest.mark.slow
def test_best_options_retrain_to_the_model(small):
    y, rows = small
    X = rows.to_csr()
    result = train(y, X, "-C -L 2 -B 1 -A 12 -k 4 -q")
    assert isinstance(result, LocalSearchResult)
    best_C, best_options, best_rate = result          # unpacks as a 3-tuple
    params = parse_train_options(best_options)
    assert not params.flag_find_parameters and not params.flag_cross_validation
    assert params.C == best_C and params.coding == 2 and params.bias == 1
    model = train(y, X, best_options)
    core = model.core
    assert core.n_anchors == params.n_anchors and core.coding.param == params.coding_param
    again = train(y, X, f"-s 1 -L 2 -B 1 -k 4 -q -c {best_C!r} -A {params.n_anchors} "
                        f"-u {params.coding_param!r}")
    assert model_to_text(core) == model_to_text(again.core)
    # the search's rate is the best of its points; -v of the winner is that rate up to
    # the warm start (a few rows)
    _, points = _search(y, rows, "-C -L 2 -B 1 -A 12 -k 4")
    assert best_rate == max(p.rate for p in points)
    assert abs(_cv_rate(y, rows, best_options + " -v 5") - best_rate) <= 3.0 / N_SMALL


@pytest.mark.slow
def test_search_is_deterministic_and_seeded(small):
    y, rows = small
    a = _search(y, rows, "-C -L 1 -A 8 -k 4")
    b = _search(y, rows, "-C -L 1 -A 8 -k 4")
    assert a == b
    c = _search(y, rows, "-C -L 1 -A 8 -k 4 -S 7")
    assert [p.rate for p in c[1]] != [p.rate for p in a[1]]


@pytest.mark.slow
def test_grids(small):
    y, rows = small
    y, rows = y[:250], rows.take(np.arange(250))
    _, points = _search(y, rows, "-C -L 6 -A 8 -k 4 -u 2 -c 0.5")
    assert sorted({p.n_anchors for p in points}) == [4, 8]          # 2 < -k 4 left out
    assert sorted({p.coding_param for p in points}) == [2.0, 20.0, 200.0]
    assert min(p.C for p in points) == 0.5                            # -c: the start C
    assert max(p.C for p in points) <= 1024
    # -L 2 without -u: centred on 3 / median(d_k - d_1), two significant digits
    _, points = _search(y, rows, "-C -L 2 -A 8 -k 4")
    us = sorted({p.coding_param for p in points if p.n_anchors == 8})
    assert len(us) == 3 and us[1] == float(f"{us[1]:.2g}")
    assert us[0] == pytest.approx(us[1] / 2, rel=0.05) and us[2] == pytest.approx(2 * us[1], rel=0.05)


@pytest.mark.slow
def test_train_prints_one_line_per_point_and_the_best_line(small, capsys):
    y, rows = small
    result = train(y, rows.to_csr(), "-C -L 1 -A 8 -k 4")
    out = capsys.readouterr().out
    lines = [l for l in out.splitlines() if "log2c=" in l]
    _, points = _search(y, rows, "-C -L 1 -A 8 -k 4")
    assert len(lines) == len(points)
    assert lines[0].startswith("A=4\tu=0.5\tlog2c=") and "\trate=" in lines[0]
    assert f"Best C = {result.best_C:g}  CV accuracy = {100 * result.best_rate:g}%  " \
           f"Best options: {result.best_options}" in out
    train(y, rows.to_csr(), "-C -L 1 -A 8 -k 4 -q")
    quiet = capsys.readouterr().out
    assert "log2c=" not in quiet and "Best C = " in quiet      # LIBLINEAR's -q rule


@pytest.mark.slow
def test_cli_C_with_a_local_coding(small, tmp_path, capsys, monkeypatch):
    y, rows = small
    path = tmp_path / "small.train"
    X = rows.to_csr()
    with open(path, "w") as fh:
        for i in range(X.shape[0]):
            row = X[i]
            fh.write("%g %s\n" % (y[i], " ".join(f"{j + 1}:{v:g}" for j, v in
                                                  zip(row.indices, row.data))))
    monkeypatch.chdir(tmp_path)
    assert train_main(["-C", "-L", "2", "-A", "8", "-k", "4", "-B", "1", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Doing parameter search with 5-fold cross validation."
    assert any(l.startswith("A=8\tu=") and "log2c=" in l for l in out)
    assert out[-1].startswith("Best C = ") and "Best options: -s 1 -L 2 -k 4 -B 1 -c " in out[-1]
    assert not (tmp_path / "small.train.model").exists()       # -C writes no model
    assert train_main(["-C", "-L", "2", "-s", "5", str(path)]) == 1
    assert "-s 5 (L1R_L2LOSS_SVC) with -L 2" in capsys.readouterr().err


@pytest.mark.parametrize("options, option", [
    ("-C -L 2 -s 5", "-s 5"), ("-C -L 1 -s 31", "-L 1"), ("-C -L 4 -u 1 -s 2", "-s 2"),
    ("-C -s 41 -B 1", "-B 1"), ("-C -t 2 -L 2", "-L"), ("-C -K 1", "-K"),
    ("-C -H 2 -L 2", "-H"),
])
def test_options_that_cannot_be_searched_raise_naming_the_option(small, options, option):
    y, rows = small
    with pytest.raises(ValueError, match=option):
        train(y, rows.to_csr(), options)


def test_parse_rules_of_C():
    assert parse_train_options("-C").solver_type == 2                  # LIBLINEAR's rule
    assert parse_train_options("-C -L 2").solver_type == 1             # the local default
    assert parse_train_options("-C -L 2 -s 3").solver_type == 3
    assert parse_train_options("-C -L 2").nr_fold == 5
    with pytest.raises(OptionError, match="only available for -s 0, -s 2"):
        parse_train_options("-C -s 1")


def test_options_string_round_trips():
    params = parse_train_options("-s 3 -L 2 -w1 0.3 -B 1 -q -u 0.1 -C -v 4 -R")
    text = options_string(params, drop=("-C", "-v"))
    assert text == "-s 3 -L 2 -w1 0.3 -B 1 -q -u 0.1 -R"
    again = parse_train_options(text)
    assert (again.weight, again.coding_param, again.regularize_bias) == ([0.3], 0.1, 0)


def test_dual_cd_warm_start_from_alpha(small):
    """init_alpha: W computed from alpha (the new kernel) and the solve continued."""
    y, rows = small
    anchors = rows.to_csr()[:6].toarray()
    idx, wt = LocalCoding(2, anchors, 3, 1.0).code(rows)
    coding = Coding(idx, wt, 6)
    y_pm = np.where(y == y[0], 1, -1).astype(np.int8)
    params = parse_train_options("-s 1 -e 0.001")

    def prob():
        return BinaryProblem(rows, y_pm, 1.0, 1.0, 1.0, rng_state(1, 1), coding=coding)

    cold = dual_cd.solve_l2r_l1l2_svc(prob(), params, Messages(True), "l2")
    warm = dual_cd.solve_l2r_l1l2_svc(prob(), params, Messages(True), "l2",
                                      init_alpha=cold.alpha)
    assert warm.n_iter <= 2
    np.testing.assert_allclose(warm.w, cold.w, rtol=1e-4, atol=1e-4)
    # the kernel's W = sum_i y_i alpha_i z_i is the W the passes accumulated
    W = np.empty_like(cold.w)
    assert _dual_cd.dual_w_from_alpha(rows.data, rows.indices, rows.indptr, rows.n_features,
                                      1.0, idx, wt, y_pm, cold.alpha, W)
    np.testing.assert_allclose(W, cold.w, rtol=1e-10, atol=1e-10)
    # the start at a smaller C's solution converges to the same optimum
    small_C = BinaryProblem(rows, y_pm, 0.25, 0.25, 1.0, rng_state(1, 1), coding=coding)
    a0 = dual_cd.solve_l2r_l1l2_svc(small_C, params, Messages(True), "l2").alpha
    path = dual_cd.solve_l2r_l1l2_svc(prob(), params, Messages(True), "l2", init_alpha=a0)
    assert abs(path.objective - cold.objective) <= 1e-3 * abs(cold.objective)
    with pytest.raises(ValueError, match="init_alpha"):
        dual_cd.solve_l2r_l1l2_svc(prob(), params, Messages(True), "l2",
                                   init_alpha=np.zeros(3))


@pytest.mark.slow
def test_banana_search_finds_a_good_model(shared_data):
    """Full banana training set: the searched LL-SVM is within a point of the RBF
    SVM's test error (~9.5-10 %), every choice made on the training folds."""
    y, X, ty, tX = shared_data("banana")
    from lcoding.liblinearutil import predict
    result = train(y, X, "-C -L 2 -B 1 -q")
    assert result.best_rate > 0.895
    model = train(y, X, result.best_options)
    _, (acc, _, _), _ = predict(ty, tX, model, "-q")
    assert acc > 89.0





@pytest.mark.slow
@pytest.mark.parametrize("options", ["-L 1 -k 4", "-L 2 -k 4", "-L 3", "-L 6 -k 4",
                                     "-L 4 -K 1 -u 1", "-L 5 -K 1 -u 0", "-L 5 -K 1 -u 2",
                                     "-L 2 -s 3 -k 4 -K 3"])
def test_every_local_coding_is_searched(small, options):
    """Every -L of the option table: a search whose first point is -v's model and whose
    best options train (a tiny grid: -A 8, C from 0.25)."""
    y, rows = small
    counter = {}
    result, points = _search(y[:200], rows.take(np.arange(200)),
                             f"-C {options} -A 8 -B 1 -c 0.25", counter)
    assert points[0].C == 0.25 and result.best_rate == max(p.rate for p in points)
    assert points[0].rate == _cv_rate(y[:200], rows.take(np.arange(200)),
                                      points[0].options + " -v 5")
    n_settings = len({(p.n_anchors, p.coding_param) for p in points})
    assert counter["codes"] == 5 * n_settings
    model = train(y[:200], rows.take(np.arange(200)).to_csr(), result.best_options + " -q")
    assert model.get_nr_class() == 2


@pytest.mark.slow
def test_C_search_of_one_binary_problem_splits_its_rows_over_m_threads(small, monkeypatch):
    """-C -m 2 on a two-class set: every fold's solve along C runs on two threads
    (lcoding.linear.cocoa, warm-started from the previous C); the same rates as -m 1
    within a few rows, the same result on every run."""
    from lcoding.linear import cocoa
    y, rows = small
    calls = []
    real = cocoa.solve_l2r_l1l2_svc_cocoa

    def counting(prob, params, info, loss, n_parts, **kw):
        calls.append((n_parts, kw.get("init_alpha") is not None))
        return real(prob, params, info, loss, n_parts, **kw)
    monkeypatch.setattr(cocoa, "solve_l2r_l1l2_svc_cocoa", counting)
    monkeypatch.setattr(cocoa, "PARALLEL_MIN_NONZEROS", 0)     # 333 rows a fold: small
    options = "-C -L 2 -B 1 -A 12 -k 4 -u 1 -v 3"
    one = _search(y, rows, options)
    assert not calls
    two = _search(y, rows, options + " -m 2")
    assert calls and {n for n, _ in calls} == {2} and any(warm for _, warm in calls)
    assert _search(y, rows, options + " -m 2") == two
    # up to C = 8 the solves converge (a few rows apart); past it both stop at the
    # pass cap along the path, each at its own point (within 2 % of the rows)
    rates = {(p.n_anchors, p.coding_param, p.C): p.rate for p in one[1]}
    shared = [(p.C, abs(rates[k] - p.rate)) for p in two[1]
              if (k := (p.n_anchors, p.coding_param, p.C)) in rates]
    assert len(shared) > 50
    assert max(d for C, d in shared if C <= 8) <= 4.5 / N_SMALL
    assert max(d for C, d in shared) <= 10.0 / N_SMALL
    assert abs(one[0].best_rate - two[0].best_rate) <= 10.0 / N_SMALL


@pytest.mark.slow
def test_stalled_solves_along_the_path_hand_over_to_newton(monkeypatch):
    """Rows with a large common component (LETTER's raw features, in small): the
    dual CD stalls at most points.  As in training, each stalled solve hands over to
    Newton, whose dual point warm-starts the next C; the cold start of every path is
    still -v's model exactly."""
    rng = np.random.default_rng(5)
    X = 30.0 + rng.normal(size=(600, 4))
    y = np.where(X[:, 0] - 30 + 0.5 * (X[:, 1] - 30) ** 2 - 0.5 + 0.5 * rng.normal(size=600) > 0,
                 1.0, -1.0)
    rows = as_rows(sp.csr_matrix(X))
    calls = []
    real = dual_cd.newton_after_stall
    monkeypatch.setattr(dual_cd, "newton_after_stall",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    best, points = _search(y, rows, "-C -L 2 -B 1 -A 8 -k 2 -v 3")
    assert len(calls) > len(points) // 2
    assert best.best_rate > 0.8
    firsts = {}
    for p in points:
        firsts.setdefault((p.n_anchors, p.coding_param), p)
    for p in firsts.values():
        assert p.rate == _cv_rate(y, rows, f"{p.options} -v 3")


def test_dual_point_of_newtons_w_is_the_dual_solution(small):
    """alpha_i = 2 C_i max(0, 1 - y_i w.z_i) from Newton's w is the dual CD's alpha
    at the optimum (a coded problem, per-row C), and a dual CD warm-started there is
    already converged."""
    from lcoding.linear.newton import squared_hinge_dual_point, train_l2r_l2loss_svc
    y, rows = small
    idx, wt = LocalCoding(2, rows.to_csr()[:6].toarray(), 3, 1.0).code(rows)
    y_pm = np.where(y == y[0], 1, -1).astype(np.int8)

    def prob():
        return BinaryProblem(rows, y_pm, 0.0, 0.0, 1.0, rng_state(3, 0),
                             coding=Coding(idx, wt, 6), sample_C=np.where(y_pm > 0, 2.0, 0.5))

    tight = parse_train_options("-s 1 -e 1e-9 -q")
    dual = dual_cd.solve_l2r_l1l2_svc(prob(), tight, Messages(True), "l2", max_iter=100000)
    primal = train_l2r_l2loss_svc(prob(), parse_train_options("-s 2 -e 1e-12 -q"),
                                  Messages(True))
    alpha = squared_hinge_dual_point(prob(), tight, primal.w)
    assert alpha.min() >= 0.0
    np.testing.assert_allclose(alpha, dual.alpha, rtol=1e-5, atol=1e-6)
    warm = dual_cd.solve_l2r_l1l2_svc(prob(), parse_train_options("-s 1 -q"), Messages(True),
                                      "l2", init_alpha=alpha)
    assert warm.n_iter <= 2


# ------------------------------------------------------------ -C with a kernel PCA map
def _kernel_search(y, rows, options, counter=None, c_only=False):
    return local_search.find_kernel_map_parameters(y, rows, parse_train_options(options),
                                                   Messages(True), counter=counter,
                                                   c_only=c_only)


@pytest.mark.parametrize("options", ["-C -t 2 -X 60 -B 1 -c 0.5 -e 0.01",
                                     "-C -s 3 -t 1 -r 1 -X 40 -c 0.25 -v 3",
                                     "-C -s 2 -t 2 -X 60 -B 1 -c 0.5 -v 3"])
@pytest.mark.slow
def test_kernel_map_search_points_are_cross_validation(small, options):
    """-C -t: for each -g of the grid (g/4, g, 4g around LIBSVM's 1 / features), the
    first point of the C path (cold start) is -v's model on the same folds, the same
    rate exactly; the fold's map is built once per -g and shared by every C; the
    winner's options train with -v to its rate."""
    y, rows = small
    counter = {}
    result, points = _kernel_search(y, rows, options, counter)
    gammas = sorted({p.coding_param for p in points})
    assert np.allclose(gammas, [0.125, 0.5, 2.0])        # 2 features: g = 1/2
    nr_fold = parse_train_options(options).nr_fold
    assert counter["maps"] == 3 * nr_fold
    assert len(points) > 3 * 2                            # C paths, not single points
    for g in gammas:
        first = next(p for p in points if p.coding_param == g)
        assert "-C" not in first.options.split() and f"-g {g:g}" in first.options
        assert first.rate == _cv_rate(y, rows, first.options + f" -v {nr_fold}")
    best = max(points, key=lambda p: p.rate)
    assert result.best_options == best.options and result.best_rate == best.rate
    # the winner's options train a model (the kernel map, not a -C search)
    params = parse_train_options(result.best_options)
    assert not params.flag_find_parameters and params.kernel_type >= 0


@pytest.mark.slow
@pytest.mark.parametrize("solver", [0, 5, 7, 30])
def test_kernel_map_search_with_another_linear_solver_shares_the_map(small, solver):
    """-C -t with a one-vs-rest solver that has no warm start (logistic regression,
    L1, SGD): every C is trained cold on each fold's map, built once per -g, and every
    point is -v's rate exactly; C over powers of 4 from -c."""
    y, rows = small
    counter = {}
    options = f"-C -s {solver} -t 2 -X 40 -B 1 -c 0.25 -v 3"
    _, points = _kernel_search(y, rows, options, counter)
    assert counter["maps"] == 3 * 3                       # 3 folds x 3 values of -g
    g0 = [p for p in points if p.coding_param == points[0].coding_param]
    assert g0[0].C == 0.25 and all(b.C == 4 * a.C for a, b in zip(g0, g0[1:]))
    for p in points[::3]:
        assert p.rate == _cv_rate(y, rows, p.options + " -v 3"), p.options


@pytest.mark.parametrize("solver, kind", [(11, "regression"), (12, "regression"),
                                          (21, "one-class")])
def test_kernel_map_search_refuses_regression_and_one_class(solver, kind):
    X = np.random.default_rng(0).normal(size=(30, 3))
    y = (X[:, 0] > 0).astype(float)
    with pytest.raises(ValueError, match=f"-s {solver} is a {kind} solver .option -s."):
        train(y, X, f"-C -s {solver} -t 2 -q")


def test_kernel_map_search_with_c_only_keeps_g(small):
    y, rows = small
    _, points = _kernel_search(y, rows, "-C -t 2 -g 3 -X 30 -B 1 -c 1", c_only=True)
    assert {p.coding_param for p in points} == {3.0}
    assert points[0].C == 1.0


def test_kernel_map_search_refuses_what_it_cannot_search():
    X = np.random.default_rng(0).random((20, 2))
    y = (X[:, 0] > 0.5).astype(float)
    for options, message in [("-C -t 2 -H 1 -J 1 -N 1", "invariance"),
                             ("-C -t 2 -L 2", "no local coding"),
                             ("-C -t 2 -K 1", "no local coding")]:
        with pytest.raises(ValueError, match=message):
            train(y, X, options + " -q")


def test_kernel_map_search_from_the_command_line(tmp_path, capsys, small):
    y, rows = small
    data = tmp_path / "small.svm"
    csr = sp.csr_matrix((rows.data, rows.indices, rows.indptr), shape=(rows.n_rows, 2))
    with open(data, "w") as fh:
        for label, row in zip(y, csr):
            fh.write(f"{label:g} " + " ".join(f"{j + 1}:{v:.17g}" for j, v in
                                              zip(row.indices, row.data)) + "\n")
    assert train_main(["-C", "-t", "2", "-X", "40", "-B", "1", "-c", "1", "-q",
                       str(data)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Doing parameter search with 5-fold cross validation.")
    assert "Best C = " in out and "Best options: -s 1 -t 2 -X 40 -B 1 -q -g " in out


# ------------------------------------- SharedFolds: one setting's folds at several C
@pytest.mark.parametrize("options,work", [
    ("-s 1 -t 2 -g 0.5 -X 60 -B 1", {"maps": 3}),
    ("-s 1 -L 2 -B 1 -A 12 -k 4 -u 2", {"anchors": 3, "codes": 3}),
    ("-s 3 -L 1 -A 8 -k 4", {"anchors": 3, "codes": 3}),
    ("-s 1 -L 5 -u 3 -B 1 -K 1 -A 6", {"codes": 3}),
    ("-s 1 -L 4 -u 1 -B 1 -A 2", {"codes": 3}),
    ("-s 2 -L 2 -B 1 -A 12 -k 4 -u 2", {"anchors": 3, "codes": 3}),
    ("-s 2 -t 2 -g 0.5 -X 60 -B 1", {"maps": 3}),
])
def test_shared_folds_train_every_C_as_cross_validation(small, options, work):
    """cross_validation_at_Cs: the labels -v gives at each C, exactly, with each
    fold's map (anchors, planes, codes) built once for all the C."""
    y, rows = small
    counter = {}
    Cs = [0.25, 1.0, 16.0]
    targets, shared, seconds, own = local_search.cross_validation_at_Cs(
        y, rows, parse_train_options(options + " -S 4 -q"), Cs, 3, counter=counter,
        keep_bytes=1 << 30)
    for key, count in work.items():
        assert counter[key] == count
    assert seconds == shared.seconds >= 0 and len(own) == 3
    assert shared.complete and shared.nbytes > 0
    for C, target in zip(Cs, targets):
        params = parse_train_options(options + f" -c {C:g} -S 4 -q")
        np.testing.assert_array_equal(target, cross_validation(y, rows, params, 3))
    # the kept work gives the same labels again without building anything
    again, paid, _ = shared.targets_at(Cs[::-1])
    assert paid == 0.0 and all(counter[key] == count for key, count in work.items())
    for target, twice in zip(targets, again[::-1]):
        np.testing.assert_array_equal(target, twice)


def test_shared_folds_hold_one_fold_at_a_time_unless_asked(small, monkeypatch):
    import gc
    import weakref
    """Without keep_bytes the folds' maps are built and dropped one after another (the
    memory of -v); a budget too small for all of them keeps what fits, and a later
    call rebuilds only the others."""
    y, rows = small
    params = parse_train_options("-s 1 -t 2 -g 0.5 -X 60 -B 1 -S 4 -q")
    counter = {}
    _, lean, _, _ = local_search.cross_validation_at_Cs(y, rows, params, [1.0], 3,
                                                        counter=counter)
    assert lean.nbytes == 0 and not lean.complete and counter["maps"] == 3
    live = []
    real = local_search._KernelMapSetting.__init__

    def tracking(self, *args, **kwargs):
        real(self, *args, **kwargs)
        live.append(weakref.ref(self))
        alive = [r for r in live if r() is not None]
        assert len(alive) == 1, [gc.get_referrers(r()) for r in alive[:-1]]
    monkeypatch.setattr(local_search._KernelMapSetting, "__init__", tracking)
    lean.targets_at([2.0])
    assert counter["maps"] == 6 and len(live) == 3
    monkeypatch.undo()
    one = local_search._held_bytes(local_search.SharedFolds(
        y, rows, params, 3, keep_bytes=1 << 30)._fold_work(0)[1])
    part = local_search.SharedFolds(y, rows, params, 3, counter=counter,
                                    keep_bytes=int(1.5 * one) + 200_000)
    first, _, _ = part.targets_at([1.0])
    assert 0 < len(part._kept) < 3 and not part.complete
    before = counter["maps"]
    second, paid, _ = part.targets_at([1.0])
    assert counter["maps"] - before == 3 - len(part._kept) and paid > 0
    np.testing.assert_array_equal(first[0], second[0])


def test_shared_folds_with_three_classes():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(240, 3))
    y = np.argmax(X[:, :2] @ rng.normal(size=(2, 3)), axis=1).astype(float)
    from lcoding.core.rows import as_rows
    rows = as_rows(X, "x")
    for options in ("-s 1 -t 2 -X 50 -B 1", "-s 1 -L 2 -B 1 -A 9 -k 3 -u 1"):
        params = parse_train_options(options + " -S 1 -q")
        targets, *_ = local_search.cross_validation_at_Cs(y, rows, params, [0.5, 4.0], 4)
        for C, target in zip((0.5, 4.0), targets):
            np.testing.assert_array_equal(
                target, cross_validation(y, rows, params.replaced(C=C), 4))


def test_what_shares_fold_work():
    yes = ["-s 1 -t 2 -X 60", "-s 3 -L 2 -A 9 -k 4", "-s 1 -L 6 -A 9 -k 4",
           "-s 1 -L 4 -u 1 -A 3", "-s 1 -L 2 -K 3 -A 9 -k 4", "-s 2 -L 2 -A 9 -k 4",
           "-s 2 -t 2 -X 60"]
    no = ["-s 2 -B 1", "-s 0", "-s 30 -L 2 -A 9 -k 4", "-s 41 -k 8 -Q 3 -l 2",
          "-s 31 -L 3 -A 9", "-s 0 -t 2 -X 60",
          "-s 1 -t 2 -H 1 -X 40", "-s 1 -L auto", "-s 1 -L 4 -u 1.5 -A 3"]
    for options in yes:
        assert local_search.shares_fold_work(parse_train_options(options)), options
    for options in no:
        assert not local_search.shares_fold_work(parse_train_options(options)), options
    with pytest.raises(ValueError, match="neither a kernel PCA map nor a local coding"):
        local_search.SharedFolds(np.zeros(4), None, parse_train_options("-s 2"), 2)


def test_an_anchor_setting_a_fold_cannot_hold_is_skipped_with_a_line():
    """-A larger than a fold's rows: that setting is skipped with a line, the others
    are searched (warm path: LL-SVM's anchors, as the planes' bases already were)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 3))
    y = np.r_[np.zeros(4), np.ones(4)]
    lines = []
    result, points = find_local_parameters(y, as_rows(X, "x"),
                                           parse_train_options("-C -L 2 -A 8 -k 2 -v 4"),
                                           lines.append)
    assert "-A 8: skipped (-A 8: more anchors than training rows (6))\n" in lines
    assert {p.n_anchors for p in points} == {2, 4}
    with pytest.raises(ValueError, match="no setting of -A could be trained"):
        find_local_parameters(y, as_rows(X, "x"),
                              parse_train_options("-C -L 2 -A 40 -k 20 -v 4"), lines.append)


def test_shared_folds_time_the_work_that_does_not_grow_with_the_rows():
    """SharedFolds.fixed_seconds: the kernel map's landmark work (Gram matrix, pivots,
    eigenproblem), counted once all -X landmarks are drawn -- then it does not grow
    with the rows (the selector's predictions) -- else 0, as for a local coding."""
    rng = np.random.default_rng(6)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] * X[:, 1] > 0).astype(float)
    from lcoding.core.rows import as_rows
    rows = as_rows(X, "x")
    for options, capped in (("-s 1 -t 2 -X 60 -B 1", True),     # 200 fold rows, 60 drawn
                            ("-s 1 -t 2 -X 500 -B 1", False),   # every fold row drawn
                            ("-s 1 -L 2 -B 1 -A 9 -k 3 -u 1", False)):
        params = parse_train_options(options + " -S 1 -q")
        work = local_search.SharedFolds(y, rows, params, 3)
        work.targets_at([1.0])
        assert 0.0 <= work.fixed_seconds <= work.seconds
        assert (work.fixed_seconds > 0.0) == capped, options


def test_a_path_with_a_spent_deadline_runs_its_first_point_only():
    """deadline (the selector's C refinement): no point starts that would end after it;
    the first point of each path always runs, and is -v's at that C."""
    import time
    rng = np.random.default_rng(7)
    X = rng.normal(size=(240, 2))
    y = (X[:, 0] * X[:, 1] > 0).astype(float)
    from lcoding.core.rows import as_rows
    rows = as_rows(X, "x")
    for options, search in (("-s 1 -t 2 -g 1 -X 40 -B 1 -c 0.5",
                             local_search.find_kernel_map_parameters),
                            ("-s 1 -L 2 -B 1 -A 8 -k 3 -u 1 -c 0.5",
                             local_search.find_local_parameters)):
        params = parse_train_options("-C -v 3 -S 1 -q " + options)
        _, free = search(y, rows, params, c_only=True)
        _, spent = search(y, rows, params, c_only=True, deadline=time.perf_counter())
        assert len(free) > 1 and len(spent) == 1
        assert spent[0].C == 0.5
        cold = cross_validation(y, rows, parse_train_options(options + " -S 1 -q"), 3)
        assert spent[0].rate == np.mean(cold == y)
