"""The tunable space of FlashAttentionUnpaddingScoreGradV5 for a sweep: the AI Cores the block sections
are dealt to.

The template fixes the block sizes (tiling.md §3), so ``blockDim`` is the one override
(tiling.OVERRIDABLE). UB/L1 bytes are the main launch's measured buffer high-water marks (timing mode;
None in estimate mode).
"""
from __future__ import annotations

from npusim.sweep.space import TilingSpace, core_count_space


def tiling_space(problem: dict, chip) -> TilingSpace:
    """FlashAttentionUnpaddingScoreGradV5's axes on *chip*."""
    return core_count_space("fag", chip, ("deterministic runs keep one dq/dk/dv copy per core: the workspace "
                                          "grows with blockDim",))
