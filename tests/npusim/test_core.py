"""The timing engine: in-order pipes, flags, barriers, queues, cross-core sync, hangs, timeouts."""
import numpy as np
import pytest

from npusim.errors import AclnnError, KernelError, KernelHangError, NpuBufferError
from npusim.isa.base import Instruction
from npusim.kernel import (CrossCoreSetFlag, CrossCoreWaitFlag, GetBlockIdx, GetSubBlockIdx, HardEvent, PipeBarrier,
                           SetFlag, SyncAll, TBuf, TPipe, TPosition, TQue, WaitFlag, ASCEND_IS_AIC)
from npusim.launch import current_unit, launch
from npusim.types import Pipe
from tests.conftest import timeline


class Busy(Instruction):
    """A test instruction with a fixed occupancy and latency on a chosen pipe."""

    name = "Busy"

    def __init__(self, pipe: Pipe, occupancy: float, latency: float):
        self.pipe = pipe
        self._cost = (occupancy, latency)
        self.issue(current_unit())

    def execute(self):
        pass

    def cycles(self, chip):
        return self._cost


def run(kernel, chip, block_dim=1, kernel_type="vector", **kw):
    return launch(kernel, (), block_dim=block_dim, chip=chip, kernel_type=kernel_type, **kw)


def test_same_pipe_instructions_pipeline_without_barrier(chip):
    """Two V instructions overlap their latency: the second starts when the first leaves the pipe."""
    def k():
        Busy(Pipe.V, 5, 10)
        Busy(Pipe.V, 5, 10)
    assert timeline(run(k, chip)) == [("VECTOR", "Busy", 1, 16), ("VECTOR", "Busy", 6, 21)]


def test_pipe_barrier_waits_for_completion(chip):
    """PipeBarrier(V) makes the next V instruction wait until the previous one is complete."""
    def k():
        Busy(Pipe.V, 5, 10)
        PipeBarrier(Pipe.V)
        Busy(Pipe.V, 5, 10)
    assert timeline(run(k, chip)) == [("VECTOR", "Busy", 1, 16), ("FLOWCTRL", "PipeBarrier", 6, 16),
                                      ("VECTOR", "Busy", 16, 31)]


def test_different_pipes_run_concurrently(chip):
    """Without flags, MTE2 and V work overlap in time."""
    def k():
        Busy(Pipe.MTE2, 100, 50)
        Busy(Pipe.V, 5, 10)
    assert timeline(run(k, chip)) == [("MTE2", "Busy", 1, 151), ("VECTOR", "Busy", 2, 17)]


def test_set_wait_flag_orders_pipes(chip):
    """WaitFlag(MTE2_V) holds V until MTE2's earlier work is complete and the flag fired."""
    def k():
        Busy(Pipe.MTE2, 100, 50)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        Busy(Pipe.V, 5, 10)
    res = run(k, chip)
    assert timeline(res) == [("MTE2", "Busy", 1, 151), ("FLOWCTRL", "SetFlag", 151, 152),
                             ("FLOWCTRL", "WaitFlag", 3, 153), ("VECTOR", "Busy", 153, 168)]
    assert res.cycles == 168
    flows = res.trace.flows
    assert list(flows["set_cycle"]) == [152] and list(flows["wait_cycle"]) == [153]


def test_flags_are_counted(chip):
    """Two sets then two waits: each wait consumes one set, in order."""
    def k():
        Busy(Pipe.MTE2, 100, 0)
        SetFlag(HardEvent.MTE2_V, 1)
        Busy(Pipe.MTE2, 100, 0)
        SetFlag(HardEvent.MTE2_V, 1)
        WaitFlag(HardEvent.MTE2_V, 1)
        Busy(Pipe.V, 1, 0)
        WaitFlag(HardEvent.MTE2_V, 1)
        Busy(Pipe.V, 1, 0)
    v = [t for t in timeline(run(k, chip)) if t[0] == "VECTOR"]
    assert v == [("VECTOR", "Busy", 103, 104), ("VECTOR", "Busy", 204, 205)]


def test_wait_without_set_is_a_hang(chip):
    """A WaitFlag nobody set before it names the pipe and the flag."""
    def k():
        WaitFlag(HardEvent.V_MTE3, 3)
    with pytest.raises(KernelHangError, match=r"core0\.veccore0.*V_MTE3#3.*PIPE_MTE3"):
        run(k, chip)


def test_cross_core_flag_releases_peer(chip):
    """AIC work -> CrossCoreSetFlag; both AIVs wait for it; release = set + cross-core latency."""
    def k():
        if ASCEND_IS_AIC():
            Busy(Pipe.M, 1000, 0)
            CrossCoreSetFlag(5, Pipe.M)
        else:
            CrossCoreWaitFlag(5)
            Busy(Pipe.V, 10, 0)
    res = run(k, chip, kernel_type="mix")
    aic = timeline(res, 0, "cubecore0")
    assert aic == [("CUBE", "Busy", 1, 1001), ("FLOWCTRL", "CrossCoreSetFlag", 1001, 1002)]
    for sub in ("veccore0", "veccore1"):
        # set fires at 1002, +100 cross-core latency, +1 flag cost -> the scalar unit (the wait's pipe) is
        # released at 1103 and issues the V instruction one cycle later
        assert timeline(res, 0, sub) == [("FLOWCTRL", "CrossCoreWaitFlag", 1, 1103), ("VECTOR", "Busy", 1104, 1114)]


def test_aic_wait_needs_both_aivs(chip):
    """An AIC CrossCoreWaitFlag is released by the later of the two AIV sets."""
    def k():
        if ASCEND_IS_AIC():
            CrossCoreWaitFlag(2)
            Busy(Pipe.M, 10, 0)
        else:
            Busy(Pipe.V, 100 * (GetSubBlockIdx() + 1), 0)
            CrossCoreSetFlag(2, Pipe.V)
    res = run(k, chip, kernel_type="mix")
    # AIV1's V finishes at 201, its set fires at 202, +100 latency, +1 -> released 303, issued 304
    assert timeline(res, 0, "cubecore0")[-1] == ("CUBE", "Busy", 304, 314)


def test_cross_core_hang_names_core_and_flag(chip):
    """An AIV waiting for a cross-core flag the AIC never sets is reported, not run forever."""
    def k():
        if not ASCEND_IS_AIC():
            CrossCoreWaitFlag(7)
    with pytest.raises(KernelHangError, match=r"core0\.veccore0 waits for CrossCoreWaitFlag\(7\)"):
        run(k, chip, kernel_type="mix")


def test_sync_all_waits_for_slowest_core(chip):
    """After SyncAll every core continues from the slowest core's arrival."""
    def k():
        Busy(Pipe.V, 100 * (GetBlockIdx() + 1), 0)
        SyncAll()
        Busy(Pipe.V, 1, 0)
    res = run(k, chip, block_dim=3)
    lasts = {tl[-1] for tl in (timeline(res, c) for c in range(3))}
    assert len(lasts) == 1  # identical start on every core
    assert lasts.pop()[2] == 301 + 100 + 1  # slowest ends at 301; + cross-core latency; + issue


def test_queue_depth_stalls_scalar(chip):
    """With a queue of 2 the scalar unit stalls until the oldest queued instruction starts."""
    small = chip.replace(pipe_queue_depth=2)
    def k():
        for _ in range(4):
            Busy(Pipe.V, 10, 0)
        Busy(Pipe.MTE2, 1, 0)
    tl = timeline(run(k, small))
    # V starts 1, 11, 21, 31; the 3rd issue waits for the 1st start (1) - no stall; 4th waits for 11
    assert tl[-1] == ("MTE2", "Busy", 12, 13)


def test_buffer_over_capacity_names_buffer_offset_size(chip):
    def k():
        pipe = TPipe()
        q = TQue(TPosition.VECIN, 2)
        pipe.InitBuffer(q, 2, 96 * 1024)
        t = TBuf(TPosition.VECCALC)
        pipe.InitBuffer(t, 64)
    with pytest.raises(NpuBufferError, match=r"UB: allocating 64 bytes for TBuf\(VECCALC\) at offset 196608 exceeds "
                                             r"capacity 196608"):
        run(k, chip)


def test_access_outside_allocation(chip):
    def k():
        pipe = TPipe()
        t = TBuf(TPosition.VECCALC)
        pipe.InitBuffer(t, 1024)
        x = t.Get(np.float16)
        x[600:]
    with pytest.raises(NpuBufferError, match=r"slice at element 600.*allocation \[0, 1024\)"):
        run(k, chip)


def test_misaligned_ub_tensor(chip):
    def k():
        pipe = TPipe()
        t = TBuf(TPosition.VECCALC)
        pipe.InitBuffer(t, 1024)
        t.Get(np.float16)[3]
    with pytest.raises(NpuBufferError, match="address 6 is not 32-byte aligned"):
        run(k, chip)


def test_alloc_without_free_is_reported(chip):
    def k():
        pipe = TPipe()
        q = TQue(TPosition.VECIN, 1)
        pipe.InitBuffer(q, 1, 256)
        q.AllocTensor(np.float16)
        q.AllocTensor(np.float16)
    with pytest.raises(KernelHangError, match="all 1 buffers in use"):
        run(k, chip)


def test_no_cube_buffers_on_vector_core(chip):
    def k():
        pipe = TPipe()
        q = TQue(TPosition.A1, 1)
        pipe.InitBuffer(q, 1, 512)
    with pytest.raises(NpuBufferError, match="core0.veccore0 has no L1 buffer"):
        run(k, chip)


def test_timeout_raises_507014_with_predicted_time(chip):
    """A run past the AI Core timeout fails with AICORE_TIMEOUT and the predicted seconds."""
    short = chip.replace(aicore_timeout_s=1e-6)  # 1800 cycles at 1.8 GHz
    def k():
        for _ in range(3):
            Busy(Pipe.V, 1000, 0)
    with pytest.raises(AclnnError, match=r"predicted run time .* exceeds the AI Core timeout") as e:
        run(k, short)
    assert e.value.status == 507014


def test_timeout_detected_during_a_long_run(chip):
    """A runaway schedule is stopped as soon as a core's clock passes the limit."""
    short = chip.replace(aicore_timeout_s=1e-5)
    def k():
        for _ in range(10 ** 6):
            Busy(Pipe.V, 1000, 0)
    with pytest.raises(AclnnError, match="runs past the chip's AI Core timeout") as e:
        run(k, short)
    assert e.value.status == 507014


def test_kernel_exception_names_core(chip):
    def k():
        if GetBlockIdx() == 1:
            raise ZeroDivisionError("boom")
    with pytest.raises(KernelError, match=r"core1\.veccore0: kernel raised ZeroDivisionError: boom") as e:
        run(k, chip, block_dim=2)
    assert isinstance(e.value.__cause__, ZeroDivisionError)


def test_trace_source_is_the_kernel_line(chip):
    """Every trace row names the kernel line that issued it."""
    import inspect

    def k():
        Busy(Pipe.V, 1, 0)
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
    first = inspect.getsourcelines(k)[1]
    sources = list(run(k, chip).trace.df["source"])
    assert sources == [f"{__file__}:{first + line}" for line in (1, 2, 3)]


def test_same_inputs_same_cycles(chip):
    def k():
        for i in range(50):
            Busy(Pipe.V if i % 3 else Pipe.MTE2, 7 + i % 5, 3)
            if i % 10 == 0:
                PipeBarrier(Pipe.V)
    a, b = run(k, chip, block_dim=4), run(k, chip, block_dim=4)
    assert a.cycles == b.cycles and timeline(a) == timeline(b)


@pytest.mark.parametrize("bucket", [0, -256, 2.5])
def test_a_bandwidth_bucket_that_is_not_a_positive_whole_number_is_refused(chip, bucket):
    def k():
        PipeBarrier(None)
    with pytest.raises(AclnnError, match="bw_bucket_cycles") as e:
        run(k, chip, mode="timing", bw_bucket_cycles=bucket)
    assert e.value.status == 161002
