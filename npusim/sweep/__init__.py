"""Design studies at scale: ``npusim.sweep(study)`` and ``npusim sweep STUDY.toml``.

A study (``study.py``: a TOML file, a dict or a :class:`Study`) names an operator from the registry,
problem shapes, tiling axes of the operator's ``tiling_space``, chip variants and a search. The sweep
expands it to points (``search.py``), runs the ones its Parquet file does not hold yet (``store.py``)
in this process, a local process pool or on Dask (``execute.py``), one row each (``run.py``), and
returns the study's rows as a DataFrame. ``report.py`` turns a results file into a ranking, Pareto
front, sensitivity plots and a verdict.

The module itself is callable: ``npusim.sweep(study)`` is :func:`sweep`.
"""
from __future__ import annotations

import sys
import types
from pathlib import Path

from npusim.sweep.space import Axis, TilingSpace
from npusim.sweep.study import Point, Study

__all__ = ["Axis", "Point", "Study", "TilingSpace", "load_study", "sweep"]


def load_study(study) -> Study:
    """A Study from a TOML path, a dict (as the TOML would parse) or a Study."""
    if isinstance(study, Study):
        study.check()
        return study
    if isinstance(study, dict):
        return Study.from_dict(study)
    return Study.from_toml(Path(study))


def sweep(study, *, scheduler=None, workers: int | None = None, output=None, progress: bool = True):
    """Run *study* and return its rows (pandas DataFrame, one per point, in the study's order).

    *scheduler*: None (local), a Dask scheduler address ``"tcp://host:port"`` or a
    ``distributed.Client``. *workers*: local processes (default: the usable CPUs; 1 = this process).
    *output*: the Parquet file (default: the study's ``output``; None for a dict study without one
    keeps the rows in memory only). Points already in the file are not run again.
    """
    from tqdm import tqdm

    from npusim.sweep.execute import make_runner
    from npusim.sweep.search import guided_points, planned_points
    from npusim.sweep.store import ResultStore

    st = load_study(study)
    path = Path(output) if output is not None else st.output
    store = ResultStore(path)
    runner = make_runner(scheduler, workers)
    order: list[str] = []
    bar = tqdm(desc=f"sweep {st.name}", unit="pt", disable=not progress, total=0)

    def execute(points: list[Point]) -> dict[str, dict]:
        """Run the points not in the store; return every point's row by id."""
        fresh = list({p.key: p for p in points if p.key not in store}.values())
        order.extend(p.key for p in points)
        bar.total += len(fresh)
        bar.refresh()
        for row in runner.stream(fresh):
            store.add(row, list(dict.fromkeys(order)))
            bar.update(1)
        return {p.key: store.rows[p.key] for p in points}

    execute.width = runner.workers
    try:
        if st.search.get("kind", "grid") == "optuna":
            points = guided_points(st, execute)
        else:
            points = planned_points(st)
            execute(points)
    finally:
        bar.close()
        runner.close()
        store.write(list(dict.fromkeys(order)))
    ids = list(dict.fromkeys(p.key for p in points))
    return store.frame(ids)


class _CallableModule(types.ModuleType):
    """Lets ``npusim.sweep(study)`` call :func:`sweep` while ``npusim.sweep.report`` stays a module."""

    def __call__(self, *args, **kwargs):
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
