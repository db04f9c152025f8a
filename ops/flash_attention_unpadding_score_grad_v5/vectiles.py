"""The vector tiles SameAB's and the generic template's AIVs walk over a CV block's rectangle (docs/fag.md "Pipeline").

Why: CANN's vector side does not work per 128 x 128 block; it cuts the CV block's computed rectangle into tiles of
at most ``baseMN`` elements (``..._sab.h`` / ``..._s1s2_bn2gs1s2.h`` ComputeVec): s2VecSize = min(width, 256)
columns (VEC_S2_LEN) by s1VecSize = baseMN // (s2VecSize aligned to 16, or to 32 with a mask or dropout) rows, at
most 128 and at most the rectangle's rows. SameAB's AIV 0 takes the first s1VecLoop // 2 rows of tiles and AIV 1
the rest (the ND output of a TND call: ``halfLoop = s1VecLoop / 2 * s2VecLoop``), each row of tiles by column tiles;
a generic AIV takes every tile of its own CV block, rows of tiles outer. The deterministic S1s2Bn2 kernel cuts each
softmax-grad chunk of its CV block into baseM x baseN tiles (templates.bn2_vec_tile, ``bn2_tiles``). The golden
re-derives the same geometry on its own (golden.py ``_tile_plan``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ops.flash_attention_unpadding_score_grad_v5.templates import SAB_BASE_MN, align_up  # noqa: F401 (SAB_BASE_MN)
from ops.flash_attention_unpadding_score_grad_v5.tiling import BASE

VEC_S2_LEN = 256  # VEC_S2_LEN: a vector tile's columns at most
VEC_ROWS_MAX = 128  # s1VecSize's cap (a repeat's stride field)
SFMG_DB_INPUT_ELEMS = 18 * 1024 // 4  # SFMG_DB_INPUT_UBSIZE / 4: one TND_S1_PP side's fp32 sfmg input at most
SFMG_S1_ALIGN = 8  # SFMG_S1_ALIGN_NUM: TND_S1_PP tile rows are a multiple of 8 where above 8


def tile_align(masked_or_dropout: bool) -> int:
    """s2AlignFactor: the tile's row length aligns to 32 elements with a mask or dropout (their bytes), else 16."""
    return 32 if masked_or_dropout else 16


def tile_grid(rows: int, cols: int, base_mn: int, align: int) -> tuple[int, int, int, int]:
    """(s1VecSize, s1VecLoop, s2VecSize, s2VecLoop) of a rows x cols rectangle."""
    s2 = min(cols, VEC_S2_LEN)
    s1 = min(base_mn // align_up(s2, align), rows, VEC_ROWS_MAX)
    return s1, -(-rows // s1), s2, -(-cols // s2)


def vec_tiles(rows: int, cols: int, base_mn: int, align: int, share: int | None) -> list[tuple[int, int, int, int]]:
    """The tiles (first row, rows, first column, columns) of a rows x cols rectangle one AIV computes, in its order.
    *share*: 0 / 1 for SameAB's AIV 0 / 1 (the first s1VecLoop // 2 rows of tiles / the rest), None for an AIV that
    takes the whole rectangle (generic). Either way rows of tiles outer, column tiles inner."""
    s1, l1, s2, l2 = tile_grid(rows, cols, base_mn, align)
    half = l1 // 2
    rows_of = range(l1) if share is None else range(half) if share == 0 else range(half, l1)
    return [(a * s1, min(s1, rows - a * s1), c * s2, min(s2, cols - c * s2)) for a in rows_of for c in range(l2)]


def _align8_down(x: int) -> int:
    return x // SFMG_S1_ALIGN * SFMG_S1_ALIGN if x > SFMG_S1_ALIGN else x


def pp_tile_rows(rows: int, cols: int, base_mn: int, align: int, d: int) -> int:
    """s1VecSize of the generic kernel's TND_S1_PP variant (..._s1s2_bn2gs1s2.h:2255-2277): the rows whose fp32
    dY and attention_in (D aligned to 16, sfmgdInner: D is not split) fit SFMG_DB_INPUT_UBSIZE, at most the
    rectangle's rows, and at most the rows baseMN gives the tile's aligned width (capped at 128), each aligned down to
    8 where above 8."""
    sfmg = _align8_down(min(SFMG_DB_INPUT_ELEMS // align_up(d, 16) // SFMG_S1_ALIGN * SFMG_S1_ALIGN, rows))
    graph_ab = _align8_down(min(base_mn // align_up(min(cols, VEC_S2_LEN), align), rows, VEC_ROWS_MAX))
    return max(1, min(sfmg, graph_ab))


def pp_tiles(rows: int, cols: int, base_mn: int, align: int, d: int) -> list[tuple[int, int, int, int]]:
    """The TND_S1_PP tiles (first row, rows, first column, columns) of a rows x cols rectangle in the kernel's order
    (..._s1s2_bn2gs1s2.h:2334-2393): column tiles outer, row tiles inner (pp_pairs pairs them two by two)."""
    s1, s2 = pp_tile_rows(rows, cols, base_mn, align, d), min(cols, VEC_S2_LEN)
    return [(a, min(s1, rows - a), c, min(s2, cols - c)) for c in range(0, cols, s2) for a in range(0, rows, s1)]


def pp_pairs(views: list) -> list:
    """TND_S1_PP's ping-pong pairs: per column of tiles, row tiles two at a time (a column's odd last one alone)."""
    cols = {}
    for v in views:
        cols.setdefault(v.col0, []).append(v)
    return [col[k:k + 2] for col in cols.values() for k in range(0, len(col), 2)]


@dataclass(frozen=True)
class VecView:
    """What one vector pass (SubGrapA, the sfmg rows, SubGrapB) works on: rows x cols of S / dP of head n of batch
    b from batch row row0 and column col0, at UB row pitch *pitch*, gathered from (and its P / dS returned to) the
    section's 128 x 128 slot blocks: *pieces* = (slot block, first row in it, rows, first column in it, columns, UB
    element offset). *masked*: some piece's block holds a masked element."""

    b: int
    n: int
    row0: int
    col0: int
    rows: int
    cols: int
    pitch: int
    masked: bool
    pieces: tuple
    block: int = -1  # a half block's block index (its dsink partial's slot); -1 for a tile
    gm_pitch: int = BASE  # fp32 row pitch of the pieces' slot rows: BASE per block, the CV matrix's (cv_pitch)
    tpieces: tuple = ()  # fp32 with an ND matrix: the per-block pieces its P^T / dS^T transposes go to (npusim's slots)

    @property
    def block_pieces(self) -> tuple:
        """The view's pieces per 128 x 128 slot block (fp32's transposed P^T / dS^T slots are per block)."""
        return self.tpieces or self.pieces


def block_view(t, i: int, j: int, lo: int, rows: int) -> VecView:
    """Rows lo .. lo + rows of block i (slot block j) as one pass: the basic templates' half-block pieces (UB row
    pitch: whole fp32 repeats, so that mask bytes and Select bits line up)."""
    cols = t.blkCols[i]
    return VecView(t.blkB[i], t.blkN[i], t.blkS1o[i] * BASE + lo, t.blkS2o[i] * BASE, rows, cols,
                   align_up(cols, 64), bool(t.blkMasked[i]), ((j, lo, rows, 0, cols, 0),), i)


def bn2_tiles(rows: int, cols: int, base_m: int, base_n: int, chunk: int) -> list[list[tuple[int, int, int, int]]]:
    """The deterministic S1s2Bn2 kernel's tiles of a rows x cols rectangle, per softmax-grad chunk of *chunk* rows
    (VectorByCS1: SFTS1Times chunks; VectorByS1S2, ..._s1s2_bn2.h:3939-3962: loop l of a chunk is row tile
    l // vS2Times, column tile l % vS2Times): base_m x base_n tiles (the columns at most VEC_S2_LEN) from each chunk's
    first row, rows of tiles outer. One list per chunk, (first row, rows, first column, columns)."""
    s2 = min(base_n, VEC_S2_LEN)
    out = []
    for k in range(0, rows, chunk):
        nr = min(chunk, rows - k)
        out.append([(k + a, min(base_m, nr - a), c, min(s2, cols - c)) for a in range(0, nr, base_m)
                    for c in range(0, cols, s2)])
    return out


def _grid(t, s: int):
    """(first block, block rows per s1 block, block columns per s2 block) of section s when its blocks are a full
    row-major grid of adjacent blocks; None otherwise."""
    blocks = range(t.secStart[s], t.secStart[s + 1])
    s1s = sorted({t.blkS1o[i] for i in blocks})
    s2s = sorted({t.blkS2o[i] for i in blocks})
    nc = len(s2s)
    grid = [(a, c) for a in s1s for c in s2s]
    if [(t.blkS1o[i], t.blkS2o[i]) for i in blocks] != grid or s1s[-1] - s1s[0] + 1 != len(s1s) \
            or s2s[-1] - s2s[0] + 1 != nc:
        return None
    first = blocks[0]
    return first, [t.blkRows[first + a * nc] for a in range(len(s1s))], [t.blkCols[first + c] for c in range(nc)]


def _rect_size(h: list, w: list) -> tuple[int, int]:
    return (len(h) - 1) * BASE + h[-1], (len(w) - 1) * BASE + w[-1]


#: the templates whose cube writes a CV block's S and dP as one ND matrix (CANN: SameAB / generic s2CvExtendAlign,
#: ..._sab.h:1132, ..._s1s2_bn2gs1s2.h:2067; S1s2Bn2 b32AlignProcessN, ..._s1s2_bn2.h:3283)
ND_TEMPLATES = {"sameab": 16, "sameab_det": 16, "generic": 16, "basic_bn2": 8}


def nd_layout(t, s: int) -> tuple[int, int]:
    """(fp32 row pitch, block columns) of section s's S / dP ND matrix from one walk of its blocks (_grid), so that
    the kernel can keep both per section and place each block with nd_block; (0, 0) where the cube writes per
    block (cv_pitch)."""
    align = ND_TEMPLATES.get(t.template)
    grid = _grid(t, s) if align else None
    if grid is None:
        return 0, 0
    return align_up(_rect_size(grid[1], grid[2])[1], align), len(grid[2])


def cv_pitch(t, s: int) -> int:
    """fp32 row pitch of section s's S / dP in its slot: one ND matrix of the CV block's rectangle, its width
    aligned to ND_TEMPLATES's elements (CANN's layout, fp32 inputs too); 0 where the cube writes per 128 x 128 block
    at pitch BASE: the basic templates, sections that are not a full grid."""
    return nd_layout(t, s)[0]


def nd_block(k: int, pitch: int, cols: int) -> int:
    """fp32 element offset of the k-th block of a row-major grid of *cols* block columns in its ND matrix of row
    pitch *pitch* (nd_layout's pair)."""
    return k // cols * BASE * pitch + k % cols * BASE


def _views(t, off: int, grid, tiles, align: int, nd: int = 0, b32: bool = False) -> list[VecView]:
    """*tiles* (first row, rows, first column, columns of the rectangle) as passes over the grid's slot blocks, or
    with *nd* (cv_pitch) as one piece each of the CV block's ND matrix (slot off, rows *nd* fp32 apart); *b32* with
    *nd*: the per-block pieces too, as tpieces (fp32's P^T / dS^T slots)."""
    first, h, w = grid
    nc = len(w)
    row_base, col_base = t.blkS1o[first] * BASE, t.blkS2o[first] * BASE
    out = []
    for r0, nr, c0, ncols in tiles:
        pitch = align_up(ncols, align)
        pieces, masked = [], False
        for a in range(r0 // BASE, (r0 + nr - 1) // BASE + 1):
            lr0, lr1 = max(r0, a * BASE) - a * BASE, min(r0 + nr, a * BASE + h[a]) - a * BASE
            for c in range(c0 // BASE, (c0 + ncols - 1) // BASE + 1):
                lc0, lc1 = max(c0, c * BASE) - c * BASE, min(c0 + ncols, c * BASE + w[c]) - c * BASE
                k = a * nc + c
                masked = masked or bool(t.blkMasked[first + k])
                if not nd or b32:
                    pieces.append((off + k, lr0, lr1 - lr0, lc0, lc1 - lc0,
                                   (a * BASE + lr0 - r0) * pitch + c * BASE + lc0 - c0))
        tpieces = tuple(pieces) if nd and b32 else ()
        if nd:  # one piece: the CV block's ND matrix
            pieces = [(off, r0, nr, c0, ncols, 0)]
        out.append(VecView(t.blkB[first], t.blkN[first], row_base + r0, col_base + c0, nr, ncols, pitch,
                           masked, tuple(pieces), gm_pitch=nd or BASE, tpieces=tpieces))
    return out


def section_views(t, s: int, off: int, share: int | None, base_mn: int, align: int,
                  nd: int = 0, b32: bool = False, pp_d: int = 0) -> list[VecView] | None:
    """The tiles (vec_tiles) of section s's rectangle that one AIV computes, as passes over the section's slot
    blocks (slot off + k for its k-th block, row-major; with *nd*, cv_pitch, its ND matrix at slot off); None when
    the section's blocks are not a full row-major grid (the estimate's stand-in sections of the basic grouping),
    which then run by half blocks. *pp_d*: the head dim of a TND_S1_PP call (pp_tiles; 0: vec_tiles)."""
    grid = _grid(t, s)
    if grid is None:
        return None
    size = _rect_size(grid[1], grid[2])
    tiles = pp_tiles(*size, base_mn, align, pp_d) if pp_d else vec_tiles(*size, base_mn, align, share)
    return _views(t, off, grid, tiles, align, nd, b32)


def bn2_section_views(t, s: int, off: int, chunk: int, align: int,
                      nd: int = 0, b32: bool = False) -> list[tuple[int, int, list[VecView]]] | None:
    """The deterministic S1s2Bn2 tiles (bn2_tiles) of section s as passes, per softmax-grad chunk: (the chunk's first
    batch row, its rows, its passes); None when the section is not a full grid (as section_views)."""
    grid = _grid(t, s)
    if grid is None:
        return None
    R, W = _rect_size(grid[1], grid[2])
    row_base = t.blkS1o[grid[0]] * BASE
    return [(row_base + k, min(chunk, R - k), _views(t, off, grid, tiles, align, nd, b32))
            for k, tiles in zip(range(0, R, chunk), bn2_tiles(R, W, t.vecBaseM, t.cvTrim, chunk))]
