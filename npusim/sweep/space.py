"""The tunable space an operator publishes for one problem on one chip (``ops.<op>.tiling_space``).

A :class:`TilingSpace` names the tiling overrides an operator's ``tiling=`` argument accepts, the values
each may take, and the joint rules between them. It does not judge points itself: the operator's own
tiling is the one authority, so a sweep runs every point it is given and records an illegal one with
the AclnnError that tiling raises (the constraint texts here say what it will check).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError


@dataclass(frozen=True)
class Axis:
    """One tiling override: its ``tiling=`` key, the legal values offered, the rule, where it shows.

    ``values`` are the legal values a study gets for ``"all"`` (for an axis whose legal set is huge,
    such as a byte size, a ladder through it; ``rule`` states the full set). ``field`` is the attribute
    of the operator's tiling that holds the value actually used, so a default run can be placed among
    the swept points.
    """

    name: str
    values: tuple
    rule: str
    field: str


@dataclass(frozen=True)
class TilingSpace:
    """The tiling axes of *operator* for one problem and chip, plus how to read a result back.

    ``measure(result)`` returns the effective value of every axis (``eff.<name>``) and the on-chip
    buffers the tiling takes (``ub_bytes``, ``l1_bytes``; None where the operator has no such buffer).
    """

    operator: str
    axes: tuple[Axis, ...]
    constraints: tuple[str, ...]
    measure: Callable

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    def axis(self, name: str) -> Axis:
        for a in self.axes:
            if a.name == name:
                return a
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"sweep: {self.operator} has no tiling axis {name!r}; "
                                                  f"axes: {', '.join(self.names)}")

    def select(self, chosen: dict) -> dict[str, tuple]:
        """Study axes -> values: ``"all"`` means the space's values; a list is taken as given (values
        outside the legal set stay in, so a study can show what the tiling refuses)."""
        out = {}
        for name, values in chosen.items():
            axis = self.axis(name)
            if values == "all":
                out[name] = axis.values
            elif isinstance(values, (list, tuple)) and values:
                out[name] = tuple(values)
            else:
                raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"sweep: tiling axis {name} needs a non-empty list of "
                                                          f"values or \"all\", got {values!r}")
        return out

    def describe(self) -> str:
        """A few lines for ``npusim sweep --space``: each axis with its rule and offered values."""
        lines = [f"{self.operator} tiling space:"]
        for a in self.axes:
            shown = ", ".join(str(v) for v in a.values[:12]) + (", ..." if len(a.values) > 12 else "")
            lines.append(f"  {a.name:<14} {a.rule}  [{shown}]")
        lines += [f"  constraint: {c}" for c in self.constraints]
        return "\n".join(lines)


def grid(axes: dict[str, Iterable]) -> list[dict]:
    """Every combination of the axes' values, in axis order then value order."""
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]


def steps(lo: int, hi: int, step: int) -> tuple[int, ...]:
    """lo, lo + step, ..., up to hi."""
    return tuple(range(lo, hi + 1, step))


def ladder(lo: int, hi: int, align: int) -> tuple[int, ...]:
    """Powers of two from *lo* below *hi*, then *hi* rounded down to *align*: a coarse path through a
    byte-size range."""
    out, v = [], lo
    while v < hi:
        out.append(v)
        v *= 2
    top = hi // align * align
    if top >= lo and top not in out:
        out.append(top)
    return tuple(out)


def measured_buffers(result) -> dict:
    """UB and L1 bytes a launch really held (the simulator's buffer high-water marks, launch.buffer_peaks),
    for operators whose tiling has no closed-form buffer plan; None when no trace was kept (estimate mode
    runs no kernel, ``trace="none"`` keeps no metadata)."""
    peaks = getattr(result.trace, "meta", {}).get("buffer_peak_bytes") if result.trace is not None else None
    if not peaks:
        return {"ub_bytes": None, "l1_bytes": None}
    return {"ub_bytes": peaks.get("UB"), "l1_bytes": peaks.get("L1")}


def core_count_space(operator: str, chip, constraints: tuple[str, ...] = ()) -> TilingSpace:
    """The space of an operator whose only tiling override is ``blockDim`` (AI Cores in use): the
    backward operators, whose block sizes are fixed by their templates."""
    def measure(result, chip_, overrides: dict) -> dict:
        return {"eff.blockDim": int(result.block_dim), **measured_buffers(result)}

    return TilingSpace(operator=operator,
                       axes=(Axis("blockDim", steps(1, chip.aic_count, 1), f"AI Cores in [1, {chip.aic_count}]",
                                  "blockDim"),),
                       constraints=constraints, measure=measure)
