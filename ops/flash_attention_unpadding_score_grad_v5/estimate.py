"""Estimate mode of FlashAttentionUnpaddingScoreGradV5: sampled timing runs, extrapolated; the timeout verdict.

Why sampling: the three launches are regular. The main kernel's cores run independent sections
(round-robin) and meet only in GM bandwidth; pre and post are streaming loops whose time is linear in
the elements of one AIV. So:

- main: the busiest core (most blocks) alone, with its 1 / blockDim share of the HBM bandwidth and
  the inputs L2-resident; a main with one round of sections is simulated whole;
- pre / post: simulated with outputs cut to 1 and 2 steps per AIV; the line through the two points
  is read at the real elements per AIV.

pse, dropout and prefix run in the sample as in the full launch (the drop-mask adapter pass of unaligned
rows with the sample core's share of the bits). Not covered: the post kernel's dsink reduction (a sink adds one Add per block on AIV 0, left out).
``benchmarks/fag.py --estimate`` measures the error against timing mode on shapes this module was
not tuned on.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from npusim.estimate import Estimate
from npusim.launch import TimeoutVerdict
from npusim.memory.gm import TensorSpec
from ops.flash_attention_unpadding_score_grad_v5.kernel import POST_ELEMS
from ops.flash_attention_unpadding_score_grad_v5.launch import launch_main, launch_post, launch_pre
from ops.flash_attention_unpadding_score_grad_v5.tiling import SYSTEM_WORKSPACE_BYTES

SAMPLE_TIMEOUT_S = 1e9


def _line(x1: float, y1: float, x2: float, y2: float, x: float) -> float:
    return y1 if x2 == x1 else y1 + (y2 - y1) * (x - x1) / (x2 - x1)


def _ws(til):
    return TensorSpec((til.workspaceSize - SYSTEM_WORKSPACE_BYTES,), "uint8")


def _busiest_core_tiling(til):
    """A one-core tiling holding the sections of the core with the most blocks (its run order kept)."""
    per = [0] * til.blockDim
    for sec in range(til.sections):
        per[sec % til.blockDim] += til.secStart[sec + 1] - til.secStart[sec]
    core = max(range(til.blockDim), key=per.__getitem__)
    secs = list(til.core_sections(core))
    rows = [i for sec in secs for i in range(til.secStart[sec], til.secStart[sec + 1])]
    starts = [0]
    for sec in secs:
        starts.append(starts[-1] + til.secStart[sec + 1] - til.secStart[sec])
    cut = {f: tuple(getattr(til, f)[i] for i in rows)
           for f in ("blkB", "blkN", "blkS1o", "blkS2o", "blkRows", "blkCols", "blkMasked")}
    # the sfmg rows and the drop-mask adapter's bits are shared by every AIV of the full launch: the sample's AIVs
    # take their share of them only
    adapter = -(-til.dropAdapterBits // til.blockDim) if til.dropAdapterBits else 0
    return replace(til, blockDim=1, sections=len(secs), secStart=tuple(starts), sfmgWorkers=2 * til.blockDim,
                   dropAdapterBits=adapter, **cut)


def _main_cycles(problem, til, spec, inputs) -> float:
    """The busiest core alone, with its 1 / blockDim share of the HBM bandwidth (every core streams from HBM)
    and the L2 inputs resident as in the full launch. The L2 rate is not divided: a core's L2 reads are
    bounded by its own MTE2 path (chosen on S=3000 N=4 D=64 causal: dividing it too gave +13.8%)."""
    if til.blockDim == 1 or til.sections <= til.blockDim:
        return launch_main(problem, til, spec, "timing", inputs, _ws(til)).cycles
    share = spec.replace(hbm_bw_bytes_per_s=spec.hbm_bw_bytes_per_s / til.blockDim)
    one = _busiest_core_tiling(til)
    sizes = {k: int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for k, v in inputs.items()}
    warm = (sum(sizes.values()), {k: 1.0 for k in sizes})
    return launch_main(problem, one, share, "timing", inputs, _ws(til), l2_warm=warm).cycles


def _per_aiv(total: int, spec) -> int:
    return -(-total // spec.aiv_count)


def _pre_cycles(til, spec) -> float:
    real = _per_aiv(til.copies * til.copyBytes // 4, spec)
    pts = []
    for steps in (1, 2):
        sub = replace(til, copyBytes=steps * POST_ELEMS * spec.aiv_count * 4 // til.copies)
        pts += [steps * POST_ELEMS, launch_pre(sub, spec, "timing", _ws(til)).cycles]
    return _line(*pts, real)


def _post_cycles(problem, til, spec) -> float:
    shapes = {"dq": problem.q_shape, "dk": problem.kv_shape, "dv": problem.kv_shape}
    if problem.rope_d:
        shapes |= {"dq_rope": (problem.T1, problem.N1, problem.rope_d),
                   "dk_rope": (problem.T2, problem.N2, problem.rope_d)}
    real = sum(_per_aiv(s[0] * s[1] * s[2], spec) for s in shapes.values())
    p_nosink = replace(problem, sink=False)
    pts = []
    for steps in (1, 2):
        outs = {k: TensorSpec((steps * POST_ELEMS * spec.aiv_count,), problem.dtype) for k in shapes}
        pts += [steps * POST_ELEMS * len(shapes), launch_post(p_nosink, til, spec, "timing", _ws(til), outs).cycles]
    return _line(*pts, real)


def estimate_fag(problem, til, spec) -> tuple[Estimate, dict]:
    """Estimated cycles and time of the three launches (module docstring), and each launch's cycles.
    ``error_bound`` is NaN: the error is measured by benchmarks/fag.py, not guaranteed."""
    inputs = _spec_inputs(problem)
    spec = spec.replace(aicore_timeout_s=SAMPLE_TIMEOUT_S)  # samples never stop at the timeout: the verdict does
    parts = {"pre": _pre_cycles(til, spec), "main": _main_cycles(problem, til, spec, inputs),
             "post": _post_cycles(problem, til, spec)}
    cycles = int(round(sum(parts.values())))
    per_block = parts["main"] / til.blocks if til.blocks else 0.0
    est = Estimate(cycles=cycles, time_us=cycles / spec.clock_hz * 1e6,
                   per_core_cycles=np.array([parts["main"]]), fixed_cycles=parts["pre"] + parts["post"],
                   classes={"blocks": (til.blocks, per_block)}, error_bound=float("nan"))
    return est, parts


def _spec_inputs(problem) -> dict:
    """Data-less GM inputs of the main kernel (shapes only; the atten_mask as its validated shape)."""
    p = problem
    dt, f32 = p.dtype, "float32"
    sm = (p.T1, p.N1, 8) if p.softmax_in_layout == "same_as_input" else (p.N1, p.T1, 8)
    out = {"query": TensorSpec(p.q_shape, dt), "key_in": TensorSpec(p.kv_shape, dt),
           "value": TensorSpec(p.kv_shape, dt), "dy": TensorSpec(p.q_shape, dt),
           "attention_in": TensorSpec(p.q_shape, dt), "softmax_max": TensorSpec(sm, f32),
           "softmax_sum": TensorSpec(sm, f32)}
    if p.atten_mask_shape:
        out["atten_mask"] = TensorSpec(p.atten_mask_shape, "uint8")
    if p.sink:
        out["sink_in"] = TensorSpec((p.N1,), f32)
    if p.rope_d:
        out["query_rope"] = TensorSpec((p.T1, p.N1, p.rope_d), dt)
        out["key_in_rope"] = TensorSpec((p.T2, p.N2, p.rope_d), dt)
    if p.pse_form != "none":
        out["pse_shift"] = TensorSpec(p.pse_shape, f32 if p.pse_form == "slope" else dt)
    if p.dropout:
        out["drop_mask"] = TensorSpec((p.drop_mask_bytes,), "uint8")
    return out


def split_advice(problem, predicted_s: float, limit_s: float) -> TimeoutVerdict:
    """The AI Core timeout verdict of the main launch's estimate, with how to split when exceeded."""
    exceeded = predicted_s > limit_s
    advice = ""
    if exceeded:
        parts = int(-(-predicted_s // (0.8 * limit_s)))
        advice = (f"split the call: about {parts} launches, e.g. the batches (actual_seq_qlen) or the heads "
                  f"(N1 = {problem.N1}) into {parts} groups, each under {0.8 * limit_s:g} s")
    return TimeoutVerdict(predicted_s, limit_s, exceeded, advice)
