"""TQueBind: the MTE2 -> MTE3 bind queue's flags, as an exact timeline (chip fixture: 1-cycle issue and flags)."""
import numpy as np
import pytest

from npusim.errors import KernelHangError
from npusim.kernel import HardEvent, TPipe, TQueBind, WaitFlag
from npusim.types import Pipe
from tests.conftest import timeline
from tests.npusim.test_core import Busy, run

LOAD, STORE = (10, 5), (20, 5)  # (occupancy, latency) of the MTE2 load and the MTE3 store stand-ins


def copy_through(q: TQueBind, times: int) -> None:
    """The GM -> UB -> GM loop of a bind-queue kernel: load, EnQue, DeQue, store, FreeTensor."""
    for _ in range(times):
        x = q.AllocTensor(np.float16)
        Busy(Pipe.MTE2, *LOAD)
        q.EnQue(x)
        y = q.DeQue(np.float16)
        Busy(Pipe.MTE3, *STORE)
        q.FreeTensor(y)


def test_tquebind_flags_exact_timeline(chip):
    """Depth 2: EnQue/DeQue order MTE3 after MTE2; only a buffer's second AllocTensor waits for its FreeTensor."""
    def k():
        q = TQueBind(2, 4)
        q.InitBuffer(TPipe(), 512)
        copy_through(q, 3)

    res = run(k, chip)
    assert timeline(res) == [
        # buffer 0 (event id 4): first use, no wait at AllocTensor
        ("MTE2", "Busy", 1, 16), ("FLOWCTRL", "SetFlag", 16, 17),  # EnQue fires when the load is done
        ("FLOWCTRL", "WaitFlag", 3, 18), ("MTE3", "Busy", 18, 43),  # DeQue: the store starts after it
        ("FLOWCTRL", "SetFlag", 43, 44),  # FreeTensor fires when the store is done
        # buffer 1 (event id 5): first use, no wait; the load overlaps the first store
        ("MTE2", "Busy", 17, 32), ("FLOWCTRL", "SetFlag", 32, 33),
        ("FLOWCTRL", "WaitFlag", 44, 45), ("MTE3", "Busy", 45, 70), ("FLOWCTRL", "SetFlag", 70, 71),
        # buffer 0 again: AllocTensor waits on MTE2 for the first FreeTensor (fired at 44)
        ("FLOWCTRL", "WaitFlag", 33, 45), ("MTE2", "Busy", 45, 60), ("FLOWCTRL", "SetFlag", 60, 61),
        ("FLOWCTRL", "WaitFlag", 71, 72), ("MTE3", "Busy", 72, 97), ("FLOWCTRL", "SetFlag", 97, 98),
    ]
    assert res.cycles == 98
    flows = res.trace.flows  # set -> wait arrows: 3 EnQue -> DeQue, 1 FreeTensor -> AllocTensor
    assert sorted(zip(flows["set_cycle"].tolist(), flows["wait_cycle"].tolist())) == [
        (17, 18), (33, 45), (44, 45), (61, 72)]


def test_tquebind_flags_are_the_explicit_event_ids(chip):
    """Buffer i's FreeTensor sets MTE3_MTE2 with id eventBase + i, which an explicit WaitFlag consumes."""
    def k():
        q = TQueBind(2, 4)
        q.InitBuffer(TPipe(), 512)
        copy_through(q, 2)
        WaitFlag(HardEvent.MTE3_MTE2, 5)  # buffer 1's FreeTensor (fired at 71)
        WaitFlag(HardEvent.MTE3_MTE2, 4)  # buffer 0's FreeTensor (fired at 44)

    rows = timeline(run(k, chip))
    assert rows[-2:] == [("FLOWCTRL", "WaitFlag", 33, 72), ("FLOWCTRL", "WaitFlag", 72, 73)]


def test_tquebind_flags_name_the_kernel_line(chip):
    """The flag rows' source is the kernel line that called the queue method, not npusim's own code."""
    def k():
        q = TQueBind(1, 0)
        q.InitBuffer(TPipe(), 512)
        copy_through(q, 2)

    df = run(k, chip).trace.df
    flags = df[df["pipe"] == "FLOWCTRL"]
    assert len(flags) == 7  # 2 x (EnQue, DeQue, FreeTensor) + the second AllocTensor
    assert {s.rsplit(":", 1)[0] for s in flags.source} == {__file__}


def test_tquebind_reuse_without_free_hangs(chip):
    """Reusing a buffer that was never freed waits for a MTE3_MTE2 set that never comes."""
    def k():
        q = TQueBind(1, 7)
        q.InitBuffer(TPipe(), 512)
        x = q.AllocTensor(np.float16)
        q.EnQue(x)
        q.DeQue(np.float16)
        q.AllocTensor(np.float16)

    with pytest.raises(KernelHangError, match="MTE3_MTE2#7"):
        run(k, chip)
