"""FlashAttentionVarLenScore: simulator wall time and peak memory, full and timing mode (issue 4 benchmark).

Case: one batch of S=4096 tokens (TND), N=8, D=128, fp16, causal (sparse_mode 2 with the 2048x2048
compressed mask), on Ascend910B2. Each mode runs in a fresh subprocess so its peak resident memory
is its own (child_run.peak_mb).

    python benchmarks/fa_varlen.py
"""
from __future__ import annotations

import platform

from child_run import run_child
from results import save

CASE = dict(N=8, S=4096, D=128)

_CHILD = r"""
import json, sys, time
from child_run import peak_mb
import numpy as np
from npusim import TensorSpec
from ops import flash_attention_var_len_score
from ops.common.masks import compressed_causal_mask
mode, N, S, D = sys.argv[1], *map(int, sys.argv[2:5])
if mode == "full":
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((S, N, D)).astype(np.float16) for _ in range(3))
else:
    q = k = v = TensorSpec((S, N, D), np.float16)
t0 = time.perf_counter()
res = flash_attention_var_len_score(q, k, v, atten_mask=compressed_causal_mask().astype(bool), actual_seq_qlen=[S],
                                    actual_seq_kvlen=[S], head_num=N, scale_value=1 / np.sqrt(D), input_layout="TND",
                                    sparse_mode=2, mode=mode)
wall = time.perf_counter() - t0
print(json.dumps({"mode": mode, "wall_s": wall, "peak_mb": peak_mb(),
                  "cycles": res.cycles, "time_us": res.time_us, "instructions": len(res.trace),
                  "block_dim": res.block_dim}))
"""


def run(mode: str) -> dict:
    return run_child(_CHILD, [mode] + [CASE[k] for k in "NSD"])


def main() -> None:
    print(f"machine: {platform.machine()} ({platform.processor() or 'cpu'}), Python {platform.python_version()}")
    print(f"case: TND one batch, N={CASE['N']} S={CASE['S']} D={CASE['D']} fp16 causal on Ascend910B2")
    print(f"{'mode':7s} {'wall s':>7s} {'peak MB':>8s} {'modeled us':>11s} {'cycles':>9s} {'instructions':>13s} cores")
    rows = {}
    for mode in ("timing", "full"):
        r = rows[mode] = run(mode)
        print(f"{r['mode']:7s} {r['wall_s']:7.1f} {r['peak_mb']:8.0f} {r['time_us']:11.1f} {r['cycles']:9d} "
              f"{r['instructions']:13d} {r['block_dim']}")
    save("fa_varlen", {"case": CASE, "rows": rows})


if __name__ == "__main__":
    main()
