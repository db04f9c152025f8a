"""Estimate mode of FlashAttentionUnpaddingScoreGradV5: sampled timing runs, extrapolated; the timeout verdict.

Why sampling: the three launches are regular. The main kernel's time is close to linear in the block
count of its busiest core (sections run round-robin, every block runs the same instruction sequence
up to its size and mask); pre and post are streaming loops whose time is linear in the steps of
one AIV. Each is simulated in timing mode on two small samples of the real tiling, and the line
through the two points is read at the real size:

- main: the first blockDim sections (one round) and the first 2 x blockDim (two rounds), x = the
  busiest core's block count; a main with <= 2 rounds is simulated whole;
- pre / post: outputs cut to 1 and 2 steps per AIV, x = elements per AIV.

Not covered: the post kernel's dsink reduction (a sink adds one Add per block on AIV 0, left out).
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


def _sections(til, nsec: int):
    """The tiling cut to its first *nsec* sections."""
    nblk = til.secStart[nsec]
    cut = {f: getattr(til, f)[:nblk] for f in ("blkB", "blkN", "blkS1o", "blkS2o", "blkRows", "blkCols", "blkMasked")}
    return replace(til, sections=nsec, secStart=til.secStart[:nsec + 1], **cut)


def _busiest(til) -> int:
    """Blocks of the busiest core."""
    per = [0] * til.blockDim
    for s in range(til.sections):
        per[s % til.blockDim] += til.secStart[s + 1] - til.secStart[s]
    return max(per) if per else 0


def _line(x1: float, y1: float, x2: float, y2: float, x: float) -> float:
    return y1 if x2 == x1 else y1 + (y2 - y1) * (x - x1) / (x2 - x1)


def _ws(til):
    return TensorSpec((til.workspaceSize - SYSTEM_WORKSPACE_BYTES,), "uint8")


def _main_cycles(problem, til, spec, inputs) -> float:
    rounds = -(-til.sections // til.blockDim) if til.sections else 0
    if rounds <= 2:
        return launch_main(problem, til, spec, "timing", inputs, _ws(til)).cycles
    pts = []
    for r in (1, 2):
        sub = _sections(til, r * til.blockDim)
        pts += [_busiest(sub), launch_main(problem, sub, spec, "timing", inputs, _ws(sub)).cycles]
    return _line(*pts, _busiest(til))


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
