"""Independent loop reference of aclnnScatterPaKvCache: plain Python over tokens and tasks.

Used to check the simulator bit for bit (NUMERICS.md). It returns updated copies of the caches and
never touches its inputs. Cache rows are copied with numpy same-dtype assignment, a byte copy that
keeps every bit (NaN payloads included).

Semantics, and the choices where the seed is silent (research/oracles.md §6, tiling.md §5):
- Token scenarios 1, 2, 6 follow vLLM ``reshape_and_cache(_flash)``: token t goes to cache row
  ``slot_mapping[t]`` (block ``slot // block_size``, offset ``slot % block_size``); a negative slot
  is skipped and leaves the cache untouched. Duplicate slots are undefined in the seed; here the
  last token wins.
- Norm (scenarios 2, 6): ``cache[blk, off] = key[t]`` (shape [num_head, head_size]).
- PA_NZ (scenario 1): the token row ``key[t].reshape(num_head*head_size)`` is cut into chunks of
  ``last_dim = 32 // element size`` elements; chunk c goes to ``cache[blk, c, off, :]``, the
  FRACTAL_NZ layout of the op-plugin golden (oracles.md §6). V uses the same layout as K.
- Nct: ``key`` is the logical [num_tokens, num_head, head_size] view; numpy views carry their own
  strides, so token t is ``key[t]``, which is the storage range ``t*stride + offset`` that the real
  kernel reads when strides/offsets describe the view. Nct therefore gives the result of "None".
- Compress scenarios 3, 4, 5 work per task i = b*num_head + h on the token sequence of batch b and
  head h (3-D key: rows ``cum(seq_lens)[b] + j``; 4-D key: ``key[b, j]``; j < seq_lens[b]), writing
  consecutive rows from ``slot = slot_mapping[i]`` of a [num_blocks, block_size, 1, head_size] cache.
  A task with a negative slot is skipped. win = compress_lens[i], off = compress_seq_offset[i]:
  - Alibi: the last win tokens, ``tokens[L-win:]``, to rows slot.. (kernel compress_alibi.h).
  - Rope: off == -1 or win == 0: every token, no compression. Otherwise tokens[:off] to rows
    slot..; the mean of tokens[off:off+win] to row slot+off; tokens[off+win:] to rows slot+off+1..
    (ATB golden; kernel compress_rope.h). The window is clamped to the sequence (the 950 kernel
    does; the A2/A3 validation forbids windows that pass the end).
  - Omni: like Rope without the mean token: tokens[off+win:] go to rows slot+off.. (compress_omni.h).
  - Scenario 3 (950 class, 4-D key) is Rope when compress_seq_offset is given, else Alibi.
- The mean (:func:`mean_token`), as the kernels compute it: floating types accumulate in float32
  from 0 in token order, divide by float32(count) (IEEE, correctly rounded) and round to the dtype
  to nearest even (CAST_RINT; float32 is not re-rounded). A NaN mean (NaN or opposite infinities in
  the window) is the positive canonical quiet NaN, as every NaN the vector unit computes is
  (docs/numerics.md "Vector instructions", NaN); NaN being absorbing, one rewrite at the end
  suffices. Integer types (950 only) accumulate in
  int32 (signed 8/16-bit), uint32 (unsigned 8/16-bit) or the type itself (32-bit) with wraparound,
  divide truncating toward zero (assumed C semantics of the vector Div) and keep the low bits.
  HIFLOAT8 arrives as uint8 storage and is averaged as UINT8 (contract.py docstring); the real
  kernel averages it as hifloat8 with CAST_ROUND, which is not modelled.
"""
from __future__ import annotations

import numpy as np

from ops.scatter_pa_kv_cache.contract import (BF16, FP8_E4M3FN, FP8_E5M2, FP16, FP32, INT8, INT16,
                                              INT32, UINT8, UINT16, UINT32)

_FLOAT_DTYPES = (FP16, BF16, FP32, FP8_E5M2, FP8_E4M3FN)
# dtype -> (accumulator bits, signed) for the integer mean (arch35 rope kernel, KVReduceMean)
_INT_ACCUMULATORS = {INT8: (32, True), INT16: (32, True), UINT8: (32, False), UINT16: (32, False),
                     INT32: (32, True), UINT32: (32, False)}


def scatter_pa_kv_cache_golden(plan, key, key_cache, slot_mapping, value=None, value_cache=None, *,
                               compress_lens=None, compress_seq_offset=None, seq_lens=None):
    """Reference result of one validated call: ``(new_key_cache, new_value_cache)`` as copies.

    *plan* is the :class:`~ops.scatter_pa_kv_cache.validate.ScatterPlan` of the call (only its
    scenario, cache_mode and compress_kind are read; sizes come from the arrays). Without value
    (scenario 6) the second item is an unchanged copy of *value_cache* (None if it is None).
    """
    new_key_cache = np.array(key_cache, copy=True)
    new_value_cache = None if value_cache is None else np.array(value_cache, copy=True)
    pairs = [(key, new_key_cache)]
    if plan.has_value:
        pairs.append((value, new_value_cache))
    slots = [int(s) for s in np.asarray(slot_mapping).ravel()]
    for src, cache in pairs:
        if plan.compress_kind is None and plan.cache_mode == "PA_NZ":
            scatter_tokens_nz(src, cache, slots)
        elif plan.compress_kind is None:
            scatter_tokens_norm(src, cache, slots)
        else:
            offsets = None if compress_seq_offset is None else np.asarray(compress_seq_offset).ravel()
            scatter_compressed(plan.compress_kind, src, cache, slots,
                               np.asarray(compress_lens).ravel(), offsets, np.asarray(seq_lens).ravel())
    return new_key_cache, new_value_cache


def scatter_tokens_norm(src, cache, slots) -> None:
    """ND cache [num_blocks, block_size, num_head, head_size]: ``cache[slot]`` row = ``src[t]``."""
    block_size = cache.shape[1]
    for t, slot in enumerate(slots):
        if slot < 0:
            continue
        cache[slot // block_size, slot % block_size] = src[t]


def scatter_tokens_nz(src, cache, slots) -> None:
    """FRACTAL_NZ cache [num_blocks, num_head*head_size//last_dim, block_size, last_dim]."""
    _, chunks, block_size, last_dim = cache.shape
    for t, slot in enumerate(slots):
        if slot < 0:
            continue
        row = np.asarray(src[t]).reshape(-1)
        for c in range(chunks):
            cache[slot // block_size, c, slot % block_size, :] = row[c * last_dim:(c + 1) * last_dim]


def task_tokens(src, seq_lens, task: int, num_heads: int) -> list:
    """Token vectors [head_size] of task (b, h) = divmod(task, num_heads), in sequence order."""
    b, h = divmod(task, num_heads)
    length = int(seq_lens[b])
    if src.ndim == 4:  # scenario 3: [batch, seq_len, num_head, head_size]
        return [src[b, j, h] for j in range(length)]
    start = int(sum(int(n) for n in seq_lens[:b]))  # scenarios 4, 5: rows packed by batch
    return [src[start + j, h] for j in range(length)]


def compress_task_writes(kind: str, tokens: list, win: int, off: int) -> list:
    """``[(row offset from slot, vector)]`` one compress task writes (module docstring)."""
    length = len(tokens)
    if kind == "alibi":
        return [(j, tokens[length - win + j]) for j in range(win)]
    if off == -1 or win == 0:
        return list(enumerate(tokens))
    writes = list(enumerate(tokens[:off]))
    window, tail = tokens[off:off + win], tokens[off + win:]
    if kind == "rope":
        if window:
            writes.append((off, mean_token(window)))
        tail_start = off + 1
    elif kind == "omni":
        tail_start = off
    else:
        raise ValueError(f"unknown compress kind {kind!r}")
    writes.extend((tail_start + j, x) for j, x in enumerate(tail))
    return writes


def scatter_compressed(kind, src, cache, slots, wins, offsets, seq_lens) -> None:
    """Compress scenarios: cache [num_blocks, block_size, 1, head_size], one task per slot."""
    num_heads = src.shape[-2]
    rows = cache.reshape(-1, cache.shape[-1])  # a view: cache is a fresh C-contiguous copy
    for task, slot in enumerate(slots):
        if slot < 0:
            continue
        off = -1 if offsets is None else int(offsets[task])
        tokens = task_tokens(src, seq_lens, task, num_heads)
        for row_offset, vector in compress_task_writes(kind, tokens, int(wins[task]), off):
            row = slot + row_offset
            if not 0 <= row < rows.shape[0]:
                raise ValueError(f"task {task} writes row {row} outside the cache; validate first")
            rows[row] = vector


def mean_token(window: list) -> np.ndarray:
    """Mean of token vectors as the kernels compute it (module docstring), in their dtype."""
    dtype = np.asarray(window[0]).dtype
    count = len(window)
    if dtype in _FLOAT_DTYPES:
        acc = np.zeros(np.asarray(window[0]).shape, np.float32)
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, overflow: IEEE results wanted
            for x in window:
                acc = acc + np.asarray(x).astype(np.float32)  # float32 + float32: one IEEE rounding
            mean = acc / np.float32(count)  # IEEE division
        mean[np.isnan(mean)] = np.float32(np.nan)  # 0x7FC00000: numpy keeps payloads and signs, the NPU not
        return mean.astype(dtype)  # round to nearest even
    if dtype in _INT_ACCUMULATORS:
        bits, signed = _INT_ACCUMULATORS[dtype]
        acc = [0] * np.asarray(window[0]).size
        for x in window:
            acc = [_wrap(a + int(v), bits, signed) for a, v in zip(acc, np.asarray(x).ravel())]
        quotient = [_trunc_div(a, count) for a in acc]
        low_bits = [q & ((1 << (8 * dtype.itemsize)) - 1) for q in quotient]
        return np.array(low_bits, dtype=np.uint64).astype(f"u{dtype.itemsize}").view(dtype)
    raise NotImplementedError(f"mean of dtype {dtype} is not modelled")


def _wrap(value: int, bits: int, signed: bool) -> int:
    value &= (1 << bits) - 1
    if signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // b
    return q if a >= 0 else -q
