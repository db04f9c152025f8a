"""The ScatterPaKvCache kernel launch: the launch adapter, the GM image of key/value, the launch itself.

Its own module because both api.py (full and timing runs) and estimate.py (sampled timing runs) launch
the kernel; neither needs the other to do it.
"""
from __future__ import annotations

import numpy as np

from npusim.launch import launch
from npusim.memory.gm import TensorSpec
from ops.scatter_pa_kv_cache import kernel as K


def kernel_entry(key, keyCache, slotMapping, value, valueCache, compressLens, compressSeqOffset, seqLens, tiling):
    """Launch adapter: the caches are Ref tensors, so the kernel's in and out caches are one buffer."""
    K.scatter_pa_kv_cache(key, keyCache, slotMapping, value, valueCache, compressLens, compressSeqOffset,
                          seqLens, keyCache, valueCache, None, tiling)


def source(x, stride: int | None, offset: int | None, full: bool):
    """The GM image of key or value: the array itself, or (Nct) its storage rebuilt from strides."""
    if stride is None:
        if not full:
            return TensorSpec(x.shape, x.dtype)
        return np.ascontiguousarray(x)
    t, row = x.shape[0], int(np.prod(x.shape[1:]))
    size = (t - 1) * stride + offset + row
    if not full:
        return TensorSpec((size,), x.dtype)
    storage = np.zeros(size, x.dtype)
    where = np.arange(t)[:, None] * stride + offset + np.arange(row)[None, :]
    storage[where] = np.asarray(x).reshape(t, row)
    return storage


def launch_kernel(args: tuple, block_dim: int, chip, mode: str, meta: dict | None = None, timeout_s=None):
    """Run the vector kernel on *args* (GM arguments then the tiling) on *block_dim* AIVs of *chip*."""
    return launch(kernel_entry, args, block_dim=block_dim, chip=chip, mode=mode, kernel_type="vector", meta=meta,
                  timeout_s=timeout_s)
