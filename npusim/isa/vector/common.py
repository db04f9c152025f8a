"""Vector instructions (PIPE_V): one class per Ascend C vector API, issued by constructing it.

Contents
- elementwise, two sources: Add Sub Mul Div Max Min; tensor-scalar: Adds Muls Maxs Mins;
  one source: Exp Ln Abs Sqrt; fills and copies: Duplicate, Copy;
- Cast (:class:`RoundMode`), Compare (:class:`CMPMODE`) -> bit mask, Select (:class:`SELMODE`);
- reductions: ReduceMax ReduceSum (count form), WholeReduceMax WholeReduceSum, BlockReduceMax
  BlockReduceSum; rearrangement: Brcb, Gather, Transpose;
- repeat parameters: BinaryRepeatParams, UnaryRepeatParams, BrcbRepeatParams, CopyRepeatParams.

Call forms of the elementwise ops (Ascend C "level 2" and "level 0"):
``Op(dst, src0, src1, count)`` on contiguous elements, and
``Op(dst, src0, src1, mask, repeatTimes, BinaryRepeatParams(...))``: repeats of 256 B; *mask* is an
int (the first *mask* elements of each repeat) or two uint64 (bit i -> element i); strides count
32-byte blocks; elements outside the mask are not written.

Semantics: docs/numerics.md "Vector instructions". Cost: ``occupancy = repeats x cycles per repeat``
of the instruction's cost class (``cost``: ONE_SRC, TWO_SRC, ... below), ``latency`` = its inherent
latency (:data:`LATENCY`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import ClassVar

import ml_dtypes
import numpy as np

from npusim.dtypes import cast as _dtype_cast
from npusim.errors import NpuBufferError, NpusimError
from npusim.isa.base import Instruction, region
from npusim.memory.local import LocalTensor
from npusim.types import Pipe

__all__ = [
    "Add", "Sub", "Mul", "Div", "Max", "Min", "Adds", "Muls", "Maxs", "Mins", "Exp", "Ln", "Abs", "Sqrt",
    "Duplicate", "Copy", "Cast", "Compare", "Select", "ReduceMax", "ReduceSum", "WholeReduceMax",
    "WholeReduceSum", "BlockReduceMax", "BlockReduceSum", "Brcb", "Gather", "Transpose",
    "BinaryRepeatParams", "UnaryRepeatParams", "BrcbRepeatParams", "CopyRepeatParams",
    "RoundMode", "CMPMODE", "SELMODE", "ReduceOrder",
]

REPEAT_BYTES = 256  # one repeat = 8 blocks x 32 B (hardware.md §4)
BLOCK_BYTES = 32  # strides count 32-byte blocks (hardware.md §4)
MAX_REPEAT = 255  # repeatTimes <= 255 (hardware.md §4)

F16, F32, BF16 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)
I8, U8, I16, U16, I32, U32 = (np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32))
FLOATS = frozenset({F16, F32, BF16})
ARITH = FLOATS | {I16, I32}
BITS16, BITS32 = frozenset({F16, BF16, I16, U16}), frozenset({F32, I32, U32})
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}
#: The NaN every arithmetic result that is NaN becomes (docs/numerics.md canonical quiet NaNs, sign +).
_QNAN = {F16: 0x7E00, BF16: 0x7FC0, F32: 0x7FC00000}

# ---- cost model --------------------------------------------------------------------------------
# Cycles per 256-byte repeat, by cost class, when the vector unit reads one 256 B source repeat per
# cycle (ChipSpec.vector_bytes_per_cycle = 256, hardware.md §4); cycles() scales by 256 / that field.
# Anchor: 910B3 silicon fits (fp32, dav-2201) in the pto-isa cost model, Crystal-wzy/pto-isa
# include/pto/costmodel/a2a3/cce_costmodel/cce_costmodel_vector_compute.hpp @051e62d5 ("910B3 标定"):
# vadd 2.11, vsub 2.11, vmax 2.01, vmul 2.3 cycles/repeat; vmuls 1, vmaxs 1.00, vrelu 1.00,
# vlrelu 1.03; vexp 2.00, vln 2.00; vdiv 4.03. The 2:1 ratio of two-source to tensor-scalar ops is
# peers §5e (msKPP: VMUL ~128 vs VMULS ~255 ops/cycle); pypto charges 2 per repeat (hardware.md §4).
# Per 256 B, fp16 and fp32 cost the same (hardware.md §4 lanes: 128 fp16 = 64 fp32 per cycle).
ONE_SRC = 1.0  # one 256 B source per repeat: measured vmuls/vmaxs/vrelu (above); vabs/vcopy/vector_dup slope 1
TWO_SRC = 2.0  # two sources: measured vadd/vsub/vmax/vmul (above); Compare, Select: ASSUMPTION same
TRANSCENDENTAL = 2.0  # measured vexp/vln 2.00 (above); vsqrt: pto-isa slope 2, not measured
DIV = 4.0  # measured vdiv 4.03 (above)
CAST = 2.0  # ASSUMPTION: pto-isa _EstimateVconvCycles slope 2, marked "temporary" there (not measured)
WHOLE_REDUCE = 2.0  # peers §5e VREDUCE ~128 ops/cycle = the VMUL rate -> 2; pto-isa vcmax slope 2
# BlockReduce: Ascend's reduce sample (asc-devkit examples/.../04_reduce/reduce README) states that
# BlockReduceSum is faster than WholeReduceSum on the same input, yet one WholeReduceSum beats two
# BlockReduceSums (x 1.125 the repeats): WHOLE/1.125 < b < WHOLE -> (1.78, 2); we take 1.875.
BLOCK_REDUCE = 1.875
# Gather: peers §5e VGATHER ~10.5 (16-bit) / ~21 (32-bit) ops/cycle, scaled to the VMUL anchor
# (~128 ops/cycle = TWO_SRC cycles per repeat).
GATHER_B16 = TWO_SRC * 128 / 10.5
GATHER_B32 = TWO_SRC * 128 / 21

# Inherent latency (cycles) by instruction and dtype: hardware.md §4, pypto S3 INHERENT_LATENCY_IN_OP
# (model values): ADD/SUB/ADDS 6 (int 4), MUL/MULS 7 (int 5), DIV 13, EXP 12, SQRT 13, MAX 4,
# ROWSUM fp16 23 / fp32 20, ROWMAX fp16 9 / fp32 8. Absent -> ChipSpec.vector_latency_cycles (the
# pypto default 10). MIN/MINS take MAX's 4 (same unit); BlockReduce takes the ROW* values.


def _lat(flt: float, integer: float | None = None) -> dict:
    out = {dt: float(flt) for dt in FLOATS}
    if integer is not None:
        out.update({dt: float(integer) for dt in (I16, I32)})
    return out


#: Inherent latency by instruction name and dtype (read-only).
LATENCY = MappingProxyType({
    "Add": _lat(6, 4), "Sub": _lat(6, 4), "Adds": _lat(6, 4), "Mul": _lat(7, 5), "Muls": _lat(7, 5),
    "Div": _lat(13), "Exp": _lat(12), "Sqrt": _lat(13), "Max": _lat(4, 4), "Min": _lat(4, 4),
    "Maxs": _lat(4, 4), "Mins": _lat(4, 4),
    "ReduceSum": {F16: 23.0, F32: 20.0}, "WholeReduceSum": {F16: 23.0, F32: 20.0},
    "BlockReduceSum": {F16: 23.0, F32: 20.0},
    "ReduceMax": {F16: 9.0, F32: 8.0}, "WholeReduceMax": {F16: 9.0, F32: 8.0},
    "BlockReduceMax": {F16: 9.0, F32: 8.0},
})


# ---- parameter structs and enums (Ascend C spellings) ---------------------------------------------
@dataclass(frozen=True)
class BinaryRepeatParams:
    """Ascend C BinaryRepeatParams: block strides and repeat strides, in 32-byte blocks."""

    dstBlkStride: int = 1
    src0BlkStride: int = 1
    src1BlkStride: int = 1
    dstRepStride: int = 8
    src0RepStride: int = 8
    src1RepStride: int = 8

    def strides(self) -> tuple:
        return ((self.dstBlkStride, self.dstRepStride), (self.src0BlkStride, self.src0RepStride),
                (self.src1BlkStride, self.src1RepStride))


@dataclass(frozen=True)
class UnaryRepeatParams:
    """Ascend C UnaryRepeatParams: block strides and repeat strides, in 32-byte blocks."""

    dstBlkStride: int = 1
    srcBlkStride: int = 1
    dstRepStride: int = 8
    srcRepStride: int = 8

    def strides(self) -> tuple:
        return ((self.dstBlkStride, self.dstRepStride), (self.srcBlkStride, self.srcRepStride))


@dataclass(frozen=True)
class CopyRepeatParams:
    """Ascend C CopyRepeatParams: block strides and repeat sizes, in 32-byte blocks."""

    dstStride: int = 1
    srcStride: int = 1
    dstRepeatSize: int = 8
    srcRepeatSize: int = 8

    def strides(self) -> tuple:
        return ((self.dstStride, self.dstRepeatSize), (self.srcStride, self.srcRepeatSize))


@dataclass(frozen=True)
class BrcbRepeatParams:
    """Ascend C BrcbRepeatParams: where the 8 destination blocks of a repeat go (32-byte blocks)."""

    dstBlkStride: int = 1
    dstRepStride: int = 8


class RoundMode(Enum):
    """Ascend C RoundMode; the value is the npusim.dtypes.cast mode name."""

    CAST_NONE = "none"
    CAST_RINT = "rint"
    CAST_FLOOR = "floor"
    CAST_CEIL = "ceil"
    CAST_ROUND = "round"
    CAST_TRUNC = "trunc"
    CAST_ODD = "odd"


class CMPMODE(Enum):
    """Ascend C CMPMODE of Compare."""

    LT = "lt"
    GT = "gt"
    EQ = "eq"
    LE = "le"
    GE = "ge"
    NE = "ne"


class SELMODE(Enum):
    """Ascend C SELMODE of Select."""

    VSEL_CMPMASK_SPR = 0  # the same first (256 / itemsize) mask bits for every repeat
    VSEL_TENSOR_SCALAR_MODE = 1  # src1 is a scalar; mask bits run on across repeats
    VSEL_TENSOR_TENSOR_MODE = 2  # src1 is a tensor; mask bits run on across repeats


class ReduceOrder(Enum):
    """Ascend C ReduceOrder: what WholeReduceMax writes per repeat."""

    ORDER_VALUE_INDEX = 0
    ORDER_INDEX_VALUE = 1
    ORDER_ONLY_VALUE = 2
    ORDER_ONLY_INDEX = 3


_CMP = {CMPMODE.LT: np.less, CMPMODE.GT: np.greater, CMPMODE.EQ: np.equal, CMPMODE.LE: np.less_equal,
        CMPMODE.GE: np.greater_equal, CMPMODE.NE: np.not_equal}


# ---- numerics (docs/numerics.md "Vector instructions") -------------------------------------------
def canonical_nan(r: np.ndarray) -> np.ndarray:
    """Rewrite every NaN of the float array *r* (in place) to the dtype's positive quiet NaN."""
    bits = _QNAN.get(r.dtype)
    if bits is not None:
        nan = np.isnan(r)
        if nan.any():
            r.view(_UINT[r.dtype.itemsize])[nan] = bits
    return r


def round_f64(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """float64 values rounded once (nearest-even, overflow -> inf) to float dtype *dt*; NaN canonical.

    numpy's float64 -> fp16/fp32 casts are correctly rounded; bf16 goes through npusim.dtypes.cast
    (numpy would round twice, via fp32).
    """
    if dt is BF16:
        r = _dtype_cast(x, BF16, "rint")
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            r = x.astype(dt)
    return canonical_nan(r)


def ieee(ufunc, dt: np.dtype, *args: np.ndarray) -> np.ndarray:
    """*ufunc* applied in dtype *dt*: IEEE, correctly rounded; ints wrap (two's complement).

    fp16/fp32: numpy's ufunc is the IEEE operation. bf16: the float32 result rounded once, which is
    exact for + - * (float32's 24 bits >= 2 x 8 + 2, so the double rounding is innocuous).
    """
    with np.errstate(all="ignore"):
        if dt is BF16:
            return canonical_nan(ufunc(*(a.astype(np.float32) for a in args)).astype(BF16))
        r = ufunc(*args)
    return canonical_nan(r) if dt in FLOATS else r


def via_f64(ufunc, dt: np.dtype, *args: np.ndarray) -> np.ndarray:
    """*ufunc* computed in float64 from the exact inputs, rounded once to *dt* (Exp, Ln, Sqrt, Div)."""
    with np.errstate(all="ignore"):
        r = ufunc(*(a.astype(np.float64) for a in args))
    return round_f64(r, dt)


def vmax(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Max as the vector unit's compare-select: a if a >= b else b (so max(-0, +0) = -0); NaN wins.

    NOTE: not np.maximum, whose choice between -0 and +0 depends on the SIMD path.
    """
    r = np.where(a >= b, a, b)
    if r.dtype in FLOATS:
        r[np.isnan(a) | np.isnan(b)] = np.nan
    return r


def vmin(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Min: a if a <= b else b; NaN wins."""
    r = np.where(a <= b, a, b)
    if r.dtype in FLOATS:
        r[np.isnan(a) | np.isnan(b)] = np.nan
    return r


def to_scalar(value, dt: np.dtype, who: str):
    """The scalar operand converted to the tensor dtype (floats: nearest-even once; ints: exact)."""
    if dt in FLOATS:
        return round_f64(np.array([float(value)]), dt)[0]
    iv = int(value)
    info = np.iinfo(dt)
    if iv != value or not info.min <= iv <= info.max:
        raise NpusimError(f"{who}: scalar {value!r} is not a {dt.name} value")
    return dt.type(iv)


def tree(vals: np.ndarray, op) -> np.ndarray:
    """Reduce the last axis (a power of two) by adjacent pairs: (0+1, 2+3, ...), then again."""
    with np.errstate(all="ignore"):
        while vals.shape[-1] > 1:
            vals = op(vals[..., 0::2], vals[..., 1::2])
    return vals[..., 0]


def _identity(op, dt):
    """The element a masked-out lane contributes to a reduction (x + -0 = x; max(x, -inf) = x)."""
    return dt.type(-0.0) if op is np.add else dt.type(-np.inf)


# ---- repeat-form index arrays ---------------------------------------------------------------------
def mask_key(mask):
    """A hashable form of an Ascend C mask: an int, or (low 64 bits, high 64 bits)."""
    if isinstance(mask, (list, tuple, np.ndarray)):
        words = [int(m) for m in mask]
        if len(words) == 1:
            words.append(0)
        if len(words) != 2:
            raise NpuBufferError(f"bit mask {mask!r} must be one or two uint64 words")
        return tuple(words)
    return int(mask)


@functools.lru_cache(maxsize=256)
def lanes(key, itemsize: int) -> np.ndarray:
    """Element positions (0 .. 256/itemsize - 1) a mask selects within a repeat.

    Raises NpuBufferError for a mask out of range (hardware.md §4: 16-bit <= 128, 32-bit <= 64 elements).
    """
    epr = REPEAT_BYTES // itemsize
    if isinstance(key, int):
        if not 1 <= key <= epr:
            raise NpuBufferError(f"mask {key} out of range [1, {epr}] for {itemsize}-byte elements")
        out = np.arange(key, dtype=np.int64)
    else:
        lo, hi = key
        if not (0 <= lo < 2**64 and 0 <= hi < 2**64) or lo == hi == 0 or (epr <= 64 and hi):
            raise NpuBufferError(f"bit mask [{lo:#x}, {hi:#x}] invalid for {itemsize}-byte elements "
                                 f"(words are uint64, not both 0; the high word must be 0 for {epr} lanes)")
        bits = [(lo >> i) & 1 for i in range(64)] + [(hi >> i) & 1 for i in range(64)]
        out = np.flatnonzero(np.array(bits[:epr], dtype=bool)).astype(np.int64)
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=1024)
def repeat_index(key, itemsize: int, repeat_times: int, blk_stride: int, rep_stride: int):
    """(element indices of the masked lanes of every repeat, in repeat-major order; 1 + the largest)."""
    if blk_stride < 0 or rep_stride < 0:
        raise NpuBufferError(f"strides must be >= 0 (block {blk_stride}, repeat {rep_stride})")
    ln = lanes(key, itemsize)
    epb = BLOCK_BYTES // itemsize
    per_lane = (ln // epb) * (blk_stride * epb) + ln % epb
    idx = (np.arange(repeat_times, dtype=np.int64)[:, None] * (rep_stride * epb) + per_lane[None, :]).reshape(-1)
    top = int(idx.max()) + 1 if idx.size else 0
    idx.flags.writeable = False
    return idx, top


def _check_repeat(who: str, repeat_times) -> int:
    r = int(repeat_times)
    if not 0 <= r <= MAX_REPEAT:
        raise NpuBufferError(f"{who}: repeatTimes {r} out of range [0, {MAX_REPEAT}]")
    return r


# ---- base classes ------------------------------------------------------------------------------------
class VectorInstruction(Instruction):
    """A PIPE_V instruction: dtype checks, the cost formula, the regions it touches.

    Subclasses set ``repeats`` (256 B repeats issued), ``dtype`` (selects the latency), ``nbytes``,
    ``flops``, ``spans_r`` and ``spans_w`` ((tensor, bytes) read and written) before calling ``issue``.
    """

    __slots__ = ("repeats", "dtype", "nbytes", "flops", "spans_r", "spans_w")
    pipe = Pipe.V
    cost: ClassVar[float] = ONE_SRC
    dtypes: ClassVar[frozenset] = FLOATS

    def cycles(self, chip):
        lat = LATENCY.get(self.name)
        lat = lat.get(self.dtype) if lat else None
        return (self.repeats * self.cost * REPEAT_BYTES / chip.vector_bytes_per_cycle,
                chip.vector_latency_cycles if lat is None else lat)

    def reads(self):
        return tuple(region(t, n) for t, n in self.spans_r)

    def writes(self):
        return tuple(region(t, n) for t, n in self.spans_w)

    def _unsupported(self, *dts) -> NotImplementedError:
        names = "/".join(np.dtype(d).name for d in dts)
        ok = ", ".join(sorted(np.dtype(d).name for d in self.dtypes))
        return NotImplementedError(f"{self.name}: dtype {names} is not supported (supported: {ok})")

    def _same_dtype(self, tensors) -> np.dtype:
        dt = tensors[0].dtype
        for t in tensors[1:]:
            if t.dtype != dt:
                raise self._unsupported(dt, t.dtype)
        if dt not in self.dtypes:
            raise self._unsupported(dt)
        return dt


class _Elementwise(VectorInstruction):
    """Shared count / repeat forms: the sources are tensors, the result goes to *dst*."""

    __slots__ = ("dst", "srcs", "scalar", "count", "index")
    params_type: ClassVar[type] = UnaryRepeatParams

    def _setup(self, dst, srcs: tuple, args: tuple) -> None:
        self.dst, self.srcs = dst, srcs
        tensors = (dst,) + srcs
        dt = self.dtype = self._same_dtype(tensors)
        item = dt.itemsize
        if len(args) == 1:  # count form
            n = int(args[0])
            for t in tensors:
                t.check(n)
            self.count, self.index = n, None
            self.repeats = -(-n * item // REPEAT_BYTES)
            active = n
            spans = [n * item] * len(tensors)
        elif len(args) == 3:  # repeat form
            mask, rep, params = args
            if not isinstance(params, self.params_type):
                raise TypeError(f"{self.name}: repeat form takes a {self.params_type.__name__}, "
                                f"not {type(params).__name__}")
            rep = _check_repeat(self.name, rep)
            key = mask_key(mask)
            self.index, spans = [], []
            for t, (blk, rs) in zip(tensors, params.strides()):
                idx, top = repeat_index(key, item, rep, int(blk), int(rs))
                t.check(top)
                self.index.append(idx)
                spans.append(top * item)
            self.count, self.repeats = None, rep
            active = self.index[0].size
        else:
            raise TypeError(f"{self.name} takes (dst, sources..., count) or (dst, sources..., mask, "
                            f"repeatTimes, {self.params_type.__name__})")
        self.nbytes = active * item * len(tensors)
        self.flops = active
        self.spans_w = ((dst, spans[0]),)
        self.spans_r = tuple(zip(srcs, spans[1:]))

    def execute(self) -> None:
        if self.index is None:
            n = self.count
            self.dst.view(n)[:] = self.compute(*(s.view(n) for s in self.srcs))
        else:
            ins = (s.span()[i] for s, i in zip(self.srcs, self.index[1:]))
            self.dst.span()[self.index[0]] = self.compute(*ins)

    def compute(self, *args: np.ndarray) -> np.ndarray:  # pragma: no cover - every op defines it
        raise NotImplementedError(self.name)


class _Binary(_Elementwise):
    """``Op(dst, src0, src1, count)`` or ``Op(dst, src0, src1, mask, repeatTimes, BinaryRepeatParams)``."""

    __slots__ = ()
    params_type = BinaryRepeatParams
    cost = TWO_SRC
    dtypes = ARITH

    def __init__(self, dst, src0, src1, *args):
        self.scalar = None
        self._setup(dst, (src0, src1), args)
        self.issue(dst.core)


class _Unary(_Elementwise):
    """``Op(dst, src, count)`` or ``Op(dst, src, mask, repeatTimes, UnaryRepeatParams)``."""

    __slots__ = ()
    cost = TRANSCENDENTAL

    def __init__(self, dst, src, *args):
        self.scalar = None
        self._setup(dst, (src,), args)
        self.issue(dst.core)


class _WithScalar(_Elementwise):
    """``Op(dst, src, scalar, count)`` or ``Op(dst, src, scalar, mask, repeatTimes, UnaryRepeatParams)``.

    The scalar is first converted to the tensor dtype (nearest-even for floats).
    """

    __slots__ = ()
    dtypes = ARITH

    def __init__(self, dst, src, scalar, *args):
        self.scalar = scalar
        self._setup(dst, (src,), args)
        self.issue(dst.core)


# ---- elementwise instructions -------------------------------------------------------------------------
class Add(_Binary):
    """dst = src0 + src1, IEEE in the dtype (overflow -> inf); int16/int32 wrap."""

    __slots__ = ()
    name = "Add"

    def compute(self, a, b):
        return ieee(np.add, self.dtype, a, b)


class Sub(_Binary):
    """dst = src0 - src1, IEEE in the dtype (overflow -> inf); int16/int32 wrap."""

    __slots__ = ()
    name = "Sub"

    def compute(self, a, b):
        return ieee(np.subtract, self.dtype, a, b)


class Mul(_Binary):
    """dst = src0 * src1, IEEE in the dtype (overflow -> inf); int16/int32 wrap."""

    __slots__ = ()
    name = "Mul"

    def compute(self, a, b):
        return ieee(np.multiply, self.dtype, a, b)


class Div(_Binary):
    """dst = src0 / src1, correctly rounded (float64 quotient rounded once); x/0 -> inf, 0/0 -> NaN."""

    __slots__ = ()
    name = "Div"
    cost = DIV
    dtypes = FLOATS

    def compute(self, a, b):
        return via_f64(np.divide, self.dtype, a, b)


class Max(_Binary):
    """dst = src0 if src0 >= src1 else src1; NaN if either is NaN."""

    __slots__ = ()
    name = "Max"

    def compute(self, a, b):
        return ieee(vmax, self.dtype, a, b)


class Min(_Binary):
    """dst = src0 if src0 <= src1 else src1; NaN if either is NaN."""

    __slots__ = ()
    name = "Min"

    def compute(self, a, b):
        return ieee(vmin, self.dtype, a, b)


class Adds(_WithScalar):
    """dst = src + scalar (scalar first rounded to the dtype), IEEE in the dtype."""

    __slots__ = ()
    name = "Adds"

    def compute(self, a):
        return ieee(np.add, self.dtype, a, np.asarray(to_scalar(self.scalar, self.dtype, self.name)))


class Muls(_WithScalar):
    """dst = src * scalar (scalar first rounded to the dtype), IEEE in the dtype."""

    __slots__ = ()
    name = "Muls"

    def compute(self, a):
        return ieee(np.multiply, self.dtype, a, np.asarray(to_scalar(self.scalar, self.dtype, self.name)))


class Maxs(_WithScalar):
    """dst = max(src, scalar) as :class:`Max` (scalar first converted to the dtype)."""

    __slots__ = ()
    name = "Maxs"

    def compute(self, a):
        s = np.full_like(a, to_scalar(self.scalar, self.dtype, self.name))
        return ieee(vmax, self.dtype, a, s)


class Mins(_WithScalar):
    """dst = min(src, scalar) as :class:`Min` (scalar first converted to the dtype)."""

    __slots__ = ()
    name = "Mins"

    def compute(self, a):
        s = np.full_like(a, to_scalar(self.scalar, self.dtype, self.name))
        return ieee(vmin, self.dtype, a, s)


class Exp(_Unary):
    """dst = e**src, float64 exp of the exact input rounded once to the dtype."""

    __slots__ = ()
    name = "Exp"

    def compute(self, a):
        return via_f64(np.exp, self.dtype, a)


class Ln(_Unary):
    """dst = ln(src), float64 log of the exact input rounded once; ln(0) = -inf, ln(x < 0) = NaN."""

    __slots__ = ()
    name = "Ln"

    def compute(self, a):
        return via_f64(np.log, self.dtype, a)


class Sqrt(_Unary):
    """dst = sqrt(src), correctly rounded (float64 root rounded once); sqrt(x < 0) = NaN, sqrt(-0) = -0."""

    __slots__ = ()
    name = "Sqrt"

    def compute(self, a):
        return via_f64(np.sqrt, self.dtype, a)


class Abs(_Unary):
    """dst = |src|: the sign bit cleared (exact; a NaN keeps its payload)."""

    __slots__ = ()
    name = "Abs"
    cost = ONE_SRC

    def compute(self, a):
        u = _UINT[a.dtype.itemsize]
        return (a.view(u) & u((1 << (8 * a.dtype.itemsize - 1)) - 1)).view(a.dtype)


class Copy(_Elementwise):
    """``Copy(dst, src, mask, repeatTimes, CopyRepeatParams)`` (UB -> UB, bits unchanged), or
    ``Copy(dst, src, count)``."""

    __slots__ = ()
    name = "Copy"
    params_type = CopyRepeatParams
    dtypes = BITS16 | BITS32

    def __init__(self, dst, src, *args):
        self.scalar = None
        self._setup(dst, (src,), args)
        self.flops = 0
        self.issue(dst.core)

    def compute(self, a):
        return a


class Duplicate(VectorInstruction):
    """``Duplicate(dst, scalar, count)`` or ``Duplicate(dst, scalar, mask, repeatTimes, dstBlockStride,
    dstRepeatStride)``: every (masked) element := scalar converted to the dtype."""

    __slots__ = ("dst", "scalar", "count", "index")
    name = "Duplicate"
    dtypes = BITS16 | BITS32

    def __init__(self, dst, scalar, *args):
        self.dst, self.scalar = dst, scalar
        dt = self.dtype = self._same_dtype((dst,))
        item = dt.itemsize
        if len(args) == 1:
            n = self.count = int(args[0])
            dst.check(n)
            self.index, self.repeats, span = None, -(-n * item // REPEAT_BYTES), n * item
        elif len(args) == 4:
            mask, rep, blk, rs = args
            rep = _check_repeat(self.name, rep)
            idx, top = repeat_index(mask_key(mask), item, rep, int(blk), int(rs))
            dst.check(top)
            self.index, self.count, self.repeats, span = idx, idx.size, rep, top * item
        else:
            raise TypeError("Duplicate takes (dst, scalar, count) or (dst, scalar, mask, repeatTimes, "
                            "dstBlockStride, dstRepeatStride)")
        self.nbytes, self.flops = self.count * item, 0
        self.spans_r, self.spans_w = (), ((dst, span),)
        self.issue(dst.core)

    def execute(self) -> None:
        v = to_scalar(self.scalar, self.dtype, self.name)
        if self.index is None:
            self.dst.view(self.count)[:] = v
        else:
            self.dst.span()[self.index] = v


# ---- Cast ------------------------------------------------------------------------------------------
_INT_MODES = frozenset({RoundMode.CAST_RINT, RoundMode.CAST_FLOOR, RoundMode.CAST_CEIL, RoundMode.CAST_ROUND,
                        RoundMode.CAST_TRUNC})
_NONE = frozenset({RoundMode.CAST_NONE})
#: (src, dst) -> round modes the Cast instruction accepts on A2/A3: Ascend C Cast tables 4/5
#: (cannmirror/asc-devkit docs/api/context/Cast.md @0a2e47c1), minus int4, int64 and the
#: SetDeqScale int32 -> half path. int32 -> int16 saturates (npusim.dtypes rule; the table is silent).
CAST_MODES = MappingProxyType({
    (F16, F32): _NONE, (BF16, F32): _NONE,
    (F32, F16): frozenset(RoundMode), (F32, BF16): _INT_MODES, (F32, F32): _INT_MODES,
    (F32, I32): _INT_MODES, (F32, I16): _INT_MODES,
    (F16, I32): _INT_MODES, (F16, I16): _INT_MODES, (F16, I8): _INT_MODES | _NONE, (F16, U8): _INT_MODES | _NONE,
    (BF16, I32): _INT_MODES,
    (I32, F32): _INT_MODES | _NONE, (I16, F16): _INT_MODES | _NONE, (I16, F32): _NONE,
    (I8, F16): _NONE, (U8, F16): _NONE, (I32, I16): _NONE,
})


class Cast(VectorInstruction):
    """``Cast(dst, src, round_mode, count)`` or ``Cast(dst, src, round_mode, mask, repeatTimes,
    UnaryRepeatParams)``: convert with an Ascend RoundMode, as npusim.dtypes.cast (docs/numerics.md
    "Conversions"; float targets in Inf/NaN mode, integer targets saturate, NaN -> 0).

    Repeats count 256 B of the wider of the two dtypes; the mask selects elements of that repeat.
    """

    __slots__ = ("dst", "src", "mode", "count", "index")
    name = "Cast"
    cost = CAST

    def __init__(self, dst, src, round_mode, *args):
        self.dst, self.src = dst, src
        mode = self.mode = round_mode if isinstance(round_mode, RoundMode) else RoundMode[str(round_mode)]
        ok = CAST_MODES.get((src.dtype, dst.dtype))
        if ok is None or mode not in ok:
            raise NotImplementedError(f"Cast: {src.dtype.name} -> {dst.dtype.name} with {mode.name} is not "
                                      "an A2/A3 Cast (see vector.CAST_MODES)")
        self.dtype = dst.dtype
        wide = max(src.dtype.itemsize, dst.dtype.itemsize)
        if len(args) == 1:
            n = self.count = int(args[0])
            src.check(n)
            dst.check(n)
            self.index, self.repeats = None, -(-n * wide // REPEAT_BYTES)
            spans = (n * src.dtype.itemsize, n * dst.dtype.itemsize)
        elif len(args) == 3:
            mask, rep, params = args
            rep = _check_repeat(self.name, rep)
            key = mask_key(mask)
            lane_idx = lanes(key, wide)
            self.index, spans = [], []
            for t, (blk, rs) in ((dst, params.strides()[0]), (src, params.strides()[1])):
                idx, top = _cast_index(lane_idx, t.dtype.itemsize, rep, int(blk), int(rs))
                t.check(top)
                self.index.append(idx)
                spans.append(top * t.dtype.itemsize)
            self.count, self.repeats = self.index[0].size, rep
            spans = spans[::-1]
        else:
            raise TypeError("Cast takes (dst, src, round_mode, count) or (dst, src, round_mode, mask, "
                            "repeatTimes, UnaryRepeatParams)")
        self.nbytes = self.count * (src.dtype.itemsize + dst.dtype.itemsize)
        self.flops = self.count
        self.spans_r, self.spans_w = ((src, spans[0]),), ((dst, spans[1]),)
        self.issue(dst.core)

    def execute(self) -> None:
        mode = self.mode.value
        if self.index is None:
            n = self.count
            self.dst.view(n)[:] = _dtype_cast(self.src.view(n), self.dst.dtype, mode)
        else:
            d, s = self.index
            self.dst.span()[d] = _dtype_cast(self.src.span()[s], self.dst.dtype, mode)


def _cast_index(lane_idx: np.ndarray, itemsize: int, rep: int, blk: int, rs: int) -> tuple:
    """Element indices for one Cast operand: lane k of a repeat sits in block k // (32 / itemsize)
    of that operand, so a narrow operand's repeat spans fewer bytes than 256."""
    epb = BLOCK_BYTES // itemsize
    per_lane = (lane_idx // epb) * (blk * epb) + lane_idx % epb
    idx = (np.arange(rep, dtype=np.int64)[:, None] * (rs * epb) + per_lane[None, :]).reshape(-1)
    return idx, (int(idx.max()) + 1 if idx.size else 0)


# ---- Compare / Select ----------------------------------------------------------------------------------
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
        self.dst.view(n)[:] = np.where(bits.astype(bool), self.src0.view(n), other)



# ---- reductions ----------------------------------------------------------------------------------------
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
            out.view(_UINT[dt.itemsize])[1] = idx


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


class _WholeReduce(VectorInstruction):
    """One result per repeat: a pairwise tree over the repeat's adjacent lanes, masked-out lanes
    contributing the identity (-0 for sums, -inf for max), each step rounded to the dtype."""

    __slots__ = ("dst", "src", "key", "rep", "dst_stride", "src_strides", "order")
    cost = WHOLE_REDUCE
    dtypes = frozenset({F16, F32})
    op: ClassVar = staticmethod(np.add)

    def __init__(self, dst, src, mask, repeatTimes, dstRepStride, srcBlkStride, srcRepStride,
                 order=ReduceOrder.ORDER_VALUE_INDEX):
        self.dst, self.src = dst, src
        self.order = ReduceOrder(order)
        if self.op is np.add and self.order is not ReduceOrder.ORDER_VALUE_INDEX:
            raise TypeError(f"{self.name} takes no order (it writes one sum per repeat)")
        dt = self.dtype = self._same_dtype((dst, src))
        item = dt.itemsize
        rep = self.rep = self.repeats = _check_repeat(self.name, repeatTimes)
        self.key = mask_key(mask)
        self.dst_stride, self.src_strides = int(dstRepStride), (int(srcBlkStride), int(srcRepStride))
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
        """(per-repeat result values, lane index of the first lane equal to it, or None)."""
        dt = self.dtype
        epr = REPEAT_BYTES // dt.itemsize
        ln = lanes(self.key, dt.itemsize)
        idx, _ = repeat_index(self.key, dt.itemsize, self.rep, *self.src_strides)
        vals = np.full((self.rep, epr), _identity(self.op, dt), dt)
        vals[:, ln] = self.src.span()[idx].reshape(self.rep, ln.size)
        res = canonical_nan(tree(vals, self.op))
        return vals, ln, res

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
        active = np.zeros(vals.shape[1], bool)
        active[ln] = True
        hit = ((vals == res[:, None]) | (np.isnan(vals) & np.isnan(res)[:, None])) & active
        first = hit.argmax(axis=1)
        slot = self._slot_elems()
        base = np.arange(self.rep) * self.dst_stride * slot
        span = self.dst.span()
        u = _UINT[self.dtype.itemsize]
        order = self.order
        if order is ReduceOrder.ORDER_ONLY_INDEX:
            span[:(base[-1] + slot)].view(np.uint32)[base // slot] = first
        elif order is ReduceOrder.ORDER_ONLY_VALUE:
            span[base] = res
        else:
            v, i = (0, 1) if order is ReduceOrder.ORDER_VALUE_INDEX else (1, 0)
            span[base + v] = res
            span.view(u)[base + i] = first


class _BlockReduce(VectorInstruction):
    """``Op(dst, src, repeatTimes, mask, dstRepStride, srcBlkStride, srcRepStride)``: one result per
    32 B block (8 per repeat) at dst[r * dstRepStride * 8 + block]; a pairwise tree over the block's
    adjacent lanes (masked-out lanes: identity). Blocks with no masked-in lane are not written."""

    __slots__ = ("dst", "src", "key", "rep", "dst_stride", "src_strides", "blocks")
    cost = BLOCK_REDUCE
    dtypes = frozenset({F16, F32})
    op: ClassVar = staticmethod(np.add)

    def __init__(self, dst, src, repeatTimes, mask, dstRepStride, srcBlkStride, srcRepStride):
        self.dst, self.src = dst, src
        dt = self.dtype = self._same_dtype((dst, src))
        item = dt.itemsize
        rep = self.rep = self.repeats = _check_repeat(self.name, repeatTimes)
        self.key = mask_key(mask)
        self.dst_stride, self.src_strides = int(dstRepStride), (int(srcBlkStride), int(srcRepStride))
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
        dt = self.dtype
        epr, epb = REPEAT_BYTES // dt.itemsize, BLOCK_BYTES // dt.itemsize
        ln = lanes(self.key, dt.itemsize)
        idx, _ = repeat_index(self.key, dt.itemsize, self.rep, *self.src_strides)
        vals = np.full((self.rep, epr), _identity(self.op, dt), dt)
        vals[:, ln] = self.src.span()[idx].reshape(self.rep, ln.size)
        res = canonical_nan(tree(vals.reshape(self.rep, 8, epb), self.op))
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


# ---- rearrangement ---------------------------------------------------------------------------------------
class Brcb(VectorInstruction):
    """``Brcb(dst, src, repeatTimes, BrcbRepeatParams)``: repeat r reads src[8r .. 8r+7]; element j
    fills the whole 32 B block at block offset r * dstRepStride + j * dstBlkStride of dst."""

    __slots__ = ("dst", "src", "index")
    name = "Brcb"
    dtypes = BITS16 | BITS32

    def __init__(self, dst, src, repeatTimes, params=BrcbRepeatParams()):
        self.dst, self.src = dst, src
        dt = self.dtype = self._same_dtype((dst, src))
        item = dt.itemsize
        rep = self.repeats = _check_repeat(self.name, repeatTimes)
        epb = BLOCK_BYTES // item
        blk, rs = int(params.dstBlkStride), int(params.dstRepStride)
        if blk < 0 or rs < 0:
            raise NpuBufferError(f"Brcb: strides must be >= 0 (block {blk}, repeat {rs})")
        starts = (np.arange(rep)[:, None] * rs + np.arange(8)[None, :] * blk).reshape(-1) * epb
        self.index = starts[:, None] + np.arange(epb)[None, :]
        top = int(self.index.max()) + 1 if rep else 0
        src.check(8 * rep)
        dst.check(top)
        self.nbytes, self.flops = 8 * rep * item + rep * REPEAT_BYTES, 0
        self.spans_r, self.spans_w = ((src, 8 * rep * item),), ((dst, top * item),)
        self.issue(dst.core)

    def execute(self) -> None:
        n = 8 * self.repeats
        if n:
            self.dst.span()[self.index] = self.src.view(n)[:, None]


class Gather(VectorInstruction):
    """``Gather(dst, src, srcOffsetLocal, srcBaseAddr, count)``: dst[i] = the element at byte
    srcBaseAddr + offset[i] from src's start (offsets: uint32 bytes). An offset that is misaligned or
    leaves src's allocation raises NpuBufferError (full mode)."""

    __slots__ = ("dst", "src", "offsets", "base", "count", "cost")  # cost: by element width
    name = "Gather"
    dtypes = BITS16 | BITS32

    def __init__(self, dst, src, srcOffsetLocal, srcBaseAddr, count):
        self.dst, self.src, self.offsets, self.base = dst, src, srcOffsetLocal, int(srcBaseAddr)
        dt = self.dtype = self._same_dtype((dst, src))
        if srcOffsetLocal.dtype != U32:
            raise NotImplementedError(f"Gather: offsets must be uint32, not {srcOffsetLocal.dtype.name}")
        n = self.count = int(count)
        dst.check(n)
        srcOffsetLocal.check(n)
        item = dt.itemsize
        self.cost = GATHER_B16 if item == 2 else GATHER_B32
        self.repeats = -(-n * item // REPEAT_BYTES)
        self.nbytes, self.flops = n * (2 * item + 4), 0
        self.spans_r = ((srcOffsetLocal, 4 * n), (src, src.limit - src.addr))
        self.spans_w = ((dst, n * item),)
        self.issue(dst.core)

    def execute(self) -> None:
        n, item = self.count, self.dtype.itemsize
        off = self.offsets.view(n).astype(np.int64) + self.base
        avail = self.src.limit - self.src.addr
        bad = (off % item != 0) | (off < 0) | (off + item > avail)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise NpuBufferError(f"Gather: element {i} reads byte {int(off[i])} of src, which is misaligned "
                                 f"for {item}-byte elements or outside its {avail}-byte allocation")
        self.dst.view(n)[:] = self.src.span()[off // item]


class Transpose(VectorInstruction):
    """``Transpose(dst, src)``: the 16 x 16 matrix of 2-byte elements at src, transposed into dst."""

    __slots__ = ("dst", "src")
    name = "Transpose"
    dtypes = BITS16

    def __init__(self, dst, src):
        self.dst, self.src = dst, src
        self.dtype = self._same_dtype((dst, src))
        dst.check(256)
        src.check(256)
        self.repeats = 2  # 512 B
        self.nbytes, self.flops = 1024, 0
        self.spans_r, self.spans_w = ((src, 512),), ((dst, 512),)
        self.issue(dst.core)

    def execute(self) -> None:
        t = self.src.view(256).reshape(16, 16).T.copy()
        self.dst.view(256).reshape(16, 16)[:] = t
