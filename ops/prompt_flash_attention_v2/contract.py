"""The aclnnPromptFlashAttentionV2 contract as data (STYLE §4); ``validate.py`` walks these tables.

Sources, cited per entry:
- "seed" = seeds/000_65e2a14407c8df3c.txt (authoritative): parameter lists, 约束说明, 算子原型;
- "aclnn" = the first stage, ``op_host/op_api/aclnn_prompt_flash_attention_inner.cpp``
  (CheckNotNull, CheckTensorDataType, CheckDimsAndLayout, AnalysisAxis/AnalysisInputShapeInfo);
- "tiling" = ``op_host/prompt_flash_attention_tiling.cpp`` (RunBigKernelTilingWithParams and the Check*
  functions it calls; research/tiling.md §0/§1), "def" = ``op_host/prompt_flash_attention_def.cpp``
  (OpDef); all in hicann/ops-transformer and its mirrors (yuanfang-chen/ops-transformer).

Status policy (aclnn返回码.md; API.md "Errors"):
- 161001 ACLNN_ERR_PARAM_NULLPTR: a required tensor or attribute is None (seed 返回值: "必选输入，
  输出或者必选属性，且是空指针").
- 161002 ACLNN_ERR_PARAM_INVALID: every dtype rule (the seed's 161002 line names the dtypes/formats of
  query, key, value, pseShift, attenMask, attentionOut; the other tensors' seed dtype lists are
  treated alike), the per-product "仅支持nullptr/默认值" restrictions of the seed's parameter list,
  and what the aclnn first stage checks (layout string, ranks, num_heads > 0, D = H/N, D <= 512),
  plus Python-level type errors.
- 561002 ACLNN_ERR_INNER_TILING_ERROR: the remaining rules of the seed's 约束说明 and parameter limits;
  the real operator enforces them in host tiling.

Choices where seed and code differ (the seed wins, see each rule's text): S <= 20M and N*D < 65535
are hard errors (the tiling only warns); the 310P mask rule uses 128-alignment (tiling: 16) and
310P pre/next accept only the defaults (tiling: pre >= S1, next 0 or >= S2); attenMask FLOAT16 is
refused (the aclnn layer would accept it). pse_shift: the seed says V2 forces it to nullptr, so it
is dtype-checked and ignored unless validate's ``apply_pse_shift=True`` (the op prototype/V3
behaviour). inner_precise is not a V2 aclnn argument (V2 passes 1); it is accepted as the op
prototype's attribute (default 1).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Mapping

import numpy as np

from npusim.errors import (
    ACLNN_ERR_INNER_TILING_ERROR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
)
from ops.common.acl_dtypes import BF16, BOOL, FP16, FP32, INT8, INT64, UINT8, UINT64
from ops.common.errors import Rule  # noqa: F401 - the contracts' rule type
from ops.common.inputs import InputContract
from ops.common.layouts import PFA_LAYOUTS

OP_NAME = "aclnnPromptFlashAttentionV2"
NULLPTR, INVALID, TILING = ACLNN_ERR_PARAM_NULLPTR, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_INNER_TILING_ERROR

# --- dtypes ------------------------------------------------------------------------------------
#: aclDataType spelling for messages.
ACL_DTYPE_NAMES = {FP16: "FLOAT16", BF16: "BFLOAT16", FP32: "FLOAT", INT8: "INT8", UINT8: "UINT8",
                   BOOL: "BOOL", UINT64: "UINT64", INT64: "INT64"}


class QuantPath(StrEnum):
    """Which int8 pipeline a call takes (seed 约束说明 "int8量化相关入参数量与输入、输出数据格式的综合限制")."""

    NONE = "none"
    INT8_IN_FP16_OUT = "int8_in_fp16_out"
    INT8_IN_INT8_OUT = "int8_in_int8_out"
    FP_IN_INT8_OUT = "fp_in_int8_out"


class MaskKind(StrEnum):
    """none; full [S1,S2]-like mask (modes 0/1); compressed 2048x2048 causal mask (modes 2/3/4)."""

    NONE = "none"
    FULL = "full"
    COMPRESSED = "compressed"


class ScaleMode(StrEnum):
    """Quantisation parameter granularity (seed: per-tensor / per-channel)."""

    PER_TENSOR = "per_tensor"
    PER_CHANNEL = "per_channel"


# --- rules ---------------------------------------------------------------------------------------


_RULE_LIST = (
    # 161001
    Rule("query_required", NULLPTR, "query must not be None", "seed 返回值 161001; aclnn CheckNotNull"),
    Rule("key_required", NULLPTR, "key must not be None", "seed 返回值 161001; aclnn CheckNotNull"),
    Rule("value_required", NULLPTR, "value must not be None", "seed 返回值 161001; aclnn CheckNotNull"),
    Rule("input_layout_required", NULLPTR, "input_layout must not be None",
         "seed 返回值 161001; aclnn CheckNotNull (inputLayout)"),
    Rule("num_heads_required", NULLPTR, "num_heads must not be None",
         "seed 返回值 161001 (必选属性); seed 算子原型 REQUIRED_ATTR(num_heads)"),
    # 161002
    Rule("chip_supported", INVALID, "the chip family must be one the seed supports",
         "seed 支持的产品型号; def AddConfig(ascend910b, ascend910_93, ascend310p)"),
    Rule("tensor_type", INVALID, "tensors must be numpy arrays or objects with .shape and .dtype",
         "seed 参数说明 (aclTensor*)"),
    Rule("attr_type", INVALID, "attributes must have the seed's C types (int64_t, double, char*, dtype)",
         "seed aclnnPromptFlashAttentionV2GetWorkspaceSize prototype"),
    Rule("qkv_dtype", INVALID, "query/key/value dtype must be in the product's list",
         "seed query/key/value: A2 FLOAT16/BFLOAT16/INT8, 310P FLOAT16; seed 返回值 161002"),
    Rule("qkv_dtype_equal", INVALID, "query, key and value must share one dtype",
         "seed query: '保持与key、value的数据类型一致'; aclnn CheckTensorDataType"),
    Rule("out_dtype", INVALID, "(query dtype, out_dtype) must be a supported combination",
         "seed attentionOut list and int8 combinations; aclnn CheckTensorDataType (q != out only when quantising)"),
    Rule("pse_dtype", INVALID, "pse_shift dtype must match query (fp16->fp16, bf16->bf16, int8->fp16)",
         "seed pseShift: FLOAT16/BFLOAT16, 数据类型推导规则; aclnn qkvAndPseTypeRangeMap"),
    Rule("mask_dtype", INVALID, "atten_mask dtype must be in the product's list",
         "seed attenMask: A2 BOOL/INT8/UINT8, 310P BOOL; seed 返回值 161002"),
    Rule("deq_scale_dtype", INVALID, "deq_scale1/deq_scale2 must be UINT64 or FLOAT32",
         "seed deqScale1/deqScale2: 'UINT64、FLOAT32'"),
    Rule("quant_scale1_dtype", INVALID, "quant_scale1 must be FLOAT32", "seed quantScale1: 'FLOAT32'"),
    Rule("quant_scale2_dtype", INVALID,
         "quant_scale2 must be FLOAT32, or BFLOAT16 when the input is BFLOAT16",
         "seed 约束说明: '当输入为BFLOAT16时，同时支持 FLOAT32和BFLOAT16，否则仅支持 FLOAT32'"),
    Rule("quant_offset2_dtype", INVALID, "quant_offset2 must have quant_scale2's dtype",
         "seed 约束说明: '若传入 quantOffset2 ，需保证其类型和shape信息与 quantScale2 一致'"),
    Rule("product_null_only", INVALID, "this parameter must be None on this product",
         "seed 参数说明, Atlas 推理系列加速卡产品: '仅支持nullptr'"),
    Rule("product_default_only", INVALID, "this attribute must keep its default on this product",
         "seed 参数说明, Atlas 推理系列加速卡产品: '仅支持默认值'"),
    Rule("layout", INVALID, "input_layout must be BSH, BSND, BNSD or BNSD_BSND",
         "seed inputLayout '当前支持BSH、BSND、BNSD、BNSD_BSND'; aclnn AnalysisAxis"),
    Rule("layout_rank", INVALID, "query, key, value must have the layout's rank (BSH 3, others 4)",
         "aclnn CheckDimsAndLayout; tiling CheckDimNums"),
    Rule("num_heads_positive", INVALID, "num_heads must be > 0",
         "aclnn AnalysisInputShapeInfo 'head_num must > 0'"),
    Rule("head_dim_split", INVALID, "BSH: H must be a positive multiple of num_heads (D = H/N)",
         "seed inputLayout 'D=H/N'; aclnn AnalysisAxis 'headsize D = H/N ... is invalid'"),
    Rule("head_dim_max", INVALID, "D must be <= 512", "seed 约束说明 '支持D轴小于等于512'; aclnn AnalysisAxis"),
    Rule("actual_seq_lengths_type", INVALID, "actual sequence lengths must be a sequence of int64 or None",
         "seed actualSeqLengths/actualSeqLengthsKv (aclIntArray, INT64)"),
    # 561002
    Rule("inner_precise", TILING, "inner_precise must be 0..3 (A2/A3) or 0..4 (310P; 4 = approximate)",
         "seed 算子原型 ATTR(inner_precise); tiling 'precision mode should be 0 or 1 or 4', "
         "'not support APPROXIMATE_COMPUTATION when curShortSocName is Atlas A2'"),
    Rule("head_dim_equal", TILING, "query, key and value must have the same D (BSH: key H = N_kv*D)",
         "tiling CheckD 'queryD keyD valueD must be equal'"),
    Rule("kv_shape_equal", TILING, "key and value must have the same shape",
         "tiling CheckKeyValueParamsConsistency 'key value consistency check failed'"),
    Rule("empty_kv_int8", TILING, "with empty key/value (S2 = 0) the inputs must not be INT8",
         "tiling 'when input or output is empty tensor, input datatype should not be int8'"),
    Rule("quant_required", TILING, "this quantisation parameter is required for the dtype combination",
         "seed 约束说明 int8 combinations; tiling 'dequant scale or first quant scale is nullptr when input "
         "type is int8', 'post quant scale is nullptr when output type is int8'"),
    Rule("quant_forbidden", TILING, "this quantisation parameter must be None for the dtype combination",
         "seed 约束说明 '若存在入参...（即不为nullptr），则报错并返回'; tiling '...should be null'"),
    Rule("quant_not_empty", TILING, "a required quantisation parameter must not be an empty tensor",
         "tiling 'dequant scale or first quant scale is empty tensor', 'quant_scale2 is empty tensor'"),
    Rule("per_tensor_scale", TILING, "deq_scale1, quant_scale1, deq_scale2 are per-tensor (1 element)",
         "seed deqScale1/quantScale1/deqScale2 '支持per-tensor'"),
    Rule("quant_scale2_shape", TILING, "quant_scale2 must hold 1 (per-tensor) or N*D (per-channel) elements",
         "seed 约束说明 'BSH时...乘积等于H；其他layout要求乘积等于N*D'; tiling 'only support 1 and H'"),
    Rule("quant_offset2_shape", TILING, "quant_offset2 must have quant_scale2's shape",
         "seed 约束说明 '类型和shape信息与 quantScale2 一致'; tiling size check"),
    Rule("quant_per_channel_d_align", TILING, "per-channel quant_scale2/offset2 need D % 32 == 0",
         "seed 约束说明 '暂不支持...D非32Byte对齐'; tiling 'post quant per-channel do not support D non-32-byte'"),
    Rule("num_kv_heads_nonnegative", TILING, "num_key_value_heads must be >= 0",
         "tiling SetTilingHeadNumRatio 'numHeads or numKeyValueHeads is negative'"),
    Rule("num_heads_max", TILING, "num_heads must be <= 256",
         "seed 约束说明 '支持N轴小于等于256'; tiling 'heads num should not be more than 256'"),
    Rule("num_heads_match", TILING, "query's N axis must equal num_heads (BSND/BNSD/BNSD_BSND)",
         "tiling CheckInputDimAndHeadNum 'numHeads in query shape must be equal to numHeads in attr'"),
    Rule("num_kv_heads_match", TILING, "key/value N axis must equal num_key_value_heads (or num_heads if 0)",
         "seed numKeyValueHeads '需要与shape中的key/value的N轴shape值相同，否则报错'; tiling"),
    Rule("gqa_divisible", TILING, "num_heads must be a multiple of num_key_value_heads",
         "seed numKeyValueHeads '需要满足numHeads整除numKeyValueHeads'; tiling"),
    Rule("gqa_group_max", TILING, "num_heads / num_key_value_heads must be <= 64",
         "seed numKeyValueHeads '比值不能大于64'; tiling"),
    Rule("batch_equal", TILING, "query and key/value batch must be equal",
         "tiling 'query batch must be equal to key/value batch'"),
    Rule("batch_max", TILING, "B must be <= 65536 (A2/A3) or <= 128 (310P)",
         "seed 约束说明 'B轴小于等于65536' / 310P '支持B轴小于等于128'; tiling BLIMIT"),
    Rule("batch_max_unaligned_d", TILING,
         "B must be <= 128 when D is not 32-aligned (INT8 input) or 16-aligned (FLOAT16/BFLOAT16)",
         "seed 约束说明 '...D轴非16对齐时，B轴仅支持到128'; tiling CVSAME batchLimit"),
    Rule("seq_max", TILING, "S1 and S2 must be <= 20971520 (A2/A3) or <= 65535 (310P)",
         "seed 约束说明 'S支持小于等于20971520' / 310P 'S轴小于等于65535' (the A2 tiling only warns)"),
    Rule("hidden_max", TILING, "BSH/BSND: N*D must be < 65535",
         "seed 约束说明 'inputLayout为BSH或者BSND时，要求N*D小于65535' (the tiling only warns)"),
    Rule("actual_seq_lengths_len", TILING, "actual_seq_lengths must have length 1 or >= B",
         "seed actualSeqLengths '其他长度的传入将不被支持'; tiling CheckActualSeqLength"),
    Rule("actual_seq_lengths_range", TILING, "each actual_seq_lengths entry must lie in [0, S1]",
         "seed actualSeqLengths '不应超过query中对应batch的序列长度'; tiling 'must be in range[0, %u]'"),
    Rule("actual_seq_lengths_kv_len", TILING, "actual_seq_lengths_kv must have length 1 or >= B",
         "seed actualSeqLengthsKv; tiling CheckActualSeqLength"),
    Rule("actual_seq_lengths_kv_range", TILING, "each actual_seq_lengths_kv entry must lie in [0, S2]",
         "seed actualSeqLengthsKv '不应超过key/value中对应batch的序列长度'; tiling"),
    Rule("sparse_mode", TILING, "sparse_mode must be 0, 1, 2, 3 or 4 (310P: 0)",
         "seed 约束说明 '参数sparseMode当前仅支持值为0、1、2、3、4的场景，取其它值时会报错'; tiling 'out of range'"),
    Rule("mask_required", TILING, "sparse_mode 1, 2, 3, 4 need atten_mask",
         "seed sparseMode 1 '必须传入', 2/3/4 '不传入attenMask...则报错'; tiling 'attenMask should not be null'"),
    Rule("mask_rank", TILING, "atten_mask must be 2-D, 3-D or 4-D", "tiling 'attenMask dim(%u) must be 2 or 3 or 4'"),
    Rule("mask_shape_full", TILING,
         "sparse_mode 0/1: atten_mask [>=S1, >=S2], [1|B, >=S1, >=S2] or [1|B, 1, >=S1, >=S2]",
         "seed attenMask shapes 'Q_S,KV_S; B,Q_S,KV_S; 1,Q_S,KV_S; B,1,Q_S,KV_S; 1,1,Q_S,KV_S'; "
         "tiling CheckAttenMaskShape"),
    Rule("mask_shape_compressed", TILING,
         "sparse_mode 2/3/4: atten_mask (2048, 2048), (1, 2048, 2048) or (1, 1, 2048, 2048)",
         "seed 约束说明 'attenMask的shape需要为S,S或1,S,S或1,1,S,S,其中S的值需要固定为2048'; tiling"),
    Rule("mask_seq_aligned", TILING, "310P: atten_mask needs S1 == S2, both multiples of 128",
         "seed 310P 'Q_S或KV_S非128对齐，Q_S和KV_S不等长的场景不支持配置atten_mask'"),
    Rule("pse_shape", TILING, "pse_shift must be [1|B, N, >=S1, >=S2]",
         "tiling CheckPseShiftTypeAndShape 'pse shift shape must be [1 or %u, %u, >=%u, >=%u]'"),
    Rule("tokens_not_both_negative", TILING, "pre_tokens and next_tokens must not both be negative",
         "tiling 'preTokens and nextTokens must not be negative number in band mode' / 'cannot neither be negative'"),
    Rule("tokens_order", TILING, "-next_tokens must be <= pre_tokens",
         "tiling 'nexttoken line should be higher than pretoken line'; sparse_mode参数说明 "
         "'preTokens取值必须大于等于nextTokens的绝对值'"),
    Rule("mode0_next_bound", TILING, "sparse_mode 0: a negative next_tokens needs |next| < S1 (per batch)",
         "tiling 'nextTokens absolute value should be smaller than length of q'"),
    Rule("mode0_pre_bound", TILING, "sparse_mode 0: a negative pre_tokens needs |pre| < S2 (per batch)",
         "tiling 'preToken absolute value should be smaller than length of k and v'; sparse_mode参数说明"),
    Rule("band_next_bound", TILING, "sparse_mode 4: a negative next_tokens needs |next| < S2 per batch",
         "tiling 'nextTokens absolute value should be smaller than actual length of k and v in band mode'"),
    Rule("band_pre_bound", TILING, "sparse_mode 4: a negative pre_tokens needs |pre| < S1 per batch",
         "tiling 'preTokens absolute value should be smaller than actual length of q in band mode'"),
    Rule("int8_out_band_negative", TILING, "INT8 output: sparse_mode 4 needs pre_tokens >= 0 and next_tokens >= 0",
         "seed 约束说明 '输出为int8时，暂不支持sparse为band且preTokens/nextTokens为负数'; tiling"),
    Rule("int8_out_offset_rows", TILING,
         "INT8 output with quant_offset2: no row may be left uncomputed by sparse_mode/pre/next",
         "seed 约束说明 '输出为INT8，入参quantOffset2传入非空指针和非空tensor值...该场景会拦截'; tiling checkQuantValue"),
)
RULES: Mapping[str, Rule] = MappingProxyType({r.name: r for r in _RULE_LIST})

# --- products ------------------------------------------------------------------------------------
FAMILY_A2, FAMILY_A3, FAMILY_310P = "Ascend910B", "Ascend910_93", "Ascend310P"


@dataclass(frozen=True)
class IoCombo:
    """One supported (query/key/value dtype, attentionOut dtype) pair and its quantisation path."""

    qkv: np.dtype
    out: np.dtype
    quant: QuantPath


@dataclass(frozen=True)
class Limits:
    """Size limits of one product (every value: seed 约束说明, rule texts in :data:`RULES`)."""

    max_batch: int
    max_batch_unaligned_d: int | None  # None: rule not stated for the product
    max_heads: int
    max_seq: int
    max_head_dim: int
    max_hidden_exclusive: int | None  # BSH/BSND N*D bound
    max_group: int


@dataclass(frozen=True)
class ProductSpec:
    """What one SoC family supports (seed 参数说明 per product)."""

    family: str
    product: str  # the seed's product term
    layouts: tuple  # seed inputLayout (no per-product restriction in the seed)
    io_combos: tuple
    pse_dtypes: Mapping  # qkv dtype -> pse_shift dtype; empty: pse_shift must be None
    mask_dtypes: tuple
    deq_scale_dtypes: tuple
    quant_scale1_dtypes: tuple
    quant_scale2_dtypes: Mapping  # qkv dtype -> allowed quant_scale2/offset2 dtypes
    null_only: tuple  # parameters that must be None
    default_only: Mapping  # attribute -> allowed values
    sparse_modes: tuple
    inner_precise_values: tuple
    limits: Limits
    mask_seq_align: int | None  # 310P: atten_mask needs S1 == S2, multiples of this


_A2_COMBOS = (
    IoCombo(FP16, FP16, QuantPath.NONE), IoCombo(BF16, BF16, QuantPath.NONE),
    IoCombo(INT8, FP16, QuantPath.INT8_IN_FP16_OUT), IoCombo(INT8, INT8, QuantPath.INT8_IN_INT8_OUT),
    IoCombo(FP16, INT8, QuantPath.FP_IN_INT8_OUT), IoCombo(BF16, INT8, QuantPath.FP_IN_INT8_OUT),
)
#: The A2/A3 limits, seed 约束说明 (Atlas A2 paragraph) unless noted.
_A2_LIMITS = Limits(
    max_batch=65536,  # "支持B轴小于等于65536(64k)"; tiling BLIMIT = 65536
    max_batch_unaligned_d=128,  # "...D轴非32对齐...D轴非16对齐时，B轴仅支持到128"; tiling CVSAME batchLimit
    max_heads=256,  # "支持N轴小于等于256"; tiling NLIMIT = 256
    max_seq=20971520,  # "S支持小于等于20971520（20M）"; tiling SLIMIT (warning only)
    max_head_dim=512,  # "支持D轴小于等于512"; tiling DLIMIT, aclnn AnalysisAxis
    max_hidden_exclusive=65535,  # "inputLayout为BSH或者BSND时，要求N*D小于65535"
    max_group=64)  # seed numKeyValueHeads "比值不能大于64"; tiling SetTilingHeadNumRatio
#: The 310P limits, seed 约束说明 (Atlas 推理系列加速卡产品 paragraph) unless noted.
_310P_LIMITS = Limits(
    max_batch=128,  # "支持B轴小于等于128" (the tiling allows 300 for BSH)
    max_batch_unaligned_d=None,  # not stated for 310P
    max_heads=256,  # "支持N轴小于等于256"
    max_seq=65535,  # "支持S轴小于等于65535(64k)" (the tiling refuses > 65536)
    max_head_dim=512,  # "支持D轴小于等于512"
    max_hidden_exclusive=None,  # not stated for 310P
    max_group=64)  # seed numKeyValueHeads (310P only allows the default 0, i.e. G = 1)
_A2_PRODUCT = "Atlas A2 训练系列产品/Atlas 800I A2 推理产品/A200I A2 Box 异构组件"


def _a2_like(family: str, product: str) -> ProductSpec:
    return ProductSpec(
        family=family, product=product, layouts=PFA_LAYOUTS, io_combos=_A2_COMBOS,
        pse_dtypes=MappingProxyType({FP16: FP16, BF16: BF16, INT8: FP16}),
        mask_dtypes=(BOOL, INT8, UINT8), deq_scale_dtypes=(UINT64, FP32), quant_scale1_dtypes=(FP32,),
        quant_scale2_dtypes=MappingProxyType({FP16: (FP32,), BF16: (FP32, BF16), INT8: (FP32,)}),
        null_only=(), default_only=MappingProxyType({}), sparse_modes=(0, 1, 2, 3, 4),
        inner_precise_values=(0, 1, 2, 3), limits=_A2_LIMITS, mask_seq_align=None)


PRODUCTS: Mapping[str, ProductSpec] = MappingProxyType({
    FAMILY_A2: _a2_like(FAMILY_A2, _A2_PRODUCT),
    # A3 is not in the seed's product list; def registers ascend910_93 with the 910B config.
    FAMILY_A3: _a2_like(FAMILY_A3, "Atlas A3 (def: AddConfig(\"ascend910_93\") = ascend910b config)"),
    FAMILY_310P: ProductSpec(
        family=FAMILY_310P, product="Atlas 推理系列加速卡产品", layouts=PFA_LAYOUTS,
        io_combos=(IoCombo(FP16, FP16, QuantPath.NONE),),
        pse_dtypes=MappingProxyType({}), mask_dtypes=(BOOL,), deq_scale_dtypes=(), quant_scale1_dtypes=(),
        quant_scale2_dtypes=MappingProxyType({}),
        null_only=("pse_shift", "actual_seq_lengths", "actual_seq_lengths_kv", "deq_scale1", "quant_scale1",
                   "deq_scale2", "quant_scale2", "quant_offset2"),
        # pre_tokens: the aclnn text says 2147483647, the op prototype 214748647: both are "the default".
        default_only=MappingProxyType({"pre_tokens": (2147483647, 214748647), "next_tokens": (0, 2147483647),
                                       "num_key_value_heads": (0,), "sparse_mode": (0,)}),
        sparse_modes=(0,), inner_precise_values=(0, 1, 2, 3, 4), limits=_310P_LIMITS, mask_seq_align=128),
})

# --- quantisation ----------------------------------------------------------------------------------
QUANT_PARAMS = ("deq_scale1", "quant_scale1", "deq_scale2", "quant_scale2", "quant_offset2")


@dataclass(frozen=True)
class QuantRule:
    """Which quantisation parameters a path requires, allows, forbids; the rest are ignored."""

    required: tuple
    optional: tuple = ()
    forbidden: tuple = ()

    @property
    def ignored(self) -> tuple:
        """Parameters the path never reads (accepted and reported, as the real tiling does)."""
        used = set(self.required) | set(self.optional) | set(self.forbidden)
        return tuple(p for p in QUANT_PARAMS if p not in used)


#: seed 约束说明 "int8量化相关入参数量与输入、输出数据格式的综合限制".
QUANT_RULES: Mapping[QuantPath, QuantRule] = MappingProxyType({
    QuantPath.NONE: QuantRule(required=()),
    QuantPath.INT8_IN_FP16_OUT: QuantRule(required=("deq_scale1", "quant_scale1", "deq_scale2"),
                                          forbidden=("quant_scale2", "quant_offset2")),
    QuantPath.INT8_IN_INT8_OUT: QuantRule(required=("deq_scale1", "quant_scale1", "deq_scale2", "quant_scale2"),
                                          optional=("quant_offset2",)),
    QuantPath.FP_IN_INT8_OUT: QuantRule(required=("quant_scale2",), optional=("quant_offset2",),
                                        forbidden=("deq_scale1", "quant_scale1", "deq_scale2")),
})
#: seed deqScale1/quantScale1/deqScale2: "支持per-tensor" only.
PER_TENSOR_ONLY = ("deq_scale1", "quant_scale1", "deq_scale2")
#: seed 约束说明: per-channel quant_scale2/offset2 need "D 32Byte对齐" (INT8 output: 32 elements).
PER_CHANNEL_D_ALIGN = 32

# --- masks, layouts, defaults --------------------------------------------------------------------
#: Modes that need atten_mask (seed sparseMode 1-4).
MASK_REQUIRED_MODES = (1, 2, 3, 4)
#: Modes whose mask is the full [S1, S2] matrix (seed sparseMode 0/1).
FULL_MASK_MODES = (0, 1)
#: Shapes of the compressed mask (seed 约束说明 "S,S或1,S,S或1,1,S,S ... S ... 2048").
COMPRESSED_MASK_SHAPES = ((2048, 2048), (1, 2048, 2048), (1, 1, 2048, 2048))
#: D alignment (elements) below which B <= 128 (seed: INT8 input 32, FLOAT16/BFLOAT16 16).
UNALIGNED_D_ELEMS = MappingProxyType({INT8: 32, FP16: 16, BF16: 16})
#: D padding the aclnn layer applies before tiling (aclnn AnalysisInputShapeInfo: 16, or 32 when any
#: of query/key/value/out is INT8); the kernel sees the padded D.
PAD_D_ELEMS, PAD_D_ELEMS_INT8 = 16, 32
#: Layouts with the N*D bound (seed 约束说明).
HIDDEN_BOUND_LAYOUTS = ("BSH", "BSND")

#: Attribute defaults (seed aclnn 参数说明 "用户不特意指定时可传入默认值"; inner_precise: 算子原型).
DEFAULTS = MappingProxyType({
    "scale_value": 1.0, "pre_tokens": 2147483647, "next_tokens": 0, "input_layout": "BSH",
    "num_key_value_heads": 0, "sparse_mode": 0, "inner_precise": 1,
})
#: int64_t range of the integer attributes (seed prototype).
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def product_of(soc_family: str) -> ProductSpec | None:
    """The seed's support entry of a ChipSpec.soc_family, or None if the seed does not list it."""
    return PRODUCTS.get(soc_family)


def io_combo(product: ProductSpec, qkv: np.dtype, out: np.dtype) -> IoCombo | None:
    """The supported (qkv, out) combination, or None."""
    for c in product.io_combos:
        if c.qkv == qkv and c.out == out:
            return c
    return None



#: The call's tensors for the shared input normalisation (ops/common/inputs.py). Seed 参数说明: query, key,
#: value, pseShift and attenMask 不支持非连续的Tensor.
INPUTS = InputContract(
    data=("query", "key", "value", "pse_shift", "atten_mask", "deq_scale1", "quant_scale1", "deq_scale2",
          "quant_scale2", "quant_offset2"),
    int_arrays=("actual_seq_lengths", "actual_seq_lengths_kv"),
    contiguous=("query", "key", "value", "pse_shift", "atten_mask"),
    contiguous_rule="the seed says 不支持非连续的Tensor (non-contiguous tensors are not supported)")
