"""Run a kernel on block_dim cores of a chip: the simulator's top level.

:func:`launch` builds one :class:`~npusim.core.CoreUnit` per instruction stream (per block: AIC + 2 AIV
on split chips for a ``mix`` kernel, one AIV or AIC for ``vector``/``cube`` kernels, one combined core on
310P), runs each stream's kernel function in a greenlet driven by a simpy process, and collects the
trace. Streams suspend only on cross-core flags, SyncAll and time synchronisation (core.py), so one kernel
source runs unchanged in full and timing mode.

Errors: a schedule that can never finish raises KernelHangError naming each blocked core, pipe and flag;
a run longer than the chip's AI Core timeout raises AclnnError(507014) with the predicted time.
"""
from __future__ import annotations

import bisect
import numbers
import sys
from collections import deque
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np
import simpy
from greenlet import greenlet

from npusim import __version__
from npusim.core import FLOWCTRL, REC_XWAIT, CoreUnit
from npusim.errors import (ACLNN_ERR_PARAM_INVALID, AclnnError, AicoreTimeoutError, KernelError, KernelHangError,
                           NpuBufferError, NpusimError)
from npusim.gc_policy import run_collector
from npusim.isa.vector.numerics import quiet_fp
from npusim.memory.bandwidth import BandwidthCalendar
from npusim.memory.gm import GmBuffer, L2Model
from npusim.progress import LaunchProgress
from npusim.trace import Trace
from npusim.trace_sink import FullSink, check_trace_level, make_sink
from npusim.types import Pipe, SubCore

KERNEL_TYPES = ("mix", "vector", "cube")
#: Instructions one launch may simulate (all streams) before it is stopped with AclnnError 161002: a
#: backstop above every operator's up-front guard (ops/common/guard.py: 162M in timing mode), for kernels
#: launched directly. About 20 minutes at 170,000 instructions/s; the trace then holds some 20 GB.
MAX_INSTRUCTIONS = 200_000_000
#: Suspensions of the streams between two checks of the instruction count (the check walks all streams).
_BUDGET_CHECK_EVERY = 256
ATOMIC_COMMIT_EVERY = 256  # queued atomic adds between two early-commit checks (Launch.atomic_add)


class _NameTable(dict):
    """Instruction and flag names -> name ids, numbered in first-use order (the trace's name table).

    NOTE: a dict that numbers a missing name itself, so the hot path is one subscript, for performance
    reasons (benchmarks/sim_speed.py).
    """

    def __init__(self):
        super().__init__()
        self.names: list[str] = []

    def __missing__(self, name: str) -> int:
        i = self[name] = len(self.names)
        self.names.append(name)
        return i


class _KernelGreenlet(greenlet):
    """A greenlet that knows the instruction stream it runs (the kernel API's 'current core')."""

    unit: CoreUnit


def current_unit() -> CoreUnit:
    """The CoreUnit whose kernel code is running now (kernel API calls without tensor operands)."""
    g = greenlet.getcurrent()
    try:
        return g.unit
    except AttributeError:
        raise NpusimError("kernel API called outside a running kernel (use npusim.launch)") from None


@dataclass
class TimeoutVerdict:
    """Predicted run time against the chip's AI Core timeout (hardware.md §8)."""

    predicted_s: float
    limit_s: float
    exceeded: bool
    advice: str = ""


@dataclass
class LaunchResult:
    """What a launch gives back: cycles, time, trace, timeout verdict."""

    cycles: int
    time_us: float
    trace: Trace
    timeout: TimeoutVerdict
    block_dim: int
    meta: dict = field(default_factory=dict)
    sanitizer: object = None  # SanitizerReport of a sanitize=True launch (npusim.sanitizer), else None
    atomic_log: list = field(default_factory=list)  # (gm name, block, sub, seq) per committed atomic add


class Launch:
    """Shared state of one kernel launch: environment, GM, bandwidth, flags, trace tables."""

    def __init__(self, chip, full: bool, timeout_s: float | None = None, sink=None, progress=None,
                 max_instructions: int = MAX_INSTRUCTIONS):
        self.chip = chip
        self.full = full
        self.sink = FullSink() if sink is None else sink  # where the streams' records go (trace_sink.py)
        self.progress = progress  # a progress.LaunchProgress, or None
        self.max_instructions = max_instructions
        self._suspensions = 0
        self.env = simpy.Environment()
        self.timeout_s = float(chip.aicore_timeout_s if timeout_s is None else timeout_s)
        self.timeout_cycles = self.timeout_s * chip.clock_hz
        self.l2 = L2Model(chip.l2_bytes)
        # chip-wide bandwidths in bytes per cycle (hardware.md §6c via ChipSpec)
        self.hbm = BandwidthCalendar("HBM", chip.hbm_bw_bytes_per_s / chip.clock_hz)
        # one budget for L2 reads and writes together, as for HBM: hardware.md §6c gives S8's read-only,
        # write-only and mixed DDR rates all as 850 B/cycle (mixed traffic shares one budget) and its L2
        # read-only / write-only rates as 2550 each; separate read and write calendars were tried and
        # contradict the FA board (docs/calibration.md "L2 budget")
        self.l2_cal = BandwidthCalendar("L2", chip.l2_bw_bytes_per_s / chip.clock_hz)
        self.units: list[CoreUnit] = []
        self._unit_index: dict = {}  # (block, sub-core) -> CoreUnit
        self.name_ids = _NameTable()  # name -> name id, in first-use order
        self.names: list[str] = self.name_ids.names
        self.sources: list[tuple[str, int]] = []
        self._src_index: dict = {}  # (code, line) -> source id
        self.src_at: dict = {}  # (id(code), bytecode offset) -> source id
        self._src_codes: list = []  # the code objects _src_at names
        self.path_costs: dict = {}  # (data path, bytes) -> chip.path_cost (rate, latency)
        self.shared_replays: dict = {}  # recordings of shared replayable steps (npusim/replay.py)
        self.xflags: dict = {}  # (block, flag id, dst sub, src sub) -> deque of fire cycles
        self.xwaiters: dict = {}
        self._barrier: dict = {}
        self.sanitizer = None  # npusim.sanitizer.Sanitizer when sanitizing (it swaps its hooks in)
        self.atomic_pending: list = []  # (start cycle, block, sub, seq, gm name, flat array, index, values)
        self.atomic_log: list = []  # (gm name, block, sub, seq) of each committed atomic write, in order
        self._atomic_check_at = ATOMIC_COMMIT_EVERY  # queue length at which atomic_add commits early

    # -- atomic accumulation into GM (SetAtomicAdd) ---------------------------------------------
    def atomic_add(self, unit: CoreUnit, gm_name: str, flat: np.ndarray, index: np.ndarray, values: np.ndarray,
                   start: float) -> None:
        """Queue ``flat[index] += values`` (full mode) issued by *unit* at cycle *start* (*flat* may be a view
        of the GM array and *index* Ellipsis).

        Why deferred: streams run a quantum apart in Python, so applying at issue would follow the
        interpreter's order. Queued writes are committed at the next SyncAll release and at the end of
        the launch, in simulated-time order (start cycle, then block, sub-core and the unit's issue
        order break ties), which makes a non-deterministic kernel's result reproducible per input.
        """
        unit.atomic_seq += 1
        self.atomic_pending.append((start, unit.block_idx, int(unit.sub), unit.atomic_seq, gm_name, flat, index,
                                    values))
        if len(self.atomic_pending) >= self._atomic_check_at:
            # no stream issues anything before its scalar clock (it only moves forward), so an add that started
            # before every live stream's clock precedes every later add: commit those now (same order as at
            # the end; the queue would otherwise hold every value of a long main loop, benchmarks/sfag.py)
            self.commit_atomics(before=min(u.scalar_t for u in self.units if not u.finished))
            self._atomic_check_at = len(self.atomic_pending) + ATOMIC_COMMIT_EVERY

    def commit_atomics(self, before: float = float("inf")) -> None:
        """Apply the queued atomic adds that started before cycle *before* in simulated-time order (fp32 adds,
        round to nearest even); the rest stay queued."""
        if not self.atomic_pending:
            return
        pending = sorted(self.atomic_pending, key=lambda w: w[:4])
        cut = bisect.bisect_left([w[0] for w in pending], before)
        self.atomic_pending = pending[cut:]
        with np.errstate(all="ignore"):
            for start, block, sub, seq, name, flat, index, values in pending[:cut]:
                flat[index] = flat[index] + values
                self.atomic_log.append((name, block, sub, seq))

    # -- tables for the trace ----------------------------------------------------------------
    def name_id(self, name: str) -> int:
        return self.name_ids[name]

    def number_line(self, code, lineno: int) -> int:
        """The launch's number of source line *lineno* of *code*, given now if it has none (the trace's src_id)."""
        key = (code, lineno)
        i = self._src_index.get(key)
        if i is None:
            i = self._src_index[key] = len(self.sources)
            self.sources.append((code.co_filename, lineno))
        return i

    def src_id(self, depth: int) -> int:
        """Index of the source line *depth* frames above the caller of this method."""
        frame = sys._getframe(depth)
        code = frame.f_code
        # NOTE: looked up by (code identity, bytecode offset) first, for performance reasons: hashing a code
        # object hashes its contents, and f_lineno decodes the line table. An offset lies on one line, so
        # the ids are still those of the lines; _src_codes keeps each code alive, so its id stays its own.
        at = (id(code), frame.f_lasti)
        i = self.src_at.get(at)
        if i is None:
            i = self.number_line(code, frame.f_lineno)
            self.src_at[at] = i
            self._src_codes.append(code)
        return i

    def src_text(self, depth: int) -> str:
        frame = sys._getframe(depth)
        return f"{frame.f_code.co_filename}:{frame.f_lineno}"

    # -- global memory -----------------------------------------------------------------------
    def gm(self, name: str, array) -> GmBuffer:
        """Wrap an operator tensor (numpy array or TensorSpec) as a GM buffer of this launch."""
        return GmBuffer(name, array, self.l2)

    def book_gm(self, gm: GmBuffer, byte_start: int, nbytes: int, start: float, rate: float,
                write: bool) -> float:
        """Move *nbytes* of *gm* at up to *rate* B/cycle from *start*; return the end cycle.

        Reads of pages resident in L2 use the L2 calendar, the rest HBM; writes go to L2 while the touched
        bytes fit in L2 and spill to HBM in proportion beyond that (gm.py's L2 model).
        """
        hit = gm.touch(byte_start, nbytes)
        if write:
            hit = self.l2.scale
        return self.book_split(start, nbytes, rate, hit)

    def book_split(self, start: float, nbytes: int, rate: float, hit: float) -> float:
        """Book_gm's bandwidth part: *hit* of the bytes on the L2 calendar, the rest on HBM's; the end cycle.

        A generated replay step (npusim/replay_code.py) touches the buffer itself, books a transfer wholly in
        L2 or HBM that fits its first bucket inline (BandwidthCalendar.book's first bucket, the same floats)
        and calls this for the rest.
        """
        end = start
        if hit > 0.0:
            end = self.l2_cal.book(start, nbytes * hit, rate * hit)
        if hit < 1.0:
            miss = 1.0 - hit
            e = self.hbm.book(start, nbytes * miss, rate * miss)
            if e > end:
                end = e
        return end

    # -- cross-core flags (Ascend C CrossCoreSetFlag / CrossCoreWaitFlag, mode 2) -----------------
    def _peers(self, unit: CoreUnit, flag_id: int, setting: bool) -> list:
        aivs = [SubCore.AIV0, SubCore.AIV1][: self.chip.aiv_per_aic]
        if unit.sub is SubCore.AIC:
            subs = aivs
            return [(unit.block_idx, flag_id, s, SubCore.AIC) if setting else
                    (unit.block_idx, flag_id, SubCore.AIC, s) for s in subs]
        if unit.sub in (SubCore.AIV0, SubCore.AIV1):
            return [(unit.block_idx, flag_id, SubCore.AIC, unit.sub) if setting else
                    (unit.block_idx, flag_id, unit.sub, SubCore.AIC)]
        raise NpusimError(f"{unit.label}: cross-core flags need a split (AIC + AIV) chip")

    def cross_set(self, unit: CoreUnit, flag_id: int, pipe: int, label_id: int, depth: int, line=None) -> None:
        """*line*: the kernel line's id when a replayed step passes it (npusim/replay.py)."""
        # NOTE: line passed only by a replay (never sanitized): the sanitizer's set_flag hook has no line parameter
        fire = unit.set_flag(pipe, ("xcore", flag_id), label_id, depth + 1) if line is None else \
            unit.set_flag(pipe, ("xcore", flag_id), label_id, depth + 1, line)
        unit.flags[("xcore", flag_id)].pop()  # the fire time travels to the peers instead
        fire += self.chip.cross_core_flag_latency_cycles
        for key in self._peers(unit, flag_id, setting=True):
            q = self.xflags.get(key)
            if q is None:
                q = self.xflags[key] = deque()
            q.append((fire, pipe))
            ev = self.xwaiters.pop(key, None)
            if ev is not None:
                ev.succeed()

    def cross_wait(self, unit: CoreUnit, flag_id: int, pipe: int, label_id: int, depth: int, line=None) -> None:
        """*line*: the kernel line's id when a replayed step passes it (npusim/replay.py)."""
        t0 = max(unit.scalar_t + unit.issue_cycles, unit.pipe_free[pipe])
        unit.scalar_t += unit.issue_cycles
        release = t0
        for key in self._peers(unit, flag_id, setting=False):
            q = self.xflags.get(key)
            while not q:
                ev = self.xwaiters[key] = self.env.event()
                unit.suspend(ev, f"CrossCoreWaitFlag({flag_id}) from {SubCore(key[3])} on {Pipe(pipe)}")
                q = self.xflags.get(key)
            fire, src_pipe = q.popleft()
            if fire > release:
                release = fire
            src_unit = self.unit_of(unit.block_idx, key[3])
            unit.flows.extend((src_pipe, fire, pipe, release, label_id, src_unit.block_idx, int(src_unit.sub)))
        release += unit.flag_cycles
        unit.wait_until(pipe, release)
        if line is None:
            line = self.src_id(depth + 1)
        if unit.recorder is not None:  # a kernel step being recorded for replay (npusim/replay.py)
            unit.recorder.append((REC_XWAIT, (flag_id, pipe, label_id, line)))
        unit.records.extend((FLOWCTRL, label_id, t0, release, 0, 0, line))

    def unit_of(self, block_idx: int, sub: SubCore) -> CoreUnit:
        try:
            return self._unit_index[(block_idx, SubCore(sub))]
        except KeyError:
            raise NpusimError(f"no {SubCore(sub)} in block {block_idx}") from None

    # -- SyncAll -------------------------------------------------------------------------------
    def sync_all(self, unit: CoreUnit, label_id: int, depth: int) -> None:
        """Barrier over every stream of the same kind (all AIVs, all AICs, or all combined cores)."""
        group = unit.sub is SubCore.AIC
        members = [u for u in self.units if (u.sub is SubCore.AIC) == group]
        t0 = unit.end_cycle
        state = self._barrier.get(group)
        if state is None:
            state = self._barrier[group] = {"arrived": [], "event": self.env.event()}
        state["arrived"].append(t0)
        ev = state["event"]
        if len(state["arrived"]) == len(members):
            self._barrier[group] = None
            self.commit_atomics()
            ev.succeed(max(state["arrived"]))
        else:
            unit.suspend(ev, "SyncAll")
        release = ev.value + self.chip.cross_core_flag_latency_cycles
        for p in range(len(unit.pipe_free)):
            unit.wait_until(p, release)
        unit.scalar_t = release
        if unit.recorder is not None:  # a SyncAll: the step being recorded cannot be replayed (npusim/replay.py)
            unit.recorder.append(None)
        unit.records.extend((FLOWCTRL, label_id, t0, release, 0, 0, self.src_id(depth + 1)))

    # -- running ---------------------------------------------------------------------------------
    def add_unit(self, block_idx: int, sub: SubCore, fn, args) -> CoreUnit:
        unit = CoreUnit(self, block_idx, sub, self.full)
        if self.sanitizer is not None:
            self.sanitizer.attach_unit(unit)

        def body():
            try:
                if self.full:  # numpy's floating-point errors ignored once per stream, not per instruction
                    with quiet_fp():
                        fn(*args)
                else:
                    fn(*args)
            except (KernelHangError, NpuBufferError) as exc:
                if self.sanitizer is None:
                    raise
                self.sanitizer.fault(unit, exc, _kernel_line(exc))  # reported; this stream stops here
            except (AclnnError, NpusimError):
                raise
            except Exception as exc:  # noqa: BLE001 - re-raised with the core that raised it
                raise KernelError(f"{unit.label}: kernel raised {type(exc).__name__}: {exc}") from exc
            unit.finished = True

        g = _KernelGreenlet(body)
        g.unit = unit
        unit.greenlet = g
        self.units.append(unit)
        self._unit_index[(block_idx, sub)] = unit
        return unit

    def _drive(self, unit: CoreUnit):
        event = unit.greenlet.switch()
        while not unit.finished:
            yield event
            self._suspensions += 1
            if self._suspensions % _BUDGET_CHECK_EVERY == 0:
                self._check_budget()
            event = unit.greenlet.switch()

    def _check_budget(self) -> None:
        """Stop a launch past its instruction budget (AclnnError 161002 naming ``mode``)."""
        issued = sum(u.issued_rows() if u.records is not None else u.flushed_rows for u in self.units)
        if issued > self.max_instructions:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID,
                             f"mode: the launch has simulated {issued:,} instructions, past the budget of "
                             f"{self.max_instructions:,} (npusim.launch max_instructions); use the "
                             "operator's mode='estimate' for a shape this large")

    def run(self) -> None:
        for unit in self.units:  # cores start in block-index order (STYLE §6)
            self.env.process(self._drive(unit))
        # NOTE: the cyclic garbage collector runs less often during the run (npusim/gc_policy.py), for performance
        # reasons: the run allocates enough to trigger full collections, each of which would otherwise walk
        # every object of the process (10-20% of a 72-stream timing run: docs/performance.md)
        try:
            with run_collector():
                self.env.run()
        except BaseException as exc:
            # a failed run's suspended streams would keep the launch alive (a greenlet with frames in a
            # reference cycle is never collected): drop them now
            self.release()
            # simpy re-raises a failed process's exception as a copy caused by the original: give the
            # caller the original (AclnnError, KernelError with the kernel's exception as its cause...)
            orig = exc.__cause__
            if orig is not None and type(orig) is type(exc):
                raise orig from orig.__cause__
            raise
        self.commit_atomics()
        stuck = [u for u in self.units if not u.finished]
        if stuck and self.sanitizer is not None and len(self.sanitizer.report):
            for u in stuck:  # blocked behind a stream the sanitizer already stopped: that report says why
                u.greenlet = None
                u.finished = True
            stuck = []
        if stuck:
            lines = [f"{u.label} waits for {u.waiting_for or 'nothing (suspended)'}" for u in stuck]
            for u in stuck:
                u.greenlet = None
            raise KernelHangError("the schedule can never finish: " + "; ".join(lines))

    def release(self) -> None:
        """Drop the streams' record tables and greenlets once the trace is built. Streams and launch
        reference each other, so otherwise only the cyclic collector frees them, and its next full
        collection walks every record of the run (1.3 s, at a random later point, after a 2M-instruction
        run)."""
        for u in self.units:
            u.records = u.flows = u.blocks = u.flow_blocks = None
            u.greenlet = None
        self.units = []
        self._unit_index = {}

    def build_trace(self, meta: dict):
        """Hand the streams' last records to the sink; its trace object (Trace, SummaryTrace, None)."""
        for u in self.units:
            u.flush(final=True)
        return self.sink.finish(self.names, self.sources, self.chip.clock_hz, meta)


#: Trace level and progress of the launches of an operator call (operators set them from their keywords;
#: estimate mode's sample launches run outside, with full traces and no bar).
_CALL_OPTIONS: ContextVar[dict] = ContextVar("npusim_call_options", default={})
_UNSET = object()


@contextmanager
def call_options(trace=None, progress=None, expected_cycles=None):
    """Within the block, :func:`launch` defaults to these ``trace`` / ``progress`` / ``expected_cycles``
    (an operator's ``trace=`` and ``progress=`` keywords reach its kernel launch this way)."""
    token = _CALL_OPTIONS.set({"trace": check_trace_level(trace), "progress": progress,
                               "expected_cycles": expected_cycles})
    try:
        yield
    finally:
        _CALL_OPTIONS.reset(token)


def call_trace_level():
    """The trace level the enclosing :func:`call_options` set (None outside one): for an operator whose call
    makes several launches and must not point all of them at one ``file:PATH``."""
    return _CALL_OPTIONS.get().get("trace")


def launch(kernel, args=(), *, block_dim: int, chip, mode: str = "full", kernel_type: str = "mix",
           timeout_s: float | None = None, meta: dict | None = None, l2_warm=None, trace=_UNSET, progress=_UNSET,
           expected_cycles=_UNSET, max_instructions: int = MAX_INSTRUCTIONS,
           sanitize: bool | None = None, bw_bucket_cycles: int | None = None) -> LaunchResult:
    """Run ``kernel(*args)`` on *block_dim* blocks of *chip* and return cycles, time and trace.

    *kernel_type*: ``"mix"`` (per block 1 AIC + aiv_per_aic AIV on split chips; one combined core on 310P),
    ``"vector"`` (block_dim AIV streams; on 310P combined cores) or ``"cube"`` (block_dim AIC streams).
    *args* may contain callables ``f(launch) -> value`` wrapped in :class:`GmArg` to create GM buffers.
    *l2_warm* = (touched_bytes, names) starts the L2 model in the steady state of a larger launch: the GM
    buffers named in *names* are resident (a mapping gives each one's resident fraction of pages) and
    *touched_bytes* have been touched chip-wide (estimate mode samples part of a launch this way); an optional
    third item {name: [(byte start, byte end, factor), ...]} counts each new page of those ranges of that buffer
    *factor* times in the touched bytes (GmBuffer.count_pages: a sample's cores standing for more cores); an
    optional fourth, (own, launch) touched bytes, scales the sample's hits as the launch's are where its own touched
    bytes are (L2Model.follow).
    *sanitize*: check the schedule (npusim.sanitizer, docs/sanitizer.md); the result's ``sanitizer`` holds
    the reports, and a hang or bad access becomes a report instead of an error. None: sanitize when
    called inside ``npusim.sanitizer.sanitizing()`` (how operators pass ``sanitize=True`` on).
    *trace*: the trace level (npusim.trace_sink: None = full up to FULL_TRACE_MAX_ROWS rows, "full",
    "summary", "none", "file:PATH"). *progress*: a progress bar on stderr (None: when stderr is a terminal;
    it shows after PROGRESS_DELAY_S of wall time), with an ETA if *expected_cycles* (e.g. estimate mode's) is
    given. Unset, the three come from the enclosing :func:`call_options` (default None, None, None).
    *bw_bucket_cycles*: the time buckets of the chip-wide HBM and L2 bandwidth calendars (default 256 cycles).
    Estimate samples run k of a launch's n busy cores at k / n of the bandwidth: per bucket the k cores' summed
    bursts fluctuate sqrt(n / k) times more against that capacity than n cores' do against the chip's, and the
    sample over-contends; buckets n / k times longer sum as many bursts per unit of capacity as the launch's.
    *max_instructions*: the run stops with AclnnError 161002 once its streams have simulated more
    (checked every few hundred suspensions, so a run may overshoot slightly).
    Raises KernelHangError, NpuBufferError, KernelError, AclnnError(507014) on timeout.
    """
    from npusim.chip import chip as get_chip

    chip = get_chip(chip)
    if mode not in ("full", "timing"):
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"mode: launch runs 'full' or 'timing', not {mode!r}")
    if kernel_type not in KERNEL_TYPES:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"kernel_type: must be one of {KERNEL_TYPES}, got {kernel_type!r}")
    if bw_bucket_cycles is not None and not (isinstance(bw_bucket_cycles, int) and bw_bucket_cycles > 0):
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"bw_bucket_cycles: a whole number of cycles > 0, got {bw_bucket_cycles!r}")
    opts = _CALL_OPTIONS.get()
    trace = check_trace_level(opts.get("trace") if trace is _UNSET else trace)
    progress = opts.get("progress") if progress is _UNSET else progress
    expected_cycles = opts.get("expected_cycles") if expected_cycles is _UNSET else expected_cycles
    bar = LaunchProgress.maybe(progress, chip, expected_cycles)
    run = Launch(chip, full=(mode == "full"), timeout_s=timeout_s, sink=make_sink(trace), progress=bar,
                 max_instructions=max_instructions)
    if bw_bucket_cycles is not None:
        run.hbm = BandwidthCalendar("HBM", run.hbm.bytes_per_cycle, bw_bucket_cycles)
        run.l2_cal = BandwidthCalendar("L2", run.l2_cal.bytes_per_cycle, bw_bucket_cycles)
    if sanitize is not False:
        from npusim.sanitizer import Sanitizer, ambient

        collector = ambient()
        if sanitize or collector is not None:
            Sanitizer(collector).attach(run)
    args = tuple(a.make(run) if isinstance(a, GmArg) else a for a in args)
    if l2_warm is not None:
        touched, names = l2_warm[:2]
        counted = l2_warm[2] if len(l2_warm) > 2 else {}
        run.l2.follow = l2_warm[3] if len(l2_warm) > 3 else None
        run.l2.set_touched(int(touched))
        for a in args:
            gm = getattr(a, "gm", None)
            if gm is not None and gm.name in names:
                gm.warm(names[gm.name] if isinstance(names, dict) else 1.0)
            if gm is not None and gm.name in counted:
                gm.count_pages(counted[gm.name])
    max_blocks = chip.aiv_count if (kernel_type == "vector" and chip.core_split) else chip.aic_count
    if isinstance(block_dim, bool) or not isinstance(block_dim, numbers.Integral) or not 1 <= block_dim <= max_blocks:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"block_dim: {block_dim!r} out of range [1, {max_blocks}] for a "
                                                  f"{kernel_type} kernel on {chip.name}")
    for b in range(block_dim):
        if not chip.core_split:
            run.add_unit(b, SubCore.COMBINED, kernel, args)
        elif kernel_type == "mix":
            run.add_unit(b, SubCore.AIC, kernel, args)
            for s in range(chip.aiv_per_aic):
                run.add_unit(b, SubCore(SubCore.AIV0 + s), kernel, args)
        elif kernel_type == "vector":
            run.add_unit(b, SubCore.AIV0, kernel, args)
        else:
            run.add_unit(b, SubCore.AIC, kernel, args)
    run.kernel_type = kernel_type
    run.block_dim = block_dim
    try:
        run.run()
        return _result(run, chip, mode, block_dim, kernel_type, meta)
    except BaseException:
        run.sink.abort()
        raise
    finally:
        if bar is not None:
            bar.close()


def buffer_peaks(units) -> dict[str, int]:
    """Per buffer kind (UB, L1, L0A, ...), the most bytes any one core held at once during the launch:
    what the tiling really takes on chip, measured rather than recomputed from the tiling."""
    peaks: dict[str, int] = {}
    for u in units:
        for kind, buf in u.buffers.items():
            peaks[kind.value] = max(peaks.get(kind.value, 0), buf.peak)
    return peaks


def _result(run: Launch, chip, mode: str, block_dim: int, kernel_type: str, meta: dict | None) -> LaunchResult:
    cycles = int(np.ceil(max(u.end_cycle for u in run.units) + chip.launch_overhead_cycles))
    seconds = cycles / chip.clock_hz
    verdict = TimeoutVerdict(seconds, run.timeout_s, seconds > run.timeout_s)
    if verdict.exceeded:
        raise AicoreTimeoutError(seconds, run.timeout_s, f"{chip.name}: ")
    info = {"chip": chip.name, "npusim_version": __version__, "mode": mode, "block_dim": block_dim,
            "kernel_type": kernel_type, **(meta or {})}
    info["launch_overhead_cycles"] = chip.launch_overhead_cycles  # in `cycles`, not in the trace
    info["buffer_peak_bytes"] = buffer_peaks(run.units)
    trace = run.build_trace(info)
    report = None
    if run.sanitizer is not None:
        report = run.sanitizer.finish()
        if trace is not None and hasattr(trace, "marks"):
            trace.marks = report.marks()
        collector = run.sanitizer.collector
        if collector is not None:
            collector.extend(report)
        run.sanitizer = None
    run.release()
    return LaunchResult(cycles, seconds * 1e6, trace, verdict, block_dim, info, atomic_log=run.atomic_log,
                        sanitizer=report)


def _kernel_line(exc: Exception) -> str:
    """'file:line' of the innermost traceback frame outside npusim (its examples excepted): the kernel
    line that faulted."""
    import os

    pkg = os.path.dirname(os.path.abspath(__file__))
    examples = os.path.join(pkg, "examples") + os.sep
    tb, where = exc.__traceback__, ""
    while tb is not None:
        fname = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if not fname.startswith(pkg + os.sep) or fname.startswith(examples):
            where = f"{fname}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


class GmArg:
    """A kernel argument that becomes a GlobalTensor over *array* in the launch (GM address)."""

    def __init__(self, name: str, array):
        self.name = name
        self.array = array

    def make(self, run: Launch):
        from npusim.memory.gm import GlobalTensor

        return GlobalTensor(run.gm(self.name, self.array))
