"""SetAtomicAdd on MTE3 stores (DataCopy, DataCopyPad UB -> GM): fp32 adds, committed in simulated-time order
like atomic Fixpipes, seen by the sanitizer as atomic (no gm-race between two cores' atomic adds)."""
import numpy as np
import pytest

from npusim.kernel import (Adds, DataCopy, DataCopyExtParams, DataCopyPad, DataCopyParams, GetBlockIdx, HardEvent,
                           Pipe, PipeBarrier, SetAtomicAdd, SetAtomicNone, SetFlag, SyncAll, TBuf, TPipe, TPosition,
                           WaitFlag)
from npusim.errors import KernelError
from npusim.launch import GmArg, launch

ROWS, COLS = 4, 24  # 24 fp32 = 96 B a row: DataCopyPad's UB rows are padded to 96 B, its GM rows 128 B apart
GM_PITCH = 32
UB_FLOATS = 128  # each AIV's UB values (the strided forms read rows up to 32 floats apart)
# the (UB row pitch, GM row pitch, row length) in fp32 of each store form
FORMS = {"pad": (24, 32, 24), "params": (24, 32, 24), "count": (24, 24, 24),
         "pad80": (32, 32, 20),  # 80-byte rows (not whole 32-byte blocks), UB rows 96 + 32 B apart (srcStride 1)
         "params_stride": (24, 32, 16)}  # 2 blocks a row, UB gaps of one block, GM gaps of two


def _store(out, ub, form):
    """*form* of one atomic store of the [ROWS, COLS] values at *ub* into *out* (rows GM_PITCH apart)."""
    if form == "pad":
        DataCopyPad(out, ub, DataCopyExtParams(ROWS, COLS * 4, 0, (GM_PITCH - COLS) * 4, 0))
    elif form == "params":  # blocks of 3 x 32 B, GM gaps of one 32-byte block
        DataCopy(out, ub, DataCopyParams(ROWS, COLS * 4 // 32, 0, (GM_PITCH - COLS) * 4 // 32))
    elif form == "pad80":
        DataCopyPad(out, ub, DataCopyExtParams(ROWS, 80, 1, GM_PITCH * 4 - 80, 0))
    elif form == "params_stride":
        DataCopy(out, ub, DataCopyParams(ROWS, 2, 1, 2))
    else:
        DataCopy(out, ub, ROWS * COLS)


def _kernel(x, out, slow_block, repeats, form, atomic):
    """AIV b loads its [ROWS, COLS] values and adds them into *out*; *slow_block* first burns vector time."""
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, UB_FLOATS * 4)
    b = GetBlockIdx()
    ub = buf.Get(np.float32)
    DataCopy(ub, x[b * UB_FLOATS], UB_FLOATS)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    for _ in range(repeats if b == slow_block else 0):
        Adds(ub, ub, 0.0, UB_FLOATS)
        PipeBarrier(Pipe.V)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    if atomic:
        SetAtomicAdd(np.float32)
    _store(out, ub, form)
    if atomic:
        SetAtomicNone()


def _placed(ub: np.ndarray, form: str) -> np.ndarray:
    """*out*'s added values (zero elsewhere) when *form* stores the UB values *ub* (computed here row by row from
    FORMS, independently of the simulator's placement)."""
    ub_pitch, gm_pitch, length = FORMS[form]
    flat = np.zeros(ROWS * GM_PITCH, np.float32)
    for r in range(ROWS):
        flat[r * gm_pitch:r * gm_pitch + length] = ub[r * ub_pitch:r * ub_pitch + length]
    return flat


def _run(form, slow_block, atomic=True):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, UB_FLOATS)).astype(np.float32)
    x[1] *= 3e4  # magnitudes that make the fp32 addition order visible
    init = rng.standard_normal(ROWS * GM_PITCH).astype(np.float32)
    out = init.copy()
    res = launch(_kernel, (GmArg("x", x.reshape(-1)), GmArg("out", out), slow_block, 60, form, atomic), block_dim=2,
                 chip="Ascend910B2", kernel_type="vector")
    return res, x, init, out


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("slow_block, first", [(0, 1), (1, 0)])
def test_atomic_stores_add_in_fp32_in_simulated_time_order(form, slow_block, first):
    """The AIV whose store starts first adds first (log), whatever the Python order; the result is the fp32 sum in
    that order, bit for bit; bytes between the rows keep the old values."""
    res, x, init, out = _run(form, slow_block)
    assert [entry[1] for entry in res.atomic_log] == [first, 1 - first]
    assert {entry[0] for entry in res.atomic_log} == {"out"}
    part = [_placed(x[i], form) for i in (0, 1)]
    expect = (init + part[first]) + part[1 - first]
    other = (init + part[1 - first]) + part[first]
    assert np.array_equal(out.view(np.uint32), expect.view(np.uint32))
    assert not np.array_equal(other.view(np.uint32), expect.view(np.uint32))  # the order is visible


def test_plain_store_still_overwrites():
    """Without SetAtomicAdd the later store replaces the values (no add, nothing logged)."""
    res, x, init, out = _run("pad", 0, atomic=False)
    assert res.atomic_log == []
    got = out.reshape(ROWS, GM_PITCH)
    assert any(np.array_equal(got[:, :COLS], x[i, :ROWS * COLS].reshape(ROWS, COLS)) for i in (0, 1))
    assert np.array_equal(got[:, COLS:], init.reshape(ROWS, GM_PITCH)[:, COLS:])


@pytest.mark.parametrize("mode", ["full", "timing"])
def test_sanitizer_accepts_two_cores_atomic_stores_and_reports_plain_ones(mode):
    """Two AIVs' atomic stores to the same bytes need no cross-core flag; the same stores without SetAtomicAdd race."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(2 * UB_FLOATS).astype(np.float32)
    for atomic, faults in ((True, []), (False, ["gm-race"])):
        out = np.zeros(ROWS * GM_PITCH, np.float32)
        res = launch(_kernel, (GmArg("x", x), GmArg("out", out), 0, 5, "pad", atomic), block_dim=2,
                     chip="Ascend910B2", kernel_type="vector", mode=mode, sanitize=True)
        assert sorted(set(res.sanitizer.df.fault)) == faults, res.sanitizer.summary()


def test_atomic_store_in_timing_mode_costs_a_plain_store():
    """Timing mode: an atomic store is an MTE3 transfer like any other (same cycles as the plain store)."""
    x = np.zeros(2 * UB_FLOATS, np.float32)
    cycles = [launch(_kernel, (GmArg("x", x), GmArg("out", np.zeros(ROWS * GM_PITCH, np.float32)), 0, 5, "pad",
                               atomic), block_dim=2, chip="Ascend910B2", kernel_type="vector", mode="timing").cycles
              for atomic in (True, False)]
    assert cycles[0] > cycles[1] - 1e-9 and cycles[0] - cycles[1] < 10  # plus SetAtomicAdd / SetAtomicNone on S


def test_atomic_store_of_other_dtypes_is_refused():
    """Only fp32 -> fp32 under SetAtomicAdd<float> is modelled: an fp16 store under it raises NotImplementedError
    (the launch reports it as the core's KernelError)."""
    def kernel(out):
        pipe = TPipe()
        buf = TBuf(TPosition.VECCALC)
        pipe.InitBuffer(buf, 64)
        ub = buf.Get(np.float16)
        SetAtomicAdd(np.float32)
        DataCopyPad(out, ub, DataCopyExtParams(1, 32, 0, 0, 0))

    with pytest.raises(KernelError, match="NotImplementedError: DataCopyPad to GM under SetAtomicAdd: only fp32"):
        launch(kernel, (GmArg("out", np.zeros(16, np.float16)),), block_dim=1, chip="Ascend910B2",
               kernel_type="vector")


def _load_after_atomic_store(x, out, flagged):
    """AIV 0 adds its values into *out* under SetAtomicAdd; AIV 1, later and also under SetAtomicAdd, loads the same
    bytes back, after a cross-core flag from AIV 0 only if *flagged*."""
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, ROWS * COLS * 4)
    ub = buf.Get(np.float32)
    SetAtomicAdd(np.float32)
    if GetBlockIdx() == 0:
        DataCopy(ub, x, ROWS * COLS)
        SetFlag(HardEvent.MTE2_MTE3, 0)
        WaitFlag(HardEvent.MTE2_MTE3, 0)
        DataCopy(out, ub, ROWS * COLS)
        if flagged:
            SyncAll()
    else:
        DataCopy(ub, x, ROWS * COLS)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        for _ in range(40):  # the load comes well after AIV 0's store in simulated time
            Adds(ub, ub, 0.0, ROWS * COLS)
            PipeBarrier(Pipe.V)
        SetFlag(HardEvent.V_MTE2, 0)
        WaitFlag(HardEvent.V_MTE2, 0)
        if flagged:
            SyncAll()
        DataCopy(ub, out, ROWS * COLS)
    SetAtomicNone()


@pytest.mark.parametrize("flagged, faults", [(False, ["gm-race"]), (True, [])])
def test_sanitizer_reports_a_load_under_set_atomic_add_against_another_cores_atomic_store(flagged, faults):
    """SetAtomicAdd makes stores atomic, not loads: a load racing another core's atomic store is a gm-race."""
    x = np.ones(ROWS * COLS, np.float32)
    res = launch(_load_after_atomic_store, (GmArg("x", x), GmArg("out", np.zeros(ROWS * COLS, np.float32)), flagged),
                 block_dim=2, chip="Ascend910B2", kernel_type="vector", sanitize=True)
    assert sorted(set(res.sanitizer.df.fault)) == faults, res.sanitizer.summary()
