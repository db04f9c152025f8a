"""fp32 transposes on the vector unit (Gather), for kernels whose cube cannot load b32 operands transposed.

Why: the 220x transposing L1 -> L0 loads are modelled for b8/b16 only (npusim/isa/dma.py LoadData), so
fp32 kernels that need a matrix as the other operand (V^T in the forward's P V; K, Q, dY and the
backward's P^T, dS^T) write a transposed copy to GM with the vector unit and load that with Nd2Nz.

- :func:`TransposeOffsets`: the uint32 Gather byte offsets that turn a rows x cols fp32 tile (row pitch
  *src_pitch*) into its transpose (cols rows of *rows* elements), built with masked Adds and doubling.
- :func:`TransposeHeads`: [T, N, D] fp32 in GM -> [N, D, dst_pitch] (per head, D rows of T tokens),
  split over the AIVs; the caller synchronises (SyncAll) before the copies are read.
"""
from __future__ import annotations

import numpy as np

from npusim.kernel import (Adds, Duplicate, Gather, GetBlockIdx, GetBlockNum, HardEvent, Pipe, PipeBarrier, SetFlag,
                           TBuf, TPipe, UnaryRepeatParams, WaitFlag)
from ops.common.rowops import CopyRowsIn, CopyRowsOut

F32 = np.dtype(np.float32)


def TransposeOffsets(o, rows: int, cols: int, src_pitch: int) -> None:
    """o[c * rows + r] = (r * src_pitch + c) * 4 for r < rows <= 64 (a multiple of 8), c < cols (int32 *o*)."""
    Duplicate(o, 0, rows)
    for p in range(rows.bit_length()):  # o[r] = r * src_pitch * 4: add 2^p * pitch * 4 on the lanes with bit p
        word = sum(1 << r for r in range(rows) if r >> p & 1)
        if word:
            PipeBarrier(Pipe.V)
            Adds(o, o, (1 << p) * src_pitch * 4, (word, 0), 1, UnaryRepeatParams())
    step = 1
    while step < cols:  # o[c * rows + r] = o[r] + 4 c, doubling over c (rows * 4 bytes is 32-byte aligned)
        PipeBarrier(Pipe.V)
        Adds(o[step * rows:], o, step * 4, min(step, cols - step) * rows)
        step *= 2
    PipeBarrier(Pipe.V)


def unit_tokens(D: int) -> int:
    """Tokens of one head TransposeHeads moves per unit: as many as fit 8 KiB of fp32 rows of D (padded to 8), 8 to
    64 (the Gather offsets' rows; estimates count the pages a unit's copy touches with it)."""
    d8 = -(-D // 8) * 8
    return max(8, min(64, 8192 // d8) // 8 * 8)


def TransposeHeads(src_gm, dst_gm, tokens: int, heads: int, D: int, dst_pitch: int, workers: int = 0) -> None:
    """src [tokens, heads, D] (fp32 GM) -> dst [heads, D, dst_pitch]: token t of head n, column d at
    ``(n * D + d) * dst_pitch + t``. Units of R tokens of one head are split over *workers* AIVs (0: all of
    the launch's). Own TPipe, reset at the end; no SyncAll."""
    d8 = -(-D // 8) * 8
    R = unit_tokens(D)
    pipe = TPipe()
    vin, vout, offs = TBuf(), TBuf(), TBuf()
    pipe.InitBuffer(vin, R * d8 * 4)
    pipe.InitBuffer(vout, R * d8 * 4)
    pipe.InitBuffer(offs, R * d8 * 4)
    o = offs.Get(np.int32)
    TransposeOffsets(o, R, D, d8)
    per_head = -(-tokens // R)
    units = heads * per_head
    g = GetBlockIdx()
    share = -(-units // (workers or GetBlockNum()))
    for u in range(g * share, min((g + 1) * share, units)):
        n, t0 = u // per_head, (u % per_head) * R
        nr = min(R, tokens - t0)
        src = vin.Get(F32)
        CopyRowsIn(src, src_gm[t0 * heads * D + n * D], nr, D, heads * D, d8)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        dst = vout.Get(F32)
        Gather(dst, src, o.ReinterpretCast(np.uint32), 0, D * R)
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
        CopyRowsOut(dst_gm[n * D * dst_pitch + t0], dst, D, nr, R, dst_pitch)
        SetFlag(HardEvent.MTE3_MTE2, 0)
        WaitFlag(HardEvent.MTE3_MTE2, 0)
        SetFlag(HardEvent.MTE3_V, 0)
        WaitFlag(HardEvent.MTE3_V, 0)
    SetFlag(HardEvent.V_MTE2, 0)  # the offsets' writes before a later pipe's copies into the same UB (no units here)
    WaitFlag(HardEvent.V_MTE2, 0)
    pipe.Reset()
