"""Chip model parameters: :class:`ChipSpec`, the CANN-named presets, and TOML overrides.

Contents: :class:`ChipSpec` (one frozen spec per chip), :func:`chip` (preset name, TOML path or spec
-> spec), :func:`chips` (preset names), :func:`chips_table` (the ``npusim chips`` listing).
Numbers come from ../research/hardware.md (cited "hw §N") and ../research/peers.md §5e/§5f.

Bandwidth curves: peers §5e gives one-core GM->L1 and GM->UB throughput by transfer size, measured
on 910B1 in GB/s (read as 1e9 B/s; keys in KiB). They are converted to bytes/cycle at 910B1's
1.85 GHz and scaled per chip by (chip peak path rate / 910B1 peak path rate), both in bytes/cycle.
A transfer's cost is a pipe occupancy ``nbytes / rate`` plus a ``latency`` after it (the core overlaps
the latency with the next transfer; ``transfer_cycles`` is their sum for one isolated transfer), both
from :meth:`ChipSpec.path_cost`. A curve point is the throughput of one whole isolated copy, so its
time ``T = nbytes / curve(nbytes)`` already contains the GM latency (a 1 KiB copy takes ~191 cycles
in the curve, below the 347-cycle DDR latency): on curve paths the latency is the part of ``T`` above
the peak-rate occupancy, at most the path's latency field, and the occupancy is the rest, so an
isolated transfer costs exactly ``T`` (docs/calibration.md "DMA cost"; before, the latency was added
on top of ``T``, counting it twice).

Free parameters for calibration (no hardware source; fit them to ../calibration/ only):
``launch_overhead_cycles`` (fitted: npusim/calibration.py), ``cross_core_flag_latency_cycles``, ``hbm_bw_bytes_per_s`` (effective
GM bandwidth) and ``mte2_latency_cycles``/``mte3_latency_cycles`` (effective GM latency; on the
curve paths only the part the curve leaves room for applies, above).
Other ``# ASSUMPTION:`` values: mte1/fix/mmad latency, scalar_issue_cycles, pipe_queue_depth, fp32
cube rate.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import tomllib
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import numpy as np

from npusim.calibration import LAUNCH_OVERHEAD_S
from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError, NpusimError

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
#: Bytes per element of the cube input dtypes; K0 = 32 B / size (hw §3 fractals).
CUBE_ELEM_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "int8": 1, "int4": 0.5}
# path name -> (rate field, latency field, curve field or None)
_PATHS = {
    "gm_to_l1": ("gm_to_l1_bytes_per_cycle", "mte2_latency_cycles", "gm_to_l1_curve"),
    "gm_to_ub": ("gm_to_ub_bytes_per_cycle", "mte2_latency_cycles", "gm_to_ub_curve"),
    "ub_to_gm": ("ub_to_gm_bytes_per_cycle", "mte3_latency_cycles", None),
    "l1_to_gm": ("l1_to_gm_bytes_per_cycle", "mte3_latency_cycles", None),
    "l1_to_l0a": ("l1_to_l0a_bytes_per_cycle", "mte1_latency_cycles", None),
    "l1_to_l0b": ("l1_to_l0b_bytes_per_cycle", "mte1_latency_cycles", None),
    "l0c_to_gm": ("l0c_to_gm_bytes_per_cycle", "fix_latency_cycles", None),
    "l0c_to_l1": ("l0c_to_l1_bytes_per_cycle", "fix_latency_cycles", None),
    "l0c_to_ub": ("l0c_to_ub_bytes_per_cycle", "fix_latency_cycles", None),
    "ub_to_l1": ("ub_to_l1_bytes_per_cycle", "mte3_latency_cycles", None),
}
_CURVE_OF_RATE = {rate: curve for rate, _, curve in _PATHS.values() if curve}
#: Fields that must be > 0: counts, clocks, buffers every kernel allocates in, the paths every chip has,
#: the shared bandwidths (a zero one never finishes a transfer), throughputs and the timeout. Fields
#: whose help says "0: absent" (and latencies, overheads, l2_bytes: a chip without L2) may be 0.
_POSITIVE = ("aic_count", "clock_hz", "vector_clock_hz", "l1_bytes", "l0a_bytes", "l0b_bytes", "l0c_bytes",
             "ub_bytes", "hbm_bytes", "hbm_bw_bytes_per_s", "l2_bw_bytes_per_s",
             "gm_to_l1_bytes_per_cycle", "gm_to_ub_bytes_per_cycle", "ub_to_gm_bytes_per_cycle",
             "l1_to_l0a_bytes_per_cycle", "l1_to_l0b_bytes_per_cycle", "pipe_queue_depth",
             "vector_bytes_per_cycle", "ub_read_bytes_per_cycle", "aicore_timeout_s", "timer_hz")
#: Float fields that may be infinite: an infinite AI Core timeout is "no limit" (what-if studies).
_MAY_BE_INF = ("aicore_timeout_s",)


def _f(help_text: str):
    return field(metadata={"help": help_text})


def _bad(message: str) -> AclnnError:
    return AclnnError(ACLNN_ERR_PARAM_INVALID, message)


@dataclass(frozen=True, kw_only=True)
class ChipSpec:
    """One chip's parameters. Immutable and hashable; build variants with :meth:`replace`.

    Per-core rates are bytes per AI Core clock cycle; latencies are AI Core cycles. Raises
    AclnnError(161002) on an inconsistent or mistyped field.
    """

    name: str = _f("CANN SoC name, e.g. Ascend910B2")
    soc_family: str = _f("CANN Short_SoC family: Ascend910B, Ascend910_93, Ascend310P")
    core_split: bool = _f("True: AI Core = 1 AIC + aiv_per_aic AIV sharing only GM; False: combined core")
    aic_count: int = _f("AI Cores (cube cores) usable by kernels")
    aiv_per_aic: int = _f("vector cores per AI Core on split chips; 0 on combined chips")
    vector_core_count: int = _f("extra AIV-only VectorCores beside the AI Cores (310P)")
    clock_hz: float = _f("AI Core / cube clock, Hz")
    vector_clock_hz: float = _f("clock of AIV-only cores (split AIVs, 310P VectorCores), Hz")
    l1_bytes: int = _f("L1 buffer per AI Core, bytes")
    l0a_bytes: int = _f("L0A (cube left operand) per AI Core, bytes")
    l0b_bytes: int = _f("L0B (cube right operand) per AI Core, bytes")
    l0c_bytes: int = _f("L0C (cube accumulator) per AI Core, bytes")
    ub_bytes: int = _f("Unified Buffer per vector unit, bytes")
    bt_bytes: int = _f("BiasTable per AI Core, bytes (0: absent)")
    fb_bytes: int = _f("FixPipe buffers per AI Core, bytes (0: absent)")
    l1_align_bytes: int = _f("L1 allocation alignment, bytes")
    l0a_align_bytes: int = _f("L0A allocation alignment, bytes")
    l0b_align_bytes: int = _f("L0B allocation alignment, bytes")
    l0c_align_bytes: int = _f("L0C allocation alignment, bytes")
    ub_align_bytes: int = _f("UB allocation alignment, bytes")
    bt_align_bytes: int = _f("BiasTable allocation alignment, bytes")
    fb_align_bytes: int = _f("FixPipe buffer allocation alignment, bytes")
    hbm_bytes: int = _f("device memory (HBM/DDR) capacity, bytes")
    l2_bytes: int = _f("L2 cache capacity, bytes")
    hbm_bw_bytes_per_s: float = _f("effective whole-chip HBM/DDR bandwidth, bytes/s (calibration parameter)")
    l2_bw_bytes_per_s: float = _f("whole-chip L2 bandwidth, bytes/s")
    gm_to_l1_bytes_per_cycle: float = _f("peak GM->L1 (MTE2) rate per core, bytes/cycle")
    gm_to_ub_bytes_per_cycle: float = _f("peak GM->UB (MTE2) rate per core, bytes/cycle")
    ub_to_gm_bytes_per_cycle: float = _f("UB->GM (MTE3) rate per core, bytes/cycle")
    l1_to_gm_bytes_per_cycle: float = _f("L1->GM rate per core, bytes/cycle (0: absent)")
    l1_to_l0a_bytes_per_cycle: float = _f("L1->L0A (MTE1) rate, bytes/cycle")
    l1_to_l0b_bytes_per_cycle: float = _f("L1->L0B (MTE1) rate, bytes/cycle")
    l0c_to_gm_bytes_per_cycle: float = _f("L0C->GM (FixPipe) rate, bytes/cycle (0: absent)")
    l0c_to_l1_bytes_per_cycle: float = _f("L0C->L1 (FixPipe) rate, bytes/cycle (0: absent)")
    l0c_to_ub_bytes_per_cycle: float = _f("L0C->UB rate (200x only), bytes/cycle (0: absent)")
    ub_to_l1_bytes_per_cycle: float = _f("UB->L1 (MTE3, 200x only) rate, bytes/cycle (0: absent)")
    gm_to_l1_curve: tuple = _f("GM->L1 rate by transfer size: ((bytes, bytes/cycle), ...), ascending")
    gm_to_ub_curve: tuple = _f("GM->UB rate by transfer size: ((bytes, bytes/cycle), ...), ascending")
    mte2_latency_cycles: float = _f("GM read latency added to each MTE2 transfer, cycles")
    mte3_latency_cycles: float = _f("write latency added to each MTE3 transfer, cycles")
    mte1_latency_cycles: float = _f("L1->L0A/L0B latency added to each MTE1 transfer, cycles")
    fix_latency_cycles: float = _f("latency added to each L0C read-out (FixPipe, or 200x L0C->UB), cycles")
    mmad_latency_cycles: float = _f("cube pipeline latency of one Mmad beyond its throughput, cycles")
    vector_latency_cycles: float = _f("default pipeline latency of a vector instruction, cycles")
    scalar_issue_cycles: float = _f("cycles the scalar unit spends issuing one instruction")
    flag_cycles: float = _f("cost of one SetFlag/WaitFlag within a core, cycles")
    cross_core_flag_latency_cycles: float = _f("CrossCoreSetFlag -> waiter release latency, cycles")
    launch_overhead_cycles: float = _f("fixed cost of one kernel launch, cycles")
    pipe_queue_depth: int = _f("instructions a pipe queue holds before the scalar unit stalls")
    cube_macs_per_cycle: tuple = _f("cube MACs per cycle per AI Core: ((dtype name, MACs), ...)")
    vector_bytes_per_cycle: int = _f("vector unit throughput: bytes of one operand per cycle (1 repeat)")
    ub_read_bytes_per_cycle: int = _f("UB read bandwidth to the vector unit, bytes/cycle")
    aicore_timeout_s: float = _f("default AI Core execution timeout, s")
    timer_hz: float = _f("system counter (GetSystemCycle) frequency, Hz")

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type in ("str", "bool", "tuple"):
                ok = type(v).__name__ == f.type or (f.type == "tuple" and isinstance(v, (list, dict)))
            elif f.type == "int":  # integral: Python and numpy ints (never bool, never 2.0)
                ok = isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) and v >= 0
                if ok:
                    object.__setattr__(self, f.name, int(v))
            else:  # float: finite (only the timeout may be infinite: no limit)
                ok = isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_)) and v >= 0 and \
                    (math.isfinite(v) or (f.name in _MAY_BE_INF and v == math.inf))
                if ok:
                    object.__setattr__(self, f.name, float(v))
            if not ok:
                rule = "an int >= 0" if f.type == "int" else "a finite number >= 0" if f.type == "float" else \
                    f"a {f.type}"
                raise _bad(f"ChipSpec.{f.name}: must be {rule}, got {v!r}")
            if f.name.endswith("_align_bytes") and (v <= 0 or v & (v - 1)):
                raise _bad(f"ChipSpec.{f.name}: must be a power of two, got {v}")
        if self.core_split != (self.aiv_per_aic > 0):
            raise _bad(f"ChipSpec.aiv_per_aic: must be > 0 exactly when core_split, got {self.aiv_per_aic}")
        for name in _POSITIVE:
            if getattr(self, name) <= 0:
                raise _bad(f"ChipSpec.{name}: must be > 0, got {getattr(self, name)!r} (a zero "
                           f"{'rate' if 'per_' in name else 'size' if 'bytes' in name else 'value'} would stall "
                           "or break every launch)")
        for name in _CURVE_OF_RATE.values():
            object.__setattr__(self, name, _norm_curve(name, getattr(self, name)))
        macs = self.cube_macs_per_cycle
        try:
            pairs = tuple(sorted((str(k), _positive_int(v)) for k, v in dict(macs).items()))
        except (TypeError, ValueError):
            raise _bad(f"ChipSpec.cube_macs_per_cycle: need (dtype, MACs > 0 integer) pairs, got {macs!r}") from None
        object.__setattr__(self, "cube_macs_per_cycle", pairs)
        # NOTE: per-path lookup tables, built once; transfer costs are in the simulator's hot path.
        table = {}
        for path, (rate_f, lat_f, curve_f) in _PATHS.items():
            curve = getattr(self, curve_f) if curve_f else ()
            table[path] = (getattr(self, rate_f), getattr(self, lat_f),
                           [b for b, _ in curve], [r for _, r in curve])
        object.__setattr__(self, "_paths", table)
        object.__setattr__(self, "_macs", dict(self.cube_macs_per_cycle))

    # -- derived values -------------------------------------------------------------------------
    @property
    def aiv_count(self) -> int:
        """AIVs on split chips (aic_count * aiv_per_aic); 0 on combined chips."""
        return self.aic_count * self.aiv_per_aic

    @property
    def max_block_dim_cube(self) -> int:
        """Most blocks a cube or mixed kernel runs at once (one per AI Core)."""
        return self.aic_count

    @property
    def max_block_dim_vector(self) -> int:
        """Most blocks a vector-only kernel runs at once (AIVs, or AI Cores + VectorCores on 310P)."""
        return self.aiv_count if self.core_split else self.aic_count + self.vector_core_count

    @property
    def cube_tflops_fp16(self) -> float:
        """Peak fp16 cube TFLOPS (2 FLOP per MAC, all AI Cores; hw §7)."""
        return self.aic_count * 2 * self.macs_per_cycle("float16") * self.clock_hz / 1e12

    @property
    def cube_tops_int8(self) -> float:
        """Peak int8 cube TOPS (2 OP per MAC, all AI Cores; hw §7)."""
        return self.aic_count * 2 * self.macs_per_cycle("int8") * self.clock_hz / 1e12

    def cycles_to_us(self, cycles: float) -> float:
        """AI Core cycles -> microseconds at ``clock_hz``."""
        return cycles * 1e6 / self.clock_hz

    # -- costs ----------------------------------------------------------------------------------
    def path_rate(self, path: str, nbytes: int) -> float:
        """Per-core rate (bytes/cycle) of one *nbytes* transfer on *path*.

        Uses the path's size curve where it has one (linear in size between points, clamped to
        the end points), else the flat rate. Raises NotImplementedError for an unknown path name
        and NpusimError for a path this chip does not have.
        """
        rate, _, xs, ys = self._path(path)
        if rate <= 0:
            raise NpusimError(f"data path {path} does not exist on {self.name}")
        if not xs:
            return rate
        i = bisect_right(xs, nbytes)
        if i == 0:
            return ys[0]
        if i == len(xs):
            return ys[-1]
        x0, y0 = xs[i - 1], ys[i - 1]
        return y0 + (ys[i] - y0) * (nbytes - x0) / (xs[i] - x0)

    def path_latency(self, path: str) -> float:
        """The latency field (cycles) of *path*: what a flat-rate transfer adds after leaving its pipe
        (curve paths apply at most this much, :meth:`path_cost`)."""
        return self._path(path)[1]

    def path_cost(self, path: str, nbytes: int) -> tuple[float, float]:
        """(occupancy rate in bytes/cycle, latency in cycles) of one *nbytes* transfer on *path*.

        Flat paths: the path rate and its latency field. Curve paths (peers §5e measured one whole
        isolated copy, GM latency included): the copy's time ``T = nbytes / curve(nbytes)`` split into
        a latency ``min(latency field, T - nbytes / peak)`` and the occupancy, the rest, so the pipe is
        held at most at the peak rate and an isolated transfer costs exactly ``T``.
        """
        rate = self.path_rate(path, nbytes)
        peak, latency, xs, _ = self._path(path)
        if not xs:
            return rate, latency
        if nbytes <= 0:  # an empty copy: nothing to wait for (the curve's time is 0)
            return rate, 0.0
        whole = nbytes / rate
        latency = min(latency, max(whole - nbytes / peak, 0.0))
        return nbytes / (whole - latency), latency

    def _path(self, path: str) -> tuple:
        try:
            return self._paths[path]
        except KeyError:
            known = ", ".join(_PATHS)
            raise NotImplementedError(f"data path {path!r} is not modelled; known: {known}") from None

    def transfer_cycles(self, path: str, nbytes: int) -> float:
        """Cycles of one isolated *nbytes* transfer on *path*: latency + nbytes / occupancy rate
        (:meth:`path_cost`; on curve paths the curve's own time)."""
        if nbytes < 0:
            raise NpusimError(f"transfer on {path}: nbytes must be >= 0, got {nbytes}")
        rate, latency = self.path_cost(path, nbytes)
        return latency + nbytes / rate

    def macs_per_cycle(self, dtype_name: str) -> int:
        """Cube MACs per cycle per AI Core for input dtype *dtype_name* (hw §3)."""
        try:
            return self._macs[dtype_name]
        except KeyError:
            raise NotImplementedError(f"cube dtype {dtype_name!r} is not modelled on {self.name}; "
                                      f"modelled: {', '.join(self._macs)}") from None

    def cube_cycles(self, m: int, n: int, k: int, dtype_name: str) -> int:
        """Throughput cycles of an (m x k) @ (k x n) Mmad, fractal-granular (hw §3).

        m and n round up to 16, k to K0 = 32 B / element size. Excludes ``mmad_latency_cycles``.
        """
        macs = self.macs_per_cycle(dtype_name)
        if dtype_name not in CUBE_ELEM_BYTES:
            raise NotImplementedError(f"cube dtype {dtype_name!r}: element size unknown")
        if min(m, n, k) < 0:
            raise NpusimError(f"Mmad shape must be >= 0, got m={m} n={n} k={k}")
        k0 = int(32 / CUBE_ELEM_BYTES[dtype_name])
        fractals = -(-m // 16) * -(-n // 16) * -(-k // k0)
        return math.ceil(fractals * 16 * 16 * k0 / macs)

    # -- building variants ----------------------------------------------------------------------
    def replace(self, **changes) -> ChipSpec:
        """A copy with *changes* applied. Raises AclnnError(161002) naming an unknown field.

        Changing a path's peak rate without giving its curve rescales the curve by the same
        ratio, so what-if studies on peak rates take effect on every transfer size.
        """
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise _bad(f"ChipSpec: unknown field(s) {', '.join(unknown)}")
        for rate_f, curve_f in _CURVE_OF_RATE.items():
            old, new = getattr(self, rate_f), changes.get(rate_f)
            if isinstance(new, (int, float)) and curve_f not in changes and old > 0:
                changes[curve_f] = tuple((b, r * new / old) for b, r in getattr(self, curve_f))
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Plain, JSON/TOML-ready fields (curves as lists, cube MACs as a dict)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name in _CURVE_OF_RATE.values():
            d[name] = [list(p) for p in d[name]]
        d["cube_macs_per_cycle"] = dict(d["cube_macs_per_cycle"])
        return d

    @classmethod
    def from_toml(cls, path) -> ChipSpec:
        """Load a spec from TOML: optional ``base = "<preset>"`` plus field overrides.

        Without ``base`` every field must be given. Raises AclnnError(161002) for an unreadable
        file, an unknown key (named) or missing fields.
        """
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise _bad(f"chip TOML {path}: cannot read: {exc}") from exc
        base = data.pop("base", None)
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise _bad(f"chip TOML {path}: unknown key(s) {', '.join(unknown)}")
        if base is not None:
            return chip(base).replace(**data)
        missing = [n for n in names if n not in data]
        if missing:
            raise _bad(f"chip TOML {path}: without base every field is needed; missing {', '.join(missing)}")
        return cls(**data)


def _positive_int(v) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral) or v <= 0:
        raise ValueError(v)
    return int(v)


def _norm_curve(name: str, curve) -> tuple:
    try:  # an empty curve is allowed: the path then uses its flat rate
        pts = tuple((int(b), float(r)) for b, r in curve)
    except (TypeError, ValueError, OverflowError):
        pts = ((0, 0.0),)
    if any(not (0 < r < math.inf) or b <= 0 for b, r in pts) or any(a[0] >= b[0] for a, b in zip(pts, pts[1:])):
        raise _bad(f"ChipSpec.{name}: need (bytes, bytes/cycle) points, bytes > 0 ascending, rate > 0")
    return pts


# ---- presets ------------------------------------------------------------------------------------
_B1_HZ = 1.85e9  # hw §2: 910B1 cube_freq 1850 MHz (S1 ini = S2 msprof)


def _gib_s(gib_per_s: float, clock_hz: float) -> float:
    """msprof per-core GiB/s (hw §6b) -> bytes/cycle at *clock_hz*."""
    return gib_per_s * GIB / clock_hz


# peers §5e, 910B1 one core, (KiB, GB/s); GB read as 1e9 B: 512 KiB at 262 GB/s and the quoted
# ~281 GB/s peak match msprof's 264 GiB/s (= 283 GB/s) only under that reading.
_B1_GM_TO_L1_GBPS = ((1, 9.9), (4, 29), (16, 93), (64, 176), (128, 233), (256, 261), (512, 262))
_B1_GM_TO_UB_GBPS = ((1, 7), (10, 48), (30, 78))  # peers §5e: "saturates at ~78 GB/s from ~30 KB"
_B1_PEAK = {"gm_to_l1": _gib_s(264.0, _B1_HZ), "gm_to_ub": _gib_s(220.06, _B1_HZ)}  # hw §6b, 910B1


def _curve(table, path: str, peak_bytes_per_cycle: float) -> tuple:
    """peers §5e table -> bytes/cycle at 910B1's clock, scaled by this chip's / 910B1's peak."""
    scale = peak_bytes_per_cycle / _B1_PEAK[path]
    return tuple((kib * KIB, gbps * 1e9 / _B1_HZ * scale) for kib, gbps in table)


_COMMON = dict(
    l0a_bytes=64 * KIB, l0b_bytes=64 * KIB,  # hw §5 (S1 ini; msSanitizer agrees), 220x and 200x
    l1_align_bytes=32, ub_align_bytes=32,  # hw §5 alignment column (S4)
    l0a_align_bytes=512, l0b_align_bytes=512,  # hw §5 (S4): one 512 B fractal
    l0c_align_bytes=64,  # hw §5: S4 docs 64 B vs msSanitizer 512; the docs are the kernel contract
    bt_align_bytes=64,  # hw §5 (S4)
    fb_align_bytes=64,  # hw §5: S4 says 64, S10 fbBlockSize 128; keep the official doc value
    # hw §6b: ini says L1->L0A/L0B 512/256, msprof roofline, S8 GEMM model and the msprof
    # per-core GiB/s (~254/122 B/cyc) all say 256/128 -> 256/128 (applied to 310P too: same ini).
    l1_to_l0a_bytes_per_cycle=256.0, l1_to_l0b_bytes_per_cycle=128.0,
    mte2_latency_cycles=347.0,  # hw §6c S8 DDR_LATENCY_RD; large operator inputs come from HBM (calibrate)
    mte3_latency_cycles=96.0,  # hw §6c S8 L2_LATENCY_WD: writes land in the write-back L2 (calibrate)
    mte1_latency_cycles=30.0,  # ASSUMPTION: NOT FOUND (hw §11.2); SRAM->SRAM, ~10x below GM latency
    fix_latency_cycles=96.0,  # ASSUMPTION: = L2 write latency (S8, hw §6c); FixPipe mostly writes GM
    mmad_latency_cycles=30.0,  # ASSUMPTION: NOT FOUND (hw §10); ~depth of a 16-deep MAC tree + L0C write
    vector_latency_cycles=10.0,  # hw §4: S3 pypto INHERENT_LATENCY default 10 (model value, M)
    # ASSUMPTION: NOT FOUND (hw §4); an Ascend C call is a few ~1-cycle scalar ops (mask, registers, issue)
    scalar_issue_cycles=4.0,
    flag_cycles=1.0,  # hw §10: msprof draws SET_FLAG as a 1-cycle event
    cross_core_flag_latency_cycles=1000.0,  # peers §5f: FA fit, 1000 cycles sync per tile (calibrate)
    pipe_queue_depth=32,  # ASSUMPTION: queue depth NOT FOUND; 32 lets scalar run a tile ahead
    vector_bytes_per_cycle=256,  # hw §4: 1 repeat (8 x 32 B) per cycle (msprof lanes; pypto says 2)
    ub_read_bytes_per_cycle=512,  # hw §4: 16 bank groups x 32 B per cycle (S4 bank-conflict page)
    timer_hz=50e6,  # hw §2: GetSystemCycle 50 MHz (S4 api_07_0282, S6)
)


def _c220(name: str, family: str, aic: int, clock_hz: float, hbm_bytes: int, l2_bytes: int,
          ddr_bpc: float, l2_bpc: float, gib_s: tuple) -> ChipSpec:
    """A 220x chip (1 AIC + 2 AIV per AI Core). *gib_s*: msprof per-core GiB/s (hw §6b) for
    GM->L1, GM->UB, UB->GM, L1->GM, L0C->GM, L0C->L1; *ddr_bpc*/*l2_bpc*: chip B/cycle (hw §6c)."""
    gm_l1, gm_ub, ub_gm, l1_gm, l0c_gm, l0c_l1 = (_gib_s(g, clock_hz) for g in gib_s)
    return ChipSpec(
        name=name, soc_family=family, core_split=True, aic_count=aic,
        aiv_per_aic=2,  # hw §1: AIC:AIV = 1:2 (S1 cube/vector_core_cnt)
        vector_core_count=0,  # hw §1: no extra VectorCores on 220x
        clock_hz=clock_hz, vector_clock_hz=clock_hz,  # hw §2: no vector freq in 220x ini -> cube clock
        launch_overhead_cycles=LAUNCH_OVERHEAD_S * clock_hz,  # fitted, npusim/calibration.py
        l1_bytes=512 * KIB, l0c_bytes=128 * KIB, ub_bytes=192 * KIB,  # hw §5 (S1, S10)
        bt_bytes=1 * KIB, fb_bytes=7 * KIB,  # hw §5: bt_size 1024; fb0..fb3 = 2+1+2+2 KiB
        hbm_bytes=hbm_bytes, l2_bytes=l2_bytes,
        hbm_bw_bytes_per_s=ddr_bpc * clock_hz, l2_bw_bytes_per_s=l2_bpc * clock_hz,
        gm_to_l1_bytes_per_cycle=gm_l1, gm_to_ub_bytes_per_cycle=gm_ub, ub_to_gm_bytes_per_cycle=ub_gm,
        l1_to_gm_bytes_per_cycle=l1_gm, l0c_to_gm_bytes_per_cycle=l0c_gm, l0c_to_l1_bytes_per_cycle=l0c_l1,
        l0c_to_ub_bytes_per_cycle=0.0, ub_to_l1_bytes_per_cycle=0.0,  # hw §5: no L0C->UB, UB<->L1 on 220x
        gm_to_l1_curve=_curve(_B1_GM_TO_L1_GBPS, "gm_to_l1", gm_l1),
        gm_to_ub_curve=_curve(_B1_GM_TO_UB_GBPS, "gm_to_ub", gm_ub),
        # hw §3: fp16/bf16 4096, int8 8192 MAC/cycle (S2, S11). ASSUMPTION fp32: NOT FOUND; K0=8
        # fractal (16x8x16 = 2048 MAC) per cycle, i.e. half the fp16 rate (hw §3 inference, L).
        cube_macs_per_cycle=(("float16", 4096), ("bfloat16", 4096), ("int8", 8192), ("float32", 2048)),
        aicore_timeout_s=1091.0,  # hw §8: Atlas A2/A3 default = max 1091 s (S5; S6 254-credit STARS)
        **_COMMON,
    )


# hw §6c chip GM: S8 GEMM model DDR 850 B/cycle (530 on 910B4). Chosen over msprof THEORY_BW_GM
# (1.8 TB/s, a theoretical peak) and the ini aggregate (1.42 TB/s): it is CANN's own effective
# figure and matches third-party 1.5-1.6 TB/s. L2: S8 L2_RO 2550 B/cycle (~4.7 TB/s; the ini
# aggregate 110 x 24 x 1.85 GHz = 4.9 TB/s agrees; msprof's 8 TB/s is theoretical).
_PRESETS = [
    # hw §1/§2/§6b: 24 AIC, 1850 MHz, 64 GiB, 192 MiB L2
    _c220("Ascend910B1", "Ascend910B", 24, 1.85e9, 64 * GIB, 192 * MIB, 850, 2550,
          (264.0, 220.06, 186.8, 199.43, 209.32, 216.88)),
    # hw §1/§2/§6b: 24 AIC, 1800 MHz
    _c220("Ascend910B2", "Ascend910B", 24, 1.8e9, 64 * GIB, 192 * MIB, 850, 2550,
          (256.86, 214.11, 181.75, 193.99, 203.66, 211.00)),
    # hw §1/§2/§6b: 20 AIC, 1800 MHz, same per-core GiB/s as B2
    _c220("Ascend910B3", "Ascend910B", 20, 1.8e9, 64 * GIB, 192 * MIB, 850, 2550,
          (256.86, 214.11, 181.75, 193.99, 203.66, 211.00)),
    # hw §1/§2: 20 AIC, 32 GiB, 96 MiB L2. Clock 1500 MHz, not msprof's 1650: the ini is what CANN
    # tiling reads, peers §5f uses 1500, and the on-chip msprof rates (L1->L0A 368.2, L1->L0B
    # 173.81 GiB/s) give 264/124 B/cyc at 1500 (vs 254/122 on B1) but 240/113 at 1650.
    # msprof converts B4 cycles to us at 1650 MHz: its us are 1500/1650 of ours. GM 530 B/cyc (S8; msprof
    # 0.8 TB/s and peers §5f "half GM bandwidth" agree); L2 keeps S8's L2:DDR = 3 -> 1590
    # (msprof also halves B4's L2: 4 vs 8 TB/s).
    _c220("Ascend910B4", "Ascend910B", 20, 1.5e9, 32 * GIB, 96 * MIB, 530, 1590,
          (222.0, 195.27, 176.75, 189.89, 190.7, 190.7)),
    # hw §1: A3 die = 24 AIC @1850 MHz, 64 GiB/die, 192 MiB. No msprof table for 910_93 in hw §6b:
    # ASSUMPTION same die/clock as 910B1 -> its per-core rates; S8 850 B/cyc ~ third-party 1.6 TB/s/die.
    _c220("Ascend910_9391", "Ascend910_93", 24, 1.85e9, 64 * GIB, 192 * MIB, 850, 2550,
          (264.0, 220.06, 186.8, 199.43, 209.32, 216.88)),
]

_P3_HZ = 1.06e9  # hw §1/§2: 310P3 cube_freq 1060 MHz (S1 = S2)
_P3_L2_BPC = 114.0  # hw §6a: 310P AI Core l2_rate = ub_to_l2 = 114 B/cyc (ini; no msprof table)
_PRESETS.append(ChipSpec(
    name="Ascend310P3", soc_family="Ascend310P",
    core_split=False, aic_count=8, aiv_per_aic=0,  # hw §1: 8 combined AI Cores (cube + vector, one scalar)
    vector_core_count=7,  # hw §1: +7 AIV-only VectorCores
    clock_hz=_P3_HZ, vector_clock_hz=1.0e9,  # hw §1: VectorCores at vec_freq 1000 MHz
    launch_overhead_cycles=LAUNCH_OVERHEAD_S * _P3_HZ,  # fitted, npusim/calibration.py
    l1_bytes=1 * MIB, l0c_bytes=256 * KIB, ub_bytes=256 * KIB,  # hw §5 (S1; msSanitizer agrees)
    bt_bytes=0, fb_bytes=0,  # hw §5: no BT/FB on 200x ("-")
    hbm_bytes=24_000_000_000, l2_bytes=16 * MIB,  # hw §1: memory_size 24e9 B, L2 16 MiB
    # hw §11.5: 204.8 GB/s commonly quoted; ini aggregate 17x8x1.06 GHz + 9x7x1.0 GHz = 207 GB/s agrees
    hbm_bw_bytes_per_s=204.8e9,
    l2_bw_bytes_per_s=_P3_L2_BPC * 8 * _P3_HZ + 57 * 7 * 1.0e9,  # hw §6a: ini l2_rate x cores x f, AIC+VC
    # hw §6a: the ini l2_rate is the only per-core GM figure for 310P (910B's msprof peak 153 B/cyc
    # exceeds its ini l2_rate 110, so this is if anything low).
    gm_to_l1_bytes_per_cycle=_P3_L2_BPC, gm_to_ub_bytes_per_cycle=_P3_L2_BPC,
    ub_to_gm_bytes_per_cycle=_P3_L2_BPC,  # hw §6a ub_to_l2 114
    l1_to_gm_bytes_per_cycle=0.0,  # hw §10: 200x MTE paths list no L1->OUT
    # hw §5: no FixPipe on 200x (FB "-"); L0C leaves through the vector unit to UB (ini l0_c_to_ub 512)
    l0c_to_gm_bytes_per_cycle=0.0, l0c_to_l1_bytes_per_cycle=0.0, l0c_to_ub_bytes_per_cycle=512.0,
    ub_to_l1_bytes_per_cycle=256.0,  # hw §6a: 310P ini ub_to_l1 256 (MTE3, hw §10)
    gm_to_l1_curve=_curve(_B1_GM_TO_L1_GBPS, "gm_to_l1", _P3_L2_BPC),
    gm_to_ub_curve=_curve(_B1_GM_TO_UB_GBPS, "gm_to_ub", _P3_L2_BPC),
    # hw §3/§7: fp16 4096, int8 8192 MAC/cycle (§7 derives 310P TFLOPS with them). bf16/fp32 are in
    # no 310P source (hw §3 lists f32 mmad for the 910B ini only): fail loudly, don't guess.
    cube_macs_per_cycle=(("float16", 4096), ("int8", 8192)),
    aicore_timeout_s=547.0,  # hw §8: Atlas inference default = max 547 s (S5)
    **_COMMON,
))
#: Preset specs by CANN SoC name (read-only).
PRESETS: Mapping[str, ChipSpec] = MappingProxyType({spec.name: spec for spec in _PRESETS})


def chips() -> list[str]:
    """Names of the preset chips."""
    return list(PRESETS)


def chip(name_or_spec) -> ChipSpec:
    """A preset by CANN name, a spec loaded from a ``.toml`` path, or *name_or_spec* itself.

    Raises AclnnError(161002) listing the presets for an unknown name.
    """
    if isinstance(name_or_spec, ChipSpec):
        return name_or_spec
    if isinstance(name_or_spec, Path) or (isinstance(name_or_spec, str) and name_or_spec.endswith(".toml")):
        return ChipSpec.from_toml(name_or_spec)
    if isinstance(name_or_spec, str) and name_or_spec in PRESETS:
        return PRESETS[name_or_spec]
    raise _bad(f"chip: unknown chip {name_or_spec!r}; presets: {', '.join(PRESETS)} (or a .toml path)")


def chips_table() -> str:
    """A printable table of the presets (``npusim chips``)."""
    head = ("name", "cores", "clock MHz", "UB/L1 KiB", "HBM GB/s", "fp16 TFLOPS", "timeout s")
    rows = [head]
    for s in PRESETS.values():
        extra = f"{s.aiv_count} AIV" if s.core_split else f"{s.vector_core_count} VC"
        rows.append((s.name, f"{s.aic_count} AIC+{extra}", f"{s.clock_hz / 1e6:.0f}",
                     f"{s.ub_bytes // KIB}/{s.l1_bytes // KIB}", f"{s.hbm_bw_bytes_per_s / 1e9:.0f}",
                     f"{s.cube_tflops_fp16:.1f}", f"{s.aicore_timeout_s:.0f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
