"""Host tiling of PromptFlashAttentionV2 on npusim: base sizes, UB/L1 fitting, core split, workspace.

Follows the CANN tiling (research/tiling.md §1): base sizes from ``AdjustCVTilingCVDiff``, the UB
fitting loop of ``FindOptimalTilingBasicBLock`` (shrink sInner by 64, then sOuter by 16, then
softmaxSOuter by 8) applied to *this kernel's* UB buffers, and the greedy weighted core split of
``PromptFlashAttentionSplitNSNew``. Two core-split modes, as CANN chooses them (docs/pfa.md "Core split",
tiling.md §1): by default every vector core is a worker (coreNum = aivNum) on blocks of sOuter query rows,
the cube core serving its two vector cores' matmuls; only the S1 == S2 >= 3K modes (SPLIT_NBS_CUBE /
SPLIT_ONEN_CUBE of ``SetSplitCoreMode``) give the cube blocks of 2 x sOuter rows, each vector core taking
one half. Raises AclnnError 561002 when no tiling fits and 161002 for an illegal user override.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from npusim.errors import ACLNN_ERR_INNER_TILING_ERROR, ACLNN_ERR_PARAM_INVALID, AclnnError
from ops.common.acl_dtypes import BF16 as _BF16
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
SPLIT_VECTOR, SPLIT_CUBE = "vector", "cube"  # each AIV a worker on sOuter rows | AIC on 2 x sOuter rows
SEQ_3K, SEQ_8K, SEQ_16K = 3 * 1024, 8 * 1024, 16 * 1024  # SetSplitCoreMode thresholds (tiling.cpp:1013-1015)


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
    kvChunk: int  # keys per K/V copy to L1 (kv_chunk)
    scaleValue: float
    sparseMode: int
    blockDim: int
    softmaxTypeBytes: int
    pTypeBytes: int
    pvTypeBytes: int
    workspaceSize: int
    ubBytes: int
    l1Bytes: int
    splitCoreMode: str  # SPLIT_VECTOR | SPLIT_CUBE (docs/pfa.md "Core split")
    tailFirst: bool  # the partial query block of a batch comes first (the kernel's balance path)
    # per worker, in processing order, indices into the item table. SPLIT_VECTOR: one entry per vector
    # core (AI Core c, sub-block s at 2c + s); SPLIT_CUBE: one entry per AI Core (both vector cores).
    workerItems: tuple
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

    @property
    def blockRows(self) -> int:
        """Query rows of one work item: sOuter per vector core, or 2 x sOuter per cube core."""
        return self.sOuterFactor if self.splitCoreMode == SPLIT_VECTOR else 2 * self.sOuterFactor

    def core_items(self, core: int, sub: int) -> tuple:
        """Items vector core *sub* of AI Core *core* works on (the cube core serves both)."""
        if self.splitCoreMode == SPLIT_VECTOR:
            return self.workerItems[2 * core + sub]
        return self.workerItems[core]


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
        # block of D >= 200 would leave the fitting loop only tiny sInner; studies/pfa_tiling.py)
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
    if problem.dtype == np.int8:
        total += 2 * sm * s_inner * p  # quantised probabilities out (fp16/bf16 P is cast in place)
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


def l1_bytes(problem, s_outer: int, kv_chunk: int = CUBE_BASE) -> int:
    """L1 bytes the cube core allocates: Q blocks, K chunks, P and V chunks (all double-buffered); a K/V
    chunk holds *kv_chunk* keys (kernel.py InitCube)."""
    d = problem.head_dim_padded
    q = problem.dtype.itemsize
    rows = _ceil(2 * s_outer, 32)
    p_rows = rows if kv_chunk == CUBE_BASE else min(rows, CUBE_BASE)
    return 2 * (rows * d * q + kv_chunk * d * q + p_rows * kv_chunk * p_type_bytes(problem)
                + kv_chunk * CUBE_BASE * q)


def kv_chunk(problem, chip, s_outer: int) -> int:
    """Keys per K/V (and P) copy to L1 on split chips: two cube blocks (256) when the double-buffered
    chunks still fit L1, else one (128). One copy per 2 blocks halves the copies (and their flags, each
    of which waits for the copy's GM latency), as CANN's Matmul API sizes its L1 blocks to the buffer
    (docs/pfa.md "Cube side"). Mmad granularity, and so the numerics, stay at 128 x 128."""
    if chip.core_split and l1_bytes(problem, s_outer, 2 * CUBE_BASE) <= chip.l1_bytes:
        return 2 * CUBE_BASE
    return CUBE_BASE


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
    s_outer = adjust_basic_block(problem, chip, s_outer)
    sm = min(sm, s_outer)
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


def adjust_basic_block(problem, chip, s_outer: int) -> int:
    """``AdjustBasicBlock`` (tiling.cpp:2700-2718): when N divides coreNum (= aivNum), each head gets
    sCoreNum = coreNum / N > 1 workers and the query blocks fill them exactly once, sOuter is halved
    (rounded up to a 32-byte multiple of elements) so every worker gets two half blocks."""
    if not chip.core_split:
        return s_outer
    core_num, n = chip.aic_count * chip.aiv_per_aic, problem.num_heads
    s_core = core_num // n
    blocks = -(-int(np.max(problem.computed_seq_lengths, initial=0)) // s_outer)
    if core_num % n == 0 and s_core > 1 and blocks % s_core == 0 and blocks // s_core == 1:
        elems = BLOCK // problem.dtype.itemsize
        return -(-(s_outer // 2) // elems) * elems
    return s_outer


def _check_override(s_outer: int, s_inner: int, sm: int) -> None:
    for name, v, step in (("sOuter", s_outer, 16), ("sInner", s_inner, 64), ("softmaxSOuter", sm, 8)):
        if not isinstance(v, (int, np.integer)) or v <= 0 or v % step:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: {name} must be a positive multiple of {step}, got {v!r}")
    if sm > s_outer:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: softmaxSOuter {sm} must not exceed sOuter {s_outer}")
    if s_outer > 128 or s_inner > 2048:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, "tiling: sOuter <= 128 and sInner <= 2048 (repeat limits)")


def block_table(problem, block: int, s_inner: int, tail_first: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Every query block (n, b, row0, rows, tile0, tile1) in CANN order (n-major, then batch, then block),
    and whether it has a tile to compute.

    A block of *block* rows computes tiles j (columns [j sInner, (j+1) sInner) clipped to act_kv) that
    intersect its band [s2First, s2Last): s2First = clip(row0 - pre_lu, 0, act_kv), s2Last =
    clip(row0 + rows + next_lu, 0, act_kv) (docs/pfa.md). *tail_first*: the partial block comes first
    (``ComputeEachCoreBalance``: block 0 is the tail, x910.h:2484-2489).
    """
    per_batch = []
    for b in range(problem.batch):
        act_q = int(problem.computed_seq_lengths[b])
        act_kv = int(problem.actual_seq_lengths_kv[b])
        if act_q <= 0 or act_kv <= 0:
            per_batch.append(np.zeros((0, 5), np.int64))
            continue
        tail = act_q % block or block
        if tail_first:
            row0 = np.concatenate([[0], np.arange(tail, act_q, block, dtype=np.int64)])
            rows = np.where(row0 == 0, tail, block)
        else:
            row0 = np.arange(0, act_q, block, dtype=np.int64)
            rows = np.minimum(block, act_q - row0)
        pre, nxt = int(problem.pre_tokens_lu[b]), int(problem.next_tokens_lu[b])
        first = np.clip(row0 - pre, 0, act_kv)
        last = np.clip(row0 + rows + nxt, 0, act_kv)
        per_batch.append(np.stack([row0, rows, first // s_inner, -(-last // s_inner), last > first], axis=1))
    out = []
    for n in range(problem.num_heads):
        for b, tab in enumerate(per_batch):
            if len(tab):
                out.append(np.column_stack([np.full(len(tab), n), np.full(len(tab), b), tab]))
    if not out:
        return np.zeros((0, 6), np.int64), np.zeros(0, bool)
    table = np.concatenate(out)
    return table[:, :6], table[:, 6].astype(bool)


def item_table(problem, block: int, s_inner: int, tail_first: bool = False) -> np.ndarray:
    """The blocks of :func:`block_table` that compute at least one tile (the work items)."""
    blocks, keep = block_table(problem, block, s_inner, tail_first)
    return blocks[keep]


def split_cores(weights: np.ndarray, cores: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy contiguous partition: core c ends where the cumulative weight reaches total*(c+1)/cores
    (the combined-core 310P path)."""
    cum = np.cumsum(weights)
    total = cum[-1] if len(cum) else 0
    targets = total * np.arange(1, cores + 1) / cores
    ends = np.searchsorted(cum, targets - 1e-9, side="left") + 1
    ends = np.minimum(np.maximum.accumulate(ends), len(weights))
    ends[-1] = len(weights)
    starts = np.concatenate([[0], ends[:-1]])
    return starts, ends


def split_ns_new(problem, block: int, s_inner: int, cores: int) -> np.ndarray:
    """First block of each core of ``PromptFlashAttentionSplitNSNew`` (tiling.cpp:841-1001).

    Weight of block k of batch b: k + 1 when the batch's next tokens are 0 (causal), else its
    ceil(act_kv / sInner) tiles. Walking the blocks in order, core c is closed before a block of
    weight w when w - dif > dif, dif = int(target (c + 1)) - (weight so far), target = total / cores
    in fp32 (as CANN); at most one close per block. As the weight so far does not depend on the
    closes, each close is a search in the prefix sums. Returns the start block of every core formed
    (actualCoreNums = its length); a core can be empty."""
    weights = []
    for n in range(problem.num_heads):
        for b in range(problem.batch):
            act_q, act_kv = int(problem.computed_seq_lengths[b]), int(problem.actual_seq_lengths_kv[b])
            nb = -(-act_q // block) if act_q > 0 and act_kv > 0 else 0
            if int(problem.next_tokens_lu[b]) == 0:
                weights.append(np.arange(1, nb + 1, dtype=np.int64))
            else:
                weights.append(np.full(nb, -(-act_kv // s_inner), np.int64))
    w = np.concatenate(weights) if weights else np.zeros(0, np.int64)
    cum = np.concatenate([[0], np.cumsum(w)])
    target = np.float32(cum[-1]) / np.float32(cores)
    key = cum[:-1] + cum[1:]  # w_g - dif > dif  <=>  cum_g + cum_{g+1} > 2 int(target (c + 1))
    starts, lo = [0], 0
    for c in range(cores - 1):
        goal = 2 * int(np.float32(target * np.float32(c + 1)))
        g = int(np.searchsorted(key[lo:], goal, side="right")) + lo
        if g >= len(w):
            break
        starts.append(g)
        lo = g + 1
    return np.asarray(starts, np.int64)


def split_core_mode(problem, chip, s_outer: int) -> str:
    """SPLIT_CUBE in the S1 == S2 modes of ``SetSplitCoreMode`` (tiling.cpp:1003-1045), else SPLIT_VECTOR.

    baseCond: D == 128, fp16 or bf16 in and out, no pse, no actual sequence lengths given, S1 == S2
    (npusim has no prefix, padding or lse inputs). SPLIT_ONEN_CUBE: S >= 16K, B*N >= 12; SPLIT_NBS_CUBE:
    S >= 3K, B*N*ceil(S / 2 sOuter) >= coreNum and "no balance" (G != 1, B != 1, an output to
    initialise, or S >= 8K without mask). With a mask both need the full or the causal band. Combined
    cores (310P) keep the cube view of their own kernel (kernel_combined.py)."""
    if not chip.core_split:
        return SPLIT_CUBE
    s, b, n = problem.s1, problem.batch, problem.num_heads
    fp = problem.dtype in (np.float16, _BF16) and problem.out_dtype == problem.dtype
    base = (problem.head_dim_padded == 128 and fp and problem.pse_shape is None and s == problem.s2
            and not problem.actual_seq_lengths_given and not problem.actual_seq_lengths_kv_given)
    if not base:
        return SPLIT_VECTOR
    pre, nxt = int(problem.pre_tokens_lu[0]), int(problem.next_tokens_lu[0])
    masked = problem.mask_kind != MaskKind.NONE
    one_n_tokens = not masked or (pre >= s and nxt >= problem.s2) or nxt == 0
    nbs_tokens = not masked or (pre >= s and (nxt >= problem.s2 or nxt == 0))
    core_num = chip.aic_count * chip.aiv_per_aic
    no_balance = problem.group != 1 or b != 1 or problem.need_init or (s >= SEQ_8K and not masked)
    if one_n_tokens and s >= SEQ_16K and b * n >= 12:
        return SPLIT_CUBE
    if nbs_tokens and s >= SEQ_3K and b * n * -(-s // (2 * s_outer)) >= core_num and no_balance:
        return SPLIT_CUBE
    return SPLIT_VECTOR


def balance_path(problem) -> bool:
    """``ComputeEachCoreBalance`` runs instead of the tiling's split: B == 1, G == 1, nothing to
    initialise (x910.h:893-902)."""
    return problem.batch == 1 and problem.group == 1 and not problem.need_init


def vector_workers(problem, block: int, s_inner: int, aic: int, keep: np.ndarray, item_of: np.ndarray) -> tuple:
    """Items (indices into the item table) of each vector core 2c + s, as the kernel walks them.

    Worker ids: the NSNew split over coreNum = 2 * aic workers; when it forms at most aic + 1 cores,
    the kernel's "skip core" remap spreads them one per AI Core first (worker c on sub-block 0 of
    AI Core c, worker aic + c on sub-block 1; x910_base.h:1698-1706). The balance path then ignores
    the split: worker w (odd w mirrored to 2 aic - w) takes blocks w, then (2 aic - w % (2 aic)) * 2 - 1
    further on, counted from the last block of the sequence (x910.h:2420-2470)."""
    workers = 2 * aic
    starts = split_ns_new(problem, block, s_inner, workers)
    remap = len(starts) <= workers // 2 + 1
    total = len(keep)
    out = []
    for v in range(workers):
        core, sub = divmod(v, 2)
        w = (core + sub * aic) if remap else v
        if balance_path(problem):
            n_heads, nb = problem.num_heads, total // max(problem.num_heads, 1)
            idx = w if w % 2 == 0 else workers - w
            blocks = []
            while idx < total:
                n, k = idx % n_heads, nb - 1 - idx // n_heads
                blocks.append(n * nb + k)
                idx += (workers - idx % workers) * 2 - 1
        else:
            blocks = range(starts[w], starts[w + 1] if w + 1 < len(starts) else total) if w < len(starts) else ()
        out.append(tuple(int(item_of[g]) for g in blocks if keep[g]))
    return tuple(out)


def pfa_tiling(problem, chip, overrides: dict | None = None) -> PfaTilingData:
    """The full tiling of one validated call on *chip*."""
    overrides = dict(overrides or {})
    unknown = set(overrides) - set(OVERRIDABLE)
    if unknown:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: unknown override(s) {sorted(unknown)}; "
                                                  f"allowed: {', '.join(OVERRIDABLE)}")
    s_outer, s_inner, sm = fit_base_sizes(problem, chip, {k: v for k, v in overrides.items() if k != "blockDim"})
    mode = split_core_mode(problem, chip, s_outer)
    max_cores = chip.aic_count
    if "blockDim" in overrides:
        bd = overrides["blockDim"]
        if not isinstance(bd, (int, np.integer)) or isinstance(bd, bool) or not 1 <= bd <= max_cores:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: blockDim must be in [1, {max_cores}], got {bd!r}")
        max_cores = int(bd)
    block = s_outer if mode == SPLIT_VECTOR else 2 * s_outer
    tail_first = mode == SPLIT_VECTOR and balance_path(problem)
    blocks, keep = block_table(problem, block, s_inner, tail_first)
    items = blocks[keep]
    item_of = np.cumsum(keep) - 1
    if mode == SPLIT_VECTOR:
        workers = vector_workers(problem, block, s_inner, max_cores, keep, item_of)
        used = [c for c in range(max_cores) if workers[2 * c] or workers[2 * c + 1]]
        block_dim = used[-1] + 1 if used else 1
        workers = workers[:2 * block_dim]
    elif chip.core_split:
        starts = split_ns_new(problem, block, s_inner, max_cores)
        bounds = list(starts) + [len(keep)]
        workers = tuple(tuple(int(item_of[g]) for g in range(bounds[c], bounds[c + 1]) if keep[g])
                        for c in range(len(starts)))
        used = [c for c, w in enumerate(workers) if w]
        block_dim = used[-1] + 1 if used else 1
        workers = (workers + ((),) * block_dim)[:block_dim]
    else:
        weights = items[:, 5] - items[:, 4] if len(items) else np.zeros(0, np.int64)
        block_dim = int(overrides.get("blockDim", min(max_cores, max(len(items), 1))))
        starts, ends = split_cores(weights, block_dim) if len(items) else (np.zeros(block_dim, int),
                                                                              np.zeros(block_dim, int))
        workers = tuple(tuple(range(int(s), int(e))) for s, e in zip(starts, ends))
    t, p, pv = problem.softmax_dtype.itemsize, p_type_bytes(problem), pv_type_bytes(problem)
    d = problem.head_dim_padded
    per_core = 2 * (2 * s_outer * s_inner * (t + p) + 2 * s_outer * d * pv)
    return PfaTilingData(
        batchSize=problem.batch, headNumSize=problem.num_heads, kvHeadNumSize=problem.num_kv_heads, headSize=d,
        seqSize=problem.s1, seqInnerSize=problem.s2, sOuterFactor=s_outer, sInnerFactor=s_inner,
        softmaxSOuterFactor=sm, kvChunk=kv_chunk(problem, chip, s_outer), scaleValue=problem.scale_value_fp32,
        sparseMode=problem.sparse_mode, blockDim=block_dim, softmaxTypeBytes=t, pTypeBytes=p, pvTypeBytes=pv,
        workspaceSize=SYSTEM_WORKSPACE_BYTES + block_dim * per_core,
        ubBytes=ub_bytes(problem, s_outer, s_inner, sm),
        l1Bytes=l1_bytes(problem, s_outer, kv_chunk(problem, chip, s_outer)), splitCoreMode=mode, tailFirst=tail_first, workerItems=workers,
        itemN=tuple(int(x) for x in items[:, 0]), itemB=tuple(int(x) for x in items[:, 1]),
        itemRow0=tuple(int(x) for x in items[:, 2]), itemRows=tuple(int(x) for x in items[:, 3]),
        itemTile0=tuple(int(x) for x in items[:, 4]), itemTile1=tuple(int(x) for x in items[:, 5]),
    )


def tiling_field_names() -> list[str]:
    return [f.name for f in fields(PfaTilingData)]
