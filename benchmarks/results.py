"""Benchmark results as files: each benchmark's ``main`` saves its figures to ``benchmarks/results/NAME.json``
(with the machine, its CPU count and load average), and ``python -m studies`` renders README and docs
tables from those files (studies/render.py), so every committed number comes from a run of the code.
"""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo where there is one, else the platform's machine name."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    return {"cpu": cpu_name(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "load_avg": [round(x, 1) for x in os.getloadavg()],
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}


def save(name: str, data: dict) -> Path:
    """Write *data* (plus the machine and its load now) to benchmarks/results/NAME.json."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"benchmark": name, "machine": machine(), **data}, indent=1, default=float) + "\n")
    print(f"saved {path.relative_to(RESULTS.parent.parent)} (load average {machine()['load_avg']})")
    return path


def load(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None
