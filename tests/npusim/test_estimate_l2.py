"""npusim.estimate.steady_l2_touched: the L2 start state of an estimate sample."""
import numpy as np

from npusim.estimate import steady_l2_touched
from npusim.memory.gm import L2Model

L2 = 192 * 2 ** 20


def _hit_scale(touched: int) -> float:
    model = L2Model(L2)
    model.touched_bytes = touched
    return model.hit_scale()


def test_a_working_set_within_l2_starts_at_itself():
    assert steady_l2_touched(100 * 2 ** 20, L2) == 100 * 2 ** 20
    assert _hit_scale(steady_l2_touched(L2, L2)) == 1.0


def test_past_l2_the_sample_sees_the_launch_average_hit_scale():
    """The hit scale at the returned touched bytes equals the L2 model's scale averaged over a launch whose
    touched bytes grow linearly to the working set (numerically, not from the closed form)."""
    for ws in (256 * 2 ** 20, 1 * 2 ** 30, 8 * 2 ** 30):
        f = (np.arange(200_000) + 0.5) / 200_000  # launch progress
        mean = float(np.minimum(1.0, L2 / (f * ws)).mean())
        assert abs(_hit_scale(steady_l2_touched(ws, L2)) - mean) < 1e-4
        assert _hit_scale(ws) < mean < 1.0  # between the launch's last moment and a cold-free start
