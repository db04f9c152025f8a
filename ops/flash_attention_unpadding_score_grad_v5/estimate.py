"""Estimate mode of FlashAttentionUnpaddingScoreGradV5: the work counted, a few cores simulated, extrapolated.

The three launches are regular, so a small part of each, run on the real kernels in timing mode,
stands for the whole:

- main (the mix kernel): the work is counted without listing blocks (work.py): sections and blocks per
  AI Core of the round-robin split. Up to COMPANIONS of the most loaded cores run side by side, one per
  distinct sequence of (blocks, masked) sections (a core's time depends on the order of its full and
  diagonal sections: on S=2048 N=8 D=128 causal, cores with the same 58 blocks end 11% apart), on a chip
  whose HBM and L2 bandwidth is their share of the launch's load-weighted busy cores
  (npusim.estimate.contention_chip), with the inputs L2-resident as in the launch (l2_warm). When their
  sections fit SIM_BLOCKS blocks they run whole and the latest core is the estimate. Otherwise each runs
  an evenly spaced sample of its own sections, twice (K and K/2 sections), and the most loaded core's
  time is read off the line through the two runs at its real block count, so pipeline fill and the sfmg
  pre-pass are counted once and every other block at its sampled marginal cost.
- pre and post (streaming vector kernels on every AIV): simulated whole up to STREAM_STEPS steps per
  AIV, beyond that at STREAM_STEPS / 2 and STREAM_STEPS steps and extrapolated on the line through them.

pse, dropout and prefix run in the sample as in the full launch (the drop-mask adapter pass of unaligned
rows with the simulated cores' share of the bits). ``benchmarks/estimate_accuracy_fag.py`` measures the
error against timing mode on a tuning and a checking half of its grid (only the tuning half chose
SIM_BLOCKS, COMPANIONS and the sample sizes).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from npusim.estimate import Estimate, contention_chip
from npusim.launch import TimeoutVerdict
from npusim.memory.gm import TensorSpec
from ops.flash_attention_unpadding_score_grad_v5.kernel import POST_ELEMS
from ops.flash_attention_unpadding_score_grad_v5.launch import launch_main, launch_post, launch_pre
from ops.flash_attention_unpadding_score_grad_v5.tiling import SYSTEM_WORKSPACE_BYTES

COMPANIONS = 4  # AI Cores simulated side by side (the busiest and the ones spread over the load ranking);
# 8 gave the same estimates on the tuning half (S=2048 N=8 D=128 causal: 360.9 vs 363.0 us, timing 397.7)
SIM_BLOCKS = 240  # blocks simulated at most per run (~260 instructions each on the main kernel); chosen on
# the tuning half: 480 gave the same errors there (max 8.7%, the rest within 2.2%) at twice the CPU time
PATTERN_SECTIONS = 16  # cores with at most this many sections are told apart by their section sequence
MIN_SAMPLE_SECTIONS = 4  # sections per core in the larger sample at least (the smaller one has half)
STREAM_STEPS = 256  # pre/post steps per AIV simulated at most (each step POST_ELEMS elements)


def _line(x1: float, y1: float, x2: float, y2: float, x: float) -> float:
    return y1 if x2 == x1 else y1 + (y2 - y1) * (x - x1) / (x2 - x1)


def _ws(til):
    return TensorSpec((til.workspaceSize - SYSTEM_WORKSPACE_BYTES,), "uint8")


def _pattern(work, core: int):
    """The (blocks, masked) sequence of *core*'s sections when it is short enough to compare, else the core."""
    n = int(work.core_sections[core])
    if n > PATTERN_SECTIONS:
        return core
    return tuple(work.section_counts(core + j * work.block_dim) for j in range(n))


def _subset(work) -> list[int]:
    """The cores simulated: the most loaded ones, one per distinct section sequence (a core's time depends on
    the order of its full and diagonal sections, not only on its block count: the pipeline between a
    section's cube and vector phases stalls differently), ordered so that in an interleaved tiling a core
    that runs out of sections is never followed by one that has more."""
    order = sorted((c for c in range(work.block_dim) if work.core_sections[c] > 0),
                   key=lambda c: (-work.core_blocks[c], c))
    picked, seen = [], set()
    for c in order:
        key = _pattern(work, c)
        if key not in seen:
            seen.add(key)
            picked.append(c)
        if len(picked) == COMPANIONS:
            break
    return sorted(picked, key=lambda c: (-work.core_sections[c], -work.core_blocks[c], c))


def _core_positions(work, core: int, count: int | None) -> list[int]:
    """Global section indices of *core*: all of them, or *count* evenly spaced ones (in run order)."""
    n = int(work.core_sections[core])
    if count is None or count >= n:
        js = range(n)
    elif count <= 1:
        js = [0]
    else:
        js = sorted({int(round(i * (n - 1) / (count - 1))) for i in range(count)})
    return [core + j * work.block_dim for j in js]


def _sample_tiling(problem, til, work, cores: list[int], positions: dict) -> tuple:
    """A tiling of len(cores) AI Cores, subset core i running the sections *positions[c]* in order (section
    j * len(cores) + i); and the simulated block count of each."""
    k = len(cores)
    rounds = max(len(positions[c]) for c in cores)
    sections = []
    for j in range(rounds):
        for c in cores:
            if j < len(positions[c]):
                sections.append(work.blocks_of(problem, positions[c][j]))
    flat = [blk for sec in sections for blk in sec]
    starts = np.concatenate(([0], np.cumsum([len(s) for s in sections]))).astype(int)
    cols = list(zip(*flat))
    sample = replace(til, blockDim=k, sections=len(sections), secStart=tuple(int(x) for x in starts),
                     blkB=cols[0], blkN=cols[1], blkS1o=cols[2], blkS2o=cols[3], blkRows=cols[4], blkCols=cols[5],
                     blkMasked=tuple(bool(x) for x in cols[6]), sfmgWorkers=2 * til.blockDim,
                     # the sfmg rows and the drop-mask adapter's bits are shared by every AIV of the full
                     # launch: the simulated cores' AIVs take their share of them only
                     dropAdapterBits=-(-til.dropAdapterBits // til.blockDim) * k if til.dropAdapterBits else 0)
    simulated = [sum(len(sections[j * k + i]) for j in range(len(positions[c]))) for i, c in enumerate(cores)]
    return sample, simulated


def _main_cycles(problem, til, work, spec, inputs) -> float:
    """The main launch's cycles (module docstring): the latest simulated core, extrapolated when sampled."""
    cores = _subset(work)
    if not cores:
        return launch_main(problem, til, spec, "timing", inputs, _ws(til)).cycles
    active = float(work.core_blocks.sum()) / float(work.core_blocks.max())
    chip = contention_chip(spec, active / len(cores))
    sizes = {k: int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for k, v in inputs.items()}
    warm = (sum(sizes.values()), {k: 1.0 for k in sizes})

    def run(count):
        """(end cycle per subset core, simulated blocks per subset core) of one sample launch."""
        sample, simulated = _sample_tiling(problem, til, work, cores, {c: _core_positions(work, c, count)
                                                                        for c in cores})
        res = launch_main(problem, sample, chip, "timing", inputs, _ws(til), l2_warm=warm)
        ends = res.trace.df.groupby("core")["end_cycle"].max()
        return [float(ends.get(i, 0.0)) for i in range(len(cores))], simulated, res.cycles - float(ends.max())

    if sum(int(work.core_blocks[c]) for c in cores) <= SIM_BLOCKS:
        return _whole(run)
    per_section = float(work.core_blocks[cores].sum()) / float(work.core_sections[cores].sum())
    big = max(MIN_SAMPLE_SECTIONS, int(SIM_BLOCKS / (len(cores) * per_section)))
    (e_small, w_small, _), (e_big, w_big, overhead) = run(big // 2), run(big)
    # a long core's section order averages out: the most loaded core's line is the estimate (the latest of
    # several extrapolated lines would pick up their sampling noise: +11% on two tuning cases)
    i = max(range(len(cores)), key=lambda j: (work.core_blocks[cores[j]], -cores[j]))
    return _line(w_small[i], e_small[i], w_big[i], e_big[i], float(work.core_blocks[cores[i]])) + overhead


def _whole(run) -> float:
    ends, _, overhead = run(None)
    return max(ends) + overhead


def _per_aiv(total: int, spec) -> int:
    return -(-total // spec.aiv_count)


def _streamed(real_steps: float, run) -> float:
    """Cycles of a streaming launch of *real_steps* steps per AIV: whole, or on the line through two runs."""
    if real_steps <= STREAM_STEPS:
        return run(None)
    a, b = STREAM_STEPS // 2, STREAM_STEPS
    return _line(a, run(a), b, run(b), real_steps)


def _pre_cycles(til, spec) -> float:
    real = _per_aiv(til.copies * til.copyBytes // 4, spec)

    def run(steps):
        sub = til if steps is None else replace(til, copyBytes=steps * POST_ELEMS * spec.aiv_count * 4 // til.copies)
        return launch_pre(sub, spec, "timing", _ws(til)).cycles
    return _streamed(real / POST_ELEMS, run)


def _post_cycles(problem, til, spec) -> float:
    shapes = {"dq": problem.q_shape, "dk": problem.kv_shape, "dv": problem.kv_shape}
    if problem.rope_d:
        shapes |= {"dq_rope": (problem.T1, problem.N1, problem.rope_d),
                   "dk_rope": (problem.T2, problem.N2, problem.rope_d)}
    p_nosink = replace(problem, sink=False)
    steps = max(_per_aiv(int(np.prod(s)), spec) for s in shapes.values()) / POST_ELEMS

    def run(count):
        if count is None:
            outs = {k: TensorSpec(s, problem.dtype) for k, s in shapes.items()}
        else:
            outs = {k: TensorSpec((count * POST_ELEMS * spec.aiv_count,), problem.dtype) for k in shapes}
        return launch_post(p_nosink, til, spec, "timing", _ws(til), outs).cycles
    return _streamed(steps, run)


def estimate_fag(problem, til, spec, work) -> tuple[Estimate, dict]:
    """Estimated cycles and time of the three launches (module docstring), and each launch's cycles.
    ``error_bound`` is NaN: the error is measured by benchmarks/estimate_accuracy_fag.py, not guaranteed."""
    inputs = _spec_inputs(problem)
    spec = spec.replace(aicore_timeout_s=float("inf"))  # samples never stop at the timeout: the verdict does
    parts = {"pre": _pre_cycles(til, spec), "main": _main_cycles(problem, til, work, spec, inputs),
             "post": _post_cycles(problem, til, spec)}
    cycles = int(round(sum(parts.values())))
    per_block = parts["main"] / work.blocks if work.blocks else 0.0
    est = Estimate(cycles=cycles, time_us=cycles / spec.clock_hz * 1e6,
                   per_core_cycles=np.array([parts["main"]]), fixed_cycles=parts["pre"] + parts["post"],
                   classes={"blocks": (work.blocks, per_block)}, error_bound=float("nan"))
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
