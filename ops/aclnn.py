"""The aclnn two-stage interface of every operator that has landed (API.md "aclnn facade").

``ws, executor = aclnnXxxGetWorkspaceSize(..., outputs)`` then ``status = aclnnXxx(workspace, ws, executor,
stream)``: same names and parameter order as the seed documents; failures return the status code (neither
stage raises) and ``aclGetRecentErrMsg()`` gives the last failure's message (docs/errors.md).
"""
from ops.flash_attention_unpadding_score_grad_v5.api import (
    aclnnFlashAttentionUnpaddingScoreGradV5, aclnnFlashAttentionUnpaddingScoreGradV5GetWorkspaceSize)
from ops.common.facade import recent_error_message as aclGetRecentErrMsg
from ops.flash_attention_var_len_score.api import (aclnnFlashAttentionVarLenScore,
                                                   aclnnFlashAttentionVarLenScoreGetWorkspaceSize)
from ops.prompt_flash_attention_v2.api import (aclnnPromptFlashAttentionV2,
                                               aclnnPromptFlashAttentionV2GetWorkspaceSize)
from ops.scatter_pa_kv_cache.api import aclnnScatterPaKvCache, aclnnScatterPaKvCacheGetWorkspaceSize
from ops.sparse_flash_attention_grad.api import (aclnnSparseFlashAttentionGrad,
                                                 aclnnSparseFlashAttentionGradGetWorkspaceSize)

__all__ = ["aclnnFlashAttentionUnpaddingScoreGradV5", "aclnnFlashAttentionUnpaddingScoreGradV5GetWorkspaceSize",
           "aclnnFlashAttentionVarLenScore", "aclnnFlashAttentionVarLenScoreGetWorkspaceSize", "aclnnPromptFlashAttentionV2",
           "aclnnPromptFlashAttentionV2GetWorkspaceSize", "aclnnScatterPaKvCache", "aclnnScatterPaKvCacheGetWorkspaceSize",
           "aclnnSparseFlashAttentionGrad", "aclnnSparseFlashAttentionGradGetWorkspaceSize", "aclGetRecentErrMsg"]
