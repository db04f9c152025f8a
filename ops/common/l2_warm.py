"""The L2 state an estimate sample starts in (``npusim.launch``'s *l2_warm*: touched bytes, resident buffers).

Why one module: the estimates of FlashAttentionVarLenScore, PromptFlashAttentionV2 and the FAG kernel start
their samples by the same rules, which were written out in each of them: the pages a head-strided copy touches,
"the touched pages where they fit L2, else the launch's average over its full working set", and K/V resident
for the share of reads that are not a row's first.
"""
from __future__ import annotations

import numpy as np

from npusim.estimate import steady_l2_touched
from npusim.memory.gm import page_union


def head_rows_pages(token, heads: int, d: int, reach, itemsize: int) -> int:
    """L2 bytes of the pages that copies of rows of one head of a TND tensor (*heads* heads of *d* columns) touch.
    A strided copy is booked as its byte count from its first element (npusim/core.py transfer; npusim/memory/gm.py
    touch), so a copy from token t covers the elements [t H d, (t H + H - 1) d + reach) over all heads; *reach*:
    the elements from the last head's start to the copy's end (rows x d for whole rows). *token*, *reach*: per
    copy (arrays or scalars)."""
    first = np.asarray(token, np.int64) * heads * d
    return page_union(first * itemsize, (first + (heads - 1) * d + reach) * itemsize)


def start_touched(pages: int, full_bytes: int, l2_bytes: int) -> int:
    """Touched bytes a sample's L2 model starts at: *pages* (the bytes of the pages the launch's copies touch)
    where they fit L2, so that the inputs alone keep the hit scale at 1, as in the launch (the workspace's pages may
    still take the launch past L2: FAG counts its per-core ones, sample_l2); else steady_l2_touched of *full_bytes*
    (the tensors' full sizes: what the estimates were measured with beyond L2)."""
    if pages <= l2_bytes:
        return pages
    return steady_l2_touched(full_bytes, l2_bytes)


def first_reads_missed(reads: float) -> float:
    """The resident fraction of K/V pages when each row is read *reads* times in the launch and only its first
    read misses L2: 1 - 1/reads (0 for rows read at most once)."""
    return 1.0 - 1.0 / reads if reads > 1 else 0.0


def resident(always, kv_fraction: float) -> dict:
    """The l2_warm names: the buffers in *always* (re-read all launch long) wholly resident, key and value at
    *kv_fraction* where it is above 0 (else they start cold)."""
    names = dict.fromkeys(always, 1.0)
    if kv_fraction > 0:
        names["key"] = names["value"] = kv_fraction
    return names
