"""Fixed tuning and checking halves of an estimate-accuracy grid.

Tune an estimate's knobs only on the tuning half; quote the checking half (README, docs/estimate.md).
The split is a seeded permutation of the grid's indices, so it never changes with the code; shapes a
user meets first (the README quick tour, the calibration files) are always in the checking half.
"""
from __future__ import annotations

import numpy as np

SEED = 13  # fixed: changing it would let the split be chosen after the results


def split_halves(n: int, seed: int = SEED) -> tuple[list[int], list[int]]:
    """(tuning, checking) index lists of a grid of *n* configurations, each in grid order."""
    perm = np.random.default_rng(seed).permutation(n)
    return sorted(int(i) for i in perm[: n // 2]), sorted(int(i) for i in perm[n // 2:])


def plan(grid: list, always_check: list, which: str) -> list[tuple[str, object]]:
    """[(half, configuration)] to run: "tune", "check" (the checking half plus *always_check*) or "all"."""
    tune, check = split_halves(len(grid))
    rows = [("tune", grid[i]) for i in tune] if which in ("tune", "all") else []
    if which in ("check", "all"):
        rows += [("check", grid[i]) for i in check] + [("check", c) for c in always_check]
    return rows


def summary(errors: list[tuple[str, float]]) -> dict:
    """Print and return max and mean |error| per half (errors in %, signed): {half: {configs, max_pct,
    mean_pct}} for the halves that ran."""
    out = {}
    for half in ("tune", "check"):
        e = [abs(x) for h, x in errors if h == half]
        if e:
            print(f"{half} half: {len(e)} configurations, max |error| {max(e):.2f}%, mean {np.mean(e):.2f}%")
            out[half] = {"configs": len(e), "max_pct": float(max(e)), "mean_pct": float(np.mean(e))}
    return out


def save_halves(name: str, stats: dict, rows: list, which: str, seed: int = SEED, cpu: dict | None = None) -> None:
    """Save an accuracy run (benchmarks/results/NAME.json): the seed of the checking half's split or draw,
    which halves ran, per-half stats and every row (half, configuration text, estimate us, timing us,
    error %), and optionally {set run: {max_s: the slowest estimate's CPU s, load: load averages}}, kept
    from the saved run for the set not run; the README rows render from it."""
    from results import load, save

    old = load(name) or {}
    if cpu is not None and old.get("seed") == seed:
        cpu = {**{k: v for k, v in old.get("cpu", {}).items() if k not in cpu}, **cpu}
    save(name, {"seed": seed, "halves_run": which, "halves": stats, "rows": rows,
                **({"cpu": cpu} if cpu else {})})


def with_saved_other(name: str, ran: set, rows: list, seed: int) -> tuple[list, dict | None]:
    """A run of one set keeps the other: *rows* plus the rows of the sets not in *ran* from the saved run
    NAME, if it was a run of this *seed*; and that saved run (None when nothing was added)."""
    from results import load

    old = load(name) or {}
    other = [r for r in old.get("rows", []) if r[0] not in ran]
    if old.get("seed") != seed or not other:
        return rows, None
    return sorted(rows + other, key=lambda r: r[0] != "tune"), old
