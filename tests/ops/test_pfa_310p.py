"""PromptFlashAttentionV2 on the combined-core Atlas inference chip (Ascend310P3, kernel_combined.py): bits
against golden.py with the tiling's sOuter/sInner (blocks of 2 sOuter rows as on 910B), full vs timing
cycles, and the trace (cube and vector instructions on the same combined cores).
"""
from __future__ import annotations

import numpy as np
import pytest

from npusim.types import SubCore
from ops.prompt_flash_attention_v2.api import prompt_flash_attention_v2
from ops.prompt_flash_attention_v2.golden import pfa_golden

CHIP = "Ascend310P3"
FP16 = np.dtype(np.float16)


def to_layout(x: np.ndarray, layout: str) -> np.ndarray:
    b, n, s, d = x.shape
    if layout == "BSH":
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(b, s, n * d)
    return np.ascontiguousarray(x)


def make_call(layout="BNSD", b=2, n=2, s1=40, s2=256, d=32, mask=False, seed=0, **kw) -> dict:
    """fp16 q/k/v (310P: no GQA, no actual lengths; mask S aligned to 128) and a random bool mask."""
    n_kv = n
    rng = np.random.default_rng(seed)
    q = to_layout(rng.standard_normal((b, n, s1, d)).astype(FP16), layout)
    k = to_layout(rng.standard_normal((b, n_kv, s2, d)).astype(FP16), layout)
    v = to_layout(rng.standard_normal((b, n_kv, s2, d)).astype(FP16), layout)
    call = dict(query=q, key=k, value=v, num_heads=n, input_layout=layout,
                scale_value=float(1 / np.sqrt(d)), **kw)
    if mask:
        m = rng.random((b, 1, s1, s2)) < 0.3
        m[0, 0, 3, :] = True  # one fully masked row: output 0
        call["atten_mask"] = m
    return call


def golden_of(call: dict, res) -> np.ndarray:
    til = res.tiling
    return pfa_golden(res.extra["problem"], call["query"], call["key"], call["value"], call.get("atten_mask"),
                      s_outer=til.sOuterFactor, s_inner=til.sInnerFactor)


CASES = {
    "BNSD-nomask-causal": dict(layout="BNSD"),
    "BSH-mask-all": dict(layout="BSH", mask=True, seed=1, s1=128, s2=128, next_tokens=2147483647),
    "BNSD-mask-hp-d40": dict(layout="BNSD", mask=True, seed=2, inner_precise=0, d=40, s1=128, s2=128),
    "BSH-fp16softmax": dict(layout="BSH", seed=3, inner_precise=4, s2=300, next_tokens=2147483647),
    "BNSD-s2tail": dict(layout="BNSD", seed=4, s1=37, s2=131, next_tokens=2147483647),
}


@pytest.mark.parametrize("name", list(CASES))
def test_pfa_bitexact_vs_golden_310p(name):
    """Simulator output equals pfa_golden bit for bit on Ascend310P3 (several tiles and blocks per core)."""
    call = make_call(**CASES[name])
    tiling = {"sOuter": 16, "sInner": 64, "softmaxSOuter": 8}  # many items, halves and tiles at small sizes
    res = prompt_flash_attention_v2(**call, chip=CHIP, tiling=tiling)
    out = res.outputs["attention_out"]
    exp = golden_of(call, res)
    assert out.shape == exp.shape and out.dtype == FP16
    assert np.array_equal(out.view(np.uint16), exp.view(np.uint16))
    assert res.block_dim == min(8, len(res.tiling.itemN)) and res.cycles > 0
    assert np.isfinite(out.astype(np.float32)).all() and np.abs(out.astype(np.float32)).max() > 0


def test_pfa_default_tiling_bitexact_310p():
    """The default 310P tiling (UB 256 KiB minus the staging buffers), one half-empty tail block."""
    call = make_call(layout="BNSD", b=1, n=2, s1=384, s2=384, d=64, mask=True, seed=5, next_tokens=2147483647)
    res = prompt_flash_attention_v2(**call, chip=CHIP)
    assert res.tiling.ubBytes <= 256 * 1024 - 2 * 16 * 128 * 4
    exp = golden_of(call, res)
    assert np.array_equal(res.outputs["attention_out"].view(np.uint16), exp.view(np.uint16))


def test_pfa_full_vs_timing_identical_cycles_310p():
    """Full and timing mode give the same cycle count on the combined cores."""
    call = make_call(layout="BSH", mask=True, seed=6, s1=128, s2=128)
    tiling = {"sOuter": 16, "sInner": 64}
    full = prompt_flash_attention_v2(**call, chip=CHIP, tiling=tiling, mode="full")
    timing = prompt_flash_attention_v2(**call, chip=CHIP, tiling=tiling, mode="timing")
    assert full.cycles == timing.cycles > 0
    assert timing.outputs is None


def test_pfa_trace_cube_and_vector_on_combined_cores_310p():
    """Each used core is one combined stream running Mmad (cube), vector ops and the L0C -> UB read-out."""
    call = make_call(layout="BNSD", seed=7)
    res = prompt_flash_attention_v2(**call, chip=CHIP, tiling={"sOuter": 16, "sInner": 64}, mode="timing")
    df = res.trace.df
    assert set(df.sub_core.astype(str)) == {str(SubCore.COMBINED)}
    assert sorted(df.core.unique()) == list(range(res.block_dim))
    for core in range(res.block_dim):
        lanes = set(df[df.core == core]["pipe"])
        assert {"CUBE", "VECTOR"} <= lanes
        names = set(df[(df.core == core) & (df["pipe"] == "VECTOR")]["name"])
        assert {"DataCopy", "Exp"} <= names
    assert not set(df["name"]) & {"Fixpipe", "CrossCoreSetFlag", "CrossCoreWaitFlag"}
