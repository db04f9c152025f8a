"""Reference kernel: multi-core double-buffered vector add, written like Ascend C's AddCustom sample.

Host side (:func:`add_tiling`) splits ``total_length`` over ``block_dim`` AIVs in 32-byte-aligned slices
and each slice into tiles of ``tile_length`` elements; the last core and the last tile take the tails.
Device side (:class:`KernelAdd`): CopyIn (MTE2) -> Compute (V) -> CopyOut (MTE3), stages linked by
TQue with ``buffer_num`` buffers each (1: no overlap, 2: double buffering).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.kernel import (Add, DataCopy, GetBlockIdx, GlobalTensor, TPipe, TPosition, TQue)

ALIGN_ELEMS = 16  # 32 bytes of fp16: DataCopy moves whole 32-byte blocks


@dataclass(frozen=True)
class AddTilingData:
    totalLength: int
    blockLength: int  # elements per core (the last core may get fewer)
    tileLength: int
    bufferNum: int


def add_tiling(total_length: int, block_dim: int, tile_length: int = 2048, buffer_num: int = 2) -> AddTilingData:
    """Split the work: per-core slices rounded up to whole 32-byte blocks."""
    if total_length % ALIGN_ELEMS:
        raise ValueError(f"total_length must be a multiple of {ALIGN_ELEMS} elements")
    per_core = -(-total_length // block_dim)
    per_core = -(-per_core // ALIGN_ELEMS) * ALIGN_ELEMS
    return AddTilingData(total_length, per_core, tile_length, buffer_num)


class KernelAdd:
    def Init(self, x: GlobalTensor, y: GlobalTensor, z: GlobalTensor, tiling: AddTilingData):
        start = tiling.blockLength * GetBlockIdx()
        self.length = max(0, min(tiling.blockLength, tiling.totalLength - start))
        self.tileLength = tiling.tileLength
        self.xGm, self.yGm, self.zGm = x[start], y[start], z[start]
        self.pipe = TPipe()
        self.inQueueX = TQue(TPosition.VECIN, tiling.bufferNum)
        self.inQueueY = TQue(TPosition.VECIN, tiling.bufferNum)
        self.outQueueZ = TQue(TPosition.VECOUT, tiling.bufferNum)
        nbytes = self.tileLength * 2
        self.pipe.InitBuffer(self.inQueueX, tiling.bufferNum, nbytes)
        self.pipe.InitBuffer(self.inQueueY, tiling.bufferNum, nbytes)
        self.pipe.InitBuffer(self.outQueueZ, tiling.bufferNum, nbytes)

    def Process(self):
        for offset in range(0, self.length, self.tileLength):
            count = min(self.tileLength, self.length - offset)
            # one tile: CopyIn -> Compute -> CopyOut (ProcessTile, below the kernel: a step timing mode
            # replays, npusim/replay.py)
            self.ProcessTile(offset, count)

    def CopyIn(self, offset: int, count: int):
        xLocal = self.inQueueX.AllocTensor(np.float16)
        yLocal = self.inQueueY.AllocTensor(np.float16)
        DataCopy(xLocal, self.xGm[offset], count)
        DataCopy(yLocal, self.yGm[offset], count)
        self.inQueueX.EnQue(xLocal)
        self.inQueueY.EnQue(yLocal)

    def Compute(self, count: int):
        xLocal = self.inQueueX.DeQue(np.float16)
        yLocal = self.inQueueY.DeQue(np.float16)
        zLocal = self.outQueueZ.AllocTensor(np.float16)
        Add(zLocal, xLocal, yLocal, count)
        self.outQueueZ.EnQue(zLocal)
        self.inQueueX.FreeTensor(xLocal)
        self.inQueueY.FreeTensor(yLocal)

    def CopyOut(self, offset: int, count: int):
        zLocal = self.outQueueZ.DeQue(np.float16)
        DataCopy(self.zGm[offset], zLocal, count)
        self.outQueueZ.FreeTensor(zLocal)


def add_custom(x: GlobalTensor, y: GlobalTensor, z: GlobalTensor, tiling: AddTilingData):
    """Kernel entry, as the CANN sample's ``add_custom``: build the class, Init, Process."""
    op = KernelAdd()
    op.Init(x, y, z, tiling)
    op.Process()


# -------------------------------------------------------------------------------- replay key (timing mode)
# Declared below the kernel so that it reads as the Ascend C sample and its line numbers (the trace's sources)
# stay put. A tile's instruction stream is fixed by its length and the queues' ring state (which replay adds to
# the key itself); its three GM transfers move with the tile's offset: the key gives their byte addresses (fp16,
# 2 bytes an element), so that a replayed tile builds no GlobalTensor views; the views themselves
# (_tile_bases) are built only when a tile is recorded.
from npusim.replay import replayable  # noqa: E402


def _process_tile(self: KernelAdd, offset: int, count: int) -> None:
    """One tile of Process: CopyIn, Compute, CopyOut."""
    self.CopyIn(offset, count)
    self.Compute(count)
    self.CopyOut(offset, count)


def _tile_bases(k: KernelAdd, offset: int, count: int):
    return k.xGm[offset], k.yGm[offset], k.zGm[offset]


def _tile_key(k: KernelAdd, offset: int, count: int):
    # NOTE: gm.byte_address's arithmetic written out (fp16: 2 bytes an element), for performance reasons: three
    # calls cost about 2,800 machine instructions a tile, 4% of a replayed tile (benchmarks/sim_speed.py)
    return (count,), (2 * (k.xGm.offset + offset), 2 * (k.yGm.offset + offset), 2 * (k.zGm.offset + offset))


KernelAdd.ProcessTile = replayable(_tile_key, bases=_tile_bases)(_process_tile)
