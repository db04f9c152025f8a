"""Dropout from a bit-packed uint8 keep mask, as the flash-attention training kernels apply it.

Bit layout (NUMERICS.md, research/oracles.md §2): keep flag of element k is bit ``k % 8`` (LSB
first, ``np.packbits(bitorder='little')``) of byte ``k // 8``; 1 = keep.

- :func:`bit_mode`: the bits of every score row start on a byte (each row length a multiple of 8),
  so the kernel selects with them directly (CANN bit mode).
- :func:`DropMaskAdapter`: the CANN ``FlashAttentionScoreDropMaskAdapter`` pre-pass for the other
  case: every vector core expands its share of the bits to one byte per element (Select of fp16
  1.0/0.0 by the bits, Cast to uint8) into a workspace buffer, then SyncAll.
- :func:`ApplyDropoutBits` / :func:`ApplyDropoutBytes`: a scores slice ``x = keep ? x : +0`` (Select),
  then ``x = x * recip`` (Muls by fp32 1/keep_prob, AscendC DropOut);
- :func:`keep_bit_offset` (where a score's keep bit is in the TND mask) and :func:`ApplyDropout` (the
  bit or byte mode of one slice, as the kernels call it).
"""
from __future__ import annotations

import numpy as np

from npusim.kernel import (CMPMODE, SELMODE, Cast, DataCopyExtParams, DataCopyPad, Duplicate, GetBlockIdx,
                           GetBlockNum, Muls, Pipe, PipeBarrier, RoundMode, Select, SyncAll, TBuf, TPipe, TPosition,
                           TQue)
from ops.common.rowops import BytesToBits, CopyRowsIn

#: Bits per adapter work unit (CANN ubCalFactor 2048 = 256 * 8).
ADAPTER_UNIT_BITS = 2048
#: Elements per adapter UB pass (CANN baseUbCalSize is ub/6 aligned down to 2048; 16384 fits every chip).
ADAPTER_CHUNK = 16384


def bit_mode(row_lengths) -> bool:
    """True when every row length (Skv of each non-empty batch) is a multiple of 8."""
    return bool((np.asarray(row_lengths) % 8 == 0).all())


def DropMaskAdapter(drop_gm, bytes_gm, total_bits: int) -> None:
    """Expand *total_bits* keep bits of *drop_gm* (uint8 GM) to bytes in *bytes_gm*, split over all AIVs.

    Runs with its own TPipe and resets it; ends with SyncAll (every AIV must call it).
    """
    if total_bits <= 0:  # nothing to expand (estimate mode's item-less runs): only the barrier
        SyncAll()
        return
    pipe = TPipe()
    units = -(-total_bits // ADAPTER_UNIT_BITS)
    per = -(-units // GetBlockNum()) * ADAPTER_UNIT_BITS
    chunk = min(ADAPTER_CHUNK, per)
    inQ, outQ = TQue(TPosition.VECIN, 1), TQue(TPosition.VECOUT, 1)
    pipe.InitBuffer(inQ, 1, chunk // 8)
    pipe.InitBuffer(outQ, 1, chunk)
    ones, res = TBuf(), TBuf()
    pipe.InitBuffer(ones, chunk * 2)
    pipe.InitBuffer(res, chunk * 2)
    start = GetBlockIdx() * per
    end = min(start + per, total_bits)
    if start < end:
        Duplicate(ones.Get(np.float16), 1.0, chunk)
        PipeBarrier(Pipe.V)
    for k in range(start, end, chunk):
        n = min(chunk, end - k)
        bits = inQ.AllocTensor(np.uint8)
        DataCopyPad(bits, drop_gm[k // 8], DataCopyExtParams(1, -(-n // 8), 0, 0, 0))
        inQ.EnQue(bits)
        bits = inQ.DeQue(np.uint8)
        half = res.Get(np.float16)
        Select(half, bits, ones.Get(np.float16), 0.0, SELMODE.VSEL_TENSOR_SCALAR_MODE, n)
        PipeBarrier(Pipe.V)
        inQ.FreeTensor(bits)
        out = outQ.AllocTensor(np.uint8)
        Cast(out, half, RoundMode.CAST_NONE, n)
        outQ.EnQue(out)
        out = outQ.DeQue(np.uint8)
        DataCopyPad(bytes_gm[k], out, DataCopyExtParams(1, n, 0, 0, 0))
        outQ.FreeTensor(out)
    SyncAll()
    pipe.Reset()


def ApplyDropoutBits(scores, bits_local, drop_gm, bit0: int, rows: int, cols: int, row_bits: int, pitch: int,
                     recip: float, que) -> None:
    """Bit mode: keep bits of rows x cols starting at bit *bit0* (a multiple of 8), rows *row_bits* apart.

    One Select over the slice when a row's bits fill whole 32-byte UB blocks (pitch % 256 == 0), else
    one Select per row. *bits_local* comes from *que* (VECIN); it is enqueued, dequeued and freed here.
    """
    nbytes = -(-cols // 8)
    whole = pitch % 256 == 0
    slot = pitch // 8 if whole else -(-nbytes // 32) * 32
    gap_ub = (slot - (-(-nbytes // 32) * 32)) // 32
    DataCopyPad(bits_local, drop_gm[bit0 // 8], DataCopyExtParams(rows, nbytes, row_bits // 8 - nbytes, gap_ub, 0))
    que.EnQue(bits_local)
    bits_local = que.DeQue(np.uint8)
    if whole:
        Select(scores, bits_local, scores, 0.0, SELMODE.VSEL_TENSOR_SCALAR_MODE, rows * pitch)
    else:
        for r in range(rows):
            Select(scores[r * pitch:], bits_local[r * slot:], scores[r * pitch:], 0.0,
                   SELMODE.VSEL_TENSOR_SCALAR_MODE, cols)
    PipeBarrier(Pipe.V)
    que.FreeTensor(bits_local)
    Muls(scores, scores, recip, rows * pitch)
    PipeBarrier(Pipe.V)


def ApplyDropoutBytes(scores, bytes_local, bytes_gm, rows: int, cols: int, row_len: int, pitch: int, recip: float,
                      que, bits, half, zeros, chunk: int) -> None:
    """Byte mode: one keep byte per element (the adapter's output), rows *row_len* apart in GM."""
    CopyRowsIn(bytes_local, bytes_gm, rows, cols, row_len, pitch)
    que.EnQue(bytes_local)
    bytes_local = que.DeQue(np.uint8)
    BytesToBits(bits, bytes_local, half, zeros, rows * pitch, CMPMODE.NE, chunk)
    que.FreeTensor(bytes_local)
    Select(scores, bits, scores, 0.0, SELMODE.VSEL_TENSOR_SCALAR_MODE, rows * pitch)
    PipeBarrier(Pipe.V)
    Muls(scores, scores, recip, rows * pitch)
    PipeBarrier(Pipe.V)


def keep_bit_offset(n1: int, cu_ss: int, n: int, sq: int, skv: int, row: int, col: int) -> int:
    """Bit of (head n, batch row, batch column) in the TND drop mask: the batches' [N1, Sq, Skv] blocks in turn.

    *cu_ss*: sum of Sq * Skv over the earlier batches (oracles.md §2, unpadded rows)."""
    return n1 * cu_ss + n * sq * skv + row * skv + col


def ApplyDropout(scores, que, drop_gm, bytes_gm, bit0: int, rows: int, cols: int, skv: int, pitch: int,
                 recip: float, bit_mode: bool, bits, half, zeros, chunk: int) -> None:
    """Dropout of a rows x cols slice whose keep bits start at *bit0* (rows *skv* bits apart): bit mode reads
    *drop_gm* directly, byte mode the adapter's bytes *bytes_gm*; *bits*, *half*, *zeros* are the byte mode's
    scratch (ApplyDropoutBytes). *que* (VECIN) holds the bits or bytes."""
    d = que.AllocTensor(np.uint8)
    if bit_mode:
        ApplyDropoutBits(scores, d, drop_gm, bit0, rows, cols, skv, pitch, recip, que)
    else:
        ApplyDropoutBytes(scores, d, bytes_gm[bit0], rows, cols, skv, pitch, recip, que, bits, half, zeros, chunk)
