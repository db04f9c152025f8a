"""Trace: schema, busy-time union, bound unit, Chrome JSON layout, CSV exports, figures."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim import viz
from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.trace import LANE_ORDER, TRACE_COLUMNS, TRACE_SCHEMA_VERSION, Trace, read_trace_csv
from npusim.trace_chrome import _track_slots
from npusim.types import Pipe, SubCore

CLOCK_HZ = 4e6  # 1 cycle = 0.25 us: every ts/dur below is exact in binary
NAMES = ["DataCopy", "Mmad", "Fixpipe", "Add", "SetFlag", "WaitFlag", "MTE2_V#0"]
SOURCES = [("kernel.py", 10), ("kernel.py", 20)]
F = 7  # FLOWCTRL pipe code
AIC, AIV0 = int(SubCore.AIC), int(SubCore.AIV0)

# (core, sub_core, pipe, name_id, start, end, bytes, flops, src_id); core1 rows sit between
# core0 rows (issue order is per core only), and core0 VECTOR has overlapping/nested intervals.
ROWS = [
    (0, AIC, Pipe.MTE2, 0, 0, 10, 512, 0, 0),
    (0, AIC, Pipe.MTE2, 0, 5, 20, 512, 0, 0),  # MTE2 union [0, 20) = 20
    (1, AIV0, Pipe.MTE2, 0, 0, 100, 4096, 0, 0),
    (1, AIV0, Pipe.MTE3, 0, 100, 130, 4096, 0, 0),
    (0, AIC, Pipe.M, 1, 20, 50, 0, 1000, 1),
    (0, AIC, Pipe.FIX, 2, 50, 60, 256, 0, -1),
    (0, AIV0, Pipe.MTE2, 0, 0, 8, 128, 0, 0),
    (0, AIV0, F, 4, 8, 9, 0, 0, 1),
    (0, AIV0, F, 5, 9, 10, 0, 0, 1),
    (0, AIV0, Pipe.V, 3, 10, 30, 0, 64, 1),
    (0, AIV0, Pipe.V, 3, 12, 20, 0, 64, 1),  # nested in the previous one
    (0, AIV0, Pipe.V, 3, 25, 40, 0, 64, 1),  # overlaps: union [10, 40) = 30
    (0, AIV0, Pipe.V, 3, 50, 55, 0, 64, 1),  # separate: VECTOR busy 35
]
KEYS = ["core", "sub_core", "pipe", "name_id", "start", "end", "bytes", "flops", "src_id"]
DTYPES = [np.int32, np.int8, np.int8, np.int32, np.int64, np.int64, np.int64, np.int64, np.int32]
# as the simulator records them: set at the end of the SetFlag, wait at the end of the WaitFlag
FLOW = {"src_core": [0], "src_sub": [AIV0], "src_pipe": [int(Pipe.MTE2)], "set_cycle": [9],
        "dst_core": [0], "dst_sub": [AIV0], "dst_pipe": [int(Pipe.V)], "wait_cycle": [10],
        "label_id": [6]}
META = {"chip": "Ascend910B2", "npusim_version": "0.1.0", "mode": "timing", "block_dim": 2,
        "tiling": {"s1BaseSize": np.int64(128)}}


def make_trace(rows=ROWS, flows=FLOW) -> Trace:
    cols = {k: np.array([int(r[i]) for r in rows], dtype=dt)
            for i, (k, dt) in enumerate(zip(KEYS, DTYPES))}
    flows = None if flows is None else {k: np.array(v, dtype=np.int64) for k, v in flows.items()}
    return Trace(cols, NAMES, SOURCES, flows, CLOCK_HZ, META)


def test_trace_schema_pinned():
    """The column list is the versioned contract: changing it must bump TRACE_SCHEMA_VERSION."""
    assert TRACE_SCHEMA_VERSION == 1
    assert [(c.name, c.dtype, c.unit) for c in TRACE_COLUMNS] == [
        ("core", "int32", ""), ("sub_core", "str", ""), ("pipe", "str", ""), ("name", "str", ""),
        ("start_cycle", "int64", "cycle"), ("end_cycle", "int64", "cycle"),
        ("duration_cycles", "int64", "cycle"), ("bytes", "int64", "byte"),
        ("flops", "int64", "flop"), ("source", "str", "")]
    assert all(c.meaning for c in TRACE_COLUMNS)


def test_trace_lane_order_is_msprof():
    """Lanes appear in the msprof op simulator order (hardware.md §10) and cover every Pipe."""
    assert LANE_ORDER == ("SCALAR", "FLOWCTRL", "MTE1", "CUBE", "FIXP", "MTE2", "VECTOR", "MTE3")
    assert {p.lane for p in Pipe} | {"FLOWCTRL"} == set(LANE_ORDER)


def test_trace_df_exact_values():
    """df holds one row per instruction in issue order, with names, lanes and sources decoded."""
    df = make_trace().df
    assert list(df.columns) == [c.name for c in TRACE_COLUMNS]
    assert [str(df[c.name].dtype) for c in TRACE_COLUMNS] == [c.dtype for c in TRACE_COLUMNS]
    sub = {AIC: "cubecore0", AIV0: "veccore0"}
    lane = {int(p): p.lane for p in Pipe} | {F: "FLOWCTRL"}
    expected = [[r[0], sub[r[1]], lane[int(r[2])], NAMES[r[3]], r[4], r[5], r[5] - r[4], r[6],
                 r[7], "" if r[8] < 0 else f"kernel.py:{SOURCES[r[8]][1]}"] for r in ROWS]
    assert df.values.tolist() == expected
    assert df.loc[5].tolist() == [0, "cubecore0", "FIXP", "Fixpipe", 50, 60, 10, 256, 0, ""]


def test_trace_construction_builds_no_dataframe(monkeypatch):
    """Construction stays cheap: no pandas DataFrame until .df is used."""
    def refuse(*args, **kwargs):
        raise AssertionError("DataFrame built during construction")

    monkeypatch.setattr(pd, "DataFrame", refuse)
    tr = make_trace()
    assert len(tr) == len(ROWS)
    assert tr.total_cycles == 130
    assert tr.time_us == 130 / 4.0


def test_trace_busy_is_union_of_intervals():
    """Busy cycles per lane merge overlapping and nested intervals; counts and sums are exact."""
    pipes = make_trace().summary().pipes
    got = {(r.core, r.sub_core, r.pipe): (r.instructions, r.busy_cycles, r.bytes, r.flops)
           for r in pipes.itertuples()}
    assert got == {
        (0, "cubecore0", "CUBE"): (1, 30, 0, 1000),
        (0, "cubecore0", "FIXP"): (1, 10, 256, 0),
        (0, "cubecore0", "MTE2"): (2, 20, 1024, 0),
        (0, "veccore0", "FLOWCTRL"): (2, 2, 0, 0),
        (0, "veccore0", "MTE2"): (1, 8, 128, 0),
        (0, "veccore0", "VECTOR"): (4, 35, 0, 256),
        (1, "veccore0", "MTE2"): (1, 100, 4096, 0),
        (1, "veccore0", "MTE3"): (1, 30, 4096, 0),
    }
    # rows ordered by core, sub-core, then msprof lane order
    assert [r.pipe for r in pipes.itertuples()] == [
        "CUBE", "FIXP", "MTE2", "FLOWCTRL", "MTE2", "VECTOR", "MTE2", "MTE3"]
    assert pipes["busy_pct"].tolist() == [100.0 * b / 130 for b in pipes["busy_cycles"]]


def test_trace_bound_unit_per_core():
    """The bound unit of a core is its busiest non-FLOWCTRL lane over all its sub-cores."""
    s = make_trace().summary()
    assert s.bound.values.tolist() == [[0, "veccore0", "VECTOR", 35, 100.0 * 35 / 130],
                                       [1, "veccore0", "MTE2", 100, 100.0 * 100 / 130]]
    assert (s.total_cycles, s.instructions, s.total_bytes, s.total_flops) == (130, 13, 9600, 1256)


def test_trace_summary_text():
    """str(summary) is a compact table: '-' for unused lanes, one line per bound core."""
    lines = str(make_trace().summary()).splitlines()
    assert lines[0] == ("npusim trace: 130 cycles = 32.500 us at 4 MHz, 13 instructions, "
                        "chip Ascend910B2")
    assert lines[2].split() == ["FLOWCTRL", "CUBE", "FIXP", "MTE2", "VECTOR", "MTE3"]
    assert lines[3].split() == ["core0.cubecore0", "-", "23.1", "7.7", "15.4", "-", "-"]
    assert lines[4].split() == ["core0.veccore0", "1.5", "-", "-", "6.2", "26.9", "-"]
    assert lines[6] == "bound unit: VECTOR on 1 core, MTE2 on 1 core"
    assert lines[7:] == ["  core0: veccore0 VECTOR 26.9%", "  core1: veccore0 MTE2 76.9%"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 7), st.integers(0, 60),
                          st.integers(0, 15)), min_size=1, max_size=40))
def test_trace_busy_matches_brute_force(rows):
    """The vectorised union equals counting covered cycles one by one."""
    full = [(core, AIV0, pipe, 0, s, s + d, 0, 0, -1) for core, pipe, s, d in rows]
    got = {(r.core, r.pipe): r.busy_cycles for r in make_trace(full, None).busy().itertuples()}
    cover: dict = {}
    for core, pipe, s, d in rows:
        cover.setdefault((core, LANE_ORDER[_lane_rank(pipe)]), set()).update(range(s, s + d))
    assert got == {k: len(v) for k, v in cover.items()}


def _lane_rank(pipe: int) -> int:
    return LANE_ORDER.index("FLOWCTRL" if pipe == F else Pipe(pipe).lane)


# Chrome tid per row: lane index + 8 x track; overlapping rows of a lane go to track 1
TIDS = [(0, 5), (0, 13), (5, 5), (5, 7), (0, 3), (0, 4), (1, 5), (1, 1), (1, 1), (1, 6),
        (1, 14), (1, 14), (1, 6)]


def test_trace_chrome_json_layout(tmp_path):
    """Processes per core/sub-core, lane tracks in msprof order, exact X events, one flow pair."""
    path = make_trace().to_chrome_json(tmp_path / "trace.json")
    doc = json.loads(path.read_text())
    assert doc["displayTimeUnit"] == "ns"
    ev = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
    assert procs == {0: "core0.cubecore0", 1: "core0.veccore0", 5: "core1.veccore0"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["name"] == "thread_name"}
    assert threads == {(0, 3): "CUBE", (0, 4): "FIXP", (0, 5): "MTE2", (0, 13): "MTE2.1",
                       (1, 1): "FLOWCTRL", (1, 5): "MTE2", (1, 6): "VECTOR", (1, 14): "VECTOR.1",
                       (5, 5): "MTE2", (5, 7): "MTE3"}
    order = {(e["pid"], e["tid"]): e["args"]["sort_index"]
             for e in ev if e["name"] == "thread_sort_index"}
    assert order == {(p, t): (t % 8) * 1000 + t // 8 for p, t in threads}
    assert all(LANE_ORDER[t % 8] == name.split(".")[0] for (p, t), name in threads.items())
    xs = [(e["name"], e["pid"], e["tid"], e["ts"], e["dur"]) for e in ev if e["ph"] == "X"]
    assert xs == [(NAMES[r[3]], pid, tid, r[4] * 0.25, (r[5] - r[4]) * 0.25)
                  for r, (pid, tid) in zip(ROWS, TIDS)]
    first = next(e for e in ev if e["ph"] == "X")
    assert first["args"] == {"start_cycle": 0, "end_cycle": 10, "bytes": 512, "flops": 0,
                             "source": "kernel.py:10"}
    flows = [e for e in ev if e["ph"] in ("s", "f")]
    # drawn half a cycle inside SetFlag [8, 9] / WaitFlag [9, 10]: viewers bind them unambiguously
    assert [(e["ph"], e["pid"], e["tid"], e["ts"], e["name"]) for e in flows] == [
        ("s", 1, 1, 8.5 * 0.25, "MTE2_V#0"), ("f", 1, 1, 9.5 * 0.25, "MTE2_V#0")]
    assert flows[0]["id"] == flows[1]["id"] and flows[0]["cat"] == flows[1]["cat"]
    assert flows[1]["bp"] == "e" and "bp" not in flows[0]
    assert flows[0]["args"] == {"src_pipe": "MTE2", "dst_pipe": "VECTOR", "set_cycle": 9,
                                "wait_cycle": 10}
    other = doc["otherData"]
    assert other["trace_schema_version"] == TRACE_SCHEMA_VERSION
    assert (other["npusim_version"], other["chip"], other["tiling"]) == (
        "0.1.0", "Ascend910B2", {"s1BaseSize": 128})
    assert other["clock_hz"] == CLOCK_HZ


def _flow_ends(trace, tmp_path):
    doc = json.loads(trace.to_chrome_json(tmp_path / "t.json").read_text())
    return [(e["ph"], e["pid"], e["tid"], e["ts"]) for e in doc["traceEvents"]
            if e["ph"] in ("s", "f")]


def test_trace_chrome_flow_without_flag_slice(tmp_path):
    """A flow end with no SetFlag/WaitFlag slice to bind to stays at its cycle on FLOWCTRL."""
    flow = FLOW | {"src_core": [1], "set_cycle": [70], "wait_cycle": [80]}
    assert _flow_ends(make_trace(flows=flow), tmp_path) == [("s", 5, 1, 70 * 0.25),
                                                             ("f", 1, 1, 80 * 0.25)]


def test_trace_chrome_flow_given_rows(tmp_path):
    """Optional set_row/wait_row pin a flow to exact instruction rows (here: the VECTOR Adds)."""
    flow = FLOW | {"set_row": [9], "wait_row": [12]}
    assert _flow_ends(make_trace(flows=flow), tmp_path) == [("s", 1, 6, 29.5 * 0.25),
                                                             ("f", 1, 6, 54.5 * 0.25)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(1, 12)),
                min_size=1, max_size=40))
def test_trace_tracks_never_overlap(rows):
    """Lane tracks: no two rows of one track overlap, and tracks = deepest overlap."""
    key = np.array([r[0] for r in rows], np.int64)
    start = np.array([r[1] for r in rows], np.int64)
    end = start + np.array([r[2] for r in rows], np.int64)
    slots = _track_slots(key, start, end)
    for k in set(key.tolist()):
        for t in set(slots[key == k].tolist()):
            iv = sorted(zip(start[(key == k) & (slots == t)], end[(key == k) & (slots == t)]))
            assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(iv, iv[1:]))
        depth = max([sum(1 for s, e in zip(start[key == k], end[key == k]) if s <= c < e)
                     for c in range(60)] + [1])
        assert slots[key == k].max() + 1 == depth


def test_trace_chrome_json_round_trip(tmp_path):
    """from_chrome_json rebuilds the same rows, flows and clock from an exported file."""
    tr = make_trace()
    back = Trace.from_chrome_json(tr.to_chrome_json(tmp_path / "t.json"))
    pd.testing.assert_frame_equal(back.df, tr.df)
    assert back.clock_hz == CLOCK_HZ and back.meta["chip"] == "Ascend910B2"
    assert {k: v.tolist() for k, v in back.flows.items() if k != "label_id"} == {
        k: v for k, v in FLOW.items() if k != "label_id"}
    assert back.names[back.flows["label_id"][0]] == "MTE2_V#0"


def test_trace_from_chrome_json_refuses_other_files(tmp_path):
    """A file that is not an npusim trace of this schema is refused naming the path."""
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(AclnnError, match="path") as err:
        Trace.from_chrome_json(bad)
    assert err.value.status == ACLNN_ERR_PARAM_INVALID
    bad.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "Add", "pid": 0, "tid": 6}],
                               "otherData": {"trace_schema_version": TRACE_SCHEMA_VERSION}}))
    with pytest.raises(AclnnError, match="malformed"):
        Trace.from_chrome_json(bad)
    bad.write_text(json.dumps({"traceEvents": [], "otherData": {"trace_schema_version": 99}}))
    with pytest.raises(AclnnError, match="schema 99"):
        Trace.from_chrome_json(bad)


def test_trace_csv_round_trip(tmp_path):
    """to_csv then read_trace_csv gives back df, dtypes and empty sources included."""
    tr = make_trace()
    back = read_trace_csv(tr.to_csv(tmp_path / "trace.csv"))
    pd.testing.assert_frame_equal(back, tr.df)


def test_trace_instr_csv(tmp_path):
    """instr_exe-style CSV: per (instr, pipe) call count, summed cycles, running time in us."""
    got = pd.read_csv(make_trace().to_instr_csv(tmp_path / "instr.csv"))
    assert list(got.columns) == ["instr", "pipe", "call_count", "cycles", "running_time(us)"]
    assert got.values.tolist() == [
        ["DataCopy", "MTE2", 4, 133, 33.25], ["Add", "VECTOR", 4, 48, 12.0],
        ["DataCopy", "MTE3", 1, 30, 7.5], ["Mmad", "CUBE", 1, 30, 7.5],
        ["Fixpipe", "FIXP", 1, 10, 2.5], ["SetFlag", "FLOWCTRL", 1, 1, 0.25],
        ["WaitFlag", "FLOWCTRL", 1, 1, 0.25]]
    one = pd.read_csv(make_trace().to_instr_csv(tmp_path / "c1.csv", core=1, sub_core="veccore0"))
    assert one.values.tolist() == [["DataCopy", "MTE2", 1, 100, 25.0],
                                   ["DataCopy", "MTE3", 1, 30, 7.5]]
    with pytest.raises(AclnnError, match="sub_core"):
        make_trace().to_instr_csv(tmp_path / "x.csv", sub_core="vec0")


def test_trace_code_csv(tmp_path):
    """code_exe-style CSV groups cycles by kernel line; unknown source is its own row."""
    got = pd.read_csv(make_trace().to_code_csv(tmp_path / "code.csv"), keep_default_na=False)
    assert got.values.tolist() == [["kernel.py:10", 5, 163, 40.75],
                                   ["kernel.py:20", 7, 80, 20.0], ["", 1, 10, 2.5]]


def test_trace_empty():
    """An empty trace has zero time, an empty schema-shaped df and a readable summary."""
    tr = make_trace([], None)
    assert (len(tr), tr.total_cycles, tr.time_us) == (0, 0, 0.0)
    assert list(tr.df.columns) == [c.name for c in TRACE_COLUMNS] and len(tr.df) == 0
    assert str(tr.summary()).endswith("(no instructions)")


def test_trace_rejects_malformed_columns():
    """Constructor checks: every column present, same length, end >= start."""
    cols = {k: np.zeros(2, dt) for k, dt in zip(KEYS, DTYPES)}
    with pytest.raises(ValueError, match="src_id"):
        Trace({k: v for k, v in cols.items() if k != "src_id"}, NAMES, [], None, 1e9, {})
    with pytest.raises(ValueError, match="'flops' has shape"):
        Trace(cols | {"flops": np.zeros(3, np.int64)}, NAMES, [], None, 1e9, {})
    with pytest.raises(ValueError, match="row 1: end < start"):
        Trace(cols | {"start": np.array([0, 5])}, NAMES, [], None, 1e9, {})


def _is_png(path) -> bool:
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


def test_trace_plot_gantt_writes_png(tmp_path):
    """plot_gantt writes a non-empty PNG, also with flows, a core limit and an empty trace."""
    tr = make_trace()
    assert _is_png(tr.plot_gantt(tmp_path / "g.png"))
    assert _is_png(viz.plot_gantt(tr, tmp_path / "g1.png", max_cores=1, show_flows=True))
    assert _is_png(make_trace([], None).plot_gantt(tmp_path / "empty.png"))
    with pytest.raises(AclnnError, match="max_cores"):
        tr.plot_gantt(tmp_path / "bad.png", max_cores=0)


def test_viz_other_figures_write_png(tmp_path):
    """Utilisation, heatmap and roofline figures write PNGs; bad arguments name the parameter."""
    assert _is_png(make_trace().plot_utilisation(tmp_path / "u.png"))
    sweep = pd.DataFrame({"s1": [128, 128, 256, 256], "d": [64, 128, 64, 128],
                          "cycles": [10.0, 20.0, 30.0, 40.0]})
    assert _is_png(viz.plot_heatmap(sweep, "s1", "d", "cycles", tmp_path / "h.png", "t"))
    with pytest.raises(AclnnError, match="value='us'"):
        viz.plot_heatmap(sweep, "s1", "d", "us", tmp_path / "h2.png")
    s = make_trace().summary()
    point = {"label": "case", "flops": s.total_flops, "bytes": s.total_bytes, "time_us": s.time_us}
    assert _is_png(viz.plot_roofline([point], tmp_path / "r.png", 3.5e14, 1.6e12))
    with pytest.raises(AclnnError, match="peak_flops"):
        viz.plot_roofline([point], tmp_path / "r2.png", 0, 1.6e12)
