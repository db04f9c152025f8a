"""Validation steps shared by the TND attention operators (forward varlen and its backward).

Why: FlashAttentionVarLenScore and FlashAttentionUnpaddingScoreGradV5 check the same things the same
way (tensor-likes, int/real attributes, aclIntArray cumulative lengths, sparse-mode token and prefix
rules, canonical left-up tokens, fully masked rows); only their contracts (rule texts, sources,
status codes, limits) differ. :class:`ContractChecks` binds these steps to one operator's contract
module, which must define ``OP_NAME``, ``rule(name)``, ``INT32_MAX``, ``LIMITS``, ``SPARSE_MODES``,
``SUPPORTED_FAMILIES``, ``UNSUPPORTED_PRODUCTS`` and ``ACL_DTYPE_NAMES``. Every failure is an
AclnnError with the rule's status, naming the parameter and the rule.
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from npusim.chip import chip as get_chip
from npusim.errors import AclnnError
from ops.common.errors import invalid, nullptr, tiling_error

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
_RAISERS = {161001: nullptr, 161002: invalid, 561002: tiling_error}


def is_int(v: Any) -> bool:
    """A Python or numpy integer that is not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def f32(v: float) -> float:
    """*v* rounded to float32 (the attribute type of scale_value and keep_prob)."""
    with np.errstate(over="ignore"):
        return float(np.float32(v))


def product(shape: tuple) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def readonly(a: np.ndarray) -> np.ndarray:
    """An int64 (or bool) copy of *a* that cannot be written."""
    a = np.array(a, dtype=np.int64) if a.dtype != np.bool_ else np.array(a)
    a.flags.writeable = False
    return a


def full_row_batches(mask: np.ndarray, sq: np.ndarray, skv: np.ndarray) -> np.ndarray:
    """Batches whose top-left [Sq, Skv] slice of a [maxSq, maxSkv] mask has a row of all ones."""
    free = np.asarray(mask) == 0
    first_free = np.where(free.any(axis=1), free.argmax(axis=1), mask.shape[1])
    reach = np.maximum.accumulate(first_free)  # reach[r]: longest all-ones row prefix among rows <= r
    nonempty = (sq > 0) & (skv > 0)
    return nonempty & (reach[np.maximum(sq - 1, 0)] >= skv)


class ContractChecks:
    """The shared validation steps, failing with the rules of contract module *contract*."""

    def __init__(self, contract):
        self.C = contract

    def fail(self, rule_name: str, param: str, detail: str = "") -> AclnnError:
        """The AclnnError of *rule_name* (status from the contract), naming *param* and the rule."""
        r = self.C.rule(rule_name)
        text = f"{r.text}" + (f"; got {detail}" if detail else "") + f" [{self.C.OP_NAME} rule {r.name}: {r.source}]"
        return _RAISERS[r.status](param, text)

    # --- tensors and attributes -------------------------------------------------------------------
    def shape(self, x: Any, name: str) -> tuple:
        try:
            shape = tuple(x.shape)
            ok = all(is_int(d) and d >= 0 for d in shape)
        except Exception:  # any object may stand in for a tensor: refuse whatever breaks
            ok = False
        if not ok:
            raise self.fail("tensor_type", name, type(x).__name__)
        return tuple(int(d) for d in shape)

    def dtype(self, x: Any, name: str) -> np.dtype:
        try:
            return np.dtype(x.dtype)
        except Exception:
            raise self.fail("tensor_type", name, f"dtype {getattr(x, 'dtype', None)!r}") from None

    def dtype_name(self, dt: np.dtype) -> str:
        return self.C.ACL_DTYPE_NAMES.get(dt, dt.name)

    def int_(self, v: Any, name: str) -> int:
        if not is_int(v) or not INT64_MIN <= int(v) <= INT64_MAX:
            raise self.fail("scalar_type", name, repr(v))
        return int(v)

    def real(self, v: Any, name: str) -> float:
        try:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
                raise TypeError
            return float(v)
        except (TypeError, ValueError, OverflowError):
            raise self.fail("scalar_type", name, repr(v)[:50]) from None

    def int_seq(self, x: Any, name: str, rule_name: str) -> np.ndarray:
        """A 1-D int64 array from a list/tuple/range/ndarray of ints (an aclIntArray)."""
        if isinstance(x, np.ndarray):
            if x.ndim == 1 and x.dtype.kind in "iu" and (x.size == 0 or int(x.max()) <= INT64_MAX):
                return x.astype(np.int64)
        elif isinstance(x, (list, tuple, range)):
            if all(is_int(v) and INT64_MIN <= int(v) <= INT64_MAX for v in x):
                return np.array([int(v) for v in x], dtype=np.int64).reshape(-1)
        raise self.fail(rule_name, name, f"{type(x).__name__} {x!r}"[:200])

    def family(self, chip_spec: Any) -> str:
        """SoC family of a ChipSpec (or a preset name); refuse families without this operator."""
        if isinstance(chip_spec, str):
            chip_spec = get_chip(chip_spec)  # raises AclnnError(161002) for an unknown name
        family = getattr(chip_spec, "soc_family", None)
        if not isinstance(family, str) or family not in self.C.SUPPORTED_FAMILIES:
            product_name = self.C.UNSUPPORTED_PRODUCTS.get(family, "") if isinstance(family, str) else ""
            raise self.fail("product_supported", "chip_spec", f"{family!r} {product_name}".strip())
        return family

    def limit(self, key: str, name: str, value: int) -> None:
        lim = self.C.LIMITS[key]
        if not lim.lo <= value <= lim.hi:
            raise self.fail(lim.rule, name, str(value))

    # --- sequence lengths, masks, tokens ------------------------------------------------------------
    def lengths(self, cum: np.ndarray, total: int, name: str) -> np.ndarray:
        """Per-batch lengths from cumulative *cum* covering *total* rows."""
        if cum[0] < 0 or (cum[1:] < cum[:-1]).any():  # compared, not differenced: no int64 wrap-around
            raise self.fail("seq_lens_cumulative", name, str(cum.tolist())[:200])
        if cum[-1] > total:
            raise self.fail("t_covers_seq_lens", name, f"last {int(cum[-1])} > T {total}")
        if cum[-1] != total:
            raise self.fail("seq_lens_end_at_t", name, f"last {int(cum[-1])} != T {total}")
        return np.diff(cum, prepend=np.int64(0))

    def mask_shape(self, mode: int, shape: tuple, max_sq: int, max_skv: int) -> None:
        want = self.C.SPARSE_MODES[mode].mask_shape or (max_sq, max_skv)
        if shape != want:
            raise self.fail("atten_mask_shape", "atten_mask", f"{shape} for sparse_mode {mode}, expected {want}")

    def tokens(self, mode: int, pre: int, nxt: int, sq: np.ndarray, skv: np.ndarray, band: int) -> None:
        """The varlen tiling's sparse-mode token rules (tiling.md §0)."""
        big = self.C.INT32_MAX
        nonempty = (sq > 0) & (skv > 0)
        pre_c = int(np.clip(pre, -big, big))  # |S| <= 2**20: clipping keeps every comparison
        nxt_c = int(np.clip(nxt, -big, big))
        if mode == 0:
            if pre >= int(sq.max()) and (nxt == 0 or nxt >= int(skv.max())):
                return  # causal or full band (tiling shortcuts)
            if nxt < 0 or (nonempty & (skv + pre_c < sq)).any() or (pre < 0 and nxt < -pre):
                raise self.fail("mode0_tokens", "pre_tokens/next_tokens", f"pre {pre}, next {nxt}")
        elif mode == 3:
            if (sq > skv).any():
                raise self.fail("mode3_sq_le_skv", "actual_seq_qlen", f"batch {int(np.argmax(sq > skv))}")
        elif mode == 4:
            if pre < 0 or (nxt < 0 and pre + nxt < 0) or (nonempty & (sq - nxt_c > skv)).any():
                raise self.fail("mode4_tokens", "pre_tokens/next_tokens", f"pre {pre}, next {nxt}")
        elif mode == 7:
            if (pre < skv[band] or nxt > 0 or (nonempty & (sq > skv)).any()
                    or sq[band] - nxt_c > skv[band]):
                raise self.fail("mode7_tokens", "pre_tokens/next_tokens",
                                f"pre {pre}, next {nxt}, band batch {band}")
        elif mode == 8:
            if pre < skv[band] or sq[band] - nxt_c > skv[band]:
                raise self.fail("mode8_tokens", "pre_tokens/next_tokens",
                                f"pre {pre}, next {nxt}, band batch {band}")

    def prefix(self, prefix: np.ndarray | None, sq: np.ndarray, skv: np.ndarray) -> np.ndarray:
        """sparse 6 prefix: one value per batch, in [0, Skv] if Sq > Skv, else in [Skv - Sq, Skv]."""
        if prefix is None or prefix.shape != sq.shape:
            got = "None" if prefix is None else f"length {prefix.size}, B {sq.size}"
            raise self.fail("mode6_prefix", "prefix", got)
        lo = np.where(sq > skv, 0, skv - sq)
        bad = (prefix < lo) | (prefix > skv)
        if bad.any():
            b = int(np.argmax(bad))
            raise self.fail("mode6_prefix", "prefix",
                            f"prefix[{b}] = {int(prefix[b])} outside [{int(lo[b])}, {int(skv[b])}]")
        return prefix

    def canonical_tokens(self, mode: int | None, pre: int, nxt: int, sq: np.ndarray, skv: np.ndarray,
                         band: int) -> tuple:
        """Per-batch left-up (pre, next) of tiling.md §0 / oracles.md §0, clipped to +-INT32_MAX."""
        big_v = self.C.INT32_MAX
        n = sq.size
        big = np.full(n, big_v, dtype=np.int64)
        pre_c, nxt_c = (int(np.clip(v, -big_v, big_v)) for v in (pre, nxt))
        rd_pre, rd_next = pre_c + sq - skv, nxt_c + skv - sq  # right-down origin -> left-up
        if mode in (None, 1):
            pre_lu, next_lu = big, big.copy()
        elif mode == 0:
            pre_lu, next_lu = np.full(n, pre_c, dtype=np.int64), np.full(n, nxt_c, dtype=np.int64)
        elif mode in (2, 8):
            pre_lu, next_lu = big, np.zeros(n, dtype=np.int64)
        elif mode in (3, 6, 7):
            pre_lu, next_lu = big, skv - sq
        else:  # 4
            pre_lu, next_lu = rd_pre, rd_next
        if mode in (7, 8):
            pre_lu[band], next_lu[band] = rd_pre[band], rd_next[band]
        return np.clip(pre_lu, -big_v, big_v), np.clip(next_lu, -big_v, big_v)
