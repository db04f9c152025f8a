"""Independent numpy golden of aclnnFlashAttentionVarLenScore: docs/fa_varlen.md "Dataflow", bit for bit.

Why: the simulator kernel must equal this output bit for bit (NUMERICS.md check 1). This module
re-implements, from docs/fa_varlen.md alone, the work items and their s2 ranges ("Tiling": sparse
type, ``GetS2LoopRange``, 8-alignment), the tiles of width W, the per-slice reads of the compressed
masks and of the alibi pse, and steps 1-16 with the dtype and order of every operation. It shares no
code with the simulator except the ``npusim.dtypes.cast`` codec.

Rows are independent, so one item is computed for all query heads at once (head n reads key/value
head ``n // G``); slices only decide where the masks and the alibi pse are read. Every vector result
that is NaN becomes the positive canonical quiet NaN (docs/numerics.md "Vector instructions"); the
Mmad keeps IEEE NaN, which the next vector op canonicalises.

Contents: :func:`fa_var_len_golden`, :func:`sparse_plan` and :func:`s2_range` (the tiling's item
ranges, exported so tests can compare them), :func:`mmad` (docs/numerics_cube.md "Mmad" order),
:func:`row_max` and :func:`row_sum` (doc steps 5 and 8).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from npusim.dtypes import cast

_F32 = np.dtype(np.float32)
_U32 = np.dtype(np.uint32)
NEG = np.float32(-np.finfo(np.float32).max)  # doc Notation: -FLT_MAX, bits 0xFF7FFFFF
POS = np.float32(np.finfo(np.float32).max)  # doc Notation: +FLT_MAX, bits 0x7F7FFFFF
_QNAN32 = 0x7FC00000  # docs/numerics.md: canonical fp32 NaN, positive sign
_LANES = 64  # fp32 lanes of one 256 B repeat: the fold width of doc steps 5 and 8
_MASK_PITCH = 2048  # row pitch of the compressed masks (2048 x 2048, prefix 3072 x 2048)
_PREFIX_RECT = 2048 * 2048 + 1024  # doc step 4, mode 6: the rectangle window's base offset
_ALIBI_ROWS = 1024  # doc step 2: the alibi pse holds the last 1024 rows
_INT32_MAX = 2147483647


# --- instruction-level helpers ---------------------------------------------------------------------
def _canon(x: np.ndarray) -> np.ndarray:
    """Every NaN of the fp32 array *x* -> 0x7FC00000 (in place); returns *x*."""
    nan = np.isnan(x)
    if nan.any():
        x.view(_U32)[nan] = _QNAN32
    return x


def _via_f64(fn, *args) -> np.ndarray:
    """Exp / Div: float64 of the exact fp32 inputs, rounded once to fp32 (docs/numerics.md)."""
    with np.errstate(all="ignore"):
        r = fn(*(np.asarray(a, np.float64) for a in args))
    return _canon(np.asarray(cast(r, "fp32")))


def _vmax(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Vector Max: ``a if a >= b else b`` (Max(-0, +0) = -0); NaN if either is NaN."""
    r = np.where(a >= b, a, b).astype(_F32)
    r[np.isnan(a) | np.isnan(b)] = np.nan
    return _canon(r)


def _tree(acc: np.ndarray, op) -> np.ndarray:
    """WholeReduce order over the last axis (64 lanes): adjacent pairs, then their results."""
    while acc.shape[-1] > 1:
        acc = op(acc[..., 0::2], acc[..., 1::2])
    return acc[..., 0]


def mmad(a: np.ndarray, bt: np.ndarray, k0: int) -> np.ndarray:
    """``C[..., i, j] = sum_t a[..., i, t] * bt[..., j, t]`` in fp32, docs/numerics_cube.md "Mmad" order.

    Products in fp32 (fp32 x fp32 rounded once); each *k0*-wide k fractal summed by the adjacent-pair
    tree; fractal sums added in ascending order to an accumulator starting at +0. k is the true
    length: the last fractal's lanes past k read +0. *a* [..., M, K], *bt* [..., N, K], same leading dims.
    """
    a = np.asarray(a, _F32)
    bt = np.asarray(bt, _F32)
    k = a.shape[-1]
    k1 = -(-k // k0)
    pad = k1 * k0 - k
    if pad:
        a, bt = (np.concatenate([x, np.zeros(x.shape[:-1] + (pad,), _F32)], axis=-1) for x in (a, bt))
    acc = np.zeros(a.shape[:-1] + (bt.shape[-2],), _F32)
    with np.errstate(all="ignore"):
        for f in range(k1):
            p = a[..., :, None, f * k0:(f + 1) * k0] * bt[..., None, :, f * k0:(f + 1) * k0]
            acc = acc + _tree(p, np.add)
    return acc


def row_max(s: np.ndarray) -> np.ndarray:
    """Doc step 5: 64-lane fold ``acc = Max(acc, chunk)`` over the columns, then the WholeReduceMax
    tree over 64 lanes (lanes past the column count are -inf)."""
    cols = s.shape[-1]
    acc = np.full(s.shape[:-1] + (_LANES,), -np.inf, _F32)
    w = min(_LANES, cols)
    acc[..., :w] = s[..., :w]
    for c0 in range(_LANES, cols, _LANES):
        seg = s[..., c0:c0 + _LANES]
        acc[..., :seg.shape[-1]] = _vmax(acc[..., :seg.shape[-1]], seg)
    return _tree(acc, _vmax)


def row_sum(e: np.ndarray) -> np.ndarray:
    """Doc step 8: ``acc[l] = E[l]``, ``acc[l] += E[64k + l]`` (columns < cols only), then the
    WholeReduceSum adjacent-pair tree over 64 lanes (absent lanes -0)."""
    cols = e.shape[-1]
    acc = np.full(e.shape[:-1] + (_LANES,), -0.0, _F32)
    w = min(_LANES, cols)
    acc[..., :w] = e[..., :w]
    with np.errstate(all="ignore"):
        for c0 in range(_LANES, cols, _LANES):
            seg = e[..., c0:c0 + _LANES]
            acc[..., :seg.shape[-1]] = _canon(acc[..., :seg.shape[-1]] + seg)
        return _tree(acc, lambda x, y: _canon(x + y))


# --- tiling: sparse type and s2 ranges (doc "Sparse type and the s2 range of a work item") -----------
def _clip32(v) -> int:
    return int(min(max(int(v), -_INT32_MAX), _INT32_MAX))


def _align_up_128(x: int) -> int:
    """C-style ``trunc((x + 127) / 128) * 128`` (truncation toward zero)."""
    v = x + 127
    q = abs(v) // 128
    return (q if v >= 0 else -q) * 128


@dataclass(frozen=True)
class SparsePlan:
    """The sparse type of a call and the BAND widths (doc table)."""

    kind: str  # ALL, CAUSAL, RIGHT_DOWN_CAUSAL, BAND, BAND_COMPRESS, PREFIX, RIGHT_DOWN_CAUSAL_BAND,
    #            BAND_LEFT_UP_CAUSAL
    s1_valid: int = 0
    s2_valid: int = 0


_MODE_KIND = {1: "ALL", 2: "CAUSAL", 3: "RIGHT_DOWN_CAUSAL", 4: "BAND_COMPRESS", 6: "PREFIX",
              7: "RIGHT_DOWN_CAUSAL_BAND", 8: "BAND_LEFT_UP_CAUSAL"}


def sparse_plan(problem) -> SparsePlan:
    """The sparse type of *problem* (a validated FaVarLenProblem), as the doc's table."""
    if problem.mask_form == "none":
        return SparsePlan("ALL")
    mode = problem.sparse_mode
    if mode != 0:
        return SparsePlan(_MODE_KIND[mode])
    pre, nxt = _clip32(problem.pre_tokens), _clip32(problem.next_tokens)
    if pre >= problem.max_sq and nxt == 0:
        return SparsePlan("CAUSAL")
    if pre >= problem.max_sq and nxt >= problem.max_skv:
        return SparsePlan("ALL")
    s1_valid = min(_align_up_128(pre), problem.max_sq) if pre >= 0 else min(_align_up_128(pre), 0)
    return SparsePlan("BAND", s1_valid, min(_align_up_128(nxt), problem.max_skv))


def s2_range(problem, plan: SparsePlan, b: int, s1o: int, s1_base: int, prefix=None) -> tuple[int, int]:
    """``[s2Start, s2End)`` of item (b, s1o) (``GetS2LoopRange``, then the 8-alignment)."""
    s1, s2 = int(problem.seq_q[b]), int(problem.seq_kv[b])
    x0, x1 = s1o * s1_base, (s1o + 1) * s1_base
    pre, nxt = _clip32(problem.pre_tokens), _clip32(problem.next_tokens)
    kind, band = plan.kind, b == problem.band_index
    start = 0
    if kind == "ALL":
        end = s2
    elif kind == "CAUSAL" or (kind == "BAND_LEFT_UP_CAUSAL" and not band):
        end = min(x1, s2)
    elif kind == "RIGHT_DOWN_CAUSAL" or (kind == "RIGHT_DOWN_CAUSAL_BAND" and not band):
        end = min(x1 + s2 - s1, s2)
    elif kind == "BAND":
        start, end = max(x0 - plan.s1_valid, 0), min(x1 + plan.s2_valid, s2)
    elif kind == "BAND_COMPRESS":
        start, end = max(x0 - s1 + max(s2 - pre, 0), 0), min(x1 + s2 - max(s1 - nxt, 0), s2)
    elif kind == "RIGHT_DOWN_CAUSAL_BAND":
        end = min(x1 + s2 + nxt - s1, s2)
    elif kind == "BAND_LEFT_UP_CAUSAL":
        end = min(x1 + s2 - max(s1 - nxt, 0), s2)
    else:  # PREFIX
        pfx = problem.prefix_n if prefix is None else prefix
        end = min(max(x1 - s1 + s2, int(pfx[b])), s2)
    if kind in ("BAND", "BAND_COMPRESS", "PREFIX") and end <= start:
        start, end = 0, s2
    return start // 8 * 8, min(-(-end // 8) * 8, s2)


# --- per-slice reads: masks and alibi pse (doc steps 2 and 4) -------------------------------------------
def _slices(rows: int, cols: int, vec1_elems: int, halves: bool = True):
    """(local first row, rows, nominal sliceRows) of every vec1 slice of an item's tile: each vector
    core's rows cut into slices, the block's two halves (SameAB) or all its rows (vector-master)."""
    pitch = -(-cols // 64) * 64
    h = -(-rows // 2) if halves else rows
    out = []
    for lo, mine in ((0, h), (h, rows - h)):  # AIV0, AIV1 (SameAB); vector-master: one part
        if mine <= 0:
            continue
        sr = min(vec1_elems // pitch, mine)
        if sr <= 0:
            raise ValueError(f"vec1_elems {vec1_elems} holds no row of pitch {pitch}")
        for s0 in range(0, mine, sr):
            out.append((lo + s0, min(sr, mine - s0), sr))
    return out, pitch


def _causal_offset(delta: int, slice_rows: int, width: int) -> int:
    """``ComputeOffsetForCausal``: column shift (delta <= 0) or row shift of the 2048-pitch window."""
    return min(-delta, slice_rows) if delta <= 0 else min(delta, width) * _MASK_PITCH


def _window(flat: np.ndarray, offset: int, nr: int, cols: int) -> np.ndarray:
    """Bytes (r, c) = flat[offset + r * 2048 + c] of a compressed mask, as bool (nonzero)."""
    idx = offset + np.arange(nr)[:, None] * _MASK_PITCH + np.arange(cols)[None, :]
    if idx.size and (idx.min() < 0 or idx.max() >= flat.size):
        raise IndexError(f"mask window at {offset} ({nr} x {cols}) leaves the {flat.size}-byte mask")
    return flat[idx] != 0


@dataclass(frozen=True)
class _Ctx:
    """Per-call constants shared by the tile steps."""

    problem: object
    dt: np.dtype
    k0: int
    width: int
    vec1_elems: int
    halves: bool  # the tiling's template is SameAB: a block's rows are cut in two halves
    scale: np.float32
    recip: np.float32
    mask: np.ndarray | None  # full: 2-D array; compressed: flat uint8
    pse: np.ndarray | None
    keep: np.ndarray | None  # unpacked drop-mask bits (1 = keep)
    prefix: np.ndarray | None
    cu_ss: np.ndarray


def _mask_tile(cx: _Ctx, b: int, x0: int, rows: int, col0: int, cols: int) -> np.ndarray | None:
    """Masked elements (True -> NEG) of the tile, rows x cols, or None (doc step 4)."""
    p = cx.problem
    form = p.mask_form
    if form == "none":
        return None
    if form == "full":  # modes 0 and 1: the user's [maxSq, maxSkv] mask, top-left per batch
        return np.asarray(cx.mask[x0:x0 + rows, col0:col0 + cols]) != 0
    out = np.zeros((rows, cols), bool)
    slices, pitch = _slices(rows, cols, cx.vec1_elems, cx.halves)
    sq, skv = int(p.seq_q[b]), int(p.seq_kv[b])
    for lr, nr, sr in slices:
        r0 = x0 + lr
        if form == "prefix_3072":
            out[lr:lr + nr] = _prefix_slice(cx, b, r0, nr, sr, col0, cols, pitch, sq, skv)
            continue
        delta = r0 - col0 + int(p.next_tokens_lu[b])
        if delta < pitch:
            out[lr:lr + nr] |= _window(cx.mask, _causal_offset(delta, sr, cx.width), nr, cols)
        if p.sparse_mode == 4:
            dpre = r0 - col0 - int(p.pre_tokens_lu[b]) - 1
            if dpre + 1 + sr > 0:
                out[lr:lr + nr] |= ~_window(cx.mask, _causal_offset(dpre, sr, cx.width), nr, cols)
    return out


def _prefix_slice(cx: _Ctx, b, r0, nr, sr, col0, cols, pitch, sq, skv) -> np.ndarray:
    """Mode 6: causal window AND prefix rectangle, with the PREFIX_COMPUTE shortcuts."""
    pfx = int(cx.prefix[b])
    delta = r0 - col0 + skv - sq
    if delta >= pitch or pfx - col0 >= pitch:
        return np.zeros((nr, cols), bool)
    causal = _window(cx.mask, _causal_offset(delta, sr, cx.width), nr, cols)
    if r0 >= sq - skv + pfx:
        return causal
    rect = _window(cx.mask, _PREFIX_RECT - min(max(pfx - col0, 0), 1024), nr, cols)
    if r0 + sr <= sq - skv + pfx:
        return rect
    return causal & rect


def _flat_index(cx: _Ctx, b: int, x0: int, rows: int, col0: int, cols: int) -> np.ndarray:
    """``N1*cuSS[b] + n*SS[b] + i*Skv[b] + j`` for every (n, i, j) of the tile: [N1, rows, cols]."""
    p = cx.problem
    sq, skv = int(p.seq_q[b]), int(p.seq_kv[b])
    n = np.arange(p.N1, dtype=np.int64)[:, None, None]
    i = np.arange(x0, x0 + rows, dtype=np.int64)[None, :, None]
    j = np.arange(col0, col0 + cols, dtype=np.int64)[None, None, :]
    return p.N1 * int(cx.cu_ss[b]) + n * (sq * skv) + i * skv + j


def _add_pse(cx: _Ctx, s: np.ndarray, b: int, x0: int, rows: int, col0: int, cols: int) -> np.ndarray:
    """Doc step 2: ``S + fp32(pse)`` where the pse is read (full: every element; alibi: per slice)."""
    p = cx.problem
    if p.pse_form == "none":
        return s
    if p.pse_form == "full":
        val = cx.pse[_flat_index(cx, b, x0, rows, col0, cols)].astype(_F32)
        return _canon(s + val)
    thr = p.max_skv - _ALIBI_ROWS
    src = cx.pse[b % cx.pse.shape[0]]  # [N1, 1024, maxSkv]
    slices, _ = _slices(rows, cols, cx.vec1_elems, cx.halves)
    s = s.copy()
    for lr, nr, sr in slices:
        r0 = x0 + lr
        if r0 + sr <= col0:  # every element strictly above the diagonal: nothing added
            continue
        pos = r0 - col0 - thr
        m0, k0 = ((pos, 0) if pos >= 0 else (0, -pos)) if thr >= 0 else (pos, 0)
        if m0 < 0 or m0 + nr > src.shape[1] or k0 < 0 or k0 + cols > src.shape[2]:
            raise IndexError(f"alibi read [{m0}:{m0 + nr}, {k0}:{k0 + cols}] leaves {src.shape[1:]}")
        val = src[:, m0:m0 + nr, k0:k0 + cols].astype(_F32)
        s[:, lr:lr + nr] = _canon(s[:, lr:lr + nr] + val)
    return s


# --- one item ----------------------------------------------------------------------------------------
def _item(cx: _Ctx, q, k, v, b: int, x0: int, rows: int, s2: tuple[int, int]):
    """Steps 1-15 for item rows ``[x0, x0+rows)`` of batch b, all heads: (O in IN, m, l), [N1, rows, ...]."""
    with np.errstate(all="ignore"):  # IEEE overflow / invalid are the modelled behaviour
        return _item_steps(cx, q, k, v, b, x0, rows, s2)


def _item_steps(cx: _Ctx, q, k, v, b: int, x0: int, rows: int, s2: tuple[int, int]):
    p = cx.problem
    start, end = s2
    m = row_l = o = None
    for t, col0 in enumerate(range(start, end, cx.width)):
        cols = min(cx.width, end - col0)
        s = mmad(q, k[:, col0:col0 + cols], cx.k0)  # 1
        s = _add_pse(cx, s, b, x0, rows, col0, cols)  # 2
        s = _canon(s * cx.scale)  # 3
        masked = _mask_tile(cx, b, x0, rows, col0, cols)  # 4
        if masked is not None:
            s = np.where(masked[None], NEG, s).astype(_F32)
        mx = row_max(s)  # 5
        if t == 0:  # 6
            m = mx
        else:
            m_new = _vmax(m, mx)
            alpha = _via_f64(np.exp, _canon(m - m_new))
            m = m_new
        e = _via_f64(np.exp, _canon(s - m[..., None]))  # 7
        rs = row_sum(e)  # 8
        row_l = rs if t == 0 else _canon(_canon(row_l * alpha) + rs)  # 9
        if p.invalid_row_calc:  # 10
            dead = (m == NEG)[..., None]
            e = np.where(dead, _canon(e * np.float32(0.0)), e).astype(_F32)
        if cx.keep is not None:  # 11
            kept = cx.keep[_flat_index(cx, b, x0, rows, col0, cols)] != 0
            e = _canon(np.where(kept, e, np.float32(0.0)).astype(_F32) * cx.recip)
        pmat = e if cx.dt == _F32 else cast(e, cx.dt, "round").astype(_F32)  # 12
        pv = mmad(pmat, v[:, :, col0:col0 + cols], cx.k0)  # 13
        o = pv if t == 0 else _canon(_canon(alpha[..., None] * o) + pv)  # 14
    if p.invalid_row_calc:
        row_l = np.where(m == NEG, POS, row_l).astype(_F32)
    o = _via_f64(np.divide, o, row_l[..., None])  # 15
    out = o if cx.dt == _F32 else cast(o, cx.dt, "round")
    return out, m, row_l


# --- entry point ---------------------------------------------------------------------------------------
def fa_var_len_golden(problem, query, key, value, *, real_shift=None, drop_mask=None, atten_mask=None,
                      prefix=None, s1_base: int, tile_width: int, vec1_elems: int = 8192,
                      template: str = "SameAB", softmax_layout: str = "TND") -> dict:
    """Outputs of one validated call, as docs/fa_varlen.md computes them.

    *problem*: the call's FaVarLenProblem (``res.extra["problem"]``); arrays as given to the operator.
    Tiling parameters (from the tiling data): *s1_base* = ``s1BaseSize``, *tile_width* = W =
    ``s2BaseNratioSize``, *vec1_elems* = E (``vec1Elems``; only the per-slice mask/alibi reads use it),
    *template* (``template``: "SameAB" slices each half of a block's rows, "VectorMaster" all of them;
    only the per-slice reads depend on it).
    *prefix* defaults to ``problem.prefix_n``. Returns ``attention_out`` [T1, N1, D] (query dtype) and
    ``softmax_max`` / ``softmax_sum`` fp32 [T1, N1, 8] in *softmax_layout* ("TND" or "per_batch").
    Raises ValueError for a bad tiling parameter or layout, IndexError for a read outside a mask/pse.
    """
    if s1_base <= 0 or tile_width <= 0 or vec1_elems <= 0:
        raise ValueError(f"tiling parameters must be > 0: s1_base {s1_base}, tile_width {tile_width}, "
                         f"vec1_elems {vec1_elems}")
    if template not in ("SameAB", "VectorMaster"):
        raise ValueError(f"template must be 'SameAB' or 'VectorMaster', got {template!r}")
    if softmax_layout not in ("TND", "per_batch"):
        raise ValueError(f"softmax_layout must be 'TND' or 'per_batch', got {softmax_layout!r}")
    p = problem
    dt = np.dtype(p.dtype)
    sq_all, skv_all = p.seq_q.astype(np.int64), p.seq_kv.astype(np.int64)
    mask = None
    if p.mask_form == "full":
        mask = np.asarray(atten_mask)
    elif p.mask_form != "none":
        mask = np.ascontiguousarray(atten_mask).view(np.uint8).reshape(-1)
    keep = None
    if drop_mask is not None:
        keep = np.unpackbits(np.ascontiguousarray(drop_mask).view(np.uint8).reshape(-1), bitorder="little")
    recip = np.float32(np.float32(1.0) / np.float32(p.keep_prob))
    cx = _Ctx(problem=p, dt=dt, k0=8 if dt == _F32 else 16, width=int(tile_width), vec1_elems=int(vec1_elems),
              halves=template == "SameAB", scale=np.float32(p.scale), recip=recip, mask=mask,
              pse=None if real_shift is None else np.asarray(real_shift),
              keep=keep, prefix=p.prefix_n if prefix is None else np.asarray(prefix),
              cu_ss=np.concatenate(([0], np.cumsum(sq_all * skv_all)))
              )
    q32 = np.asarray(query).astype(_F32)  # widening is exact
    k32, v32 = np.asarray(key).astype(_F32), np.asarray(value).astype(_F32)
    kv_of = np.arange(p.N1) // p.G
    out = np.zeros((p.T1, p.N1, p.D), dt)
    smax = np.zeros((p.T1, p.N1, 8), _F32)
    ssum = np.zeros((p.T1, p.N1, 8), _F32)
    flat_max, flat_sum = smax.reshape(-1), ssum.reshape(-1)
    plan = sparse_plan(p)
    for b in range(p.B):
        sq, skv = int(sq_all[b]), int(skv_all[b])
        cq, ck = int(p.cu_seq_q[b]), int(p.cu_seq_kv[b])
        if sq == 0:
            continue
        kb = np.moveaxis(k32[ck:ck + skv][:, kv_of], 1, 0)  # [N1, Skv, D]
        vtb = np.moveaxis(v32[ck:ck + skv][:, kv_of], 1, 0).swapaxes(1, 2)  # [N1, D, Skv]
        for s1o in range(-(-sq // s1_base)):
            x0 = s1o * s1_base
            rows = min(s1_base, sq - x0)
            qi = np.moveaxis(q32[cq + x0:cq + x0 + rows], 1, 0)  # [N1, rows, D]
            o, m, row_l = _item(cx, qi, kb, vtb, b, x0, rows, s2_range(p, plan, b, s1o, s1_base, cx.prefix))
            out[cq + x0:cq + x0 + rows] = np.moveaxis(o, 0, 1)
            if softmax_layout == "TND":
                smax[cq + x0:cq + x0 + rows] = np.moveaxis(m, 0, 1)[..., None]
                ssum[cq + x0:cq + x0 + rows] = np.moveaxis(row_l, 0, 1)[..., None]
            else:  # per batch [N1, Sq, 8] blocks: offset (cuq*N1 + n*Sq + i) * 8
                base = (cq * p.N1 + np.arange(p.N1)[:, None] * sq + np.arange(x0, x0 + rows)[None, :]) * 8
                idx = base[..., None] + np.arange(8)
                flat_max[idx] = m[..., None]
                flat_sum[idx] = row_l[..., None]
    return {"attention_out": out, "softmax_max": smax, "softmax_sum": ssum}
