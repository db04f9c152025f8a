"""The bytes one instruction reads and writes, as strided byte ranges the sanitizer can compare.

*space* is the LocalBuffer or GmBuffer accessed. A *range* is ``(start, row_bytes, rows, pitch)``: ``rows`` runs of ``row_bytes`` bytes whose starts are
``pitch`` bytes apart (one contiguous run is ``(start, n, 1, 0)``). Instructions declare ``reads()`` /
``writes()`` as ``(BufferKind, byte address, nbytes)`` envelopes (npusim.isa.base); where an envelope
would join bytes the instruction skips (row-strided DMA, repeat strides of vector instructions) this
module gives the exact rows instead, so interleaved accesses are not mistaken for overlapping ones.

:func:`accesses` returns ``[(space, range, is_write), ...]``, reads first, *space* being the LocalBuffer
or GmBuffer accessed.
"""
from __future__ import annotations

from npusim.isa.cube import CFG_ROW_MAJOR
from npusim.isa.dma import DataCopyCO12DstParams, DataCopyParams, Nd2NzParams
from npusim.isa.vector.common import VectorInstruction
from npusim.memory.gm import GlobalTensor
from npusim.memory.local import LocalTensor

BLOCK = 32
FRACTAL = 512


def contiguous(start: int, nbytes: int) -> tuple:
    return (start, nbytes, 1, 0)


def strided(start: int, row_bytes: int, rows: int, pitch: int) -> tuple:
    """A normalised range: one run when the rows touch or overlap (or there is only one)."""
    if rows <= 1 or pitch <= row_bytes:
        return (start, (rows - 1) * pitch + row_bytes if rows > 0 else 0, 1, 0)
    return (start, row_bytes, rows, pitch)


def end_of(r: tuple) -> int:
    """One past the last byte of range *r*."""
    start, row, rows, pitch = r
    return start + (rows - 1) * pitch + row if rows > 1 else start + row


def overlap(a: tuple, b: tuple) -> bool:
    """True if ranges *a* and *b* share a byte (exact for strided ranges)."""
    a0, a1 = a[0], end_of(a)
    b0, b1 = b[0], end_of(b)
    if a0 >= b1 or b0 >= a1 or not a[1] or not b[1]:
        return False
    if a[2] == 1 and b[2] == 1:
        return True
    if a[2] > b[2]:
        a, b = b, a
        b0, b1 = a0, a1
    start, row, rows, pitch = a
    if rows <= 1:
        return _hits(start, start + row, b)
    if pitch == b[3]:  # same pitch: rows of b lie at a fixed offset from rows of a
        d = b[0] - start
        for k in range((-b[1] - d) // pitch - 1, (row - d) // pitch + 2):
            if -b[1] < d + k * pitch < row and max(0, -k) < min(rows, b[2] - k):
                return True
        return False
    # only the rows of a inside b's envelope can meet it
    lo = max(0, (b0 - start - row) // pitch)
    hi = min(rows - 1, (b1 - start) // pitch + 1)
    for i in range(lo, hi + 1):
        x = start + i * pitch
        if _hits(x, x + row, b):
            return True
    return False


def _hits(x: int, y: int, r: tuple) -> bool:
    """Does [x, y) meet strided range *r*?"""
    start, row, rows, pitch = r
    if rows <= 1:
        return x < start + row and start < y
    lo = max(0, -(-(x - start - row + 1) // pitch))
    hi = min(rows - 1, (y - 1 - start) // pitch)
    return lo <= hi


def covers(outer: tuple, inner: tuple) -> bool:
    """True if every byte of *inner* is in *outer* (exact for a contiguous *outer*, else equality)."""
    if outer == inner:
        return True
    if outer[2] != 1:
        return False
    return outer[0] <= inner[0] and end_of(inner) <= outer[0] + outer[1]


# -- per instruction -------------------------------------------------------------------------------
def accesses(ins, buffers: dict) -> list:
    """[(space, range, is_write)] of instruction *ins*, reads first (exact rows where the instruction has
    them); *buffers*: the core's BufferKind -> LocalBuffer, for instructions that declare kinds."""
    out = rule_of(ins.__class__)(ins)
    return declared(ins, buffers) if out is None else out


def rule_of(cls):
    """The function giving the accesses of an instruction of class *cls*, or None where only the envelopes
    the class declares apply (then :func:`declared`); looked up once per class (the checker reads
    :data:`RULES` first, for performance reasons)."""
    fn = RULES.get(cls)
    if fn is None:
        fn = _EXACT.get(cls.__name__)
        if fn is None:
            fn = _spans if (cls.reads is VectorInstruction.reads and cls.writes is VectorInstruction.writes) else \
                _no_rule
        RULES[cls] = fn
    return fn


def _no_rule(ins):
    return None


def declared(ins, buffers: dict) -> list:
    """The envelopes the class declares (reads() / writes())."""
    if not hasattr(ins, "reads"):  # a form no rule covers and the class declares nothing for
        return []
    writes = ins.writes() if hasattr(ins, "writes") else ()
    return ([(buffers[k], contiguous(a, n), False) for k, a, n in ins.reads() if n > 0]
            + [(buffers[k], contiguous(a, n), True) for k, a, n in writes if n > 0])


def _spans(ins) -> list:
    """A vector instruction's declared spans ((LocalTensor, bytes) read and written): what its reads() and
    writes() give, without building the (BufferKind, address, bytes) triples (for performance reasons)."""
    sr, sw = ins.spans_r, ins.spans_w
    if len(sr) == 1 and len(sw) == 1:  # NOTE: the common form spelled out, no comprehension (speed)
        (t, n), (u, m) = sr[0], sw[0]
        if n > 0 and m > 0:
            return [(t.buffer, (t.addr, n, 1, 0), False), (u.buffer, (u.addr, m, 1, 0), True)]
    return ([(t.buffer, (t.addr, n, 1, 0), False) for t, n in sr if n > 0]
            + [(t.buffer, (t.addr, n, 1, 0), True) for t, n in sw if n > 0])


RULES: dict = {}  # instruction class -> its rule


def _side(t, r: tuple, write: bool):
    """(space, range shifted to the tensor's address, write) of a GlobalTensor or LocalTensor."""
    if t.__class__ is GlobalTensor:
        return (t.gm, (t.byte_offset + r[0], r[1], r[2], r[3]), write)
    return (t.buffer, (t.addr + r[0], r[1], r[2], r[3]), write)


def _elementwise(ins):
    # NOTE: vector operands are LocalTensors; the ranges relative to each operand depend on the repeat
    # geometry only and are cached per geometry, for performance reasons (benchmarks/sanitizer.py)
    item = ins.dtype.itemsize
    dst = ins.dst
    if ins.geometry is None:
        n = ins.count * item
        if not n:
            return []
        out = [(t.buffer, (t.addr, n, 1, 0), False) for t in ins.srcs]
        out.append((dst.buffer, (dst.addr, n, 1, 0), True))
        return out
    key, strides = ins.geometry
    rep = ins.repeats
    if not rep:
        return []
    ck = (key, item, rep, strides)
    rel = _GEOMETRY.get(ck)
    if rel is None:
        lanes = key if isinstance(key, int) else _top_lane(key, item)
        rel = _GEOMETRY[ck] = [_repeat_range(lanes, item, rep, int(blk), int(rs)) for blk, rs in strides]
    r = rel[0]
    srcs = ins.srcs
    if len(srcs) == 1:  # NOTE: the common forms spelled out, no comprehension (speed)
        t, q = srcs[0], rel[1]
        return [(t.buffer, (t.addr + q[0], q[1], q[2], q[3]), False),
                (dst.buffer, (dst.addr + r[0], r[1], r[2], r[3]), True)]
    out = [(t.buffer, (t.addr + q[0], q[1], q[2], q[3]), False) for t, q in zip(srcs, rel[1:])]
    out.append((dst.buffer, (dst.addr + r[0], r[1], r[2], r[3]), True))
    return out


_GEOMETRY: dict = {}  # (mask key, item, repeats, strides) -> operand ranges relative to each operand, dst first


def _top_lane(key, item: int) -> int:
    """1 + the highest lane a two-word bit mask selects."""
    lo, hi = key
    return (64 + hi.bit_length()) if hi else lo.bit_length()


def _repeat_range(lanes: int, item: int, rep: int, blk: int, rs: int) -> tuple:
    """Bytes of the first *lanes* lanes of *rep* repeats, blocks *blk* and repeats *rs* 32 B apart."""
    epb = BLOCK // item
    nblk = -(-lanes // epb)
    if blk == 1:
        row = lanes * item
    elif blk == 0:
        row = min(lanes, epb) * item
    else:  # every block of the repeat, and the gaps between them (an envelope per repeat)
        row = (nblk - 1) * blk * BLOCK + min(lanes, epb) * item
    return strided(0, row, rep, rs * BLOCK)


def _data_copy(ins):
    p, src, dst = ins.params, ins.src, ins.dst
    if p is None:
        n = ins.count * (src if isinstance(src, LocalTensor) else dst).dtype.itemsize
        return [_side(src, contiguous(0, n), False), _side(dst, contiguous(0, n), True)] if n else []
    if isinstance(p, DataCopyParams):
        row = p.blockLen * BLOCK
        if not (row and p.blockCount):
            return []
        return [_side(src, strided(0, row, p.blockCount, row + p.srcStride * BLOCK), False),
                _side(dst, strided(0, row, p.blockCount, row + p.dstStride * BLOCK), True)]
    if isinstance(p, Nd2NzParams):
        item = dst.dtype.itemsize
        if not (p.ndNum and p.nValue and p.dValue):
            return []
        c0 = BLOCK // item
        cols = -(-p.dValue // c0)
        if p.ndNum != 1 or p.dstNzNStride != 1:  # several matrices or spread rows: the envelopes
            src_n = ((p.ndNum - 1) * p.srcNdMatrixStride + (p.nValue - 1) * p.srcDValue + p.dValue) * item
            dst_n = ((p.ndNum - 1) * p.dstNzMatrixStride + (p.nValue - 1) * p.dstNzNStride * c0
                     + (cols - 1) * p.dstNzC0Stride * c0 + c0) * item
            return [_side(src, contiguous(0, src_n), False), _side(dst, contiguous(0, dst_n), True)]
        return [_side(src, strided(0, p.dValue * item, p.nValue, p.srcDValue * item), False),
                _side(dst, strided(0, p.nValue * BLOCK, cols, p.dstNzC0Stride * BLOCK), True)]
    if isinstance(p, DataCopyCO12DstParams):
        if not (p.mSize and p.nSize):
            return []
        si, di = src.dtype.itemsize, dst.dtype.itemsize
        n1 = -(-p.nSize // 16)
        return [_side(src, strided(0, p.mSize * 16 * si, n1, p.srcStride * 16 * si), False),
                _side(dst, strided(0, p.nSize * di, p.mSize, p.dstStride * di), True)]
    return None


def _data_copy_pad(ins):
    p = ins.params
    if not (p.blockCount and p.blockLen):
        return []
    load = isinstance(ins.src, GlobalTensor)
    ub_pitch = ins.foot + (p.dstStride if load else p.srcStride) * BLOCK
    gm_pitch = p.blockLen + (p.srcStride if load else p.dstStride)
    gm = strided(0, p.blockLen, p.blockCount, gm_pitch)
    if not load:
        return [_side(ins.src, strided(0, p.blockLen, p.blockCount, ub_pitch), False),
                _side(ins.dst, gm, True)]
    if ins.pad.isPad:
        ub = strided(0, ins.foot, p.blockCount, ub_pitch)
    else:
        ub = strided(ins.left, p.blockLen, p.blockCount, ub_pitch)
    return [_side(ins.src, gm, False), _side(ins.dst, ub, True)]


def _load_data(ins):
    p = ins.params
    if not p.repeatTimes:
        return []
    span = 2 if (p.ifTranspose and ins.src.dtype.itemsize == 1) else 1
    return [_side(ins.src, strided(p.startIndex * FRACTAL, span * FRACTAL, p.repeatTimes, p.srcStride * FRACTAL),
                  False),
            _side(ins.dst, strided(0, span * FRACTAL, p.repeatTimes, (p.dstGap + span) * FRACTAL), True)]


def _fixpipe(ins):
    p = ins.params
    if not ins.nbytes:
        return []
    si, di = ins.src.dtype.itemsize, ins.dst.dtype.itemsize
    n1 = -(-p.nSize // 16)
    if p.ndNum != 1:
        return None
    out = [_side(ins.src, strided(0, p.mSize * 16 * si, n1, p.srcStride * 16 * si), False)]  # mSize rows of 16
    if ins.config is CFG_ROW_MAJOR:
        out.append(_side(ins.dst, strided(0, p.nSize * di, p.mSize, p.dstStride * di), True))
    else:
        out.append(_side(ins.dst, strided(0, p.mSize * 16 * di, n1, p.dstStride * BLOCK), True))
    if ins.workspace is not None:
        out.append(_side(ins.workspace, contiguous(0, p.nSize * ins.workspace.dtype.itemsize), False))
    return out


_EXACT = {"DataCopy": _data_copy, "DataCopyPad": _data_copy_pad, "LoadData": _load_data, "Fixpipe": _fixpipe}
for _name in ("Add", "Sub", "Mul", "Div", "Max", "Min", "Adds", "Muls", "Maxs", "Mins", "Exp", "Ln", "Sqrt",
              "Abs", "Copy"):
    _EXACT[_name] = _elementwise
