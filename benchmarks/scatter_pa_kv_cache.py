"""ScatterPaKvCache: modeled time and bandwidth on Ascend910B2, and the simulator's own wall time.

Case: 4096 tokens, 8 KV heads, head size 128, block_size 128, fp16, key and value, unique random
slots in a cache twice as large as needed (64 blocks), cache_mode Norm and PA_NZ. Bytes moved =
key + value read and written once = 4 x 4096 x 8 x 128 x 2 B = 32 MiB. Achieved bandwidth = bytes /
modeled time (launch overhead included), against ``ChipSpec.hbm_bw_bytes_per_s``. Wall times: best
of *repeats* launches in full mode (numpy data) and timing mode (TensorSpec data).

    python benchmarks/scatter_pa_kv_cache.py
"""
from __future__ import annotations

import os
import platform
import time

import numpy as np

from results import cpu_name, save

from npusim.chip import chip as get_chip
from npusim.memory.gm import TensorSpec
from ops.scatter_pa_kv_cache.api import scatter_pa_kv_cache

CHIP = "Ascend910B2"
TOKENS, HEADS, HEAD_SIZE, BLOCK_SIZE, NUM_BLOCKS = 4096, 8, 128, 128, 64
DTYPE = np.float16


def cache_shape(cache_mode: str) -> tuple:
    if cache_mode == "PA_NZ":  # last dim = 32 bytes of fp16
        last = 32 // np.dtype(DTYPE).itemsize
        return (NUM_BLOCKS, HEADS * HEAD_SIZE // last, BLOCK_SIZE, last)
    return (NUM_BLOCKS, BLOCK_SIZE, HEADS, HEAD_SIZE)


def run_case(cache_mode: str, repeats: int = 2) -> dict:
    """Modeled cycles/time and the best wall time of full and timing runs for one cache mode."""
    rng = np.random.default_rng(0)
    key = rng.standard_normal((TOKENS, HEADS, HEAD_SIZE)).astype(DTYPE)
    value = rng.standard_normal((TOKENS, HEADS, HEAD_SIZE)).astype(DTYPE)
    slots = rng.permutation(NUM_BLOCKS * BLOCK_SIZE)[:TOKENS].astype(np.int32)
    shape = cache_shape(cache_mode)
    walls = {}
    for mode in ("full", "timing"):
        best = float("inf")
        for _ in range(repeats):
            if mode == "full":
                args = (key, np.zeros(shape, DTYPE), slots, value, np.zeros(shape, DTYPE))
            else:
                args = (TensorSpec(key.shape, DTYPE), TensorSpec(shape, DTYPE), slots,
                        TensorSpec(value.shape, DTYPE), TensorSpec(shape, DTYPE))
            t0 = time.perf_counter()
            res = scatter_pa_kv_cache(*args, cache_mode=cache_mode, chip=CHIP, mode=mode)
            best = min(best, time.perf_counter() - t0)
        walls[mode] = best
    spec = get_chip(CHIP)
    moved = 4 * TOKENS * HEADS * HEAD_SIZE * np.dtype(DTYPE).itemsize
    gbps = moved / (res.time_us * 1e-6) / 1e9
    return {"cache_mode": cache_mode, "template": res.extra["template"], "tiling_key": res.tiling.tilingKey,
            "cores": res.block_dim, "cycles": res.cycles, "time_us": res.time_us, "gb_s": gbps,
            "peak_pct": 100 * gbps * 1e9 / spec.hbm_bw_bytes_per_s, "wall_full_s": walls["full"],
            "wall_timing_s": walls["timing"], "instructions": len(res.trace)}


def main() -> None:
    spec = get_chip(CHIP)
    print(f"machine: {cpu_name()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"numpy {np.__version__}")
    print(f"case: {TOKENS} tokens x {HEADS} heads x {HEAD_SIZE}, block_size {BLOCK_SIZE}, fp16, {CHIP} "
          f"(HBM peak {spec.hbm_bw_bytes_per_s / 1e9:.0f} GB/s, {spec.aiv_count} AIVs)")
    head = (f"{'cache_mode':10s} {'template':8s} {'key':>5s} {'cores':>5s} {'cycles':>8s} {'time_us':>8s} "
            f"{'GB/s':>7s} {'%peak':>6s} {'instr':>7s} {'wall full s':>11s} {'wall timing s':>13s}")
    print(head)
    rows = []
    for cache_mode in ("Norm", "PA_NZ"):
        r = run_case(cache_mode)
        rows.append(r)
        print(f"{r['cache_mode']:10s} {r['template']:8s} {r['tiling_key']:5d} {r['cores']:5d} {r['cycles']:8d} "
              f"{r['time_us']:8.1f} {r['gb_s']:7.0f} {r['peak_pct']:6.1f} {r['instructions']:7d} "
              f"{r['wall_full_s']:11.2f} {r['wall_timing_s']:13.2f}")
    save("scatter_pa_kv_cache", {"chip": CHIP, "launch_overhead_cycles": spec.launch_overhead_cycles,
                                 "hbm_gb_s": spec.hbm_bw_bytes_per_s / 1e9, "rows": rows})


if __name__ == "__main__":
    main()
