"""SparseFlashAttentionGrad: wall time and peak memory of full and timing mode, and the modeled time.

Case (issue 11): T1 = 2048 query tokens (TND, one batch), N1 = 64, D = 512, rope Dr = 64, fp16,
sparse_indices of K = 2048 slots, sparse_block_size 64; each token selects 32 distinct random blocks
(2048 key rows, DeepSeek-V3.2's top-k count) of S2 = 8192 keys, then -1. Each mode runs in a fresh
process (peak RSS is its own); estimate mode is timed too, and its error against timing mode printed.

    python benchmarks/sfag.py [--quick]     (--quick: T1 = 256)
"""
from __future__ import annotations

import argparse
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(__file__))
from child_run import run_child  # noqa: E402

_CHILD = r"""
import json, resource, sys, time
import numpy as np
from npusim import TensorSpec
from ops import sparse_flash_attention_grad
mode, T1, N1, S2, BS, ROWS = sys.argv[1], *map(int, sys.argv[2:7])
K, D, DR = 2048, 512, 64
rng = np.random.default_rng(0)
idx = np.full((T1, 1, K), -1, np.int64)
for t in range(T1):
    idx[t, 0, :ROWS // BS] = rng.choice(S2 // BS, ROWS // BS, replace=False)
if mode == "full":
    mk = lambda s: (rng.standard_normal(s) * 0.5).astype(np.float16)
    q, qr, do, o = mk((T1, N1, D)), mk((T1, N1, DR)), mk((T1, N1, D)), mk((T1, N1, D))
    k, v, kr = mk((S2, 1, D)), mk((S2, 1, D)), mk((S2, 1, DR))
    sm = np.zeros((1, T1, N1), np.float32); ss = np.full((1, T1, N1), float(ROWS), np.float32)
else:
    q = do = o = TensorSpec((T1, N1, D), np.float16); qr = TensorSpec((T1, N1, DR), np.float16)
    k = v = TensorSpec((S2, 1, D), np.float16); kr = TensorSpec((S2, 1, DR), np.float16)
    sm = ss = TensorSpec((1, T1, N1), np.float32)
t0 = time.perf_counter()
res = sparse_flash_attention_grad(q, k, v, idx, do, o, sm, ss, [T1], [S2], qr, kr, scale_value=1 / 24,
                                  sparse_block_size=BS, layout="TND", mode=mode)
wall = time.perf_counter() - t0
print(json.dumps({"mode": mode, "wall_s": wall, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "time_us": res.time_us, "instructions": len(res.trace) if res.trace is not None else 0,
                  "block_dim": res.block_dim}))
"""
CASE = {"T1": 2048, "N1": 64, "S2": 8192, "BS": 64, "ROWS": 2048}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--modes", nargs="*", default=["estimate", "timing", "full"])
    a = ap.parse_args(argv)
    case = dict(CASE, T1=256) if a.quick else CASE
    print(f"machine: {platform.machine()} {platform.processor() or ''} {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; case {case}")
    out = {}
    for mode in a.modes:
        r = run_child(_CHILD, [mode] + [case[k] for k in ("T1", "N1", "S2", "BS", "ROWS")])
        out[mode] = r
        print(f"{mode:8s} wall {r['wall_s']:8.1f} s  peak {r['peak_mb']:7.0f} MB  modeled {r['time_us']:10.1f} us  "
              f"instructions {r['instructions']}")
    if "estimate" in out and "timing" in out:
        print(f"estimate vs timing: {100 * (out['estimate']['time_us'] / out['timing']['time_us'] - 1):+.2f}%")
    return out


if __name__ == "__main__":
    main()
