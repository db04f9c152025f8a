"""Elementwise vector instructions in their count and repeat forms.

Two sources: Add Sub Mul Div Max Min; tensor-scalar: Adds Muls Maxs Mins; one source: Exp Ln Sqrt
Abs. The shared forms (:class:`Elementwise`) are also the base of :class:`~.rearrange.Copy`.

Call forms (Ascend C "level 2" and "level 0"): ``Op(dst, src0, src1, count)`` on contiguous
elements, and ``Op(dst, src0, src1, mask, repeatTimes, BinaryRepeatParams(...))``: repeats of 256 B;
*mask* is an int (the first *mask* elements of each repeat) or two uint64 (bit i -> element i);
strides count 32-byte blocks; elements outside the mask are not written.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from npusim.isa.base import region
from npusim.isa.vector.common import (ARITH, DIV, FLOATS, ONE_SRC, REPEAT_BYTES, TRANSCENDENTAL, TWO_SRC, UINT,
                                      BinaryRepeatParams, UnaryRepeatParams, VectorInstruction, check_repeat,
                                      mask_key, repeat_extent, repeat_index, repeat_layout, repeat_operands,
                                      strided_view)
from npusim.isa.vector.numerics import ieee, to_scalar, via_f64, vmax, vmin


class Elementwise(VectorInstruction):
    """Shared count / repeat forms: the sources are tensors, the result goes to *dst*."""

    # geometry: (mask key, strides) of the repeat form, None for the count form; extents: elements each
    # operand (dst first) spans from its start, for reads() / writes()
    __slots__ = ("dst", "srcs", "scalar", "count", "geometry", "extents")
    params_type: ClassVar[type] = UnaryRepeatParams

    def _setup(self, dst, srcs: tuple, args: tuple) -> None:
        self.dst, self.srcs = dst, srcs
        tensors = (dst,) + srcs
        # NOTE: _same_dtype and LocalTensor.check inlined (they raise the errors), for performance reasons
        # (benchmarks/sim_speed.py): attention kernels issue these in their inner loops
        dt = dst.dtype
        for t in srcs:
            if t.dtype is not dt and t.dtype != dt:
                raise self._unsupported(dt, t.dtype)
        if dt not in self.dtypes:
            raise self._unsupported(dt)
        self.dtype = dt
        item = dt.itemsize
        if len(args) == 1:  # count form
            n = args[0]
            if n.__class__ is not int:
                n = int(n)
            end = n * item
            for t in tensors:
                if n < 0 or t.addr + end > t.limit:
                    t.check(n)
            self.count, self.geometry = n, None
            self.repeats = -(-n * item // REPEAT_BYTES)
            active = n
            tops = (n,) * len(tensors)
        elif len(args) == 3:  # repeat form
            mask, rep, params = args
            if not isinstance(params, self.params_type):
                raise TypeError(f"{self.name}: repeat form takes a {self.params_type.__name__}, "
                                f"not {type(params).__name__}")
            strides = params.strides()
            # NOTE: repeatTimes, mask and strides checked and every operand's extent found in one cached
            # look-up; execute() builds the index arrays (full mode only). For performance reasons
            # (benchmarks/sim_speed.py): timing mode issues these in the kernels' inner loops.
            try:
                rep, key, tops, active = repeat_operands(mask, item, rep, strides)
            except Exception:  # noqa: BLE001 - an invalid (or unhashable) argument: the checks below raise
                tops = None
            if tops is None:  # one by one, so the error is the one the first invalid argument raises
                rep = check_repeat(self.name, rep)
                key = mask_key(mask)
                tops = []
                for t, (blk, rs) in zip(tensors, strides):
                    top, active = repeat_extent(key, item, rep, int(blk), int(rs))
                    t.check(top)
                    tops.append(top)
            else:
                for t, top in zip(tensors, tops):
                    if t.addr + top * item > t.limit:  # check()'s test inlined; check() raises
                        t.check(top)
            self.count, self.repeats, self.geometry = None, rep, (key, strides)
        else:
            raise TypeError(f"{self.name} takes (dst, sources..., count) or (dst, sources..., mask, "
                            f"repeatTimes, {self.params_type.__name__})")
        self.extents = tops
        self.nbytes = active * item * len(tensors)
        self.flops = active

    def execute(self) -> None:
        if self.geometry is None:
            n = self.count
            self.dst.view(n)[:] = self._values(*(s.view(n) for s in self.srcs))
        else:
            key, strides = self.geometry
            rep, item = self.repeats, self.dtype.itemsize
            layouts = [repeat_layout(key, item, rep, int(blk), int(rs)) for blk, rs in strides]
            if None not in layouts and layouts[0][2]:  # strided views, the destination without repeats
                ins = [strided_view(s, lay) for s, lay in zip(self.srcs, layouts[1:])]
                strided_view(self.dst, layouts[0])[...] = self._values(*ins)
                return
            index = [repeat_index(key, item, rep, int(blk), int(rs))[0] for blk, rs in strides]
            ins = (s.span()[i] for s, i in zip(self.srcs, index[1:]))
            self.dst.span()[index[0]] = self._values(*ins)

    def _values(self, *ins: np.ndarray) -> np.ndarray:
        """compute(*ins), by look-up in a table of compute() over every 16-bit pattern where the class
        says its result depends on one source element (and its scalar) only."""
        if self.tabled and self.dtype.itemsize == 2:
            table = _table_of(self)
            if table is not None:
                return table.take(ins[0].view(np.uint16))
        return self.compute(*ins)

    @classmethod
    def apply(cls, dtype: np.dtype, *ins: np.ndarray, scalar=None) -> np.ndarray:
        """This instruction's compute() on *ins* of any shape (elementwise, so the values its execute() would
        write for those elements): full mode's row steps compute whole tiles this way (ops/common/rowops.py)."""
        op = object.__new__(cls)
        op.dtype, op.scalar = dtype, scalar
        return op.compute(*ins)

    #: True when compute() maps each element of its one source on its own (given the scalar): then a
    #: 2-byte dtype's results can be looked up in a table of all 65536 inputs (:func:`_table_of`)
    tabled: ClassVar[bool] = False

    def reads(self):
        item = self.dtype.itemsize
        return tuple(region(t, top * item) for t, top in zip(self.srcs, self.extents[1:]))

    def writes(self):
        return (region(self.dst, self.extents[0] * self.dtype.itemsize),)

    def compute(self, *args: np.ndarray) -> np.ndarray:  # pragma: no cover - every op defines it
        raise NotImplementedError(self.name)


_TABLES: dict = {}  # (class, dtype, scalar) -> results for every 16-bit input, or None once seen
_TABLES_MAX = 64  # tables kept (128 KiB each); the oldest goes first


def _table_of(ins: Elementwise) -> np.ndarray | None:
    """The results of *ins*'s compute() for all 65536 bit patterns of its 2-byte dtype, indexed by the
    pattern: so identical to computing them (NOTE: a look-up instead of 16-bit numpy arithmetic, which
    runs a conversion per element, for performance reasons: full mode's softmax tiles, benchmarks/pfa.py).
    Without a scalar the table is built at once; with one, on the second call with that scalar."""
    scalar = ins.scalar
    if scalar is not None and scalar.__class__ not in (int, float):
        return None
    key = (ins.__class__, ins.dtype, scalar)
    table = _TABLES.get(key, _MISSING)
    if table is _MISSING and scalar is not None:
        _TABLES[key] = None  # seen once
        table = None
    elif table is None or table is _MISSING:
        every = np.arange(65536, dtype=np.uint16).view(ins.dtype)
        table = ins.compute(every)
        table.flags.writeable = False
        _TABLES.pop(key, None)
        _TABLES[key] = table
        if len(_TABLES) > _TABLES_MAX:
            del _TABLES[next(iter(_TABLES))]
    return table


_MISSING = object()


class _Binary(Elementwise):
    """``Op(dst, src0, src1, count)`` or ``Op(dst, src0, src1, mask, repeatTimes, BinaryRepeatParams)``."""

    __slots__ = ()
    params_type = BinaryRepeatParams
    cost = TWO_SRC
    dtypes = ARITH

    def __init__(self, dst, src0, src1, *args):
        self.scalar = None
        self._setup(dst, (src0, src1), args)
        self.issue(dst.core)


class _Unary(Elementwise):
    """``Op(dst, src, count)`` or ``Op(dst, src, mask, repeatTimes, UnaryRepeatParams)``."""

    __slots__ = ()
    cost = TRANSCENDENTAL

    def __init__(self, dst, src, *args):
        self.scalar = None
        self._setup(dst, (src,), args)
        self.issue(dst.core)


class _WithScalar(Elementwise):
    """``Op(dst, src, scalar, count)`` or ``Op(dst, src, scalar, mask, repeatTimes, UnaryRepeatParams)``.

    The scalar is first converted to the tensor dtype (nearest-even for floats).
    """

    __slots__ = ()
    dtypes = ARITH

    def __init__(self, dst, src, scalar, *args):
        self.scalar = scalar
        self._setup(dst, (src,), args)
        self.issue(dst.core)


# ---- elementwise instructions -------------------------------------------------------------------------
class Add(_Binary):
    """dst = src0 + src1, IEEE in the dtype (overflow -> inf); int16/int32 wrap."""

    __slots__ = ()
    name = "Add"

    def compute(self, a, b):
        return ieee(np.add, self.dtype, a, b)


class Sub(_Binary):
    """dst = src0 - src1, IEEE in the dtype (overflow -> inf); int16/int32 wrap."""

    __slots__ = ()
    name = "Sub"

    def compute(self, a, b):
        return ieee(np.subtract, self.dtype, a, b)


class Mul(_Binary):
    """dst = src0 * src1, IEEE in the dtype (overflow -> inf); int16/int32 wrap."""

    __slots__ = ()
    name = "Mul"

    def compute(self, a, b):
        return ieee(np.multiply, self.dtype, a, b)


class Div(_Binary):
    """dst = src0 / src1, correctly rounded (float64 quotient rounded once); x/0 -> inf, 0/0 -> NaN."""

    __slots__ = ()
    name = "Div"
    cost = DIV
    dtypes = FLOATS

    def compute(self, a, b):
        return via_f64(np.divide, self.dtype, a, b)


class Max(_Binary):
    """dst = src0 if src0 >= src1 else src1; NaN if either is NaN."""

    __slots__ = ()
    name = "Max"

    def compute(self, a, b):
        # NOTE: vmax itself, not through ieee(): a selection raises no floating-point flag and its NaNs are
        # already canonical, for performance reasons (benchmarks/pfa.py: the softmax's row-max folds)
        return vmax(a, b)


class Min(_Binary):
    """dst = src0 if src0 <= src1 else src1; NaN if either is NaN."""

    __slots__ = ()
    name = "Min"

    def compute(self, a, b):
        return vmin(a, b)  # NOTE: as Max


class Adds(_WithScalar):
    """dst = src + scalar (scalar first rounded to the dtype), IEEE in the dtype."""

    __slots__ = ()
    name = "Adds"
    tabled = True

    def compute(self, a):
        return ieee(np.add, self.dtype, a, np.asarray(to_scalar(self.scalar, self.dtype, self.name)))


class Muls(_WithScalar):
    """dst = src * scalar (scalar first rounded to the dtype), IEEE in the dtype."""

    __slots__ = ()
    name = "Muls"
    tabled = True

    def compute(self, a):
        return ieee(np.multiply, self.dtype, a, np.asarray(to_scalar(self.scalar, self.dtype, self.name)))


class Maxs(_WithScalar):
    """dst = max(src, scalar) as :class:`Max` (scalar first converted to the dtype)."""

    __slots__ = ()
    name = "Maxs"
    tabled = True

    def compute(self, a):
        s = np.full_like(a, to_scalar(self.scalar, self.dtype, self.name))
        return ieee(vmax, self.dtype, a, s)


class Mins(_WithScalar):
    """dst = min(src, scalar) as :class:`Min` (scalar first converted to the dtype)."""

    __slots__ = ()
    name = "Mins"
    tabled = True

    def compute(self, a):
        s = np.full_like(a, to_scalar(self.scalar, self.dtype, self.name))
        return ieee(vmin, self.dtype, a, s)


class Exp(_Unary):
    """dst = e**src, float64 exp of the exact input rounded once to the dtype."""

    __slots__ = ()
    name = "Exp"
    tabled = True

    def compute(self, a):
        return via_f64(np.exp, self.dtype, a)


class Ln(_Unary):
    """dst = ln(src), float64 log of the exact input rounded once; ln(0) = -inf, ln(x < 0) = NaN."""

    __slots__ = ()
    name = "Ln"
    tabled = True

    def compute(self, a):
        return via_f64(np.log, self.dtype, a)


class Sqrt(_Unary):
    """dst = sqrt(src), correctly rounded (float64 root rounded once); sqrt(x < 0) = NaN, sqrt(-0) = -0."""

    __slots__ = ()
    name = "Sqrt"
    tabled = True

    def compute(self, a):
        return via_f64(np.sqrt, self.dtype, a)


class Abs(_Unary):
    """dst = |src|: the sign bit cleared (exact; a NaN keeps its payload)."""

    __slots__ = ()
    name = "Abs"
    cost = ONE_SRC

    def compute(self, a):
        u = UINT[a.dtype.itemsize]
        return (a.view(u) & u((1 << (8 * a.dtype.itemsize - 1)) - 1)).view(a.dtype)
