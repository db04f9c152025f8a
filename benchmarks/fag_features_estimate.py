"""FlashAttentionUnpaddingScoreGradV5 estimate mode vs timing mode on the pse / dropout / prefix / large-D paths.

Shapes were chosen before measuring and nothing in estimate.py was tuned on them (its knobs were chosen
on benchmarks/estimate_accuracy_fag.py's tuning set). blockDim 4 gives each core several rounds of
sections (the four cores then run whole, side by side). Prints per case the estimate and timing
times, the relative error and the CPU seconds (time.process_time) of each mode.

    python benchmarks/fag_features_estimate.py ["case name" ...]
"""
from __future__ import annotations

import sys
import time

import numpy as np

from npusim import TensorSpec
from ops import flash_attention_unpadding_score_grad_v5 as fag
from ops.common.masks import compressed_causal_mask

CAUSAL = compressed_causal_mask().astype(bool)
PREFIX = np.concatenate([CAUSAL, np.concatenate([np.zeros((1024, 1024), bool), np.ones((1024, 1024), bool)], 1)])
CASES = {  # name: (Sq per batch, Skv per batch, N1, N2, D, extra keywords)
    "pse2 slopes causal": ([1500], [1500], 4, 1, 64, dict(pse_type=2, pse="slope", sparse_mode=2, atten_mask=CAUSAL)),
    "pse1 alibi causal": ([1200, 800], [1200, 800], 2, 1, 64, dict(pse_type=1, pse="alibi", sparse_mode=3,
                                                                   atten_mask=CAUSAL)),
    "dropout byte mode": ([1000, 500], [1003, 501], 4, 2, 64, dict(keep_prob=0.8)),
    "dropout bit mode causal": ([1600], [1600], 4, 4, 128, dict(keep_prob=0.9, sparse_mode=2, atten_mask=CAUSAL)),
    "prefix (sparse 6)": ([1400, 700], [1600, 900], 2, 1, 64, dict(sparse_mode=6, atten_mask=PREFIX,
                                                                   prefix=[300, 250])),
    "D = 512 causal": ([1100], [1100], 2, 1, 512, dict(sparse_mode=2, atten_mask=CAUSAL)),
    "fp32 causal": ([1300], [1300], 2, 1, 64, dict(dtype=np.float32, sparse_mode=2, atten_mask=CAUSAL)),
}


def call_args(sq, skv, n1, n2, d, extra):
    t1, t2 = sum(sq), sum(skv)
    extra = dict(extra)
    io = extra.pop("dtype", np.float16)
    ts = lambda *s, dt=io: TensorSpec(s, dt)  # noqa: E731
    kw = dict(query=ts(t1, n1, d), query_rope=None, key_in=ts(t2, n2, d), key_in_rope=None, value=ts(t2, n2, d),
              dy=ts(t1, n1, d), attention_in=ts(t1, n1, d), softmax_max=ts(t1, n1, 8, dt=np.float32),
              softmax_sum=ts(t1, n1, 8, dt=np.float32), actual_seq_qlen=np.cumsum(sq).tolist(),
              actual_seq_kvlen=np.cumsum(skv).tolist(), head_num=n1, scale_value=d ** -0.5)
    pse = extra.pop("pse", None)
    if pse == "slope":
        kw["pse_shift"] = ts(n1, dt=np.float32)
    elif pse == "alibi":
        kw["pse_shift"] = ts(len(sq), n1, 1024, max(skv))
    if "keep_prob" in extra:
        kw["drop_mask"] = ts(-(-n1 * sum(a * b for a, b in zip(sq, skv)) // 8), dt=np.uint8)
    return kw | extra


def main():
    til = {"blockDim": 4}
    print(f"{'case':28s} {'blocks':>6s} {'estimate us':>12s} {'timing us':>10s} {'error':>8s} {'cpu est':>8s} "
          f"{'cpu timing':>10s}")
    for name, case in CASES.items():
        if sys.argv[1:] and name not in sys.argv[1:]:
            continue
        kw = call_args(*case)
        t0 = time.process_time()
        est = fag(**kw, mode="estimate", tiling=til)
        t1 = time.process_time()
        tim = fag(**kw, mode="timing", tiling=til)
        t2 = time.process_time()
        print(f"{name:28s} {tim.tiling.blocks:6d} {est.time_us:12.1f} {tim.time_us:10.1f} "
              f"{100 * (est.time_us / tim.time_us - 1):+7.2f}% {t1 - t0:7.2f}s {t2 - t1:9.2f}s", flush=True)


if __name__ == "__main__":
    main()
