"""On-chip buffers (L1, L0A, L0B, L0C, UB, BT, FB) and the LocalTensor views kernels use.

A :class:`LocalBuffer` is one physical memory of one (sub-)core: a byte array of the chip's capacity
(full mode) or no data at all (timing mode), with a bump allocator that enforces capacity and alignment.
A :class:`LocalTensor` is a typed window [addr, addr + size*itemsize) of a buffer, as in Ascend C; slicing
it (``t[offset:]`` or ``t[offset]``) gives a tensor that starts ``offset`` elements later and must stay
inside the allocation it came from.
"""
from __future__ import annotations

import numpy as np

from npusim.errors import NpuBufferError
from npusim.types import BufferKind


class LocalBuffer:
    """One on-chip memory of a sub-core: capacity, alignment, allocations, and (full mode) its bytes."""

    __slots__ = ("kind", "capacity", "align", "data", "_top", "_peak", "owner")

    def __init__(self, kind: BufferKind, capacity: int, align: int, with_data: bool, owner: str):
        self.kind = kind
        self.capacity = int(capacity)
        self.align = int(align)
        self.owner = owner
        # NOTE: one zero-filled byte array per buffer; typed views are taken per tensor.
        self.data = np.zeros(self.capacity, np.uint8) if with_data else None
        self._top = 0
        self._peak = 0  # most bytes ever allocated at once (survives reset): the tiling's on-chip footprint

    def allocate(self, nbytes: int, what: str) -> int:
        """Reserve *nbytes* (rounded up to the alignment); return the byte address.

        Raises NpuBufferError naming buffer, offset and size when the buffer is full.
        """
        if nbytes <= 0:
            raise NpuBufferError(f"{self.owner} {self.kind}: allocation of {nbytes} bytes for {what} "
                                 "must be positive")
        size = -(-int(nbytes) // self.align) * self.align
        addr = self._top
        if addr + size > self.capacity:
            raise NpuBufferError(
                f"{self.owner} {self.kind}: allocating {size} bytes for {what} at offset {addr} exceeds "
                f"capacity {self.capacity} bytes ({addr + size - self.capacity} bytes over)")
        self._top = addr + size
        if self._top > self._peak:
            self._peak = self._top
        return addr

    @property
    def used(self) -> int:
        return self._top

    @property
    def peak(self) -> int:
        """The high-water mark of this buffer over the launch (bytes, alignment included)."""
        return self._peak

    def reset(self) -> None:
        """Free every allocation (TPipe.Reset / Destroy)."""
        self._top = 0


_new_tensor = object.__new__


class LocalTensor:
    """A typed view of a local buffer: Ascend C ``LocalTensor<T>``.

    *addr* and *limit* are byte addresses: the tensor covers [addr, addr + size*itemsize) and may be
    re-sliced only inside [base, limit), the allocation it came from.
    """

    __slots__ = ("core", "buffer", "addr", "dtype", "size", "base", "limit", "slot")

    def __init__(self, core, buffer: LocalBuffer, addr: int, dtype, size: int, base: int, limit: int,
                 slot=None):
        self.core = core
        self.buffer = buffer
        self.addr = addr
        self.dtype = np.dtype(dtype)
        self.size = size
        self.base = base
        self.limit = limit
        self.slot = slot
        if addr % 32 and buffer.kind is BufferKind.UB:
            raise NpuBufferError(f"{buffer.owner} UB: tensor address {addr} is not 32-byte aligned")

    # -- Ascend C surface -------------------------------------------------------------------
    def __getitem__(self, offset):
        """``t[offset]`` / ``t[offset:]``: the tensor starting *offset* elements later (Ascend C operator[])."""
        if offset.__class__ is slice:
            if offset.step is not None and offset.step != 1:
                raise NotImplementedError("LocalTensor slicing with a step is not an Ascend C operation")
            start = offset.start or 0
            count = (self.size if offset.stop is None else offset.stop) - start
        else:
            start = offset if offset.__class__ is int else int(offset)
            count = self.size - start
        dtype = self.dtype
        item = dtype.itemsize
        addr = self.addr + start * item
        limit = self.limit
        if start < 0 or count < 0 or addr + count * item > limit:
            raise NpuBufferError(
                f"{self.buffer.owner} {self.buffer.kind}: slice at element {start} (+{count}) leaves the "
                f"allocation [{self.base}, {self.limit}) bytes")
        buffer = self.buffer
        if addr % 32 and buffer.kind is BufferKind.UB:
            raise NpuBufferError(f"{buffer.owner} UB: tensor address {addr} is not 32-byte aligned")
        # NOTE: __init__ inlined without its dtype conversion (the dtype is already a numpy dtype), for
        # performance reasons: kernels slice tensors for nearly every instruction (benchmarks/sim_speed.py).
        t = _new_tensor(LocalTensor)
        t.core = self.core
        t.buffer = buffer
        t.addr = addr
        t.dtype = dtype
        t.size = count
        t.base = self.base
        t.limit = limit
        t.slot = self.slot
        return t

    def ReinterpretCast(self, dtype) -> "LocalTensor":
        """The same bytes seen as another dtype (Ascend C ReinterpretCast<T>)."""
        dtype = np.dtype(dtype)
        return LocalTensor(self.core, self.buffer, self.addr, dtype,
                           self.size * self.dtype.itemsize // dtype.itemsize, self.base, self.limit, self.slot)

    def GetSize(self) -> int:
        return self.size

    def GetValue(self, index: int):
        """Scalar read (full mode only): the element at *index*."""
        return self.view(index + 1)[index]

    def SetValue(self, index: int, value) -> None:
        """Scalar write (full mode only)."""
        self.view(index + 1)[index] = value

    # -- simulator surface ------------------------------------------------------------------
    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def check(self, count: int, dtype_bytes: int | None = None) -> None:
        """Raise NpuBufferError if *count* elements from this tensor's start leave its allocation."""
        end = self.addr + count * (dtype_bytes or self.dtype.itemsize)
        if end > self.limit or count < 0:
            raise NpuBufferError(
                f"{self.buffer.owner} {self.buffer.kind}: access of {count} elements "
                f"({count * self.dtype.itemsize} bytes) at offset {self.addr} leaves the allocation "
                f"[{self.base}, {self.limit})")

    def view(self, count: int | None = None) -> np.ndarray:
        """The numpy view of the first *count* elements (full mode). Bounds are checked."""
        count = self.size if count is None else count
        self.check(count)
        data = self.buffer.data
        if data is None:
            raise NpuBufferError("tensor data is not available in timing mode")
        return data[self.addr:self.addr + count * self.dtype.itemsize].view(self.dtype)

    def span(self) -> np.ndarray:
        """The numpy view of the whole allocation from this tensor's start (strided instructions)."""
        data = self.buffer.data
        n = (self.limit - self.addr) // self.dtype.itemsize
        return data[self.addr:self.addr + n * self.dtype.itemsize].view(self.dtype)

    def __repr__(self) -> str:
        return (f"LocalTensor({self.buffer.kind}, addr={self.addr}, dtype={self.dtype.name}, "
                f"size={self.size})")
