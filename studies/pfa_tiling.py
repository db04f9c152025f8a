"""Design study: PromptFlashAttentionV2 cycles and UB occupancy over the (sOuter, sInner) tiling space.

For three shapes on Ascend910B2 (timing mode), every legal (sOuter, sInner) pair of the grid below is
run with a tiling override; illegal pairs (the kernel's buffers do not fit UB or L1) are recorded as
such. Writes studies/out/pfa_tiling.csv and studies/out/pfa_tiling.png (heatmaps of modeled time and
UB occupancy per shape; the default tiling is marked).

    python studies/pfa_tiling.py [--quick]
"""
from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from npusim import TensorSpec
from npusim.chip import chip as get_chip
from npusim.errors import AclnnError
from ops import prompt_flash_attention_v2
from ops.common.masks import compressed_causal_mask

OUT = Path(__file__).parent / "out"
SHAPES = {  # name -> (B, N, S, D, sparse_mode)
    "causal B1 N8 S2048 D128": (1, 8, 2048, 128, 2),
    "full B4 N8 S1024 D64": (4, 8, 1024, 64, 0),
    "causal B1 N4 S4096 D256": (1, 4, 4096, 256, 2),
}
S_OUTER = (16, 32, 64, 128)
S_INNER = (128, 256, 512, 768, 1024, 1536, 2048)


def run_case(shape, s_outer=None, s_inner=None):
    b, n, s, d, mode = shape
    x = TensorSpec((b, n, s, d), np.float16)
    mask = compressed_causal_mask().astype(bool) if mode else None
    tiling = None
    if s_outer is not None:
        tiling = {"sOuter": s_outer, "sInner": s_inner, "softmaxSOuter": min(s_outer, max(8, 16384 // s_inner // 8 * 8))}
    return prompt_flash_attention_v2(x, x, x, atten_mask=mask, num_heads=n, input_layout="BNSD",
                                     scale_value=1 / np.sqrt(d), sparse_mode=mode, mode="timing", tiling=tiling)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smaller grid (for a smoke run)")
    opts = ap.parse_args()
    s_outer = S_OUTER[-2:] if opts.quick else S_OUTER
    s_inner = S_INNER[2:4] if opts.quick else S_INNER
    ub = get_chip("Ascend910B2").ub_bytes
    rows = []
    grid = list(itertools.product(SHAPES.items(), s_outer, s_inner))
    for (name, shape), so, si in tqdm(grid, desc="pfa tiling sweep"):
        try:
            res = run_case(shape, so, si)
        except AclnnError as e:
            rows.append(dict(shape=name, sOuter=so, sInner=si, legal=False, time_us=np.nan, ub_pct=np.nan,
                             note=e.message))
            continue
        t = res.tiling
        rows.append(dict(shape=name, sOuter=so, sInner=si, legal=True, time_us=res.time_us,
                         ub_pct=100 * t.ubBytes / ub, softmaxSOuter=t.softmaxSOuterFactor, tasks=t.tasks,
                         block_dim=t.blockDim, note=""))
    default_runs = {name: run_case(shape) for name, shape in SHAPES.items()}
    defaults = {name: r.tiling for name, r in default_runs.items()}
    df = pd.DataFrame(rows)
    OUT.mkdir(exist_ok=True)
    df.to_csv(OUT / "pfa_tiling.csv", index=False)
    plot(df, defaults, OUT / "pfa_tiling.png")
    for name in SHAPES:
        d = df[(df["shape"] == name) & df["legal"]]
        best = d.loc[d["time_us"].idxmin()]
        t = defaults[name]
        print(f"{name}: best sOuter={best.sOuter} sInner={best.sInner} {best.time_us:.1f} us; "
              f"default ({t.sOuterFactor}, {t.sInnerFactor}) {default_runs[name].time_us:.1f} us")
    print(f"wrote {OUT / 'pfa_tiling.csv'} and {OUT / 'pfa_tiling.png'}")


def plot(df: pd.DataFrame, defaults: dict, path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2 * len(SHAPES), 7), layout="constrained")
    axes = fig.subplots(2, len(SHAPES))
    for col, name in enumerate(SHAPES):
        d = df[df["shape"] == name]
        for row, (value, label, cmap) in enumerate((("time_us", "modeled time (us)", "viridis_r"),
                                                    ("ub_pct", "UB occupancy (%)", "magma"))):
            ax = axes[row, col]
            table = d.pivot(index="sOuter", columns="sInner", values=value)
            im = ax.imshow(table.to_numpy(dtype=float), cmap=cmap, aspect="auto", origin="lower")
            ax.set_xticks(range(len(table.columns)), [str(c) for c in table.columns], fontsize=7)
            ax.set_yticks(range(len(table.index)), [str(i) for i in table.index], fontsize=7)
            for (i, j), v in np.ndenumerate(table.to_numpy(dtype=float)):
                ax.text(j, i, "illegal" if np.isnan(v) else f"{v:.0f}", ha="center", va="center", fontsize=6,
                        color="gray" if np.isnan(v) else ("white" if row == 0 else "black"))
            t = defaults[name]
            if t.sOuterFactor in table.index and t.sInnerFactor in table.columns:
                ax.scatter([list(table.columns).index(t.sInnerFactor)], [list(table.index).index(t.sOuterFactor)],
                           marker="s", s=260, facecolors="none", edgecolors="red")
            ax.set_title(f"{name}\n{label}", fontsize=8)
            ax.set_xlabel("sInner", fontsize=7)
            ax.set_ylabel("sOuter", fontsize=7)
            fig.colorbar(im, ax=ax, shrink=0.8)
    fig.suptitle("PromptFlashAttentionV2 tiling space on Ascend910B2 (red box: npusim's default tiling)")
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
