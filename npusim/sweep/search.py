"""Which points a study runs: the full grid, a seeded random sample of it, or an Optuna-guided search.

Grid and random searches fix the point list up front. The guided search asks Optuna (TPE, seeded)
for tilings of each (problem, chip variant) case in batches as wide as the runner has workers, runs
the batch, and tells Optuna the modeled time; a refused tiling is told as a failed trial, so the
sampler learns nothing false from it. Cached points are told from the cache without running.
"""
from __future__ import annotations

import math

import numpy as np

from npusim.sweep.space import grid
from npusim.sweep.study import Point, Study


def planned_points(study: Study) -> list[Point]:
    """Grid or random: every point the study will run, in a fixed order (defaults first per case)."""
    kind = study.search.get("kind", "grid")
    cases = study.cases()
    defaults = study.default_points() if study.include_default else []
    if kind == "grid":
        pts = [study.point(lab, prob, base, ch, t) for lab, prob, base, ch, axes in cases for t in grid(axes)
               if t]
    else:  # random: a sample of the union of every case's grid, without replacement
        sizes = [math.prod(len(v) for v in axes.values()) if axes else 0 for *_, axes in cases]
        total = sum(sizes)
        n = min(study.search.get("samples", 100), total)
        picks = np.sort(np.random.default_rng(study.search.get("seed", 0)).choice(total, size=n, replace=False))
        starts = np.cumsum([0] + sizes)
        pts = []
        for i in picks:
            c = int(np.searchsorted(starts, i, side="right") - 1)
            lab, prob, base, ch, axes = cases[c]
            pts.append(study.point(lab, prob, base, ch, _nth(axes, int(i - starts[c]))))
    return list(dict.fromkeys(defaults + pts))


def _nth(axes: dict, index: int) -> dict:
    """The *index*-th combination of grid(axes) without building the grid (last axis fastest)."""
    out = {}
    for name in reversed(list(axes)):
        values = axes[name]
        index, r = divmod(index, len(values))
        out[name] = values[r]
    return dict(reversed(list(out.items())))


def guided_points(study: Study, execute) -> list[Point]:
    """Optuna search per case; *execute(points)* runs a batch and returns their rows (by point id).
    Returns every point visited, defaults first, in visiting order."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trials = study.search.get("trials", 30)
    seed = study.search.get("seed", 0)
    visited: list[Point] = []
    if study.include_default:
        defaults = study.default_points()
        execute(defaults)
        visited += defaults
    for lab, prob, base, ch, axes in study.cases():
        if not axes:
            continue
        opt = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed))
        done = 0
        while done < trials:
            batch = [opt.ask() for _ in range(min(execute.width, trials - done))]
            points = [study.point(lab, prob, base, ch, {n: t.suggest_categorical(n, list(v)) for n, v in axes.items()})
                      for t in batch]
            rows = execute(points)
            for t, p in zip(batch, points):
                row = rows[p.key]
                if row["status"] == "ok":
                    opt.tell(t, row["time_us"])
                else:
                    opt.tell(t, state=optuna.trial.TrialState.FAIL)
            visited += points
            done += len(batch)
    return list(dict.fromkeys(visited))
