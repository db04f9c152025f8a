"""The aclnnFlashAttentionUnpaddingScoreGradV5 contract as data (STYLE §4); ``validate.py`` walks it.

Sources: "seed Lnn" = line nn of seeds/002_4490468ed3bc9a33.txt (authoritative); "sparse doc" =
seeds/context/sparse_mode参数说明.md; "tiling" = rules the real 910B host code enforces where the
seed is silent (research/tiling.md §0 and §3: FlashAttentionScoreGrad tiling, "softmaxMax shape
invalid", "FAG sparseMode invalid", "keepProb<1 requires dropMask", pse shapes).

Status codes (seed L520-535, API.md "Errors"), with the forward operator's split: 161001 for a null
required tensor or attribute; 161002 for dtypes and formats (the seed's 161002 lines), the checks the
aclnn layer makes before tiling (layout, ranks, shapes that must equal query's) and rules only the
seed states (its limits, the pse and rope bans, reserved inputs); 561002 for rules the kernel's
tiling enforces (heads, keep_prob, sparse-mode/token/prefix checks, mask/pse/drop-mask shapes).
"""
from __future__ import annotations

from dataclasses import dataclass

from npusim.errors import ACLNN_ERR_INNER_TILING_ERROR, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR
from ops.common.acl_dtypes import BF16, BOOL, FP16, FP32, INT64, UINT8
from ops.common.errors import Rule
from ops.common.inputs import InputContract
from ops.flash_attention_var_len_score.contract import (ALIBI_ROWS, COMPRESSED_MASK_SHAPE, DROP_MASK_BITS_PER_BYTE,
                                                         FAMILY_A2, FAMILY_A3, INT32_MAX, K, M, MASK_FORMS,
                                                         PREFIX_MASK_SHAPE, SPARSE_MODES, UNSUPPORTED_PRODUCTS, Limit,
                                                         SparseModeSpec)

__all__ = ["ALIBI_ROWS", "COMPRESSED_MASK_SHAPE", "DROP_MASK_BITS_PER_BYTE", "PREFIX_MASK_SHAPE", "SparseModeSpec",
           "MASK_FORMS", "SPARSE_MODES", "INT32_MAX", "RULES", "rule"]

OP_NAME = "aclnnFlashAttentionUnpaddingScoreGradV5"
ACL_DTYPE_NAMES = {FP16: "FLOAT16", BF16: "BFLOAT16", FP32: "FLOAT32", BOOL: "BOOL", UINT8: "UINT8",
                   INT64: "INT64"}

DATA_DTYPES = (FP16, BF16, FP32)  # query/keyIn/value/dy/attentionIn: seed L150-216, L290
ROPE_DTYPES = (BF16,)  # queryRope/keyInRope: seed L166, L186
PSE_DTYPES = DATA_DTYPES  # pse types 0/1: equal to query (seed L206, L589)
SLOPE_DTYPES = (FP32,)  # pse types 2/3: seed L604
DROP_MASK_DTYPES = (UINT8,)  # seed L226
ATTEN_MASK_DTYPES = (BOOL, UINT8)  # seed L246
SOFTMAX_DTYPES = (FP32,)  # softmaxMax/softmaxSum: seed L256, L266
SINK_DTYPES = (FP32,)  # sinkIn / dsink: seed L296, L476

#: SoC family -> product term (seed L5-L8: A3 and A2 training products).
SUPPORTED_FAMILIES = {FAMILY_A2: "Atlas A2 训练系列产品 (seed L7)", FAMILY_A3: "Atlas A3 训练系列产品 (seed L6)"}

LAYOUTS = ("TND",)  # seed L385, L588
#: softmaxInLayout: "same_as_input" = [T, N1, 8]; "" = per-batch [N1, Sq, 8] blocks (shape [N1, T, 8]).
SOFTMAX_IN_LAYOUTS = ("same_as_input", "")
#: Attribute defaults (seed example L815-L826 and the forward operator's spellings).
DEFAULTS = {"scale_value": 1.0, "keep_prob": 1.0, "pre_tokens": INT32_MAX, "next_tokens": INT32_MAX,
            "inner_precise": 0, "sparse_mode": 0, "pse_type": 1, "softmax_in_layout": "same_as_input"}
PSE_TYPES = (0, 1, 2, 3)  # seed L415, L606-L611
PSE_TYPE_NONE = 1  # seed L605: without pse, pseType must be 1
#: pse type -> order / source (seed L606-L611): 0 mul then add, 1 add then mul, 2/3 inner slopes.
PSE_ORDERS = {0: "scale_then_add", 1: "add_then_scale", 2: "alibi", 3: "alibi_sqrt"}

LIMITS = {
    "T": Limit("T (query and key/value)", 1, M, "limit_T", "seed L594 'T(B*S)：取值范围为1~1M'"),
    "B": Limit("B (batch count)", 1, 2 * M, "limit_B", "seed L595 'B：取值范围为1~2M'"),
    "B_prefix": Limit("B with prefix", 1, K, "limit_B_prefix", "seed L595 '带prefixOptional的时候B最大支持1K'"),
    "N": Limit("N1 (query heads)", 1, 256, "limit_N", "seed L591, L596 'Nq取值范围1~256'"),
    "D": Limit("D (head dim)", 1, 768, "limit_D", "seed L598 'D：取值范围为1~768'"),
}
#: seed L405: 0-8 except 5 (prefix non-compressed); with rope not 6.
UNSUPPORTED_SPARSE_MODES = {5: "seed L405 '不支持5'"}

_NULL, _INV, _TIL = ACLNN_ERR_PARAM_NULLPTR, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_INNER_TILING_ERROR

_RULE_LIST = (
    Rule("product_supported", _INV, "the chip's SoC family must be Ascend910B (A2) or Ascend910_93 (A3)",
         "seed L5-L8"),
    Rule("required_tensor", _NULL, "query, key_in, value, dy, softmax_max, softmax_sum and attention_in are "
         "required (not None)", "seed L525; tiling.md §3 (the backward recomputes P from them)"),
    Rule("required_attr", _NULL, "head_num and input_layout are required attributes (not None)", "seed L525"),
    Rule("required_seq_lens", _NULL, "actual_seq_qlen and actual_seq_kvlen are required for TND",
         "seed L326-345 (输入, not optional), L600"),
    Rule("tensor_type", _INV, "must be a tensor: a numpy array or an object with .shape (ints >= 0) and .dtype",
         "API.md Operators"),
    Rule("qkv_dtype", _INV, "query/key_in/value/dy dtype must be FLOAT16, BFLOAT16 or FLOAT32", "seed L150-216, L531"),
    Rule("qkv_same_dtype", _INV, "query, key_in, value, dy and attention_in must have the same dtype",
         "seed L589, L290"),
    Rule("rope_dtype", _INV, "query_rope/key_in_rope must be BFLOAT16, like query", "seed L166, L186"),
    Rule("pse_dtype", _INV, "pse_shift dtype must equal query's for pse_type 0/1 and be FLOAT32 for 2/3",
         "seed L206, L589, L604"),
    Rule("drop_mask_dtype", _INV, "drop_mask dtype must be UINT8", "seed L226, L531"),
    Rule("atten_mask_dtype", _INV, "atten_mask dtype must be BOOL or UINT8", "seed L246, L531"),
    Rule("softmax_dtype", _INV, "softmax_max/softmax_sum dtype must be FLOAT32", "seed L256, L266, L531"),
    Rule("sink_dtype", _INV, "sink_in dtype must be FLOAT32", "seed L296, L531"),
    Rule("reserved_none", _INV, "padding_mask and softmax_in are reserved and must be None",
         "seed L235 '调用时需传空', L275 '暂未使用'"),
    Rule("input_layout", _INV, "input_layout must be the string 'TND'", "seed L385, L588"),
    Rule("softmax_in_layout", _INV, "softmax_in_layout must be 'same_as_input' ([T, N, 8]) or '' ([N, T, 8])",
         "seed L425, L628"),
    Rule("head_num_positive", _INV, "head_num must be an int > 0", "seed L375, L627"),
    Rule("qkv_rank", _INV, "query, key_in, value, dy and attention_in must be 3-D (T, N, D)", "seed L150-216"),
    Rule("head_dim_equal", _INV, "query, key_in and value must have the same D", "seed L590"),
    Rule("kv_same_shape", _INV, "key_in and value must have the same shape", "seed L590"),
    Rule("dy_shape", _INV, "dy and attention_in must have query's shape", "seed L290, L590"),
    Rule("rope_shape", _INV, "query_rope/key_in_rope: both or neither, 3-D [T, N, Drope] with query's/key_in's "
         "T and N and one Drope >= 1", "seed L160-L190, L586"),
    Rule("softmax_shape", _INV, "softmax_max/softmax_sum must be [T1, N1, 8] ('same_as_input') or [N1, T1, 8] ('')",
         "seed L626, L628; tiling.md §3 'The shape of softmaxMax is invalid'"),
    Rule("sink_shape", _INV, "sink_in must be 1-D of length head_num", "seed L296, L629"),
    Rule("seq_lens_type", _INV, "actual_seq_qlen/actual_seq_kvlen must be 1-D int64 sequences", "seed L326-345"),
    Rule("prefix_type", _INV, "prefix must be a 1-D int64 sequence", "seed L316"),
    Rule("start_idx_type", _INV, "q_start_idx/kv_start_idx must be int64 sequences of length 1",
         "seed prototype L79-80, L624"),
    Rule("scalar_type", _INV, "scale_value/keep_prob must be real numbers; pre_tokens, next_tokens, head_num, "
         "inner_precise, sparse_mode, pse_type ints in int64 range", "seed L346-L415"),
    Rule("limit_T", _INV, "T1 and T2 must lie in [1, 1M]", LIMITS["T"].source),
    Rule("limit_B", _INV, "the batch count must lie in [1, 2M]", LIMITS["B"].source),
    Rule("limit_B_prefix", _INV, "with prefix the batch count must be <= 1K", LIMITS["B_prefix"].source),
    Rule("limit_N", _INV, "N1 (head_num) must lie in [1, 256]", LIMITS["N"].source),
    Rule("limit_D", _INV, "D must lie in [1, 768]", LIMITS["D"].source),
    Rule("seq_lens_same_batch", _TIL, "actual_seq_qlen and actual_seq_kvlen must have the same length (B)",
         "seed L586; tiling 'actual seq tensors ... equal length'"),
    Rule("seq_lens_cumulative", _INV, "actual_seq_* are cumulative lengths: >= 0 and non-decreasing",
         "seed L600 (T = B*S, tightly packed), L625"),
    Rule("t_covers_seq_lens", _TIL, "T1/T2 must be >= the last actual_seq_qlen/actual_seq_kvlen",
         "tiling 't1Size and t2Size need larger than sum of seqLen'"),
    Rule("seq_lens_end_at_t", _INV, "the last actual_seq_qlen/actual_seq_kvlen must equal T1/T2", "seed L600"),
    Rule("kv_len_nonzero", _INV, "a batch with Sq > 0 needs Skv > 0", "seed L625 (only Sq may be 0)"),
    Rule("query_heads_match_head_num", _TIL, "query dim 1 must equal head_num", "seed L627"),
    Rule("n1_multiple_of_n2", _TIL, "key/value heads N2 must be >= 1 and divide N1", "seed L591"),
    Rule("keep_prob_range", _TIL, "keep_prob (as float32) must lie in (0, 1]", "seed L599"),
    Rule("keep_prob_needs_drop_mask", _TIL, "keep_prob < 1 needs a drop_mask", "tiling.md §3"),
    Rule("sparse_mode_supported", _TIL, "sparse_mode must be one of 0, 1, 2, 3, 4, 6, 7, 8", "seed L405"),
    Rule("rope_not_mode6", _INV, "sparse_mode 6 is not supported with rope", "seed L405 '传入rope时，不支持6'"),
    Rule("rope_no_dropout", _INV, "rope is incompatible with dropout (drop_mask)", "seed L225 '与rope不兼容'"),
    Rule("atten_mask_shape", _TIL, "atten_mask must be 2-D: [maxSq, maxSkv] for sparse 0/1, [2048, 2048] for "
         "2/3/4/7/8, [3072, 2048] for 6", "seed L246; sparse doc"),
    Rule("mode0_tokens", _TIL, "sparse 0 with a mask: next_tokens >= 0, Skv + pre_tokens >= Sq for every "
         "batch, and next_tokens >= -pre_tokens when pre_tokens < 0", "seed L617; tiling.md §0"),
    Rule("mode3_sq_le_skv", _TIL, "sparse 3: every batch needs Sq <= Skv", "tiling.md §0 RIGHT_DOWN check"),
    Rule("mode4_tokens", _TIL, "sparse 4: pre_tokens >= 0, pre_tokens + next_tokens >= 0 when next_tokens < 0, "
         "and Sq - next_tokens <= Skv for every non-empty batch", "seed L617; tiling.md §0 BAND check"),
    Rule("mode6_prefix", _TIL, "sparse 6: prefix of length B with prefix[b] in [0, Skv] if Sq > Skv, "
         "else in [Skv - Sq, Skv]", "seed L623"),
    Rule("mode7_tokens", _TIL, "sparse 7: pre_tokens >= last Skv, next_tokens <= 0, Sq <= Skv for every "
         "non-empty batch and last Sq - next_tokens <= last Skv", "sparse doc mode 7"),
    Rule("mode8_tokens", _TIL, "sparse 8: pre_tokens >= first Skv and first Sq - next_tokens <= first Skv",
         "sparse doc mode 8"),
    Rule("pse_type_value", _INV, "pse_type must be 0, 1, 2 or 3", "seed L415"),
    Rule("pse_type_without_pse", _INV, "without pse_shift, pse_type must be 1", "seed L605"),
    Rule("pse_shape", _TIL, "pse_shift must be [B or 1, N1, 1024, maxSkv] for pse_type 0/1 and [B, N1] or [N1] "
         "for 2/3", "seed L208, L601-L604"),
    Rule("pse_no_empty_batch", _INV, "pse_shift is not supported when a batch has Sq == 0", "seed L625"),
    Rule("pse_not_mode7", _INV, "pse_shift is not supported with sparse 7", "seed L619"),
    Rule("pse_mode8_equal_lens", _INV, "pse_shift with sparse 8 needs Sq == Skv in every batch", "seed L620"),
    Rule("pse_alibi_causal", _TIL, "pse_type 0/1 (the last 1024 rows) needs Sq == Skv in every batch and a "
         "lower-triangular mask (sparse 2, 3, or 0 with pre_tokens >= maxSq and next_tokens == 0)", "seed L601"),
    Rule("pse_slope_equal_lens", _TIL, "pse_type 2/3 needs Sq == Skv in every batch", "tiling.md §0 PSE"),
    Rule("pse_slope_mode8_start", _INV, "pse_type 2/3 with sparse 8: actual_seq_qlen[0] - actual_seq_kvlen[0] "
         "+ q_start_idx - kv_start_idx must be 0", "seed L624"),
    Rule("drop_mask_size", _TIL, "drop_mask must hold at least ceil(N1*sum(Sq*Skv)/8) bytes",
         "seed L226; tiling 'dropMask should not be less than'"),
)

RULES = {r.name: r for r in _RULE_LIST}


def rule(name: str) -> Rule:
    """The rule called *name* (KeyError for a typo: a bug, never user input)."""
    return RULES[name]


#: The tensors of ``prepare`` for the shared input normalisation (ops/common/inputs.py). The seed's parameter
#: table marks every tensor input "非连续Tensor √" (non-contiguous supported), so none must be contiguous:
#: the launch copies a non-contiguous array into a contiguous GM buffer (launch.gm_data).
INPUTS = InputContract(
    data=("query", "query_rope", "key_in", "key_in_rope", "value", "dy", "pse_shift", "drop_mask", "padding_mask",
          "atten_mask", "softmax_max", "softmax_sum", "softmax_in", "attention_in", "sink_in"),
    int_arrays=("prefix", "actual_seq_qlen", "actual_seq_kvlen", "q_start_idx", "kv_start_idx"))
