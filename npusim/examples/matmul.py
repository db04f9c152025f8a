"""Reference kernel: tiled multi-core fp16 matmul C = A @ B, written like an Ascend C cube kernel.

Host side (:func:`matmul_tiling`) cuts C (M x N) into baseM x baseN output tiles, dealt round-robin
to ``usedCoreNum`` AICs, and K into baseK steps; tails (M, N, K not multiples of the base sizes) are
computed, never assumed away. Device side (:class:`KernelMatmul`), per output tile and K step:
CopyIn (GM -> L1, ND -> NZ, MTE2) -> SplitA / SplitB (L1 -> L0A / L0B, LoadData, MTE1) -> Compute
(Mmad into L0C, M) -> after the last K step CopyOut (Fixpipe L0C -> GM, NZ -> ND, fp32 -> C's dtype).
Stages are linked by TQue with BUFFER_NUM tensors each (layouts: docs/numerics_cube.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.kernel import (DataCopy, Fixpipe, FixpipeParamsV220, GetBlockIdx, GetBlockNum, GlobalTensor, LoadData,
                           LoadData2DParams, Mmad, MmadParams, Nd2NzParams, Pipe, PipeBarrier, QuantMode_t, TPipe,
                           TPosition, TQue)
from npusim.isa.cube import MMAD_SETTLE_FRACTALS

BUFFER_NUM = 2  # tensors per queue: double buffering of the L1, L0 and L0C stages
C0 = 16  # fp16 elements per 32-byte fractal row; L0A/L0B fractals are 16 x 16 (hardware.md §3)
FRACTAL = C0 * C0  # elements per fractal
# Per-core capacities of the 220x AI Core, bytes (hardware.md §5)
L0A_BYTES = L0B_BYTES = 64 * 1024
L0C_BYTES = 128 * 1024
L1_BYTES = 512 * 1024


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _align16(x: int) -> int:
    return _ceil_div(x, C0) * C0


@dataclass(frozen=True)
class MatmulTilingData:
    M: int
    N: int
    K: int
    baseM: int
    baseN: int
    baseK: int
    mTiles: int
    nTiles: int
    kTiles: int
    usedCoreNum: int


def matmul_tiling(m: int, n: int, k: int, core_num: int, base_m: int = 128, base_n: int = 128,
                  base_k: int = 64) -> MatmulTilingData:
    """Choose the tiling for C (m x n) = A (m x k) @ B (k x n) on *core_num* AICs.

    Raises AclnnError(ACLNN_ERR_PARAM_INVALID) naming the parameter for empty shapes, base sizes that
    are not multiples of 16, or double-buffered tiles that do not fit L1, L0A, L0B or L0C.
    """
    for name, v in (("m", m), ("n", n), ("k", k), ("core_num", core_num)):
        if v <= 0:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"matmul_tiling: {name} must be > 0, got {v}")
    for name, v in (("base_m", base_m), ("base_n", base_n), ("base_k", base_k)):
        if v <= 0 or v % C0:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"matmul_tiling: {name} must be a positive multiple of 16, "
                                                      f"got {v}")
    a_bytes, b_bytes, c_bytes = base_m * base_k * 2, base_k * base_n * 2, base_m * base_n * 4
    for what, need, have in (("L0A", a_bytes, L0A_BYTES), ("L0B", b_bytes, L0B_BYTES),
                             ("L0C", c_bytes, L0C_BYTES), ("L1", a_bytes + b_bytes, L1_BYTES)):
        if BUFFER_NUM * need > have:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"matmul_tiling: base sizes need {BUFFER_NUM} x {need} bytes "
                                                      f"of {what}, which holds {have}")
    m_tiles, n_tiles = _ceil_div(m, base_m), _ceil_div(n, base_n)
    return MatmulTilingData(m, n, k, base_m, base_n, base_k, m_tiles, n_tiles, _ceil_div(k, base_k),
                            min(core_num, m_tiles * n_tiles))


class KernelMatmul:
    def Init(self, a: GlobalTensor, b: GlobalTensor, c: GlobalTensor, tiling: MatmulTilingData):
        self.tiling = tiling
        self.aGm, self.bGm, self.cGm = a, b, c
        self.quant = QuantMode_t.F322F16 if c.dtype == np.float16 else QuantMode_t.NoQuant
        self.pipe = TPipe()
        self.inQueueA1 = TQue(TPosition.A1, BUFFER_NUM)
        self.inQueueB1 = TQue(TPosition.B1, BUFFER_NUM)
        self.inQueueA2 = TQue(TPosition.A2, BUFFER_NUM)
        self.inQueueB2 = TQue(TPosition.B2, BUFFER_NUM)
        self.outQueueCO1 = TQue(TPosition.CO1, BUFFER_NUM)
        t = tiling
        self.pipe.InitBuffer(self.inQueueA1, BUFFER_NUM, t.baseM * t.baseK * 2)
        self.pipe.InitBuffer(self.inQueueB1, BUFFER_NUM, t.baseK * t.baseN * 2)
        self.pipe.InitBuffer(self.inQueueA2, BUFFER_NUM, t.baseM * t.baseK * 2)
        self.pipe.InitBuffer(self.inQueueB2, BUFFER_NUM, t.baseK * t.baseN * 2)
        self.pipe.InitBuffer(self.outQueueCO1, BUFFER_NUM, t.baseM * t.baseN * 4)

    def Process(self):
        t = self.tiling
        for tile in range(GetBlockIdx(), t.mTiles * t.nTiles, GetBlockNum()):
            mIdx, nIdx = divmod(tile, t.nTiles)
            self.m0, self.n0 = mIdx * t.baseM, nIdx * t.baseN
            self.mTile = min(t.baseM, t.M - self.m0)  # tail tiles are smaller
            self.nTile = min(t.baseN, t.N - self.n0)
            cLocal = self.outQueueCO1.AllocTensor(np.float32)
            for kIdx in range(t.kTiles):
                k0 = kIdx * t.baseK
                kTile = min(t.baseK, t.K - k0)
                self.CopyIn(k0, kTile)
                self.SplitA(kTile)
                self.SplitB(kTile)
                self.Compute(cLocal, kIdx, kTile)
            self.outQueueCO1.EnQue(cLocal)
            self.CopyOut()

    def CopyIn(self, k0: int, kTile: int):
        t = self.tiling
        a1Local = self.inQueueA1.AllocTensor(np.float16)
        b1Local = self.inQueueB1.AllocTensor(np.float16)
        # A tile (mTile x kTile) and B tile (kTile x nTile), ND in GM -> NZ in L1
        DataCopy(a1Local, self.aGm[self.m0 * t.K + k0],
                 Nd2NzParams(ndNum=1, nValue=self.mTile, dValue=kTile, srcNdMatrixStride=0, srcDValue=t.K,
                             dstNzC0Stride=_align16(self.mTile), dstNzNStride=1, dstNzMatrixStride=0))
        DataCopy(b1Local, self.bGm[k0 * t.N + self.n0],
                 Nd2NzParams(ndNum=1, nValue=kTile, dValue=self.nTile, srcNdMatrixStride=0, srcDValue=t.N,
                             dstNzC0Stride=_align16(kTile), dstNzNStride=1, dstNzMatrixStride=0))
        self.inQueueA1.EnQue(a1Local)
        self.inQueueB1.EnQue(b1Local)

    def SplitA(self, kTile: int):
        a1Local = self.inQueueA1.DeQue(np.float16)
        a2Local = self.inQueueA2.AllocTensor(np.float16)
        mBlocks, kBlocks = _ceil_div(self.mTile, C0), _ceil_div(kTile, C0)
        # NZ (column blocks of K) -> ZZ: one LoadData per row of fractals
        params = LoadData2DParams()
        params.repeatTimes = kBlocks
        params.srcStride = mBlocks
        for i in range(mBlocks):
            LoadData(a2Local[i * kBlocks * FRACTAL], a1Local[i * FRACTAL], params)
        self.inQueueA2.EnQue(a2Local)
        self.inQueueA1.FreeTensor(a1Local)

    def SplitB(self, kTile: int):
        b1Local = self.inQueueB1.DeQue(np.float16)
        b2Local = self.inQueueB2.AllocTensor(np.float16)
        kBlocks, nBlocks = _ceil_div(kTile, C0), _ceil_div(self.nTile, C0)
        # NZ (column blocks of N) -> ZN: per K block, the fractals of one row, each transposed
        params = LoadData2DParams()
        params.repeatTimes = nBlocks
        params.srcStride = kBlocks
        params.ifTranspose = True
        for i in range(kBlocks):
            LoadData(b2Local[i * nBlocks * FRACTAL], b1Local[i * FRACTAL], params)
        self.inQueueB2.EnQue(b2Local)
        self.inQueueB1.FreeTensor(b1Local)

    def Compute(self, cLocal, kIdx: int, kTile: int):
        a2Local = self.inQueueA2.DeQue(np.float16)
        b2Local = self.inQueueB2.DeQue(np.float16)
        params = MmadParams()
        params.m, params.n, params.k = self.mTile, self.nTile, kTile
        params.cmatrixInitVal = kIdx == 0  # the first K step starts the accumulator, later ones add
        Mmad(cLocal, a2Local, b2Local, params)
        if _ceil_div(self.mTile, C0) * _ceil_div(self.nTile, C0) < MMAD_SETTLE_FRACTALS:
            PipeBarrier(Pipe.M)  # a small Mmad's results must settle before the next one accumulates on them
        self.inQueueA2.FreeTensor(a2Local)
        self.inQueueB2.FreeTensor(b2Local)

    def CopyOut(self):
        t = self.tiling
        cLocal = self.outQueueCO1.DeQue(np.float32)
        params = FixpipeParamsV220()
        params.nSize, params.mSize = self.nTile, self.mTile
        params.srcStride = _align16(self.mTile)  # rows per column block of the NZ tile in L0C
        params.dstStride = t.N  # ND row pitch of C
        params.quantPre = self.quant
        Fixpipe(self.cGm[self.m0 * t.N + self.n0], cLocal, params)
        self.outQueueCO1.FreeTensor(cLocal)


def matmul_custom(a: GlobalTensor, b: GlobalTensor, c: GlobalTensor, tiling: MatmulTilingData):
    """Kernel entry, as a CANN ``matmul_custom``: build the class, Init, Process."""
    op = KernelMatmul()
    op.Init(a, b, c, tiling)
    op.Process()
