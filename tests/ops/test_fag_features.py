"""FlashAttentionUnpaddingScoreGradV5: pse (types 0-3), dropout, sparse 6 (prefix), D > 256 and fp32 on the
simulator.

Bit-exact against the independent golden over a pairwise grid of the new features crossed with the
old ones (dtype, GQA, layout, masks, sink, determinism), accuracy of every output against the float64
reference (NUMERICS.md check 2), the seed's constraints on these features through the operator (a valid
call that runs, an invalid one with its status), timing mode and a hypothesis fuzz through the API."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npusim import TensorSpec
from ops import AclnnError, flash_attention_unpadding_score_grad_v5 as fag
from ops.common.accuracy import fa_rule_ok
from ops.flash_attention_unpadding_score_grad_v5 import contract as C
from tests.ops.fag_cases import golden_of, make_case, reference_pair
from tests.ops.helpers import bits

# pairwise over pse (none / alibi B / alibi 1 / slope B / slope N, types 0-3), dropout (off / bit mode /
# byte mode), mask (none, 0 band, 2, 3, 6 prefix, 8), sink, GQA, layout, dtype
GRID = {
    "fp16_pse2_slopeB_start_gqa_layout": dict(seq_q=[150, 40], seq_kv=[150, 40], n1=4, n2=2, d=32, pse_type=2,
                                              slopes="B", q_start=3, kv_start=1, layout=""),
    "bf16_pse3_slopeN_mode2_dropbits": dict(seq_q=[136, 64], seq_kv=[136, 64], n1=2, n2=1, d=16, dtype="bf16",
                                            pse_type=3, slopes="N", causal=True, sparse_mode=2, dropout=0.8),
    "fp16_pse1_alibiB_mode3_sink": dict(seq_q=[150, 60], seq_kv=[150, 60], n1=2, n2=1, d=48, pse_type=1,
                                        alibi="B", causal=True, sparse_mode=3, sink=True),
    "bf16_pse0_alibi1_mode0_band_dropbytes": dict(seq_q=[130, 21], seq_kv=[130, 21], n1=2, n2=2, d=32,
                                                  dtype="bf16", pse_type=0, alibi="1", full_mask=True,
                                                  sparse_mode=0, pre=200, nxt=0, dropout=0.7),
    "fp16_dropbytes_sink_layout_gqa": dict(seq_q=[150, 0, 40], seq_kv=[133, 20, 61], n1=4, n2=1, d=32,
                                           dropout=0.7, sink=True, layout=""),
    "bf16_prefix_gqa_dropbits": dict(seq_q=[150, 300], seq_kv=[200, 136], n1=2, n2=1, d=40, dtype="bf16",
                                     sparse_mode=6, prefix=[60, 100], dropout=0.9),
    "fp16_prefix_long_sink": dict(seq_q=[260, 40], seq_kv=[390, 50], n1=1, n2=1, d=16, sparse_mode=6,
                                  prefix=[300, 10], sink=True, layout=""),
    "fp16_pse2_mode8_dropbytes_sink": dict(seq_q=[150, 40], seq_kv=[150, 40], n1=2, n2=1, d=16, pse_type=2,
                                           slopes="N", causal=True, sparse_mode=8, pre=300, nxt=5, dropout=0.75,
                                           sink=True, q_start=2, kv_start=2),
    # D > 256: operands pass through L1 in blocks of 256 columns
    "fp16_d272_dropbits_sink": dict(seq_q=[150, 40], seq_kv=[136, 40], n1=2, n2=1, d=272, sink=True, dropout=0.9),
    "bf16_d768_mode3": dict(seq_q=[130], seq_kv=[140], n1=1, n2=1, d=768, dtype="bf16", causal=True, sparse_mode=3),
    # fp32: P^T, dS^T from the vector side and transposed Q, K, dY copies (no b32 transposing loads)
    "fp32_mode3_alibi_dropbits_sink": dict(seq_q=[150, 40], seq_kv=[150, 40], n1=2, n2=1, d=40, dtype="fp32",
                                           sink=True, dropout=0.8, pse_type=1, alibi="B", causal=True,
                                           sparse_mode=3),
    "fp32_d200_gqa_layout_prefix": dict(seq_q=[130, 20], seq_kv=[140, 30], n1=4, n2=2, d=200, dtype="fp32",
                                        sparse_mode=6, prefix=[20, 15], layout=""),
    "bf16_rope272_pse2": dict(seq_q=[130], seq_kv=[130], n1=2, n2=1, d=16, dtype="bf16", rope_d=272, pse_type=2,
                              slopes="N"),
}


def _run(kw, **over):
    a, p = make_case(**kw)
    res = fag(**a, **over)
    return a, p, res


@pytest.mark.parametrize("name", GRID)
def test_fag_features_bit_exact_and_accurate(name):
    """Every output bit-exact with the golden (the run's atomic order), then within the flash-attention
    gradient rule (factor 3) of the float64 reference, dsink included."""
    a, p, res = _run(GRID[name])
    gold = golden_of(a, p, res)
    extra = ({"dsink"} if p.sink else set()) | ({"dq_rope", "dk_rope"} if p.rope_d else set())
    assert set(gold) == set(res.outputs) == {"dq", "dk", "dv"} | extra
    for out in gold:
        np.testing.assert_array_equal(bits(res.outputs[out]), bits(gold[out]), err_msg=out)
    ref, low = reference_pair(a, p)
    for out in ref:
        ok, info = fa_rule_ok(res.outputs[out], ref[out], low[out], factor=3.0)
        assert ok, (out, info)


def test_fag_features_change_the_result():
    """The data of the new inputs is used: the golden with zero slopes, or with every keep bit set, differs
    from the run (so the bit-exact tests above could fail)."""
    a, p, res = _run(GRID["bf16_pse3_slopeN_mode2_dropbits"])
    for name, value in (("pse_shift", np.zeros_like(a["pse_shift"])),
                        ("drop_mask", np.full_like(a["drop_mask"], 255))):
        other = golden_of(a, p, res, **{name: value})
        assert not np.array_equal(bits(other["dq"]), bits(res.outputs["dq"])), name


@pytest.mark.parametrize("kw", [
    dict(seq_q=[200, 70], seq_kv=[200, 70], n1=2, n2=1, d=16, pse_type=1, alibi="random", causal=True,
         sparse_mode=3),
    dict(seq_q=[1100], seq_kv=[1100], n1=1, n2=1, d=16, pse_type=0, alibi="random", causal=True, sparse_mode=2,
         dtype="bf16"),
    dict(seq_q=[130], seq_kv=[130], n1=2, n2=1, d=16, pse_type=3, slopes="B", q_start=2 ** 25 + 3,
         kv_start=-7)])
def test_fag_pse_read_windows_bit_exact(kw):
    """Random (not diagonal-constant) alibi data, maxSkv above 1024 (window shifted right), and a start
    index beyond fp32's integers: the exact elements and roundings of the kernel's reads, bit for bit."""
    a, p, res = _run(kw)
    gold = golden_of(a, p, res)
    for out in gold:
        np.testing.assert_array_equal(bits(res.outputs[out]), bits(gold[out]), err_msg=out)


def test_fag_features_deterministic():
    """deterministic=True with pse, dropout and prefix: the ordered reduction, bit for bit."""
    for name in ("bf16_pse0_alibi1_mode0_band_dropbytes", "bf16_prefix_gqa_dropbits", "fp32_mode3_alibi_dropbits_sink"):
        a, p, res = _run(GRID[name], deterministic=True)
        gold = golden_of(a, p, res, atomics=None)
        for out in gold:
            np.testing.assert_array_equal(bits(res.outputs[out]), bits(gold[out]), err_msg=(name, out))


def test_fag_features_timing_mode_matches_full():
    """Timing mode (TensorSpecs) models the same instructions as full mode for pse, dropout and prefix."""
    for name in ("bf16_pse0_alibi1_mode0_band_dropbytes", "fp16_prefix_long_sink"):
        a, p = make_case(**GRID[name])
        spec = {k: (TensorSpec(v.shape, v.dtype) if isinstance(v, np.ndarray) and k not in ("atten_mask", "pse_shift")
                    else v) for k, v in a.items()}
        timed = fag(**spec, mode="timing")
        assert timed.outputs is None and timed.cycles == fag(**a).cycles, name


# The seed's rules on these features, through the operator: (contract rule, valid case, invalid case); the
# invalid case fails with the rule's status (contract.RULES: 161002 / 561002 as the real operator).
BASE = dict(seq_q=[130, 20], seq_kv=[130, 20], n1=2, n2=1, d=16)
RULES = {
    "mode7 without pse": ("pse_not_mode7", dict(BASE, causal=True, sparse_mode=7, pre=200, nxt=0),
                          dict(BASE, causal=True, sparse_mode=7, pre=200, nxt=0, pse_type=2, slopes="N")),
    "mode8 pse needs Sq == Skv": ("pse_mode8_equal_lens",
                                  dict(BASE, causal=True, sparse_mode=8, pre=200, nxt=0, pse_type=2, slopes="B"),
                                  dict(BASE, seq_kv=[140, 20], causal=True, sparse_mode=8, pre=200, nxt=0,
                                       pse_type=2, slopes="B")),
    "mode8 slope start idx": ("pse_slope_mode8_start",
                              dict(BASE, causal=True, sparse_mode=8, pre=200, nxt=0, pse_type=3, slopes="N",
                                   q_start=4, kv_start=4),
                              dict(BASE, causal=True, sparse_mode=8, pre=200, nxt=0, pse_type=3, slopes="N",
                                   q_start=4)),
    "alibi needs a causal mask": ("pse_alibi_causal", dict(BASE, pse_type=1, alibi="B", causal=True, sparse_mode=2),
                                  dict(BASE, pse_type=1, alibi="B", causal=True, sparse_mode=4, pre=10, nxt=10)),
    "slope needs Sq == Skv": ("pse_slope_equal_lens", dict(BASE, pse_type=2, slopes="N"),
                              dict(BASE, seq_kv=[131, 20], pse_type=2, slopes="N")),
    "pse without empty batches": ("pse_no_empty_batch", dict(BASE, pse_type=3, slopes="N"),
                                  dict(BASE, seq_q=[130, 0, 20], seq_kv=[130, 5, 20], pse_type=3, slopes="N")),
    "pse_type without pse": ("pse_type_without_pse", dict(BASE), dict(BASE, pse_type=2)),
    "keep_prob in (0, 1]": ("keep_prob_range", dict(BASE, dropout=1.0), dict(BASE, dropout=1.5)),
    "prefix needed in mode 6": ("mode6_prefix", dict(BASE, sparse_mode=6, prefix=[0, 1]),
                                dict(BASE, sparse_mode=6, prefix=[0])),
    "prefix range": ("mode6_prefix", dict(BASE, seq_kv=[150, 20], sparse_mode=6, prefix=[20, 20]),
                     dict(BASE, seq_kv=[150, 20], sparse_mode=6, prefix=[19, 20])),
    "rope is bf16": ("rope_dtype", dict(BASE, dtype="bf16", rope_d=16), dict(BASE, dtype="fp16", rope_d=16)),
    "rope excludes dropout": ("rope_no_dropout", dict(BASE, dtype="bf16", rope_d=16),
                              dict(BASE, dtype="bf16", rope_d=16, dropout=0.9)),
    "rope excludes prefix": ("rope_not_mode6", dict(BASE, dtype="bf16", rope_d=16, causal=True, sparse_mode=3),
                             dict(BASE, dtype="bf16", rope_d=16, sparse_mode=6, prefix=[0, 1])),
}


@pytest.mark.parametrize("rule", RULES)
def test_fag_feature_rules(rule):
    """The valid case runs bit-exact; the invalid one raises the rule's status naming the rule."""
    name, valid, invalid = RULES[rule]
    a, p, res = _run(valid)
    gold = golden_of(a, p, res)
    for out in gold:
        np.testing.assert_array_equal(bits(res.outputs[out]), bits(gold[out]), err_msg=(rule, out))
    with pytest.raises(AclnnError) as info:
        make_case(**invalid)
    assert info.value.status == C.RULES[name].status and f"rule {name}:" in info.value.message


def test_fag_feature_rules_through_the_api():
    """The operator itself (not only validate) refuses, with nothing written: pse with sparse 7, keep_prob < 1
    without a drop mask."""
    a, _ = make_case(**RULES["mode7 without pse"][1])
    a.update(pse_shift=np.full(2, 0.1, np.float32), pse_type=2)
    with pytest.raises(AclnnError) as info:
        fag(**a)
    assert info.value.status == C.RULES["pse_not_mode7"].status
    a, _ = make_case(**BASE)
    a.update(keep_prob=0.5)
    with pytest.raises(AclnnError) as info:
        fag(**a)
    assert info.value.status == C.RULES["keep_prob_needs_drop_mask"].status and "drop_mask" in info.value.message


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fag_features_fuzz(data):
    """Random small calls with pse, dropout, prefix and masks through the API: bit-exact with the golden,
    or an AclnnError (an inconsistent combination), nothing else."""
    d = data.draw
    b = d(st.integers(1, 2))
    sq = [d(st.integers(1, 150)) for _ in range(b)]
    equal = d(st.booleans())
    skv = sq if equal else [d(st.integers(1, 150)) for _ in range(b)]
    kw = dict(seq_q=sq, seq_kv=skv, n1=d(st.sampled_from([1, 2, 4])), d=d(st.sampled_from([16, 24, 40])),
              dtype=d(st.sampled_from(["fp16", "bf16", "fp32"])), seed=d(st.integers(0, 99)),
              sink=d(st.booleans()), layout=d(st.sampled_from(["same_as_input", ""])))
    kw["n2"] = d(st.sampled_from([n for n in (1, 2) if kw["n1"] % n == 0]))
    mode = d(st.sampled_from([None, 0, 2, 3, 6, 8]))
    if mode == 6:
        kw.update(sparse_mode=6, prefix=[d(st.integers(0, k)) for k in skv])
    elif mode == 0:
        kw.update(sparse_mode=0, full_mask=True, pre=d(st.integers(0, 200)), nxt=d(st.integers(0, 200)))
    elif mode is not None:
        kw.update(sparse_mode=mode, causal=True, pre=300, nxt=d(st.integers(0, 5)))
    pse = d(st.sampled_from(["none", "slopeN", "slopeB", "alibi"]))
    if pse.startswith("slope"):
        kw.update(pse_type=d(st.sampled_from([2, 3])), slopes=pse[-1], q_start=d(st.integers(-5, 5)),
                  kv_start=d(st.integers(-5, 5)))
    elif pse == "alibi":
        kw.update(pse_type=d(st.sampled_from([0, 1])), alibi=d(st.sampled_from(["B", "1"])))
    if d(st.booleans()):
        kw["dropout"] = d(st.sampled_from([0.6, 0.9, 1.0]))
    try:
        a, p = make_case(**kw)
        res = fag(**a, deterministic=d(st.booleans()))
    except AclnnError as e:
        assert e.status in (161001, 161002, 561002)
        return
    gold = golden_of(a, p, res)
    for out in gold:
        np.testing.assert_array_equal(bits(res.outputs[out]), bits(gold[out]), err_msg=(kw, out))


@pytest.mark.parametrize("deterministic", [False, True])
def test_fag_nan_rows_have_the_vector_units_sign(deterministic):
    """A row whose keys are all masked with pre = next = 0 gets NaN gradients; the post kernel's Muls makes
    each such NaN the positive quiet NaN (docs/numerics.md), so the golden must not keep the host CPU's sign.
    Found by the fuzz test above (dq 0x7E00 against a golden 0xFE00)."""
    a, p = make_case(seq_q=[3], seq_kv=[3], n1=1, n2=1, d=16, dtype="fp16", seed=0, sink=False, layout="",
                     sparse_mode=0, full_mask=True, pre=0, nxt=0)
    res = fag(**a, deterministic=deterministic)
    dq = bits(res.outputs["dq"])
    assert np.isnan(res.outputs["dq"].astype(np.float32)).any()  # the case does reach the NaN path
    assert not (dq == 0xFE00).any()
    gold = golden_of(a, p, res)
    for out in gold:
        np.testing.assert_array_equal(bits(res.outputs[out]), bits(gold[out]), err_msg=out)
