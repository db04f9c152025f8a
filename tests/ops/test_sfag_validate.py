"""validate() of SparseFlashAttentionGrad: a valid and an invalid call per contract rule, the canonical
problem, and a fuzz test that nothing but SfagProblem or AclnnError comes out."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npusim import TensorSpec
from npusim.chip import chip
from npusim.errors import AclnnError
from ops.sparse_flash_attention_grad import contract as C
from ops.sparse_flash_attention_grad.validate import SfagProblem, validate

A2, A3, P310 = chip("Ascend910B2"), chip("Ascend910_9391"), chip("Ascend310P3")
FP16, BF16, FP32 = np.float16, ml_dtypes.bfloat16, np.float32
K = 2048


def T(shape, dtype=FP16):
    return TensorSpec(shape, dtype)


def bsnd(B=2, S1=3, S2=5, N1=4, rope=True, dtype=FP16, **over):
    """A valid BSND call (TensorSpec data, real indices) with *over* applied."""
    kw = dict(query=T((B, S1, N1, 512), dtype), key=T((B, S2, 1, 512), dtype), value=T((B, S2, 1, 512), dtype),
              sparse_indices=np.zeros((B, S1, 1, K), np.int64), d_out=T((B, S1, N1, 512), dtype),
              out=T((B, S1, N1, 512), dtype), softmax_max=T((B, 1, S1, N1), FP32),
              softmax_sum=T((B, 1, S1, N1), FP32), query_rope=T((B, S1, N1, 64), dtype) if rope else None,
              key_rope=T((B, S2, 1, 64), dtype) if rope else None, layout="BSND", chip_spec=A2)
    kw.update(over)
    return kw


def tnd(sq=(2, 3), skv=(4, 6), N1=2, dtype=FP16, **over):
    t1, t2 = sum(sq), sum(skv)
    kw = dict(query=T((t1, N1, 512), dtype), key=T((t2, 1, 512), dtype), value=T((t2, 1, 512), dtype),
              sparse_indices=np.zeros((t1, 1, K), np.int32), d_out=T((t1, N1, 512), dtype),
              out=T((t1, N1, 512), dtype), softmax_max=T((1, t1, N1), FP32), softmax_sum=T((1, t1, N1), FP32),
              actual_seq_lengths_query=np.cumsum(sq).astype(np.int32),
              actual_seq_lengths_kv=list(np.cumsum(skv).tolist()), layout="TND", chip_spec=A2)
    kw.update(over)
    return kw


CASES = {
    "product_supported": (bsnd(chip_spec=A3), [bsnd(chip_spec=P310)]),
    "required_tensor": (bsnd(), [bsnd(query=None), bsnd(softmax_sum=None), bsnd(sparse_indices=None)]),
    "required_seq_lens": (tnd(), [tnd(actual_seq_lengths_query=None), tnd(actual_seq_lengths_kv=None)]),
    "tensor_type": (bsnd(), [bsnd(key=object()), bsnd(sparse_indices=T((2, 3, 1, K), np.int64))]),
    "data_dtype": (bsnd(dtype=BF16), [bsnd(dtype=FP32)]),
    "same_dtype": (bsnd(), [bsnd(value=T((2, 5, 1, 512), BF16)), bsnd(query_rope=T((2, 3, 4, 64), BF16))]),
    "softmax_dtype": (bsnd(), [bsnd(softmax_max=T((2, 1, 3, 4), FP16))]),
    "index_dtype": (bsnd(sparse_indices=np.zeros((2, 3, 1, K), np.int32)),
                    [bsnd(sparse_indices=np.zeros((2, 3, 1, K), np.int16))]),
    "seq_lens_type": (tnd(actual_seq_lengths_kv=np.array([4, 10], np.int64)),
                      [tnd(actual_seq_lengths_query=np.array([2.0, 5.0])), tnd(actual_seq_lengths_kv="4,10")]),
    "layout": (tnd(), [bsnd(layout="BNSD"), bsnd(layout=None)]),
    "rank": (bsnd(), [bsnd(layout="TND", actual_seq_lengths_query=[3], actual_seq_lengths_kv=[5])]),
    "scalar_type": (bsnd(scale_value=np.float32(0.5), deterministic=np.bool_(True)),
                    [bsnd(scale_value="1"), bsnd(sparse_mode=3.0), bsnd(deterministic=1), bsnd(pre_tokens=None)]),
    "block_size": (bsnd(sparse_block_size=64), [bsnd(sparse_block_size=128), bsnd(sparse_block_size=4)]),
    "tokens_value": (bsnd(pre_tokens=C.INT32_MAX, next_tokens=C.INT32_MAX),
                     [bsnd(pre_tokens=0), bsnd(next_tokens=65536)]),
    "rope_pair": (bsnd(rope=False), [bsnd(query_rope=None), bsnd(key_rope=None)]),
    "sparse_mode": (bsnd(sparse_mode=3), [bsnd(sparse_mode=m) for m in (1, 2, 4, 5, 6, 7, 8, -1)]),
    "selected_block_count": (bsnd(), [bsnd(sparse_indices=np.zeros((2, 3, 1, 1024), np.int64))]),
    "n2_one": (bsnd(), [bsnd(key=T((2, 5, 2, 512)), value=T((2, 5, 2, 512)), key_rope=T((2, 5, 2, 64))),
                        bsnd(sparse_indices=np.zeros((2, 3, 2, K), np.int64))]),
    "n1_values": (bsnd(N1=128), [bsnd(N1=3), bsnd(N1=256)]),
    "head_dim": (bsnd(), [bsnd(value=T((2, 5, 1, 256))), bsnd(query=T((2, 3, 4, 576)))]),
    "rope_dim": (bsnd(), [bsnd(query_rope=T((2, 3, 4, 32)), key_rope=T((2, 5, 1, 32)))]),
    "shape_match": (bsnd(), [bsnd(out=T((2, 3, 4, 512)), d_out=T((2, 4, 4, 512))), bsnd(value=T((2, 6, 1, 512))),
                             bsnd(key=T((3, 5, 1, 512)), value=T((3, 5, 1, 512)), key_rope=T((3, 5, 1, 64))),
                             bsnd(query_rope=T((2, 2, 4, 64)))]),
    "index_shape": (bsnd(), [bsnd(sparse_indices=np.zeros((2, 4, 1, K), np.int64))]),
    "softmax_shape": (bsnd(), [bsnd(softmax_max=T((2, 1, 3, 8), FP32)), tnd(softmax_sum=T((5, 1, 2), FP32))]),
    "limit_B": (bsnd(B=256, S1=1, S2=1), [bsnd(B=257, S1=1, S2=1)]),
    "limit_S": (bsnd(S1=1, S2=128 * 1024), [bsnd(S1=1, S2=128 * 1024 + 1), bsnd(S2=0),
                                              tnd(sq=(2, 1), skv=(4, 0))]),
    "seq_lens_batch": (tnd(), [tnd(actual_seq_lengths_kv=[4, 10, 10])]),
    "seq_lens_cumulative": (tnd(sq=(2, 0, 3), skv=(4, 2, 6)), [tnd(actual_seq_lengths_query=[3, 2]),
                                                                tnd(actual_seq_lengths_query=[2, 4]),
                                                                tnd(actual_seq_lengths_kv=[-1, 10])]),
}
VALID = [pytest.param(name, kw, id=name) for name, (kw, _) in CASES.items()]
INVALID = [pytest.param(name, kw, id=f"{name}-{i}") for name, (_, bad) in CASES.items() for i, kw in enumerate(bad)]


def test_sfag_every_rule_has_cases():
    """Each contract rule has a valid and an invalid case here, and nothing else does."""
    assert set(CASES) == set(C.RULES)
    assert all(bad for _, bad in CASES.values())


@pytest.mark.parametrize("rule_name, kw", VALID)
def test_sfag_valid_case(rule_name, kw):
    assert isinstance(validate(**kw), SfagProblem)


@pytest.mark.parametrize("rule_name, kw", INVALID)
def test_sfag_invalid_case(rule_name, kw):
    """Each rule's violation raises its contract status and names the rule."""
    with pytest.raises(AclnnError) as info:
        validate(**kw)
    assert info.value.status == C.RULES[rule_name].status
    assert f"rule {rule_name}:" in info.value.message


def test_sfag_status_groups():
    """Nulls 161001; dtypes, layout, seed limits 161002; the tiling's shape rules 561002."""
    status = {n: r.status for n, r in C.RULES.items()}
    assert {n for n, s in status.items() if s == 161001} == {"required_tensor", "required_seq_lens"}
    assert {n for n, s in status.items() if s == 561002} == {"sparse_mode", "selected_block_count", "n2_one",
                                                              "n1_values", "head_dim", "rope_dim", "softmax_shape"}


def test_sfag_problem_canonical_tokens():
    """BSND is TND with equal batches: offsets, lengths, [T1, K] indices view, rope width."""
    p = validate(**bsnd(B=2, S1=3, S2=5))
    assert (p.T1, p.T2, p.B, p.G, p.Dt) == (6, 10, 2, 4, 576)
    assert p.cu_q.tolist() == [0, 3, 6] and p.cu_kv.tolist() == [0, 5, 10]
    assert p.indices.shape == (6, K) and p.batch_of_tokens().tolist() == [0, 0, 0, 1, 1, 1]
    t = validate(**tnd(sq=(2, 0, 3), skv=(4, 2, 6)))
    assert t.seq_q.tolist() == [2, 0, 3] and t.seq_kv.tolist() == [4, 2, 6] and t.Dr == 0
    assert t.scale == 1.0


def test_sfag_empty_query_is_a_problem():
    """An empty query validates (seed: '直接返回'); its problem is empty."""
    p = validate(**bsnd(S1=0, S2=5, softmax_max=T((2, 1, 0, 4), FP32), softmax_sum=T((2, 1, 0, 4), FP32),
                        sparse_indices=np.zeros((2, 0, 1, K), np.int64)))
    assert p.empty and p.T1 == 0


_TENSORS = st.sampled_from([None, object(), T((2, 3, 4, 512)), T((2, 5, 1, 512)), T((2, 3, 4, 512), FP32),
                            T((2, 1, 3, 4), FP32), np.zeros((2, 3, 1, K), np.int64), np.zeros((2, 3, 1, 7), np.int64)])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["query", "key", "value", "sparse_indices", "d_out", "out", "softmax_max",
                                        "softmax_sum", "query_rope", "key_rope"]), _TENSORS, max_size=4),
       st.sampled_from(["BSND", "TND", "BNSD", 3]), st.sampled_from([1, 8, 3, 64, None]),
       st.sampled_from([0, 3, 2, "x"]), st.sampled_from([C.INT32_MAX, 0, None]))
def test_sfag_fuzz_only_problem_or_aclnn_error(tensors, layout, bs, mode, tokens):
    kw = bsnd(**tensors, layout=layout, sparse_block_size=bs, sparse_mode=mode, pre_tokens=tokens)
    try:
        assert isinstance(validate(**kw), SfagProblem)
    except AclnnError as e:
        assert e.status in (161001, 161002, 561002)
