"""Estimate mode of FlashAttentionVarLenScore: count the work from the tiling, simulate the busiest core.

1. Work, counted vectorised without enumerating tiles: the s1 blocks of every batch with their s2
   ranges and quantised loads (tiling.block_table), the work items (b, n, s1 block) b-major as block
   indices (tiling.item_blocks), the tile classes of the launch (full, edge = a partial last tile,
   masked = holds a masked element, skipped = a W-wide column block outside the item's range) and a
   cost proxy per item (PROXY below: per-tile cycles from the tile's rows, width and head dim).
2. The CANN core split of the items (tiling.core_split: greedy + BalanceLoad on the quantised loads,
   evaluated on prefix sums) and the candidate busiest cores: one per distinct work pattern, by
   decreasing proxy, within a simulation budget (the proxy ranks cores only roughly).
3. Each candidate's items run on the real kernel in timing mode on one core at its bandwidth share
   (ranking); the slowest runs again next to companion copies of itself (rotated, so out of phase as
   the launch's other cores are; 2-6, as the budget allows), with the chip's HBM/L2 bandwidth cut to
   their share of the launch (``active / companions``, active = load-weighted busy cores, from the
   ranking runs' times where a core's pattern was simulated, else from the proxy). A core with more
   than WHOLE_TILES tiles is sampled (no ranking runs): SAMPLE_ITEMS of its
   items, spread over its range, cut to their last tiles, at three sizes that keep the same first and
   last tile (pipeline fill and drain); its time is ``fixed + a * items + b * proxy`` fitted to them.
   Samples start with the L2 in the launch's steady state (l2_warm). The AIV pre-passes (fp32 V^T,
   byte-mode drop mask) run in every sample at one core's share of the launch.
Measured accuracy: benchmarks/estimate_accuracy_fa.py.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from types import SimpleNamespace

import numpy as np

from npusim.estimate import Estimate, contention_chip, timeout_verdict
from ops.common.dropout import ADAPTER_UNIT_BITS
from ops.flash_attention_var_len_score.tiling import (SYSTEM_WORKSPACE_BYTES, assemble, base_sizes, block_table,
                                                      core_split, item_blocks)

COMPANIONS = (6, 4, 3, 2)  # AI Cores simulated side by side for the slowest candidate (the most the budget
# allows; candidates are ranked on one core each); bandwidth is
# scaled to their share of the launch. More companions pool the bandwidth as the launch's many cores do:
# two identical companions overestimate bandwidth-bound launches by 2-4% (benchmark grid)
WHOLE_TILES = 12  # a core with at most this many tiles (full-tile equivalents) is simulated whole
SAMPLE_ITEMS = 2  # items in a sample of a larger core, spread over its range
SAMPLE_TILES = 2  # tiles kept per sampled item (its last ones: the masked / partial side)
CANDIDATES = 5  # distinct busiest cores simulated at most (the slowest is the estimate)
CANDIDATE_RANGE = 0.8  # ... among those whose proxy is at least this fraction of the largest
SIM_BUDGET = 34  # full-tile equivalents simulated in all (companions included): < 1 s wall
STAGE1_BUDGET = 16  # ... of which for ranking the candidates (one core each)
SPLIT_EXACT_ITEMS = 200_000  # split advice: launches up to this many items are split exactly
PREPASS_UNITS = 160  # drop-mask adapter units per AIV simulated at most; beyond, extrapolated linearly (the
# extrapolation overestimates: +4% on a 1000 x 1000 byte-mode dropout case at 32 units, +0.8% simulated)
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
        self.starts, self.block_dim = core_split(blk["load"][self.item_blk], spec, overrides)
        st = np.asarray(self.starts, np.int64)
        cum_t = np.concatenate(([0], np.cumsum(self.tiles[self.item_blk])))
        cum_p = np.concatenate(([0.0], np.cumsum(self.proxy[self.item_blk])))
        self.core_items = np.diff(st)
        self.core_tiles = cum_t[st[1:]] - cum_t[st[:-1]]
        self.core_proxy = cum_p[st[1:]] - cum_p[st[:-1]]
        self.total_tiles = int(cum_t[-1])

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


def _masked_tiles(problem, blk, s1b: int, w: int, tiles):
    """Computed tiles holding a masked element (docs/fa_varlen.md step 4): all with a full mask; with
    the compressed or prefix mask those reaching past the next edge (j - i > next_lu, j >= prefix) or,
    with a pre side, before the pre edge (j - i < -pre_lu). Tile k covers [start + k*W, end_k)."""
    if problem.mask_form == "none":
        return np.zeros_like(tiles)
    if problem.mask_form == "full":
        return tiles.copy()
    b, start, end = blk["b"], blk["start"], blk["end"]
    x0 = blk["s1o"] * s1b
    x1 = x0 + blk["rows"] - 1
    nxt = np.asarray(problem.next_tokens_lu, np.int64)[b]
    pre = np.asarray(problem.pre_tokens_lu, np.int64)[b]
    prefix = np.asarray(problem.prefix_n, np.int64)[b] if problem.prefix_n is not None else np.zeros_like(b)
    # next side: tile k holds (i, j) with j - i > nxt and j >= prefix iff end_k - 1 >= max(prefix, x0 + nxt + 1)
    lim = np.maximum(prefix, x0 + nxt + 1)
    clean = np.where(end <= lim, tiles, np.clip((lim - start + 1) // w, 0, np.maximum(tiles - 1, 0)))
    masked = tiles - clean
    if problem.sparse_mode == 4:  # pre side: start + k*W < x1 - pre
        masked = masked + np.clip(-(-(x1 - pre - start) // w), 0, tiles)
    return np.minimum(masked, tiles)


def _tile_proxy(problem, rows, pitch, extra: float):
    """PROXY_FIT cycles of tiles of *rows* rows and row pitch *pitch* (arrays)."""
    f0, a, b, v0, v1 = PROXY_FIT[4 if problem.dtype.itemsize == 4 else 2]
    dp = -(-problem.D // 16) * 16
    cube = f0 + pitch * (a + b * dp)
    vec = v0 + v1 * -(-rows // 2) * (pitch * (1.0 + extra) + dp)
    return (cube ** PROXY_POWER + vec ** PROXY_POWER) ** (1.0 / PROXY_POWER)


def _proxy(problem, rows, tiles, last_cols, w: int, masked):
    """Proxy cycles per block: tiles - 1 full tiles, one last tile, the mask's extra on masked tiles."""
    rows = np.asarray(rows, np.float64)
    extra = PROXY_EXTRA["pse"] * (problem.pse_form != "none") + PROXY_EXTRA["dropout"] * problem.dropout
    full = _tile_proxy(problem, rows, _a64(w), extra)
    mask_extra = _tile_proxy(problem, rows, _a64(w), extra + PROXY_EXTRA["mask"]) - full
    last = np.where(tiles > 0, _tile_proxy(problem, rows, _a64(np.asarray(last_cols)), extra), 0.0)
    return PROXY_ITEM + np.maximum(tiles - 1, 0) * full + last + masked * mask_extra


def _cut(item: tuple, keep: int, w: int) -> tuple:
    """The item with only its last *keep* tiles."""
    b, n, s1o, rows, start, end, load = item
    tiles = -(-(end - start) // w)
    return (b, n, s1o, rows, start + max(tiles - keep, 0) * w, end, load)


def _warm(problem, work: Work, kin, core_ws_total: int, spec) -> tuple:
    """l2_warm for the samples: the launch's steady state. The compressed mask, alibi pse and the
    workspace are re-read all launch long; K/V only when the launch reads each of their rows at least
    twice (several s1 blocks or GQA heads per kv row). Touched bytes: the launch's working set, or,
    past the L2 size, the size at which the L2 model's hit scale (l2 / touched) equals its average over
    a launch whose touched bytes grow linearly to the working set: WS / (1 + ln(WS / L2))."""
    names = {"atten_mask", "workspace"} | ({"real_shift"} if problem.pse_form == "alibi" else set())
    skv = problem.seq_kv.astype(np.int64)[problem.seq_q > 0]
    span = (work.blk["end"] - work.blk["start"]).sum()
    if problem.N1 * span >= 2 * problem.N2 * max(int(skv.sum()), 1):
        names |= {"key", "value"}
    ws = core_ws_total + sum(g.array.nbytes for g in (*kin.gm, kin.smax, kin.ssum, kin.out) if g is not None)
    l2 = spec.l2_bytes
    return (ws if ws <= l2 else int(ws / (1.0 + math.log(ws / l2)))), names


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
    from ops.flash_attention_var_len_score.api import kernel_inputs, launch_kernel

    work = Work(problem, spec, overrides)
    sizes, w, bd = work.sizes, work.sizes["s2BaseNratioSize"], work.block_dim
    full_til = assemble(problem, sizes, work.kind, np.zeros((0, 7), np.int64), (0,) * (bd + 1), bd)
    light = FaVarLenEstimateTiling(sizes["s1BaseSize"], w, sizes["vec1Elems"], work.kind, bd, len(work.item_blk),
                                   work.total_tiles, full_til.workspaceSize)
    kin = kernel_inputs(problem, "timing", tensors, softmax_layout)
    # the unit of simulation cost: a 256 x 1024 tile (the simulator's wall time follows the proxy)
    # (a smaller vec1Elems means more, shorter vector instructions per tile: more simulation per cycle)
    full_tile = float(_tile_proxy(problem, np.array([256.0]), np.array([1024]), 0.0)[0]) * sizes["vec1Elems"] / 8192
    proxy = work.core_proxy
    warm = _warm(problem, work, kin, full_til.workspaceSize - SYSTEM_WORKSPACE_BYTES, spec)

    def sampler(comp: int, active: float):
        """simulate(items) on *comp* companions at the launch's bandwidth share for *active* cores."""
        # samples never time out: the verdict is on the estimate (split_advice)
        share = contention_chip(spec, active / comp).replace(aicore_timeout_s=1e12)
        t2, bits, v_left, d_left = _prepass_share(problem, full_til, comp, bd)

        def simulate(items: list, t2_size=t2, drop_bits=bits) -> float:
            n = len(items)
            # companion j runs the same items rotated by j * n / comp: the same work out of phase, as the
            # launch's other cores are; the estimate is core 0's end (launch overhead included)
            rot = [items[j * n // comp:] + items[:j * n // comp] for j in range(comp)]
            arr = np.array(sum(rot, []), np.int64).reshape(-1, 7)
            starts = tuple(range(0, n * comp + 1, n)) if n else (0,) * (comp + 1)
            til = dataclasses.replace(assemble(problem, sizes, work.kind, arr, starts, comp), t2Size=t2_size)
            run_in = dataclasses.replace(kin, args=dataclasses.replace(kin.args, dropBits=drop_bits))
            res = launch_kernel(run_in, til, share, "timing", warm)
            cols = res.trace.columns
            end = cols["end"][cols["core"] == 0]
            return float(end.max(initial=0)) + spec.launch_overhead_cycles

        simulate.rest = lambda: _prepass_rest(simulate, t2, bits, v_left, d_left, problem, comp)
        return simulate

    def item_proxy(items: list) -> float:
        idx = np.array([i for i, _ in items])
        keep = np.array([k for _, k in items])
        tiles = np.minimum(work.tiles[work.item_blk[idx]], keep)
        masked = np.minimum(work.masked[work.item_blk[idx]], tiles)
        blk = work.item_blk[idx]
        return float(_proxy(problem, work.blk["rows"][blk], tiles, work.last_cols[blk], w, masked).sum())

    def core_cycles(simulate, core: int) -> tuple[float, float, bool]:
        s, e = work.starts[core], work.starts[core + 1]
        n_core = e - s
        if proxy[core] <= WHOLE_TILES * full_tile:
            return simulate([work.item(i) for i in range(s, e)]), 0.0, True
        deep = SAMPLE_TILES + 1
        picks = np.unique(np.linspace(s, e - 1, min(SAMPLE_ITEMS, n_core)).round().astype(np.int64))
        if work.tiles[work.item_blk[picks]].max() < deep:  # short items: whole items, twice as many, vs half
            picks = np.unique(np.linspace(s, e - 1, min(2 * SAMPLE_ITEMS, n_core)).round().astype(np.int64))
            sets = [[(int(i), deep) for i in picks], [(int(i), deep) for i in picks[:len(picks) // 2]]]
            times = [simulate([_cut(work.item(i), k, w) for i, k in x]) for x in sets]
            p = [item_proxy(x) for x in sets]
            per_proxy = (times[0] - times[1]) / max(p[0] - p[1], 1e-9)
            fixed = times[0] - per_proxy * p[0]
            return fixed + per_proxy * proxy[core], fixed, False
        # the same first and last tiles in every size (pipeline fill and drain), one middle tile less in
        # the second, one item less in the third
        sets = [[(int(i), deep) for i in picks], [(int(i), deep - 1) for i in picks],
                [(int(i), deep) for i in picks[:-1]] if len(picks) > 1 else None]
        times = [simulate([_cut(work.item(i), k, w) for i, k in x]) if x else None for x in sets]
        p = [item_proxy(x) if x else 0.0 for x in sets]
        per_proxy = (times[0] - times[1]) / (p[0] - p[1]) if p[0] > p[1] else None
        if per_proxy is None:  # one-tile items: items and tiles move together
            per_proxy, per_item = (times[0] - times[2]) / max(p[0] - p[2], 1e-9), 0.0
        else:
            per_item = ((times[0] - times[2]) - per_proxy * (p[0] - p[2])) if times[2] is not None else 0.0
        fixed = times[0] - per_item * len(picks) - per_proxy * p[0]
        return fixed + per_item * n_core + per_proxy * proxy[core], fixed, False

    # every core also pays the pipeline fill and drain (about a tile) and the AIV pre-passes: added to
    # the proxy for ranking and for the load-weighted count of busy cores
    floor = 1  # ranking runs: one core at its bandwidth share (a common bias, cheap)
    const = float(_tile_proxy(problem, np.array([float(sizes["s1BaseSize"])]), np.array([_a64(w)]), 0.0)[0])
    active = _active(proxy + const)
    simulate = sampler(floor, active)
    if problem.dtype.itemsize == 4 or (problem.dropout and not full_til.dropMaskBitMode):
        const += max(simulate([]) - spec.launch_overhead_cycles, 0.0)
        active = _active(proxy + const)
        simulate = sampler(floor, active)
    rank = proxy + const
    top = int(np.argmax(rank))
    if proxy[top] > WHOLE_TILES * full_tile:  # a sampled core: no ranking runs, the budget goes to companions
        core, results, spent = top, {}, 0.0
    else:
        cands, spent = _candidates(work, rank, full_tile, floor)
        results = {c: core_cycles(simulate, c) for c in cands}
        core = max(results, key=lambda c: results[c][0])
        # the busy cores again, with the simulated times of the candidates' patterns (the proxy's
        # ratios between cores are rough) and the others' proxies scaled to them
        sims = {_signature(work, c): results[c][0] - spec.launch_overhead_cycles for c in results}
        scale = float(np.mean([results[c][0] - spec.launch_overhead_cycles for c in results]) /
                      np.mean([rank[c] for c in results]))
        busy = np.array([sims.get(_signature(work, c), rank[c] * scale) for c in range(len(rank))])
        active = _active(busy)
    # the slowest candidate again with as many companions as the rest of the budget allows (at least two)
    more = next((c for c in COMPANIONS if spent + _sim_cost(proxy[core], full_tile, c) <= SIM_BUDGET),
                COMPANIONS[-1])
    more = min(more, bd)
    if more > floor or core not in results:
        simulate = sampler(more, active)
        results[core] = core_cycles(simulate, core)
    cycles, fixed, whole = results[core]
    cycles += simulate.rest()
    est = Estimate(int(round(cycles)), cycles / spec.clock_hz * 1e6, proxy, fixed,
                   {k: (v, None) for k, v in work.classes().items()})
    est.sampled_core, est.sampled_whole, est.active_cores = core, whole, active
    est.candidates = {c: r[0] for c, r in results.items()}  # core -> cycles (the winner at `more` companions)
    return est, light, work


def _sim_cost(core_proxy: float, full_tile: float, comp: int) -> float:
    """Full-tile equivalents simulated for a core: whole, or the three sample sizes (counted with a
    margin: sampled runs are short, so their set-up weighs more per tile)."""
    if core_proxy <= WHOLE_TILES * full_tile:
        return comp * core_proxy / max(full_tile, 1e-9)
    return comp * SAMPLE_ITEMS * (3 * SAMPLE_TILES + 2.5)


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


def _candidates(work: Work, rank: np.ndarray, full_tile: float, comp: int) -> tuple[list, float]:
    """Cores to simulate: one per distinct work pattern (its items' rows, tile counts, last widths and
    masked tiles), by decreasing *rank* (proxy plus the per-core constant), those within
    CANDIDATE_RANGE of the largest, at most CANDIDATES, while the simulated full-tile equivalents
    (*comp* companions) stay within STAGE1_BUDGET; the proxy ranks cores only roughly (rms 6%), so the
    slowest simulated candidate is the estimate. Returns (cores, cost)."""
    order, seen, picked, spent = np.argsort(-rank, kind="stable"), set(), [], 0.0
    for c in order:
        c = int(c)
        if rank[c] < CANDIDATE_RANGE * rank[order[0]] or len(picked) == CANDIDATES:
            break
        sig = _signature(work, c)
        if sig in seen:
            continue
        seen.add(sig)
        cost = _sim_cost(work.core_proxy[c], full_tile, comp)
        if picked and spent + cost > STAGE1_BUDGET:
            continue
        picked.append(c)
        spent += cost
    return picked, spent


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
    starts, _ = core_split(sub["load"][idx], spec, None)
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
