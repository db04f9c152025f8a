"""Host tiling of SparseFlashAttentionGrad (research/tiling.md §4, docs/sfag.md "Tiling").

Why these numbers: the real ``sparse_flash_attention_grad_tiling_bs1_basic.cpp`` takes all G heads of
one query token as the cube's M (singleM = G), 512 gathered key/value rows as one chunk (singleN =
512), splits tokens round-robin over the AI Cores (core c: tokens c, c + used, ...), and gives the
softmax-grad vector tile 16 rows x 512 (sftBaseM = 8192 / 512). The simulated cube works a chunk in
pieces of 64 gathered rows (PIECE_ROWS) so [Q | Q_rope], dO and a double-buffered piece fit the 512 KiB
L1; the gather stages 32 rows at a time through UB (GATHER_ROWS).

Workspace: the real formula's 32 MiB reserve (reported, not allocated), then per used core the
gathered K/V chunks, the S and dP chunks (fp32) and the P and dS chunks (input dtype), each double
buffered by chunk parity, then the fp32 accumulators dq [T1 * N1, D + Dr], dk [T2, D + Dr] and
dv [T2, D]; every region 512-byte aligned.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ops.common.errors import invalid

SYSTEM_WORKSPACE_BYTES = 32 * 1024 * 1024  # tiling.md §4 GetWorkspaceSize: 32MB + ...
CHUNK_ROWS = 512  # singleN: gathered rows per chunk (tiling.md §4)
PIECE_ROWS = 64  # cube piece of a chunk (L1 budget, module docstring)
SLICE_ROWS = 16  # sftBaseM = 8192 / 512 (tiling.md §4 DoSftTiling)
GATHER_ROWS = 32  # rows staged in UB per gather step
K_CHUNK = 128  # cube k chunk (L0A/L0B 32 KiB buffers hold 128 x 128 b16)
N_CHUNK = 128  # cube n chunk (L0C 64 KiB buffer holds 128 x 128 fp32)
POST_ROWS = 16  # rows per post step (16 x 576 fp32 = 36 KiB in UB)
OVERRIDABLE = ("blockDim",)


def _a512(x: int) -> int:
    return -(-x // 512) * 512


@dataclass(frozen=True)
class SfagTilingData:
    """The tiling the kernel reads (CANN-like field names)."""

    bSize: int
    t1Size: int
    t2Size: int
    gSize: int
    dSize: int
    dRope: int
    dTotal: int
    selectedBlockCount: int
    sparseBlockSize: int
    chunkRows: int
    chunkSlots: int
    sparseMode: int
    scaleValue: float
    deterministic: bool
    blockDim: int
    coreWorkspaceBytes: int
    selKOffset: int
    selVOffset: int
    sOffset: int
    dpOffset: int
    pOffset: int
    dsOffset: int
    dqOffset: int
    dkOffset: int
    dvOffset: int
    workspaceSize: int
    chunks: int  # total chunks of the call
    roundCount: int  # most chunks of one core: the rounds of the deterministic variant
    prePost: bool = True  # zero-fill and post steps (estimate mode times them apart from the main loop)
    mainLoop: bool = True  # the token loop

    def asdict(self) -> dict:
        return asdict(self)


def slot_counts(indices: np.ndarray) -> np.ndarray:
    """Slots examined per token [T1]: those before the first -1 (all K when there is none)."""
    if indices.shape[0] == 0:
        return np.zeros(0, np.int64)
    end = indices == -1
    first = np.argmax(end, axis=1)
    return np.where(end.any(axis=1), first, indices.shape[1]).astype(np.int64)


def sfag_tiling(problem, chip, overrides=None, counts=None) -> SfagTilingData:
    """Plan one call on *chip*; *overrides* may set ``blockDim`` (1 .. AI Cores). Raises AclnnError(161002)
    for an unknown or illegal override."""
    overrides = dict(overrides or {})
    for key in overrides:
        if key not in OVERRIDABLE:
            raise invalid("tiling", f"unknown override {key!r}; allowed: {', '.join(OVERRIDABLE)}")
    if counts is None:
        counts = slot_counts(problem.indices)
    bs = problem.block_size
    chunk_slots = CHUNK_ROWS // bs
    per_token = -(-counts // chunk_slots)
    chunks = int(per_token.sum())
    used = max(min(problem.T1, chip.aic_count), 1)
    if "blockDim" in overrides:
        bd = overrides["blockDim"]
        if not isinstance(bd, (int, np.integer)) or isinstance(bd, bool) or not 1 <= bd <= chip.aic_count:
            raise invalid("tiling", f"blockDim must be an int in [1, {chip.aic_count}], got {bd!r}")
        used = min(int(bd), max(problem.T1, 1))
    padded = np.zeros(-(-max(problem.T1, 1) // used) * used, np.int64)
    padded[:problem.T1] = per_token
    rounds = int(padded.reshape(-1, used).sum(axis=0).max()) if problem.T1 else 0
    isz = problem.dtype.itemsize
    g, d, dt = problem.G, problem.D, problem.Dt
    off = 0
    regions = {}
    for name, nbytes in (("selK", 2 * CHUNK_ROWS * dt * isz), ("selV", 2 * CHUNK_ROWS * d * isz),
                         ("s", 2 * g * CHUNK_ROWS * 4), ("dp", 2 * g * CHUNK_ROWS * 4),
                         ("p", 2 * g * CHUNK_ROWS * isz), ("ds", 2 * g * CHUNK_ROWS * isz)):
        regions[name] = off
        off += _a512(nbytes)
    per_core = off
    dq_off = per_core * used
    dk_off = dq_off + _a512(problem.T1 * g * dt * 4)
    dv_off = dk_off + _a512(problem.T2 * dt * 4)
    end = dv_off + _a512(problem.T2 * d * 4)
    return SfagTilingData(
        bSize=problem.B, t1Size=problem.T1, t2Size=problem.T2, gSize=g, dSize=d, dRope=problem.Dr, dTotal=dt,
        selectedBlockCount=problem.K, sparseBlockSize=bs, chunkRows=CHUNK_ROWS, chunkSlots=chunk_slots,
        sparseMode=problem.sparse_mode, scaleValue=problem.scale, deterministic=problem.deterministic,
        blockDim=used, coreWorkspaceBytes=per_core, selKOffset=regions["selK"], selVOffset=regions["selV"],
        sOffset=regions["s"], dpOffset=regions["dp"], pOffset=regions["p"], dsOffset=regions["ds"],
        dqOffset=dq_off, dkOffset=dk_off, dvOffset=dv_off, workspaceSize=SYSTEM_WORKSPACE_BYTES + end,
        chunks=chunks, roundCount=rounds)
