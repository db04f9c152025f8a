"""Host tiling of FlashAttentionUnpaddingScoreGradV5 on npusim: blocks, sections, core split, workspace.

The template is CANN's choice (templates.py): SameAB, basic_det, the generic template (UnpaddedAttension /
S1s2Bn2gs1s2), the deterministic S1s2Bn2 template ("basic_bn2") or the basic template (run_template).
SameAB: one section per CV block of s1CvInner x s2CvInner (whole 128 x 128 blocks), in the order its
kernel walks them (sab_block_list), section k again on core k % blockDim; IS_DTM adds per-core partial
slots. basic_det: 512 x 512 regions (det_block_list) round-robin on every AI Core,
one partial slot per core (``dtmBasic``). Generic: the same CV block list as SameAB with its own CV shape
(generic_cv_inner, 128 x 512 by default) and a contiguous split (generic_split): ``secCoreStart`` gives each
core's first section. basic_bn2: the same CV block list with S1s2Bn2's CV shape (bn2_cv_inner) and
rectangles (cv_columns), split by (batch, key/value head) pair over the AIVs (bn2_core_split); generic and
basic_bn2 give every core's second AIV its own run (``secAivSplit``). The rest of this docstring is the basic
template.

Follows the CANN "basic" (Mla) template of FlashAttentionScoreGrad (research/tiling.md §3 (a)):
128 x 128 blocks of (b, n1, s1 block, s2 block); blocks a sparse mode leaves empty are skipped and
blocks the mask cuts are flagged for masking; blocks are packed into sections of at most 16 (row
groups of 4 s1 blocks x column groups of 4 s2 blocks of one (b, n1)); section k runs on AI Core
k % blockDim. Workspace (each region 512-byte aligned, after the 16 MiB system reserve): dq fp32
[T1, N1, D], dk and dv fp32 [T2, N2, D] (with rope, dq_rope and dk_rope after them), sfmg fp32 [T1, N1, 8], then per core two section buffers
(taskId % 2) of mm1 (dP, then dS) and mm2 (S, then P), 16 blocks of 128 x 128 fp32 each.
``copyBytes``: the one set of dq/dk/dv (and rope) fp32 workspaces the pre kernel zeroes and the post kernel reads.

docs/fag.md states where this differs from CANN (the templates run in place of others, block reuse).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from npusim.errors import ACLNN_ERR_INNER_TILING_ERROR, ACLNN_ERR_PARAM_INVALID, AclnnError
from ops.flash_attention_unpadding_score_grad_v5.templates import (GEN_S1_INNER, GEN_S2_INNER, SAB_BASE_MN,
                                                                   align_up, bn2_cv_inner,
                                                                   bn2_vec_base_n, bn2_vec_tile, cann_template,
                                                                   generic_cv_inner, generic_s1_pingpong,
                                                                   generic_split_balance, sab_cv_inner,
                                                                   sab_deterministic, tiling_view)

SYSTEM_WORKSPACE_BYTES = 16 * 1024 * 1024  # 16 MiB reserve (tiling.md §3 (a) workspace)
BASE = 128  # BASE_BLOCK_LENGTH (tiling.md §3 (a))
SECTION_BLOCKS = 16  # blocks per section (cube_addr.h limit 16)
ROW_GROUP = 4  # s1 blocks per row group
COL_GROUP = 4  # column limit 4
ALIBI_COLS = 2 * BASE  # pse_type 2/3: columns of the fp16 c - r table (a vector tile is at most 256 wide)
ALIGN = 512  # workspace regions 512-byte aligned (tiling.md §3 (a))
OVERRIDABLE = ("blockDim",)


def _a(x: int) -> int:
    return -(-x // ALIGN) * ALIGN


@dataclass(frozen=True)
class FagTilingData:
    """The tiling the kernels read (CANN-like field names); one entry per block in ``blk*``."""

    template: str
    bSize: int
    n1Size: int
    n2Size: int
    gSize: int
    dSize: int
    t1Size: int
    t2Size: int
    scaleValue: float
    blockDim: int
    sections: int
    secStart: tuple  # first block of each section (length sections + 1)
    blkB: tuple
    blkN: tuple
    blkS1o: tuple
    blkS2o: tuple
    blkRows: tuple
    blkCols: tuple
    blkMasked: tuple  # the block holds masked elements (diagonal blocks)
    dqOffset: int
    dkOffset: int
    dvOffset: int
    sfmgOffset: int
    mmOffset: int
    mmSectionBytes: int
    workspaceSize: int
    deterministic: bool = False
    copyBytes: int = 0  # dq, dk, dv (dq_rope, dk_rope) fp32 workspaces: what pre zeroes and post reads
    dsinkOffset: int = 0  # sink: the dsink partials (SameAB [N1, AIVs] fp32; half blocks 8 fp32 per block and AIV)
    dsinkCores: int = 0  # SameAB with a sink: AIVs of the [N1, AIVs] fp32 dsink partials (each AIV adds into its own)
    dsinkStepHeads: int = 0  # heads the post kernel reduces per step (dsink_step_heads)
    ropeD: int = 0
    sfmgWorkers: int = 0  # AIVs sharing the sfmg rows (0: every AIV of the launch; estimate's one-core sample)
    dqRopeOffset: int = 0  # rope: dq_rope fp32 [T1, N1, Drope], dk_rope fp32 [T2, N2, Drope]
    dkRopeOffset: int = 0
    blockCount: int = 0  # blocks of the call (estimate mode's tiling counts them and leaves blk* empty)
    maskedCount: int = 0
    keepProbRecip: float = 1.0  # dropout: fp32 1 / keep_prob (AscendC DropOut multiplies by it)
    dropMaskBitMode: bool = True  # every row's keep bits start on a byte (Skv % 8 == 0): Select by the bits
    dropBytesOffset: int = 0  # otherwise the adapter's one-byte-per-element copy of the mask
    alibiOffset: int = 0  # pse_type 2/3: the fp16 [BASE, ALIBI_COLS] table of j - i (PseInnerAlibiCreate)
    dropAdapterBits: int = 0  # byte mode: keep bits the adapter expands (all of them; estimate's sample: a share)
    qTOffset: int = 0  # fp32: Q^T [N1, D, t1Pitch], K^T [N2, D, t2Pitch], dY^T [N1, D, t1Pitch] (ops/common/transpose)
    kTOffset: int = 0
    dyTOffset: int = 0
    t1Pitch: int = 0
    t2Pitch: int = 0
    mmTOffset: int = 0  # fp32: per core two section buffers (task parity) of P^T and of dS^T
    cannTemplate: str = "basic"  # the template CANN's registry picks (templates.py); ``template`` is the one run
    s1CvInner: int = 0  # SameAB: CV block rows x columns (multiples of BASE; a section is one CV block)
    s2CvInner: int = 0
    sabDtm: bool = False  # SameAB IS_DTM: per-core partials, SyncAll, ordered AIV reduction every round
    dtmOffset: int = 0  # IS_DTM: per core two (task parity) partial slots of dtmSlotBytes
    dtmSlotBytes: int = 0  # dq [s1CvInner, D], dk and dv [s2CvInner, D] (then dq_rope, dk_rope) fp32
    secCoreStart: tuple = ()  # generic: core c runs sections secCoreStart[c]..secCoreStart[c + 1] (else round robin)
    secAivSplit: tuple = ()  # generic: core c's second AIV runs secAivSplit[c]..secCoreStart[c + 1], its first AIV
    # secCoreStart[c]..secAivSplit[c], each every row of its CV blocks (empty: the core's AIVs share them by rows)
    splitAivs: int = 0  # generic: the AIV count CANN's split divides the CV blocks over (coreNum)
    aivPerCore: int = 2  # AIVs per AI Core of the chip (the generic split gives an AI Core its AIVs' runs)
    cvTrim: int = 0  # SameAB 8 / generic 64: a CV block is the rectangle CANN computes (cv_rectangle); 0: kept blocks
    vecBaseMN: int = 0  # SameAB / generic: baseMN, the elements of a vector tile at most (vectiles.py); 0: half blocks
    vecBaseM: int = 0  # deterministic S1s2Bn2: its vector tile's rows (baseM; its columns: cvTrim); 0: other templates
    tndS1PP: bool = False  # generic TND_S1_PP (templates.generic_s1_pingpong): S1 tile pairs, sfmg rows per tile in UB
    dtmBasic: bool = False  # basic_det: one partial slot per core, reduction from the first partial (16-AIV
    # groups for dq, dk, dv), dk/dv strips with one writer in the round added by the cube itself

    def asdict(self) -> dict:
        """The scalar fields and the block / section counts (the per-block tables are left out)."""
        out = {k: v for k, v in asdict(self).items() if not (k.startswith("blk") or k == "secStart")}
        return out

    @property
    def blocks(self) -> int:
        return len(self.blkB)

    def core_sections(self, core: int) -> range:
        """Sections of AI Core *core*, in the order it runs them."""
        if self.secCoreStart:
            return range(self.secCoreStart[core], self.secCoreStart[core + 1])
        return range(core, self.sections, self.blockDim)

    def core_steps(self, core: int) -> list:
        """The ring steps of AI Core *core*: per step the sections it runs as (section, first block slot in the
        step's section buffers, owning AIV or None when both AIVs share the section by rows). With secAivSplit
        (generic) step t holds the t-th section of each AIV's run, the second AIV's in the buffers' second
        half (a generic CV block has at most 8 blocks of 128 x 128); otherwise one section per step."""
        if not self.secAivSplit:
            return [[(s, 0, None)] for s in self.core_sections(core)]
        runs = (range(self.secCoreStart[core], self.secAivSplit[core]),
                range(self.secAivSplit[core], self.secCoreStart[core + 1]))
        half = SECTION_BLOCKS // 2
        return [[(run[t], v * half, v) for v, run in enumerate(runs) if t < len(run)]
                for t in range(max(len(r) for r in runs))]


def _keep_range(problem, b: int):
    """(next_lu, pre_lu) of batch b; a column j of row i is kept iff -pre <= j - i <= next."""
    return int(problem.next_tokens_lu[b]), int(problem.pre_tokens_lu[b])


def _block_state(problem, b: int, i0: int, i1: int, j0: int, j1: int) -> tuple[bool, bool]:
    """(skipped, masked) of the block of rows i0..i1, columns j0..j1 of batch b. Band modes: kept iff
    -pre <= j - i <= next. Prefix (sparse 6): element dropped iff j - i > Skv - Sq and j >= prefix[b]."""
    if problem.mask_form == "prefix_3072":
        d, pfx = int(problem.seq_kv[b]) - int(problem.seq_q[b]), int(problem.prefix_n[b])
        return j0 - i1 > d and j0 >= pfx, j1 - i0 > d and j1 >= pfx
    nxt, pre = _keep_range(problem, b)
    if j0 - i1 > nxt or j1 - i0 < -pre:
        return True, True
    return False, j1 - i0 > nxt or j0 - i1 < -pre or problem.mask_form == "full"


def section_blocks(problem, b: int, n: int, rg: int, cg: int, row_group: int = ROW_GROUP,
                   col_group: int = COL_GROUP) -> list:
    """The kept blocks (b, n, s1o, s2o, rows, cols, masked) of row group *rg*, column group *cg* (groups of
    *row_group* s1 blocks x *col_group* s2 blocks) of head *n* of batch *b*, row-major (possibly none)."""
    sq, skv = int(problem.seq_q[b]), int(problem.seq_kv[b])
    n1b, n2b = -(-sq // BASE), -(-skv // BASE)
    sec = []
    for s1o in range(rg * row_group, min((rg + 1) * row_group, n1b)):
        rows = min(BASE, sq - s1o * BASE)
        i0, i1 = s1o * BASE, s1o * BASE + rows - 1
        for s2o in range(cg * col_group, min((cg + 1) * col_group, n2b)):
            cols = min(BASE, skv - s2o * BASE)
            j0, j1 = s2o * BASE, s2o * BASE + cols - 1
            skipped, masked = _block_state(problem, b, i0, i1, j0, j1)
            if not skipped:
                sec.append((b, n, s1o, s2o, rows, cols, masked))
    return sec


def block_list(problem) -> list:
    """Blocks in section order: list of sections, each a list of (b, n, s1o, s2o, rows, cols, masked).
    Sections with no kept block are left out (work.py counts the same without listing them)."""
    sections = []
    for b in range(problem.B):
        sq, skv = int(problem.seq_q[b]), int(problem.seq_kv[b])
        if sq == 0:
            continue
        n1b, n2b = -(-sq // BASE), -(-skv // BASE)
        for n in range(problem.N1):
            for rg in range(-(-n1b // ROW_GROUP)):
                for cg in range(-(-n2b // COL_GROUP)):
                    sec = section_blocks(problem, b, n, rg, cg)
                    if sec:
                        sections.append(sec)
    return sections


SAB_TRIM, GENERIC_TRIM = 8, 64  # column granularity of a CV block's computed rectangle (SameAB, generic template)
# (the deterministic S1s2Bn2 template's: its vector tile width, >= 128; templates.bn2_vec_base_n)


def cv_columns(problem, b: int, s1o: int, s2o: int, s1_cv: int, s2_cv: int, trim: int) -> tuple[int, int]:
    """The columns [lo, hi) of batch b the kernel computes for CV block (s1o, s2o) of s1_cv x s2_cv: the whole
    rectangle of its rows by these columns, masked elements included. SameAB (*trim* SAB_TRIM; ..._sab.h
    CalcValidBlock): from the CV block's first column to its last row's kept end (row end + nextLU; at least
    prefix[b] in sparse 6) rounded up to 8. Generic (*trim* GENERIC_TRIM; ..._s1s2_bn2gs1s2.h
    IsCubeBlockNeedCompute): from (s1o h - preLU) rounded down to 64 to (h (s1o + 1) + nextLU) rounded up to 64,
    h = CANN's s1CvInner (the full CV height even for the last rows); sparse 6 (CheckIsValidBlock): from the CV
    block's first column to max(h (s1o + 1) + Skv - Sq, prefix[b]). Both are clipped to the CV block and the sequence.
    Deterministic S1s2Bn2 (*trim* its vector tile width, >= 128; ..._s1s2_bn2.h CalcSparseIdx,
    AssureUsefulDataBySingleN): the pieces of *trim* columns from the CV block's first column that reach into
    [first row - preLU, last row + 1 + nextLU) (sparse 6: [0, max(last row + 1 + Skv - Sq, prefix[b] rounded up to
    128))), from the first such piece to the last."""
    p = problem
    sq, skv = int(p.seq_q[b]), int(p.seq_kv[b])
    lo, hi = s2o * s2_cv, min(skv, (s2o + 1) * s2_cv)
    prefix = p.mask_form == "prefix_3072"
    nxt = skv - sq if prefix else int(p.next_tokens_lu[b])
    if trim >= BASE:
        bottom = min(sq, (s1o + 1) * s1_cv)
        if prefix:
            start, end = 0, max(bottom + nxt, -(-int(p.prefix_n[b]) // BASE) * BASE)
        else:
            start, end = s1o * s1_cv - int(p.pre_tokens_lu[b]), bottom + nxt
        first = max(0, start - lo) // trim
        last = -(-(min(end, hi) - lo) // trim)
        return lo + first * trim, min(hi, lo + last * trim)
    if trim == SAB_TRIM:
        right = max(0, s1o * s1_cv + min(s1_cv, sq - s1o * s1_cv) + nxt)
        if prefix:
            right = max(right, int(p.prefix_n[b]))
        return lo, min(hi, -(-right // trim) * trim)
    # CANN's s1CvInner: npusim's 128-row CV side unless the longest query is shorter (s1CvRatio is 1 there)
    h = s1_cv if p.max_sq >= BASE else -(-p.max_sq // 16) * 16
    if prefix:
        return lo, min(hi, max(h * (s1o + 1) + nxt, int(p.prefix_n[b])))
    left = max(0, s1o * h - int(p.pre_tokens_lu[b])) // trim * trim
    right = max(0, -(-(h * (s1o + 1) + nxt) // trim) * trim)
    return max(lo, left), min(hi, right)


def cv_rectangle(problem, b: int, n: int, s1o: int, s2o: int, s1_cv: int, s2_cv: int, trim: int) -> list:
    """The 128 x 128 blocks the kernel computes for CV block (s1o, s2o) of head n of batch b (row-major): every s1
    block of the CV block by the s2 blocks that cover cv_columns, the last one cut to the trimmed edge; a block
    that holds a masked element (or that the mask drops whole) is flagged masked. npusim's blocks start at
    multiples of 128, so a generic rectangle that starts 64 columns into a block computes that block whole."""
    sq = int(problem.seq_q[b])
    lo, hi = cv_columns(problem, b, s1o, s2o, s1_cv, s2_cv, trim)
    out = []
    for s1b in range(s1o * s1_cv // BASE, min(-(-sq // BASE), (s1o + 1) * s1_cv // BASE)):
        rows = min(BASE, sq - s1b * BASE)
        i0, i1 = s1b * BASE, s1b * BASE + rows - 1
        for s2b in range(lo // BASE, -(-hi // BASE)):
            cols = min(BASE, hi - s2b * BASE)
            skipped, masked = _block_state(problem, b, i0, i1, s2b * BASE, s2b * BASE + cols - 1)
            out.append((b, n, s1b, s2b, rows, cols, skipped or masked))
    return out


def sab_block_list(problem, s1_cv: int, s2_cv: int, dtm: bool, trim: int = 0) -> list:
    """SameAB CV blocks in the order the cores take them (CalcValidBlock / UpdateIndex of the SameAB kernel):
    per batch and key/value head, then (non-deterministic) query head of the group, S2 CV block, S1 CV block
    (fastest); deterministic (IS_DTM): S2 CV block before the group's query head. CV blocks without a kept
    128 x 128 block are left out; each other one is the list of its kept blocks (row-major), or with *trim*
    (SAB_TRIM, GENERIC_TRIM) the blocks of its computed rectangle (cv_rectangle)."""
    rg_n, cg_n = s1_cv // BASE, s2_cv // BASE
    out = []
    for b in range(problem.B):
        sq, skv = int(problem.seq_q[b]), int(problem.seq_kv[b])
        if sq == 0 or skv == 0:
            continue
        s1_outer, s2_outer = -(-sq // s1_cv), -(-skv // s2_cv)
        for n2 in range(problem.N2):
            pairs = [(g, s2o) for g in range(problem.G) for s2o in range(s2_outer)] if not dtm else \
                [(g, s2o) for s2o in range(s2_outer) for g in range(problem.G)]
            for g, s2o in pairs:
                for s1o in range(s1_outer):
                    sec = section_blocks(problem, b, n2 * problem.G + g, s1o, s2o, rg_n, cg_n)
                    if sec and trim:
                        sec = cv_rectangle(problem, b, n2 * problem.G + g, s1o, s2o, s1_cv, s2_cv, trim)
                    if sec:
                        out.append(sec)
    return out


DET_REGION = ROW_GROUP * BASE  # basic_det: a task is a 512 x 512 region (GetRecoderS, addr_compute_det.h)


def det_causal_opt(problem) -> bool:
    """enableCausalOpt of basic_det (AddrComputeDet::Init): sparse 3 with Sq == Skv in every batch; then the cube
    and the AIVs skip the 128 x 128 blocks the mask drops whole (IsFullMaskBlock), otherwise they compute them."""
    return problem.sparse_mode != 3 or bool((np.asarray(problem.seq_q) == np.asarray(problem.seq_kv)).all())


def det_block_list(problem) -> list:
    """basic_det's tasks in the order CANN's AddrComputeDet hands them out (task k to core k % cores): per batch
    (with Sq, Skv > 0), query head, 512-row range, 512-column range (fastest), the regions with a kept block;
    each region's 128 x 128 blocks column by column (VecRecord: s2 outer, s1 inner): its kept blocks (the basic
    template's 4 x 4 sections, reordered inside), or all of them, those the mask drops whole flagged masked, for
    sparse 3 with some Sq != Skv (no enableCausalOpt, det_causal_opt; the sparse 0 and 1 calls basic_det takes
    drop no block). CANN's AIVs mark such blocks isFullMask; npusim runs them as any masked block."""
    sections = block_list(problem)
    if not det_causal_opt(problem):
        sections = [_region(problem, sec[0][0], sec[0][1], sec[0][2] // ROW_GROUP, sec[0][3] // COL_GROUP)
                    for sec in sections]
    return [sorted(sec, key=lambda blk: (blk[3], blk[2])) for sec in sections]


def _region(problem, b: int, n: int, rg: int, cg: int) -> list:
    """Every 128 x 128 block of row group rg x column group cg of (b, n) inside the sequence, row-major, with the
    masked flag set on those that hold a masked element or that the mask drops whole."""
    sq, skv = int(problem.seq_q[b]), int(problem.seq_kv[b])
    out = []
    for s1o in range(rg * ROW_GROUP, min((rg + 1) * ROW_GROUP, -(-sq // BASE))):
        rows = min(BASE, sq - s1o * BASE)
        for s2o in range(cg * COL_GROUP, min((cg + 1) * COL_GROUP, -(-skv // BASE))):
            cols = min(BASE, skv - s2o * BASE)
            skipped, masked = _block_state(problem, b, s1o * BASE, s1o * BASE + rows - 1, s2o * BASE,
                                           s2o * BASE + cols - 1)
            out.append((b, n, s1o, s2o, rows, cols, skipped or masked))
    return out


def _trim(template: str, problem) -> int:
    """The column granularity of the template's CV rectangles (0: the basic templates' kept blocks)."""
    if template == "basic_bn2":
        return bn2_vec_base_n(tiling_view(problem, True))
    return GENERIC_TRIM if template == "generic" else SAB_TRIM if template.startswith("sameab") else 0


def cv_sections(problem, template: str, s1cv: int, s2cv: int, dtm: bool) -> list:
    """The sections (CV blocks / regions / basic sections) of a template, in run order."""
    if template == "basic_det":
        return det_block_list(problem)
    if template == "basic":
        return block_list(problem)
    return sab_block_list(problem, s1cv, s2cv, dtm, _trim(template, problem))


BN2_WEIGHT_ALIGN = 64  # BASE_LEN_64: S1s2Bn2's (batch, key/value head) weight ceil(Sq / 64) ceil(Skv / 64)


def bn2_core_split(problem, sections: list, chip, requested: int | None) -> tuple[tuple, int, int, tuple]:
    """The deterministic S1s2Bn2 template's core split (DoBlockTiling, ..._tiling_s1s2_bn2.cpp): the (batch,
    key/value head) pairs, each weighing ceil(Sq / 64) ceil(Skv / 64) (batch outer), cut into contiguous runs
    over coreNum = every AIV (TND never takes its L1-custom variant, which splits over AI Cores): one pair per
    AIV when they are no more than the AIVs, else GetSplitArrayMinMaxSum and the greedy walk of balanced_split.
    Every CV block (sab_block_list's order: batch, key/value head, query head, S2, S1 fastest, the loops of
    the kernel's Process / S2Ratio / S1Ratio) goes to the AIV of its pair, which runs it with every row; an AI
    Core's cube serves its two AIVs' runs (core_steps), so each output row has one writer. Returns (first section
    of every core and the end, blockDim, coreNum AIVs, first section of every core's second AIV), as
    generic_core_split."""
    p = problem
    aivs, ratio = _split_aivs(chip, requested), chip.aiv_count // chip.aic_count
    sq, skv = np.asarray(p.seq_q, np.int64), np.asarray(p.seq_kv, np.int64)
    a = BN2_WEIGHT_ALIGN
    weights = np.repeat(-(-sq // a) * -(-skv // a), p.N2).tolist()
    pair_starts, block_dim, second = balanced_split(weights, min(len(weights), aivs), ratio, with_aivs=True)
    pair = [sec[0][0] * p.N2 + sec[0][1] // p.G for sec in sections]
    at = lambda ps: int(np.searchsorted(pair, ps, side="left"))  # noqa: E731
    return tuple(at(ps) for ps in pair_starts), block_dim, aivs, tuple(at(ps) for ps in second)


def block_dim_override(overrides: dict | None, chip) -> int | None:
    """The ``tiling=`` blockDim (None when not given); AclnnError 161002 for any other key or a bad value."""
    overrides = dict(overrides or {})
    bad = set(overrides) - set(OVERRIDABLE)
    if bad:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: unknown override(s) {sorted(bad)}; allowed "
                                                  f"{list(OVERRIDABLE)}")
    if "blockDim" not in overrides:
        return None
    v = overrides["blockDim"]
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not 1 <= v <= chip.aic_count:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"tiling: blockDim must be an int in [1, {chip.aic_count}], "
                                                  f"got {v!r}")
    return int(v)


LISTED_WORK_BLOCKS = 150_000  # SameAB estimate: CV blocks listed in Python up to this many 128 x 128 blocks (~0.5 s)


@dataclass
class ListedWork:
    """The part of work.Work's interface estimate mode reads, for listed sections (SameAB CV blocks): counts per
    section and per core of the round-robin split, and each section's blocks."""

    listed: list  # the sections' block tuples, in run order
    block_dim: int
    sections: int
    core_sections: np.ndarray  # per core of the round-robin split
    blocks: int
    core_blocks: np.ndarray
    masked: int
    core_masked: np.ndarray
    core_aiv_split: np.ndarray | None = None  # generic: per core, how many of its sections its first AIV runs

    def section_counts(self, g: int) -> tuple[int, int]:
        sec = self.listed[g]
        return len(sec), sum(blk[6] for blk in sec)

    def blocks_of(self, problem, g: int) -> list:
        return self.listed[g]


def generic_split(nsec: int, aivs: int, aiv_per_core: int, with_aivs: bool = False) -> tuple:
    """The generic template's core split (GetSparseUnpadBlockInfo, ..._s1s2_bn2gs1s2.cpp): blockFactor =
    ceil(CV blocks / coreNum) consecutive CV blocks per AIV (coreNum = *aivs*), blockOuter = ceil(CV blocks /
    blockFactor) AIVs used, blockDim = ceil(blockOuter / AIVs per AI Core). An AI Core runs the ranges of its
    AIVs c * aiv_per_core ... Returns (first section of every core and the end, blockDim), and with *with_aivs*
    the first section of every core's second AIV (cores_of_aivs)."""
    factor = max(1, -(-nsec // aivs))
    outer = -(-nsec // factor)
    out = cores_of_aivs([min(nsec, v * factor) for v in range(outer + 1)], outer, aiv_per_core)
    return out if with_aivs else out[:2]


def cores_of_aivs(aiv_starts: list, outer: int, aiv_per_core: int) -> tuple[tuple, int, tuple]:
    """(first section of every AI Core and the end, blockDim, first section of every core's second AIV) of the
    AIV runs *aiv_starts* (first section of every AIV and the end): blockDim counts max(runs, *outer*) AIVs, an AI
    Core takes its AIVs' runs; the third is empty unless the chip has two AIVs per AI Core."""
    aivs = len(aiv_starts) - 1
    block_dim = max(1, -(-max(aivs, outer) // aiv_per_core))
    at = lambda v: aiv_starts[min(aivs, v)]  # noqa: E731
    starts = tuple(at(c * aiv_per_core) for c in range(block_dim + 1))
    second = tuple(at(c * aiv_per_core + 1) for c in range(block_dim)) if aiv_per_core == 2 else ()
    return starts, block_dim, second


S1_BALANCE_ALIGN, S2_BALANCE_ALIGN = 64, 128  # ..._s1s2_bn2gs1s2.cpp FillS1s2WeightVec


def balance_applies(problem) -> bool:
    """CoreLoadBalancingForUnpad runs: sparse 0 without a band (no mask, or tokens covering s1 and s2) and the
    TND short-key CV ratio (isSplitBalance); then every CV block is kept."""
    p = problem
    no_band = p.atten_mask_shape is None or (p.pre_tokens >= p.max_sq and p.next_tokens >= p.max_skv)
    return p.sparse_mode == 0 and no_band and generic_split_balance(p)


def cv_weight(rows: int, cols: int, D: int) -> int:
    """MTE2 weight of a CV block of rows x cols (FillS1s2WeightVec): rows up to 64, cols up to 128, then
    rows (4 D + 3 cols) + 3 cols D."""
    r, c = -(-rows // S1_BALANCE_ALIGN) * S1_BALANCE_ALIGN, -(-cols // S2_BALANCE_ALIGN) * S2_BALANCE_ALIGN
    return r * (4 * D + 3 * c) + 3 * c * D


def balanced_split(weights: list, outer: int, aiv_per_core: int, with_aivs: bool = False) -> tuple:
    """CoreLoadBalancingForUnpad's contiguous split of the weighted CV blocks over *outer* AIVs: the smallest
    largest-part sum (binary search, GetSplitArrayMinMaxSum), then a greedy walk that opens a new part when the
    sum would pass it or when the AIVs left could take one block each (from there on each block is its own
    part). Returns (first section of every core and the end, blockDim), a core taking its AIVs' parts (with
    *with_aivs*, also the first section of every core's second AIV, cores_of_aivs)."""
    n = len(weights)
    if n <= outer:
        aiv_starts = list(range(n)) + [n]
    else:
        lo, hi = max(weights), sum(weights)
        while lo < hi:
            mid = (lo + hi) // 2
            parts, acc = 1, 0
            for w in weights:
                parts, acc = (parts + 1, w) if acc + w > mid else (parts, acc + w)
            lo, hi = (lo, mid) if parts <= outer else (mid + 1, hi)
        aiv_starts, acc, opened = [0], 0, 0
        for i, w in enumerate(weights):
            acc += w
            if acc > lo or outer - (opened + 1) >= n - i:
                opened += 1
                acc = w
                if outer - opened >= n - i:  # one block per AIV from i on
                    aiv_starts += list(range(i, n))
                    break
                aiv_starts.append(i)
        aiv_starts.append(n)
    out = cores_of_aivs(aiv_starts, outer, aiv_per_core)  # CANN's blockDim still counts blockOuter AIVs
    return out if with_aivs else out[:2]


def generic_core_split(problem, sections: list, chip, requested: int | None) -> tuple[tuple, int, int, tuple]:
    """(first section of every core and the end, blockDim, coreNum AIVs, first section of every core's second
    AIV) of a generic call's listed CV blocks: the count split, or the weighted one where
    CoreLoadBalancingForUnpad applies (balance_applies)."""
    aivs, ratio = _split_aivs(chip, requested), chip.aiv_count // chip.aic_count
    if not balance_applies(problem) or not sections:
        starts, block_dim, second = generic_split(len(sections), aivs, ratio, with_aivs=True)
        return starts, block_dim, aivs, second
    weights = []
    for sec in sections:
        rows = sum({blk[2]: blk[4] for blk in sec}.values())
        cols = sum({blk[3]: blk[5] for blk in sec}.values())
        weights.append(cv_weight(rows, cols, problem.D))
    n = len(sections)
    outer = -(-n // max(1, -(-n // aivs)))
    starts, block_dim, second = balanced_split(weights, outer, ratio, with_aivs=True)
    return starts, block_dim, aivs, second


def _split_aivs(chip, block_dim: int | None) -> int:
    """coreNum of the generic split: the chip's AIVs, or those of a ``tiling=`` blockDim's AI Cores."""
    ratio = chip.aiv_count // chip.aic_count
    return chip.aiv_count if block_dim is None else block_dim * ratio


def sab_work(problem, chip, deterministic: bool, block_dim: int | None) -> ListedWork:
    """Estimate mode's work of a SameAB or generic call: its CV blocks listed (LISTED_WORK_BLOCKS bounds the calls
    this is used for) and split over the cores: SameAB round-robin over *block_dim* (None: min(AI Cores, CV
    blocks)) cores; generic contiguously (generic_split), its sections listed at the round-robin positions the
    estimate reads (core + j * blockDim for the core's j-th section; other positions hold None), with the number
    of each core's sections its first AIV runs (core_aiv_split)."""
    template, _, (s1cv, s2cv, dtm) = run_template(problem, chip, deterministic)
    listed = cv_sections(problem, template, s1cv, s2cv, dtm)
    per = np.array([[len(sec), sum(blk[6] for blk in sec)] for sec in listed], np.int64).reshape(-1, 2)
    aiv_first = None
    if template in ("generic", "basic_bn2"):
        split = bn2_core_split if template == "basic_bn2" else generic_core_split
        starts, bd, _, second = split(problem, listed, chip, block_dim)
        aiv_first = np.asarray(second, np.int64) - np.asarray(starts[:-1], np.int64) if second else None
        pos = np.repeat(np.arange(bd), np.diff(starts))
        slot = np.arange(len(listed)) - np.asarray(starts)[pos]
        placed = [None] * (int(slot.max(initial=-1)) + 1) * bd
        for k, sec in enumerate(listed):
            placed[int(pos[k]) + int(slot[k]) * bd] = sec
    else:
        bd = block_dim if block_dim is not None else _default_block_dim(template, chip, len(listed))
        pos = np.arange(len(listed)) % bd
        placed = listed
    count = lambda w=None: np.bincount(pos, w, minlength=bd).astype(np.int64)  # noqa: E731
    return ListedWork(block_dim=bd, sections=len(listed), blocks=int(per[:, 0].sum()), masked=int(per[:, 1].sum()),
                      core_sections=count(), core_blocks=count(per[:, 0]), core_masked=count(per[:, 1]),
                      listed=placed, core_aiv_split=aiv_first)


def run_template(problem, chip, deterministic: bool = False) -> tuple[str, str, tuple]:
    """(template run, CANN's template, (s1CvInner, s2CvInner, IS_DTM)): SameAB (either priority) runs as
    itself, the generic template (UnpaddedAttension 2000, S1s2Bn2gs1s2 16000) as "generic" when not deterministic;
    every other choice runs the basic template in its place (docs/fag.md "Template selection")."""
    cann = cann_template(problem, deterministic)
    view = tiling_view(problem, deterministic)  # the CV shapes follow the D CANN's tiling sees
    if cann in ("unpadded", "s1s2bn2gs1s2"):  # its tiling and kernel never read the deterministic flag
        return "generic", cann, (*generic_cv_inner(view), False)
    if cann == "basic_det":
        return "basic_det", cann, (DET_REGION, DET_REGION, True)
    if cann == "deterministic_s1s2bn2":
        return "basic_bn2", cann, (*bn2_cv_inner(view, chip.l2_bytes), False)
    if cann not in ("sameab", "sameab_det"):
        return "basic", cann, (0, 0, False)
    s1cv, s2cv = sab_cv_inner(view, deterministic, chip.aiv_count)
    return cann, cann, (s1cv, s2cv, deterministic and sab_deterministic(problem, s1cv, s2cv))


def _default_block_dim(template: str, chip, sections: int) -> int:
    """min(AI Cores, sections); basic_det launches every AI Core (SetBlockDim(aicNum), ..._basic_det.cpp), the
    idle ones taking part in every round's SyncAll."""
    return chip.aic_count if template == "basic_det" else max(1, min(chip.aic_count, sections))


#: the templates whose kernels write the dsink partials the post kernel reads: SameAB's [N1, AIVs] (SinkOut,
#: PostDsinkSab), the half-block templates' per block and AIV (SinkPartial, sink_slots, PostDsink). The generic and
#: S1s2Bn2 kernels write none (CANN's registry never gives them a sink call), so fag_tiling refuses them one.
SINK_TEMPLATES = ("sameab", "sameab_det", "basic", "basic_det")


def dsink_step_heads(ub_bytes: int, cores: int) -> int:
    """Heads of one step of the post kernel's dsink reduction: as many [cores] rows of fp32 partials as two of its UB
    nodes hold, at least one (postUbBaseSize = UB / 3 (POST_COEX_NODE) rounded down to 256 bytes; CANN
    ..._sab.cpp DoPostTiling, ..._post.h ReduceDsinkSum headsPerBatch)."""
    return max(2 * (ub_bytes // 3 // 256 * 256) // (cores * 4), 1)


def fag_tiling(problem, chip, overrides: dict | None = None, deterministic: bool = False,
               work=None) -> FagTilingData:
    """The tiling of a validated call (FagProblem) on *chip*: the basic template's sections, or SameAB's / the
    generic template's CV blocks when CANN picks them (run_template). With *work* (work.count_work, estimate mode) the per-block tables are
    left empty: the counts come from *work*, nothing is listed."""
    requested = block_dim_override(overrides, chip)
    template, cann, (s1cv, s2cv, dtm) = run_template(problem, chip, deterministic)
    if problem.sink and template not in SINK_TEMPLATES:
        raise AclnnError(ACLNN_ERR_INNER_TILING_ERROR, f"tiling: a sink call on the {template} template, whose "
                         "kernel writes no dsink partials for the post kernel to read (CANN's registry gives a sink "
                         "call SameAB or a basic template only, templates.py)")
    sections = cv_sections(problem, template, s1cv, s2cv, dtm) if work is None else None
    nsec = len(sections) if work is None else work.sections
    block_dim = requested if requested is not None else _default_block_dim(template, chip, nsec)
    core_starts, split_aivs, aiv_split = (), 0, ()
    if template in ("generic", "basic_bn2"):
        if work is None:
            split = bn2_core_split if template == "basic_bn2" else generic_core_split
            core_starts, block_dim, split_aivs, aiv_split = split(problem, sections, chip, requested)
            # core_steps' slots: each AIV's CV block in half the section buffers
            assert max((len(sec) for sec in sections), default=0) <= SECTION_BLOCKS // 2
        else:  # estimate mode: work (sab_work) holds the split; its samples lay their sections out round-robin
            block_dim = work.block_dim
    if sections is None:
        sections = []
    flat = [blk for sec in sections for blk in sec]
    starts = np.concatenate(([0], np.cumsum([len(s) for s in sections]))).astype(int)
    cols = list(zip(*flat)) if flat else [()] * 7
    p = problem
    dq = _a(p.T1 * p.N1 * p.D * 4)
    dk = _a(p.T2 * p.N2 * p.D * 4)
    sfmg = _a(p.T1 * p.N1 * 8 * 4)
    mm_section = SECTION_BLOCKS * BASE * BASE * 4
    dqr, dkr = _a(p.T1 * p.N1 * p.rope_d * 4), _a(p.T2 * p.N2 * p.rope_d * 4)
    copy_bytes = dq + 2 * dk + dqr + dkr
    offsets = [0, dq, dq + dk, copy_bytes]
    off = offsets[3] + sfmg
    dsink_off = off
    sab_sink = problem.sink and template.startswith("sameab")
    if sab_sink and not 8 < chip.aiv_count <= 64:  # ReduceSum AR's other paths (BlkReduceForLoop, LargeLast)
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"chip: {chip.aiv_count} AIVs; the dsink reduction is modelled "
                         "for 9 to 64 AIVs (one WholeReduceSum per head, docs/fag.md)")
    if sab_sink:  # [N1, AIVs] fp32: each AIV's CV-block sums of a head added into its own slot
        off += _a(p.N1 * chip.aiv_count * 4)
    elif problem.sink:  # the half-block templates: one 8 x fp32 partial per block and AIV
        off += _a((len(flat) if work is None else work.blocks) * 2 * 8 * 4)
    bit_mode = bool((p.seq_kv[p.seq_q > 0] % 8 == 0).all())
    drop_off = off
    if p.dropout and not bit_mode:
        off += _a(p.drop_mask_bits)
    alibi_off = off
    if p.pse_form == "slope":
        off += _a(BASE * ALIBI_COLS * 2)
    keep32 = np.float32(p.keep_prob)
    t1p, t2p = -(-p.T1 // 8) * 8, -(-p.T2 // 8) * 8
    t_offs = [0, 0, 0]
    mm_t = 0
    if np.dtype(p.dtype).itemsize == 4:
        for k, size in enumerate((p.N1 * p.D * t1p * 4, p.N2 * p.D * t2p * 4, p.N1 * p.D * t1p * 4)):
            t_offs[k] = off
            off += _a(size)
        mm_t = off
        off += block_dim * 2 * 2 * mm_section
    dtm_off, dtm_slot = off, 0
    if dtm:  # SameAB: two slots per core (task parity); basic_det: one (the cube waits for the round's reduction)
        dtm_slot = _a(4 * ((s1cv + 2 * s2cv) * p.D + (s1cv + s2cv) * p.rope_d))
        off += block_dim * (1 if template == "basic_det" else 2) * dtm_slot
    mm_total = block_dim * 2 * 2 * mm_section  # mm1 + mm2, two section buffers, per core
    return FagTilingData(
        template=template, cannTemplate=cann, secCoreStart=core_starts, secAivSplit=aiv_split, splitAivs=split_aivs, s1CvInner=s1cv, s2CvInner=s2cv, sabDtm=dtm, dtmOffset=dtm_off,
        dtmBasic=template == "basic_det", cvTrim=_trim(template, p), aivPerCore=chip.aiv_count // chip.aic_count,
        dtmSlotBytes=dtm_slot, bSize=p.B, n1Size=p.N1, n2Size=p.N2, gSize=p.G, dSize=p.D, t1Size=p.T1, t2Size=p.T2,
        scaleValue=float(p.scale), blockDim=block_dim, sections=nsec,
        secStart=tuple(int(x) for x in starts) if work is None else (0,),
        blkB=tuple(cols[0]), blkN=tuple(cols[1]), blkS1o=tuple(cols[2]), blkS2o=tuple(cols[3]),
        blkRows=tuple(cols[4]), blkCols=tuple(cols[5]), blkMasked=tuple(bool(x) for x in cols[6]),
        dqOffset=offsets[0], dkOffset=offsets[1], dvOffset=offsets[2], sfmgOffset=offsets[3], mmOffset=off,
        mmSectionBytes=mm_section, workspaceSize=SYSTEM_WORKSPACE_BYTES + off + mm_total,
        deterministic=bool(deterministic), copyBytes=copy_bytes, dsinkOffset=dsink_off,
        dsinkCores=chip.aiv_count if sab_sink else 0,
        dsinkStepHeads=dsink_step_heads(chip.ub_bytes, chip.aiv_count) if sab_sink else 0,
        ropeD=p.rope_d, dqRopeOffset=dq + 2 * dk, dkRopeOffset=dq + 2 * dk + dqr,
        blockCount=len(flat) if work is None else work.blocks,
        maskedCount=sum(blk[6] for blk in flat) if work is None else work.masked,
        keepProbRecip=float(np.float32(1.0) / keep32), dropMaskBitMode=bit_mode, dropBytesOffset=drop_off,
        alibiOffset=alibi_off, dropAdapterBits=p.drop_mask_bits if p.dropout and not bit_mode else 0,
        qTOffset=t_offs[0], kTOffset=t_offs[1], dyTOffset=t_offs[2], t1Pitch=t1p, t2Pitch=t2p, mmTOffset=mm_t,
        vecBaseMN=vec_base_mn(template, p),
        tndS1PP=template == "generic" and generic_s1_pingpong(tiling_view(p, deterministic)),
        vecBaseM=bn2_vec_tile(tiling_view(p, True))[0] if template == "basic_bn2" else 0)


def vec_base_mn(template: str, problem) -> int:
    """baseMN of SameAB (128 x 64) and of the generic template (min(128, s1 aligned to 16) x min(64, s2 aligned to
    16), s1 / s2 the longest sequences; ..._tiling_s1s2_bn2gs1s2.cpp DoSplit: FuzzyForBestSplit's legality check
    holds there for every D and dtype, so it never shrinks them, docs/fag.md "Template selection"); 0 for the basic
    templates."""
    if template.startswith("sameab"):
        return SAB_BASE_MN
    if template == "generic":
        return min(GEN_S1_INNER, align_up(problem.max_sq, 16)) * min(GEN_S2_INNER, align_up(problem.max_skv, 16))
    return 0
