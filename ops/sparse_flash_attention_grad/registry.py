"""SparseFlashAttentionGrad in the operator registry (npusim.registry): ``npusim predict sfag S1=... S2=... N1=...``.

The command line describes the indices by a count: every query token selects the same ``blocks`` blocks
(spread evenly over S2, then -1), given as a zero-stride (broadcast) index array, so huge shapes cost no
index memory.
"""
from __future__ import annotations

import numpy as np

from npusim.memory.gm import TensorSpec
from npusim.registry import OperatorEntry, ProblemParam
from ops.common.problem_params import dtype_of, dtype_param
from ops.sparse_flash_attention_grad.space import tiling_space
from ops.sparse_flash_attention_grad.api import sparse_flash_attention_grad
from ops.sparse_flash_attention_grad.contract import BLOCK_SIZES, N1_VALUES, SELECTED_BLOCK_COUNT

PARAMS = (
    ProblemParam("S1", int, help="query tokens per batch"),
    ProblemParam("S2", int, help="key/value tokens per batch"),
    ProblemParam("N1", int, 64, N1_VALUES, "query heads"),
    ProblemParam("B", int, 1, help="batches"),
    ProblemParam("block_size", int, 64, BLOCK_SIZES, "sparse_block_size: key rows per selected block"),
    ProblemParam("blocks", int, 32, None, "selected blocks per query token (<= 2048, capped at S2/block_size)"),
    ProblemParam("rope", int, 1, (0, 1), "1: query_rope/key_rope (Dr = 64) given"),
    ProblemParam("sparse_mode", int, 0, {"default": 0, "right_down_causal": 3}, "0 or 3 (right-down causal)"),
    ProblemParam("deterministic", int, 0, (0, 1), "1: the ordered variant"),
    dtype_param(("fp16", "bf16")),
)


def build_call(p: dict) -> tuple[tuple, dict]:
    """Data-less BSND tensors and a broadcast index array (every token: the same evenly spread blocks)."""
    b, s1, s2, n1, bs, dt = p["B"], p["S1"], p["S2"], p["N1"], p["block_size"], dtype_of(p)
    nblk = -(-s2 // bs)
    sel = max(0, min(p["blocks"], nblk, SELECTED_BLOCK_COUNT))
    row = np.full(SELECTED_BLOCK_COUNT, -1, np.int64)
    row[:sel] = np.linspace(0, nblk - 1, sel).astype(np.int64) if sel else []
    idx = np.broadcast_to(row, (b, s1, 1, SELECTED_BLOCK_COUNT))
    q = TensorSpec((b, s1, n1, 512), dt)
    kv = TensorSpec((b, s2, 1, 512), dt)
    sm = TensorSpec((b, 1, s1, n1), np.float32)
    rope = dict(query_rope=TensorSpec((b, s1, n1, 64), dt), key_rope=TensorSpec((b, s2, 1, 64), dt)) \
        if p["rope"] else {}
    kwargs = dict(scale_value=float(1 / np.sqrt(576 if p["rope"] else 512)), sparse_block_size=bs, layout="BSND",
                  sparse_mode=p["sparse_mode"], deterministic=bool(p["deterministic"]), **rope)
    return (q, kv, kv, idx, q, q, sm, sm), kwargs


ENTRY = OperatorEntry(name="sfag", title="SparseFlashAttentionGrad", api=sparse_flash_attention_grad, params=PARAMS,
                      build_call=build_call,
                      tiling_space=tiling_space)
