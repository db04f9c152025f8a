"""The L2-start rules the estimates share (ops/common/l2_warm.py) and the ragged index helper (ops/common/ragged.py)."""
from __future__ import annotations

import numpy as np

from npusim.estimate import steady_l2_touched
from npusim.memory.gm import L2_PAGE_BYTES
from ops.common.l2_warm import first_reads_missed, head_rows_pages, resident, start_touched
from ops.common.ragged import ragged_arange


def test_ragged_arange_counts_within_each_group():
    assert ragged_arange([3, 0, 2, 1]).tolist() == [0, 1, 2, 0, 1, 0]
    assert ragged_arange(np.zeros(0, np.int32)).size == 0


def test_head_rows_pages_spans_from_the_first_head_to_the_last_heads_rows():
    # 4 heads of 128 fp16 columns: a 1-row copy from token 0 reaches the last head's row, 4 * 256 bytes
    assert head_rows_pages(np.array([0]), 4, 128, 128, 2) == L2_PAGE_BYTES
    # two copies a page apart in tokens cover two pages; the same copy twice covers one
    tokens_per_page = L2_PAGE_BYTES // (4 * 128 * 2)
    assert head_rows_pages(np.array([0, tokens_per_page]), 4, 128, 128, 2) == 2 * L2_PAGE_BYTES
    assert head_rows_pages(np.array([0, 0]), 4, 128, 128, 2) == L2_PAGE_BYTES


def test_start_touched_takes_the_pages_within_l2_and_the_steady_full_size_beyond():
    l2 = 100 << 20
    assert start_touched(60 << 20, 300 << 20, l2) == 60 << 20  # the touched pages fit: the full size is not used
    assert start_touched(150 << 20, 300 << 20, l2) == steady_l2_touched(300 << 20, l2) < 300 << 20


def test_resident_names_keep_cold_kv_out():
    assert first_reads_missed(4) == 0.75 and first_reads_missed(1) == 0.0 and first_reads_missed(0) == 0.0
    assert resident(("atten_mask",), 0.0) == {"atten_mask": 1.0}
    assert resident(("atten_mask", "workspace"), 0.75) == {"atten_mask": 1.0, "workspace": 1.0, "key": 0.75,
                                                           "value": 0.75}
