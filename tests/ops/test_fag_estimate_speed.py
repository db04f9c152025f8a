"""Speed paths of FlashAttentionUnpaddingScoreGradV5's estimate (estimate.py) give the floats of the plain paths."""
import importlib

import numpy as np

estimate_module = importlib.import_module("ops.flash_attention_unpadding_score_grad_v5.estimate")


def _plain_ends(core, end, k):
    ends = np.zeros(k)
    np.maximum.at(ends, core, end)
    return ends


def test_core_ends_equal_max_at_on_grouped_and_scattered_rows():
    """The per-core last end cycle equals np.maximum.at's bit for bit: rows grouped by core (a full trace's order,
    with cores that have no row, and cycles past 2**53 where the float conversion rounds) and rows in any order."""
    rng = np.random.default_rng(7)
    k = 24
    for trial in range(40):
        n = int(rng.integers(0, 3000))
        core = np.sort(rng.choice([c for c in range(k) if c % 5 != trial % 5], n)).astype(np.int32)
        end = rng.integers(0, 1 << 60 if trial % 2 else 1 << 20, n).astype(np.int64)
        got = estimate_module._core_ends(core, end, k)
        assert got.tobytes() == _plain_ends(core, end, k).tobytes()
        shuffled = rng.permutation(n)
        got = estimate_module._core_ends(core[shuffled], end[shuffled], k)
        assert got.tobytes() == _plain_ends(core[shuffled], end[shuffled], k).tobytes()
