"""Positional bias (pse / real_shift) of the flash-attention forward kernels: where a score slice's bias is.

Why shared: the FlashAttentionScore family (varlen forward now, the gradients later) reads the outer
pse in the same two forms, and the alibi-compressed read rule is easy to get subtly wrong.

- :func:`full_pse_offset`: the TND "full" form, a 1-D tensor holding each batch's [N1, Sq, Skv]
  block in turn (validate.py ``FaVarLenProblem``).
- :func:`alibi_read_window`: the TND alibi-compressed form [Bp, N1, 1024, S2max] (the last 1024 rows
  of a pse that is constant along diagonals), read per score slice as the CANN kernel does
  (``PseAlibiComputeOffset``, LAYOUT_TND branch, research/tiling.md §0; docs/fa_varlen.md step 2).
- :func:`alibi_slice_needed`: ``NeedPseAlibiCompute`` (a slice entirely above the diagonal adds nothing).
- :func:`AddPseSlice`: the kernel step: copy the slice's bias to UB, widen it to fp32, add it to the scores.
"""
from __future__ import annotations

import numpy as np

from npusim.kernel import Add, Cast, Pipe, PipeBarrier, RoundMode
from ops.common.rowops import CopyRowsIn

#: Rows kept by the alibi-compressed form (seed 001: ``ori_pse[:, :, -1024:, :]``; CANN PSE_ALIBI_S_SIZE).
ALIBI_ROWS = 1024


def full_pse_offset(n1: int, cu_ss: int, ss: int, skv: int, n: int, row: int, col: int) -> int:
    """Flat element offset of (head n, batch row, batch column) in the full TND pse.

    *cu_ss*: sum of Sq*Skv over the earlier batches; *ss*, *skv*: this batch's Sq*Skv and Skv.
    """
    return n1 * cu_ss + n * ss + row * skv + col


def alibi_read_window(row0: int, col0: int, s2max: int, rows: int = ALIBI_ROWS) -> tuple[int, int]:
    """(m0, k0): the compressed pse element read for slice element (row0 + r, col0 + c) is [m0 + r, k0 + c].

    ``thr = s2max - rows``, ``pos = row0 - col0 - thr``; thr >= 0: (pos, 0) if pos >= 0 else (0, -pos);
    thr < 0: (pos, 0). For data constant along diagonals this reads value(j - i + s2max - rows).
    """
    thr = s2max - rows
    pos = row0 - col0 - thr
    if thr >= 0 and pos < 0:
        return 0, -pos
    return pos, 0


def alibi_slice_needed(row0: int, slice_rows: int, col0: int) -> bool:
    """False when every row of the slice lies strictly above column *col0* (all masked by causality)."""
    return row0 + slice_rows > col0


def AddPseSlice(scores, pse_local, pse32, src, rows: int, cols: int, gm_pitch: int, pitch: int, pse_que) -> None:
    """scores[r, c] += fp32(pse[r, c]) for a rows x cols slice (UB row pitch *pitch*).

    *pse_local* is allocated from *pse_que* (VECIN) by the caller's TQue discipline here: copy in,
    EnQue/DeQue, widen into *pse32* (fp32 scratch) unless already fp32, Add, FreeTensor.
    """
    CopyRowsIn(pse_local, src, rows, cols, gm_pitch, pitch)
    pse_que.EnQue(pse_local)
    pse_local = pse_que.DeQue(pse_local.dtype)
    n = rows * pitch
    if pse_local.dtype != np.float32:
        Cast(pse32, pse_local, RoundMode.CAST_NONE, n)
        PipeBarrier(Pipe.V)
        Add(scores, scores, pse32, n)
    else:
        PipeBarrier(Pipe.V)
        Add(scores, scores, pse_local, n)
    PipeBarrier(Pipe.V)
    pse_que.FreeTensor(pse_local)
