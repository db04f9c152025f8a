"""The aclnnFlashAttentionVarLenScore contract as data (STYLE §4); ``validate.py`` walks these tables.

Sources: "seed Lnn" = line nn of seeds/001_c25c18f39e768b0e.txt (authoritative); "sparse doc" =
seeds/context/sparse_mode参数说明.md; "tiling" = rules the real 910B host code enforces although the
seed is silent or looser (research/tiling.md §0/§2, read in hicann/ops-transformer
``attention/flash_attention_score/op_host/arch22/flash_attention_score_tiling_general.cpp``, class
FlashAttentionVarLenScoreTiling, and ``op_api/aclnn_flash_attention_score.cpp``).

Contents: dtypes, products (:data:`SUPPORTED_FAMILIES`), defaults, :data:`LIMITS`, sparse modes
(:data:`SPARSE_MODES`), mask/pse constants and :data:`RULES`, one :class:`Rule` per constraint.

Status codes (seed L105-107, API.md "Errors"): 161001 for a null required tensor or attribute;
161002 for dtypes (the seed's 161002 line), the checks the real aclnn layer makes before tiling
(layout, rank, head_num > 0, equal D) and rules only the seed states (its limits, the pse bans, the
cumulative-length semantics); 561002 for rules the real kernel enforces while tiling (N1 % N2,
keep_prob, batch counts, sparse-mode/token/prefix checks, mask/pse/drop-mask shapes).
"""
from __future__ import annotations

from dataclasses import dataclass

from npusim.errors import (
    ACLNN_ERR_INNER_TILING_ERROR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
)
from ops.common.acl_dtypes import BF16, BOOL, FP16, FP32, INT64, UINT8
from ops.common.errors import Rule  # noqa: F401 - the contracts' rule type
from ops.common.inputs import InputContract

OP_NAME = "aclnnFlashAttentionVarLenScore"

# --- dtypes ------------------------------------------------------------------------------------

#: aclDataType spelling of each dtype, for messages.
ACL_DTYPE_NAMES = {FP16: "FLOAT16", BF16: "BFLOAT16", FP32: "FLOAT32", BOOL: "BOOL", UINT8: "UINT8",
                   INT64: "INT64"}

DATA_DTYPES = (FP16, BF16, FP32)  # query/key/value: seed L42-46, prototype L152-154
PSE_DTYPES = DATA_DTYPES  # real_shift: seed L48 (and equal to query, L128), L155
DROP_MASK_DTYPES = (UINT8,)  # seed L50 "UINT8（标识8个1bit BOOL）", L156
PADDING_MASK_DTYPES = DATA_DTYPES  # reserved input (seed L55), dtypes from prototype L157
ATTEN_MASK_DTYPES = (BOOL, UINT8)  # seed L57, L158

# --- products ----------------------------------------------------------------------------------
FAMILY_A2 = "Ascend910B"
FAMILY_A3 = "Ascend910_93"

#: SoC family -> product term. A2 is the seed's only product (L7); A3 is accepted too because the
#: real kernel is registered for 910B and 910_93 (tiling.md §2) and the current CANN page of this
#: API marks A3 "√" (module docstring of validate.py: ambiguity).
SUPPORTED_FAMILIES = {
    FAMILY_A2: "Atlas A2 训练系列产品 (seed L7)",
    FAMILY_A3: "Atlas A3 训练系列产品 (tiling.md §2: kernel registered on 910_93)",
}
#: Families without this operator, with their product term.
UNSUPPORTED_PRODUCTS = {
    "Ascend310P": "Atlas 推理系列产品",
    "Ascend310B": "Atlas 200I/500 A2 推理产品",
    "Ascend910": "Atlas 训练系列产品",
    "Ascend310": "Atlas 200/300/500 推理产品",
}

# --- attributes ----------------------------------------------------------------------------------
LAYOUTS = ("TND",)  # seed L75-78: "支持TND"; op_api: strcmp(inputLayout, "TND")
INT32_MAX = 2147483647
#: Attribute defaults of the prototype (seed L166-173).
DEFAULTS = {"scale_value": 1.0, "keep_prob": 1.0, "pre_tokens": INT32_MAX, "next_tokens": INT32_MAX,
            "inner_precise": 0, "sparse_mode": 0}
#: seed L80-84: 0 and 1 reserved, 2 enables invalid-row computation.
INNER_PRECISE_VALUES = (0, 1, 2)
INNER_PRECISE_INVALID_ROW = 2


# --- limits --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Limit:
    """An inclusive range [lo, hi] of one dimension (seed 约束说明), checked under rule *rule*."""

    name: str
    lo: int
    hi: int
    rule: str
    source: str


K = 1024  # "2K", "1K", "1M" read as binary multiples, as CANN docs use them (validate.py docstring)
M = 1024 * 1024
# seed L135 "S：取值范围为1~1M" needs no rule of its own: a batch's S is a step of a non-decreasing
# cumulative array ending at T <= 1M, and S == 0 is allowed (L144).

LIMITS = {
    "T": Limit("T (query and key/value)", 1, M, "limit_T", "seed L132 'T(B*S)：取值范围为1~1M'"),
    "B": Limit("B (batch count)", 1, 2 * K, "limit_B", "seed L133 'B：取值范围为1~2K'"),
    "B_prefix": Limit("B with prefix", 1, K, "limit_B_prefix", "seed L133 '带prefixOptional的时候B最大支持1K'"),
    "N": Limit("N1 (query heads)", 1, 256, "limit_N", "seed L130, L134 'Nq取值范围1~256'"),
    "D": Limit("D (head dim)", 1, 512, "limit_D", "seed L136 'D：取值范围为1~512'"),
}


# --- sparse modes, masks, pse ---------------------------------------------------------------------
@dataclass(frozen=True)
class SparseModeSpec:
    """One supported sparse mode (sparse doc table). *mask_shape* None means [maxSq, maxSkv];
    *tokens*: "user_lu" (user pre/next, left-up origin), "user_rd" (right-down origin) or "ignored"."""

    mode: int
    name: str
    mask_shape: tuple | None
    tokens: str


COMPRESSED_MASK_SHAPE = (2048, 2048)  # sparse doc modes 2/3/4/7/8; tiling ATTEN_MASK_COMPRESS_LIMIT
PREFIX_MASK_SHAPE = (3072, 2048)  # sparse doc mode 6; tiling ATTEN_MASK_COMPRESS_PREFIX_LIMIT

SPARSE_MODES = {
    0: SparseModeSpec(0, "defaultMask", None, "user_lu"),
    1: SparseModeSpec(1, "allMask", None, "ignored"),
    2: SparseModeSpec(2, "leftUpCausal", COMPRESSED_MASK_SHAPE, "ignored"),
    3: SparseModeSpec(3, "rightDownCausal", COMPRESSED_MASK_SHAPE, "ignored"),
    4: SparseModeSpec(4, "band", COMPRESSED_MASK_SHAPE, "user_rd"),
    6: SparseModeSpec(6, "prefix (compressed)", PREFIX_MASK_SHAPE, "ignored"),
    7: SparseModeSpec(7, "varlen split-q rightDownCausal", COMPRESSED_MASK_SHAPE, "user_rd"),
    8: SparseModeSpec(8, "varlen split-q leftUpCausal", COMPRESSED_MASK_SHAPE, "user_rd"),
}
#: sparse doc: mode 5 "varlen场景不支持"; seed L86 lists 0,1,2,3,4,6,7,8.
UNSUPPORTED_SPARSE_MODES = {5: "prefix (non-compressed): varlen场景不支持"}

#: Mask forms (FaVarLenProblem.mask_form) by sparse mode; "none" = no atten_mask, full computation.
MASK_FORMS = {0: "full", 1: "full", 2: "causal_2048", 3: "causal_2048", 4: "causal_2048",
              6: "prefix_3072", 7: "causal_2048", 8: "causal_2048"}

#: Outer pse: "alibi_compress = ori_pse[:, :, -1024:, :]" (seed L48; tiling PSE_ALIBI_S_SIZE).
ALIBI_ROWS = 1024
#: seed L48: alibi compression only in the lower-triangular scenarios of sparse modes 0, 2, 3.
ALIBI_MODES = (0, 2, 3)
#: seed L19: scale*(pse + query*key^T): pse added before scaling (pseType 1, tiling.md §0 PSE).
PSE_ORDER = "add_then_scale"
#: drop_mask bits per byte (seed L50-52: "/8", bit-packed).
DROP_MASK_BITS_PER_BYTE = 8


# --- rules ----------------------------------------------------------------------------------------


_NULL, _INV, _TIL = ACLNN_ERR_PARAM_NULLPTR, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_INNER_TILING_ERROR

_RULE_LIST = (
    # chip, nulls, types
    Rule("product_supported", _INV, "the chip's SoC family must be Ascend910B (A2) or Ascend910_93 (A3)",
         "seed L7; tiling.md §2"),
    Rule("required_tensor", _NULL, "query, key and value are required (not None)", "seed L106"),
    Rule("required_attr", _NULL, "head_num and input_layout are required attributes (not None)",
         "seed L106, prototype L170-171"),
    Rule("required_seq_lens", _NULL, "actual_seq_qlen and actual_seq_kvlen are required for TND varlen",
         "seed L13, L61-63 (not marked 可选参数)"),
    Rule("tensor_type", _INV, "must be a tensor: a numpy array or an object with .shape (ints >= 0) and .dtype",
         "API.md Operators"),
    Rule("qkv_dtype", _INV, "query/key/value dtype must be FLOAT16, BFLOAT16 or FLOAT32", "seed L42-46, L107"),
    Rule("qkv_same_dtype", _INV, "query, key and value must have the same dtype", "seed L42-46, L128"),
    Rule("pse_dtype", _INV, "real_shift dtype must be FLOAT16, BFLOAT16 or FLOAT32 and equal to query's",
         "seed L48, L107, L128"),
    Rule("drop_mask_dtype", _INV, "drop_mask dtype must be UINT8", "seed L50, L107"),
    Rule("padding_mask_dtype", _INV, "padding_mask dtype must be FLOAT16, BFLOAT16 or FLOAT32",
         "seed L107, prototype L157"),
    Rule("atten_mask_dtype", _INV, "atten_mask dtype must be BOOL or UINT8", "seed L57, L107"),
    Rule("input_layout", _INV, "input_layout must be the string 'TND'", "seed L75-78; op_api strcmp 'TND'"),
    Rule("head_num_positive", _INV, "head_num must be an int > 0", "seed L73; op_api 'headNum must be > 0'"),
    Rule("qkv_rank", _INV, "query, key and value must be 3-D (T, N, D)", "seed L78; op_api dim num vs layout"),
    Rule("head_dim_equal", _INV, "query, key and value must have the same D", "seed L126"),
    Rule("kv_same_shape", _INV, "key and value must have the same shape", "seed L129"),
    Rule("seq_lens_type", _INV, "actual_seq_qlen/actual_seq_kvlen must be 1-D int64 sequences", "seed L61-63"),
    Rule("prefix_type", _INV, "prefix must be a 1-D int64 sequence", "seed L59"),
    Rule("scalar_type", _INV, "scale_value/keep_prob must be real numbers; pre_tokens, next_tokens, "
         "inner_precise, sparse_mode ints in int64 range", "seed L65-86"),
    Rule("inner_precise_value", _INV, "inner_precise must be 0, 1 or 2", "seed L80-82"),
    # seed limits
    Rule("limit_T", _INV, "T1 and T2 must lie in [1, 1M]", LIMITS["T"].source),
    Rule("limit_B", _INV, "the batch count must lie in [1, 2K]", LIMITS["B"].source),
    Rule("limit_B_prefix", _INV, "with prefix the batch count must be <= 1K", LIMITS["B_prefix"].source),
    Rule("limit_N", _INV, "N1 (head_num) must lie in [1, 256]", LIMITS["N"].source),
    Rule("limit_D", _INV, "D must lie in [1, 512]", LIMITS["D"].source),
    # sequence lengths
    Rule("seq_lens_same_batch", _TIL, "actual_seq_qlen and actual_seq_kvlen must have the same length (B)",
         "seed L125; tiling 'VarLen scene, q is not equal kv'"),
    Rule("seq_lens_cumulative", _INV, "actual_seq_* are cumulative lengths: >= 0 and non-decreasing",
         "seed L13, L144 ('[2,2,0,2,2] -> [2,4,4,6,8]')"),
    Rule("t_covers_seq_lens", _TIL, "T1/T2 must be >= the last actual_seq_qlen/actual_seq_kvlen",
         "tiling 't1Size and t2Size need larger than sum of seqLen'"),
    Rule("seq_lens_end_at_t", _INV, "the last actual_seq_qlen/actual_seq_kvlen must equal T1/T2",
         "seed L13 (T = total number), L78"),
    Rule("kv_len_nonzero", _INV, "a batch with Sq > 0 needs Skv > 0", "seed L144 '不支持...Sq不为0，但是Skv为0'"),
    # heads, scalars
    Rule("query_heads_match_head_num", _TIL, "query dim 1 must equal head_num", "seed L73; tiling 'query dim1'"),
    Rule("n1_multiple_of_n2", _TIL, "key/value heads N2 must be >= 1 and divide N1", "seed L130; tiling n1 % n2"),
    Rule("keep_prob_range", _TIL, "keep_prob (as float32) must lie in (0, 1]", "seed L138; tiling AnalyzeAttrs"),
    # sparse modes and masks
    Rule("sparse_mode_supported", _TIL, "sparse_mode must be one of 0, 1, 2, 3, 4, 6, 7, 8",
         "seed L86; sparse doc (5 varlen场景不支持); tiling 'Var len not support sparse mode'"),
    Rule("atten_mask_shape", _TIL, "atten_mask must be 2-D: [maxSq, maxSkv] for sparse 0/1, [2048, 2048] for "
         "2/3/4/7/8, [3072, 2048] for 6", "seed L57; sparse doc; tiling AnalyzeOptionalInput"),
    Rule("atten_mask_no_full_row", _INV, "atten_mask (sparse 0/1) may not mask a whole row of a batch",
         "seed L143 '不能存在某一行全1'"),
    Rule("mode0_tokens", _TIL, "sparse 0 with a mask: next_tokens >= 0, Skv + pre_tokens >= Sq for every "
         "batch, and next_tokens >= -pre_tokens when pre_tokens < 0", "seed L140; tiling SparseNoMaskModeCheck"),
    Rule("mode3_sq_le_skv", _TIL, "sparse 3: every batch needs Sq <= Skv", "tiling RIGHT_DOWN_CAUSAL check"),
    Rule("mode4_tokens", _TIL, "sparse 4: pre_tokens >= 0, pre_tokens + next_tokens >= 0 when next_tokens < 0, "
         "and Sq - next_tokens <= Skv for every non-empty batch", "seed L140; tiling BAND check"),
    Rule("mode6_prefix", _TIL, "sparse 6: prefix of length B with prefix[b] in [0, Skv] if Sq > Skv, "
         "else in [Skv - Sq, Skv]", "seed L139; tiling VarLenGetPrefixNList"),
    Rule("mode7_tokens", _TIL, "sparse 7: pre_tokens >= last Skv, next_tokens <= 0, Sq <= Skv for every "
         "non-empty batch and last Sq - next_tokens <= last Skv", "sparse doc mode 7; tiling"),
    Rule("mode8_tokens", _TIL, "sparse 8: pre_tokens >= first Skv and first Sq - next_tokens <= first Skv",
         "sparse doc mode 8; tiling"),
    # pse
    Rule("pse_shape", _TIL, "real_shift must be [N1*sum(Sq*Skv)] (full) or [B or 1, N1, 1024, maxSkv] "
         "(alibi-compressed)", "seed L48; tiling AnalyzeOptionalInput (TND)"),
    Rule("pse_no_empty_batch", _INV, "real_shift is not supported when a batch has Sq == 0", "seed L144"),
    Rule("pse_not_mode7", _INV, "real_shift is not supported with sparse 7", "seed L145"),
    Rule("pse_mode8_equal_lens", _INV, "real_shift with sparse 8 needs Sq == Skv in every batch", "seed L146"),
    Rule("pse_alibi_causal", _TIL, "alibi-compressed real_shift needs Sq == Skv in every batch and a "
         "lower-triangular mask (sparse 2, 3, or 0 with pre_tokens >= maxSq and next_tokens == 0)",
         "seed L48; tiling SetPseAlibiParams"),
    # dropout
    Rule("drop_mask_size", _TIL, "drop_mask must hold at least ceil(N1*sum(Sq*Skv)/8) bytes",
         "seed L50-52; tiling 'dropMask should not be less than'"),
)

#: Every rule by name.
RULES = {r.name: r for r in _RULE_LIST}


def rule(name: str) -> Rule:
    """The rule called *name* (KeyError for a typo: a bug, never user input)."""
    return RULES[name]


def allowed_dtypes() -> dict:
    """Allowed dtypes per tensor argument (seed L42-57, prototype L152-161)."""
    return {"query": DATA_DTYPES, "key": DATA_DTYPES, "value": DATA_DTYPES, "real_shift": PSE_DTYPES,
            "drop_mask": DROP_MASK_DTYPES, "padding_mask": PADDING_MASK_DTYPES, "atten_mask": ATTEN_MASK_DTYPES}


#: The call's tensors for the shared input normalisation (ops/common/inputs.py). The seed states no
#: contiguity rule, so non-contiguous inputs are accepted (the host copies them contiguous).
INPUTS = InputContract(
    data=("query", "key", "value", "real_shift", "drop_mask", "padding_mask", "atten_mask"),
    int_arrays=("prefix", "actual_seq_qlen", "actual_seq_kvlen"))
