"""Untiled reference of FlashAttentionVarLenScore: the seed's formula in float64, or with every step
rounded to the input dtype (the "out_lowp" of NUMERICS.md check 2).

Why: the golden is bit-exact with the kernel but shares its tiling; this module checks both against
the mathematics, ``Dropout(Softmax(Mask(scale * (QK^T + pse))), keep_prob) @ V`` (seed formula), with
no tiles, no online softmax and no instruction order. Semantics from research/oracles.md §0 and the
FaVarLenProblem description, restated here:

- mask: row i, column j of batch b are kept iff ``-pre_lu[b] <= j - i <= next_lu[b]`` (left-up
  canonical tokens), or ``j < prefix[b]`` for sparse 6, and, for sparse 0/1, ``atten_mask[i, j] == 0``
  (top-left [Sq, Skv] of the [maxSq, maxSkv] mask); no atten_mask: everything is kept;
- pse "full": element ``N1*cuSS[b] + n*SS[b] + i*Skv[b] + j``; "alibi": the last 1024 rows of a
  bottom-right aligned pse that is constant along diagonals, so ``pse(i, j) = A(j - i + maxSkv - 1024)``
  with A(d) read at any (m, k) of the [1024, maxSkv] block with ``k - m = d``;
- dropout: the explicit keep bits (little-endian, same index as the full pse), ``P * keep / keep_prob``
  with keep_prob as the fp32 attribute;
- GQA: query head n reads key/value head ``n // G``; zero-length batches have no rows;
- fully masked rows: output 0, max -inf, sum 0.

Contents: :func:`fa_var_len_reference`; :func:`keep_matrix`, :func:`pse_matrix` and :func:`rounder` (also used by
the backward operator's reference).
"""
from __future__ import annotations

import numpy as np

from npusim.dtypes import cast

_ALIBI_ROWS = 1024


def rounder(dtype):
    """x -> x rounded once to *dtype* (nearest even), returned as float64; identity for None."""
    if dtype is None:
        return lambda x: np.asarray(x, np.float64)
    dt = np.dtype(dtype)

    def rnd(x):
        with np.errstate(all="ignore"):
            return np.asarray(cast(np.asarray(x, np.float64), dt, "rint")).astype(np.float64)
    return rnd


def keep_matrix(problem, atten_mask, prefix, b: int) -> np.ndarray:
    """bool [Sq, Skv]: True where the score of batch b takes part (module docstring)."""
    sq, skv = int(problem.seq_q[b]), int(problem.seq_kv[b])
    d = np.arange(skv)[None, :] - np.arange(sq)[:, None]
    if problem.mask_form == "none":
        return np.ones((sq, skv), bool)
    keep = (d >= -int(problem.pre_tokens_lu[b])) & (d <= int(problem.next_tokens_lu[b]))
    if problem.mask_form == "full":
        keep &= np.asarray(atten_mask)[:sq, :skv] == 0
    elif problem.mask_form == "prefix_3072":
        keep |= np.arange(skv)[None, :] < int(prefix[b])
    return keep


def _alibi_diag(src: np.ndarray, diag: np.ndarray) -> np.ndarray:
    """A(d) of a [N1, 1024, maxSkv] diagonal-constant block for every d in *diag*; 0 where the
    diagonal has no element in the block (such positions are masked: alibi needs a causal mask)."""
    rows, cols = src.shape[1:]
    m = np.maximum(-diag, 0)
    k = m + diag
    ok = (m < rows) & (k < cols)
    out = np.zeros((src.shape[0],) + diag.shape)
    out[:, ok] = src[:, m[ok], k[ok]].astype(np.float64)
    return out


def pse_matrix(problem, real_shift, b: int, cu_ss: int) -> np.ndarray | None:
    """float64 [N1, Sq, Skv] pse of batch b, or None."""
    if problem.pse_form == "none":
        return None
    sq, skv, n1 = int(problem.seq_q[b]), int(problem.seq_kv[b]), problem.N1
    rs = np.asarray(real_shift)
    if problem.pse_form == "full":
        return rs[n1 * cu_ss:n1 * (cu_ss + sq * skv)].reshape(n1, sq, skv).astype(np.float64)
    diag = np.arange(skv)[None, :] - np.arange(sq)[:, None] + problem.max_skv - _ALIBI_ROWS
    return _alibi_diag(rs[b % rs.shape[0]], diag)


def fa_var_len_reference(problem, query, key, value, *, real_shift=None, drop_mask=None, atten_mask=None,
                         prefix=None, dtype=None) -> dict:
    """The seed formula for one validated call (*problem*: its FaVarLenProblem), untiled.

    *dtype* None: float64 throughout; a float dtype (normally the input dtype): every step (QK^T,
    + pse, * scale, max, exp, sum, divide, dropout, PV) rounded once to it. Returns float64 arrays
    ``attention_out`` [T1, N1, D], ``softmax_max`` and ``softmax_sum`` [T1, N1] (max of the scaled,
    masked scores; sum of exp(s - max) before dropout). Fully masked rows: 0, -inf, 0.
    """
    p = problem
    rnd = rounder(dtype)
    pfx = p.prefix_n if prefix is None else prefix
    q, k, v = (np.asarray(x).astype(np.float64) for x in (query, key, value))
    keep_bits = None
    if drop_mask is not None:
        keep_bits = np.unpackbits(np.ascontiguousarray(drop_mask).view(np.uint8).reshape(-1), bitorder="little")
    keep_prob = float(np.float32(p.keep_prob))
    out = np.zeros((p.T1, p.N1, p.D))
    smax = np.full((p.T1, p.N1), -np.inf)
    ssum = np.zeros((p.T1, p.N1))
    cu_ss = 0
    for b in range(p.B):
        sq, skv = int(p.seq_q[b]), int(p.seq_kv[b])
        cq, ck = int(p.cu_seq_q[b]), int(p.cu_seq_kv[b])
        if sq == 0:
            cu_ss += sq * skv
            continue
        keep = keep_matrix(p, atten_mask, pfx, b)
        pse = pse_matrix(p, real_shift, b, cu_ss)
        alive = keep.any(axis=1)
        for n in range(p.N1):
            qn, kn, vn = q[cq:cq + sq, n], k[ck:ck + skv, n // p.G], v[ck:ck + skv, n // p.G]
            s = rnd(qn @ kn.T)
            if pse is not None:
                s = rnd(s + pse[n])
            s = rnd(s * float(np.float32(p.scale)))
            mx = np.where(keep, s, -np.inf).max(axis=1, initial=-np.inf)
            with np.errstate(invalid="ignore", over="ignore"):
                e = np.where(keep, rnd(np.exp(rnd(s - np.where(alive, mx, 0.0)[:, None]))), 0.0)
            sm = rnd(e.sum(axis=1))
            pr = rnd(e / np.where(alive, sm, 1.0)[:, None])
            if keep_bits is not None:
                base = p.N1 * cu_ss + n * sq * skv
                kb = keep_bits[base:base + sq * skv].reshape(sq, skv)
                pr = rnd(pr * kb / keep_prob)
            on = rnd(pr @ vn)
            on[~alive] = 0.0
            out[cq:cq + sq, n] = on
            smax[cq:cq + sq, n] = mx
            ssum[cq:cq + sq, n] = sm
        cu_ss += sq * skv
    return {"attention_out": out, "softmax_max": smax, "softmax_sum": ssum}
