"""The instruction trace of one simulated launch, its summary and its exports (STYLE §8).

Contents: :data:`TRACE_SCHEMA_VERSION` and :data:`TRACE_COLUMNS` (the one declaration of the
DataFrame schema), :data:`LANE_ORDER` (msprof op simulator lanes, research/hardware.md §10),
:class:`Trace` (columnar record, lazy ``.df``, ``summary()``, CSV exports; Chrome JSON export and
import delegate to :mod:`npusim.trace_chrome`), :class:`TraceSummary`, and :func:`read_trace_csv`.
Only ``Trace.to_*`` / ``Trace.plot_*`` write files.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.types import FLOWCTRL_LANE, Pipe, SubCore

#: Bump when a column of TRACE_COLUMNS is renamed, dropped or changes meaning (STYLE §8).
TRACE_SCHEMA_VERSION = 1


class TraceColumn(NamedTuple):
    """One column of :attr:`Trace.df`."""

    name: str
    dtype: str
    unit: str
    meaning: str


TRACE_COLUMNS: list[TraceColumn] = [
    TraceColumn("core", "int32", "", "block index (GetBlockIdx) of the AI Core"),
    TraceColumn("sub_core", "str", "", "cubecore0 / veccore0 / veccore1 / aicore (str(SubCore))"),
    TraceColumn("pipe", "str", "", "msprof lane: SCALAR VECTOR CUBE MTE1 MTE2 MTE3 FIXP FLOWCTRL"),
    TraceColumn("name", "str", "", "Ascend C instruction name (DataCopy, Mmad, Add, SetFlag...)"),
    TraceColumn("start_cycle", "int64", "cycle", "cycle the pipe starts the instruction"),
    TraceColumn("end_cycle", "int64", "cycle", "cycle the instruction leaves the pipe"),
    TraceColumn("duration_cycles", "int64", "cycle", "end_cycle - start_cycle"),
    TraceColumn("bytes", "int64", "byte", "bytes moved by the instruction, 0 if none"),
    TraceColumn("flops", "int64", "flop", "floating/integer operations, 0 if none"),
    TraceColumn("source", "str", "", "kernel line that issued it, 'file:line'; '' if unknown"),
]

#: Lanes in msprof op simulator display order (hardware.md §10); index = Chrome tid.
LANE_ORDER: tuple[str, ...] = ("SCALAR", FLOWCTRL_LANE, "MTE1", "CUBE", "FIXP", "MTE2",
                               "VECTOR", "MTE3")
#: Pipe code of synchronisation instructions in the ``pipe`` input column.
FLOWCTRL_PIPE = len(Pipe)
#: pipe code (0..6 = Pipe, 7 = FLOWCTRL) -> lane index in LANE_ORDER.
LANE_RANK_OF_PIPE = np.array([LANE_ORDER.index(Pipe(p).lane) for p in range(len(Pipe))]
                             + [LANE_ORDER.index(FLOWCTRL_LANE)], dtype=np.int64)
#: lane index in LANE_ORDER -> pipe code.
PIPE_OF_LANE_RANK = np.argsort(LANE_RANK_OF_PIPE)
_SUB_NAMES = [str(SubCore(i)) for i in range(len(SubCore))]

#: Input columns of :class:`Trace` and their dtypes (``pipe`` 7 = FLOWCTRL).
INPUT_DTYPES = {"core": np.int32, "sub_core": np.int8, "pipe": np.int8, "name_id": np.int32,
                "start": np.int64, "end": np.int64, "bytes": np.int64, "flops": np.int64,
                "src_id": np.int32}
_FLOW_KEYS = ("src_core", "src_sub", "src_pipe", "set_cycle", "dst_core", "dst_sub", "dst_pipe",
              "wait_cycle", "label_id")
#: Optional flow columns: row index of the SetFlag / WaitFlag instruction (-1 = unknown).
_FLOW_ROWS = ("set_row", "wait_row")
_N_SUB = len(SubCore)


def process_name(core: int, sub_core: int) -> str:
    """msprof's directory/process name of a sub-core, e.g. ``core3.veccore1``."""
    return f"core{int(core)}.{_SUB_NAMES[int(sub_core)]}"


def _invalid(message: str) -> AclnnError:
    return AclnnError(ACLNN_ERR_PARAM_INVALID, message)


class Trace:
    """Every instruction of one launch, one row each, stored as numpy columns.

    Built by the simulator core (the constructor only checks shapes, so it stays cheap); the
    pandas view :attr:`df` is built on first use and cached. Cycles count from kernel start.
    *columns* holds ``core, sub_core, pipe, name_id, start, end, bytes, flops, src_id`` (dtypes in
    ``INPUT_DTYPES``; ``pipe`` 7 = FLOWCTRL), *flows* holds set->wait arrows (``_FLOW_KEYS``,
    optionally ``set_row``/``wait_row``: the SetFlag/WaitFlag row index, for exact arrows),
    *meta* at least ``chip``, ``npusim_version``, ``mode``, ``block_dim``, ``tiling``.
    Raises ValueError if a column is missing, has the wrong length, or ends before it starts.
    """

    def __init__(self, columns: dict[str, np.ndarray], names: list[str],
                 sources: list[tuple[str, int]], flows: dict[str, np.ndarray] | None,
                 clock_hz: float, meta: dict):
        self.columns = {k: _column(columns, k, dt) for k, dt in INPUT_DTYPES.items()}
        n = len(self.columns["core"])
        for key, arr in self.columns.items():
            if arr.shape != (n,):
                raise ValueError(f"Trace column {key!r} has shape {arr.shape}, expected ({n},)")
        if n and np.any(self.columns["end"] < self.columns["start"]):
            row = int(np.argmax(self.columns["end"] < self.columns["start"]))
            raise ValueError(f"Trace row {row}: end < start")
        if n and (self.columns["pipe"].min() < 0 or self.columns["pipe"].max() > FLOWCTRL_PIPE):
            raise ValueError(f"Trace column 'pipe' must hold 0..{FLOWCTRL_PIPE}")
        if not clock_hz > 0:
            raise ValueError(f"Trace clock_hz must be > 0, got {clock_hz!r}")
        self.names = list(names)
        self.sources = list(sources)
        flows = flows or {}
        self.flows = {k: np.asarray(flows.get(k, np.zeros(0, np.int64)),
                                    dtype=np.int32 if k == "label_id" else np.int64)
                      for k in _FLOW_KEYS + tuple(k for k in _FLOW_ROWS if k in flows)}
        if len({len(v) for v in self.flows.values()}) > 1:
            raise ValueError("Trace flow arrays differ in length: "
                             + str({k: len(v) for k, v in self.flows.items()}))
        self.clock_hz = float(clock_hz)
        self.meta = dict(meta)
        self._df: pd.DataFrame | None = None
        #: sanitizer reports' instructions (npusim.sanitizer): Chrome JSON shows them as instant events
        self.marks: list[dict] = []

    # --- basic facts -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.columns["core"])

    def __repr__(self) -> str:
        return (f"Trace({len(self)} instructions, {len(np.unique(self.columns['core']))} cores, "
                f"{self.total_cycles} cycles, chip={self.meta.get('chip')!r})")

    @property
    def total_cycles(self) -> int:
        """Last instruction end, in cycles from kernel start (0 for an empty trace)."""
        return int(self.columns["end"].max()) if len(self) else 0

    @property
    def time_us(self) -> float:
        """:attr:`total_cycles` in microseconds at :attr:`clock_hz`."""
        return self.total_cycles / self.clock_mhz

    @property
    def clock_mhz(self) -> float:
        return self.clock_hz / 1e6

    def lane_names(self) -> np.ndarray:
        """Lane name (str) of each row, as in the ``pipe`` column of :attr:`df`."""
        return np.array(LANE_ORDER, dtype=object)[LANE_RANK_OF_PIPE[self.columns["pipe"]]]

    # --- DataFrame ---------------------------------------------------------------------------
    @property
    def df(self) -> pd.DataFrame:
        """One row per instruction in TRACE_COLUMNS order and dtypes (built once, then cached)."""
        if self._df is None:
            c = self.columns
            names = np.array(self.names, dtype=object)
            # src_id -1 indexes the trailing "" (unknown source)
            srcs = np.array([f"{f}:{line}" for f, line in self.sources] + [""], dtype=object)
            data = {
                "core": c["core"],
                "sub_core": np.array(_SUB_NAMES, dtype=object)[c["sub_core"]],
                "pipe": self.lane_names(),
                "name": names[c["name_id"]],
                "start_cycle": c["start"],
                "end_cycle": c["end"],
                "duration_cycles": c["end"] - c["start"],
                "bytes": c["bytes"],
                "flops": c["flops"],
                "source": srcs[c["src_id"]],
            }
            self._df = pd.DataFrame({col.name: pd.Series(data[col.name], dtype=col.dtype)
                                     for col in TRACE_COLUMNS})
        return self._df

    # --- summary -----------------------------------------------------------------------------
    def busy(self) -> pd.DataFrame:
        """Per (core, sub_core, lane): instructions, busy cycles, bytes, flops.

        Busy cycles are the length of the union of the lane's instruction intervals, because
        instructions of one pipe overlap while the pipeline is full; computed vectorised.
        """
        keys, count, busy, nbytes, flops = self._busy_arrays()
        return busy_frame(keys, count, busy, nbytes, flops)

    def _busy_arrays(self):
        c = self.columns
        key = (c["core"].astype(np.int64) * (_N_SUB * 8) + c["sub_core"].astype(np.int64) * 8
               + LANE_RANK_OF_PIPE[c["pipe"]])
        keys, busy, first, order = _union_per_key(key, c["start"], c["end"])
        count = np.diff(np.append(first, len(key)))
        sums = {k: (np.add.reduceat(c[k][order], first) if len(key) else np.zeros(0, np.int64))
                for k in ("bytes", "flops")}
        return keys, count, busy, sums["bytes"], sums["flops"]

    def summary(self) -> TraceSummary:
        """Total time, busy cycles and % per core/sub-core/lane, and the bound unit per core."""
        return summary_from_busy(*self._busy_arrays(), total_cycles=self.total_cycles,
                                 clock_hz=self.clock_hz, chip=str(self.meta.get("chip", "")))

    # --- exports -----------------------------------------------------------------------------
    def to_csv(self, path) -> Path:
        """Write :attr:`df` as CSV (read it back with :func:`read_trace_csv`)."""
        path = Path(path)
        self.df.to_csv(path, index=False)
        return path

    def to_instr_csv(self, path, core: int | None = None, sub_core: str | None = None) -> Path:
        """Per-instruction totals shaped like msprof's ``*_instr_exe.csv``.

        Columns instr, pipe, call_count, cycles (sum of durations), running_time(us); hottest
        first. *core* / *sub_core* (e.g. ``"veccore0"``) restrict it to one unit, as msprof's
        per-core files are.
        """
        df = self._select(core, sub_core)
        g = (df.groupby(["name", "pipe"], sort=True)["duration_cycles"]
             .agg(call_count="size", cycles="sum").reset_index())
        g = g.rename(columns={"name": "instr"})
        g["running_time(us)"] = g["cycles"] / self.clock_mhz
        g = g.sort_values("cycles", ascending=False, kind="stable")
        path = Path(path)
        g.to_csv(path, index=False)
        return path

    def to_code_csv(self, path, core: int | None = None, sub_core: str | None = None) -> Path:
        """Per kernel line totals shaped like msprof's ``*_code_exe.csv`` (code, call_count,
        cycles, running_time(us)); instructions of unknown source are grouped under ''."""
        df = self._select(core, sub_core)
        g = (df.groupby("source", sort=True)["duration_cycles"]
             .agg(call_count="size", cycles="sum").reset_index().rename(columns={"source": "code"}))
        g["running_time(us)"] = g["cycles"] / self.clock_mhz
        g = g.sort_values("cycles", ascending=False, kind="stable")
        path = Path(path)
        g.to_csv(path, index=False)
        return path

    def _select(self, core, sub_core) -> pd.DataFrame:
        df = self.df
        if core is not None:
            if not isinstance(core, (int, np.integer)) or isinstance(core, bool):
                raise _invalid(f"core must be a block index (int), got {core!r}")
            df = df[df["core"] == int(core)]
        if sub_core is not None:
            if str(sub_core) not in _SUB_NAMES:
                raise _invalid(f"sub_core must be one of {_SUB_NAMES}, got {sub_core!r}")
            df = df[df["sub_core"] == str(sub_core)]
        return df

    def to_chrome_json(self, path) -> Path:
        """Write Chrome Trace Event JSON (Perfetto, chrome://tracing, MindStudio Insight).

        Layout: :func:`npusim.trace_chrome.write_chrome_json` (pid = core/sub-core, tid = lane,
        "X" events in µs with exact cycles in args, SetFlag -> WaitFlag flows, ``otherData`` with
        the schema version, clock and *meta*).
        """
        from npusim import trace_chrome  # imports this module: resolved at call time

        return trace_chrome.write_chrome_json(self, path)

    @classmethod
    def from_chrome_json(cls, path) -> Trace:
        """Rebuild a Trace from a file written by :meth:`to_chrome_json` (for ``npusim plot``).

        Raises AclnnError(ACLNN_ERR_PARAM_INVALID) if *path* is not an npusim trace of this
        schema version (:func:`npusim.trace_chrome.read_chrome_json`).
        """
        from npusim import trace_chrome

        return trace_chrome.read_chrome_json(path, cls)

    # --- figures -----------------------------------------------------------------------------
    def plot_gantt(self, path, max_cores: int = 8, title: str | None = None,
                   show_flows: bool = False) -> Path:
        """Pipeline Gantt chart as an image file (see :func:`npusim.viz.plot_gantt`)."""
        from npusim import viz  # matplotlib is imported only when a figure is asked for

        return viz.plot_gantt(self, path, max_cores=max_cores, title=title, show_flows=show_flows)

    def plot_utilisation(self, path, title: str | None = None) -> Path:
        """Busy % per lane as a bar chart (see :func:`npusim.viz.plot_utilisation`)."""
        from npusim import viz

        return viz.plot_utilisation(self, path, title=title)


@dataclass(frozen=True)
class TraceSummary:
    """What :meth:`Trace.summary` reports.

    ``pipes``: one row per (core, sub_core, lane) that ran anything: instructions, busy_cycles
    (union of intervals), busy_pct (of total_cycles), bytes, flops; lanes with no instruction are
    absent, not zero. ``bound``: per core, the (sub_core, lane) with the most busy cycles,
    FLOWCTRL excluded (waiting is not work).
    """

    total_cycles: int
    time_us: float
    clock_hz: float
    instructions: int
    total_bytes: int
    total_flops: int
    chip: str
    pipes: pd.DataFrame
    bound: pd.DataFrame

    def busy_table(self, value: str = "busy_pct") -> pd.DataFrame:
        """Wide table: index 'coreN.subcore', columns lanes in LANE_ORDER; NaN = lane unused."""
        if value not in ("busy_pct", "busy_cycles", "instructions", "bytes", "flops"):
            raise _invalid(f"value must be a numeric column of TraceSummary.pipes, got {value!r}")
        p = self.pipes
        unit = "core" + p["core"].astype(str) + "." + p["sub_core"]
        wide = p.assign(unit=unit).pivot(index="unit", columns="pipe", values=value)
        order = p.drop_duplicates(["core", "sub_core"])
        rows = ("core" + order["core"].astype(str) + "." + order["sub_core"]).tolist()
        return wide.reindex(index=rows, columns=[ln for ln in LANE_ORDER if ln in wide.columns])

    def __str__(self) -> str:
        return self.to_text()

    def to_text(self, max_rows: int = 24) -> str:
        """The compact table ``str()`` prints, with at most *max_rows* sub-core rows."""
        head = (f"npusim trace: {self.total_cycles} cycles = {self.time_us:.3f} us at "
                f"{self.clock_hz / 1e6:g} MHz, {self.instructions} instructions"
                + (f", chip {self.chip}" if self.chip else ""))
        if not len(self.pipes):
            return head + "\n(no instructions)"
        table = self.busy_table()
        lines = [head, "busy % per lane (union of instruction intervals / total cycles; "
                       "'-' = unused)"]
        width = max(len(r) for r in table.index)
        lines.append(" " * width + "".join(f"{c:>9}" for c in table.columns))
        for unit, row in list(table.iterrows())[:max_rows]:
            lines.append(f"{unit:<{width}}" + "".join(
                f"{'-':>9}" if np.isnan(v) else f"{v:9.1f}" for v in row))
        if len(table) > max_rows:
            lines.append(f"... {len(table) - max_rows} more rows (TraceSummary.busy_table())")
        counts = self.bound.groupby("pipe", sort=False).size().sort_values(ascending=False,
                                                                          kind="stable")
        lines.append("bound unit: " + ", ".join(f"{lane} on {n} core{'s' if n > 1 else ''}"
                                                for lane, n in counts.items()))
        if len(self.bound) <= 8:
            lines.extend(f"  core{r.core}: {r.sub_core} {r.pipe} {r.busy_pct:.1f}%"
                         for r in self.bound.itertuples())
        return "\n".join(lines)


def busy_frame(keys, count, busy, nbytes, flops) -> pd.DataFrame:
    """Trace.busy's table from per-key arrays (key = (core * sub-cores + sub_core) * 8 + lane rank)."""
    rank = keys % 8
    return pd.DataFrame({
        "core": (keys // (_N_SUB * 8)).astype(np.int32),
        "sub_core": pd.Series(np.array(_SUB_NAMES, dtype=object)[(keys // 8) % _N_SUB], dtype="str"),
        "pipe": pd.Series(np.array(LANE_ORDER, dtype=object)[rank], dtype="str"),
        "instructions": np.asarray(count).astype(np.int64),
        "busy_cycles": np.asarray(busy).astype(np.int64),
        "bytes": np.asarray(nbytes).astype(np.int64),
        "flops": np.asarray(flops).astype(np.int64),
    })


def summary_from_busy(keys, count, busy, nbytes, flops, *, total_cycles: int, clock_hz: float,
                      chip: str) -> TraceSummary:
    """The TraceSummary of per-key busy arrays (sorted keys, as busy_frame): one rule for every trace
    level, so summaries of full, summary and file traces are equal (npusim.trace_sink)."""
    total = int(total_cycles)
    pipes = busy_frame(keys, count, busy, nbytes, flops)
    pipes.insert(5, "busy_pct", 100.0 * pipes["busy_cycles"] / total if total else 0.0)
    compute = pipes[pipes["pipe"] != FLOWCTRL_LANE]  # waiting is not a bound
    cols = ["core", "sub_core", "pipe", "busy_cycles", "busy_pct"]
    if len(compute):
        bound = compute.loc[compute.groupby("core", sort=True)["busy_cycles"].idxmax(), cols]
    else:
        bound = compute[cols]
    return TraceSummary(total_cycles=total, time_us=total / (clock_hz / 1e6), clock_hz=float(clock_hz),
                        instructions=int(np.sum(count)), total_bytes=int(np.sum(nbytes)),
                        total_flops=int(np.sum(flops)), chip=chip, pipes=pipes,
                        bound=bound.reset_index(drop=True))


def read_trace_csv(path) -> pd.DataFrame:
    """Read a :meth:`Trace.to_csv` file back with the TRACE_COLUMNS dtypes.

    Raises AclnnError(ACLNN_ERR_PARAM_INVALID) if its columns are not TRACE_COLUMNS.
    """
    df = pd.read_csv(path, dtype={c.name: c.dtype for c in TRACE_COLUMNS},
                     keep_default_na=False, na_values=[])
    expected = [c.name for c in TRACE_COLUMNS]
    if list(df.columns) != expected:
        raise _invalid(f"path {str(path)!r} has columns {list(df.columns)}, expected {expected}")
    return df


def sorted_runs(key: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Rows sorted by (key, start), with a running maximum of ends that restarts per key.

    Returns (order = lexsort((end, start, key)), sorted keys, index of each key's first sorted row,
    shifted starts, running max of shifted ends). Times are shifted by key-rank x span so one
    np.maximum.accumulate never carries an end from one key into the next.
    """
    order = np.lexsort((end, start, key))
    k = key[order]
    is_first = np.r_[True, k[1:] != k[:-1]]
    first = np.flatnonzero(is_first)
    shift = (np.cumsum(is_first) - 1) * (int(end.max() - start.min()) + 1) - start.min()
    s = start[order] + shift
    run = np.maximum.accumulate(end[order] + shift)
    return order, k, first, s, run


def _union_per_key(key: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Length of the union of [start, end) intervals per key, vectorised.

    Returns (sorted unique keys, union length per key, index of each key's first row in the
    sorted order, the sorting permutation of :func:`sorted_runs`). A merged segment begins
    where a start exceeds the running maximum of the earlier ends of its key.
    """
    if len(key) == 0:
        z = np.zeros(0, np.int64)
        return z, z, z, z
    order, k, first, s, run = sorted_runs(key, start, end)
    seg = np.flatnonzero(np.r_[True, s[1:] > run[:-1]])
    seg_last = np.r_[seg[1:] - 1, len(s) - 1]
    seg_len = run[seg_last] - s[seg]
    # every key has >= 1 segment; its segments start at its first row's segment
    seg_first_of_key = np.searchsorted(seg, first)
    return k[first], np.add.reduceat(seg_len, seg_first_of_key).astype(np.int64), first, order


def _column(columns: dict, key: str, dtype) -> np.ndarray:
    if key not in columns:
        raise ValueError(f"Trace columns lack {key!r}; need {sorted(INPUT_DTYPES)}")
    return np.asarray(columns[key], dtype=dtype)
