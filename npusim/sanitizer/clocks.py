"""Happens-before knowledge of one instruction stream, built from the synchronisation it issues.

Every instruction a stream issues to pipe *p* gets the next *epoch* of that pipe (1, 2, ...). What a pipe
knows is a vector clock: ``vc[p][q]`` is the highest epoch of this stream's pipe *q* known to be complete
before pipe *p*'s next instruction starts, and ``rc[p]`` the same for other streams' pipes, as a dict
``stream * 8 + pipe -> epoch`` shared between pipes until one of them learns something new (copy on
write: cross-core events are rare, intra-core flags many).

The edges (core.py's semantics, never its cycle counts):
- SetFlag on pipe s fires when everything issued to s is complete: the message is vc[s] with s's own
  epoch; WaitFlag on d joins it into d. A wait on PIPE_S joins into every pipe (the scalar unit issues
  everything that follows).
- PipeBarrier(p): p's next instruction waits for p's earlier ones. PipeBarrier(PIPE_ALL): every pipe
  waits for every pipe.
- CrossCoreSetFlag / CrossCoreWaitFlag: the set's pipe knowledge, this stream's pipes included, travels
  to the peer. SyncAll: every member learns what every member knew, all its pipes drained.
"""
from __future__ import annotations

from npusim.types import N_PIPES, Pipe

S = int(Pipe.S)
STRIDE = 8  # remote key = stream * STRIDE + pipe
EMPTY: dict = {}


def merge(a: dict, b: dict) -> dict:
    """The pointwise max of two remote clocks (one of them itself when it already knows the other)."""
    if a is b or not b:
        return a
    if not a:
        return b
    out = None
    for k, v in b.items():
        if a.get(k, 0) < v:
            if out is None:
                out = dict(a)
            out[k] = v
    return a if out is None else out


class StreamClock:
    """Epochs and vector clocks of one stream (one CoreUnit)."""

    __slots__ = ("epoch", "idx", "occ", "rc", "vc")

    def __init__(self, idx: int):
        self.idx = idx
        self.epoch = [0] * N_PIPES
        self.vc = [[0] * N_PIPES for _ in range(N_PIPES)]
        self.rc = [EMPTY] * N_PIPES
        self.occ = [0.0] * N_PIPES  # occupancy issued to each pipe so far (same-pipe latency rule)

    # -- within the stream ----------------------------------------------------------------------
    def set_msg(self, src: int) -> tuple:
        """What a SetFlag on *src* carries."""
        local = list(self.vc[src])
        local[src] = self.epoch[src]
        return local, self.rc[src]

    def join(self, dst: int, msg: tuple) -> None:
        """WaitFlag on *dst* for a set that carried *msg*."""
        local, remote = msg
        vc, rc = self.vc, self.rc
        for p in (range(N_PIPES) if dst == S else (dst,)):
            vc[p] = list(map(max, vc[p], local))
            if remote and remote is not rc[p]:
                rc[p] = merge(rc[p], remote)

    def barrier(self, pipe: int) -> None:
        if pipe >= 0:
            self.vc[pipe][pipe] = self.epoch[pipe]
            return
        remote = self.rc[0]
        for x in self.rc:
            if x is not remote and x:
                remote = merge(remote, x)
        for p in range(N_PIPES):
            self.vc[p] = list(self.epoch)
            self.rc[p] = remote

    # -- across streams --------------------------------------------------------------------------
    def export(self, src: int) -> dict:
        """What pipe *src* knows, this stream's pipes included, as a remote clock (cross-core set)."""
        local, remote = self.set_msg(src)
        base = self.idx * STRIDE
        return merge(remote, {base + q: e for q, e in enumerate(local) if e})

    def export_all(self) -> dict:
        """Everything this stream knows with every pipe drained (SyncAll)."""
        remote = EMPTY
        for p in range(N_PIPES):
            remote = merge(remote, self.rc[p])
        base = self.idx * STRIDE
        return merge(remote, {base + q: e for q, e in enumerate(self.epoch) if e})

    def receive(self, dst: int, remote: dict) -> None:
        """A cross-core wait on *dst* (every pipe when *dst* is PIPE_S or -1) for *remote*."""
        base = self.idx * STRIDE
        own = [remote.get(base + q, 0) for q in range(N_PIPES)]
        others = {k: v for k, v in remote.items() if not base <= k < base + STRIDE}
        pipes = range(N_PIPES) if dst in (S, -1) else (dst,)
        for p in pipes:
            v = self.vc[p]
            for q in range(N_PIPES):
                if own[q] > v[q]:
                    v[q] = own[q]
            self.rc[p] = merge(self.rc[p], others)

    def drain(self) -> None:
        """Every pipe waited for every pipe (SyncAll drains the core first)."""
        self.barrier(-1)
