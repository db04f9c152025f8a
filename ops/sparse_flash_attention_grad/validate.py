"""Input validation of aclnnSparseFlashAttentionGrad: walk ``contract.py``, return an :class:`SfagProblem`.

Order (aclnn first stage, then host tiling): chip; missing tensors (161001); tensor types, dtypes,
layout, attribute types and values, ranks (161002); the tiling's shape rules (561002: K, sparse_mode,
N2, N1, D, Drope, softmax shapes); shape agreement, the seed's limits and the sequence lengths
(161002). Each failure raises AclnnError with the status of its contract Rule and a message naming
the parameter. An empty query returns at once after the type checks (seed 约束说明 '入参为空的场景处理').

Canonical form: BSND is TND with B equal batches, so problem, tiling, kernel and golden see tokens
[T1, N1, D] and [T2, 1, D] with per-batch offsets; softmax_max/sum (B,1,S1,G) and (1,T1,G) are both
[T1, G]; sparse_indices (B,S1,1,K) and (T1,1,K) are both [T1, K] (a view, never copied).

Choices where the seed is ambiguous (docs/sfag.md "Contract"):
- actual_seq_lengths_* are cumulative end offsets, the last equal to T (issue 11; the seed's
  '累加和与T1保持一致' example has one batch, where both readings agree); INT32 and INT64 both accepted,
  also as Python int sequences. In BSND they are ignored (the batch shapes decide).
- sparse_indices INT64 (table) and INT32 (the seed's example) are accepted; its values are data, never
  refused: docs/sfag.md "Index semantics" says what each value means.
- scale_value is a FLOAT32 attribute: stored rounded to float32.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from npusim.chip import chip as get_chip
from npusim.errors import AclnnError
from ops.common.errors import invalid, nullptr, tiling_error
from ops.sparse_flash_attention_grad import contract as C

_RAISERS = {161001: nullptr, 161002: invalid, 561002: tiling_error}
_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


@dataclass(frozen=True, eq=False)
class SfagProblem:
    """Everything tiling, kernel and golden need about one validated call.

    Tokens: query token t (0 <= t < T1) of batch b sits at ``cu_q[b] + s1``; its key rows are
    ``cu_kv[b] .. cu_kv[b] + seq_kv[b]``. *indices* [T1, K] int (a view of sparse_indices).
    *G* = N1 query heads share the one key/value head. *Dr* is 64 with rope tensors, else 0.
    """

    soc_family: str
    dtype: np.dtype
    layout: str
    B: int
    T1: int
    T2: int
    N1: int
    D: int
    Dr: int
    K: int
    seq_q: np.ndarray
    seq_kv: np.ndarray
    cu_q: np.ndarray
    cu_kv: np.ndarray
    indices: np.ndarray
    block_size: int
    sparse_mode: int
    scale: float
    deterministic: bool
    q_shape: tuple
    k_shape: tuple
    q_rope_shape: tuple | None
    k_rope_shape: tuple | None

    @property
    def G(self) -> int:
        return self.N1

    @property
    def rope(self) -> bool:
        return self.Dr > 0

    @property
    def empty(self) -> bool:
        """The seed's empty query: nothing to compute, zero gradients."""
        return self.T1 == 0

    @property
    def Dt(self) -> int:
        """D + Dr: the width of [Q | Q_rope] and [K | K_rope]."""
        return self.D + self.Dr

    def batch_of_tokens(self) -> np.ndarray:
        """Batch index of every query token [T1]."""
        return np.repeat(np.arange(self.B), self.seq_q)


def _fail(rule_name: str, param: str, detail: str = "") -> AclnnError:
    r = C.rule(rule_name)
    text = r.text + (f"; got {detail}" if detail else "") + f" [{C.OP_NAME} rule {r.name}: {r.source}]"
    return _RAISERS[r.status](param, text)


def _shape(x: Any, name: str) -> tuple:
    try:
        shape = tuple(x.shape)
        ok = all(isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) and d >= 0 for d in shape)
        np.dtype(x.dtype)
    except Exception:  # noqa: BLE001 - any object may stand in for a tensor: refuse whatever breaks
        ok = False
    if not ok:
        raise _fail("tensor_type", name, type(x).__name__)
    return tuple(int(d) for d in shape)


def _name(dt: np.dtype) -> str:
    return C.ACL_DTYPE_NAMES.get(dt, dt.name)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _family(chip_spec: Any) -> str:
    if isinstance(chip_spec, str):
        chip_spec = get_chip(chip_spec)
    family = getattr(chip_spec, "soc_family", None)
    if not isinstance(family, str) or family not in C.SUPPORTED_FAMILIES:
        product = C.UNSUPPORTED_PRODUCTS.get(family, "") if isinstance(family, str) else ""
        raise _fail("product_supported", "chip_spec", f"{family!r} {product}".strip())
    return family


def _seq(x: Any, name: str) -> np.ndarray:
    """Cumulative lengths as int64 from an INT32/INT64 1-D array or a sequence of ints."""
    if isinstance(x, np.ndarray):
        if x.ndim == 1 and np.dtype(x.dtype) in C.SEQ_LEN_DTYPES:
            return x.astype(np.int64)
    elif isinstance(x, (list, tuple, range)) and all(_is_int(v) and _INT64_MIN <= int(v) <= _INT64_MAX for v in x):
        return np.array([int(v) for v in x], dtype=np.int64).reshape(-1)
    raise _fail("seq_lens_type", name, f"{type(x).__name__} {getattr(x, 'dtype', '')}".strip())


def _lengths(cum: np.ndarray, total: int, name: str) -> np.ndarray:
    if cum.size == 0 or cum[0] < 0 or (cum[1:] < cum[:-1]).any() or cum[-1] != total:
        raise _fail("seq_lens_cumulative", name, f"{str(cum.tolist())[:120]} with T = {total}")
    return np.diff(cum, prepend=np.int64(0))


def validate(query, key, value, sparse_indices, d_out, out, softmax_max, softmax_sum,
             actual_seq_lengths_query=None, actual_seq_lengths_kv=None, query_rope=None, key_rope=None,
             scale_value=C.DEFAULTS["scale_value"], sparse_block_size=C.DEFAULTS["sparse_block_size"],
             layout=C.DEFAULTS["layout"], sparse_mode=C.DEFAULTS["sparse_mode"],
             pre_tokens=C.DEFAULTS["pre_tokens"], next_tokens=C.DEFAULTS["next_tokens"],
             deterministic=C.DEFAULTS["deterministic"], *, chip_spec="Ascend910B2") -> SfagProblem:
    """Check one call against the contract; return the canonical problem (see module docstring)."""
    family = _family(chip_spec)
    required = {"query": query, "key": key, "value": value, "sparse_indices": sparse_indices, "d_out": d_out,
                "out": out, "softmax_max": softmax_max, "softmax_sum": softmax_sum}
    for name, x in required.items():
        if x is None:
            raise _fail("required_tensor", name)
    tensors = dict(required, query_rope=query_rope, key_rope=key_rope)
    shapes = {n: _shape(x, n) for n, x in tensors.items() if x is not None}
    dts = {n: np.dtype(x.dtype) for n, x in tensors.items() if x is not None}
    data_names = [n for n in ("query", "key", "value", "d_out", "out", "query_rope", "key_rope") if n in dts]
    for n in data_names:
        if dts[n] not in C.DATA_DTYPES:
            raise _fail("data_dtype", n, _name(dts[n]))
    for n in data_names:
        if dts[n] != dts["query"]:
            raise _fail("same_dtype", n, f"{_name(dts[n])} with query {_name(dts['query'])}")
    for n in ("softmax_max", "softmax_sum"):
        if dts[n] not in C.SOFTMAX_DTYPES:
            raise _fail("softmax_dtype", n, _name(dts[n]))
    if dts["sparse_indices"] not in C.INDEX_DTYPES:
        raise _fail("index_dtype", "sparse_indices", _name(dts["sparse_indices"]))
    if not isinstance(sparse_indices, np.ndarray):
        raise _fail("tensor_type", "sparse_indices", f"{type(sparse_indices).__name__} (sparse_indices are "
                    "control data and must be a numpy array in every mode)")
    if not isinstance(layout, str) or layout not in C.LAYOUTS:
        raise _fail("layout", "layout", repr(layout)[:40])
    if isinstance(scale_value, (bool, np.bool_)) or not isinstance(scale_value, numbers.Real):
        raise _fail("scalar_type", "scale_value", repr(scale_value)[:40])
    for n, v in (("sparse_block_size", sparse_block_size), ("sparse_mode", sparse_mode),
                 ("pre_tokens", pre_tokens), ("next_tokens", next_tokens)):
        if not _is_int(v):
            raise _fail("scalar_type", n, repr(v)[:40])
    if not isinstance(deterministic, (bool, np.bool_)):
        raise _fail("scalar_type", "deterministic", repr(deterministic)[:40])
    if int(sparse_block_size) not in C.BLOCK_SIZES:
        raise _fail("block_size", "sparse_block_size", str(sparse_block_size))
    for n, v in (("pre_tokens", pre_tokens), ("next_tokens", next_tokens)):
        if int(v) != C.TOKENS_VALUE:
            raise _fail("tokens_value", n, str(v))
    if (query_rope is None) != (key_rope is None):
        raise _fail("rope_pair", "query_rope" if query_rope is None else "key_rope", "only one given")
    tnd = layout == "TND"
    rank = 3 if tnd else 4
    for n, shape in shapes.items():
        if len(shape) != rank:
            raise _fail("rank", n, f"shape {shape} for layout {layout}")
    if int(sparse_mode) not in C.SPARSE_MODES:
        raise _fail("sparse_mode", "sparse_mode", f"{sparse_mode} ({C.UNSUPPORTED_SPARSE_MODES.get(int(sparse_mode), 'unknown')})")
    if tnd:
        for n, x in (("actual_seq_lengths_query", actual_seq_lengths_query),
                     ("actual_seq_lengths_kv", actual_seq_lengths_kv)):
            if x is None:
                raise _fail("required_seq_lens", n)
    q, k = shapes["query"], shapes["key"]
    lead = q[:-2]  # (B, S1) or (T1,)
    if shapes["sparse_indices"][-1] != C.SELECTED_BLOCK_COUNT:
        raise _fail("selected_block_count", "sparse_indices", f"K = {shapes['sparse_indices'][-1]}")
    for n in ("key", "value", "key_rope", "sparse_indices"):
        if n in shapes and shapes[n][-2] != C.N2:
            raise _fail("n2_one", n, f"N2 = {shapes[n][-2]}")
    n1 = q[-2]
    if n1 not in C.N1_VALUES:
        raise _fail("n1_values", "query", f"N1 = {n1}")
    for n in ("query", "key", "value", "d_out", "out"):
        if shapes[n][-1] != C.HEAD_DIM:
            raise _fail("head_dim", n, f"D = {shapes[n][-1]}")
    for n in ("query_rope", "key_rope"):
        if n in shapes and shapes[n][-1] != C.ROPE_DIM:
            raise _fail("rope_dim", n, f"Drope = {shapes[n][-1]}")
    sm_want = (1, lead[0], n1) if tnd else (lead[0], 1, lead[1], n1)
    for n in ("softmax_max", "softmax_sum"):
        if shapes[n] != sm_want:
            raise _fail("softmax_shape", n, f"{shapes[n]}, expected {sm_want}")
    for n, want in (("out", q), ("d_out", q), ("value", k)):
        if shapes[n] != want:
            raise _fail("shape_match", n, f"{shapes[n]}, expected {want}")
    if "query_rope" in shapes:
        for n, base in (("query_rope", q), ("key_rope", k)):
            if shapes[n][:-1] != base[:-1]:
                raise _fail("shape_match", n, f"{shapes[n]} with {'query' if n == 'query_rope' else 'key'} {base}")
    if shapes["sparse_indices"][:-2] != lead:
        raise _fail("index_shape", "sparse_indices", f"{shapes['sparse_indices']} with query {q}")
    if tnd:
        t1, t2 = q[0], k[0]
        cq = _seq(actual_seq_lengths_query, "actual_seq_lengths_query")
        ckv = _seq(actual_seq_lengths_kv, "actual_seq_lengths_kv")
        if cq.size != ckv.size:
            raise _fail("seq_lens_batch", "actual_seq_lengths_kv", f"{ckv.size} entries, query has {cq.size}")
        if t1 == 0:
            return _empty(family, dts["query"], layout, shapes, sparse_block_size, sparse_mode, scale_value,
                          deterministic, n1)
        b = int(cq.size)
        if not 1 <= b <= C.MAX_B:
            raise _fail("limit_B", "actual_seq_lengths_query", f"B = {b}")
        seq_q = _lengths(cq, t1, "actual_seq_lengths_query")
        seq_kv = _lengths(ckv, t2, "actual_seq_lengths_kv")
    else:
        b, s1 = lead
        if k[0] != b:
            raise _fail("shape_match", "key", f"B = {k[0]}, query has B = {b}")
        if b * s1 == 0:
            return _empty(family, dts["query"], layout, shapes, sparse_block_size, sparse_mode, scale_value,
                          deterministic, n1)
        if not 1 <= b <= C.MAX_B:
            raise _fail("limit_B", "query", f"B = {b}")
        t1, t2 = b * s1, b * k[1]
        seq_q = np.full(b, s1, np.int64)
        seq_kv = np.full(b, k[1], np.int64)
    for n, seq in (("query", seq_q), ("key", seq_kv)):
        if int(seq.max()) > C.MAX_S or (not tnd and int(seq.min()) < 1):
            raise _fail("limit_S", n, f"S = {int(seq.max()) if int(seq.max()) > C.MAX_S else int(seq.min())}")
    if tnd and ((seq_q > 0) & (seq_kv == 0)).any():
        raise _fail("limit_S", "actual_seq_lengths_kv", "a batch with query tokens and S2 = 0")
    indices = sparse_indices.reshape(t1, C.SELECTED_BLOCK_COUNT)
    cu_q = np.concatenate(([0], np.cumsum(seq_q))).astype(np.int64)
    cu_kv = np.concatenate(([0], np.cumsum(seq_kv))).astype(np.int64)
    with np.errstate(over="ignore"):
        scale = float(np.float32(scale_value))
    dr = C.ROPE_DIM if query_rope is not None else 0
    return SfagProblem(family, dts["query"], layout, int(b), int(t1), int(t2), int(n1), C.HEAD_DIM, dr,
                       C.SELECTED_BLOCK_COUNT, seq_q, seq_kv, cu_q, cu_kv, indices, int(sparse_block_size),
                       int(sparse_mode), scale, bool(deterministic), q, k, shapes.get("query_rope"),
                       shapes.get("key_rope"))


def _empty(family, dtype, layout, shapes, block_size, sparse_mode, scale_value, deterministic, n1) -> SfagProblem:
    """The problem of an empty query: no tokens, outputs of the input shapes filled with zeros."""
    with np.errstate(over="ignore"):
        scale = float(np.float32(scale_value))
    zero = np.zeros(0, np.int64)
    return SfagProblem(family, dtype, layout, 0, 0, 0, int(n1), C.HEAD_DIM,
                       C.ROPE_DIM if "query_rope" in shapes else 0, C.SELECTED_BLOCK_COUNT, zero, zero,
                       np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros((0, C.SELECTED_BLOCK_COUNT), np.int64),
                       int(block_size), int(sparse_mode), scale, bool(deterministic), shapes["query"],
                       shapes["key"], shapes.get("query_rope"), shapes.get("key_rope"))
