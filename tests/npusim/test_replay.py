"""Replay of recorded kernel steps in timing mode (npusim/replay.py) changes speed only.

A replayed step hands its recorded calls to the same CoreUnit methods, so the trace (every column, flag
arrow, name and source line) and the cycles equal those of the run with every step interpreted. The tests
check that on operator runs where steps are replayed many times, and that steps the replay cannot
reproduce (SyncAll, a SetAtomic state left changed) and sanitized runs are always interpreted.
"""
from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import pytest

import npusim.replay as replay
from npusim.chip import chip as get_chip
from npusim.kernel import (ASCEND_IS_AIC, Adds, CrossCoreSetFlag, CrossCoreWaitFlag, DataCopy, GlobalTensor, Pipe,
                           PipeBarrier, SetAtomicAdd, SetAtomicNone, SyncAll, TPipe, TPosition, TQue)
from npusim.launch import GmArg, launch
from npusim.memory.gm import TensorSpec


@pytest.fixture
def counted(monkeypatch):
    """Counts of replayed steps and replayed calls: a replay runs its recording's calls once, by the loop
    (replay._replay_calls) or by the recording's generated function (replay_code.compiled's)."""
    counts = {"steps": 0, "calls": 0}
    loop, real = replay._replay_calls, replay.compiled

    def looped(unit, ops, gm_bases):
        counts["steps"] += 1
        counts["calls"] += len(ops)
        return loop(unit, ops, gm_bases)

    def compiled(ops, *args):
        fn = real(ops, *args)

        def counting(unit, gm_bases):
            counts["steps"] += 1
            counts["calls"] += len(ops)
            return fn(unit, gm_bases)
        return None if fn is None else counting
    monkeypatch.setattr(replay, "_replay_calls", looped)
    monkeypatch.setattr(replay, "compiled", compiled)
    return counts


@pytest.fixture
def booked(monkeypatch):
    """Every GM transfer's (buffer, byte address, bytes), in booking order: each booking touches its buffer's
    L2 residency once (GmBuffer.touch, called by Launch.book_gm and by a generated step's own booking)."""
    from npusim.memory.gm import GmBuffer
    log, real = [], GmBuffer.touch
    monkeypatch.setattr(GmBuffer, "touch", lambda self, byte, nbytes: log.append(
        (self.name, byte, nbytes)) or real(self, byte, nbytes))
    return log


def _both_booked(call, booked: list):
    """(replayed, interpreted) results of *call*, each with the GM bookings it made."""
    out = []
    for replayed in (True, False):
        booked.clear()
        with replay.disabled() if not replayed else nullcontext():
            out.append((call(), list(booked)))
    return out


def assert_same_trace(a, b):
    ta, tb = a.trace, b.trace
    assert sorted(ta.columns) == sorted(tb.columns)
    for key in ta.columns:
        x, y = np.asarray(ta.columns[key]), np.asarray(tb.columns[key])
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), key
    for key in ta.flows:
        assert np.asarray(ta.flows[key]).tobytes() == np.asarray(tb.flows[key]).tobytes(), key
    assert list(ta.names) == list(tb.names)
    assert list(ta.sources) == list(tb.sources)
    assert a.cycles == b.cycles


def _both(call):
    """(replayed, interpreted) results of *call*."""
    on = call()
    with replay.disabled():
        off = call()
    return on, off


@pytest.mark.parametrize("heads, kv_heads, seq, trace", [(2, 1, 2048, "full"), (1, 1, 4096, "summary")])
def test_pfa_replayed_steps_give_the_interpreted_trace(counted, heads, kv_heads, seq, trace):
    from ops import prompt_flash_attention_v2
    q = TensorSpec((1, heads, seq, 64), np.float16)
    kv = TensorSpec((1, kv_heads, seq, 64), np.float16)
    two_cores = get_chip("Ascend910B2").replace(aic_count=2, vector_core_count=4)  # many steps per core
    on, off = _both(lambda: prompt_flash_attention_v2(q, kv, kv, num_heads=heads, num_key_value_heads=kv_heads,
                                                      input_layout="BNSD", mode="timing", trace=trace,
                                                      chip=two_cores, progress=False))
    assert counted["steps"] > 40 and counted["calls"] > 15_000
    assert on.time_us == off.time_us
    if trace == "full":
        assert_same_trace(on, off)
    else:
        a, b = on.trace.summary(), off.trace.summary()
        assert a.pipes.equals(b.pipes) and a.bound.equals(b.bound)
        assert (a.total_cycles, a.instructions, a.total_bytes, str(a)) == \
            (b.total_cycles, b.instructions, b.total_bytes, str(b))


def test_summary_of_replayed_rows_gives_the_full_trace_summary(counted, monkeypatch):
    """With trace='summary' a replayed step's rows reach the sink as blocks of rows; in small chunks, so that busy
    intervals stay open across many, the summary equals the one computed from the full trace's rows."""
    import npusim.core
    from ops import prompt_flash_attention_v2
    monkeypatch.setattr(npusim.core, "CHUNK_ROWS", 64)
    q = TensorSpec((1, 1, 4096, 64), np.float16)
    two_cores = get_chip("Ascend910B2").replace(aic_count=2, vector_core_count=4)

    def run(trace):
        return prompt_flash_attention_v2(q, q, q, num_heads=1, input_layout="BNSD", mode="timing", trace=trace,
                                         chip=two_cores, progress=False)
    summ = run("summary")
    assert counted["calls"] > 15_000
    full = run("full")
    a, b = summ.trace.summary(), full.trace.summary()
    assert a.pipes.equals(b.pipes) and a.bound.equals(b.bound)
    assert (a.total_cycles, a.instructions, a.total_bytes, str(a)) == \
        (b.total_cycles, b.instructions, b.total_bytes, str(b))
    assert len(summ.trace) == len(full.trace)


# -- a small mix kernel: a vector step replayed, a step with cross-core flags never --------------------------
def _mix_kernel(x: GlobalTensor, z: GlobalTensor, steps: int, extra: str):
    class K:
        def Init(self):
            self.pipe = TPipe()
            self.que = TQue(TPosition.VECIN, 2)
            self.pipe.InitBuffer(self.que, 2, 2048)
            self.flip = 0  # kernel state a step reads and changes (part of the key)

        def Step(self, i):
            t = self.que.AllocTensor(np.float16)
            DataCopy(t, x[(i % 8) * 1024], 1024)
            self.que.EnQue(t)
            t = self.que.DeQue(np.float16)
            Adds(t, t, 1.0, 1024)
            PipeBarrier(Pipe.V)
            if extra == "cross":
                CrossCoreSetFlag(1, Pipe.V)
            elif extra == "sync":
                SyncAll()
            elif extra == "all":
                PipeBarrier()  # PIPE_ALL
            elif extra == "atomic":  # atomic adds on and off again inside the step
                SetAtomicAdd(np.float32)
                SetAtomicNone()
            elif extra == "atomic_toggle":  # every step leaves the SetAtomic state changed
                SetAtomicNone() if self.flip else SetAtomicAdd(np.float32)
            self.que.FreeTensor(t)
            self.flip ^= 1

    K.Step = replay.replayable(lambda k, i: ((), (x[(i % 8) * 1024],)), state=("flip",))(K.Step)
    if ASCEND_IS_AIC():
        for _ in range(steps if extra == "cross" else 0):
            CrossCoreWaitFlag(1, Pipe.MTE2)
        return
    k = K()
    k.Init()
    for i in range(steps):
        k.Step(i)
    assert k.flip == steps % 2  # the replayed steps restored it too


@pytest.mark.parametrize("extra", ["none", "cross", "sync", "atomic", "atomic_toggle"])
def test_cross_core_flags_replay_live_and_sync_all_never(counted, extra):
    """A step's cross-core flags are replayed as live calls into the launch; a step with a SyncAll, or one that
    leaves the SetAtomic state other than it found it, is always interpreted (a step that switches atomic adds
    on and off again is replayed). Either way the trace is the interpreted one."""
    x = TensorSpec((8192,), np.float16)

    def run():
        return launch(_mix_kernel, (GmArg("x", x), GmArg("z", x), 40, extra), block_dim=1, chip="Ascend910B2",
                      mode="timing", kernel_type="mix", progress=False)
    on, off = _both(run)
    assert_same_trace(on, off)
    if extra in ("sync", "atomic_toggle"):
        assert counted["steps"] == 0
    else:
        assert counted["steps"] >= 2 * 30  # both vector cores replay after a few recorded steps


def _addressed_kernel(x: GlobalTensor, z: GlobalTensor, steps: int, skew: int):
    """Steps declared with ``bases=``: the key gives the tile's byte address (*skew* bytes off if asked)."""
    class K:
        def Init(self):
            self.pipe = TPipe()
            self.que = TQue(TPosition.VECIN, 2)
            self.pipe.InitBuffer(self.que, 2, 2048)

        def Step(self, i):
            t = self.que.AllocTensor(np.float16)
            DataCopy(t, x[(i % 8) * 1024], 1024)
            self.que.EnQue(t)
            t = self.que.DeQue(np.float16)
            DataCopy(z[(i % 8) * 1024], t, 1024)
            self.que.FreeTensor(t)

    K.Step = replay.replayable(lambda k, i: ((), (2 * (i % 8) * 1024 + skew, 2 * (i % 8) * 1024)),
                               bases=lambda k, i: (x[(i % 8) * 1024], z[(i % 8) * 1024]))(K.Step)
    k = K()
    k.Init()
    for i in range(steps):
        k.Step(i)


def test_bases_given_apart_replay_to_the_interpreted_trace_and_must_agree_with_the_key(counted, booked):
    """A step whose key gives its bases' byte addresses (``bases=`` names the tensors) replays to the
    interpreted trace; a key whose addresses are not the bases' is refused when the step is recorded."""
    from npusim.errors import NpusimError
    x = TensorSpec((8192,), np.float16)

    def run(skew):
        return launch(_addressed_kernel, (GmArg("x", x), GmArg("z", x), 40, skew), block_dim=1,
                      chip="Ascend910B2", mode="timing", kernel_type="vector", progress=False)
    (on, on_booked), (off, off_booked) = _both_booked(lambda: run(0), booked)
    assert_same_trace(on, off)
    assert on_booked == off_booked
    assert counted["steps"] >= 30
    with pytest.raises(NpusimError, match="base addresses"):
        run(2)


def test_full_mode_and_sanitized_runs_interpret_every_step(counted):
    x = np.ones(8192, np.float16)
    for kwargs in (dict(mode="full"), dict(mode="timing", sanitize=True)):
        launch(_mix_kernel, (GmArg("x", x), GmArg("z", x), 20, "none"), block_dim=1, chip="Ascend910B2",
               kernel_type="mix", progress=False, **kwargs)
    assert counted["steps"] == 0


def test_vector_add_tiles_replay_to_the_interpreted_trace(counted):
    """The vector-add sample's tiles (CopyIn, Compute, CopyOut) are replayed, the tail tile too once seen."""
    from npusim.examples.vector_add import add_custom, add_tiling
    n = 1024 * 300 + 512
    x = TensorSpec((n,), np.float16)

    def run():
        return launch(add_custom, (GmArg("x", x), GmArg("y", x), GmArg("z", x), add_tiling(n, 2, 1024, 2)),
                      block_dim=2, chip="Ascend910B2", mode="timing", kernel_type="vector", progress=False)
    on, off = _both(run)
    assert counted["steps"] > 250
    assert_same_trace(on, off)


@pytest.mark.parametrize("seq_q, seq_kv, heads", [([2048], [2048], 8), ([316, 1700], [900, 1700], 4)])
def test_fa_varlen_recordings_shared_by_streams_give_the_interpreted_trace(counted, monkeypatch, booked, seq_q,
                                                                            seq_kv, heads):
    """FA varlen's steps are shared: a recording made in one stream is replayed in the others with their own
    queues and workspace slots (regions of one GM buffer), and a step seen to follow another in one stream is
    found from it in the others (replay._shared_successor); the trace and every GM transfer's buffer, address
    and size are the interpreted run's."""
    from ops import flash_attention_var_len_score
    relocated, followed = [], []
    real = replay._Shared.relocated
    monkeypatch.setattr(replay._Shared, "relocated", lambda self, unit: relocated.append(unit) or real(self, unit))
    real_successor = replay._shared_successor
    monkeypatch.setattr(replay, "_shared_successor", lambda unit, prev, link: followed.append(
        real_successor(unit, prev, link)) or followed[-1])
    q = TensorSpec((sum(seq_q), heads, 128), np.float16)
    kv = TensorSpec((sum(seq_kv), heads, 128), np.float16)
    (on, booked_on), (off, booked_off) = _both_booked(lambda: flash_attention_var_len_score(
        q, kv, kv, actual_seq_qlen=list(np.cumsum(seq_q)), actual_seq_kvlen=list(np.cumsum(seq_kv)),
        head_num=heads, scale_value=128 ** -0.5, mode="timing", progress=False), booked)
    assert counted["steps"] > 50 and len({id(u) for u in relocated}) > 10
    assert sum(e is not None for e in followed) > 10
    assert_same_trace(on, off)
    assert booked_on == booked_off


@pytest.mark.parametrize("dtype, mask, pse", [(np.float16, "causal", False), (np.float16, "causal", True),
                                             (np.float32, None, False)])
def test_fa_varlen_causal_slices_and_fp32_chunks_replay_to_the_interpreted_trace(counted, booked, dtype, mask, pse):
    """FA varlen's row slices with a causal mask and an alibi pse (the mask window's and the pse rows'
    addresses move with the slice) and its fp32 P V chunks (V^T is a workspace region) are replayed; the
    trace and every GM transfer's buffer, address and size are the interpreted run's."""
    from ops import flash_attention_var_len_score
    from ops.common.masks import compressed_causal_mask
    extra = {} if mask is None else {"atten_mask": compressed_causal_mask().astype(bool), "sparse_mode": 3}
    if pse:
        extra["real_shift"] = TensorSpec((1, 2, 1024, 1000), dtype)
    q = TensorSpec((1300, 2, 64), dtype)
    (on, booked_on), (off, booked_off) = _both_booked(lambda: flash_attention_var_len_score(
        q, q, q, actual_seq_qlen=[300, 1300], actual_seq_kvlen=[300, 1300], head_num=2, scale_value=0.125,
        mode="timing", progress=False, **extra), booked)
    assert counted["steps"] > 100
    assert_same_trace(on, off)
    assert booked_on == booked_off


@pytest.mark.parametrize("heads, kv_heads, seq, dim, split", [(4, 2, 2048, 64, "vector"), (2, 1, 4096, 128, "cube")])
def test_pfa_recordings_shared_by_streams_give_the_interpreted_trace(counted, monkeypatch, booked, heads, kv_heads,
                                                                     seq, dim, split):
    """PFA's steps are shared in both core splits: a recording made in one stream is replayed in the others with
    their own workspace slots (regions of the workspace buffer) and queue flags; the trace and every GM
    transfer's buffer, address and size are the interpreted run's."""
    from ops import prompt_flash_attention_v2
    relocated = []
    real = replay._Shared.relocated
    monkeypatch.setattr(replay._Shared, "relocated", lambda self, unit: relocated.append(unit) or real(self, unit))
    q = TensorSpec((1, heads, seq, dim), np.float16)
    kv = TensorSpec((1, kv_heads, seq, dim), np.float16)
    eight_cores = get_chip("Ascend910B2").replace(aic_count=8, vector_core_count=16)
    (on, booked_on), (off, booked_off) = _both_booked(lambda: prompt_flash_attention_v2(
        q, kv, kv, num_heads=heads, num_key_value_heads=kv_heads, input_layout="BNSD", mode="timing",
        chip=eight_cores, progress=False), booked)
    assert on.tiling.splitCoreMode == split
    assert counted["steps"] > 50 and len({id(u) for u in relocated}) > 10
    assert_same_trace(on, off)
    assert booked_on == booked_off


# -- recordings replayed often run as generated functions (npusim/replay_code.py) -----------------------------
@pytest.fixture
def compiled_at_once(monkeypatch):
    """Every recording gets its generated function at its first replay; the functions made are counted."""
    import npusim.replay_code as replay_code
    made = []
    real = replay_code.compiled
    monkeypatch.setattr(replay, "COMPILE_AFTER", 0)
    monkeypatch.setattr(replay, "COMPILE_NEW_AFTER", 0)
    monkeypatch.setattr(replay, "compiled", lambda *a: made.append(a[0]) or real(*a))
    return made


@pytest.mark.parametrize("extra", ["none", "cross", "all"])
@pytest.mark.parametrize("trace", ["full", "summary"])
def test_generated_replay_gives_the_interpreted_trace(compiled_at_once, monkeypatch, extra, trace):
    """A step run by its generated function (cross-core flags live, a PipeBarrier, flags set and waited
    within the step, PIPE_ALL, rows kept to the step's end as blocks and handed over in small chunks) gives the
    interpreted trace, and the summary of the full one."""
    import npusim.core
    monkeypatch.setattr(npusim.core, "CHUNK_ROWS", 64)
    x = TensorSpec((8192,), np.float16)

    def run(trace=trace):
        return launch(_mix_kernel, (GmArg("x", x), GmArg("z", x), 40, extra), block_dim=1, chip="Ascend910B2",
                      mode="timing", kernel_type="mix", progress=False, trace=trace)
    on = run()
    assert compiled_at_once
    with replay.disabled():
        off = run("full")
    if trace == "full":
        assert_same_trace(on, off)
    else:
        a, b = on.trace.summary(), off.trace.summary()
        assert (a.total_cycles, a.instructions, a.total_bytes, str(a)) == \
            (b.total_cycles, b.instructions, b.total_bytes, str(b))


def test_generated_replay_of_shared_steps_books_gm_as_interpreted(compiled_at_once, booked):
    """FA varlen's shared steps (GM transfers relative to workspace regions, queue flags relocated to each
    stream) run by generated functions: trace and every GM booking equal the interpreted run's."""
    from ops import flash_attention_var_len_score
    q = TensorSpec((2016, 4, 128), np.float16)
    kv = TensorSpec((2600, 4, 128), np.float16)
    (on, booked_on), (off, booked_off) = _both_booked(lambda: flash_attention_var_len_score(
        q, kv, kv, actual_seq_qlen=[316, 2016], actual_seq_kvlen=[900, 2600], head_num=4,
        scale_value=128 ** -0.5, mode="timing", progress=False), booked)
    assert len(compiled_at_once) > 50
    assert_same_trace(on, off)
    assert booked_on == booked_off


def test_vector_add_generated_replay_with_rows_in_blocks(counted):
    """The vector-add sample at its default threshold: its tile's recordings get generated functions, whose
    rows reach the full trace as blocks among the interpreted rows; the trace is the interpreted one."""
    from npusim.examples.vector_add import add_custom, add_tiling
    import npusim.replay_code as replay_code
    n = 1024 * 600 + 512
    x = TensorSpec((n,), np.float16)

    def run():
        return launch(add_custom, (GmArg("x", x), GmArg("y", x), GmArg("z", x), add_tiling(n, 1, 1024, 2)),
                      block_dim=1, chip="Ascend910B2", mode="timing", kernel_type="vector", progress=False)
    replay_code._CODE.clear()
    on, off = _both(run)
    assert counted["steps"] > 550 and replay_code._CODE
    assert_same_trace(on, off)


# -- steps with atomic Fixpipes: FAG's ComputeMMDqkv ---------------------------------------------------------
FAG_ATOMIC_CASES = {  # name: (make_case keywords, deterministic, tiling override, the template it must run)
    "sameab": (dict(seq_q=[1024], seq_kv=[1024], n1=4, d=32, sink=True), False, {"blockDim": 2}, "sameab"),
    "sameab_rope_gqa": (dict(seq_q=[1024], seq_kv=[1024], n1=4, n2=2, d=64, dtype="bf16", rope_d=64, sink=True),
                        False, {"blockDim": 2}, "sameab"),
    "sameab_dtm_causal": (dict(seq_q=[1536], seq_kv=[1536], n1=4, d=32, sparse_mode=2, causal=True, sink=True),
                          True, {"blockDim": 2}, "sameab_det"),
    "basic_det": (dict(seq_q=[1024, 1024], seq_kv=[1024, 1024], n1=2, d=64), True, {"blockDim": 3}, "basic_det"),
    "basic_bn2": (dict(seq_q=[600, 600], seq_kv=[600, 600], n1=4, n2=2, d=64, layout=""), True, {"blockDim": 2},
                  "basic_bn2"),
}


@pytest.mark.unsanitized
@pytest.mark.parametrize("name", FAG_ATOMIC_CASES)
def test_fag_atomic_steps_replay_to_the_interpreted_trace(monkeypatch, booked, name):
    """FAG's ComputeMMDqkv switches SetAtomicAdd on inside the step and its Fixpipes add atomically into the dq/dk/
    dv workspaces (IS_DTM: plain writes into the core's partial slot, basic_det's lone dk/dv strips atomically
    into the workspace). In timing mode an atomic Fixpipe is a transfer like any other (its adds are queued for
    launch.atomic_add in full mode only, where nothing replays), so its strips are replayed, shared by the streams:
    the trace, every GM transfer's buffer, address and size, and the (empty) atomic log equal the interpreted
    run's, while replayed strips (entered with SetAtomicAdd on when non-deterministic) skip the kernel lines."""
    from ops import flash_attention_unpadding_score_grad_v5 as fag
    from ops.flash_attention_unpadding_score_grad_v5.kernel import KernelFagBasic
    from tests.ops.fag_cases import make_case
    kw, det, til, template = FAG_ATOMIC_CASES[name]
    strips = []  # the strips of ComputeMMDqkv run as written (by replay.ENABLED of the run)
    real = KernelFagBasic._mm_ab_parts
    monkeypatch.setattr(KernelFagBasic, "_mm_ab_parts",
                        lambda self, *args: strips.append(replay.ENABLED) or real(self, *args))
    a, _ = make_case(**kw)
    (on, booked_on), (off, booked_off) = _both_booked(
        lambda: fag(**a, deterministic=det, tiling=til, mode="timing", trace="full"), booked)
    assert on.tiling.template == template
    written_on, written_off = strips.count(True), strips.count(False)
    assert written_off - written_on >= 40  # strips of replayed steps did not run the kernel lines
    assert_same_trace(on, off)
    assert booked_on == booked_off
    assert on.extra["launches"].keys() == off.extra["launches"].keys()
    assert all(on.extra["launches"][k].cycles == off.extra["launches"][k].cycles for k in on.extra["launches"])
    assert on.extra["atomics"] == off.extra["atomics"]


@pytest.mark.unsanitized
@pytest.mark.parametrize("kw", [dict(seq_q=[700, 300], seq_kv=[700, 300], n1=2, d=64, sparse_mode=3, causal=True),
                                dict(seq_q=[640], seq_kv=[640], n1=2, dtype="bf16", d=64, rope_d=64)])
def test_fag_cube23_blocks_replay_to_the_interpreted_trace(monkeypatch, booked, kw):
    """The basic template's Cube23 adds each block's dQ, dK, dV into the workspaces atomically (Cube23Block, entered
    with SetAtomicAdd in force, shared by the cubes): replayed, the trace and every GM transfer's buffer, address and
    size equal the interpreted run's, while replayed blocks skip the kernel lines."""
    from ops import flash_attention_unpadding_score_grad_v5 as fag
    from ops.flash_attention_unpadding_score_grad_v5.kernel import KernelFagBasic
    from tests.ops.fag_cases import make_case
    chunks = []  # Cube23's B chunks run as written (by replay.ENABLED of the run)
    real = KernelFagBasic._mm_ab_chunks
    monkeypatch.setattr(KernelFagBasic, "_mm_ab_chunks",
                        lambda self, *args: chunks.append(replay.ENABLED) or real(self, *args))
    a, _ = make_case(**kw)
    (on, booked_on), (off, booked_off) = _both_booked(
        lambda: fag(**a, tiling={"blockDim": 2}, mode="timing", trace="full"), booked)
    assert on.tiling.template == "basic"
    assert chunks.count(False) - chunks.count(True) >= 20
    assert_same_trace(on, off)
    assert booked_on == booked_off
    assert all(on.extra["launches"][k].cycles == off.extra["launches"][k].cycles for k in on.extra["launches"])


@pytest.mark.unsanitized
@pytest.mark.parametrize("name", ["sameab_dtm_causal", "basic_det"])
def test_fag_reduction_steps_replay_to_the_interpreted_trace(monkeypatch, booked, name):
    """The deterministic reduction (ComputeVecAdd) runs row chunks of the strips (ReduceRows: read each core's
    partial, add in core order, add into the workspace), shared by the AIVs: replayed, the trace and every GM
    transfer's buffer, address and size equal the interpreted run's, while replayed chunks skip the kernel lines."""
    from ops import flash_attention_unpadding_score_grad_v5 as fag
    from ops.flash_attention_unpadding_score_grad_v5 import kernel
    from tests.ops.fag_cases import make_case
    kw, det, til, template = FAG_ATOMIC_CASES[name]
    adds = []  # the reduction's Adds run as written (by replay.ENABLED of the run)
    real = kernel.Add
    monkeypatch.setattr(kernel, "Add", lambda *args: adds.append(replay.ENABLED) or real(*args))
    a, _ = make_case(**kw)
    (on, booked_on), (off, booked_off) = _both_booked(
        lambda: fag(**a, deterministic=det, tiling=til, mode="timing", trace="full"), booked)
    assert on.tiling.template == template and on.tiling.sabDtm
    assert adds.count(False) - adds.count(True) >= 20  # Adds of replayed chunks did not run the kernel lines
    assert_same_trace(on, off)
    assert booked_on == booked_off
    assert all(on.extra["launches"][k].cycles == off.extra["launches"][k].cycles for k in on.extra["launches"])


@pytest.mark.unsanitized
@pytest.mark.parametrize("dtype, rope_d", [("bf16", 64), ("fp32", 0)])
def test_fag_post_chunks_replay_to_the_interpreted_trace(counted, booked, dtype, rope_d):
    """FAG's post kernel casts dq/dk/dv (and the rope outputs) step by step (PostChunk, shared by the AIVs): its
    trace, cycles and every GM transfer's buffer, address and size equal the interpreted run's, with a recording
    per output (each books its own buffer)."""
    from ops.flash_attention_unpadding_score_grad_v5.launch import launch_post, outputs
    from ops.flash_attention_unpadding_score_grad_v5.tiling import fag_tiling
    from tests.ops.fag_cases import make_case
    _, p = make_case(seq_q=[1500, 500], seq_kv=[1500, 500], n1=4, n2=2, d=128, dtype=dtype, rope_d=rope_d)
    spec = get_chip("Ascend910B2")
    til = fag_tiling(p, spec)
    ws = TensorSpec((til.workspaceSize,), np.uint8)
    (on, booked_on), (off, booked_off) = _both_booked(
        lambda: launch_post(p, til, spec, "timing", ws, outputs(p, False)), booked)
    assert counted["steps"] > 100
    assert_same_trace(on, off)
    assert booked_on == booked_off


def test_new_sources_compile_after_more_replays_than_known_ones(monkeypatch):
    """A recording whose generated source is new in the process is compiled only after COMPILE_NEW_AFTER replays;
    once its source has been compiled (an earlier launch), a later launch's recording runs it after
    COMPILE_AFTER replays by the loop (replay.py, docs/performance.md "Compile threshold")."""
    from npusim.examples.vector_add import add_custom, add_tiling
    import npusim.replay_code as replay_code
    monkeypatch.setattr(replay_code, "CACHE_DIR", "off")  # compiled in this process only
    loop = []
    real = replay._replay_calls
    monkeypatch.setattr(replay, "_replay_calls", lambda *a: loop.append(1) or real(*a))

    def run(tiles: int):
        n = 1024 * tiles
        x = TensorSpec((n,), np.float16)
        loop.clear()
        launch(add_custom, (GmArg("x", x), GmArg("y", x), GmArg("z", x), add_tiling(n, 1, 1024, 2)),
               block_dim=1, chip="Ascend910B2", mode="timing", kernel_type="vector", progress=False, trace="full")
        return len(loop)
    few = replay.COMPILE_AFTER + replay.COMPILE_NEW_AFTER  # tiles: each recording replayed between the two counts
    replay_code._CODE.clear()
    new = run(few)
    assert not replay_code._CODE  # past COMPILE_AFTER replays, but the source is new: not compiled
    run(2 * replay.COMPILE_NEW_AFTER + 20)
    assert replay_code._CODE  # compiled once past COMPILE_NEW_AFTER
    known = run(few)
    assert known < new  # the compiled source is taken up after COMPILE_AFTER replays
