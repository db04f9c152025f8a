"""PromptFlashAttentionV2 device kernel, written like the CANN x910 kernel (docs/pfa.md).

A mix kernel: on each AI Core the cube core (AIC) computes the score tiles (mm1 = Q K^T) and the
probability-value products (mm2 = P V) into a GM workspace; the vector cores (AIV) run scale, mask,
online softmax and the output accumulation. By default each vector core is a worker with its own items
of sOuter rows and the cube core serves both in step (a step with no task for one of them is a flag-only
"fake message"); in the cube-view split (tiling.SPLIT_CUBE) an item has 2 x sOuter rows and each vector
core owns one half. They hand work to each other with cross-core flags, the cube running one score tile
ahead ("CV preload"):

    AIC: mm1(0) mm1(1) mm2(0) mm1(2) mm2(1) ...         flags  MM1 -> AIV, P -> AIC, MM2 -> AIV, PVFREE -> AIC
    AIV: wait MM1(t); softmax(t); set P(t); wait MM2(t-1); update O with PV(t-1); set PVFREE(t-1)

Workspace per AI Core: two slots each of the score tile (T), the probability tile (P dtype) and the
PV tile, each 2 x sOuter rows (vector core s at row s x sOuter); step t uses slot t % 2.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.kernel import (ASCEND_IS_AIC, CMPMODE, SELMODE, Add, Adds, BinaryRepeatParams, Cast, Compare, Copy, CrossCoreSetFlag,
                           CrossCoreWaitFlag, DataCopy, DataCopyExtParams, DataCopyPad, Duplicate, Exp, Fixpipe,
                           FixpipeParamsV220, GetBlockIdx, GetSubBlockIdx, GlobalTensor, HardEvent, Max, Mul, Muls, Nd2NzParams, Pipe, PipeBarrier,
                           QuantMode_t, RoundMode, Select, SetFlag, Sub, TBuf, TPipe, TPosition, TQue, WaitFlag)
from ops.common.cube_tiles import CubeTiles
from ops.common.rowops import BroadcastRows, BytesToBits, CopyRowsIn, CopyRowsOut, RowBroadcast, RowReduce
from ops.prompt_flash_attention_v2.tiling import CMP_CHUNK, CUBE_BASE, PV_ROWS, SPLIT_VECTOR, PfaTilingData

FLAG_MM1, FLAG_P, FLAG_MM2, FLAG_PVFREE = 1, 2, 3, 4  # cross-core flag ids
BUFFER_NUM = 2
MASK_FP16 = -65504.0  # PFA fp16 path: masked score (tiling.md §0)
MASK_FP32 = float(np.finfo(np.float32).min)  # -FLT_MAX in the fp32 path
F16, F32 = np.dtype(np.float16), np.dtype(np.float32)


def _c16(x: int) -> int:
    return -(-x // 16) * 16


@dataclass(frozen=True)
class PfaKernelArgs:
    """Per-call constants the host hands the kernel besides the tiling (layout strides, dtypes, quant)."""

    qBatchStride: int
    qHeadStride: int
    qRowPitch: int
    kvBatchStride: int
    kvHeadStride: int
    kvRowPitch: int
    outBatchStride: int
    outHeadStride: int
    outRowPitch: int
    group: int
    actKv: tuple
    preLU: tuple
    nextLU: tuple
    sparseMode: int
    maskKind: str  # "none" | "full" | "compressed"
    maskBatchStride: int
    maskRowPitch: int
    inDtype: np.dtype
    softmaxDtype: np.dtype
    pDtype: np.dtype
    outDtype: np.dtype
    deqScale1: float | int = 1.0
    quantScale1: float = 1.0
    deqScale2: float | int = 1.0
    quantScale2: float = 1.0  # per-tensor
    quantOffset2: float = 0.0
    quantPerChannel: bool = False


class KernelPromptFlashAttention:
    # -------------------------------------------------------------------------------- common
    def Init(self, query, key, value, attenMask, quantScale2, quantOffset2, attentionOut, workspace,
             tiling: PfaTilingData, args: PfaKernelArgs):
        self.t, self.a = tiling, args
        self.qGm, self.kGm, self.vGm, self.maskGm, self.outGm = query, key, value, attenMask, attentionOut
        self.q2Gm, self.off2Gm = quantScale2, quantOffset2
        self.core = GetBlockIdx()
        core = self.core if ASCEND_IS_AIC() else self.core // 2
        self.vectorSplit = tiling.splitCoreMode == SPLIT_VECTOR
        self.taskLists = [self._tasks_of(tiling.core_items(core, h)) for h in range(2)]
        self.tasks = self.taskLists[self.core % 2 if (self.vectorSplit and not ASCEND_IS_AIC()) else 0]
        self.steps = max(map(len, self.taskLists)) if self.vectorSplit else len(self.tasks)
        self.D = tiling.headSize
        self.sOuter, self.sInner, self.sm = tiling.sOuterFactor, tiling.sInnerFactor, tiling.softmaxSOuterFactor
        t, p, pv = np.dtype(args.softmaxDtype), np.dtype(args.pDtype), self._pv_dtype()
        rows2 = 2 * self.sOuter
        slot_s, slot_p, slot_pv = rows2 * self.sInner * t.itemsize, rows2 * self.sInner * p.itemsize, \
            rows2 * self.D * pv.itemsize
        base = core * 2 * (slot_s + slot_p + slot_pv)
        ws = workspace  # GlobalTensor of uint8
        self.wsS = [ws[base + s * slot_s].ReinterpretCast(t) for s in range(2)]
        self.wsP = [ws[base + 2 * slot_s + s * slot_p].ReinterpretCast(p) for s in range(2)]
        self.wsPV = [ws[base + 2 * (slot_s + slot_p) + s * slot_pv].ReinterpretCast(pv) for s in range(2)]
        self.pipe = TPipe()

    def _tasks_of(self, items) -> list:
        """(item, tile j, first tile, last tile) of every score tile of *items*, in order."""
        t, tasks = self.t, []
        for item in items:
            t0, t1 = t.itemTile0[item], t.itemTile1[item]
            tasks.extend((item, j, j == t0, j == t1 - 1) for j in range(t0, t1))
        return tasks

    def _cube_parts(self, t: int) -> list:
        """(half, first workspace row, task list) the cube computes in step *t*: both vector cores'
        tasks in the vector split, the one 2 x sOuter-row task in the cube view."""
        if not self.vectorSplit:
            return [(0, 0, self.tasks)]
        return [(h, h * self.sOuter, tl) for h, tl in enumerate(self.taskLists) if t < len(tl)]

    def _pv_dtype(self) -> np.dtype:
        return F16 if np.dtype(self.a.inDtype) == np.int8 else F32

    def Process(self):
        if ASCEND_IS_AIC():
            self.InitCube()
            self.ProcessCube()
        else:
            self.InitVector()
            self.ProcessVector()

    def _item(self, item: int):
        t = self.t
        return t.itemN[item], t.itemB[item], t.itemRow0[item], t.itemRows[item]

    def _tile_cols(self, b: int, j: int) -> tuple[int, int]:
        c0 = j * self.sInner
        return c0, min(self.sInner, self.a.actKv[b] - c0)

    # -------------------------------------------------------------------------------- cube (AIC)
    def InitCube(self):
        a, D = self.a, self.D
        self.inDt = np.dtype(a.inDtype)
        self.c0 = 32 // self.inDt.itemsize  # elements per 32-byte fractal row (K0)
        self.fractal = 512 // self.inDt.itemsize
        self.kChunk = CUBE_BASE if self.inDt.itemsize == 2 else 2 * CUBE_BASE  # 32 KiB of L0A per buffer
        rows2 = -(-2 * self.sOuter // 32) * 32
        q = self.inDt.itemsize
        # one Q queue per vector core served (a block of sOuter rows each), or one of 2 x sOuter rows
        self.qQues = [TQue(TPosition.A1, BUFFER_NUM) for _ in range(2 if self.vectorSplit else 1)]
        self.kQue = TQue(TPosition.B1, BUFFER_NUM)
        self.pQue = TQue(TPosition.A1, BUFFER_NUM)
        self.vQue = TQue(TPosition.B1, BUFFER_NUM)
        self.cQue = TQue(TPosition.CO1, BUFFER_NUM)
        for que in self.qQues:
            self.pipe.InitBuffer(que, BUFFER_NUM, (rows2 // 2 if self.vectorSplit else rows2) * D * q)
        chunk = self.t.kvChunk  # keys per K/V/P copy: whole cube blocks of CUBE_BASE (tiling.kv_chunk)
        pRows = rows2 if chunk == CUBE_BASE else min(rows2, CUBE_BASE)
        self.pipe.InitBuffer(self.kQue, BUFFER_NUM, chunk * D * q)
        self.pipe.InitBuffer(self.pQue, BUFFER_NUM, pRows * chunk * np.dtype(a.pDtype).itemsize)
        self.pipe.InitBuffer(self.vQue, BUFFER_NUM, chunk * CUBE_BASE * q)
        self.cube = CubeTiles(self.pipe, self.inDt)  # L0A/L0B queues, LoadData and Mmad
        self.pipe.InitBuffer(self.cQue, BUFFER_NUM, 64 * 1024)
        self.qL1, self.qBlocks = [None, None], [0, 0]
        self.accDt = np.dtype(np.int32) if self.inDt == np.int8 else F32

    def ProcessCube(self):
        n = self.steps
        for t in range(n + 1):
            if t < n:
                self.ComputeMm1(t)
            if t >= 1:
                self.ComputeMm2(t - 1)
        for que, q in zip(self.qQues, self.qL1):
            if q is not None:
                que.FreeTensor(q)

    def CopyInQ(self, h: int, item: int):
        """Q rows of *item* to L1 for half *h* (one resident block per vector core served)."""
        a = self.a
        n, b, row0, rows = self._item(item)
        que = self.qQues[h]
        if self.qL1[h] is not None:
            que.FreeTensor(self.qL1[h])
        qL1 = que.AllocTensor(self.inDt)
        off = b * a.qBatchStride + n * a.qHeadStride + row0 * a.qRowPitch
        DataCopy(qL1, self.qGm[off], Nd2NzParams(1, rows, self.D, 0, a.qRowPitch, _c16(rows), 1, 0))
        que.EnQue(qL1)
        self.qL1[h] = que.DeQue(self.inDt)
        self.qBlocks[h] = _c16(rows) // 16

    def ComputeMm1(self, t: int):
        for h, wsRow, tasks in self._cube_parts(t):
            self.ComputeMm1Part(t, h, wsRow, tasks[t])
        CrossCoreSetFlag(FLAG_MM1, Pipe.FIX)

    def ComputeMm1Part(self, t: int, h: int, wsRow: int, task):
        """S = Q K^T of one task into workspace rows [wsRow, wsRow + rows) of slot t % 2."""
        a, D = self.a, self.D
        item, j, first, _ = task
        n, b, row0, rows = self._item(item)
        if first:
            self.CopyInQ(h, item)
        c0, cols = self._tile_cols(b, j)
        kvOff = b * a.kvBatchStride + (n // a.group) * a.kvHeadStride
        wsS = self.wsS[t % 2][wsRow * self.sInner]
        chunk = self.t.kvChunk
        for cc in range(0, cols, chunk):
            kL1 = self.kQue.AllocTensor(self.inDt)
            self.CopyInRowBlocks(kL1, self.kGm[kvOff + (c0 + cc) * a.kvRowPitch], min(chunk, cols - cc), D,
                                 a.kvRowPitch, 16)
            self.kQue.EnQue(kL1)
            kL1 = self.kQue.DeQue(self.inDt)
            for nc in range(cc, min(cc + chunk, cols), CUBE_BASE):
                self.Mm1Block(kL1[(nc - cc) * -(-D // self.c0) * self.c0], wsS, h, rows, nc, min(CUBE_BASE, cols - nc))
            self.kQue.FreeTensor(kL1)

    def CopyInRowBlocks(self, dst, src: GlobalTensor, nrows: int, ncols: int, pitch: int, align: int):
        """Rows [0, nrows) of an ND matrix (row pitch *pitch*) to L1 as one NZ matrix per CUBE_BASE rows
        (each padded to *align* rows, CUBE_BASE * ncols elements apart): whole blocks in one copy."""
        full, tail = divmod(nrows, CUBE_BASE)
        block = CUBE_BASE * -(-ncols // self.c0) * self.c0
        if full:
            DataCopy(dst, src, Nd2NzParams(full, CUBE_BASE, ncols, CUBE_BASE * pitch, pitch, CUBE_BASE, 1, block))
        if tail:
            DataCopy(dst[full * block], src[full * CUBE_BASE * pitch],
                     Nd2NzParams(1, tail, ncols, 0, pitch, -(-tail // align) * align, 1, 0))

    def Mm1Block(self, kL1, wsS: GlobalTensor, h: int, rows: int, nc: int, ncols: int):
        """Scores of columns [nc, nc + ncols) (K rows NZ in *kL1*) for the task's rows, to the workspace."""
        a, D = self.a, self.D
        nBlocks = _c16(ncols) // 16
        for mc in range(0, rows, CUBE_BASE):
            mrows = min(CUBE_BASE, rows - mc)
            cL0 = self.cQue.AllocTensor(self.accDt)
            for kc in range(0, D, self.kChunk):
                kcols = min(self.kChunk, D - kc)
                self.cube.SplitA(self.qL1[h], self.qBlocks[h], mc, mrows, kc, kcols)
                self.cube.SplitBTransposed(kL1, nBlocks, kc, kcols)
                self.cube.Compute(cL0, mrows, ncols, kcols, kc == 0)
            self.cQue.EnQue(cL0)
            cL0 = self.cQue.DeQue(self.accDt)
            params = FixpipeParamsV220(nSize=ncols, mSize=mrows, srcStride=_c16(mrows), dstStride=self.sInner)
            if self.inDt == np.int8:
                params.quantPre, params.deqScalar = QuantMode_t.DEQF16, a.deqScale1
            elif np.dtype(a.softmaxDtype) == F16:
                params.quantPre = QuantMode_t.F322F16
            Fixpipe(wsS[mc * self.sInner + nc], cL0, params)
            self.cQue.FreeTensor(cL0)

    def ComputeMm2(self, t: int):
        CrossCoreWaitFlag(FLAG_P)
        if t >= 2:
            CrossCoreWaitFlag(FLAG_PVFREE)  # the vector cores have read PV(t - 2) from this slot
        for h, wsRow, tasks in self._cube_parts(t):
            self.ComputeMm2Part(t, wsRow, tasks[t])
        CrossCoreSetFlag(FLAG_MM2, Pipe.FIX)

    def ComputeMm2Part(self, t: int, wsRow: int, task):
        """PV = P V of one task from/to workspace rows [wsRow, wsRow + rows) of slot t % 2."""
        a, D = self.a, self.D
        item, j, _, _ = task
        n, b, row0, rows = self._item(item)
        c0, cols = self._tile_cols(b, j)
        kvOff = b * a.kvBatchStride + (n // a.group) * a.kvHeadStride
        pDt = np.dtype(a.pDtype)
        wsP, wsPV = self.wsP[t % 2][wsRow * self.sInner], self.wsPV[t % 2][wsRow * D]
        chunk = self.t.kvChunk
        for dn in range(0, D, CUBE_BASE):
            dcols = min(CUBE_BASE, D - dn)
            for mc in range(0, rows, CUBE_BASE):
                mrows = min(CUBE_BASE, rows - mc)
                cL0 = self.cQue.AllocTensor(self.accDt)
                align = 32 if self.inDt.itemsize == 1 else 16  # V rows per fractal column (k blocks)
                vBlock = CUBE_BASE * -(-dcols // self.c0) * self.c0
                for cc in range(0, cols, chunk):
                    kch = min(chunk, cols - cc)
                    pL1 = self.pQue.AllocTensor(pDt)
                    DataCopy(pL1, wsP[mc * self.sInner + cc],
                             Nd2NzParams(1, mrows, kch, 0, self.sInner, _c16(mrows), 1, 0))
                    self.pQue.EnQue(pL1)
                    vL1 = self.vQue.AllocTensor(self.inDt)
                    self.CopyInRowBlocks(vL1, self.vGm[kvOff + (c0 + cc) * a.kvRowPitch + dn], kch, dcols,
                                         a.kvRowPitch, align)
                    self.vQue.EnQue(vL1)
                    pL1 = self.pQue.DeQue(pDt)
                    vL1 = self.vQue.DeQue(self.inDt)
                    for kc in range(cc, cc + kch, CUBE_BASE):
                        kcols = min(CUBE_BASE, cols - kc)
                        kRows = -(-kcols // align) * align
                        self.cube.SplitA(pL1, _c16(mrows) // 16, 0, mrows, kc - cc, kcols)
                        self.cube.SplitB(vL1[(kc - cc) // CUBE_BASE * vBlock], kRows // 16, kcols, dcols)
                        self.cube.Compute(cL0, mrows, dcols, kcols, kc == 0)
                    self.pQue.FreeTensor(pL1)
                    self.vQue.FreeTensor(vL1)
                self.cQue.EnQue(cL0)
                cL0 = self.cQue.DeQue(self.accDt)
                params = FixpipeParamsV220(nSize=dcols, mSize=mrows, srcStride=_c16(mrows), dstStride=D)
                if self.inDt == np.int8:
                    params.quantPre, params.deqScalar = QuantMode_t.DEQF16, a.deqScale2
                Fixpipe(wsPV[mc * D + dn], cL0, params)
                self.cQue.FreeTensor(cL0)

    # -------------------------------------------------------------------------------- vector (AIV)
    def InitVector(self):
        a, D, sm, sInner, sOuter = self.a, self.D, self.sm, self.sInner, self.sOuter
        self.sub = GetSubBlockIdx()
        self.T = np.dtype(a.softmaxDtype)
        self.P = np.dtype(a.pDtype)
        self.maskValue = MASK_FP16 if self.T == F16 else MASK_FP32
        self.inS = TQue(TPosition.VECIN, BUFFER_NUM)
        self.pipe.InitBuffer(self.inS, BUFFER_NUM, sm * sInner * self.T.itemsize)
        self.castP = self.P != self.T
        self.outPending = set()  # inS slots copied out to GM by MTE3 whose next CopyIn must wait (MTE3_MTE2)
        if self.P == np.int8:  # quantised P goes through its own queue; fp16/bf16 P is cast in place (CopyOutP)
            self.outP = TQue(TPosition.VECOUT, BUFFER_NUM)
            self.pipe.InitBuffer(self.outP, BUFFER_NUM, sm * sInner * self.P.itemsize)
        if a.maskKind != "none":
            self.inMask = TQue(TPosition.VECIN, 1)
            self.pipe.InitBuffer(self.inMask, 1, sm * sInner)
            self.maskHalf, self.zeros = TBuf(), TBuf()
            self.pipe.InitBuffer(self.maskHalf, CMP_CHUNK * 2)
            self.pipe.InitBuffer(self.zeros, CMP_CHUNK * 2)
        self.bits = TBuf()  # mask compare results; also the row-validity bits of Finalize
        self.pipe.InitBuffer(self.bits, -(-max(sm * sInner, sOuter) // 8 // 32) * 32)
        self.acc, self.rowT, self.row32 = TBuf(), TBuf(), TBuf()
        self.pipe.InitBuffer(self.acc, sm * 256)
        self.pipe.InitBuffer(self.rowT, 2 * (-(-sm * 4 // 32) * 32))
        self.pipe.InitBuffer(self.row32, 2 * (-(-sm * 4 // 32) * 32))
        vec = -(-sOuter * 4 // 32) * 32
        self.mBuf, self.lBuf, self.alphaBuf, self.tmpBuf = TBuf(), TBuf(), TBuf(), TBuf()
        self.pipe.InitBuffer(self.mBuf, 2 * vec)
        self.pipe.InitBuffer(self.lBuf, 2 * vec)
        self.pipe.InitBuffer(self.alphaBuf, 2 * vec)
        self.pipe.InitBuffer(self.tmpBuf, vec)
        self.brcbA, self.brcbB = TBuf(), TBuf()
        self.pipe.InitBuffer(self.brcbA, sOuter * 32)
        self.pipe.InitBuffer(self.brcbB, sOuter * 32)
        self.oBuf = TBuf()
        self.pipe.InitBuffer(self.oBuf, sOuter * D * 4)
        self.inPV = TQue(TPosition.VECIN, 1)
        pvDt = self._pv_dtype()
        self.pipe.InitBuffer(self.inPV, 1, PV_ROWS * D * pvDt.itemsize)
        self.pv32 = TBuf()
        self.pipe.InitBuffer(self.pv32, PV_ROWS * D * 4)
        self.outQ = TQue(TPosition.VECOUT, BUFFER_NUM)
        self.pipe.InitBuffer(self.outQ, BUFFER_NUM, PV_ROWS * D * np.dtype(a.outDtype).itemsize)
        self.int8Out = np.dtype(a.outDtype) == np.int8
        if self.int8Out:
            self.half = TBuf()
            self.pipe.InitBuffer(self.half, PV_ROWS * D * 2)
            self.q2Buf, self.off2Buf = TBuf(), TBuf()
            self.pipe.InitBuffer(self.q2Buf, -(-D * 2 // 32) * 32)
            self.pipe.InitBuffer(self.off2Buf, -(-D * 2 // 32) * 32)
            self.q2Head = -1
        if a.maskKind != "none":
            Duplicate(self.zeros.Get(F16), 0.0, CMP_CHUNK)

    def _my_rows(self, rows: int) -> tuple[int, int]:
        """(first row within the item, rows) this vector core computes: all of its own item in the
        vector split, its half of the 2 x sOuter rows in the cube view."""
        if self.vectorSplit:
            return 0, rows
        lo = min(rows, self.sub * self.sOuter)
        return lo, min(rows, lo + self.sOuter) - lo

    @property
    def wsRow(self) -> int:
        """This vector core's first row in the workspace slots (the cube writes half s at s x sOuter)."""
        return self.sub * self.sOuter

    def ProcessVector(self):
        n = self.steps
        mine = len(self.tasks)
        itemPar = -1
        parOf = {}
        for t in range(n):
            CrossCoreWaitFlag(FLAG_MM1)
            if t < mine:
                if self.tasks[t][2]:
                    itemPar += 1
                parOf[t] = itemPar % 2
                self.Softmax(t, parOf[t])
            CrossCoreSetFlag(FLAG_P, Pipe.MTE3)
            if t >= 1:
                self.UpdateOutputStep(t - 1, parOf)
        if n:
            self.UpdateOutputStep(n - 1, parOf)
        self.DrainCopyOut()

    def DrainCopyOut(self):
        """Kernel end: wait the P copy-outs' MTE3_MTE2 flags no CopyIn consumed (every SetFlag has its WaitFlag)."""
        for idx in sorted(self.outPending):
            WaitFlag(HardEvent.MTE3_MTE2, idx)
        self.outPending.clear()

    def UpdateOutputStep(self, t: int, parOf: dict):
        """Step t's output update, or only its flags when this vector core has no task in it."""
        if t in parOf:
            self.UpdateOutput(t, parOf[t])
        else:
            CrossCoreWaitFlag(FLAG_MM2)
            CrossCoreSetFlag(FLAG_PVFREE, Pipe.MTE2)

    def Softmax(self, t: int, par: int):
        sInner = self.sInner
        item, j, first, _ = self.tasks[t]
        n, b, row0, rows = self._item(item)
        c0, cols = self._tile_cols(b, j)
        lo, mine = self._my_rows(rows)
        T = self.T
        wsS, wsP = self.wsS[t % 2], self.wsP[t % 2]
        mAll, lAll = self.mBuf.Get(F32)[par * self._vec():], self.lBuf.Get(F32)[par * self._vec():]
        alphaAll = self.alphaBuf.Get(F32)[(t % 2) * self._vec():]
        if mine:
            self.CopyInScores(wsS, 0, min(self.sm, mine), cols)
        for r in range(0, mine, self.sm):
            sr = min(self.sm, mine - r)
            gRow = row0 + lo + r  # first query row of the slice
            sLocal = self.inS.DeQue(T)
            Muls(sLocal, sLocal, self.t.scaleValue, sr * sInner)
            PipeBarrier(Pipe.V)
            self.ApplyMask(sLocal, b, gRow, c0, sr, cols)
            rowT, row32 = self.rowT.Get(T), self.row32.Get(F32)
            acc = self.acc.Get(T)
            RowReduce("max", rowT, sLocal, acc, sr, cols, sInner)
            PipeBarrier(Pipe.V)
            m = mAll[r:]
            if T != F32:
                Cast(row32, rowT, RoundMode.CAST_NONE, sr)
                PipeBarrier(Pipe.V)
                mx = row32
            else:
                mx = rowT
            if first:
                Copy(m, mx, sr)
            else:
                mNew, tmp = row32[self._half():], self.tmpBuf.Get(F32)
                Max(mNew, m, mx, sr)
                PipeBarrier(Pipe.V)
                Sub(tmp, m, mNew, sr)
                PipeBarrier(Pipe.V)
                Exp(alphaAll[r:], tmp, sr)
                Copy(m, mNew, sr)
            PipeBarrier(Pipe.V)
            mT = m
            if T != F32:
                mT = rowT
                Cast(mT, m, RoundMode.CAST_NONE, sr)
                PipeBarrier(Pipe.V)
            blocks = self.brcbA.Get(T)
            BroadcastRows(blocks, mT, sr)
            PipeBarrier(Pipe.V)
            RowBroadcast("sub", sLocal, sLocal, blocks, sr, cols, sInner)
            PipeBarrier(Pipe.V)
            Exp(sLocal, sLocal, sr * sInner)
            PipeBarrier(Pipe.V)
            RowReduce("sum", rowT, sLocal, acc, sr, cols, sInner)
            PipeBarrier(Pipe.V)
            rs = rowT
            if T != F32:
                Cast(row32, rowT, RoundMode.CAST_NONE, sr)
                PipeBarrier(Pipe.V)
                rs = row32
            ll = lAll[r:]
            if first:
                Copy(ll, rs, sr)
            else:  # l = l * alpha + rowsum
                Mul(ll, ll, alphaAll[r:], sr)
                PipeBarrier(Pipe.V)
                Add(ll, ll, rs, sr)
            if r + self.sm < mine:  # the next slice's copy-in goes out before this slice's P (Res1VecCompute,
                # x910.h:633-666, Bmm1GmResCopyInUb into mmResUb[ubPingpong^1], then SoftmaxResCopyOut)
                self.CopyInScores(wsS, r + self.sm, min(self.sm, mine - r - self.sm), cols)
            self.CopyOutP(sLocal, wsP[(self.wsRow + r) * sInner], sr, cols)

    def CopyInScores(self, wsS: GlobalTensor, r: int, sr: int, cols: int):
        """Rows r .. r + sr of this vector core's score tile into the next ping-pong score buffer; a buffer
        whose P copy-out is still reading it waits for that first (Bmm1GmResCopyInUb, x910.h:470-487)."""
        sInner = self.sInner
        sLocal = self.inS.AllocTensor(self.T)
        if sLocal.slot.index in self.outPending:  # its P copy-out (CopyOutP) must have read it
            self.outPending.discard(sLocal.slot.index)
            WaitFlag(HardEvent.MTE3_MTE2, sLocal.slot.index)
        CopyRowsIn(sLocal, wsS[(self.wsRow + r) * sInner], sr, cols, sInner, sInner)
        self.inS.EnQue(sLocal)

    def _vec(self) -> int:
        return -(-self.sOuter * 4 // 32) * 8

    def _half(self) -> int:
        return -(-self.sm * 4 // 32) * 8

    def CopyOutP(self, sLocal, dst: GlobalTensor, sr: int, cols: int):
        """P = P_dtype(E) to the workspace (or, int8, the quantised probabilities).

        fp16/bf16 P from fp32 scores is cast in place, into the first half of the score buffer's own bytes,
        and goes out from there like an uncast P (SoftmaxResCopyOut, x910.h:489-527: "The same ub buffer is
        used before and after cast"), so the vector unit never waits for a free output buffer."""
        a, sInner = self.a, self.sInner
        if self.P != np.int8:  # the score buffer itself goes out; the CopyIn that reuses it waits (SoftmaxResCopyOut:
            # SetFlag<MTE3_MTE2>(bmm1ResCopyOutEvent[ubPingpong]), x910.h:489-527), the vector unit does not
            src = sLocal
            if self.castP:
                src = sLocal.ReinterpretCast(self.P)
                PipeBarrier(Pipe.V)
                Cast(src, sLocal, RoundMode.CAST_RINT, sr * sInner)
            SetFlag(HardEvent.V_MTE3, 0)
            WaitFlag(HardEvent.V_MTE3, 0)
            CopyRowsOut(dst, src, sr, cols, sInner, sInner)
            SetFlag(HardEvent.MTE3_MTE2, sLocal.slot.index)
            self.outPending.add(sLocal.slot.index)
            self.inS.FreeTensor(sLocal)
            return
        pLocal = self.outP.AllocTensor(self.P)
        Muls(sLocal, sLocal, a.quantScale1, sr * sInner)
        PipeBarrier(Pipe.V)
        Cast(pLocal, sLocal, RoundMode.CAST_RINT, sr * sInner)
        self.inS.FreeTensor(sLocal)
        self.outP.EnQue(pLocal)
        pLocal = self.outP.DeQue(self.P)
        CopyRowsOut(dst, pLocal, sr, cols, sInner, sInner)
        self.outP.FreeTensor(pLocal)

    # ---- masks
    def ApplyMask(self, sLocal, b: int, gRow: int, c0: int, sr: int, cols: int):
        """Set the masked scores of one slice to the mask value (docs/pfa.md step 3)."""
        a = self.a
        if a.maskKind == "none":
            return
        if a.maskKind == "full":
            off = b * a.maskBatchStride + gRow * a.maskRowPitch + c0
            self._select_with_window(sLocal, self.maskGm[off], a.maskRowPitch, sr, cols, CMPMODE.EQ)
            return
        # compressed 2048 x 2048 causal mask (1 = masked, strictly upper triangle): modes 2/3/4
        nxt, pre = a.nextLU[b], a.preLU[b]
        d = gRow - c0 + nxt  # next side: masked iff (col - row) > d inside the slice
        self._compressed_side(sLocal, d, sr, cols, keep_where_one=False)
        if a.sparseMode == 4:
            e = gRow - c0 - pre  # pre side: masked iff (col - row) < e  <=>  not ((col - row) > e - 1)
            self._compressed_side(sLocal, e - 1, sr, cols, keep_where_one=True)

    def _compressed_side(self, sLocal, d: int, sr: int, cols: int, keep_where_one: bool):
        lo_diff, hi_diff = -(sr - 1), cols - 1  # range of (col - row) in the slice
        window_all_one = d < lo_diff  # every element has col - row > d
        window_all_zero = d >= hi_diff
        masked_all = window_all_zero if keep_where_one else window_all_one
        masked_none = window_all_one if keep_where_one else window_all_zero
        if masked_none:
            return
        if masked_all:
            Duplicate(sLocal, self.maskValue, sr * self.sInner)
            PipeBarrier(Pipe.V)
            return
        off = d if d >= 0 else -d  # ComputeOffsetForCausal: rows down for d >= 0, columns right otherwise
        start = off * 2048 if d >= 0 else off
        self._select_with_window(sLocal, self.maskGm[start], 2048, sr, cols,
                                 CMPMODE.NE if keep_where_one else CMPMODE.EQ)

    def _select_with_window(self, sLocal, src: GlobalTensor, pitch: int, sr: int, cols: int, keep: CMPMODE):
        """Load a sr x cols byte window of a mask (row pitch *pitch*), keep scores where mask *keep* 0."""
        sInner = self.sInner
        mLocal = self.inMask.AllocTensor(np.uint8)
        gap_ub = (sInner - (-(-cols // 32) * 32)) // 32
        DataCopyPad(mLocal, src, DataCopyExtParams(sr, cols, pitch - cols, gap_ub, 0))
        self.inMask.EnQue(mLocal)
        mLocal = self.inMask.DeQue(np.uint8)
        half, zeros, bits = self.maskHalf.Get(F16), self.zeros.Get(F16), self.bits.Get(np.uint8)
        total = sr * sInner
        srcDt = np.dtype(self.maskGm.dtype)
        BytesToBits(bits, mLocal.ReinterpretCast(srcDt if srcDt == np.int8 else np.uint8), half, zeros, total, keep,
                    CMP_CHUNK)
        self.inMask.FreeTensor(mLocal)
        Select(sLocal, bits, sLocal, self.maskValue, SELMODE.VSEL_TENSOR_SCALAR_MODE, total)
        PipeBarrier(Pipe.V)

    # ---- output accumulation
    def UpdateOutput(self, t: int, par: int):
        D = self.D
        item, j, first, last = self.tasks[t]
        n, b, row0, rows = self._item(item)
        lo, mine = self._my_rows(rows)
        CrossCoreWaitFlag(FLAG_MM2)
        wsPV = self.wsPV[t % 2]
        pvDt = self._pv_dtype()
        o = self.oBuf.Get(F32)
        alphaAll = self.alphaBuf.Get(F32)[(t % 2) * self._vec():]
        for r in range(0, mine, PV_ROWS):
            pr = min(PV_ROWS, mine - r)
            pvLocal = self.inPV.AllocTensor(pvDt)
            DataCopy(pvLocal, wsPV[(self.wsRow + r) * D], pr * D)
            self.inPV.EnQue(pvLocal)
            pvLocal = self.inPV.DeQue(pvDt)
            pv = pvLocal
            if pvDt != F32:
                pv = self.pv32.Get(F32)
                Cast(pv, pvLocal, RoundMode.CAST_NONE, pr * D)
                PipeBarrier(Pipe.V)
            oRows = o[r * D:]
            if first:
                Copy(oRows, pv, pr * D)
            else:
                blocks = self.brcbB.Get(F32)
                BroadcastRows(blocks, alphaAll[r:], pr)
                PipeBarrier(Pipe.V)
                RowBroadcast("mul", oRows, oRows, blocks, pr, D, D)
                PipeBarrier(Pipe.V)
                Add(oRows, oRows, pv, pr * D)
            PipeBarrier(Pipe.V)
            self.inPV.FreeTensor(pvLocal)
        CrossCoreSetFlag(FLAG_PVFREE, Pipe.MTE2)
        if last and mine:
            self.Finalize(n, b, row0 + lo, mine, par)

    def Finalize(self, n: int, b: int, gRow0: int, mine: int, par: int):
        """O / l, fully masked rows to 0, cast (or int8 quantise), copy out in the output layout."""
        a, D = self.a, self.D
        o = self.oBuf.Get(F32)
        mAll = self.mBuf.Get(F32)[par * self._vec():]
        lAll = self.lBuf.Get(F32)[par * self._vec():]
        outDt = np.dtype(a.outDtype)
        if self.int8Out:
            self._load_quant2(n)
        for r in range(0, mine, PV_ROWS):
            pr = min(PV_ROWS, mine - r)
            oRows = o[r * D:]
            blocks = self.brcbB.Get(F32)
            BroadcastRows(blocks, lAll[r:], pr)
            PipeBarrier(Pipe.V)
            RowBroadcast("div", oRows, oRows, blocks, pr, D, D)
            PipeBarrier(Pipe.V)
            self._zero_masked_rows(oRows, mAll[r:], pr)
            outLocal = self.outQ.AllocTensor(outDt)
            if self.int8Out:
                half = self.half.Get(F16)
                Cast(half, oRows, RoundMode.CAST_RINT, pr * D)
                PipeBarrier(Pipe.V)
                self._quantise(outLocal, half, pr)
            else:
                Cast(outLocal, oRows, RoundMode.CAST_RINT, pr * D)
            self.outQ.EnQue(outLocal)
            outLocal = self.outQ.DeQue(outDt)
            off = b * a.outBatchStride + n * a.outHeadStride + (gRow0 + r) * a.outRowPitch
            CopyRowsOut(self.outGm[off], outLocal, pr, D, D, a.outRowPitch)
            self.outQ.FreeTensor(outLocal)

    def _zero_masked_rows(self, oRows, m, pr: int):
        """Rows whose running max is still the mask value had nothing computed: multiply them by 0."""
        fac, tmp = self.row32.Get(F32), self.tmpBuf.Get(F32)
        Duplicate(tmp, float(np.float32(self.maskValue)), pr)
        PipeBarrier(Pipe.V)
        bits = self.bits.Get(np.uint8)
        Compare(bits, m, tmp, CMPMODE.NE, pr)
        PipeBarrier(Pipe.V)
        Duplicate(fac, 1.0, pr)
        PipeBarrier(Pipe.V)
        Select(fac, bits, fac, 0.0, SELMODE.VSEL_TENSOR_SCALAR_MODE, pr)
        PipeBarrier(Pipe.V)
        blocks = self.brcbB.Get(F32)
        BroadcastRows(blocks, fac, pr)
        PipeBarrier(Pipe.V)
        RowBroadcast("mul", oRows, oRows, blocks, pr, self.D, self.D)
        PipeBarrier(Pipe.V)

    def _load_quant2(self, n: int):
        """Per-channel quant_scale2/offset2 of head n to UB as fp16 (once per head)."""
        a, D = self.a, self.D
        if not a.quantPerChannel or self.q2Head == n:
            return
        self.q2Head = n
        for gm, buf in ((self.q2Gm, self.q2Buf), (self.off2Gm, self.off2Buf)):
            dst = buf.Get(F16)
            if gm is None:
                Duplicate(dst, 0.0, D)
                continue
            src = gm[n * D]
            stage = self.pv32.Get(src.dtype)
            SetFlag(HardEvent.V_MTE2, 1)  # the vector unit is done with pv32 (PV rows, the previous stage)
            WaitFlag(HardEvent.V_MTE2, 1)
            DataCopyPad(stage, src, DataCopyExtParams(1, D * src.dtype.itemsize, 0, 0, 0))
            SetFlag(HardEvent.MTE2_V, 1)
            WaitFlag(HardEvent.MTE2_V, 1)
            if src.dtype != F32:
                Cast(self.pv32.Get(F32)[-(-D // 8) * 8:], stage, RoundMode.CAST_NONE, D)
                PipeBarrier(Pipe.V)
                stage = self.pv32.Get(F32)[-(-D // 8) * 8:]
            Cast(dst, stage, RoundMode.CAST_RINT, D)
            PipeBarrier(Pipe.V)

    def _quantise(self, outLocal, half, pr: int):
        """int8 output: int8(rint(fp16(O) * q2 + offset2)), saturating (docs/pfa.md step 12)."""
        a, D = self.a, self.D
        if a.quantPerChannel:
            rep = D * 2 // 32
            for c0 in range(0, D, 128):
                cnt = min(128, D - c0)
                Mul(half[c0:], half[c0:], self.q2Buf.Get(F16)[c0:], cnt, pr, BinaryRepeatParams(1, 1, 1, rep, rep, 0))
            PipeBarrier(Pipe.V)
            for c0 in range(0, D, 128):
                cnt = min(128, D - c0)
                Add(half[c0:], half[c0:], self.off2Buf.Get(F16)[c0:], cnt, pr,
                    BinaryRepeatParams(1, 1, 1, rep, rep, 0))
        else:
            Muls(half, half, a.quantScale2, pr * D)
            PipeBarrier(Pipe.V)
            Adds(half, half, a.quantOffset2, pr * D)
        PipeBarrier(Pipe.V)
        Cast(outLocal, half, RoundMode.CAST_RINT, pr * D)


def prompt_flash_attention_v2(query, key, value, attenMask, quantScale2, quantOffset2, attentionOut, workspace,
                              tiling: PfaTilingData, args: PfaKernelArgs):
    """Kernel entry, named like the CANN kernel: build the class, Init, Process."""
    op = KernelPromptFlashAttention()
    op.Init(query, key, value, attenMask, quantScale2, quantOffset2, attentionOut, workspace, tiling, args)
    op.Process()


# -------------------------------------------------------------------------------- replay keys (timing mode)
# What each repeated step's instruction stream depends on (npusim/replay.py): a step called again with the
# same key and stream state is replayed from its recording instead of interpreted. Declared here, below the
# kernel, so that the kernel reads as Ascend C and its line numbers (the trace's sources) stay put.
from npusim.replay import replayable  # noqa: E402


def _kv_offset(k: KernelPromptFlashAttention, n: int, b: int) -> int:
    a = k.a
    return b * a.kvBatchStride + (n // a.group) * a.kvHeadStride


def _slot_bytes(k: KernelPromptFlashAttention) -> tuple[int, int, int]:
    """Bytes of one workspace slot of scores, of P and of PV (Init's layout: 2 x sOuter rows each)."""
    rows2 = 2 * k.sOuter
    return (rows2 * k.sInner * k.wsS[0].dtype.itemsize, rows2 * k.sInner * k.wsP[0].dtype.itemsize,
            rows2 * k.D * k.wsPV[0].dtype.itemsize)


def _mm1_key(k: KernelPromptFlashAttention, t: int, h: int, wsRow: int, task):
    """ComputeMm1Part after its item's first task (whose Q copy sets qL1): slot, half, rows, columns and the
    resident Q block fix it; it writes its score slot; K moves with its offset."""
    item, j, first, _ = task
    if first:
        return None
    n, b, _, rows = k._item(item)
    c0, cols = k._tile_cols(b, j)
    return (t % 2, h, wsRow, rows, cols, k.qBlocks[h], k.qL1[h].addr), \
        ((k.wsS[t % 2], _slot_bytes(k)[0]), k.kGm[_kv_offset(k, n, b) + c0 * k.a.kvRowPitch])


def _mm2_key(k: KernelPromptFlashAttention, t: int, wsRow: int, task):
    """ComputeMm2Part: slot, rows and columns; it reads its P slot and writes its PV slot; V moves with its
    offset."""
    item, j, _, _ = task
    n, b, _, rows = k._item(item)
    c0, cols = k._tile_cols(b, j)
    _, p, pv = _slot_bytes(k)
    return (t % 2, wsRow, rows, cols), \
        ((k.wsP[t % 2], p), (k.wsPV[t % 2], pv), k.vGm[_kv_offset(k, n, b) + c0 * k.a.kvRowPitch])


def _softmax_key(k: KernelPromptFlashAttention, t: int, par: int):
    """Softmax without a mask: slot, statistics parity, first tile, this core's workspace row, rows and
    columns; it reads its score slot and writes its P slot; the pending P copy-out flags are state."""
    if k.a.maskKind != "none":
        return None
    item, j, first, _ = k.tasks[t]
    _, b, _, rows = k._item(item)
    s, p, _ = _slot_bytes(k)
    return (t % 2, par, first, k.wsRow, k._my_rows(rows), k._tile_cols(b, j)[1]), \
        ((k.wsS[t % 2], s), (k.wsP[t % 2], p))


def _update_key(k: KernelPromptFlashAttention, t: int, par: int):
    """UpdateOutput (its cross-core flags included): slot, statistics parity, first/last tile, this core's
    workspace row and rows; it reads its PV slot; the last tile's output rows (Finalize) move with the item.
    int8 output: as written (per-head quant state)."""
    if k.int8Out:
        return None
    item, j, first, last = k.tasks[t]
    n, b, row0, rows = k._item(item)
    lo, mine = k._my_rows(rows)
    a = k.a
    bases = ((k.wsPV[t % 2], _slot_bytes(k)[2]),)
    if last and mine:
        bases += (k.outGm[b * a.outBatchStride + n * a.outHeadStride + (row0 + lo) * a.outRowPitch],)
    return (t % 2, par, first, last, k.wsRow, lo, mine), bases


KernelPromptFlashAttention.ComputeMm1Part = replayable(_mm1_key, shared=True)(
    KernelPromptFlashAttention.ComputeMm1Part)
KernelPromptFlashAttention.ComputeMm2Part = replayable(_mm2_key, shared=True)(
    KernelPromptFlashAttention.ComputeMm2Part)
KernelPromptFlashAttention.Softmax = replayable(_softmax_key, state=("outPending",), shared=True)(
    KernelPromptFlashAttention.Softmax)
KernelPromptFlashAttention.UpdateOutput = replayable(_update_key, shared=True)(
    KernelPromptFlashAttention.UpdateOutput)
