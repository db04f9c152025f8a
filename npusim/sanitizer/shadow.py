"""Shadow state of one memory (a local buffer of one stream, or one GM buffer): who accessed which bytes.

State is kept per distinct *range* (regions.py) rather than per byte: kernels touch the same few
hundred ranges again and again, so each range learns once which other ranges share bytes with it
(found through a bucket index, checked exactly) and an access then only visits those. Per range: the
last write(s) and the last read of each (stream, pipe). A write drops the state of ranges it covers:
any later access that would race with the dropped one races with the write too (happens-before is
transitive), so nothing is lost.

:class:`InitMap` records which 32-byte blocks have been written, for reads of uninitialised bytes.
"""
from __future__ import annotations

import numpy as np

from npusim.sanitizer.regions import covers, end_of, overlap

BLOCK = 32


class Shadow:
    """Accesses of one memory, per range."""

    __slots__ = ("bucket", "buckets", "covered", "name", "near", "nearset", "state")

    def __init__(self, name: str, bucket_bytes: int):
        self.name = name
        self.bucket = bucket_bytes
        self.state: dict = {}  # range -> [tuple of write records, {stream*8+pipe: read record}]
        self.near: dict = {}  # range -> ranges sharing a byte with it (itself first)
        self.nearset: dict = {}  # range -> the same, as a set
        self.covered: dict = {}  # range -> ranges it covers (state dropped on a write)
        self.buckets: dict = {}

    def live(self, r: tuple) -> list:
        """[(range, state)] of the ranges sharing a byte with *r* that have state."""
        near = self.near.get(r)
        if near is None:
            near = self._register(r)
        state = self.state
        if len(near) <= len(state):
            get = state.get
            return [(k, st) for k in near if (st := get(k)) is not None]
        nears = self.nearset[r]
        return [(k, st) for k, st in state.items() if k in nears]

    def _register(self, r: tuple) -> list:
        b = self.bucket
        seen = set()
        near, cov = [r], [r]
        for k in range(r[0] // b, (end_of(r) - 1) // b + 1):
            lst = self.buckets.get(k)
            if lst is None:
                lst = self.buckets[k] = []
            for c in lst:
                if c in seen:
                    continue
                seen.add(c)
                if overlap(c, r):
                    near.append(c)
                    self.near[c].append(r)
                    self.nearset[c].add(r)
                    if covers(r, c):
                        cov.append(c)
                    if covers(c, r):
                        self.covered[c].append(r)
            lst.append(r)
        self.near[r] = near
        self.nearset[r] = set(near)
        self.covered[r] = cov
        return near


class InitMap:
    """Which 32-byte blocks of a memory have been written (a write marks every block it touches, so a block
    written in part counts as written: no false report, at the price of missing some)."""

    __slots__ = ("blocks", "marked", "verified")

    def __init__(self, nbytes: int):
        self.blocks = np.zeros(-(-nbytes // BLOCK) + 1, bool)
        self.marked: set = set()
        self.verified: set = set()

    def _index(self, r: tuple, whole: bool):
        start, row, rows, pitch = r
        lo = -(-start // BLOCK) if whole else start // BLOCK
        hi = (start + row) // BLOCK if whole else -(-(start + row) // BLOCK)
        if rows <= 1:
            return slice(lo, hi) if hi > lo else None
        if hi <= lo:
            return None
        if pitch % BLOCK == 0:
            step = pitch // BLOCK
            return (lo + np.arange(rows, dtype=np.int64)[:, None] * step + np.arange(hi - lo)[None, :]).ravel()
        return np.concatenate([np.arange(-(-(start + i * pitch) // BLOCK) if whole else (start + i * pitch) // BLOCK,
                                         (start + i * pitch + row) // BLOCK if whole else
                                         -(-(start + i * pitch + row) // BLOCK))
                               for i in range(rows)]).astype(np.int64)

    def write(self, r: tuple) -> None:
        if r in self.marked:
            return
        self.marked.add(r)
        idx = self._index(r, False)
        if idx is not None:
            self.blocks[idx] = True

    def first_unwritten(self, r: tuple, every: bool = True):
        """The byte address of the first whole block of *r* never written, or None. *every*: every block must
        have been written; otherwise only a range none of whose blocks was written counts (a read of a
        tile's padding next to written data is not reported)."""
        if r in self.verified:
            return None
        idx = self._index(r, True)
        if idx is None:
            self.verified.add(r)
            return None
        vals = self.blocks[idx]
        if vals.all() or (not every and vals.any()):
            self.verified.add(r)
            return None
        pos = int(np.argmin(vals))
        blk = (idx.start + pos) if isinstance(idx, slice) else int(idx[pos])
        return blk * BLOCK
