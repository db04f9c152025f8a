"""The npusim command: chips, demo, plot, predict; and aclrtSetOpExecuteTimeOut rounding."""
import json

import pytest

from npusim.chip import chip
from npusim.cli import main
from npusim.errors import AclnnError
from npusim.timeouts import CREDIT_S, op_execute_timeout


def test_chips_lists_every_preset(capsys):
    assert main(["chips"]) == 0
    out = capsys.readouterr().out
    for name in ("Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4", "Ascend910_9391", "Ascend310P3"):
        assert name in out


def test_demo_matmul_timing_writes_trace_and_figure(tmp_path, capsys):
    assert main(["demo", "--case", "matmul", "--mode", "timing", "--out", str(tmp_path)]) == 0
    assert "bound unit" in capsys.readouterr().out
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert any(e.get("ph") == "X" for e in trace["traceEvents"])
    assert (tmp_path / "gantt.png").stat().st_size > 1000
    assert main(["plot", str(tmp_path / "trace.json"), "--out", str(tmp_path / "again.png")]) == 0
    assert (tmp_path / "again.png").stat().st_size > 1000


def test_predict_pfa_seed_shape_exceeds(capsys):
    assert main(["predict", "pfa", "B=1", "N=20", "S=2097152", "D=256", "N_kv=1"]) == 0
    out = capsys.readouterr().out
    assert "EXCEEDED" in out and "split S (query rows) into chunks" in out


def test_predict_pfa_small_shape_fits_a_short_limit(capsys):
    assert main(["predict", "pfa", "B=1", "N=8", "S=2048", "D=128", "sparse_mode=2", "timeout=5"]) == 0
    out = capsys.readouterr().out
    assert "within the limit" in out and f"{2 * CREDIT_S:g} s" in out


def test_predict_bad_parameters_give_status_2(capsys):
    assert main(["predict", "pfa", "B=1", "N=2"]) == 2
    assert "S= is required" in capsys.readouterr().err
    assert main(["predict", "pfa", "B=1", "N=2", "S=64", "D=64", "colour=red"]) == 2
    assert "unknown parameter(s) colour" in capsys.readouterr().err


def test_op_execute_timeout_rounds_up_to_whole_credits():
    spec = chip("Ascend910B2")
    assert op_execute_timeout(spec, 5).aicore_timeout_s == pytest.approx(2 * CREDIT_S)
    assert op_execute_timeout(spec, 0).aicore_timeout_s == 1091.0
    assert op_execute_timeout(spec, 5000).aicore_timeout_s == 1091.0  # capped at the maximum
    assert op_execute_timeout(chip("Ascend310P3"), 0).aicore_timeout_s == 547.0
    with pytest.raises(AclnnError) as e:
        op_execute_timeout(spec, -1)
    assert e.value.status == 161002


def test_predict_fa_and_spkc(capsys):
    """The other operators predict too: a 1M-token FA forward fits; a serving-sized scatter takes microseconds."""
    assert main(["predict", "fa", "T=1048576", "N=64", "D=128"]) == 0
    assert "within the limit" in capsys.readouterr().out
    assert main(["predict", "spkc", "tokens=4096", "heads=8", "D=128", "cache_mode=PA_NZ"]) == 0
    out = capsys.readouterr().out
    assert "within the limit" in out and "us =" in out


@pytest.mark.parametrize("op,params", [("pfa", ["B=1", "N=2", "S=256", "D=64", "sparse_mode=2"]),
                                       ("fa", ["T=256", "N=2", "D=64", "B=2", "sparse_mode=3"]),
                                       ("spkc", ["tokens=32", "heads=2", "D=64"])])
def test_check_runs_each_operator_sanitized_and_finds_nothing(op, params, capsys):
    assert main(["check", op, *params]) == 0
    out = capsys.readouterr().out
    assert "instructions checked" in out and "sanitizer: no reports" in out
