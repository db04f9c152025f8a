"""Global memory: the tensors a kernel reads and writes in HBM, seen through L2.

:class:`GmBuffer` is one global allocation (an operator input/output or workspace): a flat numpy array
(full mode) or only a size and dtype (timing mode), plus which of its pages are resident in L2.
:class:`GlobalTensor` is Ascend C's ``GlobalTensor<T>``: a typed window of a GmBuffer.

L2 model (documented in docs/architecture.md): a GM page (L2_PAGE_BYTES) is resident in L2 once any
core has read or written it; reads of resident pages are served at L2 bandwidth, others at HBM
bandwidth. While the bytes touched chip-wide exceed the chip's L2 size, only the fraction
l2_bytes / touched_bytes of resident-page reads counts as hits (a capacity estimate, not an LRU).
"""
from __future__ import annotations

import numpy as np

from npusim.errors import NpuBufferError

#: Granularity of the L2 residency model. ASSUMPTION: 32 KiB pages keep the bookkeeping cheap;
#: L2 lines are 512 B on C220 (hardware.md §6c), far below any transfer the kernels make.
L2_PAGE_BYTES = 32 * 1024


def page_union(start: np.ndarray, end: np.ndarray) -> int:
    """Bytes of the distinct L2 pages that the byte ranges [start, end) cover (what GmBuffer.touch marks resident for
    them; estimate modes count a launch's L2 working set with it)."""
    if start.size == 0:
        return 0
    p0, p1 = start // L2_PAGE_BYTES, (end - 1) // L2_PAGE_BYTES + 1
    order = np.argsort(p0, kind="stable")
    p0, p1 = p0[order], np.maximum.accumulate(p1[order])
    new = np.concatenate(([True], p0[1:] >= p1[:-1]))  # a range that starts after all earlier ones end
    seg_end = np.concatenate((p1[np.flatnonzero(new)[1:] - 1], p1[-1:]))
    return int((seg_end - p0[new]).sum()) * L2_PAGE_BYTES


class TensorSpec:
    """A tensor with a shape and dtype but no data: inputs for timing and estimate modes (API.md)."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"TensorSpec({self.shape}, {self.dtype.name})"


#: Buffers of more pages than this keep their residency in chunks of CHUNK_PAGES made on first use: the
#: terabyte workspaces of huge estimate-mode shapes (a byte-mode drop mask of N * S^2 bytes) would
#: otherwise need a bitmap of hundreds of MB per launch.
DENSE_PAGES = 1 << 20
CHUNK_PAGES = 1 << 12


def _pattern(first: int, n: int, fraction: float) -> np.ndarray:
    """Residency of pages first .. first + n - 1 when a *fraction* of all pages is resident, evenly spread."""
    if fraction <= 0.0 or fraction >= 1.0:
        return np.full(n, fraction >= 1.0)
    idx = np.arange(first, first + n)
    return np.floor((idx + 1) * fraction) > np.floor(idx * fraction)


class GmBuffer:
    """One global-memory allocation shared by all cores of a launch."""

    __slots__ = ("name", "data", "dtype", "size", "npages", "_resident", "_pages", "_chunks", "_fill", "_l2",
                 "_counted")

    def __init__(self, name: str, array, l2_model: "L2Model"):
        self.name = name
        self.dtype = np.dtype(array.dtype)
        if isinstance(array, np.ndarray):
            if not array.flags.c_contiguous:
                raise NpuBufferError(f"GM tensor {name} must be C-contiguous")
            self.data = array.reshape(-1)  # a view: writes land in the caller's array
        else:
            self.data = None
        self.size = int(np.prod(array.shape, dtype=np.int64))
        self.npages = max(-(-self.size * self.dtype.itemsize // L2_PAGE_BYTES), 1)
        self._fill = 0.0  # resident fraction of chunks not made yet
        self._chunks = {} if self.npages > DENSE_PAGES else None
        self._resident = np.zeros(self.npages, bool) if self._chunks is None else None
        # NOTE: the dense pages also as a memoryview, whose items are Python bools: touch() tests and sets one
        # page several times cheaper than by indexing the array, for performance reasons (benchmarks/sim_speed.py)
        self._pages = memoryview(self._resident) if self._resident is not None else None
        self._l2 = l2_model
        self._counted = None  # page ranges whose new pages count more than once in L2's touched bytes (count_pages)

    @property
    def resident(self) -> np.ndarray:
        """One bool per page: resident in L2 (a chunked buffer turns dense here)."""
        if self._resident is None:
            dense = _pattern(0, self.npages, self._fill)
            for c, chunk in self._chunks.items():
                dense[c * CHUNK_PAGES:c * CHUNK_PAGES + chunk.size] = chunk
            self._resident, self._pages, self._chunks = dense, memoryview(dense), None
        return self._resident

    def warm(self, fraction: float = 1.0) -> None:
        """Start with *fraction* of the pages resident, evenly spread (a launch's steady state, where only
        some reads are a page's first)."""
        if self._chunks is None:
            self._resident[:] = _pattern(0, self.npages, fraction)
        else:
            self._fill = fraction
            self._chunks.clear()

    def count_pages(self, ranges) -> None:
        """Count each page of the byte ranges *ranges* ((start, end, factor), ...) *factor* times in L2's touched
        bytes when it is first touched (residency and hits as ever). Why: an estimate sample runs k of a launch's n
        busy cores, and a page each core keeps to itself (its section buffers) stands for the n / k cores' pages
        of its kind that the launch touches at about the same time, so the sample's touched bytes follow the
        launch's across the L2 size. The ranges must not overlap (a page in two ranges adds both extra counts)."""
        self._counted = [(start // L2_PAGE_BYTES, -(-end // L2_PAGE_BYTES), float(factor))
                         for start, end, factor in ranges if end > start] or None

    def _new_bytes(self, p0: int, fresh: np.ndarray | None) -> float:
        """The touched bytes that the new pages among p0, p0 + 1, ... (*fresh*: which are new; None: p0 alone) add,
        each counted as count_pages set."""
        n = 1 if fresh is None else int(np.count_nonzero(fresh))
        extra = 0.0
        for lo, hi, factor in self._counted:
            if fresh is None:
                inside = int(lo <= p0 < hi)
            else:
                a, b = max(lo - p0, 0), min(hi - p0, fresh.size)
                inside = int(np.count_nonzero(fresh[a:b])) if b > a else 0
            extra += (factor - 1.0) * inside
        return (n + extra) * L2_PAGE_BYTES

    def touch(self, byte_start: int, nbytes: int) -> float:
        """Mark [byte_start, +nbytes) resident in L2; return the fraction that was already resident."""
        p0 = byte_start // L2_PAGE_BYTES
        p1 = (byte_start + nbytes - 1) // L2_PAGE_BYTES + 1
        pages = self._pages
        if pages is not None and p1 - p0 == 1 and pages[p0]:
            # NOTE: one resident page (most transfers: pages are 32 KiB) returns at once: hit / n is 1.0, and
            # 1.0 times the capacity scale below is the scale itself, for performance reasons (benchmarks/sim_speed.py)
            return self._l2.scale
        n = p1 - p0
        new = None  # the touched bytes of the new pages where count_pages set ranges
        if pages is not None and n == 1:  # one page not resident yet: set without a slice, as above
            hit = 0
            pages[p0] = True
            if self._counted is not None:
                new = self._new_bytes(p0, None)
        elif self._chunks is None:
            pages = self._resident[p0:p1]
            # NOTE: a Python int, so the cycle arithmetic downstream stays in Python floats (the same IEEE
            # doubles as numpy's, several times faster to add and compare), for performance reasons
            hit = int(np.count_nonzero(pages))
            if hit < n:
                if self._counted is not None:
                    new = self._new_bytes(p0, ~pages)
                pages[:] = True
        else:
            hit, new = self._mark_chunks(p0, p1)
        l2 = self._l2
        if hit < n:
            l2.set_touched(l2.touched_bytes + ((n - hit) * L2_PAGE_BYTES if new is None else new))
        return hit / n * l2.scale  # (a scale of 1.0 leaves hit / n as it is)

    def _mark_chunks(self, p0: int, p1: int) -> tuple[int, float | None]:
        """Mark pages [p0, p1) of a chunked buffer resident; return how many already were and, where count_pages
        set ranges, the touched bytes the new ones add (else None)."""
        hit, new = 0, None if self._counted is None else 0.0
        for c in range(p0 // CHUNK_PAGES, (p1 - 1) // CHUNK_PAGES + 1):
            chunk = self._chunks.get(c)
            if chunk is None:
                first = c * CHUNK_PAGES
                chunk = self._chunks[c] = _pattern(first, min(CHUNK_PAGES, self.npages - first), self._fill)
            lo = max(p0 - c * CHUNK_PAGES, 0)
            pages = chunk[lo:p1 - c * CHUNK_PAGES]
            hit += int(np.count_nonzero(pages))
            if new is not None:
                new += self._new_bytes(c * CHUNK_PAGES + lo, ~pages)
            pages[:] = True
        return hit, new


class L2Model:
    """Chip-wide L2 capacity bookkeeping for the residency model above: the bytes of the pages touched so far
    and, kept with them, the capacity scale of hits (:meth:`hit_scale`; read at every GM transfer, changed
    only when new pages are touched)."""

    __slots__ = ("l2_bytes", "touched_bytes", "scale", "follow")

    def __init__(self, l2_bytes: int):
        self.l2_bytes = l2_bytes
        self.touched_bytes = 0
        self.scale = 1.0
        #: an estimate sample's (own, launch) touched bytes, two rising arrays: its hits are scaled as the launch's
        #: are where the sample's own touched bytes are (interpolated), not by its own; None: by its own
        self.follow = None

    def set_touched(self, nbytes: float) -> None:
        """*nbytes* of pages touched chip-wide so far (their scale follows): a whole number of pages' bytes, or a
        float where GmBuffer.count_pages counts pages a fractional number of times."""
        self.touched_bytes = nbytes
        self.scale = self.hit_scale()

    def hit_scale(self) -> float:
        """The fraction of a resident page's hits L2 keeps: 1 while the touched bytes fit in it, then its capacity
        over the touched bytes (older pages are evicted in proportion); with *follow*, of the launch's touched bytes
        where the sample's own are."""
        touched = self.touched_bytes
        if self.follow is not None:
            touched = float(np.interp(touched, *self.follow))
        if touched <= self.l2_bytes:
            return 1.0
        return self.l2_bytes / touched


_new_global = object.__new__


def byte_address(g: "GlobalTensor", index: int = 0) -> int:
    """Byte address in its GM buffer of element *index* of GlobalTensor *g*: ``g[index].byte_offset`` without
    building the view (a replayed step's key gives its bases' addresses so, npusim/replay.py)."""
    return (g.offset + index) * g.dtype.itemsize


class GlobalTensor:
    """Ascend C ``GlobalTensor<T>``: elements [offset, offset + size) of a GM buffer."""

    __slots__ = ("gm", "offset", "size", "dtype")

    def __init__(self, gm: GmBuffer | None = None, offset: int = 0, size: int | None = None, dtype=None):
        self.gm = gm
        self.offset = int(offset)
        self.dtype = np.dtype(dtype) if dtype is not None else (gm.dtype if gm is not None else None)
        if gm is not None and size is None:
            size = gm.size * gm.dtype.itemsize // self.dtype.itemsize - self.offset
        self.size = size

    def SetGlobalBuffer(self, gm: "GlobalTensor | GmBuffer", size: int | None = None) -> None:
        """Point this tensor at *gm* (a GmBuffer or another GlobalTensor, e.g. ``xGm[offset]``)."""
        if isinstance(gm, GlobalTensor):
            self.gm, self.offset, self.dtype = gm.gm, gm.offset, gm.dtype
            self.size = gm.size if size is None else int(size)
        else:
            self.gm, self.offset, self.dtype = gm, 0, gm.dtype
            self.size = gm.size if size is None else int(size)

    def __getitem__(self, offset) -> "GlobalTensor":
        if offset.__class__ is int:
            # NOTE: __init__ inlined (no int() / np.dtype() of what already is one), for performance
            # reasons: kernels index GM once per copy (benchmarks/sim_speed.py)
            t = _new_global(GlobalTensor)
            t.gm, t.offset, t.size, t.dtype = self.gm, self.offset + offset, self.size - offset, self.dtype
            return t
        if isinstance(offset, slice):
            start = offset.start or 0
            stop = self.size if offset.stop is None else offset.stop
            return GlobalTensor(self.gm, self.offset + start, stop - start, self.dtype)
        return GlobalTensor(self.gm, self.offset + int(offset), self.size - int(offset), self.dtype)

    def ReinterpretCast(self, dtype) -> "GlobalTensor":
        dtype = np.dtype(dtype)
        r = self.dtype.itemsize / dtype.itemsize
        return GlobalTensor(self.gm, int(self.offset * r), int(self.size * r), dtype)

    def GetSize(self) -> int:
        return self.size

    @property
    def byte_offset(self) -> int:
        return self.offset * self.dtype.itemsize

    def check(self, first: int, count: int) -> None:
        """Raise NpuBufferError if elements [first, first+count) leave the GM buffer."""
        start = self.byte_offset + first * self.dtype.itemsize
        end = start + count * self.dtype.itemsize
        total = self.gm.size * self.gm.dtype.itemsize
        if start < 0 or end > total:
            raise NpuBufferError(
                f"GM {self.gm.name}: access of bytes [{start}, {end}) outside the buffer of {total} bytes")

    def flat(self) -> np.ndarray:
        """The whole GM buffer as this tensor's dtype, starting at this tensor's offset (full mode)."""
        data = self.gm.data.view(np.uint8)[self.byte_offset:]
        n = data.size // self.dtype.itemsize
        return data[:n * self.dtype.itemsize].view(self.dtype)

    def __repr__(self) -> str:
        name = self.gm.name if self.gm is not None else None
        return f"GlobalTensor({name}, offset={self.offset}, size={self.size}, dtype={self.dtype})"
