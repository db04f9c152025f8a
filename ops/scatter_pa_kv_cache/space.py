"""The tunable space of ScatterPaKvCache (``tiling=`` overrides, tiling.OVERRIDES) for a sweep.

blockDim takes every vector-core count; ubSize takes any multiple of 32 up to the UB left after the
control staging, so the space offers a ladder through it (1 KiB, 2 KiB, ... and the default). A ubSize
too small for one row of a compress template is refused by the tiling (161002) and recorded.
"""
from __future__ import annotations

from npusim.sweep.space import Axis, TilingSpace, ladder, steps
from ops.scatter_pa_kv_cache import tiling as T


def tiling_space(problem: dict, chip) -> TilingSpace:
    """ScatterPaKvCache's axes on *chip*."""
    top = (chip.ub_bytes - T.RESERVED_UB_BYTES) // T.BLOCK_BYTES * T.BLOCK_BYTES
    return TilingSpace(
        operator="spkc",
        axes=(
            Axis("blockDim", steps(1, chip.aiv_count, 1), f"vector cores in [1, {chip.aiv_count}]", "usedCoreNum"),
            Axis("ubSize", ladder(1024, top, T.BLOCK_BYTES),
                 f"multiple of {T.BLOCK_BYTES} B, at most the UB left after control staging ({top} B for "
                 "token templates)", "ubSize"),
        ),
        constraints=("compress templates (Alibi/Rope/Omni): one padded token row fits a copy buffer of ubSize",),
        measure=measure,
    )


def measure(result, chip, overrides: dict) -> dict:
    """Effective cores and UB bytes (token data plus the staged control values); no L1 (vector only)."""
    til = result.tiling
    staged = T.RESERVED_UB_BYTES  # the slots are staged in the reserve (tiling.py)
    if til.templateType in T.COMPRESS_TEMPLATES:
        staged = T._round_up(til.batch * til.typeByteSlot, T.BLOCK_BYTES) + 3 * T.CONTROL_CHUNK_BYTES
    return {"eff.blockDim": til.usedCoreNum, "eff.ubSize": til.ubSize, "ub_bytes": til.ubSize + staged,
            "l1_bytes": None}
