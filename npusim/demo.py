"""``npusim demo``: the main job on a small case.

The cases are the registered operators' demos (npusim.registry; the default ``pfa``: causal
PromptFlashAttentionV2 B=1 N=4 S=2048 D=128 fp16) and ``matmul``, npusim's tiled matmul reference
kernel. A demo runs the case, prints the modeled time split into kernel and launch overhead and the
trace summary, and only then writes the Chrome trace (msprof op simulator layout), the trace CSV and a
Gantt figure into the output directory: a case the chip cannot run is refused before anything is
written.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from npusim import registry
from npusim.chip import chip as get_chip
from npusim.chip import chips
from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.registry import DemoCase, DemoRun


def _matmul_chips(spec) -> str | None:
    """The matmul example writes C through FixPipe (L0C -> GM), which only split-core chips have."""
    if spec.l0c_to_gm_bytes_per_cycle > 0:
        return None
    able = [n for n in chips() if get_chip(n).l0c_to_gm_bytes_per_cycle > 0]
    return (f"the matmul example kernel writes C from L0C to GM through FixPipe, which {spec.name} does not have "
            f"(it runs on {', '.join(able)}); try --case pfa")


def _matmul(spec, mode: str) -> DemoRun:
    from npusim.examples.matmul import matmul_custom, matmul_tiling
    from npusim.launch import GmArg, launch
    from npusim.memory.gm import TensorSpec

    m = n = 1024
    k = 512
    rng = np.random.default_rng(0)
    if mode == "full":
        a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)
        c = np.zeros((m, n), np.float16)
    else:
        a, b, c = TensorSpec((m, k), np.float16), TensorSpec((k, n), np.float16), TensorSpec((m, n), np.float16)
    tiling = matmul_tiling(m, n, k, spec.aic_count)
    res = launch(matmul_custom, (GmArg("a", a), GmArg("b", b), GmArg("c", c), tiling), block_dim=tiling.usedCoreNum,
                 chip=spec, mode=mode, kernel_type="cube", meta={"tiling": tiling.__dict__})
    lines = [f"npusim demo: fp16 matmul {m}x{k} @ {k}x{n} on {spec.name}, {mode} mode, {tiling.usedCoreNum} AI Cores"]
    return DemoRun(res, f"matmul {m}x{n}x{k} on {spec.name}", lines)


BUILTIN = {"matmul": DemoCase(run=_matmul, chips=_matmul_chips,
                              title="the tiled matmul reference kernel, fp16 1024x512 @ 512x1024")}


def demo_cases() -> dict[str, DemoCase]:
    """Case name -> DemoCase: every registered operator with a demo, then the built-in ones."""
    return {name: e.demo for name, e in registry.operators().items() if e.demo is not None} | BUILTIN


def time_lines(res, spec) -> list[str]:
    """The modeled time as kernel + launch overhead (the overhead the launch itself added, from the
    trace's metadata), and what the trace spans; without a trace, the total alone."""
    meta = getattr(res.trace, "meta", None) or {}
    head = f"  modeled time {res.time_us:.1f} us ({res.cycles:,} cycles)"
    if "launch_overhead_cycles" not in meta:
        return [head + ", launch included"] + _timeout_line(res)
    overhead_us = meta["launch_overhead_cycles"] / spec.clock_hz * 1e6
    return [head + f" = kernel {res.time_us - overhead_us:.1f} us + launch overhead {overhead_us:.1f} us (the fixed "
            "cost of the launch, fitted: npusim/calibration.py)",
            f"  the trace below is the kernel alone: {res.trace.time_us:.2f} us from its first to its last instruction "
            "(no launch overhead)"] + _timeout_line(res)


def _timeout_line(res) -> list[str]:
    t = res.timeout
    return [] if t is None else [f"  AI Core timeout {t.limit_s:g} s: {'EXCEEDED' if t.exceeded else 'ok'}"]


def run_demo(out_dir: Path, chip: str = "Ascend910B2", mode: str = "full", case: str = "pfa") -> int:
    cases = demo_cases()
    if case not in cases:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"demo: unknown case {case!r}; cases: {', '.join(cases)}")
    spec = get_chip(chip)
    demo = cases[case]
    why_not = demo.chips(spec) if demo.chips is not None else None
    if why_not:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"demo {case} on {spec.name}: {why_not}")
    done = demo.run(spec, mode)
    res = done.result
    print("\n".join(done.lines + time_lines(res, spec)))
    print(res.trace.summary().to_text(8))
    out_dir.mkdir(parents=True, exist_ok=True)  # only now: nothing is left behind by a failed run
    json_path = res.trace.to_chrome_json(out_dir / "trace.json")
    csv_path = res.trace.to_csv(out_dir / "trace.csv")
    png_path = res.trace.plot_gantt(out_dir / "gantt.png", max_cores=2, title=done.title)
    print(f"wrote {json_path} (chrome://tracing, Perfetto or MindStudio Insight), {csv_path}, {png_path}")
    return 0
