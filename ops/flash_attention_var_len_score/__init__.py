"""FlashAttentionVarLenScore: training forward attention over TND variable-length sequences (seed 001).

Modules: ``contract`` (the aclnnFlashAttentionVarLenScore contract as data: dtypes, products, limits,
sparse modes and every rule with its status code), ``validate`` (walks the contract and returns a
frozen :class:`~ops.flash_attention_var_len_score.validate.FaVarLenProblem` for tiling, kernel and
golden). Tiling, kernel and golden come later.
"""
