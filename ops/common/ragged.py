"""Index arithmetic on ragged runs (counts of items per group) that the estimates vectorise their tiles with."""
from __future__ import annotations

import numpy as np


def ragged_arange(counts) -> np.ndarray:
    """0, 1, ..., n - 1 for each n of *counts*, concatenated (each item's index within its group), as int64."""
    counts = np.asarray(counts, np.int64)
    return np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
