"""The tunable space of SparseFlashAttentionGrad for a sweep: the AI Cores the query tokens are dealt to.

The gathered chunk (512 rows) and the piece sizes are fixed by the kernel (tiling.md §4), so ``blockDim``
is the one override (tiling.OVERRIDABLE). UB/L1 bytes are the launch's measured buffer high-water marks
(timing mode; None in estimate mode).
"""
from __future__ import annotations

from npusim.sweep.space import TilingSpace, core_count_space


def tiling_space(problem: dict, chip) -> TilingSpace:
    """SparseFlashAttentionGrad's axes on *chip*."""
    return core_count_space("sfag", chip, ("blockDim is capped at the query tokens T1 (one token per core at least)",))
