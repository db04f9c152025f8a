"""Input normalisation shared by every operator: one pass over the call before validate (ARCHITECTURE.md).

An operator declares its tensors once (:class:`InputContract`: which are data, which are control values
the host reads, which are updated in place, which must be contiguous per its seed) and decorates its
``prepare`` with :func:`normalized`. Before validation the decorator

- checks ``mode`` (161002) and ``tiling`` (None or a dict of int overrides; 161002 naming the key);
- turns lists/tuples given for data tensors into numpy arrays (validate then judges their dtype);
- refuses anything that is neither an array nor TensorSpec-like (``.shape`` + ``.dtype``) and arrays of
  non-numeric dtypes (object, str, complex, datetime, structured);
- in full mode refuses TensorSpec-like data tensors (no data to compute on), non-contiguous tensors the
  seed forbids (non-contiguous includes zero-stride broadcast views), read-only in-place outputs and
  in-place outputs that share memory with any other tensor of the call;
- refuses TensorSpec-like control tensors in every mode (their values steer the kernel).

Every refusal is AclnnError 161002 whose message starts with the parameter's name. In timing and
estimate modes an array stands for its shape and dtype only, so its strides are not judged there.
Nothing is copied except lists; a user's arrays are never written.
"""
from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from npusim.memory.gm import TensorSpec
from ops.common.errors import invalid

MODES = ("full", "timing", "estimate")
#: numpy dtype kinds no operator takes: object, str, bytes, complex, datetime, timedelta
_NON_NUMERIC_KINDS = frozenset("OUScMm")
#: Entries an aclIntArray parameter may have: far above every seed's batch limit, far below what the host
#: could walk entry by entry (a 2^31-entry zero-stride view once took 10 GB and minutes in validation)
MAX_INT_ARRAY = 1 << 20
#: np.shares_memory work bound: past it two tensors that might overlap are treated as overlapping
_OVERLAP_WORK = 1 << 20


@dataclass(frozen=True)
class InputContract:
    """The tensors of one operator's ``prepare`` and what its seed says about them.

    *data*: tensors computed on (TensorSpec-like allowed outside full mode). *control*: device tensors
    whose values steer the kernel (slot mappings), real in every mode. *int_arrays*: host aclIntArray
    parameters (sequence lengths): real, lists stay lists, at most MAX_INT_ARRAY entries.
    *inout*: data tensors written in place in full mode. *contiguous*: tensors the seed forbids
    non-contiguous (checked in full mode); *contiguous_rule* quotes the seed.
    """

    data: tuple[str, ...]
    control: tuple[str, ...] = ()
    int_arrays: tuple[str, ...] = ()
    inout: tuple[str, ...] = ()
    contiguous: tuple[str, ...] = ()
    contiguous_rule: str = ""
    mode_param: str = "mode"
    tiling_param: str = "tiling"


def _spec_like(x) -> bool:
    return not isinstance(x, np.ndarray) and hasattr(x, "shape") and hasattr(x, "dtype")


def _check_dtype(name: str, dtype) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise invalid(name, f"dtype {dtype!r} is not a numpy dtype") from None
    if dt.kind in _NON_NUMERIC_KINDS or dt.fields is not None or dt.type is np.void:
        raise invalid(name, f"dtype {dt} is not a tensor dtype of any operator (numbers and bool only)")
    return dt


def _as_spec(name: str, x) -> TensorSpec:
    """A TensorSpec-like object as a TensorSpec (shape of non-negative ints, a numeric dtype)."""
    try:
        shape = tuple(x.shape)
    except TypeError:
        raise invalid(name, f"shape {x.shape!r} is not a sequence of dimensions") from None
    if not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise invalid(name, f"shape {shape!r} must be non-negative integers")
    return TensorSpec(shape, _check_dtype(name, x.dtype))


def _as_array(name: str, x):
    """A list or tuple given for a tensor as a numpy array (a ragged or non-numeric one is refused)."""
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as exc:
        raise invalid(name, f"a {type(x).__name__} that is not a rectangular array of numbers ({exc})") from None
    _check_dtype(name, arr.dtype)
    return arr


def _tensor(name: str, x, control: bool):
    if x is None:
        return None
    if isinstance(x, np.ndarray):
        _check_dtype(name, x.dtype)
        return x
    if isinstance(x, (list, tuple)):
        return x if control else _as_array(name, x)
    if _spec_like(x):
        if control:
            raise invalid(name, f"must be real values (a numpy array or a list of ints): the kernel's control "
                                f"flow depends on them, got a data-less {type(x).__name__}")
        return _as_spec(name, x)
    kind = "a numpy array or a list of ints" if control else "a numpy array or a TensorSpec"
    raise invalid(name, f"expected {kind}, got {type(x).__name__}")


def _check_full(contract: InputContract, values: dict) -> None:
    """Full-mode rules: data present, seed contiguity, in-place outputs writeable and alone in memory."""
    for name in contract.data:
        x = values.get(name)
        if x is not None and not isinstance(x, np.ndarray):
            raise invalid(name, f"a {type(x).__name__} has no data; full mode needs a numpy array "
                                "(for data-less inputs use mode='estimate' or mode='timing')")
    for name in contract.contiguous:
        x = values.get(name)
        if isinstance(x, np.ndarray) and x.size > 1 and not x.flags["C_CONTIGUOUS"]:
            raise invalid(name, f"must be a C-contiguous array (strides {x.strides}): {contract.contiguous_rule}")
    arrays = [(n, values[n]) for n in contract.data + contract.control + contract.int_arrays
              if isinstance(values.get(n), np.ndarray)]
    for name in contract.inout:
        dst = values.get(name)
        if not isinstance(dst, np.ndarray) or dst.size == 0:
            continue
        if not dst.flags.writeable:
            raise invalid(name, "must be writeable: it is updated in place (got a read-only array or view)")
        for other, src in arrays:
            if other != name and src.size and _overlap(dst, src):
                raise invalid(name, f"shares memory with {other}; an in-place output must not alias another "
                                    "tensor of the call")


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=_OVERLAP_WORK))
    except getattr(np, "exceptions", np).TooHardError:  # numpy < 1.25 has it at the top level
        return True


def check_tiling(tiling, param: str = "tiling"):
    """None or a mapping of override name -> positive int (numpy ints accepted); a plain dict copy."""
    if tiling is None:
        return None
    if not isinstance(tiling, Mapping):
        raise invalid(param, f"expected a dict of tiling overrides or None, got {type(tiling).__name__}")
    out = {}
    for key, value in tiling.items():
        if not isinstance(key, str):
            raise invalid(param, f"override names are strings, got {key!r}")
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise invalid(f"{param}[{key!r}]", f"must be an int, got {value!r} ({type(value).__name__})")
        if value < 1:
            raise invalid(f"{param}[{key!r}]", f"must be >= 1, got {value}")
        out[key] = int(value)
    return out


def check_mode(mode, param: str = "mode") -> str:
    if not isinstance(mode, str) or mode not in MODES:
        raise invalid(param, f"must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def normalize(contract: InputContract, values: dict) -> dict:
    """The call's arguments (a name -> value dict) normalised per *contract*; raises AclnnError 161002."""
    out = dict(values)
    mode = check_mode(out.get(contract.mode_param, "full"), contract.mode_param)
    if contract.tiling_param in out:
        out[contract.tiling_param] = check_tiling(out[contract.tiling_param], contract.tiling_param)
    for name in contract.data:
        if name in out:
            out[name] = _tensor(name, out[name], control=False)
    for name in contract.control + contract.int_arrays:
        if name in out:
            out[name] = _tensor(name, out[name], control=True)
    for name in contract.int_arrays:
        n = np.size(out[name]) if isinstance(out.get(name), np.ndarray) else len(out.get(name) or ())
        if n > MAX_INT_ARRAY:
            raise invalid(name, f"an aclIntArray of {n:,} entries; at most {MAX_INT_ARRAY:,} (far above any batch "
                                "limit)")
    if mode == "full":
        _check_full(contract, out)
    return out


def normalized(contract: InputContract):
    """Decorator for an operator's ``prepare``: :func:`normalize` its arguments, then call it."""
    def wrap(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            bound.arguments.update(normalize(contract, bound.arguments))
            return fn(*bound.args, **bound.kwargs)

        call.input_contract = contract
        return call
    return wrap
