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
import tempfile

import numpy as np

from lcoding.core.model import LinearModel, Model
from lcoding.core.options import REGRESSION_SOLVERS, SolverType

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
    """Write ``model`` to ``path`` atomically (temporary file + rename)."""
    text = model_to_text(model)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"cannot save model file {path}: folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".lcoding-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="ascii", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
        """The next ``count`` whitespace-separated numbers, line breaks ignored."""
        start = self.pos
        if count == 0:
            return np.zeros(0)
        pieces = self.text[start:].split(None, count)
        tokens = pieces[:count]
        if len(tokens) < count:
            raise self.error(f"truncated {what}: expected {count} numbers, found {len(tokens)}",
                             len(self.text.rstrip()))
        try:
            values = np.array(tokens, dtype=np.float64)
        except ValueError:
            for tok in tokens:
                try:
                    float(tok)
                except ValueError:
                    bad = self.text.find(tok, start)
                    raise self.error(f"{what}: {tok!r} is not a number", bad) from None
            raise
        # advance past the last consumed token
        # split(None, count) returns the unconsumed remainder, a suffix of the text
        self.pos = len(self.text) - len(pieces[count]) if len(pieces) > count else len(self.text)
        return values


def _parse_int(cur, offset, key, text):
    try:
        return int(text)
    except ValueError:
        raise cur.error(f"{key}: {text!r} is not an integer", offset) from None


def _parse_float(cur, offset, key, text):
    try:
        return float(text)
    except ValueError:
        raise cur.error(f"{key}: {text!r} is not a number", offset) from None


def model_from_text(text: str, name: str = "<model>", model_types=None) -> Model:
    """Parse model file content (see module docstring).

    ``model_types`` maps the ``coding`` tag of an lcoding model file to the model
    class that reads it (``block_shapes(header, base)``, ``from_file(header, base,
    blocks)``); the training router passes the table of every method's tags.
    Without it only LIBLINEAR's linear models load."""
    cur = _Cursor(text, name)
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
            base["label"] = np.array([_parse_int(cur, offset, key, t) for t in toks], dtype=np.int32)
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

    if "lcoding_format" in extra:
        if extra["lcoding_format"] != "1":
            raise cur.error(f"lcoding_format {extra['lcoding_format']} is newer than this lcoding "
                            f"understands (1)")
        coding = extra.get("coding")
        model_type = (model_types or {}).get(coding)
        if model_type is None:
            raise cur.error(f"unknown coding {coding!r} in an lcoding model file")
        try:
            shapes = model_type.block_shapes(extra, base)
        except (KeyError, ValueError) as err:
            raise cur.error(f"bad lcoding header: {err}") from None
        blocks = {}
        for i, (bname, shape) in enumerate(shapes):
            if i > 0:
                offset, line = cur.next_line()
                if line is None:
                    raise cur.error(f"unexpected end of file: block {bname!r} missing", len(text))
                block_name = line
            if block_name != bname:
                raise cur.error(f"expected block {bname!r}, found {block_name!r}")
            blocks[bname] = cur.numbers(shape[0] * shape[1], f"{bname} block").reshape(shape)
        _expect_end(cur)
        try:
            return model_type.from_file(extra, base, blocks)
        except (KeyError, ValueError) as err:
            raise cur.error(f"inconsistent lcoding model: {err}") from None

    nr_feature = base["nr_feature"]
    bias = base["bias"]
    w_size = nr_feature + (1 if bias >= 0 else 0)
    nr_w = 1 if (nr_class == 2 and solver_type != SolverType.MCSVM_CS) else nr_class
    w = cur.numbers(w_size * nr_w, "w block").reshape(w_size, nr_w)
    _expect_end(cur)
    label = base.get("label") if is_classifier else None
    return LinearModel(solver_type, nr_class, label, nr_feature, bias, w, rho=base.get("rho", 0.0))


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
