"""What every vector instruction shares: repeat geometry, dtype sets, the cost model, the Ascend C
parameter structs, the repeat-form index arrays and the :class:`VectorInstruction` base.

Cost: ``occupancy = repeats x cycles per repeat`` of the instruction's cost class (``cost``: ONE_SRC,
TWO_SRC, ... below), ``latency`` = its inherent latency (:data:`LATENCY`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import ml_dtypes
import numpy as np

from npusim.errors import NpuBufferError
from npusim.isa.base import Instruction, region
from npusim.types import Pipe

_V = int(Pipe.V)
REPEAT_BYTES = 256  # one repeat = 8 blocks x 32 B (hardware.md §4)
BLOCK_BYTES = 32  # strides count 32-byte blocks (hardware.md §4)
MAX_REPEAT = 255  # repeatTimes <= 255 (hardware.md §4)

F16, F32, BF16 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)
I8, U8, I16, U16, I32, U32 = (np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32))
FLOATS = frozenset({F16, F32, BF16})
ARITH = FLOATS | {I16, I32}
BITS16, BITS32 = frozenset({F16, BF16, I16, U16}), frozenset({F32, I32, U32})
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}

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


# ---- parameter structs (Ascend C spellings) ---------------------------------------------
# Mutable like the Ascend C structs (and dma.py's); NOTE: not frozen, for performance reasons: kernels
# build one per instruction, and a frozen dataclass's __init__ costs about 5x (benchmarks/sim_speed.py).
# Instructions read the fields when they are issued, so changing a struct later affects later calls only.
@dataclass(slots=True)
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


@dataclass(slots=True)
class UnaryRepeatParams:
    """Ascend C UnaryRepeatParams: block strides and repeat strides, in 32-byte blocks."""

    dstBlkStride: int = 1
    srcBlkStride: int = 1
    dstRepStride: int = 8
    srcRepStride: int = 8

    def strides(self) -> tuple:
        return ((self.dstBlkStride, self.dstRepStride), (self.srcBlkStride, self.srcRepStride))


@dataclass(slots=True)
class CopyRepeatParams:
    """Ascend C CopyRepeatParams: block strides and repeat sizes, in 32-byte blocks."""

    dstStride: int = 1
    srcStride: int = 1
    dstRepeatSize: int = 8
    srcRepeatSize: int = 8

    def strides(self) -> tuple:
        return ((self.dstStride, self.dstRepeatSize), (self.srcStride, self.srcRepeatSize))


@dataclass(slots=True)
class BrcbRepeatParams:
    """Ascend C BrcbRepeatParams: where the 8 destination blocks of a repeat go (32-byte blocks)."""

    dstBlkStride: int = 1
    dstRepStride: int = 8


# ---- repeat-form index arrays ---------------------------------------------------------------------
def mask_key(mask):
    """A hashable form of an Ascend C mask: an int, or (low 64 bits, high 64 bits)."""
    if mask.__class__ is int:  # NOTE: the common case first, for performance reasons (benchmarks/sim_speed.py)
        return mask
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
    idx, top = lane_index(lanes(key, itemsize), itemsize, repeat_times, blk_stride, rep_stride)
    idx.flags.writeable = False
    return idx, top


@functools.lru_cache(maxsize=4096)
def repeat_layout(key, itemsize: int, repeat_times: int, blk_stride: int, rep_stride: int):
    """(shape, byte strides, distinct) of a strided view whose elements, in C order, are those of
    :func:`repeat_index` (*distinct*: no element twice, so the view can be written), or None where no
    such view exists (a bit mask; a count mask ending inside a block with a block stride other than 1).

    NOTE: full mode reads and writes repeat-form operands through these views instead of gathering and
    scattering by index arrays, for performance reasons (benchmarks/pfa.py: softmax row folds).
    """
    if key.__class__ is not int or not repeat_times:
        return None
    epb = BLOCK_BYTES // itemsize
    if key % epb == 0:
        shape, strides = (repeat_times, key // epb, epb), (rep_stride * BLOCK_BYTES, blk_stride * BLOCK_BYTES, itemsize)
    elif blk_stride == 1 or key < epb:
        shape, strides = (repeat_times, key), (rep_stride * BLOCK_BYTES, itemsize)
    else:
        return None
    idx = repeat_index(key, itemsize, repeat_times, blk_stride, rep_stride)[0]
    return shape, strides, bool(np.unique(idx).size == idx.size)


def strided_view(tensor, layout) -> np.ndarray:
    """The view of *tensor*'s buffer (full mode) with *layout*'s shape and byte strides from its start."""
    return np.ndarray(layout[0], tensor.dtype, tensor.buffer.data, tensor.addr, layout[1])


@functools.lru_cache(maxsize=4096)
def repeat_extent(key, itemsize: int, repeat_times: int, blk_stride: int, rep_stride: int) -> tuple[int, int]:
    """(1 + the largest element index, number of elements) of :func:`repeat_index`, raising as it does.

    NOTE: what the bounds checks and the cost need, cached as two ints, for performance reasons
    (benchmarks/sim_speed.py): instructions take only these when issued; full mode's execute() takes
    the index arrays from repeat_index.
    """
    idx, top = repeat_index(key, itemsize, repeat_times, blk_stride, rep_stride)
    return top, idx.size


@functools.lru_cache(maxsize=4096)
def repeat_operands(mask, itemsize: int, repeat_times, strides: tuple) -> tuple:
    """(repeatTimes as an int, mask key, :func:`repeat_extent` top of each operand, active elements
    per operand) of a repeat-form instruction whose operands have *itemsize*-byte elements and
    (block stride, repeat stride) pairs *strides*: its argument checks in one cached look-up.

    Raises (uncached) for an invalid argument; the caller then repeats the checks one by one, which
    raise with the instruction's name and in the order of its operands.
    """
    rep = check_repeat("repeat form", repeat_times)
    key = mask_key(mask)
    tops = []
    active = 0
    for blk, rs in strides:
        top, active = repeat_extent(key, itemsize, rep, int(blk), int(rs))
        tops.append(top)
    return rep, key, tuple(tops), active


def lane_index(ln: np.ndarray, itemsize: int, repeat_times: int, blk_stride: int, rep_stride: int) -> tuple:
    """(element indices of lanes *ln* of every repeat, repeat-major; 1 + the largest) for an operand of
    *itemsize*-byte elements: lane k sits in block k // (32 / itemsize), blocks *blk_stride* and
    repeats *rep_stride* 32-byte blocks apart."""
    epb = BLOCK_BYTES // itemsize
    per_lane = (ln // epb) * (blk_stride * epb) + ln % epb
    idx = (np.arange(repeat_times, dtype=np.int64)[:, None] * (rep_stride * epb) + per_lane[None, :]).reshape(-1)
    return idx, (int(idx.max()) + 1 if idx.size else 0)


def check_repeat(who: str, repeat_times) -> int:
    """*repeat_times* as an int; NpuBufferError naming *who* outside [0, MAX_REPEAT]."""
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
    latency: ClassVar[dict] = {}  # dtype -> inherent latency: this class's LATENCY entry, set per subclass

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.latency = LATENCY.get(cls.name) or {}  # NOTE: looked up once per class, not per instruction
        # NOTE: issue() computes the cost inline (no cycles() call) where the class keeps this cycles()
        cls._plain_cycles = cls.cycles is VectorInstruction.cycles

    def cycles(self, chip):
        lat = self.latency.get(self.dtype)
        return (self.repeats * self.cost * REPEAT_BYTES / chip.vector_bytes_per_cycle,
                chip.vector_latency_cycles if lat is None else lat)

    def issue(self, unit, depth: int = 2) -> None:
        """Instruction.issue with cycles() inlined (the same expressions, so the same floats), for
        performance reasons: vector instructions are most of an attention kernel's (benchmarks/sim_speed.py)."""
        if unit.full:
            self.execute()
        if self._plain_cycles:
            chip = unit.chip
            lat = self.latency.get(self.dtype)
            unit.issue(unit.name_ids[self.name], _V, self.repeats * self.cost * REPEAT_BYTES / chip.vector_bytes_per_cycle,
                       chip.vector_latency_cycles if lat is None else lat, self.nbytes, self.flops, depth + 1)
        else:
            occupancy, latency = self.cycles(unit.chip)
            unit.issue(unit.name_ids[self.name], _V, occupancy, latency, self.nbytes, self.flops, depth + 1)

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
        for t in tensors:
            if t.dtype != dt:
                raise self._unsupported(dt, t.dtype)
        if dt not in self.dtypes:
            raise self._unsupported(dt)
        return dt
