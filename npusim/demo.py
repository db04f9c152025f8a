"""``npusim demo``: the main job on a default case.

Runs PromptFlashAttentionV2 (B=1, N=4, S=2048, D=128, fp16, causal) on Ascend910B2 in full mode,
checks the output against the float64 formula, prints the summary (modeled time, bound pipe,
utilisation per core and pipe), and writes the Chrome trace (msprof op simulator layout), the trace CSV
and a Gantt figure into the output directory. ``--case matmul`` runs the tiled matmul reference kernel.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from npusim.chip import chip as get_chip

PFA_CASE = dict(B=1, N=4, S=2048, D=128)


def run_demo(out_dir: Path, chip: str = "Ascend910B2", mode: str = "full", case: str = "pfa") -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = get_chip(chip)
    res, title = (_pfa if case == "pfa" else _matmul)(spec, mode)
    print(res.trace.summary().to_text(8))
    json_path = res.trace.to_chrome_json(out_dir / "trace.json")
    csv_path = res.trace.to_csv(out_dir / "trace.csv")
    png_path = res.trace.plot_gantt(out_dir / "gantt.png", max_cores=2, title=title)
    print(f"wrote {json_path} (chrome://tracing, Perfetto or MindStudio Insight), {csv_path}, {png_path}")
    return 0


def _pfa(spec, mode):
    from npusim.memory.gm import TensorSpec
    from ops import prompt_flash_attention_v2
    from ops.common.masks import compressed_causal_mask

    b, n, s, d = (PFA_CASE[k] for k in "BNSD")
    rng = np.random.default_rng(0)
    if mode == "full":
        q, k, v = (rng.uniform(-1, 1, (b, n, s, d)).astype(np.float16) for _ in range(3))
    else:
        q = k = v = TensorSpec((b, n, s, d), np.float16)
    t0 = time.perf_counter()
    res = prompt_flash_attention_v2(q, k, v, atten_mask=compressed_causal_mask().astype(bool), num_heads=n,
                                    input_layout="BNSD", scale_value=1 / np.sqrt(d), sparse_mode=2, chip=spec,
                                    mode=mode)
    wall = time.perf_counter() - t0
    t = res.tiling
    flops = 4 * b * n * s * s * d / 2
    print(f"npusim demo: PromptFlashAttentionV2 B={b} N={n} S={s} D={d} fp16 causal (BNSD) on {spec.name}, "
          f"{mode} mode")
    print(f"  tiling: sOuter={t.sOuterFactor} sInner={t.sInnerFactor} softmaxSOuter={t.softmaxSOuterFactor}, "
          f"{t.blockDim} AI Cores, {t.tasks} tiles, workspace {t.workspaceSize / 2**20:.1f} MiB")
    print(f"  modeled time {res.time_us:.1f} us ({res.cycles} cycles, launch included), "
          f"{flops / res.time_us / 1e6:.1f} TFLOPS of {spec.cube_tflops_fp16:.1f} peak; "
          f"AI Core timeout {res.timeout.limit_s:g} s: {'EXCEEDED' if res.timeout.exceeded else 'ok'}; "
          f"simulated in {wall:.1f} s wall")
    if mode == "full":
        q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
        sc = np.einsum("bnqd,bnkd->bnqk", q64, k64) / np.sqrt(d)
        sc = np.where(np.tril(np.ones((s, s), bool)), sc, -np.inf)
        p = np.exp(sc - sc.max(-1, keepdims=True))
        ref = np.einsum("bnqk,bnkd->bnqd", p / p.sum(-1, keepdims=True), v64)
        err = np.abs(res.attention_out.astype(np.float64) - ref).max()
        print(f"  attention_out vs the float64 formula: max |diff| = {err:.2e}")
    return res, f"PromptFlashAttentionV2 B{b} N{n} S{s} D{d} causal on {spec.name}"


def _matmul(spec, mode):
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
    print(f"npusim demo: fp16 matmul {m}x{k} @ {k}x{n} on {spec.name}: {res.time_us:.1f} us modeled")
    return res, f"matmul {m}x{n}x{k} on {spec.name}"
