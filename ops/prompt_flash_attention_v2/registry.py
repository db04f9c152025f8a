"""PromptFlashAttentionV2 in the operator registry (npusim.registry): ``npusim predict pfa B=1 N=8 ...``."""
from __future__ import annotations

import numpy as np

from npusim.memory.gm import TensorSpec
from npusim.registry import DemoCase, OperatorEntry, ProblemParam
from ops.common.masks import compressed_causal_mask
from ops.common.problem_params import dtype_of, sparse_mode_param, token_params
from ops.prompt_flash_attention_v2.api import prompt_flash_attention_v2
from ops.prompt_flash_attention_v2.demo import run_demo
from ops.prompt_flash_attention_v2.space import tiling_space

LAYOUTS = ("BNSD", "BSND", "BSH")

PARAMS = (
    ProblemParam("B", int, help="batch"),
    ProblemParam("N", int, help="query heads"),
    ProblemParam("S", int, help="query sequence length"),
    ProblemParam("D", int, help="head dim"),
    ProblemParam("N_kv", int, 0, help="key/value heads (0: N)"),
    ProblemParam("S_kv", int, 0, help="key/value sequence length (0: S)"),
    ProblemParam("dtype", str, "fp16", ("fp16", "bf16", "int8"),
                 "data type of the inputs (int8: per-tensor quantisation scales 1.0, int8 output)"),
    sparse_mode_param(),
    *token_params(),
    ProblemParam("layout", str, "BNSD", LAYOUTS, "input layout"),
)


def _shape(layout: str, b: int, n: int, s: int, d: int) -> tuple:
    return {"BNSD": (b, n, s, d), "BSND": (b, s, n, d), "BSH": (b, s, n * d)}[layout]


def build_call(p: dict) -> tuple[tuple, dict]:
    """Data-less query/key/value of the problem; modes 2-4 get the 2048x2048 compressed mask."""
    b, n, s, d, layout, dt = p["B"], p["N"], p["S"], p["D"], p["layout"], dtype_of(p)
    nkv, skv = p["N_kv"] or n, p["S_kv"] or s
    q = TensorSpec(_shape(layout, b, n, s, d), dt)
    k, v = (TensorSpec(_shape(layout, b, nkv, skv, d), dt) for _ in range(2))
    kwargs = dict(num_heads=n, num_key_value_heads=nkv, input_layout=layout, scale_value=float(1 / np.sqrt(d)),
                  sparse_mode=p["sparse_mode"], pre_tokens=p["pre_tokens"], next_tokens=p["next_tokens"])
    if p["sparse_mode"] in (2, 3, 4):
        kwargs["atten_mask"] = compressed_causal_mask().astype(bool)
    if dt == np.int8:  # the int8 path: per-tensor scales (their values do not change the timing), int8 output
        one = np.ones(1, np.float32)
        kwargs.update(deq_scale1=one, quant_scale1=one, deq_scale2=one, quant_scale2=one)
    return (q, k, v), kwargs


DEMO = DemoCase(run=run_demo, title="causal PromptFlashAttentionV2 B=1 N=4 S=2048 D=128 fp16")

ENTRY = OperatorEntry(name="pfa", title="PromptFlashAttentionV2", api=prompt_flash_attention_v2, params=PARAMS,
                      build_call=build_call, tiling_space=tiling_space, demo=DEMO)
