"""Helpers shared by the operator tests: bit views and input layouts."""
import numpy as np


def bits(x: np.ndarray) -> np.ndarray:
    """Unsigned view of an array, for bit comparisons."""
    x = np.ascontiguousarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[x.dtype.itemsize])


def to_layout(x: np.ndarray, layout: str) -> np.ndarray:
    """A [B, N, S, D] array stored in *layout* (input side: BNSD_BSND reads BNSD)."""
    b, n, s, d = x.shape
    if layout == "BSH":
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(b, s, n * d)
    if layout == "BSND":
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    return np.ascontiguousarray(x)
