"""Recording a shared kernel step outside simulated time (npusim/replay.py, issue 14).

Why: a shared step's recording used to be made by running the step in simulated time, and a step spans
several of the stream's time slices. The streams of a launch reach a new key together (FA varlen: all 72 in
the same slice), so while one stream recorded it the others found it unfinished and ran it as written: about
460 interpreted steps a launch on benchmarks/sim_speed.py's FA varlen case (docs/performance.md).

How: in timing mode a step's calls into its CoreUnit (what a recording holds) do not depend on time, only on
its key and the stream state in it. So the step can be run once "dry": with the stream's clocks, pipe queues,
flags, rows, queues, local buffers and the step's kernel attributes saved, GM transfers booking no bandwidth
and touching no L2 page, and no time slice; then everything saved is put back, as if the step had not run.
The recording is then replayed in simulated time like any other, so the trace is the interpreted one. A
cross-core flag is recorded without reaching its peers (the replay runs it live); a SyncAll makes the step one
that is never replayed, as it does when recorded in simulated time. A step that raises is put back and run as
written, where it raises.

Names and source lines are numbered in the order a launch first meets them (the trace's name_id and src_id
columns). A dry run meets a step's rows earlier than an interpreted run would (before its time slices, in which
other streams register theirs), so a name or line the launch has not numbered yet is not numbered by it: the
recording holds a placeholder (:class:`_Pending`), numbered by the replay that first makes its row, in simulated
time, where an interpreted run would have numbered it (:class:`Registering`).
"""
from __future__ import annotations

import sys

from npusim.core import FLOWCTRL, REC_XWAIT
from npusim.errors import NpusimError
from npusim.replay_code import C_XWAIT

_INF = float("inf")


class _Touched(NpusimError):
    """A dry run reached what it cannot run without other streams (an atomic add, full mode only)."""


class _DryLaunch:
    """The launch as a dry-run step sees it: GM transfers book nothing, cross-core flags and SyncAll are recorded
    without reaching other streams, names and lines are numbered only if the launch has them; everything else is
    the launch's own (path costs, the SetAtomic queues a recording checks)."""

    __slots__ = ("_launch", "name_ids", "src_id")

    def __init__(self, launch, name_ids, src_id):
        self._launch, self.name_ids, self.src_id = launch, name_ids, src_id

    def __getattr__(self, name):
        return getattr(self._launch, name)

    def name_id(self, name: str):
        return self.name_ids[name]

    def book_gm(self, gm, byte_start: int, nbytes: int, start: float, rate: float, write: bool) -> float:
        """No booking and no L2 touch: the end cycle is never used (the dry run's clocks are thrown away)."""
        return start + nbytes / rate

    def cross_set(self, unit, flag_id: int, pipe: int, label_id: int, depth: int, line=None) -> None:
        """Launch.cross_set's own SetFlag (what a recording holds of it), the fire time sent to no peer."""
        unit.set_flag(pipe, ("xcore", flag_id), label_id, depth + 1)
        unit.flags[("xcore", flag_id)].pop()

    def cross_wait(self, unit, flag_id: int, pipe: int, label_id: int, depth: int, line=None) -> None:
        """Launch.cross_wait's record and row, waiting for no peer (the step goes on at once)."""
        t = unit.scalar_t = unit.scalar_t + unit.issue_cycles
        line = self.src_id(depth + 1)
        unit.recorder.append((REC_XWAIT, (flag_id, pipe, label_id, line)))
        unit.records.extend((FLOWCTRL, label_id, t, t, 0, 0, line))

    def sync_all(self, unit, label_id: int, depth: int) -> None:
        """A SyncAll makes the step one that is never replayed (Launch.sync_all's record), without waiting."""
        unit.recorder.append(None)

    def atomic_add(self, *args, **kwargs):  # full mode only, where nothing is replayed
        raise _Touched("atomic add")


class _Pending:
    """A name or source line a dry run met before the launch numbered it; ``id`` once a replay has numbered it."""

    __slots__ = ("name", "code", "lineno", "id")

    def __init__(self, name: str | None, code=None, lineno: int = 0):
        self.name, self.code, self.lineno, self.id = name, code, lineno, None

    def register(self, launch) -> int:
        """The launch's number of this name or line, given now if it has none (Launch.name_id / src_id)."""
        if self.name is not None:
            self.id = launch.name_ids[self.name]
        else:
            self.id = launch.number_line(self.code, self.lineno)
        return self.id


class _DryNames(dict):
    """The launch's name table as a dry run reads it: a name not numbered yet gives a placeholder."""

    def __missing__(self, name: str) -> _Pending:
        p = self[name] = _Pending(name)
        return p


def _dry_src_id(launch):
    """Launch.src_id as a dry run calls it: a line not numbered yet gives a placeholder (one per line).

    NOTE: what a (code, bytecode offset) gave is kept for the rest of the dry run, for performance reasons (as
    Launch.src_id keeps it): a line not numbered yet was looked up again at every row, each time decoding the
    line table (``f_lineno``) and hashing the code object (0.5% of a FAG estimate's instructions, callgrind). Within a
    dry run the launch numbers no line (no other stream runs), so what an offset gives does not change."""
    pending = {}  # (code, line) -> its placeholder
    seen = {}  # (id(code), offset) -> the launch's number or the placeholder of its line

    def src_id(depth: int):
        frame = sys._getframe(depth)
        code = frame.f_code
        at = (id(code), frame.f_lasti)
        i = launch.src_at.get(at)
        if i is None:
            i = seen.get(at)
            if i is None:
                line = frame.f_lineno
                key = (code, line)
                i = launch._src_index.get(key)
                if i is None:
                    i = pending.get(key)
                    if i is None:
                        i = pending[key] = _Pending(None, code, line)
                seen[at] = i
        return i
    return src_id


class Unregistered:
    """The placeholders of a dry-run recording's calls, by call: shared by the recording's copies in every
    stream. ``resolved``: the calls with every placeholder numbered, once they all are."""

    __slots__ = ("by_op", "pending", "resolved", "after_wait")

    def __init__(self, ops, by_op: dict):
        self.by_op = by_op  # call index -> [(field index, _Pending)]
        self.pending = list({id(p): p for fix in by_op.values() for _, p in fix}.values())
        self.resolved = None
        # a cross-core wait's line not numbered yet: the interpreted wait numbers it after waiting (another
        # stream may number lines meanwhile), which the replay's loop cannot do (it numbers before each call)
        self.after_wait = any(ops[i][0] == C_XWAIT and j == 4 for i, fix in by_op.items() for j, _ in fix)

    def settle(self, ops) -> tuple | None:
        """The calls with numbers for placeholders, once every placeholder has one (else None)."""
        if self.resolved is None and all(p.id is not None for p in self.pending):
            self.resolved = tuple(_numbered(op, self.by_op.get(i)) for i, op in enumerate(ops))
        return self.resolved


def unregistered(ops) -> Unregistered | None:
    """The placeholders among *ops*' fields (None if there are none)."""
    by_op = {}
    for i, op in enumerate(ops):
        fix = [(j, v) for j, v in enumerate(op) if type(v) is _Pending]
        if fix:
            by_op[i] = fix
    return Unregistered(ops, by_op) if by_op else None


def _numbered(op: tuple, fix) -> tuple:
    if not fix:
        return op
    op = list(op)
    for j, p in fix:
        op[j] = p.id
    return tuple(op)


class Registering:
    """*ops* for replay's loop, each call's placeholders numbered as the loop reaches it: where the interpreted
    step would have numbered them (before the call's row, between the same time slices). Sized like *ops*."""

    __slots__ = ("launch", "ops", "unreg")

    def __init__(self, launch, ops, unreg: Unregistered):
        self.launch, self.ops, self.unreg = launch, ops, unreg

    def __len__(self) -> int:
        return len(self.ops)

    def __iter__(self):
        by_op, launch = self.unreg.by_op, self.launch
        for i, op in enumerate(self.ops):
            fix = by_op.get(i)
            if fix is not None:
                op = list(op)
                for j, p in fix:
                    op[j] = p.id if p.id is not None else p.register(launch)
                op = tuple(op)
            yield op


class _Saved:
    """What an interpreted step can change in its stream, saved to be put back (:meth:`restore`)."""

    __slots__ = ("scalar_t", "horizon", "pipe_free", "pipe_free_v", "pipe_done", "pipe_done_v", "qstarts", "flags",
                 "records", "n_records", "flows", "n_flows", "n_queues", "queues", "buffers", "tpipe", "atomic",
                 "atomic_seq", "replayed", "attrs")

    def __init__(self, unit, kernel, state: tuple):
        self.scalar_t, self.horizon = unit.scalar_t, unit.horizon
        self.pipe_free, self.pipe_free_v = unit.pipe_free, list(unit.pipe_free)  # PIPE_ALL replaces the lists
        self.pipe_done, self.pipe_done_v = unit.pipe_done, list(unit.pipe_done)
        self.qstarts = [list(q) for q in unit.qstarts]
        self.flags = [(key, list(q)) for key, q in unit.flags.items()]
        self.records, self.n_records = unit.records, len(unit.records)
        self.flows, self.n_flows = unit.flows, len(unit.flows)
        self.n_queues = len(unit.queues)
        self.queues = [(q, q._next, [(s, s.state, s.freed) for s in q.slots], list(q._queued)) for q in unit.queues]
        self.buffers = [(b, b._top, b._peak) for b in unit.buffers.values()]
        self.tpipe, self.atomic, self.atomic_seq, self.replayed = unit.tpipe, unit.atomic, unit.atomic_seq, \
            unit.replayed
        self.attrs = [(name, getattr(kernel, name)) for name in state]

    def restore(self, unit, kernel, thawed: list) -> None:
        """The stream as saved; the deques and lists generated steps hold as constants refilled in place. The
        kernel's *state* attributes as *thawed* (fresh copies of the saved values: a step may change a set in
        place)."""
        unit.scalar_t, unit.horizon = self.scalar_t, self.horizon
        unit.pipe_free, unit.pipe_done = self.pipe_free, self.pipe_done
        self.pipe_free[:] = self.pipe_free_v
        self.pipe_done[:] = self.pipe_done_v
        for q, saved in zip(unit.qstarts, self.qstarts):
            q.clear()
            q.extend(saved)
        flags = unit.flags
        kept = {key for key, _ in self.flags}
        for key in [k for k in flags if k not in kept]:  # flags first used by the dry run: gone again
            del flags[key]
        for key, saved in self.flags:
            q = flags[key]
            q.clear()
            q.extend(saved)
        if unit.records is not self.records or unit.flows is not self.flows:
            raise NpusimError("a dry-run step handed rows to the trace sink")  # never: it has no time slice
        del self.records[self.n_records:]
        del self.flows[self.n_flows:]
        del unit.queues[self.n_queues:]
        for q, nxt, slots, queued in self.queues:
            q._next = nxt
            for s, st, freed in slots:
                s.state, s.freed = st, freed
            q._queued.clear()
            q._queued.extend(queued)
        for b, top, peak in self.buffers:
            b._top, b._peak = top, peak
        unit.tpipe, unit.atomic, unit.atomic_seq, unit.replayed = self.tpipe, self.atomic, self.atomic_seq, \
            self.replayed
        for (name, _), value in zip(self.attrs, thawed):
            setattr(kernel, name, value)


def run_dry(unit, kernel, state: tuple, thaw_saved, record):
    """``record()`` (a step run with its calls recorded) outside simulated time; the stream is left as it was.

    *thaw_saved(values)*: fresh copies of the kernel's *state* attribute values (replay's freeze and thaw).
    Returns what ``record()`` returned, or None when the step reached other streams or raised (the caller then
    runs it in simulated time, where an error is raised as written).
    """
    saved = _Saved(unit, kernel, state)
    thawed = thaw_saved([value for _, value in saved.attrs])
    launch, name_ids, src_id = unit.launch, unit.name_ids, unit.src_id
    names, lines = _DryNames(name_ids), _dry_src_id(launch)
    unit.launch, unit.name_ids, unit.src_id, unit.horizon = _DryLaunch(launch, names, lines), names, lines, _INF
    try:
        return record()
    except Exception:  # noqa: BLE001 - any failure: put the stream back and run the step as written
        return None
    finally:
        unit.launch, unit.name_ids, unit.src_id = launch, name_ids, src_id
        saved.restore(unit, kernel, thawed)
