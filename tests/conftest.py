"""Shared fixtures: a chip with round numbers for exact timelines, and a kernel-trace helper."""
import pytest

from npusim.chip import chip as get_chip


@pytest.fixture
def chip():
    """Ascend910B2 with round latencies so tests can state exact timelines."""
    return get_chip("Ascend910B2").replace(scalar_issue_cycles=1, flag_cycles=1, launch_overhead_cycles=0,
                                          cross_core_flag_latency_cycles=100, pipe_queue_depth=32)


def timeline(res, core=None, sub_core=None):
    """[(lane, name, start, end)] of a launch, in issue order, optionally for one core/sub-core."""
    df = res.trace.df
    if core is not None:
        df = df[df.core == core]
    if sub_core is not None:
        df = df[df.sub_core == sub_core]
    return [(r.pipe, r.name, int(r.start_cycle), int(r.end_cycle)) for r in df.itertuples()]
