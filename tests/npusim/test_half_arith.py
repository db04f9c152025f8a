"""The vector unit's compiled fp16 Add / Sub / Mul (npusim/isa/round16.py) against numpy's fp16 ufuncs followed by
canonical_nan (the path it replaces in npusim/isa/vector/numerics.py), bit for bit: random bit patterns (NaN
payloads of both signs, Inf, subnormals, signed zeros, overflow), strided and broadcast operands (a 0-d scalar,
a block read with stride 0), 1 to 3 axes. Its fp16 Max / Min (select) against numerics.vmax / vmin's numpy form
and a restatement of the compare-select: every fp16 pattern against the edge values (signed zeros, NaNs of both
signs and several payloads, Inf, subnormals, equal values), random bits, strided and broadcast operands."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.isa.vector import numerics

from npusim.isa import round16 as half_arith
from npusim.isa.vector.numerics import canonical_nan

OPS = {half_arith.ADD: np.add, half_arith.SUB: np.subtract, half_arith.MUL: np.multiply}
SELECTS = {True: np.greater_equal, False: np.less_equal}  # select's *greater*: Max, Min


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


def strided_operands(rng, n: int):
    """(tile, blocks, rows): every other column of an (n, 96) tile (a strided view), one 16-element block per row
    (read for every block of the row), and the tile as (n, 3, 16) rows of blocks."""
    tile = bits16(rng, (n, 96))[:, ::2]
    blocks = bits16(rng, (n, 1, 16))
    return tile, blocks, tile.reshape(n, 3, 16)


@pytest.mark.parametrize("op", sorted(OPS))
def test_strided_and_broadcast_operands(op):
    rng = np.random.default_rng(op)
    tile, blocks, rows = strided_operands(rng, 16)
    for a, b in ((tile, tile[::-1]), (rows, np.broadcast_to(blocks, rows.shape)), (tile, np.asarray(np.float16(-3.5))),
                 (np.asarray(np.float16(65504.0)), tile)):
        got = half_arith.binary(op, a, b)
        want = reference(op, a, b)
        assert got.shape == want.shape
        assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def select_reference(op: bool, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The compare-select restated (docs/numerics.md): a where a >= b (a <= b for Min) on the exact values, else b,
    so -0 and +0 keep the chosen operand's sign; 0x7E00 where either is NaN. As uint16 bits."""
    a, b = np.broadcast_arrays(a, b)
    wa, wb = a.astype(np.float32), b.astype(np.float32)
    with np.errstate(invalid="ignore"):
        out = np.where(SELECTS[op](wa, wb), a, b).view(np.uint16)
    out[np.isnan(wa) | np.isnan(wb)] = 0x7E00
    return out


def numpy_form(op: bool, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numerics.vmax / vmin with the compiled loop switched off (the numpy path it replaces), as uint16 bits."""
    fn = numerics.vmax if op else numerics.vmin
    kernel = numerics._HALF_KERNEL
    numerics._HALF_KERNEL = False
    try:
        return fn(a, b).view(np.uint16)
    finally:
        numerics._HALF_KERNEL = kernel


def check_select(op: bool, a: np.ndarray, b: np.ndarray) -> None:
    """The compiled select, by itself and through numerics (which must take it), against both references."""
    assert numerics._compiled16(a, b)
    want = select_reference(op, a, b)
    assert np.array_equal(numpy_form(op, a, b), want)
    fn = numerics.vmax if op else numerics.vmin
    for got in (half_arith.select(op, a, b), fn(a, b)):
        assert got.dtype == np.float16 and got.shape == want.shape
        assert np.array_equal(got.view(np.uint16), want)


#: signed zeros, NaNs (quiet and signalling payloads, both signs), Inf, extreme finite and subnormal values, and
#: neighbours that compare equal to none of them but one ulp apart
EDGES = np.array([0x0000, 0x8000, 0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7FFF, 0xFFFF, 0x7D00, 0x7C00, 0xFC00, 0x7BFF,
                  0xFBFF, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x3C00, 0xBC00, 0x3C01, 0xBC01, 0x3BFF],
                 np.uint16).view(np.float16)


@pytest.mark.parametrize("op", sorted(SELECTS))
def test_max_min_every_pattern_against_the_edges(op):
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    for e in EDGES:
        same = np.full_like(every, e)
        check_select(op, every, same)
        check_select(op, same, every)
        check_select(op, every.reshape(256, 256), np.asarray(e))  # a 0-d operand, broadcast


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), op=st.sampled_from(sorted(SELECTS)),
       shape=st.sampled_from([(256,), (2048,), (64, 128), (3, 8, 16), (5, 7, 9)]))
def test_max_min_random_bits(seed, op, shape):
    rng = np.random.default_rng(seed)
    a, b = bits16(rng, shape), bits16(rng, shape)
    pick = rng.random(shape)
    b.view(np.uint16)[pick < 0.2] = a.view(np.uint16)[pick < 0.2]  # equal values, same bits
    flip = (pick >= 0.2) & (pick < 0.4)
    b.view(np.uint16)[flip] = a.view(np.uint16)[flip] ^ np.uint16(0x8000)  # -a: +-0 pairs, +-NaN, +-Inf
    check_select(op, a, b)


@pytest.mark.parametrize("op", sorted(SELECTS))
def test_max_min_strided_and_broadcast_operands(op):
    rng = np.random.default_rng(op)
    tile, blocks, rows = strided_operands(rng, 32)
    wide = bits16(rng, (4, 8, 256))
    for a, b in ((tile, tile[::-1]), (rows, np.broadcast_to(blocks, rows.shape)), (blocks, rows),
                 (wide[..., 0::2], wide[..., 1::2]), (tile, np.asarray(np.float16(-0.0)))):
        check_select(op, a, b)
