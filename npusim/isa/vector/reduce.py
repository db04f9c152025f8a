"""Reductions: ReduceSum/ReduceMax (count form, one result), WholeReduceSum/WholeReduceMax (one
result per repeat), BlockReduceSum/BlockReduceMax (one result per 32-byte block). Every step of their
fixed orders is rounded to the dtype (docs/numerics.md "Vector instructions").
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from npusim.errors import NpuBufferError
from npusim.isa.vector.common import (BLOCK_BYTES, BLOCK_REDUCE, F16, F32, REPEAT_BYTES, UINT, WHOLE_REDUCE,
                                      VectorInstruction, check_repeat, lanes, mask_key, repeat_index)
from npusim.isa.vector.numerics import canonical_nan, tree, vmax, widen16
from npusim.types import ReduceOrder


def reduce_passes(count: int, epr: int) -> list[int]:
    """Repeats of each pass of a count-form reduction: per-repeat results are reduced again until one
    value remains (the Ascend C implementation; each pass waits for the previous one)."""
    out = []
    n = count
    while True:
        r = -(-n // epr)
        out.append(r)
        if r <= 1:
            return out
        n = r


class _CountReduce(VectorInstruction):
    """ReduceSum / ReduceMax over the first *count* elements: result in dst[0].

    Order (Ascend C ReduceSum "method 2", the A2/A3 count form): inside each 256 B repeat a pairwise
    tree over adjacent lanes (lanes past *count* contribute the identity), then the per-repeat
    results combined one after another in repeat order. Every step is rounded to the dtype.
    """

    __slots__ = ("dst", "src", "work", "count", "cal_index", "passes")
    cost = WHOLE_REDUCE
    dtypes = frozenset({F16, F32})
    op: ClassVar = staticmethod(np.add)

    def _init(self, dst, src, work, count, cal_index: bool) -> None:
        self.dst, self.src, self.work, self.cal_index = dst, src, work, bool(cal_index)
        dt = self.dtype = self._same_dtype((dst, src, work))
        n = self.count = int(count)
        if n < 1:
            raise NpuBufferError(f"{self.name}: count {n} must be >= 1")
        src.check(n)
        item = dt.itemsize
        epr, epb = REPEAT_BYTES // item, BLOCK_BYTES // item
        self.passes = reduce_passes(n, epr)
        per = 2 if self.op is not np.add else 1  # the max instruction writes (value, index) pairs
        rounds = self.passes if self.cal_index else self.passes[:1]
        need = sum(-(-per * r // epb) * epb for r in rounds)
        work.check(need)
        out = 2 if self.cal_index else 1
        dst.check(out)
        self.repeats = sum(self.passes)
        self.nbytes, self.flops = (n + out) * item, n
        self.spans_r, self.spans_w = ((src, n * item),), ((dst, out * item), (work, need * item))
        self.issue(dst.core, depth=3)

    def cycles(self, chip):
        occupancy, lat = super().cycles(chip)
        # the passes run back to back, each after the previous one's result (PipeBarrier in the API)
        return occupancy + (len(self.passes) - 1) * lat, lat

    def execute(self) -> None:
        n, dt, op = self.count, self.dtype, self.op
        epr = REPEAT_BYTES // dt.itemsize
        x = self.src.view(n)
        r = self.passes[0]
        vals = np.full(r * epr, _identity(op, dt), dt)
        vals[:n] = x
        part = tree(vals.reshape(r, epr), op)
        acc = part[:1]
        with np.errstate(all="ignore"):
            for k in range(1, r):
                acc = op(acc, part[k:k + 1])
        acc = canonical_nan(np.asarray(acc, dt))
        out = self.dst.view(2 if self.cal_index else 1)
        out[0] = acc[0]
        if self.cal_index:
            hit = np.flatnonzero((x == acc[0]) | (np.isnan(x) & np.isnan(acc[0])))
            idx = int(hit[0])
            if idx >= 1 << (8 * dt.itemsize):
                raise NotImplementedError(f"{self.name}: index {idx} does not fit the {dt.name} slot")
            out.view(UINT[dt.itemsize])[1] = idx


class ReduceSum(_CountReduce):
    """``ReduceSum(dst, src, work, count)``: dst[0] = sum of src[0:count] in the fixed order of
    :class:`_CountReduce`; *work* must hold ceil(repeats / elements per block) blocks."""

    __slots__ = ()
    name = "ReduceSum"

    def __init__(self, dst, src, work, count):
        self._init(dst, src, work, count, False)


class ReduceMax(_CountReduce):
    """``ReduceMax(dst, src, work, count, calIndex=False)``: dst[0] = max of src[0:count] (NaN wins);
    with *calIndex* dst[1] holds, as the bits of a uint16 (half) / uint32 (float), the index of the
    first element equal to the max. *work*: the Ascend C size rule (value+index pairs per repeat)."""

    __slots__ = ()
    name = "ReduceMax"
    op = staticmethod(vmax)

    def __init__(self, dst, src, work, count, calIndex=False):
        self._init(dst, src, work, count, calIndex)


class _RepeatReduce(VectorInstruction):
    """The repeat form WholeReduce and BlockReduce share: the masked lanes of each 256 B source repeat,
    masked-out lanes holding the identity (-0 for sums, -inf for max)."""

    __slots__ = ("dst", "src", "key", "rep", "dst_stride", "src_strides")
    dtypes = frozenset({F16, F32})
    op: ClassVar = staticmethod(np.add)

    def _operands(self, dst, src, mask, repeatTimes, dstRepStride, srcBlkStride, srcRepStride) -> int:
        """Check and record the operands and repeat parameters; return the element size in bytes."""
        self.dst, self.src = dst, src
        dt = self.dtype = self._same_dtype((dst, src))
        self.rep = self.repeats = check_repeat(self.name, repeatTimes)
        self.key = mask_key(mask)
        self.dst_stride, self.src_strides = int(dstRepStride), (int(srcBlkStride), int(srcRepStride))
        return dt.itemsize

    def _source_repeats(self) -> np.ndarray:
        """The source as (repeats, 256 / itemsize) values, masked-out lanes set to the identity (callers only read it)."""
        dt = self.dtype
        epr, (blk, rs) = REPEAT_BYTES // dt.itemsize, self.src_strides
        if self.key == epr and blk == 1:  # every lane, blocks adjacent: a strided view of the source (read only;
            # NOTE: no identity fill and gather, for performance reasons: the softmax's row reductions, benchmarks/pfa.py)
            return np.ndarray((self.rep, epr), dt, self.src.buffer.data, self.src.addr, (rs * BLOCK_BYTES, dt.itemsize))
        ln = lanes(self.key, dt.itemsize)
        idx, _ = repeat_index(self.key, dt.itemsize, self.rep, *self.src_strides)
        vals = np.full((self.rep, REPEAT_BYTES // dt.itemsize), _identity(self.op, dt), dt)
        vals[:, ln] = self.src.span()[idx].reshape(self.rep, ln.size)
        return vals


class _WholeReduce(_RepeatReduce):
    """One result per repeat: a pairwise tree over the repeat's adjacent lanes, masked-out lanes
    contributing the identity (-0 for sums, -inf for max), each step rounded to the dtype."""

    __slots__ = ("order",)
    cost = WHOLE_REDUCE

    def __init__(self, dst, src, mask, repeatTimes, dstRepStride, srcBlkStride, srcRepStride,
                 order=ReduceOrder.ORDER_VALUE_INDEX):
        self.order = ReduceOrder(order)
        if self.op is np.add and self.order is not ReduceOrder.ORDER_VALUE_INDEX:
            raise TypeError(f"{self.name} takes no order (it writes one sum per repeat)")
        item = self._operands(dst, src, mask, repeatTimes, dstRepStride, srcBlkStride, srcRepStride)
        rep = self.rep
        idx, top = repeat_index(self.key, item, rep, *self.src_strides)
        src.check(top)
        slot = self._slot_elems()
        dtop = ((rep - 1) * self.dst_stride + 1) * slot if rep else 0
        if self.dst_stride < 0:
            raise NpuBufferError(f"{self.name}: dstRepStride {self.dst_stride} must be >= 0")
        dst.check(dtop)
        self.nbytes, self.flops = (idx.size + rep * slot) * item, idx.size
        self.spans_r, self.spans_w = ((src, top * item),), ((dst, dtop * item),)
        self.issue(dst.core)

    def _slot_elems(self) -> int:
        """dst elements one repeat's result occupies (the unit of dstRepStride)."""
        return 1

    def _results(self):
        """(the source repeats as :meth:`_source_repeats` gives them, the masked lanes, per-repeat results)."""
        vals = self._source_repeats()
        if self.op is vmax:
            # NOTE: each step of the max tree selects one of its inputs, so the tree's result is the row's
            # largest value (NaN if any), whose bits are unique unless it is a zero (-0 and +0 compare
            # equal: then the tree decides the sign); numpy's max gives it in one call, here on the exact
            # float32 values, for performance reasons (benchmarks/pfa.py: the softmax's row max)
            wide = widen16(vals) if self.dtype.itemsize == 2 else vals
            res = wide.max(axis=-1)
            if not res.all():  # a zero maximum somewhere: its sign from the tree
                res = tree(wide, vmax)
            res = canonical_nan(res.astype(self.dtype))
        else:
            res = canonical_nan(tree(vals, self.op))
        return vals, lanes(self.key, self.dtype.itemsize), res

    def execute(self) -> None:
        if self.rep == 0:
            return
        _, _, res = self._results()
        self.dst.span()[np.arange(self.rep) * self.dst_stride] = res


class WholeReduceSum(_WholeReduce):
    """``WholeReduceSum(dst, src, mask, repeatTimes, dstRepStride, srcBlkStride, srcRepStride)``:
    dst[r * dstRepStride] = sum of repeat r's masked elements (tree order of :class:`_WholeReduce`)."""

    __slots__ = ()
    name = "WholeReduceSum"


class WholeReduceMax(_WholeReduce):
    """``WholeReduceMax(dst, src, mask, repeatTimes, dstRepStride, srcBlkStride, srcRepStride,
    order=ORDER_VALUE_INDEX)``: per repeat the max (NaN wins) and the lane (0 .. 256/itemsize - 1) of
    the first masked element equal to it, stored as uint bits of the dtype's width. dstRepStride
    counts result slots: 2 elements for VALUE_INDEX / INDEX_VALUE, 1 for ONLY_VALUE, 4 bytes for
    ONLY_INDEX (whose index is a uint32)."""

    __slots__ = ()
    name = "WholeReduceMax"
    op = staticmethod(vmax)

    def _slot_elems(self) -> int:
        if self.order is ReduceOrder.ORDER_ONLY_VALUE:
            return 1
        if self.order is ReduceOrder.ORDER_ONLY_INDEX:
            return 4 // self.dtype.itemsize
        return 2

    def execute(self) -> None:
        if self.rep == 0:
            return
        vals, ln, res = self._results()
        slot = self._slot_elems()
        base = np.arange(self.rep) * self.dst_stride * slot
        if self.order is ReduceOrder.ORDER_ONLY_VALUE:  # no index is written: none is looked for
            self.dst.span()[base] = res
            return
        active = np.zeros(vals.shape[1], bool)
        active[ln] = True
        hit = ((vals == res[:, None]) | (np.isnan(vals) & np.isnan(res)[:, None])) & active
        first = hit.argmax(axis=1)
        span = self.dst.span()
        u = UINT[self.dtype.itemsize]
        order = self.order
        if order is ReduceOrder.ORDER_ONLY_INDEX:
            span[:(base[-1] + slot)].view(np.uint32)[base // slot] = first
        else:
            v, i = (0, 1) if order is ReduceOrder.ORDER_VALUE_INDEX else (1, 0)
            span[base + v] = res
            span.view(u)[base + i] = first


class _BlockReduce(_RepeatReduce):
    """``Op(dst, src, repeatTimes, mask, dstRepStride, srcBlkStride, srcRepStride)``: one result per
    32 B block (8 per repeat) at dst[r * dstRepStride * 8 + block]; a pairwise tree over the block's
    adjacent lanes (masked-out lanes: identity). Blocks with no masked-in lane are not written."""

    __slots__ = ("blocks",)
    cost = BLOCK_REDUCE

    def __init__(self, dst, src, repeatTimes, mask, dstRepStride, srcBlkStride, srcRepStride):
        item = self._operands(dst, src, mask, repeatTimes, dstRepStride, srcBlkStride, srcRepStride)
        rep = self.rep
        if self.dst_stride < 0:
            raise NpuBufferError(f"{self.name}: dstRepStride {self.dst_stride} must be >= 0")
        idx, top = repeat_index(self.key, item, rep, *self.src_strides)
        src.check(top)
        self.blocks = np.unique(lanes(self.key, item) // (BLOCK_BYTES // item))
        dtop = (rep - 1) * self.dst_stride * 8 + int(self.blocks[-1]) + 1 if rep else 0
        dst.check(dtop)
        self.nbytes, self.flops = (idx.size + rep * self.blocks.size) * item, idx.size
        self.spans_r, self.spans_w = ((src, top * item),), ((dst, dtop * item),)
        self.issue(dst.core)

    def execute(self) -> None:
        if self.rep == 0:
            return
        epb = BLOCK_BYTES // self.dtype.itemsize
        res = canonical_nan(tree(self._source_repeats().reshape(self.rep, 8, epb), self.op))
        didx = (np.arange(self.rep)[:, None] * (self.dst_stride * 8) + self.blocks[None, :]).reshape(-1)
        self.dst.span()[didx] = res[:, self.blocks].reshape(-1)


class BlockReduceSum(_BlockReduce):
    """Per-block sums (see :class:`_BlockReduce`)."""

    __slots__ = ()
    name = "BlockReduceSum"


class BlockReduceMax(_BlockReduce):
    """Per-block maxima, NaN wins (see :class:`_BlockReduce`)."""

    __slots__ = ()
    name = "BlockReduceMax"
    op = staticmethod(vmax)


def _identity(op, dt):
    """The element a masked-out lane contributes to a reduction (x + -0 = x; max(x, -inf) = x)."""
    return dt.type(-0.0) if op is np.add else dt.type(-np.inf)
