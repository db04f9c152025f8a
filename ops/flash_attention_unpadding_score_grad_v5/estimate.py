"""Estimate mode of FlashAttentionUnpaddingScoreGradV5: the work counted, a subset of cores simulated, extrapolated.

The three launches are regular, so a small part of each, run on the real kernels in timing mode,
stands for the whole:

- main (the mix kernel): the work is counted without listing blocks (work.py): sections and blocks per
  AI Core of the round-robin split. A subset of the busy cores at evenly spaced ranks of the load
  ranking (the most loaded one included) runs side by side, on a chip whose HBM and L2 bandwidth is the
  subset's share of the busy cores (npusim.estimate.contention_chip), with the inputs L2-resident as in
  the launch (l2_warm). The traces showed why a subset of only the busiest cores misleads: the busy
  cores finish at different times, so the bandwidth each gets changes over the launch, and a core's own
  time depends on the order of its full and diagonal sections (on S=2048 N=8 D=128 causal, cores with the
  same 58 blocks end 9% apart); cores drawn across the ranking reproduce how the load falls off, and
  each runs its real section sequence. When the COMPANIONS cores' sections fit SIM_BLOCKS blocks they
  run whole and the latest core is the estimate. Otherwise SAMPLE_CORES cores each run a sample of their
  own sections with the core's mix of section classes (full, diagonal, edge: they cost differently per
  block), the same share of each core's sections (K for the most loaded one, at least BASIC_SAMPLE_SECTIONS,
  GENERIC_SAMPLE_SECTIONS or MIN_SAMPLE_SECTIONS; generic: from each AIV's run in proportion), so that the
  lighter cores finish first as in the launch. The ring's steady cost, a line of cycles per step and per block, is
  read off that one run, between each core's MARK_HEAD-th ring step and its last but MARK_TAIL (_step_marks,
  _steady_cost: the cube's SetAtomicNone after each step's last Cube23), pooled over the simulated cores; every
  simulated core's time is extended at that cost to its real steps and blocks and the latest is the estimate. (A second
  run of every other section, or for SameAB the first half, gives the cost per block by difference where the
  marks are missing; it also gives the prologue's line when the sample runs part of the prologue.) For
  RING_TEMPLATES (basic_bn2), the
  kernel's ring (cube Cube1 / Cube23, the AIVs' passes, their flags) is run as a recurrence over the
  core's own sections, each at the mean costs of its class read off the sample's flags
  (_ring_costs, _ring_end, _ring_estimate); the prologue before SyncAll (sfmg rows, fp32
  transposes, drop-mask adapter) runs at most PROLOGUE_STEPS sfmg steps per AIV, at two lengths, and is
  extrapolated on its own line. The samples' L2 model starts with the inputs resident and its touched bytes
  at the inputs' pages the launch's copies touch (_touched_inputs: strided per-head copies touch a fraction
  of a tensor's pages in the model); where those exceed L2, at the launch's average L2 state
  (npusim.estimate.steady_l2_touched of the inputs' sizes). Samples of listed work then count each new page of
  their cores' own section buffers for the busy cores each stands for (sample_l2), so that their touched bytes pass
  L2 where the launch's do.
- pre and post (streaming vector kernels on every AIV): simulated whole up to STREAM_STEPS steps per
  AIV; beyond that as two miniatures on a few AIVs with the L2 shrunk in proportion (_streamed).

pse, dropout and prefix run in the sample as in the full launch (the drop-mask adapter pass of unaligned
rows with the simulated cores' share of the bits). ``benchmarks/estimate_accuracy_fag.py`` measures the
error against timing mode on a tuning set (the only configurations the knobs below were chosen on) and
a fresh random checking set.
"""
from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import numpy as np

from npusim.estimate import Estimate, contention_chip
from npusim.launch import TimeoutVerdict
from npusim.memory.bandwidth import BUCKET_CYCLES
from npusim.memory.gm import TensorSpec, page_union
from npusim.types import Pipe
from ops.common.cube_tiles import c16
from ops.common.l2_warm import start_touched
from ops.common.transpose import unit_tokens
from ops.common.ragged import ragged_arange
from ops.flash_attention_unpadding_score_grad_v5.dtm_rounds import (HEAD, key_ids, launch_costs, replay_rounds,
                                                                    section_costs, sync_gaps)
from ops.flash_attention_unpadding_score_grad_v5.kernel import (ADD_ELEMS, POST_ELEMS, det_reduce_groups, det_vec_kinds,
                                                                dtm_groups, sab_vec_kinds, sfmg_rows)
from ops.flash_attention_unpadding_score_grad_v5.l2_path import (follow_map, launch_curve, sample_curve, step_loads,
                                                                 traceable)
from ops.flash_attention_unpadding_score_grad_v5.launch import kernel_args, launch_main, launch_post, launch_pre
from ops.flash_attention_unpadding_score_grad_v5.sample_l2 import counted_pages
from ops.flash_attention_unpadding_score_grad_v5.tiling import (BASE, LISTED_WORK_BLOCKS, SYSTEM_WORKSPACE_BYTES,
                                                                block_dim_override, fag_tiling, run_template, sab_work)
from ops.flash_attention_unpadding_score_grad_v5.work import aiv_runs, count_work

COMPANIONS = 12  # AI Cores simulated side by side when the subset runs whole (evenly spaced load ranks)
#: AI Cores simulated side by side when the sections are sampled. Each stands for busy / SAMPLE_CORES cores at that
#: share of the chip's bandwidth, so their bursts meet as often as a group's would; the launch's cores spread theirs
#: (timing before 7137ec1: with all 24 cores sampled the tuning set's SameAB S 3311 N 16/8 causal came out +0.4%,
#: with 8 +4.2%, with 12 +2.2%). 12 rather than 8, with one sample run where two ran (_steady_cost), cost +6..13%
#: estimate CPU on five sampled tuning calls (alternating runs at load ~10)
SAMPLE_CORES = 12
SIM_BLOCKS = 1200  # blocks simulated at most when the subset runs whole
#: the SAMPLE_CORES cores run whole, not sampled, where the sample would hold at least this share of the most loaded
#: one's sections: extrapolating then saves at most a third of the run, and the sample's window is mostly its start
#: and its ramp-down (basic S 4096 N 8 D 128 causal: 8 of the 12 sections of each core sampled; 2 of the 4 steps of the
#: heavy cores' window ran after the sample's lighter cores had ended, at 105k and 82k cycles against 124-128k while
#: every core ran, and the 4 extended steps were priced at 110k: -2.50%, whole -0.11%). Non-det tuning set (timing of
#: cd47ceb): basic max 2.50 -> 1.65%, mean 0.81 -> 0.60%; ten calls moved, S 8192 N 2/2 causal +0.25 -> +1.33% (its
#: 12 of 24 cores' contention), estimate CPU +0.0-0.1 s. A share of 1/2 gave the same maxima and moved eight more
#: calls, at up to +0.38 s CPU (generic S 4582 N 4/2 D 256 fp32: 0.78 -> 1.16 s at load ~6.5)
WHOLE_SHARE = Fraction(2, 3)
DTM_BLOCKS = 2400  # blocks of an IS_DTM call's rounds simulated at most (all its rounds when they fit)
REPLAY_BLOCKS = 1600  # the same for SameAB IS_DTM, whose rounds are re-run from the sample's section costs
OPS_BLOCKS = 20000  # blocks of an IS_DTM call whose rounds' reduction groups are listed at most (_reduce_ops)
#: an IS_DTM sample runs the whole prologue where it would run this share of it at least (PROLOGUE_STEPS): the rest
#: costs less than the shorter run the prologue's line needs (S 2477 N 16/8 D 256 causal, 93% of it: estimate CPU
#: 1.70 -> 1.48 s at load 4, +1.14 -> +1.07%; at 0.5, S 3653/722/163's 68% moved -0.62 -> -1.09% at no CPU gain)
DTM_WHOLE_PROLOGUE = 0.75
SAMPLE_BLOCKS = 240  # blocks per core-sample run at most (the larger run where two run)
#: sections per core in the larger sample at least (the smaller one has half) for SameAB, whose smaller run is the
#: larger run's first half (PREFIX_TEMPLATES). Two start effects made its sample runs' difference a poor cost per
#: block: the ring's start (the cube waits for the AIVs' first pass unless the second CV block's Cube1 covers it, so
#: the cube waits of two runs that start with different CV blocks differ by ~35-65k cycles that the difference then
#: charges per block: S 2226 kv 5666 N 4/1 D 256 +8.3%, its whole path +1.0%) and the launch's first two CV blocks per
#: core, dearer than the rest (S 3311 N 16/8 D 256 causal: the cube's cycles per block ~12.9-13.0k at positions 0-1,
#: ~11.6-11.9k from position 2 on; the sample's cores stay in that start while they run 2-4 CV blocks). Runs that
#: share their start and differ by positions 4-7 avoid both: on the tuning set's ten sampled SameAB calls the errors
#: went from -5.1 .. +8.3% (4 / 2 CV blocks, every other one) to -1.0 .. +2.0% except the band call S 2416/3936/5951
#: N 8/2 D 192 (+4.9%; +1.1% with 12 / 6, which left S 2928 kv 1100 N 16/4 D 128 at -7.2%: its latest core, not its
#: most loaded one, waits on vector passes in its own order of short and full CV blocks). Tried first, not kept: 4 / 2 with the first half (-5.2 .. +5.3%); the
#: cube's idle before its first Cube23 taken out of the difference (one call -11.7%); the busier of the cube's and
#: the AIVs' busy cycles the runs differ by (-6.6 .. +6.8%); basic_bn2's ring (+4.2 .. +8.8%: a class mean of the
#: sample's start-heavy costs). Earlier: 8 / 4 every other one (+8.3%, +5.1%), all busy cores sampled (+6.8%), cost
#: per covered area (+10.6%), the lighter cores' bandwidth handed to the others as they finish (+7.5%)
MIN_SAMPLE_SECTIONS = 8
#: templates whose smaller sample run is the larger run's first half rather than every other section of it (see
#: MIN_SAMPLE_SECTIONS); on the basic and generic templates the first half moved tuning calls the other way (basic
#: S 4096 N 8 causal blockDim 10: +0.8% -> -3.8%; generic S 4582 D 256 fp32: -0.4% -> -2.4%)
PREFIX_TEMPLATES = ("sameab",)
#: the same for the basic template's 4 x 4-block sections: a smaller run of 2 sections still carries the start of the
#: ring (the cube's first sections overlap the AIVs' prologue), so its difference to the larger run was 13-18% off per
#: block on an earlier checking set's calls (tuning calls now); from 4 vs 8 sections 1-3% (docs/fag.md). basic_bn2
#: (its CV blocks priced by class through its ring, RING_TEMPLATES) takes as many: 16 gave the same on the tuning
#: set's four sampled calls. 12 / 6 (tried on the seven sampled basic tuning calls): S 8192 N 2 causal +4.0% -> +2.4%
#: (its cores' last sections run cheaper in the launch as the cores with one section fewer finish), but S 417/1539/2767
#: N 16/8 +1.4% -> +4.0% and S 3288/4322/158 +2.0% -> +2.9%: not kept
BASIC_SAMPLE_SECTIONS = 8
#: the same for the generic template, whose ring step holds one CV block of each AIV's run: the ring fills over its
#: first 3-4 steps after the prologue (a T = 4582 D = 256 fp32 call: 116-142k cycles a step, then 173k), so the
#: smaller run must hold 4 steps (8 CV blocks) for the two runs to differ by steady steps (that call: -5.07% with 8
#: and 4 CV blocks, -2.29% with 12 and 6, -0.36% with 16 and 8)
GENERIC_SAMPLE_SECTIONS = 16
#: templates whose sampled cores are extended over their own launch ring steps with repeats and class changes priced
#: apart (_step_pricer, _step_extension); the others at the steady line over the size and steps they have left
STEP_PAIR_TEMPLATES = ("generic", "sameab")
#: of those, the templates whose ring steps are priced by their context (_context_pricer: own size, next size, growth
#: over the step before): SameAB, whose step is one CV block both AIVs share by rows. A generic step holds two CV
#: blocks, each worked whole by its own AIV, and costs by the larger one's vector pass where the two differ (S 1845/166
#: /1309 kv 152/439/1321 blockDim 9, timing mode: 84 + 512 fractals 52.3k cycles, 152 + 512 51.2k, 224 + 512 55.7k,
#: 512 + 512 76.1k), which a line over the step's summed sizes does not follow (that call +2.61% on it, -0.01% on
#: _step_pricer); lines with per-AIV growth or the larger run's size did no better on the generic tuning calls
CONTEXT_TEMPLATES = ("sameab",)
#: templates whose sampled cores keep each run's lead (_with_run_leads), and its most sections
LEAD_TEMPLATES = ("sameab",)
LEAD_SECTIONS = 4
#: templates whose sampled cores are estimated by their ring (_ring_estimate) rather than at the two runs' cost per
#: block: basic_bn2, whose cores run whole (batch, key/value head) pairs of full, band-edge, corner and short-row CV
#: blocks of very different costs per block (on the tuning set's four sampled basic_bn2 calls: -0.77% .. -0.08% by the
#: ring, -2.1% .. +46.4% by the cost per block of the CV blocks the two runs differ by). On the tuning set's seven
#: sampled basic calls (round-robin over many cores) the ring came out within 1.7% on six and -5.6% on the seventh
#: (cost per block: within 4.0%), on its one sampled generic call +2.7% (-0.4%): there the cube's costs follow the
#: launch's changing contention, which a class mean of the sample's costs averages away
RING_TEMPLATES = ("basic_bn2",)
#: a ring template's sampled core takes one section of every class of its sections at least, up to RING_COVER times
#: its share: the ring prices each class at its sampled mean, and a class no sample holds only by the line of
#: _class_fit (on the tuning set's eight sampled basic_bn2 calls, timing of 83287ef: within -2.89 .. +0.29% with the
#: share alone, -1.41 .. +1.00% with every class; S 667/1475 N 16/8 D 64 fp32: 8 sampled sections of 64 held 3 of 12
#: classes, its estimate CPU went 0.34 -> 0.85 s, the others' by 0.0-0.1 s, at load ~4)
RING_COVER = 2
#: templates whose sampled cores run their launch's ramp-down whole (_tail_runs): the sections each core runs after
#: the lightest busy core has ended, after a sample of its earlier ones, which alone are extrapolated, at the cost of
#: the steps during which every sampled core ran (_running_cost). Extrapolating the whole core at a window's cost
#: priced the launch's ramp-down at the window's share of the sample's ramp-down (basic S 2316/403/643 N 16/16 D 64
#: sparse 3: window 26% ramp-down, the extended sections 15%, -3.1%; S 2716/398/1396 N 16/8 the other way, +2.1%)
TAIL_TEMPLATES = ("basic",)
RING_SECTIONS = 20000  # sections of a core run through the ring at most (beyond: evenly spaced, scaled)
PROLOGUE_STEPS = 16  # sfmg steps per AIV simulated at most in a sample (beyond: two shorter prologues, a line)
#: ring steps left out of the steady-state cost at a sampled core's start and end (_steady_cost)
MARK_HEAD = 2
MARK_TAIL = 1
CLASS_PROBES = 4096  # sections of a core classified at most to sample its mix of section classes
#: pre/post steps per AIV simulated whole at most (each step POST_ELEMS elements; 103 steps of post ran in 0.5 s CPU,
#: where the miniature's line came out 76% over on a long-q short-kv call: its 8 AIVs pay more per step)
STREAM_STEPS = 192
STREAM_AIVS = 8  # AIVs of a pre/post miniature beyond that (the launch's AIVs all stream alike, in step)
STREAM_SAMPLE = 16  # steps per AIV of the longer pre/post miniature
DSINK_SLOTS = (32, 64)  # blocks per head of the two PostDsink runs whose line prices the half-block templates' dsink


def _line(x1: float, y1: float, x2: float, y2: float, x: float) -> float:
    return y1 if x2 == x1 else y1 + (y2 - y1) * (x - x1) / (x2 - x1)


def _ws(til):
    return TensorSpec((til.workspaceSize - SYSTEM_WORKSPACE_BYTES,), "uint8")


def _ranked(work, k: int) -> list[int]:
    """*k* busy cores at evenly spaced ranks of the load ranking (most blocks first), the most loaded one
    included: side by side at their share of the chip, they load HBM and L2 over time as the whole launch
    does (its busy cores finish at different times), which a subset of only the busiest cores overstates
    and a single core cannot show. Ordered so that in an interleaved tiling a core that runs out of
    sections is never followed by one that has more."""
    order = sorted((c for c in range(work.block_dim) if work.core_sections[c] > 0),
                   key=lambda c: (-work.core_blocks[c], c))
    k = min(k, len(order))
    picked = {order[(i * len(order)) // k] for i in range(k)}
    return sorted(picked, key=lambda c: (-work.core_sections[c], -work.core_blocks[c], c))


def _core_positions(work, core: int, count: int | None, fine: bool = False) -> list[list[int]]:
    """Global section indices of *core*, per AIV run (work.aiv_runs): all of them, or *count* of them shared over
    the runs in proportion to their lengths, each run's with its mix of section classes ((blocks, masked)
    pairs: full, diagonal, edge sections cost differently per block), each class evenly spaced over the run,
    in run order (for the ring, *fine*: the middle member of each of equal strata, and every class once at least,
    RING_COVER). The mix is read off at most CLASS_PROBES evenly spaced sections of the run. Per run because
    a generic core's AIVs each work their own run in step: a sample whose runs differ in length or mix has
    one AIV idle while the other is the bottleneck (S 259/3288 N 16/8 D 128 fp32, blockDim 15: the sampled
    cores' busier AIV had 30% more vector cycles per block than in the launch, the estimate +8.3%)."""
    runs = aiv_runs(work, core)
    n = runs[-1][1]
    if count is None or count >= n:
        return [[core + j * work.block_dim for j in range(lo, hi)] for lo, hi in runs]
    takes = _apportion(np.array([hi - lo for lo, hi in runs], float) * count / max(n, 1), count)
    return [_run_positions(work, core, lo, hi, int(m), fine) for (lo, hi), m in zip(runs, takes)]


def _apportion(share: np.ndarray, count: int) -> np.ndarray:
    """Whole numbers summing to *count* from the shares *share* (which sum to it): floors, then one more for the
    largest remainders (ties to the first)."""
    take = np.floor(share).astype(int)
    for r in np.argsort(-(share - take), kind="stable")[: count - int(take.sum())]:
        take[r] += 1
    return take


def _run_positions(work, core: int, lo: int, hi: int, count: int, fine: bool) -> list[int]:
    """*count* global section indices of *core*'s local sections [lo, hi) with their mix of classes."""
    if count <= 0 or hi <= lo:
        return []
    if count >= hi - lo:
        return [core + j * work.block_dim for j in range(lo, hi)]
    probes, label, classes = _core_classes(work, core, lo, hi, fine)
    take = _apportion(np.bincount(label, minlength=len(classes)) * count / len(probes), count)
    if fine and len(classes) <= RING_COVER * count:  # every class sampled once at least (_ring_estimate)
        take = np.maximum(take, 1)
    js = []
    for c in range(len(classes)):
        members = probes[label == c]
        if take[c] and fine:  # the middle of each of take[c] equal strata: _ring_estimate prices a class by its mean,
            # and a class's first and last members sit at class changes, where a section's cost differs (basic_bn2
            # S 165/3448 N 8/4 D 64 fp32: the full section before a run of diagonal ones 6% cheaper; the evenly
            # spaced picks from first to last took 3 of them among 5, the class's mean 2.9% under the launch's)
            js += [int(members[int((i + 0.5) * len(members) / take[c])]) for i in range(take[c])]
        elif take[c]:
            js += [int(members[int(round(i))]) for i in np.linspace(0, len(members) - 1, take[c])]
    return [core + j * work.block_dim for j in sorted(set(js))]


def _core_classes(work, core: int, lo: int, hi: int, fine: bool = False) -> tuple[np.ndarray, np.ndarray, list]:
    """(probed local section indices, class label of each, the classes as _keys tuples) of *core*'s local
    sections [lo, hi): at most CLASS_PROBES evenly spaced ones."""
    probes = np.unique(np.linspace(lo, hi - 1, min(hi - lo, CLASS_PROBES)).round().astype(np.int64))
    keys = _keys(work, core + probes * work.block_dim, fine)
    # the key rows as one integer in the same order (np.unique over rows is many times slower)
    widths = keys.max(axis=0) + 1
    flat = (keys[:, 0] * widths[1] + keys[:, 1]) * widths[2] + keys[:, 2]
    _, first, label = np.unique(flat, return_index=True, return_inverse=True)
    return probes, label, [tuple(int(x) for x in keys[f]) for f in first]


def _keys(work, gs, fine: bool = False) -> np.ndarray:
    """Rows (blocks, masked blocks, area) of the global sections *gs*: the class of a section. *area* (the rows x
    columns its blocks cover, in 16 x 16 fractals) is read for listed CV blocks with *fine* only (else 0): a CV
    block of a batch's last, short rows keeps as many blocks as a full one at a fraction of the work."""
    gs = np.asarray(gs, np.int64)
    blocks, masked = _counts(work, gs)
    area = np.zeros(len(gs), np.int64)
    if fine and hasattr(work, "listed"):
        area = _section_areas(work, gs)
    return np.stack([blocks, masked, area], axis=1).reshape(-1, 3)


def _sample_tiling(problem, til, work, cores: list[int], positions: dict, prologue: float = 1.0) -> tuple:
    """A tiling of len(cores) AI Cores, subset core i running the sections *positions[c]* in order (IS_DTM:
    section j * len(cores) + i, its rounds; else back to back, ``secCoreStart``, so that the cores may run
    different counts, as the S1s2Bn2 split gives them); and the simulated block count of each. *prologue*: the
    fraction of each AIV's real share of the prologue (sfmg rows, fp32 transposes, drop-mask adapter bits) the
    sample runs."""
    k = len(cores)
    rounds = max(len(positions[c]) for c in cores)
    sections, core_start, aiv_split = [], (), ()
    if til.sabDtm:
        for j in range(rounds):
            for c in cores:
                if j < len(positions[c]):
                    sections.append(work.blocks_of(problem, positions[c][j]))
    else:
        sections = [work.blocks_of(problem, g) for c in cores for g in positions[c]]
        core_start = tuple(int(x) for x in np.cumsum([0] + [len(positions[c]) for c in cores]))
        split = getattr(work, "core_aiv_split", None)
        if split is not None:  # generic: each AIV runs its own run (tiling.core_steps); a sampled section goes to
            # the AIV whose run holds it
            aiv_split = tuple(core_start[i] + sum(int((g - c) // work.block_dim < split[c]) for g in positions[c])
                              for i, c in enumerate(cores))
    flat = [blk for sec in sections for blk in sec]
    starts = np.concatenate(([0], np.cumsum([len(s) for s in sections]))).astype(int)
    cols = list(zip(*flat))
    workers = _sfmg_workers(til, prologue)
    bits = -(-til.dropAdapterBits // til.blockDim) * k if til.dropAdapterBits else 0
    sample = replace(til, blockDim=k, sections=len(sections), secStart=tuple(int(x) for x in starts),
                     blkB=cols[0], blkN=cols[1], blkS1o=cols[2], blkS2o=cols[3], blkRows=cols[4], blkCols=cols[5],
                     blkMasked=tuple(bool(x) for x in cols[6]), sfmgWorkers=workers, secCoreStart=core_start,
                     secAivSplit=aiv_split,
                     # the sfmg rows and the drop-mask adapter's bits are shared by every AIV of the full
                     # launch: the simulated cores' AIVs take their share of them only
                     dropAdapterBits=int(bits * prologue))
    simulated = [sum(len(sections[g]) for g in sample.core_sections(i)) for i in range(k)]
    return sample, simulated


def _sfmg_workers(til, prologue: float) -> int:
    """The sfmg workers of a sample tiling that runs the fraction *prologue* of each AIV's share of the prologue:
    the launch's 2 blockDim, or more, each with a shorter share (only the sample's first 2 k of them run)."""
    workers = 2 * til.blockDim
    if prologue < 1.0:
        rows = -(-til.t1Size * til.n1Size // workers)
        workers = -(-til.t1Size * til.n1Size // max(1, int(rows * prologue)))
    return workers


def _prologue_fraction(problem, til) -> float:
    """The fraction of the real prologue a sample runs: all of it up to PROLOGUE_STEPS sfmg steps per AIV."""
    rows = -(-til.t1Size * til.n1Size // (2 * til.blockDim))
    steps = rows / sfmg_rows(c16(problem.D), np.dtype(problem.dtype).itemsize)
    return min(1.0, PROLOGUE_STEPS / steps) if steps else 1.0


def estimate_plan(problem, spec, overrides, deterministic: bool) -> tuple:
    """(tiling, work) of an estimate-mode call: the counted work (work.count_work), or for SameAB and the generic
    template their own CV blocks and split (tiling.sab_work) up to LISTED_WORK_BLOCKS blocks (beyond the listing
    budget the basic sections stand in: for 512 x 512 CV blocks the same blocks, in another order; docs/fag.md
    "Estimate mode"); the tiling lists no blocks."""
    requested = block_dim_override(overrides, spec)
    work = count_work(problem, requested, spec.aic_count)
    if run_template(problem, spec, deterministic)[0] != "basic" and work.blocks <= LISTED_WORK_BLOCKS:
        work = sab_work(problem, spec, deterministic, requested)
    return fag_tiling(problem, spec, overrides, deterministic, work=work), work


def main_path(til, work) -> str:
    """Which way _main_cycles estimates the main launch: "whole" (the simulated cores run all their sections;
    the sample is exact up to the subset's contention) or "sampled" (sections or rounds sampled, extrapolated
    on a line). The accuracy benchmark's checking set draws both."""
    if not int(np.count_nonzero(work.core_sections)):
        return "whole"
    if til.sabDtm:
        return "whole" if len(_sample_rounds(work, til)) == -(-work.sections // work.block_dim) else "sampled"
    if sum(int(work.core_blocks[c]) for c in _ranked(work, COMPANIONS)) <= SIM_BLOCKS:
        return "whole"
    _, big, most = _sample_plan(til, work)
    return "whole" if big >= WHOLE_SHARE * most else "sampled"


def _sample_plan(til, work) -> tuple[list, int, int]:
    """(the SAMPLE_CORES ranked cores, K: the most loaded one's sections in the sample, that core's sections): K as
    many as SAMPLE_BLOCKS blocks allow, at least the template's least (BASIC_SAMPLE_SECTIONS, GENERIC_SAMPLE_SECTIONS,
    MIN_SAMPLE_SECTIONS)."""
    cores = _ranked(work, SAMPLE_CORES)
    per_section = float(work.core_blocks[cores].sum()) / float(work.core_sections[cores].sum())
    least = {"basic": BASIC_SAMPLE_SECTIONS, "basic_bn2": BASIC_SAMPLE_SECTIONS,
             "generic": GENERIC_SAMPLE_SECTIONS}.get(til.template, MIN_SAMPLE_SECTIONS)
    big = max(least, int(SAMPLE_BLOCKS / (len(cores) * per_section)))
    return cores, big, max(int(work.core_sections[c]) for c in cores)


def _tail_counts(work, cores: list, budget: int) -> dict:
    """{core: how many of its last sections its launch runs after the lightest busy core has ended}: those whose
    blocks lie mostly beyond the lightest busy core's block count (while every core runs they all advance at about
    the same cost per block), at most *budget* (the sample's: the earlier ones beyond it are extrapolated with the
    core's other sections)."""
    light = int(min(work.core_blocks[c] for c in range(work.block_dim) if work.core_sections[c] > 0))
    out = {}
    for c in cores:
        n = int(work.core_sections[c])
        blocks = _counts(work, c + work.block_dim * np.arange(n, dtype=np.int64))[0]
        ahead = int(np.argmin(np.abs(np.concatenate(([0], np.cumsum(blocks))) - light)))
        out[c] = min(n - ahead, budget)
    return out


def _tail_runs(work, cores: list, big: int) -> dict:
    """{core: [its sample's global sections]} of TAIL_TEMPLATES: its first section (the ring's start, whatever its
    class: a sample that began with another section paid the start at that one's size and charged the first one at
    the steady cost, basic S 409/2944 N 16/16: a 16-block first step 210k cycles against the launch's 10-block 112k,
    +56k), the others before its tail (_tail_counts) sampled at the same share for every core (*big* of them for the
    core with the most) with their mix of classes, then every section of its tail in order, so that the sample's cores
    all reach their tails together and then end as the launch's do."""
    tails = _tail_counts(work, cores, big)
    ahead = {c: int(work.core_sections[c]) - tails[c] for c in cores}
    most = max(max(ahead.values()), 1)
    out = {}
    for c in cores:
        n = int(work.core_sections[c])
        count = min(ahead[c], max(2, round(big * ahead[c] / most)))
        first = [c] if ahead[c] else []
        out[c] = [first + _run_positions(work, c, 1, ahead[c], count - 1, False)
                  + [c + j * work.block_dim for j in range(ahead[c], n)]]
    return out


def _running_cost(marks: list, span: np.ndarray, until: float,
                  loads: list | None = None) -> tuple[float, float] | None:
    """(0, cycles per size unit) of the sampled sections while every sampled core runs, pooled over the simulated
    cores (each weighted by the size it is extended over), each over its _balanced_window. The extended sections of
    TAIL_TEMPLATES run while every busy core of the launch runs; steps after a sampled core has ended run at less
    contention and were up to a quarter of the window (basic S 2316/403/643 N 16/16 D 64 sparse 3: 0.78 times the
    launch's cost of the same steps, the estimate -3.1%). *loads*: per core, each sample step's bandwidth load
    (_trajectory_loads): the cost is then per size unit at a load of 1, each step's size weighted by its load. None
    where no core has a window."""
    if not marks or any(m is None for m in marks):
        return None
    spent = grown = 0.0
    for i, weight, a, b in _weighted_windows(marks, span, until):
        t, w = marks[i]
        spent += weight * (t[b] - t[a])
        if loads is None:
            grown += weight * (w[b] - w[a])
        else:
            grown += weight * float(np.diff(w)[a:b] @ loads[i][a + 1:b + 1])
    return (0.0, spent / grown) if grown > 0 else None


def _weighted_windows(marks: list, span: np.ndarray, until: float):
    """(core index, weight, a, b) of each sampled core with a _balanced_window and a positive weight in *span*: the
    steps _running_cost prices by and _window_load averages over."""
    for i, ((t, w), weight) in enumerate(zip(marks, span)):
        window = _balanced_window(t, w, until)
        if window is not None and weight > 0:
            yield (i, weight, *window)


def _balanced_window(t: np.ndarray, w: np.ndarray, until: float) -> tuple[int, int] | None:
    """(a, b): the ring steps a + 1 .. b of one sampled core (_step_marks: end cycles *t*, sizes through each step
    *w*) read for its cost: from its MARK_HEAD-th step on, to the last one that ends by *until* and before its last
    MARK_TAIL; of those, the longest (the latest of equal length) whose bounding steps a and b hold sections of one
    size, else all of them. A step's interval carries part of the previous section's cost (basic S 3288/4322/158
    N 4/1, launch: a 16-block section after an 8-block one 98-105k cycles, after a 16-block one 64-80k), so a window
    opened after a small section and closed on a large one charged the carried part of the small one in place of
    the large one's (that call's heaviest core: +21k cycles on a window of 340k). None where no step is left."""
    size = np.diff(np.concatenate(([0.0], w)))
    lo = min(MARK_HEAD, len(t) - 1)
    hi = min(len(t) - 1 - MARK_TAIL, int(np.searchsorted(t, until, side="right")) - 1)
    span = {}  # per size, its first and last step in lo .. hi: the longest window of that size
    for i in range(lo, hi + 1):
        span[size[i]] = (span.get(size[i], (i,))[0], i)
    pairs = [(b - a, a, b) for a, b in span.values() if b > a]
    if pairs:
        return max(pairs)[1:]
    return (lo, hi) if hi > lo else None


def _trajectory_pricing(work, positions: dict, marks: list, span: np.ndarray, window: tuple, launch: np.ndarray,
                        trace, spec, share: float) -> tuple[list, np.ndarray]:
    """_trajectory_loads at the loads a basic sample's steps and left-out sections cost by, along the launch's L2
    trajectory (*launch*: l2_path.launch_curve): the share of the sample's time its GM traffic keeps the bandwidth
    calendars busy scales with a step's bandwidth load (l2_path.step_loads), the rest (its cores' own pipes) does
    not: a load l costs 1 - d m + d l, m the sample window's mean load (_window_load), d its GM bytes a cycle over
    *window* (prologue end, first core end; _gm_demand) at the L2 rate of its share of the chip (*share* busy cores
    a sample core), at most 1 / m. Why: a bandwidth-bound launch's steps cost by the load (S 8192 x 4 N 4/4 D 128
    causal: 123k cycles a 16-block step at a load of 1, 97k at 0.78, 126k at 1.02; its sample's GM bytes 1.07 times
    its L2 rate), a launch of few cores not at all (S 3000 N 2/2 D 64 on 3 cores, L2 cut to half its touched bytes:
    the timing unchanged, at the load alone the estimate -1.7%)."""
    raw = step_loads(launch, spec.l2_bytes, spec.l2_bw_bytes_per_s / spec.hbm_bw_bytes_per_s)
    mean = _window_load(marks, span, window[1], _trajectory_loads(work, positions, raw)[0])
    demand = _gm_demand(trace, *window) * share * spec.clock_hz / spec.l2_bw_bytes_per_s
    bound = min(demand, 1.0 / mean)
    return _trajectory_loads(work, positions, 1.0 - bound * mean + bound * raw)


def _window_load(marks: list, span: np.ndarray, until: float, loads: list) -> float:
    """The mean load (per size unit) of the steps _running_cost reads, weighted as it weighs them; 1 without any."""
    total = weighted = 0.0
    for i, weight, a, b in _weighted_windows(marks, span, until):
        size = np.diff(marks[i][1])[a:b]
        total += weight * float(size.sum())
        weighted += weight * float(size @ loads[i][a + 1:b + 1])
    return weighted / total if total > 0 else 1.0


def _gm_demand(trace, start: float, end: float) -> float:
    """GM bytes a cycle a sample's cores move between cycles *start* and *end*: the bytes of its GM pipes' rows
    (MTE2 reads, MTE3 and FIX writes) that run within them."""
    c = trace.columns
    gm = np.isin(c["pipe"], (int(Pipe.MTE2), int(Pipe.MTE3), int(Pipe.FIX)))
    inside = gm & (c["start"] >= start) & (c["end"] <= end)
    return float(c["bytes"][inside].sum()) / max(end - start, 1.0)


def _trajectory_loads(work, positions: dict, loads: np.ndarray) -> tuple[list, np.ndarray]:
    """(per sample core, the bandwidth load of each of its sample steps; per core, the size (_core_sizes) of its
    sections the sample leaves out, each weighted by its load): *loads* per launch step (l2_path.step_loads), a
    section at the load of its core's step (its local index)."""
    bd = work.block_dim
    steps, weighted = [], []
    for c, gs in positions.items():
        local = np.arange(int(work.core_sections[c]))
        size = 64.0 * _counts(work, c + bd * local)[0]
        ran = np.zeros(len(local), bool)
        ran[(np.asarray(gs, np.int64) - c) // bd] = True
        steps.append(loads[(np.asarray(gs, np.int64) - c) // bd])
        weighted.append(float(size[~ran] @ loads[local[~ran]]))
    return steps, np.array(weighted)


def _launch_follow(problem, til, work, positions: dict, start: int, prologue: float, l2_bytes: int):
    """(the (own, launch) touched-bytes map a basic sample's L2 model follows, l2_path.follow_map: its hits scaled
    as the launch's where it runs the launch's sections; the launch's curve, l2_path.launch_curve). None where the
    call is out of l2_path's scope, its inputs alone pass L2 (the sample then starts at the launch's average state,
    _l2_start) or the launch's touched bytes stay within L2: those samples keep their own L2 state, as the launch's
    hit scale is 1 throughout. Why: S 8192 x 4 N 4/4 D 128 causal's launch passes L2 in its first tenth and ends at
    292 MiB; its steps, bound by the chip's bandwidth, cost by the hit scale along the way, while the sample's 12 cores,
    whose own pages end at 216 MiB, ran at a scale of about 1 (docs/fag.md "Estimate mode")."""
    if not traceable(problem, til) or start > l2_bytes:
        return None
    if start + til.workspaceSize <= l2_bytes:
        return None  # cannot pass L2: the inputs' pages (start) and the whole workspace do not
    launch = launch_curve(problem, til, work)
    if launch[-1] <= l2_bytes:
        return None
    own = sample_curve(problem, til, work, positions, start, _sfmg_workers(til, prologue))
    return follow_map(launch, own, positions, work.block_dim), launch


def _trace_ends(trace, k: int) -> tuple[np.ndarray, float]:
    """(last end cycle of each of the *k* cores, the prologue's end) of a sample launch's trace, from its columns
    (a DataFrame of them costs more than the reading): the prologue ends at each AIV's first SyncAll (IS_DTM
    has one more every round), the latest of those."""
    c = trace.columns
    ends = _core_ends(c["core"], c["end"], k)
    rows = _syncall_rows(trace)
    if rows is None:
        return ends, 0.0
    stream, end = rows
    first = np.full(8 * k, np.inf)
    np.minimum.at(first, stream, end)
    first = first[np.isfinite(first)]
    return ends, float(first.max()) if len(first) else 0.0


def _syncall_rows(trace):
    """(stream, end cycle) of every SyncAll row of a launch's trace, stream = core * 8 + sub-core; None without
    SyncAll."""
    c = trace.columns
    if "SyncAll" not in trace.names:
        return None
    sync = c["name_id"] == trace.names.index("SyncAll")
    return c["core"][sync].astype(np.int64) * 8 + c["sub_core"][sync], c["end"][sync]


def _core_ends(core: np.ndarray, end: np.ndarray, k: int) -> np.ndarray:
    """The last end cycle of each of the *k* cores (0 where a core has no row), as floats.

    A full trace holds its rows stream by stream in (core, sub-core) order (npusim/trace_sink.py FullSink), so each
    core's rows are one run and a maximum per run (np.maximum.reduceat) gives them, several times cheaper than
    np.maximum.at over every row (about 0.03 s a sample launch of 1M rows); the maximum of the integer cycles
    converted is that of the converted cycles (the conversion keeps order), so the floats are the same. Rows in
    another order take np.maximum.at."""
    ends = np.zeros(k)
    if not len(core):
        return ends
    if not np.all(core[1:] >= core[:-1]):
        np.maximum.at(ends, core, end)
        return ends
    first = np.flatnonzero(np.r_[True, core[1:] != core[:-1]])
    ends[core[first]] = np.maximum(ends[core[first]], np.maximum.reduceat(end, first))
    return ends


def _main_cycles(problem, til, work, spec, inputs) -> float:
    """The main launch's cycles (module docstring): the latest simulated core, extrapolated when sampled."""
    busy = int(np.count_nonzero(work.core_sections))
    if not busy:
        return launch_main(problem, til, spec, "timing", inputs, _ws(til)).cycles
    sizes = {k: int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for k, v in inputs.items()}
    # the samples start with the inputs resident and L2's touched bytes at what the launch's copies of them touch
    # (_touched_inputs); inputs beyond L2 at the launch's average L2 state instead (steady_l2_touched of their full
    # sizes: the whole input set touched charged every sampled round of a long-q IS_DTM call 13% too much)
    warm = (_l2_start(problem, sizes, spec.l2_bytes), {k: 1.0 for k in sizes})

    listed = hasattr(work, "listed")  # SameAB / generic CV blocks: their size is the area they cover (_section_sizes)
    rings = []  # the ring costs read off the larger sample run (RING_TEMPLATES)
    marks = []  # the ring-step marks of the larger sample run (_step_marks)

    def run(positions: dict, prologue=1.0, ring=False, steps=False, traces=None, follow=None):
        """(end cycle per subset core, simulated blocks per subset core, prologue end, launch overhead) of a
        sample whose core i runs the sections of the i-th entry of *positions*; *ring*: also read its ring costs;
        *steps*: also its ring-step marks (into ``marks``); *traces*: a list to receive its trace; *follow*: its
        L2 model's hits scaled as the launch's (_launch_follow)."""
        cores = list(positions)
        sample, simulated = _sample_tiling(problem, til, work, cores, positions, prologue)
        share = max(1.0, busy / len(cores))
        # listed work: the busy cores the sample leaves out write section buffers of their own (sample_l2)
        l2 = warm + (counted_pages(til, work, cores),) if listed else warm
        if follow is not None:  # basic: the launch's L2 trajectory (_launch_follow), l2_warm's fourth item
            l2 = (*l2, {}, follow) if len(l2) == 2 else (*l2, follow)
        res = launch_main(problem, sample, contention_chip(spec, share), "timing", inputs, _ws(til), l2_warm=l2,
                          bw_bucket_cycles=_sample_bucket(share))
        ends, prologue_end = _trace_ends(res.trace, len(cores))
        if ring:
            rings.append(_ring_costs(res.trace, sample, len(cores)))
        if steps:
            marks[:] = _step_marks(res.trace, sample, len(cores), _section_sizes(sample, listed))
        if traces is not None:
            traces.append(res.trace)
        return list(ends), simulated, prologue_end, res.cycles - float(ends.max())

    if til.sabDtm:
        return _rounds_cycles(problem, til, work, run)
    cores = _ranked(work, COMPANIONS)
    if sum(int(work.core_blocks[c]) for c in cores) <= SIM_BLOCKS:
        ends, _, _, overhead = run({c: sum(_core_positions(work, c, None), []) for c in cores})
        return max(ends) + overhead
    cores, big, most = _sample_plan(til, work)
    f = _prologue_fraction(problem, til)
    # each core samples the same share of its sections (the most loaded one *big*): the sample is a miniature of the
    # launch in which the lighter cores finish first and leave their bandwidth to the others, as they do in the
    # launch (the same count for every core kept them all running to the sample's end: basic S 8192 N 2 causal
    # +4.0% -> +1.6%, S 1349/4788 N 4/1 causal +4.5% -> +2.4%, basic_bn2 S 667/1475 N 16/8 fp32 +2.2% -> +0.7%)
    if big >= WHOLE_SHARE * most:  # the sample would hold most of each core: the sampled cores run whole
        ends, _, _, overhead = run({c: sum(_core_positions(work, c, None), []) for c in cores})
        return max(ends) + overhead
    ring, tails = til.template in RING_TEMPLATES, til.template in TAIL_TEMPLATES
    if tails:
        big_runs = _tail_runs(work, cores, big)
    else:
        counts = {c: max(2, round(big * int(work.core_sections[c]) / most)) for c in cores}
        big_runs = {c: _core_positions(work, c, counts[c], ring) for c in cores}
        if til.template in STEP_PAIR_TEMPLATES:
            big_runs = {c: _from_run_starts(work, c, v) for c, v in big_runs.items()}
        if til.template in LEAD_TEMPLATES and hasattr(work, "listed"):  # (counted work: no areas, no step pricer)
            big_runs = {c: _with_run_leads(work, c, v) for c, v in big_runs.items()}
    big_pos = {c: sum(v, []) for c, v in big_runs.items()}
    traj = _launch_follow(problem, til, work, big_pos, warm[0], f, spec.l2_bytes) if tails else None
    traced = [] if traj is not None else None
    e_big, w_big, p_big, overhead = run(big_pos, f, ring, steps=True, traces=traced, follow=traj and traj[0])
    w_big = np.array(w_big, float)
    # each core's growth weighted by the blocks it is extended over: a core whose sample already holds all its
    # sections (a short batch's head on basic_bn2) has other blocks and tells nothing about the heavy cores'
    span = np.maximum(work.core_blocks[cores].astype(float) - w_big, 0.0)
    # the steady line is over the steps' sizes (_section_sizes), and each core is extended over the size it has left
    sampled = np.array([m[1][-1] if m is not None and len(m[1]) else 0.0 for m in marks] if marks else [0.0] * len(cores))
    left = np.maximum(_core_sizes(work, cores) - sampled, 0.0)
    loads = None
    if traj is not None:  # the extension priced along the launch's L2 trajectory: per size unit at a load of 1
        loads, grow_loaded = _trajectory_pricing(work, big_pos, marks, left, (p_big, min(e_big)), traj[1], traced[0],
                                                 spec, busy / len(cores))
    steady = _running_cost(marks, left, min(e_big), loads) if tails else None
    loaded = loads is not None and steady is not None
    steady = steady or _steady_cost(marks, left)
    per_step = 0.0
    if steady is not None and f >= 1.0:
        prologue, (per_step, per_block) = p_big, steady
    else:
        # the smaller run: every other section of the larger one (of each AIV run), so that the two differ by sections
        # of the same mix (SameAB, PREFIX_TEMPLATES: the first half of it, so that both runs start alike); where the
        # marks give the cost per block, only the prologue's line needs it: the first section of each run will do
        if steady is not None:
            half = lambda v: v[:1]  # noqa: E731
        elif til.template in PREFIX_TEMPLATES:
            half = lambda v: v[:len(v) // 2]  # noqa: E731
        else:
            half = lambda v: v[::2]  # noqa: E731
        e_small, w_small, p_small, _ = run({c: sum((half(r) for r in v), []) for c, v in big_runs.items()}, f / 2)
        # the prologue (before SyncAll) is on its own line over the fraction of it simulated
        prologue = _line(f / 2, p_small, f, p_big, 1.0)
        if steady is not None:
            per_step, per_block = steady
        else:
            grown = float(span @ (w_big - np.array(w_small, float)))
            spent = float(span @ (np.array(e_big) - np.array(e_small) - (p_big - p_small)))
            per_block = spent / grown if grown else 0.0
    k = len(cores)
    i = max(range(k), key=lambda j: (work.core_blocks[cores[j]], -cores[j]))
    if ring:
        est = _ring_estimate(work, cores, big_pos, rings[-1], i, prologue, spec.cross_core_flag_latency_cycles)
        if est is not None:
            return est + overhead
    # every simulated core's larger run extended at the steady cost per step and per block to its real steps and
    # blocks; the launch ends with the latest of them, not always the most loaded by blocks (generic S 328/972/1338
    # kv 434/2848/385 N 16/4 D 256: the cores of 168 blocks end 9% before those of 166, whose CV blocks are larger)
    if til.template in STEP_PAIR_TEMPLATES and steady is not None and hasattr(work, "listed"):
        # the step pricer reads each section's CV blocks; beyond LISTED_WORK_BLOCKS the counted basic sections stand
        # in (estimate_plan) and the steady line below prices them
        grown = _step_extension(work, cores, marks, steady, left, til.template in CONTEXT_TEMPLATES)
        return prologue - p_big + max(e_big[j] + grown[j] for j in range(k)) + overhead
    steps_left = [max(hi - lo for lo, hi in aiv_runs(work, c)) - (len(marks[j][0]) if per_step else 0)
                  for j, c in enumerate(cores)]
    grow = left if steady is not None else span  # the steady cost is per size unit, the two runs' per block
    if loaded:
        grow = grow_loaded
    return prologue - p_big + max(e_big[j] + max(0.0, per_step * steps_left[j] + per_block * grow[j])
                                  for j in range(k)) + overhead


def _with_run_leads(work, core: int, runs: list[list[int]]) -> list[list[int]]:
    """*core*'s sampled sections per run with the run's lead in front: its first sections (at most LEAD_SECTIONS, at
    least one) before the first of the run's largest area (_section_areas), then the picks after the lead.

    Why: the cores' leads set their phase in the launch. SameAB S 220/222/3049 N 16/8 D 256 causal (helper R's
    scouting draw): cores 0-6 start with two 196-fractal steps, the others with one, so the cores' 1024-fractal
    steps run half a step (~98k cycles) apart; the sample kept one 196 on every core, ran them in phase, and
    their cube MTE2 bursts collided: 155.8k cycles of MTE2 per step against the launch's 146.3k (same 10.5 MB, read
    hits 0.977 vs 0.964), steps 199k against 190k: +4.83%, +0.82% with the lead. SameAB only (LEAD_TEMPLATES):
    a generic step holds one section of each AIV run, and a lead added to one run leaves the sample's runs of
    unequal length (one AIV idle in its last step; _core_positions), while generic's leads (the causal ramp, 320
    to 448 fractals against 512) barely shift its phase (helper T's traces: S 4582 N 4/2 D 256 fp32 -0.86 -> -2.74%)."""
    out = []
    for (lo, hi), picks in zip(aiv_runs(work, core), runs):
        if not picks:
            out.append(picks)
            continue
        gs = core + np.arange(lo, hi) * work.block_dim
        area = _section_areas(work, gs)
        full = np.flatnonzero(area[:LEAD_SECTIONS] >= area.max())
        lead = [int(g) for g in gs[:max(1, int(full[0]) if len(full) else min(LEAD_SECTIONS, hi - lo))]]
        out.append(lead + [p for p in picks if p > lead[-1]])
    return out


def _from_run_starts(work, core: int, runs: list[list[int]]) -> list[list[int]]:
    """*core*'s sampled sections per AIV run (_core_positions), each run's first section of the launch put in front
    where the sample left it out.

    Why: _step_extension prices the ring steps after the first; the first (with the ring's fill) is the sample's
    own, so it must hold the launch's first sections. A class's evenly spaced picks may skip a run's first section
    (a class of few members apportioned none): SameAB S 705/268/3796 N 8/2 D 192 causal, core 0 starts its launch
    with a 1024-fractal step (263k cycles to the first mark) and its sample with the next one, 289 fractals (127k):
    the latest core 142k early, -5.69%."""
    out = []
    for (lo, _), picks in zip(aiv_runs(work, core), runs):
        first = core + lo * work.block_dim
        out.append(picks if not picks or picks[0] == first else [first] + picks)
    return out


def _step_extension(work, cores: list, marks: list, steady: tuple, span: np.ndarray,
                    context: bool = False) -> list[float]:
    """Per simulated core, the cycles its launch adds to its sample run: its launch ring steps priced
    (_step_pricer, or with *context* _context_pricer; *span*: the size each core is extended over, its weight) less
    its sample's steps priced the same way, at least 0."""
    price = (_context_pricer if context else _step_pricer)(marks, steady, span)
    return [max(0.0, price(_launch_step_sizes(work, c)) - price(np.diff(marks[j][1], prepend=0.0)))
            for j, c in enumerate(cores)]


def _launch_step_sizes(work, core: int) -> np.ndarray:
    """The sizes (as _section_sizes) of *core*'s ring steps in the launch, in order: step t holds the t-th section
    of each AIV run (work.aiv_runs, tiling.core_steps)."""
    runs = aiv_runs(work, core)
    size = _section_areas(work, core + work.block_dim * np.arange(max(hi for _, hi in runs)))
    return np.array([sum(float(size[lo + t]) for lo, hi in runs if lo + t < hi)
                     for t in range(max(hi - lo for lo, hi in runs))], float)


def _window_repeats(marks: list, span: np.ndarray) -> list[tuple[float, float, float]]:
    """(size, cycles, weight) of every repeat step (the size of the step before it) in the sample's steady window
    (_steady_cost's: MARK_HEAD steps in, MARK_TAIL before the end), over the simulated cores, each weighted as
    _steady_cost weighs its window (*span*: the size the core is extended over); cores of weight 0 left out."""
    out = []
    for (t, w), weight in zip(marks, span):
        if weight <= 0:
            continue
        a, b = _steady_window(len(t))
        size = np.diff(w, prepend=0.0)
        out += [(float(size[i]), float(t[i] - t[i - 1]), float(weight)) for i in range(a + 1, b + 1)
                if size[i - 1] == size[i]]
    return out


def _step_pricer(marks: list, steady: tuple, span: np.ndarray):
    """A function pricing a sequence of ring-step sizes (the cycles of its steps after the first): a repeat (a step
    the size of the one before) on the line fitted (weighted least squares, _steady_cost's weights *span*) to the
    sample window's repeats (_window_repeats), a class change on *steady*, the line over all the window's steps;
    where the repeats hold fewer than two sizes (or their line falls with size), *steady* for both.

    Why: a sample keeps each class change of a core's run while it shortens its runs of equal steps, and a class
    change costs off the line (its interval holds the ring's refill). Generic S 1845/166/1309 kv 152/439/1321 N 8/8
    D 64 blockDim 9: the latest core's sample held exactly the launch's 6 class changes and 1 of its 11 repeats; 664
    fractals after 190 cost 66.1k cycles, after 664 51.2k; the window's line, read mostly off class changes (11.1k a
    step + 68.0 a fractal), priced the launch's repeats (5.4k + 69.2 on the repeats alone) 10% high: +4.18%.
    Weighted because the cores extended least weigh least in the launch's end: SameAB S 2592 N 16/8 D 256 sparse 3,
    whose latest core extends only 1024-fractal repeats (183.8k cycles in its window), came out -1.13% unweighted
    (the other cores' cheap 1024 steps before a small one, 147k, set the line at 179.9k), -0.95% weighted."""
    repeats = _window_repeats(marks, span)
    rep_step, rep_size = steady
    if len({x for x, _, _ in repeats}) >= 2:
        x, y, weight = np.array(repeats).T
        root = np.sqrt(weight)
        fit = np.linalg.lstsq(np.stack([np.ones(len(x)), x], 1) * root[:, None], y * root, rcond=None)[0]
        if fit[1] > 0:
            rep_step, rep_size = float(fit[0]), float(fit[1])

    def price(sizes) -> float:
        sizes = np.asarray(sizes, float)
        repeat = sizes[1:] == sizes[:-1]
        return float(np.sum(np.where(repeat, rep_step + rep_size * sizes[1:], steady[0] + steady[1] * sizes[1:])))
    return price


def _context_columns(sizes: np.ndarray) -> np.ndarray:
    """Per ring step after the first of a sequence of step *sizes*, the columns its cycles are a line over: 1, its
    own size (its Cube23), the next step's size (whose Cube1 runs in its interval; the last step has none, and its own
    size stands in, in the launch and the sample alike) and its growth over the step before (a step after a smaller
    one waits for its own vector pass, which the short interval before did not hide)."""
    sizes = np.asarray(sizes, float)
    own = sizes[1:]
    nxt = np.append(sizes[2:], sizes[-1:])
    return np.stack([np.ones(len(own)), own, nxt, np.maximum(own - sizes[:-1], 0.0)], 1)


def _context_pricer(marks: list, steady: tuple, span: np.ndarray):
    """A function pricing a sequence of ring-step sizes (the cycles of its steps after the first) on the line over
    _context_columns fitted (weighted least squares, _steady_cost's weights *span*) to every step of the sample's
    steady window (_steady_window); _step_pricer where the window holds fewer than two sizes or no more steps than
    columns.

    Why: on SameAB the interval between two SetAtomicNone marks holds this step's Cube23 and the next step's Cube1,
    so a step costs by its own size and the next one's, and a step after a smaller one also waits for its vector
    pass. SameAB S 2149/3653/3191 N 4/4 D 128 bf16 band (session 15's check), timing mode: a 1024-fractal step 137k
    cycles after a 224 or 160 one, 102-110k between two 1024s, 79-85k before a small one. The sample keeps each
    class change and shortens the runs of repeats, so its repeats were mostly the cheap ones before a change:
    _step_pricer priced the launch's repeats at 91.3k and its class changes at 108.3k, short by 139k on the latest
    core against 68k in its sample: -4.58%, -0.63% on this line (the sample's mean per (previous, own, next) triple
    is within 1% of the launch's)."""
    rows, cycles, weights = [], [], []
    for (t, w), weight in zip(marks, span):
        if weight <= 0:
            continue
        a, b = _steady_window(len(t))
        rows.append(_context_columns(np.diff(w, prepend=0.0))[a:b])
        cycles.append(np.diff(t)[a:b])
        weights.append(np.full(b - a, float(weight)))
    rows = np.concatenate(rows) if rows else np.zeros((0, 4))
    if len(rows) <= rows.shape[1] or len(np.unique(rows[:, 1])) < 2:
        return _step_pricer(marks, steady, span)
    root = np.sqrt(np.concatenate(weights))
    coef = np.linalg.lstsq(rows * root[:, None], np.concatenate(cycles) * root, rcond=None)[0]

    def price(sizes) -> float:
        return float(np.sum(_context_columns(sizes) @ coef)) if len(sizes) > 1 else 0.0
    return price


def _sample_bucket(share: float) -> int:
    """Bandwidth-calendar bucket of a sample whose cores each stand for *share* of the launch's busy cores, at
    1 / share of the chip's bandwidth each: BUCKET_CYCLES * share. Over a bucket the summed transfers of k cores
    fluctuate about sqrt(n / k) times more, relative to a capacity cut to k / n, than n cores' do against the
    whole chip; a bucket n / k times longer sums as many bursts per unit of capacity as the launch's does. In
    256-cycle buckets the samples over-contended: generic S 4299/745 kv 919/228 N 8/4 D 64, whose 12 sampled cores
    of 23 run all their CV blocks, came out +2.5% (cores 0.8-3.9% late; +0.3% with all 24 sampled), +1.8% with the
    longer buckets; non-det tuning set, SameAB max 2.19 -> 1.98%, generic 2.48 -> 1.79% (timing of 0f0d74a)."""
    return max(1, round(BUCKET_CYCLES * share))


def _steady_cost(marks: list, span: np.ndarray) -> tuple[float, float] | None:
    """(cycles per ring step, cycles per block) of the sampled sections in the ring's steady state, pooled over the
    simulated cores (each weighted by the blocks it is extended over): between the end of each core's MARK_HEAD-th
    ring step and of its last but MARK_TAIL, read off one sample run (_step_marks). None where a core's marks are
    missing. The ring's start (the first CV blocks, dearer, and the cube's wait for the AIVs' first pass) and its
    end (the last Cube23 runs with no Cube1 beside it) stay out of the cost, where the difference of two runs carried
    the difference of their ends into it (SameAB S 2416/3936/5951 band, 8 sampled cores, timing before 7137ec1:
    +4.9%, then +2.2%; basic S 8192 N 2 causal +1.6%, then +0.6%). The steps' cycles are a line over their blocks
    (weighted least squares), so a step costs a fixed part besides its blocks' (flags, the ring's hand-overs, a
    CV block's own loads): SameAB's band and edge CV blocks of 1-4 blocks cost 1.5-4 times a full one's per block,
    and a window holding more of them than the core's mix charged every extended block that dearer rate (tuning
    set, SameAB band S 2416/3936/5951 N 8/2 D 192 +4.1%, S 2928 kv 1100 N 16/4 +2.4%; +2.3% and +0.8% on the
    line). Where the window's steps all hold the same blocks, the pooled cost per block alone (0 per step)."""
    if not marks or any(m is None for m in marks):
        return None
    spent = grown = 0.0
    rows, cycles, weights = [], [], []
    for (t, w), weight in zip(marks, span):
        a, b = _steady_window(len(t))
        spent += weight * (t[b] - t[a])
        grown += weight * (w[b] - w[a])
        if weight > 0:
            rows += list(np.diff(w[a:b + 1]))
            cycles += list(np.diff(t[a:b + 1]))
            weights += [weight] * (b - a)
    if grown <= 0:
        return None
    if len(set(rows)) < 2:
        return 0.0, spent / grown
    root = np.sqrt(weights)
    design = np.stack([np.ones(len(rows)), np.array(rows, float)], 1) * root[:, None]
    per_step, per_block = np.linalg.lstsq(design, np.array(cycles) * root, rcond=None)[0]
    return (float(per_step), float(per_block)) if per_block > 0 else (0.0, spent / grown)


def _steady_window(marks: int) -> tuple[int, int]:
    """(first, last) mark of a core's steady window among its *marks* ring-step marks: MARK_HEAD steps in, MARK_TAIL
    before the end; all of them where that leaves no step. _steady_cost and _window_repeats read the same window."""
    a, b = min(MARK_HEAD, marks - 1), marks - 1 - MARK_TAIL
    return (a, b) if b > a else (0, marks - 1)


def _section_sizes(sample, listed: bool) -> np.ndarray:
    """Per section of a sample tiling, its size in 16 x 16 fractals: the rows x columns its blocks cover where the
    work lists its CV blocks (SameAB, generic: band-edge and batch-end CV blocks hold partial blocks, the cube's
    work follows their area), else 64 per block (the basic template's counted sections, priced per block)."""
    starts = np.asarray(sample.secStart, np.int64)
    if not listed:
        return 64.0 * np.diff(starts)
    frac = _fractals(np.asarray(sample.blkRows, np.int64), np.asarray(sample.blkCols, np.int64))
    return np.diff(np.concatenate(([0], np.cumsum(frac)))[starts]).astype(float)


def _core_sizes(work, cores: list) -> np.ndarray:
    """The size (as _section_sizes) of every section of each of *cores*, summed: the area its listed CV blocks
    cover, else 64 per block."""
    if not hasattr(work, "listed"):
        return 64.0 * work.core_blocks[cores].astype(float)
    return np.array([float(_section_areas(work, c + work.block_dim * np.arange(int(work.core_sections[c]))).sum())
                     for c in cores])


def _section_areas(work, gs) -> np.ndarray:
    """The area (16 x 16 fractals its listed CV blocks cover) of each global section of *gs*: _keys' fine class
    column; _core_sizes sums it per core, _launch_step_sizes per ring step."""
    return np.array([sum(_fractals(blk[4], blk[5]) for blk in work.listed[int(g)]) for g in gs], np.int64)


def _fractals(rows, cols):
    """The 16 x 16 fractals a rows x cols CV block covers (numbers or arrays)."""
    return (c16(rows) // 16) * (c16(cols) // 16)


def _step_marks(trace, sample, k: int, section_sizes=None) -> list:
    """Per simulated core of a sample: (the cycle its cube ends each ring step's last Cube23, at its SetAtomicNone;
    the size of the sections through that step: *section_sizes* per section, by default their blocks), or None where the
    SetAtomicNone count is not the sections'."""
    c = trace.columns
    if "SetAtomicNone" not in trace.names:
        return [None] * k
    nid = trace.names.index("SetAtomicNone")
    sel = (c["name_id"] == nid) & (c["sub_core"] == 0)
    core, end = c["core"][sel], c["end"][sel].astype(float)
    out = []
    for i in range(k):
        steps = sample.core_steps(i)
        sizes = [len(step) for step in steps]
        times = np.sort(end[core == i])
        if len(times) != sum(sizes) or not steps:
            out.append(None)
            continue
        blocks = [sum(sample.secStart[s + 1] - sample.secStart[s] if section_sizes is None else section_sizes[s]
                      for s, _, _ in step) for step in steps]
        last = np.cumsum(sizes) - 1
        out.append((times[last], np.cumsum(blocks).astype(float)))
    return out


def _ring_costs(trace, sample, k: int) -> list:
    """Per simulated core of a sample (its tiling *sample*), per section in the core's order: (Cube1, vector pass,
    Cube23) cycles read off the ring's flags (KernelFagBasic.ProcessCube / WaitAndCube23 / ComputeVec). The cube
    issues, per ring step, Cube1 and a C2V flag for each of the step's sections, then for each section of the
    previous step a V2C wait and its Cube23 (ending with SetAtomicNone): Cube1 runs from the cube's previous event
    to its flag, Cube23 from its wait or, where the cube's previous event ended later, from that to its
    SetAtomicNone. An AIV waits for every C2V flag and sets every V2C
    flag; its pass of a section it works on (its own, or a shared one by rows) ends at the V2C flag and starts at
    the C2V wait or, where that ended earlier, at its previous V2C flag; a shared section's pass is the slower
    AIV's. None for a core whose flags do not pair one to one with its sections."""
    c = trace.columns
    ids = {name: trace.names.index(name) if name in trace.names else -1
           for name in ("CrossCoreSetFlag", "CrossCoreWaitFlag", "SetAtomicNone")}
    core, sub, name, end = c["core"], c["sub_core"], c["name_id"], c["end"].astype(float)

    def at(i, u, nm):
        return np.sort(end[(core == i) & (sub == u) & (name == ids[nm])])
    out = []
    for i in range(k):
        steps = sample.core_steps(i)
        # (the section's index in the core's order, its owning AIV) in issue order; round-robin tilings run one
        # section per step
        first = sample.secCoreStart[i] if sample.secCoreStart else None
        order = [(s - first if first is not None else t, v) for t, step in enumerate(steps) for s, _, v in step]
        n = len(order)
        cset, cwait, cnone = at(i, 0, "CrossCoreSetFlag"), at(i, 0, "CrossCoreWaitFlag"), at(i, 0, "SetAtomicNone")
        aiv = [(at(i, u, "CrossCoreSetFlag"), at(i, u, "CrossCoreWaitFlag")) for u in (1, 2)]
        if not n or any(len(x) != n for x in (cset, cwait, cnone, *aiv[0], *aiv[1])):
            out.append(None)
            continue
        # the cube's events in issue order: step t's Cube1 flags, then step t - 1's Cube23 ends
        events, pos, before, gate = [0.0], 0, np.zeros(n), np.zeros(n)
        sizes = [len(step) for step in steps]
        for t, size in enumerate(sizes + [0]):
            for j in range(pos, pos + size):
                before[j] = events[-1]
                events.append(cset[j])
            for j in range(pos - sizes[t - 1], pos) if t else ():
                gate[j] = max(events[-1], cwait[j])  # Cube23 starts after the cube's previous event and its wait
                events.append(cnone[j])
            pos += size
        costs = np.zeros((n, 3))
        for j, (idx, owner) in enumerate(order):
            passes = []
            for u, (vset, vwait) in enumerate(aiv):
                if owner is None or owner == u:
                    passes.append(vset[j] - max(vwait[j], vset[j - 1] if j else -np.inf))
            costs[idx] = (cset[j] - before[j], max(passes), cnone[j] - gate[j])
        out.append(costs)
    return out


def _ring_end(steps: list, costs: np.ndarray, vec_start: float, latency: float) -> float:
    """The cube's last cycle of a core running the ring *steps* (lists of (section row of *costs*, owning AIV or
    None: shared by rows)) at these (Cube1, vector pass, Cube23) costs (ProcessCube / ComputeVec): per step the
    cube issues each section's Cube1 and flag, then each section of the previous step's Cube23 once both AIVs'
    flags for it arrived; an AIV takes the step's sections in order, waiting for each one's Cube1 flag, passing
    over the ones it works on and flagging each back (the first pass not before *vec_start*, the prologue's end);
    a flag arrives *latency* cycles after it is set (the chip's cross-core flag latency)."""
    cube, aiv, acked = 0.0, [vec_start, vec_start], []
    for t, step in enumerate(steps):
        ready = []
        for row, _ in step:
            cube += costs[row, 0]
            ready.append(cube + latency)
        done = []
        for (row, owner), arrive in zip(step, ready):
            for u in (0, 1):
                aiv[u] = max(aiv[u], arrive) + (costs[row, 1] if owner is None or owner == u else 0.0)
            done.append(max(aiv) + latency)
        for (row, _), back in zip(steps[t - 1] if t else (), acked):
            cube = max(cube, back) + costs[row, 2]
        acked = done
    for (row, _), back in zip(steps[-1] if steps else (), acked):
        cube = max(cube, back) + costs[row, 2]
    return cube


def _ring_estimate(work, cores, positions, costs, i: int, prologue: float, latency: float) -> float | None:
    """Core *i*'s main-launch cycles from its ring: each of its sections costs the mean (Cube1, vector pass,
    Cube23) of the sampled sections of its class (_keys: blocks, masked, area): the core's own samples, else every sampled
    core's, else the line over size and masked blocks fitted to every sampled section (_class_fit); the ring
    (_ring_end) run over the core's own steps
    (per-AIV runs paired as tiling.core_steps pairs them; beyond RING_SECTIONS, over RING_SECTIONS evenly spaced
    sections of each run, scaled to the core's count)."""
    per_class, seen_keys, seen_costs = {}, [], []
    for j, c in enumerate(cores):
        if costs[j] is None:
            continue
        for t, key in enumerate(map(tuple, _keys(work, positions[c], True).tolist())):
            per_class.setdefault(key, {}).setdefault(j == i, []).append(costs[j][t])
            seen_keys.append(key)
            seen_costs.append(costs[j][t])
    if costs[i] is None or not seen_costs:
        return None
    fit = _class_fit(np.array(seen_keys, float), np.array(seen_costs, float))
    core, n = cores[i], int(work.core_sections[cores[i]])
    split = getattr(work, "core_aiv_split", None)
    runs = aiv_runs(work, core)
    scale = min(1.0, RING_SECTIONS / max(n, 1))
    picked = [np.unique(np.linspace(lo, hi - 1, max(1, round((hi - lo) * scale))).round().astype(np.int64))
              if hi > lo else np.zeros(0, np.int64) for lo, hi in runs]
    local = np.concatenate(picked)
    table, rows = {}, np.zeros((len(local), 3))
    for t, key in enumerate(map(tuple, _keys(work, core + local * work.block_dim, True).tolist())):
        if key not in table:
            seen = per_class.get(key, {})
            got = seen.get(True) or seen.get(False)
            table[key] = np.mean(got, axis=0) if got else fit(key)
        rows[t] = table[key]
    if split is None:
        steps = [[(t, None)] for t in range(len(local))]
    else:
        first = len(picked[0])
        steps = [[(r, v) for v, r in enumerate((t if t < first else None, first + t if first + t < len(local) else None))
                  if r is not None] for t in range(max(first, len(local) - first))]
    end = _ring_end(steps, rows, prologue, latency)
    return prologue + (end - prologue) / scale if scale < 1.0 else end


def _class_fit(keys: np.ndarray, costs: np.ndarray):
    """key -> (Cube1, vector pass, Cube23) cycles of a section class no sample holds: least squares of the sampled
    sections' costs on 1, their size (area in 16 x 16 fractals where listed, else 64 per block), masked blocks and
    blocks, dropping blocks, masked and then the intercept where the sampled classes cannot tell them apart. A sample of a few
    sections per core misses the rarer classes of a long core (basic_bn2 S 165/3448 N 8/4 D 64 fp32 causal: 9
    sampled sections of 240 held 3 of its 10 classes); pricing those at the mean cost per block of every sampled
    section, short-row CV blocks of the short batch's cores among them (few rows, full blocks, far cheaper per
    block), priced them 8-14% under the launch's and the core -4.3% (timing before 83287ef; -5.4% on its timing,
    +0.3% with this line, RING_COVER and the strata's middles); the cost is affine in the area: the vector pass of
    that core's 2-, 4-, 6- and 8-block classes is 4.5k + 225 per fractal within 1.5%. Since RING_COVER, the line
    prices only the classes of a core with more than RING_COVER times its share of classes. The blocks are a column
    of their own: the cube's costs have a part per block besides the area (basic_bn2 S 667/1475 N 16/8 D 64 fp32:
    Cube23 of a short-row 8-block CV block of 320 fractals 31.3k cycles, of a full one of 512 42.1k; the line over
    the area alone priced the core's unsampled classes' Cube1 and Cube23 3.6% and 1.1% under the launch's, the core
    -2.65%, +0.37% with the blocks; timing of 0f0d74a)."""
    def features(key) -> np.ndarray:  # (1, size, masked, blocks), the design's columns of one class
        return np.array([1.0, key[2] if key[2] > 0 else 64.0 * key[0], key[1], key[0]])
    full = np.array([features(k) for k in keys])
    for cols in ([0, 1, 2, 3], [0, 1, 3], [0, 1, 2], [0, 1], [1]):  # the first design the samples tell apart
        if np.linalg.matrix_rank(full[:, cols]) == len(cols):
            break
    coef = np.linalg.lstsq(full[:, cols], costs, rcond=None)[0]
    return lambda key: np.maximum(features(key)[cols] @ coef, 0.0)


def _rounds_cycles(problem, til, work, run) -> float:
    """SameAB IS_DTM and basic_det: every round of sections (one per core) ends in SyncAll, the ordered reduction
    of the round's partials over all the launch's AIVs, and SyncAll again, so the launch is its prologue, its
    periods (up to a round's first SyncAll: the vector pass of round j beside the cube's Cube23 of round j - 1)
    and its reductions. A subset of cores misses both (12 of 24 came out 9% fast on the tuning set), so every core
    runs: all rounds when they fit DTM_BLOCKS blocks or the sample would hold them all (then the sample is the
    launch), else one sample of rounds (_sample_rounds), read off its SyncAll stamps (_sync_stamps) and priced round
    by round (_priced_rounds)."""
    bd = work.block_dim
    total = -(-work.sections // bd)
    rounds = _sample_rounds(work, til)
    if len(rounds) == total:  # every core, every round: each core runs its own sections (the launch)
        # the launch's idle cores too: their AIVs take their share of every round's reduction (basic_det's
        # DetVector2 splits dq / dk / dv over the launch's 48 AIVs; S 270 N 16/8 causal, 16 busy cores of 24, came
        # out +12.3% on the 16 alone, whose 32 AIVs left dk and dv on the same 16)
        ends, _, _, overhead = run({c: list(range(c, work.sections, bd)) for c in range(bd)})
        return max(ends) + overhead
    f = _prologue_fraction(problem, til)
    if f >= DTM_WHOLE_PROLOGUE:  # the rest of the prologue costs less than the shorter run beside a round
        f = 1.0
    traces = []
    ends, _, p_big, overhead = run(_round_cores(work, rounds), f, traces=traces)
    stamps = _sync_stamps(traces[0])
    p_big = _prologue_end(stamps, len(rounds), p_big)
    stamps = stamps[max(0, len(stamps) - 1 - 2 * len(rounds)):]
    prologue = p_big
    blocks = _round_blocks(work)
    half = _half_prologue(traces[0], p_big) if f < 1.0 and _sfmg_only(problem, til) else None
    if half is not None:  # the prologue's line through the sample's own first half of it (no second run)
        prologue = _line(f * half[0], half[1], f, p_big, 1.0)
    elif f < 1.0:  # the prologue (before the first SyncAll) on its own line over the fraction of it simulated, the
        # shorter one beside the sample's lightest round (S 3653/722/163: the short last round's 32 blocks, not 360)
        light = min(rounds, key=lambda r: (blocks[r], r))
        shorter = []
        _, _, p_small, _ = run(_round_cores(work, [light]), f / 2, traces=shorter)
        prologue = _line(f / 2, _prologue_end(_sync_stamps(shorter[0]), 1, p_small), f, p_big, 1.0)
    ops = _reduce_ops(problem, til, work)
    body = None if til.dtmBasic else _replayed_body(traces[0], work, rounds, np.asarray(stamps, float), ops, prologue)
    if body is None:
        body = _priced_rounds(np.asarray(stamps, float), rounds, blocks, ops)
    return prologue + body + max(ends) - stamps[-1] + overhead


def _prologue_end(stamps: list, rounds: int, first: float) -> float:
    """The prologue's SyncAll of a sample of *rounds* rounds: the one before the rounds' 2 x rounds (*first*, the
    sample's first SyncAll, where there are no more): a drop-mask adapter's SyncAll comes before it (IS_DTM with
    dropout, its mask not in bit mode: 10 stamps for 4 rounds raised in _priced_rounds)."""
    extra = len(stamps) - 1 - 2 * rounds
    return float(stamps[extra]) if extra > 0 else first


def _replayed_body(trace, work, rounds: list[int], stamps: np.ndarray, ops: np.ndarray, start: float) -> float | None:
    """SameAB IS_DTM: the launch from its first SyncAll to its last as the kernel's ring re-run on every launch
    section's cube and vector costs (dtm_rounds): the sample's own where it ran the section, else its class's
    (area, masked blocks); each round's reduction as sampled or on the line over its copies (_ops_line, as
    _priced_rounds). None where the sample's flags do not read as the ring (then _priced_rounds prices it)."""
    bd = work.block_dim
    tasks = [sum(1 for r in rounds if r * bd + c < work.sections) for c in range(bd)]
    costs = section_costs(trace, bd, tasks) if len(stamps) == 1 + 2 * len(rounds) else None
    if costs is None:
        return None
    *own, done, vdone = costs
    cube_gap, vec_gap = sync_gaps(stamps, done, vdone)
    keys = _section_keys(work)
    reduce = stamps[2::2] - stamps[1::2]
    unsampled = np.ones(len(ops), bool)
    unsampled[rounds] = False
    reductions = np.empty(len(ops))
    reductions[rounds] = reduce
    reductions[unsampled] = _ops_line(ops[rounds], reduce)(ops[unsampled])
    classes = _round_classes(keys, bd)
    replayed = replay_rounds(*(launch_costs(keys, classes, bd, rounds, m) for m in own), reductions, start, cube_gap,
                             vec_gap)
    return float(replayed[-1] - start)


def _sfmg_only(problem, til) -> bool:
    """Whether the main kernel's prologue is VecSftg's sfmg steps alone: no drop-mask adapter, fp32 transposes or
    alibi-slope table before them (each of which scales with the prologue's share in its own way)."""
    return not (problem.dropout and not til.dropMaskBitMode) and np.dtype(problem.dtype).itemsize != 4 \
        and problem.pse_form != "slope"


def _half_prologue(trace, end: float) -> tuple[float, float] | None:
    """(h, cycle): where a sample's prologue would have ended had each AIV run the share h of its sfmg rows (its
    first half of steps), read off the sample's own trace: *end* (the prologue's SyncAll) less the latest AIV's cycles from
    its h-th to its last step's end (a step ends with the MTE3 DataCopy of its sfmg rows). It stands for a second
    sample at half the prologue beside the lightest round, at no simulation: on the tuning set's seven deterministic calls
    with a part of the prologue that run's line and this one are within 3.5k cycles (0.1% of the launch; S 5983/2028
    /5201 the same cycle), and the run cost 0.07-0.21 s CPU (S 5983: 0.21 of 1.76 s). None where the AIVs ran fewer
    than two steps."""
    c, names = trace.columns, trace.names
    if "SyncAll" not in names or "DataCopy" not in names:
        return None
    sync = np.flatnonzero(c["name_id"] == names.index("SyncAll"))
    steps = np.flatnonzero((c["end"] <= end) & (c["name_id"] == names.index("DataCopy"))
                           & (c["pipe"] == int(Pipe.MTE3)))
    stream = lambda rows: c["core"][rows].astype(np.int64) * 8 + c["sub_core"][rows]  # noqa: E731
    first = {}
    for x, s0 in zip(stream(sync).tolist(), c["start"][sync].tolist()):
        first[x] = min(first.get(x, s0), s0)
    per = {}
    for x, e, b in zip(stream(steps).tolist(), c["end"][steps].tolist(), c["bytes"][steps].tolist()):
        if x in first and e <= first[x]:
            per.setdefault(x, []).append((e, b))
    longest = max(per.values(), key=len, default=[])
    n = len(longest)
    if n < 2:
        return None
    h = n // 2
    last = max(max(v)[0] for v in per.values())
    mid = max(sorted(v)[h - 1][0] for v in per.values() if len(v) >= h)
    done = sorted(longest)
    # the share of the AIV's sfmg rows in its first h steps (its last step may be short): by the bytes written
    return sum(b for _, b in done[:h]) / sum(b for _, b in done), end - (last - mid)


def _sample_rounds(work, til=None) -> list[int]:
    """The launch rounds an IS_DTM sample runs: all of them where the launch fits DTM_BLOCKS blocks; else rounds 0,
    1 (the fill: their vector passes beside round 0's Cube23 make the first period), the last two (the last, often
    short round) and as many evenly spaced ones as fit DTM_BLOCKS; SameAB IS_DTM, whose rounds are re-run from the
    sample's section costs (_replayed_body), as many as fit REPLAY_BLOCKS (at most DTM_BLOCKS), and the first HEAD
    rounds (the fill's phase, dtm_rounds.HEAD)."""
    total = -(-work.sections // work.block_dim)
    per_round = work.block_dim * work.blocks / max(work.sections, 1)
    if total * per_round <= DTM_BLOCKS:
        return list(range(total))
    replayed = til is not None and til.sabDtm and not til.dtmBasic
    k = min(total, max(2, int((min(REPLAY_BLOCKS, DTM_BLOCKS) if replayed else DTM_BLOCKS) / per_round)))
    head = set(range(min(total, HEAD if replayed else 2)))
    return sorted(set(np.linspace(0, total - 1, k).round().astype(int).tolist()) | head | {total - 2, total - 1})


def _round_classes(keys: np.ndarray, block_dim: int) -> np.ndarray:
    """A class per launch round: the rounds whose sections hold the same section classes (_section_keys), as many
    of each (a section's costs follow what the round's other cores run beside it: dtm_rounds.launch_costs); numbered
    in order of first appearance."""
    cls = key_ids(keys)
    total = -(-len(keys) // block_dim)
    rows = np.full(total * block_dim, -1)
    rows[:len(keys)] = cls
    index = {}
    return np.array([index.setdefault(r, len(index)) for r in map(tuple, np.sort(rows.reshape(total, block_dim),
                                                                                    axis=1).tolist())], int)


def _section_keys(work) -> np.ndarray:
    """A row per launch section: its size (the area its listed CV blocks cover, else its blocks) and masked
    blocks, the class whose mean costs an unsampled section takes (dtm_rounds.launch_costs)."""
    gs = np.arange(work.sections)
    blocks, masked = _counts(work, gs)
    size = _section_areas(work, gs) if hasattr(work, "listed") else blocks
    return np.column_stack([size, masked]).astype(float)


def _round_cores(work, rounds) -> dict:
    """Core c -> its sections of the launch rounds *rounds* (ascending): each core runs, round by round, the section
    it runs in the launch (only the launch's last round is short, and it comes last)."""
    bd = work.block_dim
    return {c: [r * bd + c for r in rounds if r * bd + c < work.sections] for c in range(bd)}


def _round_blocks(work) -> np.ndarray:
    """Blocks of each launch round."""
    per = _counts(work, np.arange(work.sections))[0]
    return np.add.reduceat(per, np.arange(0, work.sections, work.block_dim)).astype(float)


def _sync_stamps(trace) -> list:
    """The cycle each SyncAll of a launch ends, in order: the latest AIV's (every AIV leaves it together). Empty if
    the AIVs' counts differ."""
    rows = _syncall_rows(trace)
    if rows is None:
        return []
    stream, ends = rows[0], rows[1].astype(float)
    per = [np.sort(ends[stream == x]) for x in np.unique(stream)]
    if len({len(p) for p in per}) != 1:
        return []
    return np.max(np.stack(per), axis=0).tolist()


def _priced_rounds(stamps: np.ndarray, rounds: list[int], blocks: np.ndarray, ops: np.ndarray) -> float:
    """Cycles of the launch from its first SyncAll to its last, from a sample of its *rounds* (ascending, holding
    0, 1 and the last; *blocks* and *ops* (_reduce_ops) per launch round). The sample's stamps are 1 + 2 K for its K
    rounds: the prologue's SyncAll, then per round the one closing a period and the one closing its reduction.
    The periods and the reductions are priced apart, as their costs follow different counts:
    - a period (the vector pass of a round beside the Cube23 of the round before) on the line of the sample's middle
      periods over the two rounds' blocks (an unsampled round's period pairs two rounds the sample may not hold
      side by side: the line is over both; at their mean where it falls, _period_line); the first (the fill:
      rounds 0 and 1's passes beside round 0's Cube23) and the last (the last round's Cube23) as sampled;
    - a reduction (as long as its busiest AIV's copies: basic_det S 1565/1055/1364 kv 559/3371/2610 N 8/2 D 128,
      26k cycles for 66-80 copies, 52k for 146; the line within 0.2% of the launch per round on 15 IS_DTM and
      basic_det timing launches) on the line of the sampled rounds' reductions over their copies, where one line over
      the sample runs' blocks held both and came out -4.04% on that call."""
    total, k = len(blocks), len(rounds)
    if len(stamps) != 1 + 2 * k:
        raise RuntimeError(f"IS_DTM sample: {len(stamps)} SyncAll stamps for {k} rounds")
    period = stamps[1::2] - stamps[0:-1:2]
    pair = np.array([blocks[rounds[i]] + blocks[rounds[i + 1]] for i in range(1, k - 1)])
    middle = _period_line(pair, period[1:k - 1])(blocks[1:total - 1] + blocks[2:total])
    reduce = stamps[2::2] - stamps[1::2]
    unsampled = np.ones(total, bool)
    unsampled[rounds] = False
    return (period[0] + period[k - 1] + float(middle.sum()) + float(reduce.sum())
            + float(np.sum(_ops_line(ops[rounds], reduce)(ops[unsampled]))))


def _period_line(pair: np.ndarray, period: np.ndarray):
    """The middle periods' line over the two rounds' blocks (_ops_line), or the periods' mean where that line falls.

    Why: a period holds a round's vector pass beside the Cube23 of the round before, and neither gets cheaper with
    more blocks; a falling line is what the blocks do not count (the L2 state along the launch), and extrapolated
    past the sampled pairs it priced every period low. SameAB IS_DTM S 614/279/2636 N 16/8 D 256 sparse 3, timing
    mode: the sample's middle periods 83-140k cycles over pairs of 428-594 blocks (the non-neighbour pairs cheapest)
    fit 212.7k - 171 a block, pricing the launch's pairs of 490-648 blocks at 109-114k against 124k on average:
    -4.45%, -1.74% at the mean. Rounds r and r + 7 there hold identical per-core blocks and differ by 20-40k."""
    line = _ops_line(pair, period)
    x = np.asarray(pair, float)
    if len(set(x.tolist())) >= 2 and line(x.max()) < line(x.min()):
        mean = float(np.mean(period))
        return lambda z: np.full(np.shape(z), mean)
    return line


def _ops_line(x: np.ndarray, y: np.ndarray):
    """The least-squares line of cycles *y* over counts *x* (blocks, copies); through the origin at their mean ratio
    where the counts do not vary."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(set(x.tolist())) < 2:
        ratio = float(y.sum() / x.sum()) if x.sum() else 0.0
        return lambda z: ratio * np.asarray(z, float) if x.sum() else np.full(np.shape(z), float(y.mean()))
    a, b = np.linalg.lstsq(np.stack([np.ones(len(x)), x], 1), y, rcond=None)[0]
    return lambda z: a + b * np.asarray(z, float)


def _reduce_ops(problem, til, work) -> np.ndarray:
    """Per launch round, the copies of its busiest reducing AIV (ComputeVecAdd): every reduction step of a group
    copies its partials in, the workspace rows in and the sum out (len(srcs) + 2), the steps of the rows the AIV
    takes; the groups are the kernel's own (dtm_groups, basic_det's det_reduce_groups) on a tiling of the rounds.
    Beyond OPS_BLOCKS blocks, on evenly spaced rounds, each standing for its neighbours."""
    bd = work.block_dim
    total = -(-work.sections // bd)
    per_round = max(1.0, bd * work.blocks / max(work.sections, 1))
    n = min(total, max(2, int(OPS_BLOCKS / per_round)))
    listed = np.unique(np.linspace(0, total - 1, n).round().astype(int))
    sample, _ = _sample_tiling(problem, til, work, list(range(bd)), _round_cores(work, listed))
    args = kernel_args(problem)
    aivs = _reducers(sample, 2 * bd)
    counted = np.array([_copies(sample, args, i, aivs) for i in range(len(listed))], float)
    return counted[np.clip(np.searchsorted(listed, np.arange(total)), 0, len(listed) - 1)] if n < total else counted


def _reducers(t, aivs: int) -> list:
    """(kinds, AIVs sharing them) of the first AIV of each share of ComputeVecAdd's split (it takes the most rows)."""
    out = []
    for v in range(aivs):
        mine, share, idx = (det_vec_kinds if t.dtmBasic else sab_vec_kinds)(aivs, v)
        if idx == 0 and mine:
            out.append((mine, share))
    return out


def _copies(t, args, r: int, aivs: list) -> int:
    """The copies of the busiest of *aivs* (_reducers) in round *r*'s reduction of tiling *t*."""
    groups = det_reduce_groups(t, args, r) if t.dtmBasic else dtm_groups(t, args, r)
    most = 0
    for mine, share in aivs:
        copies = 0
        for kind, _, rows, width, _, srcs in groups:
            if kind in mine:
                take = -(-rows // share)
                wp = -(-width // 8) * 8
                copies += -(-min(rows, take) // max(1, ADD_ELEMS // wp)) * (len(srcs) + 2)
        most = max(most, copies)
    return most


def _counts(work, gs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(blocks, masked) of the global sections *gs*: counted (work.Work) or listed (SameAB's ListedWork)."""
    if hasattr(work, "counts_many"):
        return work.counts_many(gs)
    return np.array([work.section_counts(int(g)) for g in gs], np.int64).reshape(-1, 2).T


def _per_aiv(total: int, spec) -> int:
    return -(-total // spec.aiv_count)


def _streamed(real_steps: float, spec, run) -> float:
    """Cycles of a streaming launch (pre, post) of *real_steps* steps per AIV: simulated whole up to
    STREAM_STEPS steps; beyond that as two
    miniatures of it, of STREAM_SAMPLE / 2 and STREAM_SAMPLE steps on STREAM_AIVS AIVs at their share of the
    bandwidth, with the L2 shrunk in proportion (so the miniature outgrows L2 at the same point of its run
    as the launch does: writes and first reads miss more as the launch goes on), read off on the line
    through the two at the full size. ``run(steps, chip)`` gives one run's cycles (None: whole)."""
    if real_steps <= max(STREAM_STEPS, 2 * STREAM_SAMPLE):
        return run(None, spec)
    aivs = min(STREAM_AIVS, spec.aiv_count)
    small = contention_chip(spec.replace(aic_count=max(1, aivs // spec.aiv_per_aic)), spec.aiv_count / aivs)

    def mini(steps):
        f = steps / real_steps
        return run(steps, small.replace(l2_bytes=max(1, int(spec.l2_bytes * f * aivs / spec.aiv_count))))
    a, b = STREAM_SAMPLE // 2, STREAM_SAMPLE
    return _line(a, mini(a), b, mini(b), real_steps)


def _pre_cycles(til, spec) -> float:
    """The pre kernel zeroes one dq/dk/dv[+rope] fp32 set (copyBytes) on every AIV."""
    def run(steps, chip):
        sub = til if steps is None else replace(til, copyBytes=steps * POST_ELEMS * chip.aiv_count * 4)
        return launch_pre(sub, chip, "timing", _ws(til)).cycles
    return _streamed(_per_aiv(til.copyBytes // 4, spec) / POST_ELEMS, spec, run)


def _post_cycles(problem, til, spec) -> float:
    shapes = {"dq": problem.q_shape, "dk": problem.kv_shape, "dv": problem.kv_shape}
    if problem.rope_d:
        shapes |= {"dq_rope": (problem.T1, problem.N1, problem.rope_d),
                   "dk_rope": (problem.T2, problem.N2, problem.rope_d)}
    p_nosink = replace(problem, sink=False)
    sizes = {k: int(np.prod(s)) for k, s in shapes.items()}
    steps = _per_aiv(max(sizes.values()), spec) / POST_ELEMS

    def run(count, chip):
        if count is None:
            outs = {k: TensorSpec(s, problem.dtype) for k, s in shapes.items()}
        else:  # each output its own share of the miniature: dk/dv are far smaller than dq when q is long
            outs = {k: TensorSpec((max(1, round(count * POST_ELEMS * chip.aiv_count * n / max(sizes.values()))),),
                                  problem.dtype) for k, n in sizes.items()}
        return launch_post(p_nosink, til, chip, "timing", _ws(til), outs).cycles
    return _streamed(steps, spec, run)


def _dsink_cycles(problem, til, spec, blocks: int) -> float:
    """Cycles PostDsink adds to the post launch where the half-block templates (basic, basic_det) take a sink: AIV 0
    first sums each head's dsink partials, one 8-float slot per block and AIV half, in slot order (sink_slots), then
    runs its share of dq / dk / dv; the other AIVs do not wait, so it lengthens the launch by its own time (basic_det
    S 3000 N 16/4 D 64 with a sink: post 167.6k cycles in timing mode, 57.7k without it). The estimate's tiling lists
    no blocks, so the sums run on a tiling of DSINK_SLOTS[0] and [1] blocks of two rows per head (two slots each;
    a block of one row has one: counted as two), their cycles over a run without the sink on a line to the launch's
    slots per head. SameAB's dsink (PostDsinkSab, dsinkCores) is not priced: N1 heads over the AIVs, a step each."""
    if not problem.sink or til.dsinkCores:
        return 0.0
    n1 = til.n1Size
    outs = {k: TensorSpec((1,), problem.dtype) for k in ("dq", "dk", "dv")}

    def run(per_head: int, sink: bool) -> float:
        sub = replace(til, blkB=(0,) * (per_head * n1), blkN=tuple(np.repeat(np.arange(n1), per_head).tolist()),
                      blkRows=(BASE,) * (per_head * n1))
        kw = {"dsink": TensorSpec((n1,), np.float32)} if sink else {}
        return launch_post(problem if sink else replace(problem, sink=False), sub, spec, "timing", _ws(til),
                           outs | kw).cycles
    a, b = DSINK_SLOTS
    base = run(a, False)
    return max(0.0, _line(a, run(a, True), b, run(b, True), blocks / n1) - base)


def estimate_fag(problem, til, spec, work) -> tuple[Estimate, dict]:
    """Estimated cycles and time of the three launches (module docstring), and each launch's cycles.
    ``error_bound`` is NaN: the error is measured by benchmarks/estimate_accuracy_fag.py, not guaranteed."""
    inputs = _spec_inputs(problem)
    spec = spec.replace(aicore_timeout_s=float("inf"))  # samples never stop at the timeout: the verdict does
    parts = {"pre": _pre_cycles(til, spec), "main": _main_cycles(problem, til, work, spec, inputs),
             "post": _post_cycles(problem, til, spec) + _dsink_cycles(problem, til, spec, work.blocks)}
    cycles = int(round(sum(parts.values())))
    per_block = parts["main"] / work.blocks if work.blocks else 0.0
    est = Estimate(cycles=cycles, time_us=cycles / spec.clock_hz * 1e6,
                   per_core_cycles=np.array([parts["main"]]), fixed_cycles=parts["pre"] + parts["post"],
                   classes={"blocks": (work.blocks, per_block)}, error_bound=float("nan"))
    return est, parts


def _l2_start(problem, sizes: dict, l2_bytes: int) -> int:
    """Touched bytes a sample's L2 model starts at: the bytes of the inputs' pages that the launch's copies touch
    (_touched_inputs) where they fit L2, else steady_l2_touched of the inputs' full sizes. Starting at the full
    sizes where the inputs fit L2 but the workspace does not (SameAB IS_DTM, S 2477 N 16/8 D 256 causal: 84 MiB
    of inputs, of which the launch's copies touch 48 MiB, and a workspace of 263 MiB) put the samples' touched
    bytes past the launch's (292 vs 255 MiB) and their hit scale under it (0.75 vs 0.80 on average): +8.95%
    (+0.8% from the touched pages)."""
    return start_touched(_touched_inputs(problem, sizes), sum(sizes.values()), l2_bytes)


def _touched_inputs(problem, sizes: dict) -> int:
    """L2 bytes of the inputs' pages the launch touches in the model. A strided copy is booked as its byte count
    from its first element (npusim/core.py transfer, npusim/memory/gm.py touch), and the cube reads query, key,
    value (and their rope parts) per 128 x 128 block as rows of one head at a pitch of all heads
    (KernelFagBasic.Cube1Block / Cube23, in D chunks): of a TND tensor of H heads and D columns, the copies of
    the block of r <= 128 rows starting at token t cover the elements [t H D, (t H + H - 1 + r) D), an upper
    bound over its heads and chunks (S 2477 N 16/8 D 256 bf16: 1.8 MiB of query and of key/value, as the
    timing-mode launch touches). fp32 inputs: query and key also by the vector transposes' copies (TransposeHeads:
    units of transpose.unit_tokens tokens of one head, the same per-head booking; S 259/3288 N 16/8 D 128 fp32: query
    4.3 MiB of 27.7, which counting it whole put 23 MiB over the launch's); every other input (dy and attention_in by
    the softmax-grad rows, the statistics, masks, pse, dropout bits) counted whole."""
    p = problem
    tnd = {"query": (p.seq_q, p.N1, p.D), "key_in": (p.seq_kv, p.N2, p.D), "value": (p.seq_kv, p.N2, p.D),
           "query_rope": (p.seq_q, p.N1, p.rope_d), "key_in_rope": (p.seq_kv, p.N2, p.rope_d)}
    transposed = ("query", "key_in") if np.dtype(p.dtype).itemsize == 4 else ()
    item = np.dtype(p.dtype).itemsize
    total = 0
    for name, nbytes in sizes.items():
        if name not in tnd:
            total += nbytes
            continue
        seqs, heads, d = tnd[name]
        ranges = [_row_copies(seqs, BASE, heads, d)]  # the cube's per-block copies
        if name in transposed:
            ranges.append(_row_copies(seqs, unit_tokens(d), heads, d, batched=False))
        first = np.concatenate([r[0] for r in ranges])
        end = np.concatenate([r[1] for r in ranges])
        total += min(nbytes, page_union(first * item, end * item))
    return int(total)


def _row_copies(seqs, rows: int, heads: int, d: int, batched: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Element ranges [first, end) that copies of *rows* tokens of one head of a TND tensor (*heads* heads of *d*)
    touch over all heads as the model books them (head_rows_pages): per batch of *seqs* tokens (the cube's blocks),
    or over all tokens in a row (*batched* False: TransposeHeads' units)."""
    seqs = np.asarray(seqs, np.int64) if batched else np.array([int(np.sum(seqs))], np.int64)
    first = np.concatenate(([0], np.cumsum(seqs)[:-1]))
    blocks = -(-seqs // rows)
    batch = np.repeat(np.arange(len(seqs)), blocks)
    local = ragged_arange(blocks)
    token = first[batch] + local * rows
    count = np.minimum(rows, seqs[batch] - local * rows)
    start = token * heads * d
    return start, start + (heads - 1) * d + count * d


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
