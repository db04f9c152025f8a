"""The PromptFlashAttentionV2 kernel launch: GM tensors laid out for the kernel, and the launch itself.

Its own module because both api.py (full and timing runs) and estimate.py (sampled timing runs) launch
the kernel; neither needs the other to do it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.launch import GmArg, launch
from npusim.memory.gm import TensorSpec
from ops.prompt_flash_attention_v2.contract import MaskKind, ScaleMode
from ops.prompt_flash_attention_v2.kernel import PfaKernelArgs, prompt_flash_attention_v2 as pfa_kernel
from ops.prompt_flash_attention_v2.kernel_combined import prompt_flash_attention_v2_combined as pfa_combined_kernel
from ops.prompt_flash_attention_v2.tiling import SYSTEM_WORKSPACE_BYTES

_BSH_LIKE = ("BSH", "BSND")


OPERATOR = "PromptFlashAttentionV2"

def _has_data(x) -> bool:
    return isinstance(x, np.ndarray)


def _strides(layout: str, b: int, n: int, s: int, d: int) -> tuple[int, int, int]:
    """(batch stride, head stride, row pitch) in elements of a [B, N, S, D] tensor stored in *layout*."""
    if layout in _BSH_LIKE:
        return s * n * d, d, n * d
    return n * s * d, s * d, d


def _pad_d(x, layout: str, n: int, d: int, dp: int, full: bool):
    """The tensor with D zero-padded to *dp* (the aclnn layer's padding), same layout."""
    if d == dp:
        return x if full else TensorSpec(x.shape, x.dtype)
    shape = tuple(x.shape)
    if layout in _BSH_LIKE:
        b, s = shape[0], shape[1]
        new = (b, s, n * dp) if len(shape) == 3 else (b, s, n, dp)
        if not full:
            return TensorSpec(new, x.dtype)
        y = np.zeros((b, s, n, dp), x.dtype)
        y[..., :d] = np.asarray(x).reshape(b, s, n, d)
        return y.reshape(new)
    new = shape[:-1] + (dp,)
    if not full:
        return TensorSpec(new, x.dtype)
    y = np.zeros(new, x.dtype)
    y[..., :d] = x
    return y


def _scalar(x, default):
    """A per-tensor quantisation parameter as the kernel takes it (uint64 words stay integers); an absent
    or empty one (aclnn: an empty optional tensor is not given) is *default*."""
    if x is None or not _has_data(x) or x.size == 0:
        return default
    v = np.asarray(x).reshape(-1)[0]
    if v.dtype == np.uint64:
        return int(v)
    return float(np.float32(v))


def _per_channel(x, n: int, d: int, dp: int):
    """quant_scale2 / offset2 per channel as a flat fp32 [N * Dp] GM array (None stays None)."""
    if x is None:
        return None
    if not _has_data(x):
        return TensorSpec((n * dp,), np.float32)
    v = np.asarray(x).astype(np.float32).reshape(n, d)
    out = np.zeros((n, dp), np.float32)
    out[:, :d] = v
    return out.reshape(-1)


@dataclass
class KernelInputs:
    """GM tensors and kernel constants of one call, everything but the tiling-sized workspace."""

    q: object
    k: object
    v: object
    mask: object
    q2: object
    off2: object
    out: object
    args: PfaKernelArgs


def kernel_inputs(problem, mode, query, key, value, atten_mask, deq_scale1=None, quant_scale1=None,
                  deq_scale2=None, quant_scale2=None, quant_offset2=None) -> KernelInputs:
    """Pad D, lay out strides, read the scalar quantisation parameters, allocate the zeroed output."""
    full = mode == "full"
    B, N, Nkv, S1, S2 = problem.batch, problem.num_heads, problem.num_kv_heads, problem.s1, problem.s2
    d, dp = problem.head_dim, problem.head_dim_padded
    layout, out_layout = problem.layout, problem.out_layout
    q = _pad_d(query, layout, N, d, dp, full)
    k = _pad_d(key, layout, Nkv, d, dp, full)
    v = _pad_d(value, layout, Nkv, d, dp, full)
    qb, qh, qr = _strides(layout, B, N, S1, dp)
    kb, kh, kr = _strides(layout, B, Nkv, S2, dp)
    ob, oh, orow = _strides(out_layout, B, N, S1, dp)
    out_shape = (B, S1, N * dp) if out_layout == "BSH" else ((B, S1, N, dp) if out_layout in ("BSND", "BNSD_BSND")
                                                               else (B, N, S1, dp))
    out = np.zeros(out_shape, problem.out_dtype) if full else TensorSpec(out_shape, problem.out_dtype)
    mask_kind = {MaskKind.NONE: "none", MaskKind.FULL: "full", MaskKind.COMPRESSED: "compressed"}[problem.mask_kind]
    mask_arg, mask_bs, mask_pitch = None, 0, 0
    if mask_kind != "none":
        m = atten_mask
        shape = tuple(m.shape)
        mask_pitch = shape[-1]
        mask_bs = shape[-2] * shape[-1] if (len(shape) >= 3 and shape[0] == B and B > 1) else 0
        if full and _has_data(m):
            m = np.ascontiguousarray(m)
            m = m.view(np.uint8) if m.dtype == np.bool_ else m
        else:
            m = TensorSpec(shape, np.uint8 if np.dtype(m.dtype) == np.bool_ else m.dtype)
        mask_arg = GmArg("atten_mask", m)
    per_channel = problem.quant_scale2_mode == ScaleMode.PER_CHANNEL
    q2_arg = off2_arg = None
    if per_channel:
        q2_arg = GmArg("quant_scale2", _per_channel(quant_scale2 if full else None, N, d, dp) if full else
                       TensorSpec((N * dp,), np.float32))
        if quant_offset2 is not None:
            off2_arg = GmArg("quant_offset2", _per_channel(quant_offset2, N, d, dp) if full else
                             TensorSpec((N * dp,), np.float32))
    p_dtype = np.dtype(np.int8) if problem.dtype == np.int8 else problem.dtype
    args = PfaKernelArgs(
        qBatchStride=qb, qHeadStride=qh, qRowPitch=qr, kvBatchStride=kb, kvHeadStride=kh, kvRowPitch=kr,
        outBatchStride=ob, outHeadStride=oh, outRowPitch=orow, group=problem.group,
        actKv=tuple(int(x) for x in problem.actual_seq_lengths_kv), preLU=tuple(int(x) for x in problem.pre_tokens_lu),
        nextLU=tuple(int(x) for x in problem.next_tokens_lu), sparseMode=problem.sparse_mode, maskKind=mask_kind,
        maskBatchStride=mask_bs, maskRowPitch=mask_pitch, inDtype=problem.dtype,
        softmaxDtype=problem.softmax_dtype, pDtype=p_dtype, outDtype=problem.out_dtype,
        deqScale1=_scalar(deq_scale1, 1.0), quantScale1=_scalar(quant_scale1, 1.0),
        deqScale2=_scalar(deq_scale2, 1.0),
        quantScale2=_scalar(quant_scale2, 1.0) if not per_channel else 1.0,
        quantOffset2=_scalar(quant_offset2, 0.0) if not per_channel else 0.0, quantPerChannel=per_channel)
    return KernelInputs(GmArg("query", q), GmArg("key", k), GmArg("value", v), mask_arg, q2_arg, off2_arg,
                        GmArg("attention_out", out), args)


def launch_kernel(inputs: KernelInputs, til, spec, mode: str, l2_warm=None):
    """Run the mix kernel (kernel_combined.py on 310P) for *til* (a PfaTilingData, possibly a subset of the
    work) on *spec*; *l2_warm* as npusim.launch.launch (estimate mode's samples)."""
    ws_bytes = til.workspaceSize - SYSTEM_WORKSPACE_BYTES
    ws = np.zeros(ws_bytes, np.uint8) if mode == "full" else TensorSpec((ws_bytes,), np.uint8)
    gm_args = (inputs.q, inputs.k, inputs.v, inputs.mask, inputs.q2, inputs.off2, inputs.out,
               GmArg("workspace", ws), til, inputs.args)
    # split chips (910B/A3): AIC + 2 AIV per block; combined chips (310P): one core per block (kernel_combined.py)
    kernel = pfa_kernel if spec.core_split else pfa_combined_kernel
    return launch(kernel, gm_args, block_dim=til.blockDim, chip=spec, mode=mode, kernel_type="mix",
                  meta={"operator": OPERATOR, "tiling": _tiling_meta(til)}, l2_warm=l2_warm)


def _tiling_meta(til) -> dict:
    keep = ("sOuterFactor", "sInnerFactor", "softmaxSOuterFactor", "blockDim", "workspaceSize", "ubBytes", "l1Bytes")
    return {k: getattr(til, k) for k in keep} | {"items": til.items, "tasks": til.tasks}
