"""The kernel programming model, in Ascend C's vocabulary.

Kernels are plain Python written like Ascend C: ``GetBlockIdx()``, ``GlobalTensor``, ``TPipe``,
``TQue`` (``AllocTensor`` / ``EnQue`` / ``DeQue`` / ``FreeTensor``), ``TBuf``, flags, and the
instructions of :mod:`npusim.isa`. Queues insert the flags Ascend C inserts: AllocTensor waits (on the
producer pipe) for the slot's previous FreeTensor, EnQue sets a flag on the producer pipe, DeQue waits
for it on the consumer pipe, FreeTensor sets a flag on the consumer pipe. Producer and consumer pipes
follow from the queue's TPosition (``QUEUE_PIPES``). ``TQueBind`` hands a buffer from an MTE2 load
straight to an MTE3 store (GM -> UB -> GM) with MTE2_MTE3 / MTE3_MTE2 flags.

Every call acts on the core whose kernel is running (the greenlet-local CoreUnit, launch.py); there is
no module-level state.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from npusim.errors import KernelHangError, NpuBufferError
from npusim.launch import current_unit
from npusim.memory.gm import GlobalTensor, TensorSpec  # noqa: F401 - kernel vocabulary
from npusim.memory.local import LocalTensor, _new_tensor
from npusim.types import BufferKind, HardEvent, Pipe, SubCore, TPosition  # noqa: F401 - kernel vocabulary

#: (producer pipe, consumer pipe) of each queue position (Ascend C TQue synchronisation).
QUEUE_PIPES = {
    TPosition.VECIN: (Pipe.MTE2, Pipe.V),
    TPosition.VECOUT: (Pipe.V, Pipe.MTE3),
    TPosition.A1: (Pipe.MTE2, Pipe.MTE1),
    TPosition.B1: (Pipe.MTE2, Pipe.MTE1),
    TPosition.C1: (Pipe.MTE2, Pipe.MTE1),
    TPosition.A2: (Pipe.MTE1, Pipe.M),
    TPosition.B2: (Pipe.MTE1, Pipe.M),
    TPosition.CO1: (Pipe.M, Pipe.FIX),
    TPosition.C2: (Pipe.MTE1, Pipe.M),
    TPosition.C2PIPE2GM: (Pipe.MTE1, Pipe.FIX),
}


#: numpy dtypes of the dtype arguments kernels pass (np.float16, "float32"...), looked up without np.dtype()
_DTYPES = {t: np.dtype(t) for t in (np.float16, np.float32, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                    np.uint32, np.int64, np.uint64, np.float64)}


# -- block and core identity ---------------------------------------------------------------------
def GetBlockIdx() -> int:
    """Index of this core among the launch's workers.

    AIV of a mix kernel: ``block * aiv_per_aic + sub-block`` (each AIV is a worker, as in Ascend C);
    AIC, vector-only and combined cores: the block index.
    """
    unit = current_unit()
    if unit.launch.kernel_type == "mix" and unit.sub in (SubCore.AIV0, SubCore.AIV1):
        return unit.block_idx * unit.chip.aiv_per_aic + int(unit.sub) - 1
    return unit.block_idx


def GetBlockNum() -> int:
    """Number of workers of this kind in the launch (AIVs of a mix kernel: block_dim * aiv_per_aic)."""
    unit = current_unit()
    if unit.launch.kernel_type == "mix" and unit.sub in (SubCore.AIV0, SubCore.AIV1):
        return unit.launch.block_dim * unit.chip.aiv_per_aic
    return unit.launch.block_dim


def GetSubBlockIdx() -> int:
    """0 or 1 on the two AIVs of a split AI Core; 0 elsewhere."""
    sub = current_unit().sub
    return 1 if sub is SubCore.AIV1 else 0


def GetSubBlockNum() -> int:
    unit = current_unit()
    return unit.chip.aiv_per_aic if unit.launch.kernel_type == "mix" and unit.chip.core_split else 1


def ASCEND_IS_AIC() -> bool:
    """True on a cube core (and on a combined 310P core, which has both units)."""
    return current_unit().sub in (SubCore.AIC, SubCore.COMBINED)


def ASCEND_IS_AIV() -> bool:
    """True on a vector core (and on a combined 310P core)."""
    return current_unit().sub in (SubCore.AIV0, SubCore.AIV1, SubCore.COMBINED)


# -- buffers and queues --------------------------------------------------------------------------
class _Slot:
    # free_key / ready_key: the flag keys of this buffer's FreeTensor and EnQue, built once (TQue._init)
    __slots__ = ("index", "addr", "state", "freed", "free_key", "ready_key")

    def __init__(self, index: int, addr: int):
        self.index = index
        self.addr = addr
        self.state = "free"  # free -> allocated -> queued -> dequeued -> free
        self.freed = False  # FreeTensor'd at least once: the next AllocTensor waits for that flag


class TQue:
    """Ascend C ``TQue<position, depth>``: a ring of buffers handed from a producer to a consumer pipe."""

    def __init__(self, position: TPosition, depth: int = 1):
        if position not in QUEUE_PIPES:
            raise NpuBufferError(f"TQue position {position} has no producer/consumer pipes (use TBuf)")
        self.position = position
        self.depth = depth
        self.unit = None
        self.slots: list[_Slot] = []
        self.nbytes = 0
        self._next = 0
        self._queued: deque = deque()
        self.producer, self.consumer = QUEUE_PIPES[position]

    def _init(self, unit, num: int, nbytes: int) -> None:
        buf = unit.buffer(self.position.buffer)
        self.unit = unit
        self.nbytes = int(nbytes)
        self.slots = [_Slot(i, buf.allocate(nbytes, f"TQue({self.position}) buffer {i}")) for i in range(num)]
        # The queue's index among its stream's queues names its flags (the flag table is the stream's; the
        # list only grows, so an index is never reused, not even by a queue created after this one is gone).
        # Streams create their queues in the same order, so a recording of a step shared by the streams of a
        # launch (npusim/replay.py) names the same flags in every one of them.
        index = len(unit.queues)
        for slot in self.slots:  # NOTE: keys built once per buffer, not per flag, for performance reasons
            slot.free_key, slot.ready_key = (index, slot.index, "free"), (index, slot.index, "ready")
        # NOTE: names and labels resolved once per queue for performance reasons (benchmarks/sim_speed.py)
        self._set_id = unit.launch.name_id("SetFlag")
        self._wait_id = unit.launch.name_id("WaitFlag")
        self._free_what = f"{self.consumer}->{self.producer} (TQue({self.position}) free)"
        self._ready_what = f"{self.producer}->{self.consumer} (TQue({self.position}) ready)"
        self._prod, self._cons = int(self.producer), int(self.consumer)
        self._buf = buf
        unit.queues.append(self)

    def AllocTensor(self, dtype=np.float16) -> LocalTensor:
        """A free buffer of the queue; the producer pipe waits for the consumer's FreeTensor of it."""
        unit = self.unit
        slot = self.slots[self._next]
        if slot.state != "free":
            raise KernelHangError(
                f"{unit.label}: AllocTensor on TQue({self.position}) with all {len(self.slots)} buffers in use "
                "(a missing FreeTensor would hang the real kernel)")
        self._next = (self._next + 1) % len(self.slots)
        if slot.freed:
            unit.wait_flag(self._prod, slot.free_key, self._wait_id, self._free_what, depth=2)
        slot.state = "allocated"
        return self._tensor(slot, dtype)

    def EnQue(self, tensor: LocalTensor) -> None:
        """Hand *tensor* to the consumer: a flag set on the producer pipe."""
        slot = self._own(tensor, "allocated", "EnQue")
        slot.state = "queued"
        self._queued.append(slot)
        self.unit.set_flag(self._prod, slot.ready_key, self._set_id, depth=2)

    def DeQue(self, dtype=np.float16) -> LocalTensor:
        """The oldest enqueued tensor; the consumer pipe waits for its EnQue flag."""
        unit = self.unit
        if not self._queued:
            raise KernelHangError(f"{unit.label}: DeQue on empty TQue({self.position}) would wait forever")
        slot = self._queued.popleft()
        unit.wait_flag(self._cons, slot.ready_key, self._wait_id, self._ready_what, depth=2)
        slot.state = "dequeued"
        return self._tensor(slot, dtype)

    def _tensor(self, slot: _Slot, dtype) -> LocalTensor:
        """The whole buffer of *slot* as a tensor of *dtype*."""
        dt = _DTYPES.get(dtype)
        if dt is None:
            dt = np.dtype(dtype)
        if slot.addr % 32 and self._buf.kind is BufferKind.UB:
            LocalTensor(self.unit, self._buf, slot.addr, dt, 0, slot.addr, slot.addr)  # raises its error
        # NOTE: LocalTensor.__init__ inlined without its dtype conversion, for performance reasons: queues
        # hand out a tensor per instruction (benchmarks/sim_speed.py)
        t = _new_tensor(LocalTensor)
        t.core, t.buffer, t.addr, t.dtype, t.size = self.unit, self._buf, slot.addr, dt, self.nbytes // dt.itemsize
        t.base, t.limit, t.slot = slot.addr, slot.addr + self.nbytes, slot
        return t

    def FreeTensor(self, tensor: LocalTensor) -> None:
        """Return *tensor*'s buffer: a flag set on the consumer pipe for the next AllocTensor."""
        slot = self._own(tensor, "dequeued", "FreeTensor")
        slot.state = "free"
        slot.freed = True
        self.unit.set_flag(self._cons, slot.free_key, self._set_id, depth=2)

    def _own(self, tensor: LocalTensor, state: str, what: str) -> _Slot:
        slot = tensor.slot
        if slot is None or slot not in self.slots:
            raise NpuBufferError(f"{self.unit.label}: {what} of a tensor that does not belong to this "
                                 f"TQue({self.position})")
        if slot.state != state:
            raise NpuBufferError(f"{self.unit.label}: {what} of a tensor in state '{slot.state}' "
                                 f"(expected '{state}') on TQue({self.position})")
        return slot


class TQueBind:
    """Ascend C ``TQueBind<VECIN, VECOUT, depth>``: buffers loaded by MTE2 and stored by MTE3, no compute.

    Lifecycle of each buffer, used round-robin: AllocTensor -> EnQue -> DeQue -> FreeTensor. EnQue sets
    MTE2_MTE3 and DeQue waits for it; FreeTensor sets MTE3_MTE2 and the AllocTensor that reuses the
    buffer waits for it (its first use does not wait). Buffer i uses event id ``eventBase + i``: these
    are the flags of ``SetFlag``/``WaitFlag(HardEvent.MTE2_MTE3 or MTE3_MTE2, eventBase + i)`` and count
    together with explicit ones of that event and id. The trace names the kernel line that called the
    queue method. (TQue(VECIN/VECOUT) synchronises with PIPE_V instead.)
    """

    def __init__(self, depth: int, eventBase: int):
        self.depth, self.eventBase = depth, eventBase
        self.bufs: list[TBuf] = []
        self._next = 0
        self._used: set = set()
        self._queued: deque = deque()

    def InitBuffer(self, pipe: TPipe, nbytes: int) -> None:
        """*depth* UB buffers of *nbytes* each, taken from *pipe*."""
        for _ in range(self.depth):
            buf = TBuf(TPosition.VECCALC)
            pipe.InitBuffer(buf, nbytes)
            self.bufs.append(buf)

    def AllocTensor(self, dtype) -> LocalTensor:
        """The next buffer; MTE2 waits for its previous FreeTensor (MTE3_MTE2) if it was used before."""
        i = self._next
        self._next = (i + 1) % self.depth
        if i in self._used:
            self._wait(HardEvent.MTE3_MTE2, i)
        self._used.add(i)
        return self.bufs[i].Get(dtype)

    def EnQue(self, tensor: LocalTensor) -> None:
        """Hand *tensor* to MTE3: MTE2_MTE3 set on MTE2."""
        i = self._index(tensor)
        self._queued.append(i)
        self._set(HardEvent.MTE2_MTE3, i)

    def DeQue(self, dtype) -> LocalTensor:
        """The oldest enqueued buffer; MTE3 waits for its EnQue (MTE2_MTE3)."""
        i = self._queued.popleft()
        self._wait(HardEvent.MTE2_MTE3, i)
        return self.bufs[i].Get(dtype)

    def FreeTensor(self, tensor: LocalTensor) -> None:
        """Give *tensor*'s buffer back to MTE2: MTE3_MTE2 set on MTE3."""
        self._set(HardEvent.MTE3_MTE2, self._index(tensor))

    def _index(self, tensor: LocalTensor) -> int:
        return next(i for i, b in enumerate(self.bufs) if b.addr == tensor.addr)

    def _set(self, event: HardEvent, i: int) -> None:
        """``SetFlag(event, eventBase + i)``, its source being the kernel line (depth 3: queue method, _set)."""
        unit = current_unit()
        unit.set_flag(int(event.src), (event, self.eventBase + i), unit.launch.name_id("SetFlag"), depth=3)

    def _wait(self, event: HardEvent, i: int) -> None:
        """``WaitFlag(event, eventBase + i)``, its source being the kernel line."""
        unit = current_unit()
        unit.wait_flag(int(event.dst), (event, self.eventBase + i), unit.launch.name_id("WaitFlag"),
                       f"{event}#{self.eventBase + i}", depth=3)


class TBuf:
    """Ascend C ``TBuf<position>``: a scratch buffer with no queue synchronisation."""

    def __init__(self, position: TPosition = TPosition.VECCALC):
        self.position = position
        self.unit = None
        self.addr = 0
        self.nbytes = 0

    def _init(self, unit, nbytes: int) -> None:
        self.unit = unit
        self.nbytes = int(nbytes)
        self.addr = unit.buffer(self.position.buffer).allocate(nbytes, f"TBuf({self.position})")

    def Get(self, dtype=np.float16, count: int | None = None) -> LocalTensor:
        """The buffer (or its first *count* elements) as a tensor of *dtype*."""
        dtype = np.dtype(dtype)
        n = self.nbytes // dtype.itemsize if count is None else int(count)
        buf = self.unit.buffer(self.position.buffer)
        t = LocalTensor(self.unit, buf, self.addr, dtype, n, self.addr, self.addr + self.nbytes)
        t.check(n)
        return t


class TPipe:
    """Ascend C ``TPipe``: owns the on-chip memory of the running core and hands it to queues."""

    def __init__(self):
        self.unit = current_unit()
        self.unit.tpipe = self

    def InitBuffer(self, que, num_or_bytes: int, nbytes: int | None = None) -> None:
        """``InitBuffer(que, num, len)`` for a TQue, ``InitBuffer(tbuf, len)`` for a TBuf."""
        if isinstance(que, TQue):
            que._init(self.unit, int(num_or_bytes), int(nbytes))
        elif isinstance(que, TBuf):
            que._init(self.unit, int(num_or_bytes))
        else:
            raise TypeError(f"InitBuffer takes a TQue or TBuf, not {type(que).__name__}")

    def Reset(self) -> None:
        """Free all buffers of this core (between kernel phases)."""
        for buf in self.unit.buffers.values():
            buf.reset()


from npusim.isa.sync import (  # noqa: E402,F401 - the kernel vocabulary re-exported in one place
    CrossCoreSetFlag, CrossCoreWaitFlag, PipeBarrier, SetAtomicAdd, SetAtomicNone, SetFlag, SyncAll, WaitFlag)
from npusim.isa.dma import *  # noqa: E402,F401,F403
from npusim.isa.vector import *  # noqa: E402,F401,F403
from npusim.isa.cube import *  # noqa: E402,F401,F403
