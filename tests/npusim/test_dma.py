"""Data movement: DataCopy (count, DataCopyParams, Nd2Nz), DataCopyPad and LoadData, bits and cycles.

Expected values come from explicit index loops written here from the Ascend C definitions
(docs/numerics_cube.md), not from the simulator's vectorised code.
"""
import ml_dtypes
import numpy as np
import pytest

from npusim.errors import KernelError, NpuBufferError
from npusim.kernel import (DataCopy, DataCopyExtParams, DataCopyPad, DataCopyPadExtParams, DataCopyParams, LoadData,
                           LoadData2DParams, Nd2NzParams, TBuf, TPipe, TPosition)
from npusim.launch import GmArg, launch
from tests.conftest import timeline

SENTINEL = 0x5A  # byte pattern of "untouched" local memory


def run(kernel, args, kind="cube", chip="Ascend910B2", mode="full"):
    return launch(kernel, args, block_dim=1, chip=chip, kernel_type=kind, mode=mode)


def local(position, nbytes, dtype, fill=True):
    """A TBuf tensor of *nbytes*; in full mode its bytes are set to SENTINEL first."""
    buf = TBuf(position)
    TPipe().InitBuffer(buf, nbytes)
    t = buf.Get(dtype)
    if fill and t.buffer.data is not None:
        t.view().view(np.uint8)[:] = SENTINEL
    return t


def root_cause(exc):
    """The first exception of a chain (kernel errors are re-raised chained)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def nd2nz_expected(src, dst_size, p, dtype):
    """ND -> NZ by explicit loops over (matrix, row, column), as copy_gm_to_cbuf_multi_nd2nz defines it."""
    c0 = 32 // np.dtype(dtype).itemsize
    out = np.full(dst_size * np.dtype(dtype).itemsize, SENTINEL, np.uint8).view(dtype)
    flat = src.reshape(-1)
    for i in range(p.ndNum):
        for r in range(p.nValue):
            for c in range(-(-p.dValue // c0) * c0):
                d = i * p.dstNzMatrixStride + r * p.dstNzNStride * c0 + (c // c0) * p.dstNzC0Stride * c0 + c % c0
                out[d] = flat[i * p.srcNdMatrixStride + r * p.srcDValue + c] if c < p.dValue else 0
    return out


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.float32, ml_dtypes.bfloat16])
def test_nd2nz_bits_vs_index_loops(dtype):
    """Nd2Nz GM -> L1: two matrices, a row pitch wider than dValue, zero-filled row tails."""
    rng = np.random.default_rng(1)
    c0 = 32 // np.dtype(dtype).itemsize
    rows, d, pitch = 19, c0 + 5, c0 + 9
    src = (rng.standard_normal(2 * rows * pitch + 7) * 40).astype(dtype)
    p = Nd2NzParams(ndNum=2, nValue=rows, dValue=d, srcNdMatrixStride=rows * pitch + 3, srcDValue=pitch,
                    dstNzC0Stride=32, dstNzNStride=1, dstNzMatrixStride=2 * 32 * c0 + c0)
    size = 4096 // np.dtype(dtype).itemsize
    got = []

    def k(gm):
        t = local(TPosition.A1, 4096, dtype)
        DataCopy(t, gm, p)
        got.append(t.view().copy())

    run(k, (GmArg("src", src),))
    assert np.array_equal(got[0].view(np.uint8), nd2nz_expected(src, size, p, dtype).view(np.uint8))


@pytest.mark.parametrize("n_stride", [2, 0], ids=["every-other-row", "rows-overwrite"])
def test_nd2nz_into_ub_with_row_stride(n_stride):
    """Nd2Nz GM -> UB (vector core) with dstNzNStride = 2 leaves every other row untouched; with 0 every row
    lands on the first (the last row stays, as in the loop)."""
    src = np.arange(10 * 20, dtype=np.float16).reshape(10, 20)
    p = Nd2NzParams(1, 10, 20, 0, 20, 24, n_stride, 0)
    got = []

    def k(gm):
        t = local(TPosition.VECCALC, 4096, np.float16)
        DataCopy(t, gm, p)
        got.append(t.view().copy())

    run(k, (GmArg("src", src),), kind="vector")
    assert np.array_equal(got[0].view(np.uint16), nd2nz_expected(src, 2048, p, np.float16).view(np.uint16))


def test_datacopy_count_and_strided_params_forms():
    """The existing forms: count GM -> UB, DataCopyParams with gaps UB -> GM (bytes unchanged)."""
    src = np.arange(256, dtype=np.float16)
    dst = np.full(256, -1, np.float16)

    def k(x, y):
        t = local(TPosition.VECCALC, 1024, np.float16, fill=False)
        DataCopy(t, x, 256)
        DataCopy(y, t, DataCopyParams(blockCount=3, blockLen=2, srcStride=1, dstStride=3))

    run(k, (GmArg("x", src), GmArg("y", dst)), kind="vector")
    expected = np.full(256, -1, np.float16)
    for b in range(3):  # blocks of 2 x 32 B = 32 elements; source gap 16, destination gap 48 elements
        for e in range(32):
            expected[b * (32 + 48) + e] = src[b * (32 + 16) + e]
    assert np.array_equal(dst.view(np.uint16), expected.view(np.uint16))


def test_datacopypad_gm_to_ub_pads_with_value():
    """GM -> UB: byte-length blocks, byte GM gap, 32 B slots with left/right padding and a pad value."""
    src = np.arange(100, dtype=np.float32) + 0.5
    pars = DataCopyExtParams(blockCount=3, blockLen=5 * 4, srcStride=3 * 4, dstStride=1)
    pad = DataCopyPadExtParams(isPad=True, leftPadding=1, rightPadding=1, paddingValue=-7.0)
    got = []

    def k(gm):
        t = local(TPosition.VECCALC, 1024, np.float32)
        DataCopyPad(t, gm, pars, pad)
        got.append(t.view().copy())

    run(k, (GmArg("src", src),), kind="vector")
    exp = np.full(1024, SENTINEL, np.uint8).view(np.float32)
    slot = 8  # ceil32((1 + 5 + 1) * 4 B) = 32 B = 8 floats, plus a 1-block (8 float) gap
    for b in range(3):
        base = b * (slot + 8)
        for e in range(slot):
            exp[base + e] = src[b * 8 + e - 1] if 1 <= e <= 5 else np.float32(-7.0)
    assert np.array_equal(got[0].view(np.uint32), exp.view(np.uint32))


def test_datacopypad_without_pad_keeps_old_bytes_and_ub_to_gm():
    """isPad=False writes only the data bytes; UB -> GM writes blockLen bytes per block, GM gap in bytes."""
    src = np.arange(1, 31, dtype=np.float16)
    out = np.zeros(64, np.float16)
    got = []

    def k(x, y):
        t = local(TPosition.VECCALC, 512, np.float16)
        DataCopyPad(t, x, DataCopyExtParams(2, 10 * 2, 0, 0), DataCopyPadExtParams())
        got.append(t.view().copy())
        DataCopyPad(y, t, DataCopyExtParams(2, 10 * 2, 0, 6 * 2))

    run(k, (GmArg("x", src), GmArg("y", out)), kind="vector")
    exp_ub = np.full(512, SENTINEL, np.uint8).view(np.float16)
    exp_ub[0:10], exp_ub[16:26] = src[0:10], src[10:20]
    assert np.array_equal(got[0].view(np.uint16), exp_ub.view(np.uint16))
    exp_gm = np.zeros(64, np.float16)
    exp_gm[0:10], exp_gm[16:26] = src[0:10], src[10:20]
    assert np.array_equal(out.view(np.uint16), exp_gm.view(np.uint16))


def test_loaddata_gathers_fractals_with_strides_and_transpose():
    """LoadData2D: fractal startIndex + i*srcStride -> slot i*(dstGap+1); ifTranspose swaps 16x16."""
    l1 = (np.arange(8 * 256) % 251).astype(np.float16)
    got = []

    def k():
        a1 = local(TPosition.A1, 8 * 512, np.float16, fill=False)
        a1.view()[:] = l1
        a2 = local(TPosition.A2, 8 * 512, np.float16)
        b2 = local(TPosition.B2, 8 * 512, np.float16)
        LoadData(a2, a1, LoadData2DParams(startIndex=1, repeatTimes=3, srcStride=2, dstGap=1))
        LoadData(b2, a1, LoadData2DParams(startIndex=2, repeatTimes=2, srcStride=3, ifTranspose=True))
        got.extend([a2.view().copy(), b2.view().copy()])

    run(k, ())
    fr = l1.reshape(8, 16, 16)
    exp_a = np.full(8 * 512, SENTINEL, np.uint8).view(np.float16).reshape(8, 16, 16)
    exp_b = exp_a.copy()
    for i in range(3):
        exp_a[i * 2] = fr[1 + 2 * i]
    for i in range(2):
        for r in range(16):
            for c in range(16):
                exp_b[i, r, c] = fr[2 + 3 * i, c, r]
    assert np.array_equal(got[0].view(np.uint16), exp_a.reshape(-1).view(np.uint16))
    assert np.array_equal(got[1].view(np.uint16), exp_b.reshape(-1).view(np.uint16))


def test_loaddata_b8_transpose_moves_32x32_blocks():
    """int8 ifTranspose: repeat i reads fractals start+i*srcStride and the next one (a 32 x 32 byte block)
    and writes the block's transpose to fractal slots i*(dstGap+2) and the next one."""
    l1 = (np.arange(8 * 512) % 253 - 126).astype(np.int8)
    got = []

    def k():
        a1 = local(TPosition.A1, 8 * 512, np.int8, fill=False)
        a1.view()[:] = l1
        b2 = local(TPosition.B2, 8 * 512, np.int8)
        LoadData(b2, a1, LoadData2DParams(startIndex=1, repeatTimes=2, srcStride=3, dstGap=1, ifTranspose=True))
        got.append(b2.view().copy())

    run(k, ())
    exp = np.full(8 * 512, SENTINEL, np.uint8).view(np.int8)
    for i in range(2):
        src0 = (1 + 3 * i) * 512  # first byte of the 32 x 32 source block
        dst0 = i * 3 * 512  # slots are 2 + dstGap = 3 fractals apart
        for r in range(32):
            for c in range(32):
                exp[dst0 + r * 32 + c] = l1[src0 + c * 32 + r]
    assert np.array_equal(got[0], exp)


def test_nd2nz_and_loaddata_cycles(chip):
    """Exact timeline: Nd2Nz 2 KiB (GM curve + MTE2 latency), LoadData to L0A (256 B/cyc) and L0B (128 B/cyc)."""
    a = np.ones((32, 32), np.float16)

    def k(gm):
        a1 = local(TPosition.A1, 2048, np.float16, fill=False)
        a2 = local(TPosition.A2, 2048, np.float16, fill=False)
        b2 = local(TPosition.B2, 2048, np.float16, fill=False)
        DataCopy(a1, gm, Nd2NzParams(1, 32, 32, 0, 32, 32, 1, 0))
        LoadData(a2, a1, LoadData2DParams(0, 4, 1))
        LoadData(b2, a1, LoadData2DParams(0, 4, 1, ifTranspose=True))

    res = launch(k, (GmArg("a", a),), block_dim=1, chip=chip, kernel_type="cube")
    # DataCopy: 1 + 2048 B / path_rate(gm_to_l1, 2048) (8.7926 B/cyc) = 233.9: the curve's isolated copy, its
    # GM latency included (ChipSpec.path_cost: 219.6 latency after 13.4 cycles at the 153 B/cyc peak)
    # LoadData L0A: 2 + 2048/256 + 30 = 40; LoadData L0B waits for MTE1 (free at 10): 10 + 2048/128 + 30 = 56
    assert timeline(res) == [("MTE2", "DataCopy", 1, 234), ("MTE1", "LoadData", 2, 40), ("MTE1", "LoadData", 10, 56)]
    assert res.trace.df.bytes.tolist() == [2048, 2048, 2048]


def test_datacopypad_cycles_match_in_full_and_timing(chip):
    """DataCopyPad books blockCount*blockLen bytes on MTE2/MTE3; timing mode gives the same timeline."""
    x = np.zeros(300, np.float32)

    def k(gm):
        t = local(TPosition.VECCALC, 2048, np.float32, fill=False)
        DataCopyPad(t, gm, DataCopyExtParams(4, 50 * 4, 0, 0), DataCopyPadExtParams(True, 0, 0, 1.0))
        DataCopyPad(gm, t, DataCopyExtParams(4, 50 * 4, 0, 0))

    full = launch(k, (GmArg("x", x),), block_dim=1, chip=chip, kernel_type="vector")
    timing = launch(k, (GmArg("x", x),), block_dim=1, chip=chip, kernel_type="vector", mode="timing")
    assert timeline(full) == timeline(timing)
    assert [r[:2] for r in timeline(full)] == [("MTE2", "DataCopyPad"), ("MTE3", "DataCopyPad")]
    assert full.trace.df.bytes.tolist() == [800, 800]


@pytest.mark.parametrize("mode", ["full", "timing"])
def test_nd2nz_past_l1_allocation_raises_buffer_error(mode):
    """An Nd2Nz whose NZ footprint leaves the destination allocation names buffer, offset and size."""
    def k(gm):
        t = local(TPosition.A1, 1024, np.float16, fill=False)
        DataCopy(t, gm, Nd2NzParams(1, 32, 32, 0, 32, 32, 1, 0))  # needs 2048 B

    with pytest.raises(NpuBufferError, match=r"L1: access of 1024 elements .* at offset 0 .*\[0, 1024\)"):
        run(k, (GmArg("a", np.zeros(1024, np.float16)),), mode=mode)


def test_nd2nz_past_gm_buffer_raises_buffer_error():
    """Reading rows past the end of the GM tensor is refused."""
    def k(gm):
        DataCopy(local(TPosition.A1, 4096, np.float16, fill=False), gm, Nd2NzParams(1, 32, 32, 0, 32, 32, 1, 0))

    with pytest.raises(NpuBufferError, match=r"GM a: access of bytes \[0, 2048\) outside the buffer of 1000 bytes"):
        run(k, (GmArg("a", np.zeros(500, np.float16)),))


def test_loaddata_past_source_raises_buffer_error():
    """LoadData reading fractal 4 of a 4-fractal L1 tensor is out of bounds."""
    def k():
        a1 = local(TPosition.A1, 2048, np.float16, fill=False)
        LoadData(local(TPosition.A2, 4096, np.float16, fill=False), a1, LoadData2DParams(1, 4, 1))

    with pytest.raises(NpuBufferError, match=r"L1: access of 1280 elements"):
        run(k, ())


def test_datacopypad_past_gm_raises_buffer_error():
    """DataCopyPad UB -> GM past the end of the GM buffer is refused."""
    def k(gm):
        DataCopyPad(gm, local(TPosition.VECCALC, 1024, np.float32, fill=False), DataCopyExtParams(2, 64, 8, 8))

    with pytest.raises(NpuBufferError, match=r"GM y: access of bytes \[0, 136\)"):
        run(k, (GmArg("y", np.zeros(32, np.float32)),), kind="vector")


@pytest.mark.parametrize("case, message", [
    ("transpose_b32", "LoadData ifTranspose of float32"),
    ("gm_to_l0", "LoadData from GM"),
    ("nd2nz_out", "Nd2NzParams is modelled for GM -> L1/UB only"),
])
def test_unmodelled_variants_raise_not_implemented(case, message):
    """Unmodelled variants fail loudly, naming the instruction and the variant."""
    def k(gm):
        a1 = local(TPosition.A1, 2048, np.int8, fill=False)
        if case == "transpose_b32":
            a1f = local(TPosition.A1, 2048, np.float32, fill=False)
            LoadData(local(TPosition.B2, 2048, np.float32, fill=False), a1f, LoadData2DParams(0, 1, 1, ifTranspose=True))
        elif case == "gm_to_l0":
            LoadData(local(TPosition.A2, 2048, np.int8, fill=False), gm, LoadData2DParams(0, 1, 1))
        else:
            DataCopy(gm, a1, Nd2NzParams(1, 1, 32, 0, 32, 1, 1, 0))

    with pytest.raises(KernelError, match=message) as info:
        run(k, (GmArg("g", np.zeros(2048, np.int8)),))
    assert isinstance(root_cause(info.value), NotImplementedError)


# -- L0C -> UB on a combined (310P) core ------------------------------------------------------------
def l0c_to_ub_expected(l0c, dst_size, p, dtype):
    """NZ -> ND by explicit loops: element (m, n) of L0C sits at (n // 16) * srcStride * 16 + m * 16 + n % 16."""
    out = np.full(dst_size * np.dtype(dtype).itemsize, SENTINEL, np.uint8).view(dtype)
    for m in range(p.mSize):
        for n in range(p.nSize):
            v = l0c[(n // 16) * p.srcStride * 16 + m * 16 + n % 16]
            with np.errstate(over="ignore"):  # 65520 rounds to inf in fp16 (RNE, no saturation)
                out[m * p.dstStride + n] = np.float16(v) if np.dtype(dtype) == np.float16 else v
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_l0c_to_ub_nz2nd_and_cast_vs_index_loops(dtype):
    """L0C (fp32, NZ) -> UB rows: a 19 x 37 window, padded source blocks, row pitch 48, fp16 by RNE."""
    from npusim.kernel import DataCopyCO12DstParams

    rng = np.random.default_rng(3)
    l0c = (rng.standard_normal(3 * 32 * 16) * 3000).astype(np.float32)
    l0c[:4] = [65520.0, 2049.0, 2051.0, -1e-8]  # overflow to inf, ties to even (2048 / 2052), tiny -> -0
    p = DataCopyCO12DstParams(nSize=37, mSize=19, dstStride=48, srcStride=32)
    got = []

    def k():
        c = local(TPosition.CO1, l0c.nbytes, np.float32, fill=False)
        c.view()[:] = l0c
        u = local(TPosition.VECCALC, 4096, dtype)
        DataCopy(u, c, p)
        got.append(u.view().copy())

    run(k, (), chip="Ascend310P3")
    exp = l0c_to_ub_expected(l0c, 4096 // np.dtype(dtype).itemsize, p, dtype)
    assert np.array_equal(got[0].view(np.uint8), exp.view(np.uint8))
    if dtype == np.float16:
        assert got[0][:4].view(np.uint16).tolist() == [0x7C00, 0x6800, 0x6802, 0x8000]


def test_l0c_to_ub_runs_on_vector_pipe_at_path_rate():
    """One 64 x 64 fp32 read-out: on PIPE_V, latency + 16 KiB / l0c_to_ub_bytes_per_cycle cycles."""
    from npusim.chip import chip as get_chip
    from npusim.kernel import DataCopyCO12DstParams

    def k():
        c = local(TPosition.CO1, 64 * 64 * 4, np.float32, fill=False)
        u = local(TPosition.VECCALC, 64 * 64 * 4, np.float32, fill=False)
        DataCopy(u, c, DataCopyCO12DstParams(nSize=64, mSize=64, dstStride=64, srcStride=64))

    res = run(k, (), chip="Ascend310P3", mode="timing")
    spec = get_chip("Ascend310P3")
    rows = [r for r in timeline(res) if r[1] == "DataCopy"]
    assert len(rows) == 1 and rows[0][0] == "VECTOR"
    assert rows[0][3] - rows[0][2] == pytest.approx(spec.fix_latency_cycles + 64 * 64 * 4 / 512.0)


def test_l0c_to_ub_refuses_unmodelled_variants():
    """fp32 -> bf16, ReLU and a pitch that is not whole 32-byte blocks fail loudly; 910B has no such path."""
    from npusim.kernel import DataCopyCO12DstParams

    def bad(dtype, **kw):
        def k():
            c = local(TPosition.CO1, 4096, np.float32, fill=False)
            u = local(TPosition.VECCALC, 4096, dtype, fill=False)
            DataCopy(u, c, DataCopyCO12DstParams(**{"nSize": 16, "mSize": 16, "dstStride": 16, "srcStride": 16,
                                                    **kw}))
        return k

    for dtype, kw in ((ml_dtypes.bfloat16, {}), (np.float32, {"reluPre": 1}), (np.float32, {"dstStride": 20})):
        with pytest.raises(Exception) as e:
            run(bad(dtype, **kw), (), chip="Ascend310P3")
        assert isinstance(root_cause(e.value), NotImplementedError)
