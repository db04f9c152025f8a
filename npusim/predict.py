"""``npusim predict OP KEY=VALUE...``: estimate mode from the command line, with the timeout verdict.

Operators and their shape keys (defaults in brackets):
  pfa   PromptFlashAttentionV2: B N S D [N_kv=N] [S_kv=S] [dtype=fp16] [sparse_mode=0: 0 = full, 2 = causal]
  fa    FlashAttentionVarLenScore: T N D [B=1 equal batches] [N_kv=N] [dtype=fp16] [sparse_mode=0]
  spkc  ScatterPaKvCache: tokens heads D [block_size=128] [blocks=tokens/block_size] [dtype=fp16] [cache_mode=Norm]
Common keys: chip=Ascend910B2, timeout=SECONDS (as aclrtSetOpExecuteTimeOut; 0 = the chip's maximum).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from npusim.chip import chip as get_chip
from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.memory.gm import TensorSpec
from npusim.timeouts import describe_limit, op_execute_timeout

DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32, "int8": np.int8}


def parse(params: list[str]) -> dict:
    out = {}
    for p in params:
        key, sep, value = p.partition("=")
        if not sep:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"predict: parameters are KEY=VALUE, got {p!r}")
        out[key.strip()] = value.strip()
    return out


def _int(kv: dict, key: str, default=None) -> int:
    if key not in kv:
        if default is None:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"predict: {key}= is required")
        return default
    try:
        return int(kv.pop(key))
    except ValueError:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"predict: {key} must be an integer") from None


def _dtype(kv: dict):
    name = kv.pop("dtype", "fp16")
    if name not in DTYPES:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"predict: dtype must be one of {', '.join(DTYPES)}")
    return DTYPES[name]


def predict(op: str, params: list[str]):
    """Run *op* in estimate mode for the shape in *params*; return the OpResult."""
    kv = parse(params)
    spec = op_execute_timeout(get_chip(kv.pop("chip", "Ascend910B2")), kv.pop("timeout", 0))
    if op == "pfa":
        from ops import prompt_flash_attention_v2
        from ops.common.masks import compressed_causal_mask

        b, n, s, d = (_int(kv, k) for k in ("B", "N", "S", "D"))
        nkv, s2, sparse = _int(kv, "N_kv", n), _int(kv, "S_kv", s), _int(kv, "sparse_mode", 0)
        dt = _dtype(kv)
        extra = {"atten_mask": compressed_causal_mask().astype(bool)} if sparse in (2, 3, 4) else \
            {"pre_tokens": 2147483647, "next_tokens": 2147483647}
        _no_leftovers(kv)
        return prompt_flash_attention_v2(TensorSpec((b, n, s, d), dt), TensorSpec((b, nkv, s2, d), dt),
                                         TensorSpec((b, nkv, s2, d), dt), num_heads=n, num_key_value_heads=nkv,
                                         input_layout="BNSD", scale_value=1 / np.sqrt(d), sparse_mode=sparse,
                                         chip=spec, mode="estimate", **extra)
    if op == "fa":
        from ops import flash_attention_var_len_score
        from ops.common.masks import compressed_causal_mask

        t, n, d = (_int(kv, k) for k in ("T", "N", "D"))
        b, nkv, sparse = _int(kv, "B", 1), _int(kv, "N_kv", n), _int(kv, "sparse_mode", 0)
        dt = _dtype(kv)
        _no_leftovers(kv)
        cum = list(np.linspace(0, t, b + 1).astype(np.int64)[1:])
        extra = {"atten_mask": compressed_causal_mask().astype(bool)} if sparse in (2, 3) else {}
        return flash_attention_var_len_score(TensorSpec((t, n, d), dt), TensorSpec((t, nkv, d), dt),
                                             TensorSpec((t, nkv, d), dt), actual_seq_qlen=cum, actual_seq_kvlen=cum,
                                             head_num=n, scale_value=1 / np.sqrt(d), sparse_mode=sparse,
                                             input_layout="TND", chip=spec, mode="estimate", **extra)
    if op == "spkc":
        from ops import scatter_pa_kv_cache

        tokens, heads, d = (_int(kv, k) for k in ("tokens", "heads", "D"))
        block = _int(kv, "block_size", 128)
        blocks = _int(kv, "blocks", -(-tokens // block))
        dt = _dtype(kv)
        cache_mode = kv.pop("cache_mode", "Norm")
        _no_leftovers(kv)
        key = TensorSpec((tokens, heads, d), dt)
        if cache_mode == "PA_NZ":
            last = 32 // np.dtype(dt).itemsize
            cache = TensorSpec((blocks, heads * d // last, block, last), dt)
        else:
            cache = TensorSpec((blocks, block, heads, d), dt)
        slots = np.arange(tokens, dtype=np.int32)
        return scatter_pa_kv_cache(key, cache, slots, key, cache, cache_mode=cache_mode, chip=spec, mode="estimate")
    raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"predict: unknown operator {op!r} (pfa, fa, spkc)")


def _no_leftovers(kv: dict) -> None:
    if kv:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"predict: unknown parameter(s) {', '.join(sorted(kv))}")


def report(res) -> str:
    """The text `npusim predict` prints."""
    t = res.timeout
    lines = [f"predicted time: {res.time_us:,.1f} us = {t.predicted_s:.4g} s ({res.cycles:,} cycles, launch included)",
             f"AI Core timeout: {describe_limit(t.limit_s)} -> {'EXCEEDED' if t.exceeded else 'within the limit'}",
             f"advice: {t.advice}"]
    est = res.extra.get("estimate")
    if est is not None and est.classes:
        lines.append("tiles: " + ", ".join(f"{k} {v[0]:,}" for k, v in est.classes.items()))
    if res.tiling is not None:
        lines.append(f"tiling: {res.tiling.asdict()}")
    return "\n".join(lines)
