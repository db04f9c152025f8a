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
    python benchmarks/fag.py --estimate   # estimate mode vs timing mode (tuning shape + checking shapes)
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

_EST_CHILD = r"""
import json, sys, time
import numpy as np
from npusim import TensorSpec
from ops import flash_attention_unpadding_score_grad_v5 as fag
from ops.common.masks import compressed_causal_mask
S, N, D, causal, det = map(int, sys.argv[1:6])
t = lambda s: TensorSpec(s, np.float16)
kw = dict(softmax_max=TensorSpec((S, N, 8), np.float32), softmax_sum=TensorSpec((S, N, 8), np.float32),
          attention_in=t((S, N, D)), actual_seq_qlen=[S], actual_seq_kvlen=[S], head_num=N, scale_value=0.1,
          deterministic=bool(det))
if causal:
    kw.update(atten_mask=compressed_causal_mask().astype(bool), sparse_mode=2)
args = (t((S, N, D)), None, t((S, N, D)), None, t((S, N, D)), t((S, N, D)))
t0 = time.perf_counter(); e = fag(*args, mode="estimate", **kw); te = time.perf_counter() - t0
t0 = time.perf_counter(); r = fag(*args, mode="timing", **kw); tt = time.perf_counter() - t0
print(json.dumps({"est_us": e.time_us, "est_wall": te, "tim_us": r.time_us, "tim_wall": tt}))
"""
#: (S, N, D, causal, deterministic, role): the estimate's one choice (the L2 rate of the one-core sample)
#: was made on the first shape; the others are the checking set.
EST_SHAPES = ((3000, 4, 64, 1, 0, "tuned on"), (2000, 2, 128, 0, 0, "check"), (4096, 8, 128, 1, 0, "check"),
              (2500, 8, 64, 1, 1, "check"))


def estimate_table() -> None:
    print(f"{'S':>5s} {'N':>2s} {'D':>4s} causal determ. {'role':9s} {'estimate us':>11s} {'timing us':>10s} "
          f"{'error':>7s} {'est wall s':>10s}")
    for s, n, d, causal, det, role in EST_SHAPES:
        r = run_child(_EST_CHILD, [s, n, d, causal, det])
        err = 100 * (r["est_us"] / r["tim_us"] - 1)
        print(f"{s:5d} {n:2d} {d:4d} {causal:6d} {det:8d} {role:9s} {r['est_us']:11.1f} {r['tim_us']:10.1f} "
              f"{err:+6.2f}% {r['est_wall']:10.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--estimate", action="store_true")
    opts = ap.parse_args()
    if opts.estimate:
        print(f"machine: {platform.machine()} ({platform.processor() or 'cpu'}), Python {platform.python_version()}")
        estimate_table()
        return
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
