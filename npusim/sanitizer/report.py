"""What the sanitizer found: one row per (fault class, kernel line, other kernel line), with a count.

:class:`SanitizerReport` is ``res.sanitizer``: ``len()``, ``.df`` (pandas, columns :data:`COLUMNS`),
``.summary()`` (readable text), ``.marks()`` (Chrome trace instant events at both instructions).
"""
from __future__ import annotations

import json
import os

import pandas as pd

from npusim.types import Pipe, SubCore

#: Fault classes, in the order the summary lists them.
FAULTS = {
    "pipe-hazard": "two pipes of one core touch the same bytes (one writes) with no flag, queue or barrier between",
    "pipe-barrier": "a dependent instruction on the same pipe can start before its producer's latency has passed: "
                    "PipeBarrier missing",
    "gm-race": "two cores touch the same GM bytes (one writes, not both atomic adds) with no cross-core flag or "
               "SyncAll between",
    "uninitialised-read": "bytes read before anything wrote them (stored to GM, or a whole workspace read)",
    "out-of-bounds": "an access outside its buffer or allocation",
    "misaligned": "an address or length the hardware requires aligned is not",
    "unbalanced-flag": "a flag set and never waited for, or waited for and never set, at kernel end",
    "queue-leak": "a queue buffer allocated (or enqueued) and never freed at kernel end",
}

COLUMNS = ["fault", "count", "core", "sub_core", "pipe", "instruction", "cycle", "source", "other_core",
           "other_sub_core", "other_pipe", "other_instruction", "other_cycle", "other_source", "memory",
           "byte_start", "byte_end", "message"]


def _pipe(p) -> str:
    return "" if p is None or p < 0 else str(Pipe(p))


def _sub(s) -> str:
    return "" if s is None else str(SubCore(s))


class SanitizerReport:
    """The faults of one sanitized launch, deduplicated by (class, line, other line)."""

    def __init__(self):
        self._rows: dict = {}
        self.launches = 0  # launches checked (an operator call can make several: pre, main, post kernels)
        self.instructions = 0  # trace rows (instructions and synchronisation) of those launches

    def add(self, fault: str, where: tuple, other: tuple | None, memory: str = "", byte_start: int = -1,
            byte_end: int = -1, message: str = "") -> None:
        """*where* / *other*: (core, sub_core, pipe, instruction, cycle, source) of the two instructions."""
        other = other or (None, None, None, "", None, "")
        key = (fault, where[5], other[5], where[3], other[3])
        row = self._rows.get(key)
        if row is not None:
            row["count"] += 1
            return
        self._rows[key] = {"fault": fault, "count": 1, "core": where[0], "sub_core": _sub(where[1]),
                           "pipe": _pipe(where[2]), "instruction": where[3], "cycle": where[4], "source": where[5],
                           "other_core": other[0], "other_sub_core": _sub(other[1]), "other_pipe": _pipe(other[2]),
                           "other_instruction": other[3], "other_cycle": other[4], "other_source": other[5],
                           "memory": memory, "byte_start": byte_start, "byte_end": byte_end, "message": message}

    def extend(self, other: SanitizerReport) -> None:
        """Add another launch's reports (an operator made of several launches)."""
        self.launches += other.launches
        self.instructions += other.instructions
        for key, row in other._rows.items():
            mine = self._rows.get(key)
            if mine is None:
                self._rows[key] = dict(row)
            else:
                mine["count"] += row["count"]

    def __len__(self) -> int:
        return len(self._rows)

    def __bool__(self) -> bool:
        return True

    def __iter__(self):
        return iter(self._rows.values())

    @property
    def df(self) -> pd.DataFrame:
        return pd.DataFrame(list(self._rows.values()), columns=COLUMNS)

    def faults(self) -> list[str]:
        return sorted({r["fault"] for r in self._rows.values()})

    def summary(self) -> str:
        """A readable account: one paragraph per report."""
        if not self._rows:
            return "sanitizer: no reports"
        lines = [f"sanitizer: {len(self._rows)} report(s)"]
        for r in self._rows.values():
            times = f" (x{r['count']})" if r["count"] > 1 else ""
            lines.append(f"- {r['fault']}{times}: {FAULTS[r['fault']]}")
            lines.append(f"    {r['instruction']} at {_short(r['source'])} on core{r['core']}.{r['sub_core']} "
                         f"{r['pipe']} cycle {r['cycle']}")
            if r["other_source"] or r["other_instruction"]:
                lines.append(f"    vs {r['other_instruction']} at {_short(r['other_source'])} on "
                             f"core{r['other_core']}.{r['other_sub_core']} {r['other_pipe']} cycle {r['other_cycle']}")
            if r["memory"]:
                lines.append(f"    bytes [{r['byte_start']}, {r['byte_end']}) of {r['memory']}")
            if r["message"]:
                lines.append(f"    {r['message']}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def marks(self) -> list[dict]:
        """(core, sub_core index, pipe, cycle, label) of both instructions of every report, for the trace."""
        out = []
        for r in self._rows.values():
            label = f"sanitizer: {r['fault']}"
            for side in ("", "other_"):
                if r[side + "core"] is None or r[side + "cycle"] is None:
                    continue
                out.append({"core": int(r[side + "core"]), "sub_core": _sub_index(r[side + "sub_core"]),
                            "pipe": r[side + "pipe"], "cycle": int(r[side + "cycle"]), "name": label,
                            "args": {k: _plain(r[k]) for k in ("fault", "source", "other_source", "memory",
                                                               "byte_start", "byte_end", "message")}})
        return out

    def to_json(self) -> str:
        return json.dumps([{k: _plain(v) for k, v in r.items()} for r in self._rows.values()])


#: Kernel sources under this directory (the checkout npusim runs from) are shown relative to it.
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _short(src: str) -> str:
    """A kernel source line as a reader finds it: relative to the project root for the shipped kernels
    (the same text from any working directory), relative to the working directory otherwise."""
    if not src:
        return "?"
    path, _, line = src.rpartition(":")
    if os.path.isabs(path):
        root = os.path.commonpath([path, _PROJECT_ROOT]) == _PROJECT_ROOT
        path = os.path.relpath(path, _PROJECT_ROOT if root else None)
    return f"{path}:{line}"


def _sub_index(name: str) -> int:
    return next(int(s) for s in SubCore if str(s) == name)


def _plain(v):
    return v.item() if hasattr(v, "item") else v
