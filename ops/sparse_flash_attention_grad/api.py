"""``ops.sparse_flash_attention_grad`` and its aclnn facade: validate, tile, launch, return an OpResult.

The host side of the operator (docs/sfag.md): validate.py describes the call, tiling.py plans it, and
the mix kernel (kernel.py) runs on the chip model with the workspace and the zero-initialised outputs
d_query, d_key, d_value (and d_query_rope, d_key_rope when the rope inputs are given), in the input
dtype and shapes. Timing mode takes TensorSpec data inputs; sparse_indices and the sequence lengths
stay real. An empty query returns zero gradients at once (seed '入参为空的场景处理').
"""
from __future__ import annotations

from npusim.launch import TimeoutVerdict
from npusim.sanitizer import unsanitized
from ops.common.facade import first_stage, second_stage
from ops.common.guard import MAX_INSTRUCTIONS, check_full_bytes, check_work, tensor_bytes
from ops.common.inputs import normalized
from ops.common.result import (
    OpResult,
    check_mode,
    resolve_chip,
    run_checked,
    run_with_options,
)
from ops.sparse_flash_attention_grad.contract import DEFAULTS, INPUTS
from ops.sparse_flash_attention_grad.estimate import estimate_counts, estimate_sfag, token_work
from ops.sparse_flash_attention_grad.launch import launch_kernel, zero_outputs
from ops.sparse_flash_attention_grad.tiling import sfag_tiling, slot_counts
from ops.sparse_flash_attention_grad.validate import validate


@normalized(INPUTS)
def prepare(query, key, value, sparse_indices, d_out, out, softmax_max, softmax_sum,
            actual_seq_lengths_query=None, actual_seq_lengths_kv=None, query_rope=None, key_rope=None,
            scale_value=DEFAULTS["scale_value"], sparse_block_size=DEFAULTS["sparse_block_size"],
            layout=DEFAULTS["layout"], sparse_mode=DEFAULTS["sparse_mode"], pre_tokens=DEFAULTS["pre_tokens"],
            next_tokens=DEFAULTS["next_tokens"], deterministic=DEFAULTS["deterministic"], *, chip="Ascend910B2",
            mode="full", tiling=None):
    """Validate and tile; return ``(run, workspace_size)`` where ``run()`` launches (aclnn stage 1)."""
    spec = resolve_chip(chip)
    mode = check_mode(mode)
    problem = validate(query, key, value, sparse_indices, d_out, out, softmax_max, softmax_sum,
                       actual_seq_lengths_query, actual_seq_lengths_kv, query_rope, key_rope, scale_value,
                       sparse_block_size, layout, sparse_mode, pre_tokens, next_tokens, deterministic, chip_spec=spec)
    if not spec.core_split:
        raise NotImplementedError(f"sparse_flash_attention_grad on {spec.name}: only split AIC/AIV chips are modelled")
    inputs = (query, key, value, d_out, out, softmax_max, softmax_sum, query_rope, key_rope)
    if problem.empty:
        return (lambda: _empty(problem, spec, mode)), 0
    if mode == "estimate":
        counts = estimate_counts(problem)
        til = sfag_tiling(problem, spec, tiling, counts)
        return (lambda: unsanitized(estimate_sfag)(problem, spec, til, counts)), til.workspaceSize
    counts = slot_counts(problem.indices)
    til = sfag_tiling(problem, spec, tiling, counts)
    _refuse_too_large(problem, til, mode, inputs, counts)
    return (lambda: _run(problem, til, spec, mode, inputs, counts)), til.workspaceSize


#: Simulated instructions of a launch, from the work the indices imply: per chunk of a token, per gathered
#: block, per gathered row (block x sparse_block_size) and per key token (the zero-fill and post steps
#: stream the fp32 accumulators). Least squares over timing traces of 10 calls (T1 2-64, T2 64-4,096,
#: block sizes 1-64, 3-8,192 gathered blocks; 1,178 to 1,843,144 instructions) gave 383, 12.1, 6.07, 1.61
#: (0.91-1.06x of the counts); rounded up here (0.96-1.17x): a guard should not under-count.
PER_CHUNK, PER_BLOCK, PER_ROW, PER_KV_TOKEN = 400, 12, 7, 1.7


def _refuse_too_large(problem, til, mode: str, inputs, counts) -> None:
    """AclnnError 161002 pointing to estimate mode when a simulation would not finish or not fit (guard.py)."""
    if mode not in MAX_INSTRUCTIONS:
        return
    work = token_work(problem, counts)
    blocks = int(work["blocks"].sum())
    instructions = (PER_CHUNK * int(work["chunks"].sum()) + PER_BLOCK * blocks
                    + PER_ROW * blocks * problem.block_size + PER_KV_TOKEN * problem.T2)
    check_work(mode, int(instructions), 1, "instructions (counted from sparse_indices)")
    grads = (inputs[0], inputs[1], inputs[2], inputs[7], inputs[8])  # d_query, d_key, d_value, rope parts
    check_full_bytes(mode, tensor_bytes(*inputs) + tensor_bytes(*grads) + til.workspaceSize,
                     "tensors and workspace")


def _run(problem, til, spec, mode, inputs, counts) -> OpResult:
    res, outs = launch_kernel(problem, til, spec, mode, inputs, counts)
    outputs = outs if mode == "full" else None
    timeout = res.timeout or TimeoutVerdict(res.time_us * 1e-6, spec.aicore_timeout_s, False)
    return OpResult(outputs=outputs, cycles=int(res.cycles), time_us=float(res.time_us), trace=res.trace, tiling=til,
                    workspace_size=til.workspaceSize, block_dim=til.blockDim, timeout=timeout, mode=mode,
                    extra={"problem": problem, "atomic_log": res.atomic_log, "slots": counts})


def _empty(problem, spec, mode) -> OpResult:
    outputs = zero_outputs(problem, True) if mode == "full" else None
    return OpResult(outputs=outputs, cycles=0, time_us=0.0, trace=None, tiling=None, workspace_size=0, block_dim=0,
                    timeout=TimeoutVerdict(0.0, spec.aicore_timeout_s, False), mode=mode,
                    extra={"problem": problem})


def sparse_flash_attention_grad(query, key, value, sparse_indices, d_out, out, softmax_max, softmax_sum,
                                actual_seq_lengths_query=None, actual_seq_lengths_kv=None, query_rope=None,
                                key_rope=None, scale_value=DEFAULTS["scale_value"],
                                sparse_block_size=DEFAULTS["sparse_block_size"], layout=DEFAULTS["layout"],
                                sparse_mode=DEFAULTS["sparse_mode"], pre_tokens=DEFAULTS["pre_tokens"],
                                next_tokens=DEFAULTS["next_tokens"], deterministic=DEFAULTS["deterministic"], *,
                                chip="Ascend910B2", mode="full", tiling=None, trace=None, progress=None, sanitize=False) -> OpResult:
    """SparseFlashAttentionGrad (seed 003) on the chip model; arguments as the seed, in snake_case.

    Returns an OpResult with ``d_query``, ``d_key``, ``d_value`` (and ``d_query_rope``, ``d_key_rope`` when
    the rope inputs are given) in full mode, plus cycles, time, trace, tiling, workspace size and the
    timeout verdict. Raises AclnnError with the contract's status for invalid input, 507014 when the
    predicted run exceeds the AI Core timeout (full and timing modes; estimate mode reports it in
    ``timeout`` with split advice instead). *trace* and *progress*: as prompt_flash_attention_v2's.
    ``sanitize=True`` checks the kernel's schedule (docs/sanitizer.md): reports in ``.sanitizer``.
    """
    args = (query, key, value, sparse_indices, d_out, out, softmax_max, softmax_sum, actual_seq_lengths_query,
            actual_seq_lengths_kv, query_rope, key_rope, scale_value, sparse_block_size, layout, sparse_mode,
            pre_tokens, next_tokens, deterministic)
    run, _ = prepare(*args, chip=chip, mode=mode, tiling=tiling)
    return run_checked(lambda: run_with_options(run, mode, trace, progress,
                            lambda: prepare(*args, chip=chip, mode="estimate", tiling=tiling)[0]()), sanitize)


def aclnnSparseFlashAttentionGradGetWorkspaceSize(query, key, value, sparseIndices, dOut, out, softmaxMax, softmaxSum,
                                                  actualSeqLengthsQueryOptional, actualSeqLengthskvOptional,
                                                  queryRopeOptional, keyRopeOptional, scaleValue, sparseBlockSize,
                                                  layoutOptional, sparseMode, preTokens, nextTokens, deterministic,
                                                  dQueryOut, dKeyOut, dValueOut, dQueryRopeOutOptional=None,
                                                  dKeyRopeOutOptional=None, workspaceSize=None, executor=None, *,
                                                  chip="Ascend910B2"):
    """aclnn stage 1 (seed parameter order): ``(status, workspace_size, executor)``."""
    def prep():
        return prepare(query, key, value, sparseIndices, dOut, out, softmaxMax, softmaxSum,
                       actualSeqLengthsQueryOptional, actualSeqLengthskvOptional, queryRopeOptional, keyRopeOptional,
                       scaleValue, sparseBlockSize, layoutOptional if layoutOptional is not None else "BSND",
                       sparseMode, preTokens, nextTokens, deterministic, chip=chip, mode="full")
    outs = {"d_query": dQueryOut, "d_key": dKeyOut, "d_value": dValueOut}
    if queryRopeOptional is not None:
        outs.update(d_query_rope=dQueryRopeOutOptional, d_key_rope=dKeyRopeOutOptional)
    return first_stage(prep, outs)


def aclnnSparseFlashAttentionGrad(workspace, workspaceSize, executor, stream=None) -> int:
    """aclnn stage 2: run; write the outputs in place; return the status."""
    return second_stage(workspace, workspaceSize, executor, stream)
