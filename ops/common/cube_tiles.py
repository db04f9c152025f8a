"""L1 -> L0A/L0B loads and Mmad of the attention kernels' cube side (docs/numerics_cube.md layouts).

Why one module: PromptFlashAttentionV2 and FlashAttentionVarLenScore both multiply a row block held
in L1 as NZ (Q or P) by a second operand in L1 (K as NZ of K, i.e. of B^T; V as NZ of V, i.e. of
B), with the same fractal bookkeeping. :class:`CubeTiles` owns the L0A/L0B queues of one AIC and
issues the LoadData / Mmad sequences; the caller owns L1, L0C and Fixpipe.

Contents: :func:`c16`, :data:`L0_BUFFER_BYTES`, :class:`CubeTiles` (``SplitA``, ``SplitATransposed``,
``SplitBTransposed``, ``SplitB``, ``Compute``).
"""
from __future__ import annotations

import numpy as np

from npusim.isa.cube import MMAD_SETTLE_FRACTALS
from npusim.kernel import LoadData, LoadData2DParams, Mmad, MmadParams, Pipe, PipeBarrier, TPosition, TQue

#: One L0A / L0B buffer: half of the 64 KiB L0A/L0B of A2/A3 (ChipSpec l0a_bytes), double-buffered.
L0_BUFFER_BYTES = 32 * 1024
BUFFER_NUM = 2


def c16(x: int) -> int:
    """x rounded up to a multiple of 16 (fractal rows)."""
    return -(-x // 16) * 16


class CubeTiles:
    """L0A/L0B queues (depth 2, 32 KiB each) of one AIC for operands of dtype *in_dtype*.

    Lifecycle: construct after ``TPipe()`` with that pipe; per Mmad call ``SplitA`` and one of
    ``SplitBTransposed`` / ``SplitB``, then ``Compute`` (which frees both L0 buffers).
    """

    def __init__(self, pipe, in_dtype):
        self.inDt = np.dtype(in_dtype)
        self.c0 = 32 // self.inDt.itemsize  # elements per 32-byte fractal row (K0)
        self.fractal = 512 // self.inDt.itemsize
        self.aQue = TQue(TPosition.A2, BUFFER_NUM)
        self.bQue = TQue(TPosition.B2, BUFFER_NUM)
        pipe.InitBuffer(self.aQue, BUFFER_NUM, L0_BUFFER_BYTES)
        pipe.InitBuffer(self.bQue, BUFFER_NUM, L0_BUFFER_BYTES)

    def SplitA(self, srcL1, mBlocksAll: int, mc: int, mrows: int, kc: int, kcols: int) -> None:
        """L1 (NZ, mBlocksAll row blocks) -> L0A (ZZ) for rows [mc, mc+mrows), k [kc, kc+kcols)."""
        aL0 = self.aQue.AllocTensor(srcL1.dtype)
        kBlocks = -(-kcols // self.c0)
        params = LoadData2DParams(repeatTimes=kBlocks, srcStride=mBlocksAll)
        kb0, mb0 = kc // self.c0, mc // 16
        for mb in range(c16(mrows) // 16):
            LoadData(aL0[mb * kBlocks * self.fractal], srcL1[(kb0 * mBlocksAll + mb0 + mb) * self.fractal], params)
        self.aQue.EnQue(aL0)

    def SplitATransposed(self, srcL1, kBlocksAll: int, mrows: int, kcols: int) -> None:
        """A = X^T with X in L1 as NZ (k x m, kBlocksAll row blocks) -> L0A (ZZ) with a transposing load per
        m block (b16): the backward's P^T dO and dS^T Q take P and dS as they are stored (G x rows)."""
        if self.inDt.itemsize != 2:
            raise NotImplementedError("CubeTiles.SplitATransposed: only b16 transposing loads are modelled")
        aL0 = self.aQue.AllocTensor(srcL1.dtype)
        kBlocks = c16(kcols) // 16
        params = LoadData2DParams(repeatTimes=kBlocks, srcStride=1, ifTranspose=True)
        for mb in range(c16(mrows) // 16):
            LoadData(aL0[mb * kBlocks * self.fractal], srcL1[mb * kBlocksAll * self.fractal], params)
        self.aQue.EnQue(aL0)

    def SplitBTransposed(self, bTL1, nBlocks: int, kc: int, kcols: int) -> None:
        """B^T chunk in L1 (NZ of an n x k matrix, nBlocks row blocks) -> L0B: already in L0B order."""
        bL0 = self.bQue.AllocTensor(bTL1.dtype)
        kBlocks = -(-kcols // self.c0)
        LoadData(bL0, bTL1[(kc // self.c0) * nBlocks * self.fractal],
                 LoadData2DParams(repeatTimes=kBlocks * nBlocks, srcStride=1))
        self.bQue.EnQue(bL0)

    def SplitB(self, bL1, kBlocksAll: int, kcols: int, ncols: int) -> None:
        """B chunk in L1 (NZ of a k x n matrix) -> L0B with a transposing load per k block (b16, b8)."""
        bL0 = self.bQue.AllocTensor(bL1.dtype)
        if self.inDt.itemsize == 2:
            nBlocks = c16(ncols) // 16
            params = LoadData2DParams(repeatTimes=nBlocks, srcStride=kBlocksAll, ifTranspose=True)
            for kb in range(c16(kcols) // 16):
                LoadData(bL0[kb * nBlocks * self.fractal], bL1[kb * self.fractal], params)
        elif self.inDt.itemsize == 1:  # int8: each repeat transposes a 32 x 32 block (two fractals)
            nBlocks = -(-ncols // 16)
            params = LoadData2DParams(repeatTimes=nBlocks // 2, srcStride=kBlocksAll, ifTranspose=True)
            for kb in range(-(-kcols // 32)):
                LoadData(bL0[kb * nBlocks * self.fractal], bL1[2 * kb * self.fractal], params)
        else:
            raise NotImplementedError("CubeTiles.SplitB: the b32 transposing LoadData is not modelled; "
                                      "load B^T and use SplitBTransposed")
        self.bQue.EnQue(bL0)

    def Compute(self, cL0, m: int, n: int, k: int, init: bool) -> None:
        """Mmad of the queued L0A x L0B into *cL0* (accumulating unless *init*); frees both L0 buffers."""
        aL0 = self.aQue.DeQue(self.inDt)
        bL0 = self.bQue.DeQue(self.inDt)
        Mmad(cL0, aL0, bL0, MmadParams(m=m, n=n, k=k, cmatrixInitVal=init))
        if (c16(m) // 16) * (c16(n) // 16) < MMAD_SETTLE_FRACTALS:
            PipeBarrier(Pipe.M)  # a small Mmad's results settle before the next one accumulates on them
        self.aQue.FreeTensor(aL0)
        self.bQue.FreeTensor(bL0)
