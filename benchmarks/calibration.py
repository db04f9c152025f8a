"""Calibration: fit the launch overhead, print every point old/new and the MAPE per file.

Data (../shared/calibration/):
- fa_forward_910B2.csv, rows with kernel == torch_npu (the CANN FlashAttentionScore family; B=1, N=1,
  D=128, fp16, no mask, Sq = Skv): modeled by FlashAttentionVarLenScore (TND, one batch);
- pfa_infer_910B2.csv (PromptFlashAttention family; B=1, one head, BSH H=D=128, fp16, no mask,
  Sq=3072, Skv as given; the file treats the unnamed A2-class board as Ascend910B2, an assumption):
  modeled by PromptFlashAttentionV2 at the board's precision mode, inner_precise=0 (high precision, fp32
  softmax): the measurement called torch_npu.npu_fused_infer_attention_score without inner_precise, whose
  default is 0 (docs/calibration.md "PFA board file: the precision mode"). The model at inner_precise=1
  (fp16 softmax, the setting calibrated before) is printed beside it for comparison, not fitted.
Every point runs in timing mode on its chip with no launch overhead; the launch overhead enters the
model additively, so its least-squares fit of the relative error has a closed form. One value is fitted
and shipped, on the FA file: LAUNCH_OVERHEAD_S (npusim/calibration.py), for every operator and chip. The
script also prints the fits on the PFA file alone and on both files (diagnostics: they show whether one
constant can serve both), every point with the model before issue 13 ("old", recorded below with its
commit) and now ("new", the shipped parameter), the MAPE per file, and the hand-written PTO kernel's
points for reference (a different schedule, not fitted).

It also sets the PFA board's step against first principles (docs/calibration.md "Steady state from first
principles"): the board's cycles per 8 x 512 fp32 score slice against CANN's high-precision slice
(PFA_HP_SLICE, from the sources) at npusim's vector rates, at one repeat per cycle, and its bare repeat count;
and both files under what-if variants of shared constants (WHATIF: twice the vector rate, twice the L2
budget, both), each with the launch overhead the FA file would give it: diagnostics, never shipped. And it sets
both boards against every chip L2 budget with a source (docs/calibration.md "L2: what the two boards say"): the FA
board's S = 16384 step against its floors, its L2 traffic counted as its own template moves it (fa_floor), and the
fused-infer kernel's L2 floor at each budget (fia_l2_budgets). Last, both files with the FA file's S1s2Bn2gs1 calls on
the cube side the Matmul API sources give that template (board_cube_side_points, fa_board_cube_side.py: K and V shared
in one one-deep L1 cache, L0C single or double) at one L2 budget for both files: a diagnostic, never shipped.

    python benchmarks/calibration.py   # the FA S=16384 point runs 9 times; 6.9 min wall at load 8.2 (2026-11-24)

Saves benchmarks/results/calibration.json; the README row and the table of docs/calibration.md render from it.
"""
from __future__ import annotations

import csv
import io
import platform
from pathlib import Path

import numpy as np
from fa_board_cube_side import board_cube_side
from results import save

from npusim import TensorSpec
from npusim import kernel as kernel_isa
from npusim.calibration import LAUNCH_OVERHEAD_S
from npusim.chip import chip as get_chip
from ops import flash_attention_var_len_score, prompt_flash_attention_v2

SHARED = Path(__file__).resolve().parents[2] / "shared" / "calibration"
FA_FILE, PFA_FILE = SHARED / "fa_forward_910B2.csv", SHARED / "pfa_infer_910B2.csv"
# The model before issue 13 (commit 91dd883, launch overhead 22.0 us): docs/calibration.md of that commit
# for the FA points, the table for the PFA points (timing mode on Ascend910B2, inner_precise=1).
OLD_US = {("fa", 1024, 1024): 58.9, ("fa", 4096, 4096): 116.5, ("fa", 16384, 16384): 1124.0,
          ("pfa", 3072, 8192): 193.6, ("pfa", 3072, 16384): 350.6}


def load_points(path: Path) -> list[dict]:
    text = "".join(line for line in path.read_text().splitlines(keepends=True) if not line.startswith("#"))
    return list(csv.DictReader(io.StringIO(text)))


def fa_run(chip_name: str, s: int, d: int, n: int, trace: str | None = None, **chip_changes):
    spec = get_chip(chip_name).replace(launch_overhead_cycles=0, **chip_changes)
    q = TensorSpec((s, n, d), np.float16)
    return flash_attention_var_len_score(q, q, q, actual_seq_qlen=[s], actual_seq_kvlen=[s], head_num=n,
                                         scale_value=1 / np.sqrt(d), input_layout="TND", chip=spec, mode="timing",
                                         trace=trace)


def fa_us_without_launch(chip_name: str, s: int, d: int, n: int, **chip_changes) -> float:
    return fa_run(chip_name, s, d, n, **chip_changes).time_us


def fa_vector_cycles_per_step(chip_name: str, s: int, d: int) -> float:
    """npusim's FA model (one head): the busiest vector core's VECTOR busy cycles over its steps (its worker's
    128-row blocks x 1024-key tiles), i.e. the model's vector work per step as the trace books it."""
    res = fa_run(chip_name, s, d, 1, trace="summary")
    pipes = res.trace.summary().pipes
    busy = pipes[pipes["pipe"] == "VECTOR"]["busy_cycles"].max()
    return float(busy) / fa_busiest_steps(get_chip(chip_name), s)[2]


#: the board's PFA precision mode: torch_npu.npu_fused_infer_attention_score's default inner_precise (0 =
#: high precision, fp32 softmax for fp16 inputs), which the measurement did not override
BOARD_PFA_INNER_PRECISE = 0


def pfa_us_without_launch(chip_name: str, sq: int, skv: int, d: int, n: int,
                          inner_precise: int = BOARD_PFA_INNER_PRECISE, **chip_changes) -> float:
    spec = get_chip(chip_name).replace(launch_overhead_cycles=0, **chip_changes)
    q, kv = TensorSpec((1, sq, n * d), np.float16), TensorSpec((1, skv, n * d), np.float16)
    res = prompt_flash_attention_v2(q, kv, kv, num_heads=n, input_layout="BSH", scale_value=1 / np.sqrt(d),
                                    inner_precise=inner_precise, chip=spec, mode="timing")
    return res.time_us


# ---- the PFA board step against the vector floor of the configuration the file implies --------------------
# docs/calibration.md "Steady state from first principles". CANN's vector instructions for one 8 x 512 fp32 score
# slice of PromptFlashAttention's high-precision kernel (fp16 inputs, inner_precise=0, no mask, D = 128, a key tile
# after the first), in issue order, as (instruction, repeats of 64 fp32, PipeBarrier(PIPE_V) after it). [H] =
# hicann/ops-transformer @ c29bc10, attention/prompt_flash_attention/op_kernel/:
# - Res1VecCompute (prompt_flash_attention_s1s2_bns1_x910.h:529-700): Muls by the scale over the slice, barrier;
# - SoftmaxBasicComputeNoTail (..._x910_base.h:1973-2000): SoftmaxFlashV2<float, update, reuse, basic block>, whose
#   float basic-block body (CANN 8.1.RC1 ascendc highlevel_api impl/activation/softmax/membase/common/
#   softmax_flashv2_impl/softmax_flashv2_basic_block_impl.h; its row reductions in softmax_flashv2_block_reduce_impl.h
#   SpecialBasicBlockMaxImpl / ...AddImpl, which for 512 columns reduce [8,512] -> [8,64] -> [8,8] -> [8,1] by
#   BlockReduce of 64, 8 and 1 repeats) is: row max; Brcb; Copy of the old max; Max; 8 broadcast Subs of 8 repeats
#   (one per 64-column block, no barrier between) and the old-minus-new max Sub; Exp of that; Exp of the slice; row
#   sum; Brcb; Mul and Add of the running sum;
# - SoftmaxResCopyOut (..._x910.h:489-527): barrier, then the fp32 -> fp16 Cast in place, copied out by MTE3.
# The tiling gives this kernel (sOuter, sInner, softmaxSOuter) = (128, 512, 8) and one vector core per 128-row
# block on 24 AI Cores for the file's shape (docs/calibration.md "Core split and template").
PFA_HP_SLICE = (("Muls", 64, True),
                ("BlockReduceMax", 64, True), ("BlockReduceMax", 8, True), ("BlockReduceMax", 1, True),
                ("Brcb", 1, True), ("Copy", 1, True), ("Max", 1, True),
                *(("Sub", 8, False),) * 8, ("Sub", 1, True), ("Exp", 1, True), ("Exp", 64, True),
                ("BlockReduceSum", 64, True), ("BlockReduceSum", 8, True), ("BlockReduceSum", 1, True),
                ("Brcb", 1, True), ("Mul", 1, True), ("Add", 1, True),
                ("Cast", 64, True))
PFA_SLICES_PER_8K = (8192 // 512) * (128 // 8)  # per vector core: 16 key tiles of 512 x 16 slices of 8 rows


def slice_cycles(chip_name: str, cycles_per_repeat) -> float:
    """Cycles of PFA_HP_SLICE on one vector unit: each instruction holds the unit for repeats x
    cycles_per_repeat(class) and completes its inherent latency later (npusim's LATENCY table, else
    ChipSpec.vector_latency_cycles); a PipeBarrier waits for every issued instruction to complete. Scalar
    issue and flag waits are left out, so this is a floor of the slice."""
    lat_default = get_chip(chip_name).vector_latency_cycles
    free = barrier = done = 0.0
    for name, repeats, barrier_after in PFA_HP_SLICE:
        cls = getattr(kernel_isa, name)
        start = max(free, barrier)
        free = start + repeats * cycles_per_repeat(cls)
        done = max(done, free + cls.latency.get(np.dtype(np.float32), lat_default))
        if barrier_after:
            barrier = done
    return done


def pfa_floor(chip_name: str, board_slope_us: float) -> dict:
    """The board's cycles per slice against the slice's floors (docs/calibration.md)."""
    vb = get_chip(chip_name).vector_bytes_per_cycle
    return {"board_cycles_per_slice": board_slope_us * get_chip(chip_name).clock_hz / 1e6 / PFA_SLICES_PER_8K,
            "slices_per_8k": PFA_SLICES_PER_8K, "repeats": sum(r for _, r, _ in PFA_HP_SLICE),
            "instructions": len(PFA_HP_SLICE),
            "barriers": sum(b for _, _, b in PFA_HP_SLICE),
            "model_rates": slice_cycles(chip_name, lambda cls: cls.cost * 256 / vb),
            "peak_rate": slice_cycles(chip_name, lambda cls: 1.0)}


# ---- the kernel the board's call runs on CANN 8.5.0: FusedInferAttentionScore's non-quant GQA kernel ----------
# docs/calibration.md "Which kernel the board ran". [C] = cannmirror/ops-transformer @ tag v8.5.0 (6ead121). For an
# fp16 BSH call with D = 128 and no pse/prefix/padding/quant inputs, TilingFusedInferAttentionScore hands the call to
# TilingFusedInferAttentionScoreV3 (RouteToFia, op_host/arch32/fused_infer_attention_score_tiling_v3.cpp:818-868,
# CheckGqaConstrain), whose 910B template is FiaTilingNonQuant ([C] attention/common/op_host/arch32/
# fia_tiling_nonquant.cpp): base blocks of mBase = 512 query rows x sInner = 512 keys for S1 > 16 (CalcInnerSize,
# CalcMBaseSize), split by SplitCore (attention/common/op_host/split_core.cpp) over the AI Cores by a cost per block,
# cutting a row of blocks between cores where needed (flash decode, combined afterwards), every AI Core's two vector
# cores each on half of every block's rows; score tiles go through the workspace in fp32, P in fp16
# (CalcNormalWorkspaceSize: MM1_RES 4 B, V1_RES 2 B). npusim does not model this kernel; these are its floors.
# The workspace round trips of one block (fia_block_vec_nonquant.h): the fp32 score tile written by FixPipe and read
# by the vector cores (DealBmm1ResBaseBlock :426-446), fp16 P written by them and read by the cube; the fp32 PV tile
# written and read (DealBmm2ResBaseBlock :599-612); the fp32 running output read back unless the block is the first of
# its core's run of a row and written unless it is the last (:617-673), whose partial goes to the flash-decode
# workspace and is read once by the combine.
FIA_M_BASE, FIA_S2_BASE = 512, 512
FIA_L2_BYTES_PER_SCORE = 4 + 4 + 2 + 2


def fia_floor(chip_name: str, sq: int, d: int, slice_cycles_model: float) -> dict:
    """Per 8192 more keys (B = 1, one head, no mask), FiaTilingNonQuant's split and the floors of its steady state:
    the vector time per vector core at npusim's price per score element (CANN's PFA high-precision 8 x 512 slice,
    slice_cycles_model, as a stand-in for FIA's own 16 x 512 slices, not priced), the chip L2 time of its workspace
    round trips and K/V/Q reads at the one shared budget, and the cube time per AI Core (mm1 + mm2 at the fp16 MAC
    rate). Each core's share here is one run of `blocks / cores` blocks of one row (all blocks cost the same)."""
    spec = get_chip(chip_name)
    row_blocks = -(-sq // FIA_M_BASE)
    blocks = row_blocks * (8192 // FIA_S2_BASE)  # all blocks cost the same here: SplitCore gives each core an equal share
    cores = min(spec.aic_count, blocks)
    elements = sq * 8192
    vec_cycles = elements / (cores * spec.aiv_per_aic) / (8 * 512) * slice_cycles_model
    run = max(blocks / cores, 1.0)  # blocks per core's run of one row
    m, s2 = FIA_M_BASE, FIA_S2_BASE
    per_block = (m * s2 * FIA_L2_BYTES_PER_SCORE + 2 * m * d * 4 + 2 * m * d * 4 * (run - 1) / run
                 + 2 * s2 * d * 2  # K and V tiles, fp16
                 + (m * d * 2 + 2 * m * d * 4) / run)  # Q once per run; the run's fp32 partial written and read
    l2_cycles = blocks * per_block / (spec.l2_bw_bytes_per_s / spec.clock_hz)
    cube_cycles = blocks / cores * 2 * FIA_M_BASE * FIA_S2_BASE * d / spec.macs_per_cycle("float16")
    to_us = spec.cycles_to_us
    return {"cores": cores, "blocks": blocks, "blocks_per_core": blocks / cores, "row_split": cores // row_blocks,
            "l2_bytes_per_score": per_block / (m * s2),
            "vector_us": to_us(vec_cycles), "l2_us": to_us(l2_cycles), "cube_us": to_us(cube_cycles)}


# ---- the FA file's board step against its floors, with its data moved as the board's kernel moves it --------------
# docs/calibration.md "L2: what the two boards say". [H] = hicann/ops-transformer @ c29bc10; the same logic at [C] v8.5.0
# (op_host/arch32/). The FA file's call (torch_npu.npu_fusion_attention, B = 1, N = 1, D = 128, fp16, no mask; not TND, so
# not the varlen tiling) runs, for S2 > 1024, FlashAttentionScore's S1s2Bn2gs1 template ([H] attention/
# flash_attention_score/op_host/flash_attention_score_tiling_general.cpp: templates tried by priority :4428-4433, SameAB's
# IsCapable :3495-3525 rejects D = 128 fp16, S1s2Bn2gs1::IsCapable :3215 needs s2Size > 1024): s1 blocks of 128 rows
# (CalcS1S2BasicBlock :3059, as B N ceil(S1 / 64) > aivNum), key tiles of 128 x nRatio 8 = 1024 (CalcNRatio :3072), and
# enableL1Reuse (SetEnableL1Reuse :3097: fp16, D <= L1REUSE_D_LIMIT 128, no mask = SparseEnum::ALL), which pairs the two
# AIVs of an AI Core on alternate blocks (RefreshSplitFactor :3234; op_kernel/flash_attention_score_s1s2_bn2gs1.h Process
# :768-774) and lets their Matmuls share each K and V tile in L1 (b1Type / b2Type MatmulType with IBShare = enableL1Reuse,
# CFG_IBSHARE_EXCEED, :71-118). The vector step per worker is 16 slices of 8 x 1024 fp32 (vec1S1BaseSize = 1024 / s2 * 8,
# :1062): Muls, SoftmaxFlashV2, Cast, copy out (ProcessVec1 :1247-1500), the same classes and repeats as npusim's FA
# kernel. Per worker and step the workspace round trips are: fp32 scores written by FixPipe and read by vec1, fp16 P
# written by vec1 and read by mm2, the fp32 PV tile written and read (ProcessVec2 :2146-2250), the fp32 running output
# read and written (vec2Res, every tile but an item's first and last); per AI Core the K and V tiles once (shared).
# npusim models the FA file with its varlen operator, whose CANN template has no L1 reuse (enableL1Reuse is never set in
# FlashAttentionVarLenScoreTiling), so npusim's model loads K and V once per AIV: 0.5 MB more per AI-Core step.
FA_ROWS, FA_TILE = 128, 1024


def fa_busiest_steps(spec, s: int) -> tuple[int, int, int]:
    """(128-row blocks, blocks of the busiest vector core, its steps) at S = Sq = Skv, one head: ceil(blocks / aivNum)
    blocks of ceil(S / 1024) key tiles each (S1s2Bn2gs1's split)."""
    blocks = -(-s // FA_ROWS)
    per_aiv = -(-blocks // (spec.aic_count * spec.aiv_per_aic))
    return blocks, per_aiv, per_aiv * -(-s // FA_TILE)


def fa_step_l2_bytes(d: int, kv_shared: bool = True) -> int:
    """L2 bytes of one FA step (128 rows x one 1024-key tile per worker) on one AI Core with two workers."""
    worker = FA_ROWS * FA_TILE * (4 + 4 + 2 + 2) + FA_ROWS * d * 4 * 4  # scores w+r, P w+r, PV w+r, running out r+w
    return 2 * worker + 2 * FA_TILE * d * 2 * (1 if kv_shared else 2)


#: chip L2 budgets with a source (../research/hardware.md §6a/§6c, Ascend910B2 at 1.8 GHz), B/cycle
L2_CANDIDATES = (("S8 L2_RO / L2_WO (npusim's budget)", 2550.0),
                 ("ini l2_rate 110 B/cycle x 24 AI Cores", 110.0 * 24),
                 ("L2/HBM ratio 5.0 x S8 DDR 850 B/cycle", 5.0 * 850),
                 ("msprof L2CACHE_THEORY_BW 7.78 TB/s", 7.78e12 / 1.8e9))


def fa_floor(chip_name: str, s: int, d: int, board_us: float, launch_us: float, vector_cycles_per_step: float) -> dict:
    """The FA board's steady step (S = Sq = Skv, one head) against its floors: the step time is the board's time without
    the launch overhead over the busiest AIV's steps (S1s2Bn2gs1's split: ceil(blocks / aivNum) blocks per AIV, paired
    on ceil(blocks / 2 ceil(blocks / aivNum)) AI Cores); L2 bytes per AI-Core step as the board's kernel moves them
    (fa_step_l2_bytes) on every busy AI Core at each L2_CANDIDATES budget; the vector floor is npusim's own FA step
    (vector busy cycles per step, from the trace); the cube floor mm1 + mm2 of two workers."""
    spec = get_chip(chip_name)
    blocks, per_aiv, steps = fa_busiest_steps(spec, s)
    cores = -(-blocks // (2 * per_aiv))
    step = (board_us - launch_us) * spec.clock_hz / 1e6 / steps
    nbytes = fa_step_l2_bytes(d)
    return {"cores": cores, "steps": steps, "board_step_cycles": step, "l2_mb_per_core_step": nbytes / 1e6,
            "l2_mb_per_core_step_unshared": fa_step_l2_bytes(d, kv_shared=False) / 1e6,
            "board_l2_bytes_per_cycle": cores * nbytes / step,
            "l2_cycles": {label: cores * nbytes / bpc for label, bpc in L2_CANDIDATES},
            "vector_cycles": vector_cycles_per_step, "cube_side": fa_cube_side_cycles(spec, d)}


def fa_cube_side_cycles(spec, d: int) -> dict:
    """The AIC's pipes per AI-Core step (two workers) at their peak rates (ChipSpec, hardware.md §3/§6b): Mmad of mm1 +
    mm2; MTE1 of Q and K (mm1) and P and V (mm2) into L0A / L0B; FixPipe of the fp32 score and PV tiles to GM; MTE2 of
    the shared K and V tiles and both workers' P into L1 (Q stays for an item's 8..16 tiles: left out). Fully overlapped
    the step costs the largest; with no overlap between the pipes, their sum."""
    pipes = {"cube": 2 * 2 * FA_ROWS * FA_TILE * d / spec.macs_per_cycle("float16"),
             "mte1": (2 * (FA_ROWS * d + FA_ROWS * FA_TILE) * 2 / spec.l1_to_l0a_bytes_per_cycle
                      + 2 * (FA_TILE * d + FA_TILE * d) * 2 / spec.l1_to_l0b_bytes_per_cycle),
             "fixpipe": 2 * (FA_ROWS * FA_TILE + FA_ROWS * d) * 4 / spec.l0c_to_gm_bytes_per_cycle,
             "mte2": (2 * FA_TILE * d * 2 + 2 * FA_ROWS * FA_TILE * 2) / spec.gm_to_l1_bytes_per_cycle}
    return {**pipes, "overlapped": max(pipes.values()), "serial": sum(pipes.values())}


def fia_l2_budgets(fia: dict, board_us_per_8k: float) -> dict:
    """The fused-infer kernel's L2 floor per 8192 keys at each L2_CANDIDATES budget (fia_floor prices it at the chip's
    own), and the budget the PFA board's pace needs at least."""
    spec = get_chip("Ascend910B2")
    own = spec.l2_bw_bytes_per_s / spec.clock_hz
    return {"l2_us": {label: fia["l2_us"] * own / bpc for label, bpc in L2_CANDIDATES},
            "needed_bytes_per_cycle": own * fia["l2_us"] / board_us_per_8k}


#: what-if variants of shared constants, far beyond their sources, to show whether any moves the PFA step to the
#: board: every vector cost class at twice its rate (two-source ops, Exp and Cast at the msprof lane peak of hardware.md
#: §4, tensor-scalar ops beyond it), twice the chip's L2 budget (an upper bound of separate read and write
#: calendars), and both
WHATIF = {"vector x2": {"vector_bytes_per_cycle": 512}, "L2 x2": {"l2_bw_x": 2.0},
          "vector x2, L2 x2": {"vector_bytes_per_cycle": 512, "l2_bw_x": 2.0}}


def whatif_points(chip_name: str, rows: list) -> dict:
    """Every fitted point of both files (no launch) under each WHATIF variant, and the launch overhead each
    variant would get from the FA file (the shipped fit's rule): {label: {"launch_us", "points": [(file, Sq,
    Skv, board us, model us without launch)]}}."""
    out = {}
    base = get_chip(chip_name)
    for label, changes in WHATIF.items():
        ch = dict(changes)
        if "l2_bw_x" in ch:
            ch["l2_bw_bytes_per_s"] = base.l2_bw_bytes_per_s * ch.pop("l2_bw_x")
        pts = []
        for file, _, sq, skv, meas, b, _ in rows:
            if b is None:
                continue
            us = (fa_us_without_launch(chip_name, sq, 128, 1, **ch) if file == "fa" else
                  pfa_us_without_launch(chip_name, sq, skv, 128, 1, **ch))
            pts.append((file, sq, skv, meas, us))
        fa = [(m, u) for f, _, _, m, u in pts if f == "fa"]
        launch = fit_launch_overhead_us(np.array([m for m, _ in fa]), np.array([u for _, u in fa]))
        out[label] = {"launch_us": launch, "points": pts}
    return out


#: the FA file's call with the cube side the sources give its template (benchmarks/fa_board_cube_side.py: K and V shared
#: by the two AIVs in one one-deep L1 cache; L0C single- or double-buffered, bracketing the unit flag npusim does not
#: model) at the L2 budgets with a source that bound the conflict (npusim's, and msprof's theory figure)
BOARD_CUBE_SIDE = tuple((f"L0C x{depth}, L2 {bpc:.0f}", depth, bpc) for depth in (2, 1)
                        for bpc in (L2_CANDIDATES[0][1], L2_CANDIDATES[3][1]))


def board_cube_side_points(chip_name: str, rows: list) -> dict:
    """Every fitted point of both files (no launch) with the FA file's S1s2Bn2gs1 calls (S2 > 1024; S = 1024 runs
    another template, kept as shipped) on the board's cube side, at one L2 budget for both files, and the launch overhead
    the FA file then gives: {label: {"launch_us", "points": [(file, Sq, Skv, board us, model us without launch)]}}."""
    base, out, pfa_at = get_chip(chip_name), {}, {}
    for label, depth, bpc in BOARD_CUBE_SIDE:
        ch = {"l2_bw_bytes_per_s": bpc * base.clock_hz}
        own = abs(bpc * base.clock_hz - base.l2_bw_bytes_per_s) < 1.0  # the shipped budget: rows have the point
        pts = []
        for file, _, sq, skv, meas, b, _ in rows:
            if b is None:
                continue
            if file == "pfa" and own:
                us = b
            elif file == "pfa":
                if (bpc, skv) not in pfa_at:
                    pfa_at[(bpc, skv)] = pfa_us_without_launch(chip_name, sq, skv, 128, 1, **ch)
                us = pfa_at[(bpc, skv)]
            elif skv <= FA_TILE:
                us = b if own else fa_us_without_launch(chip_name, sq, 128, 1, **ch)
            else:
                with board_cube_side(depth):
                    us = fa_us_without_launch(chip_name, sq, 128, 1, **ch)
            pts.append((file, sq, skv, meas, us))
        fa = [(m, u) for f, _, _, m, u in pts if f == "fa"]
        out[label] = {"launch_us": fit_launch_overhead_us(np.array([m for m, _ in fa]), np.array([u for _, u in fa])),
                      "points": pts}
    return out


def fit_launch_overhead_us(measured: np.ndarray, base: np.ndarray) -> float:
    """argmin_L sum(((base + L) / measured - 1)^2) = sum((measured - base) / measured^2) / sum(1 / measured^2)."""
    w = 1.0 / measured ** 2
    return float(np.sum((measured - base) * w) / np.sum(w))


def modeled_points() -> list[tuple]:
    """(file, kernel, Sq, Skv, measured us, model us without launch or None for reference-only rows, model
    us without launch at the other PFA precision mode (inner_precise=1) or None)."""
    rows = []
    for p in load_points(FA_FILE):
        s, d, n = int(p["seq_len"]), int(p["head_dim"]), int(p["heads"])
        base = fa_us_without_launch(p["chip"], s, d, n) if p["kernel"] == "torch_npu" else None
        rows.append(("fa", p["kernel"], s, s, float(p["time_us"]), base, None))
    for p in load_points(PFA_FILE):
        sq, skv, d, n = int(p["q_len"]), int(p["kv_len"]), int(p["head_dim"]), int(p["heads"])
        rows.append(("pfa", p["kernel"], sq, skv, float(p["time_us"]), pfa_us_without_launch(p["chip"], sq, skv, d, n),
                     pfa_us_without_launch(p["chip"], sq, skv, d, n, inner_precise=1)))
    return rows


def slope_us_per_8k(rows: list, col: int) -> float | None:
    """The PFA file's marginal cost of 8192 more keys (board: col 4; model: col 5 or 6), us."""
    pfa = sorted((r for r in rows if r[0] == "pfa"), key=lambda r: r[3])
    if len(pfa) < 2:
        return None
    a, b = pfa[0], pfa[-1]
    return (b[col] - a[col]) / (b[3] - a[3]) * 8192


def main() -> None:
    print(f"machine: {platform.machine()}, Python {platform.python_version()}; data: {FA_FILE.name}, {PFA_FILE.name}")
    rows = modeled_points()
    fitted = {}
    for file in ("fa", "pfa", "both"):
        fit = [r for r in rows if (file == "both" or r[0] == file) and r[5] is not None]
        fitted[file] = fit_launch_overhead_us(np.array([r[4] for r in fit]), np.array([r[5] for r in fit]))
    launch = LAUNCH_OVERHEAD_S * 1e6
    print(f"fitted launch overhead, FA file: {fitted['fa']:.2f} us (shipped LAUNCH_OVERHEAD_S = {launch:.2f} us, "
          "every operator)")
    print(f"diagnostic fits: PFA file alone {fitted['pfa']:.2f} us, both files {fitted['both']:.2f} us "
          f"(PFA at inner_precise={BOARD_PFA_INNER_PRECISE}, the board's setting)")
    print(f"{'file':4s} {'kernel':16s} {'Sq':>6s} {'Skv':>6s} {'board us':>9s} {'old us':>8s} {'old err':>8s} "
          f"{'no-launch':>10s} {'new us':>8s} {'new err':>8s} {'ip=1 no-launch':>15s}")
    errs: dict = {}
    for file, kernel, sq, skv, meas, base, other in rows:
        if base is None:
            print(f"{file:4s} {kernel:16s} {sq:6d} {skv:6d} {meas:9.1f}   (reference only, a different schedule)")
            continue
        old = OLD_US[(file, sq, skv)]
        new = base + launch
        errs.setdefault(file, []).append((old / meas - 1, new / meas - 1))
        tail = f" {other:15.1f}" if other is not None else ""
        print(f"{file:4s} {kernel:16s} {sq:6d} {skv:6d} {meas:9.1f} {old:8.1f} {100 * (old / meas - 1):+7.1f}% "
              f"{base:10.1f} {new:8.1f} {100 * (new / meas - 1):+7.1f}%{tail}")
    per_file = {}
    for file, e in errs.items():
        e = np.abs(np.array(e))
        per_file[file] = {"old_mape_pct": 100 * e[:, 0].mean(), "old_max_pct": 100 * e[:, 0].max(),
                          "mape_pct": 100 * e[:, 1].mean(), "max_pct": 100 * e[:, 1].max(), "points": len(e)}
        print(f"{file}: MAPE old {100 * e[:, 0].mean():.1f}% (max {100 * e[:, 0].max():.1f}%), "
              f"new {100 * e[:, 1].mean():.1f}% (max {100 * e[:, 1].max():.1f}%)")
    slopes = {"board": slope_us_per_8k(rows, 4), "model": slope_us_per_8k(rows, 5),
              "model_ip1": slope_us_per_8k(rows, 6)}
    print(f"PFA file, cost of 8192 more keys: board {slopes['board']:.1f} us, model {slopes['model']:.1f} us "
          f"(inner_precise=1: {slopes['model_ip1']:.1f} us)")
    floor = pfa_floor("Ascend910B2", slopes["board"])
    print(f"PFA board step per 8 x 512 fp32 slice and vector core: {floor['board_cycles_per_slice']:.0f} cycles; CANN's "
          f"high-precision slice ({floor['instructions']} vector instructions, {floor['repeats']} repeats, "
          f"{floor['barriers']} PipeBarriers) takes {floor['model_rates']:.0f} cycles at npusim's rates, "
          f"{floor['peak_rate']:.0f} at one repeat per cycle for every class, {floor['repeats']} with no latency")
    fia = fia_floor("Ascend910B2", 3072, 128, floor["model_rates"])
    print(f"CANN 8.5.0's fused-infer GQA kernel (not modelled), per 8192 more keys: {fia['blocks']} blocks of 512 x 512 "
          f"on {fia['cores']} AI Cores ({fia['blocks_per_core']:.0f} each, each row cut in {fia['row_split']}), both "
          f"vector cores per block: vector {fia['vector_us']:.1f} us, L2 {fia['l2_us']:.1f} us "
          f"({fia['l2_bytes_per_score']:.1f} B per score), cube "
          f"{fia['cube_us']:.1f} us (board {slopes['board']:.1f} us)")
    fa_point = max((r for r in rows if r[0] == "fa" and r[5] is not None), key=lambda r: r[2])
    fa = fa_floor("Ascend910B2", fa_point[2], 128, fa_point[4], launch,
                  fa_vector_cycles_per_step("Ascend910B2", fa_point[2], 128))
    print(f"FA board, S = {fa_point[2]}: step {fa['board_step_cycles']:.0f} cycles ({fa['steps']} steps of the busiest AIV, "
          f"{fa['cores']} AI Cores); L2 {fa['l2_mb_per_core_step']:.2f} MB per AI-Core step with K/V shared as its "
          f"template does ({fa['l2_mb_per_core_step_unshared']:.2f} MB as npusim's varlen model loads them), "
          f"{fa['board_l2_bytes_per_cycle']:.0f} B/cycle at the board's pace; npusim's vector step "
          f"{fa['vector_cycles']:.0f} cycles; its cube side (Mmad {fa['cube_side']['cube']:.0f}, MTE1 "
          f"{fa['cube_side']['mte1']:.0f}, FixPipe {fa['cube_side']['fixpipe']:.0f}, MTE2 {fa['cube_side']['mte2']:.0f} "
          f"cycles) {fa['cube_side']['overlapped']:.0f} cycles overlapped, {fa['cube_side']['serial']:.0f} in series")
    budgets = fia_l2_budgets(fia, slopes["board"])
    for label, bpc in L2_CANDIDATES:
        print(f"L2 {bpc:6.0f} B/cycle ({label}): FA step floor {fa['l2_cycles'][label]:.0f} cycles (board "
              f"{fa['board_step_cycles']:.0f}); fused-infer floor {budgets['l2_us'][label]:.1f} us per 8192 keys (board "
              f"{slopes['board']:.1f})")
    print(f"the PFA board's pace needs an L2 budget of at least {budgets['needed_bytes_per_cycle']:.0f} B/cycle")
    whatif = whatif_points("Ascend910B2", rows)
    for label, w in whatif.items():
        errs_w = ", ".join(f"{f} {skv}: {100 * ((u + w['launch_us']) / m - 1):+.1f}%" for f, _, skv, m, u in w["points"])
        print(f"what-if {label} (launch fitted on the FA file: {w['launch_us']:.1f} us): {errs_w}")
    cube_side = board_cube_side_points("Ascend910B2", rows)
    for label, w in cube_side.items():
        errs_w = ", ".join(f"{f} {skv}: {u:.1f} us, {100 * ((u + w['launch_us']) / m - 1):+.1f}%"
                           for f, _, skv, m, u in w["points"])
        print(f"FA calls on the board's cube side, {label} (launch fitted on the FA file: {w['launch_us']:.1f} us): "
              f"{errs_w}")
    points = [{"file": f, "kernel": k, "sq": sq, "skv": skv, "board_us": m, "base_us": b,
               "old_us": OLD_US[(f, sq, skv)], "new_us": b + launch, "base_ip1_us": o}
              for f, k, sq, skv, m, b, o in rows if b is not None]
    save("calibration", {"fitted_us": fitted, "shipped_us": {"launch": launch},
                         "pfa_inner_precise": BOARD_PFA_INNER_PRECISE, "pfa_slope_us_per_8k": slopes,
                         "files": per_file, "points": points, "pfa_floor": floor, "fia_floor": fia, "whatif": whatif,
                         "fa_floor": fa, "fia_l2_budgets": budgets, "l2_candidates": L2_CANDIDATES,
                         "board_cube_side": cube_side})


if __name__ == "__main__":
    main()
