"""input_layout handling of the attention operators: shapes <-> (B, N, S, D), arrays <-> canonical BNSD.

Why: kernels and goldens index one canonical [B, N, S, D] array; the public layouts differ only in
axis order (seeds/000 inputLayout: "B（Batch）... S（Seq-Length）... H（Head-Size）... N（Head-Num）...
D（Head-Dim）... 满足D=H/N"). Conversions return numpy views where the layout allows it.

Contents: :data:`LAYOUTS`, :data:`PFA_LAYOUTS`, :func:`output_layout`, :func:`parse_shape`,
:func:`layout_shape`, :func:`to_bnsd`, :func:`from_bnsd`, and for varlen TND :func:`parse_tnd`,
:func:`tnd_batches`.

Errors are AclnnError 161002 (the aclnn first stage checks layout and rank, e.g.
aclnn_prompt_flash_attention_inner.cpp CheckDimsAndLayout / AnalysisAxis).
"""
from __future__ import annotations

import numpy as np

from ops.common.errors import invalid

#: Every layout handled here. BNSD_BSND: input BNSD, output BSND (seeds/000 inputLayout).
LAYOUTS = ("BSH", "BSND", "BNSD", "BNSD_BSND", "TND")
#: Layouts of PromptFlashAttentionV2 (seeds/000: "当前支持BSH、BSND、BNSD、BNSD_BSND").
PFA_LAYOUTS = ("BSH", "BSND", "BNSD", "BNSD_BSND")
_RANK = {"BSH": 3, "BSND": 4, "BNSD": 4, "BNSD_BSND": 4, "TND": 3}


def _check_layout(layout) -> str:
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise invalid("input_layout", f"must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    return layout


def output_layout(layout: str) -> str:
    """Layout of the output: BNSD_BSND -> BSND, TND -> TND, otherwise the input layout."""
    layout = _check_layout(layout)
    return "BSND" if layout == "BNSD_BSND" else layout


def parse_shape(layout: str, shape, num_heads: int, name: str = "query") -> tuple[int, int, int, int]:
    """(B, N, S, D) of a tensor of *shape* in *layout* (BSH needs *num_heads* to split H = N*D).

    Raises AclnnError 161002 if the rank does not match the layout, if *num_heads* <= 0 for BSH, or
    if H is not a multiple of *num_heads* (D = H/N must be a whole number). TND: use :func:`parse_tnd`.
    """
    layout = _check_layout(layout)
    if layout == "TND":
        raise invalid("input_layout", "TND has no batch axis: use parse_tnd")
    shape = tuple(int(d) for d in shape)
    if len(shape) != _RANK[layout]:
        raise invalid(name, f"layout {layout} needs a {_RANK[layout]}-D tensor, got shape {shape}")
    if layout == "BSH":
        b, s, h = shape
        if isinstance(num_heads, bool) or not isinstance(num_heads, (int, np.integer)) or num_heads <= 0:
            raise invalid("num_heads", f"must be > 0 to split H of {name}, got {num_heads!r}")
        if h % num_heads:
            raise invalid(name, f"H = {h} must be a multiple of the head count {num_heads} (D = H/N)")
        return b, int(num_heads), s, h // int(num_heads)
    if layout == "BSND":
        b, s, n, d = shape
        return b, n, s, d
    b, n, s, d = shape  # BNSD, BNSD_BSND
    return b, n, s, d


def layout_shape(layout: str, b: int, n: int, s: int, d: int) -> tuple:
    """Shape of a [B, N, S, D] tensor written in *layout* (BNSD_BSND means the BNSD input side)."""
    layout = _check_layout(layout)
    if layout == "BSH":
        return (b, s, n * d)
    if layout == "BSND":
        return (b, s, n, d)
    if layout == "TND":
        raise invalid("input_layout", "TND has no batch axis")
    return (b, n, s, d)


def to_bnsd(x: np.ndarray, layout: str, num_heads: int) -> np.ndarray:
    """Canonical [B, N, S, D] view of *x* (a view for every layout; BSH is reshaped, then transposed).

    Raises AclnnError 161002 as :func:`parse_shape`.
    """
    b, n, s, d = parse_shape(layout, x.shape, num_heads)
    if layout == "BSH":
        return x.reshape(b, s, n, d).transpose(0, 2, 1, 3)
    if layout == "BSND":
        return x.transpose(0, 2, 1, 3)
    return x


def from_bnsd(x_bnsd: np.ndarray, layout: str) -> np.ndarray:
    """*x_bnsd* written in the OUTPUT layout of *layout* (:func:`output_layout`).

    BNSD: *x_bnsd* itself; BSND / BNSD_BSND: a transposed view; BSH: a C-contiguous copy (merging
    N and D of a transposed array cannot be a view).
    """
    out = output_layout(layout)
    if x_bnsd.ndim != 4:
        raise invalid("attention_out", f"expected a [B, N, S, D] array, got shape {x_bnsd.shape}")
    b, n, s, d = x_bnsd.shape
    if out == "BNSD":
        return x_bnsd
    if out == "BSND":
        return x_bnsd.transpose(0, 2, 1, 3)
    if out == "BSH":
        return np.ascontiguousarray(x_bnsd.transpose(0, 2, 1, 3)).reshape(b, s, n * d)
    raise invalid("input_layout", "TND output needs the sequence lengths: use tnd_batches")


def parse_tnd(shape, name: str = "query") -> tuple[int, int, int]:
    """(T, N, D) of a TND tensor. Raises AclnnError 161002 unless 3-D."""
    shape = tuple(int(d) for d in shape)
    if len(shape) != 3:
        raise invalid(name, f"layout TND needs a 3-D tensor, got shape {shape}")
    return shape


def tnd_batches(x: np.ndarray, cum_seq_lens) -> list[np.ndarray]:
    """Per batch [N, S_b, D] views of a TND tensor, from cumulative lengths (TND convention: the
    i-th entry is the end token of batch i). Raises AclnnError 161002 if the lengths decrease or
    exceed T.
    """
    t, _, _ = parse_tnd(x.shape)
    ends = [int(v) for v in cum_seq_lens]
    views, start = [], 0
    for i, end in enumerate(ends):
        if end < start or end > t:
            raise invalid("actual_seq_lengths", f"cumulative length [{i}] = {end} must lie in [{start}, {t}]")
        views.append(x[start:end].transpose(1, 0, 2))
        start = end
    return views
