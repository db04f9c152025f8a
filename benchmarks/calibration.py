"""Calibration: fit the launch overhead, print every point old/new and the MAPE per file.

Data (../shared/calibration/):
- fa_forward_910B2.csv, rows with kernel == torch_npu (the CANN FlashAttentionScore family; B=1, N=1,
  D=128, fp16, no mask, Sq = Skv): modeled by FlashAttentionVarLenScore (TND, one batch);
- pfa_infer_910B2.csv (PromptFlashAttention family; B=1, one head, BSH H=D=128, fp16, no mask,
  Sq=3072, Skv as given; the file treats the unnamed A2-class board as Ascend910B2, an assumption):
  modeled by PromptFlashAttentionV2 at the board's precision mode, inner_precise=0 (high precision, fp32
  softmax): the measurement called torch_npu.npu_fused_infer_attention_score without inner_precise, whose
  default is 0 (docs/calibration.md "PFA board file: the precision mode"). The model at inner_precise=1
  (fp16 softmax, the setting calibrated before) is printed beside it for comparison, not fitted.
Every point runs in timing mode on its chip with no launch overhead; the launch overhead enters the
model additively, so its least-squares fit of the relative error has a closed form. One value is fitted
and shipped, on the FA file: LAUNCH_OVERHEAD_S (npusim/calibration.py), for every operator and chip. The
script also prints the fits on the PFA file alone and on both files (diagnostics: they show whether one
constant can serve both), every point with the model before issue 13 ("old", recorded below with its
commit) and now ("new", the shipped parameter), the MAPE per file, and the hand-written PTO kernel's
points for reference (a different schedule, not fitted).

    python benchmarks/calibration.py          # about 2 minutes (the FA S=16384 point dominates)

Saves benchmarks/results/calibration.json; the README row and the table of docs/calibration.md render from it.
"""
from __future__ import annotations

import csv
import io
import platform
from pathlib import Path

import numpy as np

from npusim import TensorSpec
from npusim.calibration import LAUNCH_OVERHEAD_S
from npusim.chip import chip as get_chip
from ops import flash_attention_var_len_score, prompt_flash_attention_v2
from results import save

SHARED = Path(__file__).resolve().parents[2] / "shared" / "calibration"
FA_FILE, PFA_FILE = SHARED / "fa_forward_910B2.csv", SHARED / "pfa_infer_910B2.csv"
# The model before issue 13 (commit 91dd883, launch overhead 22.0 us): docs/calibration.md of that commit
# for the FA points, the table for the PFA points (timing mode on Ascend910B2, inner_precise=1).
OLD_US = {("fa", 1024, 1024): 58.9, ("fa", 4096, 4096): 116.5, ("fa", 16384, 16384): 1124.0,
          ("pfa", 3072, 8192): 193.6, ("pfa", 3072, 16384): 350.6}


def load_points(path: Path) -> list[dict]:
    text = "".join(line for line in path.read_text().splitlines(keepends=True) if not line.startswith("#"))
    return list(csv.DictReader(io.StringIO(text)))


def fa_us_without_launch(chip_name: str, s: int, d: int, n: int) -> float:
    spec = get_chip(chip_name).replace(launch_overhead_cycles=0)
    q = TensorSpec((s, n, d), np.float16)
    res = flash_attention_var_len_score(q, q, q, actual_seq_qlen=[s], actual_seq_kvlen=[s], head_num=n,
                                        scale_value=1 / np.sqrt(d), input_layout="TND", chip=spec, mode="timing")
    return res.time_us


#: the board's PFA precision mode: torch_npu.npu_fused_infer_attention_score's default inner_precise (0 =
#: high precision, fp32 softmax for fp16 inputs), which the measurement did not override
BOARD_PFA_INNER_PRECISE = 0


def pfa_us_without_launch(chip_name: str, sq: int, skv: int, d: int, n: int,
                          inner_precise: int = BOARD_PFA_INNER_PRECISE) -> float:
    spec = get_chip(chip_name).replace(launch_overhead_cycles=0)
    q, kv = TensorSpec((1, sq, n * d), np.float16), TensorSpec((1, skv, n * d), np.float16)
    res = prompt_flash_attention_v2(q, kv, kv, num_heads=n, input_layout="BSH", scale_value=1 / np.sqrt(d),
                                    inner_precise=inner_precise, chip=spec, mode="timing")
    return res.time_us


def fit_launch_overhead_us(measured: np.ndarray, base: np.ndarray) -> float:
    """argmin_L sum(((base + L) / measured - 1)^2) = sum((measured - base) / measured^2) / sum(1 / measured^2)."""
    w = 1.0 / measured ** 2
    return float(np.sum((measured - base) * w) / np.sum(w))


def modeled_points() -> list[tuple]:
    """(file, kernel, Sq, Skv, measured us, model us without launch or None for reference-only rows, model
    us without launch at the other PFA precision mode (inner_precise=1) or None)."""
    rows = []
    for p in load_points(FA_FILE):
        s, d, n = int(p["seq_len"]), int(p["head_dim"]), int(p["heads"])
        base = fa_us_without_launch(p["chip"], s, d, n) if p["kernel"] == "torch_npu" else None
        rows.append(("fa", p["kernel"], s, s, float(p["time_us"]), base, None))
    for p in load_points(PFA_FILE):
        sq, skv, d, n = int(p["q_len"]), int(p["kv_len"]), int(p["head_dim"]), int(p["heads"])
        rows.append(("pfa", p["kernel"], sq, skv, float(p["time_us"]), pfa_us_without_launch(p["chip"], sq, skv, d, n),
                     pfa_us_without_launch(p["chip"], sq, skv, d, n, inner_precise=1)))
    return rows


def slope_us_per_8k(rows: list, col: int) -> float | None:
    """The PFA file's marginal cost of 8192 more keys (board: col 4; model: col 5 or 6), us."""
    pfa = sorted((r for r in rows if r[0] == "pfa"), key=lambda r: r[3])
    if len(pfa) < 2:
        return None
    a, b = pfa[0], pfa[-1]
    return (b[col] - a[col]) / (b[3] - a[3]) * 8192


def main() -> None:
    print(f"machine: {platform.machine()}, Python {platform.python_version()}; data: {FA_FILE.name}, {PFA_FILE.name}")
    rows = modeled_points()
    fitted = {}
    for file in ("fa", "pfa", "both"):
        fit = [r for r in rows if (file == "both" or r[0] == file) and r[5] is not None]
        fitted[file] = fit_launch_overhead_us(np.array([r[4] for r in fit]), np.array([r[5] for r in fit]))
    launch = LAUNCH_OVERHEAD_S * 1e6
    print(f"fitted launch overhead, FA file: {fitted['fa']:.2f} us (shipped LAUNCH_OVERHEAD_S = {launch:.2f} us, "
          "every operator)")
    print(f"diagnostic fits: PFA file alone {fitted['pfa']:.2f} us, both files {fitted['both']:.2f} us "
          f"(PFA at inner_precise={BOARD_PFA_INNER_PRECISE}, the board's setting)")
    print(f"{'file':4s} {'kernel':16s} {'Sq':>6s} {'Skv':>6s} {'board us':>9s} {'old us':>8s} {'old err':>8s} "
          f"{'no-launch':>10s} {'new us':>8s} {'new err':>8s} {'ip=1 no-launch':>15s}")
    errs: dict = {}
    for file, kernel, sq, skv, meas, base, other in rows:
        if base is None:
            print(f"{file:4s} {kernel:16s} {sq:6d} {skv:6d} {meas:9.1f}   (reference only, a different schedule)")
            continue
        old = OLD_US[(file, sq, skv)]
        new = base + launch
        errs.setdefault(file, []).append((old / meas - 1, new / meas - 1))
        tail = f" {other:15.1f}" if other is not None else ""
        print(f"{file:4s} {kernel:16s} {sq:6d} {skv:6d} {meas:9.1f} {old:8.1f} {100 * (old / meas - 1):+7.1f}% "
              f"{base:10.1f} {new:8.1f} {100 * (new / meas - 1):+7.1f}%{tail}")
    per_file = {}
    for file, e in errs.items():
        e = np.abs(np.array(e))
        per_file[file] = {"old_mape_pct": 100 * e[:, 0].mean(), "old_max_pct": 100 * e[:, 0].max(),
                          "mape_pct": 100 * e[:, 1].mean(), "max_pct": 100 * e[:, 1].max(), "points": len(e)}
        print(f"{file}: MAPE old {100 * e[:, 0].mean():.1f}% (max {100 * e[:, 0].max():.1f}%), "
              f"new {100 * e[:, 1].mean():.1f}% (max {100 * e[:, 1].max():.1f}%)")
    slopes = {"board": slope_us_per_8k(rows, 4), "model": slope_us_per_8k(rows, 5),
              "model_ip1": slope_us_per_8k(rows, 6)}
    print(f"PFA file, cost of 8192 more keys: board {slopes['board']:.1f} us, model {slopes['model']:.1f} us "
          f"(inner_precise=1: {slopes['model_ip1']:.1f} us)")
    points = [{"file": f, "kernel": k, "sq": sq, "skv": skv, "board_us": m, "base_us": b,
               "old_us": OLD_US[(f, sq, skv)], "new_us": b + launch, "base_ip1_us": o}
              for f, k, sq, skv, m, b, o in rows if b is not None]
    save("calibration", {"fitted_us": fitted, "shipped_us": {"launch": launch},
                         "pfa_inner_precise": BOARD_PFA_INNER_PRECISE, "pfa_slope_us_per_8k": slopes,
                         "files": per_file, "points": points})


if __name__ == "__main__":
    main()
