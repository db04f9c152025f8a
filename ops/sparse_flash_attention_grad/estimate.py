"""Estimate mode of SparseFlashAttentionGrad: count each core's work from the indices, time it with probes.

The indices are real inputs that decide the work, so it is counted with numpy (never a Python loop per
token): per token its chunks, columns (examined slots * bs) and gathered blocks; tokens go to cores
round-robin as in tiling.py. A core's main loop is the sum of its tokens' steady costs
``Tk + Mc * columns + Ch * (chunks - 1)`` (a chunk's softmax-grad pass works all 512 columns however many
are filled: the fixed part Ch), plus three corrections the pipeline makes: the fill of its first token (no
earlier chunk hides its gather and matmuls; a first token of one chunk also runs its softmax-grad and
scatter-adds with nothing behind them, so a longer first token has a smaller fill), the second token's
(it still overlaps the fill), and alpha per column of its last token's last chunk (a token hides part of
the previous token's last chunk; nothing follows the last one).

All coefficients come from ONE probe launch of the real kernel in timing mode (probe_coefficients), on a
few cores with HBM/L2 bandwidth cut to their share of the used cores (npusim.estimate.contention_chip),
where each core runs its own list of tokens built from the busiest core's widest token (its real index
row): 1, 2 and 3 tokens of a half chunk, 1 and 3 of a full chunk, 1 and 3 of two chunks (when some token
spans chunks). Each core's last cycle is read from the trace. The zero-fill and post steps stream the
fp32 accumulators: they run on all used cores at the call's sizes (up to ZP_DIRECT_BYTES; beyond, two scaled
sizes extrapolated linearly in bytes). A launch that outgrows the L2 turns HBM bound, which a probe of a few
cores cannot show: the main loop is the larger of the slowest core's token sum and the GM bytes of every
token over the chip's HBM and L2 bandwidths at the L2 model's hit scale, times BOUND_SLACK (bandwidth_bound;
zero_post_bound likewise, without the slack). A small lone-token probe runs first (lone_probe): it gives the
bytes, and where the bound exceeds an upper sum of every core's tokens the full probe is skipped. The
estimate is zero-fill/post + the main loop. Where token widths differ, a second probe runs the real token
sequences of the slowest-ranked cores (as many as fit a work budget) inside the call itself (sequence_probe)
and replaces the token sum: a token's cost depends on its neighbours' gathers, which the sum cannot see.
Measured error against timing mode, and the cost of an estimate at S1 = S2 = 128K:
benchmarks/estimate_accuracy_sfag.py; docs/sfag.md "Estimate mode".
"""
from __future__ import annotations

import dataclasses

import numpy as np

from npusim.estimate import (
    ADVICE_MARGIN,
    Estimate,
    contention_chip,
    marginal,
    timeout_verdict,
)
from npusim.memory.gm import TensorSpec
from npusim.types import Pipe
from ops.common.result import OpResult
from ops.sparse_flash_attention_grad.launch import launch_kernel
from ops.sparse_flash_attention_grad.tiling import CHUNK_ROWS, SYSTEM_WORKSPACE_BYTES, sfag_tiling, slot_counts

PROBE_TOKENS = 3  # tokens of the longest probe core: the third runs in the steady state
PROBE_BLOCKS = 64  # bs = 1: the narrow probe width is 64 slots, the wide 128 (3 DMAs per slot)
DIRECT_BLOCKS = 3000  # a launch with at most this many gathered blocks (and chunks * 16) runs whole
ZP_DIRECT_BYTES = 128 * 1024 * 1024  # accumulators up to this run their zero-fill/post whole (~0.4 s CPU; a cost)
ZP_BYTES = 8 * 1024 * 1024  # ... beyond it, accumulator bytes of the smaller zero-fill/post probe
ZP_SPAN = 4  # ... and the larger probe is this many times bigger (a slope over 24 MB, not 8)
ROW_BLOCK = 4096  # tokens per block when scanning a full index array
SEQUENCE_CORES = 8  # most cores whose real token sequences the sequence probe runs
SEQUENCE_BLOCKS = 3000  # most work (gathered blocks + 16 per chunk) of those cores (a cost, not fitted)
SEQUENCE_ONE_BLOCKS = 8192  # ... but the slowest core alone runs up to this much (a cost: ~3 s CPU)
# Fitted on the tuning side: a bound launch's main loop over its GM bytes / bandwidth. Timing mode
# books the bytes the bound counts (HBM bytes of the whole launch within 0.1% of bound + zero/post on T1 = 240),
# but its HBM calendar (npusim/memory/bandwidth.py) is full in about 84% of its 256-cycle buckets (96.5% busy in
# the steady state, 90% in the first tenth of the launch, 93% in the last: the cores' compute and flag waits
# leave gaps). Measured main loop / bound, issue-11 benchmark shape (N1 = 64, 32 blocks of 64, S2 = 8192): T1 = 96
# on a 24 MiB L2 1.0473, T1 = 240 on a 50 MiB L2 1.0547, T1 = 2048 on the 910B2's L2 1.0615 (benchmarks/sfag.py's
# case); their mean, so the three are within -0.8% .. +0.6% (docs/sfag.md "Estimate mode"). The ratio grows
# with the token sum over the bound (0.64, 0.74, 0.79 there): a constant is the simplest fit, not the law.
BOUND_SLACK = 1.0545
GM_PIPES = (int(Pipe.MTE2), int(Pipe.MTE3), int(Pipe.FIX))  # the pipes that move this kernel's GM bytes


def token_work(problem, counts=None) -> dict:
    """Per token: examined slots, chunks, columns and gathered blocks (vectorised; a broadcast index array
    with zero stride over tokens is scanned once per batch)."""
    idx, bs = problem.indices, problem.block_size
    if counts is None:
        counts = _slot_counts(idx)
    nblk = -(-problem.seq_kv // bs)
    batch = problem.batch_of_tokens()
    gathered = np.zeros(problem.T1, np.int64)
    k = np.arange(idx.shape[1])
    if idx.strides[0] == 0 and problem.T1:
        row = idx[0]
        for b in range(problem.B):
            sel = batch == b
            if sel.any():
                n0 = int(counts[np.flatnonzero(sel)[0]])
                gathered[sel] = int(np.count_nonzero((row[:n0] >= 0) & (row[:n0] < nblk[b])))
    else:
        for t0 in range(0, problem.T1, ROW_BLOCK):
            rows = idx[t0:t0 + ROW_BLOCK]
            lim = nblk[batch[t0:t0 + ROW_BLOCK]][:, None]
            ok = (rows >= 0) & (rows < lim) & (k[None, :] < counts[t0:t0 + ROW_BLOCK, None])
            gathered[t0:t0 + ROW_BLOCK] = ok.sum(axis=1)
    cs = CHUNK_ROWS // bs
    return {"slots": counts, "chunks": -(-counts // cs), "columns": counts * bs, "blocks": gathered}


def estimate_counts(problem) -> np.ndarray:
    """Slots per token, scanning a broadcast index array once and a full one in blocks."""
    return _slot_counts(problem.indices)


def _slot_counts(idx: np.ndarray) -> np.ndarray:
    if idx.shape[0] and idx.strides[0] == 0:
        return np.full(idx.shape[0], slot_counts(idx[:1])[0], np.int64)
    out = np.empty(idx.shape[0], np.int64)
    for t0 in range(0, idx.shape[0], ROW_BLOCK):
        out[t0:t0 + ROW_BLOCK] = slot_counts(idx[t0:t0 + ROW_BLOCK])
    return out


def _sub_problem(problem, tokens: int, rows: list, s2: int):
    """A one-batch problem of *tokens* query tokens with index rows *rows* (lists of slot values) over s2 keys."""
    k = problem.K
    idx = np.full((tokens, k), -1, np.int64)
    for t, r in enumerate(rows):
        idx[t, :len(r)] = r
    g = problem.G
    return dataclasses.replace(
        problem, layout="TND", B=1, T1=tokens, T2=s2, seq_q=np.array([tokens]), seq_kv=np.array([s2]),
        cu_q=np.array([0, tokens]), cu_kv=np.array([0, s2]), indices=idx, sparse_mode=0, deterministic=False,
        q_shape=(tokens, g, problem.D), k_shape=(s2, 1, problem.D),
        q_rope_shape=(tokens, g, problem.Dr) if problem.Dr else None,
        k_rope_shape=(s2, 1, problem.Dr) if problem.Dr else None)


def _inputs(p) -> tuple:
    dt = p.dtype
    spec = (lambda s: TensorSpec(s, dt))
    sm = TensorSpec((1, p.T1, p.G), np.float32)
    return (spec(p.q_shape), spec(p.k_shape), spec(p.k_shape), spec(p.q_shape), spec(p.q_shape), sm, sm,
            spec(p.q_rope_shape) if p.Dr else None, spec(p.k_rope_shape) if p.Dr else None)


def _run(p, chip, **flags) -> float:
    """Cycles of one timing-mode launch of sub-problem *p* (tiling flags as given)."""
    counts = slot_counts(p.indices)
    til = dataclasses.replace(sfag_tiling(p, chip, None, counts), **flags)
    res, _ = launch_kernel(p, til, chip, "timing", _inputs(p), counts, trace="full")
    return float(res.cycles)


def _core_ends(problem, lists: list, s2: int, chip) -> tuple:
    """One probe launch (no zero-fill/post) where core c runs the tokens of ``lists[c]`` (index rows, token t
    of the sub-problem runs on core t % len(lists) as in tiling.py): each core's last cycle, the launch
    overhead (the launch's cycles beyond the last core) and each core's GM bytes (MTE2 reads, MTE3 and
    Fixpipe writes: this kernel's Fixpipe and MTE3 only write GM)."""
    k, depth = len(lists), max(len(x) for x in lists)
    rows = [lists[t % k][t // k] if t // k < len(lists[t % k]) else [] for t in range(depth * k)]
    p = _sub_problem(problem, depth * k, rows, s2)
    counts = slot_counts(p.indices)
    til = dataclasses.replace(sfag_tiling(p, chip, None, counts), prePost=False, blockDim=k)
    res, _ = launch_kernel(p, til, chip, "timing", _inputs(p), counts, trace="full")
    col = res.trace.columns
    ends = np.zeros(k)
    core = col["core"].astype(np.int64)
    np.maximum.at(ends, core, col["end"].astype(np.float64))
    gm = np.isin(col["pipe"], GM_PIPES)
    moved = np.bincount(core[gm], weights=col["bytes"][gm].astype(np.float64), minlength=k)
    return ends, float(res.cycles) - float(ends.max()), moved


def _probe_tokens(problem, used: int, work: dict) -> tuple:
    """The probe's token widths and index rows (probe_coefficients): (wa, wb, wm, row, rowm, s2); wm is None when
    no token spans chunks."""
    bs, cs = problem.block_size, CHUNK_ROWS // problem.block_size
    core_of = np.arange(problem.T1) % used
    busiest = int(np.argmax(np.bincount(core_of, weights=work["columns"], minlength=used)))
    mine = np.flatnonzero(core_of == busiest)
    rep = int(mine[np.argmax(work["columns"][mine])])
    n = int(work["slots"][rep])
    s2 = int(problem.seq_kv[int(problem.batch_of_tokens()[rep])])
    row = [int(v) for v in problem.indices[rep, :n]]
    step = min(cs, PROBE_BLOCKS)
    wb = min(n, cs, 2 * PROBE_BLOCKS)  # one chunk, or 128 slots of a wider chunk (bs = 1)
    wa = max(1, wb // 2)
    wm, rowm = None, row
    if work["chunks"].max() > 1:  # some token spans chunks: a probe token of two chunks
        if n > cs:
            wm = min(n, cs + step)
        else:  # the representative token fits one chunk: the widest multi-chunk token's row
            tw = int(np.argmax(work["slots"]))
            wm = min(int(work["slots"][tw]), cs + step)
            rowm = [int(v) for v in problem.indices[tw, :wm]]
            s2m = int(problem.seq_kv[int(problem.batch_of_tokens()[tw])])
            s2 = max(s2, s2m)  # one sub-problem for all probe cores: keys of the longer batch
    return wa, wb, wm, row, rowm, s2


def lone_probe(problem, spec, used: int, work: dict) -> dict:
    """One small probe launch of one token a core at each probe width (probe_coefficients' single-token cores
    alone): each width's GM bytes ("bytes": per token, per column, per extra chunk; they do not depend on the
    timing, so they are the full probe's) and a lone token's cycles fitted the same way ("lone": per token Tk1,
    per column Mc1, per extra chunk). A lone one-chunk token carries the whole pipeline fill and drain, so
    charging every chunk of every token Tk1 (and every column Mc1) bounds the token sum from above: estimate_sfag
    skips the full probe where the bandwidth bound is larger still. (The lone per-chunk term is no such bound:
    a lone two-chunk token hides part of its fill behind its second chunk, so it comes out negative.)"""
    bs, cs = problem.block_size, CHUNK_ROWS // problem.block_size
    wa, wb, wm, row, rowm, s2 = _probe_tokens(problem, used, work)
    widths = [(wa, row)] + ([(wb, row)] if wb != wa else []) + ([(wm, rowm)] if wm else [])
    lists = [[r[:w]] for w, r in widths]
    chip = contention_chip(spec, used / len(lists))
    ends, overhead, moved = _core_ends(problem, lists, s2, chip)
    return {"bytes": _token_fit({w: moved[i] for i, (w, _) in enumerate(widths)}, bs, cs),
            "lone": _token_fit({w: ends[i] + overhead for i, (w, _) in enumerate(widths)}, bs, cs)}


def probe_coefficients(problem, spec, used: int, work: dict) -> dict:
    """The token-cost model of the main loop from one probe launch (module docstring).

    A token of w columns in c chunks costs ``Tk + Mc * w + Ch * (c - 1)`` in the steady state: the gather and
    matmuls grow with the columns, while the softmax-grad pass works all 512 columns of a chunk however many
    are filled, so every chunk has a fixed part. Probe widths (slots of the representative token, the
    busiest core's widest): a = b / 2 and b inside one chunk give Mc (and alpha, the overlap of a token with
    the previous token's last chunk); a token of two chunks gives Ch. Cores run 1, 2 and 3 tokens of a
    (steady cost from the third, the second token's correction) and 1 and 3 of the others; the single
    tokens give each core's first-token fill (a one-chunk first token and a longer one differ)."""
    bs, cs = problem.block_size, CHUNK_ROWS // problem.block_size
    wa, wb, wm, row, rowm, s2 = _probe_tokens(problem, used, work)
    lists = [[row[:wa]] * m for m in range(1, PROBE_TOKENS + 1)]
    if wb != wa:
        lists += [[row[:wb]], [row[:wb]] * PROBE_TOKENS]
    if wm:
        lists += [[rowm[:wm]], [rowm[:wm]] * PROBE_TOKENS]
    chip = contention_chip(spec, used / len(lists))
    ends, overhead, moved = _core_ends(problem, lists, s2, chip)
    second = (ends[1] - ends[0]) - (ends[2] - ends[1])  # width a: the second token against the third
    steady = {wa: ends[2] - ends[1]}
    one = {wa: ends[0]}
    i = PROBE_TOKENS
    for w in ([wb] if wb != wa else []) + ([wm] if wm else []):
        steady[w] = (ends[i + 1] - ends[i] - second) / (PROBE_TOKENS - 1)
        one[w] = ends[i]
        i += 2
    tk, mc, ch = _token_fit(steady, bs, cs)
    # a core's GM bytes do not depend on the timing: each single-token core gives one token's bytes
    bt, bc, bch = _token_fit({w: moved[i] for w, i in zip((wa, wb, wm), (0, PROBE_TOKENS, PROBE_TOKENS + 2))
                              if w and (w != wb or wb != wa)}, bs, cs)

    def cost(w):
        return tk + mc * w * bs + ch * (-(-w // cs) - 1)

    fill_one = one[wb] - cost(wb) + overhead
    fill_multi = one[wm] - cost(wm) + overhead if wm else fill_one
    # alpha: a lone token's cost grows with its width by Mc + alpha (no next token hides its last chunk),
    # a steady one by Mc (docs/sfag.md "Estimate mode")
    alpha = max(0.0, (one[wb] - one[wa]) / ((wb - wa) * bs) - mc) if wb != wa else 0.0
    return {"Tk": tk, "Mc": mc, "Ch": ch, "second": second, "fill_one": fill_one, "fill_multi": fill_multi,
            "alpha": alpha, "ref_last": {1: last_chunk_columns(wb, bs), 2: last_chunk_columns(wm or wb, bs)},
            "probe_slots": (wa, wb, wm), "bytes": (bt, bc, bch)}


def _token_fit(at: dict, bs: int, cs: int) -> tuple:
    """(per token, per column, per extra chunk) of a token quantity known at some widths *at* {slots: value}:
    a line through the one-chunk widths, the rest of a two-chunk width is its extra chunk."""
    single = {w * bs: c for w, c in at.items() if w <= cs}
    tk, mc = marginal(single) if len(single) > 1 else (next(iter(single.values())), 0.0)
    ch = 0.0
    for w, c in at.items():
        if w > cs:
            ch = (c - tk - mc * w * bs) / (-(-w // cs) - 1)
    return tk, mc, ch


def last_chunk_columns(slots, bs: int):
    """Columns of a token's last chunk (slots * bs columns cut into chunks of CHUNK_ROWS)."""
    cols = np.asarray(slots) * bs
    return np.where(cols > 0, cols - CHUNK_ROWS * ((cols - 1) // CHUNK_ROWS), 0)


def l2_hits(problem, til, spec) -> np.ndarray:
    """The L2 model's hit scale (npusim.memory.gm.L2Model: L2 bytes / touched bytes once more than the L2 has
    been touched) when each query token starts. Before the main loop the zero-fill has touched the whole
    workspace (fp32 accumulators and the cores' chunk buffers); the key rows count as touched from the start
    (random blocks reach most pages early); then every token reads its own rows (token_input_bytes). Tokens
    run round-robin, so about t tokens have run when token t starts."""
    kv = problem.T2 * (problem.Dt + problem.D) * problem.dtype.itemsize
    base = til.workspaceSize - SYSTEM_WORKSPACE_BYTES + kv
    touched = base + token_input_bytes(problem) * np.arange(problem.T1, dtype=np.float64)
    return np.minimum(1.0, spec.l2_bytes / np.maximum(touched, 1.0))


def token_input_bytes(problem) -> int:
    """Bytes a token reads once (query, query_rope, d_out, out rows, softmax max and sum): the first touch of
    their pages, so they come from HBM whatever the L2 holds."""
    g = problem.G
    return g * (3 * problem.D + problem.Dr) * problem.dtype.itemsize + 2 * g * 4


def bandwidth_bound(problem, til, spec, work: dict, co: dict) -> float:
    """Cycles the main loop's GM traffic needs at least on the chip-wide HBM and L2 budgets (npusim.launch
    books every transfer on them). Each token moves ``Bt + Bc * columns + Bch * (chunks - 1)`` bytes (probe);
    its inputs come from HBM, the rest from the L2 in the proportion of the L2 model's hit scale (l2_hits)
    and from HBM beyond it. A launch whose accumulators and inputs outgrow the L2 turns HBM bound: the
    probe's few cores cannot show it (cores that finish early leave their bandwidth share to the others).
    The bytes over the bandwidth are scaled by BOUND_SLACK: a bound launch does not keep the HBM busy every
    cycle (fitted; its data beside the constant)."""
    bt, bc, bch = co["bytes"]
    has = work["chunks"] > 0
    moved = np.where(has, bt + bc * work["columns"] + bch * (work["chunks"] - 1), 0.0)
    first = np.where(has, float(token_input_bytes(problem)), 0.0)
    hit = l2_hits(problem, til, spec)
    hbm = float(np.sum(first + (moved - first) * (1.0 - hit)))
    l2 = float(np.sum((moved - first) * hit))
    return BOUND_SLACK * max(hbm * spec.clock_hz / spec.hbm_bw_bytes_per_s, l2 * spec.clock_hz / spec.l2_bw_bytes_per_s)


def zero_post_bound(problem, til, spec) -> float:
    """Cycles the zero-fill and post steps need at least on the HBM budget once their bytes outgrow the L2 (the
    zero_post_cycles probes stay in it): the zero-fill's writes spill from the L2 in the proportion
    ``1 - L2 / touched`` as it goes; the post reads the accumulators and writes the outputs at the hit scale
    of the launch's end."""
    isz, dt, d = problem.dtype.itemsize, problem.Dt, problem.D
    acc = problem.T1 * problem.G * dt * 4 + problem.T2 * (dt + d) * 4
    out = problem.T1 * problem.G * dt * isz + problem.T2 * (dt + d) * isz
    l2 = float(spec.l2_bytes)
    fill = acc - l2 - l2 * np.log(acc / l2) if acc > l2 else 0.0  # integral of (1 - L2 / x) dx from L2 to acc
    end = l2_hits(problem, til, spec)[-1] if problem.T1 else 1.0
    touched_end = l2 / end + token_input_bytes(problem) + out
    post = (acc + out) * max(0.0, 1.0 - l2 / touched_end)
    return (fill + post) * spec.clock_hz / spec.hbm_bw_bytes_per_s


def first_tokens(work: dict, used: int) -> np.ndarray:
    """Each core's first token with work (cores without work are left out), round-robin as tiling.py."""
    has = np.flatnonzero(work["chunks"] > 0)
    _, first = np.unique(has % used, return_index=True)
    return has[first]


def nth_tokens(work: dict, used: int, nth: int) -> np.ndarray:
    """Each core's *nth* token with work (0: the first), for the cores that have one."""
    has = np.flatnonzero(work["chunks"] > 0)
    core = has % used
    order = np.argsort(core, kind="stable")
    core_sorted = core[order]
    start = np.searchsorted(core_sorted, core_sorted, side="left")
    rank = np.empty_like(has)
    rank[order] = np.arange(has.size) - start
    if nth < 0:  # counted from the end
        rank -= np.bincount(core, minlength=used)[core]
    return has[rank == nth]


def zero_post_cycles(problem, spec, used: int) -> float:
    """Cycles of the zero-fill and post steps (with the launch overhead) on *used* cores: run at the call's own
    sizes up to ZP_DIRECT_BYTES of accumulators; beyond, linear in bytes through probes of ZP_BYTES and
    ZP_SPAN * ZP_BYTES. Why run them whole: the steps' time is not linear in bytes to better than about 10%
    between nearby sizes (each core's share rounds to whole row tiles), and a slope over 8 MB probes carried
    that to +6.8% at 100 MB (docs/sfag.md "Estimate mode")."""
    g, dt, d = problem.G, problem.Dt, problem.D
    per_t1, per_t2 = g * dt * 4, (dt + d) * 4
    total = problem.T1 * per_t1 + problem.T2 * per_t2

    def run(t1, t2):
        p = _sub_problem(problem, t1, [], t2)
        return _run(p, spec, mainLoop=False, blockDim=min(used, t1))

    if total <= ZP_DIRECT_BYTES:
        return run(problem.T1, problem.T2)
    f = ZP_BYTES / total
    pts = {}
    for mult in (1, ZP_SPAN):
        t1 = max(int(problem.T1 * f * mult), used)
        t2 = max(int(problem.T2 * f * mult), 1)
        pts[t1 * per_t1 + t2 * per_t2] = run(t1, t2)
    intercept, slope = marginal(pts)
    return intercept + slope * total


def estimate_sfag(problem, spec, til, counts, force_probes: bool = False):
    """OpResult of estimate mode (cycles, time, tiling, timeout verdict with split advice) for the call's
    tiling *til* and slots per token *counts* (estimate_counts). A launch of at most DIRECT_BLOCKS work runs
    whole in timing mode (cheaper than the probes); *force_probes* skips that (accuracy benchmark)."""
    used = til.blockDim
    work = token_work(problem, counts)
    if not force_probes and int(work["blocks"].sum() + 16 * work["chunks"].sum()) <= DIRECT_BLOCKS:
        res, _ = launch_kernel(problem, til, spec, "timing", _inputs(problem), counts)
        est = Estimate(int(res.cycles), float(res.time_us), np.zeros(used), 0.0, classes={})
        verdict = split_advice(problem, work["columns"].astype(np.float64), 0.0, spec, res.time_us * 1e-6, used)
        return OpResult(outputs=None, cycles=int(res.cycles), time_us=float(res.time_us), trace=None, tiling=til,
                        workspace_size=til.workspaceSize, block_dim=used, timeout=verdict, mode="estimate",
                        extra={"problem": problem, "estimate": est, "work": work})
    lone = lone_probe(problem, spec, used, work)
    has = work["chunks"] > 0
    zp = max(zero_post_cycles(problem, spec, used), zero_post_bound(problem, til, spec))
    fixed = zp - spec.launch_overhead_cycles
    bound = bandwidth_bound(problem, til, spec, work, lone)
    tk1, mc1, _ = lone["lone"]
    # every chunk charged a lone one-chunk token's whole cost (its fill and drain included): above the token sum
    lone_cost = np.where(has, tk1 * work["chunks"] + mc1 * work["columns"], 0.0)
    lone_core = np.bincount(np.arange(problem.T1) % used, weights=lone_cost, minlength=used)
    if bound >= lone_core.max():
        # HBM bound beyond doubt: the main loop is the bound whatever the token sum, so the full probe is not
        # run (the 128K case: docs/sfag.md "Estimate mode")
        return _result(problem, spec, til, used, work, fixed, bound, lone_cost, lone_core,
                       {"bandwidth_bound": bound, "sequence_probe": None, "lone_only": True}, (tk1, mc1))
    co = probe_coefficients(problem, spec, used, work)
    cost = np.where(has, co["Tk"] + co["Mc"] * work["columns"] + co["Ch"] * (work["chunks"] - 1), 0.0)
    firsts = first_tokens(work, used)
    fill = np.where(work["chunks"][firsts] > 1, co["fill_multi"], co["fill_one"])
    cost[firsts] += fill  # the pipeline fill rides on each core's first token
    cost[nth_tokens(work, used, 1)] += co["second"]  # the second token still overlaps the fill
    # nothing follows a core's last token: its last chunk is hidden by no next token (the fill was measured
    # with the probe token's last chunk)
    lasts = nth_tokens(work, used, -1)
    ref = np.zeros(used)
    ref[firsts % used] = np.where(work["chunks"][firsts] > 1, co["ref_last"][2], co["ref_last"][1])
    ref = ref[lasts % used]
    cost[lasts] += co["alpha"] * (last_chunk_columns(work["slots"][lasts], problem.block_size) - ref)
    per_core = np.bincount(np.arange(problem.T1) % used, weights=cost, minlength=used)
    main = per_core.max()
    seq = sequence_probe(problem, spec, til, work, per_core)
    if seq is not None:  # the leading cores' real token sequences, run: replaces the token sum
        main = seq
    return _result(problem, spec, til, used, work, fixed, max(main, bound), cost, per_core,
                   {"bandwidth_bound": bound, "sequence_probe": seq, "lone_only": False}, (co["Tk"], co["Mc"]))


def _result(problem, spec, til, used, work, fixed, main, cost, per_core, extra_bound, coeffs):
    """The estimate's OpResult: zero-fill/post (*fixed*) + the main loop *main*; the verdict's split advice from
    the token costs *cost*."""
    cycles = round(fixed + main)
    time_us = cycles / spec.clock_hz * 1e6
    has = work["chunks"] > 0
    est = Estimate(cycles, time_us, per_core, fixed,
                   classes={"tokens": (int(has.sum()), coeffs[0]), "columns": (int(work["columns"][has].sum()), coeffs[1])})
    verdict = split_advice(problem, cost, fixed, spec, time_us * 1e-6, used)
    return OpResult(outputs=None, cycles=cycles, time_us=time_us, trace=None, tiling=til,
                    workspace_size=til.workspaceSize, block_dim=used, timeout=verdict, mode="estimate",
                    extra={"problem": problem, "estimate": est, "work": work, "token_cost": cost, **extra_bound})


def sequence_probe(problem, spec, til, work: dict, per_core: np.ndarray):
    """The main loop's cycles (launch overhead included) from one timing launch of the call itself in which only
    the cores the token sum ranks slowest keep their tokens (sequence_cores: at most SEQUENCE_CORES, as many as
    fit in SEQUENCE_BLOCKS of work; every other token's index row is emptied), or None when not even the slowest
    core fits or every token has the same width (the token sum is then the steady state itself).

    Why: a token's cost depends on its neighbours. The gather of the next chunk overlaps the cube of this one
    and a token boundary drains the pipeline, so a narrow token after a wide one costs less than alone; the
    token sum of steady costs measured on repeated identical tokens misses that by up to 15% per core on mixed
    widths with few tokens a core (docs/sfag.md "Estimate mode"). Running the real sequences keeps the call's
    batches, causal thresholds and masks as they are.

    The kept cores get the chip's whole HBM/L2 bandwidth: npusim books every transfer on the chip-wide budgets,
    so a core only waits where the launch's whole demand exceeds them, and that case is the bandwidth bound's
    (bandwidth_bound, which the estimate takes when larger). Cutting the bandwidth to the kept cores' share of
    the used cores charged every transfer as if all cores moved data at every moment: a probe
    of one or two cores came out 3-10% slow (docs/sfag.md)."""
    used = til.blockDim
    if problem.T1 == 0 or til.deterministic:
        return None
    has = work["chunks"] > 0
    if not has.any() or (np.all(work["slots"][has] == work["slots"][has][0])
                         and np.all(work["blocks"][has] == work["blocks"][has][0])):
        return None
    cores = sequence_cores(problem, work, per_core, used)
    if cores.size == 0:
        return None
    keep = np.isin(np.arange(problem.T1) % used, cores)
    idx = np.array(problem.indices, copy=True)
    idx[~keep] = -1
    p = dataclasses.replace(problem, indices=idx)
    counts = np.where(keep, work["slots"], 0)
    sub = dataclasses.replace(til, prePost=False)
    chip = contention_chip(spec, 1.0)  # the chip's whole bandwidth (and no timeout): see the docstring
    res, _ = launch_kernel(p, sub, chip, "timing", _inputs(problem), counts, trace="none")
    return float(res.cycles)


def sequence_cores(problem, work: dict, per_core: np.ndarray, used: int) -> np.ndarray:
    """The cores the sequence probe runs: the slowest-ranked by the token sum, in rank order, as many as fit
    in SEQUENCE_BLOCKS of work (gathered blocks + 16 per chunk), at most SEQUENCE_CORES. When the slowest alone
    does not fit, it runs alone if its work is at most SEQUENCE_ONE_BLOCKS (none beyond): such a core holds a few
    wide tokens, where the token sum's fill and last-token corrections, measured on narrower probe tokens, are
    extrapolated furthest (without this run, seed 20261127's set missed by +5.7% to +10.9% on four such calls;
    docs/sfag.md "Estimate mode")."""
    order = np.argsort(-per_core, kind="stable")[:min(SEQUENCE_CORES, int(np.count_nonzero(per_core > 0)))]
    load = np.bincount(np.arange(problem.T1) % used, weights=work["blocks"] + 16 * work["chunks"], minlength=used)
    fits = np.cumsum(load[order]) <= SEQUENCE_BLOCKS
    if order.size and not fits[0]:  # the slowest alone is over the budget: it runs alone up to the larger one
        return order[:1] if load[order[0]] <= SEQUENCE_ONE_BLOCKS else order[:0]
    return order[:int(np.argmin(fits)) if not fits.all() else order.size]


def split_advice(problem, cost: np.ndarray, fixed: float, spec, seconds: float, used: int):
    """Timeout verdict and the largest split of the query tokens T1 (launches of consecutive tokens; the
    accumulators and zero-fill/post shrink with them) whose launch stays under the margin of the limit."""
    hz = spec.clock_hz
    t1 = problem.T1

    def cost_of(k: int) -> float:  # the heaviest launch of k consecutive tokens
        worst = 0.0
        for s0 in range(0, t1, max(k, 1)) if t1 // max(k, 1) < 64 else range(0, t1, max(1, t1 // 64)):
            seg = cost[s0:s0 + k]
            per = np.bincount(np.arange(seg.size) % min(used, seg.size or 1), weights=seg) if seg.size else [0.0]
            worst = max(worst, float(np.max(per)))
        return (fixed * k / max(t1, 1) + worst) / hz + spec.launch_overhead_cycles / hz

    return timeout_verdict(seconds, spec.aicore_timeout_s, "T1 (query tokens)", t1, cost_of)


__all__ = ["ADVICE_MARGIN", "estimate_sfag", "probe_coefficients", "token_work", "zero_post_cycles"]
