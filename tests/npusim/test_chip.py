"""Tests of npusim.chip: presets against research/hardware.md, costs, overrides and errors."""
from __future__ import annotations

import dataclasses
import math

import pytest

from npusim.chip import PRESETS, ChipSpec, chip, chips, chips_table
from npusim.errors import AclnnError, NpusimError

ALL = ["Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4", "Ascend910_9391", "Ascend310P3"]
# hardware.md §7: fp16 TFLOPS and int8 TOPS (910B4 at 1500 MHz, the clock we chose)
PEAKS = {"Ascend910B1": (363.7, 727.4), "Ascend910B2": (353.9, 707.8), "Ascend910B3": (294.9, 589.8),
         "Ascend910B4": (245.8, 491.5), "Ascend910_9391": (363.7, 727.4), "Ascend310P3": (69.5, 138.9)}


@pytest.mark.parametrize("name", ALL)
def test_preset_loads(name):
    """Every preset is reachable by its CANN name, named as keyed, and hashable."""
    spec = chip(name)
    assert spec.name == name and name in chips()
    assert chip(spec) is spec
    assert hash(spec) == hash(dataclasses.replace(spec))


def test_every_field_has_help():
    """Each field carries a help string for CLI and TOML."""
    for f in dataclasses.fields(ChipSpec):
        assert f.metadata.get("help"), f.name


@pytest.mark.parametrize("name", ALL)
def test_peak_tflops_match_hardware_md(name):
    """Derived peaks equal hardware.md §7 to its rounding (0.1)."""
    fp16, int8 = PEAKS[name]
    spec = chip(name)
    assert round(spec.cube_tflops_fp16, 1) == fp16
    assert abs(spec.cube_tops_int8 - int8) <= 0.1


def test_split_and_combined_cores():
    """910B/A3 split 1 AIC + 2 AIV; 310P combines cube and vector plus 7 VectorCores."""
    b2 = chip("Ascend910B2")
    cores = (b2.core_split, b2.aic_count, b2.aiv_per_aic, b2.aiv_count, b2.vector_core_count)
    assert cores == (True, 24, 2, 48, 0)
    assert (b2.max_block_dim_cube, b2.max_block_dim_vector) == (24, 48)
    assert chip("Ascend910B3").aiv_count == 40
    p3 = chip("Ascend310P3")
    cores = (p3.core_split, p3.aic_count, p3.aiv_per_aic, p3.aiv_count, p3.vector_core_count)
    assert cores == (False, 8, 0, 0, 7)
    assert p3.max_block_dim_vector == 15  # hardware.md §1 mix_vector_core_cnt=15
    assert p3.l0c_to_gm_bytes_per_cycle == 0 and p3.l0c_to_ub_bytes_per_cycle > 0
    assert b2.l0c_to_ub_bytes_per_cycle == 0 and b2.ub_to_l1_bytes_per_cycle == 0


def test_timeouts_and_timer():
    """AI Core timeout 1091 s on A2/A3, 547 s on 310P (hardware.md §8); 50 MHz system counter."""
    for name in ALL:
        spec = chip(name)
        assert spec.aicore_timeout_s == (547.0 if name == "Ascend310P3" else 1091.0)
        assert spec.timer_hz == 50e6


def test_buffers_and_clocks():
    """Buffer sizes per hardware.md §5 and the 910B4 clock choice (1500 MHz, ini)."""
    b1 = chip("Ascend910B1")
    assert (b1.l1_bytes, b1.l0a_bytes, b1.l0b_bytes, b1.l0c_bytes, b1.ub_bytes) == (
        524288, 65536, 65536, 131072, 196608)
    assert (b1.bt_bytes, b1.fb_bytes, b1.clock_hz) == (1024, 7168, 1.85e9)
    assert chip("Ascend910B4").clock_hz == 1.5e9
    p3 = chip("Ascend310P3")
    assert (p3.l1_bytes, p3.l0c_bytes, p3.ub_bytes, p3.clock_hz, p3.vector_clock_hz) == (
        1 << 20, 262144, 262144, 1.06e9, 1.0e9)


def test_unknown_chip_name():
    """An unknown name raises AclnnError 161002 listing the presets."""
    with pytest.raises(AclnnError) as exc:
        chip("Ascend910C")
    assert exc.value.status == 161002
    assert "Ascend910C" in exc.value.message and "Ascend910B2" in exc.value.message


def test_transfer_cycles_exact_at_table_points():
    """At each curve point an isolated copy costs the curve's own time, bytes / the stored rate (the
    measured copy includes the GM latency): the latency part is min(latency field, time - bytes / peak)
    and the pipe occupancy the rest, never faster than the peak rate."""
    for name in ALL:
        spec = chip(name)
        for path, curve, lat, peak in (
                ("gm_to_l1", spec.gm_to_l1_curve, spec.mte2_latency_cycles, spec.gm_to_l1_bytes_per_cycle),
                ("gm_to_ub", spec.gm_to_ub_curve, spec.mte2_latency_cycles, spec.gm_to_ub_bytes_per_cycle)):
            for nbytes, rate in curve:
                assert spec.path_rate(path, nbytes) == rate
                assert spec.transfer_cycles(path, nbytes) == pytest.approx(nbytes / rate, rel=1e-12)
                occ_rate, latency = spec.path_cost(path, nbytes)
                assert latency == pytest.approx(min(lat, nbytes / rate - nbytes / peak))
                assert occ_rate <= peak * (1 + 1e-12)


def test_curve_interpolation_and_clamping():
    """Midpoints interpolate linearly; sizes outside the table clamp to the end rates."""
    spec = chip("Ascend910B2")
    (x0, y0), (x1, y1) = spec.gm_to_l1_curve[1:3]
    mid = (x0 + x1) // 2
    assert spec.path_rate("gm_to_l1", mid) == pytest.approx(y0 + (y1 - y0) * (mid - x0) / (x1 - x0))
    assert spec.path_rate("gm_to_l1", 32) == spec.gm_to_l1_curve[0][1]
    assert spec.path_rate("gm_to_l1", 1 << 30) == spec.gm_to_l1_curve[-1][1]


def test_curve_conversion_from_peers_5e():
    """910B1 GM->L1 at 1 KiB is 9.9 GB/s at 1.85 GHz; other chips scale by their peak ratio."""
    b1, p3 = chip("Ascend910B1"), chip("Ascend310P3")
    assert b1.gm_to_l1_curve[0] == (1024, pytest.approx(9.9e9 / 1.85e9))
    ratio = p3.gm_to_l1_bytes_per_cycle / b1.gm_to_l1_bytes_per_cycle
    assert p3.gm_to_l1_curve[3][1] == pytest.approx(b1.gm_to_l1_curve[3][1] * ratio)


@pytest.mark.parametrize("path", ["gm_to_l1", "gm_to_ub", "ub_to_gm", "l1_to_l0a", "l1_to_l0b", "l0c_to_gm"])
def test_transfer_cycles_monotone(path):
    """A bigger transfer never costs fewer cycles."""
    spec = chip("Ascend910B2")
    sizes = list(range(0, 1 << 20, 4096)) + [32, 1000, 1025, 10 * 1024, 30 * 1024, 3 << 20]
    costs = [spec.transfer_cycles(path, n) for n in sorted(sizes)]
    assert all(a <= b for a, b in zip(costs, costs[1:]))
    # an empty copy: the flat paths' latency; the curve paths' measured time of nothing, 0
    assert costs[0] == (0.0 if path in ("gm_to_l1", "gm_to_ub") else spec.path_latency(path))


def test_flat_path_rate():
    """Paths without a curve use their flat rate: L1->L0A at 256 B/cycle (hardware.md §6b)."""
    spec = chip("Ascend910B2")
    assert spec.transfer_cycles("l1_to_l0a", 65536) == spec.mte1_latency_cycles + 65536 / 256


def test_absent_and_unknown_paths():
    """A path the chip lacks is an NpusimError; an unknown path name is NotImplementedError."""
    with pytest.raises(NpusimError, match="l0c_to_ub"):
        chip("Ascend910B2").transfer_cycles("l0c_to_ub", 1024)
    with pytest.raises(NotImplementedError, match="gm_to_l0c"):
        chip("Ascend910B2").transfer_cycles("gm_to_l0c", 1024)


def test_cube_cycles_fractal_granular():
    """Cycles = ceil(m/16) ceil(n/16) ceil(k/K0) fractals at one fractal per cycle."""
    spec = chip("Ascend910B2")
    assert spec.cube_cycles(128, 128, 128, "float16") == 8 * 8 * 8
    assert spec.cube_cycles(1, 1, 1, "float16") == 1
    assert spec.cube_cycles(17, 16, 16, "bfloat16") == 2
    assert spec.cube_cycles(16, 16, 64, "int8") == 2  # K0 = 32
    assert spec.cube_cycles(16, 16, 64, "float32") == 8  # K0 = 8
    assert spec.cube_cycles(0, 16, 16, "float16") == 0
    m, n, k = 100, 70, 300
    assert spec.cube_cycles(m, n, k, "float16") == math.ceil(m / 16) * math.ceil(n / 16) * math.ceil(k / 16)
    assert spec.macs_per_cycle("int8") == 2 * spec.macs_per_cycle("float16") == 8192
    with pytest.raises(NotImplementedError, match="bfloat16"):
        chip("Ascend310P3").cube_cycles(16, 16, 16, "bfloat16")


def test_replace():
    """replace() builds a variant, rescales a curve with its peak, and names unknown fields."""
    b2 = chip("Ascend910B2")
    fast = b2.replace(gm_to_l1_bytes_per_cycle=2 * b2.gm_to_l1_bytes_per_cycle, aic_count=8)
    assert fast.aic_count == 8 and b2.aic_count == 24
    assert fast.path_rate("gm_to_l1", 4096) == pytest.approx(2 * b2.path_rate("gm_to_l1", 4096))
    with pytest.raises(AclnnError) as exc:
        b2.replace(ub_kib=256)
    assert exc.value.status == 161002 and "ub_kib" in exc.value.message
    with pytest.raises(AclnnError, match="ub_bytes"):
        b2.replace(ub_bytes="192K")
    with pytest.raises(AclnnError, match="aiv_per_aic"):
        b2.replace(aiv_per_aic=0)


def test_to_dict_round_trip():
    """to_dict() gives plain data that rebuilds an equal spec."""
    for name in ALL:
        spec = chip(name)
        d = spec.to_dict()
        assert isinstance(d["cube_macs_per_cycle"], dict) and isinstance(d["gm_to_l1_curve"], list)
        assert ChipSpec(**d) == spec


def test_from_toml(tmp_path):
    """A TOML file with a base preset and overrides loads; chip() accepts its path."""
    path = tmp_path / "what_if.toml"
    path.write_text('base = "Ascend910B2"\nname = "B2-big-ub"\nub_bytes = 262144\n'
                    'clock_hz = 2000000000\ngm_to_ub_curve = [[1024, 4.0], [65536, 60.0]]\n'
                    '[cube_macs_per_cycle]\nfloat16 = 8192\n')
    spec = ChipSpec.from_toml(path)
    assert (spec.name, spec.ub_bytes, spec.clock_hz) == ("B2-big-ub", 262144, 2e9)
    assert spec.gm_to_ub_curve == ((1024, 4.0), (65536, 60.0))
    assert spec.macs_per_cycle("float16") == 8192 and dict(spec.cube_macs_per_cycle) == {"float16": 8192}
    assert spec.l1_bytes == chip("Ascend910B2").l1_bytes
    assert chip(str(path)) == spec


def test_from_toml_errors(tmp_path):
    """Unknown keys are named; without a base every field is required."""
    bad = tmp_path / "bad.toml"
    bad.write_text('base = "Ascend910B2"\nub_size = 1\n')
    with pytest.raises(AclnnError) as exc:
        ChipSpec.from_toml(bad)
    assert exc.value.status == 161002 and "ub_size" in exc.value.message
    partial = tmp_path / "partial.toml"
    partial.write_text('name = "X"\n')
    with pytest.raises(AclnnError, match="missing"):
        ChipSpec.from_toml(partial)
    with pytest.raises(AclnnError, match="cannot read"):
        ChipSpec.from_toml(tmp_path / "absent.toml")


def test_chips_table():
    """The listing has one row per preset with its core counts and peak."""
    lines = chips_table().splitlines()
    assert len(lines) == 1 + len(PRESETS)
    row = next(line for line in lines if line.startswith("Ascend910B2 "))
    assert "24 AIC+48 AIV" in row and "1800" in row and "353.9" in row and "1091" in row
    assert "8 AIC+7 VC" in next(line for line in lines if line.startswith("Ascend310P3"))
