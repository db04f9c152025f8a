"""FlashAttentionUnpaddingScoreGradV5, the deterministic templates besides SameAB's IS_DTM (docs/fag.md
"Determinism"). basic_det (priority 1002): 512 x 512 regions handed out round-robin, one per core and round,
per-core partials, the round's reduction from the first core's partial, lone dk/dv strips added by the cube.
The deterministic S1s2Bn2 template (1000, `template` "basic_bn2"): its CV blocks (singleM x singleN) and their
rectangles, its (batch, key/value head) split over the AIVs, each AIV running its own pairs with every row, so
each output row has one writer.

Bit-exact against the independent golden (which re-walks the regions and rounds, or takes the core split), with
the float64 accuracy of every output; the region order, the rounds, the reduction and the split each show in the
bits (a golden with another one differs); basic_det's atomic adds are exactly the lone dk/dv strips; timing
mode gives the full run's cycles. Every run here is sanitized (tests/conftest.py)."""
import numpy as np
import pytest

from ops import flash_attention_unpadding_score_grad_v5 as fag
from tests.ops.fag_cases import check_golden_and_accuracy, golden_of, make_case
from tests.ops.helpers import bits

CASES = {
    # GQA, causal, three cores: several rounds, strips with one and with several writers per round
    "fp16_gqa_causal_rounds": (dict(seq_q=[700, 300], seq_kv=[700, 300], n1=4, n2=2, d=32, sparse_mode=3,
                                    causal=True), {"blockDim": 3}),
    # no mask, unequal lengths, every AI Core (one round)
    "bf16_nomask_varlen": (dict(seq_q=[600, 130], seq_kv=[900, 200], n1=2, n2=1, d=64, dtype="bf16"), None),
    # sparse 3 with Sq < Skv (the diagonal off the block grid), sink and dsink, two cores
    "fp16_mode3_unequal_sink": (dict(seq_q=[300, 520], seq_kv=[700, 520], n1=2, n2=1, d=16, sparse_mode=3,
                                     causal=True, sink=True), {"blockDim": 2}),
    # sparse 1 with a [maxSq, maxSkv] mask, rope, a zero-length batch
    "bf16_mode1_rope": (dict(seq_q=[260, 0, 140], seq_kv=[300, 0, 100], n1=2, n2=2, d=32, dtype="bf16",
                             sparse_mode=1, full_mask=True, rope_d=16), {"blockDim": 4}),
}


def _lone_strips(t) -> int:
    """dk/dv (and dk_rope) strips that exactly one section of their round writes: (b, key/value head, s2 block)
    counted per round from the tiling's block table (round r: sections r * blockDim ... r * blockDim + blockDim - 1)."""
    total = 0
    for r0 in range(0, t.sections, t.blockDim):
        writers = {}
        for k in range(r0, min(r0 + t.blockDim, t.sections)):
            for i in range(t.secStart[k], t.secStart[k + 1]):
                writers.setdefault((t.blkB[i], t.blkN[i] // t.gSize, t.blkS2o[i]), set()).add(k)
        total += sum(len(w) == 1 for w in writers.values())
    return total * (3 if t.ropeD else 2)


def _det_run(cases: dict, name: str):
    """(args, problem, result, tiling) of the deterministic run of cases[name] with its tiling override."""
    kw, til = cases[name]
    a, p = make_case(**kw)
    res = fag(**a, deterministic=True, tiling=til)
    return a, p, res, res.tiling


@pytest.mark.parametrize("name", CASES)
def test_basic_det_bit_exact_and_accurate(name):
    a, p, res, t = _det_run(CASES, name)
    til = CASES[name][1]
    assert (t.template, t.cannTemplate) == ("basic_det", "basic_det") and t.sabDtm and t.dtmBasic
    assert (t.s1CvInner, t.s2CvInner) == (512, 512)
    assert t.blockDim == (til or {}).get("blockDim", 24)  # every AI Core of the 910B2 unless overridden
    check_golden_and_accuracy(a, p, res)
    assert len(res.extra["atomics"]) == _lone_strips(t)  # D <= 128: one Fixpipe per strip


def test_basic_det_orders_are_visible_in_the_bits():
    """The test above can fail: on this run a golden without rounds (the cores' partials summed in plain core
    order), one with SameAB's walk and +0 start, one with four cores' rounds, and the basic template's blocks
    in plain core order each differ from the run in some element; timing mode gives the full run's cycles and
    costs more than the atomic run."""
    kw, til = CASES["fp16_gqa_causal_rounds"]
    a, p = make_case(**kw)
    res = fag(**a, deterministic=True, tiling=til)
    wrong = {"no rounds": dict(dtm=False), "SameAB walk": dict(regions=False), "4 cores": dict(block_dim=4),
             "basic blocks": dict(cv=None, dtm=False, regions=False)}
    for what, over in wrong.items():
        gold = golden_of(a, p, res, **over, atomics=None)
        assert any(not np.array_equal(bits(res.outputs[k]), bits(gold[k])) for k in gold), what
    timing = fag(**a, deterministic=True, tiling=til, mode="timing")
    assert timing.cycles == res.cycles and timing.cycles > fag(**a, tiling=til, mode="timing").cycles


def test_basic_det_regions_are_the_basic_sections_column_by_column():
    """The task list: the 4 x 4 groups of 128 x 128 blocks in (batch, head, row group, column group) order, each
    group's kept blocks by s2 block then s1 block, the k-th on core k % blockDim."""
    from ops.flash_attention_unpadding_score_grad_v5.tiling import block_list
    kw, til = CASES["fp16_gqa_causal_rounds"]
    a, p = make_case(**kw)
    t = fag(**a, deterministic=True, tiling=til, mode="timing").tiling
    basic = block_list(p)
    assert t.sections == len(basic)
    for k, sec in enumerate(basic):
        got = [(t.blkB[i], t.blkN[i], t.blkS1o[i], t.blkS2o[i]) for i in range(t.secStart[k], t.secStart[k + 1])]
        assert got == sorted((blk[:4] for blk in sec), key=lambda x: (x[3], x[2]))
    diag = next(k for k, sec in enumerate(basic) if any(blk[6] for blk in sec) and len(sec) > 1)
    assert [t.blkS2o[i] for i in range(t.secStart[diag], t.secStart[diag + 1])] == \
        sorted(t.blkS2o[i] for i in range(t.secStart[diag], t.secStart[diag + 1]))


def test_basic_det_estimate_runs_its_regions():
    kw, til = CASES["fp16_gqa_causal_rounds"]
    a, _ = make_case(**kw)
    est = fag(**a, deterministic=True, tiling=til, mode="estimate")
    assert est.tiling.template == "basic_det" and est.tiling.dtmBasic and est.time_us > 0


# ------------------------------------------------------------------------------------------- deterministic S1s2Bn2
BN2 = {
    # softmax_in_layout "" and lengths below 1024: priority 1000; six (batch, key/value head) pairs, one per AIV
    "fp16_gqa_mode2_pairs": (dict(seq_q=[600, 130, 300], seq_kv=[600, 130, 300], n1=4, n2=2, d=64, layout="",
                                  sparse_mode=2, causal=True), None),
    # pse (which basic_det refuses), two cores: the weighted split of the pairs over four AIVs
    "fp16_slope_two_cores": (dict(seq_q=[600, 130, 300], seq_kv=[600, 130, 300], n1=4, n2=2, d=40, layout="",
                                  slopes="B", pse_type=2), {"blockDim": 2}),
    # D 96: softmax-grad steps of 8192 // 96 = 85 rows, so a 256-row chunk's last step writes rows up to 264 (Brcb
    # fills whole 8-row groups); a band (sparse 4), 256 x 512 CV blocks, 64 x 128 tiles in ping-pong
    "fp16_d96_band_sft_steps": (dict(seq_q=[400, 200], seq_kv=[500, 200], n1=2, n2=2, d=96, layout="",
                                     sparse_mode=4, causal=True, pre=100, nxt=50), None),
}


def _bn2_atomic_adds(t) -> int:
    """The Fixpipes of a basic_bn2 run that add atomically, counted from the tiling's CV blocks: a dQ strip per S1
    block, a dK and a dV strip per S2 block of each CV block, one Fixpipe per 128 columns of D, less the first
    writes (dQ of S2 CV block 0; dK, dV of S1 CV block 0 of a key/value head's first query head), which store."""
    total = 0
    for k in range(t.sections):
        blocks = range(t.secStart[k], t.secStart[k + 1])
        i = blocks[0]
        if t.blkS2o[i] * 128 >= t.s2CvInner:
            total += len({t.blkS1o[j] for j in blocks})
        if t.blkN[i] % t.gSize or t.blkS1o[i] * 128 >= t.s1CvInner:
            total += 2 * len({t.blkS2o[j] for j in blocks})
    return total * -(-t.dSize // 128)


@pytest.mark.parametrize("name", BN2)
def test_bn2_det_bit_exact_and_one_writer_per_row(name):
    a, p, res, t = _det_run(BN2, name)
    til = BN2[name][1]
    assert (t.template, t.cannTemplate, t.sabDtm) == ("basic_bn2", "deterministic_s1s2bn2", False)
    check_golden_and_accuracy(a, p, res)
    # the first writes store without atomics: the log holds the other adds only, and a golden that adds every
    # strip finds the log short
    assert 0 < len(res.extra["atomics"]) == _bn2_atomic_adds(t)
    with pytest.raises(ValueError, match="atomic log"):
        golden_of(a, p, res, first_writes=False)
    owner = {}
    for c in range(t.blockDim):
        for step in t.core_steps(c):
            for k, _, v in step:
                for i in range(t.secStart[k], t.secStart[k + 1]):  # a pair stays on one AIV, which runs every row
                    assert v is not None and owner.setdefault((t.blkB[i], t.blkN[i] // t.gSize), (c, v)) == (c, v)
    # each output row has one writer, so the result does not depend on when the adds land: core after core
    # (no atomic log) gives the same bits, a round-robin split of the same sections does not
    for k, g in golden_of(a, p, res, atomics=None).items():
        np.testing.assert_array_equal(bits(res.outputs[k]), bits(g), err_msg=k)
    if til is None:
        rr = golden_of(a, p, res, core_starts=None, atomics=None)
        assert any(not np.array_equal(bits(res.outputs[k]), bits(rr[k])) for k in ("dk", "dv"))
        assert fag(**a, deterministic=True, mode="timing").cycles == res.cycles


def test_bn2_cv_blocks_on_hand_worked_shapes():
    """singleM x singleN of DecideBaseMND / NMDStrategy (docs/fag.md "Tiling"): D 128, s2 900 with a large L2 takes
    the 8-wide S2 ratio (128 x 1024), with a small one the 4-wide (128 x 512); D 64 and s2 >= 256 a 128 x 256 cube
    base (2 x 2: 256 x 512); D 128, s2 < 512: base min(256, s1 aligned to 16) x min(128, s2 aligned to 16), 112 wide
    for s2 100, so 1 x 4, cut to ceil(300 / 256) = 2 rows of 256 (512 x 112, npusim 512 x 128). A run's CV blocks
    and their columns follow: sparse 2 (causal from the top left) keeps the columns up to each CV block's last row,
    in pieces of the vector tile's width (256 with D 64 and s2 >= 256)."""
    from types import SimpleNamespace as V
    from ops.flash_attention_unpadding_score_grad_v5.templates import bn2_cv_inner
    big, small = 192 * 2 ** 20, 64 * 2 ** 20
    assert bn2_cv_inner(V(max_sq=900, max_skv=900, D=128), big) == (128, 1024)
    assert bn2_cv_inner(V(max_sq=900, max_skv=900, D=128), small) == (128, 512)
    assert bn2_cv_inner(V(max_sq=600, max_skv=300, D=64), big) == (256, 512)
    assert bn2_cv_inner(V(max_sq=300, max_skv=100, D=128), big) == (512, 128)
    kw, _ = BN2["fp16_gqa_mode2_pairs"]  # s 600 / 130 / 300, D 64: base 128 x 256, s2Ratio 3, s1Ratio 1
    a, _ = make_case(**kw)
    t = fag(**a, deterministic=True, mode="timing").tiling
    assert (t.s1CvInner, t.s2CvInner, t.cvTrim) == (128, 768, 256)
    # batch 0, query head 0: CV block s1o computes rows 128 s1o .. by the 256-wide pieces up to its last row
    # (sparse 2): 256, 256, 512, 512 columns, then the whole 600 for rows 512-599
    ends = [max(t.blkS2o[i] * 128 + t.blkCols[i] for i in range(t.secStart[k], t.secStart[k + 1])) for k in range(5)]
    assert [t.blkS1o[t.secStart[k]] for k in range(5)] == [0, 1, 2, 3, 4] and ends == [256, 256, 512, 512, 600]
    assert {(t.blkB[i], t.blkN[i]) for i in range(t.secStart[5])} == {(0, 0)}


def test_bn2_split_on_hand_worked_weights():
    """Pairs (b, n2) weigh ceil(Sq / 64) ceil(Skv / 64): 100, 100, 9, 9, 25, 25. Over the 4 AIVs of two cores the
    smallest largest part is 100; the walk cuts after pair 0 and pair 1, and at pair 5 the one AIV left takes it
    alone: AIV runs [0], [1], [2, 3, 4], [5], so core 0 holds batch 0 and core 1 batches 1 and 2."""
    kw, til = BN2["fp16_slope_two_cores"]
    a, _ = make_case(**kw)
    t = fag(**a, deterministic=True, tiling=til, mode="timing").tiling
    assert t.blockDim == 2 and t.splitAivs == 4
    batches = [{t.blkB[i] for k in t.core_sections(c) for i in range(t.secStart[k], t.secStart[k + 1])}
               for c in range(2)]
    assert batches == [{0}, {1, 2}]


def test_det_regions_compute_dropped_blocks_without_causal_opt():
    """basic_det computes every 128 x 128 block of a region unless enableCausalOpt (sparse 3 with Sq == Skv in
    every batch), as AddrComputeDet / the det cube do: with unequal lengths the regions hold the blocks the mask
    drops whole (flagged masked), with equal ones only the kept blocks; the golden's own regions agree."""
    from ops.flash_attention_unpadding_score_grad_v5.golden import sections
    from ops.flash_attention_unpadding_score_grad_v5.tiling import block_list, det_block_list
    for seq_q, seq_kv, opt in (([300, 520], [700, 520], False), ([700, 300], [700, 300], True)):
        _, p = make_case(seq_q=seq_q, seq_kv=seq_kv, d=16, sparse_mode=3, causal=True)
        regions, kept = det_block_list(p), block_list(p)
        assert regions == sections(p, None, True, True)
        assert len(regions) == len(kept)  # the same regions, visited in the same order
        n_regions, n_kept = sum(map(len, regions)), sum(map(len, kept))
        assert (n_regions == n_kept) == opt
        if not opt:  # batch 0, rows 0..127, columns 512..639 lie past the causal edge (j - i > 400)
            blk = next(x for sec in regions for x in sec if x[:4] == (0, 0, 0, 4))
            assert blk[4:] == (128, 128, True)
