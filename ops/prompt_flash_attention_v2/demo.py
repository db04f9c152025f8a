"""``npusim demo`` (the default case): causal PromptFlashAttentionV2 B=1 N=4 S=2048 D=128 fp16, BNSD.

On split chips (910B, A3) the causal mask is sparse_mode 2 with the compressed 2048x2048 mask; the
Atlas inference chip (310P) accepts only sparse_mode 0, so there the same causal attention is given as
a full S x S mask (seed 000: 310P masks need S1 == S2, multiples of 128).
"""
from __future__ import annotations

import time

import numpy as np

from npusim.memory.gm import TensorSpec
from npusim.registry import DemoRun
from ops.common.masks import compressed_causal_mask
from ops.prompt_flash_attention_v2.api import prompt_flash_attention_v2

CASE = dict(B=1, N=4, S=2048, D=128)


def run_demo(spec, mode: str) -> DemoRun:
    b, n, s, d = (CASE[k] for k in "BNSD")
    rng = np.random.default_rng(0)
    if mode == "full":
        q, k, v = (rng.uniform(-1, 1, (b, n, s, d)).astype(np.float16) for _ in range(3))
    else:
        q = k = v = TensorSpec((b, n, s, d), np.float16)
    if spec.core_split:
        mask, sparse, how = compressed_causal_mask().astype(bool), 2, "sparse_mode 2, compressed mask"
    else:  # 310P: sparse_mode 0 only
        mask, sparse = np.triu(np.ones((s, s), bool), k=1), 0
        how = f"as sparse_mode 0 with a full {s}x{s} mask: {spec.name} has no sparse_mode 2"
    t0 = time.perf_counter()
    res = prompt_flash_attention_v2(q, k, v, atten_mask=mask, num_heads=n, input_layout="BNSD",
                                    scale_value=1 / np.sqrt(d), sparse_mode=sparse, chip=spec, mode=mode)
    wall = time.perf_counter() - t0
    t = res.tiling
    flops = 4 * b * n * s * s * d / 2
    lines = [f"npusim demo: PromptFlashAttentionV2 B={b} N={n} S={s} D={d} fp16 causal ({how}), BNSD, on "
             f"{spec.name}, {mode} mode (simulated in {wall:.1f} s wall)",
             f"  tiling: sOuter={t.sOuterFactor} sInner={t.sInnerFactor} softmaxSOuter={t.softmaxSOuterFactor}, "
             f"{t.blockDim} AI Cores, {t.tasks} tiles, workspace {t.workspaceSize / 2**20:.1f} MiB",
             f"  {flops / res.time_us / 1e6:.1f} TFLOPS of {spec.cube_tflops_fp16:.1f} peak (launch included)"]
    if mode == "full":
        q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
        sc = np.einsum("bnqd,bnkd->bnqk", q64, k64) / np.sqrt(d)
        sc = np.where(np.tril(np.ones((s, s), bool)), sc, -np.inf)
        p = np.exp(sc - sc.max(-1, keepdims=True))
        ref = np.einsum("bnqk,bnkd->bnqd", p / p.sum(-1, keepdims=True), v64)
        err = np.abs(res.attention_out.astype(np.float64) - ref).max()
        lines.append(f"  attention_out vs the float64 formula: max |diff| = {err:.2e}")
    return DemoRun(res, f"PromptFlashAttentionV2 B{b} N{n} S{s} D{d} causal on {spec.name}", lines)
