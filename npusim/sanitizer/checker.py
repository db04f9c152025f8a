"""The schedule sanitizer of one launch: hooks, happens-before bookkeeping and the checks.

:meth:`Sanitizer.attach` swaps sanitizing versions of ``issue`` / ``transfer`` / ``set_flag`` /
``wait_flag`` / ``barrier`` into each CoreUnit, and of ``cross_set`` / ``cross_wait`` / ``sync_all`` into
the Launch, as instance attributes: an unsanitized launch runs the engine's own methods, untouched.
Each wrapper calls the engine first, then finds the instruction object on the call stack (its class
declares the bytes it touches, regions.py), updates the stream's clocks (clocks.py) and checks every
range against the memory's shadow (shadow.py). Nothing here reads a simulated cycle except to label
reports: happens-before comes only from the synchronisation the kernel issued.

Uninitialised bytes: kernels routinely read and compute over the padding rows, columns and lanes of a
tile (vector repeats, cube fractals, workspace rows) whose results never leave the core, and the
sanitizer does not propagate taint (docs/sanitizer.md). So a store to GM (MTE3, FixPipe) is reported
if any local byte it reads was never written; any other read of a local buffer (UB, L1, L0A/B/C), and a
read of the GM workspace, if none of its bytes was (shadow.InitMap: a bitmap of 32-byte blocks per
memory, each range judged once).

Same-pipe rule (``pipe-barrier``): pipes V and M start an instruction before the previous one's
results are written; a dependent instruction is safe once a PipeBarrier on the pipe (or a flag from it)
intervened, or once the occupancy issued to the pipe in between covers the producer's latency. Mmad
streams its output fractals: an Mmad that reads (accumulates into) L0C another Mmad just wrote needs the
barrier only when that producer writes fewer than MMAD_SETTLE_FRACTALS fractals. MTE and FIX pipes
complete in order and are not checked.
"""
from __future__ import annotations

import gc
from collections import deque
from sys import _getframe

from npusim.errors import KernelHangError, NpuBufferError
from npusim.isa.cube import MMAD_SETTLE_FRACTALS
from npusim.memory.local import LocalBuffer, LocalTensor
from npusim.sanitizer.clocks import STRIDE, StreamClock, merge
from npusim.sanitizer.regions import RULES, declared, end_of, rule_of
from npusim.sanitizer.report import SanitizerReport
from npusim.sanitizer.shadow import (
    COMPLETE,
    TOUCHED,
    UNJUDGED,
    Geometry,
    InitBits,
    InitMap,
    Shadow,
)
from npusim.types import Pipe, SubCore

_V, _M, _S = int(Pipe.V), int(Pipe.M), int(Pipe.S)
LATENT_PIPES = (_V, _M)
OUT_PIPES = (int(Pipe.MTE3), int(Pipe.FIX))

LOCAL_BUCKET = 2048
GM_BUCKET = 64 * 1024
#: GM buffers with these names start uninitialised (the launch's scratch memory); others are inputs
#: or outputs the host has filled.
UNINITIALISED_GM = ("workspace",)
#: Largest GM buffer whose written blocks are tracked (32 B per bit of a bool array).
MAX_INIT_GM_BYTES = 4 << 30
#: Instructions whose local operands must start on the buffer's alignment (ChipSpec.*_align_bytes,
#: hardware.md §5); vector instructions address UB in 32-byte blocks, which LocalTensor already enforces.
_ALIGNED_NAMES = {"LoadData", "Mmad", "Fixpipe", "DataCopy", "DataCopyPad"}

# record: (stream, pipe, epoch, occupancy issued to the pipe after it, exposure, source id, cycle, name id,
# atomic)
_ST, _PI, _EP, _OCC, _EXP, _SRC, _CYC, _NAME, _ATOM = range(9)


class Sanitizer:
    """Checks one launch; :attr:`report` holds what it found."""

    def __init__(self, collector=None):
        #: the enclosing sanitizing() block's Session (session.py): gathers this launch's reports and keeps
        #: the GM initialisation state of the block's earlier launches; None for a launch sanitized alone
        self.collector = collector
        self.hosts: dict = {}  # id(GmBuffer) -> the host object (array, TensorSpec) it was made from
        self.report = SanitizerReport()
        self.launch = None
        self.units: list = []
        self.clocks: list[StreamClock] = []
        self.local: dict = {}  # LocalBuffer -> (Shadow, alignment, InitBits)
        self.geometries: dict = {}  # (BufferKind, capacity) -> the Geometry every core's such buffer shares
        self.gm: dict = {}  # id(GmBuffer) -> (GmBuffer, Shadow, InitMap or None)
        self.flags: list[dict] = []  # per stream: flag key -> deque of (message, explicit, source id, pipe)
        self.xflags: dict = {}  # launch.xflags key -> deque of remote clocks
        self.sync_gens: dict = {}  # group -> list of joined remote clocks, one per SyncAll
        self.sync_count: list[int] = []
        self.slot_uses: dict = {}  # (id(TQue), buffer index) -> (source id, pipe, cycle) of its last hand-off

    # -- attaching ---------------------------------------------------------------------------------
    def attach(self, launch) -> None:
        self.launch = launch
        launch.sanitizer = self
        orig_set, orig_wait, orig_sync = launch.cross_set, launch.cross_wait, launch.sync_all
        orig_gm = launch.gm

        def gm(name, array):  # remember the host memory behind each GM buffer (GM state across launches)
            buf = orig_gm(name, array)
            self.hosts[id(buf)] = array
            return buf

        def cross_set(unit, flag_id, pipe, label_id, depth):
            orig_set(unit, flag_id, pipe, label_id, depth + 1)
            self.flags[unit.san_idx][("xcore", flag_id)].pop()
            msg = self.clocks[unit.san_idx].export(pipe)
            for key in launch._peers(unit, flag_id, setting=True):
                self.xflags.setdefault(key, deque()).append(msg)

        def cross_wait(unit, flag_id, pipe, label_id, depth):
            orig_wait(unit, flag_id, pipe, label_id, depth + 1)
            clock = self.clocks[unit.san_idx]
            for key in launch._peers(unit, flag_id, setting=False):
                clock.receive(pipe, self.xflags[key].popleft())

        def sync_all(unit, label_id, depth):
            group = unit.sub is SubCore.AIC
            gens = self.sync_gens.setdefault(group, [])
            gen = self.sync_count[unit.san_idx]
            self.sync_count[unit.san_idx] += 1
            if gen == len(gens):
                gens.append({})
            clock = self.clocks[unit.san_idx]
            gens[gen] = merge(gens[gen], clock.export_all())
            orig_sync(unit, label_id, depth + 1)
            clock.drain()
            clock.receive(-1, gens[gen])

        orig_run = launch.run

        def run():  # NOTE: no cyclic garbage collection while the shadow state grows, for performance reasons:
            # its growth (a few containers per new range) sets collections off, which cost about a quarter of
            # the sanitizer's CPU time at S=1024 (docs/sanitizer.md "Cost"). The launch's cycles go at the next
            # collection after it.
            enabled = gc.isenabled()
            gc.disable()
            try:
                return orig_run()
            finally:
                if enabled:
                    gc.enable()

        launch.cross_set, launch.cross_wait, launch.sync_all, launch.gm = cross_set, cross_wait, sync_all, gm
        launch.run = run

    def attach_unit(self, unit) -> None:
        idx = len(self.units)
        unit.san_idx = idx
        self.units.append(unit)
        clock = StreamClock(idx)
        self.clocks.append(clock)
        self.flags.append({})
        self.sync_count.append(0)
        flags = self.flags[idx]
        slot_uses = self.slot_uses
        src_id = unit.launch.src_id
        orig_issue, orig_transfer = unit.issue, unit.transfer
        orig_set, orig_wait, orig_barrier = unit.set_flag, unit.wait_flag, unit.barrier
        instr = self._instruction

        # NOTE: the kernel line is the last field of the record the engine just appended (a flush to the
        # trace sink empties the list: then it is looked up again), for performance reasons
        def issue(name_id, pipe, occupancy, latency, nbytes=0, flops=0, depth=2):
            start = orig_issue(name_id, pipe, occupancy, latency, nbytes, flops, depth + 1)
            recs = unit.records
            instr(unit, clock, _getframe(1), pipe, occupancy, latency, start, name_id,
                  recs[-1] if recs else src_id(depth + 1), depth)
            return start

        def transfer(name_id, pipe, path, nbytes, gm=None, gm_byte=0, gm_write=False, depth=2):
            free = unit.pipe_free[pipe]
            start = orig_transfer(name_id, pipe, path, nbytes, gm, gm_byte, gm_write, depth + 1)
            occupancy = unit.pipe_free[pipe] - max(start, free)
            latency = unit.path_costs[(path, nbytes)][1]
            recs = unit.records
            instr(unit, clock, _getframe(1), pipe, occupancy, latency, start, name_id,
                  recs[-1] if recs else src_id(depth + 1), depth)
            return start

        def set_flag(src, key, label_id, depth=2):
            fire = orig_set(src, key, label_id, depth + 1)
            q = flags.get(key)
            if q is None:
                q = flags[key] = deque()
            explicit = _getframe(1).f_code.co_name == "SetFlag"
            recs = unit.records  # the line of the row set_flag just appended (see issue above)
            line = recs[-1] if recs else src_id(depth + 1)
            q.append((clock.set_msg(src), explicit, line, src, fire))
            if type(key) is tuple and len(key) == 3:  # a TQue buffer's EnQue / FreeTensor: its last use
                slot_uses[(id(unit.queues[key[0]]), key[1])] = (line, src, fire)
            return fire

        def wait_flag(dst, key, label_id, what, depth=2):
            release = orig_wait(dst, key, label_id, what, depth + 1)
            msg = flags[key].popleft()[0]
            if type(key) is tuple and len(key) == 3:  # a TQue buffer's DeQue / AllocTensor
                recs = unit.records
                slot_uses[(id(unit.queues[key[0]]), key[1])] = (recs[-1] if recs else src_id(depth + 1), dst, release)
            clock.join(dst, msg)
            return release

        vcs, epochs = clock.vc, clock.epoch  # (lists the clock updates in place)

        def barrier(pipe, label_id, depth=2):
            orig_barrier(pipe, label_id, depth + 1)
            if pipe >= 0:  # NOTE: StreamClock.barrier's common case inlined (speed)
                vcs[pipe][pipe] = epochs[pipe]
            else:
                clock.barrier(pipe)

        unit.issue, unit.transfer = issue, transfer
        unit.set_flag, unit.wait_flag, unit.barrier = set_flag, wait_flag, barrier

    # -- one instruction ---------------------------------------------------------------------------
    def _instruction(self, unit, clock, f, pipe, occupancy, latency, start, name_id, src, depth) -> None:
        """Clocks and checks of one instruction; *f*: the frame that issued it (its method, as a rule)."""
        ins = f.f_locals["self"] if _INSTRUCTION_CODE.get(f.f_code) else _instruction_of(f, depth)
        occ_before = clock.occ[pipe]
        exposure = latency
        if pipe == _M and ins is not None and hasattr(ins, "m"):
            exposure = latency if -(-ins.m // 16) * -(-ins.n // 16) < MMAD_SETTLE_FRACTALS else 0.0
        epoch = clock.epoch[pipe] = clock.epoch[pipe] + 1
        clock.occ[pipe] = occ_before + occupancy
        if ins is None:
            return
        # unit.atomic: the SetAtomicAdd dtype in force, or None
        rec = (clock.idx, pipe, epoch, occ_before + occupancy, exposure, src, start, name_id, unit.atomic is not None)
        # NOTE: the local-buffer check is written flat here (cells as lists indexed by constants, no helper
        # call on the common path), for performance reasons: it runs for every local operand of every
        # instruction (benchmarks/sanitizer.py)
        vc = clock.vc[pipe]
        local = self.local
        latent = pipe in LATENT_PIPES
        fn = RULES.get(ins.__class__)
        todo = (fn or rule_of(ins.__class__))(ins)
        if todo is None:
            todo = declared(ins, unit.buffers)
        for space, r, write in todo:
            if space.__class__ is not LocalBuffer:
                if r[1] > 0:
                    self._global(unit, clock, pipe, rec, space, r, write, ins)
                continue
            entry = local.get(space)
            if entry is None:
                entry = self._new_local(unit, space)
            shadow = entry[0]
            if r[0] % entry[1] and ins.name in _ALIGNED_NAMES and r[1] > 0:
                self._report("misaligned", rec, None, shadow.name, r, f"{ins.name} at byte {r[0]} of {space.kind}: "
                             f"{space.kind} accesses must be {entry[1]}-byte aligned")
            near = shadow.near.get(r)
            if near is None:
                if r[1] <= 0:
                    continue
                near = self._new_range(rec, shadow, space, r)
            for c in near:
                w = c[0]  # the last write of the range (a local cell keeps one)
                if w is not None:
                    p = w[1]
                    if p != pipe:
                        if vc[p] < w[2]:
                            self._report("pipe-hazard", rec, w, shadow.name, _common(r, c[2]),
                                         f"{'write' if write else 'read'} after write with no {Pipe(p)} -> "
                                         f"{Pipe(pipe)} synchronisation (SetFlag/WaitFlag or a queue)")
                    elif latent and not write and vc[pipe] < w[2] and occ_before - w[3] < w[4]:
                        self._report("pipe-barrier", rec, w, shadow.name, _common(r, c[2]),
                                     f"read of {Pipe(pipe)} results {occ_before - w[3]:.0f} cycles of issue after "
                                     f"their producer, whose latency is {w[4]:.0f}: PipeBarrier({Pipe(pipe)}) missing")
                if write and c[1]:
                    for rd in c[1].values():
                        p = rd[1]
                        if p != pipe and vc[p] < rd[2]:
                            self._report("pipe-hazard", rec, rd, shadow.name, _common(r, c[2]),
                                         f"write after read with no {Pipe(p)} -> {Pipe(pipe)} synchronisation")
            own = near[0]
            if write:
                for c in own[5]:
                    c[0] = None
                    c[1] = None
                own[0] = rec
                if not own[4]:
                    own[4] = True
                    entry[2].write(r)
                continue
            reads = own[1]
            if reads is None:
                own[1] = {pipe: rec}
            else:
                reads[pipe] = rec
            if own[3] != COMPLETE:  # every block written: nothing left to judge (the common case: one look-up)
                store = pipe in OUT_PIPES and _stores_to_gm(ins)
                if store or own[3] == UNJUDGED:
                    self._judge_local(own, entry[2], rec, shadow.name, space, r, store, ins)

    def _new_local(self, unit, buf) -> tuple:
        """(Shadow, InitBits, alignment) of a local buffer met for the first time."""
        geometry = self.geometries.get((buf.kind, buf.capacity))
        if geometry is None:
            geometry = self.geometries[(buf.kind, buf.capacity)] = Geometry(LOCAL_BUCKET)
        entry = self.local[buf] = (Shadow(f"{unit.label} {buf.kind}", geometry, None), buf.align, InitBits(geometry))
        return entry

    def _new_range(self, rec, shadow, buf, r) -> list:
        """The near list of a range met for the first time in a local buffer; its extent checked once."""
        near = shadow.register(r)
        if end_of(r) > buf.capacity:
            self._report("out-of-bounds", rec, None, shadow.name, r, f"past the {buf.kind} capacity")
        return near

    def _judge_local(self, cell, init, rec, memory, buf, r, store, ins) -> None:
        """Uninitialised local bytes: a store to GM must have every block written, another read some."""
        verdict, bad = init.judge(r)
        if verdict == COMPLETE or (verdict == TOUCHED and not store):
            cell[3] = verdict
            return
        if not store:  # a range of padding in an allocation the kernel did fill (e.g. a chunk of padding
            # columns converted with the rest of a tile) is not a fault; a read of an allocation (TBuf, queue
            # slot) nothing ever wrote is
            alloc = _allocation(ins, buf, r[0])
            if alloc is not None and init.judge((alloc[0], alloc[1] - alloc[0], 1, 0))[0] != UNJUDGED:
                cell[3] = TOUCHED
                return
        cell[3] = COMPLETE  # reported once
        what = "bytes no instruction of this core has written (stored to GM)" if store else \
            "bytes of an allocation no instruction of this core has written"
        self._report("uninitialised-read", rec, None, memory, (bad, BLOCK_BYTES, 1, 0),
                     f"{ins.name} reads {buf.kind} {what}")

    def _global(self, unit, clock, pipe, rec, gm, r, write, ins) -> None:
        entry = self.gm.get(id(gm))
        if entry is None:
            nbytes = gm.size * gm.dtype.itemsize
            init = None
            if gm.name in UNINITIALISED_GM and nbytes <= MAX_INIT_GM_BYTES:
                host = self.hosts.get(id(gm))
                init = (self.collector.gm_init(host, nbytes) if self.collector is not None and host is not None
                        else InitMap(nbytes))
            entry = self.gm[id(gm)] = (gm, Shadow(f"GM {gm.name}", Geometry(GM_BUCKET), ()), init)
        _, shadow, init = entry
        near = shadow.near.get(r)
        if near is None:
            near = shadow.register(r)
            if r[0] < 0 or end_of(r) > gm.size * gm.dtype.itemsize:
                self._report("out-of-bounds", rec, None, shadow.name, r, f"outside GM {gm.name}")
        me = clock.idx
        vc, rc = clock.vc[pipe], clock.rc[pipe]
        atomic = rec[_ATOM] and write  # a load under SetAtomicAdd is a plain read: it races atomic stores
        for c in near:
            for w in c[0]:
                if atomic and w[_ATOM]:
                    continue
                if not self._ordered(w, me, pipe, vc, rc):
                    self._gm_report(rec, w, shadow.name, r, c[2], "write" if write else "read", "write")
            if write and c[1]:
                for rd in c[1].values():
                    if not self._ordered(rd, me, pipe, vc, rc):
                        self._gm_report(rec, rd, shadow.name, r, c[2], "write", "read")
        own = near[0]
        if write:
            if atomic:
                own[0] = tuple(w for w in own[0] if w[_ATOM]) + (rec,)
            else:
                for c in own[5]:
                    c[0] = ()
                    c[1] = None
                own[0] = (rec,)
            if init is not None and not own[4]:
                own[4] = True
                init.write(r)
            return
        if own[1] is None:
            own[1] = {}
        own[1][me * STRIDE + pipe] = rec
        if init is not None and own[3] == UNJUDGED:
            verdict, bad = init.judge(r)
            own[3] = COMPLETE if verdict == UNJUDGED else verdict  # reported once
            if verdict == UNJUDGED:
                self._report("uninitialised-read", rec, None, shadow.name, (bad, BLOCK_BYTES, 1, 0),
                             f"{ins.name} reads {gm.name} bytes nothing has written (this launch or an earlier "
                             "one of the session)")

    @staticmethod
    def _ordered(prev, me, pipe, vc, rc) -> bool:
        if prev[_ST] == me:
            return prev[_PI] == pipe or vc[prev[_PI]] >= prev[_EP]
        return rc.get(prev[_ST] * STRIDE + prev[_PI], 0) >= prev[_EP]

    def _gm_report(self, rec, other, memory, r, k, mine, theirs) -> None:
        cross = other[_ST] != rec[_ST]
        fault = "gm-race" if cross else "pipe-hazard"
        how = "cross-core flag or SyncAll" if cross else f"{Pipe(other[_PI])} -> {Pipe(rec[_PI])} flag"
        self._report(fault, rec, other, memory, _common(r, k), f"{mine} after {theirs} with no {how} between")

    # -- reports -----------------------------------------------------------------------------------
    def _where(self, rec) -> tuple:
        unit = self.units[rec[_ST]]
        return (unit.block_idx, int(unit.sub), rec[_PI], self.launch.names[rec[_NAME]], round(rec[_CYC]),
                self._source(rec[_SRC]))

    def _source(self, src_id) -> str:
        if src_id is None or src_id < 0:
            return ""
        fn, line = self.launch.sources[src_id]
        return f"{fn}:{line}"

    def _report(self, fault, rec, other, memory, r, message) -> None:
        self.report.add(fault, self._where(rec), self._where(other) if other is not None else None, memory,
                        r[0], end_of(r), message)

    # -- at kernel end ------------------------------------------------------------------------------
    def finish(self) -> SanitizerReport:
        self.report.launches = 1
        self.report.instructions = sum(u.flushed_rows + len(u.records) // 7 for u in self.units)
        for idx, flags in enumerate(self.flags):
            unit = self.units[idx]
            for key, q in flags.items():
                for msg, explicit, src, pipe, fire in q:
                    if explicit:
                        where = (unit.block_idx, int(unit.sub), pipe, "SetFlag", round(fire), self._source(src))
                        self.report.add("unbalanced-flag", where, None, message=f"SetFlag {_flag(key)} is never "
                                        "waited for before the kernel ends")
            for que in getattr(unit, "queues", ()):
                for slot in que.slots:
                    if slot.state != "free":
                        src, pipe, cyc = self.slot_uses.get((id(que), slot.index), (None, int(que.producer), None))
                        where = (unit.block_idx, int(unit.sub), pipe, "TQue", None if cyc is None else round(cyc),
                                 self._source(src))
                        self.report.add("queue-leak", where, None, f"{unit.label} TQue({que.position})",
                                        slot.addr, slot.addr + que.nbytes,
                                        f"TQue({que.position}) buffer {slot.index} is still '{slot.state}' at "
                                        "kernel end (FreeTensor missing)")
        return self.report

    def fault(self, unit, exc: Exception, src: str) -> None:
        """A kernel stopped by an error the sanitizer classifies (hang on a flag, bad access)."""
        fault = "unbalanced-flag" if isinstance(exc, KernelHangError) else (
            "misaligned" if "aligned" in str(exc) else "out-of-bounds")
        if not isinstance(exc, (KernelHangError, NpuBufferError)):
            return
        where = (unit.block_idx, int(unit.sub), None, "", None, src)
        self.report.add(fault, where, None, message=str(exc))


BLOCK_BYTES = 32
#: code object -> whether its frames' ``self`` is an instruction (isa classes' __init__ / issue)
_INSTRUCTION_CODE: dict = {}


def _instruction_of(f, depth: int):
    """The instruction object: the 'self' of the innermost instruction method among *depth* frames from *f*."""
    for _ in range(depth):
        code = f.f_code
        found = _INSTRUCTION_CODE.get(code)
        if found is None:  # NOTE: once per function, so other frames' locals are never built (speed)
            s = f.f_locals.get("self")
            found = _INSTRUCTION_CODE[code] = s is not None and hasattr(s, "execute")
        if found:
            return f.f_locals["self"]
        f = f.f_back
    return None


def _allocation(ins, buf, addr: int):
    """[base, limit) of the allocation of the local operand of *ins* in *buf* that holds byte *addr*, or None."""
    for cls in type(ins).__mro__:
        for name in getattr(cls, "__slots__", ()):
            value = getattr(ins, name, None)
            for t in (value if isinstance(value, tuple) else (value,)):
                if t.__class__ is LocalTensor and t.buffer is buf and t.base <= addr < t.limit:
                    return t.base, t.limit
    return None


def _stores_to_gm(ins) -> bool:
    dst = getattr(ins, "dst", None)
    return dst is not None and hasattr(dst, "gm")




def _common(a: tuple, b: tuple) -> tuple:
    """A byte range both share (for the report): the later start, the earlier end of the envelopes."""
    lo = max(a[0], b[0])
    hi = min(end_of(a), end_of(b))
    return (lo, max(hi - lo, 1), 1, 0)


def _flag(key) -> str:
    if isinstance(key, tuple) and len(key) == 2:
        return f"{key[0]}#{key[1]}"
    return str(key)
