"""Estimate mode's work counts (work.py) equal what tiling.block_list enumerates, section by section."""
import numpy as np
import pytest

from npusim import TensorSpec
from npusim.chip import chip as get_chip
from ops.common.masks import compressed_causal_mask
from ops.flash_attention_unpadding_score_grad_v5.tiling import block_list
from ops.flash_attention_unpadding_score_grad_v5.validate import validate
from ops.flash_attention_unpadding_score_grad_v5.work import count_work

SPEC = get_chip("Ascend910B2")


def problem(seq_q, seq_kv, n1=2, sparse_mode=0, pre=2147483647, nxt=2147483647, full_mask=False, prefix=None):
    t1, t2, d = int(sum(seq_q)), int(sum(seq_kv)), 16
    f16 = lambda *s: TensorSpec(s, np.float16)  # noqa: E731
    stats = TensorSpec((t1, n1, 8), np.float32)
    if full_mask:
        mask = TensorSpec((max(seq_q), max(seq_kv)), np.bool_)
    elif sparse_mode == 6:  # the 3072 x 2048 prefix mask
        mask = TensorSpec((3072, 2048), np.bool_)
    elif sparse_mode in (2, 3, 4, 7, 8):
        mask = compressed_causal_mask().astype(bool)
    else:
        mask = None
    return validate(f16(t1, n1, d), None, f16(t2, 1, d), None, f16(t2, 1, d), f16(t1, n1, d), None, None, None, mask,
                    stats, stats, None, f16(t1, n1, d), None, prefix, np.cumsum(seq_q).tolist(),
                    np.cumsum(seq_kv).tolist(), None, None, 0.25, 1.0, pre, nxt, n1, "TND", 0, sparse_mode, 1,
                    "same_as_input", chip_spec=SPEC)


CASES = [
    dict(seq_q=[700], seq_kv=[700], sparse_mode=2),
    dict(seq_q=[300, 0, 1000, 129], seq_kv=[500, 64, 1000, 131], sparse_mode=3),
    dict(seq_q=[1024, 777], seq_kv=[900, 2000], sparse_mode=4, pre=300, nxt=200),
    dict(seq_q=[640, 5], seq_kv=[2000, 700], sparse_mode=0),
    dict(seq_q=[513, 1500], seq_kv=[513, 1400], sparse_mode=1, full_mask=True),
    dict(seq_q=[1000, 1000], seq_kv=[1500, 1000], sparse_mode=7, nxt=0),
    dict(seq_q=[1000, 1000, 300], seq_kv=[1200, 1000, 300], sparse_mode=8, nxt=100),
    dict(seq_q=[384] * 5, seq_kv=[384] * 5, n1=3, sparse_mode=2),
    dict(seq_q=[700, 300, 900], seq_kv=[1000, 300, 1300], sparse_mode=6, prefix=[700, 10, 529]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"mode{c.get('sparse_mode')}-{len(c['seq_q'])}b")
@pytest.mark.parametrize("block_dim", [None, 5, 24])
def test_counts_equal_the_enumerated_blocks(case, block_dim):
    p = problem(**case)
    sections = block_list(p)
    work = count_work(p, block_dim, SPEC.aic_count)
    bd = block_dim if block_dim is not None else max(1, min(SPEC.aic_count, len(sections)))
    assert (work.sections, work.block_dim) == (len(sections), bd)
    assert work.blocks == sum(map(len, sections))
    assert work.masked == sum(blk[6] for sec in sections for blk in sec)
    per = np.zeros((3, bd), np.int64)
    for k, sec in enumerate(sections):
        per[:, k % bd] += (1, len(sec), sum(blk[6] for blk in sec))
    assert (work.core_sections.tolist(), work.core_blocks.tolist(), work.core_masked.tolist()) == \
        (per[0].tolist(), per[1].tolist(), per[2].tolist())
    for g in range(0, len(sections), 7):
        assert work.blocks_of(p, g) == sections[g]
        assert work.section_counts(g) == (len(sections[g]), sum(blk[6] for blk in sections[g]))
    gs = np.arange(len(sections))
    blocks, masked = work.counts_many(gs)
    assert blocks.tolist() == [len(s) for s in sections]
    assert masked.tolist() == [sum(blk[6] for blk in s) for s in sections]


def test_a_million_tokens_are_counted_without_listing_them():
    p = problem([1 << 20], [1 << 20], n1=8, sparse_mode=2)
    work = count_work(p, None, SPEC.aic_count)
    n = (1 << 20) // 128
    assert work.blocks == 8 * n * (n + 1) // 2 and work.masked == 8 * n
    assert work.core_blocks.sum() == work.blocks and work.core_sections.sum() == work.sections
