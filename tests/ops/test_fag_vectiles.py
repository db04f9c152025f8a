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
