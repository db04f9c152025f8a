"""The aclnn two-stage interface on top of an operator's Python function (API.md "aclnn facade").

``GetWorkspaceSize(..., out tensors)`` validates and tiles, returning ``(status, workspace_size,
executor)``; the second stage ``(workspace, workspace_size, executor, stream)`` runs the simulation and
writes the outputs into the caller's output arrays in place, returning the status. Failures return
their status code instead of raising.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from npusim.errors import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclnnError

ACL_SUCCESS = 0


@dataclass
class Executor:
    """What the first stage hands to the second: the prepared call and where its outputs go."""

    run: Callable[[], object]
    outputs: dict  # output name -> caller's numpy array (written in place)
    workspace_size: int
    used: bool = False
    result: object = None


def first_stage(prepare: Callable[[], tuple[Callable[[], object], int]], outputs: dict):
    """Run *prepare* (validation + tiling); return ``(status, workspace_size, executor)``."""
    for name, arr in outputs.items():
        if arr is None:
            return ACLNN_ERR_PARAM_NULLPTR, 0, None
        if not isinstance(arr, np.ndarray):
            return ACLNN_ERR_PARAM_INVALID, 0, None
    try:
        run, workspace_size = prepare()
    except AclnnError as e:
        return e.status, 0, None
    return ACL_SUCCESS, int(workspace_size), Executor(run, outputs, int(workspace_size))


def second_stage(workspace, workspace_size: int, executor: Executor, stream=None) -> int:
    """Run the prepared call; copy its outputs into the caller's arrays; return the status."""
    if executor is None or not isinstance(executor, Executor) or executor.used:
        return ACLNN_ERR_PARAM_NULLPTR if executor is None else ACLNN_ERR_PARAM_INVALID
    if workspace_size < executor.workspace_size:
        return ACLNN_ERR_PARAM_INVALID
    executor.used = True
    try:
        res = executor.run()
    except AclnnError as e:
        return e.status
    executor.result = res
    produced = getattr(res, "outputs", None) or {}
    pending = []
    for name, dst in executor.outputs.items():
        src = produced.get(name)
        if src is None:
            continue
        if dst.shape != src.shape or dst.dtype != src.dtype:
            return ACLNN_ERR_PARAM_INVALID
        pending.append((dst, src))
    for dst, src in pending:  # write only once every output is known to fit
        dst[...] = src
    return ACL_SUCCESS
