"""Data movement: DataCopy, DataCopyPad (GM <-> UB/L1), LoadData (L1 -> L0A/L0B), L0C -> UB (200x).

Contents: the parameter structs (Ascend C names and fields: :class:`DataCopyParams`,
:class:`Nd2NzParams`, :class:`DataCopyExtParams`, :class:`DataCopyPadExtParams`,
:class:`LoadData2DParams`, :class:`DataCopyCO12DstParams`), the instructions :class:`DataCopy`, :class:`DataCopyPad`,
:class:`LoadData`, and the transfer helpers cube.py's Fixpipe shares. The structs are mutable, so
kernels may fill them field by field as Ascend C kernels do. (Fixpipe, the 220x L0C read-out, lives
with Mmad in cube.py; the combined 200x core reads L0C out with ``DataCopy(ub, l0c, DataCopyCO12DstParams)``
on the vector pipe, below.)

Semantics (layouts, padding) are defined in docs/numerics_cube.md. Costs:
``ChipSpec.path_rate`` / ``path_latency`` of the instruction's data path via ``CoreUnit.transfer``;
GM transfers book the chip's shared HBM/L2 bandwidth (launch.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from npusim.dtypes import cast
from npusim.errors import NpusimError
from npusim.memory.gm import GlobalTensor
from npusim.memory.local import LocalTensor
from npusim.types import BufferKind, Pipe
# NOTE: enum members bound once, for performance reasons: on Python 3.11 reading an Enum class attribute
# costs ~0.4 us (EnumType.__getattr__), and these are read per instruction (benchmarks/sim_speed.py)
_BK_L0C = BufferKind.L0C
_BK_L1 = BufferKind.L1
_BK_UB = BufferKind.UB
_P_MTE2 = Pipe.MTE2
_P_MTE3 = Pipe.MTE3
_P_V = Pipe.V

__all__ = ["DataCopy", "DataCopyParams", "Nd2NzParams", "DataCopyCO12DstParams", "DataCopyPad", "DataCopyExtParams",
           "DataCopyPadExtParams", "DataCopyPadParams", "LoadData", "LoadData2DParams"]

BLOCK = 32  # bytes per DataCopy block unit and per C0 (hardware.md §3, §4)
FRACTAL_BYTES = 512  # one L0A/L0B fractal (hardware.md §3, §5)

L0C_C0 = 16  # L0C fractals are 16 x 16 elements (hardware.md §3)
_MTE1, _MTE2, _MTE3 = int(Pipe.MTE1), int(Pipe.MTE2), int(Pipe.MTE3)
_LOAD_PATHS = {BufferKind.UB: "gm_to_ub", BufferKind.L1: "gm_to_l1"}
_STORE_PATHS = {BufferKind.UB: "ub_to_gm", BufferKind.L1: "l1_to_gm"}


# -- parameter structs ----------------------------------------------------------------------------
@dataclass(slots=True)
class DataCopyParams:
    """Ascend C DataCopyParams: *blockCount* blocks of *blockLen* x 32 B, gaps in 32 B units."""

    blockCount: int = 1
    blockLen: int = 0
    srcStride: int = 0
    dstStride: int = 0


@dataclass(slots=True)
class Nd2NzParams:
    """Ascend C Nd2NzParams for DataCopy GM -> L1/UB with ND -> NZ conversion.

    Units: ``srcNdMatrixStride``, ``srcDValue`` and ``dstNzMatrixStride`` in elements;
    ``dstNzC0Stride`` and ``dstNzNStride`` in 32-byte C0 blocks.
    """

    ndNum: int = 1
    nValue: int = 0
    dValue: int = 0
    srcNdMatrixStride: int = 0
    srcDValue: int = 0
    dstNzC0Stride: int = 0
    dstNzNStride: int = 1
    dstNzMatrixStride: int = 0


@dataclass(slots=True)
class DataCopyExtParams:
    """Ascend C DataCopyExtParams for DataCopyPad: *blockLen* in bytes; GM-side stride in bytes,
    UB-side stride in 32-byte blocks (both tail-to-head gaps)."""

    blockCount: int = 1
    blockLen: int = 0
    srcStride: int = 0
    dstStride: int = 0
    rsv: int = 0


@dataclass(slots=True)
class DataCopyPadExtParams:
    """Ascend C DataCopyPadExtParams: left/right padding (elements) and the value written when isPad."""

    isPad: bool = False
    leftPadding: int = 0
    rightPadding: int = 0
    paddingValue: float = 0


#: The older DataCopyPadParams struct has the same fields.
DataCopyPadParams = DataCopyPadExtParams


@dataclass(slots=True)
class LoadData2DParams:
    """Ascend C LoadData2DParams: fractal index, repeats, strides in 512-byte fractals."""

    startIndex: int = 0
    repeatTimes: int = 0
    srcStride: int = 0
    sid: int = 0
    dstGap: int = 0
    ifTranspose: bool = False
    addrMode: int = 0



@dataclass(slots=True)
class DataCopyCO12DstParams:
    """L0C -> UB read-out of a combined (200x) core: ``mSize x nSize`` of an NZ matrix to ND rows.

    ``srcStride``: distance between adjacent 16-column blocks of the L0C matrix, in rows of 16 elements
    (normally ``ceil16(mSize)``), as FixpipeParamsV220. ``dstStride``: UB row pitch in elements (a
    whole number of 32-byte blocks). Only ``nz2ndEn=True``, no ReLU and no channel split are modelled;
    the conversion is the destination dtype's (``quantPre`` NoQuant or F322F16), see DataCopy.
    """

    nSize: int = 0
    mSize: int = 0
    dstStride: int = 0
    srcStride: int = 0
    quantPre: object = None
    reluPre: int = 0
    channelSplit: bool = False
    nz2ndEn: bool = True


# -- shared helpers -------------------------------------------------------------------------------
def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _unit_of(*tensors):
    for t in tensors:
        if isinstance(t, LocalTensor):
            return t.core
    raise NpusimError("a data movement needs at least one LocalTensor operand")


def _check(t, count: int) -> None:
    """Bounds check of *count* elements from *t*'s start (NpuBufferError names buffer, offset, size)."""
    if isinstance(t, LocalTensor):
        t.check(count)
    else:
        t.check(0, count)


def _data(t) -> np.ndarray:
    """The typed numpy view from *t*'s start to the end of its allocation (full mode)."""
    return t.span() if isinstance(t, LocalTensor) else t.flat()


def _send(unit, name: str, pipe: Pipe, path: str, nbytes: int, gm=None, gm_byte: int = 0,
          gm_write: bool = False, depth: int = 3) -> float:
    """Schedule a transfer; return its start cycle. *depth*: frames from unit.transfer up to the kernel
    line (transfer -> _send -> instruction __init__ -> kernel line = 3, one more per helper in between)."""
    return unit.transfer(unit.name_ids[name], int(pipe), path, nbytes, gm, gm_byte, gm_write, depth=depth)


def _check_atomic_store(what: str, unit, dst, src) -> None:
    """SetAtomicAdd on an MTE3 store: fp32 UB -> fp32 GM, added in simulated-time order like an atomic Fixpipe
    (launch.Launch.atomic_add); the only atomic store form modelled."""
    if unit.atomic != np.float32 or dst.dtype != np.float32 or src.dtype != np.float32:
        raise NotImplementedError(f"{what} to GM under SetAtomicAdd: only fp32 UB -> fp32 GM with SetAtomicAdd<float> "
                                  "is modelled")


def _add_atomically(unit, ins, dst, start: float) -> None:
    """Hand an MTE3 store's fp32 adds (*ins*._atomic_placement) to the launch, committed at *start* in
    simulated-time order with the other atomic adds (launch.Launch.atomic_add)."""
    index, values = ins._atomic_placement()
    unit.launch.atomic_add(unit, dst.gm.name, _data(dst), index, values, start)


def _nonneg(what: str, **values) -> None:
    for key, v in values.items():
        if v < 0:
            raise NpusimError(f"{what}: {key} must be >= 0, got {v}")


def _rows_view(data: np.ndarray, count: int, pitch: int, length: int) -> np.ndarray:
    """(count, length) view of *data* (1-D) with rows *pitch* elements apart (the caller checked the bounds): a
    reshape when *data* holds count whole pitches, else a strided view (:func:`_strided`). Rows overlap when
    pitch < length: a view to read only."""
    if pitch == length:
        return data[:count * length].reshape(count, length)
    if pitch > length and data.size >= count * pitch:
        return data[:count * pitch].reshape(count, pitch)[:, :length]
    return _strided(data, (count, length), (pitch * data.itemsize, data.itemsize), writeable=pitch >= length)


def _strided(data: np.ndarray, shape: tuple, strides: tuple, writeable: bool = True) -> np.ndarray:
    """as_strided(data, shape, strides) for a view inside *data* (the caller checked the bounds).

    NOTE: the ndarray constructor on *data*'s memory where *data* is contiguous (about 1 us; numpy's
    as_strided about 10 us), for performance reasons: the cube's LoadData and the attention kernels'
    DataCopyPad take these views in their inner loops (benchmarks/pfa.py)."""
    if data.flags.c_contiguous:
        view = np.ndarray(shape, data.dtype, data, 0, strides)
        if not writeable:
            view.flags.writeable = False
        return view
    return as_strided(data, shape, strides, writeable=writeable)


def _byte_index(count: int, length: int, pitch: int) -> np.ndarray:
    """Byte offsets of *count* blocks of *length* bytes whose starts are *pitch* bytes apart."""
    starts = np.arange(count, dtype=np.int64) * pitch
    return (starts[:, None] + np.arange(length, dtype=np.int64)[None, :]).reshape(-1)


def _distinct(shape: tuple, strides: tuple, item: int) -> bool:
    """True when a view of *shape* with byte *strides* (elements of *item* bytes, the last axis
    contiguous) never reaches one element twice: each axis, by growing stride, steps past the extent of
    the axes below it (a sufficient test)."""
    axes = sorted((st, n) for n, st in zip(shape, strides) if n > 1)
    extent = item
    for st, n in axes:
        if st < extent:
            return False
        extent = st * (n - 1) + extent
    return True


# -- DataCopy --------------------------------------------------------------------------------------
class DataCopy:
    """Ascend C ``DataCopy(dst, src, count | DataCopyParams | Nd2NzParams)``.

    Paths: GM -> L1/UB (MTE2), L1/UB -> GM (MTE3), UB -> UB (V), and on a combined (200x) core
    L0C -> UB (V, path ``l0c_to_ub``) with DataCopyCO12DstParams. *count* copies that many elements;
    DataCopyParams copies ``blockCount`` blocks of ``blockLen`` x 32 B with 32-byte gaps;
    Nd2NzParams (GM -> L1/UB) converts ND to NZ, zero-padding each row to a whole C0 block.
    DataCopyCO12DstParams (L0C -> UB) reads an ``mSize x nSize`` NZ matrix (column block j at
    ``j * srcStride * 16`` elements, row m at ``m * 16`` within it) and writes ND rows ``dstStride``
    elements apart, converting each value as Fixpipe does (docs/numerics_cube.md): fp32 -> fp16 by
    round-to-nearest-even (overflow to inf), fp32 -> fp32 and int32 -> int32 unchanged. Padding rows
    and columns of L0C are not read; UB bytes outside the rows keep their contents.
    Raises NpuBufferError for an access outside either operand, NotImplementedError for other paths.
    """

    __slots__ = ("dst", "src", "params", "count")
    name = "DataCopy"

    def __init__(self, dst, src, count_or_params):
        self.dst, self.src = dst, src
        if count_or_params.__class__ is int and self._fast(dst, src, count_or_params):
            return
        if isinstance(count_or_params, DataCopyCO12DstParams):
            self.params, self.count = count_or_params, None
            self._l0c_to_ub()
            return
        if isinstance(count_or_params, Nd2NzParams):
            self.params, self.count = count_or_params, None
            self._nd2nz()
            return
        if isinstance(count_or_params, DataCopyParams):
            self.params, self.count = count_or_params, None
        else:
            self.params, self.count = None, int(count_or_params)
        # NOTE: each operand's kind tested once (not in _unit_of / _check again), for performance reasons
        # (benchmarks/sim_speed.py): DataCopy is most of a streaming kernel's instructions
        src_local, dst_local = isinstance(src, LocalTensor), isinstance(dst, LocalTensor)
        if not (src_local or dst_local):
            raise NpusimError("a data movement needs at least one LocalTensor operand")
        unit = dst.core if dst_local else src.core
        itemsize = (src if src_local else dst).dtype.itemsize
        if self.params is None:
            nbytes = src_span = dst_span = self.count * itemsize
        else:
            p = self.params
            _nonneg("DataCopy", blockCount=p.blockCount, blockLen=p.blockLen, srcStride=p.srcStride,
                    dstStride=p.dstStride)
            nbytes = p.blockCount * p.blockLen * BLOCK
            gaps = max(p.blockCount - 1, 0) * BLOCK
            src_span, dst_span = nbytes + gaps * p.srcStride, nbytes + gaps * p.dstStride
        if src_local:
            src.check(src_span // src.dtype.itemsize)
        else:
            src.check(0, src_span // src.dtype.itemsize)
        if dst_local:
            dst.check(dst_span // dst.dtype.itemsize)
        else:
            dst.check(0, dst_span // dst.dtype.itemsize)
        if isinstance(src, GlobalTensor):
            if not isinstance(dst, LocalTensor):
                raise NotImplementedError("DataCopy GM -> GM is not an AI Core instruction")
            path = _LOAD_PATHS.get(dst.buffer.kind)
            if path is None:
                raise NotImplementedError(f"DataCopy GM -> {dst.buffer.kind} is not modelled")
            if unit.full:
                self.execute()
            _send(unit, self.name, _P_MTE2, path, nbytes, src.gm, src.byte_offset, False)
        elif isinstance(dst, GlobalTensor):
            path = _STORE_PATHS.get(src.buffer.kind)
            if path is None:
                raise NotImplementedError(f"DataCopy {src.buffer.kind} -> GM is not modelled (L0C leaves by Fixpipe)")
            if unit.atomic is not None:
                _check_atomic_store("DataCopy", unit, dst, src)
            elif unit.full:
                self.execute()
            start = _send(unit, self.name, _P_MTE3, path, nbytes, dst.gm, dst.byte_offset, True)
            if unit.atomic is not None and unit.full and nbytes:
                _add_atomically(unit, self, dst, start)
        else:
            if src.buffer.kind is not _BK_UB or dst.buffer.kind is not _BK_UB:
                raise NotImplementedError(f"DataCopy {src.buffer.kind} -> {dst.buffer.kind} is not modelled "
                                          "(use LoadData for L1 -> L0A/L0B)")
            if unit.full:
                self.execute()
            # UB -> UB copies run on the vector pipe at one 256 B repeat per cycle (hardware.md §4)
            unit.issue(unit.name_ids[self.name], int(_P_V), -(-nbytes // 256),
                       unit.chip.vector_latency_cycles, nbytes, 0, depth=2)

    def _fast(self, dst, src, n: int) -> bool:
        """The count form GM <-> UB/L1 without an atomic store, issued in one step; False for any other
        form, which __init__ then handles (and raises for). NOTE: the checks of __init__ inlined and
        _send skipped, for performance reasons (benchmarks/sim_speed.py): most of a streaming kernel's
        instructions are these copies. The same checks, errors, cost and trace row as __init__'s."""
        if src.__class__ is GlobalTensor and dst.__class__ is LocalTensor:
            path = _LOAD_PATHS.get(dst.buffer.kind)
            if path is None:
                return False
            local, gm, pipe, write = dst, src, _MTE2, False
        elif dst.__class__ is GlobalTensor and src.__class__ is LocalTensor:
            path = _STORE_PATHS.get(src.buffer.kind)
            if path is None or src.core.atomic is not None:
                return False
            local, gm, pipe, write = src, dst, _MTE3, True
        else:
            return False
        self.params, self.count = None, n
        item = local.dtype.itemsize
        nbytes = n * item
        if write:
            if n < 0 or local.addr + nbytes > local.limit:
                local.check(n)
            gm.check(0, nbytes // gm.dtype.itemsize)
        else:
            gm.check(0, nbytes // gm.dtype.itemsize)
            if n < 0 or local.addr + nbytes > local.limit:
                local.check(n)
        unit = local.core
        if unit.full:
            self.execute()
        unit.transfer(unit.name_ids[self.name], pipe, path, nbytes, gm.gm, gm.offset * gm.dtype.itemsize, write,
                      depth=3)  # 3: transfer <- _fast <- __init__ <- the kernel line
        return True

    def _atomic_placement(self) -> tuple:
        """(destination element index, copied source values) of a store under SetAtomicAdd (fp32 both sides)."""
        src = _data(self.src)
        if self.params is None:
            return slice(0, self.count), src[:self.count].copy()
        p = self.params
        blen = p.blockLen * BLOCK // 4
        dst_index = _byte_index(p.blockCount, blen, blen + p.dstStride * BLOCK // 4)
        return dst_index, src[_byte_index(p.blockCount, blen, blen + p.srcStride * BLOCK // 4)]

    def execute(self) -> None:
        src, dst = _data(self.src).view(np.uint8), _data(self.dst).view(np.uint8)
        if self.params is None:
            n = self.count * self.src.dtype.itemsize
            dst[:n] = src[:n]
        else:
            p = self.params
            blen = p.blockLen * BLOCK
            dst[_byte_index(p.blockCount, blen, blen + p.dstStride * BLOCK)] = \
                src[_byte_index(p.blockCount, blen, blen + p.srcStride * BLOCK)]

    # L0C -> UB (combined core) -------------------------------------------------------------------
    _CO1_CONVERSIONS = {("float32", "float32"), ("float32", "float16"), ("int32", "int32")}

    def _l0c_to_ub(self) -> None:
        src, dst, p = self.src, self.dst, self.params
        if not (isinstance(src, LocalTensor) and src.buffer.kind is _BK_L0C
                and isinstance(dst, LocalTensor) and dst.buffer.kind is _BK_UB):
            raise NotImplementedError("DataCopy with DataCopyCO12DstParams is modelled for L0C -> UB only")
        if (src.dtype.name, dst.dtype.name) not in self._CO1_CONVERSIONS:
            raise NotImplementedError(f"DataCopy L0C -> UB {src.dtype.name} -> {dst.dtype.name} is not modelled")
        quant = getattr(p.quantPre, "name", p.quantPre)
        if quant not in (None, "NoQuant", "F322F16"):
            raise NotImplementedError(f"DataCopy L0C -> UB quantPre {quant} is not modelled (NoQuant, F322F16)")
        if not p.nz2ndEn or p.reluPre or p.channelSplit:
            raise NotImplementedError("DataCopy L0C -> UB: only nz2ndEn=True without ReLU or channel split "
                                      "is modelled")
        _nonneg("DataCopy L0C -> UB", nSize=p.nSize, mSize=p.mSize, srcStride=p.srcStride, dstStride=p.dstStride)
        if (p.dstStride * dst.dtype.itemsize) % BLOCK:
            raise NotImplementedError(f"DataCopy L0C -> UB: dstStride {p.dstStride} elements is not a whole "
                                      "number of 32-byte blocks")
        nbytes = p.mSize * p.nSize * src.dtype.itemsize  # bytes read from L0C (the path's rate is of L0C reads)
        unit = src.core
        if nbytes:
            if p.mSize > p.srcStride and _ceil(p.nSize, L0C_C0) > 1:  # column blocks would overlap
                raise NpusimError(f"DataCopy L0C -> UB: srcStride {p.srcStride} is shorter than mSize {p.mSize}")
            src.check((_ceil(p.nSize, L0C_C0) - 1) * p.srcStride * L0C_C0 + p.mSize * L0C_C0)
            _check(dst, (p.mSize - 1) * p.dstStride + p.nSize)
            if unit.full:
                self._execute_l0c_to_ub()
        # the 200x L0C read-out runs on the vector unit (hardware.md §5 data paths)
        _send(unit, self.name, _P_V, "l0c_to_ub", nbytes, depth=4)

    def _execute_l0c_to_ub(self) -> None:
        p = self.params
        m = np.arange(p.mSize, dtype=np.int64)[:, None]
        n = np.arange(p.nSize, dtype=np.int64)[None, :]
        vals = _data(self.src)[(n // L0C_C0) * (p.srcStride * L0C_C0) + m * L0C_C0 + n % L0C_C0]
        if self.dst.dtype != vals.dtype:
            vals = cast(vals, "fp16")  # fp32 -> fp16, round-to-nearest-even as Fixpipe F322F16
        _data(self.dst)[m * p.dstStride + n] = vals

    # ND -> NZ ------------------------------------------------------------------------------------
    def _nd2nz(self) -> None:
        src, dst, p = self.src, self.dst, self.params
        if not (isinstance(src, GlobalTensor) and isinstance(dst, LocalTensor)):
            raise NotImplementedError("DataCopy with Nd2NzParams is modelled for GM -> L1/UB only")
        path = _LOAD_PATHS.get(dst.buffer.kind)
        if path is None:
            raise NotImplementedError(f"DataCopy Nd2Nz GM -> {dst.buffer.kind} is not modelled")
        item = dst.dtype.itemsize
        if item not in (1, 2, 4) or src.dtype.itemsize != item:
            raise NotImplementedError(f"DataCopy Nd2Nz of {src.dtype.name} -> {dst.dtype.name} is not modelled "
                                      "(b8/b16/b32 of one size)")
        _nonneg("DataCopy Nd2Nz", ndNum=p.ndNum, nValue=p.nValue, dValue=p.dValue,
                srcNdMatrixStride=p.srcNdMatrixStride, srcDValue=p.srcDValue, dstNzC0Stride=p.dstNzC0Stride,
                dstNzNStride=p.dstNzNStride, dstNzMatrixStride=p.dstNzMatrixStride)
        c0 = BLOCK // item
        unit = dst.core
        nbytes = p.ndNum * p.nValue * p.dValue * item
        if nbytes:
            _check(src, (p.ndNum - 1) * p.srcNdMatrixStride + (p.nValue - 1) * p.srcDValue + p.dValue)
            _check(dst, (p.ndNum - 1) * p.dstNzMatrixStride + (p.nValue - 1) * p.dstNzNStride * c0
                   + (_ceil(p.dValue, c0) - 1) * p.dstNzC0Stride * c0 + c0)
            if unit.full:
                self._execute_nd2nz(c0)
        _send(unit, self.name, _P_MTE2, path, nbytes, src.gm, src.byte_offset, False, depth=4)

    def _execute_nd2nz(self, c0: int) -> None:
        p = self.params
        if p.ndNum == 1 and p.dstNzNStride == 1 and p.dValue % c0 == 0 and p.dstNzC0Stride >= p.nValue:
            # NOTE: one ND matrix into whole NZ column blocks as two strided views (no index arrays), for
            # performance reasons: the cube side of the attention backward loads a tile per piece
            # (benchmarks/sfag.py); the general path below gives the same bytes
            blocks = p.dValue // c0
            src = _rows_view(_data(self.src), p.nValue, p.srcDValue, p.dValue)
            dst = _rows_view(_data(self.dst), blocks, p.dstNzC0Stride * c0, p.nValue * c0)
            dst.reshape(blocks, p.nValue, c0)[...] = src.reshape(p.nValue, blocks, c0).transpose(1, 0, 2)
            return
        item = BLOCK // c0
        nb, tail = divmod(p.dValue, c0)
        shape = (p.ndNum, p.nValue, nb + (tail > 0), c0)
        dst_strides = (p.dstNzMatrixStride * item, p.dstNzNStride * BLOCK, p.dstNzC0Stride * BLOCK, item)
        if _distinct(shape, dst_strides, item):
            # NOTE: strided views of both operands instead of element index arrays, for performance reasons
            # (the cube side's K/V/P copies, benchmarks/pfa.py); _nd2nz checked the bounds
            dst = np.ndarray(shape, self.dst.dtype, self.dst.buffer.data, self.dst.addr, dst_strides)
            src = _data(self.src)
            src_strides = (p.srcNdMatrixStride * item, p.srcDValue * item, BLOCK, item)
            if nb:
                dst[:, :, :nb] = np.ndarray(shape[:2] + (nb, c0), src.dtype, src, 0, src_strides)
            if tail:
                dst[:, :, nb, :tail] = np.ndarray(shape[:2] + (tail,), src.dtype, src, nb * BLOCK, src_strides[:2] + (item,))
                dst[:, :, nb, tail:] = 0  # the row tail up to 32 B is zero-filled (copy_gm_to_cbuf_multi_nd2nz)
            return
        i = np.arange(p.ndNum, dtype=np.int64)[:, None, None]
        j = np.arange(p.nValue, dtype=np.int64)[None, :, None]
        c = np.arange(_ceil(p.dValue, c0) * c0, dtype=np.int64)[None, None, :]
        dst_idx = i * p.dstNzMatrixStride + j * (p.dstNzNStride * c0) + (c // c0) * (p.dstNzC0Stride * c0) + c % c0
        dst = _data(self.dst)
        dst[dst_idx[..., :p.dValue]] = _data(self.src)[i * p.srcNdMatrixStride + j * p.srcDValue
                                                       + c[..., :p.dValue]]
        dst[dst_idx[..., p.dValue:]] = 0  # the row tail up to 32 B is zero-filled (copy_gm_to_cbuf_multi_nd2nz)


# -- DataCopyPad -----------------------------------------------------------------------------------
class DataCopyPad:
    """Ascend C ``DataCopyPad(dst, src, DataCopyExtParams[, DataCopyPadExtParams])`` between GM and UB.

    GM -> UB (MTE2): block b of ``blockLen`` bytes lands at the b-th 32-byte-aligned UB slot, after
    ``leftPadding`` elements; with ``isPad`` the left/right padding and the tail up to 32 B hold
    ``paddingValue``, otherwise those bytes keep their old contents. UB -> GM (MTE3): the inverse,
    reading 32-byte-aligned UB slots and writing ``blockLen`` bytes per block.
    Raises NpuBufferError for out-of-bounds access, NotImplementedError for other paths or lengths
    that are not whole elements.
    """

    __slots__ = ("dst", "src", "params", "pad", "foot", "left", "item")
    name = "DataCopyPad"

    def __init__(self, dst, src, params, pad_params: DataCopyPadExtParams | None = None):
        if not isinstance(params, (DataCopyExtParams, DataCopyParams)):
            raise NotImplementedError(f"DataCopyPad with {type(params).__name__} is not modelled")
        self.dst, self.src, self.params = dst, src, params
        self.pad = pad_params or DataCopyPadExtParams()
        p, pad = params, self.pad
        item = self.item = (src if isinstance(src, LocalTensor) else dst).dtype.itemsize
        _nonneg("DataCopyPad", blockCount=p.blockCount, blockLen=p.blockLen, srcStride=p.srcStride,
                dstStride=p.dstStride, leftPadding=pad.leftPadding, rightPadding=pad.rightPadding)
        load = isinstance(src, GlobalTensor) and isinstance(dst, LocalTensor) and dst.buffer.kind is _BK_UB
        store = isinstance(dst, GlobalTensor) and isinstance(src, LocalTensor) and src.buffer.kind is _BK_UB
        if not (load or store):
            raise NotImplementedError("DataCopyPad is modelled for GM -> UB and UB -> GM only")
        gm_stride = p.srcStride if load else p.dstStride
        if p.blockLen % item or gm_stride % item:
            raise NotImplementedError(f"DataCopyPad: blockLen {p.blockLen} and GM stride {gm_stride} bytes must be "
                                      f"whole {item}-byte elements")
        unit = _unit_of(dst, src)
        atomic = store and unit.atomic is not None
        if atomic:
            _check_atomic_store("DataCopyPad", unit, dst, src)
        if store and (pad.leftPadding or pad.rightPadding or pad.isPad):
            raise NotImplementedError("DataCopyPad UB -> GM with padding is not modelled")
        self.left = pad.leftPadding * item
        self.foot = _ceil(self.left + p.blockLen + pad.rightPadding * item, BLOCK) * BLOCK
        nbytes = p.blockCount * p.blockLen
        if p.blockCount and p.blockLen:
            ub_pitch = self.foot + (p.dstStride if load else p.srcStride) * BLOCK
            gm_span = (p.blockCount - 1) * (p.blockLen + gm_stride) + p.blockLen
            ub_span = (p.blockCount - 1) * ub_pitch + self.foot
            _check(src, (gm_span if load else ub_span) // item)
            _check(dst, (ub_span if load else gm_span) // item)
            if unit.full and not atomic:
                self.execute()
        if load:
            _send(unit, self.name, _P_MTE2, "gm_to_ub", nbytes, src.gm, src.byte_offset, False)
        else:
            start = _send(unit, self.name, _P_MTE3, "ub_to_gm", nbytes, dst.gm, dst.byte_offset, True)
            if atomic and unit.full and nbytes:
                _add_atomically(unit, self, dst, start)

    def _atomic_placement(self) -> tuple:
        """(destination element index, copied source values) of a UB -> GM store under SetAtomicAdd (fp32)."""
        p, item = self.params, self.item
        length, pitch = p.blockLen // item, (p.blockLen + p.dstStride) // item
        ub_pitch = (self.foot + p.srcStride * BLOCK) // item
        values = _rows_view(_data(self.src), p.blockCount, ub_pitch, length).reshape(-1).copy()
        return _byte_index(p.blockCount, length, pitch), values

    def execute(self) -> None:
        p, pad, item = self.params, self.pad, self.item
        load = isinstance(self.src, GlobalTensor)
        gm_stride = p.srcStride if load else p.dstStride
        ub_pitch = self.foot + (p.dstStride if load else p.srcStride) * BLOCK
        src, dst = _data(self.src).view(np.uint8), _data(self.dst).view(np.uint8)
        # NOTE: the blocks as strided (count, blockLen) views (no byte index arrays), for performance reasons: the
        # sparse attention backward gathers its selected key rows this way (benchmarks/sfag.py)
        gm_rows = (src if load else dst)
        ub_rows = (dst if load else src)[self.left:]
        gm_view = _rows_view(gm_rows, p.blockCount, p.blockLen + gm_stride, p.blockLen)
        ub_view = _rows_view(ub_rows, p.blockCount, ub_pitch, p.blockLen)
        if not load:
            gm_view[...] = ub_view
            return
        ub_view[...] = gm_view
        if pad.isPad:  # element positions of the left padding and of the tail up to the 32-byte slot end
            left, end, foot = self.left // item, (self.left + p.blockLen) // item, self.foot // item
            pos = np.concatenate([np.arange(left), np.arange(end, foot)]).astype(np.int64)
            idx = np.arange(p.blockCount, dtype=np.int64)[:, None] * (ub_pitch // item) + pos[None, :]
            _data(self.dst)[idx] = np.array(pad.paddingValue).astype(self.dst.dtype)


# -- LoadData --------------------------------------------------------------------------------------
def _fractal_rows(data: np.ndarray, start: int, limit: int, n: int, stride: int) -> np.ndarray:
    """(n, FRACTAL_BYTES) view of the bytes *data* [start + i * stride * FRACTAL_BYTES, ...): a reshape where the
    allocation (which ends at *limit*) covers n whole strides, else (stride 0 repeats a fractal) a strided view."""
    if stride == 1:
        return data[start:start + n * FRACTAL_BYTES].reshape(n, FRACTAL_BYTES)
    pitch = stride * FRACTAL_BYTES
    if stride > 1 and start + n * pitch <= limit:
        return data[start:start + n * pitch].reshape(n, pitch)[:, :FRACTAL_BYTES]
    return _strided(data[start:], (n, FRACTAL_BYTES), (pitch, 1))


#: LoadData's (destination, source) views by geometry: the cube's inner loops load the same few L1 -> L0 slots
#: over and over (NOTE: built once per geometry, not per instruction, for performance reasons: benchmarks/pfa.py
#: issues 132,512 LoadData). The views keep their buffers' arrays alive (also listed in _LOAD_BASES), so an ``id``
#: in a key cannot be reused by another array while the entry exists; both tables are emptied when the arrays
#: they hold exceed _LOAD_BASES_MAX_BYTES (one PFA launch: 24 AICs' L1 + L0A + L0B, about 15 MB) or the entries
#: _LOAD_VIEWS_MAX.
_LOAD_VIEWS: dict = {}
_LOAD_BASES: dict = {}
_LOAD_VIEWS_MAX = 1 << 14
_LOAD_BASES_MAX_BYTES = 64 << 20


def _load_views(src_data: np.ndarray, dst_data: np.ndarray, key: tuple) -> tuple:
    """(destination view, source view) of a LoadData (not the b8 transposing form) for _LOAD_VIEWS[*key*]:
    fractals as strided views of the two buffers' bytes (no byte index arrays, no as_strided where a reshape of
    the allocation gives the same view); __init__ checked the bounds."""
    _, start, limit, n, stride, _, dst_addr, dst_limit, gap, transpose = key
    data = _fractal_rows(src_data, start, limit, n, stride)
    out = _fractal_rows(dst_data, dst_addr, dst_limit, n, gap + 1)
    if transpose:  # 16 x 16 b16 fractals: swap row and column. NOTE: as uint16 elements, not byte pairs (a
        # 4-axis byte copy costs about 6 us a call, 3 axes of uint16 1 us), for performance reasons (benchmarks/pfa.py)
        out = out.view(np.uint16).reshape(n, 16, 16)
        data = data.view(np.uint16).reshape(n, 16, 16).transpose(0, 2, 1)
    new = [a for a in (src_data, dst_data) if id(a) not in _LOAD_BASES]
    if len(_LOAD_VIEWS) >= _LOAD_VIEWS_MAX or \
            sum(a.nbytes for a in _LOAD_BASES.values()) + sum(a.nbytes for a in new) > _LOAD_BASES_MAX_BYTES:
        _LOAD_VIEWS.clear()
        _LOAD_BASES.clear()
    _LOAD_BASES[id(src_data)], _LOAD_BASES[id(dst_data)] = src_data, dst_data
    views = _LOAD_VIEWS[key] = (out, data)
    return views


class LoadData:
    """Ascend C ``LoadData(dst L0A/L0B, src L1, LoadData2DParams)`` on MTE1.

    Copies ``repeatTimes`` 512-byte fractals: source fractal ``startIndex + i * srcStride``, destination
    slot ``i * (dstGap + 1)``. ``ifTranspose`` on b16 transposes each 16 x 16 fractal. ``ifTranspose`` on b8
    models the 220x int8 transposing load (LoadDataWithTranspose): each repeat reads two consecutive
    fractals (a 32 x 32 byte block stored as two 16 x 32 fractals), writes its transpose as two fractals,
    and destination slots are ``2 + dstGap`` fractals apart (docs/numerics_cube.md).
    Raises NpuBufferError for out-of-bounds access, NotImplementedError for other variants.
    """

    __slots__ = ("dst", "src", "params", "nbytes")
    name = "LoadData"
    pipe = Pipe.MTE1
    _PATHS = {BufferKind.L0A: "l1_to_l0a", BufferKind.L0B: "l1_to_l0b"}

    def __init__(self, dst, src, params):
        if not isinstance(params, LoadData2DParams):
            raise NotImplementedError(f"LoadData with {type(params).__name__} is not modelled (LoadData2DParams only)")
        if not (isinstance(src, LocalTensor) and src.buffer.kind is _BK_L1):
            where = src.buffer.kind if isinstance(src, LocalTensor) else "GM"
            raise NotImplementedError(f"LoadData from {where} is not modelled (L1 source only)")
        path = self._PATHS.get(dst.buffer.kind) if isinstance(dst, LocalTensor) else None
        if path is None:
            raise NotImplementedError("LoadData is modelled into L0A or L0B only")
        p = params
        # NOTE: a plain test first, for speed (LoadData runs in the cube's inner loops); _nonneg names the field
        if p.startIndex < 0 or p.repeatTimes < 0 or p.srcStride < 0 or p.dstGap < 0:
            _nonneg("LoadData", startIndex=p.startIndex, repeatTimes=p.repeatTimes, srcStride=p.srcStride,
                    dstGap=p.dstGap)
        if p.ifTranspose and src.dtype.itemsize not in (1, 2):
            raise NotImplementedError(f"LoadData ifTranspose of {src.dtype.name} is not modelled (b8/b16 only)")
        if p.addrMode:
            raise NotImplementedError("LoadData addrMode=dec is not modelled")
        if dst.dtype.itemsize != src.dtype.itemsize:
            raise NotImplementedError(f"LoadData {src.dtype.name} -> {dst.dtype.name}: element sizes differ")
        self.dst, self.src, self.params = dst, src, params
        span = 2 if (p.ifTranspose and src.dtype.itemsize == 1) else 1  # fractals per repeat
        self.nbytes = p.repeatTimes * FRACTAL_BYTES * span
        unit = src.core
        if p.repeatTimes:
            per = FRACTAL_BYTES // src.dtype.itemsize
            src.check((p.startIndex + (p.repeatTimes - 1) * p.srcStride + span) * per)
            dst.check(((p.repeatTimes - 1) * (p.dstGap + span) + span) * per)
            if unit.full:
                self.execute()
        # NOTE: unit.transfer called here, not through _send, for performance reasons (one frame less: the
        # cube's inner loops issue a LoadData per tile, benchmarks/sim_speed.py); depth 2: __init__, kernel line
        unit.transfer(unit.name_ids[self.name], _MTE1, path, self.nbytes, depth=2)

    def execute(self) -> None:
        p = self.params
        if p.ifTranspose and self.src.dtype.itemsize == 1:
            block = 2 * FRACTAL_BYTES  # a 32 x 32 int8 block: two 16 x 32 fractals
            src_idx = _byte_index(p.repeatTimes, block, p.srcStride * FRACTAL_BYTES) + p.startIndex * FRACTAL_BYTES
            data = _data(self.src).view(np.uint8)[src_idx]
            data = data.reshape(p.repeatTimes, 32, 32).transpose(0, 2, 1).reshape(-1)
            _data(self.dst).view(np.uint8)[_byte_index(p.repeatTimes, block,
                                                       (p.dstGap + 2) * FRACTAL_BYTES)] = data
            return
        src, dst = self.src, self.dst
        key = (id(src.buffer.data), src.addr + p.startIndex * FRACTAL_BYTES, src.limit, p.repeatTimes, p.srcStride,
               id(dst.buffer.data), dst.addr, dst.limit, p.dstGap, bool(p.ifTranspose))
        views = _LOAD_VIEWS.get(key)
        if views is None:
            views = _load_views(src.buffer.data, dst.buffer.data, key)
        np.copyto(views[0], views[1])

    def reads(self):
        p = self.params
        return ((self.src.buffer.kind, self.src.addr + p.startIndex * FRACTAL_BYTES,
                 ((p.repeatTimes - 1) * p.srcStride + 1) * FRACTAL_BYTES if p.repeatTimes else 0),)

    def writes(self):
        p = self.params
        return ((self.dst.buffer.kind, self.dst.addr,
                 ((p.repeatTimes - 1) * (p.dstGap + 1) + 1) * FRACTAL_BYTES if p.repeatTimes else 0),)
