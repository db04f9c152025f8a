"""Estimate mode of ScatterPaKvCache: count the copies from the control tensors, simulate a small sample.

slot_mapping (and seq_lens / compress_lens / compress_seq_offset) are real inputs that decide what is
copied, so the work is counted from them with numpy, never enumerated in Python: per core of the real
split (tiling.py: AllocateTask, or the NZ ceil split), tokens copied and skipped (slot < 0), or each
compress task's copy loops, rows and mean-window rows. A proxy cost (the bytes at the chip's DMA rate,
plus latencies) weighs each core's work. A launch small enough (SAMPLE_RECORDS, COMPRESS_RECORDS) is
simulated whole: the estimate is then timing mode's figure. Otherwise a sample runs on the real kernel
in timing mode, each sampled core's cycles per proxy unit scale its real core's proxy, and the estimate
is the slowest core (SAMPLES lists the kinds of sample).

Why the samples look as they do (timing mode's behaviour, not the hardware's):
- Bandwidth is booked first come first served in core order (npusim/memory/bandwidth.py), so in a
  bandwidth-bound launch later cores wait longer, and when cores finish the rest speed up. A sample
  therefore keeps every core's share of the work and the core order: the token templates run a
  miniature of COMPANIONS cores, one per block of the split (its heaviest core), with the chip's HBM/L2
  bandwidth cut to their share (``contention_chip``: cores / companions). The compress templates run
  the launch thinned, on all its cores, since neighbouring cores read other heads of the same batches
  and share those L2 pages (batches of dropped heads start resident, _PartlyResident); with too many
  tasks to iterate, a miniature of regions of whole batches (cores then hold whole batches).
- npusim's L2 hit scale is l2_bytes / bytes touched chip-wide, and the touched bytes grow as the launch
  goes (npusim/memory/gm.py). A sample touches fewer bytes, so its chip gets the L2 scaled by (bytes it
  touches) / (bytes the launch touches), counted the way gm.py counts pages; it then passes through the
  launch's hit scales in step. Token samples write fresh cache pages at the pace of the launch's
  first-touch curve (random slots fill pages early).
- Long token samples are taken at two sizes (1/SMALL_SAMPLE apart) and fitted as fixed + alpha * proxy.
  Compress samples keep whole tasks (the mix of copy loops and per-task work sets how hard cores
  compete) and are scaled by a ratio: a slope between two such samples varies more than their bias.
Measured error against timing mode: benchmarks/estimate_accuracy_spkc.py.
"""
from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from npusim.estimate import Estimate, contention_chip, timeout_verdict
from npusim.launch import GmArg
from npusim.memory.gm import L2_PAGE_BYTES as PAGE
from npusim.memory.gm import TensorSpec
from ops.scatter_pa_kv_cache import tiling as T
from ops.scatter_pa_kv_cache.launch import launch_kernel

# Sample sizes, in trace records (each ~5 us of timing mode on the reference machine of the benchmark):
SAMPLE_RECORDS = 48_000  # token templates, both samples together (~0.35 s)
#: Compress templates, one sample (~0.7 s). Thinner samples compete less (rope_b256_h16 -3.3% at 110k);
#: a core's stall is about as long in the sample as in the launch but is scaled by the core's thinning
#: (omni_b64: the core switching from K to V tasks waits ~0.2M cycles for HBM; +5.8% at 110k, +4.8% at
#: 140k); miniatures with fewer batches a region are noisier (alibi_b2000_varied +4.8% at 110k).
#: At 160k all of benchmarks/estimate_accuracy_spkc.py is within 3% (those three: from 150k to 180k).
COMPRESS_RECORDS = 160_000
COMPANIONS = 16  # cores of the token miniature (and regions of the compress one)
SMALL_SAMPLE = 4  # the smaller token sample is 1/SMALL_SAMPLE of the larger
MIN_TOKENS = 2  # tokens a core of the larger token sample runs at least
CURVE_BINS = 64  # progress points of the launch's L2 write curve
FULL_LAUNCH_TASKS = 12_000  # compress tasks above which the sample is a miniature, not the whole launch
THIN_MIN_TASKS = 3  # tasks a core keeps at least in a thinned launch (parts are cut below that)
SKIP_RECORDS = 1.5  # a skipped compress task's cost in records (the kernel still reads its controls)
GOLDEN_2 = 0.4142135623730951  # fractional part of sqrt 2: an even, deterministic spread of batches
RECORDS_PER_CHUNK = 6  # wait/alloc, load, EnQue flag, DeQue wait, store, free flag (kernel.py CopyToCache)
#: Simulation cost of moving bytes, in trace records: a long transfer books bandwidth bucket by bucket
#: (npusim/memory/bandwidth.py); measured here, about one record's time per 32 KiB moved.
BYTES_PER_RECORD = 32 * 1024
#: What an Estimate's ``sample`` says was simulated.
SAMPLES = {"launch": "the whole launch (small enough): timing mode itself",
           "miniature": "the token miniature, its cores running their real cores' whole work",
           "miniature, fitted": "the token miniature at two sample sizes",
           "thinned launch": "the compress launch on all its cores, a fraction of each core's tasks kept",
           "compress miniature": "the compress miniature, regions of whole batches"}


# --- shared ---------------------------------------------------------------------------------------
def _dma(spec, nbytes, path: str = "gm_to_ub") -> float:
    """Proxy cycles of one transfer: bytes at the chip's per-core rate for that size, plus latency."""
    return spec.transfer_cycles(path, nbytes) if nbytes > 0 else 0.0


def _allocate(tasks: int, cores: int) -> tuple[np.ndarray, np.ndarray]:
    """kernel.AllocateTask for every core: (first task, tasks)."""
    per, tail = divmod(tasks, cores)
    c = np.arange(cores, dtype=np.int64)
    return c * per + np.minimum(c, tail), per + (c < tail)


def _heaviest(proxy: np.ndarray, blocks: int) -> np.ndarray:
    """The heaviest core of each of *blocks* equal blocks of cores; among equals the later one, which
    timing mode serves last (0.1% a core: the order penalty of a saturated launch, benchmark)."""
    bounds = (np.arange(blocks + 1) * proxy.size) // blocks
    out = [a + int(np.argmax(proxy[a:b] * (1 + 1e-3 * np.arange(b - a)))) for a, b in itertools.pairwise(bounds)]
    return np.array(out, np.int64)


def _l2_chip(chip, spec, sample_bytes: float, launch_bytes: float):
    """*chip* with the L2 scaled to the sample (module docstring); unchanged if the launch fits L2."""
    if launch_bytes <= spec.l2_bytes:
        return chip
    return chip.replace(l2_bytes=max(int(spec.l2_bytes * sample_bytes / launch_bytes), PAGE))


def _launch(tl, chip, args: tuple) -> np.ndarray:
    """Cycles of every core of a timing-mode launch, launch overhead included (the slowest core's is
    the launch's own figure)."""
    # no timeout in a sample: estimate mode reports the launch's verdict instead (split_advice)
    res = launch_kernel(args + (tl,), tl.usedCoreNum, chip, "timing", timeout_s=float("inf"))
    cols = res.trace.columns
    ends = np.zeros(tl.usedCoreNum)
    np.maximum.at(ends, cols["core"], cols["end"])
    ends += chip.launch_overhead_cycles
    ends[int(np.argmax(ends))] = res.cycles
    return ends


def _predict(spec, proxy: np.ndarray, ks: np.ndarray, points: list) -> tuple[np.ndarray, ...]:
    """Cycles of real cores *ks* from one or two (proxy, cycles) arrays of the sample cores standing for
    them, and each one's (fixed, alpha). One sample: fixed is the launch overhead (a sample of a core's
    whole work gives its cycles back); two: the line through them, or the ratio where they coincide."""
    base = float(spec.launch_overhead_cycles)
    x1, y1 = points[-1]
    ratio = (y1 - base) / np.maximum(x1, 1e-9)
    if len(points) == 1:
        fixed, alpha = np.full(ks.size, base), ratio
    else:
        x0, y0 = points[0]
        dx, dy = x1 - x0, y1 - y0
        fit = (dx > 0.05 * x1) & (dy > 0)
        alpha = np.where(fit, dy / np.where(fit, dx, 1.0), ratio)
        fixed = np.where(fit, y1 - alpha * x1, base)
    return fixed + alpha * proxy[ks], fixed, alpha


def _make_estimate(spec, ks, cycles, proxy, fixed, alpha, classes: dict, sample: str) -> Estimate:
    """The Estimate of the slowest of the real cores *ks* (their *cycles*); *sample*: SAMPLES key."""
    j = int(np.argmax(cycles))
    est = Estimate(int(np.ceil(cycles[j] - 1e-6)), float(cycles[j]) / spec.clock_hz * 1e6, cycles, float(fixed[j]),
                   {k: (v, None) for k, v in classes.items()})
    est.sampled_cores = ks  # the real cores whose cycles were predicted (per_core_cycles, in this order)
    est.slowest_core = int(ks[j])
    est.busiest_core = int(np.argmax(proxy))
    est.sample = sample
    est.sampled_whole = sample in ("launch", "miniature")  # the sample ran these cores' whole work
    est.proxy = proxy  # proxy cycles of every real core
    est.fit = (float(fixed[j]), float(alpha[j]))  # the slowest core's cycles = fixed + alpha * proxy
    return est


# --- token templates (NORMAL, NORM_NCT, SISO, SISO_NCT, NZ) -----------------------------------------
def _token_split(tl) -> tuple[np.ndarray, np.ndarray]:
    """(first token, tokens) of every core of the real split."""
    if tl.templateType == T.TEMPLATE_NZ:
        counts = np.full(tl.usedCoreNum, tl.blockFactor, np.int64)
        counts[-1] = tl.tailBlockFactor
        return np.arange(tl.usedCoreNum, dtype=np.int64) * tl.blockFactor, counts
    return _allocate(tl.numTokens, tl.usedCoreNum)


class _TokenWork:
    """Copies and skips of every core, the copy plan's classes and proxy, and the L2 write curve."""

    def __init__(self, plan, tl, spec, slots: np.ndarray):
        self.plan, self.tl, self.slots = plan, tl, slots
        self.starts, self.counts = _token_split(tl)
        # NOTE: core by core, so that no temporary spans all the tokens (millions): memory stays small
        self.copies = np.array([np.count_nonzero(slots[s:s + n] >= 0) for s, n in zip(self.starts, self.counts)],
                               np.int64)
        self.total_copies = int(self.copies.sum())
        self.cap = T.RESERVED_UB_BYTES // plan.index_dtype.itemsize  # slots per staged control chunk
        elem = plan.elem_bytes
        self.rows = [plan.key_token_elems] + ([plan.value_token_elems] if plan.has_value else [])
        self.per_copy, self.records = 0.0, 0
        # copies of one token, by kind: whole rows (fully load), whole chunks and the row's remainder,
        # 32-byte aligned (DataCopy) or not (DataCopyPad) (kernel.py CopyKvCache / CopyToCache)
        self.chunks = {"whole_row": 0, "chunk": 0, "tail_aligned": 0, "tail_pad": 0}
        for name, row in zip("kv", self.rows):
            tail = 0 if tl.fullyLoad else getattr(tl, f"{name}TailHandleNum")
            pieces = [("whole_row", 1, row * elem)] if tl.fullyLoad else [
                ("chunk", getattr(tl, f"{name}LoopNum"), getattr(tl, f"{name}HandleNumPerLoop") * elem),
                ("tail_pad" if tail * elem % T.BLOCK_BYTES else "tail_aligned", int(tail > 0), tail * elem)]
            for kind, n, nbytes in pieces:
                self.chunks[kind] += n
                self.per_copy += n * _dma(spec, nbytes)
                self.records += RECORDS_PER_CHUNK * n
        self.per_load = _dma(spec, T.RESERVED_UB_BYTES) + 2 * spec.flag_cycles
        self.per_skip = spec.scalar_issue_cycles
        self.proxy = self.pattern_proxy(self.copies, self.counts)
        # key/value bytes one copied token brings into L2: its row, or (Nct) the storage between rows
        # too where the strides put several rows in one page
        self.read_per_token = 0
        for row, stride in zip(self.rows, (plan.key_stride, plan.value_stride)):
            r, st = row * elem, (stride or row) * elem
            self.read_per_token += st if st <= PAGE else min(st, r + PAGE)
        self.read_bytes = float(self.total_copies) * self.read_per_token
        self.write_curve = self._write_curve()

    def pattern_proxy(self, copies, tokens):
        """Proxy cycles of *tokens* tokens of which *copies* are copied (arrays or numbers)."""
        return copies * self.per_copy + -(-tokens // self.cap) * self.per_load + (tokens - copies) * self.per_skip

    @property
    def fresh_bytes(self) -> int:
        """Bytes a write to untouched cache rows marks: Norm, the row's pages; PA_NZ, a block's (each
        store of a row covers its bytes plus 32 bytes per row of the block, in every piece)."""
        elem, out = self.plan.elem_bytes, 0
        for name, row in zip("kv", self.rows):
            if self.tl.templateType != T.TEMPLATE_NZ:
                out += -(-row * elem // PAGE) * PAGE
                continue
            pieces = 1 if self.tl.fullyLoad else \
                getattr(self.tl, f"{name}LoopNum") + int(getattr(self.tl, f"{name}TailHandleNum") > 0)
            out += -(-(row * elem + pieces * T.BLOCK_BYTES * self.plan.block_size) // PAGE) * PAGE
        return out

    def _write_curve(self) -> np.ndarray:
        """Cache bytes first touched by the writes up to each of CURVE_BINS progress points (the cores in
        step). gm.py marks the pages of [start, start + bytes) of each store: Norm rows are disjoint;
        PA_NZ stores of one block start 32 bytes apart, so a block is touched once, for fresh_bytes."""
        nz = self.tl.templateType == T.TEMPLATE_NZ
        elem, bs = self.plan.elem_bytes, self.plan.block_size
        # rows of two pages or more share at most their end pages: a write touches its row's pages (and
        # one more where rows are not whole pages)
        big = [r for r in self.rows if r * elem >= 2 * PAGE] if not nz else []
        rows = [r for r in self.rows if r not in big] if not nz else self.rows
        sizes = [self.plan.num_blocks] if nz else [self.plan.num_blocks * bs * r * elem // PAGE + 2 for r in rows]
        firsts = [np.full(n, CURVE_BINS, np.int16) for n in sizes]
        inner = np.zeros(CURVE_BINS)
        for s, n in zip(self.starts, self.counts):
            sl = self.slots[s:s + n]
            j = np.flatnonzero(sl >= 0)
            b = (j * CURVE_BINS // max(int(n), 1)).astype(np.int16)
            inner += np.bincount(b, minlength=CURVE_BINS) * sum(-(-r * elem // PAGE) + (r * elem % PAGE > 0)
                                                                for r in big)
            slot = sl[j].astype(np.int64)
            if nz:
                np.minimum.at(firsts[0], slot // bs, b)
                continue
            for first, row in zip(firsts, rows):
                p0, p1 = slot * row * elem // PAGE, ((slot + 1) * row * elem - 1) // PAGE
                np.minimum.at(first, p0, b)
                np.minimum.at(first, p1, b)
                inner += np.bincount(b, weights=np.maximum(p1 - p0 - 1, 0), minlength=CURVE_BINS)
        hist = sum(np.bincount(f[f < CURVE_BINS], minlength=CURVE_BINS) for f in firsts)
        return np.cumsum(hist * (self.fresh_bytes if nz else PAGE) + inner * PAGE)

    def sample_slots(self, patterns: np.ndarray) -> tuple[np.ndarray, float, int]:
        """Slots of the miniature's cores (rows of *patterns*, >= 0: copy), the bytes they touch and the
        cache rows they need: copies write fresh pages at the launch's pace (write_curve), the others
        rewrite the core's previous row."""
        writes, fresh_bytes = self.write_curve[-1], self.fresh_bytes
        ratio = writes / self.read_bytes if self.read_bytes else 0.0
        pace = self.write_curve / writes if writes > 0 else np.ones(CURVE_BINS)
        grid = (np.arange(CURVE_BINS) + 1) / CURVE_BINS
        step = self.plan.block_size if self.tl.templateType == T.TEMPLATE_NZ else \
            max(1, -(-PAGE // (min(self.rows) * self.plan.elem_bytes)))
        out = np.full(patterns.shape, -1, np.int64)
        touched, used = 0.0, 0
        for c, pattern in enumerate(patterns):
            copies = np.flatnonzero(pattern >= 0)
            k = copies.size
            if not k:
                continue
            n_fresh = min(round(ratio * k * self.read_per_token / fresh_bytes), k)
            due = np.floor(n_fresh * np.interp((np.arange(k) + 1) / k, grid, pace) + 1e-9)
            fresh = np.diff(np.concatenate([[0.0], due])) > 0
            fresh[0] = True
            out[c, copies] = (used + np.cumsum(fresh) - 1) * step
            used += int(fresh.sum())
            touched += k * self.read_per_token + int(fresh.sum()) * fresh_bytes
        return out.reshape(-1).astype(self.slots.dtype), touched, used * step + 1


def _spread(density: float, size: int) -> np.ndarray:
    """*size* tokens of which round(density * size) copies (0) spread evenly among skips (-1)."""
    k = round(density * size)
    out = np.full(size, -1, np.int64)
    if k:
        out[(np.arange(k) * size) // k] = 0
    return out


def _token_source(x, stride, offset, tokens: int, dtype) -> TensorSpec:
    """key/value of *tokens* tokens (Nct: the storage its strides describe)."""
    if stride is None:
        return TensorSpec((tokens,) + tuple(x.shape)[1:], dtype)
    return TensorSpec(((tokens - 1) * stride + offset + int(np.prod(tuple(x.shape)[1:])),), dtype)


def _cache_spec(x, plan, rows: int) -> TensorSpec:
    """The cache with at least *rows* slots (more blocks, same layout)."""
    shape = tuple(x.shape)
    return TensorSpec((max(shape[0], -(-rows // plan.block_size)),) + shape[1:], plan.dtype)


def _run_tokens(work: _TokenWork, chip, tensors, slots: np.ndarray, til, rows: int) -> np.ndarray:
    """Per-core cycles of a token launch with tiling *til* and *slots* (caches of at least *rows*)."""
    plan = work.plan
    key = _token_source(tensors["key"], plan.key_stride, plan.key_offset, til.numTokens, plan.dtype)
    value = vc = None
    if plan.has_value:
        value = GmArg("value", _token_source(tensors["value"], plan.value_stride, plan.value_offset, til.numTokens,
                                             plan.dtype))
        vc = GmArg("value_cache", _cache_spec(tensors["value_cache"], plan, rows))
    args = (GmArg("key", key), GmArg("key_cache", _cache_spec(tensors["key_cache"], plan, rows)),
            GmArg("slot_mapping", np.ascontiguousarray(slots)), value, vc, None, None, None)
    return _launch(til, chip, args)


def _run_miniature(work: _TokenWork, chip, spec, tensors, patterns: np.ndarray, launch_bytes: float) -> np.ndarray:
    """Per-core cycles of the miniature: its core c runs row c of *patterns* with the real copy plan."""
    micro, m = patterns.shape
    slots, touched, rows = work.sample_slots(patterns)
    til = dataclasses.replace(work.tl, numTokens=micro * m, usedCoreNum=micro, blockFactor=m,
                              tailBlockFactor=m if work.tl.templateType == T.TEMPLATE_NZ else 0)
    return _run_tokens(work, _l2_chip(chip, spec, touched, launch_bytes), tensors, slots, til, rows)


def _estimate_tokens(plan, tl, spec, tensors) -> tuple[Estimate, dict]:
    """The token templates: the launch itself when small, else the miniature (module docstring), with
    the sample cores' own tokens when they are few enough, else two samples of their copy density."""
    slots = np.asarray(tensors["slot_mapping"]).reshape(-1)
    work = _TokenWork(plan, tl, spec, slots)
    launch_bytes = work.read_bytes + work.write_curve[-1]
    if work.records * work.total_copies + slots.size <= SAMPLE_RECORDS:
        ks, sample = np.arange(tl.usedCoreNum), "launch"
        points = [(work.proxy, _run_tokens(work, spec, tensors, slots, tl, plan.num_blocks * plan.block_size))]
    else:
        # fewer sample cores when a token takes many copies (a tiny ubSize): each runs a few tokens at least
        cores = min(COMPANIONS, tl.usedCoreNum, max(1, SAMPLE_RECORDS // (MIN_TOKENS * (work.records + 1))))
        ks = _heaviest(work.proxy, cores)
        share = contention_chip(spec, tl.usedCoreNum / ks.size)
        n, k = work.counts[ks], work.copies[ks]
        if int((work.records * k + n).sum()) <= SAMPLE_RECORDS:  # the sample cores' own tokens, whole
            patterns = np.full((ks.size, int(n.max())), -1, np.int64)
            for c, core in enumerate(ks):
                s = int(work.starts[core])
                patterns[c, :n[c]] = np.where(slots[s:s + n[c]] >= 0, 0, -1)
            points = [(work.proxy[ks], _run_miniature(work, share, spec, tensors, patterns, launch_bytes))]
            sample = "miniature"
        else:
            density = k / np.maximum(n, 1)
            per_token = float((work.records * density + 1).sum())
            m = min(max(int(SAMPLE_RECORDS * SMALL_SAMPLE / ((SMALL_SAMPLE + 1) * per_token)), MIN_TOKENS),
                    int(n.max()))
            points, sample = [], "miniature, fitted"
            for size in (max(m // SMALL_SAMPLE, 1), m):
                patterns = np.stack([_spread(d, size) for d in density])
                x = work.pattern_proxy((patterns >= 0).sum(axis=1), np.full(ks.size, size))
                points.append((x, _run_miniature(work, share, spec, tensors, patterns, launch_bytes)))
    cycles, fixed, alpha = _predict(spec, work.proxy, ks, points)
    copies = work.total_copies
    classes = {"tokens_copied": copies, "tokens_skipped": int(slots.size - copies)}
    classes.update({f"copies_{kind}": copies * n for kind, n in work.chunks.items()})
    return _make_estimate(spec, ks, cycles, work.proxy, fixed, alpha, classes, sample), {"work": work}


# --- compress templates (ALIBI, ROPE, OMNI) ---------------------------------------------------------
class _CompressWork:
    """Per task (b, h) of the launch: skip, copy rows and loops, mean-window rows; per core proxies."""

    def __init__(self, plan, tl, spec, tensors):
        self.plan, self.tl = plan, tl
        d = plan.k_head_size
        control = {n: np.asarray(tensors[n]).reshape(-1).astype(np.int64)
                   for n in ("slot_mapping", "seq_lens", "compress_lens", "compress_seq_offset")
                   if tensors.get(n) is not None}
        self.slots, self.seq, self.wins = control["slot_mapping"], control["seq_lens"], control["compress_lens"]
        self.offs = control.get("compress_seq_offset")
        self.template = tl.templateType
        self.pairs = 1 if self.template == T.TEMPLATE_ALIBI else T.TASK_MULTIPLE  # K and V tasks apart
        self.per_loop = tl.kHandleNumPerLoop
        self.row_bytes = d * plan.elem_bytes
        # proxy of a copy loop of r rows: Alibi loads and stores K, then V, one after the other
        # (compress_alibi.h); Rope/Omni's ping/pong buffers hide each store behind the next load but
        # the part's last one (Copy2Cache); the mean spends a vector Add and a PipeBarrier per row
        r = np.arange(self.per_loop + 1) * self.row_bytes
        self.load_cost = np.array([_dma(spec, x) + 2 * spec.flag_cycles for x in r])
        self.store_cost = np.array([_dma(spec, x, "ub_to_gm") + 2 * spec.flag_cycles for x in r])
        if self.pairs == 1:
            self.load_cost, self.store_cost = 2 * (self.load_cost + self.store_cost), 0 * self.store_cost
        self.mean_row = 2 * spec.scalar_issue_cycles + -(-d * 4 // 256)  # Add of d fp32, 256 B a repeat
        self.task_cost = 4 * spec.scalar_issue_cycles
        self.ctl_cost = _dma(spec, T.CONTROL_CHUNK_BYTES) + 2 * spec.flag_cycles
        self.ctl_cap = T.CONTROL_CHUNK_BYTES // plan.index_dtype.itemsize
        self.ctl_tensors = 2 if self.template == T.TEMPLATE_ALIBI else (3 if self.offs is None else 4)
        self.task = self.tasks_of(self.seq, self.wins, self.offs, self.slots)
        self.tasks = self.slots.size * self.pairs
        self.starts, self.counts = _allocate(self.tasks, tl.usedCoreNum)
        self.proxy = self.core_proxy(self.task["proxy"], self.starts, self.counts)

    def core_proxy(self, task_proxy: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Proxy of each core's task range (K tasks, then V tasks) and its control loads."""
        cum = np.zeros(task_proxy.size * self.pairs + 1)
        np.cumsum(np.tile(task_proxy, self.pairs), out=cum[1:])
        return cum[starts + counts] - cum[starts] + self.ctl_cost * self.ctl_tensors * -(-counts // self.ctl_cap)

    def parts(self, seq, wins, offs) -> tuple[list, np.ndarray]:
        """Copied parts (rows) and mean-window rows of every task (kernel.py ParamSet, Alibi Process)."""
        length = np.repeat(seq, self.plan.num_heads)
        if self.template == T.TEMPLATE_ALIBI:
            return [wins], np.zeros_like(wins)
        off = np.full_like(wins, -1) if offs is None else offs
        plain = (off == -1) | (wins == 0)
        off = np.minimum(np.where(plain, length, off), length)
        win = np.where(plain, 0, np.minimum(wins, length - off))
        return [off, length - off - win], (win if self.template == T.TEMPLATE_ROPE else 0 * win)

    def tasks_of(self, seq, wins, offs, slots) -> dict:
        """Per task of these control values: kept, rows written, loops, mean rows, loads, proxy, and
        simulation cost in trace records."""
        parts, mean = self.parts(seq, wins, offs)
        keep, pl = slots >= 0, self.per_loop
        loops = sum(-(-p // pl) for p in parts)
        copy = sum((p // pl) * self.load_cost[pl] + self.load_cost[p % pl]
                   + self.store_cost[np.where((p % pl == 0) & (p > 0), pl, p % pl)] for p in parts)
        add = max(self.tl.addNumPerLoop, 1)
        batches = -(-mean // add)
        mean_cost = mean * self.mean_row + (mean // add) * self.load_cost[min(add, pl)] + \
            self.load_cost[np.minimum(mean % add, pl)] + (mean > 0) * self.store_cost[1]
        rows = sum(parts) + (mean > 0)
        moved = 2 * (3 - self.pairs) * rows * self.row_bytes  # in and out; K and V for Alibi
        return {"keep": keep, "slot": slots, "loops": keep * loops, "rows": keep * rows, "mean": keep * mean,
                "loads": keep * (loops + batches), "proxy": self.task_cost + keep * (copy + mean_cost),
                "cost": 8 + keep * (RECORDS_PER_CHUNK * (3 - self.pairs) * loops + 2 * mean + 8 * batches
                                    + moved / BYTES_PER_RECORD)}

    def touched(self, seq, task: dict, resident: float = 0.0) -> float:
        """Bytes gm.py's L2 page model marks. A load of r rows of a head covers r * D elements from its
        first row and the heads of a batch start D apart: per batch, one head's loads plus (N - 1) * D
        and a straddled page per load; *resident*: the share of those already in L2. A task stores
        consecutive cache rows from its slot: the union of their pages (tasks' rows do not overlap)."""
        n, rb = self.plan.num_heads, self.row_bytes
        per_load = rb * task["rows"] + task["loads"] * (PAGE + (n - 1) * rb)
        kept = task["keep"].reshape(-1, n)
        reads = (per_load.reshape(-1, n).sum(axis=1) / np.maximum(kept.sum(axis=1), 1)) * kept.any(axis=1)
        keep = task["keep"] & (task["rows"] > 0)
        start = task["slot"][keep] * rb
        p0, p1 = start // PAGE, (start + task["rows"][keep] * rb - 1) // PAGE
        mark = np.zeros(int(p1.max()) + 1 if p1.size else 1, bool)
        mark[p0] = mark[p1] = True
        writes = (np.count_nonzero(mark) + np.maximum(p1 - p0 - 1, 0).sum()) * PAGE
        return 2.0 * (float(reads.sum()) * (1 - resident) + float(writes))

    def cut(self, seq, wins, offs, frac: float):
        """The control values with every part of every task (copied rows, mean window) cut to *frac*
        of its rows, rounded up: the launch's mix of parts stays."""
        n_heads = self.plan.num_heads
        seq_b = np.repeat(seq, n_heads)
        scale = max(round(frac * 4096), 1)

        def part(x):
            return -(-x * scale // 4096)

        if self.template == T.TEMPLATE_ALIBI:
            wins = part(wins)
            return np.maximum(part(seq_b), wins).reshape(-1, n_heads).max(axis=1), wins, offs
        o = np.full_like(wins, -1) if offs is None else offs
        plain = (o == -1) | (wins == 0)
        off = np.minimum(np.where(plain, seq_b, o), seq_b)
        win = np.where(plain, 0, np.minimum(wins, seq_b - off))
        a, w = part(off), part(win)
        seq_new = (a + w + part(seq_b - off - win)).reshape(-1, n_heads).max(axis=1)
        seq_b = np.repeat(seq_new, n_heads)  # a head cut a row shorter than the batch gets it in its tail
        return seq_new, np.where(plain, np.minimum(wins, seq_b), w), None if offs is None else np.where(plain, o, a)


class _PartlyResident(GmArg):
    """key or value of a thinned launch with some batches' L2 pages resident from the start. In the
    launch a batch's rows are read once per head: the first read misses L2 (its pages in one burst),
    the others hit. With a fraction f of the tasks kept, 1 - f of the batches start resident: the misses
    stay 1/N of the reads and come in the same bursts."""

    def __init__(self, name: str, array, batch_bytes: np.ndarray, share: float):
        super().__init__(name, array)
        self.batch_bytes, self.share = batch_bytes, share

    def make(self, run):
        tensor = super().make(run)
        if self.share > 0 and self.batch_bytes.size:
            ends = np.cumsum(self.batch_bytes)
            resident = (np.arange(ends.size) * GOLDEN_2) % 1.0 < self.share
            pages = np.arange(tensor.gm.resident.size) * PAGE
            tensor.gm.resident[:] = resident[np.minimum(np.searchsorted(ends, pages, side="right"), ends.size - 1)]
        return tensor


def _thin(work: _CompressWork, frac: float) -> np.ndarray:
    """Which (b, h) tasks a thinned launch keeps: *frac* of each core's, evenly spaced along its range
    (Bresenham), so the cores keep the launch's balance and finish together as in it. K and V tasks of
    a (b, h) share its slot, so the cores holding K tasks decide."""
    keep = np.zeros(work.slots.size, bool)
    for s, n in zip(work.starts, work.counts):
        if s >= work.slots.size:
            break
        j = np.arange(min(int(n), work.slots.size - int(s)))
        keep[s + j] = np.floor((j + 1) * frac + 0.5) > np.floor(j * frac + 0.5)
    return keep


def _regions(work: _CompressWork, cores: np.ndarray, frac: float):
    """Control values of a miniature whose region r holds real core cores[r]'s tasks: *frac* of its
    batches, evenly spread and whole (a core of a launch with this many tasks holds whole batches, and
    its heads share their L2 pages), the other heads of an edge batch skipped (other cores do them),
    parts cut to keep at least one batch. Regions are equally wide (padding: empty batches) so that
    AllocateTask gives each miniature core one region (Rope/Omni: K of every region, then V of every
    region); each region writes its own cache rows."""
    n_heads = work.plan.num_heads
    chosen, cut = [], 1.0
    for c in cores:
        tasks = np.arange(work.starts[c], work.starts[c] + work.counts[c]) % work.slots.size
        batches = np.unique(tasks // n_heads)
        keep = frac * batches.size
        cut = min(cut, keep) if keep < 1 else cut
        pick = np.unique(np.linspace(0, batches.size - 1, max(round(keep), 1)).round().astype(np.int64))
        chosen.append((batches[pick], tasks))
    width = max(b.size for b, _ in chosen)
    seq = np.zeros((len(chosen), width), np.int64)
    slots = np.full((len(chosen), width, n_heads), -1, np.int64)
    wins = np.zeros_like(slots)
    offs = None if work.offs is None else np.full_like(slots, -1)
    rows = work.plan.num_blocks * work.plan.block_size
    for r, (b, tasks) in enumerate(chosen):
        i = b[:, None] * n_heads + np.arange(n_heads)
        seq[r, :b.size], wins[r, :b.size] = work.seq[b], work.wins[i]
        slots[r, :b.size] = np.where(np.isin(i, tasks) & (work.slots[i] >= 0), work.slots[i] + r * rows, -1)
        if offs is not None:
            offs[r, :b.size] = work.offs[i]
    seq, wins, offs = seq.ravel(), wins.reshape(-1), None if offs is None else offs.reshape(-1)
    if cut < 1:
        seq, wins, offs = work.cut(seq, wins, offs, cut)
    return seq, wins, offs, slots.reshape(-1)


def _run_compress(work: _CompressWork, chip, spec, launch_bytes, regions: int, resident: float,
                  seq, wins, offs, slots):
    """(proxy, cycles) of every core of a compress launch on the real kernel: the launch's own split
    (regions 0) or a miniature of *regions* regions; *resident*: share of key/value batches in L2."""
    plan, tl = work.plan, work.tl
    batch, dt, n, d = seq.size, plan.index_dtype, plan.num_heads, plan.k_head_size
    tasks = batch * n * work.pairs
    used = tl.usedCoreNum if regions == 0 else (regions * work.pairs if regions > 1 else 1)
    task = work.tasks_of(seq, wins, offs, slots)
    first, count = _allocate(tasks, used)
    chip = _l2_chip(chip, spec, work.touched(seq, task, resident), launch_bytes)
    til = dataclasses.replace(tl, numTokens=batch * n, batch=batch, usedCoreNum=used, blockFactor=tasks // used,
                              tailBlockFactor=tasks % used)
    shape = (batch, tl.seqLen, n, d) if tl.seqLen else (max(int(seq.sum()), 1), n, d)
    batch_bytes = (np.full(batch, tl.seqLen) if tl.seqLen else seq) * n * work.row_bytes
    cache = TensorSpec((plan.num_blocks * max(regions, 1), plan.block_size, 1, d), plan.dtype)
    args = (_PartlyResident("key", TensorSpec(shape, plan.dtype), batch_bytes, resident),
            GmArg("key_cache", cache), GmArg("slot_mapping", slots.astype(dt)),
            _PartlyResident("value", TensorSpec(shape, plan.dtype), batch_bytes, resident),
            GmArg("value_cache", TensorSpec(cache.shape, plan.dtype)), GmArg("compress_lens", wins.astype(dt)),
            None if offs is None else GmArg("compress_seq_offset", offs.astype(dt)),
            GmArg("seq_lens", seq.astype(dt)))
    return work.core_proxy(task["proxy"], first, count), _launch(til, chip, args)


def _compress_regions(work: _CompressWork) -> tuple[np.ndarray, np.ndarray]:
    """(real cores a compress miniature stands for, its cores that run them). Alibi: the heaviest core
    of each of COMPANIONS blocks. Rope/Omni run K tasks (< B*N) before V tasks and a task's K and V share
    its control values, so the heaviest K cores of COMPANIONS/2 blocks and V cores of as many get a
    region each, and the miniature's 2 * regions cores run K then V of every region: the K cores of K
    regions and the V cores of V regions stand for their real cores, the others mirror them."""
    used = work.proxy.size
    if work.pairs == 1:
        ks = _heaviest(work.proxy, min(COMPANIONS, used))
        return ks, np.arange(ks.size)
    v0 = int(np.searchsorted(work.starts, work.slots.size, side="left"))  # the first core starting in V
    if v0 >= used:  # a single core does everything
        return np.arange(used), np.arange(used)
    k_side = _heaviest(work.proxy[:v0], min(COMPANIONS // 2, v0))
    v_side = v0 + _heaviest(work.proxy[v0:], min(COMPANIONS // 2, used - v0))
    r = k_side.size + v_side.size
    return np.concatenate([k_side, v_side]), np.concatenate([np.arange(k_side.size), r + k_side.size +
                                                             np.arange(v_side.size)])


def estimate_compress(plan, tl, spec, tensors) -> tuple[Estimate, dict]:
    """The compress templates: the launch itself when small. Else a thinned launch on all its cores: a
    fraction of each core's tasks, evenly spaced, kept whole (their mix of copy loops and per-task work
    sets how hard the cores compete; each core's share of the work, when cores finish and free
    bandwidth), the rest skipped, parts cut when a core would keep too few. With too many tasks to
    iterate (FULL_LAUNCH_TASKS), a miniature of COMPANIONS regions of whole batches instead."""
    work = _CompressWork(plan, tl, spec, tensors)
    launch_bytes = work.touched(work.seq, work.task)
    total = float(work.task["cost"].sum()) * work.pairs
    if total <= COMPRESS_RECORDS:
        ks, sample = np.arange(tl.usedCoreNum), "launch"
        points = [_run_compress(work, spec, spec, launch_bytes, 0, 0.0, work.seq, work.wins, work.offs,
                                work.slots)]
    elif work.tasks <= FULL_LAUNCH_TASKS:
        ks, sample = np.arange(tl.usedCoreNum), "thinned launch"
        keep = max(COMPRESS_RECORDS - SKIP_RECORDS * work.tasks, 0.1 * COMPRESS_RECORDS) / total
        tasks_kept = min(1.0, max(keep, THIN_MIN_TASKS / max(int(work.counts.min()), 1)))
        seq, wins, offs = work.seq, work.wins, work.offs
        if keep < tasks_kept:
            seq, wins, offs = work.cut(seq, wins, offs, keep / tasks_kept)
        slots = np.where(_thin(work, tasks_kept), work.slots, -1)
        points = [_run_compress(work, spec, spec, launch_bytes, 0, 1 - tasks_kept, seq, wins, offs, slots)]
    else:
        (ks, mini), sample = _compress_regions(work), "compress miniature"
        micro = ks.size * work.pairs if ks.size > 1 else 1
        share = micro / tl.usedCoreNum
        x, y = _run_compress(work, contention_chip(spec, 1 / share), spec, launch_bytes, ks.size, 0.0,
                             *_regions(work, ks, min(1.0, COMPRESS_RECORDS / (total * share))))
        points = [(x[mini], y[mini])]
    cycles, fixed, alpha = _predict(spec, work.proxy, ks, points)
    t = work.task
    # per (b, h): K and V each (Alibi copies both in one task, Rope/Omni in two)
    classes = {"compress_tasks": work.tasks, "tasks_skipped": int((~t["keep"]).sum()) * work.pairs,
               "copy_loops": 2 * int(t["loops"].sum()), "rows_written": 2 * int(t["rows"].sum()),
               "mean_tokens": 2 * int((t["mean"] > 0).sum()), "mean_rows": 2 * int(t["mean"].sum())}
    return _make_estimate(spec, ks, cycles, work.proxy, fixed, alpha, classes, sample), {"work": work}


# --- entry points ------------------------------------------------------------------------------------
def estimate_spkc(plan, tl, spec, tensors: dict) -> tuple[Estimate, dict]:
    """Estimate one validated, tiled call; *tensors* as PreparedScatter.tensors (data tensors may be
    TensorSpec-like, control tensors are real). Returns the Estimate and the counted work."""
    if tl.templateType in T.COMPRESS_TEMPLATES:
        return estimate_compress(plan, tl, spec, tensors)
    return _estimate_tokens(plan, tl, spec, tensors)


def split_advice(spec, est: Estimate, work: dict, limit_s: float):
    """Timeout verdict and the largest split along tokens (compress: the tokens of whole batches) whose
    launches stay under ADVICE_MARGIN of the limit (npusim.estimate.timeout_verdict). A chunk's time is
    the slowest core's fixed cycles plus its cycles per proxy unit times its proxy scaled to the chunk:
    no further simulation."""
    seconds = est.time_us * 1e-6
    fixed, alpha = est.fit
    variable = alpha * float(est.proxy[est.slowest_core])
    w = work["work"]
    size, name = (int(w.slots.size), "tokens") if isinstance(w, _TokenWork) else \
        (int(w.seq.size), "batches (the tokens of whole batches)")

    def cost(chunk: int) -> float:
        return (fixed + variable * chunk / max(size, 1)) / spec.clock_hz

    return timeout_verdict(seconds, limit_s, name, max(size, 1), cost)
