"""SparseFlashAttentionGrad: backward of top-k block sparse MLA attention (seed 003, MQA, D = 512 + rope 64).

Modules: ``contract`` (the contract as data), ``validate`` (-> SfagProblem), ``reference`` (float64
autograd-free reference), ``golden`` (the independent dataflow model), ``tiling`` (core split,
chunks, workspace), ``kernel`` (the mix kernel: gather, cube, softmax grad, scatter-add, post),
``api`` (the public function and the aclnn facade). Design: docs/sfag.md.
"""
