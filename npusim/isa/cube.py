"""The cube and its output: :class:`Mmad` (PIPE_M) and :class:`Fixpipe` (PIPE_FIX, L0C -> GM/L1).

Contents: :class:`MmadParams`, :class:`Mmad`; :class:`QuantMode_t`, :class:`FixpipeParamsV220`,
:class:`FixpipeConfig` (``CFG_ROW_MAJOR`` / ``CFG_NZ``), :class:`Fixpipe`. Parameter structs are
mutable like their Ascend C counterparts.

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
int32. Elements with a k index >= k are read as +0. Float Mmads run a compiled loop nest of exactly these
operations (npusim/isa/mmad_tree.py, numba); the numpy form (_by_numpy: integer matmul for int8, a matmul for
only the tree's exact first level of fp16/bf16) is its reference and its fallback. Fixpipe: NZ -> ND, fp32 -> fp16/bf16 RNE, int32 -> fp16
dequant (fp32 or FP19 scale), ReLU (docs/numerics_cube.md "Fixpipe").
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import Enum

import numpy as np

from npusim.dtypes import cast, decode_deq_scale_u64, np_dtype
from npusim.errors import NpusimError
from npusim.isa import compiled
from npusim.isa.base import Instruction
from npusim.isa.dma import BLOCK, _ceil, _check, _data, _nonneg, _send
from npusim.isa.vector.numerics import _WIDE as _WIDE16, widen16  # _WIDE16: the compiled tree's widening table
from npusim.memory.gm import GlobalTensor
from npusim.memory.local import LocalTensor
from npusim.types import BufferKind, Pipe
# NOTE: enum members bound once, for performance reasons: on Python 3.11 reading an Enum class attribute
# costs ~0.4 us (EnumType.__getattr__), and these are read per instruction (benchmarks/sim_speed.py)
_BK_L0A = BufferKind.L0A
_BK_L0B = BufferKind.L0B
_BK_L0C = BufferKind.L0C
_BK_L1 = BufferKind.L1
_P_FIX = Pipe.FIX

__all__ = ["Mmad", "MmadParams", "Fixpipe", "FixpipeParamsV220", "FixpipeConfig", "CFG_ROW_MAJOR", "CFG_NZ",
           "QuantMode_t"]

FRACTAL_BYTES = 512  # one L0A/L0B fractal (hardware.md §3)
M0 = N0 = 16  # fractal rows of A / columns of B (hardware.md §3)
L0C_C0 = 16  # L0C fractals are 16 x 16 elements (hardware.md §3)
#: Input dtype -> (ChipSpec cube dtype name, accumulator dtype). NOTE: keyed by dtype because
#: ``dtype.name`` is slow to compute, and Mmad is issued in inner loops.
_ACC = {np_dtype(name): (np_dtype(name).name, np.dtype(acc))
        for name, acc in (("fp16", np.float32), ("bf16", np.float32), ("fp32", np.float32), ("int8", np.int32))}


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


_UNMODELLED = ("isBias", "fmOffset", "enSsparse", "enWinogradA", "enWinogradB", "unitFlag", "kDirectionAlign",
               "cmatrixSource")
_DEFAULTS = tuple(getattr(MmadParams(), f) for f in _UNMODELLED)


#: An Mmad writing fewer 16 x 16 output fractals than this needs PipeBarrier(PIPE_M) before a dependent Mmad
#: (one accumulating into the same L0C) may start: Ascend C's matmul adds PIPE_M synchronisation "when
#: baseM * baseN is less than 10 * 256", as do CANN's tile Mmad helpers (PIPE_M_BARRIER_THRESHOLD = 10).
#: Not timed by core.py (the next Mmad's start ignores it); npusim.sanitizer reports the missing barrier.
MMAD_SETTLE_FRACTALS = 10


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
        p = params
        if (p.isBias, p.fmOffset, p.enSsparse, p.enWinogradA, p.enWinogradB, p.unitFlag, p.kDirectionAlign,
                p.cmatrixSource) != _DEFAULTS:
            field = next(f for f, d in zip(_UNMODELLED, _DEFAULTS) if getattr(p, f) != d)
            raise NotImplementedError(f"Mmad: MmadParams.{field} = {getattr(p, field)!r} is not modelled")
        for t, kind in ((dst, _BK_L0C), (fm, _BK_L0A), (filter, _BK_L0B)):
            if not (isinstance(t, LocalTensor) and t.buffer.kind is kind):
                raise NotImplementedError(f"Mmad operands must be L0C, L0A, L0B tensors; got {t!r} for {kind}")
        name, acc = _ACC.get(fm.dtype, (None, None))
        if acc is None or filter.dtype != fm.dtype:
            raise NotImplementedError(f"Mmad {fm.dtype.name} x {filter.dtype.name} is not modelled "
                                      f"(fp16, bf16, fp32 or int8, both operands alike)")
        if dst.dtype != acc:
            raise NotImplementedError(f"Mmad {name} inputs accumulate in {acc.name}, not {dst.dtype.name}")
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
        rows = m1 * M0
        a = self.a.view(m1 * k1 * M0 * k0).reshape(m1, k1, M0, k0)
        b = self.b.view(k1 * n1 * N0 * k0).reshape(k1, n1, N0, k0)
        c = self.dst.view(n1 * rows * N0)
        if c.dtype == np.float32 and USE_TREE_KERNEL and _by_tree_kernel(a, b, k, c, rows, self.init):
            return
        _by_numpy(a, b, k, c, rows, self.init)

    def reads(self):
        m1, n1, k1 = -(-self.m // M0), -(-self.n // N0), -(-self.k // self.k0)
        regs = [(_BK_L0A, self.a.addr, m1 * k1 * FRACTAL_BYTES),
                (_BK_L0B, self.b.addr, k1 * n1 * FRACTAL_BYTES)]
        if not self.init:
            regs.append((_BK_L0C, self.dst.addr, m1 * n1 * 256 * self.dst.dtype.itemsize))
        return tuple(regs)

    def writes(self):
        m1, n1 = -(-self.m // M0), -(-self.n // N0)
        return ((_BK_L0C, self.dst.addr, m1 * n1 * 256 * self.dst.dtype.itemsize),)


def _by_numpy(a: np.ndarray, b: np.ndarray, k: int, c: np.ndarray, rows: int, init: bool) -> None:
    """C (+)= A @ B into L0C *c* with numpy (every dtype; the reference of the compiled tree): int8 by integer
    matmul, fp16/bf16 by _pairs_by_matmul where it is proven equal to the tree, otherwise the tree itself."""
    k1, k0 = a.shape[1], a.shape[3]
    n1 = b.shape[1]
    cols = n1 * N0
    acc_t = c.dtype.type
    if init:
        acc = np.zeros((rows, cols), c.dtype)
    else:  # NZ -> (rows, cols)
        acc = c.reshape(n1, rows, N0).transpose(1, 0, 2).reshape(rows, cols).copy()
    integer = acc_t is np.int32
    if not integer and _pairs_by_matmul(a, b, k, acc, init):
        c.reshape(n1, rows, N0)[...] = acc.reshape(rows, n1, N0).transpose(1, 0, 2)  # -> NZ, one pass
        return
    # one product buffer for every k fractal (NOTE: reused, not allocated per fractal, for performance
    # reasons: full mode's attention kernels spend most of their time here, benchmarks/pfa.py)
    buf = None if integer else np.empty((k0, rows, cols), acc_t)
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
                acc += _fractal_sum(av, bv, buf)
    c[:] = acc.reshape(rows, n1, N0).transpose(1, 0, 2).reshape(-1)


#: Float Mmads run the compiled tree (npusim/isa/mmad_tree.py) when numba is installed; False (or no numba)
#: runs the numpy form above, which tests/npusim/test_mmad_tree.py takes as the reference.
USE_TREE_KERNEL = compiled.HAVE_NUMBA


def _by_tree_kernel(a: np.ndarray, b: np.ndarray, k: int, c: np.ndarray, rows: int, init: bool) -> bool:
    """C (+)= A @ B by the compiled tree, into L0C *c*; False (nothing written) if an operand or the accumulator
    holds a NaN (the numpy form then decides the payloads, npusim/isa/mmad_tree.py). *a*, *b*: L0A's (m1, k1, 16,
    k0) and L0B's (k1, n1, 16, k0) fractals; fp16/bf16 ones are widened to fp32 (exact) in the kernel, fp32 ones
    are passed with B's turned to (k1, k0, cols)."""
    mmad_tree = compiled.mmad_tree  # (imported on first use: numba's import costs ~0.4 s)
    table = _WIDE16.get(a.dtype)
    if table is not None:
        return mmad_tree.run16(a.view(np.uint16), b.view(np.uint16), table, k, c, rows, init)
    k1, n1, _, k0 = b.shape
    aw, bw = a, np.ascontiguousarray(b.transpose(0, 3, 1, 2))  # fp32: A copied only where padding is zeroed
    valid = k - (k1 - 1) * k0
    if valid < k0:  # elements past k are read as +0
        aw = a.copy()
        aw[:, -1, :, valid:] = 0
        bw[-1, valid:] = 0
    return mmad_tree.run(aw, bw.reshape(k1, k0, n1 * N0), c, rows, init)


#: Bytes of level-1 planes computed per matmul call of _pairs_by_matmul (bounds its temporary memory).
_PAIR_PLANE_BYTES = 1024 * 1024
_B16 = (np_dtype("fp16"), np_dtype("bf16"))
_BF16 = np_dtype("bf16")
_F32_MIN_NORMAL = float(np.finfo(np.float32).tiny)
_NEG_ZERO32 = np.uint32(0x80000000)  # the bits of float32 -0


def _pairs_by_matmul(a: np.ndarray, b: np.ndarray, k: int, acc: np.ndarray, init: bool) -> bool:
    """The same fp32 result as the elementwise tree (_fractal_sum), faster: level 1 of every fractal's tree,
    ``RN32(p0 + p1)``, ``RN32(p2 + p3)``, ..., as a batched k = 2 fp32 matmul, the further levels and the
    ascending accumulation elementwise as before. Adds into *acc* (rows x cols) and returns True, or returns
    False (nothing done) where that equality is not proven and the caller runs the tree.

    Why it is the same bits (docs/numerics_cube.md "Mmad"): fp16 and bf16 products are exact in fp32 as long
    as they stay in fp32's normal range (fp16 always: 2^-48 <= |p| < 2^32; bf16 checked here), so any
    evaluation of a two-term dot product, with or without FMA, in any order, is the one rounding
    RN32(p0 + p1). It can differ from the tree only in the sign of a zero sum, which cannot change an
    accumulator that holds no -0 (x + (+-0) = x for x != 0, +0 + (+-0) = +0): the accumulator starts at +0
    (cmatrixInitVal) or is checked. Inf/NaN operands (their payloads) and fp32 operands (inexact products)
    take the tree."""
    if a.dtype not in _B16 or not init and bool((acc.view(np.uint32) == _NEG_ZERO32).any()):
        return False
    m1, k1, _, k0 = a.shape
    n1 = b.shape[1]
    rows, cols, half = m1 * M0, n1 * N0, k0 // 2
    # pair i of fractal kf: A[kf, i] = (rows x 2) columns 2i, 2i+1 of the fractal; B[kf, i] = (2 x cols), in the
    # order _pair_order gives; converted to fp32 on the way in (one copy each).
    ia, ib = _pair_order(m1, k1, n1, k0)
    # NOTE: gathered as 16-bit patterns by one index array each, then widened by table (widen16), for
    # performance reasons: about half the time of a cast through the 8-axis transpose (benchmarks/pfa.py)
    pa = widen16(a.view(np.uint16).reshape(-1).take(ia).view(a.dtype)).reshape(k1, half, rows, 2)
    pb = widen16(b.view(np.uint16).reshape(-1).take(ib).view(b.dtype)).reshape(k1, half, 2, cols)
    valid = k - (k1 - 1) * k0
    if valid < k0:  # elements past k are read as +0
        bits = half.bit_length() - 1
        dead = np.zeros(k0, bool)
        dead[valid:] = True
        dead = dead.reshape((2,) * bits + (2,)).transpose(tuple(range(bits - 1, -1, -1)) + (bits,)).reshape(half, 2)
        pa[-1].transpose(0, 2, 1)[dead] = 0
        pb[-1][dead] = 0
    if not (np.isfinite(pa).all() and np.isfinite(pb).all()):
        return False
    if a.dtype == _BF16:  # every nonzero product a normal fp32 number, none overflowing
        aa, ab = np.abs(pa), np.abs(pb)
        if float(aa.max()) * float(ab.max()) >= 2.0 ** 127:
            return False
        lo = [float(x[x > 0].min()) if (x > 0).any() else 1.0 for x in (aa, ab)]
        if lo[0] * lo[1] < _F32_MIN_NORMAL:
            return False
    group = max(1, _PAIR_PLANE_BYTES // (half * rows * cols * 4))
    with np.errstate(all="ignore"):  # bf16 sums may overflow to Inf, as in the tree
        _levels(pa, pb, half, group, acc)
    return True


@functools.lru_cache(maxsize=64)
def _pair_order(m1: int, k1: int, n1: int, k0: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices into the (m1, k1, M0, k0) A and (k1, n1, N0, k0) B fractals that give _pairs_by_matmul's
    (k1, half, rows, 2) and (k1, half, 2, cols) operands: pair i of fractal kf (columns 2i, 2i+1 of A, rows 2i,
    2i+1 of B), the pairs in bit-reversed order of i, so every further level of the tree adds the first half
    of the partial sums to the second (contiguous) half."""
    bits = (k0 // 2).bit_length() - 1
    rev = tuple(range(3 + bits - 1, 2, -1))  # the source's pair-index bits (axes 3..), least significant first
    ia = np.arange(m1 * k1 * M0 * k0).reshape((m1, k1, M0) + (2,) * bits + (2,))
    ib = np.arange(k1 * n1 * N0 * k0).reshape((k1, n1, N0) + (2,) * bits + (2,))
    ia = ia.transpose((1,) + rev + (0, 2, 3 + bits)).reshape(-1)
    ib = ib.transpose((0,) + rev + (3 + bits, 1, 2)).reshape(-1)
    ia.flags.writeable = ib.flags.writeable = False  # shared by every call (cached)
    return ia, ib


def _bit_reversed(n: int) -> np.ndarray:
    """0..n-1 (n a power of two) in bit-reversed order: [0, 2, 1, 3] for 4, [0, 4, 2, 6, 1, 5, 3, 7] for 8."""
    bits = n.bit_length() - 1
    return np.array([int(format(i, f"0{bits}b")[::-1], 2) if bits else 0 for i in range(n)], np.int64)


def _levels(pa: np.ndarray, pb: np.ndarray, half: int, group: int, acc: np.ndarray) -> None:
    """Level 1 by matmul, then the tree's further levels (first half + second half of the bit-reversed
    partial sums: pair sums (0+1), (2+3), ... then their neighbours, as the tree) and the ascending
    accumulation (_pairs_by_matmul)."""
    out = _scratch((min(group, pa.shape[0]), half) + acc.shape)
    for f0 in range(0, pa.shape[0], group):
        p = np.matmul(pa[f0:f0 + group], pb[f0:f0 + group], out=out[:min(group, pa.shape[0] - f0)])
        h = half
        while h > 1:
            h //= 2
            np.add(p[:, :h], p[:, h:2 * h], out=p[:, :h])
        for s in p[:, 0]:  # ascending kf, one fp32 addition each
            np.add(acc, s, out=acc)


_SCRATCH: dict = {}


def _scratch(shape: tuple) -> np.ndarray:
    """A float32 work array of *shape*, the same one on every call with that shape (NOTE: not allocated per
    Mmad, for performance reasons: a fresh megabyte is fresh pages to fault in, benchmarks/pfa.py)."""
    buf = _SCRATCH.get(shape)
    if buf is None:
        if len(_SCRATCH) > 16:
            _SCRATCH.clear()
        buf = _SCRATCH[shape] = np.empty(shape, np.float32)
    return buf


def _fractal_sum(av: np.ndarray, bv: np.ndarray, buf: np.ndarray | None = None) -> np.ndarray:
    """sum_j av[:, j] * bv[:, j] for every (row, col), fp32, in the fixed pairwise tree.

    Level 1 adds products (0+1), (2+3), ...; each further level adds neighbouring partial sums, so
    for K0 = 16: (((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)))+(...8..15...). K0 is a power of two.
    *buf*: a (K0, rows, cols) array the product planes are written to (its plane 0, the result, is
    overwritten by the next call). Each level adds in place into the planes of the level before.
    """
    k0 = av.shape[1]
    p = np.multiply(av.T[:, :, None], bv.T[:, None, :], out=buf)  # (K0, rows, cols): a product plane per k
    step = 1
    while step < k0:
        left = p[0::2 * step]
        np.add(left, p[step::2 * step], out=left)
        step *= 2
    return p[0]


# -- Fixpipe ---------------------------------------------------------------------------------------
class QuantMode_t(Enum):
    """Ascend C QuantMode_t: Fixpipe's conversion of L0C values (220x subset + the unmodelled rest)."""

    NoQuant = "NoQuant"
    F322F16 = "F322F16"
    F322BF16 = "F322BF16"
    DEQF16 = "DEQF16"
    VDEQF16 = "VDEQF16"
    QF322B8_PRE = "QF322B8_PRE"
    VQF322B8_PRE = "VQF322B8_PRE"
    REQ8 = "REQ8"
    VREQ8 = "VREQ8"


@dataclass(slots=True)
class FixpipeParamsV220:
    """Ascend C FixpipeParamsV220 (L0C -> GM/L1 on 220x).

    ``srcStride``: distance between adjacent 16-column blocks of the L0C matrix, in rows of 16
    elements (normally ``ceil16(mSize)``). ``dstStride``: ND row pitch in elements (nz2nd), or the
    distance between NZ column blocks in 32-byte units (NZ output). ``deqScalar``: the DEQF16 scale,
    a float (used as fp32) or the uint64 FP19 word (docs/numerics_cube.md).
    """

    nSize: int = 0
    mSize: int = 0
    srcStride: int = 0
    dstStride: int = 0
    quantPre: QuantMode_t = QuantMode_t.NoQuant
    deqScalar: float | int = 0
    ndNum: int = 1
    srcNdStride: int = 0
    dstNdStride: int = 0
    reluEn: bool = False
    unitFlag: int = 0
    isChannelSplit: bool = False


class FixpipeConfig(Enum):
    """Ascend C FixpipeConfig: ROW_MAJOR converts NZ -> ND on the way out, NZ keeps the layout."""

    ROW_MAJOR = "CFG_ROW_MAJOR"
    NZ = "CFG_NZ"


CFG_ROW_MAJOR = FixpipeConfig.ROW_MAJOR
CFG_NZ = FixpipeConfig.NZ


_Q = QuantMode_t
#: (L0C dtype, destination dtype) -> quant modes that convert between them; the first is implied by
#: NoQuant (the destination dtype decides, docs/numerics_cube.md "Fixpipe").
_FIX_MODES = {(np_dtype(s), np_dtype(d)): modes for s, d, modes in (
    ("fp32", "fp32", (_Q.NoQuant,)),
    ("fp32", "fp16", (_Q.F322F16,)),
    ("fp32", "bf16", (_Q.F322BF16,)),
    ("int32", "int32", (_Q.NoQuant,)),
    ("int32", "fp16", (_Q.DEQF16, _Q.VDEQF16)),
)}


#: Fixpipe's plain read-outs by the compiled loop (npusim/isa/round16.py: 0 copies fp32, 1 rounds to fp16, 2 to
#: bf16) when numba is installed; False (or no numba) runs the numpy form (Fixpipe._placement), which
#: tests/npusim/test_readout.py takes as the reference.
USE_READOUT_KERNEL = USE_TREE_KERNEL
_READOUT_KINDS = {_Q.NoQuant: 0, _Q.F322F16: 1, _Q.F322BF16: 2}


class Fixpipe:
    """Ascend C ``Fixpipe(dst, src, [cbufWorkspace,] FixpipeParamsV220, config=CFG_ROW_MAJOR)`` on PIPE_FIX.

    Reads an ``mSize x nSize`` matrix of L0C (NZ, 16 x 16 fractals), converts each value (fp32 ->
    fp16/bf16 RNE; int32 -> fp16 dequant with a scalar or per-channel scale; optional ReLU) and writes
    it to GM or L1 as ND (row pitch ``dstStride``) or NZ. Padding rows/columns of L0C are dropped.
    Raises NpuBufferError for out-of-bounds access, NotImplementedError for unmodelled variants.
    """

    __slots__ = ("dst", "src", "params", "workspace", "mode", "config", "nbytes")
    name = "Fixpipe"
    pipe = Pipe.FIX

    def __init__(self, dst, src, *args, config: FixpipeConfig = CFG_ROW_MAJOR):
        if len(args) == 1:
            workspace, params = None, args[0]
        elif len(args) == 2:
            workspace, params = args
        else:
            raise NotImplementedError("Fixpipe takes (dst, src, [cbufWorkspace,] params)")
        if not isinstance(params, FixpipeParamsV220):
            raise NotImplementedError(f"Fixpipe with {type(params).__name__} is not modelled (FixpipeParamsV220)")
        if not (isinstance(src, LocalTensor) and src.buffer.kind is _BK_L0C):
            raise NotImplementedError("Fixpipe is modelled from L0C (CO1) only")
        to_l1 = isinstance(dst, LocalTensor) and dst.buffer.kind is _BK_L1
        if not (to_l1 or isinstance(dst, GlobalTensor)):
            raise NotImplementedError("Fixpipe is modelled into GM or L1 only")
        p = params
        self.dst, self.src, self.params, self.workspace, self.config = dst, src, p, workspace, config
        self.mode = self._mode(src.dtype, dst.dtype, p.quantPre, workspace)
        if p.isChannelSplit or p.unitFlag:
            raise NotImplementedError("Fixpipe isChannelSplit / unitFlag are not modelled")
        if not isinstance(config, FixpipeConfig):
            raise NotImplementedError(f"Fixpipe config {config!r} is not modelled")
        _nonneg("Fixpipe", nSize=p.nSize, mSize=p.mSize, srcStride=p.srcStride, dstStride=p.dstStride,
                ndNum=p.ndNum, srcNdStride=p.srcNdStride, dstNdStride=p.dstNdStride)
        item = dst.dtype.itemsize
        self.nbytes = p.ndNum * p.mSize * p.nSize * item
        unit = src.core
        if self.nbytes:
            n1 = _ceil(p.nSize, L0C_C0)
            src.check((p.ndNum - 1) * p.srcNdStride * 256 + (n1 - 1) * p.srcStride * L0C_C0
                      + _ceil(p.mSize, L0C_C0) * L0C_C0 * L0C_C0)
            if config is CFG_ROW_MAJOR:
                _check(dst, (p.ndNum - 1) * p.dstNdStride + (p.mSize - 1) * p.dstStride + p.nSize)
            else:
                if p.ndNum != 1:
                    raise NotImplementedError("Fixpipe NZ output with ndNum > 1 is not modelled")
                _check(dst, (n1 - 1) * p.dstStride * BLOCK // item + p.mSize * L0C_C0)
            if workspace is not None:
                workspace.check(p.nSize)
            if unit.atomic is not None and not to_l1:
                self._check_atomic(unit)
            elif unit.full:
                self.execute()
        if to_l1:
            _send(unit, self.name, _P_FIX, "l0c_to_l1", self.nbytes)
        else:
            start = _send(unit, self.name, _P_FIX, "l0c_to_gm", self.nbytes, dst.gm, dst.byte_offset, True)
            if unit.atomic is not None and unit.full and self.nbytes:
                index, values, target = self._placement()
                unit.launch.atomic_add(unit, dst.gm.name, target, index, values, start)

    @staticmethod
    def _mode(src_dtype, dst_dtype, quant: QuantMode_t, workspace) -> QuantMode_t:
        modes = _FIX_MODES.get((src_dtype, dst_dtype))
        if modes is None:
            raise NotImplementedError(f"Fixpipe {src_dtype.name} (L0C) -> {dst_dtype.name} is not modelled")
        if quant is _Q.NoQuant and modes[0] in (_Q.NoQuant, _Q.F322F16, _Q.F322BF16):
            quant = modes[0]
        if quant not in modes:
            raise NotImplementedError(f"Fixpipe quantPre {quant.name} with {src_dtype.name} -> {dst_dtype.name} "
                                      f"is not modelled (expected {' or '.join(m.name for m in modes)})")
        if (quant is _Q.VDEQF16) != (workspace is not None):
            raise NotImplementedError("Fixpipe needs a cbufWorkspace exactly for VDEQF16 (per-channel deq scales)")
        return quant

    def _scale(self) -> np.ndarray:
        """The fp32 dequant scale: scalar, or one per output column (channel)."""
        if self.mode is _Q.VDEQF16:
            ws = self.workspace.view(self.params.nSize)
            if ws.dtype == np.uint64:
                return decode_deq_scale_u64(ws)
            if ws.dtype == np.float32:
                return ws.copy()
            raise NotImplementedError(f"Fixpipe VDEQF16 workspace of {ws.dtype.name} is not modelled "
                                      "(uint64 FP19 words or float32)")
        deq = self.params.deqScalar
        if isinstance(deq, (float, np.floating)):
            return np.float32(deq)
        return decode_deq_scale_u64(np.uint64(deq))

    def _check_atomic(self, unit) -> None:
        """SetAtomicAdd: fp32 accumulation of a row-major fp32 result (the only atomic form modelled)."""
        if unit.atomic != np.float32 or self.dst.dtype != np.float32 or self.config is not CFG_ROW_MAJOR \
                or self.mode is not _Q.NoQuant or self.params.reluEn:
            raise NotImplementedError("Fixpipe with SetAtomicAdd: only fp32 L0C -> fp32 GM, row-major, NoQuant, "
                                      "no ReLU is modelled")

    def execute(self) -> None:
        if USE_READOUT_KERNEL and self._by_kernel():
            return
        index, values, target = self._placement()
        target[index] = values

    def _by_kernel(self) -> bool:
        """The plain read-out (one row-major ND matrix whose rows do not overlap, fp32 L0C kept or rounded to
        fp16/bf16, no ReLU) by the compiled loop, npusim/isa/round16.py; False (nothing written) for any other
        form, which the numpy form below runs. NOTE: for performance reasons: the attention kernels read every
        score and output tile out this way in full mode (benchmarks/pfa.py)."""
        p = self.params
        kind = _READOUT_KINDS.get(self.mode)
        if kind is None or self.src.dtype != np.float32 or p.reluEn or p.ndNum != 1 or self.config is not CFG_ROW_MAJOR \
                or p.dstStride < p.nSize or not (p.mSize and p.nSize):
            return False
        compiled.round16.nz_to_nd(_data(self.src).view(np.uint32), p.srcStride * L0C_C0,
                         _data(self.dst).view(np.uint32 if kind == 0 else np.uint16), p.dstStride, p.mSize, p.nSize, kind)
        return True

    def _placement(self) -> tuple:
        """(destination, converted values) of the read-out (docs/numerics_cube.md): ``(flat array of dst,
        element indices)`` in general; for one row-major ND matrix whose rows do not overlap, a strided
        (mSize, nSize) view of dst and Ellipsis, which costs no index arrays (NOTE: for performance reasons:
        the sparse backward's scatter issues one Fixpipe per selected block)."""
        p = self.params
        n1 = _ceil(p.nSize, L0C_C0)
        src = _data(self.src)
        if p.ndNum == 1 and self.config is CFG_ROW_MAJOR and p.dstStride >= p.nSize and p.mSize and p.nSize:
            step, rows = p.srcStride * L0C_C0, p.mSize * L0C_C0
            vals = np.concatenate([src[j * step:j * step + rows].reshape(p.mSize, L0C_C0) for j in range(n1)], axis=1)
            out = self._convert(vals[None, :, :p.nSize])[0]
            dst = _data(self.dst)
            if dst.size >= p.mSize * p.dstStride:
                view = dst[:p.mSize * p.dstStride].reshape(p.mSize, p.dstStride)[:, :p.nSize]
            else:
                view = np.lib.stride_tricks.as_strided(dst, (p.mSize, p.nSize), (p.dstStride * dst.itemsize,
                                                                                 dst.itemsize))
            return Ellipsis, out, view
        return self._placement_indexed(src, n1)

    def _placement_indexed(self, src, n1: int) -> tuple:
        p = self.params
        # one NZ matrix: block j (16 columns) starts at j * srcStride * 16 elements, rows of 16
        blk = (np.arange(p.ndNum, dtype=np.int64)[:, None, None, None] * (p.srcNdStride * 256)
               + np.arange(n1, dtype=np.int64)[None, :, None, None] * (p.srcStride * L0C_C0)
               + np.arange(p.mSize, dtype=np.int64)[None, None, :, None] * L0C_C0
               + np.arange(L0C_C0, dtype=np.int64)[None, None, None, :])
        vals = src[blk]  # (ndNum, n1, mSize, 16)
        vals = vals.transpose(0, 2, 1, 3).reshape(p.ndNum, p.mSize, n1 * L0C_C0)
        if self.config is CFG_ROW_MAJOR:
            vals = vals[:, :, :p.nSize]
        out = self._convert(vals)
        if self.config is CFG_ROW_MAJOR:
            idx = (np.arange(p.ndNum, dtype=np.int64)[:, None, None] * p.dstNdStride
                   + np.arange(p.mSize, dtype=np.int64)[None, :, None] * p.dstStride
                   + np.arange(p.nSize, dtype=np.int64)[None, None, :])
            return idx, out, _data(self.dst)
        pitch = p.dstStride * BLOCK // self.dst.dtype.itemsize
        blocks = out[0].reshape(p.mSize, n1, L0C_C0).transpose(1, 0, 2)
        idx = (np.arange(n1, dtype=np.int64)[:, None, None] * pitch
               + np.arange(p.mSize, dtype=np.int64)[None, :, None] * L0C_C0
               + np.arange(L0C_C0, dtype=np.int64)[None, None, :])
        return idx, blocks, _data(self.dst)

    def _convert(self, vals: np.ndarray) -> np.ndarray:
        """L0C values -> destination values: dequant / cast, then ReLU (docs/numerics_cube.md)."""
        mode = self.mode
        if mode in (_Q.DEQF16, _Q.VDEQF16):
            scale = self._scale()
            if mode is _Q.VDEQF16 and self.config is CFG_NZ:
                scale = np.pad(scale, (0, vals.shape[-1] - scale.size))
            with np.errstate(over="ignore", invalid="ignore"):
                vals = vals.astype(np.float32) * scale  # int32 -> fp32 (RNE), x fp32 scale (RNE)
        if self.params.reluEn:
            vals = np.where(vals <= 0, vals.dtype.type(0), vals)  # -0 -> +0, NaN kept
        if mode is _Q.NoQuant:
            return vals
        return cast(vals, "bf16" if mode is _Q.F322BF16 else "fp16")

    def reads(self):
        p = self.params
        n = (_ceil(p.nSize, L0C_C0) - 1) * p.srcStride * L0C_C0 + _ceil(p.mSize, L0C_C0) * 256
        return ((_BK_L0C, self.src.addr, n * self.src.dtype.itemsize),)
