"""Float64 reference of SparseFlashAttentionGrad (NUMERICS.md check 2) and a forward to make its inputs.

Why: the golden proves the kernel does what docs/sfag.md says, bit for bit; this module proves that
what docs/sfag.md says is the mathematics (research/oracles.md §5 "CPU oracle for SFAG"): per query
token, gather the live key positions of its selected blocks (docs/sfag.md "Index semantics"; a
duplicated block is gathered twice), recompute P = exp(scale * [q|qr][k|kr]^T - max) / sum from the
given softmax statistics, and apply the chain rule with q, q_rope, k, k_rope and v as separate
tensors: dP = dO V^T, dS = P (dP - rowsum(dO * O)), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO.

``precision="lowp"`` runs the same untiled formula as the flash-attention tests' baseline: fp32
matmuls on inputs in the input dtype, with P and dS rounded to the input dtype before the second
matmuls and the gradients rounded at the end (NUMERICS.md "out_lowp").
"""
from __future__ import annotations

import numpy as np


def live_positions(problem, t: int) -> np.ndarray:
    """Key positions (within the batch) that token *t* attends, in slot order, duplicates kept."""
    b = int(np.searchsorted(problem.cu_q, t, side="right") - 1)
    s1, s2, sq = t - int(problem.cu_q[b]), int(problem.seq_kv[b]), int(problem.seq_q[b])
    bs = problem.block_size
    thr = s2 if problem.sparse_mode == 0 else min(s2, s1 + s2 - sq + 1)
    row = np.asarray(problem.indices[t])
    stop = np.flatnonzero(row == -1)
    row = row[: int(stop[0]) if stop.size else row.size].astype(np.int64)
    row = row[(row >= 0) & (row < -(-s2 // bs))]
    pos = (row[:, None] * bs + np.arange(bs)[None, :]).reshape(-1)
    return pos[pos < thr]


def _flat(problem, query, key, value, d_out, out, query_rope, key_rope, dt):
    T1, T2, G, D = problem.T1, problem.T2, problem.G, problem.D
    q = np.asarray(query).reshape(T1, G, D).astype(dt)
    k = np.asarray(key).reshape(T2, D).astype(dt)
    v = np.asarray(value).reshape(T2, D).astype(dt)
    do = None if d_out is None else np.asarray(d_out).reshape(T1, G, D).astype(dt)
    o = None if out is None else np.asarray(out).reshape(T1, G, D).astype(dt)
    if problem.Dr:
        q = np.concatenate([q, np.asarray(query_rope).reshape(T1, G, problem.Dr).astype(dt)], axis=-1)
        k = np.concatenate([k, np.asarray(key_rope).reshape(T2, problem.Dr).astype(dt)], axis=-1)
    return q, k, v, do, o


def sfag_forward(problem, query, key, value, query_rope=None, key_rope=None):
    """(out in the input dtype, softmax_max fp32, softmax_sum fp32) in the seed's shapes, computed in float64:
    consistent inputs for the backward. Tokens with no live position get out = 0, max = 0, sum = 1."""
    q, k, v, _, _ = _flat(problem, query, key, value, None, None, query_rope, key_rope, np.float64)
    T1, G, D = problem.T1, problem.G, problem.D
    out = np.zeros((T1, G, D))
    mx, sm = np.zeros((T1, G)), np.ones((T1, G))
    for t in range(T1):
        pos = live_positions(problem, t)
        if pos.size == 0:
            continue
        rows = int(problem.cu_kv[np.searchsorted(problem.cu_q, t, side="right") - 1]) + pos
        s = problem.scale * (q[t] @ k[rows].T)
        mx[t] = s.max(axis=1)
        e = np.exp(s - mx[t][:, None])
        sm[t] = e.sum(axis=1)
        out[t] = (e / sm[t][:, None]) @ v[rows]
    sm_shape = (problem.B, 1, problem.T1 // problem.B, G) if problem.layout == "BSND" else (1, T1, G)
    return (out.reshape(problem.q_shape).astype(problem.dtype), mx.astype(np.float32).reshape(sm_shape),
            sm.astype(np.float32).reshape(sm_shape))


def sfag_reference(problem, query, key, value, d_out, out, softmax_max, softmax_sum, query_rope=None,
                   key_rope=None, precision: str = "float64") -> dict:
    """Gradients in float64 (``precision="float64"``) or as the low-precision baseline (``"lowp"``)."""
    lowp = precision == "lowp"
    dt = np.float32 if lowp else np.float64
    q, k, v, do, o = _flat(problem, query, key, value, d_out, out, query_rope, key_rope, dt)
    T1, T2, G, D, Dr = problem.T1, problem.T2, problem.G, problem.D, problem.Dr
    mx = np.asarray(softmax_max, np.float64).reshape(T1, G).astype(dt)
    sm = np.asarray(softmax_sum, np.float64).reshape(T1, G).astype(dt)
    scale = dt(problem.scale)
    rnd = (lambda x: x.astype(problem.dtype).astype(dt)) if lowp else (lambda x: x)
    dq = np.zeros((T1, G, D + Dr), dt)
    dk = np.zeros((T2, D + Dr), dt)
    dv = np.zeros((T2, D), dt)
    with np.errstate(all="ignore"):
        for t in range(T1):
            pos = live_positions(problem, t)
            if pos.size == 0:
                continue
            rows = int(problem.cu_kv[np.searchsorted(problem.cu_q, t, side="right") - 1]) + pos
            p = np.exp(scale * (q[t] @ k[rows].T) - mx[t][:, None]) / sm[t][:, None]
            dp = do[t] @ v[rows].T
            ds = p * (dp - (do[t] * o[t]).sum(axis=1)[:, None])
            p, ds = rnd(p), rnd(ds)
            dq[t] = scale * (ds @ k[rows])
            np.add.at(dk, rows, scale * (ds.T @ q[t]))
            np.add.at(dv, rows, p.T @ do[t])
    res = {"d_query": dq[..., :D].reshape(problem.q_shape), "d_key": dk[:, :D].reshape(problem.k_shape),
           "d_value": dv.reshape(problem.k_shape)}
    if Dr:
        res["d_query_rope"] = dq[..., D:].reshape(problem.q_rope_shape)
        res["d_key_rope"] = dk[:, D:].reshape(problem.k_rope_shape)
    if lowp:
        res = {n: a.astype(problem.dtype) for n, a in res.items()}
    return res
