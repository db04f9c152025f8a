"""Trace bit-identity check for speed work: fingerprints of the traces of a fixed set of launches.

``python benchmarks/trace_equivalence.py save FILE`` writes one SHA-256 per launch (every trace column, the
flows, the name table, the source lines and the cycles) of a fixed set of launches: the vector and matmul
reference kernels, PromptFlashAttentionV2 (causal, GQA, 310P), FlashAttentionVarLenScore (varlen, pse,
causal) and ScatterPaKvCache (Norm, PA_NZ), in full and timing mode, and three replay-heavy timing runs (the
vector add on one core, unmasked PFA with GQA, sim_speed's FA varlen case). ``... check FILE`` recomputes them
and lists any launch whose trace changed. Run ``save`` on the base commit, then ``check`` after a change
that must only change speed (docs/performance.md).
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def fingerprint(res) -> str:
    """SHA-256 of a launch's or an operator's trace (columns, flows, names, sources) and cycles."""
    t = res.trace
    h = hashlib.sha256()
    for key in sorted(t.columns):
        h.update(key.encode())
        h.update(np.ascontiguousarray(t.columns[key]).tobytes())
    for key in sorted(t.flows):
        h.update(key.encode())
        h.update(np.ascontiguousarray(t.flows[key]).tobytes())
    h.update("\n".join(t.names).encode())
    h.update("\n".join(f"{Path(f).resolve().relative_to(ROOT) if f.startswith(str(ROOT)) else f}:{n}"
                       for f, n in t.sources).encode())
    h.update(str(int(res.cycles)).encode())
    return h.hexdigest()


def _cases():
    from ml_dtypes import bfloat16

    from npusim.examples.matmul import matmul_custom, matmul_tiling
    from npusim.examples.vector_add import add_custom, add_tiling
    from npusim.launch import GmArg, launch
    from npusim.memory.gm import TensorSpec
    from ops import flash_attention_var_len_score, prompt_flash_attention_v2, scatter_pa_kv_cache
    from ops.common.masks import compressed_causal_mask

    rng = np.random.default_rng(0)

    def arr(shape, dtype=np.float16, full=True):
        return rng.uniform(-1, 1, shape).astype(dtype) if full else TensorSpec(shape, dtype)

    for mode in ("full", "timing"):
        full = mode == "full"
        n = 1024 * 64
        yield f"vector_add/{mode}", lambda: launch(
            add_custom, (GmArg("x", arr((n,), full=full)), GmArg("y", arr((n,), full=full)),
                         GmArg("z", arr((n,), full=full)), add_tiling(n, 4, 1024, 2)),
            block_dim=4, chip="Ascend910B2", mode=mode, kernel_type="vector")
        m, nn, k = 256, 256, 384
        yield f"matmul/{mode}", lambda: launch(
            matmul_custom, (GmArg("a", arr((m, k), full=full)), GmArg("b", arr((k, nn), full=full)),
                            GmArg("c", np.zeros((m, nn), np.float32) if full else TensorSpec((m, nn), np.float32)),
                            matmul_tiling(m, nn, k, 4)),
            block_dim=4, chip="Ascend910B2", mode=mode, kernel_type="cube")
        q = arr((1, 4, 512, 128), full=full)
        kv = arr((1, 2, 512, 128), full=full)
        mask = compressed_causal_mask().astype(bool)
        yield f"pfa_causal_gqa/{mode}", lambda: prompt_flash_attention_v2(
            q, kv, kv, atten_mask=mask, num_heads=4, num_key_value_heads=2, input_layout="BNSD",
            scale_value=128 ** -0.5, sparse_mode=2, mode=mode)
        q3 = arr((1, 2, 256, 64), full=full)
        yield f"pfa_310p/{mode}", lambda: prompt_flash_attention_v2(
            q3, q3, q3, num_heads=2, input_layout="BNSD", chip="Ascend310P3", mode=mode)
        t, heads, d = 700, 2, 128
        qf = arr((t, heads, d), full=full)
        pse = arr((1, heads, 1024, 384), full=full)
        yield f"fa_varlen_pse_causal/{mode}", lambda: flash_attention_var_len_score(
            qf, qf, qf, real_shift=pse, actual_seq_qlen=[316, 700], actual_seq_kvlen=[316, 700], head_num=heads,
            scale_value=d ** -0.5, atten_mask=mask, sparse_mode=3, input_layout="TND", mode=mode)
        yield f"fa_varlen_bf16/{mode}", lambda: flash_attention_var_len_score(
            arr((600, 2, 64), bfloat16, full), arr((600, 2, 64), bfloat16, full),
            arr((600, 2, 64), bfloat16, full), actual_seq_qlen=[100, 600], actual_seq_kvlen=[100, 600],
            head_num=2, scale_value=0.125, input_layout="TND", mode=mode)
        for cache_mode in ("Norm", "PA_NZ"):
            tokens, kvh, dd, blocks, bs = 300, 2, 128, 8, 64
            key = arr((tokens, kvh, dd), full=full)
            cache_shape = (blocks, bs, kvh, dd) if cache_mode == "Norm" else (blocks, kvh * dd // 16, bs, 16)
            kc = np.zeros(cache_shape, np.float16) if full else TensorSpec(cache_shape, np.float16)
            vc = np.zeros(cache_shape, np.float16) if full else TensorSpec(cache_shape, np.float16)
            slots = np.random.default_rng(1).permutation(blocks * bs)[:tokens].astype(np.int32)
            yield f"spkc_{cache_mode}/{mode}", lambda: scatter_pa_kv_cache(
                key, kc, slots, key, vc, cache_mode=cache_mode, mode=mode)
    # replay-heavy timing runs (npusim/replay.py): most of their rows come from replayed steps
    n = 1024 * 2000
    yield "replay_vector_add_one_core/timing", lambda: launch(
        add_custom, (GmArg("x", TensorSpec((n,), np.float16)), GmArg("y", TensorSpec((n,), np.float16)),
                     GmArg("z", TensorSpec((n,), np.float16)), add_tiling(n, 1, 1024, 2)),
        block_dim=1, chip="Ascend910B2", mode="timing", kernel_type="vector")
    q, kv = TensorSpec((1, 8, 2048, 128), np.float16), TensorSpec((1, 2, 2048, 128), np.float16)
    yield "replay_pfa_unmasked_gqa/timing", lambda: prompt_flash_attention_v2(
        q, kv, kv, num_heads=8, num_key_value_heads=2, input_layout="BNSD", mode="timing", progress=False)
    qf = TensorSpec((2048, 8, 128), np.float16)
    yield "replay_fa_varlen_2048_n8/timing", lambda: flash_attention_var_len_score(
        qf, qf, qf, actual_seq_qlen=[2048], actual_seq_kvlen=[2048], head_num=8, scale_value=128 ** -0.5,
        mode="timing", progress=False)


def compute() -> dict:
    out = {}
    for name, run in _cases():
        try:
            out[name] = fingerprint(run())
        except Exception as exc:  # noqa: BLE001 - the failure is the fingerprint (it must not change either)
            out[name] = f"error {type(exc).__name__}: {exc}"
        print(f"{name:32s} {out[name][:16]}", flush=True)
    return out


def main(argv) -> int:
    if len(argv) != 3 or argv[1] not in ("save", "check"):
        print(__doc__)
        return 2
    got = compute()
    path = Path(argv[2])
    if argv[1] == "save":
        path.write_text(json.dumps(got, indent=1))
        return 0
    want = json.loads(path.read_text())
    bad = [k for k in want if got.get(k) != want[k]]
    print("traces bit-identical" if not bad else f"CHANGED: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
