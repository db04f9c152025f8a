"""Compare (two tensors -> a bit mask, :class:`CMPMODE`) and Select (by a bit mask, :class:`SELMODE`)."""
from __future__ import annotations

import numpy as np

from npusim.isa.vector.common import F16, F32, ONE_SRC, REPEAT_BYTES, TWO_SRC, U8, VectorInstruction
from npusim.isa.vector.numerics import to_scalar
from npusim.memory.local import LocalTensor
from npusim.types import CMPMODE, SELMODE

_CMP = {CMPMODE.LT: np.less, CMPMODE.GT: np.greater, CMPMODE.EQ: np.equal, CMPMODE.LE: np.less_equal,
        CMPMODE.GE: np.greater_equal, CMPMODE.NE: np.not_equal}


def _mask_bytes(t: LocalTensor, nbytes: int) -> np.ndarray:
    """The first *nbytes* bytes of tensor *t* (any dtype) as uint8 (a view)."""
    return t.buffer.data[t.addr:t.addr + nbytes]


def _check_bytes(t: LocalTensor, nbytes: int) -> None:
    t.check(-(-nbytes // t.dtype.itemsize))


class Compare(VectorInstruction):
    """``Compare(dst, src0, src1, cmpMode, count)``: bit i of dst byte i // 8 (LSB first) := src0[i] op
    src1[i]. IEEE comparisons (NaN compares false except NE); the unused high bits of the last byte
    are 0. *dst* is a uint8 tensor of at least ceil(count / 8) bytes."""

    __slots__ = ("dst", "src0", "src1", "mode", "count")
    name = "Compare"
    cost = TWO_SRC
    dtypes = frozenset({F16, F32})

    def __init__(self, dst, src0, src1, cmpMode, count):
        self.dst, self.src0, self.src1, self.mode = dst, src0, src1, CMPMODE(cmpMode)
        dt = self.dtype = self._same_dtype((src0, src1))
        if dst.dtype != U8:
            raise NotImplementedError(f"Compare: the mask tensor must be uint8, not {dst.dtype.name}")
        n = self.count = int(count)
        src0.check(n)
        src1.check(n)
        nb = -(-n // 8)
        dst.check(nb)
        self.repeats = -(-n * dt.itemsize // REPEAT_BYTES)
        self.nbytes, self.flops = 2 * n * dt.itemsize + nb, n
        self.spans_r, self.spans_w = ((src0, n * dt.itemsize), (src1, n * dt.itemsize)), ((dst, nb),)
        self.issue(dst.core)

    def execute(self) -> None:
        n = self.count
        with np.errstate(invalid="ignore"):
            bits = _CMP[self.mode](self.src0.view(n), self.src1.view(n))
        self.dst.view(-(-n // 8))[:] = np.packbits(bits, bitorder="little")


class Select(VectorInstruction):
    """``Select(dst, selMask, src0, src1 | scalar, selMode, count)``: dst[i] = src0[i] where mask bit i
    is 1, else src1[i] (or the scalar). Mask bits are LSB first in each byte.

    VSEL_TENSOR_TENSOR_MODE / VSEL_TENSOR_SCALAR_MODE read bits 0 .. count-1; VSEL_CMPMASK_SPR reads
    the same first 256 / itemsize bits for every repeat.
    """

    __slots__ = ("dst", "mask", "src0", "src1", "mode", "count", "cost")  # cost: per instance (mode)
    name = "Select"
    dtypes = frozenset({F16, F32})

    def __init__(self, dst, selMask, src0, src1, selMode, count):
        self.dst, self.mask, self.src0, self.src1 = dst, selMask, src0, src1
        mode = self.mode = SELMODE(selMode)
        tensor_src1 = isinstance(src1, LocalTensor)
        if tensor_src1 == (mode is SELMODE.VSEL_TENSOR_SCALAR_MODE):
            raise NotImplementedError(f"Select: {mode.name} takes src1 as "
                                      f"{'a scalar' if not tensor_src1 else 'a tensor'}, not the other")
        srcs = (src0, src1) if tensor_src1 else (src0,)
        dt = self.dtype = self._same_dtype((dst,) + srcs)
        n = self.count = int(count)
        for t in (dst,) + srcs:
            t.check(n)
        epr = REPEAT_BYTES // dt.itemsize
        mbytes = epr // 8 if mode is SELMODE.VSEL_CMPMASK_SPR else -(-n // 8)
        _check_bytes(selMask, mbytes)
        self.repeats = -(-n * dt.itemsize // REPEAT_BYTES)
        self.nbytes = (len(srcs) + 1) * n * dt.itemsize + mbytes
        self.flops = 0
        self.spans_r = tuple((t, n * dt.itemsize) for t in srcs) + ((selMask, mbytes),)
        self.spans_w = ((dst, n * dt.itemsize),)
        self.cost = TWO_SRC if tensor_src1 else ONE_SRC
        self.issue(dst.core)

    def execute(self) -> None:
        n, dt = self.count, self.dtype
        if self.mode is SELMODE.VSEL_CMPMASK_SPR:
            epr = REPEAT_BYTES // dt.itemsize
            bits = np.unpackbits(_mask_bytes(self.mask, epr // 8), bitorder="little")
            bits = np.tile(bits, -(-n // epr))[:n]
        else:
            bits = np.unpackbits(_mask_bytes(self.mask, -(-n // 8)), bitorder="little")[:n]
        if isinstance(self.src1, LocalTensor):
            other = self.src1.view(n)
        else:
            other = to_scalar(self.src1, dt, self.name)
        self.dst.view(n)[:] = np.where(bits.view(bool), self.src0.view(n), other)  # unpackbits' 0/1 bytes as bool
