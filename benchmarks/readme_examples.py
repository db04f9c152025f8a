"""Run every README example as written and record how long it took and what it printed.

An example is a fenced ``python`` block or a run of indented ``$ command`` lines placed right after an
``<!-- example:NAME -->`` marker in README.md. Python blocks run in a fresh interpreter in an empty
temporary directory (so files they write land there); commands run from the repository root, as the
README shows them. The wall and CPU time and the output of each go to benchmarks/results/
readme_examples.json, and ``python -m studies`` writes them under the example (the
``<!-- generated:example-NAME -->`` block), so the README states the time an example really takes on the
machine it names, and shows what it really prints.

    python benchmarks/readme_examples.py            # every example
    python benchmarks/readme_examples.py sfag       # some, by name
"""
from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import load, machine, save  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
_MARK = re.compile(r"<!-- example:(?P<name>[\w-]+) -->\n(?P<body>```python\n.*?\n```|(?:    \$ [^\n]*\n)+)", re.S)
#: Seconds an example may take before it counts as failed (the quick tour's timing run is the longest).
LIMIT_S = 1800


@dataclass(frozen=True)
class Example:
    name: str
    kind: str  # "python" or "shell"
    code: str  # the python source, or the commands one per line


def examples(readme: Path = ROOT / "README.md") -> list[Example]:
    """Every marked example of *readme*, in order."""
    out = []
    for m in _MARK.finditer(readme.read_text()):
        body = m.group("body")
        if body.startswith("```"):
            out.append(Example(m.group("name"), "python", body[len("```python\n"):-len("\n```")] + "\n"))
        else:
            cmds = [ln.strip()[2:].split("  #")[0].strip() for ln in body.splitlines()]
            out.append(Example(m.group("name"), "shell", "\n".join(cmds) + "\n"))
    return out


def run(example: Example) -> dict:
    """Run *example*; its wall and CPU seconds, exit status and output."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if example.kind == "python":
            cmd, cwd = [sys.executable, "-c", example.code], tmp
        else:
            cmd, cwd = ["bash", "-e", "-o", "pipefail", "-c", example.code], str(ROOT)
        try:
            p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=LIMIT_S)
            status, stdout, stderr = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            status, stdout, stderr = -1, e.stdout or "", f"timed out after {LIMIT_S} s"
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"kind": example.kind, "status": status, "wall_s": wall, "cpu_s": cpu,
            "stdout": stdout if isinstance(stdout, str) else stdout.decode(),
            "stderr_tail": (stderr if isinstance(stderr, str) else stderr.decode())[-2000:]}


def main(argv=None) -> int:
    names = set(sys.argv[1:] if argv is None else argv)
    found = examples()
    unknown = names - {e.name for e in found}
    if unknown:
        raise SystemExit(f"no README example named {sorted(unknown)}; there are {[e.name for e in found]}")
    previous = load("readme_examples") or {}
    saved = previous.get("examples", {})
    for r in saved.values():  # results saved before examples kept their own machine: the run's machine was theirs
        r.setdefault("machine", previous.get("machine"))
    failed = []
    for ex in found:
        if names and ex.name not in names:
            continue
        r = run(ex)
        r["machine"] = machine()  # each example's own load: a run of some examples keeps the others' results
        saved[ex.name] = r
        ok = r["status"] == 0
        print(f"{ex.name:12s} {'ok' if ok else 'FAILED'}  {r['wall_s']:7.1f} s wall  {r['cpu_s']:7.1f} s CPU")
        if not ok:
            failed.append(ex.name)
            print(r["stderr_tail"])
    save("readme_examples", {"examples": saved})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
