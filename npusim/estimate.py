"""Estimate mode: an operator's time from counts of its tile classes, for shapes too large to simulate.

An operator's estimator (``ops/<op>/estimate.py``) counts, vectorised from its tiling, how many tiles of
each class every core processes, and asks this module for the cost of each class. A class cost is the
marginal cycles per tile measured by short timing-mode simulations of a small problem on one AI Core
whose HBM and L2 bandwidth are cut to that core's share of the chip (``contention_chip``), so the
classes carry the contention of a full launch. Costs are cached per (chip, operator, tiling, class)
by ``functools.lru_cache`` in the operator module (pure functions of hashable arguments).

The core split is evaluated on the whole work sequence without materialising it: the sequence is one
head's items repeated N times (``PeriodicSequence``), so cumulative weights and costs are closed forms.
The estimate is the slowest core's cycles plus the fixed (launch and pipeline fill) cycles.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from npusim.launch import TimeoutVerdict

#: Safety margin of the split advice: each launch is planned to use at most this fraction of the limit.
ADVICE_MARGIN = 0.8


def contention_chip(spec, active_cores: float):
    """*spec* with HBM and L2 bandwidth divided by *active_cores* (one core's share when a micro-run on one
    core stands for a launch on *active_cores*; a micro-run on k cores uses active / k), and no AI Core
    timeout: a sample must never raise 507014, estimate mode reports the whole launch's verdict instead."""
    n = max(float(active_cores), 1.0)
    return spec.replace(hbm_bw_bytes_per_s=spec.hbm_bw_bytes_per_s / n, l2_bw_bytes_per_s=spec.l2_bw_bytes_per_s / n,
                        aicore_timeout_s=float("inf"))


def steady_l2_touched(working_set: int, l2_bytes: int) -> int:
    """Touched bytes to start an estimate sample's L2 model at (``launch(l2_warm=...)``), so that the sample
    sees the hit scale the whole launch sees on average. The L2 model (npusim/memory/gm.py) scales hits by
    l2 / touched once the bytes touched chip-wide pass the L2 size; over a launch whose touched bytes grow
    about linearly to *working_set* > l2 the scale averages (l2 / WS) (1 + ln(WS / l2)), which is the scale
    at WS / (1 + ln(WS / l2)). Starting a sample at the full working set instead would charge the
    launch's last, most-missed moment to every tile."""
    if working_set <= l2_bytes:
        return int(working_set)
    return int(working_set / (1.0 + math.log(working_set / l2_bytes)))


def marginal(cycles_at: dict) -> tuple[float, float]:
    """(intercept, slope) of cycles against a count, from {count: cycles} at two or more counts."""
    ks = np.array(sorted(cycles_at), dtype=np.float64)
    ys = np.array([cycles_at[k] for k in sorted(cycles_at)], dtype=np.float64)
    slope, intercept = np.polyfit(ks, ys, 1)
    return float(intercept), float(slope)


class PeriodicSequence:
    """A weight and cost sequence made of one period (arrays *w*, *c*) repeated *repeats* times."""

    def __init__(self, weights: np.ndarray, costs: np.ndarray, repeats: int):
        self.w = np.asarray(weights, dtype=np.float64)
        self.c = np.asarray(costs, dtype=np.float64)
        self.repeats = int(repeats)
        self.period = len(self.w)
        self.cum_w = np.cumsum(self.w)
        self.cum_c = np.cumsum(self.c)
        self.total_w = float(self.cum_w[-1]) if self.period else 0.0
        self.total_c = float(self.cum_c[-1]) if self.period else 0.0

    def __len__(self) -> int:
        return self.period * self.repeats

    def _cum(self, cum: np.ndarray, total: float, idx: np.ndarray) -> np.ndarray:
        """Inclusive cumulative sum at global indices *idx* (-1 gives 0)."""
        idx = np.asarray(idx, dtype=np.int64)
        out = np.zeros(idx.shape, np.float64)
        ok = idx >= 0
        h, r = np.divmod(idx[ok], self.period)
        out[ok] = h * total + cum[r]
        return out

    def cum_cost(self, idx) -> np.ndarray:
        return self._cum(self.cum_c, self.total_c, idx)

    def first_reaching(self, targets: np.ndarray) -> np.ndarray:
        """Smallest global index whose inclusive cumulative weight is >= each target (targets > 0)."""
        t = np.asarray(targets, dtype=np.float64)
        h = np.maximum(np.ceil(t / self.total_w) - 1, 0)
        rem = t - h * self.total_w
        pos = np.searchsorted(self.cum_w, rem - 1e-9, side="left")
        return (h * self.period + pos).astype(np.int64)

    def split(self, cores: int) -> tuple[np.ndarray, np.ndarray]:
        """The greedy contiguous partition of the CANN tilings (core c ends where the cumulative weight
        reaches total * (c + 1) / cores), as [start, end) index arrays."""
        n = len(self)
        total = self.total_w * self.repeats
        targets = total * np.arange(1, cores + 1) / cores
        ends = np.minimum(self.first_reaching(targets) + 1, n)
        ends = np.maximum.accumulate(ends)
        ends[-1] = n
        starts = np.concatenate([[0], ends[:-1]])
        return starts, ends

    def core_costs(self, cores: int) -> np.ndarray:
        starts, ends = self.split(cores)
        return self.cum_cost(ends - 1) - self.cum_cost(starts - 1)


@dataclass
class Estimate:
    """What estimate mode returns next to the timeout verdict."""

    cycles: int
    time_us: float
    per_core_cycles: np.ndarray
    fixed_cycles: float
    classes: dict = field(default_factory=dict)  # class name -> (tiles in the launch, cycles per tile)
    error_bound: float = 0.03  # documented relative bound vs timing mode (docs/estimate.md)


def timeout_verdict(seconds: float, limit_s: float, split_name: str, split_size: int,
                    cost_of_split, unit: int = 1) -> TimeoutVerdict:
    """Verdict and advice: the largest split of *split_name* (*split_size* steps of *unit* elements) whose
    launches each stay under ADVICE_MARGIN x limit, found with *cost_of_split(steps) -> seconds*."""
    exceeded = seconds > limit_s
    budget = ADVICE_MARGIN * limit_s
    if seconds <= budget:
        advice = (f"fits: {seconds:.3g} s is {100 * seconds / limit_s:.1f}% of the {limit_s:g} s AI Core timeout")
        return TimeoutVerdict(seconds, limit_s, exceeded, advice)
    lo, hi = 1, split_size  # largest chunk with cost <= budget (cost grows with the chunk)
    if cost_of_split(lo) > budget:
        advice = (f"even a {split_name} chunk of 1 needs {cost_of_split(1):.3g} s > {budget:.3g} s "
                  f"({int(ADVICE_MARGIN * 100)}% of the limit): split along another axis")
        return TimeoutVerdict(seconds, limit_s, exceeded, advice)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cost_of_split(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    launches = -(-split_size // lo)
    advice = (f"split {split_name} into chunks of at most {lo * unit} ({launches} launches of <= "
              f"{cost_of_split(lo):.3g} s each, {int(ADVICE_MARGIN * 100)}% margin of the {limit_s:g} s limit)")
    return TimeoutVerdict(seconds, limit_s, exceeded, advice)
