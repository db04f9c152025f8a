"""Run one sweep point in whatever process or Dask worker holds it, and turn the result into a row.

A point the operator refuses (AclnnError: an illegal tiling, a shape the chip cannot take) becomes a
row with status "refused" and the status code and message; any other exception becomes status
"error" (kept out of the cache, so a fixed bug is re-run). Nothing escapes to stop the sweep.
"""
from __future__ import annotations

import inspect
import time
from functools import cache

from npusim.errors import AclnnError
from npusim.sweep.study import Point

#: Lanes whose busy share is recorded (FLOWCTRL is waiting, not work: trace.TraceSummary).
BUSY_LANES = ("SCALAR", "MTE1", "CUBE", "FIXP", "MTE2", "VECTOR", "MTE3")


def chip_of(point: Point):
    from npusim.chip import chip as get_chip

    return get_chip(point.chip).replace(**dict(point.chip_changes))


def call_point(point: Point):
    """The operator call of *point* (OpResult); raises what the operator raises. A row needs the trace
    summary only (bound unit, busy shares), so the call keeps just that (``trace="summary"``: no
    per-instruction rows are built) where the operator takes ``trace=``."""
    from npusim import registry

    entry = registry.get(point.operator)
    args, kwargs = entry.build_call(dict(point.problem))
    tiling = dict(point.tiling) or None
    if point.mode == "timing" and _takes_trace(entry.api):
        kwargs["trace"] = "summary"
    return entry.api(*args, **kwargs, chip=chip_of(point), mode=point.mode, tiling=tiling)


@cache
def _takes_trace(api) -> bool:
    return "trace" in inspect.signature(api).parameters


def run_point(point: Point) -> dict:
    """One row: identity, inputs, tiling, status and, when it ran, time, cycles, bound unit, busy
    shares, UB/L1 occupancy, workspace and the wall time of the call."""
    row = base_row(point)
    t0 = time.perf_counter()
    try:
        res = call_point(point)
    except AclnnError as e:
        row.update(status="refused", error_code=int(e.status), error=e.message)
    except Exception as e:  # noqa: BLE001 - a simulator fault is recorded, the sweep goes on
        row.update(status="error", error=f"{type(e).__name__}: {e}")
    else:
        row.update(result_columns(point, res))
    row["wall_s"] = time.perf_counter() - t0
    return row


def base_row(point: Point) -> dict:
    row = {"point_id": point.key, "operator": point.operator, "mode": point.mode, "problem": point.problem_name}
    row.update({f"p.{k}": v for k, v in point.problem})
    row["chip"] = point.chip
    row.update({f"chip.{k}": v for k, v in point.chip_changes})
    row.update({f"t.{k}": v for k, v in point.tiling})
    row.update(is_default=not point.tiling, status="ok", error_code=None, error=None)
    return row


def result_columns(point: Point, res) -> dict:
    from npusim import registry

    spec = chip_of(point)
    out = {"time_us": float(res.time_us), "cycles": int(res.cycles), "block_dim": int(res.block_dim),
           "workspace_bytes": int(res.workspace_size)}
    space_of = registry.get(point.operator).tiling_space
    if space_of is not None:
        out.update(space_of(dict(point.problem), spec).measure(res, spec, dict(point.tiling)))
    ub = out.get("ub_bytes")
    out["ub_pct"] = 100.0 * ub / spec.ub_bytes if ub is not None else None
    l1 = out.get("l1_bytes")
    out["l1_pct"] = 100.0 * l1 / spec.l1_bytes if l1 is not None else None
    out["bound"] = None
    if res.trace is not None and len(res.trace):
        summary = res.trace.summary()
        if len(summary.bound):
            out["bound"] = str(summary.bound.loc[summary.bound["busy_cycles"].idxmax(), "pipe"])
        busiest = summary.pipes.groupby("pipe")["busy_pct"].max()
        out.update({f"busy.{lane}": float(busiest.get(lane, 0.0)) for lane in BUSY_LANES})
    return out
