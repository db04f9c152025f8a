"""Independent numpy golden of aclnnSparseFlashAttentionGrad: docs/sfag.md "Dataflow", bit for bit.

Why: the simulator kernel must equal this output bit for bit (NUMERICS.md check 1). This module
re-derives from docs/sfag.md alone the token split over cores, the chunks of 512 gathered rows and
their 64-row cube pieces, the index semantics (-1 ends a list; rows past S2 are zero and masked; rows
past the causal threshold masked), and every operation with its dtype and order: the Mmad fractal
order (``mmad``, shared with the forward golden), scale, -inf mask, exp, division, the casts, the
rowsum fold (``row_sum``), the fp32 scatter-adds and the post scaling and cast. It shares no code
with the simulator except the ``npusim.dtypes.cast`` codec.

Atomic order: each core's scatter-adds are listed in its program order; the recorded order of the
run (``atomic_log``: (buffer, block, sub-core, per-stream sequence number) as committed) says how the
cores' lists interleave (the issue allows the golden to take the recorded order). The deterministic
variant's order (round by round, cores in block order) is derived here, without the log.
"""
from __future__ import annotations

import numpy as np

from npusim.dtypes import cast, dtype_name
from ops.flash_attention_var_len_score.golden import mmad, row_sum

_F32 = np.dtype(np.float32)
_QNAN32 = 0x7FC00000
CHUNK_ROWS, PIECE_ROWS, N_CHUNK = 512, 64, 128


def _canon(x: np.ndarray) -> np.ndarray:
    nan = np.isnan(x)
    if nan.any():
        x.view(np.uint32)[nan] = _QNAN32
    return x


def _f32(fn, *args) -> np.ndarray:
    """An fp32 vector op: IEEE on fp32 operands, NaN canonical."""
    with np.errstate(all="ignore"):
        return _canon(np.asarray(fn(*(np.asarray(a, _F32) for a in args)), _F32))


def _via_f64(fn, *args) -> np.ndarray:
    """Exp / Div: float64 of the fp32 inputs, rounded once to fp32."""
    with np.errstate(all="ignore"):
        r = fn(*(np.asarray(a, np.float64) for a in args))
    return _canon(np.asarray(cast(r, "fp32")))


def _token_chunks(row, n, bs, s2, thr):
    """[(slot list [(j, v, rows)], columns, live mask)] of one token (doc "Index semantics")."""
    cs = CHUNK_ROWS // bs
    nblk = -(-s2 // bs)
    out = []
    for c0 in range(0, n, cs):
        m = min(cs, n - c0)
        blocks, live = [], np.zeros(m * bs, bool)
        for j in range(m):
            v = int(row[c0 + j])
            if 0 <= v < nblk:
                rows = min(bs, s2 - v * bs)
                blocks.append((j, v, rows))
                live[j * bs:j * bs + max(0, min(rows, thr - v * bs))] = True
        out.append((blocks, m * bs, live))
    return out


def sfag_golden(problem, query, key, value, d_out, out, softmax_max, softmax_sum, query_rope=None, key_rope=None,
                block_dim: int = 1, atomic_log=None) -> dict:
    """Outputs of one validated call (*problem*: validate.SfagProblem) run on *block_dim* cores."""
    dt = np.dtype(problem.dtype)
    name = dtype_name(dt)
    T1, T2, G, D, Dr = problem.T1, problem.T2, problem.G, problem.D, problem.Dr
    Dt, bs = D + Dr, problem.block_size
    q = np.asarray(query).reshape(T1, G, D).astype(_F32)
    do = np.asarray(d_out).reshape(T1, G, D).astype(_F32)
    o = np.asarray(out).reshape(T1, G, D).astype(_F32)
    k = np.asarray(key).reshape(T2, D).astype(_F32)
    v = np.asarray(value).reshape(T2, D).astype(_F32)
    if Dr:
        q = np.concatenate([q, np.asarray(query_rope).reshape(T1, G, Dr).astype(_F32)], axis=-1)
        k = np.concatenate([k, np.asarray(key_rope).reshape(T2, Dr).astype(_F32)], axis=-1)
    mx = np.asarray(softmax_max, _F32).reshape(T1, G)
    sm = np.asarray(softmax_sum, _F32).reshape(T1, G)
    scale = np.float32(problem.scale)
    indices = problem.indices
    batch = np.repeat(np.arange(problem.B), problem.seq_q)
    ws = {"dq": np.zeros((T1 * G, Dt), _F32), "dk": np.zeros((T2, Dt), _F32), "dv": np.zeros((T2, D), _F32)}
    ops = []  # per core, per chunk: (buffer, first row, row count, first column, values) in program order
    for c in range(block_dim):
        core_chunks = []
        for t in range(c, T1, block_dim):
            b = int(batch[t])
            s1, s2, kv0 = t - int(problem.cu_q[b]), int(problem.seq_kv[b]), int(problem.cu_kv[b])
            thr = s2 if problem.sparse_mode == 0 else min(s2, s1 + s2 - int(problem.seq_q[b]) + 1)
            row = indices[t]
            ends = np.flatnonzero(row == -1)
            n = int(ends[0]) if ends.size else row.size
            rs = row_sum(_f32(np.multiply, do[t], o[t]))  # [G]
            for blocks, cols, live in _token_chunks(row, n, bs, s2, thr):
                ksel = np.zeros((cols, Dt), _F32)
                vsel = np.zeros((cols, D), _F32)
                for j, blk, rows in blocks:
                    ksel[j * bs:j * bs + rows] = k[kv0 + blk * bs:kv0 + blk * bs + rows]
                    vsel[j * bs:j * bs + rows] = v[kv0 + blk * bs:kv0 + blk * bs + rows]
                s = mmad(q[t], ksel, 16)  # [G, cols]
                dp = mmad(do[t], vsel, 16)
                s = _f32(np.multiply, s, scale)
                s[:, ~live] = -np.inf
                s = _f32(np.subtract, s, mx[t][:, None])
                p = _via_f64(np.exp, s)
                p = _via_f64(np.divide, p, sm[t][:, None])
                p_low = cast(p, name, "round").astype(_F32)
                ds = _f32(np.subtract, dp, rs[:, None])
                ds = _f32(np.multiply, ds, p)
                ds_low = cast(ds, name, "round").astype(_F32)
                core_ops = []
                core_chunks.append(core_ops)
                for p0 in range(0, cols, PIECE_ROWS):
                    pr = min(PIECE_ROWS, cols - p0)
                    dests = [(j * bs - p0, rows, kv0 + blk * bs) for j, blk, rows in blocks if p0 <= j * bs < p0 + pr]
                    for buf, a, bmat, width in (("dv", p_low, do[t], D), ("dk", ds_low, q[t], Dt)):
                        for nc in range(0, width, N_CHUNK):
                            ncols = min(N_CHUNK, width - nc)
                            cmat = mmad(a[:, p0:p0 + pr].T, bmat[:, nc:nc + ncols].T, 16)
                            for lrow, rows, drow in dests:
                                core_ops.append((buf, drow, rows, nc, cmat[lrow:lrow + rows]))
                for nc in range(0, Dt, N_CHUNK):  # dQ of the chunk, accumulated over its pieces in L0C
                    ncols = min(N_CHUNK, Dt - nc)
                    cmat = mmad(ds_low, ksel[:, nc:nc + ncols].T, 16)
                    core_ops.append(("dq", t * G, G, nc, cmat))
        ops.append(core_chunks)
    order = _order(ops, None if problem.deterministic else atomic_log)
    with np.errstate(all="ignore"):
        for buf, r0, rows, c0, vals in order:
            dst = ws[buf][r0:r0 + rows, c0:c0 + vals.shape[1]]
            dst[...] = dst + vals
    out_q = _post(ws["dq"], scale, name).reshape(T1, G, Dt)
    out_k = _post(ws["dk"], scale, name)
    out_v = _post(ws["dv"], None, name)
    res = {"d_query": out_q[..., :D].reshape(problem.q_shape), "d_key": out_k[:, :D].reshape(problem.k_shape),
           "d_value": out_v.reshape(problem.k_shape)}
    if Dr:
        res["d_query_rope"] = out_q[..., D:].reshape(problem.q_rope_shape)
        res["d_key_rope"] = out_k[:, D:].reshape(problem.k_rope_shape)
    return res


def _order(ops, atomic_log) -> list:
    """The scatter-adds in commit order. No log (deterministic variant): round by round, cores in block
    order within a round (docs/sfag.md "Deterministic"). With a log: its (block, sequence) order."""
    if atomic_log is None:
        rounds = max((len(c) for c in ops), default=0)
        return [op for r in range(rounds) for c in ops if r < len(c) for op in c[r]]
    flat = [[op for chunk in c for op in chunk] for c in ops]
    order = [(int(block), int(seq) - 1) for _, block, _, seq in atomic_log]
    expected = sum(len(x) for x in flat)
    if len(order) != expected or len(set(order)) != expected or \
            any(not (0 <= c < len(flat) and 0 <= i < len(flat[c])) for c, i in order):
        raise ValueError(f"atomic log of {len(order)} writes does not match the golden's {expected} scatter-adds")
    return [flat[c][i] for c, i in order]


def _post(acc: np.ndarray, scale, name: str) -> np.ndarray:
    """cast(acc * scale) (or cast(acc)), round to nearest, ties away from zero (CAST_ROUND, as the CANN post)."""
    x = acc if scale is None else _f32(np.multiply, acc, scale)
    return cast(x, name, "round")
