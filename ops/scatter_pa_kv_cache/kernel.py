"""ScatterPaKvCache device kernel, written like ``op_kernel/scatter_pa_kv_cache*.h`` (tiling.md §5).

Contents
- :class:`ControlChunk` (control values staged in UB for the scalar unit), :func:`AllocateTask`;
- :class:`KernelScatterPaKvCacheNd` (Norm, Nct, key-only SISO: token t -> cache row slot[t]),
  :class:`KernelScatterPaKvCacheNz` (PA_NZ: 32-byte fractal columns, strided stores),
  :class:`KernelScatterPaKvCacheAlibi` (last ``win`` tokens of each (batch, head)),
  :class:`KernelScatterPaKvCacheRope` (Rope: head, fp32 mean token, tail; Omni: head and tail);
- the entry :func:`scatter_pa_kv_cache`, dispatching on ``tiling.templateType`` as the CANN kernel
  dispatches on its tiling key.

The kernel moves bytes: every DataCopy / DataCopyPad copies bits unchanged. The Rope mean uses
vector instructions only (Duplicate, Cast CAST_NONE, Add, Div, Cast CAST_RINT) in the order of
``compress_rope.h ComputeAvg``, which golden.py's ``mean_token`` follows independently.

Synchronisation is what the real kernel needs: MTE2 -> MTE3 before a store reads a loaded buffer,
MTE3 -> MTE2 before a load overwrites it (TQueBind or explicit flags), MTE2 -> V / V -> MTE2 /
V -> MTE3 / MTE3 -> V around the mean, MTE2 -> S before the scalar unit reads staged control values.

Departures from the real kernels (docs/scatter_pa_kv_cache.md): control values (slots, lengths) are
staged in UB by DataCopyPad + MTE2_S instead of GM scalar reads (npusim has no scalar GM read);
negative slots are skipped in every template (the real Alibi/Rope/Omni kernels do not check them);
the slot dtype is read as given (the real compress kernels read int32).
"""
from __future__ import annotations

import numpy as np

from npusim.kernel import (Add, Cast, Copy, DataCopy, DataCopyExtParams, DataCopyPad, DataCopyPadExtParams,
                           DataCopyParams, Div, Duplicate, GetBlockIdx, GetBlockNum, HardEvent, Pipe,
                           PipeBarrier, RoundMode, SetFlag, TBuf, TPipe, TPosition, TQueBind, WaitFlag)
from ops.scatter_pa_kv_cache import tiling as T

BLOCK_SIZE = T.BLOCK_BYTES  # common.h BLOCK_SIZE = 32
BUFFER_NUM = T.BUFFER_NUM
MAX_STRIDE_BLOCKS = 65535  # DataCopyParams srcStride/dstStride are uint16 (in 32-byte blocks)
EVENT_ID0, EVENT_ID1, EVENT_ID2 = 0, 1, 2
FP32 = np.dtype(np.float32)


# --- kernel-side helpers ---------------------------------------------------------------------------
def AllocateTask(numTasks: int) -> tuple:
    """base.h AllocateTask: ``(startTaskId, perCoreTaskNum)``; the first ``numTasks % cores`` cores
    take one task more."""
    coreNums, blockId = GetBlockNum(), GetBlockIdx()
    per, tail = divmod(numTasks, coreNums)
    start = blockId * per
    if blockId < tail:
        return start + blockId, per + 1
    return start + tail, per


class ControlChunk:
    """Up to *capacity* bytes of a control tensor staged in UB: DataCopyPad on MTE2, then MTE2_S.

    ``GetValue(index)`` loads the chunk holding *index* when needed and reads it on the scalar unit.
    In timing mode the UB holds no data; the value then comes from the GM control tensor, which is
    always real (API.md) and holds the bytes the DataCopyPad would have brought.
    """

    def __init__(self, pipe: TPipe, gm, capacity: int):
        self.gm, self.item = gm, gm.dtype.itemsize
        self.buf = TBuf(TPosition.VECCALC)
        pipe.InitBuffer(self.buf, capacity)
        self.local = self.buf.Get(gm.dtype)
        self.cap = capacity // self.item
        self.start, self.count = 0, 0

    def GetValue(self, index: int) -> int:
        if not self.start <= index < self.start + self.count:
            self._Load(index)
        if self.local.core.full:
            return int(self.local.GetValue(index - self.start))
        return int(self.gm.flat()[index])

    def _Load(self, index: int) -> None:
        count = min(self.cap, self.gm.size - index)
        DataCopyPad(self.local, self.gm[index], DataCopyExtParams(1, count * self.item, 0, 0, 0),
                    DataCopyPadExtParams(False, 0, 0, 0))
        SetFlag(HardEvent.MTE2_S, EVENT_ID0)
        WaitFlag(HardEvent.MTE2_S, EVENT_ID0)
        self.start, self.count = index, count


def _aligned(nbytes: int) -> bool:
    return nbytes % BLOCK_SIZE == 0


def CopyRowsIn(dstLocal, srcGm, rows: int, rowElems: int, gapElems: int) -> None:
    """*rows* GM rows of *rowElems*, *gapElems* apart, into UB rows padded to 32 bytes (MTE2)."""
    item = dstLocal.dtype.itemsize
    rowBytes, gapBytes = rowElems * item, gapElems * item
    if _aligned(rowBytes) and _aligned(gapBytes) and gapBytes // BLOCK_SIZE <= MAX_STRIDE_BLOCKS:
        DataCopy(dstLocal, srcGm, DataCopyParams(rows, rowBytes // BLOCK_SIZE, gapBytes // BLOCK_SIZE, 0))
    else:
        DataCopyPad(dstLocal, srcGm, DataCopyExtParams(rows, rowBytes, gapBytes, 0, 0),
                    DataCopyPadExtParams(False, 0, 0, 0))


def CopyRowsOut(dstGm, srcLocal, rows: int, rowElems: int) -> None:
    """*rows* UB rows (padded to 32 bytes) to consecutive GM rows of *rowElems* (MTE3)."""
    rowBytes = rowElems * srcLocal.dtype.itemsize
    if _aligned(rowBytes):
        DataCopy(dstGm, srcLocal, DataCopyParams(1, rows * rowBytes // BLOCK_SIZE, 0, 0))
    else:
        DataCopyPad(dstGm, srcLocal, DataCopyExtParams(rows, rowBytes, 0, 0, 0))


def _pitch(elems: int, dtype) -> int:
    """Elements of one row padded to 32 bytes in UB."""
    item = np.dtype(dtype).itemsize
    return -(-elems * item // BLOCK_SIZE) * BLOCK_SIZE // item


# --- Norm / Nct / SISO ---------------------------------------------------------------------------
class KernelScatterPaKvCacheNd:
    """Templates NORMAL, NORM_NCT, SISO, SISO_NCT (scatter_pa_kv_cache_nd.h / _nd_siso.h).

    Fully load: per token one DataCopy in and one out per tensor through one buffer (CopyKvCache).
    Otherwise CopyToCache: chunks through a double-buffered bind queue per tensor, tail by DataCopyPad.
    """

    def Init(self, key, value, slotMapping, keyCache, valueCache, tiling):
        self.tiling = tiling
        self.dtype = key.dtype
        self.nct = tiling.templateType in (T.TEMPLATE_NORM_NCT, T.TEMPLATE_SISO_NCT)
        self.hasValue = tiling.hasValue
        self.startTaskId, self.perCoreTaskNum = AllocateTask(tiling.numTokens)
        self.keyInputGt, self.keyOutputGt = key, keyCache
        self.valueInputGt, self.valueOutputGt = value, valueCache
        self.tokenSizeK = tiling.numHead * tiling.kHeadSize
        self.tokenSizeV = tiling.numHead * tiling.vHeadSize
        self.pipe = TPipe()
        self.slots = ControlChunk(self.pipe, slotMapping, T.RESERVED_UB_BYTES)
        item = self.dtype.itemsize
        if tiling.fullyLoad:
            self.tokenBuf = TBuf(TPosition.VECCALC)
            self.pipe.InitBuffer(self.tokenBuf, max(self.tokenSizeK, self.tokenSizeV) * item)
            self.tokenLocal = self.tokenBuf.Get(self.dtype)
        else:
            chunk = tiling.ubSize // (BUFFER_NUM * (2 if self.hasValue else 1)) // BLOCK_SIZE * BLOCK_SIZE
            self.queBindK = TQueBind(BUFFER_NUM, EVENT_ID0)
            self.queBindK.InitBuffer(self.pipe, chunk)
            if self.hasValue:
                self.queBindV = TQueBind(BUFFER_NUM, EVENT_ID2)
                self.queBindV.InitBuffer(self.pipe, chunk)

    def Process(self):
        tl = self.tiling
        for i in range(self.perCoreTaskNum):
            t = self.startTaskId + i
            slotValue = self.slots.GetValue(t)
            if slotValue < 0:
                continue
            startK = t * tl.kStride + tl.kOffset if self.nct else t * self.tokenSizeK
            startV = t * tl.vStride + tl.vOffset if self.nct else t * self.tokenSizeV
            if tl.fullyLoad:
                self.CopyKvCache(self.keyInputGt, self.keyOutputGt, startK, slotValue * self.tokenSizeK,
                                 self.tokenSizeK)
                if self.hasValue:
                    self.CopyKvCache(self.valueInputGt, self.valueOutputGt, startV, slotValue * self.tokenSizeV,
                                     self.tokenSizeV)
                continue
            self.CopyToCache(self.keyInputGt, self.keyOutputGt, startK, slotValue * self.tokenSizeK,
                             (tl.kHandleNumPerLoop, tl.kLoopNum, tl.kTailHandleNum), self.queBindK)
            if self.hasValue:
                self.CopyToCache(self.valueInputGt, self.valueOutputGt, startV, slotValue * self.tokenSizeV,
                                 (tl.vHandleNumPerLoop, tl.vLoopNum, tl.vTailHandleNum), self.queBindV)

    def CopyKvCache(self, src, dst, start: int, cacheStart: int, count: int):
        """base.h CopyKvCache: one 32-byte-aligned row in, then out, serialised by flags."""
        params = DataCopyParams(1, count * self.dtype.itemsize // BLOCK_SIZE, 0, 0)
        DataCopy(self.tokenLocal, src[start], params)
        SetFlag(HardEvent.MTE2_MTE3, EVENT_ID1)
        WaitFlag(HardEvent.MTE2_MTE3, EVENT_ID1)
        DataCopy(dst[cacheStart], self.tokenLocal, params)
        SetFlag(HardEvent.MTE3_MTE2, EVENT_ID1)
        WaitFlag(HardEvent.MTE3_MTE2, EVENT_ID1)

    def CopyToCache(self, src, dst, start: int, cacheStart: int, plan: tuple, queBind: TQueBind):
        """base.h CopyToCache: whole chunks by DataCopy, the tail by DataCopyPad unless aligned."""
        handle, loops, tail = plan
        for _ in range(loops):
            self._CopyChunk(src[start], dst[cacheStart], handle, queBind)
            start += handle
            cacheStart += handle
        if tail:
            self._CopyChunk(src[start], dst[cacheStart], tail, queBind)

    def _CopyChunk(self, srcGm, dstGm, count: int, queBind: TQueBind):
        bindLocal = queBind.AllocTensor(self.dtype)
        CopyRowsIn(bindLocal, srcGm, 1, count, 0)
        queBind.EnQue(bindLocal)
        bindLocal = queBind.DeQue(self.dtype)
        CopyRowsOut(dstGm, bindLocal, 1, count)
        queBind.FreeTensor(bindLocal)


# --- PA_NZ ---------------------------------------------------------------------------------------------
class KernelScatterPaKvCacheNz:
    """Template NZ (scatter_pa_kv_cache_normal_nz_{fully,not_fully}_load.h).

    A token row is loaded contiguously and stored as 32-byte blocks ``blockSize`` blocks apart:
    ``DataCopyParams(blockCount = chunks, blockLen = 1, srcStride = 0, dstStride = blockSize - 1)``.
    Fully load: K and V through one-deep bind queues; otherwise double-buffered row chunks.
    """

    def Init(self, key, value, slotMapping, keyCache, valueCache, tiling):
        self.tiling = tiling
        self.dtype = key.dtype
        idx = GetBlockIdx()
        self.curBlockFactor = tiling.tailBlockFactor if idx == tiling.usedCoreNum - 1 else tiling.blockFactor
        self.startTaskId = idx * tiling.blockFactor
        self.lastDim = BLOCK_SIZE // self.dtype.itemsize
        self.tokenSizeK = tiling.numHead * tiling.kHeadSize
        self.tokenSizeV = tiling.numHead * tiling.vHeadSize
        self.inputKeyGm, self.inputValueGm = key, value
        self.outputKeyCacheGm, self.outputValueCacheGm = keyCache, valueCache
        self.pipe = TPipe()
        self.slots = ControlChunk(self.pipe, slotMapping, T.RESERVED_UB_BYTES)
        item = self.dtype.itemsize
        if tiling.fullyLoad:
            self.inputKeyQueue, self.inputValueQueue = TQueBind(1, EVENT_ID0), TQueBind(1, EVENT_ID1)
            self.inputKeyQueue.InitBuffer(self.pipe, self.tokenSizeK * item)
            self.inputValueQueue.InitBuffer(self.pipe, self.tokenSizeV * item)
        else:
            chunk = tiling.ubSize // (BUFFER_NUM * 2) // BLOCK_SIZE * BLOCK_SIZE
            self.inputKeyQueue, self.inputValueQueue = TQueBind(2, EVENT_ID0), TQueBind(2, EVENT_ID2)
            self.inputKeyQueue.InitBuffer(self.pipe, chunk)
            self.inputValueQueue.InitBuffer(self.pipe, chunk)

    def Process(self):
        tl, bs = self.tiling, self.tiling.blockSize
        for i in range(self.curBlockFactor):
            t = self.startTaskId + i
            cacheIndex = self.slots.GetValue(t)
            if cacheIndex < 0:
                continue
            blocksIdx, blocksOffset = divmod(cacheIndex, bs)
            cacheStartK = blocksIdx * bs * self.tokenSizeK + blocksOffset * self.lastDim
            cacheStartV = blocksIdx * bs * self.tokenSizeV + blocksOffset * self.lastDim
            if tl.fullyLoad:
                self.ProcessToken(t, cacheStartK, cacheStartV)
                continue
            self.CopyRow(self.inputKeyGm[t * self.tokenSizeK], self.outputKeyCacheGm, cacheStartK,
                         (tl.kHandleNumPerLoop, tl.kLoopNum, tl.kTailHandleNum), self.inputKeyQueue)
            self.CopyRow(self.inputValueGm[t * self.tokenSizeV], self.outputValueCacheGm, cacheStartV,
                         (tl.vHandleNumPerLoop, tl.vLoopNum, tl.vTailHandleNum), self.inputValueQueue)

    def _InParams(self, count: int) -> DataCopyParams:
        return DataCopyParams(1, count // self.lastDim, 0, 0)

    def _OutParams(self, count: int) -> DataCopyParams:
        return DataCopyParams(count // self.lastDim, 1, 0, self.tiling.blockSize - 1)

    def ProcessToken(self, t: int, cacheStartK: int, cacheStartV: int):
        """normal_nz_fully_load.h Process body: K and V in, then both out."""
        inputKey = self.inputKeyQueue.AllocTensor(self.dtype)
        inputValue = self.inputValueQueue.AllocTensor(self.dtype)
        DataCopy(inputKey, self.inputKeyGm[t * self.tokenSizeK], self._InParams(self.tokenSizeK))
        DataCopy(inputValue, self.inputValueGm[t * self.tokenSizeV], self._InParams(self.tokenSizeV))
        self.inputKeyQueue.EnQue(inputKey)
        self.inputValueQueue.EnQue(inputValue)
        inputKey = self.inputKeyQueue.DeQue(self.dtype)
        inputValue = self.inputValueQueue.DeQue(self.dtype)
        DataCopy(self.outputKeyCacheGm[cacheStartK], inputKey, self._OutParams(self.tokenSizeK))
        DataCopy(self.outputValueCacheGm[cacheStartV], inputValue, self._OutParams(self.tokenSizeV))
        self.inputKeyQueue.FreeTensor(inputKey)
        self.inputValueQueue.FreeTensor(inputValue)

    def CopyRow(self, srcGm, dstGm, cacheStart: int, plan: tuple, queue: TQueBind):
        """Not fully load: the row in chunks of whole 32-byte columns (each a multiple of lastDim)."""
        handle, loops, tail = plan
        colStride = self.tiling.blockSize * self.lastDim  # elements between fractal columns
        pieces = [(j * handle, handle) for j in range(loops)] + ([(loops * handle, tail)] if tail else [])
        for offset, count in pieces:
            local = queue.AllocTensor(self.dtype)
            DataCopy(local, srcGm[offset], self._InParams(count))
            queue.EnQue(local)
            local = queue.DeQue(self.dtype)
            DataCopy(dstGm[cacheStart + offset // self.lastDim * colStride], local, self._OutParams(count))
            queue.FreeTensor(local)


# --- compress templates --------------------------------------------------------------------------------
class _CompressBase:
    """Shared set-up of Alibi/Rope/Omni (base.h PreProcess / ParamSet): control values and rows."""

    def InitControl(self, slotMapping, compressLens, compressSeqOffset, seqLens, tiling):
        self.tiling = tiling
        self.numHeads, self.headSize = tiling.numHead, tiling.kHeadSize
        self.pipe = TPipe()
        chunk = T.CONTROL_CHUNK_BYTES
        self.slots = ControlChunk(self.pipe, slotMapping, chunk)
        self.wins = ControlChunk(self.pipe, compressLens, chunk)
        self.offsets = None if compressSeqOffset is None else ControlChunk(self.pipe, compressSeqOffset, chunk)
        item = seqLens.dtype.itemsize
        seqBytes = -(-tiling.batch * item // BLOCK_SIZE) * BLOCK_SIZE
        self.seqLens = ControlChunk(self.pipe, seqLens, seqBytes)
        # exclusive prefix sums of seq_lens, on the scalar unit (base.h PreProcess csumSeqLen)
        self.csumSeqLen = [0] * tiling.batch
        for b in range(1, tiling.batch):
            self.csumSeqLen[b] = self.csumSeqLen[b - 1] + self.seqLens.GetValue(b - 1)

    def RowStart(self, batchId: int, j: int, headId: int) -> int:
        """Element offset of token j of (batch, head) in key/value (3-D packed or 4-D [B, S, N, D])."""
        base = batchId * self.tiling.seqLen if self.tiling.seqLen else self.csumSeqLen[batchId]
        return ((base + j) * self.numHeads + headId) * self.headSize

    def ParamSet(self, task: int) -> tuple:
        """(slot, batch, head, seqLen, offset, window) of one task, with offset -1 or window 0 meaning
        "no compression" (offset := seqLen) and the window clamped to the sequence."""
        slotValue = self.slots.GetValue(task)
        batchId, headId = divmod(task, self.numHeads)
        seqLen = self.seqLens.GetValue(batchId)
        headWin = self.wins.GetValue(task)
        offsetIdx = -1 if self.offsets is None else self.offsets.GetValue(task)
        if offsetIdx == -1 or headWin == 0:
            offsetIdx, headWin = seqLen, 0
        offsetIdx = min(offsetIdx, seqLen)
        return slotValue, batchId, headId, seqLen, offsetIdx, min(headWin, seqLen - offsetIdx)


class KernelScatterPaKvCacheAlibi(_CompressBase):
    """Template ALIBI (compress_alibi.h): rows ``L - win .. L - 1`` of each (batch, head) to cache rows
    ``slot ..``; K then V per task through one buffer, serialised by flags (CopyKvCache)."""

    def Init(self, key, value, slotMapping, keyCache, valueCache, compressLens, seqLens, tiling):
        self.InitControl(slotMapping, compressLens, None, seqLens, tiling)
        self.dtype = key.dtype
        self.pairs = ((key, keyCache), (value, valueCache))
        self.tokenBuf = TBuf(TPosition.VECCALC)
        self.pipe.InitBuffer(self.tokenBuf, tiling.ubSize)
        self.tokenLocal = self.tokenBuf.Get(self.dtype)
        self.startTaskId, self.perCoreTaskNum = AllocateTask(tiling.numTokens)

    def Process(self):
        d, perLoop = self.headSize, self.tiling.kHandleNumPerLoop
        for i in range(self.perCoreTaskNum):
            task = self.startTaskId + i
            slotValue = self.slots.GetValue(task)
            if slotValue < 0:
                continue
            batchId, headId = divmod(task, self.numHeads)
            seqLen, headWin = self.seqLens.GetValue(batchId), self.wins.GetValue(task)
            for r0 in range(0, headWin, perLoop):
                rows = min(perLoop, headWin - r0)
                start = self.RowStart(batchId, seqLen - headWin + r0, headId)
                for src, dst in self.pairs:
                    CopyRowsIn(self.tokenLocal, src[start], rows, d, (self.numHeads - 1) * d)
                    SetFlag(HardEvent.MTE2_MTE3, EVENT_ID1)
                    WaitFlag(HardEvent.MTE2_MTE3, EVENT_ID1)
                    CopyRowsOut(dst[(slotValue + r0) * d], self.tokenLocal, rows, d)
                    SetFlag(HardEvent.MTE3_MTE2, EVENT_ID1)
                    WaitFlag(HardEvent.MTE3_MTE2, EVENT_ID1)


class KernelScatterPaKvCacheRope(_CompressBase):
    """Templates ROPE and OMNI (compress_rope.h / compress_omni.h); tasks ``0 .. B*N-1`` are K, the
    next ``B*N`` are V (AllocateTaskRope). Rope: part B (mean token) first, then part A (tokens
    before the window) and part C (after it) through ping/pong buffers (CopyKvCacheDoubleBuf)."""

    def Init(self, key, value, slotMapping, keyCache, valueCache, compressLens, compressSeqOffset,
             seqLens, tiling):
        self.InitControl(slotMapping, compressLens, compressSeqOffset, seqLens, tiling)
        self.dtype = key.dtype
        self.rope = tiling.templateType == T.TEMPLATE_ROPE
        self.pairs = ((key, keyCache), (value, valueCache))
        self.startTaskId, self.perCoreTaskNum = AllocateTask(T.TASK_MULTIPLE * tiling.numTokens)
        item = self.dtype.itemsize
        self.copyLocals = [self._Buf(tiling.copyFp16Num * item, self.dtype) for _ in range(BUFFER_NUM)]
        if self.rope:
            self.pitch = _pitch(self.headSize, self.dtype)
            rows = tiling.addNumPerLoop * self.pitch
            self.tokenLocals = [self._Buf(rows * item, self.dtype) for _ in range(BUFFER_NUM)]
            self.cast = self.dtype != FP32
            self.compressLocals = ([self._Buf(rows * 4, FP32) for _ in range(BUFFER_NUM)] if self.cast
                                   else self.tokenLocals)
            self.tokenSumLocal = self._Buf(self.pitch * 4, FP32)
            self.countLocal = self._Buf(self.pitch * 4, FP32)
            self.outLocal = self._Buf(self.pitch * item, self.dtype)

    def _Buf(self, nbytes: int, dtype):
        buf = TBuf(TPosition.VECCALC)
        self.pipe.InitBuffer(buf, nbytes)
        return buf.Get(dtype)

    def Process(self):
        numTasks = self.tiling.numTokens
        SetFlag(HardEvent.MTE3_V, EVENT_ID0)  # the output token buffer starts free
        for i in range(self.perCoreTaskNum):
            task = self.startTaskId + i
            src, dst = self.pairs[task >= numTasks]
            self.Compress(src, dst, task % numTasks)
        WaitFlag(HardEvent.MTE3_V, EVENT_ID0)

    def Compress(self, src, dst, task: int):
        slotValue, batchId, headId, seqLen, offsetIdx, headWin = self.ParamSet(task)
        if slotValue < 0:
            return
        mean = self.rope and headWin > 0
        if mean:  # PART B: the window's mean token goes to row slot + offset
            self.ComputeAvg(src, dst[(slotValue + offsetIdx) * self.headSize], batchId, headId, offsetIdx,
                            headWin)
        SetFlag(HardEvent.MTE3_MTE2, EVENT_ID0)
        SetFlag(HardEvent.MTE3_MTE2, EVENT_ID1)
        # PART A: tokens before the window; PART C: tokens after it
        self.Copy2Cache(src, dst, batchId, headId, 0, offsetIdx, slotValue)
        tailStart = offsetIdx + headWin
        self.Copy2Cache(src, dst, batchId, headId, tailStart, seqLen - tailStart,
                        slotValue + offsetIdx + (1 if mean else 0))
        WaitFlag(HardEvent.MTE3_MTE2, EVENT_ID0)
        WaitFlag(HardEvent.MTE3_MTE2, EVENT_ID1)

    def Copy2Cache(self, src, dst, batchId: int, headId: int, first: int, count: int, dstRow: int):
        """*count* token rows from token *first* to cache rows *dstRow* .. (ping/pong buffers)."""
        d, perLoop = self.headSize, self.tiling.kHandleNumPerLoop
        for k, r0 in enumerate(range(0, count, perLoop)):
            rows, ev = min(perLoop, count - r0), k % BUFFER_NUM
            local = self.copyLocals[ev]
            WaitFlag(HardEvent.MTE3_MTE2, ev)
            CopyRowsIn(local, src[self.RowStart(batchId, first + r0, headId)], rows, d, (self.numHeads - 1) * d)
            SetFlag(HardEvent.MTE2_MTE3, ev)
            WaitFlag(HardEvent.MTE2_MTE3, ev)
            CopyRowsOut(dst[(dstRow + r0) * d], local, rows, d)
            SetFlag(HardEvent.MTE3_MTE2, ev)

    def ComputeAvg(self, src, dstGm, batchId: int, headId: int, offsetIdx: int, headWin: int):
        """fp32 sum of the window rows in order from +0, divided by the window length, rounded to the
        token dtype (CAST_RINT): compress_rope.h ComputeAvg."""
        d, pitch, perLoop = self.headSize, self.pitch, self.tiling.addNumPerLoop
        Duplicate(self.tokenSumLocal, 0.0, d)
        PipeBarrier(Pipe.V)
        SetFlag(HardEvent.V_MTE2, EVENT_ID0)
        SetFlag(HardEvent.V_MTE2, EVENT_ID1)
        for k, r0 in enumerate(range(0, headWin, perLoop)):
            rows, ev = min(perLoop, headWin - r0), k % BUFFER_NUM
            WaitFlag(HardEvent.V_MTE2, ev)
            start = self.RowStart(batchId, offsetIdx + r0, headId)
            CopyRowsIn(self.tokenLocals[ev], src[start], rows, d, (self.numHeads - 1) * d)
            SetFlag(HardEvent.MTE2_V, EVENT_ID2)
            WaitFlag(HardEvent.MTE2_V, EVENT_ID2)
            compressLocal = self.compressLocals[ev]
            if self.cast:
                Cast(compressLocal, self.tokenLocals[ev], RoundMode.CAST_NONE, rows * pitch)
                PipeBarrier(Pipe.V)
            for r in range(rows):
                Add(self.tokenSumLocal, compressLocal[r * pitch], self.tokenSumLocal, d)
                PipeBarrier(Pipe.V)
            SetFlag(HardEvent.V_MTE2, ev)
        WaitFlag(HardEvent.V_MTE2, EVENT_ID0)
        WaitFlag(HardEvent.V_MTE2, EVENT_ID1)
        Duplicate(self.countLocal, float(headWin), d)
        PipeBarrier(Pipe.V)
        Div(self.tokenSumLocal, self.tokenSumLocal, self.countLocal, d)
        PipeBarrier(Pipe.V)
        WaitFlag(HardEvent.MTE3_V, EVENT_ID0)  # the previous mean token has left outLocal
        if self.cast:
            Cast(self.outLocal, self.tokenSumLocal, RoundMode.CAST_RINT, d)
        else:
            Copy(self.outLocal, self.tokenSumLocal, d)
        SetFlag(HardEvent.V_MTE3, EVENT_ID0)
        WaitFlag(HardEvent.V_MTE3, EVENT_ID0)
        CopyRowsOut(dstGm, self.outLocal, 1, d)
        SetFlag(HardEvent.MTE3_V, EVENT_ID0)


# --- entry -----------------------------------------------------------------------------------------------
def scatter_pa_kv_cache(key, keyCacheIn, slotMapping, value, valueCacheIn, compressLens, compressSeqOffset,
                        seqLens, keyCacheOut, valueCacheOut, workspace, tiling):
    """Kernel entry, as the CANN ``scatter_pa_kv_cache``: pick the template, Init, Process.

    The caches are Ref tensors: ``*CacheIn`` and ``*CacheOut`` are the same GM buffer.
    """
    template = tiling.templateType
    if template in (T.TEMPLATE_NORMAL, T.TEMPLATE_NORM_NCT, T.TEMPLATE_SISO, T.TEMPLATE_SISO_NCT):
        op = KernelScatterPaKvCacheNd()
        op.Init(key, value, slotMapping, keyCacheOut, valueCacheOut, tiling)
    elif template == T.TEMPLATE_NZ:
        op = KernelScatterPaKvCacheNz()
        op.Init(key, value, slotMapping, keyCacheOut, valueCacheOut, tiling)
    elif template == T.TEMPLATE_ALIBI:
        op = KernelScatterPaKvCacheAlibi()
        op.Init(key, value, slotMapping, keyCacheOut, valueCacheOut, compressLens, seqLens, tiling)
    elif template in (T.TEMPLATE_ROPE, T.TEMPLATE_OMNI):
        op = KernelScatterPaKvCacheRope()
        op.Init(key, value, slotMapping, keyCacheOut, valueCacheOut, compressLens, compressSeqOffset, seqLens,
                tiling)
    else:
        raise NotImplementedError(f"ScatterPaKvCache template {template} is not modelled")
    op.Process()
