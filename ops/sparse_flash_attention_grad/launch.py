"""The SparseFlashAttentionGrad kernel launch: the call's GM arguments and the launch itself.

Its own module because both api.py (full and timing runs) and estimate.py (probe launches) launch the
kernel; neither needs the other to do it.
"""
from __future__ import annotations

import numpy as np

from npusim.launch import GmArg, launch
from npusim.memory.gm import TensorSpec
from ops.sparse_flash_attention_grad.kernel import SfagKernelArgs
from ops.sparse_flash_attention_grad.kernel import (
    sparse_flash_attention_grad as sfag_kernel,
)
from ops.sparse_flash_attention_grad.tiling import SYSTEM_WORKSPACE_BYTES

OUTPUT_NAMES = ("d_query", "d_key", "d_value", "d_query_rope", "d_key_rope")


def _data(x, full: bool):
    if full and isinstance(x, np.ndarray):
        return np.ascontiguousarray(x)
    return TensorSpec(tuple(x.shape), np.dtype(x.dtype))


def kernel_args(problem, counts) -> SfagKernelArgs:
    return SfagKernelArgs(tokenBatch=problem.batch_of_tokens(), cuQ=problem.cu_q, cuKv=problem.cu_kv,
                          seqQ=problem.seq_q, seqKv=problem.seq_kv, indices=problem.indices, slots=counts,
                          inDtype=problem.dtype)


def zero_outputs(problem, full: bool) -> dict:
    """Zeroed output arrays (full mode) or TensorSpecs, in the input shapes and dtype."""
    shapes = {"d_query": problem.q_shape, "d_key": problem.k_shape, "d_value": problem.k_shape,
              "d_query_rope": problem.q_rope_shape, "d_key_rope": problem.k_rope_shape}
    return {n: (np.zeros(s, problem.dtype) if full else TensorSpec(s, problem.dtype))
            for n, s in shapes.items() if s is not None}


def launch_kernel(problem, til, spec, mode: str, inputs: tuple, counts, l2_warm=None, **options):
    """Run the mix kernel; returns (LaunchResult, outputs dict of GM arrays). *options* go to npusim.launch
    (estimate probes ask for ``trace="full"`` whatever the call's trace level)."""
    full = mode == "full"
    outs = zero_outputs(problem, full)
    names = ("query", "key", "value", "d_out", "out", "softmax_max", "softmax_sum", "query_rope", "key_rope")
    gm = [GmArg(n, _data(x, full)) if x is not None else None for n, x in zip(names, inputs)]
    gm_out = [GmArg(n, outs[n]) if n in outs else None for n in OUTPUT_NAMES]
    ws_bytes = til.workspaceSize - SYSTEM_WORKSPACE_BYTES
    ws = np.zeros(ws_bytes, np.uint8) if full else TensorSpec((ws_bytes,), np.uint8)
    meta = {"operator": "SparseFlashAttentionGrad", "tiling": {k: v for k, v in til.asdict().items()}}
    res = launch(sfag_kernel, (*gm, *gm_out, GmArg("workspace", ws), til, kernel_args(problem, counts)),
                 block_dim=til.blockDim, chip=spec, mode=mode, kernel_type="mix", meta=meta, l2_warm=l2_warm, **options)
    return res, outs
