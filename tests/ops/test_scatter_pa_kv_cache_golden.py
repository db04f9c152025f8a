"""ScatterPaKvCache golden against literal hand-computed caches and independent vectorised formulas."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ops.scatter_pa_kv_cache.golden import scatter_pa_kv_cache_golden
from ops.scatter_pa_kv_cache.validate import validate

BF16 = ml_dtypes.bfloat16
FILL = -7  # initial cache content, to see which rows were written


def bits(a: np.ndarray) -> np.ndarray:
    """Raw bits of an array, for bit-exact comparison."""
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def run(**call):
    """Validate, then run the golden; returns (new_key_cache, new_value_cache)."""
    names = ("key", "key_cache", "slot_mapping", "value", "value_cache")
    plan = validate(**call)
    args = [call.get(n) for n in names]
    extra = {n: call.get(n) for n in ("compress_lens", "compress_seq_offset", "seq_lens")}
    return scatter_pa_kv_cache_golden(plan, *args, **extra)


def rand(shape, dtype, rng):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-100, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


# --- token scenarios 1, 2, 6 ----------------------------------------------------------------------
def test_norm_literal_example():
    """Scenario 2 by hand: slot 3 -> block 1 offset 1, slot 0 -> block 0 offset 0, slot -1 skipped."""
    key = np.array([[[1, 2]], [[3, 4]], [[5, 6]]], np.float16)  # [T=3, N=1, D=2]
    value = np.array([[[10]], [[30]], [[50]]], np.float16)  # Dv=1
    kc = np.full((2, 2, 1, 2), FILL, np.float16)
    vc = np.full((2, 2, 1, 1), FILL, np.float16)
    slots = np.array([3, -1, 0], np.int32)
    nk, nv = run(key=key, key_cache=kc, slot_mapping=slots, value=value, value_cache=vc)
    want_k = np.array([[[[5, 6]], [[FILL, FILL]]], [[[FILL, FILL]], [[1, 2]]]], np.float16)
    want_v = np.array([[[[50]], [[FILL]]], [[[FILL]], [[10]]]], np.float16)
    assert np.array_equal(bits(nk), bits(want_k))
    assert np.array_equal(bits(nv), bits(want_v))
    assert np.all(kc == FILL) and np.all(vc == FILL)  # inputs untouched: the golden returns copies


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.int8])
@pytest.mark.parametrize("slot_dtype", [np.int32, np.int64])
def test_norm_matches_vectorised_formula(dtype, slot_dtype):
    """Scenario 2 (Dk != Dv, negative slots) equals a fancy-indexing formula over flat cache rows."""
    rng = np.random.default_rng(1)
    t, n, dk, dv, nb, bs = 6, 3, 8, 4, 3, 4
    key, value = rand((t, n, dk), dtype, rng), rand((t, n, dv), dtype, rng)
    kc, vc = rand((nb, bs, n, dk), dtype, rng), rand((nb, bs, n, dv), dtype, rng)
    slots = np.array([11, -1, 0, 5, -3, 6], slot_dtype)
    nk, nv = run(key=key, key_cache=kc, slot_mapping=slots, value=value, value_cache=vc)
    keep = slots >= 0
    want_k = kc.copy().reshape(nb * bs, n, dk)
    want_k[slots[keep]] = key[keep]
    want_v = vc.copy().reshape(nb * bs, n, dv)
    want_v[slots[keep]] = value[keep]
    assert np.array_equal(bits(nk), bits(want_k.reshape(kc.shape)))
    assert np.array_equal(bits(nv), bits(want_v.reshape(vc.shape)))


def test_norm_keeps_nan_payload_bits():
    """Cache rows are byte copies: an fp16 NaN payload and -0.0 survive."""
    key = np.array([0x7E01, 0x8000], np.uint16).view(np.float16).reshape(1, 1, 2)
    kc = np.zeros((1, 2, 1, 2), np.float16)
    nk, _ = run(key=key, key_cache=kc, slot_mapping=np.array([1], np.int32), value=key.copy(),
                value_cache=kc.copy())
    assert list(bits(nk)[0, 1, 0]) == [0x7E01, 0x8000]
    assert list(bits(nk)[0, 0, 0]) == [0, 0]


def test_all_negative_slots_leave_caches_unchanged():
    """vllm-ascend e2e check (oracles.md §6): slots all -1 leave both caches bit-identical."""
    rng = np.random.default_rng(2)
    key, kc = rand((3, 1, 8), np.float16, rng), rand((2, 4, 1, 8), np.float16, rng)
    nk, nv = run(key=key, key_cache=kc, slot_mapping=np.full(3, -1, np.int32), value=key, value_cache=kc)
    assert np.array_equal(bits(nk), bits(kc)) and np.array_equal(bits(nv), bits(kc))


def test_nz_literal_example():
    """Scenario 1 by hand: fp16 Dk=32 -> 2 chunks of 16; token 0 at slot 5 = block 1, offset 1."""
    key = np.arange(32, dtype=np.float16).reshape(1, 1, 32)
    kc = np.full((2, 2, 4, 16), FILL, np.float16)
    nk, _ = run(key=key, key_cache=kc, slot_mapping=np.array([5], np.int32), value=key, value_cache=kc,
                cache_mode="PA_NZ")
    want = np.full((2, 2, 4, 16), FILL, np.float16)
    want[1, 0, 1] = np.arange(0, 16)
    want[1, 1, 1] = np.arange(16, 32)
    assert np.array_equal(bits(nk), bits(want))


@pytest.mark.parametrize("dtype, last", [(np.float16, 16), (BF16, 16), (np.int8, 32)])
def test_nz_matches_transposed_nd_formula(dtype, last):
    """PA_NZ equals the ND scatter seen through cache.transpose(0, 2, 1, 3) (op-plugin golden layout)."""
    rng = np.random.default_rng(3)
    t, n, dk, dv, nb, bs = 5, 2, 2 * last, 4 * last, 2, 4
    key, value = rand((t, n, dk), dtype, rng), rand((t, n, dv), dtype, rng)
    kc = rand((nb, n * dk // last, bs, last), dtype, rng)
    vc = rand((nb, n * dv // last, bs, last), dtype, rng)
    slots = np.array([7, 0, -1, 3, 4], np.int32)
    nk, nv = run(key=key, key_cache=kc, slot_mapping=slots, value=value, value_cache=vc, cache_mode="PA_NZ")
    for src, cache, got in ((key, kc, nk), (value, vc, nv)):
        rows = cache.copy().transpose(0, 2, 1, 3).reshape(nb * bs, -1)  # [row, chunk*last]
        keep = slots >= 0
        rows[slots[keep]] = src.reshape(t, -1)[keep]
        want = rows.reshape(nb, bs, -1, last).transpose(0, 2, 1, 3)
        assert np.array_equal(bits(got), bits(want))


def test_key_only_scenario_6():
    """Scenario 6 writes key_cache only and returns the empty value_cache unchanged."""
    key = np.array([[[1, 2]], [[3, 4]]], BF16)
    kc = np.full((1, 2, 1, 2), FILL, BF16)
    empty = np.zeros((), BF16)
    slots = np.array([1, 0], np.int64)
    nk, nv = run(key=key, key_cache=kc, slot_mapping=slots, value=empty, value_cache=empty)
    assert np.array_equal(bits(nk), bits(np.array([[[[3, 4]], [[1, 2]]]], BF16)))
    assert nv.shape == ()


def test_nct_reads_the_strided_view():
    """Nct: key is a strided view into a fused buffer; the result equals plain scatter of that view."""
    rng = np.random.default_rng(4)
    fused = rand((4, 3 * 16), np.float16, rng)  # [T, (q | k | v) * 16], per token stride 48
    key, value = fused[:, 16:32].reshape(4, 1, 16), fused[:, 32:48].reshape(4, 1, 16)
    kc = np.zeros((2, 2, 1, 16), np.float16)
    slots = np.array([3, 1, -1, 0], np.int32)
    plan = validate(key, kc, slots, value, kc.copy(), scatter_mode="Nct", strides=[48, 48], offsets=[16, 32])
    nk, nv = scatter_pa_kv_cache_golden(plan, key, kc, slots, value, kc.copy())
    want_k = np.zeros((4, 1, 16), np.float16)
    want_k[[3, 1, 0]] = fused[[0, 1, 3], 16:32].reshape(3, 1, 16)
    assert np.array_equal(bits(nk.reshape(4, 1, 16)), bits(want_k))
    assert np.array_equal(bits(nv.reshape(4, 16)[3]), bits(fused[0, 32:48]))


# --- compress scenarios 4, 5 (A2/A3) --------------------------------------------------------------
def _tokens(values, d=2, dtype=np.float16):
    """Key [T, N=1, d] whose token j holds values[j] in every element of the head."""
    return np.repeat(np.array(values, np.float32)[:, None, None], d, axis=2).astype(dtype)


def _compress_call(key, wins, seqs, slots, offs=None, mode="Alibi", rows=8, dtype=np.float16):
    d = key.shape[-1]
    call = dict(key=key, value=key.copy(), key_cache=np.full((rows // 4, 4, 1, d), FILL, dtype),
                value_cache=np.full((rows // 4, 4, 1, d), FILL, dtype),
                slot_mapping=np.array(slots, np.int32), compress_lens=np.array(wins, np.int32),
                seq_lens=np.array(seqs, np.int32), scatter_mode=mode)
    if offs is not None:
        call["compress_seq_offset"] = np.array(offs, np.int32)
    return call


def _rows(cache):
    """First element of each cache row, as float."""
    return cache.reshape(-1, cache.shape[-1])[:, 0].astype(np.float32).tolist()


def test_alibi_literal_example():
    """Alibi: batch 0 (3 tokens) keeps its last 2 at slot 0, batch 1 (2 tokens) its last 1 at slot 5."""
    key = _tokens([10, 20, 30, 40, 50])
    nk, nv = run(**_compress_call(key, wins=[2, 1], seqs=[3, 2], slots=[0, 5]))
    assert _rows(nk) == [20, 30, FILL, FILL, FILL, 50, FILL, FILL]
    assert _rows(nv) == _rows(nk)


def test_alibi_multi_head_reads_its_head():
    """Alibi with 2 heads: task (b, h) reads column h of batch b's rows."""
    key = np.array([[[1, 1], [2, 2]], [[3, 3], [4, 4]], [[5, 5], [6, 6]]], np.float16)  # T=3, N=2, D=2
    call = _compress_call(key, wins=[2, 1, 1, 1], seqs=[2, 1], slots=[0, 2, 4, -1])
    nk, _ = run(**call)
    # (b0,h0): last 2 of [1, 3]; (b0,h1): last 1 of [2, 4]; (b1,h0): [5]; (b1,h1): negative slot, skipped
    assert _rows(nk) == [1, 3, 4, FILL, 5, FILL, FILL, FILL]


def test_rope_literal_example_fp16():
    """Rope: head, fp32 mean rounded to nearest even, tail; offset -1 and win 0 copy everything."""
    # batch 0: 5 tokens, off 1, win 3 -> rows 7, mean(1, 1, 2) = 4/3, 9
    # batch 1: 3 tokens, off -1 -> all; batch 2: 2 tokens, win 0 -> all
    key = _tokens([7, 1, 1, 2, 9, 11, 12, 13, 21, 22])
    call = _compress_call(key, wins=[3, 2, 0], seqs=[5, 3, 2], slots=[0, 3, 6], offs=[1, -1, 1],
                          mode="Rope", rows=12)
    nk, nv = run(**call)
    row_bits = bits(nk).reshape(-1, 2)[:, 0]
    assert list(row_bits[:3]) == [0x4700, 0x3D55, 0x4880]  # 7, fp16(4/3) = 1.333 (RNE), 9
    assert _rows(nk)[3:] == [11, 12, 13, 21, 22, FILL, FILL, FILL, FILL]
    assert np.array_equal(bits(nv), bits(nk))


def test_rope_mean_rounding_bf16():
    """bf16 mean: 4/3 -> 0x3FAB (rounds up), 7/3 -> 0x4015 (rounds down)."""
    key = np.array([[[1, 1]], [[1, 2]], [[2, 4]]], BF16)  # one batch, 3 tokens, D=2
    call = _compress_call(key, wins=[3], seqs=[3], slots=[2], offs=[0], mode="Rope", dtype=BF16)
    nk, _ = run(**call)
    assert list(bits(nk).reshape(-1, 2)[2]) == [0x3FAB, 0x4015]
    assert _rows(nk)[:2] + _rows(nk)[3:] == [FILL] * 7


def test_rope_mean_matches_sequential_fp32_formula():
    """Rope mean equals cumsum in fp32 (sequential order) / count, rounded once, for random data."""
    rng = np.random.default_rng(5)
    seq, win, off, d = 9, 6, 2, 32
    key = rand((seq, 1, d), np.float16, rng)
    call = _compress_call(key, wins=[win], seqs=[seq], slots=[1], offs=[off], mode="Rope", rows=12)
    call.update(key_cache=np.zeros((3, 4, 1, d), np.float16), value_cache=np.zeros((3, 4, 1, d), np.float16))
    nk, _ = run(**call)
    window = key[off:off + win, 0].astype(np.float32)
    mean = (np.cumsum(window, axis=0, dtype=np.float32)[-1] / np.float32(win)).astype(np.float16)
    rows = nk.reshape(-1, d)
    assert np.array_equal(bits(rows[1 + off]), bits(mean))
    assert np.array_equal(bits(rows[1:1 + off]), bits(key[:off, 0]))
    assert np.array_equal(bits(rows[2 + off:1 + seq - win + 1]), bits(key[off + win:, 0]))
    assert not rows[0].any() and not rows[1 + seq - win + 1:].any()


def test_rope_window_to_end_has_no_tail():
    """Rope with off + win == seq_len writes the head and the mean only."""
    key = _tokens([1, 3, 5, 8])
    nk, _ = run(**_compress_call(key, wins=[2], seqs=[4], slots=[0], offs=[2], mode="Rope"))
    assert _rows(nk) == [1, 3, 6.5, FILL, FILL, FILL, FILL, FILL]


def test_omni_literal_example():
    """Omni drops the window: tokens before it, then those after it, back to back."""
    key = _tokens([1, 2, 3, 4, 5, 6, 7])  # batch 0: 5 tokens; batch 1: 2 tokens, win 0
    nk, _ = run(**_compress_call(key, wins=[2, 0], seqs=[5, 2], slots=[0, 4], offs=[1, 0], mode="Omni"))
    assert _rows(nk) == [1, 4, 5, FILL, 6, 7, FILL, FILL]


def test_compress_negative_slot_skips_task():
    """A compress task with a negative slot writes nothing."""
    key = _tokens([1, 2, 3, 4])
    nk, _ = run(**_compress_call(key, wins=[1, 1], seqs=[2, 2], slots=[-1, 6], offs=[0, -1], mode="Rope"))
    assert _rows(nk) == [FILL] * 6 + [3, 4]


# --- scenario 3 (950 class, 4-D key) --------------------------------------------------------------
def _s3_call(key, wins, seqs, slots, offs, rows=8):
    b, s, n, d = key.shape
    fill = np.array(FILL).astype(key.dtype)  # -7 wraps for unsigned dtypes
    call = dict(key=key, value=key.copy(), key_cache=np.full((rows // 4, 4, 1, d), fill),
                value_cache=np.full((rows // 4, 4, 1, d), fill),
                slot_mapping=np.array(slots, np.int32).reshape(b, n),
                compress_lens=np.array(wins, np.int32).reshape(b, n),
                seq_lens=np.array(seqs, np.int32), soc_family="Ascend910_95")
    if offs is not None:
        call["compress_seq_offset"] = np.array(offs, np.int32)
    return call


def test_scenario3_rope_fp32_padded_batches():
    """4-D key [B, S, N, D]: tokens past seq_lens[b] are padding and never read."""
    key = np.array([[[[1.0]], [[2.0]], [[4.0]]], [[[8.0]], [[99.0]], [[99.0]]]], np.float32)  # B=2, S=3, N=1
    nk, _ = run(**_s3_call(key, wins=[2, 1], seqs=[3, 1], slots=[0, 4], offs=[1, 0]))
    assert _rows(nk) == [1, 3, FILL, FILL, 8, FILL, FILL, FILL]


def test_scenario3_fp32_mean_is_a_true_division():
    """fp32 mean of [1, 2, 2] is 5/3 = 0x3FD55555 (division), not 5 * (1/3) = 0x3FD55556."""
    key = np.array([1, 2, 2], np.float32).reshape(1, 3, 1, 1)
    nk, _ = run(**_s3_call(key, wins=[3], seqs=[3], slots=[0], offs=[0]))
    assert bits(nk).reshape(-1)[0] == 0x3FD55555


def test_scenario3_alibi_without_offset():
    """Scenario 3 without compress_seq_offset keeps the last compress_lens tokens (Alibi template)."""
    key = np.arange(12, dtype=np.float32).reshape(2, 3, 2, 1)  # B=2, S=3, N=2, D=1
    nk, _ = run(**_s3_call(key, wins=[2, 1, 1, 0], seqs=[3, 2], slots=[0, 2, 4, 6], offs=None))
    # (b0,h0): tokens 2, 4 -> last 2 = [2, 4]; (b0,h1): last of [1, 3, 5] = 5; (b1,h0): last of [6, 8] = 8
    assert _rows(nk) == [2, 4, 5, FILL, 8, FILL, FILL, FILL]


@pytest.mark.parametrize("dtype, window, want", [
    (np.int8, [-3, 0], -1),  # int32 sum -3, divide truncating toward zero (not floor: -2)
    (np.int16, [7, 8, 9, -1], 5),  # 23 // 4
    (np.uint8, [255, 254], 254),  # uint32 sum 509 // 2
    (np.int32, [2**31 - 1, 1], -(2**30)),  # accumulates in int32 with wraparound
])
def test_scenario3_integer_mean(dtype, window, want):
    """Integer means (950): accumulator, truncating division, low bits kept."""
    key = np.array(window, dtype).reshape(1, len(window), 1, 1)
    nk, _ = run(**_s3_call(key, wins=[len(window)], seqs=[len(window)], slots=[0], offs=[0]))
    assert nk.reshape(-1)[0] == np.array(want).astype(dtype)
    assert list(nk.reshape(-1)[1:].astype(np.int64)) == [np.array(FILL).astype(dtype)] * 7


def test_scenario3_window_clamped_to_sequence():
    """950 clamps a window that passes the end: mean of what is there, no tail."""
    key = np.array([[[[2.0]], [[4.0]], [[9.0]]]], np.float32)  # B=1, S=3; token 2 is padding
    nk, _ = run(**_s3_call(key, wins=[2], seqs=[2], slots=[1], offs=[1]))  # window [1, 3) -> [4]
    assert _rows(nk) == [FILL, 2, 4, FILL, FILL, FILL, FILL, FILL]


# --- untouched bytes ---------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", ["norm", "nz", "alibi", "rope", "omni"])
def test_rows_outside_targets_unchanged(scenario):
    """Only the target rows change; every other byte of both caches keeps its bits."""
    rng = np.random.default_rng(6)
    d = 16
    if scenario in ("norm", "nz"):
        key = rand((4, 2, d), np.float16, rng)
        if scenario == "norm":
            kc = rand((3, 4, 2, d), np.float16, rng)
            row_view = lambda c: c.reshape(12, -1)  # noqa: E731
        else:
            kc = rand((3, 2, 4, 16), np.float16, rng)
            row_view = lambda c: c.transpose(0, 2, 1, 3).reshape(12, -1)  # noqa: E731
        call = dict(key=key, key_cache=kc, value=key, value_cache=kc.copy(),
                    slot_mapping=np.array([9, -1, 2, 5], np.int32),
                    cache_mode="PA_NZ" if scenario == "nz" else "Norm")
        written = [9, 2, 5]
    else:
        key = rand((7, 1, d), np.float16, rng)
        mode = {"alibi": "Alibi", "rope": "Rope", "omni": "Omni"}[scenario]
        offs = None if scenario == "alibi" else [1, 0]
        call = _compress_call(key, wins=[2, 1], seqs=[4, 3], slots=[1, 7], offs=offs, mode=mode, rows=12)
        call["key_cache"] = rand((3, 4, 1, d), np.float16, rng)
        call["value_cache"] = call["key_cache"].copy()
        row_view = lambda c: c.reshape(12, -1)  # noqa: E731
        written = {"alibi": [1, 2, 7], "rope": [1, 2, 3, 7, 8, 9], "omni": [1, 2, 7, 8]}[scenario]
    nk, nv = run(**call)
    untouched = [r for r in range(12) if r not in written]
    for old, new in ((call["key_cache"], nk), (call["value_cache"], nv)):
        assert np.array_equal(bits(row_view(new)[untouched]), bits(row_view(old)[untouched]))
        assert not np.array_equal(bits(row_view(new)[written]), bits(row_view(old)[written]))
