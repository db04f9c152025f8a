"""Untiled references of aclnnPromptFlashAttentionV2 for the accuracy rules (NUMERICS.md check 2).

Why: the golden (golden.py) pins the kernel's bits; these pin its accuracy against the mathematics.
Both evaluate ``softmax(Q K^T * scale + mask -> -inf) V`` in one piece, with no tiling:

- :func:`pfa_reference64`: the formula in float64, the "truth";
- :func:`pfa_lowp`: the same formula with every step rounded to the input dtype (research/oracles.md
  §1 ``out_pt``: scores, softmax and PV in fp16, or bf16 through ml_dtypes), the baseline of the
  flash-attention rule ``max|out - ref64| <= 2 max|out_lowp - ref64| + eps``.

Semantics, restated from the mode definitions with the user's tokens (research/oracles.md §0;
independent of the canonical left-up tokens the golden uses): per batch, S1 = actual_seq_lengths[b],
S2 = actual_seq_lengths_kv[b], r = query row, c = key column; a score is kept iff
- mode 0: ``-pre_tokens <= c - r <= next_tokens`` and the mask is 0 (no mask: everything);
- mode 1: the mask is 0; mode 2: ``c <= r``; mode 3: ``c <= r + S2 - S1``;
- mode 4: ``S2 - S1 - pre_tokens <= c - r <= S2 - S1 + next_tokens``.
Rows past S1 are 0; rows with nothing kept give 0 (NUMERICS.md "Fully masked rows"). Query head n
reads key/value head ``n // G``. Quantisation (research/oracles.md §3): int8 inputs give
``softmax(Q K^T * deq1 * scale) V * quant_scale1 * deq2`` (the scale P was quantised with and the
dequant of PV); int8 output is the quantiser's real-valued input ``O * quant_scale2 + quant_offset2``
(not rounded); rows past S1 stay 0. Uncomputed rows of a problem (``computed_seq_lengths``) are
fully masked by definition, so they are 0 here too.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from npusim.dtypes import decode_deq_scale_u64
from ops.common.layouts import from_bnsd, to_bnsd

_INT8 = np.dtype(np.int8)
_F64 = np.dtype(np.float64)


def _scalar(x) -> float:
    """A per-tensor scale as float64 (a uint64 FP19 word decoded), 1.0 when absent."""
    if x is None:
        return 1.0
    arr = np.asarray(x).reshape(-1)
    if arr.dtype == np.uint64:
        return float(decode_deq_scale_u64(arr)[0])
    return float(arr[0].astype(np.float64))


def _per_channel(x, n: int, d: int, default: float) -> np.ndarray:
    """quant_scale2 / quant_offset2 as float64 [N, 1, D] (channel of head n, column d: n*D + d)."""
    if x is None or np.asarray(x).size == 0:
        return np.full((n, 1, d), default)
    arr = np.asarray(x).astype(np.float64).reshape(-1)
    return np.broadcast_to(arr[0] if arr.size == 1 else arr.reshape(n, 1, d), (n, 1, d))


def _user_mask(atten_mask, b: int) -> np.ndarray:
    m = np.asarray(atten_mask)
    if m.ndim == 2:
        return m
    mb = b if m.shape[0] > 1 else 0
    return m[mb] if m.ndim == 3 else m[mb, 0]


def keep_of(problem, atten_mask, b: int) -> np.ndarray:
    """bool [S1_b, S2_b]: True where batch b's score enters the softmax (module docstring rules)."""
    s1, s2 = int(problem.actual_seq_lengths[b]), int(problem.actual_seq_lengths_kv[b])
    mode, pre, nxt = problem.sparse_mode, problem.pre_tokens, problem.next_tokens
    d = np.arange(s2, dtype=np.int64)[None, :] - np.arange(s1, dtype=np.int64)[:, None]
    has_mask = atten_mask is not None and np.asarray(atten_mask).size > 0
    user = (_user_mask(atten_mask, b)[:s1, :s2] == 0) if has_mask and mode in (0, 1) else True
    lim = s1 + s2 + 1  # tokens beyond +-(S1+S2) keep or drop everything: clip against int64 overflow
    pre, nxt = max(-lim, min(lim, pre)), max(-lim, min(lim, nxt))
    if mode == 0:
        band = (d >= -pre) & (d <= nxt) if has_mask else True
    elif mode == 1:
        band = True
    elif mode == 2:
        band = d <= 0
    elif mode == 3:
        band = d <= s2 - s1
    elif mode == 4:
        band = (d >= s2 - s1 - pre) & (d <= s2 - s1 + nxt)
    else:
        raise NotImplementedError(f"sparse_mode {mode}")
    return np.broadcast_to(np.asarray(band) & np.asarray(user), (s1, s2))


def _heads(problem, query, key, value):
    """Q [B, N, S1, D], K and V [B, N, S2, D] per query head (GQA expanded), input dtype."""
    q = to_bnsd(np.asarray(query), problem.layout, problem.num_heads)
    kv_of_head = np.arange(problem.num_heads) // problem.group
    k = to_bnsd(np.asarray(key), problem.layout, problem.num_kv_heads)[:, kv_of_head]
    v = to_bnsd(np.asarray(value), problem.layout, problem.num_kv_heads)[:, kv_of_head]
    return q, k, v


def _formula(problem, query, key, value, atten_mask, dt: np.dtype, scales: dict) -> np.ndarray:
    """The untiled formula with every step rounded to *dt* (float64: no rounding)."""
    q, k, v = _heads(problem, query, key, value)
    n, d = problem.num_heads, problem.head_dim
    int8_in = np.dtype(problem.dtype) == _INT8
    int8_out = np.dtype(problem.out_dtype) == _INT8
    r = (lambda x: np.asarray(x, np.float64)) if dt == _F64 else (lambda x: np.asarray(x).astype(dt))
    scale = r(problem.scale_value if dt == _F64 else np.float32(problem.scale_value_fp32))
    post = r(scales["q1"] * scales["deq2"]) if int8_in else None
    q2 = r(_per_channel(scales["q2"], n, d, 1.0))
    off2 = r(_per_channel(scales["off2"], n, d, 0.0))
    mm_dt = np.float64 if dt == _F64 else np.float32  # matmul accumulation; the result is rounded to dt
    out = np.zeros((problem.batch, n, problem.s1, d))
    with np.errstate(all="ignore"):
        for b in range(problem.batch):
            s1, s2 = int(problem.actual_seq_lengths[b]), int(problem.actual_seq_lengths_kv[b])
            if s1 == 0:
                continue
            keep = keep_of(problem, atten_mask, b) if s2 else np.zeros((s1, 0), bool)
            s = np.matmul(q[b, :, :s1].astype(mm_dt), np.swapaxes(k[b, :, :s2].astype(mm_dt), -1, -2))
            if int8_in:
                s = s * mm_dt(scales["deq1"])
            s = np.where(keep, r(s) * scale, r(-np.inf))
            m = s.max(axis=-1, keepdims=True) if s2 else np.full((n, s1, 1), -np.inf)
            e = np.exp(s - np.where(np.isfinite(m), m, r(0)))
            p = e / e.sum(axis=-1, keepdims=True, dtype=e.dtype)
            o = r(np.matmul(p.astype(mm_dt), v[b, :, :s2].astype(mm_dt)))
            if int8_in:
                o = o * post
            o = np.where(np.isfinite(m), o, r(0))  # fully masked rows -> 0
            if int8_out:
                o = o * q2 + off2
            out[b, :, :s1] = o.astype(np.float64)
    return from_bnsd(out, problem.layout)


def _scales(deq_scale1, quant_scale1, deq_scale2, quant_scale2, quant_offset2) -> dict:
    return dict(deq1=_scalar(deq_scale1), q1=_scalar(quant_scale1), deq2=_scalar(deq_scale2),
                q2=quant_scale2, off2=quant_offset2)


def pfa_reference64(problem, query, key, value, atten_mask=None, *, deq_scale1=None, quant_scale1=None,
                    deq_scale2=None, quant_scale2=None, quant_offset2=None) -> np.ndarray:
    """The exact formula in float64, in ``problem.out_layout`` (float64, shape ``problem.out_shape``).

    Arguments as for ``pfa_golden`` (without the tiling). The compressed mask of modes 2/3/4 is not
    read (the mode defines the band). int8 output: the unrounded ``O * q2 + offset2``.
    """
    scales = _scales(deq_scale1, quant_scale1, deq_scale2, quant_scale2, quant_offset2)
    return _formula(problem, query, key, value, atten_mask, _F64, scales)


def lowp_dtype(problem) -> np.dtype:
    """The dtype of :func:`pfa_lowp`: the input dtype, fp16 for int8 inputs (their softmax dtype)."""
    dt = np.dtype(problem.dtype)
    return np.dtype(np.float16) if dt == _INT8 else dt


def pfa_lowp(problem, query, key, value, atten_mask=None, *, deq_scale1=None, quant_scale1=None,
             deq_scale2=None, quant_scale2=None, quant_offset2=None) -> np.ndarray:
    """The same formula run in :func:`lowp_dtype` (research/oracles.md §1 ``out_pt``), as float64.

    Each step's result is rounded to the low dtype: scores (a float32 matmul, times deq1 for int8,
    rounded), the scale multiply, max, exp, sum, the division, PV (float32 matmul, rounded), the
    dequant factor ``quant_scale1 * deq_scale2`` and, for int8 output, ``* q2 + offset2``.
    """
    scales = _scales(deq_scale1, quant_scale1, deq_scale2, quant_scale2, quant_offset2)
    dt = lowp_dtype(problem)
    if dt not in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        raise NotImplementedError(f"pfa_lowp: input dtype {dt}")
    return _formula(problem, query, key, value, atten_mask, dt, scales)
