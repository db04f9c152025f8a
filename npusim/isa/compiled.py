"""Where the full-mode data path's compiled kernels come from (numba: npusim/isa/round16.py, npusim/isa/mmad_tree.py).

Why one module: whether numba is installed is checked once (:data:`HAVE_NUMBA`), and a kernels' module is imported
on its first use, never at import (numba's import costs about 0.4 s, which timing mode does not pay), then kept
here as an attribute, so that a call does not pay a function-level import (about 0.5 us) every time
(docs/performance.md).
"""
from __future__ import annotations

import importlib
import importlib.util

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
_KERNEL_MODULES = ("round16", "mmad_tree")


def __getattr__(name: str):
    """``compiled.round16`` / ``compiled.mmad_tree``: imported on the first access (PEP 562), then bound here."""
    if name in _KERNEL_MODULES:
        module = globals()[name] = importlib.import_module(f"npusim.isa.{name}")
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
