"""``ops.flash_attention_var_len_score`` and its aclnn facade: validate, tile, launch, return an OpResult.

The host side of the operator (docs/fa_varlen.md): validate.py describes the call, tiling.py plans
it, and the mix kernel (launch.py) runs on the chip model with the workspace and zero-initialised
outputs (attention_out [T1, N1, D]; softmax_max / softmax_sum fp32 [T1, N1, 8] in the layout chosen
by ``softmax_layout``). Timing mode takes TensorSpec data inputs; sequence lengths and prefix stay
real. Mode "estimate" counts the work and simulates only the busiest core (estimate.py).
"""
from __future__ import annotations

import numpy as np

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.launch import TimeoutVerdict
from npusim.sanitizer import unsanitized
from ops.common.facade import first_stage, second_stage
from ops.common.guard import check_full_bytes, check_work, tensor_bytes
from ops.common.inputs import normalized
from ops.common.result import OpResult, check_mode, resolve_chip, run_checked, run_with_options
from ops.flash_attention_var_len_score.contract import DEFAULTS, INPUTS, OP_NAME
from ops.flash_attention_var_len_score.estimate import Work, estimate_fa, split_advice
from ops.flash_attention_var_len_score.launch import kernel_inputs, launch_kernel
from ops.flash_attention_var_len_score.tiling import fa_var_len_tiling
from ops.flash_attention_var_len_score.validate import validate

SOFTMAX_LAYOUTS = ("TND", "per_batch")


@normalized(INPUTS)
def prepare(query, key, value, real_shift=None, drop_mask=None, padding_mask=None, atten_mask=None, prefix=None,
            actual_seq_qlen=None, actual_seq_kvlen=None, scale_value=DEFAULTS["scale_value"],
            keep_prob=DEFAULTS["keep_prob"], pre_tokens=DEFAULTS["pre_tokens"], next_tokens=DEFAULTS["next_tokens"],
            head_num=None, input_layout="TND", inner_precise=DEFAULTS["inner_precise"],
            sparse_mode=DEFAULTS["sparse_mode"], *, softmax_layout="TND", chip="Ascend910B2", mode="full",
            tiling=None):
    """Validate and tile; return ``(run, workspace_size)`` where ``run()`` launches (aclnn stage 1)."""
    spec = resolve_chip(chip)
    mode = check_mode(mode)
    problem = validate(query, key, value, real_shift, drop_mask, padding_mask, atten_mask, prefix, actual_seq_qlen,
                       actual_seq_kvlen, scale_value, keep_prob, pre_tokens, next_tokens, head_num, input_layout,
                       inner_precise, sparse_mode, chip_spec=spec)
    if softmax_layout not in SOFTMAX_LAYOUTS:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"softmax_layout: must be one of {', '.join(SOFTMAX_LAYOUTS)}, "
                                                  f"got {softmax_layout!r}")
    if not spec.core_split:
        raise NotImplementedError(f"flash_attention_var_len_score on {spec.name}: only split AIC/AIV chips "
                                  "are modelled")
    inputs = (query, key, value, real_shift, drop_mask, atten_mask)
    if mode == "estimate":
        return (lambda: _estimate(problem, spec, tiling, inputs, softmax_layout)), 0
    _refuse_too_large(problem, spec, tiling, mode, inputs)
    til = fa_var_len_tiling(problem, spec, tiling)
    return (lambda: _run(problem, til, spec, mode, inputs, softmax_layout)), til.workspaceSize


#: Simulated instructions per score tile (s1BaseSize x s2BaseNratioSize rows x columns of one head): about
#: 4,500 in timing traces of T = 2048..4096, D = 64..128 (144,320 instructions for 32 tiles).
INSTRUCTIONS_PER_TILE = 4500


def _refuse_too_large(problem, spec, overrides, mode: str, inputs) -> None:
    """AclnnError 161002 pointing to estimate mode when a simulation would not finish or not fit."""
    check_work(mode, Work(problem, spec, overrides).total_tiles, INSTRUCTIONS_PER_TILE, "score tiles")
    t1, n1, d = problem.out_shape
    check_full_bytes(mode, tensor_bytes(*inputs) + t1 * n1 * (d * problem.dtype.itemsize + 2 * 8 * 4))


def _run(problem, til, spec, mode, inputs, softmax_layout) -> OpResult:
    full = mode == "full"
    kin = kernel_inputs(problem, mode, inputs, softmax_layout)
    res = launch_kernel(kin, til, spec, mode)
    outputs = {"attention_out": kin.out.array, "softmax_max": kin.smax.array,
               "softmax_sum": kin.ssum.array} if full else None
    timeout = res.timeout or TimeoutVerdict(res.time_us * 1e-6, spec.aicore_timeout_s, False)
    return OpResult(outputs=outputs, cycles=int(res.cycles), time_us=float(res.time_us), trace=res.trace, tiling=til,
                    workspace_size=til.workspaceSize, block_dim=til.blockDim, timeout=timeout, mode=mode,
                    extra={"problem": problem, "softmax_layout": softmax_layout})


@unsanitized  # estimate mode runs no kernel end to end: nothing to sanitize
def _estimate(problem, spec, overrides, inputs, softmax_layout) -> OpResult:
    """Estimate mode: work counted from the tiling, the busiest core simulated or sampled (estimate.py)."""
    est, til, work = estimate_fa(problem, spec, overrides, inputs, softmax_layout)
    verdict = split_advice(work, spec, est.time_us * 1e-6, spec.aicore_timeout_s)
    return OpResult(outputs=None, cycles=est.cycles, time_us=est.time_us, trace=None, tiling=til,
                    workspace_size=til.workspaceSize, block_dim=til.blockDim, timeout=verdict, mode="estimate",
                    extra={"problem": problem, "softmax_layout": softmax_layout, "estimate": est})


def flash_attention_var_len_score(query, key, value, real_shift=None, drop_mask=None, padding_mask=None,
                                  atten_mask=None, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None,
                                  scale_value=DEFAULTS["scale_value"], keep_prob=DEFAULTS["keep_prob"],
                                  pre_tokens=DEFAULTS["pre_tokens"], next_tokens=DEFAULTS["next_tokens"],
                                  head_num=None, input_layout="TND", inner_precise=DEFAULTS["inner_precise"],
                                  sparse_mode=DEFAULTS["sparse_mode"], *, softmax_layout="TND",
                                  chip="Ascend910B2", mode="full", tiling=None, trace=None,
                                  progress=None, sanitize=False) -> OpResult:
    """FlashAttentionVarLenScore (seed 001) on the chip model; arguments as the seed, in snake_case.

    Returns an OpResult with ``attention_out`` [T1, N1, D], ``softmax_max`` and ``softmax_sum``
    (fp32 [T1, N1, 8]: "TND" rows (token, head), or "per_batch" [N1, Sq, 8] blocks per batch) in full
    mode, plus cycles, time, trace, tiling, workspace size and the timeout verdict. Raises AclnnError
    with the contract's status for invalid input, 161002 for a bad *softmax_layout*, 507014 when the
    predicted run exceeds the AI Core timeout (full and timing modes; estimate mode reports it in
    ``timeout`` with split advice instead). *trace* and *progress*: as prompt_flash_attention_v2's.
    ``sanitize=True`` checks the kernel's schedule (docs/sanitizer.md): reports in ``.sanitizer``.
    """
    args = (query, key, value, real_shift, drop_mask, padding_mask, atten_mask, prefix, actual_seq_qlen,
            actual_seq_kvlen, scale_value, keep_prob, pre_tokens, next_tokens, head_num, input_layout, inner_precise,
            sparse_mode)
    run, _ = prepare(*args, softmax_layout=softmax_layout, chip=chip, mode=mode, tiling=tiling)
    return run_checked(lambda: run_with_options(run, mode, trace, progress, lambda: prepare(
        *args, softmax_layout=softmax_layout, chip=chip, mode="estimate", tiling=tiling)[0]()), sanitize)


def aclnnFlashAttentionVarLenScoreGetWorkspaceSize(query, key, value, realShiftOptional, dropMaskOptional,
                                                   paddingMaskOptional, attenMaskOptional, prefixOptional,
                                                   actualSeqQLenOptional, actualSeqKvLenOptional, scaleValueOptional,
                                                   keepProbOptional, preTokensOptional, nextTokensOptional, headNum,
                                                   inputLayout, innerPreciseOptional, sparseModeOptional,
                                                   softmaxMaxOut, softmaxSumOut, softmaxOutOut, attentionOutOut,
                                                   workspaceSize=None, executor=None, *, softmaxLayout="TND",
                                                   chip="Ascend910B2"):
    """aclnn stage 1 (seed parameter order): ``(status, workspace_size, executor)``. softmaxOutOut is
    reserved (seed) and ignored."""
    def prep():
        return prepare(query, key, value, realShiftOptional, dropMaskOptional, paddingMaskOptional,
                       attenMaskOptional, prefixOptional, actualSeqQLenOptional, actualSeqKvLenOptional,
                       scaleValueOptional, keepProbOptional, preTokensOptional, nextTokensOptional, headNum,
                       inputLayout, innerPreciseOptional, sparseModeOptional, softmax_layout=softmaxLayout,
                       chip=chip, mode="full")
    def expected():  # attentionOut [T1, N1, D] in query's dtype; softmax max/sum fp32 [T1, N1, 8]
        t1, n1, _ = np.shape(query)
        return {"attention_out": (np.shape(query), np.asarray(query).dtype),
                "softmax_max": ((t1, n1, 8), np.float32), "softmax_sum": ((t1, n1, 8), np.float32)}
    return first_stage(prep, {"softmax_max": softmaxMaxOut, "softmax_sum": softmaxSumOut,
                              "attention_out": attentionOutOut}, expected=expected, op=OP_NAME)


def aclnnFlashAttentionVarLenScore(workspace, workspaceSize, executor, stream=None) -> int:
    """aclnn stage 2: run; write the outputs in place; return the status."""
    return second_stage(workspace, workspaceSize, executor, stream, op=OP_NAME)
