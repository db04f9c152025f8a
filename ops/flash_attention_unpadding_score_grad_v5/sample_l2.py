"""The workspace pages an estimate sample's cores stand for in L2's touched bytes (``launch``'s *l2_warm* third item).

Why: a sample runs k of the main launch's busy cores, and its L2 model counts only what those k cores touch. Each
busy core of the launch writes section buffers of its own (mm1 / mm2 of two task parities; fp32 calls also their
transposes, mmT), so the launch's touched bytes grow by n such footprints where the sample's grow by k: a launch
can pass the L2 size part way (its hit scale falling) while the sample never does (generic S 5959/627 N 4/4 D 64
fp32 causal: launch 228.5 MiB touched, sample 140.4 MiB; the sample's L2-bound steps 4-10% dearer, +4.86%). Each
new page of a sampled core's own region counts as many times as the busy cores it stands for (GmBuffer.count_pages),
so the sample's touched bytes follow the launch's at each point of the run: its cores write those pages when the
launch's cores write theirs, in their first ring steps. A core's footprint is what the model books for its CV
blocks' ND matrices (a transfer's pages from its first element by its byte count, which no count of slots gives),
so it is read off the sample run itself; an unsampled core stands with a sampled one whose largest CV blocks have
the same shapes (the same footprint), else with the nearest by area, in proportion to the areas (_stands_for).
Shared regions (the dq / dk / dv accumulators, sfmg, fp32 transposes) count once: the sample's cores touch there
what the launch's do for the blocks they run.
"""
from __future__ import annotations

import numpy as np

from ops.common.cube_tiles import c16
from ops.flash_attention_unpadding_score_grad_v5.work import aiv_runs


def core_regions(til) -> list[tuple[int, int]]:
    """Byte ranges [start, end) of the workspace that hold one region per core, every core's in a row: the section
    buffers (kernel: mm at mmOffset + core x 4 sections: dP / dS, S / P) and, for fp32 calls, their transposes
    (mmTOffset, the same layout)."""
    span = 4 * til.mmSectionBytes * til.blockDim
    starts = [til.mmOffset] + ([til.mmTOffset] if til.mmTOffset else [])
    return [(s, s + span) for s in starts]


def counted_pages(til, work, cores: list) -> dict:
    """l2_warm's third item for a sample whose core i is the launch's busy core *cores[i]* (*til*: the launch's
    tiling, *work*: its listed work): each new page of sample core i's own regions counted _stands_for times; {}
    where the sample runs every busy core."""
    busy = [int(c) for c in np.flatnonzero(work.core_sections)]
    if len(cores) >= len(busy):
        return {}
    factors = _stands_for(work, busy, cores)
    sec4 = 4 * til.mmSectionBytes
    return {"workspace": [(lo + i * sec4, lo + (i + 1) * sec4, f) for lo, _ in core_regions(til)
                          for i, f in enumerate(factors)]}


def _stands_for(work, busy: list, cores: list) -> list[float]:
    """Per sampled core (in *cores*' order), the busy cores it stands for, itself included: each busy core not
    sampled counts with a sampled core of the same footprint key (_footprint: the shapes of each AIV run's largest CV
    block and the task parities it fills), the nearest in load rank; where no sampled core has its key, with the one
    of the nearest footprint area, in the ratio of their areas (4-row CV blocks fill one page of a 128-row block's
    nine)."""
    keys = {c: _footprint(work, c) for c in busy}
    rank = {c: r for r, c in enumerate(sorted(busy, key=lambda c: (-int(work.core_blocks[c]), c)))}
    factors = [1.0] * len(cores)
    for c in busy:
        if c in cores:
            continue
        same = [i for i, s in enumerate(cores) if keys[s][0] == keys[c][0]]
        if same:
            factors[min(same, key=lambda i: abs(rank[cores[i]] - rank[c]))] += 1.0
            continue
        i = min(range(len(cores)), key=lambda i: abs(keys[cores[i]][1] - keys[c][1]))
        factors[i] += keys[c][1] / keys[cores[i]][1] if keys[cores[i]][1] else 1.0
    return factors


def _footprint(work, core: int) -> tuple[tuple, int]:
    """(key, area) of *core*'s section buffers: per AIV run (tiling.core_steps), the block shapes (rows, columns) of
    its CV block of the largest area and the task parities its steps fill (one where it has one step); the area: those
    CV blocks' bytes as fp32 16-aligned tiles, times the parities."""
    key, area = [], 0
    for lo, hi in aiv_runs(work, core):
        if hi <= lo:
            continue
        sizes = [(sum(c16(b[4]) * c16(b[5]) for b in sec), sec) for sec in
                 (work.listed[core + j * work.block_dim] for j in range(lo, hi))]
        size, sec = max(sizes, key=lambda x: x[0])
        parities = min(2, hi - lo)
        key.append((tuple((int(b[4]), int(b[5])) for b in sec), parities))
        area += 4 * size * parities
    return tuple(key), area
