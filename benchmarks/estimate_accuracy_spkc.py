"""ScatterPaKvCache: estimate mode against timing mode on a grid of calls, and its cost on huge ones.

Grid: every template (Norm, Nct, key-only, PA_NZ, Alibi, Rope, Omni), dtypes and slot dtypes, negative
slots (random and trailing padding), random and sequential slots, rows from 16 B to 64 KiB (fully loaded,
chunked, DataCopyPad tails, a small-UB override), a blockDim override, three chips (Ascend910B2, the
40-core 910B4 with half the L2, Ascend910_9391), compress batches of equal and varied lengths; each call
small enough for timing mode to finish in under a minute. For each: timing-mode cycles and wall time,
estimate-mode cycles and wall time, the relative error, and whether the estimate ran the whole launch
(then it is timing mode itself; sample kinds: ops/scatter_pa_kv_cache/estimate.py SAMPLES). Then the
estimate of calls far too large for timing mode (4M tokens, rows of 144 KiB, 320k compress tasks):
wall time and peak Python memory (tracemalloc, in a second run: tracing slows numpy down).

    python benchmarks/estimate_accuracy_spkc.py            # the whole grid (about 5 minutes)
    python benchmarks/estimate_accuracy_spkc.py norm nz    # only the cases whose name contains a word
    python benchmarks/estimate_accuracy_spkc.py check      # only the checking set (tune / check may run as
                                                           # two processes: the second to finish saves both)

Tuning set: GRID. Until session 7 it was split into seed-13 halves (benchmarks/halves.py); that checking
half had been looked at, so all of GRID tunes now. Checking set: CHECK_CONFIGS calls drawn at random
(fresh_check, seed CHECK_SEED), drawn with no model change since the seed was fixed; quote it.
"""
from __future__ import annotations

import gc
import os
import platform
import sys
import time
import tracemalloc

import ml_dtypes
import numpy as np

from halves import save_halves, summary, with_saved_other
from npusim.memory.gm import TensorSpec
from ops.scatter_pa_kv_cache.api import scatter_pa_kv_cache

DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "int8": np.int8}
CHIPS = ("Ascend910B2", "Ascend910B2", "Ascend910B2", "Ascend910B4", "Ascend910_9391")


def token_call(tokens, heads=8, head=128, v_head=None, block=128, cache_mode="Norm", dtype="fp16", negative=0.0,
               padding=0.0, key_only=False, slot_dtype="int32", order="random", nct=False, tiling=None,
               chip="Ascend910B2", seed=0) -> dict:
    """Scenario 1/2/6 call with TensorSpec data: a cache twice the tokens, *negative* of the slots
    negative at random and the last *padding* of them negative (a padded batch)."""
    rng = np.random.default_rng(seed)
    dt, v_head = DTYPES[dtype], v_head or head
    blocks = -(-tokens // block) * 2
    slots = (rng.permutation(blocks * block)[:tokens] if order == "random" else np.arange(tokens)).astype(slot_dtype)
    slots[rng.random(tokens) < negative] = -1
    slots[int(tokens * (1 - padding)):] = -1
    if cache_mode == "PA_NZ":
        last = 32 // np.dtype(dt).itemsize
        k_shape, v_shape = (blocks, heads * head // last, block, last), (blocks, heads * v_head // last, block, last)
    else:
        k_shape, v_shape = (blocks, block, heads, head), (blocks, block, heads, v_head)
    call = {"key": TensorSpec((tokens, heads, head), dt), "key_cache": TensorSpec(k_shape, dt),
            "slot_mapping": slots, "cache_mode": cache_mode, "chip": chip, "tiling": tiling}
    if key_only:
        call.update(value=np.empty(0, dt), value_cache=np.empty(0, dt))
    else:
        call.update(value=TensorSpec((tokens, heads, v_head), dt), value_cache=TensorSpec(v_shape, dt))
    if nct:  # K and V columns of one packed qkv row
        row = heads * (head + v_head) + 64
        call.update(scatter_mode="Nct", strides=[row, row], offsets=[64, 64 + heads * head])
    return call


def compress_call(mode, batch, heads=8, head=128, seq=1024, spread=0.0, window=0.25, offset=0.25, dtype="fp16",
                  negative=0.0, slot_dtype="int32", chip="Ascend910B2", seed=0) -> dict:
    """Scenario 4/5 call: seq_lens around *seq* (+- *spread*), windows and offsets as fractions of it,
    each task's rows right after the previous task's in the cache, *negative* of the tasks skipped."""
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    seq_lens = np.full(batch, seq, np.int64)
    if spread:
        seq_lens = np.maximum((seq * (1 + spread * (2 * rng.random(batch) - 1))).astype(np.int64), 1)
    lengths = np.repeat(seq_lens, heads)
    wins = (lengths * window).astype(np.int64)
    offs = None
    rows = wins.copy()
    if mode != "Alibi":
        offs = np.minimum(np.where(wins > 0, (lengths * offset).astype(np.int64), -1), lengths - wins)
        rows = np.where(wins > 0, offs + (mode == "Rope") + lengths - offs - wins, lengths)
    slots = np.concatenate([[0], np.cumsum(rows)[:-1]])
    slots[rng.random(batch * heads) < negative] = -1
    cache_rows = max(int(rows.sum()), int((lengths - wins).sum()), int(seq_lens.sum())) + 16
    cache = TensorSpec((-(-cache_rows // 128), 128, 1, head), dt)
    tokens = int(seq_lens.sum())
    call = {"key": TensorSpec((tokens, heads, head), dt), "key_cache": cache,
            "slot_mapping": slots.astype(slot_dtype), "value": TensorSpec((tokens, heads, head), dt),
            "value_cache": TensorSpec(cache.shape, dt), "compress_lens": wins.astype(slot_dtype),
            "seq_lens": seq_lens.astype(slot_dtype), "scatter_mode": mode, "chip": chip}
    if offs is not None:
        call["compress_seq_offset"] = offs.astype(slot_dtype)
    return call


#: name -> (builder, arguments): the grid.
GRID = {
    "norm_fully_600": (token_call, {"tokens": 600}),
    "norm_4k": (token_call, {"tokens": 4096}),
    "norm_50k": (token_call, {"tokens": 50_000}),
    "norm_200k": (token_call, {"tokens": 200_000}),
    "norm_100k_h32": (token_call, {"tokens": 100_000, "heads": 32}),
    "norm_20k_h32_d256": (token_call, {"tokens": 20_000, "heads": 32, "head": 256}),
    "norm_20k_h64_d256": (token_call, {"tokens": 20_000, "heads": 64, "head": 256}),
    "norm_100k_h16_neg30": (token_call, {"tokens": 100_000, "heads": 16, "negative": 0.3}),
    "norm_80k_pad40": (token_call, {"tokens": 80_000, "padding": 0.4}),
    "norm_60k_h16_seq": (token_call, {"tokens": 60_000, "heads": 16, "order": "sequential"}),
    "norm_40k_bf16_i64": (token_call, {"tokens": 40_000, "dtype": "bf16", "slot_dtype": "int64"}),
    "norm_60k_int8_h32": (token_call, {"tokens": 60_000, "heads": 32, "dtype": "int8"}),
    "norm_30k_dk192_dv128": (token_call, {"tokens": 30_000, "head": 192, "v_head": 128}),
    "norm_20k_unaligned": (token_call, {"tokens": 20_000, "heads": 3, "head": 7, "v_head": 5}),
    "norm_5k_ub1024": (token_call, {"tokens": 5_000, "tiling": {"ubSize": 1024}}),
    "norm_20k_blockdim8": (token_call, {"tokens": 20_000, "tiling": {"blockDim": 8}}),
    "norm_60k_h16_910B4": (token_call, {"tokens": 60_000, "heads": 16, "chip": "Ascend910B4"}),
    "norm_50k_h32_A3": (token_call, {"tokens": 50_000, "heads": 32, "chip": "Ascend910_9391"}),
    "nz_fully_700": (token_call, {"tokens": 700, "cache_mode": "PA_NZ"}),
    "nz_50k": (token_call, {"tokens": 50_000, "cache_mode": "PA_NZ"}),
    "nz_100k_h16_neg50": (token_call, {"tokens": 100_000, "heads": 16, "negative": 0.5, "cache_mode": "PA_NZ"}),
    "nz_30k_h32_d256": (token_call, {"tokens": 30_000, "heads": 32, "head": 256, "cache_mode": "PA_NZ"}),
    "nz_10k_chunked_h64_d512": (token_call, {"tokens": 10_000, "heads": 64, "head": 512, "cache_mode": "PA_NZ"}),
    "nz_40k_bf16_i64": (token_call, {"tokens": 40_000, "cache_mode": "PA_NZ", "dtype": "bf16", "slot_dtype": "int64"}),
    "keyonly_100k_i64": (token_call, {"tokens": 100_000, "key_only": True, "slot_dtype": "int64"}),
    "keyonly_50k_h32_d256": (token_call, {"tokens": 50_000, "heads": 32, "head": 256, "key_only": True}),
    "nct_40k": (token_call, {"tokens": 40_000, "nct": True}),
    "nct_30k_h32": (token_call, {"tokens": 30_000, "heads": 32, "nct": True}),
    "nct_keyonly_40k": (token_call, {"tokens": 40_000, "nct": True, "key_only": True}),
    "alibi_b16": (compress_call, {"mode": "Alibi", "batch": 16, "seq": 2048}),
    "alibi_b64_varied": (compress_call, {"mode": "Alibi", "batch": 64, "seq": 4096, "spread": 0.8, "window": 0.5}),
    "alibi_b128": (compress_call, {"mode": "Alibi", "batch": 128, "seq": 8192, "window": 0.5}),
    "alibi_b2000_varied": (compress_call, {"mode": "Alibi", "batch": 2000, "seq": 512, "spread": 0.3}),
    "rope_b8": (compress_call, {"mode": "Rope", "batch": 8, "seq": 2048, "window": 0.05}),
    "rope_b32": (compress_call, {"mode": "Rope", "batch": 32, "seq": 4096, "window": 0.02, "offset": 0.5}),
    "rope_b32_varied": (compress_call, {"mode": "Rope", "batch": 32, "seq": 4096, "spread": 0.9, "window": 0.02,
                                        "offset": 0.5}),
    "rope_b4_nowindow": (compress_call, {"mode": "Rope", "batch": 4, "seq": 16384, "window": 0.0}),
    "rope_b256_h16": (compress_call, {"mode": "Rope", "batch": 256, "heads": 16, "seq": 512, "window": 0.1,
                                      "offset": 0.2}),
    "rope_b800_varied": (compress_call, {"mode": "Rope", "batch": 800, "seq": 256, "spread": 0.5, "window": 0.1,
                                         "offset": 0.3}),
    "omni_b16": (compress_call, {"mode": "Omni", "batch": 16, "seq": 4096, "window": 0.3}),
    "omni_b64": (compress_call, {"mode": "Omni", "batch": 64, "seq": 8192, "window": 0.1}),
    "omni_b64_varied_neg": (compress_call, {"mode": "Omni", "batch": 64, "seq": 8192, "spread": 0.9, "window": 0.1,
                                            "negative": 0.2}),
    "omni_b24_h32_varied": (compress_call, {"mode": "Omni", "batch": 24, "heads": 32, "seq": 2048, "spread": 0.5,
                                            "window": 0.2, "negative": 0.1}),
    "omni_b1600": (compress_call, {"mode": "Omni", "batch": 1600, "seq": 128, "window": 0.2}),
    "rope_b2_long": (compress_call, {"mode": "Rope", "batch": 2, "seq": 200_000, "window": 0.001, "offset": 0.5}),
    "omni_b3_long": (compress_call, {"mode": "Omni", "batch": 3, "seq": 100_000, "window": 0.01}),
    "alibi_b4_long": (compress_call, {"mode": "Alibi", "batch": 4, "seq": 100_000, "window": 0.8}),
}

CHECK_SEED = 2026112473  # session 7's checking draw, fixed before the set was drawn or run
CHECK_CONFIGS = 14


def fresh_check(seed: int = CHECK_SEED, count: int = CHECK_CONFIGS) -> dict:
    """name -> (builder, arguments): *count* calls drawn at random, half token templates, half compress.
    Token: 2k-100k tokens; heads in {1, 4, 8, 16, 32}; head in {64, 128, 256} (value head the same, or 128
    one time in six); Norm / PA_NZ / Nct; key only one time in six; fp16, bf16 or int8 (not PA_NZ);
    int32 or int64 slots; random slots, sequential one time in four; negative slots (up to 40%) one time in
    four, trailing padding (up to 40%) one time in six; the chip from CHIPS. Compress: Alibi / Rope / Omni;
    batch in {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}, seq lengths around 128-8192 (spread up to 0.9 one
    time in two), heads in {1, 4, 8, 16}, window 0.01-0.8 of the length, offset 0.1-0.6; negative tasks (up
    to 20%) one time in four. Redrawn while over 600k copied rows (token count x heads / 8, or the compress
    tasks' sequence rows / 8)."""
    rng = np.random.default_rng(seed)
    out = {}
    while len(out) < count:
        chip = CHIPS[int(rng.integers(0, len(CHIPS)))]
        if len(out) % 2 == 0:
            mode = ["Norm", "PA_NZ", "Nct"][int(rng.integers(0, 3))]
            heads = int(rng.choice([1, 4, 8, 16, 32]))
            head = int(rng.choice([64, 128, 256]))
            a = {"tokens": int(rng.integers(2000, 100_001)), "heads": heads, "head": head, "chip": chip,
                 "v_head": 128 if rng.random() < 1 / 6 else head, "key_only": bool(rng.random() < 1 / 6),
                 "dtype": ["fp16", "bf16"][int(rng.integers(0, 2))] if mode == "PA_NZ" or rng.random() < 0.75 else "int8",
                 "slot_dtype": ["int32", "int64"][int(rng.integers(0, 2))],
                 "order": "sequential" if rng.random() < 0.25 else "random",
                 "negative": float(rng.uniform(0, 0.4)) if rng.random() < 0.25 else 0.0,
                 "padding": float(rng.uniform(0, 0.4)) if rng.random() < 1 / 6 else 0.0, "seed": int(rng.integers(1 << 30))}
            if a["key_only"]:
                a["v_head"] = head
            if mode == "PA_NZ":
                a["cache_mode"] = "PA_NZ"
            elif mode == "Nct":
                a["nct"] = True
            rows = a["tokens"] * heads / 8
            name, build = f"draw{len(out)}_{mode.lower()}_{a['tokens'] // 1000}k_h{heads}_d{head}", token_call
        else:
            mode = ["Alibi", "Rope", "Omni"][int(rng.integers(0, 3))]
            a = {"mode": mode, "batch": int(rng.choice([2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])),
                 "heads": int(rng.choice([1, 4, 8, 16])), "seq": int(rng.integers(128, 8193)),
                 "spread": float(rng.uniform(0, 0.9)) if rng.random() < 0.5 else 0.0,
                 "window": float(rng.uniform(0.01, 0.8)), "offset": float(rng.uniform(0.1, 0.6)),
                 "negative": float(rng.uniform(0, 0.2)) if rng.random() < 0.25 else 0.0, "chip": chip,
                 "seed": int(rng.integers(1 << 30))}
            rows = a["batch"] * a["heads"] * a["seq"] / 8
            name, build = f"draw{len(out)}_{mode.lower()}_b{a['batch']}_h{a['heads']}_s{a['seq']}", compress_call
        if rows <= 600_000:
            out[name] = (build, a)
    return out


#: Calls timing mode would take minutes to hours on: the estimate's own cost.
HUGE = {"norm_4M_neg10": (token_call, {"tokens": 4_000_000, "negative": 0.1}),
        "nz_4M_h32": (token_call, {"tokens": 4_000_000, "heads": 32, "cache_mode": "PA_NZ"}),
        "keyonly_4M_i64_seq": (token_call, {"tokens": 4_000_000, "key_only": True, "slot_dtype": "int64",
                                            "order": "sequential"}),
        "norm_4M_h128_d576": (token_call, {"tokens": 4_000_000, "heads": 128, "head": 576}),
        "norm_2k_h128_d576_ub256": (token_call, {"tokens": 2000, "heads": 128, "head": 576,
                                                 "tiling": {"ubSize": 256}}),
        "rope_b2_4M": (compress_call, {"mode": "Rope", "batch": 2, "seq": 2_000_000, "window": 0.001,
                                       "offset": 0.5}),
        "omni_b20000_h16": (compress_call, {"mode": "Omni", "batch": 20_000, "heads": 16, "seq": 200,
                                            "spread": 0.5, "window": 0.1}),
        "alibi_b40000": (compress_call, {"mode": "Alibi", "batch": 40_000, "seq": 64, "window": 0.5})}


def run_case(build, args: dict) -> dict:
    call = build(**args)
    gc.collect()  # the previous case's trace is garbage: do not time its collection
    t0 = time.perf_counter()
    est = scatter_pa_kv_cache(**call, mode="estimate")
    t1 = time.perf_counter()
    timing = scatter_pa_kv_cache(**call, mode="timing")
    t2 = time.perf_counter()
    return {"template": est.extra["template"], "timing": timing.cycles, "estimate": est.cycles,
            "error_pct": 100 * (est.cycles - timing.cycles) / timing.cycles, "wall_timing_s": t2 - t1,
            "wall_estimate_s": t1 - t0, "sample": est.extra["estimate"].sample}


def huge_case(build, args: dict) -> dict:
    call = build(**args)
    gc.collect()
    t0 = time.perf_counter()
    res = scatter_pa_kv_cache(**call, mode="estimate")
    wall = time.perf_counter() - t0
    tracemalloc.start()
    scatter_pa_kv_cache(**call, mode="estimate")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    classes = res.extra["estimate"].classes
    work = (f"{classes['tokens_copied'][0]} tokens copied" if "tokens_copied" in classes else
            f"{classes['compress_tasks'][0]} tasks, {classes['rows_written'][0]} rows written")
    return {"cycles": res.cycles, "time_us": res.time_us, "wall_s": wall, "peak_mb": peak / 2**20, "work": work,
            "sample": res.extra["estimate"].sample, "advice": res.timeout.advice}


def main(words: list[str]) -> None:
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, numpy {np.__version__}")
    print(f"{'case':24s} {'template':9s} {'timing':>10s} {'estimate':>10s} {'error':>8s} {'timing s':>8s} "
          f"{'est. s':>6s}  sample")
    drawn = fresh_check()
    print(f"tuning set: GRID ({len(GRID)}; its seed-13 halves were both looked at); checking set: {len(drawn)} "
          f"drawn with seed {CHECK_SEED}")
    half_of = {name: "tune" for name in GRID} | {name: "check" for name in drawn}
    errors, saved = [], []
    for name, (build, args) in (GRID | drawn).items():
        if words and not any(w in name or w == half_of[name] for w in words):
            continue
        r = run_case(build, args)
        errors.append((half_of[name], r["error_pct"]))
        saved.append((half_of[name], name, r["estimate"], r["timing"], r["error_pct"]))
        print(f"{half_of[name]:5s} {name:24s} {r['template']:9s} {r['timing']:10d} {r['estimate']:10d} {r['error_pct']:+7.2f}% "
              f"{r['wall_timing_s']:8.1f} {r['wall_estimate_s']:6.2f}  {r['sample']}",
              flush=True)
    stats = summary(errors)
    if not words or set(words) <= {"tune", "check"}:  # a whole set (or both): the README rows render from it
        which = "all" if not words else "+".join(words)
        if which != "all":  # the other set of a saved run of this seed
            saved, old = with_saved_other("estimate_accuracy_spkc", set(words), saved, CHECK_SEED)
            if old is not None:
                stats, which = summary([(r[0], r[4]) for r in saved]), "all"
        save_halves("estimate_accuracy_spkc", stats, saved, which, seed=CHECK_SEED)
    for name, (build, args) in HUGE.items():
        if words and not any(w in name for w in words):
            continue
        r = huge_case(build, args)
        print(f"{name}: {r['cycles']} cycles ({r['time_us']:.0f} us modeled), {r['work']}; estimate "
              f"{r['wall_s']:.2f} s wall, peak {r['peak_mb']:.0f} MB ({r['sample']}); {r['advice']}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
