"""``ops.flash_attention_var_len_score`` and its aclnn facade: validate, tile, launch, return an OpResult.

The host side of the operator (docs/fa_varlen.md): validate.py describes the call, tiling.py plans
it, and the mix kernel (kernel.py) runs on the chip model with the workspace and zero-initialised
outputs (attention_out [T1, N1, D]; softmax_max / softmax_sum fp32 [T1, N1, 8] in the layout chosen
by ``softmax_layout``). Timing mode takes TensorSpec data inputs; sequence lengths and prefix stay
real. Mode "estimate" is refused (AclnnError 161002) until an estimator exists.
"""
from __future__ import annotations

import numpy as np

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.launch import GmArg, TimeoutVerdict, launch
from npusim.memory.gm import TensorSpec
from ops.common.facade import first_stage, second_stage
from ops.common.result import OpResult, check_mode, resolve_chip
from ops.flash_attention_var_len_score.contract import DEFAULTS
from ops.flash_attention_var_len_score.kernel import FaVarLenKernelArgs
from ops.flash_attention_var_len_score.kernel import flash_attention_var_len_score as fa_kernel
from ops.flash_attention_var_len_score.tiling import SYSTEM_WORKSPACE_BYTES, fa_var_len_tiling
from ops.flash_attention_var_len_score.validate import validate

SOFTMAX_LAYOUTS = ("TND", "per_batch")
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
    if mode == "estimate":
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, "mode: 'estimate' is not available for flash_attention_var_len_score "
                                                  "yet (use 'full' or 'timing')")
    if not spec.core_split:
        raise NotImplementedError(f"flash_attention_var_len_score on {spec.name}: only split AIC/AIV chips "
                                  "are modelled")
    til = fa_var_len_tiling(problem, spec, tiling)
    inputs = (query, key, value, real_shift, drop_mask, atten_mask)
    return (lambda: _run(problem, til, spec, mode, inputs, softmax_layout)), til.workspaceSize


def _args(problem, til, softmax_layout: str) -> FaVarLenKernelArgs:
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


def _run(problem, til, spec, mode, inputs, softmax_layout) -> OpResult:
    full = mode == "full"
    query, key, value, real_shift, drop_mask, atten_mask = inputs
    t1, n1, d = problem.out_shape
    out = np.zeros((t1, n1, d), problem.dtype) if full else TensorSpec((t1, n1, d), problem.dtype)
    smax = np.zeros((t1, n1, 8), np.float32) if full else TensorSpec((t1, n1, 8), np.float32)
    ssum = np.zeros((t1, n1, 8), np.float32) if full else TensorSpec((t1, n1, 8), np.float32)
    ws_bytes = til.workspaceSize - SYSTEM_WORKSPACE_BYTES
    ws = np.zeros(ws_bytes, np.uint8) if full else TensorSpec((ws_bytes,), np.uint8)
    opt = lambda name, x: GmArg(name, _data(x, full)) if x is not None else None  # noqa: E731
    gm_args = (GmArg("query", _data(query, full)), GmArg("key", _data(key, full)), GmArg("value", _data(value, full)),
               opt("real_shift", real_shift), opt("drop_mask", drop_mask), opt("atten_mask", atten_mask),
               GmArg("softmax_max", smax), GmArg("softmax_sum", ssum), GmArg("attention_out", out),
               GmArg("workspace", ws), til, _args(problem, til, softmax_layout))
    meta = {"operator": "FlashAttentionVarLenScore", "tiling": _tiling_meta(til)}
    res = launch(fa_kernel, gm_args, block_dim=til.blockDim, chip=spec, mode=mode, kernel_type="mix", meta=meta)
    outputs = {"attention_out": out, "softmax_max": smax, "softmax_sum": ssum} if full else None
    timeout = res.timeout or TimeoutVerdict(res.time_us * 1e-6, spec.aicore_timeout_s, False)
    return OpResult(outputs=outputs, cycles=int(res.cycles), time_us=float(res.time_us), trace=res.trace, tiling=til,
                    workspace_size=til.workspaceSize, block_dim=til.blockDim, timeout=timeout, mode=mode,
                    extra={"problem": problem, "softmax_layout": softmax_layout})


def _tiling_meta(til) -> dict:
    keep = ("s1BaseSize", "s2BaseNratioSize", "vec1Elems", "sparseType", "blockDim", "workspaceSize", "ubBytes",
            "l1Bytes")
    return {k: getattr(til, k) for k in keep} | {"items": til.items, "tasks": til.tasks}


def flash_attention_var_len_score(query, key, value, real_shift=None, drop_mask=None, padding_mask=None,
                                  atten_mask=None, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None,
                                  scale_value=DEFAULTS["scale_value"], keep_prob=DEFAULTS["keep_prob"],
                                  pre_tokens=DEFAULTS["pre_tokens"], next_tokens=DEFAULTS["next_tokens"],
                                  head_num=None, input_layout="TND", inner_precise=DEFAULTS["inner_precise"],
                                  sparse_mode=DEFAULTS["sparse_mode"], *, softmax_layout="TND",
                                  chip="Ascend910B2", mode="full", tiling=None) -> OpResult:
    """FlashAttentionVarLenScore (seed 001) on the chip model; arguments as the seed, in snake_case.

    Returns an OpResult with ``attention_out`` [T1, N1, D], ``softmax_max`` and ``softmax_sum``
    (fp32 [T1, N1, 8]: "TND" rows (token, head), or "per_batch" [N1, Sq, 8] blocks per batch) in full
    mode, plus cycles, time, trace, tiling, workspace size and the timeout verdict. Raises AclnnError
    with the contract's status for invalid input, 161002 for mode "estimate" or a bad
    *softmax_layout*, 507014 when the predicted run exceeds the AI Core timeout.
    """
    run, _ = prepare(query, key, value, real_shift, drop_mask, padding_mask, atten_mask, prefix, actual_seq_qlen,
                     actual_seq_kvlen, scale_value, keep_prob, pre_tokens, next_tokens, head_num, input_layout,
                     inner_precise, sparse_mode, softmax_layout=softmax_layout, chip=chip, mode=mode, tiling=tiling)
    return run()


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
    return first_stage(prep, {"softmax_max": softmaxMaxOut, "softmax_sum": softmaxSumOut,
                              "attention_out": attentionOutOut})


def aclnnFlashAttentionVarLenScore(workspace, workspaceSize, executor, stream=None) -> int:
    """aclnn stage 2: run; write the outputs in place; return the status."""
    return second_stage(workspace, workspaceSize, executor, stream)
