"""The aclnn two-stage interface on top of an operator's Python function (API.md "aclnn facade").

``GetWorkspaceSize(..., out tensors)`` validates and tiles, returning ``(status, workspace_size,
executor)``; the second stage ``(workspace, workspace_size, executor, stream)`` runs the simulation and
writes the outputs into the caller's output arrays in place, returning the status.

Status-only contract (docs/errors.md): neither stage raises. Every failure is a status code, and
:func:`recent_error_message` (aclGetRecentErrMsg) tells why. Stage one checks the outputs (present,
writeable numpy arrays of the shape and dtype the call produces); stage two checks the executor (one of
this operator, not yet run), the workspace size (an integer >= the one stage one returned), that the
outputs are still writeable and that the control tensors (values that steer the kernel, e.g. a slot
mapping) are unchanged since stage one. A failure writes nothing to any output.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from npusim.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_ERR_RUNTIME_ERROR, AclnnError

ACL_SUCCESS = 0

_recent = {"message": ""}


def recent_error_message() -> str:
    """The message of the last failed facade call (CANN's aclGetRecentErrMsg); '' after a success."""
    return _recent["message"]


def _fail(status: int, message: str) -> int:
    _recent["message"] = f"[{status}] {message}"
    return status


@dataclass
class Executor:
    """What the first stage hands to the second: the prepared call and where its outputs go."""

    run: Callable[[], object]
    outputs: dict  # output name -> caller's numpy array (written in place)
    workspace_size: int
    used: bool = False
    result: object = None
    op: str = ""  # the operator whose stage one made it
    controls: dict = field(default_factory=dict)  # control name -> (caller's object, copy at stage one)


def _snapshot(controls: dict | None) -> dict:
    out = {}
    for name, value in (controls or {}).items():
        if isinstance(value, np.ndarray):
            out[name] = (value, value.copy())
        elif isinstance(value, (list, tuple)):
            out[name] = (value, list(value))
    return out


def _changed(snap: dict) -> str | None:
    for name, (obj, copy) in snap.items():
        if isinstance(obj, np.ndarray):
            if obj.shape != copy.shape or obj.dtype != copy.dtype or not np.array_equal(obj, copy, equal_nan=True):
                return name
        elif list(obj) != copy:
            return name
    return None


def first_stage(prepare: Callable[[], tuple[Callable[[], object], int]], outputs: dict, *,
                expected: Callable[[], dict] | None = None, controls: dict | None = None, op: str = ""):
    """Run *prepare* (validation + tiling); return ``(status, workspace_size, executor)``.

    *expected* (called after a successful prepare) gives ``{output name: (shape, dtype)}`` the call
    produces; *controls* the control tensors to hold unchanged until stage two; *op* names the operator.
    """
    for name, arr in outputs.items():
        if arr is None:
            return _fail(ACLNN_ERR_PARAM_NULLPTR, f"{name}: must not be None"), 0, None
        if not isinstance(arr, np.ndarray):
            return _fail(ACLNN_ERR_PARAM_INVALID, f"{name}: expected a numpy array, got {type(arr).__name__}"), 0, None
        if not arr.flags.writeable:
            return _fail(ACLNN_ERR_PARAM_INVALID, f"{name}: must be writeable (an output)"), 0, None
    try:
        run, workspace_size = prepare()
        for name, (shape, dtype) in (expected() if expected else {}).items():
            dst = outputs.get(name)
            if dst is not None and (dst.shape != tuple(shape) or dst.dtype != np.dtype(dtype)):
                raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"{name}: the call produces shape {tuple(shape)} "
                                                          f"{np.dtype(dtype)}, got {dst.shape} {dst.dtype}")
    except AclnnError as e:
        return _fail(e.status, e.message), 0, None
    except Exception as e:  # noqa: BLE001 - the facade returns statuses only (module docstring)
        return _fail(ACLNN_ERR_RUNTIME_ERROR, f"{type(e).__name__}: {e}"), 0, None
    _recent["message"] = ""
    return ACL_SUCCESS, int(workspace_size), Executor(run, outputs, int(workspace_size), op=op,
                                                      controls=_snapshot(controls))


def _check_size(workspace, workspace_size, need: int) -> str | None:
    if isinstance(workspace_size, (bool, np.bool_)) or not isinstance(workspace_size, numbers.Real):
        return f"workspaceSize: expected an integer, got {workspace_size!r}"
    if not np.isfinite(workspace_size) or workspace_size != int(workspace_size):
        return f"workspaceSize: expected an integer, got {workspace_size!r}"
    if workspace_size < need:
        return f"workspaceSize: {workspace_size} is less than the {need} bytes stage one asked for"
    if workspace is not None and (not isinstance(workspace, np.ndarray) or workspace.nbytes < need):
        return f"workspace: expected None or a numpy array of at least {need} bytes"
    return None


def second_stage(workspace, workspace_size, executor: Executor, stream=None, *, op: str = "") -> int:
    """Run the prepared call; copy its outputs into the caller's arrays; return the status."""
    if executor is None:
        return _fail(ACLNN_ERR_PARAM_NULLPTR, "executor: must not be None")
    if not isinstance(executor, Executor):
        return _fail(ACLNN_ERR_PARAM_INVALID, f"executor: expected an executor from stage one, got "
                                              f"{type(executor).__name__}")
    if op and executor.op and executor.op != op:
        return _fail(ACLNN_ERR_PARAM_INVALID, f"executor: made by {executor.op}GetWorkspaceSize, not {op}'s")
    if executor.used:
        return _fail(ACLNN_ERR_PARAM_INVALID, "executor: already run (an executor runs once)")
    problem = _check_size(workspace, workspace_size, executor.workspace_size)
    if problem:
        return _fail(ACLNN_ERR_PARAM_INVALID, problem)
    for name, dst in executor.outputs.items():
        if not dst.flags.writeable:
            return _fail(ACLNN_ERR_PARAM_INVALID, f"{name}: became read-only after stage one")
    changed = _changed(executor.controls)
    if changed:
        return _fail(ACLNN_ERR_PARAM_INVALID, f"{changed}: changed between the two stages (stage one validated "
                                              "other values)")
    executor.used = True
    try:
        res = executor.run()
    except AclnnError as e:
        return _fail(e.status, e.message)
    except Exception as e:  # noqa: BLE001 - the facade returns statuses only (module docstring)
        return _fail(ACLNN_ERR_RUNTIME_ERROR, f"{type(e).__name__}: {e}")
    executor.result = res
    produced = getattr(res, "outputs", None) or {}
    pending = []
    for name, dst in executor.outputs.items():
        src = produced.get(name)
        if src is None:
            continue
        if dst is src:  # written in place by the operator itself (ScatterPaKvCache's caches)
            continue
        if dst.shape != src.shape or dst.dtype != src.dtype:
            return _fail(ACLNN_ERR_PARAM_INVALID, f"{name}: shape {dst.shape} {dst.dtype}, the call produced "
                                                  f"{src.shape} {src.dtype}")
        pending.append((dst, src))
    for dst, src in pending:  # write only once every output is known to fit
        dst[...] = src
    _recent["message"] = ""
    return ACL_SUCCESS
