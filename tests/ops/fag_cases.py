"""Consistent inputs for FlashAttentionUnpaddingScoreGradV5 tests: random q/k/v/dy, the float64 forward's
attention, softmax_max and softmax_sum (ops reference), rounded to the operator's dtypes."""
import ml_dtypes
import numpy as np

from npusim import TensorSpec
from ops.flash_attention_unpadding_score_grad_v5.reference import fag_forward_reference
from ops.flash_attention_unpadding_score_grad_v5.validate import validate

CAUSAL = np.triu(np.ones((2048, 2048), dtype=np.bool_), 1)
#: sparse 6: the causal triangle, then 1024 rows of [0 x 1024 | 1 x 1024] (sparse_mode doc)
PREFIX_MASK = np.concatenate([CAUSAL, np.concatenate([np.zeros((1024, 1024), np.bool_),
                                                      np.ones((1024, 1024), np.bool_)], axis=1)])
DTYPES = {"fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "fp32": np.dtype(np.float32)}


def make_case(seq_q, seq_kv, n1=2, n2=1, d=16, dtype="fp16", seed=0, sparse_mode=0, causal=False, pse_type=1,
              slopes=None, sink=False, dropout=None, rope_d=0, layout="same_as_input", scale=None, q_start=None,
              kv_start=None, alibi=None, full_mask=False, pre=None, nxt=None, prefix=None):
    """(args dict for the operator, FagProblem). *seq_q*/*seq_kv*: per-batch lengths; *causal*: the
    compressed 2048 mask with *sparse_mode*; *slopes*: "B" or "N" for pse_type 2/3; *dropout*: keep_prob
    (random keep bits); *rope_d*: rope width (bf16); *alibi*: "B", "1" or "random", the 4-D pse of pse_type 0/1;
    *full_mask*: a random [maxSq, maxSkv] atten_mask (sparse 0/1); *pre*/*nxt*: pre/next tokens; *prefix*:
    per-batch prefix lengths with the 3072 x 2048 mask (sparse 6)."""
    rng = np.random.default_rng(seed)
    dt = DTYPES[dtype]
    sq, skv = np.asarray(seq_q), np.asarray(seq_kv)
    t1, t2, b = int(sq.sum()), int(skv.sum()), len(sq)
    mk = lambda *s: rng.uniform(-1, 1, s).astype(dt)  # noqa: E731
    a = {"query": mk(t1, n1, d), "key_in": mk(t2, n2, d), "value": mk(t2, n2, d), "dy": mk(t1, n1, d),
         "query_rope": mk(t1, n1, rope_d) if rope_d else None, "key_in_rope": mk(t2, n2, rope_d) if rope_d else None,
         "actual_seq_qlen": np.cumsum(sq).tolist(), "actual_seq_kvlen": np.cumsum(skv).tolist(), "head_num": n1,
         "scale_value": float(scale if scale is not None else 1.0 / np.sqrt(d + rope_d)), "sparse_mode": sparse_mode,
         "pse_type": pse_type, "softmax_in_layout": layout, "input_layout": "TND"}
    if causal:
        a["atten_mask"] = CAUSAL
    if full_mask:  # random [maxSq, maxSkv] mask keeping column 0 of every row (no fully masked row)
        m = rng.random((int(sq.max()), int(skv.max()))) < 0.3
        m[:, 0] = False
        if pre is not None and sparse_mode == 0:  # the seed: the mask must agree with the band
            dist = np.arange(m.shape[1])[None, :] - np.arange(m.shape[0])[:, None]
            m |= (dist > nxt) | (dist < -pre)
        a["atten_mask"] = m
    if prefix is not None:
        a["atten_mask"], a["prefix"] = PREFIX_MASK, list(prefix)
    if pre is not None:
        a["pre_tokens"] = pre
    if nxt is not None:
        a["next_tokens"] = nxt
    if slopes:
        a["pse_shift"] = rng.uniform(0.05, 0.5, (b, n1) if slopes == "B" else (n1,)).astype(np.float32)
    if alibi:  # pse_type 0/1: the last 1024 rows of -slope * |j - i|, [B or 1, N1, 1024, maxSkv]; "random": not
        mk, bp = int(skv.max()), (1 if alibi == "1" else b)  # diagonal-constant (the kernel's read windows only)
        diag = np.arange(mk)[None, :] - np.arange(1024)[:, None] - (mk - 1024)
        a["pse_shift"] = (rng.uniform(-1, 1, (bp, n1, 1024, mk)) if alibi == "random" else
                          -rng.uniform(0.05, 0.5, (bp, n1))[:, :, None, None] * np.abs(diag)).astype(dt)
    if sink:
        a["sink_in"] = rng.uniform(-1, 1, n1).astype(np.float32)
    if dropout is not None:
        bits = n1 * int((sq * skv).sum())
        a["drop_mask"] = np.packbits(rng.random(bits) < dropout, bitorder="little")
        a["keep_prob"] = dropout
    if q_start is not None:
        a["q_start_idx"] = [q_start]
    if kv_start is not None:
        a["kv_start_idx"] = [kv_start]
    sm_shape = (t1, n1, 8) if layout == "same_as_input" else (n1, t1, 8)
    spec = {"softmax_max": TensorSpec(sm_shape, np.float32), "softmax_sum": TensorSpec(sm_shape, np.float32),
            "attention_in": TensorSpec((t1, n1, d), dt)}
    problem = validate(**{**a, **spec}, chip_spec="Ascend910B2")
    fwd = fag_forward_reference(problem, a["query"], a["key_in"], a["value"], query_rope=a["query_rope"],
                                key_in_rope=a["key_in_rope"], pse_shift=a.get("pse_shift"),
                                drop_mask=a.get("drop_mask"), atten_mask=a.get("atten_mask"),
                                sink_in=a.get("sink_in"), prefix=a.get("prefix"))
    a["attention_in"] = fwd["attention"].astype(dt)
    for name in ("softmax_max", "softmax_sum"):
        col = np.repeat(fwd[name].astype(np.float32)[..., None], 8, axis=-1)  # [T1, N1, 8]
        if layout != "same_as_input":  # per-batch [N1, Sq, 8] blocks
            col = np.concatenate([col[c0:c0 + s].transpose(1, 0, 2).reshape(-1)
                                  for c0, s in zip(np.concatenate(([0], np.cumsum(sq)[:-1])), sq)]).reshape(sm_shape)
        a[name] = col
    return a, problem


def ref_args(a):
    """The reference functions' keyword arguments from an operator args dict."""
    return {k: a.get(k) for k in ("query_rope", "key_in_rope", "pse_shift", "drop_mask", "atten_mask", "sink_in")}


def golden_of(a, p, res, **over):
    """The golden of an operator call (args dict *a*, FagProblem *p*, its OpResult *res*) with the run's
    template, block count and atomic order;
    *over* overrides golden keywords (block_dim, atomics, ...)."""
    from ops.flash_attention_unpadding_score_grad_v5.golden import fag_golden
    from ops.flash_attention_unpadding_score_grad_v5.tiling import balance_applies
    t = res.tiling
    kw = dict(block_dim=t.blockDim, atomics=res.extra["atomics"], sink_in=a.get("sink_in"),
              cv=None if t.template == "basic" else (t.s1CvInner, t.s2CvInner), dtm=t.sabDtm,
              regions=t.dtmBasic, trim=t.cvTrim,
              contiguous=(t.splitAivs, t.aivPerCore) if t.template == "generic" and not balance_applies(p) else None,
              core_starts=t.secCoreStart if (t.template == "generic" and balance_applies(p))
              or t.template == "basic_bn2" else None,
              aiv_split=t.secAivSplit if (t.template == "generic" and balance_applies(p))
              or t.template == "basic_bn2" else None,
              first_writes=t.template == "basic_bn2", dsink_aivs=t.dsinkCores,
              atten_mask=a.get("atten_mask"), query_rope=a["query_rope"], key_in_rope=a["key_in_rope"],
              pse_shift=a.get("pse_shift"), drop_mask=a.get("drop_mask"))
    kw.update(over)
    return fag_golden(p, a["query"], a["key_in"], a["value"], a["dy"], a["softmax_max"], a["softmax_sum"],
                      a["attention_in"], **kw)


def reference_pair(a, p):
    """(float64 reference, the same formulas rounded to the input dtype) of an operator call."""
    from ops.flash_attention_unpadding_score_grad_v5.reference import fag_reference
    args = (p, a["query"], a["key_in"], a["value"], a["dy"], a["softmax_max"], a["softmax_sum"], a["attention_in"])
    kw = ref_args(a) | {"prefix": a.get("prefix")}
    return fag_reference(*args, **kw), fag_reference(*args, **kw, dtype=p.dtype)


def check_golden_and_accuracy(a, p, res, factor: float = 3.0) -> None:
    """Every output of the run bit-exact with golden_of, and within the flash-attention gradient rule of
    NUMERICS.md (factor 3, as test_fag_features applies it) of the float64 reference."""
    from ops.common.accuracy import fa_rule_ok
    from tests.ops.helpers import bits
    gold = golden_of(a, p, res)
    assert set(gold) == set(res.outputs)
    for k, g in gold.items():
        np.testing.assert_array_equal(bits(res.outputs[k]), bits(g), err_msg=k)
    ref, low = reference_pair(a, p)
    for k in ref:
        ok, info = fa_rule_ok(res.outputs[k], ref[k], low[k], factor=factor)
        assert ok, (k, info)
