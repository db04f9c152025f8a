"""The FlashAttentionUnpaddingScoreGradV5 launches: pre (zero), main (mix), post (scale, cast) on one workspace.

Its own module because api.py (full and timing runs) and estimate.py (sampled timing runs) both launch
the kernels; neither needs the other to do it.
"""
from __future__ import annotations

import numpy as np

from npusim.launch import GmArg, call_trace_level, launch
from npusim.memory.gm import TensorSpec
from ops.flash_attention_unpadding_score_grad_v5.kernel import FagKernelArgs, fag_main, fag_post, fag_pre
from ops.flash_attention_unpadding_score_grad_v5.tiling import SYSTEM_WORKSPACE_BYTES

INPUTS = ("query", "key_in", "value", "dy", "attention_in", "softmax_max", "softmax_sum", "atten_mask", "sink_in",
          "query_rope", "key_in_rope", "pse_shift", "drop_mask")


def gm_data(x, full: bool):
    if x is None:
        return None
    if full and isinstance(x, np.ndarray):
        arr = np.ascontiguousarray(x)
        return arr.view(np.uint8) if arr.dtype == np.bool_ else arr
    dt = np.dtype(np.uint8) if np.dtype(x.dtype) == np.bool_ else np.dtype(x.dtype)
    return TensorSpec(tuple(x.shape), dt)


def kernel_args(problem) -> FagKernelArgs:
    p = problem
    cu_ss = np.concatenate(([0], np.cumsum(p.seq_q.astype(np.int64) * p.seq_kv))).astype(int)
    pse_b = 1
    if p.pse_form == "alibi":
        pse_b = p.pse_shape[0]
    elif p.pse_form == "slope":
        pse_b = p.pse_shape[0] if len(p.pse_shape) == 2 else 1
    return FagKernelArgs(cuQ=tuple(int(x) for x in p.cu_seq_q[:-1]), cuKv=tuple(int(x) for x in p.cu_seq_kv[:-1]),
                         nextLU=tuple(int(x) for x in p.next_tokens_lu), preLU=tuple(int(x) for x in p.pre_tokens_lu),
                         maskForm=p.mask_form, maskCols=p.atten_mask_shape[1] if p.atten_mask_shape else 0,
                         softmaxTnd=p.softmax_in_layout != "",
                         seqQ=tuple(int(x) for x in p.seq_q), masked=p.mask_form != "none", inDtype=p.dtype,
                         sink=p.sink, pseForm=p.pse_form, pseType=p.pse_type, pseB=int(pse_b),
                         pseS2=int(p.pse_shape[3]) if p.pse_form == "alibi" else 0, qStart=p.q_start,
                         kvStart=p.kv_start, dropout=p.dropout, cuSS=tuple(int(x) for x in cu_ss),
                         seqKv=tuple(int(x) for x in p.seq_kv),
                         prefixN=() if p.prefix_n is None else tuple(int(x) for x in p.prefix_n))


def outputs(problem, full: bool) -> dict:
    """Zeroed outputs (full mode) or their TensorSpecs: dq, dk, dv, and dsink / dq_rope / dk_rope when used."""
    p = problem
    shapes = {"dq": (p.q_shape, p.dtype), "dk": (p.kv_shape, p.dtype), "dv": (p.kv_shape, p.dtype)}
    if p.sink:
        shapes["dsink"] = ((p.N1,), np.dtype(np.float32))
    if p.rope_d:
        shapes["dq_rope"] = ((p.T1, p.N1, p.rope_d), p.dtype)
        shapes["dk_rope"] = ((p.T2, p.N2, p.rope_d), p.dtype)
    return {k: (np.zeros(s, dt) if full else TensorSpec(s, dt)) for k, (s, dt) in shapes.items()}


def _meta(til, kernel: str) -> dict:
    return {"operator": "FlashAttentionUnpaddingScoreGradV5", "kernel": kernel,
            "tiling": {"template": til.template, "cannTemplate": til.cannTemplate, "blockDim": til.blockDim,
                       "sections": til.sections, "blocks": til.blocks}}


def _side_trace():
    """Trace level of the pre and post launches: the call's, except that a ``file:PATH`` trace is the main
    launch's alone (the others would overwrite its file); they keep a summary then."""
    level = call_trace_level()
    return "summary" if isinstance(level, str) and level.startswith("file:") else level


def launch_pre(til, spec, mode: str, ws, l2_warm=None):
    """*l2_warm* as npusim.launch.launch (estimate mode's samples start at a later L2 state)."""
    return launch(fag_pre, (GmArg("workspace", ws), til), block_dim=spec.aiv_count, chip=spec, mode=mode,
                  kernel_type="vector", meta=_meta(til, "pre"), trace=_side_trace(), l2_warm=l2_warm)


def launch_main(problem, til, spec, mode: str, inputs: dict, ws, l2_warm=None, bw_bucket_cycles=None):
    """*l2_warm*, *bw_bucket_cycles* as npusim.launch.launch (estimate mode's samples of a few cores)."""
    full = mode == "full"
    gm = [GmArg(name, gm_data(inputs[name], full)) if inputs.get(name) is not None else None for name in INPUTS]
    return launch(fag_main, (*gm, GmArg("workspace", ws), til, kernel_args(problem)), block_dim=til.blockDim,
                  chip=spec, mode=mode, kernel_type="mix", meta=_meta(til, "main"), l2_warm=l2_warm,
                  bw_bucket_cycles=bw_bucket_cycles)


def launch_post(problem, til, spec, mode: str, ws, outs: dict, l2_warm=None):
    gm = [GmArg(k, outs[k]) if k in outs else None for k in ("dq", "dk", "dv", "dsink", "dq_rope", "dk_rope")]
    return launch(fag_post, (GmArg("workspace", ws), *gm, til, kernel_args(problem)), block_dim=spec.aiv_count,
                  chip=spec, mode=mode, kernel_type="vector", meta=_meta(til, "post"), trace=_side_trace(),
                  l2_warm=l2_warm)


def run_launches(problem, til, spec, mode: str, inputs: dict) -> tuple[dict, dict, object]:
    """The three launches of one call: ({"pre", "main", "post"} results, outputs, workspace)."""
    full = mode == "full"
    ws_bytes = til.workspaceSize - SYSTEM_WORKSPACE_BYTES
    ws = np.zeros(ws_bytes, np.uint8) if full else TensorSpec((ws_bytes,), np.uint8)
    outs = outputs(problem, full)
    pre = launch_pre(til, spec, mode, ws)
    main = launch_main(problem, til, spec, mode, inputs, ws)
    post = launch_post(problem, til, spec, mode, ws, outs)
    return {"pre": pre, "main": main, "post": post}, outs, ws
