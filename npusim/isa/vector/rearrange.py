"""Vector instructions that move elements without arithmetic: Copy, Duplicate (fill), Brcb
(broadcast into blocks), Gather (by byte offsets), Transpose (16 x 16, 2-byte elements).
"""
from __future__ import annotations

import numpy as np

from npusim.errors import NpuBufferError
from npusim.isa.vector.common import (BITS16, BITS32, BLOCK_BYTES, GATHER_B16, GATHER_B32, REPEAT_BYTES, U32,
                                      BrcbRepeatParams, CopyRepeatParams, VectorInstruction, check_repeat,
                                      mask_key, repeat_index)
from npusim.isa.vector.elementwise import Elementwise
from npusim.isa.vector.numerics import to_scalar


class Copy(Elementwise):
    """``Copy(dst, src, mask, repeatTimes, CopyRepeatParams)`` (UB -> UB, bits unchanged), or
    ``Copy(dst, src, count)``."""

    __slots__ = ()
    name = "Copy"
    params_type = CopyRepeatParams
    dtypes = BITS16 | BITS32

    def __init__(self, dst, src, *args):
        self.scalar = None
        self._setup(dst, (src,), args)
        self.flops = 0
        self.issue(dst.core)

    def compute(self, a):
        return a


class Duplicate(VectorInstruction):
    """``Duplicate(dst, scalar, count)`` or ``Duplicate(dst, scalar, mask, repeatTimes, dstBlockStride,
    dstRepeatStride)``: every (masked) element := scalar converted to the dtype."""

    __slots__ = ("dst", "scalar", "count", "index")
    name = "Duplicate"
    dtypes = BITS16 | BITS32

    def __init__(self, dst, scalar, *args):
        self.dst, self.scalar = dst, scalar
        dt = self.dtype = self._same_dtype((dst,))
        item = dt.itemsize
        if len(args) == 1:
            n = self.count = int(args[0])
            dst.check(n)
            self.index, self.repeats, span = None, -(-n * item // REPEAT_BYTES), n * item
        elif len(args) == 4:
            mask, rep, blk, rs = args
            rep = check_repeat(self.name, rep)
            idx, top = repeat_index(mask_key(mask), item, rep, int(blk), int(rs))
            dst.check(top)
            self.index, self.count, self.repeats, span = idx, idx.size, rep, top * item
        else:
            raise TypeError("Duplicate takes (dst, scalar, count) or (dst, scalar, mask, repeatTimes, "
                            "dstBlockStride, dstRepeatStride)")
        self.nbytes, self.flops = self.count * item, 0
        self.spans_r, self.spans_w = (), ((dst, span),)
        self.issue(dst.core)

    def execute(self) -> None:
        v = to_scalar(self.scalar, self.dtype, self.name)
        if self.index is None:
            self.dst.view(self.count)[:] = v
        else:
            self.dst.span()[self.index] = v


class Brcb(VectorInstruction):
    """``Brcb(dst, src, repeatTimes, BrcbRepeatParams)``: repeat r reads src[8r .. 8r+7]; element j
    fills the whole 32 B block at block offset r * dstRepStride + j * dstBlkStride of dst."""

    __slots__ = ("dst", "src", "strides")
    name = "Brcb"
    dtypes = BITS16 | BITS32

    def __init__(self, dst, src, repeatTimes, params=BrcbRepeatParams()):
        self.dst, self.src = dst, src
        dt = self.dtype = self._same_dtype((dst, src))
        item = dt.itemsize
        rep = self.repeats = check_repeat(self.name, repeatTimes)
        epb = BLOCK_BYTES // item
        blk, rs = self.strides = int(params.dstBlkStride), int(params.dstRepStride)
        if blk < 0 or rs < 0:
            raise NpuBufferError(f"Brcb: strides must be >= 0 (block {blk}, repeat {rs})")
        # 1 + the last element written: block 7 of the last repeat (strides are >= 0). NOTE: computed, not
        # taken from the index array, which only execute() builds (full mode), for performance reasons
        top = ((rep - 1) * rs + 7 * blk + 1) * epb if rep else 0
        src.check(8 * rep)
        dst.check(top)
        self.nbytes, self.flops = 8 * rep * item + rep * REPEAT_BYTES, 0
        self.spans_r, self.spans_w = ((src, 8 * rep * item),), ((dst, top * item),)
        self.issue(dst.core)

    def execute(self) -> None:
        n = 8 * self.repeats
        if n:
            blk, rs = self.strides
            epb = BLOCK_BYTES // self.dtype.itemsize
            if blk >= 1 and (self.repeats == 1 or rs >= 8 * blk):  # blocks apart: a strided view of dst
                # NOTE: no index arrays, for performance reasons (the softmax's row broadcasts, benchmarks/pfa.py)
                item = self.dtype.itemsize
                view = np.ndarray((self.repeats, 8, epb), self.dtype, self.dst.buffer.data, self.dst.addr,
                                  (rs * BLOCK_BYTES, blk * BLOCK_BYTES, item))
                view[...] = self.src.view(n).reshape(self.repeats, 8, 1)
                return
            starts = (np.arange(self.repeats)[:, None] * rs + np.arange(8)[None, :] * blk).reshape(-1) * epb
            self.dst.span()[starts[:, None] + np.arange(epb)[None, :]] = self.src.view(n)[:, None]


class Gather(VectorInstruction):
    """``Gather(dst, src, srcOffsetLocal, srcBaseAddr, count)``: dst[i] = the element at byte
    srcBaseAddr + offset[i] from src's start (offsets: uint32 bytes). An offset that is misaligned or
    leaves src's allocation raises NpuBufferError (full mode)."""

    __slots__ = ("dst", "src", "offsets", "base", "count", "cost")  # cost: by element width
    name = "Gather"
    dtypes = BITS16 | BITS32

    def __init__(self, dst, src, srcOffsetLocal, srcBaseAddr, count):
        self.dst, self.src, self.offsets, self.base = dst, src, srcOffsetLocal, int(srcBaseAddr)
        dt = self.dtype = self._same_dtype((dst, src))
        if srcOffsetLocal.dtype != U32:
            raise NotImplementedError(f"Gather: offsets must be uint32, not {srcOffsetLocal.dtype.name}")
        n = self.count = int(count)
        dst.check(n)
        srcOffsetLocal.check(n)
        item = dt.itemsize
        self.cost = GATHER_B16 if item == 2 else GATHER_B32
        self.repeats = -(-n * item // REPEAT_BYTES)
        self.nbytes, self.flops = n * (2 * item + 4), 0
        self.spans_r = ((srcOffsetLocal, 4 * n), (src, src.limit - src.addr))
        self.spans_w = ((dst, n * item),)
        self.issue(dst.core)

    def execute(self) -> None:
        n, item = self.count, self.dtype.itemsize
        off = self.offsets.view(n).astype(np.int64) + self.base
        avail = self.src.limit - self.src.addr
        bad = (off % item != 0) | (off < 0) | (off + item > avail)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise NpuBufferError(f"Gather: element {i} reads byte {int(off[i])} of src, which is misaligned "
                                 f"for {item}-byte elements or outside its {avail}-byte allocation")
        self.dst.view(n)[:] = self.src.span()[off // item]


class Transpose(VectorInstruction):
    """``Transpose(dst, src)``: the 16 x 16 matrix of 2-byte elements at src, transposed into dst."""

    __slots__ = ("dst", "src")
    name = "Transpose"
    dtypes = BITS16

    def __init__(self, dst, src):
        self.dst, self.src = dst, src
        self.dtype = self._same_dtype((dst, src))
        dst.check(256)
        src.check(256)
        self.repeats = 2  # 512 B
        self.nbytes, self.flops = 1024, 0
        self.spans_r, self.spans_w = ((src, 512),), ((dst, 512),)
        self.issue(dst.core)

    def execute(self) -> None:
        t = self.src.view(256).reshape(16, 16).T.copy()
        self.dst.view(256).reshape(16, 16)[:] = t
