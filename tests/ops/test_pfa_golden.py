"""PromptFlashAttentionV2 golden: accuracy against the float64 reference (NUMERICS.md rules) over a
grid of layouts, dtypes, GQA, sparse modes and actual lengths; hand-checkable cases; the pinned Mmad
and row-sum orders; bit-exact metamorphic identities; int8 paths within the research/oracles.md §3
bound."""
import itertools

import ml_dtypes
import numpy as np
import pytest

from npusim.chip import chip
from npusim.dtypes import decode_deq_scale_u64, encode_deq_scale_u64
from ops.common.accuracy import double_thousandth_ok, fa_rule_ok
from ops.prompt_flash_attention_v2 import golden as G
from ops.prompt_flash_attention_v2.golden import mmad_fp32, pfa_golden, row_sum
from ops.prompt_flash_attention_v2.reference import keep_of, pfa_lowp, pfa_reference64
from ops.prompt_flash_attention_v2.validate import validate
from tests.ops.helpers import bits, to_layout

A2 = chip("Ascend910B2")
FP16, BF16, INT8 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.int8)
COMPRESSED = np.triu(np.ones((2048, 2048), dtype=np.bool_), k=1)




def from_out(x: np.ndarray, layout: str, n: int) -> np.ndarray:
    """The output of *layout* back to [B, N, S, D]."""
    if layout == "BSH":
        b, s, h = x.shape
        return x.reshape(b, s, n, h // n).transpose(0, 2, 1, 3)
    if layout in ("BSND", "BNSD_BSND"):
        return x.transpose(0, 2, 1, 3)
    return x


def case(b=2, n=4, n_kv=2, s1=48, s2=80, d=40, dtype=FP16, layout="BNSD", seed=0, data=None, **kw):
    """(problem, arrays dict) of a call with U(-1, 1) data (the op-plugin tests' inputs, research/
    oracles.md §2); *data* overrides the BNSD q/k/v arrays."""
    rng = np.random.default_rng(seed)
    if data is None:
        data = dict(q=rng.uniform(-1, 1, (b, n, s1, d)), k=rng.uniform(-1, 1, (b, n_kv, s2, d)),
                    v=rng.uniform(-1, 1, (b, n_kv, s2, d)))
    arrays = {name: to_layout(np.asarray(data[x]).astype(dtype), layout)
              for name, x in (("query", "q"), ("key", "k"), ("value", "v"))}
    arrays.update({key: val for key, val in kw.items() if isinstance(val, np.ndarray)
                   or key in ("actual_seq_lengths", "actual_seq_lengths_kv")})
    attrs = {key: val for key, val in kw.items() if key not in arrays}
    prob = validate(**arrays, num_heads=n, num_key_value_heads=n_kv, input_layout=layout, chip_spec=A2, **attrs)
    arrays.pop("actual_seq_lengths", None)
    arrays.pop("actual_seq_lengths_kv", None)
    return prob, arrays


def run(prob, arrays, s_outer=16, s_inner=32):
    return pfa_golden(prob, **arrays, s_outer=s_outer, s_inner=s_inner)


def assert_accurate(prob, arrays, out):
    """Both NUMERICS.md rules against the float64 reference."""
    ref = pfa_reference64(prob, **arrays)
    ok, det = fa_rule_ok(out, ref, pfa_lowp(prob, **arrays))
    assert ok, det
    ok, det = double_thousandth_ok(out, ref, prob.out_dtype)
    assert ok, det


def full_mask(shape, b, s1, s2, rng, pre=None, nxt=None):
    """Random nonzero-is-drop mask of *shape* (the trailing [S1, S2] of each batch), one fully masked
    row; with tokens, everything outside the mode-0 band is dropped as well (consistent usage)."""
    m = rng.random(shape) < 0.2
    m[..., 3, :] = True
    if pre is not None:
        d = np.arange(shape[-1])[None, :] - np.arange(shape[-2])[:, None]
        m |= (d < -pre) | (d > nxt)
    return m.astype(np.uint8) if shape[0] == 1 else m


# --- accuracy grid --------------------------------------------------------------------------------
PRECISIONS = [(FP16, 1), (FP16, 0), (BF16, 1)]  # (dtype, inner_precise): T = fp16, fp32, fp32
LAYOUTS = ["BSH", "BSND", "BNSD", "BNSD_BSND"]
MODES = [  # (sparse_mode, mask shape or "c" (compressed) or None, extra attributes)
    (0, None, {}),
    (0, (48, 80), dict(pre_tokens=20, next_tokens=5)),
    (1, (2, 48, 80), {}),
    (1, (1, 1, 48, 80), {}),
    (0, (2, 1, 50, 90), dict(pre_tokens=100, next_tokens=0)),
    (1, (1, 48, 80), {}),
    (2, "c", {}),
    (3, "c", {}),
    (4, "c", dict(pre_tokens=30, next_tokens=10)),
    (4, "c", dict(pre_tokens=40, next_tokens=-3)),
]
GRID = [(lay, prec, mode, gqa, lens) for (lay, prec, mode, gqa, lens) in itertools.product(
    LAYOUTS, PRECISIONS, range(len(MODES)), (1, 2), (False, True))]
GRID = GRID[::7]  # a spread subset: every layout, precision, mode, GQA and length choice appears
GRID_IDS = [f"{lay}-{np.dtype(p[0]).name}-ip{p[1]}-mode{MODES[m][0]}.{m}-G{g}-{'lens' if ln else 'full'}"
            for lay, p, m, g, ln in GRID]


@pytest.mark.parametrize("layout,prec,mode_i,gqa,lens", GRID, ids=GRID_IDS)
def test_pfa_golden_accuracy_grid(layout, prec, mode_i, gqa, lens):
    """Golden within the flash-attention 2x rule and the double-thousandth rule of the float64 formula."""
    (dtype, ip), (mode, mshape, extra) = prec, MODES[mode_i]
    rng = np.random.default_rng(mode_i)
    kw = dict(sparse_mode=mode, inner_precise=ip, scale_value=0.5, **extra)
    if mshape == "c":
        kw["atten_mask"] = COMPRESSED
    elif mshape is not None:
        tokens = (extra["pre_tokens"], extra["next_tokens"]) if mode == 0 else (None, None)
        kw["atten_mask"] = full_mask(mshape, 2, 48, 80, rng, *tokens)
    if lens:
        kw.update(actual_seq_lengths=[48, 31], actual_seq_lengths_kv=[57, 80])
    prob, arrays = case(n=4, n_kv=4 // gqa, dtype=dtype, layout=layout, seed=mode_i, **kw)
    assert_accurate(prob, arrays, run(prob, arrays))


@pytest.mark.parametrize("dtype,ip", PRECISIONS)
def test_pfa_golden_accuracy_wide_scores(dtype, ip):
    """N(0, 1) data, scores of std ~1.3: the flash-attention rule holds. The double-thousandth rule
    is out of reach of an fp16 softmax here (fp16 scores of magnitude ~30 round by up to 2**-7): the
    low-precision baseline fails it too, so it is only required of the fp32 softmax."""
    rng = np.random.default_rng(11)
    data = dict(q=rng.standard_normal((2, 4, 48, 40)), k=rng.standard_normal((2, 2, 80, 40)),
                v=rng.standard_normal((2, 2, 80, 40)))
    prob, arrays = case(data=data, dtype=dtype, inner_precise=ip, scale_value=0.2)
    out, ref = run(prob, arrays), pfa_reference64(prob, **arrays)
    ok, det = fa_rule_ok(out, ref, pfa_lowp(prob, **arrays))
    assert ok, det
    if prob.softmax_dtype == np.float32:
        assert double_thousandth_ok(out, ref, dtype)[0]
    else:
        assert not double_thousandth_ok(pfa_lowp(prob, **arrays), ref, dtype)[0]


@pytest.mark.parametrize("dtype,ip", PRECISIONS)
def test_pfa_golden_accuracy_default_tiles_long_rows(dtype, ip):
    """Several 64-column tiles per row and the fold over more than one vector repeat (C > lanes)."""
    prob, arrays = case(b=1, n=2, n_kv=1, s1=64, s2=300, d=64, dtype=dtype, inner_precise=ip, scale_value=0.125,
                        sparse_mode=3, atten_mask=COMPRESSED)
    for s_inner in (64, 256, 512):
        assert_accurate(prob, arrays, run(prob, arrays, s_outer=32, s_inner=s_inner))


# --- hand-checkable cases ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,ip", PRECISIONS)
def test_pfa_golden_single_key_returns_value_row(dtype, ip):
    """S2 = 1: softmax is exactly 1, so every output row is V's row bit for bit."""
    prob, arrays = case(b=2, n=2, n_kv=1, s1=20, s2=1, d=32, dtype=dtype, inner_precise=ip)
    out = run(prob, arrays)
    v = arrays["value"][:, [0, 0]]  # [B, N, 1, D]
    np.testing.assert_array_equal(bits(out), bits(np.broadcast_to(v, out.shape).astype(dtype)))


@pytest.mark.parametrize("dtype,ip", PRECISIONS)
def test_pfa_golden_uniform_scores_give_exact_mean(dtype, ip):
    """Q = 0: every probability is 1/S2 and, with V on a coarse grid, the mean is exact."""
    rng = np.random.default_rng(1)
    data = dict(q=np.zeros((1, 2, 24, 32)), k=rng.standard_normal((1, 2, 64, 32)),
                v=rng.integers(-64, 64, (1, 2, 64, 32)) / 8)
    prob, arrays = case(b=1, n=2, n_kv=2, s1=24, s2=64, d=32, dtype=dtype, inner_precise=ip, data=data)
    want = np.broadcast_to(data["v"].mean(axis=2, keepdims=True), (1, 2, 24, 32))
    for s_inner in (16, 64):
        out = run(prob, arrays, s_inner=s_inner)
        np.testing.assert_array_equal(bits(out), bits(want.astype(dtype)))


def test_pfa_golden_rows_past_actual_length_are_positive_zero():
    """Rows >= actual_seq_lengths and batches with no key are never written: +0 bits."""
    prob, arrays = case(actual_seq_lengths=[30, 48], actual_seq_lengths_kv=[0, 70])
    out = run(prob, arrays)
    assert not bits(out[0]).any()
    assert not bits(out[1, :, 48:]).any() and np.abs(out[1]).min(axis=-1).max() > 0
    prob, arrays = case(actual_seq_lengths=[30, 17])
    out = run(prob, arrays)
    assert not bits(out[0, :, 30:]).any() and not bits(out[1, :, 17:]).any()
    assert np.all(np.abs(out[1, :, :17]).max(axis=-1) > 0)


def test_pfa_golden_fully_masked_row_is_zero():
    """A row the user mask drops entirely has m = fp32(MASK_VALUE) and is multiplied by 0."""
    mask = np.zeros((48, 80), np.bool_)
    mask[5] = True
    prob, arrays = case(sparse_mode=1, atten_mask=mask)
    out = run(prob, arrays)
    assert np.all(out[:, :, 5] == 0) and np.all(np.abs(out[:, :, 4]).max(axis=-1) > 0)


def test_pfa_golden_empty_inputs():
    """S2 = 0 gives zeros; an empty query gives an empty output."""
    prob, arrays = case(s2=0)
    out = run(prob, arrays)
    assert out.shape == prob.out_shape and not bits(out).any()
    prob, arrays = case(s1=0)
    assert run(prob, arrays).shape == prob.out_shape == (2, 4, 0, 40)


def test_pfa_golden_mode0_keeps_band_outside_elements_of_computed_tiles():
    """Mode 0 with a mask drops only the mask's elements inside a computed tile (as CANN): with one
    tile covering all keys, the tokens change nothing."""
    mask = np.zeros((48, 80), np.bool_)
    mask[:, 70:] = True
    p0, arrays = case(sparse_mode=0, atten_mask=mask, pre_tokens=100, next_tokens=0)
    p1, _ = case(sparse_mode=1, atten_mask=mask)
    np.testing.assert_array_equal(bits(run(p0, arrays, s_inner=128)), bits(run(p1, arrays, s_inner=128)))


def test_pfa_golden_tiles_are_the_band_of_the_item_rows():
    """Mode 0 (zero mask, next 0), s_outer 16 (items of 32 rows), s_inner 8: item rows [0, 32) read
    columns [0, 32), the tail item rows [32, 40) columns [0, 40) (its row count, not the block height):
    each equals an unmasked problem whose keys end there."""
    s1, s2, s_inner = 40, 64, 8
    p0, arrays = case(s1=s1, s2=s2, sparse_mode=0, atten_mask=np.zeros((s1, s2), np.bool_), next_tokens=0)
    out = run(p0, arrays, s_outer=16, s_inner=s_inner)
    for rows, cols in ((slice(0, 32), 32), (slice(32, 40), 40)):
        pk, arrays_k = case(s1=s1, s2=s2, actual_seq_lengths_kv=[cols])
        want = run(pk, arrays_k, s_outer=16, s_inner=s_inner)
        np.testing.assert_array_equal(bits(out[:, :, rows]), bits(want[:, :, rows]))


def test_pfa_golden_nan_rows_are_positive_canonical_nan():
    """A NaN key poisons the rows that keep its column: their output is fp16 0x7E00 (positive
    canonical). Causal, items of 8 rows, tiles of 16: rows < 16 never compute tile [16, 32); rows
    16-19 compute it but the mask replaces the NaN score (c = 20 > r) by MASK_VALUE."""
    rng = np.random.default_rng(3)
    data = dict(q=rng.standard_normal((1, 1, 32, 16)), k=rng.standard_normal((1, 1, 32, 16)),
                v=rng.standard_normal((1, 1, 32, 16)))
    data["k"][0, 0, 20, 3] = -np.nan
    prob, arrays = case(b=1, n=1, n_kv=1, s1=32, s2=32, d=16, data=data, sparse_mode=2, atten_mask=COMPRESSED)
    out = run(prob, arrays, s_outer=4, s_inner=16)
    assert np.all(bits(out[0, 0, 20:]) == 0x7E00)
    assert not np.isnan(out[0, 0, :20]).any()


# --- pinned orders ----------------------------------------------------------------------------------
def mmad_by_the_doc(a: np.ndarray, b: np.ndarray) -> np.float32:
    """One element of docs/numerics_cube.md's Mmad, scalar by scalar (a, b: one row/column)."""
    f = np.float32
    p = [f(a[t]) * f(b[t]) if t < len(a) else f(0) for t in range(-(-len(a) // 16) * 16)]
    acc = f(0.0)
    for kf in range(0, len(p), 16):
        level = p[kf:kf + 16]
        while len(level) > 1:
            level = [f(level[i] + level[i + 1]) for i in range(0, len(level), 2)]
        acc = f(acc + level[0])
    return acc


def test_mmad_fractal_tree_and_ascending_accumulation():
    """Hand values where the order shows: within a fractal the adjacent-pair tree adds the two tiny
    terms first (1 + 2**-23); across fractals the ascending sums lose them (1)."""
    tiny = 2.0 ** -24  # fp16's smallest subnormal; half an fp32 ulp of 1
    a = np.zeros((2, 48), np.float16)
    a[0, [0, 2, 3]] = 1, tiny, tiny
    a[1, [0, 16, 32]] = 1, tiny, tiny
    out = mmad_fp32(a, np.ones((1, 48), np.float16))[:, 0]
    assert out[0] == np.float32(1 + 2.0 ** -23) and out[1] == np.float32(1)
    seq = np.float32(0)
    for t in a[0].astype(np.float32):
        seq = np.float32(seq + t)
    assert seq == np.float32(1)  # a plain sequential sum differs


def test_mmad_random_matches_scalar_statement_and_differs_from_sequential():
    """The vectorised Mmad equals the scalar statement of the doc bit for bit, and is not the plain
    sequential fp32 sum (so the order is really pinned)."""
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((6, 200)) * 4).astype(np.float16)
    bt = (rng.standard_normal((5, 200)) * 4).astype(np.float16)
    got = mmad_fp32(a, bt)
    want = np.array([[mmad_by_the_doc(a[i], bt[j]) for j in range(5)] for i in range(6)], np.float32)
    np.testing.assert_array_equal(bits(got), bits(want))
    seq = np.zeros((6, 5), np.float32)
    for t in range(200):
        seq = seq + a[:, t:t + 1].astype(np.float32) * bt[:, t].astype(np.float32)
    assert np.any(bits(seq) != bits(got))


def test_pfa_golden_output_depends_on_the_mmad_order(monkeypatch):
    """Swapping the Mmad for a sequential sum changes output bits: the golden pins the order."""
    prob, arrays = case(b=1, n=2, n_kv=2, s1=64, s2=128, d=128, dtype=FP16, inner_precise=0, seed=5)
    out = run(prob, arrays)

    def sequential(a, bt):
        a, bt = np.asarray(a, np.float32), np.asarray(bt, np.float32)
        acc = np.zeros(np.broadcast_shapes(a.shape[:-1] + (1,), bt.shape[:-2] + (1, bt.shape[-2])), np.float32)
        for t in range(a.shape[-1]):
            acc = acc + a[..., :, t:t + 1] * bt[..., None, :, t]
        return acc

    monkeypatch.setattr(G, "mmad_fp32", sequential)
    assert np.any(bits(run(prob, arrays)) != bits(out))


def row_sum_by_the_doc(e: np.ndarray, lanes: int):
    """docs/pfa.md step 7 for one row, scalar by scalar."""
    t = e.dtype.type
    c = len(e)
    acc = [t(e[i]) for i in range(min(lanes, c))]
    for k in range(1, -(-c // lanes)):
        for i in range(lanes):
            if k * lanes + i < c:
                acc[i] = t(acc[i] + e[k * lanes + i])
    acc += [t(-0.0)] * (lanes - len(acc))
    while len(acc) > 1:
        acc = [t(acc[i] + acc[i + 1]) for i in range(0, len(acc), 2)]
    return acc[0]


@pytest.mark.parametrize("dtype,lanes,c", [(np.float16, 128, 300), (np.float16, 128, 77), (np.float32, 64, 130)])
def test_row_sum_order(dtype, lanes, c):
    """Fold into lanes accumulators, then the adjacent-pair tree; differs from numpy's sum somewhere."""
    rng = np.random.default_rng(c)
    e = rng.random((40, c)).astype(dtype)
    got = row_sum(e, lanes)
    want = np.array([row_sum_by_the_doc(row, lanes) for row in e], dtype)
    np.testing.assert_array_equal(bits(got), bits(want))
    seq = np.zeros(40, dtype)
    for i in range(c):
        seq = seq + e[:, i]
    assert np.any(bits(seq) != bits(got))


# --- bit-exact identities -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,ip", PRECISIONS)
def test_pfa_golden_layouts_agree(dtype, ip):
    """The same data in every layout gives the same bits (rows and heads are independent)."""
    outs = []
    for layout in LAYOUTS:
        prob, arrays = case(dtype=dtype, layout=layout, inner_precise=ip, sparse_mode=3, atten_mask=COMPRESSED)
        outs.append(bits(from_out(run(prob, arrays), layout, 4)))
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


def test_pfa_golden_gqa_equals_repeated_kv_heads():
    """N_kv = 2 (G = 2) equals N_kv = 4 with each key/value head repeated."""
    rng = np.random.default_rng(6)
    data = dict(q=rng.standard_normal((2, 4, 48, 40)), k=rng.standard_normal((2, 2, 80, 40)),
                v=rng.standard_normal((2, 2, 80, 40)))
    pg, ag = case(data=data, n_kv=2)
    rep = dict(q=data["q"], k=np.repeat(data["k"], 2, axis=1), v=np.repeat(data["v"], 2, axis=1))
    pr, ar = case(data=rep, n_kv=4)
    np.testing.assert_array_equal(bits(run(pg, ag)), bits(run(pr, ar)))


def test_pfa_golden_actual_kv_length_equals_truncated_keys():
    """Columns past actual_seq_lengths_kv are excluded: same bits as keys cut to that length."""
    rng = np.random.default_rng(7)
    data = dict(q=rng.standard_normal((1, 4, 48, 40)), k=rng.standard_normal((1, 2, 80, 40)),
                v=rng.standard_normal((1, 2, 80, 40)))
    pa, aa = case(b=1, data=data, actual_seq_lengths_kv=[53])
    cut = dict(q=data["q"], k=data["k"][:, :, :53], v=data["v"][:, :, :53])
    pc, ac = case(b=1, s2=53, data=cut)
    np.testing.assert_array_equal(bits(run(pa, aa)), bits(run(pc, ac)))


def test_pfa_golden_rows_are_independent_of_s_outer():
    """Without a band every item computes every tile, so s_outer does not change a bit."""
    prob, arrays = case(inner_precise=0)
    np.testing.assert_array_equal(bits(run(prob, arrays, s_outer=16)), bits(run(prob, arrays, s_outer=128)))


# --- int8 paths -------------------------------------------------------------------------------------------
def int8_case(out_dtype, seed=8, u64=True, per_channel=False, offset=True, **kw):
    """int8 inputs with scores ~N(0, 1) after deq1, P quantised by 127, outputs ~[-1, 1] (x q2)."""
    rng = np.random.default_rng(seed)
    b, n, n_kv, s1, s2, d = 1, 2, 1, 40, 96, 64
    data = dict(q=rng.integers(-20, 21, (b, n, s1, d)), k=rng.integers(-20, 21, (b, n_kv, s2, d)),
                v=rng.integers(-127, 128, (b, n_kv, s2, d)))
    deq1, deq2 = np.float32(1 / 1500), np.float32(1 / (127 * 127))
    enc = (lambda x: encode_deq_scale_u64(np.array([x], np.float32))) if u64 else (lambda x: np.array([x]))
    scales = dict(deq_scale1=enc(deq1), quant_scale1=np.array([127.0], np.float32), deq_scale2=enc(deq2))
    if out_dtype == INT8:
        shape = (n * d,) if per_channel else (1,)
        scales["quant_scale2"] = np.full(shape, 90.0, np.float32)
        if offset:
            scales["quant_offset2"] = np.full(shape, 3.0, np.float32)
    return case(b=b, n=n, n_kv=n_kv, s1=s1, s2=s2, d=d, dtype=INT8, data=data, out_dtype=out_dtype, **scales, **kw)


def int8_bound(prob, arrays):
    """Per-element bound of |golden - ref64| for int8 inputs (research/oracles.md §3 "~1/q1 relative"):
    P_i8 = round(E * q1) errs by <= 0.5 + fp16 rounding (< 0.6) per column, so O errs by
    ``0.6 * deq2 * sum_c |V_c| / l`` with l = sum_c exp(s_c - max) >= 1; the fp16 scores (relative
    2**-10) and fp16 PV/out roundings add 2**-8 of the output scale ``q1 * deq2 * max|V|``."""
    q = arrays["query"].astype(np.float64)
    k = np.repeat(arrays["key"].astype(np.float64), prob.group, axis=1)
    v = np.repeat(arrays["value"].astype(np.float64), prob.group, axis=1)
    d1 = arrays["deq_scale1"]
    deq1 = float(decode_deq_scale_u64(d1)[0] if d1.dtype == np.uint64 else d1[0])
    s = q @ np.swapaxes(k, -1, -2) * deq1 * prob.scale_value
    keep = keep_of(prob, arrays.get("atten_mask"), 0)
    s = np.where(keep, s, -np.inf)
    l64 = np.exp(s - s.max(-1, keepdims=True)).sum(-1, keepdims=True)
    deq2, q1 = 1 / (127 * 127), 127.0
    return 0.6 * deq2 * (np.abs(v).sum(axis=2, keepdims=True) / l64) + 2.0 ** -8 * q1 * deq2 * np.abs(v).max()


@pytest.mark.parametrize("u64", [True, False])
def test_pfa_golden_int8_in_fp16_out_within_quantisation_bound(u64):
    """int8 -> fp16: golden within the P-quantisation bound of the dequantised float64 formula."""
    prob, arrays = int8_case(FP16, u64=u64)
    out = run(prob, arrays).astype(np.float64)
    err = np.abs(out - pfa_reference64(prob, **arrays))
    bound = int8_bound(prob, arrays)
    assert np.all(err <= bound), float((err - bound).max())
    assert np.abs(out).max() > 0.3  # the outputs use the range


def test_pfa_golden_int8_in_int8_out_within_one_lsb_plus_bound():
    """int8 -> int8: |out - (O q2 + offset2)| <= q2 * bound(O) + 1 LSB."""
    prob, arrays = int8_case(INT8, sparse_mode=2, atten_mask=COMPRESSED)
    out = run(prob, arrays)
    assert out.dtype == INT8
    ref = pfa_reference64(prob, **arrays)
    assert np.all(np.abs(out - ref) <= 90.0 * int8_bound(prob, arrays) + 1.0)
    assert np.abs(out).max() > 40


def test_pfa_golden_deq_scale_encodings_agree():
    """A uint64 FP19 deq word and the fp32 it decodes to give the same bits."""
    p64, a64 = int8_case(FP16, u64=True)
    p32, a32 = int8_case(FP16, u64=False)
    for name in ("deq_scale1", "deq_scale2"):
        a32[name] = (a64[name] & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)
    np.testing.assert_array_equal(bits(run(p64, a64)), bits(run(p32, a32)))


@pytest.mark.parametrize("dtype", [FP16, BF16])
def test_pfa_golden_float_in_int8_out_within_one_lsb(dtype):
    """fp16/bf16 -> int8: |out - (O q2 + offset2)| <= 1 LSB; per-channel equal scales = per-tensor."""
    kw = dict(d=64, dtype=dtype, out_dtype=INT8, sparse_mode=4, atten_mask=COMPRESSED, pre_tokens=20, next_tokens=4)
    sdt = np.float32 if dtype == FP16 else dtype  # quant_scale2 dtype rule: fp32, or bf16 with bf16 inputs
    q2, off2 = np.full((256,), 60.0, sdt), np.full((256,), -2.0, sdt)
    pc, ac = case(quant_scale2=q2, quant_offset2=off2, seed=9, **kw)
    out = run(pc, ac)
    ref = pfa_reference64(pc, **ac)
    assert out.dtype == INT8 and np.all(np.abs(out - ref) <= 1.0) and np.abs(out).max() > 50
    pt, at = case(quant_scale2=q2[:1], quant_offset2=off2[:1], seed=9, **kw)
    np.testing.assert_array_equal(bits(run(pt, at)), bits(out))


# --- the reference's mask and the accuracy rules ---------------------------------------------------------
@pytest.mark.parametrize("mode,pre,nxt", [(0, 5, 2), (1, 0, 0), (2, 0, 0), (3, 0, 0), (4, 6, 1), (4, 9, -2)])
def test_reference_keep_matches_masks_module(mode, pre, nxt):
    """The reference restates the mode rules; they agree with ops.common.masks.keep_mask per batch."""
    from ops.common.masks import keep_mask
    rng = np.random.default_rng(mode)
    full = rng.random((2, 48, 80)) < 0.3
    mask = full if mode in (0, 1) else COMPRESSED
    prob, _ = case(sparse_mode=mode, atten_mask=mask, pre_tokens=pre, next_tokens=nxt,
                   actual_seq_lengths=[40, 48], actual_seq_lengths_kv=[80, 33])
    for b, (s1, s2) in enumerate(((40, 80), (48, 33))):
        want = keep_mask(mode, pre, nxt, s1, s2, full[b] if mode in (0, 1) else None)
        np.testing.assert_array_equal(keep_of(prob, mask, b), want)


def test_fa_rule_bound_and_nan_handling():
    """err <= factor * lowp_err + eps, matching NaNs are equal, a one-sided NaN fails."""
    ref = np.array([1.0, 2.0, np.nan])
    lowp = np.array([1.01, 2.0, np.nan])
    assert fa_rule_ok(np.array([1.019, 2.0, np.nan]), ref, lowp)[0]
    ok, det = fa_rule_ok(np.array([1.021, 2.0, np.nan]), ref, lowp)
    assert not ok and det["worst"] == (0,) and det["bound"] == pytest.approx(0.02 + 1e-5)
    assert not fa_rule_ok(np.array([1.0, 2.0, 0.0]), ref, lowp)[0]
    assert fa_rule_ok(np.array([1.03, 2.0, np.nan]), ref, lowp, factor=3)[0]


def test_double_thousandth_counts_elements_failing_both_errors():
    """An element fails only when abs and rel error both exceed the threshold; the case fails when more
    than threshold * size elements fail."""
    ref = np.ones(2000)
    out = ref.copy()
    out[:2] += 0.01  # 2 failures allowed (1e-3 * 2000)
    assert double_thousandth_ok(out.astype(np.float16), ref, np.float16)[0]
    out[2] += 0.01
    ok, det = double_thousandth_ok(out, ref, "float16")
    assert not ok and det["failed"] == 3
    tiny = np.full(2000, 1e-4)
    assert double_thousandth_ok(tiny * 3, tiny, np.float16)[0]  # rel error 2 but abs 2e-4 < 1e-3
    big = np.full(2000, 1e4)
    assert double_thousandth_ok(big + 5, big, np.float16)[0]  # abs error 5 but rel 5e-4 < 1e-3
    assert not double_thousandth_ok(big + 5, big, np.float32)[0]  # fp32's threshold is 1e-4


def golden_row_by_row(prob, q, k, v, s_outer, s_inner):
    """docs/pfa.md "Dataflow of one item" for one batch, row by row with scalars (fp inputs, modes 2-4):
    an independent statement of the vectorised golden."""
    from npusim.dtypes import cast
    t = np.dtype(prob.softmax_dtype)
    tt, f32 = t.type, np.float32
    mask_value = tt(-65504.0) if t == FP16 else tt(-np.finfo(np.float32).max)
    lanes = 256 // t.itemsize
    scale = cast(np.asarray(np.float32(prob.scale_value_fp32)), t)[()]
    ex = lambda x, dt: cast(np.exp(np.float64(x)), dt)[()]  # noqa: E731
    pre, nxt = int(prob.pre_tokens_lu[0]), int(prob.next_tokens_lu[0])
    act_q, act_kv = int(prob.computed_seq_lengths[0]), int(prob.actual_seq_lengths_kv[0])
    n_h, d = prob.num_heads, prob.head_dim
    out = np.zeros((n_h, prob.s1, d), np.float32)
    for h in range(n_h):
        kh, vh = k[0, h // prob.group], v[0, h // prob.group]
        for r in range(act_q):
            r0 = r // (2 * s_outer) * 2 * s_outer
            rows = min(r0 + 2 * s_outer, act_q) - r0
            first, last = min(max(r0 - pre, 0), act_kv), min(max(r0 + nxt + rows, 0), act_kv)
            if last <= first:
                continue
            m = row_l = o = None
            for j, c0 in enumerate(range(first // s_inner * s_inner, last, s_inner)):
                cols = range(c0, min(c0 + s_inner, act_kv))
                s = [cast(np.asarray(mmad_by_the_doc(q[0, h, r], kh[c])), t)[()] * scale for c in cols]
                s = [mask_value if not -pre <= c - r <= nxt else x for c, x in zip(cols, s)]
                mx = f32(max(s))
                if j == 0:
                    m = mx
                else:
                    m_new = max(m, mx)
                    alpha, m = ex(f32(m - m_new), "fp32"), m_new
                e = np.array([ex(x - cast(np.asarray(m), t)[()], t) for x in s], t)
                rs = f32(row_sum_by_the_doc(e, lanes))
                p = e.astype(prob.dtype)
                pv = np.array([mmad_by_the_doc(p, vh[cols.start:cols.stop, dd]) for dd in range(d)], np.float32)
                row_l = rs if j == 0 else f32(f32(row_l * alpha) + rs)
                o = pv if j == 0 else (o * alpha + pv).astype(np.float32)
            o = o / row_l
            out[h, r] = o * f32(0.0) if m == f32(mask_value) else o
    return cast(out, prob.out_dtype)


@pytest.mark.parametrize("dtype,ip", PRECISIONS)
def test_pfa_golden_equals_row_by_row_statement(dtype, ip):
    """The vectorised golden equals a scalar, row-by-row reading of docs/pfa.md bit for bit (band mode
    with skipped tiles, several tiles per row, GQA, masked row tails)."""
    prob, arrays = case(b=1, n=2, n_kv=1, s1=12, s2=40, d=20, dtype=dtype, inner_precise=ip, scale_value=0.7,
                        sparse_mode=4, atten_mask=COMPRESSED, pre_tokens=30, next_tokens=-2)
    q, k, v = (np.asarray(arrays[x]) for x in ("query", "key", "value"))
    want = golden_row_by_row(prob, q, k, v, s_outer=2, s_inner=8)
    np.testing.assert_array_equal(bits(run(prob, arrays, s_outer=2, s_inner=8)[0]), bits(want))
