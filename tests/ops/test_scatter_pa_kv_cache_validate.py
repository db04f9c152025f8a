"""ScatterPaKvCache validation: every rule has a passing and a failing case with its status code."""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pytest

from npusim.errors import AclnnError
from ops.scatter_pa_kv_cache import contract as C
from ops.scatter_pa_kv_cache.validate import classify_scenario, validate

NULLPTR, INVALID, TILING = 161001, 161002, 561002
A2, A3, A950 = "Ascend910B", "Ascend910_93", "Ascend910_95"
FP16, BF16, I32, I64 = np.float16, ml_dtypes.bfloat16, np.int32, np.int64


@dataclass(frozen=True)
class Spec:
    """A data-less tensor stand-in (timing mode): shape and dtype only."""

    shape: tuple
    dtype: object


def _z(shape, dtype=FP16):
    return np.zeros(shape, dtype)


def _i(values, dtype=I32):
    return np.array(values, dtype)


def base(scenario: int, dtype=FP16) -> dict:
    """A valid call of each scenario (family: A2/A3 for 1,2,4,5,6; 950 for 3)."""
    if scenario == 1:  # T=3, N=2, Dk=16, Dv=32, fp16 -> last_dim 16
        return dict(key=_z((3, 2, 16), dtype), value=_z((3, 2, 32), dtype),
                    key_cache=_z((2, 2, 4, 16), dtype), value_cache=_z((2, 4, 4, 16), dtype),
                    slot_mapping=_i([5, -1, 0]), cache_mode="PA_NZ", soc_family=A2)
    if scenario == 2:  # T=3, N=2, Dk=8, Dv=4, nb=2, bs=4
        return dict(key=_z((3, 2, 8), dtype), value=_z((3, 2, 4), dtype),
                    key_cache=_z((2, 4, 2, 8), dtype), value_cache=_z((2, 4, 2, 4), dtype),
                    slot_mapping=_i([5, -1, 0]), soc_family=A2)
    if scenario == 6:
        return dict(key=_z((3, 2, 8), dtype), key_cache=_z((2, 4, 2, 8), dtype),
                    value=_z((), dtype), value_cache=_z((), dtype), slot_mapping=_i([5, -1, 0]),
                    soc_family=A2)
    if scenario in (4, 5):  # B=2, N=2, seq_lens [3, 2] -> T=5; D=8; 16 cache rows
        call = dict(key=_z((5, 2, 8), dtype), value=_z((5, 2, 8), dtype),
                    key_cache=_z((4, 4, 1, 8), dtype), value_cache=_z((4, 4, 1, 8), dtype),
                    slot_mapping=_i([0, 4, 8, 12]), compress_lens=_i([2, 1, 0, 2]),
                    seq_lens=_i([3, 2]), scatter_mode="Alibi", soc_family=A2)
        if scenario == 5:
            call.update(scatter_mode="Rope", compress_seq_offset=_i([1, 0, -1, 0]))
        return call
    if scenario == 3:  # 950: B=2, S=3, N=2, D=7, fp32
        dtype = np.float32 if dtype is FP16 else dtype
        return dict(key=_z((2, 3, 2, 7), dtype), value=_z((2, 3, 2, 7), dtype),
                    key_cache=_z((4, 4, 1, 7), dtype), value_cache=_z((4, 4, 1, 7), dtype),
                    slot_mapping=_i([[0, 4], [8, 12]]), compress_lens=_i([[2, 1], [0, 1]]),
                    seq_lens=_i([3, 2]), compress_seq_offset=_i([1, 0, -1, 0]), soc_family=A950)
    raise ValueError(scenario)


def run(call: dict):
    return validate(**call)


def status_of(call: dict) -> int:
    with pytest.raises(AclnnError) as info:
        validate(**call)
    return info.value.status


def with_(scenario, **changes):
    call = base(scenario)
    call.update(changes)
    return call


def without(scenario, *names):
    call = base(scenario)
    for name in names:
        call[name] = None
    return call


# (rule id, valid call, invalid call, expected status of the invalid call)
RULES = [
    # chips (seed 产品支持情况)
    ("chip-soc-name", with_(2, soc_family="Ascend910B2"), with_(2, soc_family="Ascend310P3"), INVALID),
    ("chip-a3", with_(2, soc_family="Ascend910_9391"), with_(2, soc_family="Ascend910A"), INVALID),
    ("chip-unknown", with_(2, soc_family=A3), with_(2, soc_family="Gaudi2"), INVALID),
    # null pointers (seed 161001)
    ("null-key", base(2), without(2, "key"), NULLPTR),
    ("null-key-cache", base(2), without(2, "key_cache"), NULLPTR),
    ("null-slot", base(2), without(2, "slot_mapping"), NULLPTR),
    ("null-value", base(6), without(6, "value"), NULLPTR),
    ("null-value-cache", base(6), without(6, "value_cache"), NULLPTR),
    # tensor types
    ("key-not-tensor", with_(2, key=Spec((3, 2, 8), FP16)), with_(2, key=[[0.0]]), INVALID),
    ("cache-not-tensor", with_(2, key_cache=Spec((2, 4, 2, 8), FP16)), with_(2, key_cache=3), INVALID),
    ("slot-not-array", base(2), with_(2, slot_mapping=[5, -1, 0]), INVALID),
    ("slot-no-data", base(2), with_(2, slot_mapping=Spec((3,), I32)), INVALID),
    ("seq-lens-not-array", base(4), with_(4, seq_lens=(3, 2)), INVALID),
    # modes
    ("cache-mode", with_(2, cache_mode=None), with_(2, cache_mode="NZ"), INVALID),
    ("cache-mode-type", with_(2, cache_mode=""), with_(2, cache_mode=1), INVALID),
    ("scatter-mode", with_(2, scatter_mode=None), with_(2, scatter_mode="nct"), INVALID),
    # dtypes (seed 161002)
    ("key-dtype-a2", base(2, BF16), base(2, np.float32), INVALID),
    ("key-dtype-int8", base(2, np.int8), base(2, np.uint8), INVALID),
    ("key-cache-dtype", base(2), with_(2, key_cache=_z((2, 4, 2, 8), BF16)), INVALID),
    ("value-dtype", base(2), with_(2, value=_z((3, 2, 4), BF16)), INVALID),
    ("value-cache-dtype", base(2), with_(2, value_cache=_z((2, 4, 2, 4), BF16)), INVALID),
    ("slot-dtype", with_(2, slot_mapping=_i([5, -1, 0], I64)),
     with_(2, slot_mapping=_i([5, -1, 0], np.int16)), INVALID),
    ("seq-lens-dtype", with_(4, slot_mapping=_i([0, 4, 8, 12], I64), compress_lens=_i([2, 1, 0, 2], I64),
                             seq_lens=_i([3, 2], I64)), with_(4, seq_lens=_i([3, 2], I64)), INVALID),
    ("compress-lens-dtype", base(4), with_(4, compress_lens=_i([2, 1, 0, 2], I64)), INVALID),
    ("seq-offset-dtype", base(5), with_(5, compress_seq_offset=_i([1, 0, -1, 0], I64)), INVALID),
    # ranks (seed 561002)
    ("key-rank", base(2), with_(2, key=_z((6, 8))), TILING),
    ("key-rank-5", base(2), with_(2, key=_z((3, 2, 8, 1, 1))), TILING),
    ("value-rank", base(2), with_(2, value=_z((3, 8))), TILING),
    ("key-cache-rank", base(2), with_(2, key_cache=_z((8, 2, 8))), TILING),
    ("value-cache-rank", base(2), with_(2, value_cache=_z((8, 2, 4))), TILING),
    ("value-empty-cache-not", base(6), with_(6, value_cache=_z((2, 4, 2, 8))), TILING),
    ("key-value-rank-differ", base(2), with_(2, value=_z((3, 1, 2, 4))), TILING),
    ("slot-rank", base(2), with_(2, slot_mapping=_i([[5, -1, 0]])), TILING),
    ("seq-lens-rank", base(4), with_(4, seq_lens=_i([[3, 2]])), TILING),
    ("compress-lens-rank", base(4), with_(4, compress_lens=_i([[2, 1], [0, 2]])), TILING),
    ("s3-slot-rank", base(3), with_(3, slot_mapping=_i([0, 4, 8, 12])), TILING),
    ("nz-cache-rank", base(1), with_(1, key_cache=_z((2, 2, 4, 16, 1))), TILING),
    # scenario support per chip (seed "仅支持场景...", kernel tiling 561002)
    ("s3-needs-950", base(3, BF16), dict(base(3, BF16), soc_family=A2), TILING),
    ("s1-not-on-950", base(1), with_(1, soc_family=A950), TILING),
    ("s6-not-on-950", base(6), with_(6, soc_family=A950), TILING),
    # modes per scenario
    ("nz-scatter-none", base(1), with_(1, scatter_mode="Nct", strides=[1, 1], offsets=[1, 1]), INVALID),
    ("s4-alibi-only", base(4), with_(4, scatter_mode="None"), INVALID),
    # optional inputs (seed: 场景一、二、六没有...; 场景四没有...; 4-D: 必选参数)
    ("s2-no-seq-lens", base(2), with_(2, seq_lens=_i([3])), INVALID),
    ("s1-no-compress-lens", base(1), with_(1, compress_lens=_i([1, 1, 1])), INVALID),
    ("s6-no-seq-offset", base(6), with_(6, compress_seq_offset=_i([0, 0, 0])), INVALID),
    ("s4-no-seq-offset", base(4), with_(4, compress_seq_offset=_i([1, 0, -1, 0])), INVALID),
    ("s4-needs-compress-lens", base(4), without(4, "compress_lens"), NULLPTR),
    ("s4-needs-seq-lens", base(4), without(4, "seq_lens"), NULLPTR),
    ("s5-needs-seq-offset", base(5), without(5, "compress_seq_offset"), NULLPTR),
    ("s3-needs-compress-lens", without(3, "compress_seq_offset"), without(3, "compress_lens"), NULLPTR),
    ("s3-needs-seq-lens", base(3), without(3, "seq_lens"), NULLPTR),
    # shapes (seed 功能说明 and 约束说明)
    ("s2-value-dim0", base(2), with_(2, value=_z((4, 2, 4))), INVALID),
    ("s2-value-dim1", base(2), with_(2, value=_z((3, 3, 4))), INVALID),
    ("s2-key-cache-heads", base(2), with_(2, key_cache=_z((2, 4, 1, 8))), INVALID),
    ("s2-key-cache-head-size", base(2), with_(2, key_cache=_z((2, 4, 2, 4))), INVALID),
    ("s2-value-cache-blocks", base(2), with_(2, value_cache=_z((3, 4, 2, 4))), INVALID),
    ("s2-value-cache-block-size", base(2), with_(2, value_cache=_z((2, 2, 2, 4))), INVALID),
    ("s2-value-cache-head-size", base(2), with_(2, value_cache=_z((2, 4, 2, 8))), INVALID),
    ("s2-slot-len", base(2), with_(2, slot_mapping=_i([5, -1])), INVALID),
    ("s6-key-cache-heads", base(6), with_(6, key_cache=_z((2, 4, 3, 8))), INVALID),
    ("s1-cache-dim1", base(1), with_(1, key_cache=_z((2, 4, 4, 16))), INVALID),
    ("s1-cache-last-dim", base(1), with_(1, key_cache=_z((2, 2, 4, 8))), INVALID),
    ("s1-value-cache-dim1", base(1), with_(1, value_cache=_z((2, 2, 4, 16))), INVALID),
    ("s1-value-cache-block-size", base(1), with_(1, value_cache=_z((2, 4, 2, 16))), INVALID),
    ("s4-cache-dim2-is-1", base(4), with_(4, key_cache=_z((4, 4, 2, 8))), INVALID),
    ("s4-value-head-size", base(4), with_(4, value=_z((5, 2, 4)), value_cache=_z((4, 4, 1, 4))), INVALID),
    ("s4-slot-len", base(4), with_(4, slot_mapping=_i([0, 4, 8])), INVALID),
    ("s4-compress-lens-len", base(4), with_(4, compress_lens=_i([2, 1, 0])), INVALID),
    ("s5-seq-offset-len", base(5), with_(5, compress_seq_offset=_i([1, 0, -1])), INVALID),
    ("s3-value-dims", base(3), with_(3, value=_z((2, 2, 2, 7), np.float32)), INVALID),
    ("s3-slot-shape", base(3), with_(3, slot_mapping=_i([[0, 4, 8, 12]])), INVALID),
    ("s3-compress-lens-shape", base(3), with_(3, compress_lens=_i([[2, 1, 0, 1]])), INVALID),
    ("s3-seq-lens-len", base(3), with_(3, seq_lens=_i([3, 2, 1])), INVALID),
    ("s3-seq-offset-len", base(3), with_(3, compress_seq_offset=_i([1, 0, -1])), INVALID),
    ("s3-cache-dim2-is-1", base(3), with_(3, value_cache=_z((4, 4, 2, 7), np.float32)), INVALID),
    # tiling-only rules (561002)
    ("sizes-positive", base(2), with_(2, key=_z((3, 0, 8)), value=_z((3, 0, 4)),
                                      key_cache=_z((2, 4, 0, 8)), value_cache=_z((2, 4, 0, 4))), TILING),
    ("nz-head-align", with_(1, key=_z((3, 2, 32)), key_cache=_z((2, 4, 4, 16))),
     with_(1, key=_z((3, 2, 8)), key_cache=_z((2, 1, 4, 16))), TILING),
    ("nz-block-size-max",
     with_(1, key_cache=Spec((1, 2, 65535, 16), FP16), value_cache=Spec((1, 4, 65535, 16), FP16)),
     with_(1, key_cache=Spec((1, 2, 65536, 16), FP16), value_cache=Spec((1, 4, 65536, 16), FP16)), TILING),
    ("rope-float-only", base(4, np.int8), base(5, np.int8), TILING),
    ("cache-rows-cover-tokens", with_(2, key=_z((8, 2, 8)), value=_z((8, 2, 4)), slot_mapping=_i([-1] * 8)),
     with_(2, key=_z((9, 2, 8)), value=_z((9, 2, 4)), slot_mapping=_i([-1] * 9)), TILING),
    # strides / offsets (Nct)
    ("nct-strides-required", with_(2, scatter_mode="Nct", strides=[16, 8], offsets=[1, 2]),
     with_(2, scatter_mode="Nct", offsets=[1, 2]), NULLPTR),
    ("nct-offsets-required", with_(6, scatter_mode="Nct", strides=(16, 8), offsets=(1, 2)),
     with_(6, scatter_mode="Nct", strides=[16, 8]), NULLPTR),
    ("nct-strides-len", with_(2, scatter_mode="Nct", strides=_i([16, 8], I64), offsets=[1, 2]),
     with_(2, scatter_mode="Nct", strides=[16, 8, 1], offsets=[1, 2]), INVALID),
    ("nct-offsets-len", with_(2, scatter_mode="Nct", strides=[16, 8], offsets=[1, 2]),
     with_(2, scatter_mode="Nct", strides=[16, 8], offsets=[1]), INVALID),
    ("nct-strides-positive", with_(2, scatter_mode="Nct", strides=[1, 1], offsets=[1, 1]),
     with_(2, scatter_mode="Nct", strides=[0, 8], offsets=[1, 2]), INVALID),
    ("nct-offsets-positive", with_(2, scatter_mode="Nct", strides=[16, 8], offsets=[1, 1]),
     with_(2, scatter_mode="Nct", strides=[16, 8], offsets=[0, 2]), INVALID),
    ("nct-strides-ints", with_(2, scatter_mode="Nct", strides=[16, 8], offsets=[1, 2]),
     with_(2, scatter_mode="Nct", strides=[1.5, 8], offsets=[1, 2]), INVALID),
    ("nct-strides-not-seq", with_(2, scatter_mode="None", strides="junk", offsets=object()),
     with_(2, scatter_mode="Nct", strides="junk", offsets=[1, 2]), INVALID),
    # values of the control tensors (seed 约束说明)
    ("slot-range", with_(2, slot_mapping=_i([7, -5, 0])), with_(2, slot_mapping=_i([8, -1, 0])), INVALID),
    ("slot-range-int64", with_(1, slot_mapping=_i([7, -1, 0], I64)),
     with_(1, slot_mapping=_i([8, 0, 1], I64)), INVALID),
    ("seq-lens-sum", base(4), with_(4, seq_lens=_i([3, 3])), INVALID),
    ("seq-lens-non-negative", base(4), with_(4, seq_lens=_i([6, -1]), compress_lens=_i([2, 1, 0, 0])),
     INVALID),
    ("compress-lens-le-seq", with_(4, compress_lens=_i([3, 3, 2, 2])),
     with_(4, compress_lens=_i([2, 1, 0, 3])), INVALID),
    ("compress-lens-non-negative", base(4), with_(4, compress_lens=_i([2, -1, 0, 2])), INVALID),
    ("s5-offset-window", with_(5, compress_seq_offset=_i([1, 2, -1, 0])),
     with_(5, compress_seq_offset=_i([2, 0, -1, 0])), INVALID),
    ("s5-offset-minus-one-only", with_(5, compress_seq_offset=_i([1, 0, -7, 0])),
     with_(5, compress_seq_offset=_i([1, 0, -1, -2])), INVALID),
    ("s3-seq-lens-le-seq-len", base(3), with_(3, seq_lens=_i([4, 2])), INVALID),
    ("s3-offset-ge-minus-one", with_(3, compress_seq_offset=_i([5, 0, -1, 0])),
     with_(3, compress_seq_offset=_i([-2, 0, -1, 0])), INVALID),
    ("capacity-formula",
     with_(3, key_cache=_z((1, 4, 1, 7), np.float32), value_cache=_z((1, 4, 1, 7), np.float32),
           slot_mapping=_i([[-1, -1], [-1, -1]]), compress_lens=_i([[2, 2], [1, 1]])),
     with_(3, key_cache=_z((1, 4, 1, 7), np.float32), value_cache=_z((1, 4, 1, 7), np.float32),
           slot_mapping=_i([[-1, -1], [-1, -1]])), INVALID),
    ("task-rows-in-range", with_(4, slot_mapping=_i([0, 4, 8, 14])), with_(4, slot_mapping=_i([0, 4, 8, 15])),
     INVALID),
    ("task-rows-rope", with_(5, slot_mapping=_i([0, 4, 8, 15])), with_(5, slot_mapping=_i([0, 4, 15, 12])),
     INVALID),
    # contiguity (seed: 除了key和value，输入参数不支持非连续)
    ("cache-contiguous", with_(2, key=_z((3, 2, 16))[:, :, ::2]),
     with_(2, key_cache=_z((2, 4, 2, 16))[..., ::2]), INVALID),
    ("slot-contiguous", with_(2, key_cache=np.broadcast_to(np.float16(0), (2, 4, 2, 8))),
     with_(2, slot_mapping=_i([5, 9, -1, 4, 0, 1])[::2]), INVALID),
]


@pytest.mark.parametrize("rule, valid, invalid, status", RULES, ids=[r[0] for r in RULES])
def test_rule_valid_case_passes(rule, valid, invalid, status):
    """The valid side of each rule validates."""
    assert run(valid).scenario in range(1, 7)


@pytest.mark.parametrize("rule, valid, invalid, status", RULES, ids=[r[0] for r in RULES])
def test_rule_invalid_case_status(rule, valid, invalid, status):
    """The invalid side of each rule raises AclnnError with the documented status."""
    assert status_of(invalid) == status


@pytest.mark.parametrize("scenario, family",
                         [(1, A2), (2, A2), (2, A3), (3, A950), (4, A3), (5, A2), (6, A2)])
def test_classify_scenario_by_construction(scenario, family):
    """classify_scenario picks each seed scenario from the arguments."""
    call = base(scenario)
    got = classify_scenario(call["key"], call["value"], call.get("cache_mode", "Norm"),
                            call.get("scatter_mode", "None"), family)
    assert got == scenario


def test_classify_950_ignores_scatter_mode():
    """On the 950 class scatterMode has no effect (seed), so Alibi with a 3-D key is scenario 2."""
    call = base(2)
    assert classify_scenario(call["key"], call["value"], "Norm", "Alibi", A950) == 2
    assert classify_scenario(call["key"], call["value"], "Norm", "Alibi", A2) == 4


def test_classify_errors():
    """classify_scenario refuses a null value and a 2-D key."""
    with pytest.raises(AclnnError) as info:
        classify_scenario(_z((3, 2, 8)), None)
    assert info.value.status == NULLPTR
    with pytest.raises(AclnnError) as info:
        classify_scenario(_z((3, 8)), _z((3, 8)))
    assert info.value.status == TILING


def test_plan_scenario_1_fields():
    """PA_NZ plan: sizes, NZ last dim 16 for fp16, 32 for int8."""
    plan = run(base(1))
    assert (plan.scenario, plan.cache_mode, plan.compress_kind, plan.has_value) == (1, "PA_NZ", None, True)
    assert (plan.num_tokens, plan.num_heads, plan.k_head_size, plan.v_head_size) == (3, 2, 16, 32)
    assert (plan.num_blocks, plan.block_size, plan.cache_rows) == (2, 4, 8)
    assert (plan.last_dim_k, plan.last_dim_v, plan.elem_bytes) == (16, 16, 2)
    call = base(1, np.int8)
    call.update(key=_z((3, 2, 32), np.int8), value=_z((3, 2, 64), np.int8),
                key_cache=_z((2, 2, 4, 32), np.int8), value_cache=_z((2, 4, 4, 32), np.int8))
    assert run(call).last_dim_k == 32


def test_plan_scenario_2_nct_fields():
    """Nct plan carries strides/offsets; other modes leave them None."""
    plan = run(with_(2, scatter_mode="Nct", strides=[16, 8], offsets=[1, 2]))
    assert (plan.key_stride, plan.value_stride, plan.key_offset, plan.value_offset) == (16, 8, 1, 2)
    assert (plan.num_tasks, plan.k_head_size, plan.v_head_size, plan.last_dim_k) == (3, 8, 4, 0)
    assert run(base(2)).key_stride is None
    on_950 = with_(2, scatter_mode="Nct", strides=[16, 8], offsets=[1, 2], soc_family=A950)
    assert run(on_950).key_stride is None


def test_plan_scenario_6_fields():
    """Key-only plan: no value, v_head_size 0; an empty 1-D value is accepted too."""
    plan = run(base(6))
    assert (plan.scenario, plan.has_value, plan.v_head_size, plan.value_token_elems) == (6, False, 0, 0)
    assert run(with_(6, value=_z((0,)), value_cache=_z((0,)))).scenario == 6


@pytest.mark.parametrize("scenario, kind", [(4, "alibi"), (5, "rope")])
def test_plan_compress_fields(scenario, kind):
    """Compress plans: batch from seq_lens, tasks batch*num_head, token size = head size."""
    plan = run(base(scenario))
    assert (plan.compress_kind, plan.batch, plan.num_tasks, plan.num_tokens) == (kind, 2, 4, 5)
    assert (plan.num_heads, plan.key_token_elems, plan.cache_rows) == (2, 8, 16)
    assert run(with_(5, scatter_mode="Omni")).compress_kind == "omni"


def test_plan_scenario_3_fields():
    """Scenario 3 (950): Rope with compress_seq_offset, Alibi without; scatter_mode ignored."""
    plan = run(with_(3, scatter_mode="Omni"))
    assert (plan.scenario, plan.compress_kind, plan.scatter_mode) == (3, "rope", "None")
    assert (plan.batch, plan.seq_len, plan.num_tokens, plan.num_tasks) == (2, 3, 6, 4)
    assert run(without(3, "compress_seq_offset")).compress_kind == "alibi"


def test_plan_is_frozen_and_asdict():
    """The plan is immutable and exports plain values."""
    plan = run(base(2))
    with pytest.raises(Exception):
        plan.scenario = 3  # type: ignore[misc]
    assert plan.asdict()["dtype"] == "float16"


def test_timing_mode_specs_for_data_tensors():
    """Data tensors may be shape/dtype stand-ins; control tensors stay real."""
    call = base(5)
    for name in ("key", "value", "key_cache", "value_cache"):
        call[name] = Spec(call[name].shape, call[name].dtype)
    assert run(call).compress_kind == "rope"


def test_soc_family_of():
    """CANN SoC names map to their family (hardware.md §1)."""
    assert C.soc_family_of("Ascend910B4-1") == A2
    assert C.soc_family_of("Ascend910_9362") == A3
    assert C.soc_family_of("Ascend310P3") == "Ascend310P"
    assert C.soc_family_of("Ascend910ProB") == "Ascend910"


def test_allowed_dtypes_table():
    """The contract narrows Rope/Omni to float16/bfloat16 on A2/A3."""
    table = C.allowed_dtypes(A2, 5)
    assert table["key"] == (C.FP16, C.BF16) and table["slot_mapping"] == (C.INT32, C.INT64)
    assert C.INT8 in C.allowed_dtypes(A2, 4)["value"]
    assert "value" not in C.allowed_dtypes(A2, 6)


GARBAGE = [1, "x", [1, 2], {"a": 1}, object(), np.float16(1), np.zeros((2,), object), -1.5]
ARGS = ["key", "key_cache", "slot_mapping", "value", "value_cache", "compress_lens",
        "compress_seq_offset", "seq_lens", "cache_mode", "scatter_mode", "strides", "offsets", "soc_family"]


@pytest.mark.parametrize("scenario", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("arg", ARGS)
def test_garbage_never_raises_raw_errors(scenario, arg):
    """Any junk in any argument gives AclnnError (or a valid plan), never a raw Python error."""
    for junk in GARBAGE:
        call = base(scenario)
        call[arg] = junk
        try:
            validate(**call)
        except AclnnError:
            pass
    call = with_(scenario, scatter_mode="Nct") if scenario in (2, 6) else base(scenario)
    for junk in GARBAGE:
        call["strides"], call["offsets"] = junk, [1, 2]
        try:
            validate(**call)
        except AclnnError:
            pass
