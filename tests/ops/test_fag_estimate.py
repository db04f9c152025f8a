"""Estimate mode of FlashAttentionUnpaddingScoreGradV5 (sampled timing runs) and `npusim predict fag`."""
import importlib
from types import SimpleNamespace

import numpy as np
import pytest

from npusim import TensorSpec
from npusim import registry
from npusim.chip import chip as get_chip
from npusim.predict import predict, report
from ops import flash_attention_unpadding_score_grad_v5 as fag
from ops.common.masks import compressed_causal_mask

estimate_module = importlib.import_module("ops.flash_attention_unpadding_score_grad_v5.estimate")


def _made_buffers(monkeypatch) -> list:
    """A list that receives every GmBuffer made from now on in this test (their resident pages are read after a run)."""
    from npusim.memory import gm
    made = []
    init = gm.GmBuffer.__init__

    def keep(self, *a, **k):
        init(self, *a, **k)
        made.append(self)
    monkeypatch.setattr(gm.GmBuffer, "__init__", keep)
    return made


def _specs(s, n, d, dtype=np.float16):
    t = lambda shape: TensorSpec(shape, dtype)  # noqa: E731
    stats = {k: TensorSpec((s, n, 8), np.float32) for k in ("softmax_max", "softmax_sum")}
    return (t((s, n, d)), None, t((s, n, d)), None, t((s, n, d)), t((s, n, d))), dict(
        attention_in=t((s, n, d)), actual_seq_qlen=[s], actual_seq_kvlen=[s], head_num=n, scale_value=0.125,
        atten_mask=compressed_causal_mask().astype(bool), sparse_mode=2, **stats)


def test_fag_estimate_close_to_timing():
    """Sections over 2 cores, both simulated whole side by side (estimate.py)."""
    args, kw = _specs(700, 2, 64)
    est = fag(*args, **kw, mode="estimate", tiling={"blockDim": 2})
    tim = fag(*args, **kw, mode="timing", tiling={"blockDim": 2})
    assert est.mode == "estimate" and est.outputs is None and est.trace is None
    assert tim.tiling.sections > 4  # > 2 rounds per core
    assert abs(est.time_us / tim.time_us - 1) < 0.05, (est.time_us, tim.time_us)
    assert not est.timeout.exceeded and est.timeout.advice == ""


def test_fag_sampled_estimate_close_to_timing(monkeypatch):
    """The sampled path (forced): 6 sections per core, two samples of 4 and 2 sections with the core's mix of
    full and diagonal sections, read off on a line at the real block count."""
    monkeypatch.setattr(estimate_module, "SIM_BLOCKS", 0)
    monkeypatch.setattr(estimate_module, "WHOLE_SHARE", 10)  # sample although the sample holds the cores whole
    args, kw = _specs(1500, 2, 64)
    est = fag(*args, **kw, mode="estimate", tiling={"blockDim": 2})
    tim = fag(*args, **kw, mode="timing", tiling={"blockDim": 2})
    assert tim.tiling.sections == 12
    assert abs(est.time_us / tim.time_us - 1) < 0.05, (est.time_us, tim.time_us)


def test_ranked_cores_span_the_load_ranking():
    """Evenly spaced ranks of the load ranking, the most loaded core first among equals."""
    work = SimpleNamespace(block_dim=6, core_sections=np.array([3, 3, 2, 2, 1, 0]),
                           core_blocks=np.array([40, 48, 30, 32, 16, 0]))
    assert estimate_module._ranked(work, 2) == [1, 3]  # ranks 0 and 2 of (1, 0, 3, 2, 4)
    assert sorted(estimate_module._ranked(work, 9)) == [0, 1, 2, 3, 4]  # busy cores only


def test_fag_timeout_verdict_with_advice():
    args, kw = _specs(512, 2, 64)
    res = fag(*args, **kw, mode="estimate", chip=get_chip("Ascend910B2").replace(aicore_timeout_s=1e-6))
    assert res.timeout.exceeded and "split" in res.timeout.advice


def test_fag_registered_and_predicted():
    assert "fag" in registry.operators(refresh=True)
    res = predict("fag", ["T=512", "N=2", "D=64", "sparse_mode=causal"])
    assert res.mode == "estimate" and res.cycles > 0
    assert "blocks" in report(res)


@pytest.mark.parametrize("value", ["fp16", "bf16"])
def test_fag_registry_dtypes(value):
    entry = registry.get("fag")
    res = entry.call(entry.parse(["T=256", "N=1", "D=32", f"dtype={value}", "deterministic=1"]), mode="estimate")
    assert res.cycles > 0 and res.tiling.deterministic


@pytest.mark.parametrize("extra", [
    dict(pse_type=3, pse_shift=TensorSpec((2,), np.float32)),
    dict(keep_prob=0.8, drop_mask=TensorSpec((700 * 700 * 2 // 8,), np.uint8), sparse_mode=0, atten_mask=None),
    dict(pse_type=0, pse_shift=TensorSpec((1, 2, 1024, 700), np.float16))])
def test_fag_estimate_close_to_timing_with_features(extra):
    """pse (inner slopes, alibi-compressed) and dropout run in the estimate's one-core sample as in the launch."""
    args, kw = _specs(700, 2, 64)
    kw = {**kw, **extra}
    est = fag(*args, **kw, mode="estimate", tiling={"blockDim": 2})
    tim = fag(*args, **kw, mode="timing", tiling={"blockDim": 2})
    assert tim.tiling.sections > 4
    assert abs(est.time_us / tim.time_us - 1) < 0.05, (est.time_us, tim.time_us)


def test_fag_generic_estimate_samples_each_aivs_own_run():
    """Generic template: the sample tiling gives each sampled CV block to the AIV whose run holds it
    (sab_work.core_aiv_split), so a call whose cores run whole is estimated at its timing-mode time; with the two
    AIVs sharing every CV block by rows (no secAivSplit) this call runs about 17% faster."""
    from tests.ops.fag_cases import make_case
    a, _ = make_case(seq_q=[150], seq_kv=[1100], n1=1, n2=1, d=64, dropout=0.9)
    est = fag(**a, mode="estimate", tiling={"blockDim": 2})
    tim = fag(**a, mode="timing", tiling={"blockDim": 2})
    assert tim.tiling.template == "generic" and tim.tiling.secAivSplit == (1, 3)
    assert abs(est.time_us / tim.time_us - 1) < 0.005, (est.time_us, tim.time_us)


def _bn2_band_call():
    """A basic_bn2 call (deterministic, [N, T, 8] statistics, fp16 under 1024 tokens) with a band mask: its CV
    blocks are full, band-edge and corner ones of very different costs per block."""
    from tests.ops.fag_cases import make_case
    a, _ = make_case(seq_q=[900, 700], seq_kv=[900, 700], n1=8, n2=2, d=64, sparse_mode=4, causal=True, pre=300,
                     nxt=100, layout="")
    return a


def test_fag_bn2_ring_follows_the_kernel():
    """The ring recurrence (_ring_end) over each core's own (Cube1, vector pass, Cube23) costs, read off its flags
    (_ring_costs), ends where the core's cube ends in timing mode."""
    tim = fag(**_bn2_band_call(), deterministic=True, mode="timing", tiling={"blockDim": 2})
    assert tim.tiling.template == "basic_bn2"
    trace = tim.extra["launches"]["main"].trace
    c = trace.columns
    til = tim.tiling
    costs = estimate_module._ring_costs(trace, til, til.blockDim)
    for core, rows in enumerate(costs):
        steps = [[(s - til.secCoreStart[core], v) for s, _, v in step] for step in til.core_steps(core)]
        assert len(rows) == len(til.core_sections(core)) > 8
        sync = (c["core"] == core) & (c["name_id"] == trace.names.index("SyncAll"))
        cube_end = c["end"][(c["core"] == core) & (c["sub_core"] == 0)].max()
        ring = estimate_module._ring_end(steps, rows, float(c["end"][sync].max()),
                                         get_chip("Ascend910B2").cross_core_flag_latency_cycles)
        assert abs(ring / cube_end - 1) < 0.01, (core, ring, cube_end)


def test_fag_bn2_band_sampled_estimate_follows_the_ring(monkeypatch):
    """Sampled basic_bn2 (forced): each CV block priced by its class's sampled ring costs and the core's ring run
    over its own CV blocks (estimate.RING_TEMPLATES). The two runs' cost per block (RING_TEMPLATES empty) came out
    15% over on this call: the band's edge and corner CV blocks cost differently per block."""
    monkeypatch.setattr(estimate_module, "SIM_BLOCKS", 0)
    a = _bn2_band_call()
    tim = fag(**a, deterministic=True, mode="timing", tiling={"blockDim": 2})
    est = fag(**a, deterministic=True, mode="estimate", tiling={"blockDim": 2})
    assert estimate_module.main_path(*estimate_module.estimate_plan(
        tim.extra["problem"], get_chip("Ascend910B2"), {"blockDim": 2}, True)) == "sampled"
    assert abs(est.time_us / tim.time_us - 1) < 0.03, (est.time_us, tim.time_us)


@pytest.mark.parametrize("s, n, d, dtype", [(600, 4, 64, np.float16), (300, 16, 128, np.float16),
                                             (700, 16, 128, np.float32), (900, 4, 64, np.float32)])
def test_touched_inputs_are_the_pages_timing_mode_touches(monkeypatch, s, n, d, dtype):
    """The samples' L2 start counts query/key/value by the pages the launch's strided per-head copies touch in the
    model (estimate._touched_inputs), not by their sizes: the same bytes as a timing-mode run's resident pages. fp32:
    query and key also by the vector transposes' per-head copies (counted whole they were 3-6 times too many)."""
    from npusim.memory import gm
    made = _made_buffers(monkeypatch)
    args, kw = _specs(s, n, d, dtype)
    res = fag(*args, **kw, mode="timing")
    names = ("query", "key_in", "value")
    resident = sum(int(b.resident.sum()) * gm.L2_PAGE_BYTES for b in made if b.name in names)
    problem = res.extra["problem"]
    sizes = {k: int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize
             for k, v in estimate_module._spec_inputs(problem).items() if k in names}
    assert estimate_module._touched_inputs(problem, sizes) == resident
    assert resident < sum(sizes.values())  # strided copies: fewer pages than the tensors hold


def test_fag_dtm_estimate_runs_the_launchs_idle_cores():
    """basic_det with fewer 512 x 512 tasks (16) than AI Cores (24): every round's reduction is split over all the
    launch's AIVs, the idle cores' too, so the whole-launch sample runs every core (estimate._rounds_cycles). On the
    16 busy cores alone dk and dv shared AIVs and the main launch came out 21% slow."""
    from tests.ops.fag_cases import make_case
    a, _ = make_case(seq_q=[270], seq_kv=[270], n1=16, n2=8, d=128, dtype="bf16", sparse_mode=3, causal=True)
    tim = fag(**a, deterministic=True, mode="timing")
    est = fag(**a, deterministic=True, mode="estimate")
    assert tim.tiling.template == "basic_det" and tim.tiling.sections < tim.tiling.blockDim
    assert abs(est.time_us / tim.time_us - 1) < 0.01, (est.time_us, tim.time_us)


def test_generic_sample_takes_each_aivs_run_in_proportion():
    """Generic template: a sampled core's CV blocks are drawn from each AIV's run (sab_work.core_aiv_split) in
    proportion to the run's length, each from inside its run, so both AIVs of a sampled core work as in the launch."""
    from tests.ops.fag_cases import make_case
    _, problem = make_case(seq_q=[259, 3288], seq_kv=[259, 3288], n1=16, n2=8, d=128, dtype="fp32", sparse_mode=2,
                           causal=True)
    spec = get_chip("Ascend910B2")
    til, work = estimate_module.estimate_plan(problem, spec, {"blockDim": 15}, True)
    assert til.template == "generic" and work.core_aiv_split is not None
    for core in range(work.block_dim):
        runs = estimate_module.aiv_runs(work, core)
        n = runs[-1][1]
        picked = estimate_module._core_positions(work, core, 17)
        assert sum(map(len, picked)) == min(17, n)
        for (lo, hi), got in zip(runs, picked):
            local = [(g - core) // work.block_dim for g in got]
            assert all(lo <= j < hi for j in local) and local == sorted(local)
            assert abs(len(got) - 17 * (hi - lo) / n) <= 1, (core, runs, [len(p) for p in picked])


def test_step_marks_follow_the_cubes_sections():
    """_step_marks reads one mark per ring step off the cube's SetAtomicNone: increasing, the last at most the
    core's end, the blocks through each step adding up to the core's blocks."""
    args, kw = _specs(1500, 2, 64)
    tim = fag(*args, **kw, mode="timing", tiling={"blockDim": 2})
    til, trace = tim.tiling, tim.extra["launches"]["main"].trace
    marks = estimate_module._step_marks(trace, til, til.blockDim)
    c = trace.columns
    for core, (t, w) in enumerate(marks):
        secs = til.core_sections(core)
        assert len(t) == len(secs) > 4 and np.all(np.diff(t) > 0)
        assert t[-1] <= c["end"][c["core"] == core].max()
        assert w[-1] == sum(til.secStart[g + 1] - til.secStart[g] for g in secs)


def test_steady_cost_leaves_out_the_rings_start_and_end():
    """The pooled cost per block between the MARK_HEAD-th and the last but MARK_TAIL step: a dear start and a
    cheap last step do not enter it; cores weigh by the blocks they are extended over."""
    w = np.arange(1, 9) * 16.0  # 16 blocks a step
    # 100 cycles a block once the ring runs; its first two steps dearer, its last step (a Cube23 alone) cheaper
    t = 50000.0 + np.cumsum([3000.0, 2500.0] + [1600.0] * 5 + [600.0])
    u = 50000.0 + np.cumsum([3000.0, 2500.0] + [2400.0] * 5 + [600.0])  # another core at 150 a block
    assert estimate_module._steady_cost([(t, w), (u, w)], np.array([1.0, 0.0])) == pytest.approx((0.0, 100.0))
    assert estimate_module._steady_cost([(t, w), (u, w)], np.array([1.0, 1.0])) == pytest.approx((0.0, 125.0))
    assert estimate_module._steady_cost([(t, w), None], np.array([1.0, 1.0])) is None


def test_steady_cost_is_a_line_over_the_steps_blocks():
    """Steps of different blocks: the steady cost is (cycles per step, cycles per block) of the line through them, so a
    window with more small steps than the core's mix does not charge their dearer rate per block to every block."""
    blocks = np.array([16.0, 16.0, 4.0, 16.0, 1.0, 16.0, 4.0, 16.0])
    w = np.cumsum(blocks)
    step = 30000.0 + 5000.0 * blocks  # 30k a step and 5k a block once the ring runs
    t = 50000.0 + np.cumsum(np.concatenate(([90000.0, 80000.0], step[2:-1], [20000.0])))
    per_step, per_block = estimate_module._steady_cost([(t, w)], np.array([1.0]))
    assert per_step == pytest.approx(30000.0) and per_block == pytest.approx(5000.0)


def test_class_fit_prices_unsampled_classes_by_size_and_mask():
    """A section class no sample holds is priced on the line over size and masked blocks fitted to the sampled ones
    (estimate._class_fit): affine costs are recovered exactly; with one sampled class, in proportion to size."""
    def cost(key):  # (Cube1, vector pass, Cube23) affine in the area (fractals) and the masked blocks
        return np.array([1000 + 30 * key[2], 4500 + 225 * key[2] + 1400 * key[1], 2000 + 80 * key[2]], float)
    seen = [(2, 1, 128), (2, 2, 128), (8, 0, 512), (8, 0, 512)]
    fit = estimate_module._class_fit(np.array(seen, float), np.array([cost(k) for k in seen]))
    for unseen in [(4, 1, 256), (6, 2, 384), (4, 0, 52)]:
        np.testing.assert_allclose(fit(unseen), cost(unseen), rtol=1e-9)
    one = estimate_module._class_fit(np.array([(8, 0, 0)], float), np.array([[800.0, 1600.0, 3200.0]]))
    np.testing.assert_allclose(one((4, 0, 0)), [400.0, 800.0, 1600.0])  # listed area 0: 64 fractals per block


def test_ring_sample_holds_every_class_at_its_strata_middles():
    """A ring template's sampled core (fine) takes every class of its sections once at least (RING_COVER) and each
    class's members at the middles of equal strata, not at the class's first and last members (class changes,
    where a section's cost differs); the other templates keep the evenly spaced picks from first to last."""
    blocks = np.array([8] * 10 + [4] * 2 + [8] * 10 + [4] * 2 + [8] * 10 + [4] * 2 + [8] * 4)
    work = SimpleNamespace(block_dim=1, counts_many=lambda gs: (blocks[gs], np.zeros(len(gs), np.int64)))
    fine = estimate_module._run_positions(work, 0, 0, len(blocks), 2, True)
    assert any(blocks[g] == 4 for g in fine)  # the rare class, 6 of 40 sections: 0.3 of a share of 2
    full = [g for g in fine if blocks[g] == 8]
    members = np.flatnonzero(blocks == 8)
    assert members[0] not in full and members[-1] not in full
    coarse = estimate_module._run_positions(work, 0, 0, len(blocks), 2, False)
    assert members[0] in coarse and members[-1] in coarse


def test_section_sizes_are_the_area_listed_cv_blocks_cover():
    """A sampled core's steps are sized by the fractals their CV blocks cover (_section_sizes) and each core is
    extended over the size it has left (_core_sizes): on a generic call with short key batches (partial blocks),
    a sample of all of a core's CV blocks sizes them as _core_sizes does, below 64 per block; counted sections
    (basic) stay at 64 per block."""
    from tests.ops.fag_cases import make_case
    _, problem = make_case(seq_q=[328, 972], seq_kv=[434, 200], n1=4, n2=2, d=256, dtype="fp16")
    spec = get_chip("Ascend910B2")
    til, work = estimate_module.estimate_plan(problem, spec, None, False)
    assert hasattr(work, "listed")
    cores = [c for c in range(work.block_dim) if work.core_sections[c]][:3]
    positions = {c: sum(estimate_module._core_positions(work, c, None), []) for c in cores}
    sample, simulated = estimate_module._sample_tiling(problem, til, work, cores, positions)
    sizes = estimate_module._section_sizes(sample, True)
    per_core = [sum(sizes[s] for s in sample.core_sections(i)) for i in range(len(cores))]
    np.testing.assert_allclose(per_core, estimate_module._core_sizes(work, cores))
    assert all(size < 64 * blocks for size, blocks in zip(per_core, simulated))  # partial blocks cover less
    np.testing.assert_allclose(estimate_module._section_sizes(sample, False), 64 * np.diff(sample.secStart))
    counted = SimpleNamespace(core_blocks=np.array([3, 5]))
    np.testing.assert_allclose(estimate_module._core_sizes(counted, [1, 0]), [320.0, 192.0])


def test_samples_of_k_of_n_cores_book_bandwidth_in_buckets_n_over_k_longer(monkeypatch):
    """Each sampled core stands for busy / k cores at that share of the bandwidth; its launch's calendars take
    buckets that many times BUCKET_CYCLES (estimate._sample_bucket), and the default where every busy core runs."""
    from npusim.memory.bandwidth import BUCKET_CYCLES
    seen = []
    real = estimate_module.launch_main

    def spy(problem, til, spec, mode, inputs, ws, l2_warm=None, bw_bucket_cycles=None):
        seen.append((til.blockDim, bw_bucket_cycles))
        return real(problem, til, spec, mode, inputs, ws, l2_warm=l2_warm, bw_bucket_cycles=bw_bucket_cycles)
    monkeypatch.setattr(estimate_module, "launch_main", spy)
    monkeypatch.setattr(estimate_module, "COMPANIONS", 2)
    args, kw = _specs(1500, 2, 64)
    fag(*args, **kw, mode="estimate", tiling={"blockDim": 6})
    assert seen == [(2, BUCKET_CYCLES * 3)]  # 2 of 6 busy cores, whole
    seen.clear()
    fag(*args, **kw, mode="estimate", tiling={"blockDim": 2})
    assert seen == [(2, BUCKET_CYCLES)]
    assert estimate_module._sample_bucket(23 / 12) == round(BUCKET_CYCLES * 23 / 12)


def test_launch_bucket_width_is_the_calendars():
    """npusim.launch.launch's bw_bucket_cycles: None and BUCKET_CYCLES give the same run; on a chip whose bandwidth
    the cores' transfers exceed, a longer bucket changes how their bursts share it."""
    from npusim.memory.bandwidth import BUCKET_CYCLES
    from ops.flash_attention_unpadding_score_grad_v5.launch import launch_main
    from ops.flash_attention_unpadding_score_grad_v5.estimate import _spec_inputs, _ws
    args, kw = _specs(700, 2, 64)
    tim = fag(*args, **kw, mode="timing", tiling={"blockDim": 4})
    problem, til = tim.extra["problem"], tim.tiling
    slow = get_chip("Ascend910B2").replace(hbm_bw_bytes_per_s=2e10, l2_bw_bytes_per_s=6e10)
    run = lambda bucket: launch_main(problem, til, slow, "timing", _spec_inputs(problem), _ws(til),  # noqa: E731
                                     bw_bucket_cycles=bucket).cycles
    base = run(None)
    assert run(BUCKET_CYCLES) == base
    assert run(16 * BUCKET_CYCLES) != base


def test_class_fit_prices_the_cubes_part_per_block():
    """The cube's costs of a CV block have a part per 128 x 128 block besides its area (short-row CV blocks keep
    their blocks at a fraction of the area): with four sampled classes that tell the columns apart, costs affine in
    area, masked blocks and blocks are recovered exactly for classes no sample holds (_class_fit)."""
    def cost(key):  # (Cube1, vector pass, Cube23)
        return np.array([1000 + 20 * key[2] + 900 * key[0], 4500 + 225 * key[2] + 1400 * key[1],
                         200 + 56 * key[2] + 1650 * key[0]], float)
    seen = [(8, 0, 512), (2, 2, 128), (2, 1, 128), (4, 1, 145)]
    fit = estimate_module._class_fit(np.array(seen, float), np.array([cost(k) for k in seen]))
    for unseen in [(8, 0, 320), (4, 2, 232), (6, 1, 384)]:
        np.testing.assert_allclose(fit(unseen), cost(unseen), rtol=1e-9)


def test_cores_run_whole_where_the_sample_would_hold_most_of_them(monkeypatch):
    """Past SIM_BLOCKS, a sample that would hold WHOLE_SHARE of the most loaded core's sections or more is not
    extrapolated: the sampled cores run all their sections in one launch (12 sections on 2 cores, 6 each, where
    the sample takes BASIC_SAMPLE_SECTIONS = 8)."""
    seen = []
    real = estimate_module.launch_main

    def spy(problem, til, spec, mode, inputs, ws, l2_warm=None, bw_bucket_cycles=None):
        seen.append((til.blockDim, til.sections))
        return real(problem, til, spec, mode, inputs, ws, l2_warm=l2_warm, bw_bucket_cycles=bw_bucket_cycles)
    monkeypatch.setattr(estimate_module, "launch_main", spy)
    monkeypatch.setattr(estimate_module, "SIM_BLOCKS", 0)
    args, kw = _specs(1500, 2, 64)
    est = fag(*args, **kw, mode="estimate", tiling={"blockDim": 2})
    assert seen == [(2, 12)]
    tim = fag(*args, **kw, mode="timing", tiling={"blockDim": 2})
    assert abs(est.time_us / tim.time_us - 1) < 0.005, (est.time_us, tim.time_us)
    plan = estimate_module.estimate_plan(tim.extra["problem"], get_chip("Ascend910B2"), {"blockDim": 2}, False)
    assert estimate_module.main_path(*plan) == "whole"  # the accuracy benchmark's strata see it as whole
    monkeypatch.setattr(estimate_module, "WHOLE_SHARE", 10)
    assert estimate_module.main_path(*plan) == "sampled"


def _det_multibatch_call():
    """basic_det over two batches of different shapes (12- and 16-block 512 x 512 tasks) on 4 cores: 10 rounds whose
    reductions differ by the strips several cores wrote."""
    from tests.ops.fag_cases import make_case
    a, _ = make_case(seq_q=[1024, 512], seq_kv=[300, 1500], n1=8, n2=2, d=64, dtype="fp16")
    return a


def test_dtm_sampled_estimate_prices_rounds_close_to_timing(monkeypatch):
    """The IS_DTM / basic_det sampled path (forced: DTM_BLOCKS of 5 rounds): one sample run of evenly spaced rounds
    with rounds 0, 1 and the last two, priced round by round (_priced_rounds), within 2% of timing mode."""
    a = _det_multibatch_call()
    tim = fag(**a, deterministic=True, mode="timing", tiling={"blockDim": 4})
    monkeypatch.setattr(estimate_module, "DTM_BLOCKS", 300)
    runs = []
    real_run = estimate_module._round_cores
    monkeypatch.setattr(estimate_module, "_round_cores", lambda work, rounds: runs.append(list(rounds)) or
                        real_run(work, rounds))
    est = fag(**a, deterministic=True, mode="estimate", tiling={"blockDim": 4})
    total = -(-tim.tiling.sections // tim.tiling.blockDim)
    assert tim.tiling.template == "basic_det" and total == 10
    assert runs[0] == [0, 1, 2, 4, 7, 8, 9]  # the sample run (then the prologue's short run, the groups' tiling)
    assert abs(est.time_us / tim.time_us - 1) < 0.02, (est.time_us, tim.time_us)


def test_reduce_ops_follow_the_launchs_reductions():
    """_reduce_ops counts each round's busiest reducing AIV's copies from the kernel's own reduction groups: on a
    timing launch the rounds' reductions (between the two SyncAll of a round) lie on a line over those counts,
    which differ between the rounds (not by their blocks: the same blocks reduce in fewer copies where fewer cores
    share a strip)."""
    from ops.flash_attention_unpadding_score_grad_v5.estimate import estimate_plan
    a = _det_multibatch_call()
    tim = fag(**a, deterministic=True, mode="timing", tiling={"blockDim": 4})
    stamps = np.array(estimate_module._sync_stamps(tim.extra["launches"]["main"].trace))
    reduce = stamps[2::2] - stamps[1::2]
    problem = tim.extra["problem"]
    til, work = estimate_plan(problem, get_chip("Ascend910B2"), {"blockDim": 4}, True)
    ops = estimate_module._reduce_ops(problem, til, work)
    assert len(ops) == len(reduce) == 10 and len(set(ops.tolist())) > 1
    line = estimate_module._ops_line(ops, reduce)
    np.testing.assert_allclose(line(ops), reduce, rtol=0.03)


def test_priced_rounds_prices_periods_and_reductions_apart():
    """A launch whose periods follow the two rounds' blocks and whose reductions follow the copies (not the blocks):
    from the stamps of a sample of its rounds, _priced_rounds gives the launch's cycles from its first SyncAll to its
    last exactly (a single line over the rounds' blocks cannot: the copies here halve where the blocks do not)."""
    blocks = np.array([40, 40, 48, 48, 36, 40, 48, 44, 40, 20], float)
    ops = np.array([30, 30, 60, 60, 30, 30, 60, 60, 30, 10], float)
    total = len(blocks)
    fill, last = 90_000.0, 50_000.0

    def period(a, b):  # the vector pass of round b beside the Cube23 of round a
        return 3_000.0 + 800.0 * (blocks[a] + blocks[b])

    launch = list(range(total))
    body = fill + sum(period(j - 1, j) for j in range(2, total)) + last + sum(4_000.0 + 300.0 * ops)
    sample = [0, 1, 3, 6, 8, 9]

    def sample_stamps(rounds):  # 1 + 2 K stamps: prologue, then per sample period its end and its reduction's end
        out, t = [20_000.0], 20_000.0
        for i in range(len(rounds)):
            t += fill if i == 0 else (last if i == len(rounds) - 1 else period(rounds[i], rounds[i + 1]))
            out.append(t)
            t += 4_000.0 + 300.0 * ops[rounds[i]]
            out.append(t)
        return np.array(out)
    got = estimate_module._priced_rounds(sample_stamps(sample), sample, blocks, ops)
    assert got == pytest.approx(body, rel=1e-9)
    assert sample_stamps(launch)[-1] - sample_stamps(launch)[0] == pytest.approx(body, rel=1e-12)


def _sab_dtm_call():
    """SameAB IS_DTM over two batches (1024 and 600 tokens, D 192) on 4 cores: 8 rounds."""
    from tests.ops.fag_cases import make_case
    a, _ = make_case(seq_q=[1024, 600], seq_kv=[1024, 600], n1=4, n2=2, d=192, dtype="fp16")
    return a


def test_ring_replayed_on_a_launchs_own_section_costs_ends_where_the_launch_ends():
    """dtm_rounds reads each section's Cube1, Cube23 and vector pass off a SameAB IS_DTM launch's cross-core flags;
    the ring re-run on those costs and the launch's reductions puts every round's two SyncAll within 2% of the
    launch's body of where the launch has them (the model the estimate prices unsampled rounds with)."""
    rounds_module = importlib.import_module("ops.flash_attention_unpadding_score_grad_v5.dtm_rounds")
    tim = fag(**_sab_dtm_call(), deterministic=True, mode="timing", tiling={"blockDim": 4})
    assert tim.tiling.sabDtm and not tim.tiling.dtmBasic
    stamps = np.array(estimate_module._sync_stamps(tim.extra["launches"]["main"].trace))
    sections = tim.tiling.sections
    tasks = [len(range(c, sections, 4)) for c in range(4)]
    c1, c23, vec, done, vdone = rounds_module.section_costs(tim.extra["launches"]["main"].trace, 4, tasks)
    assert c1.shape == (4, 8) and np.all(c1 > 0) and np.all(c23 > 0) and np.all(vec > 0)
    cube_gap, vec_gap = rounds_module.sync_gaps(stamps, done, vdone)
    replayed = rounds_module.replay_rounds(c1, c23, vec, stamps[2::2] - stamps[1::2], stamps[0], cube_gap, vec_gap)
    body = stamps[-1] - stamps[0]
    assert len(replayed) == len(stamps) - 1
    assert np.max(np.abs(replayed - stamps[1:])) < 0.02 * body, (replayed - stamps[1:])


def test_replay_rounds_runs_the_kernels_ring():
    """One core, three rounds, cube-bound: a Cube23 waits for the next Cube1 and its vector pass, a round's first
    SyncAll for the last Cube23 (+ the cube gap) or the last pass (+ the vector gap), its second for the reduction;
    so a cube-bound period is the cube's work (Cube1 + Cube23) less the reduction before it (216 - 176 = 60 - 20)."""
    rounds_module = importlib.import_module("ops.flash_attention_unpadding_score_grad_v5.dtm_rounds")
    ones = np.ones((1, 3))
    stamps = rounds_module.replay_rounds(10 * ones, 50 * ones, 5 * ones, np.full(3, 20.0), 100.0, 1.0, 2.0)
    np.testing.assert_array_equal(stamps, [156, 176, 216, 236, 266, 286])


def test_launch_costs_keep_sampled_sections_and_price_the_rest_by_class():
    """A sampled section keeps its own cost; the sample's first HEAD tasks and its last stand for those launch rounds
    only; an unsampled section takes the mean of the other sampled sections of its class in rounds of its round's
    class, else of its class, else the plane over the sampled sections' keys."""
    rounds_module = importlib.import_module("ops.flash_attention_unpadding_score_grad_v5.dtm_rounds")
    bd, total = 2, 8
    keys = np.array([[16.0, 0.0]] * (bd * total))
    keys[12] = [8.0, 0.0]  # round 6, core 0: a class no later sampled task holds, priced on the plane
    classes = np.zeros(total, int)
    classes[5:] = 1
    rounds = [0, 1, 2, 4, 5, 7]  # 4 and 5 pooled; 0-2 and 7 phase-bound
    measured = np.array([[70.0, 71, 72, 40, 60, 30], [80.0, 81, 82, 44, 64, 34]])
    out = rounds_module.launch_costs(keys, classes, bd, rounds, measured)
    np.testing.assert_array_equal(out[:, :3], measured[:, :3])
    np.testing.assert_array_equal(out[:, 4], [40, 44])
    np.testing.assert_array_equal(out[:, 7], [30, 34])
    np.testing.assert_array_equal(out[:, 3], [42, 42])  # class 0 rounds: round 4's two sections
    np.testing.assert_array_equal(out[1, 6], 62)  # class 1 rounds: round 5's two sections
    assert out[0, 6] == 52.0  # key (8, 0) unseen: the plane over the sampled keys, all (16, 0): their mean


def test_key_ids_number_rows_as_unique_rows_does():
    """dtm_rounds.key_ids gives the ids np.unique(axis=0) gives, through one number per row for whole (area, masked)
    rows and through the rows otherwise."""
    rounds_module = importlib.import_module("ops.flash_attention_unpadding_score_grad_v5.dtm_rounds")
    rng = np.random.default_rng(7)
    whole = rng.integers(0, 40, size=(500, 2)).astype(float)
    for keys in (whole, whole + 0.5, np.column_stack([whole, whole[:, :1]])):
        np.testing.assert_array_equal(rounds_module.key_ids(keys),
                                      np.unique(keys, axis=0, return_inverse=True)[1].ravel())


def test_dtm_sampled_estimate_replays_the_rounds_close_to_timing(monkeypatch):
    """SameAB IS_DTM sampled (forced: 5 of 8 rounds, the first three, the last two): the rounds re-run from the
    sample's section costs (_replayed_body, not _priced_rounds) come within 2% of timing mode."""
    a = _sab_dtm_call()
    tim = fag(**a, deterministic=True, mode="timing", tiling={"blockDim": 4})
    monkeypatch.setattr(estimate_module, "DTM_BLOCKS", 1)
    monkeypatch.setattr(estimate_module, "REPLAY_BLOCKS", 1)
    runs, priced = [], []
    real_run, real_priced = estimate_module._round_cores, estimate_module._priced_rounds
    monkeypatch.setattr(estimate_module, "_round_cores", lambda work, rounds: runs.append(list(rounds)) or
                        real_run(work, rounds))
    monkeypatch.setattr(estimate_module, "_priced_rounds", lambda *x: priced.append(x) or real_priced(*x))
    est = fag(**a, deterministic=True, mode="estimate", tiling={"blockDim": 4})
    assert runs[0] == [0, 1, 2, 6, 7] and not priced
    assert abs(est.time_us / tim.time_us - 1) < 0.02, (est.time_us, tim.time_us)


def test_period_line_prices_a_falling_line_at_the_periods_mean():
    """The middle periods' line over the two rounds' blocks is kept where it rises (or is flat), and where it falls
    every period is priced at the sampled periods' mean, also through _priced_rounds: a falling line extrapolated
    past the sampled pairs priced the launch's periods low (SameAB IS_DTM S 614/279/2636: -4.45%)."""
    pair = np.array([400.0, 450.0, 500.0, 550.0])
    rising = np.array([100_000.0, 104_000.0, 108_000.0, 112_000.0])
    falling = np.array([130_000.0, 120_000.0, 128_000.0, 100_000.0])
    launch_pairs = np.array([500.0, 600.0, 700.0])
    kept = estimate_module._period_line(pair, rising)(launch_pairs)
    np.testing.assert_allclose(kept, estimate_module._ops_line(pair, rising)(launch_pairs), rtol=1e-12)
    np.testing.assert_allclose(kept, [108_000.0, 116_000.0, 124_000.0], rtol=1e-9)
    np.testing.assert_allclose(estimate_module._period_line(pair, falling)(launch_pairs), [119_500.0] * 3, rtol=1e-12)
    # _priced_rounds: rounds 0, 1, 3, 5, 7, 8 of 9 sampled; the four middle periods fall with their pairs' blocks
    blocks = np.array([200.0, 200.0, 250.0, 250.0, 300.0, 300.0, 350.0, 350.0, 400.0])  # pairs 450 .. 750
    sample = [0, 1, 3, 5, 7, 8]
    stamps, t = [10_000.0], 10_000.0
    for i, p in enumerate([90_000.0, *falling, 50_000.0]):
        t += p
        stamps.append(t)
        t += 20_000.0
        stamps.append(t)
    body = estimate_module._priced_rounds(np.array(stamps), sample, blocks, np.full(9, 40.0))
    assert body == pytest.approx(90_000.0 + 50_000.0 + 7 * 119_500.0 + 9 * 20_000.0, rel=1e-12)


def test_sample_rounds_hold_the_fill_and_the_last_rounds():
    """An IS_DTM sample holds rounds 0 and 1, the last two and evenly spaced ones within DTM_BLOCKS; all rounds when
    the launch fits."""
    sections, bd = 100, 4
    blocks = np.full(sections, 16)
    work = SimpleNamespace(block_dim=bd, sections=sections, blocks=int(blocks.sum()),
                           counts_many=lambda gs: (blocks[gs], np.zeros(len(gs), np.int64)))
    total = 25
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(estimate_module, "DTM_BLOCKS", 64 * 6)
        rounds = estimate_module._sample_rounds(work)
        assert {0, 1, total - 2, total - 1} <= set(rounds) and len(rounds) < total
        assert rounds == sorted(set(rounds)) and len(rounds) <= 6 + 4
        mp.setattr(estimate_module, "DTM_BLOCKS", 64 * total)
        assert estimate_module._sample_rounds(work) == list(range(total))


def test_dtm_sample_runs_the_whole_prologue_where_it_runs_most_of_it(monkeypatch):
    """Where the IS_DTM sample would run DTM_WHOLE_PROLOGUE of the prologue or more it runs all of it, in its one
    run; below, it runs that share, and the prologue's line goes through the first half of it read off the same run
    (_half_prologue: no second run)."""
    a = _det_multibatch_call()
    monkeypatch.setattr(estimate_module, "DTM_BLOCKS", 300)
    fractions, runs = [], []
    real_run = estimate_module._round_cores
    monkeypatch.setattr(estimate_module, "_round_cores", lambda work, rounds: runs.append(list(rounds)) or
                        real_run(work, rounds))
    real_plan = estimate_module._sample_tiling
    monkeypatch.setattr(estimate_module, "_sample_tiling", lambda *x, **k: fractions.append(x[5] if len(x) > 5 else
                                                                                             1.0) or real_plan(*x, **k))
    for f, launches in ((0.8, 1), (0.6, 1)):
        fractions.clear()
        runs.clear()
        monkeypatch.setattr(estimate_module, "_prologue_fraction", lambda problem, til, f=f: f)
        fag(**a, deterministic=True, mode="estimate", tiling={"blockDim": 4})
        sampled = fractions[:launches]  # the sample launches' prologue shares (then the groups' tiling, 1.0)
        assert sampled == ([1.0] if f >= estimate_module.DTM_WHOLE_PROLOGUE else [f]), fractions
        assert fractions[launches:] == [1.0]  # the reduction groups' tiling (_reduce_ops), not a launch


def _one_run_work(sizes):
    """A one-core generic-like work whose sections (one AIV run, one ring step each) cover *sizes* fractals."""
    return SimpleNamespace(block_dim=1, core_sections=np.array([len(sizes)]),
                           listed=[[(0, 0, 0, 0, 16 * int(s), 16)] for s in sizes])


def _ring_cycles(sizes, head=90000.0, tail=9000.0):
    """Synthetic ring-step cycles: a repeat (the size of the step before) 5k + 70 a fractal, a class change 10k more
    (its interval holds the ring's refill); a dear first step and a cheap last one."""
    sizes = np.asarray(sizes, float)
    step = 5000.0 + 70.0 * sizes + np.r_[0.0, np.where(sizes[1:] == sizes[:-1], 0.0, 10000.0)]
    step[0], step[-1] = head, tail
    return step


def test_step_extension_prices_repeats_apart_from_class_changes():
    """A core whose launch runs long stretches of equal steps and the sample holds its class changes with few of its
    repeats: the extension prices the extended repeats on the window repeats' line, so it is exact here, where the
    steady line over all the window's steps (the old extension, per step and per fractal left) charges each repeat
    part of the class changes' refill."""
    launch = [664] * 8 + [1024] * 8 + [664] * 8
    sample = [664] * 3 + [1024] * 3 + [664] * 3  # the launch's two class changes, 6 of its 21 repeats
    t, w = 50000.0 + np.cumsum(_ring_cycles(sample)), np.cumsum(sample).astype(float)
    left = np.array([float(sum(launch) - sum(sample))])
    steady = estimate_module._steady_cost([(t, w)], left)
    real = float(_ring_cycles(launch)[1:-1].sum() - _ring_cycles(sample)[1:-1].sum())  # same head and tail
    grown = estimate_module._step_extension(_one_run_work(launch), [0], [(t, w)], steady, left)
    assert grown[0] == pytest.approx(real, rel=1e-9)
    old = steady[0] * (len(launch) - len(sample)) + steady[1] * left[0]
    assert old > 1.05 * real  # the old extension, which the repeats' pricing replaces, is off by more than 5%


def test_step_pricer_falls_back_to_the_steady_line_without_two_repeat_sizes():
    """Where the window's repeats hold one size only, repeats and class changes are both priced on the steady line."""
    sample = [664, 664, 1024, 664, 1024, 664, 664, 1024]
    t, w = np.cumsum(_ring_cycles(sample)), np.cumsum(sample).astype(float)
    steady = estimate_module._steady_cost([(t, w)], np.array([1.0]))
    price = estimate_module._step_pricer([(t, w)], steady, np.array([1.0]))
    sizes = [664, 664, 664, 1024, 1024]
    assert price(sizes) == pytest.approx(sum(steady[0] + steady[1] * s for s in sizes[1:]))


def _context_ring_cycles(sizes, head=90000.0):
    """Synthetic SameAB ring-step cycles: 6k + 80 a fractal of the step's own size (its Cube23) + 30 of the next
    step's (its Cube1; the last step's own size stands in) + 40 of its growth over the step before (its exposed
    vector pass); a dear first step."""
    s = np.asarray(sizes, float)
    nxt = np.append(s[2:], s[-1:])
    return np.r_[head, 6000.0 + 80.0 * s[1:] + 30.0 * nxt + 40.0 * np.maximum(s[1:] - s[:-1], 0.0)]


def test_context_pricer_prices_steps_by_own_next_and_growth():
    """A SameAB core whose launch repeats a period of six 1024-fractal steps and a 224 one and whose sample keeps the
    class changes with few repeats (most of them before a change, the cheap ones): the context extension is exact,
    where _step_pricer, which prices every repeat alike, is off by more than 3%."""
    launch = ([1024] * 6 + [224]) * 6
    sample = [1024, 1024, 224, 1024, 224, 1024, 1024, 224, 1024, 224]
    t, w = 50000.0 + np.cumsum(_context_ring_cycles(sample)), np.cumsum(sample).astype(float)
    left = np.array([float(sum(launch) - sum(sample))])
    steady = estimate_module._steady_cost([(t, w)], left)
    real = float(_context_ring_cycles(launch)[1:].sum() - _context_ring_cycles(sample)[1:].sum())
    work = _one_run_work(launch)
    context = estimate_module._step_extension(work, [0], [(t, w)], steady, left, context=True)
    repeats = estimate_module._step_extension(work, [0], [(t, w)], steady, left)
    assert context[0] == pytest.approx(real, rel=1e-9)
    assert abs(repeats[0] / real - 1) > 0.03


def test_context_pricer_falls_back_to_the_step_pricer_on_one_size():
    """Where the sample's steady window holds one step size, no line over sizes can be fitted: _step_pricer prices."""
    sample = [1024] * 12
    t, w = np.cumsum(_context_ring_cycles(sample)), np.cumsum(sample).astype(float)
    span = np.array([1.0])
    steady = estimate_module._steady_cost([(t, w)], span)
    sizes = [1024, 224, 1024, 1024]
    assert estimate_module._context_pricer([(t, w)], steady, span)(sizes) == pytest.approx(
        estimate_module._step_pricer([(t, w)], steady, span)(sizes), rel=1e-12)


def test_launch_step_sizes_pair_each_aivs_run():
    """Step t of a generic core holds the t-th section of each AIV run; the longer run's last steps hold its own."""
    work = SimpleNamespace(block_dim=2, core_sections=np.array([5, 0]), core_aiv_split=np.array([3, 0]),
                           listed=[[(0, 0, 0, 0, 16 * s, 16)] if g % 2 == 0 else [] for g, s in
                                   enumerate([10, 0, 20, 0, 30, 0, 1, 0, 2, 0])])
    assert list(estimate_module._launch_step_sizes(work, 0)) == [11.0, 22.0, 30.0]


def _counted_work(blocks_by_core):
    """A counted work (round-robin: global section g is core g % len(cores)'s (g // len(cores))-th) whose sections
    hold the given blocks, none masked."""
    bd = len(blocks_by_core)

    def counts_many(gs):
        gs = np.asarray(gs, np.int64)
        return (np.array([blocks_by_core[g % bd][g // bd] for g in gs], np.int64).reshape(-1),
                np.zeros(len(gs), np.int64))
    return SimpleNamespace(block_dim=bd, core_sections=np.array([len(v) for v in blocks_by_core]),
                           core_blocks=np.array([sum(v) for v in blocks_by_core]), counts_many=counts_many)


def test_tail_counts_are_the_sections_past_the_lightest_busy_cores_blocks():
    """A core's tail is the sections its launch runs after the lightest busy core (idle cores aside) has ended: those
    whose blocks lie mostly past that core's block count; at most the budget."""
    work = _counted_work([[16, 16, 16, 16, 10], [16, 16, 16, 16], [10, 10, 10], []])
    assert estimate_module._tail_counts(work, [0, 1, 2], 8) == {0: 3, 1: 2, 2: 0}  # past 30 blocks: 32 nearest
    assert estimate_module._tail_counts(work, [0, 1, 2], 2) == {0: 2, 1: 2, 2: 0}


def test_tail_runs_sample_the_start_and_run_the_tail_whole():
    """Each sampled core runs its first section, a share of the others before its tail (the same share for every
    core), then every section of its tail in order."""
    work = _counted_work([[16] * 12, [16] * 8])  # core 1 ends after 128 blocks: core 0's last 4 sections are its tail
    runs = estimate_module._tail_runs(work, [0, 1], 4)
    (r0,), (r1,) = runs[0], runs[1]
    assert r0[0] == 0 and r0[-4:] == [16, 18, 20, 22] and len(r0) == 8 and r0 == sorted(set(r0))
    assert r1[0] == 1 and len(r1) == 4 and all(g % 2 == 1 and g < 16 for g in r1)


def test_balanced_window_is_bounded_by_sections_of_one_size():
    """The window runs from the MARK_HEAD-th step to a step ending by *until* (not the last MARK_TAIL), bounded by two
    steps of the same size where there are such; else all of it; None where no step is left."""
    size = np.array([16, 16, 8, 16, 16, 10, 16, 8, 8], float)
    w, t = np.cumsum(size), 1000.0 * np.arange(1, 10)
    assert estimate_module._balanced_window(t, w, np.inf) == (2, 7)  # 8 .. 8
    assert estimate_module._balanced_window(t, w, 7000.0) == (3, 6)  # steps 0 .. 6 end by 7000: 16 .. 16
    odd = np.array([16, 16, 8, 10, 12, 6], float)
    assert estimate_module._balanced_window(t[:6], np.cumsum(odd), np.inf) == (2, 4)
    assert estimate_module._balanced_window(t, w, 2500.0) is None


def test_running_cost_prices_whole_sections_while_every_core_runs():
    """A step's interval holds the section's own part and part of the previous section's (x(size) + y(size before));
    over a window bounded by sections of one size the parts add up to whole sections' x + y; steps after *until* (the
    first sampled core's end: less contention) stay out; cores weigh by the size they are extended over."""
    x, y = {16: 50000.0, 8: 20000.0}, {16: 30000.0, 8: 45000.0}  # a 16-block section 80k, an 8-block one 65k
    size = [16, 16, 8, 16, 8, 16, 16, 16, 16]
    gaps = [90000.0] + [x[s] + y[p] for p, s in zip(size, size[1:])]
    gaps[-3:] = [g / 2 for g in gaps[-3:]]  # the last three after the other core has ended: half the cost
    t, w = np.cumsum(gaps), np.cumsum(np.array(size, float))
    until = t[-4] + 1.0
    # the window (3, 5), bounded by 16 .. 16 (8 .. 8 is as long, earlier): sections 4, 5 = 8 + 16 blocks
    assert estimate_module._running_cost([(t, w)], np.array([1.0]), until) == pytest.approx((0.0, 145000.0 / 24))
    other = (np.cumsum([90000.0] + [60000.0] * 6), np.cumsum(np.full(7, 16.0)))  # 3750 a size unit
    both = estimate_module._running_cost([(t, w), other], np.array([1.0, 3.0]), until)
    assert both == pytest.approx((0.0, (145000.0 + 3 * 60000.0 * 3) / (24 + 3 * 48)))
    assert estimate_module._running_cost([(t, w), None], np.array([1.0, 1.0]), until) is None


def test_basic_sample_runs_each_cores_tail_whole(monkeypatch):
    """Basic, sampled (3 cores of 14 sections, 224 / 200 / 176 blocks): the one sample run holds each core's first
    section, a share of the rest before its tail and its whole tail (past the lightest core's 176 blocks: 3 and 2
    sections), and the estimate comes out close to timing."""
    runs, seen = [], []
    real_runs, real_launch = estimate_module._tail_runs, estimate_module.launch_main

    def spy_runs(*a):
        runs.append(real_runs(*a))
        return runs[-1]

    def spy_launch(problem, til, spec, mode, inputs, ws, **kw):
        seen.append(til.sections)
        return real_launch(problem, til, spec, mode, inputs, ws, **kw)
    monkeypatch.setattr(estimate_module, "_tail_runs", spy_runs)
    monkeypatch.setattr(estimate_module, "launch_main", spy_launch)
    monkeypatch.setattr(estimate_module, "SIM_BLOCKS", 0)
    args, kw = _specs(3000, 2, 64)
    est = fag(*args, **kw, mode="estimate", tiling={"blockDim": 3})
    (pos,) = runs
    assert pos[1][0][0] == 1 and pos[1][0][-3:] == [1 + 3 * j for j in (11, 12, 13)]
    assert pos[0][0][0] == 0 and pos[0][0][-2:] == [3 * 12, 3 * 13]
    assert all(len(v[0]) < 14 for v in pos.values()) and sum(len(v[0]) for v in pos.values()) in seen
    tim = fag(*args, **kw, mode="timing", tiling={"blockDim": 3})
    assert abs(est.time_us / tim.time_us - 1) < 0.02, (est.time_us, tim.time_us)


@pytest.mark.unsanitized  # sample launches of a few rounds, as estimate mode runs them (api._estimate: unsanitized)
def test_half_prologue_is_where_a_run_of_half_the_prologue_ends():
    """_half_prologue reads off one IS_DTM sample where its prologue would have ended with half of each AIV's sfmg
    steps: a second sample of the same rounds that runs that share of the prologue ends its prologue there (within
    1%; that second run is what the estimate no longer simulates). 2/3 of this call's prologue is 16 whole steps of
    64 rows per AIV, half of it 8."""
    from ops.flash_attention_unpadding_score_grad_v5.estimate import estimate_plan
    from ops.flash_attention_unpadding_score_grad_v5.launch import launch_main
    a = _det_multibatch_call()
    problem = fag(**a, deterministic=True, mode="estimate", tiling={"blockDim": 4}).extra["problem"]
    spec = get_chip("Ascend910B2").replace(aicore_timeout_s=float("inf"))
    til, work = estimate_plan(problem, spec, {"blockDim": 4}, True)
    inputs = estimate_module._spec_inputs(problem)
    positions = estimate_module._round_cores(work, [0, 1, 5, 8, 9])

    def sample(f):  # (trace, prologue end) of the rounds' sample with the share f of the prologue
        til_f, _ = estimate_module._sample_tiling(problem, til, work, list(range(4)), positions, f)
        res = launch_main(problem, til_f, spec, "timing", inputs, estimate_module._ws(til))
        return res.trace, estimate_module._trace_ends(res.trace, 4)[1]
    trace, end = sample(2 / 3)
    h, cycle = estimate_module._half_prologue(trace, end)
    assert h == 0.5 and cycle < end
    _, shorter = sample(2 / 3 * h)
    assert cycle == pytest.approx(shorter, rel=0.01), (cycle, shorter, end)


def test_post_estimate_holds_the_half_block_templates_dsink_sums():
    """With a sink, basic_det's post kernel first sums every block's dsink partials on AIV 0 (PostDsink), one slot
    per block and AIV half: the estimate's post launch holds that time (_dsink_cycles), within 10% of timing mode's
    post launch (without it the estimate's post was the dq / dk / dv loop alone: 16% short on this call, 66% on S 3000
    N 16/4)."""
    args, kw = _specs(1200, 8, 64)
    kw.update(sparse_mode=3, sink_in=TensorSpec((8,), np.float32))
    est = fag(*args, **kw, deterministic=True, mode="estimate")
    tim = fag(*args, **kw, deterministic=True, mode="timing")
    assert tim.tiling.template == "basic_det" and not tim.tiling.dsinkCores
    post = tim.extra["launches"]["post"].cycles
    assert est.extra["launch_cycles"]["post"] == pytest.approx(post, rel=0.10), (est.extra["launch_cycles"], post)


def test_step_pricer_weighs_each_cores_repeats_by_the_size_it_is_extended_over():
    """The repeats' line is weighted as the steady line is: a core extended over nothing does not move it, and a
    core's repeats count in proportion to the size it has left (two cores on different lines: the fit leans to the
    heavier one)."""
    sizes = [664, 664, 1024, 1024, 664, 664, 1024, 1024, 664]
    t, w = np.cumsum(_ring_cycles(sizes)), np.cumsum(sizes).astype(float)
    u = np.cumsum(_ring_cycles(sizes) * 1.2)  # a core 20% dearer throughout
    steady = estimate_module._steady_cost([(t, w), (u, w)], np.array([1.0, 0.0]))
    alone = estimate_module._step_pricer([(t, w)], steady, np.array([1.0]))
    with_idle = estimate_module._step_pricer([(t, w), (u, w)], steady, np.array([1.0, 0.0]))
    heavy = estimate_module._step_pricer([(t, w), (u, w)], steady, np.array([1.0, 3.0]))
    run = [1024] * 6
    assert with_idle(run) == pytest.approx(alone(run)) == pytest.approx(5 * (5000.0 + 70.0 * 1024))
    assert heavy(run) == pytest.approx(5 * 1.15 * (5000.0 + 70.0 * 1024))  # (1 x 1.0 + 3 x 1.2) / 4


def test_dtm_sample_with_a_slope_pse_runs_a_second_sample_for_the_prologue(monkeypatch):
    """A SameAB IS_DTM call whose prologue holds more than VecSftg's sfmg steps (here the alibi-slope table of a
    slope pse, _sfmg_only false) cannot read its prologue's half off the sample (_half_prologue): below
    DTM_WHOLE_PROLOGUE it runs a second sample, the lightest sampled round alone at half the sample's prologue share,
    and the prologue's line goes through both runs."""
    from tests.ops.fag_cases import make_case
    a, _ = make_case(seq_q=[1024, 700], seq_kv=[1024, 700], n1=8, n2=2, d=64, slopes="N", pse_type=3)
    monkeypatch.setattr(estimate_module, "DTM_BLOCKS", 300)
    monkeypatch.setattr(estimate_module, "_prologue_fraction", lambda problem, til: 0.6)
    fractions, runs = [], []
    real_cores, real_plan = estimate_module._round_cores, estimate_module._sample_tiling
    monkeypatch.setattr(estimate_module, "_round_cores", lambda work, rounds: runs.append(list(rounds)) or
                        real_cores(work, rounds))
    monkeypatch.setattr(estimate_module, "_sample_tiling", lambda *x, **k: fractions.append(x[5] if len(x) > 5 else
                                                                                             1.0) or real_plan(*x, **k))
    est = fag(**a, deterministic=True, mode="estimate", tiling={"blockDim": 4})
    assert est.tiling.template == "sameab_det" and est.tiling.sabDtm
    assert fractions == [0.6, 0.3, 1.0], fractions  # the sample, the second run at half its share, the reductions
    sample, second = runs[0], runs[1]
    assert len(second) == 1 and second[0] in sample  # one round of the sample's (its lightest)


def test_generic_sampled_cores_are_extended_by_the_step_pricer(monkeypatch):
    """A sampled generic call (STEP_PAIR_TEMPLATES) extends its sampled cores with _step_extension, whose result sets
    the launch's end: every core's extension 1,000 cycles longer makes the main launch exactly 1,000 cycles longer."""
    from tests.ops.fag_cases import make_case
    a, _ = make_case(seq_q=[900, 400], seq_kv=[1000, 400], n1=4, d=128, sparse_mode=3, causal=True)
    monkeypatch.setattr(estimate_module, "SIM_BLOCKS", 0)
    monkeypatch.setattr(estimate_module, "SAMPLE_BLOCKS", 0)  # GENERIC_SAMPLE_SECTIONS of 34 per core: sampled
    base = fag(**a, mode="estimate", tiling={"blockDim": 2})
    assert base.tiling.template == "generic"
    calls = []
    real = estimate_module._step_extension

    def longer(work, cores, *rest):
        calls.append(list(cores))
        return [g + 1000.0 for g in real(work, cores, *rest)]
    monkeypatch.setattr(estimate_module, "_step_extension", longer)
    est = fag(**a, mode="estimate", tiling={"blockDim": 2})
    assert calls == [[0, 1]]
    assert est.extra["launch_cycles"]["main"] == pytest.approx(base.extra["launch_cycles"]["main"] + 1000.0, abs=1e-6)



def test_context_pricer_extends_sampled_sameab_cores_only(monkeypatch):
    """CONTEXT_TEMPLATES: a sampled SameAB call's cores are extended by _context_pricer, a sampled generic call's by
    _step_pricer (a generic step holds two AIVs' CV blocks and costs by the larger one's vector pass)."""
    from tests.ops.fag_cases import make_case
    monkeypatch.setattr(estimate_module, "SIM_BLOCKS", 0)
    monkeypatch.setattr(estimate_module, "SAMPLE_BLOCKS", 0)
    calls = []
    real = estimate_module._context_pricer

    def counted(*args):
        calls.append(len(args[0]))
        return real(*args)
    monkeypatch.setattr(estimate_module, "_context_pricer", counted)
    for kw, template, expected in (
            (dict(seq_q=[1200, 1300], seq_kv=[1200, 1300], n1=4, d=192, sparse_mode=3), "sameab", [2]),
            (dict(seq_q=[900, 400], seq_kv=[1000, 400], n1=4, d=128, sparse_mode=3), "generic", [])):
        a, _ = make_case(**kw, causal=True)
        calls.clear()
        assert fag(**a, mode="estimate", tiling={"blockDim": 2}).tiling.template == template
        assert calls == expected


def test_step_extended_samples_start_with_each_runs_first_section(monkeypatch):
    """_step_extension takes a core's first ring step as its sample ran it, so the sample of a STEP_PAIR template
    holds each AIV run's first section of the launch (put in front where the class picks left it out), and every
    sampled SameAB core's run starts with its launch's first section."""
    work = SimpleNamespace(block_dim=3, core_sections=np.array([10, 0, 0]), core_aiv_split=np.array([4, 0, 0]))
    got = estimate_module._from_run_starts(work, 0, [[3, 9], [12, 21, 27]])  # run 1 (local 0-3) misses local 0
    assert got == [[0, 3, 9], [12, 21, 27]]  # run 2 (local 4-9) holds local 4 (global 12) already
    assert estimate_module._from_run_starts(work, 0, [[], [15]]) == [[], [12, 15]]
    from tests.ops.fag_cases import make_case
    monkeypatch.setattr(estimate_module, "SIM_BLOCKS", 0)
    monkeypatch.setattr(estimate_module, "SAMPLE_BLOCKS", 0)
    starts = []
    real = estimate_module._sample_tiling

    def spy(problem, til, work, cores, positions, *rest):
        starts.append([positions[c][0] - c for c in cores])
        return real(problem, til, work, cores, positions, *rest)
    monkeypatch.setattr(estimate_module, "_sample_tiling", spy)
    a, _ = make_case(seq_q=[1200, 1300], seq_kv=[1200, 1300], n1=4, d=192, sparse_mode=3, causal=True)
    assert fag(**a, mode="estimate", tiling={"blockDim": 2}).tiling.template == "sameab"
    assert starts and starts[0] == [0, 0]


def test_step_pricer_left_out_beyond_the_listing_budget():
    """Beyond LISTED_WORK_BLOCKS a SameAB / generic call's work is counted, not listed (estimate_plan): its sampled
    cores are extended on the steady line, not by the step pricer, which reads listed CV blocks (this T = 256K SameAB
    shape of the accuracy benchmark's HUGE list raised AttributeError there)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from estimate_accuracy_fag import HUGE, call
    cfg = next(c for name, *c in HUGE if name.startswith("T=256K"))
    res, _ = call(*cfg, "estimate")
    assert res.tiling.template == "sameab" and res.extra["launch_cycles"]["main"] > 0


@pytest.mark.parametrize("sq, skv, n, d, dtype, causal", [(900, 600, 4, 64, np.float16, False),
                                                          (1500, 1500, 4, 192, np.float32, True)])
@pytest.mark.unsanitized  # a sample launch reads sfmg rows of workers it does not run (as estimate mode runs them)
def test_sample_counts_the_section_pages_of_the_busy_cores_it_leaves_out(monkeypatch, sq, skv, n, d, dtype, causal):
    """A sample of SAMPLE_CORES of the launch's busy cores, each running all its sections, with sample_l2's counted
    pages: the touched bytes its L2 model books for the per-core regions (the section buffers; fp32 also mmT) are
    what a timing launch's cores leave resident there, within 1.5% (measured +0.49% and +0.81%). A core's footprint
    is what the model books for its CV blocks' ND matrices, which no count of slots gives (session 15's analytic
    count: +40% / -6.4%), so it is read off the sample; each sampled core counting busy / k times was +12.3% on the
    fp16 call (its 4 unsampled cores of 16 run 4-row CV blocks, 18 pages against the others' 32). Counted once, the
    pages were k / busy of the launch's, and a sample stayed under L2 where its launch passed it."""
    from npusim.memory import gm
    from ops.flash_attention_unpadding_score_grad_v5 import launch as fag_launch
    from ops.flash_attention_unpadding_score_grad_v5.sample_l2 import core_regions, counted_pages
    made = _made_buffers(monkeypatch)
    t = lambda s: TensorSpec((s, n, d), dtype)  # noqa: E731
    stats = {k: TensorSpec((sq, n, 8), np.float32) for k in ("softmax_max", "softmax_sum")}
    mask = dict(atten_mask=compressed_causal_mask().astype(bool), sparse_mode=2) if causal else {}
    kw = dict(attention_in=t(sq), actual_seq_qlen=[sq], actual_seq_kvlen=[skv], head_num=n, scale_value=0.125,
              **stats, **mask)
    res = fag(t(sq), None, t(skv), None, t(skv), t(sq), **kw, mode="timing")
    problem, page = res.extra["problem"], gm.L2_PAGE_BYTES
    spec = get_chip("Ascend910B2")
    til, work = estimate_module.estimate_plan(problem, spec, None, False)
    assert til.template == "generic" and (np.dtype(dtype).itemsize == 4) == bool(til.mmTOffset)

    def region_pages(buf):
        return sum(int(buf.resident[lo // page:-(-hi // page)].sum()) for lo, hi in core_regions(til)) * page
    launched = max(region_pages(b) for b in made if b.name == "workspace")  # pre, main, post: main's has them
    busy = int(np.count_nonzero(work.core_sections))
    cores = estimate_module._ranked(work, estimate_module.SAMPLE_CORES)
    assert busy > len(cores)
    sample, _ = estimate_module._sample_tiling(
        problem, til, work, cores, {c: sum(estimate_module._core_positions(work, c, None), []) for c in cores})
    made.clear()
    fag_launch.launch_main(problem, sample, spec, "timing", estimate_module._spec_inputs(problem),
                           estimate_module._ws(til), l2_warm=(0, {}, counted_pages(til, work, cores)))
    ws = next(b for b in made if b.name == "workspace")
    outside = sum(int(b.resident.sum()) for b in made) * page - region_pages(ws)
    booked = ws._l2.touched_bytes - outside  # what the sample's L2 model booked for the per-core regions
    assert booked == pytest.approx(launched, rel=0.015)


def test_sameab_sample_keeps_each_runs_lead():
    """_with_run_leads puts a run's first sections before its first of the run's largest area in front of the picks
    (at most LEAD_SECTIONS, at least the first), and drops the picks inside the lead; a run of equal areas keeps its
    first only. LEAD_TEMPLATES is SameAB's alone."""
    def blocks(area):  # one listed CV block of *area* fractals: 16 rows x 16 * area columns
        return [(0, 0, 0, 0, 16, 16 * area, False)]
    # core 0 of 2: global sections 0, 2, 4, ... are its local 0, 1, 2, ...
    areas = [196, 196, 1024, 992, 1024, 1024]
    work = SimpleNamespace(block_dim=2, core_sections=np.array([6, 0]),
                           listed={2 * j: blocks(a) for j, a in enumerate(areas)})
    assert estimate_module._with_run_leads(work, 0, [[0, 4, 8]]) == [[0, 2, 4, 8]]
    assert estimate_module._with_run_leads(work, 0, [[2, 6, 10]]) == [[0, 2, 6, 10]]
    work.listed = {2 * j: blocks(1024) for j in range(6)}
    assert estimate_module._with_run_leads(work, 0, [[4, 8]]) == [[0, 4, 8]]
    work.listed = {2 * j: blocks(a) for j, a in enumerate([64, 128, 192, 256, 320, 1024])}
    assert estimate_module._with_run_leads(work, 0, [[0, 10]]) == [[0, 2, 4, 6, 10]]
    assert estimate_module.LEAD_TEMPLATES == ("sameab",)
