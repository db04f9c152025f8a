"""Independent numpy golden of FlashAttentionUnpaddingScoreGradV5: docs/fag.md "Dataflow", bit for bit.

Why: the simulated kernels must equal this output bit for bit (NUMERICS.md check 1). It re-implements
from docs/fag.md the block list and section packing (128 x 128 blocks; sections of <= 4 x 4 blocks of
one (b, n1); section k on core k % blockDim), the per-block steps with the dtype and order of every
operation, the fp32 accumulation of dq/dk/dv in the order the run's atomic adds reached GM, and the
post step. It shares with the simulator only ``npusim.dtypes.cast``; the Mmad order and the row-sum
fold come from the forward operator's golden (docs/numerics_cube.md "Mmad", docs/numerics.md).

Per block (b, n, s1 block, s2 block) of r rows and c columns, Q/dY rows and K/V rows of the block:

    S  = Mmad(Q, K^T)   dP = Mmad(dY, V^T)                                fp32 [r, c]
         (rope: the k range continues over Q_rope K_rope^T after D padded to 16)
    s  = S * scale; s := -FLT_MAX where masked (flagged blocks only)      fp32
         (compressed-mask modes: j - i > next_lu[b] or j - i < -pre_lu[b]; sparse 0/1: atten_mask[i, j])
    P  = Exp(s - max) / sum  (max, sum: softmax_max/sum column 0)       fp32, Exp/Div rounded once
    Pc = cast(P, round)                                                  input dtype
    dS = cast((dP - sfmg) * P, round)                                     input dtype
    dq[rows] += Mmad(dS, K)   dk[cols] += Mmad(dS^T, Q)   dv[cols] += Mmad(Pc^T, dY)   fp32 adds
    (rope: dq_rope += Mmad(dS, K_rope) after dq, dk_rope += Mmad(dS^T, Q_rope) after dk)

with sfmg = rowsum(fp32(dy) * fp32(attention_in)) (64-lane fold). Output: dq = cast(dq * scale),
dk = cast(dk * scale), dv = cast(dv), rounding "round" (CAST_ROUND); fp32 inputs: no casts (P and dS
stay fp32; the cube reads P^T, dS^T written by the vector side, the same values).

Deterministic S1s2Bn2 (*first_writes*): the first write of a dq strip (S2 CV block 0) and of a dk/dv strip (the
key/value head's first query head, S1 CV block 0) stores its values instead of adding them (an exact -0 stays -0).

Sink: SameAB (*trim* 8): each AIV gives one partial per CV block, from +0 the sum over its vector tiles
(``_tile_plan``, re-derived here from CANN's tile rule) of each tile's ReduceSum of dP P ps (ps = Exp(sink[n] -
max) / sum, fp32; the tile's padding columns +0), added into that AIV's partial of the head from +0 in section order; per head the AIVs' partials are summed by one
64-lane tree (``_sab_dsink``), dsink = -that. The basic templates: each AIV half
of a block (rows split (r + 1) // 2) gives ``sum_r ps[r] * rowsum(dP * P)[r]``; per head these partials are added
in section order (half 0, then 1) from +0, and dsink = -total.
"""
from __future__ import annotations

from collections import deque
from itertools import zip_longest

import numpy as np

from npusim.dtypes import cast
from npusim.types import SubCore
from ops.flash_attention_var_len_score.golden import mmad, row_sum

_F32 = np.dtype(np.float32)
NEG = np.float32(-np.finfo(np.float32).max)
_BASE = 128
# *trim* (the tiling's cvTrim, the column granularity of a CV block's rectangle) names the template: SameAB's 8,
# the generic template's 64, the deterministic S1s2Bn2 template's vector tile width (>= 128); 0 the basic templates
_SAB_TRIM, _GENERIC_TRIM = 8, 64


def _tiled_template(trim: int) -> str | None:
    """The template a CV block of *trim* belongs to: "sameab", "generic", "bn2", or None (the basic templates)."""
    if trim == _SAB_TRIM:
        return "sameab"
    if trim == _GENERIC_TRIM:
        return "generic"
    return "bn2" if trim >= _BASE else None
_GROUP = 4
_NCHUNK = 128  # output columns per Fixpipe (one atomic write)


def _f64_round(fn, *args) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(cast(fn(*(np.asarray(a, np.float64) for a in args)), "fp32"))


def _positive_nan(x: np.ndarray) -> np.ndarray:
    """NaNs of a vector instruction's fp32 result as the hardware gives them (docs/numerics.md: every NaN an
    arithmetic instruction produces is the positive quiet NaN), not with the host CPU's sign."""
    x = np.array(x, _F32)
    x[np.isnan(x)] = np.float32(np.nan)
    return x


def _to_input(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """fp32 values in the input dtype (CAST_ROUND to fp16/bf16; fp32 inputs keep the fp32 values), as fp32."""
    if dt == _F32:
        return np.asarray(x, _F32)
    return np.asarray(cast(x, dt, "round")).astype(_F32)


def _kept(p, b: int, s1o: int, s2o: int, width: int = _BASE):
    """(rows, cols, masked) of the block of batch b at s1 block s1o, s2 block s2o (at most *width* columns), or None
    when the mask drops all of it."""
    sq, skv = int(p.seq_q[b]), int(p.seq_kv[b])
    nxt, pre = int(p.next_tokens_lu[b]), int(p.pre_tokens_lu[b])
    rows, cols = min(_BASE, sq - s1o * _BASE), min(width, skv - s2o * _BASE)
    d_lo = s2o * _BASE - (s1o * _BASE + rows - 1)  # smallest j - i
    d_hi = s2o * _BASE + cols - 1 - s1o * _BASE  # largest j - i
    if p.mask_form == "prefix_3072":  # dropped iff j - i > Skv - Sq and j >= prefix
        pfx, j_lo, j_hi = int(p.prefix_n[b]), s2o * _BASE, s2o * _BASE + cols - 1
        if d_lo > skv - sq and j_lo >= pfx:
            return None
        return rows, cols, bool(d_hi > skv - sq and j_hi >= pfx)
    if d_lo > nxt or d_hi < -pre:
        return None
    return rows, cols, bool(d_hi > nxt or d_lo < -pre or p.mask_form == "full")


def _group(p, b: int, n: int, r_lo: int, r_hi: int, c_lo: int, c_hi: int) -> list:
    """The kept blocks of s1 blocks [r_lo, r_hi) x s2 blocks [c_lo, c_hi) of head n of batch b, row-major."""
    out = []
    for s1o in range(r_lo, r_hi):
        for s2o in range(c_lo, c_hi):
            k = _kept(p, b, s1o, s2o)
            if k is not None:
                out.append((b, n, s1o, s2o) + k)
    return out


def _rect(p, b: int, n: int, r: int, c: int, cv, trim: int) -> list:
    """The blocks of CV block (r, c) that CANN's kernel computes (docs/fag.md "Tiling"): all its rows by the
    columns up to the trimmed edge (SameAB: last row's end + next_lu, at least prefix, up to a multiple of 8;
    generic: the CV block's full height + next_lu up to a multiple of 64, from (first row - pre_lu) down to a
    multiple of 64, taken from the 128-column block holding it; S1s2Bn2, *trim* >= 128: the pieces of *trim*
    columns that reach into [first row - pre_lu, last row + 1 + next_lu)), each block flagged masked unless every
    element is kept."""
    sq, skv = int(p.seq_q[b]), int(p.seq_kv[b])
    h1, w2 = cv
    d = skv - sq if p.mask_form == "prefix_3072" else int(p.next_tokens_lu[b])
    c_lo, c_hi = c * w2, min(skv, c * w2 + w2)
    if _tiled_template(trim) == "bn2":  # the trim-wide pieces from the CV block's start meeting the kept columns
        bottom = min(sq, r * h1 + h1)
        lo_keep = 0 if p.mask_form == "prefix_3072" else r * h1 - int(p.pre_tokens_lu[b])
        hi_keep = bottom + d
        if p.mask_form == "prefix_3072":
            hi_keep = max(hi_keep, -(-int(p.prefix_n[b]) // _BASE) * _BASE)
        pieces = [x for x in range(c_lo, c_hi, trim) if x + trim > lo_keep and x < hi_keep]
        c_lo, c_hi = (pieces[0], min(c_hi, pieces[-1] + trim)) if pieces else (c_lo, c_lo)
    elif _tiled_template(trim) == "sameab":
        edge = r * h1 + min(h1, sq - r * h1) + d
        if p.mask_form == "prefix_3072":
            edge = max(edge, int(p.prefix_n[b]))
        c_hi = min(c_hi, -(-max(edge, 0) // 8) * 8)
    else:
        full = h1 if p.max_sq >= _BASE else -(-p.max_sq // 16) * 16
        if p.mask_form == "prefix_3072":
            c_hi = min(c_hi, max((r + 1) * full + d, int(p.prefix_n[b])))
        else:
            c_hi = min(c_hi, max(0, -(-((r + 1) * full + d) // 64) * 64))
            c_lo = max(c_lo, max(0, r * full - int(p.pre_tokens_lu[b])) // 64 * 64)
    out = []
    for s1o in range(r * h1 // _BASE, min(-(-sq // _BASE), (r + 1) * h1 // _BASE)):
        for s2o in range(c_lo // _BASE, -(-c_hi // _BASE)):
            k = _kept(p, b, s1o, s2o, min(_BASE, c_hi - s2o * _BASE))
            rows, cols = min(_BASE, sq - s1o * _BASE), min(_BASE, c_hi - s2o * _BASE)
            out.append((b, n, s1o, s2o, rows, cols, k is None or k[2]))
    return out


def sections(problem, cv=None, dtm: bool = False, regions: bool = False, trim: int = 0) -> list:
    """Blocks per section, in run order: [(b, n, s1o, s2o, rows, cols, masked), ...] per section.

    Basic (*cv* None): per (b, n) row groups of 4 x column groups of 4 blocks; *regions* (basic_det's 512 x 512
    tasks): the same groups, each one's blocks column by column (s2 block, then s1 block). SameAB (*cv* = (s1CvInner,
    s2CvInner)): one section per CV block, ordered batch, key/value head, then query head of the group and
    S2 CV block (IS_DTM: S2 CV block, then query head), S1 CV block fastest."""
    p = problem
    out = []
    for b in range(p.B):
        sq, skv = int(p.seq_q[b]), int(p.seq_kv[b])
        if sq == 0:
            continue
        nb1, nb2 = -(-sq // _BASE), -(-skv // _BASE)
        if cv is None:
            for n in range(p.N1):
                for r0 in range(0, nb1, _GROUP):
                    for c0 in range(0, nb2, _GROUP):
                        sec = _group(p, b, n, r0, min(r0 + _GROUP, nb1), c0, min(c0 + _GROUP, nb2))
                        if regions and sec and p.sparse_mode == 3 and (np.asarray(p.seq_q) != p.seq_kv).any():
                            # no enableCausalOpt: the region's every block, those the mask drops whole as masked
                            sec = [(b, n, r, c) + ((min(_BASE, sq - r * _BASE), min(_BASE, skv - c * _BASE), True)
                                                   if _kept(p, b, r, c) is None else _kept(p, b, r, c))
                                   for r in range(r0, min(r0 + _GROUP, nb1)) for c in range(c0, min(c0 + _GROUP, nb2))]
                        if regions:
                            sec = [blk for c in range(c0, c0 + _GROUP) for blk in sec if blk[3] == c]
                        if sec:
                            out.append(sec)
            continue
        if skv == 0:
            continue
        rg, cg = cv[0] // _BASE, cv[1] // _BASE
        for n2 in range(p.N2):
            order = [(g, c) for c in range(-(-nb2 // cg)) for g in range(p.G)] if dtm else \
                [(g, c) for g in range(p.G) for c in range(-(-nb2 // cg))]
            for g, c in order:
                for r in range(-(-nb1 // rg)):
                    sec = _group(p, b, n2 * p.G + g, r * rg, min(r * rg + rg, nb1), c * cg, min(c * cg + cg, nb2))
                    if sec and trim:
                        sec = _rect(p, b, n2 * p.G + g, r, c, cv, trim)
                    if sec:
                        out.append(sec)
    return out


def _stat(problem, x, b: int, n: int, i0: int, rows: int) -> np.ndarray:
    """Column 0 of softmax_max/sum for rows i0.. of (b, n), fp32 [rows]."""
    x = np.asarray(x)
    cq = int(problem.cu_seq_q[b])
    if problem.softmax_in_layout == "same_as_input":
        return x[cq + i0:cq + i0 + rows, n, 0].astype(_F32)
    sq = int(problem.seq_q[b])
    base = (cq * problem.N1 + n * sq + i0) * 8
    return x.reshape(-1)[base:base + rows * 8:8].astype(_F32)


def _halves(rows: int):
    """The two AIVs' row ranges of a block: the first (rows + 1) // 2 rows, then the rest."""
    h = (rows + 1) // 2
    return [(lo, hi) for lo, hi in ((0, h), (h, rows)) if hi > lo]


def _pse(problem, ctx: dict, b: int, n: int, i0: int, j0: int, rows: int, cols: int, windows=None) -> np.ndarray:
    """fp32 [rows, cols] bias of a block, per vector pass as the kernel forms it; NaN where nothing is read
    (elements the causal mask drops, so the value never matters). *windows*: the passes over the block, (block rows
    lo..hi, block columns clo..chi, the pass's first batch row R0 and column C0, its rows and columns); None: the
    two AIV halves of the block.

    alibi (pse_type 0/1): a pass whose first row is R0 reads the compressed tensor from row
    ``pos = R0 - C0 - (maxSkv - 1024)`` (column 0), or, when maxSkv >= 1024 and pos < 0, from row 0,
    column -pos; nothing when all its rows lie above column C0. slope (2/3): fp32(c - r) (r, c from the
    pass's origin) + fp32(C0 + kv_start - R0 - q_start), |.|, [sqrt], times fp32(-slope)."""
    p = problem
    out = np.full((rows, cols), np.nan, _F32)
    if windows is None:
        windows = [(lo, hi, 0, cols, i0 + lo, j0, hi - lo, cols) for lo, hi in _halves(rows)]
    for lo, hi, clo, chi, R0, C0, tr, tc in windows:
        if p.pse_form == "alibi":
            if R0 + tr <= C0:
                continue
            x = ctx["pse"][b % ctx["pse"].shape[0], n]
            s2max = x.shape[1]
            thr = s2max - 1024
            pos = R0 - C0 - thr
            m0, k0 = (0, -pos) if thr >= 0 and pos < 0 else (pos, 0)
            c_end = min(chi, C0 - j0 + min(tc, s2max - k0))  # block columns the pass's read covers
            for r in range(lo, hi):
                m = m0 + i0 + r - R0
                if 0 <= m < 1024 and c_end > clo:
                    out[r, clo:c_end] = x[m, k0 + j0 + clo - C0:k0 + j0 + c_end - C0]
            continue
        sl = ctx["pse"]
        slope = np.float32(sl[b, n] if sl.ndim == 2 else sl[n])
        cc = np.arange(j0 + clo, j0 + chi) - C0
        rr = np.arange(i0 + lo, i0 + hi) - R0
        base = (cc[None, :] - rr[:, None]).astype(_F32)
        with np.errstate(all="ignore"):
            v = (base + np.float32(C0 + p.kv_start - R0 - p.q_start)).astype(_F32)
            v = np.abs(v)
            if p.pse_type == 3:
                v = _f64_round(np.sqrt, v)
            out[lo:hi, clo:chi] = (v * -slope).astype(_F32)
    return out


def _keep(problem, ctx: dict, b: int, n: int, i0: int, j0: int, rows: int, cols: int) -> np.ndarray:
    """The block's dropout keep bits (bool [rows, cols]): bit N1 * sum(Sq * Skv over earlier batches)
    + n * Sq * Skv + i * Skv + j of the drop mask, LSB first."""
    p = problem
    skv = int(p.seq_kv[b])
    base = p.N1 * ctx["cu_ss"][b] + n * int(p.seq_q[b]) * skv
    idx = base + (i0 + np.arange(rows))[:, None] * skv + (j0 + np.arange(cols))[None, :]
    return ctx["bits"][idx] != 0


def _block_ops(problem, ctx: dict, blk, windows=None) -> dict:
    """The Mmad operands of one block's gradients: {kind: (A, B^T, first output row, head)} with A = dS (dq),
    dS^T (dk), P^T (dv) in the input dtype's values; every vector step of the block (and its dsink partials)
    happens here."""
    p = problem
    b, n, s1o, s2o, rows, cols, masked = blk
    i0, j0 = s1o * _BASE, s2o * _BASE
    tq, tk = int(p.cu_seq_q[b]) + i0, int(p.cu_seq_kv[b]) + j0
    kv = n // p.G
    q, g = ctx["q"][tq:tq + rows, n], ctx["dy"][tq:tq + rows, n]
    k, v = ctx["k"][tk:tk + cols, kv], ctx["v"][tk:tk + cols, kv]
    qs, ks = q, k
    if p.rope_d:  # the rope k range follows D padded to whole 16-wide fractals (lanes past D read +0)
        pad = lambda x: np.concatenate([x, np.zeros((x.shape[0], -p.D % 16), _F32)], axis=1)  # noqa: E731
        qr, kr = ctx["qr"][tq:tq + rows, n], ctx["kr"][tk:tk + cols, kv]
        qs, ks = np.concatenate([pad(q), qr], axis=1), np.concatenate([pad(k), kr], axis=1)
    with np.errstate(all="ignore"):
        s = mmad(qs, ks, ctx["k0"])
        pse = None if p.pse_form == "none" else _pse(p, ctx, b, n, i0, j0, rows, cols, windows)
        if pse is not None and p.pse_type == 1:  # (S + pse) * scale
            s = (s + pse).astype(_F32)
        s = (s * np.float32(p.scale)).astype(_F32)
        if pse is not None and p.pse_type != 1:  # S * scale + pse
            s = (s + pse).astype(_F32)
        dp = mmad(g, v, ctx["k0"])
        if masked:
            jm = np.arange(j0, j0 + cols)[None, :] - np.arange(i0, i0 + rows)[:, None]
            drop = (jm > int(p.next_tokens_lu[b])) | (jm < -int(p.pre_tokens_lu[b]))
            if p.mask_form == "full":  # the top-left [Sq, Skv] of the [maxSq, maxSkv] mask
                drop = np.asarray(ctx["mask"])[i0:i0 + rows, j0:j0 + cols] != 0
            if p.mask_form == "prefix_3072":
                drop = (jm > int(p.seq_kv[b]) - int(p.seq_q[b])) & \
                    (np.arange(j0, j0 + cols)[None, :] >= int(p.prefix_n[b]))
            s = np.where(drop, NEG, s).astype(_F32)
        mx, sm = _stat(p, ctx["max"], b, n, i0, rows), _stat(p, ctx["sum"], b, n, i0, rows)
        e = _f64_round(np.exp, (s - mx[:, None]).astype(_F32))
        pr = _f64_round(np.divide, e, sm[:, None])
        pd = pr
        if p.dropout:  # keep ? x * fp32(1 / keep_prob) : +0, for the P that dV takes and for dP
            keep, recip = _keep(p, ctx, b, n, i0, j0, rows, cols), np.float32(np.float32(1) / np.float32(p.keep_prob))
            pd = (np.where(keep, pr, _F32.type(0)) * recip).astype(_F32)
            dp = (np.where(keep, dp, _F32.type(0)) * recip).astype(_F32)
        sf = ctx["sfmg"][tq:tq + rows, n]
        ds = ((dp - sf[:, None]).astype(_F32) * pr).astype(_F32)
    if ctx["sink"] is not None and windows is not None:  # a tiled CV block: its passes' sums (_sink_tiles)
        with np.errstate(all="ignore"):
            ps = _f64_round(np.divide, _f64_round(np.exp, (ctx["sink"][n] - mx).astype(_F32)), sm)
            ctx["sinkblk"][(s1o, s2o)] = ((dp * pr).astype(_F32), ps)
    elif ctx["sink"] is not None:
        h = (rows + 1) // 2
        with np.errstate(all="ignore"):
            rowv = row_sum((dp * pr).astype(_F32))
            ps = _f64_round(np.divide, _f64_round(np.exp, (ctx["sink"][n] - mx).astype(_F32)), sm)
            y = (rowv * ps).astype(_F32)
        for lo, hi in ((0, h), (h, rows)):
            if hi > lo:
                ctx["dsink"][n].append(row_sum(y[None, lo:hi])[0])
    pc, dsc = _to_input(pd, ctx["dt"]), _to_input(ds, ctx["dt"])
    ops = {"dq": (dsc, k.T, tq, n), "dk": (dsc.T, q.T, tk, kv), "dv": (pc.T, g.T, tk, kv)}
    if p.rope_d:
        ops["dq_rope"] = (dsc, kr.T, tq, n)
        ops["dk_rope"] = (dsc.T, qr.T, tk, kv)
    return ops


def _align(x: int, a: int) -> int:
    return -(-x // a) * a


def _bn2_tile(p) -> tuple[int, int]:
    """The deterministic S1s2Bn2 kernel's vector tile (rows, columns) (docs/fag.md "Pipeline"): 64 x 128 of 8192
    elements; s2 < 128 and s1 > 64: s2 aligned to 16 columns by 8192 / those (down to 16; 224 above 255) rows;
    s2 > 128 and s1 < 64: s1 rows by 8192 / s1 (down to 16) columns; rows <= 128, columns <= 512; a mask or dropout
    aligns the columns up to 32 and makes the rows 8192 / those; 32 x 256 when D <= 64 and s2 >= 256 (the aclnn
    layer's D padding to 16 keeps D <= 64 as it is)."""
    s1, s2 = int(p.max_sq), int(p.max_skv)
    m, n = 64, 128
    if s2 < 128 and s1 > 64:
        n = _align(s2, 16)
        m = 8192 // n // 16 * 16
        m = 224 if m > 255 else m
    elif s2 > 128 and s1 < 64:
        m, n = s1, 8192 // s1 // 16 * 16
    m, n = min(m, 128), min(n, 512)
    if p.mask_form != "none" or p.dropout:
        m, n = min(8192 // _align(n, 32), 128), min(_align(n, 32), 512)
    return (32, 256) if p.D <= 64 and s2 >= 256 else (m, n)


def _tile_plan(problem, sec, trim: int, cv=None):
    """The vector tiles of a SameAB (*trim* 8), generic (*trim* 64) or deterministic S1s2Bn2 (*trim* >= 128) CV
    block, per AIV: [(first row, rows, first column, columns) relative to the rectangle's corner]; None for the
    other templates. SameAB and generic tiles hold at most baseMN elements (SameAB 128 x 64; generic min(128, s1) x
    min(64, s2), s1, s2 the longest sequences aligned to 16): min(width, 256) columns by baseMN // (that aligned to
    32 with a mask or dropout, else 16) rows, at most 128. SameAB's first AIV takes the first half of the rows of
    tiles (rounded down), the second the rest; a generic AIV takes them all (one list). S1s2Bn2 (one AIV, one
    list): per chunk of min(256, *cv*[0]) rows from the first, _bn2_tile's tiles (at most 256 columns) from the
    chunk's first row, rows of tiles outer."""
    p = problem
    template = _tiled_template(trim)
    if template is None:
        return None
    rows = {blk[2]: blk[4] for blk in sec}
    cols = {blk[3]: blk[5] for blk in sec}
    R = (len(rows) - 1) * _BASE + rows[max(rows)]
    W = (len(cols) - 1) * _BASE + cols[max(cols)]
    f = 32 if p.mask_form != "none" or p.dropout else 16
    if template == "bn2":
        m, n = _bn2_tile(p)
        n, chunk = min(n, 256), min(256, cv[0])
        return {"f": f, "aivs": [[(k + a, min(m, min(chunk, R - k) - a), c, min(n, W - c))
                                  for k in range(0, R, chunk) for a in range(0, min(chunk, R - k), m)
                                  for c in range(0, W, n)]]}
    base = 128 * 64 if template == "sameab" else min(128, _align(p.max_sq, 16)) * min(64, _align(p.max_skv, 16))
    s2 = min(W, 256)
    s1 = min(base // _align(s2, f), R, 128)
    l1, l2 = -(-R // s1), -(-W // s2)
    tiles = lambda rs: [(a * s1, min(s1, R - a * s1), c * s2, min(s2, W - c * s2)) for a in rs for c in range(l2)]  # noqa: E731
    if template == "generic":
        return {"f": f, "aivs": [tiles(range(l1))]}
    return {"f": f, "aivs": [tiles(range(l1 // 2)), tiles(range(l1 // 2, l1))]}


def _windows(sec, plan, blk) -> list:
    """The passes over block *blk* of a tiled CV block, as _pse's windows."""
    r_first, c_first = min(x[2] for x in sec) * _BASE, min(x[3] for x in sec) * _BASE
    i0, j0, rows, cols = blk[2] * _BASE, blk[3] * _BASE, blk[4], blk[5]
    out = []
    for tiles in plan["aivs"]:
        for r0, h, c0, w in tiles:
            R0, C0 = r_first + r0, c_first + c0
            lo, hi = max(R0, i0) - i0, min(R0 + h, i0 + rows) - i0
            clo, chi = max(C0, j0) - j0, min(C0 + w, j0 + cols) - j0
            if hi > lo and chi > clo:
                out.append((lo, hi, clo, chi, R0, C0, h, w))
    return out


def _reduce_sum(x: np.ndarray) -> np.float32:
    """Ascend C ReduceSum (count form): per 64-lane repeat (lanes past the count -0) a tree over adjacent pairs,
    then the repeats' results added one after another, every step fp32."""
    n = x.size
    r = -(-n // 64)
    vals = np.full(r * 64, -0.0, _F32)
    vals[:n] = x
    vals = vals.reshape(r, 64)
    with np.errstate(all="ignore"):
        while vals.shape[1] > 1:
            vals = (vals[:, 0::2] + vals[:, 1::2]).astype(_F32)
        acc = vals[0, 0]
        for k in range(1, r):
            acc = np.float32(acc + vals[k, 0])
    return acc


def _sink_tiles(problem, ctx: dict, sec, plan) -> None:
    """SameAB's dsink partials of one CV block: per AIV, from +0, each of its tiles' ReduceSum of
    dP P ps (ps the row's sink probability; the tile's padding columns up to its row pitch +0) added in turn;
    kept with the AIV (2 core + AIV of the core) for ``_sab_dsink``."""
    n = sec[0][1]
    r_first, c_first = min(x[2] for x in sec), min(x[3] for x in sec)
    R = sum({blk[2]: blk[4] for blk in sec}.values())
    W = sum({blk[3]: blk[5] for blk in sec}.values())
    prod, ps = np.zeros((R, W), _F32), np.zeros(R, _F32)
    for blk in sec:
        r0, c0 = (blk[2] - r_first) * _BASE, (blk[3] - c_first) * _BASE
        x, p_row = ctx["sinkblk"].pop((blk[2], blk[3]))
        prod[r0:r0 + blk[4], c0:c0 + blk[5]] = x
        ps[r0:r0 + blk[4]] = p_row
    for sub, tiles in enumerate(plan["aivs"]):
        acc = np.float32(0.0)
        for r0, h, c0, w in tiles:
            t = np.zeros((h, _align(w, plan["f"])), _F32)
            with np.errstate(all="ignore"):
                t[:, :w] = (prod[r0:r0 + h, c0:c0 + w] * ps[r0:r0 + h, None]).astype(_F32)
                acc = np.float32(acc + _reduce_sum(t.reshape(-1)))
        ctx["dsink"][n].append((ctx["sec_core"] * 2 + sub, acc))


def _sab_dsink(problem, parts: dict, aivs: int) -> np.ndarray:
    """SameAB's dsink before the negation: per head, the [aivs] partials (each AIV's CV-block sums of the head added
    from +0 in its section order) summed by one 64-lane tree (_reduce_sum; at most 64 AIVs)."""
    slots = np.zeros((problem.N1, aivs), _F32)
    with np.errstate(all="ignore"):
        for n, items in parts.items():
            for aiv, val in items:
                slots[n, aiv] = np.float32(slots[n, aiv] + val)
    return np.array([_reduce_sum(row) for row in slots], _F32)


def _chunks(kind: str, r0: int, h: int, val: np.ndarray) -> list:
    """One output strip as the Fixpipe writes it: (kind, first row, head, first column, values) per 128 columns."""
    return [(kind, r0, h, dn, val[:, dn:dn + _NCHUNK]) for dn in range(0, val.shape[1], _NCHUNK)]


def _block(problem, ctx: dict, blk) -> list:
    """Basic template: the atomic contributions of one block in kernel order, [(kind, row0, head, col0, fp32
    values)]: dq, dq_rope, dk, dk_rope, dv."""
    ops = _block_ops(problem, ctx, blk)
    out = []
    for kind in ("dq", "dq_rope", "dk", "dk_rope", "dv"):
        if kind in ops:
            a, bt, r0, h = ops[kind]
            out += _chunks(kind, r0, h, mmad(a, bt, ctx["k0"]))
    return out


def _cv_block(problem, ctx: dict, sec, plan=None) -> list:
    """SameAB: the output strips of one CV block in kernel order, [(kind, row0, head, fp32 values)]. A dQ strip
    (the blocks of one s1 block, by s2 block) is one Mmad over the k range of all its blocks' columns, a dK/dV
    strip (one s2 block, by s1 block) one over all its blocks' rows: dq, dq_rope per s1 strip, then dk, dk_rope,
    dv per s2 strip."""
    ops = [(_blk[2], _blk[3], _block_ops(problem, ctx, _blk, None if plan is None else _windows(sec, plan, _blk)))
           for _blk in sec]
    if plan is not None and ctx["sink"] is not None:
        _sink_tiles(problem, ctx, sec, plan)
    out = []
    for axis, kinds in ((0, ("dq", "dq_rope")), (1, ("dk", "dk_rope", "dv"))):
        for key in sorted({o[axis] for o in ops}):
            members = sorted((o for o in ops if o[axis] == key), key=lambda o: o[1 - axis])
            for kind in kinds:
                if kind not in members[0][2]:
                    continue
                a = np.concatenate([m[2][kind][0] for m in members], axis=1)
                bt = np.concatenate([m[2][kind][1] for m in members], axis=1)
                _, _, r0, h = members[0][2][kind]
                out.append((kind, r0, h, mmad(a, bt, ctx["k0"])))
    return out


def _first_kinds(problem, sec, cv) -> tuple:
    """The deterministic S1s2Bn2 CV block's strips that are first writes (module docstring): dq, dq_rope of S2 CV
    block 0; dk, dk_rope, dv of S1 CV block 0 of the key/value head's first query head."""
    _, n, s1o, s2o = sec[0][:4]
    out = ("dq", "dq_rope") if s2o * _BASE // cv[1] == 0 else ()
    if n % problem.G == 0 and s1o * _BASE // cv[0] == 0:
        out += ("dk", "dk_rope", "dv")
    return out


def _cube_order(n: int, contiguous, core_starts, aiv_split) -> list:
    """The order in which the sections' adds leave their cores: section order, except that the runs of an AI
    Core's two AIVs (generic template) alternate, one CV block of each in turn."""
    if contiguous is not None and contiguous[1] == 2:
        per_aiv = max(1, -(-n // contiguous[0]))
        runs = [range(v, min(n, v + per_aiv)) for v in range(0, n, per_aiv)]
    elif core_starts is not None and aiv_split is not None and len(aiv_split):
        runs = []
        for c, mid in enumerate(aiv_split):
            runs += [range(core_starts[c], mid), range(mid, core_starts[c + 1])]
    else:
        return list(range(n))
    order = []
    for pair in zip_longest(runs[0::2], runs[1::2], fillvalue=range(0)):  # an AI Core's two runs
        order += [k for ks in zip_longest(*pair) for k in ks if k is not None]
    return order


def fag_golden(problem, query, key_in, value, dy, softmax_max, softmax_sum, attention_in, *, block_dim: int,
               atomics=None, sink_in=None, atten_mask=None,
               query_rope=None, key_in_rope=None, pse_shift=None, drop_mask=None, cv=None, dtm: bool = False,
               contiguous=None, core_starts=None, aiv_split=None, regions: bool = False, trim: int = 0,
               first_writes: bool = False, dsink_aivs: int = 0) -> dict:
    """dq, dk, dv of one validated call (*problem*: its FagProblem), as docs/fag.md computes them.

    *block_dim*: the tiling's core count (sections round-robin over cores). *atomics*: the run's
    atomic log (``res.extra["atomics"]``: (buffer, core, sub-core, the core's add number) in the order
    the adds reached GM); without a log the cores' adds are applied core after core (the order of any run in
    which every output row has one writer core, as the deterministic S1s2Bn2 split gives).
    *cv*: (s1CvInner, s2CvInner) of a SameAB run (None: the basic template); *dtm*: its IS_DTM mode, where
    the CV blocks of round r (sections r * block_dim ...) give per-strip partials that are summed in core
    order from +0 and then added to the accumulator, round after round. *contiguous*: (AIVs, AIVs per AI Core) of
    a generic-template run: the CV blocks go out in consecutive runs of ceil(CV blocks / AIVs) per AIV, an AI
    Core taking its AIVs' runs in order (instead of section k on core k % block_dim). *core_starts*: the first
    section of every core and the end, given (the weighted split of docs/fag.md, which tiling.balanced_split
    computes and its own tests check). With *contiguous* or *core_starts* on a chip of two AIVs per AI Core, each AIV
    runs its own run and the cube takes the two runs' CV blocks in turn (first AIV's first, second AIV's first,
    first AIV's second, ...), which is the order of the core's adds; *aiv_split* gives the first section of every
    core's second AIV with *core_starts* (with *contiguous* the runs are computed here). *regions*: basic_det (*cv* (512, 512), *dtm*): its tasks are the basic
    grouping's 4 x 4 regions with their blocks column by column (``sections``), and a round's per-strip sum
    starts from the first core's partial instead of +0 (the workspace then adds it, as for SameAB; a strip one
    core alone wrote is that partial added, whether the cube or the AIVs add it).
    *trim*: 8 (SameAB), 64 (generic) or the S1s2Bn2 vector tile width (>= 128): each CV block is the rectangle its kernel computes (``_rect``), fully
    masked blocks included; 0: its kept blocks.
    *dsink_aivs*: SameAB with a sink, the AIVs of the launch (its [N1, AIVs] dsink partials).
    *first_writes*: the deterministic S1s2Bn2 kernel's plain first writes (module docstring); they are not in the
    atomic log, and each is applied in its core's write order before the core's next logged add.
    Raises ValueError if the log does not match the block schedule.
    """
    p = problem
    dt = np.dtype(p.dtype)
    f = lambda x: np.asarray(x).astype(_F32)  # noqa: E731 - widening is exact
    ctx = {"q": f(query), "k": f(key_in), "v": f(value), "dy": f(dy), "max": softmax_max, "sum": softmax_sum,
           "dt": dt, "k0": 32 // dt.itemsize, "sink": None if sink_in is None else f(sink_in), "mask": atten_mask,
           "qr": None if query_rope is None else f(query_rope), "kr": None if key_in_rope is None else f(key_in_rope), "dsink": {n: [] for n in range(p.N1)},
           "pse": None if pse_shift is None else f(pse_shift),
           "bits": None if drop_mask is None else np.unpackbits(np.asarray(drop_mask).view(np.uint8).reshape(-1),
                                                                  bitorder="little"),
           "cu_ss": np.concatenate(([0], np.cumsum(np.asarray(p.seq_q, np.int64) * p.seq_kv))), "sinkblk": {}}
    with np.errstate(all="ignore"):
        prod = (ctx["dy"] * f(attention_in)).astype(_F32)
    ctx["sfmg"] = row_sum(prod.reshape(-1, p.D)).reshape(p.T1, p.N1).astype(_F32)
    ctx["tiled_sink"] = sink_in is not None and cv is not None and not regions and _tiled_template(trim) is not None
    secs = sections(p, None if regions else cv, dtm, regions, trim)
    fifo = {c: deque() for c in range(block_dim)}
    owner = lambda k: k % block_dim  # noqa: E731
    if contiguous is not None:
        per_aiv = max(1, -(-len(secs) // contiguous[0]))
        owner = lambda k: k // per_aiv // contiguous[1]  # noqa: E731
    if core_starts is not None:
        owner = lambda k: int(np.searchsorted(core_starts, k, side="right")) - 1  # noqa: E731
    strips, adds = [], []
    for k, sec in enumerate(secs):  # in section order (the dsink partials' order)
        ctx["sec_core"] = owner(k)
        if cv is None and not regions:
            adds.append([c + (False,) for blk in sec for c in _block(p, ctx, blk)])  # every chunk added
        elif dtm:
            strips.append(_cv_block(p, ctx, sec, None if regions else _tile_plan(p, sec, trim, cv)))
        else:
            plain = _first_kinds(p, sec, cv) if first_writes else ()
            plan = _tile_plan(p, sec, trim, cv)
            adds.append([c + (kind in plain,) for kind, r0, h, val in _cv_block(p, ctx, sec, plan)
                         for c in _chunks(kind, r0, h, val)])
    for k in _cube_order(len(adds), contiguous, core_starts, aiv_split):
        fifo[owner(k)].extend(adds[k])
    shapes = {"dq": (p.T1, p.N1, p.D), "dk": (p.T2, p.N2, p.D), "dv": (p.T2, p.N2, p.D)}
    if p.rope_d:
        shapes |= {"dq_rope": (p.T1, p.N1, p.rope_d), "dk_rope": (p.T2, p.N2, p.rope_d)}
    acc = {k: np.zeros(v, _F32) for k, v in shapes.items()}
    log = atomics if atomics is not None else [(None, c) for c in range(block_dim) for w in fifo[c] if not w[5]]
    if dtm:  # no atomic adds but basic_det's lone dk/dv strips, which the rounds below add in their place
        log = []
    else:  # the cube's adds only: the AIVs' atomic adds are SameAB's dsink partials (one writer per slot, _sab_dsink)
        log = [entry for entry in log if len(entry) < 3 or entry[2] == SubCore.AIC]
    taken = {c: 0 for c in fifo}

    def stores(core):  # the core's plain first writes before its next add
        while fifo[core] and fifo[core][0][5]:
            kind, r0, h, dn, val, _ = fifo[core].popleft()
            acc[kind][r0:r0 + val.shape[0], h, dn:dn + val.shape[1]] = val

    for entry in log:
        core = entry[1]
        if core in fifo:
            stores(core)
        if core not in fifo or not fifo[core]:
            raise ValueError(f"atomic log names core {core} beyond its scheduled writes")
        kind, r0, h, dn, val, _ = fifo[core].popleft()
        taken[core] += 1
        if len(entry) == 4 and entry[3] != taken[core]:  # (buffer, core, sub-core, the core's add number)
            raise ValueError(f"atomic log entry {entry} is not add {taken[core]} of core {core}")
        dst = acc[kind]
        with np.errstate(all="ignore"):
            dst[r0:r0 + val.shape[0], h, dn:dn + val.shape[1]] = \
                (dst[r0:r0 + val.shape[0], h, dn:dn + val.shape[1]] + val).astype(_F32)
    for core in fifo:
        stores(core)
    if any(fifo[c] for c in fifo):
        raise ValueError("the atomic log misses scheduled writes")
    for r0k in range(0, len(strips), block_dim):  # IS_DTM rounds: ordered per-strip sums, then one add each
        group = {}
        with np.errstate(all="ignore"):
            for part in strips[r0k:r0k + block_dim]:
                for kind, r0, h, val in part:
                    key = (kind, r0, h)
                    if regions and key not in group:  # basic_det: the first partial itself
                        group[key] = val
                    else:
                        group[key] = ((group[key] if key in group else np.zeros_like(val)) + val).astype(_F32)
            for (kind, r0, h), val in group.items():
                dst = acc[kind]
                dst[r0:r0 + val.shape[0], h] = (dst[r0:r0 + val.shape[0], h] + val).astype(_F32)
    scale = np.float32(p.scale)
    out = {}
    if sink_in is not None and ctx["tiled_sink"]:
        out["dsink"] = _positive_nan(-_sab_dsink(p, ctx["dsink"], dsink_aivs))  # Muls(-1): a NaN is +NaN
    elif sink_in is not None:
        total = np.zeros(p.N1, _F32)
        with np.errstate(all="ignore"):
            for n, parts in ctx["dsink"].items():
                for v in parts:
                    total[n] = np.float32(total[n] + v)
        out["dsink"] = _positive_nan(-total)  # the kernel negates with Muls(-1): an arithmetic NaN is +NaN
    with np.errstate(all="ignore"):
        for kind, x in acc.items():
            out[kind] = _to_input(x if kind == "dv" else _positive_nan((x * scale).astype(_F32)), dt).astype(dt)
    return out
