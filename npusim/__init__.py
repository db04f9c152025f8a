"""npusim: a cycle-approximate, bit-accurate simulator of Huawei Ascend AI Cores.

Public names (API.md): :func:`chip` / :func:`chips` (presets), :class:`ChipSpec`, :class:`Trace`,
:class:`TensorSpec` (data-less inputs for timing mode), :func:`launch` (run a kernel).
"""
__version__ = "0.1.0"

from npusim.chip import ChipSpec, chip, chips  # noqa: E402
from npusim.launch import GmArg, LaunchResult, launch  # noqa: E402
from npusim.memory.gm import TensorSpec  # noqa: E402
from npusim.trace import Trace  # noqa: E402

__all__ = ["ChipSpec", "GmArg", "LaunchResult", "TensorSpec", "Trace", "chip", "chips", "launch", "__version__"]


def __getattr__(name: str):
    """``npusim.sweep`` (the callable design-study module) is imported on first use."""
    if name == "sweep":
        import importlib

        return importlib.import_module("npusim.sweep")
    raise AttributeError(f"module 'npusim' has no attribute {name!r}")
