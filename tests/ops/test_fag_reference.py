"""The float64 reference of FlashAttentionUnpaddingScoreGradV5 against central finite differences of the
float64 forward (loss = sum(attention * dy)): the backward formulas, independently of any kernel."""
import numpy as np
import pytest

from ops.flash_attention_unpadding_score_grad_v5.reference import fag_forward_reference, fag_reference
from tests.ops.fag_cases import make_case, ref_args

CASES = {
    "plain_gqa": dict(seq_q=[3, 2], seq_kv=[4, 2], n1=2, n2=1, d=4),
    "causal_rd_sink": dict(seq_q=[2, 3], seq_kv=[3, 3], n1=2, n2=2, d=4, sparse_mode=3, causal=True, sink=True),
    "slope2_layout": dict(seq_q=[3, 2], seq_kv=[3, 2], n1=2, d=4, pse_type=2, slopes="B", layout="", q_start=1),
    "slope3_mode2": dict(seq_q=[3, 2], seq_kv=[3, 2], n1=2, d=4, pse_type=3, slopes="N", sparse_mode=2, causal=True),
    "alibi1_mode3": dict(seq_q=[3, 2], seq_kv=[3, 2], n1=2, d=4, alibi="B", sparse_mode=3, causal=True),
    "alibi0_mode2": dict(seq_q=[3, 2], seq_kv=[3, 2], n1=2, d=4, alibi="1", pse_type=0, sparse_mode=2, causal=True),
    "dropout": dict(seq_q=[3, 0, 2], seq_kv=[3, 2, 4], n1=2, d=4, dropout=0.7),
    "rope_sink": dict(seq_q=[3], seq_kv=[4], n1=2, n2=1, d=4, dtype="bf16", rope_d=2, sink=True),
}


def _loss(problem, a, **over):
    kw = {**ref_args(a), **over}
    x = {k: over.pop(k, a[k]) for k in ("query", "key_in", "value")}
    kw = {k: v for k, v in kw.items() if k not in x}
    out = fag_forward_reference(problem, x["query"], x["key_in"], x["value"], **kw)
    return float((out["attention"] * a["dy"].astype(np.float64)).sum())


def _fd(problem, a, name, eps=1e-6):
    base = a[name].astype(np.float64)
    grad = np.zeros_like(base)
    for idx in np.ndindex(base.shape):
        hi, lo = base.copy(), base.copy()
        hi[idx] += eps
        lo[idx] -= eps
        grad[idx] = (_loss(problem, a, **{name: hi}) - _loss(problem, a, **{name: lo})) / (2 * eps)
    return grad


@pytest.mark.parametrize("name", CASES)
def test_fag_reference_matches_finite_differences(name):
    a, p = make_case(**{"dtype": "fp32", **CASES[name]})
    args = {k: (None if v is None else (v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f"
                                          else v)) for k, v in a.items()}
    fwd = fag_forward_reference(p, args["query"], args["key_in"], args["value"], **ref_args(args))
    sm = lambda x: np.repeat(x[..., None], 8, axis=-1)  # noqa: E731
    if p.softmax_in_layout == "":
        sm = lambda x: np.concatenate([np.repeat(x[c:c + s].T[..., None], 8, -1).reshape(-1)  # noqa: E731
                                       for c, s in zip(p.cu_seq_q[:-1], p.seq_q)])
    got = fag_reference(p, args["query"], args["key_in"], args["value"], args["dy"], sm(fwd["softmax_max"]),
                        sm(fwd["softmax_sum"]), fwd["attention"], **ref_args(args))
    checks = {"dq": "query", "dk": "key_in", "dv": "value"}
    if p.rope_d:
        checks |= {"dq_rope": "query_rope", "dk_rope": "key_in_rope"}
    if p.sink:
        checks["dsink"] = "sink_in"
    for out, inp in checks.items():
        fd = _fd(p, args, inp)
        np.testing.assert_allclose(got[out], fd, atol=2e-7, rtol=1e-6, err_msg=out)
        assert np.abs(fd).max() > 1e-3, out  # the case exercises this gradient
