"""Estimate mode of PromptFlashAttentionV2: count the work from the tiling, sample the slowest core.

1. Work, counted without enumerating tiles: the items (n, b, block of sOuter rows per vector core, 2*sOuter in the cube view) with their tile
   ranges, per distinct batch (batches with equal lengths and tokens share one profile); tile classes
   over the launch (full, edge = the last partial tile of a batch, masked = cut by the band or a user
   mask, skipped = outside the band).
2. The CANN core split of that sequence (npusim.estimate.PeriodicSequence: one head repeated N times,
   or one batch repeated N*B times), and the core with the most work.
3. When the busiest core is small (at most SAMPLE_TASKS tiles and SAMPLE_WHOLE_ITEMS items per vector
   core), SUBSET_CORES real AI Cores of the launch run whole together in launch order: one per stratum
   of the cores ranked by work, the busiest candidates among them (_subset); each stands for
   n_busy / SUBSET_CORES cores, so the chip's HBM/L2 bandwidth is cut by that factor. The estimate is
   the subset's latest end. (Two copies of the busiest core were run before: in-phase copies burst
   together and over-estimated an L2-bound launch by 6.7%; a subset of only heavy cores, and a cold L2,
   under-estimated.) In the vector split with the tiling's worker lists, larger cores still run whole in
   that subset while it holds at most WHOLE_SUBSET_TILES tiles. A larger core is sampled next to copies
   of itself (PAIR_COMPANIONS, each with its item lists rotated: out of phase, in the vector split with
   the tiling's worker lists; COMPANIONS identical ones elsewhere), bandwidth cut to their share of the
   launch: its items, each cut to its last SAMPLE_TILES tiles (the masked side of a causal band), are
   simulated at two sizes per axis and the core's time is extrapolated with the fitted
   ``fixed + a * items + b * tiles``. (Two in-phase copies burst together: on an earlier checking draw,
   now in the tuning set, the sample over-estimated D=256/512 launches by 6-16%; four rotated copies,
   and whole subsets up to 640 tiles, bring those to -5.3%..+7.5%.) In the vector split with the
   tiling's worker lists one fit runs through the samples of all candidates (they are the busiest cores,
   of near-equal work: a fit per candidate turned sample noise into the estimate), items too short to
   cut are sampled whole and twice as many, and the AI Core whose busier vector core has the most work
   is a candidate too (a vector-bound core ends with its busier vector core, which the summed proxy
   does not rank first).
4. Samples start with the L2 in the launch's steady state (_kv_warm): the mask resident, a fraction
   1 - 1/R of K and V resident, R being how often the launch reads each key row. A whole subset in the
   vector split (_shared_kv_warm) simulates its cores' own re-reads, so only the rows other AI Cores
   bring in start resident: 1 - rows / (sum over rows of the AI Cores that read it).
Error bound and its measurement: docs/estimate.md, benchmarks/estimate_accuracy_pfa.py.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from npusim.estimate import Estimate, PeriodicSequence, contention_chip, steady_l2_touched, timeout_verdict
from ops.common.l2_warm import first_reads_missed, resident
from ops.common.ragged import ragged_arange
from ops.prompt_flash_attention_v2.contract import MaskKind
from ops.prompt_flash_attention_v2.launch import kernel_inputs, launch_kernel
from ops.prompt_flash_attention_v2.tiling import (SPLIT_VECTOR, PfaTilingData, balance_path, fit_base_sizes,
                                                  kv_chunk, pfa_tiling, split_core_mode)

MATERIALISE_LIMIT = 2_000_000  # items of one head above which one batch is the period (uniform batches)
COMPANIONS = 2  # AI Cores simulated side by side in a sample of a large core; bandwidth is their share
PAIR_COMPANIONS = 4  # the same in the vector split with the tiling's worker lists (_estimate_exact_pairs)
WHOLE_SUBSET_TILES = 640  # larger cores still run whole in the subset of SUBSET_CORES cores up to this many
# tiles in all (about 2 s of CPU on a quiet machine, 4.5 s at a load of 11)
SUBSET_CORES = 6  # real AI Cores of the launch run whole together when the busiest core is small
SAMPLE_TASKS = 32  # a core with at most this many tiles and SAMPLE_WHOLE_ITEMS items is simulated whole
SAMPLE_WHOLE_ITEMS = 16
CANDIDATES = 3  # busiest cores (distinct work) simulated; the slowest of them is the estimate
SAMPLE_TILES = 4  # tiles kept per sampled item (its last ones)
SAMPLE_ITEMS = 3  # items in a sample of a large core, spread over its range


def _profiles(problem, block: int, s_inner: int):
    """Per distinct batch: dict(row0, rows, t0, t1 arrays of its blocks; kv); and batch -> profile index."""
    keys = np.stack([problem.computed_seq_lengths, problem.actual_seq_lengths_kv, problem.pre_tokens_lu,
                     problem.next_tokens_lu], axis=1).astype(np.int64)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    out = []
    for act_q, act_kv, pre, nxt in uniq:
        if act_q <= 0 or act_kv <= 0:
            out.append(None)
            continue
        row0 = np.arange(0, act_q, block, dtype=np.int64)
        rows = np.minimum(block, act_q - row0)
        first = np.clip(row0 - pre, 0, act_kv)
        last = np.clip(row0 + rows + nxt, 0, act_kv)
        keep = last > first
        out.append(dict(row0=row0[keep], rows=rows[keep], t0=(first // s_inner)[keep],
                        t1=(-(-last // s_inner))[keep], kv=int(act_kv), pre=int(pre), nxt=int(nxt)))
    return out, inverse.reshape(-1)


class _Work:
    """The item sequence of the launch (n-major, then batch, then block) and its lookups."""

    def __init__(self, problem, profiles, inverse):
        self.problem, self.profiles = problem, profiles
        batches = [b for b in range(problem.batch) if profiles[inverse[b]] is not None]
        self.uniform = len({int(inverse[b]) for b in batches}) == 1
        per_head = sum(len(profiles[inverse[b]]["rows"]) for b in batches)
        if not batches:
            self.period_items, self.repeats = 0, problem.num_heads
            self.b = self.i = self.tiles = np.zeros(0, np.int64)
            self.by_batch = False
            return
        if self.uniform and per_head > MATERIALISE_LIMIT:
            p = profiles[inverse[batches[0]]]
            self.b = np.full(len(p["rows"]), -1, np.int64)  # resolved per repeat in item()
            self.i = np.arange(len(p["rows"]))
            self.batches = np.array(batches)
            self.repeats = problem.num_heads * len(batches)
            self.by_batch = True
            self.tiles = p["t1"] - p["t0"]
        else:
            self.b = np.concatenate([np.full(len(profiles[inverse[b]]["rows"]), b) for b in batches])
            self.i = np.concatenate([np.arange(len(profiles[inverse[b]]["rows"])) for b in batches])
            self.repeats = problem.num_heads
            self.by_batch = False
            self.tiles = np.concatenate([profiles[inverse[b]]["t1"] - profiles[inverse[b]]["t0"] for b in batches])
        self.inverse = inverse
        self.period_items = len(self.i)

    def item(self, idx: int) -> tuple[int, int, int, int, int, int]:
        """(n, b, row0, rows, t0, t1) of the global item *idx*."""
        rep, k = divmod(int(idx), self.period_items)
        if self.by_batch:
            n, bi = divmod(rep, len(self.batches))
            b = int(self.batches[bi])
        else:
            n, b = rep, int(self.b[k])
        p = self.profiles[self.inverse[b]]
        i = int(self.i[k])
        return n, b, int(p["row0"][i]), int(p["rows"][i]), int(p["t0"][i]), int(p["t1"][i])


def _tile_classes(problem, profiles, inverse, s_inner: int) -> dict:
    """Tiles of the whole launch by class (full, edge, masked, skipped), counted per distinct batch."""
    counts = dict(full=0, edge=0, masked=0, skipped=0)
    batches_of = np.bincount(inverse, minlength=len(profiles))
    for g, p in enumerate(profiles):
        if p is None or batches_of[g] == 0:
            continue
        mult = int(batches_of[g]) * problem.num_heads
        n_kv_tiles = -(-p["kv"] // s_inner)
        computed = p["t1"] - p["t0"]
        edge = ((p["kv"] % s_inner) != 0) & (p["t1"] == n_kv_tiles)
        if problem.mask_kind == MaskKind.FULL:
            masked = computed
        elif problem.mask_kind == MaskKind.COMPRESSED:
            # tiles the band cuts: those holding the next-edge (c = r + nxt) or pre-edge (c = r - pre) of some row
            r0, r1 = p["row0"], p["row0"] + p["rows"] - 1
            cut_next = _overlap(p["t0"], p["t1"], (r0 + p["nxt"] + 1) // s_inner, (r1 + p["nxt"]) // s_inner)
            cut_pre = _overlap(p["t0"], p["t1"], (r0 - p["pre"]) // s_inner, (r1 - p["pre"] - 1) // s_inner) \
                if problem.sparse_mode == 4 else 0
            masked = np.minimum(cut_next + cut_pre, computed)
        else:
            masked = np.zeros_like(computed)
        counts["masked"] += mult * int(masked.sum())
        counts["edge"] += mult * int(edge.sum())
        counts["full"] += mult * int((computed - edge).sum())
        counts["skipped"] += mult * int((n_kv_tiles - computed).sum())
    return counts


def _overlap(t0, t1, jlo, jhi) -> np.ndarray:
    return np.clip(np.minimum(t1 - 1, jhi) - np.maximum(t0, jlo) + 1, 0, None)


def _sample_tiling(base: dict, items, cores: int, both_subs: bool) -> PfaTilingData:
    """A tiling that gives each of *cores* AI Cores the same *items* (n, b, row0, rows, t0, t1): in the
    vector split on its first vector core, and on the second too when *both_subs* (more workers than
    AI Cores)."""
    cols = list(zip(*items)) if items else [()] * 6
    mine = tuple(range(len(items)))
    if base["splitCoreMode"] == SPLIT_VECTOR:
        workers = (mine, mine if both_subs else ()) * cores
    else:
        workers = (mine,) * cores
    return _item_tiling(base, cols, workers)


def _item_tiling(base: dict, cols: list, workers: tuple) -> PfaTilingData:
    """The tiling with the item table *cols* (n, b, row0, rows, t0, t1 columns) and the worker lists."""
    return PfaTilingData(**base, blockDim=len(workers) // (2 if base["splitCoreMode"] == SPLIT_VECTOR else 1),
                         workerItems=workers, itemN=tuple(cols[0]), itemB=tuple(cols[1]), itemRow0=tuple(cols[2]),
                         itemRows=tuple(cols[3]), itemTile0=tuple(cols[4]), itemTile1=tuple(cols[5]))


def _subset_tiling(base: dict, per_core: list) -> PfaTilingData:
    """A tiling of len(*per_core*) AI Cores, each with its own items: a pair of item lists (one per vector
    core) in the vector split, one list in the cube split; items are (n, b, row0, rows, t0, t1)."""
    items, workers = [], []
    for core in per_core:
        for sub in core:
            workers.append(tuple(range(len(items), len(items) + len(sub))))
            items += list(sub)
    return _item_tiling(base, list(zip(*items)) if items else [()] * 6, tuple(workers))


def _subset(proxy: np.ndarray, candidates: list) -> list:
    """The AI Cores run whole together, in launch order: one per stratum of the busy cores ranked by work
    (SUBSET_CORES ranks spread evenly over the ranking), each candidate taking the place of the spread
    pick nearest its rank. A stratified sample of the launch's loads, so each of its cores stands for
    n_busy / len(subset) cores: the light ones finish early and leave their bandwidth to the heavy
    ones, as in the launch."""
    busy = [int(c) for c in np.argsort(-proxy, kind="stable") if proxy[c] > 0]
    rank = {c: r for r, c in enumerate(busy)}
    picks = [busy[int(r)] for r in np.unique(np.linspace(0, len(busy) - 1, min(SUBSET_CORES, len(busy))).round())]
    for c in candidates:
        if c not in picks:
            free = [i for i, p in enumerate(picks) if p not in candidates]
            if not free:
                picks.append(c)
                continue
            picks[min(free, key=lambda i: abs(rank[picks[i]] - rank[c]))] = c
    return sorted(picks)


def _run_subset(inputs, base: dict, spec, per_core_ws: int, n_busy: int, per_core: list, warm=None) -> int:
    """Cycles of the subset *per_core* (its cores' item lists, _subset_tiling) run whole, each core with
    the chip's HBM and L2 bandwidth divided by the busy cores it stands for; *warm*: launch(l2_warm=)."""
    til = _subset_tiling(base, per_core)
    til = dataclasses.replace(til, workspaceSize=SYSTEM_WORKSPACE + len(per_core) * per_core_ws)
    return launch_kernel(inputs, til, contention_chip(spec, n_busy / len(per_core)), "timing", warm).cycles


def _key_reads(problem, profiles, inverse, s_inner: int) -> int:
    """Key rows read over the launch: every item reads the keys of its tiles [t0, t1) (the last tile only
    up to the batch's key length), for each of the N heads; counted per distinct batch."""
    batches_of = np.bincount(inverse, minlength=len(profiles))
    total = 0
    for g, p in enumerate(profiles):
        if p is not None and batches_of[g]:
            keys = np.minimum(p["t1"] * s_inner, p["kv"]) - p["t0"] * s_inner
            total += int(batches_of[g]) * problem.num_heads * int(keys.sum())
    return total


def _kv_warm(problem, key_reads: int, touched: int) -> tuple:
    """l2_warm of a subset run or sample: the launch's steady state. The mask is re-read all launch long:
    resident. Each K/V row is read R times in the launch (R = *key_reads* / (N_kv x the key tokens): the
    query blocks and the group's heads that cover it) and only its first read misses L2, so a fraction
    1 - 1 / R of K/V pages starts resident (FA varlen's estimate alike). A cold start sends a subset's
    K/V reads to HBM far more often than the launch does, and HBM and L2 are separate bandwidths in the
    model, so the L2 looks less loaded than in the launch; a fully resident start does the opposite."""
    act_q = np.asarray(problem.computed_seq_lengths, np.int64)
    keys = int(np.sum(np.asarray(problem.actual_seq_lengths_kv, np.int64)[act_q > 0]))
    reads = key_reads / max(problem.num_kv_heads * keys, 1)
    return touched, resident(("atten_mask",), first_reads_missed(reads))


def _shared_kv_warm(problem, s_inner: int, core_items: list, touched: int) -> tuple:
    """l2_warm of a whole-subset run: each subset core runs all its real items, so its own re-reads of a
    key row are simulated and its first read of a row misses as in the launch. What the run cannot see
    is a row brought into L2 by another AI Core of the launch. *core_items*: per AI Core of the launch,
    the (n, b, row0, rows, t0, t1) items it runs. A key row read by C distinct AI Cores misses once in the
    launch and once per reader in independent cold runs, so a fraction 1 - rows / sum(C) of K/V pages
    starts resident (rows and C weighted by the tiles' key columns); with no sharing across cores the
    K/V start cold. (The launch-average rule of _kv_warm, 1 - 1/R with R every read of a row, also counts
    the re-reads the subset core simulates itself and left a B=4 N=16 D=256 S2=716 launch on the 910B4,
    L2-bound, 6.8% short: its K/V rows are read 16 times, nearly always by one AI Core.)"""
    n, b, _, _, t0, t1 = np.array([it for items in core_items for it in items], np.int64).reshape(-1, 6).T
    core = np.repeat(np.arange(len(core_items)), [len(items) for items in core_items])
    ntile = t1 - t0
    tile = np.repeat(t0, ntile) + ragged_arange(ntile)  # every key tile of every item
    kvh = np.repeat(b * problem.num_kv_heads + n // problem.group, ntile)
    kv_len = np.asarray(problem.actual_seq_lengths_kv, np.int64)
    width = np.minimum(s_inner, kv_len[np.repeat(b, ntile)] - tile * s_inner)
    row_key = kvh * (int(tile.max()) + 1 if len(tile) else 1) + tile
    first = np.unique(row_key, return_index=True)[1]
    pfirst = np.unique(np.stack([np.repeat(core, ntile), row_key]), axis=1, return_index=True)[1]
    shared = 1.0 - float(width[first].sum()) / max(float(width[pfirst].sum()), 1.0)
    return touched, resident(("atten_mask",), shared)


def estimate_pfa(problem, spec, overrides, tensors: tuple) -> tuple[Estimate, tuple]:
    """Estimate one validated call; *tensors* are the call's (query, key, value, atten_mask, deq_scale1,
    quant_scale1, deq_scale2, quant_scale2, quant_offset2), of which only shapes and dtypes are read.
    Returns the Estimate and (sOuter, sInner, softmaxSOuter, blockDim)."""
    inputs = kernel_inputs(problem, "timing", *tensors)
    from ops.prompt_flash_attention_v2.tiling import l1_bytes, p_type_bytes, pv_type_bytes, ub_bytes

    overrides = dict(overrides or {})
    s_outer, s_inner, sm = fit_base_sizes(problem, spec, {k: v for k, v in overrides.items() if k != "blockDim"})
    mode = split_core_mode(problem, spec, s_outer)
    vector = mode == SPLIT_VECTOR
    tail_first = vector and balance_path(problem)
    profiles, inverse = _profiles(problem, s_outer if vector else 2 * s_outer, s_inner)
    work = _Work(problem, profiles, inverse)
    n_items = work.period_items * work.repeats
    aics = int(overrides.get("blockDim", spec.aic_count))
    workers_max = 2 * aics if vector else aics
    block_dim = min(aics, max(-(-n_items // 2) if vector and n_items > aics else n_items, 1))
    n_workers = min(workers_max, max(n_items, 1))
    classes = _tile_classes(problem, profiles, inverse, s_inner)
    t, d = problem.softmax_dtype.itemsize, problem.head_dim_padded
    per_core_ws = 2 * (2 * s_outer * s_inner * (t + p_type_bytes(problem)) + 2 * s_outer * d * pv_type_bytes(problem))
    base = dict(batchSize=problem.batch, headNumSize=problem.num_heads, kvHeadNumSize=problem.num_kv_heads,
                headSize=d, seqSize=problem.s1, seqInnerSize=problem.s2, sOuterFactor=s_outer, sInnerFactor=s_inner,
                softmaxSOuterFactor=sm, kvChunk=kv_chunk(problem, spec, s_outer), scaleValue=problem.scale_value_fp32,
                sparseMode=problem.sparse_mode, splitCoreMode=mode, tailFirst=tail_first, softmaxTypeBytes=t, pTypeBytes=p_type_bytes(problem), pvTypeBytes=pv_type_bytes(problem),
                workspaceSize=0, ubBytes=ub_bytes(problem, s_outer, s_inner, sm), l1Bytes=l1_bytes(problem, s_outer, kv_chunk(problem, spec, s_outer)))
    if n_items == 0:
        return Estimate(0, 0.0, np.zeros(block_dim), 0.0, classes), (s_outer, s_inner, sm, block_dim)
    if vector and n_items <= EXACT_SPLIT_ITEMS:
        return _estimate_exact_pairs(problem, spec, overrides, inputs, base, classes, per_core_ws,
                                     _key_reads(problem, profiles, inverse, s_inner)), \
            (s_outer, s_inner, sm, block_dim)
    seq = PeriodicSequence(work.tiles, work.tiles + 0.5, work.repeats)  # cost proxy: a tile, and half a tile per item
    both_subs = vector and n_workers > aics  # the skip-core remap puts <= aic + 1 workers one per AI Core
    if tail_first:  # the kernel's balance path: its own snake order over the workers (tiling.vector_workers)
        members, proxy = _snake_split(work, problem.num_heads, workers_max)
    else:
        starts, ends = seq.split(n_workers)
        proxy = seq.core_costs(n_workers)

        def members(c: int) -> np.ndarray:
            return np.arange(int(starts[c]), int(ends[c]), dtype=np.int64)

    def core_tiles(c: int) -> int:
        if tail_first:
            return int(work.tiles[members(c) % work.period_items].sum())
        s, e = int(starts[c]), int(ends[c])
        cum = seq._cum(seq.cum_w, seq.total_w, np.array([s - 1, e - 1]))
        return int(cum[1] - cum[0])

    micro = min(COMPANIONS, block_dim)
    # cores that finish early stop competing: the load-weighted number of busy cores shares the bandwidth
    active = float(proxy.sum() / proxy.max()) if proxy.max() > 0 else 1.0
    share = contention_chip(spec, active / (micro * (2 if both_subs else 1)))  # workers sampled side by side
    cores = micro
    # L2 in the full launch's steady state: K, V and the mask are re-read by every item, so a sample
    # sees them resident, hitting at the launch's average hit scale (steady_l2_touched; FA's estimate alike)
    working_set = sum(x.array.nbytes for x in (inputs.q, inputs.k, inputs.v, inputs.mask, inputs.out) if x is not None)
    working_set = steady_l2_touched(working_set + block_dim * per_core_ws, spec.l2_bytes)
    key_reads = _key_reads(problem, profiles, inverse, s_inner)

    def simulate(items: list, warm: bool = True) -> int:
        til = _sample_tiling(base, items, cores, both_subs)
        til = dataclasses.replace(til, workspaceSize=SYSTEM_WORKSPACE + cores * per_core_ws)
        l2_warm = _kv_warm(problem, key_reads, working_set) if warm else None
        return launch_kernel(inputs, til, share, "timing", l2_warm).cycles

    def core_cycles(core: int) -> tuple[float, float, bool]:
        idx = members(core)
        n_core, tiles_core = len(idx), core_tiles(core)
        if tiles_core <= SAMPLE_TASKS and n_core <= SAMPLE_WHOLE_ITEMS:
            return float(simulate([work.item(int(i)) for i in idx], warm=False)), 0.0, True
        picks = np.unique(np.linspace(0, n_core - 1, min(SAMPLE_ITEMS, n_core)).round().astype(np.int64))
        chosen = [work.item(int(idx[i])) for i in picks]
        items_a = [_cut(it, SAMPLE_TILES) for it in chosen]
        items_b = [_cut(it, SAMPLE_TILES // 2) for it in chosen]
        items_c = items_a[:max(1, len(items_a) // 2)]
        ta, tb, tc = simulate(items_a), simulate(items_b), simulate(items_c)
        na, nb, nc = (sum(it[5] - it[4] for it in x) for x in (items_a, items_b, items_c))
        return _extrapolate((ta, tb, tc), (na, nb, nc), (len(items_a), len(items_c)), n_core, tiles_core)

    # the busiest cores by the proxy, one per distinct work pattern
    picked = _candidates(proxy, lambda c: (len(members(c)), round(float(proxy[c]), 3),
                                           tuple(work.item(int(i))[3:] for i in members(c)[:8])))

    def small(c) -> bool:
        return len(members(c)) <= SAMPLE_WHOLE_ITEMS and core_tiles(c) <= SAMPLE_TASKS

    if not small(picked[0]):  # large cores: per-item effects average out, the proxy's busiest core stands
        picked = picked[:1]
    elif not vector:  # small cube-split cores: real cores of the launch run whole together (_subset)
        chosen = _subset(proxy, picked)
        cycles = _run_subset(inputs, base, spec, per_core_ws, int((proxy > 0).sum()),
                             [([work.item(int(i)) for i in members(c)],) for c in chosen],
                             _kv_warm(problem, key_reads, working_set))
        return _slowest({picked[0]: (float(cycles), 0.0, True)}, proxy, spec, classes), \
            (s_outer, s_inner, sm, block_dim)
    return _slowest({c: core_cycles(c) for c in picked}, proxy, spec, classes), (s_outer, s_inner, sm, block_dim)


SYSTEM_WORKSPACE = 16 * 1024 * 1024


def _extrapolate(cycles: tuple, tiles: tuple, items: tuple, n_core: int, tiles_core: int) -> tuple:
    """fixed + a * items + b * tiles through three samples: (a) items[0] items with tiles[0] tiles,
    (b) the same items cut to tiles[1] tiles, (c) items[1] items with tiles[2] tiles; evaluated at the
    core's items and tiles. Returns (cycles, fixed, False)."""
    (ta, tb, tc), (na, nb, nc), (ia, ic) = cycles, tiles, items
    per_tile = (ta - tb) / (na - nb) if na != nb else (ta - tc) / max(na - nc, 1)
    per_item = ((ta - tc) - per_tile * (na - nc)) / (ia - ic) if ia > ic else 0.0
    fixed = ta - per_item * ia - per_tile * na
    return fixed + per_item * n_core + per_tile * tiles_core, fixed, False


def _slowest(results: dict, proxy: np.ndarray, spec, classes: dict) -> Estimate:
    """The Estimate of the slowest simulated candidate (results: core -> (cycles, fixed, whole))."""
    core = max(results, key=lambda c: results[c][0])
    cycles, fixed, whole = results[core]
    est = Estimate(int(round(cycles)), cycles / spec.clock_hz * 1e6, proxy, fixed,
                   {k: (v, None) for k, v in classes.items()})
    est.sampled_core = core
    est.sampled_whole = whole
    return est


def _candidates(proxy: np.ndarray, signature) -> list:
    """The busiest cores by the proxy (within 85% of the busiest), one per distinct *signature(c)*."""
    order = np.argsort(-proxy, kind="stable")
    picked, seen = [], set()
    for c in order:
        if proxy[c] < 0.85 * proxy[order[0]] or len(picked) == CANDIDATES:
            break
        sig = signature(int(c))
        if sig not in seen:
            seen.add(sig)
            picked.append(int(c))
    return picked
EXACT_SPLIT_ITEMS = 50_000  # vector split: up to this many items the tiling's own worker lists are used


def _estimate_exact_pairs(problem, spec, overrides, inputs, base: dict, classes: dict, per_core_ws: int,
                          key_reads: int) -> Estimate:
    """Vector split with the tiling's own worker lists: the AI Cores whose two vector cores carry the
    most work (tiles + half a tile per item) are run, each vector core on its real items, next to
    COMPANIONS copies; a large pair is sampled (SAMPLE_ITEMS items per vector core cut to their last
    SAMPLE_TILES and SAMPLE_TILES / 2 tiles) and extrapolated with fixed + a * items + b * tiles."""
    til = pfa_tiling(problem, spec, overrides)
    item = lambda i: (til.itemN[i], til.itemB[i], til.itemRow0[i], til.itemRows[i], til.itemTile0[i],  # noqa: E731
                      til.itemTile1[i])
    tiles = np.asarray(til.itemTile1, np.int64) - np.asarray(til.itemTile0, np.int64)
    pairs = [(til.workerItems[2 * c], til.workerItems[2 * c + 1]) for c in range(til.blockDim)]
    proxy = np.array([sum(float(tiles[i]) + 0.5 for i in a + b) for a, b in pairs])
    micro = min(PAIR_COMPANIONS, til.blockDim)
    active = float(proxy.sum() / proxy.max()) if proxy.max() > 0 else 1.0
    share = contention_chip(spec, active / micro)
    working_set = sum(x.array.nbytes for x in (inputs.q, inputs.k, inputs.v, inputs.mask, inputs.out) if x is not None)
    working_set = steady_l2_touched(working_set + til.blockDim * per_core_ws, spec.l2_bytes)

    def simulate_cut(pair, keep: int) -> tuple[int, int, int]:
        """Cycles, items and tiles of the pair's picked items cut to their last *keep* tiles."""
        cut = [[_cut(item(i), keep) for i in sub] for sub in pair]
        rot = lambda sub, j: sub[j * len(sub) // micro:] + sub[:j * len(sub) // micro]  # noqa: E731
        t = _subset_tiling(base, [(rot(cut[0], j), rot(cut[1], j)) for j in range(micro)])  # copies out of phase
        t = dataclasses.replace(t, workspaceSize=SYSTEM_WORKSPACE + micro * per_core_ws)
        cyc = launch_kernel(inputs, t, share, "timing", _kv_warm(problem, key_reads, working_set)).cycles
        return cyc, sum(map(len, cut)), sum(it[5] - it[4] for sub in cut for it in sub)

    def core_samples(c: int) -> list:
        """[(cycles, items, tiles)] of the sample runs of pair *c*: SAMPLE_ITEMS items per vector core cut
        to their last SAMPLE_TILES and SAMPLE_TILES / 2 tiles, and half of them. Where no picked item
        has more than SAMPLE_TILES / 2 tiles (a key length within a tile or two, e.g. S2 = 375 or 716 at
        sInner 512) the cut changes nothing and the items are whole: twice as many are picked instead
        and the cut run is left out. (With one item against three per vector core, the first items'
        pipeline fill was in the slope: a B=4 N=16 D=256 S2=375 launch came out 6.7% short.)"""
        a, b = pairs[c]
        pick = lambda sub, k: [sub[int(j)] for j in np.unique(np.linspace(0, len(sub) - 1,  # noqa: E731
                                                                          min(k, len(sub))).round())] if sub else []
        halve = lambda x: (x[0][:max(1, len(x[0]) // 2)] if x[0] else [], x[1][:max(1, len(x[1]) // 2)] if x[1] else [])  # noqa: E731
        full = (pick(a, SAMPLE_ITEMS), pick(b, SAMPLE_ITEMS))
        if max(int(tiles[i]) for sub in full for i in sub) <= SAMPLE_TILES // 2:
            full = (pick(a, 2 * SAMPLE_ITEMS), pick(b, 2 * SAMPLE_ITEMS))
            return [simulate_cut(full, SAMPLE_TILES), simulate_cut(halve(full), SAMPLE_TILES)]
        return [simulate_cut(full, SAMPLE_TILES), simulate_cut(full, SAMPLE_TILES // 2),
                simulate_cut(halve(full), SAMPLE_TILES)]

    def pooled(cands: list) -> dict:
        """Each candidate's cycles from one fit fixed + a * items + b * tiles through the samples of all
        *cands* (least squares; min-norm where items and tiles move together): the candidates are the
        busiest cores, of near-equal work, and one fit per candidate turned its sample-to-sample noise
        into the estimate (a D=512 causal launch: slopes 8% apart, the largest +9.0%)."""
        rows = [(cyc, it, ti) for c in cands for cyc, it, ti in core_samples(c)]
        y = np.array([r[0] for r in rows], np.float64)
        x = np.array([[1.0, r[1], r[2]] for r in rows])
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        out = {}
        for c in cands:
            a, b = pairs[c]
            n_core, tiles_core = len(a) + len(b), int(tiles[list(a + b)].sum())
            out[c] = (float(coef[0] + coef[1] * n_core + coef[2] * tiles_core), float(coef[0]), False)
        return out

    picked = _candidates(proxy, lambda c: tuple(tuple(item(i)[3:] for i in sub[:8]) for sub in pairs[c]))
    # the AI Core whose busier vector core has the most work joins them: the proxy sums the two vector
    # cores (the cube serves both), but a vector-bound core ends with its busier one (a B=4 N=1 causal
    # launch with actual lengths: its slowest core had 2:1 work on its vector cores, ranked below the
    # candidates by the sum, and the estimate came out 3.8% short)
    lone = np.array([max(sum(float(tiles[i]) + 0.5 for i in sub) for sub in pair) for pair in pairs])
    heavy = int(np.argmax(lone))
    if lone[heavy] > max(lone[c] for c in picked):
        picked.append(heavy)
    a, b = pairs[picked[0]]
    subset_tiles = sum(int(tiles[list(pairs[c][0] + pairs[c][1])].sum()) for c in _subset(proxy, picked))
    if (len(a) + len(b) <= 2 * SAMPLE_WHOLE_ITEMS and int(tiles[list(a + b)].sum()) <= 2 * SAMPLE_TASKS) \
            or subset_tiles <= WHOLE_SUBSET_TILES:
        chosen = _subset(proxy, picked)  # small cores: real cores of the launch run whole together
        cycles = _run_subset(inputs, base, spec, per_core_ws, int((proxy > 0).sum()),
                             [tuple([item(i) for i in sub] for sub in pairs[c]) for c in chosen],
                             _shared_kv_warm(problem, til.sInnerFactor,
                                             [[item(i) for i in a + b] for a, b in pairs], working_set))
        return _slowest({picked[0]: (float(cycles), 0.0, True)}, proxy, spec, classes)
    return _slowest(pooled(picked), proxy, spec, classes)


def _snake_split(work, n_heads: int, workers: int):
    """(members(worker) -> global item indices, work proxy per worker) of ``ComputeEachCoreBalance``
    (B = 1): the blocks, last query block first and heads fastest, dealt over the workers in snake
    order (0..W-1, then W-1..0), the order its index walk ``idx += (W - idx % W) * 2 - 1`` produces."""
    total = work.period_items * work.repeats
    t = np.arange(total, dtype=np.int64)
    r = t % (2 * workers)
    worker = np.where(r < workers, r, 2 * workers - 1 - r)
    nb = work.period_items
    gidx = (t % n_heads) * nb + (nb - 1 - t // n_heads)
    proxy = np.bincount(worker, weights=work.tiles[gidx % nb] + 0.5, minlength=workers)
    order = np.argsort(worker, kind="stable")
    bounds = np.searchsorted(worker[order], np.arange(workers + 1))

    def members(c: int) -> np.ndarray:
        return gidx[order[bounds[c]:bounds[c + 1]]]

    return members, proxy


def _cut(item: tuple, keep: int) -> tuple:
    """The item with only its last *keep* tiles."""
    n, b, row0, rows, t0, t1 = item
    return (n, b, row0, rows, max(t0, t1 - keep), t1)


def _last_chunk(problem, rows: int):
    """The problem restricted to the last *rows* query rows of every batch (the heaviest chunk of an S
    split under a causal or band mask): rows shift by off = act_q - rows, so the left-up tokens become
    pre - off and next + off."""
    act_q = np.asarray(problem.computed_seq_lengths, np.int64)
    off = np.maximum(act_q - rows, 0)
    return dataclasses.replace(problem, s1=min(problem.s1, rows), computed_seq_lengths=np.minimum(act_q, rows),
                               actual_seq_lengths=np.minimum(problem.actual_seq_lengths, rows),
                               pre_tokens_lu=np.asarray(problem.pre_tokens_lu, np.int64) - off,
                               next_tokens_lu=np.asarray(problem.next_tokens_lu, np.int64) + off)


def _max_core_work(problem, spec, overrides) -> float:
    """The work proxy (tiles + half a tile per item) of the busiest core: counting only, no simulation."""
    block, s_inner, workers = _blocking(problem, spec, overrides)
    profiles, inverse = _profiles(problem, block, s_inner)
    work = _Work(problem, profiles, inverse)
    n_items = work.period_items * work.repeats
    if n_items == 0:
        return 0.0
    workers = min(workers, n_items)
    return float(PeriodicSequence(work.tiles, work.tiles + 0.5, work.repeats).core_costs(workers).max())


def _blocking(problem, spec, overrides) -> tuple[int, int, int]:
    """(query rows per item, sInner, workers) of the tiling's core split mode."""
    s_outer, s_inner, _ = fit_base_sizes(problem, spec, {k: v for k, v in (overrides or {}).items() if k != "blockDim"})
    aics = int((overrides or {}).get("blockDim", spec.aic_count))
    if split_core_mode(problem, spec, s_outer) == SPLIT_VECTOR:
        return s_outer, s_inner, 2 * aics
    return 2 * s_outer, s_inner, aics


def total_tiles(problem, spec, overrides) -> int:
    """Score tiles the launch computes (counting only), to refuse simulations that would not finish."""
    block, s_inner, _ = _blocking(problem, spec, overrides)
    profiles, inverse = _profiles(problem, block, s_inner)
    return int(sum(int((profiles[g]["t1"] - profiles[g]["t0"]).sum()) for g in inverse if profiles[g] is not None)
               * problem.num_heads)


def split_advice(problem, spec, overrides, est: Estimate, tensors: tuple, limit_s: float):
    """Timeout verdict, and the largest split of the query sequence S (in whole query blocks) whose
    heaviest launch stays under ADVICE_MARGIN of the limit (npusim.estimate.timeout_verdict). A chunk's
    time is the estimate scaled by its busiest core's work (the last chunk of a causal or band mask is
    the heaviest), so the search costs no further simulation."""
    seconds = est.time_us * 1e-6
    block = _blocking(problem, spec, overrides)[0]
    s1 = int(np.max(problem.computed_seq_lengths)) if len(problem.computed_seq_lengths) else 0
    n_blocks = max(-(-s1 // block), 1)
    full_work = _max_core_work(problem, spec, overrides)

    def cost(chunk_blocks: int) -> float:
        if full_work <= 0:
            return 0.0
        return seconds * _max_core_work(_last_chunk(problem, chunk_blocks * block), spec, overrides) / full_work

    return timeout_verdict(seconds, limit_s, "S (query rows)", n_blocks, cost, unit=block)
