"""The CANN transformer operators, run on the npusim chip model (API.md).

Each operator lives in its own package (contract, validate, tiling, kernel, golden, api) and is
exported here once it is complete.
"""
from npusim.errors import AclnnError
from ops.flash_attention_var_len_score.api import flash_attention_var_len_score
from ops.prompt_flash_attention_v2.api import prompt_flash_attention_v2
from ops.scatter_pa_kv_cache.api import scatter_pa_kv_cache
from ops.sparse_flash_attention_grad.api import sparse_flash_attention_grad

__all__ = ["AclnnError", "flash_attention_var_len_score", "prompt_flash_attention_v2", "scatter_pa_kv_cache",
           "sparse_flash_attention_grad"]
