"""PromptFlashAttentionV2: full-inference flash attention (seed 000, aclnnPromptFlashAttentionV2).

Modules: ``contract`` (the operator's contract as data: dtypes per product, quant combinations, mask
forms, limits, every rule with its status code and source) and ``validate`` (walks the contract and
returns a :class:`~ops.prompt_flash_attention_v2.validate.PfaProblem`). The kernel, tiling and golden
come in later modules; sparse-mode semantics live in ``ops.common.masks``, layouts in
``ops.common.layouts``.
"""
