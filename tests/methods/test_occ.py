"""Anchor planes / orthogonal coordinate coding (-L 4 G-OCC, -L 5 C-OCC; lcoding/occ.py)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import flush_c_stdout, objectives_from_output, squared_hinge_primal
from lcoding.core.rows import as_rows
from lcoding.io.model_files import save_model_file as save_model
from lcoding.training import load_model_file as load_model
from lcoding.methods.occ import OCCModel, occ_basis, occ_codes, occ_codes_multi
from lcoding.core.options import parse_train_options
from lcoding.training import train_model


def _toy(rng, n=90, d=7, n_class=3):
    X = sp.random(n, d, density=0.6, random_state=4, format="csr") * 2.0
    X = X + sp.csr_matrix(np.abs(rng.normal(size=(n, 1))) @ np.ones((1, d)) * 0.3)
    y = (np.asarray(X @ rng.normal(size=d)).ravel() * 3).astype(int) % n_class
    return sp.csr_matrix(X), y.astype(np.float64)


@pytest.mark.parametrize("shape", [(50, 12), (12, 30)])
def test_basis_matches_numpy_svd(shape, rng):
    X = sp.random(*shape, density=0.5, random_state=7, format="csr")
    M = 5
    V, s = occ_basis(as_rows(X), M, seed=3)
    _, s_ref, Vt = np.linalg.svd(X.toarray(), full_matrices=False)   # uncentred
    np.testing.assert_allclose(s, s_ref[:M], rtol=1e-10)
    signs = np.sign(np.sum(V * Vt[:M], axis=1))
    np.testing.assert_allclose(V * signs[:, None], Vt[:M], atol=1e-9)


def test_codes_match_reference_and_unit_l1(rng):
    X, _ = _toy(rng)
    V, s = occ_basis(as_rows(X), 4)
    for batch in (7, 2048):
        G = occ_codes(as_rows(X), V, s, batch=batch)
        ref = (X.toarray() @ V.T) / s
        ref /= np.abs(ref).sum(axis=1, keepdims=True)
        np.testing.assert_allclose(G, ref, atol=1e-12)
        np.testing.assert_allclose(np.abs(G).sum(axis=1), 1.0, atol=1e-12)


def test_rank_error_names_option(rng):
    X = sp.csr_matrix(np.outer(np.arange(1, 9), np.ones(5)))   # rank 1
    with pytest.raises(ValueError, match="-A 3: the data has fewer than 3 non-zero"):
        occ_basis(as_rows(X), 3)
    # all-zero rows have no plane at all: "use fewer planes" would not help
    with pytest.raises(ValueError, match="-A 1: the rows the basis is learned on are all zero"):
        occ_basis(as_rows(sp.csr_matrix((8, 5))), 1)


@pytest.mark.parametrize("loss,u", [("3", 1), ("1", 1), ("3", 3)])
def test_lib_llsvm_matches_liblinear_on_materialised_features(loss, u, rng, capfd):
    liblinearutil = pytest.importorskip("liblinear.liblinearutil")
    X, y = _toy(rng)
    yb = np.where(y == 0, 1.0, -1.0)
    model = train_model(yb, as_rows(X),
                        parse_train_options(f"-s {loss} -L 4 -A 3 -B 1 -c 2 -e 1e-6 -u {u}"))
    ours = objectives_from_output(capfd.readouterr().out)
    G = occ_codes(as_rows(X), *model.coding(0))
    Xd = X.toarray()
    if u == 3:      # a bias per plane: gamma (x) [x; 1]
        Xd = np.hstack([Xd, np.ones((X.shape[0], 1))])
    Z = (G[:, :, None] * Xd[:, None, :]).reshape(X.shape[0], -1)
    ref_model = liblinearutil.train(yb, sp.csr_matrix(Z), f"-s {loss} -B 1 -c 2 -e 1e-6")
    flush_c_stdout()
    ref = objectives_from_output(capfd.readouterr().out)
    assert len(ours) == len(ref) == 1
    if loss == "3":
        # the dual is minimised: ours within 1e-4 relative of LIBLINEAR's, or lower
        assert ours[0] <= ref[0] + 1e-4 * abs(ref[0]), (ours, ref)
    else:
        # -s 1 on these badly scaled features: LIBLINEAR's dual CD stops at its pass
        # cap, ours hands the stalled dual over to Newton -- compare the primal objective
        # 1/2 |w|^2 + C sum max(0, 1 - y f)^2 (bias regularised in both)
        w_ref, b_ref = ref_model.get_decfun()
        w_ref = np.append(np.asarray(w_ref), b_ref)
        f_ref = Z @ w_ref[:-1] + b_ref
        ours_primal = squared_hinge_primal(model.w[:, 0], model.decision_values(as_rows(X))[:, 0],
                                           np.where(yb == model.label[0], 1.0, -1.0), 2.0)
        ref_primal = squared_hinge_primal(w_ref, f_ref,
                                          np.where(yb == ref_model.get_labels()[0], 1.0, -1.0), 2.0)
        assert ours_primal <= ref_primal * (1 + 1e-4), (ours_primal, ref_primal)
    # same decision function
    dec = model.decision_values(as_rows(X))[:, 0]
    ref_pred = np.array(liblinearutil.predict(yb, sp.csr_matrix(Z), ref_model, "-q")[0])
    assert (np.where(dec > 0, 1.0, -1.0) == ref_pred).mean() >= 0.97


@pytest.mark.parametrize("options", ["-s 3 -L 4 -A 3", "-s 1 -L 5 -A 3 -B 1",
                                     "-s 30 -L 4 -A 4 -B 1 -E 3", "-s 30 -L 5 -A 2",
                                     "-s 3 -L 5 -A 4 -u 0 -B 1", "-s 1 -L 4 -A 2 -u 0",
                                     "-s 1 -L 5 -A 3 -u 2 -B 1", "-s 1 -L 5 -A 2 -u 2",
                                     "-s 3 -L 5 -A 3 -u 3 -B 1", "-s 2 -L 4 -A 3 -u 0 -B 1",
                                     "-s 1 -L 4 -A 3 -B 1 -K 3", "-s 3 -L 5 -A 3 -K 1 -O 2",
                                     "-s 30 -L 5 -A 3 -B 1 -E 2 -K 2"])
def test_save_load_identical(options, rng, tmp_path):
    X, y = _toy(rng)
    rows = as_rows(X)
    model = train_model(y, rows, parse_train_options(options + " -q"))
    assert isinstance(model, OCCModel)
    path = tmp_path / "m.model"
    save_model(str(path), model)
    back = load_model(str(path))
    assert type(back) is OCCModel and back.classifier == model.classifier
    np.testing.assert_array_equal(back.planes, model.planes)
    np.testing.assert_array_equal(back.sigma, model.sigma)
    np.testing.assert_array_equal(back.w, model.w)
    np.testing.assert_array_equal(back.decision_values(rows), model.decision_values(rows))
    save_model(str(tmp_path / "again.model"), back)
    assert (tmp_path / "again.model").read_text() == path.read_text()


@pytest.mark.parametrize("options", ["-s 1 -L 4 -A 3 -B 1", "-s 3 -L 5 -A 3 -u 3 -B 1",
                                     "-s 30 -L 5 -A 3 -B 1 -E 2", "-s 1 -L 5 -A 3 -u 2"])
@pytest.mark.parametrize("kmap", ["-K 3", "-K 1 -O 2", "-K 2"])
def test_kernel_map_equals_training_on_mapped_rows(options, kmap, rng):
    """-K with OCC (the locally additive form): the same planes, weights and decision
    values as training without -K on the explicitly mapped rows; the map is stored
    in the model file and applied at prediction."""
    from lcoding.local.coding import KernelMap
    X, y = _toy(rng)
    p = parse_train_options(f"{options} {kmap} -q")
    km = KernelMap(p.kernel_map, p.kernel_map_order)
    mapped = km(as_rows(X))
    with_map = train_model(y, as_rows(X), p)
    explicit = train_model(y, mapped, parse_train_options(options + " -q"))
    assert with_map.nr_feature == X.shape[1] and with_map.dim == mapped.n_features
    np.testing.assert_array_equal(with_map.planes, explicit.planes)
    np.testing.assert_array_equal(with_map.w, explicit.w)
    np.testing.assert_array_equal(with_map.decision_values(as_rows(X)),
                                  explicit.decision_values(mapped))


def test_kernel_map_file_is_checked(rng, tmp_path):
    from lcoding.io.model_files import model_to_text
    from lcoding.training import model_from_text
    X, y = _toy(rng)
    text = model_to_text(train_model(y, as_rows(X), parse_train_options(
        "-s 1 -L 4 -A 2 -B 1 -K 1 -O 1 -q")))
    assert "kernel_map intersection" in text and f"nr_dim {3 * X.shape[1]}" in text
    with pytest.raises(ValueError, match="kernel_map"):
        model_from_text(text.replace("kernel_map intersection", "kernel_map spline"))
    with pytest.raises(ValueError, match="nr_dim"):
        model_from_text(text.replace("kernel_map_order 1", "kernel_map_order 2"))


def test_c_occ_uses_class_bases(rng):
    X, y = _toy(rng)
    model = train_model(y, as_rows(X), parse_train_options("-s 3 -L 5 -A 3 -q"))
    assert model.planes.shape == (9, X.shape[1])
    sub = as_rows(X[np.flatnonzero(y == model.label[1])])
    V, s = occ_basis(sub, 3, seed=0)
    Vm, sm = model.coding(1)
    np.testing.assert_allclose(sm, s, rtol=1e-10)
    np.testing.assert_allclose(np.abs(np.sum(Vm * V, axis=1)), 1.0, atol=1e-9)


@pytest.mark.parametrize("options", ["-s 3 -L 4 -A 3 -B 1", "-s 30 -L 4 -A 3 -B 1 -E 2",
                                     "-s 3 -L 4 -A 3 -u 0 -B 1", "-s 1 -L 5 -A 3 -B 1",
                                     "-s 30 -L 5 -A 3 -B 1 -E 2", "-s 3 -L 5 -A 3 -u 0 -B 1",
                                     "-s 3 -L 5 -A 2", "-s 1 -L 5 -A 3 -u 2 -B 1",
                                     "-s 1 -L 4 -A 3 -u 3 -B 1", "-s 3 -L 5 -A 3 -u 3 -B 0.5"])
def test_decision_values_follow_the_formulas(options, rng):
    # the batched prediction (all codings and classes in one product per batch)
    # against the per-class formulas of each classifier, for several batch sizes
    X, y = _toy(rng)
    rows = as_rows(X)
    Xd = X.toarray()
    m = train_model(y, rows, parse_train_options(options + " -q"))
    d, M = X.shape[1], m.n_planes
    ref = np.empty((X.shape[0], m.nr_w))
    all_codes = []
    for c in range(m.nr_w):
        V, s = m.coding(c)
        G = (Xd @ V.T) / s
        all_codes.append(G / np.abs(G).sum(axis=1, keepdims=True))
    all_codes = np.hstack(all_codes)
    for c in range(m.nr_w):
        V, s = m.coding(c)
        G = (Xd @ V.T) / s
        G /= np.abs(G).sum(axis=1, keepdims=True)
        w = m.w[:, c]
        b = w[-1] if m.bias >= 0 else 0.0
        if m.classifier == "LIB_LLSVM":
            ref[:, c] = np.einsum("ij,ij->i", G, Xd @ w[:M * d].reshape(M, d).T) + b
        elif m.classifier == "PEG_LLSVM":
            Wp = w.reshape(M, d + 1)
            ref[:, c] = np.einsum("ij,ij->i", G, Xd @ Wp[:, :d].T + Wp[:, d])
        elif m.classifier == "LIB_LLSVM_PB":
            assert w.shape[0] == M * (d + 1) + 1
            Wp = w[:-1].reshape(M, d + 1)
            ref[:, c] = np.einsum("ij,ij->i", G, Xd @ Wp[:, :d].T + Wp[:, d] * m.bias) + b * m.bias
        elif m.classifier == "LINEAR_ALL_CODES":
            assert w.shape[0] == m.nr_w * M + 1
            ref[:, c] = all_codes @ w[:-1] + b
        else:
            ref[:, c] = G @ w[:M] + b
    for batch in (5, 2048):
        np.testing.assert_allclose(m.decision_values(rows, batch=batch), ref, atol=1e-10)


def test_stacked_codes_equal_per_coding_codes(rng):
    X, y = _toy(rng)
    rows = as_rows(X)
    m = train_model(y, rows, parse_train_options("-s 3 -L 5 -A 3 -q"))
    G = occ_codes_multi(rows, m.planes, m.sigma, 3, batch=11)
    ref = np.hstack([occ_codes(rows, *m.coding(c)) for c in range(m.nr_w)])
    np.testing.assert_allclose(G, ref, atol=1e-13)


def test_bad_options(rng):
    X, y = _toy(rng)
    with pytest.raises(ValueError, match="-u"):
        train_model(y, as_rows(X), parse_train_options("-s 3 -L 4 -A 2 -u 0.5 -q"))
    with pytest.raises(ValueError, match="-u 2"):
        train_model(y, as_rows(X), parse_train_options("-s 3 -L 4 -A 2 -u 2 -q"))
    with pytest.raises(ValueError, match="-u 3"):
        train_model(y, as_rows(X), parse_train_options("-s 30 -L 4 -A 2 -u 3 -B 1 -q"))
    with pytest.raises(ValueError, match="-s 2"):
        train_model(y, as_rows(X), parse_train_options("-s 2 -L 4 -A 2 -q"))
    with pytest.raises(ValueError, match="-s 0"):
        train_model(y, as_rows(X), parse_train_options("-s 0 -L 4 -A 2 -q"))
    with pytest.raises(ValueError, match="-A 50"):
        train_model(y, as_rows(X), parse_train_options("-s 3 -L 4 -A 50 -q"))


@pytest.mark.slow
def test_usps_g_occ_lib_llsvm(shared_data):
    y, X, ty, tX = shared_data("usps")
    m = train_model(y, as_rows(X), parse_train_options("-s 3 -L 4 -A 10 -B 1 -q"))
    err = (m.labels_from_values(m.decision_values(as_rows(tX))) != ty).mean()
    assert err < 0.07
