"""FlashAttentionUnpaddingScoreGradV5: replayed kernel steps (timing mode) give the interpreted run's trace.

Cube1Block, SubGrapA, SubGrapB and the fp32 products (_mm_abt) are replayable (kernel.py, npusim/replay.py): a
step whose block shape and stream state were seen before hands its recorded calls to the core's scheduler. The
trace (every column, flag arrow, name and source line) and the cycles must equal those of the run with every step
interpreted, on the paths the keys distinguish: the compressed causal mask (diagonal tiles), a full mask (its rows are a base), the
[N, T, 8] softmax layout, fp32 inputs, pse, dropout (bit and byte mode), a sink, the prefix mask, several
templates. Unsanitized: the sanitizer switches replay off.
"""
import numpy as np
import pytest

import npusim.replay as replay
from ops import flash_attention_unpadding_score_grad_v5 as fag
from tests.npusim.test_replay import assert_same_trace
from tests.ops.fag_cases import make_case

CASES = {  # name: (make_case keywords, deterministic, tiling override, the template it must run)
    "basic_causal": (dict(seq_q=[700, 300], seq_kv=[700, 300], n1=2, d=64, sparse_mode=3, causal=True), False,
                     {"blockDim": 2}, "basic"),
    "basic_nt8_layout": (dict(seq_q=[520, 260], seq_kv=[520, 260], n1=2, d=32, layout=""), False,
                         {"blockDim": 2}, "basic"),
    "basic_det_full_mask": (dict(seq_q=[600], seq_kv=[600], n1=2, d=32, sparse_mode=1, full_mask=True), True,
                            {"blockDim": 2}, "basic_det"),
    "sameab_causal": (dict(seq_q=[1100], seq_kv=[1100], n1=2, d=32, sparse_mode=2, causal=True), True,
                      {"blockDim": 2}, "sameab_det"),
    # the deterministic S1s2Bn2 template: sfmg rows per CV block in UB (their place in the keys), per-strip atomics
    "bn2_gqa_256_rows": (dict(seq_q=[600, 300], seq_kv=[300, 200], n1=4, n2=2, d=64, layout=""), True,
                         {"blockDim": 2}, "basic_bn2"),  # 256 x 512 CV blocks, 32 x 256 tiles: eight sfmg row offsets
    # fp32: P^T and dS^T written by the AIVs, ComputeMMDqkvT's products (_mm_abt) with overlapping B^T rows
    "generic_fp32_causal": (dict(seq_q=[700, 300], seq_kv=[700, 300], n1=2, d=64, sparse_mode=3, causal=True,
                                 dtype="fp32"), False, {"blockDim": 2}, "generic"),
    "generic_fp32_gqa": (dict(seq_q=[600], seq_kv=[400], n1=4, n2=2, d=128, dtype="fp32"), False, {"blockDim": 3},
                         "generic"),
    "bn2_fp32": (dict(seq_q=[600, 300], seq_kv=[300, 200], n1=4, n2=2, d=64, layout="", dtype="fp32"), True,
                 {"blockDim": 2}, "basic_bn2"),
    # pse, dropout, sink, prefix: SubGrapA / SubGrapB with their extra reads and writes (_suba_key, _subb_key)
    "slope_causal_dropbits": (dict(seq_q=[600, 264], seq_kv=[600, 264], n1=2, d=16, dtype="bf16", pse_type=3,
                                   slopes="N", causal=True, sparse_mode=2, dropout=0.8), False, {"blockDim": 2},
                              "generic"),
    "alibi_sink": (dict(seq_q=[1300, 300], seq_kv=[1300, 300], n1=2, d=48, pse_type=1, alibi="B", causal=True,
                        sparse_mode=3, sink=True), False, {"blockDim": 2}, "sameab"),
    "dropbytes_sink_nt8_layout": (dict(seq_q=[650, 0, 240], seq_kv=[633, 20, 261], n1=4, d=32, dropout=0.7,
                                       sink=True, layout=""), False, {"blockDim": 2}, "sameab"),
    "prefix_dropbits": (dict(seq_q=[650, 300], seq_kv=[700, 136], n1=2, d=40, dtype="bf16", sparse_mode=6,
                             prefix=[260, 100], dropout=0.9), False, {"blockDim": 2}, "generic"),
    "fp32_alibi_dropbits_sink": (dict(seq_q=[650, 240], seq_kv=[650, 240], n1=2, d=40, dtype="fp32", sink=True,
                                      dropout=0.8, pse_type=1, alibi="B", causal=True, sparse_mode=3), False,
                                 {"blockDim": 2}, "sameab"),
    "sameab_dtm_slope_dropbits": (dict(seq_q=[1100], seq_kv=[1100], n1=2, d=32, sparse_mode=2, causal=True,
                                       dropout=0.9, pse_type=2, slopes="N"), True, {"blockDim": 2}, "sameab_det"),
    # the generic TND_S1_PP variant: row-tile pairs, each tile's sfmg rows computed in UB (SfmgTile)
    "generic_s1pp_dropbits": (dict(seq_q=[600, 300], seq_kv=[100, 120], n1=2, d=64, dropout=0.9), False,
                              {"blockDim": 2}, "generic"),
    "generic_s1pp_short_keys": (dict(seq_q=[2100, 2100], seq_kv=[200, 150], n1=2, d=128), False, {"blockDim": 2},
                                "generic"),
    # generic pse_type 0/1 in ping-pong pairs: the pong's casts in the fp32 scratch
    "generic_alibi_pairs": (dict(seq_q=[700, 300], seq_kv=[700, 300], n1=2, d=64, sparse_mode=3, causal=True,
                                 alibi="B", pse_type=1), False, {"blockDim": 2}, "generic"),
}


#: steps each case must record (a key that always gave None, or a recording replay.py refuses, leaves a step out):
#: the step functions the case's keys were written for
RECORDED = {
    "basic_causal": {"Cube1Block", "VecBlock", "Cube23Block"},
    "basic_det_full_mask": {"Cube1Block", "VecBlock", "ReduceRows"},
    "sameab_causal": {"Cube1Block", "VecTile", "_mm_ab_strip"},
    "bn2_gqa_256_rows": {"Cube1Block", "SubGrapA", "SubGrapB"},  # ping-pong pairs: the two halves of each tile
    "generic_fp32_causal": {"_mm_abt"},
    "generic_fp32_gqa": {"_mm_abt"},
    "bn2_fp32": {"_mm_abt"},
    "slope_causal_dropbits": {"SubGrapA", "SubGrapB"},
    "alibi_sink": {"SubGrapA", "SubGrapB"},
    "dropbytes_sink_nt8_layout": {"SubGrapA", "SubGrapB"},
    "prefix_dropbits": {"SubGrapA", "SubGrapB"},
    "fp32_alibi_dropbits_sink": {"SubGrapA", "SubGrapB", "_mm_abt"},
    "sameab_dtm_slope_dropbits": {"SubGrapA", "SubGrapB"},
    "generic_s1pp_dropbits": {"SfmgTile", "SubGrapA", "SubGrapB"},
    "generic_s1pp_short_keys": {"SfmgTile", "SubGrapA", "SubGrapB"},
    "generic_alibi_pairs": {"SubGrapA", "SubGrapB"},
}


@pytest.fixture
def counted(monkeypatch):
    """Replays (at replay._run, which every replayed step goes through) and recordings per step function."""
    counts = {"steps": 0, "recorded": set()}
    real_run, real_record = replay._run, replay._record

    def counting(*args):
        counts["steps"] += 1
        return real_run(*args)

    def recording(unit, fn, *args):
        entry = real_record(unit, fn, *args)
        if entry is not replay._NEVER:
            counts["recorded"].add(fn.__name__)
        return entry
    monkeypatch.setattr(replay, "_run", counting)
    monkeypatch.setattr(replay, "_record", recording)
    return counts


@pytest.mark.unsanitized
@pytest.mark.parametrize("name", CASES)
def test_fag_replayed_steps_give_the_interpreted_trace(counted, name):
    kw, det, til, template = CASES[name]
    a, _ = make_case(**kw)
    on = fag(**a, deterministic=det, tiling=til, mode="timing", trace="full")
    steps = counted["steps"]
    with replay.disabled():
        off = fag(**a, deterministic=det, tiling=til, mode="timing", trace="full")
    assert on.tiling.template == template
    assert steps > 20 and counted["steps"] == steps  # replayed in the first run only
    assert RECORDED.get(name, set()) <= counted["recorded"]
    assert_same_trace(on, off)
    launches = lambda res: {k: r.cycles for k, r in res.extra["launches"].items()}  # noqa: E731
    assert launches(on) == launches(off) and on.cycles == off.cycles
