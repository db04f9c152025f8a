"""FlashAttentionVarLenScore device kernel, written like the CANN varlen kernels: SameAB (cube-master)
and vector-master (the tiling's ``template``, research/tiling.md §2).

docs/fa_varlen.md is the contract. On each AI Core the AIC computes score tiles (mm1 = Q K^T) and
P V (mm2) into the GM workspace; the AIVs run pse, scale, mask, online softmax, dropout (vec1) and the
running output kept in the workspace (vec2). Step t of the task loop (``flash_attention_var_len_score_sab.h``
Process; ``flash_attention_var_len_score.h`` :468-553 for vector-master, the same three-deep ring):

    AIV: wait C1V1(t-1)   AIC: mm1(t), set C1V1(t)   AIV: vec1(t-1), set V1C2(t-1); wait C2V2(t-2)
    AIC: wait V1C2(t-1), mm2(t-1), set C2V2(t-1)      AIV: vec2(t-2)

SameAB: one worker per AI Core, its items' rows split between the two AIVs. Vector-master: each AIV is
a worker with its own items (all rows) and workspace; its Matmul calls run on the AIC, which serves the
two AIVs' requests step by step (mm1 of both, then mm2 of both: the CANN kernel's Matmul API answers
the requests in arrival order, which on two identical task streams is this order), so K and V are loaded
once per AIV, not shared. An AIV with fewer tasks than its sibling keeps the flag handshake for the
remaining steps without work.

Workspace per worker: mm1Res[2], stage1Res[2], mm2Res[2] (task parity), vec2Res[2] (item parity).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.kernel import (ASCEND_IS_AIC, CMPMODE, SELMODE, Add, Cast, Compare, Copy, CrossCoreSetFlag,
                           CrossCoreWaitFlag, DataCopy, DataCopyParams, Duplicate, Exp, Fixpipe, FixpipeParamsV220,
                           GetBlockIdx, GetSubBlockIdx, HardEvent, Max, Mul, Muls, Nd2NzParams,
                           Pipe, PipeBarrier, RoundMode, Select, SetFlag, Sub, SyncAll, TBuf, TPipe, TPosition, TQue,
                           WaitFlag)
from ops.common.cube_tiles import CubeTiles, c16
from ops.common.dropout import ApplyDropout, DropMaskAdapter, keep_bit_offset
from ops.common.masks import COMPRESSED_MASK_SIZE, causal_tile_offset, prefix_tile_reads
from ops.common.pse import ALIBI_ROWS, AddPseSlice, alibi_read_window, alibi_slice_needed, full_pse_offset
from ops.common.transpose import TransposeHeads
from ops.common.rowops import BroadcastRows, BytesToBits, CopyRowsIn, CopyRowsOut, RowBroadcast, RowReduce
from ops.flash_attention_var_len_score.tiling import (CMP_CHUNK, CUBE_M, L0C_BUFFER_BYTES, SAME_AB, FaVarLenTilingData,
                                                      vector_rows)

SYNC_C1_V1 = (4, 5, 6)  # cross-core flag rings (SYNC_C1_V1_FLAG etc. of the SameAB kernel)
SYNC_V1_C2 = (7, 8, 9)
SYNC_C2_V2 = (1, 2, 3)
FLAG_VT = 10  # fp32 only: V^T is in the workspace
BUFFER_NUM = 2
NEG = float(np.finfo(np.float32).min)  # -FLT_MAX: masked score, invalid-row max (tiling.md §0, §2)
POS = float(np.finfo(np.float32).max)  # +FLT_MAX: invalid-row sum (tiling.md §2)
F16, F32, U8 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.uint8)


@dataclass(frozen=True)
class FaVarLenKernelArgs:
    """Per-call constants besides the tiling: sequence offsets, tokens, forms (host control data)."""

    cuQ: tuple
    cuKv: tuple
    seqQ: tuple
    seqKv: tuple
    cuSS: tuple
    preLU: tuple
    nextLU: tuple
    prefixN: tuple
    sparseMode: int
    maskForm: str  # none | full | causal_2048 | prefix_3072
    maskCols: int
    pseForm: str  # none | full | alibi
    pseB: int
    pseS2: int
    dropout: bool
    dropBits: int
    invalidRowCalc: bool
    softmaxLayout: str  # TND | per_batch
    inDtype: np.dtype


def _a64(x: int) -> int:
    return -(-x // 64) * 64


class KernelFlashAttentionVarLenScore:
    # ------------------------------------------------------------------------------------- common
    def Init(self, query, key, value, realShift, dropMask, attenMask, softmaxMax, softmaxSum, attentionOut,
             workspace, tiling: FaVarLenTilingData, args: FaVarLenKernelArgs):
        self.t, self.a = tiling, args
        self.qGm, self.kGm, self.vGm, self.pseGm, self.dropGm, self.maskGm = query, key, value, realShift, dropMask, \
            attenMask
        self.maxGm, self.sumGm, self.outGm = softmaxMax, softmaxSum, attentionOut
        self.inDt = np.dtype(args.inDtype)
        self.isz = self.inDt.itemsize
        self.D, self.Dp = tiling.dSize, tiling.dSizeAlign16
        self.W, self.s1B = tiling.s2BaseNratioSize, tiling.s1BaseSize
        self.E = tiling.vec1Elems
        self.sab = tiling.template == SAME_AB
        self.core = GetBlockIdx() if ASCEND_IS_AIC() else GetBlockIdx() // 2
        # workers this stream serves: SameAB one per AI Core; vector-master the AIV's own, or both on the AIC
        if self.sab:
            self.units = [self.core]
        else:
            self.units = [2 * self.core, 2 * self.core + 1] if ASCEND_IS_AIC() else [GetBlockIdx()]
        self.taskLists = [self._worker_tasks(u) for u in self.units]
        # steps of the AI Core's loop: its longest worker's tasks (the AIVs keep the handshake that long)
        self.steps = max(len(self._worker_tasks(u)) for u in
                         ([self.core] if self.sab else [2 * self.core, 2 * self.core + 1]))
        self.tasks = self.taskLists[0]
        s1b, w, dp, isz = self.s1B, self.W, self.Dp, self.isz
        slot_s, slot_p, slot_o = s1b * w * 4, s1b * w * isz, s1b * dp * 4
        self.ws = []
        for u in self.units:
            base = u * tiling.coreWorkspaceBytes
            mm1 = [workspace[base + i * slot_s].ReinterpretCast(F32) for i in range(2)]
            base += 2 * slot_s
            st1 = [workspace[base + i * slot_p].ReinterpretCast(self.inDt) for i in range(2)]
            base += 2 * slot_p
            mm2 = [workspace[base + i * slot_o].ReinterpretCast(F32) for i in range(2)]
            base += 2 * slot_o
            vec2 = [workspace[base + i * slot_o].ReinterpretCast(F32) for i in range(2)]
            self.ws.append((mm1, st1, mm2, vec2))
        self.mm1Res, self.stage1Res, self.mm2Res, self.vec2Res = self.ws[0]
        self.dropBytesGm = workspace[tiling.dropBytesOffset] if not tiling.dropMaskBitMode else None
        self.vTGm = workspace[tiling.vTransOffset].ReinterpretCast(F32) if isz == 4 else None
        self.pipe = TPipe()

    def Process(self):
        if ASCEND_IS_AIC():
            self.InitCube()
            self.ProcessCube()
        else:
            self.PrePass()
            self.InitVector()
            self.ProcessVector()

    def _worker_tasks(self, u: int) -> list:
        """(item, tile, first, last) of every task of worker *u* (none past the tiling's workers)."""
        ti, tasks = self.t, []
        if u >= ti.workers:
            return tasks
        for item in range(ti.sparseStartIdx[u], ti.sparseStartIdx[u + 1]):
            n = ti.tiles(item)
            tasks.extend((item, k, k == 0, k == n - 1) for k in range(n))
        return tasks

    def _task(self, t: int, k: int = 0):
        """(b, n, s1o, rows, col0, cols, pitch, first, last) of task t of local worker k."""
        ti = self.t
        item, k, first, last = self.taskLists[k][t]
        col0 = ti.itemS2Start[item] + k * self.W
        cols = min(self.W, ti.itemS2End[item] - col0)
        return ti.itemB[item], ti.itemN[item], ti.itemS1o[item], ti.itemRows[item], col0, cols, _a64(cols), first, last

    # ------------------------------------------------------------------------------------- cube (AIC)
    def InitCube(self):
        ti, dp, isz = self.t, self.Dp, self.isz
        self.tiles = CubeTiles(self.pipe, self.inDt)
        self.kQue = TQue(TPosition.B1, BUFFER_NUM)
        # Q blocks: one queue of qBufNum buffers (SameAB), or one single-buffer queue per worker (vector-master:
        # each worker's Q stays resident while the other's item changes)
        qNum = ti.qBufNum if self.sab else 1
        self.qQues = [TQue(TPosition.A1, qNum) for _ in self.units]
        self.pQue, self.vQue = TQue(TPosition.A1, BUFFER_NUM), TQue(TPosition.B1, BUFFER_NUM)
        self.cQue = TQue(TPosition.CO1, BUFFER_NUM)
        for que in self.qQues:
            self.pipe.InitBuffer(que, qNum, self.s1B * dp * isz)
        self.pipe.InitBuffer(self.kQue, BUFFER_NUM, ti.nChunk * dp * isz)
        self.pipe.InitBuffer(self.pQue, BUFFER_NUM, self.s1B * ti.kChunk * isz)
        self.pipe.InitBuffer(self.vQue, BUFFER_NUM, CUBE_M * ti.kChunk * isz)
        self.pipe.InitBuffer(self.cQue, BUFFER_NUM, L0C_BUFFER_BYTES)
        self.qL1 = [None] * len(self.units)

    def ProcessCube(self):
        n = self.steps
        self.vtReady = self.isz != 4
        for t in range(n):
            for k, tasks in enumerate(self.taskLists):
                if t < len(tasks):
                    self.ComputeMm1(t, k)
            CrossCoreSetFlag(SYNC_C1_V1[t % 3], Pipe.FIX)
            if t >= 1:
                self.Mm2Step(t - 1)
        if n:
            self.Mm2Step(n - 1)
        if not self.vtReady:
            CrossCoreWaitFlag(FLAG_VT)
        for que, q in zip(self.qQues, self.qL1):
            if q is not None:
                que.FreeTensor(q)

    def Mm2Step(self, t: int):
        if not self.vtReady:
            CrossCoreWaitFlag(FLAG_VT)
            self.vtReady = True
        CrossCoreWaitFlag(SYNC_V1_C2[t % 3])
        for k, tasks in enumerate(self.taskLists):
            if t < len(tasks):
                self.ComputeMm2(t, k)
        CrossCoreSetFlag(SYNC_C2_V2[t % 3], Pipe.FIX)

    def ComputeMm1(self, t: int, k: int = 0):
        a, ti, D = self.a, self.t, self.D
        b, n, s1o, rows, _, cols, _, first, _ = self._task(t, k)
        n1d = ti.n1Size * D
        if first:
            if self.qL1[k] is not None:
                self.qQues[k].FreeTensor(self.qL1[k])
            qL1 = self.qQues[k].AllocTensor(self.inDt)
            off = (a.cuQ[b] + s1o * self.s1B) * n1d + n * D
            DataCopy(qL1, self.qGm[off], Nd2NzParams(1, rows, D, 0, n1d, c16(rows), 1, 0))
            self.qQues[k].EnQue(qL1)
            self.qL1[k] = self.qQues[k].DeQue(self.inDt)
        for nc in range(0, cols, ti.nChunk):
            self.ComputeMm1Chunk(t, k, nc)

    def ComputeMm1Chunk(self, t: int, k: int, nc: int):
        """Scores of task t's columns nc .. nc + nChunk: that K chunk to L1, Q K^T per 128 rows, to the slot."""
        a, ti, D = self.a, self.t, self.D
        b, n, _, rows, col0, cols, pitch, _, _ = self._task(t, k)
        n2d = ti.n2Size * D
        qL1 = self.qL1[k]
        kvOff = a.cuKv[b] * n2d + (n // ti.gSize) * D
        wsS = self.ws[k][0][t % 2]
        ncols = min(ti.nChunk, cols - nc)
        kL1 = self.kQue.AllocTensor(self.inDt)
        DataCopy(kL1, self.kGm[kvOff + (col0 + nc) * n2d], Nd2NzParams(1, ncols, D, 0, n2d, c16(ncols), 1, 0))
        self.kQue.EnQue(kL1)
        kL1 = self.kQue.DeQue(self.inDt)
        for mc in range(0, rows, CUBE_M):
            mrows = min(CUBE_M, rows - mc)
            cL0 = self.cQue.AllocTensor(F32)
            for kc in range(0, D, ti.kChunk):
                kcols = min(ti.kChunk, D - kc)
                self.tiles.SplitA(qL1, c16(rows) // 16, mc, mrows, kc, kcols)
                self.tiles.SplitBTransposed(kL1, c16(ncols) // 16, kc, kcols)
                self.tiles.Compute(cL0, mrows, ncols, kcols, kc == 0)
            self.cQue.EnQue(cL0)
            cL0 = self.cQue.DeQue(F32)
            Fixpipe(wsS[mc * pitch + nc], cL0,
                    FixpipeParamsV220(nSize=ncols, mSize=mrows, srcStride=c16(mrows), dstStride=pitch))
            self.cQue.FreeTensor(cL0)
        self.kQue.FreeTensor(kL1)

    def ComputeMm2(self, t: int, k: int = 0):
        """P V per 128 columns of D: each k chunk of P (all block rows) and of V is loaded to L1 once and
        multiplied into one L0C accumulator per 128-row chunk (the SameAB ComputeMm2 reuse)."""
        ti, D, dp = self.t, self.D, self.Dp
        _, _, _, rows, _, cols, _, _, _ = self._task(t, k)
        wsPV = self.ws[k][2][t % 2]
        chunks = [(mc, min(CUBE_M, rows - mc)) for mc in range(0, rows, CUBE_M)]
        for dn in range(0, D, CUBE_M):
            dcols = min(CUBE_M, D - dn)
            accs = [self.cQue.AllocTensor(F32) for _ in chunks]
            for kc in range(0, cols, ti.kChunk):
                self.ComputeMm2Chunk(t, k, dn, kc, accs)
            for (mc, mrows), cL0 in zip(chunks, accs):
                self.cQue.EnQue(cL0)
                cL0 = self.cQue.DeQue(F32)
                Fixpipe(wsPV[mc * dp + dn], cL0,
                        FixpipeParamsV220(nSize=dcols, mSize=mrows, srcStride=c16(mrows), dstStride=dp))
                self.cQue.FreeTensor(cL0)

    def ComputeMm2Chunk(self, t: int, k: int, dn: int, kc: int, accs: list):
        """P V of task t's columns kc .. kc + kChunk and D columns dn .. dn + 128: that chunk of P and of V
        to L1, one Mmad per 128-row accumulator of *accs* (the first chunk initialises them)."""
        a, ti, D = self.a, self.t, self.D
        b, n, _, rows, col0, cols, pitch, _, _ = self._task(t, k)
        n2d, n2 = ti.n2Size * D, n // ti.gSize
        wsP = self.ws[k][1][t % 2]
        dcols, kcols = min(CUBE_M, D - dn), min(ti.kChunk, cols - kc)
        pL1 = self.pQue.AllocTensor(self.inDt)
        DataCopy(pL1, wsP[kc], Nd2NzParams(1, rows, kcols, 0, pitch, c16(rows), 1, 0))
        self.pQue.EnQue(pL1)
        vL1 = self.vQue.AllocTensor(self.inDt)
        if self.isz == 4:  # V^T rows (d) from the pre-pass: NZ of B^T
            src = self.vTGm[(n2 * D + dn) * ti.vTransPitch + a.cuKv[b] + col0 + kc]
            DataCopy(vL1, src, Nd2NzParams(1, dcols, kcols, 0, ti.vTransPitch, c16(dcols), 1, 0))
        else:
            src = self.vGm[(a.cuKv[b] + col0 + kc) * n2d + n2 * D + dn]
            DataCopy(vL1, src, Nd2NzParams(1, kcols, dcols, 0, n2d, c16(kcols), 1, 0))
        self.vQue.EnQue(vL1)
        pL1 = self.pQue.DeQue(self.inDt)
        vL1 = self.vQue.DeQue(self.inDt)
        for mc, cL0 in zip(range(0, rows, CUBE_M), accs):
            mrows = min(CUBE_M, rows - mc)
            self.tiles.SplitA(pL1, c16(rows) // 16, mc, mrows, 0, kcols)
            if self.isz == 4:
                self.tiles.SplitBTransposed(vL1, c16(dcols) // 16, 0, kcols)
            else:
                self.tiles.SplitB(vL1, c16(kcols) // 16, kcols, dcols)
            self.tiles.Compute(cL0, mrows, dcols, kcols, kc == 0)
        self.pQue.FreeTensor(pL1)
        self.vQue.FreeTensor(vL1)

    # ------------------------------------------------------------------------------------- AIV pre-passes
    def PrePass(self):
        """Byte drop mask (unaligned rows) and, for fp32, V^T; both end with SyncAll on every AIV."""
        if self.a.dropout and not self.t.dropMaskBitMode:
            DropMaskAdapter(self.dropGm, self.dropBytesGm, self.a.dropBits)
        if self.isz == 4:
            self.TransposeV()
            CrossCoreSetFlag(FLAG_VT, Pipe.MTE3)

    def TransposeV(self):
        """V (T2 rows of N2*D) -> V^T per kv head [N2, D, vTransPitch] in the workspace (Gather)."""
        ti = self.t
        TransposeHeads(self.vGm, self.vTGm, ti.t2Size, ti.n2Size, self.D, ti.vTransPitch)
        SyncAll()

    # ------------------------------------------------------------------------------------- vector (AIV)
    def InitVector(self):
        a, E, isz = self.a, self.E, self.isz
        self.pipe = TPipe()
        self.sub = GetSubBlockIdx()
        self.inS = TQue(TPosition.VECIN, BUFFER_NUM)
        self.pipe.InitBuffer(self.inS, BUFFER_NUM, E * 4)
        self.common, self.bits = TBuf(), TBuf()
        self.pipe.InitBuffer(self.common, E * 4)
        self.pipe.InitBuffer(self.bits, E // 8)
        if isz != 4:
            self.outP = TQue(TPosition.VECOUT, BUFFER_NUM)
            self.pipe.InitBuffer(self.outP, BUFFER_NUM, E * isz)
        if a.maskForm != "none" or a.dropout:
            self.zeros = TBuf()
            self.pipe.InitBuffer(self.zeros, CMP_CHUNK * 2)
        if a.maskForm != "none":
            depth = 2 if a.maskForm == "prefix_3072" else 1
            self.maskQ = TQue(TPosition.VECIN, depth)
            self.pipe.InitBuffer(self.maskQ, depth, E)
        if a.pseForm != "none":
            self.pseQ = TQue(TPosition.VECIN, 1)
            self.pipe.InitBuffer(self.pseQ, 1, E * isz)
        if a.dropout:
            self.dropQ = TQue(TPosition.VECIN, 1)
            self.pipe.InitBuffer(self.dropQ, 1, E)
        h8 = -(-vector_rows(self.s1B, self.t.template) // 8) * 8
        blk = h8 * 32
        names = ["m8", "l8a", "l8b", "al8a", "al8b", "x8", "y8"] + (["neg8", "one8"] if a.invalidRowCalc else [])
        self.stat = {}
        for name in names:
            self.stat[name] = TBuf()
            self.pipe.InitBuffer(self.stat[name], blk)
        self.rowv = TBuf()
        self.pipe.InitBuffer(self.rowv, -(-h8 * 4 // 32) * 32)
        if a.maskForm != "none" or a.dropout:
            Duplicate(self.zeros.Get(F16), 0.0, CMP_CHUNK)
        if a.invalidRowCalc:
            Duplicate(self.stat["neg8"].Get(F32), NEG, h8 * 8)
            Duplicate(self.stat["one8"].Get(F32), 1.0, h8 * 8)
        PipeBarrier(Pipe.V)

    def _my_rows(self, rows: int) -> tuple[int, int]:
        """(first row, rows) of a block this AIV works on: its half (SameAB) or all (vector-master)."""
        if not self.sab:
            return 0, rows
        h = -(-rows // 2)
        return (0, h) if self.sub == 0 else (h, rows - h)

    def ProcessVector(self):
        n, own = self.steps, len(self.tasks)
        par, self.par = -1, []
        for item, k, first, last in self.tasks:
            par += first
            self.par.append(par % 2)
        for t in range(1, n + 1):
            CrossCoreWaitFlag(SYNC_C1_V1[(t - 1) % 3])
            if t - 1 < own:
                self.ProcessVec1(t - 1)
            CrossCoreSetFlag(SYNC_V1_C2[(t - 1) % 3], Pipe.MTE3)
            if t >= 2:
                CrossCoreWaitFlag(SYNC_C2_V2[(t - 2) % 3])
                if t - 2 < own:
                    self.ProcessVec2(t - 2)
        if n:
            CrossCoreWaitFlag(SYNC_C2_V2[(n - 1) % 3])
            if n - 1 < own:
                self.ProcessVec2(n - 1)

    # ---- vec1: softmax of one score tile
    def ProcessVec1(self, t: int):
        a = self.a
        b, n, s1o, rows, _, _, pitch, _, last = self._task(t)
        lo, mine = self._my_rows(rows)
        if not mine:
            return
        sliceRows = min(self.E // pitch, mine)
        for r in range(0, mine, sliceRows):
            self.ProcessVec1Slice(t, r, sliceRows)
        if last:
            st = self.stat
            m8, l8 = st["m8"].Get(F32), st["l8a" if self.par[t] == 0 else "l8b"].Get(F32)
            if a.invalidRowCalc:  # sum := +FLT_MAX where the final max is NEG
                bits = self.bits.Get(U8)
                Compare(bits, m8, st["neg8"].Get(F32), CMPMODE.NE, mine * 8)
                PipeBarrier(Pipe.V)
                Select(l8, bits, l8, POS, SELMODE.VSEL_TENSOR_SCALAR_MODE, mine * 8)
                PipeBarrier(Pipe.V)
            self.SoftmaxOut(self.maxGm, m8, b, n, s1o * self.s1B + lo, mine)

    def ProcessVec1Slice(self, t: int, r: int, sliceRows: int):
        """Rows r .. r + sliceRows of this AIV's rows of tile t (one UB slice): pse, scale, mask, online
        softmax, dropout, P to the workspace."""
        a = self.a
        b, n, s1o, rows, col0, cols, pitch, first, _ = self._task(t)
        lo, mine = self._my_rows(rows)
        st = self.stat
        m8, l8 = st["m8"].Get(F32), st["l8a" if self.par[t] == 0 else "l8b"].Get(F32)
        al8 = st["al8a" if t % 2 == 0 else "al8b"].Get(F32)
        x8, y8, rowv = st["x8"].Get(F32), st["y8"].Get(F32), self.rowv.Get(F32)
        acc = self.common.Get(F32)
        sr = min(sliceRows, mine - r)
        r0 = s1o * self.s1B + lo + r
        cnt = sr * pitch
        S = self.inS.AllocTensor(F32)
        DataCopy(S, self.mm1Res[t % 2][(lo + r) * pitch], cnt)
        self.inS.EnQue(S)
        S = self.inS.DeQue(F32)
        if a.pseForm != "none":
            self.AddPse(S, b, n, r0, col0, sr, cols, pitch, sliceRows)
        Muls(S, S, self.t.scaleValue, cnt)
        PipeBarrier(Pipe.V)
        self.ApplyMask(S, b, r0, col0, sr, cols, pitch, sliceRows)
        mr, lr, ar = m8[r * 8:], l8[r * 8:], al8[r * 8:]
        RowReduce("max", rowv, S, acc, sr, cols, pitch)
        PipeBarrier(Pipe.V)
        BroadcastRows(x8, rowv, sr)
        PipeBarrier(Pipe.V)
        if first:
            Copy(mr, x8, sr * 8)
        else:  # m_new = max(m, mx); alpha = exp(m - m_new); m = m_new
            Max(y8, mr, x8, sr * 8)
            PipeBarrier(Pipe.V)
            Sub(x8, mr, y8, sr * 8)
            PipeBarrier(Pipe.V)
            Exp(ar, x8, sr * 8)
            Copy(mr, y8, sr * 8)
        PipeBarrier(Pipe.V)
        RowBroadcast("sub", S, S, mr, sr, cols, pitch)
        PipeBarrier(Pipe.V)
        Exp(S, S, cnt)
        PipeBarrier(Pipe.V)
        RowReduce("sum", rowv, S, acc, sr, cols, pitch)
        PipeBarrier(Pipe.V)
        BroadcastRows(x8, rowv, sr)
        PipeBarrier(Pipe.V)
        if first:
            Copy(lr, x8, sr * 8)
        else:  # l = l * alpha + rowsum
            Mul(lr, lr, ar, sr * 8)
            PipeBarrier(Pipe.V)
            Add(lr, lr, x8, sr * 8)
        PipeBarrier(Pipe.V)
        if a.invalidRowCalc:  # AdjustSoftMaxRes: rows whose max is still NEG -> P = 0
            self._valid_rows_factor(x8, mr, sr)
            RowBroadcast("mul", S, S, x8, sr, cols, pitch)
            PipeBarrier(Pipe.V)
        if a.dropout:
            self.Dropout(S, b, n, r0, col0, sr, cols, pitch)
        self.CopyOutP(S, self.stage1Res[t % 2][(lo + r) * pitch], cnt)

    def _valid_rows_factor(self, dst8, m8, rows: int):
        """dst8 row r = 1.0 where m8 row r != NEG else 0.0 ([rows, 8] blocks)."""
        bits = self.bits.Get(U8)
        Compare(bits, m8, self.stat["neg8"].Get(F32), CMPMODE.NE, rows * 8)
        PipeBarrier(Pipe.V)
        Select(dst8, bits, self.stat["one8"].Get(F32), 0.0, SELMODE.VSEL_TENSOR_SCALAR_MODE, rows * 8)
        PipeBarrier(Pipe.V)

    def CopyOutP(self, S, dst, cnt: int):
        """P in the input dtype (CAST_ROUND) to the workspace; fp32: the slice itself."""
        if self.isz == 4:
            SetFlag(HardEvent.V_MTE3, 0)
            WaitFlag(HardEvent.V_MTE3, 0)
            DataCopy(dst, S, cnt)
            SetFlag(HardEvent.MTE3_V, 0)
            WaitFlag(HardEvent.MTE3_V, 0)
            self.inS.FreeTensor(S)
            return
        P = self.outP.AllocTensor(self.inDt)
        Cast(P, S, RoundMode.CAST_ROUND, cnt)
        self.inS.FreeTensor(S)
        self.outP.EnQue(P)
        P = self.outP.DeQue(self.inDt)
        DataCopy(dst, P, cnt)
        self.outP.FreeTensor(P)

    def SoftmaxOut(self, gm, v8, b: int, n: int, row0: int, rows: int):
        """[rows, 8] fp32 blocks to softmax_max / softmax_sum in the chosen layout."""
        a, n1 = self.a, self.t.n1Size
        SetFlag(HardEvent.V_MTE3, 1)
        WaitFlag(HardEvent.V_MTE3, 1)
        if a.softmaxLayout == "TND":
            DataCopy(gm[((a.cuQ[b] + row0) * n1 + n) * 8], v8, DataCopyParams(rows, 1, 0, n1 - 1))
        else:
            DataCopy(gm[(a.cuQ[b] * n1 + n * a.seqQ[b] + row0) * 8], v8, rows * 8)
        SetFlag(HardEvent.MTE3_V, 1)
        WaitFlag(HardEvent.MTE3_V, 1)

    # ---- pse, masks, dropout
    def AddPse(self, S, b: int, n: int, r0: int, col0: int, sr: int, cols: int, pitch: int, sliceRows: int):
        window = self._pse_window(b, n, r0, col0, cols, sliceRows)
        if window is None:
            return
        off, gm_pitch, read = window
        p = self.pseQ.AllocTensor(self.inDt)
        AddPseSlice(S, p, self.common.Get(F32), self.pseGm[off], sr, read, gm_pitch, pitch, self.pseQ)

    def _pse_window(self, b: int, n: int, r0: int, col0: int, cols: int, sliceRows: int):
        """(element offset, row pitch, columns read) of a slice's pse rows in GM; None when an alibi slice
        needs none (every row above the diagonal)."""
        a = self.a
        if a.pseForm == "full":
            off = full_pse_offset(self.t.n1Size, a.cuSS[b], a.seqQ[b] * a.seqKv[b], a.seqKv[b], n, r0, col0)
            return off, a.seqKv[b], cols
        if not alibi_slice_needed(r0, sliceRows, col0):
            return None
        m0, k0 = alibi_read_window(r0, col0, a.pseS2)
        off = (((b % a.pseB) * self.t.n1Size + n) * ALIBI_ROWS + m0) * a.pseS2 + k0
        return off, a.pseS2, min(cols, a.pseS2 - k0)

    def ApplyMask(self, S, b: int, r0: int, col0: int, sr: int, cols: int, pitch: int, sliceRows: int):
        """Masked scores := NEG (docs/fa_varlen.md step 4)."""
        a = self.a
        if a.maskForm == "none":
            return
        if a.maskForm == "full":
            self._select_window(S, r0 * a.maskCols + col0, a.maskCols, sr, cols, pitch, CMPMODE.EQ)
            return
        if a.maskForm == "causal_2048":
            off = self._causal_window(b, r0, col0, pitch, sliceRows)
            if off is not None:
                self._select_window(S, off, COMPRESSED_MASK_SIZE, sr, cols, pitch, CMPMODE.EQ)
            if a.sparseMode == 4:
                dpre = r0 - col0 - a.preLU[b] - 1
                if dpre + 1 + sliceRows > 0:
                    off = causal_tile_offset(dpre, sliceRows, self.W)
                    self._select_window(S, off, COMPRESSED_MASK_SIZE, sr, cols, pitch, CMPMODE.NE)
            return
        # prefix (mode 6): masked iff causal window and rectangle window are both 1
        kind, causal, rect = prefix_tile_reads(r0, col0, a.seqQ[b], a.seqKv[b], a.prefixN[b], sliceRows, self.W,
                                               pitch)
        if kind in ("causal", "rect"):
            off = causal if kind == "causal" else rect
            self._select_window(S, off, COMPRESSED_MASK_SIZE, sr, cols, pitch, CMPMODE.EQ)
        elif kind == "both":
            self._select_and_windows(S, causal, rect, sr, cols, pitch)

    def _causal_window(self, b: int, r0: int, col0: int, pitch: int, sliceRows: int):
        """Offset of a slice's window of the compressed causal mask (the next-tokens diagonal), None when the
        diagonal leaves the slice's columns unmasked."""
        delta = r0 - col0 + self.a.nextLU[b]
        return causal_tile_offset(delta, sliceRows, self.W) if delta < pitch else None

    def _load_window(self, off: int, gm_pitch: int, sr: int, cols: int, pitch: int):
        m = self.maskQ.AllocTensor(U8)
        CopyRowsIn(m, self.maskGm[off], sr, cols, gm_pitch, pitch)
        self.maskQ.EnQue(m)
        return self.maskQ.DeQue(U8)

    def _select_window(self, S, off: int, gm_pitch: int, sr: int, cols: int, pitch: int, keep: CMPMODE):
        """Keep scores where the mask window byte *keep* 0 (EQ: keep where 0), else NEG."""
        m = self._load_window(off, gm_pitch, sr, cols, pitch)
        bits, half, zeros = self.bits.Get(U8), self.common.Get(F16), self.zeros.Get(F16)
        BytesToBits(bits, m.ReinterpretCast(self._mask_dt()), half, zeros, sr * pitch, keep, CMP_CHUNK)
        self.maskQ.FreeTensor(m)
        Select(S, bits, S, NEG, SELMODE.VSEL_TENSOR_SCALAR_MODE, sr * pitch)
        PipeBarrier(Pipe.V)

    def _select_and_windows(self, S, off1: int, off2: int, sr: int, cols: int, pitch: int):
        """Keep scores unless both windows hold a nonzero byte (fp16 product != 0).

        The two fp16 halves share the E*4-byte common buffer, so a step converts at most E elements of each
        window (min(CMP_CHUNK, E)): with vec1Elems = 1024 a 2048-element half would leave the buffer."""
        m1 = self._load_window(off1, COMPRESSED_MASK_SIZE, sr, cols, pitch)
        m2 = self._load_window(off2, COMPRESSED_MASK_SIZE, sr, cols, pitch)
        step = min(CMP_CHUNK, self.E)
        h1, h2 = self.common.Get(F16), self.common.Get(F16)[step:]
        bits, zeros, dt = self.bits.Get(U8), self.zeros.Get(F16), self._mask_dt()
        total = sr * pitch
        for k in range(0, total, step):
            cnt = min(step, total - k)
            Cast(h1, m1[k:].ReinterpretCast(dt), RoundMode.CAST_NONE, cnt)
            Cast(h2, m2[k:].ReinterpretCast(dt), RoundMode.CAST_NONE, cnt)
            PipeBarrier(Pipe.V)
            Mul(h1, h1, h2, cnt)
            PipeBarrier(Pipe.V)
            Compare(bits[k // 8:], h1, zeros, CMPMODE.EQ, cnt)
            PipeBarrier(Pipe.V)
        self.maskQ.FreeTensor(m1)
        self.maskQ.FreeTensor(m2)
        Select(S, bits, S, NEG, SELMODE.VSEL_TENSOR_SCALAR_MODE, total)
        PipeBarrier(Pipe.V)

    def _mask_dt(self):
        return np.int8 if np.dtype(self.maskGm.dtype) == np.int8 else U8

    def Dropout(self, S, b: int, n: int, r0: int, col0: int, sr: int, cols: int, pitch: int):
        a, ti = self.a, self.t
        bit0 = keep_bit_offset(ti.n1Size, a.cuSS[b], n, a.seqQ[b], a.seqKv[b], r0, col0)
        ApplyDropout(S, self.dropQ, self.dropGm, self.dropBytesGm, bit0, sr, cols, a.seqKv[b], pitch, ti.keepProbRecip,
                     ti.dropMaskBitMode, self.bits.Get(U8), self.common.Get(F16), self.zeros.Get(F16), CMP_CHUNK)

    # ---- vec2: running output
    def ProcessVec2(self, t: int):
        a, ti, D, dp, E = self.a, self.t, self.D, self.Dp, self.E
        b, n, s1o, rows, col0, cols, pitch, first, last = self._task(t)
        lo, mine = self._my_rows(rows)
        if not mine:
            return
        st = self.stat
        l8 = st["l8a" if self.par[t] == 0 else "l8b"].Get(F32)
        al8 = st["al8a" if t % 2 == 0 else "al8b"].Get(F32)
        o_ws = self.vec2Res[self.par[t]]
        rows2 = min(E // dp, mine)
        n1d = ti.n1Size * D
        for r in range(0, mine, rows2):
            pr = min(rows2, mine - r)
            cnt = pr * dp
            pv = self.inS.AllocTensor(F32)
            DataCopy(pv, self.mm2Res[t % 2][(lo + r) * dp], cnt)
            self.inS.EnQue(pv)
            pv = self.inS.DeQue(F32)
            if first:
                O = pv
            else:  # O = alpha * O + PV
                O = self.inS.AllocTensor(F32)
                DataCopy(O, o_ws[(lo + r) * dp], cnt)
                self.inS.EnQue(O)
                O = self.inS.DeQue(F32)
                RowBroadcast("mul", O, O, al8[r * 8:], pr, dp, dp)
                PipeBarrier(Pipe.V)
                Add(O, O, pv, cnt)
                PipeBarrier(Pipe.V)
                self.inS.FreeTensor(pv)
            if last:
                RowBroadcast("div", O, O, l8[r * 8:], pr, dp, dp)
                PipeBarrier(Pipe.V)
                off = (a.cuQ[b] + s1o * self.s1B + lo + r) * n1d + n * D
                self.CopyOutO(O, off, pr)
            else:
                SetFlag(HardEvent.V_MTE3, 2)
                WaitFlag(HardEvent.V_MTE3, 2)
                DataCopy(o_ws[(lo + r) * dp], O, cnt)
                SetFlag(HardEvent.MTE3_V, 2)
                WaitFlag(HardEvent.MTE3_V, 2)
            self.inS.FreeTensor(O)
        if last:
            self.SoftmaxOut(self.sumGm, l8, b, n, s1o * self.s1B + lo, mine)

    def CopyOutO(self, O, off: int, pr: int):
        """attention_out rows: cast (CAST_ROUND) and copy D columns into the TND output."""
        D, dp, n1d = self.D, self.Dp, self.t.n1Size * self.D
        if self.isz == 4:
            SetFlag(HardEvent.V_MTE3, 2)
            WaitFlag(HardEvent.V_MTE3, 2)
            CopyRowsOut(self.outGm[off], O, pr, D, dp, n1d)
            SetFlag(HardEvent.MTE3_V, 2)
            WaitFlag(HardEvent.MTE3_V, 2)
            return
        out = self.outP.AllocTensor(self.inDt)
        Cast(out, O, RoundMode.CAST_ROUND, pr * dp)
        self.outP.EnQue(out)
        out = self.outP.DeQue(self.inDt)
        CopyRowsOut(self.outGm[off], out, pr, D, dp, n1d)
        self.outP.FreeTensor(out)


def flash_attention_var_len_score(query, key, value, realShift, dropMask, attenMask, softmaxMax, softmaxSum,
                                  attentionOut, workspace, tiling: FaVarLenTilingData, args: FaVarLenKernelArgs):
    """Kernel entry, named like the CANN kernel: build the class, Init, Process."""
    op = KernelFlashAttentionVarLenScore()
    op.Init(query, key, value, realShift, dropMask, attenMask, softmaxMax, softmaxSum, attentionOut, workspace,
            tiling, args)
    op.Process()


# -------------------------------------------------------------------------------- replay keys (timing mode)
# What each repeated step's instruction stream depends on (npusim/replay.py): a step called again with the
# same key and stream state is replayed from its recording instead of interpreted. Declared here, below the
# kernel, so that the kernel reads as CANN's and its line numbers (the trace's sources) stay put. The
# workspace slots a step reads and writes are given as regions (bases), so the slot parities and the UB
# statistics buffers (which change no instruction's cost) stay out of the keys, and the recordings are
# shared by all streams of the launch: every other GM transfer of a step moves with a base too. The hot steps'
# keys give their bases' byte addresses (replayable's bases=), so that a replayed step builds no GlobalTensor
# views; the views are built only when the step is recorded or looked up launch-wide.
from npusim.replay import replayable  # noqa: E402


def _slot_bytes(k: KernelFlashAttentionVarLenScore) -> tuple[int, int, int]:
    """Bytes of one workspace slot of scores, of P and of an output block (Init's layout)."""
    return k.s1B * k.W * 4, k.s1B * k.W * k.isz, k.s1B * k.Dp * 4


def _stat_offset(k: KernelFlashAttentionVarLenScore, b: int, n: int, row0: int) -> int:
    """SoftmaxOut's element offset of [row0, 8] in softmax_max / softmax_sum."""
    a, n1 = k.a, k.t.n1Size
    if a.softmaxLayout == "TND":
        return ((a.cuQ[b] + row0) * n1 + n) * 8
    return (a.cuQ[b] * n1 + n * a.seqQ[b] + row0) * 8


def _task_of(k: KernelFlashAttentionVarLenScore, t: int, w: int = 0) -> tuple:
    """``k._task(t, w)``, kept per kernel object: every step of a tile asks for it (its 16 slices' and 8 chunks'
    keys), and it is fixed once the kernel is initialised."""
    memo = k.__dict__.get("_replayTasks")
    if memo is None:
        memo = k._replayTasks = {}
    task = memo.get((t, w))
    if task is None:
        task = memo[(t, w)] = k._task(t, w)
    return task


def _byte(g, index: int) -> int:
    """Byte address in its GM buffer of element *index* of GlobalTensor *g* (``g[index].byte_offset``)."""
    return (g.offset + index) * g.dtype.itemsize


def _vec1_slice_parts(k: KernelFlashAttentionVarLenScore, t: int, r: int, sliceRows: int):
    """(key, first element of the slice in the score and P slots, elements, mask window, pse window) of
    ProcessVec1Slice, or None when it is not replayed (see :func:`_vec1_slice_key`)."""
    a = k.a
    if a.dropout or a.maskForm not in ("none", "full", "causal_2048") or a.sparseMode == 4:
        return None
    b, n, s1o, rows, col0, cols, pitch, first, _ = _task_of(k, t)
    lo, mine = k._my_rows(rows)
    cnt = min(sliceRows, mine - r) * pitch
    at, r0 = (lo + r) * pitch, s1o * k.s1B + lo + r
    window = None
    if a.maskForm == "full":
        window = r0 * a.maskCols + col0
    elif a.maskForm == "causal_2048":
        window = k._causal_window(b, r0, col0, pitch, sliceRows)
    pse = k._pse_window(b, n, r0, col0, cols, sliceRows) if a.pseForm != "none" else None
    return (first, cnt, cols, pitch, window is not None, pse and pse[1:]), at, cnt, window, pse


def _vec1_slice_key(k: KernelFlashAttentionVarLenScore, t: int, r: int, sliceRows: int):
    """ProcessVec1Slice without dropout, unmasked or with a full or causal (not band) mask: the tile's
    first-ness, the slice's rows, the columns, whether a mask window is read and the pse rows' pitch and width
    fix it; it reads its rows of the score slot and writes them to the P slot (a tile's slices repeat it); the
    mask window and the pse rows move with the slice. The bases (:func:`_vec1_slice_bases`) as byte addresses."""
    parts = _vec1_slice_parts(k, t, r, sliceRows)
    if parts is None:
        return None
    key, at, _, window, pse = parts
    addresses = (_byte(k.mm1Res[t % 2], at), _byte(k.stage1Res[t % 2], at))
    if window is not None:
        addresses += (_byte(k.maskGm, window),)
    if pse is not None:
        addresses += (_byte(k.pseGm, pse[0]),)
    return key, addresses


def _vec1_slice_bases(k: KernelFlashAttentionVarLenScore, t: int, r: int, sliceRows: int) -> tuple:
    """The regions of the score and P slots the slice reads and writes, the mask window, the pse rows."""
    _, at, cnt, window, pse = _vec1_slice_parts(k, t, r, sliceRows)
    bases = ((k.mm1Res[t % 2][at], cnt * 4), (k.stage1Res[t % 2][at], cnt * k.isz))
    if window is not None:
        bases += (k.maskGm[window],)
    if pse is not None:
        bases += (k.pseGm[pse[0]],)
    return bases


def _vec2_key(k: KernelFlashAttentionVarLenScore, t: int):
    """ProcessVec2: first/last tile and rows; it reads its PV slot and its item's running output slot; the
    last tile's output and softmax_sum rows move with the item."""
    b, n, s1o, rows, _, _, _, first, last = k._task(t)
    lo, mine = k._my_rows(rows)
    if not mine:
        return None
    _, _, o = _slot_bytes(k)
    bases = ((k.mm2Res[t % 2], o), (k.vec2Res[k.par[t]], o))
    if last:
        row0 = s1o * k.s1B + lo
        bases += (k.outGm[(k.a.cuQ[b] + row0) * k.t.n1Size * k.D + n * k.D],
                  k.sumGm[_stat_offset(k, b, n, row0)])
    return (first, last, lo, mine), bases


def _mm1_chunk_key(k: KernelFlashAttentionVarLenScore, t: int, w: int, nc: int):
    """ComputeMm1Chunk: worker, rows, the chunk's columns, the slot's pitch and the resident Q block fix it
    (a tile's chunks repeat it); it writes its columns of the score slot; K moves with the chunk. The bases
    (:func:`_mm1_chunk_bases`) as byte addresses."""
    _, _, _, rows, _, cols, pitch, _, _ = _task_of(k, t, w)
    return (w, rows, min(k.t.nChunk, cols - nc), pitch, k.qL1[w].addr), \
        (_byte(k.ws[w][0][t % 2], nc), _byte(k.kGm, _mm1_chunk_k(k, t, w, nc)))


def _mm1_chunk_bases(k: KernelFlashAttentionVarLenScore, t: int, w: int, nc: int) -> tuple:
    """The chunk's columns of the score slot (to the slot's end) and K at the chunk."""
    return ((k.ws[w][0][t % 2][nc], _slot_bytes(k)[0] - nc * 4), k.kGm[_mm1_chunk_k(k, t, w, nc)])


def _mm1_chunk_k(k: KernelFlashAttentionVarLenScore, t: int, w: int, nc: int) -> int:
    """Element index of K at the chunk (the key's base and the recording's must agree)."""
    b, n, _, _, col0, _, _, _, _ = _task_of(k, t, w)
    n2d = k.t.n2Size * k.D
    return k.a.cuKv[b] * n2d + (n // k.t.gSize) * k.D + (col0 + nc) * n2d


def _mm2_chunk_v(k: KernelFlashAttentionVarLenScore, t: int, w: int, dn: int, kc: int):
    """(GlobalTensor, element index, region bytes or None) of the chunk's V: V at the chunk, or for fp32 the
    region of V^T (workspace) it reads."""
    b, n, _, _, col0, cols, _, _, _ = _task_of(k, t, w)
    ti, D = k.t, k.D
    n2 = n // ti.gSize
    if k.isz == 4:
        kcols, dcols = min(ti.kChunk, cols - kc), min(CUBE_M, D - dn)
        return k.vTGm, (n2 * D + dn) * ti.vTransPitch + k.a.cuKv[b] + col0 + kc, \
            ((dcols - 1) * ti.vTransPitch + kcols) * 4
    return k.vGm, (k.a.cuKv[b] + col0 + kc) * ti.n2Size * D + n2 * D + dn, None


def _mm2_chunk_key(k: KernelFlashAttentionVarLenScore, t: int, w: int, dn: int, kc: int, accs: list):
    """ComputeMm2Chunk: worker, rows, the chunk's sizes and whether it initialises the accumulators fix it
    (a tile's chunks repeat it); it reads its columns of the P slot; V (fp32: V^T, a workspace region the
    pre-pass wrote) moves with the chunk. The bases (:func:`_mm2_chunk_bases`) as byte addresses."""
    _, _, _, rows, _, cols, pitch, _, _ = _task_of(k, t, w)
    ti = k.t
    v, at, _ = _mm2_chunk_v(k, t, w, dn, kc)
    return (w, rows, min(ti.kChunk, cols - kc), min(CUBE_M, k.D - dn), pitch, kc == 0), \
        (_byte(k.ws[w][1][t % 2], kc), _byte(v, at))


def _mm2_chunk_bases(k: KernelFlashAttentionVarLenScore, t: int, w: int, dn: int, kc: int, accs: list) -> tuple:
    """The chunk's columns of the P slot (to the slot's end) and V at the chunk (fp32: V^T's region)."""
    v, at, size = _mm2_chunk_v(k, t, w, dn, kc)
    return (k.ws[w][1][t % 2][kc], _slot_bytes(k)[1] - kc * k.isz), (v[at] if size is None else (v[at], size))


KernelFlashAttentionVarLenScore.ProcessVec1Slice = replayable(_vec1_slice_key, shared=True, bases=_vec1_slice_bases)(
    KernelFlashAttentionVarLenScore.ProcessVec1Slice)
KernelFlashAttentionVarLenScore.ProcessVec2 = replayable(_vec2_key, shared=True)(
    KernelFlashAttentionVarLenScore.ProcessVec2)
KernelFlashAttentionVarLenScore.ComputeMm1Chunk = replayable(_mm1_chunk_key, shared=True, bases=_mm1_chunk_bases)(
    KernelFlashAttentionVarLenScore.ComputeMm1Chunk)
KernelFlashAttentionVarLenScore.ComputeMm2Chunk = replayable(_mm2_chunk_key, shared=True, bases=_mm2_chunk_bases)(
    KernelFlashAttentionVarLenScore.ComputeMm2Chunk)
