"""Vector instructions (PIPE_V): one class per Ascend C vector API, issued by constructing it.

Modules, one job each:
- :mod:`.common`: repeat geometry and dtype sets, the cost model (cost classes, :data:`LATENCY`),
  the repeat parameter structs (BinaryRepeatParams, UnaryRepeatParams, BrcbRepeatParams,
  CopyRepeatParams), the repeat-form index arrays and the :class:`VectorInstruction` base;
- :mod:`.numerics`: rounding, canonical NaNs, compare-select max/min (docs/numerics.md);
- :mod:`.elementwise`: Add Sub Mul Div Max Min, Adds Muls Maxs Mins, Exp Ln Abs Sqrt;
- :mod:`.cast`: Cast (:class:`RoundMode`) and :data:`CAST_MODES`;
- :mod:`.select`: Compare (:class:`CMPMODE`) -> bit mask, Select (:class:`SELMODE`);
- :mod:`.reduce`: ReduceMax ReduceSum (count form), WholeReduceMax WholeReduceSum (:class:`ReduceOrder`),
  BlockReduceMax BlockReduceSum;
- :mod:`.rearrange`: Copy, Duplicate, Brcb, Gather, Transpose.

The mode enums (RoundMode, CMPMODE, SELMODE, ReduceOrder) live in :mod:`npusim.types` and are
re-exported here. Call forms of the elementwise ops: :mod:`.elementwise`. Semantics: docs/numerics.md
"Vector instructions". Cost: ``occupancy = repeats x cycles per repeat`` of the instruction's cost
class, ``latency`` = its inherent latency (:mod:`.common`).
"""
from __future__ import annotations

from npusim.isa.vector.cast import CAST_MODES, Cast  # noqa: F401 - CAST_MODES: named in Cast's error
from npusim.isa.vector.common import BinaryRepeatParams, BrcbRepeatParams, CopyRepeatParams, UnaryRepeatParams
from npusim.isa.vector.elementwise import (Abs, Add, Adds, Div, Exp, Ln, Max, Maxs, Min, Mins, Mul, Muls, Sqrt,
                                           Sub)
from npusim.isa.vector.rearrange import Brcb, Copy, Duplicate, Gather, Transpose
from npusim.isa.vector.reduce import (BlockReduceMax, BlockReduceSum, ReduceMax, ReduceSum, WholeReduceMax,
                                      WholeReduceSum)
from npusim.isa.vector.select import Compare, Select
from npusim.types import CMPMODE, SELMODE, ReduceOrder, RoundMode  # the modes these instructions take

__all__ = [
    "Add", "Sub", "Mul", "Div", "Max", "Min", "Adds", "Muls", "Maxs", "Mins", "Exp", "Ln", "Abs", "Sqrt",
    "Duplicate", "Copy", "Cast", "Compare", "Select", "ReduceMax", "ReduceSum", "WholeReduceMax",
    "WholeReduceSum", "BlockReduceMax", "BlockReduceSum", "Brcb", "Gather", "Transpose",
    "BinaryRepeatParams", "UnaryRepeatParams", "BrcbRepeatParams", "CopyRepeatParams",
    "RoundMode", "CMPMODE", "SELMODE", "ReduceOrder",
]
