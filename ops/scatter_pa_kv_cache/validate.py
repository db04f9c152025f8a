"""Input validation of aclnnScatterPaKvCache: walk ``contract.py`` and return a :class:`ScatterPlan`.

Order (as the aclnn first stage): chip, null tensors (161001), tensor types, contiguity and modes,
dtypes (161002), ranks (561002), scenario and its chip support, scatter mode and optional inputs,
tiling rules before shapes, the scenario's shape table, tiling rules after shapes, strides/offsets,
values of the control tensors. Nothing is written.

Inputs are numpy arrays; in timing mode key/value/caches may be any object with ``.shape`` and
``.dtype`` (no data). Control tensors (slot_mapping, seq_lens, compress_lens, compress_seq_offset)
must be real ``np.ndarray`` because their values steer the kernel.

Choices where the seed is silent or ambiguous:
- Scenario 6's empty value/valueCache: a 0-dim array, or a 1-D array of shape (0,) (torch's
  ``torch.tensor([])``); None is a null pointer (161001, seed). Their dtypes are not checked.
- value's last dim may differ from key's in scenarios 1/2 (seed scenario 2: "k_head_size与
  v_head_size可以不同"), not in 3/4/5, whose valueCache is listed with k_head_size (the 910B
  compress kernels also size V tasks with k_head_size).
- Slots: negative slots are skipped (vLLM convention, oracles.md §6); other rows written must lie in
  [0, num_blocks*block_size) (seed 约束说明), else 161002. In scenarios 3/4/5 a task (batch, head)
  with a negative slot is skipped whole; duplicates are allowed and undefined (seed).
- "reduceSum(seqLens[i] - compressLens[i]) <= num_blocks*block_size" is read as a sum over tasks
  i = b*num_head + h of (seq_lens[b] - compress_lens[i]).
- compress_lens[i] must lie in [0, seq_lens[b]]; in scenario 5 a compressing task (win != 0) needs
  compress_seq_offset == -1 or 0 <= offset <= seq_lens[b] - win (the 910B kernel reads past the batch
  otherwise); scenario 3 (950) clamps the window to the sequence, so only offset >= -1 is required.
- strides/offsets (Nct, A2/A3): required (161001 if None), exactly two ints, each > 0 (seed:
  "数组长度为2。其值应该大于0"); ignored for other modes and on the 950 class (seed: "无效").
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

import numpy as np

from npusim.errors import AclnnError
from ops.scatter_pa_kv_cache import contract as C


@dataclass(frozen=True)
class ScatterPlan:
    """Everything the kernel and golden need about one validated call (sizes in elements).

    *num_tokens* is key dim 0 (3-D key) or batch*seq_len (4-D key); *num_tasks* the number of
    slot_mapping entries (tokens, or batch*num_head for the compress scenarios); *batch* and
    *seq_len* are 0 where the scenario has none. *last_dim_k/v* is the FRACTAL_NZ column width
    (32 bytes / element size) in PA_NZ, else 0. *key_stride/offset*, *value_stride/offset* are the
    Nct element strides/offsets (None otherwise); token t of key starts at element
    ``t*key_stride + key_offset`` of key's storage, which the numpy view ``key[t]`` already is.
    """

    scenario: int
    soc_family: str
    cache_mode: str
    scatter_mode: str  # effective: "None" where the chip ignores scatterMode
    compress_kind: str | None  # "alibi" | "rope" | "omni" | None
    has_value: bool
    dtype: np.dtype  # key, value and both caches
    index_dtype: np.dtype  # slot_mapping and the compress/seq tensors
    elem_bytes: int
    num_tokens: int
    num_heads: int
    k_head_size: int
    v_head_size: int  # 0 without value
    num_blocks: int
    block_size: int
    batch: int
    seq_len: int
    num_tasks: int
    last_dim_k: int
    last_dim_v: int
    key_stride: int | None = None
    key_offset: int | None = None
    value_stride: int | None = None
    value_offset: int | None = None

    @property
    def cache_rows(self) -> int:
        """Token rows of one cache: num_blocks * block_size."""
        return self.num_blocks * self.block_size

    @property
    def key_token_elems(self) -> int:
        """Elements of one key token in the cache (num_heads*k_head_size; k_head_size if compressed)."""
        return self.k_head_size * (1 if self.compress_kind else self.num_heads)

    @property
    def value_token_elems(self) -> int:
        """Elements of one value token in the cache (0 without value)."""
        return self.v_head_size * (1 if self.compress_kind else self.num_heads)

    def asdict(self) -> dict:
        """Plain dict of the fields (dtypes as their names)."""
        out = asdict(self)
        out["dtype"], out["index_dtype"] = self.dtype.name, self.index_dtype.name
        return out


# --- small helpers ---------------------------------------------------------------------------------
def _fail(status: int, message: str) -> AclnnError:
    return AclnnError(status, f"{C.OP_NAME}: {message}")


def _shape_of(x: Any, name: str) -> tuple:
    try:
        shape = tuple(x.shape)
        if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise TypeError
        return tuple(int(d) for d in shape)
    except (AttributeError, TypeError):
        raise _fail(C.STATUS_INVALID, f"{name} must be a tensor (numpy array or an object with .shape "
                                      f"and .dtype), got {type(x).__name__}") from None


def _dtype_of(x: Any, name: str) -> np.dtype:
    try:
        return np.dtype(x.dtype)
    except (AttributeError, TypeError):
        raise _fail(C.STATUS_INVALID, f"{name} must carry a numpy dtype, got "
                                      f"{getattr(x, 'dtype', None)!r}") from None


def _is_empty(shape: tuple) -> bool:
    """Scenario 6's empty value/valueCache: 0-dim, or the 1-D empty shape (0,)."""
    return shape == () or shape == (0,)


def _dtype_name(dt: np.dtype) -> str:
    return C.ACL_DTYPE_NAMES.get(dt, dt.name)


def _names(dtypes) -> str:
    return ", ".join(_dtype_name(d) for d in dtypes)


def _family_support(soc_family: str) -> C.FamilySupport:
    if not isinstance(soc_family, str):
        raise _fail(C.STATUS_INVALID, f"soc_family must be a str, got {type(soc_family).__name__}")
    family = C.soc_family_of(soc_family)
    if family in C.FAMILIES:
        return C.FAMILIES[family]
    product = C.UNSUPPORTED_PRODUCTS.get(family)
    where = f" ({product}: × in the seed's 产品支持情况)" if product else ""
    raise _fail(C.STATUS_INVALID, f"not supported on {soc_family}{where}; supported families: "
                                  f"{', '.join(C.FAMILIES)}")


def _normalize_mode(value: Any, name: str, allowed: tuple, default: str) -> str:
    if value is None or (isinstance(value, str) and value == ""):
        return default
    if not isinstance(value, str) or value not in allowed:
        raise _fail(C.STATUS_INVALID, f"{name} must be one of {', '.join(allowed)} (or None), got {value!r}")
    return value


# --- classification ----------------------------------------------------------------------------
def classify_scenario(key: Any, value: Any, cache_mode: Any = "Norm", scatter_mode: Any = "None",
                      soc_family: str = C.FAMILY_A2) -> int:
    """Seed scenario (1..6) of a call, from its construction (seed 功能说明).

    PA_NZ -> 1; a 4-D key -> 3; an empty value -> 6; else scatter_mode: None/Nct -> 2, Alibi -> 4,
    Rope/Omni -> 5 (on the 950 class scatterMode has no effect, so -> 2). Whether the rest of the
    call fits the scenario is :func:`validate`'s job. Raises AclnnError 161001 if key or value is
    None, 161002 for a non-tensor or an unknown mode, 561002 if key is not 3-D or 4-D.
    """
    support = _family_support(soc_family)
    for name, x in (("key", key), ("value", value)):
        if x is None:
            raise _fail(C.STATUS_NULLPTR, f"{name} must not be None")
    key_shape, value_shape = _shape_of(key, "key"), _shape_of(value, "value")
    cache_mode = _normalize_mode(cache_mode, "cache_mode", C.CACHE_MODES, C.DEFAULT_CACHE_MODE)
    scatter_mode = _normalize_mode(scatter_mode, "scatter_mode", C.SCATTER_MODES, C.DEFAULT_SCATTER_MODE)
    if len(key_shape) not in (3, 4):
        raise _fail(C.STATUS_RANK, f"key must be 3-D or 4-D, got shape {key_shape}")
    if cache_mode == "PA_NZ":
        return 1
    if len(key_shape) == 4:
        return 3
    if _is_empty(value_shape):
        return 6
    if not support.scatter_mode_effective:
        scatter_mode = C.DEFAULT_SCATTER_MODE
    return C.SCATTER_MODE_SCENARIO[scatter_mode]


# --- checks --------------------------------------------------------------------------------------
def _check_required(tensors: Mapping[str, Any]) -> None:
    for name in ("key", "key_cache", "slot_mapping", "value", "value_cache"):
        if tensors[name] is None:
            raise _fail(C.STATUS_NULLPTR, f"{name} must not be None (seed: 161001 for a null "
                                          "key, keyCacheRef, slotMapping, value or valueCacheRef)")


def _check_controls(tensors: Mapping[str, Any]) -> None:
    """Control tensors are real integer arrays (their values steer the kernel)."""
    for name in C.CONTROL_TENSORS:
        x = tensors[name]
        if x is not None and not isinstance(x, np.ndarray):
            raise _fail(C.STATUS_INVALID, f"{name} must be a numpy array with data (a control "
                                          f"input), got {type(x).__name__}")


def _check_contiguous(tensors: Mapping[str, Any]) -> None:
    """Seed 约束说明: "除了key和value，输入参数不支持非连续".

    A view with a zero stride (``np.broadcast_to``) is a data-less stand-in for timing mode
    (API.md), not a non-contiguous tensor, and passes.
    """
    for name in ("key_cache", "value_cache") + C.CONTROL_TENSORS:
        x = tensors[name]
        if not isinstance(x, np.ndarray) or 0 in x.strides:
            continue
        if not x.flags["C_CONTIGUOUS"]:
            raise _fail(C.STATUS_INVALID, f"{name} must be contiguous (only key and value may be "
                                          "non-contiguous)")


def _check_dtypes(support: C.FamilySupport, shapes: Mapping, dtypes: Mapping) -> None:
    """Seed 161002 list: key/value dtypes supported, the four data dtypes equal, index dtypes equal."""
    key_dt = dtypes["key"]
    if key_dt not in support.data_dtypes:
        raise _fail(C.STATUS_INVALID, f"key dtype {_dtype_name(key_dt)} is not supported on "
                                      f"{support.family} (supported: {_names(support.data_dtypes)})")
    for name in ("key_cache", "value", "value_cache"):
        if name != "key_cache" and _is_empty(shapes[name]):
            continue  # scenario 6's empty tensors carry no data
        if dtypes[name] != key_dt:
            raise _fail(C.STATUS_INVALID, f"{name} dtype {_dtype_name(dtypes[name])} must equal key "
                                          f"dtype {_dtype_name(key_dt)} (key, value and both caches "
                                          "share one dtype)")
    slot_dt = dtypes["slot_mapping"]
    if slot_dt not in C.INDEX_DTYPES:
        raise _fail(C.STATUS_INVALID, f"slot_mapping dtype {_dtype_name(slot_dt)} is not supported "
                                      f"(supported: {_names(C.INDEX_DTYPES)})")
    for name in C.OPTIONAL_TENSORS:
        if name in dtypes and dtypes[name] != slot_dt:
            raise _fail(C.STATUS_INVALID, f"{name} dtype {_dtype_name(dtypes[name])} must equal "
                                          f"slot_mapping dtype {_dtype_name(slot_dt)}")


def _check_ranks(shapes: Mapping) -> None:
    """Seed 561002: key 3-D/4-D, value 0/3/4-D; caches 4-D (value cache may be empty)."""
    key_nd = len(shapes["key"])
    if key_nd not in (3, 4):
        raise _fail(C.STATUS_RANK, f"key must be 3-D or 4-D, got shape {shapes['key']}")
    if len(shapes["key_cache"]) != 4:
        raise _fail(C.STATUS_RANK, f"key_cache must be 4-D, got shape {shapes['key_cache']}")
    value_empty = _is_empty(shapes["value"])
    if not value_empty and len(shapes["value"]) not in (3, 4):
        raise _fail(C.STATUS_RANK, f"value must be 0-D, 3-D or 4-D, got shape {shapes['value']}")
    if not value_empty and len(shapes["value"]) != key_nd:
        raise _fail(C.STATUS_RANK, f"value must have key's rank {key_nd} (or be empty), got shape "
                                   f"{shapes['value']}")
    if not _is_empty(shapes["value_cache"]) and len(shapes["value_cache"]) != 4:
        raise _fail(C.STATUS_RANK, f"value_cache must be 0-D or 4-D, got shape {shapes['value_cache']}")
    if value_empty != _is_empty(shapes["value_cache"]):
        raise _fail(C.STATUS_RANK, "value and value_cache must both be empty (scenario 6) or both "
                                   f"non-empty, got shapes {shapes['value']} and {shapes['value_cache']}")


def _check_optionals(spec: C.ScenarioSpec, tensors: Mapping[str, Any]) -> None:
    for name in spec.required_optionals:
        if tensors[name] is None:
            raise _fail(C.STATUS_NULLPTR, f"{name} is required in scenario {spec.number} (must not be None)")
    for name in spec.forbidden_optionals:
        if tensors[name] is not None:
            raise _fail(C.STATUS_INVALID, f"scenario {spec.number} takes no {name} (must be None)")


def _check_scatter_mode(spec: C.ScenarioSpec, scatter_mode: str) -> None:
    if scatter_mode not in spec.scatter_modes:
        raise _fail(C.STATUS_INVALID, f"scenario {spec.number} ({spec.cache_mode}) takes scatter_mode "
                                      f"{' or '.join(spec.scatter_modes)}, got {scatter_mode!r}")


def _dim_text(dim: C.Dim) -> str:
    if isinstance(dim, str):
        return C.DIM_NAMES[dim]
    return str(dim) if isinstance(dim, int) else dim.text


def _match_shapes(spec: C.ScenarioSpec, shapes: Mapping, bound: dict) -> dict:
    """Unify actual shapes with the scenario's symbolic shapes; returns the bound symbols."""
    origin = {sym: "32 bytes / element size" for sym in bound}  # only last_dim is pre-bound
    for name in C.SHAPE_ORDER:
        dims = spec.shapes.get(name)
        if dims is None or name not in shapes:
            continue
        shape = shapes[name]
        want_text = "[" + ", ".join(_dim_text(d) for d in dims) + "]"
        if len(shape) != len(dims):
            raise _fail(C.STATUS_RANK, f"{name} must be {len(dims)}-D {want_text} in scenario "
                                       f"{spec.number}, got shape {shape}")
        for axis, (dim, got) in enumerate(zip(dims, shape)):
            if isinstance(dim, str) and dim not in bound:
                bound[dim], origin[dim] = got, f"{name} dim {axis}"
                continue
            if isinstance(dim, str):
                want, label = bound[dim], f"{C.DIM_NAMES[dim]} ({origin[dim]})"
            elif isinstance(dim, int):
                want, label = dim, "the constant"
            else:
                want, label = dim.fn(bound), dim.text
            if got != want:
                raise _fail(C.STATUS_INVALID, f"{name} dim {axis} must equal {label} = {want} "
                                              f"(scenario {spec.number}: {name} is {want_text}), "
                                              f"got shape {shape}")
    return bound


def _tiling_rule_holds(rule: str, shapes: Mapping, dtype: np.dtype, sizes: Mapping) -> bool:
    elem = dtype.itemsize
    if rule == "sizes_positive":
        return all(d > 0 for n in C.DATA_TENSORS for d in shapes[n] if not _is_empty(shapes[n]))
    if rule == "nz_head_size_32b_aligned":
        return all((shapes[n][-1] * elem) % C.NZ_FRACTAL_BYTES == 0
                   for n in ("key", "value") if not _is_empty(shapes[n]))
    if rule == "rope_omni_float_only":
        return dtype in C.ROPE_OMNI_DTYPES_A2_A3
    if rule == "nz_block_size_max":
        return sizes["BS"] <= C.NZ_MAX_BLOCK_SIZE
    if rule == "cache_rows_cover_tokens":
        return sizes["NB"] * sizes["BS"] >= shapes["key"][0]
    raise AssertionError(f"unknown tiling rule {rule}")  # contract and validate out of step


def _check_tiling(phase: str, spec: C.ScenarioSpec, family: str, shapes: Mapping, dtype: np.dtype,
                  sizes: Mapping) -> None:
    for rule in C.TILING_RULES:
        if rule.phase != phase or spec.number not in rule.scenarios:
            continue
        if rule.families is not None and family not in rule.families:
            continue
        if not _tiling_rule_holds(rule.name, shapes, dtype, sizes):
            zero = [n for n in C.DATA_TENSORS if not _is_empty(shapes[n]) and 0 in shapes[n]]
            about = zero[0] if rule.name == "sizes_positive" and zero else "key"  # the tensor the rule is about
            raise _fail(C.STATUS_TILING, f"{about}: scenario {spec.number}: {rule.text} ({rule.source}); "
                                         f"key {shapes['key']}, key_cache {shapes['key_cache']}, "
                                         f"dtype {_dtype_name(dtype)}")


def _int_pair(x: Any, name: str) -> tuple:
    if x is None:
        raise _fail(C.STATUS_NULLPTR, f"{name} is required when scatter_mode is 'Nct' (must not be None)")
    if isinstance(x, np.ndarray):
        items = list(x.ravel()) if x.ndim == 1 else None
    elif isinstance(x, (list, tuple)):
        items = list(x)
    else:
        items = None
    if items is None or len(items) != 2:
        raise _fail(C.STATUS_INVALID, f"{name} must be a sequence of exactly 2 ints, got {x!r}")
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise _fail(C.STATUS_INVALID, f"{name} must hold ints, got {x!r}")
        if v <= 0:
            raise _fail(C.STATUS_INVALID, f"{name} values must be > 0 (seed: 其值应该大于0), got {x!r}")
    return int(items[0]), int(items[1])


# --- value rules (161002) ------------------------------------------------------------------------
def _as_i64(x: Any) -> np.ndarray | None:
    return None if x is None else np.asarray(x).astype(np.int64).ravel()


def _rows_written(kind: str, length: int, win: int, off: int) -> int:
    """Cache rows one compress task writes (contiguous from its slot); see golden.py."""
    if kind == "alibi":
        return win
    if off == -1 or win == 0:
        return length
    head = min(off, length)
    tail = max(0, length - off - win)
    mean = 1 if (kind == "rope" and min(off + win, length) > off) else 0
    return head + mean + tail


def _check_values(spec: C.ScenarioSpec, kind: str | None, tensors: Mapping, sizes: Mapping) -> None:
    rows = sizes["NB"] * sizes["BS"]
    slots = _as_i64(tensors["slot_mapping"])
    if spec.compress_kind is None:
        bad = np.flatnonzero(slots >= rows)
        if bad.size:
            i = int(bad[0])
            raise _fail(C.STATUS_INVALID, f"slot_mapping[{i}] = {slots[i]} must lie in [0, num_blocks*"
                                          f"block_size - 1] = [0, {rows - 1}] (negative slots are skipped)")
        return
    seq = _as_i64(tensors["seq_lens"])
    wins = _as_i64(tensors["compress_lens"])
    offs = _as_i64(tensors["compress_seq_offset"])
    heads = sizes["N"]
    batch_of = np.arange(slots.size) // heads
    lens = seq[batch_of]
    for rule in spec.value_rules:
        bad, text = _value_rule(rule, seq, wins, offs, lens, slots, kind, sizes, rows)
        if bad is not None:
            where = "" if bad == "sum" else f" (violated at index {bad})"
            raise _fail(C.STATUS_INVALID, f"scenario {spec.number}: {text}{where}")


def _first(mask: np.ndarray) -> int | None:
    idx = np.flatnonzero(mask)
    return int(idx[0]) if idx.size else None


def _value_rule(rule, seq, wins, offs, lens, slots, kind, sizes, rows):
    """Returns (first bad task index, "sum" for an aggregate rule, or None; rule text)."""
    if rule == "seq_lens_non_negative":
        return _first(seq < 0), "seq_lens values must be >= 0"
    if rule == "seq_lens_within_seq_len":
        bad = (seq < 0) | (seq > sizes["S"])
        return _first(bad), f"seq_lens values must lie in [0, seq_len={sizes['S']}]"
    if rule == "seq_lens_sum_is_num_tokens":
        total = int(seq.sum())
        return ("sum" if total != sizes["T"] else None), (
            f"sum(seq_lens) = {total} must equal key dim 0 = {sizes['T']} (seed 约束说明)")
    if rule == "compress_lens_within_seq_lens":
        return _first((wins < 0) | (wins > lens)), "compress_lens[b*num_head+h] must lie in [0, seq_lens[b]]"
    if rule == "seq_offset_strict":
        compressing = (wins != 0) & (offs != -1)
        bad = compressing & ((offs < 0) | (offs + wins > lens))
        return _first(bad), ("compress_seq_offset[i] must be -1 or in [0, seq_lens[b] - compress_lens[i]] "
                             "where compress_lens[i] != 0")
    if rule == "seq_offset_lenient":
        if offs is None:
            return None, ""
        return _first((wins != 0) & (offs < -1)), "compress_seq_offset values must be >= -1"
    if rule == "cache_capacity_formula":
        need = int((lens - wins).sum())
        return ("sum" if need > rows else None), (
            f"sum over tasks of (seq_lens[b] - compress_lens[i]) = {need} must be <= num_blocks*"
            f"block_size = {rows} (seed 约束说明)")
    if rule == "task_rows_in_range":
        for i, slot in enumerate(slots):
            off = -1 if offs is None else int(offs[i])
            n = _rows_written(kind, int(lens[i]), int(wins[i]), off)
            if slot >= 0 and n > 0 and slot + n > rows:
                return i, (f"slot_mapping[{i}] = {slot} plus the {n} rows its task writes must stay "
                           f"within num_blocks*block_size = {rows}")
        return None, ""
    raise AssertionError(f"unknown value rule {rule}")  # contract and validate out of step


# --- entry point ----------------------------------------------------------------------------------
def validate(key, key_cache, slot_mapping, value=None, value_cache=None, compress_lens=None,
             compress_seq_offset=None, seq_lens=None, cache_mode="Norm", scatter_mode="None",
             strides=None, offsets=None, soc_family: str = C.FAMILY_A2) -> ScatterPlan:
    """Check one call against the seed (and the real tiling) and describe it as a :class:`ScatterPlan`.

    *soc_family* is a family ("Ascend910B", "Ascend910_93", "Ascend910_95") or a CANN SoC name.
    Raises :class:`~npusim.errors.AclnnError`: 161001 for a null required tensor, 161002 for invalid
    parameters, 561002 for rank errors and tiling-only rules (contract.py module docstring).
    """
    support = _family_support(soc_family)
    tensors = {"key": key, "key_cache": key_cache, "slot_mapping": slot_mapping, "value": value,
               "value_cache": value_cache, "compress_lens": compress_lens,
               "compress_seq_offset": compress_seq_offset, "seq_lens": seq_lens}
    _check_required(tensors)
    present = {n: x for n, x in tensors.items() if x is not None}
    shapes = {n: _shape_of(x, n) for n, x in present.items()}
    dtypes = {n: _dtype_of(x, n) for n, x in present.items()}
    _check_controls(tensors)
    _check_contiguous(tensors)
    cache_mode = _normalize_mode(cache_mode, "cache_mode", C.CACHE_MODES, C.DEFAULT_CACHE_MODE)
    scatter_mode = _normalize_mode(scatter_mode, "scatter_mode", C.SCATTER_MODES, C.DEFAULT_SCATTER_MODE)
    _check_dtypes(support, shapes, dtypes)
    _check_ranks(shapes)

    number = classify_scenario(key, value, cache_mode, scatter_mode, support.family)
    spec = C.SCENARIOS[number]
    if number not in support.scenarios:
        raise _fail(C.STATUS_TILING, f"scenario {number} is not supported on {support.family} "
                                     f"(seed: {support.product} 仅支持场景 "
                                     f"{', '.join(map(str, sorted(support.scenarios)))})")
    if not support.scatter_mode_effective:
        scatter_mode = C.DEFAULT_SCATTER_MODE
    _check_scatter_mode(spec, scatter_mode)
    _check_optionals(spec, tensors)
    dtype = dtypes["key"]
    _check_tiling("pre_shape", spec, support.family, shapes, dtype, {})
    prebound = {"L": C.NZ_FRACTAL_BYTES // dtype.itemsize} if spec.cache_mode == "PA_NZ" else {}
    sizes = _match_shapes(spec, shapes, prebound)
    if "T" not in sizes:
        sizes["T"] = sizes["B"] * sizes["S"]
    _check_tiling("post_shape", spec, support.family, shapes, dtype, sizes)

    stride_fields = {}
    if scatter_mode == "Nct" and support.strides_effective:
        ks, vs = _int_pair(strides, "strides")
        ko, vo = _int_pair(offsets, "offsets")
        stride_fields = {"key_stride": ks, "key_offset": ko}
        if spec.has_value:
            stride_fields.update(value_stride=vs, value_offset=vo)

    kind = spec.compress_kind
    if kind == "by_offset":
        kind = "rope" if compress_seq_offset is not None else "alibi"
    elif kind == "by_scatter_mode":
        kind = scatter_mode.lower()
    _check_values(spec, kind, tensors, sizes)

    nz = spec.cache_mode == "PA_NZ"
    compress = kind is not None
    return ScatterPlan(
        scenario=number, soc_family=support.family, cache_mode=spec.cache_mode,
        scatter_mode=scatter_mode, compress_kind=kind, has_value=spec.has_value, dtype=dtype,
        index_dtype=dtypes["slot_mapping"], elem_bytes=dtype.itemsize, num_tokens=sizes["T"],
        num_heads=sizes["N"], k_head_size=sizes["Dk"],
        v_head_size=(sizes.get("Dv", sizes["Dk"]) if spec.has_value else 0),
        num_blocks=sizes["NB"], block_size=sizes["BS"],
        batch=sizes.get("B", 0) if compress else 0, seq_len=sizes.get("S", 0),
        num_tasks=int(np.prod(shapes["slot_mapping"])),
        last_dim_k=sizes["L"] if nz else 0, last_dim_v=sizes["L"] if nz else 0,
        **stride_fields)
