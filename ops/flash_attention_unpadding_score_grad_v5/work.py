"""The work of a FlashAttentionUnpaddingScoreGradV5 call, counted without listing its blocks.

tiling.block_list enumerates every 128 x 128 block in Python, which is what the kernel needs but takes
minutes and gigabytes at a million tokens. Estimate mode needs less: how many sections and blocks (and
masked blocks) each AI Core gets, and the blocks of a few chosen sections. Both follow from the mask
geometry: for every s1 block (row) the kept column blocks form one interval, and so do the unmasked
ones, so a section's counts are interval overlaps, computed with numpy per batch (batches with the same
lengths and band share one computation). The section order and the round-robin core split are
tiling.py's (section k on core k % blockDim); tests check the counts against block_list.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ops.flash_attention_unpadding_score_grad_v5.tiling import BASE, COL_GROUP, ROW_GROUP, section_blocks

#: (batch, head) pairs whose core shifts are histogrammed at once (bounds the temporary arrays).
SHIFT_CHUNK = 1 << 22


def _ceil(a, b):
    return -(-a // b)


@dataclass(frozen=True)
class BatchSections:
    """The non-empty sections of one head of a batch (the same for every head), in tiling order."""

    index: np.ndarray  # flat (row group * column groups + column group) of each non-empty section
    blocks: np.ndarray  # blocks per section
    masked: np.ndarray  # masked blocks per section
    col_groups: int


def aiv_runs(work, core: int) -> list[tuple[int, int]]:
    """[lo, hi) local section ranges of *core*'s runs: one, or (generic, work.core_aiv_split) one per AIV, whose
    t-th sections share ring step t (tiling.core_steps)."""
    n = int(work.core_sections[core])
    split = getattr(work, "core_aiv_split", None)
    return [(0, n)] if split is None else [(0, int(split[core])), (int(split[core]), n)]


def row_intervals(problem, b: int, sq: int, skv: int):
    """Per s1 block of batch *b*: kept column blocks [lo, hi] and unmasked ones [ulo, uhi] (empty if lo > hi).

    Column block c covers keys j0 = 128 c .. j1 = min(128 c + 127, skv - 1); rows i0 .. i1 likewise.
    Band forms keep a block iff j0 <= i1 + next and j1 >= i0 - pre, unmasked iff j1 <= i0 + next and
    j0 >= i1 - pre; the prefix form (sparse 6) keeps it iff j0 <= max(i1 + d, prefix - 1) and leaves it
    unmasked iff j1 <= max(i0 + d, prefix - 1), d = skv - sq (tiling._block_state)."""
    n2b = _ceil(skv, BASE)
    i0 = np.arange(_ceil(sq, BASE), dtype=np.int64) * BASE
    i1 = np.minimum(i0 + BASE, sq) - 1
    last = skv - 1

    def j0_le(x):  # last c with 128 c <= x
        return np.clip(np.floor_divide(x, BASE), -1, n2b - 1)

    def j0_ge(x):  # first c with 128 c >= x
        return np.clip(-np.floor_divide(-x, BASE), 0, n2b)

    def j1_le(x):  # last c with j1(c) <= x
        return np.where(last <= x, n2b - 1, np.clip(np.floor_divide(x - (BASE - 1), BASE), -1, n2b - 1))

    def j1_ge(x):  # first c with j1(c) >= x
        return np.where(last < x, n2b, np.clip(-np.floor_divide(-(x - (BASE - 1)), BASE), 0, n2b))

    if problem.mask_form == "prefix_3072":
        d, pfx = skv - sq, int(problem.prefix_n[b])
        lo, hi = np.zeros_like(i0), j0_le(np.maximum(i1 + d, pfx - 1))
        ulo, uhi = np.zeros_like(i0), j1_le(np.maximum(i0 + d, pfx - 1))
    else:
        nxt, pre = int(problem.next_tokens_lu[b]), int(problem.pre_tokens_lu[b])
        lo, hi = j1_ge(i0 - pre), j0_le(i1 + nxt)
        ulo, uhi = j0_ge(i1 - pre), j1_le(i0 + nxt)
        if problem.mask_form == "full":
            ulo, uhi = np.full_like(i0, n2b), np.full_like(i0, -1)
    return lo, hi, np.maximum(lo, ulo), np.minimum(hi, uhi), n2b


def _hull(lo, hi, nrg: int) -> tuple[np.ndarray, np.ndarray]:
    """(first column group, flat offsets) of each row group's hull of column groups: from its rows' first
    kept column group to their last (empty row groups: none), laid out flat row group by row group."""
    rows = np.flatnonzero(lo <= hi)
    group = rows // ROW_GROUP
    first = np.full(nrg, np.iinfo(np.int64).max, np.int64)
    last = np.full(nrg, -1, np.int64)
    np.minimum.at(first, group, lo[rows] // COL_GROUP)
    np.maximum.at(last, group, hi[rows] // COL_GROUP)
    first = np.where(last >= 0, first, 0)
    return first, np.concatenate(([0], np.cumsum(np.maximum(last - first + 1, 0))))


def _group_counts(lo, hi, n2b: int, hull) -> np.ndarray:
    """Per entry (row group R, column group g) of *hull* (_hull), the column blocks of R's rows' [lo, hi]
    (empty if lo > hi) inside g.

    A row's interval covers the column groups between its two edge groups whole and those two in part, so the
    count of (R, g) is g's width times the rows of R that cover g whole (a step function of g: +1 at each
    row's first whole group, -1 past its last, one cumulative sum over the flat layout) plus the edge parts
    (two per row at most). One entry per section of the hull, not one per (row, column group): a million
    tokens give 8192 x 2048 of those per head."""
    first, offsets = hull
    total = int(offsets[-1])
    rows = np.flatnonzero(lo <= hi)
    lo, hi = lo[rows].astype(np.int64), hi[rows].astype(np.int64)
    group = rows // ROW_GROUP
    base = offsets[group] - first[group]  # flat position of (R, g): base + g
    whole_lo = -(-lo // COL_GROUP)  # the first group that starts at or after lo
    whole_hi = np.where(hi >= n2b - 1, _ceil(n2b, COL_GROUP) - 1, (hi + 1) // COL_GROUP - 1)  # the last ending by hi
    has = whole_lo <= whole_hi
    steps = (np.bincount(base[has] + whole_lo[has], minlength=total + 1)
             - np.bincount(base[has] + whole_hi[has] + 1, minlength=total + 1))
    count = np.cumsum(steps[:total])
    count *= COL_GROUP
    ncg = _ceil(n2b, COL_GROUP)
    if n2b % COL_GROUP:  # the last column group is narrower
        ends = np.flatnonzero((first + np.diff(offsets) == ncg) & (np.diff(offsets) > 0))
        count[offsets[ends + 1] - 1] = count[offsets[ends + 1] - 1] // COL_GROUP * (n2b % COL_GROUP)
    lo_edge, hi_edge = lo // COL_GROUP, hi // COL_GROUP
    for edge, also in ((lo_edge, True), (hi_edge, hi_edge != lo_edge)):  # each row's partly covered edge groups
        part = also & ~((whole_lo <= edge) & (edge <= whole_hi))
        e = edge[part]
        covered = (np.minimum(hi[part], np.minimum(e * COL_GROUP + COL_GROUP, n2b) - 1)
                   - np.maximum(lo[part], e * COL_GROUP) + 1)
        np.add.at(count, base[part] + e, covered)
    return count


def batch_sections(problem, b: int) -> BatchSections:
    """Counts of the non-empty sections of one head of batch *b*."""
    sq, skv = int(problem.seq_q[b]), int(problem.seq_kv[b])
    if sq == 0 or skv == 0:
        e = np.zeros(0, np.int64)
        return BatchSections(e, e, e, 0)
    lo, hi, ulo, uhi, n2b = row_intervals(problem, b, sq, skv)
    hull = _hull(lo, hi, _ceil(len(lo), ROW_GROUP))
    kept = _group_counts(lo, hi, n2b, hull)  # the unmasked blocks lie inside the kept ones: the same hull
    plain = _group_counts(ulo, uhi, n2b, hull)
    first, offsets = hull
    ncg = _ceil(n2b, COL_GROUP)
    index = np.repeat(np.arange(len(first), dtype=np.int64) * ncg + first - offsets[:-1], np.diff(offsets))
    index += np.arange(len(index))
    masked = kept - plain
    if not kept.all():  # a hull with an empty column group inside
        nz = np.flatnonzero(kept)
        index, kept, masked = index[nz], kept[nz], masked[nz]
    return BatchSections(index, kept, masked, ncg)


def _signature(problem, b: int) -> tuple:
    sig = (int(problem.seq_q[b]), int(problem.seq_kv[b]))
    if problem.mask_form == "prefix_3072":
        return sig + (int(problem.prefix_n[b]),)
    return sig + (int(problem.next_tokens_lu[b]), int(problem.pre_tokens_lu[b]))


@dataclass
class Work:
    """Sections and blocks of a call and their split over *block_dim* cores."""

    block_dim: int
    sections: int
    blocks: int
    masked: int
    core_sections: np.ndarray
    core_blocks: np.ndarray
    core_masked: np.ndarray
    batch_of: np.ndarray  # per batch: its BatchSections index (batches of one signature share it)
    kinds: list
    offsets: np.ndarray  # first global section of each batch (length B + 1)

    def section(self, g: int) -> tuple[int, int, int, int]:
        """(b, n, row group, column group) of global section *g*."""
        b = int(np.searchsorted(self.offsets, g, side="right") - 1)
        bs = self.kinds[self.batch_of[b]]
        n, local = divmod(g - int(self.offsets[b]), len(bs.index))
        rg, cg = divmod(int(bs.index[local]), bs.col_groups)
        return b, n, rg, cg

    def section_counts(self, g: int) -> tuple[int, int]:
        """(blocks, masked blocks) of global section *g*."""
        b = int(np.searchsorted(self.offsets, g, side="right") - 1)
        bs = self.kinds[self.batch_of[b]]
        local = (g - int(self.offsets[b])) % len(bs.index)
        return int(bs.blocks[local]), int(bs.masked[local])

    def counts_many(self, gs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(blocks, masked blocks) of each global section in *gs* (vectorised section_counts)."""
        gs = np.asarray(gs, np.int64)
        b = np.searchsorted(self.offsets, gs, side="right") - 1
        kind = self.batch_of[b]
        blocks, masked = np.zeros(len(gs), np.int64), np.zeros(len(gs), np.int64)
        for k in np.unique(kind):
            sel = kind == k
            bs = self.kinds[int(k)]
            local = (gs[sel] - self.offsets[b[sel]]) % len(bs.index)
            blocks[sel], masked[sel] = bs.blocks[local], bs.masked[local]
        return blocks, masked

    def blocks_of(self, problem, g: int) -> list:
        """The block tuples of global section *g*, as tiling.block_list gives them."""
        b, n, rg, cg = self.section(g)
        return section_blocks(problem, b, n, rg, cg)


def count_work(problem, block_dim: int | None, max_cores: int) -> Work:
    """The call's sections, blocks and per-core split; *block_dim* None: min(max_cores, sections)."""
    kinds, index_of, batch_of = [], {}, np.zeros(problem.B, np.int64)
    for b in range(problem.B):
        sig = _signature(problem, b)
        if sig not in index_of:
            index_of[sig] = len(kinds)
            kinds.append(batch_sections(problem, b))
        batch_of[b] = index_of[sig]
    per_head = np.array([len(kinds[k].index) for k in batch_of], np.int64)
    offsets = np.concatenate(([0], np.cumsum(per_head * problem.N1)))
    nsec = int(offsets[-1])
    bd = block_dim if block_dim is not None else max(1, min(max_cores, nsec))
    core = {name: np.zeros(bd, np.float64) for name in ("sections", "blocks", "masked")}
    heads = np.arange(problem.N1, dtype=np.int64)
    for k, bs in enumerate(kinds):
        m = len(bs.index)
        if m == 0:
            continue
        pos = np.arange(m) % bd
        base = {"sections": np.bincount(pos, minlength=bd), "blocks": np.bincount(pos, bs.blocks, minlength=bd),
                "masked": np.bincount(pos, bs.masked, minlength=bd)}
        starts = offsets[:-1][batch_of == k]
        hist = np.zeros(bd, np.int64)
        step = max(1, SHIFT_CHUNK // max(problem.N1, 1))
        for c0 in range(0, len(starts), step):
            shifts = (starts[c0:c0 + step, None] + heads[None, :] * m) % bd
            hist += np.bincount(shifts.ravel(), minlength=bd)
        for s in np.flatnonzero(hist):
            for name in core:
                core[name] += hist[s] * np.roll(base[name], s)
    return Work(block_dim=bd, sections=nsec, blocks=int(round(core["blocks"].sum())),
                masked=int(round(core["masked"].sum())), core_sections=core["sections"].astype(np.int64),
                core_blocks=core["blocks"].astype(np.int64), core_masked=core["masked"].astype(np.int64),
                batch_of=batch_of, kinds=kinds, offsets=offsets)
