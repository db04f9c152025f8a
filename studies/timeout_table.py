"""The seed's four long-sequence PromptFlashAttentionV2 shapes on every chip preset: predicted time and the
AI Core timeout verdict (docs/timeouts.md's table), exactly as `npusim predict pfa ...` gives them.

    python studies/timeout_table.py    # saves benchmarks/results/timeout_table.json; python -m studies renders
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from results import save  # noqa: E402

from npusim.predict import predict  # noqa: E402
from ops import AclnnError  # noqa: E402

#: (B, Q_N, S, D, KV_N) of the seed's 约束说明 (seed 000), S_kv = S.
SHAPES = ((1, 20, 2097152, 256, 1), (1, 2, 20971520, 256, 2), (20, 1, 2097152, 256, 1), (1, 10, 2097152, 512, 1))
CHIPS = ("Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4", "Ascend910_9391", "Ascend310P3")


def cell(shape: tuple, chip: str) -> dict:
    b, n, s, d, nkv = shape
    try:
        res = predict("pfa", [f"B={b}", f"N={n}", f"S={s}", f"D={d}", f"N_kv={nkv}", f"chip={chip}"])
    except AclnnError as e:
        return {"refused": e.status}
    return {"predicted_s": res.timeout.predicted_s, "limit_s": res.timeout.limit_s, "exceeded": res.timeout.exceeded}


def main() -> None:
    rows = []
    for shape in SHAPES:
        cells = {chip: cell(shape, chip) for chip in CHIPS}
        rows.append({"shape": list(shape), "cells": cells})
        print(shape, {c: v.get("predicted_s", v.get("refused")) for c, v in cells.items()})
    save("timeout_table", {"chips": list(CHIPS), "rows": rows})


if __name__ == "__main__":
    main()
