"""Estimate mode vs timing mode for FlashAttentionUnpaddingScoreGradV5: a tuning set and a fresh checking set.

Tuning set: GRID (16 configurations) and the issue's benchmark shape (T = 4096, N = 8, D = 128, causal).
All of them were looked at while the estimate model was changed (an earlier split of GRID into halves
with benchmarks/halves.py's seed 13 had its checking half inspected during that work), so all of them
are tuning configurations now. Checking set: CHECK_CONFIGS configurations drawn at random (fresh_check,
seed CHECK_SEED, printed) from the space of fresh_check's docstring, never run before the model of
estimate.py was fixed. Prints, per configuration, its set, the estimate, the timing-mode time, the error
and the CPU time of each; max and mean absolute error per set (target: every checking configuration
within 3%); then the estimate's CPU time and peak traced memory on the largest legal shapes. Results go
to benchmarks/results/estimate_accuracy_fag.json for the README (``python -m studies``).

    python benchmarks/estimate_accuracy_fag.py [--half tune|check|all] [--no-huge]
"""
from __future__ import annotations

import argparse
import os
import time
import tracemalloc

import ml_dtypes
import numpy as np

from halves import summary
from results import save
from npusim import TensorSpec
from ops.common.masks import compressed_causal_mask
from ops.flash_attention_unpadding_score_grad_v5.api import flash_attention_unpadding_score_grad_v5 as fag

BF16, F16 = ml_dtypes.bfloat16, np.float16
#: (Sq per batch, Skv per batch, N1, N2, D, dtype, sparse_mode or None, options); options: deterministic,
#: pre, next, blockDim
GRID = [
    ([2048], [2048], 8, 8, 128, F16, 2, {}),
    ([3000], [3000], 4, 4, 64, F16, 2, {}),
    ([2000], [2000], 2, 2, 128, F16, None, {}),
    ([2500], [2500], 8, 8, 64, F16, 2, {"deterministic": True}),
    ([1024, 3000], [1024, 3000], 4, 2, 128, BF16, 3, {}),
    ([8192], [8192], 2, 2, 64, F16, 2, {}),
    ([6000], [6000], 1, 1, 128, F16, None, {}),
    ([4096], [4096], 8, 1, 128, F16, 2, {}),
    ([1500] * 4, [1500] * 4, 4, 4, 128, F16, 2, {}),
    ([5000], [5000], 4, 4, 192, F16, 2, {}),
    ([4096], [4096], 2, 2, 256, BF16, None, {}),
    ([3000, 2000], [3000, 2000], 8, 8, 64, F16, 4, {"pre": 512, "next": 0}),
    ([2048], [2048], 16, 16, 128, F16, None, {"deterministic": True}),
    ([16384], [16384], 1, 1, 128, F16, 2, {}),
    ([700] * 8, [700] * 8, 8, 8, 128, F16, 2, {}),
    ([4096], [4096], 8, 8, 128, F16, 2, {"blockDim": 10}),
]
CHECK_ALWAYS = [([4096], [4096], 8, 8, 128, F16, 2, {})]  # the issue's benchmark shape (benchmarks/fag.py): tuning
CHECK_SEED = 20261124  # the session's date, fixed before the checking set was first drawn
CHECK_CONFIGS = 10
MAX_CHECK_BLOCKS = 6000  # 128 x 128 blocks at most per checking configuration (timing mode in ~15 s CPU)


def _blocks(sq, skv, n1, mode, opt) -> int:
    """Approximate 128 x 128 blocks of a configuration (causal halves the square; bands per their width)."""
    total = 0
    for a, b in zip(sq, skv):
        full = -(-a // 128) * -(-b // 128)
        if mode in (2, 3):
            full = full // 2 + -(-min(a, b) // 128)
        elif mode == 4:
            full = -(-a // 128) * min(-(-b // 128), -(-(opt["pre"] + opt["next"]) // 128) + 2)
        total += full
    return total * n1


def fresh_check(seed: int = CHECK_SEED, count: int = CHECK_CONFIGS) -> list:
    """*count* configurations drawn at random: 1-3 batches of 300-6000 tokens (equal q/kv lengths except
    without a mask), N1 in {1, 2, 4, 8, 16}, GQA group 1/2/4 where it divides, D in {64, 128, 192, 256},
    fp16 or bf16, no mask / sparse 2 / 3 / 4 (band of random pre/next), deterministic one time in four, a
    blockDim override (4-23) one time in six; redrawn while over MAX_CHECK_BLOCKS blocks."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        b = int(rng.integers(1, 4))
        sq = [int(x) for x in rng.integers(300, 6001, b)]
        mode = [None, 2, 3, 4][int(rng.integers(0, 4))]
        skv = [int(x) for x in rng.integers(300, 6001, b)] if mode is None else list(sq)
        n1 = int(rng.choice([1, 2, 4, 8, 16]))
        g = int(rng.choice([g for g in (1, 2, 4) if n1 % g == 0]))
        d = int(rng.choice([64, 128, 192, 256]))
        dt = [F16, BF16][int(rng.integers(0, 2))]
        opt = {}
        if mode == 4:
            opt.update(pre=int(rng.integers(128, 2049)), next=int(rng.integers(0, 513)))
        if rng.random() < 0.25:
            opt["deterministic"] = True
        if rng.random() < 1 / 6:
            opt["blockDim"] = int(rng.integers(4, 24))
        if _blocks(sq, skv, n1, mode, opt) <= MAX_CHECK_BLOCKS:
            out.append((sq, skv, n1, n1 // g, d, dt, mode, opt))
    return out


def plan(which: str) -> list:
    """[(set, configuration)]: "tune" (GRID and the benchmark shape), "check" (fresh_check) or "all"."""
    rows = [("tune", c) for c in GRID + CHECK_ALWAYS] if which in ("tune", "all") else []
    return rows + ([("check", c) for c in fresh_check()] if which in ("check", "all") else [])


HUGE = [  # (name, Sq, Skv, N1, N2, D, dtype, sparse_mode, options): large legal shapes, estimate only
    ("T=64K in one batch, N=8, D=128, causal", [1 << 16], [1 << 16], 8, 8, 128, F16, 2, {}),
    ("T=256K in one batch, N=16/2, D=128, causal", [1 << 18], [1 << 18], 16, 2, 128, F16, 2, {}),
    ("T=1M in one batch, N=8, D=128, causal", [1 << 20], [1 << 20], 8, 8, 128, F16, 2, {}),
]


def call(sq, skv, n1, n2, d, dt, mode, opt, run_mode):
    """One call with TensorSpec data inputs in *run_mode*; returns (OpResult, CPU seconds)."""
    t1, t2 = sum(sq), sum(skv)
    q, kv = TensorSpec((t1, n1, d), dt), TensorSpec((t2, n2, d), dt)
    stats = TensorSpec((t1, n1, 8), np.float32)
    kw = dict(softmax_max=stats, softmax_sum=stats, attention_in=q, actual_seq_qlen=np.cumsum(sq).tolist(),
              actual_seq_kvlen=np.cumsum(skv).tolist(), head_num=n1, scale_value=float(1 / np.sqrt(d)),
              deterministic=opt.get("deterministic", False), mode=run_mode,
              tiling={"blockDim": opt["blockDim"]} if "blockDim" in opt else None)
    if mode is not None:
        kw.update(atten_mask=compressed_causal_mask().astype(bool), sparse_mode=mode)
        if "pre" in opt:
            kw.update(pre_tokens=opt["pre"], next_tokens=opt["next"])
    t0 = time.process_time()
    res = fag(q, None, kv, None, kv, q, **kw)
    return res, time.process_time() - t0


def describe(cfg) -> str:
    sq, skv, n1, n2, d, dt, mode, opt = cfg
    seqs = f"{sq[0]}x{len(sq)}" if len(set(sq)) == 1 else "/".join(map(str, sq))
    if list(skv) != list(sq):
        seqs += " kv " + "/".join(map(str, skv))
    extra = ",".join(f"{k}={v}" for k, v in opt.items())
    return f"S {seqs} N {n1}/{n2} D {d} {np.dtype(dt).name} sp {mode} {extra}"


def accuracy(rows) -> list[dict]:
    out, errors = [], []
    print(f"{'half':5s} {'configuration':58s} {'est us':>9} {'timing us':>10} {'err':>7} {'est CPU s':>9} "
          f"{'timing CPU s':>12}")
    for half, cfg in rows:
        try:
            est, te = call(*cfg, "estimate")
            tim, tt = call(*cfg, "timing")
        except Exception as e:  # noqa: BLE001 - a configuration the simulator cannot run is reported, not hidden
            out.append({"half": half, "config": describe(cfg), "error": f"{type(e).__name__}: {e}"[:300]})
            errors.append((half, float("inf")))
            print(f"{half:5s} {describe(cfg):58s} FAILED {type(e).__name__}: {str(e)[:120]}", flush=True)
            continue
        err = 100 * (est.time_us / tim.time_us - 1)
        errors.append((half, err))
        out.append({"half": half, "config": describe(cfg), "estimate_us": est.time_us, "timing_us": tim.time_us,
                    "error_pct": err, "estimate_cpu_s": te, "timing_cpu_s": tt})
        print(f"{half:5s} {describe(cfg):58s} {est.time_us:9.1f} {tim.time_us:10.1f} {err:+6.2f}% {te:9.2f} "
              f"{tt:12.1f}", flush=True)
    summary(errors)
    print("(target: checking half max <= 3%)")
    return out


def huge() -> list[dict]:
    out = []
    for name, *cfg in HUGE:
        res, cpu = call(*cfg, "estimate")
        tracemalloc.start()  # a second call for the memory: tracing slows the run several times
        call(*cfg, "estimate")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out.append({"name": name, "predicted_s": res.time_us * 1e-6, "cpu_s": cpu, "peak_mb": peak / 2 ** 20,
                    "advice": res.timeout.advice})
        print(f"estimate {name}: {res.time_us * 1e-6:.4g} s predicted, {cpu:.2f} s CPU, peak traced "
              f"{peak / 2 ** 20:.0f} MB; {res.timeout.advice}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--half", choices=("tune", "check", "all"), default="all")
    ap.add_argument("--no-huge", action="store_true")
    args = ap.parse_args()
    print(f"tuning set: {len(GRID) + len(CHECK_ALWAYS)} configurations seen while the model changed; checking set: "
          f"{CHECK_CONFIGS} drawn with seed {CHECK_SEED}")
    rows = accuracy(plan(args.half))
    big = [] if args.no_huge else huge()
    if args.half == "all" and not args.no_huge:
        check = [abs(r.get("error_pct", float("inf"))) for r in rows if r["half"] == "check"]
        tune = [abs(r.get("error_pct", float("inf"))) for r in rows if r["half"] == "tune"]
        save("estimate_accuracy_fag", {"rows": rows, "huge": big, "check_max_pct": max(check),
                                       "check_mean_pct": float(np.mean(check)), "tune_max_pct": max(tune),
                                       "check_configs": len(check), "tune_configs": len(tune),
                                       "check_seed": CHECK_SEED, "load_avg": os.getloadavg()})


if __name__ == "__main__":
    main()
