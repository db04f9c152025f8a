"""validate() of FlashAttentionUnpaddingScoreGradV5: a valid and an invalid call per contract rule, and a
fuzz test that nothing but FagProblem or AclnnError ever comes out."""
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npusim import TensorSpec
from npusim.chip import chip
from npusim.errors import AclnnError
from ops.flash_attention_unpadding_score_grad_v5 import contract as C
from ops.flash_attention_unpadding_score_grad_v5.validate import FagProblem, validate

A2, A3, P310 = chip("Ascend910B2"), chip("Ascend910_9391"), chip("Ascend310P3")
FP16, BF16, FP32 = np.float16, ml_dtypes.bfloat16, np.float32
SQ, SKV = [2, 4, 4, 6, 8], [2, 5, 5, 8, 10]  # Sq = [2, 2, 0, 2, 2], Skv = [2, 3, 0, 3, 2]
EQ = [2, 4, 7]  # Sq = Skv = [2, 2, 3]
CAUSAL = np.triu(np.ones((2048, 2048), dtype=np.bool_), 1)
PREFIX_MASK = np.zeros((3072, 2048), dtype=np.bool_)


def tensors(t1=8, t2=10, n1=4, n2=2, d=64, dtype=FP16, data=False, layout="same_as_input"):
    """The required tensors as TensorSpecs (or zero arrays with data), plus head_num."""
    make = (lambda s, dt=dtype: np.zeros(s, dt)) if data else (lambda s, dt=dtype: TensorSpec(s, dt))
    sm = (t1, n1, 8) if layout == "same_as_input" else (n1, t1, 8)
    return {"query": make((t1, n1, d)), "key_in": make((t2, n2, d)), "value": make((t2, n2, d)),
            "dy": make((t1, n1, d)), "attention_in": make((t1, n1, d)), "softmax_max": make(sm, FP32),
            "softmax_sum": make(sm, FP32), "head_num": n1, "softmax_in_layout": layout}


def call(**over):
    kw = {**tensors(), "query_rope": None, "key_in_rope": None, "actual_seq_qlen": SQ, "actual_seq_kvlen": SKV,
          "input_layout": "TND", "chip_spec": A2}
    kw.update(over)
    return kw


def eq(**over):
    return call(**{**tensors(t1=7, t2=7), "actual_seq_qlen": EQ, "actual_seq_kvlen": EQ, **over})


def one(sq, skv, **over):
    return call(**{**tensors(t1=sq, t2=skv), "actual_seq_qlen": [sq], "actual_seq_kvlen": [skv], **over})


def many(b, **over):
    seq = list(range(1, b + 1))
    return call(**{**tensors(t1=b, t2=b, n1=1, n2=1, d=16), "actual_seq_qlen": seq, "actual_seq_kvlen": seq, **over})


def rope(t1=8, t2=10, n1=4, n2=2, dr=64, dtype=BF16):
    return {"query_rope": TensorSpec((t1, n1, dr), dtype), "key_in_rope": TensorSpec((t2, n2, dr), dtype)}


def zeros(shape, dtype=np.bool_):
    return np.zeros(shape, dtype=dtype)


ALIBI = TensorSpec((3, 4, 1024, 3), FP16)
SLOPE = TensorSpec((4,), FP32)


class _NoDtype:
    shape = (8, 4, 64)


CASES = {
    "product_supported": (call(chip_spec=A3), [call(chip_spec=P310), call(chip_spec=42), call(chip_spec="nope")]),
    "required_tensor": (call(), [call(query=None), call(key_in=None), call(value=None), call(dy=None),
                                 call(softmax_max=None), call(softmax_sum=None), call(attention_in=None)]),
    "required_attr": (call(), [call(input_layout=None), call(head_num=None)]),
    "required_seq_lens": (call(), [call(actual_seq_qlen=None), call(actual_seq_kvlen=None)]),
    "tensor_type": (call(**tensors(data=True)), [call(query="abc"), call(dy=_NoDtype())]),
    "qkv_dtype": (call(**tensors(dtype=BF16)), [call(**tensors(dtype=np.int8)), call(**tensors(dtype=np.float64))]),
    "qkv_same_dtype": (call(**tensors(dtype=FP32)), [call(key_in=TensorSpec((10, 2, 64), BF16)),
                                                     call(dy=TensorSpec((8, 4, 64), FP32)),
                                                     call(attention_in=TensorSpec((8, 4, 64), BF16))]),
    "rope_dtype": (call(**tensors(dtype=BF16), **rope()), [call(**rope()), call(**tensors(dtype=BF16),
                                                                               **rope(dtype=FP16))]),
    "pse_dtype": (eq(pse_shift=TensorSpec((4,), FP32), pse_type=2),
                  [eq(pse_shift=TensorSpec((4,), FP16), pse_type=3), eq(pse_shift=TensorSpec(ALIBI.shape, FP32),
                                                                         sparse_mode=3, atten_mask=CAUSAL)]),
    "drop_mask_dtype": (call(drop_mask=zeros(10, np.uint8)), [call(drop_mask=zeros(10, np.bool_))]),
    "atten_mask_dtype": (call(atten_mask=zeros((2, 3), np.uint8)), [call(atten_mask=zeros((2, 3), np.float16))]),
    "softmax_dtype": (call(), [call(softmax_max=TensorSpec((8, 4, 8), FP16)),
                               call(softmax_sum=TensorSpec((8, 4, 8), np.float64))]),
    "sink_dtype": (call(sink_in=TensorSpec((4,), FP32)), [call(sink_in=TensorSpec((4,), BF16))]),
    "reserved_none": (call(padding_mask=None, softmax_in=None), [call(padding_mask=TensorSpec((1,), FP16)),
                                                                 call(softmax_in=TensorSpec((8, 4, 8), FP32))]),
    "input_layout": (call(), [call(input_layout="BSH"), call(input_layout="tnd"), call(input_layout=3)]),
    "softmax_in_layout": (call(**tensors(layout="")), [call(softmax_in_layout="TND"), call(softmax_in_layout=None)]),
    "head_num_positive": (call(), [call(head_num=0), call(head_num=4.0), call(head_num=True)]),
    "qkv_rank": (call(), [call(query=TensorSpec((8, 4, 64, 1), FP16)), call(dy=TensorSpec((8, 256), FP16))]),
    "head_dim_equal": (call(), [call(key_in=TensorSpec((10, 2, 32), FP16), value=TensorSpec((10, 2, 32), FP16))]),
    "kv_same_shape": (call(), [call(value=TensorSpec((10, 1, 64), FP16))]),
    "dy_shape": (call(), [call(dy=TensorSpec((8, 4, 32), FP16)), call(attention_in=TensorSpec((8, 2, 64), FP16))]),
    "rope_shape": (call(**tensors(dtype=BF16), **rope(dr=32)),
                   [call(**tensors(dtype=BF16), query_rope=rope()["query_rope"]),
                    call(**tensors(dtype=BF16), **rope(t1=7)),
                    call(**tensors(dtype=BF16), query_rope=TensorSpec((8, 4, 32), BF16),
                         key_in_rope=TensorSpec((10, 2, 64), BF16))]),
    "softmax_shape": (call(**tensors(layout="")), [call(softmax_max=TensorSpec((4, 8, 8), FP32)),
                                                   call(softmax_sum=TensorSpec((8, 4, 1), FP32))]),
    "sink_shape": (call(sink_in=TensorSpec((4,), FP32)), [call(sink_in=TensorSpec((2,), FP32)),
                                                         call(sink_in=TensorSpec((1, 4), FP32))]),
    "seq_lens_type": (call(actual_seq_qlen=np.array(SQ, dtype=np.int32), actual_seq_kvlen=tuple(SKV)),
                      [call(actual_seq_qlen=[2.0, 4, 4, 6, 8]), call(actual_seq_qlen="24468")]),
    "prefix_type": (call(prefix=[0]), [call(prefix="x"), call(prefix=[[1]])]),
    "start_idx_type": (call(q_start_idx=[0], kv_start_idx=(3,)), [call(q_start_idx=[0, 1]), call(kv_start_idx=2)]),
    "scalar_type": (call(scale_value=np.float64(0.125), keep_prob=1, pre_tokens=np.int64(3)),
                    [call(scale_value="1"), call(keep_prob=None), call(pre_tokens=1.5), call(sparse_mode=True),
                     call(pse_type=1.0), call(inner_precise=2 ** 70)]),
    "limit_T": (one(16, 16), [one(C.M + 1, 1, **tensors(t1=C.M + 1, t2=1)), call(**tensors(t1=0),
                                                                                 actual_seq_qlen=[0] * 5)]),
    "limit_B": (many(3000), [call(actual_seq_qlen=[], actual_seq_kvlen=[])]),
    "limit_B_prefix": (many(1024, prefix=[0] * 1024), [many(1025, prefix=[0] * 1025)]),
    "limit_N": (call(**tensors(n1=256, n2=1)), [call(**tensors(n1=257, n2=1))]),
    "limit_D": (call(**tensors(d=768)), [call(**tensors(d=769)), call(**tensors(d=0))]),
    "seq_lens_same_batch": (call(), [call(actual_seq_kvlen=SKV[:4] + [5, 10])]),
    "seq_lens_cumulative": (call(), [call(actual_seq_qlen=[2, 1, 4, 6, 8]), call(actual_seq_qlen=[-1, 4, 4, 6, 8])]),
    "t_covers_seq_lens": (call(), [call(actual_seq_qlen=[2, 4, 4, 6, 9])]),
    "seq_lens_end_at_t": (call(), [call(actual_seq_kvlen=[2, 5, 5, 8, 9])]),
    "kv_len_nonzero": (call(), [call(actual_seq_kvlen=[2, 5, 5, 10, 10])]),
    "query_heads_match_head_num": (call(), [call(head_num=2, softmax_max=TensorSpec((8, 2, 8), FP32),
                                                 softmax_sum=TensorSpec((8, 2, 8), FP32))]),
    "n1_multiple_of_n2": (call(**tensors(n1=6, n2=3)), [call(**tensors(n1=4, n2=3))]),
    "keep_prob_range": (call(keep_prob=0.5, drop_mask=zeros(10, np.uint8)),
                        [call(keep_prob=0.0), call(keep_prob=1.5), call(keep_prob=math.nan)]),
    "keep_prob_needs_drop_mask": (call(keep_prob=0.9, drop_mask=zeros(10, np.uint8)), [call(keep_prob=0.9)]),
    "sparse_mode_supported": (call(sparse_mode=8), [call(sparse_mode=5), call(sparse_mode=9)]),
    "rope_not_mode6": (call(**tensors(dtype=BF16), **rope(), sparse_mode=3, atten_mask=CAUSAL),
                       [call(**tensors(dtype=BF16), **rope(), sparse_mode=6, atten_mask=PREFIX_MASK,
                             prefix=[0, 1, 0, 1, 0])]),
    "rope_no_dropout": (call(**tensors(dtype=BF16), **rope()),
                        [call(**tensors(dtype=BF16), **rope(), drop_mask=zeros(10, np.uint8))]),
    "atten_mask_shape": (call(sparse_mode=3, atten_mask=CAUSAL),
                         [call(atten_mask=CAUSAL), call(sparse_mode=3, atten_mask=zeros((2, 3)))]),
    "mode0_tokens": (call(atten_mask=zeros((2, 3)), pre_tokens=1, next_tokens=1),
                     [call(atten_mask=zeros((2, 3)), pre_tokens=1, next_tokens=-1)]),
    "mode3_sq_le_skv": (call(sparse_mode=3, atten_mask=CAUSAL), [one(3, 2, sparse_mode=3, atten_mask=CAUSAL)]),
    "mode4_tokens": (call(sparse_mode=4, atten_mask=CAUSAL, pre_tokens=2, next_tokens=0),
                     [call(sparse_mode=4, atten_mask=CAUSAL, pre_tokens=-1, next_tokens=3)]),
    "mode6_prefix": (call(sparse_mode=6, atten_mask=PREFIX_MASK, prefix=[0, 1, 0, 1, 0]),
                     [call(sparse_mode=6, atten_mask=PREFIX_MASK), call(sparse_mode=6, atten_mask=PREFIX_MASK,
                                                                        prefix=[0, 1, 0, 1, 3])]),
    "mode7_tokens": (call(sparse_mode=7, atten_mask=CAUSAL, pre_tokens=2, next_tokens=0),
                     [call(sparse_mode=7, atten_mask=CAUSAL, pre_tokens=1, next_tokens=0)]),
    "mode8_tokens": (call(sparse_mode=8, atten_mask=CAUSAL, pre_tokens=2, next_tokens=0),
                     [call(sparse_mode=8, atten_mask=CAUSAL, pre_tokens=1, next_tokens=0)]),
    "pse_type_value": (eq(pse_shift=SLOPE, pse_type=3), [call(pse_type=4), call(pse_type=-1)]),
    "pse_type_without_pse": (call(pse_type=1), [call(pse_type=0), call(pse_type=2)]),
    "pse_shape": (eq(pse_shift=TensorSpec((3, 4), FP32), pse_type=2),
                  [eq(pse_shift=TensorSpec((2, 4), FP32), pse_type=2),
                   eq(pse_shift=TensorSpec((3, 4, 1000, 3), FP16), sparse_mode=3, atten_mask=CAUSAL),
                   eq(pse_shift=TensorSpec((4 * 17,), FP16))]),
    "pse_no_empty_batch": (eq(pse_shift=SLOPE, pse_type=2), [call(pse_shift=SLOPE, pse_type=2)]),
    "pse_not_mode7": (eq(pse_shift=SLOPE, pse_type=2, sparse_mode=7, pre_tokens=3, next_tokens=0),
                      [eq(pse_shift=SLOPE, pse_type=2, sparse_mode=7, atten_mask=CAUSAL, pre_tokens=3,
                          next_tokens=0)]),
    "pse_mode8_equal_lens": (eq(pse_shift=SLOPE, pse_type=2, sparse_mode=8, atten_mask=CAUSAL, pre_tokens=2,
                                next_tokens=0),
                             [call(**tensors(t1=4, t2=5), actual_seq_qlen=[2, 4], actual_seq_kvlen=[2, 5],
                                   pse_shift=SLOPE, pse_type=2, sparse_mode=8, atten_mask=CAUSAL, pre_tokens=2,
                                   next_tokens=0)]),
    "pse_alibi_causal": (eq(pse_shift=ALIBI, atten_mask=zeros((3, 3)), pre_tokens=3, next_tokens=0),
                         [eq(pse_shift=ALIBI), eq(pse_shift=ALIBI, sparse_mode=1, atten_mask=zeros((3, 3)))]),
    "pse_slope_equal_lens": (eq(pse_shift=SLOPE, pse_type=3),
                             [call(**tensors(t1=4, t2=5), actual_seq_qlen=[2, 4], actual_seq_kvlen=[2, 5],
                                   pse_shift=SLOPE, pse_type=2)]),
    "pse_slope_mode8_start": (eq(pse_shift=SLOPE, pse_type=2, sparse_mode=8, atten_mask=CAUSAL, pre_tokens=2,
                                 next_tokens=0, q_start_idx=[5], kv_start_idx=[5]),
                              [eq(pse_shift=SLOPE, pse_type=2, sparse_mode=8, atten_mask=CAUSAL, pre_tokens=2,
                                  next_tokens=0, q_start_idx=[1])]),
    "drop_mask_size": (call(drop_mask=TensorSpec((2, 5), np.uint8)), [call(drop_mask=zeros(9, np.uint8))]),
}
VALID = [pytest.param(name, kw, id=name) for name, (kw, _) in CASES.items()]
INVALID = [pytest.param(name, kw, id=f"{name}-{i}") for name, (_, bad) in CASES.items() for i, kw in enumerate(bad)]


def test_fag_every_rule_has_cases():
    """Each contract rule has a valid and an invalid case here, and nothing else does."""
    assert set(CASES) == set(C.RULES)
    assert all(bad for _, bad in CASES.values())


@pytest.mark.parametrize("rule_name, kw", VALID)
def test_fag_valid_case(rule_name, kw):
    assert isinstance(validate(**kw), FagProblem)


@pytest.mark.parametrize("rule_name, kw", INVALID)
def test_fag_invalid_case(rule_name, kw):
    """Each violation raises its rule's status and names the rule (chip() names unknown presets itself)."""
    with pytest.raises(AclnnError) as info:
        validate(**kw)
    assert info.value.status == C.RULES[rule_name].status, info.value.message
    if kw["chip_spec"] != "nope":
        assert f"rule {rule_name}:" in info.value.message


def test_fag_problem_fields():
    """Lengths, canonical tokens and forms of a causal GQA call with slopes."""
    p = validate(**eq(pse_shift=TensorSpec((3, 4), FP32), pse_type=3, sparse_mode=2, atten_mask=CAUSAL,
                      q_start_idx=[2], sink_in=TensorSpec((4,), FP32)))
    assert p.seq_q.tolist() == [2, 2, 3] and p.cu_seq_kv.tolist() == [0, 2, 4, 7]
    assert (p.N1, p.N2, p.G, p.D, p.rope_d) == (4, 2, 2, 64, 0)
    assert p.pse_form == "slope" and p.pse_type == 3 and p.q_start == 2 and p.kv_start == 0 and p.sink
    assert p.mask_form == "causal_2048" and p.next_tokens_lu.tolist() == [0, 0, 0]
    r = validate(**call(**tensors(dtype=BF16), **rope(dr=32)))
    assert r.rope_d == 32 and r.mask_form == "none"


_any = st.one_of(st.none(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=3),
                 st.sampled_from([TensorSpec((8, 4, 64), FP16), TensorSpec((4,), FP32), zeros((2, 3)), [1, 2]]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(call().keys() - {"chip_spec"}) + ["pse_shift", "drop_mask", "atten_mask", "sink_in",
                                                               "prefix", "q_start_idx", "pse_type",
                                                               "sparse_mode", "keep_prob"]), _any)
def test_fag_validate_fuzz(name, value):
    """Any single bad argument gives a FagProblem or an AclnnError, never another exception."""
    try:
        assert isinstance(validate(**call(**{name: value})), FagProblem)
    except AclnnError as e:
        assert e.status in (161001, 161002, 561002)
