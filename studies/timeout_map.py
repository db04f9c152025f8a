"""Design study: where PromptFlashAttentionV2 hits the AI Core timeout, over (S, N).

Estimate mode (npusim/estimate.py) for B=1, fp16, no mask (full attention, S_q = S_kv = S, MHA), D=128
and D=256, on Ascend910B2 and Ascend910B4; the red contour is the default AI Core timeout (1091 s),
the dashed one 80% of it (the margin `npusim predict` plans splits with). Writes
studies/out/timeout_map.csv and studies/out/timeout_map.png.

    python studies/timeout_map.py [--quick]
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
from ops import prompt_flash_attention_v2

OUT = Path(__file__).parent / "out"
CHIPS = ("Ascend910B2", "Ascend910B4")
HEAD_DIMS = (128, 256)


def predict(chip: str, n: int, s: int, d: int) -> float:
    x = TensorSpec((1, n, s, d), np.float16)
    res = prompt_flash_attention_v2(x, x, x, num_heads=n, input_layout="BNSD", scale_value=1 / np.sqrt(d),
                                    pre_tokens=2147483647, next_tokens=2147483647, chip=chip, mode="estimate")
    return res.time_us * 1e-6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    quick = ap.parse_args().quick
    seqs = [2 ** k for k in range(13, 25, 2 if quick else 1)]
    heads = [1, 4, 16, 64] if quick else [1, 2, 4, 8, 16, 32, 64]
    rows = []
    for chip, d, n, s in tqdm(list(itertools.product(CHIPS, HEAD_DIMS, heads, seqs)), desc="timeout map"):
        rows.append(dict(chip=chip, D=d, N=n, S=s, seconds=predict(chip, n, s, d)))
    df = pd.DataFrame(rows)
    OUT.mkdir(exist_ok=True)
    df.to_csv(OUT / "timeout_map.csv", index=False)
    plot(df, OUT / "timeout_map.png")
    for chip, d in itertools.product(CHIPS, HEAD_DIMS):
        sub = df[(df.chip == chip) & (df.D == d)]
        limit = get_chip(chip).aicore_timeout_s
        for n in heads:
            over = sub[(sub.N == n) & (sub.seconds > limit)]
            first = int(over.S.min()) if len(over) else None
            print(f"{chip} D={d} N={n:2d}: first S over {limit:g} s: {first if first else '-'}")
    print(f"wrote {OUT / 'timeout_map.csv'} and {OUT / 'timeout_map.png'}")


def plot(df: pd.DataFrame, path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 8), layout="constrained")
    axes = fig.subplots(len(CHIPS), len(HEAD_DIMS))
    for (i, chip), (j, d) in itertools.product(enumerate(CHIPS), enumerate(HEAD_DIMS)):
        ax = axes[i, j]
        sub = df[(df.chip == chip) & (df.D == d)].pivot(index="N", columns="S", values="seconds")
        s_vals, n_vals = sub.columns.to_numpy(), sub.index.to_numpy()
        z = np.log10(sub.to_numpy(dtype=float))
        mesh = ax.pcolormesh(s_vals, n_vals, z, shading="nearest", cmap="viridis")
        limit = get_chip(chip).aicore_timeout_s
        ax.contour(s_vals, n_vals, z, levels=[np.log10(0.8 * limit)], colors="red", linestyles="dashed")
        ax.contour(s_vals, n_vals, z, levels=[np.log10(limit)], colors="red", linewidths=2)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("S (= S_kv)")
        ax.set_ylabel("N (heads)")
        ax.set_title(f"{chip}, D={d}: predicted seconds (log10)\nred: {limit:g} s timeout, dashed: 80%", fontsize=9)
        fig.colorbar(mesh, ax=ax, label="log10(seconds)")
    fig.suptitle("PromptFlashAttentionV2 fp16, B=1, no mask: AI Core timeout map (npusim estimate mode)")
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
