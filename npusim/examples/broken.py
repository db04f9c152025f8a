"""Small kernels with one schedule fault each, and their fixed versions: the sanitizer's examples and tests.

Each kernel takes ``(x, z, fixed)``: GM input *x* and output *z* (fp16, :data:`N` elements per core) and
whether to run the corrected schedule. The line that holds the fault ends with ``# FAULT: <class>``, so
tests find it; with ``fixed=True`` the sanitizer reports nothing. :func:`run_broken` launches one.

    from npusim.examples.broken import run_broken
    print(run_broken("pipe-hazard").sanitizer.summary())
"""
from __future__ import annotations

import numpy as np

from npusim.kernel import (
    Adds,
    DataCopy,
    Duplicate,
    GetBlockIdx,
    HardEvent,
    Muls,
    Pipe,
    PipeBarrier,
    SetFlag,
    SyncAll,
    TBuf,
    TPipe,
    TPosition,
    TQue,
    WaitFlag,
)

N = 256  # elements per core


def _ub(n: int = N):
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, n * 2)
    return pipe, buf.Get(np.float16)


def _mine(x, z):
    """This core's N elements of *x* and *z*."""
    me = GetBlockIdx()
    return x[me * N], z[me * N]


def pipe_hazard(x, z, fixed):
    """MTE2 -> V with no flag: the Adds may read the UB before the copy has landed."""
    x, z = _mine(x, z)
    _, ub = _ub()
    DataCopy(ub, x, N)
    if fixed:
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
    Adds(ub, ub, 1.0, N)  # FAULT: pipe-hazard
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(z, ub, N)


def pipe_barrier(x, z, fixed):
    """Two dependent vector instructions with no PipeBarrier(PIPE_V) between them."""
    x, z = _mine(x, z)
    _, ub = _ub()
    DataCopy(ub, x, N)
    SetFlag(HardEvent.MTE2_V, 0)
    WaitFlag(HardEvent.MTE2_V, 0)
    Muls(ub, ub, 2.0, N)
    if fixed:
        PipeBarrier(Pipe.V)
    Adds(ub, ub, 1.0, N)  # FAULT: pipe-barrier
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(z, ub, N)


def gm_race(x, z, fixed):
    """Core 1 reads what core 0 writes to GM with no SyncAll between (the cores run in parallel)."""
    _, ub = _ub()
    me = GetBlockIdx()
    if me == 0:
        DataCopy(ub, x, N)
        SetFlag(HardEvent.MTE2_MTE3, 0)
        WaitFlag(HardEvent.MTE2_MTE3, 0)
        DataCopy(z, ub, N)
    if fixed:
        SyncAll()
    if me == 1:
        DataCopy(ub, z, N)  # FAULT: gm-race
        SetFlag(HardEvent.MTE2_MTE3, 0)
        WaitFlag(HardEvent.MTE2_MTE3, 0)
        DataCopy(z[N:], ub, N)


def uninitialised_read(x, z, fixed):
    """A UB buffer copied out before anything wrote it."""
    x, z = _mine(x, z)
    _, ub = _ub()
    if fixed:
        Duplicate(ub, 0.0, N)
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(z, ub, N)  # FAULT: uninitialised-read


def out_of_bounds(x, z, fixed):
    """A copy that runs past the end of its GM tensor."""
    _, ub = _ub()
    count = N if fixed else 2 * N
    DataCopy(ub, x[x.GetSize() - N], count)  # FAULT: out-of-bounds


def misaligned(x, z, fixed):
    """A UB tensor that does not start on a 32-byte boundary."""
    _, ub = _ub()
    offset = 16 if fixed else 3
    DataCopy(ub[offset:], x, 16)  # FAULT: misaligned


def unbalanced_flag(x, z, fixed):
    """A SetFlag nobody waits for."""
    _, ub = _ub()
    DataCopy(ub, x, N)
    SetFlag(HardEvent.MTE2_MTE3, 1)  # FAULT: unbalanced-flag
    if fixed:
        WaitFlag(HardEvent.MTE2_MTE3, 1)


def queue_leak(x, z, fixed):
    """A queue buffer allocated, loaded and consumed, never freed."""
    pipe = TPipe()
    que = TQue(TPosition.VECIN, 1)
    pipe.InitBuffer(que, 1, N * 2)
    t = que.AllocTensor(np.float16)
    DataCopy(t, x, N)
    que.EnQue(t)
    t = que.DeQue(np.float16)  # FAULT: queue-leak
    Adds(t, t, 1.0, N)
    if fixed:
        que.FreeTensor(t)


def uninitialised_local_read(x, z, fixed):
    """A vector instruction reads a UB buffer nothing wrote (the CopyIn of its operand is missing)."""
    x, z = _mine(x, z)
    pipe = TPipe()
    a, b = TBuf(TPosition.VECCALC), TBuf(TPosition.VECCALC)
    pipe.InitBuffer(a, N * 2)
    pipe.InitBuffer(b, N * 2)
    ua, ub = a.Get(np.float16), b.Get(np.float16)
    if fixed:
        DataCopy(ub, x, N)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
    Adds(ua, ub, 1.0, N)  # FAULT: uninitialised-local-read
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(z, ua, N)


KERNELS = {"pipe-hazard": pipe_hazard, "pipe-barrier": pipe_barrier, "gm-race": gm_race,
           "uninitialised-read": uninitialised_read, "out-of-bounds": out_of_bounds, "misaligned": misaligned,
           "unbalanced-flag": unbalanced_flag, "queue-leak": queue_leak}


#: Further examples of a fault class: example name -> (fault class, kernel). The faulty line ends with
#: ``# FAULT: <example name>``.
VARIANTS = {"uninitialised-local-read": ("uninitialised-read", uninitialised_local_read)}


def run_broken(fault: str, fixed: bool = False, mode: str = "full", chip: str = "Ascend910B2"):
    """Launch the example kernel of *fault* (a fault class or a VARIANTS name), sanitized, on two AIVs; return
    the LaunchResult."""
    from npusim.launch import GmArg, launch

    kernel = KERNELS[fault] if fault in KERNELS else VARIANTS[fault][1]
    x = np.arange(2 * N, dtype=np.float16)
    z = np.zeros(2 * N, np.float16)
    return launch(kernel, (GmArg("x", x), GmArg("z", z), fixed), block_dim=2, chip=chip, mode=mode,
                  kernel_type="vector", sanitize=True)


def fault_line(fault: str) -> int:
    """The line of this file marked ``# FAULT: <fault>``."""
    with open(__file__, encoding="utf-8") as fh:
        return next(i for i, line in enumerate(fh, 1) if line.rstrip().endswith(f"# FAULT: {fault}"))
