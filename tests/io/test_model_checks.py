"""The model-file loader applies training's checks and names the line at fault;
sizes in a header are checked against what the file can hold before anything is
allocated."""
from __future__ import annotations

import re
import time
import tracemalloc

import numpy as np
import pytest

from lcoding.io.model_files import ModelFileError, model_to_text
from lcoding.liblinearutil import train
from lcoding.training import load_model_file, model_from_text

rng = np.random.default_rng(7)
X = rng.random((60, 4))
Y2 = np.where(X[:, 0] + 0.3 * X[:, 1] > 0.7, 1, 2)
Y3 = (X[:, 0] * 3).astype(int)


def text_of(options, y=Y2, x=X):
    return model_to_text(train(y, x, options + " -q").core)


def line_no(text, prefix):
    """1-based line number of the first line starting with ``prefix``."""
    for i, line in enumerate(text.split("\n"), 1):
        if line.startswith(prefix):
            return i
    raise AssertionError(f"no line starts with {prefix!r}")


def set_key(text, key, value):
    new, n = re.subn(rf"(?m)^{key} .*$", f"{key} {value}", text)
    assert n == 1, key
    return new


def expect_error(text, line, *words):
    with pytest.raises(ModelFileError) as err:
        model_from_text(text, "F")
    message = str(err.value)
    assert message.startswith(f"F:{line}: "), message
    for word in words:
        assert word in message, message
    return message


# --------------------------------------------------------------- kernel models
@pytest.fixture(scope="module")
def kernel_text():
    return text_of("-t 2 -X 10")


@pytest.mark.parametrize("key,value,word", [
    ("gamma", "-1", "gamma"), ("gamma", "nan", "gamma"), ("gamma", "inf", "gamma"),
    ("gamma", "0", "gamma"), ("degree", "-3", "degree"), ("coef0", "nan", "coef0"),
    ("kernel_type", "precomputed", "kernel_type"), ("invariance_gamma", "1.5", "invariance_gamma"),
    ("method", "magic", "method"), ("tangents", "diagonal", "tangents"),
    ("invariance_gamma", "0.5", "kpca_map"), ("nr_point", "-2", "nr_point"),
])
def test_kernel_model_values_training_never_writes(kernel_text, key, value, word):
    """gamma -1 / nan and degree -3 used to load and predict garbage."""
    text = set_key(kernel_text, key, value)
    expect_error(text, line_no(text, key + " "), word)


def test_kernel_model_solver_type_must_train_its_method():
    text = text_of("-t 2 -H 2 -s 3")
    text = text.replace("solver_type L2R_L1LOSS_SVC_DUAL", "solver_type L2R_LR")
    expect_error(text, 1, "isvm")


# ------------------------------------------------------------ LIBLINEAR header
def test_nr_class_zero_is_refused():
    text = ("solver_type L2R_L2LOSS_SVC_DUAL\nnr_class 0\nlabel\nnr_feature 2\nbias -1\n"
            "w\n")
    expect_error(text, 2, "nr_class 0")


def test_kq_solver_in_liblinear_layout_is_refused():
    text = text_of("-s 1").replace("L2R_L2LOSS_SVC_DUAL", "KQ_METRICS")
    expect_error(text, 1, "KQ_METRICS", "linear")


@pytest.mark.parametrize("bad", ["nan", "-nan", "inf", "-inf", "1e300", "-1e101"])
def test_weights_must_be_finite_and_bounded(bad):
    lines = text_of("-s 1 -B 1").split("\n")
    w = lines.index("w")
    lines[w + 3] = f"{bad} "
    expect_error("\n".join(lines), w + 4, bad, "w block")


def test_duplicate_labels_are_refused():
    text = set_key(text_of("-s 1", Y3), "label", "0 1 1")
    expect_error(text, 3, "distinct")


def test_label_beyond_32_bits_is_refused():
    text = set_key(text_of("-s 1"), "label", "1 4294967297")
    expect_error(text, 3, "32-bit")


def test_one_class_model_takes_no_bias():
    text = text_of("-s 21")
    text = set_key(text, "bias", "1")
    expect_error(text, line_no(text, "bias"), "one-class")


@pytest.mark.parametrize("nr_class", ["1", "3"])
def test_regression_models_have_two_classes(nr_class):
    text = set_key(text_of("-s 11", X[:, 0]), "nr_class", nr_class)
    expect_error(text, 2, "nr_class")


@pytest.mark.parametrize("key,value", [("bias", "nan"), ("bias", "1e200"), ("rho", "inf")])
def test_header_numbers_are_finite(key, value):
    text = text_of("-s 21") if key == "rho" else text_of("-s 1")
    text = set_key(text, key, value)
    expect_error(text, line_no(text, key + " "), key)


# ---------------------------------------------------------- locally linear models
@pytest.fixture(scope="module")
def local_text():
    return text_of("-s 1 -L 2 -A 3 -k 2")


@pytest.mark.parametrize("key,value,word", [
    ("nr_neighbor", "0", "nr_neighbor"), ("nr_neighbor", "4", "nr_neighbor"),
    ("coding_param", "nan", "coding_param"), ("coding_param", "-1", "coding_param"),
    ("nr_anchor", "0", "nr_anchor"), ("nr_dim", "5", "nr_dim"),
    ("kernel_map", "sigmoid", "kernel_map"),
])
def test_local_model_values_training_never_writes(local_text, key, value, word):
    text = set_key(local_text, key, value)
    expect_error(text, line_no(text, key + " "), word)


def test_local_model_solver_type(local_text):
    text = local_text.replace("L2R_L2LOSS_SVC_DUAL", "L2R_LR")
    expect_error(text, 1, "locally linear")


def test_local_model_anchor_values(local_text):
    lines = local_text.split("\n")
    a = lines.index("anchors")
    lines[a + 2] = "0.5 nan 0.1 0.2 "
    expect_error("\n".join(lines), a + 3, "nan")


def small_allocation(fn):
    """Run fn; return (its exception, peak traced bytes, seconds)."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        fn()
    except Exception as err:        # noqa: BLE001 - returned to the caller
        caught = err
    else:
        caught = None
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return caught, peak, seconds


def test_huge_kernel_map_order_is_refused_before_allocating():
    """kernel_map_order 10**12 used to ask for 7 TiB (the map's spectrum table)."""
    text = text_of("-s 1 -L 2 -A 3 -k 2 -K 1")
    text = set_key(set_key(text, "kernel_map_order", str(10 ** 12)), "nr_dim", "0")
    text = set_key(text, "nr_feature", "0")
    err, peak, seconds = small_allocation(lambda: model_from_text(text, "F"))
    assert isinstance(err, ModelFileError) and "kernel_map_order" in str(err)
    assert str(err).startswith(f"F:{line_no(text, 'kernel_map_order')}:")
    assert peak < 5e6 and seconds < 1.0


@pytest.mark.parametrize("kind,key,value", [
    ("linear", "nr_feature", 10 ** 12),
    ("linear", "nr_class", 10 ** 12),
    ("local", "nr_anchor", 10 ** 12),
    ("local", "nr_feature", 10 ** 9),
    ("kernel", "nr_point", 10 ** 12),
    ("occ", "nr_plane", 10 ** 12),
    ("kq", "nr_restart", 10 ** 12),
])
def test_header_sizes_beyond_the_file_are_refused_cheaply(kind, key, value):
    options = {"linear": "-s 1", "local": "-s 1 -L 2 -A 3 -k 2", "kernel": "-t 2 -X 5",
               "occ": "-s 1 -L 4 -A 2", "kq": "-s 40 -k 1 -Q 2"}[kind]
    text = set_key(text_of(options), key, value)
    if kind == "local" and key == "nr_anchor":       # no numbers per anchor at all
        text = set_key(set_key(text, "nr_dim", "0"), "nr_feature", "0")
    err, peak, seconds = small_allocation(lambda: model_from_text(text, "F"))
    assert isinstance(err, ModelFileError), err
    assert peak < 5e6 and seconds < 1.0, (peak, seconds)
    if key in ("nr_anchor", "nr_point", "nr_plane", "nr_restart", "nr_feature"):
        assert str(err).startswith(f"F:{line_no(text, key + ' ')}:") or key == "nr_feature" \
            and kind == "local", str(err)


def test_occ_checks():
    text = text_of("-s 1 -L 4 -A 2")
    expect_error(set_key(text, "nr_plane", "5"), line_no(text, "nr_plane"), "rank bound")
    lines = text.split("\n")
    s = lines.index("sigma")
    lines[s + 1] = "0 "
    expect_error("\n".join(lines), s + 1, "sigma")
    bad = text.replace("L2R_L2LOSS_SVC_DUAL", "L2R_L1LOSS_SVC_SGD")
    expect_error(bad, 1, "LIB_LLSVM")


def test_kq_checks():
    text = text_of("-s 40 -k 1 -Q 2")
    expect_error(set_key(text, "nr_dim", "0"), line_no(text, "nr_dim"), "nr_dim")
    expect_error(set_key(text, "unit_sphere", "2"), line_no(text, "unit_sphere"), "unit_sphere")
    expect_error(text.replace("KQ_METRICS\n", "KQ_FLATS\n", 1), 1, "coding")
    expect_error(set_key(text, "nr_feature", "0"), 4, "nr_feature 0")
    # affine flats of several restarts record how they combine them
    flats = text_of("-s 41 -k 1 -Q 2 -y 1 -W 2")
    assert "\nrestart_rule mean\n" in flats
    expect_error(set_key(flats, "restart_rule", "median"), line_no(flats, "restart_rule"),
                 "restart_rule")


def test_every_kind_still_loads_from_a_file(tmp_path):
    for options in ("-s 1", "-s 4", "-s 11", "-s 21", "-s 1 -L 1 -A 3 -k 2", "-s 1 -L 4 -A 2",
                    "-s 31 -L 3 -A 3", "-s 40 -k 1 -Q 2", "-s 1 -t 2 -X 20", "-t 2 -H 2"):
        y = X[:, 0] if options == "-s 11" else Y2
        path = tmp_path / "m.model"
        path.write_text(text_of(options, y))
        model = load_model_file(path)
        assert model_to_text(model) == path.read_text()
