"""Model files: LIBLINEAR's text format, read strictly and written atomically.

Layout (``docs/model_format.md`` is the normative description)::

    solver_type L2R_L2LOSS_SVC_DUAL      LIBLINEAR's keys, in LIBLINEAR's order
    nr_class 3
    label 1 2 3                          classification models only
    nr_feature 22
    bias 1                               %.17g
    rho 0.5                              one-class models only
    lcoding_format 1                     locally linear models only: lcoding's keys
    coding ...                             and named blocks (anchors, planes, ...)
    w                                    last block: w_size rows of nr_w values
    0.12 -3.4 ...                        each "%.17g " (LIBLINEAR's style)

A linear model written here is byte-identical to LIBLINEAR's ``save_model`` output;
every file LIBLINEAR writes loads.  Loading is a parser for numbers and known
keywords only: it never evaluates or unpickles anything, and every defect raises
:class:`ModelFileError` naming the file and line.  Saving writes a temporary file
in the target folder and renames it over the target, so a crash or a full disk
never leaves a half-written model behind.
"""
from __future__ import annotations

import os
import re

import numpy as np

from lcoding.core.model import (LINEAR_SOLVER_TYPES, VALUE_LIMIT, LinearModel, Model,
                                ModelFieldError, check_header, check_number)
from lcoding.core.options import REGRESSION_SOLVERS, SolverType
from lcoding.io.atomic import write_text_atomic

_LIBLINEAR_KEYS = ("solver_type", "nr_class", "label", "nr_feature", "bias", "rho")


class ModelFileError(ValueError):
    """A model file that cannot be read: the message names the file and line."""


def _fmt(x: float) -> str:
    return "%.17g" % x


def _solver_names():
    return {st.name: int(st) for st in SolverType}


def _w_lines(w: np.ndarray) -> str:
    # LIBLINEAR prints every value as "%.17g " and ends each row with "\n"
    if w.size == 0:
        return "\n" * w.shape[0]
    row_fmt = "%.17g " * w.shape[1]
    return "".join(row_fmt % tuple(row) + "\n" for row in w.tolist())


def model_to_text(model: Model) -> str:
    """The file content of ``model``."""
    parts = [f"solver_type {SolverType(model.solver_type).name}\n",
             f"nr_class {model.nr_class}\n"]
    if model.label is not None and model.solver_type not in REGRESSION_SOLVERS \
            and model.solver_type != SolverType.ONECLASS_SVM:
        parts.append("label" + "".join(f" {int(v)}" for v in model.label) + "\n")
    parts.append(f"nr_feature {model.nr_feature}\n")
    parts.append(f"bias {_fmt(model.bias)}\n")
    if model.solver_type == SolverType.ONECLASS_SVM:
        parts.append(f"rho {_fmt(model.rho)}\n")
    if isinstance(model, LinearModel) and type(model) is LinearModel:
        parts.append("w\n")
        parts.append(_w_lines(model.w))
        return "".join(parts)
    for key, value in model.file_header():
        parts.append(f"{key} {value}\n")
    for name, block in model.file_blocks():
        block = np.asarray(block, dtype=np.float64)
        if block.ndim != 2:
            raise ValueError(f"model block {name!r} must be 2-D, got shape {block.shape}")
        parts.append(f"{name}\n")
        parts.append(_w_lines(block))
    return "".join(parts)


def save_model_file(path, model: Model) -> None:
    """Write ``model`` to ``path`` atomically (:func:`lcoding.io.atomic.write_text_atomic`:
    temporary file + rename; permissions as ``open()`` gives them, or those of the file
    replaced; a symbolic link is followed)."""
    write_text_atomic(path, model_to_text(model), encoding="ascii", what="model file")


class _Cursor:
    """Line-aware reading position inside the file text."""

    def __init__(self, text: str, name: str):
        self.text = text
        self.name = name
        self.pos = 0

    def line_of(self, offset: int) -> int:
        return self.text.count("\n", 0, offset) + 1

    def error(self, message: str, offset: int | None = None) -> ModelFileError:
        line = self.line_of(self.pos if offset is None else offset)
        return ModelFileError(f"{self.name}:{line}: {message}")

    def next_line(self):
        """(offset, stripped line) of the next non-blank line, or (None, None)."""
        while self.pos < len(self.text):
            end = self.text.find("\n", self.pos)
            if end < 0:
                end = len(self.text)
            start = self.pos
            self.pos = end + 1
            line = self.text[start:end].strip()
            if line:
                return start, line
        return None, None

    def numbers(self, count: int, what: str) -> np.ndarray:
        """The next ``count`` whitespace-separated numbers, line breaks ignored; each
        finite and at most ``VALUE_LIMIT`` in magnitude."""
        start = self.pos
        if count == 0:
            return np.zeros(0)
        # every number takes at least two characters ("0 "): a count the rest of the
        # file cannot hold is refused before anything is split or allocated
        if count > (len(self.text) - start + 1) // 2:
            raise self.error(f"truncated {what}: expected {count} numbers, but the "
                             f"{len(self.text) - start} characters left cannot hold them",
                             len(self.text.rstrip()))
        pieces = self.text[start:].split(None, count)
        tokens = pieces[:count]
        if len(tokens) < count:
            raise self.error(f"truncated {what}: expected {count} numbers, found {len(tokens)}",
                             len(self.text.rstrip()))
        try:
            values = np.array(tokens, dtype=np.float64)
        except ValueError:
            values = None
        if values is not None:
            bad = ~(np.abs(values) <= VALUE_LIMIT)      # nan, inf, or too large
            if not bad.any():
                # advance past the last consumed token: split(None, count) returns the
                # unconsumed remainder, a suffix of the text
                self.pos = len(self.text) - len(pieces[count]) if len(pieces) > count \
                    else len(self.text)
                return values
            first_bad = int(np.flatnonzero(bad)[0])
        else:
            first_bad = None
        # locate the offending token (error path only)
        for k, match in enumerate(_TOKEN.finditer(self.text, start)):
            tok = match.group()
            if first_bad is None:
                try:
                    float(tok)
                except ValueError:
                    raise self.error(f"{what}: {tok!r} is not a number", match.start()) from None
            elif k == first_bad:
                raise self.error(f"{what}: {tok} is not a finite number of magnitude at most "
                                 f"{VALUE_LIMIT:g}", match.start())
            if k + 1 >= count:
                break
        raise self.error(f"{what}: unreadable numbers", start)


_TOKEN = re.compile(r"\S+")


def _parse_int(cur, offset, key, text):
    try:
        value = int(text)
    except ValueError:
        raise cur.error(f"{key}: {text!r} is not an integer", offset) from None
    if not text.lstrip("+-").isdigit():          # int() also takes "1_000" and " 7"
        raise cur.error(f"{key}: {text!r} is not an integer", offset)
    return value


def _parse_float(cur, offset, key, text):
    try:
        return float(text)
    except ValueError:
        raise cur.error(f"{key}: {text!r} is not a number", offset) from None


class _Fields:
    """Where each header key and block starts, to point errors at their line."""

    def __init__(self, cur: _Cursor):
        self.cur = cur
        self.offsets: dict = {}

    def error(self, err: Exception, default: int, prefix: str = "") -> ModelFileError:
        """A ModelFileError for ``err`` raised while checking the model: a
        :class:`ModelFieldError` points at its field's line, a KeyError names the
        missing key, anything else points at ``default``."""
        if isinstance(err, ModelFieldError):
            return self.cur.error(f"{prefix}{err}", self.offsets.get(err.key, default))
        if isinstance(err, KeyError):
            return self.cur.error(f"{prefix}missing {err.args[0]} line", default)
        return self.cur.error(f"{prefix}{err}", default)


def model_from_text(text: str, name: str = "<model>", model_types=None) -> Model:
    """Parse model file content (see module docstring).

    ``model_types`` maps the ``coding`` tag of an lcoding model file to the model
    class that reads it (``block_shapes(header, base)``, ``from_file(header, base,
    blocks)``); the training router passes the table of every method's tags.
    Without it only LIBLINEAR's linear models load.

    Every value is checked as training would have made it (the header by
    :func:`lcoding.core.model.check_header`, the rest by the model class); an error
    names the line of the field at fault."""
    cur = _Cursor(text, name)
    fields = _Fields(cur)
    solver_names = _solver_names()
    base: dict = {}
    extra: dict = {}
    extra_order: list = []
    block_name = None
    while True:
        offset, line = cur.next_line()
        if line is None:
            raise cur.error("unexpected end of file before the w block", len(text.rstrip()))
        key, _, rest = line.partition(" ")
        rest = rest.strip()
        if key == "w" and not rest:
            block_name = "w"
            block_offset = offset
            break
        if key in _LIBLINEAR_KEYS:
            fields.offsets[key] = offset
        if key == "solver_type":
            if rest not in solver_names:
                raise cur.error(f"unknown solver type {rest!r}", offset)
            base["solver_type"] = solver_names[rest]
        elif key == "nr_class":
            base["nr_class"] = _parse_int(cur, offset, key, rest)
            if base["nr_class"] < 0:
                raise cur.error("nr_class must be >= 0", offset)
        elif key == "label":
            if "nr_class" not in base:
                raise cur.error("label must come after nr_class", offset)
            toks = rest.split()
            if len(toks) != base["nr_class"]:
                raise cur.error(f"label: expected {base['nr_class']} labels, found {len(toks)}", offset)
            values = [_parse_int(cur, offset, key, t) for t in toks]
            if any(not -2 ** 31 <= v < 2 ** 31 for v in values):
                raise cur.error("label: labels must be 32-bit integers", offset)
            base["label"] = np.array(values, dtype=np.int64)
        elif key == "nr_feature":
            base["nr_feature"] = _parse_int(cur, offset, key, rest)
            if base["nr_feature"] < 0:
                raise cur.error("nr_feature must be >= 0", offset)
        elif key == "bias":
            base["bias"] = _parse_float(cur, offset, key, rest)
        elif key == "rho":
            base["rho"] = _parse_float(cur, offset, key, rest)
        elif key == "lcoding_format" or "lcoding_format" in extra:
            if key in extra:
                raise cur.error(f"duplicate key {key!r}", offset)
            if not rest:
                # a bare word after the lcoding keys starts the first named block
                block_name = key
                block_offset = offset
                break
            extra[key] = rest
            extra_order.append(key)
            fields.offsets[key] = offset
        else:
            raise cur.error(f"unknown text in model file: [{key}]", offset)

    for required in ("solver_type", "nr_class", "nr_feature", "bias"):
        if required not in base:
            raise cur.error(f"missing {required} line before the {block_name} block", block_offset)
    solver_type = base["solver_type"]
    nr_class = base["nr_class"]
    is_classifier = solver_type not in REGRESSION_SOLVERS and solver_type != SolverType.ONECLASS_SVM
    if is_classifier and "label" not in base and nr_class > 0:
        raise cur.error("missing label line for a classification model", block_offset)
    if solver_type == SolverType.ONECLASS_SVM and "rho" not in base:
        raise cur.error("missing rho line for a one-class model", block_offset)
    # the header as training makes it, before any size in it is used
    try:
        check_header(solver_type, nr_class, base.get("label") if is_classifier else None,
                     base["nr_feature"], base["bias"])
        if "rho" in base:
            check_number("rho", base["rho"])
    except ModelFieldError as err:
        raise fields.error(err, block_offset) from None
    if is_classifier:
        base["label"] = base["label"].astype(np.int32)

    if "lcoding_format" in extra:
        if extra["lcoding_format"] != "1":
            raise cur.error(f"lcoding_format {extra['lcoding_format']} is newer than this lcoding "
                            f"understands (1)", fields.offsets["lcoding_format"])
        coding = extra.get("coding")
        model_type = (model_types or {}).get(coding)
        if model_type is None:
            raise cur.error(f"unknown coding {coding!r} in an lcoding model file",
                            fields.offsets.get("coding", fields.offsets["lcoding_format"]))
        try:
            shapes = model_type.block_shapes(extra, base)
        except (KeyError, ValueError, OverflowError) as err:
            raise fields.error(err, fields.offsets["lcoding_format"], "bad lcoding header: ") \
                from None
        # a block size the file cannot justify is refused before anything is allocated
        # (a block of r x c numbers needs 2 r c characters; with c = 0 it holds none, so
        # r itself must not exceed the file's length)
        for bname, shape in shapes:
            if any(int(dim) < 0 or int(dim) > len(text) for dim in shape):
                # point at the count that sized it: the first one larger than the file
                culprit = next((key for key in extra_order
                                if extra[key].isdigit() and int(extra[key]) > len(text)),
                               "lcoding_format")
                raise cur.error(f"bad lcoding header: block {bname!r} of shape {tuple(shape)} "
                                f"cannot come from a file of {len(text)} characters"
                                + (f" ({culprit} {extra[culprit]})"
                                   if culprit != "lcoding_format" else ""),
                                fields.offsets[culprit])
        blocks = {}
        for i, (bname, shape) in enumerate(shapes):
            if i > 0:
                offset, line = cur.next_line()
                if line is None:
                    raise cur.error(f"unexpected end of file: block {bname!r} missing", len(text))
                block_name = line
                block_offset = offset
            if block_name != bname:
                raise cur.error(f"expected block {bname!r}, found {block_name!r}", block_offset)
            fields.offsets[bname] = block_offset
            blocks[bname] = cur.numbers(int(shape[0]) * int(shape[1]), f"{bname} block") \
                .reshape(int(shape[0]), int(shape[1]))
        _expect_end(cur)
        try:
            return model_type.from_file(extra, base, blocks)
        except (KeyError, ValueError, OverflowError) as err:
            raise fields.error(err, fields.offsets["lcoding_format"],
                               "inconsistent lcoding model: ") from None

    if solver_type not in LINEAR_SOLVER_TYPES:
        raise cur.error(f"solver_type {SolverType(solver_type).name} does not train a linear "
                        f"model: its file needs lcoding's lcoding_format and coding lines and "
                        f"blocks", fields.offsets["solver_type"])
    nr_feature = base["nr_feature"]
    bias = base["bias"]
    w_size = nr_feature + (1 if bias >= 0 else 0)
    nr_w = 1 if (nr_class == 2 and solver_type != SolverType.MCSVM_CS) else nr_class
    fields.offsets["w"] = block_offset
    w = cur.numbers(w_size * nr_w, "w block").reshape(w_size, nr_w)
    _expect_end(cur)
    label = base.get("label") if is_classifier else None
    try:
        return LinearModel(solver_type, nr_class, label, nr_feature, bias, w,
                           rho=base.get("rho", 0.0))
    except ValueError as err:
        raise fields.error(err, block_offset) from None


def _expect_end(cur: _Cursor) -> None:
    rest = cur.text[cur.pos:]
    if rest.strip():
        offset = cur.pos + (len(rest) - len(rest.lstrip()))
        raise cur.error("unexpected text after the last block (more numbers than the header "
                        "announces?)", offset)


def load_model_file(path, model_types=None) -> Model:
    """Read a model file; ``model_types`` as for :func:`model_from_text`."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"can't open model file {path}: no such file") from None
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise ModelFileError(f"{path}:{line}: not a text model file (non-ASCII byte)") from None
    return model_from_text(text, path, model_types)
