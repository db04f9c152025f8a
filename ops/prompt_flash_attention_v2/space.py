"""The tunable space of PromptFlashAttentionV2 (``tiling=`` overrides of tiling.py) for a sweep.

Legal values are the ones ``tiling._check_override`` accepts; the joint rules (UB and L1 fit, the
compressed-mask window) are checked by ``tiling.fit_base_sizes`` when a point runs, and a point they
refuse is recorded with that AclnnError (161002).
"""
from __future__ import annotations

from npusim.sweep.space import Axis, TilingSpace, steps
from ops.prompt_flash_attention_v2 import tiling as T


def tiling_space(problem: dict, chip) -> TilingSpace:
    """PFA's axes on *chip* (the problem does not narrow them: every shape accepts the same overrides)."""
    return TilingSpace(
        operator="pfa",
        axes=(
            Axis("sOuter", steps(16, 128, 16), "multiple of 16 in [16, 128] (query rows per vector core)",
                 "sOuterFactor"),
            Axis("sInner", steps(64, 2048, 64), "multiple of 64 in [64, 2048] (key columns per tile)",
                 "sInnerFactor"),
            Axis("softmaxSOuter", steps(8, 128, 8), "multiple of 8, at most sOuter (rows per softmax slice)",
                 "softmaxSOuterFactor"),
            Axis("blockDim", steps(1, chip.aic_count, 1), f"AI Cores in [1, {chip.aic_count}]", "blockDim"),
        ),
        constraints=(
            "softmaxSOuter <= sOuter",
            f"UB: the vector buffers (tiling.ub_bytes) fit {chip.ub_bytes} B (less the score staging on 310P)",
            f"L1: the cube buffers (tiling.l1_bytes) fit {chip.l1_bytes} B",
            f"sparse modes 2-4: sInner + softmaxSOuter <= {T.COMPRESSED_MASK_SIDE} (compressed mask window)",
        ),
        measure=measure,
    )


def measure(result, chip, overrides: dict) -> dict:
    """Effective axis values and the UB/L1 bytes of the tiling *result* ran with (either mode)."""
    til, problem = result.tiling, result.extra["problem"]
    so, si, sm = til.sOuterFactor, til.sInnerFactor, til.softmaxSOuterFactor
    return {"eff.sOuter": so, "eff.sInner": si, "eff.softmaxSOuter": sm, "eff.blockDim": til.blockDim,
            "ub_bytes": T.ub_bytes(problem, so, si, sm), "l1_bytes": T.l1_bytes(problem, so, T.kv_chunk(problem, chip, so))}
