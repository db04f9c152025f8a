"""README tables made from the committed sweep results (studies/out/*.parquet), for studies/render.py.

The lessons under the sweep figures in the README rest on these numbers, so they are regenerated with
the studies (``python -m studies``) instead of being typed in.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

OUT = Path(__file__).resolve().parent / "out"


def _load(name: str) -> pd.DataFrame | None:
    path = OUT / f"{name}.parquet"
    return pd.read_parquet(path) if path.is_file() else None


def pfa_tiling_table() -> str | None:
    """Per case: the best time at each sOuter (or "refused"), the default, the best tiling and its gain."""
    df = _load("pfa_tiling")
    if df is None:
        return None
    verdict = (OUT / "pfa_tiling" / "verdict.txt")
    outers = sorted(int(v) for v in df["t.sOuter"].dropna().unique())
    head = "| case | " + " | ".join(f"best at sOuter {o}" for o in outers) + " | default | best tiling (gain) | bound |"
    lines = [head, "|" + "---|" * (len(outers) + 4)]
    for prob, g in df.groupby("problem", sort=False):
        ok = g[g["status"] == "ok"]
        cells = []
        for o in outers:
            at = ok[ok["t.sOuter"] == o]
            cells.append(f"{at['time_us'].min():.1f} us" if len(at) else "refused")
        dflt = ok[ok["is_default"]]
        best = ok.loc[ok["time_us"].idxmin()]
        d = float(dflt["time_us"].iloc[0]) if len(dflt) else float("nan")
        gain = 100 * (d / best["time_us"] - 1)
        tiling = f"({int(best['eff.sOuter'])}, {int(best['eff.sInner'])})"
        lines.append(f"| {prob} | " + " | ".join(cells) +
                     f" | {d:.1f} us (sOuter {int(dflt['eff.sOuter'].iloc[0])}, sInner {int(dflt['eff.sInner'].iloc[0])}) | "
                     f"{tiling} ({gain:+.1f}%) | {best['bound']} |")
    text = "\n".join(lines) + "\n"
    if verdict.is_file():
        text = "Report verdict (`studies/out/pfa_tiling/verdict.txt`):\n\n" + \
               "\n".join("    " + ln for ln in verdict.read_text().strip().splitlines()) + "\n\n" + text
    return text


def whatif_table(name: str) -> str | None:
    """Per problem and L2 size: the default tiling's time at the lowest, preset and highest HBM bandwidth."""
    df = _load(name)
    if df is None:
        return None
    ok = df[(df["status"] == "ok") & df["is_default"]].copy()
    ok["hbm_gb_s"] = (ok["chip.hbm_bw_bytes_per_s"] / 1e9).round(0)
    bws = sorted(ok["hbm_gb_s"].unique())
    shown = [bws[0], 1530.0 if 1530.0 in bws else bws[len(bws) // 2], bws[-1]]
    lines = ["| problem | L2 MiB | " + " | ".join(f"HBM {b:.0f} GB/s" for b in shown) + " |",
             "|---|---|" + "---|" * len(shown)]
    for prob, g in ok.groupby("problem", sort=False):
        for l2, h in g.groupby("chip.l2_bytes", sort=True):
            t = h.set_index("hbm_gb_s")["time_us"]
            lines.append(f"| {prob} | {int(l2) // 2 ** 20} | " + " | ".join(f"{t.get(b, float('nan')):.0f} us" for b in shown) + " |")
    return "\n".join(lines) + "\n"
