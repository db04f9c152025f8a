"""Trace levels: where a launch's instruction records go (ARCHITECTURE.md "Trace levels live with the trace").

The engine (core.py) appends each instruction to its stream's flat record list and hands the list to the
launch's *sink* in chunks (:data:`CHUNK_ROWS` rows, at the stream's time-sync points and at the end). The
sinks are interchangeable:

- :class:`FullSink` (``trace="full"``): keeps every row as numpy columns; gives a :class:`~npusim.trace.Trace`.
- :class:`SummarySink` (``trace="summary"``): folds each chunk into per core/sub-core/lane counts, bytes,
  FLOPs and busy cycles (union of intervals, kept exactly with a small carry of still-open intervals);
  memory does not grow with the instruction count. Gives a :class:`SummaryTrace`.
- :class:`NoneSink` (``trace="none"``): drops the records; the result has cycles and time, no trace.
- :class:`FileSink` (``trace="file:PATH"``): streams every row to a Parquet file (pyarrow) and keeps the
  summary; gives a :class:`FileTrace` that reads the file back for ``.df``, Chrome export and figures.
- default (``trace=None``): :class:`AutoSink`, full up to :data:`FULL_TRACE_MAX_ROWS` rows, then the
  summary only (with a warning naming the other levels).

Summaries of all levels are equal: they are computed from the same rounded cycles with the same rules
(``Trace.summary``). Record layout of a chunk: ``pipe, name_id, start, end, bytes, flops, src_id`` per
instruction (floats and ints, flat); flows, flat likewise: ``src pipe, set cycle, dst pipe, wait cycle, label_id,
src core, src sub``.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError, NpusimError
from npusim.trace import (_FLOW_KEYS, _N_SUB, INPUT_DTYPES, LANE_RANK_OF_PIPE, TRACE_SCHEMA_VERSION, Trace,
                          TraceSummary, summary_from_busy)

#: Rows a stream collects before it hands them to the sink (bounds the engine's own buffers: about 200
#: bytes per row in the flat Python list, x 72 streams on a 910B mix launch = 120 MB at most).
CHUNK_ROWS = 8192
#: Default level: keep every row up to this many (about 46 bytes each in numpy columns: 460 MB), then the
#: summary only. Pass trace="full" to keep every row of a larger run, trace="file:PATH" to stream them.
FULL_TRACE_MAX_ROWS = 10_000_000
#: Rows a FileSink buffers per Parquet row group.
FILE_ROW_GROUP_ROWS = 1 << 20
TRACE_LEVELS = ("full", "summary", "none", "file:PATH")
_N_LANES = 8


def check_trace_level(trace):
    """Validate a ``trace=`` argument: None (default), "full", "summary", "none" or "file:PATH"."""
    if trace is None or trace in ("full", "summary", "none"):
        return trace
    if isinstance(trace, str) and trace.startswith("file:") and len(trace) > 5:
        parent = Path(trace[5:]).expanduser().resolve().parent
        if not parent.is_dir():
            raise AclnnError(ACLNN_ERR_PARAM_INVALID,
                             f"trace: the directory of {trace[5:]!r} does not exist ({parent})")
        return trace
    raise AclnnError(ACLNN_ERR_PARAM_INVALID,
                     f"trace: must be one of None, 'full', 'summary', 'none' or 'file:PATH', got {trace!r}")


def make_sink(trace):
    """The sink for a checked ``trace=`` level."""
    if trace is None:
        return AutoSink()
    if trace == "full":
        return FullSink()
    if trace == "summary":
        return SummarySink()
    if trace == "none":
        return NoneSink()
    return FileSink(Path(trace[5:]).expanduser())


class StepLayout:
    """What the rows and flag arrows of a generated replay step (npusim/replay_code.py) hold that is the same at
    every replay; the step packs the rest, with zero bytes in the places this holds (struct pad bytes, which cost
    the step nothing), and the flush adds the two.

    Why: a value packed per replay costs the step's Python about as much as a cycle's arithmetic; of a vector-add
    tile's 16 rows and 6 arrows, 5 set rows' starts (their end less the flag cost) and 27 arrow values (pipes,
    labels, the stream's core) are the same at every replay (docs/performance.md).

    *table*: the rows' columns (n x 7 floats): 0 in the packed start and end cycles, NaN in the start of a row
    whose start is its end less *flag_cycles* (a SetFlag's row: the flush does CoreUnit.set_flag's float
    subtraction); *arrows*: the arrows' values (m x 7 floats), 0 where packed and in the source core and sub-core
    (the stream's, filled in by the flush).
    """

    __slots__ = ("table", "flag_cycles", "arrows")

    def __init__(self, table, flag_cycles: float, arrows):
        self.table, self.flag_cycles, self.arrows = table, flag_cycles, arrows


def _stacked(layouts: list, attr: str) -> tuple:
    """(the arrays *attr* of *layouts*, one per block, one after another; each block's count of their rows).

    NOTE: tiled when every block has one layout (a loop of one step), else gathered from the few distinct
    layouts' arrays by one index array, for performance reasons: not one numpy call per block."""
    first, k = layouts[0], len(layouts)
    if all([t is first for t in layouts]):
        one = getattr(first, attr)
        return np.tile(one, (k, 1)), np.full(k, len(one), np.int64)
    distinct: dict = {}
    which = np.fromiter([distinct.setdefault(t, len(distinct)) for t in layouts], np.int64, k)
    arrays = [getattr(t, attr) for t in distinct]
    own = np.fromiter([len(a) for a in arrays], np.int64, len(arrays))
    sizes = own[which]
    # row r of the result is row r - (the rows of the blocks before its block) of its block's layout
    first_rows = np.cumsum(sizes) - sizes
    at = np.repeat((np.cumsum(own) - own)[which] - first_rows, sizes) + np.arange(first_rows[-1] + sizes[-1])
    return np.take(np.concatenate(arrays), at, axis=0), sizes  # (take: a row copied as one piece)


def _packed(blocks: list) -> np.ndarray:
    """The blocks' packed values, one after another, as float64s (zero where their layouts hold the value)."""
    return np.frombuffer(b"".join([b[2] for b in blocks]), np.float64)


def _fill_cycles(cycles: np.ndarray, blocks: list, flag_cycles: float) -> None:
    """The blocks' start and end cycles into *cycles* (n x 2, their layouts' tables' cycle columns one after
    another): the packed ones, and the starts the layouts leave to the flush (NaN there) worked out."""
    derived = np.flatnonzero(np.isnan(cycles[:, 0]))
    cycles[:] = _packed(blocks).reshape(-1, 2)
    if len(derived):
        cycles[derived, 0] = cycles[derived, 1] - flag_cycles


def record_columns(core: int, sub: int, records: list, blocks=()) -> dict:
    """A stream's flat record list, with the rows of replayed steps in *blocks* placed among them (see
    :class:`TraceSink`) -> trace input columns (cycles rounded to integers)."""
    n = len(records) // 7
    if not n and blocks and all([b[1] is blocks[0][1] for b in blocks]):
        return _block_columns(core, sub, blocks)
    rec = np.fromiter(records, np.float64, 7 * n).reshape(n, 7)
    if blocks:
        rec = _with_blocks(rec, blocks)
    return _columns(core, sub, rec, rec[:, 2:4])


def _columns(core: int, sub: int, table: np.ndarray, cycles: np.ndarray, k: int = 1) -> dict:
    """Trace input columns of rows whose record columns are *table* (n x 7 floats) repeated *k* times, with
    start and end cycles *cycles* (k * n x 2 floats): integer columns, cycles rounded."""
    n = len(cycles)
    tiled = (lambda a: a) if k == 1 else (lambda a: np.tile(a, k))
    return {"core": np.full(n, core, np.int32), "sub_core": np.full(n, sub, np.int8),
            "pipe": tiled(table[:, 0].astype(np.int8)), "name_id": tiled(table[:, 1].astype(np.int32)),
            "start": np.rint(cycles[:, 0]).astype(np.int64), "end": np.rint(cycles[:, 1]).astype(np.int64),
            "bytes": tiled(table[:, 4].astype(np.int64)), "flops": tiled(table[:, 5].astype(np.int64)),
            "src_id": tiled(table[:, 6].astype(np.int32))}


def _block_columns(core: int, sub: int, blocks: list) -> dict:
    """:func:`record_columns` of a chunk of blocks of one recording only (a loop of one replayed step): its
    constant columns converted once and tiled, its cycles rounded from the packed bytes (the same values and
    conversions as through a tiled float table)."""
    layout, k = blocks[0][1], len(blocks)
    table = layout.table
    cycles = np.tile(table[:, 2:4], (k, 1))
    _fill_cycles(cycles, blocks, layout.flag_cycles)
    return _columns(core, sub, table, cycles, k)


def _with_blocks(rec: np.ndarray, blocks: list) -> np.ndarray:
    """The records *rec* (n x 7) with each block's rows inserted before the record its position names: the
    block's constant columns, its start and end cycles filled in (the same floats as a record's)."""
    layouts = [b[1] for b in blocks]
    rows, sizes = _stacked(layouts, "table")
    _fill_cycles(rows[:, 2:4], blocks, layouts[0].flag_cycles)
    if not len(rec):  # only blocks: nothing to place among them
        return rows
    return _interleaved(rec, rows, blocks, sizes)


def _interleaved(rec: np.ndarray, rows: np.ndarray, blocks: list, sizes: np.ndarray) -> np.ndarray:
    """The records *rec* (n x 7) with the blocks' rows *rows* (*sizes* of them per block) inserted: a block's
    before the record its position (``block[0]``, values made before it) names.

    NOTE: joined as slices, the records between two positions and the rows of the blocks made there, for
    performance reasons: blocks come in runs with no record between them (a FAG sample launch's chunk: about 100
    blocks at 5 positions), and a slice is copied whole where a row index copied row by row (about 2% of a FAG
    estimate's instructions)."""
    at = np.fromiter([b[0] for b in blocks], np.int64, len(blocks)) // 7  # records made before each block
    last = np.flatnonzero(np.r_[at[1:] != at[:-1], True])  # the last block made at each position
    pieces, r, b = [], 0, 0
    for a, e in zip(at[last].tolist(), np.cumsum(sizes)[last].tolist()):
        pieces += (rec[r:a], rows[b:e])
        r, b = a, e
    pieces.append(rec[r:])
    return np.concatenate(pieces)


def flow_values(flows: list, blocks: list, core: int, sub: int) -> np.ndarray:
    """A stream's flat flow records with the arrows of replayed steps (*blocks*: (values in *flows* made before
    them, their layout, their packed values)) placed among them, as one flat float64 array; *core*, *sub*: the
    stream's (the source of its replayed arrows)."""
    arrows, sizes = _stacked([b[1] for b in blocks], "arrows")
    arrows += _packed(blocks).reshape(-1, 7)  # each value is in one of the two, the other holds 0
    arrows[:, 5] = core
    arrows[:, 6] = sub
    if flows:
        arrows = _interleaved(np.fromiter(flows, np.float64, len(flows)).reshape(-1, 7), arrows, blocks, sizes)
    return arrows.reshape(-1)


def flow_columns(core: int, sub: int, flows) -> dict:
    """A stream's flat flow records (7 values per arrow; a list, or a float64 array from :func:`flow_values`) ->
    trace flow columns."""
    n = len(flows) // 7
    f = flows.reshape(n, 7) if type(flows) is np.ndarray else np.fromiter(flows, np.float64, 7 * n).reshape(n, 7)
    return {"src_core": f[:, 5].astype(np.int32), "src_sub": f[:, 6].astype(np.int32),
            "src_pipe": f[:, 0].astype(np.int32), "set_cycle": np.rint(f[:, 1]).astype(np.int64),
            "dst_core": np.full(n, core, np.int32), "dst_sub": np.full(n, sub, np.int32),
            "dst_pipe": f[:, 2].astype(np.int32), "wait_cycle": np.rint(f[:, 3]).astype(np.int64),
            "label_id": f[:, 4].astype(np.int32)}


def _concat(chunks: list, dtypes: dict) -> dict:
    return {k: (np.concatenate([c[k] for c in chunks]) if chunks else np.zeros(0, dt)) for k, dt in dtypes.items()}


_FLOW_DTYPES = {k: (np.int64 if k in ("set_cycle", "wait_cycle") else np.int32) for k in _FLOW_KEYS}


class TraceSink:
    """Receives a launch's records chunk by chunk; :meth:`finish` gives the launch's trace object.

    ``rows(core, sub, records, watermark, blocks)``: *records* is a flat chunk of one stream (the stream's rows
    in program order); *blocks*: rows of replayed steps that go among them, each as (the length of *records*
    when it was made, its constant columns as a rows x 7 float array, its start and end cycles packed as
    float64 bytes); *watermark*: no later row of that stream starts before this cycle.
    ``flows(core, sub, flows)``: that stream's flag arrows, flat (a list, or a float64 array). Streams hand
    chunks interleaved.
    """

    def rows(self, core: int, sub: int, records: list, watermark: float, blocks=()) -> None:
        raise NotImplementedError

    def flows(self, core: int, sub: int, flows: list) -> None:
        raise NotImplementedError

    def finish(self, names, sources, clock_hz: float, meta: dict):
        raise NotImplementedError

    def abort(self) -> None:
        """The launch failed: release what the sink holds (files stay as far as written)."""


class NoneSink(TraceSink):
    """``trace="none"``: records are dropped as they come; the launch gives cycles and time only."""

    def rows(self, core, sub, records, watermark, blocks=()):
        pass

    def flows(self, core, sub, flows):
        pass

    def finish(self, names, sources, clock_hz, meta):
        return None


class FullSink(TraceSink):
    """Every row in memory as numpy columns, ordered stream by stream as the launch built them."""

    def __init__(self):
        self.chunks: dict = {}  # (core, sub) -> list of column dicts
        self.flow_chunks: dict = {}
        self.n_rows = 0

    def rows(self, core, sub, records, watermark, blocks=()):
        c = record_columns(core, sub, records, blocks)
        self.chunks.setdefault((core, sub), []).append(c)
        self.n_rows += len(c["start"])

    def flows(self, core, sub, flows):
        self.flow_chunks.setdefault((core, sub), []).append(flow_columns(core, sub, flows))

    def finish(self, names, sources, clock_hz, meta):
        # streams were added in (block, sub-core) order (launch.py), so sorted keys give the launch's order
        cols = _concat([c for key in sorted(self.chunks) for c in self.chunks[key]], INPUT_DTYPES)
        flows = _concat([c for key in sorted(self.flow_chunks) for c in self.flow_chunks[key]], _FLOW_DTYPES)
        self.chunks = self.flow_chunks = {}
        return Trace(cols, list(names), list(sources), flows, clock_hz, meta)


class _StreamBusy:
    """Busy-cycle bookkeeping of one stream: per lane, closed union length and the still-open intervals."""

    __slots__ = ("busy", "open_start", "open_end", "closed_to", "count", "bytes", "flops")

    def __init__(self):
        self.busy = np.zeros(_N_LANES, np.int64)
        self.count = np.zeros(_N_LANES, np.int64)
        self.bytes = np.zeros(_N_LANES, np.int64)
        self.flops = np.zeros(_N_LANES, np.int64)
        self.open_start = [np.zeros(0, np.int64) for _ in range(_N_LANES)]
        self.open_end = [np.zeros(0, np.int64) for _ in range(_N_LANES)]
        self.closed_to = np.iinfo(np.int64).min  # every closed segment ends at or before this cycle


class SummarySink(TraceSink):
    """Per core/sub-core/lane instructions, busy cycles (exact union of intervals), bytes and FLOPs.

    Memory: per stream and lane, the merged intervals that may still grow (those ending after the
    stream's watermark: a handful), so it does not depend on the instruction count.
    """

    def __init__(self):
        self.streams: dict = {}  # (core, sub) -> _StreamBusy
        self.total_cycles = 0
        self.n_rows = 0

    def rows(self, core, sub, records, watermark, blocks=()):
        self.add_columns(core, sub, record_columns(core, sub, records, blocks), watermark)

    def add_columns(self, core, sub, c, watermark):
        """Fold rows (trace input columns *c*) into the stream's summary."""
        st = self.streams.get((core, sub))
        if st is None:
            st = self.streams[(core, sub)] = _StreamBusy()
        lane, start, end = LANE_RANK_OF_PIPE[c["pipe"]], c["start"], c["end"]
        n = len(start)
        self.n_rows += n
        if not n:
            return
        st.count += np.bincount(lane, minlength=_N_LANES)
        # NOTE: bincount's float weights would round sums past 2**53: exact integer sums per lane instead
        np.add.at(st.bytes, lane, c["bytes"])
        np.add.at(st.flops, lane, c["flops"])
        if start.min() < st.closed_to:
            raise NpusimError(f"trace summary: core{core} sub-core {sub} issued an instruction starting at "
                              f"{int(start.min())}, before its closed busy intervals (<= {st.closed_to})")
        self.total_cycles = max(self.total_cycles, int(end.max()))
        # NOTE: cycles past the watermark (rounded as the rows are, minus a cycle of float slack) may still
        # be covered by later rows; segments ending before it are final
        if np.isfinite(watermark):
            limit = int(np.rint(watermark)) - 1
        else:
            limit = np.iinfo(np.int64).max if watermark > 0 else np.iinfo(np.int64).min
        for r in np.unique(lane):
            sel = lane == r
            s = np.concatenate([st.open_start[r], start[sel]])
            e = np.concatenate([st.open_end[r], end[sel]])
            order = np.lexsort((e, s))
            s, run = s[order], np.maximum.accumulate(e[order])
            seg = np.flatnonzero(np.r_[True, s[1:] > run[:-1]])
            seg_start, seg_end = s[seg], run[np.r_[seg[1:] - 1, len(s) - 1]]
            done = seg_end <= limit
            st.busy[r] += int((seg_end[done] - seg_start[done]).sum())
            st.open_start[r], st.open_end[r] = seg_start[~done], seg_end[~done]
        if limit > st.closed_to:
            st.closed_to = limit

    def flows(self, core, sub, flows):
        pass

    def summary(self, clock_hz: float, chip: str) -> TraceSummary:
        keys, count, busy, nbytes, flops = [], [], [], [], []
        for (core, sub) in sorted(self.streams):
            st = self.streams[(core, sub)]
            for r in range(_N_LANES):
                if st.count[r]:
                    keys.append((core * _N_SUB + sub) * _N_LANES + r)
                    count.append(st.count[r])
                    busy.append(st.busy[r] + int((st.open_end[r] - st.open_start[r]).sum()))
                    nbytes.append(st.bytes[r])
                    flops.append(st.flops[r])
        arr = [np.asarray(x, np.int64) for x in (keys, count, busy, nbytes, flops)]
        return summary_from_busy(*arr, total_cycles=self.total_cycles, clock_hz=clock_hz, chip=chip)

    def finish(self, names, sources, clock_hz, meta):
        for st in self.streams.values():  # close what is still open: no row follows
            for r in range(_N_LANES):
                st.busy[r] += int((st.open_end[r] - st.open_start[r]).sum())
                st.open_start[r] = st.open_end[r] = np.zeros(0, np.int64)
        return SummaryTrace(self.summary(clock_hz, str(meta.get("chip", ""))), clock_hz,
                            meta)


class AutoSink(FullSink):
    """The default level: :class:`FullSink` up to FULL_TRACE_MAX_ROWS rows, then :class:`SummarySink`."""

    def __init__(self, max_rows: int | None = None):
        super().__init__()
        self.max_rows = FULL_TRACE_MAX_ROWS if max_rows is None else max_rows
        self.summary_sink: SummarySink | None = None

    def rows(self, core, sub, records, watermark, blocks=()):
        if self.summary_sink is not None:
            self.summary_sink.rows(core, sub, records, watermark, blocks)
            return
        super().rows(core, sub, records, watermark, blocks)
        if self.n_rows > self.max_rows:
            warnings.warn(f"npusim: the trace passed {self.max_rows:,} instructions; keeping its summary only "
                          "(trace='full' keeps every row, trace='file:PATH' streams them to a Parquet file, "
                          "trace='summary' skips this warning)", stacklevel=2)
            self.summary_sink = SummarySink()
            for key in sorted(self.chunks):  # the watermark of a replayed chunk is the stream's current one
                for chunk in self.chunks[key]:
                    self.summary_sink.add_columns(*key, chunk, -np.inf)
            self.chunks = {}

    def flows(self, core, sub, flows):
        if self.summary_sink is None:
            super().flows(core, sub, flows)

    def finish(self, names, sources, clock_hz, meta):
        if self.summary_sink is not None:
            return self.summary_sink.finish(names, sources, clock_hz, meta)
        return super().finish(names, sources, clock_hz, meta)


_FILE_COLUMNS = {"kind": np.int8, **INPUT_DTYPES, "src_core": np.int32, "src_sub": np.int8, "src_pipe": np.int8}
FILE_KIND_ROW, FILE_KIND_FLOW = 0, 1


class FileSink(SummarySink):
    """Every row streamed to a Parquet file, and the summary kept in memory.

    File layout (one table): ``kind`` 0 = instruction row (the trace input columns; ``src_*`` = -1),
    1 = flag arrow (``core, sub_core, pipe`` = destination, ``name_id`` = label, ``start`` / ``end`` = set /
    wait cycle, ``src_core, src_sub, src_pipe`` = source). Key-value metadata ``npusim`` (JSON): schema
    version, clock, names, sources, meta. :func:`read_trace_file` rebuilds the Trace.
    """

    def __init__(self, path: Path):
        super().__init__()
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.path = Path(path)
        self._pa = pa
        self.schema = pa.schema([(k, pa.from_numpy_dtype(np.dtype(dt))) for k, dt in _FILE_COLUMNS.items()])
        self.writer = pq.ParquetWriter(self.path, self.schema, compression="zstd")
        self.pending: list = []
        self.pending_rows = 0

    def rows(self, core, sub, records, watermark, blocks=()):
        c = record_columns(core, sub, records, blocks)
        self.add_columns(core, sub, c, watermark)
        n = len(c["start"])
        c.update(kind=np.zeros(n, np.int8), src_core=np.full(n, -1, np.int32), src_sub=np.full(n, -1, np.int8),
                 src_pipe=np.full(n, -1, np.int8))
        self._write(c)

    def flows(self, core, sub, flows):
        f = flow_columns(core, sub, flows)
        n = len(f["label_id"])
        self._write({"kind": np.ones(n, np.int8), "core": f["dst_core"], "sub_core": f["dst_sub"],
                     "pipe": f["dst_pipe"], "name_id": f["label_id"], "start": f["set_cycle"],
                     "end": f["wait_cycle"], "bytes": np.zeros(n, np.int64), "flops": np.zeros(n, np.int64),
                     "src_id": np.full(n, -1, np.int32), "src_core": f["src_core"], "src_sub": f["src_sub"],
                     "src_pipe": f["src_pipe"]})

    def _write(self, cols: dict, flush: bool = False) -> None:
        if cols:
            self.pending.append(cols)
            self.pending_rows += len(cols["kind"])
        if self.pending and (flush or self.pending_rows >= FILE_ROW_GROUP_ROWS):
            data = _concat(self.pending, _FILE_COLUMNS)
            self.writer.write_table(self._pa.table(data, schema=self.schema))
            self.pending, self.pending_rows = [], 0

    def finish(self, names, sources, clock_hz, meta):
        self._write({}, flush=True)
        info = {"trace_schema_version": TRACE_SCHEMA_VERSION, "clock_hz": clock_hz, "names": list(names),
                "sources": [list(s) for s in sources], "meta": meta}
        self.writer.add_key_value_metadata({"npusim": json.dumps(info, default=str)})
        self.writer.close()
        self.writer = None
        summary = super().finish(names, sources, clock_hz, meta)
        return FileTrace(self.path, summary.summary(), clock_hz, meta)

    def abort(self) -> None:
        """The launch failed: close the writer and remove the partial file (it would have no metadata)."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            self.path.unlink(missing_ok=True)


def read_trace_file(path, cores=None) -> Trace:
    """Rebuild a :class:`Trace` from a ``trace="file:PATH"`` Parquet file (*cores*: only these block ids).

    Raises AclnnError(ACLNN_ERR_PARAM_INVALID) if *path* is not an npusim trace file of this schema version.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.is_file():
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"path: trace file {str(path)!r} not found")
    try:
        pf = pq.ParquetFile(path)
        info = json.loads((pf.metadata.metadata or {})[b"npusim"])
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same user error
        raise AclnnError(ACLNN_ERR_PARAM_INVALID,
                         f"path: {str(path)!r} is not an npusim Parquet trace ({type(exc).__name__}: {exc})") from None
    if info.get("trace_schema_version") != TRACE_SCHEMA_VERSION:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"path: {str(path)!r} has trace schema version "
                                                  f"{info.get('trace_schema_version')}, expected {TRACE_SCHEMA_VERSION}")
    filters = [("core", "in", [int(c) for c in cores])] if cores is not None else None
    table = pq.read_table(path, filters=filters)
    data = {k: table.column(k).to_numpy() for k in _FILE_COLUMNS}
    # streams wrote their chunks interleaved: a stable sort by stream restores the launch's row order
    kind = data["kind"]
    stream = data["core"].astype(np.int64) * _N_SUB + data["sub_core"]
    rows = np.flatnonzero(kind == FILE_KIND_ROW)
    rows = rows[np.argsort(stream[rows], kind="stable")]
    flows = np.flatnonzero(kind == FILE_KIND_FLOW)
    flows = flows[np.argsort(stream[flows], kind="stable")]
    cols = {k: data[k][rows] for k in INPUT_DTYPES}
    flow_cols = {"src_core": data["src_core"][flows], "src_sub": data["src_sub"][flows],
                 "src_pipe": data["src_pipe"][flows], "set_cycle": data["start"][flows],
                 "dst_core": data["core"][flows], "dst_sub": data["sub_core"][flows], "dst_pipe": data["pipe"][flows],
                 "wait_cycle": data["end"][flows], "label_id": data["name_id"][flows]}
    return Trace(cols, info["names"], [tuple(s) for s in info["sources"]], flow_cols, info["clock_hz"],
                 info["meta"])


def load_trace(path, cores=None) -> Trace:
    """A trace file written by npusim: Parquet (``trace="file:PATH"``) or Chrome JSON (``to_chrome_json``)."""
    path = Path(path)
    if path.is_file():
        with open(path, "rb") as fh:
            if fh.read(4) == b"PAR1":
                return read_trace_file(path, cores)
    return Trace.from_chrome_json(path)


class SummaryTrace:
    """The trace of a ``trace="summary"`` run: its :class:`~npusim.trace.TraceSummary`, no instruction rows."""

    level = "summary"

    def __init__(self, summary: TraceSummary, clock_hz: float, meta: dict):
        self._summary = summary
        self.clock_hz = float(clock_hz)
        self.meta = dict(meta)

    def __len__(self) -> int:
        return self._summary.instructions

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({len(self)} instructions, {self.total_cycles} cycles, "
                f"chip={self.meta.get('chip')!r})")

    @property
    def total_cycles(self) -> int:
        return self._summary.total_cycles

    @property
    def time_us(self) -> float:
        return self._summary.time_us

    @property
    def clock_mhz(self) -> float:
        return self.clock_hz / 1e6

    def summary(self) -> TraceSummary:
        return self._summary

    def busy(self):
        return self._summary.pipes.drop(columns="busy_pct")

    def plot_utilisation(self, path, title: str | None = None) -> Path:
        from npusim import viz

        return viz.plot_utilisation(self, path, title=title)

    def _no_rows(self, what: str):
        raise AclnnError(ACLNN_ERR_PARAM_INVALID,
                         f"trace: {what} needs the instruction rows, which trace='summary' does not keep; "
                         "run with trace='full' or trace='file:PATH'")

    @property
    def df(self):
        self._no_rows(".df")

    @property
    def columns(self):
        self._no_rows(".columns")

    def to_chrome_json(self, path):
        self._no_rows("to_chrome_json")

    def to_csv(self, path):
        self._no_rows("to_csv")

    def plot_gantt(self, path, **kwargs):
        self._no_rows("plot_gantt")


class FileTrace(SummaryTrace):
    """The trace of a ``trace="file:PATH"`` run: the summary in memory, the rows in the Parquet file
    :attr:`path`; row-level views (``df``, exports, Gantt) read the file (:meth:`load`)."""

    level = "file"

    def __init__(self, path: Path, summary: TraceSummary, clock_hz: float, meta: dict):
        super().__init__(summary, clock_hz, meta)
        self.path = Path(path)

    def load(self, cores=None) -> Trace:
        """The full :class:`~npusim.trace.Trace` read from the file (*cores*: only these block ids)."""
        return read_trace_file(self.path, cores)

    @property
    def df(self):
        return self.load().df

    @property
    def columns(self):
        return self.load().columns

    def to_chrome_json(self, path, cores=None) -> Path:
        return self.load(cores).to_chrome_json(path)

    def to_csv(self, path) -> Path:
        return self.load().to_csv(path)

    def plot_gantt(self, path, max_cores: int = 8, title: str | None = None, show_flows: bool = False) -> Path:
        return self.load(range(max_cores)).plot_gantt(path, max_cores=max_cores, title=title,
                                                      show_flows=show_flows)
