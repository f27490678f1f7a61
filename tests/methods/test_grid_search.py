"""``-C`` for the local methods without a warm start (lcoding.methods.grid_search):
the SGD solvers, Crammer-Singer, LLC-JO / LLC-SAPL, the kernel map's other linear
solvers and the k q-metrics, each point trained cold on -v's folds."""
from __future__ import annotations

import math

import numpy as np
import pytest

from lcoding.cli import train_main
from lcoding.core.messages import Messages
from lcoding.core.options import parse_train_options
from lcoding.core.rows import as_rows
from lcoding.liblinearutil import train
from lcoding.methods import grid_search
from lcoding.methods.local_search import LocalSearchResult, best_parameters_line
from lcoding.training import cross_validation, find_parameters


@pytest.fixture(scope="module")
def rings():
    """300 rows of three noisy classes in 4 dimensions (two informative): a
    nonlinear problem the local methods fit and a linear model does not."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(300, 4))
    radius = np.hypot(X[:, 0], X[:, 1])
    y = np.digitize(radius, [0.9, 1.5]).astype(float)
    return y, as_rows(X, "x")


def _search(y, rows, options):
    params = parse_train_options(options + " -q")
    nr_fold = params.nr_fold or 5

    def cv(point):
        return cross_validation(y, rows, point, nr_fold, Messages(True))
    return grid_search.find_grid_parameters(y, rows, params, cv, Messages(True))


def _cv_rate(y, rows, options, nr_fold):
    params = parse_train_options(options + " -q")
    return float(np.mean(cross_validation(y, rows, params, nr_fold) == y))


SLOW = pytest.mark.slow       # 0.5 s or more (the quick subset's rule)


@pytest.mark.parametrize("options", [
    pytest.param("-C -s 33 -L 2 -B 1 -A 12 -k 4 -v 3", marks=SLOW),
    pytest.param("-C -s 4 -L 1 -B 1 -A 4 -k 2 -v 3", marks=SLOW),
    pytest.param("-C -s 31 -L 3 -A 8 -B 1 -v 3", marks=SLOW),
    "-C -s 40 -k 2 -Q 2 -v 3",
    "-C -s 41 -k 4 -Q 2 -y 1 -v 3",
    pytest.param("-C -s 4 -t 2 -X 40 -B 1 -v 3", marks=SLOW),
])
def test_every_point_is_cross_validation_of_its_options(rings, options):
    """A cold point is -v's model with the point's options on the same folds: the
    same rate exactly (sampled points), and the winner is the first best point."""
    y, rows = rings
    result, points = _search(y, rows, options)
    assert len(points) >= 3
    for p in points[::max(1, len(points) // 4)]:
        assert "-C" not in p.options.split() and "-v" not in p.options.split()
        assert p.rate == _cv_rate(y, rows, p.options, 3), p.options
    best = max(points, key=lambda p: p.rate)
    assert result == LocalSearchResult(best.C, best.options, best.rate)
    assert result.best_rate == _cv_rate(y, rows, result.best_options, 3)


def test_the_k_q_metrics_grid_has_no_C(rings):
    y, rows = rings
    result, points = _search(y, rows, "-C -s 40 -k 4 -Q 8 -v 3")
    # q capped at the 4 features, then q/4, q/2, q; k/2, k, 2k
    assert [p.options.split()[-4:] for p in points] == [
        ["-k", str(k), "-Q", str(q)] for k in (2, 4, 8) for q in (1, 2, 4)]
    assert all(math.isnan(p.C) for p in points) and math.isnan(result.best_C)
    line = best_parameters_line(result)
    assert line.startswith("CV accuracy = ") and "Best C" not in line
    assert "Best options: -s 40 " in line
    # -Q above the dimension is an error when training, not when searching; the
    # method's other checks stay errors of the search
    with pytest.raises(ValueError, match="-Q 8"):
        train(y, rows.to_csr(), "-s 40 -k 4 -Q 8 -q")
    with pytest.raises(ValueError, match="-l 5: more PCA dimensions than the 4 features"):
        train(y, rows.to_csr(), "-C -s 41 -l 5 -q")


def test_kq_grid_rules():
    p = parse_train_options("-s 41 -k 8 -Q 20 -l 10")
    assert grid_search.kq_grid(p, 50) == [(k, q) for k in (4, 8, 16) for q in (2, 5, 10)]
    p = parse_train_options("-s 40 -k 1 -Q 2 -z 0.5")
    assert grid_search.kq_grid(p, 2) == [(k, q) for k in (1, 2) for q in (1, 2)]


@SLOW
def test_the_C_path_is_coarse_from_c_and_stops(rings):
    """C runs over powers of 4 from -c (1/64 without it) to 1024; a path ends after
    two values without a better rate once it rose above its start."""
    y, rows = rings
    _, points = _search(y, rows, "-C -s 31 -L 2 -B 1 -A 8 -k 4 -u 1 -c 0.5 -v 3")
    Cs = [p.C for p in points if p.n_anchors == 8 and p.coding_param == 1.0]
    assert Cs[0] == 0.5 and all(b == 4 * a for a, b in zip(Cs, Cs[1:]))
    assert Cs[-1] <= 1024
    _, points = _search(y, rows, "-C -s 31 -L 2 -B 1 -A 8 -k 4 -u 1 -v 3")
    rates = [p.rate for p in points if p.n_anchors == 8 and p.coding_param == 1.0]
    assert points[0].C == 1.0 / 64
    if len(rates) < 17:                 # stopped early: by the patience rule
        best = max(rates)
        assert best > rates[0] and rates.index(best) == len(rates) - 3
    # a path that runs to 1024 says so, as the warm paths do
    lines = []
    params = parse_train_options("-C -s 40 -k 1 -Q 1 -v 3")
    grid_search.find_grid_parameters(y, rows, parse_train_options(
        "-C -s 31 -L 2 -B 1 -A 8 -k 4 -u 1 -c 256 -v 3"),
        lambda p: cross_validation(y, rows, p, 3, Messages(True)), lines.append)
    assert lines.count("WARNING: maximum C reached.\n") == 6     # one per setting
    lines.clear()
    grid_search.find_grid_parameters(y, rows, params,
                                     lambda p: cross_validation(y, rows, p, 3, Messages(True)),
                                     lines.append)
    assert not any("WARNING" in l for l in lines)                 # no C, no path


def test_a_setting_that_fails_is_skipped_with_a_line(rings):
    y, rows = rings
    params = parse_train_options("-C -s 31 -L 2 -B 1 -A 12 -k 4 -u 1 -v 3")
    lines = []
    calls = []

    def cv(point):
        calls.append(int(point.n_anchors))
        if point.n_anchors == 6:
            raise ValueError("-A 6: too many anchors for this fold")
        return cross_validation(y, rows, point, 3, Messages(True))
    result, points = grid_search.find_grid_parameters(y, rows, params, cv, lines.append)
    skipped = [l for l in lines if "skipped (-A 6: too many" in l]
    assert [l.split("\t")[0] for l in skipped] == ["A=6"] * 3       # one line a -u
    assert {p.n_anchors for p in points} == {12} and calls.count(6) == 3

    def always(point):
        raise ValueError("nothing trains")
    with pytest.raises(ValueError, match="no setting could be trained .nothing trains"):
        grid_search.find_grid_parameters(y, rows, params, always, lines.append)


@SLOW
def test_search_is_seeded(rings):
    y, rows = rings
    a = _search(y, rows, "-C -s 31 -L 2 -A 6 -B 1 -v 3 -S 3")
    b = _search(y, rows, "-C -s 31 -L 2 -A 6 -B 1 -v 3 -S 3")
    assert a == b


@SLOW
def test_train_and_the_command_line(rings, tmp_path, capsys):
    y, rows = rings
    result = train(y, rows.to_csr(), "-C -s 31 -L 2 -B 1 -A 8 -k 4 -u 1 -v 3")
    out = capsys.readouterr().out
    assert isinstance(result, LocalSearchResult)
    assert [l for l in out.splitlines() if l][-1].startswith("Best C = ")
    assert "A=8\tu=1\tlog2c=  -6.00\trate=" in out
    # the winner's options train the model
    assert train(y, rows.to_csr(), result.best_options + " -q").nr_class == 3
    path = tmp_path / "rings.train"
    X = rows.to_csr()
    with open(path, "w") as fh:
        for i in range(X.shape[0]):
            r = X[i]
            fh.write("%g %s\n" % (y[i], " ".join(f"{j + 1}:{v:.17g}"
                                                  for j, v in zip(r.indices, r.data))))
    assert train_main(["-C", "-s", "41", "-y", "1", "-k", "2", "-Q", "2", "-v", "3",
                       str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Doing parameter search with 3-fold cross validation."
    assert out[1].startswith("k=1\tQ=1\trate=")
    assert out[-1].startswith("CV accuracy = ") and "Best options: -s 41 -y 1" in out[-1]
    assert not (tmp_path / "rings.train.model").exists()        # -C writes no model


def test_routing():
    cold = ["-s 4 -L 2", "-s 31 -L 3", "-s 33 -L 2", "-s 40", "-s 41", "-s 4 -t 2",
            "-s 30 -L 4", "-s 32 -L 5"]
    # local_search's paths: warm, or cold on shared anchors (-s 30, 32 on LL-SVM) or a
    # shared map (the one-vs-rest linear solvers after -t)
    warm = ["-s 1 -L 2", "-s 2 -L 2", "-s 3 -L 6", "-s 2 -t 2", "-s 1 -L 4", "-s 2", "-s 0",
            "-s 30 -L 2", "-s 32 -L 1", "-s 0 -t 2", "-s 5 -t 2", "-s 7 -t 2", "-s 30 -t 2"]
    for options in cold:
        assert grid_search.searches_cold(parse_train_options(options)), options
    for options in warm:
        assert not grid_search.searches_cold(parse_train_options(options)), options
    # the router refuses nothing it sends on: -C -s 40 reaches the grid
    y = np.array([0.0, 1.0] * 10)
    X = np.random.default_rng(0).normal(size=(20, 3)) + y[:, None]
    result = find_parameters(y, as_rows(X, "x"), parse_train_options("-C -s 40 -k 1 -Q 1 -v 2 -q"))
    assert 0.5 <= result.best_rate <= 1.0


@SLOW
@pytest.mark.parametrize("make", [
    lambda: __import__("lcoding").LocallyLinearSVC(solver="primal_newton"),
    lambda: __import__("lcoding").LocallyLinearSVC(solver="sgd"),
    lambda: __import__("lcoding").AnchorPlanesSVC(),
    lambda: __import__("lcoding").LLCJointSVC(),
    lambda: __import__("lcoding").KQMetricsClassifier(),
    lambda: __import__("lcoding").KQMetricsClassifier(solver="metrics"),
    lambda: __import__("lcoding").InvariantSVC(),
], ids=["llsvm-newton", "llsvm-sgd", "occ", "llc-jo", "kq-flats", "kq-metrics", "kpca-map"])
def test_C_searches_every_estimators_options(rings, make, capsys):
    """-C added to any estimator's to_options() searches around it, and the winner's
    options train a model of the same method (before: -s 2, 30-33, 40, 41 refused)."""
    import warnings
    y, rows = rings
    X = rows.to_csr().toarray()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)      # capped 'auto' defaults
        options = make().fit(X, y).to_options()
    result = train(y, X, "-C -v 2 " + options)
    assert isinstance(result, LocalSearchResult) and 0.3 < result.best_rate <= 1.0
    head = options.split()[:2]
    assert result.best_options.split()[:2] == head          # the same -s
    model = train(y, X, result.best_options)
    assert model.nr_class == 3
    capsys.readouterr()


def test_a_setting_whose_anchors_cannot_be_learned_is_skipped():
    """The width rule's anchors of a setting larger than fold 1's rows: skipped with a
    line before any training (was an error ending the search)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3))
    y = np.r_[np.zeros(6), np.ones(6)]
    rows = as_rows(X, "x")
    lines = []
    params = parse_train_options("-C -s 31 -L 3 -A 20 -B 1 -v 3")
    _, points = grid_search.find_grid_parameters(
        y, rows, params, lambda p: cross_validation(y, rows, p, 3, Messages(True)),
        lines.append)
    assert "A=10\tskipped (-A 10: more anchors than training rows (8))\n" in lines
    assert {p.n_anchors for p in points} == {5}
