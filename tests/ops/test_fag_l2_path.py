"""The basic template's L2 trajectory (ops/flash_attention_unpadding_score_grad_v5/l2_path.py) and the estimate that
follows it (estimate._launch_follow, _trajectory_loads, _running_cost's loads, gm.L2Model.follow)."""
import importlib

import numpy as np
import pytest

from npusim.chip import chip as get_chip
from npusim.memory import gm
from ops import flash_attention_unpadding_score_grad_v5 as fag
from tests.ops.test_fag_estimate import _specs

estimate_module = importlib.import_module("ops.flash_attention_unpadding_score_grad_v5.estimate")
l2_path = importlib.import_module("ops.flash_attention_unpadding_score_grad_v5.l2_path")
MiB = 1 << 20


def _plan(s, n, d, block_dim):
    args, kw = _specs(s, n, d)
    tiling = {"blockDim": block_dim} if block_dim else None
    res = fag(*args, **kw, mode="estimate", tiling=tiling)
    problem = res.extra["problem"]
    spec = get_chip("Ascend910B2")
    til, work = estimate_module.estimate_plan(problem, spec, tiling, False)
    return problem, spec, til, work


def _touched_by(monkeypatch, launch):
    """The chip-wide touched bytes at the end of *launch()* (its L2 model's last count)."""
    seen = []
    real = gm.L2Model.set_touched

    def keep(self, nbytes):
        real(self, nbytes)
        seen.append(nbytes)
    monkeypatch.setattr(gm.L2Model, "set_touched", keep)
    launch()
    monkeypatch.setattr(gm.L2Model, "set_touched", real)
    return seen[-1]


def test_launch_curve_is_what_timing_mode_touches_step_by_step(monkeypatch):
    """launch_curve[j]: the pages a launch has touched after every core's first j sections. Checked against timing
    runs of every busy core's first j sections (the launch cut after step j - 1, started cold as the launch is: its
    prologue reads dy and attention_in whole and writes sfmg whole). Tolerance 2 pages: the atten_mask windows the
    masked blocks read are not counted (the compressed causal mask: 1-2 pages)."""
    problem, spec, til, work = _plan(1536, 4, 64, 3)
    curve = l2_path.launch_curve(problem, til, work)
    steps = int(work.core_sections.max())
    assert len(curve) == steps + 1 and np.all(np.diff(curve) >= 0)
    inputs = estimate_module._spec_inputs(problem)
    cores = list(range(work.block_dim))
    for j in (1, steps // 2, steps):
        positions = {c: [c + work.block_dim * i for i in range(min(j, int(work.core_sections[c])))] for c in cores}
        sample, _ = estimate_module._sample_tiling(problem, til, work, cores, positions)
        touched = _touched_by(monkeypatch, lambda: estimate_module.launch_main(
            problem, sample, spec, "timing", inputs, estimate_module._ws(til)))
        assert abs(touched - curve[j]) <= 2 * gm.L2_PAGE_BYTES, (j, touched / MiB, curve[j] / MiB)
    assert curve[steps] > curve[1] + MiB  # the launch's accumulators and inputs grow along the run


@pytest.mark.unsanitized  # a sample's AIVs read sfmg rows only the launch's other AIVs write (as estimate mode runs it)
def test_sample_curve_is_what_the_sample_touches(monkeypatch):
    """sample_curve: a sample run's touched bytes from its L2 start (the inputs resident) through its own section
    buffers, sfmg rows and dq / dk / dv rows. Checked against timing runs of a spread sample cut after each step
    count (2 pages: the mask windows, as above)."""
    problem, spec, til, work = _plan(1536, 4, 64, 3)
    inputs = estimate_module._spec_inputs(problem)
    sizes = {k: int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for k, v in inputs.items()}
    start = estimate_module._l2_start(problem, sizes, spec.l2_bytes)
    full = {c: [c + work.block_dim * i for i in range(0, int(work.core_sections[c]), 3)] for c in (0, 2)}
    curve = l2_path.sample_curve(problem, til, work, full, start, estimate_module._sfmg_workers(til, 1.0))
    assert len(curve) == max(len(v) for v in full.values()) + 1
    for j in (1, len(curve) - 1):
        positions = {c: v[:j] for c, v in full.items()}
        sample, _ = estimate_module._sample_tiling(problem, til, work, list(positions), positions)
        warm = (start, {k: 1.0 for k in sizes})
        touched = _touched_by(monkeypatch, lambda: estimate_module.launch_main(
            problem, sample, spec, "timing", inputs, estimate_module._ws(til), l2_warm=warm))
        assert abs(touched - curve[j]) <= 2 * gm.L2_PAGE_BYTES, (j, touched / MiB, curve[j] / MiB)


def test_follow_map_jumps_to_each_sampled_sections_launch_level():
    """Sample step i runs at the launch's level of its sections' step (median over the cores): from launch[J] at its
    first own level to launch[J + 1] at its last; at a step boundary the level jumps over the skipped sections."""
    launch = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])  # after the prologue, then after steps 0 .. 4
    own = np.array([5.0, 7.0, 9.0, 9.0])  # the sample's own after its prologue and 3 steps
    positions = {0: [0, 4, 8], 1: [1, 5, 9]}  # block_dim 2: steps 0, 2, 4 of each core
    xs, ys = l2_path.follow_map(launch, own, positions, 2)
    # step 0: own 5 .. 7 <-> launch 10 .. 20; step 1: 8 .. 9 <-> 30 .. 40; step 2 adds no page: own 9 at its level
    assert xs.tolist() == [5.0, 7.0, 8.0, 9.0]
    assert ys.tolist() == [10.0, 20.0, 30.0, 60.0]


def test_l2_model_follows_the_launchs_touched_bytes():
    """L2Model.follow: the hit scale of the launch's touched bytes where the sample's own are (interpolated);
    unset, the sample's own (the default, unchanged)."""
    l2 = gm.L2Model(100)
    l2.set_touched(150)
    assert l2.scale == pytest.approx(100 / 150)
    l2.follow = (np.array([0.0, 100.0, 200.0]), np.array([0.0, 100.0, 400.0]))
    l2.set_touched(150)  # the launch at 250
    assert l2.scale == pytest.approx(100 / 250)
    l2.set_touched(50)
    assert l2.scale == 1.0


def test_step_loads_are_the_bandwidth_shares_of_the_hit_scale():
    """A step's load: max(s, (1 - s) x L2 / HBM bandwidth) at the hit scale s = L2 / its mean touched bytes."""
    launch = np.array([100.0, 200.0, 200.0, 300.0, 500.0])
    loads = l2_path.step_loads(launch, 200, 3.0)
    s = np.array([1.0, 1.0, 200 / 250, 200 / 400])
    assert loads == pytest.approx(np.maximum(s, 3 * (1 - s)))
    assert loads[0] == 1.0 and loads[3] == pytest.approx(1.5)


def test_running_cost_with_loads_is_per_size_at_a_load_of_one():
    """With per-step loads the window's cycles are shared over its steps' sizes times their loads."""
    t = np.cumsum([90000.0, 60000.0, 60000.0, 45000.0, 75000.0])
    w = np.cumsum(np.full(5, 16.0))
    loads = [np.array([1.0, 1.0, 1.0, 0.75, 1.25])]
    plain = estimate_module._running_cost([(t, w)], np.array([1.0]), np.inf)
    loaded = estimate_module._running_cost([(t, w)], np.array([1.0]), np.inf, loads)
    # window (2, 3): one step of 16 at load 0.75 (MARK_TAIL leaves the last out)
    assert plain == pytest.approx((0.0, 45000.0 / 16))
    assert loaded == pytest.approx((0.0, 45000.0 / (16 * 0.75)))


def test_trajectory_loads_weigh_each_left_out_section_by_its_steps_load():
    """Per core, the sample steps' loads at their sections' launch steps, and the size of the sections the sample
    leaves out, each times its step's load."""
    problem, spec, til, work = _plan(1536, 4, 64, 3)
    n = int(work.core_sections[0])
    loads = np.linspace(1.0, 2.0, int(work.core_sections.max()))
    positions = {0: [0, 3 * 2], 1: [1]}
    steps, weighted = estimate_module._trajectory_loads(work, positions, loads)
    assert steps[0].tolist() == [loads[0], loads[2]] and steps[1].tolist() == [loads[0]]
    size = 64.0 * estimate_module._counts(work, 3 * np.arange(n))[0]
    keep = np.ones(n, bool)
    keep[[0, 2]] = False
    assert weighted[0] == pytest.approx(float(size[keep] @ loads[:n][keep]))


def test_window_load_weighs_the_running_cost_windows_steps():
    """The window's mean load: its steps' sizes times their loads over its sizes (the windows _running_cost reads)."""
    t = np.cumsum([90000.0, 60000.0, 60000.0, 45000.0, 75000.0])
    w = np.cumsum(np.full(5, 16.0))
    loads = [np.array([1.0, 1.0, 0.9, 0.8, 1.25])]
    # window (2, 3): the step of load 0.8 alone (MARK_HEAD 2, MARK_TAIL 1)
    assert estimate_module._window_load([(t, w)], np.array([1.0]), np.inf, loads) == pytest.approx(0.8)
    assert estimate_module._window_load([(t, w)], np.array([0.0]), np.inf, loads) == 1.0  # no weight: no window


def test_gm_demand_counts_the_gm_pipes_rows_inside_the_window():
    """GM bytes a cycle: MTE2, MTE3 and FIX rows that run within the window (MTE1's L1 -> L0 loads and rows that
    cross the window's ends left out)."""
    from types import SimpleNamespace
    from npusim.types import Pipe
    cols = {"pipe": np.array([Pipe.MTE2, Pipe.MTE3, Pipe.FIX, Pipe.MTE1, Pipe.MTE2], np.int64),
            "start": np.array([10.0, 20.0, 30.0, 40.0, 90.0]), "end": np.array([20.0, 30.0, 40.0, 50.0, 120.0]),
            "bytes": np.array([1000, 2000, 4000, 8000, 16000], np.int64)}
    trace = SimpleNamespace(columns=cols)
    assert estimate_module._gm_demand(trace, 0.0, 100.0) == pytest.approx(7000 / 100)


@pytest.mark.unsanitized  # a timing run of 312 sections: the kernel's schedule is checked by the sanitized tests
def test_sampled_estimate_follows_a_launch_that_passes_l2(monkeypatch):
    """Basic, sampled (24 cores, 13 sections each) on a chip whose L2 is cut to 0.7 of the launch's touched bytes:
    the launch passes it part way (its mm buffers and prologue early, then its accumulators) and its steps, bound by
    the bandwidth, cost by the hit scale; the sample follows the launch's trajectory and prices the extension along
    it. Before (the sample's own L2 state, passed late) the estimate came out +10.5%."""
    args, kw = _specs(6144, 4, 64)
    problem, spec, til, work = _plan(6144, 4, 64, None)
    assert estimate_module.main_path(til, work) == "sampled"
    curve = l2_path.launch_curve(problem, til, work)
    chip = spec.replace(l2_bytes=int(0.7 * curve[-1]))
    assert curve[1] < chip.l2_bytes < curve[-1]
    est = fag(*args, **kw, mode="estimate", chip=chip)
    tim = fag(*args, **kw, mode="timing", chip=chip)
    assert abs(est.time_us / tim.time_us - 1) < 0.03, (est.time_us, tim.time_us)
