"""Full mode's whole-tile RowReduce / RowBroadcast (ops/common/rowops.py, FUSED) change speed only: the same
bits in every buffer they touch and the same trace as each instruction computing its own effect."""
from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest

from npusim.kernel import PipeBarrier
from npusim.launch import GmArg, launch
from npusim.types import Pipe
from ops.common import rowops
from ops.common.rowops import BroadcastRows, RowBroadcast, RowReduce
from tests.npusim.test_vector import (
    _kernel,  # GM arrays -> UB buffers, the body, UB -> GM
)
from tests.ops.helpers import bits

F16, F32, BF16 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)


def _data(rng, shape, dt):
    """Normal values with NaNs (both signs, payloads), +-0, +-Inf and huge values sprinkled in."""
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    x[rng.random(shape) < 0.05] = 6.0e4 if dt != F32 else 3.0e38  # sums that overflow
    x = x.astype(dt)
    u = bits(x)
    special = {F16: (0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E01, 0xFE00),
               BF16: (0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC1, 0xFFC0),
               F32: (0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00001, 0xFFC00000)}[dt]
    pick = rng.random(shape) < 0.04
    u[pick] = rng.choice(np.array(special, u.dtype), int(pick.sum()))
    return x


def _both(body, arrays: dict):
    """(result, arrays after) with FUSED on, then off; the inputs are not changed."""
    out = []
    for fused in (True, False):
        copies = {k: v.copy() for k, v in arrays.items()}
        old, rowops.FUSED = rowops.FUSED, fused
        try:
            res = launch(_kernel, (body, list(copies)) + tuple(GmArg(k, v) for k, v in copies.items()), block_dim=1,
                         chip="Ascend910B2", kernel_type="vector", mode="full")
        finally:
            rowops.FUSED = old
        out.append((res, copies))
    return out


def _same(fused, plain):
    (rf, af), (rp, ap) = fused, plain
    for k in af:
        assert np.array_equal(bits(af[k]), bits(ap[k])), k
    assert rf.cycles == rp.cycles
    for key, col in rf.trace.columns.items():
        assert np.array_equal(col, rp.trace.columns[key]), key
    assert rf.trace.sources == rp.trace.sources


@pytest.mark.parametrize("dt", (F16, F32))
@pytest.mark.parametrize("kind", ("max", "sum"))
@pytest.mark.parametrize("rows, cols, pitch_blocks", ((16, 960, 60), (5, 200, 8), (3, 100, 7), (8, 64, 2)))
def test_row_reduce_fused_same_bits_and_trace(dt, kind, rows, cols, pitch_blocks):
    rng = np.random.default_rng(zlib.crc32(f"{dt}{kind}{rows}{cols}".encode()))
    pitch = pitch_blocks * 32 // dt.itemsize
    if pitch < cols:
        pitch = -(-cols * dt.itemsize // 32) * 32 // dt.itemsize
    lanes = 256 // dt.itemsize

    def body(src, acc, dst):
        RowReduce(kind, dst, src, acc, rows, cols, pitch)
        PipeBarrier(Pipe.V)

    arrays = {"src": _data(rng, rows * pitch, dt), "acc": _data(rng, rows * lanes, dt), "dst": _data(rng, 64, dt)}
    fused, plain = _both(body, arrays)
    _same(fused, plain)
    assert not np.array_equal(bits(fused[1]["dst"]), bits(arrays["dst"]))


@pytest.mark.parametrize("dt", (F16, F32, BF16))
@pytest.mark.parametrize("op", ("sub", "mul", "div"))
@pytest.mark.parametrize("rows, cols, pitch_blocks, in_place", ((16, 960, 60, True), (5, 192, 8, False),
                                                                 (3, 48, 3, True), (9, 40, 4, False)))
def test_row_broadcast_fused_same_bits_and_trace(dt, op, rows, cols, pitch_blocks, in_place):
    rng = np.random.default_rng(zlib.crc32(f"{dt}{op}{rows}{cols}".encode()))
    pitch = max(pitch_blocks * 32 // dt.itemsize, -(-cols * dt.itemsize // 32) * 32 // dt.itemsize)

    def body(src, dst, vals, blocks):
        BroadcastRows(blocks, vals, rows)
        PipeBarrier(Pipe.V)
        RowBroadcast(op, src if in_place else dst, src, blocks, rows, cols, pitch)
        PipeBarrier(Pipe.V)

    arrays = {"src": _data(rng, rows * pitch, dt), "dst": _data(rng, rows * pitch, dt),
              "vals": _data(rng, 16, dt), "blocks": np.zeros(16 * 32 // dt.itemsize, dt)}
    fused, plain = _both(body, arrays)
    _same(fused, plain)
    changed = fused[1]["src" if in_place else "dst"]
    assert not np.array_equal(bits(changed), bits(arrays["src" if in_place else "dst"]))
