"""The FlashAttentionVarLenScore kernel launch: the call's GM arguments and the launch itself.

Its own module because both api.py (full and timing runs) and estimate.py (sampled timing runs) launch
the kernel; neither needs the other to do it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.launch import GmArg, launch
from npusim.memory.gm import TensorSpec
from ops.flash_attention_var_len_score.kernel import FaVarLenKernelArgs
from ops.flash_attention_var_len_score.kernel import flash_attention_var_len_score as fa_kernel
from ops.flash_attention_var_len_score.tiling import SYSTEM_WORKSPACE_BYTES

_INT32_MAX = 2147483647


def _data(x, full: bool, dtype=None):
    """The GM array of an input: its data (full mode, bool viewed as uint8) or a TensorSpec."""
    dt = np.dtype(dtype if dtype is not None else x.dtype)
    if dt == np.bool_:
        dt = np.dtype(np.uint8)
    if full and isinstance(x, np.ndarray):
        arr = np.ascontiguousarray(x)
        return arr.view(np.uint8) if arr.dtype == np.bool_ else arr
    return TensorSpec(tuple(x.shape), dt)


def _clip32(v) -> int:
    return int(np.clip(int(v), -_INT32_MAX, _INT32_MAX))


def _args(problem, softmax_layout: str) -> FaVarLenKernelArgs:
    sq, skv = problem.seq_q.astype(np.int64), problem.seq_kv.astype(np.int64)
    cu_ss = np.concatenate(([0], np.cumsum(sq * skv)[:-1]))
    pse_b = problem.pse_shape[0] if problem.pse_form == "alibi" else 1
    prefix = tuple(int(x) for x in problem.prefix_n) if problem.prefix_n is not None else (0,) * problem.B
    return FaVarLenKernelArgs(
        cuQ=tuple(int(x) for x in problem.cu_seq_q[:-1]), cuKv=tuple(int(x) for x in problem.cu_seq_kv[:-1]),
        seqQ=tuple(int(x) for x in sq), seqKv=tuple(int(x) for x in skv), cuSS=tuple(int(x) for x in cu_ss),
        preLU=tuple(_clip32(x) for x in problem.pre_tokens_lu),
        nextLU=tuple(_clip32(x) for x in problem.next_tokens_lu),
        prefixN=prefix, sparseMode=problem.sparse_mode, maskForm=problem.mask_form,
        maskCols=problem.atten_mask_shape[1] if problem.atten_mask_shape else 0, pseForm=problem.pse_form,
        pseB=int(pse_b), pseS2=problem.max_skv, dropout=problem.dropout, dropBits=problem.drop_mask_bits,
        invalidRowCalc=problem.invalid_row_calc, softmaxLayout=softmax_layout, inDtype=problem.dtype)


@dataclass
class KernelInputs:
    """GM tensors and kernel constants of one call, everything but the tiling-sized workspace."""

    gm: tuple  # GmArg or None: query, key, value, real_shift, drop_mask, atten_mask
    smax: GmArg
    ssum: GmArg
    out: GmArg
    args: FaVarLenKernelArgs


def kernel_inputs(problem, mode: str, inputs: tuple, softmax_layout: str, args=None) -> KernelInputs:
    """The call's GM arguments (data in full mode, TensorSpecs otherwise) and zeroed outputs."""
    full = mode == "full"
    t1, n1, d = problem.out_shape
    outs = [np.zeros(shape, dt) if full else TensorSpec(shape, dt)
            for shape, dt in (((t1, n1, d), problem.dtype), ((t1, n1, 8), np.float32), ((t1, n1, 8), np.float32))]
    names = ("query", "key", "value", "real_shift", "drop_mask", "atten_mask")
    gm = tuple(GmArg(name, _data(x, full)) if x is not None else None for name, x in zip(names, inputs))
    return KernelInputs(gm, GmArg("softmax_max", outs[1]), GmArg("softmax_sum", outs[2]),
                        GmArg("attention_out", outs[0]), args or _args(problem, softmax_layout))


def launch_kernel(inputs: KernelInputs, til, spec, mode: str, l2_warm=None):
    """Run the mix kernel for *til* (a FaVarLenTilingData, possibly a subset of the work) on *spec*;
    *l2_warm* as npusim.launch.launch (estimate mode's samples)."""
    ws_bytes = til.workspaceSize - SYSTEM_WORKSPACE_BYTES
    ws = np.zeros(ws_bytes, np.uint8) if mode == "full" else TensorSpec((ws_bytes,), np.uint8)
    gm_args = (*inputs.gm, inputs.smax, inputs.ssum, inputs.out, GmArg("workspace", ws), til, inputs.args)
    meta = {"operator": "FlashAttentionVarLenScore", "tiling": _tiling_meta(til)}
    return launch(fa_kernel, gm_args, block_dim=til.blockDim, chip=spec, mode=mode, kernel_type="mix", meta=meta,
                  l2_warm=l2_warm)


def _tiling_meta(til) -> dict:
    keep = ("s1BaseSize", "s2BaseNratioSize", "vec1Elems", "sparseType", "blockDim", "workspaceSize", "ubBytes",
            "l1Bytes")
    return {k: getattr(til, k) for k in keep} | {"items": til.items, "tasks": til.tasks}
