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

from npusim.core import _S, FLOWCTRL, REC_BARRIER, REC_ISSUE, REC_SET, REC_TRANSFER, REC_WAIT
from npusim.launch import current_unit
from npusim.trace import LANE_RANK_OF_PIPE

#: Module switch (tests and benchmarks compare replayed and interpreted runs with :func:`disabled`).
ENABLED = True

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
    return unit.issued_rows()


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
    return _compile(unit, calls, gm_bases), _queues(unit), tuple(_freeze(getattr(kernel, name)) for name in state)


# -- compiling a recording ---------------------------------------------------------------------------
# A recorded call becomes one flat tuple whose first item says what _replay does with it; everything a call
# looks up that is the same on every replay (the data path's rate and latency, the split of a transfer
# into a local copy or a GM booking) is resolved here once.
_LANES = LANE_RANK_OF_PIPE.tolist()  # pipe code -> trace lane, as Python ints
_C_ISSUE, _C_GM, _C_GM_REL, _C_BARRIER, _C_SET, _C_WAIT, _C_XWAIT, _C_XSET = range(8)


def _compile(unit, calls: list, gm_bases: dict) -> tuple:
    """The recorded calls of one step as flat tuples for :func:`_replay`.

    A transfer that books no GM bandwidth is scheduled by CoreUnit.transfer exactly as an issue of
    occupancy ``nbytes / rate`` (the same float) and latency ``latency`` with the same row, so it becomes one.
    """
    ops = []
    flow_lane = _LANES[FLOWCTRL]
    for kind, a in calls:
        if kind == REC_ISSUE:
            name_id, pipe, occupancy, latency, nbytes, flops, _, line = a
            ops.append((_C_ISSUE, pipe, name_id, occupancy, latency, nbytes, flops, line, _LANES[pipe], None, 0, False))
        elif kind == REC_TRANSFER:
            name_id, pipe, path, nbytes, gm, gm_byte, gm_write, _, line = a
            rate, latency = unit.path_costs[(path, nbytes)]
            if gm is None:
                ops.append((_C_ISSUE, pipe, name_id, nbytes / rate, latency, nbytes, 0, line, _LANES[pipe], None, 0,
                            False))
            else:  # a GM transfer's "occupancy" is its path rate (Launch.book_gm's)
                kind = _C_GM_REL if gm in gm_bases else _C_GM
                ops.append((kind, pipe, name_id, rate, latency, nbytes, 0, line, _LANES[pipe], gm,
                            gm_byte - gm_bases[gm] if kind == _C_GM_REL else gm_byte, gm_write))
        elif kind == REC_BARRIER:
            pipe, label_id, _, line = a
            ops.append((_C_BARRIER, pipe, label_id, line, flow_lane))
        elif kind == REC_SET:
            src, key, label_id, _, line = a
            if isinstance(key, tuple) and key[:1] == ("xcore",):  # Launch.cross_set's own set_flag
                ops.append((_C_XSET, key[1], src, label_id, line))
            else:
                ops.append((_C_SET, src, key, label_id, line, flow_lane))
        elif kind == REC_WAIT:
            dst, key, label_id, what, _, line = a
            ops.append((_C_WAIT, dst, key, label_id, what, line, flow_lane))
        else:  # REC_XWAIT
            flag_id, pipe, label_id, line = a
            ops.append((_C_XWAIT, flag_id, pipe, label_id, line))
    # rows, bytes and FLOPs per lane of the rows the replay makes itself (cross-core flags make theirs)
    rows, nbytes, flops = [0] * 8, [0] * 8, [0] * 8
    for op in ops:
        kind = op[0]
        if kind <= _C_GM_REL:
            lane = op[8]
            nbytes[lane] += op[5]
            flops[lane] += op[6]
        elif kind == _C_XSET or kind == _C_XWAIT:
            continue
        else:
            lane = op[-1]
        rows[lane] += 1
    return _Recording(ops, tuple((lane, rows[lane], nbytes[lane], flops[lane]) for lane in range(8) if rows[lane]))


class _Recording(tuple):
    """A step's compiled calls, and the per-lane rows, bytes and FLOPs of the rows they make (what a
    summary-form stream adds to its tally per replay instead of per row: CoreUnit.spans)."""

    def __new__(cls, ops, tally):
        self = super().__new__(cls, ops)
        self.tally = tally
        return self


# -- replay ----------------------------------------------------------------------------------------
def _replay(unit, ops: tuple, gm_bases: dict) -> None:
    """The compiled calls, scheduled into the stream with transfers moved to this call's bases.

    NOTE: CoreUnit.issue / transfer / set_flag / wait_flag / barrier's bookkeeping inlined over local copies
    of the stream's clocks, for performance reasons (docs/performance.md, fourth round): the same
    expressions in the same order, so the same floats and rows (benchmarks/trace_equivalence.py,
    tests/npusim/test_replay.py). Keep the two in step. The scalar clock is written back before anything
    that reads it (time sync, a GM booking's calendar does not, cross-core flags do).
    """
    scalar = unit.scalar_t
    ic, fc, depth, horizon = unit.issue_cycles, unit.flag_cycles, unit.depth, unit.horizon
    qstarts, pfree, pdone, flags = unit.qstarts, unit.pipe_free, unit.pipe_done, unit.flags
    records, flows, spans = unit.records, unit.flows, unit.spans
    book_gm = unit.launch.book_gm
    block, sub = unit.block_idx, unit.sub_index
    for op in ops:
        kind = op[0]
        if kind <= _C_GM_REL:  # CoreUnit.issue, or CoreUnit.transfer with its GM booking
            _, pipe, name_id, occupancy, latency, nbytes, flops, line, lane, gm, gm_byte, gm_write = op
            t = scalar + ic
            q = qstarts[pipe]
            if len(q) >= depth:
                oldest = q.popleft()
                if oldest > t:
                    t = oldest
            scalar = t
            free = pfree[pipe]
            start = t if t > free else free
            if kind == _C_ISSUE:
                end = start + occupancy
            else:
                if kind == _C_GM_REL:
                    gm_byte += gm_bases[gm]
                end = book_gm(gm, gm_byte, nbytes, start, occupancy, gm_write)
            pfree[pipe] = end
            done = end + latency
            if done > pdone[pipe]:
                pdone[pipe] = done
            q.append(start)
            if spans is None:
                records.extend((pipe, name_id, start, done, nbytes, flops, line))
            else:
                spans.extend((lane, start, done))
        elif kind == _C_BARRIER:
            _, pipe, label_id, line, lane = op
            t = scalar + ic
            scalar = t
            if pipe < 0:  # PIPE_ALL
                done = max(max(pdone), t)
                pfree[:] = [done] * len(pfree)
                pdone[:] = [done] * len(pdone)
                scalar = done
                start = t
            else:
                done = pdone[pipe]
                if t > done:
                    done = t
                start = pfree[pipe]
                pfree[pipe] = done
                if done < start:
                    start = done
            if spans is None:
                records.extend((FLOWCTRL, label_id, start, done, 0, 0, line))
            else:
                spans.extend((lane, start, done))
            continue
        elif kind == _C_SET:
            _, src, key, label_id, line, lane = op
            t = scalar + ic
            scalar = t
            done = pdone[src]
            fire = (done if done > t else t) + fc
            if fire > pfree[src]:
                pfree[src] = fire
            if fire > pdone[src]:
                pdone[src] = fire
            q = flags.get(key)
            if q is None:
                q = flags[key] = deque()
            q.append((fire, src))
            if spans is None:
                records.extend((FLOWCTRL, label_id, fire - fc, fire, 0, 0, line))
            else:
                spans.extend((lane, fire - fc, fire))
            continue
        elif kind == _C_WAIT:
            _, dst, key, label_id, what, line, lane = op
            q = flags.get(key)
            if not q:  # never after a full key match; raise as the interpreted call would
                unit.scalar_t = scalar
                unit.wait_flag(dst, key, label_id, what, 0, line)
            t = scalar + ic
            scalar = t
            fire, src = q.popleft()
            free = pfree[dst]
            start = free if free > t else t
            release = (fire if fire > start else start) + fc
            pfree[dst] = release
            if release > pdone[dst]:
                pdone[dst] = release
            if dst == _S and release > scalar:
                scalar = release
            if spans is None:
                records.extend((FLOWCTRL, label_id, start, release, 0, 0, line))
            else:
                spans.extend((lane, start, release))
            flows.extend((src, fire, dst, release, label_id, block, sub))
            continue
        else:  # cross-core flags run live: a wait may suspend until the peer's set
            unit.scalar_t = scalar
            if kind == _C_XWAIT:
                unit.launch.cross_wait(unit, op[1], op[2], op[3], 0, op[4])
            else:
                unit.launch.cross_set(unit, op[1], op[2], op[3], 0, op[4])
            scalar, horizon = unit.scalar_t, unit.horizon
            records, flows, spans = unit.records, unit.flows, unit.spans
            continue
        if t > horizon:  # an issue or a transfer past the stream's quantum: CoreUnit.catch_up, as they do
            unit.scalar_t = scalar
            unit.catch_up()
            scalar, horizon = unit.scalar_t, unit.horizon
            records, flows, spans = unit.records, unit.flows, unit.spans
    unit.scalar_t = scalar
    if spans is not None:  # the replayed rows' counts, bytes and FLOPs, once per step (a summary-form sink)
        tally = unit.tally
        for lane, n, nbytes, flops in ops.tally:
            tally[lane] += n
            tally[8 + lane] += nbytes
            tally[16 + lane] += flops
