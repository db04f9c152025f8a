"""SetAtomicAdd: Fixpipe writes accumulate in fp32, committed in simulated-time order, logged."""
import numpy as np
import pytest

from npusim.kernel import (DataCopy, Fixpipe, FixpipeParamsV220, GetBlockIdx, Nd2NzParams, SetAtomicAdd,
                           SetAtomicNone, TPipe, TPosition, TQue)
from npusim.launch import GmArg, launch
from ops.common.cube_tiles import CubeTiles
from ops.flash_attention_var_len_score.golden import mmad


def _kernel(a, out, slow_block, repeats):
    """Each AIC computes a_b (16 x 16) @ ones and atomically adds it to *out*; *slow_block* first burns time."""
    pipe = TPipe()
    tiles = CubeTiles(pipe, np.float16)
    l1 = TQue(TPosition.A1, 1)
    c = TQue(TPosition.CO1, 1)
    pipe.InitBuffer(l1, 1, 16 * 16 * 2)
    pipe.InitBuffer(c, 1, 16 * 16 * 4)
    b = GetBlockIdx()
    t = l1.AllocTensor(np.float16)
    DataCopy(t, a[b * 256], Nd2NzParams(1, 16, 16, 0, 16, 16, 1, 0))
    l1.EnQue(t)
    t = l1.DeQue(np.float16)
    cl0 = c.AllocTensor(np.float32)
    for _ in range(repeats if b == slow_block else 1):
        tiles.SplitA(t, 1, 0, 16, 0, 16)
        tiles.SplitBTransposed(t, 1, 0, 16)
        tiles.Compute(cl0, 16, 16, 16, True)
    c.EnQue(cl0)
    cl0 = c.DeQue(np.float32)
    SetAtomicAdd(np.float32)
    Fixpipe(out, cl0, FixpipeParamsV220(nSize=16, mSize=16, srcStride=16, dstStride=16))
    SetAtomicNone()
    c.FreeTensor(cl0)
    l1.FreeTensor(t)


@pytest.mark.parametrize("slow_block, first", [(0, 1), (1, 0)])
def test_atomic_adds_commit_in_simulated_time_order(slow_block, first):
    """The block that reaches its Fixpipe first commits first (log), whatever the Python order; the sum is
    the fp32 sum in that order."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 16, 16)).astype(np.float16)
    a[1] *= 1000.0  # magnitudes that make fp32 addition order visible
    init = rng.standard_normal((16, 16)).astype(np.float32)
    out = init.copy()
    res = launch(_kernel, (GmArg("a", a.reshape(-1)), GmArg("out", out), slow_block, 40), block_dim=2,
                 chip="Ascend910B2", kernel_type="cube")
    assert [entry[1] for entry in res.atomic_log] == [first, 1 - first]
    prod = [mmad(a[i].astype(np.float32), a[i].astype(np.float32), 16) for i in (0, 1)]  # the Mmad order
    expect = (init + prod[first]) + prod[1 - first]
    other = (init + prod[1 - first]) + prod[first]
    assert np.array_equal(out.view(np.uint32), expect.view(np.uint32))
    assert not np.array_equal(other.view(np.uint32), expect.view(np.uint32))  # the order is visible
    assert res.atomic_log[0][0] == "out"
