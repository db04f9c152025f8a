"""SparseFlashAttentionGrad estimate mode against timing mode, and the estimate's cost on the largest shape.

The tuning set is the fixed GRID of 60 configurations: every one of them was looked at while the model was
built (an earlier split of the first 16 into halves, benchmarks/halves.py seed 13, had its checking half looked
at too, docs/sfag.md; then session 5's checking half, seed 20261124, looked at while the sequence probe was built
in session 6, session 6's, seed 20261126, looked at while its budget and bandwidth were changed in session 7, and
session 7's, seed 20261127, run once in session 8 and then looked at while the one-core budget was added; session 8's,
seed 20261128, run once in session 8 and tuning since session 9 changed the model), so all 60 count as tuning. The checking half is drawn fresh: CHECK_COUNT configurations from CHECK_SEED (printed)
over the same kinds of shapes, plus the first CHECK_OVER later draws over the sequence probe's budget
(fresh_checking_cases); the model was frozen before they were drawn, no model change was chosen on them, and the
README quotes them. The probe path is forced (``force_probes``; small launches otherwise run whole, exactly).
Then the estimate of S1 = S2 = 128K, N1 = 128 (32 blocks of 64 per token) is timed in CPU seconds (target < 1 s)
in a fresh process, with the load average beside it.
Results: benchmarks/results/estimate_accuracy_sfag.json (README performance rows, ``python -m studies``).

    python benchmarks/estimate_accuracy_sfag.py [--half tune|check|all] [--no-save]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from child_run import peak_mb, run_child
from halves import summary
from results import save

from npusim import TensorSpec
from npusim.chip import chip
from ops.sparse_flash_attention_grad.api import sparse_flash_attention_grad
from ops.sparse_flash_attention_grad.estimate import (
    SEQUENCE_BLOCKS,
    estimate_counts,
    estimate_sfag,
    sequence_cores,
    token_work,
)
from ops.sparse_flash_attention_grad.tiling import sfag_tiling
from tests.ops.sfag_cases import make_case

# make_case keywords; tokens draw 1..max_slots random blocks, so max_slots * bs / 512 is the widest token's chunks
GRID = [
    {"seed": 1, "B": 1, "S1": 48, "S2": 512, "N1": 16, "bs": 8, "max_slots": 64},
    {"seed": 2, "B": 2, "S1": 30, "S2": 300, "N1": 32, "bs": 64, "max_slots": 8, "mode": 3},
    {"seed": 3, "B": 1, "S1": 40, "S2": 256, "N1": 8, "bs": 1, "max_slots": 200, "dtype": "bf16"},
    {"seed": 4, "B": 1, "S1": 32, "S2": 2048, "N1": 16, "bs": 16, "max_slots": 100},
    {"seed": 5, "B": 2, "S1": 16, "S2": 4096, "N1": 8, "bs": 64, "max_slots": 32, "mode": 3},
    {"seed": 6, "B": 1, "S1": 24, "S2": 1500, "N1": 32, "bs": 32, "max_slots": 40, "dtype": "bf16"},
    {"seed": 7, "layout": "TND", "seq_q": [10, 40, 6], "seq_kv": [128, 900, 3000], "N1": 16, "bs": 8, "max_slots": 150},
    {"seed": 8, "B": 1, "S1": 12, "S2": 1200, "N1": 4, "bs": 1, "max_slots": 700},
    {"seed": 9, "B": 1, "S1": 100, "S2": 800, "N1": 2, "bs": 16, "max_slots": 20, "rope": False},
    {"seed": 10, "B": 4, "S1": 8, "S2": 640, "N1": 64, "bs": 32, "max_slots": 16},
    {"seed": 11, "B": 1, "S1": 6, "S2": 8192, "N1": 16, "bs": 64, "max_slots": 64},
    {"seed": 12, "B": 1, "S1": 60, "S2": 600, "N1": 128, "bs": 64, "max_slots": 6, "mode": 3},
    {"seed": 13, "B": 1, "S1": 72, "S2": 1024, "N1": 8, "bs": 16, "max_slots": 40, "mode": 3},
    {"seed": 14, "layout": "TND", "seq_q": [30, 20, 26], "seq_kv": [200, 700, 64], "N1": 16, "bs": 8, "max_slots": 50,
     "dtype": "bf16"},
    {"seed": 15, "B": 1, "S1": 96, "S2": 4096, "N1": 2, "bs": 64, "max_slots": 24, "rope": False},
    {"seed": 16, "B": 3, "S1": 20, "S2": 600, "N1": 64, "bs": 32, "max_slots": 12},
    # session 5's checking half (fresh_checking_cases(20261124)), looked at in session 6: tuning since
    {"seed": 1000, "B": 3, "S1": 56, "S2": 1254, "N1": 32, "bs": 8, "max_slots": 149},
    {"seed": 1001, "B": 1, "S1": 69, "S2": 3708, "N1": 64, "bs": 8, "max_slots": 121, "mode": 3},
    {"seed": 1002, "B": 3, "S1": 7, "S2": 1020, "N1": 1, "bs": 1, "max_slots": 271, "dtype": "bf16"},
    {"seed": 1003, "layout": "TND", "seq_q": [27, 7, 12], "seq_kv": [1207, 1985, 1266],
     "N1": 1, "bs": 16, "max_slots": 96, "mode": 3, "dtype": "bf16"},
    {"seed": 1004, "B": 2, "S1": 8, "S2": 6149, "N1": 1, "bs": 32, "max_slots": 30, "mode": 3, "dtype": "bf16"},
    {"seed": 1005, "B": 1, "S1": 27, "S2": 7910, "N1": 1, "bs": 8, "max_slots": 183},
    {"seed": 1006, "B": 3, "S1": 62, "S2": 934, "N1": 1, "bs": 64, "max_slots": 18},
    {"seed": 1007, "B": 2, "S1": 71, "S2": 7934, "N1": 1, "bs": 1, "max_slots": 1954, "dtype": "bf16"},
    {"seed": 1008, "layout": "TND", "seq_q": [26, 19, 18], "seq_kv": [2471, 2864, 2969],
     "N1": 2, "bs": 16, "max_slots": 20},
    {"seed": 1009, "B": 1, "S1": 27, "S2": 3851, "N1": 2, "bs": 64, "max_slots": 19},
    # session 6's checking half (fresh_checking_cases(20261126)), looked at in session 7 while the sequence probe's
    # core choice and bandwidth were changed (2002 and 2007 were over its old budget): tuning since
    {"seed": 2000, "layout": "TND", "seq_q": [22, 21, 12], "seq_kv": [998, 1796, 1522], "N1": 8, "bs": 1,
     "max_slots": 787},
    {"seed": 2001, "B": 2, "S1": 73, "S2": 6232, "N1": 32, "bs": 8, "max_slots": 171},
    {"seed": 2002, "B": 1, "S1": 34, "S2": 1833, "N1": 128, "bs": 1, "max_slots": 1140, "mode": 3},
    {"seed": 2003, "B": 2, "S1": 26, "S2": 6762, "N1": 4, "bs": 32, "max_slots": 31},
    {"seed": 2004, "layout": "TND", "seq_q": [36, 6, 28], "seq_kv": [872, 866, 1366], "N1": 16, "bs": 32,
     "max_slots": 16},
    {"seed": 2005, "B": 2, "S1": 94, "S2": 1189, "N1": 2, "bs": 8, "max_slots": 195},
    {"seed": 2006, "B": 1, "S1": 91, "S2": 5094, "N1": 64, "bs": 64, "max_slots": 25, "dtype": "bf16"},
    {"seed": 2007, "B": 2, "S1": 92, "S2": 8173, "N1": 2, "bs": 64, "max_slots": 27},
    {"seed": 2008, "B": 3, "S1": 42, "S2": 6337, "N1": 8, "bs": 8, "max_slots": 92, "mode": 3},
    {"seed": 2009, "B": 1, "S1": 60, "S2": 2416, "N1": 1, "bs": 1, "max_slots": 1020, "mode": 3, "dtype": "bf16"},
    # session 7's checking set (fresh_checking_cases(20261127, over=4)), run once in session 8 (max 10.93%), then
    # looked at while the sequence probe's one-core budget was added: tuning since
    {"seed": 2000, "layout": "TND", "seq_q": [33, 21], "seq_kv": [2515, 1007], "N1": 64, "bs": 32, "max_slots": 14},
    {"seed": 2001, "B": 2, "S1": 19, "S2": 4387, "N1": 4, "bs": 64, "max_slots": 29, "mode": 3, "rope": False},
    {"seed": 2002, "B": 3, "S1": 14, "S2": 4722, "N1": 128, "bs": 1, "max_slots": 1949, "mode": 3},
    {"seed": 2003, "B": 3, "S1": 15, "S2": 7508, "N1": 16, "bs": 16, "max_slots": 14, "mode": 3},
    {"seed": 2004, "B": 1, "S1": 93, "S2": 648, "N1": 64, "bs": 32, "max_slots": 18, "rope": False},
    {"seed": 2005, "B": 2, "S1": 50, "S2": 3541, "N1": 32, "bs": 16, "max_slots": 126, "mode": 3, "dtype": "bf16"},
    {"seed": 2006, "B": 2, "S1": 21, "S2": 4946, "N1": 2, "bs": 32, "max_slots": 53, "dtype": "bf16"},
    {"seed": 2007, "layout": "TND", "seq_q": [35, 18, 38], "seq_kv": [1362, 580, 745],
     "N1": 32, "bs": 32, "max_slots": 62, "rope": False},
    {"seed": 2009, "layout": "TND", "seq_q": [34, 35], "seq_kv": [377, 137], "N1": 32, "bs": 1, "max_slots": 1227},
    {"seed": 2021, "B": 1, "S1": 91, "S2": 5378, "N1": 64, "bs": 1, "max_slots": 1996, "mode": 3},
    {"seed": 2047, "layout": "TND", "seq_q": [23, 23, 6], "seq_kv": [2079, 2388, 1165], "N1": 2, "bs": 1,
     "max_slots": 1807},
    {"seed": 2059, "layout": "TND", "seq_q": [34, 21, 18], "seq_kv": [663, 1136, 825], "N1": 2, "bs": 1,
     "max_slots": 1091},
    # session 8's checking set (fresh_checking_cases(20261128, over=4)), run once in session 8 (max 1.01%); session 9's
    # model changes (zero-fill/post, BOUND_SLACK, the lone probe) were not chosen on it: tuning since (brief: a new draw
    # after every model change)
    {"seed": 2000, "B": 3, "S1": 98, "S2": 5577, "N1": 16, "bs": 1, "max_slots": 894},
    {"seed": 2001, "B": 3, "S1": 87, "S2": 6832, "N1": 16, "bs": 16, "max_slots": 33, "dtype": "bf16"},
    {"seed": 2002, "B": 3, "S1": 54, "S2": 470, "N1": 1, "bs": 64, "max_slots": 14},
    {"seed": 2003, "layout": "TND", "seq_q": [33, 14, 6], "seq_kv": [1689, 433, 394], "N1": 1, "bs": 64, "max_slots": 19,
     "mode": 3},
    {"seed": 2004, "B": 2, "S1": 24, "S2": 3981, "N1": 16, "bs": 16, "max_slots": 32, "dtype": "bf16"},
    {"seed": 2005, "B": 3, "S1": 71, "S2": 1292, "N1": 2, "bs": 32, "max_slots": 4},
    {"seed": 2006, "layout": "TND", "seq_q": [10, 4], "seq_kv": [730, 1475], "N1": 8, "bs": 16, "max_slots": 22,
     "dtype": "bf16", "rope": False},
    {"seed": 2007, "layout": "TND", "seq_q": [25, 13, 28], "seq_kv": [969, 2005, 2240], "N1": 64, "bs": 64,
     "max_slots": 23, "mode": 3},
    {"seed": 2015, "B": 2, "S1": 61, "S2": 3840, "N1": 32, "bs": 1, "max_slots": 1206},
    {"seed": 2018, "layout": "TND", "seq_q": [40, 31, 23], "seq_kv": [775, 1659, 252], "N1": 4, "bs": 1, "max_slots": 1609,
     "dtype": "bf16", "rope": False},
    {"seed": 2019, "B": 3, "S1": 61, "S2": 2741, "N1": 32, "bs": 1, "max_slots": 982, "rope": False},
    {"seed": 2025, "B": 3, "S1": 62, "S2": 1248, "N1": 32, "bs": 1, "max_slots": 688},
]
CHECK_SEED = 20261129  # the checking half's draw (session 9, after its model changes; 20261128's is tuning now)
CHECK_COUNT = 8  # configurations as drawn ...
CHECK_OVER = 4  # ... and the first this many later draws that are over the sequence probe's budget (over_budget)
HUGE_T = 128 * 1024  # S1 = S2 of the speed case (issue 11: estimate under a second)


def fresh_checking_cases(seed: int = CHECK_SEED, count: int = CHECK_COUNT, over: int = 0) -> list:
    """*count* random make_case configurations over GRID's kinds of shapes: BSND (B 1-3) or TND (2-3
    batches), fp16 or bf16, rope or not, sparse_mode 0 or 3, every block size, N1 up to 128 with at most
    8192 query rows (T1 * N1, so a case stays seconds), widest token of up to 4 chunks; then the first *over*
    later draws of the same stream whose work is over the sequence probe's budget even for one core (over_budget),
    so that the checking set holds calls whose slowest core alone is over that budget (since session 8 estimated by
    a one-core probe up to SEQUENCE_ONE_BLOCKS, by the token sum beyond) whatever the first draws give."""
    rng = np.random.default_rng(seed)
    out = []
    extra = 0
    for i in range(count + 200 * over):  # draws past count are kept only when over the old budget
        if i >= count and extra >= over:
            break
        bs = int(rng.choice([1, 8, 16, 32, 64]))
        cfg = {"seed": 2000 + i}
        if rng.random() < 0.3:
            nb = int(rng.integers(2, 4))
            cfg.update(layout="TND", seq_q=[int(x) for x in rng.integers(4, 41, nb)],
                       seq_kv=[int(x) for x in rng.integers(64, 3001, nb)])
            t1 = sum(cfg["seq_q"])
        else:
            cfg.update(B=int(rng.integers(1, 4)), S1=int(rng.integers(6, 101)), S2=int(rng.integers(256, 8193)))
            t1 = cfg["B"] * cfg["S1"]
        n1 = int(rng.choice([1, 2, 4, 8, 16, 32, 64, 128]))
        while n1 > 1 and n1 * t1 > 8192:
            n1 //= 2
        cfg["N1"] = n1
        cfg["bs"] = bs
        cfg["max_slots"] = max(1, min(2048, int(rng.uniform(0.1, 4.0) * 512 / bs)))
        if rng.random() < 0.3:
            cfg["mode"] = 3
        if rng.random() < 0.3:
            cfg["dtype"] = "bf16"
        if rng.random() < 0.2:
            cfg["rope"] = False
        if i < count:
            out.append(cfg)
        elif over_budget(cfg):
            out.append(cfg)
            extra += 1
    return out


def over_budget(cfg: dict) -> bool:
    """Whether even the heaviest core's work (gathered blocks + 16 per chunk) is over the sequence probe's budget
    (SEQUENCE_BLOCKS), so that the estimate runs that core alone or keeps the token sum. Only the indices are read."""
    _, _, prob = make_case(**cfg, forward=False)
    counts = estimate_counts(prob)
    work = token_work(prob, counts)
    used = sfag_tiling(prob, chip("Ascend910B2"), None, counts).blockDim
    load = np.bincount(np.arange(prob.T1) % used, weights=work["blocks"] + 16 * work["chunks"], minlength=used)
    return float(load.max()) > SEQUENCE_BLOCKS


def measure(cfg: dict) -> dict:
    args, kw, prob = make_case(**cfg)
    spec_args = tuple(TensorSpec(a.shape, a.dtype) if i != 3 else a for i, a in enumerate(args))
    kw = dict(kw, **{n: TensorSpec(kw[n].shape, kw[n].dtype) for n in ("query_rope", "key_rope") if kw[n] is not None})
    spec = chip("Ascend910B2")
    t0 = time.process_time()
    counts = estimate_counts(prob)
    est = estimate_sfag(prob, spec, sfag_tiling(prob, spec, None, counts), counts, force_probes=True)
    t_est = time.process_time() - t0
    t0 = time.process_time()
    tim = sparse_flash_attention_grad(*spec_args, **kw, mode="timing", trace="none")
    t_tim = time.process_time() - t0
    kept = sequence_cores(prob, est.extra["work"], est.extra["estimate"].per_core_cycles, est.block_dim).size
    return {"case": cfg, "sequence_cores": int(kept) if est.extra["sequence_probe"] is not None else 0, "estimate_us": est.time_us, "timing_us": tim.time_us,
            "error_pct": 100 * (est.time_us / tim.time_us - 1), "estimate_cpu_s": t_est, "timing_cpu_s": t_tim,
            "widest_chunks": int(est.extra["work"]["chunks"].max())}


_HUGE_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from estimate_accuracy_sfag import huge_estimate
first = huge_estimate()
first["cpu_s_warm"] = huge_estimate()["cpu_s"]
print(json.dumps(first))
"""


def huge_estimate_fresh() -> dict:
    """huge_estimate in a fresh Python process (its first call, as a user's, and its own peak memory; a second call
    in the same process gives cpu_s_warm). Session 6 timed it inside this benchmark's long process, after the
    accuracy cases."""
    return run_child(_HUGE_CHILD, [os.path.dirname(os.path.abspath(__file__))])


def huge_estimate() -> dict:
    """The estimate of S1 = S2 = 128K, N1 = 128, D = 512 + 64, 32 blocks of 64 per token (broadcast indices)."""
    t1 = HUGE_T
    row = np.full(2048, -1, np.int64)
    row[:32] = np.arange(32) * 7
    idx = np.broadcast_to(row, (1, t1, 1, 2048))
    q, kv = TensorSpec((1, t1, 128, 512), np.float16), TensorSpec((1, t1, 1, 512), np.float16)
    sm = TensorSpec((1, 1, t1, 128), np.float32)
    load0 = os.getloadavg()[0]
    c0, w0 = time.process_time(), time.perf_counter()
    res = sparse_flash_attention_grad(q, kv, kv, idx, q, q, sm, sm, query_rope=TensorSpec((1, t1, 128, 64), np.float16),
                                      key_rope=TensorSpec((1, t1, 1, 64), np.float16), sparse_block_size=64,
                                      mode="estimate")
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return {"modeled_s": res.time_us * 1e-6, "cpu_s": cpu, "wall_s": wall, "load_avg": [load0, os.getloadavg()[0]],
            "peak_mb": peak_mb()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--half", choices=("tune", "check", "all"), default="all")
    ap.add_argument("--no-save", action="store_true", help="print only (a partial run must not replace the results)")
    a = ap.parse_args(argv)
    fresh = fresh_checking_cases(over=CHECK_OVER)
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; tuning: the {len(GRID)} GRID configurations; "
          f"checking: {len(fresh)} drawn with seed {CHECK_SEED}")
    plan = ([("tune", c) for c in GRID] if a.half in ("tune", "all") else []) + \
        ([("check", c) for c in fresh] if a.half in ("check", "all") else [])
    rows, errors = [], []
    for half, cfg in plan:
        r = measure(cfg)
        r["half"] = half
        rows.append(r)
        errors.append((half, r["error_pct"]))
        print(f"{half:5s} {r['error_pct']:+6.2f}%  est {r['estimate_us']:9.1f} us ({r['estimate_cpu_s']:.1f} s CPU)  "
              f"timing {r['timing_us']:9.1f} us ({r['timing_cpu_s']:.1f} s CPU)  chunks <= {r['widest_chunks']}  "
              f"sequence cores {r['sequence_cores']}  "
              f"{r['case']}", flush=True)
    summary(errors)
    h = huge_estimate_fresh()
    print(f"estimate S1 = S2 = 128K, N1 = 128: {h['modeled_s']:.3f} s modeled; {h['cpu_s']:.2f} s CPU "
          f"({h['cpu_s_warm']:.2f} s CPU on a second call), "
          f"{h['wall_s']:.2f} s wall at load {h['load_avg'][0]:.1f}-{h['load_avg'][1]:.1f}, peak {h['peak_mb']:.0f} MB")
    if a.half == "all" and not a.no_save:
        err = {half: [abs(r["error_pct"]) for r in rows if r["half"] == half] for half in ("tune", "check")}
        save("estimate_accuracy_sfag", {"check_seed": CHECK_SEED, "tune": len(GRID), "check": len(fresh), "rows": rows,
                                        "huge": h,
                                        **{f"{k}_max_pct": max(v) for k, v in err.items()},
                                        **{f"{k}_mean_pct": float(np.mean(v)) for k, v in err.items()}})
    return rows


if __name__ == "__main__":
    main()
