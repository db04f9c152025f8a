"""Cases of SparseFlashAttentionGrad for the tests: random inputs, indices with the edge cases, a consistent
forward (out, softmax_max, softmax_sum from reference.sfag_forward)."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ops.sparse_flash_attention_grad.reference import sfag_forward
from ops.sparse_flash_attention_grad.validate import validate

K = 2048
D, DR = 512, 64
DTYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}


def make_indices(rng, seq_q, seq_kv, bs, mode, kind="random", max_slots=12):
    """[T1, K] int64: per token a few block indices then -1; *kind* adds edge cases:
    'random' (valid, below the causal threshold), 'edge' (duplicates, out-of-range, past-causal, -5,
    empty rows, a valid index after the -1), 'full' (no -1 at all: every slot examined)."""
    rows = []
    for sq, skv in zip(seq_q, seq_kv):
        nblk = -(-skv // bs)
        for s1 in range(sq):
            row = np.full(K, -1, np.int64)
            thr = skv if mode == 0 else s1 + skv - sq + 1
            top = max(1, min(nblk, -(-max(thr, 1) // bs)))
            n = int(rng.integers(1, max_slots + 1))
            vals = rng.integers(0, top, n)
            if kind == "edge":
                r = rng.random()
                if r < 0.15:
                    vals = vals[:0]  # a row with no block
                else:
                    extra = [nblk, nblk + 3, -5, int(vals[0]), top + 1, 2 ** 40]
                    vals = np.concatenate([vals, rng.choice(extra, 3)])
                    rng.shuffle(vals)
            row[:vals.size] = vals
            if kind == "edge" and vals.size + 2 < K:
                row[vals.size + 1] = 0  # after the terminator: never read
            if kind == "full":
                row[:] = rng.integers(0, nblk, K)
            rows.append(row)
    return np.array(rows, np.int64).reshape(-1, K)


def make_case(seed=0, layout="BSND", dtype="fp16", B=1, S1=3, S2=40, N1=2, rope=True, bs=8, mode=0, kind="random",
              seq_q=None, seq_kv=None, index_dtype=np.int64, deterministic=False, max_slots=12, forward=True):
    """(args tuple, kwargs) of one call, plus the validated problem (*forward* False: out, softmax_max and
    softmax_sum are left as placeholders, for callers that only read the shapes and indices)."""
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    if layout == "TND":
        seq_q = list(seq_q or [S1] * B)
        seq_kv = list(seq_kv or [S2] * len(seq_q))
        T1, T2 = sum(seq_q), sum(seq_kv)
        qs, ks, lead = (T1, N1), (T2, 1), (T1,)
    else:
        seq_q, seq_kv = [S1] * B, [S2] * B
        qs, ks, lead = (B, S1, N1), (B, S2, 1), (B, S1)
    q = rng.standard_normal(qs + (D,)).astype(dt)
    k = rng.standard_normal(ks + (D,)).astype(dt)
    v = rng.standard_normal(ks + (D,)).astype(dt)
    qr = rng.standard_normal(qs + (DR,)).astype(dt) if rope else None
    kr = rng.standard_normal(ks + (DR,)).astype(dt) if rope else None
    do = rng.standard_normal(qs + (D,)).astype(dt)
    idx = make_indices(rng, seq_q, seq_kv, bs, mode, kind, max_slots).reshape(lead + (1, K)).astype(index_dtype)
    sm_shape = (1, lead[0], N1) if layout == "TND" else (B, 1, S1, N1)
    placeholder = np.zeros(sm_shape, np.float32)
    kw = dict(scale_value=1.0 / np.sqrt(D + (DR if rope else 0)), sparse_block_size=bs, layout=layout,
              sparse_mode=mode, deterministic=deterministic)
    if layout == "TND":
        kw.update(actual_seq_lengths_query=np.cumsum(seq_q).astype(np.int64),
                  actual_seq_lengths_kv=np.cumsum(seq_kv).astype(np.int64))
    kw.update(query_rope=qr, key_rope=kr)
    problem = validate(q, k, v, idx, do, do, placeholder, placeholder, kw.get("actual_seq_lengths_query"),
                       kw.get("actual_seq_lengths_kv"), qr, kr, kw["scale_value"], bs, layout, mode)
    if not forward:
        return (q, k, v, idx, do, do, placeholder, placeholder), kw, problem
    out, smax, ssum = sfag_forward(problem, q, k, v, qr, kr)
    return (q, k, v, idx, do, out, smax, ssum), kw, problem
