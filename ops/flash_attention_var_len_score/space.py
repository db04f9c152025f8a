"""The tunable space of FlashAttentionVarLenScore (``tiling=`` overrides of tiling.py) for a sweep.

Legal values are the ones ``tiling._fit`` and ``tiling.base_sizes`` accept; with s1BaseSize or
vec1Elems given, the tiling no longer shrinks them to fit, so a point whose buffers overflow L1 or UB
is refused there (561002) and recorded as such by the sweep.
"""
from __future__ import annotations

from npusim.sweep.space import Axis, TilingSpace, steps
from ops.flash_attention_var_len_score import tiling as T


def tiling_space(problem: dict, chip) -> TilingSpace:
    """FA varlen's axes on *chip* (the same for every shape)."""
    return TilingSpace(
        operator="fa",
        axes=(
            Axis("s1BaseSize", steps(16, T.S1_BASE_MAX, 16),
                 f"multiple of 16 in [16, {T.S1_BASE_MAX}] (query rows per work item)", "s1BaseSize"),
            Axis("vec1Elems", steps(1024, T.VEC1_ELEMS, 1024),
                 f"multiple of 1024 in [1024, {T.VEC1_ELEMS}] (fp32 elements per vector slice)", "vec1Elems"),
            Axis("blockDim", steps(1, chip.aic_count, 1), f"AI Cores in [1, {chip.aic_count}]", "blockDim"),
        ),
        constraints=(
            f"L1: Q block(s), K/P/V chunks (tiling.l1_bytes) fit {chip.l1_bytes} B at the given s1BaseSize",
            f"UB: the vector buffers (tiling.ub_bytes) fit {chip.ub_bytes} B at the given vec1Elems",
        ),
        measure=measure,
    )


def measure(result, chip, overrides: dict) -> dict:
    """Effective axis values and UB/L1 bytes (the fit is recomputed: estimate mode's tiling omits them)."""
    problem = result.extra["problem"]
    sizes = T.base_sizes(problem, chip, overrides)
    s1b, e = sizes["s1BaseSize"], sizes["vec1Elems"]
    return {"eff.s1BaseSize": s1b, "eff.vec1Elems": e, "eff.blockDim": result.tiling.blockDim,
            "ub_bytes": T.ub_bytes(problem, s1b, e, sizes["template"]),
            "l1_bytes": T.l1_bytes(problem, s1b, sizes["qBufNum"], sizes["nChunk"], sizes["kChunk"])}
