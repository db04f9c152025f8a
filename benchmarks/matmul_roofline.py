"""Modeled time and TFLOPS of square fp16 matmuls next to the cube roofline (issue 2 benchmark).

Runs the tiled matmul reference kernel (npusim/examples/matmul.py, base 128 x 128 x 64, no L1 reuse)
in timing mode on Ascend910_9391 and Ascend910B2 for M = N = K in (1536, 3072, 6144, 7680) and prints
modeled time, TFLOPS, the fraction of the cube peak, the bound pipe, and the simulator's wall time.

    python benchmarks/matmul_roofline.py
"""
from __future__ import annotations

import platform
import time

import numpy as np

from results import save

from npusim.chip import chip as get_chip
from npusim.examples.matmul import matmul_custom, matmul_tiling
from npusim.launch import GmArg, launch
from npusim.memory.gm import TensorSpec

SIZES = (1536, 3072, 6144, 7680)
CHIPS = ("Ascend910_9391", "Ascend910B2")


def run(chip_name: str, size: int):
    spec = get_chip(chip_name)
    a = TensorSpec((size, size), np.float16)
    tiling = matmul_tiling(size, size, size, spec.aic_count)
    t0 = time.perf_counter()
    res = launch(matmul_custom, (GmArg("a", a), GmArg("b", a), GmArg("c", a), tiling), block_dim=tiling.usedCoreNum,
                 chip=spec, mode="timing", kernel_type="cube")
    wall = time.perf_counter() - t0
    tflops = 2 * size ** 3 / (res.time_us * 1e-6) / 1e12
    summary = res.trace.summary()
    return res, tflops, spec.cube_tflops_fp16, summary, wall


def main() -> None:
    print(f"machine: {platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}")
    print(f"{'chip':16s} {'M=N=K':>6s} {'time us':>10s} {'TFLOPS':>8s} {'peak':>7s} {'% peak':>7s} "
          f"{'bound':>6s} {'instr':>8s} {'wall s':>7s}")
    rows = []
    for chip_name in CHIPS:
        for size in SIZES:
            res, tflops, peak, summary, wall = run(chip_name, size)
            bound = summary.bound["pipe"].mode().iat[0]  # the lane most cores are bound by
            print(f"{chip_name:16s} {size:6d} {res.time_us:10.1f} {tflops:8.1f} {peak:7.1f} "
                  f"{100 * tflops / peak:6.1f}% {str(bound)[:6]:>6s} {len(res.trace):8d} {wall:7.1f}")
            rows.append({"chip": chip_name, "size": size, "time_us": res.time_us, "tflops": tflops,
                         "peak_pct": 100 * tflops / peak, "bound": str(bound), "instructions": len(res.trace),
                         "wall_s": wall})
    save("matmul_roofline", {"rows": rows})


if __name__ == "__main__":
    main()
