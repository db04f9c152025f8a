"""Input validation of aclnnFlashAttentionUnpaddingScoreGradV5: walk ``contract.py``, return a :class:`FagProblem`.

Order (aclnn first stage, then host tiling): chip; null tensors and attributes (161001); tensor types,
dtypes, reserved inputs, layouts, head_num, ranks and shapes, control inputs and scalars (161002);
heads, seed limits, cumulative lengths; keep_prob, sparse_mode, rope bans, atten_mask, pse and
drop_mask; sparse-mode token and prefix rules. Shared steps come from ops/common/contract_checks.py
(the forward operator's rules, with this contract's texts and sources).

Choices where the seed is silent or ambiguous:
- softmax_max, softmax_sum and attention_in are "Optional" by name, but the backward recomputes P
  from them (tiling.md §3): None is refused with 161001.
- softmax_in_layout "" means the forward's per-batch layout: [N1, Sq, 8] blocks batch after batch,
  passed as an [N1, T1, 8] tensor (identical to NTD for one batch); "same_as_input" is [T1, N1, 8].
- pse_type 0/1 take only the seed's [B or 1, N1, 1024, maxSkv] (alibi-compressed) shape, with the
  forward's conditions (equal lengths, lower-triangular mask); 2/3 take fp32 slopes [B, N1] or [N1]
  and need Sq == Skv per batch (tiling.md §0). Without pse, pse_type must be 1 (seed L605).
- prefix outside sparse 6 is ignored, as the seed's own example passes prefix {0} with sparse 0.
- inner_precise is "暂未使用": any int64 is accepted. Mode rules apply only with an atten_mask, as in
  the forward; sparse_mode 5 or outside 0..8 is refused even without one.
- Rope: query_rope/key_in_rope are both given or both None, bf16, [T, N, Drope] with one Drope; they
  exclude dropout and sparse 6 (seed L225, L405).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ops.common.contract_checks import INT64_MAX, ContractChecks, f32, is_int, product, readonly
from ops.flash_attention_unpadding_score_grad_v5 import contract as C

_K = ContractChecks(C)
_fail = _K.fail


@dataclass(frozen=True, eq=False)
class FagProblem:
    """Everything tiling, kernel and golden need about one validated backward call.

    Field meanings follow the forward's FaVarLenProblem (batches, canonical left-up tokens, mask
    forms, dropout bits); in addition: *pse_type* (0-3) and *pse_form* ("none", "alibi" for types 0/1
    with the [B|1, N1, 1024, maxSkv] tensor, "slope" for types 2/3 with [B, N1] or [N1] fp32), the
    alibi position offsets *q_start*/*kv_start*, *rope_d* (0 without rope), *sink* (sink_in given),
    *softmax_in_layout* and the reads' shapes.
    """

    soc_family: str
    dtype: np.dtype
    T1: int
    T2: int
    B: int
    N1: int
    N2: int
    G: int
    D: int
    rope_d: int
    seq_q: np.ndarray
    seq_kv: np.ndarray
    cu_seq_q: np.ndarray
    cu_seq_kv: np.ndarray
    max_sq: int
    max_skv: int
    scale: float
    keep_prob: float
    pse_type: int
    pse_form: str
    pse_shape: tuple | None
    q_start: int
    kv_start: int
    dropout: bool
    drop_mask_bits: int
    drop_mask_bytes: int
    mask_form: str
    atten_mask_shape: tuple | None
    sparse_mode: int
    pre_tokens: int
    next_tokens: int
    pre_tokens_lu: np.ndarray
    next_tokens_lu: np.ndarray
    band_index: int
    prefix_n: np.ndarray | None
    sink: bool
    softmax_in_layout: str
    inner_precise: int

    @property
    def q_shape(self) -> tuple:
        return (self.T1, self.N1, self.D)

    @property
    def kv_shape(self) -> tuple:
        return (self.T2, self.N2, self.D)

    def asdict(self) -> dict:
        out = asdict(self)
        out["dtype"] = self.dtype.name
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in out.items()}


def _check_dtypes(dts: dict, pse_type: int) -> np.dtype:
    for name in ("query", "key_in", "value", "dy"):
        if dts[name] not in C.DATA_DTYPES:
            raise _fail("qkv_dtype", name, _K.dtype_name(dts[name]))
    q = dts["query"]
    for name in ("key_in", "value", "dy", "attention_in"):
        if dts[name] != q:
            raise _fail("qkv_same_dtype", name, f"{_K.dtype_name(dts[name])} with query {_K.dtype_name(q)}")
    for name in ("query_rope", "key_in_rope"):
        if name in dts and (dts[name] not in C.ROPE_DTYPES or q not in C.ROPE_DTYPES):
            raise _fail("rope_dtype", name, f"{_K.dtype_name(dts[name])} with query {_K.dtype_name(q)}")
    if "pse_shift" in dts:
        want = C.SLOPE_DTYPES if pse_type in (2, 3) else (q,)
        if dts["pse_shift"] not in want:
            raise _fail("pse_dtype", "pse_shift", f"{_K.dtype_name(dts['pse_shift'])} with pse_type {pse_type}, "
                                                  f"query {_K.dtype_name(q)}")
    for name, allowed, rule_name in (("drop_mask", C.DROP_MASK_DTYPES, "drop_mask_dtype"),
                                     ("atten_mask", C.ATTEN_MASK_DTYPES, "atten_mask_dtype"),
                                     ("softmax_max", C.SOFTMAX_DTYPES, "softmax_dtype"),
                                     ("softmax_sum", C.SOFTMAX_DTYPES, "softmax_dtype"),
                                     ("sink_in", C.SINK_DTYPES, "sink_dtype")):
        if name in dts and dts[name] not in allowed:
            raise _fail(rule_name, name, _K.dtype_name(dts[name]))
    return q


def _check_shapes(shapes: dict, n1: int, softmax_layout: str) -> int:
    """Ranks and the shapes tied to query's (161002); returns Drope (0 without rope)."""
    for name in ("query", "key_in", "value", "dy", "attention_in"):
        if len(shapes[name]) != 3:
            raise _fail("qkv_rank", name, str(shapes[name]))
    qs, ks, vs = shapes["query"], shapes["key_in"], shapes["value"]
    if not qs[2] == ks[2] == vs[2]:
        raise _fail("head_dim_equal", "key_in/value", f"D {qs[2]}, {ks[2]}, {vs[2]}")
    if ks != vs:
        raise _fail("kv_same_shape", "value", f"key_in {ks}, value {vs}")
    for name in ("dy", "attention_in"):
        if shapes[name] != qs:
            raise _fail("dy_shape", name, f"{shapes[name]}, query {qs}")
    rope_d = 0
    if ("query_rope" in shapes) != ("key_in_rope" in shapes):
        raise _fail("rope_shape", "query_rope/key_in_rope", "only one of them")
    if "query_rope" in shapes:
        qr, kr = shapes["query_rope"], shapes["key_in_rope"]
        ok = len(qr) == 3 and len(kr) == 3 and qr[:2] == qs[:2] and kr[:2] == ks[:2] and qr[2] == kr[2] >= 1
        if not ok:
            raise _fail("rope_shape", "query_rope/key_in_rope", f"{qr}, {kr} with query {qs}, key_in {ks}")
        rope_d = qr[2]
    t1 = qs[0]
    want = (t1, n1, 8) if softmax_layout == "same_as_input" else (n1, t1, 8)
    for name in ("softmax_max", "softmax_sum"):
        if shapes[name] != want:
            raise _fail("softmax_shape", name, f"{shapes[name]}, expected {want} for softmax_in_layout "
                                               f"{softmax_layout!r}")
    if "sink_in" in shapes and shapes["sink_in"] != (n1,):
        raise _fail("sink_shape", "sink_in", f"{shapes['sink_in']}, head_num {n1}")
    return rope_d


def _classify_pse(pse_type: int, shape: tuple, b: int, n1: int, max_skv: int) -> str:
    if pse_type in (2, 3):
        if shape in ((b, n1), (n1,)):
            return "slope"
        raise _fail("pse_shape", "pse_shift", f"{shape}; pse_type {pse_type} takes [{b}, {n1}] or [{n1}]")
    if len(shape) == 4 and shape[0] in (1, b) and shape[1:] == (n1, C.ALIBI_ROWS, max_skv):
        return "alibi"
    raise _fail("pse_shape", "pse_shift", f"{shape}; pse_type {pse_type} takes [{b} or 1, {n1}, {C.ALIBI_ROWS}, "
                                          f"{max_skv}]")


def _check_pse(form: str, mode: int | None, pre: int, nxt: int, sq, skv, q_start: int, kv_start: int) -> None:
    """pse rules of seed L601-L625 (*mode* None: no atten_mask, the mode is not in effect)."""
    if mode == 7:
        raise _fail("pse_not_mode7", "pse_shift")
    if mode == 8 and (sq != skv).any():
        raise _fail("pse_mode8_equal_lens", "pse_shift", f"Sq {sq.tolist()[:8]} Skv {skv.tolist()[:8]}")
    if form == "alibi":
        causal = mode in (2, 3) or (mode == 0 and pre >= int(sq.max()) and nxt == 0)
        if not causal or (sq != skv).any():
            raise _fail("pse_alibi_causal", "pse_shift", f"sparse_mode {mode} (None: no mask), pre {pre}, next {nxt}")
    else:
        if (sq != skv).any():
            raise _fail("pse_slope_equal_lens", "pse_shift", f"Sq {sq.tolist()[:8]} Skv {skv.tolist()[:8]}")
        if mode == 8 and int(sq[0]) - int(skv[0]) + q_start - kv_start != 0:
            raise _fail("pse_slope_mode8_start", "q_start_idx/kv_start_idx", f"{q_start}, {kv_start}")


def _start_idx(x: Any, name: str) -> int:
    if x is None:
        return 0
    arr = _K.int_seq(x, name, "start_idx_type")
    if arr.size != 1:
        raise _fail("start_idx_type", name, f"length {arr.size}")
    return int(arr[0])


def validate(query: Any, query_rope: Any, key_in: Any, key_in_rope: Any, value: Any, dy: Any,
             pse_shift: Any = None, drop_mask: Any = None, padding_mask: Any = None, atten_mask: Any = None,
             softmax_max: Any = None, softmax_sum: Any = None, softmax_in: Any = None, attention_in: Any = None,
             sink_in: Any = None, prefix: Any = None, actual_seq_qlen: Any = None, actual_seq_kvlen: Any = None,
             q_start_idx: Any = None, kv_start_idx: Any = None, scale_value: Any = C.DEFAULTS["scale_value"],
             keep_prob: Any = C.DEFAULTS["keep_prob"], pre_tokens: Any = C.DEFAULTS["pre_tokens"],
             next_tokens: Any = C.DEFAULTS["next_tokens"], head_num: Any = None, input_layout: Any = "TND",
             inner_precise: Any = C.DEFAULTS["inner_precise"], sparse_mode: Any = C.DEFAULTS["sparse_mode"],
             pse_type: Any = C.DEFAULTS["pse_type"], softmax_in_layout: Any = C.DEFAULTS["softmax_in_layout"],
             *, chip_spec: Any) -> FagProblem:
    """Check one call against the contract (seed 002) and describe it.

    Parameters are the seed's, in its order, snake_case; *chip_spec* is an ``npusim.ChipSpec`` or a
    preset name. Returns a :class:`FagProblem`; raises AclnnError (161001, 161002 or 561002, per
    ``contract.RULES``) for anything the real operator or the seed refuses, and nothing else.
    """
    family = _K.family(chip_spec)
    required = {"query": query, "key_in": key_in, "value": value, "dy": dy, "softmax_max": softmax_max,
                "softmax_sum": softmax_sum, "attention_in": attention_in}
    for name, x in required.items():
        if x is None:
            raise _fail("required_tensor", name)
    for name, v in (("head_num", head_num), ("input_layout", input_layout)):
        if v is None:
            raise _fail("required_attr", name)
    for name, v in (("actual_seq_qlen", actual_seq_qlen), ("actual_seq_kvlen", actual_seq_kvlen)):
        if v is None:
            raise _fail("required_seq_lens", name)
    optional = {"query_rope": query_rope, "key_in_rope": key_in_rope, "pse_shift": pse_shift,
                "drop_mask": drop_mask, "atten_mask": atten_mask, "sink_in": sink_in}
    tensors = {**required, **{k: v for k, v in optional.items() if v is not None}}
    shapes = {name: _K.shape(x, name) for name, x in tensors.items()}
    ptype = _K.int_(pse_type, "pse_type")
    dtype = _check_dtypes({name: _K.dtype(x, name) for name, x in tensors.items()}, ptype)
    for name, x in (("padding_mask", padding_mask), ("softmax_in", softmax_in)):
        if x is not None:
            raise _fail("reserved_none", name, type(x).__name__)

    if not isinstance(input_layout, str) or input_layout not in C.LAYOUTS:
        raise _fail("input_layout", "input_layout", repr(input_layout)[:50])
    if not isinstance(softmax_in_layout, str) or softmax_in_layout not in C.SOFTMAX_IN_LAYOUTS:
        raise _fail("softmax_in_layout", "softmax_in_layout", repr(softmax_in_layout)[:50])
    if not is_int(head_num) or not 0 < int(head_num) <= INT64_MAX:
        raise _fail("head_num_positive", "head_num", repr(head_num))
    n1 = int(head_num)
    rope_d = _check_shapes(shapes, n1, softmax_in_layout)

    cum_q = _K.int_seq(actual_seq_qlen, "actual_seq_qlen", "seq_lens_type")
    cum_kv = _K.int_seq(actual_seq_kvlen, "actual_seq_kvlen", "seq_lens_type")
    prefix_arr = None if prefix is None else _K.int_seq(prefix, "prefix", "prefix_type")
    q_start, kv_start = _start_idx(q_start_idx, "q_start_idx"), _start_idx(kv_start_idx, "kv_start_idx")
    scale, keep = _K.real(scale_value, "scale_value"), _K.real(keep_prob, "keep_prob")
    pre, nxt = _K.int_(pre_tokens, "pre_tokens"), _K.int_(next_tokens, "next_tokens")
    precise, mode = _K.int_(inner_precise, "inner_precise"), _K.int_(sparse_mode, "sparse_mode")
    if ptype not in C.PSE_TYPES:
        raise _fail("pse_type_value", "pse_type", str(ptype))
    if pse_shift is None and ptype != C.PSE_TYPE_NONE:
        raise _fail("pse_type_without_pse", "pse_type", str(ptype))

    qs, ks = shapes["query"], shapes["key_in"]
    _K.limit("N", "head_num", n1)
    if qs[1] != n1:
        raise _fail("query_heads_match_head_num", "query", f"dim 1 = {qs[1]}, head_num {n1}")
    n2 = ks[1]
    if n2 < 1 or n1 % n2:
        raise _fail("n1_multiple_of_n2", "key_in", f"N1 {n1}, N2 {n2}")
    _K.limit("D", "query", qs[2])
    t1, t2 = qs[0], ks[0]
    _K.limit("T", "query", t1)
    _K.limit("T", "key_in", t2)

    if cum_q.size != cum_kv.size:
        raise _fail("seq_lens_same_batch", "actual_seq_kvlen", f"{cum_q.size} vs {cum_kv.size}")
    b = cum_q.size
    _K.limit("B", "actual_seq_qlen", b)
    if prefix_arr is not None:
        _K.limit("B_prefix", "prefix", b)
    sq = _K.lengths(cum_q, t1, "actual_seq_qlen")
    skv = _K.lengths(cum_kv, t2, "actual_seq_kvlen")
    if ((sq > 0) & (skv == 0)).any():
        raise _fail("kv_len_nonzero", "actual_seq_kvlen", f"batch {int(np.argmax((sq > 0) & (skv == 0)))}")
    max_sq, max_skv = int(sq.max()), int(skv.max())

    keep32 = f32(keep)
    if not 0.0 < keep32 <= 1.0:
        raise _fail("keep_prob_range", "keep_prob", repr(keep_prob))
    if keep32 < 1.0 and drop_mask is None:
        raise _fail("keep_prob_needs_drop_mask", "drop_mask", f"None with keep_prob {keep_prob!r}")
    if mode not in C.SPARSE_MODES:
        raise _fail("sparse_mode_supported", "sparse_mode", str(mode))
    if rope_d and mode == 6:
        raise _fail("rope_not_mode6", "sparse_mode", "6 with query_rope")
    if rope_d and drop_mask is not None:
        raise _fail("rope_no_dropout", "drop_mask", "given with query_rope")

    mask_mode = None if atten_mask is None else mode
    band = -1
    if mask_mode in (7, 8):
        nz = np.flatnonzero(sq > 0)
        band = int(nz[-1] if mode == 7 else nz[0])
    if atten_mask is not None:
        _K.mask_shape(mode, shapes["atten_mask"], max_sq, max_skv)
    pse_form = "none"
    if pse_shift is not None:
        if (sq == 0).any():
            raise _fail("pse_no_empty_batch", "pse_shift", f"batch {int(np.argmax(sq == 0))} has Sq 0")
        pse_form = _classify_pse(ptype, shapes["pse_shift"], b, n1, max_skv)
        _check_pse(pse_form, mask_mode, pre, nxt, sq, skv, q_start, kv_start)
    drop_bits = n1 * int((sq * skv).sum())
    drop_bytes = -(-drop_bits // C.DROP_MASK_BITS_PER_BYTE)
    if drop_mask is not None and product(shapes["drop_mask"]) < drop_bytes:
        raise _fail("drop_mask_size", "drop_mask", f"{product(shapes['drop_mask'])} bytes < {drop_bytes}")

    prefix_n = None
    if mask_mode is not None:
        _K.tokens(mode, pre, nxt, sq, skv, band)
        if mode == 6:
            prefix_n = _K.prefix(prefix_arr, sq, skv)
    pre_lu, next_lu = _K.canonical_tokens(mask_mode, pre, nxt, sq, skv, band)

    return FagProblem(
        soc_family=family, dtype=dtype, T1=t1, T2=t2, B=b, N1=n1, N2=n2, G=n1 // n2, D=qs[2], rope_d=rope_d,
        seq_q=readonly(sq), seq_kv=readonly(skv),
        cu_seq_q=readonly(np.concatenate(([0], cum_q))), cu_seq_kv=readonly(np.concatenate(([0], cum_kv))),
        max_sq=max_sq, max_skv=max_skv, scale=f32(scale), keep_prob=keep32, pse_type=ptype, pse_form=pse_form,
        pse_shape=shapes.get("pse_shift"), q_start=q_start, kv_start=kv_start,
        dropout=drop_mask is not None, drop_mask_bits=drop_bits, drop_mask_bytes=drop_bytes,
        mask_form="none" if mask_mode is None else C.MASK_FORMS[mode], atten_mask_shape=shapes.get("atten_mask"),
        sparse_mode=mode, pre_tokens=pre, next_tokens=nxt, pre_tokens_lu=readonly(pre_lu),
        next_tokens_lu=readonly(next_lu), band_index=band,
        prefix_n=None if prefix_n is None else readonly(prefix_n), sink=sink_in is not None,
        softmax_in_layout=softmax_in_layout, inner_precise=precise,
    )
