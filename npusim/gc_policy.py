"""How Python's cyclic garbage collector runs while a launch's streams run (speed only: the same garbage is
collected, some of it later).

Why: a timing run allocates containers (recordings, flag tuples, generated functions, row lists) fast enough to
trigger a young-generation collection every 700 of them (Python's default), and survivors promoted on to the old
generations trigger full collections, each walking every object of the process. Freezing the objects that exist
before the run keeps the process's out of those walks (docs/performance.md, "Generation counted per launch, the
collector frozen"); collecting the young generation every RUN_GEN0_THRESHOLD allocations instead lets most of the
run's short-lived containers die by reference count before a collection sees them, so fewer are promoted and the
old generations are collected less often (a FAG estimate call: 349 young, 31 middle and 2 full collections become
about 40, 2 and 0; docs/performance.md).
"""
from __future__ import annotations

import gc
from contextlib import contextmanager

#: container allocations between two young-generation collections during a run (Python's default is 700)
RUN_GEN0_THRESHOLD = 10_000


@contextmanager
def run_collector():
    """The collector as a run wants it: the objects that exist now frozen out of it (unless the caller froze some
    itself, or turned it off: then that is left alone) and its young generation collected every
    RUN_GEN0_THRESHOLD allocations (unless the caller set more, or 0: off); the caller's thresholds and freeze are
    restored after, on an exception too."""
    freeze = gc.isenabled() and gc.get_freeze_count() == 0
    thresholds = gc.get_threshold()
    if freeze:
        gc.freeze()
    if 0 < thresholds[0] < RUN_GEN0_THRESHOLD:
        gc.set_threshold(RUN_GEN0_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if freeze:
            gc.unfreeze()
