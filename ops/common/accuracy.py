"""Accuracy rules of the attention operators against a float64 reference (NUMERICS.md check 2).

Why one module: every flash-attention operator is accepted by the same two rules, so tests apply
them the same way and report the same details.

- :func:`fa_rule_ok`: the flash-attention rule ``max|out - ref64| <= factor * max|out_lowp - ref64| +
  eps`` (research/oracles.md §1: Dao-AILab flash-attention tests, factor 2 for outputs, 3 for
  gradients, +1e-5 in the causal test);
- :func:`double_thousandth_ok`: the Ascend "double thousandth" rule (research/hardware.md §9):
  threshold fp16 1e-3, bf16 4e-3, fp32 1e-4; an element fails when its absolute error and its
  relative error ``|d| / (max(|out|, |ref|) + 1e-9)`` both exceed the threshold (CANN sample
  ``verify_result.py``: MINIMUM = 10e-10); the case fails when more than ``threshold * size``
  elements fail.

NaN: positions where out and the reference are both NaN count as equal; a NaN on one side only is
an infinite error. Infinities compare equal when they match exactly.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

#: Default eps of :func:`fa_rule_ok` (research/oracles.md §1: flash-attn test_flash_attn_causal "+1e-5").
FA_RULE_EPS = 1e-5
#: Thresholds of the double-thousandth rule by dtype (research/hardware.md §9).
DOUBLE_THOUSANDTH = {np.dtype(np.float16): 1e-3, np.dtype(ml_dtypes.bfloat16): 4e-3, np.dtype(np.float32): 1e-4}
_REL_MINIMUM = 1e-9  # research/hardware.md §9: CANN verify_result.py MINIMUM = 10e-10


def _abs_err(x, ref) -> np.ndarray:
    """|x - ref| in float64, 0 where both are NaN or equal infinities, inf where only one is NaN."""
    a = np.asarray(x).astype(np.float64)
    r = np.asarray(ref).astype(np.float64)
    if a.shape != r.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {r.shape}")
    with np.errstate(invalid="ignore"):
        err = np.abs(a - r)
    same = (a == r) | (np.isnan(a) & np.isnan(r))
    err[same] = 0.0
    err[np.isnan(err)] = np.inf
    return err


def fa_rule_ok(out, ref64, lowp, factor: float = 2.0, eps: float = FA_RULE_EPS) -> tuple[bool, dict]:
    """``max|out - ref64| <= factor * max|lowp - ref64| + eps`` (research/oracles.md §1).

    *out*: the result under test; *ref64*: the float64 reference; *lowp*: the same formula run in the
    input dtype. Returns (ok, details) with ``err``, ``lowp_err``, ``bound``, ``factor``, ``eps`` and
    ``worst`` (the index of the largest error, or None for empty arrays).
    """
    err = _abs_err(out, ref64)
    lowp_err = _abs_err(lowp, ref64)
    e = float(err.max()) if err.size else 0.0
    le = float(lowp_err.max()) if lowp_err.size else 0.0
    bound = factor * le + eps
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape)) if err.size else None
    return e <= bound, dict(err=e, lowp_err=le, bound=bound, factor=factor, eps=eps, worst=worst)


def double_thousandth_ok(out, ref64, dtype) -> tuple[bool, dict]:
    """The Ascend double-thousandth rule for an output of *dtype* (fp16, bf16 or fp32; a numpy dtype
    or anything ``np.dtype`` accepts). Returns (ok, details) with ``threshold``, ``failed`` (element
    count), ``allowed`` (``threshold * size``), ``max_abs`` and ``max_rel``.
    Raises ValueError for another dtype.
    """
    dt = np.dtype(dtype)
    if dt not in DOUBLE_THOUSANDTH:
        raise ValueError(f"double_thousandth_ok: no threshold for dtype {dt} (fp16, bf16, fp32)")
    thr = DOUBLE_THOUSANDTH[dt]
    err = _abs_err(out, ref64)
    with np.errstate(invalid="ignore"):
        mag = np.maximum(np.abs(np.asarray(out).astype(np.float64)), np.abs(np.asarray(ref64).astype(np.float64)))
        rel = err / (np.nan_to_num(mag, nan=0.0, posinf=np.inf) + _REL_MINIMUM)
    rel[err == 0] = 0.0
    rel[np.isinf(err)] = np.inf
    failed = int(np.count_nonzero((err > thr) & (rel > thr)))
    allowed = thr * err.size
    return failed <= allowed, dict(threshold=thr, failed=failed, allowed=allowed,
                                   max_abs=float(err.max()) if err.size else 0.0,
                                   max_rel=float(rel.max()) if rel.size else 0.0)
