"""FlashAttentionUnpaddingScoreGradV5 beside FlashAttentionVarLenScore: simulator wall time, peak memory, and
the modeled backward/forward time ratio (issue 10 benchmark).

Case: one batch of S tokens (TND, default S=4096), N=8, D=128, fp16, causal (sparse_mode 2 with the
2048x2048 compressed mask), on Ascend910B2. The backward runs non-deterministic and deterministic;
each run is a fresh subprocess so its peak resident memory (ru_maxrss) is its own. Timing mode
takes TensorSpecs; full mode makes random data (the backward's forward statistics are synthetic:
max 0, sum S, which does not change the instruction stream).

    python benchmarks/fag.py            # timing mode, S=4096
    python benchmarks/fag.py --full     # also full mode (minutes on a loaded machine)
    python benchmarks/fag.py --seq 1024
"""
from __future__ import annotations

import argparse
import platform

from child_run import run_child

_CHILD = r"""
import json, resource, sys, time
import numpy as np
from npusim import TensorSpec
from ops import flash_attention_unpadding_score_grad_v5, flash_attention_var_len_score
from ops.common.masks import compressed_causal_mask
op, mode, N, S, D = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
mask = compressed_causal_mask().astype(bool)
common = dict(atten_mask=mask, actual_seq_qlen=[S], actual_seq_kvlen=[S], head_num=N, scale_value=1 / np.sqrt(D),
              input_layout="TND", sparse_mode=2, mode=mode)
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
print(json.dumps({"op": op, "mode": mode, "wall_s": wall,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "cycles": res.cycles, "time_us": res.time_us, "block_dim": res.block_dim}))
"""

N, D = 8, 128


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--full", action="store_true")
    opts = ap.parse_args()
    print(f"machine: {platform.machine()} ({platform.processor() or 'cpu'}), Python {platform.python_version()}")
    print(f"case: TND one batch, N={N} S={opts.seq} D={D} fp16 causal on Ascend910B2")
    print(f"{'operator':22s} {'mode':7s} {'wall s':>7s} {'peak MB':>8s} {'modeled us':>11s} cores")
    rows = {}
    for mode in ("timing", "full") if opts.full else ("timing",):
        for op, label in (("fa", "forward (VarLenScore)"), ("fag", "backward"), ("fag_det", "backward determ.")):
            r = run_child(_CHILD, [op, mode, N, opts.seq, D])
            rows[(op, mode)] = r
            print(f"{label:22s} {mode:7s} {r['wall_s']:7.1f} {r['peak_mb']:8.0f} {r['time_us']:11.1f} "
                  f"{r['block_dim']}")
    fwd, bwd, det = (rows[(op, "timing")]["time_us"] for op in ("fa", "fag", "fag_det"))
    print(f"modeled backward / forward: {bwd / fwd:.2f}; deterministic costs {100 * (det / bwd - 1):.1f}% more "
          f"than the atomic backward")


if __name__ == "__main__":
    main()
