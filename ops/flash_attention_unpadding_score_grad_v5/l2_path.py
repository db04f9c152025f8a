"""The L2 touched-bytes trajectory of a basic-template launch (counted work), for its estimate's sample.

Why: the L2 model (npusim/memory/gm.py) scales hits by L2 / touched bytes once the pages touched chip-wide pass L2.
A long basic launch passes it part way (S 8192 x 4 N 4/4 D 128 causal, timing mode: 190 MiB at a tenth of its run,
197 at 0.3, 221 at 0.4, 292 at its end) and its bandwidth-bound steps follow the hit share (123k cycles a 16-block step
at 1, 97k at 0.74, 126k at 0.66: docs/fag.md "Estimate mode"), while the sample's few cores, which write only their
own share of the workspace, stay under L2. Both curves are predicted here from the pages the kernel's copies book
(a copy is booked as its byte count from its first element: npusim/core.py transfer, gm.py touch), in ring-step
order, so that the sample's L2 model can be run at the launch's hit scale where the sample's own touched bytes are
(:func:`follow_map`):

- the launch: dy and attention_in read whole and sfmg written whole by the prologue (KernelFagBasic.VecSftg), then
  per ring step the pages its sections reach first: the query / key / value rows of each block (Cube1Block,
  Cube23Block: rows of one head at the pitch of all heads, in l1_cols-column chunks), the fp32 dq / dk / dv rows the
  Fixpipes add (per l1_cols chunk and N_CHUNK columns), the softmax statistics' rows (_stat_in, per AIV half) and every
  busy core's section buffers (mm1 / mm2 by task parity, 64 KiB a block slot);
- the sample: the inputs' start level (its inputs start resident), the sfmg rows its prologue share writes and the
  sfmg rows its sections read, its cores' section buffers and its sections' dq / dk / dv rows, step by step.

Scope: the basic template with 16-bit inputs, no rope, pse, dropout or full mask (other calls get None: their sample
keeps its own L2 state).
"""
from __future__ import annotations

import numpy as np

from npusim.memory.gm import L2_PAGE_BYTES
from ops.flash_attention_unpadding_score_grad_v5.kernel import N_CHUNK, l1_cols
from ops.flash_attention_unpadding_score_grad_v5.tiling import BASE, COL_GROUP, ROW_GROUP
from ops.flash_attention_unpadding_score_grad_v5.work import row_intervals

F32 = 4
SLOT_BYTES = BASE * BASE * F32  # one block's slot in a section buffer (KernelFagBasic._slot)


def traceable(problem, til) -> bool:
    """Whether the trajectory covers the call (module docstring's scope)."""
    p = problem
    return (til.template == "basic" and np.dtype(p.dtype).itemsize == 2 and not p.rope_d and p.pse_form == "none"
            and not p.dropout and p.mask_form != "full" and not til.sabDtm)


def _step_pages(start: np.ndarray, end: np.ndarray, step: np.ndarray, steps: int) -> np.ndarray:
    """Bytes of the pages of one GM buffer that byte ranges [start, end) reach first at each step (steps -1 ..
    steps - 1, index 0 = step -1): each page counted once, at the first step whose range covers it."""
    out = np.zeros(steps + 1, np.int64)
    if not len(start):
        return out
    p0, p1 = start // L2_PAGE_BYTES, (end - 1) // L2_PAGE_BYTES + 1
    n = p1 - p0
    page = np.repeat(p0, n) + _ragged(n)
    at = np.repeat(step, n)
    first = np.full(int(page.max()) + 1, steps, np.int64)
    np.minimum.at(first, page, at)
    first = first[first < steps]
    out += np.bincount(first + 1, minlength=steps + 1)[:steps + 1] * L2_PAGE_BYTES
    return out


def _ragged(n: np.ndarray) -> np.ndarray:
    """0 .. n[i] - 1 for each i, concatenated."""
    total = int(n.sum())
    if not total:
        return np.zeros(0, np.int64)
    return np.arange(total) - np.repeat(np.cumsum(n) - n, n)


def _row_copies(first_el: np.ndarray, rows: np.ndarray, d: int, chunk: int, item: int, sub: int | None = None):
    """Byte ranges the copies of *rows* rows of one head (row start elements *first_el*, *d* columns) book: one per
    *chunk* columns (and per *sub* columns inside a chunk: the Fixpipes' N_CHUNK), each its byte count from its first
    element. Returns (start, end, index of the row set of each range)."""
    starts, ends, idx = [], [], []
    for c0 in range(0, d, chunk):
        w = min(chunk, d - c0)
        for dn in range(0, w, sub or w):
            cols = min(sub or w, w - dn)
            s = (first_el + c0 + dn) * item
            starts.append(s)
            ends.append(s + rows * cols * item)
            idx.append(np.arange(len(first_el)))
    return np.concatenate(starts), np.concatenate(ends), np.concatenate(idx)


class _Batches:
    """Per batch: its first row and column of each block row / column and the first section (local index) that
    reaches each (band and prefix masks keep one interval of column blocks per row, both ends rising with the row)."""

    def __init__(self, problem, work):
        self.rows, self.cols = [], []  # per batch: (block index, rows, local section) arrays
        for b in range(problem.B):
            sq, skv = int(problem.seq_q[b]), int(problem.seq_kv[b])
            bs = work.kinds[work.batch_of[b]]
            if sq == 0 or skv == 0 or not len(bs.index):
                self.rows.append(None)
                self.cols.append(None)
                continue
            lo, hi, _, _, n2b = row_intervals(problem, b, sq, skv)
            r = np.flatnonzero(lo <= hi)
            ncg = bs.col_groups
            row_sec = np.searchsorted(bs.index, (r // ROW_GROUP) * ncg + lo[r] // COL_GROUP)
            c = np.arange(n2b)
            first = np.searchsorted(hi[r], c)  # the first kept row whose interval reaches column c
            ok = first < len(r)
            ok[ok] &= lo[r][first[ok]] <= c[ok]
            c, first = c[ok], first[ok]
            col_sec = np.searchsorted(bs.index, (r[first] // ROW_GROUP) * ncg + c // COL_GROUP)
            self.rows.append((r, np.minimum(BASE, sq - r * BASE), row_sec))
            self.cols.append((c, np.minimum(BASE, skv - c * BASE), col_sec))


def launch_curve(problem, til, work, parts: dict | None = None) -> np.ndarray:
    """Touched bytes of the launch after each of its ring steps: index 0 after the prologue, index j + 1 after every
    busy core's j-th section (the round-robin split runs global section g as core g % blockDim's g // blockDim-th).
    *parts*: a dict to receive each GM buffer's own curve."""
    p, t = problem, til
    bd = work.block_dim
    steps = int(work.core_sections.max())
    item = np.dtype(p.dtype).itemsize
    chunk = l1_cols(p.D, 0, item)
    batches = _Batches(p, work)
    per_buffer = {}

    def add(name, start, end, step):
        s, e, st = per_buffer.get(name, ([], [], []))
        s.append(np.asarray(start, np.int64))
        e.append(np.asarray(end, np.int64))
        st.append(np.asarray(step, np.int64))
        per_buffer[name] = (s, e, st)

    for b, (rows, cols) in enumerate(zip(batches.rows, batches.cols)):
        if rows is None:
            continue
        m = len(work.kinds[work.batch_of[b]].index)
        base = int(work.offsets[b])
        r, nr, rsec = rows
        for n in range(p.N1):
            step = (base + n * m + rsec) // bd
            el = ((int(p.cu_seq_q[b]) + r * BASE) * p.N1 + n) * p.D
            s, e, i = _row_copies(el, nr, p.D, chunk, item)
            add("query", s, e, step[i])
            s, e, i = _row_copies(el, nr, p.D, chunk, F32, N_CHUNK)
            add("workspace", s + t.dqOffset, e + t.dqOffset, step[i])
            add_stats = _stat_ranges(p, b, n, r, nr)
            for name in ("softmax_max", "softmax_sum"):
                add(name, add_stats[0], add_stats[1], step[add_stats[2]])
        c, nc, csec = cols
        for n2 in range(p.N2):
            step = (base + n2 * p.G * m + csec) // bd
            el = ((int(p.cu_seq_kv[b]) + c * BASE) * p.N2 + n2) * p.D
            s, e, i = _row_copies(el, nc, p.D, chunk, item)
            add("key_in", s, e, step[i])
            add("value", s, e, step[i])
            s, e, i = _row_copies(el, nc, p.D, chunk, F32, N_CHUNK)
            for off in (t.dkOffset, t.dvOffset):
                add("workspace", s + off, e + off, step[i])
    _add_buffers(add, work, t, steps)
    total = np.zeros(steps + 1, np.int64)
    total[0] += 2 * int(np.prod(p.q_shape)) * item  # dy, attention_in: read whole by the prologue
    for name, (s, e, st) in per_buffer.items():
        own = _step_pages(np.concatenate(s), np.concatenate(e), np.concatenate(st), steps)
        total += own
        if parts is not None:
            parts[name] = np.cumsum(own)
    return np.cumsum(total)


def _stat_ranges(p, b: int, n: int, r: np.ndarray, nr: np.ndarray):
    """Byte ranges of softmax_max / softmax_sum rows the AIVs read for block rows *r* (*nr* rows each) of head *n*
    (_stat_in, each AIV its half of a block's rows): (start, end, index into r)."""
    h = -(-nr // 2)
    starts, ends, idx = [], [], []
    for row0, rows in ((np.zeros_like(nr), h), (h, nr - h)):
        keep = rows > 0
        token = int(p.cu_seq_q[b]) + r * BASE + row0
        if p.softmax_in_layout != "":
            el = (token * p.N1 + n) * 8
        else:
            el = (int(p.cu_seq_q[b]) * p.N1 + n * int(p.seq_q[b]) + r * BASE + row0) * 8
        starts.append((el * F32)[keep])
        ends.append((el * F32 + rows * 32)[keep])
        idx.append(np.flatnonzero(keep))
    return np.concatenate(starts), np.concatenate(ends), np.concatenate(idx)


def _add_buffers(add, work, t, steps: int) -> None:
    """The prologue's sfmg rows (all of them, step -1) and every busy core's section buffers: mm1 / mm2 of each task
    parity grow to the largest section of that parity the core has run."""
    add("workspace", [t.sfmgOffset], [t.sfmgOffset + t.t1Size * t.n1Size * 32], [-1])
    bd, steps = work.block_dim, int(work.core_sections.max())
    blocks = np.zeros(steps * bd, np.int64)  # [local step, core] of global section local * bd + core
    blocks[:work.sections] = work.counts_many(np.arange(work.sections, dtype=np.int64))[0]
    blocks = blocks.reshape(steps, bd)
    for parity in (0, 1):
        run = np.maximum.accumulate(blocks[parity::2], axis=0)
        grew = np.diff(run, axis=0, prepend=0) > 0
        j, c = np.nonzero(grew)
        for region in (parity, 2 + parity):
            start = t.mmOffset + (c * 4 + region) * t.mmSectionBytes
            add("workspace", start, start + run[j, c] * SLOT_BYTES, 2 * j + parity)


def sample_curve(problem, til, work, positions: dict, start: int, workers: int) -> np.ndarray:
    """Touched bytes of a sample run after its prologue (index 0) and after each of its ring steps: *start* (its L2
    model's start: the inputs, resident), the sfmg rows its prologue writes (the first 2 k of *workers* AIV shares,
    KernelFagBasic.VecSftg) and those its sections read beyond them, its k cores' section buffers (mm1 / mm2 by the
    sample's own task parity) and the dq / dk / dv rows of its sections. *positions*: {core: its global sections in
    run order}, in the sample's core order (_sample_tiling's)."""
    p, t = problem, til
    k, steps = len(positions), max(len(v) for v in positions.values())
    item = np.dtype(p.dtype).itemsize
    chunk = l1_cols(p.D, 0, item)
    rows_all = t.t1Size * t.n1Size
    written = min(rows_all, 2 * k * -(-rows_all // workers)) * 32
    starts, ends, at = [np.array([t.sfmgOffset])], [np.array([t.sfmgOffset + written])], [np.array([-1])]
    for i, gs in enumerate(positions.values()):
        top = [0, 0]
        for j, g in enumerate(gs):
            blk = np.array([x[:6] for x in work.blocks_of(p, int(g))], np.int64).reshape(-1, 6)
            if top[j % 2] < len(blk):
                top[j % 2] = len(blk)
                for region in (j % 2, 2 + j % 2):
                    s = t.mmOffset + (i * 4 + region) * t.mmSectionBytes
                    starts.append(np.array([s]))
                    ends.append(np.array([s + len(blk) * SLOT_BYTES]))
                    at.append(np.array([j]))
            b, n, s1o, s2o, nr, nc = blk.T
            cu_q, cu_kv = np.asarray(p.cu_seq_q, np.int64)[b], np.asarray(p.cu_seq_kv, np.int64)[b]
            el = ((cu_q + s1o * BASE) * p.N1 + n) * p.D
            s, e, _ = _row_copies(el, nr, p.D, chunk, F32, N_CHUNK)
            starts.append(s + t.dqOffset)
            ends.append(e + t.dqOffset)
            el = ((cu_kv + s2o * BASE) * p.N2 + n // p.G) * p.D
            s, e, _ = _row_copies(el, nc, p.D, chunk, F32, N_CHUNK)
            for off in (t.dkOffset, t.dvOffset):
                starts.append(s + off)
                ends.append(e + off)
            for r0 in (0, 1):  # the sfmg rows of each AIV half (as _stat_ranges reads the statistics)
                h = -(-nr // 2)
                rows = h if r0 == 0 else nr - h
                tok = cu_q + s1o * BASE + (0 if r0 == 0 else h)
                s = t.sfmgOffset + (tok * p.N1 + n) * 32
                keep = rows > 0
                starts.append(s[keep])
                ends.append((s + rows * 32)[keep])
            at += [np.full(len(x), j) for x in starts[len(at):]]
    own = _step_pages(np.concatenate(starts), np.concatenate(ends), np.concatenate(at), steps)
    return start + np.cumsum(own)


def follow_map(launch: np.ndarray, own: np.ndarray, positions: dict, block_dim: int) -> tuple:
    """(own, launch) touched bytes for gm.L2Model.follow: while the sample runs its step i (its own touched bytes
    from own[i] to own[i + 1], sample_curve) the launch runs its step J (the median over the sample's cores of
    their i-th section's local index) and its touched bytes go from launch[J] to launch[J + 1] (launch_curve); at
    the sample's step boundary the launch level jumps to the next sampled section's (the sections skipped between
    them are the launch's, not the sample's). Where a step adds no page of its own, its level is the later one
    (the sample's own count cannot tell the two steps apart)."""
    steps = len(own) - 1
    where = np.array([int(np.median([(v[i] - c) // block_dim for c, v in positions.items() if i < len(v)]))
                      for i in range(steps)], np.int64)
    first = np.minimum(own[:-1] + 1, own[1:])
    first[0] = own[0]
    xs = np.maximum.accumulate(np.stack([first, own[1:]], axis=1).ravel().astype(float))  # each step's two ends
    ys = np.stack([launch[where], launch[where + 1]], axis=1).ravel().astype(float)
    last = np.concatenate((xs[1:] > xs[:-1], [True]))  # equal own levels: the later launch level
    return xs[last], np.maximum.accumulate(ys[last])


def step_loads(launch: np.ndarray, l2_bytes: int, l2_per_hbm: float) -> np.ndarray:
    """Per launch step, the bandwidth time a byte of its GM traffic takes relative to a hit scale of 1, at the hit
    scale s = L2 / touched bytes of that step (the mean of its two ends, launch_curve): max(s, (1 - s) x
    *l2_per_hbm*), the L2 and HBM calendars' shares (npusim/launch.py book_split: a share s of a resident page's
    bytes on L2's, the rest on HBM's, at the chip's L2 / HBM bandwidth ratio *l2_per_hbm*). Why: the launch's
    bandwidth-bound steps cost by it (S 8192 x 4 N 4/4 D 128 causal: 123k cycles a 16-block step at s = 1, 105k at
    0.85, 97k at 0.74, 126k at 0.66; 123k times the load: 123k, 105k, 96k, 125k)."""
    touched = (launch[:-1] + launch[1:]) / 2.0
    s = np.minimum(1.0, l2_bytes / np.maximum(touched, 1.0))
    return np.maximum(s, (1.0 - s) * l2_per_hbm)
