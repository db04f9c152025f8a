"""ScatterPaKvCache in the operator registry (npusim.registry): ``npusim predict spkc tokens=... heads=... D=...``."""
from __future__ import annotations

import numpy as np

from npusim.memory.gm import TensorSpec
from npusim.registry import OperatorEntry, ProblemParam
from ops.common.problem_params import dtype_of, dtype_param
from ops.scatter_pa_kv_cache.api import scatter_pa_kv_cache
from ops.scatter_pa_kv_cache.contract import CACHE_MODES
from ops.scatter_pa_kv_cache.space import tiling_space

PARAMS = (
    ProblemParam("tokens", int, help="tokens written"),
    ProblemParam("heads", int, help="key/value heads"),
    ProblemParam("D", int, help="head size"),
    ProblemParam("block_size", int, 128, help="cache block size in tokens"),
    ProblemParam("blocks", int, 0, help="cache blocks (0: just enough for the tokens)"),
    dtype_param(("fp16", "bf16", "int8")),
    ProblemParam("cache_mode", str, "Norm", CACHE_MODES, "cache layout"),
)


def build_call(p: dict) -> tuple[tuple, dict]:
    """Key and value of *tokens* tokens scattered to slots 0..tokens-1 of data-less caches."""
    tokens, heads, d, block, dt = p["tokens"], p["heads"], p["D"], p["block_size"], dtype_of(p)
    blocks = p["blocks"] or -(-tokens // block)
    key = TensorSpec((tokens, heads, d), dt)
    if p["cache_mode"] == "PA_NZ":
        last = 32 // dt.itemsize
        cache = TensorSpec((blocks, heads * d // last, block, last), dt)
    else:
        cache = TensorSpec((blocks, block, heads, d), dt)
    slots = np.arange(tokens, dtype=np.int32)
    return (key, cache, slots, key, cache), dict(cache_mode=p["cache_mode"])


ENTRY = OperatorEntry(name="spkc", title="ScatterPaKvCache", api=scatter_pa_kv_cache, params=PARAMS,
                      build_call=build_call, tiling_space=tiling_space)
