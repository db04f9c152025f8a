"""The operator registry: discovery through the "npusim.operators" entry-point group, a plug-in operator
installed the way a separate package would be, KEY=VALUE parsing, and the launch modules that ended
the api <-> estimate import circle."""
import ast
import tomllib
import warnings
from pathlib import Path

import pytest

from npusim import registry
from npusim.cli import main
from npusim.errors import AclnnError
from npusim.registry import OperatorEntry, ProblemParam, parse_params

ROOT = Path(__file__).resolve().parents[2]

TOY_MODULE = '''
from npusim.launch import TimeoutVerdict
from npusim.registry import OperatorEntry, ProblemParam
from ops.common.result import OpResult


def toy_api(n, *, scale=1.0, chip=None, mode="full"):
    cycles = 1000 * n
    us = cycles / 1.85e3
    return OpResult(None, cycles, us, None, None, 0, 1, TimeoutVerdict(us * 1e-6, chip.aicore_timeout_s, False,
                    f"toy advice n={n}"), mode)


ENTRY = OperatorEntry(name="toy", title="ToyOperator", api=toy_api,
                      params=(ProblemParam("n", int, help="elements"), ProblemParam("scale", float, 1.0)),
                      build_call=lambda p: ((p["n"],), {"scale": p["scale"]}))
NOT_AN_ENTRY = 42
'''


def _install_plugin(root: Path, entry_points: str) -> None:
    """A distribution as pip would leave it: a module and a dist-info with entry_points.txt."""
    (root / "toy_npusim_plugin.py").write_text(TOY_MODULE)
    info = root / "toy_npusim_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-npusim-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    _install_plugin(tmp_path, "[npusim.operators]\ntoy = toy_npusim_plugin:ENTRY\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.operators(refresh=True)
    yield
    monkeypatch.undo()
    registry.operators(refresh=True)


def test_shipped_operators_are_registered():
    ops = registry.operators(refresh=True)
    assert {"pfa", "fa", "spkc"} <= set(ops)
    assert registry.load_errors() == {}
    for name, entry in ops.items():
        assert isinstance(entry, OperatorEntry) and entry.name == name
        assert callable(entry.api) and callable(entry.build_call)


def test_pyproject_declares_every_registry_module():
    """Each ops package with a registry.py is declared, and each declaration points at one."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["npusim.operators"]
    modules = {f"ops.{p.parent.name}.registry:ENTRY" for p in (ROOT / "ops").glob("*/registry.py")}
    assert set(declared.values()) == modules


def test_plugin_operator_found_through_entry_points(plugin, capsys):
    assert "toy" in registry.operators()
    assert registry.get("toy").title == "ToyOperator"
    assert main(["predict", "toy", "n=185"]) == 0
    out = capsys.readouterr().out
    assert "predicted time: 100.0 us" in out and "toy advice n=185" in out
    assert main(["predict", "toy", "N=3"]) == 2
    assert "unknown key N (did you mean n?)" in capsys.readouterr().err


def test_plugin_listed_in_predict_help(plugin, capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--help"])
    out = capsys.readouterr().out
    assert "toy: ToyOperator" in out and "pfa: PromptFlashAttentionV2" in out


def test_broken_plugins_are_left_out_with_the_reason(tmp_path, monkeypatch):
    _install_plugin(tmp_path, "[npusim.operators]\nghost = no_such_module:ENTRY\nnumber = "
                              "toy_npusim_plugin:NOT_AN_ENTRY\nrenamed = toy_npusim_plugin:ENTRY\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ops = registry.operators(refresh=True)
        assert {"ghost", "number", "renamed"}.isdisjoint(ops) and "pfa" in ops
        errors = registry.load_errors()
        assert "ModuleNotFoundError" in errors["ghost"]
        assert "not an npusim.registry.OperatorEntry" in errors["number"]
        assert "holds an entry named 'toy'" in errors["renamed"]
        assert len(caught) == 3
        with pytest.raises(AclnnError) as e:
            registry.get("ghost")
        assert "failed to load: ghost" in e.value.message
    finally:
        monkeypatch.undo()
        registry.operators(refresh=True)


def test_get_unknown_operator_lists_the_known_ones():
    with pytest.raises(AclnnError) as e:
        registry.get("PFA")
    assert e.value.status == 161002
    assert "did you mean pfa?" in e.value.message and "fa, pfa, sfag, spkc" in e.value.message


PARAMS = (ProblemParam("B", int), ProblemParam("S", int), ProblemParam("dtype", str, "fp16", ("fp16", "bf16")),
          ProblemParam("sparse_mode", int, 0, {"default": 0, "causal": 2}), ProblemParam("scale", float, 1.0))


def test_parse_fills_defaults_and_accepts_names():
    got = parse_params(PARAMS, ["S=128", "B=2", "sparse_mode=causal", "scale=0.5"])
    assert got == {"B": 2, "S": 128, "dtype": "fp16", "sparse_mode": 2, "scale": 0.5}
    assert list(got) == ["B", "S", "dtype", "sparse_mode", "scale"]
    assert parse_params(PARAMS, {"B": "1", "S": "2", "sparse_mode": "2"})["sparse_mode"] == 2


def test_parse_reports_every_problem_at_once():
    with pytest.raises(AclnnError) as e:
        parse_params(PARAMS, ["b=1", "colour=red", "dtype=fp64", "sparse_mode=1", "scale=x", "oops"], context="op")
    msg = e.value.message
    assert e.value.status == 161002 and msg.startswith("op: ")
    for part in ("unknown key b (did you mean B?)", "unknown key colour (known: B, S, dtype, sparse_mode, scale)",
                 "dtype=fp64 is not supported here: use one of fp16, bf16",
                 "sparse_mode=1 is not supported here: use one of default=0, causal=2",
                 "scale must be a number, got 'x'", "parameters are KEY=VALUE, got 'oops'",
                 "missing required keys B=, S="):
        assert part in msg
    with pytest.raises(AclnnError, match="B given twice"):
        parse_params(PARAMS, ["B=1", "B=2", "S=1"])


@pytest.mark.parametrize("name", ["pfa", "fa", "spkc", "sfag"])
def test_build_call_gives_shapes_the_operator_accepts(name):
    """Every shipped entry's default problem runs in estimate mode through the registry alone."""
    entry = registry.get(name)
    res = entry.call(entry.parse(SMALL[name]), chip="Ascend910B2", mode="estimate")
    assert res.mode == "estimate" and res.cycles > 0 and not res.timeout.exceeded


SMALL = {"pfa": ["B=1", "N=2", "S=256", "D=64"], "fa": ["T=512", "N=2", "D=64", "B=2"],
         "spkc": ["tokens=64", "heads=2", "D=64"], "sfag": ["S1=8", "S2=256", "blocks=4"]}


@pytest.mark.parametrize("name", ["pfa", "fa", "spkc", "sfag"])
def test_every_offered_choice_is_accepted_by_the_operator(name):
    """Each value a ProblemParam offers (dtypes, sparse modes, layouts, cache modes) gives a call the
    operator accepts: the command line never offers what the operator refuses."""
    entry = registry.get(name)
    tried = 0
    for param in entry.params:
        values = param.choices.keys() if isinstance(param.choices, dict) else (param.choices or ())
        for value in values:
            res = entry.call(entry.parse(SMALL[name] + [f"{param.name}={value}"]), mode="estimate")
            assert res.cycles > 0, (param.name, value)
            tried += 1
    assert tried >= 5


def test_sparse_mode_name_is_the_number():
    entry = registry.get("pfa")
    base = ["B=1", "N=2", "S=1024", "D=64"]
    by_name = entry.call(entry.parse(base + ["sparse_mode=causal"]), mode="estimate")
    by_number = entry.call(entry.parse(base + ["sparse_mode=2"]), mode="estimate")
    dense = entry.call(entry.parse(base), mode="estimate")
    assert by_name.cycles == by_number.cycles != dense.cycles
    skipped = [r.extra["estimate"].classes["skipped"][0] for r in (by_name, dense)]
    assert skipped[0] > 0 and skipped[1] == 0  # the causal mask skips the tiles above the diagonal


@pytest.mark.parametrize("pkg", ["prompt_flash_attention_v2", "flash_attention_var_len_score", "scatter_pa_kv_cache",
                                 "sparse_flash_attention_grad"])
def test_launch_module_breaks_the_api_estimate_circle(pkg):
    """estimate.py and launch.py import no api; api.py imports estimate and launch at the top."""
    def imported(path):
        tree = ast.parse((ROOT / "ops" / pkg / path).read_text())
        return {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}

    api = f"ops.{pkg}.api"
    assert api not in imported("estimate.py") and api not in imported("launch.py")
    assert f"ops.{pkg}.launch" in imported("estimate.py")
    top = {n.module for n in ast.parse((ROOT / "ops" / pkg / "api.py").read_text()).body
           if isinstance(n, ast.ImportFrom)}
    assert {f"ops.{pkg}.estimate", f"ops.{pkg}.launch"} <= top



def test_a_source_checkout_declares_its_operators_without_reinstalling():
    """Run from a checkout, the checkout's own pyproject.toml entries are found even if the installed
    metadata predates them (a git worktree run without `pip install -e .`)."""
    found = registry._checkout_entry_points()
    assert found["pfa"].value == "ops.prompt_flash_attention_v2.registry:ENTRY"
    assert found["pfa"].group == registry.GROUP
