"""docs/options.md is generated from the option table and must not go stale."""
from pathlib import Path

import pytest

from lcoding.core.options import SolverType, TRAIN_OPTIONS, options_markdown, train_usage

DOC = Path(__file__).resolve().parents[2] / "docs" / "options.md"


def test_options_doc_is_current():
    if not DOC.exists():
        pytest.skip("docs/options.md not in this tree")
    assert DOC.read_text() == options_markdown(), \
        "regenerate with: python -m lcoding.core.options > docs/options.md"


def test_every_option_is_in_the_usage_text():
    usage = train_usage()
    for opt in TRAIN_OPTIONS:
        assert f"\n{opt.flag} " in usage or usage.startswith(opt.flag)


def test_every_solver_is_in_the_usage_text():
    # the -s list of the usage text is written by hand per group: none may be left out
    usage = train_usage()
    for st in SolverType:
        assert f"\t{int(st):2d} -- " in usage, st.name


def test_option_letters_are_unique():
    flags = [opt.flag for opt in TRAIN_OPTIONS]
    assert len(flags) == len(set(flags))
