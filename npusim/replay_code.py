"""A compiled kernel-step recording turned into straight-line Python: the replay of a step that repeats often.

Why: :func:`npusim.replay._run` schedules a recording's calls in one loop, which per row unpacks the
call's tuple, dispatches on its kind and indexes the stream's pipe lists (about 2 us a row with the row's
record). A recording replayed many times (the vector-add sample's tile: 20,000 times) is worth a function of
its own in which every call is its schedule's expressions with the recording's constants written in, the
touched pipes' clocks held in local variables, and the trace rows handed over a few at a time
(docs/performance.md, sixth round).

The generated expressions are those of the loop, in the same order, on the same floats (a float constant is
written as its ``repr``, which reads back as the same float), so every start and end cycle, row, flag arrow and
GM booking is the loop's (tests/npusim/test_replay.py compares both with the interpreted run). The pipe clocks,
the scalar clock and the rows made so far are written back to the stream before anything else may read them:
a time slice (``CoreUnit.catch_up``, whose flush reads the clocks and takes the rows), a cross-core flag (run
live by the launch) and an unmatched WaitFlag (which raises as the interpreted call would).
"""
from __future__ import annotations

import hashlib
import marshal
import math
import os
import struct
import sys
import tempfile
from collections import deque
from pathlib import Path
from types import CodeType, FunctionType

import numpy as np

from npusim import replay_cache
from npusim.core import FLOWCTRL
from npusim.trace_sink import CHUNK_ROWS, StepLayout

#: kinds of a compiled call (npusim/replay.py ``_compile``)
C_ISSUE, C_GM, C_GM_REL, C_BARRIER, C_SET, C_WAIT, C_XWAIT, C_XSET = range(8)

_CODE: dict = {}  # generated source -> function (relocated copies of a shared recording differ in constants only)
_CODE_LIMIT = 4096
#: where compiled generated sources are kept between processes (compile() costs some 0.2 us a character of source,
#: 0.16-0.46 s of a fresh FAG estimate call; reading one back is marshal.loads): $NPUSIM_REPLAY_CACHE, else
#: $XDG_CACHE_HOME/npusim/replay (~/.cache/npusim/replay); "off" keeps none. Size cap, pruned oldest first:
#: npusim/replay_cache.py ($NPUSIM_REPLAY_CACHE_MB)
CACHE_DIR = os.environ.get("NPUSIM_REPLAY_CACHE") or str(
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "npusim" / "replay")
_MISSING: set = set()  # sources looked for in CACHE_DIR and not found there (this process)
_PACKERS: dict = {}  # struct format -> struct.Struct(format).pack
#: record values of a chunk a stream hands to its sink (CoreUnit.chunk_full): a full-form step flushes past it
CHUNK_VALUES = 7 * CHUNK_ROWS


def _packer(fields: list):
    """``struct.Struct(...).pack`` of *fields* (True: a Python number, packed as a float64 in native order, numpy's,
    converted as ``float()`` does, as ``np.fromiter(..., np.float64)`` converts them; False: 8 zero bytes, a
    value the block's layout holds)."""
    fmt = "".join(["d" if f else "8x" for f in fields])
    pack = _PACKERS.get(fmt)
    if pack is None:
        pack = _PACKERS[fmt] = struct.Struct(fmt).pack
    return pack


def compiled(ops, scalar_pipe: int, unit, new: bool = True, entry=None):
    """The function replaying the compiled calls *ops* of *entry* (npusim/replay.py) in *unit*'s stream; call it
    as ``function(unit, gm_bases)``. None when *new* is false and the function's source has not been compiled
    before (in this process: an earlier launch or stream): generating it (a few us a call) is kept, compiling it
    (about 0.2 us a character of source, some 100 us a call) waits for a later call with *new*.

    Besides scheduling the calls it does what the replay of a step does after them: the flush of a full chunk (the
    step's time slices left the rows to its end), the queue changes of the recorded call (``entry.slots_after``,
    ``next_after``, ``queued_after``) and the stream's mark of the step replayed last (``unit.replayed``:
    replayable()'s shortcut to the next step). Kernel attributes (replayable's *state*) are left to the caller.

    The stream's flag table at the start of the step decides which waits the step resolves itself. Every replay of a
    recording starts with the same number of pending sets of each flag (they are part of its key, npusim/replay.py),
    so a WaitFlag that takes a SetFlag of the same step is resolved here: the set's fire cycle is read from a local
    variable, and the sets no wait of the step takes are appended to the table at its end (in order, after the sets
    pending before the step).

    The source is kept in ``ops.generated``, which the copies of a shared recording in other streams share,
    and its compiled function in ``_CODE``; the entry's function is that code with this entry's constants as its
    parameters' defaults: what stays put for the stream and its launch (its pipe queues and the flag queues the
    step takes sets from, the chip's cycle constants, the launch's bandwidth calendars) and the entry's queues
    and slots, so a replay neither looks them up nor unpacks them. (Defaults, not a closure: a closure's cells
    are one object each for the cyclic collector, some 40 per stream's copy.)
    """
    flags = unit.flags
    keys = ops.flag_keys  # the keys of the recording's SetFlags and WaitFlags, in order (shared by the copies)
    pending = {key: len(flags[key]) for key in keys if key in flags}
    restore = (len(entry.slots_after), len(entry.next_after), len(entry.queued_after))
    signature = (tuple([pending.get(key, -1) for key in keys]), restore)
    made = ops.generated.get(signature)
    if made is None or made[0] is None:
        if made is None:
            source, spec = _source(ops, scalar_pipe, pending, restore, unit.flag_cycles)
        else:  # generated by an earlier call, not compiled yet
            _, spec, source = made
        template = _CODE.get(source)
        if template is None:
            code = _code_object(source, new)
            if code is None:
                ops.generated[signature] = (None, spec, source)
                return None
            if len(_CODE) >= _CODE_LIMIT:
                _CODE.clear()
                _MISSING.clear()  # bounded with it: a dropped source is looked for on disk again
            namespace = {"deque": deque}
            exec(code, namespace)
            template = _CODE[source] = namespace["_step"]
        made = ops.generated[signature] = (template, spec)
    template, spec = made
    return FunctionType(template.__code__, template.__globals__, "_step",
                        tuple([_constant(unit, ops, entry, *item) for item in spec]))


def _code_object(source: str, new: bool):
    """The compiled module of a generated *source*: read back from CACHE_DIR where an earlier process compiled it,
    else (*new*: worth compiling now) compiled and stored there; None when not *new* and not stored. The file's name
    is the sha256 of the Python version and the source, so a source is never read back as another's code; an
    unreadable file (not a code object) counts as absent."""
    if not new and source in _MISSING:
        return None  # looked for already
    path = None
    if CACHE_DIR != "off":
        name = hashlib.sha256((sys.version + "\0" + source).encode()).hexdigest()
        path = Path(CACHE_DIR) / name[:2] / name
        if source not in _MISSING:
            try:
                code = marshal.loads(path.read_bytes())
                if type(code) is CodeType:
                    replay_cache.used(path)
                    return code
            except (OSError, EOFError, ValueError, TypeError):
                pass  # absent or unreadable: compiled (and stored again) when worth it
            _MISSING.add(source)
    if not new:
        return None
    code = compile(source, "<npusim replay step>", "exec")
    if path is not None:
        _store(path, marshal.dumps(code))
        _MISSING.discard(source)  # stored now: found there after _CODE drops it
    return code


def _store(path: Path, data: bytes) -> None:
    """*data* written to *path* whole or not at all (a temporary file renamed: processes may share the cache)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent)
    except OSError:
        return  # an unwritable cache: compiled again next time
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return
    replay_cache.stored(str(path.parent.parent), len(data))


def _constant(unit, ops, entry, i, j, value):
    """A constant of a generated function, as its *spec* says (see :func:`_source`)."""
    if i is None:
        return value
    if i == "flag":  # the flag queue of the key of call j (a relocated copy's own queue)
        return unit.flags[ops[j][2]]
    if i == "unit":  # something of the stream or its launch that stays put
        return j(unit)
    if i == "entry":  # the replayed entry itself, or one of its queue changes
        return j(entry)
    return ops[i][j]


#: what a generated function reads from its stream and launch once per copy (constants), by local name: none of
#: them is replaced during a launch (the pipe clock lists are: PIPE_ALL barriers make new ones)
_STREAM_CONSTANTS = {
    "ic": lambda u: u.issue_cycles, "fc": lambda u: u.flag_cycles, "depth": lambda u: u.depth,
    "flags": lambda u: u.flags, "book_gm": lambda u: u.launch.book_gm,
    "block": lambda u: float(u.block_idx), "sub": lambda u: float(u.sub_index),
    "l2": lambda u: u.launch.l2, "book_split": lambda u: u.launch.book_split,
    "l2_cal": lambda u: u.launch.l2_cal, "l2_used": lambda u: u.launch.l2_cal.used,
    "l2_w": lambda u: u.launch.l2_cal.bucket_cycles, "l2_cap": lambda u: u.launch.l2_cal.capacity,
}


def _layout(rows: list, arrows: list, flag_cycles: float) -> StepLayout:
    """The layout of a block of rows (full form: (constant columns, start expression or None for a SetFlag's, end
    expression)) and arrows (7 values each: a variable's name, a constant, or None for the stream's core and
    sub-core)."""
    table = np.array([r[0] for r in rows], np.float64).reshape(-1, 7)
    table[[start is None for _, start, _ in rows], 2] = np.nan  # worked out at the flush
    values = np.array([[0.0 if v is None or type(v) is str else float(v) for v in a] for a in arrows],
                      np.float64).reshape(-1, 7)
    return StepLayout(table, flag_cycles, values)


def _pipe_queue(p: int):
    """Getter of the stream's queue of issue cycles of pipe *p* (CoreUnit.qstarts)."""
    return lambda unit: unit.qstarts[p]


def _source(ops, scalar_pipe: int, pending: dict, restore: tuple, flag_cycles: float) -> tuple[str, list]:
    """The source of the function ``_step(unit, gm_bases, <constants>)`` (the constants are the defaults of its
    last parameters, :func:`compiled`), and where each of its constants comes from (:func:`_constant`): (op
    index, field index, None) for a field of a call (a copy relocated to another stream has its own there),
    ("flag", op index, None) for the stream's queue of that call's flag, ("unit", getter, None) for what the
    getter reads from the stream or its launch, ("entry", getter, None) for what it reads from the entry, (None,
    None, value) otherwise. *restore*: how many slots, ring positions and queued orders the step changes (its
    entry's ``slots_after``, ``next_after``, ``queued_after``); *flag_cycles*: the stream's flag cost (its
    blocks' layouts derive set rows' starts with it)."""
    consts: list = []
    names: list = []  # the constants' local names
    ids: dict = {}
    origin: dict = {}  # id of a call's field -> its first (op index, field index)
    for i, op in enumerate(ops):
        for j, value in enumerate(op):
            origin.setdefault(id(value), (i, j))

    def lit(value) -> str:
        """*value* as a literal when it reads back as itself, else a name for it among the constants."""
        kind = type(value)
        if value is None or kind is bool or kind is int or (kind is float and math.isfinite(value)):
            return repr(value)
        i = ids.get(id(value))
        if i is None:
            i = ids[id(value)] = len(consts)
            at = origin.get(id(value))
            consts.append((None, None, value) if at is None else at + (None,))
            names.append(f"c{i}")
        return f"c{i}"

    def bound(name: str, item: tuple) -> str:
        """*name* for a constant of the stream (*item*: its spec), added once."""
        if name not in names:
            consts.append(item)
            names.append(name)
        return name

    def flag_queue(key) -> str:
        """The stream's queue of flag *key* (one the step's key says exists: a pending flag)."""
        at = origin[id(key)][0]
        return bound(f"fq{at}", ("flag", at, None))

    pipes = sorted({op[1] for op in ops if op[0] <= C_WAIT and op[1] >= 0})
    waits = any(op[0] == C_WAIT for op in ops)
    body: list[str] = []
    pending_rows: list[str] = []
    pending_flows: list[tuple] = []  # per flag arrow its 7 values' expressions
    put = body.append

    held = {key: [] for key in pending}  # per flag, the sets of this step not taken yet: (fire variable, pipe)

    def release_held(indent: str) -> None:
        """The sets of this step no wait has taken, appended to the stream's flag table."""
        for key, sets in held.items():
            for fire, src in sets:
                put(f"{indent}{flag_queue(key)}.append(({fire}, {src}))")

    def writeback(indent: str) -> None:
        put(f"{indent}unit.scalar_t = scalar")
        for p in pipes:
            put(f"{indent}pfree[{p}] = f{p}; pdone[{p}] = d{p}")

    def reload_outs(indent: str) -> None:
        put(f"{indent}scalar = unit.scalar_t; horizon = unit.horizon; out = unit.records; flows = unit.flows; "
            "blocks = unit.blocks; fblocks = unit.flow_blocks")

    def reload_pipes(indent: str) -> None:
        put(f"{indent}pfree = unit.pipe_free; pdone = unit.pipe_done")
        for p in pipes:
            put(f"{indent}f{p} = pfree[{p}]; d{p} = pdone[{p}]")

    def emit(indent: str = "    ", keep: bool = False) -> None:
        """The rows (and flag arrows) made since the last hand-over, handed to the stream as one block (its
        layout: what is the same at every replay; then the cycles the layout does not hold packed as float64
        bytes: CoreUnit.blocks); the arrows as one block likewise (CoreUnit.flow_blocks)."""
        if not (pending_rows or pending_flows):
            return
        layout = lit(_layout(pending_rows, pending_flows, flag_cycles))
        if pending_rows:
            cycles = [v for _, start, end in pending_rows for v in (start, end)]
            pack = lit(_packer([v is not None for v in cycles]))
            put(f"{indent}blocks.append((len(out), {layout}, {pack}({', '.join([v for v in cycles if v])}))); "
                f"unit.block_rows += {len(pending_rows)}")
        if pending_flows:
            values = [v for arrow in pending_flows for v in arrow]
            pack = lit(_packer([type(v) is str for v in values]))
            put(f"{indent}fblocks.append((len(flows), {layout}, {pack}"
                f"({', '.join([v for v in values if type(v) is str])})))")
        if not keep:
            pending_rows.clear()
            pending_flows.clear()

    def book(i: int, p: int, gm: str, where: str, nbytes, rate, write: bool) -> None:
        """Launch.book_gm of a transfer of *nbytes* at *rate* from s<i>, its end in f<p>: the buffer's touch
        called as there (the L2 residency model, and what tests count), a transfer wholly in L2 that fits its
        first bucket booked here (BandwidthCalendar.book's first bucket: the same expressions on the same floats,
        ``nbytes * hit`` and ``rate * hit`` being nbytes and rate), the rest (misses: a page's first transfer,
        split hits) through Launch.book_split, which books them by the same expressions."""
        if nbytes <= 0:
            put(f"    f{p} = book_gm({gm}, {where}, {lit(nbytes)}, s{i}, {lit(rate)}, {lit(write)})")
            return
        put(f"    h = {gm}.touch({where}, {lit(nbytes)})")
        if write:  # a write's hit is L2's capacity scale (L2Model.hit_scale)
            put("    h = l2.scale")
        nb, r = lit(float(nbytes)), lit(rate)
        put("    if h == 1.0:")
        put(f"        b = int(s{i} // l2_w)")
        put("        u = l2_used.get(b, 0.0)")
        put(f"        span = (b + 1) * l2_w - s{i}")
        put(f"        can = {r} * span")
        put("        room = l2_cap - u")
        put("        if can > room:")
        put("            can = room")
        put(f"        if {nb} <= can:")
        put(f"            l2_used[b] = u + {nb}")
        put(f"            f{p} = s{i} + {nb} / (can / span if can > 0 else {r})")
        put("        else:")
        put(f"            f{p} = l2_cal.book(s{i}, {nb}, {r})")
        put("    else:")
        put(f"        f{p} = book_split(s{i}, {lit(nbytes)}, {r}, h)")

    def row(pipe: int, name_id, start: str | None, end: str, nbytes, flops, line) -> None:
        """A row: its constant columns (start and end 0) and its cycles' expressions (*start* None for a
        SetFlag's: its end less the flag cost)."""
        pending_rows.append(((pipe, name_id, 0, 0, nbytes, flops, line), start, end))

    for i, op in enumerate(ops):
        kind = op[0]
        if kind <= C_GM_REL:  # CoreUnit.issue / transfer
            _, p, name_id, occupancy, latency, nbytes, flops, line, gm, gm_byte, gm_write = op
            put("    t = scalar + ic")
            put(f"    if len(q{p}) >= depth:")
            put(f"        o = q{p}.popleft()")
            put("        if o > t:")
            put("            t = o")
            put("    scalar = t")
            put(f"    s{i} = t if t > f{p} else f{p}")
            if kind == C_ISSUE:
                put(f"    f{p} = s{i} + {lit(occupancy)}")
            else:
                where = (f"gm_bases[{gm_byte[0]}]" + (f" + {gm_byte[1]}" if gm_byte[1] else "")
                         if kind == C_GM_REL else lit(gm_byte))
                book(i, p, lit(gm), where, nbytes, occupancy, gm_write)
            put(f"    e{i} = f{p} + {lit(latency)}")
            put(f"    if e{i} > d{p}:")
            put(f"        d{p} = e{i}")
            put(f"    q{p}.append(s{i})")
            row(p, name_id, f"s{i}", f"e{i}", nbytes, flops, line)
            put("    if t > horizon:")  # a time slice, as CoreUnit.catch_up after the issue
            writeback("        ")
            # rows stay with the step until its end (one block): the slice does not hand rows over
            put("        unit.catch_up(False)")
            reload_outs("        ")
        elif kind == C_BARRIER:
            _, p, label_id, line = op
            if p < 0:  # PIPE_ALL: on the stream's lists, as the loop does
                put("    t = scalar + ic")
                put("    scalar = t")
                writeback("    ")
                put(f"    e{i} = max(max(pdone), t)")
                put(f"    pfree[:] = [e{i}] * len(pfree)")
                put(f"    pdone[:] = [e{i}] * len(pdone)")
                put(f"    scalar = e{i}")
                put(f"    s{i} = t")
                reload_pipes("    ")
            else:  # the issue cycle is the loop's t (scalar + ic), held in scalar itself
                put("    scalar += ic")
                put(f"    e{i} = d{p}")
                put(f"    if scalar > e{i}:")
                put(f"        e{i} = scalar")
                put(f"    s{i} = f{p}")
                put(f"    f{p} = e{i}")
                put(f"    if e{i} < s{i}:")
                put(f"        s{i} = e{i}")
            row(FLOWCTRL, label_id, f"s{i}", f"e{i}", 0, 0, line)
        elif kind == C_SET:
            _, p, key, label_id, line = op
            put("    scalar += ic")
            put(f"    e{i} = (d{p} if d{p} > scalar else scalar) + fc")
            put(f"    if e{i} > f{p}:")
            put(f"        f{p} = e{i}")
            put(f"    if e{i} > d{p}:")
            put(f"        d{p} = e{i}")
            if key in held:  # kept here until a wait of this step takes it or the step ends
                held[key].append((f"e{i}", p))
            else:
                put(f"    q = flags.get({lit(key)})")
                put("    if q is None:")
                put(f"        q = flags[{lit(key)}] = deque()")
                put(f"    q.append((e{i}, {p}))")
            row(FLOWCTRL, label_id, None, f"e{i}", 0, 0, line)
        elif kind == C_WAIT:
            _, p, key, label_id, what, line = op
            if key in held and not pending.get(key) and held[key]:  # the set of this step it takes
                fire, src = held[key].pop(0)
            elif key in held and pending.get(key):  # a set from before the step, in the stream's table
                pending[key] -= 1
                put(f"    a{i}, b{i} = {flag_queue(key)}.popleft()")
                fire, src = f"a{i}", f"b{i}"
            else:
                put(f"    q = flags.get({lit(key)})")
                put("    if not q:")  # never after a full key match; raise as the interpreted call would
                emit("        ", keep=True)
                release_held("        ")
                writeback("        ")
                put(f"        unit.wait_flag({p}, {lit(key)}, {lit(label_id)}, {lit(what)}, 0, {lit(line)})")
                put(f"    a{i}, b{i} = q.popleft()")
                fire, src = f"a{i}", f"b{i}"
            put("    scalar += ic")
            put(f"    s{i} = f{p} if f{p} > scalar else scalar")
            put(f"    e{i} = ({fire} if {fire} > s{i} else s{i}) + fc")
            put(f"    f{p} = e{i}")
            put(f"    if e{i} > d{p}:")
            put(f"        d{p} = e{i}")
            if p == scalar_pipe:
                put(f"    if e{i} > scalar:")
                put(f"        scalar = e{i}")
            row(FLOWCTRL, label_id, f"s{i}", f"e{i}", 0, 0, line)
            # an arrow's 7 values: variables' names, constants (the layout's), the stream's core and sub-core (None)
            pending_flows.append((src, fire, p, f"e{i}", label_id, None, None))
        else:  # cross-core flags run live: a wait may suspend until the peer's set
            emit()
            release_held("    ")
            for key in held:  # what the table holds now is read from it
                pending[key] += len(held[key])
                held[key] = []
            writeback("    ")
            call = "cross_wait" if kind == C_XWAIT else "cross_set"
            put(f"    unit.launch.{call}(unit, {lit(op[1])}, {lit(op[2])}, {lit(op[3])}, 0, {lit(op[4])})")
            reload_outs("    ")
            reload_pipes("    ")
    emit()
    release_held("    ")
    writeback("    ")
    after_step(restore, put, bound)

    gm = any(C_GM <= op[0] <= C_GM_REL for op in ops)
    wanted = ["ic", "fc", "depth", "flags"] + (["block", "sub"] if waits else [])
    if gm:  # book(): the bandwidth calendars and the L2 model
        wanted += ["book_gm", "l2", "book_split", "l2_cal", "l2_used", "l2_w", "l2_cap"]
    for name in wanted:
        bound(name, ("unit", _STREAM_CONSTANTS[name], None))
    for p in pipes:
        bound(f"q{p}", ("unit", _pipe_queue(p), None))
    head = ["    scalar = unit.scalar_t; horizon = unit.horizon; pfree = unit.pipe_free; pdone = unit.pipe_done",
            "    out = unit.records; flows = unit.flows; blocks = unit.blocks; fblocks = unit.flow_blocks"]
    for p in pipes:
        head.append(f"    f{p} = pfree[{p}]; d{p} = pdone[{p}]")
    lines = [f"def _step(unit, gm_bases, {'=None, '.join(names)}=None):"] + head + body
    return "\n".join(lines) + "\n", consts


def after_step(restore: tuple, put, bound) -> None:
    """The lines of a generated step after its calls (what npusim/replay.py's ``_run`` does after the loop): the
    flush of a full chunk, the queue changes of the recorded call, the stream's mark of the step replayed last.
    *put* adds a line, *bound* names a constant of the entry (``bound(name, spec item)``)."""
    # the step's time slices left the rows to its end (CoreUnit.chunk_full)
    put(f"    if len(unit.records) + 7 * unit.block_rows >= {CHUNK_VALUES}:")
    put("        unit.flush()")
    n_slots, n_next, n_queued = restore
    for k in range(n_slots):
        slot, st, freed = (bound(f"{name}{k}", ("entry", _entry_item("slots_after", k, i), None))
                           for i, name in enumerate(("rs", "rst", "rfr")))
        put(f"    {slot}.state = {st}; {slot}.freed = {freed}")
    for k in range(n_next):
        q, nxt = (bound(f"{name}{k}", ("entry", _entry_item("next_after", k, i), None))
                  for i, name in enumerate(("rn", "rnx")))
        put(f"    {q}._next = {nxt}")
    for k in range(n_queued):
        q, queued = (bound(f"{name}{k}", ("entry", _entry_item("queued_after", k, i), None))
                     for i, name in enumerate(("rq", "rqd")))
        put(f"    {q}._queued = deque({queued})")
    entry = bound("entry", ("entry", _itself, None))
    put("    records = unit.records")
    put(f"    unit.replayed = ({entry}, records, len(records))")


def _entry_item(field: str, k: int, i: int):
    """Getter of item *i* of the *k*-th queue change in an entry's *field*."""
    return lambda entry: getattr(entry, field)[k][i]


def _itself(entry):
    return entry
