"""The README's examples run as written (benchmarks/readme_examples.py runs them all and records their
times and output for the README; here the quick ones run in CI, each must exit 0, and every example has
the generated block that shows its measured time and output)."""
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import readme_examples  # noqa: E402

#: Examples too long for the test run (minutes of simulation, or a sweep study): python -m studies runs them.
HEAVY = {"quick-tour", "sweep"}
EXAMPLES = readme_examples.examples()


def test_every_example_has_its_generated_output_block():
    text = (ROOT / "README.md").read_text()
    assert {"quick-tour", "sfag", "train", "sanitizer", "predict", "sweep"} <= {e.name for e in EXAMPLES}
    for e in EXAMPLES:
        assert re.search(rf"<!-- generated:example-{e.name} -->\n.*?<!-- /generated:example-{e.name} -->", text, re.S), e.name


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.name not in HEAVY], ids=lambda e: e.name)
def test_example_runs_as_written(example):
    r = readme_examples.run(example)
    assert r["status"] == 0, r["stderr_tail"]
    assert r["stdout"].strip(), "an example prints what it shows"
