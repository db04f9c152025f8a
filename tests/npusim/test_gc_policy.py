"""The collector's settings during a launch's run (npusim/gc_policy.py) and the caller's after it."""
import gc

import numpy as np
import pytest

from npusim import gc_policy
from npusim.errors import KernelError
from npusim.examples.vector_add import add_custom, add_tiling
from npusim.launch import GmArg, launch
from npusim.memory.gm import TensorSpec


def _launch(kernel=add_custom):
    x = TensorSpec((4096,), np.float16)
    return launch(kernel, (GmArg("x", x), GmArg("y", x), GmArg("z", x), add_tiling(4096, 2, 1024, 2)),
                  block_dim=2, chip="Ascend910B2", mode="timing", kernel_type="vector", progress=False)


@pytest.fixture
def caller_state():
    """The test's collector settings put back whatever a test does."""
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()
    (gc.enable if enabled else gc.disable)()


def _seen_by_kernel(seen: list):
    def kernel(*args):
        seen.append((gc.get_threshold(), gc.get_freeze_count() > 0))
        add_custom(*args)
    return kernel


@pytest.mark.parametrize("caller", [(700, 10, 10), (50_000, 5, 5)])
def test_run_raises_the_young_threshold_and_freezes_then_restores(caller_state, caller):
    gc.set_threshold(*caller)
    seen = []
    _launch(_seen_by_kernel(seen))
    assert seen and all(s == ((max(caller[0], gc_policy.RUN_GEN0_THRESHOLD),) + caller[1:], True) for s in seen)
    assert gc.get_threshold() == caller and gc.get_freeze_count() == 0


def test_caller_state_restored_when_the_kernel_raises(caller_state):
    gc.set_threshold(700, 10, 10)

    def failing(*args):
        raise ValueError("boom")
    with pytest.raises(KernelError):
        _launch(failing)
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0


def test_caller_freeze_and_disabled_collector_left_alone(caller_state):
    gc.set_threshold(0, 10, 10)  # automatic collection off by threshold
    seen = []
    _launch(_seen_by_kernel(seen))
    assert seen[0][0] == (0, 10, 10) and gc.get_threshold() == (0, 10, 10)
    gc.set_threshold(700, 10, 10)
    gc.freeze()
    frozen = gc.get_freeze_count() > 0
    seen.clear()
    _launch(_seen_by_kernel(seen))
    assert frozen and gc.get_freeze_count() > 0  # the caller's freeze: not undone (unfreeze would leave 0)
    gc.unfreeze()
    gc.disable()
    seen.clear()
    _launch(_seen_by_kernel(seen))
    assert not gc.isenabled() and seen[0][1] is False and gc.get_freeze_count() == 0


def test_a_loop_of_launches_does_not_keep_their_garbage(caller_state, monkeypatch):
    """Each launch's objects form reference cycles that the next launch's freeze would move, garbage by then, out
    of every collection the collector itself starts (gc.freeze zeroes its older generations' counts): a loop of
    launches kept them all. The full collection run_collector starts when due frees them (share 0: due before
    every run once a run has left objects behind)."""
    import weakref

    from npusim.launch import current_unit
    monkeypatch.setattr(gc_policy, "FULL_COLLECTION_SHARE", 0.0)
    gc.set_threshold(700, 10, 10)
    launches = []

    def kernel(*args):
        launch = current_unit().launch
        if not launches or launches[-1]() is not launch:  # once per launch (the kernel runs per block)
            launches.append(weakref.ref(launch))
        add_custom(*args)
    for _ in range(12):
        _launch(kernel)
    alive = [r() is not None for r in launches]
    assert len(alive) == 12 and sum(alive) <= 2, alive
