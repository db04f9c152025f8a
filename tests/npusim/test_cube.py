"""Cube path: Mmad numerics and layouts, Fixpipe conversions, costs and errors.

Goldens restate docs/numerics_cube.md independently: layouts by explicit index loops over ND
matrices, the Mmad order as a recursive halving sum per 16-wide (K0-wide) k fractal in a plain
loop over fractals, Fixpipe dequant as fp16(fp32(fp32(x) * scale)).
"""
import ml_dtypes
import numpy as np
import pytest

from npusim.dtypes import encode_deq_scale_u64
from npusim.errors import KernelError, NpuBufferError
from npusim.kernel import (CFG_NZ, CFG_ROW_MAJOR, DataCopy, Fixpipe, FixpipeParamsV220, LoadData, LoadData2DParams,
                           Mmad, MmadParams, Nd2NzParams, QuantMode_t, TBuf, TPipe, TPosition)
from npusim.launch import GmArg, launch
from tests.conftest import timeline

BF16 = ml_dtypes.bfloat16


def run(kernel, args=(), chip="Ascend910B2", mode="full"):
    return launch(kernel, args, block_dim=1, chip=chip, kernel_type="cube", mode=mode)


def local(position, nbytes, dtype, values=None):
    """A TBuf tensor of *nbytes* at *position*, optionally filled with *values* (full mode)."""
    buf = TBuf(position)
    TPipe().InitBuffer(buf, nbytes)
    t = buf.Get(dtype)
    if values is not None and t.buffer.data is not None:
        t.view(values.size)[:] = values
    return t


def root_cause(exc):
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


# -- independent layout builders (explicit loops) -------------------------------------------------
def l0a_layout(a, k0):
    """A (rows x cols, multiples of 16 x K0) -> L0A: fractal (mb, kb) at mb*K1 + kb, row-major inside."""
    rows, cols = a.shape
    k1 = cols // k0
    out = np.zeros(a.size, a.dtype)
    for m in range(rows):
        for k in range(cols):
            out[((m // 16) * k1 + k // k0) * 16 * k0 + (m % 16) * k0 + k % k0] = a[m, k]
    return out


def l0b_layout(b, k0):
    """B (rows=k x cols=n) -> L0B: fractal (kb, nb) at kb*N1 + nb, 16 n-rows of K0 k-values inside."""
    kk, nn = b.shape
    n1 = nn // 16
    out = np.zeros(b.size, b.dtype)
    for k in range(kk):
        for n in range(nn):
            out[((k // k0) * n1 + n // 16) * 16 * k0 + (n % 16) * k0 + k % k0] = b[k, n]
    return out


def l0c_to_nd(flat, rows, cols):
    """L0C NZ (column blocks of 16, rows of 16) -> (rows x cols)."""
    out = np.zeros((rows, cols), flat.dtype)
    for m in range(rows):
        for n in range(cols):
            out[m, n] = flat[(n // 16) * rows * 16 + m * 16 + n % 16]
    return out


def nd_to_l0c(c):
    rows, cols = c.shape
    out = np.zeros(c.size, c.dtype)
    for m in range(rows):
        for n in range(cols):
            out[(n // 16) * rows * 16 + m * 16 + n % 16] = c[m, n]
    return out


def tree_sum(terms):
    """Recursive halving: for power-of-two counts this is the fixed pairwise tree of NUMERICS."""
    if len(terms) == 1:
        return terms[0]
    h = len(terms) // 2
    return tree_sum(terms[:h]) + tree_sum(terms[h:])


def mmad_golden(a, b, k, k0, acc):
    """acc (fp32) + sum over k fractals, ascending, of the pairwise fp32 sum of exact products."""
    acc = acc.copy()
    for f in range(-(-k // k0)):
        terms = []
        for t in range(f * k0, f * k0 + k0):
            if t < k:
                terms.append(a[:, t].astype(np.float32)[:, None] * b[t, :].astype(np.float32)[None, :])
            else:
                terms.append(np.zeros(acc.shape, np.float32))
        acc = acc + tree_sum(terms)
    return acc


def mmad_kernel(a_l0, b_l0, c_init, out, m, n, k, init, dtype, acc_dtype):
    a2 = local(TPosition.A2, 32768, dtype, a_l0)
    b2 = local(TPosition.B2, 32768, dtype, b_l0)
    c1 = local(TPosition.CO1, 65536, acc_dtype, c_init)
    Mmad(c1, a2, b2, MmadParams(m=m, n=n, k=k, cmatrixInitVal=init))
    out.append(c1.view(c_init.size).copy())


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32])
@pytest.mark.parametrize("init", [True, False])
def test_mmad_bitexact_vs_fixed_order_golden(dtype, init):
    """Odd m, n, k: padded K elements (filled with NaN) are ignored; result equals the fixed-order golden."""
    rng = np.random.default_rng(7)
    k0 = 32 // np.dtype(dtype).itemsize
    m, n, k = 37, 45, 3 * k0 + 5
    rows, cols, kp = 48, 48, 4 * k0
    a = (rng.standard_normal((rows, kp)) * 3).astype(dtype)
    b = (rng.standard_normal((kp, cols)) * 3).astype(dtype)
    a[:, k:] = np.nan  # k padding: must be read as +0
    b[k:, :] = np.nan
    c0 = rng.standard_normal((rows, cols)).astype(np.float32)
    out = []
    run(mmad_kernel, (l0a_layout(a, k0), l0b_layout(b, k0), nd_to_l0c(c0), out, m, n, k, init, dtype, np.float32))
    got = l0c_to_nd(out[0], rows, cols)
    start = np.zeros((rows, cols), np.float32) if init else c0
    expected = mmad_golden(a, b, k, k0, start)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("dtype, scale", [(np.float16, 1.0), (BF16, 1.0), (BF16, 1e-25), (BF16, 1e25)])
@pytest.mark.parametrize("init", [True, False])
def test_mmad_signed_zeros_extremes_and_inf_match_the_tree(dtype, scale, init):
    """Operands full of +-0, subnormals and the largest values, an accumulator holding -0, an Inf operand: the
    result is the fixed-order golden's bit for bit (the fast path's level-1 matmul must not change a signed
    zero's effect; bf16 products that underflow or overflow fp32, and Inf operands, must give the tree's bits)."""
    rng = np.random.default_rng(11)
    k0 = 16
    m, n, k = 32, 48, 2 * k0 + 3
    rows, cols, kp = 32, 48, 3 * k0
    pool = np.array([0.0, -0.0, 1.0, -1.5, 2.0 ** -24, -(2.0 ** -20), 65504.0, -0.3, 7.0]) * scale
    a = rng.choice(pool, (rows, kp)).astype(dtype)
    b = rng.choice(pool, (kp, cols)).astype(dtype)
    c0 = rng.choice(np.array([0.0, -0.0, 1.0, -2.5], np.float32), (rows, cols)).astype(np.float32)
    a[:2] = -0.0  # rows whose products are all -0 (b's columns of positive values): the tree's sum is -0 ...
    b[:, :4] = np.abs(b[:, :4]) + 1
    c0[:2, :4] = -0.0  # ... and -0 + -0 is the only sum that keeps an accumulator's -0
    for with_inf in (False, True):
        if with_inf:
            a[3, 5] = np.inf
        out = []
        run(mmad_kernel, (l0a_layout(a, k0), l0b_layout(b, k0), nd_to_l0c(c0), out, m, n, k, init, dtype,
                          np.float32))
        got = l0c_to_nd(out[0], rows, cols)
        start = np.zeros((rows, cols), np.float32) if init else c0
        with np.errstate(all="ignore"):
            expected = mmad_golden(a, b, k, k0, start)
        assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_mmad_int8_exact_and_wraps_int32():
    """int8 x int8 accumulates exactly in int32 and wraps around modulo 2**32 on top of L0C."""
    rng = np.random.default_rng(3)
    m, n, k = 20, 30, 70
    rows, cols, kp = 32, 32, 96
    a = rng.integers(-128, 128, (rows, kp)).astype(np.int8)
    b = rng.integers(-128, 128, (kp, cols)).astype(np.int8)
    c0 = np.full((rows, cols), 2**31 - 1000, np.int32)
    out = []
    run(mmad_kernel, (l0a_layout(a, 32), l0b_layout(b, 32), nd_to_l0c(c0), out, m, n, k, False, np.int8, np.int32))
    exact = c0.astype(np.int64) + a[:, :k].astype(np.int64) @ b[:k, :].astype(np.int64)
    wrapped = ((exact + 2**31) % 2**32 - 2**31).astype(np.int32)
    assert np.array_equal(l0c_to_nd(out[0], rows, cols), wrapped)
    assert (exact > 2**31 - 1).any()  # the case really wraps


def test_b_layout_from_bt_plain_copy_equals_b_with_transposed_load():
    """L0B from Nd2Nz(B^T) + plain LoadData equals L0B from Nd2Nz(B) + per-k-block transposed LoadData."""
    rng = np.random.default_rng(5)
    k, n = 48, 32
    b = rng.standard_normal((k, n)).astype(np.float16)
    got = []

    def kern(b_gm, bt_gm):
        k1, n1 = k // 16, n // 16
        b1 = local(TPosition.B1, 4096, np.float16)
        bt1 = local(TPosition.B1, 4096, np.float16)
        via_t = local(TPosition.B2, 4096, np.float16)
        plain = local(TPosition.B2, 4096, np.float16)
        DataCopy(b1, b_gm, Nd2NzParams(1, k, n, 0, n, k, 1, 0))
        DataCopy(bt1, bt_gm, Nd2NzParams(1, n, k, 0, k, n, 1, 0))
        for kb in range(k1):
            LoadData(via_t[kb * n1 * 256], b1[kb * 256], LoadData2DParams(0, n1, k1, ifTranspose=True))
        LoadData(plain, bt1, LoadData2DParams(0, k1 * n1, 1))
        got.extend([via_t.view(k * n).copy(), plain.view(k * n).copy()])

    run(kern, (GmArg("b", b), GmArg("bt", np.ascontiguousarray(b.T))))
    expected = l0b_layout(b, 16)
    assert np.array_equal(got[0].view(np.uint16), expected.view(np.uint16))
    assert np.array_equal(got[1].view(np.uint16), expected.view(np.uint16))


# -- Fixpipe ---------------------------------------------------------------------------------------
def fixpipe_kernel(l0c, acc_dtype, gm, params, config, ws=None):
    c1 = local(TPosition.CO1, 65536, acc_dtype, l0c)
    if ws is None:
        Fixpipe(gm, c1, params, config=config)
    else:
        Fixpipe(gm, c1, local(TPosition.A1, 1024, ws.dtype, ws), params, config=config)


@pytest.mark.parametrize("dst_dtype, quant", [(np.float16, QuantMode_t.F322F16), (np.float16, QuantMode_t.NoQuant),
                                              (BF16, QuantMode_t.F322BF16), (np.float32, QuantMode_t.NoQuant)])
def test_fixpipe_nz2nd_cast_relu_two_matrices(dst_dtype, quant):
    """NZ -> ND with row pitch > nSize, ndNum = 2, ReLU and RNE cast; padding rows and columns dropped."""
    rng = np.random.default_rng(11)
    m, n, rows, pitch = 21, 35, 32, 40
    mats = [(rng.standard_normal((rows, 48)) * 1e3).astype(np.float32) for _ in range(2)]
    mats[0][0, :3] = [-0.0, np.inf, -1e-30]
    l0c = np.concatenate([nd_to_l0c(mats[0]), nd_to_l0c(mats[1])])  # matrix 2 at 6 fractals
    dst = np.full(2 * 1000, 7, dst_dtype)
    p = FixpipeParamsV220(nSize=n, mSize=m, srcStride=rows, dstStride=pitch, quantPre=quant, ndNum=2,
                          srcNdStride=6, dstNdStride=1000, reluEn=True)
    run(fixpipe_kernel, (l0c, np.float32, GmArg("c", dst), p, CFG_ROW_MAJOR))
    expected = np.full(2 * 1000, 7, dst_dtype)
    for i in range(2):
        for r in range(m):
            for c in range(n):
                v = mats[i][r, c]
                v = np.float32(0) if v <= 0 else v
                expected[i * 1000 + r * pitch + c] = np.asarray(v, np.float32).astype(dst_dtype)
    assert np.array_equal(dst.view(np.uint8), expected.view(np.uint8))


@pytest.mark.parametrize("encoding", ["fp32", "fp19_word"])
def test_fixpipe_dequant_scalar_both_encodings(encoding):
    """int32 -> fp16 DEQF16: fp16(fp32(fp32(x) * s)); the uint64 word carries s truncated to FP19."""
    rng = np.random.default_rng(2)
    m, n = 16, 32
    acc = rng.integers(-2**24, 2**24, (m, n)).astype(np.int32)
    acc[0, :4] = [2**31 - 1, -2**31, 16777217, 0]
    scale = np.float32(0.0012345679)
    deq = float(scale) if encoding == "fp32" else int(encode_deq_scale_u64(scale))
    dst = np.zeros(m * n, np.float16)
    p = FixpipeParamsV220(nSize=n, mSize=m, srcStride=16, dstStride=n, quantPre=QuantMode_t.DEQF16, deqScalar=deq)
    run(fixpipe_kernel, (nd_to_l0c(acc), np.int32, GmArg("c", dst), p, CFG_ROW_MAJOR))
    s = scale if encoding == "fp32" else np.uint32(scale.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    if encoding == "fp19_word":
        assert s != scale  # the FP19 truncation really changes this scale
    with np.errstate(over="ignore"):
        expected = (acc.astype(np.float32) * s).astype(np.float16).reshape(-1)
    assert np.array_equal(dst.view(np.uint16), expected.view(np.uint16))


def test_fixpipe_dequant_per_channel_vector():
    """VDEQF16: one FP19 uint64 scale per output column, read from an L1 workspace; ReLU after dequant."""
    rng = np.random.default_rng(4)
    m, n = 20, 24
    acc = rng.integers(-10**6, 10**6, (32, 32)).astype(np.int32)
    scales = (rng.random(n) * 1e-3).astype(np.float32)
    words = encode_deq_scale_u64(scales)
    dst = np.zeros(m * n, np.float16)
    p = FixpipeParamsV220(nSize=n, mSize=m, srcStride=32, dstStride=n, quantPre=QuantMode_t.VDEQF16, reluEn=True)
    run(fixpipe_kernel, (nd_to_l0c(acc), np.int32, GmArg("c", dst), p, CFG_ROW_MAJOR, words))
    s19 = (scales.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    expected = np.zeros((m, n), np.float16)
    for r in range(m):
        for c in range(n):
            v = np.float32(np.float32(acc[r, c]) * s19[c])
            expected[r, c] = np.float16(0) if v <= 0 else np.float16(v)
    assert np.array_equal(dst.view(np.uint16), expected.reshape(-1).view(np.uint16))


def test_fixpipe_nz_output_into_l1():
    """CFG_NZ into L1: column block j at j*dstStride*32 bytes, mSize rows of 16, cast to fp16."""
    rng = np.random.default_rng(6)
    m, n, rows = 18, 40, 32
    c = rng.standard_normal((rows, 48)).astype(np.float32)
    got = []

    def kern():
        c1 = local(TPosition.CO1, 65536, np.float32, nd_to_l0c(c))
        l1 = local(TPosition.A1, 8192, np.float16, np.zeros(4096, np.float16))
        Fixpipe(l1, c1, FixpipeParamsV220(nSize=n, mSize=m, srcStride=rows, dstStride=24), config=CFG_NZ)
        got.append(l1.view().copy())

    run(kern)
    expected = np.zeros(4096, np.float16)
    for j in range(3):  # ceil(40 / 16) blocks, each written whole (16 columns)
        for r in range(m):
            for e in range(16):
                expected[j * 24 * 16 + r * 16 + e] = np.float16(c[r, j * 16 + e])
    assert np.array_equal(got[0].view(np.uint16), expected.view(np.uint16))


# -- costs -------------------------------------------------------------------------------------------
def test_mmad_and_fixpipe_cycles(chip):
    """Exact timeline: Mmad 32^3 fp16 = 8 fractal cycles + 30; Fixpipe 2 KiB to L1 and to GM + 96."""
    c = np.zeros((32, 32), np.float16)

    def kern(gm):
        a2 = local(TPosition.A2, 2048, np.float16)
        b2 = local(TPosition.B2, 2048, np.float16)
        c1 = local(TPosition.CO1, 4096, np.float32)
        l1 = local(TPosition.A1, 2048, np.float16)
        Mmad(c1, a2, b2, MmadParams(32, 32, 32))
        p = FixpipeParamsV220(nSize=32, mSize=32, srcStride=32, dstStride=32)
        Fixpipe(l1, c1, p)
        Fixpipe(gm, c1, p)

    res = launch(kern, (GmArg("c", c),), block_dim=1, chip=chip, kernel_type="cube")
    # Mmad: 1 + cube_cycles(32,32,32,fp16) = 2*2*2 fractals * 4096 MAC / 4096 MAC/cyc = 8, + 30 = 39.
    # Fixpipe L1: 2 + 2048 B / (211.00 GiB/s / 1.8 GHz = 125.87 B/cyc) + 96 = 114.27.
    # Fixpipe GM: starts when FIX frees at 18.27; + 2048 / 121.49 (203.66 GiB/s) + 96 = 131.13.
    assert timeline(res) == [("CUBE", "Mmad", 1, 39), ("FIXP", "Fixpipe", 2, 114), ("FIXP", "Fixpipe", 18, 131)]
    df = res.trace.df
    assert df.flops.tolist() == [65536, 0, 0] and df.bytes.tolist() == [0, 2048, 2048]


def test_cube_sequence_same_cycles_in_timing_mode(chip):
    """Timing mode (no data) schedules the cube instructions exactly as full mode."""
    def kern(gm):
        a1 = local(TPosition.A1, 8192, np.float16)
        a2 = local(TPosition.A2, 8192, np.float16)
        b2 = local(TPosition.B2, 8192, np.float16)
        c1 = local(TPosition.CO1, 16384, np.float32)
        DataCopy(a1, gm, Nd2NzParams(1, 40, 50, 0, 50, 48, 1, 0))
        LoadData(a2, a1, LoadData2DParams(0, 12, 1))
        LoadData(b2, a1, LoadData2DParams(0, 12, 1, ifTranspose=True))
        Mmad(c1, a2, b2, MmadParams(40, 50, 48))
        Fixpipe(gm, c1, FixpipeParamsV220(nSize=50, mSize=40, srcStride=48, dstStride=50))

    args = (GmArg("g", np.zeros((40, 50), np.float16)),)
    full = launch(kern, args, block_dim=1, chip=chip, kernel_type="cube")
    timing = launch(kern, args, block_dim=1, chip=chip, kernel_type="cube", mode="timing")
    assert timeline(full) == timeline(timing) and full.cycles == timing.cycles


# -- errors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["full", "timing"])
def test_mmad_operand_too_small_raises_buffer_error(mode):
    """An L0A tensor smaller than ceil16(m) x ceil(k/K0) fractals is an out-of-bounds read."""
    def kern():
        a2 = local(TPosition.A2, 1024, np.float16)
        Mmad(local(TPosition.CO1, 4096, np.float32), a2, local(TPosition.B2, 2048, np.float16), MmadParams(32, 32, 32))

    with pytest.raises(NpuBufferError, match=r"L0A: access of 1024 elements .* at offset 0 .*\[0, 1024\)"):
        run(kern, mode=mode)


def test_fixpipe_past_gm_raises_buffer_error():
    """Fixpipe rows with a pitch beyond the GM buffer are refused."""
    def kern(gm):
        Fixpipe(gm, local(TPosition.CO1, 4096, np.float32), FixpipeParamsV220(nSize=16, mSize=16, srcStride=16,
                                                                              dstStride=64))

    with pytest.raises(NpuBufferError, match=r"GM c: access of bytes \[0, 1952\) outside the buffer of 512 bytes"):
        run(kern, (GmArg("c", np.zeros(256, np.float16)),))


@pytest.mark.parametrize("case, message", [
    ("mixed", "Mmad float16 x bfloat16 is not modelled"),
    ("bias", "Mmad with a bias operand"),
    ("winograd", "MmadParams.enWinogradA"),
    ("acc_dtype", "Mmad float16 inputs accumulate in float32, not int32"),
    ("fix_int8", "Fixpipe float32 .L0C. -> int8 is not modelled"),
    ("fix_quant", "Fixpipe quantPre DEQF16 with float32 -> float16"),
])
def test_unmodelled_cube_variants_raise_not_implemented(case, message):
    """Unmodelled dtypes and options fail loudly, naming instruction and variant."""
    def kern(gm):
        a2 = local(TPosition.A2, 2048, np.float16)
        b2 = local(TPosition.B2, 2048, BF16 if case == "mixed" else np.float16)
        c1 = local(TPosition.CO1, 4096, np.int32 if case == "acc_dtype" else np.float32)
        if case == "bias":
            Mmad(c1, a2, b2, c1, MmadParams(16, 16, 16))
        elif case in ("mixed", "winograd", "acc_dtype"):
            Mmad(c1, a2, b2, MmadParams(16, 16, 16, enWinogradA=case == "winograd"))
        else:
            quant = QuantMode_t.DEQF16 if case == "fix_quant" else QuantMode_t.NoQuant
            Fixpipe(gm if case == "fix_int8" else gm.ReinterpretCast(np.float16), c1,
                    FixpipeParamsV220(nSize=16, mSize=16, srcStride=16, dstStride=16, quantPre=quant))

    with pytest.raises(KernelError, match=message) as info:
        run(kern, (GmArg("g", np.zeros(1024, np.int8)),))
    assert isinstance(root_cause(info.value), NotImplementedError)
