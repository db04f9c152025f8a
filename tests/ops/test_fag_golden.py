"""FlashAttentionUnpaddingScoreGradV5 on the simulator, bit-exact against the independent golden over a
pairwise grid of the modelled features, plus accuracy against the float64 reference (NUMERICS.md)."""
import numpy as np
import pytest

from npusim.types import SubCore
from ops import AclnnError, flash_attention_unpadding_score_grad_v5 as fag
from ops.common.accuracy import fa_rule_ok
from ops.flash_attention_unpadding_score_grad_v5.golden import fag_golden
from ops.flash_attention_unpadding_score_grad_v5.reference import fag_reference
from tests.ops.fag_cases import golden_of, make_case, ref_args
from tests.ops.helpers import bits

# pairwise over dtype, D, GQA, mask mode, softmax layout, lengths (incl. Sq = 0 and multi-block batches)
GRID = {
    "fp16_d16_nomask": dict(seq_q=[16], seq_kv=[16], n1=1, n2=1, d=16),
    "bf16_d40_gqa_varlen_sink": dict(seq_q=[70, 0, 33], seq_kv=[130, 40, 33], n1=4, n2=2, d=40, dtype="bf16",
                                     sink=True),
    "fp16_d64_mode2_layout": dict(seq_q=[300, 129], seq_kv=[300, 129], n1=2, n2=1, d=64, sparse_mode=2,
                                  causal=True, layout=""),
    "bf16_d128_mode3_rd": dict(seq_q=[100, 129], seq_kv=[300, 200], n1=2, n2=2, d=128, dtype="bf16",
                               sparse_mode=3, causal=True),
    "fp16_d144_mode3_gqa_layout_sink": dict(seq_q=[129], seq_kv=[257], n1=4, n2=1, d=144, sparse_mode=3,
                                            causal=True, layout="", sink=True),
    "bf16_d16_mode2_short": dict(seq_q=[5, 17, 1], seq_kv=[5, 17, 1], n1=2, n2=1, d=16, dtype="bf16",
                                 sparse_mode=2, causal=True),
    "fp16_d32_mode1_fullmask": dict(seq_q=[150, 40], seq_kv=[200, 40], n1=2, n2=1, d=32, full_mask=True,
                                    sparse_mode=1),
    "bf16_d32_mode0_band_mask_sink": dict(seq_q=[150, 40], seq_kv=[200, 60], n1=2, n2=2, d=32, dtype="bf16",
                                          full_mask=True, sparse_mode=0, pre=160, nxt=70, sink=True),
    "fp16_d48_mode4_band_layout": dict(seq_q=[150, 140], seq_kv=[200, 300], n1=2, n2=1, d=48, causal=True,
                                       sparse_mode=4, pre=100, nxt=20, layout=""),
    "bf16_d32_mode7": dict(seq_q=[150, 40, 140], seq_kv=[200, 140, 150], n1=2, n2=1, d=32, dtype="bf16",
                           causal=True, sparse_mode=7, pre=200, nxt=-5),
    "bf16_d40_rope24_mode3": dict(seq_q=[150, 40], seq_kv=[200, 60], n1=2, n2=1, d=40, dtype="bf16", rope_d=24,
                                  causal=True, sparse_mode=3),
    "fp16_d32_mode8_sink": dict(seq_q=[150, 40], seq_kv=[200, 140], n1=2, n2=1, d=32, causal=True, sparse_mode=8,
                                pre=300, nxt=10, sink=True),
}


def _run(kw, **over):
    a, p = make_case(**kw)
    res = fag(**a, **over)
    return a, p, res, golden_of(a, p, res)


@pytest.mark.parametrize("name", GRID)
def test_fag_bit_exact_against_golden(name):
    a, p, res, gold = _run(GRID[name])
    extra = ({"dsink"} if p.sink else set()) | ({"dq_rope", "dk_rope"} if p.rope_d else set())
    assert set(gold) == set(res.outputs) == {"dq", "dk", "dv"} | extra
    for out in gold:
        assert res.outputs[out].dtype == (np.float32 if out == "dsink" else p.dtype)
        np.testing.assert_array_equal(bits(res.outputs[out]), bits(gold[out]), err_msg=out)
    cube = [e for e in res.extra["atomics"] if e[2] == SubCore.AIC]
    assert len(cube) == _expected_adds(res.tiling, p)
    sink_adds = 2 * res.tiling.sections if p.sink and res.tiling.dsinkCores else 0  # SinkOut: each AIV, each CV block
    assert len(res.extra["atomics"]) - len(cube) == sink_adds


def _expected_adds(t, p) -> int:
    """Atomic adds of a run: basic, one Fixpipe per 128 columns of dq, dk, dv (and the rope outputs) per block;
    SameAB, the same per 128-row strip (dq, dq_rope) and per 128-column strip (dk, dk_rope, dv) of a CV block."""
    d, r = -(-p.D // 128), -(-p.rope_d // 128)
    if t.template == "basic":
        return t.blocks * (3 * d + 2 * r)
    total = 0
    for s in range(t.sections):
        blk = range(t.secStart[s], t.secStart[s + 1])
        total += len({t.blkS1o[i] for i in blk}) * (d + r) + len({t.blkS2o[i] for i in blk}) * (2 * d + r)
    return total


@pytest.mark.parametrize("name", ["bf16_d40_gqa_varlen_sink", "fp16_d64_mode2_layout", "bf16_d32_mode0_band_mask_sink",
                                  "bf16_d32_mode7", "bf16_d40_rope24_mode3"])
def test_fag_accuracy_against_float64(name):
    """NUMERICS.md check 2: the flash-attention gradient rule (factor 3) against the float64 reference."""
    a, p, res, _ = _run(GRID[name])
    args = (p, a["query"], a["key_in"], a["value"], a["dy"], a["softmax_max"], a["softmax_sum"], a["attention_in"])
    ref = fag_reference(*args, **ref_args(a))
    low = fag_reference(*args, **ref_args(a), dtype=p.dtype)
    for out in ref:
        ok, info = fa_rule_ok(res.outputs[out], ref[out], low[out], factor=3.0)
        assert ok, (out, info)


def test_fag_one_core_and_replay():
    """blockDim override: one core gives the same bits as the golden's core-after-core order, and a run
    repeats bit for bit with the same atomic order."""
    kw = GRID["bf16_d40_gqa_varlen_sink"]
    a, p, res, gold = _run(kw, tiling={"blockDim": 1})
    assert res.block_dim == 1
    t = res.tiling  # the run's CV blocks: their vector tiles decide the dsink partials' order
    assert t.template != "basic"
    plain = fag_golden(p, a["query"], a["key_in"], a["value"], a["dy"], a["softmax_max"], a["softmax_sum"],
                       a["attention_in"], block_dim=1, sink_in=a["sink_in"], cv=(t.s1CvInner, t.s2CvInner),
                       trim=t.cvTrim, dsink_aivs=t.dsinkCores)
    for out in plain:
        np.testing.assert_array_equal(bits(res.outputs[out]), bits(plain[out]))
    again = fag(**a, tiling={"blockDim": 1})
    assert again.extra["atomics"] == res.extra["atomics"]


def test_fag_golden_rejects_a_wrong_log():
    a, p, res, _ = _run(GRID["fp16_d16_nomask"])
    t = res.tiling
    log = list(reversed(res.extra["atomics"]))
    with pytest.raises(ValueError):
        fag_golden(p, a["query"], a["key_in"], a["value"], a["dy"], a["softmax_max"], a["softmax_sum"],
                   a["attention_in"], block_dim=t.blockDim, atomics=log)


def test_fag_timing_mode_and_three_launches():
    """Timing mode takes TensorSpecs; the operator time is pre + main + post."""
    from npusim import TensorSpec
    a, p = make_case(**GRID["fp16_d64_mode2_layout"])
    spec = {k: (TensorSpec(v.shape, v.dtype) if isinstance(v, np.ndarray) and k != "atten_mask" else v)
            for k, v in a.items()}
    res = fag(**spec, mode="timing")
    assert res.outputs is None
    launches = res.extra["launches"]
    assert res.cycles == sum(r.cycles for r in launches.values()) and launches["main"].cycles > launches["pre"].cycles
    full = fag(**a)
    assert full.cycles == res.cycles


@pytest.mark.parametrize("name,template", [("bf16_d32_mode7", "sameab_det"),
                                           ("fp16_d144_mode3_gqa_layout_sink", "sameab_det"),
                                           ("bf16_d40_gqa_varlen_sink", "basic_det"),
                                           ("bf16_d40_rope24_mode3", "basic_det"),
                                           ("fp16_d64_mode2_layout", "basic_bn2")])
def test_fag_deterministic_bit_exact(name, template):
    """deterministic=True runs the template CANN's registry picks (D = 40 padded to 48 by the aclnn layer: basic_det
    takes it, with the sink and the rope outputs here): SameAB's IS_DTM rounds and basic_det's rounds (bit-exact
    with the golden's ordered reduction, no atomic log needed, dearer in modeled time than the atomic run), or the
    S1s2Bn2 (batch, key/value head) split (one writer per output row: no atomic log needed either). The generic
    template, which CANN runs with atomics in both modes: test_fag_templates."""
    a, p = make_case(**GRID[name])
    res = fag(**a, deterministic=True)
    t = res.tiling
    assert t.template == template and t.deterministic
    assert t.sabDtm == template.endswith("_det")
    gold = golden_of(a, p, res, atomics=None)
    if template.endswith("_det"):
        assert res.time_us > fag(**a).time_us
    for out in gold:
        np.testing.assert_array_equal(bits(res.outputs[out]), bits(gold[out]), err_msg=out)


def test_fag_deterministic_bad_value():
    a, _ = make_case(seq_q=[16], seq_kv=[16], n1=1, n2=1, d=16)
    with pytest.raises(AclnnError):
        fag(**a, deterministic="yes")


def test_fag_aclnn_facade():
    """Two-stage interface: outputs written in place equal the function's; a bad call returns its status."""
    from ops.aclnn import (aclnnFlashAttentionUnpaddingScoreGradV5,
                           aclnnFlashAttentionUnpaddingScoreGradV5GetWorkspaceSize)
    a, p = make_case(**GRID["bf16_d16_mode2_short"])
    outs = [np.zeros(p.q_shape, p.dtype), np.zeros(p.kv_shape, p.dtype), np.zeros(p.kv_shape, p.dtype)]
    pos = [a["query"], None, a["key_in"], None, a["value"], a["dy"], None, None, None, a["atten_mask"],
           a["softmax_max"], a["softmax_sum"], None, a["attention_in"], None, None, a["actual_seq_qlen"],
           a["actual_seq_kvlen"], None, None, a["scale_value"], 1.0, 2147483647, 2147483647, a["head_num"], "TND", 0,
           a["sparse_mode"], 1, "same_as_input", outs[0], None, outs[1], None, outs[2], None, None]
    status, ws, ex = aclnnFlashAttentionUnpaddingScoreGradV5GetWorkspaceSize(*pos)
    assert status == 0 and ws > 0
    assert aclnnFlashAttentionUnpaddingScoreGradV5(None, ws, ex, None) == 0
    direct = fag(**a)
    for got, name in zip(outs, ("dq", "dk", "dv")):
        np.testing.assert_array_equal(bits(got), bits(direct.outputs[name]))
    bad = list(pos)
    bad[25] = "BSH"
    assert aclnnFlashAttentionUnpaddingScoreGradV5GetWorkspaceSize(*bad)[0] == 161002


def test_sanitize_checks_the_three_launches_as_one_stream():
    """sanitize=True: the pre, main and post kernels checked with stream order between them (the post
    kernel reads workspace the main kernel wrote); zero reports, including the dsink reduction of PostDsink
    (it once let the post loop's first CopyIn overwrite UB its last Adds read). Estimate mode: None."""
    a, _ = make_case(seq_q=[70, 33], seq_kv=[130, 33], n1=4, n2=2, d=40, dtype="bf16", sink=True)
    res = fag(**a, sanitize=True)
    assert res.sanitizer is not None and len(res.sanitizer) == 0, res.sanitizer.summary()
    assert fag(**a, mode="estimate", sanitize=True).sanitizer is None
