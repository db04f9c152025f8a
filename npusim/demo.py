"""``npusim demo``: the main job on a default case.

Runs the tiled fp16 matmul reference kernel (npusim/examples/matmul.py) on every AI Core of the chip,
checks the output against numpy, prints the trace summary, and writes the Chrome trace (msprof op
simulator layout), the trace CSV and a Gantt figure into the output directory.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from npusim.chip import chip as get_chip
from npusim.examples.matmul import matmul_custom, matmul_tiling
from npusim.launch import GmArg, launch
from npusim.memory.gm import TensorSpec

DEMO_M = DEMO_N = 1024
DEMO_K = 512


def run_demo(out_dir: Path, chip: str = "Ascend910B2", mode: str = "full") -> int:
    spec = get_chip(chip)
    out_dir.mkdir(parents=True, exist_ok=True)
    m, n, k = DEMO_M, DEMO_N, DEMO_K
    rng = np.random.default_rng(0)
    if mode == "full":
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        c = np.zeros((m, n), np.float16)
    else:
        a, b, c = TensorSpec((m, k), np.float16), TensorSpec((k, n), np.float16), TensorSpec((m, n), np.float16)
    tiling = matmul_tiling(m, n, k, spec.aic_count)
    t0 = time.perf_counter()
    res = launch(matmul_custom, (GmArg("a", a), GmArg("b", b), GmArg("c", c), tiling),
                 block_dim=tiling.usedCoreNum, chip=spec, mode=mode, kernel_type="cube",
                 meta={"tiling": tiling.__dict__})
    wall = time.perf_counter() - t0
    flops = 2 * m * n * k
    print(f"npusim demo: fp16 matmul {m}x{k} @ {k}x{n} on {spec.name}, {tiling.usedCoreNum} AI Cores, "
          f"base {tiling.baseM}x{tiling.baseN}x{tiling.baseK}, {mode} mode")
    print(f"  modeled time {res.time_us:.1f} us ({res.cycles} cycles, launch included), "
          f"{flops / res.time_us / 1e6:.1f} TFLOPS of {spec.cube_tflops_fp16:.1f} peak; "
          f"simulated in {wall:.2f} s wall")
    if mode == "full":
        ref = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
        err = np.max(np.abs(c.astype(np.float32) - ref.astype(np.float32)))
        print(f"  output vs numpy fp32 matmul: max |diff| = {err:.3g} (fixed fp32 accumulation order)")
    print(res.trace.summary())
    json_path = res.trace.to_chrome_json(out_dir / "trace.json")
    csv_path = res.trace.to_csv(out_dir / "trace.csv")
    png_path = res.trace.plot_gantt(out_dir / "gantt.png", max_cores=4,
                                    title=f"matmul {m}x{n}x{k} on {spec.name}")
    print(f"  wrote {json_path} (open in chrome://tracing or Perfetto), {csv_path}, {png_path}")
    return 0
