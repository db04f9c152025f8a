"""Problem parameters the attention and cache operators share on the command line (npusim.registry).

Names for dtypes and sparse modes, and the KEY=VALUE parameters built from them, so that every operator
entry accepts ``dtype=bf16`` and ``sparse_mode=causal`` the same way.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from npusim.registry import ProblemParam

DTYPES = {"fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "fp32": np.dtype(np.float32),
          "int8": np.dtype(np.int8)}

#: sparse_mode names after sparse_mode参数说明.md (defaultMask, leftUpCausal, rightDownCausal, band);
#: "causal" is the everyday name of mode 2. Modes the command line builds a mask for.
SPARSE_MODE_NAMES = {"default": 0, "causal": 2, "left_up_causal": 2, "right_down_causal": 3, "band": 4}
INT32_MAX = 2147483647


def dtype_param(names=("fp16", "bf16"), default="fp16") -> ProblemParam:
    return ProblemParam("dtype", str, default, tuple(names), "data type of the inputs")


def sparse_mode_param() -> ProblemParam:
    return ProblemParam("sparse_mode", int, 0, dict(SPARSE_MODE_NAMES),
                        "the attention mask; modes 0 and 4 also use pre_tokens and next_tokens")


def token_params(pre_default: int = INT32_MAX, next_default: int = INT32_MAX) -> tuple[ProblemParam, ...]:
    return (ProblemParam("pre_tokens", int, pre_default, None, "tokens before the diagonal kept (modes 0 and 4)"),
            ProblemParam("next_tokens", int, next_default, None, "tokens after the diagonal kept (modes 0 and 4)"))


def dtype_of(problem: dict) -> np.dtype:
    return DTYPES[problem["dtype"]]
