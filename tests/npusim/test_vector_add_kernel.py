"""Reference kernel 1: the multi-core double-buffered vector add (npusim/examples/vector_add.py)."""
import numpy as np
import pytest

from npusim.launch import GmArg, launch
from npusim.memory.gm import TensorSpec
from npusim.examples.vector_add import add_custom, add_tiling


def _run(n, block_dim, buffer_num, chip="Ascend910B2", mode="full", tile=2048):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float16)
    y = rng.standard_normal(n).astype(np.float16)
    z = np.zeros(n, np.float16)
    if mode == "timing":
        x, y, z = (TensorSpec((n,), np.float16) for _ in range(3))
    tiling = add_tiling(n, block_dim, tile, buffer_num)
    res = launch(add_custom, (GmArg("x", x), GmArg("y", y), GmArg("z", z), tiling), block_dim=block_dim,
                 chip=chip, mode=mode, kernel_type="vector")
    return res, x, y, z


def _overlap_cycles(df, core, a, b):
    """Cycles during which lanes *a* and *b* of *core* are both busy."""
    d = df[df.core == core]
    ia = d[d["pipe"] == a][["start_cycle", "end_cycle"]].to_numpy()
    ib = d[d["pipe"] == b][["start_cycle", "end_cycle"]].to_numpy()
    lo = np.maximum(ia[:, None, 0], ib[None, :, 0])
    hi = np.minimum(ia[:, None, 1], ib[None, :, 1])
    return int(np.clip(hi - lo, 0, None).sum())


@pytest.mark.parametrize("chip", ["Ascend910B2", "Ascend310P3"])
@pytest.mark.parametrize("n,block_dim", [(8 * 2048 * 4, 8), (40000, 3), (1008, 4)])
def test_vector_add_bitexact(chip, n, block_dim):
    """z == x + y bit for bit (fp16 add is correctly rounded), tails on the last core and tile included."""
    res, x, y, z = _run(n, block_dim, 2, chip)
    assert np.array_equal(z.view(np.uint16), (x + y).view(np.uint16))


def test_double_buffering_overlaps_mte2_with_vector():
    """TQue depth 2 lets the next tile's MTE2 copy run under the current tile's Add; depth 1 does not."""
    single, *_ = _run(8 * 2048 * 8, 8, 1)
    double, *_ = _run(8 * 2048 * 8, 8, 2)
    for core in range(8):
        assert _overlap_cycles(single.trace.df, core, "MTE2", "VECTOR") == 0
        assert _overlap_cycles(double.trace.df, core, "MTE2", "VECTOR") > 0
    assert double.cycles < single.cycles


@pytest.mark.parametrize("buffer_num", [1, 2])
def test_full_and_timing_give_identical_cycles(buffer_num):
    full, *_ = _run(8 * 2048 * 4 + 512, 5, buffer_num)
    timing, *_ = _run(8 * 2048 * 4 + 512, 5, buffer_num, mode="timing")
    assert full.cycles == timing.cycles
    assert full.trace.df.equals(timing.trace.df)


def test_memory_bound_add_shares_hbm_bandwidth():
    """With HBM narrowed to one core's rate, 8 cores take several times longer than 1 core per byte."""
    from npusim.chip import chip
    wide = chip("Ascend910B2").replace(launch_overhead_cycles=0, l2_bytes=0)
    narrow = wide.replace(hbm_bw_bytes_per_s=5 * wide.clock_hz)  # below one core's GM->UB rate (~11 B/cycle at 4 KiB)
    n = 2048 * 256
    one, *_ = _run(n // 8, 1, 2, narrow)
    eight, *_ = _run(n, 8, 2, narrow)
    # 8 cores move 8x the bytes through the same narrow HBM: close to 8x the time, not 1x
    assert eight.cycles > 6 * one.cycles
    eight_wide, *_ = _run(n, 8, 2, wide)
    one_wide, *_ = _run(n // 8, 1, 2, wide)
    assert eight_wide.cycles < 1.5 * one_wide.cycles  # ample HBM: cores scale
