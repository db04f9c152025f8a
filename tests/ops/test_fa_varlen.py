"""FlashAttentionVarLenScore on the simulator: accuracy against a float64 formula (NUMERICS.md rules) over
modes, dtypes, pse forms, dropout and zero-length batches; exact values (Skv = 1, invalid rows,
metamorphic identities); output layouts; full vs timing cycles; tiling properties; errors and facade.

The references below are written from research/oracles.md §0-§2 and the seed's formula, not from the
kernel: ``scale * (QK^T + pse)``, masks by the oracles cross-walk, softmax, dropout ``P * keep /
keep_prob``, then ``P V``.
"""
import ml_dtypes
import numpy as np
import pytest

from npusim.errors import AclnnError
from npusim.memory.gm import TensorSpec
from ops.common.accuracy import double_thousandth_ok, fa_rule_ok
from ops.flash_attention_var_len_score.api import (aclnnFlashAttentionVarLenScore,
                                                   aclnnFlashAttentionVarLenScoreGetWorkspaceSize,
                                                   flash_attention_var_len_score as fa)
from ops.flash_attention_var_len_score.tiling import COF, SYSTEM_WORKSPACE_BYTES

FP16, BF16, FP32 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)
NEG, POS = np.finfo(np.float32).min, np.finfo(np.float32).max
BIG = 2147483647
TRIU = np.triu(np.ones((2048, 2048), dtype=np.bool_), k=1)
PREFIX_MASK = np.concatenate([TRIU, np.concatenate([np.zeros((1024, 1024), np.bool_),
                                                    np.ones((1024, 1024), np.bool_)], axis=1)])


# --- independent references -------------------------------------------------------------------------
def keep_of(mode, pre, nxt, s1, s2, mask=None, prefix=0, band=False):
    """True where the score is kept (oracles.md §0 cross-walk; r = row, c = column, d = S2 - S1)."""
    r, c = np.meshgrid(np.arange(s1), np.arange(s2), indexing="ij")
    d = s2 - s1
    if mode is None or mode == 1:
        return np.ones((s1, s2), bool) if mask is None else ~mask[:s1, :s2].astype(bool)
    if mode == 0:
        return (c - r <= nxt) & (r - c <= pre) & ~mask[:s1, :s2].astype(bool)
    if mode in (7, 8) and band:
        mode = 4
    if mode in (2, 8):
        return c <= r
    if mode in (3, 7):
        return c <= r + d
    if mode == 4:
        return (c >= r + d - pre) & (c <= r + d + nxt)
    return (c <= r + d) | (c < prefix)  # 6


def batches(sq, skv):
    cq, ck = np.concatenate([[0], np.cumsum(sq)]), np.concatenate([[0], np.cumsum(skv)])
    return [(b, cq[b], ck[b], sq[b], skv[b]) for b in range(len(sq))]


def attention(case, dtype=None):
    """float64 (dtype None) or per-step low-precision attention: (out, row max, row sum)."""
    q, k, v = case["q"], case["k"], case["v"]
    n1, n2 = q.shape[1], k.shape[1]
    rnd = (lambda x: x) if dtype is None else (lambda x: np.asarray(x).astype(dtype).astype(np.float64))
    out = np.zeros(q.shape)
    mx, sm = np.full(q.shape[:2], -np.inf), np.zeros(q.shape[:2])
    bit = 0
    for b, q0, k0, s1, s2 in batches(case["sq"], case["skv"]):
        if s1 == 0:
            continue
        keep = keep_of(case["mode"], case["pre"], case["next"], s1, s2, case["mask"], case["prefix"][b],
                       b == case["band"])
        for n in range(n1):
            Q = q[q0:q0 + s1, n].astype(np.float64)
            K, V = (x[k0:k0 + s2, n // (n1 // n2)].astype(np.float64) for x in (k, v))
            s = rnd(Q @ K.T)
            if case["pse"] is not None:
                s = rnd(s + case["pse"][b][n])
            s = rnd(s * case["scale"])
            m = np.where(keep, s, -np.inf).max(axis=1, keepdims=True)
            e = np.where(keep, rnd(np.exp(rnd(s - np.where(np.isfinite(m), m, 0)))), 0.0)
            l = rnd(e.sum(axis=1, keepdims=True))
            p = rnd(e / np.where(l > 0, l, 1))
            if case["keep"] is not None:
                kk = case["keep"][bit:bit + s1 * s2].reshape(s1, s2)
                bit += s1 * s2
                p = rnd(p * kk / np.float64(np.float32(case["keep_prob"])))
            out[q0:q0 + s1, n] = rnd(p @ V)
            mx[q0:q0 + s1, n], sm[q0:q0 + s1, n] = m[:, 0], l[:, 0]
    return out, mx, sm


def make_case(sq, skv, n1=2, n2=1, d=64, dtype=FP16, mode=None, pre=BIG, nxt=BIG, prefix=None, pse=None,
              dropout=False, keep_prob=0.8, seed=0, mask=None, inner_precise=0, scale=0.125):
    """Inputs (U(-1, 1) data, the op-plugin tests' range) and the call's keyword arguments."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1, 1, (sum(sq), n1, d)).astype(dtype)
    k = rng.uniform(-1, 1, (sum(skv), n2, d)).astype(dtype)
    v = rng.uniform(-1, 1, (sum(skv), n2, d)).astype(dtype)
    kw = dict(actual_seq_qlen=np.cumsum(sq).tolist(), actual_seq_kvlen=np.cumsum(skv).tolist(), scale_value=scale,
              head_num=n1, inner_precise=inner_precise)
    if mode is not None:
        if mask is None:
            mask = PREFIX_MASK if mode == 6 else TRIU
        kw.update(atten_mask=mask, sparse_mode=mode, pre_tokens=pre, next_tokens=nxt,
                  prefix=prefix if mode == 6 else None)
    pse_b = None
    if pse == "full":
        blocks = [rng.uniform(-1, 1, (n1, a, b)).astype(dtype) for a, b in zip(sq, skv)]
        kw["real_shift"] = np.concatenate([x.reshape(-1) for x in blocks])
        pse_b = [x.astype(np.float64) for x in blocks]
    elif pse == "alibi":  # last 1024 rows of a Toeplitz pse: value(j - i) = -slope * |j - i|
        ms = max(skv)
        slopes = rng.uniform(0.05, 0.5, n1)
        m_idx, k_idx = np.arange(1024)[:, None], np.arange(ms)[None, :]
        kw["real_shift"] = np.stack([-s * np.abs(k_idx - m_idx + 1024 - ms) for s in slopes])[None].astype(dtype)
        pse_b = [np.stack([-s * np.abs(np.arange(b)[None, :] - np.arange(a)[:, None]) for s in slopes])
                 .astype(dtype).astype(np.float64) for a, b in zip(sq, skv)]
    keep = None
    if dropout:
        keep = rng.uniform(size=n1 * sum(a * b for a, b in zip(sq, skv))) < keep_prob
        kw.update(drop_mask=np.packbits(keep, bitorder="little"), keep_prob=keep_prob)
    nonempty = np.flatnonzero(np.asarray(sq) > 0)
    band = (nonempty[-1] if mode == 7 else nonempty[0]) if mode in (7, 8) else None
    case = dict(q=q, k=k, v=v, sq=sq, skv=skv, mode=mode, pre=pre, next=nxt, mask=mask,
                prefix=prefix or [0] * len(sq), pse=pse_b, keep=keep, keep_prob=keep_prob, band=band, scale=scale)
    return case, kw


def call(case, kw, **extra):
    return fa(case["q"], case["k"], case["v"], **kw, **extra)


def bits(x):
    x = np.ascontiguousarray(x)
    return x.view({2: np.uint16, 4: np.uint32}[x.dtype.itemsize])


# --- accuracy grid --------------------------------------------------------------------------------------
GRID = {
    "plain": dict(sq=[100, 0, 37], skv=[120, 5, 300]),
    "gqa_d40": dict(sq=[70, 33], skv=[90, 33], n1=4, n2=2, d=40),
    "causal": dict(sq=[300, 64], skv=[300, 64], mode=2),
    "rd_causal_drop": dict(sq=[200, 0, 64], skv=[300, 3, 80], mode=3, dropout=True),
    "band_pse": dict(sq=[200, 64], skv=[300, 64], mode=4, pre=50, nxt=20, pse="full"),
    "mode7": dict(sq=[200, 64], skv=[300, 80], mode=7, pre=300, nxt=-10),
    "mode8": dict(sq=[0, 200, 64], skv=[4, 300, 80], mode=8, pre=300, nxt=150),
    "prefix": dict(sq=[200, 64], skv=[150, 80], mode=6, prefix=[20, 40]),
    "alibi": dict(sq=[260, 64], skv=[260, 64], mode=2, pse="alibi"),
    "drop_bytes": dict(sq=[30, 64], skv=[50, 61], dropout=True),
    "drop_bits_whole": dict(sq=[40, 9], skv=[512, 256], dropout=True, keep_prob=0.6),
}


@pytest.mark.parametrize("dtype", [FP16, BF16, FP32], ids=["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("name", list(GRID))
def test_fa_varlen_accuracy_vs_float64(name, dtype):
    """attention_out meets the flash-attention 2x rule and the double-thousandth rule; softmax_max and
    softmax_sum equal the float64 row max and sum to fp32 rounding."""
    case, kw = make_case(dtype=dtype, **GRID[name])
    res = call(case, kw)
    ref, mx, sm = attention(case)
    low, _, _ = attention(case, dtype)
    out = res.attention_out
    assert out.shape == case["q"].shape and out.dtype == dtype
    ok, info = fa_rule_ok(out, ref, low)
    assert ok, info
    ok, info = double_thousandth_ok(out, ref, dtype)
    assert ok, info
    np.testing.assert_allclose(res.softmax_max[..., 0], mx, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(res.softmax_sum[..., 0], sm, rtol=2e-5)
    assert (res.softmax_max == res.softmax_max[..., :1]).all() and (res.softmax_sum == res.softmax_sum[..., :1]).all()


def test_fa_varlen_accuracy_multi_tile_mask_full():
    """Several 1024-wide tiles per row (online rescaling), GQA, a user [maxSq, maxSkv] mask (mode 0 band)."""
    s1, s2 = 300, 2100
    r, c = np.meshgrid(np.arange(s1), np.arange(s2), indexing="ij")
    mask = (c - r > 1500) | (r - c > 100)
    case, kw = make_case([s1, 17], [s2, 1100], n1=2, n2=1, mode=0, pre=100, nxt=1500, mask=mask)
    res = call(case, kw)
    ref, mx, sm = attention(case)
    assert fa_rule_ok(res.attention_out, ref, attention(case, FP16)[0])[0]
    np.testing.assert_allclose(res.softmax_sum[..., 0], sm, rtol=2e-5)


# --- exact values ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [FP16, BF16, FP32], ids=["fp16", "bf16", "fp32"])
def test_fa_varlen_skv1_gives_v_row(dtype):
    """Skv = 1: P = 1, so every query row of a batch gets that batch's V row exactly and sum = 1."""
    case, kw = make_case([5, 0, 9], [1, 1, 1], n1=4, n2=2, d=48, dtype=dtype)
    res = call(case, kw)
    qb = np.repeat([0, 2], [5, 9])
    want = case["v"][qb][:, [0, 0, 1, 1], :]
    assert (bits(res.attention_out) == bits(want)).all()
    assert (res.softmax_sum == 1.0).all()


def test_fa_varlen_invalid_rows_exact():
    """Fully masked rows (mode 6, prefix 0, Sq > Skv: automatic invalid-row mode) give +0, -FLT_MAX, +FLT_MAX."""
    case, kw = make_case([300, 40], [200, 30], mode=6, prefix=[0, 5])
    res = call(case, kw)
    _, mx, _ = attention(case)
    inv = ~np.isfinite(mx)
    assert inv.sum() == 2 * 100 and res.extra["problem"].invalid_row_calc
    assert (bits(res.attention_out[inv]) == 0).all()
    assert (res.softmax_max[inv] == NEG).all() and (res.softmax_sum[inv] == POS).all()


def test_fa_varlen_metamorphic_identities():
    """Bit-identical: zero pse == no pse; an all-ones drop mask with keep_prob 1 == no dropout; an all-zero
    drop mask gives +0."""
    case, kw = make_case([40, 70], [56, 64], n1=2)
    base = call(case, kw).attention_out
    zero_pse = np.zeros(2 * (40 * 56 + 70 * 64), FP16)
    assert (bits(call(case, kw, real_shift=zero_pse).attention_out) == bits(base)).all()
    ones = np.full(2 * (40 * 56 + 70 * 64) // 8, 255, np.uint8)
    assert (bits(call(case, kw, drop_mask=ones, keep_prob=1.0).attention_out) == bits(base)).all()
    zeros = np.zeros_like(ones)
    assert (bits(call(case, kw, drop_mask=zeros, keep_prob=0.5).attention_out) == 0).all()


def test_fa_varlen_softmax_layouts():
    """per_batch holds each batch's [N1, Sq, 8] block in turn; rearranged, it equals the TND layout."""
    case, kw = make_case([7, 0, 20], [9, 2, 20], n1=3, n2=1)
    tnd = call(case, kw)
    pb = call(case, kw, softmax_layout="per_batch")
    assert pb.softmax_max.shape == tnd.softmax_max.shape == (27, 3, 8)
    flat = pb.softmax_sum.reshape(-1)
    parts, off = [], 0
    for sq in (7, 0, 20):
        parts.append(flat[off:off + 3 * sq * 8].reshape(3, sq, 8).transpose(1, 0, 2))
        off += 3 * sq * 8
    assert (np.concatenate(parts) == tnd.softmax_sum).all()
    assert (bits(pb.attention_out) == bits(tnd.attention_out)).all()


@pytest.mark.parametrize("skv", [60, 100, 300, 600, 1100])
def test_fa_varlen_prefix_vec1elems_invariant(skv):
    """Sparse 6 (prefix and causal windows ANDed per slice): vec1Elems 1024 and 8192 give the same
    bits (the slice budget changes only timing, docs/fa_varlen.md), and the result meets the FA 2x rule."""
    case, kw = make_case([50, 120], [skv, skv], mode=6, prefix=[skv - 25, skv - min(skv, 120) + min(skv, 120) // 3])
    outs = [call(case, kw, tiling={"vec1Elems": e}) for e in (1024, 8192)]
    for res in outs[1:]:
        assert (bits(res.attention_out) == bits(outs[0].attention_out)).all()
        assert (res.softmax_max == outs[0].softmax_max).all() and (res.softmax_sum == outs[0].softmax_sum).all()
    ref, _, _ = attention(case)
    assert fa_rule_ok(outs[0].attention_out, ref, attention(case, FP16)[0])[0]


# --- timing ----------------------------------------------------------------------------------------------
TIMING = {
    "fp16_plain": dict(sq=[300, 0, 50], skv=[1200, 3, 64]),
    "bf16_rd_drop_pse": dict(sq=[100, 64], skv=[130, 70], dtype=BF16, mode=3, dropout=True, pse="full"),
    "fp32_prefix": dict(sq=[90, 40], skv=[60, 50], dtype=FP32, mode=6, prefix=[0, 20]),
}


@pytest.mark.parametrize("name", list(TIMING))
def test_fa_varlen_full_vs_timing_cycles(name):
    """Timing mode (TensorSpec data inputs, real control inputs) books exactly the full-mode cycles."""
    case, kw = make_case(**TIMING[name])
    full = call(case, kw)
    spec = {k: TensorSpec(v.shape, v.dtype) if isinstance(v, np.ndarray) and k != "prefix" else v
            for k, v in kw.items()}
    timing = fa(*(TensorSpec(case[x].shape, case[x].dtype) for x in "qkv"), **spec, mode="timing")
    assert full.cycles == timing.cycles > 0 and timing.outputs is None
    assert full.workspace_size == timing.workspace_size


# --- tiling ----------------------------------------------------------------------------------------------
def test_fa_varlen_tiling_skips_blocks_and_balances():
    """Causal items skip the columns right of their block; core ranges are contiguous and cover all items;
    the quantised loads follow COF; the workspace is the documented formula."""
    sp = TensorSpec((4096, 1, 128), FP16)
    res = fa(sp, sp, sp, atten_mask=TensorSpec((2048, 2048), np.bool_), actual_seq_qlen=[4096],
             actual_seq_kvlen=[4096], head_num=1, sparse_mode=2, mode="timing", tiling={"template": 1})
    til = res.tiling
    assert til.template == "SameAB" and til.sparseType == "CAUSAL" and til.items == 16
    assert til.itemS2End == tuple(min(256 * (i + 1), 4096) for i in range(16))
    assert til.tasks == sum(-(-e // 1024) for e in til.itemS2End) < 16 * 4
    assert til.itemLoad[0] == COF[1] and til.itemLoad[4] == 1024 + COF[1]
    starts = til.sparseStartIdx
    assert starts[0] == 0 and starts[-1] == til.items and list(starts) == sorted(starts)
    per_core = 2 * 256 * 1024 * (4 + 2) + 4 * 256 * 128 * 4
    assert til.workspaceSize == SYSTEM_WORKSPACE_BYTES + til.blockDim * per_core == res.workspace_size


def test_fa_varlen_template_choice_and_worker_split():
    """CANN's IsCapable: one head (N1 == N2 == 1) runs vector-master, whose workers are the vector cores
    (s1 blocks of 128 rows, two workers per AI Core, one workspace set each); SameAB needs long or many
    sequences with more than one head."""
    sp = TensorSpec((3072, 1, 128), FP16)
    res = fa(sp, sp, sp, actual_seq_qlen=[3072], actual_seq_kvlen=[3072], head_num=1, mode="timing")
    til = res.tiling
    assert til.template == "VectorMaster" and til.s1BaseSize == 128 and til.items == 24
    assert til.workers == 24 == 2 * til.blockDim and list(til.sparseStartIdx) == list(range(25))
    per_worker = 2 * 128 * 1024 * (4 + 2) + 4 * 128 * 128 * 4
    assert til.workspaceSize == SYSTEM_WORKSPACE_BYTES + til.workers * per_worker == res.workspace_size
    two = TensorSpec((6144, 2, 128), FP16)
    big = fa(two, two, two, actual_seq_qlen=[6144], actual_seq_kvlen=[6144], head_num=2, mode="timing").tiling
    assert big.template == "SameAB" and big.s1BaseSize == 256 and big.workers == big.blockDim
    short = TensorSpec((4096, 2, 128), FP16)
    assert fa(short, short, short, actual_seq_qlen=[4096], actual_seq_kvlen=[4096], head_num=2,
              mode="timing").tiling.template == "VectorMaster"


def test_fa_varlen_tiling_override_refused():
    """Illegal tiling overrides raise AclnnError 161002."""
    case, kw = make_case([20], [20])
    for bad in ({"s1BaseSize": 100}, {"nope": 1}, {"blockDim": 0}, {"template": 3}):
        with pytest.raises(AclnnError) as e:
            call(case, kw, tiling=bad)
        assert e.value.status == 161002


# --- api, errors, facade ---------------------------------------------------------------------------------
def test_fa_varlen_layout_refused():
    """softmax_layout must be TND or per_batch (161002)."""
    case, kw = make_case([20], [20])
    with pytest.raises(AclnnError) as e:
        call(case, kw, softmax_layout="NTD")
    assert e.value.status == 161002 and "softmax_layout" in str(e.value)


def test_fa_varlen_aclnn_facade():
    """Two-stage facade in the seed's order writes the same outputs in place; a missing output is 161001."""
    case, kw = make_case([30, 12], [40, 12], n1=2)
    ref = call(case, kw)
    outs = [np.zeros((42, 2, 8), np.float32), np.zeros((42, 2, 8), np.float32), None, np.zeros((42, 2, 64), FP16)]
    args = (case["q"], case["k"], case["v"], None, None, None, None, None, kw["actual_seq_qlen"],
            kw["actual_seq_kvlen"], 0.125, 1.0, BIG, BIG, 2, "TND", 0, 0)
    status, ws, ex = aclnnFlashAttentionVarLenScoreGetWorkspaceSize(*args, *outs)
    assert status == 0 and ws == ref.workspace_size
    assert aclnnFlashAttentionVarLenScore(None, ws, ex) == 0
    assert (bits(outs[3]) == bits(ref.attention_out)).all() and (outs[1] == ref.softmax_sum).all()
    status, _, ex = aclnnFlashAttentionVarLenScoreGetWorkspaceSize(*args, outs[0], None, None, outs[3])
    assert status == 161001 and ex is None
