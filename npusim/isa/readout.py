"""Fixpipe's plain read-out (L0C's NZ fractals -> a row-major matrix, fp32 kept or rounded to fp16 / bf16) as one
compiled loop (numba), for full mode's speed.

Why: numpy's float32 -> float16 conversion costs about 1.5 ns an element on this machine (25 us of a 128 x 128
tile, half of a Fixpipe), and the numpy form also gathers the NZ blocks into a temporary and scatters the result
into the strided destination. This loop reads each L0C element once and writes its destination bits once.

The rounding is npusim.dtypes' Inf/NaN-mode round-to-nearest-even (docs/numerics.md "Conversions") on the bits:
finite values round to nearest, ties to even, past the largest finite value to Inf, into subnormals and zero by
the same rule; Inf keeps its sign; every NaN becomes the target's quiet NaN with the source's sign (dtypes'
``_fast_rne``). tests/npusim/test_readout.py compares it with ``npusim.dtypes.cast`` bit for bit (every exponent,
the rounding boundaries, random bits) and the whole Fixpipe with and without it. cube.py imports this module on
the first plain Fixpipe in full mode (numba's import is not paid by timing mode) and keeps the numpy form where
numba is not installed.
"""
from __future__ import annotations

import numpy as np
from numba import njit

#: *mode* of :func:`nz_to_nd`: the bits copied (fp32 -> fp32), rounded to fp16, rounded to bf16.
COPY, TO_F16, TO_BF16 = 0, 1, 2


def nz_to_nd(src: np.ndarray, step: int, dst: np.ndarray, mode: int) -> None:
    """dst[r, c] = L0C element (r, c) of an NZ matrix, converted by *mode*.

    *src*: L0C's words (uint32) from the matrix's start; column block j (16 columns) starts at word j * *step*,
    its rows of 16 words contiguous. *dst*: the destination's (rows, cols) view as uint32 (COPY) or uint16 (the
    roundings), any strides."""
    _nz_to_nd(src, step, dst, mode)


@njit(cache=True, inline="always")
def _f16_bits(f):
    """fp32 bits *f* -> fp16 bits, RNE, overflow -> Inf, NaN -> sign | 0x7E00."""
    sign = (f >> 16) & 0x8000
    a = f & 0x7FFFFFFF
    if a >= 0x7F800000:
        return sign | (0x7C00 if a == 0x7F800000 else 0x7E00)
    if a >= 0x477FF000:  # 65520 and up: past the largest fp16 (65504) by at least half a step
        return sign | 0x7C00
    if a >= 0x38800000:  # a normal fp16: rebias the exponent, round away 13 mantissa bits
        h = (a >> 13) - (112 << 10)
        rest = a & 0x1FFF
        if rest > 0x1000 or (rest == 0x1000 and (h & 1)):
            h += 1
        return sign | h
    if a < 0x33000000:  # below 2^-25 (half the smallest subnormal; 2^-25 itself ties to 0)
        return sign
    e = a >> 23  # 102..112: a subnormal fp16 (or the smallest normal, by rounding up)
    m = (a & 0x7FFFFF) | 0x800000
    shift = 126 - e
    h = m >> shift
    rest = m & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    if rest > half or (rest == half and (h & 1)):
        h += 1
    return sign | h


@njit(cache=True, inline="always")
def _bf16_bits(f):
    """fp32 bits *f* -> bf16 bits, RNE (overflow carries into Inf), NaN -> sign | 0x7FC0."""
    if (f & 0x7FFFFFFF) > 0x7F800000:
        return ((f >> 16) & 0x8000) | 0x7FC0
    return (f + 0x7FFF + ((f >> 16) & 1)) >> 16


@njit(cache=True)
def _nz_to_nd(src, step, dst, mode):
    """:func:`nz_to_nd`."""
    rows, cols = dst.shape
    for r in range(rows):
        for c in range(cols):
            f = np.uint32(src[(c // 16) * step + r * 16 + c % 16])
            if mode == COPY:
                dst[r, c] = f
            elif mode == TO_F16:
                dst[r, c] = _f16_bits(f)
            else:
                dst[r, c] = _bf16_bits(f)
