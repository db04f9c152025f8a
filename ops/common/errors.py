"""Raising the aclnn status codes with messages that name the parameter and the rule."""
from __future__ import annotations

from dataclasses import dataclass

from npusim.errors import (ACLNN_ERR_INNER_TILING_ERROR, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR,
                           AclnnError)


def nullptr(param: str, rule: str = "must not be None") -> AclnnError:
    """161001: a required tensor is missing."""
    return AclnnError(ACLNN_ERR_PARAM_NULLPTR, f"{param}: {rule}")


def invalid(param: str, rule: str) -> AclnnError:
    """161002: a parameter breaks a documented rule."""
    return AclnnError(ACLNN_ERR_PARAM_INVALID, f"{param}: {rule}")


def tiling_error(param: str, rule: str) -> AclnnError:
    """561002: a rule the real kernel enforces while tiling."""
    return AclnnError(ACLNN_ERR_INNER_TILING_ERROR, f"{param}: {rule}")


@dataclass(frozen=True)
class Rule:
    """One documented constraint of an operator contract: *name* (used in messages and test ids), the
    status code it fails with, the rule as shown in error messages, and its source."""

    name: str
    status: int
    text: str
    source: str
