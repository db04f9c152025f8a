"""Vector instructions: bits against formulas written here (exact rational arithmetic, Python loops
for indexing and reduction order), costs against hand-computed timelines, full == timing mode."""
from __future__ import annotations

import math
import zlib
from decimal import Decimal, localcontext
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from npusim.errors import KernelError, NpuBufferError
from npusim.isa import vector as V
from npusim.kernel import DataCopy, HardEvent, PipeBarrier, SetFlag, TBuf, TPipe, TPosition, WaitFlag
from npusim.launch import GmArg, launch
from npusim.types import Pipe

F16, F32, BF16 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}
QNAN = {F16: 0x7E00, BF16: 0x7FC0, F32: 0x7FC00000}
# (significand bits incl. the hidden one, min normal exponent, max exponent)
REPEAT_BYTES = 256
FMT = {F16: (11, -14, 15), BF16: (8, -126, 127), F32: (24, -126, 127)}


@pytest.fixture
def rng(request):
    """A generator seeded by the test's name: the same data whatever order or worker runs it."""
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


# ------------------------------------------------------------------ a kernel around an instruction
def _kernel(body, names, *gms):
    """Copy every GM array into its own UB buffer, run *body*, copy every buffer back."""
    pipe = TPipe()
    local = {}
    for name, g in zip(names, gms):
        buf = TBuf(TPosition.VECCALC)
        pipe.InitBuffer(buf, -(-g.GetSize() * g.dtype.itemsize // 32) * 32)
        local[name] = buf.Get(g.dtype)
        DataCopy(local[name], g, g.GetSize())
    SetFlag(HardEvent.MTE2_V)
    WaitFlag(HardEvent.MTE2_V)
    body(**local)
    SetFlag(HardEvent.V_MTE3)
    WaitFlag(HardEvent.V_MTE3)
    for name, g in zip(names, gms):
        DataCopy(g, local[name], g.GetSize())


def run(body, mode="full", chip="Ascend910B2", **arrays):
    """Run *body(**locals)* on one AIV; the arrays are updated in place (full mode)."""
    names = list(arrays)
    args = (body, names) + tuple(GmArg(k, v) for k, v in arrays.items())
    return launch(_kernel, args, block_dim=1, chip=chip, kernel_type="vector", mode=mode)


def bits(a):
    return a.view(UINT[a.dtype.itemsize])


# ------------------------------------------------------------------ exact reference rounding
def round_exact(x: Fraction, neg_zero: bool, dt) -> float:
    """*x* rounded to nearest, ties to even, in *dt* (beyond max -> inf), as an exact Python float."""
    p, emin, emax = FMT[dt]
    if x == 0:
        return -0.0 if neg_zero else 0.0
    neg, a = x < 0, abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = max(e, emin) - (p - 1)
    m = a / Fraction(2) ** q
    k = m.numerator // m.denominator
    rem = m - k
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and k % 2):
        k += 1
    v = k * Fraction(2) ** q
    r = math.inf if v >= Fraction(2) ** (emax + 1) else float(v)
    return -r if neg else r


def encode(values, dt) -> np.ndarray:
    """Bits of exactly representable floats (NaN -> the canonical quiet NaN)."""
    out = np.array(values, np.float64).astype(dt)
    b = bits(out).copy()
    b[np.isnan(np.array(values, np.float64))] = QNAN[dt]
    return b


def fmt_values(dt):
    p, emin, emax = FMT[dt]
    tiny = 2.0 ** (emin - p + 1)
    big = (2 - 2.0 ** (1 - p)) * 2.0 ** emax
    ulp_big = 2.0 ** (emax - p + 1)
    return tiny, big, ulp_big, 2.0 ** -p


def special_pairs(dt):
    """Halfway, overflow, subnormal, signed-zero and NaN/inf cases of a format."""
    tiny, big, ulp_big, half_ulp1 = fmt_values(dt)
    inf, nan = math.inf, math.nan
    return [
        (1.0, half_ulp1), (1.0 + 2 * half_ulp1, half_ulp1), (1.0, 3 * half_ulp1),  # ties at 1
        (big, ulp_big / 2), (big, ulp_big / 4), (-big, -ulp_big / 2), (big, big),  # overflow
        (tiny, tiny), (3 * tiny, 0.5), (tiny, 0.5), (-tiny, 0.5), (2.0 ** FMT[dt][1], -tiny),  # subnormal
        (1.0, -1.0), (-0.0, -0.0), (-0.0, 0.0), (0.0, -0.0), (2.0, 0.0), (-2.0, 0.0),  # zeros
        (inf, -inf), (nan, 1.0), (0.0, inf), (inf, 2.0), (-inf, -inf), (3.0, 7.0),
    ]


def operands(dt, n_random, rng):
    """(a, b) in *dt*: the special pairs, random bit patterns and random close-magnitude values."""
    pairs = special_pairs(dt)
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    u = UINT[dt.itemsize]
    ra = rng.integers(0, np.iinfo(u).max, n_random, dtype=np.uint64, endpoint=True).astype(u).view(dt)
    rb = rng.integers(0, np.iinfo(u).max, n_random, dtype=np.uint64, endpoint=True).astype(u).view(dt)
    ca = rng.standard_normal(n_random) * 100
    cb = ca * (1 + rng.standard_normal(n_random) * 1e-3)
    with np.errstate(all="ignore"):
        a = np.concatenate([np.array(a, np.float64).astype(dt), ra, ca.astype(dt)])
        b = np.concatenate([np.array(b, np.float64).astype(dt), rb, cb.astype(dt)])
    return a, b


def _f(x) -> float:
    with np.errstate(invalid="ignore"):
        return float(np.float64(x))


def ref_binary(op, a, b, dt) -> np.ndarray:
    out = []
    for x, y in zip(a, b):
        x, y = _f(x), _f(y)
        with np.errstate(all="ignore"):
            f64 = {"add": np.float64(x) + y, "sub": np.float64(x) - y, "mul": np.float64(x) * y,
                   "div": np.float64(x) / np.float64(y)}[op]
        if not (math.isfinite(x) and math.isfinite(y)) or (op == "div" and y == 0):
            out.append(float(f64))  # inf / NaN arithmetic is exact
            continue
        fx, fy = Fraction(x), Fraction(y)
        exact = {"add": fx + fy, "sub": fx - fy, "mul": fx * fy, "div": fx / fy if fy else None}[op]
        out.append(round_exact(exact, math.copysign(1.0, f64) < 0, dt))
    return encode(out, dt)


def ref_maxmin(op, a, b, dt) -> np.ndarray:
    out = []
    for x, y in zip(a, b):
        x, y = _f(x), _f(y)
        if math.isnan(x) or math.isnan(y):
            out.append(math.nan)
        elif op == "max":
            out.append(x if x >= y else y)
        else:
            out.append(x if x <= y else y)
    return encode(out, dt)


# ------------------------------------------------------------------ elementwise, count form
BINARY = [("add", V.Add), ("sub", V.Sub), ("mul", V.Mul), ("div", V.Div)]


@pytest.mark.parametrize("dt", [F16, BF16, F32], ids=["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("op,cls", BINARY, ids=[b[0] for b in BINARY])
def test_binary_bitexact_vs_exact_rounding(op, cls, dt, rng):
    """Add/Sub/Mul/Div == the exact result rounded once to the dtype: ties, overflow, subnormals, NaN."""
    a, b = operands(dt, 400, rng)
    n = a.size
    z = np.zeros(n, dt)
    run(lambda a, b, z: cls(z, a, b, n), a=a, b=b, z=z)
    assert np.array_equal(bits(z), ref_binary(op, a, b, dt))


@pytest.mark.parametrize("dt", [F16, BF16, F32], ids=["fp16", "bf16", "fp32"])
def test_max_min_select_src0_on_ties_and_propagate_nan(dt, rng):
    """Max/Min compare-select: src0 on equality (so max(-0, +0) = -0), NaN if either input is NaN."""
    a, b = operands(dt, 300, rng)
    n = a.size
    zmax, zmin = np.zeros(n, dt), np.zeros(n, dt)

    def body(a, b, zmax, zmin):
        V.Max(zmax, a, b, n)
        V.Min(zmin, a, b, n)

    run(body, a=a, b=b, zmax=zmax, zmin=zmin)
    assert np.array_equal(bits(zmax), ref_maxmin("max", a, b, dt))
    assert np.array_equal(bits(zmin), ref_maxmin("min", a, b, dt))


@pytest.mark.parametrize("dt", [np.int16, np.int32])
def test_integer_binary_ops_wrap(dt):
    """int16/int32 Add/Sub/Mul wrap modulo 2**bits; Max/Min/Adds/Maxs are exact."""
    info = np.iinfo(dt)
    a = np.array([info.max, info.min, 7, -3, 1000, 0], dt)
    b = np.array([1, -1, 5, 9, 1000, -1], dt)
    z = {k: np.zeros(6, dt) for k in ("add", "sub", "mul", "max", "adds", "maxs")}

    def body(a, b, add, sub, mul, max, adds, maxs):  # noqa: A002 - names of the results
        V.Add(add, a, b, 6)
        V.Sub(sub, a, b, 6)
        V.Mul(mul, a, b, 6)
        V.Max(max, a, b, 6)
        V.Adds(adds, a, 2, 6)
        V.Maxs(maxs, a, 0, 6)

    run(body, a=a, b=b, **z)
    wrap = 1 << (8 * np.dtype(dt).itemsize)

    def w(v):
        return (v + wrap // 2) % wrap - wrap // 2

    ai, bi = [int(x) for x in a], [int(x) for x in b]
    assert z["add"].tolist() == [w(x + y) for x, y in zip(ai, bi)]
    assert z["sub"].tolist() == [w(x - y) for x, y in zip(ai, bi)]
    assert z["mul"].tolist() == [w(x * y) for x, y in zip(ai, bi)]
    assert z["max"].tolist() == [max(x, y) for x, y in zip(ai, bi)]
    assert z["adds"].tolist() == [w(x + 2) for x in ai]
    assert z["maxs"].tolist() == [max(x, 0) for x in ai]


@pytest.mark.parametrize("dt", [F16, BF16, F32], ids=["fp16", "bf16", "fp32"])
def test_tensor_scalar_ops_round_the_scalar_first(dt, rng):
    """Adds/Muls/Maxs/Mins: the scalar (a Python float) is rounded to the dtype, then one IEEE op."""
    a, _ = operands(dt, 200, rng)
    n = a.size
    scalar = 1.0 / 3.0
    s = round_exact(Fraction(scalar), False, dt)
    outs = {k: np.zeros(n, dt) for k in ("adds", "muls", "maxs", "mins")}

    def body(a, adds, muls, maxs, mins):
        V.Adds(adds, a, scalar, n)
        V.Muls(muls, a, scalar, n)
        V.Maxs(maxs, a, scalar, n)
        V.Mins(mins, a, scalar, n)

    run(body, a=a, **outs)
    sv = np.full(n, s, np.float64).astype(dt)
    assert np.array_equal(bits(outs["adds"]), ref_binary("add", a, sv, dt))
    assert np.array_equal(bits(outs["muls"]), ref_binary("mul", a, sv, dt))
    assert np.array_equal(bits(outs["maxs"]), ref_maxmin("max", a, sv, dt))
    assert np.array_equal(bits(outs["mins"]), ref_maxmin("min", a, sv, dt))


def _ref_unary(fn, a, dt):
    out = []
    for x in a:
        x = _f(x)
        try:
            y = fn(x)
        except OverflowError:
            y = math.inf
        except ValueError:  # log(0), log(x < 0), sqrt(x < 0)
            y = -math.inf if (x == 0 and fn is _log) else math.nan
        if math.isfinite(y):
            y = round_exact(Fraction(y), math.copysign(1.0, y) < 0, dt)
        out.append(y)
    return encode(out, dt)


def _sqrt(x):
    return x if (x == 0 or x == math.inf) else math.sqrt(x)


def _exp(x):
    return 0.0 if x == -math.inf else (math.inf if x == math.inf else math.exp(x))


def _log(x):
    return math.inf if x == math.inf else math.log(x)


@pytest.mark.parametrize("dt", [F16, BF16, F32], ids=["fp16", "bf16", "fp32"])
def test_exp_ln_sqrt_abs_round_once_from_float64(dt, rng):
    """Exp/Ln/Sqrt: the float64 function of the exact input rounded once; Abs clears the sign bit."""
    a, _ = operands(dt, 300, rng)
    small = (rng.standard_normal(300) * 4).astype(dt)  # Exp's interesting range
    a = np.concatenate([a, small, np.array([0.0, -0.0, -1.0, 1.0], dt)])
    n = a.size
    outs = {k: np.zeros(n, dt) for k in ("e", "ln", "sq", "ab")}

    def body(a, e, ln, sq, ab):
        V.Exp(e, a, n)
        V.Ln(ln, a, n)
        V.Sqrt(sq, a, n)
        V.Abs(ab, a, n)

    run(body, a=a, **outs)
    assert np.array_equal(bits(outs["e"]), _ref_unary(_exp, a, dt))
    assert np.array_equal(bits(outs["ln"]), _ref_unary(_log, a, dt))
    assert np.array_equal(bits(outs["sq"]), _ref_unary(_sqrt, a, dt))
    mask = (1 << (8 * dt.itemsize - 1)) - 1
    assert np.array_equal(bits(outs["ab"]), bits(a) & mask)


def _ref_decimal(fn, a, dt):
    """fn (Decimal.exp / Decimal.ln at 50 digits) rounded once to *dt*: the correctly rounded value."""
    out = []
    for x in a.astype(np.float64):
        x = float(x)
        if fn is Decimal.ln and x <= 0:
            y = -math.inf if x == 0 else math.nan
        elif fn is Decimal.exp and not -200 < x < 200:  # 0 or inf in every dtype here
            y = 0.0 if x < 0 else math.inf
        else:
            y = round_exact(Fraction(fn(Decimal(x))), False, dt)
        out.append(y)
    return encode(out, dt)


@pytest.mark.parametrize("dt,sample", [(F16, None), (BF16, 3000)], ids=["fp16-all", "bf16-sample"])
def test_exp_ln_are_correctly_rounded(dt, sample, rng):
    """Exp/Ln == the correctly rounded value (50-digit decimal reference): every finite fp16 input,
    a random sample of bf16 ones."""
    with np.errstate(invalid="ignore"):
        codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        a = codes.view(dt)[np.isfinite(codes.view(dt).astype(np.float64))]
    if sample:
        a = rng.choice(a, sample, replace=False)
    for part in np.array_split(a, -(-a.size // 16384)):  # three 32 KiB tensors per launch fit the UB
        n = part.size
        e, ln = np.zeros(n, dt), np.zeros(n, dt)

        def body(a, e, ln):
            V.Exp(e, a, n)
            V.Ln(ln, a, n)

        run(body, a=part, e=e, ln=ln)
        with localcontext() as ctx:
            ctx.prec = 50
            assert np.array_equal(bits(e), _ref_decimal(Decimal.exp, part, dt))
            assert np.array_equal(bits(ln), _ref_decimal(Decimal.ln, part, dt))


# ------------------------------------------------------------------ repeat form (level 0)
def ref_repeat_index(mask, itemsize, rep, blk, rs):
    """Element index of every active (repeat, lane), by a plain loop over the Ascend C definition."""
    epr, epb = 256 // itemsize, 32 // itemsize
    if isinstance(mask, int):
        active = list(range(mask))
    else:
        words = list(mask) + [0]
        active = [i for i in range(epr) if (words[i // 64] >> (i % 64)) & 1]
    return [r * rs * epb + (i // epb) * blk * epb + i % epb for r in range(rep) for i in active]


@pytest.mark.parametrize("dt,mask", [(F16, [0xF0F0_0000_FFFF_0001, 0x8000_0000_0000_00FF]), (F32, 37),
                                     (F32, [0x8000_0000_0000_0003])], ids=["fp16-bits", "fp32-count", "fp32-bits"])
def test_binary_repeat_form_writes_only_masked_elements(dt, mask, rng):
    """Add(dst, a, b, mask, 3, BinaryRepeatParams) == a loop over repeats, blocks and mask bits."""
    params = V.BinaryRepeatParams(dstBlkStride=2, src0BlkStride=1, src1BlkStride=3, dstRepStride=17,
                                  src0RepStride=8, src1RepStride=12)
    item, rep = dt.itemsize, 3
    n = 2048 // item
    a = rng.standard_normal(n).astype(dt)
    b = rng.standard_normal(n).astype(dt)
    z = np.full(n, 77.0, dt)
    run(lambda a, b, z: V.Add(z, a, b, mask, rep, params), a=a, b=b, z=z)
    expect = np.full(n, 77.0, dt)
    di = ref_repeat_index(mask, item, rep, 2, 17)
    ai = ref_repeat_index(mask, item, rep, 1, 8)
    bi = ref_repeat_index(mask, item, rep, 3, 12)
    for d, i, j in zip(di, ai, bi):
        expect[d] = a[i] + b[j]  # numpy scalar fp16/fp32 add: the IEEE operation
    assert np.array_equal(bits(z), bits(expect))


@pytest.mark.parametrize("dt", [F16, F32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("mask,strides", [
    (None, (1, 1, 0, 8, 8, 1)),  # whole repeat; src1 one block per repeat, broadcast (a RowBroadcast)
    (None, (1, 1, 1, 8, 60, 8)),  # whole repeat; src0 rows 60 blocks apart (a row fold)
    (40, (1, 1, 1, 8, 8, 8)),  # a count ending inside a block, block stride 1
    (5, (3, 2, 0, 4, 5, 1)),  # a count inside the first block, other block strides
    (32, (2, 1, 0, 16, 8, 2)),  # whole blocks, destination block stride 2
    (None, (0, 1, 1, 8, 8, 8)),  # destination block stride 0: blocks written over (the last stays)
    (16, (1, 1, 1, 1, 1, 1)),  # repeats overlapping each other in every operand
], ids=["bcast", "fold", "partial", "first-block", "dst-blk2", "dst-blk0", "overlap"])
def test_repeat_form_strided_views_equal_index_loop(dt, mask, strides, rng):
    """Sub in repeat form (read through strided views where they exist): in place on src0 and into a
    separate destination, against a loop that reads every source first, then writes in repeat-major order."""
    item, rep = dt.itemsize, 4
    mask = REPEAT_BYTES // item if mask is None else mask
    n = 8192 // item
    a, b = rng.standard_normal(n).astype(dt), rng.standard_normal(n).astype(dt)
    params = V.BinaryRepeatParams(*strides)
    z, a2 = np.full(n, 9.0, dt), a.copy()

    def body(a, b, z, a2):
        V.Sub(z, a, b, mask, rep, params)
        V.Sub(a2, a2, b, mask, rep, params)  # in place: the destination is the first source

    run(body, a=a, b=b, z=z, a2=a2)
    di, ai, bi = (ref_repeat_index(mask, item, rep, blk, rs) for blk, rs in zip(strides[:3], strides[3:]))
    for out, start, src0 in ((z, np.full(n, 9.0, dt), a), (a2, a.copy(), a)):
        values = [src0[i] - b[j] for i, j in zip(ai, bi)]  # numpy scalar ops: the IEEE operation
        for d, v in zip(di, values):
            start[d] = v
        assert np.array_equal(bits(out), bits(start))


def test_unary_scalar_duplicate_copy_repeat_forms(rng):
    """Exp, Muls, Duplicate and Copy in repeat form against the same index loop."""
    n = 1024
    a = rng.standard_normal(n).astype(np.float16)
    outs = {k: np.full(n, -5.0, np.float16) for k in ("e", "m", "d", "c")}
    up = V.UnaryRepeatParams(dstBlkStride=1, srcBlkStride=2, dstRepStride=8, srcRepStride=16)

    def body(a, e, m, d, c):
        V.Exp(e, a, 100, 2, up)
        V.Muls(m, a, 3.0, [0x5555_5555_5555_5555, 0], 2, up)
        V.Duplicate(d, 1.5, 40, 3, 2, 12)
        V.Copy(c, a, [0, 0xFFFF_0000_0000_0000], 2, V.CopyRepeatParams(1, 2, 8, 16))

    run(body, a=a, **outs)
    exp = {k: np.full(n, -5.0, np.float16) for k in outs}
    for d, s in zip(ref_repeat_index(100, 2, 2, 1, 8), ref_repeat_index(100, 2, 2, 2, 16)):
        exp["e"][d] = np.float16(math.exp(float(a[s])))  # exact exp rounded once (fp16 via float64)
    m = [0x5555_5555_5555_5555, 0]
    for d, s in zip(ref_repeat_index(m, 2, 2, 1, 8), ref_repeat_index(m, 2, 2, 2, 16)):
        exp["m"][d] = a[s] * np.float16(3.0)
    for d in ref_repeat_index(40, 2, 3, 2, 12):
        exp["d"][d] = 1.5
    c = [0, 0xFFFF_0000_0000_0000]
    for d, s in zip(ref_repeat_index(c, 2, 2, 1, 8), ref_repeat_index(c, 2, 2, 2, 16)):
        exp["c"][d] = a[s]
    for k in outs:
        assert np.array_equal(bits(outs[k]), bits(exp[k])), k


@pytest.mark.parametrize("bad", [dict(mask=129), dict(mask=0), dict(mask=[0, 0]), dict(rep=256)])
def test_repeat_form_rejects_bad_mask_and_repeat(bad):
    """Masks outside [1, 128] (fp16), an all-zero bit mask and repeatTimes > 255 raise NpuBufferError."""
    mask, rep = bad.get("mask", 128), bad.get("rep", 1)
    a = np.zeros(128, np.float16)
    with pytest.raises(NpuBufferError):
        run(lambda a: V.Add(a, a, a, mask, rep, V.BinaryRepeatParams(dstRepStride=0, src0RepStride=0,
                                                                     src1RepStride=0)), a=a)


def test_fp32_bit_mask_high_word_and_out_of_range_access_raise():
    """32-bit elements have 64 lanes (the high mask word must be 0); a count past the buffer raises."""
    a = np.zeros(256, np.float32)
    with pytest.raises(NpuBufferError, match="high word"):
        run(lambda a: V.Exp(a, a, [1, 1], 1, V.UnaryRepeatParams()), a=a)
    with pytest.raises(NpuBufferError, match="leaves the allocation"):
        run(lambda a: V.Add(a, a, a, 257), a=a)
    with pytest.raises(NpuBufferError, match="leaves the allocation"):  # repeat 4 at stride 8 = 256 floats
        run(lambda a: V.Add(a, a, a, 64, 5, V.BinaryRepeatParams()), a=a)


@pytest.mark.parametrize("call,match", [
    (lambda a, h, i: V.Exp(i, i, 8), "Exp: dtype int32"),
    (lambda a, h, i: V.Add(a, a, h, 8), "Add: dtype float32/float16"),
    (lambda a, h, i: V.Cast(a, h, V.RoundMode.CAST_RINT, 8), "Cast: float16 -> float32 with CAST_RINT"),
    (lambda a, h, i: V.ReduceSum(i, i, i, 8), "ReduceSum: dtype int32"),
], ids=["exp-int32", "mixed", "cast-mode", "reduce-int32"])
def test_unsupported_dtypes_raise_not_implemented(call, match):
    """Unsupported dtype combinations name the instruction and the dtype (re-raised as KernelError)."""
    with pytest.raises(KernelError, match=match) as info:
        run(call, a=np.zeros(64, np.float32), h=np.zeros(64, np.float16), i=np.zeros(64, np.int32))
    root = info.value
    while isinstance(root, KernelError) and root.__cause__ is not None:
        root = root.__cause__
    assert isinstance(root, NotImplementedError)


# ------------------------------------------------------------------ Cast
def test_cast_rounding_modes_match_the_ascend_examples():
    """Ascend C Cast table examples: 0.5 + 2**-12 -> half, 2**22 + 0.5 -> int32, 0.5 -> float (integral)."""
    modes = ["CAST_RINT", "CAST_FLOOR", "CAST_CEIL", "CAST_ROUND", "CAST_TRUNC"]
    src = np.array([0.5 + 2.0**-12, -(0.5 + 2.0**-12), 2.0**22 + 0.5, 0.5, 65520.0, np.nan] + [0.0] * 2, np.float32)
    outs = {f"h{m}": np.zeros(8, np.float16) for m in modes + ["CAST_ODD"]}
    outs.update({f"i{m}": np.zeros(8, np.int32) for m in modes})
    outs.update({f"f{m}": np.zeros(8, np.float32) for m in modes})

    def body(src, **o):
        for m in modes:
            V.Cast(o[f"h{m}"], src, V.RoundMode[m], 8)
            V.Cast(o[f"i{m}"], src, m, 8)
            V.Cast(o[f"f{m}"], src, V.RoundMode[m], 8)
        V.Cast(o["hCAST_ODD"], src, V.RoundMode.CAST_ODD, 8)

    run(body, src=src, **outs)
    up, down = 0.5 + 2.0**-11, 0.5
    half = {"CAST_RINT": down, "CAST_FLOOR": down, "CAST_CEIL": up, "CAST_ROUND": up, "CAST_TRUNC": down,
            "CAST_ODD": up}
    for m, v in half.items():
        assert float(outs[f"h{m}"][0]) == v, m
        neg = {"CAST_FLOOR": -up, "CAST_CEIL": -down}.get(m, -v)
        assert float(outs[f"h{m}"][1]) == neg, m
    # 65520 is the fp16 overflow tie: RINT/ROUND -> inf, directed modes toward zero -> 65504
    assert [float(outs[f"h{m}"][4]) for m in modes] == [math.inf, 65504.0, math.inf, math.inf, 65504.0]
    assert bits(outs["hCAST_RINT"])[5] == 0x7E00
    ints = {"CAST_RINT": 2**22, "CAST_FLOOR": 2**22, "CAST_CEIL": 2**22 + 1, "CAST_ROUND": 2**22 + 1,
            "CAST_TRUNC": 2**22}
    for m, v in ints.items():
        assert outs[f"i{m}"][2] == v, m
        assert outs[f"i{m}"][5] == 0  # NaN -> 0
    assert [float(outs[f"f{m}"][3]) for m in modes] == [0.0, 0.0, 1.0, 1.0, 0.0]


def test_cast_fp32_to_fp16_and_bf16_rint_is_exact_rounding(rng):
    """Random fp32 (all exponents) -> fp16 / bf16 with CAST_RINT == exact round-to-nearest-even."""
    a, _ = operands(F32, 500, rng)
    a = a[np.isfinite(a)]
    n = a.size
    h, bf = np.zeros(n, np.float16), np.zeros(n, BF16)

    def body(a, h, bf):
        V.Cast(h, a, V.RoundMode.CAST_RINT, n)
        V.Cast(bf, a, V.RoundMode.CAST_RINT, n)

    run(body, a=a, h=h, bf=bf)
    for out, dt in ((h, F16), (bf, BF16)):
        ref = encode([round_exact(Fraction(float(x)), math.copysign(1, float(x)) < 0, dt) for x in a], dt)
        assert np.array_equal(bits(out), ref)


def test_cast_repeat_form_counts_lanes_of_the_wider_type(rng):
    """fp16 -> fp32, mask 64 (the fp32 limit), 2 repeats: src repeats 4 blocks apart, dst 8."""
    h = rng.standard_normal(256).astype(np.float16)
    f = np.full(256, -1.0, np.float32)
    run(lambda h, f: V.Cast(f, h, V.RoundMode.CAST_NONE, 40, 2, V.UnaryRepeatParams(1, 1, 8, 4)), h=h, f=f)
    expect = np.full(256, -1.0, np.float32)
    for r in range(2):
        for i in range(40):
            expect[r * 64 + i] = np.float32(h[r * 64 + i])
    assert np.array_equal(bits(f), bits(expect))


# ------------------------------------------------------------------ Compare / Select
@pytest.mark.parametrize("mode", list(V.CMPMODE), ids=[m.name for m in V.CMPMODE])
def test_compare_writes_lsb_first_bits(mode, rng):
    """Bit i of byte i // 8 := src0[i] op src1[i]; NaN compares false except NE; spare bits 0."""
    n = 133
    a = rng.integers(-3, 4, n).astype(np.float16)
    b = rng.integers(-3, 4, n).astype(np.float16)
    a[5], b[9] = np.nan, np.nan
    m = np.full(24, 0xEE, np.uint8)
    run(lambda a, b, m: V.Compare(m, a, b, mode, n), a=a, b=b, m=m)
    ops = {"LT": float.__lt__, "GT": float.__gt__, "EQ": float.__eq__, "LE": float.__le__, "GE": float.__ge__,
           "NE": float.__ne__}
    expect = [0] * 17 + [0xEE] * 7
    for i in range(n):
        if ops[mode.name](float(a[i]), float(b[i])):
            expect[i // 8] |= 1 << (i % 8)
    assert m.tolist() == expect


def test_select_three_modes(rng):
    """Mask bit 1 -> src0, 0 -> src1 / scalar; CMPMASK_SPR reuses the first 128 bits every repeat."""
    n = 300
    a = rng.standard_normal(n).astype(np.float16)
    b = rng.standard_normal(n).astype(np.float16)
    sel = rng.integers(0, 256, 40).astype(np.uint8)
    outs = {k: np.zeros(n, np.float16) for k in ("tt", "ts", "spr")}

    def body(a, b, sel, tt, ts, spr):
        V.Select(tt, sel, a, b, V.SELMODE.VSEL_TENSOR_TENSOR_MODE, n)
        V.Select(ts, sel, a, 2.5, V.SELMODE.VSEL_TENSOR_SCALAR_MODE, n)
        V.Select(spr, sel, a, b, V.SELMODE.VSEL_CMPMASK_SPR, n)

    run(body, a=a, b=b, sel=sel, **outs)

    def bit(i):
        return (int(sel[i // 8]) >> (i % 8)) & 1

    assert all(outs["tt"][i] == (a[i] if bit(i) else b[i]) for i in range(n))
    assert all(outs["ts"][i] == (a[i] if bit(i) else np.float16(2.5)) for i in range(n))
    assert all(outs["spr"][i] == (a[i] if bit(i % 128) else b[i]) for i in range(n))


# ------------------------------------------------------------------ reductions
def ref_tree(vals, op):
    """Adjacent pairs, level by level (a Python loop over numpy scalars of the dtype)."""
    vals = list(vals)
    while len(vals) > 1:
        vals = [op(vals[i], vals[i + 1]) for i in range(0, len(vals), 2)]
    return vals[0]


def _add(x, y):
    with np.errstate(all="ignore"):
        return x + y  # numpy fp16/fp32 scalar add: the IEEE operation


def _max(x, y):
    if np.isnan(x) or np.isnan(y):
        return x.dtype.type(np.nan)
    return x if x >= y else y


@pytest.mark.parametrize("dt,count", [(F16, 300), (F16, 128), (F32, 5000)], ids=["fp16-300", "fp16-128", "fp32-5000"])
def test_reduce_sum_tree_per_repeat_then_in_order(dt, count, rng):
    """ReduceSum: pairwise tree in each repeat (tail lanes -0), repeat results added in order."""
    x = (rng.standard_normal(count) * np.where(rng.random(count) < 0.05, 3000, 1)).astype(dt)
    epr = 256 // dt.itemsize
    work = np.zeros(-(-(-(-count // epr)) // 8) * 8 + 16, dt)
    out = np.full(4, 9.0, dt)
    run(lambda x, w, o: V.ReduceSum(o, x, w, count), x=x, w=work, o=out)
    parts = []
    for r in range(-(-count // epr)):
        lane = [x[i] if i < count else dt.type(-0.0) for i in range(r * epr, (r + 1) * epr)]
        parts.append(ref_tree(lane, _add))
    acc = parts[0]
    for p in parts[1:]:
        acc = _add(acc, p)
    assert bits(out)[0] == bits(np.array([acc], dt))[0]
    assert np.array_equal(bits(out)[1:], bits(np.full(3, 9.0, dt)))  # only dst[0] is written


def test_reduce_max_with_index_picks_the_first_maximum(rng):
    """ReduceMax(calIndex): the max and, as uint16 bits, the index of its first occurrence; NaN wins."""
    x = rng.standard_normal(700).astype(np.float16)
    x[[123, 456, 650]] = np.float16(8.0)
    y = x.copy()
    y[500] = np.nan
    o1, o2 = np.zeros(2, np.float16), np.zeros(2, np.float16)
    w = np.zeros(64, np.float16)

    def body(x, y, w, o1, o2):
        V.ReduceMax(o1, x, w, 700, True)
        PipeBarrier(Pipe.V)
        V.ReduceMax(o2, y, w, 700, calIndex=True)

    run(body, x=x, y=y, w=w, o1=o1, o2=o2)
    assert float(o1[0]) == 8.0 and bits(o1)[1] == 123
    assert bits(o2)[0] == 0x7E00 and bits(o2)[1] == 500


def test_reduce_work_buffer_too_small_raises():
    """ReduceSum needs ceil(repeats / per-block) blocks of work; one block short raises NpuBufferError."""
    x, o = np.zeros(64 * 20, np.float32), np.zeros(8, np.float32)  # 20 repeats -> 24 floats of work
    with pytest.raises(NpuBufferError):
        run(lambda x, o: V.ReduceSum(o, x, o, 64 * 20), x=x, o=o)  # work = o: only 8 floats


def test_whole_reduce_sum_and_max_per_repeat(rng):
    """WholeReduceSum/Max: per-repeat tree with masked lanes as identity; dstRepStride in result slots."""
    n = 128 * 4
    x = rng.standard_normal(n).astype(np.float16)
    x[128 + 7] = np.float16(50.0)
    mask = [0xFFFF_0000_FFFF_00FF, 0x0F0F_0F0F_0F0F_0F0F]
    outs = {k: np.full(32, 3.0, np.float16) for k in ("s", "vi", "iv", "v", "i")}

    def body(x, s, vi, iv, v, i):
        V.WholeReduceSum(s, x, mask, 3, 2, 1, 8)
        V.WholeReduceMax(vi, x, mask, 3, 1, 1, 8)
        V.WholeReduceMax(iv, x, mask, 3, 2, 1, 8, V.ReduceOrder.ORDER_INDEX_VALUE)
        V.WholeReduceMax(v, x, mask, 3, 1, 1, 8, V.ReduceOrder.ORDER_ONLY_VALUE)
        V.WholeReduceMax(i, x, mask, 3, 1, 1, 8, V.ReduceOrder.ORDER_ONLY_INDEX)

    run(body, x=x, **outs)
    active = [k for k in range(128) if ((mask[k // 64] >> (k % 64)) & 1)]
    firsts = []
    for r in range(3):
        lane = [x[r * 128 + k] if k in active else np.float16(-0.0) for k in range(128)]
        mlane = [x[r * 128 + k] if k in active else np.float16(-np.inf) for k in range(128)]
        total, top = ref_tree(lane, _add), ref_tree(mlane, _max)
        first = next(k for k in active if x[r * 128 + k] == top)
        firsts.append(first)
        assert bits(outs["s"])[2 * r] == bits(np.array([total]))[0]
        assert outs["vi"][2 * r] == top and bits(outs["vi"])[2 * r + 1] == first
        assert bits(outs["iv"])[4 * r] == first and outs["iv"][4 * r + 1] == top
        assert outs["v"][r] == top
        assert outs["i"][2 * r: 2 * r + 2].view(np.uint32)[0] == first
    assert firsts[1] == 7 and float(outs["v"][1]) == 50.0  # the planted max of repeat 1 is lane 7
    assert np.all(outs["s"][[1, 3, 5]] == 3.0) and np.all(outs["v"][3:] == 3.0)


@pytest.mark.parametrize("dt", [F16, F32], ids=["fp16", "fp32"])
def test_whole_reduce_max_zero_signs_and_nan_follow_the_tree(dt, rng):
    """WholeReduceMax (value only and value + index): a repeat whose maximum is a zero takes the sign the
    tree's compare-selects give (-0 and +0 compare equal), a repeat with a NaN gives the canonical NaN."""
    epr = REPEAT_BYTES // dt.itemsize
    x = -np.abs(rng.standard_normal(epr * 4)).astype(dt) - dt.type(1)
    x[0:epr:3] = dt.type(-0.0)  # repeat 0: maximum 0, -0 and +0 mixed
    x[1:epr:7] = dt.type(0.0)
    x[epr:2 * epr] = dt.type(-0.0)  # repeat 1: all -0 but one +0
    x[epr + 5] = dt.type(0.0)
    x[2 * epr + 9] = dt.type(np.nan)  # repeat 2: a NaN
    v, vi = np.full(8, 3.0, dt), np.full(16, 3.0, dt)

    def body(x, v, vi):
        V.WholeReduceMax(v, x, epr, 4, 1, 1, 8, V.ReduceOrder.ORDER_ONLY_VALUE)
        V.WholeReduceMax(vi, x, epr, 4, 1, 1, 8)

    run(body, x=x, v=v, vi=vi)
    for r in range(4):
        top = ref_tree(list(x[r * epr:(r + 1) * epr]), _max)
        want = QNAN[dt] if np.isnan(top) else bits(np.array([top], dt))[0]
        assert bits(v)[r] == want and bits(vi)[2 * r] == want, r


def test_block_reduce_one_result_per_block(rng):
    """BlockReduceSum/Max: 8 results per repeat at dstRepStride x 8; blocks without lanes untouched."""
    x = rng.standard_normal(64 * 3).astype(np.float32)
    mask = [0x00FF_00F0_0000_FF0F]  # lanes 0-3, 8-15, 36-39, 48-55: blocks 0, 1, 4, 6 of 8 floats
    s, m = np.full(40, 5.0, np.float32), np.full(40, 5.0, np.float32)

    def body(x, s, m):
        V.BlockReduceSum(s, x, 3, mask, 2, 1, 8)
        V.BlockReduceMax(m, x, 3, mask, 2, 1, 8)

    run(body, x=x, s=s, m=m)
    es, em = np.full(40, 5.0, np.float32), np.full(40, 5.0, np.float32)
    for r in range(3):
        for blk in range(8):
            act = [k for k in range(blk * 8, blk * 8 + 8) if (mask[0] >> k) & 1]
            if not act:
                continue
            es[r * 16 + blk] = ref_tree([x[r * 64 + k] if k in act else np.float32(-0.0)
                                         for k in range(blk * 8, blk * 8 + 8)], _add)
            em[r * 16 + blk] = ref_tree([x[r * 64 + k] if k in act else np.float32(-np.inf)
                                         for k in range(blk * 8, blk * 8 + 8)], _max)
    assert np.array_equal(bits(s), bits(es)) and np.array_equal(bits(m), bits(em))


# ------------------------------------------------------------------ rearrangement
def test_brcb_gather_transpose(rng):
    """Brcb fills whole blocks; Gather reads by byte offsets; Transpose swaps a 16 x 16 fp16 tile."""
    src = rng.standard_normal(16).astype(np.float32)
    brcb = np.zeros(256, np.float32)
    table = rng.standard_normal(100).astype(np.float32)
    idx = rng.integers(0, 98, 64)  # + base 2 stays inside the table
    off = (idx * 4).astype(np.uint32)
    g = np.zeros(64, np.float32)
    tile = rng.standard_normal(256).astype(np.float16)
    tt = np.zeros(256, np.float16)

    def body(src, brcb, table, off, g, tile, tt):
        V.Brcb(brcb, src, 2, V.BrcbRepeatParams(dstBlkStride=1, dstRepStride=16))
        V.Gather(g, table, off, 8, 64)
        V.Transpose(tt, tile)

    run(body, src=src, brcb=brcb, table=table, off=off, g=g, tile=tile, tt=tt)
    expect = np.zeros(256, np.float32)
    for r in range(2):
        for j in range(8):
            expect[(r * 16 + j) * 8:(r * 16 + j) * 8 + 8] = src[8 * r + j]
    assert np.array_equal(bits(brcb), bits(expect))
    assert np.array_equal(g, table[idx + 2])  # base 8 bytes = 2 floats
    assert all(tt[16 * i + j] == tile[16 * j + i] for i in range(16) for j in range(16))


@pytest.mark.parametrize("dt", (np.float16, np.float32))
@pytest.mark.parametrize("blk, rs", ((1, 8), (2, 16), (1, 9), (3, 30), (0, 1), (1, 4), (2, 8), (1, 0)))
def test_brcb_strides_against_loop(dt, blk, rs):
    """Brcb's block placement for apart, overlapping and zero strides (later writes win), in 3 repeats."""
    epb = 32 // np.dtype(dt).itemsize
    src = np.arange(1, 25).astype(dt)
    out = np.full(96 * epb, -1, dt)
    run(lambda src, out: V.Brcb(out, src, 3, V.BrcbRepeatParams(dstBlkStride=blk, dstRepStride=rs)), src=src, out=out)
    expect = np.full(96 * epb, -1, dt)
    for r in range(3):
        for j in range(8):
            expect[(r * rs + j * blk) * epb:(r * rs + j * blk + 1) * epb] = src[8 * r + j]
    assert np.array_equal(bits(out), bits(expect))


def test_gather_out_of_range_offset_raises():
    """An offset past src's allocation (or misaligned) raises NpuBufferError naming the element."""
    table, g = np.zeros(8, np.float32), np.zeros(8, np.float32)
    off = np.array([0, 4, 2, 0, 0, 0, 0, 0], np.uint32)  # element 2: byte 2 is misaligned
    with pytest.raises(NpuBufferError, match="element 2"):
        run(lambda t, o, g: V.Gather(g, t, o, 0, 8), t=table, o=off, g=g)


# ------------------------------------------------------------------ cost
def _cost_kernel():
    pipe = TPipe()
    b = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(b, 96 * 1024)
    h = b.Get(np.float16)
    f = h.ReinterpretCast(np.float32)
    u = h.ReinterpretCast(np.uint32)
    m = h.ReinterpretCast(np.uint8)
    V.Add(h[0:], h[2048:], h[4096:], 2048)  # 16 repeats x 2 = 32 cycles, latency ADD 6
    V.Muls(f[4096:], f[5120:], 2.0, 1000)  # 4000 B -> 16 repeats x 1, MULS 7
    V.Exp(h[12288:], h[12288:], 128)  # 1 x 2, EXP 12
    V.Div(f[7000:], f[7064:], f[7128:], 64)  # 1 x 4, DIV 13
    V.ReduceSum(f[8192:], f[8256:], f[12416:], 4096)  # passes 64 + 1 repeats x 2 + one ROWSUM 20 between
    V.WholeReduceMax(h[26000:], h[26112:], 128, 4, 1, 1, 8)  # 4 x 2, ROWMAX fp16 9
    V.BlockReduceSum(h[27008:], h[27136:], 8, 128, 1, 1, 8)  # 8 x 1.875 = 15, ROWSUM fp16 23
    V.Cast(f[15000:], h[31008:], V.RoundMode.CAST_NONE, 128)  # 128 x 4 B = 2 repeats x 2, default 10
    V.Select(h[32000:], m[70016:], h[32256:], h[32512:], V.SELMODE.VSEL_TENSOR_TENSOR_MODE, 256)  # 2 x 2
    V.Duplicate(h[33008:], 0.0, 256)  # 2 x 1
    V.Gather(f[17000:], f[17064:], u[17128:], 0, 64)  # 1 x 256/21
    V.Adds(h[36000:], h[36000:], 1.0, 16)  # 1 x 1, ADDS 6


# (name, start, end): one scalar issue per cycle (conftest chip); an instruction starts when the
# V pipe is free (previous start + occupancy) and ends occupancy + latency later.
COST_TIMELINE = [
    ("Add", 1, 39), ("Muls", 33, 56), ("Exp", 49, 63), ("Div", 51, 68), ("ReduceSum", 55, 225),
    ("WholeReduceMax", 205, 222), ("BlockReduceSum", 213, 251), ("Cast", 228, 242), ("Select", 232, 246),
    ("Duplicate", 236, 248), ("Gather", 238, 260), ("Adds", 250, 257),  # Gather: 238 + 12.19 + 10
]


def test_cost_timeline_is_exact(chip):
    """Occupancy = repeats x cost class, latency = the pypto table: the exact V-pipe timeline."""
    res = launch(_cost_kernel, (), block_dim=1, chip=chip, kernel_type="vector")
    df = res.trace.df
    got = [(r.name, int(r.start_cycle), int(r.end_cycle)) for r in df[df["pipe"] == "VECTOR"].itertuples()]
    assert got == COST_TIMELINE
    add = df[df.name == "Add"].iloc[0]
    assert (add.bytes, add.flops) == (3 * 2048 * 2, 2048)


def test_cost_scales_with_vector_bytes_per_cycle(chip):
    """A chip that reads 512 B per cycle halves every occupancy (latencies unchanged)."""
    res = launch(_cost_kernel, (), block_dim=1, chip=chip.replace(vector_bytes_per_cycle=512),
                 kernel_type="vector")
    df = res.trace.df
    first = df[df["pipe"] == "VECTOR"].iloc[:2]
    assert [(int(r.start_cycle), int(r.end_cycle)) for r in first.itertuples()] == [(1, 23), (17, 32)]


def test_timing_mode_gives_identical_trace(rng):
    """The same kernel in timing mode (no data) books exactly the same cycles as in full mode."""
    arrays = dict(a=rng.standard_normal(1024).astype(np.float32), b=rng.standard_normal(1024).astype(np.float32),
                  h=np.zeros(1024, np.float16), m=np.zeros(128, np.uint8), w=np.zeros(64, np.float32))

    def body(a, b, h, m, w):
        V.Add(a, a, b, 1000)
        V.Exp(a, a, 64, 3, V.UnaryRepeatParams())
        V.Cast(h, a, V.RoundMode.CAST_RINT, 1024)
        PipeBarrier(Pipe.V)
        V.Compare(m, a, b, V.CMPMODE.GT, 1024)
        V.ReduceMax(w, a, w[8:], 1024, True)
        V.WholeReduceSum(b, a, 64, 4, 1, 1, 8)

    full = run(body, **arrays)
    timing = run(body, mode="timing", **arrays)
    assert full.cycles == timing.cycles
    assert full.trace.df.equals(timing.trace.df)
