"""Mmad's exact fp32 tree (docs/numerics_cube.md "Mmad") as one compiled loop nest (numba), for full mode's speed.

Why: the numpy form (npusim/isa/cube.py) writes k0 product planes of the whole tile per k fractal and reads them
back level by level, ~4 MB of memory traffic per 128 x 128 x 128 Mmad; this kernel keeps one output row's 16
lanes and their products in registers, so the work stays in cache and LLVM vectorises over the lanes.

The same operations in the same order as the numpy form, each rounding as written (no fastmath, so no FMA
contraction and no reassociation): fp32 products (exact for fp16/bf16 operands, RNE for fp32), the fixed pairwise
tree per fractal, the fractal sums added to the accumulator in ascending k. Signed zeros, Inf, overflow and
subnormals follow IEEE in both. The one thing LLVM may change is operand order of an addition or multiplication
(they commute in its IR), which decides only which NaN payload a NaN + NaN keeps: so the kernel refuses operands
or an accumulator holding a NaN (returns False, nothing written) and the caller runs the numpy form. Without
NaN inputs every NaN the arithmetic makes is the CPU's one default NaN, whatever the order.

The kernel compiles on first use (cache=True: once per machine, stored in __pycache__). cube.py imports this
module on the first float Mmad (numba's import costs ~0.4 s that timing mode need not pay) and runs the numpy
form where numba is not installed. tests/npusim/test_mmad_tree.py compares both bit for bit.
"""
from __future__ import annotations

import numpy as np
from numba import njit


def run(a: np.ndarray, b: np.ndarray, c: np.ndarray, rows: int, init: bool) -> bool:
    """C (+)= A @ B in L0C's NZ layout, or False (nothing written) if an operand or the accumulator holds a NaN.

    *a*: float32 (m1, k1, 16, k0), L0A's fractals widened; *b*: float32 (k1, k0, cols), L0B's fractals widened
    and transposed so a fractal's k row is contiguous over the output columns; elements past k are +0 in both.
    *c*: the float32 L0C view (cols / 16 blocks of *rows* x 16), read when not *init*, written."""
    return _mmad(a, b, c, rows, init)


def run16(a: np.ndarray, b: np.ndarray, table: np.ndarray, k: int, c: np.ndarray, rows: int, init: bool) -> bool:
    """:func:`run` from L0A's and L0B's 16-bit fractals as they are stored, widened here (exact) by *table*.

    *a*: uint16 (m1, k1, 16, 16), L0A's fractals' bits; *b*: uint16 (k1, n1, 16, 16), L0B's; *table*: float32 value
    of each bit pattern of their dtype (fp16 or bf16); elements with a k index >= *k* are read as +0. Why here: the
    widening and B's turn in numpy cost about a fifth of a 128 x 128 x 128 Mmad (two gathers, a transpose copy)."""
    return _mmad16(a, b, table, k, c, rows, init)


@njit(cache=True)
def _mmad16(a, b, table, k, c, rows, init):
    """:func:`run16`: *a* and *b* widened into (m1, k1, 16, k0) and (k1, k0, cols) float32, then :func:`_mmad`."""
    m1, k1, _, k0 = a.shape
    n1 = b.shape[1]
    aw = np.empty((m1, k1, 16, k0), np.float32)
    for i in range(m1):
        for kf in range(k1):
            for r in range(16):
                for t in range(k0):
                    aw[i, kf, r, t] = table[a[i, kf, r, t]]
    bw = np.empty((k1, k0, n1 * 16), np.float32)
    for kf in range(k1):
        for nb in range(n1):
            for j in range(16):
                for t in range(k0):
                    bw[kf, t, nb * 16 + j] = table[b[kf, nb, j, t]]
    valid = k - (k1 - 1) * k0
    for t in range(valid, k0):  # elements past k are read as +0
        aw[:, k1 - 1, :, t] = 0
        bw[k1 - 1, t, :] = 0
    return _mmad(aw, bw, c, rows, init)


@njit(cache=True, inline="always")
def _has_nan(x) -> bool:
    for v in x.flat:
        if np.isnan(v):
            return True
    return False


@njit(cache=True, inline="always")
def _tree8(p0, p1, p2, p3, p4, p5, p6, p7):
    """Eight products summed in the fixed pairwise tree."""
    return ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7))


@njit(cache=True, inline="always")
def _accumulator(c, rows, cols, init):
    """The (rows, cols) accumulator: +0 with *init* (cmatrixInitVal), else L0C's NZ values."""
    acc = np.zeros((rows, cols), np.float32)
    if not init:
        for nb in range(cols // 16):
            for i in range(rows):
                at = (nb * rows + i) * 16
                for lane in range(16):
                    acc[i, nb * 16 + lane] = c[at + lane]
    return acc


@njit(cache=True, inline="always")
def _store(acc, c, rows, cols):
    """*acc* into L0C's NZ layout (16-column blocks of *rows* x 16)."""
    for nb in range(cols // 16):
        for i in range(rows):
            at = (nb * rows + i) * 16
            for lane in range(16):
                c[at + lane] = acc[i, nb * 16 + lane]


@njit(cache=True, inline="always")
def _add_fractal16(o, x, y, cols):
    """o[j] += the tree of x[t] * y[t, j], t < 16 (fp16 / bf16 operands: K0 = 16)."""
    x0, x1, x2, x3, x4, x5, x6, x7 = x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]
    x8, x9, x10, x11, x12, x13, x14, x15 = x[8], x[9], x[10], x[11], x[12], x[13], x[14], x[15]
    y0, y1, y2, y3, y4, y5, y6, y7 = y[0], y[1], y[2], y[3], y[4], y[5], y[6], y[7]
    y8, y9, y10, y11, y12, y13, y14, y15 = y[8], y[9], y[10], y[11], y[12], y[13], y[14], y[15]
    for j in range(cols):  # the innermost loop over output columns: LLVM vectorises it
        o[j] = o[j] + (_tree8(x0 * y0[j], x1 * y1[j], x2 * y2[j], x3 * y3[j],
                              x4 * y4[j], x5 * y5[j], x6 * y6[j], x7 * y7[j])
                       + _tree8(x8 * y8[j], x9 * y9[j], x10 * y10[j], x11 * y11[j],
                                x12 * y12[j], x13 * y13[j], x14 * y14[j], x15 * y15[j]))


@njit(cache=True, inline="always")
def _add_fractal8(o, x, y, cols):
    """o[j] += the tree of x[t] * y[t, j], t < 8 (fp32 operands: K0 = 8)."""
    x0, x1, x2, x3, x4, x5, x6, x7 = x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]
    y0, y1, y2, y3, y4, y5, y6, y7 = y[0], y[1], y[2], y[3], y[4], y[5], y[6], y[7]
    for j in range(cols):
        o[j] = o[j] + _tree8(x0 * y0[j], x1 * y1[j], x2 * y2[j], x3 * y3[j],
                             x4 * y4[j], x5 * y5[j], x6 * y6[j], x7 * y7[j])


@njit(cache=True)
def _mmad(a, b, c, rows, init):
    """:func:`run`."""
    cols = b.shape[2]
    if _has_nan(a) or _has_nan(b) or not init and _has_nan(c[:rows * cols]):
        return False
    acc = _accumulator(c, rows, cols, init)
    k16 = a.shape[3] == 16
    for i in range(rows):
        o = acc[i]
        for kf in range(a.shape[1]):  # ascending k: one fp32 addition of each fractal's sum
            if k16:
                _add_fractal16(o, a[i // 16, kf, i % 16], b[kf], cols)
            else:
                _add_fractal8(o, a[i // 16, kf, i % 16], b[kf], cols)
    _store(acc, c, rows, cols)
    return True
