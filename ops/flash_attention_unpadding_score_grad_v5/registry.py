"""FlashAttentionUnpaddingScoreGradV5 in the operator registry (npusim.registry): ``npusim predict fag T=... N=... D=...``."""
from __future__ import annotations

import numpy as np

from npusim.memory.gm import TensorSpec
from npusim.registry import OperatorEntry, ProblemParam
from ops.common.masks import compressed_causal_mask
from ops.common.problem_params import dtype_of, dtype_param, sparse_mode_param, token_params
from ops.flash_attention_unpadding_score_grad_v5.space import tiling_space
from ops.flash_attention_unpadding_score_grad_v5.api import flash_attention_unpadding_score_grad_v5
from ops.flash_attention_unpadding_score_grad_v5.contract import DEFAULTS

PARAMS = (
    ProblemParam("T", int, help="total tokens of the packed batch"),
    ProblemParam("N", int, help="query heads"),
    ProblemParam("D", int, help="head dim"),
    ProblemParam("B", int, 1, help="batches (equal lengths T/B)"),
    ProblemParam("N_kv", int, 0, help="key/value heads (0: N)"),
    dtype_param(("fp16", "bf16")),
    sparse_mode_param(),
    *token_params(DEFAULTS["pre_tokens"], DEFAULTS["next_tokens"]),
    ProblemParam("deterministic", int, 0, (0, 1), "1: aclrtCtxSetSysParamOpt deterministic computation"),
)


def build_call(p: dict) -> tuple[tuple, dict]:
    """Data-less TND tensors split into B equal batches; modes 2-4 get the compressed mask."""
    t, n, d, b, dt = p["T"], p["N"], p["D"], p["B"], dtype_of(p)
    nkv = p["N_kv"] or n
    cum = [int(x) for x in np.linspace(0, t, b + 1).astype(np.int64)[1:]]
    q, dy, out = (TensorSpec((t, n, d), dt) for _ in range(3))
    k, v = (TensorSpec((t, nkv, d), dt) for _ in range(2))
    stats = {name: TensorSpec((t, n, 8), np.float32) for name in ("softmax_max", "softmax_sum")}
    kwargs = dict(attention_in=out, actual_seq_qlen=cum, actual_seq_kvlen=cum, head_num=n,
                  scale_value=float(1 / np.sqrt(d)), sparse_mode=p["sparse_mode"], pre_tokens=p["pre_tokens"],
                  next_tokens=p["next_tokens"], input_layout="TND", deterministic=bool(p["deterministic"]), **stats)
    if p["sparse_mode"] in (2, 3, 4):
        kwargs["atten_mask"] = compressed_causal_mask().astype(bool)
    return (q, None, k, None, v, dy), kwargs


ENTRY = OperatorEntry(name="fag", title="FlashAttentionUnpaddingScoreGradV5",
                      api=flash_attention_unpadding_score_grad_v5, params=PARAMS, build_call=build_call,
                      tiling_space=tiling_space)
