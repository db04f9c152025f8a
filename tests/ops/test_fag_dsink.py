"""SameAB's dsink as CANN 8d2ad255 computes it (kernel.SinkOut / PostDsinkSab, golden._sab_dsink, docs/fag.md
"Pipeline"): each AIV adds its CV-block sums of a head into its own [head, AIV] partial; the post kernel splits the
heads over the AIVs and sums each head's row of partials. The whole operator bit-exact under the sanitizer; the post
loop alone with more heads than AIVs and steps of fewer heads."""
from dataclasses import replace

import numpy as np
import pytest

from npusim.chip import chip as get_chip
from npusim.errors import ACLNN_ERR_INNER_TILING_ERROR, ACLNN_ERR_PARAM_INVALID, AclnnError
from ops import flash_attention_unpadding_score_grad_v5 as fag
from ops.flash_attention_unpadding_score_grad_v5.golden import _reduce_sum
from ops.flash_attention_unpadding_score_grad_v5.launch import launch_post, outputs
from ops.flash_attention_unpadding_score_grad_v5 import tiling
from ops.flash_attention_unpadding_score_grad_v5.tiling import (SINK_TEMPLATES, SYSTEM_WORKSPACE_BYTES, dsink_step_heads,
                                                                fag_tiling)
from tests.ops.fag_cases import check_golden_and_accuracy, make_case
from tests.ops.helpers import bits

CHIP = get_chip("Ascend910B2")

CALLS = {  # name: (make_case keywords, deterministic)
    "empty_batches": (dict(seq_q=[0, 300, 0, 200, 0, 0], seq_kv=[0, 400, 50, 200, 0, 0], n1=3, d=32, sink=True), False),
    "gqa_is_dtm_dropout": (dict(seq_q=[1100, 700], seq_kv=[1100, 900], n1=4, n2=2, d=64, sink=True, dropout=0.9),
                           True),
    "short": (dict(seq_q=[40, 100, 70], seq_kv=[60, 90, 70], n1=2, d=64, sink=True), False),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_sab_dsink_bit_exact_under_the_sanitizer(name):
    kw, det = CALLS[name]
    a, p = make_case(**kw)
    res = fag(**a, deterministic=det, sanitize=True)
    t = res.tiling
    assert t.template.startswith("sameab") and t.dsinkCores == CHIP.aiv_count
    assert res.sanitizer is not None and len(res.sanitizer) == 0, res.sanitizer.summary()
    check_golden_and_accuracy(a, p, res)


def test_dsink_step_is_two_post_nodes_of_the_ub():
    """postUbBaseSize = 192 KiB / 3 = 65536 bytes; a step takes two of them: 131072 / (48 AIVs x 4 bytes) heads."""
    assert dsink_step_heads(CHIP.ub_bytes, 48) == 682
    assert dsink_step_heads(CHIP.ub_bytes, 40) == 819
    assert dsink_step_heads(1024, 48) == 2  # 2 * 256 bytes / 192
    assert dsink_step_heads(512, 48) == 1  # no whole node: at least one head


@pytest.mark.unsanitized  # the workspace is the test's, not written by a main launch: every read is "uninitialised"
@pytest.mark.parametrize("step,cores", [(1, 24), (2, 24), (682, 24), (2, 25), (682, 25)])
def test_post_dsink_heads_over_aivs_in_steps(step, cores):
    """100 heads over 48 AIVs (3 each, the last AIVs none), or 50 (a row of partials not a whole number of 32-byte
    blocks), in steps of *step* heads: dsink[n] = -(the 64-lane tree sum of head n's partials), bit for bit, every
    head written."""
    chip = replace(CHIP, aic_count=cores)
    a, p = make_case(seq_q=[16], seq_kv=[16], n1=100, d=16, sink=True)
    til = replace(fag_tiling(p, chip), dsinkStepHeads=step)
    assert til.template == "sameab" and til.dsinkCores == 2 * cores
    rng = np.random.default_rng(step)
    parts = rng.standard_normal((p.N1, til.dsinkCores)).astype(np.float32)
    ws = np.zeros(til.workspaceSize - SYSTEM_WORKSPACE_BYTES, np.uint8)
    ws[til.dsinkOffset:til.dsinkOffset + parts.nbytes] = parts.reshape(-1).view(np.uint8)
    outs = outputs(p, True)
    outs["dsink"][:] = np.nan  # a head the post kernel leaves out stays NaN
    launch_post(p, til, chip, "full", ws, outs)
    want = -np.array([_reduce_sum(row) for row in parts], np.float32)
    np.testing.assert_array_equal(bits(outs["dsink"]), bits(want))


@pytest.mark.parametrize("cores", [4, 40])  # 8 and 80 AIVs: ReduceSum AR would take its other paths
def test_sab_dsink_refuses_chips_outside_the_modelled_reduction(cores):
    _, p = make_case(seq_q=[40], seq_kv=[60], n1=2, d=16, sink=True)
    with pytest.raises(AclnnError) as err:
        fag_tiling(p, CHIP.replace(aic_count=cores))
    assert err.value.status == ACLNN_ERR_PARAM_INVALID
    assert fag_tiling(p, CHIP.replace(aic_count=32)).dsinkCores == 64


@pytest.mark.parametrize("kw, det", [(dict(seq_q=[40, 100], seq_kv=[60, 90], n1=2, d=64), False),
                                     (dict(seq_q=[3000], seq_kv=[200], n1=2, d=64), False),
                                     (dict(seq_q=[900, 400], seq_kv=[1000, 400], n1=2, d=128, sparse_mode=3,
                                           causal=True), False),
                                     (dict(seq_q=[300, 200], seq_kv=[400, 300], n1=2, d=64, layout=""), True),
                                     (dict(seq_q=[600, 300], seq_kv=[300, 200], n1=2, d=64, layout="",
                                           dtype="fp32"), True)])
def test_sink_calls_run_a_template_that_writes_dsink_partials(kw, det):
    """Review #1: the generic and S1s2Bn2 kernels write no dsink partials, so a sink call must never reach them:
    CANN's registry does not give them one: these calls take generic or S1s2Bn2 without a sink, another with one."""
    _, plain = make_case(**kw)
    assert fag_tiling(plain, CHIP, None, det).template in ("generic", "basic_bn2")
    _, p = make_case(**kw, sink=True)
    assert fag_tiling(p, CHIP, None, det).template in SINK_TEMPLATES


@pytest.mark.parametrize("template", ["generic", "basic_bn2"])
def test_a_sink_call_on_a_template_without_dsink_partials_is_refused(template, monkeypatch):
    """Were the routing ever to give one (forced here), the tiling refuses it with 561002 rather than let the post
    kernel read partials nobody wrote."""
    _, p = make_case(seq_q=[300], seq_kv=[400], n1=2, d=64, sink=True)
    monkeypatch.setattr(tiling, "run_template", lambda *a: (template, "forced", (128, 512, False)))
    with pytest.raises(AclnnError) as err:
        tiling.fag_tiling(p, CHIP)
    assert err.value.status == ACLNN_ERR_INNER_TILING_ERROR
