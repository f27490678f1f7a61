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
