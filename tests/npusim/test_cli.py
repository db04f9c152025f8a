"""The npusim command: chips, demo, plot, predict, run; first-contact messages; aclrtSetOpExecuteTimeOut rounding."""
import json
import re

import pytest

from npusim.calibration import LAUNCH_OVERHEAD_S
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
    out = capsys.readouterr().out
    assert "bound unit" in out
    # the modeled time is the kernel plus the launch overhead; the trace is the kernel alone
    total, kernel, overhead = (float(re.search(pat, out).group(1)) for pat in (
        r"modeled time ([\d.]+) us", r"= kernel ([\d.]+) us", r"launch overhead ([\d.]+) us"))
    assert total == pytest.approx(kernel + overhead, abs=0.11) and overhead == pytest.approx(LAUNCH_OVERHEAD_S * 1e6)
    trace_us = float(re.search(r"the trace below is the kernel alone: ([\d.]+) us", out).group(1))
    assert trace_us == pytest.approx(kernel, abs=0.06)
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
    assert "missing required keys S=, D=" in capsys.readouterr().err
    assert main(["predict", "pfa", "B=1", "N=2", "S=64", "D=64", "colour=red"]) == 2
    assert "unknown key colour (known: B, N, S, D" in capsys.readouterr().err


def test_predict_lower_case_key_and_all_missing_keys_in_one_message(capsys):
    assert main(["predict", "pfa", "b=1", "n=8"]) == 2
    err = capsys.readouterr().err
    assert "unknown key b (did you mean B?)" in err and "unknown key n (did you mean N?)" in err
    assert "missing required keys B=, N=, S=, D=" in err
    assert main(["predict", "pfa", "B=1", "N=8", "S=2048", "D=128", "sparse_mode=diagonal"]) == 2
    assert "an integer or one of default=0, causal=2, left_up_causal=2, right_down_causal=3, band=4" in \
        capsys.readouterr().err
    assert main(["predict", "pfb", "B=1"]) == 2
    assert "unknown operator 'pfb' (did you mean pfa?)" in capsys.readouterr().err


def test_predict_sparse_mode_by_name(capsys):
    shape = ["predict", "pfa", "B=1", "N=8", "S=4096", "D=128"]
    assert main(shape + ["sparse_mode=causal"]) == 0
    by_name = capsys.readouterr().out
    assert main(shape + ["sparse_mode=2"]) == 0
    assert capsys.readouterr().out == by_name and "skipped" in by_name


def test_predict_says_how_the_timeout_was_rounded(capsys):
    assert main(["predict", "spkc", "tokens=64", "heads=2", "D=64", "timeout=600"]) == 0
    out = capsys.readouterr().out
    assert "601.295 s (timeout=600 s rounded up to 140 whole STARS credits of 4.29497 s" in out
    assert main(["predict", "spkc", "tokens=64", "heads=2", "D=64", "timeout=5000"]) == 0
    assert "1091 s (timeout=5000 s is more than the chip's maximum)" in capsys.readouterr().out


def test_help_texts(capsys):
    for argv, words in ((["demo", "--help"], ("--chip", "npusim chips", "created after a successful run")),
                        (["plot", "--help"], ("AI Cores drawn", "default: the trace's name with .png")),
                        (["run", "--help"], ("spkc: ScatterPaKvCache", "tokens written"))):
        with pytest.raises(SystemExit):
            main(argv)
        out = " ".join(capsys.readouterr().out.split())
        for w in words:
            assert w in out, (argv, w)


def test_plot_missing_file(tmp_path, capsys):
    assert main(["plot", str(tmp_path / "nope.json")]) == 2
    assert f"file not found: {tmp_path / 'nope.json'}" in capsys.readouterr().err


def test_demo_on_310p_runs_pfa_and_refuses_matmul_up_front(tmp_path, capsys, monkeypatch):
    """310P has no sparse_mode 2 and no FixPipe to GM: the pfa demo takes the full-mask form, matmul is refused
    before anything is written (the pfa case is made smaller here to keep the test short)."""
    from ops.prompt_flash_attention_v2 import demo

    monkeypatch.setattr(demo, "CASE", dict(B=1, N=1, S=256, D=64))
    out = tmp_path / "matmul"
    assert main(["demo", "--case", "matmul", "--chip", "Ascend310P3", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "does not have (it runs on Ascend910B1" in err and not out.exists()
    out = tmp_path / "pfa"
    assert main(["demo", "--chip", "Ascend310P3", "--mode", "timing", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    pfa_launch_us = LAUNCH_OVERHEAD_S * 1e6  # one launch overhead for every operator
    assert "as sparse_mode 0 with a full 256x256 mask" in text and f"launch overhead {pfa_launch_us:.1f} us" in text
    assert (out / "gantt.png").stat().st_size > 1000


def test_run_timing_writes_trace(tmp_path, capsys):
    assert main(["run", "spkc", "tokens=256", "heads=2", "D=64", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ScatterPaKvCache tokens=256 heads=2 D=64" in out and "bound unit" in out
    assert json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert main(["run", "spkc", "tokens=256", "heads=2", "D=64", "--mode", "estimate"]) == 0
    out = capsys.readouterr().out  # no trace: the total alone, and the verdict
    assert "cycles), launch included" in out and "AI Core timeout 1091 s: ok" in out


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


def test_demo_fa_comes_from_the_registry(tmp_path, capsys, monkeypatch):
    """The fa case is the operator entry's demo (no CLI code names it); refused up front on 310P."""
    from ops.flash_attention_var_len_score import demo

    assert main(["demo", "--case", "fa", "--chip", "Ascend310P3", "--out", str(tmp_path / "no")]) == 2
    assert "runs on Atlas A2/A3" in capsys.readouterr().err and not (tmp_path / "no").exists()
    monkeypatch.setattr(demo, "SEQ_LENS", (384, 128))  # smaller than the real demo, to keep the test short
    monkeypatch.setattr(demo, "N", 1)
    assert main(["demo", "--case", "fa", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    err = float(re.search(r"vs the float64 formula: max \|diff\| = (\S+)", out).group(1))
    assert err < 2e-3 and "sequences 384, 128" in out and (tmp_path / "trace.json").exists()


@pytest.mark.parametrize("op,params", [("pfa", ["B=1", "N=2", "S=256", "D=64", "sparse_mode=2"]),
                                       ("fa", ["T=256", "N=2", "D=64", "B=2", "sparse_mode=3"]),
                                       ("spkc", ["tokens=32", "heads=2", "D=64"])])
def test_check_runs_each_operator_sanitized_and_finds_nothing(op, params, capsys):
    assert main(["check", op, *params]) == 0
    out = capsys.readouterr().out
    assert "instructions checked" in out and "sanitizer: no reports" in out


def test_check_counts_the_instructions_of_every_launch_of_the_operator(capsys):
    """FAG is three launches (pre zeroes the workspace, main, post converts it): the summary counts all three,
    more than the main launch's trace holds."""
    from npusim.sanitizer import sanitizing
    from ops.flash_attention_unpadding_score_grad_v5.registry import ENTRY

    problem = ["T=256", "N=1", "D=64"]
    assert main(["check", "fag", *problem]) == 0
    out = capsys.readouterr().out
    m = re.search(r"([\d,]+) instructions checked in (\d+) launches", out)
    assert m is not None, out
    with sanitizing() as found:
        res = ENTRY.call(ENTRY.parse(problem), mode="timing")
    assert int(m.group(2)) == found.launches == 3
    assert int(m.group(1).replace(",", "")) == found.instructions > len(res.trace)
