"""Independent numpy golden of aclnnPromptFlashAttentionV2: the dataflow of docs/pfa.md, bit for bit.

Why: the simulator kernel must equal this output bit for bit (NUMERICS.md check 1). The golden
re-implements "Dataflow of one item" of docs/pfa.md directly in numpy, with the same items, tiles,
operation order and dtype at every step, and shares no code with the simulator except the dtype
codecs of ``npusim.dtypes`` (``cast``, ``quantize_int8``, ``decode_deq_scale_u64``).

Work split (docs/pfa.md "Tiling"), per batch b with ``act_q = computed_seq_lengths[b]`` and
``act_kv = actual_seq_lengths_kv[b]``:
- items are blocks of ``block_rows`` query rows ``[r0, r1)`` (the tiling's blockRows: s_outer when every
  vector core is a worker, 2 * s_outer in the cube view), ``r1 = min(r0 + block_rows, act_q)``; with
  ``tail_first`` (the kernel's balance path) the partial block ``[0, act_q % block_rows)`` comes first
  and the others follow it; rows ``>= act_q`` are never computed and stay +0;
- an item's key columns are its band ``[s2First, s2Last)`` with ``s2First = clip(r0 - pre_lu, 0,
  act_kv)`` and ``s2Last = clip(r0 + next_lu + (r1 - r0), 0, act_kv)``. Derivation: row r keeps
  column c iff ``-pre_lu <= c - r <= next_lu``, so the union over r in [r0, r1) is
  ``r0 - pre_lu <= c <= r1 - 1 + next_lu``, i.e. the half-open ``[r0 - pre_lu, r1 + next_lu)``,
  clipped to the batch's keys. The row count ``r1 - r0`` (not the full block height) is used;
- tiles are the columns cut at multiples of ``s_inner`` and clipped to ``act_kv``; an item computes
  the tiles that intersect its band and skips the others; with no tile it is skipped (rows stay 0).

Rows are independent, so all query heads of one (batch, block) are computed together; head n reads
key/value head ``n // G``. Every vector result that is NaN becomes the positive canonical quiet NaN
(docs/numerics.md "Vector instructions", NaN); the scores mmad keeps numpy's IEEE NaN, which the
first vector op then canonicalises.

Contents: :func:`pfa_golden`, :func:`mmad_fp32` (the fixed Mmad order of docs/numerics_cube.md),
:func:`mmad_int8`, :func:`row_sum` (the fold + WholeReduceSum order of docs/pfa.md step 7).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.dtypes import cast, decode_deq_scale_u64, quantize_int8
from ops.common.layouts import from_bnsd, to_bnsd
from ops.prompt_flash_attention_v2.contract import MaskKind

_F32 = np.dtype(np.float32)
_FP16 = np.dtype(np.float16)
_INT8 = np.dtype(np.int8)
#: Masked score value per softmax dtype (docs/pfa.md Notation: -65504 for fp16, -FLT_MAX for fp32).
MASK_VALUES = {_FP16: -65504.0, _F32: float(-np.finfo(np.float32).max)}
_VECTOR_BYTES = 256  # one vector repeat (docs/pfa.md Notation: lanes = 256 B / size(T))
_K0 = 16  # k fractal width of fp16/bf16 Mmad (docs/numerics_cube.md, C0 of a 2-byte dtype)
_MMAD_CHUNK_ELEMS = 1 << 22  # products materialised at once (memory bound only, not numerics)


# --- instruction-level helpers -----------------------------------------------------------------
def _canon(x: np.ndarray) -> np.ndarray:
    """Every NaN -> the positive canonical quiet NaN of x's dtype (np.nan stores exactly that for
    float16 0x7E00 and float32 0x7FC00000). In place; returns *x*."""
    nan = np.isnan(x)
    if nan.any():
        x[nan] = np.nan
    return x


def _exp(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Correctly rounded Exp in *dt*: float64 exp of the exact input, rounded once (numerics.md)."""
    return _canon(cast(np.exp(x.astype(np.float64)), dt))


def mmad_fp32(a: np.ndarray, bt: np.ndarray) -> np.ndarray:
    """``C[..., i, j] = sum_t a[..., i, t] * bt[..., j, t]`` in the fixed Mmad order (float32).

    docs/numerics_cube.md "Mmad": products in fp32 (exact for fp16/bf16 inputs), each 16-wide k
    fractal summed by the adjacent-pair tree, fractal sums added in ascending order to an
    accumulator that starts at +0. k is zero-padded to a multiple of 16 (the Mmad reads indices
    >= k as +0). *a*: [..., M, K], *bt*: [..., N, K] (B transposed), same leading dims.
    """
    a = np.asarray(a, np.float32)
    bt = np.asarray(bt, np.float32)
    k = a.shape[-1]
    k1 = -(-k // _K0)
    if k1 * _K0 != k:
        a, bt = (np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, k1 * _K0 - k)]) for x in (a, bt))
    lead = np.broadcast_shapes(a.shape[:-2], bt.shape[:-2])
    m, n = a.shape[-2], bt.shape[-2]
    # k first: [K, ..., M] and [K, ..., N], so the tree halves contiguous blocks
    ak = np.moveaxis(a, -1, 0)[..., :, None]
    bk = np.moveaxis(bt, -1, 0)[..., None, :]
    acc = np.zeros(lead + (m, n), np.float32)
    per_fractal = _K0 * max(1, int(np.prod(lead + (m, n))))
    step = max(1, _MMAD_CHUNK_ELEMS // per_fractal)
    for f0 in range(0, k1, step):
        f1 = min(f0 + step, k1)
        p = ak[f0 * _K0:f1 * _K0] * bk[f0 * _K0:f1 * _K0]  # [nf*16, ..., M, N] fp32 products
        p = p.reshape((f1 - f0, _K0) + p.shape[1:])
        while p.shape[1] > 1:  # adjacent pairs: (p0+p1), (p2+p3), ... then their sums
            p = p[:, 0::2] + p[:, 1::2]
        for s in p[:, 0]:  # ascending fractal order, one fp32 addition each
            acc = acc + s
    return acc


def mmad_int8(a: np.ndarray, bt: np.ndarray) -> np.ndarray:
    """Exact int32 ``sum_t a[..., i, t] * bt[..., j, t]`` (wrapping mod 2**32, numerics_cube.md);
    integer matmul on int64, which is exact and order-free."""
    c = np.matmul(np.asarray(a, np.int64), np.swapaxes(np.asarray(bt, np.int64), -1, -2))
    return ((c + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def row_sum(e: np.ndarray, lanes: int) -> np.ndarray:
    """Row sums of *e* (last axis, C columns) in e's dtype, in docs/pfa.md step 7's order.

    Fold into *lanes* accumulators (``acc[l] = E[l]``, then ``acc[l] += E[k*lanes + l]`` for each
    further chunk k, columns < C only), then the WholeReduceSum tree over ``min(lanes, C)``
    accumulators: adjacent pairs first, lanes past the count contribute -0 (numerics.md).
    """
    c = e.shape[-1]
    width = min(lanes, c)
    acc = np.full(e.shape[:-1] + (lanes,), -0.0, dtype=e.dtype)
    acc[..., :width] = e[..., :width]
    for c0 in range(lanes, c, lanes):
        seg = e[..., c0:min(c0 + lanes, c)]
        acc[..., :seg.shape[-1]] = _canon(acc[..., :seg.shape[-1]] + seg)
    while acc.shape[-1] > 1:
        acc = _canon(acc[..., 0::2] + acc[..., 1::2])
    return acc[..., 0]


def _deq_fp16(x: np.ndarray, scale: np.float32) -> np.ndarray:
    """Fixpipe DEQF16: ``fp16(fp32(fp32(x) * scale))`` (numerics_cube.md "Fixpipe")."""
    return cast(cast(x, "fp32") * scale, "fp16")


def _scalar_f32(x, name: str) -> np.float32:
    """A per-tensor scale as fp32: a uint64 FP19 word is decoded, anything else read as fp32."""
    if x is None:
        raise ValueError(f"{name} is required on this quant path")
    arr = np.asarray(x)
    if arr.size != 1:
        raise ValueError(f"{name} must hold one value, got shape {arr.shape}")
    if arr.dtype == np.uint64:
        return np.float32(decode_deq_scale_u64(arr.reshape(-1))[0])
    return np.float32(arr.reshape(-1)[0].astype(np.float32))


# --- the per-call constants ----------------------------------------------------------------------
@dataclass(frozen=True)
class _Ctx:
    """What every tile step needs: dtypes, constants and the quant scales."""

    t: np.dtype  # softmax dtype T
    p_dt: np.dtype  # dtype of P fed to the second matmul
    lanes: int
    mask_t: np.ndarray  # MASK_VALUE in T (0-d)
    mask32: np.float32  # fp32(MASK_VALUE), the finalisation test
    scale_t: np.ndarray  # T(scale_value) (0-d)
    int8_in: bool
    deq1: np.float32 | None
    q1: np.float32 | None
    deq2: np.float32 | None


def _context(problem, deq_scale1, quant_scale1, deq_scale2) -> _Ctx:
    t = np.dtype(problem.softmax_dtype)
    if t not in MASK_VALUES:
        raise NotImplementedError(f"softmax dtype {t} is not modelled (fp16 or fp32)")
    int8_in = np.dtype(problem.dtype) == _INT8
    mask = MASK_VALUES[t]
    # NOTE: the scale reaches the kernel as the tiling's fp32 scaleValue; Muls rounds it to T.
    scale_t = cast(np.asarray(np.float32(problem.scale_value_fp32)), t)
    return _Ctx(t=t, p_dt=_INT8 if int8_in else np.dtype(problem.dtype), lanes=_VECTOR_BYTES // t.itemsize,
                mask_t=cast(np.asarray(mask), t), mask32=np.float32(mask), scale_t=scale_t, int8_in=int8_in,
                deq1=_scalar_f32(deq_scale1, "deq_scale1") if int8_in else None,
                q1=_scalar_f32(quant_scale1, "quant_scale1") if int8_in else None,
                deq2=_scalar_f32(deq_scale2, "deq_scale2") if int8_in else None)


# --- one item -------------------------------------------------------------------------------------
def _scores(cx: _Ctx, q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Step 1: S in T. fp: ``T(mmad)`` by RNE; int8: ``fp16(fp32(fp32(S32) * deq1))``."""
    if cx.int8_in:
        return _deq_fp16(mmad_int8(q, k), cx.deq1)
    s32 = mmad_fp32(q, k)
    return s32 if cx.t == _F32 else cast(s32, cx.t)


def _pv(cx: _Ctx, p: np.ndarray, vt: np.ndarray) -> np.ndarray:
    """Step 10: PV in fp32. fp: mmad with k = C; int8: ``fp32(fp16(fp32(int32) * deq2))``."""
    if cx.int8_in:
        return _deq_fp16(mmad_int8(p, vt), cx.deq2).astype(np.float32)
    return mmad_fp32(p, vt)


def _probs(cx: _Ctx, e: np.ndarray) -> np.ndarray:
    """Step 9: P = P_dt(E) by RNE; int8: ``int8(rint(fp16(E * fp16(q1))))`` saturating."""
    if cx.int8_in:
        return quantize_int8(e, cx.q1)  # offset 0: fp16(t + 0) = t up to the sign of 0
    return e if e.dtype == cx.p_dt else cast(e, cx.p_dt)


def _item(cx: _Ctx, q: np.ndarray, k: np.ndarray, vt: np.ndarray, tiles, drop_of) -> np.ndarray:
    """Steps 1-12 for the rows of one item, all heads at once.

    *q* [H, R, Dp], *k* [H, S2, Dp], *vt* [H, Dp, S2] (V transposed), *tiles* [(c0, c1)],
    *drop_of(c0, c1)* -> bool [R, C] of dropped elements or None. Returns O [H, R, Dp] fp32.
    """
    m = row_l = o = None
    for j, (c0, c1) in enumerate(tiles):
        s = _canon(_scores(cx, q, k[:, c0:c1]) * cx.scale_t)  # 1-2
        drop = drop_of(c0, c1)
        if drop is not None:  # 3
            s = np.where(drop, cx.mask_t, s)
        mx32 = _canon(s.max(axis=-1)).astype(np.float32)  # 4 (NaN if any NaN)
        if j == 0:  # 5
            m = mx32
        else:
            m_new = _canon(np.maximum(m, mx32))
            alpha = _exp(_canon(m - m_new), _F32)
            m = m_new
        e = _exp(_canon(s - cast(m, cx.t)[..., None]), cx.t)  # 6
        rs32 = row_sum(e, cx.lanes).astype(np.float32)  # 7
        row_l = rs32 if j == 0 else _canon(_canon(row_l * alpha) + rs32)  # 8 (docs/pfa.md's l)
        pv = _pv(cx, _probs(cx, e), vt[:, :, c0:c1])  # 9-10
        o = pv if j == 0 else _canon(_canon(o * alpha[..., None]) + pv)  # 11
    o = _canon(o / row_l[..., None])  # 12
    dead = m == cx.mask32
    if dead.any():
        o[dead] = _canon(o[dead] * np.float32(0.0))
    return o


# --- masks ----------------------------------------------------------------------------------------
def _user_mask_2d(problem, atten_mask, b: int) -> np.ndarray | None:
    """Batch b's [>=S1, >=S2] slice of a full mask (modes 0/1), or None without one."""
    if atten_mask is None or problem.mask_kind != MaskKind.FULL:
        return None
    m = np.asarray(atten_mask)
    if m.ndim == 2:
        return m
    mb = b if m.shape[0] > 1 else 0
    return m[mb] if m.ndim == 3 else m[mb, 0]


def _drop_fn(problem, mask2d, pre: int, nxt: int, r0: int, r1: int):
    """drop_of(c0, c1) for the rows [r0, r1) of one item (docs/pfa.md step 3)."""
    mode = problem.sparse_mode
    rows = np.arange(r0, r1, dtype=np.int64)[:, None]

    def drop_of(c0: int, c1: int):
        if mode in (0, 1):  # user mask only, nonzero = drop; nothing else inside a computed tile
            return None if mask2d is None else np.asarray(mask2d[r0:r1, c0:c1]) != 0
        d = np.arange(c0, c1, dtype=np.int64)[None, :] - rows  # modes 2/3/4: the LU band
        return (d < -pre) | (d > nxt)

    return drop_of


def _tiles(r0: int, r1: int, pre: int, nxt: int, act_kv: int, s_inner: int) -> list:
    """Column tiles of one item: multiples of s_inner clipped to act_kv, intersecting the band."""
    first = min(max(r0 - pre, 0), act_kv)
    last = min(max(r0 + nxt + (r1 - r0), 0), act_kv)
    if last <= first:
        return []
    return [(c0, min(c0 + s_inner, act_kv)) for c0 in range(first // s_inner * s_inner, last, s_inner)]


# --- entry point ------------------------------------------------------------------------------------
def _out_stage(problem, o: np.ndarray, quant_scale2, quant_offset2) -> np.ndarray:
    """Output dtype of docs/pfa.md step 12 for O [N, R, D] fp32 (the rows of one batch): RNE, or the
    int8 quantisation ``int8(rint(fp16(fp16(fp16(O) * fp16(q2)) + fp16(offset2))))`` (AscendQuant,
    fp16 compute); per-channel q2/offset2: channel of (head n, column d) = ``n * D + d``."""
    out_dt = np.dtype(problem.out_dtype)
    if out_dt != _INT8:
        return cast(o, out_dt)
    n, d = problem.num_heads, problem.head_dim

    def per_head(x):
        x = np.asarray(x)
        return x.reshape(-1)[0] if x.size == 1 else x.reshape(n, 1, d)

    has_off = quant_offset2 is not None and np.asarray(quant_offset2).size > 0
    return quantize_int8(o, per_head(quant_scale2), per_head(quant_offset2) if has_off else 0.0)


def block_bounds(act_q: int, block: int, tail_first: bool) -> list:
    """[r0, r1) of the query blocks of a batch with *act_q* rows (module docstring, "Work split")."""
    if act_q <= 0:
        return []
    edges = list(range(0, act_q, block)) + [act_q]
    if tail_first and act_q % block:
        edges = [0] + list(range(act_q % block, act_q + 1, block))
    return list(zip(edges[:-1], edges[1:]))


def pfa_golden(problem, query, key, value, atten_mask=None, *, s_outer: int, s_inner: int, deq_scale1=None,
               quant_scale1=None, deq_scale2=None, quant_scale2=None, quant_offset2=None, block_rows: int | None = None,
               tail_first: bool = False) -> np.ndarray:
    """The output of one validated call, as the kernel computes it with tiles (*s_outer*, *s_inner*) on
    query blocks of *block_rows* (default 2 * s_outer) rows, the partial one first if *tail_first*.

    *problem*: the :class:`~ops.prompt_flash_attention_v2.validate.PfaProblem` of the call; the arrays
    are those given to ``validate`` (layout ``problem.layout``; *atten_mask* full [.., S1, S2] for
    modes 0/1, the compressed mask for modes 2/3/4, whose content is not read: the golden applies the
    band it encodes). Returns the output in ``problem.out_layout`` and ``problem.out_dtype`` (shape
    ``problem.out_shape``). Rows not computed are +0. Raises NotImplementedError for pse_shift.
    """
    if problem.pse_shape is not None:
        raise NotImplementedError("pfa_golden: pse_shift is not part of the docs/pfa.md dataflow")
    if s_outer <= 0 or s_inner <= 0:
        raise ValueError(f"s_outer and s_inner must be > 0, got {s_outer}, {s_inner}")
    b_n, n_h, s1, d = problem.batch, problem.num_heads, problem.s1, problem.head_dim
    out = np.zeros((b_n, n_h, s1, d), problem.out_dtype)  # rows never written stay +0
    if problem.query_empty or problem.kv_empty:
        return np.ascontiguousarray(from_bnsd(out, problem.layout))
    cx = _context(problem, deq_scale1, quant_scale1, deq_scale2)
    dp = problem.head_dim_padded
    wide = np.int64 if cx.int8_in else np.float32  # exact widening of the inputs

    def padded(x, heads):
        x4 = to_bnsd(np.asarray(x), problem.layout, heads)
        y = np.zeros(x4.shape[:3] + (dp,), wide)
        y[..., :d] = x4
        return y

    q = padded(query, n_h)
    kv_of_head = np.arange(n_h) // problem.group
    k = padded(key, problem.num_kv_heads)[:, kv_of_head]
    vt = np.swapaxes(padded(value, problem.num_kv_heads), -1, -2)[:, kv_of_head]
    with np.errstate(all="ignore"):  # IEEE overflow / invalid are the modelled behaviour
        for b in range(b_n):
            act_q, act_kv = int(problem.computed_seq_lengths[b]), int(problem.actual_seq_lengths_kv[b])
            pre, nxt = int(problem.pre_tokens_lu[b]), int(problem.next_tokens_lu[b])
            mask2d = _user_mask_2d(problem, atten_mask, b)
            for r0, r1 in block_bounds(act_q, block_rows or 2 * s_outer, tail_first):
                tiles = _tiles(r0, r1, pre, nxt, act_kv, s_inner)
                if tiles:
                    o = _item(cx, q[b, :, r0:r1], k[b], vt[b], tiles, _drop_fn(problem, mask2d, pre, nxt, r0, r1))
                    out[b, :, r0:r1] = _out_stage(problem, o[..., :d], quant_scale2, quant_offset2)
    return np.ascontiguousarray(from_bnsd(out, problem.layout))
