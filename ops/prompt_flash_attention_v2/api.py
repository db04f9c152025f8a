"""``ops.prompt_flash_attention_v2`` and its aclnn facade: validate, tile, launch the kernel, return an OpResult.

The host side of the operator: it pads D the way the aclnn layer does, computes the layout strides the
kernel addresses GM with, reads the scalar quantisation parameters, allocates the workspace and the
zero-initialised output, and launches the mix kernel (kernel.py) on the chip model.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.launch import GmArg, TimeoutVerdict, launch
from npusim.memory.gm import TensorSpec
from ops.common.facade import first_stage, second_stage
from ops.common.guard import check_full_bytes, check_work, tensor_bytes
from ops.common.inputs import normalized
from ops.common.result import OpResult, check_mode, resolve_chip
from ops.prompt_flash_attention_v2.contract import INPUTS, OP_NAME, MaskKind, ScaleMode
from ops.prompt_flash_attention_v2.kernel import PfaKernelArgs, prompt_flash_attention_v2 as pfa_kernel
from ops.prompt_flash_attention_v2.kernel_combined import prompt_flash_attention_v2_combined as pfa_combined_kernel
from ops.prompt_flash_attention_v2.tiling import SYSTEM_WORKSPACE_BYTES, pfa_tiling
from ops.prompt_flash_attention_v2.validate import validate

_BSH_LIKE = ("BSH", "BSND")


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


@normalized(INPUTS)
def prepare(query, key, value, pse_shift=None, atten_mask=None, actual_seq_lengths=None, actual_seq_lengths_kv=None,
            deq_scale1=None, quant_scale1=None, deq_scale2=None, quant_scale2=None, quant_offset2=None,
            num_heads=None, scale_value=1.0, pre_tokens=2147483647, next_tokens=0, input_layout="BSH",
            num_key_value_heads=0, sparse_mode=0, inner_precise=1, *, out_dtype=None, chip="Ascend910B2",
            mode="full", tiling=None):
    """Validate and tile; return ``(run, workspace_size)`` where ``run()`` does the launch (aclnn stage 1)."""
    spec = resolve_chip(chip)
    mode = check_mode(mode)
    problem = validate(query, key, value, pse_shift, atten_mask, actual_seq_lengths, actual_seq_lengths_kv,
                       deq_scale1, quant_scale1, deq_scale2, quant_scale2, quant_offset2, num_heads, scale_value,
                       pre_tokens, next_tokens, input_layout, num_key_value_heads, sparse_mode, inner_precise,
                       out_dtype, chip_spec=spec)
    full = mode == "full"
    if problem.query_empty or problem.kv_empty:
        def run_trivial():
            out = np.zeros(problem.out_shape, problem.out_dtype) if full else None
            return _result(problem, None, None, out, 0, 0.0, None, spec, mode)
        return run_trivial, 0
    if mode == "estimate":
        return (lambda: _estimate(problem, spec, tiling, query, key, value, atten_mask, deq_scale1, quant_scale1,
                                  deq_scale2, quant_scale2, quant_offset2)), 0
    _refuse_too_large(problem, spec, tiling, mode, (query, key, value))
    til = pfa_tiling(problem, spec, tiling)
    return (lambda: _run(problem, til, spec, mode, query, key, value, atten_mask, deq_scale1, quant_scale1,
                         deq_scale2, quant_scale2, quant_offset2)), til.workspaceSize


#: Simulated instructions per score tile (about 2,700: benchmarks/pfa.py); with ops.common.guard's budget
#: full / timing mode refuse beyond 20,000 / 60,000 tiles.
INSTRUCTIONS_PER_TILE = 2700


def _refuse_too_large(problem, spec, overrides, mode: str, tensors) -> None:
    """AclnnError 161002 pointing to estimate mode when a simulation would not finish or not fit."""
    from ops.prompt_flash_attention_v2.estimate import total_tiles

    check_work(mode, total_tiles(problem, spec, overrides), INSTRUCTIONS_PER_TILE, "score tiles")
    check_full_bytes(mode, tensor_bytes(*tensors))


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
                  meta={"operator": "PromptFlashAttentionV2", "tiling": _tiling_meta(til)}, l2_warm=l2_warm)


def _run(problem, til, spec, mode, query, key, value, atten_mask, deq_scale1, quant_scale1, deq_scale2,
         quant_scale2, quant_offset2) -> OpResult:
    inputs = kernel_inputs(problem, mode, query, key, value, atten_mask, deq_scale1, quant_scale1, deq_scale2,
                           quant_scale2, quant_offset2)
    res = launch_kernel(inputs, til, spec, mode)
    result = None
    if mode == "full":
        B, N, S1 = problem.batch, problem.num_heads, problem.s1
        d, dp = problem.head_dim, problem.head_dim_padded
        result = inputs.out.array
        if dp != d:
            if problem.out_layout == "BSH":
                result = result.reshape(B, S1, N, dp)[..., :d].reshape(B, S1, N * d)
            else:
                result = result[..., :d]
            result = np.ascontiguousarray(result)
        result = result.reshape(problem.out_shape)
    return _result(problem, til, res.trace, result, res.cycles, res.time_us, res.timeout, spec, mode)


def _estimate(problem, spec, overrides, *tensors) -> OpResult:
    """Estimate mode: work counted from the tiling, the slowest core sampled in timing mode (estimate.py)."""
    from ops.prompt_flash_attention_v2.estimate import estimate_pfa, split_advice

    est, (s_outer, s_inner, sm, block_dim) = estimate_pfa(problem, spec, overrides, tensors)
    til = PfaEstimateTiling(s_outer, s_inner, sm, block_dim)
    verdict = split_advice(problem, spec, overrides, est, tensors, limit_s=spec.aicore_timeout_s)
    return OpResult(outputs=None, cycles=est.cycles, time_us=est.time_us, trace=None, tiling=til,
                    workspace_size=til.workspaceSize(problem), block_dim=block_dim, timeout=verdict,
                    mode="estimate", extra={"problem": problem, "estimate": est})


@dataclass(frozen=True)
class PfaEstimateTiling:
    """The tiling figures estimate mode decides (the item tables are counted, never built)."""

    sOuterFactor: int
    sInnerFactor: int
    softmaxSOuterFactor: int
    blockDim: int

    def asdict(self) -> dict:
        return asdict(self)

    def workspaceSize(self, problem) -> int:
        t, d = problem.softmax_dtype.itemsize, problem.head_dim_padded
        p = 1 if problem.dtype == np.int8 else problem.dtype.itemsize
        pv = 2 if problem.dtype == np.int8 else 4
        rows = 2 * self.sOuterFactor
        return SYSTEM_WORKSPACE_BYTES + self.blockDim * 2 * (rows * self.sInnerFactor * (t + p) + rows * d * pv)


def _tiling_meta(til) -> dict:
    keep = ("sOuterFactor", "sInnerFactor", "softmaxSOuterFactor", "blockDim", "workspaceSize", "ubBytes", "l1Bytes")
    return {k: getattr(til, k) for k in keep} | {"items": til.items, "tasks": til.tasks}


def _result(problem, til, trace, out, cycles, time_us, timeout, spec, mode) -> OpResult:
    if timeout is None:
        timeout = TimeoutVerdict(time_us * 1e-6, spec.aicore_timeout_s, False)
    outputs = {"attention_out": out} if mode == "full" else None
    return OpResult(outputs=outputs, cycles=int(cycles), time_us=float(time_us), trace=trace, tiling=til,
                    workspace_size=til.workspaceSize if til else 0, block_dim=til.blockDim if til else 0,
                    timeout=timeout, mode=mode, extra={"problem": problem})


def prompt_flash_attention_v2(query, key, value, pse_shift=None, atten_mask=None, actual_seq_lengths=None,
                              actual_seq_lengths_kv=None, deq_scale1=None, quant_scale1=None, deq_scale2=None,
                              quant_scale2=None, quant_offset2=None, num_heads=None, scale_value=1.0,
                              pre_tokens=2147483647, next_tokens=0, input_layout="BSH", num_key_value_heads=0,
                              sparse_mode=0, inner_precise=1, *, out_dtype=None, chip="Ascend910B2", mode="full",
                              tiling=None) -> OpResult:
    """PromptFlashAttentionV2 (seed 000) on the chip model. Arguments as the seed, in snake_case.

    Returns an OpResult with ``attention_out`` (full mode), cycles, time, trace, tiling and the timeout
    verdict. Raises AclnnError with the seed's status code for invalid input, and AclnnError(507014)
    when the predicted run exceeds the chip's AI Core timeout.
    """
    run, _ = prepare(query, key, value, pse_shift, atten_mask, actual_seq_lengths, actual_seq_lengths_kv,
                     deq_scale1, quant_scale1, deq_scale2, quant_scale2, quant_offset2, num_heads, scale_value,
                     pre_tokens, next_tokens, input_layout, num_key_value_heads, sparse_mode, inner_precise,
                     out_dtype=out_dtype, chip=chip, mode=mode, tiling=tiling)
    return run()


def aclnnPromptFlashAttentionV2GetWorkspaceSize(query, key, value, pseShift, attenMask, actualSeqLengths,
                                                actualSeqLengthsKv, deqScale1, quantScale1, deqScale2,
                                                quantScale2, quantOffset2, numHeads, scaleValue, preTokens,
                                                nextTokens, inputLayout, numKeyValueHeads, sparseMode,
                                                attentionOut, workspaceSize=None, executor=None, *,
                                                innerPrecise=1, chip="Ascend910B2"):
    """aclnn stage 1 (seed parameter order): ``(status, workspace_size, executor)``."""
    out_dtype = attentionOut.dtype if isinstance(attentionOut, np.ndarray) else None

    def prep():
        return prepare(query, key, value, pseShift, attenMask, actualSeqLengths, actualSeqLengthsKv, deqScale1,
                       quantScale1, deqScale2, quantScale2, quantOffset2, numHeads, scaleValue, preTokens,
                       nextTokens, inputLayout, numKeyValueHeads, sparseMode, innerPrecise, out_dtype=out_dtype,
                       chip=chip, mode="full")
    def expected():  # attentionOut: query's shape (BNSD_BSND: as BSND) in attentionOut's dtype
        shape = tuple(np.shape(query))
        return {"attention_out": (tuple(shape[i] for i in (0, 2, 1, 3)) if inputLayout == "BNSD_BSND" and
                                  len(shape) == 4 else shape, attentionOut.dtype)}
    return first_stage(prep, {"attention_out": attentionOut}, expected=expected, op=OP_NAME)


def aclnnPromptFlashAttentionV2(workspace, workspaceSize, executor, stream=None) -> int:
    """aclnn stage 2: run; write attentionOut in place; return the status."""
    return second_stage(workspace, workspaceSize, executor, stream, op=OP_NAME)
