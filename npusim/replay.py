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
call left. A shared step (below) is recorded on its launch-wide first sight instead, outside simulated time
(npusim/replay_dry.py). Cross-core flags are replayed as calls into the launch, which run live (a wait still
suspends until its peer's set). A step that does anything else
to the stream (SyncAll, a SetAtomic state or atomic add it does not undo, a new queue, rows written by other
code) is never replayed: its recording is dropped and it always runs as written.

Replay is on in timing mode only, off when sanitizing (the sanitizer checks each interpreted instruction)
and can be switched off for comparisons (:func:`disabled`).
"""
from __future__ import annotations

from collections import deque
from contextlib import contextmanager
from functools import wraps

from greenlet import getcurrent as _getcurrent

from npusim.core import _S, FLOWCTRL, REC_BARRIER, REC_ISSUE, REC_SET, REC_TRANSFER, REC_WAIT
from npusim.errors import NpusimError
from npusim.launch import current_unit
from npusim.memory.gm import byte_address
from npusim.replay_code import C_BARRIER as _C_BARRIER, C_GM as _C_GM, C_GM_REL as _C_GM_REL, C_ISSUE as _C_ISSUE
from npusim.replay_code import C_SET as _C_SET, C_WAIT as _C_WAIT, C_XSET as _C_XSET, C_XWAIT as _C_XWAIT
from npusim.replay_code import compiled
from npusim.replay_dry import Registering, run_dry, unregistered

#: Module switch (tests and benchmarks compare replayed and interpreted runs with :func:`disabled`).
ENABLED = True

_INF = float("inf")
_NEVER = object()  # cache entry of a key whose step cannot be replayed
_SEEN = object()  # cache entry of a key seen once: the second call records, the third replays
_RECORDING = object()  # launch-wide entry of a shared key being recorded by some stream


@contextmanager
def disabled():
    """Run every replayable step as written (interpreted) inside the block."""
    global ENABLED
    old, ENABLED = ENABLED, False
    try:
        yield
    finally:
        ENABLED = old


def replayable(key, state: tuple = (), shared: bool = False, bases=None):
    """Decorator of a kernel method whose instruction stream is fixed by ``key(self, *args)``.

    ``key`` returns None (run as written) or ``(hashable, bases)``, *bases* a tuple of GlobalTensors at the
    positions the step's GM addresses are relative to, or of (GlobalTensor, bytes) pairs: regions of a buffer
    that holds several (a transfer on another GM buffer must be at the same address in every call with that
    key). *state*: names of kernel attributes (sets, ints, tuples)
    the step reads or changes besides its queues and flags. The method must return nothing.
    *shared*: the key and bases fix the step's calls in every stream of the launch, not only in the
    stream that calls it (GM transfers on buffers without a base at the same address in every stream):
    a recording made in one stream is then replayed in all the others (its queue changes made on theirs).
    *bases*: ``bases(self, *args)`` gives the bases; ``key`` then returns ``(hashable, addresses)``, the byte
    address of each base in its buffer (``GlobalTensor.byte_offset``; of a region, its tensor's), so that a
    replay builds no tensor views. ``bases`` is called only when the step is recorded or looked up launch-wide,
    and its bases' addresses must be the key's (else NpusimError: the two functions disagree).
    """
    base_fn = bases

    def deco(fn):
        @wraps(fn)
        def step(self, *args):
            try:  # current_unit(), inlined for performance reasons (one call per step)
                unit = _getcurrent().unit
            except AttributeError:
                unit = current_unit()  # raises as it does outside a kernel
            if not ENABLED or unit.full or unit.launch.sanitizer is not None or unit.recorder is not None:
                return fn(self, *args)
            k = key(self, *args)
            if k is None:
                return fn(self, *args)
            if base_fn is None:
                user_key, bases = k
                # the byte addresses of the bases (_base_byte: gm.byte_address, inlined for performance reasons)
                gm_bases = [g.offset * g.dtype.itemsize if type(g) is not tuple
                            else g[0].offset * g[0].dtype.itemsize for g in bases]
            else:  # the addresses from the key; the bases only where a recording needs them (below)
                user_key, gm_bases = k
                bases = None
            frozen = tuple(_freeze(getattr(self, name)) for name in state) if state else ()
            # NOTE: right after a replay with nothing run in between, the stream is in the state the recording
            # left, so the step that follows is found from that recording's successors without snapshotting
            # the queues and flags and hashing them (docs/performance.md, fifth round)
            prev, records, n_records = unit.replayed
            if prev is not None and records is unit.records and n_records == len(records) and unit.atomic is None \
                    and len(unit.queues) == prev.n_queues:
                nxt = prev.next.get((fn, user_key, frozen))
                if nxt is None and prev.shared is not None:  # followed by a shared step in another stream
                    nxt = _shared_successor(unit, prev, (fn, user_key, frozen))
                if nxt is not None:
                    fast = nxt.fast
                    if fast is None:
                        _run(unit, nxt, self, state, gm_bases)
                    else:  # the generated function does all of the replay (replay_code.compiled)
                        fast(unit, gm_bases)
                    return None
            else:
                prev = None
            full_key = (fn, user_key, unit.atomic, _queues(unit), _flags(unit), frozen)
            cache = unit.replays
            entry = cache.get(full_key)
            if bases is None and (entry is _SEEN or shared and entry is None):  # it may be recorded now
                bases = _checked_bases(base_fn(self, *args), gm_bases)
            if shared and (entry is None or entry is _SEEN):  # not recorded in this stream: the launch's
                entry = _from_launch(unit, fn, self, args, bases, state, full_key)
                if entry is None:  # recorded just now
                    return None
                if entry is _SEEN:  # the launch's first sight
                    return fn(self, *args)
            if entry is None:  # first sight: run as written (a key seen once is not worth a recording)
                cache[full_key] = _SEEN
                return fn(self, *args)
            if entry is _NEVER:
                return fn(self, *args)
            if entry is _SEEN:
                cache[full_key] = _record(unit, fn, self, args, bases, state, full_key)
                return None
            if prev is not None and prev.pure:
                _link(prev, (fn, user_key, frozen), entry)
            _run(unit, entry, self, state, gm_bases)
            return None
        return step
    return deco


def _from_launch(unit, fn, kernel, args, bases: tuple, state: tuple, full_key: tuple):
    """A step of a shared key not recorded in this stream: the launch-wide state of its key decides.

    Seen nowhere yet: recorded outside simulated time (npusim/replay_dry.py) and published, its entry returned
    (the caller replays it), so that the other streams, which reach the key in the same time slices, replay it
    too; when it cannot be recorded so (it raised, or a cross-core wait's source line is new: see
    replay_dry.Unregistered.after_wait), _SEEN is returned (the caller runs it as written). Seen once in some
    stream: recorded here in simulated time and published (None is returned: the step has run); recorded in
    another stream: this stream's copy of that recording (_Shared.copy_for), kept as its entry; _NEVER if it
    cannot be.
    """
    launch = unit.launch
    table = launch.shared_replays
    ckey = (full_key[:4], _canonical_flags(unit), full_key[5])
    found = table.get(ckey)
    if found is None:
        entry = run_dry(unit, kernel, state, lambda values: [_thaw(_freeze(v)) for v in values],
                        lambda: _record(unit, fn, kernel, args, bases, state, full_key))
        if entry is not None and entry is not _NEVER:  # names and lines it met first: numbered by the replays
            unreg = entry.ops.unregistered = unregistered(entry.ops)
            if unreg is not None and unreg.after_wait:
                entry = None
        if entry is None:
            table[ckey] = _SEEN
            unit.replays[full_key] = _SEEN
            return _SEEN
        unit.replays[full_key] = entry
        table[ckey] = _NEVER if entry is _NEVER else _Shared(unit, entry)
        return entry
    if found is _NEVER:
        unit.replays[full_key] = _NEVER
        return _NEVER
    if found is _RECORDING:  # another stream is recording it (a recording spans time slices): as written
        return _SEEN
    if found is _SEEN:
        table[ckey] = _RECORDING
        entry = unit.replays[full_key] = _record(unit, fn, kernel, args, bases, state, full_key)
        table[ckey] = _NEVER if entry is _NEVER else _Shared(unit, entry)
        return None
    entry = unit.replays[full_key] = found.copy_for(unit)
    return entry


def _link(prev, link: tuple, entry) -> None:
    """*entry*'s step follows *prev*'s directly with nothing run in between (replayable()'s shortcut); for two
    shared recordings, in every stream: the stream's state after *prev* is the same in all of them (its
    recording's key holds the queues and pending flags before it, named alike in every stream)."""
    prev.next[link] = entry
    if prev.shared is not None and entry.shared is not None:
        prev.shared.next[link] = entry.shared


def _shared_successor(unit, prev, link: tuple):
    """The stream's copy of the shared step another stream saw follow *prev*'s recording (:func:`_link`), or
    None."""
    nxt = prev.shared.next.get(link)
    if nxt is None:
        return None
    entry = prev.next[link] = nxt.copy_for(unit)
    return entry


def _checked_bases(bases: tuple, addresses) -> tuple:
    """*bases* (from a step's ``bases`` function), checked against the byte *addresses* its key gave."""
    got = [_base_byte(b) for b in bases]
    if got != list(addresses):
        raise NpusimError(f"replayable step: the key's base addresses {list(addresses)} are not its bases' {got}")
    return bases


def _canonical_flags(unit) -> frozenset:
    """The pending flags of the stream, which name the same flags in every stream (a TQue's by its index,
    npusim/kernel.py)."""
    return frozenset([(k, len(q)) for k, q in unit.flags.items() if q])


def _queue_index(unit) -> dict:
    index = unit.queue_index
    if len(index) != len(unit.queues):
        index = unit.queue_index = {q: i for i, q in enumerate(unit.queues)}
    return index


class _Shared:
    """A recording published to the launch: its calls (flag keys are the same in every stream) and its queue
    changes with queues named by index."""

    __slots__ = ("ops", "keys", "slots_after", "next_after", "queued_after", "state_after", "n_queues", "pure",
                 "next", "copies")

    def __init__(self, unit, e: _Entry):
        index = _queue_index(unit)
        self.ops = e.ops
        self.next = {}  # the shared steps seen to follow this one directly (_link), in any stream
        self.copies = {unit: e}  # each stream's entry of this recording
        e.shared = self
        self.keys = tuple({op[2]: None for op in e.ops if op[0] in (_C_SET, _C_WAIT)})
        where = {s: (i, s.index) for q, i in index.items() for s in q.slots}
        self.slots_after = [where[s] + (st, freed) for s, st, freed in e.slots_after]
        self.next_after = [(index[q], nxt) for q, nxt in e.next_after]
        self.queued_after = [(index[q], tuple([s.index for s in queued])) for q, queued in e.queued_after]
        self.state_after, self.n_queues, self.pure = e.state_after, e.n_queues, e.pure

    def copy_for(self, unit) -> _Entry:
        """*unit*'s entry of this recording (made once per stream)."""
        e = self.copies.get(unit)
        if e is None:
            e = self.copies[unit] = self.relocated(unit)
        return e

    def relocated(self, unit) -> _Entry:
        """This recording as an entry of *unit*'s stream: the same calls (flag keys name the same flags in every
        stream), the queue changes on the stream's own queues.

        The flags the calls set or wait are entered in the stream's table (an empty deque where it has none
        yet: no pending set, as if absent), as the recording stream's table has them after its recording, so
        that every stream's copy gets the same generated function (npusim/replay_code.py: a flag present in
        the table when the function is made is resolved through local variables and bound as a constant).
        """
        queues = unit.queues
        flags = unit.flags
        for key in self.keys:
            if key not in flags:
                flags[key] = deque()
        e = _Entry()
        e.ops = self.ops.copy()
        e.slots_after = [(queues[qi].slots[si], st, freed) for qi, si, st, freed in self.slots_after]
        e.next_after = [(queues[qi], nxt) for qi, nxt in self.next_after]
        e.queued_after = [(queues[qi], tuple([queues[qi].slots[si] for si in queued]))
                          for qi, queued in self.queued_after]
        e.state_after, e.n_queues, e.pure, e.next, e.shared = self.state_after, self.n_queues, self.pure, {}, self
        e.code = e.fast = None
        return e


def _run(unit, entry, kernel, state: tuple, gm_bases: list) -> None:
    """Replay *entry*'s compiled calls, scheduled into the stream with transfers moved to this call's bases: by
    the loop (:func:`_replay_calls`), or by the recording's own function once it has been replayed often; then
    leave the stream (queues, kernel attributes) as its recorded call did."""
    code = entry.code
    if code is None:
        ops = entry.ops
        unreg = ops.unregistered
        if unreg is not None:  # a dry-run recording whose names or lines are not all numbered yet (replay_dry.py)
            resolved = unreg.settle(ops)
            if resolved is not None:
                ops = entry.ops = _Recording(resolved, ops.generated, ops.runs, ops.flag_keys)
                if entry.shared is not None:
                    entry.shared.ops = ops
                unreg = None
        runs = ops.runs
        runs[0] += 1
        n = runs[0]
        if n > COMPILE_AFTER and unreg is None:
            code = entry.code = compiled(ops, _S, unit, n > COMPILE_NEW_AFTER, entry)
            if not state:  # the function does all of a replay: the step wrapper calls it directly
                entry.fast = code
    if code is None:
        _replay_calls(unit, ops if unreg is None else Registering(unit.launch, ops, unreg), gm_bases)
        _restore_queues(entry)
        records = unit.records
        unit.replayed = (entry, records, len(records))
    else:  # the function also restores the queues and marks the step (replay_code.after_step)
        code(unit, gm_bases)
    if state:
        for name, value in zip(state, entry.state_after):
            setattr(kernel, name, _thaw(value))


def _restore_queues(entry) -> None:
    """The stream's queues as the recorded call left them (replay_code.after_step writes the same in a
    generated step)."""
    for slot, st, freed in entry.slots_after:
        slot.state, slot.freed = st, freed
    for q, nxt in entry.next_after:
        q._next = nxt
    for q, queued in entry.queued_after:
        q._queued = deque(queued)


def _base_byte(base) -> int:
    """The byte address of a base (a GlobalTensor, or a (GlobalTensor, region bytes) pair) in its buffer."""
    return byte_address(base if type(base) is not tuple else base[0])


# -- stream state ----------------------------------------------------------------------------------
def _queues(unit) -> tuple:
    """Ring state of every TQue of the stream: next slot, slot states (state, freed), queued order.

    NOTE: built in plain loops rather than comprehensions (each a function call in this Python), for
    performance reasons: a key snapshot is taken per step that does not directly follow a replay (FA varlen:
    about 3,000 a launch); the tuples are those of ``tuple([(s.state, s.freed) for s in q.slots])`` and
    ``tuple([s.index for s in q._queued])``."""
    out = []
    for q in unit.queues:
        slots = []
        for s in q.slots:
            slots.append((s.state, s.freed))
        queued = q._queued
        if queued:
            order = []
            for s in queued:
                order.append(s.index)
            out.append((q._next, tuple(slots), tuple(order)))
        else:
            out.append((q._next, tuple(slots), ()))
    return tuple(out)


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
class _Entry:
    """A recorded step: its compiled calls, what it changes in the stream's queues and kernel attributes,
    and the entries of the steps seen to follow it directly (:func:`replayable`'s shortcut)."""

    __slots__ = ("ops", "slots_after", "next_after", "queued_after", "state_after", "n_queues", "pure", "next",
                 "shared", "code", "fast")


def _record(unit, fn, kernel, args, bases: tuple, state: tuple, full_key: tuple):
    """Run the step with the unit logging its calls (CoreUnit.recorder); the cache entry it earns."""
    n_queues, rows0, atomic0 = len(unit.queues), _rows(unit), _atomic_state(unit)
    calls = unit.recorder = []
    try:
        fn(kernel, *args)
    finally:
        unit.recorder = None
    if None in calls or len(unit.queues) != n_queues or _rows(unit) - rows0 != len(calls) \
            or _atomic_state(unit) != atomic0:
        return _NEVER  # a SyncAll (None), a new queue, rows written by other code, atomics it cannot redo
    ops = _compile(unit, calls, bases)
    if ops is None:
        return _NEVER
    e = _Entry()
    e.ops = ops
    # the queue state the call left, as changes from the state in its key (the same before every replay)
    before = full_key[3]
    e.slots_after, e.next_after, e.queued_after = [], [], []
    for q, (nxt, slots, queued) in zip(unit.queues, before):
        if q._next != nxt:
            e.next_after.append((q, q._next))
        e.slots_after += [(s, s.state, s.freed) for s, old in zip(q.slots, slots) if (s.state, s.freed) != old]
        if tuple([s.index for s in q._queued]) != queued:
            e.queued_after.append((q, tuple(q._queued)))
    e.state_after = tuple(_freeze(getattr(kernel, name)) for name in state)
    e.n_queues = n_queues
    # after this step the stream's state is fixed by the recording (queues, flags, attributes), so the step
    # that follows directly can be looked up from it, unless an AllocTensor could change a queue without a
    # row (a slot never freed yet)
    e.pure = all(s.freed or s.state != "free" for q in unit.queues for s in q.slots)
    e.next = {}
    e.shared = None  # the launch's _Shared, once published
    # its generated function once replayed often (replay_code.compiled), and the same when it does all of a
    # replay (no kernel attributes to set after it): replayable()'s step calls it directly
    e.code = e.fast = None
    records = unit.records
    unit.replayed = (e, records, len(records))
    return e


def _atomic_state(unit) -> tuple:
    """What a step's atomic stores (Fixpipes, and MTE3 DataCopy/DataCopyPad UB -> GM) depend on and leave behind:
    the SetAtomicAdd dtype in force and the atomic adds queued so far (Launch.atomic_add).

    A step that leaves both as it found them replays exactly: its atomic stores are transfers like any other in
    timing mode (their adds are queued in full mode only, where nothing replays), and the SetAtomic state it enters
    with is in its key. A step that changes either (a SetAtomicAdd left on, an add queued) is never replayed.
    """
    return unit.atomic, len(unit.launch.atomic_pending), len(unit.launch.atomic_log)


# -- compiling a recording ---------------------------------------------------------------------------
# A recorded call becomes one flat tuple whose first item says what _run does with it; everything a call
# looks up that is the same on every replay (the data path's rate and latency, the split of a transfer
# into a local copy or a GM booking) is resolved here once.
#: replays of a recording by the loop before it gets a function of its own
#: (npusim/replay_code.py) when that function's source was compiled before in this process (an earlier launch,
#: another stream): generating the source costs about what a few replayed rows do. A source not compiled before
#: waits for COMPILE_NEW_AFTER replays: compiling costs some 100 us a call of the recording, about what 50
#: replays of the call by the loop save, and most recordings replayed fewer times than that are the long steps
#: of a FAG launch (docs/performance.md, "Compile threshold")
COMPILE_AFTER = 4
COMPILE_NEW_AFTER = 16


def _compile(unit, calls: list, bases: tuple) -> tuple | None:
    """The recorded calls of one step as flat tuples for :func:`_run` (None: a GM transfer the bases
    cannot place).

    A transfer that books no GM bandwidth is scheduled by CoreUnit.transfer exactly as an issue of
    occupancy ``nbytes / rate`` (the same float) and latency ``latency`` with the same row, so it becomes one.
    A transfer on a buffer with a base is kept relative to the base whose region holds it, as (base index,
    offset): a GlobalTensor base covers its whole buffer, a (GlobalTensor, bytes) base that many bytes.
    """
    regions = []  # (gm, base byte, first byte, end byte) per base, in the key's order
    for base in bases:
        g, size = (base, None) if type(base) is not tuple else base
        byte = _base_byte(base)
        # a whole-buffer base holds every address of its buffer, before it too
        regions.append((g.gm, byte, byte, byte + size) if size is not None else (g.gm, byte, -_INF, _INF))
    based = {r[0] for r in regions}
    if any(lo == -_INF and sum(r[0] is gm for r in regions) > 1 for gm, _, lo, _ in regions):
        return None  # a whole-buffer base beside another base of that buffer: ambiguous
    ops = []
    for kind, a in calls:
        if kind == REC_ISSUE:
            name_id, pipe, occupancy, latency, nbytes, flops, _, line = a
            ops.append((_C_ISSUE, pipe, name_id, occupancy, latency, nbytes, flops, line, None, 0, False))
        elif kind == REC_TRANSFER:
            name_id, pipe, path, nbytes, gm, gm_byte, gm_write, _, line = a
            rate, latency = unit.path_costs[(path, nbytes)]
            if gm is None:
                ops.append((_C_ISSUE, pipe, name_id, nbytes / rate, latency, nbytes, 0, line, None, 0, False))
            elif gm in based:  # a GM transfer's "occupancy" is its path rate (Launch.book_gm's)
                where = [(i, gm_byte - byte) for i, (bgm, byte, lo, end) in enumerate(regions)
                         if bgm is gm and lo <= gm_byte < end]
                if not where:
                    return None  # outside every region of its buffer's bases
                ops.append((_C_GM_REL, pipe, name_id, rate, latency, nbytes, 0, line, gm, where[0], gm_write))
            else:
                ops.append((_C_GM, pipe, name_id, rate, latency, nbytes, 0, line, gm, gm_byte, gm_write))
        elif kind == REC_BARRIER:
            pipe, label_id, _, line = a
            ops.append((_C_BARRIER, pipe, label_id, line))
        elif kind == REC_SET:
            src, key, label_id, _, line = a
            if isinstance(key, tuple) and key[:1] == ("xcore",):  # Launch.cross_set's own set_flag
                ops.append((_C_XSET, key[1], src, label_id, line))
            else:
                ops.append((_C_SET, src, key, label_id, line))
        elif kind == REC_WAIT:
            dst, key, label_id, what, _, line = a
            ops.append((_C_WAIT, dst, key, label_id, what, line))
        else:  # REC_XWAIT
            flag_id, pipe, label_id, line = a
            ops.append((_C_XWAIT, flag_id, pipe, label_id, line))
    return _Recording(ops)


class _Recording(tuple):
    """A step's compiled calls; once replayed COMPILE_AFTER times (COMPILE_NEW_AFTER if its source is new; counted
    over the copies of a shared recording in every stream), its entry gets its own function (``_Entry.code``, with
    its stream's constants)."""

    def __new__(cls, ops, generated: dict | None = None, runs: list | None = None, flag_keys: list | None = None,
                unregistered=None):
        self = super().__new__(cls, ops)
        self.unregistered = unregistered  # placeholders of names and lines a dry run met first (replay_dry.py)
        self.runs = [0] if runs is None else runs  # replays by the loop, one count shared by the copies
        self.generated = {} if generated is None else generated  # npusim/replay_code.py, shared by the copies
        # the flag keys of its SetFlags and WaitFlags in order (replay_code.compiled's signature), shared
        self.flag_keys = [op[2] for op in ops if op[0] in (_C_SET, _C_WAIT)] if flag_keys is None else flag_keys
        return self

    def copy(self) -> _Recording:
        """The same calls for another stream: the loop count, the flag keys and the generated sources shared."""
        return _Recording(self, self.generated, self.runs, self.flag_keys, self.unregistered)


# -- replay ----------------------------------------------------------------------------------------
def _replay_calls(unit, ops: tuple, gm_bases: list) -> None:
    """:func:`_run`'s loop over the compiled calls.

    NOTE: CoreUnit.issue / transfer / set_flag / wait_flag / barrier's bookkeeping inlined over local copies
    of the stream's clocks, for performance reasons (docs/performance.md, fourth round): the same
    expressions in the same order, so the same floats and rows (benchmarks/trace_equivalence.py,
    tests/npusim/test_replay.py). Keep the two in step. The scalar clock is written back before anything
    that reads it (time sync, a GM booking's calendar does not, cross-core flags do).
    """
    scalar = unit.scalar_t
    ic, fc, depth, horizon = unit.issue_cycles, unit.flag_cycles, unit.depth, unit.horizon
    qstarts, pfree, pdone, flags = unit.qstarts, unit.pipe_free, unit.pipe_done, unit.flags
    records, flows = unit.records, unit.flows
    book_gm = unit.launch.book_gm
    block, sub = unit.block_idx, unit.sub_index
    for op in ops:
        kind = op[0]
        if kind <= _C_GM_REL:  # CoreUnit.issue, or CoreUnit.transfer with its GM booking
            _, pipe, name_id, occupancy, latency, nbytes, flops, line, gm, gm_byte, gm_write = op
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
                    gm_byte = gm_bases[gm_byte[0]] + gm_byte[1]
                end = book_gm(gm, gm_byte, nbytes, start, occupancy, gm_write)
            pfree[pipe] = end
            done = end + latency
            if done > pdone[pipe]:
                pdone[pipe] = done
            q.append(start)
            records.extend((pipe, name_id, start, done, nbytes, flops, line))
        elif kind == _C_BARRIER:
            _, pipe, label_id, line = op
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
            records.extend((FLOWCTRL, label_id, start, done, 0, 0, line))
            continue
        elif kind == _C_SET:
            _, src, key, label_id, line = op
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
            records.extend((FLOWCTRL, label_id, fire - fc, fire, 0, 0, line))
            continue
        elif kind == _C_WAIT:
            _, dst, key, label_id, what, line = op
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
            records.extend((FLOWCTRL, label_id, start, release, 0, 0, line))
            flows.extend((src, fire, dst, release, label_id, block, sub))
            continue
        else:  # cross-core flags run live: a wait may suspend until the peer's set
            unit.scalar_t = scalar
            if kind == _C_XWAIT:
                unit.launch.cross_wait(unit, op[1], op[2], op[3], 0, op[4])
            else:
                unit.launch.cross_set(unit, op[1], op[2], op[3], 0, op[4])
            scalar, horizon = unit.scalar_t, unit.horizon
            records, flows = unit.records, unit.flows
            continue
        if t > horizon:  # an issue or a transfer past the stream's quantum: CoreUnit.catch_up, as they do
            unit.scalar_t = scalar
            unit.catch_up()
            scalar, horizon = unit.scalar_t, unit.horizon
            records, flows = unit.records, unit.flows
    unit.scalar_t = scalar
