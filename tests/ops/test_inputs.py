"""The shared input normalisation (ops/common/inputs.py) and the issue-16 reproducers it fixes.

Each test names the class of the issue's reproducer it pins: 3 (non-contiguous), 4 (TensorSpec in full
mode), 5 (empty optional quantisation tensors), 6 (tiling overrides), 7 (zero-stride caches).
"""
from __future__ import annotations

import numpy as np
import pytest

from npusim import TensorSpec
from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
from ops.common.inputs import InputContract, check_tiling, normalize
from ops.flash_attention_var_len_score.api import flash_attention_var_len_score as fa
from ops.prompt_flash_attention_v2.api import prompt_flash_attention_v2 as pfa
from ops.scatter_pa_kv_cache.api import scatter_pa_kv_cache as spkc

P = dict(num_heads=2, input_layout="BNSD")


def _q():
    return np.random.default_rng(0).standard_normal((1, 2, 64, 32)).astype(np.float16)


def _fa_args(t=64):
    x = np.random.default_rng(1).standard_normal((t, 2, 32)).astype(np.float16)
    return (x, x.copy(), x.copy()), dict(actual_seq_qlen=[t], actual_seq_kvlen=[t], head_num=2)


def _spkc_args():
    k = np.ones((10, 2, 32), np.float16)
    kc = np.zeros((4, 8, 2, 32), np.float16)
    return k, kc, np.arange(10, dtype=np.int32), k.copy(), kc.copy()


def _refused(fn, param: str, status: int = ACLNN_ERR_PARAM_INVALID) -> AclnnError:
    with pytest.raises(AclnnError) as exc:
        fn()
    assert exc.value.status == status, exc.value
    assert exc.value.message.startswith(param), exc.value.message
    return exc.value


@pytest.mark.parametrize("view", [np.asfortranarray, lambda a: a[..., ::-1],
                                  lambda a: np.broadcast_to(a[:, :, :1], a.shape)],
                         ids=["fortran", "reversed", "broadcast"])
def test_class3_pfa_refuses_non_contiguous_naming_the_parameter(view):
    """Seed 000: query/key/value 不支持非连续的Tensor -> 161002 naming the tensor (was NpuBufferError)."""
    q = _q()
    _refused(lambda: pfa(q, view(q), q, **P), "key")
    err = _refused(lambda: pfa(view(q), q, q, **P), "query")
    assert "C-contiguous" in err.message and "不支持非连续" in err.message


def test_class3_pfa_timing_mode_reads_arrays_for_shape_only():
    """Outside full mode an array stands for its shape and dtype: a broadcast view is a valid stand-in."""
    q = _q()
    res = pfa(np.broadcast_to(q[:, :, :1], q.shape), q, q, mode="timing", **P)
    assert res.cycles > 0


def test_class3_fa_accepts_non_contiguous_with_identical_bits():
    """FA's seed has no contiguity rule: a Fortran-ordered query gives the same bits as a C-ordered one."""
    (q, k, v), kw = _fa_args()
    want = fa(q, k, v, **kw).attention_out
    got = fa(np.asfortranarray(q), k[::1], v, **kw).attention_out
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_class3_spkc_key_may_be_non_contiguous_caches_may_not():
    """Seed 004: 除了key和value，输入参数不支持非连续."""
    k, kc, s, v, vc = _spkc_args()
    wide = np.ones((10, 2, 64), np.float16)
    res = spkc(wide[:, :, ::2], kc.copy(), s, v, vc.copy())
    np.testing.assert_array_equal(res.outputs["key_cache"].reshape(-1, 2, 32)[:10], wide[:, :, ::2])
    big = np.zeros((4, 8, 2, 64), np.float16)
    before = big.copy()
    _refused(lambda: spkc(k, big[..., ::2], s, v, vc), "key_cache")
    np.testing.assert_array_equal(big, before)


@pytest.mark.parametrize("op", ["pfa", "fa", "spkc"])
def test_class4_tensorspec_in_full_mode_is_refused(op):
    """A TensorSpec has no data: full mode refuses it with 161002 naming it (was a KernelError in PFA/FA)."""
    if op == "pfa":
        q = _q()
        _refused(lambda: pfa(TensorSpec(q.shape, q.dtype), q, q, **P), "query")
        _refused(lambda: pfa(q, q, q, atten_mask=TensorSpec((64, 64), np.bool_), sparse_mode=0, **P),
                 "atten_mask")
    elif op == "fa":
        (q, k, v), kw = _fa_args()
        _refused(lambda: fa(q, TensorSpec(k.shape, k.dtype), v, **kw), "key")
    else:
        k, kc, s, v, vc = _spkc_args()
        _refused(lambda: spkc(k, TensorSpec(kc.shape, kc.dtype), s, v, vc), "key_cache")


def test_class4_control_tensors_must_hold_values_in_every_mode():
    (q, k, v), kw = _fa_args()
    spec = TensorSpec((1,), np.int64)
    _refused(lambda: fa(q, k, v, **(kw | {"actual_seq_qlen": spec}), mode="timing"), "actual_seq_qlen")


@pytest.mark.parametrize("name", ["deq_scale1", "quant_scale1", "deq_scale2", "quant_offset2"])
def test_class5_pfa_empty_optional_quant_tensor_is_not_given(name):
    """An empty optional quantisation tensor with fp16 inputs means "not given" (was IndexError)."""
    q = _q()
    want = pfa(q, q, q, **P).attention_out
    empty = np.zeros((0,), np.uint64 if name.startswith("deq") else np.float32)
    got = pfa(q, q, q, **{name: empty}, **P).attention_out
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("tiling, param", [
    ("abc", "tiling"), ([("blockDim", 1)], "tiling"), ({"blockDim": None}, "tiling['blockDim']"),
    ({"blockDim": 2.5}, "tiling['blockDim']"), ({"blockDim": "3"}, "tiling['blockDim']"),
    ({"blockDim": True}, "tiling['blockDim']"), ({"blockDim": 0}, "tiling['blockDim']"),
    ({1: 2}, "tiling")])
@pytest.mark.parametrize("op", ["pfa", "fa", "spkc"])
def test_class6_tiling_overrides_are_type_checked(op, tiling, param):
    """Not a dict, None, 2.5, "3" and True are refused with 161002 naming the override (PFA and FA raised
    AttributeError/TypeError/ValueError or silently accepted them)."""
    if op == "pfa":
        q = _q()
        _refused(lambda: pfa(q, q, q, tiling=tiling, **P), param)
    elif op == "fa":
        (q, k, v), kw = _fa_args()
        _refused(lambda: fa(q, k, v, tiling=tiling, **kw), param)
    else:
        k, kc, s, v, vc = _spkc_args()
        _refused(lambda: spkc(k, kc, s, v, vc, tiling=tiling), param)


def test_class6_numpy_int_override_accepted():
    assert check_tiling({"blockDim": np.int64(2)}) == {"blockDim": 2}
    q = _q()
    assert pfa(q, q, q, tiling={"blockDim": np.int32(1)}, **P).block_dim == 1


def test_class7_zero_stride_cache_refused_without_allocating():
    """A 64 GiB zero-stride cache is refused at once (read-only, non-contiguous) instead of MemoryError."""
    k, _, s, v, _ = _spkc_args()
    huge = np.broadcast_to(np.zeros((1, 1, 1, 1), np.float16), (2 ** 20, 256, 2, 32))
    _refused(lambda: spkc(k, huge, s, v, huge), "key_cache")


def test_lists_for_data_tensors_become_arrays_then_validate_judges_them():
    """A nested list is an array of its values: float64 is then refused by the dtype rule, naming it."""
    q = _q()
    err = _refused(lambda: pfa(q.tolist(), q, q, **P), "query")
    assert "float64" in err.message
    _refused(lambda: pfa([[1, 2], [3]], q, q, **P), "query")  # ragged
    _refused(lambda: pfa(q, q, "not a tensor", **P), "value")
    _refused(lambda: pfa(q, q, np.array([["a"]]), **P), "value")
    _refused(lambda: pfa(q, q, q, mode=["full"], **P), "mode")


def test_inout_tensors_writeable_and_not_aliased():
    k, kc, s, v, vc = _spkc_args()
    ro = kc.copy()
    ro.flags.writeable = False
    _refused(lambda: spkc(k, ro, s, v, vc), "key_cache")
    before = kc.copy()
    _refused(lambda: spkc(k, kc, s, v, kc), "key_cache")  # the same cache twice
    np.testing.assert_array_equal(kc, before)


def test_normalize_contract_unit():
    """The layer alone: lists converted, specs normalised, nothing else copied."""
    c = InputContract(data=("x", "y"), control=("n",), inout=("y",))
    x = np.zeros(3, np.float32)
    out = normalize(c, {"x": x, "y": [1.0, 2.0], "n": [1, 2], "mode": "full", "tiling": None})
    assert out["x"] is x and isinstance(out["y"], np.ndarray) and out["n"] == [1, 2]
    spec = normalize(c, {"x": TensorSpec((2, 3), np.float16), "mode": "timing"})["x"]
    assert isinstance(spec, TensorSpec) and spec.shape == (2, 3)
    with pytest.raises(AclnnError, match=r"^\[161002 ACLNN_ERR_PARAM_INVALID\] x: shape"):
        normalize(c, {"x": TensorSpec.__new__(TensorSpec), "mode": "timing"} | {"x": _Bad()})


class _Bad:
    shape = (2, -1)
    dtype = np.float16
