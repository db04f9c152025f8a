"""benchmarks/calibration.py's PFA slice floor (docs/calibration.md "Steady state from first principles").

``slice_cycles`` prices CANN's high-precision slice (PFA_HP_SLICE) by hand from npusim's vector cost model;
here the same instruction list runs on npusim's vector unit, so the hand pricing must equal the simulator's.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import calibration

from npusim.kernel import (
    Add,
    BlockReduceMax,
    BlockReduceSum,
    Brcb,
    BrcbRepeatParams,
    Cast,
    Copy,
    Exp,
    Max,
    Mul,
    Muls,
    Pipe,
    PipeBarrier,
    RoundMode,
    Sub,
    TBuf,
    TPipe,
)
from npusim.launch import launch

F32 = np.float32
LANES = 64  # fp32 elements per 256-byte repeat


def _issue(name: str, repeats: int, big, work, small, half):
    """One PFA_HP_SLICE entry as the Ascend C call that issues *repeats* fp32 repeats."""
    n = repeats * LANES
    if name == "Muls":
        Muls(big, big, 0.125, n)
    elif name in ("BlockReduceMax", "BlockReduceSum"):
        op = BlockReduceMax if name == "BlockReduceMax" else BlockReduceSum
        op(work, big, repeats, LANES, 1, 1, 8)
    elif name == "Brcb":
        Brcb(small, work, repeats, BrcbRepeatParams(1, 8))
    elif name == "Copy":
        Copy(small, work, n)
    elif name in ("Max", "Sub", "Mul", "Add"):
        {"Max": Max, "Sub": Sub, "Mul": Mul, "Add": Add}[name](big, big, work, n)
    elif name == "Exp":
        Exp(big, big, n)
    elif name == "Cast":
        Cast(half, big, RoundMode.CAST_ROUND, n)
    else:
        raise AssertionError(f"no call for {name}")


def _slice_kernel():
    pipe = TPipe()
    bufs = [TBuf() for _ in range(4)]
    for b, nbytes in zip(bufs, (8 * 512 * 4, 8 * 512 * 4, 8 * 512 * 4, 8 * 512 * 2)):
        pipe.InitBuffer(b, nbytes)
    big, work, small = (b.Get(F32) for b in bufs[:3])
    half = bufs[3].Get(np.float16)
    for name, repeats, barrier in calibration.PFA_HP_SLICE:
        _issue(name, repeats, big, work, small, half)
        if barrier:
            PipeBarrier(Pipe.V)


@pytest.mark.parametrize("vector_bytes_per_cycle", [256, 512])
def test_slice_floor_prices_the_slice_as_the_vector_unit_runs_it(vector_bytes_per_cycle):
    """Occupancy per cost class, latencies, pipelining between barriers: the hand pricing is the simulator's."""
    spec = calibration.get_chip("Ascend910B2").replace(launch_overhead_cycles=0,
                                                       vector_bytes_per_cycle=vector_bytes_per_cycle)
    res = launch(_slice_kernel, (), block_dim=1, chip=spec, mode="timing", kernel_type="vector")
    vec = res.trace.df
    vec = vec[vec["pipe"] == "VECTOR"]
    assert len(vec) == len(calibration.PFA_HP_SLICE)
    span = vec.end_cycle.max() - vec.start_cycle.min()
    priced = calibration.slice_cycles("Ascend910B2", lambda cls: cls.cost * 256 / vector_bytes_per_cycle)
    assert span == pytest.approx(priced, abs=2)


def test_slice_covers_six_passes_of_the_slice():
    """Muls, the row max, the broadcast Subs, Exp, the row sum and the Cast each read the whole 8 x 512 slice."""
    full = 8 * 512 // LANES
    per_name: dict = {}
    for name, repeats, _ in calibration.PFA_HP_SLICE:
        per_name[name] = per_name.get(name, 0) + repeats
    for name in ("Muls", "Exp", "Cast"):
        assert per_name[name] >= full
    assert per_name["Sub"] >= full and per_name["BlockReduceMax"] >= full and per_name["BlockReduceSum"] >= full
    floor = calibration.pfa_floor("Ascend910B2", 67.0)
    assert floor["repeats"] <= floor["peak_rate"] <= floor["model_rates"]
