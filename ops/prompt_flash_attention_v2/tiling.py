"""Host tiling of PromptFlashAttentionV2 on npusim: base sizes, UB/L1 fitting, core split, workspace.

Follows the CANN tiling (research/tiling.md §1): base sizes from ``AdjustCVTilingCVDiff``, the UB
fitting loop of ``FindOptimalTilingBasicBLock`` (shrink sInner by 64, then sOuter by 16, then
softmaxSOuter by 8) applied to *this kernel's* UB buffers, and the greedy weighted core split of
``PromptFlashAttentionSplitNSNew``. The cube works on blocks of 2 x sOuter query rows, each vector core
of the AI Core taking one half (docs/pfa.md "Tiling"). Raises AclnnError 561002 when no tiling fits and
161002 for an illegal user override.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from npusim.errors import ACLNN_ERR_INNER_TILING_ERROR, ACLNN_ERR_PARAM_INVALID, AclnnError
from ops.prompt_flash_attention_v2.contract import MaskKind, QuantPath

SYSTEM_WORKSPACE_BYTES = 16 * 1024 * 1024  # CANN reserves 16 MiB (GetPFAWorkSpaceSize, tiling.md §1)
CUBE_BASE = 128  # cube base block 128 x 128 (tiling.md "Generic design")
STAGE_ROWS = 16  # score rows per L0C -> UB -> GM step of the combined-core kernel (ASSUMPTION, as PV_ROWS)
PV_ROWS = 16  # rows of PV moved to UB per step (ASSUMPTION: keeps the PV buffer at 8 KiB for D=128)
CMP_CHUNK = 2048  # elements per mask Compare (a 4 KiB fp16 zero vector is compared against)
BLOCK = 32
# The optimised mask of modes 2/3/4 is 2048 x 2048 (seed 约束说明); a window of r rows x c columns read at
# the causal offset stays inside it iff r + c <= 2048 (masks.compressed_tile).
COMPRESSED_MASK_SIDE = 2048
OVERRIDABLE = ("sOuter", "sInner", "softmaxSOuter", "blockDim")


def _ceil(a: int, b: int) -> int:
    return -(-a // b) * b


@dataclass(frozen=True)
class PfaTilingData:
    """The tiling the kernel reads (CANN field names where one exists)."""

    batchSize: int
    headNumSize: int
    kvHeadNumSize: int
    headSize: int  # D as the kernel sees it (padded)
    seqSize: int
    seqInnerSize: int
    sOuterFactor: int
    sInnerFactor: int
    softmaxSOuterFactor: int
    scaleValue: float
    sparseMode: int
    blockDim: int
    softmaxTypeBytes: int
    pTypeBytes: int
    pvTypeBytes: int
    workspaceSize: int
    ubBytes: int
    l1Bytes: int
    # per AI Core: [start, end) into the item table
    coreItemStart: tuple
    coreItemEnd: tuple
    # item table: (n, b, first row, rows, first tile, end tile)
    itemN: tuple
    itemB: tuple
    itemRow0: tuple
    itemRows: tuple
    itemTile0: tuple
    itemTile1: tuple

    def asdict(self) -> dict:
        return asdict(self)

    @property
    def items(self) -> int:
        return len(self.itemN)

    @property
    def tasks(self) -> int:
        return int(sum(e - s for s, e in zip(self.itemTile0, self.itemTile1)))


def base_sizes(problem) -> tuple[int, int, int]:
    """(sOuter, sInner, softmaxSOuter) before fitting (AdjustCVTilingCVDiff, tiling.md §1)."""
    d = problem.head_dim_padded
    if problem.softmax_dtype.itemsize == 4:
        if d >= 200:
            s_outer, s_inner, sm = 64, 512, 8
        elif d >= 128:
            s_outer, s_inner, sm = 128, 512, 8
        elif d >= 32:
            s_outer, s_inner, sm = 128, 512, 16
        else:
            s_outer, s_inner, sm = 128, 512, 32
    else:
        # D >= 200: sOuter 64 as the fp32 path (npusim's output accumulator is fp32 in UB, so a 128-row
        # block of D >= 200 would leave the fitting loop only tiny sInner; studies/pfa_tiling.toml)
        s_outer, s_inner = (64 if d >= 200 else 128), 1024
        if problem.s2 <= 1024 and problem.quant_path != QuantPath.INT8_IN_INT8_OUT:
            s_inner = 512
        sm = 16384 // s_inner
    if problem.s1 <= 16:
        s_outer = 16
    return s_outer, s_inner, min(sm, s_outer)


def ub_bytes(problem, s_outer: int, s_inner: int, sm: int) -> int:
    """UB bytes one vector core of the kernel allocates for these base sizes (kernel.py InitBuffer)."""
    t = problem.softmax_dtype.itemsize
    p = p_type_bytes(problem)
    d = problem.head_dim_padded
    pv = pv_type_bytes(problem)
    total = 2 * sm * s_inner * t  # score slices, ping-pong
    if p != t:
        total += 2 * sm * s_inner * p  # probabilities out
    if problem.mask_kind != MaskKind.NONE:
        total += sm * s_inner + 2 * CMP_CHUNK * 2  # mask bytes, fp16 chunk and zeros
    total += _ceil(max(sm * s_inner, s_outer) // 8, BLOCK)  # compare bits
    total += sm * 256  # row fold accumulators
    total += 4 * _ceil(sm * 4, BLOCK)  # row max/sum in T and fp32
    total += (2 * 2 + 2 + 1) * _ceil(s_outer * 4, BLOCK)  # m, l per item parity; alpha per task parity; tmp
    total += 2 * s_outer * BLOCK  # Brcb buffers
    total += s_outer * d * 4  # output accumulator O (fp32)
    total += PV_ROWS * d * (4 + pv)  # PV rows (+ fp32 copy)
    total += 2 * PV_ROWS * d * problem.out_dtype.itemsize  # output rows, ping-pong
    if problem.quant_path in (QuantPath.INT8_IN_INT8_OUT, QuantPath.FP_IN_INT8_OUT):
        total += PV_ROWS * d * 2 + 2 * _ceil(d * 2, BLOCK)  # fp16 staging, per-channel scale/offset
    return total


def ub_limit(problem, chip) -> int:
    """UB bytes left for ub_bytes(): on a combined core (310P) the kernel_combined.py score staging
    (two STAGE_ROWS x CUBE_BASE buffers in the softmax dtype) comes off the chip's UB."""
    if chip.core_split:
        return chip.ub_bytes
    return chip.ub_bytes - 2 * STAGE_ROWS * CUBE_BASE * problem.softmax_dtype.itemsize


def l1_bytes(problem, s_outer: int) -> int:
    """L1 bytes the cube core allocates: Q blocks, K chunks, P and V chunks (all double-buffered)."""
    d = problem.head_dim_padded
    q = problem.dtype.itemsize
    rows = _ceil(2 * s_outer, 32)
    return 2 * (rows * d * q + CUBE_BASE * d * q + rows * CUBE_BASE * p_type_bytes(problem)
                + CUBE_BASE * CUBE_BASE * q)


def p_type_bytes(problem) -> int:
    return 1 if problem.dtype == np.int8 else problem.dtype.itemsize


def pv_type_bytes(problem) -> int:
    return 2 if problem.dtype == np.int8 else 4


def fit_base_sizes(problem, chip, overrides: dict) -> tuple[int, int, int]:
    """Shrink the base sizes until the kernel's buffers fit UB and L1 (FindOptimalTilingBasicBLock)."""
    s_outer, s_inner, sm = base_sizes(problem)
    if overrides:
        s_outer = overrides.get("sOuter", s_outer)
        s_inner = overrides.get("sInner", s_inner)
        sm = overrides.get("softmaxSOuter", min(sm, s_outer))
        _check_override(s_outer, s_inner, sm)
        if problem.mask_kind == MaskKind.COMPRESSED and s_inner + sm > COMPRESSED_MASK_SIDE:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID,
                             f"tiling: sInner + softmaxSOuter = {s_inner + sm} exceeds {COMPRESSED_MASK_SIDE} with the "
                             f"compressed mask of sparse_mode {problem.sparse_mode} (the kernel reads softmaxSOuter x "
                             f"sInner windows of the {COMPRESSED_MASK_SIDE} x {COMPRESSED_MASK_SIDE} mask)")
        if ub_bytes(problem, s_outer, s_inner, sm) > ub_limit(problem, chip) or \
                l1_bytes(problem, s_outer) > chip.l1_bytes:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID,
                             f"tiling: sOuter={s_outer}, sInner={s_inner}, softmaxSOuter={sm} need "
                             f"{ub_bytes(problem, s_outer, s_inner, sm)} B of UB ({ub_limit(problem, chip)}) and "
                             f"{l1_bytes(problem, s_outer)} B of L1 ({chip.l1_bytes})")
        return s_outer, s_inner, sm
    ub = ub_limit(problem, chip)
    while ub_bytes(problem, s_outer, s_inner, sm) > ub or l1_bytes(problem, s_outer) > chip.l1_bytes:
        if s_inner > 64 and ub_bytes(problem, s_outer, s_inner, sm) > ub:
            s_inner -= 64
        elif s_outer > 16:
            s_outer -= 16
            sm = min(sm, s_outer)
        elif sm > 8:
            sm -= 8
        else:
            raise AclnnError(ACLNN_ERR_INNER_TILING_ERROR,
                             f"tiling: cannot find valid sOuterFactor/sInnerFactor for D={problem.head_dim_padded} "
                             f"in UB {chip.ub_bytes} B and L1 {chip.l1_bytes} B")
    return s_outer, s_inner, sm


def _check_override(s_outer: int, s_inner: int, sm: int) -> None:
    for name, v, step in (("sOuter", s_outer, 16), ("sInner", s_inner, 64), ("softmaxSOuter", sm, 8)):
        if not isinstance(v, (int, np.integer)) or v <= 0 or v % step:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: {name} must be a positive multiple of {step}, got {v!r}")
    if sm > s_outer:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: softmaxSOuter {sm} must not exceed sOuter {s_outer}")
    if s_outer > 128 or s_inner > 2048:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, "tiling: sOuter <= 128 and sInner <= 2048 (repeat limits)")


def item_table(problem, s_outer: int, s_inner: int):
    """All work items (n, b, row0, rows, tile0, tile1) in CANN order: n-major, then batch, then s1 block.

    A block of 2*sOuter rows computes tiles j (columns [j sInner, (j+1) sInner) clipped to act_kv) that
    intersect its band [s2First, s2Last): s2First = clip(row0 - pre_lu, 0, act_kv), s2Last =
    clip(row0 + rows + next_lu, 0, act_kv) (docs/pfa.md). Blocks with no tile are dropped.
    """
    block = 2 * s_outer
    per_batch = []
    for b in range(problem.batch):
        act_q = int(problem.computed_seq_lengths[b])
        act_kv = int(problem.actual_seq_lengths_kv[b])
        if act_q <= 0 or act_kv <= 0:
            per_batch.append(np.zeros((0, 4), np.int64))
            continue
        row0 = np.arange(0, act_q, block, dtype=np.int64)
        rows = np.minimum(block, act_q - row0)
        pre, nxt = int(problem.pre_tokens_lu[b]), int(problem.next_tokens_lu[b])
        first = np.clip(row0 - pre, 0, act_kv)
        last = np.clip(row0 + rows + nxt, 0, act_kv)
        t0 = first // s_inner
        t1 = -(-last // s_inner)
        keep = last > first
        per_batch.append(np.stack([row0, rows, t0, t1], axis=1)[keep])
    out = []
    for n in range(problem.num_heads):
        for b, tab in enumerate(per_batch):
            if len(tab):
                out.append(np.column_stack([np.full(len(tab), n), np.full(len(tab), b), tab]))
    if not out:
        return np.zeros((0, 6), np.int64)
    return np.concatenate(out)


def split_cores(weights: np.ndarray, cores: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy contiguous partition: core c ends where the cumulative weight reaches total*(c+1)/cores."""
    cum = np.cumsum(weights)
    total = cum[-1] if len(cum) else 0
    targets = total * np.arange(1, cores + 1) / cores
    ends = np.searchsorted(cum, targets - 1e-9, side="left") + 1
    ends = np.minimum(np.maximum.accumulate(ends), len(weights))
    ends[-1] = len(weights)
    starts = np.concatenate([[0], ends[:-1]])
    return starts, ends


def check_overrides(overrides: dict | None, chip) -> dict:
    """The user's overrides as a dict: names in OVERRIDABLE, blockDim in [1, aic_count] (161002);
    the sizes are checked by fit_base_sizes. Timing and estimate modes both start here."""
    overrides = dict(overrides or {})
    unknown = set(overrides) - set(OVERRIDABLE)
    if unknown:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: unknown override(s) {sorted(unknown)}; "
                                                  f"allowed: {', '.join(OVERRIDABLE)}")
    bd = overrides.get("blockDim")
    if bd is not None and (isinstance(bd, bool) or not isinstance(bd, (int, np.integer))
                           or not 1 <= bd <= chip.aic_count):
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: blockDim must be in [1, {chip.aic_count}], got {bd!r}")
    return overrides


def pfa_tiling(problem, chip, overrides: dict | None = None) -> PfaTilingData:
    """The full tiling of one validated call on *chip*."""
    overrides = check_overrides(overrides, chip)
    s_outer, s_inner, sm = fit_base_sizes(problem, chip, {k: v for k, v in overrides.items() if k != "blockDim"})
    items = item_table(problem, s_outer, s_inner)
    weights = items[:, 5] - items[:, 4] if len(items) else np.zeros(0, np.int64)
    block_dim = int(overrides.get("blockDim", min(chip.aic_count, max(len(items), 1))))
    starts, ends = split_cores(weights, block_dim) if len(items) else (np.zeros(block_dim, int),
                                                                          np.zeros(block_dim, int))
    t, p, pv = problem.softmax_dtype.itemsize, p_type_bytes(problem), pv_type_bytes(problem)
    d = problem.head_dim_padded
    per_core = 2 * (2 * s_outer * s_inner * (t + p) + 2 * s_outer * d * pv)
    return PfaTilingData(
        batchSize=problem.batch, headNumSize=problem.num_heads, kvHeadNumSize=problem.num_kv_heads, headSize=d,
        seqSize=problem.s1, seqInnerSize=problem.s2, sOuterFactor=s_outer, sInnerFactor=s_inner,
        softmaxSOuterFactor=sm, scaleValue=problem.scale_value_fp32, sparseMode=problem.sparse_mode,
        blockDim=block_dim, softmaxTypeBytes=t, pTypeBytes=p, pvTypeBytes=pv,
        workspaceSize=SYSTEM_WORKSPACE_BYTES + block_dim * per_core,
        ubBytes=ub_bytes(problem, s_outer, s_inner, sm), l1Bytes=l1_bytes(problem, s_outer),
        coreItemStart=tuple(int(x) for x in starts), coreItemEnd=tuple(int(x) for x in ends),
        itemN=tuple(int(x) for x in items[:, 0]), itemB=tuple(int(x) for x in items[:, 1]),
        itemRow0=tuple(int(x) for x in items[:, 2]), itemRows=tuple(int(x) for x in items[:, 3]),
        itemTile0=tuple(int(x) for x in items[:, 4]), itemTile1=tuple(int(x) for x in items[:, 5]),
    )


def tiling_field_names() -> list[str]:
    return [f.name for f in fields(PfaTilingData)]
