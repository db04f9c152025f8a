"""The AI Core execution timeout as the runtime applies it (research/hardware.md §8).

``aclrtSetOpExecuteTimeOut(seconds)`` sets the limit in whole STARS kernel-credit units: one credit is
2**32 cycles of the 1 GHz STARS clock (4.294967296 s); the default (and maximum) on Atlas A2/A3 is 254
credits = 1090.92 s, shown as 1091 s; 0 means the maximum. Atlas inference (310P) defaults to 547 s.
"""
from __future__ import annotations

import math

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError

CREDIT_S = 2 ** 32 / 1e9  # one STARS kernel credit (S6 RT_STARS_DEFAULT_KERNEL_CREDIT, hardware.md §8)


def op_execute_timeout(spec, seconds: float):
    """*spec* with the AI Core timeout that ``aclrtSetOpExecuteTimeOut(seconds)`` would give.

    The value is rounded up to whole credits and capped at the chip's default (its maximum); 0 selects the
    maximum. Raises AclnnError 161002 for a negative or non-numeric value.
    """
    try:
        seconds = float(seconds)
    except (TypeError, ValueError):
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"timeout: expected seconds, got {seconds!r}") from None
    if seconds < 0 or math.isnan(seconds):
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"timeout: must be >= 0 seconds, got {seconds}")
    default = spec.aicore_timeout_s
    if seconds == 0:
        return spec
    if seconds >= default:  # includes inf: the cap (math.ceil(inf) would overflow)
        return spec
    limit = min(math.ceil(seconds / CREDIT_S) * CREDIT_S, default)
    return spec.replace(aicore_timeout_s=limit)


def describe_limit(limit_s: float) -> str:
    """*limit_s* as printed next to a timeout verdict or a 507014 error, saying where the number comes
    from when it is a whole number of STARS credits: a requested 600 s prints as "601.295 s (600 s
    requested is rounded up to 140 whole STARS credits of 4.294967296 s)"."""
    if not math.isfinite(limit_s) or limit_s <= 0:
        return f"{limit_s:g} s"
    credits = limit_s / CREDIT_S
    if abs(credits - round(credits)) > 1e-9 * credits:
        return f"{limit_s:g} s"
    n = round(credits)
    return (f"{limit_s:.6g} s ({n} whole STARS kernel credits of {CREDIT_S:.10g} s: aclrtSetOpExecuteTimeOut "
            f"rounds a requested time up to whole credits, so anything in ({(n - 1) * CREDIT_S:.6g}, "
            f"{limit_s:.6g}] s gives this limit; docs/timeouts.md)")
