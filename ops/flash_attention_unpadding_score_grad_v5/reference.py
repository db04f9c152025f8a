"""Untiled reference of FlashAttentionUnpaddingScoreGradV5: the seed's formulas in float64 (or with every step
rounded once to a dtype, the "out_lowp" of NUMERICS.md check 2). No autograd, no tiles, no kernel order.

Why: the golden is bit-exact with the kernel but shares its tiling; this module checks both against
the mathematics (seed 功能说明, research/oracles.md §0, §2, §4), restated here for one batch b and
query head n (key/value head n // G):

    S  = [Q | Q_rope] [K | K_rope]^T                       (rope: concatenated along D)
    S' = (S + pse) * scale   (pse_type 1)    S * scale + pse   (0)
         S * scale - slope * |j + kv_start - i - q_start|    (2; 3: sqrt of the distance)
    P  = exp(S' - max) / sum  where kept (mask, sparse mode), else 0; max / sum are the forward's
         softmax_max / softmax_sum (column 0), which include the sink when there is one
    Pd = P * keep / keep_prob,  dP = (dY V^T) * keep / keep_prob       (dropout: explicit keep bits)
    Dr = rowsum(dY * attention_in)
    dS = P * (dP - Dr);  dQ = scale dS [K | K_rope];  dK = scale dS^T [Q | Q_rope];  dV = Pd^T dY
    dsink[n] = -sum over rows of exp(sink[n] - max) / sum * rowsum(P * dP)   (the seed's dSink; equal
               to the rowsum(dY * O) form of oracles.md §4 when attention_in is the exact forward)

dK, dV sum over the G query heads of a key/value head. pse alibi (types 0/1) is the forward's
"alibi" form (the last 1024 rows of a diagonal-constant pse). :func:`fag_forward_reference` is the
matching float64 forward (with sink), used to make consistent inputs.
"""
from __future__ import annotations

import numpy as np

from ops.flash_attention_var_len_score.reference import keep_matrix, pse_matrix, rounder


def _slopes(problem, pse_shift, b: int) -> np.ndarray:
    s = np.asarray(pse_shift).astype(np.float64)
    return s[b] if s.ndim == 2 else s


def _bias(problem, pse_shift, b: int) -> np.ndarray | None:
    """float64 [N1, Sq, Skv] pse of batch b (types 0/1: the alibi tensor; 2/3: generated), or None."""
    if problem.pse_form == "none":
        return None
    if problem.pse_form == "alibi":
        return pse_matrix(problem, pse_shift, b, 0)
    sq, skv = int(problem.seq_q[b]), int(problem.seq_kv[b])
    dist = np.abs(np.arange(skv)[None, :] + problem.kv_start - np.arange(sq)[:, None] - problem.q_start)
    dist = np.sqrt(dist) if problem.pse_type == 3 else dist.astype(np.float64)
    return -_slopes(problem, pse_shift, b)[:, None, None] * dist[None]


def _scores(problem, rnd, q, k, bias_n):
    s = rnd(q @ k.T)
    scale = float(np.float32(problem.scale))
    if bias_n is None:
        return rnd(s * scale)
    if problem.pse_type == 1:
        return rnd(rnd(s + bias_n) * scale)
    return rnd(rnd(s * scale) + bias_n)


def _cat(a, b):
    return a if b is None else np.concatenate([a, b], axis=-1)


def _keep_bits(problem, drop_mask):
    if drop_mask is None:
        return None
    return np.unpackbits(np.ascontiguousarray(drop_mask).view(np.uint8).reshape(-1), bitorder="little")


def _stat(problem, x, b: int) -> np.ndarray:
    """Column 0 of softmax_max/softmax_sum for batch b as float64 [N1, Sq], in either layout."""
    x = np.asarray(x).astype(np.float64)
    cq, sq, n1 = int(problem.cu_seq_q[b]), int(problem.seq_q[b]), problem.N1
    if problem.softmax_in_layout == "same_as_input":
        return x[cq:cq + sq, :, 0].T
    return x.reshape(-1)[cq * n1 * 8:(cq + sq) * n1 * 8].reshape(n1, sq, 8)[..., 0]


def fag_forward_reference(problem, query, key_in, value, *, query_rope=None, key_in_rope=None, pse_shift=None,
                          drop_mask=None, atten_mask=None, sink_in=None, prefix=None) -> dict:
    """The float64 forward of the same call: ``attention`` [T1, N1, D], ``softmax_max`` and ``softmax_sum``
    [T1, N1] (max over the kept scaled scores and the sink; sum of exp(s - max) plus exp(sink - max)).
    Fully masked rows without sink: attention 0, max -inf, sum 0."""
    p = problem
    pfx = p.prefix_n if prefix is None else prefix
    q, k, v = (np.asarray(x).astype(np.float64) for x in (query, key_in, value))
    qr, kr = (None if x is None else np.asarray(x).astype(np.float64) for x in (query_rope, key_in_rope))
    bits = _keep_bits(p, drop_mask)
    sink = None if sink_in is None else np.asarray(sink_in).astype(np.float64)
    out = np.zeros((p.T1, p.N1, p.D))
    smax = np.full((p.T1, p.N1), -np.inf)
    ssum = np.zeros((p.T1, p.N1))
    cu_ss = 0
    for b in range(p.B):
        sq, skv = int(p.seq_q[b]), int(p.seq_kv[b])
        cq, ck = int(p.cu_seq_q[b]), int(p.cu_seq_kv[b])
        if sq:
            keep, bias = keep_matrix(p, atten_mask, pfx, b), _bias(p, pse_shift, b)
            for n in range(p.N1):
                kv = n // p.G
                qn = _cat(q[cq:cq + sq, n], None if qr is None else qr[cq:cq + sq, n])
                kn = _cat(k[ck:ck + skv, kv], None if kr is None else kr[ck:ck + skv, kv])
                s = np.where(keep, _scores(p, rounder(None), qn, kn, None if bias is None else bias[n]), -np.inf)
                m = s.max(axis=1, initial=-np.inf)
                if sink is not None:
                    m = np.maximum(m, sink[n])
                fin = np.isfinite(m)
                e = np.where(keep, np.exp(s - np.where(fin, m, 0.0)[:, None]), 0.0)
                total = e.sum(axis=1) + (0.0 if sink is None else np.exp(sink[n] - np.where(fin, m, 0.0)))
                pr = e / np.where(total > 0, total, 1.0)[:, None]
                if bits is not None:
                    base = p.N1 * cu_ss + n * sq * skv
                    pr = pr * bits[base:base + sq * skv].reshape(sq, skv) / float(np.float32(p.keep_prob))
                out[cq:cq + sq, n] = pr @ v[ck:ck + skv, kv]
                smax[cq:cq + sq, n], ssum[cq:cq + sq, n] = m, total
        cu_ss += sq * skv
    return {"attention": out, "softmax_max": smax, "softmax_sum": ssum}


def fag_reference(problem, query, key_in, value, dy, softmax_max, softmax_sum, attention_in, *, query_rope=None,
                  key_in_rope=None, pse_shift=None, drop_mask=None, atten_mask=None, sink_in=None, prefix=None,
                  dtype=None) -> dict:
    """The backward formulas (module docstring) for one validated call (*problem*: its FagProblem).

    *dtype* None: float64; a float dtype: every step rounded once to it. Returns float64 arrays ``dq``,
    ``dk``, ``dv`` (and ``dq_rope``, ``dk_rope`` with rope), and ``dsink`` [N1] with a sink.
    """
    p = problem
    rnd = rounder(dtype)
    pfx = p.prefix_n if prefix is None else prefix
    q, k, v, g, o = (np.asarray(x).astype(np.float64) for x in (query, key_in, value, dy, attention_in))
    qr, kr = (None if x is None else np.asarray(x).astype(np.float64) for x in (query_rope, key_in_rope))
    bits = _keep_bits(p, drop_mask)
    sink = None if sink_in is None else np.asarray(sink_in).astype(np.float64)
    keep_prob, scale = float(np.float32(p.keep_prob)), float(np.float32(p.scale))
    dfull = p.D + p.rope_d
    dq, dk, dv = np.zeros((p.T1, p.N1, dfull)), np.zeros((p.T2, p.N2, dfull)), np.zeros((p.T2, p.N2, p.D))
    dsink = np.zeros(p.N1)
    cu_ss = 0
    for b in range(p.B):
        sq, skv = int(p.seq_q[b]), int(p.seq_kv[b])
        cq, ck = int(p.cu_seq_q[b]), int(p.cu_seq_kv[b])
        if sq == 0:
            cu_ss += sq * skv
            continue
        keep, bias = keep_matrix(p, atten_mask, pfx, b), _bias(p, pse_shift, b)
        mx, sm = _stat(p, softmax_max, b), _stat(p, softmax_sum, b)
        for n in range(p.N1):
            kv = n // p.G
            qn = _cat(q[cq:cq + sq, n], None if qr is None else qr[cq:cq + sq, n])
            kn = _cat(k[ck:ck + skv, kv], None if kr is None else kr[ck:ck + skv, kv])
            gn, vn = g[cq:cq + sq, n], v[ck:ck + skv, kv]
            s = _scores(p, rnd, qn, kn, None if bias is None else bias[n])
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                pr = np.where(keep, rnd(rnd(np.exp(rnd(s - mx[n][:, None]))) / sm[n][:, None]), 0.0)
            pr = np.nan_to_num(pr, nan=0.0)
            dp = rnd(gn @ vn.T)
            pd = pr
            if bits is not None:
                base = p.N1 * cu_ss + n * sq * skv
                kb = bits[base:base + sq * skv].reshape(sq, skv)
                pd, dp = rnd(pr * kb / keep_prob), rnd(dp * kb / keep_prob)
            dr = rnd((gn * o[cq:cq + sq, n]).sum(axis=1))
            ds = rnd(pr * rnd(dp - dr[:, None]))
            dq[cq:cq + sq, n] = rnd(rnd(ds @ kn) * scale)
            dk[ck:ck + skv, kv] += rnd(rnd(ds.T @ qn) * scale)
            dv[ck:ck + skv, kv] += rnd(pd.T @ gn)
            if sink is not None:
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    psink = np.nan_to_num(np.exp(sink[n] - mx[n]) / sm[n], nan=0.0)
                dsink[n] -= float((psink * rnd((pr * dp).sum(axis=1))).sum())
        cu_ss += sq * skv
    out = {"dq": dq[..., :p.D], "dk": dk[..., :p.D], "dv": dv}
    if p.rope_d:
        out["dq_rope"], out["dk_rope"] = dq[..., p.D:], dk[..., p.D:]
    if sink is not None:
        out["dsink"] = dsink
    return out
