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

The freeze has a price, which :func:`_collect_if_due` pays: a launch's objects (streams, queues, recordings) form
reference cycles, the next launch's freeze moves them, garbage by then, into the old generation, and
``gc.freeze()`` also zeroes the collector's counts of its middle and old generations (CPython 3.11), so in a
process of short launches the collector never runs a full collection and keeps every launch's garbage: 9.7M
objects and 4.3 GB after 1,200 PFA sweep points (docs/sweep.md). So this module counts what the runs leave
behind and, before a run freezes, collects the whole heap once that has grown past FULL_COLLECTION_SHARE of what
the last full collection kept (the collector's own rule, with its share; docs/performance.md).
"""
from __future__ import annotations

import gc
from contextlib import contextmanager

#: container allocations between two young-generation collections during a run (Python's default is 700)
RUN_GEN0_THRESHOLD = 10_000
#: a full collection is due before a run once the objects the runs since the last one left behind pass this share
#: of the objects that collection kept (CPython's own rule uses 0.25 of its long-lived objects; a larger share
#: collects less often, each collection walking the kept heap once: docs/performance.md)
FULL_COLLECTION_SHARE = 1.0


class _Heap:
    """This process's tracked objects after the last full collection here, and what the runs left since."""

    kept: int | None = None  # None: not counted yet (the first run counts them)
    left = 0  # objects alive at the end of each run that the run made (its launch's, mostly garbage soon)


def _collect_if_due() -> None:
    """A full collection when the runs since the last one left enough behind (the previous launches' garbage
    is in the old generation, out of the young collections' reach: module docstring)."""
    if _Heap.kept is not None and _Heap.left <= FULL_COLLECTION_SHARE * _Heap.kept:
        return
    if _Heap.kept is not None:
        gc.collect()
    _Heap.kept, _Heap.left = len(gc.get_objects()), 0


@contextmanager
def run_collector():
    """The collector as a run wants it: the objects that exist now frozen out of it (unless the caller froze some
    itself, or turned it off: then that is left alone) and its young generation collected every
    RUN_GEN0_THRESHOLD allocations (unless the caller set more, or 0: off); the caller's thresholds and freeze are
    restored after, on an exception too. Before the freeze, the previous runs' garbage is collected when due
    (:func:`_collect_if_due`), unless the caller turned automatic collection off (threshold 0)."""
    freeze = gc.isenabled() and gc.get_freeze_count() == 0
    thresholds = gc.get_threshold()
    if freeze:
        if thresholds[0] > 0:
            _collect_if_due()
        gc.freeze()
    if 0 < thresholds[0] < RUN_GEN0_THRESHOLD:
        gc.set_threshold(RUN_GEN0_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if freeze:
            _Heap.left += len(gc.get_objects())  # the objects the run made, still alive (the frozen ones excluded)
            gc.unfreeze()
