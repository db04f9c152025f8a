"""Ping-pong of the S1s2Bn2 ("basic_bn2") and generic vector tiles (kernel.VecPair, docs/fag.md "Pipeline"): the calls
whose pong buffers fit UB since the casts land in the tile's dP buffer (CANN's node reuse) run in pairs, bit-exact
against the golden (every test under tests/ops runs sanitized, tests/conftest.py); a call that still does not fit
runs tile by tile."""
import pytest

from ops import flash_attention_unpadding_score_grad_v5 as fag
from ops.flash_attention_unpadding_score_grad_v5 import kernel
from tests.ops.fag_cases import check_golden_and_accuracy, make_case

CALLS = {  # name: (make_case keywords, deterministic, pairs expected)
    "bn2_alibi": (dict(seq_q=[300, 260], seq_kv=[300, 260], n1=2, d=64, layout="", sparse_mode=3, causal=True,
                       alibi="B", pse_type=1), True, True),
    "bn2_dropout_bytes_bf16": (dict(seq_q=[291, 170], seq_kv=[301, 173], n1=2, d=48, layout="", dtype="bf16",
                                    dropout=0.7, sparse_mode=3, causal=True), True, True),
    "bn2_prefix": (dict(seq_q=[300, 200], seq_kv=[400, 300], n1=2, d=64, layout="", sparse_mode=6,
                        prefix=[150, 260]), True, True),
    "generic_causal_d128": (dict(seq_q=[900, 400], seq_kv=[1000, 400], n1=2, d=128, sparse_mode=3, causal=True),
                            False, True),
    "generic_full_mask": (dict(seq_q=[300, 200], seq_kv=[400, 250], n1=2, d=64, full_mask=True), False, True),
    "generic_dropout": (dict(seq_q=[600, 300], seq_kv=[700, 300], n1=2, d=64, dropout=0.9), False, True),
    "generic_band_d80": (dict(seq_q=[800], seq_kv=[900], n1=2, d=80, sparse_mode=4, causal=True, pre=200, nxt=100),
                         False, True),
    # generic pse_type 0/1 alone: the pong casts into its dP buffer, the fp32 scratch, free after the pse slice
    "generic_alibi": (dict(seq_q=[300, 260], seq_kv=[300, 260], n1=2, d=64, sparse_mode=3, causal=True, alibi="B",
                           pse_type=1), False, True),
    # slope pse + dropout on S1s2Bn2: the pong is still about 6 KiB short of UB; generic alibi + dropout: the dropped
    # P holds the scratch at the cast, and an own cast buffer does not fit
    "bn2_slope_dropout": (dict(seq_q=[300, 170], seq_kv=[300, 170], n1=2, d=64, layout="", dropout=0.8, slopes="N",
                               pse_type=3), True, False),
    "generic_alibi_dropout": (dict(seq_q=[300, 260], seq_kv=[300, 260], n1=2, d=64, sparse_mode=3, causal=True,
                                   alibi="B", pse_type=1, dropout=0.9), False, False),
}


@pytest.fixture
def pair_sizes(monkeypatch) -> list:
    """The number of tiles of every VecPair call (2: a ping-pong pair, 1: a lone tile), as the test's call runs."""
    sizes = []
    run_pair = kernel.KernelFagBasic.VecPair

    def counted(self, task, views):
        sizes.append(len(views))
        return run_pair(self, task, views)
    monkeypatch.setattr(kernel.KernelFagBasic, "VecPair", counted)
    return sizes


@pytest.mark.parametrize("name", list(CALLS))
def test_pingpong_pairs_bit_exact(name, pair_sizes):
    kw, det, paired = CALLS[name]
    a, p = make_case(**kw)
    res = fag(**a, deterministic=det)
    assert res.tiling.template == ("basic_bn2" if det else "generic")
    assert any(n == 2 for n in pair_sizes) == paired
    check_golden_and_accuracy(a, p, res)


def test_a_pairs_subgrapb_waits_for_no_copy_out(monkeypatch, pair_sizes):
    """A pair's SubGrapB issues no MTE3_V wait (CANN's right subgraph has none: its vector work follows its dP copy
    in, which follows its own tile's copies out); a lone pass's SubGrapB keeps it. Full mode runs every step
    (nothing replayed), so the spies see each call."""
    waits = []
    state = {"paired": None}
    run_b, wait = kernel.KernelFagBasic.SubGrapB, kernel.WaitFlag

    def sub_grap_b(self, task, v):
        state["paired"] = self.paired
        try:
            return run_b(self, task, v)
        finally:
            state["paired"] = None

    def wait_flag(event, event_id=0):
        if state["paired"] is not None and event == kernel.HardEvent.MTE3_V:
            waits.append(state["paired"])
        return wait(event, event_id)
    monkeypatch.setattr(kernel.KernelFagBasic, "SubGrapB", sub_grap_b)
    monkeypatch.setattr(kernel, "WaitFlag", wait_flag)
    pairs = pair_sizes
    a, p = make_case(seq_q=[300, 200], seq_kv=[64, 40], n1=2, d=64, layout="")  # 128-row tiles, odd counts
    res = fag(**a, deterministic=True)
    assert 2 in pairs and 1 in pairs  # both pairs and lone tiles ran
    assert waits and not any(waits)  # lone passes waited; no paired SubGrapB did
    check_golden_and_accuracy(a, p, res)
