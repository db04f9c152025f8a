"""Cost of the schedule sanitizer: the PFA benchmark case in timing mode, plain and sanitized (issue 12).

Case: B=1, N=8, S=4096, D=128, fp16, causal (sparse_mode 2), BNSD, on Ascend910B2 (benchmarks/pfa.py).
Target: the sanitized run within 3x of the plain one. Each run is a fresh subprocess; the two modes
alternate for ``--repeat`` rounds and the ratio is taken per round (plain and sanitized of one round ran
under about the same machine load). The load average is printed with each round: the figure depends on it.

    python benchmarks/sanitizer.py [--repeat 2] [--S 4096]
"""
from __future__ import annotations

import argparse
import os
import platform

from child_run import run_child

_CHILD = r"""
import json, sys, time
import numpy as np
from npusim import TensorSpec
from ops import prompt_flash_attention_v2
from ops.common.masks import compressed_causal_mask
sanitize, B, N, S, D = sys.argv[1] == "1", *map(int, sys.argv[2:6])
q = k = v = TensorSpec((B, N, S, D), np.float16)
mask = compressed_causal_mask().astype(bool)
t0 = time.perf_counter()
res = prompt_flash_attention_v2(q, k, v, atten_mask=mask, num_heads=N, input_layout="BNSD", scale_value=1 / np.sqrt(D),
                                sparse_mode=2, mode="timing", sanitize=sanitize)
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "cycles": res.cycles, "instructions": len(res.trace),
                  "reports": None if res.sanitizer is None else len(res.sanitizer)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--S", type=int, default=4096)
    a = ap.parse_args()
    case = [1, 8, a.S, 128]
    print(f"machine: {platform.machine()} ({os.cpu_count()} CPUs), Python {platform.python_version()}")
    print(f"case: PFA B=1 N=8 S={a.S} D=128 fp16 causal, timing mode, Ascend910B2")
    print(f"{'round':>5s} {'plain s':>8s} {'sanitized s':>12s} {'ratio':>6s} {'reports':>8s} {'instructions':>13s}  load avg")
    ratios = []
    for i in range(a.repeat):
        load0 = os.getloadavg()[0]
        plain = run_child(_CHILD, ["0", *case])
        checked = run_child(_CHILD, ["1", *case])
        load1 = os.getloadavg()[0]
        assert plain["cycles"] == checked["cycles"]
        ratio = checked["wall_s"] / plain["wall_s"]
        ratios.append(ratio)
        print(f"{i:5d} {plain['wall_s']:8.1f} {checked['wall_s']:12.1f} {ratio:6.2f} {checked['reports']:8d} "
              f"{plain['instructions']:13d}  {load0:.1f} -> {load1:.1f}")
    print(f"median ratio {sorted(ratios)[len(ratios) // 2]:.2f} (target <= 3)")


if __name__ == "__main__":
    main()
