"""The aclnnScatterPaKvCache contract as data (STYLE §4); ``validate.py`` walks these tables.

Sources: "seed" = seeds/004_f6ea9718d54643c0.txt (authoritative); "tiling" = rules the real CANN host
tiling enforces although the seed does not state them (research/tiling.md §5; files
attention/scatter_pa_kv_cache/op_host/scatter_pa_kv_cache_tiling.cpp of cannmirror/ops-transformer).

Contents
- dtypes (numpy / ml_dtypes) and their aclDataType spellings;
- :class:`FamilySupport` per SoC family (:data:`FAMILIES`), :data:`UNSUPPORTED_PRODUCTS`,
  :func:`soc_family_of`;
- :data:`CACHE_MODES`, :data:`SCATTER_MODES`;
- symbolic dims (:data:`DIM_NAMES`, :class:`Derived`) and :class:`ScenarioSpec` per scenario
  (:data:`SCENARIOS`): shapes, optional inputs, value rules;
- :class:`TilingRule` list (:data:`TILING_RULES`); :func:`allowed_dtypes`.

Status codes: 161001 for a required tensor that is None; 161002 for dtypes (the seed's list), shape
and value rules of the seed's 约束说明 and anything else invalid; 561002 for ranks (the seed lists
"key的维数不等于3维或4维，value的维数不等于0维、3维或4维" under 561002; every other rank rule is treated
alike) and for tiling-only rules, including a scenario the chip's kernel does not implement.

HIFLOAT8: ml_dtypes has no hifloat8, so HIFLOAT8 tensors travel as ``np.uint8`` storage. Every
scenario but one copies bytes, where the two are indistinguishable. Scenario 3 (950 class) averages
tokens and would tell them apart; there a uint8 array is averaged as UINT8. A ``key_dtype="hifloat8"``
keyword plus a codec would be needed to model HIFLOAT8 averaging (not modelled; see golden.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Union

import ml_dtypes
import numpy as np

from npusim.errors import (ACLNN_ERR_INNER_TILING_ERROR, ACLNN_ERR_PARAM_INVALID,
                           ACLNN_ERR_PARAM_NULLPTR)
from ops.common.inputs import InputContract

OP_NAME = "aclnnScatterPaKvCache"

# --- dtypes ------------------------------------------------------------------------------------
FP16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
FP32 = np.dtype(np.float32)
INT8 = np.dtype(np.int8)
UINT8 = np.dtype(np.uint8)  # also the storage of HIFLOAT8 (module docstring)
INT16 = np.dtype(np.int16)
UINT16 = np.dtype(np.uint16)
INT32 = np.dtype(np.int32)
UINT32 = np.dtype(np.uint32)
INT64 = np.dtype(np.int64)
FP8_E5M2 = np.dtype(ml_dtypes.float8_e5m2)
FP8_E4M3FN = np.dtype(ml_dtypes.float8_e4m3fn)

#: aclDataType spelling of each dtype, for messages.
ACL_DTYPE_NAMES = {
    FP16: "FLOAT16", BF16: "BFLOAT16", FP32: "FLOAT", INT8: "INT8", UINT8: "UINT8 (or HIFLOAT8)",
    INT16: "INT16", UINT16: "UINT16", INT32: "INT32", UINT32: "UINT32", INT64: "INT64",
    FP8_E5M2: "FLOAT8_E5M2", FP8_E4M3FN: "FLOAT8_E4M3FN",
}

# seed, key parameter: A2/A3 "数据类型仅支持FLOAT16、BFLOAT16、INT8"
DATA_DTYPES_A2_A3 = (FP16, BF16, INT8)
# seed, key parameter, 昇腾910_95: the twelve types; HIFLOAT8 is UINT8 storage here
DATA_DTYPES_950 = (FP16, FP32, BF16, INT8, UINT8, INT16, UINT16, INT32, UINT32, FP8_E5M2, FP8_E4M3FN)
# seed, slotMapping: "数据类型支持INT32、INT64"; compress/seq tensors: "数据类型与slotMapping一致"
INDEX_DTYPES = (INT32, INT64)
# tiling: GetInputDtypeSiso/Kv, templates Rope/Omni accept only float16/bfloat16 on A2/A3
ROPE_OMNI_DTYPES_A2_A3 = (FP16, BF16)

#: FRACTAL_NZ fractal column width in bytes: last_dim = 32 // element size (seed scenario 1;
#: tiling.md §5 "lastDim = 32B/elemSize").
NZ_FRACTAL_BYTES = 32
#: tiling: NZ template "blockSize should less than UINT16_MAX" (DataCopy strides are 16-bit).
NZ_MAX_BLOCK_SIZE = 65535

# --- chips -------------------------------------------------------------------------------------
FAMILY_A2 = "Ascend910B"
FAMILY_A3 = "Ascend910_93"
FAMILY_950 = "Ascend910_95"


@dataclass(frozen=True)
class FamilySupport:
    """What one SoC family supports (seed 产品支持情况 and per-product notes)."""

    family: str
    product: str  # the seed's product term
    scenarios: frozenset  # seed: "仅支持场景..."
    data_dtypes: tuple  # key/value/caches
    scatter_mode_effective: bool  # 950: scatterMode "当前该参数无效"
    strides_effective: bool  # 950: strides/offsets "当前该参数无效"


_A2A3_SCENARIOS = frozenset({1, 2, 4, 5, 6})  # seed: "仅支持场景一、二、四、五、六"

FAMILIES = {
    FAMILY_A2: FamilySupport(
        FAMILY_A2, "Atlas A2 训练系列产品/Atlas 800I A2 推理产品/A200I A2 Box 异构组件",
        _A2A3_SCENARIOS, DATA_DTYPES_A2_A3, True, True),
    FAMILY_A3: FamilySupport(
        FAMILY_A3, "Atlas A3 训练系列产品/Atlas A3 推理系列产品",
        _A2A3_SCENARIOS, DATA_DTYPES_A2_A3, True, True),
    FAMILY_950: FamilySupport(
        FAMILY_950, "昇腾910_95 AI处理器", frozenset({2, 3}),  # seed: "仅支持场景二、三"
        DATA_DTYPES_950, False, False),
}

#: Families the seed marks × (产品支持情况), with the seed's product term.
UNSUPPORTED_PRODUCTS = {
    "Ascend310P": "Atlas 推理系列产品",
    "Ascend310B": "Atlas 200I/500 A2 推理产品",
    "Ascend910": "Atlas 训练系列产品",
    "Ascend310": "Atlas 200/300/500 推理产品",
}

# CANN SoC name prefix -> family, first match wins (research/hardware.md §1 table).
_SOC_PREFIXES = (
    ("Ascend910_95", FAMILY_950), ("Ascend950", FAMILY_950), ("Ascend910_93", FAMILY_A3),
    ("Ascend910B", FAMILY_A2), ("Ascend910", "Ascend910"), ("Ascend310P", "Ascend310P"),
    ("Ascend310B", "Ascend310B"), ("Ascend310", "Ascend310"),
)


def soc_family_of(name: str) -> str:
    """Family of a family name or CANN SoC name ("Ascend910B2" -> "Ascend910B"); unknown names unchanged.

    A bare "Ascend910B" is read as the A2 family (as ``ChipSpec.soc_family`` spells it), not the
    first-generation SoC of that name (hardware.md §1).
    """
    for prefix, family in _SOC_PREFIXES:
        if name.startswith(prefix):
            return family
    return name


# --- modes -------------------------------------------------------------------------------------
#: seed cacheMode: "传空指针或"Norm"" -> ND, "PA_NZ" -> FRACTAL_NZ. None/"" mean "Norm".
CACHE_MODES = ("Norm", "PA_NZ")
#: seed scatterMode: None/"" mean "None".
SCATTER_MODES = ("None", "Nct", "Alibi", "Rope", "Omni")
DEFAULT_CACHE_MODE = "Norm"
DEFAULT_SCATTER_MODE = "None"
#: scatter_mode -> scenario for a 3-D key with value (seed scenarios 2, 4, 5).
SCATTER_MODE_SCENARIO = {"None": 2, "Nct": 2, "Alibi": 4, "Rope": 5, "Omni": 5}

# --- shapes ------------------------------------------------------------------------------------
#: Symbols of the seed's shape lists.
DIM_NAMES = {
    "T": "num_tokens", "N": "num_head", "Dk": "k_head_size", "Dv": "v_head_size",
    "NB": "num_blocks", "BS": "block_size", "B": "batch", "S": "seq_len",
    "L": "last_dim",
}


@dataclass(frozen=True)
class Derived:
    """A dim computed from bound symbols, e.g. num_head * k_head_size // last_dim_k."""

    text: str
    fn: Callable[[Mapping[str, int]], int]


Dim = Union[str, int, Derived]

# Floor division as the real tiling compares it ("numHead * kHeadSize / lastDimK"); the 32-byte
# alignment rule (TILING_RULES) makes it exact.
NZ_DIM1_K = Derived("num_head*k_head_size//last_dim", lambda s: s["N"] * s["Dk"] // s["L"])
NZ_DIM1_V = Derived("num_head*v_head_size//last_dim", lambda s: s["N"] * s["Dv"] // s["L"])
BATCH_X_HEADS = Derived("batch*num_head", lambda s: s["B"] * s["N"])

#: Tensors whose shapes a scenario lists, in binding order (first sight of a symbol binds it).
SHAPE_ORDER = ("key", "value", "key_cache", "value_cache", "seq_lens", "slot_mapping",
               "compress_lens", "compress_seq_offset")
OPTIONAL_TENSORS = ("compress_lens", "compress_seq_offset", "seq_lens")
DATA_TENSORS = ("key", "value", "key_cache", "value_cache")
CONTROL_TENSORS = ("slot_mapping", "compress_lens", "compress_seq_offset", "seq_lens")
#: The call's tensors for the shared input normalisation (ops/common/inputs.py): the caches are updated
#: in place; seed 约束说明: 除了key和value，输入参数不支持非连续.
INPUTS = InputContract(data=DATA_TENSORS, control=CONTROL_TENSORS, inout=("key_cache", "value_cache"),
                       contiguous=("key_cache", "value_cache") + CONTROL_TENSORS,
                       contiguous_rule="the seed says 除了key和value，输入参数不支持非连续 (only key and value may "
                                       "be non-contiguous)")


@dataclass(frozen=True)
class ScenarioSpec:
    """One of the seed's six scenarios (功能说明): shapes, optional inputs, data rules.

    *compress_kind*: "alibi", "rope", "omni", "by_offset" (scenario 3: "rope" when
    compress_seq_offset is given, else "alibi", as the 950 kernel picks its template) or None.
    *value_rules*: names of checks on control-tensor values, implemented in validate.py (161002).
    """

    number: int
    cache_mode: str
    scatter_modes: tuple
    shapes: Mapping[str, tuple]
    required_optionals: tuple  # None -> 161001
    forbidden_optionals: tuple  # given -> 161002 (seed: "场景一、二、六没有...", "场景四没有...")
    has_value: bool
    compress_kind: str | None
    value_rules: tuple


_NO_COMPRESS = ("compress_lens", "compress_seq_offset", "seq_lens")
_TOKEN_RULES = ("slots_in_range",)
_COMPRESS_RULES = ("seq_lens_non_negative", "compress_lens_within_seq_lens",
                   "cache_capacity_formula", "task_rows_in_range")

SCENARIOS = {
    1: ScenarioSpec(
        1, "PA_NZ", ("None",),
        {"key": ("T", "N", "Dk"), "value": ("T", "N", "Dv"),
         "key_cache": ("NB", NZ_DIM1_K, "BS", "L"), "value_cache": ("NB", NZ_DIM1_V, "BS", "L"),
         "slot_mapping": ("T",)},
        (), _NO_COMPRESS, True, None, _TOKEN_RULES),
    2: ScenarioSpec(
        2, "Norm", ("None", "Nct"),
        {"key": ("T", "N", "Dk"), "value": ("T", "N", "Dv"),
         "key_cache": ("NB", "BS", "N", "Dk"), "value_cache": ("NB", "BS", "N", "Dv"),
         "slot_mapping": ("T",)},
        (), _NO_COMPRESS, True, None, _TOKEN_RULES),
    3: ScenarioSpec(
        3, "Norm", SCATTER_MODES,  # 950: scatterMode has no effect
        {"key": ("B", "S", "N", "Dk"), "value": ("B", "S", "N", "Dk"),
         "key_cache": ("NB", "BS", 1, "Dk"), "value_cache": ("NB", "BS", 1, "Dk"),
         "seq_lens": ("B",), "slot_mapping": ("B", "N"), "compress_lens": ("B", "N"),
         "compress_seq_offset": (BATCH_X_HEADS,)},
        ("compress_lens", "seq_lens"), (), True, "by_offset",
        ("seq_lens_within_seq_len", "seq_offset_lenient") + _COMPRESS_RULES),
    4: ScenarioSpec(
        4, "Norm", ("Alibi",),
        {"key": ("T", "N", "Dk"), "value": ("T", "N", "Dk"),
         "key_cache": ("NB", "BS", 1, "Dk"), "value_cache": ("NB", "BS", 1, "Dk"),
         "seq_lens": ("B",), "slot_mapping": (BATCH_X_HEADS,), "compress_lens": (BATCH_X_HEADS,)},
        ("compress_lens", "seq_lens"), ("compress_seq_offset",), True, "alibi",
        ("seq_lens_sum_is_num_tokens",) + _COMPRESS_RULES),
    5: ScenarioSpec(
        5, "Norm", ("Rope", "Omni"),
        {"key": ("T", "N", "Dk"), "value": ("T", "N", "Dk"),
         "key_cache": ("NB", "BS", 1, "Dk"), "value_cache": ("NB", "BS", 1, "Dk"),
         "seq_lens": ("B",), "slot_mapping": (BATCH_X_HEADS,), "compress_lens": (BATCH_X_HEADS,),
         "compress_seq_offset": (BATCH_X_HEADS,)},
        ("compress_lens", "seq_lens", "compress_seq_offset"), (), True, "by_scatter_mode",
        ("seq_lens_sum_is_num_tokens", "seq_offset_strict") + _COMPRESS_RULES),
    6: ScenarioSpec(
        6, "Norm", ("None", "Nct"),
        {"key": ("T", "N", "Dk"), "key_cache": ("NB", "BS", "N", "Dk"), "slot_mapping": ("T",)},
        (), _NO_COMPRESS, False, None, _TOKEN_RULES),
}


# --- tiling-only rules (561002) ------------------------------------------------------------------
@dataclass(frozen=True)
class TilingRule:
    """A rule the real kernel's tiling enforces (status 561002); *phase*: before or after shapes."""

    name: str
    scenarios: frozenset
    families: frozenset | None  # None: every supported family
    phase: str  # "pre_shape" | "post_shape"
    text: str
    source: str


TILING_RULES = (
    TilingRule("sizes_positive", frozenset(SCENARIOS), None, "pre_shape",
               "every dim of key, value and the caches must be > 0",
               "tiling.md §5 'sizes in (0, UINT_MAX]'"),
    TilingRule("nz_head_size_32b_aligned", frozenset({1}), None, "pre_shape",
               "k_head_size and v_head_size times the element size must be multiples of 32 bytes",
               "tiling.md §5; scatter_pa_kv_cache_tiling.cpp 'kHeadSize and vHeadSize should be "
               "align to 32.'"),
    TilingRule("rope_omni_float_only", frozenset({5}), frozenset({FAMILY_A2, FAMILY_A3}), "pre_shape",
               "Rope/Omni take FLOAT16 or BFLOAT16 only",
               "scatter_pa_kv_cache_tiling.cpp GetInputDtypeSiso: 'input key and value dtype must be "
               "float16 or bfloat16.'"),
    TilingRule("nz_block_size_max", frozenset({1}), None, "post_shape",
               f"block_size must be <= {NZ_MAX_BLOCK_SIZE}",
               "scatter_pa_kv_cache_tiling.cpp CheckInputShapeNz 'blockSize should less than UINT16_MAX.'"),
    TilingRule("cache_rows_cover_tokens", frozenset({1, 2, 4, 5, 6}), frozenset({FAMILY_A2, FAMILY_A3}),
               "post_shape", "num_blocks * block_size must be >= key dim 0",
               "scatter_pa_kv_cache_tiling.cpp 'numBlocks * blockSize should larger than numTokens.'"),
)

STATUS_NULLPTR = ACLNN_ERR_PARAM_NULLPTR
STATUS_INVALID = ACLNN_ERR_PARAM_INVALID
STATUS_TILING = ACLNN_ERR_INNER_TILING_ERROR
#: Rank (ndim) errors: the seed's 561002 line (see the module docstring).
STATUS_RANK = ACLNN_ERR_INNER_TILING_ERROR


def allowed_dtypes(family: str, scenario: int) -> dict:
    """Allowed dtypes per tensor for *scenario* on *family* (seed lists narrowed by TILING_RULES)."""
    data = FAMILIES[family].data_dtypes
    if scenario == 5 and family in (FAMILY_A2, FAMILY_A3):
        data = tuple(d for d in data if d in ROPE_OMNI_DTYPES_A2_A3)
    tensors = SCENARIOS[scenario].shapes
    out = {name: data for name in DATA_TENSORS if name in tensors}
    out.update({name: INDEX_DTYPES for name in CONTROL_TENSORS
                if name in tensors})
    return out
