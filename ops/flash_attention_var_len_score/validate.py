"""Input validation of aclnnFlashAttentionVarLenScore: walk ``contract.py``, return a :class:`FaVarLenProblem`.

Order (aclnn first stage, then host tiling): chip; null tensors and attributes (161001); tensor types,
dtypes, layout, head_num, ranks, D, control and scalar types (161002); heads, seed limits and the
cumulative lengths; keep_prob, sparse_mode, atten_mask, real_shift and drop_mask; the sparse-mode
token and prefix rules; the atten_mask data rule. Each failure raises AclnnError with the status of
its :class:`~ops.flash_attention_var_len_score.contract.Rule` and a message naming the parameter.

Tensors are numpy arrays or objects with ``.shape`` and ``.dtype`` (timing mode); only atten_mask data
is read (sparse 0/1, when it is an ndarray without zero strides). actual_seq_qlen, actual_seq_kvlen
and prefix are real int sequences (list, tuple, range or 1-D integer ndarray).

Choices where the seed is ambiguous or the real kernel disagrees with it:
- Products: A2 (seed L7) and A3 (the real kernel is registered for 910_93; the current CANN page
  marks A3 √). Other families (310P...) are refused with 161002, as scatter_pa_kv_cache does.
- sparse 3 with Sq > Skv: the seed (L84) gives it as an example of the automatic invalid-row switch,
  copied from FlashAttentionScore; the real varlen tiling refuses it ("s1 is larger than s2, exist
  invalid row") and the current CANN page says "配置为3时...需要满足每个batch的Sq<=Skv". Refused (561002).
  The automatic switch happens where the varlen kernel makes it: sparse 6 with prefix[b] == 0 and
  Sq > Skv (tiling VarLenGetPrefixNList).
- sparse 0 with a mask: the seed's sparse doc allows negative next_tokens; the varlen tiling refuses
  them ("there is no valid data block") and rows left empty by pre_tokens. Refused (561002).
- Mode rules (token checks, pse bans for 7/8, alibi's causal requirement) apply only with an
  atten_mask: without one "sparse_mode、preTokens、nextTokens参数不生效，固定为全计算" (seed L142).
  sparse_mode 5 or outside 0..8 is refused even without a mask (seed L86 lists the supported values).
- sparse 8 with real_shift: seed L146 (allowed when every Sq == Skv) wins over the sparse doc
  ("当前模式下不支持可选输入pse"). The band batch of 7/8 is the last/first batch with Sq > 0 (tiling).
- Full pse shape: the seed only describes the alibi form; the full form is the real TND one, a 1-D
  [N1*sum(Sq*Skv)] holding each batch's [N1, Sq, Skv] block in turn. Alibi: [B or 1, N1, 1024, maxSkv]
  (the last 1024 rows). The real kernel's [N1*sum(Skv)] form is undocumented and refused.
- atten_mask: only the seed's 2-D shapes (L57 and the sparse doc); the real 4-D and [T1, T2] forms are
  refused. A [maxSq, maxSkv] mask is read top-left per batch ([:Sq, :Skv], as the kernels' no-compress
  offset); a fully masked row there is refused (seed L143, 161002) when data is present.
- Limits "1M", "2K", "1K" read as 2**20, 2048, 1024. D limit: the seed's 512 (the kernel takes 768).
- Cumulative lengths must be >= 0, non-decreasing and end at T (the kernel clamps negative steps to 0
  and tolerates T > sum only in an EOD corner). keep_prob and scale are fp32 attributes: keep_prob is
  range-checked after rounding to float32, as the tiling does; scale is stored rounded to float32.
- inner_precise outside {0, 1, 2} is refused (seed L80-82 lists only those; the kernel ignores them).
- drop_mask: any shape with at least ceil(N1*sum(Sq*Skv)/8) bytes (tiling); used iff given, whatever
  keep_prob is. padding_mask (reserved, seed L55): only its dtype is checked.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ops.common.contract_checks import (INT64_MAX, ContractChecks, f32, full_row_batches, is_int, product,
                                        readonly)
from ops.flash_attention_var_len_score import contract as C

_INT64_MAX = INT64_MAX


@dataclass(frozen=True, eq=False)
class FaVarLenProblem:
    """Everything tiling, kernel and golden need about one validated call (lengths in elements).

    Batches: *seq_q*/*seq_kv* are per-batch lengths (int64, read-only, zero-length batches kept),
    *cu_seq_q*/*cu_seq_kv* their offsets into T (length B+1, starting at 0). Heads: query head h uses
    key/value head h // G. Masking (mask_form != "none"): row i, column j of batch b is computed iff
    ``-pre_tokens_lu[b] <= j - i <= next_tokens_lu[b]`` or ``j < prefix_n[b]`` (sparse 6), and, for
    mask_form "full", ``atten_mask[i, j] == 0``; tokens are left-up, +-INT32_MAX means unbounded.
    pse: "none", "full" (1-D, each batch's [N1, Sq, Skv] in turn) or "alibi" ([B|1, N1, 1024, maxSkv]:
    the last 1024 rows of a [B|1, N1, maxSq, maxSkv] pse whose batch b sits in its bottom-right
    [Sq, Skv] corner, seed L48 and oracles.md §2); order "add_then_scale": scale*(QK^T + pse).
    Dropout iff a drop_mask is given: bit k (little-endian within each byte) of the packed mask is the
    keep flag of element k of the concatenated per-batch [N1, Sq, Skv] blocks; *drop_mask_bytes* =
    ceil(drop_mask_bits / 8). *invalid_rows*[b]: batch b has a fully masked row (structurally);
    *invalid_row_calc*: the kernel's invalid-row computation is on (inner_precise 2 or automatic).
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
    seq_q: np.ndarray
    seq_kv: np.ndarray
    cu_seq_q: np.ndarray
    cu_seq_kv: np.ndarray
    max_sq: int
    max_skv: int
    scale: float
    keep_prob: float
    pse_form: str
    pse_shape: tuple | None
    pse_order: str
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
    inner_precise: int
    invalid_row_calc: bool
    invalid_row_auto: bool
    invalid_rows: np.ndarray

    @property
    def out_shape(self) -> tuple:
        """attention_out shape (T1, N1, D), same dtype as query (seed L94)."""
        return (self.T1, self.N1, self.D)

    @property
    def has_invalid_rows(self) -> bool:
        """True if some batch has a fully masked row."""
        return bool(self.invalid_rows.any())

    def asdict(self) -> dict:
        """Plain dict of the fields (arrays as lists, dtype as its name)."""
        out = asdict(self)
        out["dtype"] = self.dtype.name
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in out.items()}


# --- small helpers (shared with the backward operator: ops/common/contract_checks.py) -------------
_K = ContractChecks(C)
_fail, _shape, _dtype, _dtype_name = _K.fail, _K.shape, _K.dtype, _K.dtype_name
_int, _real, _int_seq, _family = _K.int_, _K.real, _K.int_seq, _K.family
_is_int, _f32, _product, _readonly, _full_row_batches = is_int, f32, product, readonly, full_row_batches

_check_limit, _lengths, _check_mask_shape = _K.limit, _K.lengths, _K.mask_shape
_check_tokens, _check_prefix, _canonical_tokens = _K.tokens, _K.prefix, _K.canonical_tokens


# --- checks ----------------------------------------------------------------------------------------
def _check_dtypes(dts: dict) -> np.dtype:
    """dtypes of the given tensors (seed L42-57, L107, L128); returns the query dtype."""
    for name in ("query", "key", "value"):
        if dts[name] not in C.DATA_DTYPES:
            raise _fail("qkv_dtype", name, _dtype_name(dts[name]))
    if not dts["query"] == dts["key"] == dts["value"]:
        raise _fail("qkv_same_dtype", "key/value",
                    ", ".join(_dtype_name(dts[n]) for n in ("query", "key", "value")))
    q = dts["query"]
    if "real_shift" in dts and (dts["real_shift"] not in C.PSE_DTYPES or dts["real_shift"] != q):
        raise _fail("pse_dtype", "real_shift", f"{_dtype_name(dts['real_shift'])} with query {_dtype_name(q)}")
    for name, allowed, rule_name in (("drop_mask", C.DROP_MASK_DTYPES, "drop_mask_dtype"),
                                     ("padding_mask", C.PADDING_MASK_DTYPES, "padding_mask_dtype"),
                                     ("atten_mask", C.ATTEN_MASK_DTYPES, "atten_mask_dtype")):
        if name in dts and dts[name] not in allowed:
            raise _fail(rule_name, name, _dtype_name(dts[name]))
    return q


def _classify_pse(shape: tuple, n1: int, sq: np.ndarray, skv: np.ndarray, max_skv: int) -> str:
    """"full" or "alibi" (seed L48; tiling TND pse shapes), else pse_shape."""
    full_len = n1 * int((sq * skv).sum())
    if shape == (full_len,):
        return "full"
    if len(shape) == 4 and shape[0] in (1, len(sq)) and shape[1:] == (n1, C.ALIBI_ROWS, max_skv):
        return "alibi"
    raise _fail("pse_shape", "real_shift", f"{shape}; full [{full_len}] or alibi "
                                           f"[{len(sq)} or 1, {n1}, {C.ALIBI_ROWS}, {max_skv}]")


def _check_pse(form: str, mode: int | None, pre: int, nxt: int, sq: np.ndarray, skv: np.ndarray) -> None:
    """pse rules of seed L48, L144-146 (*mode* None: no atten_mask, the mode is not in effect)."""
    if mode == 7:
        raise _fail("pse_not_mode7", "real_shift")
    if mode == 8 and (sq != skv).any():
        raise _fail("pse_mode8_equal_lens", "real_shift", f"Sq {sq.tolist()[:8]} Skv {skv.tolist()[:8]}")
    if form == "alibi":
        causal = mode in (2, 3) or (mode == 0 and pre >= int(sq.max()) and nxt == 0)
        if not causal or (sq != skv).any():
            raise _fail("pse_alibi_causal", "real_shift", f"sparse_mode {mode} (None: no mask), "
                                                          f"pre {pre}, next {nxt}")


# --- entry point ------------------------------------------------------------------------------------
def validate(query: Any, key: Any, value: Any, real_shift: Any = None, drop_mask: Any = None,
             padding_mask: Any = None, atten_mask: Any = None, prefix: Any = None,
             actual_seq_qlen: Any = None, actual_seq_kvlen: Any = None,
             scale_value: Any = C.DEFAULTS["scale_value"], keep_prob: Any = C.DEFAULTS["keep_prob"],
             pre_tokens: Any = C.DEFAULTS["pre_tokens"], next_tokens: Any = C.DEFAULTS["next_tokens"],
             head_num: Any = None, input_layout: Any = None,
             inner_precise: Any = C.DEFAULTS["inner_precise"], sparse_mode: Any = C.DEFAULTS["sparse_mode"],
             *, chip_spec: Any) -> FaVarLenProblem:
    """Check one call against the contract (seed 001) and describe it.

    Parameters are the seed's, in its order, snake_case; *chip_spec* is an ``npusim.ChipSpec`` (or a
    preset name). Returns a :class:`FaVarLenProblem`; raises AclnnError (161001, 161002 or 561002, per
    ``contract.RULES``) for anything the real operator or the seed refuses, and nothing else.
    """
    family = _family(chip_spec)
    tensors = {"query": query, "key": key, "value": value}
    for name, x in tensors.items():
        if x is None:
            raise _fail("required_tensor", name)
    for name, v in (("head_num", head_num), ("input_layout", input_layout)):
        if v is None:
            raise _fail("required_attr", name)
    for name, v in (("actual_seq_qlen", actual_seq_qlen), ("actual_seq_kvlen", actual_seq_kvlen)):
        if v is None:
            raise _fail("required_seq_lens", name)
    optional = {"real_shift": real_shift, "drop_mask": drop_mask, "padding_mask": padding_mask,
                "atten_mask": atten_mask}
    tensors.update({k: v for k, v in optional.items() if v is not None})
    shapes = {name: _shape(x, name) for name, x in tensors.items()}
    dtype = _check_dtypes({name: _dtype(x, name) for name, x in tensors.items()})

    # aclnn layer: layout, head_num, ranks, head dims (161002)
    if not isinstance(input_layout, str) or input_layout not in C.LAYOUTS:
        raise _fail("input_layout", "input_layout", repr(input_layout)[:50])
    if not _is_int(head_num) or not 0 < int(head_num) <= _INT64_MAX:
        raise _fail("head_num_positive", "head_num", repr(head_num))
    n1 = int(head_num)
    for name in ("query", "key", "value"):
        if len(shapes[name]) != 3:
            raise _fail("qkv_rank", name, str(shapes[name]))
    qs, ks, vs = shapes["query"], shapes["key"], shapes["value"]
    if not qs[2] == ks[2] == vs[2]:
        raise _fail("head_dim_equal", "key/value", f"D {qs[2]}, {ks[2]}, {vs[2]}")
    if ks != vs:
        raise _fail("kv_same_shape", "value", f"key {ks}, value {vs}")

    # control inputs and scalars (161002)
    cum_q = _int_seq(actual_seq_qlen, "actual_seq_qlen", "seq_lens_type")
    cum_kv = _int_seq(actual_seq_kvlen, "actual_seq_kvlen", "seq_lens_type")
    prefix_arr = None if prefix is None else _int_seq(prefix, "prefix", "prefix_type")
    scale = _real(scale_value, "scale_value")
    keep = _real(keep_prob, "keep_prob")
    pre, nxt = _int(pre_tokens, "pre_tokens"), _int(next_tokens, "next_tokens")
    precise, mode = _int(inner_precise, "inner_precise"), _int(sparse_mode, "sparse_mode")
    if precise not in C.INNER_PRECISE_VALUES:
        raise _fail("inner_precise_value", "inner_precise", str(precise))

    # heads and dims
    _check_limit("N", "head_num", n1)
    if qs[1] != n1:
        raise _fail("query_heads_match_head_num", "query", f"dim 1 = {qs[1]}, head_num {n1}")
    n2 = ks[1]
    if n2 < 1 or n1 % n2:
        raise _fail("n1_multiple_of_n2", "key", f"N1 {n1}, N2 {n2}")
    _check_limit("D", "query", qs[2])
    t1, t2 = qs[0], ks[0]
    _check_limit("T", "query", t1)
    _check_limit("T", "key", t2)

    # batches
    if cum_q.size != cum_kv.size:
        raise _fail("seq_lens_same_batch", "actual_seq_kvlen", f"{cum_q.size} vs {cum_kv.size}")
    b = cum_q.size
    _check_limit("B", "actual_seq_qlen", b)
    if prefix_arr is not None:
        _check_limit("B_prefix", "prefix", b)
    sq = _lengths(cum_q, t1, "actual_seq_qlen")
    skv = _lengths(cum_kv, t2, "actual_seq_kvlen")
    if ((sq > 0) & (skv == 0)).any():
        raise _fail("kv_len_nonzero", "actual_seq_kvlen", f"batch {int(np.argmax((sq > 0) & (skv == 0)))}")
    max_sq, max_skv = int(sq.max()), int(skv.max())

    # scalars the tiling checks
    keep32 = _f32(keep)
    if not 0.0 < keep32 <= 1.0:
        raise _fail("keep_prob_range", "keep_prob", repr(keep_prob))
    if mode not in C.SPARSE_MODES:
        raise _fail("sparse_mode_supported", "sparse_mode", str(mode))

    # optional tensors
    mask_mode = None if atten_mask is None else mode  # the mode is in effect only with a mask
    band = -1
    if mask_mode in (7, 8):
        nz = np.flatnonzero(sq > 0)
        band = int(nz[-1] if mode == 7 else nz[0])
    if atten_mask is not None:
        _check_mask_shape(mode, shapes["atten_mask"], max_sq, max_skv)
    pse_form = "none"
    if real_shift is not None:
        if (sq == 0).any():
            raise _fail("pse_no_empty_batch", "real_shift", f"batch {int(np.argmax(sq == 0))} has Sq 0")
        pse_form = _classify_pse(shapes["real_shift"], n1, sq, skv, max_skv)
        _check_pse(pse_form, mask_mode, pre, nxt, sq, skv)
    drop_bits = n1 * int((sq * skv).sum())
    drop_bytes = -(-drop_bits // C.DROP_MASK_BITS_PER_BYTE)
    if drop_mask is not None and _product(shapes["drop_mask"]) < drop_bytes:
        raise _fail("drop_mask_size", "drop_mask", f"{_product(shapes['drop_mask'])} bytes < {drop_bytes}")

    # sparse-mode rules (only with a mask: seed L142)
    prefix_n = None
    if mask_mode is not None:
        _check_tokens(mode, pre, nxt, sq, skv, band)
        if mode == 6:
            prefix_n = _check_prefix(prefix_arr, sq, skv)
        if mode in (0, 1) and isinstance(atten_mask, np.ndarray) and 0 not in atten_mask.strides:
            full = _full_row_batches(atten_mask, sq, skv)
            if full.any():
                raise _fail("atten_mask_no_full_row", "atten_mask", f"batch {int(np.argmax(full))}")

    # canonical tokens and invalid rows
    pre_lu, next_lu = _canonical_tokens(mask_mode, pre, nxt, sq, skv, band)
    invalid_rows = (sq > 0) & ((skv == 0) | (sq - skv > pre_lu) | (next_lu < 0) | (pre_lu + next_lu < 0))
    if prefix_n is not None:
        invalid_rows &= prefix_n == 0
    auto = bool(invalid_rows.any()) and precise != C.INNER_PRECISE_INVALID_ROW

    return FaVarLenProblem(
        soc_family=family, dtype=dtype, T1=t1, T2=t2, B=b, N1=n1, N2=n2, G=n1 // n2, D=qs[2],
        seq_q=_readonly(sq), seq_kv=_readonly(skv),
        cu_seq_q=_readonly(np.concatenate(([0], cum_q))), cu_seq_kv=_readonly(np.concatenate(([0], cum_kv))),
        max_sq=max_sq, max_skv=max_skv, scale=_f32(scale), keep_prob=keep32,
        pse_form=pse_form, pse_shape=shapes.get("real_shift"), pse_order=C.PSE_ORDER,
        dropout=drop_mask is not None, drop_mask_bits=drop_bits, drop_mask_bytes=drop_bytes,
        mask_form="none" if mask_mode is None else C.MASK_FORMS[mode], atten_mask_shape=shapes.get("atten_mask"),
        sparse_mode=mode, pre_tokens=pre, next_tokens=nxt,
        pre_tokens_lu=_readonly(pre_lu), next_tokens_lu=_readonly(next_lu), band_index=band,
        prefix_n=None if prefix_n is None else _readonly(prefix_n),
        inner_precise=precise, invalid_row_calc=precise == C.INNER_PRECISE_INVALID_ROW or auto,
        invalid_row_auto=auto, invalid_rows=_readonly(invalid_rows),
    )
