"""The instruction base class: how an Ascend C call becomes functional effect + timing + trace row.

An instruction class declares its ``name`` (the Ascend C name), its ``pipe``, and implements
``execute()`` (the numpy effect, full mode only, docs/numerics.md), ``cycles(chip) -> (occupancy,
latency)`` (core.py explains the two) and ``reads()`` / ``writes()`` (the buffer regions it touches,
as ``(BufferKind, byte address, nbytes)``). Constructing the class issues it, so a kernel line reads
exactly like Ascend C: ``Add(zLocal, xLocal, yLocal, count)``.
"""
from __future__ import annotations

from typing import ClassVar

from npusim.types import Pipe

Region = tuple  # (BufferKind, byte address, nbytes)


class Instruction:
    """Base of every compute or data-movement instruction.

    Subclasses set the operand attributes in ``__init__`` and end it with ``self.issue(unit)``.
    ``nbytes`` and ``flops`` are what the trace records for the instruction.
    """

    __slots__ = ()
    name: ClassVar[str] = "Instruction"
    pipe: ClassVar[Pipe] = Pipe.S
    nbytes: int = 0
    flops: int = 0

    def issue(self, unit, depth: int = 2) -> None:
        """Apply the effect (full mode) and schedule the instruction on *unit* (a CoreUnit).

        *depth* counts the frames between the kernel line and this call.
        """
        if unit.full:
            self.execute()
        occupancy, latency = self.cycles(unit.chip)
        unit.issue(unit.name_ids[self.name], int(self.pipe), occupancy, latency, self.nbytes, self.flops,
                   depth + 1)

    def execute(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError(f"{self.name}: functional effect not modelled")

    def cycles(self, chip) -> tuple[float, float]:  # pragma: no cover
        raise NotImplementedError(f"{self.name}: cost not modelled")

    def reads(self) -> tuple[Region, ...]:
        return ()

    def writes(self) -> tuple[Region, ...]:
        return ()


def region(tensor, nbytes: int) -> Region:
    """The (buffer kind, byte address, nbytes) a LocalTensor access covers."""
    return (tensor.buffer.kind, tensor.addr, nbytes)
