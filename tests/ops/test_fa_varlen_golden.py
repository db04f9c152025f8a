"""FlashAttentionVarLenScore: the simulator against the independent golden (docs/fa_varlen.md), bit for bit,
over a pairwise grid; the golden against the float64 formula (NUMERICS.md rules); the golden's item
ranges against the tiling; literal per-slice reads; Inf/NaN inputs; the golden's building blocks.

The grid covers every pair of: dtype x sparse mode (none, 0, 1, 2, 3, 4, 6, 7, 8, with tokens and
prefix) x pse (none / full / alibi) x dropout (none / keep_prob 1 / 0.8 with a random mask) x heads
(MHA / GQA / MQA) x batch shapes (plain, zero-length batches, Skv > 1024 for several tiles, Sq > Skv)
x D (64, 128, 40, 17) x chip (Ascend910B2 / B4) x inner_precise (0 / 2) x tiling overrides x softmax
layout, minus the combinations the operator refuses.
"""
from __future__ import annotations

import functools
import itertools
import random

import ml_dtypes
import numpy as np
import pytest

from npusim.dtypes import cast
from ops.common.accuracy import double_thousandth_ok, fa_rule_ok
from ops.flash_attention_var_len_score.api import flash_attention_var_len_score as fa
from ops.flash_attention_var_len_score.golden import (NEG, POS, fa_var_len_golden, mmad, row_max, row_sum,
                                                      s2_range, sparse_plan)
from ops.flash_attention_var_len_score.reference import fa_var_len_reference

DTYPES = {"fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "fp32": np.dtype(np.float32)}
BIG = 2147483647
TRIU = np.triu(np.ones((2048, 2048), dtype=np.bool_), k=1)
PREFIX_MASK = np.concatenate([TRIU, np.concatenate([np.zeros((1024, 1024), np.bool_),
                                                    np.ones((1024, 1024), np.bool_)], axis=1)])
#: (sq, skv) per shape; EQUAL holds the Sq == Skv variants (alibi, sparse 8 with pse). "plain" has every
#: Skv % 8 == 0 (drop mask bit mode), the others byte mode.
SHAPES = {"plain": ([45, 96], [72, 128]), "zero": ([45, 0, 0, 96], [70, 9, 0, 130]),
          "long": ([50, 20], [1100, 40]), "qlong": ([96, 45], [70, 30])}
EQUAL = {"plain": [45, 96], "long": [1030, 20], "qlong": [96, 45]}
HEADS = {"mha": (2, 2), "gqa": (4, 2), "mqa": (3, 1)}
TILINGS = {"default": None, "s1_16": {"s1BaseSize": 16}, "e1024": {"vec1Elems": 1024}}

FACTORS = {
    "dtype": list(DTYPES),
    "mode": ["none", 0, 1, 2, 3, 4, 6, 7, 8],
    "pse": ["none", "full", "alibi"],
    "drop": ["off", "keep1", "keep0.8"],
    "heads": list(HEADS),
    "shape": list(SHAPES),
    "d": [64, 128, 40, 17],
    "chip": ["Ascend910B2", "Ascend910B4"],
    "precise": [0, 2],
    "tiling": list(TILINGS),
    "layout": ["TND", "per_batch"],
}


def _valid(c: dict) -> bool:
    """The operator's refusals (validate.py): pse with a zero-length batch or sparse 7; alibi only with
    a causal mask (modes 0, 2, 3); sparse 3 and 7 need Sq <= Skv."""
    if c["pse"] != "none" and (c["shape"] == "zero" or c["mode"] == 7):
        return False
    if c["pse"] == "alibi" and c["mode"] not in (0, 2, 3):
        return False
    return not (c["mode"] in (3, 7) and c["shape"] == "qlong")


def _kernel_bug(c: dict) -> bool:
    """Sparse 6 with vec1Elems 1024 (a kernel bug, since fixed): kept out of the generated grid, whose
    covering shape the path checks below rely on; test_fa_varlen_bitexact_prefix_small_e covers it."""
    return c["mode"] == 6 and c["tiling"] == "e1024"


def pairwise(factors: dict, valid, seed: int = 7, tries: int = 400) -> list[dict]:
    """A deterministic greedy covering array: every valid pair of factor values is in some case."""
    names = list(factors)
    rng = random.Random(seed)

    def pairs(c):
        return {((a, c[a]), (b, c[b])) for a, b in itertools.combinations(names, 2)}

    todo = {((a, va), (b, vb)) for a, b in itertools.combinations(names, 2)
            for va in factors[a] for vb in factors[b]}
    cases = []
    while todo:
        (a, va), (b, vb) = target = min(todo, key=repr)
        best, gain = None, 0
        for _ in range(tries):
            c = {n: rng.choice(factors[n]) for n in names}
            c[a], c[b] = va, vb
            if valid(c) and len(pairs(c) & todo) > gain:
                best, gain = c, len(pairs(c) & todo)
        if best is None:
            todo.discard(target)  # the operator refuses this pair
            continue
        cases.append(best)
        todo -= pairs(best)
    return cases


CASES = pairwise(FACTORS, lambda c: _valid(c) and not _kernel_bug(c))


def case_id(i: int) -> str:
    c = CASES[i]
    return (f"{i:02d}-{c['chip']}-{c['dtype']}-mode{c['mode']}-pse_{c['pse']}-{c['drop']}-{c['heads']}-"
            f"{c['shape']}-d{c['d']}-ip{c['precise']}-{c['tiling']}-{c['layout']}")


# --- inputs of one case --------------------------------------------------------------------------
def _tokens(c: dict, sq: list, skv: list, rng) -> dict:
    """atten_mask, sparse_mode, tokens and prefix of a case, legal for its shapes (validate.py rules)."""
    mode = c["mode"]
    if mode == "none":
        return {}
    sq_a, skv_a = np.array(sq), np.array(skv)
    ms, mk = int(sq_a.max()), int(skv_a.max())
    nonempty = (sq_a > 0) & (skv_a > 0)
    kw = dict(sparse_mode=mode, atten_mask=TRIU, pre_tokens=BIG, next_tokens=BIG)
    if mode == 0:
        need = int((sq_a - skv_a)[nonempty].max())
        variants = [(ms, 0), (max(need, 0) + 20, 30), (BIG, BIG)]
        if need <= -5:
            variants.append((-5, 40))
        pre, nxt = variants[0] if c["pse"] == "alibi" else variants[rng.integers(len(variants))]
        r, col = np.meshgrid(np.arange(ms), np.arange(mk), indexing="ij")
        mask = (col - r > nxt) | (r - col > pre)
        if pre == BIG:  # full band: random holes, column 0 kept (no fully masked row)
            mask = rng.uniform(size=mask.shape) < 0.2
            mask[:, 0] = False
        kw.update(atten_mask=mask, pre_tokens=pre, next_tokens=nxt)
    elif mode == 1:
        mask = (rng.uniform(size=(ms, mk)) < 0.3).astype(np.uint8)
        mask[:, 0] = 0
        kw.update(atten_mask=mask)
    elif mode == 4:
        need = int((sq_a - skv_a)[nonempty].max())
        kw.update(pre_tokens=40, next_tokens=-10 if need <= -10 and rng.integers(2) else max(10, need))
    elif mode == 6:
        lo = np.maximum(skv_a - sq_a, 0)
        prefix = np.where(sq_a > skv_a, 0, lo + (skv_a - lo) // 2)
        kw.update(atten_mask=PREFIX_MASK, prefix=prefix.tolist())
    elif mode == 7:
        band = int(np.flatnonzero(sq_a > 0)[-1])
        kw.update(pre_tokens=int(skv_a[band]) + 5, next_tokens=max(-7, int(sq_a[band] - skv_a[band])))
    elif mode == 8:
        band = int(np.flatnonzero(sq_a > 0)[0])
        kw.update(pre_tokens=int(skv_a[band]) + 3, next_tokens=max(int(sq_a[band] - skv_a[band]), 0) + 11)
    return kw


def build(c: dict, seed: int):
    """(q, k, v, keyword arguments of the operator call) for case *c*."""
    rng = np.random.default_rng(seed)
    dt = DTYPES[c["dtype"]]
    equal = c["pse"] == "alibi" or (c["mode"] == 8 and c["pse"] != "none")
    sq, skv = (EQUAL[c["shape"]], EQUAL[c["shape"]]) if equal else SHAPES[c["shape"]]
    n1, n2 = HEADS[c["heads"]]
    d = c["d"]
    q = rng.uniform(-1, 1, (sum(sq), n1, d)).astype(dt)
    k = rng.uniform(-1, 1, (sum(skv), n2, d)).astype(dt)
    v = rng.uniform(-1, 1, (sum(skv), n2, d)).astype(dt)
    kw = dict(actual_seq_qlen=np.cumsum(sq).tolist(), actual_seq_kvlen=np.cumsum(skv).tolist(), head_num=n1,
              scale_value=float(d) ** -0.5, inner_precise=c["precise"], chip=c["chip"],
              softmax_layout=c["layout"], tiling=TILINGS[c["tiling"]])
    kw.update(_tokens(c, sq, skv, rng))
    ss = sum(a * b for a, b in zip(sq, skv))
    if c["pse"] == "full":
        kw["real_shift"] = rng.uniform(-1, 1, n1 * ss).astype(dt)
    elif c["pse"] == "alibi":  # last 1024 rows of -slope * |j - i|: A(d) = -slope * |d - (maxSkv - 1024)|
        mk = max(skv)
        diag = np.arange(mk)[None, :] - np.arange(1024)[:, None] - (mk - 1024)
        slopes = rng.uniform(0.05, 0.5, (len(sq) if rng.integers(2) else 1, n1))
        kw["real_shift"] = (-slopes[:, :, None, None] * np.abs(diag)).astype(dt)
    if c["drop"] != "off":
        keep_prob = 1.0 if c["drop"] == "keep1" else 0.8
        bits = rng.uniform(size=n1 * ss) < (0.9 if keep_prob == 1.0 else keep_prob)
        kw.update(drop_mask=np.packbits(bits, bitorder="little"), keep_prob=keep_prob)
    return q, k, v, kw


@functools.lru_cache(maxsize=None)
def run_case(i: int):
    """(q, k, v, kw, simulator result) of grid case i."""
    q, k, v, kw = build(CASES[i], seed=1000 + i)
    return q, k, v, kw, fa(q, k, v, **kw)


def golden_of(res, q, k, v, kw) -> dict:
    """The golden for a simulator result: same problem, tiling parameters from res.tiling."""
    til = res.tiling
    return fa_var_len_golden(res.extra["problem"], q, k, v, real_shift=kw.get("real_shift"),
                             drop_mask=kw.get("drop_mask"), atten_mask=kw.get("atten_mask"),
                             s1_base=til.s1BaseSize, tile_width=til.s2BaseNratioSize, vec1_elems=til.vec1Elems,
                             template=til.template,
                             softmax_layout=res.extra["softmax_layout"])


def bits(x) -> np.ndarray:
    x = np.ascontiguousarray(x)
    return x.view({2: np.uint16, 4: np.uint32}[x.dtype.itemsize])


def assert_bitexact(res, gold) -> None:
    for name in ("attention_out", "softmax_max", "softmax_sum"):
        got, want = bits(res.outputs[name]), bits(gold[name])
        bad = np.argwhere(got != want)
        assert bad.size == 0, (f"{name}: {len(bad)} of {got.size} differ, first at {tuple(bad[0])}: "
                               f"sim {got[tuple(bad[0])]:#x} golden {want[tuple(bad[0])]:#x}")


# --- the grid ----------------------------------------------------------------------------------------
def test_fa_varlen_grid_is_pairwise():
    """Every pair of factor values the operator accepts appears in some grid case."""
    names = list(FACTORS)
    seen = {((a, c[a]), (b, c[b])) for c in CASES for a, b in itertools.combinations(names, 2)}
    ruled = ("pse", "shape", "mode")  # with "tiling", the only factors the filters read
    for a, b in itertools.combinations(names, 2):
        for va, vb in itertools.product(FACTORS[a], FACTORS[b]):
            legal = any(_valid(c) and not _kernel_bug(c) for c in (
                {**dict(zip(ruled, r)), "tiling": t, a: va, b: vb}
                for r in itertools.product(*(FACTORS[n] for n in ruled)) for t in FACTORS["tiling"]))
            assert ((a, va), (b, vb)) in seen or not legal, (a, va, b, vb)
    assert 20 <= len(CASES) <= 80


@pytest.mark.parametrize("i", range(len(CASES)), ids=case_id)
def test_fa_varlen_bitexact_vs_golden(i):
    """attention_out, softmax_max and softmax_sum of the simulator equal the golden bit for bit."""
    q, k, v, kw, res = run_case(i)
    assert_bitexact(res, golden_of(res, q, k, v, kw))


@pytest.mark.parametrize("i", range(len(CASES)), ids=case_id)
def test_fa_varlen_item_ranges_match_tiling(i):
    """The golden's sparse type and item s2 ranges (doc table) equal the tiling's."""
    *_, res = run_case(i)
    til, p = res.tiling, res.extra["problem"]
    plan = sparse_plan(p)
    assert til.sparseType == plan.kind
    for b, s1o, start, end in zip(til.itemB, til.itemS1o, til.itemS2Start, til.itemS2End):
        assert (start, end) == s2_range(p, plan, b, s1o, til.s1BaseSize), (b, s1o)
    want = sum(p.N1 * -(-int(sq) // til.s1BaseSize) for sq in p.seq_q)
    assert len(til.itemB) == want


def _softmax_to_tnd(x: np.ndarray, p, layout: str) -> np.ndarray:
    """[T1, N1] view of a softmax output in *layout* (element 0 of the 8 copies)."""
    if layout == "TND":
        return x[..., 0]
    flat, out = x.reshape(-1, 8)[:, 0], np.zeros((p.T1, p.N1), np.float32)
    for b in range(p.B):
        cq, sq = int(p.cu_seq_q[b]), int(p.seq_q[b])
        out[cq:cq + sq] = flat[cq * p.N1:(cq + sq) * p.N1].reshape(p.N1, sq).T
    return out


@pytest.mark.parametrize("i", range(len(CASES)), ids=case_id)
def test_fa_varlen_golden_vs_float64(i):
    """The golden meets the flash-attention 2x rule and the double-thousandth rule against float64 (its
    input-dtype run as out_lowp); softmax_max/sum match the float64 row max/sum; fully masked rows
    give +0, -FLT_MAX, +FLT_MAX."""
    q, k, v, kw, res = run_case(i)
    p, layout = res.extra["problem"], res.extra["softmax_layout"]
    gold = golden_of(res, q, k, v, kw)
    args = dict(real_shift=kw.get("real_shift"), drop_mask=kw.get("drop_mask"), atten_mask=kw.get("atten_mask"))
    ref = fa_var_len_reference(p, q, k, v, **args)
    low = fa_var_len_reference(p, q, k, v, dtype=p.dtype, **args)
    out = gold["attention_out"]
    ok, info = fa_rule_ok(out, ref["attention_out"], low["attention_out"])
    assert ok, info
    ok, info = double_thousandth_ok(out, ref["attention_out"], p.dtype)
    assert ok, info
    mx, sm = (_softmax_to_tnd(gold[n], p, layout) for n in ("softmax_max", "softmax_sum"))
    alive = np.isfinite(ref["softmax_max"])
    np.testing.assert_allclose(mx[alive], ref["softmax_max"][alive], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sm[alive], ref["softmax_sum"][alive], rtol=2e-5)
    if (~alive).any():
        assert p.invalid_row_calc
        assert (bits(out[~alive]) == 0).all() and (mx[~alive] == NEG).all() and (sm[~alive] == POS).all()


def test_fa_varlen_grid_covers_paths():
    """The grid reaches fully masked rows, several tiles per item, several items per batch, both drop-mask
    modes (bits, bytes) and every sparse type."""
    invalid = multi_tile = multi_item = 0
    drop_modes, kinds = set(), set()
    for i in range(len(CASES)):
        *_, res = run_case(i)
        p, til = res.extra["problem"], res.tiling
        invalid += p.has_invalid_rows
        multi_tile += any(e - s > til.s2BaseNratioSize for s, e in zip(til.itemS2Start, til.itemS2End))
        multi_item += any(s1o > 0 for s1o in til.itemS1o)
        if p.dropout:
            drop_modes.add(til.dropMaskBitMode)
        kinds.add(til.sparseType)
    assert invalid >= 2 and multi_tile >= 4 and multi_item >= 4
    assert drop_modes == {True, False}
    assert kinds == {"ALL", "CAUSAL", "RIGHT_DOWN_CAUSAL", "BAND", "BAND_COMPRESS", "PREFIX",
                     "RIGHT_DOWN_CAUSAL_BAND", "BAND_LEFT_UP_CAUSAL"}


# --- literal reads, special values, ties ---------------------------------------------------------------
def _call(sq, skv, *, dtype=np.float16, n1=2, n2=1, d=64, seed=0, data=None, **kw):
    """Simulator and golden of one explicit call; *data* overrides (q, k, v)."""
    rng = np.random.default_rng(seed)
    q, k, v = data if data is not None else (
        rng.uniform(-1, 1, (sum(sq), n1, d)).astype(dtype), rng.uniform(-1, 1, (sum(skv), n2, d)).astype(dtype),
        rng.uniform(-1, 1, (sum(skv), n2, d)).astype(dtype))
    kw = dict(actual_seq_qlen=np.cumsum(sq).tolist(), actual_seq_kvlen=np.cumsum(skv).tolist(),
              head_num=q.shape[1], **kw)
    res = fa(q, k, v, **kw)
    return res, golden_of(res, q, k, v, kw)


LITERAL = {  # (sq, skv, sparse_mode, tokens/prefix, tiling)
    "causal_e1024": ([45, 96], [72, 128], 2, {}, {"vec1Elems": 1024}),
    "rd_causal_tiles": ([45, 96], [72, 1100], 3, {}, {"s1BaseSize": 16, "vec1Elems": 2048}),
    "band_tiles": ([45, 96], [72, 1100], 4, dict(pre_tokens=40, next_tokens=10), {"vec1Elems": 4096}),
    # AIV0's last slice of an item is short (8 of 16 rows) and lies left of the second tile (delta < -8):
    # ComputeOffsetForCausal clips -delta to the nominal sliceRows, not to the slice's rows
    "band_short_slice": ([1000], [3000], 4, dict(pre_tokens=400, next_tokens=390),
                         {"s1BaseSize": 240, "vec1Elems": 1024}),
    "mode7": ([45, 96], [72, 128], 7, dict(pre_tokens=140, next_tokens=-5), {"s1BaseSize": 32}),
    "mode8": ([45, 96], [72, 128], 8, dict(pre_tokens=140, next_tokens=20), {"vec1Elems": 2048}),
    "prefix_tiles": ([45, 96], [72, 1100], 6, dict(prefix=[40, 1050]), {"s1BaseSize": 16, "vec1Elems": 2048}),
}


@pytest.mark.parametrize("name", list(LITERAL))
def test_fa_varlen_bitexact_random_compressed_mask(name):
    """A random (non-triangular) compressed mask: the per-slice window reads of doc step 4 (offsets,
    skips, the prefix rectangle) are taken literally by both sides."""
    sq, skv, mode, tok, til = LITERAL[name]
    rng = np.random.default_rng(5)
    mask = rng.uniform(size=(3072 if mode == 6 else 2048, 2048)) < 0.5
    res, gold = _call(sq, skv, atten_mask=mask, sparse_mode=mode, tiling=til, **tok)
    assert_bitexact(res, gold)


@pytest.mark.parametrize("pre,nxt,til", [(130, 300, None), (-130, 400, {"s1BaseSize": 16}), (700, 200, None),
                                         (BIG, BIG, {"vec1Elems": 1024}), (300, 0, {"s1BaseSize": 32})],
                         ids=["band_pos", "band_neg_pre", "band_wide", "all_holes", "causal"])
def test_fa_varlen_bitexact_mode0_user_mask(pre, nxt, til):
    """Sparse 0 with a user mask: the band (C-style alignUp of the tokens, negative pre), ALL and CAUSAL
    shortcuts, several tiles; random holes inside the band are read from the user's mask."""
    rng = np.random.default_rng(9)
    sq, skv = [300, 45], [1100, 200]
    r, c = np.meshgrid(np.arange(300), np.arange(1100), indexing="ij")
    mask = (c - r > nxt) | (r - c > pre) | (rng.uniform(size=r.shape) < 0.2)
    mask[np.arange(300), np.maximum(np.arange(300) - min(pre, 300), 0)] = False  # no fully masked row
    res, gold = _call(sq, skv, atten_mask=mask, sparse_mode=0, pre_tokens=pre, next_tokens=nxt, tiling=til)
    assert res.tiling.sparseType == sparse_plan(res.extra["problem"]).kind
    assert_bitexact(res, gold)


@pytest.mark.parametrize("sq,mode,til", [([45, 96], 2, None), ([45, 96], 0, {"vec1Elems": 1024}),
                                         ([1030, 20], 3, None), ([1030, 20], 2, {"s1BaseSize": 64, "vec1Elems": 4096})],
                         ids=["thr_neg-mode2", "thr_neg-mode0-e1024", "thr_pos-mode3", "thr_pos-mode2-s1_64"])
def test_fa_varlen_bitexact_random_alibi(sq, mode, til):
    """Random (not diagonal-constant) alibi data: the per-slice (m0, k0) offsets of doc step 2 are read
    literally (thr = maxSkv - 1024 negative and positive), with [B, ...] and [1, ...] pse."""
    rng = np.random.default_rng(6)
    ms = max(sq)
    mask = TRIU if mode else np.triu(np.ones((ms, ms), np.bool_), 1)
    for bp in (len(sq), 1):
        pse = rng.uniform(-1, 1, (bp, 2, 1024, ms)).astype(np.float16)
        res, gold = _call(sq, sq, real_shift=pse, atten_mask=mask, sparse_mode=mode, pre_tokens=ms, next_tokens=0,
                          tiling=til, seed=bp)
        assert_bitexact(res, gold)


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=list(DTYPES))
@pytest.mark.parametrize("scale,mode", [(0.125, None), (1e30, None), (0.0, None), (-3.0, 3), (1e38, 2)],
                         ids=["plain", "overflow", "zero_scale", "negative_scale", "overflow_causal"])
def test_fa_varlen_bitexact_inf_nan(dtype, scale, mode):
    """Inf/NaN inputs, +-0 rows and extreme scales: IEEE propagation and the canonical NaN of every step."""
    rng = np.random.default_rng(7)
    sq, skv = [40, 70], [60, 1100]
    q, k, v = (rng.uniform(-1, 1, (sum(s), n, 64)).astype(dtype) for s, n in ((sq, 2), (skv, 1), (skv, 1)))
    q[3, 0, 5], q[50, 1, :], k[7, 0, 3], v[20, 0, 1], v[1100, 0, :] = np.nan, np.inf, -np.inf, np.inf, np.nan
    q[60, 0, :], q[61, 0, :] = 0.0, -0.0
    extra = {} if mode is None else dict(atten_mask=TRIU, sparse_mode=mode, inner_precise=2)
    res, gold = _call(sq, skv, data=(q, k, v), scale_value=scale, **extra)
    assert_bitexact(res, gold)
    assert np.isnan(res.attention_out.astype(np.float32)).any()


@pytest.mark.parametrize("dtype,ulp", [(np.dtype(np.float16), 2.0 ** -10), (DTYPES["bf16"], 2.0 ** -7)],
                         ids=["fp16", "bf16"])
def test_fa_varlen_output_cast_ties_away(dtype, ulp):
    """O / l = (v0 + v1) / 2 halfway between two IN values rounds away from zero (CAST_ROUND, doc step
    15), where round-to-nearest-even would go to the even neighbour."""
    q = np.zeros((2, 1, 16), dtype)
    v = np.zeros((2, 1, 16), np.float32)
    v[:, 0, 0] = [1.0, 1.0 + ulp]
    v[:, 0, 1] = [-1.0, -1.0 - ulp]
    v[:, 0, 2] = [1.0 + 2 * ulp, 1.0 + 3 * ulp]  # tie between an odd and an even neighbour the other way
    v = v.astype(dtype)
    res, gold = _call([2], [2], data=(q, np.zeros_like(v), v))
    assert_bitexact(res, gold)
    out = res.attention_out.astype(np.float64)[:, 0, :3]
    assert (out == [1.0 + ulp, -1.0 - ulp, 1.0 + 3 * ulp]).all()
    rne = cast(np.float32(1.0 + ulp / 2), dtype, "rint").astype(np.float64)
    assert rne == 1.0  # the cases are real ties


@pytest.mark.parametrize("skv", [60, 300, 1100])
def test_fa_varlen_bitexact_prefix_small_e(skv):
    """Sparse 6 with vec1Elems = 1024 (the mask conversion in chunks the buffer holds): sim vs golden."""
    res, gold = _call([50], [skv], atten_mask=PREFIX_MASK, sparse_mode=6, prefix=[skv - 25],
                      tiling={"vec1Elems": 1024})
    assert_bitexact(res, gold)


# --- building blocks of the golden -------------------------------------------------------------------
def test_golden_mmad_order():
    """mmad: exact on small integers (any order), and on data where order matters it equals the
    scalar restatement of docs/numerics_cube.md (pair tree per 16/8-wide fractal, ascending)."""
    rng = np.random.default_rng(8)
    a, bt = rng.integers(-8, 8, (3, 5, 37)).astype(np.float32), rng.integers(-8, 8, (3, 4, 37)).astype(np.float32)
    assert (mmad(a, bt, 16) == np.einsum("hik,hjk->hij", a, bt)).all()
    a = (rng.uniform(-1, 1, (2, 37)) * 10.0 ** rng.integers(-6, 6, (2, 37))).astype(np.float32)
    bt = rng.uniform(-1, 1, (3, 37)).astype(np.float32)
    for k0 in (16, 8):
        want = np.zeros((2, 3), np.float32)
        for i, j in itertools.product(range(2), range(3)):
            acc = np.float32(0.0)
            for f0 in range(0, 37, k0):
                p = [a[i, t] * bt[j, t] if t < 37 else np.float32(0.0) for t in range(f0, f0 + k0)]
                while len(p) > 1:
                    p = [p[x] + p[x + 1] for x in range(0, len(p), 2)]
                acc = np.float32(acc + p[0])
            want[i, j] = acc
        assert (mmad(a, bt, k0).view(np.uint32) == want.view(np.uint32)).all()


@pytest.mark.parametrize("cols", [1, 3, 64, 65, 200])
def test_golden_row_sum_and_max_order(cols):
    """row_sum: 64-lane fold then the adjacent-pair tree (absent lanes -0); row_max likewise with
    Max(a, b) = a if a >= b else b, so a -0 first beats a later +0."""
    rng = np.random.default_rng(cols)
    e = (rng.uniform(0, 1, (4, cols)) * 10.0 ** rng.integers(-7, 7, (4, cols))).astype(np.float32)
    for r in range(4):
        acc = [np.float32(-0.0)] * 64
        for c in range(cols):
            acc[c % 64] = e[r, c] if c < 64 else np.float32(acc[c % 64] + e[r, c])
        while len(acc) > 1:
            acc = [np.float32(acc[x] + acc[x + 1]) for x in range(0, len(acc), 2)]
        assert row_sum(e[r]).view(np.uint32) == acc[0].view(np.uint32)
    z = np.zeros((1, cols), np.float32)
    z[0, 0] = -0.0
    assert row_max(z).view(np.uint32)[0] == 0x80000000
    assert (row_max(e) == e.max(axis=1)).all()
