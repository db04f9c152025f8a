"""The schedule sanitizer: one broken kernel per fault class (npusim/examples/broken.py), reported with the
right kernel line and nothing else, and silent once fixed; happens-before from synchronisation only; the
report table, summary and Chrome marks; off by default."""
from __future__ import annotations

import json

import numpy as np
import pytest

from npusim.examples.broken import KERNELS, VARIANTS, fault_line, run_broken
from npusim.kernel import (
    Adds,
    DataCopy,
    Duplicate,
    HardEvent,
    Pipe,
    PipeBarrier,
    SetFlag,
    TBuf,
    TPipe,
    TPosition,
    WaitFlag,
)
from npusim.launch import GmArg, launch
from npusim.sanitizer import COLUMNS, FAULTS

BROKEN = "npusim/examples/broken.py"


EXAMPLES = {**{f: f for f in KERNELS}, **{name: fault for name, (fault, _) in VARIANTS.items()}}


@pytest.mark.parametrize("example", sorted(EXAMPLES))
@pytest.mark.parametrize("mode", ["full", "timing"])
def test_each_fault_is_reported_at_its_line_and_gone_once_fixed(example, mode):
    res = run_broken(example, mode=mode)
    df = res.sanitizer.df
    assert list(df.fault) == [EXAMPLES[example]], res.sanitizer.summary()
    assert df.source[0].endswith(f"{BROKEN}:{fault_line(example)}"), df.source[0]
    assert len(run_broken(example, fixed=True, mode=mode).sanitizer) == 0


def test_uninitialised_local_read_names_the_buffer_and_bytes():
    """A read inside the core (not a store to GM) of a UB range nothing wrote: the second operand's bytes."""
    row = run_broken("uninitialised-local-read").sanitizer.df.iloc[0]
    assert (row.instruction, row["pipe"]) == ("Adds", "PIPE_V") and row.other_source == ""
    assert row.memory.endswith("UB") and row.byte_start == 512  # the second TBuf starts after 256 fp16


def test_two_instruction_reports_name_both_sides_and_the_bytes():
    df = run_broken("pipe-hazard").sanitizer.df
    row = df.iloc[0]
    assert (row["pipe"], row["other_pipe"]) == ("PIPE_V", "PIPE_MTE2")
    assert (row.instruction, row.other_instruction) == ("Adds", "DataCopy")
    assert row.other_source.endswith(f"{BROKEN}:{fault_line('pipe-hazard') - 4}")  # the DataCopy
    assert row.sub_core == "veccore0" and row.core in (0, 1)
    assert row.byte_end - row.byte_start == 512 and "UB" in row.memory
    assert row.cycle >= 0 and row.other_cycle >= 0
    assert list(df.columns) == COLUMNS


def test_gm_race_names_both_cores():
    row = run_broken("gm-race").sanitizer.df.iloc[0]
    assert {row.core, row.other_core} == {0, 1}
    assert row.memory == "GM z" and (row.byte_start, row.byte_end) == (0, 512)


def test_summary_and_every_fault_class_documented():
    text = run_broken("pipe-barrier").sanitizer.summary()
    assert "pipe-barrier" in text and f"broken.py:{fault_line('pipe-barrier')}" in text
    assert set(KERNELS) == set(FAULTS)
    assert run_broken("pipe-barrier", fixed=True).sanitizer.summary() == "sanitizer: no reports"


def test_chrome_trace_marks_both_instructions(tmp_path):
    res = run_broken("pipe-hazard")
    path = res.trace.to_chrome_json(tmp_path / "t.json")
    marks = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("cat") == "sanitizer"]
    assert len(marks) == 2 and {m["name"] for m in marks} == {"sanitizer: pipe-hazard"}
    assert {m["tid"] for m in marks} == {6, 5}  # the VECTOR and MTE2 lanes (trace.LANE_ORDER)


def test_off_by_default_and_the_engine_untouched():
    x, z = np.arange(512, dtype=np.float16), np.zeros(512, np.float16)
    res = launch(KERNELS["pipe-hazard"], (GmArg("x", x), GmArg("z", z), False), block_dim=2, chip="Ascend910B2",
                 kernel_type="vector")
    assert res.sanitizer is None
    checked = run_broken("pipe-hazard")
    assert checked.cycles == res.cycles  # the sanitizer observes; it does not change the schedule


def _late_consumer(x, wait_before_read):
    """MTE2 loads, then a long chain of independent vector work, then the Adds reads the load. Timing
    hides the missing flag (the load has landed long before), the sanitizer still reports it."""
    pipe = TPipe()
    a, b = TBuf(TPosition.VECCALC), TBuf(TPosition.VECCALC)
    pipe.InitBuffer(a, 512)
    pipe.InitBuffer(b, 512)
    ua, ub = a.Get(np.float16), b.Get(np.float16)
    DataCopy(ua, x, 256)
    for _ in range(200):
        Duplicate(ub, 1.0, 256)
        PipeBarrier(Pipe.V)
    if wait_before_read:
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
    Adds(ua, ua, 1.0, 256)


@pytest.mark.parametrize("synced", [False, True])
def test_happens_before_comes_from_flags_not_from_time(synced):
    x = np.ones(256, np.float16)
    res = launch(_late_consumer, (GmArg("x", x), synced), block_dim=1, chip="Ascend910B2", kernel_type="vector",
                 sanitize=True)
    df = res.trace.df
    load_end = df[df.name == "DataCopy"].end_cycle.max()
    add_start = df[df.name == "Adds"].start_cycle.min()
    assert add_start > load_end  # in simulated time the read is already safe
    assert list(res.sanitizer.df.fault) == ([] if synced else ["pipe-hazard"])


def test_hang_on_a_flag_never_set_is_a_report_when_sanitizing():
    def kernel(x):
        WaitFlag(HardEvent.MTE2_V, 3)

    res = launch(kernel, (GmArg("x", np.zeros(16, np.float16)),), block_dim=1, chip="Ascend910B2",
                 kernel_type="vector", sanitize=True)
    assert list(res.sanitizer.df.fault) == ["unbalanced-flag"]


def _fill_workspace(ws):
    _, ub = _ub_of(256)
    Duplicate(ub, 2.0, 256)
    SetFlag(HardEvent.V_MTE3, 0)
    WaitFlag(HardEvent.V_MTE3, 0)
    DataCopy(ws, ub, 256)


def _read_workspace(ws, z):
    _, ub = _ub_of(256)
    DataCopy(ub, ws, 256)
    SetFlag(HardEvent.MTE2_MTE3, 0)
    WaitFlag(HardEvent.MTE2_MTE3, 0)
    DataCopy(z, ub, 256)


def _ub_of(n):
    pipe = TPipe()
    buf = TBuf(TPosition.VECCALC)
    pipe.InitBuffer(buf, n * 2)
    return pipe, buf.Get(np.float16)


def _two_launches(ws_first, ws_second):
    z = np.zeros(256, np.float16)
    opts = dict(block_dim=1, chip="Ascend910B2", kernel_type="vector")
    launch(_fill_workspace, (GmArg("workspace", ws_first),), **opts)
    launch(_read_workspace, (GmArg("workspace", ws_second), GmArg("z", z)), **opts)


def test_workspace_written_by_an_earlier_launch_of_the_session_counts_as_written():
    """Launches of one sanitizing() block run in stream order (npusim/sanitizer/session.py): a workspace one
    launch fills is initialised for the next; a fresh workspace is not; a launch sanitized alone sees only
    itself."""
    from npusim.sanitizer import sanitizing

    ws = np.zeros(256, np.float16)
    with sanitizing() as report:
        _two_launches(ws, ws)
    assert len(report) == 0, report.summary()
    with sanitizing() as report:
        _two_launches(ws, np.zeros(256, np.float16))  # another allocation: nothing wrote it
    assert list(report.df.fault) == ["uninitialised-read"]
    assert "earlier one of the session" in report.df.message[0]
    alone = launch(_read_workspace, (GmArg("workspace", ws), GmArg("z", np.zeros(256, np.float16))), block_dim=1,
                   chip="Ascend910B2", kernel_type="vector", sanitize=True)
    assert list(alone.sanitizer.df.fault) == ["uninitialised-read"]
