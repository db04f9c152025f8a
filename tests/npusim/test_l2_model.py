"""The L2 residency model of GM buffers (npusim/memory/gm.py) and launch's l2_warm start state."""
import numpy as np
import pytest

from npusim.chip import chip as get_chip
from npusim.kernel import DataCopy, TBuf, TPipe, TPosition
from npusim.launch import GmArg, launch
from npusim.memory.gm import L2_PAGE_BYTES, GmBuffer, L2Model, TensorSpec


def test_touch_reports_the_resident_fraction_and_marks_pages():
    l2 = L2Model(1 << 30)
    gm = GmBuffer("x", TensorSpec((4 * L2_PAGE_BYTES,), np.uint8), l2)
    assert gm.touch(0, 2 * L2_PAGE_BYTES) == 0.0  # first read: all misses
    assert l2.touched_bytes == 2 * L2_PAGE_BYTES
    assert gm.touch(L2_PAGE_BYTES, 2 * L2_PAGE_BYTES) == 0.5  # one page of two was resident
    assert gm.resident.tolist() == [True, True, True, False]


def test_hit_scale_past_l2_capacity():
    l2 = L2Model(4 * L2_PAGE_BYTES)
    gm = GmBuffer("x", TensorSpec((8 * L2_PAGE_BYTES,), np.uint8), l2)
    gm.touch(0, 8 * L2_PAGE_BYTES)
    assert gm.touch(0, L2_PAGE_BYTES) == pytest.approx(0.5)  # 4 of 8 touched pages fit


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.25, 0.5, 2 / 3, 0.9, 1.0])
def test_warm_makes_an_even_fraction_resident(fraction):
    """floor(n * f) pages start resident, evenly spread (gaps between them differ by at most one)."""
    n = 60
    gm = GmBuffer("x", TensorSpec((n * L2_PAGE_BYTES,), np.uint8), L2Model(1 << 30))
    gm.warm(fraction)
    assert int(gm.resident.sum()) == int(np.floor(n * fraction + 1e-9))
    if 0 < fraction < 1:
        gaps = np.diff(np.flatnonzero(gm.resident))
        assert gaps.max() - gaps.min() <= 1  # evenly spread


def _read_four_times(src):
    """Read the 4 x 64 KiB of *src* into UB four times over."""
    buf = TBuf(TPosition.VECCALC)
    TPipe().InitBuffer(buf, 64 * 1024)
    ub = buf.Get(np.float16)
    for k in range(16):
        DataCopy(ub, src[(k % 4) * 32 * 1024:], 32 * 1024)


def test_l2_warm_fractions_order_the_read_time():
    """Reads of a buffer that starts resident run at L2 bandwidth, of one that does not partly at HBM
    bandwidth (first reads): a half-resident start lies between (HBM cut to 1/50 to make misses slow)."""
    spec = get_chip("Ascend910B2")
    spec = spec.replace(hbm_bw_bytes_per_s=spec.hbm_bw_bytes_per_s / 50)
    cycles = {}
    for warm in (None, {"src": 0.5}, {"src": 1.0}, {"src"}):
        arg = GmArg("src", TensorSpec((4 * 32 * 1024,), np.float16))
        res = launch(_read_four_times, (arg,), block_dim=1, chip=spec, kernel_type="vector", mode="timing",
                     l2_warm=None if warm is None else (0, warm))
        cycles[str(warm)] = res.cycles
    assert cycles["None"] > cycles["{'src': 0.5}"] > cycles["{'src': 1.0}"]
    assert cycles["{'src': 1.0}"] == cycles["{'src'}"]  # a set of names: all resident


@pytest.mark.parametrize("fraction", [0.0, 0.3, 1.0])
def test_chunked_residency_equals_the_dense_bitmap(monkeypatch, fraction):
    """Buffers past DENSE_PAGES keep residency in chunks made on first use: the same hits, touched bytes
    and final bitmap as the dense model, on random touches across chunk borders."""
    from npusim.memory import gm as gm_mod

    rng = np.random.default_rng(7)
    n = 50
    dense = GmBuffer("x", TensorSpec((n * L2_PAGE_BYTES,), np.uint8), L2Model(1 << 30))
    monkeypatch.setattr(gm_mod, "DENSE_PAGES", 10)
    monkeypatch.setattr(gm_mod, "CHUNK_PAGES", 8)
    chunked = GmBuffer("x", TensorSpec((n * L2_PAGE_BYTES,), np.uint8), L2Model(1 << 30))
    assert chunked._chunks is not None and dense._chunks is None
    dense.warm(fraction)
    chunked.warm(fraction)
    for _ in range(40):
        start = int(rng.integers(0, (n - 1) * L2_PAGE_BYTES))
        size = int(rng.integers(1, 20 * L2_PAGE_BYTES))
        size = min(size, n * L2_PAGE_BYTES - start)
        assert chunked.touch(start, size) == dense.touch(start, size)
    assert chunked._l2.touched_bytes == dense._l2.touched_bytes
    assert np.array_equal(chunked.resident, dense.resident)  # turns dense on demand


def test_huge_buffer_costs_no_bitmap():
    """A 4 TiB TensorSpec buffer (a huge byte-mode drop mask) allocates nothing until touched."""
    gm = GmBuffer("ws", TensorSpec((1 << 42,), np.uint8), L2Model(1 << 30))
    gm.warm(1.0)
    assert gm.touch(1 << 41, 64 * 1024) == 1.0 and len(gm._chunks) == 1


def test_a_finished_launch_drops_its_record_tables():
    """A finished launch drops its streams' record tables at once: a large run's tables must not wait
    for a full collection of the stream <-> launch cycles, which then walks every record."""
    import gc

    from npusim.core import CoreUnit

    arg = GmArg("src", TensorSpec((4 * 32 * 1024,), np.float16))
    gc.collect()
    gc.disable()
    try:
        res = launch(_read_four_times, (arg,), block_dim=2, chip="Ascend910B2", kernel_type="vector", mode="timing")
        alive = [o for o in gc.get_objects() if isinstance(o, CoreUnit)]
    finally:
        gc.enable()
    assert len(res.trace.columns["core"]) > 0
    assert all(u.records is None and u.flows is None for u in alive)


def test_count_pages_counts_each_new_page_of_a_range_factor_times():
    """count_pages: a page of a counted range adds factor pages to the touched bytes the first time only, pages
    outside the ranges one, and hits and residency stay what they are without it (a page straddling a range's
    end counts in it: the range is whole pages)."""
    page = L2_PAGE_BYTES
    plain, counted = L2Model(1 << 30), L2Model(1 << 30)
    a = GmBuffer("x", TensorSpec((10 * page,), np.uint8), plain)
    b = GmBuffer("x", TensorSpec((10 * page,), np.uint8), counted)
    b.count_pages([(2 * page, 4 * page + 1, 3.0), (8 * page, 9 * page, 0.5)])
    for start, size in [(0, page), (page, 3 * page), (2 * page, page), (4 * page, 100), (7 * page, 3 * page),
                        (0, 10 * page)]:
        assert a.touch(start, size) == b.touch(start, size)
    assert a.resident.tolist() == b.resident.tolist() == [True] * 10
    assert plain.touched_bytes == 10 * page
    assert counted.touched_bytes == (6 + 3 * 3 + 0.5) * page  # pages 2, 3, 4 thrice, page 8 half, 6 others once


def test_count_pages_in_a_chunked_buffer_equals_the_dense_count(monkeypatch):
    """The chunked residency of huge buffers counts the ranges' new pages as the dense bitmap does."""
    from npusim.memory import gm as gm_mod

    rng = np.random.default_rng(3)
    n, page = 50, L2_PAGE_BYTES
    ranges = [(5 * page + 7, 21 * page, 2.5), (30 * page, 41 * page - 3, 4.0)]
    dense = GmBuffer("x", TensorSpec((n * page,), np.uint8), L2Model(1 << 30))
    monkeypatch.setattr(gm_mod, "DENSE_PAGES", 10)
    monkeypatch.setattr(gm_mod, "CHUNK_PAGES", 8)
    chunked = GmBuffer("x", TensorSpec((n * page,), np.uint8), L2Model(1 << 30))
    dense.count_pages(ranges)
    chunked.count_pages(ranges)
    for _ in range(40):
        start = int(rng.integers(0, (n - 1) * page))
        size = int(rng.integers(1, 12 * page))
        dense.touch(start, size)
        chunked.touch(start, size)
        assert dense._l2.touched_bytes == chunked._l2.touched_bytes


def test_l2_warm_counted_ranges_reach_the_launchs_buffer():
    """launch's l2_warm third item counts the named buffer's ranges (four 32 KiB pages read, two counted twice)."""
    spec = get_chip("Ascend910B2")
    seen = {}

    def kernel(src):
        _read_four_times(src)
        seen["touched"] = src.gm._l2.touched_bytes

    for counted in ({}, {"src": [(0, 2 * L2_PAGE_BYTES, 2.0)]}):
        arg = GmArg("src", TensorSpec((4 * 32 * 1024,), np.float16))
        launch(kernel, (arg,), block_dim=1, chip=spec, kernel_type="vector", mode="timing",
               l2_warm=(0, {}, counted))
        seen[bool(counted)] = seen["touched"]
    assert seen[False] == 8 * L2_PAGE_BYTES and seen[True] == 10 * L2_PAGE_BYTES
