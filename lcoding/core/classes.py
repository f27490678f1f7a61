"""Classes: LIBLINEAR's label order, per-class costs and the one one-vs-rest split.

Label handling follows LIBLINEAR exactly: labels are truncated to int, ordered by
first appearance, and a two-class problem whose labels are {-1, +1} with -1 first
is swapped so that +1 is ``label[0]``.  Binary problems train one vector (positive
= ``label[0]``, C scaled by the class weights of both classes); more classes train
one-vs-rest (positive side ``weight_i * C``, rest ``C``).
"""
from __future__ import annotations

import sys

import numpy as np

def group_classes(y: np.ndarray):
    """LIBLINEAR's ``group_classes``: (labels in model order, class index per row)."""
    yi = np.trunc(y)
    if yi.size and (np.abs(yi) > 2147483647).any():
        bad = int(np.flatnonzero(np.abs(yi) > 2147483647)[0])
        raise ValueError(f"y: label {bad} ({y[bad]!r}) is outside the 32-bit integer range")
    yi = yi.astype(np.int64)
    uniq, first, inverse = np.unique(yi, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")          # order of first appearance
    labels = uniq[order]
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    class_index = rank[inverse]
    if labels.size == 2 and labels[0] == -1 and labels[1] == 1:
        labels = labels[::-1].copy()
        class_index = 1 - class_index
    return labels.astype(np.int32), class_index.astype(np.int64)


def class_costs(labels, params) -> np.ndarray:
    """C of each class in model order: ``-c`` times the ``-wi`` weight of its label
    (LIBLINEAR warns about, and ignores, weights of labels not in the data)."""
    weighted = np.full(labels.size, float(params.C))
    for wl, wv in zip(params.weight_label, params.weight):
        hit = np.flatnonzero(labels == wl)
        if hit.size == 0:
            sys.stderr.write(f"WARNING: class label {wl} specified in weight is not found\n")
        else:
            weighted[hit[0]] *= wv
    return weighted


def one_vs_rest_jobs(class_index, nr_class, weighted_C, C, n_rows):
    """LIBLINEAR's binary sub-problems, one per weight column: ``(column, y_pm, Cp, Cn)``.

    Two classes: one problem, ``label[0]`` positive, both classes' weighted C; one
    class: every row positive; more: one-vs-rest with ``weight_c * C`` against ``C``.
    """
    if nr_class == 2:
        return [(0, np.where(class_index == 0, 1, -1).astype(np.int8),
                 weighted_C[0], weighted_C[1])]
    if nr_class == 1:
        return [(0, np.ones(n_rows, dtype=np.int8), weighted_C[0], C)]
    return [(c, np.where(class_index == c, 1, -1).astype(np.int8), weighted_C[c], C)
            for c in range(nr_class)]

