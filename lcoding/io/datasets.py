"""Where the benchmark data lives, and loading it.

The shared LIBSVM-format sets are read from ``$LCODING_DATA`` when set, else from
``../shared/data`` beside the repository (or beside the current directory).  They
are never copied into the repository; the small ``banana`` set ships inside the
package (``lcoding/io/data``) for the demo.
"""
from __future__ import annotations

import os
from pathlib import Path

from lcoding.core.rows import rows_from_dense
from lcoding.io.reader import read_libsvm

# n_features of each shared set (MANIFEST.md): pass them explicitly, because the
# largest index present in a file can be smaller.
N_FEATURES = {
    "banana": 2, "magic04": 10, "ijcnn1": 22, "w8a": 300, "usps": 256, "letter": 16,
    "mnist": 784, "skin": 3, "reuters": 8315, "usps_libsvm": 256,
}

# LIBSVM's ``usps`` / ``usps.t`` -- the copy the LL-SVM and anchor-plane papers ran on --
# are the shared usps images (the Hastie-Tibshirani-Friedman "zip" digits) smoothed by a
# normalised 7 x 7 Gaussian of sigma 0.75 pixel (zero padding, i.e. background, on the
# [0, 1] pixels), then written on [-1, 1]: 2 G(x) - 1.  Found by fitting rows of LIBSVM's
# usps.t; the reconstruction matches its printed six decimals (tests/test_datasets.py).
USPS_LIBSVM_SIGMA = 0.75
USPS_LIBSVM_RADIUS = 3
USPS_SIDE = 16

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


def usps_libsvm_pixels(pixels):
    """LIBSVM's usps pixels from the shared copy's: ``pixels`` is ``(n, 256)`` in
    [0, 1] (rows of 16 x 16 images, top row first), the result ``(n, 256)`` in [-1, 1].

    A separable Gaussian blur (sigma ``USPS_LIBSVM_SIGMA``, ``2 USPS_LIBSVM_RADIUS + 1``
    normalised taps) with the background (0) outside the image, then ``2 g - 1``."""
    import numpy as np
    from scipy.ndimage import gaussian_filter
    x = np.asarray(pixels, dtype=np.float64)
    side = USPS_SIDE
    if x.ndim != 2 or x.shape[1] != side * side:
        raise ValueError(f"usps pixels: expected shape (n, {side * side}), got {x.shape}")
    # truncate = radius / sigma: scipy keeps int(truncate * sigma + 0.5) = radius taps a side
    sigma = (0.0, USPS_LIBSVM_SIGMA, USPS_LIBSVM_SIGMA)
    smooth = gaussian_filter(x.reshape(-1, side, side), sigma, mode="constant", cval=0.0,
                             truncate=USPS_LIBSVM_RADIUS / USPS_LIBSVM_SIGMA)
    return (2.0 * smooth - 1.0).reshape(-1, side * side)


def _load_usps_libsvm(split: str):
    """LIBSVM's usps (``split`` train) or usps.t (test), rebuilt from the shared usps:
    LIBSVM's pixel values (all 256 per row, on [-1, 1]); labels stay the digits 0-9
    (LIBSVM's file writes digit + 1)."""
    y, rows = load("usps", split)
    dense = rows.to_csr().toarray()
    return y, rows_from_dense(usps_libsvm_pixels(dense), name=f"usps_libsvm {split}")


def load(name: str, split: str = "train"):
    """``(y, Rows)`` of a shared data set, with the MANIFEST's feature count.

    ``usps_libsvm`` is derived, not a file: LIBSVM's copy of USPS rebuilt from the
    shared ``usps`` (:func:`usps_libsvm_pixels`)."""
    if name == "usps_libsvm":
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        return _load_usps_libsvm(split)
    path = dataset_path(name, split)
    y, rows = read_libsvm(path, n_features=N_FEATURES.get(name))
    return y, rows
