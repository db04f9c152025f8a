"""Issue 16 class 8: the aclnn facade returns statuses and never raises; class 9: timeout verdicts and the
507014 error (its message and its predicted time)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from npusim.chip import chip
from npusim.errors import AICORE_TIMEOUT, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, AclnnError
from npusim.predict import predict, report
from npusim.timeouts import op_execute_timeout
from ops.aclnn import (aclGetRecentErrMsg, aclnnFlashAttentionVarLenScore,
                       aclnnFlashAttentionVarLenScoreGetWorkspaceSize, aclnnPromptFlashAttentionV2,
                       aclnnPromptFlashAttentionV2GetWorkspaceSize, aclnnScatterPaKvCache,
                       aclnnScatterPaKvCacheGetWorkspaceSize)
from ops.flash_attention_var_len_score.api import flash_attention_var_len_score as fa
from ops.prompt_flash_attention_v2.api import prompt_flash_attention_v2 as pfa
from ops.scatter_pa_kv_cache.api import scatter_pa_kv_cache as spkc

Q = np.random.default_rng(0).standard_normal((1, 2, 64, 32)).astype(np.float16)


def _pfa_stage1(out):
    return aclnnPromptFlashAttentionV2GetWorkspaceSize(Q, Q, Q, None, None, None, None, None, None, None, None, None,
                                                       2, 1.0, 2147483647, 0, "BNSD", 0, 0, out)


def _spkc_stage1(slots, kc, vc):
    k = np.ones((10, 2, 32), np.float16)
    return aclnnScatterPaKvCacheGetWorkspaceSize(k, kc, slots, k, vc, None, None, None, "Norm", "None", None, None)


def test_second_stage_bad_arguments_return_statuses():
    """(None, None, executor), NaN / float / bool sizes, a foreign object: statuses, never exceptions."""
    out = np.full((1, 2, 64, 32), 7.0, np.float16)
    status, ws, ex = _pfa_stage1(out)
    assert status == 0
    assert aclnnPromptFlashAttentionV2(None, None, ex) == ACLNN_ERR_PARAM_INVALID
    assert "workspaceSize" in aclGetRecentErrMsg()
    for size in (float("nan"), float("inf"), ws - 0.5, True, "1"):
        assert aclnnPromptFlashAttentionV2(None, size, ex) == ACLNN_ERR_PARAM_INVALID
    assert aclnnPromptFlashAttentionV2(None, ws, object()) == ACLNN_ERR_PARAM_INVALID
    assert aclnnPromptFlashAttentionV2(None, ws, None) == ACLNN_ERR_PARAM_NULLPTR
    assert aclnnPromptFlashAttentionV2(np.empty(0, np.uint8), ws, ex) == ACLNN_ERR_PARAM_INVALID  # too small
    assert np.all(out == 7.0)
    assert aclnnPromptFlashAttentionV2(None, float(ws), ex) == 0 and not np.all(out == 7.0)  # an integral float
    assert aclGetRecentErrMsg() == ""


def test_read_only_output_refused_at_either_stage():
    out = np.zeros((1, 2, 64, 32), np.float16)
    out.flags.writeable = False
    assert _pfa_stage1(out)[0] == ACLNN_ERR_PARAM_INVALID
    out = np.zeros((1, 2, 64, 32), np.float16)
    status, ws, ex = _pfa_stage1(out)
    out.flags.writeable = False
    assert aclnnPromptFlashAttentionV2(None, ws, ex) == ACLNN_ERR_PARAM_INVALID
    assert "read-only" in aclGetRecentErrMsg()


def test_wrong_shape_output_caught_at_stage_one():
    """Was: passed stage one and failed only after the whole simulation."""
    out = np.full((1, 64, 2, 32), 7.0, np.float16)
    status, ws, ex = _pfa_stage1(out)
    assert (status, ws, ex) == (ACLNN_ERR_PARAM_INVALID, 0, None) and "attention_out" in aclGetRecentErrMsg()
    assert np.all(out == 7.0)


def test_executor_of_another_operator_refused():
    status, ws, ex = _pfa_stage1(np.zeros((1, 2, 64, 32), np.float16))
    assert aclnnFlashAttentionVarLenScore(None, ws, ex) == ACLNN_ERR_PARAM_INVALID
    assert aclnnScatterPaKvCache(None, ws, ex) == ACLNN_ERR_PARAM_INVALID
    assert aclnnPromptFlashAttentionV2(None, ws, ex) == 0  # still unused, runs on its own operator


def test_control_tensor_changed_between_stages_refused_caches_untouched():
    """A slot mapping changed after stage one (was NpuBufferError from inside the kernel)."""
    kc, vc = np.zeros((4, 8, 2, 32), np.float16), np.zeros((4, 8, 2, 32), np.float16)
    slots = np.arange(10, dtype=np.int32)
    status, ws, ex = _spkc_stage1(slots, kc, vc)
    assert status == 0
    slots[3] = 10 ** 6
    assert aclnnScatterPaKvCache(None, ws, ex) == ACLNN_ERR_PARAM_INVALID
    assert "slot_mapping" in aclGetRecentErrMsg()
    assert not kc.any() and not vc.any()


def test_fa_facade_expected_output_shapes():
    x = np.zeros((64, 2, 32), np.float16)
    outs = [np.zeros((64, 2, 8), np.float32), np.zeros((64, 2, 8), np.float32), None, np.zeros((64, 2, 32), np.float16)]
    args = (x, x, x, None, None, None, None, None, [64], [64], 1.0, 1.0, 2147483647, 2147483647, 2, "TND", 0, 0)
    assert aclnnFlashAttentionVarLenScoreGetWorkspaceSize(*args, *outs)[0] == 0
    outs[1] = np.zeros((64, 2, 4), np.float32)
    assert aclnnFlashAttentionVarLenScoreGetWorkspaceSize(*args, *outs) == (ACLNN_ERR_PARAM_INVALID, 0, None)
    assert "softmax_sum" in aclGetRecentErrMsg()


@pytest.mark.parametrize("op", ["pfa", "fa", "spkc"])
def test_class9_estimate_mode_reports_exceeded_for_every_operator(op):
    """A tiny limit: estimate mode returns exceeded=True (PFA raised 507014 from its sample launch)."""
    tiny = chip("Ascend910B2").replace(aicore_timeout_s=1e-9)
    if op == "pfa":
        res = pfa(Q, Q, Q, num_heads=2, input_layout="BNSD", chip=tiny, mode="estimate")
    elif op == "fa":
        x = np.zeros((64, 2, 32), np.float16)
        res = fa(x, x, x, actual_seq_qlen=[64], actual_seq_kvlen=[64], head_num=2, chip=tiny, mode="estimate")
    else:
        k, kc = np.ones((10, 2, 32), np.float16), np.zeros((4, 8, 2, 32), np.float16)
        res = spkc(k, kc, np.arange(10, dtype=np.int32), k, kc.copy(), chip=tiny, mode="estimate")
    assert res.timeout.exceeded and res.timeout.predicted_s > 0 and res.timeout.limit_s == 1e-9


def test_class9_timeout_error_keeps_digits_and_carries_the_prediction():
    """The 507014 message no longer rounds a short prediction to "0.0 s"; the prediction is an attribute."""
    tiny = chip("Ascend910B2").replace(aicore_timeout_s=1e-9)
    with pytest.raises(AclnnError) as exc:
        pfa(Q, Q, Q, num_heads=2, input_layout="BNSD", chip=tiny, mode="timing")
    err = exc.value
    assert err.status == AICORE_TIMEOUT and "0.0 s" not in err.message
    assert err.predicted_s > err.limit_s == 1e-9
    assert f"{err.predicted_s:.4g} s" in err.message


def test_class9_inf_limits_and_the_credit_rounding_explained():
    """timeout=inf is the cap (was OverflowError); 600 s prints as 601.295 s with the reason."""
    spec = op_execute_timeout(chip("Ascend910B2"), 600)
    assert spec.aicore_timeout_s == pytest.approx(140 * 2 ** 32 / 1e9)
    x = np.zeros((64, 2, 32), np.float16)
    text = report(fa(x, x, x, actual_seq_qlen=[64], actual_seq_kvlen=[64], head_num=2, chip=spec, mode="estimate"))
    assert "601.295 s (140 whole STARS kernel credits of 4.294967296 s" in text
    res = predict("spkc", ["tokens=64", "heads=2", "D=32", "timeout=inf"])
    assert res.timeout.limit_s == chip("Ascend910B2").aicore_timeout_s and not math.isinf(res.timeout.limit_s)
