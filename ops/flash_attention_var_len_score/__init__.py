"""FlashAttentionVarLenScore: training forward attention over TND variable-length sequences (seed 001).

Modules: ``contract`` (the contract as data), ``validate`` (-> FaVarLenProblem), ``tiling`` (base sizes,
core split, workspace), ``kernel`` (the cube-master mix kernel), ``api`` (the public function and the
aclnn facade), ``golden`` (the independent dataflow model). Design: docs/fa_varlen.md.
"""
