"""FlashAttentionVarLenScore under random calls: only an OpResult (bit-exact to the golden) or an AclnnError."""
import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ops import AclnnError, flash_attention_var_len_score
from ops.common.masks import compressed_causal_mask
from tests.ops.test_fa_varlen_golden import assert_bitexact, golden_of

DTYPES = (np.float16, ml_dtypes.bfloat16, np.float32)
CAUSAL = compressed_causal_mask().astype(bool)


@st.composite
def calls(draw):
    """A small mostly valid call, sometimes broken in one or two ways."""
    nb = draw(st.integers(1, 3))
    sq = draw(st.lists(st.integers(0, 40), min_size=nb, max_size=nb))
    skv = [max(s, draw(st.integers(1, 48))) for s in sq]
    n2 = draw(st.sampled_from([1, 2]))
    n1 = n2 * draw(st.sampled_from([1, 2]))
    d = draw(st.sampled_from([16, 40, 64]))
    dt = draw(st.sampled_from(DTYPES))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    t1, t2 = max(sum(sq), 1), max(sum(skv), 1)
    q = rng.uniform(-1, 1, (t1, n1, d)).astype(dt)
    k = rng.uniform(-1, 1, (t2, n2, d)).astype(dt)
    v = rng.uniform(-1, 1, (t2, n2, d)).astype(dt)
    kw = dict(actual_seq_qlen=np.cumsum(sq).tolist(), actual_seq_kvlen=np.cumsum(skv).tolist(), head_num=n1,
              scale_value=draw(st.sampled_from([1.0, 0.125])), keep_prob=1.0)
    mode = draw(st.sampled_from([0, 2, 3]))
    if mode:
        kw.update(sparse_mode=mode, atten_mask=CAUSAL)
    for _ in range(draw(st.integers(0, 2))):  # break something
        what = draw(st.sampled_from(["head_num", "keep_prob", "seqlen", "mode", "dtype", "layout", "none"]))
        if what == "head_num":
            kw["head_num"] = draw(st.integers(-1, 5))
        elif what == "keep_prob":
            kw["keep_prob"] = draw(st.sampled_from([0.0, -0.5, 1.5]))
        elif what == "seqlen":
            kw["actual_seq_qlen"] = list(reversed(kw["actual_seq_qlen"])) + [3]
        elif what == "mode":
            kw["sparse_mode"] = draw(st.sampled_from([5, 9, -1]))
        elif what == "dtype":
            k = k.astype(np.int8)
        elif what == "layout":
            kw["input_layout"] = "BSH"
        else:
            v = None
    return q, k, v, kw


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls())
def test_fa_varlen_fuzz_result_or_aclnn_error(call):
    """Random calls end in an AclnnError or in outputs equal to the golden bit for bit."""
    q, k, v, kw = call
    try:
        res = flash_attention_var_len_score(q, k, v, **kw)
    except AclnnError as e:
        assert e.status in (161001, 161002, 561002)
        return
    assert_bitexact(res, golden_of(res, q, k, v, kw))
