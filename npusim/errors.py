"""Errors of the simulator and of the aclnn-style operator API.

:class:`AclnnError` carries the aclnn status code (../seeds/context/aclnn返回码.md, research/hardware.md §8).
The ``Npusim*Error`` classes report kernel bugs: bad buffers, hangs, unmodelled instructions.
"""
from __future__ import annotations

# aclnn / runtime status codes (API.md "Errors"; hardware.md §8 for 507014)
ACLNN_ERR_PARAM_NULLPTR = 161001
ACLNN_ERR_PARAM_INVALID = 161002
ACLNN_ERR_RUNTIME_ERROR = 361001
ACLNN_ERR_INNER_TILING_ERROR = 561002
AICORE_TIMEOUT = 507014

STATUS_NAMES = {
    ACLNN_ERR_PARAM_NULLPTR: "ACLNN_ERR_PARAM_NULLPTR",
    ACLNN_ERR_PARAM_INVALID: "ACLNN_ERR_PARAM_INVALID",
    ACLNN_ERR_RUNTIME_ERROR: "ACLNN_ERR_RUNTIME_ERROR",
    ACLNN_ERR_INNER_TILING_ERROR: "ACLNN_ERR_INNER_TILING_ERROR",
    AICORE_TIMEOUT: "AICORE_TIMEOUT",
}


class AclnnError(Exception):
    """A call the real aclnn API would refuse (or a run the AI Core would abort).

    *status* is the aclnn status code; the message names the parameter and the rule.
    """

    def __init__(self, status: int, message: str):
        self.status = int(status)
        self.message = message
        # both arguments kept in args so the error can be re-created (simpy copies failed events' errors)
        super().__init__(self.status, message)

    def __str__(self) -> str:
        return f"[{self.status} {STATUS_NAMES.get(self.status, '')}] {self.message}"


def format_seconds(seconds: float) -> str:
    """A duration that keeps its significant digits: '1159.0 s', '0.0123 s', '2.886e-05 s' (never '0.0 s')."""
    return f"{seconds:.1f} s" if seconds >= 100 else f"{seconds:.4g} s"


class AicoreTimeoutError(AclnnError):
    """AclnnError 507014: the run is predicted past the AI Core timeout. *predicted_s* is the predicted
    run time (a lower bound when the simulation stopped early, see *at_least*), *limit_s* the limit."""

    def __init__(self, predicted_s: float, limit_s: float, where: str = "", at_least: bool = False):
        from npusim.timeouts import describe_limit  # (timeouts.py imports this module)

        bound = "at least " if at_least else ""
        super().__init__(AICORE_TIMEOUT, f"{where}predicted run time {bound}{format_seconds(predicted_s)} exceeds "
                                         f"the AI Core timeout of {describe_limit(limit_s)}; split the launch "
                                         "(see `npusim predict`)")
        self.predicted_s = float(predicted_s)
        self.limit_s = float(limit_s)
        self.at_least = bool(at_least)
        self.args = (predicted_s, limit_s, where, at_least)  # re-creatable (simpy copies a failed event's error)


class NpusimError(Exception):
    """Base of the simulator's own errors (a kernel bug or an unmodelled feature)."""


class NpuBufferError(NpusimError):
    """Over-capacity allocation, misaligned address or access outside an allocation."""


class KernelHangError(NpusimError):
    """The schedule can never finish: some pipe waits for a flag nobody will set."""


class KernelError(NpusimError):
    """An exception raised inside kernel code, re-raised with core and kernel line."""
