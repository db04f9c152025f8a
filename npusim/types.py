"""Closed sets of the simulator, in one place (STYLE §11).

Contents: :class:`Pipe` (the in-order instruction queues of an AI Core), :class:`TPosition`
(Ascend C's logical buffer positions), :class:`BufferKind` (physical on-chip buffers),
:class:`HardEvent` (the pipe pairs SetFlag/WaitFlag synchronise), :class:`Mode` (run modes),
:class:`SubCore` (AIC / AIV0 / AIV1 of a split core, or the combined core of 310P), and the mode
enums of vector instructions in their Ascend C spellings: :class:`RoundMode` (Cast), :class:`CMPMODE`
(Compare), :class:`SELMODE` (Select), :class:`ReduceOrder` (WholeReduceMax).
``str()`` of each member of the first six is the hardware-document spelling used by trace, viz and
tests; the vector mode enums keep Enum's ``str()`` (``RoundMode.CAST_RINT``), their names being the
Ascend C spellings.
"""
from __future__ import annotations

from enum import Enum, IntEnum


class _FastHashEnum(Enum):
    """An Enum hashed by identity (its members are singletons and compare by identity, so this agrees with
    ==). NOTE: Enum.__hash__ is a Python function (hash of the member's name, ~0.7 us a dict look-up);
    these enums key the simulator's per-instruction tables, for performance reasons
    (benchmarks/sim_speed.py)."""

    __hash__ = object.__hash__


class Pipe(IntEnum):
    """Instruction pipes of an AI Core (CCE ``PIPE_*``; research/hardware.md §10)."""

    S = 0  # scalar: every instruction passes it; also scalar ALU work
    V = 1  # vector unit
    M = 2  # cube unit (Mmad)
    MTE1 = 3  # L1 -> L0A/L0B (LoadData)
    MTE2 = 4  # GM -> L1/L0A/L0B/UB
    MTE3 = 5  # UB -> GM/L1
    FIX = 6  # FixPipe: L0C -> GM/L1

    def __str__(self) -> str:
        return "PIPE_" + self.name

    @property
    def lane(self) -> str:
        """The msprof op simulator lane name of this pipe (hardware.md §10)."""
        return _LANES[self]


_LANES = {
    Pipe.S: "SCALAR",
    Pipe.V: "VECTOR",
    Pipe.M: "CUBE",
    Pipe.MTE1: "MTE1",
    Pipe.MTE2: "MTE2",
    Pipe.MTE3: "MTE3",
    Pipe.FIX: "FIXP",
}
#: Lane of synchronisation instructions (SetFlag/WaitFlag/barriers) in the Chrome trace.
FLOWCTRL_LANE = "FLOWCTRL"
N_PIPES = len(Pipe)


class BufferKind(_FastHashEnum):
    """Physical memories a tensor can live in."""

    GM = "GM"
    L1 = "L1"
    L0A = "L0A"
    L0B = "L0B"
    L0C = "L0C"
    UB = "UB"
    BT = "BT"
    FB = "FB"

    def __str__(self) -> str:
        return self.value


class TPosition(_FastHashEnum):
    """Ascend C ``TPosition``: where a queue's tensors live and which pipes produce/consume them."""

    GM = "GM"
    VECIN = "VECIN"
    VECOUT = "VECOUT"
    VECCALC = "VECCALC"
    A1 = "A1"
    B1 = "B1"
    C1 = "C1"
    A2 = "A2"
    B2 = "B2"
    CO1 = "CO1"
    CO2 = "CO2"
    C2 = "C2"
    C2PIPE2GM = "C2PIPE2GM"

    def __str__(self) -> str:
        return self.value

    @property
    def buffer(self) -> BufferKind:
        """The physical buffer of this position (Ascend C TPosition table)."""
        return _POSITION_BUFFER[self]


_POSITION_BUFFER = {
    TPosition.GM: BufferKind.GM,
    TPosition.VECIN: BufferKind.UB,
    TPosition.VECOUT: BufferKind.UB,
    TPosition.VECCALC: BufferKind.UB,
    TPosition.A1: BufferKind.L1,
    TPosition.B1: BufferKind.L1,
    TPosition.C1: BufferKind.L1,
    TPosition.A2: BufferKind.L0A,
    TPosition.B2: BufferKind.L0B,
    TPosition.CO1: BufferKind.L0C,
    TPosition.CO2: BufferKind.GM,
    TPosition.C2: BufferKind.BT,
    TPosition.C2PIPE2GM: BufferKind.FB,
}


class HardEvent(_FastHashEnum):
    """Ascend C ``HardEvent``: (source pipe, destination pipe) of a SetFlag/WaitFlag pair."""

    MTE2_V = (Pipe.MTE2, Pipe.V)
    V_MTE2 = (Pipe.V, Pipe.MTE2)
    V_MTE3 = (Pipe.V, Pipe.MTE3)
    MTE3_V = (Pipe.MTE3, Pipe.V)
    MTE3_MTE2 = (Pipe.MTE3, Pipe.MTE2)
    MTE2_MTE3 = (Pipe.MTE2, Pipe.MTE3)
    MTE2_MTE1 = (Pipe.MTE2, Pipe.MTE1)
    MTE1_MTE2 = (Pipe.MTE1, Pipe.MTE2)
    MTE1_M = (Pipe.MTE1, Pipe.M)
    M_MTE1 = (Pipe.M, Pipe.MTE1)
    M_FIX = (Pipe.M, Pipe.FIX)
    FIX_M = (Pipe.FIX, Pipe.M)
    FIX_MTE2 = (Pipe.FIX, Pipe.MTE2)
    MTE2_FIX = (Pipe.MTE2, Pipe.FIX)
    S_V = (Pipe.S, Pipe.V)
    V_S = (Pipe.V, Pipe.S)
    S_MTE2 = (Pipe.S, Pipe.MTE2)
    MTE2_S = (Pipe.MTE2, Pipe.S)
    S_MTE3 = (Pipe.S, Pipe.MTE3)
    MTE3_S = (Pipe.MTE3, Pipe.S)
    V_V = (Pipe.V, Pipe.V)
    MTE2_M = (Pipe.MTE2, Pipe.M)
    M_MTE2 = (Pipe.M, Pipe.MTE2)

    def __str__(self) -> str:
        return self.name

    @property
    def src(self) -> Pipe:
        return self.value[0]

    @property
    def dst(self) -> Pipe:
        return self.value[1]


class Mode(Enum):
    """Run modes: outputs + timing, timing only, or the fast estimate."""

    FULL = "full"
    TIMING = "timing"
    ESTIMATE = "estimate"

    def __str__(self) -> str:
        return self.value


class SubCore(IntEnum):
    """Which unit of an AI Core a kernel instance runs on."""

    AIC = 0  # cube core of a split (910B) AI Core
    AIV0 = 1  # first vector core
    AIV1 = 2  # second vector core
    COMBINED = 3  # 310P-style AI Core: cube + vector behind one scalar unit

    def __str__(self) -> str:
        return {0: "cubecore0", 1: "veccore0", 2: "veccore1", 3: "aicore"}[int(self)]


class RoundMode(Enum):
    """Ascend C RoundMode; the value is the npusim.dtypes.cast mode name."""

    CAST_NONE = "none"
    CAST_RINT = "rint"
    CAST_FLOOR = "floor"
    CAST_CEIL = "ceil"
    CAST_ROUND = "round"
    CAST_TRUNC = "trunc"
    CAST_ODD = "odd"


class CMPMODE(Enum):
    """Ascend C CMPMODE of Compare."""

    LT = "lt"
    GT = "gt"
    EQ = "eq"
    LE = "le"
    GE = "ge"
    NE = "ne"


class SELMODE(Enum):
    """Ascend C SELMODE of Select."""

    VSEL_CMPMASK_SPR = 0  # the same first (256 / itemsize) mask bits for every repeat
    VSEL_TENSOR_SCALAR_MODE = 1  # src1 is a scalar; mask bits run on across repeats
    VSEL_TENSOR_TENSOR_MODE = 2  # src1 is a tensor; mask bits run on across repeats


class ReduceOrder(Enum):
    """Ascend C ReduceOrder: what WholeReduceMax writes per repeat."""

    ORDER_VALUE_INDEX = 0
    ORDER_INDEX_VALUE = 1
    ORDER_ONLY_VALUE = 2
    ORDER_ONLY_INDEX = 3
