"""What-if (calibration diagnostic, never used by the operator): npusim's FA varlen kernel with the cube side of the
kernel the FA board file ran, FlashAttentionScore's S1s2Bn2gs1 template with L1 reuse (docs/calibration.md "L2: what
the two boards say"). Outputs are the shipped kernel's (tests/npusim/test_calibration_floor.py compares the bits).

What the sources give that side (`[H]` = hicann/ops-transformer @ c29bc10; `[A]` = cannmirror/asc-devkit @ v8.5.0,
cc982f3, the Matmul API of CANN 8.5.0):
- K (mm1's B) and V (mm2's B) are IBShare matrices: `b1Type` / `b2Type` take `enableL1Reuse` as their IBShare flag and
  both Matmuls use `CFG_IBSHARE_EXCEED` ([H] op_kernel/flash_attention_score_s1s2_bn2gs1.h:71-118,
  flash_attention_score_common.h:52 = `GetIBShareNormConfig(true)`), so the two AIVs' requests on one tile load it once.
- `GetIBShareNormConfig` leaves `isDoubleCache` false ([A] include/adv_api/matmul/tiling.h:413-419: "whether L1 Buffer
  caches two blocks of data at the same time"), which selects `CubeInBufferType::SINGLE_GLOBAL_BUFFER` ([A]
  impl/adv_api/detail/matmul/resource/cube_in_buffer/cube_in_buffer_utils.h:84-86, :116-120): one cache per AI Core
  (`gL1Cache`, `__BLOCK_LOCAL__`, global_cache.h:25-42) behind a one-deep queue (`TQue<TPosition::A1, 1, 1>`, :149).
  A request whose B address differs from the cached one clears the cache (cube_in_buffer_single_global_buffer.h:86-92)
  and reallocates it, so loading the next tile (V after K, the next K after V) waits until the cube has read the
  last chunk of the one before.
- L0A / L0B are double-buffered (the tiling's default `l0aDB = l0bDB = DB_ON`, [A] impl/adv_api/tiling/matmul/
  matmul_tiling_algorithm.h:38-39, kept for 128 x 128 base blocks by PreprocessL0DB, .cpp:3465-3488) as in the shipped
  kernel; L0C is single-buffered (`l0cDB = DB_OFF`, .h:40; GetL0CoreStatus .cpp:2530-2535; FA's tiling raises it only
  for D > 128, [H] op_host/flash_attention_score_tiling_general.cpp:1962-1966) with the unit flag on (`enUnitFlag`
  true in both configs), which lets FixPipe drain a block while Mmad fills it. npusim does not model the unit flag,
  so the what-if brackets it: ``l0c_depth`` 1 (no overlap of a block's FixPipe with the next block's Mmad) and 2
  (full overlap, the shipped kernel's L0C).
The Q block and the P chunks stay per worker, as in the shipped kernel.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from npusim.kernel import (
    DataCopy,
    Fixpipe,
    FixpipeParamsV220,
    HardEvent,
    Nd2NzParams,
    SetFlag,
    TPosition,
    TQue,
    WaitFlag,
)
from ops.common.cube_tiles import CubeTiles, c16
from ops.flash_attention_var_len_score import kernel as fa_kernel
from ops.flash_attention_var_len_score.tiling import CUBE_M, L0C_BUFFER_BYTES

F32 = np.dtype(np.float32)
CHUNK_READY = 7  # MTE2 -> MTE1 event of one cached chunk (a load streams into the cache chunk by chunk)


class KernelFaSharedKv(fa_kernel.KernelFlashAttentionVarLenScore):
    """The shipped kernel with K and V in one one-deep L1 cache per AI Core, shared by its two workers."""

    l0c_depth = 2
    shared_loads = 0  # K and V tiles a worker found in the cache (the second worker's requests)

    def InitCube(self):
        ti, dp, isz = self.t, self.Dp, self.isz
        self.tiles = CubeTiles(self.pipe, self.inDt)
        self.qQues = [TQue(TPosition.A1, 1) for _ in self.units]
        for que in self.qQues:
            self.pipe.InitBuffer(que, 1, self.s1B * dp * isz)
        self.kvQue = TQue(TPosition.B1, 1)
        self.pipe.InitBuffer(self.kvQue, 1, self.W * dp * isz)
        self.pQue = TQue(TPosition.A1, fa_kernel.BUFFER_NUM)
        self.pipe.InitBuffer(self.pQue, fa_kernel.BUFFER_NUM, self.s1B * ti.kChunk * isz)
        self.cQue = TQue(TPosition.CO1, self.l0c_depth)
        self.pipe.InitBuffer(self.cQue, self.l0c_depth, L0C_BUFFER_BYTES)
        self.qL1 = [None] * len(self.units)
        self.kvL1, self.kvTag, self.kvMiss = None, None, False

    def _cached(self, tag) -> bool:
        """True if *tag*'s tile is in the cache; a miss frees the old tile (its FreeTensor waits for its last MTE1
        read) and allocates the cache for the new one."""
        if self.kvTag == tag:
            type(self).shared_loads += 1
            return True
        if self.kvL1 is not None:
            self.kvQue.FreeTensor(self.kvL1)
        self.kvL1, self.kvTag = self.kvQue.AllocTensor(self.inDt), tag
        return False

    def _load_chunk(self, dst, src, rows: int, cols: int, pitch: int):
        """One chunk into the cache; the cube's next read of it waits for this load only."""
        DataCopy(dst, src, Nd2NzParams(1, rows, cols, 0, pitch, c16(rows), 1, 0))
        SetFlag(HardEvent.MTE2_MTE1, CHUNK_READY)
        WaitFlag(HardEvent.MTE2_MTE1, CHUNK_READY)

    def _filled(self, last: bool, miss: bool):
        """After a miss's last chunk: the cache holds the tile (queue hand-over, so that a later miss may free it)."""
        if last and miss:
            self.kvQue.EnQue(self.kvL1)
            self.kvL1 = self.kvQue.DeQue(self.inDt)

    def ComputeMm1Chunk(self, t: int, k: int, nc: int):
        a, ti, D = self.a, self.t, self.D
        b, n, _, rows, col0, cols, pitch, _, _ = self._task(t, k)
        n2d, ncols = ti.n2Size * D, min(ti.nChunk, cols - nc)
        if nc == 0:
            self.kvMiss = not self._cached(("K", t, b, n // ti.gSize, col0, cols))
        kL1 = self.kvL1[nc * self.Dp]
        if self.kvMiss:
            kvOff = a.cuKv[b] * n2d + (n // ti.gSize) * D
            self._load_chunk(kL1, self.kGm[kvOff + (col0 + nc) * n2d], ncols, D, n2d)
        wsS = self.ws[k][0][t % 2]
        for mc in range(0, rows, CUBE_M):
            mrows = min(CUBE_M, rows - mc)
            cL0 = self.cQue.AllocTensor(F32)
            for kc in range(0, D, ti.kChunk):
                kcols = min(ti.kChunk, D - kc)
                self.tiles.SplitA(self.qL1[k], c16(rows) // 16, mc, mrows, kc, kcols)
                self.tiles.SplitBTransposed(kL1, c16(ncols) // 16, kc, kcols)
                self.tiles.Compute(cL0, mrows, ncols, kcols, kc == 0)
            self.cQue.EnQue(cL0)
            cL0 = self.cQue.DeQue(F32)
            Fixpipe(wsS[mc * pitch + nc], cL0, FixpipeParamsV220(nSize=ncols, mSize=mrows, srcStride=c16(mrows),
                                                                  dstStride=pitch))
            self.cQue.FreeTensor(cL0)
        self._filled(nc + ti.nChunk >= cols, self.kvMiss)

    def ComputeMm2Chunk(self, t: int, k: int, dn: int, kc: int, accs: list):
        a, ti, D = self.a, self.t, self.D
        if self.isz != 2 or D > CUBE_M:
            raise ValueError("the shared-K/V what-if covers fp16/bf16 with D <= 128 (the FA board file's calls)")
        b, n, _, rows, col0, cols, pitch, _, _ = self._task(t, k)
        n2d, n2, kcols = ti.n2Size * D, n // ti.gSize, min(ti.kChunk, cols - kc)
        if kc == 0:
            self.kvMiss = not self._cached(("V", t, b, n2, col0, cols))
        pL1 = self.pQue.AllocTensor(self.inDt)
        DataCopy(pL1, self.ws[k][1][t % 2][kc], Nd2NzParams(1, rows, kcols, 0, pitch, c16(rows), 1, 0))
        self.pQue.EnQue(pL1)
        vL1 = self.kvL1[kc * self.Dp]
        if self.kvMiss:
            self._load_chunk(vL1, self.vGm[(a.cuKv[b] + col0 + kc) * n2d + n2 * D], kcols, D, n2d)
        pL1 = self.pQue.DeQue(self.inDt)
        for mc, cL0 in zip(range(0, rows, CUBE_M), accs):
            self.tiles.SplitA(pL1, c16(rows) // 16, mc, min(CUBE_M, rows - mc), 0, kcols)
            self.tiles.SplitB(vL1, c16(kcols) // 16, kcols, D)
            self.tiles.Compute(cL0, min(CUBE_M, rows - mc), D, kcols, kc == 0)
        self.pQue.FreeTensor(pL1)
        self._filled(kc + ti.kChunk >= cols, self.kvMiss)


@contextmanager
def board_cube_side(l0c_depth: int):
    """Within the block, FA varlen calls run KernelFaSharedKv with *l0c_depth* L0C buffers (the kernel entry looks the
    class up by name at each call)."""
    shipped = fa_kernel.KernelFlashAttentionVarLenScore
    cls = type(f"KernelFaSharedKvL0c{l0c_depth}", (KernelFaSharedKv,), {"l0c_depth": l0c_depth})
    fa_kernel.KernelFlashAttentionVarLenScore = cls
    try:
        yield cls
    finally:
        fa_kernel.KernelFlashAttentionVarLenScore = shipped
