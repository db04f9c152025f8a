"""Row-wise building blocks of the attention kernels, made of npusim vector instructions.

A score slice in UB is ``rows`` rows of ``cols`` valid elements at a row pitch of ``pitch`` elements
(a multiple of 32 bytes). Like Ascend C's softmax APIs, these helpers are sequences of basic
instructions, so their numerics and their cycles are those of the instructions (docs/numerics.md):

- :func:`RowReduce`: per-row max or sum. The row is folded into one repeat of ``lanes`` accumulators
  (``acc = chunk0``, then ``acc = acc op chunk_k`` in column order, the last chunk masked to the valid
  columns), then WholeReduce turns each row's accumulators into one value (adjacent-pair tree).
- :func:`RowBroadcast`: ``dst[r, c] = src0[r, c] op v[r]`` with ``v`` broadcast per row (Brcb fills one
  32-byte block per row, read with block stride 0).
- :func:`CopyRowsIn` / :func:`CopyRowsOut`: a rows x cols window between GM and UB with independent row
  pitches (one DataCopy when both are contiguous, else one DataCopyPad).
- :func:`BytesToBits`: a byte mask (uint8/bool/int8, one byte per element) -> the bit mask Select
  reads, bit k = (byte k cmp 0), converted through fp16 in chunks (Cast + Compare).

Callers order dependent instructions with PipeBarrier(PIPE_V), as Ascend C kernels must.
"""
from __future__ import annotations  # noqa: I001 - no blank line below: the instruction lines keep their numbers
import numpy as np
from npusim.kernel import (Add, BinaryRepeatParams, Brcb, BrcbRepeatParams, Cast, Compare, Copy, CopyRepeatParams,
                           DataCopy, DataCopyExtParams, DataCopyPad, Div, Max, Mul, Pipe, PipeBarrier, ReduceOrder,
                           RoundMode, Sub, WholeReduceMax, WholeReduceSum)

REPEAT_BYTES = 256
BLOCK_BYTES = 32
_FOLD = {"max": Max, "sum": Add}
_BCAST = {"sub": Sub, "mul": Mul, "div": Div}


def lanes_of(tensor) -> int:
    return REPEAT_BYTES // tensor.dtype.itemsize


def _row_reduce_issue(kind: str, dst, src, acc, rows: int, cols: int, pitch: int):
    """:func:`RowReduce`'s instructions; returns the final WholeReduce (its lines are the trace's source)."""
    lanes = lanes_of(src)
    item = src.dtype.itemsize
    rep_src = pitch * item // BLOCK_BYTES
    if cols <= lanes:
        reduce_src, reduce_rep = src, rep_src
    else:
        Copy(acc, src, lanes, rows, CopyRepeatParams(1, 1, 8, rep_src))
        for c0 in range(lanes, cols, lanes):
            PipeBarrier(Pipe.V)
            n = min(lanes, cols - c0)
            _FOLD[kind](acc, acc, src[c0:], n, rows, BinaryRepeatParams(1, 1, 1, 8, 8, rep_src))
        PipeBarrier(Pipe.V)
        reduce_src, reduce_rep = acc, 8
    width = min(lanes, cols)
    if kind == "max":
        return WholeReduceMax(dst, reduce_src, width, rows, 1, 1, reduce_rep, ReduceOrder.ORDER_ONLY_VALUE)
    else:
        return WholeReduceSum(dst, reduce_src, width, rows, 1, 1, reduce_rep)


def BroadcastRows(dst_blocks, values, rows: int) -> None:
    """Fill block r (32 bytes) of *dst_blocks* with values[r], r < rows (Brcb; values padded to 8)."""
    Brcb(dst_blocks, values, -(-rows // 8), BrcbRepeatParams(1, 8))


def _row_broadcast_issue(op: str, dst, src0, blocks, rows: int, cols: int, pitch: int) -> None:
    """:func:`RowBroadcast`'s instructions (their lines are the trace's source)."""
    lanes = lanes_of(src0)
    rep = pitch * src0.dtype.itemsize // BLOCK_BYTES
    for c0 in range(0, cols, lanes):
        n = min(lanes, cols - c0)
        _BCAST[op](dst[c0:], src0[c0:], blocks, n, rows, BinaryRepeatParams(1, 1, 0, rep, rep, 1))


def CopyRowsIn(dst, src, rows: int, cols: int, gm_pitch: int, ub_pitch: int) -> None:
    """GM (row pitch *gm_pitch*) -> UB (row pitch *ub_pitch*, a multiple of 32 bytes): rows x cols elements.

    Bytes of a UB row past *cols* keep their old contents (DataCopyPad without padding).
    """
    item = dst.dtype.itemsize
    if cols == gm_pitch == ub_pitch:
        DataCopy(dst, src, rows * cols)
        return
    gap_ub = (ub_pitch * item - (-(-cols * item // BLOCK_BYTES) * BLOCK_BYTES)) // BLOCK_BYTES
    DataCopyPad(dst, src, DataCopyExtParams(rows, cols * item, (gm_pitch - cols) * item, gap_ub, 0))


def CopyRowsOut(dst, src, rows: int, cols: int, ub_pitch: int, gm_pitch: int) -> None:
    """UB (row pitch *ub_pitch*) -> GM (row pitch *gm_pitch*): rows x cols elements."""
    item = src.dtype.itemsize
    if cols == ub_pitch == gm_pitch:
        DataCopy(dst, src, rows * cols)
        return
    gap_ub = (ub_pitch * item - (-(-cols * item // BLOCK_BYTES) * BLOCK_BYTES)) // BLOCK_BYTES
    DataCopyPad(dst, src, DataCopyExtParams(rows, cols * item, gap_ub, (gm_pitch - cols) * item, 0))


def BytesToBits(bits, mask_bytes, half, zeros, count: int, mode, chunk: int) -> None:
    """bits[k] := (mask_bytes[k] *mode* 0) for k < count (CMPMODE EQ: keep where 0; NE: keep where != 0).

    *mask_bytes*: uint8 or int8 (bool reinterpreted as uint8); *half*, *zeros*: fp16 scratch of at least
    *chunk* elements (*zeros* holds 0.0); *chunk* a multiple of 128 (one fp16 repeat = 16 bit bytes).
    """
    for k in range(0, count, chunk):
        n = min(chunk, count - k)
        Cast(half, mask_bytes[k:], RoundMode.CAST_NONE, n)
        PipeBarrier(Pipe.V)
        Compare(bits[k // 8:], half, zeros, mode, n)
        PipeBarrier(Pipe.V)


# ---- full mode: a row step's data in whole-tile numpy operations ------------------------------------------
#: False: each instruction of RowReduce / RowBroadcast computes its own effect, as in timing mode's order
#: (tests/ops/test_rowops_fused.py compares the two bit for bit).
FUSED = True


def _tile(t, shape: tuple, strides: tuple) -> np.ndarray:
    """A numpy view of tensor *t*'s buffer (full mode) from its start, *strides* in bytes."""
    return np.ndarray(shape, t.dtype, t.buffer.data, t.addr, strides)


def _apart(a, a_bytes: int, b, b_bytes: int) -> bool:
    """True if the first *a_bytes* of tensor *a* and the first *b_bytes* of *b* share no byte."""
    return a.buffer is not b.buffer or a.addr + a_bytes <= b.addr or b.addr + b_bytes <= a.addr


def RowReduce(kind: str, dst, src, acc, rows: int, cols: int, pitch: int) -> None:
    """dst[r] = max/sum over src[r, :cols] (*kind* "max" or "sum"); *acc* holds rows x lanes elements.

    Full mode: the instructions are issued as written, and their effect on *acc* (the Copy of the first chunk,
    then ``acc = acc op chunk`` for each further chunk in column order, the last masked) is computed by the fold
    instruction's own compute() on whole (rows x lanes) arrays: the same element operations in the same order,
    so the same bits; then the WholeReduce's execute(). NOTE: for performance reasons (benchmarks/pfa.py: the
    softmax's row folds were eight instructions of 2,048 elements each, per-instruction overhead mostly).
    """
    unit, lanes, item = src.core, lanes_of(src), src.dtype.itemsize
    rp = pitch * item // BLOCK_BYTES * BLOCK_BYTES  # the row pitch the instructions use, in bytes
    if not (FUSED and unit.full and cols > lanes and rows > 0
            and _apart(src, (rows - 1) * rp + cols * item, acc, rows * REPEAT_BYTES)):
        _row_reduce_issue(kind, dst, src, acc, rows, cols, pitch)
        return
    unit.full = False  # issued (checks, cost, trace) without their numpy effect, computed below
    try:
        whole = _row_reduce_issue(kind, dst, src, acc, rows, cols, pitch)
    finally:
        unit.full = True
    s = _tile(src, (rows, cols), (rp, item))
    a = _tile(acc, (rows, lanes), (REPEAT_BYTES, item))
    a[...] = s[:, :lanes]  # Copy: the bits
    fold, dt = _FOLD[kind], src.dtype
    for c0 in range(lanes, cols, lanes):
        n = min(lanes, cols - c0)
        a[:, :n] = fold.apply(dt, a[:, :n], s[:, c0:c0 + n])
    whole.execute()


def RowBroadcast(op: str, dst, src0, blocks, rows: int, cols: int, pitch: int) -> None:
    """dst[r, c] = src0[r, c] (sub|mul|div) v[r] for c < cols, where *blocks* = BroadcastRows(v).

    Full mode: the instructions are issued as written and their effect computed by the instruction's own
    compute() on the whole (rows x cols) tile, block r of *blocks* read for every block of row r as the
    instructions' zero block stride reads it (elementwise operations: the same bits). NOTE: for performance
    reasons, as :func:`RowReduce`.
    """
    unit, item = dst.core, src0.dtype.itemsize
    epb = BLOCK_BYTES // item
    rp = pitch * item // BLOCK_BYTES * BLOCK_BYTES
    span = (rows - 1) * rp + cols * item
    if not (FUSED and unit.full and cols > 0 and rows > 0 and cols % epb == 0
            and (dst.buffer is src0.buffer and dst.addr == src0.addr or _apart(dst, span, src0, span))
            and _apart(dst, span, blocks, rows * BLOCK_BYTES)):
        _row_broadcast_issue(op, dst, src0, blocks, rows, cols, pitch)
        return
    unit.full = False  # as RowReduce
    try:
        _row_broadcast_issue(op, dst, src0, blocks, rows, cols, pitch)
    finally:
        unit.full = True
    shape, strides = (rows, cols // epb, epb), (rp, BLOCK_BYTES, item)
    values = _BCAST[op].apply(src0.dtype, _tile(src0, shape, strides), _tile(blocks, shape, (BLOCK_BYTES, 0, item)))
    _tile(dst, shape, strides)[...] = values
