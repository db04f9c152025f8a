"""Shared fixtures: a chip with round numbers for exact timelines, a kernel-trace helper, and the
sanitizer around every test of a shipped kernel (docs/sanitizer.md)."""
import os

import pytest

from npusim.chip import chip as get_chip
from npusim.sanitizer import sanitizing

#: Tests whose every launch runs sanitized and must report nothing: the operators and the example kernels.
SANITIZED = (os.sep + os.path.join("tests", "ops") + os.sep, "test_vector_add_kernel.py", "test_matmul_kernel.py")


@pytest.fixture(autouse=True)
def sanitized_kernels(request):
    """Run every launch of a shipped-kernel test under the sanitizer; fail the test on any report."""
    path = str(request.node.fspath)
    if not any(s in path for s in SANITIZED) or request.node.get_closest_marker("unsanitized"):
        yield None
        return
    with sanitizing() as report:
        yield report
    assert len(report) == 0, report.summary()


@pytest.fixture(autouse=True, scope="session")
def replay_cache(tmp_path_factory):
    """The compiled replay steps of the test run kept in a directory of its own (npusim/replay_code.py CACHE_DIR):
    the tests neither read nor fill the user's cache."""
    import npusim.replay_code as replay_code
    old, replay_code.CACHE_DIR = replay_code.CACHE_DIR, str(tmp_path_factory.mktemp("replay_cache"))
    yield
    replay_code.CACHE_DIR = old


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
