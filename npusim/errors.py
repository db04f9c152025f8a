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


class NpusimError(Exception):
    """Base of the simulator's own errors (a kernel bug or an unmodelled feature)."""


class NpuBufferError(NpusimError):
    """Over-capacity allocation, misaligned address or access outside an allocation."""


class KernelHangError(NpusimError):
    """The schedule can never finish: some pipe waits for a flag nobody will set."""


class KernelError(NpusimError):
    """An exception raised inside kernel code, re-raised with core and kernel line."""
