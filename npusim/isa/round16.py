"""fp32 -> fp16 / bf16 rounding on the bits, compiled (numba), and the two full-mode data paths that round with it:
Fixpipe's plain read-out (:func:`nz_to_nd`) and the vector unit's fp16 Add / Sub / Mul (:func:`binary`); also
its fp16 Max / Min (:func:`select`: a compare-select, no rounding).

Why one module: numba's on-disk cache (``cache=True``) is invalidated by a change of the source file of the
compiled function only, not of a file whose functions it inlines; so the rounding and its callers live together,
and an edit of the rounding recompiles them.

Rounding: npusim.dtypes' Inf/NaN-mode round-to-nearest-even (docs/numerics.md "Conversions"): finite values round
to nearest, ties to even, past the largest finite value to Inf, into subnormals and zero by the same rule; Inf keeps
its sign; a NaN becomes the target's quiet NaN with the source's sign (dtypes' ``_fast_rne``), or, for the vector
unit's arithmetic, the canonical +NaN 0x7E00 (npusim/isa/vector/numerics.py ``canonical_nan``).

Read-out: numpy's float32 -> float16 conversion costs about 1.5 ns an element here (25 us of a 128 x 128 tile, half
of a Fixpipe), and the numpy form also gathers the NZ blocks into a temporary and scatters the result into the
strided destination; :func:`nz_to_nd` reads each L0C element once and writes its destination bits once.

fp16 arithmetic: numpy's fp16 loops convert every element to float32 and back one by one; :func:`binary` widens by
table, operates in float32 and rounds the bits. An fp16 sum, difference or product computed in float32 and rounded
once to fp16 is the correctly rounded fp16 result (float32's 24 bits >= 2 x 11 + 2, so the double rounding is
innocuous), which is what numpy's fp16 loops compute too.

Tests: tests/npusim/test_readout.py (the rounding against npusim.dtypes.cast at every exponent and rounding
boundary and on random bits; whole Fixpipes with and without the kernel), tests/npusim/test_half_arith.py (binary
against numpy's fp16 ufuncs and canonical_nan; select against numerics.vmax / vmin's numpy form). Callers import
this module on first use (npusim/isa/compiled.py: numba's import is not paid by timing mode) and keep their numpy
forms where numba is not installed.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from npusim.isa.vector.numerics import _WIDE as _WIDE16


@njit(cache=True, inline="always")
def f16_bits(f):
    """fp32 bits *f* -> fp16 bits, RNE, overflow -> Inf, NaN -> sign | 0x7E00. Straight-line (every case computed,
    one selected) so that LLVM vectorises the loops that call it; RNE by adding half a step less one plus the
    kept part's lowest bit, then truncating."""
    sign = (f >> 16) & 0x8000
    a = f & 0x7FFFFFFF
    normal = (a - (112 << 23) + 0xFFF + ((a >> 13) & 1)) >> 13  # exponent rebiased, 13 mantissa bits rounded off
    # a subnormal fp16 (2^-25 <= |x| < 2^-14): 14..24 bits of 1.m rounded off; clamped to 14..31 so that every
    # shift below is defined for every input (LLVM may assume an undefined shift cannot happen)
    shift = max(min(126 - (a >> 23), 31), 14)
    m = (a & 0x7FFFFF) | 0x800000
    sub = (m + (1 << (shift - 1)) - 1 + ((m >> shift) & 1)) >> shift  # 0 below 2^-25 (shift 25..31)
    big = 0x7E00 if a > 0x7F800000 else 0x7C00  # NaN, or Inf (Inf itself and 65520 and up)
    low = normal if a >= 0x38800000 else sub
    return sign | (big if a >= 0x477FF000 else low)


@njit(cache=True, inline="always")
def bf16_bits(f):
    """fp32 bits *f* -> bf16 bits, RNE (overflow carries into Inf), NaN -> sign | 0x7FC0."""
    if (f & 0x7FFFFFFF) > 0x7F800000:
        return ((f >> 16) & 0x8000) | 0x7FC0
    return (f + 0x7FFF + ((f >> 16) & 1)) >> 16


#: *mode* of :func:`nz_to_nd`: the bits copied (fp32 -> fp32), rounded to fp16, rounded to bf16.
COPY, TO_F16, TO_BF16 = 0, 1, 2


def nz_to_nd(src: np.ndarray, step: int, dst: np.ndarray, pitch: int, rows: int, cols: int, mode: int) -> None:
    """dst[r * pitch + c] = L0C element (r, c) of an NZ matrix converted by *mode*, r < *rows*, c < *cols*.

    *src*: L0C's words (uint32) from the matrix's start; column block j (16 columns) starts at word j * *step*,
    its rows of 16 words contiguous. *dst*: the destination from the matrix's first element, contiguous, as uint32
    (COPY) or uint16 (the roundings); rows *pitch* >= *cols* elements apart (the caller checked the bounds)."""
    _nz_to_nd(src, step, dst, pitch, rows, cols, mode)


@njit(cache=True)
def _nz_to_nd(src, step, dst, pitch, rows, cols, mode):
    """:func:`nz_to_nd`: one loop per *mode* (the test outside, so that LLVM vectorises the loops)."""
    if mode == COPY:
        _copy(src, step, dst, pitch, rows, cols)
    elif mode == TO_F16:
        _to_f16(src, step, dst, pitch, rows, cols)
    else:
        _to_bf16(src, step, dst, pitch, rows, cols)


def _rows_converted(convert):
    """The read-out loop of one *mode*, each element through *convert* (a compiled function of fp32 bits): one
    definition for the three modes, each its own loop (*convert* is a constant of it: LLVM inlines it and
    vectorises each loop)."""
    @njit(cache=True, inline="always")
    def loop(src, step, dst, pitch, rows, cols):
        for r in range(rows):
            for c0 in range(0, cols, 16):
                w = min(16, cols - c0)
                s = src[(c0 // 16) * step + r * 16:][:w]  # 16 contiguous words of one row
                d = dst[r * pitch + c0:][:w]
                for lane in range(w):  # NOTE: on slices, for performance reasons: indexing the whole arrays keeps
                    d[lane] = convert(s[lane])  # LLVM from vectorising (numba's negative-index handling), 4x slower
    return loop


@njit(cache=True, inline="always")
def _same_bits(f):
    return f


_copy, _to_f16, _to_bf16 = (_rows_converted(convert) for convert in (_same_bits, f16_bits, bf16_bits))


ADD, SUB, MUL = 0, 1, 2
#: float32 value of every fp16 bit pattern (exact): numerics' widening table
_WIDE = _WIDE16[np.dtype(np.float16)]


def binary(op: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fp16 *a* (op) *b*, broadcast together (at most 3 axes), as a new fp16 array."""
    shape = a.shape
    if b.shape != shape:  # NOTE: broadcast_to (read-only views), not broadcast_arrays, whose views warn in numba
        shape = np.broadcast_shapes(shape, b.shape)
        a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    lead = (1,) * (3 - a.ndim)
    out = np.empty(shape, np.float16)
    _binary(op, a.view(np.uint16).reshape(lead + shape), b.view(np.uint16).reshape(lead + shape), _WIDE,
            out.view(np.uint16).reshape(lead + shape))
    return out


@njit(cache=True)
def _binary(op, a, b, table, out):
    """out = RNE16(table[a] (op) table[b]) element by element, NaN -> 0x7E00."""
    n0, n1, n2 = out.shape
    row = np.empty(n2, np.float32)
    bits = row.view(np.uint32)
    for i in range(n0):
        for j in range(n1):
            if op == ADD:
                for k in range(n2):
                    row[k] = table[a[i, j, k]] + table[b[i, j, k]]
            elif op == SUB:
                for k in range(n2):
                    row[k] = table[a[i, j, k]] - table[b[i, j, k]]
            else:
                for k in range(n2):
                    row[k] = table[a[i, j, k]] * table[b[i, j, k]]
            for k in range(n2):
                f = bits[k]
                out[i, j, k] = 0x7E00 if (f & 0x7FFFFFFF) > 0x7F800000 else f16_bits(f)


def select(greater: bool, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The vector unit's fp16 compare-select (numerics.vmax / vmin): a if a >= b (*greater*; else a <= b) else b,
    compared as values (-0 == +0, so max(-0, +0) = -0: the operands' own bits), 0x7E00 where either is NaN; *a*
    and *b* broadcast together (at most 3 axes); a new fp16 array. No rounding: the result is one operand's bits.

    Compared on the bits: a non-NaN fp16 orders as its magnitude bits (exponent above mantissa) with the sign of
    the value, both zeros as 0; NaN is a magnitude above Inf's 0x7C00."""
    if a.ndim == 2 and b.shape == a.shape:  # the softmax's row-max folds: no reshaping
        out = np.empty(a.shape, np.float16)
        _select2(greater, a.view(np.uint16), b.view(np.uint16), out.view(np.uint16))
        return out
    shape = a.shape
    if b.shape != shape:  # as binary's
        shape = np.broadcast_shapes(shape, b.shape)
        a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    lead = (1,) * (3 - a.ndim)
    out = np.empty(shape, np.float16)
    _select3(greater, a.view(np.uint16).reshape(lead + shape), b.view(np.uint16).reshape(lead + shape),
             out.view(np.uint16).reshape(lead + shape))
    return out


@njit(cache=True, inline="always")
def _select_row(greater, a, b, out):
    """:func:`select` on one row (1-D slices: see _copy's NOTE); the test of *greater* outside the loops."""
    if greater:
        for k in range(out.shape[0]):
            x, y = np.int32(a[k]), np.int32(b[k])
            mx, my = x & 0x7FFF, y & 0x7FFF
            vx = -mx if x & 0x8000 else mx
            vy = -my if y & 0x8000 else my
            out[k] = 0x7E00 if (mx > 0x7C00) | (my > 0x7C00) else (a[k] if vx >= vy else b[k])
    else:
        for k in range(out.shape[0]):
            x, y = np.int32(a[k]), np.int32(b[k])
            mx, my = x & 0x7FFF, y & 0x7FFF
            vx = -mx if x & 0x8000 else mx
            vy = -my if y & 0x8000 else my
            out[k] = 0x7E00 if (mx > 0x7C00) | (my > 0x7C00) else (a[k] if vx <= vy else b[k])


@njit(cache=True, inline="always")
def _select_copied(greater, a, b, out, ra, rb):
    """:func:`_select_row` on copies of the two rows in *ra*, *rb* (contiguous). NOTE: copied, for performance
    reasons: a row of a strided operand (the row-max folds read a 16 x 128 block of a wider tile) has a layout
    unknown to LLVM, which then does not vectorise the select (2.3 us instead of 1.1 us, 16 x 128)."""
    for k in range(out.shape[0]):
        ra[k] = a[k]
        rb[k] = b[k]
    _select_row(greater, ra, rb, out)


@njit(cache=True)
def _select2(greater, a, b, out):
    ra, rb = np.empty(out.shape[1], np.uint16), np.empty(out.shape[1], np.uint16)
    for i in range(out.shape[0]):
        _select_copied(greater, a[i], b[i], out[i], ra, rb)


@njit(cache=True)
def _select3(greater, a, b, out):
    ra, rb = np.empty(out.shape[2], np.uint16), np.empty(out.shape[2], np.uint16)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            _select_copied(greater, a[i, j], b[i, j], out[i, j], ra, rb)
