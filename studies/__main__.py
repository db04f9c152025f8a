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
sys.path.insert(0, str(ROOT / "benchmarks"))
from results import load, machine, save  # noqa: E402



def _study(name: str) -> list[list[str]]:
    """A sweep study: run it into studies/out/NAME.parquet (from the cache where the model is unchanged),
    then write its report (figures, ranking, verdict) to studies/out/NAME/."""
    cli = [sys.executable, "-m", "npusim.cli", "sweep"]
    return [cli + [f"studies/{name}.toml"], cli + ["report", f"studies/out/{name}.parquet", "--out", f"studies/out/{name}"]]


#: step name -> command, or list of commands (run from the repository root)
STEPS = {
    "sim_speed": [sys.executable, "benchmarks/sim_speed.py"],
    "pfa": [sys.executable, "benchmarks/pfa.py"],
    "sanitizer": [sys.executable, "benchmarks/sanitizer.py"],
    "fa_varlen": [sys.executable, "benchmarks/fa_varlen.py"],
    "spkc": [sys.executable, "benchmarks/scatter_pa_kv_cache.py"],
    "quick_tour": [sys.executable, "benchmarks/quick_tour.py"],
    "matmul_roofline": [sys.executable, "benchmarks/matmul_roofline.py"],
    "calibration": [sys.executable, "benchmarks/calibration.py"],
    "estimate_accuracy_pfa": [sys.executable, "benchmarks/estimate_accuracy_pfa.py"],
    "estimate_accuracy_fa": [sys.executable, "benchmarks/estimate_accuracy_fa.py"],
    "estimate_accuracy_spkc": [sys.executable, "benchmarks/estimate_accuracy_spkc.py"],
    "estimate_accuracy_sfag": [sys.executable, "benchmarks/estimate_accuracy_sfag.py"],
    "sfag": [sys.executable, "benchmarks/sfag.py"],
    "estimate_accuracy_fag": [sys.executable, "benchmarks/estimate_accuracy_fag.py"],
    "fag": [sys.executable, "benchmarks/fag.py", "--full"],
    "pfa_tiling": _study("pfa_tiling"),
    "whatif_pfa": _study("whatif_hbm_l2_pfa"),
    "whatif_fa": _study("whatif_hbm_l2_fa"),
    "sfag_block_size": [sys.executable, "studies/sfag_block_size.py"],
    "timeout_map": [sys.executable, "studies/timeout_map.py"],
    "timeout_table": [sys.executable, "studies/timeout_table.py"],
    "sweep_scaling": [sys.executable, "benchmarks/sweep_scaling.py"],
    "readme_examples": [sys.executable, "benchmarks/readme_examples.py"],  # after the studies: the sweep example hits their cache
}


def _commands(step) -> list[list[str]]:
    return step if isinstance(step[0], list) else [step]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m studies", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", choices=list(STEPS), help="run only these steps, then render")
    p.add_argument("--render", action="store_true", help="only rewrite README/docs from the saved results")
    p.add_argument("--list", action="store_true", help="list the steps and their commands")
    args = p.parse_args(argv)
    if args.list:
        for name, step in STEPS.items():
            print(f"{name:24s} " + " && ".join(" ".join(cmd[1:]) for cmd in _commands(step)))
        return 0
    failed = []
    times = (load("studies_steps") or {}).get("steps", {})
    for name in ([] if args.render else (args.only or list(STEPS))):
        t0 = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        for cmd in _commands(STEPS[name]):
            print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
            if subprocess.run(cmd, cwd=ROOT, env=env).returncode:
                failed.append(name)
                break
        wall = time.perf_counter() - t0
        print(f"== {name}: {wall:.0f} s", flush=True)
        if name not in failed:
            times[name] = {"wall_s": wall, "machine": machine()}  # its own load: a later --only run must not relabel it
            save("studies_steps", {"steps": times})
    sys.path.insert(0, str(ROOT / "studies"))
    from render import render  # noqa: PLC0415

    for s in render():
        print(f"not regenerated (no saved result): {s}")
    if failed:
        print(f"FAILED steps: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
