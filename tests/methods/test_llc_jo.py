"""LLC-SAPL / LLC-JO (-s 31 -L 2 / -L 3) and the k* coding (-L 3): the greedy
k* loop against a generic convex solver, the anchor gradients against finite
differences, frozen anchors = LL-SVM SGD, -L 3 with the fixed-anchor solvers,
model files."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from lcoding.methods import _joint_sgd
from lcoding.local import _kstar
from lcoding.io import model_files as model_io
from lcoding.core.rows import as_rows
from lcoding.training import load_model_file, model_from_text
from lcoding.local.kstar import KStarCoding, kstar_coding_brute
from lcoding.local.model import LocalModel
from lcoding.core.options import parse_train_options
from lcoding.training import train_model


def train(y, X, opts):
    return train_model(np.asarray(y, dtype=float), as_rows(X), parse_train_options(opts + " -q"))


def values(model, X):
    return model.decision_values(as_rows(X).truncated(model.nr_feature))


def banana(shared_data, n_train=1200, n_test=800):
    y, X, ty, tX = shared_data("banana")
    r = np.random.default_rng(3)
    tr = np.sort(r.permutation(X.shape[0])[:n_train])
    te = np.sort(r.permutation(tX.shape[0])[:n_test])
    return y[tr], X[tr], ty[te], tX[te]


# ------------------------------------------------------------------ k* coding
@pytest.mark.parametrize("seed", range(40))
def test_kstar_loop_equals_convex_solver(seed):
    r = np.random.default_rng(seed)
    m = int(r.integers(1, 16))
    eta = r.exponential(r.choice([0.05, 0.5, 3.0]), size=m)
    if seed % 5 == 0:
        eta[r.integers(m)] = 0.0        # x on an anchor
    idx, gam, lam = _kstar.kstar_eta(np.ascontiguousarray(eta))
    g = np.zeros(m)
    g[idx] = gam
    ref = kstar_coding_brute(eta)
    obj = lambda v: np.linalg.norm(v) + v @ eta   # noqa: E731
    assert abs(g.sum() - 1) < 1e-12 and (g >= 0).all()
    assert obj(g) <= obj(ref) + 1e-9
    assert abs(obj(g) - lam) < 1e-9                 # optimal value = lambda
    np.testing.assert_allclose(g, ref, atol=2e-4)
    # the active set is a prefix of the sorted eta, nearest first
    assert list(np.sort(eta)[:idx.size]) == list(eta[idx])
    raw = lam - eta[idx]
    assert abs(raw @ raw - 1) < 1e-9                # sum of squared raw weights = 1


def test_kstar_limits():
    eta = np.array([0.0, 0.2, 0.4, 5.0])
    idx, gam, _ = _kstar.kstar_eta(1e-9 * eta)
    np.testing.assert_allclose(gam, 0.25, atol=1e-8)           # mu -> 0: uniform over all
    idx, gam, _ = _kstar.kstar_eta(100 * eta)
    assert idx.tolist() == [0] and gam.tolist() == [1.0]        # large mu: hard assignment


@pytest.mark.parametrize("dense", [False, True])
def test_kstar_batch_matches_single(dense):
    r = np.random.default_rng(1)
    X = sp.random(300, 7, density=0.6, random_state=2, format="csr")
    V = r.normal(size=(20, 7)) * 0.5
    coder = KStarCoding(V, 3.0)
    idx, wt, kst, lam = coder.code_full(as_rows(X), n_threads=2, dense=dense)
    D = ((X.toarray()[:, None, :] - V[None]) ** 2).sum(-1)
    for i in range(X.shape[0]):
        ri, rg, rl = _kstar.kstar_eta(3.0 * D[i])
        assert kst[i] == ri.size
        np.testing.assert_array_equal(idx[i, :kst[i]], ri)
        np.testing.assert_allclose(wt[i, :kst[i]], rg, rtol=1e-9, atol=1e-12)
        assert (wt[i, kst[i]:] == 0).all()
    i2, w2 = coder.code(as_rows(X))
    assert i2.shape[1] == kst.max() and np.array_equal(coder.last_kstar, kst)


# ------------------------------------------------------------ anchor gradients
def _setup(seed, m=6, d=3):
    r = np.random.default_rng(seed)
    V = r.normal(size=(m, d))
    x = r.normal(size=d) * 0.5
    w = r.normal(size=m * d)
    b = r.normal(size=m)
    return x, V, w, b


def _f(x, V, w, b, kind, param, k):
    return _joint_sgd.point_gradient(x, np.ascontiguousarray(V), w, b, 1.0, kind, param, k, 0)[0]


def _fd(fun, V, h=1e-6):
    g = np.zeros_like(V)
    for a in range(V.shape[0]):
        for c in range(V.shape[1]):
            Vp, Vm = V.copy(), V.copy()
            Vp[a, c] += h
            Vm[a, c] -= h
            g[a, c] = (fun(Vp) - fun(Vm)) / (2 * h)
    return g


@pytest.mark.parametrize("seed", range(6))
def test_exact_kstar_gradient_matches_finite_differences(seed):
    x, V, w, b = _setup(seed)
    f, idx, grad = _joint_sgd.point_gradient(x, V, w, b, 1.0, 3, 0.7, 0, 0)
    assert idx.size >= 2
    num = _fd(lambda U: _f(x, U, w, b, 3, 0.7, 0), V)
    np.testing.assert_allclose(grad, num, atol=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_seed_and_code_kstar_gradients(seed):
    """Seed variant = gradient with lambda frozen; code variant = w_i x seed's."""
    x, V, w, b = _setup(seed)
    mu = 0.7
    idx, _, lam = _kstar.kstar_eta(mu * ((x - V) ** 2).sum(1))
    _, _, g_seed = _joint_sgd.point_gradient(x, V, w, b, 1.0, 3, mu, 0, 1)
    _, _, g_code = _joint_sgd.point_gradient(x, V, w, b, 1.0, 3, mu, 0, 2)

    def f_lam_fixed(U):
        raw = lam - mu * ((x - U[idx]) ** 2).sum(1)
        s = np.array([w[a * 3:(a + 1) * 3] @ x + b[a] for a in idx])
        return raw @ s / raw.sum()

    np.testing.assert_allclose(g_seed, _fd(f_lam_fixed, V), atol=1e-6)
    raw = lam - mu * ((x - V[idx]) ** 2).sum(1)
    np.testing.assert_allclose(g_code[idx], raw[:, None] * g_seed[idx], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("seed", range(4))
def test_gaussian_gradient_matches_finite_differences(seed):
    x, V, w, b = _setup(seed, m=8)
    _, idx, grad = _joint_sgd.point_gradient(x, V, w, b, 1.0, 2, 1.3, 4, 0)
    assert idx.size == 4
    num = _fd(lambda U: _f(x, U, w, b, 2, 1.3, 4), V)
    np.testing.assert_allclose(grad, num, atol=1e-6)


# ----------------------------------------------------------------- training
@pytest.mark.parametrize("coding", ["-L 2 -k 5 -u 1", "-L 3 -u 2"])
@pytest.mark.parametrize("t0", ["-T 1000", "-T 0"])
def test_frozen_anchors_equal_llsvm_sgd(shared_data, coding, t0):
    """-f 0 is -s 30 with the same coding; with -T 0 both calibrate t0 on the same
    subsample of the same coding."""
    y, X, ty, tX = banana(shared_data, 800, 300)
    base = f"{coding} -A 20 -B 1 -E 3 -c 10 {t0} -P 10"
    joint = train(y, X, f"-s 31 -f 0 {base}")
    sgd = train(y, X, f"-s 30 {base}")
    np.testing.assert_array_equal(joint.coding.anchors, sgd.coding.anchors)
    np.testing.assert_allclose(joint.w, sgd.w, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(values(joint, tX), values(sgd, tX), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("coding", ["-L 2 -k 5 -u 1", "-L 3 -u 2"])
def test_kernel_map_equals_training_on_mapped_rows(shared_data, coding, tmp_path):
    """-s 31 -K: anchors, codes and local models live on the mapped rows; the map is
    stored in the model file and applied at prediction."""
    from lcoding.local.coding import KernelMap
    from lcoding.io.model_files import save_model_file
    from lcoding.training import load_model_file
    y, X, ty, tX = banana(shared_data, 600, 200)
    X, tX = np.abs(X), np.abs(tX)           # the chi-squared map wants x >= 0
    km = KernelMap(2, 1)
    base = f"-s 31 {coding} -A 15 -B 1 -E 2 -c 10 -f 100 -P 10"
    with_map = train(y, X, base + " -K 2 -O 1")
    mapped = train_model(np.asarray(y, dtype=float), km(as_rows(X)),
                         parse_train_options(base + " -q"))
    np.testing.assert_array_equal(with_map.coding.anchors, mapped.coding.anchors)
    np.testing.assert_array_equal(with_map.w, mapped.w)
    np.testing.assert_array_equal(values(with_map, tX), mapped.decision_values(km(as_rows(tX))))
    save_model_file(tmp_path / "m", with_map)
    np.testing.assert_array_equal(values(load_model_file(tmp_path / "m"), tX),
                                  values(with_map, tX))


@pytest.mark.parametrize("solver", [1, 3, 30])
def test_kstar_with_fixed_anchor_solvers(shared_data, solver):
    y, X, ty, tX = banana(shared_data)
    model = train(y, X, f"-s {solver} -L 3 -A 30 -u 2 -B 1 -c 10")
    assert model.coding.name == "KSTAR"
    acc = np.mean(model.labels_from_values(values(model, tX)) == ty)
    assert acc > 0.85


@pytest.mark.parametrize("coding", ["-L 2 -k 5 -u 1", "-L 3 -u 2 -j 0", "-L 3 -u 2 -j 2"])
def test_joint_training_learns_and_curves(shared_data, coding):
    y, X, ty, tX = banana(shared_data)
    model = train(y, X, f"-s 31 {coding} -A 30 -B 1 -E 5 -c 10 -T 1000 -f 10")
    curve = model.training_curve
    assert len(curve["hinge"]) == 5 and len(curve["mean_kstar"]) == 5
    assert curve["hinge"][-1] < curve["hinge"][0]
    acc = np.mean(model.labels_from_values(values(model, tX)) == ty)
    assert acc > 0.85


def test_multiclass_shared_anchors(shared_data):
    y, X, ty, tX = shared_data("usps")
    r = np.random.default_rng(0)
    tr = r.permutation(X.shape[0])[:1500]
    te = r.permutation(tX.shape[0])[:500]
    model = train(y[tr], X[tr], "-s 31 -L 3 -A 20 -u 0.05 -B 1 -E 3 -c 10 -T 1000 -f 1")
    assert model.nr_class == 10 and model.w.shape[1] == 10
    acc = np.mean(model.labels_from_values(values(model, tX[te])) == ty[te])
    assert acc > 0.80


def _three_class(n=240, seed=0):
    r = np.random.default_rng(seed)
    X = r.normal(size=(n, 2))
    y = np.floor((np.arctan2(X[:, 1], X[:, 0]) + np.pi) / (2 * np.pi / 3)).astype(float)
    return y, X


def _reference_joint_sgd_frozen(y, X, model, opts):
    """NumPy reference of -s 31 -f 0 (frozen anchors) with one-vs-rest -wi: problem c
    weights the rows of class c by weight_c and every other row by 1."""
    from lcoding.core.seeds import rng_state
    p = parse_train_options(opts)
    n, d = X.shape
    idx, gam = model.coding.code(as_rows(X))
    labels = model.label
    Y = np.where(y[:, None] == labels[None, :], 1.0, -1.0)
    wc = np.ones(labels.size)
    for lab, w in zip(p.weight_label, p.weight):
        wc[labels == lab] *= w
    cost = np.where(Y > 0, wc[None, :], 1.0)
    m = model.coding.n_anchors
    W, b = np.zeros((labels.size, m, d)), np.zeros((labels.size, m))
    lam, t, count = 1.0 / (p.C * n), 0.0, p.skip
    rng = np.random.Generator(np.random.PCG64(int(rng_state(p.seed, 1, 0)[0])))
    order = np.arange(n, dtype=np.int32)
    for _ in range(p.epochs):
        rng.shuffle(order)
        for i in order:
            t += 1
            eta = 1.0 / (lam * (t + p.t0))
            a, g, x = idx[i], gam[i], X[i]
            for c in range(labels.size):
                f = g @ (W[c, a] @ x + p.bias * b[c, a])
                if Y[i, c] * f < 1:
                    W[c, a] += eta * Y[i, c] * cost[i, c] * g[:, None] * x[None, :]
                    b[c, a] += eta * Y[i, c] * cost[i, c] * g * p.bias
            count -= 1
            if count <= 0:
                W *= 1 - p.skip / (t + p.t0)
                count = p.skip
    return np.concatenate([W, p.bias * 0 + b[:, :, None]], axis=2)   # (nr_class, m, d + 1)


@pytest.mark.parametrize("weights", ["", "-w1 4", "-w0 0.5 -w2 3"])
def test_multiclass_class_weights_match_numpy_reference(weights):
    """-wi works with -s 31 on > 2 classes (LIBLINEAR's one-vs-rest weighting)."""
    y, X = _three_class()
    opts = f"-s 31 -L 2 -k 3 -u 1 -A 6 -f 0 -B 1 -E 2 -c 1 -T 100 -P 4 {weights}"
    model = train(y, X, opts)
    ref = _reference_joint_sgd_frozen(y, X, model, opts)
    got = model.w.reshape(model.coding.n_anchors, 3, model.nr_class)   # (m, d + 1, class)
    np.testing.assert_allclose(np.moveaxis(got, 2, 0), ref, rtol=1e-9, atol=1e-11)


def test_multiclass_class_weight_shifts_predictions():
    y, X = _three_class(600, seed=1)
    base = "-s 31 -L 3 -A 10 -u 1 -B 1 -E 3 -c 1 -T 1000 -f 10"
    plain, heavy = train(y, X, base), train(y, X, base + " -w2 20")
    count = lambda mod: np.sum(mod.labels_from_values(values(mod, X)) == 2)  # noqa: E731
    assert count(heavy) > count(plain)


def test_large_anchor_rate_stays_stable(shared_data):
    """The anchor step is capped (each step moves v_j at most half-way to x or that
    far away): the reference code's rate (1e4 / (t + 1e5)) and far larger ones
    train without collapsing to a one-class model."""
    y, X, ty, tX = banana(shared_data, 800, 400)
    for rate, floor in ((1e4, 0.83), (1e7, 0.6)):     # uncapped: 1e4 collapsed to ~55 %
        model = train(y, X, f"-s 31 -L 3 -A 30 -u 5 -B 1 -E 3 -c 10 -T 100000 -f {rate}")
        assert np.isfinite(model.coding.anchors).all()
        acc = np.mean(model.labels_from_values(values(model, tX)) == ty)
        assert acc > floor


@pytest.mark.parametrize("coding", ["-L 2 -k 5 -u 1 -T 1000", "-L 3 -u 2 -T 0 -K 3"])
@pytest.mark.parametrize("epochs", [4, 5])
def test_joint_averaged_is_the_mean_of_the_tail_iterates(shared_data, coding, epochs):
    # -s 33 runs the -s 31 updates and returns W, b and the anchors averaged over the
    # ends of epochs floor(E/2)+1 .. E; with the same seed -s 31 -E j stops at epoch j
    y, X, _, _ = shared_data("usps")
    y, X = y[:400], X[:400]
    base = f"{coding} -A 12 -B 1 -c 10 -f 10"
    averaged = train(y, X, f"-s 33 -E {epochs} {base}")
    tail = [train(y, X, f"-s 31 -E {j} {base}") for j in range(epochs // 2 + 1, epochs + 1)]
    mean = lambda arrays: sum(arrays[1:], arrays[0]) / len(arrays)  # noqa: E731
    np.testing.assert_allclose(averaged.w, mean([m.w for m in tail]), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(averaged.coding.anchors,
                               mean([m.coding.anchors for m in tail]), rtol=1e-13, atol=1e-15)
    assert averaged.solver_type == 33
    # the curves are those of the iterates, as for -s 31
    assert averaged.training_curve == tail[-1].training_curve


@pytest.mark.parametrize("coding", ["-L 2 -k 5 -u 1", "-L 3 -u 2"])
@pytest.mark.parametrize("solver", [31, 33])
def test_save_load_identical(shared_data, tmp_path, coding, solver):
    y, X, ty, tX = banana(shared_data, 600, 200)
    model = train(y, X, f"-s {solver} {coding} -A 15 -B 1 -E 2 -c 10 -T 1000 -f 10")
    path = tmp_path / "m.model"
    model_io.save_model_file(str(path), model)
    loaded = load_model_file(str(path))
    assert isinstance(loaded, LocalModel) and loaded.solver_type == solver
    assert loaded.coding.name == model.coding.name
    assert loaded.coding.param == model.coding.param
    np.testing.assert_array_equal(loaded.coding.anchors, model.coding.anchors)
    np.testing.assert_array_equal(loaded.w, model.w)
    np.testing.assert_array_equal(values(loaded, tX), values(model, tX))


@pytest.mark.parametrize("opts, msg", [("-s 31 -L 1", "-L 2"), ("-s 31 -L 3 -j 4", "-j"),
                                        ("-s 31 -L 3 -f -1", "-f"), ("-s 33 -L 6", "-s 33 needs")])
def test_option_errors(opts, msg):
    X = sp.csr_matrix(np.eye(4))
    with pytest.raises(ValueError, match=msg):
        train([1, -1, 1, -1], X, opts + " -A 2")
