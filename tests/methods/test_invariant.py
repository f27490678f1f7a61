"""Kernels, kernel PCA map, IHKPCA, ISVM and VSV (lcoding.invariant, issue 8)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from lcoding import liblinearutil
from lcoding.core.rows import rows_from_dense, rows_from_sparse
from lcoding.methods.invariant import (Kernel, KernelExpansionModel, TangentKernel, ihkpca_map,
                                       image_tangents, invariant_whitening, kernel_pca_map,
                                       landmark_gram, spanning_landmarks, top_eigenvalue,
                                       train_invariant, translated_images, virtual_landmarks)
from lcoding.core.model import LinearModel
from lcoding.io.model_files import model_to_text, save_model_file
from lcoding.training import load_model_file, model_from_text
from lcoding.core.options import OptionError, parse_train_options
from lcoding.training import train_model


def circle_problem(rng, n):
    X = rng.uniform(-1.0, 1.0, (n, 2))
    return X, np.where((X ** 2).sum(1) > 0.7, 1.0, -1.0)


def rotation_tangents(X, step=1e-3):
    return step * np.column_stack([-X[:, 1], X[:, 0]])


def reference_kernel(kernel_type, A, B, degree, gamma, coef0):
    dot = A @ B.T
    if kernel_type == 0:
        return dot
    if kernel_type == 1:
        return (gamma * dot + coef0) ** degree
    if kernel_type == 2:
        return np.exp(-gamma * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))
    return np.tanh(gamma * dot + coef0)


@pytest.mark.parametrize("kernel_type", [0, 1, 2, 3])
def test_kernel_block_matches_the_formula(kernel_type):
    rng = np.random.default_rng(kernel_type)
    A = rng.normal(size=(300, 9))
    A[rng.random(A.shape) < 0.5] = 0.0
    B = rng.normal(size=(11, 9))
    kernel = Kernel(kernel_type, 3, 0.3, -0.7)
    want = reference_kernel(kernel_type, A, B, 3, 0.3, -0.7)
    np.testing.assert_allclose(kernel.matrix(rows_from_dense(A), B), want, rtol=1e-12, atol=1e-12)
    # sparse input with extra columns: columns beyond the points' width are ignored
    wide = sp.hstack([sp.csr_matrix(A), sp.csr_matrix(rng.normal(size=(300, 3)))]).tocsr()
    np.testing.assert_allclose(kernel.matrix(rows_from_sparse(wide), B), want, rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5])
def test_rbf_kernel_of_few_features_sums_the_squares_directly(d):
    """Up to 4 features the RBF exponents are summed feature by feature (_exp.h), not
    from dgemm's inner products: the formula's exponents to 1e-15 (no cancellation of
    the expanded square), the same bits on the AVX2 and the scalar path, and every
    tail length of the 4-lane loop; the kernel values as the formula's."""
    from lcoding.methods import _kernels
    rng = np.random.default_rng(d)
    A = rng.normal(size=(40, d)) * 3.0
    B = rng.normal(size=(23, d)) * 3.0
    want = reference_kernel(2, A, B, 3, 0.7, 0.0)
    got = Kernel(2, gamma=0.7).matrix(rows_from_dense(A), B)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
    VT = np.ascontiguousarray(B.T)
    for m in range(0, 10):
        scalar, vector = np.empty(m), np.empty(m)
        assert _kernels.rbf_exponents(A[0], np.ascontiguousarray(VT[:, :m]), -0.7, scalar, 1) == 1
        _kernels.rbf_exponents(A[0], np.ascontiguousarray(VT[:, :m]), -0.7, vector, 2)
        np.testing.assert_array_equal(scalar, vector)
        np.testing.assert_allclose(scalar, -0.7 * ((A[0] - B[:m]) ** 2).sum(1), rtol=1e-15)


@pytest.mark.parametrize("kernel_type", [0, 1, 2, 3])
@pytest.mark.parametrize("d", [2, 9])
@pytest.mark.parametrize("nr_w", [1, 3])
def test_kernel_decision_is_the_kernel_block_times_the_weights(kernel_type, d, nr_w):
    """_kernels.kernel_decision (prediction: kernel values and the weights in one
    pass, blocks of rows) against NumPy's ``K @ W + offset`` of the kernel block."""
    from lcoding.methods import _kernels
    rng = np.random.default_rng(10 * kernel_type + d)
    A = rng.normal(size=(700, d))          # several row blocks
    A[rng.random(A.shape) < 0.3] = 0.0
    B = rng.normal(size=(37, d))
    W = rng.normal(size=(37, nr_w))
    offset = rng.normal(size=nr_w)
    kernel = Kernel(kernel_type, 3, 0.3, 0.5)
    want = kernel.matrix(rows_from_dense(A), B) @ W + offset
    rows = rows_from_dense(A)
    out = np.empty((700, nr_w))
    bad = np.ones(700, dtype=np.int8)
    assert _kernels.kernel_decision(rows.data, rows.indices, rows.indptr, B,
                                    np.einsum("ij,ij->i", B, B), W, offset, out, bad,
                                    kernel_type, 3, 0.3, 0.5) == 0
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    assert not bad.any()


def test_a_map_keeps_only_the_landmarks_its_span_needs(monkeypatch):
    """spanning_landmarks: the pivots of a pivoted Cholesky of the landmarks' Gram
    matrix.  Repeated landmarks and a smooth kernel in two dimensions leave far fewer
    than were drawn, every dropped landmark within the tolerance of the pivots' span;
    a full-rank Gram keeps them all; the map trained on the pivots predicts as the map
    on every landmark does."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-1.0, 1.0, (400, 2))
    kernel = Kernel(2, gamma=0.5)
    gram = landmark_gram(kernel, X)
    assert abs(top_eigenvalue(gram) - np.linalg.eigvalsh(gram)[-1]) < 1e-6 * np.linalg.eigvalsh(gram)[-1]
    keep = spanning_landmarks(gram, 1e-8)
    assert 10 < keep.size < 100 and np.all(np.diff(keep) > 0)
    K_pp = gram[np.ix_(keep, keep)]
    K_ap = gram[:, keep]
    residual = np.diag(gram) - np.einsum("ij,ij->i", K_ap, np.linalg.solve(K_pp, K_ap.T).T)
    assert residual.max() <= 1e-8 * np.linalg.eigvalsh(gram)[-1] * (1 + 1e-6)
    # repeated landmarks: one of each
    twice = np.vstack([X[:30], X[:30]])
    assert spanning_landmarks(landmark_gram(Kernel(2, gamma=50.0), twice)).size == 30
    # a well-separated set is full rank: all kept, in order
    far = np.arange(20.0)[:, None] * np.ones((1, 2))
    np.testing.assert_array_equal(spanning_landmarks(landmark_gram(kernel, far)), np.arange(20))
    # training: fewer points, the same predictions as the map on all landmarks
    y = np.where(np.sin(3 * X[:, 0]) > X[:, 1], 1.0, -1.0)
    import lcoding.methods.invariant as inv
    pruned = train_invariant(y, X, "-t 2 -g 0.5 -s 1 -c 10 -B 1 -X 300 -q")
    with monkeypatch.context() as patch:
        patch.setattr(inv, "psd_kernel", lambda kernel: False)     # no pruning
        full = train_invariant(y, X, "-t 2 -g 0.5 -s 1 -c 10 -B 1 -X 300 -q")
    assert pruned.n_points < 100 and full.n_points == 300
    Xt = rng.uniform(-1.0, 1.0, (2000, 2))
    a = pruned.decision_values(rows_from_dense(Xt))
    b = full.decision_values(rows_from_dense(Xt))
    assert np.mean(np.sign(a) != np.sign(b)) < 0.005
    # the sigmoid's Gram is not positive semi-definite: no pruning
    sig = train_invariant(y, X, "-t 3 -g 0.5 -r -1 -s 1 -B 1 -X 300 -q")
    assert sig.n_points == 300


def _exp_inputs():
    rng = np.random.default_rng(7)
    edges = [0.0, -0.0, 1e-300, -1e-17, -708.0, 708.0, -708.0001, 708.0001, -745.0,
             -746.0, -1e300, 710.0, np.inf, -np.inf, np.nan]
    # RBF arguments (<= 0) over the whole normal range, both signs near 0, and the
    # edges at every position of a 4-lane vector and of the 16-value block
    return np.concatenate([-rng.random(50_001) * 708.0, rng.uniform(-30.0, 30.0, 5_003),
                           edges, rng.uniform(-1, 1, 3), edges])


def test_vectorised_exp_is_libm_within_one_ulp_and_the_same_on_both_paths():
    """_exp.h: the AVX2 path and the scalar one give the same bits (the same model on
    every x86-64 CPU); both within 1 ulp of NumPy's exp where the value is normal,
    and NumPy's value itself at the edges (underflow, overflow, inf, NaN)."""
    from lcoding.methods import _kernels
    x = _exp_inputs()
    scalar, vector = x.copy(), x.copy()
    assert _kernels.exp_array(scalar, 1) == 1
    _kernels.exp_array(vector, 2)
    np.testing.assert_array_equal(scalar, vector)
    with np.errstate(over="ignore"):
        want = np.exp(x)
    normal = np.isfinite(want) & (want >= np.finfo(float).tiny)
    ulps = np.abs(vector[normal] - want[normal]) / np.spacing(want[normal])
    assert ulps.max() <= 1.0
    outside = ~(np.abs(x) <= 708.0)
    np.testing.assert_array_equal(vector[outside], want[outside])
    for n in range(0, 21):                  # every tail length of the 16 / 4 blocks
        part = x[:n].copy()
        _kernels.exp_array(part)
        np.testing.assert_array_equal(part, vector[:n])
    with pytest.raises(ValueError, match="path"):
        _kernels.exp_array(x.copy(), 3)


def test_kernel_pca_map_reproduces_the_gram_matrix():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 5))
    for kernel in (Kernel(2, gamma=0.2), Kernel(1, 3, 0.2, 1.0)):
        P = kernel_pca_map(kernel, X)
        K = kernel.matrix(X, X)
        psi = kernel.matrix(X, X) @ P.T
        np.testing.assert_allclose(psi @ psi.T, K, rtol=0, atol=1e-9 * np.abs(K).max())


def test_tangents_of_a_shifted_image_are_the_finite_difference():
    rng = np.random.default_rng(2)
    image = np.zeros((4, 6))
    image[1:3, 1:4] = rng.uniform(0.1, 1.0, (2, 3))       # background border of zeros
    flat = image.reshape(1, -1)
    right = np.zeros_like(image)
    right[:, 1:] = image[:, :-1]
    up = np.zeros_like(image)
    up[:-1, :] = image[1:, :]
    tangents = image_tangents(flat, 6, 3)
    assert tangents.shape == (2, 1, 24)
    np.testing.assert_array_equal(tangents[0, 0], (right - image).ravel())
    np.testing.assert_array_equal(tangents[1, 0], (up - image).ravel())
    # the tangent of the shifted image is the shifted tangent (translation commutes)
    shifted = translated_images(flat, 6, 1)[0]
    np.testing.assert_array_equal(image_tangents(shifted, 6, 1)[0, 0],
                                  translated_images(tangents[0], 6, 1)[0][0])
    # vacated pixels take the background value
    assert (translated_images(flat, 6, 1, background=-1.0)[0].reshape(4, 6)[:, 0] == -1).all()
    with pytest.raises(ValueError, match="-N 5"):
        image_tangents(flat, 5, 1)
    with pytest.raises(ValueError, match="square"):
        image_tangents(flat, 0, 1)


def test_isvm_kernel_equals_the_explicit_feature_map():
    """Polynomial kernel (g u.v + r)^2 in 3-D has the explicit map
    phi(u) = [g u_a u_b (all a, b), sqrt(2 g r) u, r]; the invariant kernel is
    phi(x)^T C_gamma^-1 phi(y) with feature-space tangents phi(x + dx) - phi(x)."""
    rng = np.random.default_rng(3)
    g, r = 0.7, 1.3
    X = rng.normal(size=(15, 3))
    dX = 0.1 * rng.normal(size=(2, 15, 3))
    Xnew = rng.normal(size=(7, 3))

    def phi(U):
        quad = g * (U[:, :, None] * U[:, None, :]).reshape(U.shape[0], -1)
        return np.hstack([quad, np.sqrt(2 * g * r) * U, np.full((U.shape[0], 1), r)])

    kernel = Kernel(1, 2, g, r)
    np.testing.assert_allclose(phi(X) @ phi(Xnew).T, kernel.matrix(Xnew, X).T, rtol=1e-12)
    T = np.vstack([phi(X + dX[k]) - phi(X) for k in range(2)])
    T /= np.sqrt((T ** 2).sum() / T.shape[0])
    for gamma in (0.0, 0.5, 0.99):
        C = (1 - gamma) * np.eye(T.shape[1]) + gamma * T.T @ T
        Cinv = np.linalg.inv(C)
        tk = TangentKernel(kernel, X, dX, gamma)
        np.testing.assert_allclose(tk.gram(), phi(X) @ Cinv @ phi(X).T, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(tk.cross(Xnew), phi(X) @ Cinv @ phi(Xnew).T, rtol=1e-8,
                                   atol=1e-8)
        # the saved expansion over points z reproduces sum_i beta_i K~(x_i, x)
        beta = rng.normal(size=(15, 2))
        points, coef = tk.expansion(beta)
        np.testing.assert_allclose(kernel.matrix(Xnew, points) @ coef,
                                   tk.cross(Xnew).T @ beta, rtol=1e-8, atol=1e-8)
    # the invariant linear whitening is C_gamma^(-1/2) on tangent rows
    W = invariant_whitening(T, 0.5)
    np.testing.assert_allclose(W @ (0.5 * np.eye(T.shape[1]) + 0.5 * T.T @ T) @ W,
                               np.eye(T.shape[1]), atol=1e-10)


def test_ihkpca_on_virtual_landmarks_is_the_isvm_kernel():
    """-H 4: with the kernel PCA map on the training points and their transformed copies the
    whitened coordinates z reproduce the ISVM kernel exactly, on training and new points; the
    trained model keeps those points and predicts through them."""
    rng = np.random.default_rng(11)
    X = rng.uniform(-1.0, 1.0, (25, 16))
    dX = image_tangents(X, 4, 3, background=-1.0)
    Xnew = rng.uniform(-1.0, 1.0, (7, 16))
    landmarks = virtual_landmarks(X, dX)
    assert landmarks.shape == (75, 16)
    np.testing.assert_array_equal(landmarks[25:50], X + dX[0])
    for kernel in (Kernel(1, 3, 1 / 16, 0.0), Kernel(2, gamma=0.05)):
        for gamma in (0.0, 0.5, 0.99):
            P = ihkpca_map(kernel, X, dX, landmarks, gamma)
            Z, Znew = kernel.matrix(X, landmarks) @ P.T, kernel.matrix(Xnew, landmarks) @ P.T
            tk = TangentKernel(kernel, X, dX, gamma)
            scale = np.abs(tk.gram()).max()
            np.testing.assert_allclose(Z @ Z.T, tk.gram(), rtol=0, atol=1e-9 * scale)
            np.testing.assert_allclose(Z @ Znew.T, tk.cross(Xnew), rtol=0, atol=1e-9 * scale)
    # the training-point map (-H 1) loses the part of the tangents outside span Phi(x_i)
    kernel = Kernel(1, 3, 1 / 16, 0.0)
    P1 = ihkpca_map(kernel, X, dX, X, 0.9)
    Z1 = kernel.matrix(X, X) @ P1.T
    assert np.abs(Z1 @ Z1.T - TangentKernel(kernel, X, dX, 0.9).gram()).max() > 1e-3 * np.abs(
        Z1 @ Z1.T).max()
    y = np.where(X[:, :8].sum(1) > 0, 1.0, -1.0)
    model = train_invariant(y, X, "-t 1 -d 3 -g 0.0625 -s 1 -B 1 -H 4 -Y 0.9 -J 3 -N 4 -q",
                            background=-1.0)
    assert model.method == "ihkpca_virtual" and model.n_points == 75
    assert model.tangents == "both" and model.invariance_gamma == 0.9


@pytest.mark.slow
def test_gamma_zero_isvm_gives_libsvm_decisions():
    svmutil = pytest.importorskip("libsvm.svmutil")
    rng = np.random.default_rng(4)
    X, y = circle_problem(rng, 80)
    Xt, _ = circle_problem(rng, 200)
    tangents = rotation_tangents(X)
    model = train_invariant(y, X, "-t 2 -g 2 -c 10 -s 3 -H 2 -Y 0 -e 0.001 -q", tangents=tangents)
    ours = model.decision_values(rows_from_dense(Xt))[:, 0]
    ref = svmutil.svm_train(y.tolist(), X.tolist(), "-t 2 -g 2 -c 10 -e 0.001 -h 0 -q")
    _, _, dv = svmutil.svm_predict([0] * len(Xt), Xt.tolist(), ref, "-q")
    sign = 1.0 if ref.get_labels()[0] == model.label[0] else -1.0
    theirs = sign * np.asarray(dv)[:, 0]
    np.testing.assert_allclose(ours, theirs, atol=5e-3)
    assert (np.sign(ours) == np.sign(theirs)).mean() > 0.99


def test_gamma_zero_gives_the_plain_models():
    rng = np.random.default_rng(5)
    X, y = circle_problem(rng, 40)
    tangents = rotation_tangents(X)
    rows = rows_from_dense(X)
    base = "-t 1 -d 3 -g 0.5 -r 1 -c 10 -s 3 -B 1 -q"
    plain = train_invariant(y, X, base)
    ihkpca = train_invariant(y, X, base + " -H 1 -Y 0", tangents=tangents)
    np.testing.assert_array_equal(plain.decision_values(rows), ihkpca.decision_values(rows))
    # invariant linear SVM (no -t) at gamma 0 is LIBLINEAR's model
    lin = train_model(y, rows, parse_train_options("-s 3 -c 10 -B 1 -q"))
    inv = train_invariant(y, X, "-s 3 -c 10 -B 1 -H 1 -Y 0 -q", tangents=tangents)
    assert type(inv) is LinearModel
    np.testing.assert_array_equal(inv.w, lin.w)


def test_invariance_grows_with_gamma():
    """|f(x + dx) - f(x)| on the training points shrinks as gamma -> 1 (ISVM and IHKPCA)."""
    rng = np.random.default_rng(6)
    X, y = circle_problem(rng, 30)
    tangents = rotation_tangents(X, 0.05)
    moved = rows_from_dense(X + tangents)
    rows = rows_from_dense(X)
    for method in (1, 2, 4):
        change = []
        for gamma in (0.0, 0.9, 0.999):
            model = train_invariant(y, X, f"-t 2 -g 1 -c 100 -s 3 -B 1 -e 0.001 -H {method} "
                                          f"-Y {gamma} -q", tangents=tangents)
            dec = model.decision_values(rows)[:, 0]
            rel = np.abs(model.decision_values(moved)[:, 0] - dec) / np.abs(dec).mean()
            change.append(rel.mean())
        assert change[2] < change[1] < change[0], (method, change)


@pytest.mark.parametrize("options", [
    "-t 2 -g 0.5 -s 1 -B 1 -q",
    "-t 1 -d 2 -g 0.5 -r 1 -s 3 -H 1 -Y 0.9 -X 25 -q",
    "-t 2 -g 0.5 -s 3 -H 2 -Y 0.9 -q",
    "-t 3 -g 0.1 -r -0.5 -s 1 -H 3 -q",
    "-t 2 -g 0.5 -s 1 -B 1 -H 4 -Y 0.9 -X 20 -q",
    "-s 2 -H 1 -Y 0.5 -B 1 -q",
])
def test_save_load_identical(tmp_path, options):
    rng = np.random.default_rng(7)
    X = rng.uniform(0, 1, (45, 16))
    X[X < 0.4] = 0.0
    y = rng.integers(0, 3, 45).astype(float)
    Xt = rng.uniform(0, 1, (30, 16))
    model = train_invariant(y, X, options + " -J 3 -N 4" if "-H" in options else options)
    path = tmp_path / "model.txt"
    save_model_file(path, model)
    loaded = load_model_file(path)
    assert type(loaded) is type(model)
    rows = rows_from_dense(Xt)
    np.testing.assert_array_equal(loaded.decision_values(rows), model.decision_values(rows))
    assert model_to_text(loaded) == path.read_text()
    # the drop-in predict works on the loaded model
    labels, _, _ = liblinearutil.predict([], Xt, liblinearutil.load_model(str(path)), "-q")
    np.testing.assert_array_equal(labels, model.labels_from_values(model.decision_values(rows)))


@pytest.mark.parametrize("options", ["-s 1 -t 2 -g 2 -B 1 -X 40 -q",
                                     "-s 30 -t 2 -g 2 -B 1 -X 40 -q",
                                     "-s 3 -t 1 -d 2 -g 1 -r 1 -H 1 -Y 0.5 -J 1 -N 2 -q"])
def test_drop_in_train_with_kernel_options(options):
    """``liblinearutil.train`` with ``-t`` / ``-H``: the option string and a ``parameter``
    object give the model ``train_model`` gives (the kernel path rebuilds the linear
    solver's options from a ``parameter``, a TrainParams subclass)."""
    rng = np.random.default_rng(12)
    X, y = circle_problem(rng, 120)
    rows = rows_from_dense(X)
    direct = train_model(y, rows, parse_train_options(options))
    for model in (liblinearutil.train(y, X, options),
                  liblinearutil.train(liblinearutil.problem(y, X), liblinearutil.parameter(options))):
        np.testing.assert_array_equal(model._core.decision_values(rows),
                                      direct.decision_values(rows))
    labels, acc, _ = liblinearutil.predict(y, X, liblinearutil.train(y, X, options), "-q")
    if "-t 2" in options:
        assert acc[0] > 90


def test_model_file_is_read_strictly():
    rng = np.random.default_rng(8)
    X, y = circle_problem(rng, 20)
    text = model_to_text(train_invariant(y, X, "-t 2 -g 1 -s 3 -H 2 -Y 0 -q"))
    assert "coding kernel_expansion" in text
    with pytest.raises(ValueError, match="unknown key"):
        model_from_text(text.replace("method isvm", "method isvm\nsurprise 1"))
    with pytest.raises(ValueError, match="kernel_type"):
        model_from_text(text.replace("kernel_type rbf", "kernel_type spline"))
    with pytest.raises(ValueError, match="truncated"):
        model_from_text(text.rsplit("\n", 3)[0])


def test_landmarks_and_seed():
    rng = np.random.default_rng(9)
    X, y = circle_problem(rng, 300)
    a = train_invariant(y, X, "-t 2 -g 2 -s 3 -B 1 -X 40 -q")
    b = train_invariant(y, X, "-t 2 -g 2 -s 3 -B 1 -X 40 -q")
    c = train_invariant(y, X, "-t 2 -g 2 -s 3 -B 1 -X 40 -S 2 -q")
    assert isinstance(a, KernelExpansionModel) and a.n_points == 40
    np.testing.assert_array_equal(a.points, b.points)
    assert not np.array_equal(a.points, c.points)
    Xt, yt = circle_problem(rng, 2000)
    err = (a.labels_from_values(a.decision_values(rows_from_dense(Xt))) != yt).mean()
    assert err < 0.08


def test_options_and_errors():
    p = parse_train_options("-t 1 -d 3 -g 0.1 -r 1 -H 1 -J 3 -N 16 -Y 0.5 -X 100")
    assert (p.kernel_type, p.degree, p.kernel_gamma, p.coef0) == (1, 3, 0.1, 1.0)
    assert (p.invariance, p.tangents, p.image_width, p.invariance_gamma, p.n_landmarks) == \
        (1, 3, 16, 0.5, 100)
    assert parse_train_options("-s 1").kernel_type == -1     # LIBLINEAR strings keep their meaning
    X = np.random.default_rng(10).uniform(size=(20, 16))
    y = np.arange(20) % 2
    for options, match in [("-t 5", "-t 5"), ("-t 4", "-t 4"), ("-t 2 -Y 1.5 -H 1 -J 1", "-Y"),
                           ("-t 2 -H 2 -Y 0.5", "needs tangent"), ("-t 2 -H 3", "VSV"),
                           ("-t 2 -H 2 -s 2 -J 1", "-s 2"), ("-t 2 -J 1", "only used"),
                           ("-t 2 -H 1 -Y 0.5 -J 1 -N 5", "-N 5"), ("-t 2 -X 0", "-X 0"),
                           ("-t 2 -L 1", "-L 1"), ("-t 1 -d -1", "-d -1"),
                           ("-t 2 -g -1", "-g -1"), ("-t 2 -H 4", "-H 4"),
                           ("-H 4 -J 1", "needs a kernel"), ("-t 2 -H 5", "-H 5")]:
        with pytest.raises(ValueError, match=match):
            liblinearutil.train(y, X, options + " -q")
    with pytest.raises(OptionError, match="-Y"):
        parse_train_options("-Y x")
    with pytest.raises(ValueError, match="tangents: expected shape"):
        train_invariant(y, X, "-t 2 -H 2 -Y 0.5 -q", tangents=np.zeros((3, 16)))


def test_invariant_linear_svm_is_liblinear_on_whitened_rows():
    rng = np.random.default_rng(11)
    X = rng.uniform(0, 1, (60, 16))
    images = X.reshape(60, 4, 4)     # label: left half against right half of the image,
    y = np.where(images[:, :, :2].sum((1, 2)) > images[:, :, 2:].sum((1, 2)), 1.0, -1.0)
    tangents = image_tangents(X, 4, 2)     # which vertical translations keep
    model = train_invariant(y, X, "-s 1 -c 3 -B 1 -H 1 -Y 0.99 -J 2 -N 4 -q")
    W = invariant_whitening(tangents.reshape(-1, 16), 0.99)
    ref = train_model(y, rows_from_dense(X @ W), parse_train_options("-s 1 -c 3 -B 1 -q"))
    rows = rows_from_dense(X)
    np.testing.assert_allclose(model.decision_values(rows),
                               ref.decision_values(rows_from_dense(X @ W)), rtol=1e-10,
                               atol=1e-10)
    # the invariance: decisions move less along the tangents than LIBLINEAR's
    plain = train_model(y, rows, parse_train_options("-s 1 -c 3 -B 1 -q"))
    moved = rows_from_dense(X + tangents[0])

    def relative_change(m):
        dec = m.decision_values(rows)
        return np.abs(m.decision_values(moved) - dec).mean() / np.abs(dec).mean()
    assert relative_change(model) < 0.7 * relative_change(plain)


def test_parameter_search_refuses_invariances():
    """-C searches the plain kernel PCA map (tests/methods/test_local_search.py; every
    linear solver after it: -s 1, 2, 3 warm-started, the others on a cold grid), not
    the invariant machines."""
    with pytest.raises(ValueError, match="-J"):
        liblinearutil.train([1, -1], [[1.0], [2.0]], "-C -s 2 -t 2 -J 1 -N 1 -q")
    with pytest.raises(ValueError, match="invariance"):
        liblinearutil.train([1, -1], [[1.0], [2.0]], "-C -t 2 -H 2 -q")


@pytest.mark.parametrize("solver", [1, 3])
def test_smo_closes_the_duality_gap(solver):
    """Hinge (-s 3) and squared hinge (-s 1) C-SVC with a free intercept: the primal
    objective of the returned expansion equals the dual objective of the SMO alpha."""
    from lcoding.methods import _kernel_svm
    rng = np.random.default_rng(12)
    X, y = circle_problem(rng, 70)
    y[:5] *= -1                                       # label noise: some margin errors
    K = Kernel(2, gamma=1.5).matrix(X, X)
    y_pm = y.astype(np.int8)
    C = 5.0
    n = y.size
    squared = solver == 1
    upper = np.full(n, np.inf if squared else C)
    diag = np.full(n, 0.5 / C if squared else 0.0)
    alpha, grad = np.zeros(n), np.zeros(n)
    _, rho, converged = _kernel_svm.smo_solve(K, y_pm, upper, diag, alpha, grad, 1e-6, 10 ** 7)
    assert converged
    beta = alpha * y
    margin = 1.0 - y * (K @ beta - rho)
    loss = np.maximum(margin, 0.0) ** 2 if squared else np.maximum(margin, 0.0)
    primal = 0.5 * beta @ K @ beta + C * loss.sum()
    dual = alpha.sum() - 0.5 * beta @ K @ beta - 0.5 * (diag * alpha ** 2).sum()
    assert abs(y @ alpha) < 1e-10
    assert abs(primal - dual) < 1e-4 * abs(primal)


def test_the_plain_map_makes_only_its_landmarks_dense(monkeypatch):
    """-H 0 without tangents densifies its landmark rows, not every training row (a
    sparse set of many features would need 8 n d bytes); the same model as from the
    dense rows' landmarks."""
    import lcoding.methods.invariant as inv
    rng = np.random.default_rng(5)
    X = sp.random(400, 300, density=0.02, format="csr", random_state=5)
    y = np.where(rng.random(400) < 0.5, 1.0, -1.0)
    shapes = []
    real = inv.dense_rows

    def recording(rows, n_features):
        shapes.append((rows.n_rows, n_features))
        return real(rows, n_features)

    monkeypatch.setattr(inv, "dense_rows", recording)
    model = train_invariant(y, X, "-t 2 -g 0.5 -s 1 -B 1 -X 50 -q")
    assert shapes and max(s[0] for s in shapes) == 50
    ids, _ = inv.drawn_landmarks(rows_from_sparse(X), parse_train_options("-X 50"), ())
    want = real(rows_from_sparse(X), 300)[ids]
    keep = inv.map_landmarks(Kernel(2, gamma=0.5), want)[0]
    np.testing.assert_array_equal(model.points, keep)



def _two_class_rbf_model(rng, n=600, d=6, options="-s 1 -t 2 -g 3 -X 120 -c 10 -B 1 -q"):
    X = rng.uniform(-1.0, 1.0, (n, d))
    y = np.where(np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2] > 0.1, 1.0, -1.0)
    return train_invariant(y, X, options), X


def _mixed_sums(model, Xt, path=0):
    from lcoding.methods import _kernels
    csr = sp.csr_matrix(Xt)
    VT, v_sq, a, absa = model._rbf32_plan()[:4]
    n = Xt.shape[0]
    f, A, Ae, x_sq = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    taken = _kernels.rbf_sums_mixed(csr.data, csr.indices.astype(np.int32),
                                    csr.indptr.astype(np.int64), VT, v_sq, a, absa,
                                    model.kernel.gamma, f, A, Ae, x_sq, path)
    return f, A, Ae, x_sq, taken


@pytest.mark.parametrize("d, options", [(6, "-s 1 -t 2 -g 3 -X 120 -c 10 -B 1 -q"),
                                        (3, "-s 1 -t 2 -g 8 -X 60 -c 100 -q"),
                                        (12, "-s 2 -t 2 -g 0.5 -X 200 -c 1 -B 1 -q")])
def test_single_precision_exponentials_give_the_double_labels(d, options):
    """A two-class RBF expansion predicts from sums of float exponentials where a
    row's sum is farther from 0 than its bound (_rbf32.h): the labels are the double
    path's, row for row (rows near the boundary, far from every landmark -- their
    kernel values underflow -- and of large norm); both paths of the sums (AVX2,
    scalar) stay within the bound; and the bound leaves only rows near the boundary
    open.  (d = 3: the direct exponents of few features, else dgemm's.)"""
    rng = np.random.default_rng(11 + d)
    model, X = _two_class_rbf_model(rng, d=d, options=options)
    assert model._rbf32_plan() is not None
    Xt = np.vstack([rng.uniform(-1.0, 1.0, (3000, d)), rng.uniform(-40.0, 40.0, (200, d)),
                    rng.normal(0, 1e-3, (50, d))])
    rows = rows_from_dense(Xt)
    values = model.decision_values(rows)[:, 0]
    np.testing.assert_array_equal(model.predict_labels(rows),
                                  model.labels_from_values(values[:, None]))
    offset = model.bias * float(model.w[model.n_points, 0]) if model.bias >= 0 else 0.0
    for path in (0, 1):
        f, A, Ae, x_sq, taken = _mixed_sums(model, Xt, path)
        assert taken in ((1,) if path else (1, 2))
        np.testing.assert_allclose(x_sq, (Xt ** 2).sum(1), rtol=1e-14)
        bound = model._rbf32_bound(A, Ae, x_sq, abs(offset))
        assert np.all(np.abs(f + offset - values) <= bound)
        assert np.median(bound) < 1e-4 * np.median(np.abs(values))     # not vacuous
    # open: rows near the boundary (and, without a bias, the far rows, whose value
    # is exactly 0 and whose label LIBLINEAR's rule gives on the double value)
    assert np.mean(np.abs(values[:3000]) <= bound[:3000]) < 0.02


def test_single_precision_exponentials_apply_only_to_two_class_rbf():
    """No float plan for more than two classes, other kernels, one-class models or
    more than RBF32_MAX_FEATURES features; rows of squared norm past 1e300 take the
    double path and get its labels."""
    rng = np.random.default_rng(12)
    model, X = _two_class_rbf_model(rng, n=200, d=3, options="-s 1 -t 2 -g 1 -X 30 -q")
    far = rows_from_dense(np.array([[0.5, 0.5, 0.5], [1e200, 0.0, 0.0], [0.0, -1e39, 0.0]]))
    np.testing.assert_array_equal(model.predict_labels(far),
                                  model.labels_from_values(model.decision_values(far)))
    y3 = rng.integers(0, 3, 200).astype(float)
    assert train_invariant(y3, X, "-s 1 -t 2 -g 1 -X 30 -q")._rbf32_plan() is None
    y2 = np.where(X[:, 0] > 0, 1.0, -1.0)
    assert train_invariant(y2, X, "-s 1 -t 1 -d 2 -g 1 -X 30 -q")._rbf32_plan() is None
    assert train_invariant(y2, X, "-s 21 -t 2 -g 1 -X 30 -n 0.3 -q")._rbf32_plan() is None
    # a gamma so large that the exponents overflow to -inf: their rows are left open
    # (NaN sums) and the double path labels them; a gamma <= 0 has no plan
    points, w = rng.uniform(-1, 1, (20, 3)), rng.normal(size=(21, 1))
    for gamma, plan in ((1e300, True), (-1.0, False)):
        steep = KernelExpansionModel(1, 2, np.array([1.0, -1.0]), 3, 1.0, Kernel(2, gamma=gamma),
                                     points, w)
        assert (steep._rbf32_plan() is not None) == plan
        rows = rows_from_dense(np.vstack([points[:5], X[:20]]))
        np.testing.assert_array_equal(steep.predict_labels(rows),
                                      steep.labels_from_values(steep.decision_values(rows)))
    wide = rng.uniform(-1, 1, (100, 70))
    assert train_invariant(np.where(wide[:, 0] > 0, 1.0, -1.0), wide,
                           "-s 1 -t 2 -g 0.1 -X 20 -q")._rbf32_plan() is None


def test_single_precision_exponential_within_its_assumed_error():
    """_rbf32.h's exponential (AVX2: degree-7 polynomial; scalar: libm's expf) is
    within the 3 float ulps (relative) the bound assumes, over the exponents it keeps
    ([-87, 0]; below, 0): one point at the origin with weight 1, one feature, gamma
    1, rows x whose exponent -x^2 is exact in float."""
    rng = np.random.default_rng(13)
    e = np.concatenate([-rng.uniform(0, 87.0, 100000), -np.linspace(0, 87.0, 50001),
                        [0.0, -1e-30, -87.0, -87.0001, -90.0]])
    e = e.astype(np.float32).astype(np.float64)
    x = np.sqrt(-e)
    # the exponents as the kernel computes them (||x||^2 - 2 x.v + ||v||^2, v = 0)
    exponents = -(x * x)
    model = KernelExpansionModel(1, 2, np.array([1.0, -1.0]), 1, -1.0, Kernel(2, gamma=1.0),
                                 np.zeros((1, 1)), np.array([[1.0]]))
    for path in (0, 1):
        f, A, Ae, _, _ = _mixed_sums(model, x[:, None], path)
        kept = exponents.astype(np.float32) >= -87.0
        want = np.exp(exponents.astype(np.float32).astype(np.float64)[kept])
        assert np.all(np.abs(f[kept] - want) <= 3 * 2.0 ** -24 * want)
        np.testing.assert_array_equal(f[~kept], 0.0)
        np.testing.assert_array_equal(f, A)
        np.testing.assert_allclose(Ae, A * -exponents, rtol=1e-6)     # float sums


def test_single_precision_plan_is_not_pickled():
    """The mixed-precision plan is a cache: a pickled model leaves it out and
    predicts the same labels after loading."""
    import pickle
    rng = np.random.default_rng(14)
    model, X = _two_class_rbf_model(rng, n=200, d=4, options="-s 1 -t 2 -g 2 -X 40 -q")
    rows = rows_from_dense(X)
    labels = model.predict_labels(rows)
    assert model._rbf32 is not None
    copy = pickle.loads(pickle.dumps(model))
    assert copy._rbf32 is None
    np.testing.assert_array_equal(copy.predict_labels(rows), labels)
