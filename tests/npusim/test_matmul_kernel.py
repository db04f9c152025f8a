"""The tiled multi-core matmul reference kernel: bit-exact vs an independent golden, modes agree, trace lanes.

The golden restates docs/numerics_cube.md "Mmad" on ND matrices (no tiling): per 16-wide k fractal
the fp32 products are summed by recursive halving, fractal sums are added to an fp32 accumulator in
ascending k, then Fixpipe's RNE cast to the output dtype. The kernel's K tiling (baseK a multiple of
16) splits the same fractal sequence over several Mmads, so the result must match bit for bit.
"""
import numpy as np
import pytest

from npusim.chip import chip as get_chip
from npusim.errors import AclnnError
from npusim.launch import GmArg, launch
from npusim.examples.matmul import matmul_custom, matmul_tiling

CHIPS = ["Ascend910B2", "Ascend910B4"]
SHAPES = [(128, 128, 64), (200, 300, 130), (37, 45, 70), (256, 160, 200)]


def halving_sum(terms):
    if len(terms) == 1:
        return terms[0]
    h = len(terms) // 2
    return halving_sum(terms[:h]) + halving_sum(terms[h:])


def golden(a, b, out_dtype):
    m, k = a.shape
    acc = np.zeros((m, b.shape[1]), np.float32)
    zero = np.zeros_like(acc)
    for f in range(0, k, 16):
        terms = [a[:, t].astype(np.float32)[:, None] * b[t].astype(np.float32)[None, :] if t < k else zero
                 for t in range(f, f + 16)]
        acc = acc + halving_sum(terms)
    return acc.astype(out_dtype)


def run_matmul(shape, chip, out_dtype=np.float16, mode="full", seed=0, **tiling_kw):
    m, n, k = shape
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, out_dtype)
    tiling = matmul_tiling(m, n, k, get_chip(chip).aic_count, **tiling_kw)
    res = launch(matmul_custom, (GmArg("a", a), GmArg("b", b), GmArg("c", c), tiling), block_dim=tiling.usedCoreNum,
                 chip=chip, kernel_type="cube", mode=mode)
    return a, b, c, res, tiling


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_bitexact_vs_golden(chip, shape):
    """fp16 A @ B -> fp16 C, tails in M, N and K included, equals the golden bit for bit."""
    a, b, c, _, _ = run_matmul(shape, chip)
    assert np.array_equal(c.view(np.uint16), golden(a, b, np.float16).view(np.uint16))


def test_matmul_fp32_output_and_small_tiles_bitexact():
    """fp32 C (no Fixpipe cast) with 32 x 48 x 32 tiles: many K steps accumulate onto L0C."""
    a, b, c, _, tiling = run_matmul((70, 100, 150), "Ascend910B2", np.float32, base_m=32, base_n=48, base_k=32)
    assert tiling.kTiles == 5 and tiling.mTiles * tiling.nTiles == 9
    assert np.array_equal(c.view(np.uint32), golden(a, b, np.float32).view(np.uint32))


@pytest.mark.parametrize("chip", CHIPS)
def test_matmul_full_and_timing_modes_give_identical_cycles(chip):
    """Timing mode (no data) reproduces the full-mode schedule exactly."""
    *_, full, _ = run_matmul((200, 300, 130), chip)
    *_, timing, _ = run_matmul((200, 300, 130), chip, mode="timing")
    assert full.cycles == timing.cycles
    cols = ["core", "pipe", "name", "start_cycle", "end_cycle", "bytes", "flops"]
    assert full.trace.df[cols].equals(timing.trace.df[cols])


def test_matmul_trace_shows_cube_pipes_on_several_cores():
    """Every used core runs MTE2 (Nd2Nz), MTE1 (LoadData), CUBE (Mmad) and FIXP (Fixpipe)."""
    *_, res, tiling = run_matmul((256, 384, 128), "Ascend910B2")
    assert tiling.usedCoreNum == 6
    df = res.trace.df
    lanes = df.groupby("core")["pipe"].agg(set)
    assert len(lanes) == 6
    for core_lanes in lanes:
        assert {"CUBE", "MTE1", "MTE2", "FIXP"} <= core_lanes
    names = dict(zip(df["name"], df["pipe"]))
    assert names["Mmad"] == "CUBE" and names["LoadData"] == "MTE1" and names["Fixpipe"] == "FIXP"
    assert df[df.name == "Mmad"].flops.sum() == 2 * 256 * 384 * 128


def test_matmul_double_buffering_overlaps_mte2_with_cube():
    """With two buffers per queue, MTE2 of the next K step runs while the cube works on this one."""
    *_, res, _ = run_matmul((128, 128, 512), "Ascend910B2")
    df = res.trace.df
    mte2 = df[df["pipe"] == "MTE2"][["start_cycle", "end_cycle"]].to_numpy()
    cube = df[df["pipe"] == "CUBE"][["start_cycle", "end_cycle"]].to_numpy()
    overlap = any(s2 < e1 and s1 < e2 for s1, e1 in cube for s2, e2 in mte2)
    assert overlap


@pytest.mark.parametrize("kw, message", [
    ({"m": 0}, "m must be > 0"),
    ({"base_k": 40}, "base_k must be a positive multiple of 16"),
    ({"base_m": 256, "base_k": 128}, "of L0A, which holds 65536"),
])
def test_matmul_tiling_rejects_bad_parameters(kw, message):
    """Host tiling refuses empty shapes, misaligned bases and tiles that overflow a buffer."""
    args = {"m": 64, "n": 64, "k": 64, "core_num": 4, **kw}
    with pytest.raises(AclnnError, match=message):
        matmul_tiling(**args)
