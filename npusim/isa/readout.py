"""Fixpipe's plain read-out (L0C's NZ fractals -> a row-major matrix, fp32 kept or rounded to fp16 / bf16) as one
compiled loop (numba), for full mode's speed.

Why: numpy's float32 -> float16 conversion costs about 1.5 ns an element on this machine (25 us of a 128 x 128
tile, half of a Fixpipe), and the numpy form also gathers the NZ blocks into a temporary and scatters the result
into the strided destination. This loop reads each L0C element once and writes its destination bits once.

The rounding is npusim.dtypes' Inf/NaN-mode round-to-nearest-even on the bits (npusim/isa/round16.py).
tests/npusim/test_readout.py compares it with ``npusim.dtypes.cast`` bit for bit (every exponent, the rounding
boundaries, random bits) and the whole Fixpipe with and without it. cube.py imports this module on
the first plain Fixpipe in full mode (numba's import is not paid by timing mode) and keeps the numpy form where
numba is not installed.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from npusim.isa.round16 import bf16_bits, f16_bits

#: *mode* of :func:`nz_to_nd`: the bits copied (fp32 -> fp32), rounded to fp16, rounded to bf16.
COPY, TO_F16, TO_BF16 = 0, 1, 2


def nz_to_nd(src: np.ndarray, step: int, dst: np.ndarray, mode: int) -> None:
    """dst[r, c] = L0C element (r, c) of an NZ matrix, converted by *mode*.

    *src*: L0C's words (uint32) from the matrix's start; column block j (16 columns) starts at word j * *step*,
    its rows of 16 words contiguous. *dst*: the destination's (rows, cols) view as uint32 (COPY) or uint16 (the
    roundings), any strides."""
    _nz_to_nd(src, step, dst, mode)


@njit(cache=True)
def _nz_to_nd(src, step, dst, mode):
    """:func:`nz_to_nd`."""
    rows, cols = dst.shape
    for r in range(rows):
        for c in range(cols):
            f = np.uint32(src[(c // 16) * step + r * 16 + c % 16])
            if mode == COPY:
                dst[r, c] = f
            elif mode == TO_F16:
                dst[r, c] = f16_bits(f)
            else:
                dst[r, c] = bf16_bits(f)
