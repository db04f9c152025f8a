"""Where points run: in this process, on a local process pool, or on a Dask cluster.

Each runner streams rows back as points finish (for the progress bar and the periodic checkpoint);
the order of completion does not matter because rows are put back in the study's order afterwards.
``scheduler`` may be None (local), ``"tcp://host:port"`` (a running Dask scheduler) or a
``distributed.Client``; the workers must be able to import npusim and the operators.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed

from npusim.sweep.run import run_point
from npusim.sweep.study import Point


class SerialRunner:
    """One worker: run the points here, one after another (no pickling, no process start)."""

    workers = 1

    def stream(self, points: Iterable[Point]) -> Iterator[dict]:
        for p in points:
            yield run_point(p)

    def close(self) -> None:
        pass


class PoolRunner:
    """A local process pool of *workers* processes (forked on Linux: the parent's imports are reused).

    Forked, not started from a fork server: with npusim/gc_policy.py collecting the launches' garbage, a worker
    forked from a caller that has run 1,200 points costs what a fresh one does (docs/sweep.md), and a fork
    server costs each pool its imports and each worker its first point's warm-up."""

    def __init__(self, workers: int):
        self.workers = workers
        ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        self.pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)

    def stream(self, points: Iterable[Point]) -> Iterator[dict]:
        futures = {self.pool.submit(run_point, p): p for p in points}
        try:
            for f in as_completed(futures):
                yield same_code(f.result(), futures[f])
        finally:
            for f in futures:
                f.cancel()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def same_code(row: dict, point: Point) -> dict:
    """*row* as a worker made it, unless the worker's key of *point* differs from the caller's: then the worker
    (spawned, off Linux) imported other model sources than the caller hashed (files changed since the caller read
    them), and the row is an error under the caller's key (an error is run again next time, never cached)."""
    if row["point_id"] != point.key:
        row.update(point_id=point.key, status="error", error="the worker's model sources differ from the caller's "
                   "(changed during the sweep): run it again")
    return row


class DaskRunner:
    """A Dask cluster, from a scheduler address (a client made and closed here) or a given Client."""

    def __init__(self, scheduler):
        from distributed import Client

        self.own = not isinstance(scheduler, Client)
        self.client = Client(scheduler) if self.own else scheduler
        self.workers = max(sum(w.get("nthreads", 1) for w in self.client.scheduler_info()["workers"].values()), 1)

    def stream(self, points: Iterable[Point]) -> Iterator[dict]:
        from distributed import as_completed as dask_completed

        points = list(points)
        if not points:
            return
        futures = self.client.map(run_point, points, pure=False)
        by = dict(zip(futures, points))
        try:
            for f in dask_completed(futures):
                yield same_code(f.result(), by[f])
        finally:
            self.client.cancel(futures)

    def close(self) -> None:
        if self.own:
            self.client.close()


def make_runner(scheduler=None, workers: int | None = None):
    """The runner for a sweep: Dask if *scheduler* is given, else *workers* local processes
    (default: the CPUs this process may use; 1 runs in this process)."""
    if scheduler is not None:
        return DaskRunner(scheduler)
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return SerialRunner() if workers <= 1 else PoolRunner(workers)
