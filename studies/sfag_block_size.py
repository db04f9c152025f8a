"""Design study: SparseFlashAttentionGrad time and bound unit against sparse_block_size at fixed selected tokens.

Each query token selects the same number of key rows (``--rows``, 256 and 512 by default) as
rows / bs blocks of size bs, for bs in {1, 8, 16, 32, 64}: the same attention work, cut into more or
fewer gathered blocks. One token per AI Core (T1 = 24 on Ascend910B2), N1 = 64 heads, D = 512 + rope 64,
S2 = 8192, sparse_mode 0, fp16, timing mode. For each case: modeled time, and for the slowest core the
busiest pipe (lanes as the trace names them: MTE2 = the gather's loads, FIXP = Fixpipe scatter-adds,
MTE3 = the gather's stores, CUBE, VECTOR) with its share of the core's time, and its Fixpipe count.
Writes studies/out/sfag_block_size.csv and .png, and benchmarks/results/sfag_block_size.json (a full run, from
which studies/render.py writes the numbers of the README's lesson).

    python studies/sfag_block_size.py [--quick]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from npusim import TensorSpec
from ops import sparse_flash_attention_grad

OUT = Path(__file__).parent / "out"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from results import save  # noqa: E402
BLOCK_SIZES = (1, 8, 16, 32, 64)
T1, N1, S2, D, DR, K = 24, 64, 8192, 512, 64, 2048


def run_case(rows: int, bs: int, seed: int = 0):
    """Timing-mode run: every token selects *rows* key rows as rows / bs distinct random blocks."""
    rng = np.random.default_rng(seed)
    idx = np.full((T1, 1, K), -1, np.int64)
    for t in range(T1):
        idx[t, 0, :rows // bs] = rng.choice(S2 // bs, rows // bs, replace=False)
    q = TensorSpec((T1, N1, D), np.float16)
    kv = TensorSpec((S2, 1, D), np.float16)
    sm = TensorSpec((1, T1, N1), np.float32)
    res = sparse_flash_attention_grad(q, kv, kv, idx, q, q, sm, sm, [T1], [S2], TensorSpec((T1, N1, DR), np.float16),
                                      TensorSpec((S2, 1, DR), np.float16), scale_value=1 / 24, sparse_block_size=bs,
                                      layout="TND", mode="timing")
    summ = res.trace.summary()
    pipes = summ.pipes[summ.pipes["pipe"] != "FLOWCTRL"]
    ends = res.trace.df.groupby("core")["end_cycle"].max()
    slow = int(ends.idxmax())
    mine = pipes[pipes["core"] == slow].sort_values("busy_cycles", ascending=False).iloc[0]
    fix = pipes[(pipes["core"] == slow) & (pipes["pipe"] == "FIXP")]["instructions"].sum()
    return {"rows": rows, "block_size": bs, "blocks": rows // bs, "time_us": res.time_us,
            "bound_unit": f"{mine['sub_core']}.{mine['pipe']}", "bound_pct": 100.0 * mine["busy_cycles"] / summ.total_cycles,
            "fixpipes_slowest_core": int(fix), "instructions": summ.instructions}


def plot(df: pd.DataFrame, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for rows, g in df.groupby("rows"):
        ax.plot(g["block_size"], g["time_us"], "o-", label=f"{rows} selected rows / token")
        for _, r in g.iterrows():
            ax.annotate(f"{r['bound_unit']} {r['bound_pct']:.0f}%", (r["block_size"], r["time_us"]), fontsize=7,
                        textcoords="offset points", xytext=(4, 4))
    ax.set_xscale("log", base=2)
    ax.set_xticks(BLOCK_SIZES, [str(b) for b in BLOCK_SIZES])
    ax.set_xlabel("sparse_block_size (same selected rows: rows / bs blocks)")
    ax.set_ylabel("modeled time (us), Ascend910B2")
    ax.set_title(f"SparseFlashAttentionGrad: T1={T1}, N1={N1}, D={D}+{DR}, timing mode")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="256 selected rows only")
    ap.add_argument("--rows", type=int, nargs="*", default=None)
    args = ap.parse_args(argv)
    rows_list = args.rows or ([256] if args.quick else [256, 512])
    recs = [run_case(r, bs) for r in rows_list for bs in tqdm(BLOCK_SIZES, desc=f"rows")]
    df = pd.DataFrame(recs)
    OUT.mkdir(exist_ok=True)
    df.to_csv(OUT / "sfag_block_size.csv", index=False)
    plot(df, OUT / "sfag_block_size.png")
    print(df.to_string(index=False))
    if not args.quick and not args.rows:
        save("sfag_block_size", {"T1": T1, "N1": N1, "S2": S2, "records": recs})
    return df


if __name__ == "__main__":
    main()
