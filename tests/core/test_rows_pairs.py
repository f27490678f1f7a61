"""Rows given as (indices, values) array pairs are validated like files and dicts."""
from __future__ import annotations

import numpy as np
import pytest

from lcoding.core.rows import as_rows
from lcoding.liblinearutil import train


def pair(indices, values):
    return (np.asarray(indices), np.asarray(values, dtype=float))


def test_repeated_index_is_rejected():
    """A repeated index used to be neither merged nor rejected (two entries of one
    column reached the kernels); files and dicts reject it."""
    x = [pair([0, 2], [1, 2]), pair([3, 1, 3], [1.0, 2.0, 5.0])]
    with pytest.raises(ValueError, match=r"x: row 1: feature index 4 appears more than once"):
        as_rows(x)
    with pytest.raises(ValueError, match="appears more than once"):
        train([1, 2], x, "-q")


def test_unsorted_distinct_indices_are_sorted():
    rows = as_rows([pair([3, 1], [1.0, 2.0])])
    assert rows.indices.tolist() == [1, 3] and rows.data.tolist() == [2.0, 1.0]


def test_non_integer_index_arrays_are_rejected():
    with pytest.raises(TypeError, match="not integers"):
        as_rows([pair([0.5], [1.0])])
    with pytest.raises(TypeError, match="not integers"):
        as_rows([(np.array(["a"]), np.array([1.0]))])
    assert as_rows([pair([2.0], [1.0])]).indices.tolist() == [2]


def test_index_and_value_arrays_must_be_matching_vectors():
    with pytest.raises(ValueError, match="1-D of the same length"):
        as_rows([pair([[0, 1]], [[1.0, 2.0]])])
    with pytest.raises(ValueError, match="1-D of the same length"):
        as_rows([pair([0, 1], [1.0])])


def test_dense_rows_without_zeros_are_the_array_itself():
    """rows_from_dense: an array with no zero (a kernel map's rows) becomes the same
    CSR rows as through scipy, its values copied unless ``copy=False``; a zero anywhere
    takes the chunked path; a non-finite value is still named by row and feature."""
    import scipy.sparse as sp
    from lcoding.core.rows import rows_from_dense
    rng = np.random.default_rng(4)
    for A in (rng.normal(size=(50, 7)) + 10.0, np.where(rng.random((50, 7)) < 0.3, 0.0,
                                                      rng.normal(size=(50, 7)))):
        rows = rows_from_dense(A)
        csr = sp.csr_matrix(A)
        np.testing.assert_array_equal(rows.data, csr.data)
        np.testing.assert_array_equal(rows.indices, csr.indices)
        np.testing.assert_array_equal(rows.indptr, csr.indptr)
        assert rows.indices.dtype == np.int32 and rows.indptr.dtype == np.int64
        assert not np.shares_memory(rows.data, A)
    A = rng.normal(size=(20, 3)) + 10.0
    assert np.shares_memory(rows_from_dense(A, copy=False).data, A)
    A[7, 2] = np.inf
    with pytest.raises(ValueError, match=r"^x: row 7 has a non-finite value inf at feature index 3"):
        rows_from_dense(A)
