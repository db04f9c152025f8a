"""Estimate mode of PromptFlashAttentionV2: agreement with timing mode, timeout verdicts, refusals."""
import numpy as np
import pytest

from npusim import TensorSpec
from ops import AclnnError, prompt_flash_attention_v2
from ops.common.masks import compressed_causal_mask

CAUSAL = compressed_causal_mask().astype(bool)


def _call(b, n, nkv, s1, s2, d, sparse, mode, chip="Ascend910B2", **kw):
    q, kv = TensorSpec((b, n, s1, d), np.float16), TensorSpec((b, nkv, s2, d), np.float16)
    if sparse == 2:
        kw["atten_mask"] = CAUSAL
    else:
        kw.setdefault("pre_tokens", 2147483647)
        kw.setdefault("next_tokens", 2147483647)
    return prompt_flash_attention_v2(q, kv, kv, num_heads=n, num_key_value_heads=nkv, input_layout="BNSD",
                                     scale_value=1 / np.sqrt(d), sparse_mode=sparse, mode=mode, chip=chip, **kw)


@pytest.mark.parametrize("cfg", [
    (1, 8, 8, 2048, 2048, 128, 2, "Ascend910B2"),
    (1, 8, 8, 2048, 2048, 128, 0, "Ascend910B4"),
    (2, 4, 4, 1000, 1500, 64, 0, "Ascend910B2"),
    (1, 16, 2, 1024, 1024, 128, 2, "Ascend910B2"),
    (1, 1, 1, 8192, 8192, 128, 0, "Ascend910B2"),
    (1, 4, 4, 4096, 4096, 256, 2, "Ascend910B2"),  # +6.7% with two copies of the busiest core (issue 13)
], ids=lambda c: "B{}N{}Nkv{}S{}x{}D{}sp{}-{}".format(*c))
def test_pfa_estimate_within_3pct_of_timing(cfg):
    """The estimate is within 3% of timing mode (benchmarks/estimate_accuracy_pfa.py runs the full grid)."""
    *shape, chip = cfg
    est = _call(*shape, "estimate", chip=chip)
    tim = _call(*shape, "timing", chip=chip)
    assert est.outputs is None and est.trace is None
    assert abs(est.time_us / tim.time_us - 1) <= 0.03


def test_pfa_estimate_is_deterministic():
    a = _call(1, 8, 8, 4096, 4096, 128, 2, "estimate")
    b = _call(1, 8, 8, 4096, 4096, 128, 2, "estimate")
    assert a.cycles == b.cycles


def test_pfa_common_shape_far_below_timeout():
    """B=1, N=32, S=8192, D=128 predicts milliseconds against the 1091 s AI Core timeout."""
    res = _call(1, 32, 32, 8192, 8192, 128, 0, "estimate")
    assert not res.timeout.exceeded
    assert res.timeout.predicted_s < 1e-4 * res.timeout.limit_s
    assert res.timeout.limit_s == 1091.0
    assert "fits" in res.timeout.advice


@pytest.mark.parametrize("b, n, s, d, nkv", [(1, 20, 2097152, 256, 1), (1, 2, 20971520, 256, 2),
                                             (20, 1, 2097152, 256, 1), (1, 10, 2097152, 512, 1)])
def test_pfa_seed_timeout_shapes_exceed_on_910b2(b, n, s, d, nkv):
    """The four shapes the seed lists as timing out exceed 1091 s on Ascend910B2 (docs/timeouts.md), and the
    advice splits S into launches that each fit."""
    res = _call(b, n, nkv, s, s, d, 0, "estimate")
    assert res.timeout.exceeded
    assert "split S" in res.timeout.advice and "launches" in res.timeout.advice


@pytest.mark.parametrize("mode", ["timing", "full"])
def test_pfa_refuses_simulation_too_large_and_points_to_estimate(mode):
    with pytest.raises(AclnnError, match="use mode='estimate'") as e:
        _call(1, 20, 1, 2097152, 2097152, 256, 0, mode)
    assert e.value.status == 161002
