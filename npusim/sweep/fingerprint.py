"""The model a sweep row came from: a hash of the simulator's and the operator's source code.

A cached row is reused only when nothing that could change its numbers has changed since it was
computed. The package version alone does not say that (the model changes between releases), so the
cache key includes a fingerprint of every Python source of ``npusim`` and ``ops/common`` and of the
operator's own package. Editing a comment also invalidates the cache: a false miss costs a re-run, a
false hit would be a stale result.
"""
from __future__ import annotations

import hashlib
import importlib
from functools import lru_cache
from pathlib import Path


def _package_dir(module_name: str) -> Path:
    return Path(importlib.import_module(module_name).__file__).resolve().parent


@lru_cache(maxsize=None)
def source_digest(directory: str) -> str:
    """sha256 of the relative paths and contents of every ``*.py`` under *directory*, in path order."""
    root = Path(directory)
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        h.update(str(path.relative_to(root)).encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


@lru_cache(maxsize=None)
def model_fingerprint(operator: str) -> str:
    """Fingerprint of the code that computes a row of *operator* (a registry name)."""
    from npusim import registry

    api_module = registry.get(operator).api.__module__
    package = api_module.rsplit(".", 1)[0] if "." in api_module else api_module
    dirs = dict.fromkeys([_package_dir("npusim"), _package_dir("ops.common"), _package_dir(package)])
    return hashlib.sha256("".join(source_digest(str(d)) for d in dirs).encode()).hexdigest()[:20]
