"""Fuzzing the readers with hypothesis: the LIBSVM reader and the model-file loader never
crash or hang the interpreter; they give the right result or the library's own error.

* reader: random bytes; well-formed lines (checked against a reference parse) and
  mutated ones; the same bytes as plain, gzip and bzip2 files (and truncated
  compressed files) -> data, or LibsvmFormatError "<file>:<line>: ..." (a ValueError);
  a damaged compressed stream -> OSError naming the file;
* model loader: a model of every kind lcoding writes, mutated (truncated, numbers
  replaced by nan / inf / huge / negative / other values, lines dropped, duplicated or
  swapped) -> a model whose decision values on a few rows are finite, or
  ModelFileError "F:<line>: ..." (a ValueError) with a line of the file.

Fixed seed (derandomize), bounded example counts, no deadline.  Set
``LCODING_FUZZ_REPORT=path`` to write the number of cases tried per class (JSON).
"""
from __future__ import annotations

import bz2
import collections
import gzip
import io
import json
import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import no_hang as shared_no_hang

# ~15 s of seeded, bounded fuzzing: the full suite (CI) runs it, the quick subset does not
pytestmark = pytest.mark.slow

from lcoding.commonutil import svm_read_problem
from lcoding.io.model_files import ModelFileError, model_to_text
from lcoding.io.reader import LibsvmFormatError, read_libsvm
from lcoding.liblinearutil import train
from lcoding.training import model_from_text

FUZZ = settings(derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
COUNTS: collections.Counter = collections.Counter()
EXAMPLE_SECONDS = 20          # one example taking longer is a hang


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    path = os.environ.get("LCODING_FUZZ_REPORT")
    if path:
        with open(path, "w") as fh:
            json.dump(dict(COUNTS), fh, indent=1, sort_keys=True)


def no_hang(seconds=EXAMPLE_SECONDS):
    return shared_no_hang(seconds)


# ------------------------------------------------------------------------ reader
LINE_ERROR = re.compile(r"^(<stream>|.+):(\d+): \S")


def check_format_error(err, name, n_lines):
    message = str(err)
    match = LINE_ERROR.match(message)
    assert match and (match.group(1) == name), message
    assert 1 <= int(match.group(2)) <= n_lines + 1, message


def read_everything(data: bytes, source, name):
    """Both readers on ``source`` (a path or a BytesIO factory): equal data, or the
    same kind of refusal."""
    n_lines = max(1, len(re.split(rb"\r\n|\r|\n", data)))
    results = []
    for reader in (lambda s: read_libsvm(s), lambda s: svm_read_problem(s),
                   lambda s: svm_read_problem(s, return_scipy=True)):
        src = source() if callable(source) else source
        try:
            results.append(reader(src))
        except LibsvmFormatError as err:
            check_format_error(err, name, n_lines)
            results.append(None)
        except OSError as err:          # a compressed stream that does not decompress
            assert name in str(err) and "decompress" in str(err), str(err)
            results.append(None)
        except ValueError as err:       # the file name promises a compression it lacks
            assert name in str(err) and "magic bytes" in str(err), str(err)
            results.append(None)
    if results[0] is None:
        assert results[1] is None and results[2] is None
        return None
    y, rows = results[0]
    assert np.isfinite(y).all() and np.isfinite(rows.data).all()
    assert rows.indptr[-1] == rows.data.size and (rows.indices >= 0).all()
    y2, x2 = results[2]
    assert np.array_equal(y, y2) and np.array_equal(rows.data, x2.data)
    assert results[1][0] == y.tolist()
    return results[0]


@settings(FUZZ, max_examples=1000)
@given(st.binary(max_size=600))
def test_reader_random_bytes(data):
    COUNTS["reader: random bytes"] += 1
    with no_hang():
        read_everything(data, lambda: io.BytesIO(data), "<stream>")


numbers = st.one_of(
    st.integers(-10 ** 6, 10 ** 6).map(str),
    st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr),
    st.sampled_from(["0", "-0", "+1", "1e-320", "1.7976931348623157e308", ".5", "5.",
                     "1E+3", "0.1000000000000000055511151231257827"]))


@st.composite
def libsvm_lines(draw):
    n = draw(st.integers(0, 8))
    lines, rows = [], []
    for _ in range(n):
        label = draw(numbers)
        idx = sorted(draw(st.sets(st.integers(1, 2 ** 31 - 1), max_size=6)))
        vals = [draw(numbers) for _ in idx]
        sep = draw(st.sampled_from([" ", "\t", "  "]))
        line = label + "".join(f"{sep}{i}:{v}" for i, v in zip(idx, vals))
        if draw(st.booleans()):
            line += draw(st.sampled_from(["", " ", " # comment", "\r"]))
        lines.append(line)
        rows.append((float(label), idx, [float(v) for v in vals]))
    return lines, rows


@settings(FUZZ, max_examples=400)
@given(libsvm_lines())
def test_reader_well_formed_lines(sample):
    COUNTS["reader: well-formed lines"] += 1
    lines, rows = sample
    data = ("\n".join(lines) + "\n").encode()
    with no_hang():
        got = read_everything(data, lambda: io.BytesIO(data), "<stream>")
    assert got is not None
    y, parsed = got
    assert y.tolist() == [r[0] for r in rows]
    csr = parsed.to_csr()
    for i, (_, idx, vals) in enumerate(rows):
        keep = [(j, v) for j, v in zip(idx, vals) if v != 0]
        row = csr.getrow(i)
        assert (row.indices + 1).tolist() == [j for j, _ in keep]
        assert row.data.tolist() == [v for _, v in keep]


MUTATIONS = ["nan", "inf", "-inf", "1e999", "0:1", "-3:1", "2147483648:1", "x", ":", "1:",
             "1:1:1", "qid:3", "\x00", "\xff", "#", "\r", "\n", " ", "1e", "--1", "5:1 5:2",
             "9" * 40, "1_0", "\u0663"]


@settings(FUZZ, max_examples=1000)
@given(libsvm_lines(), st.lists(st.tuples(st.integers(0, 10 ** 6), st.sampled_from(MUTATIONS),
                                          st.booleans()), min_size=1, max_size=4))
def test_reader_mutated_lines(sample, edits):
    COUNTS["reader: mutated lines"] += 1
    text = "\n".join(sample[0]) + "\n"
    for pos, piece, replace in edits:
        pos %= len(text) + 1
        text = text[:pos] + piece + text[pos + (1 if replace else 0):]
    data = text.encode("utf-8", "surrogatepass")
    with no_hang():
        read_everything(data, lambda: io.BytesIO(data), "<stream>")


@settings(FUZZ, max_examples=400)
@given(st.one_of(libsvm_lines().map(lambda s: ("\n".join(s[0]) + "\n").encode()),
                 st.binary(max_size=300)),
       st.sampled_from(["plain", "gz", "bz2"]), st.integers(0, 400), st.booleans())
def test_reader_files(tmp_path_factory, data, kind, cut, truncate):
    """The same bytes as plain, gzip and bzip2 files, the compressed ones also cut short."""
    COUNTS[f"reader: {kind} files"] += 1
    folder = tmp_path_factory.mktemp("f")
    if kind == "gz":
        payload, name = gzip.compress(data), folder / "data.gz"
    elif kind == "bz2":
        payload, name = bz2.compress(data), folder / "data.bz2"
    else:
        payload, name = data, folder / "data.txt"
    if truncate and kind != "plain":
        payload = payload[:cut % max(len(payload), 1)]
    name.write_bytes(payload)
    with no_hang():
        read_everything(data, str(name), str(name))


# ------------------------------------------------------------------ model loader
MODEL_OPTIONS = ["-s 1", "-s 4", "-s 11", "-s 21", "-s 1 -L 1 -A 3 -k 2", "-s 1 -L 4 -A 2",
                 "-s 31 -L 3 -A 3", "-s 40 -k 1 -Q 2", "-s 1 -t 2 -X 20", "-t 2 -H 2",
                 "-s 1 -L 2 -A 3 -k 2 -K 1 -B 1", "-s 30 -L 5 -A 2", "-s 41 -k 1 -Q 1 -l 2 -y 1",
                 "-s 41 -k 2 -Q 1 -y 1 -W 3", "-s 3 -B 1"]


@pytest.fixture(scope="module")
def model_texts():
    rng = np.random.default_rng(3)
    X = np.round(rng.random((40, 4)), 3)
    y3 = 1 + (np.argsort(X[:, 0]) * 3 // 40)
    texts = {}
    for options in MODEL_OPTIONS:
        y = X[:, 1] if options == "-s 11" else y3
        texts[options] = model_to_text(train(y, X, options + " -q").core)
    return texts


PROBE_ROWS = [{}, {1: 0.5, 2: -0.25, 3: 1.0, 4: 0.75}, {1: -1.0, 3: 0.5, 6: 1.0},
              {2: 1.0, 4: -1.0, 5: 0.5}]
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+|nan|inf)(?![\w.])")
REPLACEMENTS = st.one_of(
    st.sampled_from(["nan", "-nan", "inf", "-inf", "1e300", "-1e300", "1e308", "1e101", "1e30",
                     "-1e30", "-1", "-3", "0", "1", "2", "-0", "1000000000000", "2147483648",
                     "4294967297", "0.5", "1e-320", "-2147483649", "abc", ""]),
    st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr),
    st.integers(-10 ** 15, 10 ** 15).map(str))


@st.composite
def mutations(draw):
    kind = draw(st.sampled_from(["truncate", "number", "number", "drop", "duplicate", "swap"]))
    return kind, draw(st.integers(0, 10 ** 6)), draw(st.integers(0, 10 ** 6)), draw(REPLACEMENTS)


def mutate(text: str, kind: str, a: int, b: int, replacement: str) -> str:
    lines = text.split("\n")
    if kind == "truncate":
        return text[:a % (len(text) + 1)]
    if kind == "number":
        found = list(NUMBER.finditer(text))
        if not found:
            return text
        m = found[a % len(found)]
        return text[:m.start()] + replacement + text[m.end():]
    i, j = a % len(lines), b % len(lines)
    if kind == "drop":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    else:
        lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def check_loads_or_refuses(text: str):
    """Load; a model must predict finite values on the probe rows, a refusal must be
    ModelFileError naming a line of the file."""
    n_lines = text.count("\n") + 1
    try:
        model = model_from_text(text, "F")
    except ModelFileError as err:
        match = re.match(r"^F:(\d+): \S", str(err))
        assert match and 1 <= int(match.group(1)) <= n_lines + 1, str(err)
        return False
    from lcoding.core.rows import as_rows
    rows = as_rows(PROBE_ROWS).truncated(model.nr_feature)
    dec = model.decision_values(rows)
    assert dec.shape[0] == len(PROBE_ROWS)
    assert np.isfinite(dec).all(), (dec, text[:400])
    labels = model.labels_from_values(dec)
    assert np.isfinite(labels).all()
    if model.is_probability_model():
        assert np.isfinite(model.probabilities_from_values(dec)).all()
    model_from_text(model_to_text(model), "again")        # what loads, saves and loads
    return True


@pytest.mark.parametrize("options", MODEL_OPTIONS)
def test_unmutated_models_load(model_texts, options):
    assert check_loads_or_refuses(model_texts[options])


@pytest.mark.parametrize("options", MODEL_OPTIONS)
@settings(FUZZ, max_examples=150)
@given(st.lists(mutations(), min_size=1, max_size=3))
def test_mutated_models(model_texts, options, edits):
    COUNTS[f"model file: {options}"] += 1
    text = model_texts[options]
    for edit in edits:
        text = mutate(text, *edit)
    with no_hang():
        loaded = check_loads_or_refuses(text)
    COUNTS["model file: loaded" if loaded else "model file: refused"] += 1
