"""Host tiling of FlashAttentionVarLenScore on npusim: template, base sizes, s2 ranges, load balance,
workspace.

Follows the CANN varlen tiling (research/tiling.md §0, §2; ``FlashAttentionVarLenScoreTiling`` in
``flash_attention_score_tiling_general.cpp``), as docs/fa_varlen.md "Tiling" states it: the template
(SameAB, cube-master, or vector-master: ``IsCapable``), work items (b, n, s1 block) b-major, the s2
range of each item after sparsity (skipped blocks), the quantised load per item, the greedy +
BalanceLoad split over the template's workers (AI Cores for SameAB, vector cores for vector-master),
the UB/L1 fit and the workspace size. Raises AclnnError 561002 when nothing fits and 161002 for an
illegal override.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from npusim.errors import ACLNN_ERR_INNER_TILING_ERROR, ACLNN_ERR_PARAM_INVALID, AclnnError

SYSTEM_WORKSPACE_BYTES = 16 * 1024 * 1024  # WORK_SPACE_RESERVE_SIZE 16 MiB (tiling.md §2 GetWorkspaceSize)
S1_BASE_MAX = 256  # SameAB cubeS1BaseSize (tiling.md §2 CalcS1S2BasicBlock)
S1_BASE_VM = 128  # vector-master s1BasicBlockBest (tiling.md §2 CalcS1S2BasicBlock)
SAME_AB, VECTOR_MASTER = "SameAB", "VectorMaster"  # the two templates (tiling.md §2 "Template choice")
TEMPLATE_IDS = {1: SAME_AB, 2: VECTOR_MASTER}  # the ``template`` tiling override (overrides are ints)
#: SameAB admission (FlashAttentionVarLenScoreTiling::IsCapable, hicann/ops-transformer @ c29bc10
#: attention/flash_attention_score/op_host/flash_attention_score_tiling_general.cpp:3800-3817): B >= 4 with
#: sum S1, sum S2 >= 8192 (SAMEAB_TND_BASIC_SIZE) and max S1, S2 >= 512, or max S1, S2 > 5120
SAMEAB_MIN_B, SAMEAB_SUM, SAMEAB_MIN_S, SAMEAB_LONG_S = 4, 8192, 512, 5120
S2_BASE_MAX = 128  # s2BaseSize = min(128, alignedS2) (tiling.md §2)
N_RATIO = 8  # GetNRatio (tiling.md §2); 4 in the L2 <= 96 MiB, D = 128, T1 >= 48000 case
VEC1_ELEMS = 8192  # vector base block 8 x 1024 fp32 = 32 KiB (tiling.md "Generic design")
HIGH_PERF_BLOCK_SIZE = 128  # token alignment of the mode-0 band (CANN HIGH_PERF_BLOCK_SIZE)
S2_LOAD_UNIT = 1024  # s2sizeLimitMax of InitSparseValidArray
COF = (256, 384, 512, 640, 768, 896, 960, 1024)  # load of a partial 1024-chunk (CANN COF table)
CUBE_M = 128  # rows per Mmad / Fixpipe (cube base block 128 x 128, tiling.md "Generic design")
L0C_BUFFER_BYTES = 64 * 1024  # half of the 128 KiB L0C, double-buffered (128 x 128 fp32)
BYTE_MASK_ALIGN = 512  # the drop-mask adapter's output rounded to 512 bytes (CeilDiv(total, 512) * 512)
STAT_ROWS_BLOCK = 32  # one 8 x fp32 block per row for max / sum / alpha ([rows, 8] as SoftmaxFlashV2)
CMP_CHUNK = 2048  # fp16 elements per mask Cast + Compare step
OVERRIDABLE = ("s1BaseSize", "vec1Elems", "blockDim", "template")

SPARSE_ALL, SPARSE_CAUSAL, SPARSE_BAND = "ALL", "CAUSAL", "BAND"
SPARSE_RD, SPARSE_BAND_COMPRESS, SPARSE_PREFIX = "RIGHT_DOWN_CAUSAL", "BAND_COMPRESS", "PREFIX"
SPARSE_RD_BAND, SPARSE_BAND_LU = "RIGHT_DOWN_CAUSAL_BAND", "BAND_LEFT_UP_CAUSAL"


def _align(x: int, a: int) -> int:
    return -(-x // a) * a


def _align_up_c(x: int, a: int) -> int:
    """C ``(x + a - 1) / a * a`` with truncating division (the tiling's AlignUp on signed tokens)."""
    q = x + a - 1
    return (q // a if q >= 0 else -((-q) // a)) * a


@dataclass(frozen=True)
class FaVarLenTilingData:
    """The tiling the kernel reads (CANN field names where one exists); items in CANN order."""

    template: str  # SAME_AB (AIC drives, each AIV half the rows) or VECTOR_MASTER (each AIV a worker)
    bSize: int
    n1Size: int
    n2Size: int
    gSize: int
    dSize: int
    dSizeAlign16: int
    t1Size: int
    t2Size: int
    s1BaseSize: int
    s2BaseSize: int
    nRatio: int
    s2BaseNratioSize: int
    vec1Elems: int
    nChunk: int
    kChunk: int
    qBufNum: int
    sparseType: str
    scaleValue: float
    keepProb: float
    keepProbRecip: float
    dropMaskBitMode: bool
    blockDim: int
    totalSize: int
    sparseStartIdx: tuple
    workspaceSize: int
    coreWorkspaceBytes: int
    dropBytesOffset: int
    vTransOffset: int
    vTransPitch: int
    ubBytes: int
    l1Bytes: int
    itemB: tuple
    itemN: tuple
    itemS1o: tuple
    itemRows: tuple
    itemS2Start: tuple
    itemS2End: tuple
    itemLoad: tuple

    def asdict(self) -> dict:
        return asdict(self)

    @property
    def items(self) -> int:
        return len(self.itemB)

    def tiles(self, item: int) -> int:
        """Tiles of *item*: ceil((s2End - s2Start) / W)."""
        return -(-(self.itemS2End[item] - self.itemS2Start[item]) // self.s2BaseNratioSize)

    @property
    def tasks(self) -> int:
        return sum(self.tiles(i) for i in range(self.items))

    @property
    def workers(self) -> int:
        """Split units: AI Cores (SameAB) or vector cores, two per AI Core (vector-master);
        ``sparseStartIdx`` has one start per worker plus the end."""
        return len(self.sparseStartIdx) - 1


# --- sparse types and ranges ----------------------------------------------------------------------
def sparse_type(problem) -> tuple[str, int, int]:
    """(sparse type, s1SparseValidSize, s2SparseValidSize) of a validated call (docs/fa_varlen.md)."""
    if problem.mask_form == "none":
        return SPARSE_ALL, 0, 0
    mode, pre, nxt = problem.sparse_mode, problem.pre_tokens, problem.next_tokens
    if mode == 0:
        if pre >= problem.max_sq and nxt == 0:
            return SPARSE_CAUSAL, 0, 0
        if pre >= problem.max_sq and nxt >= problem.max_skv:
            return SPARSE_ALL, 0, 0
        pre_c = int(np.clip(pre, -(2 ** 40), 2 ** 40))
        nxt_c = int(np.clip(nxt, -(2 ** 40), 2 ** 40))
        s1v = min(_align_up_c(pre_c, HIGH_PERF_BLOCK_SIZE), problem.max_sq if pre_c >= 0 else 0)
        s2v = min(_align_up_c(nxt_c, HIGH_PERF_BLOCK_SIZE), problem.max_skv)
        return SPARSE_BAND, s1v, s2v
    return {1: SPARSE_ALL, 2: SPARSE_CAUSAL, 3: SPARSE_RD, 4: SPARSE_BAND_COMPRESS, 6: SPARSE_PREFIX,
            7: SPARSE_RD_BAND, 8: SPARSE_BAND_LU}[mode], 0, 0


def _tokens(problem) -> tuple[int, int]:
    """pre/next tokens clipped to +-2^40 (int64-safe; the clip never changes a range)."""
    return (int(np.clip(problem.pre_tokens, -(2 ** 40), 2 ** 40)),
            int(np.clip(problem.next_tokens, -(2 ** 40), 2 ** 40)))


def _raw_ranges(kind: str, problem, b, s1o, s1b: int, s1v: int, s2v: int):
    """Unaligned [start, end) per block (arrays b, s1o) and whether an empty range falls back to [0, S2)."""
    s1, s2 = problem.seq_q.astype(np.int64)[b], problem.seq_kv.astype(np.int64)[b]
    pre, nxt = _tokens(problem)
    x0, x1 = s1o * s1b, (s1o + 1) * s1b
    zero = np.zeros_like(x0)
    if kind == SPARSE_CAUSAL:
        return zero, np.minimum(x1, s2), False
    if kind == SPARSE_RD:
        return zero, np.minimum(x1 + s2 - s1, s2), False
    if kind == SPARSE_BAND:
        return np.maximum(x0 - s1v, 0), np.minimum(x1 + s2v, s2), True
    if kind == SPARSE_BAND_COMPRESS:
        return (np.maximum(x0 - s1 + np.maximum(s2 - pre, 0), 0),
                np.minimum(x1 + s2 - np.maximum(s1 - nxt, 0), s2), True)
    band = b == problem.band_index
    if kind == SPARSE_RD_BAND:
        return zero, np.minimum(x1 + s2 + np.where(band, nxt, 0) - s1, s2), False
    if kind == SPARSE_BAND_LU:
        return zero, np.where(band, np.minimum(x1 + s2 - np.maximum(s1 - nxt, 0), s2), np.minimum(x1, s2)), False
    if kind == SPARSE_PREFIX:
        prefix = np.asarray(problem.prefix_n, np.int64)[b]
        return zero, np.minimum(np.maximum(x1 - s1 + s2, prefix), s2), True
    return zero, s2, False


def block_table(problem, s1b: int) -> tuple[str, dict]:
    """(sparse type, per s1 block of every batch with Sq > 0, b-major: arrays b, s1o, rows, start, end,
    load): the 8-aligned computed columns [s2Start, s2End) (GetS2LoopRange) and the quantised load
    (GetS2RealSize + InitSparseValidArray) of docs/fa_varlen.md, vectorised over blocks."""
    kind, s1v, s2v = sparse_type(problem)
    sq, skv = problem.seq_q.astype(np.int64), problem.seq_kv.astype(np.int64)
    nb = -(-sq // s1b)
    b = np.repeat(np.arange(problem.B, dtype=np.int64), nb)
    s1o = np.arange(len(b), dtype=np.int64) - np.repeat(np.cumsum(nb) - nb, nb)
    s1, s2 = sq[b], skv[b]
    start, end, fallback = _raw_ranges(kind, problem, b, s1o, s1b, s1v, s2v)
    start, end = np.broadcast_to(start, b.shape), np.broadcast_to(end, b.shape)
    if kind == SPARSE_CAUSAL:
        s = s1b * (s1o + 1)
    elif kind == SPARSE_PREFIX:
        s = np.maximum(s1b * (s1o + 1) - s1 + s2, np.asarray(problem.prefix_n, np.int64)[b])
    elif kind == SPARSE_BAND_COMPRESS:
        s = np.where(end - start > 0, end - start, s2)
    else:
        s = np.full_like(b, problem.max_skv)
    s = np.minimum(s, s2)
    rem = s % S2_LOAD_UNIT
    cof = np.asarray(COF, np.int64)[np.maximum(-(-rem // 128) - 1, 0)]
    load = s // S2_LOAD_UNIT * S2_LOAD_UNIT + np.where(rem > 0, cof, 0)
    if fallback:
        empty = end - start <= 0
        start, end = np.where(empty, 0, start), np.where(empty, s2, end)
    start = start // 8 * 8
    end = np.minimum(-(-end // 8) * 8, s2)
    return kind, dict(b=b, s1o=s1o, rows=np.minimum(s1b, s1 - s1o * s1b), start=start, end=end, load=load)


def item_blocks(problem, blocks: dict) -> tuple[np.ndarray, np.ndarray]:
    """(block index, head n) of every work item, in CANN order: b-major, then n, then s1o (each batch's
    blocks repeated for its N1 heads)."""
    per_b = np.bincount(blocks["b"], minlength=problem.B).astype(np.int64)
    first = np.cumsum(per_b) - per_b
    counts = per_b * problem.N1
    k = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    nb = np.repeat(per_b, counts)
    return np.repeat(first, counts) + k % np.maximum(nb, 1), k // np.maximum(nb, 1)


def item_table(problem, s1b: int) -> tuple[str, np.ndarray]:
    """(sparse type, int64 [items, 7]: b, n, s1o, rows, s2Start, s2End, load) in CANN order."""
    kind, blk = block_table(problem, s1b)
    idx, n = item_blocks(problem, blk)
    cols = [blk["b"][idx], n] + [blk[k][idx] for k in ("s1o", "rows", "start", "end", "load")]
    return kind, np.stack(cols, axis=1).reshape(-1, 7)


# --- core split -------------------------------------------------------------------------------------
def _balance(load, local: list, starts: list, total: int) -> bool:
    """One BalanceLoad round (forward, then backward); True while the max load decreases."""
    cores = len(starts)
    max_val = max(local)
    for c in range(1, cores):
        s = starts[c]
        if 0 < s < total and local[c - 1] + int(load[s]) < max_val:
            local[c - 1] += int(load[s])
            local[c] -= int(load[s])
            starts[c] += 1
        elif s == total:
            break
    tmp_max = max(local)
    for c in range(cores - 1, 0, -1):
        s = starts[c]
        if s == total:
            if starts[c - 1] == total:
                continue
            local[c - 1] -= int(load[s - 1])
            local[c] = int(load[s - 1])
            starts[c] -= 1
        elif s > 0:
            if local[c] + int(load[s - 1]) >= tmp_max:
                continue
            local[c - 1] -= int(load[s - 1])
            local[c] += int(load[s - 1])
            starts[c] -= 1
        else:
            break
    return max(local) < max_val


def split_cores(load, cores: int) -> list:
    """sparseStartIdx (length *cores*) of SetSparseStartIdx: equal split vs greedy + BalanceLoad.

    The greedy walk ("add items until the running load reaches avg") is a search in the prefix sums,
    so the split costs O(cores * log items) plus the BalanceLoad rounds, for any item count."""
    load = np.asarray(load, dtype=np.int64).reshape(-1)
    total = len(load)
    cum = np.concatenate(([0], np.cumsum(load)))

    def loads(starts: list) -> list:
        ends = starts[1:] + [total]
        return [int(cum[e] - cum[s]) if s < total else 0 for s, e in zip(starts, ends)]

    factor = -(-total // cores)
    equal = [min(c * factor, total) for c in range(cores)]
    greedy = [0] + [total] * (cores - 1)
    remaining = int(cum[-1])
    avg = -(-remaining // cores)
    for c in range(1, cores):
        start = greedy[c - 1]
        end, single = start, 0
        if avg > 0 and start < total:
            end = min(int(np.searchsorted(cum, cum[start] + avg, side="left")), total)
            single = int(cum[end] - cum[start])
        greedy[c] = end
        if start + 1 < end:
            redo = single - int(load[end - 1])
            if single - avg > avg - redo:
                greedy[c] -= 1
                single = redo
            remaining -= single
            avg = -(-remaining // (cores - c))
    greedy_load = loads(greedy)
    while _balance(load, greedy_load, greedy, total):
        pass
    return greedy if max(loads(equal)) > max(greedy_load) else equal


# --- template -------------------------------------------------------------------------------------
def template(problem, overrides: dict | None = None) -> str:
    """CANN's template choice (``IsCapable``, SAMEAB_* above): SameAB for many or long sequences, never
    for fp32 input, one head (N1 == N2 == 1: its source comment says those cases measured slower) or
    the invalid-line precision mode (inner_precise 2); else vector-master. A ``template`` override
    (TEMPLATE_IDS: 1 SameAB, 2 vector-master) forces one (what-if)."""
    forced = (overrides or {}).get("template")
    if forced is not None:
        if forced not in TEMPLATE_IDS:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: template must be 1 ({SAME_AB}) or "
                                                      f"2 ({VECTOR_MASTER}), got {forced!r}")
        return TEMPLATE_IDS[forced]
    sq, skv = problem.seq_q.astype(np.int64), problem.seq_kv.astype(np.int64)
    same_ab = ((problem.B >= SAMEAB_MIN_B and sq.sum() >= SAMEAB_SUM and skv.sum() >= SAMEAB_SUM and
                problem.max_sq >= SAMEAB_MIN_S and problem.max_skv >= SAMEAB_MIN_S) or
               (problem.max_sq > SAMEAB_LONG_S and problem.max_skv > SAMEAB_LONG_S))
    if problem.dtype.itemsize == 4 or (problem.N1 == 1 and problem.N2 == 1) or problem.inner_precise == 2:
        same_ab = False
    return SAME_AB if same_ab else VECTOR_MASTER


# --- memory budgets -------------------------------------------------------------------------------
def vector_rows(s1b: int, templ: str) -> int:
    """Rows of a block one vector core works on: half (SameAB) or all (vector-master)."""
    return -(-s1b // 2) if templ == SAME_AB else s1b


def ub_bytes(problem, s1b: int, e: int, templ: str = SAME_AB) -> int:
    """UB bytes one vector core allocates in the main loop (kernel.py InitVector, docs/fa_varlen.md)."""
    isz = problem.dtype.itemsize
    h8 = _align(vector_rows(s1b, templ), 8)  # rows of one vector core, padded to a Brcb repeat
    total = 2 * e * 4 + e * 4 + e // 8  # score slices (ping/pong), common scratch, bit mask
    if isz != 4:
        total += 2 * e * isz  # P / output in the input dtype, ping/pong
    if problem.mask_form != "none" or problem.dropout:
        total += CMP_CHUNK * 2  # fp16 zeros for Compare
    if problem.mask_form != "none":
        total += e * (2 if problem.mask_form == "prefix_3072" else 1)
    if problem.pse_form != "none":
        total += e * isz
    if problem.dropout:
        total += e
    blocks = 7 + (2 if problem.invalid_row_calc else 0)  # m, l x2, alpha x2, two temps (+ NEG, 1.0 rows)
    return total + blocks * h8 * STAT_ROWS_BLOCK + _align(h8 * 4, 32)


def l1_bytes(problem, s1b: int, q_buf: int, n_chunk: int, k_chunk: int) -> int:
    """L1 bytes of the cube core: Q block(s), K chunks, P chunks (all block rows), V chunks (docs/fa_varlen.md)."""
    isz, dp = problem.dtype.itemsize, _align(problem.D, 16)
    return q_buf * s1b * dp * isz + 2 * n_chunk * dp * isz + 2 * s1b * k_chunk * isz + 2 * CUBE_M * k_chunk * isz


def _fit(problem, chip, overrides: dict, templ: str) -> tuple[int, int, int, int, int]:
    """(s1BaseSize, vec1Elems, nChunk, kChunk, qBufNum) fitting L1 and UB. Vector-master keeps one Q
    block per vector core in L1 (qBufNum 2) and halves s1BaseSize when UB cannot hold its rows."""
    isz = problem.dtype.itemsize
    k_chunk = 128 if isz == 2 else 64  # 32 KiB L0A/L0B buffer of 128 rows
    base = S1_BASE_MAX if templ == SAME_AB else S1_BASE_VM
    s1b = overrides.get("s1BaseSize", min(base, _align(problem.max_sq, 16)))
    e = overrides.get("vec1Elems", VEC1_ELEMS)
    for name, v, lo, hi, step in (("s1BaseSize", s1b, 16, S1_BASE_MAX, 16), ("vec1Elems", e, 1024, VEC1_ELEMS, 1024)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not lo <= v <= hi or v % step:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: {name} must be a multiple of {step} in "
                                                      f"[{lo}, {hi}], got {v!r}")
    q_buf, n_chunk = 2, 128
    while l1_bytes(problem, s1b, q_buf, n_chunk, k_chunk) > chip.l1_bytes:
        if q_buf == 2 and templ == SAME_AB:
            q_buf = 1
        elif n_chunk > 32:
            n_chunk //= 2
        elif s1b > 16 and "s1BaseSize" not in overrides:
            s1b = max(16, s1b // 2 // 16 * 16)
        else:
            raise AclnnError(ACLNN_ERR_INNER_TILING_ERROR, f"tiling: no L1 tiling for D={problem.D}, "
                                                           f"s1BaseSize={s1b} in {chip.l1_bytes} B")
    while ub_bytes(problem, s1b, e, templ) > chip.ub_bytes:
        if e > 4096 and "vec1Elems" not in overrides:
            e //= 2
        elif templ == VECTOR_MASTER and s1b > 16 and "s1BaseSize" not in overrides:
            s1b = max(16, s1b // 2 // 16 * 16)
        else:
            raise AclnnError(ACLNN_ERR_INNER_TILING_ERROR, f"tiling: the vector buffers need "
                                                           f"{ub_bytes(problem, s1b, e, templ)} B of UB "
                                                           f"({chip.ub_bytes})")
    return s1b, e, n_chunk, k_chunk, q_buf


def drop_bit_mode(problem) -> bool:
    """Bits used directly iff every row's bits start on a byte: Skv % 8 == 0 wherever Sq > 0."""
    skv = problem.seq_kv[problem.seq_q > 0]
    return bool((skv % 8 == 0).all())


def base_sizes(problem, chip, overrides: dict | None) -> dict:
    """The tiling's size fields (base sizes, chunks, vec1Elems) after the override checks and the
    L1/UB fit; raises AclnnError 161002 for an unknown or illegal override, 561002 if nothing fits."""
    overrides = dict(overrides or {})
    unknown = set(overrides) - set(OVERRIDABLE)
    if unknown:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: unknown override(s) {sorted(unknown)}; "
                                                  f"allowed: {', '.join(OVERRIDABLE)}")
    templ = template(problem, overrides)
    s1b, e, n_chunk, k_chunk, q_buf = _fit(problem, chip, overrides, templ)
    s2b = min(S2_BASE_MAX, _align(problem.max_skv, 16))
    n_ratio = 4 if (chip.l2_bytes <= 96 * 1024 * 1024 and problem.D == 128 and problem.T1 >= 48000) else N_RATIO
    if "blockDim" in overrides:
        bd = overrides["blockDim"]
        if not isinstance(bd, (int, np.integer)) or isinstance(bd, bool) or not 1 <= bd <= chip.aic_count:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: blockDim must be in [1, {chip.aic_count}], "
                                                      f"got {bd!r}")
    return dict(template=templ, s1BaseSize=s1b, s2BaseSize=s2b, nRatio=n_ratio, s2BaseNratioSize=s2b * n_ratio, vec1Elems=e,
                nChunk=n_chunk, kChunk=k_chunk, qBufNum=q_buf)


def core_split(load, chip, overrides: dict | None, templ: str = SAME_AB) -> tuple[tuple, int]:
    """(sparseStartIdx with the end appended, blockDim). SameAB: the split over all AI Cores (workers =
    AI Cores). Vector-master: over all vector cores (``SetMultiCoreParams``: coreNum = min(items,
    aivNum)), worker w on vector core w % 2 of AI Core w // 2, so one start per vector core of the
    launched AI Cores. blockDim = last AI Core with work + 1; a blockDim override splits over that
    many AI Cores instead."""
    total = len(load)
    per = 1 if templ == SAME_AB else 2
    bd = (overrides or {}).get("blockDim")
    workers = per * (int(bd) if bd is not None else chip.aic_count)
    starts = split_cores(load, workers)
    if bd is None:
        ends = starts[1:] + [total]
        nonempty = [c for c in range(workers) if starts[c] < ends[c]]
        workers = (nonempty[-1] // per + 1) * per if nonempty else per
    return tuple(int(s) for s in starts[:workers]) + (total,), workers // per


def assemble(problem, sizes: dict, kind: str, items: np.ndarray, starts: tuple, block_dim: int) -> FaVarLenTilingData:
    """The tiling for *items* (int64 [k, 7] as item_table) split at *starts* (one per worker, then the
    end) over *block_dim* AI Cores: workspace layout (docs/fa_varlen.md "Workspace"; one set of slots
    per worker), keep_prob constants, UB/L1 figures."""
    s1b, w, e = sizes["s1BaseSize"], sizes["s2BaseNratioSize"], sizes["vec1Elems"]
    isz, dp = problem.dtype.itemsize, _align(problem.D, 16)
    core_ws = 2 * s1b * w * (4 + isz) + 4 * s1b * dp * 4
    offset = (len(starts) - 1) * core_ws
    bit_mode = drop_bit_mode(problem) if problem.dropout else True
    drop_off = offset
    if problem.dropout and not bit_mode:
        offset += _align(problem.drop_mask_bits, BYTE_MASK_ALIGN)
    v_off, v_pitch = offset, _align(problem.T2, 8)
    if isz == 4:
        offset += problem.N2 * problem.D * v_pitch * 4
    keep32 = np.float32(problem.keep_prob)
    col = lambda k: tuple(items[:, k].tolist())  # noqa: E731
    return FaVarLenTilingData(
        bSize=problem.B, n1Size=problem.N1, n2Size=problem.N2, gSize=problem.G, dSize=problem.D, dSizeAlign16=dp,
        t1Size=problem.T1, t2Size=problem.T2, **sizes, sparseType=kind, scaleValue=problem.scale,
        keepProb=float(keep32), keepProbRecip=float(np.float32(1.0) / keep32), dropMaskBitMode=bit_mode,
        blockDim=block_dim, totalSize=len(items), sparseStartIdx=tuple(starts),
        workspaceSize=SYSTEM_WORKSPACE_BYTES + offset, coreWorkspaceBytes=core_ws, dropBytesOffset=drop_off,
        vTransOffset=v_off, vTransPitch=v_pitch, ubBytes=ub_bytes(problem, s1b, e, sizes["template"]),
        l1Bytes=l1_bytes(problem, s1b, sizes["qBufNum"], sizes["nChunk"], sizes["kChunk"]),
        itemB=col(0), itemN=col(1), itemS1o=col(2), itemRows=col(3), itemS2Start=col(4), itemS2End=col(5),
        itemLoad=col(6),
    )


def fa_var_len_tiling(problem, chip, overrides: dict | None = None) -> FaVarLenTilingData:
    """The full tiling of one validated call on *chip* (docs/fa_varlen.md "Tiling")."""
    sizes = base_sizes(problem, chip, overrides)
    kind, items = item_table(problem, sizes["s1BaseSize"])
    starts, block_dim = core_split(items[:, 6], chip, overrides, sizes["template"])
    return assemble(problem, sizes, kind, items, starts, block_dim)


def tiling_field_names() -> list[str]:
    return [f.name for f in fields(FaVarLenTilingData)]
