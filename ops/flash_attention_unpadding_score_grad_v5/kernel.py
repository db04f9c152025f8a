"""FlashAttentionUnpaddingScoreGradV5 device kernels, written like the CANN basic (cube-driven) template.

docs/fag.md is the contract. Three launches make one operator call (research/tiling.md §3 (a)):

- ``fag_pre`` (vector): zero-fills the fp32 dq/dk/dv workspaces (VecPre).
- ``fag_main`` (mix): the AIVs first compute sfmg = rowsum(dy * attention_in) into the workspace
  (VecSftg) and SyncAll; then per section (<= 16 blocks of 128 x 128) the AIC runs Cube1 (S = Q K^T,
  dP = dY V^T into the section's mm2/mm1 workspace), sets CUBE2VEC, and runs Cube2/3 of the
  previous section once its AIVs are done: dQ += dS K, dK += dS^T Q, dV += P^T dY with fp32 atomic
  Fixpipe adds into the workspaces. The two AIVs each take half of a block's rows: SubGrapA
  (P = exp(S * scale [masked] - max) / sum, cast to the input dtype over the S slot) and SubGrapB
  (dS = (dP - sfmg) * P, cast over the dP slot), then set VEC2CUBE.
  SameAB (research/tiling.md §3 (b)) runs the same ring with one CV block per section: ComputeMM1 (Cube1
  per block) -> CUBE2VEC (SYNC_C1_V1) -> ComputeVec (SubGrapA/B per vector tile of the CV block, CANN's tiles of at
  most 8192 elements, vectiles.py; AIV 0 the first half of the tile rows) -> VEC2CUBE (SYNC_V1_C2) ->
  ComputeMMDqkv (dQ, dK, dV per 128-row / 128-column strip of the CV block, the strip's blocks in one L0C
  accumulation, Fixpipe atomic adds); with IS_DTM the strips go to per-core partial slots, the cube sets
  CUBE2ADD (SYNC_C2_V1), and every round the AIVs SyncAll, reduce the round's partials in core order
  (ComputeVecAdd) and SyncAll again. The generic template (UnpaddedAttension / S1s2Bn2gs1s2) runs this
  non-IS_DTM ring on its own CV blocks (128 x 512 by default), each core a contiguous run of them
  (tiling.secCoreStart) instead of every blockDim-th, and each of its AIVs its own part of that run with every
  row (tiling.core_steps: one CV block of each AIV per ring step). The deterministic S1s2Bn2 template runs the
  same ring on its CV blocks (singleM x singleN), each AIV the (batch, key/value head) pairs of its run, with
  the softmax-grad rows computed per CV block in UB (VectorByCS1, no prologue VecSftg) and each row's first
  dq/dk/dv strip written without atomics.
- ``fag_post`` (vector): dq = cast(dq_ws * scale), dk = cast(dk_ws * scale), dv = cast(dv_ws).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.launch import current_unit
from npusim.kernel import (ASCEND_IS_AIC, Abs, Add, Adds, Compare, Copy, CopyRepeatParams, Div, ReduceSum, Sub, CMPMODE,
                           SELMODE, Cast, DataCopyExtParams, DataCopyPad, WholeReduceSum,
                           CrossCoreSetFlag, CrossCoreWaitFlag, DataCopy, Exp, Gather, Sqrt, Transpose,
                           DataCopyParams, Duplicate, Fixpipe, FixpipeParamsV220, GetBlockIdx, GetBlockNum,
                           GetSubBlockIdx, HardEvent, LoadData, LoadData2DParams, Mul, Muls, Nd2NzParams, Pipe,
                           PipeBarrier, RoundMode, Select, SetAtomicAdd, SetAtomicNone, SetFlag, SyncAll, TBuf, TPipe,
                           TPosition, TQue, WaitFlag)
from ops.common.cube_tiles import CubeTiles, c16
from ops.common.dropout import ApplyDropout, DropMaskAdapter, keep_bit_offset
from ops.common.masks import COMPRESSED_MASK_SIZE, causal_tile_offset, prefix_tile_reads
from ops.common.pse import ALIBI_ROWS, AddPseSlice, alibi_read_window, alibi_slice_needed
from ops.common.rowops import BroadcastRows, BytesToBits, CopyRowsIn, CopyRowsOut, RowBroadcast, RowReduce
from ops.common.transpose import TransposeHeads, TransposeOffsets
from ops.flash_attention_unpadding_score_grad_v5.tiling import BASE, FagTilingData
from ops.flash_attention_unpadding_score_grad_v5.tiling import ALIBI_COLS
from ops.flash_attention_unpadding_score_grad_v5.vectiles import (SFMG_DB_INPUT_ELEMS, VEC_ROWS_MAX, block_view,
                                                                  bn2_section_views, nd_block, nd_layout, pp_pairs,
                                                                  section_views, tile_align)

CUBE2VEC, VEC2CUBE = 1, 2  # cross-core flags of the basic template (SameAB: SYNC_C1_V1, SYNC_V1_C2)
CUBE2ADD = 3  # SameAB IS_DTM: SYNC_C2_V1, the core's partials are in its workspace slot (basic_det: CUBE2VECDET)
DET2CUBE = 4  # basic_det: VEC_TO_CUBE_DET, the round's reduction has read the partial slot
# generic, each AIV on its own run: the flags of the second AIV's CV blocks. npusim's cross-core flags are mode 2
# (an AIC set reaches both AIVs, an AIC wait needs a set from each), so an AIV passes the other AIV's flags on:
# it consumes the cube's set and sets the reply without work, and the cube waits for the owner's work only.
C2V, V2C = (CUBE2VEC, 5), (VEC2CUBE, 6)  # indexed by "the second AIV's CV block"
NEG = float(np.finfo(np.float32).min)  # -FLT_MAX (0xFF7FFFFF), the masked score
F16, F32, U8 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.uint8)
K_CHUNK = 128  # k columns per Mmad (32 KiB L0A/L0B buffers of 128 rows, fp16/bf16)
N_CHUNK = 128  # output columns per L0C buffer (128 x 128 fp32 = 64 KiB)
CMP_CHUNK = 2048  # fp16 elements per mask Cast + Compare step (basic_bn2's tiles, generic: half, to leave UB for ping-pong)
UB_BYTES = 192 * 1024  # the AIV's Unified Buffer (Atlas A2)
SFMG_ROWS = 64  # (token, head) rows per sfmg step (fewer when D is large: sfmg_rows)
SFMG_UB_BYTES = 160 * 1024  # UB the sfmg step may take (of 192 KiB)
SFT_ROWS = 128  # S1s2Bn2 softmax-grad rows per step at most (CANN: SFTBaseM = 8192 / D rows; npusim: one S buffer)
L1_COLS = 256  # operand columns per L1 block when D > 256 (four 128 x 256 b16 blocks + P, dS fit 512 KiB L1)


def mask_s2_base(cols: int) -> int:
    """The column clamp of a pass's compressed-mask window (causal_tile_offset): 128, or 256 for a wider tile."""
    return -(-cols // BASE) * BASE


def sfmg_rows(dp: int, itemsize: int) -> int:
    """Rows per VecSftg step: 64, or fewer so that dy, attention_in (input dtype), their fp32 copies and the fold
    accumulators of the rows fit SFMG_UB_BYTES (D > 144)."""
    per_row = dp * (2 * itemsize + 8) + 64 * 4 + 4 + 32
    return max(8, min(SFMG_ROWS, SFMG_UB_BYTES // per_row) // 8 * 8)


def bn2_sft_rows(tiling: FagTilingData) -> int:
    """Deterministic S1s2Bn2: the rows of a CV block whose softmax-grad rows are computed before their vector work
    (SFTSingleM = min(256, singleM), SFTBaseMDSplit, ..._tiling_s1s2_bn2.cpp)."""
    return min(256, tiling.s1CvInner)


def l1_cols(D: int, Dr: int, itemsize: int = 2) -> int:
    """Columns of one L1 operand block: all of D (and the rope width) up to 256 (fp32: 128), else blocks of that."""
    limit = L1_COLS * 2 // itemsize
    return max(c16(D), c16(Dr)) if max(D, Dr) <= limit else limit
POST_ELEMS = 8192  # fp32 elements per post-kernel step
ADD_ELEMS = BASE * BASE // 2  # fp32 elements per IS_DTM reduction step (the S and dP buffers of ComputeVec)


def dtm_strip(tiling: FagTilingData, kind: str, s1o: int, s2o: int) -> tuple[int, int]:
    """IS_DTM partial slot layout (fp32 elements): dq [s1CvInner, D], dk and dv [s2CvInner, D], dq_rope
    [s1CvInner, Dr], dk_rope [s2CvInner, Dr]; (offset of *kind*'s region, row of the strip in it)."""
    t = tiling
    s1, s2, D, Dr = t.s1CvInner, t.s2CvInner, t.dSize, t.ropeD
    offs = {"dq": 0, "dk": s1 * D, "dv": (s1 + s2) * D, "dq_rope": (s1 + 2 * s2) * D,
            "dk_rope": (s1 + 2 * s2) * D + s1 * Dr}
    if kind in ("dq", "dq_rope"):
        return offs[kind], (s1o * BASE) % s1
    return offs[kind], (s2o * BASE) % s2


def dtm_slot(tiling: FagTilingData, core: int, task: int) -> int:
    """Byte offset of the partial slot core *core* writes for its task *task*: SameAB keeps two per core (task
    parity); basic_det one (its cube waits for the round's reduction before it writes the next partials)."""
    t = tiling
    return t.dtmOffset + (core if t.dtmBasic else core * 2 + task % 2) * t.dtmSlotBytes


def strip_dst(tiling: FagTilingData, args, kind: str, b: int, n: int, s1o: int, s2o: int) -> int:
    """fp32 index in the workspace of the first element of block (b, n, s1o, s2o)'s strip of *kind* (dq rows of
    query head n, dk/dv rows of its key/value head)."""
    t = tiling
    q_side = kind in ("dq", "dq_rope")
    width = t.ropeD if kind.endswith("rope") else t.dSize
    base = {"dq": t.dqOffset, "dk": t.dkOffset, "dv": t.dvOffset, "dq_rope": t.dqRopeOffset,
            "dk_rope": t.dkRopeOffset}[kind] // 4
    heads, head = (t.n1Size, n) if q_side else (t.n2Size, n // t.gSize)
    tok = (args.cuQ[b] + s1o * BASE) if q_side else (args.cuKv[b] + s2o * BASE)
    return base + (tok * heads + head) * width


_ROUND_GROUPS = {"of": None, "rounds": {}}  # dtm_groups of the launch running now: (tiling, args), round -> groups


def dtm_groups(tiling: FagTilingData, args, r: int) -> list:
    """The output strips the CV blocks of round r wrote (round r: sections r * blockDim ..., section k on core
    k % blockDim): (kind, workspace fp32 index of the strip, rows, width, row pitch, the fp32 indices of the
    partials in core order). Strips are 128-row pieces of dq rows (b, n1, s1 block) and of dk/dv rows (b, n2,
    s2 block). Computed once per round of a launch (every cube asks for its round's lone strips and every AIV
    for the round's groups; the same list, read only)."""
    of = _ROUND_GROUPS["of"]
    if of is None or of[0] is not tiling or of[1] is not args:
        _ROUND_GROUPS["of"], _ROUND_GROUPS["rounds"] = (tiling, args), {}
    rounds = _ROUND_GROUPS["rounds"]
    if r not in rounds:
        rounds[r] = _round_groups(tiling, args, r)
    return rounds[r]


def _round_groups(tiling: FagTilingData, args, r: int) -> list:
    t = tiling
    D, Dr = t.dSize, t.ropeD
    kinds = ("dq", "dk", "dv") + (("dq_rope", "dk_rope") if Dr else ())
    out = {}
    for k in range(r * t.blockDim, min((r + 1) * t.blockDim, t.sections)):
        slot = dtm_slot(t, k % t.blockDim, r) // 4
        for i in range(t.secStart[k], t.secStart[k + 1]):
            b, n, s1o, s2o = t.blkB[i], t.blkN[i], t.blkS1o[i], t.blkS2o[i]
            for kind in kinds:
                width = Dr if kind.endswith("rope") else D
                q_side = kind in ("dq", "dq_rope")
                key = (kind, b, n if q_side else n // t.gSize, s1o if q_side else s2o)
                off, row = dtm_strip(t, kind, s1o, s2o)
                src = slot + off + row * width
                if key not in out:
                    heads = t.n1Size if q_side else t.n2Size
                    rows = t.blkRows[i] if q_side else t.blkCols[i]
                    out[key] = (kind, strip_dst(t, args, kind, b, n, s1o, s2o), rows, width, heads * width, [])
                if src not in out[key][-1]:  # a CV block's strip is listed once (its first block)
                    out[key][-1].append(src)
    return list(out.values())


KV_KINDS = ("dk", "dv", "dk_rope")


def det_direct(tiling: FagTilingData, args, r: int) -> set:
    """basic_det: the dk/dv strips of round r that one core alone wrote (accumNum == 1); that core's cube adds
    them into the workspace itself (atomic Fixpipe) and the AIVs skip them (cube_op_det.h, vec_op_det.h)."""
    return {g[1] for g in dtm_groups(tiling, args, r) if g[0] in KV_KINDS and len(g[5]) == 1}


def det_reduce_groups(tiling: FagTilingData, args, r: int) -> list:
    """basic_det's reduction of round r (DetVector2): dtm_groups without the strips the cubes added themselves,
    strips of one kind that continue each other in the workspace and in every writer's slot (the rows of one
    512-row region, the same writers) merged into one group, as CANN keys a group by its region."""
    out = []
    direct = det_direct(tiling, args, r)
    for g in dtm_groups(tiling, args, r):
        if g[1] in direct:
            continue
        if out:
            kind, dst, rows, width, pitch, srcs = out[-1]
            if (kind == g[0] and g[1] == dst + rows * pitch and len(srcs) == len(g[5])
                    and all(b == a + rows * width for a, b in zip(srcs, g[5]))):
                out[-1] = (kind, dst, rows + g[2], width, pitch, srcs)
                continue
        out.append(g)
    return out


def det_vec_kinds(aivs: int, v: int) -> tuple:
    """The output kinds AIV v reduces in basic_det's DetVector2: dq on AIVs 0-15, dk on 16-31, dv on 32-47 with 48
    AIVs (else 16-31 with dk); the rope outputs with their kind. Fewer than 32 AIVs (a blockDim override; CANN
    always launches every core): SameAB's thirds. Returns (kinds, AIVs sharing them, this AIV's index among them)."""
    if aivs < 32:
        return sab_vec_kinds(aivs, v)
    dv_start = 32 if aivs == 48 else 16
    kinds = (("dq", "dq_rope") if v < 16 else ()) + (("dk", "dk_rope") if 16 <= v < 32 else ()) + \
        (("dv",) if dv_start <= v < dv_start + 16 else ())
    return kinds, 16, v % 16


def sab_vec_kinds(aivs: int, v: int) -> tuple:
    """The output kinds AIV v reduces in SameAB IS_DTM's ComputeVecAdd: dq (with dq_rope), dk (with dk_rope) and dv
    on a third of the AIVs each, every kind on every AIV when there are fewer than 3. Returns (kinds, AIVs sharing
    them, this AIV's index among them)."""
    third = aivs // 3
    groups = (("dq", "dq_rope"), ("dk", "dk_rope"), ("dv",))
    if not third:
        return tuple(k for g in groups for k in g), aivs, v
    return (groups[v // third] if v < 3 * third else ()), third, v % third


@dataclass(frozen=True)
class FagKernelArgs:
    """Per-call constants besides the tiling (host control data)."""

    cuQ: tuple
    cuKv: tuple
    nextLU: tuple
    preLU: tuple
    maskForm: str  # none | full ([maxSq, maxSkv], sparse 0/1) | causal_2048 (2/3/4/7/8)
    maskCols: int
    softmaxTnd: bool  # softmax_max/sum as [T1, N1, 8] ("same_as_input"), else per-batch [N1, Sq, 8]
    seqQ: tuple
    masked: bool  # a compressed causal atten_mask is read for the flagged blocks
    inDtype: np.dtype
    sink: bool = False  # sink_in given: dsink partials per (block, AIV), SameAB per (CV block, AIV)
    pseForm: str = "none"  # none | alibi (pse_type 0/1, [Bp, N1, 1024, maxSkv]) | slope (2/3, [B, N1] or [N1])
    pseType: int = 1  # 1: (S + pse) * scale; 0, 2, 3: S * scale + pse
    pseB: int = 1  # alibi: Bp (batch b reads b % Bp); slope: rows of the slope tensor (1 for [N1])
    pseS2: int = 0  # alibi: maxSkv (the tensor's last dim)
    qStart: int = 0
    kvStart: int = 0
    dropout: bool = False
    cuSS: tuple = ()  # sum of Sq * Skv over the earlier batches (drop mask bit offsets)
    seqKv: tuple = ()
    prefixN: tuple = ()  # sparse 6


# ------------------------------------------------------------------------------------------- pre / post
def fag_pre(workspace, tiling: FagTilingData):
    """Zero-fill the dq/dk/dv fp32 workspaces (512-byte aligned regions), split over the AIVs; with SameAB's sink,
    AIV k also zeroes N1 fp32 of the dsink partials from k N1 (CANN ..._pre.h:419-424)."""
    pipe = TPipe()
    zeros = TBuf()
    pipe.InitBuffer(zeros, POST_ELEMS * 4)
    z = zeros.Get(F32)
    Duplicate(z, 0.0, POST_ELEMS)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    total = tiling.copyBytes // 4
    ws = workspace[tiling.dqOffset].ReinterpretCast(F32)
    share = -(-total // (GetBlockNum() * 8)) * 8
    lo = GetBlockIdx() * share
    for e0 in range(lo, min(lo + share, total), POST_ELEMS):
        DataCopy(ws[e0], z, min(POST_ELEMS, lo + share - e0, total - e0))
    n1 = tiling.n1Size
    if tiling.dsinkCores and GetBlockIdx() < tiling.dsinkCores:
        CopyRowsOut(workspace[tiling.dsinkOffset].ReinterpretCast(F32)[GetBlockIdx() * n1], z, 1, n1, n1, n1)
    pipe.Reset()


def fag_post(workspace, dq, dk, dv, dsink, dqRope, dkRope, tiling: FagTilingData, args: FagKernelArgs):
    """dq = cast(dq_ws * scale), dk = cast(dk_ws * scale), dv = cast(dv_ws) (CAST_ROUND), split over AIVs.
    With a sink, SameAB: then the AIVs reduce their heads' [AIVs] partials (PostDsinkSab); the half-block
    templates: first AIV 0 sums each head's partials in slot order (sink_slots), dsink = -sum."""
    if args.sink and GetBlockIdx() == 0 and not tiling.dsinkCores:
        PostDsink(workspace, dsink, tiling)
    dt = np.dtype(args.inDtype)
    pipe = TPipe()
    inQ, outQ = TQue(TPosition.VECIN, 2), TQue(TPosition.VECOUT, 2)
    pipe.InitBuffer(inQ, 2, POST_ELEMS * 4)
    pipe.InitBuffer(outQ, 2, POST_ELEMS * dt.itemsize)
    outs = [(dq, tiling.dqOffset, True), (dk, tiling.dkOffset, True), (dv, tiling.dvOffset, False)]
    if tiling.ropeD:
        outs += [(dqRope, tiling.dqRopeOffset, True), (dkRope, tiling.dkRopeOffset, True)]
    for gm, off, scaled in outs:
        total = gm.GetSize()
        share = -(-total // GetBlockNum())
        lo = GetBlockIdx() * share
        for e0 in range(lo, min(lo + share, total), POST_ELEMS):
            n = min(POST_ELEMS, lo + share - e0, total - e0)
            PostChunk((inQ, outQ), workspace[off].ReinterpretCast(F32)[e0], gm[e0], n,
                      tiling.scaleValue if scaled else None, dt)
    pipe.Reset()
    if args.sink and tiling.dsinkCores:
        PostDsinkSab(workspace, dsink, tiling)


def PostChunk(queues, src, dst, n: int, scale, dt):
    """One post step: dst[:n] = cast(src[:n] * scale) (no scale: the fp32 sum itself), src the fp32 workspace."""
    inQ, outQ = queues
    x = inQ.AllocTensor(F32)
    CopyRowsIn(x, src, 1, n, n, -(-n // 8) * 8)
    inQ.EnQue(x)
    x = inQ.DeQue(F32)
    if scale is not None:
        Muls(x, x, scale, n)
        PipeBarrier(Pipe.V)
    y = outQ.AllocTensor(dt)
    if dt.itemsize == 4:  # fp32 outputs: the fp32 sum itself
        Copy(y, x, 64, -(-n // 64), CopyRepeatParams(1, 1, 8, 8))
    else:
        Cast(y, x, RoundMode.CAST_ROUND, n)
    inQ.FreeTensor(x)
    outQ.EnQue(y)
    y = outQ.DeQue(dt)
    CopyRowsOut(dst, y, 1, n, -(-n // 16) * 16, n)
    outQ.FreeTensor(y)


def sink_slots(tiling: FagTilingData):
    """(slot, head) of every dsink partial of the half-block templates (basic_det), in the order PostDsink adds them:
    one per block and AIV half, in block order (sub 1 exists when the block has >= 2 rows). SameAB's are CANN's
    [N1, AIVs] partials instead (SinkOut, PostDsinkSab)."""
    t = tiling
    return [(i * 2 + sub, t.blkN[i]) for i in range(t.blocks) for sub in (0, 1) if sub == 0 or t.blkRows[i] >= 2]


def PostDsinkSab(workspace, dsink, tiling: FagTilingData):
    """SameAB's dsink as CANN's post kernel reduces it (ReduceDsinkSum, cannmirror/ops-transformer 8d2ad255
    arch22/..._post.h:1070-1106), after dq/dk/dv: the heads split over the AIVs (ceil(N1 / AIVs) each), per step
    dsinkStepHeads heads' [AIVs] partial rows copied in, each row summed (ReduceSum pattern AR: for 9 to 64 AIVs,
    fag_tiling's range, one WholeReduceSum per row), times -1, copied out to dsink."""
    t = tiling
    cores, n1 = t.dsinkCores, t.n1Size
    per = -(-n1 // cores)
    first = GetBlockIdx() * per
    mine = min(n1 - first, per)
    if mine <= 0:
        return
    pitch = -(-cores // 8) * 8
    pipe = TPipe()
    vin, vout = TBuf(), TBuf()
    pipe.InitBuffer(vin, t.dsinkStepHeads * pitch * 4)
    pipe.InitBuffer(vout, -(-t.dsinkStepHeads // 8) * 32)
    x, out = vin.Get(F32), vout.Get(F32)
    ws = workspace[t.dsinkOffset].ReinterpretCast(F32)
    PipeBarrier(None)  # the post loop's last copies out read these UB bytes
    for h0 in range(first, first + mine, t.dsinkStepHeads):
        heads = min(t.dsinkStepHeads, first + mine - h0)
        if cores == pitch:  # the heads' rows lie pitch apart in GM already
            DataCopyPad(x, ws[h0 * cores], DataCopyExtParams(1, heads * cores * 4, 0, 0, 0))
        else:  # each row padded to pitch, where WholeReduceSum reads it (CANN's ReduceSum AR pads an unaligned axis)
            CopyRowsIn(x, ws[h0 * cores], heads, cores, cores, pitch)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        WholeReduceSum(out, x, cores, heads, 1, 1, pitch // 8)
        PipeBarrier(Pipe.V)
        Muls(out, out, -1.0, heads)
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
        CopyRowsOut(dsink[h0], out, 1, heads, -(-heads // 8) * 8, heads)
        SetFlag(HardEvent.MTE3_V, 0)
        WaitFlag(HardEvent.MTE3_V, 0)
        SetFlag(HardEvent.MTE3_MTE2, 0)
        WaitFlag(HardEvent.MTE3_MTE2, 0)
    pipe.Reset()


def PostDsink(workspace, dsink, tiling: FagTilingData):
    pipe = TPipe()
    slots, acc = TBuf(), TBuf()
    chunk = 512  # partials per load
    pipe.InitBuffer(slots, chunk * 32)
    pipe.InitBuffer(acc, 32)
    ws = workspace[tiling.dsinkOffset].ReinterpretCast(F32)
    order = sink_slots(tiling)
    a = acc.Get(F32)
    for n in range(tiling.n1Size):
        Duplicate(a, 0.0, 8)
        PipeBarrier(Pipe.V)
        mine = [slot for slot, head in order if head == n]
        for c0 in range(0, len(mine), chunk):
            part = mine[c0:c0 + chunk]
            s = slots.Get(F32)
            SetFlag(HardEvent.V_MTE2, 0)
            WaitFlag(HardEvent.V_MTE2, 0)
            for k, slot in enumerate(part):
                DataCopy(s[k * 8], ws[slot * 8], 8)
            SetFlag(HardEvent.MTE2_V, 0)
            WaitFlag(HardEvent.MTE2_V, 0)
            for k in range(len(part)):
                Add(a, a, s[k * 8], 8)
                PipeBarrier(Pipe.V)
        Muls(a, a, -1.0, 8)
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
        CopyRowsOut(dsink[n], a, 1, 1, 8, 1)
        SetFlag(HardEvent.MTE3_V, 0)
        WaitFlag(HardEvent.MTE3_V, 0)
    # the post loop's first CopyIn (MTE2) reuses these UB bytes: wait for the last Adds (V) reading the
    # partials and the last dsink CopyOut (MTE3) reading the sum
    SetFlag(HardEvent.V_MTE2, 0)
    WaitFlag(HardEvent.V_MTE2, 0)
    SetFlag(HardEvent.MTE3_MTE2, 0)
    WaitFlag(HardEvent.MTE3_MTE2, 0)
    pipe.Reset()


# ------------------------------------------------------------------------------------------- main kernel
class KernelFagBasic:
    def Init(self, query, key, value, dy, attentionIn, softmaxMax, softmaxSum, attenMask, sinkIn, queryRope,
             keyRope, pseShift, dropMask, workspace, tiling: FagTilingData, args: FagKernelArgs):
        self.sinkGm, self.qrGm, self.krGm = sinkIn, queryRope, keyRope
        self.pseGm, self.dropGm = pseShift, dropMask
        self.dropBytesGm = workspace[tiling.dropBytesOffset] if args.dropout and not tiling.dropMaskBitMode else None
        self.alibiGm = workspace[tiling.alibiOffset].ReinterpretCast(F16) if args.pseForm == "slope" else None
        self.b32 = np.dtype(args.inDtype).itemsize == 4
        if self.b32:  # fp32: Q^T, K^T, dY^T per head in GM, and per core P^T / dS^T section buffers
            self.qT, self.kT, self.dyT = (workspace[o].ReinterpretCast(F32) for o in
                                          (tiling.qTOffset, tiling.kTOffset, tiling.dyTOffset))
        self.Dr = tiling.ropeD
        self.t, self.a = tiling, args
        self.qGm, self.kGm, self.vGm, self.dyGm, self.oGm = query, key, value, dy, attentionIn
        self.maxGm, self.sumGm, self.maskGm = softmaxMax, softmaxSum, attenMask
        self.inDt = np.dtype(args.inDtype)
        self.D = tiling.dSize
        self.core = GetBlockIdx() if ASCEND_IS_AIC() else GetBlockIdx() // 2
        self.ws = workspace
        self.dqWs = workspace[tiling.dqOffset].ReinterpretCast(F32)
        self.dkWs = workspace[tiling.dkOffset].ReinterpretCast(F32)
        self.dvWs = workspace[tiling.dvOffset].ReinterpretCast(F32)
        self.dqrWs = workspace[tiling.dqRopeOffset].ReinterpretCast(F32)
        self.dkrWs = workspace[tiling.dkRopeOffset].ReinterpretCast(F32)
        self.sfmgWs = workspace[tiling.sfmgOffset].ReinterpretCast(F32)
        sec = tiling.mmSectionBytes
        base = tiling.mmOffset + self.core * 4 * sec
        self.mm1 = [base + i * sec for i in range(2)]  # dP, then dS (byte offsets)
        self.mm2 = [base + (2 + i) * sec for i in range(2)]  # S, then P
        tbase = tiling.mmTOffset + self.core * 4 * sec
        self.mmT = [[tbase + (2 * k + i) * sec for i in range(2)] for k in range(2)]  # fp32: P^T, dS^T
        self.steps = tiling.core_steps(self.core)  # per ring step: (section, first slot block, owning AIV)
        # P / dS rows overwrite the first half of their own fp32 S / dP rows (pitch BASE fp32 = 512 bytes), so
        # each AIV's writes stay inside the rows it has read (CANN copyOutOffset = 2 x the fp32 offset)
        self.cast_pitch = BASE * 4 // self.inDt.itemsize
        self.ndLayout = {}  # section -> (fp32 row pitch, block columns) of its S / dP ND matrix, (0, 0): per block
        self.pipe = TPipe()

    def Process(self):
        if ASCEND_IS_AIC():
            self.ProcessCube()
        else:
            if self.a.pseForm == "slope" and GetBlockIdx() == 0:
                PseInnerAlibiCreate(self.alibiGm)
            if self.a.dropout and not self.t.dropMaskBitMode:
                DropMaskAdapter(self.dropGm, self.dropBytesGm, self.t.dropAdapterBits)
            if self.b32:  # the cube reads Q, K, dY as B^T of dK, dQ, dV: transposed copies (ops/common/transpose.py)
                t, w = self.t, self.t.sfmgWorkers
                TransposeHeads(self.qGm, self.qT, t.t1Size, t.n1Size, self.D, t.t1Pitch, w)
                TransposeHeads(self.kGm, self.kT, t.t2Size, t.n2Size, self.D, t.t2Pitch, w)
                TransposeHeads(self.dyGm, self.dyT, t.t1Size, t.n1Size, self.D, t.t1Pitch, w)
            if self.t.template == "basic_bn2":  # its softmax-grad rows come per CV block (SoftmaxGradCv)
                SyncAll()
            elif not self.t.tndS1PP:  # TND_S1_PP: per tile, beside it (SfmgTile); no prologue, no SyncAll
                self.VecSftg()
            self.ProcessVector()

    def _blk(self, i: int):
        t = self.t
        return t.blkB[i], t.blkN[i], t.blkS1o[i], t.blkS2o[i], t.blkRows[i], t.blkCols[i], t.blkMasked[i]

    def _slot(self, region: list, task: int, j: int, dtype):
        """Block j of the task's section buffer (fp32 block pitch BASE x BASE) as a GM tensor of *dtype*."""
        return self.ws[region[task % 2] + j * BASE * BASE * 4].ReinterpretCast(dtype)

    def _nd_layout(self, s: int) -> tuple[int, int]:
        """Section s's ND (row pitch, block columns) (vectiles.nd_layout; pitch 0: per block), computed once: the
        cube and the strips place every block of the section with it."""
        if s not in self.ndLayout:
            self.ndLayout[s] = nd_layout(self.t, s)
        return self.ndLayout[s]

    def _nd(self, s: int) -> int:
        """Section s's ND row pitch (vectiles.cv_pitch; 0: per block)."""
        return self._nd_layout(s)[0]

    def _block_at(self, region: list, task: int, s: int, off: int, k: int, dtype):
        """(GM tensor of *dtype* at the first element of section s's k-th block in the task's buffer, its row pitch in
        *dtype* elements): in the CV block's ND matrix at slot off (CANN's layout, cv_pitch), else slot off + k.
        16-bit P / dS rows overwrite the first half of their fp32 rows (pitch twice the fp32 one)."""
        r = 4 // dtype.itemsize
        nd, nc = self._nd_layout(s)
        if not nd:
            return self._slot(region, task, off + k, dtype), BASE * r
        return self._slot(region, task, off, dtype)[k // nc * BASE * nd * r + k % nc * BASE], nd * r

    # ---------------------------------------------------------------------------------------- cube
    def ProcessCube(self):
        dt, D = self.inDt, self.D
        isz = dt.itemsize
        dp = l1_cols(D, self.Dr, isz)
        self.l1w = dp
        self.kChunk = K_CHUNK * 2 // isz  # fp32: 64 k columns fill a 32 KiB L0A/L0B buffer of 128 rows
        self.tiles = CubeTiles(self.pipe, dt)
        self.l1 = {}
        for name, pos, nbytes in (("a", TPosition.A1, BASE * dp * isz), ("b", TPosition.B1, BASE * dp * isz),
                                  ("c", TPosition.A1, BASE * dp * isz), ("d", TPosition.B1, BASE * dp * isz),
                                  ("p", TPosition.A1, BASE * BASE * isz), ("s", TPosition.A1, BASE * BASE * isz)):
            q = TQue(pos, 1)
            self.pipe.InitBuffer(q, 1, nbytes)
            self.l1[name] = q
        self.cQue = TQue(TPosition.CO1, 2)
        self.pipe.InitBuffer(self.cQue, 2, BASE * N_CHUNK * 4)
        n = len(self.steps)
        for task in range(n):  # basic: Cube1 / Cube23; SameAB: ComputeMM1 / ComputeMMDqkv, the same ring
            for s, off, v in self.steps[task]:  # generic: a CV block of each AIV's own run
                self.Cube1(task, s, off)
                CrossCoreSetFlag(C2V[v == 1], Pipe.FIX)
            if task >= 1:
                self.WaitAndCube23(task - 1)
        if n:
            self.WaitAndCube23(n - 1)

    def WaitAndCube23(self, task: int):
        for s, off, v in self.steps[task]:  # one section, or (generic) a CV block of each AIV
            CrossCoreWaitFlag(V2C[v == 1])
            if self.t.dtmBasic and task >= 1:  # the single partial slot: wait until round task - 1 is reduced
                CrossCoreWaitFlag(DET2CUBE)
            if self.t.template == "basic":
                self.Cube23(task, s)
            elif self.b32:
                self.ComputeMMDqkvT(task, s, off)
            else:
                self.ComputeMMDqkv(task, s, off)
        if self.t.sabDtm:
            CrossCoreSetFlag(CUBE2ADD, Pipe.FIX)

    def _load(self, name: str, src, rows: int, cols: int, src_pitch: int):
        """GM rows x cols (row pitch *src_pitch*) -> L1 NZ (rows padded to 16) in queue *name*."""
        q = self.l1[name]
        x = q.AllocTensor(self.inDt)
        DataCopy(x, src, Nd2NzParams(1, rows, cols, 0, src_pitch, c16(rows), 1, 0))
        q.EnQue(x)
        return q.DeQue(self.inDt)

    def _free(self, name: str, x):
        self.l1[name].FreeTensor(x)

    def _mm_abt(self, dst, parts, m: int, n: int, dst_pitch: int):
        """dst (GM fp32, row pitch *dst_pitch*) = sum over *parts* of A B^T, one L0C accumulation; each part is
        (load_a, load_bt, k): callables loading A (m x k) and B^T (n x k) into L1 NZ; n <= 128."""
        c = self.cQue.AllocTensor(F32)
        first = True
        for load_a, load_bt, k in parts:
            (qa, aL1), (qb, bTL1) = load_a(), load_bt()
            for kc in range(0, k, self.kChunk):
                kcols = min(self.kChunk, k - kc)
                self.tiles.SplitA(aL1, c16(m) // 16, 0, m, kc, kcols)
                self.tiles.SplitBTransposed(bTL1, c16(n) // 16, kc, kcols)
                self.tiles.Compute(c, m, n, kcols, first)
                first = False
            self._free(qa, aL1)
            self._free(qb, bTL1)
        self.cQue.EnQue(c)
        c = self.cQue.DeQue(F32)
        Fixpipe(dst, c, FixpipeParamsV220(nSize=n, mSize=m, srcStride=c16(m), dstStride=dst_pitch))
        self.cQue.FreeTensor(c)

    def _split_a_transposed(self, xL1, xrows: int, xcols: int):
        """L0A <- X^T for X (xrows x xcols) in L1 NZ: one transposing load of every fractal (b16)."""
        aL0 = self.tiles.aQue.AllocTensor(self.inDt)
        blocks = (c16(xrows) // 16) * (c16(xcols) // 16)
        LoadData(aL0, xL1, LoadData2DParams(repeatTimes=blocks, srcStride=1, ifTranspose=True))
        self.tiles.aQue.EnQue(aL0)

    def _mm_ab_atomic(self, dst, a_load, bL1, brows: int, m: int, D: int, dst_pitch: int):
        """dst (GM fp32) += A B per 128 columns of D: *a_load()* fills L0A with A (m x brows); B (brows x D) in
        L1 NZ. Fixpipe adds atomically (SetAtomicAdd in force)."""
        for dn in range(0, D, N_CHUNK):
            dcols = min(N_CHUNK, D - dn)
            c = self.cQue.AllocTensor(F32)
            a_load()
            self.tiles.SplitB(bL1[(dn // 16) * c16(brows) * 16], c16(brows) // 16, brows, dcols)
            self.tiles.Compute(c, m, dcols, brows, True)
            self.cQue.EnQue(c)
            c = self.cQue.DeQue(F32)
            Fixpipe(dst[dn], c, FixpipeParamsV220(nSize=dcols, mSize=m, srcStride=c16(m), dstStride=dst_pitch))
            self.cQue.FreeTensor(c)

    def _mm_ab_chunks(self, que: str, gm, ws, a_load, brows: int, m: int, width: int, pitch: int, dst_pitch: int):
        """ws (GM fp32) += A B for B = gm (brows x width, row pitch *pitch*), loaded into L1 queue *que* l1w
        columns at a time; the Fixpipes go out per 128 columns in column order either way."""
        for c0 in range(0, width, self.l1w):
            w = min(self.l1w, width - c0)
            bL1 = self._load(que, gm[c0], brows, w, pitch)
            self._mm_ab_atomic(ws[c0], a_load, bL1, brows, m, w, dst_pitch)
            self._free(que, bL1)

    def _rows(self, b: int, n: int, s1o: int, s2o: int):
        """GM offsets of the block's Q/dY rows and K/V rows (first element)."""
        t, a, D = self.t, self.a, self.D
        q = (a.cuQ[b] + s1o * BASE) * t.n1Size * D + n * D
        kv = (a.cuKv[b] + s2o * BASE) * t.n2Size * D + (n // t.gSize) * D
        return q, kv

    def Cube1(self, task: int, s: int, off: int):
        t = self.t
        nd, nc = self._nd_layout(s)
        for j, i in enumerate(range(t.secStart[s], t.secStart[s + 1])):
            if nd:  # into the CV block's ND matrix at slot off
                self.Cube1Block(task, off, i, nd_block(j, nd, nc), nd)
            else:
                self.Cube1Block(task, off + j, i)

    def Cube1Block(self, task: int, j: int, i: int, at: int = 0, pitch: int = BASE):
        """S = Q K^T (rope: + Q_rope K_rope^T) and dP = dY V^T of block i into slot j of the task's buffers, from fp32
        element *at* at row pitch *pitch* (a CV block's ND matrix; default: the block's own slot)."""
        t, D, Dr = self.t, self.D, self.Dr
        n1p, n2p = t.n1Size * D, t.n2Size * D
        b, n, s1o, s2o, rows, cols, _ = self._blk(i)
        qo, kvo = self._rows(b, n, s1o, s2o)
        # D in L1 blocks of l1w columns (all of D up to 256); the k range accumulates in one L0C
        parts = [self._part("a", "b", self.qGm[qo + c0], self.kGm[kvo + c0], rows, cols, min(self.l1w, D - c0),
                            n1p, n2p) for c0 in range(0, D, self.l1w)]
        if Dr:  # S = [Q | Q_rope] [K | K_rope]^T: the rope part continues the same accumulation
            qro, kro = qo // D * Dr, kvo // D * Dr
            parts += [self._part("a", "b", self.qrGm[qro + c0], self.krGm[kro + c0], rows, cols,
                                 min(self.l1w, Dr - c0), t.n1Size * Dr, t.n2Size * Dr)
                      for c0 in range(0, Dr, self.l1w)]
        self._mm_abt(self._slot(self.mm2, task, j, F32)[at], parts, rows, cols, pitch)
        self._mm_abt(self._slot(self.mm1, task, j, F32)[at],
                     [self._part("c", "d", self.dyGm[qo + c0], self.vGm[kvo + c0], rows, cols,
                                 min(self.l1w, D - c0), n1p, n2p) for c0 in range(0, D, self.l1w)],
                     rows, cols, pitch)

    def _part(self, qa: str, qb: str, a_gm, b_gm, rows: int, cols: int, k: int, a_pitch: int, b_pitch: int):
        """One k range of an A B^T accumulation: loaders of A (rows x k) and B^T (cols x k) into L1 queues qa, qb."""
        # (load A, load B^T, k), keeping its operands for _mm_abt's replay key (_Part, below the kernel)
        return _Part(self, qa, qb, a_gm, b_gm, rows, cols, k, a_pitch, b_pitch)

    def Cube23(self, task: int, s: int):
        if self.b32:
            self.Cube23T(task, s)
            return
        t, D, Dr = self.t, self.D, self.Dr
        SetAtomicAdd(F32)
        for j, i in enumerate(range(t.secStart[s], t.secStart[s + 1])):
            self.Cube23Block(task, j, i)
        SetAtomicNone()

    def Cube23Block(self, task: int, j: int, i: int):
        """dQ += dS K, dK += dS^T Q, dV += P^T dY of block i (slot j of the task's buffers), atomic adds in force."""
        t, D, Dr = self.t, self.D, self.Dr
        b, n, s1o, s2o, rows, cols, _ = self._blk(i)
        qo, kvo = self._rows(b, n, s1o, s2o)
        qro, kro = qo // D * Dr, kvo // D * Dr
        dsL1 = self._load("s", self._slot(self.mm1, task, j, self.inDt), rows, cols, self.cast_pitch)
        ds_a = lambda: self.tiles.SplitA(dsL1, c16(rows) // 16, 0, rows, 0, cols)  # noqa: E731
        dst_a = lambda: self._split_a_transposed(dsL1, rows, cols)  # noqa: E731
        for gm, ws, width, pitch in ((self.kGm[kvo], self.dqWs[qo], D, t.n2Size * D),
                                     *(((self.krGm[kro], self.dqrWs[qro], Dr, t.n2Size * Dr),) if Dr else ())):
            self._mm_ab_chunks("b", gm, ws, ds_a, cols, rows, width, pitch, t.n1Size * width)
        for gm, ws, width, pitch in ((self.qGm[qo], self.dkWs[kvo], D, t.n1Size * D),
                                     *(((self.qrGm[qro], self.dkrWs[kro], Dr, t.n1Size * Dr),) if Dr else ())):
            self._mm_ab_chunks("a", gm, ws, dst_a, rows, cols, width, pitch, t.n2Size * width)
        self._free("s", dsL1)
        pL1 = self._load("p", self._slot(self.mm2, task, j, self.inDt), rows, cols, self.cast_pitch)
        self._mm_ab_chunks("c", self.dyGm[qo], self.dvWs[kvo], lambda: self._split_a_transposed(pL1, rows, cols),
                           rows, cols, D, t.n1Size * D, t.n2Size * D)
        self._free("p", pL1)

    def Cube23T(self, task: int, s: int):
        """fp32 (no b32 transposing loads): dQ += dS (K^T)^T, dK += (dS^T) (Q^T)^T, dV += (P^T) (dY^T)^T, each an
        A B^T product per 128 columns of D with A from the section buffers (dS; dS^T and P^T written by the
        AIVs) and B^T from the transposed copies; Fixpipes add atomically as in Cube23."""
        t, D = self.t, self.D
        SetAtomicAdd(F32)
        for j, i in enumerate(range(t.secStart[s], t.secStart[s + 1])):
            b, n, s1o, s2o, rows, cols, _ = self._blk(i)
            qo, kvo = self._rows(b, n, s1o, s2o)
            tq, tk, kvh = self.a.cuQ[b] + s1o * BASE, self.a.cuKv[b] + s2o * BASE, n // t.gSize
            ds, dsT, pT = (self._slot(reg, task, j, F32) for reg in (self.mm1, self.mmT[1], self.mmT[0]))
            for dn in range(0, D, N_CHUNK):
                w = min(N_CHUNK, D - dn)
                self._mm_abt(self.dqWs[qo + dn], [self._part("s", "b", ds, self.kT[(kvh * D + dn) * t.t2Pitch + tk],
                                                             rows, w, cols, BASE, t.t2Pitch)], rows, w, t.n1Size * D)
            for dn in range(0, D, N_CHUNK):
                w = min(N_CHUNK, D - dn)
                self._mm_abt(self.dkWs[kvo + dn], [self._part("s", "a", dsT, self.qT[(n * D + dn) * t.t1Pitch + tq],
                                                              cols, w, rows, BASE, t.t1Pitch)], cols, w, t.n2Size * D)
            for dn in range(0, D, N_CHUNK):
                w = min(N_CHUNK, D - dn)
                self._mm_abt(self.dvWs[kvo + dn], [self._part("p", "c", pT, self.dyT[(n * D + dn) * t.t1Pitch + tq],
                                                              cols, w, rows, BASE, t.t1Pitch)], cols, w, t.n2Size * D)
        SetAtomicNone()

    # ------------------------------------------------------------------------------- SameAB cube (dQ, dK, dV)
    def _strips(self, s: int, off: int):
        """The CV block's blocks as (slot block j, i) grouped into dQ strips (same s1 block, by s2 block) and dK/dV
        strips (same s2 block, by s1 block), each strip's parts in the order their k ranges accumulate."""
        t = self.t
        blocks = [(off + j, i) for j, i in enumerate(range(t.secStart[s], t.secStart[s + 1]))]
        rows = {}
        cols = {}
        for j, i in blocks:
            rows.setdefault(t.blkS1o[i], []).append((j, i))
            cols.setdefault(t.blkS2o[i], []).append((j, i))
        return [rows[k] for k in sorted(rows)], [cols[k] for k in sorted(cols)]

    def _sab_dst(self, kind: str, task: int, i: int, width: int):
        """(GM fp32 destination of block i's strip of *kind*, its row pitch, whether this strip alone switches
        atomic adds on): the dq/dk/dv workspace (atomic adds), or with IS_DTM the strip's rows in this core's
        partial slot (SameAB: of the task's parity); basic_det's dk/dv strips with no other writer in the
        round go to the workspace with an atomic add (det_direct)."""
        t, a = self.t, self.a
        b, n, s1o, s2o = t.blkB[i], t.blkN[i], t.blkS1o[i], t.blkS2o[i]
        if t.sabDtm:
            if t.dtmBasic and kind in KV_KINDS:
                idx = strip_dst(t, a, kind, b, n, s1o, s2o)
                if idx in self.direct:
                    heads = t.n2Size
                    return self.ws[0].ReinterpretCast(F32)[idx], heads * width, True
            off, row = dtm_strip(t, kind, s1o, s2o)
            base = dtm_slot(t, self.core, task)
            return self.ws[base].ReinterpretCast(F32)[off + row * width], width, False
        return (*self._sab_dst_ws(kind, b, n, s1o, s2o), False)

    def _sab_dst_ws(self, kind: str, b: int, n: int, s1o: int, s2o: int):
        """(the strip's first element in the dq/dk/dv (rope) workspace, its row pitch)."""
        t, D, Dr = self.t, self.D, self.Dr
        qo, kvo = self._rows(b, n, s1o, s2o)
        return {"dq": (self.dqWs[qo], t.n1Size * D), "dk": (self.dkWs[kvo], t.n2Size * D),
                "dv": (self.dvWs[kvo], t.n2Size * D),
                "dq_rope": (self.dqrWs[qo // D * Dr] if Dr else None, t.n1Size * Dr),
                "dk_rope": (self.dkrWs[kvo // D * Dr] if Dr else None, t.n2Size * Dr)}[kind]

    def _bn2_first(self, kind: str, i: int) -> bool:
        """Deterministic S1s2Bn2: whether the strip of block i's CV block is the first write of its rows, which the
        kernel makes without atomics (S1Ratio: kvAtomic = 0 for dK/dV of the pair's first query head and first S1
        CV block, qAtomic = 0 for dQ of the first S2 CV block; the loop runs query head, S2 CV block, S1 CV block,
        so those come first; a CV block the sparse mask skips writes nothing, and the next one adds)."""
        t = self.t
        if kind == "dq":
            return t.blkS2o[i] * BASE < t.s2CvInner
        return t.blkN[i] % t.gSize == 0 and t.blkS1o[i] * BASE < t.s1CvInner

    def _mm_ab_strip(self, kind: str, task: int, i0: int, parts, m: int, width: int):
        """One strip of ComputeMMDqkv into its destination (_sab_dst), atomic around it when it goes alone."""
        dst, dpitch, alone = self._sab_dst(kind, task, i0, width)
        if alone:
            SetAtomicAdd(F32)
        self._mm_ab_parts(dst, parts, m, width, dpitch)
        if alone:
            SetAtomicNone()

    def _mm_ab_parts(self, dst, parts, m: int, width: int, dst_pitch: int):
        """dst (GM fp32, row pitch *dst_pitch*) (+)= sum_j A_j B_j, one L0C accumulation per 128 columns of width.
        Part j: (A source in GM (the section slot), its rows, its columns, transposed, B in GM, k, B row pitch, A row
        pitch): A_j is the slot block (or its transpose, a transposing L1 -> L0A load), B_j the k x width rows."""
        for dn in range(0, width, N_CHUNK):
            w = min(N_CHUNK, width - dn)
            c = self.cQue.AllocTensor(F32)
            for idx, (a_src, a_rows, a_cols, trans, b_gm, k, b_pitch, a_pitch) in enumerate(parts):
                aL1 = self._load("s", a_src, a_rows, a_cols, a_pitch)
                bL1 = self._load("b", b_gm[dn], k, w, b_pitch)
                if trans:
                    self._split_a_transposed(aL1, a_rows, a_cols)
                else:
                    self.tiles.SplitA(aL1, c16(a_rows) // 16, 0, a_rows, 0, a_cols)
                self.tiles.SplitB(bL1, c16(k) // 16, k, w)
                self.tiles.Compute(c, m, w, k, idx == 0)
                self._free("s", aL1)
                self._free("b", bL1)
            self.cQue.EnQue(c)
            c = self.cQue.DeQue(F32)
            Fixpipe(dst[dn], c, FixpipeParamsV220(nSize=w, mSize=m, srcStride=c16(m), dstStride=dst_pitch))
            self.cQue.FreeTensor(c)

    def ComputeMMDqkv(self, task: int, s: int, off: int):
        """SameAB (b16): per CV block, dQ of each s1 strip = sum over its blocks of dS K, dK of each s2 strip = sum
        of dS^T Q, dV = sum of P^T dY (rope: dQ_rope, dK_rope after dQ, dK), the k range of the whole CV block in
        one L0C accumulation; Fixpipe atomic adds into the fp32 workspaces (IS_DTM: plain writes into the core's
        partial slot; basic_bn2: its first writes plain, _atomic_order)."""
        t, D, Dr = self.t, self.D, self.Dr
        row_strips, col_strips = self._strips(s, off)
        dt = self.inDt
        self.direct = det_direct(t, self.a, s // t.blockDim) if t.dtmBasic else set()
        jobs = []  # (kind, first block, parts, rows of the result, width)
        for strip in row_strips:
            i0 = strip[0][1]
            rows = t.blkRows[i0]
            for kind, gm, width, pitch in (("dq", self.kGm, D, t.n2Size * D),
                                           *((("dq_rope", self.krGm, Dr, t.n2Size * Dr),) if Dr else ())):
                parts = []
                for j, i in strip:
                    _, kvo = self._rows(t.blkB[i], t.blkN[i], t.blkS1o[i], t.blkS2o[i])
                    b_off = kvo if kind == "dq" else kvo // D * Dr
                    a_src, a_pitch = self._block_at(self.mm1, task, s, off, j - off, dt)
                    parts.append((a_src, rows, t.blkCols[i], False, gm[b_off], t.blkCols[i], pitch, a_pitch))
                jobs.append((kind, i0, parts, rows, width))
        for strip in col_strips:
            i0 = strip[0][1]
            cols = t.blkCols[i0]
            for kind, gm, width, pitch, region in (("dk", self.qGm, D, t.n1Size * D, self.mm1),
                                                   *((("dk_rope", self.qrGm, Dr, t.n1Size * Dr, self.mm1),)
                                                     if Dr else ()),
                                                   ("dv", self.dyGm, D, t.n1Size * D, self.mm2)):
                parts = []
                for j, i in strip:
                    qo, _ = self._rows(t.blkB[i], t.blkN[i], t.blkS1o[i], t.blkS2o[i])
                    b_off = qo if kind != "dk_rope" else qo // D * Dr
                    a_src, a_pitch = self._block_at(region, task, s, off, j - off, dt)
                    parts.append((a_src, t.blkRows[i], cols, True, gm[b_off], t.blkRows[i], pitch, a_pitch))
                jobs.append((kind, i0, parts, cols, width))
        jobs, plain = self._atomic_order(jobs)
        for n, (kind, i0, parts, m, width) in enumerate(jobs):
            if n == plain and not t.sabDtm:
                SetAtomicAdd(F32)
            self._mm_ab_strip(kind, task, i0, parts, m, width)
        if not t.sabDtm:
            SetAtomicNone()

    def _atomic_order(self, jobs: list):
        """(the CV block's strips in write order, how many lead without atomics). Deterministic S1s2Bn2: the first
        writes of their rows (_bn2_first) store without atomics, the rest add (S1Ratio: qAtomic / kvAtomic per
        Matmul call); npusim issues the stored strips first and then the added ones under one SetAtomicAdd, so the
        CV block's dQ/dK/dV end, as for the other templates, at one SetAtomicNone. Other templates: all add."""
        if self.t.template != "basic_bn2":
            return jobs, 0
        stored = [self._bn2_first(job[0], job[1]) for job in jobs]
        first = [job for job, st in zip(jobs, stored) if st]
        return first + [job for job, st in zip(jobs, stored) if not st], len(first)

    def ComputeMMDqkvT(self, task: int, s: int, off: int):
        """SameAB, fp32: as ComputeMMDqkv with Cube23T's operands (dS, dS^T and P^T from the section slots, K^T,
        Q^T and dY^T from the transposed copies), each strip's blocks one L0C accumulation per 128 columns."""
        t, D = self.t, self.D
        row_strips, col_strips = self._strips(s, off)
        jobs = []  # (kind, first block, [(destination, parts, m, n, pitch) per 128 columns])
        for strip in row_strips:
            i0 = strip[0][1]
            rows = t.blkRows[i0]
            dst, dpitch, _ = self._sab_dst("dq", task, i0, D)
            calls = []
            for dn in range(0, D, N_CHUNK):
                w = min(N_CHUNK, D - dn)
                parts = []
                for j, i in strip:
                    b = t.blkB[i]
                    tk, kvh = self.a.cuKv[b] + t.blkS2o[i] * BASE, t.blkN[i] // t.gSize
                    ds, ds_pitch = self._block_at(self.mm1, task, s, off, j - off, F32)  # dS: the ND matrix
                    parts.append(self._part("s", "b", ds, self.kT[(kvh * D + dn) * t.t2Pitch + tk], rows, w,
                                            t.blkCols[i], ds_pitch, t.t2Pitch))
                calls.append((dst[dn], parts, rows, w, dpitch))
            jobs.append(("dq", i0, calls))
        for strip in col_strips:
            i0 = strip[0][1]
            cols = t.blkCols[i0]
            for kind, src, region in (("dk", self.qT, self.mmT[1]), ("dv", self.dyT, self.mmT[0])):
                dst, dpitch, _ = self._sab_dst(kind, task, i0, D)
                calls = []
                for dn in range(0, D, N_CHUNK):
                    w = min(N_CHUNK, D - dn)
                    parts = []
                    for j, i in strip:
                        tq = self.a.cuQ[t.blkB[i]] + t.blkS1o[i] * BASE
                        parts.append(self._part("s", "a" if kind == "dk" else "c", self._slot(region, task, j, F32),
                                                src[(t.blkN[i] * D + dn) * t.t1Pitch + tq], cols, w, t.blkRows[i],
                                                BASE, t.t1Pitch))
                    calls.append((dst[dn], parts, cols, w, dpitch))
                jobs.append((kind, i0, calls))
        jobs, plain = self._atomic_order(jobs)
        for n, (_, _, calls) in enumerate(jobs):
            if n == plain and not t.sabDtm:
                SetAtomicAdd(F32)
            for call in calls:
                self._mm_abt(*call)
        if not t.sabDtm:
            SetAtomicNone()

    # ---------------------------------------------------------------------------------------- vector
    def VecSftg(self):
        """sfmg[t, n, :] = rowsum(fp32(dy) * fp32(attention_in)) over D, broadcast to 8; then SyncAll."""
        t, dt, D = self.t, self.inDt, self.D
        dp = c16(D)
        step = sfmg_rows(dp, dt.itemsize)
        pipe = TPipe()
        bufs = {}
        fp32 = dt.itemsize == 4
        for name, nbytes in (("dy", step * dp * dt.itemsize), ("o", step * dp * dt.itemsize),
                             ("x", step * dp * 4), ("y", 32 if fp32 else step * dp * 4), ("acc", step * 64 * 4),
                             ("row", step * 4), ("b8", step * 32)):
            bufs[name] = TBuf()
            pipe.InitBuffer(bufs[name], nbytes)
        rows_all = t.t1Size * t.n1Size
        share = -(-rows_all // (t.sfmgWorkers or GetBlockNum()))
        lo = GetBlockIdx() * share
        for r0 in range(lo, min(lo + share, rows_all), step):
            nr = min(step, lo + share - r0, rows_all - r0)
            dyL, oL = bufs["dy"].Get(dt), bufs["o"].Get(dt)
            CopyRowsIn(dyL, self.dyGm[r0 * D], nr, D, D, dp)
            CopyRowsIn(oL, self.oGm[r0 * D], nr, D, D, dp)
            SetFlag(HardEvent.MTE2_V, 0)
            WaitFlag(HardEvent.MTE2_V, 0)
            row = bufs["row"].Get(F32)
            SoftmaxGradFront(row, bufs["x"].Get(F32), bufs["y"].Get(F32), dyL, oL, bufs["acc"].Get(F32), nr, D, dp)
            b8 = bufs["b8"].Get(F32)
            BroadcastRows(b8, row, nr)
            SetFlag(HardEvent.V_MTE3, 0)
            WaitFlag(HardEvent.V_MTE3, 0)
            DataCopy(self.sfmgWs[r0 * 8], b8, nr * 8)
            SetFlag(HardEvent.MTE3_MTE2, 0)
            WaitFlag(HardEvent.MTE3_MTE2, 0)
            SetFlag(HardEvent.MTE3_V, 0)
            WaitFlag(HardEvent.MTE3_V, 0)
        SyncAll()
        pipe.Reset()

    def ProcessVector(self):
        half = -(-BASE // 2)
        self.tiled = bool(self.t.vecBaseMN or self.t.vecBaseM)  # CANN's vector tiles (else half blocks)
        rmax = VEC_ROWS_MAX if self.tiled else half  # a pass's rows at most (vector tiles: up to 128)
        bn2_tiles = self.t.template == "basic_bn2" and self.tiled
        if bn2_tiles:  # its tiles' rows (the estimate's stand-in sections still run 64-row half blocks)
            rmax = max(half, self.t.vecBaseM)
        self.cmpChunk = CMP_CHUNK // 2 if bn2_tiles or self.t.template == "generic" else CMP_CHUNK
        self.vpipe = TPipe()
        self.sub = GetSubBlockIdx()
        self.half = self.sub  # the half of a block's rows being worked on (an AIV on its own run: both)
        self.side = 0  # basic_bn2's ping-pong: the UB buffers of the ping (0) or the pong (1) tile
        self.paired = False  # a SubGrapB of a ping-pong pair (VecPair): no MTE3_V wait before its vector work
        self.ub = {}
        self.ubBytes = 0
        out_bytes = 32 if self.b32 else half * BASE * 2  # fp32: P^T / dS^T gathered into a free fp32 buffer
        self.views = {}
        sfmg8 = (("sfmg8", rmax * 32),) if self.t.template != "basic_bn2" else ()  # basic_bn2: its rows in sfmgcv
        # the ping-pong templates cast P and dS into the first half of the tile's dP buffer, as CANN's nodes do (the
        # b16 cast lands in the pse node, inside the node dP reuses, ..._s1s2_bn2.h MallocNodes / InnerT2Process)
        self.outInDp = (bn2_tiles or self.t.template == "generic") and not self.b32
        for name, nbytes in (("s", half * BASE * 4), ("dp", half * BASE * 4),
                             *((("out", out_bytes),) if not self.outInDp else ()),
                             ("max8", rmax * 32), ("sum8", rmax * 32), *sfmg8):
            self._ub_buf(name, nbytes)
        if self.outInDp:
            self.ub["out"] = self.ub["dp"]
        a = self.a
        if a.sink or a.pseForm != "none" or a.dropout:  # fp32 scratch: pse slice, dropped P, dP * P
            self._ub_buf("tmp", half * BASE * 4)
        if a.sink or self.b32:  # acc: the sink's row folds, and (fp32) the transposes' Gather offsets
            # fp32: the transposes' Gather offsets (rows x 64); the half blocks' sink row folds; a tile's ReduceSum
            self._ub_buf("acc", half * 64 * 4 if self.b32 or not self.t.vecBaseMN else 1024)
        if a.sink:
            n1 = self.t.n1Size
            rows_f32 = (("psr", half * 4 + 32), ("rowv", half * 4 + 32)) if not self.t.vecBaseMN else \
                (("dsinkSum", 32),)  # half blocks: the rows' sink probabilities and sums; tiles: dsinkSumLocal
            for name, nbytes in (("sink", -(-n1 // 8) * 32), ("ps8", rmax * 32), *rows_f32, ("one", 32),
                                 ("one8", 256)):
                self._ub_buf(name, nbytes)
            CopyRowsIn(self.ub["sink"].Get(F32), self.sinkGm, 1, n1, n1, -(-n1 // 8) * 8)
            SetFlag(HardEvent.MTE2_S, 3)
            WaitFlag(HardEvent.MTE2_S, 3)
        if a.pseForm != "none":  # the pse slice in its GM dtype (alibi: input dtype; slope: the fp16 j - i table)
            self.pseQ = TQue(TPosition.VECIN, 1)
            nbytes = half * BASE * (2 if a.pseForm == "slope" else self.inDt.itemsize)
            self.vpipe.InitBuffer(self.pseQ, 1, nbytes)
            self.ubBytes += nbytes
        if a.pseForm == "slope":
            ns = a.pseB * self.t.n1Size
            self._ub_buf("slopes", -(-ns // 8) * 32)
            CopyRowsIn(self.ub["slopes"].Get(F32), self.pseGm, 1, ns, ns, -(-ns // 8) * 8)
            SetFlag(HardEvent.MTE2_S, 4)
            WaitFlag(HardEvent.MTE2_S, 4)
        if a.dropout:  # bit mode: one 32-byte slot per row; byte mode: one byte per element
            self.dropQ = TQue(TPosition.VECIN, 1)
            nbytes = rmax * 32 if self.t.dropMaskBitMode else half * BASE
            self.vpipe.InitBuffer(self.dropQ, 1, nbytes)
            self.ubBytes += nbytes
        if self.a.masked or a.dropout:
            for name, nbytes in (("mask", half * BASE * (2 if a.maskForm == "prefix_3072" else 1)),
                                 ("bits", half * BASE // 8), ("half", self.cmpChunk * 2),
                                 ("zeros", self.cmpChunk * 2)):
                self._ub_buf(name, nbytes)
            Duplicate(self.ub["zeros"].Get(F16), 0.0, self.cmpChunk)
            PipeBarrier(Pipe.V)
        t = self.t
        if t.tndS1PP:  # SfmgTile's row sums (both sides in turn: one vector pipe)
            self._ub_buf("sfrow", rmax * 4)
        if t.template == "basic_bn2":  # SoftmaxGradCv: its [rows, 8] result (a step's Brcb writes whole 8-row
            # groups), row sums, attention_in rows (b16)
            for name, nbytes in (("sfmgcv", (bn2_sft_rows(t) + 8) * 32), ("sfrow", SFT_ROWS * 4),
                                 *((("o16", half * BASE * 2),) if not self.b32 else ())):
                self._ub_buf(name, nbytes)
        self.ubs = [self.ub]
        if bn2_tiles or t.template == "generic":
            self._pong_buffers(half * BASE * 4, rmax * 32, out_bytes)
        if not t.sabDtm:
            for task in range(len(self.steps)):
                self.ComputeVec(task)
            return
        # SameAB IS_DTM: every round r all cores' partials of round r - 1 are reduced by the AIVs between two
        # SyncAll, so every AIV runs every round (cores with fewer CV blocks too)
        rounds = -(-t.sections // t.blockDim)
        n = len(self.steps)
        for r in range(rounds + 1):
            if r < n:
                self.ComputeVec(r)
            if r >= 1:
                if r - 1 < n:
                    CrossCoreWaitFlag(CUBE2ADD)
                SyncAll()
                self.ComputeVecAdd(r - 1)
                SyncAll()
                if t.dtmBasic and r < n:  # basic_det: the cube may overwrite its partial slot with task r's
                    CrossCoreSetFlag(DET2CUBE, Pipe.MTE2)

    def _ub_buf(self, name: str, nbytes: int):
        """A TBuf of *nbytes* in the vector pipe as self.ub[name], counted against UB_BYTES."""
        self.ub[name] = TBuf()
        self.vpipe.InitBuffer(self.ub[name], nbytes)
        self.ubBytes += -(-nbytes // 32) * 32

    def _pong_buffers(self, tile_bytes: int, stat_bytes: int, out_bytes: int):
        """basic_bn2 and generic: the pong tile's UB (self.ubs[1]) when it fits beside the ping's: its own S and dP
        (dP in the fp32 scratch when there is one, free once SubGrapA's are done), softmax statistics and sfmg rows,
        and its b16 casts (basic_bn2: in o16, SoftmaxGradCv's, free between chunks). CANN's kernels always pair
        their tiles (..._s1s2_bn2.h VectorByS1S2, ..._s1s2_bn2gs1s2.h ComputeVec); their UB plans reuse the mask,
        pse and statistics buffers for dP, which npusim's do not (generic pse_type 0/1 without dropout fits since
        session 16: the pong's casts in the free scratch)."""
        alias = "tmp" in self.ub and not self.b32  # fp32: SubGrapA gathers P^T from the scratch into dP's buffer
        # the scratch is free again by SubGrapA's cast when only the pse slice passes through it (no dropped P, no
        # sink product): the pong then casts into its dP buffer, the scratch, as the ping into its own (CANN casts
        # into the b16 pse node, inside the node its dP reuses)
        scratch_free = alias and not (self.a.dropout or self.a.sink)
        own = [("s", tile_bytes), ("max8", stat_bytes), ("sum8", stat_bytes)]
        own += [("sfmg8", stat_bytes)] if "sfmg8" in self.ub else []
        own += [] if alias else [("dp", tile_bytes)]
        out_own = not (self.b32 or "o16" in self.ub or (self.outInDp and (scratch_free or not alias)))
        own += [("out", out_bytes)] if out_own else []
        extra = sum(nbytes for _, nbytes in own)
        if self.ubBytes + extra > UB_BYTES:
            return
        pong = dict(self.ub)
        for name, nbytes in own:
            pong[name] = TBuf()
            self.vpipe.InitBuffer(pong[name], nbytes)
        if alias:
            pong["dp"] = self.ub["tmp"]
        if "o16" in self.ub:
            pong["out"] = self.ub["o16"]
        elif not out_own and not self.b32:  # its casts in its own dP buffer, as the ping's
            pong["out"] = pong["dp"]
        self.ubBytes += extra
        self.ubs.append(pong)

    def ComputeVec(self, task: int):
        t = self.t
        for s, off, owner in self.steps[task]:
            CrossCoreWaitFlag(C2V[owner == 1])
            if t.template == "basic_bn2" and owner == self.sub:
                self.VectorByCS1(task, s, off)
            elif owner is None or owner == self.sub:  # generic: the other AIV's CV block only passes its flags on
                views = self._views(s, off, owner) if t.vecBaseMN else None  # SameAB / generic: CANN's tiles
                if self.a.sink and t.vecBaseMN:  # dsinkSumLocal: this AIV's sum over the CV block's tiles
                    Duplicate(self.ub["dsinkSum"].Get(F32), 0.0, 8)
                    PipeBarrier(Pipe.V)
                if views is not None and t.tndS1PP:  # TND_S1_PP: pairs of row tiles, sfmg per tile (SfmgTile)
                    for pair in pp_pairs(views):
                        self.VecPair(task, pair)
                elif views is not None and len(self.ubs) == 2:  # generic: pairs of column tiles of a tile row
                    for pair in column_pairs(views):
                        self.VecPair(task, pair)
                elif views is not None:
                    for v in views:
                        self.VecTile(task, v)
                else:
                    for j, i in enumerate(range(t.secStart[s], t.secStart[s + 1])):
                        for self.half in ((self.sub,) if owner is None else (0, 1)):  # own run: every row, by halves
                            self.VecBlock(task, off + j, i)
                if self.a.sink and t.vecBaseMN:
                    self.SinkOut(s)
            CrossCoreSetFlag(V2C[owner == 1], Pipe.MTE3)

    def VectorByCS1(self, task: int, s: int, off: int):
        """Deterministic S1s2Bn2, one CV block of this AIV's own run: per chunk of bn2_sft_rows rows, the chunk's
        softmax-grad rows (SoftmaxGradCv), then the vector work of the chunk's tiles (vectiles.bn2_tiles; the
        estimate's stand-in sections: the chunk's blocks, every row, by halves)."""
        t = self.t
        chunk = bn2_sft_rows(t)
        chunks = self._bn2_views(s, off)
        if chunks is not None:  # CANN's tiles, per chunk (VectorByS1S2)
            b, n = t.blkB[t.secStart[s]], t.blkN[t.secStart[s]]
            for self.sftRow0, rows, views in chunks:
                self.SoftmaxGradCv(b, n, self.sftRow0, rows)
                if len(self.ubs) == 2:  # ping-pong: two tiles at a time
                    for k in range(0, len(views), 2):
                        self.VecPair(task, views[k:k + 2])
                else:
                    for v in views:
                        self.VecTile(task, v)
            return
        blocks = list(enumerate(range(t.secStart[s], t.secStart[s + 1])))
        first = min(t.blkS1o[i] for _, i in blocks) * BASE
        for c0 in sorted({(t.blkS1o[i] * BASE - first) // chunk for _, i in blocks}):
            mine = [(j, i) for j, i in blocks if (t.blkS1o[i] * BASE - first) // chunk == c0]
            self.sftRow0 = first + c0 * chunk
            rows = max(t.blkS1o[i] * BASE + t.blkRows[i] for _, i in mine) - self.sftRow0
            self.SoftmaxGradCv(t.blkB[mine[0][1]], t.blkN[mine[0][1]], self.sftRow0, rows)
            for j, i in mine:
                for self.half in (0, 1):
                    self.VecBlock(task, off + j, i)

    def SoftmaxGradCv(self, b: int, n: int, row0: int, rows: int):
        """sfmg of query rows row0 .. row0 + rows of (b, n) into UB sfmgcv ([rows, 8] fp32), SFT_ROWS rows at a
        time (S1s2Bn2 FullGrad): dY and attention_in rows in, fp32 product, row sums over D (the prologue's
        VecSftg arithmetic, so the same values), broadcast to 8. The S and dP buffers are free between blocks."""
        t, dt, D, ub = self.t, self.inDt, self.D, self.ub
        dp = c16(D)
        step = min(SFT_ROWS, BASE * BASE // 2 // dp)  # the fp32 rows of one S buffer; acc: 64 lanes a row
        pitch = t.n1Size * D
        for r0 in range(0, rows, step):
            nr = min(step, rows - r0)
            q = (self.a.cuQ[b] + row0 + r0) * pitch + n * D
            x, y = ub["s"].Get(F32), ub["dp"].Get(F32)
            dyL, oL = (x, y) if self.b32 else (ub["out"].Get(dt), ub["o16"].Get(dt))  # fp32: straight in
            CopyRowsIn(dyL, self.dyGm[q], nr, D, pitch, dp)
            CopyRowsIn(oL, self.oGm[q], nr, D, pitch, dp)
            SetFlag(HardEvent.MTE2_V, 6)
            WaitFlag(HardEvent.MTE2_V, 6)
            row = ub["sfrow"].Get(F32)
            SoftmaxGradFront(row, x, y, dyL, oL, y, nr, D, dp)  # acc: y, free after the product
            BroadcastRows(ub["sfmgcv"].Get(F32)[r0 * 8], row, nr)
            PipeBarrier(Pipe.V)
            SetFlag(HardEvent.V_MTE2, 6)
            WaitFlag(HardEvent.V_MTE2, 6)

    def ComputeVecAdd(self, r: int):
        """IS_DTM reduction of round r: for every output strip that several cores' CV blocks of the round wrote,
        res = the partials in core order, then workspace += res. SameAB (ComputeVecAdd): res starts at +0; the
        AIVs take dq (+dq_rope), dk (+dk_rope) and dv in thirds (every AIV all three when there are fewer than
        three), each an even slice of every strip's rows. basic_det (DetVector2, OrderAccum): res starts as the
        first partial; its groups (det_reduce_groups) go to 16 AIVs per kind (det_vec_kinds), rows // 16 each and
        one more for the first rows % 16. A group's rows have one owner per round, so the read-add-write needs no
        atomics (CANN copies out with an atomic add; the sum is the same)."""
        V, v = GetBlockNum(), GetBlockIdx()
        t = self.t
        mine, share, idx = (det_vec_kinds if t.dtmBasic else sab_vec_kinds)(V, v)
        groups = det_reduce_groups(t, self.a, r) if t.dtmBasic else dtm_groups(t, self.a, r)
        res, tmp = self.ub["s"].Get(F32), self.ub["dp"].Get(F32)  # free between CV blocks (ComputeVec waits)
        ws = self.ws[0].ReinterpretCast(F32)
        for kind, dst, rows, width, pitch, srcs in groups:
            if kind not in mine:
                continue
            if t.dtmBasic:
                per, tail = divmod(rows, share)
                lo = idx * per + min(idx, tail)
                hi = lo + per + (idx < tail)
            else:
                per = -(-rows // share)
                lo, hi = idx * per, min(rows, idx * per + per)
            wp = -(-width // 8) * 8
            step = max(1, ADD_ELEMS // wp)
            for r0 in range(lo, hi, step):
                self.ReduceRows(res, tmp, ws, dst, srcs, r0, min(step, hi - r0), width, pitch, wp)

    def ReduceRows(self, res, tmp, ws, dst: int, srcs, r0: int, nr: int, width: int, pitch: int, wp: int):
        """One reduction step of ComputeVecAdd: rows r0 .. r0 + nr of a strip; res = its partials (*srcs*, fp32
        indices into *ws*) in core order, then ws[dst] rows += res."""
        rest = srcs
        if self.t.dtmBasic:
            CopyRowsIn(res, ws[srcs[0] + r0 * width], nr, width, width, wp)
            SetFlag(HardEvent.MTE2_V, 5)
            WaitFlag(HardEvent.MTE2_V, 5)
            rest = srcs[1:]
        else:
            Duplicate(res, 0.0, nr * wp)
            PipeBarrier(Pipe.V)
        for src in rest:
            CopyRowsIn(tmp, ws[src + r0 * width], nr, width, width, wp)
            SetFlag(HardEvent.MTE2_V, 5)
            WaitFlag(HardEvent.MTE2_V, 5)
            Add(res, res, tmp, nr * wp)
            PipeBarrier(Pipe.V)
            SetFlag(HardEvent.V_MTE2, 5)
            WaitFlag(HardEvent.V_MTE2, 5)
        CopyRowsIn(tmp, ws[dst + r0 * pitch], nr, width, pitch, wp)
        SetFlag(HardEvent.MTE2_V, 5)
        WaitFlag(HardEvent.MTE2_V, 5)
        Add(tmp, tmp, res, nr * wp)
        SetFlag(HardEvent.V_MTE3, 5)
        WaitFlag(HardEvent.V_MTE3, 5)
        CopyRowsOut(ws[dst + r0 * pitch], tmp, nr, width, wp, pitch)
        SetFlag(HardEvent.MTE3_V, 5)
        WaitFlag(HardEvent.MTE3_V, 5)
        SetFlag(HardEvent.MTE3_MTE2, 5)
        WaitFlag(HardEvent.MTE3_MTE2, 5)

    def _my_rows(self, rows: int):
        h = (rows + 1) // 2
        return (0, h) if self.half == 0 else (h, rows - h)

    def _stat_in(self, dst, gm, b: int, n: int, row0: int, rows: int):
        """[rows, 8] blocks of softmax_max/softmax_sum for query rows row0.. of (b, n)."""
        a, n1 = self.a, self.t.n1Size
        if a.softmaxTnd:
            DataCopy(dst, gm[((a.cuQ[b] + row0) * n1 + n) * 8], DataCopyParams(rows, 1, n1 - 1, 0))
        else:
            DataCopy(dst, gm[(a.cuQ[b] * n1 + n * a.seqQ[b] + row0) * 8], rows * 8)

    def _views(self, s: int, off: int, owner):
        """This AIV's vector tiles of section s (vectiles.section_views), computed once."""
        key = (s, off, owner)
        if key not in self.views:
            align = tile_align(self.a.maskForm != "none" or self.a.dropout)
            self.views[key] = section_views(self.t, s, off, self.sub if owner is None else None, self.t.vecBaseMN,
                                            align, self._nd(s), self.b32, self.D if self.t.tndS1PP else 0)
        return self.views[key]

    def _bn2_views(self, s: int, off: int):
        """Deterministic S1s2Bn2: the tiles of section s per softmax-grad chunk (vectiles.bn2_section_views), once."""
        key = (s, off, "bn2")
        if key not in self.views:
            align = tile_align(self.a.maskForm != "none" or self.a.dropout)
            self.views[key] = bn2_section_views(self.t, s, off, bn2_sft_rows(self.t), align, self._nd(s), self.b32)
        return self.views[key]

    def VecBlock(self, task: int, j: int, i: int):
        """This AIV's rows of block j of the task (the basic templates' half blocks): one vector pass. TND_S1_PP (the
        estimate's stand-in sections of such a call): the rows' sfmg first, as its tiles' (it has no prologue)."""
        lo, mine = self._my_rows(self.t.blkRows[i])
        if mine:
            v = block_view(self.t, i, j, lo, mine)
            if self.t.tndS1PP:
                self.SfmgTile(v.b, v.n, v.row0, v.rows)
                SetFlag(HardEvent.V_MTE2, 4)
                WaitFlag(HardEvent.V_MTE2, 4)
            self.VecPass(task, v)

    def VecTile(self, task: int, v):
        """One vector tile of a SameAB / generic / S1s2Bn2 CV block (vectiles.py): one vector pass (the replayed step;
        VecPass itself is not one, as VecBlock's key needs the block, not the view)."""
        self.VecPass(task, v)

    def VecPass(self, task: int, v):
        """SubGrapA (P), the sfmg rows, SubGrapB (dS) of view *v* (vectiles.VecView)."""
        self.SubGrapA(task, v)
        SetFlag(HardEvent.MTE3_MTE2, 0)
        WaitFlag(HardEvent.MTE3_MTE2, 0)
        self._sfmg_rows(v)
        self.SubGrapB(task, v)
        self._pass_done()

    def _sfmg_rows(self, v):
        """self.sf8: the view's sfmg rows in UB (basic_bn2: a row of the CV block's sfmgcv; else copied in from the
        prologue's workspace rows into this side's sfmg8)."""
        a, t = self.a, self.t
        if t.template == "basic_bn2":  # the CV block's rows are in UB (SoftmaxGradCv)
            self.sf8 = self.ub["sfmgcv"].Get(F32)[(v.row0 - self.sftRow0) * 8]
        else:
            self.sf8 = self.ub["sfmg8"].Get(F32)
            if not t.tndS1PP:  # TND_S1_PP computed them into this side's sfmg8 before SubGrapA (SfmgTile)
                DataCopy(self.sf8, self.sfmgWs[((a.cuQ[v.b] + v.row0) * t.n1Size + v.n) * 8],
                         DataCopyParams(v.rows, 1, t.n1Size - 1, 0))

    def _pass_done(self):
        """The next pass's copies in wait for this one's copies out (MTE3_MTE2), its vector work too (MTE3_V)."""
        SetFlag(HardEvent.MTE3_MTE2, 1)
        WaitFlag(HardEvent.MTE3_MTE2, 1)
        SetFlag(HardEvent.MTE3_V, 1)
        WaitFlag(HardEvent.MTE3_V, 1)

    def VecPair(self, task: int, views: list):
        """Ping-pong (basic_bn2: VectorByS1S2 / InnerT2Process, ..._s1s2_bn2.h:3201-3684; generic: ComputeVec's column
        tile pairs, ..._s1s2_bn2gs1s2.h:2418-2440): SubGrapA of the ping and the pong tile in their own UB
        (self.ubs), then SubGrapB of both; each SubGrapB's copy in waits for its own
        SubGrapA's copies out (MTE3_MTE2 per tile), the pong's dP, where it reuses the fp32 scratch, for the pong's
        SubGrapA vector work (V_MTE2). Their vector work waits for no copy out (CANN's right subgraph has no MTE3_V
        wait, ..._s1s2_bn2.h:3570-3668): it follows its dP copy in, which follows its own tile's copies out, so
        neither waits for the other tile's. One tile (an odd count's last) runs as a pass of its own, except in
        TND_S1_PP (ping-pong pairs of row tiles, ..._s1s2_bn2gs1s2.h:2334-2393), where each tile's sfmg rows come
        first (SfmgTile, ping then pong) and a lone tile runs as a ping."""
        pp = self.t.tndS1PP
        if len(views) == 1 and not pp:
            self.VecTile(task, views[0])
            return
        if pp:
            for self.side, v in enumerate(views):
                self.ub = self.ubs[self.side]
                self.SfmgTile(v.b, v.n, v.row0, v.rows)
                SetFlag(HardEvent.V_MTE2, 4 + self.side)
        for self.side, v in enumerate(views):
            self.ub = self.ubs[self.side]
            if pp:  # its copies in wait for its sfmg's vector work (structMte2WaitVPing / Pong)
                WaitFlag(HardEvent.V_MTE2, 4 + self.side)
            self.SubGrapA(task, v)
            SetFlag(HardEvent.MTE3_MTE2, 6 + self.side)
        alias = len(views) == 2 and self.ubs[1]["dp"] is self.ubs[0].get("tmp")
        if alias:
            SetFlag(HardEvent.V_MTE2, 7)
        self.paired = True
        for self.side, v in enumerate(views):
            self.ub = self.ubs[self.side]
            WaitFlag(HardEvent.MTE3_MTE2, 6 + self.side)
            if alias and self.side == 1:
                WaitFlag(HardEvent.V_MTE2, 7)
            self._sfmg_rows(v)
            self.SubGrapB(task, v)
        self.side, self.ub, self.paired = 0, self.ubs[0], False
        self._pass_done()

    def SfmgTile(self, b: int, n: int, row0: int, rows: int):
        """TND_S1_PP's CalcSoftMaxGradPingPong (..._s1s2_bn2gs1s2.h:647-717): sfmg of query rows row0 .. row0 + rows
        of (b, n) into this side's sfmg8, D whole: dY and attention_in rows (b16) into the top of the side's S and dP
        buffers, cast to fp32 below them, SoftmaxGradFront (the prologue's arithmetic, so the same values),
        broadcast to 8 (VecPair then sets V_MTE2 for the tile's SubGrapA copies in, which reuse those buffers)."""
        t, dt, D, ub = self.t, self.inDt, self.D, self.ub
        dp = c16(D)
        pitch = t.n1Size * D
        q = (self.a.cuQ[b] + row0) * pitch + n * D
        top = (BASE * BASE // 2 * 4 - SFMG_DB_INPUT_ELEMS * dt.itemsize) // dt.itemsize  # clear of the fp32 rows
        x, y = ub["s"].Get(F32), ub["dp"].Get(F32)
        dyL, oL = ub["s"].Get(dt)[top], ub["dp"].Get(dt)[top]
        CopyRowsIn(dyL, self.dyGm[q], rows, D, pitch, dp)
        CopyRowsIn(oL, self.oGm[q], rows, D, pitch, dp)
        SetFlag(HardEvent.MTE2_V, 4 + self.side)
        WaitFlag(HardEvent.MTE2_V, 4 + self.side)
        row = ub["sfrow"].Get(F32)
        SoftmaxGradFront(row, x, y, dyL, oL, y, rows, D, dp)  # acc: y, free after the product
        BroadcastRows(ub["sfmg8"].Get(F32), row, rows)

    def _pieces_in(self, dst, region: list, task: int, v):
        """S or dP of view *v* from its slot blocks (fp32, pitch BASE) or its CV block's ND matrix (one piece, pitch
        v.gm_pitch) into UB at the view's pitch."""
        gp = v.gm_pitch
        for j, lr, nr, lc, nc, uo in v.pieces:
            CopyRowsIn(dst[uo], self._slot(region, task, j, F32)[lr * gp + lc], nr, nc, gp, v.pitch)

    def _pieces_out_t(self, src, dst, region: list, task: int, v):
        """fp32: the transposes of view *v*'s pieces per block (block_pieces) into their P^T / dS^T slot blocks, at
        most 64 rows at a time (the Gather offsets' buffer holds 64 rows)."""
        half = BASE // 2
        for j, lr, nr, lc, nc, uo in v.block_pieces:
            for r in range(0, nr, half):
                self.CopyOutT(src[uo + r * v.pitch], dst, self._slot(region, task, j, F32)[lc * BASE], lr + r,
                              min(half, nr - r), nc, v.pitch)

    def _pieces_out(self, src, region: list, task: int, v, dt):
        """P or dS of view *v* (UB, the view's pitch) back over the first half of its slot blocks' (or ND matrix's)
        fp32 rows."""
        cp = v.gm_pitch * 4 // dt.itemsize
        for j, lr, nr, lc, nc, uo in v.pieces:
            CopyRowsOut(self._slot(region, task, j, dt)[lr * cp + lc], src[uo], nr, nc, v.pitch, cp)

    def SubGrapA(self, task: int, v):
        """P = exp(S * scale [masked] - max) / sum of view *v*, cast over its S slots (dropout: the dropped P)."""
        a, t, dt = self.a, self.t, self.inDt
        b, n, row0, col0, rows, cols, pitch = v.b, v.n, v.row0, v.col0, v.rows, v.cols, v.pitch
        cnt = rows * pitch
        ub = self.ub
        S, max8, sum8 = ub["s"].Get(F32), ub["max8"].Get(F32), ub["sum8"].Get(F32)
        self._stat_in(sum8, self.sumGm, b, n, row0, rows)
        self._stat_in(max8, self.maxGm, b, n, row0, rows)
        self._pieces_in(S, self.mm2, task, v)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        if a.pseForm != "none" and a.pseType == 1:  # (S + pse) * scale
            self.AddPse(S, b, n, row0, col0, rows, cols, pitch)
        Muls(S, S, t.scaleValue, cnt)
        PipeBarrier(Pipe.V)
        if a.pseForm != "none" and a.pseType != 1:  # S * scale + pse
            self.AddPse(S, b, n, row0, col0, rows, cols, pitch)
        if a.sink:
            self.SinkProb(n, max8, sum8, rows)
        if v.masked:
            self.ApplyMask(S, v)
        RowBroadcast("sub", S, S, max8, rows, cols, pitch)
        PipeBarrier(Pipe.V)
        Exp(S, S, cnt)
        PipeBarrier(Pipe.V)
        RowBroadcast("div", S, S, sum8, rows, cols, pitch)
        PipeBarrier(Pipe.V)
        out, pv = ub["out"].Get(dt), S
        if a.dropout:  # dV takes the dropped P: Pd = keep ? P / keep_prob : 0 (a copy; dS needs P itself)
            pv = ub["tmp"].Get(F32)
            Copy(pv, S, 64, -(-cnt // 64), CopyRepeatParams(1, 1, 8, 8))
            PipeBarrier(Pipe.V)
            self.Dropout(pv, b, n, row0, col0, rows, cols, pitch)
        if self.b32:  # fp32: P^T (dV's A operand) into the P^T section buffer; dP's buffer is still free
            self._pieces_out_t(pv, ub["dp"].Get(F32), self.mmT[0], task, v)
        else:
            Cast(out, pv, RoundMode.CAST_ROUND, cnt)
            SetFlag(HardEvent.V_MTE3, 0)
            WaitFlag(HardEvent.V_MTE3, 0)
            self._pieces_out(out, self.mm2, task, v, dt)

    def SubGrapB(self, task: int, v):
        """dS = (dP - sfmg) * P of view *v* (sfmg rows already in UB), cast over its dP slots (dropout, sink first)."""
        a, dt = self.a, self.inDt
        b, n, row0, col0, rows, cols, pitch = v.b, v.n, v.row0, v.col0, v.rows, v.cols, v.pitch
        cnt = rows * pitch
        ub = self.ub
        S, out, dP, sf8 = ub["s"].Get(F32), ub["out"].Get(dt), ub["dp"].Get(F32), self.sf8
        self._pieces_in(dP, self.mm1, task, v)
        SetFlag(HardEvent.MTE2_V, 1)
        WaitFlag(HardEvent.MTE2_V, 1)
        if not self.paired:  # a lone pass waits for every copy out before its casts (a pair: VecPair)
            SetFlag(HardEvent.MTE3_V, 0)
            WaitFlag(HardEvent.MTE3_V, 0)
        if a.dropout:  # dP = keep ? dP / keep_prob : 0
            self.Dropout(dP, b, n, row0, col0, rows, cols, pitch)
        if a.sink and self.t.vecBaseMN:
            self.SinkTile(dP, S, rows, cols, pitch)
        elif a.sink:
            self.SinkPartial(v.block, dP, S, rows, cols, pitch)
        RowBroadcast("sub", dP, dP, sf8, rows, cols, pitch)
        PipeBarrier(Pipe.V)
        ds = S if ub["out"] is ub["dp"] else dP  # the cast lands in dP's buffer: dS in S's (CANN: DoMul into mm2)
        Mul(ds, dP, S, cnt)
        PipeBarrier(Pipe.V)
        if self.b32:  # fp32: dS over its own dP rows, and dS^T (dK's A operand) gathered into the free S buffer
            SetFlag(HardEvent.V_MTE3, 1)
            WaitFlag(HardEvent.V_MTE3, 1)
            gp = v.gm_pitch
            for j, lr, nr, lc, nc, uo in v.pieces:
                CopyRowsOut(self._slot(self.mm1, task, j, F32)[lr * gp + lc], dP[uo], nr, nc, pitch, gp)
            self._pieces_out_t(dP, S, self.mmT[1], task, v)
        else:
            Cast(out, ds, RoundMode.CAST_ROUND, cnt)
            SetFlag(HardEvent.V_MTE3, 1)
            WaitFlag(HardEvent.V_MTE3, 1)
            self._pieces_out(out, self.mm1, task, v, dt)

    def CopyOutT(self, src, dst, gm, lo: int, rows: int, cols: int, pitch: int):
        """fp32: the transpose of src (rows x cols, UB pitch *pitch*) -> gm (a section block, [cols, BASE] fp32)
        columns lo..lo+rows: Gather 64 columns at a time into *dst* (cols rows of R = rows rounded up to 8)."""
        R = -(-rows // 8) * 8
        o = self.ub["acc"].Get(np.int32)
        if self.tiled:  # a tile may end at its buffer's end: the rows past it read its last row instead
            ClampedTransposeOffsets(o, rows, R, min(cols, 64), pitch)
        else:
            TransposeOffsets(o, R, min(cols, 64), pitch)
        for c0 in range(0, cols, 64):
            Gather(dst[c0 * R], src, o.ReinterpretCast(np.uint32), c0 * 4, min(64, cols - c0) * R)
        SetFlag(HardEvent.V_MTE3, 2)
        WaitFlag(HardEvent.V_MTE3, 2)
        CopyRowsOut(gm[lo], dst, cols, rows, R, BASE)
        SetFlag(HardEvent.MTE3_V, 2)
        WaitFlag(HardEvent.MTE3_V, 2)

    def SinkProb(self, n: int, max8, sum8, rows: int):
        """psr[r] = exp(sink[n] - max[r]) / sum[r] (the sink's probability per row), contiguous."""
        ub = self.ub
        value = ub["sink"].Get(F32).GetValue(n) if current_unit().full else 0.0
        ps8 = ub["ps8"].Get(F32)
        Duplicate(ps8, float(value), rows * 8)
        PipeBarrier(Pipe.V)
        Sub(ps8, ps8, max8, rows * 8)
        PipeBarrier(Pipe.V)
        Exp(ps8, ps8, rows * 8)
        PipeBarrier(Pipe.V)
        Div(ps8, ps8, sum8, rows * 8)
        PipeBarrier(Pipe.V)
        if not self.t.vecBaseMN:  # the half-block partial weighs row sums by psr; a tile multiplies by ps8 itself
            RowReduce("max", ub["psr"].Get(F32), ps8, ub["acc"].Get(F32), rows, 8, 8)
            PipeBarrier(Pipe.V)

    def SinkPartial(self, i: int, dP, P, rows: int, cols: int, pitch: int):
        """dsink partial of this block's rows: sum_r psink[r] * sum_c dP[r, c] P[r, c] -> workspace slot."""
        ub = self.ub
        prod, rowv, acc = ub["tmp"].Get(F32), ub["rowv"].Get(F32), ub["acc"].Get(F32)
        Mul(prod, dP, P, rows * pitch)
        PipeBarrier(Pipe.V)
        RowReduce("sum", rowv, prod, acc, rows, cols, pitch)
        PipeBarrier(Pipe.V)
        Mul(rowv, rowv, ub["psr"].Get(F32), rows)
        PipeBarrier(Pipe.V)
        one = ub["one"].Get(F32)
        RowReduce("sum", one, rowv, acc, 1, rows, -(-rows // 8) * 8)
        PipeBarrier(Pipe.V)
        one8 = ub["one8"].Get(F32)
        BroadcastRows(one8, one, 1)
        SetFlag(HardEvent.V_MTE3, 3)
        WaitFlag(HardEvent.V_MTE3, 3)
        ws = self.ws[self.t.dsinkOffset].ReinterpretCast(F32)
        DataCopy(ws[(i * 2 + self.half) * 8], one8, 8)
        SetFlag(HardEvent.MTE3_V, 3)
        WaitFlag(HardEvent.MTE3_V, 3)

    def SinkTile(self, dP, P, rows: int, cols: int, pitch: int):
        """SameAB's dsink of one tile (..._sab.h SubGrapB, has_sink): dP * P, times the row's sink probability, summed
        over the tile by one ReduceSum (the padding columns zeroed first) and added to this AIV's dsinkSumLocal."""
        ub = self.ub
        prod, acc, one, local = ub["tmp"].Get(F32), ub["acc"].Get(F32), ub["one"].Get(F32), ub["dsinkSum"].Get(F32)
        Mul(prod, dP, P, rows * pitch)
        PipeBarrier(Pipe.V)
        RowBroadcast("mul", prod, prod, ub["ps8"].Get(F32), rows, cols, pitch)
        PipeBarrier(Pipe.V)
        if pitch > cols:  # lanes cols .. pitch of every row hold older data: +0 there
            c8 = cols // 8 * 8
            lanes = sum(1 << k for k in range(cols - c8, pitch - c8))
            Duplicate(prod[c8], 0.0, (lanes, 0), rows, 1, pitch // 8)
            PipeBarrier(Pipe.V)
        ReduceSum(one, prod, acc, rows * pitch)
        PipeBarrier(Pipe.V)
        Add(local, local, one, 1)
        PipeBarrier(Pipe.V)

    def SinkOut(self, s: int):
        """This AIV's dsinkSumLocal of CV block *s* added into its partial of the block's head, slot [head, this AIV],
        by an atomic fp32 DataCopyPad of 4 bytes (CANN 8d2ad255 arch22/..._sab.h:4274-4286). One writer per slot, so
        the partial is the AIV's CV-block sums of the head added from +0 in its order. The next CV block's Duplicate
        of dsinkSumLocal waits for the copy (CANN: PipeBarrier<PIPE_ALL>)."""
        t = self.t
        slot = self.ws[t.dsinkOffset].ReinterpretCast(F32)[t.blkN[t.secStart[s]] * t.dsinkCores + GetBlockIdx()]
        SetFlag(HardEvent.V_MTE3, 3)
        WaitFlag(HardEvent.V_MTE3, 3)
        SetAtomicAdd(F32)
        DataCopyPad(slot, self.ub["dsinkSum"].Get(F32), DataCopyExtParams(1, 4, 0, 0, 0))
        SetAtomicNone()
        SetFlag(HardEvent.MTE3_V, 3)
        WaitFlag(HardEvent.MTE3_V, 3)

    def ApplyMask(self, S, v):
        """Masked scores := NEG over view *v*, from the windows _mask_windows names: full masks (sparse 0/1) the
        [rows, cols] window of the user's mask; the compressed 2048 x 2048 mask (masked iff c - r > delta) the next
        side (j - i > nextLU) and, for a band, the pre side (j - i < -preLU, read inverted); the prefix mask its
        causal window, its rectangle, or both (masked where both are)."""
        kind, *w = self._mask_windows(v)
        rows, cols, pitch = v.rows, v.cols, v.pitch
        if kind == "full":
            self._select(S, w[0], self.a.maskCols, rows, cols, pitch, CMPMODE.EQ)
        elif kind == "prefix":
            reads, causal, rect = w
            if reads in ("causal", "rect"):
                self._select(S, causal if reads == "causal" else rect, COMPRESSED_MASK_SIZE, rows, cols, pitch,
                             CMPMODE.EQ)
            elif reads == "both":
                self._select_both(S, causal, rect, rows, cols, pitch)
        else:
            for off, keep in zip(w, (CMPMODE.EQ, CMPMODE.NE)):
                if off is not None:
                    self._select(S, off, COMPRESSED_MASK_SIZE, rows, cols, pitch, keep)

    def _mask_windows(self, v) -> tuple:
        """The mask windows view *v* reads (ApplyMask; the replay keys hold them): ("full", element offset of the
        user mask's window); ("prefix", ops/common/masks.py prefix_tile_reads of the tile); ("causal", offset of the
        next side's window or None, of the pre side's (delta = row0 - col0 - preLU - 1) or None). A compressed
        window's offset clamps (causal_tile_offset) at the tile's rows and columns on CANN's tiles (CalcAttenMaskOffset,
        ..._sab.h:2840-2858; ..._s1s2_bn2.h:2707-2727), at 128 and the width rounded up to 128 on the half blocks and
        for the prefix mask."""
        a, b = self.a, v.b
        if a.maskForm == "full":
            return "full", v.row0 * a.maskCols + v.col0
        if a.maskForm == "prefix_3072":
            return ("prefix", *prefix_tile_reads(v.row0, v.col0, a.seqQ[b], a.seqKv[b], a.prefixN[b], BASE,
                                                 mask_s2_base(v.cols), v.pitch))
        s1b, s2b = (v.rows, v.cols) if self.tiled and v.block < 0 else (BASE, mask_s2_base(v.cols))
        delta = v.row0 - v.col0 + a.nextLU[b]
        dpre = v.row0 - v.col0 - a.preLU[b] - 1
        return ("causal", causal_tile_offset(delta, s1b, s2b) if delta < v.cols else None,
                causal_tile_offset(dpre, s1b, s2b) if dpre + v.rows >= 0 else None)

    def _select_both(self, S, off1: int, off2: int, rows: int, cols: int, pitch: int):
        """Prefix: keep scores unless both mask windows hold a nonzero byte (fp16 product != 0)."""
        m = self.ub["mask"].Get(U8)
        n = rows * pitch
        CopyRowsIn(m, self.maskGm[off1], rows, cols, COMPRESSED_MASK_SIZE, pitch)
        CopyRowsIn(m[n:], self.maskGm[off2], rows, cols, COMPRESSED_MASK_SIZE, pitch)
        SetFlag(HardEvent.MTE2_V, 2)
        WaitFlag(HardEvent.MTE2_V, 2)
        bits, h1, zeros = self.ub["bits"].Get(U8), self.ub["half"].Get(F16), self.ub["zeros"].Get(F16)
        step = self.cmpChunk // 2  # the two windows' fp16 halves share the compare chunk's buffer
        h2 = h1[step:]
        for k in range(0, n, step):
            c = min(step, n - k)
            Cast(h1, m[k:], RoundMode.CAST_NONE, c)
            Cast(h2, m[n + k:], RoundMode.CAST_NONE, c)
            PipeBarrier(Pipe.V)
            Mul(h1, h1, h2, c)
            PipeBarrier(Pipe.V)
            Compare(bits[k // 8:], h1, zeros, CMPMODE.EQ, c)
            PipeBarrier(Pipe.V)
        Select(S, bits, S, NEG, SELMODE.VSEL_TENSOR_SCALAR_MODE, n)
        PipeBarrier(Pipe.V)
        SetFlag(HardEvent.V_MTE2, 2)
        WaitFlag(HardEvent.V_MTE2, 2)

    # ------------------------------------------------------------------------------------ pse, dropout
    def AddPse(self, S, b: int, n: int, row0: int, col0: int, rows: int, cols: int, pitch: int):
        """S += pse for this AIV's rows of the block. alibi: the window of the compressed [Bp, N1, 1024, maxSkv]
        tensor (ops/common/pse.py; rows above the diagonal read nothing, the causal mask drops them). slope
        (PseSlopeCopyIn): fp32(table[r, c] = c - r) + (col0 + kvStart - row0 - qStart), Abs, [Sqrt], * -slope."""
        a = self.a
        tmp = self.ub["tmp"].Get(F32)
        if a.pseForm == "alibi":
            if not alibi_slice_needed(row0, rows, col0):
                return
            m0, k0 = alibi_read_window(row0, col0, a.pseS2)
            skip = max(0, -m0)  # rows wholly above the diagonal (read window before row 0): masked anyway
            if skip >= rows:
                return
            off = (((b % a.pseB) * self.t.n1Size + n) * ALIBI_ROWS + m0 + skip) * a.pseS2 + k0
            p = self.pseQ.AllocTensor(self.inDt)
            AddPseSlice(S[skip * pitch], p, tmp, self.pseGm[off], rows - skip, min(cols, a.pseS2 - k0), a.pseS2,
                        pitch, self.pseQ)
            return
        cnt = rows * pitch
        slope = self.ub["slopes"].Get(F32).GetValue((b * self.t.n1Size if a.pseB > 1 else 0) + n) \
            if current_unit().full else 0.0
        h = self.pseQ.AllocTensor(F16)
        CopyRowsIn(h, self.alibiGm, rows, cols, ALIBI_COLS, pitch)
        self.pseQ.EnQue(h)
        h = self.pseQ.DeQue(F16)
        Cast(tmp, h, RoundMode.CAST_NONE, cnt)
        PipeBarrier(Pipe.V)
        self.pseQ.FreeTensor(h)
        Adds(tmp, tmp, float(np.float32(col0 + a.kvStart - row0 - a.qStart)), cnt)
        PipeBarrier(Pipe.V)
        Abs(tmp, tmp, cnt)
        PipeBarrier(Pipe.V)
        if a.pseType == 3:
            Sqrt(tmp, tmp, cnt)
            PipeBarrier(Pipe.V)
        Muls(tmp, tmp, -float(slope), cnt)
        PipeBarrier(Pipe.V)
        Add(S, S, tmp, cnt)
        PipeBarrier(Pipe.V)

    def Dropout(self, X, b: int, n: int, row0: int, col0: int, rows: int, cols: int, pitch: int):
        """X := keep ? X * (1 / keep_prob) : 0 with the keep bits of (b, n, rows row0.., columns col0..)."""
        a, t, ub = self.a, self.t, self.ub
        bit0 = keep_bit_offset(t.n1Size, a.cuSS[b], n, a.seqQ[b], a.seqKv[b], row0, col0)
        ApplyDropout(X, self.dropQ, self.dropGm, self.dropBytesGm, bit0, rows, cols, a.seqKv[b], pitch,
                     t.keepProbRecip, t.dropMaskBitMode, ub["bits"].Get(U8), ub["half"].Get(F16), ub["zeros"].Get(F16),
                     self.cmpChunk)

    def _select(self, S, off: int, gm_pitch: int, rows: int, cols: int, pitch: int, keep):
        """Keep scores where the mask byte compares *keep* 0 (EQ: keep where 0), else NEG."""
        m = self.ub["mask"].Get(U8)
        CopyRowsIn(m, self.maskGm[off], rows, cols, gm_pitch, pitch)
        SetFlag(HardEvent.MTE2_V, 2)
        WaitFlag(HardEvent.MTE2_V, 2)
        bits = self.ub["bits"].Get(U8)
        BytesToBits(bits, m, self.ub["half"].Get(F16), self.ub["zeros"].Get(F16), rows * pitch, keep, self.cmpChunk)
        Select(S, bits, S, NEG, SELMODE.VSEL_TENSOR_SCALAR_MODE, rows * pitch)
        PipeBarrier(Pipe.V)
        SetFlag(HardEvent.V_MTE2, 2)
        WaitFlag(HardEvent.V_MTE2, 2)


def column_pairs(views: list) -> list:
    """The generic kernel's ping-pong pairs (..._s1s2_bn2gs1s2.h ComputeVec, :2418-2440): per row of tiles, column
    tiles two at a time (a row's odd last one alone)."""
    rows = {}
    for v in views:
        rows.setdefault(v.row0, []).append(v)
    return [row[k:k + 2] for row in rows.values() for k in range(0, len(row), 2)]


def SoftmaxGradFront(row, x, y, dyL, oL, acc, rows: int, D: int, dp: int):
    """row[r] = sum over D of fp32(dy[r]) * fp32(o[r]) for *rows* rows in UB at pitch *dp* (dyL, oL in the input
    dtype; fp32 inputs are multiplied as they are, and may be x, y themselves); x, y: fp32 scratch, *acc* the row
    fold's (rows x 64 lanes; may be y)."""
    if dyL.dtype.itemsize == 4:
        Mul(x, dyL, oL, rows * dp)
    else:
        Cast(x, dyL, RoundMode.CAST_NONE, rows * dp)
        Cast(y, oL, RoundMode.CAST_NONE, rows * dp)
        PipeBarrier(Pipe.V)
        Mul(x, x, y, rows * dp)
    PipeBarrier(Pipe.V)
    RowReduce("sum", row, x, acc, rows, D, dp)
    PipeBarrier(Pipe.V)


def ClampedTransposeOffsets(o, rows: int, R: int, cols: int, src_pitch: int) -> None:
    """TransposeOffsets (ops/common/transpose.py) for R rows of which the first *rows* are real: o[c * R + r] =
    (min(r, rows - 1) * src_pitch + c) * 4, so that a Gather of the R-row groups reads nothing past row rows - 1."""
    TransposeOffsets(o, R, 1, src_pitch)
    if rows < R:
        PipeBarrier(Pipe.V)
        Duplicate(o, (rows - 1) * src_pitch * 4, (sum(1 << r for r in range(rows, R)), 0), 1, 1, 8)
    step = 1
    while step < cols:  # o[c * R + r] = o[r] + 4 c, doubling over c
        PipeBarrier(Pipe.V)
        Adds(o[step * R:], o, step * 4, min(step, cols - step) * R)
        step *= 2
    PipeBarrier(Pipe.V)


def PseInnerAlibiCreate(alibiGm):
    """pse_type 2/3: the fp16 [BASE, ALIBI_COLS] table of c - r in GM, read by every pass (CANN PseInnerAlibiCreate
    writes it with CreateVecIndex per row). Lanes 0..15: a 16 x 16 matrix of rows r = r (Duplicate per row)
    transposed; then 0..ALIBI_COLS-1 by Adds doubling; row r = row 0 - r (Adds). Every value is an integer below
    2048, exact in fp16."""
    pipe = TPipe()
    buf, sq = TBuf(), TBuf()
    pipe.InitBuffer(buf, BASE * ALIBI_COLS * 2)
    pipe.InitBuffer(sq, 16 * 16 * 2)
    t, m = buf.Get(F16), sq.Get(F16)
    for r in range(16):
        Duplicate(m[r * 16], float(r), 16)
    PipeBarrier(Pipe.V)
    Transpose(t, m)
    PipeBarrier(Pipe.V)
    w = 16
    while w < ALIBI_COLS:
        Adds(t[w], t, float(w), w)
        PipeBarrier(Pipe.V)
        w *= 2
    for r in range(1, BASE):
        Adds(t[r * ALIBI_COLS], t, -float(r), ALIBI_COLS)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(alibiGm, t, BASE * ALIBI_COLS)
    SetFlag(HardEvent.MTE3_V, 0)
    WaitFlag(HardEvent.MTE3_V, 0)
    SetFlag(HardEvent.MTE3_MTE2, 0)
    WaitFlag(HardEvent.MTE3_MTE2, 0)
    pipe.Reset()


def fag_main(query, key, value, dy, attentionIn, softmaxMax, softmaxSum, attenMask, sinkIn, queryRope, keyRope,
             pseShift, dropMask, workspace, tiling: FagTilingData, args: FagKernelArgs):
    """Main kernel entry, named like the CANN kernel: build the class, Init, Process."""
    op = KernelFagBasic()
    op.Init(query, key, value, dy, attentionIn, softmaxMax, softmaxSum, attenMask, sinkIn, queryRope, keyRope,
            pseShift, dropMask, workspace, tiling, args)
    op.Process()


# -------------------------------------------------------------------------------- replay keys (timing mode)
# What each repeated step's instruction stream depends on (npusim/replay.py): a step called again with the same
# key and stream state is replayed from its recording instead of interpreted. The block's mm1/mm2 slots of the
# core's section buffers are one base (mm1 lies a fixed distance before mm2), and the inputs a step reads move
# with the block, so a cube step's key is the block's shape; a vector pass's (VecPass: VecBlock's half block or
# VecTile's CANN tile) is its view's shape and pieces. With pse, dropout, a sink or the prefix mask (and in a
# ping-pong pair) SubGrapA and SubGrapB replay alone, their keys adding those reads and writes. Declared
# below the kernel, so that the kernel reads as Ascend C and its line numbers (the trace's sources) stay put.
from npusim.replay import replayable  # noqa: E402


def _cube1_key(k: KernelFagBasic, task: int, j: int, i: int, at: int = 0, pitch: int = BASE):
    """Cube1Block: the block's shape and row pitch; its first element in the mm2 slot (mm1 at a fixed distance), Q,
    K, dY, V (and the rope inputs) move with the block."""
    b, n, s1o, s2o, rows, cols, _ = k._blk(i)
    qo, kvo = k._rows(b, n, s1o, s2o)
    bases = (k._slot(k.mm2, task, j, F32)[at], k.qGm[qo], k.kGm[kvo], k.dyGm[qo], k.vGm[kvo])
    if k.Dr:
        bases += (k.qrGm[qo // k.D * k.Dr], k.krGm[kvo // k.D * k.Dr])
    return (rows, cols, pitch), bases


def _plain(k: KernelFagBasic) -> bool:
    a = k.a
    return not (a.pseForm != "none" or a.dropout or a.sink or a.maskForm == "prefix_3072")


def _stat_offset(k: KernelFagBasic, b: int, n: int, row0: int) -> int:
    """Element offset of _stat_in's first softmax_max / softmax_sum row."""
    a, n1 = k.a, k.t.n1Size
    return ((a.cuQ[b] + row0) * n1 + n) * 8 if a.softmaxTnd else (a.cuQ[b] * n1 + n * a.seqQ[b] + row0) * 8


def _piece_shape(k: KernelFagBasic, v) -> tuple:
    """A pass's pieces without their slot blocks (the slots are bases that move); a view of a CV block's ND matrix
    without its first row too (its rows' start is the base, _slot_regions), so that tiles of different rows of
    tiles share a recording."""
    if v.gm_pitch != BASE and k.b32:  # fp32: its region starts at its first element, and so does each of its
        # per-block transposes' (_slot_regions): their rows and columns are no part of the key
        return tuple(piece[2:3] + piece[4:] for piece in v.pieces + v.tpieces)
    if v.gm_pitch != BASE:
        return tuple(piece[2:] for piece in v.pieces)
    return tuple(piece[1:] for piece in v.pieces)


def _view_shape(k: KernelFagBasic, v) -> tuple:
    """What a pass's stream depends on in any of its steps: the view's rows, columns, UB pitch, pieces and their GM row
    pitch, the UB side it runs in (ping-pong: the ping's or the pong's buffers) and whether it is a pair's (SubGrapB's
    waits)."""
    return v.rows, v.cols, v.pitch, _piece_shape(k, v), v.gm_pitch, k.side, k.paired


def _ws_slot(k: KernelFagBasic, region: list, task: int, j: int):
    """Block j's slot of a section buffer as a region of the workspace."""
    return k._slot(region, task, j, F32), BASE * BASE * 4


def _slot_regions(k: KernelFagBasic, task: int, v, regions: tuple) -> list:
    """The view's slot blocks in each of *regions* (section buffers) as regions of the workspace: distinct blocks,
    so they never overlap one another; a view of a CV block's ND matrix (one piece): its rows, from the start of its
    first row (its 16-bit P / dS rows start there too; fp32, which writes none: from its first element, so that its
    column is no part of the key), except in fp32's per-block P^T / dS^T buffers (k.mmT)."""
    out = []
    for region in regions:
        if v.gm_pitch != BASE and not any(region is r for r in k.mmT):
            j, lr, nr, lc, nc, _ = v.pieces[0]
            gp, c0 = v.gm_pitch, lc if k.b32 else 0
            out.append((k._slot(region, task, j, F32)[lr * gp + c0], ((nr - 1) * gp + lc - c0 + nc) * 4))
        elif v.tpieces:  # fp32's transposes of an ND view: each from its first element (row and column no part of
            # the key); a piece's P^T / dS^T rows are its columns, BASE apart
            out += [(k._slot(region, task, j, F32)[lc * BASE + lr], ((nc - 1) * BASE + nr) * 4)
                    for j, lr, nr, lc, nc, _ in v.tpieces]
        else:
            out += [_ws_slot(k, region, task, j) for j, *_ in v.block_pieces]
    return out


def _mask_key(k: KernelFagBasic, v) -> tuple:
    """(key part, bases) of SubGrapA's mask reads (KernelFagBasic._mask_windows): a full mask's window moves with the
    view (its first element a base); the compressed mask's windows are at fixed offsets (in the key)."""
    if not v.masked:
        return None, ()
    kind, *w = k._mask_windows(v)
    if kind == "full":
        return "full", (k.maskGm[w[0]],)
    return (kind, *w), ()


def _stat_bases(k: KernelFagBasic, v) -> list:
    """The softmax_max / softmax_sum rows a pass reads (they move with the view)."""
    off = _stat_offset(k, v.b, v.n, v.row0)
    return [k.sumGm[off], k.maxGm[off]]


def _with_extras(key: tuple, slots: list, extras: list, bases: list, parts) -> tuple:
    """The (key, bases) of a vector step from its key so far, its slot regions, and *parts*: (key part, more) pairs
    (_pse_key, _drop_key, a sink slot), *more* holding regions ((GlobalTensor, bytes), added to *extras*) and bases.
    Only an extra region may overlap another region; how they do is in the key (_overlaps)."""
    for extra, more in parts:
        key += extra
        for base in more:
            (extras if type(base) is tuple else bases).append(base)
    regions = slots + extras
    return key + (_overlaps(regions) if extras else (),), (*regions, *bases)


def _suba_key(k: KernelFagBasic, task: int, v):
    """SubGrapA: the view's shape (_view_shape), its mask windows (_mask_key) and, with pse or dropout, _pse_key's
    and _drop_key's parts; its S slots (fp32: and P^T slots), the slope table and the adapter's bytes are regions of
    the workspace, the statistics rows and the first elements of a full mask's or an alibi pse's window bases. The
    sink adds nothing: its value is read in full mode only."""
    a = k.a
    mask, mask_bases = _mask_key(k, v)
    parts = [make(k, v.b, v.n, v.row0, v.col0, v.rows, v.cols)
             for on, make in ((a.pseForm != "none", _pse_key), (a.dropout, _drop_key)) if on]
    slots = _slot_regions(k, task, v, (k.mm2, k.mmT[0]) if k.b32 else (k.mm2,))
    return _with_extras((*_view_shape(k, v), mask), slots, [], [*_stat_bases(k, v), *mask_bases], parts)


def _subb_key(k: KernelFagBasic, task: int, v):
    """SubGrapB: the view's shape and where in UB its sfmg rows are (basic_bn2: a row of the CV block's sfmgcv), with
    dropout _drop_key's part; its dP slots (fp32: and dS^T slots), the adapter's bytes and a half block's sink
    partial slot are regions of the workspace (a tile's sink sum stays in UB until SinkOut)."""
    a = k.a
    parts = [_drop_key(k, v.b, v.n, v.row0, v.col0, v.rows, v.cols)] if a.dropout else []
    if a.sink and not k.t.vecBaseMN:
        parts.append(((), ((k.ws[k.t.dsinkOffset].ReinterpretCast(F32)[(v.block * 2 + k.half) * 8], 32),)))
    slots = _slot_regions(k, task, v, (k.mm1, k.mmT[1]) if k.b32 else (k.mm1,))
    return _with_extras((*_view_shape(k, v), k.sf8.addr), slots, [], [], parts)


def _vecpass_key(k: KernelFagBasic, task: int, v):
    """VecPass as one step (VecTile; VecBlock's half block), without pse, dropout, a sink or the prefix mask (then its
    SubGrapA and SubGrapB replay alone): the view's shape and mask windows, and basic_bn2's sfmg rows' place in UB;
    its S, dP (fp32: P^T, dS^T) slots and its sfmg rows are regions of the workspace, the statistics rows and a full
    mask's window bases."""
    if not _plain(k) or k.t.tndS1PP:  # TND_S1_PP: its sfmg rows are computed in the pass (SfmgTile replays alone)
        return None
    mask, mask_bases = _mask_key(k, v)
    regions = _slot_regions(k, task, v, (k.mm2, k.mm1) + ((k.mmT[0], k.mmT[1]) if k.b32 else ()))
    key = (*_view_shape(k, v), mask)
    if k.t.template == "basic_bn2":  # its sfmg rows: the row of the CV block's sfmgcv in UB (in the key)
        key += (v.row0 - k.sftRow0,)
    else:
        n1 = k.t.n1Size
        regions.append((k.sfmgWs[((k.a.cuQ[v.b] + v.row0) * n1 + v.n) * 8], ((v.rows - 1) * n1 * 8 + 8) * 4))
    return key, (*regions, *_stat_bases(k, v), *mask_bases)


def _sfmg_tile_key(k: KernelFagBasic, b: int, n: int, row0: int, rows: int):
    """SfmgTile: its rows and UB side (and D, dtype); the dY and attention_in rows move (bases)."""
    q = (k.a.cuQ[b] + row0) * k.t.n1Size * k.D + n * k.D
    return (rows, k.side, k.D, k.inDt.str), (k.dyGm[q], k.oGm[q])


def _drop_key(k: KernelFagBasic, b: int, n: int, row0: int, col0: int, rows: int, cols: int) -> tuple:
    """(key, bases) of Dropout on rows x cols at (row0, col0) of (b, n): the keep bits' row pitch (Skv) in the key;
    bit mode reads the drop mask from the slice's first byte (a base), byte mode the adapter's bytes (a region of the
    workspace)."""
    a, t = k.a, k.t
    bit0 = keep_bit_offset(t.n1Size, a.cuSS[b], n, a.seqQ[b], a.seqKv[b], row0, col0)
    if t.dropMaskBitMode:
        return (a.seqKv[b],), (k.dropGm[bit0 // 8],)
    return (a.seqKv[b],), ((k.dropBytesGm[bit0], (rows - 1) * a.seqKv[b] + cols),)


def _pse_key(k: KernelFagBasic, b: int, n: int, row0: int, col0: int, rows: int, cols: int) -> tuple:
    """(key, bases) of AddPse: alibi reads a window of the compressed pse (its first element a base; the rows it
    skips and its width in the key, or nothing read); slope reads the fixed j - i table (a region of the workspace)."""
    a = k.a
    if a.pseForm == "slope":
        return ("slope",), ((k.alibiGm, BASE * ALIBI_COLS * 2),)
    if not alibi_slice_needed(row0, rows, col0):
        return ("alibi", None), ()
    m0, k0 = alibi_read_window(row0, col0, a.pseS2)
    skip = max(0, -m0)
    if skip >= rows:
        return ("alibi", None), ()
    off = (((b % a.pseB) * k.t.n1Size + n) * ALIBI_ROWS + m0 + skip) * a.pseS2 + k0
    return ("alibi", skip, min(cols, a.pseS2 - k0)), (k.pseGm[off],)


def _vecblock_key(k: KernelFagBasic, task: int, j: int, i: int):
    """VecBlock: the key of its half block's VecPass (none for an AIV without rows there)."""
    lo, mine = k._my_rows(k.t.blkRows[i])
    return _vecpass_key(k, task, block_view(k.t, i, j, lo, mine)) if mine else None


def _strip_key(k: KernelFagBasic, kind: str, task: int, i0: int, parts, m: int, width: int):
    """_mm_ab_strip (one strip of ComputeMMDqkv; strips repeat within a CV block and across them, and a recording
    of the whole CV block would be replayed too few times to pay for itself, T = 1M estimate): the strip's
    kind and shape, its destination's pitch and whether it switches atomic adds on alone, and each part's shape; the
    destination and each part's slot block and B rows move (regions of their buffers). Entered with SetAtomicAdd
    in force (non-deterministic) or not (IS_DTM): that state is in the replay key."""
    dst, pitch, alone = k._sab_dst(kind, task, i0, width)
    a_item, b_item = k.inDt.itemsize, k.inDt.itemsize
    bases = [(dst, ((m - 1) * pitch + width) * 4)]
    shape = []
    for a_src, a_rows, a_cols, trans, b_gm, kk, b_pitch, a_pitch in parts:
        bases += [(a_src, ((a_rows - 1) * a_pitch + a_cols) * a_item), (b_gm, ((kk - 1) * b_pitch + width) * b_item)]
        shape.append((a_rows, a_cols, trans, kk, b_pitch, a_pitch))
    return (kind, m, width, pitch, alone, tuple(shape)), tuple(bases)  # kind: which buffers B and dst are in


def _post_chunk_key(queues, src, dst, n: int, scale, dt):
    """PostChunk: the output (a recording books its own GM buffers), the step's size, whether it scales and the output
    dtype; the workspace and output rows move."""
    return (dst.gm.name, n, scale, dt.str), (src, dst)


def _reduce_key(k: KernelFagBasic, res, tmp, ws, dst: int, srcs, r0: int, nr: int, width: int, pitch: int, wp: int):
    """ReduceRows: the step's rows, widths, pitch and number of partials (res and tmp are the same UB buffers in
    every call and stream); each partial's rows and the destination rows move (regions of the workspace)."""
    item = 4
    span = ((nr - 1) * width + width) * item
    bases = tuple((ws[src + r0 * width], span) for src in srcs) + ((ws[dst + r0 * pitch], ((nr - 1) * pitch + width) * item),)
    return (k.t.dtmBasic, len(srcs), nr, width, pitch, wp), bases


def _cube23_key(k: KernelFagBasic, task: int, j: int, i: int):
    """Cube23Block (entered with SetAtomicAdd in force, which the replay key holds): the block's shape; its dS and P
    slots (mm1 / mm2 of the task) and the dq, dk, dv (and rope) workspace rows it adds into are regions of the
    workspace; the K, Q, dY (and rope) rows it reads move with the block."""
    b, n, s1o, s2o, rows, cols, _ = k._blk(i)
    qo, kvo = k._rows(b, n, s1o, s2o)
    t, D, Dr = k.t, k.D, k.Dr
    slot = BASE * BASE * 4
    bases = [(k._slot(k.mm1, task, j, F32), slot), (k._slot(k.mm2, task, j, F32), slot),
             (k.dqWs[qo], ((rows - 1) * t.n1Size * D + D) * 4), (k.dkWs[kvo], ((cols - 1) * t.n2Size * D + D) * 4),
             (k.dvWs[kvo], ((cols - 1) * t.n2Size * D + D) * 4), k.kGm[kvo], k.qGm[qo], k.dyGm[qo]]
    if Dr:
        qro, kro = qo // D * Dr, kvo // D * Dr
        bases += [(k.dqrWs[qro], ((rows - 1) * t.n1Size * Dr + Dr) * 4),
                  (k.dkrWs[kro], ((cols - 1) * t.n2Size * Dr + Dr) * 4), k.krGm[kro], k.qrGm[qro]]
    return (rows, cols), tuple(bases)


class _Part(tuple):
    """One k range of an A B^T accumulation (KernelFagBasic._part): (load A, load B^T, k), A rows x k from
    *a_gm* into L1 queue *qa*, B^T cols x k from *b_gm* into *qb*; the operands kept for _mm_abt's replay key."""

    def __new__(cls, kernel, qa: str, qb: str, a_gm, b_gm, rows: int, cols: int, k: int, a_pitch: int, b_pitch: int):
        part = super().__new__(cls, (lambda: (qa, kernel._load(qa, a_gm, rows, k, a_pitch)),
                                     lambda: (qb, kernel._load(qb, b_gm, cols, k, b_pitch)), k))
        part.operands = (qa, qb, a_gm, b_gm, rows, cols, a_pitch, b_pitch)
        return part


def _overlaps(regions: list) -> tuple:
    """(i, j, byte distance) of every pair of *regions* ((GlobalTensor, bytes)) that overlap in one GM buffer. A
    recorded transfer is placed relative to the first region that holds it (npusim/replay.py _compile), which for
    overlapping regions may be another's: their distance is then part of what the stream depends on."""
    spans = [(g.gm, g.offset * g.dtype.itemsize, nbytes) for g, nbytes in regions]
    return tuple((i, j, b[1] - a[1]) for i, a in enumerate(spans) for j, b in enumerate(spans[i + 1:], i + 1)
                 if a[0] is b[0] and a[1] < b[1] + b[2] and b[1] < a[1] + a[2])


def _mm_abt_key(k: KernelFagBasic, dst, parts, m: int, n: int, dst_pitch: int):
    """_mm_abt (fp32 only: Cube23T's and ComputeMMDqkvT's products; b16 ones run inside replayed steps): the result's
    shape and pitch, each part's queues, shape and pitches, and how their regions overlap; the destination rows
    and each part's A and B^T rows move (regions of their buffers)."""
    if not k.b32:
        return None
    regions, shape = [(dst, ((m - 1) * dst_pitch + n) * 4)], []
    for part in parts:
        qa, qb, a_gm, b_gm, rows, cols, a_pitch, b_pitch = part.operands
        kk = part[2]
        shape.append((qa, qb, rows, cols, kk, a_pitch, b_pitch))
        regions += [(a_gm, ((rows - 1) * a_pitch + kk) * a_gm.dtype.itemsize),
                    (b_gm, ((cols - 1) * b_pitch + kk) * b_gm.dtype.itemsize)]
    return (m, n, dst_pitch, tuple(shape), _overlaps(regions)), tuple(regions)


KernelFagBasic._mm_abt = replayable(_mm_abt_key, shared=True)(KernelFagBasic._mm_abt)
PostChunk = replayable(_post_chunk_key, shared=True)(PostChunk)
KernelFagBasic.ReduceRows = replayable(_reduce_key, shared=True)(KernelFagBasic.ReduceRows)
KernelFagBasic.Cube23Block = replayable(_cube23_key, shared=True)(KernelFagBasic.Cube23Block)
KernelFagBasic.Cube1Block = replayable(_cube1_key, shared=True)(KernelFagBasic.Cube1Block)
KernelFagBasic.SubGrapA = replayable(_suba_key, shared=True)(KernelFagBasic.SubGrapA)
KernelFagBasic.SfmgTile = replayable(_sfmg_tile_key, shared=True)(KernelFagBasic.SfmgTile)
KernelFagBasic.SubGrapB = replayable(_subb_key, shared=True)(KernelFagBasic.SubGrapB)
KernelFagBasic.VecBlock = replayable(_vecblock_key, shared=True)(KernelFagBasic.VecBlock)
KernelFagBasic.VecTile = replayable(_vecpass_key, shared=True)(KernelFagBasic.VecTile)
KernelFagBasic._mm_ab_strip = replayable(_strip_key, shared=True)(KernelFagBasic._mm_ab_strip)
