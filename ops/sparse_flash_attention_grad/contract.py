"""The aclnnSparseFlashAttentionGrad contract as data (STYLE §4); ``validate.py`` walks these tables.

Sources: "seed" = seeds/003_9b762d6b62fa1de6.txt (authoritative: the parameter table, 约束说明 and
规格约束); "tiling" = the checks the real host code makes (research/tiling.md §4, read in
cannmirror/ops-transformer ``attention/sparse_flash_attention_grad/op_host/
sparse_flash_attention_grad_tiling_bs1_basic.cpp`` GetBaseShapeInfo).

Status codes (seed 返回值 table, API.md "Errors"): 161001 for a missing required tensor; 161002 for
dtypes, layout, ranks, attribute values the seed's parameter table fixes and the seed's limits;
561002 for the shape rules the real tiling enforces (selected_block_count = 2048, sparse_mode 0/3,
N2 = 1, N1 a power of two <= 128, D and softmax shapes).
"""
from __future__ import annotations

from npusim.errors import (
    ACLNN_ERR_INNER_TILING_ERROR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
)
from ops.common.acl_dtypes import BF16, FP16, FP32, INT32, INT64
from ops.common.errors import Rule
from ops.common.inputs import InputContract

OP_NAME = "aclnnSparseFlashAttentionGrad"

ACL_DTYPE_NAMES = {FP16: "FLOAT16", BF16: "BFLOAT16", FP32: "FLOAT32", INT32: "INT32", INT64: "INT64"}
DATA_DTYPES = (BF16, FP16)  # query, key, value, dOut, out, rope: seed parameter table
SOFTMAX_DTYPES = (FP32,)  # softmaxMax / softmaxSum
#: sparseIndices: the table says INT64, the seed's example passes ACL_INT32 and the op definition takes
#: int32 (tiling.md §4): both accepted.
INDEX_DTYPES = (INT64, INT32)
#: actual sequence lengths: the table says INT32, the example passes ACL_INT64: both accepted.
SEQ_LEN_DTYPES = (INT64, INT32)

FAMILY_A2, FAMILY_A3 = "Ascend910B", "Ascend910_93"
SUPPORTED_FAMILIES = {FAMILY_A2: "Atlas A2 训练系列产品 (seed √)", FAMILY_A3: "Atlas A3 训练系列产品 (seed √)"}
UNSUPPORTED_PRODUCTS = {"Ascend310P": "Atlas 推理系列产品", "Ascend310B": "Atlas 200I/500 A2 推理产品",
                        "Ascend910": "Atlas 训练系列产品", "Ascend310": "Atlas 200I/300/500 推理产品",
                        "Ascend950": "昇腾950 AI处理器"}

LAYOUTS = ("BSND", "TND")
INT32_MAX = 2147483647
DEFAULTS = {"scale_value": 1.0, "sparse_block_size": 1, "layout": "BSND", "sparse_mode": 0,
            "pre_tokens": INT32_MAX, "next_tokens": INT32_MAX, "deterministic": False}
HEAD_DIM = 512  # D: seed 规格约束
ROPE_DIM = 64  # Drope
N2 = 1  # MQA
N1_VALUES = (1, 2, 4, 8, 16, 32, 64, 128)
SELECTED_BLOCK_COUNT = 2048  # K: seed table "K：2048"; tiling "only support selected_block_count=2048"
BLOCK_SIZES = (1, 8, 16, 32, 64)  # sparseBlockSize "目前支持1、8、16、32、64"
SPARSE_MODES = {0: "不做mask操作", 3: "rightDownCausal"}
UNSUPPORTED_SPARSE_MODES = {1: "allMask", 2: "leftUpCausal", 4: "band", 5: "prefix", 6: "global", 7: "dilated",
                            8: "block_local"}
TOKENS_VALUE = INT32_MAX  # preTokens / nextTokens "仅支持取值：2147483647"
K = 1024
MAX_B = 256  # 规格约束 B 1~256
MAX_S = 128 * K  # S1, S2 1~128K
INDEX_END = -1  # a -1 ends a row's index list (research/oracles.md §5)

_NULL, _INV, _TIL = ACLNN_ERR_PARAM_NULLPTR, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_INNER_TILING_ERROR

_RULE_LIST = (
    Rule("product_supported", _INV, "the chip's SoC family must be Ascend910B (A2) or Ascend910_93 (A3)",
         "seed 产品支持情况"),
    Rule("required_tensor", _NULL, "query, key, value, sparse_indices, d_out, out, softmax_max and softmax_sum "
         "are required (not None)", "seed 返回值 161001"),
    Rule("required_seq_lens", _NULL, "layout TND needs actual_seq_lengths_query and actual_seq_lengths_kv",
         "seed actualSeqLengths*Optional '当layout为TND，该变量存在'"),
    Rule("tensor_type", _INV, "must be a tensor: a numpy array or an object with .shape (ints >= 0) and .dtype",
         "API.md Operators"),
    Rule("data_dtype", _INV, "query, key, value, d_out, out, query_rope, key_rope must be FLOAT16 or BFLOAT16",
         "seed parameter table, 返回值 161002"),
    Rule("same_dtype", _INV, "query, key, value, d_out, out and the rope tensors must share one dtype",
         "seed parameter table (dQuery etc. 'BFLOAT16、FLOAT16', one kernel dtype)"),
    Rule("softmax_dtype", _INV, "softmax_max and softmax_sum must be FLOAT32", "seed parameter table"),
    Rule("index_dtype", _INV, "sparse_indices must be INT64 or INT32", "seed table INT64; seed example ACL_INT32"),
    Rule("seq_lens_type", _INV, "actual_seq_lengths_query/kv must be 1-D INT32/INT64 arrays or int sequences",
         "seed actualSeqLengths* (INT32; the example passes INT64)"),
    Rule("layout", _INV, "layout must be the string 'BSND' or 'TND'", "seed layout '支持BSND、TND'"),
    Rule("rank", _INV, "query/key/value/d_out/out/rope must be 4-D (B,S,N,D) for BSND or 3-D (T,N,D) for TND; "
         "sparse_indices 4-D/3-D; softmax_max/sum 4-D (B,N2,S1,G) / 3-D (N2,T1,G)", "seed shapes"),
    Rule("scalar_type", _INV, "scale_value must be a real number; sparse_block_size, sparse_mode, pre_tokens, "
         "next_tokens ints; deterministic a bool", "seed prototype"),
    Rule("block_size", _INV, "sparse_block_size must be 1, 8, 16, 32 or 64", "seed sparseBlockSize"),
    Rule("tokens_value", _INV, "pre_tokens and next_tokens only take 2147483647", "seed preTokens/nextTokens"),
    Rule("rope_pair", _INV, "query_rope and key_rope must be given together", "seed queryRope/keyRope (MLA rope)"),
    Rule("sparse_mode", _TIL, "sparse_mode must be 0 or 3", "seed 约束说明 Mask table; tiling "
         "'only support sparse_mode=0 or 3'"),
    Rule("selected_block_count", _TIL, "sparse_indices' last axis K must be 2048",
         "seed sparseIndices 'K：2048'; tiling 'only support selected_block_count=2048'"),
    Rule("n2_one", _TIL, "key/value (and key_rope, sparse_indices, softmax) head count N2 must be 1 (MQA)",
         "seed 规格约束 N2 1; tiling n2=1"),
    Rule("n1_values", _TIL, "query heads N1 must be one of 1, 2, 4, 8, 16, 32, 64, 128",
         "seed 规格约束 N1; tiling n1 pow2"),
    Rule("head_dim", _TIL, "query, key, value, d_out and out must have D = 512", "seed 规格约束 D 512; tiling "
         "D_q == D_k, D_q >= D_v"),
    Rule("rope_dim", _TIL, "query_rope and key_rope must have Drope = 64", "seed 规格约束 Drope 64; tiling "
         "qRope/kRope D equal"),
    Rule("shape_match", _INV, "out and d_out must have query's shape; value key's; query_rope query's B/S/N; "
         "key_rope key's B/S/N; key's B that of query", "seed parameter table ('Shape维度保持一致')"),
    Rule("index_shape", _INV, "sparse_indices must be (B,S1,N2,K) for BSND / (T1,N2,K) for TND", "seed sparseIndices"),
    Rule("softmax_shape", _TIL, "softmax_max and softmax_sum must be (B,N2,S1,G) for BSND / (N2,T1,G) for TND, "
         "G = N1/N2", "seed softmaxMax/Sum; tiling softmax shape check"),
    Rule("limit_B", _INV, "B must lie in [1, 256]", "seed 规格约束 B 1~256"),
    Rule("limit_S", _INV, "S1 and S2 (every batch's, for TND) must lie in [1, 128K]; S1 = 0 only as an empty "
         "query", "seed 规格约束 S1、S2 1~128K"),
    Rule("seq_lens_batch", _INV, "actual_seq_lengths_query and actual_seq_lengths_kv must have the same "
         "length B", "seed actualSeqLengths* '长度与B保持一致'"),
    Rule("seq_lens_cumulative", _INV, "actual_seq_lengths_* are cumulative end offsets: non-decreasing, >= 0, "
         "the last equal to T1 / T2", "seed '累加和与T1/T2保持一致'; issue 11"),
)
RULES = {r.name: r for r in _RULE_LIST}


def rule(name: str) -> Rule:
    """The rule called *name* (KeyError for a typo: a bug, never user input)."""
    return RULES[name]


#: The call's tensors for the shared input normalisation (ops/common/inputs.py): sparse_indices steer the
#: kernel (the blocks it gathers), so they are real in every mode; the seed marks every tensor √ for
#: non-contiguous (非连续Tensor column), so strides are not judged.
INPUTS = InputContract(
    data=("query", "key", "value", "d_out", "out", "softmax_max", "softmax_sum", "query_rope", "key_rope"),
    control=("sparse_indices",), int_arrays=("actual_seq_lengths_query", "actual_seq_lengths_kv"))
