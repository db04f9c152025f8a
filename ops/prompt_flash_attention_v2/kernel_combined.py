"""PromptFlashAttentionV2 on a combined AI Core (Atlas inference, 310P): one stream does cube and vector.

The 200x AI Core has no FixPipe and no second vector core: the cube's L0C is read out through the vector
unit into UB (``DataCopy(ub, l0c, DataCopyCO12DstParams)``, PIPE_V, research/hardware.md §5). Work items
are the same blocks of 2 x sOuter query rows as on 910B (docs/pfa.md); a core runs each block as its two
halves one after the other (rows [0, sOuter), then [sOuter, 2 sOuter)), each half exactly as one 910B
vector core would, so the arithmetic is docs/pfa.md's dataflow and the result equals pfa_golden bit for
bit. Per half and tile, in program order (no CV preload: one stream):

    mm1 (Q K^T -> L0C)  L0C -> UB (fp32 -> T, NZ -> ND)  UB -> GM score slot (MTE3)
    softmax (the 910B vector code, reading the slot)   P -> GM probability slot (MTE3)
    mm2 (P, V from GM -> L1 -> L0A/L0B -> L0C)          L0C -> UB (fp32)  O = O * alpha + PV
    after the last tile: O / l, fully masked rows to 0, cast, copy out (the 910B Finalize)

The scores make a GM round trip (UB -> workspace -> UB) so that the 910B ``Softmax`` runs unchanged: it
loads its slices from the workspace. Pipes of the one core synchronise with SetFlag/WaitFlag; the
HardEvent set has no M_V / V_M pair, so those hand-offs go through MTE2 (M -> MTE2 -> V, V -> MTE2 -> M).
"""
from __future__ import annotations

import numpy as np

from npusim.kernel import (Add, Copy, DataCopy, DataCopyCO12DstParams, HardEvent, Nd2NzParams, Pipe, PipeBarrier,
                           SetFlag, TBuf, TPosition, TQue, WaitFlag)
from ops.common.cube_tiles import CubeTiles
from ops.common.rowops import BroadcastRows, CopyRowsOut, RowBroadcast
from ops.prompt_flash_attention_v2.kernel import BUFFER_NUM, F32, KernelPromptFlashAttention, PfaKernelArgs
from ops.prompt_flash_attention_v2.tiling import CUBE_BASE, PV_ROWS, STAGE_ROWS, PfaTilingData

EV_M_V, EV_V_M, EV_GM = 5, 6, 5  # HardEvent ids of this kernel's own hand-offs
EV_STAGE = 3  # staging buffer i uses MTE3_V id EV_STAGE + i


def _c16(x: int) -> int:
    return -(-x // 16) * 16


class KernelPromptFlashAttentionCombined(KernelPromptFlashAttention):
    """The 910B kernel's vector side plus a cube side that reads L0C out through UB, on one stream."""

    def Process(self):
        """Init both sides (the staging UB is budgeted by tiling.ub_limit), then items, halves, tiles."""
        self.InitCube()
        self.InitVector()
        self.stages = [TBuf() for _ in range(BUFFER_NUM)]
        for s in self.stages:
            self.pipe.InitBuffer(s, STAGE_ROWS * CUBE_BASE * self.T.itemsize)
        self.stageUsed = [False] * BUFFER_NUM
        self.l0cRead = False  # an L0C buffer was read by V since the last V -> M hand-off
        byItem: dict = {}
        for t, task in enumerate(self.tasks):
            byItem.setdefault(task[0], []).append(t)
        for item, ts in byItem.items():
            rows = self._item(item)[3]
            for half in range(2):
                self.sub = half  # the 910B vector code takes its rows from the sub-block index
                lo, mine = self._my_rows(rows)
                if mine == 0:
                    continue
                for t in ts:
                    self.ComputeMm1(t)
                    self.Softmax(t, 0)
                    self.ComputeMm2(t)
                    self.UpdateOutput(t, 0)
        # kernel end: the staging buffers' last MTE3 -> V flags are consumed and Q's L1 buffer is freed
        # (both were left pending; found by npusim.sanitizer)
        for i, used in enumerate(self.stageUsed):
            if used:
                WaitFlag(HardEvent.MTE3_V, EV_STAGE + i)
        self.DrainCopyOut()
        if self.qL1 is not None:
            self.qQue.FreeTensor(self.qL1)

    # ---- cube side
    def InitCube(self):
        a, D = self.a, self.D
        self.inDt = np.dtype(a.inDtype)
        if self.inDt != np.float16:
            raise NotImplementedError(f"PFA combined-core kernel: input {self.inDt.name} (fp16 only on 310P)")
        self.kChunk = CUBE_BASE
        rows = _c16(self.sOuter)
        q = self.inDt.itemsize
        self.qQue, self.kQue = TQue(TPosition.A1, BUFFER_NUM), TQue(TPosition.B1, BUFFER_NUM)
        self.pQue, self.vQue = TQue(TPosition.A1, BUFFER_NUM), TQue(TPosition.B1, BUFFER_NUM)
        self.pipe.InitBuffer(self.qQue, BUFFER_NUM, rows * D * q)
        self.pipe.InitBuffer(self.kQue, BUFFER_NUM, CUBE_BASE * D * q)
        self.pipe.InitBuffer(self.pQue, BUFFER_NUM, rows * CUBE_BASE * np.dtype(a.pDtype).itemsize)
        self.pipe.InitBuffer(self.vQue, BUFFER_NUM, CUBE_BASE * CUBE_BASE * q)
        self.cube = CubeTiles(self.pipe, self.inDt)
        self.sL0C, self.pvL0C = TBuf(TPosition.CO1), TBuf(TPosition.CO1)
        self.pipe.InitBuffer(self.sL0C, rows * CUBE_BASE * 4)  # one 128-column score chunk (fp32)
        self.pipe.InitBuffer(self.pvL0C, rows * _c16(D) * 4)  # the half's whole PV (fp32)
        self.qL1 = None

    def _half_rows(self, t: int):
        item, j, first, last = self.tasks[t]
        n, b, row0, rows = self._item(item)
        lo, mine = self._my_rows(rows)
        return item, j, first, last, n, b, row0, lo, mine

    def _m_to_v(self):
        """The vector pipe waits for the cube's L0C results (through MTE2: no M_V event)."""
        SetFlag(HardEvent.M_MTE2, EV_M_V)
        WaitFlag(HardEvent.M_MTE2, EV_M_V)
        SetFlag(HardEvent.MTE2_V, EV_M_V)
        WaitFlag(HardEvent.MTE2_V, EV_M_V)

    def _v_to_m(self):
        """The cube waits until the vector pipe has read L0C out (before overwriting it)."""
        if not self.l0cRead:
            return
        self.l0cRead = False
        SetFlag(HardEvent.V_MTE2, EV_V_M)
        WaitFlag(HardEvent.V_MTE2, EV_V_M)
        SetFlag(HardEvent.MTE2_M, EV_V_M)
        WaitFlag(HardEvent.MTE2_M, EV_V_M)

    def _gm_written(self):
        """MTE2 reads of the workspace wait for the MTE3 writes before them."""
        SetFlag(HardEvent.MTE3_MTE2, EV_GM)
        WaitFlag(HardEvent.MTE3_MTE2, EV_GM)

    def ComputeMm1(self, t: int):
        a, D = self.a, self.D
        item, j, first, _, n, b, row0, lo, mine = self._half_rows(t)
        if first:
            if self.qL1 is not None:
                self.qQue.FreeTensor(self.qL1)
            qL1 = self.qQue.AllocTensor(self.inDt)
            off = b * a.qBatchStride + n * a.qHeadStride + (row0 + lo) * a.qRowPitch
            DataCopy(qL1, self.qGm[off], Nd2NzParams(1, mine, D, 0, a.qRowPitch, _c16(mine), 1, 0))
            self.qQue.EnQue(qL1)
            self.qL1 = self.qQue.DeQue(self.inDt)
        c0, cols = self._tile_cols(b, j)
        kvOff = b * a.kvBatchStride + (n // a.group) * a.kvHeadStride
        wsS = self.wsS[t % 2]
        cL0 = self.sL0C.Get(F32)
        for nc in range(0, cols, CUBE_BASE):
            ncols = min(CUBE_BASE, cols - nc)
            kL1 = self.kQue.AllocTensor(self.inDt)
            DataCopy(kL1, self.kGm[kvOff + (c0 + nc) * a.kvRowPitch],
                     Nd2NzParams(1, ncols, D, 0, a.kvRowPitch, _c16(ncols), 1, 0))
            self.kQue.EnQue(kL1)
            kL1 = self.kQue.DeQue(self.inDt)
            self._v_to_m()
            for kc in range(0, D, self.kChunk):
                kcols = min(self.kChunk, D - kc)
                self.cube.SplitA(self.qL1, _c16(mine) // 16, 0, mine, kc, kcols)
                self.cube.SplitBTransposed(kL1, _c16(ncols) // 16, kc, kcols)
                self.cube.Compute(cL0, mine, ncols, kcols, kc == 0)
            self.kQue.FreeTensor(kL1)
            self._m_to_v()
            self.CopyOutScores(cL0, wsS[lo * self.sInner + nc], mine, ncols)
        self._gm_written()

    def CopyOutScores(self, cL0, dst, mine: int, ncols: int):
        """L0C chunk (mine x ncols, fp32) -> T in UB, STAGE_ROWS rows at a time -> the workspace slot."""
        for k, r in enumerate(range(0, mine, STAGE_ROWS)):
            pr, i = min(STAGE_ROWS, mine - r), k % BUFFER_NUM
            if self.stageUsed[i]:
                WaitFlag(HardEvent.MTE3_V, EV_STAGE + i)
            stage = self.stages[i].Get(self.T)
            DataCopy(stage, cL0[r * 16], DataCopyCO12DstParams(nSize=ncols, mSize=pr, dstStride=CUBE_BASE,
                                                              srcStride=_c16(mine)))
            SetFlag(HardEvent.V_MTE3, EV_STAGE + i)
            WaitFlag(HardEvent.V_MTE3, EV_STAGE + i)
            CopyRowsOut(dst[r * self.sInner], stage, pr, ncols, CUBE_BASE, self.sInner)
            SetFlag(HardEvent.MTE3_V, EV_STAGE + i)
            self.stageUsed[i] = True
        self.l0cRead = True

    def ComputeMm2(self, t: int):
        a, D = self.a, self.D
        item, j, _, _, n, b, row0, lo, mine = self._half_rows(t)
        c0, cols = self._tile_cols(b, j)
        kvOff = b * a.kvBatchStride + (n // a.group) * a.kvHeadStride
        pDt = np.dtype(a.pDtype)
        wsP = self.wsP[t % 2]
        self._gm_written()  # the probabilities Softmax just wrote
        cL0 = self.pvL0C.Get(F32)
        m16 = _c16(mine)
        self._v_to_m()
        for dn in range(0, D, CUBE_BASE):
            dcols = min(CUBE_BASE, D - dn)
            for kc in range(0, cols, CUBE_BASE):
                kcols = min(CUBE_BASE, cols - kc)
                pL1 = self.pQue.AllocTensor(pDt)
                DataCopy(pL1, wsP[lo * self.sInner + kc], Nd2NzParams(1, mine, kcols, 0, self.sInner, m16, 1, 0))
                self.pQue.EnQue(pL1)
                vL1 = self.vQue.AllocTensor(self.inDt)
                DataCopy(vL1, self.vGm[kvOff + (c0 + kc) * a.kvRowPitch + dn],
                         Nd2NzParams(1, kcols, dcols, 0, a.kvRowPitch, _c16(kcols), 1, 0))
                self.vQue.EnQue(vL1)
                pL1 = self.pQue.DeQue(pDt)
                vL1 = self.vQue.DeQue(self.inDt)
                self.cube.SplitA(pL1, m16 // 16, 0, mine, 0, kcols)
                self.cube.SplitB(vL1, _c16(kcols) // 16, kcols, dcols)
                self.cube.Compute(cL0[dn * m16], mine, dcols, kcols, kc == 0)
                self.pQue.FreeTensor(pL1)
                self.vQue.FreeTensor(vL1)
        self._m_to_v()

    # ---- vector side: the output update reads PV from L0C instead of the workspace
    def UpdateOutput(self, t: int, par: int):
        D = self.D
        item, j, first, last, n, b, row0, lo, mine = self._half_rows(t)
        o, pv = self.oBuf.Get(F32), self.pv32.Get(F32)
        alphaAll = self.alphaBuf.Get(F32)[(t % 2) * self._vec():]
        cL0 = self.pvL0C.Get(F32)
        for r in range(0, mine, PV_ROWS):
            pr = min(PV_ROWS, mine - r)
            DataCopy(pv, cL0[r * 16], DataCopyCO12DstParams(nSize=D, mSize=pr, dstStride=D, srcStride=_c16(mine)))
            PipeBarrier(Pipe.V)
            oRows = o[r * D:]
            if first:
                Copy(oRows, pv, pr * D)
            else:  # O = O * alpha + PV (docs/pfa.md step 11)
                blocks = self.brcbB.Get(F32)
                BroadcastRows(blocks, alphaAll[r:], pr)
                PipeBarrier(Pipe.V)
                RowBroadcast("mul", oRows, oRows, blocks, pr, D, D)
                PipeBarrier(Pipe.V)
                Add(oRows, oRows, pv, pr * D)
            PipeBarrier(Pipe.V)
        self.l0cRead = True
        if last:
            self.Finalize(n, b, row0 + lo, mine, par)


def prompt_flash_attention_v2_combined(query, key, value, attenMask, quantScale2, quantOffset2, attentionOut,
                                       workspace, tiling: PfaTilingData, args: PfaKernelArgs):
    """Kernel entry of the combined-core variant: build the class, Init, Process."""
    op = KernelPromptFlashAttentionCombined()
    op.Init(query, key, value, attenMask, quantScale2, quantOffset2, attentionOut, workspace, tiling, args)
    op.Process()
