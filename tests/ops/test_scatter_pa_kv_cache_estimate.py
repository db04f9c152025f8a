"""ScatterPaKvCache estimate mode: the result it returns, the work it counts (against independent numpy
and Python loops over the control tensors), exactness where it runs the whole launch, accuracy against
timing mode on a subset of benchmarks/estimate_accuracy_spkc.py's grid, timeout advice, huge calls."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from npusim.chip import chip as get_chip
from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.memory.gm import TensorSpec
from ops.scatter_pa_kv_cache.api import scatter_pa_kv_cache
from ops.scatter_pa_kv_cache.tiling import TilingData

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from estimate_accuracy_spkc import GRID, compress_call, token_call

CHIP = "Ascend910B2"
#: Grid cases asserted here (timing mode takes a few seconds each): every path of the estimate but
#: the compress miniature (benchmark only: its launches take longer).
ACCURACY = ["norm_20k_h32_d256", "nz_30k_h32_d256", "keyonly_50k_h32_d256", "nct_30k_h32",
            pytest.param("rope_b32_varied", marks=pytest.mark.xfail(strict=True, reason=(
                "issue 13: after the DMA curve-latency fix (ChipSpec.path_cost) this estimate is 7.8% under timing "
                "mode (764,758 vs 829,846 cycles); the SPKC estimate was not re-tuned on its tuning half (report)"))),
            "alibi_b128", "omni_b64"]  # omni_b64: a sampled core's HBM stall, scaled by its thinning
BOUND_PCT = 3.0  # documented bound of the estimate against timing mode (module docstring of estimate.py)


def _estimate(call: dict):
    return scatter_pa_kv_cache(**call, mode="estimate")


def test_spkc_estimate_result():
    """OpResult of estimate mode: no outputs, no trace, the real TilingData and block_dim, workspace 0,
    a timeout verdict that fits with advice, the Estimate in extra; real caches are not written."""
    rng = np.random.default_rng(0)
    t, n, d, nb, bs = 3000, 4, 64, 64, 128
    key = rng.standard_normal((t, n, d)).astype(np.float16)
    kc = rng.standard_normal((nb, bs, n, d)).astype(np.float16)
    slots = rng.permutation(nb * bs)[:t].astype(np.int32)
    before = kc.copy()
    res = scatter_pa_kv_cache(key, kc, slots, key.copy(), kc.copy(), chip=CHIP, mode="estimate")
    assert res.outputs is None and res.trace is None and res.mode == "estimate"
    assert isinstance(res.tiling, TilingData) and res.block_dim == res.tiling.usedCoreNum == 48
    assert res.workspace_size == 0 and res.cycles > 0 and res.time_us == pytest.approx(
        res.cycles / get_chip(CHIP).clock_hz * 1e6, rel=1e-6)
    assert not res.timeout.exceeded and res.timeout.advice.startswith("fits")
    est = res.extra["estimate"]
    assert est.cycles == res.cycles and res.extra["template"] == "NORMAL"
    assert np.array_equal(kc.view(np.uint16), before.view(np.uint16))


@pytest.mark.parametrize("cache_mode, head, v_head, tiling", [
    ("Norm", 48, 16, None), ("Norm", 40, 20, {"ubSize": 512}), ("PA_NZ", 48, 16, None),
    ("PA_NZ", 48, 16, {"ubSize": 256})])
def test_spkc_estimate_token_classes(cache_mode, head, v_head, tiling):
    """Token classes: copied = slots >= 0, skipped the rest; per copied token one whole-row copy per
    tensor (fully load), or loopNum chunks and a tail, aligned or padded, per tensor (tiling fields)."""
    call = token_call(tokens=900, heads=3, head=head, v_head=v_head, cache_mode=cache_mode, negative=0.3,
                      tiling=tiling, seed=3)
    res = _estimate(call)
    got = {k: v[0] for k, v in res.extra["estimate"].classes.items()}
    slots, tl = call["slot_mapping"], res.tiling
    copied = int(np.count_nonzero(slots >= 0))
    want = {"tokens_copied": copied, "tokens_skipped": slots.size - copied, "copies_whole_row": 0,
            "copies_chunk": 0, "copies_tail_aligned": 0, "copies_tail_pad": 0}
    for loops, tail in ((tl.kLoopNum, tl.kTailHandleNum), (tl.vLoopNum, tl.vTailHandleNum)):
        if tl.fullyLoad:
            want["copies_whole_row"] += copied
            continue
        want["copies_chunk"] += copied * loops
        if tail:
            want["copies_tail_pad" if tail * 2 % 32 else "copies_tail_aligned"] += copied
    assert got == want


@pytest.mark.parametrize("mode", ["Alibi", "Rope", "Omni"])
def test_spkc_estimate_compress_classes(mode):
    """Compress classes by a plain loop over (b, h) tasks, as golden.py reads the control tensors:
    tasks (K and V apart for Rope/Omni), skipped ones (slot < 0), rows written (the mean token
    included), mean tokens and window rows, copy loops of kHandleNumPerLoop rows, all for K and V."""
    call = compress_call(mode, batch=5, heads=3, head=32, seq=300, spread=0.9, window=0.2, offset=0.3, negative=0.3,
                         seed=2)
    res = _estimate(call)
    got = {k: v[0] for k, v in res.extra["estimate"].classes.items()}
    seq, wins, slots = call["seq_lens"], call["compress_lens"], call["slot_mapping"]
    offs = call.get("compress_seq_offset")
    per = res.tiling.kHandleNumPerLoop
    want = {"compress_tasks": slots.size * (1 if mode == "Alibi" else 2), "tasks_skipped": 0, "copy_loops": 0,
            "rows_written": 0, "mean_tokens": 0, "mean_rows": 0}
    for i, slot in enumerate(slots):
        if slot < 0:
            want["tasks_skipped"] += 1 if mode == "Alibi" else 2
            continue
        length, win = int(seq[i // 3]), int(wins[i])
        if mode == "Alibi":
            parts, mean = [win], 0
        else:
            off = int(offs[i])
            if off == -1 or win == 0:
                off, win = length, 0
            parts, mean = [off, length - off - win], (win if mode == "Rope" else 0)
        want["copy_loops"] += 2 * sum(-(-p // per) for p in parts)
        want["rows_written"] += 2 * (sum(parts) + (mean > 0))
        want["mean_tokens"] += 2 * (mean > 0)
        want["mean_rows"] += 2 * mean
    assert got == want


@pytest.mark.parametrize("name", ["norm_fully_600", "nz_fully_700", "alibi_b16", "rope_b8"])
def test_spkc_estimate_small_launch_is_timing(name):
    """A launch small enough to simulate whole is simulated whole: the estimate is timing mode's figure."""
    build, args = GRID[name]
    call = build(**args)
    est = _estimate(call)
    assert est.extra["estimate"].sampled_whole
    assert est.cycles == scatter_pa_kv_cache(**call, mode="timing").cycles


@pytest.mark.parametrize("name", ACCURACY)
def test_spkc_estimate_within_bound_of_timing(name):
    """Sampled estimates (miniature, fitted samples, thinned launch) within BOUND_PCT of timing mode."""
    build, args = GRID[name]
    call = build(**args)
    est = _estimate(call)
    assert not est.extra["estimate"].sampled_whole
    timing = scatter_pa_kv_cache(**call, mode="timing").cycles
    assert abs(est.cycles - timing) / timing * 100 <= BOUND_PCT


def test_spkc_estimate_timeout_advice():
    """Past the chip's timeout the estimate does not raise: it says so and advises a token split whose
    launches fit 80% of the limit (npusim.estimate.ADVICE_MARGIN)."""
    spec = get_chip(CHIP).replace(aicore_timeout_s=2e-4)
    call = token_call(tokens=60_000, chip=spec)
    res = _estimate(call)
    assert res.timeout.exceeded and res.timeout.predicted_s > 2e-4
    m = re.match(r"split tokens into chunks of at most (\d+) \((\d+) launches of <= ([\d.e-]+) s each",
                 res.timeout.advice)
    assert m, res.timeout.advice
    chunk, launches, each = int(m.group(1)), int(m.group(2)), float(m.group(3))
    assert 0 < chunk < 60_000 and launches == -(-60_000 // chunk) and each <= 0.8 * 2e-4


def test_spkc_estimate_compress_timeout_advice():
    """Compress calls are split along whole batches: the advice names them and the chunk fits."""
    spec = get_chip(CHIP).replace(aicore_timeout_s=1e-4)
    res = _estimate(compress_call("Rope", batch=32, seq=4096, window=0.02, offset=0.5, chip=spec))
    assert res.timeout.exceeded
    m = re.match(r"split batches \(the tokens of whole batches\) into chunks of at most (\d+) \((\d+) launches "
                 r"of <= ([\d.e-]+) s each", res.timeout.advice)
    assert m, res.timeout.advice
    assert 0 < int(m.group(1)) < 32 and int(m.group(2)) == -(-32 // int(m.group(1))) and float(m.group(3)) <= 8e-5


def test_spkc_estimate_huge_call():
    """4M tokens: counted in full and estimated without building the caches (speed: the benchmark)."""
    call = token_call(tokens=4_000_000, negative=0.1)
    res = _estimate(call)
    classes = res.extra["estimate"].classes
    copied = int(np.count_nonzero(call["slot_mapping"] >= 0))
    assert classes["tokens_copied"][0] == copied and classes["tokens_skipped"][0] == 4_000_000 - copied
    assert res.cycles > res.tiling.usedCoreNum  # and the advice says it fits
    assert res.timeout.advice.startswith("fits")


def test_spkc_estimate_still_validates():
    """Estimate mode validates like the others: a slot past the cache is 161002, naming slot_mapping."""
    call = token_call(tokens=100)
    call["slot_mapping"][7] = 10**6
    with pytest.raises(AclnnError) as err:
        _estimate(call)
    assert err.value.status == ACLNN_ERR_PARAM_INVALID and "slot_mapping" in err.value.message


def test_spkc_estimate_accepts_specs_and_arrays_alike():
    """Data tensors may be TensorSpecs or arrays: the same estimate (only shapes and control values count)."""
    call = token_call(tokens=2000, heads=2, head=32, negative=0.2)
    arrays = {k: (np.zeros(v.shape, v.dtype) if isinstance(v, TensorSpec) else v) for k, v in call.items()}
    assert _estimate(call).cycles == _estimate(arrays).cycles
