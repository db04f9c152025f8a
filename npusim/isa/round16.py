"""fp32 -> fp16 / bf16 rounding on the bits, for the compiled data paths (numba; readout.py, half_arith.py).

npusim.dtypes' Inf/NaN-mode round-to-nearest-even (docs/numerics.md "Conversions"): finite values round to nearest,
ties to even, past the largest finite value to Inf, into subnormals and zero by the same rule; Inf keeps its sign;
a NaN becomes the target's quiet NaN with the source's sign (dtypes' ``_fast_rne``; the vector unit's arithmetic
then makes it the canonical +NaN itself). Tested against npusim.dtypes.cast in tests/npusim/test_readout.py.
"""
from __future__ import annotations

from numba import njit


@njit(cache=True, inline="always")
def f16_bits(f):
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
def bf16_bits(f):
    """fp32 bits *f* -> bf16 bits, RNE (overflow carries into Inf), NaN -> sign | 0x7FC0."""
    if (f & 0x7FFFFFFF) > 0x7F800000:
        return ((f >> 16) & 0x8000) | 0x7FC0
    return (f + 0x7FFF + ((f >> 16) & 1)) >> 16
