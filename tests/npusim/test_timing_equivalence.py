"""The timing-mode fast paths (benchmarks/sim_speed.py) change speed only: errors, traces and source lines
are those of the straightforward code, in both modes.

Repeat-form vector instructions check repeatTimes, mask and strides in one cached look-up and build
their index arrays only when they execute; the messages below are those the operand-by-operand checks
give, and an earlier operand's error still wins over a later one's. Trace sources are looked up by
bytecode offset first; TQue flags are named by the queue object.
"""
from __future__ import annotations

import numpy as np
import pytest

from npusim.errors import KernelError, NpuBufferError, NpusimError
from npusim.isa import vector as V
from npusim.kernel import (DataCopy, HardEvent, LoadData, LoadData2DParams, Pipe, PipeBarrier, SetFlag, TBuf, TPipe,
                           TPosition, TQue, WaitFlag)
from npusim.launch import GmArg, launch

F16, F32 = np.float16, np.float32
B, U, C = V.BinaryRepeatParams, V.UnaryRepeatParams, V.CopyRepeatParams
MODES = ("full", "timing")


def _kernel(body, out=None):
    """UB buffers a, b (4 KiB: 2048 fp16 / 1024 fp32 elements) and c (1 KiB), then *body*(a, b, c);
    then a's 2048 fp16 elements copied to *out* (a GM tensor) if given."""
    pipe = TPipe()
    a, b, c = TBuf(), TBuf(), TBuf()
    pipe.InitBuffer(a, 4096)
    pipe.InitBuffer(b, 4096)
    pipe.InitBuffer(c, 1024)
    body(a, b, c)
    if out is not None:
        SetFlag(HardEvent.V_MTE3)
        WaitFlag(HardEvent.V_MTE3)
        DataCopy(out, a.Get(F16), 2048)


def run(body, mode, out=None):
    args = (body,) if out is None else (body, GmArg("out", out))
    return launch(_kernel, args, block_dim=1, chip="Ascend910B2", mode=mode, kernel_type="vector")


def _add(dt, mask, rep, params):
    return lambda a, b, c: V.Add(a.Get(dt), b.Get(dt), c.Get(dt), mask, rep, params)


ERRORS = {
    "mask-0": (_add(F16, 0, 2, B()), NpuBufferError, r"^mask 0 out of range \[1, 128\] for 2-byte elements$"),
    "mask-65-fp32": (_add(F32, 65, 2, B()), NpuBufferError, r"^mask 65 out of range \[1, 64\] for 4-byte elements$"),
    "bitmask-zero": (_add(F16, [0, 0], 2, B()), NpuBufferError, r"^bit mask \[0x0, 0x0\] invalid for 2-byte"),
    "bitmask-high-fp32": (_add(F32, (1, 1), 2, B()), NpuBufferError, r"the high word must be 0 for 64 lanes\)$"),
    "bitmask-3-words": (_add(F16, [1, 2, 3], 2, B()), NpuBufferError, r"^bit mask \[1, 2, 3\] must be one or two"),
    "repeat-256": (_add(F16, 128, 256, B()), NpuBufferError, r"^Add: repeatTimes 256 out of range \[0, 255\]$"),
    "repeat-negative": (_add(F16, 128, -1, B()), NpuBufferError, r"^Add: repeatTimes -1 out of range"),
    "repeat-not-a-number": (_add(F16, 128, "x", B()), KernelError, r"ValueError: invalid literal for int"),
    "dst-block-stride": (_add(F16, 128, 2, B(-1, 1, 1, 8, 8, 8)), NpuBufferError,
                         r"^strides must be >= 0 \(block -1, repeat 8\)$"),
    "src1-repeat-stride": (_add(F16, 128, 2, B(1, 1, 1, 8, 8, -8)), NpuBufferError,
                           r"^strides must be >= 0 \(block 1, repeat -8\)$"),
    # dst leaves its allocation before src1's negative stride is looked at: the dst error wins
    "dst-bounds-before-src1-stride": (_add(F16, 128, 20, B(1, 1, 1, 8, 8, -8)), NpuBufferError,
                                      r"access of 2560 elements \(5120 bytes\) at offset 0 leaves the allocation"),
    "src1-bounds": (_add(F16, 128, 5, B()), NpuBufferError,
                    r"access of 640 elements \(1280 bytes\) at offset 8192 leaves the allocation \[8192, 9216\)"),
    "dtype-mismatch": (lambda a, b, c: V.Add(a.Get(F16), b.Get(F32), c.Get(F16), 128, 2, B()), KernelError,
                       r"Add: dtype float16/float32 is not supported"),
    "params-type": (_add(F16, 128, 2, U()), KernelError,
                    r"Add: repeat form takes a BinaryRepeatParams, not UnaryRepeatParams"),
    "copy-bounds": (lambda a, b, c: V.Copy(a.Get(F16), b.Get(F16), 128, 40, C(1, 1, 8, 8)), NpuBufferError,
                    r"access of 5120 elements"),
    "muls-src-bounds": (lambda a, b, c: V.Muls(a.Get(F16), c.Get(F16), 2.0, 128, 8, U()), NpuBufferError,
                        r"access of 1024 elements \(2048 bytes\) at offset 8192"),
    "brcb-negative-stride": (lambda a, b, c: V.Brcb(a.Get(F16), b.Get(F16), 3, V.BrcbRepeatParams(-1, 8)),
                             NpuBufferError, r"^Brcb: strides must be >= 0 \(block -1, repeat 8\)$"),
    "brcb-dst-bounds": (lambda a, b, c: V.Brcb(a.Get(F16), b.Get(F16), 20, V.BrcbRepeatParams(1, 8)),
                        NpuBufferError, r"access of 2560 elements \(5120 bytes\) at offset 0 leaves the allocation"),
    "slice-before-start": (lambda a, b, c: a.Get(F16)[-1:], NpuBufferError,
                           r"slice at element -1 \(\+2049\) leaves the allocation \[0, 4096\) bytes$"),
    "slice-past-end": (lambda a, b, c: a.Get(F16)[4000], NpuBufferError, r"slice at element 4000 \(\+-1952\)"),
    "slice-misaligned": (lambda a, b, c: a.Get(F16)[3:], NpuBufferError, r"UB: tensor address 6 is not 32-byte"),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(ERRORS))
def test_repeat_form_errors_same_in_both_modes(case, mode):
    """Each bad operand raises the error (type and message) of the operand-by-operand checks, in both modes."""
    body, exc, pattern = ERRORS[case]
    with pytest.raises(exc, match=pattern):
        run(body, mode)


OK_CALLS = {
    "mask-list": _add(F16, [0xF0F0, 3], 2, B()),
    "mask-numpy-words": _add(F16, np.array([0xF0F0, 3], np.uint64), 2, B()),  # unhashable: the slow path
    "numpy-ints": _add(F16, np.int64(64), np.int32(2), B(np.int64(1), 1, 0, 8, 8, np.int16(0))),
    "mask-float": _add(F32, 64.7, 2, B()),
    "mask-bool": lambda a, b, c: V.Exp(a.Get(F16), b.Get(F16), True, 2, U()),
    "repeat-0": _add(F16, 128, 0, B()),
    "copy-strided": lambda a, b, c: V.Copy(a.Get(F16), b.Get(F16), 128, 4, C(2, 1, 16, 8)),
}


@pytest.mark.parametrize("case", list(OK_CALLS))
def test_unusual_but_valid_operands_give_identical_traces(case):
    """Masks and strides as lists, numpy values, floats or bools are accepted as before; timing == full."""
    full, timing = run(OK_CALLS[case], "full"), run(OK_CALLS[case], "timing")
    for key, col in full.trace.columns.items():
        assert np.array_equal(col, timing.trace.columns[key]), key


def test_repeat_form_writes_the_masked_elements_after_the_lazy_index():
    """Full mode still writes exactly the masked lanes of each repeat (index arrays built at execute)."""
    def body(a, b, c):
        x, y = a.Get(F16), b.Get(F16)
        V.Duplicate(x, 0.0, 2048)
        V.Duplicate(y, 1.0, 2048)
        PipeBarrier(Pipe.V)
        V.Adds(x, y, 2.0, (0b1011, 0), 3, U(2, 1, 16, 8))  # lanes 0, 1, 3; dst blocks 2 and repeats 16 apart
    out = np.full(2048, np.nan, F16)
    run(body, "full", out)
    want = np.zeros(2048, F16)
    for r in range(3):
        want[r * 16 * 16 + np.array([0, 1, 3])] = 3.0
    assert np.array_equal(out, want)


def test_brcb_fills_the_strided_blocks():
    """Brcb's destination extent is computed, its index built at execute: the blocks written are unchanged."""
    def body(a, b, c):
        x, y = a.Get(F16), b.Get(F16)
        V.Duplicate(x, 0.0, 2048)
        for i in range(24):
            y.SetValue(i, i + 1)
        PipeBarrier(Pipe.V)
        V.Brcb(x, y, 3, V.BrcbRepeatParams(2, 20))  # block j of repeat r at 32-byte block 20 r + 2 j
    out = np.full(2048, np.nan, F16)
    run(body, "full", out)
    want = np.zeros(2048, F16)
    for r in range(3):
        for j in range(8):
            want[(20 * r + 2 * j) * 16:(20 * r + 2 * j + 1) * 16] = 8 * r + j + 1
    assert np.array_equal(out, want)


def test_load_data_negative_field_named():
    """LoadData's cheap sign test keeps the message that names the negative field."""
    def kernel():
        pipe = TPipe()
        l1, l0a = TBuf(TPosition.A1), TBuf(TPosition.A2)
        pipe.InitBuffer(l1, 16 * 1024)
        pipe.InitBuffer(l0a, 8 * 1024)
        LoadData(l0a.Get(F16), l1.Get(F16), LoadData2DParams(repeatTimes=8, dstGap=-1))
    for mode in MODES:
        with pytest.raises(NpusimError, match=r"^LoadData: dstGap must be >= 0, got -1$"):
            launch(kernel, (), block_dim=1, chip="Ascend910B2", mode=mode, kernel_type="cube")


def test_source_lines_one_per_line_whatever_the_call_site():
    """Two calls on one line share its source entry; each line has one entry (look-up by bytecode offset)."""
    def body(a, b, c):
        x = a.Get(F16)
        for _ in range(3):
            V.Adds(x, x, 1.0, 128); V.Muls(x, x, 2.0, 128)  # two call sites on one line
            V.Adds(x, x, 1.0, 128)
    res = run(body, "timing")
    lines = [res.trace.sources[i] for i in res.trace.columns["src_id"]]
    assert len(set(lines)) == 2
    assert lines[0] == lines[1] != lines[2] and lines[:3] * 3 == lines
    assert len(res.trace.sources) == 2


def test_collected_queue_does_not_hand_its_flags_to_a_new_one():
    """A TQue garbage-collected with a FreeTensor flag pending: a new queue (possibly at the same address)
    waits only for its own flags, so its second AllocTensor follows its own FreeTensor."""
    def body(a, b, c):
        pipe = TPipe()
        for _ in range(8):  # queues freed at once and re-created: CPython soon reuses an address (an id)
            q = TQue(TPosition.VECIN, 1)
            pipe.InitBuffer(q, 1, 1024)
            for _ in range(2):
                t = q.AllocTensor(F16)
                q.EnQue(t)
                q.FreeTensor(q.DeQue(F16))
            del q, t
            pipe.Reset()
    res = run(body, "timing")
    names = np.array(res.trace.names)[res.trace.columns["name_id"]]
    sets = res.trace.columns["end"][names == "SetFlag"]
    free_sets = sets[1::2]  # EnQue, FreeTensor alternate; each queue's first FreeTensor is the one waited for
    waits = res.trace.flows["set_cycle"][res.trace.flows["dst_pipe"] == int(Pipe.MTE2)]  # AllocTensor's waits
    assert list(waits) == list(free_sets[0::2])
