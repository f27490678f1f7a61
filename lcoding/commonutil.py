"""Drop-in for ``liblinear.commonutil`` (shared with LIBSVM): reading LIBSVM files,
evaluation metrics and the CSR scaling helpers."""
from __future__ import annotations

import sys

import numpy as np
import scipy.sparse as sp

from lcoding.io.reader import svm_read_problem as _read

__all__ = ["svm_read_problem", "evaluations", "csr_find_scale_param", "csr_scale"]


def svm_read_problem(data_source, return_scipy=False):
    """svm_read_problem(data_source, return_scipy=False) -> (y, x)

    Read LIBSVM-format data from a path (plain, .gz, .bz2 or .xz) or an open file.
    Default: ``y`` a list of floats, ``x`` a list of dicts {index: value} (explicit
    zeros kept).  ``return_scipy=True``: ``y`` a float64 ndarray, ``x`` a float64
    ``scipy.sparse.csr_matrix`` with 0-based columns.  Malformed input raises
    ``lcoding.io.reader.LibsvmFormatError`` naming the file and line.
    """
    return _read(data_source, return_scipy=return_scipy)


def _scc(l, sumv, sumy, sumvv, sumyy, sumvy):
    num = (l * sumvy - sumv * sumy) ** 2
    den = (l * sumvv - sumv * sumv) * (l * sumyy - sumy * sumy)
    if den == 0 or not np.isfinite(den):
        return float("nan")
    return float(num / den)


def evaluations_scipy(ty, pv):
    """(ACC, MSE, SCC) of ndarrays ``ty`` (truth) and ``pv`` (predictions)."""
    if not (isinstance(ty, np.ndarray) and isinstance(pv, np.ndarray)):
        raise TypeError("type of ty and pv must be ndarray")
    if len(ty) != len(pv):
        raise ValueError("len(ty) must be equal to len(pv)")
    ty = ty.astype(np.float64, copy=False)
    pv = pv.astype(np.float64, copy=False)
    l = len(ty)
    if l == 0:
        return (float("nan"), float("nan"), float("nan"))
    acc = 100.0 * float(np.mean(ty == pv))
    mse = float(np.mean((ty - pv) ** 2))
    scc = _scc(l, pv.sum(), ty.sum(), (pv * pv).sum(), (ty * ty).sum(), (pv * ty).sum())
    return (acc, mse, scc)


def evaluations(ty, pv, useScipy=True):
    """evaluations(ty, pv, useScipy=True) -> (ACC, MSE, SCC)

    Accuracy (percent), mean squared error and squared correlation coefficient of
    the predictions ``pv`` against the truth ``ty``.
    """
    if len(ty) != len(pv):
        raise ValueError("len(ty) must be equal to len(pv)")
    return evaluations_scipy(np.asarray(ty, dtype=np.float64), np.asarray(pv, dtype=np.float64))


def csr_find_scale_param(x, lower=-1, upper=1):
    """Per-feature map ``x * diag(coef) + offset`` onto [lower, upper]."""
    if not sp.issparse(x) or x.format != "csr":
        raise TypeError("csr_find_scale_param: x must be a scipy CSR matrix")
    if not lower < upper:
        raise ValueError(f"csr_find_scale_param: lower ({lower}) must be < upper ({upper})")
    l, n = x.shape
    feat_min = np.asarray(x.min(axis=0).toarray()).ravel()
    feat_max = np.asarray(x.max(axis=0).toarray()).ravel()
    coef = (feat_max - feat_min) / (upper - lower)
    nz = coef != 0
    coef[nz] = 1.0 / coef[nz]
    offset = -feat_min * coef + lower
    offset[coef == 0] = 0
    if np.count_nonzero(offset) * l > 3 * x.nnz:
        print("WARNING: The #nonzeros of the scaled data is at least 2 times larger than the "
              "original one.\nIf feature values are non-negative and sparse, set lower=0 rather "
              "than the default lower=-1.", file=sys.stderr)
    return {"coef": coef, "offset": offset}


def csr_scale(x, scale_param):
    """Apply a map from :func:`csr_find_scale_param` to a CSR matrix.

    When the column count differs from the parameters, a warning is printed and the
    parameters are cut, or padded with zeros (extra features scale to 0), which is
    what LIBSVM's copy intends; there that path raises instead.
    """
    if not sp.issparse(x) or x.format != "csr":
        raise TypeError("csr_scale: x must be a scipy CSR matrix")
    coef = np.asarray(scale_param["coef"], dtype=np.float64)
    offset = np.asarray(scale_param["offset"], dtype=np.float64)
    if coef.shape != offset.shape:
        raise ValueError("csr_scale: coef and offset differ in length")
    l, n = x.shape
    if n != coef.size:
        print("WARNING: The dimension of scaling parameters and feature number do not match.",
              file=sys.stderr)
        coef = np.concatenate([coef, np.zeros(max(0, n - coef.size))])[:n]
        offset = np.concatenate([offset, np.zeros(max(0, n - offset.size))])[:n]
    scaled = x @ sp.diags(coef, 0, shape=(n, n), format="csr")
    if np.any(offset != 0):
        # every row gains the offset vector (the result is dense where offset != 0)
        scaled = scaled + sp.csr_matrix(np.ones((l, 1))) @ sp.csr_matrix(offset.reshape(1, n))
    scaled = sp.csr_matrix(scaled)
    scaled.eliminate_zeros()
    if scaled.nnz > x.nnz:
        print(f"WARNING: original #nonzeros {x.nnz}\n       > new      #nonzeros {scaled.nnz}\n"
              "If feature values are non-negative and sparse, get scale_param by setting "
              "lower=0 rather than the default lower=-1.", file=sys.stderr)
    return scaled
