"""Cast: dtype conversion with an Ascend C RoundMode, and the table of conversions A2/A3 accept."""
from __future__ import annotations

from types import MappingProxyType

from npusim.dtypes import cast as _dtype_cast
from npusim.isa.vector.common import (BF16, CAST, F16, F32, I8, I16, I32, REPEAT_BYTES, U8, VectorInstruction,
                                      check_repeat, lane_index, lanes, mask_key)
from npusim.types import RoundMode

_INT_MODES = frozenset({RoundMode.CAST_RINT, RoundMode.CAST_FLOOR, RoundMode.CAST_CEIL, RoundMode.CAST_ROUND,
                        RoundMode.CAST_TRUNC})
_NONE = frozenset({RoundMode.CAST_NONE})
#: (src, dst) -> round modes the Cast instruction accepts on A2/A3: Ascend C Cast tables 4/5
#: (cannmirror/asc-devkit docs/api/context/Cast.md @0a2e47c1), minus int4, int64 and the
#: SetDeqScale int32 -> half path. int32 -> int16 saturates (npusim.dtypes rule; the table is silent).
CAST_MODES = MappingProxyType({
    (F16, F32): _NONE, (BF16, F32): _NONE,
    (F32, F16): frozenset(RoundMode), (F32, BF16): _INT_MODES, (F32, F32): _INT_MODES,
    (F32, I32): _INT_MODES, (F32, I16): _INT_MODES,
    (F16, I32): _INT_MODES, (F16, I16): _INT_MODES, (F16, I8): _INT_MODES | _NONE, (F16, U8): _INT_MODES | _NONE,
    (BF16, I32): _INT_MODES,
    (I32, F32): _INT_MODES | _NONE, (I16, F16): _INT_MODES | _NONE, (I16, F32): _NONE,
    (I8, F16): _NONE, (U8, F16): _NONE, (I32, I16): _NONE,
})


class Cast(VectorInstruction):
    """``Cast(dst, src, round_mode, count)`` or ``Cast(dst, src, round_mode, mask, repeatTimes,
    UnaryRepeatParams)``: convert with an Ascend RoundMode, as npusim.dtypes.cast (docs/numerics.md
    "Conversions"; float targets in Inf/NaN mode, integer targets saturate, NaN -> 0).

    Repeats count 256 B of the wider of the two dtypes; the mask selects elements of that repeat.
    """

    __slots__ = ("dst", "src", "mode", "count", "index")
    name = "Cast"
    cost = CAST

    def __init__(self, dst, src, round_mode, *args):
        self.dst, self.src = dst, src
        mode = self.mode = round_mode if isinstance(round_mode, RoundMode) else RoundMode[str(round_mode)]
        ok = CAST_MODES.get((src.dtype, dst.dtype))
        if ok is None or mode not in ok:
            raise NotImplementedError(f"Cast: {src.dtype.name} -> {dst.dtype.name} with {mode.name} is not "
                                      "an A2/A3 Cast (see vector.CAST_MODES)")
        self.dtype = dst.dtype
        wide = max(src.dtype.itemsize, dst.dtype.itemsize)
        if len(args) == 1:
            n = self.count = int(args[0])
            src.check(n)
            dst.check(n)
            self.index, self.repeats = None, -(-n * wide // REPEAT_BYTES)
            spans = (n * src.dtype.itemsize, n * dst.dtype.itemsize)
        elif len(args) == 3:
            mask, rep, params = args
            rep = check_repeat(self.name, rep)
            key = mask_key(mask)
            lane_idx = lanes(key, wide)
            self.index, spans = [], []
            # lanes count elements of the wider dtype: a narrow operand's repeat spans < 256 B
            for t, (blk, rs) in ((dst, params.strides()[0]), (src, params.strides()[1])):
                idx, top = lane_index(lane_idx, t.dtype.itemsize, rep, int(blk), int(rs))
                t.check(top)
                self.index.append(idx)
                spans.append(top * t.dtype.itemsize)
            self.count, self.repeats = self.index[0].size, rep
            spans = spans[::-1]
        else:
            raise TypeError("Cast takes (dst, src, round_mode, count) or (dst, src, round_mode, mask, "
                            "repeatTimes, UnaryRepeatParams)")
        self.nbytes = self.count * (src.dtype.itemsize + dst.dtype.itemsize)
        self.flops = self.count
        self.spans_r, self.spans_w = ((src, spans[0]),), ((dst, spans[1]),)
        self.issue(dst.core)

    def execute(self) -> None:
        mode = self.mode.value
        if self.index is None:
            n = self.count
            self.dst.view(n)[:] = _dtype_cast(self.src.view(n), self.dst.dtype, mode)
        else:
            d, s = self.index
            self.dst.span()[d] = _dtype_cast(self.src.span()[s], self.dst.dtype, mode)
