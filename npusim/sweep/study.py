"""A design study: what to sweep (from a TOML file or a dict) and the points it expands to.

Study file (every key but ``operator`` and ``[[problem]]`` optional)::

    name = "pfa_tiling"              # default: the file's stem
    operator = "pfa"                 # a registry name (npusim.registry)
    mode = "timing"                  # or "estimate"
    output = "out/pfa_tiling.parquet"  # relative to the study file; default out/<name>.parquet
    include_default = true           # also run each problem on each chip with no tiling override

    [[problem]]                      # one table per shape: the operator's CLI parameters
    name = "causal S2048"            # optional label
    B = 1
    N = 8

    [tiling]                         # axes of ops.<op>.tiling_space: a list of values or "all"
    sOuter = [16, 32, 64, 128]

    [chip]
    base = "Ascend910B2"             # a preset name or a list of them
    scale = { hbm_bw_bytes_per_s = [0.5, 1.0, 1.5] }   # factors of the base value (ChipSpec fields)
    grid = { l2_bytes = [100663296, 201326592] }        # absolute values
    variants = [{ clock_hz = 1.5e9 }]                   # extra explicit ChipSpec.replace changes

    [search]
    kind = "grid"                    # grid | random (samples=) | optuna (trials= per problem and chip)
    samples = 100
    trials = 40
    seed = 0

Bad studies raise AclnnError 161002 naming the key.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError

MODES = ("timing", "estimate")
SEARCHES = ("grid", "random", "optuna")
#: Bump when a result column changes meaning: cached rows of an older schema are not reused.
RESULT_SCHEMA = 1
_TOP_KEYS = {"name", "operator", "mode", "output", "include_default", "problem", "tiling", "chip", "search"}


def _bad(message: str) -> AclnnError:
    return AclnnError(ACLNN_ERR_PARAM_INVALID, f"sweep study: {message}")


@dataclass(frozen=True)
class Point:
    """One run: an operator call on one problem, chip variant and tiling (empty = the default tiling)."""

    operator: str
    mode: str
    problem_name: str
    problem: tuple  # sorted (param, value) pairs, defaults filled in
    chip: str
    chip_changes: tuple  # sorted (ChipSpec field, value) pairs
    tiling: tuple  # sorted (axis, value) pairs

    @property
    def key(self) -> str:
        """Hash of everything that decides the result (the label excluded): the cache key. The model
        code itself enters as a fingerprint of its sources (fingerprint.py), so a changed model re-runs."""
        from npusim.sweep.fingerprint import model_fingerprint

        blob = json.dumps([RESULT_SCHEMA, model_fingerprint(self.operator), self.operator, self.mode, self.problem, self.chip,
                           self.chip_changes, self.tiling], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:20]

    @property
    def case(self) -> tuple:
        """The (problem, chip variant) this point tunes the tiling of."""
        return self.problem_name, self.chip, self.chip_changes


@dataclass
class Study:
    """A parsed study (see the module docstring); :meth:`points` expands it."""

    operator: str
    problems: list[dict]
    name: str = "study"
    mode: str = "timing"
    tiling: dict = field(default_factory=dict)
    chip: dict = field(default_factory=lambda: {"base": "Ascend910B2"})
    search: dict = field(default_factory=lambda: {"kind": "grid"})
    include_default: bool = True
    output: Path | None = None

    @classmethod
    def from_toml(cls, path) -> Study:
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise _bad(f"no study file {path}") from None
        except tomllib.TOMLDecodeError as e:
            raise _bad(f"{path}: {e}") from None
        data.setdefault("name", path.stem)
        out = data.get("output") or f"out/{data['name']}.parquet"
        data["output"] = path.parent / out
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict) -> Study:
        unknown = set(data) - _TOP_KEYS
        if unknown:
            raise _bad(f"unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(_TOP_KEYS))}")
        if "operator" not in data or not isinstance(data["operator"], str):
            raise _bad("operator = \"<registry name>\" is required")
        problems = data.get("problem")
        if not isinstance(problems, list) or not problems or not all(isinstance(p, dict) for p in problems):
            raise _bad("at least one [[problem]] table is required")
        study = cls(operator=data["operator"], problems=[dict(p) for p in problems],
                    name=str(data.get("name", "study")), mode=data.get("mode", "timing"),
                    tiling=dict(data.get("tiling", {})), chip=dict(data.get("chip", {"base": "Ascend910B2"})),
                    search=dict(data.get("search", {"kind": "grid"})),
                    include_default=bool(data.get("include_default", True)),
                    output=Path(data["output"]) if data.get("output") else None)
        study.check()
        return study

    # --- checks --------------------------------------------------------------------------------
    def check(self) -> None:
        if self.mode not in MODES:
            raise _bad(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        kind = self.search.get("kind", "grid")
        if kind not in SEARCHES:
            raise _bad(f"search.kind must be one of {', '.join(SEARCHES)}, got {kind!r}")
        for key in ("samples", "trials", "seed"):
            v = self.search.get(key, 0)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise _bad(f"search.{key} must be a non-negative integer, got {v!r}")
        unknown = set(self.chip) - {"base", "scale", "grid", "variants"}
        if unknown:
            raise _bad(f"unknown [chip] key(s) {', '.join(sorted(unknown))}; known: base, scale, grid, variants")
        self.entry()  # unknown operator -> the registry's error

    def entry(self):
        from npusim import registry

        return registry.get(self.operator)

    # --- expansion -----------------------------------------------------------------------------
    def problem_dicts(self) -> list[tuple[str, dict]]:
        """(label, parameters with defaults filled, parsed by the operator's own registry entry) per
        [[problem]]."""
        entry = self.entry()
        out = []
        for i, raw in enumerate(self.problems):
            raw = dict(raw)
            label = str(raw.pop("name", "")) or ", ".join(f"{k}={v}" for k, v in raw.items())
            try:
                full = entry.parse({k: v for k, v in raw.items()})
            except AclnnError as e:
                raise _bad(f"problem {i} ({label}): {e.message}") from None
            out.append((label, full))
        return out

    def chip_variants(self) -> list[tuple[str, tuple]]:
        """(preset, sorted changes) per chip variant: bases x scale x grid, then explicit variants; every
        variant names every field the study varies (the base value where it leaves one alone)."""
        from npusim.chip import ChipSpec
        from npusim.chip import chip as get_chip

        bases = self.chip.get("base", "Ascend910B2")
        bases = [bases] if isinstance(bases, str) else list(bases)
        scale, grid_ = self.chip.get("scale", {}), self.chip.get("grid", {})
        extra = self.chip.get("variants", [])
        for what, table in (("scale", scale), ("grid", grid_)):
            if not isinstance(table, dict) or not all(isinstance(v, list) and v for v in table.values()):
                raise _bad(f"chip.{what} must map ChipSpec fields to non-empty lists")
        if not isinstance(extra, list) or not all(isinstance(v, dict) for v in extra):
            raise _bad("chip.variants must be a list of tables of ChipSpec fields")
        fields = sorted(set(scale) | set(grid_) | {k for v in extra for k in v})
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(ChipSpec)})
        if unknown:
            raise _bad(f"chip: unknown ChipSpec field(s) {', '.join(unknown)}")
        out = []
        for base in bases:
            spec = get_chip(base)
            names = list(scale) + list(grid_)
            for combo in itertools.product(*(list(scale.values()) + list(grid_.values()))):
                changes = {f: getattr(spec, f) for f in fields}
                for name, v in zip(names, combo):
                    changes[name] = _scaled(getattr(spec, name), v) if name in scale else v
                out.append((base, changes))
            for v in extra:
                out.append((base, {f: getattr(spec, f) for f in fields} | v))
        checked = []
        for base, changes in out:
            get_chip(base).replace(**changes)  # unknown field or bad value -> AclnnError now, not per point
            checked.append((base, tuple(sorted(changes.items()))))
        return list(dict.fromkeys(checked))

    def tiling_axes(self, problem: dict, chip_spec) -> dict[str, tuple]:
        """The study's [tiling] axes resolved against the operator's space for this problem and chip."""
        entry = self.entry()
        if not self.tiling:
            return {}
        if entry.tiling_space is None:
            raise _bad(f"{self.operator} publishes no tiling space: [tiling] cannot be swept")
        return entry.tiling_space(problem, chip_spec).select(self.tiling)

    def cases(self) -> list[tuple[str, dict, str, tuple, dict]]:
        """(label, problem, preset, chip changes, tiling axes) per problem x chip variant."""
        from npusim.chip import chip as get_chip

        out = []
        for label, problem in self.problem_dicts():
            for base, changes in self.chip_variants():
                spec = get_chip(base).replace(**dict(changes))
                out.append((label, problem, base, changes, self.tiling_axes(problem, spec)))
        return out

    def point(self, label: str, problem: dict, base: str, changes: tuple, tiling: dict) -> Point:
        return Point(self.operator, self.mode, label, tuple(sorted(problem.items())), base, changes,
                     tuple(sorted(tiling.items())))

    def default_points(self) -> list[Point]:
        """The no-override point of every case (run when include_default is true)."""
        return [self.point(lab, prob, base, ch, {}) for lab, prob, base, ch, _ in self.cases()]


def _scaled(base_value, factor):
    v = base_value * factor
    return round(v) if isinstance(base_value, int) and not isinstance(base_value, bool) else float(v)
