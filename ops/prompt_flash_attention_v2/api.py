"""``ops.prompt_flash_attention_v2`` and its aclnn facade: validate, tile, launch the kernel, return an OpResult.

The host side of the operator: it pads D the way the aclnn layer does, computes the layout strides the
kernel addresses GM with, reads the scalar quantisation parameters, allocates the workspace and the
zero-initialised output, and launches the mix kernel (launch.py) on the chip model.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from npusim.launch import TimeoutVerdict
from npusim.sanitizer import unsanitized
from ops.common.facade import first_stage, second_stage
from ops.common.guard import check_full_bytes, check_work, tensor_bytes
from ops.common.inputs import normalized
from ops.common.result import OpResult, check_mode, resolve_chip, run_checked, run_with_options
from ops.prompt_flash_attention_v2.contract import INPUTS, OP_NAME
from ops.prompt_flash_attention_v2.estimate import estimate_pfa, split_advice, total_tiles
from ops.prompt_flash_attention_v2.launch import kernel_inputs, launch_kernel
from ops.prompt_flash_attention_v2.tiling import SYSTEM_WORKSPACE_BYTES, pfa_tiling
from ops.prompt_flash_attention_v2.validate import validate


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
    check_work(mode, total_tiles(problem, spec, overrides), INSTRUCTIONS_PER_TILE, "score tiles")
    check_full_bytes(mode, tensor_bytes(*tensors))


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


@unsanitized  # estimate mode runs no kernel end to end: nothing to sanitize
def _estimate(problem, spec, overrides, *tensors) -> OpResult:
    """Estimate mode: work counted from the tiling, the slowest core sampled in timing mode (estimate.py)."""
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
                              tiling=None, trace=None, progress=None, sanitize=False) -> OpResult:
    """PromptFlashAttentionV2 (seed 000) on the chip model. Arguments as the seed, in snake_case.

    Returns an OpResult with ``attention_out`` (full mode), cycles, time, trace, tiling and the timeout
    verdict. Raises AclnnError with the seed's status code for invalid input, and AclnnError(507014)
    when the predicted run exceeds the chip's AI Core timeout. *trace*: None (full up to
    npusim.trace_sink.FULL_TRACE_MAX_ROWS rows), "full", "summary", "none" or "file:PATH";
    *progress*: a progress bar (None: on a terminal).
    ``sanitize=True`` checks the kernel's schedule (docs/sanitizer.md): reports in ``.sanitizer``.
    """
    args = (query, key, value, pse_shift, atten_mask, actual_seq_lengths, actual_seq_lengths_kv, deq_scale1,
            quant_scale1, deq_scale2, quant_scale2, quant_offset2, num_heads, scale_value, pre_tokens, next_tokens,
            input_layout, num_key_value_heads, sparse_mode, inner_precise)
    run, _ = prepare(*args, out_dtype=out_dtype, chip=chip, mode=mode, tiling=tiling)
    return run_checked(lambda: run_with_options(run, mode, trace, progress, lambda: prepare(
        *args, out_dtype=out_dtype, chip=chip, mode="estimate", tiling=tiling)[0]()), sanitize)


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
