"""Run a benchmark case in a fresh Python process so its peak memory is its own.

The child prints one JSON line last; ``run_child`` returns it as a dict. The child's peak is ``peak_mb()``, its
address space's high-water mark (VmHWM): Linux carries ``ru_maxrss`` across fork and exec, so a child's ru_maxrss
is at least its parent's resident size when it started (a benchmark that had run 72 cases before starting the
child reported 848 MB for a 130 MB estimate).
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def peak_mb() -> float:
    """This process's peak resident memory in MB since its last exec (VmHWM); ru_maxrss where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_child(code: str, args: list) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], check=True, capture_output=True,
                         text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])
