"""-m N on one binary dual-CD problem: CoCoA+'s kernel subproblem scalar, the
block-synchronous sweep against a NumPy reference (its merges, its damping), one
partition = LIBLINEAR's solver bit for bit, -m 2 reaches -m 1's objective by both
schemes, same -S and -m give the same model, Ctrl-C stops the threads,
multi-class problems keep their class threads."""
from __future__ import annotations

import io
import re
import threading

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import splitmix64

from lcoding.core.classes import group_classes
from lcoding.core.messages import Messages
from lcoding.core.options import parse_train_options
from lcoding.core.rows import rows_from_sparse
from lcoding.core.seeds import rng_state
from lcoding.linear import _dual_cd, cocoa
from lcoding.linear.dual_cd import solve_l2r_l1l2_svc
from lcoding.linear.problem import EMPTY_IDX, EMPTY_WEIGHT, BinaryProblem, Coding
from lcoding.training import train_model


def _problem(rows, y_pm, C=1.0, bias=1.0, coding=None, seed=1):
    return BinaryProblem(rows, y_pm, C, C, bias, rng_state(seed, 1, 0), coding=coding)


def primal_objective(model, y, rows, C, loss):
    """``1/2 ||w||^2 + C sum loss(y f(x))`` of a binary model (+1 = ``label[0]``)."""
    f = model.decision_values(rows)[:, 0]
    ypm = np.where(np.trunc(y) == model.label[0], 1.0, -1.0)
    m = np.maximum(0.0, 1.0 - ypm * f)
    return 0.5 * float(np.sum(model.w ** 2)) + C * float(np.sum(m ** 2 if loss == "l2" else m))


@pytest.fixture(scope="module")
def banana(shared_data):
    y, X, ty, tX = shared_data("banana")
    return y, rows_from_sparse(X), ty, rows_from_sparse(tX)


@pytest.fixture(scope="module")
def ijcnn1_sub(shared_data):
    y, X, ty, tX = shared_data("ijcnn1")
    n = 20000
    return y[:n], rows_from_sparse(X[:n]), ty[:20000], rows_from_sparse(tX[:20000])


# ------------------------------------------------------------------ the kernel
def test_sigma_scales_the_axpy_and_only_the_axpy(banana):
    """A pass with sigma = s on a working copy moves it by s * sum_i y_i dalpha_i z_i
    (the CoCoA+ subproblem), and sigma = 1 is the default pass exactly."""
    y, rows, _, _ = banana
    n = rows.n_rows
    y_pm = np.where(y > 0, 1, -1).astype(np.int8)
    diag, upper = cocoa.loss_terms(np.full(n, 1.0), "l2")
    sq = cocoa.row_sqnorms(rows, 1.0, -1.0, EMPTY_IDX, EMPTY_WEIGHT)
    X = sp.hstack([rows.to_csr(), np.ones((n, 1))]).tocsr()
    for sigma in (1.0, 2.0, 3.0):
        alpha = np.zeros(n)
        W = np.zeros(rows.n_features + 1)
        state = cocoa.PartState.fresh(np.arange(0, n, 2), rng_state(7, 1))
        cocoa.partition_pass(rows, 1.0, -1.0, EMPTY_IDX, EMPTY_WEIGHT, y_pm,
                             cocoa.subproblem_qd(sq, diag, sigma), diag, upper, alpha, W,
                             state, np.inf, -np.inf, sigma)
        assert np.count_nonzero(alpha[1::2]) == 0           # only the partition's rows
        assert np.allclose(W / sigma, X.T @ (y_pm * alpha), rtol=1e-12, atol=1e-12)
    # sigma = 1 given explicitly = the pass without it, bit for bit
    outs = []
    for extra in ((), (-1.0, 1.0)):
        alpha, W = np.zeros(n), np.zeros(rows.n_features + 1)
        index, rng = np.arange(n, dtype=np.int32), rng_state(3, 1).copy()
        for _ in range(3):
            _dual_cd.dual_cd_pass(rows.data, rows.indices, rows.indptr, rows.n_features, 1.0,
                                  EMPTY_IDX, EMPTY_WEIGHT, y_pm, sq + diag, diag, upper, alpha,
                                  W, index, n, np.inf, -np.inf, rng, *extra)
        outs.append((alpha, W))
    assert np.array_equal(outs[0][0], outs[1][0]) and np.array_equal(outs[0][1], outs[1][1])


def test_subproblem_qd_is_exact_at_sigma_one():
    sq, diag = np.array([0.1, 2.5, 3.0]), np.array([0.5, 0.5, 0.25])
    assert np.array_equal(cocoa.subproblem_qd(sq, diag, 1.0), sq + diag)
    assert np.allclose(cocoa.subproblem_qd(sq, diag, 2.0), 2 * sq + diag)


# ------------------------------------------------ the block-synchronous sweep
def _shuffled(index, state):
    """lcoding/core/_rng.pxd's rng_shuffle_prefix over all of ``index`` (splitmix64 and
    Fisher-Yates in Python; ``state``: a one-item list)."""
    index = list(index)
    for s in range(len(index)):
        j = s + splitmix64(state) % (len(index) - s)
        index[s], index[j] = index[j], index[s]
    return index


def _block_reference(Z, y, diag, upper, parts, streams, block_rows, passes):
    """The block-synchronous dual CD (_dual_cd.dual_cd_block_pass's doc) in NumPy on
    explicit rows ``Z``, the threads in lockstep, no shrinking: ``(alpha, W,
    damped merges)``."""
    n, K = Z.shape[0], len(parts)
    QD = np.einsum("ij,ij->i", Z, Z) + diag
    alpha, W, damped = np.zeros(n), np.zeros(Z.shape[1]), 0
    states = [[int(s)] for s in streams]
    orders = [list(p) for p in parts]
    for _ in range(passes):         # (each pass shuffles the last pass's order)
        orders = [_shuffled(orders[k], states[k]) for k in range(K)]
        for start in range(0, max(len(o) for o in orders), block_rows):
            local, moved = [W.copy() for _ in range(K)], []
            for k in range(K):
                for i in orders[k][start:start + block_rows]:
                    G = y[i] * float(local[k] @ Z[i]) - 1.0 + alpha[i] * diag[i]
                    PG = G if 0.0 < alpha[i] < upper[i] else (
                        min(G, 0.0) if alpha[i] == 0.0 else max(G, 0.0))
                    if abs(PG) > 1e-12:
                        old = alpha[i]
                        alpha[i] = min(max(old - G / QD[i], 0.0), upper[i])
                        local[k] += (alpha[i] - old) * y[i] * Z[i]
                        moved.append((i, old))
            u = sum(local[k] - W for k in range(K))
            da = np.array([alpha[i] - old for i, old in moved])
            ids = np.array([i for i, _ in moved], dtype=int)
            lin = float(W @ u) + float(np.dot(diag[ids] * (alpha[ids] - da) - 1.0, da))
            quad = float(u @ u) + float(np.dot(diag[ids], da * da))
            t = 1.0
            if lin + 0.5 * quad > 0:
                t, damped = min(max(-lin / quad, 0.0), 1.0) if quad > 0 else 0.0, damped + 1
                alpha[ids] = alpha[ids] - da + t * da
            W = W + t * u
    return alpha, W, damped


def _block_kernel(rows, y, diag, upper, parts, streams, block_rows, passes):
    """The same sweeps by the kernel, one real thread per partition."""
    n, K, w_size = rows.n_rows, len(parts), rows.n_features + 1
    sq = cocoa.row_sqnorms(rows, 1.0, -1.0, EMPTY_IDX, EMPTY_WEIGHT)
    alphas = np.zeros((K, n))            # one copy per thread, as the driver keeps them
    W_local, W_base = np.zeros((K, 2, w_size + 8)), np.zeros((K, w_size + 8))  # padded
    stats, barrier = np.zeros((2, K, 4)), np.zeros(2, dtype=np.int64)
    moved, moved_old = np.zeros((K, block_rows), dtype=np.int32), np.zeros((K, block_rows))
    index = [np.array(p, dtype=np.int32) for p in parts]
    states = [np.array([s], dtype=np.uint64) for s in streams]
    parity, damped = 0, 0
    for _ in range(passes):
        out = [None] * K

        def run(k):
            out[k] = _dual_cd.dual_cd_block_pass(
                rows.data, rows.indices, rows.indptr, rows.n_features, 1.0, EMPTY_IDX,
                EMPTY_WEIGHT, y, sq + diag, diag, upper, alphas[k], W_local, W_base, w_size,
                stats, moved[k], moved_old[k], barrier, k, parity, block_rows, index[k],
                index[k].shape[0], np.inf, -np.inf, states[k])
        threads = [threading.Thread(target=run, args=(k,)) for k in range(K)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert len({o[3] for o in out}) == 1 and not any(o[6] for o in out)
        parity, damped = out[0][3], damped + out[0][5]
        assert all(np.array_equal(W_base[k], W_base[0]) for k in range(K))
        assert not W_base[:, w_size:].any() and not W_local[:, :, w_size:].any()
    alpha = np.zeros(n)
    for k in range(K):
        alpha[index[k]] = alphas[k, index[k]]
    assert np.count_nonzero(alphas) == np.count_nonzero(alpha)   # each copy its own rows
    return alpha, W_base[0, :w_size], damped


@pytest.mark.parametrize("K, block_rows, duplicated", [(2, 16, False), (3, 7, False),
                                                       (2, 64, True)])
def test_block_sweep_matches_its_numpy_reference(K, block_rows, duplicated):
    """Real threads meeting at a spin barrier give the lockstep reference's alpha and
    W; with every row duplicated in another partition and long blocks the added steps
    overshoot, the merges are damped and the dual objective still falls pass by pass."""
    rng = np.random.default_rng(K)
    n, d = 240, 6
    X = rng.standard_normal((n, d))
    y_pm = np.where(X @ rng.standard_normal(d) + 0.5 * rng.standard_normal(n) > 0, 1,
                    -1).astype(np.int8)
    if duplicated:                # rows i and i + n/2 alike, in different partitions
        X[n // 2:], y_pm[n // 2:] = X[:n // 2], y_pm[:n // 2]
        parts = [np.arange(0, n // 2), np.arange(n // 2, n)]
    else:
        parts = np.array_split(rng.permutation(n), K)
        parts = [np.sort(p) for p in parts]
    rows = rows_from_sparse(sp.csr_matrix(X))
    Z = np.hstack([X, np.ones((n, 1))])
    diag, upper = cocoa.loss_terms(np.full(n, 10.0), "l2" if K == 2 else "l1")
    streams = [11 + k for k in range(K)]
    objectives = []
    for passes in (1, 2, 3):
        a_ref, w_ref, damped_ref = _block_reference(Z, y_pm, diag, upper, parts, streams,
                                                    block_rows, passes)
        a, w, damped = _block_kernel(rows, y_pm, diag, upper, parts, streams, block_rows, passes)
        np.testing.assert_allclose(a, a_ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(w, w_ref, rtol=1e-10, atol=1e-12)
        assert damped == damped_ref
        objectives.append(cocoa.dual_objective(w, a, diag))
    assert objectives[0] > objectives[1] > objectives[2]
    if duplicated:
        assert damped > 0


def coded_nonzeros(prob):
    """The non-zeros of the coded rows, counted here: per non-zero coding weight, the
    row's non-zeros and its bias."""
    bias, _ = prob.kernel_bias
    per_anchor = np.diff(prob.rows.indptr) + (1 if bias >= 0 else 0)
    anchor_idx, coding_weight = prob.coding_arrays()
    anchors = np.count_nonzero(coding_weight, axis=1) if anchor_idx.shape[0] else 1
    return int((anchors * per_anchor).sum())


def test_coded_nonzeros_bound_is_exact_without_zero_weights(banana):
    from lcoding.linear.problem import coded_nonzeros_bound
    y, rows, _, _ = banana
    y_pm = np.where(y > 0, 1, -1).astype(np.int8)
    n = rows.n_rows
    idx = np.ascontiguousarray(np.tile(np.arange(3, dtype=np.int32), (n, 1)))
    wt = np.full((n, 3), 1 / 3)
    for bias in (1.0, -1.0):
        for coding in (None, Coding(idx, wt, 3)):
            prob = BinaryProblem(rows, y_pm, 1.0, 1.0, bias, rng_state(1, 1, 0), coding=coding)
            assert coded_nonzeros_bound(prob) == coded_nonzeros(prob)
    wt0 = wt.copy()
    wt0[::2, 0] = 0.0                           # zero weights: the bound is above
    prob = BinaryProblem(rows, y_pm, 1.0, 1.0, 1.0, rng_state(1, 1, 0), coding=Coding(idx, wt0, 3))
    assert coded_nonzeros_bound(prob) > coded_nonzeros(prob)


def test_a_small_problem_keeps_the_sequential_solver_at_m2(banana, ijcnn1_sub):
    """Below PARALLEL_MIN_NONZEROS coded non-zeros -m 2 is -m 1, model and text; above
    it the rows go to the threads."""
    y, rows, _, _ = banana
    for options in ("-s 1 -c 1 -B 1", "-s 3 -L 2 -A 20 -k 4 -u 1 -c 1 -B 1"):
        a, out1 = _fit(y, rows, options + " -m 1")
        b, out2 = _fit(y, rows, options + " -m 2")
        # the phase and solve times ("(0.01 s)", "44 passes, 0.00 s") differ
        untimed = [re.sub(r"[0-9.]+ s\b", "s", out) for out in (out1, out2)]
        assert np.array_equal(a.w, b.w) and untimed[0] == untimed[1]
    y, rows, _, _ = ijcnn1_sub                       # 20 000 x 14 = 280 000 non-zeros
    _, out = _fit(y, rows, "-s 1 -c 1 -B 1 -m 2")
    assert "block-synchronous dual CD: 2 threads" in out


def test_block_rows_keep_sixteen_blocks_per_thread_and_pass():
    assert cocoa.block_rows(50000, 2) == cocoa.BLOCK_ROWS == 128
    assert cocoa.block_rows(3533, 2) == 110            # banana: 3533 // 32
    assert cocoa.block_rows(333, 2) == 10              # a -C fold of 500 rows
    assert cocoa.block_rows(200, 2) == 0               # 6 rows a block: too few
    assert cocoa.block_rows(50000, 4) == 128


@pytest.mark.slow
def test_use_blocks_weighs_the_merge_against_a_block():
    rng = np.random.default_rng(0)
    narrow = rows_from_sparse(sp.random(5000, 20, density=0.5, random_state=1, format="csr"))
    wide = rows_from_sparse(sp.random(5000, 3000, density=0.002, random_state=1, format="csr"))
    y = np.where(rng.random(5000) > 0.5, 1, -1).astype(np.int8)
    assert cocoa.use_blocks(_problem(narrow, y), 2)
    assert not cocoa.use_blocks(_problem(narrow, y), 1)
    assert not cocoa.use_blocks(_problem(wide, y), 2)      # a merge would cost 7 blocks
    small = rows_from_sparse(sp.random(100, 20, density=0.5, random_state=1, format="csr"))
    assert not cocoa.use_blocks(_problem(small, y[:100]), 2)  # fewer rows than 2 blocks


# -------------------------------------------------------------- the driver
@pytest.mark.parametrize("loss", ["l1", "l2"])
def test_one_partition_is_liblinears_solver(banana, loss):
    y, rows, _, _ = banana
    y_pm = np.where(y > 0, 1, -1).astype(np.int8)
    params = parse_train_options("-s 1 -c 1 -B 1")
    a = solve_l2r_l1l2_svc(_problem(rows, y_pm), params, Messages(True), loss)
    b = cocoa.solve_l2r_l1l2_svc_cocoa(_problem(rows, y_pm), params, Messages(True), loss, 1)
    assert a.n_iter == b.n_iter
    assert np.array_equal(a.w, b.w) and np.array_equal(a.alpha, b.alpha)


def test_one_partition_is_liblinears_solver_on_coded_rows(banana):
    y, rows, _, _ = banana
    rng = np.random.default_rng(0)
    n, k, m = rows.n_rows, 3, 5
    idx = np.ascontiguousarray(np.argsort(rng.random((n, m)), axis=1)[:, :k].astype(np.int32))
    wt = rng.random((n, k))
    wt /= wt.sum(axis=1, keepdims=True)
    coding = Coding(idx, np.ascontiguousarray(wt), m)
    y_pm = np.where(y > 0, 1, -1).astype(np.int8)
    params = parse_train_options("-s 1 -c 1 -B 1")
    a = solve_l2r_l1l2_svc(_problem(rows, y_pm, coding=coding), params, Messages(True), "l2")
    b = cocoa.solve_l2r_l1l2_svc_cocoa(_problem(rows, y_pm, coding=coding), params,
                                       Messages(True), "l2", 1)
    assert np.array_equal(a.w, b.w) and np.array_equal(a.alpha, b.alpha)


def test_partitions_are_fixed_balanced_and_cover_the_rows():
    state = rng_state(5, 1, 0)
    parts = cocoa.split_rows(1003, 4, state)
    assert sorted(np.concatenate(parts).tolist()) == list(range(1003))
    assert {p.size for p in parts} <= {250, 251}
    assert all(np.all(np.diff(p) > 0) for p in parts)
    again = cocoa.split_rows(1003, 4, state)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def test_stop_rule():
    rule = cocoa.StopRule(0.1, 5)
    assert rule.update(1.0, -1.0, True) == "continue"
    assert (rule.PGmax_old, rule.PGmin_old) == (1.0, -1.0)
    assert rule.update(0.05, -0.01, False) == "unshrink" and rule.unshrink
    assert (rule.PGmax_old, rule.PGmin_old) == (np.inf, -np.inf)
    assert rule.update(0.05, -0.01, True) == "stop" and rule.reason == "projected gradient"
    capped = cocoa.StopRule(0.1, 2)
    capped.update(1.0, -1.0, True)
    assert capped.update(1.0, -1.0, True) == "stop" and capped.reason == "iteration cap"
    # the cap also ends a run that keeps converging on a shrunk set only
    looping = cocoa.StopRule(0.1, 3)
    assert [looping.update(0.05, -0.01, False) for _ in range(3)] == \
        ["unshrink", "unshrink", "stop"] and looping.reason == "iteration cap"
    # with partitions: W unchanged for PATIENCE rounds -> a duality-gap check
    still = cocoa.StopRule(0.1, 100, w_tol=1e-3)          # gap_tol = 0.01 eps = 1e-3
    assert still.update(1.0, -1.0, True, 1e-4) == "continue"
    assert still.update(1.0, -1.0, True, 1e-2) == "continue"       # not consecutive
    assert still.update(1.0, -1.0, True, 1e-4) == "continue"
    assert still.update(1.0, -1.0, True, 1e-4) == "gap"
    assert still.gap_checked(100.0, -99.0) == "continue"           # gap 1e-2
    assert [still.update(1.0, -1.0, True, 1e-4) for _ in range(4)] == ["continue"] * 3 + ["gap"]
    assert still.gap_checked(100.0, -99.95) == "stop" and still.reason.startswith("duality gap")
    # with partitions the cap holds as well
    capped = cocoa.StopRule(0.1, 1, w_tol=1e-3)
    assert capped.update(1.0, -1.0, True, 1e-4) == "stop" and capped.reason == "iteration cap"


def test_routing():
    assert cocoa.parallel_binary_solver(1, 1, 2) is not None
    assert cocoa.parallel_binary_solver(3, 1, 4) is not None
    assert cocoa.parallel_binary_solver(1, 10, 2) is None       # classes in threads
    assert cocoa.parallel_binary_solver(1, 1, 1) is None        # one thread
    assert cocoa.parallel_binary_solver(2, 1, 2) is None        # not a dual CD solver


# ------------------------------------------------------- through the methods
def _fit(y, rows, options):
    buf = io.StringIO()
    model = train_model(y, rows, parse_train_options(options), Messages(False, buf))
    return model, buf.getvalue()


SCHEMES = {True: "block-synchronous dual CD: 2 threads", False: "CoCoA+: 2 partitions"}


@pytest.fixture(params=[True, False], ids=["blocks", "rounds"])
def scheme(request, monkeypatch):
    """Both ways of -m N on one problem: the block-synchronous sweep and CoCoA+'s
    rounds (cocoa.use_blocks decides between them by the problem's shape)."""
    monkeypatch.setattr(cocoa, "use_blocks", lambda prob, n_parts: request.param and n_parts > 1)
    monkeypatch.setattr(cocoa, "PARALLEL_MIN_NONZEROS", 0)     # banana too (11 000)
    return request.param


@pytest.mark.parametrize("options", ["-s 1 -c 1 -B 1 -e 0.01", "-s 3 -c 1 -B 1",
                                     "-s 1 -L 2 -A 30 -k 4 -u 0.5 -c 1 -B 1"])
def test_m2_reaches_the_m1_objective(ijcnn1_sub, options, scheme):
    y, rows, ty, trows = ijcnn1_sub
    loss = "l1" if options.startswith("-s 3") else "l2"
    m1, _ = _fit(y, rows, options + " -m 1")
    m2, out = _fit(y, rows, options + " -m 2")
    assert SCHEMES[scheme] in out
    p1 = primal_objective(m1, y, rows, 1.0, loss)
    p2 = primal_objective(m2, y, rows, 1.0, loss)
    assert abs(p2 - p1) <= 1e-3 * abs(p1), (p1, p2)
    acc = [np.mean(m.labels_from_values(m.decision_values(trows.truncated(m.nr_feature))) == ty)
           for m in (m1, m2)]
    assert abs(acc[0] - acc[1]) <= 0.002


def test_m2_llsvm_banana_reaches_the_m1_objective(banana, scheme):
    y, rows, _, _ = banana
    options = "-s 1 -L 2 -A 20 -k 4 -u 1 -c 1 -B 1 -e 0.01"
    m1, _ = _fit(y, rows, options + " -m 1")
    m2, _ = _fit(y, rows, options + " -m 2")
    p1 = primal_objective(m1, y, rows, 1.0, "l2")
    p2 = primal_objective(m2, y, rows, 1.0, "l2")
    assert abs(p2 - p1) <= 1e-3 * abs(p1), (p1, p2)


@pytest.mark.parametrize("options", ["-s 1 -c 1 -B 1", "-s 1 -L 1 -A 20 -k 4 -c 1 -B 1 -S 3"])
def test_m2_twice_gives_the_same_model(banana, options, scheme):
    y, rows, _, _ = banana
    a, _ = _fit(y, rows, options + " -m 2")
    b, _ = _fit(y, rows, options + " -m 2")
    assert np.array_equal(a.w, b.w)
    c, _ = _fit(y, rows, options + " -m 3")       # another partition count: another model
    assert not np.array_equal(a.w, c.w)


@pytest.mark.slow
def test_multiclass_keeps_its_class_threads(shared_data):
    y, X, _, _ = shared_data("usps")
    rows = rows_from_sparse(X[:1500])
    y = y[:1500]
    assert group_classes(y)[0].size > 2
    for options in ("-s 1 -c 1 -B 1", "-s 1 -L 2 -A 10 -k 3 -u 0.05 -c 1 -B 1"):
        a, out = _fit(y, rows, options + " -m 1")
        b, out2 = _fit(y, rows, options + " -m 2")
        assert np.array_equal(a.w, b.w)
        assert "CoCoA+" not in out2 and "block-synchronous" not in out2


@pytest.mark.slow
def test_the_round_threads_stop_on_a_stop_request_and_are_not_left_behind(monkeypatch,
                                                                          scheme):
    """Ctrl-C (the stop request of core.threads) during -m 2 rounds or block sweeps:
    the partitions' passes return at their next check (a thread waiting at the block
    barrier too), TrainingInterrupted is raised within a second and no thread
    survives the solve."""
    import threading

    from lcoding.core import threads
    rng = np.random.default_rng(0)
    n, d = 40000, 50
    X = sp.random(n, d, density=0.3, random_state=1, format="csr")
    y_pm = np.where(X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n) > 0, 1,
                    -1).astype(np.int8)
    params = parse_train_options("-s 3 -c 1000 -B 1 -e 1e-12")    # rounds up to the cap
    # count the partitions' passes that start once the stop is requested
    passes = {"before": 0, "after": 0}

    class CountingKernels:
        def __getattr__(self, name):
            return getattr(_dual_cd, name)

        @staticmethod
        def dual_cd_pass(*args, **kwargs):
            passes["after" if threads.stop_requested() else "before"] += 1
            return _dual_cd.dual_cd_pass(*args, **kwargs)

        @staticmethod
        def dual_cd_block_pass(*args, **kwargs):
            passes["after" if threads.stop_requested() else "before"] += 1
            return _dual_cd.dual_cd_block_pass(*args, **kwargs)
    monkeypatch.setattr(cocoa, "_dual_cd", CountingKernels())
    timer = threading.Timer(0.3, threads._request_stop)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            cocoa.solve_l2r_l1l2_svc_cocoa(_problem(rows_from_sparse(X), y_pm, C=1000.0),
                                           params, Messages(True), "l1", 2, max_iter=100000)
        # the passes under way returned at their next row check and no round followed:
        # at most one pass per partition started in the round the request fell into
        assert passes["before"] > 0 and passes["after"] <= 2
    finally:
        timer.join()
        threads._clear_stop()
    assert not [th for th in threading.enumerate() if th.name.startswith("lcoding-cocoa")]


@pytest.mark.parametrize("stall_rule", [True, False])
@pytest.mark.slow
def test_m2_hands_a_lagging_coded_problem_to_newton(shared_data, stall_rule, monkeypatch):
    """skin's LL-SVM: CoCoA+'s W stops moving while its duality gap is 50x its
    tolerance, and its projected-gradient spread stops halving; the primal Newton
    solver finishes from W in the -m threads, at the -m 1 objective within 1e-3
    (before: 300 rounds to the cap).  The stall rule takes it over first; without it
    (a spread that keeps halving) the duality-gap hand-off does."""
    if not stall_rule:
        monkeypatch.setattr("lcoding.linear.cocoa.STALL_PASSES", 10 ** 6)
    y, X, _, _ = shared_data("skin")
    ids = np.sort(np.random.default_rng(0).choice(X.shape[0], 20000, replace=False))
    y, rows = y[ids], rows_from_sparse(X[ids] / 255.0)
    options = "-s 1 -L 1 -A 50 -k 8 -c 10 -B 1"
    m1, _ = _fit(y, rows, options + " -m 1")
    m2, out = _fit(y, rows, options + " -m 2")
    if stall_rule:
        assert "did not halve in 20 rounds" in out and "Switching to use -s 2" in out
    else:
        assert "with W still: Newton" in out and "Continuing with -s 2" in out
    p1 = primal_objective(m1, y, rows, 10.0, "l2")
    p2 = primal_objective(m2, y, rows, 10.0, "l2")
    # the gap hand-off runs Newton to 1e-3 of the optimum (NEWTON_FINISH_TOL); the stall
    # hand-off, as -m 1's and LIBLINEAR's at the cap, to 0.1 of its tolerance, from a
    # farther start: 0.84 % above here
    assert abs(p2 - p1) <= (1e-2 if stall_rule else 1e-3) * p1, (p1, p2)
    again, _ = _fit(y, rows, options + " -m 2")
    np.testing.assert_array_equal(again.w, m2.w)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("options", ["-s 1 -w1 0 -B 1", "-s 1 -L 2 -A 30 -k 4 -u 0.5 -w1 0 -B 1"])
def test_a_class_weight_of_0_keeps_the_gap_certificate(ijcnn1_sub, options, scheme):
    """-w<label> 0: that class's rows have D_ii = inf and stay at alpha = 0.  LIBLINEAR's
    dual objective makes that 0 * inf = NaN; CoCoA+'s duality gap leaves them out, so
    -m 2 still stops by its gap rule instead of running to the round cap -- and
    without numpy's warnings."""
    y, rows, _, _ = ijcnn1_sub
    label = int(y.max())
    options = options.replace("-w1", f"-w{label}")
    m1, _ = _fit(y, rows, options + " -m 1")
    m2, out = _fit(y, rows, options + " -m 2")
    # (the block sweeps' own projected gradients may stop them first)
    assert "stopped: iteration cap" not in out and (
        "stopped: duality gap" in out or "stopped: projected gradient" in out), out[-300:]
    assert np.isfinite(m2.w).all()
    # a class that weighs nothing: every training row is predicted as the other class
    assert (m1.labels_from_values(m1.decision_values(rows)) != label).all()
    assert (m2.labels_from_values(m2.decision_values(rows)) != label).all()


@pytest.mark.parametrize("loss", ["l1", "l2"])
def test_warm_start_from_alpha(banana, loss, scheme):
    """init_alpha: one partition = dual_cd's warm start bit for bit; two threads from
    a converged dual point stop within two passes at the same W; from a smaller C's
    solution they reach the cold optimum."""
    y, rows, _, _ = banana
    y_pm = np.where(y > 0, 1, -1).astype(np.int8)
    params = parse_train_options("-s 1 -c 1 -B 1 -e 0.001")
    cold = solve_l2r_l1l2_svc(_problem(rows, y_pm), params, Messages(True), loss)
    seq = solve_l2r_l1l2_svc(_problem(rows, y_pm), params, Messages(True), loss,
                             init_alpha=0.5 * cold.alpha)
    one = cocoa.solve_l2r_l1l2_svc_cocoa(_problem(rows, y_pm), params, Messages(True), loss,
                                         1, init_alpha=0.5 * cold.alpha)
    assert np.array_equal(seq.w, one.w) and np.array_equal(seq.alpha, one.alpha)
    two = cocoa.solve_l2r_l1l2_svc_cocoa(_problem(rows, y_pm), params, Messages(True), loss,
                                         2, init_alpha=cold.alpha)
    assert two.n_iter <= 2
    np.testing.assert_allclose(two.w, cold.w, rtol=1e-3, atol=1e-3)
    small_C = _problem(rows, y_pm, C=0.25)
    a0 = solve_l2r_l1l2_svc(small_C, params, Messages(True), loss).alpha
    path = cocoa.solve_l2r_l1l2_svc_cocoa(_problem(rows, y_pm), params, Messages(True), loss,
                                          2, init_alpha=a0)
    assert abs(path.objective - cold.objective) <= 1e-3 * abs(cold.objective)
    with pytest.raises(ValueError, match="init_alpha"):
        cocoa.solve_l2r_l1l2_svc_cocoa(_problem(rows, y_pm), params, Messages(True), loss, 2,
                                       init_alpha=np.zeros(3))


def test_block_pass_refuses_arrays_that_do_not_match_the_team(banana):
    """The kernel's loops trust these shapes (no bounds checks): a mismatch is a
    ValueError before any work, never a write out of bounds."""
    y, rows, _, _ = banana
    n, K, w = rows.n_rows, 2, rows.n_features + 1
    y_pm = np.where(y > 0, 1, -1).astype(np.int8)
    diag, upper = cocoa.loss_terms(np.full(n, 1.0), "l2")
    qd = cocoa.row_sqnorms(rows, 1.0, -1.0, EMPTY_IDX, EMPTY_WEIGHT) + diag

    def call(w_size=w, moved=16, stats=(2, K, 4), thread=0, block=16, active=n):
        return _dual_cd.dual_cd_block_pass(
            rows.data, rows.indices, rows.indptr, rows.n_features, 1.0, EMPTY_IDX,
            EMPTY_WEIGHT, y_pm, qd, diag, upper, np.zeros(n), np.zeros((K, 2, w)),
            np.zeros((K, w)), w_size, np.zeros(stats), np.zeros(moved, dtype=np.int32),
            np.zeros(moved), np.zeros(2, dtype=np.int64), thread, 0, block,
            np.arange(n, dtype=np.int32), active, np.inf, -np.inf,
            np.array([1], dtype=np.uint64))
    with pytest.raises(ValueError, match="w_size"):
        call(w_size=w + 1)
    for bad in (dict(moved=8), dict(stats=(2, 1, 4)), dict(thread=2), dict(block=0),
                dict(active=n + 1)):
        with pytest.raises(ValueError, match="do not match"):
            call(**bad)
