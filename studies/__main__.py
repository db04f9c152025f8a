"""``python -m studies``: regenerate every committed figure and number.

Runs each benchmark (they save benchmarks/results/*.json) and each study (studies/out/*), then rewrites
the generated blocks of README.md and docs/ from the saved results (studies/render.py).

    python -m studies                 # everything (long: the matmul roofline and accuracy grids take minutes)
    python -m studies --only pfa spkc # some steps, then render
    python -m studies --render        # only rewrite README/docs from the saved results
    python -m studies --list
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: step name -> command (run from the repository root)
STEPS = {
    "sim_speed": [sys.executable, "benchmarks/sim_speed.py"],
    "pfa": [sys.executable, "benchmarks/pfa.py"],
    "fa_varlen": [sys.executable, "benchmarks/fa_varlen.py"],
    "spkc": [sys.executable, "benchmarks/scatter_pa_kv_cache.py"],
    "quick_tour": [sys.executable, "benchmarks/quick_tour.py"],
    "matmul_roofline": [sys.executable, "benchmarks/matmul_roofline.py"],
    "calibration": [sys.executable, "benchmarks/calibration.py"],
    "estimate_accuracy_pfa": [sys.executable, "benchmarks/estimate_accuracy_pfa.py"],
    "estimate_accuracy_fa": [sys.executable, "benchmarks/estimate_accuracy_fa.py"],
    "estimate_accuracy_spkc": [sys.executable, "benchmarks/estimate_accuracy_spkc.py"],
    "pfa_tiling": ([sys.executable, "-m", "npusim.cli", "sweep", "studies/pfa_tiling.toml"]
                   if (ROOT / "studies/pfa_tiling.toml").is_file() else [sys.executable, "studies/pfa_tiling.py"]),
    "timeout_map": [sys.executable, "studies/timeout_map.py"],
    "sweep_scaling": [sys.executable, "benchmarks/sweep_scaling.py"],
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m studies", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", choices=list(STEPS), help="run only these steps, then render")
    p.add_argument("--render", action="store_true", help="only rewrite README/docs from the saved results")
    p.add_argument("--list", action="store_true", help="list the steps and their commands")
    args = p.parse_args(argv)
    if args.list:
        for name, cmd in STEPS.items():
            print(f"{name:24s} {' '.join(cmd[1:])}")
        return 0
    failed = []
    for name in ([] if args.render else (args.only or list(STEPS))):
        print(f"== {name}: {' '.join(STEPS[name][1:])}", flush=True)
        t0 = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        if subprocess.run(STEPS[name], cwd=ROOT, env=env).returncode:
            failed.append(name)
        print(f"== {name}: {time.perf_counter() - t0:.0f} s", flush=True)
    sys.path.insert(0, str(ROOT / "studies"))
    from render import render

    for s in render():
        print(f"not regenerated (no saved result): {s}")
    if failed:
        print(f"FAILED steps: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
