"""Chrome Trace Event JSON export and import of a :class:`~npusim.trace.Trace` (STYLE §8).

Contents: :func:`write_chrome_json` (behind ``Trace.to_chrome_json``), :func:`read_chrome_json`
(behind ``Trace.from_chrome_json``, for ``npusim plot``), and the lane-track colouring they need.

Layout follows the msprof op simulator (research/hardware.md §10): lanes SCALAR, FLOWCTRL, MTE1,
CUBE, FIXP, MTE2, VECTOR, MTE3 in that order, ts/dur in µs = cycles / clock_MHz,
"displayTimeUnit": "ns", flow arrows from SetFlag to WaitFlag. Unlike msprof's per-core file (one
process per lane), one file holds every core: one process per core/sub-core ("core0.veccore0"),
one thread per lane.
"""
from __future__ import annotations

import dataclasses
import enum
import heapq
import json
from pathlib import Path

import numpy as np

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.trace import (FLOWCTRL_PIPE, INPUT_DTYPES, LANE_ORDER, LANE_RANK_OF_PIPE, PIPE_OF_LANE_RANK,
                          TRACE_COLUMNS, TRACE_SCHEMA_VERSION, Trace, process_name, sorted_runs)
from npusim.types import FLOWCTRL_LANE, Pipe, SubCore

_N_SUB = len(SubCore)  # pid = core * _N_SUB + sub_core


def _invalid(message: str) -> AclnnError:
    return AclnnError(ACLNN_ERR_PARAM_INVALID, message)


def write_chrome_json(trace, path) -> Path:
    """Write *trace* as Chrome Trace Event JSON (Perfetto, chrome://tracing, MindStudio Insight).

    pid = core * 4 + sub_core (process "core0.veccore0"); tid = lane index in LANE_ORDER
    (+ 8 per extra track where a lane's instructions overlap, see ``_events``);
    "X" events with ts/dur in µs rounded to 1e-6 µs (below a cycle at any clock under
    1 THz) and exact cycles, bytes, flops and source in args; flows ("s" -> "f", bp "e")
    join the SetFlag and WaitFlag slices; ``otherData`` holds the schema version, clock
    and *meta* (chip, npusim_version, mode, block_dim, tiling...).
    """
    path = Path(path)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write('{"traceEvents":[\n')
        fh.write(",\n".join(_events(trace)))
        other = {**_jsonable(trace.meta), "trace_schema_version": TRACE_SCHEMA_VERSION,
                 "npusim_version": str(trace.meta.get("npusim_version", "unknown")),
                 "clock_hz": trace.clock_hz, "columns": [c.name for c in TRACE_COLUMNS]}
        fh.write('\n],"displayTimeUnit":"ns","otherData":')
        fh.write(json.dumps(other, default=_json_default, sort_keys=True))
        fh.write("}\n")
    return path


def _events(trace):
    """Yield the JSON text of each event: metadata, instructions, then flows.

    Chrome and Perfetto drop slices of one thread that overlap without nesting, and a
    pipe's instructions do overlap (latency after issue), so each lane is split into
    tracks (greedy, lowest free track first): track k of lane r has tid r + 8k and is
    named "VECTOR", "VECTOR.1", ...; ``thread_sort_index`` = r * 1000 + k.
    """
    c, f, mhz = trace.columns, trace.flows, trace.clock_mhz
    n_lanes = len(LANE_ORDER)
    pid = c["core"].astype(np.int64) * _N_SUB + c["sub_core"]
    rank = LANE_RANK_OF_PIPE[c["pipe"]]
    tid = rank + n_lanes * _track_slots(pid * n_lanes + rank, c["start"], c["end"])
    src_pid = f["src_core"] * _N_SUB + f["src_sub"]
    dst_pid = f["dst_core"] * _N_SUB + f["dst_sub"]
    src_ts, src_tid = _flow_anchors(trace, src_pid, f["set_cycle"], pid, tid, wait=False)
    dst_ts, dst_tid = _flow_anchors(trace, dst_pid, f["wait_cycle"], pid, tid, wait=True)
    threads = set(zip(pid.tolist(), tid.tolist()))
    threads |= set(zip(src_pid.tolist(), src_tid.tolist()))
    threads |= set(zip(dst_pid.tolist(), dst_tid.tolist()))
    for p in sorted({p for p, _ in threads}):
        name = process_name(p // _N_SUB, p % _N_SUB)
        yield json.dumps({"name": "process_name", "ph": "M", "pid": p, "tid": 0,
                          "args": {"name": name}})
        yield json.dumps({"name": "process_sort_index", "ph": "M", "pid": p, "tid": 0,
                          "args": {"sort_index": p}})
    for p, t in sorted(threads):
        lane, track = LANE_ORDER[t % n_lanes], t // n_lanes
        yield json.dumps({"name": "thread_name", "ph": "M", "pid": p, "tid": t,
                          "args": {"name": f"{lane}.{track}" if track else lane}})
        yield json.dumps({"name": "thread_sort_index", "ph": "M", "pid": p, "tid": t,
                          "args": {"sort_index": (t % n_lanes) * 1000 + track}})
    names = [json.dumps(n) for n in trace.names]
    srcs = [json.dumps(f"{fn}:{line}") for fn, line in trace.sources] + ['""']
    ts = np.round(c["start"] / mhz, 6).tolist()
    dur = np.round((c["end"] - c["start"]) / mhz, 6).tolist()
    # NOTE: f-strings instead of json.dumps per event, for performance (1e6-row traces).
    for row in zip([names[i] for i in c["name_id"].tolist()], pid.tolist(),
                   tid.tolist(), ts, dur, c["start"].tolist(), c["end"].tolist(),
                   c["bytes"].tolist(), c["flops"].tolist(), c["src_id"].tolist()):
        nm, p, t, s, d, s_cyc, e_cyc, nb, nf, src = row
        yield (f'{{"name":{nm},"ph":"X","pid":{p},"tid":{t},"ts":{s!r},"dur":{d!r},'
               f'"args":{{"start_cycle":{s_cyc},"end_cycle":{e_cyc},"bytes":{nb},'
               f'"flops":{nf},"source":{srcs[src]}}}}}')
    for m in getattr(trace, "marks", ()):  # sanitizer reports: an instant event on each instruction's lane
        p = int(m["core"]) * _N_SUB + int(m["sub_core"])
        lane = next((r for r, name in enumerate(LANE_ORDER) if m["pipe"] and name == Pipe[m["pipe"][5:]].lane), 1)
        yield json.dumps({"name": m["name"], "cat": "sanitizer", "ph": "i", "s": "t", "pid": p, "tid": lane,
                          "ts": round(m["cycle"] / mhz, 6), "args": m["args"]}, default=str)
    for i in range(len(f["set_cycle"])):
        label = trace.names[f["label_id"][i]] if f["label_id"][i] >= 0 else "flag"
        args = {"src_pipe": _lane(f["src_pipe"][i]), "dst_pipe": _lane(f["dst_pipe"][i]),
                "set_cycle": int(f["set_cycle"][i]), "wait_cycle": int(f["wait_cycle"][i])}
        common = {"name": label, "cat": "flag", "id": i}
        yield json.dumps({**common, "ph": "s", "pid": int(src_pid[i]), "tid": int(src_tid[i]),
                          "ts": round(src_ts[i] / mhz, 6), "args": args})
        yield json.dumps({**common, "ph": "f", "bp": "e", "pid": int(dst_pid[i]),
                          "tid": int(dst_tid[i]), "ts": round(dst_ts[i] / mhz, 6)})


def _flow_anchors(trace, unit, cycle, row_pid, row_tid, wait: bool):
    """Where the flow ends are drawn: (cycle, tid) per endpoint.

    Viewers bind a flow end to the slice enclosing its timestamp and guess wrongly at slice
    boundaries, so an end goes half a cycle before the end of its SetFlag / WaitFlag slice
    (inside it, and after the set for a long wait). That slice is the row given by the
    optional flow column ``set_row`` / ``wait_row`` (row index, -1 = unknown), else on its
    sub-core's FLOWCTRL lane (rows named *Set* / *Wait* when there are any) the last row
    ending by the set cycle, or the earliest-ending row around the wait cycle. With no such
    row the end stays at its cycle on the FLOWCTRL lane. Exact cycles stay in args.
    """
    c = trace.columns
    ts = cycle.astype(np.float64)
    tid = np.full(len(cycle), LANE_ORDER.index(FLOWCTRL_LANE), np.int64)
    given = trace.flows.get("wait_row" if wait else "set_row", np.full(len(cycle), -1))
    r = np.full(len(cycle), -1, np.int64)
    rows = np.flatnonzero(c["pipe"] == FLOWCTRL_PIPE)
    word = "wait" if wait else "set"
    named = np.array([word in n.lower() for n in trace.names] + [False], dtype=bool)
    if named[c["name_id"][rows]].any():
        rows = rows[named[c["name_id"][rows]]]
    if len(rows) and len(cycle):
        lo = min(int(c["start"].min()), int(cycle.min()))
        span = max(int(c["end"].max()), int(cycle.max())) - lo + 1
        keys = row_pid[rows] * span + (c["end"][rows] - lo)
        order = np.argsort(keys, kind="stable")
        q = unit * span + (cycle - lo)
        idx = np.searchsorted(keys[order], q, side="left" if wait else "right") - (not wait)
        idx = np.clip(idx, 0, len(rows) - 1)
        r = rows[order[idx]]
        ok = row_pid[r] == unit
        if wait:  # a wait row must span the wait cycle
            ok &= (c["start"][r] <= cycle) & (c["end"][r] >= cycle)
        else:
            ok &= c["end"][r] <= cycle
        r = np.where(ok, r, -1)
    r = np.where(given >= 0, given, r)
    ok = r >= 0
    st, en = c["start"][r[ok]], c["end"][r[ok]]
    ts[ok] = en - np.minimum(0.5, (en - st) / 2)
    tid[ok] = row_tid[r[ok]]
    return ts, tid


def read_chrome_json(path, cls: type = Trace) -> Trace:
    """Rebuild a *cls* (a Trace) from a file written by :func:`write_chrome_json` (for ``npusim plot``).

    Raises AclnnError(ACLNN_ERR_PARAM_INVALID) if *path* is not an npusim trace of this
    schema version.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        version = doc["otherData"]["trace_schema_version"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _invalid(f"path {str(path)!r} is not an npusim Chrome trace: {exc}") from exc
    if version != TRACE_SCHEMA_VERSION:
        raise _invalid(f"path {str(path)!r} has trace schema {version}, this npusim reads "
                       f"{TRACE_SCHEMA_VERSION}")
    try:
        return _from_doc(doc, cls)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise _invalid(f"path {str(path)!r} is not an npusim Chrome trace: event field "
                       f"{exc} missing or malformed") from exc


def _from_doc(doc: dict, cls: type) -> Trace:
    other = doc["otherData"]
    xs = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    names = sorted({e["name"] for e in xs} | {e["name"] for e in doc["traceEvents"]
                                              if e.get("ph") == "s"})
    name_id = {n: i for i, n in enumerate(names)}
    src_text = sorted({e["args"]["source"] for e in xs} - {""})
    src_id = {s: i for i, s in enumerate(src_text)}
    sources = [(s.rsplit(":", 1)[0], int(s.rsplit(":", 1)[1])) for s in src_text]
    cols = {
        "core": [e["pid"] // _N_SUB for e in xs], "sub_core": [e["pid"] % _N_SUB for e in xs],
        "pipe": PIPE_OF_LANE_RANK[np.array([e["tid"] for e in xs], dtype=np.int64)
                                  % len(LANE_ORDER)],
        "name_id": [name_id[e["name"]] for e in xs],
        "start": [e["args"]["start_cycle"] for e in xs],
        "end": [e["args"]["end_cycle"] for e in xs],
        "bytes": [e["args"]["bytes"] for e in xs], "flops": [e["args"]["flops"] for e in xs],
        "src_id": [src_id.get(e["args"]["source"], -1) for e in xs],
    }
    cols = {k: np.asarray(v, dtype=INPUT_DTYPES[k]) for k, v in cols.items()}
    starts = {e["id"]: e for e in doc["traceEvents"] if e.get("ph") == "s"}
    ends = {e["id"]: e for e in doc["traceEvents"] if e.get("ph") == "f"}
    ids = sorted(set(starts) & set(ends))
    lane_pipe = {lane: int(PIPE_OF_LANE_RANK[i]) for i, lane in enumerate(LANE_ORDER)}
    flows = {
        "src_core": [starts[i]["pid"] // _N_SUB for i in ids],
        "src_sub": [starts[i]["pid"] % _N_SUB for i in ids],
        "src_pipe": [lane_pipe[starts[i]["args"]["src_pipe"]] for i in ids],
        "set_cycle": [starts[i]["args"]["set_cycle"] for i in ids],
        "dst_core": [ends[i]["pid"] // _N_SUB for i in ids],
        "dst_sub": [ends[i]["pid"] % _N_SUB for i in ids],
        "dst_pipe": [lane_pipe[starts[i]["args"]["dst_pipe"]] for i in ids],
        "wait_cycle": [starts[i]["args"]["wait_cycle"] for i in ids],
        "label_id": [name_id[starts[i]["name"]] for i in ids],
    }
    meta = {k: v for k, v in other.items()
            if k not in ("trace_schema_version", "clock_hz", "columns")}
    return cls(cols, names, sources, {k: np.asarray(v) for k, v in flows.items()},
               other["clock_hz"], meta)


def _track_slots(key: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Track index per row so that rows of one key on one track never overlap.

    Greedy interval colouring in (start, end) order, lowest free track first (optimal: as
    many tracks as the deepest overlap of intervals of positive length). Only keys with an
    overlap enter the Python loop.
    """
    slots = np.zeros(len(key), np.int64)
    if len(key) == 0:
        return slots
    order, k, first, s, run = sorted_runs(key, start, end)
    overlap = np.r_[False, s[1:] < run[:-1]]
    if not overlap.any():
        return slots
    busy_keys = np.isin(k, k[overlap])
    active: list = []  # heap of (end, track)
    free: list = []  # heap of free tracks
    prev_key, n_tracks = None, 0
    for i, kk, st, en in zip(order[busy_keys].tolist(), k[busy_keys].tolist(),
                             start[order][busy_keys].tolist(), end[order][busy_keys].tolist()):
        if kk != prev_key:
            active, free, prev_key, n_tracks = [], [], kk, 0
        while active and active[0][0] <= st:
            heapq.heappush(free, heapq.heappop(active)[1])
        if free:
            track = heapq.heappop(free)
        else:
            track, n_tracks = n_tracks, n_tracks + 1
        heapq.heappush(active, (en, track))
        slots[i] = track
    return slots


def _lane(pipe_code) -> str:
    return LANE_ORDER[LANE_RANK_OF_PIPE[int(pipe_code)]]


def _jsonable(meta: dict) -> dict:
    return json.loads(json.dumps(meta, default=_json_default))


def _json_default(obj):
    """JSON for what meta may hold: dataclasses (ChipSpec, TilingData), enums, numpy values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if hasattr(obj, "asdict"):
        return obj.asdict()
    if isinstance(obj, enum.Enum):
        return str(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)
