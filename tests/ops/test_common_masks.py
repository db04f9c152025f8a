"""ops.common.masks against brute-force loops written here (sparse_mode参数说明.md, tiling.md §0/§1)."""
import numpy as np
import pytest

from npusim.errors import AclnnError
from ops.common import masks as M

RNG_SEEDS = range(40)


def _cases(seed, with_mask=False):
    """Small random (s1, s2, pre, next[, mask]) including negative and huge tokens."""
    rng = np.random.default_rng(seed)
    s1, s2 = int(rng.integers(0, 24)), int(rng.integers(0, 24))
    pick = rng.integers(0, 4, size=2)
    tokens = []
    for p in pick:
        if p == 0:
            tokens.append(int(rng.integers(-30, 31)))
        elif p == 1:
            tokens.append(int(rng.integers(0, 6)))
        elif p == 2:
            tokens.append(M.FA_INT_MAX)
        else:
            tokens.append(-int(rng.integers(0, 4)))
    mask = rng.random((s1 + int(rng.integers(0, 3)), s2 + int(rng.integers(0, 3)))) < 0.3
    return s1, s2, tokens[0], tokens[1], mask


def _brute_keep(mode, pre, nxt, s1, s2, mask=None, prefix=None, band_batch=False):
    """Element loops, written from sparse_mode参数说明.md / oracles.md §0 (independent of masks.py)."""
    out = np.zeros((s1, s2), dtype=bool)
    if mode == 7:
        mode = 4 if band_batch else 3
    if mode == 8:
        mode = 4 if band_batch else 2
    for i in range(s1):
        for j in range(s2):
            if mode == 0:
                k = True if mask is None else (i - j <= pre and j - i <= nxt and not mask[i][j])
            elif mode == 1:
                k = True if mask is None else not mask[i][j]
            elif mode == 2:
                k = j <= i
            elif mode == 3:
                k = j - (s2 - s1) <= i
            elif mode == 4:
                k = i + (s2 - s1) - pre <= j <= i + (s2 - s1) + nxt
            else:
                k = j <= i + s2 - s1 or j < prefix
            out[i, j] = k
    return out


@pytest.mark.parametrize("mode", range(9))
@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_keep_mask_matches_bruteforce(mode, seed):
    """keep_mask equals the per-element definition of every mode."""
    s1, s2, pre, nxt, mask = _cases(seed)
    use_mask = mask if seed % 2 else None
    prefix = seed % 7 if mode in (5, 6) else None
    band = bool(seed % 3 == 0)
    got = M.keep_mask(mode, pre, nxt, s1, s2, use_mask, prefix, band_batch=band)
    want = _brute_keep(mode, pre, nxt, s1, s2, use_mask, prefix, band)
    assert got.dtype == np.bool_ and got.shape == (s1, s2)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("inference,mode", [(True, m) for m in range(5)] + [(False, m) for m in (0, 1, 2, 3, 4, 7, 8)])
@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_canonical_band_equals_mode_semantics(inference, mode, seed):
    """The LU band of canonical_tokens (plus the user mask of modes 0/1) computes exactly the mode's set."""
    s1, s2, pre, nxt, mask = _cases(seed)
    has_mask = bool(seed % 2)
    use_mask = mask if has_mask else None
    band = bool(seed % 3 == 0)
    pre_lu, next_lu = M.canonical_tokens(mode, pre, nxt, s1, s2, has_mask, inference, band_batch=band)
    got = M.band_keep(pre_lu, next_lu, s1, s2)
    if use_mask is not None and mode in (0, 1):
        got &= ~mask[:s1, :s2]
    want = _brute_keep(mode, pre, nxt, s1, s2, use_mask, None, band)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode,pre,nxt,s1,s2,has_mask,want", [
    (0, 5, 3, 10, 12, False, (M.PFA_INT_MAX, M.PFA_INT_MAX)),
    (0, 5, -3, 10, 12, True, (5, -3)),
    (0, 2147483647, 2147483647, 10, 12, True, (M.PFA_INT_MAX, M.PFA_INT_MAX)),
    (1, 5, 3, 10, 12, True, (M.PFA_INT_MAX, M.PFA_INT_MAX)),
    (2, 5, 3, 10, 12, True, (M.PFA_INT_MAX, 0)),
    (3, 5, 3, 10, 12, True, (M.PFA_INT_MAX, 2)),
    (3, 5, 3, 12, 10, True, (M.PFA_INT_MAX, -2)),
    (4, 5, 3, 10, 12, True, (3, 5)),
    (4, -2, 7, 16, 9, True, (5, 0)),
])
def test_canonical_tokens_pfa_values(mode, pre, nxt, s1, s2, has_mask, want):
    """PFA tiling values: preTokensPerbatch / nextTokensPerbatch of prompt_flash_attention_tiling.cpp."""
    assert M.canonical_tokens(mode, pre, nxt, s1, s2, has_mask, inference=True) == want


@pytest.mark.parametrize("mode,pre,nxt,s1,s2,band,want", [
    (1, 3, 3, 10, 12, False, (M.FA_INT_MAX, M.FA_INT_MAX)),
    (1, 9, 11, 10, 12, False, (9, 11)),
    (2, 5, 3, 10, 12, False, (10, 0)),
    (3, 5, 3, 10, 12, False, (10, 2)),
    (4, 5, 3, 10, 12, False, (3, 5)),
    (7, 5, 3, 10, 12, False, (10, 2)),
    (7, 12, -2, 10, 12, True, (10, 0)),
    (8, 5, 3, 10, 12, False, (10, 0)),
])
def test_canonical_tokens_fa_values(mode, pre, nxt, s1, s2, band, want):
    """FA tiling values (tiling.md §0 conversions; INT32_MAX as "all")."""
    assert M.canonical_tokens(mode, pre, nxt, s1, s2, True, inference=False, band_batch=band) == want


@pytest.mark.parametrize("mode", [5, 6, 7, 8, -1, 9])
def test_canonical_tokens_rejects_modes_pfa_lacks(mode):
    """PFA supports modes 0-4 only: 561002 "sparse_mode = %d is out of range"."""
    with pytest.raises(AclnnError) as e:
        M.canonical_tokens(mode, 0, 0, 4, 4, True, inference=True)
    assert e.value.status == 561002 and "sparse_mode" in e.value.message


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_invalid_rows_bruteforce(seed):
    """invalid_rows flags exactly the rows whose loop finds no computed column."""
    s1, s2, pre, nxt, mask = _cases(seed)
    keep = M.keep_mask(4, pre, nxt, s1, s2)
    want = np.array([not any(keep[i, j] for j in range(s2)) for i in range(s1)], dtype=bool)
    np.testing.assert_array_equal(M.invalid_rows(keep), want.reshape(s1))


@pytest.mark.parametrize("seed", range(120))
def test_block_range_covers_and_is_tight(seed):
    """[start, end) per block covers every computed (i, j) and equals the loop's min/max+1."""
    rng = np.random.default_rng(1000 + seed)
    s1, s2 = int(rng.integers(1, 40)), int(rng.integers(0, 40))
    s_outer = int(rng.choice([1, 3, 4, 8, 16]))
    pre = int(rng.integers(-s2, 45)) if s2 else int(rng.integers(0, 45))
    nxt = int(rng.integers(-pre, 45))  # the tiling rejects -next > pre
    if seed % 10 == 0:
        pre, nxt = M.PFA_INT_MAX, M.PFA_INT_MAX
    start, end = M.block_range(pre, nxt, s1, s2, s_outer)
    assert len(start) == len(end) == -(-s1 // s_outer)
    for so in range(len(start)):
        cols = [j for i in range(so * s_outer, so * s_outer + s_outer)
                for j in range(s2) if -pre <= j - i <= nxt]
        if cols:
            assert (start[so], end[so]) == (min(cols), max(cols) + 1)
        else:
            assert end[so] <= start[so]


def test_compressed_causal_mask():
    """Strictly upper triangle = 1 (masked); 2048 x 2048 by default."""
    np.testing.assert_array_equal(M.compressed_causal_mask(4), np.array(
        [[0, 1, 1, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]], dtype=np.uint8))
    big = M.compressed_causal_mask()
    assert big.shape == (2048, 2048) and big.dtype == np.uint8
    assert big.sum() == 2048 * 2047 // 2 and big[0, 2047] == 1 and big[2047, 0] == 0


@pytest.mark.parametrize("delta,s1b,s2b,want", [
    (0, 128, 1024, 0), (-5, 128, 1024, 5), (-500, 128, 1024, 128),
    (7, 128, 1024, 7 * 2048), (5000, 128, 1024, 1024 * 2048),
])
def test_causal_tile_offset_literals(delta, s1b, s2b, want):
    """ComputeOffsetForCausal: column offset for delta <= 0, clamped row offset * 2048 otherwise."""
    assert M.causal_tile_offset(delta, s1b, s2b) == want


@pytest.mark.parametrize("seed", range(60))
def test_compressed_tile_matches_bruteforce(seed):
    """The window read at the offset masks exactly c - r > delta."""
    rng = np.random.default_rng(2000 + seed)
    size = 64
    comp = M.compressed_causal_mask(size)
    s1b, s2b = int(rng.integers(1, 32)), int(rng.integers(1, 32))
    delta = int(rng.integers(-80, 80))
    tile = M.compressed_tile(comp, delta, s1b, s2b)
    for r in range(s1b):
        for c in range(s2b):
            assert tile[r, c] == (c - r > delta)


@pytest.mark.parametrize("mode", [2, 3, 4])
@pytest.mark.parametrize("seed", range(30))
def test_tile_masked_reproduces_keep(mode, seed):
    """Tiling the whole score matrix with tile_masked gives ~keep_mask (PFA canonical tokens)."""
    rng = np.random.default_rng(3000 + seed)
    s1, s2 = int(rng.integers(1, 50)), int(rng.integers(1, 50))
    pre = int(rng.integers(-s1 + 1, 40))
    nxt = int(rng.integers(max(-s2 + 1, -pre), 40))
    pre_lu, next_lu = M.canonical_tokens(mode, pre, nxt, s1, s2, True, inference=True)
    comp = M.compressed_causal_mask(64)
    s1b, s2b = int(rng.integers(1, 17)), int(rng.integers(1, 33))
    got = np.zeros((s1, s2), dtype=bool)
    for r0 in range(0, s1, s1b):
        for c0 in range(0, s2, s2b):
            t = M.tile_masked(mode, pre_lu, next_lu, r0, c0, s1b, s2b, comp)
            got[r0:r0 + s1b, c0:c0 + s2b] = t[:min(s1b, s1 - r0), :min(s2b, s2 - c0)]
    np.testing.assert_array_equal(got, ~_brute_keep(mode, pre, nxt, s1, s2))


def test_varlen_band_batch():
    """Mode 7 bands the last batch with S1 > 0, mode 8 the first; other modes have none."""
    assert M.varlen_band_batch(7, [3, 0, 4, 0]) == 2
    assert M.varlen_band_batch(8, [0, 0, 4, 5]) == 2
    assert M.varlen_band_batch(8, [0, 0]) is None
    assert M.varlen_band_batch(3, [1, 2]) is None


def test_keep_mask_errors():
    """Unknown modes, a prefix mode without prefix and a too small mask are ValueErrors."""
    with pytest.raises(ValueError):
        M.keep_mask(9, 0, 0, 2, 2)
    with pytest.raises(ValueError):
        M.keep_mask(5, 0, 0, 2, 2)
    with pytest.raises(ValueError):
        M.keep_mask(0, 0, 0, 3, 3, np.zeros((2, 3), bool))
    with pytest.raises(ValueError):
        M.block_range(0, 0, 3, 3, 0)
    with pytest.raises(ValueError):
        M.compressed_tile(M.compressed_causal_mask(8), 0, 5, 5)


# --- ops.common.layouts (kept here: the task's file list has no test_common_layouts.py) -----------
from ops.common import layouts as L  # noqa: E402


@pytest.mark.parametrize("layout,shape,heads,want", [
    ("BSH", (2, 5, 24), 3, (2, 3, 5, 8)),
    ("BSND", (2, 5, 3, 8), 99, (2, 3, 5, 8)),
    ("BNSD", (2, 3, 5, 8), 99, (2, 3, 5, 8)),
    ("BNSD_BSND", (2, 3, 5, 8), 99, (2, 3, 5, 8)),
])
def test_layout_parse_shape(layout, shape, heads, want):
    """(B, N, S, D) per layout; BSH splits H = N*D with num_heads."""
    assert L.parse_shape(layout, shape, heads) == want
    b, n, s, d = want
    assert L.layout_shape(layout, b, n, s, d) == shape


@pytest.mark.parametrize("layout,shape,heads", [
    ("BSH", (2, 5, 25), 3), ("BSH", (2, 5, 24), 0), ("BSH", (2, 5, 3, 8), 3),
    ("BSND", (2, 5, 24), 3), ("BNSD", (5, 24), 3), ("SH", (5, 24), 3), (None, (2, 5, 24), 3),
    ("TND", (5, 3, 8), 3),
])
def test_layout_parse_shape_rejects(layout, shape, heads):
    """Wrong rank, H not a multiple of N, unknown layout: 161002."""
    with pytest.raises(AclnnError) as e:
        L.parse_shape(layout, shape, heads)
    assert e.value.status == 161002


@pytest.mark.parametrize("layout", ["BSH", "BSND", "BNSD", "BNSD_BSND"])
def test_layout_round_trip_bits(layout):
    """to_bnsd is a view whose [b, n, s, d] element is the loop-indexed input element; from_bnsd
    writes the output layout (BNSD_BSND -> BSND)."""
    b, n, s, d = 2, 3, 4, 5
    x = np.arange(b * n * s * d, dtype=np.float16).reshape(L.layout_shape(layout, b, n, s, d))
    v = L.to_bnsd(x, layout, n)
    assert v.shape == (b, n, s, d) and np.shares_memory(v, x)
    for bi in range(b):
        for ni in range(n):
            for si in range(s):
                for di in range(d):
                    if layout == "BSH":
                        want = x[bi, si, ni * d + di]
                    elif layout == "BSND":
                        want = x[bi, si, ni, di]
                    else:
                        want = x[bi, ni, si, di]
                    assert v[bi, ni, si, di].view(np.uint16) == want.view(np.uint16)
    out = L.from_bnsd(v, layout)
    assert L.output_layout(layout) == ("BSND" if layout == "BNSD_BSND" else layout)
    if layout == "BNSD_BSND":
        assert out.shape == (b, s, n, d)
        np.testing.assert_array_equal(out.view(np.uint16), x.transpose(0, 2, 1, 3).view(np.uint16))
    else:
        np.testing.assert_array_equal(out.view(np.uint16), x.view(np.uint16))


def test_layout_tnd_batches():
    """TND: per batch [N, S_b, D] views from cumulative lengths; decreasing lengths are 161002."""
    x = np.arange(7 * 2 * 3, dtype=np.float32).reshape(7, 2, 3)
    parts = L.tnd_batches(x, [3, 3, 7])
    assert [p.shape for p in parts] == [(2, 3, 3), (2, 0, 3), (2, 4, 3)]
    assert parts[2][1, 0, 2] == x[3, 1, 2]
    with pytest.raises(AclnnError):
        L.tnd_batches(x, [3, 2])
    with pytest.raises(AclnnError):
        L.from_bnsd(np.zeros((1, 1, 1, 1)), "TND")
