"""ScatterPaKvCache on the simulator: bits against golden.py for every scenario, mode and dtype the
presets reach; in-place, all-or-nothing updates; tiling; full vs timing cycles; the aclnn facade.

Dtypes: the A2/A3 presets (Ascend910B*, Ascend910_9391) take FLOAT16, BFLOAT16 and INT8 (Rope/Omni:
FLOAT16, BFLOAT16). FLOAT, (U)INT16, (U)INT32, UINT8/HIFLOAT8 and FLOAT8_* are 950-class only, and no
preset is of that class: they (and scenario 3) are reached here only through a ChipSpec built with
``soc_family="Ascend910_95"``.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npusim.chip import chip as get_chip
from npusim.errors import (ACLNN_ERR_INNER_TILING_ERROR, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR,
                           AICORE_TIMEOUT, AclnnError)
from npusim.memory.gm import TensorSpec
from ops.scatter_pa_kv_cache.api import (aclnnScatterPaKvCache, aclnnScatterPaKvCacheGetWorkspaceSize,
                                         scatter_pa_kv_cache)
from ops.scatter_pa_kv_cache.golden import scatter_pa_kv_cache_golden
from ops.scatter_pa_kv_cache.tiling import scatter_pa_kv_cache_tiling
from ops.scatter_pa_kv_cache.validate import validate

BF16 = ml_dtypes.bfloat16
CHIP = "Ascend910B2"
DATA = ("key", "key_cache", "value", "value_cache")
CONTROL = ("compress_lens", "compress_seq_offset", "seq_lens")
DTYPE_IDS = {np.dtype(np.float16): "fp16", np.dtype(BF16): "bf16", np.dtype(np.int8): "int8",
             np.dtype(np.float32): "fp32"}


def bits(a: np.ndarray) -> np.ndarray:
    """Raw bits, for bit-exact comparison."""
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def rnd(shape, dtype, rng) -> np.ndarray:
    """Random values; floats as raw random bits with NaN/Inf patterns replaced (copies keep any bits)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(-128, 128, shape).astype(dtype)
    return (rng.standard_normal(shape) * 3).astype(np.float32).astype(dtype)


def golden(call: dict, soc_family: str = "Ascend910B"):
    """(new key cache, new value cache) from the independent loop golden."""
    plan = validate(**{k: v for k, v in call.items() if k not in ("chip", "tiling", "mode")},
                    soc_family=soc_family)
    args = [call.get(n) for n in ("key", "key_cache", "slot_mapping", "value", "value_cache")]
    return scatter_pa_kv_cache_golden(plan, *args, **{n: call.get(n) for n in CONTROL})


def run(call: dict, **kw):
    """Run the operator on copies of the caches; returns (result, key cache, value cache)."""
    c = dict(call)
    c["key_cache"] = call["key_cache"].copy()
    if call.get("value_cache") is not None:
        c["value_cache"] = call["value_cache"].copy()
    res = scatter_pa_kv_cache(**c, **kw)
    return res, c["key_cache"], c.get("value_cache")


def as_specs(call: dict) -> dict:
    """The same call with key/value/caches replaced by TensorSpecs (timing mode)."""
    out = dict(call)
    for name in DATA:
        x = call.get(name)
        if x is not None and x.size:
            out[name] = TensorSpec(x.shape, x.dtype)
    return out


# --- case builders: one per scenario / mode ----------------------------------------------------
def norm_case(dtype, slot_dtype, rng, t=13, n=3, dk=32, dv=16, nb=6, bs=8):
    """Scenario 2 (Norm/None), Dk != Dv, negative slots."""
    slots = rng.permutation(nb * bs)[:t].astype(slot_dtype)
    slots[1::6] = -1
    return dict(key=rnd((t, n, dk), dtype, rng), key_cache=rnd((nb, bs, n, dk), dtype, rng), slot_mapping=slots,
                value=rnd((t, n, dv), dtype, rng), value_cache=rnd((nb, bs, n, dv), dtype, rng))


def nct_case(dtype, slot_dtype, rng, t=9, n=2, d=16, nb=4, bs=8, key_only=False):
    """Scenario 2/6 Nct: K and V are column slices of one packed [T, row] storage (as qkv is)."""
    row = 3 * n * d + 16
    packed = rnd((t, row), dtype, rng)
    key = packed[:, 16:16 + n * d].reshape(t, n, d)
    slots = rng.permutation(nb * bs)[:t].astype(slot_dtype)
    slots[2] = -3
    call = dict(key=key, key_cache=rnd((nb, bs, n, d), dtype, rng), slot_mapping=slots, scatter_mode="Nct",
                strides=[row, row], offsets=[16, 16 + n * d])
    if key_only:
        call.update(value=np.empty(0, dtype), value_cache=np.empty(0, dtype))
    else:
        call.update(value=packed[:, 16 + n * d:16 + 2 * n * d].reshape(t, n, d),
                    value_cache=rnd((nb, bs, n, d), dtype, rng))
    return call


def siso_case(dtype, slot_dtype, rng, t=11, n=2, d=48, nb=5, bs=4):
    """Scenario 6: key only (value and value_cache empty)."""
    slots = rng.permutation(nb * bs)[:t].astype(slot_dtype)
    slots[0] = -1
    return dict(key=rnd((t, n, d), dtype, rng), key_cache=rnd((nb, bs, n, d), dtype, rng), slot_mapping=slots,
                value=np.empty(0, dtype), value_cache=np.empty(0, dtype))


def nz_case(dtype, slot_dtype, rng, t=14, n=2, dk=32, dv=64, nb=3, bs=16):
    """Scenario 1 (PA_NZ): caches [num_blocks, N*D/last, block_size, last], last = 32 B / element."""
    last = 32 // np.dtype(dtype).itemsize
    slots = rng.permutation(nb * bs)[:t].astype(slot_dtype)
    slots[5] = -1
    return dict(key=rnd((t, n, dk), dtype, rng), key_cache=rnd((nb, n * dk // last, bs, last), dtype, rng),
                slot_mapping=slots, value=rnd((t, n, dv), dtype, rng),
                value_cache=rnd((nb, n * dv // last, bs, last), dtype, rng), cache_mode="PA_NZ")


def compress_case(mode, dtype, slot_dtype, rng, d=16, n=2):
    """Scenarios 4 (Alibi) and 5 (Rope/Omni): 3 batches (one empty), tasks (b, h) in row-major order."""
    seq = np.array([6, 0, 9], slot_dtype)
    t = int(seq.sum())
    wins = np.array([2, 6, 0, 0, 9, 3], slot_dtype)
    offs = np.array([1, 0, -1, 0, 0, 5], slot_dtype)
    if mode == "Alibi":
        slots = np.array([0, 4, 12, -1, 20, 40], slot_dtype)
    else:
        wins[1] = 5  # rope/omni need offset + window <= seq_len
        slots = np.array([0, 8, 16, -1, 24, 36], slot_dtype)
    call = dict(key=rnd((t, n, d), dtype, rng), key_cache=rnd((6, 8, 1, d), dtype, rng), slot_mapping=slots,
                value=rnd((t, n, d), dtype, rng), value_cache=rnd((6, 8, 1, d), dtype, rng),
                compress_lens=wins, seq_lens=seq, scatter_mode=mode)
    if mode != "Alibi":
        call["compress_seq_offset"] = offs
    return call


SLOTS = (np.int32, np.int64)
FLOATS_INT8 = (np.float16, BF16, np.int8)
TOKEN_UB = {"ubSize": 256, "blockDim": 3}  # 64-byte chunks per buffer: several chunks and tails per row
#: (name, builder, dtypes, a small-UB tiling that splits rows/windows into several copies)
CASES = [("norm", norm_case, FLOATS_INT8, TOKEN_UB), ("nct", nct_case, FLOATS_INT8, TOKEN_UB),
         ("siso", siso_case, FLOATS_INT8, TOKEN_UB),
         ("siso_nct", lambda *a: nct_case(*a, key_only=True), FLOATS_INT8, TOKEN_UB),
         ("nz", nz_case, FLOATS_INT8, TOKEN_UB),
         ("alibi", lambda *a: compress_case("Alibi", *a), FLOATS_INT8, {"ubSize": 256, "blockDim": 5}),
         ("rope", lambda *a: compress_case("Rope", *a), (np.float16, BF16), {"ubSize": 1024, "blockDim": 5}),
         ("omni", lambda *a: compress_case("Omni", *a), (np.float16, BF16), {"ubSize": 256, "blockDim": 5})]
PARAMS = [pytest.param(build, dt, sd, small, id=f"{CHIP}-{name}-{DTYPE_IDS[np.dtype(dt)]}-{np.dtype(sd).name}")
          for name, build, dts, small in CASES for dt in dts for sd in SLOTS]


# --- bit-exact against golden ----------------------------------------------------------------------
@pytest.mark.parametrize("small_ub", [False, True], ids=["default", "small-ub"])
@pytest.mark.parametrize("build, dtype, slot_dtype, small", PARAMS)
def test_spkc_bitexact_vs_golden(build, dtype, slot_dtype, small, small_ub):
    """Every scenario/mode, dtype and slot dtype: both caches equal golden.py bit for bit (default tiling,
    and a small UB that forces chunked rows, DataCopyPad tails and several cores' remainders)."""
    call = build(dtype, slot_dtype, np.random.default_rng(7))
    want_k, want_v = golden(call)
    res, got_k, got_v = run(call, chip=CHIP, tiling=small if small_ub else None)
    assert np.array_equal(bits(got_k), bits(want_k))
    if want_v is not None and want_v.size:
        assert np.array_equal(bits(got_v), bits(want_v))
    assert res.outputs["key_cache"] is got_k and res.outputs["value_cache"] is got_v


@pytest.mark.parametrize("chip_name", ["Ascend910B1", "Ascend910B3", "Ascend910B4", "Ascend910_9391"])
@pytest.mark.parametrize("name", ["norm", "nz", "alibi", "rope"])
def test_spkc_bitexact_on_other_presets(chip_name, name):
    """The other A2 presets and the A3 preset: bf16 bits equal golden, cores <= the chip's AIVs."""
    build = {c[0]: c[1] for c in CASES}[name]
    call = build(BF16, np.int64, np.random.default_rng(12))
    want_k, want_v = golden(call)
    res, got_k, got_v = run(call, chip=chip_name)
    assert np.array_equal(bits(got_k), bits(want_k)) and np.array_equal(bits(got_v), bits(want_v))
    assert 1 <= res.block_dim <= get_chip(chip_name).aiv_count


@pytest.mark.parametrize("build, dtype, slot_dtype, small", PARAMS[::2])
def test_spkc_full_and_timing_cycles_identical(build, dtype, slot_dtype, small):
    """Timing mode (TensorSpec data, real control tensors) issues the same instructions: same cycles."""
    call = build(dtype, slot_dtype, np.random.default_rng(3))
    for tiling in (None, small):
        full, _, _ = run(call, chip=CHIP, tiling=tiling)
        timing = scatter_pa_kv_cache(**as_specs(call), chip=CHIP, mode="timing", tiling=tiling)
        assert timing.outputs is None
        assert timing.cycles == full.cycles and len(timing.trace) == len(full.trace)


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_spkc_unaligned_rows(dtype):
    """Rows that are not 32-byte multiples (D = 7) go through DataCopyPad in Norm, Alibi, Rope, Omni."""
    rng = np.random.default_rng(11)
    calls = [norm_case(dtype, np.int32, rng, dk=7, dv=5)]
    calls += [compress_case(m, dtype, np.int64, rng, d=7) for m in ("Alibi", "Rope", "Omni")]
    for call in calls:
        want_k, want_v = golden(call)
        for tiling in (None, {"ubSize": 1024}):
            _, got_k, got_v = run(call, chip=CHIP, tiling=tiling)
            assert np.array_equal(bits(got_k), bits(want_k)) and np.array_equal(bits(got_v), bits(want_v))


def test_spkc_rope_mean_literal():
    """Mean token of [1, 2, 2] (fp16) = float16(float32(5) / float32(3)), written at slot + offset."""
    key = np.array([0, 1, 2, 2, 9], np.float16).reshape(5, 1, 1) * np.ones((1, 1, 16), np.float16)
    kc = np.zeros((1, 8, 1, 16), np.float16)
    call = dict(key=key, key_cache=kc, slot_mapping=np.array([2], np.int32), value=key.copy(),
                value_cache=kc.copy(), compress_lens=np.array([3], np.int32),
                compress_seq_offset=np.array([1], np.int32), seq_lens=np.array([5], np.int32), scatter_mode="Rope")
    _, got_k, _ = run(call, chip=CHIP)
    rows = got_k[0, :, 0, 0]
    want = [0, 0, 0, np.float16(np.float32(5) / np.float32(3)), 9, 0, 0, 0]
    assert np.array_equal(bits(rows), bits(np.array(want, np.float16)))


def test_spkc_rope_mean_nan_inf_bits():
    """NaN payloads, -NaN and inf - inf in the window give the canonical fp16 NaN 0x7E00 (vector unit,
    docs/numerics.md); +inf stays inf; a NaN payload in a copied token keeps its bits."""
    key = np.ones((4, 1, 16), np.float16)
    raw = key.view(np.uint16)
    raw[1, 0, 0], raw[2, 0, 1] = 0x7E01, 0xFE05  # NaN payload, negative NaN
    raw[1, 0, 2], raw[2, 0, 2] = 0x7C00, 0xFC00  # inf + (-inf)
    raw[1, 0, 3] = 0x7C00  # inf alone
    raw[0, 0, 4] = 0x7E03  # NaN in the token before the window (copied)
    kc = np.zeros((1, 8, 1, 16), np.float16)
    call = dict(key=key, key_cache=kc, slot_mapping=np.array([0], np.int32), value=key.copy(),
                value_cache=kc.copy(), compress_lens=np.array([2], np.int32),
                compress_seq_offset=np.array([1], np.int32), seq_lens=np.array([4], np.int32), scatter_mode="Rope")
    _, got_k, _ = run(call, chip=CHIP)
    mean = bits(got_k)[0, 1, 0]
    assert list(mean[:5]) == [0x7E00, 0x7E00, 0x7E00, 0x7C00, 0x3C00]
    assert bits(got_k)[0, 0, 0, 4] == 0x7E03 and np.array_equal(bits(got_k)[0, 2, 0], raw[3, 0])


# --- in place, nothing else touched, nothing lost ---------------------------------------------------
def test_spkc_untouched_bytes_of_large_cache():
    """A 16 MiB cache of random bits (NaN payloads, -0): written rows hold the token bits, every other
    byte is unchanged, by an independent fancy-indexing formula."""
    rng = np.random.default_rng(5)
    t, n, d, nb, bs = 40, 8, 128, 64, 128
    key = rng.integers(0, 1 << 16, (t, n, d), dtype=np.uint16).view(np.float16)
    kc = rng.integers(0, 1 << 16, (nb, bs, n, d), dtype=np.uint16).view(np.float16)
    slots = rng.choice(nb * bs, t, replace=False).astype(np.int64)
    slots[::7] = -1
    before = kc.copy()
    res = scatter_pa_kv_cache(key, kc, slots, np.empty(0, np.float16), np.empty(0, np.float16), chip=CHIP)
    want = before.reshape(nb * bs, n, d).copy()
    keep = slots >= 0
    want[slots[keep]] = key[keep]
    assert res.outputs["key_cache"] is kc
    assert np.array_equal(bits(kc).reshape(nb * bs, n, d), bits(want))


def test_spkc_all_negative_slots_change_nothing():
    """Every slot negative: both caches bit-identical, still a full launch."""
    call = norm_case(np.float16, np.int32, np.random.default_rng(1))
    call["slot_mapping"][:] = -1
    res, got_k, got_v = run(call, chip=CHIP)
    assert np.array_equal(bits(got_k), bits(call["key_cache"])) and np.array_equal(bits(got_v),
                                                                                   bits(call["value_cache"]))
    assert res.cycles > 0


def test_spkc_timeout_leaves_caches_unchanged():
    """A run past the AI Core timeout raises 507014 after the kernel wrote its private copies; the
    caller's caches keep every bit."""
    call = norm_case(np.float16, np.int32, np.random.default_rng(2))
    kc, vc = call["key_cache"].copy(), call["value_cache"].copy()
    spec = get_chip(CHIP).replace(aicore_timeout_s=1e-7)
    with pytest.raises(AclnnError) as err:
        scatter_pa_kv_cache(**call, chip=spec)
    assert err.value.status == AICORE_TIMEOUT
    assert np.array_equal(bits(call["key_cache"]), bits(kc)) and np.array_equal(bits(call["value_cache"]), bits(vc))


def test_spkc_timing_mode_writes_nothing():
    """Timing mode with real arrays: outputs None, caches unchanged, a trace and cycles."""
    call = nz_case(np.float16, np.int64, np.random.default_rng(4))
    kc = call["key_cache"].copy()
    res = scatter_pa_kv_cache(**call, chip=CHIP, mode="timing")
    assert res.outputs is None and res.cycles > 0 and len(res.trace) > 0
    assert np.array_equal(bits(call["key_cache"]), bits(kc))


def test_spkc_key_only_by_omitting_value():
    """Python API: value and value_cache both omitted = scenario 6 (outputs value_cache None)."""
    call = siso_case(np.float16, np.int32, np.random.default_rng(6))
    want_k, _ = golden(call)
    kc = call["key_cache"].copy()
    res = scatter_pa_kv_cache(call["key"], kc, call["slot_mapping"], chip=CHIP)
    assert np.array_equal(bits(kc), bits(want_k)) and res.outputs["value_cache"] is None


def test_spkc_scenario3_on_a_950_spec():
    """Scenario 3 (4-D key, 950 class) on a ChipSpec of that family: fp32/fp16 Rope and Alibi bit-exact;
    the Rope mean of int16 is not modelled (NotImplementedError); fp32 on a 910B preset is refused."""
    spec = get_chip(CHIP).replace(name="Ascend910_95sim", soc_family="Ascend910_95")
    rng = np.random.default_rng(9)
    b, s, n, d = 2, 6, 3, 8
    for dtype in (np.float32, np.float16):
        call = dict(key=rnd((b, s, n, d), dtype, rng), key_cache=rnd((4, 8, 1, d), dtype, rng),
                    slot_mapping=np.array([[0, 6, 12], [-1, 20, 26]], np.int32),
                    value=rnd((b, s, n, d), dtype, rng), value_cache=rnd((4, 8, 1, d), dtype, rng),
                    compress_lens=np.array([[2, 0, 3], [1, 4, 0]], np.int32), seq_lens=np.array([6, 4], np.int32))
        for offsets in (np.array([1, -1, 2, 0, 5, 0], np.int32), None):
            c = dict(call, compress_seq_offset=offsets)
            want_k, want_v = golden(c, soc_family="Ascend910_95")
            _, got_k, got_v = run(c, chip=spec)
            assert np.array_equal(bits(got_k), bits(want_k)) and np.array_equal(bits(got_v), bits(want_v))
    c = dict(call, key=rnd((b, s, n, d), np.int16, rng), value=rnd((b, s, n, d), np.int16, rng),
             key_cache=rnd((4, 8, 1, d), np.int16, rng), value_cache=rnd((4, 8, 1, d), np.int16, rng),
             compress_seq_offset=np.array([1, -1, 2, 0, 5, 0], np.int32))
    with pytest.raises(NotImplementedError, match="int16"):
        run(c, chip=spec)
    fp32 = norm_case(np.float32, np.int32, rng)
    with pytest.raises(AclnnError) as err:
        run(fp32, chip=CHIP)
    assert err.value.status == ACLNN_ERR_PARAM_INVALID


# --- tiling ------------------------------------------------------------------------------------------
def _plan(call):
    return validate(**{k: v for k, v in call.items()})


def test_spkc_tiling_core_split():
    """Token templates: AllocateTask (remainder to the first cores); NZ: ceil split with a tail core;
    Rope/Omni: twice the (batch, head) tasks; never more cores than the chip's AIVs or the tasks."""
    spec = get_chip(CHIP)
    rng = np.random.default_rng(0)
    tl = scatter_pa_kv_cache_tiling(_plan(norm_case(np.float16, np.int32, rng, t=100, nb=20)), spec)
    assert (tl.usedCoreNum, tl.blockFactor, tl.tailBlockFactor, tl.numTokens) == (48, 2, 4, 100)
    tl = scatter_pa_kv_cache_tiling(_plan(nz_case(np.float16, np.int32, rng, t=100, nb=8)), spec)
    assert (tl.usedCoreNum, tl.blockFactor, tl.tailBlockFactor) == (34, 3, 1)  # ceil(100/48) = 3
    tl = scatter_pa_kv_cache_tiling(_plan(compress_case("Rope", np.float16, np.int32, rng)), spec)
    assert (tl.numTokens, tl.usedCoreNum, tl.blockFactor, tl.tailBlockFactor) == (6, 12, 1, 0)
    tl = scatter_pa_kv_cache_tiling(_plan(compress_case("Alibi", np.float16, np.int32, rng)), spec)
    assert (tl.numTokens, tl.usedCoreNum) == (6, 6)
    tl = scatter_pa_kv_cache_tiling(_plan(norm_case(np.float16, np.int32, rng, t=5)), spec, {"blockDim": 2})
    assert (tl.usedCoreNum, tl.blockFactor, tl.tailBlockFactor, tl.block_dim, tl.workspace_size) == (2, 2, 1, 2, 0)


def test_spkc_tiling_copy_plan():
    """One DataCopy per aligned token row when T < 1000 and K+V rows fit; otherwise chunks of
    ubSize / (2 buffers x 2 tensors) bytes with the remainder as tail; NZ fully loads whenever it fits."""
    spec = get_chip(CHIP)
    rng = np.random.default_rng(0)
    small = _plan(norm_case(np.float16, np.int32, rng))  # rows 96 and 48 elements
    tl = scatter_pa_kv_cache_tiling(small, spec)
    assert tl.fullyLoad and tl.tilingKey == 1001 and (tl.kHandleNumPerLoop, tl.kLoopNum, tl.kTailHandleNum) == (96, 1, 0)
    assert tl.ubSize == spec.ub_bytes - 1024
    tl = scatter_pa_kv_cache_tiling(small, spec, {"ubSize": 256})
    assert not tl.fullyLoad and tl.tilingKey == 1000
    assert (tl.kHandleNumPerLoop, tl.kLoopNum, tl.kTailHandleNum) == (32, 3, 0)  # 64-byte chunks
    assert (tl.vHandleNumPerLoop, tl.vLoopNum, tl.vTailHandleNum) == (32, 1, 16)
    unaligned = _plan(norm_case(np.float16, np.int32, rng, dk=7))
    assert not scatter_pa_kv_cache_tiling(unaligned, spec).fullyLoad
    many = _plan(norm_case(np.int8, np.int32, rng, t=1000, nb=130))
    assert not scatter_pa_kv_cache_tiling(many, spec).fullyLoad  # SMALL_TOKEN = 1000
    nz = _plan(nz_case(np.float16, np.int32, rng, t=1000, nb=63))
    assert scatter_pa_kv_cache_tiling(nz, spec).tilingKey == 2001


@pytest.mark.parametrize("override, status", [
    ({"blockDim": 0}, ACLNN_ERR_PARAM_INVALID), ({"blockDim": 49}, ACLNN_ERR_PARAM_INVALID),
    ({"blockDim": True}, ACLNN_ERR_PARAM_INVALID), ({"blockDim": 2.0}, ACLNN_ERR_PARAM_INVALID),
    ({"ubSize": 100}, ACLNN_ERR_PARAM_INVALID), ({"ubSize": 1 << 20}, ACLNN_ERR_PARAM_INVALID),
    ({"ubSize": 32}, ACLNN_ERR_PARAM_INVALID), ({"tileNum": 4}, ACLNN_ERR_PARAM_INVALID),
    ([("blockDim", 2)], ACLNN_ERR_PARAM_INVALID)])
def test_spkc_illegal_tiling_override(override, status):
    """Illegal overrides raise 161002 naming the field; the caches are untouched."""
    call = norm_case(np.float16, np.int32, np.random.default_rng(0))
    kc = call["key_cache"].copy()
    with pytest.raises(AclnnError) as err:
        scatter_pa_kv_cache(**call, chip=CHIP, tiling=override)
    assert err.value.status == status and "tiling" in err.value.message
    assert np.array_equal(bits(call["key_cache"]), bits(kc))


def test_spkc_rope_head_too_large_for_ub_is_a_tiling_error():
    """A Rope row that cannot fit the mean buffers is the real tiling's kind of refusal: 561002."""
    rng = np.random.default_rng(0)
    call = compress_case("Rope", np.float16, np.int32, rng, d=16384)
    with pytest.raises(AclnnError) as err:
        scatter_pa_kv_cache(**as_specs(call), chip=CHIP, mode="timing")
    assert err.value.status == ACLNN_ERR_INNER_TILING_ERROR


def test_spkc_launch_uses_tiling_cores():
    """The trace has exactly usedCoreNum vector cores, each moving its AllocateTask share of tokens."""
    call = norm_case(np.float16, np.int32, np.random.default_rng(0), t=13)
    call["slot_mapping"][:] = np.arange(13)
    res, _, _ = run(call, chip=CHIP, tiling={"blockDim": 4})
    df = res.trace.df
    stores = df[df["pipe"] == "MTE3"].groupby("core").size().to_dict()
    assert res.block_dim == 4 and stores == {0: 8, 1: 6, 2: 6, 3: 6}  # 4, 3, 3, 3 tokens x (K, V)


# --- modes and bad input ----------------------------------------------------------------------------
def test_spkc_estimate_mode_leaves_caches_alone():
    """mode='estimate' returns a prediction (no outputs, no trace) and writes nothing to the caches
    (tests/ops/test_scatter_pa_kv_cache_estimate.py checks its figures)."""
    call = norm_case(np.float16, np.int32, np.random.default_rng(0))
    before = call["key_cache"].copy()
    res = scatter_pa_kv_cache(**call, chip=CHIP, mode="estimate")
    assert res.outputs is None and res.trace is None and res.cycles > 0
    assert np.array_equal(call["key_cache"].view(np.uint8), before.view(np.uint8))


@pytest.mark.parametrize("change, status", [
    ({"mode": "fast"}, ACLNN_ERR_PARAM_INVALID), ({"chip": "Ascend310P3"}, ACLNN_ERR_PARAM_INVALID),
    ({"chip": 3}, ACLNN_ERR_PARAM_INVALID), ({"key": None}, ACLNN_ERR_PARAM_NULLPTR),
    ({"key": TensorSpec((13, 3, 32), np.float16)}, ACLNN_ERR_PARAM_INVALID),
    ({"strides": [1, 1], "scatter_mode": "Nct", "offsets": [1, 1]}, ACLNN_ERR_PARAM_INVALID)])
def test_spkc_bad_call_status(change, status):
    """Bad chip/mode/tensors (a TensorSpec in full mode; Nct strides that overlap tokens) -> status."""
    call = dict(norm_case(np.float16, np.int32, np.random.default_rng(0)), chip=CHIP)
    call.update(change)
    with pytest.raises(AclnnError) as err:
        scatter_pa_kv_cache(**call)
    assert err.value.status == status


def test_spkc_read_only_cache_refused():
    """A read-only cache cannot be updated in place: 161002 before anything runs."""
    call = norm_case(np.float16, np.int32, np.random.default_rng(0))
    call["key_cache"].flags.writeable = False
    with pytest.raises(AclnnError) as err:
        scatter_pa_kv_cache(**call, chip=CHIP)
    assert err.value.status == ACLNN_ERR_PARAM_INVALID and "writeable" in err.value.message


# --- aclnn facade ---------------------------------------------------------------------------------------
def _facade_args(call):
    return (call["key"], call["key_cache"], call["slot_mapping"], call["value"], call["value_cache"],
            call.get("compress_lens"), call.get("compress_seq_offset"), call.get("seq_lens"),
            call.get("cache_mode"), call.get("scatter_mode"), call.get("strides"), call.get("offsets"))


@pytest.mark.parametrize("build", [norm_case, nz_case, lambda *a: compress_case("Rope", *a)],
                         ids=["norm", "nz", "rope"])
def test_spkc_aclnn_two_stages_update_in_place(build):
    """GetWorkspaceSize -> (0, 0, executor); the second stage returns 0 and updates the caches in place."""
    call = build(np.float16, np.int32, np.random.default_rng(8))
    want_k, want_v = golden(call)
    kc, vc = call["key_cache"], call["value_cache"]
    status, ws, executor = aclnnScatterPaKvCacheGetWorkspaceSize(*_facade_args(call), 0, None)
    assert (status, ws) == (0, 0) and executor is not None
    assert aclnnScatterPaKvCache(None, ws, executor, None) == 0
    assert call["key_cache"] is kc and np.array_equal(bits(kc), bits(want_k)) and np.array_equal(bits(vc),
                                                                                                 bits(want_v))
    assert aclnnScatterPaKvCache(None, ws, executor, None) == ACLNN_ERR_PARAM_INVALID  # executor used up


def test_spkc_aclnn_status_codes():
    """First stage: null tensors 161001, bad dtype 161002, bad rank 561002, with (status, 0, None);
    second stage: a null executor 161001, a timeout 507014 with the caches unchanged."""
    rng = np.random.default_rng(0)
    call = norm_case(np.float16, np.int32, rng)
    for change, status in (({"value_cache": None}, ACLNN_ERR_PARAM_NULLPTR), ({"key": None}, ACLNN_ERR_PARAM_NULLPTR),
                           ({"slot_mapping": call["slot_mapping"].astype(np.float32)}, ACLNN_ERR_PARAM_INVALID),
                           ({"key": call["key"][0]}, ACLNN_ERR_INNER_TILING_ERROR)):
        assert aclnnScatterPaKvCacheGetWorkspaceSize(*_facade_args(dict(call, **change))) == (status, 0, None)
    assert aclnnScatterPaKvCache(None, 0, None, None) == ACLNN_ERR_PARAM_NULLPTR
    kc = call["key_cache"].copy()
    spec = get_chip(CHIP).replace(aicore_timeout_s=1e-7)
    status, ws, executor = aclnnScatterPaKvCacheGetWorkspaceSize(*_facade_args(call), chip=spec)
    assert status == 0 and aclnnScatterPaKvCache(None, ws, executor, None) == AICORE_TIMEOUT
    assert np.array_equal(bits(call["key_cache"]), bits(kc))


# --- fuzz: any arguments -> result or AclnnError, caches intact after an error -------------------
_DTYPES = (np.float16, BF16, np.int8, np.float32, np.int32)


@st.composite
def fuzz_calls(draw):
    """A call built from a valid scenario case, then possibly broken in one or two ways."""
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["norm", "nct", "siso", "nz", "Alibi", "Rope", "Omni"]))
    dtype = draw(st.sampled_from(_DTYPES[:3]))
    slot_dtype = draw(st.sampled_from(SLOTS))
    if kind in ("Rope", "Omni") and dtype == np.int8:
        dtype = np.float16
    small = dict(norm=lambda: norm_case(dtype, slot_dtype, rng, t=int(rng.integers(1, 9)), n=int(rng.integers(1, 4)),
                                        dk=int(rng.integers(1, 40)), dv=int(rng.integers(1, 40))),
                 nct=lambda: nct_case(dtype, slot_dtype, rng), siso=lambda: siso_case(dtype, slot_dtype, rng),
                 nz=lambda: nz_case(dtype, slot_dtype, rng))
    call = small[kind]() if kind in small else compress_case(kind, dtype, slot_dtype, rng,
                                                             d=int(rng.integers(1, 24)))
    breaks = draw(st.lists(st.sampled_from([
        "none", "slot_high", "slot_dtype", "drop", "dtype", "shape", "cache_mode", "scatter_mode",
        "tiling", "win", "strides", "noncontig_cache"]), min_size=1, max_size=2))
    for brk in breaks:
        slots = call.get("slot_mapping")
        if brk == "slot_high" and slots is not None and slots.dtype in SLOTS:
            call["slot_mapping"] = slots.copy()
            call["slot_mapping"].flat[0] = draw(st.sampled_from([10**6, 48, 2**31 - 1]))
        elif brk == "slot_dtype" and slots is not None:
            call["slot_mapping"] = slots.astype(draw(st.sampled_from([np.int16, np.float32, np.uint8])))
        elif brk == "drop":
            call[draw(st.sampled_from(["key", "slot_mapping", "value", "seq_lens", "compress_lens"]))] = None
        elif brk == "dtype":
            name = draw(st.sampled_from(["key", "value", "key_cache"]))
            if call.get(name) is not None:
                call[name] = call[name].astype(draw(st.sampled_from(_DTYPES)))
        elif brk == "shape":
            name = draw(st.sampled_from(DATA + ("slot_mapping",)))
            if call.get(name) is not None and call[name].ndim:
                call[name] = call[name][..., :max(1, call[name].shape[-1] - 1)].copy()
        elif brk == "cache_mode":
            call["cache_mode"] = draw(st.sampled_from(["PA_NZ", "Norm", "ND", None, 3]))
        elif brk == "scatter_mode":
            call["scatter_mode"] = draw(st.sampled_from(["None", "Nct", "Alibi", "Rope", "Omni", "bad", None]))
        elif brk == "tiling":
            call["tiling"] = draw(st.sampled_from([{"blockDim": 1}, {"blockDim": 48}, {"blockDim": 0},
                                                   {"ubSize": 96}, {"ubSize": 4096}, {"x": 1}, "bad"]))
        elif brk == "win" and call.get("compress_lens") is not None:
            # shorter windows only: longer Alibi windows would make tasks write the same rows, which
            # the seed leaves undefined
            call["compress_lens"] = call["compress_lens"] + np.asarray(draw(st.integers(-3, 0)),
                                                                       call["compress_lens"].dtype)
        elif brk == "strides":
            call["strides"] = draw(st.sampled_from([[1, 1], [0, 4], [100, 100], None, [10**18, 1]]))
            call["offsets"] = draw(st.sampled_from([[1, 1], [0, 0], [5, 7], None]))
        elif brk == "noncontig_cache":
            call["key_cache"] = np.asfortranarray(call["key_cache"])
    return call


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fuzz_calls())
def test_spkc_fuzz_result_or_aclnn_error(call):
    """Random valid and invalid calls: an OpResult equal to golden bit for bit, or an AclnnError with
    both caches bit-identical to before."""
    before = {n: call[n].copy() for n in ("key_cache", "value_cache") if isinstance(call.get(n), np.ndarray)}
    tiling = call.pop("tiling", None)
    try:
        res = scatter_pa_kv_cache(**call, chip=CHIP, tiling=tiling)
    except AclnnError:
        for name, arr in before.items():
            assert np.array_equal(bits(call[name]), bits(arr))
        return
    original = dict(call, **before)
    want_k, want_v = golden(original)
    assert res.outputs["key_cache"] is call["key_cache"]
    assert np.array_equal(bits(call["key_cache"]), bits(want_k))
    if want_v is not None and want_v.size:
        assert np.array_equal(bits(call["value_cache"]), bits(want_v))
