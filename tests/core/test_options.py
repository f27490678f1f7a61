"""The option table: domains checked whatever the method, ignored options reported,
typed per-method parameters filled from the same letters."""
from __future__ import annotations

import re

import numpy as np
import pytest

from lcoding.core.options import (OPTION_GROUPS, TRAIN_OPTIONS, OptionError, TrainParams,
                                  check_parameter, parse_train_options, train_usage)
from lcoding.core.params import (AnchorInit, CodingType, KernelType, KQParams, LLCJointParams,
                                 LLSVMParams, OCCClassifier, OCCParams)
from lcoding.liblinearutil import train
from lcoding.training import METHODS, ignored_options, select_method

X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.2, 0.1]] * 5)
Y = [1, 2, 1, 2] * 5


@pytest.mark.parametrize("options,flag", [
    ("-Z 3", "-Z"), ("-x 5", "-x"), ("-L 9", "-L"), ("-K 4", "-K"), ("-a 7", "-a"),
    ("-m 0", "-m"), ("-A 0", "-A"), ("-k 0", "-k"), ("-O 1000", "-O"), ("-Y 1", "-Y"),
    ("-t 5", "-t"), ("-H 5", "-H"), ("-J 4", "-J"), ("-g -1", "-g"), ("-d -3", "-d"),
    ("-D 0", "-D"), ("-W 0", "-W"), ("-y 2", "-y"), ("-G 3", "-G"), ("-F 3", "-F"),
    ("-j 3", "-j"), ("-T -1", "-T"), ("-P 0", "-P"), ("-f -1", "-f"), ("-X 0", "-X"),
    ("-u inf", "-u"), ("-U inf", "-U"), ("-z -1", "-z"), ("-T inf", "-T"),
])
def test_a_value_outside_its_domain_raises_whatever_the_method(options, flag):
    # a plain -s 1 model does not read these options: they must still be possible values
    with pytest.raises(OptionError, match=f"option {flag} .*must be"):
        train(Y, X, "-s 1 -q " + options)
    with pytest.raises(OptionError, match=f"option {flag} "):
        parse_train_options(options)


def test_programmatic_parameters_are_checked_too():
    params = TrainParams(kq_sphere=3)
    with pytest.raises(OptionError, match="option -Z 3: must be one of 0, 1"):
        check_parameter(params)
    check_parameter(TrainParams())            # the defaults (and -t's "not given") pass


def test_every_lcoding_option_has_a_domain_and_a_group():
    groups = {g for g, _ in OPTION_GROUPS}
    for opt in TRAIN_OPTIONS:
        assert opt.group in groups, opt.flag
        if opt.origin != "LIBLINEAR":
            assert opt.domain is not None, opt.flag


def test_ignored_options_are_accepted_and_listed(capsys):
    m = train(Y, X, "-s 1 -Z 1 -A 10")          # LIBLINEAR's rule: accepted
    assert m.get_nr_class() == 2
    out = capsys.readouterr().out
    assert "linear: ignoring options -Z -A (not used by this method)" in out
    train(Y, X, "-s 1 -L 1 -A 4 -k 2 -Q 3 -q")   # quiet: nothing
    assert "ignoring" not in capsys.readouterr().out
    # LIBLINEAR's own options are never reported (its scripts' output is unchanged)
    train(Y, X, "-s 1 -n 0.3 -p 0.2")
    assert "ignoring" not in capsys.readouterr().out


def test_each_method_reads_only_known_letters():
    flags = {opt.flag for opt in TRAIN_OPTIONS}
    for method in METHODS:
        assert set(method.options) <= flags, method.name
    assert ignored_options(select_method(parse_train_options("-s 40 -k 2 -Q 3 -A 5")),
                           parse_train_options("-s 40 -k 2 -Q 3 -A 5")) == ["-A"]


def test_router_picks_the_method_from_the_options():
    cases = {"-s 1": "linear", "-s 30": "linear", "-s 1 -L 1": "llsvm", "-s 4 -L 2": "llsvm",
             "-s 1 -L 4": "occ", "-s 30 -L 5": "occ", "-s 31 -L 3": "llc_jo",
             "-s 33 -L 2": "llc_jo", "-s 40": "kq", "-s 41": "kq", "-t 2": "invariant",
             "-H 2 -t 2": "invariant", "-J 1 -H 1": "invariant"}
    for options, name in cases.items():
        assert select_method(parse_train_options(options)).name == name, options
    for method in METHODS:
        assert method.params.from_train_params(parse_train_options("")) is not None


def test_typed_parameters_give_each_u_its_own_name():
    p = LLSVMParams.from_train_params(parse_train_options("-L 1 -u 0.5 -A 20 -a 2"))
    assert p.coding is CodingType.INVERSE_DISTANCE and p.power == 0.5 and p.beta is None
    assert p.anchors.n_anchors == 20 and p.anchors.init is AnchorInit.KMEANS_PER_CLASS
    p = LLSVMParams.from_train_params(parse_train_options("-L 2 -u 0.05"))
    assert p.beta == 0.05 and p.power is None and p.coding_param == 0.05
    p = LLSVMParams.from_train_params(parse_train_options("-L 6 -u 3"))
    assert p.ridge == 3.0
    p = LLCJointParams.from_train_params(parse_train_options("-s 31 -L 3 -u 5 -f 0"))
    assert p.mu == 5.0 and p.anchor_lr == 0.0
    p = OCCParams.from_train_params(parse_train_options("-L 5 -u 2 -A 7"))
    assert p.classifier is OCCClassifier.LINEAR_ON_ALL_CODES and p.n_planes == 7
    with pytest.raises(ValueError, match="-u 0.5 with -L 4"):
        OCCParams.from_train_params(parse_train_options("-L 4 -u 0.5"))
    p = KQParams.from_train_params(parse_train_options("-s 40 -k 3 -Q 7 -Z 0"))
    assert (p.clusters_per_class, p.q, p.sphere) == (3, 7, False)
    from lcoding.core.params import KernelParams
    assert KernelParams.from_train_params(parse_train_options("-t 2")).kernel_type \
        is KernelType.RBF
    assert KernelParams.from_train_params(parse_train_options("")).kernel_type is None


def test_usage_is_grouped_by_method():
    text = train_usage()
    assert text.startswith("Usage: lcoding-train")
    positions = [text.index(f"options {heading}:") for _, heading in OPTION_GROUPS]
    assert positions == sorted(positions)
    assert "-L coding : local coding: 0 none" in text and "6 LLC reconstruction" in text


@pytest.mark.parametrize("options,name", [
    ("-s 1", "linear"), ("-s 4", "linear"), ("-s 1 -L 1 -A 3 -k 2", "llsvm"),
    ("-s 1 -L 4 -A 2", "occ"), ("-s 31 -L 3 -A 3 -E 2", "llc_jo"),
    ("-s 40 -k 1 -Q 1 -E 1", "kq"), ("-s 1 -t 2 -X 10", "invariant"),
])
def test_a_model_file_names_its_method(tmp_path, options, name):
    from lcoding.liblinearutil import save_model
    from lcoding.training import load_model_file, method_of
    path = tmp_path / "m"
    save_model(str(path), train(Y, X, options + " -q"))
    assert method_of(load_model_file(path)).name == name


@pytest.mark.parametrize("token", ["-wi", "-w", "-wx", "-w1.5"])
def test_weight_options_need_an_integer_label(token):
    """-w<label> weight: the option table's "-wi" names the family; a literal -wi (label
    "i") used to set the weights to a number and fail later with a TypeError."""
    with pytest.raises(ValueError, match=rf"option {re.escape(token)}: class label .* is not "
                                         rf"an integer"):
        check_parameter(parse_train_options(f"{token} 0"))
