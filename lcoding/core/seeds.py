"""Seeds: every random stream of lcoding derives from the user's ``-S`` seed and a
*purpose path*, so each class, fold and stage draws its own reproducible stream
and a model does not depend on the thread count or the finishing order.

This is the one list of purposes; a new random stage takes a new number here.
"""
from __future__ import annotations

import numpy as np

# rng_state(seed, PURPOSE, *path): the first element after the seed
PURPOSE_SOLVER = 1        # sample order of a solver; path (fold..., class column)
PURPOSE_CV = 2            # the permutation cutting cross-validation folds
PURPOSE_COCOA = 3         # CoCoA+ (-m N on one binary problem): seeded by the problem's own
                          # solver stream; path (0: the row split | k + 1: partition k's order)
PURPOSE_DASK_SAMPLE = 4   # lcoding.dask: the row sample the anchors / planes are learned on
PURPOSE_SELECT = 5        # lcoding.select: path (0: the row permutation of the rungs |
                          # 1: the row sample of the candidates' coding widths)
PURPOSE_ANCHORS = 10      # k-means / random anchors of the local codings
PURPOSE_SVD = 11          # randomised SVD of the OCC anchor planes; path (..., class + 1)
PURPOSE_LANDMARKS = 20    # landmarks of the kernel PCA map
PURPOSE_KQ_INIT = 40      # k q-metrics: initial clusters; path (..., restart)
PURPOSE_KQ_ORDER = 41     # k q-metrics: sample order; path (..., restart)
PURPOSE_KQ_SCREEN = 42    # k q-flats: the screen's flats (KQScreen); path (fold + 1, ...)
# xor'ed into a solver's stream for the SGD step calibration, so its subsample is
# independent of the sample order
CALIBRATION_STREAM = 0x5EED_CA1B


def rng_state(seed: int, *purpose: int) -> np.ndarray:
    """A kernel RNG state (uint64[1]) derived from the user seed and a purpose path,
    so every class, fold and stage draws an independent, reproducible stream."""
    ss = np.random.SeedSequence([int(seed) & 0xFFFFFFFFFFFFFFFF, *purpose])
    return ss.generate_state(1, dtype=np.uint64)
