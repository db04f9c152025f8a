"""PromptFlashAttentionV2 on the simulator: bits against golden.py over a pairwise grid (layout, precision,
head sharing, sparse mode and mask form, actual lengths, D, chip, tiles, sizes); the int8 paths; accuracy
against the float64 reference; empty inputs; full vs timing mode; tiling overrides; the trace; the aclnn
facade; and a hypothesis fuzz (an OpResult equal to the golden, or an AclnnError, never anything else).
"""
from __future__ import annotations

import functools
import itertools
import zlib

import ml_dtypes
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from npusim.dtypes import encode_deq_scale_u64
from npusim.errors import (
    ACLNN_ERR_INNER_TILING_ERROR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
    STATUS_NAMES,
    AclnnError,
)
from npusim.memory.gm import TensorSpec
from ops.common.accuracy import double_thousandth_ok, fa_rule_ok
from ops.common.masks import compressed_causal_mask
from ops.common.result import OpResult
from ops.prompt_flash_attention_v2.api import (
    aclnnPromptFlashAttentionV2,
    aclnnPromptFlashAttentionV2GetWorkspaceSize,
    prompt_flash_attention_v2,
)
from ops.prompt_flash_attention_v2.golden import pfa_golden
from ops.prompt_flash_attention_v2.reference import keep_of, pfa_lowp, pfa_reference64
from tests.ops.helpers import bits, to_layout

FP16, BF16, INT8 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.int8)
F32, U64 = np.dtype(np.float32), np.dtype(np.uint64)
CHIPS = ("Ascend910B2", "Ascend910B4")
LAYOUTS = ("BSH", "BSND", "BNSD", "BNSD_BSND")
QUANT = ("deq_scale1", "quant_scale1", "deq_scale2", "quant_scale2", "quant_offset2")
DT_NAMES = {FP16: "fp16", BF16: "bf16", INT8: "int8"}
INT_MAX = 2147483647


# --- helpers ------------------------------------------------------------------------------------------
def out_to_bnsd(x: np.ndarray, layout: str, n: int) -> np.ndarray:
    """An output of *layout* as [B, N, S, D] (BNSD_BSND writes BSND)."""
    if layout == "BSH":
        b, s, h = x.shape
        return x.reshape(b, s, n, h // n).transpose(0, 2, 1, 3)
    if layout in ("BSND", "BNSD_BSND"):
        return x.transpose(0, 2, 1, 3)
    return x


def qkv(rng, b, n, n_kv, s1, s2, d, dtype, layout, uniform=False) -> dict:
    """query/key/value in *layout*: int8 in [-6, 6]; floats N(0, 1), or U(-1, 1) when *uniform*."""
    def make(heads, s):
        if np.dtype(dtype) == INT8:
            return rng.integers(-6, 7, (b, heads, s, d)).astype(np.int8)
        x = rng.uniform(-1, 1, (b, heads, s, d)) if uniform else rng.standard_normal((b, heads, s, d))
        return to_layout(x.astype(dtype), layout)
    q, k, v = make(n, s1), make(n_kv, s2), make(n_kv, s2)
    if np.dtype(dtype) == INT8:
        q, k, v = (to_layout(x, layout) for x in (q, k, v))
    return dict(query=q, key=k, value=v)


@functools.cache
def compressed(dtype, shape=(2048, 2048)) -> np.ndarray:
    """The optimised 2048 x 2048 mask of modes 2/3/4 (upper triangle dropped), read-only, shared."""
    m = compressed_causal_mask(dtype=np.dtype(dtype)).reshape(shape)
    m.setflags(write=False)
    return m


def drop_values(m: np.ndarray, dtype, rng) -> np.ndarray:
    """A bool drop pattern as a mask of *dtype*: int8/uint8 use arbitrary nonzero values (nonzero = drop)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return m
    lo, hi = (-128, 128) if dtype == INT8 else (1, 256)
    vals = rng.integers(lo, hi, m.shape)
    vals[vals == 0] = 1
    return np.where(m, vals, 0).astype(dtype)


def golden_of(call: dict, res: OpResult) -> np.ndarray:
    """pfa_golden for a call that returned *res*, with the tile sizes the simulator used."""
    til = res.tiling
    return pfa_golden(res.extra["problem"], call["query"], call["key"], call["value"], call.get("atten_mask"),
                      s_outer=til.sOuterFactor if til else 16, s_inner=til.sInnerFactor if til else 64,
                      block_rows=til.blockRows if til else None, tail_first=til.tailFirst if til else False,
                      **{k: call.get(k) for k in QUANT})


def run_bitexact(call: dict, chip: str = "Ascend910B2", tiling=None) -> OpResult:
    """Run the simulator, assert its output equals the golden bit for bit, return the result."""
    res = prompt_flash_attention_v2(**call, chip=chip, tiling=tiling)
    prob = res.extra["problem"]
    out = res.attention_out
    assert out.shape == prob.out_shape and out.dtype == prob.out_dtype
    g = golden_of(call, res)
    diff = np.flatnonzero(bits(out).ravel() != bits(g).ravel())
    assert diff.size == 0, f"{diff.size} of {out.size} elements differ, first at {diff[:5]}"
    return res


# --- 1. bit-exact grid (pairwise) ------------------------------------------------------------------
PRECISIONS = {"fp16ip1": (FP16, 1), "fp16ip0": (FP16, 0), "bf16": (BF16, 1)}
HEADS = {"MHA": (2, 2), "GQA": (4, 2), "MQA": (4, 1)}
# name: (sparse_mode, mask form, pre_tokens, next_tokens)
MASKS = {
    "m0none": (0, None, INT_MAX, 0),
    "m0S1S2": (0, "S1S2", 20, 5),
    "m0BS1S2": (0, "BS1S2", INT_MAX, INT_MAX),
    "m01S1S2": (0, "1S1S2", INT_MAX, 0),
    "m0B1S1S2neg": (0, "B1S1S2", 100, -3),
    "m011S1S2negpre": (0, "11S1S2", -2, 50),
    "m0padded": (0, "pad", INT_MAX, INT_MAX),
    "m1B1S1S2": (1, "B1S1S2", 0, 0),
    "m1S1S2": (1, "S1S2", -5, -5),  # tokens are ignored in mode 1
    "m2": (2, (2048, 2048), 0, 0),
    "m3": (3, (1, 2048, 2048), 0, 0),
    "m4": (4, (1, 1, 2048, 2048), 30, 10),
    "m4negnext": (4, (2048, 2048), 40, -3),
    "m4negpre": (4, (1, 2048, 2048), -3, 40),
}
# name: (actual_seq_lengths, actual_seq_lengths_kv) as functions of (S1, S2); B = 2
LENS = {
    "none": (lambda s1, s2: None, lambda s1, s2: None),
    "q1": (lambda s1, s2: [s1 - 5], lambda s1, s2: None),
    "kv1": (lambda s1, s2: None, lambda s1, s2: [s2 - 9]),
    "kvB": (lambda s1, s2: None, lambda s1, s2: [s2 // 2, s2 - 1]),
    "bothB": (lambda s1, s2: [s1, s1 // 2 + 1], lambda s1, s2: [s2 // 3 + 1, s2]),
    "longer": (lambda s1, s2: [s1 // 2, s1 - 1, 99999], lambda s1, s2: [s2 - 3, s2 // 2, -7]),
}
TILES = {"default": None, "sInner64": {"sInner": 64}, "sOuter16sInner64": {"sOuter": 16, "sInner": 64}}
FACTORS = dict(chip=CHIPS, prec=tuple(PRECISIONS), layout=LAYOUTS, heads=tuple(HEADS), mask=tuple(MASKS),
               mdtype=("bool", "int8", "uint8"), lens=tuple(LENS), d=(16, 40, 64, 128),
               sizes=((48, 80), (130, 130), (16, 40), (200, 300), (257, 96)), tiles=tuple(TILES))


def pairwise(factors: dict, seed: int = 0) -> list[dict]:
    """A small set of combinations covering every pair of values of every two factors (greedy: start from
    an uncovered pair, fill the other factors at random, keep the candidate covering most new pairs)."""
    names = list(factors)
    rng = np.random.default_rng(seed)
    uncovered = {(i, a, j, b) for i, j in itertools.combinations(range(len(names)), 2)
                 for a in range(len(factors[names[i]])) for b in range(len(factors[names[j]]))}
    rows = []
    while uncovered:
        i, a, j, b = min(uncovered)
        best, best_new = None, -1
        for _ in range(40):
            row = [int(rng.integers(len(factors[n]))) for n in names]
            row[i], row[j] = a, b
            new = sum((p, row[p], q, row[q]) in uncovered for p, q in itertools.combinations(range(len(names)), 2))
            if new > best_new:
                best, best_new = row, new
        uncovered -= {(p, best[p], q, best[q]) for p, q in itertools.combinations(range(len(names)), 2)}
        rows.append({n: factors[n][k] for n, k in zip(names, best)})
    return rows


GRID = pairwise(FACTORS)


def grid_id(c: dict) -> str:
    return (f"{c['chip']}-{c['prec']}-{c['layout']}-{c['heads']}-{c['mask']}-{c['mdtype']}-{c['lens']}"
            f"-D{c['d']}-S{c['sizes'][0]}x{c['sizes'][1]}-{c['tiles']}")


def user_mask(form, b: int, s1: int, s2: int, dtype, rng) -> np.ndarray:
    """A full (modes 0/1) mask of *form*: 25 % dropped at random, row 3 fully dropped; "pad": [B, S1 + 3,
    S2 rounded up to 32, + 32] with the padding dropped (the seed's advice)."""
    shape = {"S1S2": (s1, s2), "BS1S2": (b, s1, s2), "1S1S2": (1, s1, s2), "B1S1S2": (b, 1, s1, s2),
             "11S1S2": (1, 1, s1, s2), "pad": (b, s1 + 3, -(-s2 // 32) * 32 + 32)}[form]
    m = rng.random(shape) < 0.25
    m[..., 3, :] = True
    m[..., s2:] = True
    return drop_values(m, dtype, rng)


def grid_call(c: dict, rng) -> dict:
    """The call of one grid combination (B = 2)."""
    dtype, ip = PRECISIONS[c["prec"]]
    n, n_kv = HEADS[c["heads"]]
    s1, s2 = c["sizes"]
    mode, form, pre, nxt = MASKS[c["mask"]]
    call = qkv(rng, 2, n, n_kv, s1, s2, c["d"], dtype, c["layout"])
    if form is None:
        mask = None
    elif isinstance(form, tuple):
        mask = compressed(np.dtype(c["mdtype"]), form)
    else:
        mask = user_mask(form, 2, s1, s2, np.dtype(c["mdtype"]), rng)
    q_len, kv_len = LENS[c["lens"]]
    call.update(atten_mask=mask, actual_seq_lengths=q_len(s1, s2), actual_seq_lengths_kv=kv_len(s1, s2),
                num_heads=n, num_key_value_heads=n_kv, scale_value=1 / np.sqrt(c["d"]), pre_tokens=pre,
                next_tokens=nxt, input_layout=c["layout"], sparse_mode=mode, inner_precise=ip)
    return call


@pytest.mark.parametrize("case", GRID, ids=[grid_id(c) for c in GRID])
def test_pfa_bitexact_vs_golden(case):
    """Simulator output equals the golden bit for bit (pairwise grid over every factor of the brief)."""
    rng = np.random.default_rng(zlib.crc32(grid_id(case).encode()))
    res = run_bitexact(grid_call(case, rng), case["chip"], TILES[case["tiles"]])
    if case["tiles"] != "default":
        assert res.tiling.sInnerFactor == 64


def test_pfa_grid_is_pairwise():
    """The grid covers every pair of factor values (and so every value of every factor)."""
    names = list(FACTORS)
    for a, b in itertools.combinations(names, 2):
        seen = {(c[a], c[b]) for c in GRID}
        assert seen == set(itertools.product(FACTORS[a], FACTORS[b])), (a, b)


LONG = [(FP16, 2, 160, 2300, 0, 0), (FP16, 3, 160, 2300, 0, 0), (BF16, 4, 160, 2300, 2200, -2000),
        (FP16, 4, 160, 2300, 100, 2150), (BF16, 4, 2200, 160, 2100, -100), (FP16, 3, 2200, 160, 0, 0),
        (BF16, 1, 100, 2300, 0, 0), (FP16, 0, 100, 2300, 1000, 1200)]


@pytest.mark.parametrize("dtype,mode,s1,s2,pre,nxt", LONG,
                         ids=[f"{CHIPS[0]}-{DT_NAMES[c[0]]}-BNSD-mode{c[1]}-S{c[2]}x{c[3]}" for c in LONG])
def test_pfa_long_sequence_bitexact(dtype, mode, s1, s2, pre, nxt):
    """Sequences past 2048 (several 1024-wide tiles, causal offsets beyond the compressed mask): bit-exact."""
    rng = np.random.default_rng(s1 + mode)
    mask = compressed(np.dtype(np.uint8)) if mode >= 2 else user_mask("S1S2", 1, s1, s2, np.bool_, rng)
    call = small_call(b=1, n=2, n_kv=1, s1=s1, s2=s2, d=16, dtype=dtype, sparse_mode=mode, pre_tokens=pre,
                      next_tokens=nxt, atten_mask=mask, seed=mode)
    run_bitexact(call)


@pytest.mark.parametrize("d,dtype,ip", [(256, FP16, 1), (512, BF16, 1), (136, FP16, 0)],
                         ids=[f"{CHIPS[0]}-fp16ip1-BSH-D256", f"{CHIPS[0]}-bf16-BSH-D512", f"{CHIPS[0]}-fp16ip0-BSH-D136"])
def test_pfa_large_head_dim_bitexact(d, dtype, ip):
    """Large D (the D >= 200 base sizes, several 128-wide D chunks, UB fitting shrinks the tiles): bit-exact."""
    call = small_call(layout="BSH", b=1, n=2, n_kv=1, s1=140, s2=600, d=d, dtype=dtype, inner_precise=ip)
    run_bitexact(call)


@pytest.mark.parametrize("dtype,ip", [(FP16, 1), (FP16, 0), (BF16, 1)],
                         ids=[f"{CHIPS[0]}-{p}-BNSD" for p in ("fp16ip1", "fp16ip0", "bf16")])
def test_pfa_special_values_bitexact(dtype, ip):
    """Inf and NaN in query, key and value, and extreme scale values (overflow to inf, NaN, tiny): bit-exact
    (NaNs are the canonical quiet NaN on both sides)."""
    for scale in (0.125, 1e5, -1e5, 1e30, float("inf"), float("nan"), 1e-30):
        call = small_call(b=1, n=2, n_kv=2, s1=40, s2=70, d=32, dtype=dtype, inner_precise=ip, scale_value=scale)
        if scale == 0.125:
            q, k, v = (call[x].copy() for x in ("query", "key", "value"))
            q[0, 0, 3, 5], q[0, 1, 7, 2], q[0, 0, 9, :] = np.inf, np.nan, -np.inf
            k[0, 0, 11, 3], v[0, 1, 20, 3], v[0, 0, 5, 0] = np.inf, np.nan, np.inf
            call.update(query=q, key=k, value=v)
        for tiling in (None, {"sInner": 64}):
            run_bitexact(call, tiling=tiling)


# --- 2. int8 paths -----------------------------------------------------------------------------------
def deq(kind: str, value: float) -> np.ndarray:
    """A per-tensor dequant scale as fp32 or as the uint64 Fixpipe word."""
    v = np.array([value], np.float32)
    return encode_deq_scale_u64(v) if kind == "u64" else v


def q2_tensors(form: str, dtype, n: int, d: int, offset: bool, rng, scale=(8.0, 30.0)):
    """quant_scale2 (and quant_offset2) of *form*: "pt" per tensor, or per channel "H", "ND", "11H",
    "1N1D", "11ND"; *dtype* fp32 or bf16."""
    shape = {"pt": (1,), "H": (n * d,), "ND": (n, d), "11H": (1, 1, n * d), "1N1D": (1, n, 1, d),
             "11ND": (1, 1, n, d)}[form]
    q2 = rng.uniform(*scale, shape).astype(np.float32).astype(dtype)
    off = rng.uniform(-3, 3, shape).astype(np.float32).astype(dtype) if offset else None
    return q2, off


# id: (in dtype, out dtype, layout, (N, N_kv), D, deq1/deq2 kinds, q2 form, q2 dtype, offset, mode, chip, tiles)
INT8_CASES = {
    "i8-fp16-deq1u64": (INT8, FP16, "BNSD", (2, 2), 64, ("u64", "f32"), None, None, False, 0, CHIPS[0], None),
    "i8-fp16-deq2u64-gqa-m2": (INT8, FP16, "BSH", (4, 2), 40, ("f32", "u64"), None, None, False, 2, CHIPS[1],
                               {"sInner": 64}),
    "i8-fp16-bothu64-m4": (INT8, FP16, "BSND", (2, 1), 32, ("u64", "u64"), None, None, False, 4, CHIPS[0], None),
    "i8-i8-pt-offset": (INT8, INT8, "BNSD", (2, 2), 64, ("f32", "f32"), "pt", F32, True, 0, CHIPS[0], None),
    "i8-i8-pt-nooffset-m3": (INT8, INT8, "BNSD_BSND", (4, 2), 32, ("u64", "f32"), "pt", F32, False, 3, CHIPS[1],
                             {"sInner": 64}),
    "i8-i8-ND-offset": (INT8, INT8, "BSND", (2, 2), 64, ("f32", "u64"), "ND", F32, True, 0, CHIPS[0], None),
    "i8-i8-H": (INT8, INT8, "BSH", (2, 1), 32, ("u64", "u64"), "H", F32, False, 1, CHIPS[0], {"sInner": 64}),
    "i8-i8-1N1D-gqa": (INT8, INT8, "BNSD", (4, 2), 64, ("f32", "f32"), "1N1D", F32, True, 2, CHIPS[1], None),
    "i8-i8-d40-pt": (INT8, INT8, "BSH", (2, 2), 40, ("f32", "f32"), "pt", F32, True, 0, CHIPS[0], None),
    "fp16-i8-pt-offset": (FP16, INT8, "BSH", (2, 2), 64, None, "pt", F32, True, 0, CHIPS[0], None),
    "fp16ip0-i8-pt-m1": (FP16, INT8, "BNSD", (4, 2), 64, None, "pt", F32, False, 1, CHIPS[1], {"sInner": 64}),
    "fp16-i8-1N1D": (FP16, INT8, "BNSD", (2, 2), 64, None, "1N1D", F32, True, 2, CHIPS[0], None),
    "fp16-i8-11ND-d32": (FP16, INT8, "BSND", (2, 1), 32, None, "11ND", F32, True, 0, CHIPS[0], None),
    "fp16-i8-d40-pt": (FP16, INT8, "BNSD_BSND", (2, 2), 40, None, "pt", F32, True, 0, CHIPS[1], None),
    "bf16-i8-pt-f32": (BF16, INT8, "BSND", (2, 2), 64, None, "pt", F32, False, 0, CHIPS[0], None),
    "bf16-i8-pt-bf16": (BF16, INT8, "BNSD", (4, 1), 64, None, "pt", BF16, True, 3, CHIPS[0], None),
    "bf16-i8-11H-bf16": (BF16, INT8, "BSH", (2, 2), 32, None, "11H", BF16, True, 0, CHIPS[1], {"sInner": 64}),
    "bf16-i8-ND-f32": (BF16, INT8, "BSND", (2, 2), 64, None, "ND", F32, False, 4, CHIPS[0], None),
}


def int8_call(spec, rng, s1=70, s2=100, q_scale=(8.0, 30.0)) -> dict:
    """The call of an INT8_CASES entry (B = 2); *q_scale*: the range of quant_scale2 values."""
    dt, out_dt, layout, (n, n_kv), d, deqs, q2_form, q2_dt, offset, mode, _, _ = spec
    call = qkv(rng, 2, n, n_kv, s1, s2, d, dt, layout)
    call.update(num_heads=n, num_key_value_heads=n_kv, input_layout=layout, out_dtype=out_dt, sparse_mode=mode,
                scale_value=0.125)
    if deqs is not None:  # int8 inputs: scores ~ +-1 after deq1; P = E * 100; deq2 undoes quant_scale1
        call.update(deq_scale1=deq(deqs[0], 0.01), quant_scale1=np.array([100.0], np.float32),
                    deq_scale2=deq(deqs[1], 0.01))
    if q2_form is not None:
        call["quant_scale2"], call["quant_offset2"] = q2_tensors(q2_form, q2_dt, n, d, offset, rng, q_scale)
    if mode == 1:
        call["atten_mask"] = user_mask("BS1S2", 2, s1, s2, np.bool_, rng)
    elif mode in (2, 3, 4):
        call["atten_mask"] = compressed(np.dtype(np.uint8))
        if mode == 4:
            call.update(pre_tokens=40, next_tokens=20)
    return call


@pytest.mark.parametrize("name", list(INT8_CASES),
                         ids=[f"{INT8_CASES[k][10]}-{k}-{INT8_CASES[k][2]}" for k in INT8_CASES])
def test_pfa_int8_bitexact_vs_golden(name):
    """int8 in / int8 out paths: fp32 and uint64 deq scales, per-tensor and per-channel quant_scale2 (+offset)."""
    spec = INT8_CASES[name]
    call = int8_call(spec, np.random.default_rng(len(name)))
    if name.startswith("fp16ip0"):
        call["inner_precise"] = 0
    res = run_bitexact(call, spec[10], spec[11])
    out = res.attention_out
    if out.dtype == INT8:  # the scales keep most outputs inside int8: the test is not all saturation
        assert np.mean(np.abs(out.astype(int)) == 127) < 0.2 and np.any(out != 0)


@pytest.mark.parametrize("name", ["i8-i8-pt-offset", "fp16-i8-1N1D"], ids=lambda k: f"{CHIPS[0]}-{k}-BNSD")
def test_pfa_int8_saturation_bitexact(name):
    """int8 output with a quant_scale2 large enough to saturate most elements: still bit-exact, in [-128, 127]."""
    call = int8_call(INT8_CASES[name], np.random.default_rng(5), q_scale=(2000.0, 6000.0))
    out = run_bitexact(call).attention_out
    assert np.mean(np.abs(out.astype(int)) >= 127) > 0.5


# --- 3. accuracy against float64 ---------------------------------------------------------------------
# (chip, precision, layout, heads, mask scenario, lens)
ACCURACY = [
    (CHIPS[0], "fp16ip1", "BNSD", "GQA", "m0none", "none"),
    (CHIPS[0], "fp16ip0", "BSH", "MHA", "m0S1S2", "bothB"),
    (CHIPS[1], "bf16", "BSND", "MQA", "m1B1S1S2", "longer"),
    (CHIPS[0], "fp16ip1", "BNSD_BSND", "MHA", "m2", "kvB"),
    (CHIPS[1], "fp16ip0", "BNSD", "GQA", "m3", "bothB"),
    (CHIPS[0], "bf16", "BSH", "GQA", "m4", "q1"),
    (CHIPS[0], "fp16ip1", "BSND", "MQA", "m4negpre", "none"),
    (CHIPS[1], "bf16", "BNSD", "MHA", "m4negnext", "bothB"),
    (CHIPS[0], "fp16ip0", "BNSD", "MHA", "m0B1S1S2neg", "longer"),
    (CHIPS[0], "bf16", "BNSD_BSND", "GQA", "m011S1S2negpre", "kv1"),
]


def consistent_mask(call: dict, mode: int) -> None:
    """Mode 0 with a mask: also drop what the tokens drop, so the kernel's tile skipping and the reference's
    band agree (the mask a user would pass with those tokens)."""
    m = call["atten_mask"]
    if mode != 0 or m is None:
        return
    s1, s2 = m.shape[-2:]
    diff = np.arange(s2)[None, :] - np.arange(s1)[:, None]
    band_drop = (diff < -call["pre_tokens"]) | (diff > call["next_tokens"])
    call["atten_mask"] = np.where(band_drop, np.ones((), m.dtype), m)


@pytest.mark.parametrize("case", ACCURACY, ids=["-".join(c) for c in ACCURACY])
def test_pfa_accuracy_vs_float64(case):
    """fp16/bf16 output within the flash-attention 2x rule and the double-thousandth rule of the float64
    formula; rows past actual_seq_lengths are +0 bits; fully dropped rows are 0."""
    chip, prec, layout, heads, mask, lens = case
    c = dict(chip=chip, prec=prec, layout=layout, heads=heads, mask=mask, mdtype="bool", lens=lens, d=40,
             sizes=(130, 150), tiles="sInner64")
    rng = np.random.default_rng(len(ACCURACY) + ACCURACY.index(case))
    call = grid_call(c, rng)
    dtype = PRECISIONS[prec][0]
    b, n, n_kv, s1, s2, d = 2, *HEADS[heads], 130, 150, 40
    call.update(qkv(rng, b, n, n_kv, s1, s2, d, dtype, layout, uniform=True), scale_value=0.5)
    consistent_mask(call, MASKS[mask][0])
    res = run_bitexact(call, chip, {"sInner": 64})
    prob, out = res.extra["problem"], res.attention_out
    data = {k: call[k] for k in ("query", "key", "value", "atten_mask")}
    ref = pfa_reference64(prob, **data)
    ok, det = fa_rule_ok(out, ref, pfa_lowp(prob, **data))
    assert ok, det
    ok, det = double_thousandth_ok(out, ref, dtype)
    assert ok, det
    o = out_to_bnsd(out, prob.out_layout, n)
    for bi in range(b):
        act_q = int(prob.actual_seq_lengths[bi])
        assert not bits(o[bi, :, act_q:]).any()
        dead = ~keep_of(prob, call["atten_mask"], bi).any(axis=-1)  # rows with no key
        assert np.all(o[bi, :, :act_q][:, dead] == 0)


def test_pfa_rows_past_lengths_and_zero_length_batches_are_zero():
    """actual_seq_lengths 0 / actual_seq_lengths_kv 0 give all-zero batches; rows past the length are +0."""
    rng = np.random.default_rng(3)
    call = qkv(rng, 3, 2, 2, 60, 70, 32, FP16, "BSH")
    call.update(num_heads=2, actual_seq_lengths=[0, 41, 60], actual_seq_lengths_kv=[70, 35, 0], input_layout="BSH")
    res = run_bitexact(call)
    o = out_to_bnsd(res.attention_out, "BSH", 2)
    assert not bits(o[0]).any() and not bits(o[2]).any() and not bits(o[1, :, 41:]).any()
    assert np.all(np.abs(o[1, :, :41].astype(np.float32)).sum(axis=-1) > 0)


def test_pfa_fully_masked_rows_are_zero():
    """Rows whose every key is dropped by the mask give 0 on both softmax paths (fp16 -65504, fp32 -FLT_MAX)."""
    rng = np.random.default_rng(4)
    for dtype, ip in ((FP16, 1), (FP16, 0), (BF16, 1)):
        call = qkv(rng, 1, 2, 2, 40, 50, 16, dtype, "BNSD")
        mask = rng.random((40, 50)) < 0.3
        mask[[0, 7, 39]] = True
        call.update(num_heads=2, input_layout="BNSD", atten_mask=mask, sparse_mode=1, inner_precise=ip)
        o = run_bitexact(call).attention_out
        assert np.all(o[:, :, [0, 7, 39]] == 0)
        assert np.all(np.abs(o[:, :, 1:7].astype(np.float32)).sum(axis=-1) > 0)


# --- 4. empty inputs, modes, tiling, trace -----------------------------------------------------------
@pytest.mark.parametrize("layout,shape", [("BSH", (2, 0, 64)), ("BNSD_BSND", (1, 2, 0, 16)), ("BNSD", (0, 2, 5, 16))],
                         ids=[f"{CHIPS[0]}-fp16-BSH-S0", f"{CHIPS[0]}-fp16-BNSD_BSND-S0", f"{CHIPS[0]}-fp16-BNSD-B0"])
def test_pfa_empty_query_gives_empty_output(layout, shape):
    """An empty query returns an empty output of the output layout's shape and does nothing."""
    q = np.zeros(shape, np.float16)
    kv_shape = (2, 10, 64) if layout == "BSH" else (max(shape[0], 1), 2, 10, 16)
    kv = np.ones(kv_shape, np.float16)
    res = prompt_flash_attention_v2(q, kv, kv, num_heads=2 if layout != "BSH" else 4, input_layout=layout)
    out = res.attention_out
    want = tuple(shape[i] for i in (0, 2, 1, 3)) if layout == "BNSD_BSND" else shape
    assert out.shape == want and out.size == 0 and out.dtype == FP16 and res.block_dim == 0


@pytest.mark.parametrize("dtype,out_dtype,layout", [(FP16, None, "BSH"), (BF16, None, "BNSD"),
                                                    (FP16, INT8, "BNSD_BSND")],
                         ids=[f"{CHIPS[0]}-fp16-BSH", f"{CHIPS[0]}-bf16-BNSD", f"{CHIPS[0]}-fp16int8-BNSD_BSND"])
def test_pfa_empty_kv_gives_zeros(dtype, out_dtype, layout):
    """S2 == 0: the output is all +0 of the query's shape (output layout)."""
    rng = np.random.default_rng(0)
    call = qkv(rng, 2, 2, 2, 9, 0, 16, dtype, layout)
    kw = dict(quant_scale2=np.array([2.0], np.float32)) if out_dtype == INT8 else {}
    res = prompt_flash_attention_v2(**call, num_heads=2, input_layout=layout, out_dtype=out_dtype, **kw)
    out = res.attention_out
    assert out.shape == res.extra["problem"].out_shape and out.size == 2 * 2 * 9 * 16
    assert out.dtype == (out_dtype or dtype) and not bits(out).any()


def test_pfa_empty_kv_with_int8_input_is_refused():
    """S2 == 0 with int8 inputs: AclnnError 561002 (the tiling refuses it)."""
    call = qkv(np.random.default_rng(0), 1, 2, 2, 9, 0, 32, INT8, "BNSD")
    with pytest.raises(AclnnError) as e:
        prompt_flash_attention_v2(**call, num_heads=2, input_layout="BNSD", deq_scale1=deq("f32", 1.0),
                                  quant_scale1=deq("f32", 1.0), deq_scale2=deq("f32", 1.0))
    assert e.value.status == ACLNN_ERR_INNER_TILING_ERROR


def as_specs(call: dict) -> dict:
    """The call with query/key/value and quant tensors as TensorSpecs (mask and lengths stay real)."""
    out = dict(call)
    for k in ("query", "key", "value") + QUANT:
        if isinstance(call.get(k), np.ndarray):
            out[k] = TensorSpec(call[k].shape, call[k].dtype)
    return out


def first_grid_case(**want) -> dict:
    """The first grid combination with the given factor values."""
    return next(c for c in GRID if all(c[k] == v for k, v in want.items()))


TIMING_GRID = [first_grid_case(chip=CHIPS[1], mask="m4negpre"), first_grid_case(chip=CHIPS[0], lens="longer"),
               first_grid_case(prec="bf16", mask="m0B1S1S2neg"), first_grid_case(tiles="sOuter16sInner64", heads="MQA")]
TIMING_INT8 = ["i8-i8-ND-offset", "bf16-i8-11H-bf16"]


@pytest.mark.parametrize("source", TIMING_GRID + TIMING_INT8,
                         ids=[grid_id(c) for c in TIMING_GRID] + [f"{INT8_CASES[k][10]}-{k}" for k in TIMING_INT8])
def test_pfa_full_and_timing_mode_identical(source):
    """Full mode and timing mode (data-free TensorSpec inputs) give identical cycles and trace DataFrames."""
    rng = np.random.default_rng(9)
    if isinstance(source, dict):
        call, chip, tiling = grid_call(source, rng), source["chip"], TILES[source["tiles"]]
    else:
        spec = INT8_CASES[source]
        call, chip, tiling = int8_call(spec, rng), spec[10], spec[11]
    full = prompt_flash_attention_v2(**call, chip=chip, tiling=tiling)
    timing = prompt_flash_attention_v2(**as_specs(call), chip=chip, tiling=tiling, mode="timing")
    assert timing.outputs is None and full.cycles == timing.cycles > 0
    assert full.time_us == timing.time_us and full.block_dim == timing.block_dim
    pd.testing.assert_frame_equal(full.trace.df, timing.trace.df)


def small_call(layout="BNSD", dtype=FP16, s1=150, s2=200, d=64, n=4, n_kv=2, b=2, seed=1, **kw) -> dict:
    """An N(0, 1) call of the given sizes, scale 0.125; *kw* adds or overrides parameters."""
    call = qkv(np.random.default_rng(seed), b, n, n_kv, s1, s2, d, dtype, layout)
    call.update(num_heads=n, num_key_value_heads=n_kv, input_layout=layout, scale_value=0.125)
    call.update(kw)
    return call


@pytest.mark.parametrize("tiling", [{"sOuter": 16, "sInner": 64}, {"sOuter": 32, "sInner": 128, "softmaxSOuter": 8},
                                    {"sInner": 192}, {"blockDim": 1}, {"blockDim": 3}, {"sOuter": 48},
                                    {"sOuter": 64, "sInner": 64, "softmaxSOuter": 64, "blockDim": 5}],
                         ids=lambda t: f"{CHIPS[0]}-fp16-BNSD-" + "-".join(f"{k}{v}" for k, v in t.items()))
def test_pfa_legal_tiling_override_bitexact(tiling):
    """A legal tiling override is used as given and the output still equals the golden of the same tiles."""
    call = small_call(sparse_mode=2, atten_mask=compressed(np.dtype(np.bool_)), inner_precise=0)
    res = run_bitexact(call, tiling=tiling)
    til = res.tiling
    for key, field in (("sOuter", "sOuterFactor"), ("sInner", "sInnerFactor"),
                       ("softmaxSOuter", "softmaxSOuterFactor"), ("blockDim", "blockDim")):
        if key in tiling:
            assert getattr(til, field) == tiling[key]
    assert res.block_dim == til.blockDim


@pytest.mark.parametrize("tiling", [{"sOuter": 20}, {"sOuter": 0}, {"sInner": 100}, {"sInner": -64},
                                    {"softmaxSOuter": 12}, {"sOuter": 16, "softmaxSOuter": 32}, {"sOuter": 256},
                                    {"sInner": 4096}, {"blockDim": 0}, {"blockDim": 25}, {"sOuter": 16.0},
                                    {"sBogus": 16}, {"sOuter": 128, "sInner": 2048}],
                         ids=lambda t: f"{CHIPS[0]}-fp16-BNSD-" + "-".join(f"{k}{v}" for k, v in t.items()))
def test_pfa_illegal_tiling_override_refused(tiling):
    """An illegal tiling override (grid, ratios, repeat limits, UB/L1 fit, core count, unknown key) is
    AclnnError 161002."""
    call = small_call(d=128, inner_precise=0)
    with pytest.raises(AclnnError) as e:
        prompt_flash_attention_v2(**call, tiling=tiling)
    assert e.value.status == ACLNN_ERR_PARAM_INVALID
    assert "tiling" in e.value.message


@pytest.mark.parametrize("mode,s1,s2,pre,nxt", [(3, 64, 2094, 0, 0), (4, 64, 2094, 2100, 2035)],
                         ids=[f"{CHIPS[0]}-fp16-BNSD-mode3", f"{CHIPS[0]}-fp16-BNSD-mode4"])
def test_pfa_compressed_mask_window_limit(mode, s1, s2, pre, nxt):
    """Modes 2/3/4 read softmaxSOuter x sInner windows of the 2048 x 2048 mask: sInner + softmaxSOuter = 2000
    (the most that fits UB) is bit-exact; 2064 is refused with 161002 (it used to read past the mask)."""
    call = small_call(b=1, n=1, n_kv=1, s1=s1, s2=s2, d=16, sparse_mode=mode, pre_tokens=pre, next_tokens=nxt,
                      atten_mask=compressed(np.dtype(np.bool_)))
    res = run_bitexact(call, tiling={"sOuter": 64, "sInner": 1984, "softmaxSOuter": 16})
    assert res.tiling.sInnerFactor + res.tiling.softmaxSOuterFactor == 2000
    with pytest.raises(AclnnError) as e:
        prompt_flash_attention_v2(**call, tiling={"sOuter": 64, "sInner": 2048})
    assert e.value.status == ACLNN_ERR_PARAM_INVALID


def test_pfa_trace_shows_all_units_on_several_cores():
    """The trace has CUBE, VECTOR, MTE2 and FIXP activity on every AI Core the split gives work, vector work
    where the split put it: 16 blocks of 128 rows over 48 vector-core workers form 17 NSNew cores (the first
    one empty, as CANN's greedy closes it before block 0), which the skip-core remap puts on sub-block 0
    of AI Cores 1..16."""
    res = prompt_flash_attention_v2(**small_call(layout="BSH", inner_precise=1))
    df = res.trace.df
    til = res.tiling
    assert til.splitCoreMode == "vector" and til.items == 16 and res.block_dim == 17
    busy = {c for c in range(til.blockDim) if til.workerItems[2 * c] or til.workerItems[2 * c + 1]}
    assert busy == set(range(1, 17))
    for pipe in ("CUBE", "VECTOR", "MTE2", "FIXP"):
        assert set(df[df["pipe"] == pipe]["core"]) == busy, pipe
    assert set(df[df["pipe"] == "CUBE"]["sub_core"]) == {"cubecore0"}
    assert set(df[df["pipe"] == "VECTOR"]["sub_core"]) == {"veccore0"}
    assert set(df[df["pipe"] == "FIXP"]["sub_core"]) == {"cubecore0"}
    assert (df["end_cycle"] >= df["start_cycle"]).all() and df["end_cycle"].max() <= res.cycles


def test_pfa_pse_shift_is_ignored():
    """pse_shift is forced to nullptr by V2: giving one changes nothing (bits equal to the call without it)."""
    call = small_call(s1=40, s2=50, d=32)
    a = prompt_flash_attention_v2(**call).attention_out
    b = prompt_flash_attention_v2(**call, pse_shift=np.ones((2, 4, 40, 50), np.float16)).attention_out
    assert np.array_equal(bits(a), bits(b))


# --- 5. aclnn facade ---------------------------------------------------------------------------------
def facade_args(call: dict, out: np.ndarray | None) -> list:
    """The seed's positional parameters of GetWorkspaceSize for a call dict."""
    g = call.get
    return [g("query"), g("key"), g("value"), g("pse_shift"), g("atten_mask"), g("actual_seq_lengths"),
            g("actual_seq_lengths_kv"), g("deq_scale1"), g("quant_scale1"), g("deq_scale2"), g("quant_scale2"),
            g("quant_offset2"), g("num_heads"), g("scale_value", 1.0), g("pre_tokens", INT_MAX), g("next_tokens", 0),
            g("input_layout", "BSH"), g("num_key_value_heads", 0), g("sparse_mode", 0), out]


@pytest.mark.parametrize("source", ["fp16", "i8-i8-ND-offset", "bf16-i8-pt-bf16"],
                         ids=[f"{CHIPS[0]}-fp16-BSND", f"{CHIPS[0]}-i8-i8-ND-offset-BSND", f"{CHIPS[0]}-bf16-i8-pt-BNSD"])
def test_pfa_aclnn_two_stages_write_in_place(source):
    """GetWorkspaceSize returns (0, ws > 0, executor); the second stage returns 0 and writes attentionOut in
    place, equal to the golden bit for bit."""
    if source == "fp16":
        call = small_call(layout="BSND", sparse_mode=3, atten_mask=compressed(np.dtype(np.int8)),
                          actual_seq_lengths=[150, 99])
    else:
        call = int8_call(INT8_CASES[source], np.random.default_rng(2))
    ref = prompt_flash_attention_v2(**call)
    out = np.zeros_like(ref.attention_out)
    bits(out)[...] = 0x55  # a fill the run must overwrite
    status, ws, ex = aclnnPromptFlashAttentionV2GetWorkspaceSize(*facade_args(call, out))
    assert status == 0 and ws == ref.workspace_size > 0 and ex is not None
    assert aclnnPromptFlashAttentionV2(np.empty(ws, np.uint8), ws, ex, None) == 0
    assert np.array_equal(bits(out), bits(golden_of(call, ref)))
    assert aclnnPromptFlashAttentionV2(np.empty(ws, np.uint8), ws, ex, None) != 0  # an executor runs once


@pytest.mark.parametrize("change,status", [
    (dict(num_heads=3), ACLNN_ERR_INNER_TILING_ERROR),  # N axis != num_heads: a tiling rule
    (dict(sparse_mode=2), None),  # mask required: a tiling error
    (dict(input_layout="SBH"), ACLNN_ERR_PARAM_INVALID),
    (dict(query=None), ACLNN_ERR_PARAM_NULLPTR),
    (dict(actual_seq_lengths=[151, 3]), None),
    (dict(value=np.zeros((2, 2, 200, 64), np.float32)), ACLNN_ERR_PARAM_INVALID),
], ids=[f"{CHIPS[0]}-fp16-BNSD-{w}" for w in ("num_heads3", "mode2_no_mask", "layoutSBH", "query_None",
                                              "lengths_past_S1", "value_fp32")])
def test_pfa_aclnn_bad_input_returns_status_and_writes_nothing(change, status):
    """Bad input: GetWorkspaceSize returns (status, 0, None) without raising, and attentionOut is untouched."""
    call = small_call(layout="BNSD") | change
    out = np.full((2, 4, 150, 64), 7.0, np.float16)
    got, ws, ex = aclnnPromptFlashAttentionV2GetWorkspaceSize(*facade_args(call, out))
    assert got in STATUS_NAMES and got != 0 and ws == 0 and ex is None
    if status is not None:
        assert got == status
    assert np.all(out == 7.0)


def test_pfa_aclnn_second_stage_refusals_write_nothing():
    """A too-small workspace, a missing executor or a mis-shaped attentionOut: a nonzero status, nothing
    written; a missing attentionOut is 161001 at the first stage."""
    call = small_call(layout="BNSD")
    assert aclnnPromptFlashAttentionV2GetWorkspaceSize(*facade_args(call, None))[0] == ACLNN_ERR_PARAM_NULLPTR
    out = np.full((2, 4, 150, 64), 7.0, np.float16)
    status, ws, ex = aclnnPromptFlashAttentionV2GetWorkspaceSize(*facade_args(call, out))
    assert status == 0
    assert aclnnPromptFlashAttentionV2(None, ws - 1, ex, None) == ACLNN_ERR_PARAM_INVALID
    assert aclnnPromptFlashAttentionV2(None, ws, None, None) == ACLNN_ERR_PARAM_NULLPTR
    assert np.all(out == 7.0)
    wrong = np.full((2, 150, 4, 64), 7.0, np.float16)
    status, ws, ex = aclnnPromptFlashAttentionV2GetWorkspaceSize(*facade_args(call, wrong))
    assert (status, ws, ex) == (ACLNN_ERR_PARAM_INVALID, 0, None)  # caught at stage one (issue 16)
    assert np.all(wrong == 7.0)


# --- 6. fuzz -------------------------------------------------------------------------------------------
TOKENS = (INT_MAX, 214748647, 0, 1, 5, 17, 40, -1, -3, -20, -(1 << 31), 1 << 40)
MUTATIONS = ("num_heads", "num_key_value_heads", "layout", "mask_shape", "mask_dtype", "sparse_mode", "tokens",
             "lens_value", "lens_length", "drop_quant", "add_quant", "quant_dtype", "q2_size", "head_dim",
             "inner_precise", "key_dtype", "out_dtype", "kv_empty", "query_empty", "pse_shift")


@st.composite
def fuzz_calls(draw) -> dict:
    """A tiny, mostly valid call (dtype, layout, B, N/N_kv, S1/S2, D, sparse mode and mask, tokens, lengths,
    quantisation, inner_precise, scale), then 0-2 random mutations that are often invalid."""
    dtype = draw(st.sampled_from([FP16, FP16, BF16, INT8]))
    layout = draw(st.sampled_from(LAYOUTS))
    b, n = draw(st.integers(1, 3)), draw(st.sampled_from([1, 2, 4]))
    n_kv = draw(st.sampled_from([k for k in (1, 2, 4) if n % k == 0]))
    s1, s2 = draw(st.integers(1, 40)), draw(st.integers(1, 40))
    d = draw(st.sampled_from([8, 16, 24, 32, 40, 64]))
    mode = draw(st.sampled_from([0, 0, 1, 2, 3, 4]))
    mdt = np.dtype(draw(st.sampled_from([np.bool_, np.uint8, np.int8])))
    int8_out = draw(st.integers(0, 3)) == 0
    mutations = draw(st.lists(st.sampled_from(MUTATIONS), max_size=2))
    event("valid-shaped" if not mutations else "mutated")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    layout = "SBH" if "layout" in mutations else layout
    kv_dtype = draw(st.sampled_from([FP16, BF16, INT8, F32])) if "key_dtype" in mutations else dtype
    s1 = 0 if "query_empty" in mutations else s1
    s2 = 0 if "kv_empty" in mutations else s2
    d_kv = d + 8 if "head_dim" in mutations else d

    def tensor(heads, s, dd, dt):
        x = rng.integers(-8, 9, (b, heads, s, dd)) if dt == INT8 else rng.standard_normal((b, heads, s, dd))
        return to_layout(x.astype(dt), layout if layout in LAYOUTS else "BSH")
    call = dict(query=tensor(n, s1, d, dtype), key=tensor(n_kv, s2, d_kv, kv_dtype),
                value=tensor(n_kv, s2, d_kv, kv_dtype))
    if mode in (2, 3, 4):
        call["atten_mask"] = compressed(mdt, draw(st.sampled_from([(2048, 2048), (1, 2048, 2048)])))
    elif mode == 1 or draw(st.booleans()):
        shape = draw(st.sampled_from([(s1, s2), (b, s1, s2), (1, 1, s1, s2), (b, 1, s1 + 2, s2 + 5)]))
        call["atten_mask"] = drop_values(rng.random(shape) < 0.3, mdt, rng)
    if "mask_shape" in mutations:
        shape = draw(st.sampled_from([(max(s1 - 1, 0), s2), (3, 2048), (1024, 1024), (b + 1, s1, s2), (s2,)]))
        call["atten_mask"] = np.zeros(shape, mdt)
    if "mask_dtype" in mutations and call.get("atten_mask") is not None:
        call["atten_mask"] = call["atten_mask"].astype(np.float16)

    def lengths(full):
        if not draw(st.booleans()):
            return None
        count = draw(st.sampled_from([1, b, b + 1]))
        hi = full + 2 if "lens_value" in mutations else full
        lo = -2 if "lens_value" in mutations else 0
        vals = [draw(st.integers(lo, hi)) for _ in range(count)]
        return vals[:max(1, b - 1)] if "lens_length" in mutations and b > 2 else vals
    pre, nxt = INT_MAX, 0
    if mode in (0, 4) or "tokens" in mutations:
        pre, nxt = draw(st.sampled_from(TOKENS)), draw(st.sampled_from(TOKENS))
    out_dtype = INT8 if int8_out else (FP16 if dtype == INT8 else None)
    if "out_dtype" in mutations:
        out_dtype = draw(st.sampled_from([FP16, BF16, F32]))
    call.update(actual_seq_lengths=lengths(s1), actual_seq_lengths_kv=lengths(s2),
                num_heads=n + 1 if "num_heads" in mutations else n,
                num_key_value_heads=draw(st.sampled_from([3, -1, 2 * n])) if "num_key_value_heads" in mutations
                else draw(st.sampled_from([0, n_kv])) if n_kv == n else n_kv,
                input_layout=layout, sparse_mode=draw(st.sampled_from([5, -1, 9])) if "sparse_mode" in mutations
                else mode, scale_value=draw(st.sampled_from([0.125, 1.0, -0.7, 0.0, 3.0])), pre_tokens=pre,
                next_tokens=nxt, out_dtype=out_dtype,
                inner_precise=5 if "inner_precise" in mutations else draw(st.sampled_from([0, 1, 2, 3])))
    if dtype == INT8:  # int8 inputs: deq1, q1, deq2 required
        call.update(deq_scale1=deq(draw(st.sampled_from(["f32", "u64"])), 0.02),
                    quant_scale1=deq("f32", 60.0), deq_scale2=deq(draw(st.sampled_from(["f32", "u64"])), 1 / 60))
    if int8_out:
        form = draw(st.sampled_from(["pt", "pt", "H", "ND", "11ND"])) if d % 32 == 0 else "pt"
        q2_dt = BF16 if dtype == BF16 and draw(st.booleans()) else F32
        call["quant_scale2"], call["quant_offset2"] = q2_tensors(form, q2_dt, n, d, draw(st.booleans()), rng)
    if "drop_quant" in mutations:
        call[draw(st.sampled_from(QUANT))] = None
    if "add_quant" in mutations:
        call[draw(st.sampled_from(QUANT))] = deq("f32", 0.5)
    if "quant_dtype" in mutations:
        name = draw(st.sampled_from(QUANT))
        call[name] = np.ones((1,), draw(st.sampled_from([FP16, BF16, np.int32])))
    if "q2_size" in mutations:
        call["quant_scale2"] = np.ones((draw(st.sampled_from([2, n * d + 1, n * d])),), np.float32)
    if "pse_shift" in mutations:
        call["pse_shift"] = np.zeros((b, n, max(s1, 1), max(s2, 1)), FP16 if dtype != BF16 else BF16)
    return call


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fuzz_calls())
def test_pfa_fuzz_result_or_aclnn_error(call):
    """Random (valid and invalid) tiny calls on Ascend910B2: an OpResult equal to the golden bit for bit, or
    an AclnnError with a known status; never another exception."""
    try:
        res = prompt_flash_attention_v2(**call, chip="Ascend910B2")
    except AclnnError as e:
        assert e.status in STATUS_NAMES and e.message
        event(f"AclnnError {e.status}")
        return
    assert isinstance(res, OpResult)
    event("empty" if res.tiling is None else f"computed {np.dtype(call['query'].dtype).name}->{res.attention_out.dtype.name}")
    prob = res.extra["problem"]
    out = res.attention_out
    assert out.shape == prob.out_shape and out.dtype == prob.out_dtype
    if prob.query_empty:
        assert out.size == 0
        return
    assert np.array_equal(bits(out), bits(golden_of(call, res)))
