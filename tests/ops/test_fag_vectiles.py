"""vectiles.py: the vector tiles of SameAB's and the generic template's AIVs, against hand-worked CANN geometry
(..._sab.h ComputeVec: s2VecSize = min(width, 256), s1VecSize = baseMN / aligned s2VecSize, at most 128)."""
from ops.flash_attention_unpadding_score_grad_v5.vectiles import SAB_BASE_MN, tile_align, tile_grid, vec_tiles


def test_512_wide_cv_block_is_32_by_256_tiles_split_by_tile_rows():
    assert tile_grid(512, 512, SAB_BASE_MN, 16) == (32, 16, 256, 2)
    aiv0, aiv1 = vec_tiles(512, 512, SAB_BASE_MN, 16, 0), vec_tiles(512, 512, SAB_BASE_MN, 16, 1)
    assert aiv0[:3] == [(0, 32, 0, 256), (0, 32, 256, 256), (32, 32, 0, 256)]
    assert max(r0 + h for r0, h, _, _ in aiv0) == 256 and min(r0 for r0, _, _, _ in aiv1) == 256
    assert len(aiv0) == len(aiv1) == 16


def test_narrow_rectangle_rows_follow_the_aligned_width():
    assert tile_align(False) == 16 and tile_align(True) == 32
    assert tile_grid(512, 80, SAB_BASE_MN, 16) == (102, 6, 80, 1)  # 8192 // 80
    assert tile_grid(512, 80, SAB_BASE_MN, 32) == (85, 7, 80, 1)  # 8192 // 96
    assert tile_grid(40, 520, SAB_BASE_MN, 16)[:2] == (32, 2)
    assert [w for _, _, _, w in vec_tiles(40, 520, SAB_BASE_MN, 16, None)[:3]] == [256, 256, 8]
    assert tile_grid(512, 16, SAB_BASE_MN, 16)[0] == 128  # the 128-row cap


def test_one_tile_row_goes_to_the_second_aiv():
    assert vec_tiles(20, 512, SAB_BASE_MN, 16, 0) == []
    assert vec_tiles(20, 512, SAB_BASE_MN, 16, 1) == [(0, 20, 0, 256), (0, 20, 256, 256)]


# ------------------------------------------------------------------------------------------- deterministic S1s2Bn2
def _view(s1, s2, d, masked=False):
    from types import SimpleNamespace
    return SimpleNamespace(max_sq=s1, max_skv=s2, D=d, dropout=False, mask_form="causal_2048" if masked else "none")


def test_bn2_vec_tile_on_hand_worked_shapes():
    """VectorBaseMNSplit + DecideBaseMND (..._tiling_s1s2_bn2.cpp:957-984, :1049-1055), 8192 elements a tile."""
    from ops.flash_attention_unpadding_score_grad_v5.templates import bn2_vec_base_n, bn2_vec_tile
    assert bn2_vec_tile(_view(600, 600, 64)) == (32, 256)  # D <= 64 and s2 >= 256
    assert bn2_vec_tile(_view(600, 600, 128)) == (64, 128)
    assert bn2_vec_tile(_view(300, 100, 128)) == (64, 112)  # s2 < 128: 112 wide, 8192 // 112 = 73 -> 64 rows
    assert bn2_vec_tile(_view(300, 64, 128)) == (128, 64)  # 8192 // 64 = 128 rows
    assert bn2_vec_tile(_view(300, 80, 128, masked=True)) == (85, 96)  # 96 rows, then 80 -> 96 wide, 8192 // 96
    assert bn2_vec_tile(_view(40, 200, 128)) == (40, 192)  # s1 < 64: 8192 // 40 = 204 -> 192 wide
    assert bn2_vec_tile(_view(40, 200, 128, masked=True)) == (42, 192)  # 8192 // 192
    assert bn2_vec_base_n(_view(300, 100, 128)) == 128  # the rectangles' pieces: at least 128


def test_bn2_tiles_per_softmax_grad_chunk():
    """A 300 x 512 rectangle in 32 x 256 tiles, 256-row chunks: chunk 0 has 8 rows of 2 tiles; chunk 1 (44 rows)
    starts its tiles at its own first row: 32 and 12 rows."""
    from ops.flash_attention_unpadding_score_grad_v5.vectiles import bn2_tiles
    c0, c1 = bn2_tiles(300, 512, 32, 256, 256)
    assert len(c0) == 16 and c0[:3] == [(0, 32, 0, 256), (0, 32, 256, 256), (32, 32, 0, 256)]
    assert c1 == [(256, 32, 0, 256), (256, 32, 256, 256), (288, 12, 0, 256), (288, 12, 256, 256)]
    assert bn2_tiles(200, 300, 85, 96, 128) == [[(a, min(85, 128 - a), c, min(96, 300 - c)) for a in (0, 85)
                                                 for c in (0, 96, 192, 288)],
                                                [(128, 72, c, min(96, 300 - c)) for c in (0, 96, 192, 288)]]


def test_bn2_golden_tiles_equal_the_kernel_views():
    """golden._tile_plan re-derives the S1s2Bn2 tiles on its own: the same tiles as the kernel's views, section by
    section, on a 32 x 256 call and on an 85 x 96 one (s2 80 with a mask, 128-row chunks)."""
    import importlib
    from ops import flash_attention_unpadding_score_grad_v5 as fag
    from ops.flash_attention_unpadding_score_grad_v5.vectiles import bn2_section_views
    from tests.ops.fag_cases import make_case
    golden = importlib.import_module("ops.flash_attention_unpadding_score_grad_v5.golden")
    for kw in (dict(seq_q=[600, 130, 300], seq_kv=[600, 130, 300], n1=4, n2=2, d=64, layout="", sparse_mode=2,
                    causal=True),
               dict(seq_q=[300, 200], seq_kv=[80, 40], n1=2, d=32, layout="", full_mask=True)):
        a, p = make_case(**kw)
        t = fag(**a, deterministic=True, mode="timing").tiling
        assert t.template == "basic_bn2"
        chunk = min(256, t.s1CvInner)
        for k in range(t.sections):
            blocks = range(t.secStart[k], t.secStart[k + 1])
            sec = [(t.blkB[i], t.blkN[i], t.blkS1o[i], t.blkS2o[i], t.blkRows[i], t.blkCols[i], t.blkMasked[i])
                   for i in blocks]
            r0, c0 = min(x[2] for x in sec) * 128, min(x[3] for x in sec) * 128
            kernel = [(v.row0 - r0, v.rows, v.col0 - c0, v.cols)
                      for _, _, views in bn2_section_views(t, k, 0, chunk, 16) for v in views]
            assert golden._tile_plan(p, sec, t.cvTrim, (t.s1CvInner, t.s2CvInner))["aivs"] == [kernel]
