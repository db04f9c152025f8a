"""Numeric rules of the vector unit (docs/numerics.md "Vector instructions"): one rounding per
result, canonical quiet NaNs, compare-select max/min, scalar operand conversion, pairwise trees.
"""
from __future__ import annotations

import contextlib
import contextvars

import numpy as np

from npusim.dtypes import cast as _dtype_cast
from npusim.errors import NpusimError
from npusim.isa import compiled
from npusim.isa.vector.common import BF16, F16, F32, FLOATS, UINT

#: The NaN every arithmetic result that is NaN becomes (docs/numerics.md canonical quiet NaNs, sign +).
_QNAN = {F16: 0x7E00, BF16: 0x7FC0, F32: 0x7FC00000}


def canonical_nan(r: np.ndarray) -> np.ndarray:
    """Rewrite every NaN of the float array *r* (in place) to the dtype's positive quiet NaN."""
    bits = _QNAN.get(r.dtype)
    if bits is not None:
        if r.dtype.itemsize == 2:  # NOTE: NaN <=> magnitude bits above Inf's, tested on the integers, for
            # performance reasons: numpy's isnan converts each 16-bit element (benchmarks/pfa.py)
            mag = np.bitwise_and(r.view(np.uint16), _MAG16)
            if mag.size and _max(mag, axis=None) > _INF16[r.dtype]:
                r.view(np.uint16)[mag > _INF16[r.dtype]] = bits
            return r
        nan = np.isnan(r)
        if nan.any():
            r.view(UINT[r.dtype.itemsize])[nan] = bits
    return r


_INF16 = {F16: 0x7C00, BF16: 0x7F80}  # the magnitude bits of +Inf
_MAG16 = np.uint16(0x7FFF)
_max = np.maximum.reduce  # NOTE: the ufunc's reduce, not ndarray.max's Python wrapper (about 1 us a call)


def round_f64(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """float64 values rounded once (nearest-even, overflow -> inf) to float dtype *dt*; NaN canonical.

    numpy's float64 -> fp16/fp32 casts are correctly rounded; bf16 goes through npusim.dtypes.cast
    (numpy would round twice, via fp32).
    """
    if dt is BF16:
        r = _dtype_cast(x, BF16, "rint")
    elif _QUIET.get():
        r = x.astype(dt)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            r = x.astype(dt)
    return canonical_nan(r)


#: True inside :func:`quiet_fp`, whose block runs with numpy's floating-point errors ignored already.
_QUIET = contextvars.ContextVar("npusim_quiet_fp", default=False)


@contextlib.contextmanager
def quiet_fp():
    """np.errstate(all="ignore") for a whole block (a kernel stream in full mode: npusim/launch.py), and
    :func:`ieee` / :func:`via_f64` told so: they then skip their own errstate (NOTE: about 3 us a call,
    for performance reasons: full mode runs one per vector instruction, benchmarks/pfa.py). Code inside
    must not tighten the error state (no errstate "raise"/"warn" around these calls)."""
    with np.errstate(all="ignore"):
        token = _QUIET.set(True)
        try:
            yield
        finally:
            _QUIET.reset(token)


def ieee(ufunc, dt: np.dtype, *args: np.ndarray) -> np.ndarray:
    """*ufunc* applied in dtype *dt*: IEEE, correctly rounded; ints wrap (two's complement).

    fp16/fp32: numpy's ufunc is the IEEE operation. bf16: the float32 result rounded once, which is
    exact for + - * (float32's 24 bits >= 2 x 8 + 2, so the double rounding is innocuous).
    """
    if _QUIET.get():
        return _ieee(ufunc, dt, args)
    with np.errstate(all="ignore"):
        return _ieee(ufunc, dt, args)


def _ieee(ufunc, dt: np.dtype, args: tuple) -> np.ndarray:
    """:func:`ieee` with the floating-point errors already ignored."""
    if dt is BF16:
        return canonical_nan(ufunc(*(a.astype(np.float32) for a in args)).astype(BF16))
    if dt is F16 and _HALF_KERNEL and len(args) == 2:
        op = _HALF_OPS.get(ufunc)
        a, b = args
        if op is not None and _compiled16(a, b):
            # NOTE: compiled (npusim/isa/round16.py: the same bits), for performance reasons: numpy's fp16
            # arithmetic converts element by element (benchmarks/pfa.py's softmax tiles)
            return compiled.round16.binary(op, a, b)
    r = ufunc(*args)
    return canonical_nan(r) if dt in FLOATS else r


#: float32 value of every fp16 / bf16 bit pattern (exact: float32 holds them all), for :func:`widen16`.
#: NOTE: Max/Min compare 16-bit floats as these (numpy compares fp16 element by element through a
#: conversion), for performance reasons (benchmarks/pfa.py: the softmax's row max).
_WIDE = {dt: np.arange(65536, dtype=np.uint16).view(dt).astype(np.float32) for dt in (F16, BF16)}


#: fp16 Add / Sub / Mul / Max / Min (and Adds / Muls / Maxs / Mins) of at least _HALF_MIN elements run the compiled
#: loop of npusim/isa/round16.py when numba is installed (below that numpy's call costs less than the kernel's).
_HALF_KERNEL = compiled.HAVE_NUMBA
_HALF_OPS = {np.add: 0, np.subtract: 1, np.multiply: 2}
_HALF_MIN = 256


def widen16(a: np.ndarray) -> np.ndarray:
    """The fp16 or bf16 array *a* as float32 (exact), by table look-up of its bit patterns."""
    return _WIDE[a.dtype].take(a.view(np.uint16))


def via_f64(ufunc, dt: np.dtype, *args: np.ndarray) -> np.ndarray:
    """*ufunc* computed in float64 from the exact inputs, rounded once to *dt* (Exp, Ln, Sqrt, Div)."""
    if _QUIET.get():
        return round_f64(ufunc(*(a.astype(np.float64) for a in args)), dt)
    with np.errstate(all="ignore"):
        r = ufunc(*(a.astype(np.float64) for a in args))
    return round_f64(r, dt)


def vmax(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Max as the vector unit's compare-select: a if a >= b else b (so max(-0, +0) = -0); NaN wins.

    NOTE: not np.maximum, whose choice between -0 and +0 depends on the SIMD path.
    """
    if a.dtype in _WIDE:  # compared as float32 (exact), the 16-bit values selected as they are
        if _compiled16(a, b):
            return compiled.round16.select(True, a, b)
        wa, wb = widen16(a), widen16(b)
        return _nan_wins(np.where(wa >= wb, a, b), wa, wb)
    return _nan_wins(np.where(a >= b, a, b), a, b)


def _compiled16(a: np.ndarray, b: np.ndarray) -> bool:
    """True where an fp16 operation on *a* and *b* runs npusim/isa/round16.py's loop (the same bits). NOTE: for
    performance reasons (benchmarks/pfa.py: softmax tiles, the row-max folds): numpy's fp16 paths convert
    element by element."""
    return (a.dtype is F16 and b.dtype is F16 and _HALF_KERNEL and max(a.size, b.size) >= _HALF_MIN
            and a.ndim <= 3 and b.ndim <= 3)


def _nan_wins(r: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """*r* with NaN where *a* or *b* (its operands, or their exact float32 values) is NaN."""
    if r.dtype in FLOATS:
        nan = np.isnan(a) | np.isnan(b)
        if nan.any():
            r[nan] = np.nan
    return r


def vmin(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Min: a if a <= b else b; NaN wins."""
    if a.dtype in _WIDE:
        if _compiled16(a, b):
            return compiled.round16.select(False, a, b)
        wa, wb = widen16(a), widen16(b)
        return _nan_wins(np.where(wa <= wb, a, b), wa, wb)
    return _nan_wins(np.where(a <= b, a, b), a, b)


def to_scalar(value, dt: np.dtype, who: str):
    """The scalar operand converted to the tensor dtype (floats: nearest-even once; ints: exact)."""
    if dt in FLOATS:
        return round_f64(np.array([float(value)]), dt)[0]
    iv = int(value)
    info = np.iinfo(dt)
    if iv != value or not info.min <= iv <= info.max:
        raise NpusimError(f"{who}: scalar {value!r} is not a {dt.name} value")
    return dt.type(iv)


def tree(vals: np.ndarray, op) -> np.ndarray:
    """Reduce the last axis (a power of two) by adjacent pairs: (0+1, 2+3, ...), then again."""
    with np.errstate(all="ignore"):
        while vals.shape[-1] > 1:
            vals = op(vals[..., 0::2], vals[..., 1::2])
    return vals[..., 0]
