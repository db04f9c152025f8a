"""Estimate mode of FlashAttentionVarLenScore: count the work from the tiling, simulate the busiest core.

1. Work, counted vectorised without enumerating tiles: the s1 blocks of every batch with their s2
   ranges and quantised loads (tiling.block_table), the work items (b, n, s1 block) b-major as block
   indices (tiling.item_blocks), the tile classes of the launch (full, edge = a partial last tile,
   masked = holds a masked element, skipped = a W-wide column block outside the item's range) and a
   cost proxy per item (PROXY below: per-tile cycles from the tile's rows, width and head dim).
2. The CANN core split of the items (tiling.core_split: greedy + BalanceLoad on the quantised loads,
   evaluated on prefix sums), each core ranked by its proxy plus a per-core constant (pipeline fill,
   AIV pre-passes), and the load-weighted count of busy cores (``active``). A vector-master AI Core's
   proxy is the sum of its lockstep steps (the AIC serves task t of both vector cores together:
   LOCKSTEP_LONE), not of its tasks.
3. Small cores: a subset of the launch runs whole on the real kernel in timing mode: the candidate
   slowest cores (one per work pattern) and companions spread over the other busy cores, in launch
   (block) order, with the chip's HBM/L2 bandwidth cut to the subset's share of the launch; the
   estimate is the subset's latest end (_whole_group); vector-master cores run on the tiling's own
   split into vector cores. A core too large for WHOLE_COMPANIONS of its size to fit the instruction
   budget is sampled instead: up to SAMPLE_TASKS of its tiles (fewer if two copies would not fit the
   budget), as items spread over its proxy mass cut to their last SAMPLE_DEPTH tiles, run once next to
   companion copies of the sample (rotated: out of phase; vector-master: each vector core samples its
   own items, so that the sample's lockstep steps mix pairs and lone steps as the core's do); the
   sample's step-done cycles (cross-core flags) give each step's
   time after the pipeline fill, and a least-squares fit of those times to the steps' proxies and item
   starts extrapolates to the whole core (_sampled_core).
   Every run starts with the L2 in the launch's steady state (l2_warm: _warm) and pays one core's share
   of the AIV pre-passes (fp32 V^T, byte-mode drop mask) per simulated core.
4. The estimate is at least the launch's GM bytes over the chip's HBM and L2 bandwidths plus the pipeline
   fill (_bandwidth_floor): the samples miss the queue of a launch whose HBM is busy all along.
Measured accuracy: benchmarks/estimate_accuracy_fa.py.
"""
from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from types import SimpleNamespace

import numpy as np

from npusim.estimate import Estimate, contention_chip, timeout_verdict
from npusim.types import SubCore
from ops.common.dropout import ADAPTER_UNIT_BITS
from ops.common.l2_warm import first_reads_missed, head_rows_pages, resident, start_touched
from ops.common.ragged import ragged_arange
from ops.flash_attention_var_len_score.launch import kernel_inputs, launch_kernel
from ops.flash_attention_var_len_score.tiling import (SAME_AB, SYSTEM_WORKSPACE_BYTES, assemble, base_sizes,
                                                      block_table, core_split, item_blocks, split_cores)

COMPANIONS = (6, 5, 4, 3, 2)  # AI Cores simulated side by side in the final run, the most the budget
# allows. Fewer pool the bandwidth worse than the launch's many cores do and leave the estimate to the
# phase luck of a few pairings: on the first 33 configurations of the benchmark grid, always 2 gives
# max |error| 4.95% (mean 2.34%), always 4 gives 3.14% (1.36%), up to 6 as budgeted 2.74% (1.03%)
# (benchmarks/estimate_accuracy_fa.py; docs/estimate.md)
COMPANION_RANGE = 0.5  # companions of small cores: cores ranked at least this fraction of the busiest
WHOLE_COMPANIONS = 2  # the busiest core is simulated whole (with the others) when this many cores of its
# size fit the instruction budget, or when it has no more tiles than a sample. Was 4: on the tuning grid
# two vector-master cores sampled at 4 run whole at 2 (16/4-head bf16: -15.1% -> -10.3%; fp32 16/4 heads
# causal: +4.4% -> +2.5%), no other configuration moves; a sample of such a core simulates about as many
# tasks as the whole core and runs its pair steps faster than the launch does (33k vs 41-43k cycles)
SAMPLE_TASKS = 24  # tiles simulated of a larger core (per companion) at most: 12 left two items of an
# 8-item core, one a ragged 28-row block (-24% on a long causal launch; 24: 4 items)
SAMPLE_DEPTH = 6  # ... at most this many per item: shorter cuts stay in the pipeline's fill, whose marginal
# tile is cheaper than a steady-state one (3-tile cuts underestimated a long causal core by 15%)
CANDIDATES = 5  # distinct busiest cores simulated at most (the latest end is the estimate)
CANDIDATE_RANGE = 0.8  # ... among those whose proxy is at least this fraction of the largest
SIM_INSTRUCTIONS = 150_000  # instructions simulated in the final run (companions included): 0.7-1.0 s of
# CPU at the 150-200k trace rows per CPU second measured on the tuning grid's final runs (load 7, 2 CPUs);
# 240k took up to 1.5 s there, for max |error| 11.8% -> 9.7% and mean 1.35% -> 1.24% at 150k
SPLIT_EXACT_ITEMS = 200_000  # split advice: launches up to this many items are split exactly
PREPASS_UNITS = 160  # drop-mask adapter units per AIV simulated at most; beyond, extrapolated linearly (the
# extrapolation overestimates: +4% on a 1000 x 1000 byte-mode dropout case at 32 units, +0.8% simulated)
TOUCH_RANGES = 2_000_000  # copies of one tensor counted range by range at most (_touched_tnd; ~0.1 s of CPU)
VT_UNITS = 48  # the same for the fp32 V^T pre-pass (its units cost more to simulate)

#: Cost proxy: the marginal cycles of one tile in a core's pipelined task stream, fitted to single-core
#: timing-mode runs of the kernel on Ascend910B2 at a 1/20 bandwidth share (benchmarks/
#: estimate_accuracy_fa.py --proxy re-measures them next to the proxy; least-squares fit over rows 16-256,
#: columns 128-1024, D 64-256: rms error 6% fp16, 3% fp32): a smooth
#: maximum (power PROXY_POWER) of the cube side F = f0 + pitch * (a + b * Dp) (K/V loads, Mmad) and the
#: vector side V = v0 + v1 * rows/2 * (pitch * (1 + extras) + Dp) (vec1 per score, vec2 per output).
PROXY_POWER = 3.0
PROXY_FIT = {2: (599.0, 5.80, 0.134, 1916.0, 0.209), 4: (494.0, 18.09, 0.168, 1859.0, 0.272)}  # by input size
#: Extra vector work per score element, from the same marginal runs at 256 rows and 256 / 1024 columns
#: (mean of the two): a masked tile (Select with the mask windows), pse (load and add), dropout.
PROXY_EXTRA = {"mask": 0.45, "pse": 0.55, "dropout": 0.25}
PROXY_ITEM = 0.0  # per item: the pipeline hides it (8 one-tile items cost as 4 two-tile items, +-4%)
#: Vector-master AI Cores run their two vector cores' tasks in lockstep (kernel.ProcessCube: step t is
#: mm1/mm2 of both workers' task t), so a core's time is the sum of its steps, not of its tasks: a step
#: of tasks p0, p1 (proxies) costs max(p0 + p1, LOCKSTEP_LONE * max(p0, p1)); a lone task (its sibling's
#: list ended, or a short task beside it) costs LOCKSTEP_LONE of its proxy, not half a step. Measured on
#: one core of the tuning grid's 16/4-head bf16 launch (128 x 2000 items, single-core runs at the
#: launch's bandwidth share): 8 + 8 items 776k cycles, 4 + 4 425k, 8 + 0 616k, 4 + 0 337k: a lone step
#: 34.8k, a pair step 43.9k = 2 x 21.9k, so a lone task costs 1.58 tasks of a pair; 8 big items beside
#: 8 small ones 621k, as the big ones alone. In that launch's timing-mode run the same core (16 one-tile
#: items on one vector core beside long ones, then 8 lone steps) ends at 1,084k cycles against 845k for
#: a neighbour of 20 paired steps: 1.87 by the same rule. 1.8 is taken between the two (that launch's
#: estimate: -15.5% at 1.58, -11.8% at 1.8, -9.4% at 2.0, the last lowering the count of busy cores).
LOCKSTEP_LONE = 1.8
LOCKSTEP_TASKS = 4_000_000  # tasks of a launch counted step by step at most; beyond, the per-core task sum


@dataclass(frozen=True)
class FaVarLenEstimateTiling:
    """The tiling figures estimate mode decides (the item table is counted, never built)."""

    s1BaseSize: int
    s2BaseNratioSize: int
    vec1Elems: int
    sparseType: str
    blockDim: int
    totalSize: int
    tasks: int
    workspaceSize: int

    def asdict(self) -> dict:
        return asdict(self)


def _a64(x):
    return -(-x // 64) * 64


class Work:
    """Blocks, items and the core split of one call; per-block tile counts, classes and proxy costs."""

    def __init__(self, problem, spec, overrides):
        self.problem = problem
        self.sizes = base_sizes(problem, spec, overrides)
        s1b, w = self.sizes["s1BaseSize"], self.sizes["s2BaseNratioSize"]
        self.kind, blk = block_table(problem, s1b)
        self.blk = blk
        span = blk["end"] - blk["start"]
        self.tiles = -(-span // w)
        self.last_cols = np.where(self.tiles > 0, span - (self.tiles - 1) * w, 0)
        self.masked = _masked_tiles(problem, blk, s1b, w, self.tiles)
        self.proxy = _proxy(problem, blk["rows"], self.tiles, self.last_cols, w, self.masked)
        self.item_blk, self.item_n = item_blocks(problem, blk)
        self.template = self.sizes["template"]
        # the tiling's split over its workers; the estimate's units are AI Cores (a vector-master AI Core
        # runs the items of its two vector cores, a contiguous range: the split is contiguous)
        self.worker_starts, self.block_dim = core_split(blk["load"][self.item_blk], spec, overrides, self.template)
        self.starts = self.worker_starts if self.template == SAME_AB else self.worker_starts[::2]
        st = np.asarray(self.starts, np.int64)
        cum_t = np.concatenate(([0], np.cumsum(self.tiles[self.item_blk])))
        cum_p = np.concatenate(([0.0], np.cumsum(self.proxy[self.item_blk])))
        self.core_items = np.diff(st)
        self.core_tiles = cum_t[st[1:]] - cum_t[st[:-1]]
        self.core_proxy = cum_p[st[1:]] - cum_p[st[:-1]]
        self.total_tiles = int(cum_t[-1])
        gm_all, gm_pse = _gm_bytes(problem, blk, self.tiles, self.last_cols, w, self._mask_reads(w))
        self.gm_bytes, self.pse_bytes = float(gm_all[self.item_blk].sum()), float(gm_pse[self.item_blk].sum())
        if problem.dtype.itemsize == 4:  # the AIVs' V^T pre-pass: V in, V^T to the workspace (kernel.TransposeV)
            self.gm_bytes += 2.0 * problem.N2 * problem.T2 * problem.D * 4
        if self.template != SAME_AB and self.total_tiles <= LOCKSTEP_TASKS:
            self.core_proxy = self._lockstep_proxy(w)

    def _mask_reads(self, w: int) -> np.ndarray:
        """Mask window bytes each block reads (next side and pre side), for _gm_bytes."""
        s1b, p = self.sizes["s1BaseSize"], self.problem
        nxt, pre = _mask_sides(p, self.blk, s1b, w, self.tiles)
        return (_next_window_bytes(p, self.blk, s1b, w, self.tiles, self.last_cols, nxt)
                + _pre_window_bytes(p, self.blk, s1b, w, self.tiles, self.last_cols, pre))

    def _lockstep_proxy(self, w: int) -> np.ndarray:
        """Vector-master: each AI Core's proxy as the sum of its lockstep steps (LOCKSTEP_LONE), from
        the proxy of every task (tile) of the launch in item order, the tiling's split into workers."""
        blk = self.item_blk
        n = self.tiles[blk]
        full, last, mask_extra = _proxy_parts(self.problem, self.blk["rows"], self.last_cols, w, self.masked)
        task_item = np.repeat(np.arange(len(blk)), n)
        first = np.concatenate(([0], np.cumsum(n)[:-1]))
        pos = np.arange(task_item.size) - first[task_item]  # tile index inside its item
        k, left = blk[task_item], n[task_item] - pos  # left: tiles from this one to the item's end
        cost = np.where(left == 1, last[k], full[k]) + np.where(left <= self.masked[k], mask_extra[k], 0.0)
        cum_t = np.concatenate(([0], np.cumsum(n)))
        ws = np.asarray(self.worker_starts, np.int64)
        if len(ws) % 2 == 0:  # an odd worker count: the last AI Core's second vector core has no items
            ws = np.append(ws, ws[-1])
        t0, t1, t2 = cum_t[ws[0:-1:2]], cum_t[ws[1::2]], cum_t[ws[2::2]]  # each core's two task ranges
        out = np.zeros(len(t0))
        for c in range(len(t0)):
            out[c] = _lockstep_steps(cost[t0[c]:t1[c]], cost[t1[c]:t2[c]]).sum()
        return out

    def worker_range(self, u: int) -> tuple[int, int]:
        """Vector-master: the items of vector core *u* (first, end); none for the second vector core of the
        last AI Core when the worker count is odd."""
        ws = self.worker_starts
        return (ws[u], ws[u + 1]) if u + 1 < len(ws) else (ws[-1], ws[-1])

    def item(self, i: int) -> tuple:
        """(b, n, s1o, rows, s2Start, s2End, load) of item *i*."""
        k = int(self.item_blk[i])
        b = self.blk
        return (int(b["b"][k]), int(self.item_n[i]), int(b["s1o"][k]), int(b["rows"][k]), int(b["start"][k]),
                int(b["end"][k]), int(b["load"][k]))

    def classes(self) -> dict:
        """Tiles of the launch by class: full, edge, masked, skipped (each block counts N1 times)."""
        p, w = self.problem, self.sizes["s2BaseNratioSize"]
        edge = (self.tiles > 0) & (self.last_cols < w)
        edge_only = edge & (self.masked == 0)  # a masked last tile counts as masked
        skv = p.seq_kv.astype(np.int64)[self.blk["b"]]
        skipped = np.maximum(-(-skv // w) - self.tiles, 0)
        n = p.N1
        return dict(full=int(n * (self.tiles - self.masked - edge_only).sum()), edge=int(n * edge_only.sum()),
                    masked=int(n * self.masked.sum()), skipped=int(n * skipped.sum()))


def _gm_bytes(problem, blk, tiles, last_cols, w: int, mask_bytes) -> tuple[np.ndarray, np.ndarray]:
    """GM bytes one item of each block moves as the kernel issues its copies (reads and writes, L2 or HBM):
    Q in and attention_out out per item (ComputeMm1, ProcessVec2), softmax_max and softmax_sum out (8 fp32
    per row each); K and V per key column (ComputeMm1Chunk, ComputeMm2Chunk; fp32: V^T from the workspace,
    as many bytes); the fp32 scores to the workspace (Fixpipe of mm1: the tiles' columns) and back (vec1's
    copy in: their 64-aligned width), the probabilities in the input type out (vec1: the aligned width)
    and in again (mm2's load: the columns, once per 128 columns of D); per tile and row the fp32 mm2
    result to the workspace and back, and the running output's round trip through the workspace between
    tiles (vec2: written after every tile but the last, read before every tile but the first); the mask
    windows' bytes (*mask_bytes*, Work._mask_reads). These match the bytes the timing-mode launch books
    on the tuning grid's calls to 0.2% (masks with a prefix: a little over; byte-mode dropout's mask
    workspace is not counted). Returns (all bytes, of which the full pse's, read once per score element:
    its reads are each a page's first)."""
    isz, D = problem.dtype.itemsize, problem.D
    dp = -(-D // 16) * 16
    live = tiles > 0
    rows = blk["rows"].astype(np.float64)
    width = np.where(live, np.maximum(tiles - 1, 0) * _a64(w) + _a64(last_cols), 0).astype(np.float64)
    span = (blk["end"] - blk["start"]).astype(np.float64) * live
    pse = rows * span * isz * (problem.pse_form == "full")
    carried = np.maximum(tiles - 1, 0)  # tiles after which the running output goes to the workspace
    scores = rows * (width * (4 + isz) + span * (4 + isz * -(-D // 128)))
    total = (2 * rows * D * isz * live + 2 * rows * 8 * 4 * live + 2 * span * D * isz + scores
             + (tiles + carried) * rows * dp * 4 * 2 + mask_bytes + pse)
    return total, pse


def _lockstep_steps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Proxy of each lockstep step of two vector cores' task proxies *a*, *b* (LOCKSTEP_LONE)."""
    m = min(a.size, b.size)
    pair = np.maximum(a[:m] + b[:m], LOCKSTEP_LONE * np.maximum(a[:m], b[:m]))
    return np.concatenate((pair, LOCKSTEP_LONE * a[m:], LOCKSTEP_LONE * b[m:]))


def _masked_tiles(problem, blk, s1b: int, w: int, tiles):
    """Computed tiles holding a masked element (docs/fa_varlen.md step 4): all with a full mask; with
    the compressed or prefix mask those reaching past the next edge (j - i > next_lu, j >= prefix) or,
    with a pre side, before the pre edge (j - i < -pre_lu). Tile k covers [start + k*W, end_k)."""
    nxt, pre = _mask_sides(problem, blk, s1b, w, tiles)
    return np.minimum(nxt + pre, tiles)


def _mask_sides(problem, blk, s1b: int, w: int, tiles) -> tuple[np.ndarray, np.ndarray]:
    """Per block, the masked tiles of the next side (or all, a full mask), at the item's end, and of the pre
    side (sparse mode 4), at its start: a tile on both sides reads two mask windows (ApplyMask)."""
    if problem.mask_form == "none":
        return np.zeros_like(tiles), np.zeros_like(tiles)
    if problem.mask_form == "full":
        return tiles.copy(), np.zeros_like(tiles)
    b, start, end = blk["b"], blk["start"], blk["end"]
    x0 = blk["s1o"] * s1b
    x1 = x0 + blk["rows"] - 1
    nxt = np.asarray(problem.next_tokens_lu, np.int64)[b]
    pre = np.asarray(problem.pre_tokens_lu, np.int64)[b]
    prefix = np.asarray(problem.prefix_n, np.int64)[b] if problem.prefix_n is not None else np.zeros_like(b)
    # next side: tile k holds (i, j) with j - i > nxt and j >= prefix iff end_k - 1 >= max(prefix, x0 + nxt + 1)
    lim = np.maximum(prefix, x0 + nxt + 1)
    clean = np.where(end <= lim, tiles, np.clip((lim - start + 1) // w, 0, np.maximum(tiles - 1, 0)))
    pre_side = np.zeros_like(tiles)
    if problem.sparse_mode == 4:  # pre side: start + k*W < x1 - pre
        pre_side = np.clip(-(-(x1 - pre - start) // w), 0, tiles)
    return tiles - clean, pre_side


def _next_window_bytes(problem, blk, s1b: int, w: int, tiles, last_cols, nxt_side) -> np.ndarray:
    """Mask bytes the next side's windows read per block: masked tile k (columns c_k .. c_k + its pitch, W
    or the last tile's 64-aligned width) for the rows i with i + next < c_k + pitch, whose diagonal falls in
    or before it (ApplyMask's _causal_window; per UB slice, which rounds this up). A full mask, or a prefix,
    reads every row of every masked tile."""
    rows = blk["rows"].astype(np.float64)
    whole = np.where(nxt_side > 0, last_cols + np.maximum(nxt_side - 1, 0) * w, 0) * rows
    if problem.mask_form != "causal_2048":
        return whole
    x0 = (blk["s1o"] * s1b).astype(np.float64)
    u0 = blk["start"] - np.asarray(problem.next_tokens_lu, np.int64)[blk["b"]] - x0  # tile k: u0 + (k+1)W rows
    k1 = (tiles - nxt_side).astype(np.float64)  # the first masked tile
    kc = np.clip(np.ceil((rows - u0) / w) - 1, k1, np.maximum(tiles - 1, k1))  # from here on every row reads
    m = kc - k1
    partial = m * u0 + w * m * (k1 + 1 + kc) / 2.0  # rows read over tiles k1 .. kc - 1 (not the last)
    full_rows = np.maximum(tiles - 1 - kc, 0) * rows  # tiles kc .. the last but one
    last_rows = np.clip(u0 + (tiles - 1) * w + _a64(last_cols), 0, rows)  # the last tile: its 64-aligned pitch
    return np.where(nxt_side > 0, (partial + full_rows) * w + last_rows * last_cols, 0.0)


def _pre_window_bytes(problem, blk, s1b: int, w: int, tiles, last_cols, pre_side) -> np.ndarray:
    """Mask bytes the pre side's windows read per block (sparse mode 4): tile k (columns from c = start + k*W)
    reads its columns for the rows i >= c + pre (ApplyMask reads per UB slice, whose rows round this up)."""
    if problem.sparse_mode != 4:
        return np.zeros(len(tiles))
    x0 = (blk["s1o"] * s1b).astype(np.float64)
    x1 = x0 + blk["rows"] - 1
    c0 = blk["start"] + np.asarray(problem.pre_tokens_lu, np.int64)[blk["b"]]  # the row a tile 0 window starts at
    k0 = np.clip(np.floor((x0 - c0) / w) + 1, 0, pre_side)  # tiles whose every row reads
    m = pre_side - k0
    rows = blk["rows"].astype(np.float64)
    row_sum = k0 * rows + m * (x1 - c0 + 1) - w * m * (k0 + pre_side - 1) / 2.0  # rows read over the tiles
    last_rows = np.clip(x1 - np.maximum(x0, c0 + (tiles - 1) * w) + 1, 0, rows)
    short = np.where((pre_side >= tiles) & (tiles > 0), last_rows * (w - last_cols), 0.0)  # a narrower last tile
    return row_sum * w - short


def _tile_proxy(problem, rows, pitch, extra: float):
    """PROXY_FIT cycles of tiles of *rows* rows and row pitch *pitch* (arrays)."""
    f0, a, b, v0, v1 = PROXY_FIT[4 if problem.dtype.itemsize == 4 else 2]
    dp = -(-problem.D // 16) * 16
    cube = f0 + pitch * (a + b * dp)
    vec = v0 + v1 * -(-rows // 2) * (pitch * (1.0 + extra) + dp)
    return (cube ** PROXY_POWER + vec ** PROXY_POWER) ** (1.0 / PROXY_POWER)


def _proxy_parts(problem, rows, last_cols, w: int, masked) -> tuple:
    """Per block: the proxy of a full tile, of its last tile and the mask's extra on a masked tile."""
    rows = np.asarray(rows, np.float64)
    extra = PROXY_EXTRA["pse"] * (problem.pse_form != "none") + PROXY_EXTRA["dropout"] * problem.dropout
    full = _tile_proxy(problem, rows, _a64(w), extra)
    mask_extra = _tile_proxy(problem, rows, _a64(w), extra + PROXY_EXTRA["mask"]) - full
    last = _tile_proxy(problem, rows, _a64(np.asarray(last_cols)), extra)
    return full, last, mask_extra


def _proxy(problem, rows, tiles, last_cols, w: int, masked):
    """Proxy cycles per block: tiles - 1 full tiles, one last tile, the mask's extra on masked tiles."""
    full, last, mask_extra = _proxy_parts(problem, rows, last_cols, w, masked)
    last = np.where(tiles > 0, last, 0.0)
    return PROXY_ITEM + np.maximum(tiles - 1, 0) * full + last + masked * mask_extra


def _cut(item: tuple, keep: int, w: int) -> tuple:
    """The item with only its last *keep* tiles."""
    b, n, s1o, rows, start, end, load = item
    tiles = -(-(end - start) // w)
    return (b, n, s1o, rows, start + max(tiles - keep, 0) * w, end, load)


def _warm(problem, work: Work, kin, core_ws_total: int, spec, touched: dict) -> tuple:
    """l2_warm for the samples: the launch's steady state, as {GM buffer: resident fraction}. The
    compressed mask, alibi pse and the workspace are re-read all launch long: resident. Each K/V row is
    read R times in the launch (R = N1 * the items' key spans / (N2 * the key tokens): several s1 blocks
    or GQA heads per row) and only its first read misses L2, so a fraction 1 - 1/R of K/V pages starts
    resident (an all-or-nothing rule was 3% slow on a short 20-core launch, whose K/V first reads are a
    large part of its traffic: the HBM and L2 calendars are separate bandwidths). Touched bytes: the
    steady_l2_touched of the launch's working set. When the pages the launch touches fit L2 (Q, K, V and
    attention_out counted by the pages the kernel's copies touch: _touched_tnd), that count: the hit scale is
    then 1 all launch long, exactly (the tensors' full sizes crossed the 910B4's L2 size on such launches, and
    the samples sent part of their traffic to the idle HBM and ran fast). Beyond L2 the full sizes stay (what
    the estimate was measured with there); a launch whose misses queue on a slow HBM is held up by
    _bandwidth_floor instead (docs/estimate.md)."""
    skv = problem.seq_kv.astype(np.int64)[problem.seq_q > 0]
    span = (work.blk["end"] - work.blk["start"]).sum()
    reads = problem.N1 * span / (problem.N2 * max(int(skv.sum()), 1))
    names = resident(("atten_mask", "workspace") + (("real_shift",) if problem.pse_form == "alibi" else ()),
                     first_reads_missed(reads))
    sizes = {g.name: g.array.nbytes for g in (*kin.gm, kin.smax, kin.ssum, kin.out) if g is not None}
    pages = core_ws_total + sum(touched.get(name, nbytes) for name, nbytes in sizes.items())
    return start_touched(pages, core_ws_total + sum(sizes.values()), spec.l2_bytes), names


def _touched_tnd(problem, work: Work) -> dict:
    """L2 bytes the launch's copies of the TND tensors touch in the model (ops.common.l2_warm.head_rows_pages), by
    GM buffer name, where they differ from the tensor sizes. Copies as the kernel
    issues them (kernel.ComputeMm1 / ComputeMm1Chunk / ComputeMm2Chunk / ProcessVec2): Q per item, K per nChunk
    rows of a tile, V per kChunk rows (fp16/bf16; fp32 reads V^T from the workspace), attention_out per vec2
    slice. Tensors with more than TOUCH_RANGES copies keep their full size (the working set is then far over L2
    either way)."""
    p, blk, sizes = work.problem, work.blk, work.sizes
    isz, D, w = p.dtype.itemsize, p.D, sizes["s2BaseNratioSize"]
    live = np.flatnonzero(work.tiles > 0)
    cu_q = np.concatenate(([0], np.cumsum(p.seq_q.astype(np.int64))))
    cu_kv = np.concatenate(([0], np.cumsum(p.seq_kv.astype(np.int64))))

    out = {}
    b, rows = blk["b"][live], blk["rows"][live].astype(np.int64)
    q0 = cu_q[b] + blk["s1o"][live].astype(np.int64) * sizes["s1BaseSize"]
    if q0.size <= TOUCH_RANGES:
        out["query"] = head_rows_pages(q0, p.N1, D, rows * D, isz)
    # attention_out: per vec2 slice of min(vec1Elems // Dp, rows) rows of each AIV's rows
    dp = -(-D // 16) * 16
    halves = [(np.zeros_like(rows), rows)] if work.template != SAME_AB else [
        (np.zeros_like(rows), -(-rows // 2)), (-(-rows // 2), rows // 2)]
    starts, lens = [], []
    for lo, mine in halves:
        step = np.maximum(np.minimum(sizes["vec1Elems"] // dp, mine), 1)
        n = -(-mine // step)
        if n.sum() > TOUCH_RANGES:
            break
        r = np.repeat(step, n) * ragged_arange(n)
        starts.append(np.repeat(q0 + lo, n) + r)
        lens.append(np.minimum(np.repeat(step, n), np.repeat(mine, n) - r))
    else:
        out["attention_out"] = head_rows_pages(np.concatenate(starts), p.N1, D, np.concatenate(lens) * D, isz)
    # K and V: per distinct column range of a batch, its tiles cut in chunks
    kv = np.unique(np.stack([blk["b"][live], blk["start"][live], blk["end"][live]], 1), axis=0)
    for name, chunk in (("key", sizes["nChunk"]), ("value", sizes["kChunk"])):
        if name == "value" and isz == 4:
            continue
        tiles = -(-(kv[:, 2] - kv[:, 1]) // w)
        if int(tiles.sum()) * -(-w // chunk) > TOUCH_RANGES:
            continue
        col0 = np.repeat(kv[:, 1], tiles) + ragged_arange(tiles) * w
        cols = np.minimum(np.repeat(kv[:, 2], tiles) - col0, w)
        per = -(-cols // chunk)
        nc = ragged_arange(per) * chunk
        r0 = np.repeat(cu_kv[np.repeat(kv[:, 0], tiles)] + col0, per) + nc
        ln = np.minimum(np.repeat(cols, per) - nc, chunk)
        last = 0 if name == "key" else (D - 1) // 128 * 128  # V: per 128 columns of D, the last block's start
        out[name] = head_rows_pages(r0, p.N2, D, last + ln * (D - last), isz)
    return out


def _bandwidth_floor(work: Work, kin, spec, touched: dict, steady_touched: int) -> float:
    """Cycles the launch's GM traffic (Work.gm_bytes) needs at least on the chip's HBM and L2 bandwidths
    (npusim/launch.py book_gm: a transfer's hit fraction goes to the L2 calendar, the rest to HBM's). A page's
    first read misses (the full pse, read once; the pages of Q, K and V); every other byte hits at the
    launch's hit scale averaged over its work (l2 / the samples' steady touched bytes beyond L2: _warm), and
    the bytes are linear in that scale, so the average gives the launch's HBM bytes. The samples run a few
    cores at their share of the bandwidth and miss the queue of a launch whose every core waits on a slow
    HBM all along (a 910B4 call of the tuning set with a 455 MB pse: HBM busy 94% of the launch in timing
    mode, the sample's estimate 23% short, with the floor 11% short: the queue itself is not modelled;
    the sample re-run at hit scales over the launch's range and averaged by work was still 16% short).
    With every booked byte counted (session 15: the running output's round trip was missing, 8% of the
    bytes) that call's floor is 6.8% short: its HBM is busy all along but for the first and last tenth of
    the launch (78% and 61% busy there), and its HBM bytes come out 3% under the launch's (2.04 GB).
    estimate_fa takes the larger of the two, the floor plus the pipeline fill (the sample's fixed cycles)."""
    scale = min(1.0, spec.l2_bytes / steady_touched) if steady_touched > 0 else 1.0
    first = work.pse_bytes + sum(touched.get(g.name, g.array.nbytes) for g in kin.gm[:3])
    first = min(first, work.gm_bytes)
    rest = work.gm_bytes - first
    hbm = (first + rest * (1.0 - scale)) / (spec.hbm_bw_bytes_per_s / spec.clock_hz)
    l2 = rest * scale / (spec.l2_bw_bytes_per_s / spec.clock_hz)
    return max(hbm, l2)


def _prepass_share(problem, til, comp: int, block_dim: int) -> tuple[int, int, int, int]:
    """(t2Size, dropBits) that give each of *comp* sample cores one core's share of the launch's AIV
    pre-passes, capped at PREPASS_UNITS units per AIV, and the units per AIV left out (V^T, drop mask)."""
    aivs, t2, bits, v_left, d_left = 2 * block_dim, problem.T2, problem.drop_mask_bits, 0, 0
    if problem.dtype.itemsize == 4:  # V^T: N2 * ceil(T2 / R) units of R rows (kernel.TransposeV)
        d8 = -(-problem.D // 8) * 8
        r = max(8, min(64, 8192 // d8) // 8 * 8)
        per = -(-problem.N2 * -(-problem.T2 // r) // aivs)
        keep = min(per, VT_UNITS)
        t2, v_left = min(problem.T2, -(-keep * 2 * comp // problem.N2) * r), per - keep
    if problem.dropout and not til.dropMaskBitMode:  # adapter units of ADAPTER_UNIT_BITS bits
        per = -(-(-(-problem.drop_mask_bits // ADAPTER_UNIT_BITS)) // aivs)
        keep = min(per, PREPASS_UNITS)
        bits, d_left = min(problem.drop_mask_bits, keep * 2 * comp * ADAPTER_UNIT_BITS), per - keep
    return t2, bits, v_left, d_left


def estimate_fa(problem, spec, overrides, tensors: tuple, softmax_layout: str):
    """Estimate one validated call; *tensors* are the call's (query, key, value, real_shift, drop_mask,
    atten_mask), of which only shapes and dtypes are read. Returns (Estimate, FaVarLenEstimateTiling, Work)."""
    work = Work(problem, spec, overrides)
    sizes, w, bd = work.sizes, work.sizes["s2BaseNratioSize"], work.block_dim
    full_til = assemble(problem, sizes, work.kind, np.zeros((0, 7), np.int64), (0,) * len(work.worker_starts), bd)
    light = FaVarLenEstimateTiling(sizes["s1BaseSize"], w, sizes["vec1Elems"], work.kind, bd, len(work.item_blk),
                                   work.total_tiles, full_til.workspaceSize)
    kin = kernel_inputs(problem, "timing", tensors, softmax_layout)
    proxy = work.core_proxy
    touched = _touched_tnd(problem, work)
    warm = _warm(problem, work, kin, full_til.workspaceSize - SYSTEM_WORKSPACE_BYTES, spec, touched)
    runner = _Runner(problem, spec, work, kin, full_til, warm)

    # every core also pays the pipeline fill and drain (about a tile) and the AIV pre-passes: added to
    # the proxy for ranking and for the load-weighted count of busy cores
    const = float(_tile_proxy(problem, np.array([float(sizes["s1BaseSize"])]), np.array([_a64(w)]), 0.0)[0])
    active = _active(proxy + const)
    if problem.dtype.itemsize == 4 or (problem.dropout and not full_til.dropMaskBitMode):
        const += max(runner.end(runner.run([[]], active)) - spec.launch_overhead_cycles, 0.0)
        active = _active(proxy + const)
    rank = proxy + const
    top = int(np.argmax(rank))
    # the simulation's cost: the kernel's instructions per item and per task on this problem (wall time
    # follows the instruction count, benchmarks/sim_speed.py)
    cost = runner.instruction_cost(top)
    if (work.core_tiles[top] <= SAMPLE_TASKS or
            WHOLE_COMPANIONS * cost(work.core_items[top], work.core_tiles[top]) <= SIM_INSTRUCTIONS):
        cycles, top, group = _whole_group(runner, work, rank, active, cost)
        fixed, is_whole = 0.0, True
    else:
        cycles, fixed, group, is_whole = _sampled_core(runner, work, top, active, cost)
    cycles += runner.prepass_rest(len(group), active)
    floor = _bandwidth_floor(work, kin, spec, touched, warm[0])
    cycles = max(cycles, floor + max(fixed, spec.launch_overhead_cycles))
    est = Estimate(int(round(cycles)), cycles / spec.clock_hz * 1e6, proxy, fixed,
                   {k: (v, None) for k, v in work.classes().items()})
    est.sampled_core, est.sampled_whole, est.active_cores = top, is_whole, active
    est.companions = group  # the launch cores simulated in the final run, in run order (-1: a copy)
    return est, light, work


class _Runner:
    """Timing-mode runs of chosen items on a few AI Cores, each at its share of the launch's bandwidth."""

    def __init__(self, problem, spec, work: Work, kin, full_til, warm):
        self.problem, self.spec, self.work, self.kin, self.full_til, self.warm = (problem, spec, work, kin,
                                                                                  full_til, warm)

    def run(self, lists: list, share: float, t2_size=None, drop_bits=None):
        """Core c runs the items lists[c] (tuples of Work.item) with the chip's HBM and L2 bandwidth
        divided by *share* (launch cores per simulated core); each core also runs one core's share of
        the launch's AIV pre-passes. Samples never time out: the verdict is on the estimate.
        Vector-master: lists[c] is the pair of its two vector cores' lists (_items), or one list split
        between them as the tiling splits (BalanceLoad on the items' loads)."""
        p, work, comp = self.problem, self.work, len(lists)
        t2, bits, _, _ = _prepass_share(p, self.full_til, comp, work.block_dim)
        if work.template != SAME_AB:
            lists = [part for lst in lists for part in (lst if isinstance(lst, tuple) else _halves(lst))]
        arr = np.array([it for lst in lists for it in lst], np.int64).reshape(-1, 7)
        starts = tuple(np.concatenate(([0], np.cumsum([len(x) for x in lists]))).astype(int).tolist())
        til = assemble(p, work.sizes, work.kind, arr, starts, comp)
        til = dataclasses.replace(til, t2Size=t2 if t2_size is None else t2_size)
        kin = dataclasses.replace(self.kin, args=dataclasses.replace(
            self.kin.args, dropBits=bits if drop_bits is None else drop_bits))
        chip = contention_chip(self.spec, share).replace(aicore_timeout_s=1e12)
        return launch_kernel(kin, til, chip, "timing", self.warm)

    def instruction_cost(self, core: int):
        """cost(items, tasks) -> the kernel's trace rows (instructions) for that many items and tasks on
        this problem, from runs of the first one and two tiles of the core's longest item (full width
        where it has them) and an item-less run (set-up and pre-passes)."""
        work, w = self.work, self.work.sizes["s2BaseNratioSize"]
        s, e = work.starts[core], work.starts[core + 1]
        b, n, s1o, rows, start, end, load = work.item(s + int(np.argmax(work.tiles[work.item_blk[s:e]])))
        heads = [[[(b, n, s1o, rows, start, min(end, start + k * w), load)]] for k in (1, 2) if k == 1 or
                 end - start > w]
        n_rows = [len(self.run(x, 1.0).trace.columns["core"]) for x in [[[]]] + heads]
        per_task = max(n_rows[-1] - n_rows[-2], 1) if len(heads) == 2 else max(n_rows[1] - n_rows[0], 1)
        per_item = max(n_rows[1] - n_rows[0] - per_task, 0) if len(heads) == 2 else 0

        def cost(items, tasks) -> float:
            return float(np.sum(items)) * per_item + float(np.sum(tasks)) * per_task

        return cost

    def end(self, res, core: int = 0) -> float:
        """The last cycle of simulated core *core*, launch overhead included."""
        cols = res.trace.columns
        return float(cols["end"][cols["core"] == core].max(initial=0)) + self.spec.launch_overhead_cycles

    def prepass_rest(self, comp: int, active: float) -> float:
        """Cycles of the pre-pass units per AIV beyond those simulated (VT_UNITS, PREPASS_UNITS)."""
        t2, bits, v_left, d_left = _prepass_share(self.problem, self.full_til, comp, self.work.block_dim)
        if not (v_left or d_left):
            return 0.0

        def simulate(items, t2_size, drop_bits):
            return self.end(self.run([[]] * comp, active / comp, t2_size, drop_bits))

        return _prepass_rest(simulate, t2, bits, v_left, d_left, self.problem, comp)


def _halves(items: list) -> tuple[list, list]:
    """A vector-master AI Core's items for its two vector cores: the tiling's two-way split of their
    loads (tiling.split_cores)."""
    if not items:
        return [], []
    cut = split_cores([it[6] for it in items], 2)[1]
    return items[:cut], items[cut:]


def _items(work: Work, core: int):
    """AI Core *core*'s items; vector-master: a pair, the items of its two vector cores as the tiling
    split them."""
    if work.template == SAME_AB:
        return [work.item(i) for i in range(work.starts[core], work.starts[core + 1])]
    return tuple([work.item(i) for i in range(*work.worker_range(u))] for u in (2 * core, 2 * core + 1))


def _whole_group(runner: _Runner, work: Work, rank: np.ndarray, active: float, cost) -> tuple:
    """Small cores: a subset of the launch simulated whole, each core running its own items. The subset
    holds the candidate slowest cores (one per work pattern, _candidates; the proxy ranks cores only
    roughly) and companions spread over the other busy cores' loads (the launch's mix of in-phase and
    out-of-phase neighbours), as many as the instruction budget allows, all in launch (block index)
    order: the bandwidth calendar serves the cores of a time step in that order, so a core's place among
    its neighbours is part of its time (first vs last of 4 cores: 1.5% on the benchmark grid). The
    chip's bandwidth is cut to the subset's share of the launch: active / its own load-weighted count
    of busy cores (_active of the subset's ranks). The launch ends with its last core: the
    estimate is the latest end in the subset. Returns (cycles, that core, the subset in run order)."""
    cands = _candidates(work, rank)
    for comp in COMPANIONS:
        group = _companions(rank, cands, comp)
        if cost(work.core_items[group], work.core_tiles[group]) <= SIM_INSTRUCTIONS:
            break
    weight = _active(rank[group])
    group = sorted(group)
    res = runner.run([_items(work, c) for c in group], active / weight)
    ends = [runner.end(res, k) for k in range(len(group))]
    last = int(np.argmax(ends))
    return ends[last], group[last], group


def _companions(rank: np.ndarray, cands: list, comp: int) -> list:
    """The first *comp* candidates, or all of them and other cores whose rank is at least
    COMPANION_RANGE of the largest, evenly spread over them in decreasing rank, up to *comp* cores."""
    if len(cands) >= comp:
        return list(cands[:comp])
    order = np.argsort(-rank, kind="stable")
    busy = [int(c) for c in order if int(c) not in cands and rank[c] >= COMPANION_RANGE * rank[cands[0]]]
    if not busy:
        return list(cands)
    picks = np.unique(np.linspace(0, len(busy) - 1, min(comp - len(cands), len(busy))).round().astype(np.int64))
    return list(cands) + [busy[k] for k in picks]


def _sampled_core(runner: _Runner, work: Work, core: int, active: float, cost) -> tuple:
    """A larger core, sampled: SAMPLE_TASKS tiles of it (vector-master: twice, shared by its two vector
    cores, each from its own items: _worker_sample), as items spread over its range cut to their last
    tiles (at most SAMPLE_DEPTH: the K/V stream reaches its steady state), simulated once next to
    companion copies (rotated by items: out of phase), the unrotated one at the core's relative place in
    the launch's block order (see _whole_group). Its task-done cycles give each task's time after the
    pipeline fill; a least-squares fit of those times to the tasks' proxies and item starts
    (``time = a * first + b * proxy``) extrapolates the sample to the whole core. Returns (cycles, fixed
    cycles, cores in run order (-1: a copy), False)."""
    s, e = work.starts[core], work.starts[core + 1]
    depth = int(min(SAMPLE_DEPTH, work.tiles[work.item_blk[s:e]].max()))
    pair = work.template != SAME_AB
    count = min(max(2, SAMPLE_TASKS // depth) * (1 + pair), e - s)  # vector-master: for both vector cores
    w = work.sizes["s2BaseNratioSize"]
    if pair:  # vector-master: each vector core samples its own items (_worker_sample), as many as the
        # fewest companions fit in the budget with the picked items' own tile counts
        while True:
            (items0, tp0, f0), (items1, tp1, f1) = _worker_sample(work, core, count, depth)
            if count <= 2 or COMPANIONS[-1] * cost(len(items0) + len(items1), tp0.size + tp1.size) <= SIM_INSTRUCTIONS:
                break
            count -= 1
        task_proxy, first = _lockstep_steps(tp0, tp1), _step_sum(f0, f1)
        items, n, tasks = (items0, items1), len(items0) + len(items1), tp0.size + tp1.size
    else:
        while count > 2 and COMPANIONS[-1] * cost(count, count * depth) > SIM_INSTRUCTIONS:
            count -= 1  # the fewest companions must fit the budget
        picks = _spread_picks(work.proxy[work.item_blk[s:e]], count) + s
        items = [_cut(work.item(int(i)), depth, w=w) for i in picks]
        task_proxy, first = _task_proxies(work, picks, depth)
        n, tasks = len(items), task_proxy.size
    per_copy = cost(n, tasks)
    comp = next((c for c in COMPANIONS if c * per_copy <= SIM_INSTRUCTIONS), COMPANIONS[-1])
    comp = min(comp, work.block_dim)
    pos = int(round(core / max(work.block_dim - 1, 1) * (comp - 1)))

    def rotated(lst: list, j: int) -> list:
        r = (j - pos) % comp * len(lst) // comp
        return lst[r:] + lst[:r]

    def copy(j: int):  # companion copies rotated by items (out of phase); copy *pos* unrotated
        return (rotated(items[0], j), rotated(items[1], j)) if pair else rotated(items, j)

    res = runner.run([copy(j) for j in range(comp)], active / comp)
    end = runner.end(res, pos)
    done = task_done_cycles(res.trace, len(task_proxy), pos)
    # per-step times after the first two steps (pipeline fill), against (items started, proxy)
    dt, f, p = np.diff(done)[1:], first[2:], task_proxy[2:]
    a, b = 0.0, (float(dt.sum() / p.sum()) if p.size and p.sum() > 0 else (end / task_proxy.sum()))
    if f.size > 2 and f.min() != f.max():
        (fa, fb), *_ = np.linalg.lstsq(np.stack([f, p], 1), dt, rcond=None)
        if fa >= 0 and fb > 0:
            a, b = float(fa), float(fb)
    fixed = end - b * float(task_proxy.sum()) - a * float(first.sum())
    cycles = end + b * (float(work.core_proxy[core]) - float(task_proxy.sum())) + a * (e - s - float(first.sum()))
    return cycles, fixed, [core if j == pos else -1 for j in range(comp)], False


def _worker_sample(work: Work, core: int, count: int, depth: int) -> tuple:
    """A vector-master AI Core's sample, per vector core: *count* items in all, shared between its two vector
    cores in proportion to their items (at least one each that has items), each picked from that vector core's
    own items (_spread_picks) and cut to *depth* tiles. Run in lockstep, the sample then holds the core's mix of
    pair and lone steps (a core whose vector cores hold 52 and 28 tasks ends with 24 lone steps); sampling the
    core's items for both vector cores alike gave only pair steps, whose rate LOCKSTEP_LONE then had to carry
    alone. Returns, per vector core, (items, task proxies, task starts an item)."""
    bounds = [work.worker_range(u) for u in (2 * core, 2 * core + 1)]
    total = max(sum(b - a for a, b in bounds), 1)
    share = [min(b - a, max(1, int(round(count * (b - a) / total)))) if b > a else 0 for a, b in bounds]
    out = []
    for (a, b), k in zip(bounds, share):
        if k == 0:
            out.append(([], np.zeros(0), np.zeros(0)))
            continue
        picks = _spread_picks(work.proxy[work.item_blk[a:b]], k) + a
        items = [_cut(work.item(int(i)), depth, w=work.sizes["s2BaseNratioSize"]) for i in picks]
        out.append((items, *_task_proxies(work, picks, depth)))
    return out


def _step_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per lockstep step, the sum of the two vector cores' per-task values (a lone step: its task's)."""
    m = min(a.size, b.size)
    return np.concatenate((a[:m] + b[:m], a[m:], b[m:]))


def _spread_picks(item_proxy: np.ndarray, count: int) -> np.ndarray:
    """Indices of *count* items spread over a core's proxy mass: the items holding the (k + 1/2) / count
    quantiles of the cumulative proxy (a ragged last block, light in proxy, is picked only as often as its
    share: picking the range's ends made it half of a two-item sample, and its proxy is the least exact)."""
    cum = np.cumsum(item_proxy)
    if cum.size == 0 or cum[-1] <= 0:
        return np.unique(np.linspace(0, item_proxy.size - 1, count).round().astype(np.int64))
    q = (np.arange(count) + 0.5) / count * cum[-1]
    return np.unique(np.minimum(np.searchsorted(cum, q, side="right"), item_proxy.size - 1)).astype(np.int64)


def _task_proxies(work: Work, picks: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Proxy cycles of each task of the picked items cut to their last *depth* tiles, in run order, and
    whether the task starts its item. Task j of a k-tile cut item is the tile that cutting to k - j tiles
    adds: its proxy is the difference of the two cuts' proxies (masked tiles sit at an item's end)."""
    blk = work.item_blk[picks]
    kept = np.minimum(work.tiles[blk], depth)
    cost, first = [], []
    for k_blk, k in zip(blk, kept):
        cuts = np.arange(int(k), -1, -1)  # k, k - 1, ..., 0 tiles kept
        tiles = np.minimum(work.tiles[k_blk], cuts)
        masked = np.minimum(work.masked[k_blk], tiles)
        rows = np.full(cuts.size, work.blk["rows"][k_blk], np.float64)
        last = np.full(cuts.size, work.last_cols[k_blk])
        p = _proxy(work.problem, rows, tiles, last, work.sizes["s2BaseNratioSize"], masked)
        cost.extend((p[:-1] - p[1:]).tolist())
        first.extend([1.0] + [0.0] * (int(k) - 1))
    return np.array(cost), np.array(first)


def task_done_cycles(trace, n_tasks: int, core: int = 0) -> np.ndarray:
    """Cycles at which the AIC of block *core* signalled each task's second matmul done to its AIV0
    (SYNC_C2_V2); vector-master: each step's (the AIC's flags cover both vector cores' tasks of a step).

    AIV0 waits on the AIC's flags in the order of kernel.ProcessVector: C1(0), then C1(t), C2(t - 1) for
    t = 1 .. n - 1, then C2(n - 1); the AIC sets them in that order (ProcessCube), so the set cycles,
    sorted, hold C2(t) at position 2t + 2 (t < n - 1) and 2n - 1."""
    f = trace.flows
    sel = (f["dst_core"] == core) & (f["dst_sub"] == int(SubCore.AIV0)) & (f["src_sub"] == int(SubCore.AIC))
    sets = np.sort(np.asarray(f["set_cycle"])[sel]).astype(np.float64)
    if sets.size != 2 * n_tasks:
        raise RuntimeError(f"estimate: expected {2 * n_tasks} AIC->AIV0 flags for {n_tasks} tasks, "
                           f"found {sets.size}")
    return sets[[2 * t + 2 for t in range(n_tasks - 1)] + [2 * n_tasks - 1]]


def _active(core_cost: np.ndarray) -> float:
    """Load-weighted busy cores: sum / max of the per-core costs (cores that finish early stop sharing
    the bandwidth)."""
    top = float(core_cost.max(initial=0.0))
    return float(core_cost.sum()) / top if top > 0 else 1.0


def _signature(work: Work, core: int) -> tuple:
    """A core's work pattern: its items' rows, tile counts, last widths and masked tiles (first 64)."""
    blk = work.item_blk[work.starts[core]:work.starts[core + 1]][:64]
    return tuple(np.stack([work.blk["rows"][blk], work.tiles[blk], work.last_cols[blk], work.masked[blk]]).ravel()
                 .tolist())


def _candidates(work: Work, rank: np.ndarray) -> list:
    """The candidate slowest cores: one per distinct work pattern (its items' rows, tile counts, last
    widths and masked tiles), by decreasing *rank* (proxy plus the per-core constant), those within
    CANDIDATE_RANGE of the largest, at most CANDIDATES."""
    order, seen, picked = np.argsort(-rank, kind="stable"), set(), []
    for c in order:
        c = int(c)
        if rank[c] < CANDIDATE_RANGE * rank[order[0]] or len(picked) == CANDIDATES:
            break
        sig = _signature(work, c)
        if sig not in seen:
            seen.add(sig)
            picked.append(c)
    return picked


def _prepass_rest(simulate, t2: int, bits: int, v_left: int, d_left: int, problem, comp: int) -> float:
    """Cycles of the pre-pass units per AIV beyond VT_UNITS / PREPASS_UNITS: slopes of item-less runs at
    half the simulated units (V^T and drop-mask adapter separately)."""
    extra = 0.0
    if v_left > 0:
        half = VT_UNITS // 2
        d8 = -(-problem.D // 8) * 8
        r = max(8, min(64, 8192 // d8) // 8 * 8)
        t_half = min(problem.T2, -(-half * 2 * comp // problem.N2) * r)
        extra += v_left * (simulate([], t2_size=t2, drop_bits=0) - simulate([], t2_size=t_half, drop_bits=0)) / half
    if d_left > 0:
        half = PREPASS_UNITS // 2
        b_half = half * 2 * comp * ADAPTER_UNIT_BITS
        extra += d_left * (simulate([], t2_size=t2, drop_bits=bits) - simulate([], t2_size=t2, drop_bits=b_half)) / half
    return extra


def _launch_bound(work: Work, keep: np.ndarray, heads: int, spec) -> float:
    """Busiest-core proxy of a launch over the blocks *keep* for *heads* query heads: the CANN split of
    its items (tiling.core_split) up to SPLIT_EXACT_ITEMS items; beyond, the larger of an even share and
    the heaviest item (granularity no longer matters)."""
    p = work.proxy[keep]
    if p.size == 0:
        return 0.0
    if heads * p.size > SPLIT_EXACT_ITEMS:
        return max(heads * float(p.sum()) / spec.aic_count, float(p.max()))
    sub = {k: v[keep] for k, v in work.blk.items()}
    idx, _ = item_blocks(SimpleNamespace(B=work.problem.B, N1=heads), sub)
    starts, _ = core_split(sub["load"][idx], spec, None, work.template)
    if work.template != SAME_AB:
        starts = starts[::2]  # per AI Core
    cum = np.concatenate(([0.0], np.cumsum(p[idx])))
    return float(np.max(cum[list(starts[1:])] - cum[list(starts[:-1])]))


def split_advice(work: Work, spec, seconds: float, limit_s: float):
    """Timeout verdict, and the largest split of the query tokens T1 (in s1 blocks of every sequence;
    each launch takes the same blocks of every sequence, with its full key/value) whose heaviest launch
    (the last blocks: the widest s2 ranges under causal masks) stays under ADVICE_MARGIN of the limit
    (npusim.estimate.timeout_verdict); if one block per sequence is still too long, the split of the
    query heads (in groups of N1 / N2) for one-block launches. A chunk's time is the estimate scaled by
    its launch bound, so the search costs no simulation."""
    p, blk = work.problem, work.blk
    nb = -(-p.seq_q.astype(np.int64) // work.sizes["s1BaseSize"])
    from_end = nb[blk["b"]] - blk["s1o"]  # 1 for the last block of a sequence
    full = _launch_bound(work, np.ones(len(from_end), bool), p.N1, spec)
    fixed = min(spec.launch_overhead_cycles / spec.clock_hz, seconds)  # not scaled with the work

    def cost(keep, heads) -> float:
        return fixed + (seconds - fixed) * _launch_bound(work, keep, heads, spec) / full if full > 0 else seconds

    def cost_tokens(k: int) -> float:
        return cost(from_end <= k, p.N1)

    axis = f"T1 (query tokens, in blocks of {work.sizes['s1BaseSize']} rows per sequence)"
    verdict = timeout_verdict(seconds, limit_s, axis, int(nb.max(initial=1)), cost_tokens)
    if not verdict.advice.startswith("even"):
        return verdict

    def cost_heads(g: int) -> float:
        return cost(from_end <= 1, g * p.G)

    heads = timeout_verdict(seconds, limit_s, f"heads (groups of {p.G} query heads; one block per sequence "
                                              "and launch)", p.N2, cost_heads)
    return dataclasses.replace(heads, advice=f"{verdict.advice}; {heads.advice}")
