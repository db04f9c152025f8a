"""Replay of a kernel step's recorded instruction stream in timing mode (issue 14: timing mode at LLM scale).

Why: in timing mode an instruction's schedule depends on its pipe, cost, flags and the GM bytes it moves,
never on data, and an attention kernel runs the same step body (one score tile's softmax, one tile's
matmuls) thousands of times. Interpreting every one of those steps through the kernel's lines and the
Ascend C layer (operand checks, an object per instruction) costs 5-10 us of CPU per instruction; handing
the step's recorded calls straight to the core's scheduler costs about 2 (docs/performance.md). The schedule itself is still
computed live, call by call, by the same CoreUnit methods (core.py), so cycles, trace rows, flag arrows,
bandwidth bookings and L2 residency are those of an interpreted run (benchmarks/trace_equivalence.py).

How: a kernel method decorated with :func:`replayable` names what its instruction stream depends on: a
*key* (tile geometry, slot parities...) and the GM tensors whose addresses move from call to call (their
*bases*: a transfer on such a tensor is recorded relative to its base). The stream state it depends on is
added to the key automatically: every TQue's ring state, the pending count of every flag, the SetAtomic
state and the kernel attributes the decorator names (*state*). The first call with a full key runs the
method as written; the second records every call it makes into its CoreUnit (issue, transfer, set_flag,
wait_flag, barrier) with its kernel line (a key seen once costs no recording); a later call with the same
full key replays those calls, then sets the queues and the named attributes to the state the recorded
call left. Cross-core flags are replayed as calls into the launch, which run live (a wait still
suspends until its peer's set). A step that does anything else
to the stream (SyncAll, SetAtomicAdd, a new queue, rows written by other code) is never replayed: its
recording is dropped and it always runs as written.

Replay is on in timing mode only, off when sanitizing (the sanitizer checks each interpreted instruction)
and can be switched off for comparisons (:func:`disabled`).
"""
from __future__ import annotations

from collections import deque
from contextlib import contextmanager
from functools import wraps

from npusim.core import REC_BARRIER, REC_ISSUE, REC_SET, REC_TRANSFER, REC_WAIT, REC_XWAIT
from npusim.launch import current_unit

#: Module switch (tests and benchmarks compare replayed and interpreted runs with :func:`disabled`).
ENABLED = True

_TRANSFER_REL = 6  # a recorded transfer on a GM buffer with a base: its address moves with the base
_XSET = 7  # CrossCoreSetFlag (recorded as the set_flag of its ("xcore", id) key)
_NEVER = object()  # cache entry of a key whose step cannot be replayed
_SEEN = object()  # cache entry of a key seen once: the second call records, the third replays


@contextmanager
def disabled():
    """Run every replayable step as written (interpreted) inside the block."""
    global ENABLED
    old, ENABLED = ENABLED, False
    try:
        yield
    finally:
        ENABLED = old


def replayable(key, state: tuple = ()):
    """Decorator of a kernel method whose instruction stream is fixed by ``key(self, *args)``.

    ``key`` returns None (run as written) or ``(hashable, bases)``, *bases* a tuple of GlobalTensors at the
    positions the step's GM addresses are relative to (a transfer on another GM buffer must be at the
    same address in every call with that key). *state*: names of kernel attributes (sets, ints, tuples)
    the step reads or changes besides its queues and flags. The method must return nothing.
    """
    def deco(fn):
        @wraps(fn)
        def step(self, *args):
            unit = current_unit()
            if not ENABLED or unit.full or unit.launch.sanitizer is not None or unit.recorder is not None:
                return fn(self, *args)
            k = key(self, *args)
            if k is None:
                return fn(self, *args)
            user_key, bases = k
            gm_bases = {}
            for g in bases:
                byte = g.offset * g.dtype.itemsize
                if gm_bases.setdefault(g.gm, byte) != byte:  # two bases in one buffer: not supported
                    return fn(self, *args)
            full_key = (fn, user_key, unit.atomic, _queues(unit), _flags(unit),
                        tuple(_freeze(getattr(self, name)) for name in state))
            cache = unit.replays
            entry = cache.get(full_key)
            if entry is None:  # first sight: run as written (a key seen once is not worth a recording)
                cache[full_key] = _SEEN
                return fn(self, *args)
            if entry is _NEVER:
                return fn(self, *args)
            if entry is _SEEN:
                cache[full_key] = _record(unit, fn, self, args, gm_bases, state)
                return None
            ops, queues_after, state_after = entry
            _replay(unit, ops, gm_bases)
            _restore_queues(unit, queues_after)
            for name, value in zip(state, state_after):
                setattr(self, name, _thaw(value))
            return None
        return step
    return deco


# -- stream state ----------------------------------------------------------------------------------
def _queues(unit) -> tuple:
    """Ring state of every TQue of the stream: next slot, slot states, queued order."""
    return tuple([(q._next, tuple([(s.state, s.freed) for s in q.slots]), tuple([s.index for s in q._queued]))
                  for q in unit.queues])


def _restore_queues(unit, snap: tuple) -> None:
    for q, (nxt, slots, queued) in zip(unit.queues, snap):
        q._next = nxt
        for s, (st, freed) in zip(q.slots, slots):
            s.state, s.freed = st, freed
        q._queued = deque([q.slots[i] for i in queued])


def _flags(unit) -> tuple:
    """How many sets of each flag are pending (a WaitFlag's outcome depends on it), in the flags' first-use
    order (a flag, once used, keeps its place in the unit's table)."""
    return tuple(map(len, unit.flags.values()))


def _freeze(value):
    if isinstance(value, (set, frozenset)):
        return (set, frozenset(value))
    if isinstance(value, list):
        return (list, tuple(value))
    return (None, value)


def _thaw(frozen):
    kind, value = frozen
    return value if kind is None else kind(value)


def _rows(unit) -> int:
    return unit.flushed_rows + len(unit.records) // 7


# -- recording -------------------------------------------------------------------------------------
def _record(unit, fn, kernel, args, gm_bases: dict, state: tuple):
    """Run the step with the unit logging its calls (CoreUnit.recorder); the cache entry it earns."""
    n_queues, rows0, atomic0 = len(unit.queues), _rows(unit), unit.atomic  # SetAtomicAdd steps: never replayed
    calls = unit.recorder = []
    try:
        fn(kernel, *args)
    finally:
        unit.recorder = None
    if None in calls or len(unit.queues) != n_queues or _rows(unit) - rows0 != len(calls) \
            or unit.atomic is not None or atomic0 is not None:
        return _NEVER  # a SyncAll (None), a new queue, rows written by other code, atomics
    ops = []
    for kind, a in calls:
        if kind == REC_SET and isinstance(a[1], tuple) and a[1][:1] == ("xcore",):
            kind, a = _XSET, (a[1][1], a[0], a[2], a[4])  # flag id, pipe, label, line: Launch.cross_set's
        elif kind == REC_TRANSFER and a[4] is not None and a[4] in gm_bases:
            kind, a = _TRANSFER_REL, a[:5] + (a[5] - gm_bases[a[4]],) + a[6:]
        ops.append((kind, a))
    return tuple(ops), _queues(unit), tuple(_freeze(getattr(kernel, name)) for name in state)


# -- replay ----------------------------------------------------------------------------------------
def _replay(unit, ops: list, gm_bases: dict) -> None:
    """The recorded calls, into the stream's scheduler, with transfers moved to this call's bases."""
    issue, transfer, set_flag, wait_flag, barrier = unit.issue, unit.transfer, unit.set_flag, unit.wait_flag, \
        unit.barrier
    launch = unit.launch
    for kind, a in ops:
        if kind == REC_ISSUE:
            issue(*a)
        elif kind == REC_BARRIER:
            barrier(*a)
        elif kind == REC_SET:
            set_flag(*a)
        elif kind == REC_WAIT:
            wait_flag(*a)
        elif kind == REC_TRANSFER:
            transfer(*a)
        elif kind == _TRANSFER_REL:
            transfer(a[0], a[1], a[2], a[3], a[4], gm_bases[a[4]] + a[5], a[6], 0, a[8])
        elif kind == REC_XWAIT:  # cross-core flags run live: they may suspend until the peer's set
            launch.cross_wait(unit, a[0], a[1], a[2], 0, a[3])
        else:
            launch.cross_set(unit, a[0], a[1], a[2], 0, a[3])
