"""A progress bar for long launches (tqdm): simulated time reached, and an ETA when the total is known.

Shown on stderr only when it is a terminal (or when asked for), and only once a run has taken
:data:`PROGRESS_DELAY_S` of wall time, so short runs print nothing. Updated from the streams' time-sync
points (core.py ``catch_up``), at most every :data:`PROGRESS_STEP` of the expected total.
"""
from __future__ import annotations

import sys

#: Wall seconds before the bar appears (tqdm's ``delay``): runs shorter than this print nothing.
PROGRESS_DELAY_S = 2.0
#: Fraction of the expected simulated time between updates (or cycles, with no expected total).
PROGRESS_STEP = 0.002
PROGRESS_STEP_CYCLES = 200_000


def progress_wanted(progress) -> bool:
    """progress=None: on when stderr is a terminal; True / False: as given."""
    if progress is None:
        return bool(getattr(sys.stderr, "isatty", lambda: False)())
    return bool(progress)


class LaunchProgress:
    """The bar of one launch, in simulated microseconds (position = the launch's simulated clock)."""

    def __init__(self, chip, expected_cycles: float | None):
        from tqdm.auto import tqdm

        self.mhz = chip.clock_hz / 1e6
        total = float(expected_cycles) / self.mhz if expected_cycles else None
        self.step = expected_cycles * PROGRESS_STEP if expected_cycles else PROGRESS_STEP_CYCLES
        self.bar = tqdm(total=total, unit="us", unit_scale=False, delay=PROGRESS_DELAY_S, file=sys.stderr,
                        desc="simulated time", dynamic_ncols=True, leave=False,
                        bar_format=("{desc}: {percentage:3.0f}%|{bar}| {n:,.1f}/{total:,.1f} us "
                                    "[{elapsed}<{remaining}]") if total else
                        "{desc}: {n:,.1f} us [{elapsed}, {rate_fmt}]")
        self.next_cycle = self.step
        self.shown_us = 0.0

    @classmethod
    def maybe(cls, progress, chip, expected_cycles=None) -> LaunchProgress | None:
        return cls(chip, expected_cycles) if progress_wanted(progress) else None

    def update(self, now_cycles: float) -> None:
        us = now_cycles / self.mhz
        if self.bar.total:
            us = min(us, self.bar.total)  # the estimate may fall short of the simulated time
        self.bar.update(us - self.shown_us)
        self.shown_us = us
        self.next_cycle = now_cycles + self.step

    def close(self) -> None:
        self.bar.close()
