"""SparseFlashAttentionGrad in full mode: bit-exact against the golden (NUMERICS check 1), accurate against
the float64 reference (check 2), index edge cases, the deterministic variant, empty query, timing mode,
the aclnn facade. Shapes stay small (D = 512 is fixed), so each case runs in about a second."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npusim import TensorSpec
from npusim.chip import chip
from ops.common.accuracy import double_thousandth_ok, fa_rule_ok
from ops.sparse_flash_attention_grad.api import (aclnnSparseFlashAttentionGrad,
                                                 aclnnSparseFlashAttentionGradGetWorkspaceSize,
                                                 sparse_flash_attention_grad)
from ops.sparse_flash_attention_grad.golden import sfag_golden
from ops.sparse_flash_attention_grad.reference import live_positions, sfag_reference
from tests.ops.sfag_cases import make_case


def run(args, kw, **extra):
    return sparse_flash_attention_grad(*args, **kw, **extra)


def golden(prob, args, kw, res, log=True):
    q, k, v, _, do, out, smax, ssum = args
    return sfag_golden(prob, q, k, v, do, out, smax, ssum, kw["query_rope"], kw["key_rope"], block_dim=res.block_dim,
                       atomic_log=res.extra["atomic_log"] if log else None)


def bits(a):
    return np.ascontiguousarray(a).view(np.uint16)


GRID = [
    dict(),
    dict(dtype="bf16", mode=3, S1=5, S2=70, bs=1, kind="edge"),
    dict(layout="TND", seq_q=[2, 0, 3], seq_kv=[30, 5, 64], bs=16, rope=False, N1=4, mode=3, kind="edge"),
    dict(layout="TND", seq_q=[4, 1], seq_kv=[3, 130], bs=64, N1=1, mode=3, index_dtype=np.int32),
    dict(B=2, S1=2, S2=33, N1=16, bs=32, dtype="bf16", kind="edge"),
    dict(B=1, S1=2, S2=600, N1=8, bs=1, kind="random", max_slots=600, mode=0),
    dict(B=1, S1=1, S2=20, N1=1, bs=1, kind="full"),
    dict(B=1, S1=2, S2=80, N1=128, bs=16, mode=3, max_slots=4, kind="edge"),  # G = 128: eight 16-head slices
]


@pytest.mark.parametrize("cfg", GRID, ids=[str(i) for i in range(len(GRID))])
def test_sfag_bit_exact_and_accurate(cfg):
    """Every output equals the golden bit for bit and meets the FA rule (factor 3) and the double-thousandth
    rule (or fails it no more than the low-precision baseline) against the float64 reference."""
    args, kw, prob = make_case(seed=len(str(cfg)), **cfg)
    res = run(args, kw)
    gold = golden(prob, args, kw, res)
    q, k, v, _, do, out, smax, ssum = args
    ref = sfag_reference(prob, q, k, v, do, out, smax, ssum, kw["query_rope"], kw["key_rope"])
    low = sfag_reference(prob, q, k, v, do, out, smax, ssum, kw["query_rope"], kw["key_rope"], precision="lowp")
    assert set(res.outputs) == set(gold)
    for name, arr in res.outputs.items():
        assert arr.dtype == prob.dtype and arr.shape == gold[name].shape
        assert np.array_equal(bits(arr), bits(gold[name])), name
        ok, info = fa_rule_ok(arr, ref[name], low[name], 3.0)
        assert ok, (name, info)
        ok, info = double_thousandth_ok(arr, ref[name], prob.dtype)
        # small bf16 tensors: the untiled bf16 formula itself can exceed the allowed count (3 of 640 for
        # case 1's d_query_rope); the kernel must then do no worse than it
        _, base = double_thousandth_ok(low[name], ref[name], prob.dtype)
        assert ok or info["failed"] <= base["failed"], (name, info, base)


def test_sfag_index_edge_semantics_in_reference():
    """-1 ends the list (later slots ignored); negative, past-S2 and past-causal blocks add nothing; a
    duplicated block counts twice; a row with no live position has zero dq."""
    args, kw, prob = make_case(B=1, S1=3, S2=20, N1=2, bs=8, mode=3)
    idx = prob.indices
    idx[:] = -1
    idx[0, :6] = [0, 2, 0, -5, 3, 1]  # s1=0: threshold 18 -> block 2 partly (16, 17); block 3 past S2 = 20
    idx[0, 7] = 1  # after the -1 at slot 6: ignored
    idx[1, :1] = [9]  # out of range only
    idx[2, :2] = [1, 1]
    assert live_positions(prob, 0).tolist() == list(range(8)) + [16, 17] + list(range(8)) + list(range(8, 16))
    assert live_positions(prob, 1).size == 0
    assert live_positions(prob, 2).tolist() == list(range(8, 16)) * 2
    res = run(args, kw)
    assert not bits(res.d_query[0, 1]).any() and not bits(res.d_query_rope[0, 1]).any()
    gold = golden(prob, args, kw, res)
    for name in gold:
        assert np.array_equal(bits(res.outputs[name]), bits(gold[name]))


def test_sfag_deterministic_variant_ignores_timing():
    """deterministic=True: the golden's (round, core) order without the recorded log, and the same bits on a
    chip with other bandwidths; the default variant is reproducible per input and follows its log."""
    args, kw, prob = make_case(B=1, S1=6, S2=64, N1=2, bs=1, mode=3, kind="edge", deterministic=True, max_slots=200)
    a = run(args, kw, tiling={"blockDim": 3})
    slow = chip("Ascend910B2").replace(gm_to_ub_bytes_per_cycle=8.0, l0c_to_gm_bytes_per_cycle=16.0)
    b = run(args, kw, tiling={"blockDim": 3}, chip=slow)
    gold = golden(prob, args, kw, a, log=False)
    assert b.time_us > a.time_us
    for name in gold:
        assert np.array_equal(bits(a.outputs[name]), bits(gold[name]))
        assert np.array_equal(bits(b.outputs[name]), bits(gold[name]))
    kw["deterministic"] = False
    n1, n2 = run(args, kw, tiling={"blockDim": 3}), run(args, kw, tiling={"blockDim": 3})
    assert n1.extra["atomic_log"] == n2.extra["atomic_log"]
    for name in gold:
        assert np.array_equal(bits(n1.outputs[name]), bits(n2.outputs[name]))


def test_sfag_early_atomic_commits_keep_the_order(monkeypatch):
    """Queued atomic adds committed early (npusim.launch: those that started before every live stream's clock)
    give the same log and bits as holding them all to the end; early commits do happen."""
    import importlib

    nl = importlib.import_module("npusim.launch")  # the module (npusim.launch is also a function's name)

    args, kw, prob = make_case(B=1, S1=9, S2=300, N1=4, bs=1, mode=0, max_slots=120)
    monkeypatch.setattr(nl, "ATOMIC_COMMIT_EVERY", 10**9)
    held = run(args, kw, tiling={"blockDim": 3})
    early, orig = [], nl.Launch.commit_atomics

    def spy(self, before=float("inf")):
        n = len(self.atomic_pending)
        orig(self, before)
        if before != float("inf"):
            early.append(n - len(self.atomic_pending))

    monkeypatch.setattr(nl, "ATOMIC_COMMIT_EVERY", 1)
    monkeypatch.setattr(nl.Launch, "commit_atomics", spy)
    res = run(args, kw, tiling={"blockDim": 3})
    assert sum(early) > 0
    assert res.extra["atomic_log"] == held.extra["atomic_log"]
    for name in held.outputs:
        assert np.array_equal(bits(res.outputs[name]), bits(held.outputs[name])), name
    gold = golden(prob, args, kw, res)
    for name in gold:
        assert np.array_equal(bits(res.outputs[name]), bits(gold[name])), name


def test_sfag_empty_query_returns_at_once():
    args, kw, prob = make_case(B=1, S1=2, S2=8)
    q, k, v, idx, do, out, smax, ssum = args
    empty = (q[:, :0], k, v, idx[:, :0], do[:, :0], out[:, :0], smax[:, :, :0], ssum[:, :, :0])
    kw["query_rope"] = kw["query_rope"][:, :0]
    res = run(empty, kw)
    assert res.cycles == 0 and res.d_query.shape == (1, 0, 2, 512)
    assert res.d_key.shape == k.shape and not res.d_key.any() and res.d_key_rope.shape == (1, 8, 1, 64)


def test_sfag_timing_mode_matches_full_schedule():
    """Timing mode (TensorSpec data, real indices) has the full run's schedule and time."""
    args, kw, prob = make_case(B=1, S1=3, S2=70, N1=4, bs=8, mode=3)
    full = run(args, kw)
    spec = tuple(TensorSpec(a.shape, a.dtype) if i != 3 else a for i, a in enumerate(args))
    kw_t = dict(kw, query_rope=TensorSpec(kw["query_rope"].shape, kw["query_rope"].dtype),
                key_rope=TensorSpec(kw["key_rope"].shape, kw["key_rope"].dtype))
    timing = run(spec, kw_t, mode="timing")
    assert timing.outputs is None and timing.cycles == full.cycles
    assert timing.workspace_size == full.workspace_size > 32 * 1024 * 1024


def test_sfag_aclnn_facade():
    """Two-stage interface: outputs written in place; bad input returns its status and writes nothing."""
    args, kw, prob = make_case(B=1, S1=2, S2=24, N1=2, bs=8)
    q, k, v, idx, do, out, smax, ssum = args
    outs = [np.zeros_like(q), np.zeros_like(k), np.zeros_like(v), np.zeros_like(kw["query_rope"]),
            np.zeros_like(kw["key_rope"])]
    status, ws, ex = aclnnSparseFlashAttentionGradGetWorkspaceSize(
        q, k, v, idx, do, out, smax, ssum, None, None, kw["query_rope"], kw["key_rope"], kw["scale_value"], 8, "BSND",
        0, 2147483647, 2147483647, False, *outs)
    assert status == 0 and ws > 0
    assert aclnnSparseFlashAttentionGrad(None, ws, ex) == 0
    ref = run(args, kw)
    assert np.array_equal(bits(outs[0]), bits(ref.d_query)) and np.array_equal(bits(outs[4]), bits(ref.d_key_rope))
    fresh = [np.zeros_like(o) for o in outs]
    status, ws, ex = aclnnSparseFlashAttentionGradGetWorkspaceSize(
        q, k, v, idx, do, out, smax, ssum, None, None, kw["query_rope"], kw["key_rope"], kw["scale_value"], 8, "BSND",
        2, 2147483647, 2147483647, False, *fresh)
    assert (status, ws, ex) == (561002, 0, None) and not any(o.any() for o in fresh)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2 ** 31), st.sampled_from([1, 8, 16]), st.sampled_from([0, 3]), st.sampled_from(["fp16", "bf16"]),
       st.lists(st.sampled_from([0, 1, 2, 3, 5, 7, -1, -2, 99, 2 ** 62]), min_size=0, max_size=8))
def test_sfag_fuzz_api_edge_indices_bit_exact(seed, bs, mode, dtype, row):
    """Random index rows with every edge value through the API: bit-exact against the golden, never an
    exception other than AclnnError."""
    args, kw, prob = make_case(seed=seed % 1000, B=1, S1=2, S2=40, N1=2, bs=bs, mode=mode, dtype=dtype, rope=seed % 2 == 0)
    prob.indices[:] = -1
    prob.indices[0, :len(row)] = row
    prob.indices[1, :len(row)] = row[::-1]
    res = run(args, kw)
    gold = golden(prob, args, kw, res)
    for name in gold:
        assert np.array_equal(bits(res.outputs[name]), bits(gold[name])), name
