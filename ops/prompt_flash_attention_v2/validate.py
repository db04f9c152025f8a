"""Input validation of aclnnPromptFlashAttentionV2: walk ``contract.py`` and return a :class:`PfaProblem`.

Order (as the real operator): chip; null pointers (161001); Python types; empty query (nothing to
do, checked before anything else as the aclnn layer does); the aclnn first stage (161002: product
restrictions, dtypes, layout, ranks, num_heads, D); then the host-tiling rules (561002) roughly in
the order of ``RunBigKernelTilingWithParams``: D equality, inner_precise, empty key/value, key/value
shapes, heads/GQA, batch and sequence limits, actual lengths, sparse mode, mask and pse shapes,
quantisation parameters, tokens (global, then per batch). Only the first violated rule is reported,
so with several violations the rule named may differ from the real operator's.

Inputs may be numpy arrays or any object with ``.shape`` and ``.dtype`` (timing mode): only shapes and
dtypes of tensors are read. ``actual_seq_lengths*`` are real int sequences (or None). Nothing else is
ever raised than :class:`~npusim.errors.AclnnError`; messages name the parameter and the rule
(``contract.RULES``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from npusim.errors import AclnnError
from ops.common import errors as E
from ops.common import layouts
from ops.common.masks import PFA_INT_MAX, canonical_tokens
from ops.prompt_flash_attention_v2 import contract as C

_TENSORS = ("query", "key", "value", "pse_shift", "atten_mask", "deq_scale1", "quant_scale1", "deq_scale2",
            "quant_scale2", "quant_offset2")
_MAKE = {C.NULLPTR: E.nullptr, C.INVALID: E.invalid, C.TILING: E.tiling_error}
_TOKEN_CLIP = 1 << 40  # far beyond any S (<= 20M checked first): token comparisons keep their outcome


@dataclass(frozen=True, eq=False)
class PfaProblem:
    """Everything tiling, kernel and golden need about one validated call (sizes in elements).

    Dims: ``batch`` B, ``num_heads`` N, ``num_kv_heads`` N_kv (G = N / N_kv), ``s1``/``s2`` the S axes of
    query and key/value, ``head_dim`` D and ``head_dim_padded`` (the aclnn layer pads D to 16, or 32 when
    any INT8 is involved, before the kernel runs). Per-batch int64 arrays [B]: ``actual_seq_lengths``
    (after "length 1 applies to all, >= B takes the first B"), ``actual_seq_lengths_kv``,
    ``computed_seq_lengths`` (query rows the kernel computes: the tiling drops rows that no key can
    reach), ``pre_tokens_lu``/``next_tokens_lu`` (left-up band per batch, masks.canonical_tokens).
    ``sparse_pre_tokens``/``sparse_next_tokens`` are the tiling's global preTokens/nextTokens.
    ``need_init``: the output must be zero-filled first (rows or batches are left uncomputed).
    ``query_empty``: nothing to do (the per-batch arrays are then empty); ``kv_empty``: S2 = 0, the
    output is all zeros.
    ``ignored_params``: parameters given but never read on this path (as the real operator).
    ``high_precision``: fp32 softmax path for fp16 (inner_precise bit0 == 0, or forced by pse);
    ``softmax_dtype`` the dtype of scores/softmax (tiling.md §1 dtype table); ``row_invalid_fix``:
    inner_precise bit1.
    """

    soc_family: str
    layout: str
    out_layout: str
    batch: int
    num_heads: int
    num_kv_heads: int
    group: int
    s1: int
    s2: int
    head_dim: int
    head_dim_padded: int
    query_shape: tuple
    key_shape: tuple
    out_shape: tuple
    dtype: np.dtype
    out_dtype: np.dtype
    actual_seq_lengths: np.ndarray
    actual_seq_lengths_kv: np.ndarray
    computed_seq_lengths: np.ndarray
    pre_tokens_lu: np.ndarray
    next_tokens_lu: np.ndarray
    sparse_mode: int
    pre_tokens: int
    next_tokens: int
    sparse_pre_tokens: int
    sparse_next_tokens: int
    inner_precise: int
    high_precision: bool
    softmax_dtype: np.dtype
    row_invalid_fix: bool
    scale_value: float
    scale_value_fp32: float
    actual_seq_lengths_given: bool = False
    actual_seq_lengths_kv_given: bool = False
    need_init: bool = False
    mask_kind: C.MaskKind = C.MaskKind.NONE
    mask_shape: tuple | None = None
    mask_dtype: np.dtype | None = None
    mask_batch: int = 0
    pse_shape: tuple | None = None
    pse_dtype: np.dtype | None = None
    quant_path: C.QuantPath = C.QuantPath.NONE
    deq_scale1_dtype: np.dtype | None = None
    deq_scale2_dtype: np.dtype | None = None
    quant_scale2_mode: C.ScaleMode | None = None
    quant_scale2_dtype: np.dtype | None = None
    has_quant_offset2: bool = False
    ignored_params: tuple = ()
    query_empty: bool = False
    kv_empty: bool = False

    @property
    def deq_scale1_encoding(self) -> str | None:
        """"uint64" (the Fixpipe FP19 word, NUMERICS.md), "fp32" or None."""
        return _encoding(self.deq_scale1_dtype)

    @property
    def deq_scale2_encoding(self) -> str | None:
        """As :attr:`deq_scale1_encoding` for deq_scale2."""
        return _encoding(self.deq_scale2_dtype)

    def asdict(self) -> dict:
        """Plain dict of the fields (dtypes as names, enums as strings, arrays as lists)."""
        out = asdict(self)
        for k, v in out.items():
            if isinstance(v, np.dtype):
                out[k] = v.name
            elif isinstance(v, (C.MaskKind, C.QuantPath, C.ScaleMode)):
                out[k] = str(v)
            elif isinstance(v, np.ndarray):
                out[k] = v.tolist()
        return out


def _encoding(dt):
    return None if dt is None else ("uint64" if dt == C.UINT64 else "fp32")


@dataclass(frozen=True)
class _T:
    """Shape and dtype of one tensor argument."""

    shape: tuple
    dtype: np.dtype

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


# --- small helpers ---------------------------------------------------------------------------------
def _fail(rule: str, param: str, detail: str) -> AclnnError:
    r = C.RULES[rule]
    return _MAKE[r.status](param, f"{detail} [rule {r.name}: {r.text}]")


def _dname(dt) -> str:
    return C.ACL_DTYPE_NAMES.get(dt, getattr(dt, "name", str(dt)))


def _tensor(x: Any, name: str) -> _T | None:
    if x is None:
        return None
    try:
        shape = tuple(x.shape)
        if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise TypeError
        dtype = np.dtype(x.dtype)
    except (AttributeError, TypeError, ValueError):
        raise _fail("tensor_type", name, f"expected a numpy array or an object with .shape and .dtype, "
                                         f"got {type(x).__name__}") from None
    return _T(tuple(int(d) for d in shape), dtype)


def _int64(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not C.INT64_MIN <= int(v) <= C.INT64_MAX:
        raise _fail("attr_type", name, f"expected an int64, got {v!r}")
    return int(v)


def _real(v: Any, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise _fail("attr_type", name, f"expected a float (double), got {v!r}")
    try:
        return float(v)
    except OverflowError:
        raise _fail("attr_type", name, f"{v!r} does not fit a double") from None


def _lengths(v: Any, name: str) -> np.ndarray | None:
    """An aclIntArray: None, or a 1-D sequence of int64; empty means "not given" (tiling)."""
    if v is None:
        return None
    if isinstance(v, np.ndarray):
        items = v.tolist() if v.ndim == 1 else None
    elif isinstance(v, (list, tuple)):
        items = list(v)
    else:
        items = None
    if items is None or not all(isinstance(i, (int, np.integer)) and not isinstance(i, bool)
                                and C.INT64_MIN <= int(i) <= C.INT64_MAX for i in items):
        raise _fail("actual_seq_lengths_type", name, f"expected a sequence of int64 or None, got {v!r}")
    return np.array([int(i) for i in items], dtype=np.int64) if items else None


def _per_batch(raw: np.ndarray | None, b: int, full: int, name: str, len_rule: str, range_rule: str) -> np.ndarray:
    """Seed rule: length 1 applies to every batch, length >= B takes the first B; values in [0, full]."""
    if raw is None:
        return np.full(b, full, dtype=np.int64)
    if 1 < raw.size < b:
        raise _fail(len_rule, name, f"has {raw.size} entries; must have 1 or >= batch ({b})")
    vals = np.full(b, raw[0], dtype=np.int64) if raw.size == 1 else raw[:b].copy()
    bad = np.flatnonzero((vals < 0) | (vals > full))
    if bad.size:
        i = int(bad[0])
        raise _fail(range_rule, name, f"[{i}] = {vals[i]} must lie in [0, {full}]")
    return vals


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.int64).copy()
    a.setflags(write=False)
    return a


def _product(chip_spec: Any) -> C.ProductSpec:
    family = getattr(chip_spec, "soc_family", None)
    product = C.product_of(family) if isinstance(family, str) else None
    if product is None:
        raise _fail("chip_supported", "chip_spec", f"soc_family {family!r} is not supported (supported: "
                                                   f"{', '.join(C.PRODUCTS)})")
    return product


# --- the aclnn first stage (161002) -----------------------------------------------------------------
def _check_product(product: C.ProductSpec, tensors: dict, lens: dict, attrs: dict) -> None:
    for name in product.null_only:
        given = lens[name] is not None if name in lens else tensors[name] is not None
        if given:
            raise _fail("product_null_only", name, f"must be None on {product.family} ({product.product})")
    for name, allowed in product.default_only.items():
        if attrs[name] not in allowed:
            raise _fail("product_default_only", name, f"= {attrs[name]} is not supported on {product.family} "
                                                      f"(only {', '.join(map(str, allowed))})")


def _check_dtypes(product: C.ProductSpec, t: dict, out_dtype: np.dtype) -> C.IoCombo:
    q = t["query"].dtype
    supported = sorted({c.qkv for c in product.io_combos}, key=str)
    if q not in supported:
        raise _fail("qkv_dtype", "query", f"dtype {_dname(q)} is not supported on {product.family} "
                                          f"(supported: {', '.join(map(_dname, supported))})")
    for name in ("key", "value"):
        if t[name].dtype != q:
            raise _fail("qkv_dtype_equal", name, f"dtype {_dname(t[name].dtype)} differs from query's {_dname(q)}")
    combo = C.io_combo(product, q, out_dtype)
    if combo is None:
        outs = [_dname(c.out) for c in product.io_combos if c.qkv == q]
        raise _fail("out_dtype", "out_dtype", f"{_dname(out_dtype)} is not supported for {_dname(q)} inputs "
                                              f"(supported: {', '.join(outs)})")
    if t["pse_shift"] is not None and t["pse_shift"].dtype != product.pse_dtypes.get(q):
        raise _fail("pse_dtype", "pse_shift", f"dtype {_dname(t['pse_shift'].dtype)} is not supported for "
                                              f"{_dname(q)} inputs")
    if t["atten_mask"] is not None and t["atten_mask"].dtype not in product.mask_dtypes:
        raise _fail("mask_dtype", "atten_mask", f"dtype {_dname(t['atten_mask'].dtype)} is not supported "
                                                f"(supported: {', '.join(map(_dname, product.mask_dtypes))})")
    checks = (("deq_scale1", "deq_scale_dtype", product.deq_scale_dtypes),
              ("deq_scale2", "deq_scale_dtype", product.deq_scale_dtypes),
              ("quant_scale1", "quant_scale1_dtype", product.quant_scale1_dtypes),
              ("quant_scale2", "quant_scale2_dtype", product.quant_scale2_dtypes.get(q, ())))
    for name, rule, allowed in checks:
        if t[name] is not None and t[name].dtype not in allowed:
            raise _fail(rule, name, f"dtype {_dname(t[name].dtype)} is not supported with {_dname(q)} inputs "
                                    f"(supported: {', '.join(map(_dname, allowed)) or 'none'})")
    if t["quant_offset2"] is not None and t["quant_scale2"] is not None \
            and t["quant_offset2"].dtype != t["quant_scale2"].dtype:
        raise _fail("quant_offset2_dtype", "quant_offset2", f"dtype {_dname(t['quant_offset2'].dtype)} differs "
                                                            f"from quant_scale2's {_dname(t['quant_scale2'].dtype)}")
    if t["quant_offset2"] is not None and t["quant_offset2"].dtype not in product.quant_scale2_dtypes.get(q, ()):
        raise _fail("quant_scale2_dtype", "quant_offset2", f"dtype {_dname(t['quant_offset2'].dtype)} is not "
                                                           f"supported with {_dname(q)} inputs")
    return combo


def _dims(layout: str, t: dict, n: int, n_kv_attr: int) -> tuple:
    """(B, N, S1, D), (B_kv, N_kv_shape, S2, D_k), D_v from the shapes (aclnn AnalysisAxis)."""
    want = 3 if layout == "BSH" else 4
    wrong = [name for name in ("query", "key", "value") if len(t[name].shape) != want]
    if wrong:  # named by the first tensor of the wrong rank
        raise _fail("layout_rank", wrong[0], f"layout {layout} needs {want}-D query/key/value, got shapes "
                                             f"{t['query'].shape}, {t['key'].shape}, {t['value'].shape}")
    if n <= 0:
        raise _fail("num_heads_positive", "num_heads", f"got {n}")
    if layout == "BSH":
        b, s1, h = t["query"].shape
        if h % n or h == 0:
            raise _fail("head_dim_split", "query", f"H = {h} is not a positive multiple of num_heads = {n}")
        n_kv = n_kv_attr if n_kv_attr > 0 else n
        bk, s2, hk = t["key"].shape
        d_k = hk // n_kv if hk % n_kv == 0 else -1
        d_v = t["value"].shape[2] // n_kv if t["value"].shape[2] % n_kv == 0 else -1
        return (b, n, s1, h // n), (bk, n_kv, s2, d_k), d_v
    q = layouts.parse_shape(layout, t["query"].shape, n)
    k = layouts.parse_shape(layout, t["key"].shape, n, "key")
    return q, k, layouts.parse_shape(layout, t["value"].shape, n, "value")[3]


# --- tiling rules (561002) -------------------------------------------------------------------------
def _check_mask_shape(mode: int, m: _T, b: int, s1: int, s2: int) -> int:
    """Returns the mask batch (1 or B); raises for a bad rank or shape."""
    if len(m.shape) not in (2, 3, 4):
        raise _fail("mask_rank", "atten_mask", f"got shape {m.shape}")
    if mode in C.FULL_MASK_MODES:
        mb = 1 if len(m.shape) == 2 else m.shape[0]
        ok = m.shape[-2] >= s1 and m.shape[-1] >= s2 and mb in (1, b) and (len(m.shape) < 4 or m.shape[1] == 1)
        if not ok:
            raise _fail("mask_shape_full", "atten_mask", f"shape {m.shape} does not cover B={b}, S1={s1}, S2={s2}")
        return mb
    if m.shape not in C.COMPRESSED_MASK_SHAPES:
        raise _fail("mask_shape_compressed", "atten_mask", f"got shape {m.shape} with sparse_mode {mode}")
    return 1


def _check_quant(combo: C.IoCombo, t: dict, n: int, d: int) -> tuple:
    """Required/forbidden/shape rules of the quant path; returns (q2 mode, offset given, ignored)."""
    rule = C.QUANT_RULES[combo.quant]
    for name in rule.forbidden:
        if t[name] is not None:
            raise _fail("quant_forbidden", name, f"must be None for {_dname(combo.qkv)} input and "
                                                 f"{_dname(combo.out)} output")
    for name in rule.required:
        if t[name] is None:
            raise _fail("quant_required", name, f"is required for {_dname(combo.qkv)} input and "
                                                f"{_dname(combo.out)} output")
        if t[name].size == 0:
            raise _fail("quant_not_empty", name, "is an empty tensor")
    for name in C.PER_TENSOR_ONLY:
        if name in rule.required and t[name].size != 1:
            raise _fail("per_tensor_scale", name, f"has {t[name].size} elements (shape {t[name].shape})")
    if "quant_scale2" not in rule.required:
        return None, False, rule.ignored
    q2, off = t["quant_scale2"], t["quant_offset2"]
    if q2.size not in (1, n * d):
        raise _fail("quant_scale2_shape", "quant_scale2", f"has {q2.size} elements; need 1 or N*D = {n * d}")
    mode = C.ScaleMode.PER_TENSOR if q2.size == 1 else C.ScaleMode.PER_CHANNEL
    if mode == C.ScaleMode.PER_CHANNEL and d % C.PER_CHANNEL_D_ALIGN:
        raise _fail("quant_per_channel_d_align", "quant_scale2", f"per-channel with D = {d}")
    if off is not None and off.shape != q2.shape:
        raise _fail("quant_offset2_shape", "quant_offset2", f"shape {off.shape} differs from quant_scale2's {q2.shape}")
    return mode, off is not None and off.size > 0, rule.ignored


def _tokens(mode: int, pre: int, nxt: int, has_mask: bool, int8_out: bool, offset_rows_check: bool,
            s1: int, s2: int, act_q: np.ndarray, act_kv: np.ndarray, q_given: bool) -> tuple:
    """Global and per-batch token rules (tiling order); returns the tiling's values."""
    im = PFA_INT_MAX
    sp, sn = {1: (im, im), 2: (im, 0), 3: (im, nxt)}.get(mode, (pre, nxt))
    if mode == 0 and not has_mask:
        sp, sn = im, im
    if mode == 4 and pre < 0 and nxt < 0:
        raise _fail("tokens_not_both_negative", "pre_tokens", f"pre_tokens = {pre}, next_tokens = {nxt} in band mode")
    if sp < 0 and sn < 0:
        raise _fail("tokens_not_both_negative", "pre_tokens", f"pre_tokens = {sp}, next_tokens = {sn}")
    if -sn > sp:
        raise _fail("tokens_order", "next_tokens", f"-next_tokens = {-sn} > pre_tokens = {sp}")
    if mode == 0 and sn < 0 and -sn >= s1:
        raise _fail("mode0_next_bound", "next_tokens", f"|{sn}| >= S1 = {s1}")
    if mode == 0 and sp < 0 and -sp >= s2:
        raise _fail("mode0_pre_bound", "pre_tokens", f"|{sp}| >= S2 = {s2}")
    sp, sn = min(sp, im), min(sn, im)
    if int8_out and mode == 4 and (sp < 0 or sn < 0):
        raise _fail("int8_out_band_negative", "pre_tokens", f"pre_tokens = {sp}, next_tokens = {sn}")

    def first(bad: np.ndarray):
        idx = np.flatnonzero(bad)
        return int(idx[0]) if idx.size else None

    spc, snc = max(sp, -_TOKEN_CLIP), max(sn, -_TOKEN_CLIP)
    if mode == 0 and q_given and (i := first((act_q != s1) & (snc < 0) & (-snc >= act_q))) is not None:
        raise _fail("mode0_next_bound", "next_tokens", f"|{sn}| >= actual_seq_lengths[{i}] = {act_q[i]}")
    if mode == 0 and (i := first((spc < 0) & (-spc >= act_kv))) is not None:
        raise _fail("mode0_pre_bound", "pre_tokens", f"|{sp}| >= actual_seq_lengths_kv[{i}] = {act_kv[i]}")
    pre_b, next_b = canonical_tokens(mode, max(pre, -_TOKEN_CLIP), max(nxt, -_TOKEN_CLIP), act_q, act_kv,
                                     has_mask, inference=True)
    pre_b = np.broadcast_to(np.asarray(pre_b, dtype=np.int64), act_q.shape)
    next_b = np.broadcast_to(np.asarray(next_b, dtype=np.int64), act_q.shape)
    uncomputed = (pre_b + act_kv - act_q < 0) | (next_b < 0)
    if offset_rows_check and (i := first(uncomputed)) is not None:
        raise _fail("int8_out_offset_rows", "quant_offset2",
                    f"batch {i}: sparse_mode {mode}, pre_tokens {pre}, next_tokens {nxt}, S1 {act_q[i]}, "
                    f"S2 {act_kv[i]} leave rows uncomputed")
    if mode == 4:
        if nxt < 0 and (i := first(-max(nxt, -_TOKEN_CLIP) >= act_kv)) is not None:
            raise _fail("band_next_bound", "next_tokens", f"|{nxt}| >= actual_seq_lengths_kv[{i}] = {act_kv[i]}")
        if pre < 0 and (i := first(-max(pre, -_TOKEN_CLIP) >= act_q)) is not None:
            raise _fail("band_pre_bound", "pre_tokens", f"|{pre}| >= actual_seq_lengths[{i}] = {act_q[i]}")
    reach = act_kv + (pre_b if mode == 4 else sp)
    computed = np.minimum(act_q, reach)
    return sp, sn, pre_b, next_b, computed, bool(np.any(uncomputed))


def _precision(product: C.ProductSpec, q: np.dtype, ip: int, pse_applied: bool) -> tuple:
    """(high_precision, softmax dtype, row_invalid_fix) (tiling innerPrecise handling, tiling.md §1)."""
    fix = ip != 4 and bool((ip >> 1) & 1)
    if q == C.BF16:
        return True, C.FP32, fix
    if q == C.INT8:
        return False, C.FP16, fix
    high = ip != 4 and ((ip & 1) == 0 or pse_applied)  # fp16 + pse is forced to high precision
    if product.family == C.FAMILY_310P:  # 310P: fp32 unless approximate (tiling comments)
        return high, (C.FP16 if ip == 4 else C.FP32), fix
    return high, (C.FP32 if high else C.FP16), fix


def _padded_d(d: int, any_int8: bool) -> int:
    step = C.PAD_D_ELEMS_INT8 if any_int8 else C.PAD_D_ELEMS
    return -(-d // step) * step


# --- entry point -------------------------------------------------------------------------------------
def validate(query, key, value, pse_shift=None, atten_mask=None, actual_seq_lengths=None,
             actual_seq_lengths_kv=None, deq_scale1=None, quant_scale1=None, deq_scale2=None,
             quant_scale2=None, quant_offset2=None, num_heads=None, scale_value=C.DEFAULTS["scale_value"],
             pre_tokens=C.DEFAULTS["pre_tokens"], next_tokens=C.DEFAULTS["next_tokens"],
             input_layout=C.DEFAULTS["input_layout"], num_key_value_heads=C.DEFAULTS["num_key_value_heads"],
             sparse_mode=C.DEFAULTS["sparse_mode"], inner_precise=C.DEFAULTS["inner_precise"], out_dtype=None,
             *, chip_spec, apply_pse_shift: bool = False) -> PfaProblem:
    """Validate one call (the seed's parameters in snake_case) on *chip_spec* (a ``npusim.ChipSpec``).

    *out_dtype* is attentionOut's dtype (None: query's). *apply_pse_shift*: V2 forces pseShift to
    nullptr (seed), so pse_shift is only dtype-checked and reported ignored; True applies it as the op
    prototype does. Raises AclnnError 161001/161002/561002 as ``contract.RULES`` states.
    """
    product = _product(chip_spec)
    for name, x in (("query", query), ("key", key), ("value", value), ("input_layout", input_layout),
                    ("num_heads", num_heads)):
        if x is None:
            raise _fail(f"{name}_required", name, "is None")
    args = dict(query=query, key=key, value=value, pse_shift=pse_shift, atten_mask=atten_mask,
                deq_scale1=deq_scale1, quant_scale1=quant_scale1, deq_scale2=deq_scale2,
                quant_scale2=quant_scale2, quant_offset2=quant_offset2)
    t = {name: _tensor(args[name], name) for name in _TENSORS}
    attrs = {name: _int64(v, name) for name, v in (("num_heads", num_heads), ("pre_tokens", pre_tokens),
             ("next_tokens", next_tokens), ("num_key_value_heads", num_key_value_heads),
             ("sparse_mode", sparse_mode), ("inner_precise", inner_precise))}
    scale = _real(scale_value, "scale_value")
    for name, v, typ in (("input_layout", input_layout, str), ("apply_pse_shift", apply_pse_shift, bool)):
        if not isinstance(v, typ):
            raise _fail("attr_type", name, f"expected a {typ.__name__}, got {v!r}")
    try:
        out_dt = t["query"].dtype if out_dtype is None else np.dtype(out_dtype)
    except (TypeError, ValueError):
        raise _fail("attr_type", "out_dtype", f"expected a numpy dtype, got {out_dtype!r}") from None
    lens = {name: _lengths(v, name) for name, v in (("actual_seq_lengths", actual_seq_lengths),
                                                    ("actual_seq_lengths_kv", actual_seq_lengths_kv))}
    n, n_kv_attr, mode, ip = (attrs[k] for k in ("num_heads", "num_key_value_heads", "sparse_mode", "inner_precise"))
    if t["query"].size == 0:  # aclnn: an empty attentionOut returns before any other check
        return _empty_problem(product, t, out_dt, attrs, scale, input_layout, None)

    # aclnn first stage (161002)
    _check_product(product, t, lens, attrs)
    combo = _check_dtypes(product, t, out_dt)
    if input_layout not in product.layouts:
        raise _fail("layout", "input_layout", f"got {input_layout!r} (supported: {', '.join(product.layouts)})")
    (b, n_q, s1, d), (b_kv, n_kv_shape, s2, d_k), d_v = _dims(input_layout, t, n, n_kv_attr)
    for name, dd in (("query", d), ("value", d_v)):
        if dd > product.limits.max_head_dim:
            raise _fail("head_dim_max", name, f"D = {dd}")

    # host tiling (561002)
    if d_k != d or d_v != d:
        raise _fail("head_dim_equal", "key", f"query D = {d}, key D = {d_k}, value D = {d_v} (-1: H not a "
                                             f"multiple of the key/value head count)")
    if ip not in product.inner_precise_values:
        raise _fail("inner_precise", "inner_precise", f"= {ip} on {product.family}")
    if t["key"].size == 0 or t["value"].size == 0:
        if C.INT8 in (t["query"].dtype, t["key"].dtype):
            raise _fail("empty_kv_int8", "key", "key/value are empty and the inputs are INT8")
        if input_layout != "BSH" and n_q != n:  # num_heads must name the query's N axis, empty K/V or not
            raise _fail("num_heads_match", "query", f"N axis = {n_q}, num_heads = {n}")
        _check_sizes(product, input_layout, b, n_q, d, s1, 0, dims_only=True)
        return _empty_problem(product, t, out_dt, attrs, scale, input_layout, (b, n, s1, d, s2))
    if t["key"].shape != t["value"].shape:
        raise _fail("kv_shape_equal", "value", f"shape {t['value'].shape} differs from key's {t['key'].shape}")
    n_kv = _check_heads(product, input_layout, n, n_kv_attr, n_kv_shape, t)
    if b != b_kv:
        raise _fail("batch_equal", "key", f"batch {b_kv} differs from query's {b}")
    _check_sizes(product, input_layout, b, n, d, s1, s2, q_dtype=combo.qkv)
    mask = t["atten_mask"]
    has_mask = mask is not None and mask.size > 0
    if has_mask and product.mask_seq_align and (s1 != s2 or s1 % product.mask_seq_align):
        raise _fail("mask_seq_aligned", "atten_mask", f"S1 = {s1}, S2 = {s2}")
    act_q = _per_batch(lens["actual_seq_lengths"], b, s1, "actual_seq_lengths",
                       "actual_seq_lengths_len", "actual_seq_lengths_range")
    act_kv = _per_batch(lens["actual_seq_lengths_kv"], b, s2, "actual_seq_lengths_kv",
                        "actual_seq_lengths_kv_len", "actual_seq_lengths_kv_range")
    if mode not in product.sparse_modes:
        raise _fail("sparse_mode", "sparse_mode", f"= {mode}")
    mask_batch = _check_mask_shape(mode, mask, b, s1, s2) if has_mask else 0
    pse = t["pse_shift"]
    pse_applied = apply_pse_shift and pse is not None and pse.size > 0
    if pse_applied and (len(pse.shape) != 4 or pse.shape[0] not in (1, b) or pse.shape[1] != n
                        or pse.shape[2] < s1 or pse.shape[3] < s2):
        raise _fail("pse_shape", "pse_shift", f"shape {pse.shape}; need [1|{b}, {n}, >={s1}, >={s2}]")
    if mode in C.MASK_REQUIRED_MODES and not has_mask:
        raise _fail("mask_required", "atten_mask", f"is None or empty with sparse_mode {mode}")
    q2_mode, has_off, ignored = _check_quant(combo, t, n, d)
    int8_out = combo.out == C.INT8
    sp, sn, pre_b, next_b, computed, uncomputed = _tokens(
        mode, attrs["pre_tokens"], attrs["next_tokens"], has_mask, int8_out, int8_out and has_off, s1, s2,
        act_q, act_kv, lens["actual_seq_lengths"] is not None)
    if pse is not None and not pse_applied:
        ignored = ignored + ("pse_shift",)
    int8_in = combo.qkv == C.INT8
    return PfaProblem(
        **_common(product, t, out_dt, attrs, scale, input_layout, pse_applied),
        batch=b, num_heads=n, num_kv_heads=n_kv, group=n // n_kv, s1=s1, s2=s2, head_dim=d,
        head_dim_padded=_padded_d(d, C.INT8 in (combo.qkv, combo.out)),
        actual_seq_lengths=_readonly(act_q), actual_seq_lengths_kv=_readonly(act_kv),
        computed_seq_lengths=_readonly(computed), pre_tokens_lu=_readonly(pre_b), next_tokens_lu=_readonly(next_b),
        sparse_pre_tokens=sp, sparse_next_tokens=sn,
        actual_seq_lengths_given=lens["actual_seq_lengths"] is not None,
        actual_seq_lengths_kv_given=lens["actual_seq_lengths_kv"] is not None,
        need_init=bool(uncomputed or np.any(act_q != s1) or np.any(act_kv != s2)),
        mask_kind=(C.MaskKind.NONE if not has_mask else
                   C.MaskKind.FULL if mode in C.FULL_MASK_MODES else C.MaskKind.COMPRESSED),
        mask_shape=mask.shape if has_mask else None, mask_dtype=mask.dtype if has_mask else None,
        mask_batch=mask_batch, pse_shape=pse.shape if pse_applied else None,
        pse_dtype=pse.dtype if pse_applied else None, quant_path=combo.quant,
        deq_scale1_dtype=t["deq_scale1"].dtype if int8_in else None,
        deq_scale2_dtype=t["deq_scale2"].dtype if int8_in else None,
        quant_scale2_mode=q2_mode, quant_scale2_dtype=t["quant_scale2"].dtype if q2_mode else None,
        has_quant_offset2=has_off, ignored_params=tuple(p for p in ignored if args[p] is not None))


def _check_heads(product, layout, n, n_kv_attr, n_kv_shape, t) -> int:
    if n_kv_attr < 0:
        raise _fail("num_kv_heads_nonnegative", "num_key_value_heads", f"= {n_kv_attr}")
    if n > product.limits.max_heads:
        raise _fail("num_heads_max", "num_heads", f"= {n} > {product.limits.max_heads}")
    n_kv = n_kv_attr or n
    if layout != "BSH":
        q_n = layouts.parse_shape(layout, t["query"].shape, n)[1]
        if q_n != n:
            raise _fail("num_heads_match", "query", f"N axis = {q_n}, num_heads = {n}")
        if n_kv_shape != n_kv:
            raise _fail("num_kv_heads_match", "key", f"N axis = {n_kv_shape}, num_key_value_heads = {n_kv_attr}")
    if n % n_kv:
        raise _fail("gqa_divisible", "num_key_value_heads", f"num_heads {n} % {n_kv} != 0")
    if n // n_kv > product.limits.max_group:
        raise _fail("gqa_group_max", "num_key_value_heads", f"G = {n // n_kv} > {product.limits.max_group}")
    return n_kv


def _check_sizes(product, layout, b, n, d, s1, s2, q_dtype=None, dims_only=False) -> None:
    lim = product.limits
    if b > lim.max_batch:
        raise _fail("batch_max", "query", f"B = {b} > {lim.max_batch}")
    if n > lim.max_heads:
        raise _fail("num_heads_max", "num_heads", f"= {n} > {lim.max_heads}")
    if dims_only:
        return
    for name, s in (("query", s1), ("key", s2)):
        if s > lim.max_seq:
            raise _fail("seq_max", name, f"S = {s} > {lim.max_seq}")
    if lim.max_hidden_exclusive and layout in C.HIDDEN_BOUND_LAYOUTS and n * d >= lim.max_hidden_exclusive:
        raise _fail("hidden_max", "query", f"N*D = {n * d} >= {lim.max_hidden_exclusive}")
    align = C.UNALIGNED_D_ELEMS.get(q_dtype)
    if lim.max_batch_unaligned_d and align and d % align and b > lim.max_batch_unaligned_d:
        raise _fail("batch_max_unaligned_d", "query", f"B = {b} > {lim.max_batch_unaligned_d} with D = {d}")


def _out_shape(layout: str, q_shape: tuple) -> tuple:
    if layout == "BNSD_BSND" and len(q_shape) == 4:
        return tuple(q_shape[i] for i in (0, 2, 1, 3))
    return tuple(q_shape)


def _fp32(x: float) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(x))


def _common(product, t, out_dt, attrs, scale, layout, pse_applied) -> dict:
    """Fields every problem has: chip, layout, shapes, dtypes, attributes, precision."""
    q, ip = t["query"], attrs["inner_precise"]
    if ip in product.inner_precise_values:
        high, smax, fix = _precision(product, q.dtype, ip, pse_applied)
    else:  # only an empty query gets here unchecked
        high, smax, fix = False, q.dtype, False
    return dict(soc_family=product.family, layout=layout,
                out_layout=layouts.output_layout(layout) if layout in layouts.PFA_LAYOUTS else layout,
                query_shape=q.shape, key_shape=t["key"].shape, out_shape=_out_shape(layout, q.shape),
                dtype=q.dtype, out_dtype=out_dt, sparse_mode=attrs["sparse_mode"], pre_tokens=attrs["pre_tokens"],
                next_tokens=attrs["next_tokens"], inner_precise=ip, high_precision=high, softmax_dtype=smax,
                row_invalid_fix=fix, scale_value=scale, scale_value_fp32=_fp32(scale))


def _empty_problem(product, t, out_dt, attrs, scale, layout, kv_dims) -> PfaProblem:
    """The problem of an empty call: nothing to compute (query; *kv_dims* None) or zeros (key/value,
    *kv_dims* = (B, N, S1, D, S2))."""
    if kv_dims is None:
        try:
            b, n, s1, d = layouts.parse_shape(layout, t["query"].shape, attrs["num_heads"])
        except AclnnError:  # an empty query is never checked: dims are best effort
            b = n = s1 = d = 0
        s2, nb = 0, 0
    else:
        (b, n, s1, d, s2), nb = kv_dims, kv_dims[0]
    n_kv = attrs["num_key_value_heads"] if attrs["num_key_value_heads"] > 0 else n
    zeros = _readonly(np.zeros(nb, dtype=np.int64))
    return PfaProblem(
        **_common(product, t, out_dt, attrs, scale, layout, False),
        batch=b, num_heads=n, num_kv_heads=n_kv, group=n // n_kv if n_kv else 0, s1=s1, s2=s2, head_dim=d,
        head_dim_padded=d, actual_seq_lengths=_readonly(np.full(nb, s1)), actual_seq_lengths_kv=zeros,
        computed_seq_lengths=zeros, pre_tokens_lu=zeros, next_tokens_lu=zeros, sparse_pre_tokens=PFA_INT_MAX,
        sparse_next_tokens=PFA_INT_MAX, need_init=kv_dims is not None, query_empty=kv_dims is None,
        kv_empty=kv_dims is not None)
