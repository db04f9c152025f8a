"""Mmad's compiled tree (npusim/isa/mmad_tree.py) against the numpy form it replaces (npusim/isa/cube.py
``_by_numpy``), bit for bit: fp16, bf16 and fp32 operands, k not a multiple of K0, an accumulator read from L0C
(cmatrixInitVal False) holding -0, signed zeros, subnormals, Inf, bf16 products beyond fp32's range. Operands or
an accumulator holding NaN are refused by the kernel (nothing written) and run by the numpy form, whose payload
choice is the reference; the whole instruction is checked both ways through a launch.
"""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npusim.isa import cube, mmad_tree
from npusim.kernel import Mmad, MmadParams, TPosition
from tests.npusim.test_cube import local, run

BF16 = ml_dtypes.bfloat16
DTYPES = {"fp16": np.float16, "bf16": BF16, "fp32": np.float32}
#: Values mixed into random operands: signed zeros, subnormal and extreme magnitudes of each dtype, Inf.
SPECIAL = {
    "fp16": [0.0, -0.0, 2.0 ** -24, -(2.0 ** -20), 65504.0, -65504.0, np.inf, -np.inf],
    "bf16": [0.0, -0.0, 1e-38, -3e-39, 1e-30, 3e38, -1e25, 1e20, np.inf, -np.inf],
    "fp32": [0.0, -0.0, 1e-45, -1e-40, 1e-20, 3e38, -3e38, 1e20, np.inf, -np.inf],
}


def operands(seed, dtype_name, m1, n1, k, special, nan):
    """Random L0A (m1, k1, 16, K0) and L0B (k1, n1, 16, K0) fractals; *special* of the elements drawn from
    SPECIAL, *nan* of them NaN with random payloads and signs."""
    dtype = DTYPES[dtype_name]
    k0 = 32 // np.dtype(dtype).itemsize
    k1 = -(-k // k0)
    rng = np.random.default_rng(seed)
    out = []
    for shape in ((m1, k1, 16, k0), (k1, n1, 16, k0)):
        x = rng.standard_normal(shape) * 4
        pick = rng.random(shape)
        x = np.where(pick < special, rng.choice(SPECIAL[dtype_name], shape), x).astype(dtype)
        if nan:
            bits = x.view(np.uint16 if x.itemsize == 2 else np.uint32)
            exp, low = (0x7C00, 0x400) if dtype is np.float16 else (0x7F80, 0x80) if x.itemsize == 2 \
                else (0x7F800000, 0x800000)  # exponent field, its lowest bit (payloads: 1 .. low - 1)
            payload = rng.integers(1, low, shape).astype(bits.dtype)
            sign = (rng.integers(0, 2, shape) << (8 * x.itemsize - 1)).astype(bits.dtype)
            bits[pick > 1 - nan] = (bits.dtype.type(exp) | payload | sign)[pick > 1 - nan]
        out.append(x)
    return out


def accumulator(seed, rows, cols, nan):
    rng = np.random.default_rng(seed + 1)
    c = rng.choice(np.array([0.0, -0.0, 1.5, -2.5, 1e-40, 3e38, np.inf], np.float32), rows * cols)
    c = np.where(rng.random(rows * cols) < 0.5, rng.standard_normal(rows * cols).astype(np.float32), c)
    c = c.astype(np.float32)
    if nan:
        c.view(np.uint32)[rng.random(rows * cols) < nan] = 0x7FC00000 | 0x1234
    return c


def has_nan_in_k(x, k, axis):
    """A NaN among the fractal elements with a k index < k (the rest is read as +0); *axis*: x's k-fractal axis."""
    k0 = x.shape[3]
    kidx = np.arange(x.shape[axis])[:, None, None] * k0 + np.arange(k0)[None, None, :]  # (k1, 1, k0)
    keep = np.expand_dims(kidx < k, 1 - axis)
    return bool((np.isnan(x.astype(np.float32)) & keep).any())


def test_numba_is_available():
    """numba is a dependency (pyproject.toml): without it full mode silently runs the slower numpy form."""
    assert cube.USE_TREE_KERNEL and mmad_tree.run


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2 ** 31), dtype=st.sampled_from(sorted(DTYPES)), m1=st.integers(1, 3),
       n1=st.integers(1, 3), k=st.integers(1, 72), init=st.booleans(), special=st.sampled_from([0.0, 0.05, 0.5]),
       nan=st.sampled_from([0.0, 0.0, 0.01]), acc_nan=st.sampled_from([0.0, 0.0, 0.05]))
def test_tree_kernel_matches_numpy_form_bit_for_bit(seed, dtype, m1, n1, k, init, special, nan, acc_nan):
    a, b = operands(seed, dtype, m1, n1, k, special, nan)
    rows, cols = 16 * m1, 16 * n1
    c0 = accumulator(seed, rows, cols, acc_nan)
    expected, got = c0.copy(), c0.copy()
    with np.errstate(all="ignore"):
        cube._by_numpy(a, b, k, expected, rows, init)
    ran = cube._by_tree_kernel(a, b, k, got, rows, init)
    refused = has_nan_in_k(a, k, 1) or has_nan_in_k(b, k, 0) or not init and bool(np.isnan(c0).any())
    assert ran is not refused
    if ran:
        assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))
    else:  # nothing written
        assert np.array_equal(got.view(np.uint32), c0.view(np.uint32))


def mmad_kernel(a, b, c, m, n, k, init, out):
    a2 = local(TPosition.A2, a.nbytes, a.dtype, a.reshape(-1))
    b2 = local(TPosition.B2, b.nbytes, b.dtype, b.reshape(-1))
    c1 = local(TPosition.CO1, c.nbytes, np.float32, c)
    Mmad(c1, a2, b2, MmadParams(m=m, n=n, k=k, cmatrixInitVal=init))
    out.append(c1.view(c.size).copy())


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("nan", [0.0, 0.002])
def test_mmad_instruction_same_bits_with_and_without_the_kernel(monkeypatch, dtype, nan):
    """A 128 x 128 x 120 Mmad on top of an accumulator holding -0 (and NaN operands: the numpy form's payloads)."""
    k0 = 32 // np.dtype(DTYPES[dtype]).itemsize
    k = 120 if k0 != 8 else 124
    a, b = operands(5, dtype, 8, 8, k, 0.05, nan)
    c0 = accumulator(5, 128, 128, 0.0)
    results = []
    for use in (True, False):
        monkeypatch.setattr(cube, "USE_TREE_KERNEL", use)
        out = []
        run(mmad_kernel, (a, b, c0, 128, 128, k, False, out))
        results.append(out[0].view(np.uint32))
    assert np.array_equal(results[0], results[1])
    assert (c0.view(np.uint32) == 0x80000000).any()
