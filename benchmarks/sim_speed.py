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
Rates are given per CPU second (``time.process_time``: what load on a shared machine disturbs least; the
issue-14 targets are checked on it) and per wall-clock second, with the load average at the run.

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


TARGETS = {"vector_timing": 1_000_000, "fa_varlen_timing": 800_000}  # instructions per CPU second (issue 14)


def _timed(call) -> tuple[object, float, float]:
    """(result, CPU seconds, wall seconds) of ``call()``."""
    w0, c0 = time.perf_counter(), time.process_time()
    res = call()
    return res, time.process_time() - c0, time.perf_counter() - w0


def measure(mode: str, n: int, tile: int = 1024, repeats: int = 3) -> dict:
    """Best-of-*repeats* instructions per CPU second and per wall second of one vector-add launch of *n* fp16
    elements."""
    if mode == "timing":
        x = y = z = TensorSpec((n,), np.float16)
    else:
        rng = np.random.default_rng(0)
        x = rng.standard_normal(n).astype(np.float16)
        y = rng.standard_normal(n).astype(np.float16)
        z = np.zeros(n, np.float16)
    tiling = add_tiling(n, 1, tile, 2)
    out = {"instructions": 0, "rate": 0.0, "rate_wall": 0.0}
    for _ in range(repeats):
        res, cpu, wall = _timed(lambda: launch(add_custom, (GmArg("x", x), GmArg("y", y), GmArg("z", z), tiling),
                                               block_dim=1, chip="Ascend910B2", mode=mode, kernel_type="vector"))
        count = len(res.trace)
        out = {"instructions": count, "rate": max(out["rate"], count / cpu),
               "rate_wall": max(out["rate_wall"], count / wall)}
    return out


def measure_fa_varlen(seq: int = 2048, heads: int = 8, head_dim: int = 128, repeats: int = 3) -> dict:
    """Best-of-*repeats* instructions per CPU second and per wall second, and the least CPU and wall
    seconds, of one timing-mode FlashAttentionVarLenScore call (one batch of *seq* x *seq*, *heads* heads,
    fp16, no mask)."""
    from ops.flash_attention_var_len_score.api import flash_attention_var_len_score

    q = kv = TensorSpec((seq, heads, head_dim), np.float16)
    out = {"instructions": 0, "rate": 0.0, "rate_wall": 0.0, "cpu_s": float("inf"), "wall_s": float("inf")}
    for _ in range(repeats):
        res, cpu, wall = _timed(lambda: flash_attention_var_len_score(
            q, kv, kv, actual_seq_qlen=[seq], actual_seq_kvlen=[seq], head_num=heads,
            scale_value=1 / np.sqrt(head_dim), chip="Ascend910B2", mode="timing", progress=False))
        count = len(res.trace)
        out = {"instructions": count, "rate": max(out["rate"], count / cpu),
               "rate_wall": max(out["rate_wall"], count / wall), "cpu_s": min(out["cpu_s"], cpu),
               "wall_s": min(out["wall_s"], wall)}
    return out


def _line(label: str, key: str, r: dict) -> str:
    target = TARGETS.get(key)
    verdict = "" if target is None else \
        f"  target >= {target:,}/CPU s: {'met' if r['rate'] >= target else 'NOT met'}"
    return (f"{label}: {r['instructions']:9,d} instructions, {r['rate']:10,.0f} /CPU s, "
            f"{r['rate_wall']:10,.0f} /wall s{verdict}")


def main() -> None:
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, numpy {np.__version__}, load average {os.getloadavg()[0]:.1f}")
    out = {}
    for mode in ("timing", "full"):
        r = out[f"vector_{mode}"] = measure(mode, 1024 * 20000)
        print(_line(f"vector add, {mode:6s}", f"vector_{mode}", r), flush=True)
    r = out["fa_varlen_timing"] = measure_fa_varlen()
    print(_line("FA varlen 2048x2048 N8 D128, timing", "fa_varlen_timing", r)
          + f" ({r['cpu_s']:.2f} CPU s, {r['wall_s']:.2f} s wall)")
    out["targets"] = TARGETS
    save("sim_speed", out)


if __name__ == "__main__":
    main()
