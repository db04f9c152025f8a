"""The fast paths of issue 14 (docs/performance.md) change speed only.

DataCopy's count form between GM and UB/L1 is issued in one step when the count is a Python int: an
np.int64 count takes the general path, so the two give the same trace, the same data and the same errors.
LoadData copies fractals through strided views and Mmad adds its fractal tree in place: their results are
compared here with the straightforward index-array and allocate-per-level code they replaced.
"""
from __future__ import annotations

import numpy as np
import pytest

from npusim.errors import KernelError, NpuBufferError
from npusim.isa.cube import _fractal_sum
from npusim.kernel import (DataCopy, GlobalTensor, HardEvent, LoadData, LoadData2DParams, SetAtomicAdd, SetFlag,
                           TBuf, TPipe, TPosition, WaitFlag)
from npusim.launch import GmArg, launch
from npusim.types import BufferKind, HardEvent as HE, TPosition as TP

F16 = np.float16


def _copy_kernel(count):
    """GM x -> UB -> GM z, *count* elements each way (a Python int or a numpy integer)."""
    def kernel(x: GlobalTensor, z: GlobalTensor):
        pipe = TPipe()
        buf = TBuf()
        pipe.InitBuffer(buf, 4096)
        t = buf.Get(F16)
        DataCopy(t, x[16], count)
        SetFlag(HardEvent.MTE2_MTE3)
        WaitFlag(HardEvent.MTE2_MTE3)
        DataCopy(z[32], t, count)
    return kernel


def _run_copy(count, mode):
    x = np.arange(4096, dtype=F16)
    z = np.zeros(4096, F16)
    res = launch(_copy_kernel(count), (GmArg("x", x), GmArg("z", z)), block_dim=1, chip="Ascend910B2", mode=mode,
                 kernel_type="vector")
    return res, z


@pytest.mark.parametrize("mode", ("full", "timing"))
def test_datacopy_fast_path_same_trace_and_data_as_general_path(mode):
    fast, z_fast = _run_copy(1024, mode)
    slow, z_slow = _run_copy(np.int64(1024), mode)
    assert fast.cycles == slow.cycles
    for key, col in fast.trace.columns.items():
        assert np.array_equal(col, slow.trace.columns[key]), key
    assert fast.trace.sources == slow.trace.sources
    assert np.array_equal(z_fast.view(np.uint16), z_slow.view(np.uint16))
    if mode == "full":
        assert np.array_equal(z_fast[32:32 + 1024], np.arange(16, 16 + 1024, dtype=F16))


@pytest.mark.parametrize("count", (2049, 4096 - 16 + 1, -1))
def test_datacopy_fast_path_same_errors(count):
    """Local overflow (2049 fp16 in 4 KiB), GM overflow and a negative count: the general path's errors."""
    msgs = []
    for c in (count, np.int64(count)):
        with pytest.raises((NpuBufferError, KernelError)) as err:
            _run_copy(c, "timing")
        msgs.append((type(err.value), str(err.value)))
    assert msgs[0] == msgs[1]


def test_datacopy_to_gm_under_atomic_add_leaves_the_fast_path():
    """The count form's fast path declines an atomic store: an fp16 one is still refused (only fp32 adds are
    modelled; tests/npusim/test_atomic_mte3.py has the fp32 adds of this form)."""
    def kernel(z: GlobalTensor):
        pipe = TPipe()
        buf = TBuf()
        pipe.InitBuffer(buf, 4096)
        SetAtomicAdd(np.float32)
        DataCopy(z, buf.Get(np.float16), 64)
    with pytest.raises(KernelError, match="DataCopy to GM under SetAtomicAdd: only fp32"):
        launch(kernel, (GmArg("z", np.zeros(64, np.float16)),), block_dim=1, chip="Ascend910B2", mode="timing",
               kernel_type="vector")


def _load_reference(l1: np.ndarray, l0: np.ndarray, p: LoadData2DParams) -> np.ndarray:
    """LoadData2D of b16 fractals with byte index arrays, as before the strided views."""
    out = l0.view(np.uint8).copy()
    src = l1.view(np.uint8)
    for i in range(p.repeatTimes):
        frac = src[(p.startIndex + i * p.srcStride) * 512:][:512]
        if p.ifTranspose:
            frac = frac.reshape(16, 16, 2).transpose(1, 0, 2).reshape(-1)
        out[i * (p.dstGap + 1) * 512:][:512] = frac
    return out


@pytest.mark.parametrize("params", [
    dict(repeatTimes=4), dict(repeatTimes=3, srcStride=2, startIndex=1), dict(repeatTimes=3, dstGap=1),
    dict(repeatTimes=2, srcStride=0, dstGap=2, ifTranspose=True), dict(repeatTimes=4, srcStride=3, ifTranspose=True),
])
def test_load_data_views_match_index_arrays(params):
    p = LoadData2DParams(**params)
    seen = {}

    def kernel(x: GlobalTensor):
        pipe = TPipe()
        l1, l0a = TBuf(TPosition.A1), TBuf(TPosition.A2)
        pipe.InitBuffer(l1, 16 * 512)
        pipe.InitBuffer(l0a, 16 * 512)
        a1, a2 = l1.Get(F16), l0a.Get(F16)
        DataCopy(a1, x, 16 * 256)
        SetFlag(HardEvent.MTE2_MTE1)
        WaitFlag(HardEvent.MTE2_MTE1)
        a2.view()[:] = np.float16(-7.0)  # bytes LoadData must leave alone
        seen["before"], seen["l1"] = a2.view().copy(), a1.view().copy()
        LoadData(a2, a1, p)
        seen["after"] = a2.view().copy()

    x = (np.arange(16 * 256) % 2039).astype(F16)
    launch(kernel, (GmArg("x", x),), block_dim=1, chip="Ascend910B2", mode="full", kernel_type="cube")
    want = _load_reference(seen["l1"], seen["before"], p)
    assert np.array_equal(seen["after"].view(np.uint8), want)


def _fractal_sum_reference(av, bv):
    p = av.T[:, :, None] * bv.T[:, None, :]
    while p.shape[0] > 1:
        p = p[0::2] + p[1::2]
    return p[0]


@pytest.mark.parametrize("k0", (8, 16))
def test_fractal_sum_in_place_bits_equal_allocating_tree(k0):
    rng = np.random.default_rng(k0)
    av = rng.standard_normal((48, k0)).astype(F16).astype(np.float32) * np.float32(1e4)
    bv = rng.standard_normal((32, k0)).astype(F16).astype(np.float32)
    av[0, 1], av[1, :], bv[2, 3], bv[3, 0] = np.inf, -0.0, 0.0, np.nan  # inf * 0, signed zeros, NaN
    bv[4, :] = -0.0
    buf = np.full((k0, 48, 32), np.nan, np.float32)
    with np.errstate(all="ignore"):
        want = _fractal_sum_reference(av, bv)
        got = _fractal_sum(av, bv, buf).copy()
        again = _fractal_sum(av, bv, buf)  # the buffer reused
        alloc = _fractal_sum(av, bv)
    for r in (got, again, alloc):
        assert np.array_equal(r.view(np.uint32), want.view(np.uint32))


def test_fast_enum_hash_agrees_with_equality():
    """BufferKind / TPosition / HardEvent hash by identity: members still key dicts and sets as before."""
    table = {BufferKind.UB: 1, TP.VECIN: 2, HE.MTE2_V: 3}
    assert table[BufferKind("UB")] == 1 and table[TP["VECIN"]] == 2 and table[HE.MTE2_V] == 3
    assert len({BufferKind.UB, BufferKind("UB"), BufferKind.L1}) == 2


@pytest.mark.parametrize("dtype", ("float16", "bfloat16", "int16"))
@pytest.mark.parametrize("op", ("Adds", "Muls", "Maxs", "Mins", "Exp", "Ln", "Sqrt"))
def test_tabled_vector_ops_equal_their_compute(op, dtype):
    """Tensor-scalar ops and Exp/Ln/Sqrt on 2-byte dtypes are looked up in a table of compute() over all
    65536 inputs (the scalar ops from the second call with a scalar on): every call, count and repeat
    form, equals compute() run on the values (random bit patterns: NaNs, infinities, subnormals)."""
    import ml_dtypes

    from npusim.isa import vector as V
    from npusim.isa.vector import elementwise as E
    cls = getattr(V, op)
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    if dt not in cls.dtypes:
        pytest.skip(f"{op} has no {dtype}")
    scalar = None if op in ("Exp", "Ln", "Sqrt") else 0.3 if dt.kind == "f" else 3
    rng = np.random.default_rng(len(op))
    x = rng.integers(0, 65536, 2048, dtype=np.uint16).view(dt)
    E._TABLES.clear()
    got = []

    def kernel(xg: GlobalTensor):
        pipe = TPipe()
        src, dst = TBuf(), TBuf()
        pipe.InitBuffer(src, 4096)
        pipe.InitBuffer(dst, 4096 * 4)
        s, d = src.Get(dt), dst.Get(dt)
        DataCopy(s, xg, 2048)
        SetFlag(HardEvent.MTE2_V)
        WaitFlag(HardEvent.MTE2_V)
        for k in range(3):
            args = (d[2048 * k], s) + (() if scalar is None else (scalar,))
            cls(*args, 2048)
        args = (d[2048 * 3], s) + (() if scalar is None else (scalar,))
        cls(*args, 64, 16, V.UnaryRepeatParams(1, 1, 4, 8))  # repeat form: the first 64 lanes of each 128
        got.append(d.view(4 * 2048).copy())

    launch(kernel, (GmArg("x", x),), block_dim=1, chip="Ascend910B2", mode="full", kernel_type="vector")
    ins = object.__new__(cls)
    ins.dtype, ins.scalar = dt, scalar
    with np.errstate(all="ignore"):
        want = ins.compute(x)
    out = got[0].view(np.uint16)
    for k in range(3):
        assert np.array_equal(out[2048 * k:2048 * (k + 1)], want.view(np.uint16)), k
    rep = out[3 * 2048:3 * 2048 + 1024].reshape(16, 64)  # repeat r wrote elements [64 r, 64 r + 64)
    assert np.array_equal(rep, want.view(np.uint16).reshape(16, 128)[:, :64])
    assert any(v is not None for v in E._TABLES.values())  # the table path ran


@pytest.mark.parametrize("shape, strides, writeable", [
    ((4, 512), (1024, 1), True), ((3, 512), (0, 1), False), ((5, 7), (3, 1), False), ((6, 4), (9, 1), True),
    ((0, 8), (8, 1), True)])
def test_strided_views_equal_as_strided(shape, strides, writeable):
    """dma._strided (the ndarray constructor on a contiguous buffer) gives as_strided's view: the same
    elements, the same writeability, and writes land in the buffer; non-contiguous data takes as_strided."""
    from numpy.lib.stride_tricks import as_strided

    from npusim.isa.dma import _strided
    base = np.arange(8192, dtype=np.uint8)
    for data in (base[100:], base[100::2]):  # contiguous, then a non-contiguous buffer
        byte = data.strides[0]
        st = tuple(s * byte for s in strides)
        want = as_strided(data, shape, st, writeable=writeable)
        got = _strided(data, shape, st, writeable=writeable)
        assert got.shape == want.shape and np.array_equal(got, want)
        assert got.flags.writeable == writeable
        if writeable and got.size:
            got[-1, -1] = 255
            assert want[-1, -1] == 255


@pytest.mark.parametrize("dtype", ("float16", "bfloat16", "float32", "int16", "int32"))
@pytest.mark.parametrize("op", ("Max", "Min"))
def test_max_min_compute_equals_ieee_wrapped(op, dtype):
    """Max/Min compute() calls vmax/vmin without numerics.ieee (no floating-point flags to silence, NaNs
    already canonical): the bits equal ieee(vmax/vmin, ...) on random bit patterns (NaNs of both signs and
    payloads, infinities, signed zeros), so dropping ieee's canonical_nan changed nothing."""
    import ml_dtypes

    from npusim.isa import vector as V
    from npusim.isa.vector.numerics import ieee, vmax, vmin
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(7)
    uint = {1: np.uint8, 2: np.uint16, 4: np.uint32}[dt.itemsize]
    a = rng.integers(0, np.iinfo(uint).max, 4096, dtype=uint, endpoint=True)
    b = rng.integers(0, np.iinfo(uint).max, 4096, dtype=uint, endpoint=True)
    if dt.kind == "f":  # make sure of NaNs with payloads and both zeros on each side
        nan = {2: (0x7C01 if dtype == "float16" else 0x7F81), 4: 0x7F800001}[dt.itemsize]
        zero = 1 << (8 * dt.itemsize - 1)
        a[:8] = [nan, nan | zero, 0, zero, 0, zero, 1, nan]
        b[:8] = [1, 1, zero, 0, 0, zero, nan | zero, nan]
    a, b = a.view(dt), b.view(dt)
    ins = object.__new__(getattr(V, op))
    ins.dtype = dt
    got = ins.compute(a, b)
    want = ieee(vmax if op == "Max" else vmin, dt, a, b)
    assert got.dtype == want.dtype
    assert np.array_equal(got.view(uint), want.view(uint))


def test_quiet_fp_once_per_full_mode_stream():
    """Full mode runs each kernel stream inside numerics.quiet_fp (np.errstate(all="ignore") once, not per
    instruction): overflow and Inf - Inf in fp16/fp32 Add/Sub raise no warning (warnings are errors here),
    give IEEE results with canonical NaNs, and the flag holds inside the stream only; outside a launch ieee()
    still silences them itself."""
    import warnings

    from npusim.isa.vector import numerics
    from npusim.kernel import Add, PipeBarrier, Pipe, Sub
    seen = {}

    def kernel(xg: GlobalTensor):
        pipe = TPipe()
        src, dst = TBuf(), TBuf()
        pipe.InitBuffer(src, 256)
        pipe.InitBuffer(dst, 256)
        s, d = src.Get(F16), dst.Get(F16)
        DataCopy(s, xg, 128)
        SetFlag(HardEvent.MTE2_V)
        WaitFlag(HardEvent.MTE2_V)
        seen["quiet"] = numerics._QUIET.get()
        Add(d, s, s, 64)  # 60000 + 60000 overflows to inf
        PipeBarrier(Pipe.V)
        Sub(d[64], d, d, 64)  # inf - inf = NaN
        PipeBarrier(Pipe.V)
        seen["out"] = d.view(128).copy()

    x = np.full(128, 60000, F16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        launch(kernel, (GmArg("x", x),), block_dim=1, chip="Ascend910B2", mode="full", kernel_type="vector")
        assert seen["quiet"] is True and numerics._QUIET.get() is False
        outside = numerics.ieee(np.add, np.dtype(F16), x, x)
    out = seen["out"].view(np.uint16)
    assert (out[:64] == 0x7C00).all() and (out[64:] == 0x7E00).all()  # +inf, then the canonical NaN
    assert (outside.view(np.uint16) == 0x7C00).all()
