"""LoadData's table of (destination, source) views (npusim/isa/dma.py ``_LOAD_VIEWS``): a geometry seen before
reuses its views, so this checks that a reused entry still moves the current bytes, in a later launch (new
buffers) too, and with the table emptied on nearly every miss."""
from __future__ import annotations

import numpy as np
import pytest

from npusim.isa import dma
from npusim.kernel import DataCopy, GlobalTensor, HardEvent, LoadData, LoadData2DParams, SetFlag, TBuf, TPipe, \
    TPosition, WaitFlag
from npusim.launch import GmArg, launch
from tests.npusim.test_speed_paths import _load_reference

F16 = np.dtype(np.float16)
GEOMETRIES = [dict(repeatTimes=4), dict(repeatTimes=3, srcStride=2, startIndex=1, dstGap=1),
              dict(repeatTimes=4, srcStride=3, ifTranspose=True), dict(repeatTimes=2, srcStride=0, ifTranspose=True)]


def _run(x: np.ndarray, seen: list) -> None:
    """Each geometry twice on one AIC: L1 refilled from *x* (then from its negation) between the two."""
    def kernel(g: GlobalTensor):
        pipe = TPipe()
        l1, l0a = TBuf(TPosition.A1), TBuf(TPosition.A2)
        pipe.InitBuffer(l1, 16 * 512)
        pipe.InitBuffer(l0a, 16 * 512)
        a1, a2 = l1.Get(F16), l0a.Get(F16)
        for rnd in range(2):
            DataCopy(a1, g[rnd * 16 * 256], 16 * 256)
            SetFlag(HardEvent.MTE2_MTE1)
            WaitFlag(HardEvent.MTE2_MTE1)
            for geo in GEOMETRIES:
                a2.view()[:] = np.float16(-7.0)  # bytes LoadData must leave alone
                before, l1_now = a2.view().copy(), a1.view().copy()
                LoadData(a2, a1, LoadData2DParams(**geo))
                seen.append((geo, l1_now, before, a2.view().copy()))

    launch(kernel, (GmArg("g", np.concatenate([x, -x])),), block_dim=1, chip="Ascend910B2", mode="full",
           kernel_type="cube")


@pytest.mark.parametrize("max_bytes", [dma._LOAD_BASES_MAX_BYTES, 1])
def test_reused_views_move_the_current_bytes(monkeypatch, max_bytes):
    monkeypatch.setattr(dma, "_LOAD_BASES_MAX_BYTES", max_bytes)  # 1: the table is emptied on every miss
    seen = []
    for launch_no in range(3):  # new buffers per launch; the same geometries
        _run(((np.arange(16 * 256) * (launch_no + 3)) % 2039).astype(F16), seen)
    assert len(seen) == 3 * 2 * len(GEOMETRIES)
    for geo, l1, before, after in seen:
        want = _load_reference(l1, before, LoadData2DParams(**geo))
        assert np.array_equal(after.view(np.uint8), want), geo
    assert len({after.tobytes() for *_, after in seen}) == len(seen)  # every load moved other bytes
