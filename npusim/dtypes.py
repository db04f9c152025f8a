"""Storage dtypes of the simulator and their exact conversions (docs/numerics.md "Dtypes", "Conversions").

Contents:
- the dtype registry: :data:`ALL_DTYPES`, :func:`np_dtype`, :func:`dtype_name`, :func:`itemsize`,
  :func:`is_float`, and :data:`HIFLOAT8` (uint8 storage tagged as HiFloat8 codes);
- :func:`cast`: every conversion with the Ascend C ``RoundMode`` rounding modes and a stated overflow rule;
- the HiFloat8 codec :func:`encode_hifloat8` / :func:`decode_hifloat8` (arXiv 2409.16626);
- fp32 bit helpers :func:`f32_bits`, :func:`from_f32_bits` and the Fixpipe "FP19" deq-scale word
  :func:`encode_deq_scale_u64`, :func:`decode_deq_scale_u64`, :func:`decode_deq_offset_u64`;
- :func:`quantize_int8`, the AscendQuant arithmetic.

Every narrowing goes through one integer routine (:func:`_round_to_grid`) working on float64 bits:
any fp32/fp16/bf16/int32 value is exact in float64, so the routine rounds each value exactly once.
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError

#: HiFloat8 storage: uint8 bytes tagged through dtype metadata. It compares equal to ``np.uint8`` (so
#: memory code treats it as bytes); the tag survives slicing, reshape, copy and ``view(HIFLOAT8)``,
#: and is dropped by arithmetic and ``view(np.uint8)``, which is right: codes are not numbers.
HIFLOAT8 = np.dtype(np.uint8, metadata={"npusim_dtype": "hifloat8"})

_REGISTRY = {
    "fp16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "fp32": np.dtype(np.float32),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16),
    "uint16": np.dtype(np.uint16),
    "int32": np.dtype(np.int32),
    "uint32": np.dtype(np.uint32),
    "int64": np.dtype(np.int64),
    "uint64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
    "fp8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "fp8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "hifloat8": HIFLOAT8,
}
#: Names of every storage dtype, in registry order.
ALL_DTYPES = tuple(_REGISTRY)
_ALIASES = {
    "float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
    "bool_": "bool", "float8_e4m3fn": "fp8_e4m3fn", "float8_e5m2": "fp8_e5m2", "hif8": "hifloat8",
}
_FLOATS = frozenset({"fp16", "bf16", "fp32", "fp8_e4m3fn", "fp8_e5m2", "hifloat8"})

#: Rounding modes of :func:`cast` (Ascend C ``RoundMode`` minus CAST_HYBRID, which is stochastic).
ROUND_MODES = ("none", "rint", "round", "floor", "ceil", "trunc", "odd")


def _invalid(message: str) -> AclnnError:
    return AclnnError(ACLNN_ERR_PARAM_INVALID, message)


def np_dtype(name) -> np.dtype:
    """The numpy dtype that stores *name* (a name of :data:`ALL_DTYPES`, an alias, or a dtype).

    Raises AclnnError(PARAM_INVALID) for anything that is not a storage dtype.
    """
    return _REGISTRY[dtype_name(name)]


def dtype_name(dtype) -> str:
    """The registry name of *dtype* (a numpy dtype, a scalar type, or a name/alias string).

    ``HIFLOAT8`` maps to ``"hifloat8"``, a plain ``np.uint8`` to ``"uint8"``.
    Raises AclnnError(PARAM_INVALID) for anything that is not a storage dtype.
    """
    if isinstance(dtype, str):
        key = dtype.strip().lower()
        key = _ALIASES.get(key, key)
        if key in _REGISTRY:
            return key
        raise _invalid(f"dtype: '{dtype}' is not a storage dtype (one of {', '.join(ALL_DTYPES)})")
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise _invalid(f"dtype: {dtype!r} is not a numpy dtype") from exc
    if dt.metadata and dt.metadata.get("npusim_dtype") == "hifloat8":
        return "hifloat8"
    for name, reg in _REGISTRY.items():
        if name != "hifloat8" and reg == dt:
            return name
    raise _invalid(f"dtype: {dt} is not a storage dtype (one of {', '.join(ALL_DTYPES)})")


def itemsize(name) -> int:
    """Bytes per element of storage dtype *name*."""
    return np_dtype(name).itemsize


def is_float(name) -> bool:
    """True for the floating-point storage dtypes (fp16, bf16, fp32, both fp8, hifloat8)."""
    return dtype_name(name) in _FLOATS


# ---------------------------------------------------------------- fp32 bits and the FP19 deq-scale word
def f32_bits(x) -> np.ndarray:
    """The IEEE bits of *x* as uint32 (*x* is converted to float32 first, RNE)."""
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def from_f32_bits(u) -> np.ndarray:
    """The float32 values whose IEEE bits are *u* (taken modulo 2**32)."""
    return (np.asarray(u).astype(np.uint64) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)


_FP19_MASK = 0xFFFFE000  # sign, exponent and the top 10 mantissa bits: 19 bits
_FP19_FLAG = 1 << 46  # set by npu_trans_quant_param (research/oracles.md §3)


def encode_deq_scale_u64(scale, offset=None, round_mode: str = "trunc") -> np.ndarray:
    """Pack fp32 dequant scales (and optional offsets) into the uint64 word Fixpipe reads.

    ``u = (bits(scale) & 0xFFFFE000) | 1 << 46``, and with *offset*
    ``u |= (clip(round(offset), -256, 255) & 0x1FF) << 37`` (TransQuantParamV2 / npu_trans_quant_param,
    research/oracles.md §3). *round_mode* "trunc" (their round_mode 0) just masks; "rint" (their 1,
    R_INT) first rounds the fp32 to 10 mantissa bits, ties to even. Offsets round half away from zero.
    """
    if round_mode in ("trunc", 0):
        bits = f32_bits(scale).astype(np.uint64)
    elif round_mode in ("rint", 1):
        bits = f32_bits(_round_f32_to_fp19(np.asarray(scale, np.float32))).astype(np.uint64)
    else:
        raise _invalid(f"round_mode: {round_mode!r} must be 'trunc' (0) or 'rint' (1)")
    u = (bits & np.uint64(_FP19_MASK)) | np.uint64(_FP19_FLAG)
    if offset is not None:
        off = np.asarray(offset, np.float64)
        off = np.clip(np.trunc(off + np.copysign(0.5, off)), -256, 255).astype(np.int64)
        u = u | ((off & 0x1FF).astype(np.uint64) << np.uint64(37))
    return u


def decode_deq_scale_u64(u) -> np.ndarray:
    """The fp32 scale of a deq-scale word: the float32 whose bits are the low 32 bits of *u*."""
    return from_f32_bits(np.asarray(u, np.uint64) & np.uint64(0xFFFFFFFF))


def decode_deq_offset_u64(u) -> np.ndarray:
    """The int32 offset held in bits 37..45 of a deq-scale word (9-bit two's complement)."""
    raw = ((np.asarray(u, np.uint64) >> np.uint64(37)) & np.uint64(0x1FF)).astype(np.int32)
    return np.where(raw >= 256, raw - 512, raw).astype(np.int32)


def _round_f32_to_fp19(x: np.ndarray) -> np.ndarray:
    """fp32 rounded to 10 mantissa bits, ties to even, keeping the fp32 exponent range (no overflow rule)."""
    a = x.view(np.uint32).astype(np.uint64)
    rem = a & 0x1FFF
    keep = a >> 13
    up = (rem > 0x1000) | ((rem == 0x1000) & ((keep & 1) == 1))
    out = ((keep + up) << 13).astype(np.uint32)
    finite = np.isfinite(x)
    return np.where(finite, out, a.astype(np.uint32)).view(np.float32)


# ---------------------------------------------------------------- exact rounding to a floating grid
def _resolve_mode(round_mode) -> str:
    if not isinstance(round_mode, str):
        raise _invalid(f"round_mode: {round_mode!r} must be a string such as 'rint' or 'CAST_RINT'")
    mode = round_mode.strip().lower()
    mode = mode[5:] if mode.startswith("cast_") else mode
    if mode == "hybrid":
        raise NotImplementedError("round_mode 'hybrid' (CAST_HYBRID, stochastic) is not modelled")
    if mode not in ROUND_MODES:
        raise _invalid(f"round_mode: '{round_mode}' is not one of {', '.join(ROUND_MODES)}")
    return mode


def _round_to_grid(x64: np.ndarray, quantum_exp, mode: str) -> np.ndarray:
    """Round finite float64 values onto a binary grid, exactly, with one of the :data:`ROUND_MODES`.

    *quantum_exp(e)* gives, for a value whose float64 exponent is *e*, the exponent of the grid step
    there (IEEE: ``max(e, emin) - mantissa_bits``). The significand is shifted right by the step in
    integer arithmetic, the dropped bits decide the increment, and the result is ``k * 2**step``,
    which the caller checks for overflow. Zeros keep their sign.
    """
    bits = x64.view(np.uint64)
    neg = (bits >> np.uint64(63)).astype(bool)
    mag_bits = bits & np.uint64(0x7FFF_FFFF_FFFF_FFFF)
    biased = (mag_bits >> np.uint64(52)).astype(np.int64)
    sig = (mag_bits & np.uint64((1 << 52) - 1)) | ((biased > 0).astype(np.uint64) << np.uint64(52))
    e_eff = np.maximum(biased, 1) - 1023
    step = np.asarray(quantum_exp(e_eff), np.int64)
    # NOTE: sig < 2**53, so a shift of 54 already drops everything; clipping keeps shifts defined.
    shift = np.clip(step - (e_eff - 52), 1, 54).astype(np.uint64)
    kept = sig >> shift
    rem = sig & ((np.uint64(1) << shift) - np.uint64(1))
    half = np.uint64(1) << (shift - np.uint64(1))
    inexact = rem != 0
    if mode in ("rint", "none"):
        inc = (rem > half) | ((rem == half) & ((kept & np.uint64(1)) == 1))
    elif mode == "round":
        inc = rem >= half
    elif mode == "trunc":
        inc = np.zeros_like(inexact)
    elif mode == "floor":
        inc = neg & inexact
    elif mode == "ceil":
        inc = ~neg & inexact
    else:  # odd: an inexact result takes the odd neighbour (von Neumann rounding)
        inc = inexact & ((kept & np.uint64(1)) == 0)
    mag = np.ldexp((kept + inc.astype(np.uint64)).astype(np.float64), step)
    return np.where(neg, -mag, mag)


def _apply_overflow(rounded, x64, max_finite, mode, saturate, inf_value):
    """Replace results beyond *max_finite* (and infinite inputs) by the overflow rule of docs/numerics.md.

    Non-saturating: RNE/round-half-away overflow to infinity (*inf_value*), directed modes follow IEEE
    (toward zero gives max; floor gives -inf below, ceil +inf above), round-to-odd gives max.
    Saturating: every overflow and every infinite input gives the signed max.
    """
    neg = np.signbit(x64)
    big = (np.abs(rounded) > max_finite) | np.isinf(x64)
    if saturate:
        to_inf = np.zeros_like(big)
    else:
        to_inf = np.isinf(x64)
        if mode in ("rint", "none", "round"):
            to_inf = to_inf | big
        elif mode == "floor":
            to_inf = to_inf | (big & neg)
        elif mode == "ceil":
            to_inf = to_inf | (big & ~neg)
    over = np.where(to_inf, inf_value, max_finite)
    return np.where(big, np.where(neg, -over, over), rounded)


# (mantissa bits, min normal exponent, max finite, has inf, canonical quiet NaN bits)
_IEEE = {
    "fp16": (10, -14, 65504.0, True, 0x7E00),
    "bf16": (7, -126, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), True, 0x7FC0),
    "fp32": (23, -126, float(np.finfo(np.float32).max), True, 0x7FC00000),
    "fp8_e4m3fn": (3, -6, 448.0, False, 0x7F),
    "fp8_e5m2": (2, -14, 57344.0, True, 0x7E),
}
_UINT_OF = {1: np.uint8, 2: np.uint16, 4: np.uint32}
# Default overflow behaviour per float target: A2/A3 run in Inf/NaN mode; fp8/HiF8 quantising kernels
# set SatMode::SAT (docs/numerics.md "Overflow").
_DEFAULT_SATURATE = {"fp16": False, "bf16": False, "fp32": False,
                     "fp8_e4m3fn": True, "fp8_e5m2": True, "hifloat8": True}


def _to_ieee(x64: np.ndarray, name: str, mode: str, saturate: bool) -> np.ndarray:
    mbits, emin, max_finite, has_inf, nan_bits = _IEEE[name]
    finite = np.where(np.isfinite(x64), x64, 0.0)
    rounded = _round_to_grid(finite, lambda e: np.maximum(e, emin) - mbits, mode)
    rounded = _apply_overflow(rounded, x64, max_finite, mode, saturate, np.inf if has_inf else np.nan)
    dt = _REGISTRY[name]
    # Exact: every value of *rounded* is representable in the target (or is +-inf / NaN).
    with np.errstate(invalid="ignore"):
        out = rounded.astype(dt)
    return _put_nans(out, x64, np.isnan(x64) | np.isnan(rounded), nan_bits)


def _put_nans(out: np.ndarray, x64: np.ndarray, nan: np.ndarray, nan_bits: int) -> np.ndarray:
    """Write the canonical quiet NaN, with the source's sign, where *nan* is set (a NaN source, or
    an e4m3fn overflow, which has no infinity to go to)."""
    if nan.any():
        width = out.dtype.itemsize * 8
        ubits = out.view(_UINT_OF[out.dtype.itemsize])
        sign = np.signbit(x64).astype(ubits.dtype) << (width - 1)
        ubits[nan] = sign[nan] | nan_bits
    return out


# ---------------------------------------------------------------- HiFloat8 (arXiv 2409.16626)
def _hif8_table() -> np.ndarray:
    """float32 value of each of the 256 HiF8 codes (docs/numerics.md "HiFloat8").

    Byte = sign | dot | exponent | mantissa. Dot (prefix code): 11 -> 4 exponent bits + 1 mantissa
    bit, 10 -> 3 + 2, 01 -> 2 + 3, 001 -> 1 + 3, 0001 -> 0 + 3, 0000 -> denormal with 3 bits M,
    value 2**(M - 23). The exponent is sign-magnitude (first bit 1 = negative) with an implicit
    leading 1 in the magnitude. 0x00 = 0, 0x80 = NaN, 0x6F / 0xEF = +-Inf.
    """
    code = np.arange(256, dtype=np.int64)
    r = code & 0x7F
    top2, top3, top4 = r >> 5, r >> 4, r >> 3
    is_d4, is_d3, is_d2 = top2 == 3, top2 == 2, top2 == 1
    is_d1, is_dml = top3 == 1, top4 == 0
    exp_neg = np.where(is_d1, (r >> 3) & 1, (r >> 4) & 1)
    exp_mag = np.select([is_d4, is_d3, is_d2, is_d1],
                        [8 + ((r >> 1) & 7), 4 + ((r >> 2) & 3), 2 + ((r >> 3) & 1), 1], 0)
    mbits = np.select([is_d4, is_d3], [1, 2], 3)
    frac = (r & ((1 << mbits) - 1)) / (1 << mbits)
    val = np.ldexp(1.0 + frac, np.where(exp_neg == 1, -exp_mag, exp_mag))
    val = np.where(is_dml, np.ldexp(1.0, (r & 7) - 23), val)
    val = np.where(code >= 128, -val, val)
    val[[0x00, 0x80, 0x6F, 0xEF]] = [0.0, np.nan, np.inf, -np.inf]
    table = val.astype(np.float32)
    table.flags.writeable = False
    return table


_HIF8_VALUES = _hif8_table()
_HIF8_POS_CODES = np.array([c for c in range(128) if c != 0x6F], dtype=np.uint8)
_HIF8_ORDER = np.argsort(_HIF8_VALUES[_HIF8_POS_CODES])
_HIF8_SORTED_VALUES = _HIF8_VALUES[_HIF8_POS_CODES][_HIF8_ORDER].astype(np.float64)
_HIF8_SORTED_CODES = _HIF8_POS_CODES[_HIF8_ORDER]
_HIF8_MAX = 32768.0  # 0x6E: exponent 15, mantissa 0 (the 1.5 * 2**15 pattern is Inf)


def _hif8_step_exp(e: np.ndarray) -> np.ndarray:
    """Grid step exponent of HiF8 in binade *e*: 3/2/1 mantissa bits for |e| <= 3 / 7 / 15, none in
    the denormal binades -22..-16, and a fixed 2**-22 step below (only 0 and 2**-22 live there)."""
    ae = np.abs(e)
    mbits = np.select([ae <= 3, ae <= 7], [3, 2], 1)
    mbits = np.where(e <= -16, 0, mbits)
    return np.where(e < -22, -22, e - mbits)


def encode_hifloat8(x, round_mode: str = "round", saturate: bool = True) -> np.ndarray:
    """Encode values (exact in float64: fp32, fp16, bf16...) as HiF8 codes (dtype :data:`HIFLOAT8`).

    *round_mode* "round"/"none" is the paper's and the hardware's TA (ties away from zero); the other
    :data:`ROUND_MODES` are exact too, though Ascend only offers TA and the stochastic HYBRID.
    Overflow (a rounded magnitude above 2**15, i.e. from 1.25 * 2**15 up under TA) and +-inf give
    +-2**15 when *saturate*, else +-Inf. NaN -> 0x80; results of magnitude 0 -> 0x00 (no -0).
    """
    mode = _resolve_mode(round_mode)
    x64 = np.asarray(x).astype(np.float64)
    mode = "round" if mode == "none" else mode
    rounded = _round_to_grid(np.where(np.isfinite(x64), x64, 0.0), _hif8_step_exp, mode)
    rounded = _apply_overflow(rounded, x64, _HIF8_MAX, mode, saturate, np.inf)
    mag = np.abs(rounded)
    finite = np.isfinite(mag)
    idx = np.searchsorted(_HIF8_SORTED_VALUES, np.where(finite, mag, 0.0))
    code = np.where(finite, _HIF8_SORTED_CODES[np.minimum(idx, len(_HIF8_SORTED_CODES) - 1)], 0x6F)
    code = np.where(np.signbit(rounded) & (mag != 0), code | 0x80, code)
    code = np.where(np.isnan(x64), 0x80, code)
    return code.astype(np.uint8).view(HIFLOAT8)


def decode_hifloat8(codes) -> np.ndarray:
    """float32 value of HiF8 *codes* (any uint8 array; the :data:`HIFLOAT8` tag is not required)."""
    return _HIF8_VALUES[np.asarray(codes).astype(np.uint8)]


# ---------------------------------------------------------------- cast
def _to_float64(src: np.ndarray, name: str) -> np.ndarray:
    if name == "hifloat8":
        return decode_hifloat8(src).astype(np.float64)
    if name in ("int64", "uint64"):
        x64 = src.astype(np.float64)
        if np.any(np.abs(x64) > 2.0**53):
            raise NotImplementedError(f"cast from {name} beyond 2**53 to a float is not modelled")
        return x64
    with np.errstate(invalid="ignore"):  # ml_dtypes warns on NaN, which converts exactly anyway
        return src.astype(np.float64)


def _round_integral(x64: np.ndarray, mode: str) -> np.ndarray:
    """Round float64 values to integral values (exact float64 operations)."""
    if mode in ("rint", "none"):
        return np.rint(x64)
    if mode == "floor":
        return np.floor(x64)
    if mode == "ceil":
        return np.ceil(x64)
    t = np.trunc(x64)
    if mode == "trunc":
        return t
    if mode == "round":  # half away from zero; x - trunc(x) is exact
        return t + np.where(np.abs(x64 - t) >= 0.5, np.sign(x64), 0.0)
    fl = np.floor(x64)  # odd
    return np.where(x64 == fl, x64, np.where(np.fmod(fl, 2.0) != 0, fl, fl + 1.0))


def _float_to_int(x64: np.ndarray, name: str, mode: str) -> np.ndarray:
    dt = _REGISTRY[name]
    info = np.iinfo(dt)
    with np.errstate(invalid="ignore"):  # +-inf pass through the rounding and are clipped below
        r = _round_integral(np.where(np.isnan(x64), 0.0, x64), mode)
    hi, lo = r >= float(info.max) + 1.0, r < float(info.min)  # float(2**63 - 1) would round up
    safe = np.where(hi | lo, 0.0, r).astype(dt)
    return np.where(hi, info.max, np.where(lo, info.min, safe)).astype(dt)


def _int_to_int(src: np.ndarray, name: str) -> np.ndarray:
    dt = _REGISTRY[name]
    info, sinfo = np.iinfo(dt), np.iinfo(src.dtype)
    if sinfo.min == 0:
        return np.minimum(src, src.dtype.type(min(info.max, sinfo.max))).astype(dt)
    return np.clip(src, max(info.min, sinfo.min), min(info.max, sinfo.max)).astype(dt)


def cast(x, to, round_mode: str = "none", saturate: bool | None = None, src_dtype=None) -> np.ndarray:
    """Convert array *x* to storage dtype *to*, exactly as docs/numerics.md "Conversions" states.

    *round_mode*: one of :data:`ROUND_MODES` or its Ascend spelling (``"CAST_RINT"``). ``"none"`` is
    CAST_NONE: exact when nothing is lost, otherwise RINT (round half to even), except for a HiFloat8
    target where it is TA (half away from zero), the only deterministic mode Ascend has for HiF8.
    Between two float formats of the same name a mode other than "none" rounds to an integral value
    (Ascend Cast float->float).
    *saturate*: float targets only. None takes the target's default: False (Inf/NaN mode, A2/A3
    default) for fp16/bf16/fp32, True for fp8 and HiFloat8. Integer targets always saturate and turn
    NaN into 0; ``saturate=False`` there raises NotImplementedError (wrapping is not modelled).
    *src_dtype*: name of the source dtype when *x*'s numpy dtype does not say it (HiF8 codes in a
    plain uint8 array). float64 sources are accepted (for goldens); they are rounded once.
    Raises AclnnError(PARAM_INVALID) for unknown dtypes or modes.
    """
    src = np.asarray(x)
    key = None
    if src_dtype is None and src.dtype.metadata is None and getattr(to, "metadata", None) is None:
        key = (src.dtype, to, round_mode, saturate)
        try:
            plan = _PLANS.get(key)
        except TypeError:  # an unhashable *to*: resolved below (and rejected there)
            plan = key = None
        if plan is not None:
            return _convert(src, *plan)
    if src_dtype is not None:
        src_name = dtype_name(src_dtype)
    elif src.dtype == np.float64:
        src_name = "fp64"
    else:
        src_name = dtype_name(src.dtype)
    dst_name = dtype_name(to)
    mode = _resolve_mode(round_mode)
    dst_is_int = dst_name not in _FLOATS and dst_name != "bool"
    if dst_is_int and saturate is False:
        raise NotImplementedError(f"cast to {dst_name} without saturation (wrap-around) is not modelled")
    sat = _DEFAULT_SATURATE.get(dst_name, True) if saturate is None else bool(saturate)
    if key is not None and len(_PLANS) < 4096:
        _PLANS[key] = (src_name, dst_name, mode, sat)
    return _convert(src, src_name, dst_name, mode, sat)


#: (source dtype, *to*, round_mode, saturate) -> resolved (source name, target name, mode, overflow rule)
#: of :func:`cast` calls without metadata dtypes (NOTE: the names resolved once, for performance reasons:
#: the vector Cast and Fixpipe call cast() per instruction in full mode, benchmarks/pfa.py)
_PLANS: dict = {}


def _convert(src: np.ndarray, src_name: str, dst_name: str, mode: str, sat: bool) -> np.ndarray:
    """:func:`cast` once the names, the mode and the overflow rule are resolved: a table look-up or
    :func:`_cast_values`."""
    if src.ndim and src.size >= _TABLE_MIN.get(src.dtype.itemsize, src.size + 1) and src_name in _TABLED \
            and dst_name != "bool" and not _is_widening(src_name, dst_name) and (src_name != dst_name or mode != "none"):
        # NOTE: a 1- or 2-byte source has at most 65536 values: they are converted once by the path below
        # and looked up, for performance reasons (full mode casts score and mask tiles, benchmarks/pfa.py)
        return _cast_table(src_name, dst_name, mode, sat).take(src.view(_UINT_OF[src.dtype.itemsize]))
    return _cast_values(src, src_name, dst_name, mode, sat)


#: Sources :func:`cast` converts by table look-up (every value of the dtype converted once, by
#: :func:`_cast_values`), from this many elements on (by element size).
_TABLED = frozenset({"fp16", "bf16", "int8", "uint8", "int16", "uint16", "fp8_e4m3fn", "fp8_e5m2", "hifloat8"})
_TABLE_MIN = {1: 64, 2: 1024}


@functools.lru_cache(maxsize=64)
def _cast_table(src_name: str, dst_name: str, mode: str, sat: bool) -> np.ndarray:
    """The conversion of every bit pattern of the 1- or 2-byte dtype *src_name*, indexed by the pattern."""
    width = _REGISTRY[src_name].itemsize
    every = np.arange(1 << (8 * width), dtype=_UINT_OF[width])
    if src_name != "hifloat8":
        every = every.view(_REGISTRY[src_name])
    table = _cast_values(every, src_name, dst_name, mode, sat)
    table.flags.writeable = False
    return table


def _cast_values(src: np.ndarray, src_name: str, dst_name: str, mode: str, sat: bool) -> np.ndarray:
    """:func:`cast` once the names, the mode and the overflow rule are resolved."""
    dst_is_int = dst_name not in _FLOATS and dst_name != "bool"
    if dst_name == "bool":
        return _to_float64(src, src_name) != 0 if src_name in _FLOATS else src != 0
    if src_name == "bool":
        src, src_name = src.astype(np.uint8), "uint8"
    src_is_float = src_name in _FLOATS or src_name == "fp64"

    if dst_is_int:
        if src_is_float:
            return _float_to_int(_to_float64(src, src_name), dst_name, mode)
        return _int_to_int(src, dst_name)
    if src_name == dst_name:
        if mode == "none":
            return src.copy()
        with np.errstate(invalid="ignore"):  # +-inf and NaN stay themselves
            integral = _round_integral(_to_float64(src, src_name), mode)
        return cast(integral, dst_name, "none", sat)
    if dst_name == "hifloat8":
        return encode_hifloat8(_to_float64(src, src_name), "round" if mode == "none" else mode, sat)
    if src_name == "hifloat8":
        src, src_name = decode_hifloat8(src), "fp32"
    if src_is_float and _is_widening(src_name, dst_name):
        return src.astype(_REGISTRY[dst_name])
    if src_name == "fp32" and mode in ("rint", "none") and not sat and dst_name in ("fp16", "bf16"):
        return _fast_rne(src, dst_name)
    return _to_ieee(_to_float64(src, src_name), dst_name, mode, sat)


_WIDER = {"fp32": {"fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2", "hifloat8"},
          "fp16": {"fp8_e4m3fn", "fp8_e5m2"}, "bf16": {"fp8_e4m3fn", "fp8_e5m2"}}


def _is_widening(src_name: str, dst_name: str) -> bool:
    """True when every value of *src_name* is exact in *dst_name* (a plain astype is then exact)."""
    return src_name in _WIDER.get(dst_name, ())


def _fast_rne(src: np.ndarray, dst_name: str) -> np.ndarray:
    """fp32 -> fp16 / bf16, RNE, Inf/NaN mode through numpy / ml_dtypes (both are correctly rounded
    RNE); NaNs are rewritten to the canonical NaN so this path equals :func:`_to_ieee` bit for bit.
    NOTE: for performance reasons (no float64 temporaries); tests pin it to the generic path."""
    with np.errstate(over="ignore", invalid="ignore"):  # overflow -> inf is the rule; NaNs fixed below
        out = src.astype(_REGISTRY[dst_name])
    nan = np.isnan(src)
    if nan.any():
        ubits = out.view(np.uint16)
        ubits[nan] = (np.signbit(src[nan]).astype(np.uint16) << 15) | _IEEE[dst_name][4]
    return out


# ---------------------------------------------------------------- quantisation
def quantize_int8(x, scale, offset=0.0, round_mode: str = "rint", compute_dtype: str = "fp16") -> np.ndarray:
    """AscendQuant: ``int8 = sat(round(x * scale + offset))``, in the order and dtype of the real API.

    *compute_dtype* "fp16" (default; Ascend C AscendQuant on A2/A3/310P, ascend_quant_pre_impl.h):
    x, scale and offset are cast to fp16 (RNE), ``t = fp16(x * scale)``, ``t = fp16(t + offset)``
    (each one IEEE fp16 operation), then fp16 -> int8 with *round_mode*, saturating.
    "fp32" (Ascend 950 regbase quant kernels): ``t = fp32(fp32(x * scale) + offset)``, then rounded
    straight to int8; equal to their fp32 -> fp16 (CAST_ODD) -> int8 chain. NaN -> 0.
    *scale* and *offset* broadcast against *x* (per-tensor scalars or per-channel vectors).
    """
    mode = _resolve_mode(round_mode)
    if compute_dtype == "fp16":
        # Python floats and float64 arrays enter as the fp32 the C API takes, then go to fp16.
        xh, sh, oh = (cast(_as_f32_if_f64(v), "fp16") for v in (x, scale, offset))
        # NOTE: fp32 holds the fp16 product exactly and the fp16 sum rounded once more is still
        # correctly rounded (24 >= 2 * 11 + 2), so these are the IEEE fp16 operations.
        t = cast(xh.astype(np.float32) * sh.astype(np.float32), "fp16")
        t = cast(t.astype(np.float32) + oh.astype(np.float32), "fp16")
    elif compute_dtype == "fp32":
        t = np.asarray(x, np.float32) * np.asarray(scale, np.float32)
        t = t + np.asarray(offset, np.float32)
    else:
        raise _invalid(f"compute_dtype: '{compute_dtype}' must be 'fp16' or 'fp32'")
    return cast(t, "int8", mode)


def _as_f32_if_f64(v) -> np.ndarray:
    arr = np.asarray(v)
    return arr.astype(np.float32) if arr.dtype == np.float64 else arr
