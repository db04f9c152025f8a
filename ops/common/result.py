"""OpResult: what every operator call returns (API.md), and the shared launch step of the operators."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from npusim.chip import ChipSpec
from npusim.chip import chip as get_chip
from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.launch import TimeoutVerdict, call_options
from npusim.progress import progress_wanted
from npusim.trace_sink import check_trace_level
from npusim.trace import Trace

MODES = ("full", "timing", "estimate")


@dataclass
class OpResult:
    """Outputs (full mode), cycles and time (launch included), trace, tiling, workspace, timeout verdict.

    Outputs are also attributes: ``res.attention_out``.
    """

    outputs: dict | None
    cycles: int
    time_us: float
    trace: Trace | None
    tiling: Any
    workspace_size: int
    block_dim: int
    timeout: TimeoutVerdict
    mode: str = "full"
    extra: dict = field(default_factory=dict)
    sanitizer: Any = None  # npusim.sanitizer.SanitizerReport of a sanitize=True call, else None

    def __getattr__(self, name: str):
        outputs = self.__dict__.get("outputs")
        if outputs is not None and name in outputs:
            return outputs[name]
        raise AttributeError(name)


def run_checked(run, sanitize: bool) -> OpResult:
    """``run()``, every launch in it sanitized when *sanitize* (docs/sanitizer.md): reports in ``.sanitizer``
    (None in estimate mode, whose sample launches are not sanitized)."""
    if not sanitize:
        return run()
    from npusim.sanitizer import sanitizing

    with sanitizing() as report:
        res = run()
    res.sanitizer = report if res.mode != "estimate" else None  # estimate mode runs no whole kernel
    return res


def resolve_chip(chip) -> ChipSpec:
    """A preset name or a ChipSpec -> ChipSpec (AclnnError 161002 for an unknown name or type)."""
    if isinstance(chip, ChipSpec):
        return chip
    if not isinstance(chip, str):
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"chip: expected a preset name or a ChipSpec, got "
                                                  f"{type(chip).__name__}")
    return get_chip(chip)


def check_mode(mode, allowed=MODES) -> str:
    if mode not in allowed:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"mode: must be one of {', '.join(allowed)}, got {mode!r}")
    return mode


def run_with_options(run, mode: str, trace, progress, estimate=None):
    """Call ``run()`` (an operator's prepared launch) with the call's trace level and progress bar.

    *estimate*: ``() -> OpResult`` of the same call in estimate mode; when a bar is wanted its cycles give
    the bar's total (and so an ETA). Estimate mode's own sample launches always keep full traces.
    """
    trace = check_trace_level(trace)
    if mode == "estimate":
        with call_options("full", False):
            return run()
    expected = None
    if estimate is not None and progress_wanted(progress):
        try:
            expected = estimate().cycles
        except Exception:  # noqa: BLE001 - no ETA then; the run itself reports what is wrong
            expected = None
    with call_options(trace, progress, expected):
        return run()
