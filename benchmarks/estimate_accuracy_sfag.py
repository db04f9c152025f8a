"""SparseFlashAttentionGrad estimate mode against timing mode: relative error and wall time per case.

The probe path is forced (``force_probes``; small launches otherwise run whole, exactly). TUNE lists the
cases the probe design (4 companion cores, 64-slot probe tokens, the marginal-token fit) was chosen on;
CHECK lists cases never used to choose anything: their errors are the ones the README quotes.

    python benchmarks/estimate_accuracy_sfag.py [--check-only]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from npusim import TensorSpec  # noqa: E402
from npusim.chip import chip  # noqa: E402
from ops.sparse_flash_attention_grad.api import sparse_flash_attention_grad  # noqa: E402
from ops.sparse_flash_attention_grad.estimate import estimate_counts, estimate_sfag  # noqa: E402
from ops.sparse_flash_attention_grad.tiling import sfag_tiling  # noqa: E402
from tests.ops.sfag_cases import make_case  # noqa: E402

TUNE = [dict(B=1, S1=48, S2=512, N1=16, bs=8, max_slots=64),
        dict(B=2, S1=30, S2=300, N1=32, bs=64, max_slots=8, mode=3),
        dict(B=1, S1=40, S2=256, N1=8, bs=1, max_slots=200, dtype="bf16")]
CHECK = [dict(B=1, S1=72, S2=1024, N1=8, bs=16, max_slots=40, mode=3),
         dict(B=3, S1=20, S2=600, N1=64, bs=32, max_slots=12),
         dict(B=1, S1=50, S2=300, N1=4, bs=1, max_slots=300, dtype="bf16"),
         dict(layout="TND", seq_q=[30, 20, 26], seq_kv=[200, 700, 64], N1=16, bs=8, max_slots=50),
         dict(B=1, S1=4, S2=2048, N1=16, bs=64, max_slots=30),
         dict(B=1, S1=96, S2=4096, N1=2, bs=64, max_slots=24, rope=False)]


def measure(cfg: dict) -> dict:
    args, kw, prob = make_case(**cfg)
    spec_args = tuple(TensorSpec(a.shape, a.dtype) if i != 3 else a for i, a in enumerate(args))
    kw = dict(kw, **{n: TensorSpec(kw[n].shape, kw[n].dtype) for n in ("query_rope", "key_rope") if kw[n] is not None})
    spec = chip("Ascend910B2")
    t0 = time.perf_counter()
    counts = estimate_counts(prob)
    est = estimate_sfag(prob, spec, sfag_tiling(prob, spec, None, counts), counts, force_probes=True)
    t_est = time.perf_counter() - t0
    t0 = time.perf_counter()
    tim = sparse_flash_attention_grad(*spec_args, **kw, mode="timing")
    t_tim = time.perf_counter() - t0
    return {"case": cfg, "estimate_us": est.time_us, "timing_us": tim.time_us,
            "error_pct": 100 * (est.time_us / tim.time_us - 1), "estimate_wall_s": t_est, "timing_wall_s": t_tim}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check-only", action="store_true")
    a = ap.parse_args(argv)
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    rows = []
    for name, cases in (("tune", TUNE), ("check", CHECK)):
        if name == "tune" and a.check_only:
            continue
        for cfg in cases:
            r = measure(cfg)
            rows.append((name, r))
            print(f"{name:5s} {r['error_pct']:+6.2f}%  est {r['estimate_us']:9.1f} us ({r['estimate_wall_s']:.1f} s)  "
                  f"timing {r['timing_us']:9.1f} us ({r['timing_wall_s']:.1f} s)  {r['case']}")
    for name in ("tune", "check"):
        errs = [abs(r["error_pct"]) for n, r in rows if n == name]
        if errs:
            print(f"{name}: max |error| {max(errs):.2f}%, mean {sum(errs) / len(errs):.2f}% over {len(errs)} cases")
    return rows


if __name__ == "__main__":
    main()
