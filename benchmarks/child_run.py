"""Run a benchmark case in a fresh Python process so its peak memory (ru_maxrss) is its own.

The child prints one JSON line last; ``run_child`` returns it as a dict.
"""
from __future__ import annotations

import json
import subprocess
import sys


def run_child(code: str, args: list) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])
