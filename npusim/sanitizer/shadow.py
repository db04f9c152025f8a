"""Shadow state of one memory (a local buffer of one stream, or one GM buffer): who accessed which bytes.

State is kept per distinct *range* (regions.py) rather than per byte: kernels touch the same few
hundred ranges again and again, so each range gets one :data:`cell` and learns once which other
ranges' cells share bytes with it; an access then only visits those cells. A cell holds the last
write(s) and the last read of each (stream, pipe). A write empties the cells of ranges it covers: any
later access that would race with the dropped one races with the write too (happens-before is
transitive), so nothing is lost.

Which ranges share bytes is a property of the ranges alone, so it lives in a :class:`Geometry` that the
shadows of every core's buffer of one kind share (every AIV's UB sees the same tiles): the overlap test
runs once per range and launch, not once per core.

:class:`InitMap` (GM) and :class:`InitBits` (local buffers) record which 32-byte blocks have been
written, for reads of uninitialised bytes.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from npusim.sanitizer.regions import covers, end_of, overlap

BLOCK = 32

#: A cell: [write record(s): one record or None in a local buffer, a tuple of records in GM (atomic adds
#: accumulate), read records ({stream * 8 + pipe: record} or None), its range, initialisation verdict
#: (UNJUDGED, TOUCHED: some block written, COMPLETE: every block, or reported), whether its write has
#: marked the written-blocks map, the cells of the ranges it covers (emptied on a write; its own first)]
WRITES, READS, RANGE, INIT, MARKED, COVERED = range(6)
UNJUDGED, TOUCHED, COMPLETE = 0, 1, 2


class Geometry:
    """Which ranges of one address space overlap or cover which, found through a bucket index and checked
    exactly; shared by the shadows of memories with the same layout (one buffer kind on every core)."""

    __slots__ = ("bucket", "buckets", "links", "masks")

    def __init__(self, bucket_bytes: int):
        self.bucket = bucket_bytes
        self.buckets: dict = {}
        #: range -> [(other range sharing a byte, range covers other, other covers range), ...]
        self.links: dict = {}
        self.masks: dict = {}  # (range, whole) -> block bit mask (InitBits)

    def register(self, r: tuple) -> list:
        """The links of a range seen for the first time (the ranges seen before it learn of it too)."""
        links = self.links
        b = self.bucket
        seen = set()
        mine = []
        for k in range(r[0] // b, (end_of(r) - 1) // b + 1):
            lst = self.buckets.get(k)
            if lst is None:
                lst = self.buckets[k] = []
            for c in lst:
                if c in seen:
                    continue
                seen.add(c)
                if overlap(c, r):
                    r_c, c_r = covers(r, c), covers(c, r)
                    mine.append((c, r_c, c_r))
                    links[c].append((r, c_r, r_c))
            lst.append(r)
        links[r] = mine
        return mine


class Shadow:
    """Accesses of one memory, per range."""

    __slots__ = ("cells", "geometry", "name", "near", "no_write")

    def __init__(self, name: str, geometry: Geometry, no_write=()):
        self.name = name
        self.geometry = geometry
        self.no_write = no_write  # a cell's write field before any write: None (local) or () (GM)
        self.cells: dict = {}  # range -> its cell
        self.near: dict = {}  # range -> cells of the ranges sharing a byte with it (its own first)

    def register(self, r: tuple) -> list:
        """The near list of a range seen for the first time in this memory."""
        cov = []
        own = [self.no_write, None, r, UNJUDGED, False, cov]
        cov.append(own)
        cells = self.cells
        cells[r] = own
        links = self.geometry.links.get(r)
        if links is None:
            links = self.geometry.register(r)
        near = [own]
        for c, r_c, c_r in links:
            cell = cells.get(c)
            if cell is None:
                continue
            near.append(cell)
            self.near[c].append(own)
            if r_c:
                cov.append(cell)
            if c_r:
                cell[COVERED].append(own)
        self.near[r] = near
        return near


class InitMap:
    """Which 32-byte blocks of a memory have been written (a write marks every block it touches, so a block
    written in part counts as written: no false report, at the price of missing some). A numpy bitmap: for
    GM buffers, which can be large."""

    __slots__ = ("blocks",)

    def __init__(self, nbytes: int):
        self.blocks = np.zeros(-(-nbytes // BLOCK) + 1, bool)

    def _index(self, r: tuple, whole: bool):
        """The blocks of *r* (*whole*: only blocks inside it, else every block it touches): a slice, a strided
        2-D view of the bitmap (rows whose pitch is whole blocks), or an index array."""
        start, row, rows, pitch = r
        lo = -(-start // BLOCK) if whole else start // BLOCK
        hi = (start + row) // BLOCK if whole else -(-(start + row) // BLOCK)
        if rows <= 1:
            return slice(lo, hi) if hi > lo else None
        if hi <= lo:
            return None
        if pitch % BLOCK == 0:
            step = pitch // BLOCK
            if lo + (rows - 1) * step + (hi - lo) <= self.blocks.size:
                b = self.blocks[lo:]
                return as_strided(b, shape=(rows, hi - lo), strides=(step * b.strides[0], b.strides[0]))
            return (lo + np.arange(rows, dtype=np.int64)[:, None] * step + np.arange(hi - lo)[None, :]).ravel()
        return np.concatenate([np.arange(-(-(start + i * pitch) // BLOCK) if whole else (start + i * pitch) // BLOCK,
                                         (start + i * pitch + row) // BLOCK if whole else
                                         -(-(start + i * pitch + row) // BLOCK))
                               for i in range(rows)]).astype(np.int64)

    def write(self, r: tuple) -> None:
        idx = self._index(r, False)
        if idx is None:
            return
        if isinstance(idx, np.ndarray) and idx.dtype == bool:  # a view of the bitmap
            idx[...] = True
        else:
            self.blocks[idx] = True

    def judge(self, r: tuple) -> tuple:
        """(verdict, byte address of the first whole block of *r* never written or None): COMPLETE when every
        whole block of *r* has been written (or it has none), TOUCHED when some has, else UNJUDGED."""
        idx = self._index(r, True)
        if idx is None:
            return COMPLETE, None
        view = isinstance(idx, np.ndarray) and idx.dtype == bool
        vals = idx if view else self.blocks[idx]
        if vals.all():
            return COMPLETE, None
        if view:  # the first unwritten block: its row and column in the strided view
            row, col = np.unravel_index(int(np.argmin(vals)), vals.shape)
            blk = (vals.__array_interface__["data"][0] - self.blocks.__array_interface__["data"][0]
                   + int(row) * vals.strides[0] + int(col) * vals.strides[1])
        else:
            pos = int(np.argmin(vals))
            blk = (idx.start + pos) if isinstance(idx, slice) else int(idx[pos])
        return (TOUCHED if vals.any() else UNJUDGED), blk * BLOCK


class InitBits:
    """:class:`InitMap` of a local buffer (at most a few thousand blocks) as one Python int, bit k = block k.
    NOTE: a write is one OR and a judgement one AND with the range's block mask, which the Geometry keeps for
    every core's buffer (numpy's per-call overhead was most of the sanitizer's cost for local buffers, for
    performance reasons: benchmarks/sanitizer.py)."""

    __slots__ = ("bits", "masks")

    def __init__(self, geometry: Geometry):
        self.bits = 0
        self.masks = geometry.masks

    def _mask(self, r: tuple, whole: bool) -> int:
        m = self.masks.get((r, whole))
        if m is None:
            start, row, rows, pitch = r
            m = 0
            for i in range(rows if rows > 1 else 1):
                a = start + i * pitch
                lo = -(-a // BLOCK) if whole else a // BLOCK
                hi = (a + row) // BLOCK if whole else -(-(a + row) // BLOCK)
                if hi > lo:
                    m |= ((1 << (hi - lo)) - 1) << lo
            self.masks[(r, whole)] = m
        return m

    def write(self, r: tuple) -> None:
        self.bits |= self._mask(r, False)

    def judge(self, r: tuple) -> tuple:
        """As :meth:`InitMap.judge`."""
        m = self._mask(r, True)
        missing = m & ~self.bits
        if not missing:
            return COMPLETE, None
        first = (missing & -missing).bit_length() - 1
        return (TOUCHED if missing != m else UNJUDGED), first * BLOCK
