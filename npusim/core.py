"""An AI Core instruction stream and its pipes: the simulator's timing engine.

A :class:`CoreUnit` is one scalar unit with its pipes: the AIC or one AIV of a split (910B) AI Core, or a
combined (310P) AI Core. The scalar unit issues instructions in program order, ``scalar_issue_cycles``
apart, into in-order pipe queues (S, V, M, MTE1, MTE2, MTE3, FIX) of ``pipe_queue_depth`` entries.

Because every pipe is in order, the schedule of one stream is computed in program order, without an
event queue: an instruction starts at max(issue time, its pipe's free time, the release time of the
flags its pipe waited for); it occupies the pipe for its *occupancy* cycles and its results are complete
*latency* cycles later. A flag set on pipe P fires when everything issued to P before it is complete; a
PipeBarrier(P) makes P's next instruction wait for the same. This is exact for in-order pipes and costs a
few Python operations per instruction (docs/architecture.md explains the choice and its one limit: a
WaitFlag must follow its SetFlag in program order, as every Ascend C queue and flag pattern does).

Streams interact only through global memory, cross-core flags and SyncAll. Those are the points where
a stream can suspend: each stream runs in a greenlet driven by a simpy process (launch.py), and a
stream also yields to simpy whenever its clock runs ``QUANTUM_CYCLES`` past simulated time, so all
streams advance together and book the shared HBM/L2 bandwidth close to simulated-time order.
"""
from __future__ import annotations

from collections import deque
from sys import _getframe

from npusim.errors import AicoreTimeoutError, KernelHangError, NpuBufferError
from npusim.memory.local import LocalBuffer
from npusim.trace_sink import CHUNK_ROWS, flow_values
from npusim.types import BufferKind, N_PIPES, Pipe, SubCore

#: How far (cycles) a stream may run ahead of simulated time before it lets the others catch up.
#: ASSUMPTION: 2000 cycles (about 1 µs) keeps bandwidth booking fair at low switching cost
#: (benchmarks/sim_speed.py measures the cost).
QUANTUM_CYCLES = 2000.0
FLOWCTRL = 7  # trace lane index of synchronisation instructions (trace.py)

_S = int(Pipe.S)
#: kinds of the calls a recorded kernel step logs (npusim/replay.py replays them)
REC_ISSUE, REC_TRANSFER, REC_SET, REC_WAIT, REC_BARRIER, REC_XWAIT = range(6)


class CoreUnit:
    """One instruction stream (AIC, AIV or combined core) of one block of a launch."""

    def __init__(self, launch, block_idx: int, sub: SubCore, full: bool):
        chip = launch.chip
        self.launch = launch
        self.chip = chip
        self.block_idx = block_idx
        self.sub = sub
        self.full = full
        self.label = f"core{block_idx}.{sub}"
        self.sub_index = int(sub)
        self.scalar_t = 0.0
        self.pipe_free = [0.0] * N_PIPES  # when the pipe can start its next instruction
        self.pipe_done = [0.0] * N_PIPES  # when everything issued to the pipe is complete
        self.depth = int(chip.pipe_queue_depth)
        self.qstarts = [deque() for _ in range(N_PIPES)]
        self.issue_cycles = float(chip.scalar_issue_cycles)
        self.flag_cycles = float(chip.flag_cycles)
        self.flags: dict = {}  # (HardEvent, event id) -> deque of (fire time, pipe)
        # pipe, name_id, start, end, bytes, flops, src_id of each instruction, one after another. NOTE: a flat
        # list, not a tuple per instruction, for performance reasons: a kept tuple is one more object for the
        # garbage collector to scan (benchmarks/sim_speed.py).
        self.records: list = []
        # rows of replayed steps in the full form (npusim/replay_code.py): (records made before them, their
        # layout (trace_sink.StepLayout: what is the same at every replay), their other start and end cycles packed
        # as float64 bytes), and how many rows
        self.blocks: list = []
        self.block_rows = 0
        self.flushed_rows = 0  # records already handed to the trace sink
        # src pipe, set cycle, dst pipe, wait cycle, label_id, src core, src sub of each flag arrow, flat as records
        self.flows: list = []
        # arrows of replayed steps (npusim/replay_code.py): (values in `flows` made before them, their layout,
        # the values it does not hold packed as float64 bytes)
        self.flow_blocks: list = []
        self.horizon = QUANTUM_CYCLES
        self.greenlet = None
        self.finished = False
        self.waiting_for = None  # description while suspended on a flag
        self.buffers = self._make_buffers(chip, sub, full)
        self.tpipe = None
        self.queues: list = []  # the TQues of this stream (the sanitizer checks them at kernel end)
        self.atomic = None  # SetAtomicAdd dtype: GM stores of this stream accumulate (launch.atomic_add)
        self.atomic_seq = 0
        self.name_ids = launch.name_ids  # name -> name id (Launch.name_id without the call)
        self.src_id = launch.src_id
        self.src_at = launch.src_at
        self.path_costs = launch.path_costs
        self.replays: dict = {}  # recorded kernel steps of this stream (npusim/replay.py)
        self.recorder = None  # list of the calls of the kernel step being recorded (npusim/replay.py)
        self.queue_index: dict = {}  # TQue -> its index in self.queues (replay.py, shared recordings)
        # the step recorded or replayed last, and the stream's record list and its length after it (replay.py)
        self.replayed = (None, None, 0)

    # -- buffers -----------------------------------------------------------------------------
    def _make_buffers(self, chip, sub, full) -> dict:
        kinds = {
            SubCore.AIC: (BufferKind.L1, BufferKind.L0A, BufferKind.L0B, BufferKind.L0C, BufferKind.BT,
                          BufferKind.FB),
            SubCore.AIV0: (BufferKind.UB,),
            SubCore.AIV1: (BufferKind.UB,),
            SubCore.COMBINED: (BufferKind.L1, BufferKind.L0A, BufferKind.L0B, BufferKind.L0C, BufferKind.UB),
        }[sub]
        out = {}
        for kind in kinds:
            name = kind.value.lower()
            out[kind] = LocalBuffer(kind, getattr(chip, f"{name}_bytes"), getattr(chip, f"{name}_align_bytes"),
                                    full, self.label)
        return out

    def buffer(self, kind: BufferKind) -> LocalBuffer:
        try:
            return self.buffers[kind]
        except KeyError:
            raise NpuBufferError(
                f"{self.label} has no {kind} buffer (a {self.sub} core has {sorted(map(str, self.buffers))})"
            ) from None

    # -- the hot path ------------------------------------------------------------------------
    def issue(self, name_id: int, pipe: int, occupancy: float, latency: float, nbytes: int = 0,
              flops: int = 0, depth: int = 2, line=None) -> float:
        """Issue one instruction to *pipe*; return its start cycle.

        *depth* is the number of frames between the kernel line and this call (for the trace's source).
        """
        # NOTE: inlined bookkeeping for performance reasons (benchmarks/sim_speed.py).
        t = self.scalar_t + self.issue_cycles
        q = self.qstarts[pipe]
        if len(q) >= self.depth:
            oldest = q.popleft()
            if oldest > t:
                t = oldest  # the queue is full: the scalar unit stalls until a slot frees
        self.scalar_t = t
        free = self.pipe_free[pipe]
        start = t if t > free else free
        end = start + occupancy
        self.pipe_free[pipe] = end
        done = end + latency
        if done > self.pipe_done[pipe]:
            self.pipe_done[pipe] = done
        q.append(start)
        # NOTE: Launch.src_id's look-up inlined (the same table), for performance reasons: one call less
        # per instruction (benchmarks/sim_speed.py)
        if line is None:  # the kernel line's id (a replay passes the recorded one: npusim/replay.py)
            frame = _getframe(depth)  # (source id 0 found by src_id too)
            line = self.src_at.get((id(frame.f_code), frame.f_lasti)) or self.src_id(depth + 1)
        if self.recorder is not None:  # a kernel step being recorded for replay (npusim/replay.py)
            self.recorder.append((REC_ISSUE, (name_id, pipe, occupancy, latency, nbytes, flops, 0, line)))
        self.records.extend((pipe, name_id, start, done, nbytes, flops, line))
        if t > self.horizon:
            self.catch_up()
        return start

    def transfer(self, name_id: int, pipe: int, path: str, nbytes: int, gm=None, gm_byte: int = 0,
                 gm_write: bool = False, depth: int = 2, line=None) -> float:
        """Issue a data movement of *nbytes* on *path*; GM transfers share chip bandwidth."""
        cost = self.path_costs.get((path, nbytes))
        if cost is None:  # NOTE: ChipSpec's rate curve evaluated once per (path, size) and launch, for speed
            chip = self.chip
            cost = self.path_costs[(path, nbytes)] = chip.path_cost(path, nbytes)
        rate, latency = cost
        t = self.scalar_t + self.issue_cycles
        q = self.qstarts[pipe]
        if len(q) >= self.depth:
            oldest = q.popleft()
            if oldest > t:
                t = oldest
        self.scalar_t = t
        free = self.pipe_free[pipe]
        start = t if t > free else free
        if gm is None:
            end = start + nbytes / rate
        else:
            end = self.launch.book_gm(gm, gm_byte, nbytes, start, rate, gm_write)
        self.pipe_free[pipe] = end
        done = end + latency
        if done > self.pipe_done[pipe]:
            self.pipe_done[pipe] = done
        q.append(start)
        if line is None:  # NOTE: Launch.src_id's look-up inlined, as in issue()
            frame = _getframe(depth)  # (source id 0 found by src_id too)
            line = self.src_at.get((id(frame.f_code), frame.f_lasti)) or self.src_id(depth + 1)
        if self.recorder is not None:
            self.recorder.append((REC_TRANSFER, (name_id, pipe, path, nbytes, gm, gm_byte, gm_write, 0, line)))
        self.records.extend((pipe, name_id, start, done, nbytes, 0, line))
        if t > self.horizon:
            self.catch_up()
        return start

    # -- synchronisation within the stream ------------------------------------------------------
    def set_flag(self, src: int, key, label_id: int, depth: int = 2, line=None) -> float:
        """SetFlag on pipe *src*: fires when all of *src*'s earlier instructions are complete."""
        t = self.scalar_t + self.issue_cycles
        self.scalar_t = t
        done = self.pipe_done[src]
        fire = (done if done > t else t) + self.flag_cycles  # max(t, done), as an expression for speed
        # the set occupies its pipe's queue slot, so later work on src starts after it
        if fire > self.pipe_free[src]:
            self.pipe_free[src] = fire
        if fire > self.pipe_done[src]:
            self.pipe_done[src] = fire
        q = self.flags.get(key)
        if q is None:
            q = self.flags[key] = deque()
        q.append((fire, src))
        if line is None:  # NOTE: Launch.src_id's look-up inlined, as in issue()
            frame = _getframe(depth)  # (source id 0 found by src_id too)
            line = self.src_at.get((id(frame.f_code), frame.f_lasti)) or self.src_id(depth + 1)
        if self.recorder is not None:
            self.recorder.append((REC_SET, (src, key, label_id, 0, line)))
        self.records.extend((FLOWCTRL, label_id, fire - self.flag_cycles, fire, 0, 0, line))
        return fire

    def wait_flag(self, dst: int, key, label_id: int, what: str, depth: int = 2, line=None) -> float:
        """WaitFlag on pipe *dst*: its later instructions start after the matching SetFlag fired."""
        t = self.scalar_t + self.issue_cycles
        self.scalar_t = t
        q = self.flags.get(key)
        if not q:
            raise KernelHangError(
                f"{self.label}: WaitFlag {what} on {Pipe(dst)} has no SetFlag before it in program order, "
                f"so {Pipe(dst)} would wait forever (kernel line {self.launch.src_text(depth + 1)})")
        fire, src = q.popleft()
        free = self.pipe_free[dst]
        start = free if free > t else t  # max(t, free), as expressions for speed
        release = (fire if fire > start else start) + self.flag_cycles
        self.pipe_free[dst] = release
        if release > self.pipe_done[dst]:
            self.pipe_done[dst] = release
        if dst == _S and release > self.scalar_t:
            self.scalar_t = release
        if line is None:  # NOTE: Launch.src_id's look-up inlined, as in issue()
            frame = _getframe(depth)  # (source id 0 found by src_id too)
            line = self.src_at.get((id(frame.f_code), frame.f_lasti)) or self.src_id(depth + 1)
        if self.recorder is not None:
            self.recorder.append((REC_WAIT, (dst, key, label_id, what, 0, line)))
        self.records.extend((FLOWCTRL, label_id, start, release, 0, 0, line))
        self.flows.extend((src, fire, dst, release, label_id, self.block_idx, self.sub_index))
        return release

    def barrier(self, pipe: int, label_id: int, depth: int = 2, line=None) -> None:
        """PipeBarrier<pipe>: the pipe's next instruction waits until its earlier ones are complete."""
        t = self.scalar_t + self.issue_cycles
        self.scalar_t = t
        if pipe < 0:  # PIPE_ALL
            done = max(max(self.pipe_done), t)
            self.pipe_free = [done] * N_PIPES
            self.pipe_done = [done] * N_PIPES
            self.scalar_t = done
            start = t
        else:
            done = self.pipe_done[pipe]
            if t > done:  # max(done, t), min(start, done) below: expressions for speed
                done = t
            start = self.pipe_free[pipe]
            self.pipe_free[pipe] = done
            if done < start:
                start = done
        if line is None:  # NOTE: Launch.src_id's look-up inlined, as in issue()
            frame = _getframe(depth)  # (source id 0 found by src_id too)
            line = self.src_at.get((id(frame.f_code), frame.f_lasti)) or self.src_id(depth + 1)
        if self.recorder is not None:
            self.recorder.append((REC_BARRIER, (pipe, label_id, 0, line)))
        self.records.extend((FLOWCTRL, label_id, start, done, 0, 0, line))

    def wait_until(self, pipe: int, when: float) -> None:
        """Make *pipe* (or the scalar unit, for PIPE_S) wait until cycle *when* (flag release)."""
        if when > self.pipe_free[pipe]:
            self.pipe_free[pipe] = when
        if when > self.pipe_done[pipe]:
            self.pipe_done[pipe] = when
        if pipe == _S and when > self.scalar_t:
            self.scalar_t = when

    # -- suspension ---------------------------------------------------------------------------
    def suspend(self, event, waiting_for: str | None = None):
        """Hand control back to the simpy driver until *event* fires (cross-core waits, time sync)."""
        self.waiting_for = waiting_for
        result = self.greenlet.parent.switch(event)
        self.waiting_for = None
        return result

    def catch_up(self, flush: bool = True) -> None:
        """Let the other streams reach this stream's clock before going on (*flush*: hand the rows to the
        sink if there are enough; a replayed step keeps its rows until its end and flushes then)."""
        launch = self.launch
        if self.scalar_t > launch.timeout_cycles:
            raise AicoreTimeoutError(self.scalar_t / self.chip.clock_hz, launch.timeout_s, f"{self.label} runs past "
                                     "the chip's AI Core timeout: ", at_least=True)
        if flush and self.chunk_full():
            self.flush()
        env = launch.env
        if launch.progress is not None and env.now >= launch.progress.next_cycle:
            launch.progress.update(env.now)
        self.suspend(env.timeout(self.scalar_t - env.now))
        self.horizon = env.now + QUANTUM_CYCLES

    def flush(self, final: bool = False) -> None:
        """Hand this stream's records and flows so far to the launch's trace sink (npusim.trace_sink)."""
        # no later instruction of this stream starts before its scalar clock or its pipes' free times
        watermark = float("inf") if final else min(self.scalar_t, min(self.pipe_free))
        sink = self.launch.sink
        if self.records or self.blocks:  # records, with the rows of replayed steps (if any) among them
            sink.rows(self.block_idx, self.sub_index, self.records, watermark, self.blocks)
            self.flushed_rows += len(self.records) // 7 + self.block_rows  # for the launch's instruction budget
            self.records, self.blocks, self.block_rows = [], [], 0
        if self.flow_blocks:  # arrows of replayed steps among the others
            sink.flows(self.block_idx, self.sub_index,
                       flow_values(self.flows, self.flow_blocks, self.block_idx, self.sub_index))
            self.flows, self.flow_blocks = [], []
        elif self.flows:
            sink.flows(self.block_idx, self.sub_index, self.flows)
            self.flows = []

    def chunk_full(self) -> bool:
        """Enough rows (CHUNK_ROWS) to hand to the sink."""
        return len(self.records) + 7 * self.block_rows >= CHUNK_ROWS * 7

    def issued_rows(self) -> int:
        """Trace rows this stream has made so far (handed to the sink or not)."""
        return self.flushed_rows + len(self.records) // 7 + self.block_rows

    @property
    def end_cycle(self) -> float:
        return max(max(self.pipe_done), self.scalar_t)
