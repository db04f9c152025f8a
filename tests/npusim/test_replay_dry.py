"""Shared steps recorded outside simulated time (npusim/replay_dry.py) change speed only.

A shared step's launch-wide first sight is run dry (the stream saved and put back, no GM booking, no time
slice), recorded, then replayed, so the streams that reach the key in the same time slices replay it instead of
running it as written. The tests check that FA varlen's steps are then never run as written after a dry
recording, that a dry run leaves its stream exactly as it found it, and that the trace (names and source lines
numbered in the interpreted run's order included) and every GM booking are the interpreted run's.
"""
from __future__ import annotations

import numpy as np
import pytest

import npusim.replay as replay
import npusim.replay_dry as replay_dry
from npusim.memory.gm import TensorSpec
from tests.npusim.test_replay import _both_booked, assert_same_trace, booked  # noqa: F401 - fixture


def _fa_varlen(seq_q=(316, 1700), seq_kv=(900, 1700), heads=4):
    from ops import flash_attention_var_len_score
    q = TensorSpec((sum(seq_q), heads, 128), np.float16)
    kv = TensorSpec((sum(seq_kv), heads, 128), np.float16)
    return flash_attention_var_len_score(
        q, kv, kv, actual_seq_qlen=list(np.cumsum(seq_q)), actual_seq_kvlen=list(np.cumsum(seq_kv)),
        head_num=heads, scale_value=128 ** -0.5, mode="timing", progress=False)


def _stream_state(unit) -> tuple:
    """Everything of a stream a dry run could change (clocks, pipe queues, flags, rows, queues, buffers)."""
    return (unit.scalar_t, unit.horizon, list(unit.pipe_free), list(unit.pipe_done),
            [list(q) for q in unit.qstarts], [(k, list(q)) for k, q in unit.flags.items()], len(unit.records),
            len(unit.flows), replay._queues(unit), len(unit.queues), [(b._top, b._peak) for b in unit.buffers.values()],
            unit.atomic, unit.replayed, unit.launch, unit.name_ids, unit.src_id)


@pytest.fixture
def dry_runs(monkeypatch):
    """Per dry run: (stream state before, after, what it returned)."""
    log, real = [], replay_dry.run_dry

    def logged(unit, kernel, state, thaw_saved, record):
        before = _stream_state(unit)
        out = real(unit, kernel, state, thaw_saved, record)
        log.append((before, _stream_state(unit), out))
        return out
    monkeypatch.setattr(replay, "run_dry", logged)
    return log


@pytest.mark.unsanitized
def test_fa_varlen_steps_recorded_dry_give_the_interpreted_trace(dry_runs, booked, monkeypatch):  # noqa: F811
    """Every shared key of FA varlen is recorded dry on its first sight; no stream runs a recorded key as written
    (formerly about 460 steps a launch at sim_speed's shape); the trace and the GM bookings are the interpreted
    run's."""
    as_written = []
    real = replay._from_launch

    def outcome(unit, fn, kernel, args, bases, state, full_key):
        entry = real(unit, fn, kernel, args, bases, state, full_key)
        if entry is replay._SEEN:
            as_written.append(fn.__name__)
        return entry
    monkeypatch.setattr(replay, "_from_launch", outcome)
    (on, booked_on), (off, booked_off) = _both_booked(_fa_varlen, booked)
    assert len(dry_runs) > 20 and all(out is not None and out is not replay._NEVER for _, _, out in dry_runs)
    assert as_written == []
    assert_same_trace(on, off)
    assert booked_on == booked_off


@pytest.mark.unsanitized
def test_a_dry_run_leaves_its_stream_as_it_found_it(dry_runs):
    _fa_varlen()
    assert len(dry_runs) > 20
    for before, after, _ in dry_runs:
        assert before == after


@pytest.mark.unsanitized
def test_names_and_lines_first_met_dry_are_numbered_by_the_replay(dry_runs, monkeypatch):
    """The first dry runs meet names and source lines the launch has not numbered: their recordings hold
    placeholders until a replay numbers them, and the trace numbers them as the interpreted run does."""
    seen, real = [], replay_dry.unregistered
    monkeypatch.setattr(replay, "unregistered", lambda ops: seen.append(real(ops)) or seen[-1])
    on = _fa_varlen()
    with replay.disabled():
        off = _fa_varlen()
    placeholders = [u for u in seen if u is not None]
    assert placeholders and all(type(p.id) is int for u in placeholders for p in u.pending)
    settled = [u.resolved for u in placeholders if u.resolved is not None]  # replayed again after their numbering
    assert settled and not any(type(v) is replay_dry._Pending for ops in settled for op in ops for v in op)
    assert list(on.trace.names) == list(off.trace.names) and list(on.trace.sources) == list(off.trace.sources)
    assert_same_trace(on, off)
