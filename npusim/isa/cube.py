"""Cube instructions (PIPE_M): :class:`Mmad` and its :class:`MmadParams`.

Layouts (docs/numerics_cube.md "Layouts"; K0 = 32 B / element size, hardware.md §3):

- L0A holds A (m x k) as 16 x K0 fractals, row-major inside ("ZZ"), fractal (mb, kb) at index
  ``mb * K1 + kb`` (m-block major), K1 = ceil(k / K0).
- L0B holds B (k x n) as K0 x 16 fractals stored column-major inside, i.e. each fractal is the
  16 x K0 row-major block of B^T ("ZN"), fractal (kb, nb) at index ``kb * N1 + nb`` (k-block major).
  A plain LoadData of the NZ fractals of B^T gives this, and so does LoadData with ifTranspose of the
  NZ fractals of B (one call per k-block, srcStride = K1).
- L0C holds C (ceil16(m) x ceil16(n)) in NZ: 16 x 16 fractals, column block nb at
  ``nb * ceil16(m) * 16``, rows of 16 contiguous elements.

Numerics (docs/numerics_cube.md "Mmad"): fp16/bf16 products are exact in fp32 (fp32 inputs: the fp32
product rounded RNE); each K0-wide fractal is summed in a fixed pairwise tree in fp32; the fractal sums
are added to the fp32 accumulator in ascending k order. int8 x int8 accumulates exactly in wrapping
int32. Elements with a k index >= k are read as +0. No BLAS is used.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.errors import NpusimError
from npusim.isa.base import Instruction
from npusim.memory.local import LocalTensor
from npusim.types import BufferKind, Pipe

__all__ = ["Mmad", "MmadParams"]

FRACTAL_BYTES = 512  # one L0A/L0B fractal (hardware.md §3)
M0 = N0 = 16  # fractal rows of A / columns of B (hardware.md §3)
#: Input dtype -> accumulator (L0C) dtype.
_ACC = {"float16": np.float32, "bfloat16": np.float32, "float32": np.float32, "int8": np.int32}


@dataclass(slots=True)
class MmadParams:
    """Ascend C MmadParams. Only m, n, k and cmatrixInitVal are modelled; other fields must stay default."""

    m: int = 0
    n: int = 0
    k: int = 0
    isBias: bool = False
    fmOffset: int = 0
    enSsparse: bool = False
    enWinogradA: bool = False
    enWinogradB: bool = False
    unitFlag: int = 0
    kDirectionAlign: bool = False
    cmatrixSource: bool = False
    cmatrixInitVal: bool = True


_DEFAULTS = MmadParams()
_UNMODELLED = ("isBias", "fmOffset", "enSsparse", "enWinogradA", "enWinogradB", "unitFlag", "kDirectionAlign",
               "cmatrixSource")


class Mmad(Instruction):
    """Ascend C ``Mmad(dst L0C, fm L0A, filter L0B, MmadParams)``: C (+)= A @ B on the cube.

    With ``cmatrixInitVal`` the accumulator starts from +0, otherwise from the L0C contents.
    Cost: ``chip.cube_cycles`` occupancy plus ``chip.mmad_latency_cycles``; flops = 2 m n k.
    Raises NpuBufferError for operands too small for m, n, k, NotImplementedError for unmodelled
    dtypes, bias and the other MmadParams options.
    """

    __slots__ = ("dst", "a", "b", "m", "n", "k", "init", "k0", "dtype_name", "flops")
    name = "Mmad"
    pipe = Pipe.M

    def __init__(self, dst, fm, filter, *args):
        if len(args) != 1:
            raise NotImplementedError("Mmad with a bias operand is not modelled (use Mmad(dst, fm, filter, params))")
        params = args[0]
        if not isinstance(params, MmadParams):
            raise NotImplementedError(f"Mmad with {type(params).__name__} is not modelled (MmadParams)")
        for field in _UNMODELLED:
            if getattr(params, field) != getattr(_DEFAULTS, field):
                raise NotImplementedError(f"Mmad: MmadParams.{field} = {getattr(params, field)!r} is not modelled")
        for t, kind in ((dst, BufferKind.L0C), (fm, BufferKind.L0A), (filter, BufferKind.L0B)):
            if not (isinstance(t, LocalTensor) and t.buffer.kind is kind):
                raise NotImplementedError(f"Mmad operands must be L0C, L0A, L0B tensors; got {t!r} for {kind}")
        name = fm.dtype.name
        acc = _ACC.get(name)
        if acc is None or filter.dtype != fm.dtype:
            raise NotImplementedError(f"Mmad {name} x {filter.dtype.name} is not modelled "
                                      f"(fp16, bf16, fp32 or int8, both operands alike)")
        if dst.dtype != acc:
            raise NotImplementedError(f"Mmad {name} inputs accumulate in {np.dtype(acc).name}, not {dst.dtype.name}")
        m, n, k = int(params.m), int(params.n), int(params.k)
        if min(m, n, k) < 0:
            raise NpusimError(f"Mmad: m, n, k must be >= 0, got {m}, {n}, {k}")
        self.dst, self.a, self.b = dst, fm, filter
        self.m, self.n, self.k, self.init = m, n, k, bool(params.cmatrixInitVal)
        self.k0 = 32 // fm.dtype.itemsize
        self.dtype_name = name
        self.flops = 2 * m * n * k
        if m and n and k:
            m1, n1, k1 = -(-m // M0), -(-n // N0), -(-k // self.k0)
            per = FRACTAL_BYTES // fm.dtype.itemsize
            fm.check(m1 * k1 * per)
            filter.check(k1 * n1 * per)
            dst.check(m1 * n1 * M0 * N0)
        self.issue(fm.core)

    def cycles(self, chip):
        return float(chip.cube_cycles(self.m, self.n, self.k, self.dtype_name)), float(chip.mmad_latency_cycles)

    def execute(self) -> None:
        m, n, k, k0 = self.m, self.n, self.k, self.k0
        if not (m and n and k):
            return
        m1, n1, k1 = -(-m // M0), -(-n // N0), -(-k // k0)
        rows, cols = m1 * M0, n1 * N0
        a = self.a.view(m1 * k1 * M0 * k0).reshape(m1, k1, M0, k0)
        b = self.b.view(k1 * n1 * N0 * k0).reshape(k1, n1, N0, k0)
        c = self.dst.view(n1 * rows * N0)
        acc_t = self.dst.dtype.type
        if self.init:
            acc = np.zeros((rows, cols), self.dst.dtype)
        else:  # NZ -> (rows, cols)
            acc = c.reshape(n1, rows, N0).transpose(1, 0, 2).reshape(rows, cols).copy()
        integer = acc_t is np.int32
        with np.errstate(all="ignore"):  # padding rows may hold stale Inf/NaN; IEEE results are intended
            for kf in range(k1):
                av = a[:, kf].reshape(rows, k0).astype(acc_t)
                bv = b[kf].reshape(cols, k0).astype(acc_t)
                valid = k - kf * k0
                if valid < k0:  # elements past k are read as +0
                    av[:, valid:] = 0
                    bv[:, valid:] = 0
                if integer:
                    # NOTE: numpy integer matmul is exact and BLAS-free; int32 wraps like the hardware.
                    acc += av @ bv.T
                else:
                    acc += _fractal_sum(av, bv)
        c[:] = acc.reshape(rows, n1, N0).transpose(1, 0, 2).reshape(-1)

    def reads(self):
        m1, n1, k1 = -(-self.m // M0), -(-self.n // N0), -(-self.k // self.k0)
        regs = [(BufferKind.L0A, self.a.addr, m1 * k1 * FRACTAL_BYTES),
                (BufferKind.L0B, self.b.addr, k1 * n1 * FRACTAL_BYTES)]
        if not self.init:
            regs.append((BufferKind.L0C, self.dst.addr, m1 * n1 * 256 * self.dst.dtype.itemsize))
        return tuple(regs)

    def writes(self):
        m1, n1 = -(-self.m // M0), -(-self.n // N0)
        return ((BufferKind.L0C, self.dst.addr, m1 * n1 * 256 * self.dst.dtype.itemsize),)


def _fractal_sum(av: np.ndarray, bv: np.ndarray) -> np.ndarray:
    """sum_j av[:, j] * bv[:, j] for every (row, col), fp32, in the fixed pairwise tree.

    Level 1 adds products (0+1), (2+3), ...; each further level adds neighbouring partial sums, so
    for K0 = 16: (((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)))+(...8..15...). K0 is a power of two.
    """
    p = av.T[:, :, None] * bv.T[:, None, :]  # (K0, rows, cols): one product plane per k
    while p.shape[0] > 1:
        p = p[0::2] + p[1::2]
    return p[0]
