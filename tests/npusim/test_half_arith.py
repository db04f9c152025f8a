"""The vector unit's compiled fp16 Add / Sub / Mul (npusim/isa/round16.py) against numpy's fp16 ufuncs followed by
canonical_nan (the path it replaces in npusim/isa/vector/numerics.py), bit for bit: random bit patterns (NaN
payloads of both signs, Inf, subnormals, signed zeros, overflow), strided and broadcast operands (a 0-d scalar,
a block read with stride 0), 1 to 3 axes."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.isa import round16 as half_arith
from npusim.isa.vector.numerics import canonical_nan

OPS = {half_arith.ADD: np.add, half_arith.SUB: np.subtract, half_arith.MUL: np.multiply}


def reference(op: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return canonical_nan(OPS[op](a, b))


def bits16(rng, shape) -> np.ndarray:
    """fp16 values from random bit patterns, a fifth of them near the overflow and subnormal edges."""
    x = rng.integers(0, 1 << 16, shape, dtype=np.uint16)
    edge = rng.choice(np.array([0x7BFF, 0xFBFE, 0x0001, 0x8003, 0x03FF, 0x0400, 0x7C00, 0x8000, 0x0000, 0x3C01],
                               np.uint16), shape)
    return np.where(rng.random(shape) < 0.2, edge, x).view(np.float16)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), op=st.sampled_from(sorted(OPS)),
       shape=st.sampled_from([(7,), (2048,), (5, 33), (64, 128), (3, 8, 16)]))
def test_same_bits_as_numpy_fp16(seed, op, shape):
    rng = np.random.default_rng(seed)
    a, b = bits16(rng, shape), bits16(rng, shape)
    assert np.array_equal(half_arith.binary(op, a, b).view(np.uint16), reference(op, a, b).view(np.uint16))


@pytest.mark.parametrize("op", sorted(OPS))
def test_strided_and_broadcast_operands(op):
    rng = np.random.default_rng(op)
    tile = bits16(rng, (16, 96))[:, ::2]  # every other column: a strided view
    blocks = bits16(rng, (16, 1, 16))  # one 16-element block per row, read for every block of the row
    rows = tile.reshape(16, 3, 16)
    for a, b in ((tile, tile[::-1]), (rows, np.broadcast_to(blocks, rows.shape)), (tile, np.asarray(np.float16(-3.5))),
                 (np.asarray(np.float16(65504.0)), tile)):
        got = half_arith.binary(op, a, b)
        want = reference(op, a, b)
        assert got.shape == want.shape
        assert np.array_equal(got.view(np.uint16), want.view(np.uint16))
