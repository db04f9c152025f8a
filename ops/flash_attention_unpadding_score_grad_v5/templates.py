"""Which CANN FlashAttentionScoreGrad template a TND call gets, and the CV block shapes of the SameAB and the
generic (UnpaddedAttension / S1s2Bn2gs1s2) templates.

Why its own module: the tiling, the docs and the estimate all need the same answer, and it is a host
decision apart from how any template tiles. CANN tries the registered templates in ascending priority
and takes the first whose IsCapable() holds (``REGISTER_TILING_TEMPLATE_WITH_SOCVERSION``, A2/A3
sources in cannmirror/ops-transformer ``attention/flash_attention_score_grad/op_host/arch32/``); the
conditions below are those functions' tests as they apply to a validated V5 TND call (docs/fag.md
"Template selection" cites the lines). Templates 10000 (Ubngs1s2Bb) and 11000 (Ungs1s2Bbn) read only
BNSD/BSND shapes and 15000 (S1s2Bn2) refuses TND when not deterministic, so none of them takes a TND call.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

#: (priority, name) of the templates that can take a TND call, in the order CANN tries them
PRIORITIES = ((1000, "deterministic_s1s2bn2"), (1001, "basic"), (1002, "basic_det"), (1100, "sameab_det"),
              (2000, "unpadded"), (15500, "sameab"), (16000, "s1s2bn2gs1s2"))
SAB_TND_SIZE = 1024  # tiling_common.h
S_MAX = 32768  # ..._basic.cpp
SAB_BASE = 512  # SAMEAB_S1_BASE / SAMEAB_S2_BASE (..._sab.cpp)
SAB_256 = 256  # SAMEAB_S1_256
TOTAL_BLOCK_PIPELINE = 64
TOTAL_SIZE = 189 * 1024  # UB bytes the deterministic reduction may take (..._sab.cpp)
VEC_SPLIT_NUM = 3  # dq, dk, dv reductions share the AIVs in thirds


ALIGN_D, SPARE_ALIGN_D = 128, 16  # ALIGN_D_DIM_SIZE, SPARE_ALIGN_D_DIM_SIZE (op_api/aclnn_flash_attention_score_grad.cpp)
TND_MAX_S2, TND_MAX_DDIM, TND_MAX_S1_SUM = 1024, 96, 160 * 1024  # CheckTndIsNeedPad's no-pad shape


def aclnn_head_dim(problem, deterministic: bool) -> int:
    """The head dim the tiling sees: the aclnn layer pads D with zeros to a multiple of 16 (D < 128) or of 128
    (PaddingInputTensorDdim) before the FlashAttentionScoreGrad op when D is not one (needPadDimD), except, when
    not deterministic, for D % 8 == 0 or for the short shapes (longest Skv <= 1024, D < 96, T1 < 160K, no
    dropout) of CheckTndIsNeedPad; the outputs are sliced back. With determinism on it always pads."""
    p = problem
    align = SPARE_ALIGN_D if p.D < ALIGN_D else ALIGN_D
    if p.D % align == 0:
        return p.D
    if not deterministic and (p.D % 8 == 0 or (p.max_skv <= TND_MAX_S2 and p.D < TND_MAX_DDIM
                                                  and p.T1 < TND_MAX_S1_SUM and not p.dropout)):
        return p.D
    return -(-p.D // align) * align


def tiling_view(problem, deterministic: bool):
    """*problem* as CANN's tiling sees it (D padded by the aclnn layer, aclnn_head_dim). npusim's kernels run the
    unpadded D: the padded columns are zeros, so S, dP and the kept outputs are the same values (docs/fag.md)."""
    d = aclnn_head_dim(problem, deterministic)
    return problem if d == problem.D else replace(problem, D=d)


def sab_hit(problem) -> bool:
    """isTndSABHit: the average of the cumulative lengths up to the last non-zero entry is >= 1024 for both q
    and kv (integer division, as the host computes it)."""
    cq, ckv = np.cumsum(problem.seq_q), np.cumsum(problem.seq_kv)
    nz = np.flatnonzero(cq != 0)
    if not len(nz):
        return False
    i = int(nz[-1])
    return int(cq[i]) // (i + 1) >= SAB_TND_SIZE and int(ckv[i]) // (i + 1) >= SAB_TND_SIZE


def _tnd2bsh(p) -> bool:
    """ProcessTndToBsh: every batch has the maximum lengths, Sq == Skv, no band modes 7/8 and no pse."""
    return (p.B * p.max_sq == p.T1 and p.B * p.max_skv == p.T2 and p.max_sq == p.max_skv
            and p.sparse_mode not in (7, 8) and p.pse_form == "none")


def capable(problem, deterministic: bool) -> dict:
    """IsCapable() of every template in PRIORITIES for this call: {name: bool}."""
    p = problem
    fp32 = np.dtype(p.dtype).itemsize == 4
    rope = p.rope_d > 0
    pse = p.pse_form != "none"
    has_mask = p.atten_mask_shape is not None
    layout_default = p.softmax_in_layout == ""
    d_ok = p.D <= 128 and p.D % 16 == 0
    equal_len = p.T1 == p.T2 and bool((p.seq_q == p.seq_kv).all())
    hit = sab_hit(p)
    out = {}
    # 1000 FlashAttentionScoreGradTilingDeterministic (..._s1s2_bn2.cpp:154-192)
    out["deterministic_s1s2bn2"] = (deterministic and not p.sink and layout_default and not rope
                                    and (fp32 or (p.max_sq < 1024 and p.max_skv < 1024)))
    # 1001 FlashAttentionScoreGraTilingMla (..._basic.cpp:160-238)
    mask_ok = ((p.sparse_mode == 0 and not has_mask) or (p.sparse_mode in (2, 3) and has_mask))
    out["basic"] = (not p.sink and not fp32 and not deterministic and not pse and not p.dropout and mask_ok
                    and d_ok and equal_len and p.max_sq <= S_MAX)
    # 1002 FlashAttentionScoreGraTilingBasicDet (..._basic_det.cpp:151-295; its IsDropMskCapable is false
    # whenever a drop mask is given)
    det_mask_ok = ((p.sparse_mode == 0 and not has_mask)
                   or (p.sparse_mode == 1 and has_mask and tuple(p.atten_mask_shape[-2:]) == (p.max_sq, p.max_skv))
                   or (p.sparse_mode == 3 and has_mask and tuple(p.atten_mask_shape[-2:]) == (2048, 2048)))
    out["basic_det"] = (deterministic and not fp32 and not pse and det_mask_ok and not p.dropout and d_ok)
    # 1100 FlashAttentionScoreGradTilingSameABDeterministic (..._sab.cpp:159-184)
    out["sameab_det"] = deterministic and (p.sink or (not rope and not fp32))
    # 2000 FlashAttentionScoreGradTilingUnpaddedAttension (..._unpadded_attension.cpp:28-53)
    out["unpadded"] = not p.sink and layout_default and not _tnd2bsh(p) and not hit
    # 15500 FlashAttentionScoreGradTilingS1s2Bn2gs1s2SameAb (..._sab.cpp:109-157)
    sab = False
    if not (deterministic and rope):
        if p.sink:
            sab = True
        elif not fp32 and hit:
            special = (p.D == 128 and 1 <= p.B <= 16 and p.G >= 4 and p.T1 == p.T2 and p.sparse_mode in (0, 3)
                       and not p.dropout and not pse)
            cq = np.cumsum(p.seq_q)
            sab = (not special) or any((i > 0 and cq[i] == cq[i - 1]) or p.seq_q[i] != p.seq_kv[i]
                                       or (i > 0 and cq[i] - cq[i - 1] > S_MAX) for i in range(p.B))
    out["sameab"] = sab
    # 16000 FlashAttentionScoreGradTilingS1s2Bn2gs1s2 (..._s1s2_bn2gs1s2.cpp:113-121): all but sink
    out["s1s2bn2gs1s2"] = not p.sink
    return out


def cann_template(problem, deterministic: bool) -> str:
    """The template CANN's registry gives this call (its D padded as the aclnn layer pads it, tiling_view): the
    first capable one in priority order."""
    ok = capable(tiling_view(problem, deterministic), deterministic)
    for _, name in PRIORITIES:
        if ok[name]:
            return name
    raise AssertionError("no FlashAttentionScoreGrad template takes this call")  # 16000 or 15500 always does


def _mask_ratio(p) -> float:
    """CalculateMaskRatio (..._sab.cpp:1060-1097) with s1 / s2 the longest sequences and the call's tokens."""
    s1, s2 = p.max_sq, p.max_skv
    if p.sparse_mode in (0, 4):
        t1, t2 = p.pre_tokens, p.next_tokens
        if t1 >= 0 and t2 >= 0:
            return (min(t1, s1) + min(t2, s2)) / (s1 + s2)
        if t1 < 0 <= t2:
            return (min(t2, s2) + t1) / s2
        return (min(t1, s1) + t2) / s1
    if p.sparse_mode == 2:
        return 1 - 0.5 * s2 / s1 if s1 >= s2 else 0.5 * s1 / s2
    if p.sparse_mode == 3:
        return 0.5 * s2 / s1 if s1 >= s2 else 1 - 0.5 * s1 / s2
    return 1.0


def sab_cv_inner(problem, deterministic: bool, aiv_count: int) -> tuple[int, int]:
    """(s1CvInner, s2CvInner) of the SameAB template (DoSplit / AdjustCvInner, ..._sab.cpp:1101-1226): 512 x 512;
    256 x 256 when a deterministic reduction slice of D would not fit TOTAL_SIZE of UB; 256 x 512 for unequal
    S with a mask ratio <= 0.23 and fewer than 64 CV blocks. (TND calls are always "sparse" there, so the
    short-sequence fitting of the dense BSND case does not apply.)"""
    p = problem
    if deterministic:
        vec = aiv_count // VEC_SPLIT_NUM
        d_align = -(-p.D // 16) * 16
        if -(-SAB_BASE // vec) * d_align * 4 * 2 > TOTAL_SIZE:
            return SAB_256, SAB_256
    s1o, s2o = -(-p.max_sq // SAB_BASE), -(-p.max_skv // SAB_BASE)
    if p.max_sq != p.max_skv and _mask_ratio(p) - 0.23 <= 1e-6 and s1o * s2o < TOTAL_BLOCK_PIPELINE:
        return SAB_256, SAB_BASE
    return SAB_BASE, SAB_BASE


def sab_deterministic(problem, s1_cv: int, s2_cv: int) -> bool:
    """IS_DTM of a deterministic SameAB call: off when one CV block covers every sequence and G == 1
    (GetTilingKey, ..._sab.cpp:211-219): no two cores then add into the same rows."""
    p = problem
    return not (p.max_sq <= s1_cv and p.max_skv <= s2_cv and p.G == 1)


GEN_S1_INNER = 128  # INITIAL_S1_SPLIT_NUM (..._s1s2_bn2gs1s2.cpp): vector tile rows
GEN_S2_INNER = 64  # INITIAL_S2_SPLIT_NUM: vector tile columns
SAB_BASE_MN = GEN_S1_INNER * GEN_S2_INNER  # SameAB's baseMN = s1Inner x s2Inner: a vector tile's elements at most


def align_up(x: int, a: int) -> int:
    return -(-x // a) * a
TND_CV_MIN_S1_AVG = 2048  # TND_CV_MIN_S1_AVG_2K
TND_CV_MAX_S2_AVG = 256  # TND_CV_MAX_S2_AVG_256


def generic_split_balance(problem) -> bool:
    """isSplitBalance: the TND short-key CV ratio of generic_cv_ratio applies (..._s1s2_bn2gs1s2.cpp DoSplit)."""
    return _tnd_short_keys(problem)


def _tnd_short_keys(p) -> bool:
    nz = np.flatnonzero((np.asarray(p.seq_q) > 0) | (np.asarray(p.seq_kv) > 0))
    b = int(nz[-1]) + 1 if len(nz) else 1
    s1_avg, s2_avg = -(-p.T1 // b), -(-p.T2 // b)
    return (s1_avg >= TND_CV_MIN_S1_AVG and s2_avg <= TND_CV_MAX_S2_AVG and np.dtype(p.dtype).itemsize != 4
            and p.D <= 128)


def generic_cv_ratio(problem) -> tuple[int, int]:
    """(s1CvRatio, s2CvRatio) of the generic template (DoSplit, ..._s1s2_bn2gs1s2.cpp): 1 x 8 (a 128 x 512 cube
    block over 128 x 64 vector tiles); D == 64: 1 x 16, or 4 x 2 when s1 >= 256 and s2 <= 128; TND with the
    average query length >= 2048 and average key length <= 256 (ceil(T / B), B without trailing empty batches),
    not fp32 and D <= 128: 4 x 2 when the key average is < 70 or in 80..128, else 4 x 4."""
    p = problem
    s1r, s2r = 1, 8
    if p.D == 64:
        s2r = 16
        if p.max_sq >= 256 and p.max_skv <= 128:
            s1r, s2r = 4, 2
    if _tnd_short_keys(p):
        nz = np.flatnonzero((np.asarray(p.seq_q) > 0) | (np.asarray(p.seq_kv) > 0))
        s2_avg = -(-p.T2 // (int(nz[-1]) + 1))
        s1r, s2r = (4, 2) if s2_avg < 70 or 80 <= s2_avg <= 128 else (4, 4)
    return s1r, s2r


def generic_s1_pingpong(problem) -> bool:
    """isTndS1PingPong (..._tiling_s1s2_bn2gs1s2.cpp:1026-1030): the generic kernel's TND_S1_PP variant, for an S1
    CV ratio above 1 (generic_cv_ratio), an input that is not fp32, and neither pse nor atten_mask given (TND: every
    call here). Its AIVs walk a CV block's tiles S2 outer, in pairs of S1 tiles, each tile's softmax-grad rows
    computed into UB beside it (vectiles.pp_tiles; docs/fag.md "Pipeline")."""
    p = problem
    return (generic_cv_ratio(p)[0] != 1 and np.dtype(p.dtype).itemsize != 4 and p.pse_form == "none"
            and p.atten_mask_shape is None)


def generic_cv_inner(problem) -> tuple[int, int]:
    """(s1CvInner, cvS2Inner) of the generic template: min(128, s1 aligned to 16) x s1CvRatio by min(64, s2 aligned
    to 16) x s2CvRatio, s1 / s2 the longest sequences (FuzzyForBestSplit keeps 128 x 64 for every shape npusim
    takes: 32 KiB of fp32 fits UB and L0C). npusim's CV blocks are whole 128 x 128 blocks: a CV side shorter than
    128 covers the whole sequence (a 16-aligned s below 128, or 8 x 16-aligned s below 64) and runs as 128."""
    s1r, s2r = generic_cv_ratio(problem)
    s1a, s2a = -(-problem.max_sq // 16) * 16, -(-problem.max_skv // 16) * 16
    s1cv, s2cv = min(GEN_S1_INNER, s1a) * s1r, min(GEN_S2_INNER, s2a) * s2r
    return -(-s1cv // 128) * 128, -(-s2cv // 128) * 128


BN2_MM_RATIO, BN2_MM_RATIO_WIDE = 4, 8  # MM_RATIO_4 / MM_RATIO_8 (..._tiling_s1s2_bn2.cpp:44-45)
BN2_L2_WIDE = 96 * 1024 * 1024  # B4_L2_CACHESIZE: the 8-wide S2 ratio needs a larger L2 (..._s1s2_bn2.cpp:58, :938)
BN2_VEC_MN = 64 * 128  # the vector tile's elements (DecideBaseMND: baseM 64 x baseN 128, ..._s1s2_bn2.cpp:1037-1041)


def bn2_cv_inner(view, l2_bytes: int) -> tuple[int, int]:
    """(singleM, singleN) of the deterministic S1s2Bn2 template, the CV block its kernel's S1 x S2 loops walk
    (DecideBaseMND + NMDStrategy, ..._tiling_s1s2_bn2.cpp:922-955, :1025-1071): cube base 128 x 128 (128 x 256
    when D <= 64 and s2 >= 256); with D > 64 and s2 < 512 the base is min(256, s1 aligned to 16) x min(128, s2
    aligned to 16), with 512 < s2 < 1024 (and an L2 above 96 MiB) the ratio is 8; s2Ratio = min(ceil(s2 / baseN),
    ratio), s1Ratio = ratio / s2Ratio, or ceil(s1 / baseM) when that covers s1. *view*: the call as the tiling sees
    it (tiling_view). A side that covers a short sequence whole runs as npusim's next multiple of 128."""
    s1, s2, d = int(view.max_sq), int(view.max_skv), int(view.D)
    a16 = lambda x: -(-x // 16) * 16  # noqa: E731
    base_m, base_n, ratio = 128, 256 if d <= 64 and s2 >= 256 else 128, BN2_MM_RATIO
    if d > 64 and s2 < 512:
        base_m, base_n = min(256, a16(s1)), min(128, a16(s2))
    elif d > 64 and 512 < s2 < 1024 and l2_bytes > BN2_L2_WIDE:
        ratio = BN2_MM_RATIO_WIDE
    s2r = max(1, min(-(-s2 // base_n), ratio))
    s1r = ratio // s2r
    s1r = max(1, -(-s1 // base_m) if s1r * base_m > s1 else s1r)
    return -(-base_m * s1r // 128) * 128, -(-base_n * s2r // 128) * 128


def bn2_vec_tile(view) -> tuple[int, int]:
    """(baseM, baseN): the S1s2Bn2 vector tile's rows and columns (VectorBaseMNSplit, ..._tiling_s1s2_bn2.cpp:957-984,
    and the D <= 64 case at :1049-1055). From 64 x 128 (tensorSize 8192 elements): when s2 < 128 and s1 > 64, the
    whole s2 aligned to 16 by 8192 / that (aligned down to 16; 224 above VEC_REPEAT_LIMIT 255); when s2 > 128 and
    s1 < 64, s1 rows by 8192 / s1 (aligned down to 16); rows at most 128, columns at most 512; with a mask or
    dropout the columns align up to 32 and the rows are 8192 / those; 32 x 256 when D <= 64 and s2 >= 256.
    *view*: the call as the tiling sees it (tiling_view; s1, s2 the longest sequences)."""
    s1, s2 = int(view.max_sq), int(view.max_skv)
    base_m, base_n = 64, 128
    if s2 < base_n and s1 > base_m:
        base_n = -(-s2 // 16) * 16
        base_m = BN2_VEC_MN // base_n // 16 * 16
        base_m = 256 - 2 * 16 if base_m > 255 else base_m
    elif s2 > base_n and s1 < base_m:
        base_m = s1
        base_n = BN2_VEC_MN // s1 // 16 * 16
    base_m, base_n = min(base_m, 128), min(base_n, 512)
    if view.dropout or view.mask_form != "none":
        base_m = BN2_VEC_MN // (-(-base_n // 32) * 32)
        base_n = -(-base_n // 32) * 32
        base_m, base_n = min(base_m, 128), min(base_n, 512)
    if view.D <= 64 and s2 >= 256:
        base_m, base_n = 32, 256
    return base_m, base_n


def bn2_vec_base_n(view) -> int:
    """The width of the pieces the S1s2Bn2 kernel computes a CV block's columns in (AssureUsefulDataBySingleN): its
    vector tile's width (bn2_vec_tile), at least 128 (a narrower tile covers the whole sequence)."""
    return max(128, bn2_vec_tile(view)[1])
