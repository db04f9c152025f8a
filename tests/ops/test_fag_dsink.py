"""SameAB's dsink slot array and CANN's post-kernel loop over it (kernel.PostDsinkSab, golden._sab_dsink /
_dsink_post, docs/fag.md "Pipeline"): the whole operator bit-exact under the sanitizer on calls whose array has
empty batches, several CV blocks per side and the IS_DTM variant; the post loop alone with steps smaller than
CANN's, where a head takes several steps (only the last counts) and one may be empty."""
from dataclasses import replace

import numpy as np
import pytest

from npusim.chip import chip as get_chip
from ops import flash_attention_unpadding_score_grad_v5 as fag
from ops.flash_attention_unpadding_score_grad_v5.golden import _DSINK_STEP, _dsink_post
from ops.flash_attention_unpadding_score_grad_v5.launch import launch_post, outputs
from ops.flash_attention_unpadding_score_grad_v5.tiling import (SYSTEM_WORKSPACE_BYTES, dsink_chunk, fag_tiling,
                                                                sab_dsink_layout)
from tests.ops.fag_cases import check_golden_and_accuracy, make_case
from tests.ops.helpers import bits

CHIP = get_chip("Ascend910B2")

CALLS = {  # name: (make_case keywords, deterministic, expected (slots per head, S1outer, S2outer))
    # trailing empty batches leave the array; s1Pad = s2Pad = 512: 4 batches x 32 slots
    "empty_batches": (dict(seq_q=[0, 300, 0, 200, 0, 0], seq_kv=[0, 400, 50, 200, 0, 0], n1=3, d=32, sink=True),
                      False, (128, 1, 1)),
    "gqa_3x3_cv_blocks": (dict(seq_q=[1100, 700], seq_kv=[1100, 900], n1=4, n2=2, d=64, sink=True, dropout=0.9),
                          True, (400, 3, 3)),
    "short": (dict(seq_q=[40, 100, 70], seq_kv=[60, 90, 70], n1=2, d=64, sink=True), False, (24, 1, 1)),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_sab_dsink_bit_exact_under_the_sanitizer(name):
    kw, det, layout = CALLS[name]
    a, p = make_case(**kw)
    res = fag(**a, deterministic=det, sanitize=True)
    t = res.tiling
    assert t.template.startswith("sameab")
    assert (t.dsinkHeadSlots, t.dsinkS1Outer, t.dsinkS2Outer) == layout
    assert res.sanitizer is not None and len(res.sanitizer) == 0, res.sanitizer.summary()
    check_golden_and_accuracy(a, p, res)


def test_dsink_step_is_two_post_nodes_of_the_ub():
    """postUbBaseSize = 192 KiB / 3 = 65536 bytes; a step copies two of them: 32768 fp32 slots."""
    assert dsink_chunk(CHIP.ub_bytes) == _DSINK_STEP == 32768


def test_sab_dsink_layout_counts_live_batches_and_cv_blocks():
    _, p = make_case(seq_q=[0, 300, 600, 0], seq_kv=[10, 900, 20, 0], n1=2, d=32, sink=True)
    # 3 batches (the trailing empty one leaves), s1Pad 768, s2Pad 1024: 3 * 768 * 1024 / 8192 = 288
    assert sab_dsink_layout(p, 512, 512) == (288, 2, 2)
    assert sab_dsink_layout(p, 256, 512) == (288, 3, 2)


@pytest.mark.unsanitized  # the workspace is the test's, not written by a main launch: every read is "uninitialised"
@pytest.mark.parametrize("step", [5, 8, 24, 1000])
def test_post_dsink_steps_keep_the_last(step):
    """The post launch alone over a random slot array (every slot non-zero), steps of *step* slots: 24 slots a head
    take 5 steps of 5 (last 4), 3 of 8 (the last empty: the value of the step before, and the read position lags
    8 slots per head after it), 1 of 24 (empty: +0 for every head) or one of 24; dsink = -value, bit for bit."""
    a, p = make_case(seq_q=[40, 100, 70], seq_kv=[60, 90, 70], n1=3, d=16, sink=True)
    til = fag_tiling(p, CHIP)
    assert til.template == "sameab" and til.dsinkHeadSlots == 24
    til = replace(til, dsinkChunk=step)
    rng = np.random.default_rng(step)
    slots = rng.standard_normal(p.N1 * til.dsinkHeadSlots).astype(np.float32)
    ws = np.zeros(til.workspaceSize - SYSTEM_WORKSPACE_BYTES, np.uint8)
    ws[til.dsinkOffset:til.dsinkOffset + slots.nbytes] = slots.view(np.uint8)
    outs = outputs(p, True)
    launch_post(p, til, CHIP, "full", ws, outs)
    want = -_dsink_post(slots, p.N1, til.dsinkHeadSlots, step)
    np.testing.assert_array_equal(bits(outs["dsink"]), bits(want))
    if step == 24:  # every step empty: nothing read, the result buffer's +0, negated
        assert (bits(outs["dsink"]) == bits(np.full(p.N1, -0.0, np.float32))).all()
    if step == 1000:  # one step over the whole head: its ReduceSum, not the sum of some step
        assert outs["dsink"][1] == -_dsink_post(slots[24:48], 1, 24, 1000)[0]
