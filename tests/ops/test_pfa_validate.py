"""aclnnPromptFlashAttentionV2 validation: per rule of contract.RULES a valid and an invalid call, the
PfaProblem fields, and a hypothesis test that nothing but AclnnError ever escapes."""
import types

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npusim.chip import chip
from npusim.errors import AclnnError
from npusim.memory.gm import TensorSpec as T
from ops.common import masks
from ops.prompt_flash_attention_v2 import contract as C
from ops.prompt_flash_attention_v2.validate import PfaProblem, validate

A2, A3, P310 = chip("Ascend910B2"), chip("Ascend910_9391"), chip("Ascend310P3")
FP16, BF16, FP32, INT8 = np.float16, ml_dtypes.bfloat16, np.float32, np.int8
BOOL, UINT8, UINT64 = np.bool_, np.uint8, np.uint64
CMASK = T((2048, 2048), BOOL)
ONE_F32, ONE_U64 = T((1,), FP32), T((1,), UINT64)


def a2(**over):
    """fp16 BNSD, B=2, N=4, N_kv=2, S1=64, S2=128, D=64 on 910B2."""
    kw = dict(query=T((2, 4, 64, 64), FP16), key=T((2, 2, 128, 64), FP16), value=T((2, 2, 128, 64), FP16),
              num_heads=4, num_key_value_heads=2, input_layout="BNSD", chip_spec=A2)
    kw.update(over)
    return kw


def bsh(n=4, n_kv=2, d=64, b=2, s1=64, s2=128, dtype=FP16, **over):
    """BSH call with H = N*D."""
    kw = a2(query=T((b, s1, n * d), dtype), key=T((b, s2, n_kv * d), dtype), value=T((b, s2, n_kv * d), dtype),
            num_heads=n, num_key_value_heads=n_kv, input_layout="BSH")
    kw.update(over)
    return kw


def bnsd(b=2, n=4, n_kv=2, s1=64, s2=128, d=64, dtype=FP16, **over):
    """BNSD call of the given sizes."""
    kw = a2(query=T((b, n, s1, d), dtype), key=T((b, n_kv, s2, d), dtype), value=T((b, n_kv, s2, d), dtype),
            num_heads=n, num_key_value_heads=n_kv)
    kw.update(over)
    return kw


def i8(out=FP16, **over):
    """INT8 inputs with the per-tensor scales of the int8 path."""
    kw = bnsd(dtype=INT8, deq_scale1=ONE_U64, quant_scale1=ONE_F32, deq_scale2=ONE_F32, out_dtype=out)
    if out == INT8:
        kw["quant_scale2"] = ONE_F32
    kw.update(over)
    return kw


def f2i8(dtype=FP16, **over):
    """fp16/bf16 inputs, INT8 output (quant_scale2 only)."""
    return bnsd(dtype=dtype, **{"out_dtype": INT8, "quant_scale2": ONE_F32, **over})


def p310(**over):
    """The seed's Atlas inference product: fp16 only, defaults only, S1 = S2 = 128."""
    kw = dict(query=T((1, 2, 128, 64), FP16), key=T((1, 2, 128, 64), FP16), value=T((1, 2, 128, 64), FP16),
              num_heads=2, input_layout="BNSD", chip_spec=P310)
    kw.update(over)
    return kw


def m0(**over):
    """sparse_mode 0 with a full [S1, S2] bool mask."""
    return a2(**{"atten_mask": T((64, 128), BOOL), **over})


# rule -> list of (valid kwargs, invalid kwargs)
CASES = {
    "query_required": [(a2(), a2(query=None))],
    "key_required": [(a2(), a2(key=None))],
    "value_required": [(a2(), a2(value=None))],
    "input_layout_required": [(a2(), a2(input_layout=None))],
    "num_heads_required": [(a2(), a2(num_heads=None))],
    "chip_supported": [(a2(chip_spec=A3), a2(chip_spec=types.SimpleNamespace(soc_family="Ascend910_95"))),
                       (p310(), a2(chip_spec=None))],
    "tensor_type": [(a2(), a2(query=[[1.0]])), (a2(), a2(key="k")), (m0(), m0(atten_mask=5)),
                    (a2(), a2(value=types.SimpleNamespace(shape=(2, 2, 128, 64)))),
                    (a2(), a2(value=types.SimpleNamespace(shape=(2, -2, 128, 64), dtype=FP16))),
                    (a2(), a2(key=types.SimpleNamespace(shape=5, dtype=FP16)))],
    "attr_type": [(a2(), a2(num_heads=4.0)), (a2(), a2(scale_value="1")), (a2(), a2(pre_tokens=1.5)),
                  (a2(), a2(next_tokens=2 ** 70)), (a2(), a2(sparse_mode=True)), (a2(), a2(input_layout=3)),
                  (a2(out_dtype=np.float16), a2(out_dtype="no-such-dtype")), (a2(), a2(inner_precise=None)),
                  (a2(), a2(apply_pse_shift=1))],
    "qkv_dtype": [(a2(), bnsd(dtype=FP32)),
                  (p310(), p310(query=T((1, 2, 128, 64), BF16), key=T((1, 2, 128, 64), BF16),
                                value=T((1, 2, 128, 64), BF16)))],
    "qkv_dtype_equal": [(a2(), a2(key=T((2, 2, 128, 64), BF16))), (a2(), a2(value=T((2, 2, 128, 64), INT8)))],
    "out_dtype": [(bnsd(dtype=BF16), bnsd(dtype=BF16, out_dtype=FP16)), (a2(), a2(out_dtype=BF16)),
                  (i8(), i8(out=BF16)), (p310(), p310(out_dtype=INT8)), (a2(), a2(out_dtype=FP32))],
    "pse_dtype": [(a2(pse_shift=T((1, 4, 64, 128), FP16)), a2(pse_shift=T((1, 4, 64, 128), BF16))),
                  (i8(pse_shift=T((1, 4, 64, 128), FP16)), i8(pse_shift=T((1, 4, 64, 128), INT8)))],
    "mask_dtype": [(m0(atten_mask=T((64, 128), INT8)), m0(atten_mask=T((64, 128), FP16))),
                   (m0(atten_mask=T((64, 128), UINT8)), m0(atten_mask=T((64, 128), FP32))),
                   (p310(atten_mask=T((128, 128), BOOL)), p310(atten_mask=T((128, 128), INT8)))],
    "deq_scale_dtype": [(i8(deq_scale1=ONE_F32), i8(deq_scale1=T((1,), FP16))),
                        (i8(deq_scale2=ONE_U64), i8(deq_scale2=T((1,), np.int64)))],
    "quant_scale1_dtype": [(i8(), i8(quant_scale1=T((1,), FP16)))],
    "quant_scale2_dtype": [(f2i8(dtype=BF16, quant_scale2=T((1,), BF16)), f2i8(quant_scale2=T((1,), BF16))),
                           (f2i8(), f2i8(quant_scale2=T((1,), FP16))),
                           (f2i8(), f2i8(quant_scale2=None, quant_offset2=T((1,), FP16)))],
    "quant_offset2_dtype": [(f2i8(dtype=BF16, quant_offset2=T((1,), FP32)),
                             f2i8(dtype=BF16, quant_offset2=T((1,), BF16)))],
    "product_null_only": [(p310(), p310(**{name: ONE_F32})) for name in
                          ("pse_shift", "deq_scale1", "quant_scale1", "deq_scale2", "quant_scale2", "quant_offset2")]
    + [(p310(actual_seq_lengths=[]), p310(actual_seq_lengths=[128])),
       (p310(), p310(actual_seq_lengths_kv=[128]))],
    "product_default_only": [(p310(pre_tokens=214748647), p310(pre_tokens=65536)),
                             (p310(next_tokens=2147483647), p310(next_tokens=128)),
                             (p310(num_key_value_heads=0), p310(num_key_value_heads=2)),
                             (p310(sparse_mode=0), p310(sparse_mode=1, atten_mask=T((128, 128), BOOL)))],
    "layout": [(a2(input_layout="BNSD_BSND"), a2(input_layout="TND")), (bsh(), bsh(input_layout="SH")),
               (a2(), a2(input_layout="bnsd")), (a2(), a2(input_layout=""))],
    "layout_rank": [(bsh(), bsh(query=T((2, 64, 4, 64), FP16))), (a2(), a2(input_layout="BSH")),
                    (a2(), a2(key=T((2, 128, 128), FP16)))],
    "num_heads_positive": [(a2(), a2(num_heads=0)), (a2(), a2(num_heads=-4))],
    "head_dim_split": [(bsh(), bsh(num_heads=3)), (bsh(), bsh(num_heads=1000))],
    "head_dim_max": [(bnsd(d=512), bnsd(d=520)), (bnsd(), bnsd(value=T((2, 2, 128, 576), FP16)))],
    "actual_seq_lengths_type": [(a2(actual_seq_lengths=np.array([3, 4])), a2(actual_seq_lengths=[1.5])),
                                (a2(actual_seq_lengths=(3,)), a2(actual_seq_lengths="12")),
                                (a2(), a2(actual_seq_lengths=np.array([[1]]))),
                                (a2(), a2(actual_seq_lengths_kv=[True])),
                                (a2(), a2(actual_seq_lengths_kv=[2 ** 64]))],
    "inner_precise": [(a2(inner_precise=0), a2(inner_precise=5)), (a2(inner_precise=3), a2(inner_precise=-1)),
                      (p310(inner_precise=4), a2(inner_precise=4))],
    "head_dim_equal": [(a2(), a2(key=T((2, 2, 128, 32), FP16), value=T((2, 2, 128, 32), FP16))),
                       (bsh(), bsh(key=T((2, 128, 130), FP16), value=T((2, 128, 130), FP16))),
                       (bsh(), bsh(num_key_value_heads=1))],
    "kv_shape_equal": [(a2(), a2(value=T((2, 2, 96, 64), FP16)))],
    "empty_kv_int8": [(a2(key=T((2, 2, 0, 64), FP16), value=T((2, 2, 0, 64), FP16)),
                       i8(key=T((2, 2, 0, 64), INT8), value=T((2, 2, 0, 64), INT8)))],
    "quant_required": [(i8(), i8(deq_scale1=None)), (i8(), i8(quant_scale1=None)), (i8(), i8(deq_scale2=None)),
                       (i8(out=INT8), i8(out=INT8, quant_scale2=None)), (f2i8(), f2i8(quant_scale2=None)),
                       (f2i8(dtype=BF16), f2i8(dtype=BF16, quant_scale2=None))],
    "quant_forbidden": [(i8(), i8(quant_scale2=ONE_F32)), (i8(), i8(quant_offset2=ONE_F32)),
                        (f2i8(), f2i8(deq_scale1=ONE_U64)), (f2i8(), f2i8(quant_scale1=ONE_F32)),
                        (f2i8(), f2i8(deq_scale2=ONE_F32))],
    "quant_not_empty": [(i8(), i8(deq_scale1=T((0,), UINT64))), (f2i8(), f2i8(quant_scale2=T((0,), FP32)))],
    "per_tensor_scale": [(i8(deq_scale1=T((1, 1), UINT64)), i8(deq_scale1=T((2,), UINT64))),
                         (i8(), i8(quant_scale1=T((4,), FP32)))],
    "quant_scale2_shape": [(f2i8(quant_scale2=T((4, 64), FP32)), f2i8(quant_scale2=T((5,), FP32))),
                           (f2i8(quant_scale2=T((1, 4, 1, 64), FP32)), f2i8(quant_scale2=T((4, 32), FP32)))],
    "quant_offset2_shape": [(f2i8(quant_scale2=T((4, 64), FP32), quant_offset2=T((4, 64), FP32)),
                             f2i8(quant_scale2=T((4, 64), FP32), quant_offset2=T((256,), FP32))),
                            (f2i8(quant_offset2=ONE_F32), f2i8(quant_offset2=T((0,), FP32)))],
    "quant_per_channel_d_align": [(bnsd(d=64, out_dtype=INT8, quant_scale2=T((4, 64), FP32)),
                                   bnsd(d=48, out_dtype=INT8, quant_scale2=T((4, 48), FP32)))],
    "num_kv_heads_nonnegative": [(a2(), a2(num_key_value_heads=-1))],
    "num_heads_max": [(bnsd(n=256, n_kv=256), bnsd(n=257, n_kv=257)), (p310(), p310(
        query=T((1, 257, 128, 64), FP16), key=T((1, 257, 128, 64), FP16), value=T((1, 257, 128, 64), FP16),
        num_heads=257))],
    "num_heads_match": [(a2(), a2(num_heads=8, num_key_value_heads=2)),
                        (a2(input_layout="BSND", query=T((2, 64, 4, 64), FP16), key=T((2, 128, 2, 64), FP16),
                            value=T((2, 128, 2, 64), FP16)),
                         a2(input_layout="BSND", query=T((2, 64, 4, 64), FP16), key=T((2, 128, 2, 64), FP16),
                            value=T((2, 128, 2, 64), FP16), num_heads=2, num_key_value_heads=1)),
                        # empty key/value (zeros out) still need num_heads = the query's N axis
                        (a2(input_layout="BSND", query=T((1, 1, 2, 8), FP16), key=T((1, 0, 1, 8), FP16),
                            value=T((1, 0, 1, 8), FP16), num_heads=2, num_key_value_heads=1),
                         a2(input_layout="BSND", query=T((1, 1, 2, 8), FP16), key=T((1, 0, 1, 8), FP16),
                            value=T((1, 0, 1, 8), FP16), num_heads=3, num_key_value_heads=1))],
    "num_kv_heads_match": [(a2(), a2(num_key_value_heads=1)), (bnsd(n_kv=4, num_key_value_heads=0),
                                                             a2(num_key_value_heads=0))],
    "gqa_divisible": [(bsh(n=6, n_kv=3), bsh(n=6, n_kv=4))],
    "gqa_group_max": [(bsh(n=128, n_kv=2, d=16), bsh(n=130, n_kv=2, d=16))],
    "batch_equal": [(a2(), a2(key=T((3, 2, 128, 64), FP16), value=T((3, 2, 128, 64), FP16)))],
    "batch_max": [(bnsd(b=65536), bnsd(b=65537)), (p310(), p310(query=T((129, 2, 128, 64), FP16),
                                                            key=T((129, 2, 128, 64), FP16),
                                                            value=T((129, 2, 128, 64), FP16)))],
    "batch_max_unaligned_d": [(bnsd(b=129, d=48), bnsd(b=129, d=40)), (bnsd(b=128, d=40), bnsd(b=200, d=8)),
                              (i8(**bnsd(b=129, d=64, dtype=INT8)), i8(**bnsd(b=129, d=48, dtype=INT8)))],
    "seq_max": [(bnsd(s1=20971520, b=1), bnsd(s1=20971521, b=1)), (bnsd(s2=20971520), bnsd(s2=20971521)),
                (p310(), p310(query=T((1, 2, 65536, 64), FP16)))],
    "hidden_max": [(bnsd(n=255, n_kv=255, d=257), bsh(n=255, n_kv=255, d=257)),
                   (bsh(n=255, n_kv=255, d=256), a2(input_layout="BSND", query=T((1, 8, 255, 257), FP16),
                                                    key=T((1, 8, 255, 257), FP16), value=T((1, 8, 255, 257), FP16),
                                                    num_heads=255, num_key_value_heads=255))],
    "actual_seq_lengths_len": [(bnsd(b=3, actual_seq_lengths=[5]), bnsd(b=3, actual_seq_lengths=[5, 6])),
                               (bnsd(b=3, actual_seq_lengths=[1, 2, 3, -9]), bnsd(b=4, actual_seq_lengths=[1, 2, 3]))],
    "actual_seq_lengths_range": [(a2(actual_seq_lengths=[64, 0]), a2(actual_seq_lengths=[65, 10])),
                                 (a2(actual_seq_lengths=[0]), a2(actual_seq_lengths=[-1]))],
    "actual_seq_lengths_kv_len": [(bnsd(b=3, actual_seq_lengths_kv=[5, 6, 7]),
                                   bnsd(b=3, actual_seq_lengths_kv=[5, 6]))],
    "actual_seq_lengths_kv_range": [(a2(actual_seq_lengths_kv=[128]), a2(actual_seq_lengths_kv=[129])),
                                    (a2(), a2(actual_seq_lengths_kv=[5, -2]))],
    "sparse_mode": [(a2(sparse_mode=4, atten_mask=CMASK), a2(sparse_mode=5, atten_mask=CMASK)),
                    (a2(), a2(sparse_mode=-1)), (a2(), a2(sparse_mode=8, atten_mask=CMASK))],
    "mask_required": [(a2(sparse_mode=m, atten_mask=CMASK if m > 1 else T((64, 128), BOOL)), a2(sparse_mode=m))
                      for m in (1, 2, 3, 4)] + [(m0(), a2(sparse_mode=2, atten_mask=T((0, 2048), BOOL)))],
    "mask_rank": [(a2(sparse_mode=2, atten_mask=CMASK), a2(sparse_mode=2, atten_mask=T((2048,), BOOL))),
                  (m0(), m0(atten_mask=T((1, 1, 1, 64, 128), BOOL)))],
    "mask_shape_full": [(m0(atten_mask=T((64, 160), BOOL)), m0(atten_mask=T((63, 128), BOOL))),
                        (m0(atten_mask=T((2, 64, 128), BOOL)), m0(atten_mask=T((3, 64, 128), BOOL))),
                        (m0(atten_mask=T((1, 1, 64, 128), BOOL)), m0(atten_mask=T((2, 2, 64, 128), BOOL))),
                        (a2(sparse_mode=1, atten_mask=T((2, 1, 64, 128), UINT8)),
                         a2(sparse_mode=1, atten_mask=T((2, 1, 64, 127), UINT8)))],
    "mask_shape_compressed": [(a2(sparse_mode=3, atten_mask=T((1, 2048, 2048), INT8)),
                               a2(sparse_mode=3, atten_mask=T((2048, 1024), INT8))),
                              (a2(sparse_mode=4, atten_mask=T((1, 1, 2048, 2048), BOOL)),
                               a2(sparse_mode=4, atten_mask=T((2, 2048, 2048), BOOL))),
                              (a2(sparse_mode=2, atten_mask=CMASK), a2(sparse_mode=2, atten_mask=T((64, 128), BOOL)))],
    "mask_seq_aligned": [(p310(atten_mask=T((128, 128), BOOL)),
                          p310(key=T((1, 2, 256, 64), FP16), value=T((1, 2, 256, 64), FP16),
                               atten_mask=T((128, 256), BOOL))),
                         (p310(), p310(query=T((1, 2, 64, 64), FP16), key=T((1, 2, 64, 64), FP16),
                                       value=T((1, 2, 64, 64), FP16), atten_mask=T((64, 64), BOOL)))],
    "pse_shape": [(a2(pse_shift=T((1, 4, 64, 128), FP16), apply_pse_shift=True),
                   a2(pse_shift=T((1, 4, 64, 100), FP16), apply_pse_shift=True)),
                  (a2(pse_shift=T((2, 4, 64, 130), FP16), apply_pse_shift=True),
                   a2(pse_shift=T((2, 2, 64, 128), FP16), apply_pse_shift=True)),
                  (a2(pse_shift=T((4, 64, 100), FP16)), a2(pse_shift=T((4, 64, 128), FP16), apply_pse_shift=True))],
    "tokens_not_both_negative": [(m0(pre_tokens=-1, next_tokens=5), m0(pre_tokens=-1, next_tokens=-1)),
                                 (a2(sparse_mode=4, atten_mask=CMASK, pre_tokens=-1, next_tokens=70),
                                  a2(sparse_mode=4, atten_mask=CMASK, pre_tokens=-1, next_tokens=-1)),
                                 (a2(pre_tokens=-1, next_tokens=-1), m0(pre_tokens=-5, next_tokens=-3))],
    "tokens_order": [(m0(pre_tokens=3, next_tokens=-3), m0(pre_tokens=2, next_tokens=-3)),
                     (a2(sparse_mode=4, atten_mask=CMASK, pre_tokens=60, next_tokens=-60),
                      a2(sparse_mode=4, atten_mask=CMASK, pre_tokens=10, next_tokens=-60))],
    "mode0_next_bound": [(m0(pre_tokens=100, next_tokens=-63), m0(pre_tokens=100, next_tokens=-64)),
                         (m0(pre_tokens=100, next_tokens=-10, actual_seq_lengths=[64, 11]),
                          m0(pre_tokens=100, next_tokens=-10, actual_seq_lengths=[64, 10]))],
    "mode0_pre_bound": [(m0(pre_tokens=-127, next_tokens=200), m0(pre_tokens=-128, next_tokens=200)),
                        (m0(pre_tokens=-20, next_tokens=200, actual_seq_lengths_kv=[128, 21]),
                         m0(pre_tokens=-20, next_tokens=200, actual_seq_lengths_kv=[128, 20]))],
    "band_next_bound": [(a2(sparse_mode=4, atten_mask=CMASK, pre_tokens=200, next_tokens=-127),
                         a2(sparse_mode=4, atten_mask=CMASK, pre_tokens=200, next_tokens=-128)),
                        (a2(sparse_mode=4, atten_mask=CMASK, pre_tokens=200, next_tokens=-5,
                            actual_seq_lengths_kv=[128, 6]),
                         a2(sparse_mode=4, atten_mask=CMASK, pre_tokens=200, next_tokens=-5,
                            actual_seq_lengths_kv=[128, 5]))],
    "band_pre_bound": [(a2(sparse_mode=4, atten_mask=CMASK, pre_tokens=-63, next_tokens=200),
                        a2(sparse_mode=4, atten_mask=CMASK, pre_tokens=-64, next_tokens=200))],
    "int8_out_band_negative": [(f2i8(sparse_mode=4, atten_mask=CMASK, pre_tokens=0, next_tokens=10),
                                f2i8(sparse_mode=4, atten_mask=CMASK, pre_tokens=-1, next_tokens=10)),
                               (i8(out=INT8, sparse_mode=4, atten_mask=CMASK, pre_tokens=100, next_tokens=0),
                                i8(out=INT8, sparse_mode=4, atten_mask=CMASK, pre_tokens=100, next_tokens=-1))],
    "int8_out_offset_rows": [
        # sparse_mode 0 with mask: S1 - S2 - pre > 0 in some batch
        (f2i8(atten_mask=T((64, 128), BOOL), pre_tokens=10, actual_seq_lengths_kv=[20]),
         f2i8(atten_mask=T((64, 128), BOOL), pre_tokens=10, actual_seq_lengths_kv=[20], quant_offset2=ONE_F32)),
        # sparse_mode 0 with mask: next < 0
        (f2i8(atten_mask=T((64, 128), BOOL), pre_tokens=100, next_tokens=-1),
         f2i8(atten_mask=T((64, 128), BOOL), pre_tokens=100, next_tokens=-1, quant_offset2=ONE_F32)),
        # sparse_mode 3: S2 - S1 < 0
        (f2i8(sparse_mode=3, atten_mask=CMASK, actual_seq_lengths_kv=[128, 32]),
         f2i8(sparse_mode=3, atten_mask=CMASK, actual_seq_lengths_kv=[128, 32], quant_offset2=ONE_F32)),
        # sparse_mode 4: next + S2 - S1 < 0 (pre < 0 is int8_out_band_negative first)
        (f2i8(sparse_mode=4, atten_mask=CMASK, pre_tokens=10, next_tokens=0, quant_offset2=ONE_F32),
         f2i8(sparse_mode=4, atten_mask=CMASK, pre_tokens=10, next_tokens=0, actual_seq_lengths_kv=[32],
              quant_offset2=ONE_F32)),
        # sparse_mode 1/2 never intercept; sparse_mode 0 without a mask ignores the tokens
        (f2i8(sparse_mode=2, atten_mask=CMASK, actual_seq_lengths_kv=[3], quant_offset2=ONE_F32),
         i8(out=INT8, sparse_mode=3, atten_mask=CMASK, actual_seq_lengths_kv=[3], quant_offset2=ONE_F32)),
        (f2i8(next_tokens=-1, actual_seq_lengths_kv=[3], quant_offset2=ONE_F32),
         f2i8(sparse_mode=0, atten_mask=T((2, 1, 64, 128), BOOL), next_tokens=-1, quant_offset2=ONE_F32,
              pre_tokens=5)),
    ],
}
CASE_PARAMS = [pytest.param(rule, ok, bad, id=f"{rule}-{i}")
               for rule, pairs in CASES.items() for i, (ok, bad) in enumerate(pairs)]


def test_every_rule_has_cases():
    """The parametrized table covers every rule of contract.RULES (and nothing else)."""
    assert set(CASES) == set(C.RULES)


@pytest.mark.parametrize("rule,ok,bad", CASE_PARAMS)
def test_pfa_rule(rule, ok, bad):
    """The valid call returns a PfaProblem; the invalid one raises the rule's status, naming it."""
    assert isinstance(validate(**ok), PfaProblem)
    with pytest.raises(AclnnError) as e:
        validate(**bad)
    assert e.value.status == C.RULES[rule].status, str(e.value)
    assert f"rule {rule}:" in e.value.message, str(e.value)


def test_status_codes_of_rule_groups():
    """161001 only for None required inputs; every rule cites a source."""
    nullptr = {r.name for r in C.RULES.values() if r.status == 161001}
    assert nullptr == {"query_required", "key_required", "value_required", "input_layout_required",
                       "num_heads_required"}
    assert all(r.source and r.text for r in C.RULES.values())
    assert {r.status for r in C.RULES.values()} == {161001, 161002, 561002}


# --- PfaProblem fields ---------------------------------------------------------------------------------
def test_problem_dims_and_defaults():
    """BNSD fp16 GQA: dims, G, default tokens as the tiling sets them, no mask, no quant."""
    p = validate(**a2())
    assert (p.batch, p.num_heads, p.num_kv_heads, p.group, p.s1, p.s2, p.head_dim) == (2, 4, 2, 2, 64, 128, 64)
    assert (p.layout, p.out_layout, p.out_shape) == ("BNSD", "BNSD", (2, 4, 64, 64))
    assert p.dtype == np.float16 and p.out_dtype == np.float16
    assert (p.sparse_pre_tokens, p.sparse_next_tokens) == (masks.PFA_INT_MAX, masks.PFA_INT_MAX)
    assert p.mask_kind == C.MaskKind.NONE and p.quant_path == C.QuantPath.NONE
    assert not p.need_init and not p.query_empty and not p.kv_empty
    assert p.actual_seq_lengths.tolist() == [64, 64] and p.actual_seq_lengths_kv.tolist() == [128, 128]
    with pytest.raises(ValueError):
        p.actual_seq_lengths[0] = 1  # read-only


def test_problem_bnsd_bsnd_and_bsh():
    """BNSD_BSND writes BSND; BSH splits H with num_heads."""
    p = validate(**a2(input_layout="BNSD_BSND"))
    assert p.out_layout == "BSND" and p.out_shape == (2, 64, 4, 64)
    p = validate(**bsh(n=6, n_kv=3, d=32))
    assert (p.num_heads, p.num_kv_heads, p.head_dim, p.out_shape) == (6, 3, 32, (2, 64, 192))


@pytest.mark.parametrize("raw,want", [([7], [7, 7, 7]), ([1, 2, 3, 4, -5], [1, 2, 3]), (None, [64, 64, 64]),
                                      ([], [64, 64, 64]), (np.array([3, 0, 64]), [3, 0, 64])])
def test_actual_seq_lengths_rule(raw, want):
    """Length 1 applies to every batch, length >= B takes the first B (the rest is never read)."""
    p = validate(**bnsd(b=3, actual_seq_lengths=raw))
    assert p.actual_seq_lengths.dtype == np.int64 and p.actual_seq_lengths.tolist() == want
    assert p.actual_seq_lengths_given == (raw is not None and len(raw) > 0)
    assert p.need_init == (want != [64, 64, 64])


@pytest.mark.parametrize("over", [
    dict(sparse_mode=0, atten_mask=T((64, 128), BOOL), pre_tokens=5, next_tokens=-2),
    dict(sparse_mode=2, atten_mask=CMASK, actual_seq_lengths=[40, 64], actual_seq_lengths_kv=[100, 30]),
    dict(sparse_mode=3, atten_mask=CMASK, actual_seq_lengths=[40, 64], actual_seq_lengths_kv=[100, 30]),
    dict(sparse_mode=4, atten_mask=CMASK, pre_tokens=-7, next_tokens=9, actual_seq_lengths_kv=[100, 120]),
    dict(sparse_mode=1, atten_mask=T((1, 64, 128), INT8)),
])
def test_problem_tokens_match_masks(over):
    """pre/next_tokens_lu equal masks.canonical_tokens per batch; computed_seq_lengths stop at the last
    row that keeps a column (brute force over masks.keep_mask)."""
    p = validate(**a2(**over))
    for bi in range(p.batch):
        s1b, s2b = int(p.actual_seq_lengths[bi]), int(p.actual_seq_lengths_kv[bi])
        lu = masks.canonical_tokens(p.sparse_mode, p.pre_tokens, p.next_tokens, s1b, s2b, True, inference=True)
        assert (int(p.pre_tokens_lu[bi]), int(p.next_tokens_lu[bi])) == lu
        keep = masks.band_keep(*lu, s1b, s2b)
        rows = np.flatnonzero(~masks.invalid_rows(keep))
        last = int(rows[-1]) + 1 if rows.size else 0
        assert int(p.computed_seq_lengths[bi]) >= last
        assert not keep[int(p.computed_seq_lengths[bi]):].any()


def test_problem_computed_lengths_literals():
    """The tiling drops trailing rows no key reaches: mode 0 (S1 > S2 + pre), band (pre < 0)."""
    p = validate(**m0(pre_tokens=5, actual_seq_lengths_kv=[20]))
    assert p.computed_seq_lengths.tolist() == [25, 25] and p.need_init
    p = validate(**a2(sparse_mode=4, atten_mask=CMASK, pre_tokens=-7, next_tokens=200))
    assert p.computed_seq_lengths.tolist() == [57, 57] and p.need_init
    assert p.pre_tokens_lu.tolist() == [-71, -71] and p.next_tokens_lu.tolist() == [264, 264]


@pytest.mark.parametrize("over,kind,batch", [
    (dict(atten_mask=T((2, 1, 64, 128), BOOL)), C.MaskKind.FULL, 2),
    (dict(atten_mask=T((1, 64, 128), BOOL)), C.MaskKind.FULL, 1),
    (dict(atten_mask=T((0,), BOOL)), C.MaskKind.NONE, 0),
    (dict(sparse_mode=3, atten_mask=T((1, 1, 2048, 2048), UINT8)), C.MaskKind.COMPRESSED, 1),
])
def test_problem_mask_form(over, kind, batch):
    """Mask kind, batch (0: none) and dtype; an empty mask tensor counts as no mask (tiling)."""
    p = validate(**a2(**over))
    assert p.mask_kind == kind and p.mask_batch == batch
    assert (p.mask_dtype is None) == (kind == C.MaskKind.NONE)


def test_problem_quant_fields():
    """Quant path, deq-scale encodings, per-tensor/per-channel quant_scale2, offset flag, ignored params."""
    p = validate(**i8())
    assert p.quant_path == C.QuantPath.INT8_IN_FP16_OUT
    assert (p.deq_scale1_encoding, p.deq_scale2_encoding) == ("uint64", "fp32")
    assert p.quant_scale2_mode is None and p.head_dim_padded == 64 and p.softmax_dtype == np.float16
    p = validate(**i8(out=INT8, quant_scale2=T((4, 64), FP32), quant_offset2=T((4, 64), FP32)))
    assert p.quant_path == C.QuantPath.INT8_IN_INT8_OUT and p.quant_scale2_mode == C.ScaleMode.PER_CHANNEL
    assert p.has_quant_offset2 and p.quant_scale2_dtype == np.float32
    p = validate(**f2i8(dtype=BF16, quant_scale2=T((1,), BF16)))
    assert p.quant_path == C.QuantPath.FP_IN_INT8_OUT and p.quant_scale2_mode == C.ScaleMode.PER_TENSOR
    assert p.quant_scale2_dtype == BF16 and not p.has_quant_offset2 and p.deq_scale1_encoding is None
    p = validate(**a2(quant_scale2=ONE_F32, deq_scale1=ONE_U64, pse_shift=T((1, 4, 64, 128), FP16)))
    assert p.ignored_params == ("deq_scale1", "quant_scale2", "pse_shift") and p.pse_shape is None


@pytest.mark.parametrize("call,ip,pse,high,smax,fix", [
    (a2, 1, False, False, FP16, False), (a2, 0, False, True, FP32, False), (a2, 2, False, True, FP32, True),
    (a2, 3, False, False, FP16, True), (a2, 1, True, True, FP32, False),
    (lambda **k: bnsd(dtype=BF16, **k), 1, False, True, FP32, False),
    (p310, 1, False, False, FP32, False), (p310, 4, False, False, FP16, False),
])
def test_problem_precision(call, ip, pse, high, smax, fix):
    """fp16: inner_precise bit0 picks the fp32 (0) or fp16 (1) softmax, pse forces fp32; bf16 always fp32;
    310P: fp32 unless approximate (4); bit1 = invalid-row fix."""
    over = dict(inner_precise=ip)
    if pse:
        over.update(pse_shift=T((1, 4, 64, 128), FP16), apply_pse_shift=True)
    p = validate(**call(**over))
    assert (p.high_precision, p.softmax_dtype, p.row_invalid_fix) == (high, np.dtype(smax), fix)
    assert p.pse_shape == ((1, 4, 64, 128) if pse else None)


def test_problem_head_dim_padding_and_scale():
    """aclnn pads D to 16 (32 with INT8) before the kernel; scale_value is kept as double and as fp32."""
    assert validate(**bnsd(d=40)).head_dim_padded == 48
    assert validate(**i8(**bnsd(d=40, dtype=INT8))).head_dim_padded == 64
    p = validate(**a2(scale_value=0.1))
    assert p.scale_value == 0.1 and p.scale_value_fp32 == float(np.float32(0.1))
    assert validate(**a2(scale_value=1e300)).scale_value_fp32 == float("inf")


def test_empty_query_returns_early():
    """Empty query: nothing to do, returned before dtype/shape checks (aclnn: empty attentionOut)."""
    p = validate(**bnsd(b=0, dtype=FP32, num_heads=4))
    assert p.query_empty and not p.kv_empty and p.batch == 0
    with pytest.raises(AclnnError) as e:
        validate(**bnsd(b=0, key=None))
    assert e.value.status == 161001


def test_empty_kv_gives_zero_output_problem():
    """S2 = 0: kv_empty, output zero-filled (need_init)."""
    p = validate(**bnsd(s2=0))
    assert p.kv_empty and p.need_init and p.s2 == 0 and p.out_shape == (2, 4, 64, 64)


def test_numpy_inputs_and_zero_stride_views():
    """Real arrays and zero-stride broadcast views (timing mode) are read through shape/dtype only."""
    q = np.zeros((2, 64, 4, 64), np.float16)
    kv = np.broadcast_to(np.zeros((1, 1, 1, 1), np.float16), (2, 128, 2, 64))
    mask = np.triu(np.ones((2048, 2048), bool), 1)
    p = validate(q, kv, kv, atten_mask=mask, num_heads=4, num_key_value_heads=2, input_layout="BSND",
                 sparse_mode=2, chip_spec=A2)
    assert p.mask_kind == C.MaskKind.COMPRESSED and p.layout == "BSND"


# --- never anything but AclnnError ------------------------------------------------------------------------
_DTYPES = [FP16, BF16, FP32, INT8, UINT8, BOOL, UINT64, np.int64, np.int32, np.float64]
_junk = st.sampled_from([None, "x", 3, 2.5, [1, 2], object(), True])
_dims = st.lists(st.integers(0, 300), min_size=0, max_size=5) | st.lists(
    st.sampled_from([0, 1, 2, 64, 128, 2048, 65537, 2 ** 31, 2 ** 40]), max_size=5)
_tensor = st.builds(T, _dims, st.sampled_from(_DTYPES)) | _junk
_int_attr = st.integers(-(2 ** 65), 2 ** 65) | st.sampled_from(
    [0, 1, -1, 4, 2147483647, 214748647, -(2 ** 63), 2 ** 63 - 1]) | _junk
_lens = (st.none() | st.lists(st.integers(-5, 300), max_size=6)
         | st.lists(st.integers(-(2 ** 70), 2 ** 70), max_size=3) | _junk)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.fixed_dictionaries(dict(
    query=_tensor, key=_tensor, value=_tensor, pse_shift=_tensor, atten_mask=_tensor, deq_scale1=_tensor,
    quant_scale1=_tensor, deq_scale2=_tensor, quant_scale2=_tensor, quant_offset2=_tensor,
    actual_seq_lengths=_lens, actual_seq_lengths_kv=_lens, num_heads=_int_attr,
    scale_value=st.floats(allow_nan=True) | _junk, pre_tokens=_int_attr, next_tokens=_int_attr,
    input_layout=st.sampled_from(["BSH", "BSND", "BNSD", "BNSD_BSND", "TND", "", None, 5]),
    num_key_value_heads=_int_attr, sparse_mode=_int_attr, inner_precise=_int_attr,
    out_dtype=st.sampled_from([None, FP16, BF16, INT8, FP32, "bogus", 7]),
    chip_spec=st.sampled_from([A2, A3, P310, None, types.SimpleNamespace(soc_family=3)]),
    apply_pse_shift=st.sampled_from([False, True, None]))))
def test_validate_never_raises_other_exceptions_random(kw):
    """Fully random arguments: a PfaProblem or an AclnnError, never another exception."""
    try:
        assert isinstance(validate(**kw), PfaProblem)
    except AclnnError as e:
        assert e.status in (161001, 161002, 561002)


@st.composite
def _near_valid(draw):
    """Mostly consistent calls with rare perturbations, to reach the deep (tiling) rules."""
    rare = lambda common, *odd: draw(st.sampled_from([common] * 12 + list(odd)))  # noqa: E731
    layout = draw(st.sampled_from(["BSH", "BSND", "BNSD", "BNSD_BSND"]))
    dtype = draw(st.sampled_from([FP16, FP16, BF16, INT8]))
    b, n_kv = rare(draw(st.integers(1, 4)), 0, 130), draw(st.integers(1, 4))
    g, s1, s2 = draw(st.integers(1, 3)), draw(st.integers(1, 300)), rare(draw(st.integers(1, 300)), 0)
    d = rare(draw(st.sampled_from([16, 32, 40, 64, 128])), 0, 520)
    n = n_kv * g
    if layout == "BSH":
        shapes = (b, s1, n * d), (b, s2, n_kv * d)
    elif layout == "BSND":
        shapes = (b, s1, n, d), (b, s2, n_kv, d)
    else:
        shapes = (b, n, s1, d), (b, n_kv, s2, d)
    mode = draw(st.sampled_from([0, 0, 1, 2, 3, 4, 4, 5]))
    full = draw(st.sampled_from([(s1, s2), (b, 1, s1, s2), (1, s1, s2 + 3)]))
    mask = rare((2048, 2048) if mode > 1 else full, None, (0,), (s1 - 1, s2))
    out = dtype if dtype != INT8 else FP16
    out = rare(out, INT8, BF16, None)
    quant = out == INT8 or dtype == INT8
    opt = lambda common, dt, *odd: None if common is None and not odd else (  # noqa: E731
        None if (x := rare(common, *odd)) is None else T(x, dt))
    return dict(query=T(shapes[0], dtype), key=T(shapes[1], dtype), value=T(shapes[1], dtype),
                atten_mask=None if mask is None else T(mask, rare(BOOL, INT8, UINT8)), sparse_mode=mode,
                pse_shift=opt(None, FP16, (1, n, s1, s2), (b, n, s1, s2 - 1)), apply_pse_shift=draw(st.booleans()),
                deq_scale1=opt((1,) if dtype == INT8 else None, rare(UINT64, FP32), None, (2,), (0,)),
                quant_scale1=opt((1,) if dtype == INT8 else None, FP32, None),
                deq_scale2=opt((1,) if dtype == INT8 else None, UINT64, None),
                quant_scale2=opt(((1,), (n * d,))[draw(st.integers(0, 1))] if out == INT8 else None, FP32,
                                 None, (3,)),
                quant_offset2=opt(rare(None, (1,), (n * d,)) if quant else None, FP32, (1,)),
                actual_seq_lengths=draw(st.none() | st.lists(st.integers(-1, s1 + 1), max_size=5)),
                actual_seq_lengths_kv=draw(st.none() | st.lists(st.integers(-1, s2 + 1), max_size=5)),
                num_heads=n, num_key_value_heads=rare(n_kv, 0, n_kv + 1),
                pre_tokens=draw(st.integers(-400, 400) | st.just(2147483647)),
                next_tokens=draw(st.integers(-400, 400) | st.just(2147483647)), input_layout=layout,
                inner_precise=rare(draw(st.integers(0, 3)), 4, 5), out_dtype=out, chip_spec=rare(A2, P310, A3))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_near_valid())
def test_validate_never_raises_other_exceptions_near_valid(kw):
    """Near-valid random calls: a consistent PfaProblem or an AclnnError, never another exception."""
    try:
        p = validate(**kw)
    except AclnnError as e:
        assert e.status in (161001, 161002, 561002)
        return
    assert isinstance(p, PfaProblem)
    if not (p.query_empty or p.kv_empty):
        assert p.actual_seq_lengths.shape == (p.batch,) and (p.computed_seq_lengths <= p.actual_seq_lengths).all()
        assert p.num_heads == p.group * p.num_kv_heads
