"""``npusim predict OP KEY=VALUE...``: estimate mode from the command line, with the timeout verdict.

The operators and their keys come from the operator registry (npusim.registry); ``npusim predict --help``
lists them. Common keys: chip=Ascend910B2, timeout=SECONDS (as aclrtSetOpExecuteTimeOut; 0 = the
chip's maximum; rounded up to whole STARS credits of 4.294967296 s).
"""
from __future__ import annotations

import math

from npusim import registry
from npusim.chip import chip as get_chip
from npusim.registry import ProblemParam
from npusim.timeouts import CREDIT_S, describe_limit, op_execute_timeout

COMMON_PARAMS = (
    ProblemParam("chip", str, "Ascend910B2", help="chip preset (npusim chips) or a .toml chip file"),
    ProblemParam("timeout", float, 0.0, help="AI Core timeout in seconds as aclrtSetOpExecuteTimeOut "
                                             "(0: the chip's maximum)"),
)


def predict(op: str, params: list[str]):
    """Run *op* in estimate mode for the shape in *params*; return the OpResult."""
    entry = registry.get(op)
    problem = entry.parse(params, extra=COMMON_PARAMS)
    requested = problem.pop("timeout")
    spec = op_execute_timeout(get_chip(problem.pop("chip")), requested)
    res = entry.call(problem, chip=spec, mode="estimate")
    res.extra["requested_timeout_s"] = requested
    return res


def timeout_text(limit_s: float, requested_s: float) -> str:
    """The limit, and how a requested timeout became it (whole STARS credits, capped at the maximum)."""
    if not requested_s:
        whole = describe_limit(limit_s)  # a spec built with op_execute_timeout says so by itself
        return whole if whole != f"{limit_s:g} s" else f"{limit_s:g} s (the chip's maximum)"
    if math.isinf(requested_s):
        return f"{limit_s:g} s (timeout=inf is more than the chip's maximum)"
    credits = math.ceil(requested_s / CREDIT_S)
    if abs(credits * CREDIT_S - limit_s) > 1e-9:
        return f"{limit_s:g} s (timeout={requested_s:g} s is more than the chip's maximum)"
    return (f"{limit_s:g} s (timeout={requested_s:g} s rounded up to {credits} whole STARS credits of "
            f"{CREDIT_S:g} s, as aclrtSetOpExecuteTimeOut does)")


def report(res) -> str:
    """The text `npusim predict` prints."""
    t = res.timeout
    limit = timeout_text(t.limit_s, res.extra.get("requested_timeout_s", 0.0))
    lines = [f"predicted time: {res.time_us:,.1f} us = {t.predicted_s:.4g} s ({res.cycles:,} cycles, launch included)",
             f"AI Core timeout: {limit} -> {'EXCEEDED' if t.exceeded else 'within the limit'}",
             f"advice: {t.advice}"]
    est = res.extra.get("estimate")
    if est is not None and est.classes:
        lines.append("tiles: " + ", ".join(f"{k} {v[0]:,}" for k, v in est.classes.items()))
    if res.tiling is not None:
        lines.append(f"tiling: {res.tiling.asdict()}")
    return "\n".join(lines)


def usage() -> str:
    """The operators and their keys, for ``npusim predict --help``."""
    lines = ["operators and their KEY=VALUE parameters ([KEY=default]):"]
    for entry in registry.operators().values():
        lines.append(f"  {entry.name}: {entry.title}")
        lines += [f"      {p.describe()}" for p in entry.params]
    lines.append("  common to all:")
    lines += [f"      {p.describe()}" for p in COMMON_PARAMS]
    return "\n".join(lines)
