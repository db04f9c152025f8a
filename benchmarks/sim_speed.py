"""Simulator speed: simulated instructions per wall-clock second.

Two workloads, best of three runs each:

- vector add, timing and full mode, one core: the double-buffered vector-add reference kernel
  (DataCopy, queue flags, Add, DataCopy out: the instruction mix of a vector kernel) on one AIV with a
  long input. Target (issue 2): >= 200,000 instructions per second in timing mode on one core of the
  2-core development machine.
  Targets (issue 14): >= 1,000,000 instructions/s in timing mode.
- FlashAttentionVarLenScore, timing mode: one batch of 2048 x 2048 tokens, 8 heads of D = 128, fp16,
  no mask, on Ascend910B2 (all its AI Cores; repeat-form vector instructions, PipeBarriers, cube
  tiles and queue flags: the mix estimate mode simulates within its wall-clock budget). Target (issue 14):
  >= 800,000 instructions/s.

Instructions are the trace's rows (every instruction and every flag instruction the kernel issued).

    python benchmarks/sim_speed.py
"""
from __future__ import annotations

import os
import platform
import time

import numpy as np

from results import save

from npusim.examples.vector_add import add_custom, add_tiling
from npusim.launch import GmArg, launch
from npusim.memory.gm import TensorSpec


def measure(mode: str, n: int, tile: int = 1024, repeats: int = 3) -> tuple[float, int]:
    """Best-of-*repeats* instructions per second for one vector-add launch of *n* fp16 elements."""
    if mode == "timing":
        x = y = z = TensorSpec((n,), np.float16)
    else:
        rng = np.random.default_rng(0)
        x = rng.standard_normal(n).astype(np.float16)
        y = rng.standard_normal(n).astype(np.float16)
        z = np.zeros(n, np.float16)
    tiling = add_tiling(n, 1, tile, 2)
    best = 0.0
    count = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = launch(add_custom, (GmArg("x", x), GmArg("y", y), GmArg("z", z), tiling), block_dim=1,
                     chip="Ascend910B2", mode=mode, kernel_type="vector")
        dt = time.perf_counter() - t0
        count = len(res.trace)
        best = max(best, count / dt)
    return best, count


def measure_fa_varlen(seq: int = 2048, heads: int = 8, head_dim: int = 128,
                      repeats: int = 3) -> tuple[float, int, float]:
    """Best-of-*repeats* (instructions per second, instructions, wall seconds) of one timing-mode
    FlashAttentionVarLenScore call (one batch of *seq* x *seq*, *heads* heads, fp16, no mask)."""
    from ops.flash_attention_var_len_score.api import flash_attention_var_len_score

    q = kv = TensorSpec((seq, heads, head_dim), np.float16)
    best, count, wall = 0.0, 0, float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = flash_attention_var_len_score(q, kv, kv, actual_seq_qlen=[seq], actual_seq_kvlen=[seq],
                                            head_num=heads, scale_value=1 / np.sqrt(head_dim),
                                            chip="Ascend910B2", mode="timing")
        dt = time.perf_counter() - t0
        count = len(res.trace)
        best, wall = max(best, count / dt), min(wall, dt)
    return best, count, wall


def main() -> None:
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, numpy {np.__version__}")
    out = {}
    for mode in ("timing", "full"):
        rate, count = measure(mode, 1024 * 20000)
        out[f"vector_{mode}"] = {"instructions": count, "rate": rate}
        print(f"vector add, {mode:6s}: {count:8d} instructions, {rate:10,.0f} instructions/s")
    rate, count, wall = measure_fa_varlen()
    out["fa_varlen_timing"] = {"instructions": count, "rate": rate, "wall_s": wall}
    print(f"FA varlen 2048x2048 N8 D128, timing: {count:8d} instructions, {rate:10,.0f} instructions/s "
          f"({wall:.2f} s)")
    save("sim_speed", out)


if __name__ == "__main__":
    main()
