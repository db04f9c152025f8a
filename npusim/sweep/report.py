"""``npusim sweep report RESULTS.parquet``: ranking, Pareto front, sensitivity plots, heatmap, verdict.

A *case* is one problem on one chip variant: the tilings of a case compete with each other. Outputs
(in the chosen directory): ranking.csv (top N per case with their tilings), pareto.csv and pareto.png
(modeled time against on-chip memory = UB + L1 bytes, and workspace; the non-dominated points of
each case), sensitivity_<axis>.png (per varied tiling axis or chip field: time relative to the
problem's best, the best and the median over the other axes), heatmap.png (two tiling axes: time and
UB occupancy per cell, the default tiling boxed, when a study sweeps two or more tiling axes),
whatif.png (chip studies: best time against the first varied chip field, a line per value of the
second) and verdict.txt (best tiling per case and its gain over the default tiling; chip what-ifs per problem).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

MAX_CASE_PLOTS = 6
MAX_VERDICT_CASES = 12


@dataclass
class Report:
    verdict: str
    files: list[Path]


def load(path) -> pd.DataFrame:
    from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError

    try:
        return pd.read_parquet(path)
    except (FileNotFoundError, OSError, ValueError) as e:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"sweep report: cannot read results {path}: {e}") from None


def tiling_axes(df: pd.DataFrame) -> list[str]:
    """Swept tiling axes (names without the t. prefix), in file order."""
    return [c[2:] for c in df.columns if c.startswith("t.")]


def chip_fields(df: pd.DataFrame) -> list[str]:
    """ChipSpec fields the study varied (chip.<field> columns with more than one value)."""
    return [c for c in df.columns if c.startswith("chip.") and df[c].nunique(dropna=True) > 1]


def case_columns(df: pd.DataFrame) -> list[str]:
    return ["problem", "chip"] + [c for c in df.columns if c.startswith("chip.")]


def report(results, out_dir=None, top: int = 10, heatmap: tuple[str, str] | None = None) -> Report:
    """Write the report of *results* (a Parquet path) to *out_dir* (default: beside it, <stem>_report)."""
    path = Path(results)
    df = load(path)
    out = Path(out_dir) if out_dir else path.with_name(path.stem + "_report")
    out.mkdir(parents=True, exist_ok=True)
    ok = df[df["status"] == "ok"].copy()
    ok["onchip_bytes"] = sum(ok[c].fillna(0).astype("int64") for c in ("ub_bytes", "l1_bytes") if c in ok)
    files = [write_ranking(ok, out / "ranking.csv", top)]
    axes = tiling_axes(df)
    if axes and len(ok):
        files += [write_pareto(ok, out / "pareto.csv"), plot_pareto(ok, out / "pareto.png")]
    for axis in [f"eff.{a}" for a in axes] + chip_fields(df):
        if axis in ok and ok[axis].nunique() > 1:
            files.append(plot_sensitivity(ok, axis, out / f"sensitivity_{axis.split('.', 1)[1]}.png"))
    if chip_fields(df) and len(ok):
        files.append(plot_whatif(ok, out / "whatif.png"))
    pair = heatmap or (tuple(axes[:2]) if len(axes) >= 2 else None)
    if pair:
        files.append(plot_heatmap(df, pair, out / "heatmap.png"))
    text = verdict(df, axes)
    (out / "verdict.txt").write_text(text + "\n")
    files.append(out / "verdict.txt")
    return Report(text, files)


# --- tables -------------------------------------------------------------------------------------------
def _shown(df: pd.DataFrame) -> list[str]:
    keep = ["problem", "chip", *chip_fields(df), "is_default", *[c for c in df.columns if c.startswith("eff.")],
            "time_us", "ub_bytes", "l1_bytes", "workspace_bytes", "bound"]
    return [c for c in keep if c in df.columns]


def write_ranking(ok: pd.DataFrame, path: Path, top: int) -> Path:
    """Top *top* points of every case by modeled time, with their effective tiling."""
    if not len(ok):
        pd.DataFrame().to_csv(path, index=False)
        return path
    ranked = ok.sort_values("time_us", kind="stable").groupby(case_columns(ok), sort=False, dropna=False).head(top)
    ranked = ranked.assign(rank=ranked.groupby(case_columns(ok), sort=False, dropna=False).cumcount() + 1)
    ranked[["rank", *_shown(ok)]].to_csv(path, index=False)
    return path


def pareto_mask(values: np.ndarray) -> np.ndarray:
    """Rows of *values* (n x k, all minimised) that no other row dominates (<= everywhere, < somewhere)."""
    n = len(values)
    keep = np.ones(n, bool)
    for i in range(n):
        dominated = np.all(values <= values[i], axis=1) & np.any(values < values[i], axis=1)
        keep[i] = not dominated.any()
    return keep


def pareto_front(ok: pd.DataFrame) -> pd.DataFrame:
    """Non-dominated points of each case over (time_us, onchip_bytes, workspace_bytes)."""
    parts = []
    for _, g in ok.groupby(case_columns(ok), sort=False, dropna=False):
        v = g[["time_us", "onchip_bytes", "workspace_bytes"]].to_numpy(dtype=float)
        parts.append(g[pareto_mask(v)].sort_values("time_us"))
    return pd.concat(parts) if parts else ok.iloc[:0]


def write_pareto(ok: pd.DataFrame, path: Path) -> Path:
    front = pareto_front(ok)
    front[[*_shown(front), "onchip_bytes"]].to_csv(path, index=False)
    return path


def verdict(df: pd.DataFrame, axes: list[str]) -> str:
    """Best tiling per case and its gain over the default tiling; chip what-ifs per problem."""
    lines = []
    n_ref = int((df["status"] == "refused").sum())
    n_err = int((df["status"] == "error").sum())
    lines.append(f"{len(df)} points: {len(df) - n_ref - n_err} ran, {n_ref} refused by the tiling, {n_err} errors")
    ok = df[df["status"] == "ok"]
    if axes:
        cases = list(ok.groupby(case_columns(ok), sort=False, dropna=False))
        for key, g in cases[:MAX_VERDICT_CASES]:
            best = g.loc[g["time_us"].idxmin()]
            eff = ", ".join(f"{c[4:]}={best[c]}" for c in g.columns if c.startswith("eff.") and pd.notna(best[c]))
            chip = _chip_label(g, best)
            line = f"{best['problem']} on {chip}: best {eff} at {best['time_us']:.2f} us"
            dflt = g[g["is_default"]]
            if len(dflt):
                d = dflt.iloc[0]
                gain = d["time_us"] / best["time_us"] - 1
                line += f"; default {d['time_us']:.2f} us -> {100 * gain:.1f}% faster" if gain > 0 else \
                    "; the default tiling is already the fastest"
            lines.append(line)
        if len(cases) > MAX_VERDICT_CASES:
            lines.append(f"... {len(cases) - MAX_VERDICT_CASES} more cases in ranking.csv")
    fields = chip_fields(df)
    if fields:
        for prob, g in ok.groupby("problem", sort=False):
            g = g[g["is_default"]] if g["is_default"].any() else g
            lo, hi = g.loc[g["time_us"].idxmin()], g.loc[g["time_us"].idxmax()]
            lines.append(f"{prob}: default tiling over {len(g)} chip variants: {lo['time_us']:.2f} us "
                         f"({_chip_label(g, lo)}) to {hi['time_us']:.2f} us ({_chip_label(g, hi)}), "
                         f"x{hi['time_us'] / lo['time_us']:.2f}")
    return "\n".join(lines)


def _chip_label(g: pd.DataFrame, row) -> str:
    varied = [c for c in chip_fields(g) if c in row.index]
    return row["chip"] + ("" if not varied else " (" + ", ".join(f"{c[5:]}={_fmt(c, row[c])}" for c in varied) + ")")


def _fmt(column: str, v) -> str:
    """A chip field's value in its natural unit: bytes/s as GB/s, bytes as MiB, Hz as MHz."""
    if column.endswith("_per_s"):
        return f"{v / 1e9:.4g} GB/s"
    if column.endswith("_bytes"):
        return f"{v / 2 ** 20:.4g} MiB"
    if column.endswith("_hz"):
        return f"{v / 1e6:.4g} MHz"
    return f"{v:.4g}" if isinstance(v, (float, np.floating)) else str(v)


# --- figures ------------------------------------------------------------------------------------------
def _figure(n: int, w: float = 4.2, h: float = 3.4):
    from matplotlib.figure import Figure

    cols = min(n, 3)
    rows = -(-n // cols)
    fig = Figure(figsize=(w * cols, h * rows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols)).ravel()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes


def _case_title(key, names) -> str:
    d = dict(zip(names, key if isinstance(key, tuple) else (key,)))
    return d["problem"] + "\n" + d["chip"]


def plot_pareto(ok: pd.DataFrame, path: Path) -> Path:
    """Per case: time against on-chip memory, colour = workspace; the Pareto front joined; default starred."""
    names = case_columns(ok)
    cases = list(ok.groupby(names, sort=False, dropna=False))[:MAX_CASE_PLOTS]
    fig, axes = _figure(len(cases))
    for ax, (key, g) in zip(axes, cases):
        sc = ax.scatter(g["onchip_bytes"] / 1024, g["time_us"], c=g["workspace_bytes"] / 2 ** 20, s=14,
                        cmap="viridis")
        v = g[["time_us", "onchip_bytes", "workspace_bytes"]].to_numpy(dtype=float)
        front = g[pareto_mask(v)].sort_values("onchip_bytes")
        ax.plot(front["onchip_bytes"] / 1024, front["time_us"], "o-", mfc="none", color="crimson", ms=8,
                label="Pareto front")
        d = g[g["is_default"]]
        ax.scatter(d["onchip_bytes"] / 1024, d["time_us"], marker="*", s=160, color="orange", edgecolor="black",
                   label="default tiling", zorder=3)
        ax.set_xlabel("on-chip memory UB + L1 (KiB)", fontsize=8)
        ax.set_ylabel("modeled time (us)", fontsize=8)
        ax.set_title(_case_title(key, names), fontsize=8)
        ax.legend(fontsize=7)
        fig.colorbar(sc, ax=ax, shrink=0.8).set_label("workspace (MiB)", fontsize=7)
    fig.savefig(path, dpi=110)
    return path


def plot_sensitivity(ok: pd.DataFrame, axis: str, path: Path) -> Path:
    """Time relative to each problem's best against *axis*: best (solid) and median (dashed) over the
    other axes, one colour per problem."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.subplots()
    for prob, g in ok.groupby("problem", sort=False):
        rel = g["time_us"] / g["time_us"].min()
        stats = rel.groupby(g[axis]).agg(["min", "median"]).sort_index()
        line, = ax.plot(stats.index.astype(float), stats["min"], "o-", label=f"{prob} (best)")
        ax.plot(stats.index.astype(float), stats["median"], "--", color=line.get_color(), alpha=0.6)
    name = axis.split(".", 1)[1]
    ax.set_xlabel(name + (" (tiling)" if axis.startswith("eff.") else " (chip)"))
    ax.set_ylabel("time / problem's best (solid: best, dashed: median)")
    ax.set_title(f"sensitivity to {name}", fontsize=9)
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=110)
    return path


def plot_whatif(ok: pd.DataFrame, path: Path) -> Path:
    """Per problem: the best time over the tilings against the first varied chip field, one line per
    value of the second (if any)."""
    fields = chip_fields(ok)
    x, hue = fields[0], (fields[1] if len(fields) > 1 else None)
    probs = list(ok.groupby("problem", sort=False))[:MAX_CASE_PLOTS]
    fig, axes = _figure(len(probs))
    for ax, (prob, g) in zip(axes, probs):
        keys = [x] + ([hue] if hue else [])
        best = g.groupby(keys)["time_us"].min().reset_index()
        for value, line in (best.groupby(hue) if hue else [(None, best)]):
            label = None if hue is None else f"{hue[5:]} = {_fmt(hue, value)}"
            ax.plot(line[x] / (1e9 if x.endswith("per_s") else 1), line["time_us"], "o-", label=label)
        ax.set_xlabel(x[5:] + (" (GB/s)" if x.endswith("per_s") else ""), fontsize=8)
        ax.set_ylabel("modeled time (us)", fontsize=8)
        ax.set_yscale("log")
        ax.set_title(f"{ok['operator'].iloc[0]}: {prob}", fontsize=8)
        if hue:
            ax.legend(fontsize=7)
    fig.savefig(path, dpi=110)
    return path


def _text_colour(cmap, norm, v: float) -> str:
    """Black on light cells, white on dark ones (relative luminance of the cell colour)."""
    r, g, b, _ = cmap(norm(v))
    return "black" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5 else "white"


def plot_heatmap(df: pd.DataFrame, pair: tuple[str, str], path: Path) -> Path:
    """Per case (columns): modeled time and UB occupancy over two tiling axes, the minimum over any other
    axis per cell; refused cells say so; the default tiling's cell is boxed when it lies on the grid."""
    import matplotlib

    x, y = pair
    swept = df[~df["is_default"]]
    names = case_columns(df)
    cases = list(swept.groupby(names, sort=False, dropna=False))[:MAX_CASE_PLOTS]
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.4 * len(cases), 7.4), layout="constrained")
    axes = np.array(fig.subplots(2, len(cases))).reshape(2, len(cases))
    for col, (key, g) in enumerate(cases):
        xs, ys = sorted(g[f"t.{x}"].dropna().unique()), sorted(g[f"t.{y}"].dropna().unique())
        dflt = df[df["is_default"]]
        for k, v in zip(names, key if isinstance(key, tuple) else (key,)):
            dflt = dflt[dflt[k].isna()] if pd.isna(v) else dflt[dflt[k] == v]
        for row, (value, label, cmap_name) in enumerate((("time_us", "modeled time (us)", "viridis_r"),
                                                         ("ub_pct", "UB occupancy (%)", "magma"))):
            ax = axes[row, col]
            ok = g[g["status"] == "ok"]
            table = ok.groupby([f"t.{y}", f"t.{x}"])[value].min().unstack().reindex(index=ys, columns=xs)
            grid = table.to_numpy(dtype=float)
            cmap = matplotlib.colormaps[cmap_name]
            im = ax.imshow(grid, cmap=cmap, aspect="auto", origin="lower")
            ax.set_xticks(range(len(xs)), [str(v) for v in xs], fontsize=7)
            ax.set_yticks(range(len(ys)), [str(v) for v in ys], fontsize=7)
            for (i, j), v in np.ndenumerate(grid):
                if np.isnan(v):
                    ax.text(j, i, "refused", ha="center", va="center", fontsize=6, color="dimgray")
                else:
                    ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=6,
                            color=_text_colour(cmap, im.norm, v))
            note = ""
            if len(dflt):
                d = dflt.iloc[0]
                dx, dy = d.get(f"eff.{x}"), d.get(f"eff.{y}")
                if dx in xs and dy in ys:
                    ax.add_patch(matplotlib.patches.Rectangle((xs.index(dx) - 0.5, ys.index(dy) - 0.5), 1, 1,
                                                              fill=False, edgecolor="red", linewidth=2))
                else:
                    note = f"\n(default {x}={dx}, {y}={dy} is off this grid)"
            ax.set_title(f"{_case_title(key, names)}\n{label}{note}", fontsize=8)
            ax.set_xlabel(x, fontsize=7)
            ax.set_ylabel(y, fontsize=7)
            fig.colorbar(im, ax=ax, shrink=0.8)
    op = df["operator"].iloc[0] if len(df) else ""
    fig.suptitle(f"{op} tiling space\nred box: the default tiling; other axes at their best", fontsize=9)
    fig.savefig(path, dpi=110)
    return path
