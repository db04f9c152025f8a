"""PromptFlashAttentionV2 core split as CANN chooses it (docs/pfa.md "Core split mode", "Core split"):
counted from the tiling alone, no kernel runs."""
import numpy as np
import pytest

from npusim import TensorSpec
from npusim.chip import chip
from ops.common.masks import compressed_causal_mask
from ops.prompt_flash_attention_v2.tiling import (SPLIT_CUBE, SPLIT_VECTOR, pfa_tiling, split_core_mode,
                                                  split_ns_new)
from ops.prompt_flash_attention_v2.validate import validate

B2 = chip("Ascend910B2")


def problem(b, n, s1, s2, d=128, causal=False, n_kv=None, spec=B2):
    q, kv = TensorSpec((b, n, s1, d), np.float16), TensorSpec((b, n_kv or n, s2, d), np.float16)
    kw = dict(atten_mask=compressed_causal_mask().astype(bool), sparse_mode=2) if causal else {}
    return validate(q, kv, kv, num_heads=n, num_key_value_heads=n_kv or n, input_layout="BNSD",
                    scale_value=d ** -0.5, chip_spec=spec, **kw)


@pytest.mark.parametrize("shape, mode", [
    ((1, 32, 8192, 8192), SPLIT_CUBE),  # README quick tour: S1 == S2 >= 8K without mask -> SPLIT_NBS_CUBE
    ((1, 1, 3072, 16384), SPLIT_VECTOR),  # calibration shape: S1 != S2
    ((2, 2, 3072, 3072), SPLIT_CUBE),  # B != 1: "no balance"; 2 * 2 * 12 blocks >= 48 workers
    ((1, 2, 3072, 3072), SPLIT_VECTOR),  # B == 1, G == 1, S < 8K: the balance path wins
    ((1, 4, 2048, 2048), SPLIT_VECTOR),  # S < 3K
    ((1, 12, 16384, 16384), SPLIT_CUBE),  # SPLIT_ONEN_CUBE: S >= 16K, B * N >= 12
    ((1, 8, 4096, 4096, 96), SPLIT_VECTOR),  # D != 128
])
def test_split_core_mode(shape, mode):
    prob = problem(*shape)
    assert split_core_mode(prob, B2, 128) == mode


def test_causal_mask_keeps_balance_below_8k_and_cube_above():
    assert split_core_mode(problem(1, 8, 4096, 4096, causal=True), B2, 128) == SPLIT_VECTOR
    assert split_core_mode(problem(2, 8, 4096, 4096, causal=True), B2, 128) == SPLIT_CUBE


def test_calibration_shape_spreads_one_block_per_ai_core():
    """Sq=3072, one head: 24 blocks of 128 rows for 48 vector-core workers. The balance path deals
    blocks 23..0 in snake order and the skip-core remap puts the workers on different AI Cores, so all
    24 cubes work, each for one vector core (the old cube view used 12 AI Cores)."""
    til = pfa_tiling(problem(1, 1, 3072, 16384), B2)
    assert til.splitCoreMode == SPLIT_VECTOR and til.sOuterFactor == 128 and til.blockDim == 24
    per_core = [(til.workerItems[2 * c], til.workerItems[2 * c + 1]) for c in range(24)]
    assert all(len(a) + len(b) == 1 for a, b in per_core)
    assert sorted(i for a, b in per_core for i in a + b) == list(range(24))
    assert til.tailFirst and til.kvChunk == 256


def test_ns_new_closes_a_core_before_block_zero_when_the_target_is_below_half_a_block():
    """16 equal blocks over 48 workers: target 1/3 tile, so the first block already exceeds it and the
    first worker stays empty, then one block per worker (CANN's greedy, tiling.cpp:934-963)."""
    prob = problem(2, 4, 150, 200, d=64, n_kv=2)
    assert list(split_ns_new(prob, 128, 512, 48)) == [0] + list(range(16))
    # 4 blocks of weight 1 over 2 workers: target 2, closes before block 2
    assert list(split_ns_new(problem(1, 1, 512, 200), 128, 512, 2)) == [0, 2]


def test_adjust_basic_block_halves_s_outer_when_workers_get_one_block_each():
    """N=2, S=3072: 24 blocks per head for 24 workers per head -> sOuter 64 (tiling.cpp:2700-2718)."""
    assert pfa_tiling(problem(1, 2, 3072, 1024), B2).sOuterFactor == 64
    assert pfa_tiling(problem(1, 2, 2048, 1024), B2).sOuterFactor == 128  # 16 blocks, 24 workers: no


def test_cube_view_items_are_two_s_outer_rows():
    til = pfa_tiling(problem(2, 2, 3072, 3072), B2)
    assert til.splitCoreMode == SPLIT_CUBE and til.blockRows == 2 * til.sOuterFactor
    assert set(til.itemRows) == {til.blockRows}
    assert len(til.workerItems) == til.blockDim
