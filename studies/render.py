"""Rewrite the generated blocks of README.md and docs/*.md from benchmarks/results/*.json.

A generated block sits between ``<!-- generated:KEY -->`` and ``<!-- /generated:KEY -->``; RENDERERS[KEY]
makes its text from the saved results. A table row whose benchmark has no saved result yet keeps its
current text and is listed as not regenerated (run that benchmark, or ``python -m studies``, to fill it).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from results import load  # noqa: E402

sys.path.insert(0, str(ROOT / "studies"))
import sweep_tables  # noqa: E402

TARGETS = ("README.md", "docs/scatter_pa_kv_cache.md", "docs/performance.md", "docs/calibration.md",
           "docs/timeouts.md")
_BLOCK = re.compile(r"(<!-- generated:(?P<key>[\w-]+) -->\n)(?P<body>.*?)(<!-- /generated:(?P=key) -->)", re.S)


def _machine_line(names: list[str]) -> str:
    """Machine, CPUs, Python, numpy, and the load averages of the runs behind a table."""
    return _machine_line_of([r["machine"] for r in (load(n) for n in names) if r])


def _machine_line_of(ms: list[dict]) -> str:
    if not ms:
        return ""
    m = ms[0]
    loads = sorted({x["load_avg"][0] for x in ms})
    dates = sorted({x["date_utc"][:10] for x in ms})
    load_txt = f"{loads[0]:g}" if len(loads) == 1 else f"{loads[0]:g}-{loads[-1]:g}"
    return (f"Measured on {m['cpu']}, {m['cpus']} CPUs, Python {m['python']}, numpy {m['numpy']} "
            f"({', '.join(dates)}; 1-minute load average {load_txt} during the runs: the machine is shared, "
            "so wall times are noisy).")


def _rows_performance() -> dict:
    """First cell -> second cell of the README performance table, for every saved result."""
    rows = {}
    s = load("sim_speed")
    if s:
        rows["simulator speed, vector kernel, timing mode, one core (`benchmarks/sim_speed.py`)"] = \
            f"{s['vector_timing']['rate']:,.0f} instructions per CPU second (target >= 1,000,000)"
        rows["simulator speed, same, full mode"] = f"{s['vector_full']['rate']:,.0f} instructions per CPU second"
        rows["simulator speed, FlashAttentionVarLenScore 2048 x 2048 N=8 D=128, timing mode (same script)"] = \
            f"{s['fa_varlen_timing']['rate']:,.0f} instructions per CPU second (target >= 800,000)"
    p = load("pfa")
    if p:
        t, f, n = p["rows"]["timing"], p["rows"]["full"], p["rows"]["numpy"]
        rows["PFA B=1 N=8 S=4096 D=128 fp16 causal, Ascend910B2, timing mode (`benchmarks/pfa.py`)"] = \
            f"{t['wall_s']:.1f} s wall, {t['peak_mb']:.0f} MB peak (target <= 15 s)"
        rows["same, full mode (bit-exact outputs)"] = \
            (f"{f['wall_s']:.1f} s wall, {f['peak_mb']:.0f} MB peak (target <= 60 s); {p['full_over_numpy']:.1f}x "
             f"a float32 numpy attention of the same shape and mask ({n['wall_s']:.2f} s"
             + (f"; best wall time of {p['rounds']} alternating runs each" if "rounds" in p else "")
             + "; target <= 10x)"
             + (f"; {p['full_over_numpy_cpu']:.1f}x by CPU time" if "full_over_numpy_cpu" in p else ""))
        so, si, _, cores = t["tiling"]
        rows["same: modeled operator time"] = f"{t['time_us']:.1f} us ({cores} AI Cores, sOuter {so}, sInner {si})"
    z = load("sanitizer")
    if z:
        lo, hi = z["load_range"]
        rows["same, timing mode with `sanitize=True`, against plain timing mode in the same round "
             "(`benchmarks/sanitizer.py`)"] = \
            (f"{z['ratio']:.2f}x CPU time, the worst of {len(z['ratios'])} alternating rounds "
             f"({', '.join(f'{x:.2f}' for x in z['ratios'])}; worst round {z['sanitized_cpu_s']:.1f} s vs "
             f"{z['plain_cpu_s']:.1f} s, wall {z['sanitized_wall_s']:.1f} s vs {z['plain_wall_s']:.1f} s at load "
             f"average {lo:.1f}-{hi:.1f}; target <= 3x), {z['reports']} reports on {z['instructions']:,} instructions")
    fa = load("fa_varlen")
    if fa:
        t, f = fa["rows"]["timing"], fa["rows"]["full"]
        rows["FlashAttentionVarLenScore TND S=4096 N=8 D=128 fp16 causal, timing mode (`benchmarks/fa_varlen.py`)"] = \
            f"{t['wall_s']:.1f} s wall, {t['peak_mb']:.0f} MB peak"
        rows["same, full mode"] = f"{f['wall_s']:.1f} s wall, {f['peak_mb']:.0f} MB peak; modeled {f['time_us']:.1f} us"
    k = load("scatter_pa_kv_cache")
    if k:
        norm, nz = k["rows"]
        rows["ScatterPaKvCache 4096 tokens, 8 KV heads, D=128, block 128, fp16, Norm "
             "(`benchmarks/scatter_pa_kv_cache.py`)"] = \
            (f"{norm['time_us']:.1f} us modeled, {norm['gb_s']:.0f} GB/s ({norm['peak_pct']:.0f}% of HBM peak); "
             f"{norm['wall_full_s']:.1f} s full / {norm['wall_timing_s']:.1f} s timing wall")
        rows["same, PA_NZ"] = (f"{nz['time_us']:.1f} us modeled, {nz['gb_s']:.0f} GB/s ({nz['peak_pct']:.0f}%); "
                               f"{nz['wall_full_s']:.1f} s / {nz['wall_timing_s']:.1f} s wall")
    c = load("calibration")
    if c:
        fa, pfa = c["files"]["fa"], c["files"]["pfa"]
        within = all(abs(p["new_us"] / p["board_us"] - 1) <= 0.10 for p in c["points"])
        rows[CALIBRATION_ROW] = (
            f"MAPE {fa['mape_pct']:.1f}% / {pfa['mape_pct']:.1f}%, max {fa['max_pct']:.1f}% / {pfa['max_pct']:.1f}% "
            f"({'every point within 10%' if within else 'NOT every point within 10%'}) with one parameter set "
            f"(launch overhead {c['shipped_us']['launch']:.1f} us, every operator); PFA at the board's "
            f"inner_precise={c.get('pfa_inner_precise', 0)} (docs/calibration.md)")
    for name, row in ESTIMATE_ROWS.items():
        e = load(name)
        if e:
            rows[row] = _halves_cell(e)
    e = load("estimate_accuracy_fag")
    if e:
        huge = "; ".join(f"{h['name']}: {h['cpu_s']:.1f} s CPU, {h['peak_mb']:.0f} MB" for h in e["huge"])
        worst = max((r for r in e["rows"] if r["half"] == "check"), key=lambda r: abs(r.get("error_pct", float("inf"))))
        met = "" if e["check_max_pct"] <= 3 else ": NOT met"
        per = "; ".join(f"{k} {v:.2f}%" for k, v in e.get("check_by_template", {}).items())
        strata = f", {e['check_configs'] // len(e['strata'])} per template" if e.get("strata") else ""
        tuned = {r["config"] for r in e["rows"] if r["half"] == "tune"}
        studied = sum(r["config"] in tuned for r in e["rows"] if r["half"] == "check")
        since = (f" (from the seed's one run; {studied} of these calls were studied afterwards and are tuning calls now)"
                 if studied else "")
        rows[f"same, FlashAttentionUnpaddingScoreGradV5, {e['check_configs']} fresh random checking configurations"
             f"{strata} (seed {e['check_seed']}) beside a {e['tune_configs']}-configuration tuning set "
             "(`benchmarks/estimate_accuracy_fag.py`)"] = \
            (f"{e['check_configs']} checking configurations: max {e['check_max_pct']:.2f}% ({worst['config']}), mean "
             f"{e['check_mean_pct']:.2f}% (target <= 3%{met}){since}{'; max per template: ' + per if per else ''}; tuning set "
             f"max {e['tune_max_pct']:.2f}%; largest shapes"
             f"{' (estimate CPU at load average %.1f)' % e['huge_load_avg'][0] if e.get('huge_load_avg') else ''}: {huge}")
    f = load("fag")
    if f:
        r = f["rows"]

        def cell(op, mode):
            x = r[f"{op}/{mode}"]
            return f"{x['time_us']:.1f} us modeled ({x['wall_s']:.1f} s wall, {x['peak_mb']:.0f} MB)"
        load_txt = f"load average {f['machine']['load_avg'][0]:.1f}"
        rows["FlashAttentionUnpaddingScoreGradV5 beside FlashAttentionVarLenScore, TND S=4096 N=8 D=128 fp16 causal, "
             "timing mode (`benchmarks/fag.py`)"] = \
            (f"forward {cell('fa', 'timing')}; backward {cell('fag', 'timing')}; deterministic backward "
             f"{cell('fag_det', 'timing')}; backward / forward {f['ratio']:.2f} (cube FLOP ratio {f['flop_ratio']:.1f}); "
             f"deterministic=True costs {f['det_cost_pct']:+.1f}% modeled time; busiest pipes of the latest core: "
             f"forward {f['bound']['fa']}, backward {f['bound']['fag']}; {load_txt}")
        if f.get("full"):
            rows["same, full mode (`benchmarks/fag.py --full`)"] = \
                (f"forward {cell('fa', 'full')}; backward {cell('fag', 'full')}; deterministic backward "
                 f"{cell('fag_det', 'full')}; {load_txt}")
    e = load("estimate_accuracy_sfag")
    if e:
        n = e["check"]
        met = "" if e["check_max_pct"] <= 3 else ": NOT met"
        worst = max((r for r in e["rows"] if r["half"] == "check"), key=lambda r: abs(r["error_pct"]))
        rows[f"same, SparseFlashAttentionGrad, {n} fresh checking configurations (drawn with seed {e['check_seed']}; "
             f"tuned on {e['tune']} others, `benchmarks/estimate_accuracy_sfag.py`)"] = \
            (f"max {e['check_max_pct']:.2f}%, mean {e['check_mean_pct']:.2f}% over {n} (target <= 3%{met}; worst "
             f"{worst['error_pct']:+.2f}% on {_sfag_case(worst['case'])}); tuning set max {e['tune_max_pct']:.2f}%, "
             f"mean {e['tune_mean_pct']:.2f}%")
        h = e["huge"]
        rows["SparseFlashAttentionGrad estimate, S1 = S2 = 128K, N1 = 128, 32 blocks of 64 per token (same script)"] = \
            (f"{h['modeled_s']:.2f} s modeled; {h['cpu_s']:.2f} s CPU (target < 1 s)"
             + (f", first call in a fresh process ({h['cpu_s_warm']:.2f} s on a second call)" if "cpu_s_warm" in h else "")
             + f", {h['wall_s']:.1f} s wall at load {h['load_avg'][0]:.1f}, {h['peak_mb']:.0f} MB peak")
    w = load("sweep_scaling")
    if w:
        lo, hi = w["load_range"]
        rows["sweep scaling, 200 PFA tilings in timing mode, 2 vs 1 local worker (`benchmarks/sweep_scaling.py`)"] = \
            (f"{w['ratio']:.2f}x ({w['one_worker_s']:.1f} s vs {w['two_workers_s']:.1f} s; target >= 1.7x), load average "
             f"{lo:.1f}-{hi:.1f} during the runs")
        rows["same: sweep overhead per point against a bare loop of the same calls"] = \
            (f"{w['overhead_pct']:+.1f}% ({w['overhead_ms']:+.1f} ms on {1e3 * w['bare_s'] / w['points']:.0f} ms/point; "
             "target < 5%)")
    b = load("sfag")
    if b:
        c, r = b["case"], b["rows"]
        name = (f"SparseFlashAttentionGrad T1 = {c['T1']}, N1 = {c['N1']}, D = 512 + 64, S2 = {c['S2']}, "
                f"{c['ROWS'] // c['BS']} blocks of {c['BS']} per token, fp16")
        if "timing" in r:
            t = r["timing"]
            txt = (f"{t['wall_s']:.0f} s wall ({t['cpu_s']:.0f} s CPU, load {t['load_avg']:.1f}), {t['peak_mb']:.0f} MB peak, "
                   f"{t['instructions']:,} instructions; modeled {t['time_us']:.1f} us")
            if "estimate" in r:
                e = r["estimate"]
                txt += (f"; estimate {e['time_us']:.1f} us ({100 * (e['time_us'] / t['time_us'] - 1):+.1f}%; tuning side: the "
                        f"estimate's BOUND_SLACK was fitted on this case) in {e['cpu_s']:.1f} s CPU")
            rows[f"{name}, timing mode, `trace=\"summary\"` (`benchmarks/sfag.py`)"] = txt
        if "full" in r:
            f = r["full"]
            rows["same SparseFlashAttentionGrad case, full mode (bit-exact outputs)"] = \
                (f"{f['wall_s']:.0f} s wall ({f['cpu_s']:.0f} s CPU, load {f['load_avg']:.1f}), {f['peak_mb']:.0f} MB "
                 f"peak, {f['instructions']:,} instructions; modeled {f['time_us']:.1f} us")
        elif "full-cut" in r and "full-cut4" in r:
            f, f4 = r["full-cut"], r["full-cut4"]
            t1, t4 = b["full_cut_t1"], b["full_cut4_t1"]
            per_token = (f4["cpu_s"] - f["cpu_s"]) / (t4 - t1)
            whole = f["cpu_s"] + per_token * (c["T1"] - t1)
            rows["same SparseFlashAttentionGrad case, full mode (bit-exact outputs)"] = \
                (f"whole case not run: projected {whole / 60:.0f} min of CPU (linear in tokens: {per_token:.2f} s CPU "
                 f"per token between the cuts); cut to T1 = {t1} (one token per AI Core): {f['wall_s']:.0f} s wall "
                 f"({f['cpu_s']:.0f} s CPU, load {f['load_avg']:.1f}), {f['peak_mb']:.0f} MB peak; T1 = {t4}: "
                 f"{f4['wall_s']:.0f} s wall ({f4['cpu_s']:.0f} s CPU, load {f4['load_avg']:.1f}), {f4['peak_mb']:.0f} MB "
                 f"peak")
    return rows


def _sfag_case(c: dict) -> str:
    """A short label of one SFAG accuracy case (make_case keywords)."""
    keys = ("layout", "B", "S1", "S2", "seq_q", "seq_kv", "N1", "bs", "max_slots", "mode", "dtype", "rope")
    return " ".join(f"{k}={c[k]}" for k in keys if k in c)


CALIBRATION_ROW = ("calibration vs the 910B2 board files (`benchmarks/calibration.py`): FA forward (3 points), "
                   "PFA inference (2 points)")
ESTIMATE_ROWS = {  # saved result -> README row (tuning and checking halves or sets, the saved seed)
    "estimate_accuracy_pfa": "estimate mode vs timing mode, PFA, tuned on 60 configurations, checked on 14 fresh ones "
                             "plus the quick-tour and calibration shapes (`benchmarks/estimate_accuracy_pfa.py`)",
    "estimate_accuracy_fa": "same, FlashAttentionVarLenScore, tuned on 58 configurations, checked on 14 fresh ones "
                            "plus the calibration shapes (`benchmarks/estimate_accuracy_fa.py`)",
    "estimate_accuracy_spkc": "same, ScatterPaKvCache, tuned on 47 calls, checked on 14 fresh ones "
                              "(`benchmarks/estimate_accuracy_spkc.py`)",
}


def _halves_cell(e: dict) -> str:
    """Per-half max / mean |error| of a saved accuracy run, the checking half's worst case, the target."""
    parts = []
    for half in ("check", "tune"):
        h = e["halves"].get(half)
        if h:
            label = "checking" if half == "check" else "tuning"
            parts.append(f"{label} half: {h['configs']} configurations, max {h['max_pct']:.2f}%, mean "
                         f"{h['mean_pct']:.2f}%")
    check = [r for r in e["rows"] if r[0] == "check"]
    if check:
        worst = max(check, key=lambda r: abs(r[4]))
        ok = abs(worst[4]) <= 3.0
        parts.append(f"worst checking case {worst[1]} {worst[4]:+.2f}% (target <= 3% "
                     f"{'met' if ok else 'NOT met'})")
    if e.get("halves_run") not in ("all", None):
        parts.append(f"run: --half {e['halves_run']}")
    for half, c in sorted(e.get("cpu", {}).items()):
        parts.append(f"{'checking' if half == 'check' else 'tuning'} estimates up to {c['max_s']:.2f} s CPU "
                     f"(load average {c['load'][0]}-{c['load'][1]}; target < 1 s {'met' if c['max_s'] < 1 else 'NOT met'})")
    return "; ".join(parts) + f" (seed {e['seed']})"


EARLIER = "(*)"


def performance(body: str, stale: list) -> str:
    """The README performance table: saved results replace their rows; other rows are kept (and listed)."""
    new = _rows_performance()
    lines = body.rstrip("\n").split("\n")
    out, marked = [], False
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells and len(cells) == 2 and cells[0] not in ("benchmark", "---"):
            if cells[0] in new:
                line = f"| {cells[0]} | {new.pop(cells[0])} |"
            else:
                stale.append(f"README performance row {cells[0]!r}")
                marked = True
                if not cells[1].endswith(EARLIER):
                    line = f"| {cells[0]} | {cells[1]} {EARLIER} |"
        elif line.startswith("Measured on"):
            line = _machine_line(["sim_speed", "pfa", "fa_varlen", "scatter_pa_kv_cache"]) or line
            if marked:  # the table comes before this line
                line += (f" Figures marked {EARLIER} are from earlier runs that no saved result has replaced "
                         "yet.")
        out.append(line)
    for key, value in new.items():  # a result with no row yet
        out.append(f"| {key} | {value} |")
    return "\n".join(out) + "\n"


def matmul(body: str, stale: list) -> str:
    m = load("matmul_roofline")
    if not m:
        stale.append("README matmul table")
        return body
    out = ["| chip | M=N=K | modeled us | TFLOPS | % of cube peak | bound | wall s |", "|---|---|---|---|---|---|---|"]
    out += [f"| {r['chip']} | {r['size']} | {r['time_us']:.1f} | {r['tflops']:.1f} | {r['peak_pct']:.1f} | "
            f"{r['bound']} | {r['wall_s']:.1f} |" for r in m["rows"]]
    return "\n".join(out) + "\n\n" + _machine_line(["matmul_roofline"]) + "\n"


def quick_tour(body: str, stale: list) -> str:
    q = load("quick_tour")
    if not q:
        stale.append("README quick tour costs")
        return body
    c = q["case"]
    out = [f"What the large quick-tour shape (PFA B={c['B']} N={c['N']} S={c['S']} D={c['D']}) costs in each mode "
           "(`benchmarks/quick_tour.py`):", "",
           "| mode | wall s | CPU s | peak MB | modeled us | instructions |", "|---|---|---|---|---|---|"]
    names = {("estimate", "default"): "estimate", ("timing", "summary"): 'timing, `trace="summary"`',
             ("timing", "default"): "timing, default trace (rows up to 10M, then the summary)"}
    for r in q["rows"]:
        n = f"{r['instructions']:,}" if r["instructions"] else "-"
        cpu = f"{r['cpu_s']:.1f}" if "cpu_s" in r else "-"
        out.append(f"| {names.get((r['mode'], r['trace']), r['mode'])} | {r['wall_s']:.1f} | {cpu} | "
                   f"{r['peak_mb']:.0f} | {r['time_us']:.1f} | {n} |")
    out += ["", _machine_line(["quick_tour"])]
    return "\n".join(out) + "\n"


def spkc(body: str, stale: list) -> str:
    k = load("scatter_pa_kv_cache")
    if not k:
        stale.append("docs/scatter_pa_kv_cache.md benchmark")
        return body
    out = ["`python benchmarks/scatter_pa_kv_cache.py`: 4096 tokens, 8 KV heads, D = 128, block_size 128, fp16,",
           f"key and value, 64 blocks, {k['chip']} (HBM peak {k['hbm_gb_s']:.0f} GB/s). Bytes moved: 32 MiB (K and V "
           "read and", f"written once); bandwidth includes the launch overhead ({k['launch_overhead_cycles']:.0f} cycles). "
           + _machine_line(["scatter_pa_kv_cache"]), "",
           "| cache_mode | template (key) | cores | cycles | modeled µs | GB/s | % HBM peak | instructions | wall full s "
           "| wall timing s |", "|---|---|---|---|---|---|---|---|---|---|"]
    out += [f"| {r['cache_mode']} | {r['template']} ({r['tiling_key']}) | {r['cores']} | {r['cycles']} | "
            f"{r['time_us']:.1f} | {r['gb_s']:.0f} | {r['peak_pct']:.1f} | {r['instructions']} | "
            f"{r['wall_full_s']:.2f} | {r['wall_timing_s']:.2f} |" for r in k["rows"]]
    return "\n".join(out) + "\n"


def speed(body: str, stale: list) -> str:
    s = load("sim_speed")
    if not s:
        stale.append("docs/performance.md speed table")
        return body
    out = ["| workload | instructions | per CPU second | per wall second | target (per CPU second) |",
           "|---|---|---|---|---|"]
    names = {"vector_timing": "vector add, timing mode, one core", "vector_full": "vector add, full mode, one core",
             "fa_varlen_timing": "FlashAttentionVarLenScore 2048 x 2048 N=8 D=128, timing mode"}
    targets = s.get("targets", {})
    for k, v in s.items():
        if k in names:
            t = targets.get(k)
            verdict = "-" if t is None else f">= {t:,}: {'met' if v['rate'] >= t else 'NOT met'}"
            wall = f"{v['rate_wall']:,.0f}" if "rate_wall" in v else "-"
            out.append(f"| {names[k]} | {v['instructions']:,} | {v['rate']:,.0f} | {wall} | {verdict} |")
    return "\n".join(out) + "\n\n" + _machine_line(["sim_speed"]) + "\n"


def calibration(body: str, stale: list) -> str:
    """docs/calibration.md: every calibration point, old and new, the fits and the MAPE per file."""
    c = load("calibration")
    if not c:
        stale.append("docs/calibration.md calibration table")
        return body
    out = ["| file | Sq | Skv | board us | old us | old error | model without launch | new us | new error | "
           "PFA model without launch at inner_precise=1 |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for p in c["points"]:
        b = p["board_us"]
        ip1 = f"{p['base_ip1_us']:.1f}" if p.get("base_ip1_us") is not None else "-"
        out.append(f"| {p['file']} | {p['sq']} | {p['skv']} | {b:.1f} | {p['old_us']:.1f} | "
                   f"{100 * (p['old_us'] / b - 1):+.1f}% | {p['base_us']:.1f} | {p['new_us']:.1f} | "
                   f"{100 * (p['new_us'] / b - 1):+.1f}% | {ip1} |")
    f, sl = c["fitted_us"], c.get("pfa_slope_us_per_8k", {})
    out += ["", f"Fit (least squares of the relative error): launch overhead on the FA file {f['fa']:.2f} us "
            f"(shipped {c['shipped_us']['launch']:.1f} us, every operator). Diagnostics: the same fit on the PFA file "
            f"alone gives {f['pfa']:.2f} us, on both files {f['both']:.2f} us."]
    if sl:
        out.append(f"PFA file, cost of 8192 more keys: board {sl['board']:.1f} us, model {sl['model']:.1f} us at "
                   f"inner_precise=0 ({sl['model_ip1']:.1f} us at inner_precise=1).")
    for name, label in (("fa", "FA"), ("pfa", "PFA")):
        x = c["files"][name]
        out.append(f"{label} file: MAPE old {x['old_mape_pct']:.1f}% (max {x['old_max_pct']:.1f}%), new "
                   f"{x['mape_pct']:.1f}% (max {x['max_pct']:.1f}%) over {x['points']} points.")
    return "\n".join(out) + "\n\n" + _machine_line(["calibration"]) + "\n"


def _fia_floor_rows(c: dict) -> list:
    """The floors of the kernel the board's call runs on CANN 8.5.0 (benchmarks/calibration.py fia_floor)."""
    g = c.get("fia_floor")
    if not g:
        return []
    sl = c["pfa_slope_us_per_8k"]
    return ["", ("| PFA file, 8192 more keys: CANN 8.5.0's fused-infer GQA kernel (not modelled), "
                 f"{g['blocks']} blocks of 512 x 512 on {g['cores']} AI Cores, both vector cores per block | us |"),
            "|---|---|", f"| board | {sl['board']:.1f} |",
            f"| vector: the scores at npusim's price per element (CANN's PFA slice, above), {2 * g['cores']} vector cores "
            f"| {g['vector_us']:.1f} |",
            (f"| L2: its workspace round trips (fp32 scores, fp16 P, fp32 PV and running output) and K/V/Q reads, "
             f"{g['l2_bytes_per_score']:.1f} B per score, at the shared 2550 B/cycle | {g['l2_us']:.1f} |"),
            f"| cube: mm1 + mm2, {g['blocks_per_core']:.0f} blocks per AI Core at 4096 fp16 MAC/cycle | {g['cube_us']:.1f} |",
            f"| npusim's model of the call (PFA x910 kernel, one vector core per 128-row block on 24 AI Cores) "
            f"| {sl['model']:.1f} |"]


def _l2_budget_rows(c: dict) -> list:
    """Both boards against the chip L2 budgets that have a source (benchmarks/calibration.py fa_floor, fia_l2_budgets)."""
    fa, g = c.get("fa_floor"), c.get("fia_l2_budgets")
    if not fa or not g:
        return []
    sl = c["pfa_slope_us_per_8k"]["board"]
    out = ["", ("| L2 budget (Ascend910B2, hardware.md §6a/§6c) | B/cycle | FA board step, S = 16384: its L2 floor, "
                f"cycles (board {fa['board_step_cycles']:.0f}) | fused-infer kernel, 8192 more keys: its L2 floor, us "
                f"(board {sl:.1f}) |"), "|---|---|---|---|"]
    for label, bpc in c["l2_candidates"]:
        out.append(f"| {label} | {bpc:.0f} | {fa['l2_cycles'][label]:.0f} | {g['l2_us'][label]:.1f} |")
    out += ["", "| FA board step, S = 16384 (one 128 x 1024 tile per worker, two workers per AI Core) | |", "|---|---|",
            (f"| board: (board time - launch overhead) x 1.8 GHz / {fa['steps']} steps of the busiest vector core, "
             f"{fa['cores']} AI Cores | {fa['board_step_cycles']:.0f} cycles |"),
            (f"| L2 bytes per AI-Core step as the board's template moves them (K and V shared by the two vector cores; "
             f"npusim's varlen model: {fa['l2_mb_per_core_step_unshared']:.2f} MB) | {fa['l2_mb_per_core_step']:.2f} MB |"),
            f"| L2 rate at the board's pace | {fa['board_l2_bytes_per_cycle']:.0f} B/cycle |",
            f"| npusim's vector step (the model's FA trace, busiest vector core) | {fa['vector_cycles']:.0f} cycles |",
            (f"| the AI Core's cube side at peak rates: Mmad {fa['cube_side']['cube']:.0f}, MTE1 {fa['cube_side']['mte1']:.0f}, "
             f"FixPipe {fa['cube_side']['fixpipe']:.0f}, MTE2 {fa['cube_side']['mte2']:.0f}; fully overlapped / in series | "
             f"{fa['cube_side']['overlapped']:.0f} / {fa['cube_side']['serial']:.0f} cycles |"),
            f"| L2 budget the PFA board's pace needs for the fused-infer kernel's traffic | "
            f"{g['needed_bytes_per_cycle']:.0f} B/cycle |"]
    return out


def calibration_floor(body: str, stale: list) -> str:
    """docs/calibration.md: the PFA board step per slice against CANN's slice floor, and the what-if variants."""
    c = load("calibration")
    if not c or "pfa_floor" not in c:
        stale.append("docs/calibration.md PFA floor")
        return body
    f, launch = c["pfa_floor"], c["shipped_us"]["launch"]
    out = ["| per 8 x 512 fp32 slice, one vector core | cycles |", "|---|---|",
           (f"| board (PFA file: cost of 8192 more keys over {f['slices_per_8k']} slices, 1.8 GHz) | "
            f"{f['board_cycles_per_slice']:.0f} |"),
           (f"| CANN's slice ({f['instructions']} instructions, {f['barriers']} PipeBarriers) at npusim's rates "
            f"(pto-isa 910B3 fits where measured) | {f['model_rates']:.0f} |"),
           f"| same, every class at one 256 B repeat per cycle (msprof lane peak, hardware.md §4) | {f['peak_rate']:.0f} |",
           f"| same, one repeat per cycle and no latency: the {f['repeats']} repeats alone | {f['repeats']} |",
           *_fia_floor_rows(c), *_l2_budget_rows(c),
           "", ("| what-if: shared constants, each with the launch overhead its FA file fit gives | launch, us | "
                f"FA S = 1024 / 4096 / 16384 | PFA Skv = 8192 / 16384 | PFA, 8192 more keys, us (board "
                f"{c['pfa_slope_us_per_8k']['board']:.1f}) |"),
           "|---|---|---|---|---|"]
    shipped = {"launch_us": launch, "points": [(p["file"], p["sq"], p["skv"], p["board_us"], p["base_us"])
                                               for p in c["points"]]}
    out += [_whatif_row(label, w) for label, w in [("npusim as shipped", shipped), *c["whatif"].items()]]
    if c.get("board_cube_side"):
        out += ["", ("| FA calls on the board's cube side (benchmarks/fa_board_cube_side.py: K and V shared in one one-deep "
                     "L1 cache; L0C single or double), one L2 budget (B/cycle) for both files | launch, us | "
                     "FA S = 1024 / 4096 / 16384 | PFA Skv = 8192 / 16384 | PFA, 8192 more keys, us |"), "|---|---|---|---|---|"]
        out += [_whatif_row(label, w) for label, w in c["board_cube_side"].items()]
    return "\n".join(out) + "\n"


def _whatif_row(label: str, w: dict) -> str:
    """One variant's row: its launch fit, every point's error with it, the PFA cost of 8192 more keys."""
    err = {(fi, skv): 100 * ((u + w["launch_us"]) / m - 1) for fi, _, skv, m, u in w["points"]}
    pfa = sorted((skv, u) for fi, _, skv, _, u in w["points"] if fi == "pfa")
    slope = (pfa[-1][1] - pfa[0][1]) / (pfa[-1][0] - pfa[0][0]) * 8192
    cells = [" / ".join(f"{v:+.1f}%" for (fi, _), v in sorted(err.items()) if fi == name) for name in ("fa", "pfa")]
    return f"| {label} | {w['launch_us']:.1f} | {cells[0]} | {cells[1]} | {slope:.1f} |"


def _from_table(make, what: str):
    """A renderer whose body is a table made from a committed sweep result (sweep_tables.py)."""
    def render_block(body: str, stale: list) -> str:
        text = make()
        if text is None:
            stale.append(what)
            return body
        return text
    return render_block


#: Lines of an example's output shown under it (the rest is elided).
EXAMPLE_LINES = 24


def _example(name: str):
    """The block under README example *name*: how long it ran as written, and what it printed
    (benchmarks/readme_examples.py)."""
    def render_block(body: str, stale: list) -> str:
        r = ((load("readme_examples") or {}).get("examples") or {}).get(name)
        if r is None:
            stale.append(f"README example {name}")
            return body
        m = r.get("machine") or load("readme_examples")["machine"]
        if r["status"] != 0:
            raise SystemExit(f"README example {name} failed when last run (benchmarks/readme_examples.py): "
                             f"{r['stderr_tail'][-500:]}")
        lines = r["stdout"].rstrip("\n").splitlines()
        if len(lines) > EXAMPLE_LINES:
            lines = lines[:EXAMPLE_LINES] + [f"... ({len(lines) - EXAMPLE_LINES} more lines)"]
        head = (f"Ran as written in {r['wall_s']:.1f} s ({r['cpu_s']:.1f} s CPU) on {m['cpu']}, {m['cpus']} CPUs "
                f"({m['date_utc'][:10]}, load average {m['load_avg'][0]:g}; `benchmarks/readme_examples.py {name}`)")
        if not lines:
            return head + ".\n"
        return head + ". It printed:\n\n" + "\n".join("    " + ln if ln else "" for ln in lines) + "\n"
    return render_block


def sfag_block_size(body: str, stale: list) -> str:
    """The numbers of the README's SFAG block-size lesson (studies/sfag_block_size.py)."""
    r = load("sfag_block_size")
    if not r:
        stale.append("README SFAG block-size lesson")
        return body
    by = {}
    for x in r["records"]:
        by.setdefault(x["rows"], {})[x["block_size"]] = x
    rows = sorted(by)
    one = " to ".join(f"{100 * (by[n][1]['time_us'] / by[n][64]['time_us'] - 1):+.0f}% ({n} rows)" for n in rows)
    dmas = " or ".join(str(3 * n) for n in rows)
    fastest = [min(by[n].values(), key=lambda x: x["time_us"]) for n in rows]
    fast = "; ".join(f"{n} rows: blocks of {f['block_size']}, {100 * (1 - f['time_us'] / by[n][64]['time_us']):.1f}% "
                     f"under blocks of 64" for n, f in zip(rows, fastest))
    pct = [x["bound_pct"] for x in r["records"]]
    units = sorted({x["bound_unit"] for x in r["records"]})
    return (f"With blocks of 1 row (a gather of {dmas} small DMAs per token: K, K_rope and V per block) the same "
            f"attention work takes {one} against blocks of 64. Fastest: {fast}. The slowest core's busiest pipe "
            f"is {', '.join(units)} at every block size, {min(pct):.0f}-{max(pct):.0f}% busy "
            f"(T1 = {r['T1']}, N1 = {r['N1']}, S2 = {r['S2']}; run of {r['machine']['date_utc'][:10]}).\n")


def study_times(body: str, stale: list) -> str:
    t = load("studies_steps")
    if not t:
        stale.append("README study times")
        return body
    names = {"pfa_tiling": "PFA tiling study (timing mode)", "whatif_pfa": "PFA what-if study (estimate mode)",
             "whatif_fa": "FA varlen what-if study (estimate mode)"}
    parts = [f"{label} {t['steps'][k]['wall_s'] / 60:.1f} min" for k, label in names.items() if k in t["steps"]]
    if not parts:
        stale.append("README study times")
        return body
    # each step's own machine record (older files have only the file's, stamped by whichever step ran last)
    ms = [t["steps"][k].get("machine", t["machine"]) for k in names if k in t["steps"]]
    return "; ".join(parts) + f", from an empty cache with the default local pool. {_machine_line_of(ms)}\n"


def timeout_table(body: str, stale: list) -> str:
    """docs/timeouts.md: the seed's four timeout shapes on every preset (studies/timeout_table.py)."""
    t = load("timeout_table")
    if not t:
        stale.append("docs/timeouts.md timeout table")
        return body
    out = ["| shape (B, Q_N, S, D, KV_N; S_kv = S) | " + " | ".join(t["chips"]) + " |",
           "|---" * (len(t["chips"]) + 1) + "|"]
    for r in t["rows"]:
        cells = []
        for chip in t["chips"]:
            c = r["cells"][chip]
            cells.append(f"refused ({c['refused']})" if "refused" in c else
                         f"{c['predicted_s']:.0f} s, {'exceeds' if c['exceeded'] else 'fits'}")
        out.append("| " + ", ".join(str(v) for v in r["shape"]) + " | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"  # estimates: the same on any host, so no machine line


RENDERERS = {"performance": performance, "matmul": matmul, "quick-tour": quick_tour, "spkc": spkc,
             "speed": speed, "study-times": study_times, "sfag-block-size": sfag_block_size, "calibration": calibration,
             "calibration-floor": calibration_floor, "timeout-table": timeout_table,
             "pfa-tiling": _from_table(sweep_tables.pfa_tiling_table, "README PFA tiling table"),
             "whatif-pfa": _from_table(lambda: sweep_tables.whatif_table("whatif_hbm_l2_pfa"), "README PFA what-if"),
             "whatif-fa": _from_table(lambda: sweep_tables.whatif_table("whatif_hbm_l2_fa"), "README FA what-if")}


def render(root: Path = ROOT) -> list[str]:
    """Rewrite every generated block of TARGETS; return what could not be regenerated."""
    stale: list[str] = []
    for name in TARGETS:
        path = root / name
        if not path.is_file():
            continue
        text = path.read_text()

        def sub(m):
            key = m.group("key")
            fn = RENDERERS.get(key) or (_example(key[len("example-"):]) if key.startswith("example-") else None)
            if fn is None:
                raise SystemExit(f"{name}: no renderer for generated block {m.group('key')!r}")
            return m.group(1) + fn(m.group("body"), stale) + m.group(4)
        new = _BLOCK.sub(sub, text)
        if new != text:
            path.write_text(new)
            print(f"rewrote generated blocks of {name}")
    return stale


if __name__ == "__main__":
    for s in render():
        print(f"not regenerated (no saved result): {s}")
