"""Validate once at the boundary: every input becomes :class:`Rows`.

``Rows`` is a CSR matrix in the only layout the kernels accept: float64 finite
values, int32 column indices (0-based, strictly increasing within a row), int64
row pointers, all C-contiguous.  Accepted inputs (LIBLINEAR's, plus more):

* list/tuple of dicts ``{index: value}`` with 1-based integer indices;
* list/tuple of sequences or 1-D arrays (dense rows, position j is index j+1);
* list/tuple of ``(indices, values)`` ndarray pairs (0-based indices);
* 2-D numpy arrays; scipy sparse matrices *and* sparse arrays of any format.

Explicit zeros are dropped (LIBLINEAR skips them too).  Problems raise
``ValueError``/``TypeError`` naming the argument, row and feature.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from lcoding.core.threads import check_stop

INT32_MAX = np.iinfo(np.int32).max
# values per chunk when converting dense arrays (rows_from_dense)
DENSE_CHUNK = 1 << 22


@dataclass
class Rows:
    data: np.ndarray      # float64[nnz]
    indices: np.ndarray   # int32[nnz], 0-based
    indptr: np.ndarray    # int64[n_rows + 1]
    n_features: int       # number of columns (largest 1-based index seen, for lists)

    @property
    def n_rows(self) -> int:
        return self.indptr.shape[0] - 1

    def to_csr(self) -> sp.csr_matrix:
        return sp.csr_matrix((self.data, self.indices, self.indptr),
                             shape=(self.n_rows, self.n_features))

    def take(self, row_ids) -> "Rows":
        """Rows ``row_ids`` (an integer array), as a new contiguous Rows."""
        row_ids = np.asarray(row_ids, dtype=np.int64)
        starts = self.indptr[row_ids]
        lengths = self.indptr[row_ids + 1] - starts
        indptr = np.zeros(row_ids.shape[0] + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        total = int(indptr[-1])
        # positions of every kept entry, without a Python loop over rows
        offsets = np.repeat(starts - indptr[:-1], lengths) + np.arange(total, dtype=np.int64)
        return Rows(self.data[offsets], self.indices[offsets], indptr, self.n_features)

    def largest_magnitude(self, row: int | None = None) -> float:
        """The largest ``|value|`` of one row (``row``) or of all rows: 0 for none.
        Named in the messages about values too large for the solvers."""
        data = self.data if row is None else \
            self.data[int(self.indptr[row]):int(self.indptr[row + 1])]
        return float(np.max(np.abs(data))) if data.size else 0.0

    def truncated(self, n_features: int) -> "Rows":
        """Drop columns >= n_features (LIBLINEAR ignores unseen test features)."""
        if n_features >= self.n_features:
            return Rows(self.data, self.indices, self.indptr, max(self.n_features, n_features))
        keep = self.indices < n_features
        if keep.all():
            return Rows(self.data, self.indices, self.indptr, n_features)
        indptr = _filtered_indptr(self.indptr, keep)
        return Rows(self.data[keep], self.indices[keep], indptr, n_features)


def _filtered_indptr(indptr, keep):
    """Row pointers after dropping the entries where ``keep`` is False."""
    n_rows = indptr.shape[0] - 1
    row_of = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(indptr))
    counts = np.bincount(row_of[keep], minlength=n_rows)
    out = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def _fail_nonfinite(name, data, indices, indptr):
    bad = int(np.flatnonzero(~np.isfinite(data))[0])
    row = int(np.searchsorted(indptr, bad, side="right") - 1)
    raise ValueError(
        f"{name}: row {row} has a non-finite value {float(data[bad])!r} at feature index "
        f"{int(indices[bad]) + 1}")


def _finish(name, data, indices, indptr, n_features, check_sorted=True) -> Rows:
    data = np.ascontiguousarray(data, dtype=np.float64)
    if data.size and not np.isfinite(data).all():
        _fail_nonfinite(name, data, indices, indptr)
    if n_features > INT32_MAX:
        raise ValueError(f"{name}: {n_features} features exceed the int32 index range")
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    nz = data != 0
    if not nz.all():
        indptr = _filtered_indptr(indptr, nz)
        data, indices = data[nz], indices[nz]
    return Rows(data, indices, indptr, int(n_features))


def rows_from_sparse(x, name="x") -> Rows:
    csr = sp.csr_matrix(x) if not isinstance(x, sp.csr_matrix) else x
    if not csr.has_canonical_format:
        csr = csr.copy()
        csr.sum_duplicates()  # also sorts indices
    return _finish(name, csr.data, csr.indices, csr.indptr, csr.shape[1])


def rows_from_dense(x, name="x", copy: bool = True) -> Rows:
    """Rows of the 2-D numeric array ``x`` (zeros dropped, values checked finite).
    ``copy=False``: when ``x`` has no zero, the rows may keep ``x`` itself as their
    values (the caller's own temporary, e.g. a kernel map's rows)."""
    a = np.asarray(x)
    if a.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array, got {a.ndim}-D with shape {a.shape}")
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name}: dense array of dtype {a.dtype} is not numeric")
    a = np.ascontiguousarray(a, dtype=np.float64)
    n, d = a.shape
    if a.size and np.count_nonzero(a) == a.size and np.isfinite(a).all():
        # no zero to drop (a kernel map's rows): the array is the CSR data as it is,
        # every row's indices 0..d-1 -- no chunked masks and gathers (1.2 -> 0.3 s for
        # ijcnn1's 49 990 x 1000 map); copied when it is the caller's own array
        data = a.reshape(-1)
        if copy and np.may_share_memory(data, x):
            data = data.copy()
        indices = np.empty((n, d), dtype=np.int32)
        indices[:] = np.arange(d, dtype=np.int32)
        return Rows(data, indices.reshape(-1), np.arange(0, n * d + 1, d, dtype=np.int64), d)
    # in chunks of rows (a Ctrl-C check between them, and no n x d temporaries)
    step = max(1, DENSE_CHUNK // max(d, 1))
    counts = np.zeros(n + 1, dtype=np.int64)
    data, indices = [], []
    for r0 in range(0, n, step):
        check_stop()
        block = a[r0:r0 + step]
        if not np.isfinite(block).all():
            r, c = np.argwhere(~np.isfinite(block))[0]
            raise ValueError(f"{name}: row {r0 + r} has a non-finite value "
                             f"{float(block[r, c])!r} at feature index {c + 1}")
        nz = block != 0
        counts[r0 + 1:r0 + 1 + block.shape[0]] = nz.sum(axis=1)
        data.append(block[nz])
        indices.append(np.nonzero(nz)[1].astype(np.int32))
    indptr = np.cumsum(counts)
    return _finish(name, np.concatenate(data) if data else np.zeros(0),
                   np.concatenate(indices) if indices else np.zeros(0, np.int32), indptr, d)


def _rows_from_dicts(x, name) -> Rows:
    n = len(x)
    lengths = np.fromiter((len(d) for d in x), dtype=np.int64, count=n)
    total = int(lengths.sum())
    try:
        keys = np.fromiter(itertools.chain.from_iterable(x), dtype=np.float64, count=total)
        vals = np.fromiter(itertools.chain.from_iterable(d.values() for d in x),
                           dtype=np.float64, count=total)
    except (TypeError, ValueError) as err:
        for r, d in enumerate(x):
            for k, v in d.items():
                if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
                    raise TypeError(f"{name}: row {r} has feature index {k!r}; indices must be integers") from None
                try:
                    float(v)
                except (TypeError, ValueError):
                    raise TypeError(f"{name}: row {r}, feature {k} has value {v!r}, not a number") from None
        raise TypeError(f"{name}: {err}") from None
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    if total:
        if not (np.floor(keys) == keys).all():
            bad = int(np.flatnonzero(np.floor(keys) != keys)[0])
            row = int(np.searchsorted(indptr, bad, side="right") - 1)
            raise TypeError(f"{name}: row {row} has feature index {keys[bad]!r}; indices must be integers")
        if keys.min() < 1:
            bad = int(np.argmin(keys))
            row = int(np.searchsorted(indptr, bad, side="right") - 1)
            raise ValueError(f"{name}: row {row} has feature index {int(keys[bad])}; "
                             f"feature indices start at 1")
        if keys.max() > INT32_MAX:
            raise ValueError(f"{name}: feature index {int(keys.max())} exceeds the int32 range")
    idx = keys.astype(np.int64) - 1
    row_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
    if total > 1:
        step = np.diff(idx)
        same_row = row_of[1:] == row_of[:-1]
        if (step[same_row] <= 0).any():
            order = np.lexsort((idx, row_of))
            idx, vals = idx[order], vals[order]
    nz = vals != 0
    n_features = int(idx[nz].max()) + 1 if nz.any() else 0
    if not np.isfinite(vals).all():
        _fail_nonfinite(name, vals, idx, indptr)
    return _finish(name, vals, idx, indptr, n_features)


def _rows_from_sequences(x, name) -> Rows:
    n = len(x)
    rows = []
    for r, xi in enumerate(x):
        if isinstance(xi, tuple) and len(xi) == 2 and isinstance(xi[0], np.ndarray) \
                and isinstance(xi[1], np.ndarray):
            if xi[0].dtype.kind not in "iu" and not (
                    xi[0].dtype.kind == "f" and np.isfinite(xi[0]).all()
                    and (np.trunc(xi[0]) == xi[0]).all()):
                raise TypeError(f"{name}: row {r}: the index array holds {xi[0].dtype} values, "
                                f"not integers")
            ind = np.asarray(xi[0], dtype=np.int64)
            val = np.asarray(xi[1], dtype=np.float64)
            if ind.ndim != 1 or ind.shape != val.shape:
                raise ValueError(f"{name}: row {r}: index and value arrays must be 1-D of the "
                                 f"same length, got shapes {ind.shape} and {val.shape}")
            if ind.size and ind.min() < 0:
                raise ValueError(f"{name}: row {r} has a negative 0-based feature index")
            order = np.argsort(ind, kind="stable")
            ind, val = ind[order], val[order]
            if ind.size > 1 and (ind[1:] == ind[:-1]).any():
                dup = int(ind[1:][ind[1:] == ind[:-1]][0])
                raise ValueError(f"{name}: row {r}: feature index {dup + 1} appears more than "
                                 f"once in the row (0-based index {dup} in the index array)")
            rows.append((ind, val))
        else:
            try:
                val = np.asarray(xi, dtype=np.float64)
            except (TypeError, ValueError):
                raise TypeError(f"{name}: row {r} is {type(xi).__name__}, expected a dict, a "
                                f"sequence of numbers or an (indices, values) pair") from None
            if val.ndim != 1:
                raise ValueError(f"{name}: row {r} is not one-dimensional")
            ind = np.flatnonzero(val)
            rows.append((ind, val[ind]))
    lengths = np.fromiter((r[0].shape[0] for r in rows), dtype=np.int64, count=n)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    idx = np.concatenate([r[0] for r in rows]) if n else np.zeros(0, np.int64)
    vals = np.concatenate([r[1] for r in rows]) if n else np.zeros(0)
    nz = vals != 0
    n_features = int(idx[nz].max()) + 1 if nz.any() else 0
    if vals.size and not np.isfinite(vals).all():
        _fail_nonfinite(name, vals, idx, indptr)
    return _finish(name, vals, idx, indptr, n_features)


def as_rows(x, name="x") -> Rows:
    """Any accepted instance container -> validated :class:`Rows`."""
    if isinstance(x, Rows):
        return x
    if sp.issparse(x):
        return rows_from_sparse(x, name)
    if isinstance(x, np.ndarray):
        return rows_from_dense(x, name)
    if isinstance(x, (list, tuple)):
        if len(x) == 0:
            return Rows(np.zeros(0), np.zeros(0, np.int32), np.zeros(1, np.int64), 0)
        if all(isinstance(xi, dict) for xi in x):
            return _rows_from_dicts(x, name)
        if any(isinstance(xi, dict) for xi in x):
            raise TypeError(f"{name}: mixes dict rows with other row types")
        return _rows_from_sequences(x, name)
    raise TypeError(f"type of {name}: {type(x)} is not supported!")


def as_labels(y, name="y") -> np.ndarray:
    """Labels/targets -> finite float64 vector."""
    if isinstance(y, np.ndarray):
        arr = y
    elif isinstance(y, (list, tuple)):
        try:
            arr = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{name}: labels must be numbers") from None
    else:
        raise TypeError(f"type of {name}: {type(y)} is not supported!")
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name}: labels of dtype {arr.dtype} are not numbers")
    arr = np.ascontiguousarray(arr, dtype=np.float64).reshape(-1)
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name}: label {bad} is {arr[bad]!r}; labels must be finite")
    return arr
