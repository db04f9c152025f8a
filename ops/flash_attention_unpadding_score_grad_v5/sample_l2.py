"""The workspace pages an estimate sample's cores stand for in L2's touched bytes (``launch``'s *l2_warm* third item).

Why: a sample runs k of the main launch's busy cores, and its L2 model counts only what those k cores touch. Each
busy core of the launch writes section buffers of its own (mm1 / mm2 of two task parities; fp32 calls also their
transposes, mmT), so the launch's touched bytes grow by n such footprints where the sample's grow by k: a launch
can pass the L2 size part way (its hit scale falling) while the sample never does (generic S 5959/627 N 4/4 D 64
fp32 causal: launch 228.5 MiB touched, sample 140.4 MiB; the sample's L2-bound steps 4-10% dearer, +4.86%). Each
new page of a sampled core's own region counts busy / k times (GmBuffer.count_pages), so the sample's touched bytes
follow the launch's at each point of the run: its cores write those pages when the launch's do, each standing for
busy / k cores of its load rank. Shared regions (the dq / dk / dv accumulators, sfmg, fp32 transposes) count once:
the sample's cores touch there what the launch's do for the blocks they run.
"""
from __future__ import annotations


def core_regions(til) -> list[tuple[int, int]]:
    """Byte ranges [start, end) of the workspace that hold one region per core, every core's in a row: the section
    buffers (kernel: mm at mmOffset + core x 4 sections: dP / dS, S / P) and, for fp32 calls, their transposes
    (mmTOffset, the same layout)."""
    span = 4 * til.mmSectionBytes * til.blockDim
    starts = [til.mmOffset] + ([til.mmTOffset] if til.mmTOffset else [])
    return [(s, s + span) for s in starts]


def counted_pages(til, busy: int, k: int) -> dict:
    """l2_warm's third item for a sample of *k* of the launch's *busy* cores (*til*: the launch's tiling): each new
    page of the per-core regions counted busy / k times; {} where the sample runs every busy core."""
    if k >= busy:
        return {}
    return {"workspace": [(lo, hi, busy / k) for lo, hi in core_regions(til)]}
