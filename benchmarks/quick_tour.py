"""What each mode costs on the README quick tour's large shape: PromptFlashAttentionV2 B=1 N=32 S=8192
D=128 fp16 BNSD (no mask) on Ascend910B2.

Each run is a fresh subprocess (its own peak memory, ru_maxrss): estimate mode; timing mode with
``trace="summary"`` (target: under 60 s and 1 GB); timing mode with the default trace level (every row
kept up to npusim.trace_sink.FULL_TRACE_MAX_ROWS, then the summary only). Full mode is not run on this
shape: it would hold 2 GiB of fp16 tensors and simulate every element (benchmarks/pfa.py measures full
mode on a smaller case).

    python benchmarks/quick_tour.py
"""
from __future__ import annotations

from child_run import run_child
from results import machine, save

CASE = dict(B=1, N=32, S=8192, D=128)

_CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np
import npusim
from ops import prompt_flash_attention_v2
mode, trace = sys.argv[1], (None if sys.argv[2] == "default" else sys.argv[2])
B, N, S, D = map(int, sys.argv[3:7])
big = npusim.TensorSpec((B, N, S, D), np.float16)
t0, c0 = time.perf_counter(), time.process_time()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    res = prompt_flash_attention_v2(big, big, big, num_heads=N, input_layout="BNSD", mode=mode, trace=trace,
                                    progress=False)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"mode": mode, "trace": sys.argv[2], "wall_s": wall, "cpu_s": cpu,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "time_us": res.time_us, "instructions": len(res.trace) if res.trace is not None else None}))
"""

RUNS = (("estimate", "default"), ("timing", "summary"), ("timing", "default"))
#: issue 14: timing mode with trace="summary" on this shape under 60 s and 1 GB peak
TARGET_S, TARGET_MB = 60.0, 1024.0


def n_rate(r: dict) -> str:
    return f"{r['instructions'] / r['cpu_s']:,.0f}" if r["instructions"] and r["cpu_s"] else "-"


def main() -> None:
    print(f"machine: {machine()}")
    print(f"case: PFA B={CASE['B']} N={CASE['N']} S={CASE['S']} D={CASE['D']} fp16 BNSD, Ascend910B2")
    rows = []
    for mode, trace in RUNS:
        r = run_child(_CHILD, [mode, trace] + [CASE[k] for k in "BNSD"])
        rows.append(r)
        n = f"{r['instructions']:,}" if r["instructions"] else "-"
        verdict = ""
        if (mode, trace) == ("timing", "summary"):
            ok = r["wall_s"] < TARGET_S and r["peak_mb"] < TARGET_MB
            verdict = (f"  target < {TARGET_S:.0f} s and < {TARGET_MB:.0f} MB: {'met' if ok else 'NOT met'} "
                       f"({n_rate(r)} instructions per CPU second)")
        print(f"{mode:8s} trace={trace:8s} {r['wall_s']:7.1f} s wall {r['cpu_s']:7.1f} s CPU {r['peak_mb']:7.0f} MB  "
              f"modeled {r['time_us']:9.1f} us  instructions {n}{verdict}", flush=True)
        save("quick_tour", {"case": CASE, "rows": rows})  # after each run: the long ones may be cut short


if __name__ == "__main__":
    main()
