"""FlashAttentionVarLenScore in the operator registry (npusim.registry): ``npusim predict fa T=... N=... D=...``."""
from __future__ import annotations

import numpy as np

from npusim.memory.gm import TensorSpec
from npusim.registry import DemoCase, OperatorEntry, ProblemParam
from ops.common.masks import compressed_causal_mask
from ops.common.problem_params import dtype_of, dtype_param, sparse_mode_param, token_params
from ops.flash_attention_var_len_score.api import flash_attention_var_len_score
from ops.flash_attention_var_len_score.contract import DEFAULTS
from ops.flash_attention_var_len_score.demo import demo_chips, run_demo
from ops.flash_attention_var_len_score.space import tiling_space

PARAMS = (
    ProblemParam("T", int, help="total tokens of the packed batch"),
    ProblemParam("N", int, help="query heads"),
    ProblemParam("D", int, help="head dim"),
    ProblemParam("B", int, 1, help="batches (equal lengths T/B)"),
    ProblemParam("N_kv", int, 0, help="key/value heads (0: N)"),
    dtype_param(("fp16", "bf16", "fp32")),
    sparse_mode_param(),
    *token_params(DEFAULTS["pre_tokens"], DEFAULTS["next_tokens"]),
)


def build_call(p: dict) -> tuple[tuple, dict]:
    """Data-less TND query/key/value split into B equal batches; modes 2-4 get the compressed mask."""
    t, n, d, b, dt = p["T"], p["N"], p["D"], p["B"], dtype_of(p)
    nkv = p["N_kv"] or n
    cum = [int(x) for x in np.linspace(0, t, b + 1).astype(np.int64)[1:]]
    q = TensorSpec((t, n, d), dt)
    k, v = (TensorSpec((t, nkv, d), dt) for _ in range(2))
    kwargs = dict(actual_seq_qlen=cum, actual_seq_kvlen=cum, head_num=n, scale_value=float(1 / np.sqrt(d)),
                  sparse_mode=p["sparse_mode"], pre_tokens=p["pre_tokens"], next_tokens=p["next_tokens"],
                  input_layout="TND")
    if p["sparse_mode"] in (2, 3, 4):
        kwargs["atten_mask"] = compressed_causal_mask().astype(bool)
    return (q, k, v), kwargs


DEMO = DemoCase(run=run_demo, chips=demo_chips, title="varlen FlashAttentionVarLenScore, sequences 1536 + 512, "
                                                      "N=4 D=128 fp16, causal")

ENTRY = OperatorEntry(name="fa", title="FlashAttentionVarLenScore", api=flash_attention_var_len_score,
                      params=PARAMS, build_call=build_call, tiling_space=tiling_space, demo=DEMO)
