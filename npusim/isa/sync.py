"""Synchronisation instructions: SetFlag/WaitFlag, PipeBarrier, CrossCoreSetFlag/WaitFlag, SyncAll.

Semantics (core.py): a flag set on pipe P fires when P's earlier instructions are complete; the waiting
pipe's later instructions start after it fires. Flags are counted: each WaitFlag consumes one SetFlag.
Cross-core flags follow Ascend C mode 2 (AIC <-> AIV of one AI Core): an AIC set reaches both AIVs; an
AIC wait needs a set from each AIV.
"""
from __future__ import annotations

import numpy as np

from npusim.launch import current_unit
from npusim.types import HardEvent, Pipe


_PIPE_NUMBER = {None: -1, **{p: int(p) for p in Pipe}}


def SetFlag(event: HardEvent, event_id: int = 0) -> None:
    """Ascend C ``SetFlag<HardEvent>(id)``: executed on the event's source pipe."""
    unit = current_unit()
    unit.set_flag(int(event.src), (event, event_id), unit.name_ids["SetFlag"], depth=2)


def WaitFlag(event: HardEvent, event_id: int = 0) -> None:
    """Ascend C ``WaitFlag<HardEvent>(id)``: the destination pipe waits for the matching SetFlag."""
    unit = current_unit()
    unit.wait_flag(int(event.dst), (event, event_id), unit.name_ids["WaitFlag"],
                   f"{event}#{event_id}", depth=2)


def PipeBarrier(pipe: Pipe | None = None) -> None:
    """Ascend C ``PipeBarrier<pipe>()``: *pipe*'s next instruction waits for its earlier ones.

    ``None`` means PIPE_ALL: every pipe and the scalar unit wait until the core is idle.
    """
    unit = current_unit()
    # NOTE: the pipe's number from a table (int() of an IntEnum is a Python call), for performance reasons:
    # attention kernels issue a PipeBarrier every few instructions (benchmarks/sim_speed.py)
    p = _PIPE_NUMBER.get(pipe)
    unit.barrier(int(pipe) if p is None else p, unit.name_ids["PipeBarrier"], 2)  # 2: depth


def CrossCoreSetFlag(flag_id: int, pipe: Pipe = Pipe.FIX, mode: int = 2) -> None:
    """Ascend C ``CrossCoreSetFlag<mode, pipe>(flagId)``: signal the peer AIC/AIV of this AI Core."""
    _check_mode(mode)
    unit = current_unit()
    unit.launch.cross_set(unit, int(flag_id), int(pipe), unit.name_ids["CrossCoreSetFlag"], depth=2)


def CrossCoreWaitFlag(flag_id: int, pipe: Pipe = Pipe.S, mode: int = 2) -> None:
    """Ascend C ``CrossCoreWaitFlag<mode, pipe>(flagId)``: wait for the peer's CrossCoreSetFlag."""
    _check_mode(mode)
    unit = current_unit()
    unit.launch.cross_wait(unit, int(flag_id), int(pipe), unit.name_ids["CrossCoreWaitFlag"], depth=2)


def SyncAll() -> None:
    """Ascend C ``SyncAll()``: barrier over all cores of this kind (all AIVs, or all AICs)."""
    unit = current_unit()
    unit.launch.sync_all(unit, unit.name_ids["SyncAll"], depth=2)


def SetAtomicAdd(dtype=np.float32) -> None:
    """Ascend C ``SetAtomicAdd<T>()``: this stream's later writes to GM, Fixpipe's and MTE3's (DataCopy, DataCopyPad
    UB -> GM), add to the destination (fp32), committed in simulated-time order (launch.Launch.atomic_add) until
    SetAtomicNone()."""
    unit = current_unit()
    unit.atomic = np.dtype(dtype)
    unit.issue(unit.name_ids["SetAtomicAdd"], int(Pipe.S), 1.0, 0.0, depth=2)


def SetAtomicNone() -> None:
    """Ascend C ``SetAtomicNone()``: GM writes overwrite again."""
    unit = current_unit()
    unit.atomic = None
    unit.issue(unit.name_ids["SetAtomicNone"], int(Pipe.S), 1.0, 0.0, depth=2)


def _check_mode(mode: int) -> None:
    if mode != 2:
        raise NotImplementedError(f"cross-core flag mode {mode} is not modelled (only mode 2, AIC <-> AIV)")
