"""benchmarks/child_run: a child's peak memory is its own, not its parent's resident size."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from child_run import run_child  # noqa: E402

CHILD = r"""
import json, resource
from child_run import peak_mb
print(json.dumps({"peak_mb": peak_mb(), "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def test_a_child_of_a_large_parent_reports_its_own_peak():
    ballast = bytearray(400 * 1024 * 1024)
    ballast[::4096] = b"\1" * len(range(0, len(ballast), 4096))  # resident, not only reserved
    out = run_child(CHILD, [])
    assert out["peak_mb"] < 200  # a bare interpreter
    if sys.platform.startswith("linux"):
        assert out["ru_maxrss_mb"] >= 400  # what the child would have reported with ru_maxrss (Linux keeps it)
    del ballast
