"""Specification tests of npusim.dtypes: every conversion checked bit for bit against a formula
written here, independent of the module (value tables enumerated from numpy/ml_dtypes widening,
Python integer rounding, a string-parsing HiFloat8 decoder)."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from npusim import dtypes as dt
from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError

MODES = ("rint", "round", "floor", "ceil", "trunc", "odd")
RNG = np.random.default_rng(20240917)

# ------------------------------------------------------------------ reference machinery
# Target formats by (storage dtype, unsigned view, sign bit, "next value past max": the first value an
# unbounded exponent would give after max; overflow happens when a rounding picks it).
FORMATS = {
    "fp16": (np.float16, np.uint16, 0x8000, 65536.0),
    "bf16": (ml_dtypes.bfloat16, np.uint16, 0x8000, 2.0**128),
    "fp8_e4m3fn": (ml_dtypes.float8_e4m3fn, np.uint8, 0x80, 480.0),
    "fp8_e5m2": (ml_dtypes.float8_e5m2, np.uint8, 0x80, 65536.0),
}


def value_table(name):
    """Sorted positive finite magnitudes of a format (0 included) with their codes, from widening."""
    store, ubits, sign, _ = FORMATS[name]
    codes = np.arange(sign, dtype=np.int64).astype(ubits)
    with np.errstate(invalid="ignore"):
        vals = codes.view(store).astype(np.float64)
    keep = np.isfinite(vals)
    order = np.argsort(vals[keep], kind="stable")
    return vals[keep][order], codes[keep][order].astype(np.int64)


def ref_choose(a, lo, hi, lo_code, hi_code, neg, mode):
    """Pick lo or hi (magnitudes around *a*) by the textbook definition of each rounding mode."""
    exact = lo == a
    mid = (lo + hi) / 2.0
    if mode == "trunc":
        up = np.zeros_like(exact)
    elif mode == "floor":
        up = neg
    elif mode == "ceil":
        up = ~neg
    elif mode == "round":
        up = a >= mid
    elif mode == "rint":
        up = (a > mid) | ((a == mid) & (hi_code % 2 == 0))
    else:  # odd
        up = hi_code % 2 == 1
    return np.where(exact, lo, np.where(up, hi, lo)), np.where(exact, lo_code, np.where(up, hi_code, lo_code))


def ref_narrow(x64, name, mode, saturate):
    """Expected bits of x64 (finite, inf or NaN) rounded into IEEE-like format *name*."""
    store, ubits, sign, past_max = FORMATS[name]
    vals, codes = value_table(name)
    vmax, max_code = vals[-1], codes[-1]
    vals = np.append(vals, past_max)
    codes = np.append(codes, max_code + 1)
    neg = np.signbit(x64)
    a = np.abs(np.where(np.isnan(x64), 0.0, x64))
    i = np.clip(np.searchsorted(vals, a, side="left"), 1, len(vals) - 1)
    at = vals[np.minimum(np.searchsorted(vals, a), len(vals) - 1)] == a
    lo = np.where(at, a, vals[i - 1])
    hi = vals[i]
    lo_code = np.where(at, codes[np.minimum(np.searchsorted(vals, a), len(vals) - 1)], codes[i - 1])
    mag, code = ref_choose(a, lo, hi, lo_code, codes[i], neg, mode)
    over = (mag > vmax) | (a > past_max)
    # Overflow rule (docs/numerics.md): nearest modes -> inf, toward-zero and odd -> max, floor/ceil by sign.
    if mode in ("rint", "round"):
        to_inf = over
    elif mode == "floor":
        to_inf = over & neg
    elif mode == "ceil":
        to_inf = over & ~neg
    else:
        to_inf = np.zeros_like(over)
    inf_code = max_code + 1  # e4m3fn has no inf: 0x7F is its NaN pattern, made canonical below
    if saturate:
        to_inf = np.zeros_like(over)
    code = np.where(over, np.where(to_inf, inf_code, max_code), code)
    code = np.where(np.isinf(x64), max_code if saturate else inf_code, code)
    bits = (code | np.where(neg, sign, 0)).astype(ubits)
    canonical_nan = {"fp16": 0x7E00, "bf16": 0x7FC0, "fp8_e4m3fn": 0x7F, "fp8_e5m2": 0x7E}[name]
    nan = np.isnan(x64) | ((name == "fp8_e4m3fn") & (bits & (sign - 1) == 0x7F))
    return np.where(nan, canonical_nan | np.where(neg, sign, 0), bits).astype(ubits)


def f32_from_bits(u):
    return np.asarray(u, np.uint32).view(np.float32)


def fp32_probe_set(name, n_random=40000):
    """Random fp32 bit patterns, edge values, and every midpoint between neighbours of *name* (+-1 ulp)."""
    vals, _ = value_table(name)
    mids = ((vals[:-1] + vals[1:]) / 2.0).astype(np.float32)  # exact: one more bit than the format
    around = np.concatenate([mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(0))])
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.17549435e-38, 3.4028235e38,
                      -3.4028235e38, 65504, 65519.996, 65520, 448, 464, 480, 57344, 61440], np.float32)
    rand = f32_from_bits(RNG.integers(0, 2**32, n_random, dtype=np.uint64))
    probe = np.concatenate([rand, edges, around, -around, vals.astype(np.float32), -vals.astype(np.float32)])
    return probe


# ------------------------------------------------------------------ registry and marker
def test_registry_names_roundtrip():
    """Every storage dtype maps to a numpy dtype and back, with its itemsize and float flag."""
    expected = {"fp16": 2, "bf16": 2, "fp32": 4, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2,
                "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool": 1, "fp8_e4m3fn": 1,
                "fp8_e5m2": 1, "hifloat8": 1}
    assert set(dt.ALL_DTYPES) == set(expected)
    for name, size in expected.items():
        assert dt.dtype_name(dt.np_dtype(name)) == name
        assert dt.itemsize(name) == size
    floats = ["fp16", "bf16", "fp32", "fp8_e4m3fn", "fp8_e5m2", "hifloat8"]
    assert [n for n in dt.ALL_DTYPES if dt.is_float(n)] == floats
    assert dt.np_dtype("bf16") == np.dtype(ml_dtypes.bfloat16)
    assert dt.dtype_name(np.float16) == "fp16" and dt.dtype_name("float32") == "fp32"


def test_hifloat8_marker_tags_uint8_storage():
    """HIFLOAT8 is uint8 storage whose tag survives slicing, reshape and copy, not arithmetic views."""
    codes = np.arange(8, dtype=np.uint8).view(dt.HIFLOAT8)
    assert dt.HIFLOAT8 == np.uint8 and dt.HIFLOAT8.itemsize == 1
    assert dt.dtype_name(codes.dtype) == "hifloat8"
    assert dt.dtype_name(codes[2:].reshape(2, 3).copy().dtype) == "hifloat8"
    assert dt.dtype_name(codes.view(np.uint8).dtype) == "uint8"
    assert dt.np_dtype("hif8") is dt.HIFLOAT8


def test_bad_names_raise_aclnn_error():
    """Unknown dtypes and rounding modes are refused with PARAM_INVALID naming the parameter."""
    for bad in ("complex64", np.complex64, np.float64):
        with pytest.raises(AclnnError) as err:
            dt.np_dtype(bad)
        assert err.value.status == ACLNN_ERR_PARAM_INVALID and "dtype" in err.value.message
    with pytest.raises(AclnnError, match="round_mode"):
        dt.cast(np.ones(2, np.float32), "fp16", "nearest")
    with pytest.raises(NotImplementedError, match="hybrid"):
        dt.cast(np.ones(2, np.float32), "hifloat8", "CAST_HYBRID")
    with pytest.raises(NotImplementedError, match="int8"):
        dt.cast(np.ones(2, np.float32), "int8", saturate=False)


# ------------------------------------------------------------------ float narrowing
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_fp32_to_fp16_bf16_all_modes_bitexact(name, mode):
    """fp32 -> fp16/bf16 equals the nearest-neighbour definition of each mode (Inf/NaN mode)."""
    x = fp32_probe_set(name)
    got = dt.cast(x, name, mode).view(FORMATS[name][1])
    with np.errstate(invalid="ignore"):
        want = ref_narrow(x.astype(np.float64), name, mode, saturate=False)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["fp8_e4m3fn", "fp8_e5m2"])
@pytest.mark.parametrize("saturate", [True, False])
def test_fp32_to_fp8_all_modes_bitexact(name, mode, saturate):
    """fp32 -> fp8: nearest-neighbour definition; saturating by default, e4m3fn overflow -> NaN otherwise."""
    x = fp32_probe_set(name, 5000)
    got = dt.cast(x, name, mode, saturate=saturate).view(np.uint8)
    with np.errstate(invalid="ignore"):
        want = ref_narrow(x.astype(np.float64), name, mode, saturate)
    np.testing.assert_array_equal(got, want)
    if saturate:
        np.testing.assert_array_equal(dt.cast(x, name, mode).view(np.uint8), got)


def test_rne_matches_numpy_and_ml_dtypes():
    """The default (CAST_NONE = RINT) narrowing equals numpy/ml_dtypes RNE casts on non-NaN inputs."""
    x = fp32_probe_set("fp16")
    x = x[~np.isnan(x)]
    with np.errstate(all="ignore"):
        for name in ("fp16", "bf16"):
            want = x.astype(FORMATS[name][0]).view(np.uint16)
            np.testing.assert_array_equal(dt.cast(x, name).view(np.uint16), want)
        for name in ("fp8_e4m3fn", "fp8_e5m2"):
            want = x.astype(FORMATS[name][0]).view(np.uint8)
            np.testing.assert_array_equal(dt.cast(x, name, saturate=False).view(np.uint8), want)


@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_fast_rne_path_equals_generic_path(name):
    """fp32 sources take a numpy fast path for RNE; float64 sources the integer path: same bits."""
    x = fp32_probe_set(name)
    with np.errstate(invalid="ignore"):  # signalling NaNs raise FE_INVALID when widened
        x64 = x.astype(np.float64)
    np.testing.assert_array_equal(dt.cast(x, name).view(np.uint16), dt.cast(x64, name).view(np.uint16))


def test_cast_doc_example_every_mode():
    """Ascend C Cast table example: 0.5 + 2**-12 to half in each mode."""
    x = np.array([0.5 + 2.0**-12], np.float32)
    want = {"rint": 0.5, "floor": 0.5, "ceil": 0.5 + 2.0**-11, "round": 0.5 + 2.0**-11,
            "trunc": 0.5, "odd": 0.5 + 2.0**-11}
    for mode, value in want.items():
        assert dt.cast(x, "fp16", mode)[0] == np.float16(value), mode


def test_fp16_overflow_inf_or_saturate():
    """fp32 -> fp16 overflow: Inf under RINT (Inf/NaN mode), +-65504 in saturation mode; NaN stays NaN."""
    x = np.array([65520.0, -1e6, np.inf, -np.inf, np.nan, 65519.0], np.float32)
    got = dt.cast(x, "fp16").view(np.uint16)
    np.testing.assert_array_equal(got, [0x7C00, 0xFC00, 0x7C00, 0xFC00, 0x7E00, 0x7BFF])
    sat = dt.cast(x, "fp16", saturate=True).view(np.uint16)
    np.testing.assert_array_equal(sat, [0x7BFF, 0xFBFF, 0x7BFF, 0xFBFF, 0x7E00, 0x7BFF])


# ------------------------------------------------------------------ exhaustive widening round trips
@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_all_16bit_codes_roundtrip_through_fp32(name):
    """All 65536 codes widen exactly to fp32 and narrow back unchanged (NaN -> canonical, sign kept)."""
    codes = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    store = FORMATS[name][0]
    wide = dt.cast(codes.view(store), "fp32")
    np.testing.assert_array_equal(wide.view(np.uint32), codes.view(store).astype(np.float32).view(np.uint32))
    back = dt.cast(wide, name).view(np.uint16)
    nan = np.isnan(wide)
    canonical = {"fp16": 0x7E00, "bf16": 0x7FC0}[name] | (codes & 0x8000)
    np.testing.assert_array_equal(back, np.where(nan, canonical, codes))


@pytest.mark.parametrize("name", ["fp8_e4m3fn", "fp8_e5m2"])
def test_all_fp8_codes_roundtrip_through_fp32(name):
    """All 256 fp8 codes widen exactly and narrow back unchanged (NaN -> canonical)."""
    codes = np.arange(256, dtype=np.uint16).astype(np.uint8)
    wide = dt.cast(codes.view(FORMATS[name][0]), "fp32")
    back = dt.cast(wide, name, saturate=False).view(np.uint8)
    canonical = {"fp8_e4m3fn": 0x7F, "fp8_e5m2": 0x7E}[name] | (codes & 0x80)
    np.testing.assert_array_equal(back, np.where(np.isnan(wide), canonical, codes))


# ------------------------------------------------------------------ float -> int
def py_round(v, mode):
    """Python-integer reference rounding of a finite float."""
    if mode == "rint":
        return round(v)  # Python rounds floats half to even, exactly
    if mode == "round":
        return int(math.copysign(math.floor(abs(v) + 0.5), v))
    if mode == "floor":
        return math.floor(v)
    if mode == "ceil":
        return math.ceil(v)
    if mode == "trunc":
        return int(v)
    fl = math.floor(v)
    return fl if fl == v or fl % 2 == 1 else fl + 1


def py_to_int(values, mode, lo, hi):
    out = []
    for v in values:
        if math.isnan(v):
            out.append(0)
        elif math.isinf(v):
            out.append(hi if v > 0 else lo)
        else:
            out.append(min(hi, max(lo, py_round(v, mode))))
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("target", ["int8", "int16", "int32"])
def test_fp32_to_int_all_modes_saturating(target, mode):
    """fp32 -> int8/16/32: Python integer rounding, clipped to the type range, NaN -> 0."""
    info = np.iinfo(target)
    halves = np.arange(-300, 300, dtype=np.float32) + np.float32(0.5)
    rand = np.concatenate([RNG.normal(0, 100, 3000), RNG.normal(0, 3e9, 1000)]).astype(np.float32)
    edges = np.array([0.0, -0.0, 2**22 + 0.5, -(2**22) - 0.5, 2**31, -(2**31), 2.1e9, np.inf, -np.inf, np.nan,
                      127.5, -128.5, 32767.5, -32768.5, 1e-30, -0.49999997], np.float32)
    x = np.concatenate([halves, rand, edges])
    got = dt.cast(x, target, mode)
    assert got.dtype == np.dtype(target)
    np.testing.assert_array_equal(got, py_to_int(x.astype(np.float64).tolist(), mode, info.min, info.max))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("target", ["int8", "uint8"])
def test_all_fp16_to_int8_uint8(target, mode):
    """Every fp16 value to int8/uint8 in every mode."""
    info = np.iinfo(target)
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got = dt.cast(x, target, mode)
    np.testing.assert_array_equal(got, py_to_int(x.astype(np.float64).tolist(), mode, info.min, info.max))


def test_cast_doc_example_int():
    """Ascend C Cast table example: 2**22 + 0.5 to int32 per mode, and to int16 (saturates)."""
    x = np.array([2**22 + 0.5], np.float32)
    want = {"rint": 2**22, "floor": 2**22, "ceil": 2**22 + 1, "round": 2**22 + 1, "trunc": 2**22}
    for mode, value in want.items():
        assert dt.cast(x, "int32", mode)[0] == value
        assert dt.cast(x, "int16", mode)[0] == 2**15 - 1


# ------------------------------------------------------------------ int -> float, int -> int
@pytest.mark.parametrize("mode", MODES)
def test_int32_to_fp16_and_fp32(mode):
    """int32 -> fp16 via the value table; int32 -> fp32 via its two fp32 neighbours (numpy anchor)."""
    edges = [0, 1, -1, 2049, 4097, 65519, 65520, 2**24 + 1, 2**24 + 3, 2**31 - 1, -2**31]
    n = np.concatenate([RNG.integers(-2**31, 2**31, 4000), RNG.integers(-70000, 70000, 4000), edges])
    n = n.astype(np.int32)
    x64 = n.astype(np.float64)  # exact
    want16 = ref_narrow(x64, "fp16", mode, False)
    np.testing.assert_array_equal(dt.cast(n, "fp16", mode).view(np.uint16), want16)
    c = n.astype(np.float32).astype(np.float64)  # numpy int -> float32 is RNE
    other = np.where(c > x64, np.nextafter(c.astype(np.float32), np.float32(-np.inf)),
                     np.nextafter(c.astype(np.float32), np.float32(np.inf))).astype(np.float64)
    other = np.where(c == x64, c, other)
    lo_s, hi_s = np.minimum(c, other), np.maximum(c, other)
    neg = n < 0
    lo, hi = np.where(neg, -hi_s, lo_s), np.where(neg, -lo_s, hi_s)  # magnitudes
    lo_code = lo.astype(np.float32).view(np.uint32).astype(np.int64)
    hi_code = hi.astype(np.float32).view(np.uint32).astype(np.int64)
    mag, _ = ref_choose(np.abs(x64), np.abs(lo), np.abs(hi), lo_code, hi_code, neg, mode)
    want = np.where(neg, -mag, mag).astype(np.float32)
    np.testing.assert_array_equal(dt.cast(n, "fp32", mode).view(np.uint32), want.view(np.uint32))


def test_int_to_int_saturates():
    """Integer narrowing clips to the target range (never wraps)."""
    x = np.array([-2**31, -129, -128, -1, 0, 127, 128, 255, 256, 2**31 - 1], np.int32)
    np.testing.assert_array_equal(dt.cast(x, "int8"), np.clip(x, -128, 127))
    np.testing.assert_array_equal(dt.cast(x, "uint8"), np.clip(x, 0, 255))
    u = np.array([0, 2**63, 2**64 - 1], np.uint64)
    np.testing.assert_array_equal(dt.cast(u, "int64"), [0, 2**63 - 1, 2**63 - 1])


def test_bool_conversions():
    """bool -> number gives 0/1; number -> bool is 'not zero' (NaN is true)."""
    np.testing.assert_array_equal(dt.cast(np.array([True, False]), "fp16").view(np.uint16), [0x3C00, 0])
    np.testing.assert_array_equal(dt.cast(np.array([0.0, -0.0, 2.0, np.nan], np.float32), "bool"),
                                  [False, False, True, True])


def test_same_dtype_with_mode_rounds_to_integral():
    """float -> same float with a mode rounds to an integral value (Ascend Cast float->float)."""
    x = np.array([0.5, 1.5, -2.5, 2.7], np.float32)
    np.testing.assert_array_equal(dt.cast(x, "fp32", "rint"), [0.0, 2.0, -2.0, 3.0])
    np.testing.assert_array_equal(dt.cast(x, "fp32", "round"), [1.0, 2.0, -3.0, 3.0])
    np.testing.assert_array_equal(dt.cast(x, "fp32").view(np.uint32), x.view(np.uint32))


# ------------------------------------------------------------------ HiFloat8
def spec_hif8(code):
    """HiF8 value of one code, read field by field from the bit string (paper, Fig. 1 / Table 1)."""
    bits = format(code, "08b")
    s, rest = (-1.0 if bits[0] == "1" else 1.0), bits[1:]
    if code == 0x80:
        return math.nan
    if rest == "0000000":
        return 0.0
    if rest.startswith("0000"):  # denormal: 2**(M-23)
        return s * 2.0 ** (int(rest[4:], 2) - 23)
    for dot, width in (("11", 4), ("10", 3), ("01", 2), ("001", 1), ("0001", 0)):
        if rest.startswith(dot):
            field = rest[len(dot):]
            exp_field, mant = field[:width], field[width:]
            if width == 0:
                e = 0
            else:
                mag = int("1" + exp_field[1:], 2)  # implicit leading 1 of the magnitude
                e = -mag if exp_field[0] == "1" else mag
            m = int(mant, 2) / 2 ** len(mant)
            if code & 0x7F == 0x6F:
                return s * math.inf
            return s * 2.0**e * (1.0 + m)
    raise AssertionError(code)


HIF8_SPEC = np.array([spec_hif8(c) for c in range(256)], np.float64)


def test_hifloat8_decode_table_matches_spec():
    """All 256 codes decode as the field-by-field reading of the spec; anchors from the paper."""
    got = dt.decode_hifloat8(np.arange(256, dtype=np.uint16).astype(np.uint8))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), HIF8_SPEC.astype(np.float32).view(np.uint32))
    assert got[0x08] == 1.0 and got[0x6E] == 2.0**15 and got[0x01] == 2.0**-22 and got[0x07] == 2.0**-16
    assert got[0x7E] == 2.0**-15 and np.isinf(got[0x6F]) and np.isnan(got[0x80])


def test_hifloat8_all_codes_roundtrip_and_monotonic_decode():
    """encode(decode(c)) == c for all 256 codes; the 126 positive finite values are distinct and
    encode(sorted sweep) decodes to a non-decreasing sequence."""
    codes = np.arange(256, dtype=np.uint16).astype(np.uint8)
    back = dt.encode_hifloat8(dt.decode_hifloat8(codes), saturate=False).view(np.uint8)
    np.testing.assert_array_equal(back, codes)
    pos = HIF8_SPEC[1:128][np.isfinite(HIF8_SPEC[1:128])]
    assert len(pos) == 126 and len(np.unique(pos)) == 126
    sweep = np.sort(np.concatenate([RNG.uniform(-5e4, 5e4, 20000), np.ldexp(RNG.uniform(-2, 2, 20000),
                                                                            RNG.integers(-26, 16, 20000))]))
    dec = dt.decode_hifloat8(dt.encode_hifloat8(sweep.astype(np.float32)))
    assert np.all(np.diff(dec.astype(np.float64)) >= 0)


@pytest.mark.parametrize("mode", ["round", "trunc", "floor", "ceil"])
@pytest.mark.parametrize("saturate", [True, False])
def test_fp32_to_hifloat8_nearest_definition(mode, saturate):
    """fp32 -> HiF8 equals choosing among the spec's values by the mode's definition; TA = 'round'.
    Overflow past 2**15: Inf (non-saturating) or +-2**15; no negative zero."""
    pos_codes = np.array([c for c in range(128) if np.isfinite(HIF8_SPEC[c])])
    order = np.argsort(HIF8_SPEC[pos_codes])
    vals, codes = HIF8_SPEC[pos_codes][order], pos_codes[order]
    vals_ext, codes_ext = np.append(vals, 1.5 * 2.0**15), np.append(codes, 0x6F)
    mids = ((vals_ext[:-1] + vals_ext[1:]) / 2).astype(np.float32)
    x = np.concatenate([mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf)),
                        f32_from_bits(RNG.integers(0x2F000000, 0x48000000, 20000, dtype=np.uint64)),
                        np.array([0, 2.0**-23, 2.0**-24, 1e-30, 40960, 40959.996, 1e6, np.inf, np.nan],
                                 np.float32)])
    x = np.concatenate([x, -x])
    x64 = x.astype(np.float64)
    neg = np.signbit(x64)
    a = np.abs(np.where(np.isnan(x64), 0, x64))
    j = np.searchsorted(vals_ext, a)
    exact = vals_ext[np.minimum(j, len(vals_ext) - 1)] == a
    i = np.clip(j, 1, len(vals_ext) - 1)
    lo, hi = np.where(exact, a, vals_ext[i - 1]), vals_ext[i]
    lo_code = np.where(exact, codes_ext[np.minimum(j, len(vals_ext) - 1)], codes_ext[i - 1])
    mag, code = ref_choose(a, lo, hi, lo_code, codes_ext[i], neg, mode)
    over = (mag > 2.0**15) | (a > 1.5 * 2.0**15)
    to_inf = {"round": over, "floor": over & neg, "ceil": over & ~neg, "trunc": np.zeros_like(over)}[mode]
    code = np.where(over, np.where(to_inf & (not saturate), 0x6F, 0x6E), code)
    code = np.where(np.isinf(x64), 0x6E if saturate else 0x6F, code)
    code = np.where(code == 0, 0, code | np.where(neg, 0x80, 0))
    code = np.where(np.isnan(x64), 0x80, code)
    got = dt.cast(x, "hifloat8", mode, saturate=saturate)
    assert dt.dtype_name(got.dtype) == "hifloat8"
    np.testing.assert_array_equal(got.view(np.uint8), code.astype(np.uint8))


def test_hifloat8_default_is_ta_and_decodes_to_other_floats():
    """CAST_NONE to HiF8 is TA; HiF8 sources decode exactly to fp32/fp16."""
    x = np.array([1.0625, -1.0625, 2.0**-23, 0.75 * 2**-22], np.float32)
    np.testing.assert_array_equal(dt.cast(x, "hifloat8").view(np.uint8), [0x09, 0x89, 0x01, 0x01])
    codes = np.arange(256, dtype=np.uint16).astype(np.uint8).view(dt.HIFLOAT8)
    want = HIF8_SPEC.astype(np.float32)
    np.testing.assert_array_equal(dt.cast(codes, "fp32").view(np.uint32), want.view(np.uint32))
    ok = ~np.isnan(HIF8_SPEC)
    np.testing.assert_array_equal(dt.cast(codes, "fp16")[ok], HIF8_SPEC[ok].astype(np.float16))
    untagged = dt.cast(codes.view(np.uint8), "fp32", src_dtype="hifloat8")
    np.testing.assert_array_equal(untagged.view(np.uint32), want.view(np.uint32))


# ------------------------------------------------------------------ bits, FP19, quantisation
def test_f32_bits_roundtrip():
    """f32_bits / from_f32_bits are inverse bit views."""
    u = RNG.integers(0, 2**32, 1000, dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(dt.f32_bits(dt.from_f32_bits(u)), u)
    assert dt.f32_bits(1.0) == 0x3F800000 and dt.from_f32_bits(0xBF800000) == -1.0


def test_deq_scale_fp19_encoding():
    """Low 32 bits = fp32 bits & 0xFFFFE000, bit 46 set, offset in bits 37..45; decode inverts."""
    scale = f32_from_bits(RNG.integers(0x30000000, 0x50000000, 2000, dtype=np.uint64))
    u = dt.encode_deq_scale_u64(scale)
    assert u.dtype == np.uint64
    np.testing.assert_array_equal(u & 0xFFFFFFFF, scale.view(np.uint32).astype(np.uint64) & 0xFFFFE000)
    np.testing.assert_array_equal(u >> 32, np.full(len(u), 0x4000, np.uint64))
    decoded = dt.decode_deq_scale_u64(u).view(np.uint32)
    np.testing.assert_array_equal(decoded, scale.view(np.uint32) & 0xFFFFE000)
    offsets = np.array([-300.0, -256.0, -3.5, -0.4, 0.5, 2.5, 254.6, 1000.0])
    uo = dt.encode_deq_scale_u64(np.ones(8, np.float32), offsets)
    want = [max(-256, min(255, int(math.copysign(math.floor(abs(v) + 0.5), v)))) for v in offsets]
    np.testing.assert_array_equal(dt.decode_deq_offset_u64(uo), want)
    np.testing.assert_array_equal(uo & 0xFFFFFFFF, np.full(8, 0x3F800000, np.uint64))


def test_deq_scale_rint_mode():
    """round_mode 'rint' (R_INT) rounds the fp32 to 10 mantissa bits, ties to even, before masking."""
    ties = np.array([0x3F801000, 0x3F803000, 0x3F801001, 0x3FFFF000], np.uint32)
    scale = np.concatenate([f32_from_bits(RNG.integers(0x30000000, 0x50000000, 3000, dtype=np.uint64)),
                            f32_from_bits(ties)])
    m, e = np.frexp(scale.astype(np.float64))
    want = np.ldexp(np.rint(m * 2.0**11), e - 11).astype(np.float32)  # 11 significant bits
    u = dt.encode_deq_scale_u64(scale, round_mode="rint")
    np.testing.assert_array_equal(dt.decode_deq_scale_u64(u).view(np.uint32), want.view(np.uint32))


def test_quantize_int8_fp16_arithmetic():
    """Default AscendQuant: fp16(x), fp16(x*s), fp16(+o), RINT to int8, saturating; reference via
    float64 products rounded once by numpy."""
    x = np.concatenate([RNG.normal(0, 40, 5000), np.arange(-130, 130) + 0.5, [np.nan, 1e6, -1e6]])
    x = x.astype(np.float32)
    for scale, offset in ((1.0, 0.0), (0.37, 3.0), (2.5, -0.25), (1e-3, 0.5)):
        with np.errstate(over="ignore"):
            xh = x.astype(np.float16).astype(np.float64)
        sh, oh = float(np.float16(np.float32(scale))), float(np.float16(np.float32(offset)))
        t = (xh * sh).astype(np.float16).astype(np.float64)
        t = (t + oh).astype(np.float16).astype(np.float64)
        want = py_to_int(t.tolist(), "rint", -128, 127)
        np.testing.assert_array_equal(dt.quantize_int8(x, scale, offset), want)


def test_quantize_int8_fp32_equals_odd_fp16_chain():
    """fp32 compute: one rounding of fp32(x*s + o) to int8 equals the 950 chain fp32 -> fp16 (ODD) -> int8."""
    x = np.concatenate([RNG.normal(0, 60, 20000), np.arange(-140, 140) * 0.25]).astype(np.float32)
    scale = RNG.uniform(0.1, 3.0, len(x)).astype(np.float32)
    for mode in ("rint", "round"):
        got = dt.quantize_int8(x, scale, np.float32(0.5), mode, compute_dtype="fp32")
        t = x * scale + np.float32(0.5)
        np.testing.assert_array_equal(got, dt.cast(dt.cast(t, "fp16", "odd"), "int8", mode))
        np.testing.assert_array_equal(got, py_to_int(t.astype(np.float64).tolist(), mode, -128, 127))


@pytest.mark.parametrize("src", ["fp16", "bf16", "int8", "uint8", "int16", "fp8_e5m2", "hifloat8"])
@pytest.mark.parametrize("dst", ["fp16", "bf16", "fp32", "int8", "int32", "fp8_e4m3fn", "hifloat8"])
def test_table_lookup_path_equals_element_path(src, dst):
    """Arrays large enough for cast's look-up table (1- and 2-byte sources) give, dtype and bits, what
    the same values give converted a few at a time (below the table's size threshold): modes of each
    kind, both overflow rules, a 2-D non-contiguous source."""
    width = dt.itemsize(src)
    bits = RNG.integers(0, 1 << (8 * width), (64, 48), dtype=np.int64).astype(dt._UINT_OF[width])
    x = bits if src == "hifloat8" else bits.view(dt.np_dtype(src))
    x = x[:, ::2]  # 64 x 24, strided
    kw = {"src_dtype": "hifloat8"} if src == "hifloat8" else {}
    floats = dst in ("fp16", "bf16", "fp32", "fp8_e4m3fn", "hifloat8")
    for mode in ("none", "rint", "floor", "odd"):
        for sat in ((None, not dt._DEFAULT_SATURATE[dst]) if floats else (None,)):
            if mode == "none" and src == dst:
                continue
            with np.errstate(all="ignore"):
                whole = dt.cast(x, dst, mode, sat, **kw)
                parts = np.stack([dt.cast(row, dst, mode, sat, **kw) for row in x])  # 24 < the table's minimum
            assert whole.dtype == parts.dtype and whole.shape == x.shape
            assert np.array_equal(whole.view(np.uint8), parts.view(np.uint8)), (mode, sat)
