"""``ops.flash_attention_unpadding_score_grad_v5`` and its aclnn facade: validate, tile, launch, return an OpResult.

One operator call is three launches on the chip model, timed as one operator (docs/fag.md): the pre
kernel (zero the fp32 dq/dk/dv workspaces), the main mix kernel and the post kernel (scale, cast).
The operator's cycles and time are the sum of the three launches' (each with its launch overhead);
``trace`` is the main kernel's trace, the pre/post results are in ``extra["launches"]``.

What the simulator models (docs/fag.md "Coverage", "Template selection"): every valid call (fp16, bf16,
fp32, D <= 768, pse types 0-3, dropout, rope, every sparse mode, sink and dsink) on the template CANN picks:
SameAB (atomic adds, or IS_DTM's per-core partials and ordered reduction), basic-deterministic (per-core
partials, ordered reduction), generic (atomic adds in both modes, as CANN), deterministic S1s2Bn2 (its CV blocks,
each AIV a run of (batch, key/value head) pairs: one writer per output row) or basic (atomic adds).
"""
from __future__ import annotations


import numpy as np

from npusim.launch import TimeoutVerdict
from npusim.sanitizer import unsanitized
from ops.common.facade import first_stage, second_stage
from ops.common.guard import check_full_bytes, check_work, tensor_bytes
from ops.common.inputs import normalized
from ops.common.result import OpResult, check_mode, resolve_chip, run_checked, run_with_options
from ops.flash_attention_unpadding_score_grad_v5.contract import DEFAULTS, INPUTS, OP_NAME
from ops.flash_attention_unpadding_score_grad_v5.estimate import estimate_fag, estimate_plan, split_advice
from ops.flash_attention_unpadding_score_grad_v5.launch import kernel_args, run_launches  # noqa: F401
from ops.flash_attention_unpadding_score_grad_v5.tiling import fag_tiling
from ops.flash_attention_unpadding_score_grad_v5.validate import validate



@normalized(INPUTS)
def prepare(query, query_rope, key_in, key_in_rope, value, dy, pse_shift=None, drop_mask=None, padding_mask=None,
            atten_mask=None, softmax_max=None, softmax_sum=None, softmax_in=None, attention_in=None, sink_in=None,
            prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, q_start_idx=None, kv_start_idx=None,
            scale_value=DEFAULTS["scale_value"], keep_prob=DEFAULTS["keep_prob"], pre_tokens=DEFAULTS["pre_tokens"],
            next_tokens=DEFAULTS["next_tokens"], head_num=None, input_layout="TND",
            inner_precise=DEFAULTS["inner_precise"], sparse_mode=DEFAULTS["sparse_mode"],
            pse_type=DEFAULTS["pse_type"], softmax_in_layout=DEFAULTS["softmax_in_layout"], *, deterministic=False,
            chip="Ascend910B2", mode="full", tiling=None):
    """Validate and tile; return ``(run, workspace_size)`` where ``run()`` launches (aclnn stage 1)."""
    spec = resolve_chip(chip)
    mode = check_mode(mode)
    problem = validate(query, query_rope, key_in, key_in_rope, value, dy, pse_shift, drop_mask, padding_mask,
                       atten_mask, softmax_max, softmax_sum, softmax_in, attention_in, sink_in, prefix,
                       actual_seq_qlen, actual_seq_kvlen, q_start_idx, kv_start_idx, scale_value, keep_prob,
                       pre_tokens, next_tokens, head_num, input_layout, inner_precise, sparse_mode, pse_type,
                       softmax_in_layout, chip_spec=spec)
    if not isinstance(deterministic, bool):
        from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"deterministic: must be a bool, got {deterministic!r}")
    if mode == "estimate":
        til, work = estimate_plan(problem, spec, tiling, deterministic)
        return (lambda: _estimate(problem, til, spec, work)), til.workspaceSize
    til = fag_tiling(problem, spec, tiling, deterministic)
    inputs = dict(query=query, key_in=key_in, value=value, dy=dy, attention_in=attention_in, softmax_max=softmax_max,
                  softmax_sum=softmax_sum, atten_mask=atten_mask, sink_in=sink_in,
                  query_rope=query_rope, key_in_rope=key_in_rope, pse_shift=pse_shift, drop_mask=drop_mask)
    _refuse_too_large(til, mode, inputs)
    return (lambda: _run(problem, til, spec, mode, inputs)), til.workspaceSize


#: Simulated instructions per 128 x 128 block (the three launches): 251-273 in timing traces of T = 1024..4096,
#: N = 1..4, D = 64..128, sparse 0 and 3 (main 70,536 + pre 336 + post 3,360 for 272 blocks).
INSTRUCTIONS_PER_BLOCK = 280


def _refuse_too_large(til, mode: str, inputs: dict) -> None:
    """AclnnError 161002 pointing to estimate mode when a simulation would not finish or not fit (guard.py)."""
    check_work(mode, til.blocks, INSTRUCTIONS_PER_BLOCK, "128 x 128 blocks")
    grads = (inputs["query"], inputs["key_in"], inputs["value"], inputs["query_rope"], inputs["key_in_rope"])
    check_full_bytes(mode, tensor_bytes(*inputs.values()) + tensor_bytes(*grads) + til.workspaceSize,
                     "tensors and workspace")


def _run(problem, til, spec, mode: str, inputs: dict) -> OpResult:
    launches, outs, ws = run_launches(problem, til, spec, mode, inputs)
    cycles = sum(r.cycles for r in launches.values())
    time_us = sum(r.time_us for r in launches.values())
    timeout = TimeoutVerdict(time_us * 1e-6, spec.aicore_timeout_s, False)
    full = mode == "full"
    return OpResult(outputs=outs if full else None, cycles=int(cycles), time_us=float(time_us),
                    trace=launches["main"].trace, tiling=til, workspace_size=til.workspaceSize, block_dim=til.blockDim,
                    timeout=timeout, mode=mode,
                    extra={"problem": problem, "launches": launches, "atomics": launches["main"].atomic_log,
                           "deterministic": til.deterministic, "workspace": ws if full else None})


@unsanitized  # estimate mode runs no kernel end to end: nothing to sanitize
def _estimate(problem, til, spec, work) -> OpResult:
    est, parts = estimate_fag(problem, til, spec, work)
    verdict = split_advice(problem, est.time_us * 1e-6, spec.aicore_timeout_s)
    return OpResult(outputs=None, cycles=est.cycles, time_us=float(est.time_us), trace=None, tiling=til,
                    workspace_size=til.workspaceSize, block_dim=til.blockDim, timeout=verdict, mode="estimate",
                    extra={"problem": problem, "estimate": est, "launch_cycles": parts})


def flash_attention_unpadding_score_grad_v5(query, query_rope, key_in, key_in_rope, value, dy, pse_shift=None,
                                            drop_mask=None, padding_mask=None, atten_mask=None, softmax_max=None,
                                            softmax_sum=None, softmax_in=None, attention_in=None, sink_in=None,
                                            prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None,
                                            q_start_idx=None, kv_start_idx=None,
                                            scale_value=DEFAULTS["scale_value"], keep_prob=DEFAULTS["keep_prob"],
                                            pre_tokens=DEFAULTS["pre_tokens"], next_tokens=DEFAULTS["next_tokens"],
                                            head_num=None, input_layout="TND",
                                            inner_precise=DEFAULTS["inner_precise"],
                                            sparse_mode=DEFAULTS["sparse_mode"], pse_type=DEFAULTS["pse_type"],
                                            softmax_in_layout=DEFAULTS["softmax_in_layout"], *, deterministic=False,
                                            chip="Ascend910B2", mode="full", tiling=None, trace=None, progress=None,
                                            sanitize=False) -> OpResult:
    """FlashAttentionUnpaddingScoreGradV5 (seed 002) on the chip model; arguments as the seed, in snake_case.

    *deterministic* stands for aclrtCtxSetSysParamOpt (default non-deterministic). Returns an OpResult
    with ``dq`` [T1, N1, D], ``dk`` and ``dv`` [T2, N2, D] in the input dtype (full mode), cycles and
    time of the pre + main + post launches, the main trace, tiling, workspace size and timeout verdict.
    Raises AclnnError with the contract's status for invalid input. *trace* and *progress*: as
    prompt_flash_attention_v2's (the trace level applies to all three launches; ``trace`` is the main one's).
    ``sanitize=True`` checks the three kernels' schedules as one stream (docs/sanitizer.md): reports in
    ``.sanitizer``.
    """
    args = (query, query_rope, key_in, key_in_rope, value, dy, pse_shift, drop_mask, padding_mask, atten_mask,
            softmax_max, softmax_sum, softmax_in, attention_in, sink_in, prefix, actual_seq_qlen, actual_seq_kvlen,
            q_start_idx, kv_start_idx, scale_value, keep_prob, pre_tokens, next_tokens, head_num, input_layout,
            inner_precise, sparse_mode, pse_type, softmax_in_layout)
    run, _ = prepare(*args, deterministic=deterministic, chip=chip, mode=mode, tiling=tiling)
    return run_checked(lambda: run_with_options(run, mode, trace, progress, lambda: prepare(
        *args, deterministic=deterministic, chip=chip, mode="estimate", tiling=tiling)[0]()), sanitize)


def aclnnFlashAttentionUnpaddingScoreGradV5GetWorkspaceSize(
        query, queryRope, keyIn, keyInRope, value, dy, pseShiftOptional, dropMaskOptional, paddingMaskOptional,
        attenMaskOptional, softmaxMaxOptional, softmaxSumOptional, softmaxInOptional, attentionInOptional,
        sinkInOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional, qStartIdxOptional,
        kvStartIdxOptional, scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise,
        sparseMode, pseType, softmaxInLayout, dqOut, dqRopeOut, dkOut, dkRopeOut, dvOut, dpseOut, dsinkOut,
        workspaceSize=None, executor=None, *, deterministic=False, chip="Ascend910B2"):
    """aclnn stage 1 (seed parameter order): ``(status, workspace_size, executor)``. dqRopeOut/dkRopeOut are
    needed only with rope, dsinkOut only with sinkIn; dpseOut is reserved (seed: 暂未使用) and ignored.
    *deterministic* stands for aclrtCtxSetSysParamOpt."""
    def prep():
        return prepare(query, queryRope, keyIn, keyInRope, value, dy, pseShiftOptional, dropMaskOptional,
                       paddingMaskOptional, attenMaskOptional, softmaxMaxOptional, softmaxSumOptional,
                       softmaxInOptional, attentionInOptional, sinkInOptional, prefixOptional, actualSeqQLenOptional,
                       actualSeqKvLenOptional, qStartIdxOptional, kvStartIdxOptional, scaleValue, keepProb, preTokens,
                       nextTokens, headNum, inputLayout, innerPrecise, sparseMode, pseType, softmaxInLayout,
                       deterministic=deterministic, chip=chip, mode="full")
    outputs = {"dq": dqOut, "dk": dkOut, "dv": dvOut}
    if queryRope is not None:
        outputs.update(dq_rope=dqRopeOut, dk_rope=dkRopeOut)
    if sinkInOptional is not None:
        outputs["dsink"] = dsinkOut

    def expected():  # gradients in the inputs' shapes and dtype; dsink fp32 [N1]
        dt = np.asarray(query).dtype
        shapes = {"dq": np.shape(query), "dk": np.shape(keyIn), "dv": np.shape(value)}
        if queryRope is not None:
            shapes.update(dq_rope=np.shape(queryRope), dk_rope=np.shape(keyInRope))
        out = {k: (v, dt) for k, v in shapes.items()}
        if sinkInOptional is not None:
            out["dsink"] = ((int(headNum),), np.float32)
        return out
    return first_stage(prep, outputs, expected=expected, op=OP_NAME)


def aclnnFlashAttentionUnpaddingScoreGradV5(workspace, workspaceSize, executor, stream=None) -> int:
    """aclnn stage 2: run; write the outputs in place; return the status."""
    return second_stage(workspace, workspaceSize, executor, stream, op=OP_NAME)
