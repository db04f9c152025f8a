"""Simulator speed: simulated instructions per wall-clock second, timing and full mode, one core.

Runs the double-buffered vector-add reference kernel (DataCopy, queue flags, Add, DataCopy out: the
instruction mix of a vector kernel) on one AIV with a long input, and counts the trace's rows (every
instruction and every flag instruction the kernel issued). Target (issue 2): >= 200,000 instructions
per second in timing mode on one core of the 2-core development machine.

    python benchmarks/sim_speed.py
"""
from __future__ import annotations

import platform
import time

import numpy as np

from npusim.examples.vector_add import add_custom, add_tiling
from npusim.launch import GmArg, launch
from npusim.memory.gm import TensorSpec


def measure(mode: str, n: int, tile: int = 1024, repeats: int = 3) -> tuple[float, int]:
    """Best-of-*repeats* instructions per second for one launch of *n* fp16 elements."""
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


def main() -> None:
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"numpy {np.__version__}")
    for mode in ("timing", "full"):
        rate, count = measure(mode, 1024 * 20000)
        print(f"{mode:7s}: {count:8d} instructions, {rate:10,.0f} instructions/s")


if __name__ == "__main__":
    main()
