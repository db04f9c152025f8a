"""SparseFlashAttentionGrad: wall/CPU time and peak memory of estimate, timing and full mode, and the modeled time.

Case (issue 11): T1 = 2048 query tokens (TND, one batch), N1 = 64, D = 512, rope Dr = 64, fp16,
sparse_indices of K = 2048 slots, sparse_block_size 64; each token selects 32 distinct random blocks
(2048 key rows, DeepSeek-V3.2's top-k count) of S2 = 8192 keys, then -1. Each mode runs in a fresh
process (its peak RSS is its own), with ``trace="summary"`` (busy cycles and counts per pipe; a full
trace of this case would hold ~37M rows).

Full mode of the whole case is not run by default: it costs several times timing mode's CPU per
instruction (about 20 min of CPU after session 6's data-path work, 37 min before). Its queued atomic adds are
committed as the streams pass them (npusim/launch.py), so memory no longer grows with the main loop. Instead
full mode runs on the same case cut to FULL_T1 tokens (one per AI Core, so every core works) and to FULL_T1_4
(four per core); the README projects the whole case's CPU time linearly in tokens from the two cuts
(studies/render.py) and reports both cuts' CPU time and peak; ``--modes full`` runs the whole case. Modes not
run keep their saved rows of the same case.

    python benchmarks/sfag.py [--quick] [--modes estimate timing full-cut full-cut4 full]   (--quick: T1 = 256)
Results: benchmarks/results/sfag.json (README performance rows, ``python -m studies`` step ``sfag``).
"""
from __future__ import annotations

import argparse
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(__file__))
from child_run import run_child
from results import load, save

_CHILD = r"""
import json, sys, time
from child_run import peak_mb
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
t0, c0 = time.perf_counter(), time.process_time()
res = sparse_flash_attention_grad(q, k, v, idx, do, o, sm, ss, [T1], [S2], qr, kr, scale_value=1 / 24,
                                  sparse_block_size=BS, layout="TND", mode=mode,
                                  **({} if mode == "estimate" else {"trace": "summary"}))
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
n = res.trace.summary().instructions if res.trace is not None else 0
print(json.dumps({"mode": mode, "T1": T1, "wall_s": wall, "cpu_s": cpu, "time_us": res.time_us, "instructions": n,
                  "peak_mb": peak_mb(), "block_dim": res.block_dim,
                  "load_avg": __import__("os").getloadavg()[0]}))
"""
CASE = {"T1": 2048, "N1": 64, "S2": 8192, "BS": 64, "ROWS": 2048}
FULL_T1 = 24  # the full-mode cut: one token per AI Core of the 910B2
FULL_T1_4 = 96  # the second cut: four tokens per AI Core (with FULL_T1, the CPU time per token)
CUTS = {"full-cut": FULL_T1, "full-cut4": FULL_T1_4}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--modes", nargs="*", default=["estimate", "timing", "full-cut", "full-cut4"])
    a = ap.parse_args(argv)
    case = dict(CASE, T1=256) if a.quick else CASE
    print(f"machine: {platform.machine()} {platform.processor() or ''} {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; case {case}", flush=True)
    out = {}
    for mode in a.modes:
        sim = "full" if mode in CUTS else mode
        t1 = CUTS.get(mode, case["T1"])
        r = run_child(_CHILD, [sim, t1] + [case[k] for k in ("N1", "S2", "BS", "ROWS")])
        out[mode] = r
        print(f"{mode:8s} T1 {t1:5d}  wall {r['wall_s']:8.1f} s  CPU {r['cpu_s']:8.1f} s  peak {r['peak_mb']:7.0f} MB  "
              f"modeled {r['time_us']:10.1f} us  instructions {r['instructions']:,}  load {r['load_avg']:.1f}", flush=True)
    if "estimate" in out and "timing" in out:
        print(f"estimate vs timing: {100 * (out['estimate']['time_us'] / out['timing']['time_us'] - 1):+.2f}%")
    if not a.quick:
        # modes not run this time keep their rows of the same case (each row names its own load and run)
        old = load("sfag") or {}
        kept = {m: r for m, r in old.get("rows", {}).items() if old.get("case") == case and m not in out}
        save("sfag", {"case": case, "full_cut_t1": FULL_T1, "full_cut4_t1": FULL_T1_4, "rows": {**kept, **out}})
    return out


if __name__ == "__main__":
    main()
