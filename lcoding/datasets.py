"""Where the benchmark data lives, and loading it.

The shared LIBSVM-format sets are read from ``$LCODING_DATA`` when set, else from
``../shared/data`` beside the repository (or beside the current directory).  They
are never copied into the repository; the small ``banana`` set ships inside the
package (``lcoding/data``) for the demo.
"""
from __future__ import annotations

import os
from pathlib import Path

# n_features of each shared set (MANIFEST.md): pass them explicitly, because the
# largest index present in a file can be smaller.
N_FEATURES = {
    "banana": 2, "magic04": 10, "ijcnn1": 22, "w8a": 300, "usps": 256, "letter": 16,
    "mnist": 784, "skin": 3, "reuters": 8315,
}

_PACKAGE_DATA = Path(__file__).resolve().parent / "data"


def data_dir() -> Path | None:
    """The shared data folder, or None when it cannot be found."""
    env = os.environ.get("LCODING_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for base in (Path.cwd(), *Path.cwd().parents, *here.parents):
        cand = base / "shared" / "data"
        if cand.is_dir():
            return cand
        cand = base.parent / "shared" / "data"
        if cand.is_dir():
            return cand
    return None


def dataset_path(name: str, split: str = "train") -> Path:
    """Path of ``<name>.<split>.bz2``; the packaged copy for banana as a fallback."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    fname = f"{name}.{split}.bz2"
    d = data_dir()
    if d is not None and (d / fname).exists():
        return d / fname
    if (_PACKAGE_DATA / fname).exists():
        return _PACKAGE_DATA / fname
    where = d if d is not None else "../shared/data (not found)"
    raise FileNotFoundError(f"data set file {fname} not found in {where}; set LCODING_DATA "
                            f"to the folder holding the shared LIBSVM files")


def load(name: str, split: str = "train"):
    """``(y, Rows)`` of a shared data set, with the MANIFEST's feature count."""
    from lcoding._validation import Rows  # noqa: F401  (type of the result)
    path = dataset_path(name, split)
    try:
        from lcoding.io import read_libsvm
    except ImportError:  # the fast reader is not built yet: a slower stand-in
        import numpy as np
        from sklearn.datasets import load_svmlight_file
        from lcoding._validation import as_rows
        X, y = load_svmlight_file(str(path), n_features=N_FEATURES.get(name))
        return np.asarray(y, dtype=np.float64), as_rows(X)
    y, rows = read_libsvm(path, n_features=N_FEATURES.get(name))
    return y, rows
