"""validate() of FlashAttentionVarLenScore: a valid and an invalid call per contract rule, the problem
fields, and a fuzz test that nothing but FaVarLenProblem or AclnnError ever comes out."""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npusim import TensorSpec
from npusim.chip import chip
from npusim.errors import AclnnError
from ops.flash_attention_var_len_score import contract as C
from ops.flash_attention_var_len_score.validate import FaVarLenProblem, validate

A2, A3, P310 = chip("Ascend910B2"), chip("Ascend910_9391"), chip("Ascend310P3")
FP16, BF16, FP32 = np.float16, ml_dtypes.bfloat16, np.float32
# base: Sq = [2, 2, 0, 2, 2], Skv = [2, 3, 0, 3, 2]; maxSq 2, maxSkv 3
SQ, SKV = [2, 4, 4, 6, 8], [2, 5, 5, 8, 10]
# equal lengths, no empty batch: Sq = Skv = [2, 2, 3]
EQ = [2, 4, 7]
CAUSAL = np.triu(np.ones((2048, 2048), dtype=np.bool_), 1)
PREFIX_MASK = np.zeros((3072, 2048), dtype=np.bool_)


def qkv(t1=8, t2=10, n1=4, n2=2, d=64, dtype=FP16, data=False):
    """query/key/value as TensorSpecs (or zero arrays with data), plus head_num."""
    make = (lambda s: np.zeros(s, dtype)) if data else (lambda s: TensorSpec(s, dtype))
    return {"query": make((t1, n1, d)), "key": make((t2, n2, d)), "value": make((t2, n2, d)), "head_num": n1}


def call(**over):
    """The base call (TND, A2, five batches with an empty one) with *over* applied."""
    kw = {**qkv(), "actual_seq_qlen": SQ, "actual_seq_kvlen": SKV, "input_layout": "TND", "chip_spec": A2}
    kw.update(over)
    return kw


def eq(**over):
    """Equal-length batches Sq = Skv = [2, 2, 3] (pse and alibi cases)."""
    return call(**{**qkv(t1=7, t2=7), "actual_seq_qlen": EQ, "actual_seq_kvlen": EQ, **over})


def one(sq, skv, **over):
    """A single batch with Sq=sq, Skv=skv."""
    return call(**{**qkv(t1=sq, t2=skv), "actual_seq_qlen": [sq], "actual_seq_kvlen": [skv], **over})


def many(b, **over):
    """b batches of length 1."""
    seq = list(range(1, b + 1))
    return call(**{**qkv(t1=b, t2=b), "actual_seq_qlen": seq, "actual_seq_kvlen": seq, **over})


def zeros(shape, dtype=np.bool_):
    return np.zeros(shape, dtype=dtype)


FULL_PSE_EQ = (4 * (4 + 4 + 9),)  # N1 * sum(Sq*Skv) for EQ
BAD_ROW = np.array([[0, 0, 1], [1, 1, 0]], dtype=np.uint8)  # row 1 fully masked in batch 0's [2, 2] slice


class _NoDtype:
    shape = (8, 4, 64)


# rule -> (valid call, [invalid calls]); every rule of the contract appears exactly once
CASES = {
    "product_supported": (call(chip_spec=A3), [call(chip_spec=P310), call(chip_spec=42), call(chip_spec="nope")]),
    "required_tensor": (call(), [call(query=None), call(key=None), call(value=None)]),
    "required_attr": (call(), [call(input_layout=None), call(head_num=None)]),
    "required_seq_lens": (call(), [call(actual_seq_qlen=None), call(actual_seq_kvlen=None)]),
    "tensor_type": (call(**qkv(data=True)), [call(query="abc"), call(query=_NoDtype()),
                                             call(key=TensorSpec.__new__(TensorSpec))]),
    "qkv_dtype": (call(**qkv(dtype=BF16)), [call(**qkv(dtype=np.int8)), call(**qkv(dtype=np.float64))]),
    "qkv_same_dtype": (call(**qkv(dtype=FP32)), [call(key=TensorSpec((10, 2, 64), BF16))]),
    "pse_dtype": (eq(real_shift=TensorSpec(FULL_PSE_EQ, FP16)),
                  [eq(real_shift=TensorSpec(FULL_PSE_EQ, FP32)), eq(real_shift=TensorSpec(FULL_PSE_EQ, np.int8))]),
    "drop_mask_dtype": (call(drop_mask=zeros(10, np.uint8)), [call(drop_mask=zeros(10, np.bool_)),
                                                             call(drop_mask=zeros(10, np.int8))]),
    "padding_mask_dtype": (call(padding_mask=TensorSpec((1,), FP16)), [call(padding_mask=TensorSpec((1,), np.uint8))]),
    "atten_mask_dtype": (call(atten_mask=zeros((2, 3), np.uint8)), [call(atten_mask=zeros((2, 3), np.float16))]),
    "input_layout": (call(), [call(input_layout="BSH"), call(input_layout="tnd"), call(input_layout=3)]),
    "head_num_positive": (call(), [call(head_num=0), call(head_num=-4), call(head_num=4.0), call(head_num=True)]),
    "qkv_rank": (call(), [call(query=TensorSpec((8, 4, 64, 1), FP16)), call(value=TensorSpec((10, 128), FP16))]),
    "head_dim_equal": (call(), [call(key=TensorSpec((10, 2, 32), FP16), value=TensorSpec((10, 2, 32), FP16))]),
    "kv_same_shape": (call(), [call(value=TensorSpec((10, 1, 64), FP16))]),
    "seq_lens_type": (call(actual_seq_qlen=np.array(SQ, dtype=np.int32), actual_seq_kvlen=tuple(SKV)),
                      [call(actual_seq_qlen=[2.0, 4, 4, 6, 8]), call(actual_seq_qlen="24468"),
                       call(actual_seq_kvlen=np.array([SKV])), call(actual_seq_kvlen=[True] * 5),
                       call(actual_seq_qlen=np.array(SQ, dtype=np.float32)), call(actual_seq_qlen=[2 ** 64] * 5)]),
    "prefix_type": (call(prefix=[0, 0, 0, 0, 0]), [call(prefix="x"), call(prefix=[[1]]), call(prefix=3)]),
    "scalar_type": (call(scale_value=np.float64(0.125), keep_prob=1, pre_tokens=np.int64(3)),
                    [call(scale_value="1"), call(keep_prob=None), call(pre_tokens=1.5), call(sparse_mode=True),
                     call(inner_precise=2 ** 70), call(keep_prob=10 ** 400), call(next_tokens=None)]),
    "inner_precise_value": (call(inner_precise=1), [call(inner_precise=3), call(inner_precise=-1)]),
    "limit_T": (one(C.M, C.M, **qkv(t1=C.M, t2=C.M, n1=1, n2=1, d=16)),
                [one(C.M + 1, 1, **qkv(t1=C.M + 1, t2=1)), call(**qkv(t1=0), actual_seq_qlen=[0] * 5)]),
    "limit_B": (many(2048), [many(2049), call(actual_seq_qlen=[], actual_seq_kvlen=[])]),
    "limit_B_prefix": (many(1024, prefix=[0] * 1024), [many(1025, prefix=[0] * 1025)]),
    "limit_N": (call(**qkv(n1=256, n2=1)), [call(**qkv(n1=257, n2=1))]),
    "limit_D": (call(**qkv(d=512)), [call(**qkv(d=513)), call(**qkv(d=0))]),
    "seq_lens_same_batch": (call(), [call(actual_seq_kvlen=SKV[:4] + [5, 10])]),
    "seq_lens_cumulative": (call(), [call(actual_seq_qlen=[2, 1, 4, 6, 8]), call(actual_seq_qlen=[-1, 4, 4, 6, 8]),
                                            call(actual_seq_qlen=[2 ** 63 - 1, -(2 ** 63), 4, 6, 8])]),
    "t_covers_seq_lens": (call(), [call(actual_seq_qlen=[2, 4, 4, 6, 9]), call(actual_seq_kvlen=[2, 5, 5, 8, 11])]),
    "seq_lens_end_at_t": (call(), [call(actual_seq_qlen=[2, 4, 4, 6, 7]), call(actual_seq_kvlen=[2, 5, 5, 8, 9])]),
    "kv_len_nonzero": (call(), [call(actual_seq_kvlen=[2, 5, 5, 10, 10])]),
    "query_heads_match_head_num": (call(), [call(head_num=2)]),
    "n1_multiple_of_n2": (call(**qkv(n1=6, n2=3)), [call(**qkv(n1=4, n2=3)), call(**qkv(n2=0))]),
    "keep_prob_range": (call(keep_prob=0.5), [call(keep_prob=0.0), call(keep_prob=1.5), call(keep_prob=-0.1),
                                              call(keep_prob=math.nan), call(keep_prob=1e-50)]),
    "sparse_mode_supported": (call(sparse_mode=8), [call(sparse_mode=5), call(sparse_mode=9), call(sparse_mode=-1),
                                                    call(sparse_mode=5, atten_mask=CAUSAL)]),
    "atten_mask_shape": (call(sparse_mode=3, atten_mask=CAUSAL),
                         [call(atten_mask=CAUSAL), call(sparse_mode=3, atten_mask=zeros((2, 3))),
                          call(atten_mask=zeros((1, 1, 2, 3))),
                          call(sparse_mode=6, atten_mask=CAUSAL, prefix=[0] * 5)]),
    "atten_mask_no_full_row": (call(sparse_mode=1, atten_mask=np.array([[0, 1, 1], [0, 0, 1]], dtype=np.uint8)),
                               [call(sparse_mode=1, atten_mask=BAD_ROW), call(atten_mask=BAD_ROW)]),
    "mode0_tokens": (call(atten_mask=zeros((2, 3)), pre_tokens=1, next_tokens=1),
                     [call(atten_mask=zeros((2, 3)), pre_tokens=1, next_tokens=-1),
                      call(atten_mask=zeros((2, 3)), pre_tokens=-1, next_tokens=0),
                      one(3, 2, atten_mask=zeros((3, 2)), pre_tokens=0, next_tokens=5)]),
    "mode3_sq_le_skv": (call(sparse_mode=3, atten_mask=CAUSAL), [one(3, 2, sparse_mode=3, atten_mask=CAUSAL)]),
    "mode4_tokens": (call(sparse_mode=4, atten_mask=CAUSAL, pre_tokens=2, next_tokens=0),
                     [call(sparse_mode=4, atten_mask=CAUSAL, pre_tokens=-1, next_tokens=3),
                      call(sparse_mode=4, atten_mask=CAUSAL, pre_tokens=1, next_tokens=-2),
                      one(3, 2, sparse_mode=4, atten_mask=CAUSAL, pre_tokens=5, next_tokens=0)]),
    "mode6_prefix": (call(sparse_mode=6, atten_mask=PREFIX_MASK, prefix=[0, 1, 0, 1, 0]),
                     [call(sparse_mode=6, atten_mask=PREFIX_MASK),
                      call(sparse_mode=6, atten_mask=PREFIX_MASK, prefix=[0, 1, 0, 1]),
                      call(sparse_mode=6, atten_mask=PREFIX_MASK, prefix=[0, 0, 0, 1, 0]),
                      call(sparse_mode=6, atten_mask=PREFIX_MASK, prefix=[0, 1, 0, 1, 3]),
                      one(3, 2, sparse_mode=6, atten_mask=PREFIX_MASK, prefix=[-1])]),
    "mode7_tokens": (call(sparse_mode=7, atten_mask=CAUSAL, pre_tokens=2, next_tokens=0),
                     [call(sparse_mode=7, atten_mask=CAUSAL, pre_tokens=1, next_tokens=0),
                      call(sparse_mode=7, atten_mask=CAUSAL, pre_tokens=2, next_tokens=1),
                      one(3, 2, sparse_mode=7, atten_mask=CAUSAL, pre_tokens=2, next_tokens=0)]),
    "mode8_tokens": (call(sparse_mode=8, atten_mask=CAUSAL, pre_tokens=2, next_tokens=0),
                     [call(sparse_mode=8, atten_mask=CAUSAL, pre_tokens=1, next_tokens=0),
                      call(sparse_mode=8, atten_mask=CAUSAL, pre_tokens=2, next_tokens=-1)]),
    "pse_shape": (eq(real_shift=TensorSpec((1, 4, 1024, 3), FP16), sparse_mode=3, atten_mask=CAUSAL),
                  [eq(real_shift=TensorSpec(FULL_PSE_EQ + (1,), FP16)),
                   eq(real_shift=TensorSpec((3, 4, 1000, 3), FP16), sparse_mode=3, atten_mask=CAUSAL),
                   eq(real_shift=TensorSpec((2, 4, 1024, 3), FP16), sparse_mode=3, atten_mask=CAUSAL)]),
    "pse_no_empty_batch": (eq(real_shift=TensorSpec(FULL_PSE_EQ, FP16)), [call(real_shift=TensorSpec((80,), FP16))]),
    "pse_not_mode7": (eq(real_shift=TensorSpec(FULL_PSE_EQ, FP16), sparse_mode=7, pre_tokens=3, next_tokens=0),
                      [eq(real_shift=TensorSpec(FULL_PSE_EQ, FP16), sparse_mode=7, atten_mask=CAUSAL,
                          pre_tokens=3, next_tokens=0)]),
    "pse_mode8_equal_lens": (eq(real_shift=TensorSpec(FULL_PSE_EQ, FP16), sparse_mode=8, atten_mask=CAUSAL,
                                pre_tokens=2, next_tokens=0),
                             [call(**qkv(t1=4, t2=5), actual_seq_qlen=[2, 4], actual_seq_kvlen=[2, 5],
                                   real_shift=TensorSpec((4 * (4 + 6),), FP16), sparse_mode=8, atten_mask=CAUSAL,
                                   pre_tokens=2, next_tokens=0)]),
    "pse_alibi_causal": (eq(real_shift=TensorSpec((3, 4, 1024, 3), FP16), atten_mask=zeros((3, 3)),
                            pre_tokens=3, next_tokens=0),
                         [eq(real_shift=TensorSpec((3, 4, 1024, 3), FP16)),
                          eq(real_shift=TensorSpec((3, 4, 1024, 3), FP16), sparse_mode=1, atten_mask=zeros((3, 3))),
                          eq(real_shift=TensorSpec((3, 4, 1024, 3), FP16), atten_mask=zeros((3, 3)),
                             pre_tokens=1, next_tokens=1),
                          call(**qkv(t1=4, t2=5), actual_seq_qlen=[2, 4], actual_seq_kvlen=[2, 5],
                               real_shift=TensorSpec((1, 4, 1024, 3), FP16), sparse_mode=3, atten_mask=CAUSAL)]),
    "drop_mask_size": (call(drop_mask=TensorSpec((2, 5), np.uint8)), [call(drop_mask=zeros(9, np.uint8))]),
}
# (tensor_type: a TensorSpec whose slots were never set has no .shape)
VALID = [pytest.param(name, kw, id=name) for name, (kw, _) in CASES.items()]
INVALID = [pytest.param(name, kw, id=f"{name}-{i}") for name, (_, bad) in CASES.items() for i, kw in enumerate(bad)]


def test_fa_varlen_every_rule_has_cases():
    """Each contract rule has a valid and an invalid case here, and nothing else does."""
    assert set(CASES) == set(C.RULES)
    assert all(bad for _, bad in CASES.values())


@pytest.mark.parametrize("rule_name, kw", VALID)
def test_fa_varlen_valid_case(rule_name, kw):
    """The valid neighbour of each rule validates."""
    assert isinstance(validate(**kw), FaVarLenProblem)


@pytest.mark.parametrize("rule_name, kw", INVALID)
def test_fa_varlen_invalid_case(rule_name, kw):
    """Each rule's violation raises its contract status and names the rule (chip() names unknown presets)."""
    with pytest.raises(AclnnError) as info:
        validate(**kw)
    assert info.value.status == C.RULES[rule_name].status
    if kw["chip_spec"] != "nope":
        assert f"rule {rule_name}:" in info.value.message


def test_fa_varlen_status_codes_of_rule_groups():
    """Nulls are 161001, dtypes and seed limits 161002, tiling rules 561002 (contract docstring)."""
    status = {name: r.status for name, r in C.RULES.items()}
    assert {n for n, s in status.items() if s == 161001} == {"required_tensor", "required_attr", "required_seq_lens"}
    assert all(status[n] == 161002 for n in status if n.endswith("_dtype") or n.startswith("limit_"))
    assert all(status[n] == 561002 for n in ("mode0_tokens", "mode3_sq_le_skv", "mode4_tokens", "mode6_prefix",
                                              "mode7_tokens", "mode8_tokens", "n1_multiple_of_n2",
                                              "keep_prob_range", "sparse_mode_supported"))


# --- the problem's fields -----------------------------------------------------------------------------
def test_fa_varlen_problem_lengths_and_heads():
    """Per-batch lengths from cumulative arrays, zero-length batch kept, GQA group size."""
    p = validate(**call())
    assert (p.T1, p.T2, p.B, p.N1, p.N2, p.G, p.D) == (8, 10, 5, 4, 2, 2, 64)
    assert p.seq_q.dtype == np.int64 and p.seq_q.tolist() == [2, 2, 0, 2, 2]
    assert p.seq_kv.tolist() == [2, 3, 0, 3, 2]
    assert p.cu_seq_q.tolist() == [0] + SQ and p.cu_seq_kv.tolist() == [0] + SKV
    assert (p.max_sq, p.max_skv, p.out_shape, p.dtype) == (2, 3, (8, 4, 64), np.dtype(FP16))
    assert (p.mask_form, p.pse_form, p.dropout, p.band_index, p.prefix_n) == ("none", "none", False, -1, None)
    assert p.pre_tokens_lu.tolist() == [C.INT32_MAX] * 5 and p.next_tokens_lu.tolist() == [C.INT32_MAX] * 5
    with pytest.raises(ValueError):
        p.seq_q[0] = 7  # read-only


def test_fa_varlen_problem_scalars_fp32():
    """scale and keep_prob are the float32 attribute values; defaults come from the prototype."""
    p = validate(**call(scale_value=0.1, keep_prob=0.9))
    assert p.scale == float(np.float32(0.1)) and p.keep_prob == float(np.float32(0.9))
    d = validate(**call())
    assert (d.scale, d.keep_prob, d.pre_tokens, d.next_tokens, d.inner_precise, d.sparse_mode) == \
        (1.0, 1.0, C.INT32_MAX, C.INT32_MAX, 0, 0)
    assert validate(**call(keep_prob=1 + 1e-12)).keep_prob == 1.0  # rounds to 1.0f like the tiling


def test_fa_varlen_drop_mask_bytes():
    """Expected drop-mask size: ceil(N1 * sum(Sq*Skv) / 8) bytes (seed L50-52)."""
    p = validate(**call(drop_mask=zeros(10, np.uint8)))
    assert (p.dropout, p.drop_mask_bits, p.drop_mask_bytes) == (True, 4 * (4 + 6 + 0 + 6 + 4), 10)
    p = validate(**one(3, 3, **qkv(t1=3, t2=3, n1=1, n2=1), drop_mask=zeros(2, np.uint8)))
    assert (p.drop_mask_bits, p.drop_mask_bytes) == (9, 2)


@pytest.mark.parametrize("mode, pre, nxt, pre_lu, next_lu, band", [
    (0, 1, 1, [1] * 5, [1] * 5, -1),
    (1, -5, -5, [C.INT32_MAX] * 5, [C.INT32_MAX] * 5, -1),
    (2, 0, 0, [C.INT32_MAX] * 5, [0] * 5, -1),
    (3, 0, 0, [C.INT32_MAX] * 5, [0, 1, 0, 1, 0], -1),
    (4, 2, 0, [2, 1, 2, 1, 2], [0, 1, 0, 1, 0], -1),
    (7, 2, 0, [C.INT32_MAX] * 4 + [2], [0, 1, 0, 1, 0], 4),
    (8, 3, 1, [3, C.INT32_MAX, C.INT32_MAX, C.INT32_MAX, C.INT32_MAX], [1, 0, 0, 0, 0], 0),
])
def test_fa_varlen_canonical_tokens(mode, pre, nxt, pre_lu, next_lu, band):
    """Left-up tokens per batch: -pre_lu <= j - i <= next_lu (tiling.md §0, oracles.md §0)."""
    mask = zeros((2, 3)) if mode in (0, 1) else CAUSAL
    p = validate(**call(sparse_mode=mode, atten_mask=mask, pre_tokens=pre, next_tokens=nxt))
    assert p.pre_tokens_lu.tolist() == pre_lu and p.next_tokens_lu.tolist() == next_lu
    assert p.band_index == band and not p.has_invalid_rows
    assert p.mask_form == ("full" if mode in (0, 1) else "causal_2048")


def test_fa_varlen_no_mask_ignores_mode_and_tokens():
    """Without atten_mask sparse_mode/pre/next take no effect (seed L142): full computation."""
    p = validate(**one(3, 2, sparse_mode=3, pre_tokens=-9, next_tokens=-9))
    assert p.mask_form == "none" and p.pre_tokens_lu.tolist() == [C.INT32_MAX]
    assert (p.sparse_mode, p.pre_tokens, p.next_tokens) == (3, -9, -9)


@pytest.mark.parametrize("prefix, precise, rows, calc, auto", [
    ([0], 0, [True], True, True),
    ([1], 0, [False], False, False),
    ([0], 2, [True], True, False),
    ([2], 1, [False], False, False),
])
def test_fa_varlen_invalid_row_switch(prefix, precise, rows, calc, auto):
    """sparse 6 with Sq > Skv and prefix 0 leaves rows empty: invalid-row computation turns on by itself."""
    p = validate(**one(3, 2, sparse_mode=6, atten_mask=PREFIX_MASK, prefix=prefix, inner_precise=precise))
    assert p.invalid_rows.tolist() == rows and (p.invalid_row_calc, p.invalid_row_auto) == (calc, auto)
    assert p.prefix_n.tolist() == prefix and p.mask_form == "prefix_3072"
    assert p.next_tokens_lu.tolist() == [-1]


def test_fa_varlen_pse_forms():
    """Full pse is 1-D N1*sum(Sq*Skv); alibi keeps the last 1024 rows, [B|1, N1, 1024, maxSkv]."""
    full = validate(**eq(real_shift=TensorSpec(FULL_PSE_EQ, FP16)))
    assert (full.pse_form, full.pse_shape, full.pse_order) == ("full", FULL_PSE_EQ, "add_then_scale")
    for mode, mask in ((2, CAUSAL), (3, CAUSAL)):
        alibi = validate(**eq(real_shift=TensorSpec((3, 4, 1024, 3), FP16), sparse_mode=mode, atten_mask=mask))
        assert alibi.pse_form == "alibi" and alibi.pse_shape == (3, 4, 1024, 3)


def test_fa_varlen_broadcast_mask_is_not_read():
    """A zero-stride mask (timing mode) has no data to check for fully masked rows."""
    mask = np.broadcast_to(np.ones(3, dtype=np.bool_), (2, 3))
    assert validate(**call(sparse_mode=1, atten_mask=mask)).mask_form == "full"


def test_fa_varlen_timing_shapes_beyond_memory():
    """TensorSpecs of 1M tokens validate without allocating anything."""
    seq = [C.M // 2, C.M]
    p = validate(**call(**qkv(t1=C.M, t2=C.M, n1=8, n2=1, d=128), actual_seq_qlen=seq, actual_seq_kvlen=seq,
                        drop_mask=TensorSpec((8 * 2 * (C.M // 2) ** 2 // 8,), np.uint8)))
    assert p.drop_mask_bytes == 8 * 2 * (C.M // 2) ** 2 // 8 and p.G == 8


# --- fuzzing -------------------------------------------------------------------------------------------
_DTYPES = [FP16, BF16, FP32, np.int8, np.float64, np.uint8, np.bool_]
_JUNK = st.sampled_from([None, "x", 1.5, -1, [], [[1]], object(), np.zeros((2, 2)), True])


def _mostly(value, *others):
    """A strategy giving *value* about 90% of the time, else one of *others*."""
    return st.sampled_from([value] * (9 * max(1, len(others))) + list(others))


def _tensor(draw, shape, dtype):
    """A TensorSpec or, when small, a zero array of *shape*."""
    if draw(st.booleans()) or math.prod(shape) > 4096 or min(shape, default=0) < 0:
        return TensorSpec(shape, dtype)
    return np.zeros(shape, dtype=dtype)


@st.composite
def _calls(draw):
    """Mostly well-formed calls with one or two things off: lengths, modes, tokens, shapes, dtypes."""
    b = draw(st.integers(0, 4))
    sq = draw(st.lists(_mostly(2, 0, 1, 3, -1), min_size=b, max_size=b))
    skv = draw(st.lists(_mostly(2, 0, 1, 4, -1), min_size=b, max_size=b + draw(_mostly(0, 1))))
    cum_q, cum_kv = np.cumsum(sq).tolist(), np.cumsum(skv).tolist()
    t1 = max(0, draw(_mostly(cum_q[-1] if cum_q else 0, 0, 5)))
    t2 = max(0, draw(_mostly(cum_kv[-1] if cum_kv else 0, 3)))
    n1 = draw(st.sampled_from([1, 2, 4, 6]))
    n2 = draw(_mostly(1, n1, 0, 3))
    d = draw(_mostly(16, 0, 8, 513))
    base = draw(st.sampled_from([FP16, BF16, FP32]))
    dt = _mostly(base, *_DTYPES)
    max_sq, max_skv = max(sq + [0]), max(skv + [0])
    mode = draw(_mostly(draw(st.sampled_from([0, 1, 2, 3, 4, 6, 7, 8])), 5, 9, -1))
    kw = {"query": _tensor(draw, draw(_mostly((t1, n1, d), (t1, n1), (t1, n1, d, 1))), draw(dt)),
          "key": _tensor(draw, (t2, n2, d), base), "value": _tensor(draw, (t2, n2, d), draw(dt)),
          "actual_seq_qlen": cum_q, "actual_seq_kvlen": cum_kv, "head_num": draw(_mostly(n1, 0, n1 + 1)),
          "input_layout": draw(_mostly("TND", "BSH", None)), "sparse_mode": mode,
          "pre_tokens": draw(st.integers(-6, 6) | st.just(C.INT32_MAX)),
          "next_tokens": draw(st.integers(-6, 6) | st.just(C.INT32_MAX)),
          "keep_prob": draw(_mostly(1.0, 0.5, 0.0, 1.5, math.nan)),
          "scale_value": draw(st.floats(allow_nan=True)), "inner_precise": draw(_mostly(0, 1, 2, 3)),
          "chip_spec": draw(_mostly(A2, A3, P310))}
    if draw(st.booleans()):
        want = {0: (max_sq, max_skv), 1: (max_sq, max_skv), 6: (3072, 2048)}.get(mode, (2048, 2048))
        shape = draw(_mostly(want, (max_sq, max_skv), (1, 1, max_sq, max_skv), (2048, 2048)))
        mask_dt = draw(_mostly(np.bool_, np.uint8, FP16))
        kw["atten_mask"] = (np.ones(shape, mask_dt) if draw(st.booleans()) and math.prod(shape) <= 4096
                            else _tensor(draw, shape, mask_dt))
    if draw(st.integers(0, 3)) == 0:
        full = (n1 * sum(a * c for a, c in zip(sq, skv)),)
        kw["real_shift"] = _tensor(draw, draw(_mostly(full, (b, n1, 1024, max_skv), (1, n1, 1024, max_skv), (3,))),
                                   draw(dt))
    if draw(st.integers(0, 3)) == 0:
        need = -(-n1 * sum(a * c for a, c in zip(sq, skv)) // 8)
        kw["drop_mask"] = _tensor(draw, (max(0, need + draw(_mostly(0, -1, 5))),), draw(_mostly(np.uint8, np.bool_)))
    if draw(st.integers(0, 2)) == 0:
        kw["prefix"] = draw(st.lists(_mostly(0, 1, 2, -1, 5), min_size=b, max_size=b + draw(_mostly(0, 1))))
    if draw(st.integers(0, 9)) == 7:  # occasionally a junk argument anywhere
        names = sorted(kw)
        kw[names[draw(st.integers(0, len(names) - 1))]] = draw(_JUNK)
    return kw


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_calls())
def test_fa_varlen_fuzz_only_problem_or_aclnn_error(kw):
    """Random (often invalid) calls return a FaVarLenProblem or raise AclnnError, nothing else."""
    try:
        p = validate(**kw)
    except AclnnError as e:
        assert e.status in (161001, 161002, 561002)
        return
    assert isinstance(p, FaVarLenProblem)
    assert int(p.seq_q.sum()) == p.T1 and int(p.seq_kv.sum()) == p.T2 and p.N1 % p.N2 == 0


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 6)), min_size=1, max_size=6),
       st.sampled_from([0, 2, 3, 4]), st.integers(0, 8), st.integers(-2, 8))
def test_fa_varlen_valid_varlen_configs(pairs, mode, pre, nxt):
    """Consistent random lengths validate unless a sparse-mode rule refuses them (then with 561002);
    accepted configs never leave invalid rows outside sparse 6."""
    sq = [a for a, _ in pairs]
    if sum(sq) == 0:
        sq[0] = 1
    skv = [b for _, b in pairs]
    mask = (zeros((max(sq), max(skv))) if mode == 0 else CAUSAL)
    kw = call(**qkv(t1=sum(sq), t2=sum(skv)), actual_seq_qlen=np.cumsum(sq), actual_seq_kvlen=np.cumsum(skv),
              sparse_mode=mode, atten_mask=mask, pre_tokens=pre, next_tokens=nxt)
    try:
        p = validate(**kw)
    except AclnnError as e:
        assert e.status == 561002
        return
    assert p.seq_q.tolist() == sq and p.seq_kv.tolist() == skv and not p.has_invalid_rows


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=4),
       st.sampled_from([0, 1, 2, 3, 4, 6, 7, 8]), st.integers(-3, 7), st.integers(-3, 7),
       st.lists(st.integers(0, 5), min_size=4, max_size=4))
def test_fa_varlen_tokens_match_common_masks(pairs, mode, pre, nxt, prefix):
    """The problem's LU tokens (and prefix) keep exactly the elements ops.common.masks.keep_mask keeps,
    and its invalid-row flags are the rows that keep nothing (an independent element-level definition)."""
    masks = pytest.importorskip("ops.common.masks")
    sq = [a if b else 0 for a, b in pairs]
    skv = [b for _, b in pairs]
    if sum(sq) == 0:
        return
    mask = zeros((max(sq), max(skv))) if mode in (0, 1) else (PREFIX_MASK if mode == 6 else CAUSAL)
    try:
        p = validate(**call(**qkv(t1=sum(sq), t2=sum(skv)), actual_seq_qlen=np.cumsum(sq),
                            actual_seq_kvlen=np.cumsum(skv), sparse_mode=mode, atten_mask=mask,
                            pre_tokens=pre, next_tokens=nxt, prefix=prefix[:len(sq)]))
    except AclnnError as e:
        assert e.status == 561002
        return
    for b, (s1, s2) in enumerate(zip(sq, skv)):
        d = np.arange(s2)[None, :] - np.arange(s1)[:, None]
        keep = (d >= -p.pre_tokens_lu[b]) & (d <= p.next_tokens_lu[b])
        if p.prefix_n is not None:
            keep |= np.arange(s2)[None, :] < p.prefix_n[b]
        ref = masks.keep_mask(mode, pre, nxt, s1, s2, atten_mask=mask if mode in (0, 1) else None,
                              prefix=None if p.prefix_n is None else int(p.prefix_n[b]),
                              band_batch=b == p.band_index)
        assert (keep == ref).all()
        assert bool(p.invalid_rows[b]) == bool(masks.invalid_rows(ref).any())
