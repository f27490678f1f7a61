"""lcoding.select: successive halving over methods x settings on CV folds, under a
time budget (issue 18 part 2, the core)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from lcoding import select as sel
from lcoding.core.options import float_text, parse_train_options
from lcoding.io.model_files import model_to_text
from lcoding.training import cross_validation, train_model


@pytest.fixture(scope="module")
def small():
    from lcoding.io import datasets
    try:
        y, rows = datasets.load("banana", "train")
    except FileNotFoundError as err:    # pragma: no cover
        pytest.skip(str(err))
    ids = np.sort(np.random.default_rng(1).choice(rows.n_rows, 1500, replace=False))
    return y[ids], rows.take(ids).to_csr()


@pytest.mark.slow
def test_successive_halving_table_and_winner(small, monkeypatch):
    y, X = small
    monkeypatch.setattr(sel, "MIN_ROWS", 150)
    monkeypatch.setattr(sel, "KPCA_MAX_FEATURES", 0)    # the mechanics, fast
    result = sel.select(y, X, budget_s=120, seed=3, refine_C=False)
    rungs = sorted({t.rung for t in result.trials})
    assert rungs == [0, 1, 2]                       # 1500 rows: 166, 500, all
    per_rung = [[t for t in result.trials if t.rung == r] for r in rungs]
    # a third go on, and from the second rung on up to a third of those again when
    # their errors are within one standard error of the last one kept (here one)
    kept = math_ceil(len(per_rung[0]) / 3)
    assert [len(p) for p in per_rung] == [len(sel.candidate_options(y, _rows(X), seed=3)),
                                          kept, math_ceil(kept / 3) + 1]
    assert [p[0].n_rows for p in per_rung] == [166, 500, 1500]
    assert result.model is not None and 0 < result.refit_seconds < result.seconds
    # the survivors are the best of their rung, and the winner the best of the last
    # (the defaults candidate by its place: its options follow the rung's rows)
    def key(t):
        return "defaults" if " -a 0 -I " in t.options else t.options

    first = sorted(per_rung[0], key=lambda t: t.cv_error)
    assert {key(t) for t in per_rung[1]} == {key(t) for t in first[:len(per_rung[1])]}
    second = sorted(per_rung[1], key=lambda t: t.cv_error)
    assert {key(t) for t in per_rung[2]} == {key(t) for t in second[:len(per_rung[2])]}
    tie = second[len(per_rung[2]) - 1]
    last_kept = second[math_ceil(kept / 3) - 1].cv_error / 100
    assert tie.cv_error <= 100 * (last_kept + (last_kept * (1 - last_kept) / 500) ** 0.5)
    last = min(per_rung[-1], key=lambda t: t.cv_error)
    assert result.best_options == last.options and result.cv_error == last.cv_error
    # a trial's error is -v's on the same rows and folds
    params = parse_train_options(last.options + " -S 3 -m 1 -q")
    assert 100 * np.mean(cross_validation(y, _rows(X), params, 3) != y) == last.cv_error
    assert result.model is not None and result.model.nr_class == 2
    assert "| rung | rows | options | CV error % | time s | note |" in result.table()


def math_ceil(x):
    import math
    return math.ceil(x)


def _rows(X):
    from lcoding.core.rows import as_rows
    return as_rows(X, "x")


@pytest.mark.slow
def test_deterministic_for_a_seed_and_any_thread_count(small, monkeypatch):
    y, X = small
    monkeypatch.setattr(sel, "KPCA_MAX_FEATURES", 0)    # the local candidates, fast
    a = sel.select(y, X, budget_s=120, seed=5, refit=False)
    b = sel.select(y, X, budget_s=120, seed=5, refit=False, n_threads=2)
    strip = [(t.rung, t.options, t.n_rows, t.cv_error) for t in a.trials]
    assert strip == [(t.rung, t.options, t.n_rows, t.cv_error) for t in b.trials]
    assert a.best_options == b.best_options


def test_budget_too_small_fits_the_cheapest_method_and_says_so(small):
    y, X = small
    result = sel.select(y, X, budget_s=1e-9)
    assert result.best_options == sel.CHEAPEST and result.cv_error is None
    assert "budget too small" in result.note
    assert result.model is not None
    assert all(t.note == "not run: budget spent" for t in result.trials)


def test_a_failing_candidate_is_skipped_with_a_line(small):
    y, X = small
    cands = ["-s 1 -L 4 -B 1 -A 50 -c 1",          # 50 planes > 2 features: fails
             "-s 2 -B 1 -c 1", "-s 1 -L 2 -B 1 -A 20 -k 4 -u 10 -c 1"]
    result = sel.select(y, X, budget_s=60, candidates=cands, refit=False)
    skipped = [t for t in result.trials if t.note.startswith("skipped")]
    assert len(skipped) == 1 and "-A 50" in skipped[0].note
    assert result.best_options == cands[2]


def test_bad_input(small):
    y, X = small
    with pytest.raises(ValueError, match="budget_s"):
        sel.select(y, X, budget_s=0)
    with pytest.raises(ValueError, match="labels"):
        sel.select(y[:10], X)


def test_C_refinement_of_a_local_winner(small):
    """The winner's C refined by the warm-started -C path at its anchors and -u, on
    the winning rung's rows and folds; taken only when its CV error is lower."""
    y, X = small
    cands = ["-s 1 -L 2 -B 1 -A 20 -k 4 -u 10 -c 64", "-s 2 -B 1 -c 1"]
    plain = sel.select(y, X, budget_s=60, candidates=cands, refit=False, refine_C=False)
    refined = sel.select(y, X, budget_s=60, candidates=cands, refit=False)
    line = refined.trials[-1]
    assert line.note.startswith("C refinement: ") and line.n_rows == 1500
    assert refined.cv_error <= plain.cv_error
    if refined.cv_error < plain.cv_error:
        assert refined.best_options == line.options != cands[0]
        assert refined.best_options.replace(refined.best_options.split("-c ")[1], "") \
            == "-s 1 -L 2 -B 1 -A 20 -k 4 -u 10 -c "
    # the error of the line is -v's (cold) when the path found a better C; a C whose
    # warm-started error is not lower is not taken (and not re-run cold)
    params = parse_train_options(line.options + " -S 1 -q")
    cv = 100 * np.mean(cross_validation(y, _rows(X), params, 3) != y)
    if "cold -v" in line.note:
        assert line.options != cands[0] and cv == line.cv_error
    else:
        assert refined.best_options == plain.best_options
        assert line.cv_error >= plain.cv_error or line.options == cands[0]


def test_the_selector_draws_from_its_own_seed_purpose(monkeypatch):
    """The rows of the rungs come from PURPOSE_SELECT (the one list of purposes in
    lcoding.core.seeds), not from a stream borrowed under PURPOSE_CV."""
    from lcoding.core import seeds
    purposes = {k: v for k, v in vars(seeds).items() if k.startswith("PURPOSE_")}
    assert len(set(purposes.values())) == len(purposes)
    assert seeds.PURPOSE_SELECT not in (seeds.PURPOSE_CV, seeds.PURPOSE_SOLVER)
    rng = np.random.default_rng(0)
    X = np.column_stack([np.arange(90.0), rng.normal(size=90)])
    y = (X[:, 1] > 0).astype(float)
    seen = []

    def record(sub_y, sub_rows, params, nr_fold):
        seen.append(sub_rows.to_csr().toarray()[:, 0].copy())
        return sub_y.copy()

    monkeypatch.setattr(sel, "MIN_ROWS", 20)
    monkeypatch.setattr(sel, "ROWS_PER_CLASS", 10)
    monkeypatch.setattr(sel, "cross_validation", record)
    cands = [f"-s 2 -B 1 -c {c}" for c in (0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000)]
    sel.select(y, X, budget_s=60, seed=4, candidates=cands, refit=False, refine_C=False)
    order = np.random.Generator(np.random.PCG64(
        seeds.rng_state(4, seeds.PURPOSE_SELECT, sel.ORDER_STREAM)[0])).permutation(90)
    np.testing.assert_array_equal(seen[0], np.sort(order[:30]).astype(float))
    assert seen[-1].size == 90


def test_the_kernel_pca_map_is_a_candidate_for_few_dense_features(small):
    y, X = small
    dense = sel.candidate_options(y, _rows(X), seed=1)
    assert sum(" -t 2 " in c for c in dense) == 6
    import scipy.sparse as sp
    wide = sp.random(300, 200, density=0.05, format="csr", random_state=0)
    assert not any(" -t 2 " in c for c in sel.candidate_options(np.arange(300) % 2, _rows(wide)))


def test_a_kernel_map_winner_has_its_C_refined(small):
    """A kernel-map winner's C is refined by the kernel map's -C path (at its -g, each
    fold's map built once), confirmed by a cold -v; only -c changes.  A k q-metrics
    winner (no C to search) is not refined and the search does not abort."""
    y, X = small
    result = sel.select(y[:400], X[:400], budget_s=60, seed=1, refine_C=True,
                        candidates=["-s 1 -t 2 -g 1 -X 50 -B 1 -c 1"])
    line = result.trials[-1]
    assert line.note.startswith("C refinement: ")
    assert re.sub(r"-c \S+", "", result.best_options) == "-s 1 -t 2 -g 1 -X 50 -B 1 "
    assert result.model is not None
    params = parse_train_options(line.options + " -S 1 -q")
    cv = 100 * np.mean(cross_validation(y[:400], _rows(X[:400]), params, 3) != y[:400])
    if "cold -v" in line.note:
        assert cv == line.cv_error


def test_the_estimator_defaults_are_a_candidate(small):
    """The selector always tries what LocallyLinearSVC() would fit (the same option
    string, from lcoding.methods.defaults), so on its folds it never does worse than
    the estimator at its defaults."""
    from lcoding.sklearn import LocallyLinearSVC
    y, X = small
    est = LocallyLinearSVC(random_state=1).fit(X, y)
    expected = est.to_options().replace(" -S 1 -q", "")
    assert sel.candidate_options(y, _rows(X), seed=1)[sel.DEFAULTS_POSITION] == expected


def test_the_defaults_candidate_is_the_estimator_on_each_rungs_rows(small, monkeypatch):
    """On a rung of fewer rows the defaults candidate trains as LocallyLinearSVC()
    would on those rows (sqrt(n_r) anchors, not sqrt(n)); on all rows, and in the
    refit, the options for all rows."""
    from lcoding.core import seeds
    from lcoding.methods.defaults import auto_anchors, llsvm_default_options
    y, X = small
    monkeypatch.setattr(sel, "MIN_ROWS", 150)
    monkeypatch.setattr(sel, "KPCA_MAX_FEATURES", 0)
    result = sel.select(y, X, budget_s=120, seed=3, refine_C=False, refit=False)
    first = [t for t in result.trials if t.rung == 0][sel.DEFAULTS_POSITION]
    n0 = first.n_rows
    assert n0 < len(y)
    order = np.random.Generator(np.random.PCG64(
        seeds.rng_state(3, seeds.PURPOSE_SELECT, sel.ORDER_STREAM)[0])).permutation(len(y))
    ids = np.sort(order[:n0])
    rows = _rows(X)
    assert first.options == llsvm_default_options(rows.take(ids), int(np.unique(y[ids]).size), 3)
    full = llsvm_default_options(rows, int(np.unique(y).size), 3)
    assert f" -A {auto_anchors(n0, 2)} " in first.options          # 16: the floor
    assert f" -A {auto_anchors(len(y), 2)} " in full                 # sqrt(1500): 39
    assert all(t.options == full for t in result.trials if t.n_rows == len(y)
               and " -a 0 " in t.options)


def test_the_first_rung_has_rows_for_every_class():
    """Many classes (letter: 26): the first rung holds at least ROWS_PER_CLASS rows
    per class, not MIN_ROWS in all."""
    sizes = sel._rung_sizes(16000, 30, 26)
    assert sizes[0] >= sel.ROWS_PER_CLASS * 26 and sizes[-1] == 16000
    assert sel._rung_sizes(16000, 30, 2)[0] == max(sel.MIN_ROWS, 16000 // 9)


def _select_with_fake_cv(monkeypatch, n, cands, error_percent, budget_s, seconds=None,
                         refit_seconds=None, clock=None, passes=None, plan_refit=None):
    """select() over ``cands`` on ``n`` random rows with a fake cross-validation: a
    trial's CV error is ``error_percent(C, rows)`` per cent; with ``seconds(C, rows)``,
    a fake clock advances by that much per trial (with ``passes``, in that many equal
    steps, each followed by a stop check, as a solver's passes are; the checks' clock
    is the fake one too); with ``refit_seconds(C)``, the selection refits (a fake
    training that advances the clock by that much)."""
    import types
    from lcoding.core import threads
    clock = [0.0] if clock is None else clock
    if seconds is not None:
        fake_time = types.SimpleNamespace(perf_counter=lambda: clock[0])
        monkeypatch.setattr(sel, "time", fake_time)
        if passes is not None:
            monkeypatch.setattr(threads, "time", fake_time)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    y = (X[:, 0] > 0).astype(float)

    def fake_cv(sub_y, sub_rows, params, nr_fold):
        if seconds is not None and passes is not None:
            for _ in range(passes):
                clock[0] += seconds(params.C, sub_rows.n_rows) / passes
                threads.check_stop()
        elif seconds is not None:
            clock[0] += seconds(params.C, sub_rows.n_rows)
        wrong = int(round(sub_y.size * error_percent(params.C, sub_rows.n_rows) / 100))
        out = sub_y.copy()
        out[:wrong] = 1.0 - out[:wrong]
        return out

    monkeypatch.setattr(sel, "MIN_ROWS", 100)
    monkeypatch.setattr(sel, "ROWS_PER_CLASS", 10)
    monkeypatch.setattr(sel, "cross_validation", fake_cv)
    if refit_seconds is not None:
        monkeypatch.setattr(sel, "train_model", lambda y, rows, params: clock.__setitem__(
            0, clock[0] + refit_seconds(params.C)))
    return sel.select(y, X, budget_s=budget_s, seed=1, candidates=cands,
                      refit=refit_seconds is not None, refine_C=False, plan_refit=plan_refit)


def _select_on_a_fake_clock(monkeypatch, budget_s, dear=None):
    """``-c 1 .. 9`` on 900 rows: a trial costs 1 s per 100 rows (10 s for ``C =
    dear``); C = 3 is the best, then 2 and 4."""
    return _select_with_fake_cv(
        monkeypatch, 900, [f"-s 2 -B 1 -c {c}" for c in range(1, 10)],
        lambda C, rows: 5 * abs(C - 3.0), budget_s,
        seconds=lambda C, rows: rows / 100 * (10 if C == dear else 1))


def test_a_rung_that_does_not_fit_runs_its_best_candidates(monkeypatch):
    """When the budget cannot hold a whole rung, the rung runs its best-ranked
    survivors that fit; then, in rank order, a candidate it passed over runs if its own
    trial times the rows' growth (without the rung's GROWTH margin) fits in what the
    rung left; the whole selection keeps to the budget."""
    # rung 0: 9 x 300 rows = 27 s; rung 1 (3 x 900 rows) predicted 1.5 x 27 s = 40.5 s:
    # C = 3 and 2 fit (2 x 13.5 s of 28 s), run in 2 x 9 s, and C = 4 (9 s) fits in the
    # 10 s left
    clock = [0.0]
    result = _select_with_fake_cv(
        monkeypatch, 900, [f"-s 2 -B 1 -c {c}" for c in range(1, 10)],
        lambda C, rows: 5 * abs(C - 3.0), 55, seconds=lambda C, rows: rows / 100,
        clock=clock)
    rung1 = [t for t in result.trials if t.rung == 1]
    assert [t.options for t in rung1] == ["-s 2 -B 1 -c 3", "-s 2 -B 1 -c 2", "-s 2 -B 1 -c 4"]
    assert all(t.n_rows == 900 for t in rung1)
    assert "ran the best 2 of its 3 candidates that fit" in result.note
    assert "then ran -s 2 -B 1 -c 4 too (10.0 s left)" in result.note
    assert result.best_options == "-s 2 -B 1 -c 3"
    assert clock[0] <= 55


def test_a_partial_rung_passes_over_a_dear_candidate_for_cheaper_ones(monkeypatch):
    """The best-ranked candidate whose predicted cost does not fit is passed over; the
    cheaper ones ranked after it run (C = 3, the best, costs ten times the others)."""
    # rung 0: 8 x 3 s + 30 s = 54 s; rung 1 predicted: C = 3 4.5 x 30 s, C = 2, 4 13.5 s
    result = _select_on_a_fake_clock(monkeypatch, 100, dear=3.0)
    rung1 = [t.options for t in result.trials if t.rung == 1]
    assert rung1 == ["-s 2 -B 1 -c 2", "-s 2 -B 1 -c 4"]
    assert "ran the best 2 of its 3 candidates that fit" in result.note
    assert "then ran" not in result.note      # C = 3's 90 s never fit in the 28 s left
    # the winner is compared on the rows where both ran: C = 3 led the first rung
    assert result.best_options == "-s 2 -B 1 -c 3"
    assert ("the budget passed over -s 2 -B 1 -c 3, the best of rung 0 whose refit fits, "
            "on rung 1: the winner comes from rung 0") in result.note


def test_a_leader_passed_over_is_not_beaten_by_errors_on_more_rows(monkeypatch):
    """Every error falls with the rows.  C = 3 leads the first rung (300 rows) and is
    too dear to run on the second (900 rows); C = 2 and 4 run there and measure lower
    errors than C = 3 had on 300 rows.  Compared on the rows where all three ran, C = 3
    is the best, so it wins (magic04 at a tenth of the RBF SVM's time: the kernel map,
    passed over on all rows, against the anchor planes).  When the leader's refit does
    not fit either, the larger rung decides among those that ran."""
    def error(C, rows):
        return (4.0 + abs(C - 3.0)) * (300.0 / rows)      # 900 rows: a third

    def seconds(C, rows):
        return rows / 100 * (10 if C == 3.0 else 1)

    cands = [f"-s 2 -B 1 -c {c}" for c in range(1, 10)]
    result = _select_with_fake_cv(monkeypatch, 900, cands, error, 200, seconds=seconds,
                                  refit_seconds=lambda C: 0.01)
    assert [t.options for t in result.trials if t.rung == 1] == ["-s 2 -B 1 -c 2",
                                                                 "-s 2 -B 1 -c 4"]
    assert result.best_options == "-s 2 -B 1 -c 3"
    assert "the winner comes from rung 0" in result.note
    # the leader's refit predicted past what is left (4 x 30 s x 900 / 600 = 180 s):
    # rung 1 decides
    monkeypatch.setattr(sel, "REFIT_MARGIN", 4.0)
    result = _select_with_fake_cv(monkeypatch, 900, cands, error, 200, seconds=seconds,
                                  refit_seconds=lambda C: 0.01, clock=[0.0])
    assert "passed over -s 2 -B 1 -c 3" not in result.note
    assert result.best_options in ("-s 2 -B 1 -c 2", "-s 2 -B 1 -c 4")


def test_the_unmatched_lead_skips_failures_and_refits_that_do_not_fit():
    earlier = [(1.0, 5, 0), (2.0, 6, 0), (3.0, 7, 0)]
    last = [(0.5, 6, 1), (0.7, 7, 1)]
    refit = {5: 1.0, 6: 1.0, 7: 1.0}.get
    assert sel._unmatched_lead(earlier, last, set(), refit, 10.0) == 5
    assert sel._unmatched_lead(earlier, last, {5}, refit, 10.0) is None      # 6 ran
    assert sel._unmatched_lead(earlier, last, set(), {5: 20.0, 6: 1.0}.get, 10.0) is None
    assert sel._unmatched_lead(earlier, [(0.4, 5, 1)] + last, set(), refit, 10.0) is None
    assert sel._unmatched_lead(None, last, set(), refit, 10.0) is None
    assert sel._unmatched_lead(earlier, None, set(), refit, 10.0) is None


def test_the_budget_holds_the_refit(monkeypatch):
    """With a refit the budget holds it too: C = 3 leads the first rung but costs ten
    times the others, so its refit on all rows is predicted at 1.25 (REFIT_MARGIN) *
    30 s * 900 / (2 * 300) = 56.25 s, more than the budget leaves; the first rung stops where the next
    trial (guessed at the last one's 30 s) and the refit of the best candidate whose
    refit fits would overrun, and that candidate (C = 2: 5.6 s) wins -- the whole
    call keeps to its budget.  Without the refit C = 3 would win (and end far past
    70 s)."""
    clock = [0.0]
    cands = [f"-s 2 -B 1 -c {c}" for c in range(1, 10)]
    refit = {3.0: 67.5}
    result = _select_with_fake_cv(
        monkeypatch, 900, cands, lambda C, rows: 5 * abs(C - 3.0), 70,
        seconds=lambda C, rows: rows / 100 * (10 if C == 3.0 else 1),
        refit_seconds=lambda C: refit.get(C, 6.75), clock=clock)
    assert result.best_options == "-s 2 -B 1 -c 2"
    assert "the refit of -s 2 -B 1 -c 3 (predicted 56.2 s) does not fit" in result.note
    assert clock[0] <= 70
    # with room for it, the leader's refit is taken
    clock[0] = 0.0
    result = _select_with_fake_cv(
        monkeypatch, 900, cands, lambda C, rows: 5 * abs(C - 3.0), 300,
        seconds=lambda C, rows: rows / 100 * (10 if C == 3.0 else 1),
        refit_seconds=lambda C: refit.get(C, 6.75), clock=clock)
    assert result.best_options == "-s 2 -B 1 -c 3" and "does not fit" not in result.note
    assert clock[0] <= 300


def test_a_refit_the_caller_runs_is_held_by_the_budget_too(monkeypatch):
    """``plan_refit=True`` with ``refit=False`` (AutoLocalClassifier, which refits
    through the estimator's own path): the search leaves room for the refit as with
    ``refit=True`` -- the winner and note of test_the_budget_holds_the_refit -- and
    trains no model.  Without the plan the search alone holds the budget: C = 3 wins,
    and a caller's refit of it would end far past the budget."""
    cands = [f"-s 2 -B 1 -c {c}" for c in range(1, 10)]

    def run(plan):
        return _select_with_fake_cv(
            monkeypatch, 900, cands, lambda C, rows: 5 * abs(C - 3.0), 70,
            seconds=lambda C, rows: rows / 100 * (10 if C == 3.0 else 1), clock=[0.0],
            plan_refit=plan)
    planned = run(True)
    assert planned.best_options == "-s 2 -B 1 -c 2"
    assert "the refit of -s 2 -B 1 -c 3 (predicted 56.2 s) does not fit" in planned.note
    assert planned.model is None and planned.refit_seconds is None
    assert run(None).best_options == "-s 2 -B 1 -c 3"


def test_a_trial_that_would_overrun_the_budget_is_stopped(monkeypatch):
    """A trial whose cost the rung guessed too low (from the trial before it) is
    stopped at its next check once it runs into the time the best candidate's refit
    needs (less STOP_SLACK of the budget): the call keeps to its budget and that
    candidate still wins, instead of a worse one whose refit fits in what an overrun
    left (letter at a tenth of the RBF SVM's time: a kernel map at three C started
    with 5 s left, ran 9.6 s, and the call ended 4.8 s past its budget).  C = 9, the
    last, costs 30 s where the others cost 3 s; C = 3 is the best (refit 4 s)."""
    clock = [0.0]
    cands = [f"-s 2 -B 1 -c {c}" for c in range(1, 10)]
    result = _select_with_fake_cv(
        monkeypatch, 900, cands, lambda C, rows: 5 * abs(C - 3.0), 40,
        seconds=lambda C, rows: rows / 100 * (10 if C == 9.0 else 1),
        refit_seconds=lambda C: 4.0, clock=clock, passes=100)
    stopped = [t for t in result.trials if t.note == sel.STOPPED]
    assert [t.options for t in stopped] == ["-s 2 -B 1 -c 9"]
    # the first rung's 300 rows: eight trials of 3 s, then C = 9 is stopped where the
    # refit of C = 3 (predicted 1.25 (REFIT_MARGIN) x 3 s x 900 / 600 = 5.6 s) and the
    # slack (0.4 s) begin, 40 - 5.6 - 0.4 = 34.0 s, within a pass (0.3 s)
    end = 24.0 + stopped[0].seconds
    assert 40 - 5.625 - 0.4 - 1e-9 <= end <= 40 - 5.625 - 0.4 + 0.3 + 1e-9
    assert result.best_options == "-s 2 -B 1 -c 3"
    assert "budget spent during rung 0" in result.note and "does not fit" not in result.note
    assert clock[0] <= 40
    # without the stop the trial would have run to its end: 24 + 30 + 4 s
    assert result.cv_error == pytest.approx(0.0)


def test_C_refinement_is_stopped_at_what_is_left(small, monkeypatch):
    """The C refinement runs under the time left after the winner's refit: a path that
    overruns it is stopped, a table line says so, and the winner stays."""
    import time
    from lcoding.core import threads
    from lcoding.core.messages import Messages
    from lcoding.core.rows import as_rows
    y, X = small
    options = "-s 1 -L 2 -B 1 -A 8 -k 4 -u 1 -c 1"
    slow = {"calls": 0}

    def stalled_search(*args, **kwargs):
        # a path that never ends by itself: passes of 10 ms, a stop check after each
        slow["calls"] += 1
        start = time.perf_counter()
        while time.perf_counter() - start < 10.0:
            time.sleep(0.01)
            threads.check_stop()
        raise AssertionError("the refinement was not stopped")

    monkeypatch.setattr(sel, "find_local_parameters", stalled_search)
    trials = []
    out = sel._refine_C(y, as_rows(X, "x"), np.arange(y.size), y.size, options, 10.0,
                        trials, " -S 1 -q", 3, 0.5, Messages(quiet=True), 0.1)
    assert out is None and slow["calls"] == 1
    assert trials[-1].note == "C refinement stopped: budget spent"
    assert trials[-1].cv_error is None and trials[-1].options == options


def test_curve_error_extrapolates_the_last_two_rungs():
    """The power law through a candidate's last two rungs, its exponent in [0, 1/2]."""
    assert sel.curve_error(None, (900, 8.0), 2700) == 8.0           # no curve yet
    assert sel.curve_error((300, 8.0), (900, 8.0), 900) == 8.0      # no extrapolation
    # 12 % -> 8 % over 3x the rows (slope log 1.5 / log 3): the same factor once more
    assert sel.curve_error((300, 12.0), (900, 8.0), 2700) == pytest.approx(8.0 / 1.5)
    # a steeper fall is clipped to n^-1/2; a rise counts as flat; a zero stays put
    assert sel.curve_error((300, 40.0), (900, 8.0), 2700) == pytest.approx(8.0 / 3 ** 0.5)
    assert sel.curve_error((300, 6.0), (900, 8.0), 2700) == 8.0
    assert sel.curve_error((300, 6.0), (900, 0.0), 2700) == 0.0
    assert sel.curve_error((300, 0.0), (900, 5.0), 2700) == 5.0


def test_the_curve_adds_survivors_and_never_drops_one():
    """magic04's second rung (4226 rows), four go on: the best four by their error
    and the best four by their curve, the better of the two places first."""
    results = sorted([(13.82, 14.01, "rbf -c 10"), (14.10, 14.22, "rbf -c 1"),
                      (14.20, 14.20, "planes"), (14.25, 15.45, "hellinger"),
                      (14.51, 14.51, "rbf -c 100"), (14.45, 15.59, "gaussian"),
                      (15.33, 15.33, "rbf g4 -c 10")])
    assert sel._survivors(results, 4) == ["rbf -c 10", "rbf -c 1", "planes", "hellinger",
                                          "rbf -c 100"]
    # without curves (the first rung) the expected errors are the errors themselves
    flat = sorted((e, e, c) for _, e, c in results)
    assert sel._survivors(flat, 2) == ["rbf -c 10", "planes"]


def test_statistical_ties_with_the_last_survivor_go_on_too():
    """magic04's second rung (4226 rows) in a run where the kernel map at -c 100 was
    the fifth by its error, 0.12 points behind the fourth: one standard error of a
    14.6 % error on 4226 rows is 0.54 points, so it goes on, after the best four, and
    so does 14.81 % (two ties at most: ceil(4 / 3)); 15.26 % does not.  Without the
    rows (the first rung) no tie is added."""
    errors = {"planes -c 10": 14.03, "rbf -c 10": 14.10, "rbf -c 1": 14.22,
              "rbf g4 -c 1": 14.60, "rbf -c 100": 14.72, "planes -c 1": 14.81,
              "rbf g4 -c 10": 15.26, "gaussian": 15.52}
    results = sorted((e, e, c) for c, e in errors.items())
    best4 = ["planes -c 10", "rbf -c 10", "rbf -c 1", "rbf g4 -c 1"]
    assert sel._survivors(results, 4, 4226) == best4 + ["rbf -c 100", "planes -c 1"]
    assert sel._survivors(results, 4) == best4
    # a larger rung's smaller standard error (0.16 points on 50 000 rows) adds only 14.72
    assert sel._survivors(results, 4, 50_000) == best4 + ["rbf -c 100"]
    # at most ceil(keep / ETA) ties: one when two go on
    assert sel._survivors(results, 2, 300) == best4[:2] + ["rbf -c 1"]


def test_a_candidate_that_learns_faster_survives_a_subsample_rung(monkeypatch):
    """Ranked by its subsample error, the candidate whose error falls fastest with
    the rows would leave at the second rung; its learning curve keeps it, and it wins
    on all rows (a fake cross-validation with set error rates)."""
    # C -> CV error % on 300, 900 and 2700 rows: C = 1 learns slowly, C = 2 fast,
    # C = 3, 4 are flat, the others poor
    rates = {1: (10.0, 8.0, 7.5), 2: (14.0, 8.8, 4.0), 3: (9.0, 8.5, 8.3), 4: (9.0, 8.5, 8.3)}
    result = _select_with_fake_cv(
        monkeypatch, 2700, [f"-s 2 -B 1 -c {c}" for c in range(1, 11)],
        lambda C, rows: rates.get(int(C), (20.0,) * 3)[{300: 0, 900: 1, 2700: 2}[rows]], 600)
    by_rung = {r: [t.options for t in result.trials if t.rung == r] for r in (0, 1, 2)}
    assert sorted(by_rung[1]) == sorted(f"-s 2 -B 1 -c {c}" for c in (1, 2, 3, 4))
    # 8.8 % at 900 rows is the last of the four, but 14 -> 8.8 % extrapolates to
    # 5.5 % on 2700 rows, ahead of C = 1 (6.4 %) and C = 3, 4 (8.0 %); the best two
    # by their error at 900 rows (C = 1, 3) go on as well, and C = 4, within one
    # standard error (0.93 points) of C = 3's 8.5 %, after them
    assert by_rung[2] == ["-s 2 -B 1 -c 2", "-s 2 -B 1 -c 1", "-s 2 -B 1 -c 3",
                          "-s 2 -B 1 -c 4"]
    assert result.best_options == "-s 2 -B 1 -c 2"
    assert result.cv_error == pytest.approx(4.0, abs=0.05)
    note = [t.note for t in result.trials if t.rung == 1 and t.options.endswith("-c 2")][0]
    assert note.startswith("learning curve: 5.5")


# -- the option form -C -L auto of train and lcoding-train --------------------------------

# a short fixed list: a generous budget runs all of it, so the winner does not hang on
# the machine's speed, and the run stays fast
FIXED_CANDIDATES = ["-s 2 -B 1 -c 0.1", "-s 2 -B 1 -c 1", "-s 2 -B 1 -c 10",
                    "-s 1 -L 2 -A 10 -k 4 -u 1 -c 1 -B 1"]


@pytest.fixture
def fixed_candidates(monkeypatch):
    monkeypatch.setattr(sel, "candidate_options", lambda y, rows, seed=1: list(FIXED_CANDIDATES))


def test_L_auto_is_an_option_of_C_and_b_its_budget():
    from lcoding.core.options import (CODING_AUTO, OptionError, check_parameter,
                                      options_string)
    params = parse_train_options("-C -L auto -b 20")
    check_parameter(params)
    assert params.coding == CODING_AUTO and params.budget_s == 20.0
    assert params.nr_fold == 3 and parse_train_options("-C -L auto -v 4").nr_fold == 4
    assert options_string(params) == "-C -L auto -b 20"       # the word parses back
    assert parse_train_options("-C -L auto").budget_s == 60.0
    with pytest.raises(ValueError, match=r"-L auto selects a method .*needs -C \(options -L, -C\)"):
        check_parameter(parse_train_options("-L auto"))
    with pytest.raises(ValueError, match=r"only applies to -C -L auto \(option -b\)"):
        check_parameter(parse_train_options("-C -L 2 -b 20"))
    with pytest.raises(ValueError, match=r"only applies to -C -L auto \(option -b\)"):
        check_parameter(parse_train_options("-b 20"))
    with pytest.raises(OptionError, match="option -b 0: must be > 0"):
        parse_train_options("-C -L auto -b 0")
    # the sentinel's number is not the word
    with pytest.raises(OptionError, match="option -L -1: must be one of 0, 1, 2, 3, 4, 5, 6, auto"):
        parse_train_options("-C -L -1")
    with pytest.raises(OptionError, match="option -L: 'Auto' is not a valid integer"):
        parse_train_options("-C -L Auto")


def test_L_auto_is_no_method_of_the_router(small):
    from lcoding.liblinearutil import train
    from lcoding.training import find_parameters, train_model
    y, X = small
    with pytest.raises(ValueError, match="needs -C"):
        train(y[:50], X[:50], "-L auto -q")
    params = parse_train_options("-C -L auto -q")
    for call in (train_model, find_parameters):
        with pytest.raises(ValueError, match="-L auto is no method to train"):
            call(y[:50], _rows(X[:50]), params)


def test_train_C_L_auto_returns_what_select_chooses(small, fixed_candidates, capsys):
    from lcoding.liblinearutil import train
    from lcoding.methods.local_search import LocalSearchResult, best_parameters_line
    y, X = small[0][:600], small[1][:600]
    result = train(y, X, "-C -L auto -b 20 -q")
    expected = sel.select(y, X, budget_s=20, seed=1, refit=False)
    assert isinstance(result, LocalSearchResult)
    assert result.best_options == expected.best_options
    assert result.best_C == parse_train_options(result.best_options).C
    assert result.best_rate == pytest.approx(1 - expected.cv_error / 100)
    # -q: only the summary line, which LIBLINEAR's -C prints even then
    assert capsys.readouterr().out == best_parameters_line(result) + "\n"
    # the winner trains with the options returned
    assert train(y, X, result.best_options + " -q").get_nr_class() == 2
    # without -q: the options the search ignores, a line per trial, the summary
    again = train(y, X, "-C -L auto -b 20 -S 1 -s 3 -c 5")
    out = capsys.readouterr().out
    assert again == result
    assert "-C -L auto: ignoring options -s -c (the search chooses" in out
    assert sum(line.startswith("rung 0 rows 600: ") for line in out.splitlines()) \
        == len(FIXED_CANDIDATES)
    assert out.endswith(best_parameters_line(result) + "\n")


def test_C_L_auto_with_no_candidate_run_says_so(small, fixed_candidates, capsys):
    import math
    from lcoding.liblinearutil import train
    y, X = small[0][:300], small[1][:300]
    result = train(y, X, "-C -L auto -b 1e-9")
    out = capsys.readouterr().out
    assert result.best_options == sel.CHEAPEST and math.isnan(result.best_rate)
    note = [line for line in out.splitlines() if line.startswith("-C -L auto: ")]
    assert len(note) == 1 and "budget too small" in note[0]
    assert "CV accuracy = not measured  Best options: -s 2 -B 1 -c 1" in out


@pytest.mark.slow
def test_k_q_metrics_is_a_candidate_for_many_features(monkeypatch):
    """51 to 100 000 features (images, text): KQMetricsClassifier()'s setting is
    tried; not for few features (its PCA to 50 dimensions would be no reduction) nor
    for very many (the PCA's 50 x d directions)."""
    import scipy.sparse as sp
    y = (np.arange(400) % 2).astype(float)
    for d, expected in ((16, False), (256, True), (5000, True)):
        X = sp.random(400, d, density=min(1.0, 20 / d), format="csr", random_state=1)
        assert (sel.KQ_CANDIDATE in sel.candidate_options(y, _rows(X), seed=1)) == expected, d
    monkeypatch.setattr(sel, "KQ_MAX_FEATURES", 4999)       # the upper bound, cheaply
    assert sel.KQ_CANDIDATE not in sel.candidate_options(y, _rows(X), seed=1)


@pytest.mark.slow
def test_k_q_flats_are_a_recipe_candidate_for_three_classes_or_more():
    """Three classes or more: KQMetricsClassifier(solver='flats')'s options are a
    candidate (the estimator's option string, without -S / -q), and on a rung of
    fewer rows its flats per class follow that rung's rows; two classes: no flats."""
    import scipy.sparse as sp
    from lcoding.core import seeds
    from lcoding.methods.defaults import FLATS_LADDER, flats_clusters, flats_ladder
    from lcoding.sklearn import KQMetricsClassifier
    rng = np.random.default_rng(4)
    centres = rng.normal(scale=4.0, size=(4, 6))
    y = (np.arange(2400) % 4).astype(float)
    X = sp.csr_matrix(centres[y.astype(int)] + rng.normal(size=(2400, 6)))
    cands = sel.candidate_options(y, _rows(X), seed=1)
    flats = [o for o in cands if o.startswith(sel.FLATS_RECIPE)]
    est = KQMetricsClassifier(solver="flats", random_state=1).fit(X, y)
    # the estimator's options first, then the smaller sizes of the ladder (the PCA of
    # six features is no smaller: half and a quarter of the flats)
    assert flats[0] == est.to_options().replace(" -S 1 -q", "")
    assert flats == flats_ladder(_rows(X), 4) and len(flats) == FLATS_LADDER
    assert [f.split()[3] for f in flats] == ["32", "16", "8"]
    assert est.n_clusters_ == flats_clusters(2400, 4, 1) == 32 and est.q_ == 1
    assert not [o for o in sel.candidate_options(np.where(y > 1, 1.0, -1.0), _rows(X), seed=1)
                if o.startswith(sel.FLATS_RECIPE)]
    # rows of six features spanning one dimension: no flats (each would hold every row)
    line = sp.csr_matrix(np.c_[rng.normal(size=2400), np.ones((2400, 5))])
    assert not [o for o in sel.candidate_options(y, _rows(line), seed=1)
                if o.startswith(sel.FLATS_RECIPE)]
    result = sel.select(y, X, budget_s=120, seed=3, refine_C=False, refit=False,
                        candidates=None)
    tried = [t for t in result.trials if t.options.startswith(sel.FLATS_RECIPE)]
    assert tried and tried[0].n_rows < len(y)
    order = np.random.Generator(np.random.PCG64(
        seeds.rng_state(3, seeds.PURPOSE_SELECT, sel.ORDER_STREAM)[0])).permutation(len(y))
    for t in tried:
        ids = np.sort(order[:t.n_rows])
        expected = flats_ladder(_rows(X).take(ids), 4) if t.n_rows < len(y) else flats
        assert t.options in expected, (t.n_rows, t.options)
    assert [t.options for t in tried if t.rung == 0] == \
        flats_ladder(_rows(X).take(np.sort(order[:tried[0].n_rows])), 4)
    assert f"-k {flats_clusters(tried[0].n_rows, 4, 1)} " in tried[0].options


# --------------------------------------------- one setting at several C: shared folds
def test_one_setting_at_several_C_shares_each_folds_map(small, monkeypatch):
    """Candidates that differ only in -c (a kernel PCA map here) run as one unit: each
    fold's map is built once for all of them (one SharedFolds), and every trial's CV
    error is still the one -v gives its options alone."""
    y, X = small
    y, X = y[:600], X[:600]
    built = []
    real = sel.cross_validation_at_Cs

    def counting(*args, **kwargs):
        built.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(sel, "cross_validation_at_Cs", counting)
    monkeypatch.setattr(sel, "MIN_ROWS", 600)
    cands = [f"-s 1 -t 2 -g 0.5 -X 80 -B 1 -c {c}" for c in ("1", "10", "100")] \
        + ["-s 2 -B 1 -c 1"]
    result = sel.select(y, X, budget_s=300, seed=2, candidates=cands, refit=False,
                        refine_C=False)
    assert len(built) == 1 and built[0].kernel_type == 2
    first = [t for t in result.trials if t.rung == 0]
    assert [t.options for t in first] == cands
    for t in first:
        params = parse_train_options(t.options + " -S 2 -q")
        assert 100 * np.mean(cross_validation(y, _rows(X), params, 3) != y) == t.cv_error
    assert all("each fold's map shared by 3 values of C" in t.note for t in first[:3])
    assert first[3].note == ""


def test_families_are_the_options_without_C():
    extra = " -S 1 -q"
    cands = ["-s 1 -t 2 -g 0.5 -X 80 -B 1 -c 1", "-s 1 -t 2 -g 0.5 -X 80 -B 1 -c 10",
             "-s 1 -L 2 -B 1 -A 50 -k 8 -u 3 -I 10 -c 1", "-s 3 -L 4 -B 1 -A 4 -u 1 -c 2",
             "-s 2 -B 1 -c 1", "-s 41 -k 8 -Q 3 -l 2", "-s 2 -L 2 -A 9 -k 4 -u 1 -c 3",
             "-s 1 -t 2 -H 1 -X 40 -c 1", "-s 1 -t 2 -g oops"]
    fam = sel._families(cands, extra)
    assert fam == {0: "-s 1 -t 2 -g 0.5 -X 80 -B 1", 1: "-s 1 -t 2 -g 0.5 -X 80 -B 1",
                   2: "-s 1 -L 2 -B 1 -A 50 -k 8 -u 3 -I 10", 3: "-s 3 -L 4 -B 1 -A 4 -u 1"}
    # -s 2 settings could share their folds (SharedFolds takes them) but stay single
    # candidates (select.FAMILY_SOLVERS)
    # a rung's units: a family together at the place of its first member
    assert sel._units([4, 1, 2, 0, 3], fam) == [[4], [1, 0], [2], [3]]
    # its cost: a later member of a family pays only its own training
    cost = {0: 10.0, 1: 9.0, 2: 1.0, 4: 0.5}
    shared = {0: 6.0, 1: 6.0, 2: 0.2, 4: 0.0}
    assert sel._rung_cost([1, 0, 2, 4], cost, shared, fam) == 9.0 + 4.0 + 1.0 + 0.5
    assert sel._rung_cost([0], cost, shared, fam) == 10.0


def _fake_shared_folds(clock, fixed=0.0):
    """A stand-in for local_search.SharedFolds on the fake clock: the map costs 1 s per
    100 rows (``fixed`` of it not growing with the rows), each C's training as much
    again; C = 3 is the best, 5 points of error a unit of C away."""
    class FakeFolds:
        complete = True
        fixed_seconds = fixed

        def __init__(self, sub_y):
            self.sub_y, self.nbytes = sub_y, 1000
            self.seconds = sub_y.size / 100
            clock[0] += self.seconds

        def targets_at(self, Cs):
            targets, own = [], []
            for C in Cs:
                clock[0] += self.sub_y.size / 100
                own.append(self.sub_y.size / 100)
                wrong = int(round(self.sub_y.size * 5 * abs(C - 3.0) / 100))
                out = self.sub_y.copy()
                out[:wrong] = 1.0 - out[:wrong]
                targets.append(out)
            return targets, 0.0, own
    return FakeFolds


def _install_fake_folds(monkeypatch, clock, fixed=0.0, on_build=None):
    """select on the fake clock with :func:`_fake_shared_folds` in place of
    cross_validation_at_Cs (``on_build(sub_rows, keep_bytes)`` sees each build), and
    rungs from 100 rows, 10 a class."""
    import types
    monkeypatch.setattr(sel, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    FakeFolds = _fake_shared_folds(clock, fixed)

    def fake_at_Cs(sub_y, sub_rows, params, Cs, nr_fold, keep_bytes=0):
        if on_build is not None:
            on_build(sub_rows, keep_bytes)
        work = FakeFolds(sub_y)
        targets, _, own = work.targets_at(Cs)
        return targets, work, work.seconds, own

    monkeypatch.setattr(sel, "cross_validation_at_Cs", fake_at_Cs)
    monkeypatch.setattr(sel, "MIN_ROWS", 100)
    monkeypatch.setattr(sel, "ROWS_PER_CLASS", 10)


def test_a_passed_over_member_reuses_its_familys_folds(monkeypatch):
    """A rung that passes over a member of a family whose others ran keeps the
    family's fold work (SharedFolds) and runs the member after all when its own
    training fits in what is left -- alone, with a new map, it would not."""
    clock = [0.0]
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 2))
    y = (X[:, 0] > 0).astype(float)
    builds = []

    def on_build(sub_rows, keep_bytes):
        # the work is kept only where the rung passed over one of the family
        builds.append(sub_rows.n_rows)
        assert keep_bytes == (sel.KEEP_SHARED_BYTES if sub_rows.n_rows == 900 else 0)
    _install_fake_folds(monkeypatch, clock, on_build=on_build)
    cands = [f"-s 1 -L 4 -B 1 -A 2 -u 1 -c {c}" for c in range(1, 10)]
    # rung 0 (300 rows): one unit, 3 s map + 9 x 3 s = 30 s; each trial alone 6 s.
    # rung 1 (900 rows): C = 3, 2, 4 predicted at 4.5 x 6 s, then 4.5 x 3 s each
    # (= 54 s); 42 s left: C = 3 and 2 run (27 s), then C = 4's own 13.5 s / 1.5 = 9 s
    # fits in the 15 s left on the kept map (alone, 18 s, it would not)
    result = sel.select(y, X, budget_s=72, seed=1, candidates=cands, refit=False,
                        refine_C=False)
    rung1 = [t for t in result.trials if t.rung == 1]
    assert [t.options[-4:] for t in rung1] == ["-c 3", "-c 2", "-c 4"]
    assert builds == [300, 900]
    assert rung1[2].note == "each fold's map kept from the same setting's other C"
    assert "ran the best 2 of its 3 candidates that fit" in result.note
    assert "then ran -s 1 -L 4 -B 1 -A 2 -u 1 -c 4 too (15.0 s left)" in result.note
    assert clock[0] <= 72 and result.best_options.endswith("-c 3")


def test_when_no_refit_fits_a_better_model_may_overrun_a_little(monkeypatch):
    """A busy machine: the last trial of the search takes far longer than guessed, and
    no candidate's refit fits in what is left.  The winner is then the best-ranked
    candidate whose refit overruns the budget by at most REFIT_GRACE of it -- not the
    quickest refit, which may be a far worse model (letter: the linear SVM's 36 %
    against the flats' 14.7 % CV error)."""
    def run(grace):
        monkeypatch.setattr(sel, "REFIT_GRACE", grace)
        clock = [0.0]
        # C = 1 the quickest (its refit predicted at 1.1 s), C = 3 the best (2.25 s);
        # C = 9's trial takes 15 s where the last one's 3 s was guessed
        factor = {1.0: 0.2, 3.0: 0.4, 9.0: 5.0}
        result = _select_with_fake_cv(
            monkeypatch, 900, [f"-s 2 -B 1 -c {c}" for c in range(1, 10)],
            lambda C, rows: 5 * abs(C - 3.0), 30,
            seconds=lambda C, rows: rows / 100 * factor.get(C, 1.0),
            refit_seconds=lambda C: 2 * factor.get(C, 1.0), clock=clock)
        return result, clock[0]

    result, end = run(0.1)
    assert result.best_options == "-s 2 -B 1 -c 3"
    assert ("no refit fits in the 0.0 s left; the best-ranked candidate's refit overruns "
            "the budget by at most 3.0 s") in result.note
    result, _ = run(0.0)                 # no grace: the quickest refit, C = 1
    assert result.best_options == "-s 2 -B 1 -c 1"
    assert "whose refit is quickest won" in result.note


def test_C_refinement_keeps_to_the_dual_cd():
    """-C runs every solver now; the selector still refines only a dual-CD winner's C
    (select.FAMILY_SOLVERS): a -s 2 winner refined on its rung's rows did worse on all
    rows (ijcnn1 at a tenth of the RBF SVM's time, 1.31 -> 1.46 % test error)."""
    trials = []
    for options in ("-s 2 -L 2 -A 9 -k 4 -u 1 -c 1", "-s 30 -L 2 -A 9 -k 4 -u 1 -c 1",
                    "-s 2 -t 2 -X 40 -c 1"):
        assert sel._refine_C(None, None, None, 100, options, 5.0, trials, " -S 1 -q", 3,
                             100.0, lambda line: None, 0.01) is None
    assert trials == []


def test_the_fold_work_that_does_not_grow_with_the_rows_is_not_scaled(monkeypatch):
    """A family's fold work part of which does not grow with the rows (SharedFolds.
    fixed_seconds: a kernel map's landmark work once all -X landmarks are drawn) is
    predicted at the next rung at its own cost, the rest ETA times: the rung's
    predicted cost is lower by (ETA - 1) GROWTH times that part, and the same trials
    run (the fake's clock does not depend on the prediction)."""
    import re

    def run(fixed):
        _install_fake_folds(monkeypatch, [0.0], fixed)
        rng = np.random.default_rng(0)
        X = rng.normal(size=(900, 2))
        y = (X[:, 0] > 0).astype(float)
        cands = [f"-s 1 -L 4 -B 1 -A 2 -u 1 -c {c}" for c in range(1, 10)]
        result = sel.select(y, X, budget_s=72, seed=1, candidates=cands, refit=False,
                            refine_C=False)
        predicted = float(re.search(r"predicted ([0-9.]+) s", result.note).group(1))
        return predicted, [t.options for t in result.trials]

    plain, trials = run(0.0)
    with_fixed, same_trials = run(2.0)
    assert plain == pytest.approx(54.0)          # 4.5 x 6 s, then 4.5 x 3 s each
    assert with_fixed == pytest.approx(plain - (sel.ETA - 1) * sel.GROWTH * 2.0)
    assert same_trials == trials


# ------------------------------------------------------------------------ parsimony
def test_parsimony_takes_the_cheapest_model_within_one_paired_standard_error():
    """_parsimonious: the cheapest candidate of the winner's rung whose CV error
    exceeds the winner's by at most one standard error of the paired difference
    (rows only one of the two gets wrong), among those whose work is known and lower
    and whose refit fits."""
    n = 1000
    wrong = np.zeros(n, bool)
    wrong[:10] = True                                  # the winner: rows 0-9 wrong

    def mask(rows):
        m = np.zeros(n, bool)
        m[list(rows)] = True
        return m

    tied = mask(range(5, 16))            # 5 rows better, 6 worse: +0.1 pt, SE 0.33 pt
    worse = mask(range(0, 40))           # 30 rows worse, none better: +3 pt, SE 0 pt
    same = wrong.copy()                  # the same rows: a tie at any SE
    wrong_of = {0: (2, wrong), 1: (2, tied), 2: (2, worse), 3: (2, same), 4: (1, same)}
    ranked = [(1.0, 0, 2), (1.0, 3, 2), (1.1, 1, 2), (4.0, 2, 2), (1.0, 4, 1)]
    work = {0: 100.0, 1: 50.0, 2: 1.0, 3: 60.0, 4: 1.0}
    yes = lambda c: True                                       # noqa: E731
    # the cheapest of the ties (1: 50 < 3: 60); 2 is cheaper but worse; 4 ran on
    # another rung
    assert sel._parsimonious(ranked[0], ranked, wrong_of, work, yes) == (1.1, 1, 2)
    # a refit that does not fit is passed over
    assert sel._parsimonious(ranked[0], ranked, wrong_of, work, lambda c: c != 1) == (1.0, 3, 2)
    # unknown or higher work: not comparable / not cheaper
    assert sel._parsimonious(ranked[0], ranked, wrong_of, {**work, 1: None, 3: 150.0},
                             yes) is None
    assert sel._parsimonious(ranked[0], ranked, wrong_of, {**work, 0: None}, yes) is None
    # the winner's paired SE: b = 5 better, d = 6 worse -> sqrt(11 - 1/n) / n
    b, d = 5, 6
    assert (d - b) / n <= (b + d - (b - d) ** 2 / n) ** 0.5 / n
    # one more row worse than the SE allows: no longer a tie
    over = mask(list(range(5, 16)) + list(range(100, 104)))   # b 5, d 10: +0.5 > 0.39
    assert sel._parsimonious(ranked[0], [ranked[0], (1.5, 1, 2)],
                             {**wrong_of, 1: (2, over)}, work, yes) is None


def test_prediction_work_counts_the_k_q_models_multiply_adds():
    from lcoding.methods.kq import prediction_work
    p = parse_train_options("-s 41 -k 20 -Q 12 -l 50 -y 1 -W 5")
    # the PCA (100 values a row x 50) + 10 classes x 5 restarts x 20 flats x (12 + 1) x 50
    assert prediction_work(p, 256, 100.0, 10) == 100 * 50 + 10 * 5 * 20 * 13 * 50
    p = parse_train_options("-s 40 -k 8 -Q 20 -Z 1 -W 1")        # no PCA, through 0
    assert prediction_work(p, 30, 30.0, 3) == 3 * 1 * 8 * 20 * 30
    assert prediction_work(parse_train_options("-s 2 -c 1"), 30, 30.0, 3) is None
    assert prediction_work(parse_train_options("-s 41 -k 2 -Q 2 -K 3"), 30, 30.0,
                           3) is None


@pytest.mark.slow
def test_select_prefers_a_cheaper_k_q_model_its_folds_cannot_tell_apart():
    """Three well separated classes: the flats of every size make no CV error, so the
    cheapest wins (a note says so) though it is listed last; parsimony=False keeps the
    first of the ties."""
    import scipy.sparse as sp
    rng = np.random.default_rng(7)
    centres = rng.normal(scale=20.0, size=(3, 8))
    y = (np.arange(900) % 3).astype(float)
    X = sp.csr_matrix(centres[y.astype(int)] + rng.normal(size=(900, 8)))
    flats = "-Z 0 -z 0.5 -y 1 -W 2"
    cands = [f"-s 41 -k 4 -Q 3 -l 8 {flats}", f"-s 41 -k 2 -Q 2 -l 8 {flats}",
             f"-s 41 -k 1 -Q 1 -l 4 {flats}"]
    result = sel.select(y, X, budget_s=120, seed=2, candidates=cands, refit=False,
                        refine_C=False, screen=False)
    last = [t for t in result.trials if t.rung == max(t.rung for t in result.trials)]
    assert all(t.cv_error == 0.0 for t in last)
    assert result.best_options == cands[2]
    assert f"parsimony: {cands[2]} (0.00 % CV error" in result.note
    plain = sel.select(y, X, budget_s=120, seed=2, candidates=cands, refit=False,
                       refine_C=False, parsimony=False, screen=False)
    assert plain.best_options == cands[0] and "parsimony" not in plain.note


# ------------------------------------------------------------------------ the screen
def test_screen_margin_screens_the_most_rows_within_one_paired_standard_error():
    """_screen_margin: screening the rows of largest margin first, the most rows whose
    screened CV labels stay within one paired standard error of the model's; the
    margin is the last screened row's, and a tie at the cut is left out."""
    n = 1000
    y = np.zeros(n)
    full = np.zeros(n)
    screen = np.zeros(n)
    margins = np.linspace(10.0, 0.01, n)        # row i: the i-th largest margin
    full[:10] = 1                               # the model gets rows 0-9 wrong
    screen[[700, 720, 740, 760, 780, 800, 820, 840, 860, 880, 900]] = 1
    # rows 0-699: b = 10 (the screen is right where the model is wrong), c = 0
    # row 700 on: one more wrong row every 20; c - b <= sqrt(b + c - (b - c)^2 / n)
    # holds up to c = 14 and beyond: every row, with 11 wrong rows -- so the cheapest:
    margin, m, extra = sel._screen_margin(y, full, screen, margins, 1.0, 10.0)
    assert m == n and margin == margins[-1] and extra == 11 - 10
    # twenty more wrong rows near the end: the last row where the sum still holds
    screen[950:970] = 1
    margin, m, extra = sel._screen_margin(y, full, screen, margins, 1.0, 10.0)
    b, c = 10, np.cumsum(screen[:n] == 1)
    within = np.flatnonzero((c - b) <= np.sqrt(np.maximum(b + c - (b - c) ** 2 / n, 0.0)))
    assert m == within[-1] + 1 and margin == margins[m - 1] and extra == c[m - 1] - b
    # a tie at the cut: the rows of that margin stay unscreened together
    tied = margins.copy()
    tied[m - 1:m + 1] = margins[m - 1]
    margin_t, m_t, _ = sel._screen_margin(y, full, screen, tied, 1.0, 10.0)
    assert m_t == m - 1 and margin_t == tied[m - 2]
    # too little saved: the screen's own work is paid on every row
    assert sel._screen_margin(y, full, screen, margins, 9.5, 10.0)[0] is None
    # non-positive margins are never screened (a tie between two classes)
    assert sel._screen_margin(y, full, full, np.zeros(n), 1.0, 10.0)[:2] == (None, 0)


@pytest.mark.slow
def test_select_gives_an_affine_flats_winner_the_screen_its_folds_choose():
    """Three separated classes, flats with two restarts: the screen agrees with the
    model on every fold row, so it screens them all; the refit carries the margin,
    and its labels are the argmax of its decision values.  screen=False: none."""
    import scipy.sparse as sp
    from lcoding.core.rows import as_rows
    rng = np.random.default_rng(7)
    centres = rng.normal(scale=20.0, size=(3, 8))
    y = (np.arange(900) % 3).astype(float)
    X = sp.csr_matrix(centres[y.astype(int)] + rng.normal(size=(900, 8)))
    cands = ["-s 41 -k 4 -Q 3 -l 8 -Z 0 -z 0.5 -y 1 -W 2"]
    result = sel.select(y, X, budget_s=120, seed=2, candidates=cands, refine_C=False)
    assert result.screen_margin is not None and result.screen_margin > 0
    # the screen is an option of the winner: -U with -s 41
    assert result.best_options == f"{cands[0]} -U {float_text(result.screen_margin)}"
    assert f"screen -U {float_text(result.screen_margin)}: " in result.note
    assert "on its folds 900 of the rung's 900 rows (100.0 %)" in result.note
    model = result.model
    assert model.screen is not None and model.screen.margin == result.screen_margin
    assert model_to_text(model) == model_to_text(
        train_model(y, _rows(X), parse_train_options(result.best_options + " -S 2 -q")))
    rows = as_rows(X)
    assert np.array_equal(model.predict_labels(rows),
                          model.labels_from_values(model.decision_values(rows)))
    assert np.mean(model.predict_labels(rows) != y) < 0.01
    plain = sel.select(y, X, budget_s=120, seed=2, candidates=cands, refine_C=False,
                       screen=False)
    assert plain.screen_margin is None and plain.model.screen is None
    assert "screen" not in plain.note
    # another method's winner has none
    linear = sel.select(y, X, budget_s=120, seed=2, candidates=["-s 2 -c 1"],
                        refine_C=False)
    assert linear.screen_margin is None and "screen" not in linear.note
