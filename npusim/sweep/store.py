"""The results file: one Parquet table of rows keyed by point hash, reused as the cache.

Opening a file that exists loads its finished rows; a sweep runs only the points whose hash is not
there (rows with status "error" are not reused). The file is rewritten whole (to a temporary name,
then renamed) at checkpoints and at the end, so an interrupted study keeps what it finished and a
reader never sees half a file.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

#: Integer columns that may hold nulls: stored as pandas nullable Int64 so Parquet keeps them integers.
NULLABLE_INT_PREFIXES = ("t.", "eff.")
NULLABLE_INT = ("error_code", "cycles", "block_dim", "workspace_bytes", "ub_bytes", "l1_bytes")


class ResultStore:
    """Rows by point id, loaded from and written back to *path* (None: kept in memory only)."""

    def __init__(self, path, checkpoint_s: float = 30.0):
        self.path = Path(path) if path is not None else None
        self.checkpoint_s = checkpoint_s
        self.rows: dict[str, dict] = {}
        self._last_write = time.monotonic()
        if self.path is not None and self.path.exists():
            old = pd.read_parquet(self.path)
            for rec in old.to_dict("records"):
                if rec.get("status") != "error":
                    self.rows[rec["point_id"]] = {k: _plain(v) for k, v in rec.items()}

    def __contains__(self, point_id: str) -> bool:
        return point_id in self.rows

    def add(self, row: dict, keep: list[str]) -> None:
        """Record *row*; write a checkpoint of the *keep* ids if the last one is old enough."""
        self.rows[row["point_id"]] = row
        if self.path is not None and time.monotonic() - self._last_write >= self.checkpoint_s:
            self.write(keep)

    def frame(self, ids: list[str]) -> pd.DataFrame:
        """The rows of *ids* that exist, in that order, with stable column types."""
        return to_frame([self.rows[i] for i in ids if i in self.rows])

    def write(self, ids: list[str]) -> Path | None:
        """Rewrite the file with the rows of *ids* (the study's points, in order)."""
        if self.path is None:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        self.frame(ids).to_parquet(tmp, index=False)
        os.replace(tmp, self.path)
        self._last_write = time.monotonic()
        return self.path


def to_frame(rows: list[dict]) -> pd.DataFrame:
    """Rows -> DataFrame: columns in first-seen order, nullable integers where a column is integral."""
    cols: dict[str, None] = {}
    for r in rows:
        cols.update(dict.fromkeys(r))
    df = pd.DataFrame(rows, columns=sorted(cols, key=_column_rank))
    for c in df.columns:
        if c in NULLABLE_INT or c.startswith(NULLABLE_INT_PREFIXES):
            vals = df[c].dropna()
            if all(isinstance(v, (int,)) and not isinstance(v, bool) or float(v).is_integer() for v in vals):
                df[c] = df[c].astype("Int64")
        elif (c.startswith(("busy.", "chip.")) or c in ("time_us", "wall_s", "ub_pct", "l1_pct")) \
                and df[c].map(lambda v: v is None or isinstance(v, (int, float))).all() and not _all_int(df[c]):
            df[c] = df[c].astype("float64")
    return df


#: Column groups in file order: identity and inputs, status, results, effective tiling, busy, wall time.
_GROUPS = ("point_id", "operator", "mode", "problem", "p.", "chip", "t.", "is_default", "status", "error_code",
           "error", "time_us", "cycles", "block_dim", "workspace_bytes", "eff.", "ub_", "l1_", "bound", "busy.",
           "wall_s")


def _column_rank(name: str) -> int:
    return next((i for i, g in enumerate(_GROUPS) if name.startswith(g)), len(_GROUPS))


def _all_int(s: pd.Series) -> bool:
    return bool(len(s)) and all(isinstance(v, int) and not isinstance(v, bool) for v in s)


def _plain(v):
    """A value read back from Parquet as the Python value a fresh run would give (NaN/NA -> None)."""
    if v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    if hasattr(v, "item"):
        return v.item()
    return v
