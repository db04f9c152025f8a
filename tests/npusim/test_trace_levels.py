"""Trace levels (npusim.trace_sink): full, summary, none and file:PATH give the same cycles and equal
summaries; the Parquet file reads back to the full trace bit for bit; the default keeps rows up to a size.

Streams hand their records to the sink in chunks; CHUNK_ROWS is made tiny here so that busy intervals
stay open across many chunks (the summary's carry) and files hold many row groups.
"""
from __future__ import annotations

import struct

import numpy as np
import pandas as pd
import pytest

import npusim.core
import npusim.trace_sink as ts
from npusim.cli import main as cli_main
from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.examples.matmul import matmul_custom, matmul_tiling
from npusim.examples.vector_add import add_custom, add_tiling
from npusim.launch import GmArg, launch
from npusim.memory.gm import TensorSpec
from ops import (flash_attention_unpadding_score_grad_v5, flash_attention_var_len_score, prompt_flash_attention_v2,
                 scatter_pa_kv_cache)
from ops.common.masks import compressed_causal_mask

F16 = np.float16


def _vector(trace):
    n = 1024 * 24
    x = TensorSpec((n,), F16)
    return launch(add_custom, (GmArg("x", x), GmArg("y", x), GmArg("z", x), add_tiling(n, 3, 1024, 2)),
                  block_dim=3, chip="Ascend910B2", mode="timing", kernel_type="vector", trace=trace)


def _matmul(trace):
    m = n = k = 256
    return launch(matmul_custom, (GmArg("a", TensorSpec((m, k), F16)), GmArg("b", TensorSpec((k, n), F16)),
                                  GmArg("c", TensorSpec((m, n), np.float32)), matmul_tiling(m, n, k, 2)),
                  block_dim=2, chip="Ascend910B2", mode="timing", kernel_type="cube", trace=trace)


def _pfa(trace):
    q = TensorSpec((1, 2, 512, 128), F16)
    return prompt_flash_attention_v2(q, q, q, atten_mask=compressed_causal_mask().astype(bool), num_heads=2,
                                     input_layout="BNSD", sparse_mode=2, mode="timing", trace=trace)


def _pfa_310p(trace):
    q = TensorSpec((1, 2, 256, 64), F16)
    return prompt_flash_attention_v2(q, q, q, num_heads=2, input_layout="BNSD", chip="Ascend310P3",
                                     mode="timing", trace=trace)


def _fa(trace):
    q = TensorSpec((600, 2, 64), F16)
    return flash_attention_var_len_score(q, q, q, actual_seq_qlen=[100, 600], actual_seq_kvlen=[100, 600],
                                         head_num=2, scale_value=0.125, mode="timing", trace=trace)


def _spkc(trace):
    key = np.random.default_rng(0).standard_normal((200, 2, 128)).astype(F16)
    cache = np.zeros((8, 64, 2, 128), F16)
    slots = np.random.default_rng(1).permutation(8 * 64)[:200].astype(np.int32)
    return scatter_pa_kv_cache(key, cache, slots, key, cache.copy(), trace=trace)


def _fag(trace):
    """Three launches (pre, main, post); ``trace`` is the main one's (a file trace is the main one's alone)."""
    q = TensorSpec((300, 2, 64), F16)
    stats = TensorSpec((300, 2, 8), np.float32)
    return flash_attention_unpadding_score_grad_v5(q, None, q, None, q, q, attention_in=q, softmax_max=stats,
                                                  softmax_sum=stats, actual_seq_qlen=[100, 300],
                                                  actual_seq_kvlen=[100, 300], head_num=2, scale_value=0.125,
                                                  atten_mask=compressed_causal_mask().astype(bool), sparse_mode=3,
                                                  mode="timing", trace=trace)


CASES = {"vector": _vector, "matmul": _matmul, "pfa": _pfa, "pfa_310p": _pfa_310p, "fa": _fa, "spkc": _spkc,
         "fag": _fag}


def assert_same_summary(a, b):
    pd.testing.assert_frame_equal(a.pipes, b.pipes)
    pd.testing.assert_frame_equal(a.bound, b.bound)
    assert (a.total_cycles, a.time_us, a.instructions, a.total_bytes, a.total_flops, a.chip) == \
           (b.total_cycles, b.time_us, b.instructions, b.total_bytes, b.total_flops, b.chip)
    assert str(a) == str(b)


@pytest.mark.parametrize("case,chunk", [(c, 3) for c in CASES] + [("pfa", ts.CHUNK_ROWS)])
def test_levels_agree(case, chunk, tmp_path, monkeypatch):
    """Same cycles at every level; summary and file summaries equal the full trace's; the file reads back
    to the full trace's columns, flows, names and sources exactly."""
    monkeypatch.setattr(npusim.core, "CHUNK_ROWS", chunk)
    run = CASES[case]
    full = run("full")
    assert type(full.trace).__name__ == "Trace"
    want = full.trace.summary()
    path = tmp_path / "t.parquet"
    for level in ("summary", f"file:{path}"):
        res = run(level)
        assert res.cycles == full.cycles
        assert len(res.trace) == len(full.trace)
        assert_same_summary(res.trace.summary(), want)
    none = run("none")
    assert none.trace is None and none.cycles == full.cycles
    for name, side in getattr(full, "extra", {}).get("launches", {}).items():  # FAG's pre and post launches
        if name != "main":
            assert_same_summary(res.extra["launches"][name].trace.summary(), side.trace.summary())
            assert none.extra["launches"][name].trace is None
    back = ts.read_trace_file(path)
    for k, col in full.trace.columns.items():
        assert np.array_equal(col, back.columns[k]), k
    for k, col in full.trace.flows.items():
        assert np.array_equal(col, back.flows[k]), k
    assert back.names == full.trace.names and back.sources == full.trace.sources
    assert back.clock_hz == full.trace.clock_hz


def test_summary_carry_is_needed(monkeypatch):
    """With 3-row chunks, intervals of one lane do span chunks (the carry is exercised, not idle)."""
    monkeypatch.setattr(npusim.core, "CHUNK_ROWS", 3)
    seen = []
    orig = ts.SummarySink.add_columns

    def spy(self, core, sub, c, watermark):
        orig(self, core, sub, c, watermark)
        seen.append(sum(len(s) for s in self.streams[(core, sub)].open_start))
    monkeypatch.setattr(ts.SummarySink, "add_columns", spy)
    _pfa("summary")
    assert max(seen) > 0 and len(seen) > 100


def test_file_trace_exports_and_plot(tmp_path):
    """A file-level trace's df, Chrome JSON and Gantt come from the file; `npusim plot` reads the file."""
    path = tmp_path / "run.parquet"
    full, res = _pfa("full"), _pfa(f"file:{path}")
    pd.testing.assert_frame_equal(res.trace.df, full.trace.df)
    res.trace.to_chrome_json(tmp_path / "a.json")
    full.trace.to_chrome_json(tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert cli_main(["plot", str(path), "--out", str(tmp_path / "g.png"), "--max-cores", "2"]) == 0
    assert (tmp_path / "g.png").stat().st_size > 1000


def test_summary_trace_refuses_rows():
    res = _vector("summary")
    with pytest.raises(AclnnError, match="trace='summary' does not keep") as e:
        res.trace.df
    assert e.value.status == ACLNN_ERR_PARAM_INVALID


@pytest.mark.parametrize("bad", ["ful", "file:", 3, "file:/no/such/dir/t.parquet"])
def test_bad_level_is_an_aclnn_error(bad):
    with pytest.raises(AclnnError, match="trace") as e:
        _pfa(bad)
    assert e.value.status == ACLNN_ERR_PARAM_INVALID


def test_not_a_trace_file(tmp_path):
    p = tmp_path / "x.parquet"
    p.write_bytes(b"not parquet")
    with pytest.raises(AclnnError, match="not an npusim Parquet trace"):
        ts.read_trace_file(p)
    with pytest.raises(AclnnError, match="not found"):
        ts.read_trace_file(tmp_path / "missing.parquet")


def test_failed_launch_leaves_no_file(tmp_path):
    def kernel():
        from npusim.kernel import HardEvent, WaitFlag
        WaitFlag(HardEvent.MTE2_V)
    path = tmp_path / "t.parquet"
    with pytest.raises(Exception, match="no SetFlag"):
        launch(kernel, (), block_dim=1, chip="Ascend910B2", mode="timing", kernel_type="vector",
               trace=f"file:{path}")
    assert not path.exists()


def test_default_level_keeps_rows_up_to_the_limit(monkeypatch):
    """Default: the full trace while small; past FULL_TRACE_MAX_ROWS, the summary only, with a warning."""
    monkeypatch.setattr(npusim.core, "CHUNK_ROWS", 64)
    full = _pfa(None)
    assert type(full.trace).__name__ == "Trace"
    monkeypatch.setattr(ts, "FULL_TRACE_MAX_ROWS", 1000)
    with pytest.warns(UserWarning, match="keeping its summary only"):
        res = _pfa(None)
    assert type(res.trace).__name__ == "SummaryTrace"
    assert_same_summary(res.trace.summary(), full.trace.summary())


def test_progress_bar_shows_simulated_time_and_eta(monkeypatch, capsys):
    """progress=True draws the bar (here without the display delay) with simulated µs and an ETA from the
    estimate; progress=False and a non-terminal stderr draw nothing; cycles are unchanged."""
    import npusim.progress as pg

    monkeypatch.setattr(pg, "PROGRESS_DELAY_S", 0.0)
    monkeypatch.setattr(pg, "PROGRESS_STEP", 1e-4)
    base = _pfa("none").cycles
    capsys.readouterr()
    q = TensorSpec((1, 2, 512, 128), F16)
    res = prompt_flash_attention_v2(q, q, q, atten_mask=compressed_causal_mask().astype(bool), num_heads=2,
                                    input_layout="BNSD", sparse_mode=2, mode="timing", trace="none", progress=True)
    err = capsys.readouterr().err
    assert res.cycles == base
    assert "simulated time" in err and " us [" in err and "<" in err  # position, total and remaining time
    _pfa("none")  # progress=None under pytest: stderr is not a terminal
    assert capsys.readouterr().err == ""


def test_cli_run_trace_levels(tmp_path, capsys):
    """`npusim run ... --trace summary` prints the same summary as the default level; file:PATH writes a
    Parquet trace that `npusim plot` draws."""
    args = ["run", "pfa", "B=1", "N=2", "S=256", "D=64"]
    assert cli_main(args) == 0
    default = capsys.readouterr().out
    assert cli_main(args + ["--trace", "summary"]) == 0
    assert capsys.readouterr().out == default
    path = tmp_path / "run.parquet"
    assert cli_main(args + ["--trace", f"file:{path}"]) == 0
    assert cli_main(["plot", str(path), "--out", str(tmp_path / "g.png")]) == 0
    assert (tmp_path / "g.png").is_file()
    assert cli_main(args + ["--trace", "bogus"]) == 2
    assert "trace: must be one of" in capsys.readouterr().err


def test_packed_blocks_placed_among_records():
    """Replayed steps hand rows and flag arrows as packed float64 blocks with a layout of what stays put
    (npusim/replay_code.py, trace_sink.StepLayout): the sink places them where the stream made them, the same
    values as flat records would give: a SetFlag row's start is its end less the flag cost, an arrow's constants
    and its source core and sub-core come from the layout and the stream; two layouts interleave."""
    rng = np.random.default_rng(5)
    fc = 3.0
    records, flows, blocks, flow_blocks, flat_rows, flat_flows = [], [], [], [], [], []
    # a wait row and a set row (start left to the flush); arrows: (src, fire) packed, dst pipe and label constant
    table = np.array([[7, 1, 0, 0, 0, 0, 13], [7, 2, np.nan, 0, 0, 0, 1]], np.float64)
    arrows = np.array([[0, 0, 1, 0, 3, 0, 0]], np.float64)
    layouts = [ts.StepLayout(table, fc, arrows),
               ts.StepLayout(np.array([[4, 5, 0, 0, 2048, 0, 9]], np.float64), fc, np.zeros((0, 7)))]
    for step in range(30):
        if rng.random() < 0.4:  # an interpreted row and arrow (floats and ints, as the engine appends them)
            row = (7, 3, float(rng.uniform(0, 1e6)), float(rng.uniform(0, 1e6)), 0, 0, 9)
            arrow = (1, float(rng.uniform(0, 1e6)), 4, float(rng.uniform(0, 1e6)), 2, 0, 1)
            records.extend(row)
            flat_rows += row
            flows.extend(arrow)
            flat_flows += arrow
        cycles = rng.uniform(0, 1e6, 4).tolist()
        layout = layouts[int(rng.random() < 0.3)]
        if layout is layouts[0]:
            blocks.append((len(records), layout, struct.pack("dd8xd", cycles[0], cycles[1], cycles[3])))
            flat_rows += [7, 1, cycles[0], cycles[1], 0, 0, 13, 7, 2, cycles[3] - fc, cycles[3], 0, 0, 1]
            flow_blocks.append((len(flows), layout, struct.pack("dd8xd24x", 5.0, cycles[2], cycles[1])))
            flat_flows += [5.0, cycles[2], 1.0, cycles[1], 3.0, 0.0, 1.0]
        else:
            blocks.append((len(records), layout, struct.pack("2d", cycles[0], cycles[1])))
            flat_rows += [4, 5, cycles[0], cycles[1], 2048, 0, 9]
    got = ts.record_columns(0, 1, records, blocks)
    want = ts.record_columns(0, 1, flat_rows)
    for k in want:
        assert got[k].tobytes() == want[k].tobytes(), k
    # a chunk of blocks only, of two layouts and of one (converted by tiling its table's columns)
    for only in ([(0,) + b[1:] for b in blocks], [(0,) + b[1:] for b in blocks if b[1] is layouts[0]]):
        got = ts.record_columns(0, 1, [], only)
        flat = []
        for _, t, packed in only:
            values = iter(np.frombuffer(packed).tolist())
            for r in t.table.tolist():
                start = next(values)
                end = next(values)
                flat += r[:2] + [end - fc if np.isnan(r[2]) else start, end] + r[4:]
        want = ts.record_columns(0, 1, flat)
        for k in want:
            assert got[k].tobytes() == want[k].tobytes(), k
    got = ts.flow_columns(0, 1, ts.flow_values(flows, flow_blocks, 0, 1))
    want = ts.flow_columns(0, 1, flat_flows)
    for k in want:
        assert got[k].tobytes() == want[k].tobytes(), k
    got = ts.flow_columns(0, 1, ts.flow_values([], flow_blocks, 0, 1))  # arrows of replayed steps only
    want = ts.flow_columns(0, 1, [v for a in np.reshape(flat_flows, (-1, 7)).tolist() if a[0] == 5.0 for v in a])
    for k in want:
        assert got[k].tobytes() == want[k].tobytes(), k
