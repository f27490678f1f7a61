"""k q-metrics (-s 40) and supervised k q-flats (-s 41): subspace recovery, the
Cython pass against a NumPy reference step for step, perfect classification of
points on distinct subspaces, options, seeds, votes and model files."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from lcoding.methods import _kq
from lcoding.core.rows import as_rows
from lcoding.methods import kq as kq_module
from lcoding.methods.kq import (KQModel, KQPreprocess, class_scores, init_flats, k_flats,
                                k_subspaces, select_kq_params, step_factors, violators)
from lcoding.liblinearutil import predict as ll_predict, train as ll_train
from lcoding.io.model_files import model_to_text, save_model_file
from lcoding.training import load_model_file, model_from_text
from lcoding.core.options import OptionError, TrainParams, parse_train_options
from lcoding.training import train_model


def random_subspaces(rng, n_sub, dim, d):
    """n_sub random orthonormal (dim, d) bases."""
    return [np.linalg.qr(rng.standard_normal((d, dim)))[0].T for _ in range(n_sub)]


def points_on(rng, basis, n):
    x = rng.standard_normal((n, basis.shape[0])) @ basis
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def projector(basis):
    q, _ = np.linalg.qr(basis.T)
    return q @ q.T


def subspace_data(rng, n_class, k, dim, d, n_per):
    """Points on n_class * k distinct subspaces; class c owns subspaces c*k..c*k+k-1."""
    bases = random_subspaces(rng, n_class * k, dim, d)
    X = np.vstack([points_on(rng, b, n_per) for b in bases])
    y = np.repeat(np.arange(n_class) + 1, k * n_per).astype(float)
    return X, y, bases


def train(y, X, opts):
    return train_model(np.asarray(y, dtype=float), as_rows(X), parse_train_options(opts + " -q"))


def predict_labels(model, X):
    rows = as_rows(X)
    return model.labels_from_values(model.decision_values(rows))


def affine_data(rng, n_class, k, dim, d, n_per, offset=2.0):
    """Points on n_class * k affine flats (random centre + subspace); class c owns
    flats c*k..c*k+k-1.  Returns (X, y, [(centre, basis)])."""
    flats = [(offset * rng.standard_normal(d), b) for b in random_subspaces(rng, n_class * k, dim, d)]
    X = np.vstack([c + rng.standard_normal((n_per, dim)) @ b for c, b in flats])
    y = np.repeat(np.arange(n_class) + 1, k * n_per).astype(float)
    return X, y, flats


# ------------------------------------------------------------------ k-subspaces
def test_k_subspaces_recovers_known_subspaces():
    rng = np.random.default_rng(3)
    bases = random_subspaces(rng, 3, 2, 12)
    X = np.vstack([points_on(rng, b, 80) for b in bases])
    F, assign = k_subspaces(X, 3, 2, np.random.default_rng(0))
    np.testing.assert_allclose(F @ F.transpose(0, 2, 1), np.broadcast_to(np.eye(2), (3, 2, 2)),
                               atol=1e-12)
    found = [projector(f) for f in F]
    truth = [projector(b) for b in bases]
    # every true subspace is one of the recovered ones (projectors equal)
    for P in truth:
        assert min(np.abs(P - Q).max() for Q in found) < 1e-9
    # and the assignment is the generating subspace, up to relabelling
    for s in range(3):
        assert np.unique(assign[s * 80:(s + 1) * 80]).size == 1


def test_k_flats_recovers_known_affine_flats():
    rng = np.random.default_rng(5)
    X, _, flats = affine_data(rng, 1, 3, 2, 10, 80)
    F, centres, assign = k_flats(X, 3, 2, np.random.default_rng(1))
    np.testing.assert_allclose(F @ F.transpose(0, 2, 1), np.broadcast_to(np.eye(2), (3, 2, 2)),
                               atol=1e-12)
    for j, (c, b) in enumerate(flats):
        found = np.bincount(assign[j * 80:(j + 1) * 80], minlength=3).argmax()
        assert np.all(assign[j * 80:(j + 1) * 80] == found)
        np.testing.assert_allclose(projector(F[found]), projector(b), atol=1e-8)
        # the fitted centre lies on the true flat
        r = centres[found] - c
        np.testing.assert_allclose(r - projector(b) @ r, 0, atol=1e-8)
    Z = np.empty((X.shape[0], 3))
    _kq.flat_scores(X, F.reshape(6, -1), centres, 2, Z)
    np.testing.assert_allclose(Z.max(axis=1), 0, atol=1e-9)    # every point on its flat


def flats_of_reference(X, ci, n_classes, k, q, seed, n_steps=kq_module.FLATS_LLOYD_STEPS):
    """init_flats' flats class by class in the NumPy reference k_flats, with the
    uniforms init_flats draws: the columns of one (k, C) draw."""
    U = np.random.default_rng(seed).random((k, n_classes)).T
    out = []
    for c in range(n_classes):
        F, centres, assign = k_flats(X[ci == c], k, q, None, n_steps=n_steps, uniforms=U[c])
        out.append((F, centres, assign))
    return out


@pytest.mark.parametrize("sizes, d, k, q", [
    ((60, 75, 40), 5, 4, 2),           # small classes of similar sizes
    ((200, 20, 20), 4, 3, 2),          # very unequal classes
    ((300, 280), 17, 8, 4),            # letter's dimensions
    ((40, 50), kq_module.SMALL_EIGH + 6, 3, 2),   # above the all-pairs eigensolver
    ((25, 25), 3, 2, 2),               # q = d - 1: planes in 3 dimensions
])
def test_flats_kernel_matches_the_numpy_reference(sizes, d, k, q):
    """_kq.k_flats_classes (init_flats) gives each class the flats of the NumPy
    reference k_flats: the same seeds, Lloyd steps and best-fit flats, to rounding
    (the bases row for row: the same signs)."""
    rng = np.random.default_rng(sum(sizes) + d)
    X = np.vstack([rng.standard_normal((n, d)) * rng.uniform(0.5, 2.0, d) + rng.normal(0, 3, d)
                   for n in sizes])
    ci = np.repeat(np.arange(len(sizes)), sizes)
    order = rng.permutation(X.shape[0])          # classes interleaved, as in a data file
    X, ci = X[order], ci[order]
    W, centres = init_flats(X, ci, len(sizes), k, q, np.random.default_rng(3))
    for c, (F, cc, _) in enumerate(flats_of_reference(X, ci, len(sizes), k, q, 3)):
        np.testing.assert_allclose(centres[c * k:(c + 1) * k], cc, atol=1e-10)
        np.testing.assert_allclose(W[c * k * q:(c + 1) * k * q], F.reshape(k * q, d),
                                   atol=1e-8)


def test_flats_kernel_with_more_flats_than_rows():
    """5 rows, 8 lines (q = 1) a class: the seeds repeat rows and clusters stay empty.
    (Not compared with the reference: once rows lie on seed lines their distances
    are rounding noise, which the k-means++ draw then follows.)  Every row lies on
    a flat, every basis is a unit vector and every centre is finite."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((35, 3))
    ci = np.repeat([0, 1], [5, 30])
    W, centres = init_flats(X, ci, 2, 8, 1, np.random.default_rng(3))
    np.testing.assert_allclose(np.linalg.norm(W, axis=1), 1.0, atol=1e-12)
    assert np.isfinite(centres).all()
    Z = np.empty((5, 8))
    _kq.flat_scores(X[:5], W[:8], centres[:8], 1, Z)
    np.testing.assert_allclose(Z.max(axis=1), 0.0, atol=1e-9)
    # q = d: every flat is the whole space, every distance 0
    W, centres = init_flats(X, ci, 2, 2, 3, np.random.default_rng(3))
    for m in range(4):
        np.testing.assert_allclose(W[3 * m:3 * m + 3] @ W[3 * m:3 * m + 3].T, np.eye(3),
                                   atol=1e-12)


def test_flats_kernel_steps_and_orthonormal_bases():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((400, 6))
    starts = np.array([0, 150, 400], dtype=np.int64)
    U = rng.random((2, 5))
    F, centres = np.empty((2 * 5 * 2, 6)), np.empty((10, 6))
    steps = np.empty(2, dtype=np.int64)
    assert _kq.k_flats_classes(X, starts, U, 2, 10, F, centres, steps) == 0
    assert np.all((steps >= 1) & (steps <= 10))
    G = F.reshape(10, 2, 6)
    np.testing.assert_allclose(G @ G.transpose(0, 2, 1), np.broadcast_to(np.eye(2), (10, 2, 2)),
                               atol=1e-12)
    # the largest-magnitude entry of every basis row is positive
    assert np.all(F[np.arange(20), np.argmax(np.abs(F), axis=1)] > 0)
    # no Lloyd step: the seed flats alone, as the reference gives them
    for c, rows in enumerate((X[:150], X[150:])):
        F0, c0, _ = k_flats(rows, 5, 2, None, n_steps=0, uniforms=U[c])
        _kq.k_flats_classes(X, starts, U, 2, 0, F, centres, steps)
        np.testing.assert_allclose(centres[c * 5:(c + 1) * 5], c0, atol=1e-12)
    assert np.all(steps == 0)


def test_flats_kernel_rejects_bad_arguments():
    X = np.zeros((10, 3))
    F, centres, steps = np.empty((4, 3)), np.empty((2, 3)), np.empty(1, dtype=np.int64)
    starts = np.array([0, 10], dtype=np.int64)
    U = np.full((1, 2), 0.5)
    with pytest.raises(ValueError, match="q = 4"):
        _kq.k_flats_classes(X, starts, U, 4, 1, np.empty((8, 3)), centres, steps)
    with pytest.raises(ValueError, match="no rows"):
        _kq.k_flats_classes(X, np.array([0, 0, 10], dtype=np.int64), np.full((2, 2), 0.5), 2,
                            1, np.empty((8, 3)), np.empty((4, 3)), np.empty(2, dtype=np.int64))
    with pytest.raises(ValueError, match="from 0 to n"):
        _kq.k_flats_classes(X, np.array([0, 9], dtype=np.int64), U, 2, 1, F, centres, steps)
    with pytest.raises(ValueError, match="F has shape"):
        _kq.k_flats_classes(X, starts, U, 2, 1, np.empty((5, 3)), centres, steps)


def test_flats_kernel_stops_on_ctrl_c():
    """A stop request (Ctrl-C) ends the kernel at the next seed or Lloyd step and
    training raises TrainingInterrupted instead of returning half-fitted flats."""
    from lcoding.core import threads
    X = np.random.default_rng(0).normal(size=(3000, 8))
    ci = np.repeat(np.arange(3), 1000)
    threads._request_stop()
    try:
        with pytest.raises(threads.TrainingInterrupted):
            init_flats(X, ci, 3, 16, 2, np.random.default_rng(1))
    finally:
        threads._clear_stop()


def test_init_flats_random_seeding_runs_class_by_class():
    """The paper's random seeding keeps k_flats class by class (one rng, in class
    order)."""
    rng = np.random.default_rng(9)
    sizes, d = (40, 50), 4
    X = rng.standard_normal((sum(sizes), d))
    ci = np.repeat(np.arange(len(sizes)), sizes)
    W, centres = init_flats(X, ci, len(sizes), 3, 2, np.random.default_rng(4), "random")
    gen = np.random.default_rng(4)
    for c in range(len(sizes)):
        F, cc, _ = k_flats(X[ci == c], 3, 2, gen, n_steps=kq_module.FLATS_LLOYD_STEPS,
                           seeding="random")
        assert np.array_equal(W[c * 6:(c + 1) * 6], F.reshape(6, d))
        assert np.array_equal(centres[c * 3:(c + 1) * 3], cc)


def test_flat_scores_match_definition():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((300, 7))          # more than one 256-row block
    W = rng.standard_normal((4 * 3, 7))
    centres = rng.standard_normal((4, 7))
    Z = np.empty((300, 4))
    _kq.flat_scores(X, W, centres, 3, Z)
    D = X[:, None, :] - centres[None]
    ref = (np.einsum("mqd,nmd->nmq", W.reshape(4, 3, 7), D) ** 2).sum(axis=2) - (D ** 2).sum(axis=2)
    np.testing.assert_allclose(Z, ref, rtol=1e-10, atol=1e-10)
    s = class_scores(X, W, 2, 2, 3, centres)
    np.testing.assert_allclose(s, ref.reshape(300, 2, 2).max(axis=2), rtol=1e-10, atol=1e-10)
    with pytest.raises(ValueError, match="centres"):
        _kq.flat_scores(X, W, centres[:3], 3, Z)


def test_class_scores_of_flats_are_the_max_of_their_flat_scores():
    """_kq.flat_class_scores reduces each class's k flat scores in the kernel: the
    numbers of flat_scores followed by NumPy's max, up to rounding (the prediction
    kernel folds the flats' offsets into its products), over several row blocks, and a
    NaN score makes its class's NaN (as NumPy's max)."""
    rng = np.random.default_rng(5)
    C, k, q, d = 3, 4, 2, 6
    X = rng.standard_normal((700, d))
    W = rng.standard_normal((C * k * q, d))
    centres = rng.standard_normal((C * k, d))
    Z = np.empty((700, C * k))
    _kq.flat_scores(X, W, centres, q, Z)
    want = Z.reshape(700, C, k).max(axis=2)
    # the definition: minus the squared distance to the flat (orthonormal or not, the
    # formula ||x - c||^2 - ||F (x - c)||^2)
    diff = X[:, None, :] - centres[None, :, :]
    proj = np.einsum("mtd,nmd->nmt", W.reshape(C * k, q, d), diff)
    direct = (proj ** 2).sum(axis=2) - (diff ** 2).sum(axis=2)
    np.testing.assert_allclose(Z, direct, rtol=1e-12, atol=1e-12 * np.abs(direct).max())
    out = np.empty((700, C))
    _kq.flat_class_scores(X, W, centres, q, k, out)
    tol = 1e-13 * np.abs(want).max()
    np.testing.assert_allclose(out, want, rtol=1e-13, atol=tol)
    np.testing.assert_array_equal(class_scores(X, W, C, k, q, centres), out)
    small = np.empty((700, C))
    _kq.flat_class_scores(X, W, centres, q, k, small, 7)      # 100 blocks of 7 rows
    np.testing.assert_allclose(small, out, rtol=1e-13, atol=tol)
    X[5, 0] = np.nan
    _kq.flat_class_scores(X, W, centres, q, k, out)
    assert np.isnan(out[5]).all() and not np.isnan(out[[4, 6]]).any()
    with pytest.raises(ValueError, match="multiple of k"):
        _kq.flat_class_scores(X, W, centres, q, 5, out)
    with pytest.raises(ValueError, match="out has shape"):
        _kq.flat_class_scores(X, W, centres, q, k, np.empty((700, 2)))


def test_affine_flats_classify_offset_flats_perfectly():
    """Parallel flats c + span(B) and -c + span(B): mirror images with the same
    uncentred scatter, so subspaces through the origin cannot tell them apart."""
    rng = np.random.default_rng(3)
    Q = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    basis, c = Q[:2], 3 * Q[2]
    X = np.vstack([sign * c + rng.standard_normal((60, 2)) @ basis for sign in (1, -1)])
    y = np.repeat([1.0, 2.0], 60)
    affine = train(y[1::2], X[1::2], "-s 41 -k 1 -Q 2 -Z 0 -y 1")
    assert affine.affine and affine.centres.shape == (1, 2, 6)
    assert np.array_equal(predict_labels(affine, X[::2]), y[::2])
    through_origin = train(y[1::2], X[1::2], "-s 41 -k 1 -Q 2 -Z 0")
    assert np.mean(predict_labels(through_origin, X[::2]) != y[::2]) > 0.3


def test_k_subspaces_k1_is_top_principal_vectors():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 7))
    F, _ = k_subspaces(X, 1, 3, np.random.default_rng(5))
    _, _, vt = np.linalg.svd(X, full_matrices=False)
    np.testing.assert_allclose(projector(F[0]), projector(vt[:3]), atol=1e-10)


# ------------------------------------------------------------------ the pass vs NumPy
def reference_pass(X, ci, order, W, k, q, mu1, mu2, s1, s2, Z=None):
    """The paper's loop, one point at a time, in plain NumPy.  With Z: the
    assignment and the violated metrics come from Z (pass-start norms)."""
    W = W.copy()
    M = W.shape[0] // q
    F = W.reshape(M, q, -1)             # a view: updating F updates W
    for r in order:
        x = X[r]
        own = range(ci[r] * k, ci[r] * k + k)
        if Z is None:
            resp = [F[m] @ x for m in range(M)]
            z = np.array([v @ v for v in resp])
            j = own[int(np.argmax(z[list(own)]))]
            if z[j] < mu1:
                F[j] += s1 * (mu1 - z[j]) * np.outer(resp[j], x)
            for m in range(M):
                if m not in own and z[m] > mu2:
                    F[m] += s2 * (mu2 - z[m]) * np.outer(resp[m], x)
        else:
            j = own[int(np.argmax(Z[r, list(own)]))]
            if Z[r, j] < mu1:
                v = F[j] @ x
                if v @ v < mu1:
                    F[j] += s1 * (mu1 - v @ v) * np.outer(v, x)
            for m in range(M):
                if m not in own and Z[r, m] > mu2:
                    v = F[m] @ x
                    if v @ v > mu2:
                        F[m] += s2 * (mu2 - v @ v) * np.outer(v, x)
    return W


@pytest.mark.parametrize("mode", ["stochastic", "semi-current", "semi-stale"])
def test_pass_matches_numpy_reference(mode):
    rng = np.random.default_rng(1)
    n, d, C, k, q = 40, 6, 3, 2, 2
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    ci = rng.integers(0, C, n).astype(np.int64)
    W0 = 0.7 * rng.standard_normal((C * k * q, d))
    mu1, mu2, s1, s2 = 1.1, 0.9, 0.3, 0.2
    Z = np.empty((n, C * k))
    _kq.metric_norms(X, W0, q, Z)
    np.testing.assert_allclose(Z, np.einsum("nmq->nm", np.einsum("mqd,nd->nmq",
                               W0.reshape(C * k, q, d), X) ** 2), rtol=1e-12)
    order = rng.permutation(n).astype(np.int64)
    stale = mode == "semi-stale"
    if mode != "stochastic":
        order = order[violators(Z, ci, C, k, mu1, mu2)[order]]
        assert 0 < order.size < n
    W = W0.copy()
    own, other = _kq.kq_pass(X, ci, order, W, k, q, mu1, mu2, s1, s2,
                             Z if stale else np.empty((0, C * k)), stale)
    ref = reference_pass(X, ci, order, W0, k, q, mu1, mu2, s1, s2, Z if stale else None)
    assert own > 0 and other > 0
    np.testing.assert_allclose(W, ref, rtol=1e-12, atol=1e-14)
    # a second pass from the updated state, so step-for-step agreement compounds
    order2 = rng.permutation(n).astype(np.int64)
    _kq.metric_norms(X, W, q, Z)
    _kq.kq_pass(X, ci, order2, W, k, q, mu1, mu2, s1, s2, Z if stale else np.empty((0, C * k)),
                stale)
    ref = reference_pass(X, ci, order2, ref, k, q, mu1, mu2, s1, s2, Z if stale else None)
    np.testing.assert_allclose(W, ref, rtol=1e-11, atol=1e-13)


def test_step_factors():
    p = TrainParams(kq_dt=0.1, kq_alpha1=2.0, kq_alpha2=1.0)
    p.kq_update = 0
    assert step_factors(p) == (0.1, 0.1)
    p.kq_update = 1
    assert step_factors(p) == pytest.approx((0.8, 0.4))
    p.kq_update = 2
    assert step_factors(p) == pytest.approx((0.2, 0.1))


def test_kernel_rejects_bad_input():
    X = np.zeros((3, 4))
    W = np.zeros((8, 4))
    with pytest.raises(ValueError, match="class_index"):
        _kq.kq_pass(X, np.array([0, 5, 0], dtype=np.int64), np.arange(3, dtype=np.int64), W,
                    2, 2, 1.1, 0.9, 0.1, 0.1, np.empty((0, 4)), False)
    with pytest.raises(ValueError, match="order"):
        _kq.kq_pass(X, np.zeros(3, dtype=np.int64), np.array([7], dtype=np.int64), W,
                    2, 2, 1.1, 0.9, 0.1, 0.1, np.empty((0, 4)), False)
    with pytest.raises(ValueError, match="multiple of q"):
        _kq.metric_norms(X, np.zeros((7, 4)), 2, np.empty((3, 3)))


# ------------------------------------------------------------------ end to end
@pytest.mark.parametrize("solver", [41, 40])
def test_one_subspace_per_class_classifies_perfectly(solver):
    rng = np.random.default_rng(7)
    X, y, _ = subspace_data(rng, 4, 1, 3, 15, 60)
    Xt, yt, _ = X[::2], y[::2], None
    model = train(y[1::2], X[1::2], f"-s {solver} -k 1 -Q 3 -E 10")
    assert isinstance(model, KQModel) and model.nr_w == 4
    assert np.array_equal(predict_labels(model, Xt), yt)


def energy(model, X, ci, mu1, mu2, a1=2.0, a2=1.0):
    """The paper's eq. 5 with j_x = argmax over x's own class (NumPy)."""
    pre = model.preprocess.transform(as_rows(X))
    C, k, q = model.nr_class, model.k, model.q
    Z = np.einsum("nmq->nm", np.einsum("mqd,nd->nmq",
                  model.metrics[0].reshape(C * k, q, -1), pre) ** 2).reshape(-1, C, k)
    own = Z[np.arange(len(ci)), ci].max(axis=1)
    other = Z.copy()
    other[np.arange(len(ci)), ci] = -np.inf
    return (a1 * np.maximum(mu1 - own, 0) ** 2).sum() + \
        (a2 * np.maximum(other - mu2, 0) ** 2).sum()


def test_discriminative_passes_lower_energy_and_training_error():
    rng = np.random.default_rng(11)
    X, y, _ = subspace_data(rng, 2, 3, 2, 8, 100)
    X = X + 0.25 * rng.standard_normal(X.shape)
    ci = (y - 1).astype(int)
    flats = train(y, X, "-s 41 -k 3 -Q 2")
    metrics = train(y, X, "-s 40 -k 3 -Q 2 -E 30 -U 1.2 -V 0.8 -G 1 -D 0.05")
    assert energy(metrics, X, ci, 1.2, 0.8) < 0.5 * energy(flats, X, ci, 1.2, 0.8)
    assert np.mean(predict_labels(metrics, X) != y) < np.mean(predict_labels(flats, X) != y)


def test_pass_types_and_update_rules_train(tmp_path):
    rng = np.random.default_rng(2)
    X, y, _ = subspace_data(rng, 3, 2, 2, 10, 40)
    for opts in ("-F 0 -G 0", "-F 1 -G 1", "-F 2 -G 2"):
        model = train(y, X, f"-s 40 -k 2 -Q 2 -E 5 {opts}")
        assert np.isfinite(model.metrics).all()
        assert np.mean(predict_labels(model, X) == y) > 0.95


def test_same_seed_same_model_and_restarts_differ():
    rng = np.random.default_rng(4)
    X, y, _ = subspace_data(rng, 3, 2, 2, 10, 30)
    a = train(y, X, "-s 40 -k 2 -Q 2 -E 3 -W 3 -S 5")
    b = train(y, X, "-s 40 -k 2 -Q 2 -E 3 -W 3 -S 5")
    c = train(y, X, "-s 40 -k 2 -Q 2 -E 3 -W 3 -S 6")
    assert np.array_equal(a.metrics, b.metrics)
    assert not np.array_equal(a.metrics, c.metrics)
    assert not np.array_equal(a.metrics[0], a.metrics[1])


@pytest.mark.parametrize("opts", ["-s 40 -k 2 -Q 2 -E 3 -W 3", "-s 41 -k 2 -Q 2 -y 1 -W 3",
                                  "-s 40 -k 2 -Q 2 -E 3 -W 1"])
def test_restarts_side_by_side_give_the_same_model(opts):
    """-m 3 runs the restarts of -W side by side; each draws from its own streams, so
    the model file is the -m 1 one byte for byte."""
    rng = np.random.default_rng(14)
    X, y, _ = subspace_data(rng, 3, 2, 2, 10, 60)
    one = train(y, X, f"{opts} -S 7")
    three = train(y, X, f"{opts} -S 7 -m 3")
    np.testing.assert_array_equal(one.metrics, three.metrics)
    if one.centres is not None:
        np.testing.assert_array_equal(one.centres, three.centres)
    assert model_to_text(one) == model_to_text(three)


def test_vote_is_majority_of_restarts():
    rng = np.random.default_rng(9)
    X, y, _ = subspace_data(rng, 3, 2, 3, 10, 40)
    X = X + 0.3 * rng.standard_normal(X.shape)
    model = train(y, X, "-s 40 -k 2 -Q 3 -E 5 -W 5")
    pre = model.preprocess.transform(as_rows(X))
    votes = np.zeros((X.shape[0], 3), dtype=int)
    for r in range(5):
        votes[np.arange(X.shape[0]), np.argmax(model.class_scores(pre, r), axis=1)] += 1
    dec = model.decision_values(as_rows(X))
    np.testing.assert_array_equal(np.floor(dec), votes)
    pred = predict_labels(model, X)
    clear = votes.max(axis=1) >= 3
    np.testing.assert_array_equal(pred[clear], model.label[np.argmax(votes, axis=1)][clear])


def test_preprocessing_pca_and_sphere():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 10)) * np.arange(1, 11)
    rows = as_rows(X)
    pre = KQPreprocess.fit(rows, 3, True)
    Xc = X - X.mean(axis=0)
    _, _, vt = np.linalg.svd(Xc, full_matrices=False)
    np.testing.assert_allclose(np.abs(pre.components), np.abs(vt[:3]), atol=1e-8)
    out = pre.transform(rows)
    expected = Xc @ pre.components.T
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(out, expected, atol=1e-12)
    plain = KQPreprocess.fit(rows, 0, False).transform(rows)
    np.testing.assert_array_equal(plain, X)
    # -z b: (x / ||x||, b) / sqrt(1 + b^2) after the PCA
    pre = KQPreprocess.fit(rows, 3, True, 0.5)
    assert pre.out_dim == 4
    ref = np.hstack([expected, np.full((200, 1), 0.5)]) / np.sqrt(1.25)
    np.testing.assert_allclose(pre.transform(rows), ref, atol=1e-12)
    np.testing.assert_array_equal(KQPreprocess.fit(rows, 0, False, 2.0).transform(rows),
                                  np.hstack([X, np.full((200, 1), 2.0)]))


def test_binary_problem_and_labels():
    rng = np.random.default_rng(12)
    X, y, _ = subspace_data(rng, 2, 1, 2, 9, 50)
    y = np.where(y == 1, -1.0, 1.0)
    model = train(y, X, "-s 40 -k 1 -Q 2 -E 5")
    assert list(model.label) == [1, -1]        # LIBLINEAR's +1-first rule
    assert model.decision_values(as_rows(X)).shape == (100, 2)
    assert np.array_equal(predict_labels(model, X), y)


def test_affine_flats_leave_out_a_constant_coordinate():
    """A coordinate the same on every row (the -z offset off the unit sphere) changes
    no distance to an affine flat: the flats fitted with it are those fitted without
    it (to rounding), with 0 in their directions there and its value in their
    centres -- which is how training fits them (the kernel sees the other
    coordinates only), the model keeping every dimension."""
    rng = np.random.default_rng(8)
    sizes, d, k, q = (120, 90, 100), 6, 4, 2
    X = np.vstack([rng.standard_normal((n, d)) * rng.uniform(0.5, 2.0, d) + rng.normal(0, 3, d)
                   for n in sizes])
    ci = np.repeat(np.arange(len(sizes)), sizes)
    full = np.hstack([X, np.full((X.shape[0], 1), 0.5)])
    W_full, C_full = init_flats(full, ci, len(sizes), k, q, np.random.default_rng(3))
    W, C = init_flats(X, ci, len(sizes), k, q, np.random.default_rng(3))
    np.testing.assert_allclose(W_full[:, :d], W, atol=1e-9)
    np.testing.assert_allclose(W_full[:, d], 0, atol=1e-12)
    np.testing.assert_allclose(C_full[:, :d], C, atol=1e-9)
    np.testing.assert_array_equal(C_full[:, d], 0.5)
    y = ci.astype(float)
    model = train(y, X, "-s 41 -k 4 -Q 2 -y 1 -Z 0 -z 0.5 -W 2 -S 4")
    assert model.dim == d + 1
    assert np.all(model.metrics[:, :, d] == 0) and np.all(model.centres[:, :, d] == 0.5)
    assert predict_labels(model, X).shape == y.shape
    on_sphere = train(y, X, "-s 41 -k 4 -Q 2 -y 1 -Z 1 -z 0.5 -W 2 -S 4")
    assert np.any(on_sphere.metrics[:, :, d] != 0)      # not constant there: fitted


def test_affine_flats_average_their_restarts(tmp_path):
    """-s 41 -y 1 with several restarts predicts by the restarts' mean class score
    (minus the mean squared distance to each class's nearest flat), recorded in the
    model file as restart_rule mean; the metrics keep the vote and write nothing."""
    rng = np.random.default_rng(21)
    X, y, _ = subspace_data(rng, 3, 2, 2, 8, 40)
    X = X + 0.4 * rng.standard_normal(X.shape)
    model = train(y, X, "-s 41 -k 3 -Q 2 -y 1 -W 4 -S 2")
    assert model.restart_rule == "mean"
    rows = as_rows(X)
    pre = model.preprocess.transform(rows)
    mean = sum(model.class_scores(pre, r) for r in range(4)) / 4
    np.testing.assert_allclose(model.decision_values(rows), mean, rtol=1e-13, atol=1e-13)
    assert (model.decision_values(rows) <= 0).all()
    np.testing.assert_array_equal(predict_labels(model, X),
                                  model.label[np.argmax(mean, axis=1)])
    path = tmp_path / "flats.model"
    save_model_file(path, model)
    text = path.read_text()
    assert "\naffine 1\nrestart_rule mean\n" in text
    loaded = load_model_file(path)
    assert loaded.restart_rule == "mean" and model_to_text(loaded) == text
    np.testing.assert_array_equal(loaded.decision_values(rows), model.decision_values(rows))
    # a file without the line (written before the rule existed) votes, as it did
    old = model_from_text(text.replace("restart_rule mean\n", ""))
    assert old.restart_rule == "vote"
    votes = np.zeros((X.shape[0], 3))
    for r in range(4):
        votes[np.arange(X.shape[0]), np.argmax(model.class_scores(pre, r), axis=1)] += 1
    np.testing.assert_array_equal(np.floor(old.decision_values(rows)), votes)
    with pytest.raises(ValueError, match="restart_rule"):
        model_from_text(text.replace("restart_rule mean", "restart_rule median"))
    # a model pickled before the rule existed (no such attributes) votes, as it did
    state = {key: v for key, v in vars(model).items()
             if key not in ("restart_rule", "_contractive_flats")}
    pickled_before = object.__new__(KQModel)
    pickled_before.__dict__.update(state)
    assert pickled_before.restart_rule == "vote"
    np.testing.assert_array_equal(pickled_before.decision_values(rows), old.decision_values(rows))
    np.testing.assert_array_equal(pickled_before.predict_labels(rows), old.predict_labels(rows))
    # one restart: nothing to combine, nothing written; the metrics vote
    assert "restart_rule" not in model_to_text(train(y, X, "-s 41 -k 3 -Q 2 -y 1 -W 1"))
    metrics = train(y, X, "-s 40 -k 2 -Q 2 -E 2 -W 3")
    assert metrics.restart_rule == "vote" and "restart_rule" not in model_to_text(metrics)


# ------------------------------------------------------------------ files and options
@pytest.mark.parametrize("opts", ["-s 40 -k 2 -Q 2 -E 3 -l 5 -W 2", "-s 41 -k 2 -Q 3 -Z 0",
                                  "-s 41 -k 2 -Q 2 -y 1 -l 5 -W 2",
                                  "-s 40 -k 2 -Q 2 -E 3 -z 0.3",
                                  "-s 40 -k 2 -Q 2 -E 3 -l 5 -K 3",
                                  "-s 41 -k 2 -Q 2 -K 2 -O 1 -y 1"])
def test_save_load_identical(tmp_path, opts):
    rng = np.random.default_rng(6)
    X, y, _ = subspace_data(rng, 3, 2, 2, 8, 30)
    X = X * 3.7 + 0.1
    model = train(y, X, opts)
    path = tmp_path / "kq.model"
    save_model_file(path, model)
    loaded = load_model_file(path)
    assert isinstance(loaded, KQModel)
    assert model_to_text(loaded) == path.read_text()
    np.testing.assert_array_equal(loaded.metrics, model.metrics)
    assert loaded.affine == model.affine
    assert loaded.preprocess.offset == model.preprocess.offset
    if model.affine:
        np.testing.assert_array_equal(loaded.centres, model.centres)
        assert "\naffine 1\n" in path.read_text() and "\ncentres\n" in path.read_text()
    if model.preprocess.pca_dim:
        np.testing.assert_array_equal(loaded.preprocess.components, model.preprocess.components)
        np.testing.assert_array_equal(loaded.preprocess.mean, model.preprocess.mean)
    rows = as_rows(X)
    np.testing.assert_array_equal(loaded.decision_values(rows), model.decision_values(rows))
    text = path.read_text()
    assert text.startswith("solver_type KQ_")
    assert "\nlcoding_format 1\ncoding KQ_" in text and "\nw\n" in text


@pytest.mark.parametrize("solver", ["-s 40 -E 4", "-s 41 -y 1"])
def test_hellinger_map_equals_training_on_square_roots(solver):
    # -K 3 is sign(x) sqrt|x| applied before the PCA: the same model as training on
    # the mapped rows without -K, and the map is applied again at prediction
    rng = np.random.default_rng(8)
    X, y, _ = subspace_data(rng, 3, 2, 2, 8, 30)
    X = X * 2.0 + rng.normal(scale=0.1, size=X.shape)
    mapped = np.sign(X) * np.sqrt(np.abs(X))
    opts = f"{solver} -k 2 -Q 2 -l 6"
    with_map = train(y, X, opts + " -K 3")
    on_roots = train(y, mapped, opts)
    np.testing.assert_array_equal(with_map.metrics, on_roots.metrics)
    np.testing.assert_allclose(with_map.decision_values(as_rows(X)),
                               on_roots.decision_values(as_rows(mapped)), rtol=1e-12, atol=1e-12)
    assert "\nkernel_map hellinger\n" in model_to_text(with_map)
    with pytest.raises(ValueError, match="-K 5"):
        train(y, X, opts + " -K 5")


def test_model_file_errors():
    rng = np.random.default_rng(6)
    X, y, _ = subspace_data(rng, 2, 1, 2, 5, 10)
    text = model_to_text(train(y, X, "-s 41 -k 1 -Q 2"))
    with pytest.raises(ValueError, match="nr_dim"):
        model_from_text(text.replace("nr_dim 5", "nr_dim 4"))
    with pytest.raises(ValueError, match="does not match"):
        model_from_text(text.replace("coding KQ_FLATS", "coding KQ_METRICS"))
    with pytest.raises(ValueError, match="truncated"):
        model_from_text(text[:-30])
    affine = model_to_text(train(y, X, "-s 41 -k 1 -Q 2 -y 1"))
    with pytest.raises(ValueError, match="affine"):
        model_from_text(affine.replace("affine 1", "affine 2"))
    with pytest.raises(ValueError, match="centres"):
        model_from_text(affine.split("\ncentres\n")[0] + "\n")
    offset = model_to_text(train(y, X, "-s 40 -k 1 -Q 2 -E 1 -z 0.5"))
    assert "\nnr_dim 6\noffset_coord 0.5\n" in offset
    with pytest.raises(ValueError, match="offset_coord"):
        model_from_text(offset.replace("offset_coord 0.5", "offset_coord -1"))
    with pytest.raises(ValueError, match="nr_dim"):
        model_from_text(offset.replace("\noffset_coord 0.5", ""))


def test_drop_in_train_and_predict():
    rng = np.random.default_rng(8)
    X, y, _ = subspace_data(rng, 3, 1, 2, 8, 30)
    m = ll_train(list(y), X, "-s 40 -k 1 -Q 2 -E 3 -q")
    labels, (acc, _, _), values = ll_predict(list(y), X, m, "-q")
    assert acc == 100.0 and len(values[0]) == 3
    # -x 1 through the drop-in interface (its parameter object is not a dataclass)
    perm = rng.permutation(X.shape[0])
    m = ll_train(list(y[perm]), X[perm], "-s 41 -x 1 -Z 0 -q")
    assert ll_predict(list(y), X, m, "-q")[1][0] == 100.0
    with pytest.raises(ValueError, match="grid q: 20, 40"):
        ll_train(list(y), X, "-s 40 -x 1 -E 1 -q")


def test_options_parse_and_validate():
    p = parse_train_options("-s 40 -k 8 -Q 20 -U 1.1 -V 0.9 -D 0.05 -i 3 -o 0.5 -G 1 -F 0 "
                            "-l 50 -Z 0 -W 5 -E 40")
    assert (p.solver_type, p.n_neighbors, p.kq_dim, p.kq_mu1, p.kq_mu2, p.kq_dt) == \
        (40, 8, 20, 1.1, 0.9, 0.05)
    assert (p.kq_alpha1, p.kq_alpha2, p.kq_update, p.kq_pass, p.kq_pca, p.kq_sphere,
            p.kq_restarts, p.epochs) == (3.0, 0.5, 1, 0, 50, 0, 5, 40)
    with pytest.raises(OptionError, match="-Q"):
        parse_train_options("-s 40 -Q x")
    X, y, _ = subspace_data(np.random.default_rng(0), 2, 1, 2, 5, 10)
    for opts, flag in (("-U 0.9 -V 1.1", "-U"), ("-Q 9", "-Q"), ("-l 9", "-l"), ("-G 7", "-G"),
                       ("-F 3", "-F"), ("-W 0", "-W"), ("-B 1", "-B"), ("-D 0", "-D"),
                       ("-k 0", "-k"), ("-Z 2", "-Z"), ("-y 1", "-y"), ("-x 2", "-x"),
                       ("-z -1", "-z")):
        with pytest.raises(ValueError, match=flag):
            train(y, X, f"-s 40 -Q 2 {opts}")


def test_model_selection_picks_from_grid():
    rng = np.random.default_rng(10)
    X, y, _ = subspace_data(rng, 3, 2, 2, 8, 40)
    perm = rng.permutation(X.shape[0])
    X, y = X[perm], y[perm]
    params = parse_train_options("-s 40 -E 5 -W 3 -q")
    best, table = select_kq_params(y, as_rows(X), params,
                                   {"k": (1, 2), "q": (2, 9), "mu": ((1.05, 0.95), (1.4, 0.6))})
    assert len(table) == 4          # q = 9 > 8 dimensions is skipped
    first_best = min(table, key=lambda row: row["error"])
    assert (best.n_neighbors, best.kq_dim, best.kq_mu1, best.kq_mu2) == \
        (first_best["k"], first_best["q"], first_best["mu1"], first_best["mu2"])
    assert best.kq_restarts == 3 and best.kq_select == 0
    # the validation error of a row is that of a model trained on the first 80 %
    row = table[-1]
    cand = parse_train_options(f"-s 40 -E 5 -k {row['k']} -Q {row['q']} -U {row['mu1']} "
                               f"-V {row['mu2']} -q")
    model = train_model(y[:192], as_rows(X[:192]), cand)
    assert row["error"] == pytest.approx(100 * np.mean(predict_labels(model, X[192:]) != y[192:]))
    with pytest.raises(ValueError, match="grid keys"):
        select_kq_params(y, as_rows(X), params, {"kk": (1,)})


def test_select_option_trains_with_the_selected_setting():
    rng = np.random.default_rng(13)
    X, y, _ = affine_data(rng, 3, 2, 2, 8, 40)
    perm = rng.permutation(X.shape[0])
    X, y = X[perm], y[perm]
    model = train(y, X, "-s 41 -x 1 -Z 0")
    best, table = select_kq_params(y, as_rows(X), parse_train_options("-s 41 -Z 0 -q"))
    assert {(r["affine"], r["q"]) for r in table} == {(a, q) for a in (0, 1) for q in (5,)}
    assert (model.k, model.q, model.affine) == (best.n_neighbors, best.kq_dim, bool(best.kq_affine))
    assert np.mean(predict_labels(model, X) == y) > 0.95


def test_class_scores_match_definition():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((20, 5))
    W = rng.standard_normal((3 * 2 * 2, 5))
    s = class_scores(X, W, 3, 2, 2)
    F = W.reshape(3, 2, 2, 5)
    ref = (np.einsum("ckqd,nd->nckq", F, X) ** 2).sum(axis=3).max(axis=2)
    np.testing.assert_allclose(s, ref, rtol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("opts", ["-s 40 -k 2 -Q 12", "-s 41 -y 1 -k 2 -Q 12",
                                  "-s 40 -k 2 -Q 8 -l 60 -z 1"])
def test_same_model_for_any_thread_count(opts):
    """``-m 2`` gives the ``-m 1`` model bit for bit.  Before, the eigendecompositions
    ran on ``-m`` BLAS threads, whose LAPACK results differ in the last bits (and
    took 3-7 s instead of 0.1 s on a loaded 2-core machine, which Ctrl-C waited for)."""
    rng = np.random.default_rng(5)
    X, y, _ = subspace_data(rng, n_class=3, k=2, dim=12, d=300, n_per=150)
    X = X + 0.05 * rng.standard_normal(X.shape)
    texts = [model_to_text(train(y, X, f"{opts} -m {m}")) for m in (1, 2)]
    assert texts[0] == texts[1]


def test_pca_of_many_features_by_lanczos_matches_the_dense_eigendecomposition(monkeypatch):
    """More than DENSE_PCA_MAX_FEATURES features (lowered here, for speed): the PCA's
    directions come from Lanczos on the covariance operator; they span the dense
    path's subspace and are the same on every run."""
    from lcoding.methods import kq as kq_module
    from lcoding.core.rows import as_rows
    monkeypatch.setattr(kq_module, "DENSE_PCA_MAX_FEATURES", 300)
    calls = []
    lanczos = kq_module.top_covariance_eigenvectors
    monkeypatch.setattr(kq_module, "top_covariance_eigenvectors",
                        lambda *a: calls.append(1) or lanczos(*a))
    rng = np.random.default_rng(5)
    d = 452
    # rank-12 structure (a clear spectral gap) plus noise, 30 % of the entries kept
    X = rng.normal(size=(300, 12)) @ rng.normal(size=(12, d)) * 3 + rng.normal(size=(300, d))
    X[rng.random(X.shape) > 0.3] = 0.0
    X = sp.csr_matrix(X + 2.0 * (X != 0))          # not centred
    pre = kq_module.KQPreprocess.fit(as_rows(X), 12, True)
    assert calls == [1]
    mean = np.asarray(X.mean(axis=0)).ravel()
    cov = (X.T @ X).toarray() / X.shape[0] - np.outer(mean, mean)
    dense = kq_module.top_eigenvectors(cov, 12)
    cosines = np.linalg.svd(pre.components @ dense.T, compute_uv=False)
    assert cosines.min() > 1 - 1e-9
    np.testing.assert_allclose(pre.mean, mean)
    again = kq_module.KQPreprocess.fit(as_rows(X), 12, True)
    np.testing.assert_array_equal(again.components, pre.components)


def test_stacked_eigenvectors_equal_one_at_a_time():
    """Up to SMALL_EIGH dimensions the refits solve all clusters' eigenproblems in one
    call: each matrix gives bit for bit what it gives alone, and the span of the
    top vectors is scipy's (the subset solver the large dimensions keep)."""
    import scipy.linalg
    from lcoding.methods import kq as kq_module
    rng = np.random.default_rng(11)
    A = rng.normal(size=(7, 40, 16))
    S = np.einsum("mni,mnj->mij", A, A)
    stacked = kq_module.top_eigenvectors_stack(S, 4)
    for m in range(S.shape[0]):
        np.testing.assert_array_equal(stacked[m], kq_module.top_eigenvectors(S[m], 4))
        _, ref = scipy.linalg.eigh(S[m], subset_by_index=(12, 15))
        cosines = np.linalg.svd(stacked[m] @ ref, compute_uv=False)
        assert cosines.min() > 1 - 1e-12
        # signs: the largest-magnitude entry of every row is positive
        rows = stacked[m]
        assert np.all(rows[np.arange(4), np.argmax(np.abs(rows), axis=1)] > 0)
    with pytest.raises(ValueError, match="dimension"):
        kq_module.top_eigenvectors_stack(np.zeros((1, 65, 65)), 2)


@pytest.mark.parametrize("centred", [False, True])
def test_stacked_refit_matches_the_per_cluster_refit(monkeypatch, centred):
    """The stacked refit of k-subspaces / k-flats equals the cluster-by-cluster one
    (which dimensions above SMALL_EIGH use) to rounding; an empty cluster keeps
    its model."""
    from lcoding.methods import kq as kq_module
    rng = np.random.default_rng(12)
    X = rng.normal(size=(500, 10)) + rng.integers(0, 4, size=500)[:, None]
    assign = rng.integers(0, 5, size=500)
    assign[assign == 3] = 4                    # cluster 3 is empty
    def refit(small):
        F = np.full((5, 3, 10), 7.0)
        centres = np.full((5, 10), 7.0) if centred else None
        monkeypatch.setattr(kq_module, "SMALL_EIGH", 64 if small else 0)
        kq_module._refit_subspaces(X, assign, 5, 3, F, centres)
        return F, centres
    (F1, c1), (F2, c2) = refit(True), refit(False)
    np.testing.assert_allclose(F1, F2, atol=1e-12)
    np.testing.assert_array_equal(F1[3], 7.0)
    if centred:
        np.testing.assert_allclose(c1, c2, atol=1e-12)
        np.testing.assert_array_equal(c1[3], 7.0)


def test_lloyd_refits_only_the_clusters_that_changed(monkeypatch):
    """A Lloyd step refits only the clusters a row left or joined; the others have
    the same members, so k-flats and k-subspaces give bit for bit what refitting
    every cluster gives."""
    from lcoding.methods import kq as kq_module
    rng = np.random.default_rng(13)
    X = rng.normal(scale=3.0, size=(20, 8))[rng.integers(0, 20, size=1200)] \
        + rng.normal(size=(1200, 8))
    fast_flats = k_flats(X, 20, 2, np.random.default_rng(2))
    fast_sub = k_subspaces(X, 20, 2, np.random.default_rng(2))
    real = kq_module._refit_subspaces
    seen = []

    def refit_all(X_, assign, k, q, F, centres=None, changed=None):
        seen.append(changed)
        real(X_, assign, k, q, F, centres, None)
    monkeypatch.setattr(kq_module, "_refit_subspaces", refit_all)
    slow_flats = k_flats(X, 20, 2, np.random.default_rng(2))
    slow_sub = k_subspaces(X, 20, 2, np.random.default_rng(2))
    for fast, slow in zip(fast_flats + fast_sub, slow_flats + slow_sub):
        np.testing.assert_array_equal(fast, slow)
    # the wrapper saw the changed sets the Lloyd steps passed: the late ones are small
    assert seen[0] is None and min(len(c) for c in seen[1:] if c is not None) <= 5


@pytest.mark.slow
def test_pca_gram_by_dense_blocks_or_sparse_product(monkeypatch):
    """The PCA's X'X: by dense row blocks when the rows are dense enough (BLAS), by
    scipy's sparse product otherwise; both the same matrix to rounding, the choice
    made by the data alone."""
    from lcoding.methods import kq as kq_module
    rng = np.random.default_rng(15)
    dense_rows = sp.csr_matrix(rng.normal(size=(3000, 40)) * (rng.random((3000, 40)) < 0.3))
    sparse_rows = sp.random(3000, 2000, density=0.002, format="csr", random_state=2)
    assert kq_module.gram_by_dense_blocks(dense_rows)
    assert not kq_module.gram_by_dense_blocks(sparse_rows)
    for X in (dense_rows, sparse_rows):
        np.testing.assert_allclose(kq_module.dense_gram(X), kq_module.sparse_gram(X),
                                   rtol=1e-12, atol=1e-12 * abs(X).max() ** 2 * X.shape[0])
    # blocks of rows: many blocks sum to the one product
    monkeypatch.setattr(kq_module, "TRANSFORM_VALUES", 256 * 40)
    np.testing.assert_allclose(kq_module.dense_gram(dense_rows),
                               (dense_rows.T @ dense_rows).toarray(), rtol=1e-12)


def _assert_nan_score_raises(monkeypatch, model, rows, real):
    """A NaN class score makes predict_labels take the checked path: a ValueError
    naming the NaN, never a label."""
    from lcoding.methods import kq as kq_module

    def nan_scores(self, Z, restart=0):
        out = real(self, Z, restart)
        out[0, 0] = np.nan
        return out
    monkeypatch.setattr(kq_module.KQModel, "class_scores", nan_scores)
    with pytest.raises(ValueError, match="NaN"):
        model.predict_labels(rows)

    def opposite_infinities(self, Z, restart=0):
        # +inf in one restart and -inf in the next (flats of a file that stretch, on
        # huge rows): finite-free scores whose sum is NaN
        out = real(self, Z, restart)
        out[0, 0] = np.inf if restart == 0 else -np.inf
        return out
    monkeypatch.setattr(kq_module.KQModel, "class_scores", opposite_infinities)
    with pytest.raises(ValueError, match="NaN"):
        model.predict_labels(rows)


@pytest.mark.parametrize("opts", ["-s 41 -k 3 -Q 2 -y 1 -W 5", "-s 40 -k 2 -Q 2 -E 3 -W 3",
                                  "-s 41 -k 2 -Q 2 -W 4"])
def test_predict_labels_stops_scoring_decided_votes(monkeypatch, opts):
    """predict_labels gives the labels of the vote's decision values, scoring the later
    restarts only on rows whose vote is still open; a NaN score takes the checked
    path (a ValueError, never a label)."""
    from lcoding.methods import kq as kq_module
    rng = np.random.default_rng(16)
    X, y, _ = subspace_data(rng, 4, 2, 2, 8, 80)
    model = train(y, X, opts + " -S 3")
    # affine flats average their restarts (a vote: a model file without restart_rule)
    model.restart_rule = "vote"
    rows = as_rows(X)
    expected = model.labels_from_values(model.decision_values(rows))
    scored = []
    real = kq_module.KQModel.class_scores

    def counting(self, Z, restart=0):
        scored.append(Z.shape[0])
        return real(self, Z, restart)
    monkeypatch.setattr(kq_module.KQModel, "class_scores", counting)
    np.testing.assert_array_equal(model.predict_labels(rows), expected)
    # all rows in the first restart; decided rows skipped later (every row decided:
    # the last restarts not scored at all)
    assert scored[0] == X.shape[0] and len(scored) <= model.n_restarts
    assert sum(scored) < model.n_restarts * X.shape[0]

    _assert_nan_score_raises(monkeypatch, model, rows, real)


def _noisy_flats(seed, n_class, per_class, noise, W, trial):
    """Rows of n_class classes on 2-flats in 8 dimensions plus noise, affine 3 x 2-flats
    a class with W restarts trained on them, the rows and the decision values' labels."""
    rng = np.random.default_rng(seed)
    X, y, _ = subspace_data(rng, n_class, 2, 2, 8, per_class)
    X = X + noise * rng.standard_normal(X.shape)
    model = train(y, X, f"-s 41 -k 3 -Q 2 -y 1 -W {W} -S {trial}")
    rows = as_rows(X)
    return X, model, rows, model.labels_from_values(model.decision_values(rows))


def _bound_scores_counted(monkeypatch) -> list:
    """The class-and-restart scores (rows x classes x restarts) of every
    _kq.bound_labels_packed call (KQModel's branch and bound, a call a chunk of
    rows), recorded from now on."""
    from lcoding.methods import _kq
    scored = []
    real = _kq.bound_labels_packed

    def counting(*args):
        nan, n_scored = real(*args)
        scored.append(n_scored)
        return nan, n_scored
    monkeypatch.setattr(_kq, "bound_labels_packed", counting)
    return scored


def test_mean_labels_decide_early_and_equal_the_full_rule(monkeypatch):
    """The affine flats' mean of restarts: predict_labels gives the labels of the
    decision values exactly (several data sets, classes, restarts and seeds), scores
    fewer classes and restarts than all where rows are decided early, falls back to
    scoring every restart when a file's flats are not contractive, and a NaN score
    takes the checked path."""
    from lcoding.methods import kq as kq_module
    real = kq_module.KQModel.class_scores
    scored = _bound_scores_counted(monkeypatch)     # single precision
    double = []                                     # and double: rows x classes

    def counting(self, Z, restart=0):
        double.append(Z.shape[0] * self.nr_class)
        return real(self, Z, restart)
    monkeypatch.setattr(kq_module.KQModel, "class_scores", counting)
    early = 0
    for trial, (n_class, W, noise) in enumerate([(3, 5, 0.3), (4, 2, 0.6), (5, 6, 0.2),
                                                 (2, 4, 0.4), (6, 3, 1.0)]):
        X, model, rows, expected = _noisy_flats(40 + trial, n_class, 60, noise, W, trial)
        assert model.restart_rule == "mean"
        scored.clear()
        double.clear()
        np.testing.assert_array_equal(model.predict_labels(rows), expected, err_msg=str(trial))
        # restart 0 scores every row and class, the rest fewer than all
        assert X.shape[0] * n_class <= sum(scored) <= W * n_class * X.shape[0]
        early += W * n_class * X.shape[0] - sum(scored) - sum(double)
    assert early > 0                    # some rows were decided before the last restart
    # flats that stretch (a hand-made file): no early decision, the same labels
    model.metrics *= 3.0
    model._contractive_flats = model._packed = None
    expected = model.labels_from_values(model.decision_values(rows))
    scored.clear()
    double.clear()
    np.testing.assert_array_equal(model.predict_labels(rows), expected)
    assert not scored and sum(double) == W * model.nr_class * X.shape[0]

    _assert_nan_score_raises(monkeypatch, model, rows, real)


def _orthonormal_flats(rng, M, q, d):
    """M flats of q orthonormal directions in d dimensions, (M q, d)."""
    return np.ascontiguousarray(np.vstack([np.linalg.qr(rng.standard_normal((d, q)))[0].T
                                           for _ in range(M)]))


@pytest.mark.parametrize("path", [0, 1])
def test_single_precision_class_scores_are_within_their_bound(path):
    """_kq.flat_class_scores_f32: every class score within its row's bound of the
    double kernel's (which is within rounding of the exact score), at scales from
    1e-4 to 1e4, over several row blocks and both paths (AVX2, scalar); the bound is
    small against the scores' scale; a NaN row gives NaN class scores."""
    rng = np.random.default_rng(21)
    # (the fused AVX2 pass, path 0, takes a flat's q + 1 terms in even tiles of at
    # most six: 3, 4, 5, 13 = 5 + 4 + 4, 2, 7 = 4 + 3 and 18 = 6 + 6 + 6 terms here;
    # flats not a multiple of 8 leave empty lanes, blocks of 37 rows an odd row)
    for trial, (C, k, q, d, scale) in enumerate([(3, 4, 2, 6, 1.0), (5, 9, 3, 17, 1e-4),
                                                 (2, 32, 4, 16, 1e4), (4, 7, 12, 50, 3.0),
                                                 (10, 20, 1, 2, 0.5), (2, 5, 6, 9, 1.0),
                                                 (2, 3, 17, 20, 2.0)]):
        W = _orthonormal_flats(rng, C * k, q, d)
        centres = scale * rng.standard_normal((C * k, d))
        X = scale * rng.standard_normal((600, d)) * rng.uniform(0.1, 3.0, (600, 1))
        want = np.empty((600, C))
        _kq.flat_class_scores(X, W, centres, q, k, want)
        got, bound = np.empty((600, C)), np.empty(600)
        _kq.flat_class_scores_f32(X, W, centres, q, k, got, bound, 37, path)
        err = np.abs(got - want).max(axis=1)
        assert np.all(err <= bound), trial
        assert err.max() > 0                            # single precision, not double
        R2 = ((np.sqrt((X ** 2).sum(1)) + np.sqrt((centres ** 2).sum(1)).max()) ** 2)
        assert np.all(bound <= 1e-3 * R2), trial
    # magnitudes beyond float's comfortable range: an infinite bound (the double path)
    for tiny_or_huge in (1e-12, 1e16):
        _kq.flat_class_scores_f32(X * tiny_or_huge, W, centres * tiny_or_huge, q, k, got,
                                  bound, 256, path)
        assert np.isinf(bound).all()
    X[3, 1] = np.nan
    _kq.flat_class_scores_f32(X, W, centres, q, k, got, bound, 256, path)
    assert np.isnan(got[3]).all() and not np.isnan(got[[2, 4]]).any()
    with pytest.raises(ValueError, match="path"):
        _kq.flat_class_scores_f32(X, W, centres, q, k, got, bound, 256, 2)
    with pytest.raises(ValueError, match="bound has shape"):
        _kq.flat_class_scores_f32(X, W, centres, q, k, got, np.empty(5))
    with pytest.raises(ValueError, match="out has shape"):
        _kq.flat_class_scores_f32(X, W, centres, q, k, np.empty((600, C + 1)), bound)




@pytest.mark.parametrize("path", [0, 1])
def test_csr_times_dense_keeps_scipys_bits(path):
    """_kq.csr_times_dense (the PCA's product): the bits of scipy's ``X @ B`` and of
    the storage-order sums it defines (a product, then a sum), for widths around the
    AVX2 loop's vectors of four and passes of 32, empty rows, a row range; bad
    arguments refused."""
    rng = np.random.default_rng(8)
    X = sp.random(40, 30, density=0.4, format="csr", random_state=3)
    X.data = rng.standard_normal(X.data.size) * 10.0 ** rng.integers(-8, 8, X.data.size)
    X.data[X.indptr[5]:X.indptr[6]] = 0.0         # an empty row
    X.eliminate_zeros()
    indptr, indices = X.indptr.astype(np.int64), X.indices.astype(np.int32)
    for p in (1, 2, 3, 4, 5, 15, 16, 17, 31, 32, 33, 50, 64, 70):
        B = rng.standard_normal((30, p)) * 10.0 ** rng.integers(-8, 8, (30, p))
        got = np.empty((40, p))
        _kq.csr_times_dense(indptr, indices, X.data, 0, 40, B, got, path)
        reference = np.zeros((40, p))
        for i in range(40):
            for jj in range(indptr[i], indptr[i + 1]):
                reference[i] = reference[i] + X.data[jj] * B[indices[jj]]
        assert np.array_equal(got, reference), p
        assert np.array_equal(got, np.asarray(X @ B)), p
        part = np.empty((7, p))
        _kq.csr_times_dense(indptr, indices, X.data, 3, 10, B, part, path)
        assert np.array_equal(part, reference[3:10])
        # into the first p columns of wider rows (the PCA's output), the rest untouched
        wide = np.full((40, p + 3), 7.0)
        _kq.csr_times_dense(indptr, indices, X.data, 0, 40, B, wide[:, :p], path)
        assert np.array_equal(wide[:, :p], reference) and np.all(wide[:, p:] == 7.0)
        one = np.full((1, p + 1), 7.0)
        _kq.csr_times_dense(indptr, indices, X.data, 4, 5, B, one[:, :p], path)
        assert np.array_equal(one[0, :p], reference[4]) and one[0, p] == 7.0
    assert not got[5].any()
    with pytest.raises(ValueError, match="contiguous"):
        _kq.csr_times_dense(indptr, indices, X.data, 0, 40, B,
                            np.empty((40, 2 * B.shape[1]))[:, ::2])
    with pytest.raises(ValueError, match="out has shape"):
        _kq.csr_times_dense(indptr, indices, X.data, 0, 40, B, np.empty((39, B.shape[1])))
    with pytest.raises(ValueError, match="outside"):
        _kq.csr_times_dense(indptr, indices, X.data, 0, 41, B, np.empty((41, B.shape[1])))
    with pytest.raises(ValueError, match="points outside"):
        _kq.csr_times_dense(indptr, indices[:-1], X.data[:-1], 0, 40, B, got)
    with pytest.raises(ValueError, match="path"):
        _kq.csr_times_dense(indptr, indices, X.data, 0, 40, B, got, 2)
    # the preprocessing's own check: an index past its features
    pre = KQPreprocess(4, np.zeros(4), np.eye(2, 4), sphere=False)
    bad = as_rows(sp.csr_matrix(np.eye(3, 4)))
    np.testing.assert_array_equal(pre.transform(bad), np.eye(3, 4)[:, :2])
    from lcoding.core.rows import Rows
    with pytest.raises(ValueError, match="feature index 9"):
        pre.transform(Rows(np.ones(1), np.array([8], dtype=np.int32),
                           np.array([0, 1], dtype=np.int64), 4))

@pytest.mark.parametrize("path", [0, 1])
def test_packed_flats_score_as_the_one_call_kernel(path):
    """_kq.pack_flats_f32 once, then _kq.flat_class_scores_packed on several row sets
    (what KQModel keeps between chunks): the same bits as flat_class_scores_f32, which
    packs every call; a packed array of the wrong size or layout is refused."""
    rng = np.random.default_rng(5)
    C, k, q, d = 3, 5, 4, 11
    W = _orthonormal_flats(rng, C * k, q, d)
    centres = rng.standard_normal((C * k, d))
    avx2 = _kq.flats32_avx2(path)
    packed = np.empty(_kq.packed_flats_size(C * k, q, d, avx2), dtype=np.float32)
    cmax = _kq.pack_flats_f32(W, centres, q, avx2, packed)
    assert cmax == np.sqrt((centres ** 2).sum(1)).max()
    for n in (1, 37, 300):
        X = rng.standard_normal((n, d))
        want, want_bound = np.empty((n, C)), np.empty(n)
        _kq.flat_class_scores_f32(X, W, centres, q, k, want, want_bound, 64, path)
        got, bound = np.empty((n, C)), np.empty(n)
        _kq.flat_class_scores_packed(X, packed, C * k, q, k, cmax, avx2, got, bound, 64)
        assert np.array_equal(got, want) and np.array_equal(bound, want_bound)
    with pytest.raises(ValueError, match="packed flats have"):
        _kq.flat_class_scores_packed(X, packed[:-1], C * k, q, k, cmax, avx2, got, bound)
    with pytest.raises(ValueError, match="packed has"):
        _kq.pack_flats_f32(W, centres, q, avx2, packed[:-1])
    with pytest.raises(ValueError, match="not classes of k"):
        _kq.flat_class_scores_packed(X, packed, C * k, q, 4, cmax, avx2, got, bound)
    with pytest.raises(ValueError, match="cmax"):
        _kq.flat_class_scores_packed(X, packed, C * k, q, k, np.nan, avx2, got, bound)
    with pytest.raises(ValueError, match="centres have shape"):
        _kq.pack_flats_f32(W, centres[:-1], q, avx2, packed)
    with pytest.raises(ValueError, match="path"):
        _kq.flats32_avx2(2)

def _rows_left_open(monkeypatch) -> list:
    """The row counts the single-precision labels hand to the double path
    (KQModel._mean_scores), one entry a call, recorded from now on."""
    opened = []
    real = kq_module.KQModel._mean_scores

    def spy(self, X):
        opened.append(X.shape[0])
        return real(self, X)
    monkeypatch.setattr(kq_module.KQModel, "_mean_scores", spy)
    return opened


def test_single_precision_labels_equal_the_double_path(monkeypatch):
    """The affine flats' mean of restarts scored in single precision: the labels of
    the decision values exactly, on several data sets, scales and restarts; rows the
    bound leaves open -- here rows placed exactly between two classes -- are scored
    again in double precision; flats that stretch (a hand-made file) keep the double
    path."""
    opened = _rows_left_open(monkeypatch)
    # (W = 1: the option strings' default -W, scored the same way)
    for trial, (n_class, W, noise, scale) in enumerate([(3, 5, 0.3, 1.0), (4, 2, 0.6, 1e3),
                                                        (5, 6, 0.2, 1e-3), (2, 4, 0.4, 1.0),
                                                        (3, 3, 0.3, 1e-13), (3, 3, 0.3, 1e17),
                                                        (4, 1, 0.5, 1.0), (3, 1, 0.3, 1e3)]):
        rng = np.random.default_rng(60 + trial)
        X, y, _ = subspace_data(rng, n_class, 2, 2, 8, 60)
        X = scale * (X + noise * rng.standard_normal(X.shape))
        model = train(y, X, f"-s 41 -k 3 -Q 2 -y 1 -W {W} -S {trial}")
        assert model._single_precision_ok()
        # rows between classes: the midpoints of pairs from two classes, repeated
        a, b = np.flatnonzero(y == y[0])[:20], np.flatnonzero(y != y[0])[:20]
        Xt = np.vstack([X, (X[a] + X[b]) / 2])
        rows = as_rows(Xt)
        expected = model.labels_from_values(model.decision_values(rows))
        opened.clear()
        np.testing.assert_array_equal(model.predict_labels(rows), expected, err_msg=str(trial))
        # (at extreme input scales too: these options project the rows onto the unit
        # sphere, -Z 1; the kernel's own range guard is tested in
        # test_single_precision_class_scores_are_within_their_bound)
        assert len(opened) <= 1 and sum(opened) < Xt.shape[0] // 4, (trial, opened)
        # again from the flats packed by the first call; a pickled copy leaves the
        # packed flats behind and packs its own
        assert model._packed
        np.testing.assert_array_equal(model.predict_labels(rows), expected)
        copy = pickle.loads(pickle.dumps(model))
        assert copy._packed is None
        np.testing.assert_array_equal(copy.predict_labels(rows), expected)
    # a row exactly on the boundary of two mirror-image classes: always left open
    Q = np.linalg.qr(np.random.default_rng(3).standard_normal((6, 6)))[0]
    c = 3 * Q[2]
    on = points_on(np.random.default_rng(4), Q[:2], 40)
    Xm = np.vstack([on + c, on - c])
    ym = np.repeat([1.0, 2.0], 40)
    model = train(ym, Xm, "-s 41 -k 1 -Q 2 -y 1 -W 3 -S 0")
    rows = as_rows(np.vstack([Xm, np.zeros((1, 6))]))
    expected = model.labels_from_values(model.decision_values(rows))
    opened.clear()
    np.testing.assert_array_equal(model.predict_labels(rows), expected)
    assert opened == [1]
    # stretching flats: the double path only
    model.metrics *= 3.0
    model._contractive_flats = model._packed = None
    assert not model._single_precision_ok()
    expected = model.labels_from_values(model.decision_values(rows))
    np.testing.assert_array_equal(model.predict_labels(rows), expected)


def test_metrics_labels_in_single_precision_equal_the_double_path(monkeypatch):
    """k q-metrics of one restart are scored in single precision as flats through
    the origin (their rows divided by the power of two at or above their largest
    singular value, KQModel._single_flats): the labels of the decision values exactly,
    with and without the sphere, for metrics that stretch (after the margin passes)
    and at scales 1e-3 to 1e3 (on the sphere); rows the bound leaves open -- repeated
    midpoints between classes -- go to the double path.  Several restarts (a vote) keep their path."""
    opened = _rows_left_open(monkeypatch)
    stretch = []
    # (without the sphere the margin passes' step wants rows near unit scale)
    for trial, (n_class, sphere, scale) in enumerate([(3, 1, 1.0), (4, 1, 1e3), (5, 1, 1e-3),
                                                      (2, 0, 1.0), (4, 0, 0.5)]):
        rng = np.random.default_rng(90 + trial)
        X, y, _ = subspace_data(rng, n_class, 2, 2, 8, 60)
        X = scale * (X + 0.3 * rng.standard_normal(X.shape))
        model = train(y, X, f"-s 40 -k 2 -Q 2 -E 5 -Z {sphere} -S {trial}")
        assert not model.affine and model._single_precision_ok()
        W, centres = model._single_flats(0)
        top = np.linalg.svd(W.reshape(-1, 2, model.dim), compute_uv=False)[:, 0].max()
        assert top <= 1.0 and not centres.any()
        stretch.append(np.linalg.svd(model.metrics[0].reshape(-1, 2, model.dim),
                                     compute_uv=False)[:, 0].max())
        a, b = np.flatnonzero(y == y[0])[:20], np.flatnonzero(y != y[0])[:20]
        rows = as_rows(np.vstack([X, (X[a] + X[b]) / 2]))
        expected = model.labels_from_values(model.decision_values(rows))
        opened.clear()
        np.testing.assert_array_equal(model.predict_labels(rows), expected, err_msg=str(trial))
        assert len(opened) <= 1 and sum(opened) < rows.n_rows // 4, (trial, opened)
    assert max(stretch) > 1.0, stretch          # the scaling was needed somewhere
    voting = train(y, X, "-s 40 -k 2 -Q 2 -E 3 -W 3 -S 0")
    assert not voting._single_precision_ok()
    zero = train(y, X, "-s 40 -k 2 -Q 2 -E 3 -S 0")
    zero.metrics[:] = 0.0
    zero._metrics_as_flats = None
    assert not zero._single_precision_ok()      # nothing to scale: the double path


def test_branch_and_bound_labels_score_less_and_equal_the_full_rule(monkeypatch):
    """The single-precision path's branch and bound over classes and restarts
    (KQModel._bound_labels, _kq.bound_labels_packed): the labels of the decision values
    exactly (3-10 classes, 2-6 restarts, chunks of 50 rows), with far fewer
    class-and-restart scores than every class in every restart where there are many
    classes; a NaN score in restart 0, in the lead's restarts or in a class still in
    the running takes the checked path (a ValueError where the double scores are NaN
    too, never a label)."""
    from lcoding.methods import kq as kq_module
    monkeypatch.setattr(kq_module, "BOUND_CHUNK", 50)
    scored = _bound_scores_counted(monkeypatch)
    for trial, (n_class, W, noise) in enumerate([(8, 5, 0.3), (6, 3, 0.8), (10, 6, 0.2),
                                                 (3, 2, 0.5), (7, 4, 1.5)]):
        X, model, rows, expected = _noisy_flats(80 + trial, n_class, 40, noise, W, trial)
        assert model._single_precision_ok()
        scored.clear()
        np.testing.assert_array_equal(model.predict_labels(rows), expected, err_msg=str(trial))
        assert len(scored) == -(-X.shape[0] // 50)          # a call a chunk
        # restarts 1 .. W-1: the lead's, and a few classes still in the running
        later = sum(scored) - n_class * X.shape[0]
        assert 0 < later <= (W - 1) * n_class * X.shape[0]
        if n_class >= 6:
            # (noisy classes keep more in the running: 36-75 % here; letter 15 %)
            assert later < 0.8 * (W - 1) * n_class * X.shape[0], trial
    # the chunks follow the work too (a Ctrl-C waits for one call): at most
    # BOUND_CALL_WORK multiply-adds were every class scored in every restart
    monkeypatch.setattr(kq_module, "BOUND_CHUNK", 8192)
    work = W * n_class * model.k * (model.q + 1) * (model.dim + 1)
    monkeypatch.setattr(kq_module, "BOUND_CALL_WORK", 300 * work)
    more = as_rows(np.vstack([X, X, X]))
    scored.clear()
    np.testing.assert_array_equal(model.predict_labels(more), np.tile(expected, 3))
    assert len(scored) == -(-3 * X.shape[0] // 256)       # chunks of 256 rows

    # NaN flats in single precision (the packed floats edited): restart 0's, the
    # lead's later restarts', or the later restarts of the classes in the running --
    # the rows go to the checked path, whose double-precision scores are finite here:
    # the same labels
    C = model.nr_class
    for first, last in ((0, 1), (1, 1 + C), (1 + C, 1 + C + C * (W - 1))):
        model._packed = None
        packed, offsets, _, _ = model._bound_pack()
        packed[offsets[first]:offsets[last]] = np.nan
        np.testing.assert_array_equal(model.predict_labels(rows), expected, err_msg=str(first))
    # NaN in both precisions (a model file whose flats overflow on these rows): the
    # checked path names it
    real_double = kq_module.KQModel.class_scores

    def nan_double(self, Z, restart=0):
        out = real_double(self, Z, restart)
        out[0, 0] = np.nan
        return out
    model._packed = None
    packed, offsets, _, _ = model._bound_pack()
    packed[:offsets[1]] = np.nan
    monkeypatch.setattr(kq_module.KQModel, "class_scores", nan_double)
    with pytest.raises(ValueError, match="NaN"):
        model.predict_labels(rows)


@pytest.mark.parametrize("opts", ["-s 41 -k 3 -Q 2 -y 1 -W 4 -Z 0",
                                  "-s 41 -k 3 -Q 2 -y 1 -W 1 -Z 0",
                                  "-s 40 -k 2 -Q 2 -E 3 -Z 0"])
def test_single_precision_labels_beyond_floats_range(opts):
    """Rows so large that their single-precision scores overflow (norms 1e18-1e36:
    squared distances past float's 3.4e38, infinite bounds, -inf or NaN sums): the
    branch and bound decides none of them and the double path gives the decision
    values' labels -- it once pruned every other class on a NaN comparison and gave
    the leading class of restart 0 (100 of 160 such cases wrong)."""
    for seed in range(4):
        rng = np.random.default_rng(300 + seed)
        X, y, _ = subspace_data(rng, 5, 2, 2, 8, 30)
        X = X + 0.3 * rng.standard_normal(X.shape)
        model = train(y, X, f"{opts} -S {seed}")
        assert model._single_precision_ok()
        for scale in (1e18, 1e19, 3e19, 1e25, 1e36):
            rows = as_rows(scale * X)
            expected = model.labels_from_values(model.decision_values(rows))
            np.testing.assert_array_equal(model.predict_labels(rows), expected,
                                          err_msg=f"{seed} {scale}")


@pytest.mark.parametrize("opts", ["-s 41 -k 3 -Q 2 -W 3 -Z 0", "-s 40 -k 2 -Q 2 -E 3 -W 3 -Z 0"])
def test_vote_labels_refuse_rows_whose_norms_overflow(opts):
    """A vote of restarts on rows whose norms overflow in double (1e300): the decision
    values' tie term is NaN, and predict_labels refuses the rows as they do (it once
    voted among +inf scores and gave the first class)."""
    rng = np.random.default_rng(5)
    X, y, _ = subspace_data(rng, 3, 2, 2, 8, 30)
    model = train(y, X + 0.3 * rng.standard_normal(X.shape), opts)
    assert model.restart_rule == "vote"
    rows = as_rows(1e300 * X)
    for predict in (model.decision_values, model.predict_labels):
        with pytest.raises(ValueError, match="NaN"):
            predict(rows)
    np.testing.assert_array_equal(          # at 1e150 the norms are still finite
        model.predict_labels(as_rows(1e150 * X)),
        model.labels_from_values(model.decision_values(as_rows(1e150 * X))))


def test_bound_labels_packed_refuses_inconsistent_slices():
    """_kq.bound_labels_packed checks its slices against the classes, restarts and
    flats it is told: their count, sizes, offsets and centre norms, and the output's
    length."""
    from lcoding.methods import _kq
    X, model, rows, _ = _noisy_flats(7, 3, 20, 0.3, 3, 0)
    Z = model.preprocess.transform(rows)
    packed, offsets, cmaxes, avx2 = model._bound_pack()
    C, k, q, W = model.nr_class, model.k, model.q, model.n_restarts
    winners = np.empty(Z.shape[0], dtype=np.int64)
    assert _kq.bound_labels_packed(Z, packed, offsets, cmaxes, C, k, q, W, avx2,
                                   winners)[0] == 0
    with pytest.raises(ValueError, match="offsets"):
        _kq.bound_labels_packed(Z, packed, offsets, cmaxes, C, k, q, W + 1, avx2, winners)
    with pytest.raises(ValueError, match="slice 0"):
        _kq.bound_labels_packed(Z, packed, offsets, cmaxes, C, k + 8, q, W, avx2, winners)
    with pytest.raises(ValueError, match="offsets run"):
        _kq.bound_labels_packed(Z, packed[:-1], offsets, cmaxes, C, k, q, W, avx2, winners)
    bad = cmaxes.copy()
    bad[2] = np.inf
    with pytest.raises(ValueError, match="cmaxes"):
        _kq.bound_labels_packed(Z, packed, offsets, bad, C, k, q, W, avx2, winners)
    with pytest.raises(ValueError, match="winners"):
        _kq.bound_labels_packed(Z, packed, offsets, cmaxes, C, k, q, W, avx2, winners[1:])
    with pytest.raises(ValueError, match=">= 1"):
        _kq.bound_labels_packed(Z, packed, offsets, cmaxes, C, 0, q, W, avx2, winners)


@pytest.mark.slow
def test_single_precision_labels_on_shared_sets(shared_data):
    """KQMetricsClassifier()'s flats on letter and usps, one restart of them (the
    option strings' default -W 1), and the selector's k q-metrics candidate: the
    single-precision labels are the double path's on every test row."""
    for name, opts in (("letter", "-s 41 -k 32 -Q 4 -l 16 -Z 0 -z 0.5 -y 1 -W 5 -S 0"),
                       ("usps", "-s 41 -k 20 -Q 12 -l 50 -Z 0 -z 0.5 -y 1 -W 1 -S 0"),
                       ("usps", "-s 41 -k 20 -Q 12 -l 50 -Z 0 -z 0.5 -y 1 -W 5 -S 0"),
                       ("usps", "-s 40 -k 8 -Q 20 -l 50 -Z 1 -z 0.5 -W 1 -U 1.05 -V 0.95 "
                                "-D 0.1 -S 0")):
        y, X, ty, tX = shared_data(name)
        model = train_model(y, as_rows(X), parse_train_options(opts + " -q"))
        rows = as_rows(tX).truncated(model.nr_feature)
        assert model._single_precision_ok()
        expected = model.labels_from_values(model.decision_values(rows))
        np.testing.assert_array_equal(model.predict_labels(rows), expected, err_msg=name)


@pytest.mark.parametrize("affine", [False, True])
def test_vote_labels_equal_the_full_rule_on_random_scores(monkeypatch, affine):
    """The early-stopping vote against the full rule on random scores: 2-7 classes,
    1-6 restarts, scores from a few discrete values (ties in the argmax, in the vote
    and in the tie term) -- the same class for every row, always."""
    from lcoding.methods import kq as kq_module
    X0, y0, _ = subspace_data(np.random.default_rng(18), 2, 1, 2, 4, 20)
    model = train(y0, X0, "-s 41 -k 1 -Q 1 -y 1 -W 2" if affine else "-s 40 -k 1 -Q 1 -E 1 -W 2")
    assert model.affine == affine
    model.restart_rule = "vote"     # affine flats train with "mean"; older files vote
    rng = np.random.default_rng(17)
    for trial in range(200):
        n_class, W, n = int(rng.integers(2, 8)), int(rng.integers(1, 7)), 300
        levels = rng.normal(size=int(rng.integers(2, 5)))
        if affine:
            levels = -np.abs(levels)        # flats' scores are minus squared distances
        else:
            levels = np.abs(levels)         # metrics' scores are squared norms
        S = levels[rng.integers(0, levels.size, size=(W, n, n_class))]
        monkeypatch.setattr(model, "nr_class", n_class, raising=False)
        monkeypatch.setattr(type(model), "n_restarts", property(lambda self: W))
        monkeypatch.setattr(model, "class_scores",
                            lambda Z, r=0: S[r][Z[:, 0].astype(int)].copy(), raising=False)
        X = np.arange(n, dtype=float)[:, None]
        expected = np.argmax(model._values_of(X), axis=1)
        np.testing.assert_array_equal(model._vote_labels(X), expected, err_msg=str(trial))


def _top_pairs(S, q):
    values, vectors = np.empty(q), np.empty((q, S.shape[0]))
    assert _kq.top_eigenpairs(np.ascontiguousarray(S), values, vectors) == 0
    return values, vectors


@pytest.mark.parametrize("d, q, rows", [(1, 1, 3), (2, 2, 5), (3, 2, 4), (17, 4, 20),
                                        (17, 4, 3), (50, 12, 80), (50, 12, 5), (64, 64, 70)])
def test_small_eigensolver_matches_numpy(d, q, rows):
    """The flats' eigensolver (_small_eigh.h: Householder, bisection, inverse
    iteration) against NumPy's eigh on scatters of `rows` points: the same q largest
    values, orthonormal vectors with residuals at rounding, and the same vectors
    (up to sign) where an eigenvalue stands apart from its neighbours.  `rows` < q:
    rank-deficient scatters, whose tied zero eigenvalues any orthonormal basis of
    their space satisfies."""
    rng = np.random.default_rng(d * 100 + q + rows)
    for _ in range(20):
        G = rng.standard_normal((rows, d)) * rng.uniform(0.1, 3.0, d)
        S = G.T @ G
        values, vectors = _top_pairs(S, q)
        ref_values, ref_vectors = np.linalg.eigh(S)
        ref_values, ref_vectors = ref_values[::-1], ref_vectors[:, ::-1].T
        scale = abs(ref_values).max()
        np.testing.assert_allclose(values, ref_values[:q], rtol=0, atol=1e-13 * scale)
        np.testing.assert_allclose(vectors @ vectors.T, np.eye(q), atol=1e-13)
        np.testing.assert_allclose(S @ vectors.T - vectors.T * values, 0, atol=1e-13 * scale)
        gaps = np.abs(np.diff(ref_values))
        for t in range(q):
            gap = min(gaps[t - 1] if t > 0 else np.inf, gaps[t] if t < d - 1 else np.inf)
            if gap > 1e-3 * scale:
                assert abs(abs(vectors[t] @ ref_vectors[t]) - 1) < 1e-10


def test_small_eigensolver_degenerate_and_extreme_matrices():
    """Ties, the zero matrix (dsyev's unit vectors: the last coordinates first),
    entries near the ends of the double range (the solver scales by a power of
    two), and a non-finite entry (code 2, nothing computed)."""
    values, vectors = _top_pairs(np.zeros((5, 5)), 2)
    np.testing.assert_array_equal(values, 0)
    np.testing.assert_array_equal(vectors, np.eye(5)[[4, 3]])
    for S, q in [(np.eye(6), 3), (np.diag([5.0, 5.0, 3.0, 1.0]), 3),
                 (np.diag([2.0, 7.0, 7.0, 7.0, 1.0]), 4)]:
        values, vectors = _top_pairs(S, q)
        np.testing.assert_allclose(values, np.sort(np.diag(S))[::-1][:q], atol=1e-14)
        np.testing.assert_allclose(vectors @ vectors.T, np.eye(q), atol=1e-14)
        np.testing.assert_allclose(S @ vectors.T - vectors.T * values, 0, atol=1e-13)
    rng = np.random.default_rng(9)
    for magnitude in (1e200, 1e-150):
        G = rng.standard_normal((20, 17)) * np.sqrt(magnitude)
        S = G.T @ G
        values, vectors = _top_pairs(S, 4)
        np.testing.assert_allclose(values, np.linalg.eigvalsh(S)[::-1][:4], rtol=1e-13)
        np.testing.assert_allclose(vectors @ vectors.T, np.eye(4), atol=1e-13)
    S = np.eye(3)
    S[1, 2] = S[2, 1] = np.nan
    assert _kq.top_eigenpairs(S, np.empty(1), np.empty((1, 3))) == 2
    with pytest.raises(ValueError, match="square"):
        _kq.top_eigenpairs(np.eye(65), np.empty(1), np.empty((1, 65)))
    with pytest.raises(ValueError, match="pairs"):
        _kq.top_eigenpairs(np.eye(3), np.empty(4), np.empty((4, 3)))


def test_small_eigensolver_zero_columns_and_tight_clusters():
    """Eigenvalues tied in numbers beyond the start vectors' old period: scatters
    with exact zero columns (a coordinate constant over a cluster's rows; their null
    space asked for whole, q up to d) got duplicated vectors from inverse iteration's
    start vectors repeating every 11 eigenpairs; and clusters of eigenvalues 1 +-
    1e-12, whose vectors one pass of Gram-Schmidt left 1e-9 from orthogonal.  Both:
    orthonormal vectors, residuals at rounding, the values NumPy's."""
    rng = np.random.default_rng(17)
    for d in (13, 16, 25, 40, 64):
        for _ in range(4):
            G = rng.standard_normal((d + 2, d))
            G[:, rng.random(d) < 0.4] = 0.0
            S = np.ascontiguousarray(G.T @ G)
            for q in (d - 1, d):
                values, vectors = _top_pairs(S, q)
                scale = abs(np.linalg.eigvalsh(S)).max()
                np.testing.assert_allclose(values, np.linalg.eigvalsh(S)[::-1][:q], rtol=0,
                                           atol=1e-12 * scale)
                np.testing.assert_allclose(vectors @ vectors.T, np.eye(q), atol=1e-12)
                np.testing.assert_allclose(S @ vectors.T - vectors.T * values, 0,
                                           atol=1e-12 * scale)
        Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        S = np.ascontiguousarray((Q * (1 + 1e-12 * rng.standard_normal(d))) @ Q.T)
        S = (S + S.T) / 2
        values, vectors = _top_pairs(S, d)
        np.testing.assert_allclose(vectors @ vectors.T, np.eye(d), atol=1e-12)
        np.testing.assert_allclose(S @ vectors.T - vectors.T * values, 0, atol=1e-11)


def test_small_eigensolver_builds_agree_bit_for_bit():
    """The eigensolver's AVX2 build (where the CPU has it) and its baseline build
    round every operation alike (no fused multiply-add): the same bits, so a model
    does not depend on the CPU it was trained on through them.  Sizes across the
    four-lane blocks, clusters of tied eigenvalues spanning blocks, an odd count of
    entries (the scan's tail) and a non-finite entry in the tail."""
    rng = np.random.default_rng(11)
    for d, q, rows in [(1, 1, 2), (3, 3, 5), (5, 4, 2), (17, 4, 20), (17, 6, 9), (33, 9, 40),
                       (50, 12, 5), (64, 13, 100)]:
        for _ in range(5):
            G = rng.standard_normal((rows, d)) * rng.uniform(0.1, 3.0, d)
            S = np.ascontiguousarray(G.T @ G)
            out = []
            for path in (0, 1):
                values, vectors = np.empty(q), np.empty((q, d))
                assert _kq.top_eigenpairs(S, values, vectors, path=path) == 0
                out.append((values, vectors))
            np.testing.assert_array_equal(out[0][0], out[1][0])
            np.testing.assert_array_equal(out[0][1], out[1][1])
    S = np.eye(5)
    S[4, 4] = np.inf                        # the last of 25 entries: the scan's tail
    for path in (0, 1):
        assert _kq.top_eigenpairs(S, np.empty(2), np.empty((2, 5)), path=path) == 2
    with pytest.raises(ValueError, match="path"):
        _kq.top_eigenpairs(np.eye(3), np.empty(1), np.empty((1, 3)), path=2)


def test_flats_on_rows_whose_squares_overflow_name_the_remedy():
    """Rows near the float limit (their scatters overflow to inf): a ValueError
    naming the method, the largest value and the remedy, not a crash or a NaN model."""
    from lcoding.sklearn import KQMetricsClassifier
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 6)) * 1e160, rng.integers(0, 3, 300)
    with pytest.raises(ValueError, match="scatter of the rows is not finite.*scale the features"):
        KQMetricsClassifier(solver="flats", pca_components=None, random_state=0).fit(X, y)


# ---------------------------------------------------------------------- the screen
def _screen_reference_scores(screen, Z):
    """minus the squared distance to each class's nearest screen flat, in NumPy."""
    C, k, q = screen.nr_class, screen.k, screen.q
    out = np.empty((Z.shape[0], C))
    for c in range(C):
        best = np.full(Z.shape[0], -np.inf)
        for j in range(k):
            m = c * k + j
            F = screen.bases[m * q:(m + 1) * q]
            D = Z - screen.centres[m]
            best = np.maximum(best, (D @ F.T) ** 2 @ np.ones(q) - (D * D).sum(axis=1))
        out[:, c] = best
    return out


def _screened_flats(seed=3, margin_quantile=0.5, W=3):
    """Affine flats of 4 noisy classes, W restarts, their labels without a screen,
    then the same model with a screen (-U) whose margin screens about half of the
    rows: the same restarts (the screen draws from its own stream)."""
    X, model, rows, full = _noisy_flats(seed, 4, 60, 0.15, W, 1)
    y = np.repeat(np.arange(4) + 1, 2 * 60).astype(float)
    Z = model.preprocess.transform(rows)
    probe = train(y, X, f"-s 41 -k 3 -Q 2 -y 1 -W {W} -S 1 -U 1")
    S = _screen_reference_scores(probe.screen, Z)
    top = np.sort(S, axis=1)
    margins = top[:, -1] - top[:, -2]
    margin = float(np.quantile(margins, margin_quantile))
    screened = train(y, X, f"-s 41 -k 3 -Q 2 -y 1 -W {W} -S 1 -U {margin!r}")
    assert screened.screen.margin == margin
    np.testing.assert_array_equal(screened.metrics, model.metrics)
    np.testing.assert_array_equal(screened.screen.bases, probe.screen.bases)
    return screened, rows, Z, full, S, margins, y


def test_screen_labels_and_values_match_a_numpy_reference():
    """A screened model: the rows whose screen class leads by the margin take the
    screen's class and its scores as decision values, the others the restarts' --
    and the labels are the values' argmax on every path."""
    model, rows, Z, full, S, margins, _ = _screened_flats()
    assert (model.screen.k, model.screen.q) == kq_module.screen_sizes(model.k, model.q)
    np.testing.assert_allclose(model.screen.scores(Z), S, rtol=1e-10, atol=1e-10)
    screened = margins >= model.screen.margin
    assert 0.3 < screened.mean() < 0.7
    label = np.asarray(model.label, dtype=float)
    expected = np.where(screened, label[np.argmax(S, axis=1)], full)
    assert np.array_equal(model.predict_labels(rows), expected)
    values = model.decision_values(rows)
    np.testing.assert_allclose(values[screened], S[screened], rtol=1e-10, atol=1e-10)
    plain = KQModel(model.solver_type, model.nr_class, model.label, model.nr_feature,
                    model.preprocess, model.k, model.q, model.metrics, centres=model.centres,
                    restart_rule=model.restart_rule)
    np.testing.assert_array_equal(values[~screened], plain.decision_values(rows)[~screened])
    assert np.array_equal(model.labels_from_values(values), expected)


def test_screen_in_single_precision_decides_as_the_double_path(monkeypatch):
    """KQScreen.decide (float scores and their bound, the rows near the margin in
    double) screens exactly the rows the double scores screen -- also with the
    margin a hair (1e-11, far inside float's bound, far outside double's rounding)
    above or below a row's own margin, where only the double path can tell."""
    model, rows, Z, full, S, margins, _ = _screened_flats(seed=4, W=2)
    exact = model.screen.scores(Z)
    top = np.sort(exact, axis=1)
    exact_margins = top[:, -1] - top[:, -2]
    ranked = np.sort(exact_margins)
    doubles = []
    real = kq_module.KQScreen.scores
    monkeypatch.setattr(kq_module.KQScreen, "scores",
                        lambda self, X: doubles.append(X.shape[0]) or real(self, X))
    for margin in (model.screen.margin, ranked[40] * (1 + 1e-11), ranked[40] * (1 - 1e-11),
                   ranked[-3] * (1 - 1e-11)):
        model.screen.margin = float(margin)
        doubles.clear()
        mask, winners = model.screen.decide(Z)
        assert np.array_equal(mask, exact_margins >= margin)
        assert np.array_equal(winners[mask], np.argmax(exact, axis=1)[mask])
    # the rows a hair from the margin went to the double path, and only a few
    model.screen.margin = float(ranked[40] * (1 + 1e-11))
    doubles.clear()
    model.screen.decide(Z)
    assert len(doubles) == 1 and 1 <= doubles[0] <= 5


def test_screen_round_trips_through_model_files_and_pickles(tmp_path):
    model, rows, Z, full, S, margins, _ = _screened_flats()
    text = model_to_text(model)
    assert f"\nscreen_margin {'%.17g' % model.screen.margin}\n" in text
    loaded = model_from_text(text)
    assert model_to_text(loaded) == text
    assert np.array_equal(loaded.predict_labels(rows), model.predict_labels(rows))
    again = pickle.loads(pickle.dumps(model))
    assert again.screen._packed is None
    assert np.array_equal(again.predict_labels(rows), model.predict_labels(rows))
    assert "screen=(k=" in repr(loaded)


def test_screen_model_file_errors():
    model, *_ = _screened_flats()
    text = model_to_text(model)
    margin_line = f"screen_margin {'%.17g' % model.screen.margin}"
    for bad in ("0", "-1", "nan", "inf"):
        with pytest.raises(ValueError, match="screen_margin"):
            model_from_text(text.replace(margin_line, f"screen_margin {bad}"))
    with pytest.raises(ValueError, match="screen_margin"):
        model_from_text(text.replace(margin_line + "\n", ""))
    with pytest.raises(ValueError, match="screen_cluster"):
        model_from_text(text.replace("screen_cluster 2", "screen_cluster 0"))
    with pytest.raises(ValueError, match="screen"):
        model_from_text(text.split("\nscreen_centres\n")[0] + "\n")
    with pytest.raises(ValueError, match="affine"):
        model_from_text(text.replace("affine 1\n", ""))
    assert "nr_class 4\nlabel 1 2 3 4\n" in text
    with pytest.raises(ValueError, match="two classes"):
        model_from_text(text.replace("nr_class 4\nlabel 1 2 3 4\n", "nr_class 1\nlabel 1\n"))


def test_the_folds_screen_equals_the_trained_screen_on_the_same_rows():
    """screen_fold_scores (the selector's folds) fits the screen training with -U fits
    on the same rows and seed path: the same scores."""
    rng = np.random.default_rng(8)
    X, y, _ = subspace_data(rng, 3, 2, 2, 8, 40)
    X = X + 0.1 * rng.standard_normal(X.shape)
    rows = as_rows(X)
    opts = "-s 41 -k 4 -Q 3 -l 6 -Z 0 -z 0.5 -y 1 -W 2 -S 3 -q"
    test = as_rows(X[::7] + 0.01)
    classes, scores, work_s, work_f = kq_module.screen_fold_scores(
        y, rows, test, parse_train_options(opts), (2,))
    model = train_model(y, rows, parse_train_options(opts + " -U 1"), seed_path=(2,))
    assert (model.screen.k, model.screen.q) == kq_module.screen_sizes(4, 3) == (2, 1)
    np.testing.assert_array_equal(classes, model.label)
    np.testing.assert_array_equal(scores, model.screen.scores(model.preprocess.transform(test)))
    # 3 classes x 2 flats x (1 + 1) x 8 dims; the restarts: (3 + 2 - 1) x 4 x (3 + 1) x 8
    assert work_s == 3 * 2 * 2 * 8 and work_f == 4 * 4 * 4 * 8
    assert kq_module.screenable(parse_train_options(opts), 3)
    assert not kq_module.screenable(parse_train_options(opts + " -U 1"), 3)
    assert not kq_module.screenable(parse_train_options(opts), 1)
    assert not kq_module.screenable(parse_train_options("-s 41 -k 2 -Q 2"), 3)


def test_screen_option_errors():
    """-U with -s 41 is the screen's margin: > 0, affine flats, two classes; -s 40
    keeps it as mu1 (default 1.05 when not given)."""
    rng = np.random.default_rng(9)
    X, y, _ = subspace_data(rng, 2, 1, 2, 5, 10)
    with pytest.raises(ValueError, match="-U 1: with -s 41 the screen's margin"):
        train(y, X, "-s 41 -k 1 -Q 2 -U 1")
    with pytest.raises(ValueError, match="must be > 0"):
        train(y, X, "-s 41 -k 1 -Q 2 -y 1 -U 0")
    with pytest.raises(ValueError, match="two classes"):
        train(np.ones_like(y), X, "-s 41 -k 1 -Q 2 -y 1 -U 1")
    assert train(y, X, "-s 41 -k 1 -Q 2 -y 1").screen is None
    from lcoding.core.params import KQ_MU1, KQParams
    assert KQParams.from_train_params(parse_train_options("-s 40")).mu1 == KQ_MU1 == 1.05
    assert KQParams.from_train_params(parse_train_options("-s 40")).screen_margin is None
    assert KQParams.from_train_params(parse_train_options("-s 40 -U 2")).mu1 == 2.0
    assert KQParams.from_train_params(parse_train_options("-s 41 -U 2")).screen_margin == 2.0



def test_filled_flats_score_as_the_one_call_kernel():
    """_kq.fill_flats_f64 once, then _kq.flat_class_scores_filled on several row sets
    (one row, a few, more than a block): the same numbers as flat_class_scores, which
    fills them every call; the model keeps them (not in a pickle)."""
    rng = np.random.default_rng(31)
    C, k, q, d = 3, 4, 3, 9
    W = np.ascontiguousarray(np.vstack([np.linalg.qr(rng.standard_normal((d, q)))[0].T
                                        for _ in range(C * k)]))
    centres = rng.standard_normal((C * k, d))
    A = np.empty(C * k * (q + 1) * (d + 1))
    _kq.fill_flats_f64(W, centres, q, A)
    for n in (1, 3, 300):
        X = rng.standard_normal((n, d))
        want, got = np.empty((n, C)), np.empty((n, C))
        _kq.flat_class_scores(X, W, centres, q, k, want)
        _kq.flat_class_scores_filled(X, A, C * k, q, k, got)
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="A has"):
        _kq.flat_class_scores_filled(X, A[:-1], C * k, q, k, got)
    with pytest.raises(ValueError, match="A has"):
        _kq.fill_flats_f64(W, centres, q, A[:-1])
    with pytest.raises(ValueError, match="classes of k"):
        _kq.flat_class_scores_filled(X, A, C * k, q, 5, got)
    model = train(np.repeat([1.0, 2.0, 3.0], 30), rng.standard_normal((90, 6)),
                  "-s 41 -k 2 -Q 2 -y 1 -W 2")
    rows = as_rows(rng.standard_normal((20, 6)))
    Z = model.preprocess.transform(rows)
    first = model.class_scores(Z, 1)
    assert model._filled[1] is not None and model._filled[0] is None
    np.testing.assert_array_equal(first, class_scores(Z, model.metrics[1], 3, 2, 2,
                                                      model.centres[1]))
    assert pickle.loads(pickle.dumps(model))._filled is None
