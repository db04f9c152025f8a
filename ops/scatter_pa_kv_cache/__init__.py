"""ScatterPaKvCache: write new key/value tokens into a paged KV cache (seed 004, aclnnScatterPaKvCache).

Modules: ``contract`` (the operator's contract as data), ``validate`` (walks the contract and returns a
:class:`~ops.scatter_pa_kv_cache.validate.ScatterPlan`), ``golden`` (independent loop reference).
"""
