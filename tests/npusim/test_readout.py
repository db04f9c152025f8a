"""Fixpipe's compiled read-out (npusim/isa/round16.py) against npusim.dtypes.cast and the numpy form it replaces
(Fixpipe._placement), bit for bit: fp32 -> fp16 / bf16 round-to-nearest-even at every exponent and at the rounding
boundaries (ties both ways, overflow to Inf, subnormals, zeros), NaN payloads and signs, Inf; and whole Fixpipes
(odd sizes, row pitch > nSize, srcStride > mSize, a destination ending at GM's end) with and without the kernel.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.dtypes import cast
from npusim.isa import cube
from npusim.isa import round16 as readout
from npusim.kernel import CFG_ROW_MAJOR, FixpipeParamsV220, QuantMode_t
from npusim.launch import GmArg
from tests.npusim.test_cube import fixpipe_kernel, nd_to_l0c, run

BF16 = ml_dtypes.bfloat16
TARGETS = {"fp16": (np.float16, readout.TO_F16), "bf16": (BF16, readout.TO_BF16)}


def boundary_bits() -> np.ndarray:
    """fp32 bit patterns at every exponent with the mantissas where fp16 / bf16 rounding changes: around each
    half step of the 13 (fp16 normal), 16 (bf16) and 14..24 (fp16 subnormal) dropped bits, and the extremes."""
    mants = {0, 1, 2, 0x7FFFFF, 0x7FFFFE, 0x400000}
    for drop in range(13, 25):
        half = 1 << (drop - 1)
        for base in (0, 1 << drop, 3 << drop, 0x7FFFFF & ~((1 << drop) - 1)):
            mants.update(m & 0x7FFFFF for m in (base + half - 1, base + half, base + half + 1))
    exps = np.arange(256, dtype=np.uint32)[:, None] << 23
    bits = (exps | np.array(sorted(mants), np.uint32)[None, :]).reshape(-1)
    return np.concatenate([bits, bits | np.uint32(0x80000000)])


def convert(bits: np.ndarray, kind: int) -> np.ndarray:
    """readout.nz_to_nd of a flat array (a padded multiple of 16 elements: one column block, rows of 16)."""
    n = -(-bits.size // 16) * 16
    src = np.zeros(n, np.uint32)
    src[:bits.size] = bits
    out = np.zeros(n, np.uint16 if kind else np.uint32)
    readout.nz_to_nd(src, n, out, 16, n // 16, 16, kind)
    return out[:bits.size]


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_rounding_at_every_exponent_and_boundary(target):
    bits = boundary_bits()
    dtype, kind = TARGETS[target]
    want = cast(bits.view(np.float32), target).view(np.uint16)
    assert np.array_equal(convert(bits, kind), want)
    # the boundaries the fp16 branches test, named: 65504 | 65520 (tie -> Inf), 2^-14, 2^-25 (tie -> 0), 2^-24
    named = np.array([0x477FE000, 0x477FEFFF, 0x477FF000, 0x38800000, 0x387FFFFF, 0x33000000, 0x33000001,
                      0x33800000, 0x7F800000, 0x7F800001, 0xFFC00123], np.uint32)
    assert np.array_equal(convert(named, kind), cast(named.view(np.float32), target).view(np.uint16))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), target=st.sampled_from(sorted(TARGETS)))
def test_rounding_of_random_bits(seed, target):
    bits = np.random.default_rng(seed).integers(0, 2 ** 32, 4096, dtype=np.uint32)
    dtype, kind = TARGETS[target]
    assert np.array_equal(convert(bits, kind), cast(bits.view(np.float32), target).view(np.uint16))


def test_copy_keeps_every_bit():
    bits = boundary_bits()
    assert np.array_equal(convert(bits, readout.COPY), bits)


def l0c_values(rng, rows: int, cols: int) -> np.ndarray:
    """(rows, cols) float32 scores with ties, overflow, subnormals, signed zeros, Inf and NaN payloads mixed in."""
    x = (rng.standard_normal((rows, cols)) * 300).astype(np.float32)
    special = np.array([65520.0, -65519.0, 1e5, 2.0 ** -25, -(2.0 ** -24) * 1.5, 1e-41, -0.0, 0.0, np.inf, -np.inf,
                        1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 3e38], np.float32)
    pick = rng.random((rows, cols))
    x = np.where(pick < 0.2, rng.choice(special, (rows, cols)), x).astype(np.float32)
    x.view(np.uint32)[pick > 0.97] = (np.uint32(0x7F800000) | rng.integers(1, 1 << 23, (rows, cols), dtype=np.uint32)
                                      | (rng.integers(0, 2, (rows, cols), dtype=np.uint32) << 31))[pick > 0.97]
    return x


@pytest.mark.parametrize("dst_dtype, quant", [(np.float16, QuantMode_t.F322F16), (BF16, QuantMode_t.F322BF16),
                                              (np.float32, QuantMode_t.NoQuant)])
@pytest.mark.parametrize("m, n, rows, pitch, tail", [(21, 35, 32, 40, 0), (128, 128, 128, 960, 5),
                                                     (16, 16, 48, 16, 0), (7, 130, 16, 131, 1)])
def test_fixpipe_same_bits_with_and_without_the_kernel(monkeypatch, dst_dtype, quant, m, n, rows, pitch, tail):
    """*tail*: GM ends that many elements after the last row's nSize (the strided view's as_strided form)."""
    rng = np.random.default_rng(m * n + pitch)
    mat = l0c_values(rng, rows, -(-n // 16) * 16)
    l0c = nd_to_l0c(mat)
    results = []
    for use in (True, False):
        monkeypatch.setattr(cube, "USE_READOUT_KERNEL", use)
        dst = np.full((m - 1) * pitch + n + tail, 7, dst_dtype)
        p = FixpipeParamsV220(nSize=n, mSize=m, srcStride=rows, dstStride=pitch, quantPre=quant)
        run(fixpipe_kernel, (l0c, np.float32, GmArg("c", dst), p, CFG_ROW_MAJOR))
        results.append(dst.view(np.uint8).copy())
    assert np.array_equal(results[0], results[1])
    assert not np.array_equal(results[0], np.full_like(results[0], results[0][0]))  # something was written
