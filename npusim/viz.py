"""Figures of traces and sweeps (matplotlib, Agg canvas, no pyplot state).

Contents: :func:`plot_gantt` (pipeline Gantt per core/sub-core/lane), :func:`plot_utilisation`
(busy % per lane), :func:`plot_heatmap` (a metric over two sweep parameters) and
:func:`plot_roofline`. Each draws on its own ``matplotlib.figure.Figure`` and writes *path*
(format from the suffix); nothing is shown and no global figure is left open.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.trace import FLOWCTRL_LANE, LANE_ORDER, LANE_RANK_OF_PIPE, Trace, process_name
from npusim.types import SubCore

#: One colour per msprof lane, shared by every figure.
LANE_COLORS = {
    "SCALAR": "#7f7f7f", FLOWCTRL_LANE: "#222222", "MTE1": "#bcbd22", "CUBE": "#d62728",
    "FIXP": "#9467bd", "MTE2": "#1f77b4", "VECTOR": "#2ca02c", "MTE3": "#ff7f0e",
}
_N_SUB = len(SubCore)  # pid encoding of trace.py: core * 4 + sub_core


def _invalid(message: str) -> AclnnError:
    return AclnnError(ACLNN_ERR_PARAM_INVALID, message)


def _save(fig: Figure, path) -> Path:
    path = Path(path)
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=fig.dpi)
    return path


def plot_gantt(trace: Trace, path, max_cores: int = 8, title: str | None = None,
               show_flows: bool = False) -> Path:
    """One row per (core, sub-core, lane) of the first *max_cores* cores; x in µs.

    Bars of one lane are one PolyCollection (vertices built with numpy), so 1e5-1e6
    instructions draw in about a second. *show_flows* adds SetFlag -> WaitFlag lines.
    Raises AclnnError(ACLNN_ERR_PARAM_INVALID) if *max_cores* < 1.
    """
    if int(max_cores) < 1:
        raise _invalid(f"max_cores must be >= 1, got {max_cores!r}")
    c = trace.columns
    all_cores = np.unique(c["core"])
    cores = all_cores[: int(max_cores)]
    keep = np.isin(c["core"], cores)
    unit = c["core"][keep].astype(np.int64) * _N_SUB + c["sub_core"][keep]
    rank = LANE_RANK_OF_PIPE[c["pipe"][keep]]
    row_key = unit * len(LANE_ORDER) + rank
    rows, row_of = np.unique(row_key, return_inverse=True)  # top row = first core, SCALAR
    n_rows = max(len(rows), 1)
    mhz = trace.clock_mhz
    x0 = c["start"][keep] / mhz
    x1 = c["end"][keep] / mhz

    fig = Figure(figsize=(14, 1.2 + 0.22 * n_rows), dpi=100)
    ax = fig.add_subplot()
    handles = []
    for r, lane in enumerate(LANE_ORDER):
        sel = rank == r
        if not sel.any():
            continue
        y = row_of[sel].astype(float)
        verts = np.empty((int(sel.sum()), 4, 2))
        verts[:, 0, 0] = verts[:, 1, 0] = x0[sel]
        verts[:, 2, 0] = verts[:, 3, 0] = x1[sel]
        verts[:, 0, 1] = verts[:, 3, 1] = y - 0.4
        verts[:, 1, 1] = verts[:, 2, 1] = y + 0.4
        # edge in the face colour keeps 1-cycle events visible when zoomed out
        ax.add_collection(PolyCollection(verts, facecolors=LANE_COLORS[lane],
                                         edgecolors=LANE_COLORS[lane], linewidths=0.3))
        handles.append(Patch(color=LANE_COLORS[lane], label=lane))
    if show_flows:
        _draw_flows(ax, trace, rows, cores)
    labels = [f"{process_name(k // len(LANE_ORDER) // _N_SUB, k // len(LANE_ORDER) % _N_SUB)}"
              f" {LANE_ORDER[k % len(LANE_ORDER)]}" for k in rows.tolist()]
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    for i in np.flatnonzero(np.diff(rows // len(LANE_ORDER))):  # line between sub-cores
        ax.axhline(i + 0.5, color="#cccccc", linewidth=0.6)
    ax.set_ylim(n_rows - 0.5, -0.5)
    ax.set_xlim(0, max(trace.time_us, 1e-3))
    ax.set_xlabel("time (µs)")
    shown = ("" if len(cores) == len(all_cores)
             else f" (first {len(cores)} of {len(all_cores)} cores)")
    ax.set_title((title or f"npusim pipeline, {trace.meta.get('chip', '')}".rstrip(", ")) + shown)
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def _draw_flows(ax, trace: Trace, rows: np.ndarray, cores: np.ndarray) -> None:
    """Lines from the SetFlag's FLOWCTRL row to the WaitFlag's FLOWCTRL row."""
    f = trace.flows
    flow_rank = LANE_ORDER.index(FLOWCTRL_LANE)
    src = (f["src_core"] * _N_SUB + f["src_sub"]) * len(LANE_ORDER) + flow_rank
    dst = (f["dst_core"] * _N_SUB + f["dst_sub"]) * len(LANE_ORDER) + flow_rank
    ok = np.isin(src, rows) & np.isin(dst, rows) & np.isin(f["src_core"], cores)
    if not ok.any():
        return
    mhz = trace.clock_mhz
    segs = np.stack([np.column_stack([f["set_cycle"][ok] / mhz, np.searchsorted(rows, src[ok])]),
                     np.column_stack([f["wait_cycle"][ok] / mhz, np.searchsorted(rows, dst[ok])])],
                    axis=1)
    ax.add_collection(LineCollection(segs, colors="#555555", linewidths=0.5, alpha=0.6))


def plot_utilisation(trace: Trace, path, title: str | None = None) -> Path:
    """Busy % per lane: mean over the sub-cores that use the lane, whiskers min..max.

    Sub-cores are grouped by kind (cubecore0, veccore0, veccore1, aicore).
    """
    pipes = trace.summary().pipes
    fig = Figure(figsize=(9, 4.5), dpi=100)
    ax = fig.add_subplot()
    lanes = [ln for ln in LANE_ORDER if ln in set(pipes["pipe"])]
    kinds = list(dict.fromkeys(pipes.sort_values("core", kind="stable")["sub_core"]))
    width = 0.8 / max(len(kinds), 1)
    for j, kind in enumerate(kinds):
        g = pipes[pipes["sub_core"] == kind].groupby("pipe")["busy_pct"].agg(["mean", "min", "max"])
        g = g.reindex(lanes)
        x = np.arange(len(lanes)) + (j - (len(kinds) - 1) / 2) * width
        err = np.vstack([g["mean"] - g["min"], g["max"] - g["mean"]]).clip(min=0)
        ax.bar(x, g["mean"], width, yerr=np.nan_to_num(err), capsize=2, label=kind)
    ax.set_xticks(range(len(lanes)), lanes)
    ax.set_ylabel("busy % of total cycles")
    ax.set_ylim(0, 105)
    ax.set_title(title or f"lane utilisation, {trace.total_cycles} cycles")
    if kinds:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_heatmap(df: pd.DataFrame, x: str, y: str, value: str, path,
                 title: str | None = None) -> Path:
    """*value* (mean over duplicates) on a grid of *x* by *y*, annotated when small.

    Raises AclnnError(ACLNN_ERR_PARAM_INVALID) naming a column *df* lacks.
    """
    for arg, col in (("x", x), ("y", y), ("value", value)):
        if col not in df.columns:
            raise _invalid(f"{arg}={col!r} is not a column of df ({list(df.columns)})")
    grid = df.pivot_table(index=y, columns=x, values=value, aggfunc="mean")
    fig = Figure(figsize=(1.5 + 0.7 * max(grid.shape[1], 4), 1.2 + 0.5 * max(grid.shape[0], 4)),
                 dpi=100)
    ax = fig.add_subplot()
    im = ax.imshow(grid.to_numpy(dtype=float), aspect="auto", cmap="viridis", origin="lower")
    ax.set_xticks(range(grid.shape[1]), [str(v) for v in grid.columns], rotation=45, ha="right")
    ax.set_yticks(range(grid.shape[0]), [str(v) for v in grid.index])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if grid.size <= 400:
        vals = grid.to_numpy(dtype=float)
        mid = np.nanmean(vals) if np.isfinite(vals).any() else 0.0
        for (i, j), v in np.ndenumerate(vals):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=7,
                        color="black" if v > mid else "white")
    fig.colorbar(im, ax=ax, label=value)
    ax.set_title(title or f"{value} by {x} and {y}")
    fig.tight_layout()
    return _save(fig, path)


def plot_roofline(points, path, peak_flops: float, peak_bw: float,
                  title: str | None = None) -> Path:
    """Roofline: achieved FLOP/s against arithmetic intensity (FLOP per GM byte), log-log.

    *points*: a DataFrame or an iterable of mappings with ``flops``, ``bytes``, ``time_us`` and
    optionally ``label`` (e.g. from :meth:`Trace.summary`: total_flops, total_bytes, time_us).
    *peak_flops* in FLOP/s, *peak_bw* in bytes/s. Raises AclnnError(ACLNN_ERR_PARAM_INVALID)
    if a peak is not positive or a point lacks a field or has bytes or time_us <= 0.
    """
    if not (peak_flops > 0 and peak_bw > 0):
        raise _invalid(f"peak_flops and peak_bw must be > 0, got {peak_flops!r}, {peak_bw!r}")
    pts = pd.DataFrame(points)
    for col in ("flops", "bytes", "time_us"):
        if col not in pts.columns:
            raise _invalid(f"points lack the field {col!r} (need flops, bytes, time_us)")
    if len(pts) and ((pts["bytes"] <= 0).any() or (pts["time_us"] <= 0).any()):
        raise _invalid("points must have bytes > 0 and time_us > 0")
    intensity = pts["flops"].to_numpy(float) / pts["bytes"].to_numpy(float)
    achieved = pts["flops"].to_numpy(float) / (pts["time_us"].to_numpy(float) * 1e-6)
    ridge = peak_flops / peak_bw
    lo = min([ridge / 100] + [v / 2 for v in intensity if v > 0])
    hi = max([ridge * 100] + [v * 2 for v in intensity])
    xs = np.geomspace(lo, hi, 200)
    fig = Figure(figsize=(7, 5), dpi=100)
    ax = fig.add_subplot()
    ax.loglog(xs, np.minimum(peak_flops, peak_bw * xs) / 1e12, color="black", label="roof")
    ax.axvline(ridge, color="#999999", linestyle=":", linewidth=0.8)
    ax.annotate(f"ridge {ridge:.3g} FLOP/B", (ridge, peak_flops / 1e12), fontsize=8,
                textcoords="offset points", xytext=(4, -12))
    labels = pts["label"].astype(str).tolist() if "label" in pts.columns else [""] * len(pts)
    ok = intensity > 0
    ax.scatter(intensity[ok], achieved[ok] / 1e12, color="#d62728", zorder=3, label="runs")
    for xv, yv, lab in zip(intensity[ok], achieved[ok], np.array(labels, dtype=object)[ok]):
        if lab:
            ax.annotate(lab, (xv, yv / 1e12), fontsize=7, textcoords="offset points", xytext=(3, 3))
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title or "roofline")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)
