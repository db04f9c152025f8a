"""Issue 16 class 1: full/timing runs too large to finish are refused up front (every operator) or
stopped (npusim.launch), with AclnnError 161002 naming ``mode`` and pointing to estimate mode."""
from __future__ import annotations

import importlib
import time

import numpy as np
import pytest

from npusim import TensorSpec
from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from npusim.examples.vector_add import add_custom, add_tiling
from npusim.launch import GmArg, launch
from ops.common import guard
from ops.flash_attention_unpadding_score_grad_v5.api import flash_attention_unpadding_score_grad_v5 as fag
from ops.flash_attention_var_len_score.api import flash_attention_var_len_score as fa
from ops.prompt_flash_attention_v2.api import prompt_flash_attention_v2 as pfa
from ops.scatter_pa_kv_cache.api import scatter_pa_kv_cache as spkc
from ops.sparse_flash_attention_grad.api import sparse_flash_attention_grad as sfag


def _refused_mode(fn):
    t0 = time.perf_counter()
    with pytest.raises(AclnnError) as exc:
        fn()
    assert time.perf_counter() - t0 < 30  # refused up front, not after a simulation
    assert exc.value.status == ACLNN_ERR_PARAM_INVALID
    assert exc.value.message.startswith("mode:") and "estimate" in exc.value.message, exc.value.message
    return exc.value


def test_fa_reproducer_refused_up_front():
    """The issue's reproducer (T = 2^18, timing mode) ran 90 s growing 25 MB/s; now refused at once."""
    x = TensorSpec((2 ** 18, 2, 32), np.float16)
    err = _refused_mode(lambda: fa(x, x, x, actual_seq_qlen=[2 ** 18], actual_seq_kvlen=[2 ** 18], head_num=2,
                                   mode="timing"))
    assert "524,288 score tiles" in err.message
    res = fa(x, x, x, actual_seq_qlen=[2 ** 18], actual_seq_kvlen=[2 ** 18], head_num=2, mode="estimate")
    assert res.time_us > 0


@pytest.mark.parametrize("op", ["pfa", "fa", "spkc", "fag", "sfag"])
def test_every_operator_checks_its_work_against_the_budget(op, monkeypatch):
    """With the budget cut to a few instructions a small call is refused in both simulating modes."""
    monkeypatch.setitem(guard.MAX_INSTRUCTIONS, "timing", 10)
    monkeypatch.setitem(guard.MAX_INSTRUCTIONS, "full", 10)
    if op == "pfa":
        q = np.zeros((1, 2, 64, 32), np.float16)
        _refused_mode(lambda: pfa(q, q, q, num_heads=2, input_layout="BNSD", mode="timing"))
    elif op == "fa":
        x = np.zeros((64, 2, 32), np.float16)
        _refused_mode(lambda: fa(x, x, x, actual_seq_qlen=[64], actual_seq_kvlen=[64], head_num=2))
    elif op == "sfag":
        from tests.ops.sfag_cases import make_case
        args, kw, _ = make_case(S1=2, S2=24, N1=2, bs=8)
        before = [np.copy(a) for a in args]
        _refused_mode(lambda: sfag(*args, **kw))
        _refused_mode(lambda: sfag(*args, **kw, mode="timing"))
        assert all(np.array_equal(a, b) for a, b in zip(args, before))
    elif op == "fag":
        from tests.ops.fag_cases import make_case
        args, _ = make_case(seq_q=[64], seq_kv=[64], n1=2, n2=1, d=32)
        _refused_mode(lambda: fag(**args))
        _refused_mode(lambda: fag(**args, mode="timing"))
    else:
        k, kc = np.ones((10, 2, 32), np.float16), np.zeros((4, 8, 2, 32), np.float16)
        before = kc.copy()
        _refused_mode(lambda: spkc(k, kc, np.arange(10, dtype=np.int32), k, kc.copy()))
        np.testing.assert_array_equal(kc, before)


def test_sfag_large_index_work_refused_up_front():
    """SparseFlashAttentionGrad had no up-front count (only the launch's 200M backstop, after minutes): 4,096
    tokens each gathering 2,048 blocks of 64 rows are refused at once, counted from the indices (a
    zero-stride index array); estimate mode still answers."""
    t1, t2, k, bs = 4096, 2048 * 64, 2048, 64
    spec = lambda *shape: TensorSpec(shape, np.float16)  # noqa: E731
    row = np.arange(k, dtype=np.int64)
    idx = np.broadcast_to(row, (1, t1, 1, k))
    sm = TensorSpec((1, 1, t1, 1), np.float32)
    args = (spec(1, t1, 1, 512), spec(1, t2, 1, 512), spec(1, t2, 1, 512), idx, spec(1, t1, 1, 512),
            spec(1, t1, 1, 512), sm, sm)
    kw = dict(query_rope=spec(1, t1, 1, 64), key_rope=spec(1, t2, 1, 64), sparse_block_size=bs, scale_value=0.04)
    err = _refused_mode(lambda: sfag(*args, **kw, mode="timing"))
    assert "instructions (counted from sparse_indices)" in err.message
    assert sfag(*args, **kw, mode="estimate").time_us > 0


def test_spkc_full_mode_memory_guard_says_what_it_needs(monkeypatch):
    """Full mode holds a private copy of each cache: past the limit the message gives the GiB needed."""
    monkeypatch.setattr(guard, "MAX_FULL_BYTES", 1024)
    k, kc = np.ones((10, 2, 32), np.float16), np.zeros((4, 8, 2, 32), np.float16)
    err = _refused_mode(lambda: spkc(k, kc, np.arange(10, dtype=np.int32), k, kc.copy()))
    assert "GiB" in err.message and "copy" in err.message


def test_launch_stops_past_its_instruction_budget(monkeypatch):
    """npusim.launch's own backstop for kernels without an up-front count."""
    monkeypatch.setattr(importlib.import_module("npusim.launch"), "_BUDGET_CHECK_EVERY", 1)
    n = 16 * 4096
    x = np.ones(n, np.float16)
    args = (GmArg("x", x), GmArg("y", x.copy()), GmArg("z", np.zeros(n, np.float16)), add_tiling(n, 1, 256))
    assert launch(add_custom, args, block_dim=1, chip="Ascend910B2", kernel_type="vector").cycles > 0
    with pytest.raises(AclnnError) as exc:
        launch(add_custom, args, block_dim=1, chip="Ascend910B2", kernel_type="vector", max_instructions=50)
    assert exc.value.message.startswith("mode:") and "max_instructions" in exc.value.message


@pytest.mark.parametrize("kw, param", [({"mode": "estimate"}, "mode"), ({"kernel_type": "scalar"}, "kernel_type"),
                                       ({"block_dim": 0}, "block_dim"), ({"block_dim": 2.0}, "block_dim")])
def test_launch_bad_arguments_are_aclnn_errors(kw, param):
    n = 1024
    x = np.ones(n, np.float16)
    args = (GmArg("x", x), GmArg("y", x.copy()), GmArg("z", np.zeros(n, np.float16)), add_tiling(n, 1, 256))
    call = dict(block_dim=1, chip="Ascend910B2", kernel_type="vector") | kw
    with pytest.raises(AclnnError) as exc:
        launch(add_custom, args, **call)
    assert exc.value.message.startswith(param)
