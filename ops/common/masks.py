"""sparse_mode semantics shared by the attention operators (PFA now, FlashAttentionVarLenScore later).

Why one module: the element-level rule of each sparse mode, the left-up (LU) token canonicalisation
the real tilings perform, the per-block column ranges the kernels compute and the tiles they read
from the compressed 2048x2048 mask must agree with each other; tests/ops/test_common_masks.py checks
all of them against brute-force loops.

Conventions (research/tiling.md §0, research/oracles.md §0): i = query row, j = key column inside one
batch, S1/S2 = that batch's (actual) query/key lengths. ``keep`` arrays are True where the score is
computed; attention masks and the compressed mask are True/1 where the score is masked.
After canonicalisation every band mode reads: computed iff ``-pre_lu <= j - i <= next_lu``.

Contents
- constants: :data:`PFA_INT_MAX`, :data:`FA_INT_MAX`, :data:`COMPRESSED_MASK_SIZE`,
  :data:`INFERENCE_SPARSE_MODES`, :data:`SPARSE_MODES`;
- :func:`canonical_tokens` (mode + user tokens -> LU tokens, as the tilings set them);
- :func:`keep_mask` (element semantics of modes 0-8), :func:`band_keep`, :func:`invalid_rows`,
  :func:`varlen_band_batch` (which batch of modes 7/8 is the band batch);
- :func:`block_range` (PFA per-s1-block ``[s2First, s2Last)``);
- :func:`compressed_causal_mask`, :func:`causal_tile_offset`, :func:`compressed_tile`,
  :func:`tile_masked` (the slices the kernels read from the compressed mask);
- :func:`prefix_tile_reads` (which windows of the 3072 x 2048 sparse-6 mask a tile reads).
"""
from __future__ import annotations

import numpy as np

from ops.common.errors import tiling_error

#: ``SPARSE_MODE_INT_MAX`` of the PFA tiling (prompt_flash_attention_tiling.cpp constants; also the
#: op prototype's pre_tokens default 214748647 in seeds/000). Sic: one digit short of INT32_MAX.
PFA_INT_MAX = 214748647
#: INT32_MAX, the "all tokens" value of the FA tilings (flash_attention_score_tiling_general.cpp,
#: research/tiling.md §0 "reset INT32_MAX").
FA_INT_MAX = 2147483647
#: Side of the compressed causal mask of modes 2/3/4/7/8 (seeds/000 约束说明; tiling.md §0).
COMPRESSED_MASK_SIZE = 2048
#: The sparse-6 mask is 3072 x 2048: the causal 2048 x 2048 triangle, then 1024 rows of
#: [0 x 1024 | 1 x 1024] (the prefix rectangle; sparse_mode doc, mode 6).
PREFIX_RECT_ROW = COMPRESSED_MASK_SIZE
PREFIX_RECT_HALF = 1024
#: Modes PFA accepts (seeds/000: "sparseMode当前仅支持值为0、1、2、3、4"; tiling.md §0).
INFERENCE_SPARSE_MODES = (0, 1, 2, 3, 4)
#: All modes of sparse_mode参数说明.md (5-8: prefix, prefix compressed, varlen split-q RD/LU).
SPARSE_MODES = tuple(range(9))


def _check_mode(sparse_mode: int, inference: bool) -> None:
    allowed = INFERENCE_SPARSE_MODES if inference else SPARSE_MODES
    if sparse_mode not in allowed:
        raise tiling_error("sparse_mode", f"sparse_mode = {sparse_mode} is out of range "
                                          f"(supported: {', '.join(map(str, allowed))})")


def canonical_tokens(sparse_mode: int, pre_tokens: int, next_tokens: int, s1: int, s2: int,
                     has_mask: bool, inference: bool, *, band_batch: bool = False) -> tuple[int, int]:
    """Left-up ``(pre_lu, next_lu)`` of one batch, as the real tiling computes them.

    *inference* selects the PFA tiling (``prompt_flash_attention_tiling.cpp``: "all" is
    :data:`PFA_INT_MAX`, tokens above it are capped; mode 2 -> (INT_MAX, 0); mode 3 ->
    (INT_MAX, S2-S1); mode 4 -> (pre-S2+S1, next+S2-S1), the ``preTokensPerbatch``/
    ``nextTokensPerbatch`` of that file) or the FA tiling (tiling.md §0: "all" is
    :data:`FA_INT_MAX`; mode 1/5/6 reset to INT32_MAX if pre < S1-1 or next < S2-1; mode 2 ->
    (S1, 0); mode 3 -> (S1, S2-S1); mode 4 as PFA without capping; modes 7/8 per batch: the band
    batch (*band_batch*) as mode 4, the others as mode 3 / mode 2).
    *has_mask*: an attention mask with data was given (mode 0 without one ignores the tokens).
    Prefix modes 5/6 are not bands: their tokens are returned as the tiling stores them, but
    :func:`keep_mask` with *prefix* defines what is computed. Raises AclnnError 561002 for a mode
    the chosen tiling rejects.
    """
    _check_mode(sparse_mode, inference)
    big = PFA_INT_MAX if inference else FA_INT_MAX
    pre, nxt = int(pre_tokens), int(next_tokens)
    if inference:
        pre, nxt = min(pre, big), min(nxt, big)  # PFA caps after its sign checks
    if sparse_mode in (7, 8):
        sparse_mode = 4 if band_batch else (3 if sparse_mode == 7 else 2)
    if sparse_mode == 0:
        return (pre, nxt) if has_mask else (big, big)
    if sparse_mode in (1, 5, 6):
        if inference or pre < s1 - 1 or nxt < s2 - 1:
            return big, big
        return pre, nxt
    if sparse_mode == 2:
        return (big if inference else s1), 0
    if sparse_mode == 3:
        return (big if inference else s1), s2 - s1
    return pre - s2 + s1, nxt + s2 - s1  # mode 4: right-down origin -> left-up


def _index_grid(s1: int, s2: int) -> np.ndarray:
    """``j - i`` for every (i, j), int64."""
    return np.arange(s2, dtype=np.int64)[None, :] - np.arange(s1, dtype=np.int64)[:, None]


def _clip_token(t: int, s1: int, s2: int, extra: int = 0) -> int:
    """Clip a token count to +-(S1+S2+extra+1): same band over rows < S1+extra, no int64 overflow."""
    lim = s1 + s2 + extra + 1
    return max(-lim, min(lim, int(t)))


def band_keep(pre_lu: int, next_lu: int, s1: int, s2: int) -> np.ndarray:
    """[s1, s2] bool: True where ``-pre_lu <= j - i <= next_lu`` (the LU band)."""
    d = _index_grid(s1, s2)
    return (d >= -_clip_token(pre_lu, s1, s2)) & (d <= _clip_token(next_lu, s1, s2))


def _user_mask_keep(atten_mask, s1: int, s2: int) -> np.ndarray:
    """Keep part of a full attention mask: its top-left [s1, s2] corner, nonzero = masked."""
    m = np.asarray(atten_mask)
    if m.ndim != 2 or m.shape[0] < s1 or m.shape[1] < s2:
        raise ValueError(f"atten_mask must be 2-D and at least [{s1}, {s2}], got {m.shape}")
    return m[:s1, :s2] == 0


def keep_mask(sparse_mode: int, pre_tokens: int, next_tokens: int, s1: int, s2: int,
              atten_mask=None, prefix: int | None = None, *, band_batch: bool = False) -> np.ndarray:
    """[s1, s2] bool, True where the score is computed, from the mode's own definition.

    The user's (not canonical) tokens are taken (oracles.md §0, sparse_mode参数说明.md):
    0: band ``-pre <= j-i <= next`` AND mask == 0 when *atten_mask* is given, else everything;
    1: mask == 0 (everything without a mask); 2: ``j <= i``; 3: ``j <= i + S2 - S1``;
    4: ``S2-S1-pre <= j-i <= S2-S1+next``; 5/6: mode 3 OR ``j < prefix``; 7/8: the band batch
    (*band_batch*, see :func:`varlen_band_batch`) as mode 4, the others as mode 3 / mode 2.
    *atten_mask* (2-D, at least [s1, s2], nonzero = masked) is used by modes 0 and 1 only: the
    compressed mask of the other modes only encodes the triangle (users must pass the standard one).
    Raises ValueError for an unknown mode, a missing *prefix* or a too small mask.
    """
    if sparse_mode not in SPARSE_MODES:
        raise ValueError(f"sparse_mode must be in 0..8, got {sparse_mode}")
    if sparse_mode in (7, 8):
        sparse_mode = 4 if band_batch else (3 if sparse_mode == 7 else 2)
    d = _index_grid(s1, s2)
    if sparse_mode in (0, 1):
        keep = np.ones((s1, s2), dtype=bool)
        if atten_mask is not None:
            if sparse_mode == 0:
                keep = band_keep(pre_tokens, next_tokens, s1, s2)
            keep &= _user_mask_keep(atten_mask, s1, s2)
        return keep
    if sparse_mode == 2:
        return d <= 0
    if sparse_mode == 3:
        return d <= s2 - s1
    if sparse_mode == 4:
        lo = s2 - s1 - _clip_token(pre_tokens, s1, s2)
        hi = s2 - s1 + _clip_token(next_tokens, s1, s2)
        return (d >= lo) & (d <= hi)
    if prefix is None:
        raise ValueError(f"sparse_mode {sparse_mode} (prefix) needs prefix")
    return (d <= s2 - s1) | (np.arange(s2)[None, :] < int(prefix))


def invalid_rows(keep: np.ndarray) -> np.ndarray:
    """Rows with nothing computed (their output is 0, research/tiling.md §2; NUMERICS.md)."""
    return ~np.asarray(keep, dtype=bool).any(axis=-1)


def varlen_band_batch(sparse_mode: int, s1_lens) -> int | None:
    """Index of the batch that modes 7/8 treat as a band: the last (7) or first (8) batch with
    S1 > 0 (tiling.md §0 table); None for other modes or when every batch is empty.
    """
    if sparse_mode not in (7, 8):
        return None
    nonempty = np.flatnonzero(np.asarray(s1_lens) > 0)
    if nonempty.size == 0:
        return None
    return int(nonempty[-1] if sparse_mode == 7 else nonempty[0])


def block_range(pre_lu: int, next_lu: int, s1: int, s2: int, s_outer: int) -> tuple[np.ndarray, np.ndarray]:
    """Per s1 block of *s_outer* rows, the ``[start, end)`` of S2 columns the PFA kernel computes.

    ``start = clip(so*sOuter - preLU, 0, S2)``, ``end = clip(so*sOuter + nextLU + sOuter, 0, S2)``
    (research/tiling.md §1 "Inner loop", ``x910.h`` ComputeEachCore). The formula uses the full
    block height even for the tail block. ``end <= start`` means the block is skipped. Returns two
    int64 arrays of length ceil(s1 / s_outer). Raises ValueError if s_outer <= 0.
    """
    if s_outer <= 0:
        raise ValueError(f"s_outer must be > 0, got {s_outer}")
    n_blocks = -(-s1 // s_outer)
    row0 = np.arange(n_blocks, dtype=np.int64) * s_outer
    pre = _clip_token(pre_lu, s1, s2, s_outer)
    nxt = _clip_token(next_lu, s1, s2, s_outer)
    start = np.clip(row0 - pre, 0, s2)
    end = np.clip(row0 + nxt + s_outer, 0, s2)
    return start, end


def compressed_causal_mask(size: int = COMPRESSED_MASK_SIZE, dtype=np.uint8) -> np.ndarray:
    """The optimised mask of modes 2/3/4/7/8: strictly upper triangle = 1 (masked), else 0."""
    return np.triu(np.ones((size, size), dtype=dtype), k=1)


def causal_tile_offset(delta: int, s1_base: int, s2_base: int, mask_cols: int = COMPRESSED_MASK_SIZE) -> int:
    """Flat element offset into the compressed mask of a tile's first row (``ComputeOffsetForCausal``).

    ``delta <= 0 ? min(-delta, s1Base) : min(delta, s2Base) * 2048`` (research/tiling.md §0,
    ``flash_attention_score_common.h``). Reading [s1_base, s2_base] from there with row stride
    *mask_cols* gives "masked iff c - r > delta" (r, c: row/column inside the tile).
    """
    if delta <= 0:
        return min(-delta, s1_base)
    return min(delta, s2_base) * mask_cols


def compressed_tile(compressed: np.ndarray, delta: int, s1_base: int, s2_base: int) -> np.ndarray:
    """The [s1_base, s2_base] window the kernel reads from *compressed* for *delta* (bool, True = masked).

    Raises ValueError if the window would leave the mask (needs s1_base + s2_base <= mask side).
    """
    rows, cols = compressed.shape
    if s1_base + s2_base > min(rows, cols):
        raise ValueError(f"tile {s1_base}x{s2_base} does not fit the {rows}x{cols} compressed mask")
    off = causal_tile_offset(delta, s1_base, s2_base, cols)
    idx = off + np.arange(s1_base)[:, None] * cols + np.arange(s2_base)[None, :]
    return compressed.reshape(-1)[idx] != 0


def tile_masked(sparse_mode: int, pre_lu: int, next_lu: int, s1_offset: int, s2_offset: int,
                s1_base: int, s2_base: int, compressed: np.ndarray) -> np.ndarray:
    """Masked elements of one [s1_base, s2_base] score tile for the compressed modes 2/3/4.

    Next side: ``delta = s1Off - s2Off + nextLU`` (mode 2: nextLU = 0; mode 3: S2 - S1, the
    tiling.md "-deltaN for right-down"). Band (mode 4) adds the pre side read with
    ``delta = s1Off - s2Off - preLU - 1`` and inverted (tiling.md §0 "two passes ... inverted select");
    the -1 turns "j - i < -preLU" into the mask's strict "c - r > delta". Tokens are canonical (LU).
    """
    if sparse_mode not in (2, 3, 4):
        raise ValueError(f"tile_masked covers the compressed modes 2/3/4, got {sparse_mode}")
    base = s1_offset - s2_offset
    masked = compressed_tile(compressed, base + next_lu, s1_base, s2_base)
    if sparse_mode == 4:
        masked |= ~compressed_tile(compressed, base - pre_lu - 1, s1_base, s2_base)
    return masked


def prefix_tile_reads(r0: int, col0: int, s1: int, s2: int, prefix: int, slice_rows: int, s2_base: int,
                      width: int) -> tuple[str, int, int]:
    """Windows of the sparse-6 mask a score tile (rows r0.., columns col0.. of one batch, at most
    *slice_rows* x *width*) reads: ``(kind, causal_off, rect_off)``, kind "none" (nothing masked),
    "causal", "rect" or "both" (masked iff both windows are 1).

    An element is masked iff ``j - i > S2 - S1`` (the causal window at ``delta = r0 - col0 + S2 - S1``) and
    ``j >= prefix`` (the rectangle read ``prefix - col0`` columns left of its 0/1 edge). Rows below
    ``S1 - S2 + prefix`` need only the causal window, rows above it only the rectangle.
    """
    delta = r0 - col0 + s2 - s1
    use_rect = s1 + prefix > s2
    dpre = prefix - col0 if use_rect else 0
    if delta >= width or dpre >= width:
        return "none", 0, 0
    inter = s1 - s2 + prefix
    rect = PREFIX_RECT_ROW * COMPRESSED_MASK_SIZE + PREFIX_RECT_HALF - min(max(dpre, 0), PREFIX_RECT_HALF)
    causal = causal_tile_offset(delta, slice_rows, s2_base)
    if r0 >= inter:
        return "causal", causal, rect
    if r0 + slice_rows <= inter:
        return "rect", causal, rect
    return "both", causal, rect
