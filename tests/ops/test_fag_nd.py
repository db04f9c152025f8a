"""The S / dP workspace as CANN lays it out: one ND matrix per CV block (row pitch: the block's width aligned, CANN
s2CvExtendAlign / b32AlignProcessN), so each vector tile copies S and dP in, and P and dS out, in one DataCopyPad;
fp32 too (its transposed P^T / dS^T, npusim's own, stay per block); the basic templates keep their per-block slots. Bit-exactness of these calls: test_fag_golden and
test_fag_pingpong."""
import pytest

from ops import flash_attention_unpadding_score_grad_v5 as fag
from ops.flash_attention_unpadding_score_grad_v5 import kernel as K
from ops.flash_attention_unpadding_score_grad_v5.tiling import BASE
from ops.flash_attention_unpadding_score_grad_v5.vectiles import ND_TEMPLATES, cv_pitch
from tests.ops.fag_cases import check_golden_and_accuracy, make_case

CASES = {  # (make_case keywords, deterministic, template)
    "sameab": (dict(seq_q=[1100], seq_kv=[1400], n1=2, d=64, sparse_mode=6, prefix=[700]), False, "sameab"),
    "generic": (dict(seq_q=[300, 200], seq_kv=[400, 250], n1=2, d=64), False, "generic"),
    "bn2": (dict(seq_q=[300, 500], seq_kv=[400, 600], n1=4, n2=2, d=64, layout=""), True, "basic_bn2"),
    "fp32": (dict(seq_q=[600], seq_kv=[400], n1=4, n2=2, d=64, dtype="fp32"), False, "generic"),
    "fp32_bn2": (dict(seq_q=[300, 200], seq_kv=[400, 250], n1=2, d=64, dtype="fp32", layout=""), True, "basic_bn2"),
}


@pytest.fixture
def copied_views(monkeypatch):
    """Every view _pieces_in copies S or dP of (full mode: nothing is replayed)."""
    seen = []
    orig = K.KernelFagBasic._pieces_in

    def spy(self, dst, region, task, v):
        seen.append(v)
        return orig(self, dst, region, task, v)

    monkeypatch.setattr(K.KernelFagBasic, "_pieces_in", spy)
    return seen


@pytest.mark.parametrize("name", CASES)
def test_each_tile_is_one_copy_of_its_cv_matrix(name, copied_views):
    kw, det, template = CASES[name]
    a, p = make_case(**kw)
    res = fag(**a, deterministic=det)
    assert res.tiling.template == template
    check_golden_and_accuracy(a, p, res)
    views = copied_views
    assert views
    assert all(len(v.pieces) == 1 and v.gm_pitch != BASE for v in views)
    if p.dtype.itemsize == 4:  # fp32: the transposes' per-block pieces cover the tile, and some span two blocks
        assert all(sum(nr * nc for _, _, nr, _, nc, _ in v.tpieces) == v.rows * v.cols for v in views)
        assert any(len(v.tpieces) > 1 for v in views)
    else:
        assert all(not v.tpieces for v in views)
    assert all(v.gm_pitch % ND_TEMPLATES[template] == 0 and v.gm_pitch >= v.cols for v in views)
    spanning = [v for v in views if v.pieces[0][3] // BASE != (v.pieces[0][3] + v.cols - 1) // BASE]
    assert spanning  # tiles across two 128-column blocks: one copy where per-block slots took two


def test_cv_pitch_aligns_the_rectangle_width():
    """300 columns: 304 (16) on SameAB / generic, 304 (8) on S1s2Bn2 too; 130: 144 / 136; basic: 0."""
    from types import SimpleNamespace

    def tiling(template, cols):
        full, tail = divmod(cols, BASE)
        widths = [BASE] * full + ([tail] if tail else [])
        n = len(widths)
        return SimpleNamespace(template=template, secStart=[0, n], blkS1o=[0] * n, blkS2o=list(range(n)),
                               blkRows=[BASE] * n, blkCols=widths)

    assert cv_pitch(tiling("sameab", 300), 0) == 304
    assert cv_pitch(tiling("basic_bn2", 300), 0) == 304
    assert cv_pitch(tiling("generic", 130), 0) == 144
    assert cv_pitch(tiling("basic_bn2", 130), 0) == 136
    assert cv_pitch(tiling("basic", 300), 0) == 0
