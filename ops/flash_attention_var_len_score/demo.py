"""``npusim demo --case fa``: a packed varlen batch through FlashAttentionVarLenScore, checked in float64.

Two sequences of 1536 and 512 tokens (T=2048), N=4 heads, D=128, fp16, right-down causal (sparse_mode 3,
the compressed mask): the tile table follows the real sequence lengths, which is what the varlen
operator is for. Split-core chips only (910B, A3), as the operator itself.
"""
from __future__ import annotations

import time

import numpy as np

from npusim.memory.gm import TensorSpec
from npusim.registry import DemoRun
from ops.common.masks import compressed_causal_mask
from ops.flash_attention_var_len_score.api import flash_attention_var_len_score
from ops.flash_attention_var_len_score.reference import fa_var_len_reference

SEQ_LENS = (1536, 512)
N, D = 4, 128


def demo_chips(spec) -> str | None:
    if spec.core_split:
        return None
    return (f"FlashAttentionVarLenScore runs on Atlas A2/A3 (split AIC/AIV cores); {spec.name} is not one "
            "(try --case pfa)")


def run_demo(spec, mode: str) -> DemoRun:
    t = sum(SEQ_LENS)
    cum = [int(x) for x in np.cumsum(SEQ_LENS)]
    rng = np.random.default_rng(0)
    if mode == "full":
        q, k, v = (rng.uniform(-1, 1, (t, N, D)).astype(np.float16) for _ in range(3))
    else:
        q = k = v = TensorSpec((t, N, D), np.float16)
    mask = compressed_causal_mask().astype(bool)
    t0 = time.perf_counter()
    res = flash_attention_var_len_score(q, k, v, atten_mask=mask, actual_seq_qlen=cum, actual_seq_kvlen=cum,
                                        head_num=N, scale_value=float(1 / np.sqrt(D)), sparse_mode=3,
                                        input_layout="TND", chip=spec, mode=mode)
    wall = time.perf_counter() - t0
    til = res.tiling
    lines = [f"npusim demo: FlashAttentionVarLenScore TND T={t} (sequences {', '.join(map(str, SEQ_LENS))}) N={N} "
             f"D={D} fp16, right-down causal (sparse_mode 3), on {spec.name}, {mode} mode (simulated in {wall:.1f} s "
             "wall)",
             f"  tiling: s1Base={til.s1BaseSize} s2Base={til.s2BaseNratioSize}, {til.blockDim} AI Cores, {til.tasks} "
             f"tiles, workspace {til.workspaceSize / 2**20:.1f} MiB"]
    if mode == "full":
        ref = fa_var_len_reference(res.extra["problem"], q, k, v, atten_mask=mask)
        err = np.abs(res.attention_out.astype(np.float64) - ref["attention_out"]).max()
        lines.append(f"  attention_out vs the float64 formula: max |diff| = {err:.2e}")
    return DemoRun(res, f"FlashAttentionVarLenScore T{t} N{N} D{D} causal on {spec.name}", lines)
