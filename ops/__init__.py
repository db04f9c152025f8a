"""The CANN transformer operators, run on the npusim chip model (API.md).

Each operator lives in its own package (api, validate, tiling, kernel, golden) and is exported here
once it is complete.
"""
from npusim.errors import AclnnError

__all__ = ["AclnnError"]
