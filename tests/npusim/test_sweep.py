"""npusim.sweep: tiling spaces, study expansion, refused points, the cache, Dask = local, search, report, CLI."""
import numpy as np
import pandas as pd
import pytest

import npusim.sweep as sweep_pkg
from npusim import registry
from npusim.chip import chip as get_chip
from npusim.cli import main
from npusim.errors import AclnnError
from npusim.sweep import Study, load_study, sweep
from npusim.sweep.report import pareto_mask, report

TINY_PFA = {"name": "tiny", "B": 1, "N": 2, "S": 512, "D": 64}
PROBLEMS = {"pfa": {"B": 1, "N": 1, "S": 256, "D": 64}, "fa": {"T": 512, "N": 1, "D": 64},
            "spkc": {"tokens": 64, "heads": 2, "D": 64}}
#: Other axes held where every end value of the tested axis fits (the axes are not independent).
COMPANIONS = {"pfa": {"sOuter": 128, "sInner": 128, "softmaxSOuter": 8}, "fa": {}, "spkc": {}}


def pfa_study(tmp_path, **extra) -> dict:
    data = {"name": "t", "operator": "pfa", "mode": "timing", "problem": [TINY_PFA],
            "tiling": {"sOuter": [32, 128], "sInner": [256, 512, 4096]}, "output": str(tmp_path / "r.parquet")}
    return data | extra


def _bits(df: pd.DataFrame) -> pd.DataFrame:
    """The frame without wall time, floats as their bit patterns (equality = bit for bit)."""
    df = df.drop(columns=["wall_s"]).reset_index(drop=True)
    for c in df.columns:
        if df[c].dtype == np.float64:
            df[c] = df[c].to_numpy().view(np.int64)
    return df


# --- tiling spaces ------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["pfa", "fa", "spkc"])
def test_space_ends_are_legal_and_one_step_out_is_refused(op):
    """Each axis's first and last offered value runs (others at COMPANIONS); one past the rule is refused
    with 161002."""
    entry, spec = registry.get(op), get_chip("Ascend910B2")
    problem = Study(operator=op, problems=[PROBLEMS[op]]).problem_dicts()[0][1]
    space = entry.tiling_space(problem, spec)
    args, kwargs = entry.build_call(problem)
    for axis in space.axes:
        for v in (axis.values[0], axis.values[-1]):
            tiling = COMPANIONS[op] | {axis.name: v}
            res = entry.api(*args, **kwargs, mode="estimate", tiling=tiling)
            got = space.measure(res, spec, tiling)
            if axis.name not in ("blockDim",):  # blockDim may be capped by the work (SPKC usedCoreNum)
                assert got[f"eff.{axis.name}"] == v
            assert got["ub_bytes"] > 0
        with pytest.raises(AclnnError) as e:
            entry.api(*args, **kwargs, mode="estimate", tiling={axis.name: axis.values[-1] + 10 ** 6})
        assert e.value.status == 161002 and axis.name in e.value.message


@pytest.mark.parametrize("op,problem", [("sfag", {"S1": 4, "S2": 128, "N1": 1, "blocks": 2, "rope": 0}),
                                        ("fag", {"T": 128, "N": 1, "D": 64})])
def test_core_count_spaces_of_the_backward_operators(op, problem):
    """blockDim 1 and every AI Core run (timing mode: the UB/L1 bytes are the measured buffer peaks),
    one past is refused with 161002 naming blockDim; estimate mode has no buffer figures."""
    entry, spec = registry.get(op), get_chip("Ascend910B2")
    problem = Study(operator=op, problems=[problem]).problem_dicts()[0][1]
    space = entry.tiling_space(problem, spec)
    assert space.names == ("blockDim",) and space.axis("blockDim").values == tuple(range(1, spec.aic_count + 1))
    args, kwargs = entry.build_call(problem)
    for v in (1, spec.aic_count):
        res = entry.api(*args, **kwargs, mode="timing", tiling={"blockDim": v})
        got = space.measure(res, spec, {"blockDim": v})
        assert 1 <= got["eff.blockDim"] <= v
        assert 0 < got["ub_bytes"] <= spec.ub_bytes and 0 < got["l1_bytes"] <= spec.l1_bytes
    est = entry.api(*args, **kwargs, mode="estimate", tiling={"blockDim": 1})
    assert space.measure(est, spec, {})["ub_bytes"] is None
    with pytest.raises(AclnnError) as e:
        entry.api(*args, **kwargs, mode="estimate", tiling={"blockDim": spec.aic_count + 1})
    assert e.value.status == 161002 and "blockDim" in e.value.message


@pytest.mark.parametrize("op", ["pfa", "fa"])
def test_space_buffer_bytes_equal_what_the_kernel_allocates(op):
    """The closed-form UB/L1 bytes a space reports (usable in estimate mode) equal the buffer high-water
    marks the simulator measures when the kernel runs."""
    entry, spec = registry.get(op), get_chip("Ascend910B2")
    problem = Study(operator=op, problems=[PROBLEMS[op]]).problem_dicts()[0][1]
    args, kwargs = entry.build_call(problem)
    res = entry.api(*args, **kwargs, mode="timing")
    peaks = res.trace.meta["buffer_peak_bytes"]
    got = entry.tiling_space(problem, spec).measure(res, spec, {})
    assert (got["ub_bytes"], got["l1_bytes"]) == (peaks["UB"], peaks["L1"])


def test_space_rejects_unknown_axis_and_empty_values():
    space = registry.get("pfa").tiling_space({}, get_chip("Ascend910B2"))
    with pytest.raises(AclnnError, match="no tiling axis 'sFoo'"):
        space.select({"sFoo": [1]})
    with pytest.raises(AclnnError, match="non-empty list"):
        space.select({"sOuter": []})
    assert space.select({"sOuter": "all"})["sOuter"] == tuple(range(16, 129, 16))


# --- study files --------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad, match", [
    ({"operatr": "pfa"}, "unknown key"), ({"operator": "nope"}, "nope"), ({"mode": "full"}, "mode must be"),
    ({"problem": [{"B": 1}]}, "missing required keys N="), ({"problem": [TINY_PFA | {"Q": 1}]}, "unknown key Q"),
    ({"problem": [TINY_PFA | {"B": "one"}]}, "B must be"), ({"search": {"kind": "annealing"}}, "search.kind"),
    ({"chip": {"base": "Ascend910B2", "scale": {"warp_drive": [1.0]}}}, "warp_drive"),
    ({"tiling": {"sOuter": "some"}}, "non-empty list"),
])
def test_bad_study_is_a_clear_error(tmp_path, bad, match):
    data = pfa_study(tmp_path) | bad
    data.pop("operatr", None) if "operatr" not in bad else data.pop("operator")
    with pytest.raises(AclnnError, match=match) as e:
        load_study(data).cases()
    assert e.value.status == 161002
    assert not (tmp_path / "r.parquet").exists()


def test_toml_study_resolves_output_beside_the_file(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('operator = "pfa"\n[[problem]]\nB = 1\nN = 1\nS = 256\nD = 64\n')
    st = load_study(path)
    assert st.name == "s" and st.output == tmp_path / "out" / "s.parquet"
    with pytest.raises(AclnnError, match="no study file"):
        load_study(tmp_path / "missing.toml")


def test_chip_variants_scale_grid_and_explicit():
    st = load_study({"operator": "pfa", "problem": [TINY_PFA], "chip": {
        "base": "Ascend910B2", "scale": {"hbm_bw_bytes_per_s": [0.5, 1.0]}, "grid": {"l2_bytes": [1 << 26, 1 << 27]},
        "variants": [{"clock_hz": 1.0e9}]}})
    base = get_chip("Ascend910B2")
    variants = [dict(ch) for _, ch in st.chip_variants()]
    assert len(variants) == 5
    assert variants[0] == {"hbm_bw_bytes_per_s": 0.5 * base.hbm_bw_bytes_per_s, "l2_bytes": 1 << 26,
                           "clock_hz": base.clock_hz}
    assert variants[-1] == {"hbm_bw_bytes_per_s": base.hbm_bw_bytes_per_s, "l2_bytes": base.l2_bytes,
                            "clock_hz": 1.0e9}


# --- running ------------------------------------------------------------------------------------------
def test_grid_sweep_records_refused_points_and_places_the_default(tmp_path):
    df = sweep(pfa_study(tmp_path), workers=1, progress=False)
    assert len(df) == 1 + 2 * 3
    refused = df[df["status"] == "refused"]
    assert set(refused["t.sInner"]) == {4096} and set(refused["error_code"]) == {161002}
    assert refused["error"].str.contains("sInner").all() and refused["time_us"].isna().all()
    ok = df[df["status"] == "ok"]
    assert (ok["time_us"] > 0).all() and ok["bound"].notna().all() and (ok["ub_pct"] < 100).all()
    # the default tiling's run is bit-identical to the grid point with its effective values
    d = ok[ok["is_default"]].iloc[0]
    twin = ok[(ok["t.sOuter"] == d["eff.sOuter"]) & (ok["t.sInner"] == d["eff.sInner"])]
    assert len(twin) == 1 and twin.iloc[0]["cycles"] == d["cycles"] and twin.iloc[0]["time_us"] == d["time_us"]
    assert pd.read_parquet(tmp_path / "r.parquet")["point_id"].tolist() == df["point_id"].tolist()


def test_cache_runs_only_new_points_and_retries_errors(tmp_path, monkeypatch):
    import npusim.sweep.execute as ex
    import npusim.sweep.run as run_mod

    ran = []
    real = ex.run_point
    monkeypatch.setattr(ex, "run_point", lambda p: ran.append(p.key) or real(p))
    first = sweep(pfa_study(tmp_path, tiling={"sOuter": [32], "sInner": [256]}), workers=1, progress=False)
    assert len(ran) == 2
    ran.clear()
    wider = sweep(pfa_study(tmp_path, tiling={"sOuter": [32, 64], "sInner": [256]}), workers=1, progress=False)
    assert len(ran) == 1 and len(wider) == 3
    pd.testing.assert_frame_equal(_bits(wider.iloc[:2]), _bits(first))
    # a simulator fault becomes an "error" row, which a later run retries
    monkeypatch.setattr(run_mod, "call_point", lambda p: 1 / 0)
    broken = sweep(pfa_study(tmp_path, tiling={"sOuter": [16], "sInner": [256]}), workers=1, progress=False)
    assert broken.iloc[-1]["status"] == "error" and "ZeroDivisionError" in broken.iloc[-1]["error"]
    monkeypatch.undo()
    fixed = sweep(pfa_study(tmp_path, tiling={"sOuter": [16], "sInner": [256]}), workers=1, progress=False)
    assert (fixed["status"] == "ok").all()


def test_cache_key_follows_the_model_code(tmp_path, monkeypatch):
    """A row computed by other model code is not reused: the key holds a fingerprint of the sources."""
    from npusim.sweep import fingerprint

    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("X = 1\n")
    (pkg / "sub" / "b.py").write_text("Y = 2\n")
    before = fingerprint.source_digest(str(pkg))
    assert fingerprint.source_digest.__wrapped__(str(pkg)) == before  # deterministic
    (pkg / "sub" / "b.py").write_text("Y = 3\n")
    assert fingerprint.source_digest.__wrapped__(str(pkg)) != before
    from npusim.sweep.search import planned_points

    point = planned_points(Study.from_dict(pfa_study(tmp_path)))[0]
    key = point.key
    real = fingerprint.source_digest
    fingerprint.model_fingerprint.cache_clear()
    monkeypatch.setattr(fingerprint, "source_digest",
                        lambda d: real(d) + ("edited" if d.endswith("prompt_flash_attention_v2") else ""))
    assert point.key != key  # the operator's own code changed
    monkeypatch.undo()
    fingerprint.model_fingerprint.cache_clear()
    assert point.key == key


def test_local_pool_and_dask_cluster_equal_the_serial_run_bit_for_bit(tmp_path):
    distributed = pytest.importorskip("distributed")
    study = pfa_study(tmp_path, output=None)
    serial = sweep(study, workers=1, progress=False)
    pool = sweep(study, workers=2, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=None) as lc:
        assert lc.scheduler_address.startswith("tcp://")
        by_address = sweep(study, scheduler=lc.scheduler_address, progress=False)  # --scheduler tcp://...
        with distributed.Client(lc) as client:
            by_client = sweep(study, scheduler=client, progress=False)
            assert client.status == "running"  # a caller's client is left open
    pd.testing.assert_frame_equal(_bits(pool), _bits(serial))
    pd.testing.assert_frame_equal(_bits(by_address), _bits(serial))
    pd.testing.assert_frame_equal(_bits(by_client), _bits(serial))


def test_a_row_from_other_model_sources_is_an_error_under_the_callers_key(tmp_path):
    """A spawned pool worker (off Linux) imports the model afresh: if its sources changed since the caller hashed
    them, the row it made (its own key) comes back as an error under the caller's key, run again next time, not
    cached."""
    from npusim.sweep.execute import same_code
    from npusim.sweep.search import planned_points
    point = planned_points(load_study(pfa_study(tmp_path)))[0]
    good = same_code({"point_id": point.key, "status": "ok", "error": None}, point)
    stale = same_code({"point_id": "0" * 20, "status": "ok", "error": None}, point)
    assert good["status"] == "ok"
    assert stale["point_id"] == point.key and stale["status"] == "error" and "sources differ" in stale["error"]


def _row_of_other_sources(point):
    """A worker's row made under another key than the caller's (its model sources changed)."""
    return {"point_id": "0" * 20, "status": "ok", "error": None}


def test_dask_runner_turns_a_row_from_other_model_sources_into_an_error(tmp_path, monkeypatch):
    """The Dask path checks each worker's key against the caller's, as the local pool does."""
    distributed = pytest.importorskip("distributed")
    from npusim.sweep import execute
    from npusim.sweep.search import planned_points
    point = planned_points(load_study(pfa_study(tmp_path)))[0]
    monkeypatch.setattr(execute, "run_point", _row_of_other_sources)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as lc:
        with distributed.Client(lc) as client:
            rows = list(execute.DaskRunner(client).stream([point]))
    assert len(rows) == 1 and rows[0]["point_id"] == point.key and rows[0]["status"] == "error"


def test_random_sample_is_seeded_and_counts(tmp_path):
    study = pfa_study(tmp_path, output=None, tiling={"sOuter": "all", "sInner": [256, 512]},
                      search={"kind": "random", "samples": 5, "seed": 3})
    a = sweep(study, workers=1, progress=False)
    b = sweep(study, workers=1, progress=False)
    assert len(a) == 1 + 5 and a["point_id"].tolist() == b["point_id"].tolist()


def test_optuna_search_visits_trials_and_reuses_the_cache(tmp_path):
    pytest.importorskip("optuna")
    study = pfa_study(tmp_path, tiling={"sOuter": "all", "sInner": [256, 512, 4096]},
                      search={"kind": "optuna", "trials": 6, "seed": 1})
    df = sweep(study, workers=1, progress=False)
    assert 2 <= len(df) <= 7 and df["is_default"].sum() == 1
    assert set(df["status"]) <= {"ok", "refused"}
    again = sweep(study, workers=1, progress=False)
    assert again["point_id"].tolist() == df["point_id"].tolist()


def test_npusim_sweep_is_callable():
    import npusim

    assert npusim.sweep is sweep_pkg and callable(npusim.sweep)
    df = npusim.sweep({"operator": "pfa", "mode": "estimate", "problem": [TINY_PFA]}, workers=1, progress=False)
    assert len(df) == 1 and df.iloc[0]["is_default"]


# --- report -------------------------------------------------------------------------------------------
def test_pareto_mask():
    v = np.array([[1, 5], [2, 2], [3, 3], [5, 1], [1, 5]], float)
    assert pareto_mask(v).tolist() == [True, True, False, True, True]


def test_report_files_and_verdict(tmp_path):
    sweep(pfa_study(tmp_path), workers=1, progress=False)
    rep = report(tmp_path / "r.parquet", tmp_path / "rep", top=3)
    names = {f.name for f in rep.files}
    assert {"ranking.csv", "pareto.csv", "pareto.png", "heatmap.png", "verdict.txt",
            "sensitivity_sOuter.png", "sensitivity_sInner.png"} <= names
    ranking = pd.read_csv(tmp_path / "rep" / "ranking.csv")
    assert len(ranking) == 3 and ranking["time_us"].is_monotonic_increasing
    df = pd.read_parquet(tmp_path / "r.parquet")
    ok = df[df["status"] == "ok"]
    best, dflt = ok["time_us"].min(), ok[ok["is_default"]]["time_us"].iloc[0]
    assert "2 refused" in rep.verdict and f"{best:.2f} us" in rep.verdict
    assert f"{100 * (dflt / best - 1):.1f}% faster" in rep.verdict


def test_report_of_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(AclnnError, match="cannot read results"):
        report(tmp_path / "none.parquet")


def test_cli_sweep_report_and_space(tmp_path, capsys):
    path = tmp_path / "s.toml"
    path.write_text('operator = "pfa"\nmode = "estimate"\n[[problem]]\nB = 1\nN = 1\nS = 256\nD = 64\n'
                    '[tiling]\nsInner = [256, 512]\n')
    assert main(["sweep", str(path), "--workers", "1", "--quiet"]) == 0
    assert "3 points (3 ok)" in capsys.readouterr().out
    assert main(["sweep", "report", str(tmp_path / "out" / "s.parquet")]) == 0
    assert "best" in capsys.readouterr().out and (tmp_path / "out" / "s_report" / "verdict.txt").exists()
    assert main(["sweep", "space", "fa", "T=512", "N=1", "D=64"]) == 0
    assert "s1BaseSize" in capsys.readouterr().out
    assert main(["sweep", str(tmp_path / "nope.toml")]) == 2


def test_chip_whatif_report(tmp_path):
    study = {"operator": "pfa", "mode": "estimate", "problem": [TINY_PFA], "output": str(tmp_path / "w.parquet"),
             "chip": {"scale": {"hbm_bw_bytes_per_s": [0.25, 1.0]}, "grid": {"l2_bytes": [1 << 22, 1 << 27]}}}
    df = sweep(study, workers=1, progress=False)
    assert len(df) == 4 and sorted(set(df["chip.l2_bytes"])) == [1 << 22, 1 << 27]
    slow = df[df["chip.hbm_bw_bytes_per_s"] == df["chip.hbm_bw_bytes_per_s"].min()]["time_us"].min()
    assert slow > df["time_us"].min()  # a quarter of the HBM bandwidth costs time here
    rep = report(tmp_path / "w.parquet", tmp_path / "rep")
    assert "whatif.png" in {f.name for f in rep.files} and "over 4 chip variants" in rep.verdict
