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


def _fa_gm_bytes(s2: int) -> int:
    """Bytes the FA varlen model moves through GM (every MTE2, MTE3 and FixPipe transfer) for 256 query rows (one AI
    Core, one 128-row block per vector core) against *s2* keys."""
    from npusim import TensorSpec
    from ops import flash_attention_var_len_score
    spec = calibration.get_chip("Ascend910B2").replace(launch_overhead_cycles=0)
    q, kv = TensorSpec((256, 1, 128), np.float16), TensorSpec((s2, 1, 128), np.float16)
    res = flash_attention_var_len_score(q, kv, kv, actual_seq_qlen=[256], actual_seq_kvlen=[s2], head_num=1,
                                        scale_value=0.088, input_layout="TND", chip=spec, mode="timing", trace="full")
    df = res.trace.df
    return int(df[df["pipe"].isin(["MTE2", "MTE3", "FIXP"])]["bytes"].sum())


def test_fa_step_l2_bytes_is_what_the_model_moves_per_steady_step():
    """One more 1024-key tile in the middle of a row adds exactly fa_step_l2_bytes without K/V sharing (npusim's varlen
    kernel loads K and V per vector core); the board's template shares them, one K and one V tile less."""
    assert _fa_gm_bytes(4096) - _fa_gm_bytes(3072) == calibration.fa_step_l2_bytes(128, kv_shared=False)
    saved = calibration.fa_step_l2_bytes(128, kv_shared=False) - calibration.fa_step_l2_bytes(128)
    assert saved == 2 * calibration.FA_TILE * 128 * 2


def test_fa_floor_split_and_step_for_the_fa_file():
    """S = 16384: 128 blocks, 3 per vector core, paired on 22 AI Cores, 48 steps; the step time follows the board time."""
    fa = calibration.fa_floor("Ascend910B2", 16384, 128, 1118.462, 23.0, 28000.0)
    assert fa["cube_side"]["overlapped"] == fa["cube_side"]["cube"] == 16384
    assert (fa["cores"], fa["steps"]) == (22, 48)
    assert fa["board_step_cycles"] == pytest.approx((1118.462 - 23.0) * 1800 / 48)
    shipped = dict(calibration.L2_CANDIDATES)["S8 L2_RO / L2_WO (npusim's budget)"]
    assert shipped == calibration.get_chip("Ascend910B2").l2_bw_bytes_per_s / 1.8e9


@pytest.mark.parametrize("l0c_depth", [1, 2])
def test_board_cube_side_moves_one_k_and_v_tile_per_ai_core_step(l0c_depth):
    """With the board's cube side (fa_board_cube_side: K and V in one L1 cache shared by the two workers) one more
    1024-key tile adds exactly the board template's fa_step_l2_bytes (K/V shared); the shipped kernel is back after."""
    from fa_board_cube_side import board_cube_side

    from ops.flash_attention_var_len_score import kernel as fa_kernel
    shipped = fa_kernel.KernelFlashAttentionVarLenScore
    with board_cube_side(l0c_depth) as cls:
        step = _fa_gm_bytes(4096) - _fa_gm_bytes(3072)
    assert step == calibration.fa_step_l2_bytes(128)
    assert cls.shared_loads > 0
    assert fa_kernel.KernelFlashAttentionVarLenScore is shipped


@pytest.mark.parametrize("l0c_depth", [1, 2])
def test_board_cube_side_outputs_are_the_shipped_kernels_bits(l0c_depth):
    """Full mode, a ragged last key tile and two workers per AI Core on the same tiles: every output bit-identical."""
    from fa_board_cube_side import board_cube_side

    from ops import flash_attention_var_len_score
    rng = np.random.default_rng(7)
    s, d = 1024 + 64, 128
    q, k, v = (rng.standard_normal((s, 1, d)).astype(np.float16) for _ in range(3))

    def run():
        return flash_attention_var_len_score(q, k, v, actual_seq_qlen=[s], actual_seq_kvlen=[s], head_num=1,
                                             scale_value=1 / np.sqrt(d), input_layout="TND", mode="full").outputs
    shipped = run()
    with board_cube_side(l0c_depth) as cls:
        variant = run()
    assert cls.shared_loads > 0
    for name, out in shipped.items():
        assert np.asarray(out).tobytes() == np.asarray(variant[name]).tobytes(), name
