"""The generated README blocks of the sweep studies come from the results files (studies/sweep_tables.py)."""
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "studies"))
import sweep_tables  # noqa: E402


def test_whatif_table_reads_the_default_tiling_rows(tmp_path, monkeypatch):
    rows = [{"problem": "p", "status": "ok", "is_default": True, "chip.hbm_bw_bytes_per_s": bw * 1e9,
             "chip.l2_bytes": l2 * 2 ** 20, "time_us": 1000.0 * l2 / bw}
            for bw in (382.5, 1530.0, 3060.0) for l2 in (12, 192)]
    rows.append(dict(rows[0], is_default=False, time_us=1.0))  # a tiled point: not the default's time
    pd.DataFrame(rows).to_parquet(tmp_path / "w.parquet")
    monkeypatch.setattr(sweep_tables, "OUT", tmp_path)
    lines = sweep_tables.whatif_table("w").splitlines()
    assert lines[0] == "| problem | L2 MiB | HBM 382 GB/s | HBM 1530 GB/s | HBM 3060 GB/s |"
    assert lines[2] == "| p | 12 | 31 us | 8 us | 4 us |"
    assert lines[3] == "| p | 192 | 502 us | 125 us | 63 us |"
    assert sweep_tables.whatif_table("missing") is None


def test_pfa_tiling_table_marks_refused_outers_and_the_gain(tmp_path, monkeypatch):
    base = {"problem": "c", "bound": "MTE2"}
    rows = [dict(base, status="ok", is_default=True, **{"t.sOuter": None, "t.sInner": None, "eff.sOuter": 128,
                                                         "eff.sInner": 960, "time_us": 150.0}),
            dict(base, status="ok", is_default=False, **{"t.sOuter": 64, "t.sInner": 768, "eff.sOuter": 64,
                                                          "eff.sInner": 768, "time_us": 120.0}),
            dict(base, status="refused", is_default=False, **{"t.sOuter": 128, "t.sInner": 768, "eff.sOuter": None,
                                                               "eff.sInner": None, "time_us": None})]
    pd.DataFrame(rows).to_parquet(tmp_path / "pfa_tiling.parquet")
    monkeypatch.setattr(sweep_tables, "OUT", tmp_path)
    last = sweep_tables.pfa_tiling_table().strip().splitlines()[-1]
    assert last == "| c | 120.0 us | refused | 150.0 us (sOuter 128, sInner 960) | (64, 768) (+25.0%) | MTE2 |"


def test_timeout_table_renders_verdicts_and_refusals(monkeypatch):
    """docs/timeouts.md's table comes from studies/timeout_table.py's saved result (studies/render.py)."""
    import render
    saved = {"chips": ["A", "P"], "machine": {"cpu": "x", "cpus": 2, "python": "3", "numpy": "2",
                                              "load_avg": [1.0, 1.0, 1.0], "date_utc": "2026-11-24 16:00"},
             "rows": [{"shape": [1, 20, 2097152, 256, 1],
                       "cells": {"A": {"predicted_s": 1578.2, "limit_s": 1091.0, "exceeded": True},
                                 "P": {"refused": 161002}}},
                      {"shape": [1, 1, 4096, 128, 1],
                       "cells": {"A": {"predicted_s": 0.4, "limit_s": 1091.0, "exceeded": False},
                                 "P": {"predicted_s": 0.9, "limit_s": 547.0, "exceeded": False}}}]}
    monkeypatch.setattr(render, "load", lambda name: saved if name == "timeout_table" else None)
    lines = render.timeout_table("old", []).splitlines()
    assert lines[2] == "| 1, 20, 2097152, 256, 1 | 1578 s, exceeds | refused (161002) |"
    assert lines[3] == "| 1, 1, 4096, 128, 1 | 0 s, fits | 1 s, fits |"
    stale = []
    monkeypatch.setattr(render, "load", lambda name: None)
    assert render.timeout_table("old", stale) == "old" and stale


def test_sfag_block_size_lesson_renders_from_the_study(monkeypatch):
    """The README's SFAG block-size figures come from studies/sfag_block_size.py's saved records."""
    import render

    def rec(rows, bs, t, pct):
        return {"rows": rows, "block_size": bs, "time_us": t, "bound_unit": "veccore0.MTE2", "bound_pct": pct}
    saved = {"T1": 24, "N1": 64, "S2": 8192, "machine": {"date_utc": "2026-11-24 17:40"},
             "records": [rec(256, 1, 110.0, 20.0), rec(256, 8, 99.0, 30.0), rec(256, 64, 100.0, 25.0),
                         rec(512, 1, 150.0, 21.0), rec(512, 64, 100.0, 22.0)]}
    monkeypatch.setattr(render, "load", lambda name: saved if name == "sfag_block_size" else None)
    text = render.sfag_block_size("old", [])
    assert "768 or 1536 small DMAs" in text and "+10% (256 rows) to +50% (512 rows)" in text
    assert "256 rows: blocks of 8, 1.0% under blocks of 64; 512 rows: blocks of 64, 0.0%" in text
    assert "veccore0.MTE2 at every block size, 20-30% busy" in text
    stale = []
    monkeypatch.setattr(render, "load", lambda name: None)
    assert render.sfag_block_size("old", stale) == "old" and stale


def test_study_times_quote_each_steps_own_load(monkeypatch):
    """A later `--only` run of another step re-stamps studies_steps.json's machine; the README's study times
    must keep the load their own runs had."""
    import render

    def machine(load):
        return {"cpu": "x", "cpus": 2, "python": "3", "numpy": "2", "load_avg": [load, 1.0, 1.0],
                "date_utc": "2026-11-24 16:00"}
    saved = {"machine": machine(8.7),
             "steps": {"pfa_tiling": {"wall_s": 300.0, "machine": machine(1.2)},
                       "whatif_pfa": {"wall_s": 90.0, "machine": machine(1.6)},
                       "whatif_fa": {"wall_s": 30.0, "machine": machine(1.2)},
                       "calibration": {"wall_s": 287.0, "machine": machine(8.7)}}}
    monkeypatch.setattr(render, "load", lambda name: saved if name == "studies_steps" else None)
    text = render.study_times("old", [])
    assert text.startswith("PFA tiling study (timing mode) 5.0 min; PFA what-if study (estimate mode) 1.5 min;")
    assert "load average 1.2-1.6 during" in text


def test_readme_example_quotes_its_own_runs_load(monkeypatch):
    """A later run of other README examples re-stamps readme_examples.json's machine; each example's line must
    keep the load its own run had (an example saved before examples kept a machine falls back to the file's)."""
    import render

    def machine(load):
        return {"cpu": "x", "cpus": 2, "python": "3", "numpy": "2", "load_avg": [load, 1.0, 1.0],
                "date_utc": "2026-11-25 06:00"}
    run = {"status": 0, "wall_s": 2.0, "cpu_s": 1.5, "stdout": "hello\n", "stderr_tail": ""}
    saved = {"machine": machine(8.7),
             "examples": {"own": {**run, "machine": machine(1.4)}, "older": dict(run)}}
    monkeypatch.setattr(render, "load", lambda name: saved if name == "readme_examples" else None)
    own, older = render._example("own")("old", []), render._example("older")("old", [])
    assert "load average 1.4;" in own and "hello" in own
    assert "load average 8.7;" in older
