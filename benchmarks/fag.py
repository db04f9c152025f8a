"""FlashAttentionUnpaddingScoreGradV5 beside FlashAttentionVarLenScore: simulator wall time, peak memory, the
modeled backward/forward time ratio and what deterministic=True costs (issue 10 benchmark).

Case: one batch of S tokens (TND, default S=4096), N=8, D=128, fp16, causal (sparse_mode 2 with the
2048x2048 compressed mask), on Ascend910B2. The backward runs non-deterministic and deterministic;
each run is a fresh subprocess so its peak resident memory is its own (child_run.peak_mb). Timing mode
takes TensorSpecs; full mode makes random data (the backward's forward statistics are synthetic:
max 0, sum S, which does not change the instruction stream). Beside the times: the cube FLOPs of each
operator (the backward's five matmuls against the forward's two) and, on the main launch's latest core,
how busy each pipe was (what bounds each operator). Saved to benchmarks/results/fag.json for the README
(``python -m studies --only fag``).

    python benchmarks/fag.py            # timing mode, S=4096
    python benchmarks/fag.py --full     # also full mode (minutes on a loaded machine)
    python benchmarks/fag.py --seq 1024
"""
from __future__ import annotations

import argparse
import platform

from child_run import run_child
from results import save

_CHILD = r"""
import json, sys, time
from child_run import peak_mb
import numpy as np
from npusim import TensorSpec
from ops import flash_attention_unpadding_score_grad_v5, flash_attention_var_len_score
from ops.common.masks import compressed_causal_mask
op, mode, N, S, D = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
mask = compressed_causal_mask().astype(bool)
common = dict(atten_mask=mask, actual_seq_qlen=[S], actual_seq_kvlen=[S], head_num=N, scale_value=1 / np.sqrt(D),
              input_layout="TND", sparse_mode=2, mode=mode, trace="summary" if mode == "full" else None)
rng = np.random.default_rng(0)
mk = (lambda s: rng.uniform(-1, 1, s).astype(np.float16)) if mode == "full" else (lambda s: TensorSpec(s, np.float16))
q, k, v = mk((S, N, D)), mk((S, N, D)), mk((S, N, D))
t0 = time.perf_counter()
if op == "fa":
    res = flash_attention_var_len_score(q, k, v, **common)
else:
    stat = (lambda x: np.full((S, N, 8), x, np.float32)) if mode == "full" else \
        (lambda x: TensorSpec((S, N, 8), np.float32))
    res = flash_attention_unpadding_score_grad_v5(q, None, k, None, v, mk((S, N, D)), softmax_max=stat(0.0),
                                                  softmax_sum=stat(float(S)), attention_in=mk((S, N, D)),
                                                  deterministic=op == "fag_det", **common)
wall = time.perf_counter() - t0
busy = {}
df = res.trace.df if mode != "full" else None  # full mode keeps the summary only (memory); busy comes from timing
if df is not None and len(df):
    last = df.loc[df["end_cycle"].idxmax(), "core"]
    core = df[(df["core"] == last) & ~df["pipe"].isin(["FLOWCTRL", "SCALAR"])]
    span = float(core["end_cycle"].max() - core["start_cycle"].min())
    busy = {f"{sub}:{pipe}": float(d) / span for (sub, pipe), d in
            core.groupby(["sub_core", "pipe"])["duration_cycles"].sum().items()}
print(json.dumps({"op": op, "mode": mode, "wall_s": wall,
                  "peak_mb": peak_mb(),
                  "cycles": res.cycles, "time_us": res.time_us, "block_dim": res.block_dim, "busy": busy}))
"""

N, D = 8, 128


def cube_flops(s: int, backward: bool) -> float:
    """Cube FLOPs of the causal attention (kept half of the S x S score matrix, diagonal included): 2 x S x S x D
    per matmul over the kept half, two matmuls forward (S = QK^T, O = PV), five backward (S again, dP = dY V^T,
    dV = P^T dY, dQ = dS K, dK = dS^T Q)."""
    kept = s * (s + 1) / 2
    return (5 if backward else 2) * 2 * kept * D * N


def _bound(busy: dict) -> str:
    top = sorted(busy.items(), key=lambda kv: -kv[1])[:3]
    return ", ".join(f"{k} {100 * v:.0f}%" for k, v in top)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--full", action="store_true")
    opts = ap.parse_args()
    print(f"machine: {platform.machine()} ({platform.processor() or 'cpu'}), Python {platform.python_version()}")
    print(f"case: TND one batch, N={N} S={opts.seq} D={D} fp16 causal on Ascend910B2")
    print(f"{'operator':22s} {'mode':7s} {'wall s':>7s} {'peak MB':>8s} {'modeled us':>11s} cores  busiest pipes of "
          "the latest core")
    rows = {}
    for mode in ("timing", "full") if opts.full else ("timing",):
        for op, label in (("fa", "forward (VarLenScore)"), ("fag", "backward"), ("fag_det", "backward determ.")):
            r = run_child(_CHILD, [op, mode, N, opts.seq, D])
            rows[f"{op}/{mode}"] = r
            print(f"{label:22s} {mode:7s} {r['wall_s']:7.1f} {r['peak_mb']:8.0f} {r['time_us']:11.1f} "
                  f"{r['block_dim']:5d}  {_bound(r['busy'])}", flush=True)
    fwd, bwd, det = (rows[f"{op}/timing"]["time_us"] for op in ("fa", "fag", "fag_det"))
    flop_ratio = cube_flops(opts.seq, True) / cube_flops(opts.seq, False)
    print(f"modeled backward / forward: {bwd / fwd:.2f} (cube FLOP ratio {flop_ratio:.1f}); deterministic costs "
          f"{100 * (det / bwd - 1):.1f}% more than the atomic backward")
    save("fag", {"seq": opts.seq, "N": N, "D": D, "full": opts.full, "rows": rows, "ratio": bwd / fwd,
                 "flop_ratio": flop_ratio, "det_cost_pct": 100 * (det / bwd - 1),
                 "bound": {op: _bound(rows[f"{op}/timing"]["busy"]) for op in ("fa", "fag", "fag_det")}})


if __name__ == "__main__":
    main()
