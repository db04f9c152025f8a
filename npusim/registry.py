"""The operator registry: what an operator entry is, and where the command line finds them.

An operator package publishes one :class:`OperatorEntry` (by convention ``ENTRY`` in its
``registry.py``) under the Python entry-point group ``npusim.operators``; npusim's own operators are
declared in pyproject.toml, a separate package of someone's own operators declares its entries the same
way in its own metadata. ``npusim predict``, ``demo``, ``sweep`` and ``check`` look operators up here and
import none by name, so adding an operator touches no CLI code.

Discovery reads the installed distributions' entry points (``importlib.metadata``). A source checkout
run without reinstalling (``python3 -m npusim.cli`` from a git worktree) also gets the entries its own
pyproject.toml declares, so a newly added operator is found before ``pip install -e .`` refreshes the
installed metadata; the checkout's declaration wins over a stale installed one of the same name.
"""
from __future__ import annotations

import difflib
import importlib.metadata
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError

GROUP = "npusim.operators"


@dataclass(frozen=True)
class ProblemParam:
    """One KEY=VALUE problem parameter of the command line (``B=1``, ``sparse_mode=causal``).

    *default* None means required. *choices*: the accepted values, either a tuple of values or a mapping
    from names to values (``{"causal": 2}``); with a mapping both the names and the values are accepted.
    """

    name: str
    type: type = int
    default: Any = None
    choices: tuple | dict | None = None
    help: str = ""

    @property
    def required(self) -> bool:
        return self.default is None

    def describe(self) -> str:
        """``B`` / ``[N_kv=N]``-style usage text with the help and the choices."""
        head = self.name if self.required else f"[{self.name}={self.default}]"
        text = f"{head}: {self.help}" if self.help else head
        if self.choices:
            text += f" (one of {self.choice_text()})"
        return text

    def choice_text(self) -> str:
        if isinstance(self.choices, dict):
            return ", ".join(f"{name}={value}" for name, value in self.choices.items())
        return ", ".join(str(c) for c in self.choices)

    def convert(self, text: str):
        """The value of ``KEY=text``; AclnnError 161002 naming the key and the rule otherwise."""
        if isinstance(self.choices, dict) and text in self.choices:
            return self.choices[text]
        try:
            value = self.type(text)
        except ValueError:
            kind = {int: "an integer", float: "a number"}.get(self.type, self.type.__name__)
            names = f" or one of {self.choice_text()}" if isinstance(self.choices, dict) else ""
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"{self.name} must be {kind}{names}, got {text!r}") from None
        allowed = tuple(self.choices.values()) if isinstance(self.choices, dict) else self.choices
        if allowed and value not in allowed:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID,
                             f"{self.name}={text} is not supported here: use one of {self.choice_text()}")
        return value


@dataclass(frozen=True)
class DemoCase:
    """What ``npusim demo --case NAME`` runs: ``run(chip_spec, mode)`` -> :class:`DemoRun`.

    *chips*: ``chips(chip_spec)`` returns None when the demo runs on that chip, else the reason (said
    before anything runs or is written). *title*: the case in a few words, for ``npusim demo --help``.
    """

    run: Callable
    chips: Callable | None = None
    title: str = ""


@dataclass
class DemoRun:
    """A finished demo run: its result (anything with ``trace``, ``time_us``, ``cycles``), the figure
    title and the lines printed before the trace summary (problem, tiling, check against a golden)."""

    result: Any
    title: str
    lines: list = field(default_factory=list)


@dataclass(frozen=True)
class OperatorEntry:
    """An operator as the command line and the sweeps see it.

    *api*: the public ops function (returns an OpResult). *params*: its KEY=VALUE problem parameters.
    *build_call*: parsed problem -> ``(args, kwargs)`` for *api*, data inputs as TensorSpec (timing and
    estimate modes); the caller adds ``chip=``, ``mode=`` and ``tiling=``. *tiling_space*:
    ``(problem, chip_spec)`` -> a sweep TilingSpace (npusim.sweep). *demo*: a small full-mode case.
    """

    name: str
    title: str
    api: Callable
    params: tuple[ProblemParam, ...]
    build_call: Callable[[dict], tuple[tuple, dict]]
    tiling_space: Callable | None = None
    demo: DemoCase | None = None

    def parse(self, items, extra: tuple[ProblemParam, ...] = ()) -> dict:
        """KEY=VALUE strings -> problem dict (defaults filled); see :func:`parse_params`."""
        return parse_params(tuple(self.params) + tuple(extra), items, context=self.name)

    def call(self, problem: dict, **kwargs):
        """Run *api* on *problem* (a dict as :meth:`parse` returns) with *kwargs* (chip, mode, tiling)."""
        args, kw = self.build_call(problem)
        return self.api(*args, **kw, **kwargs)

    def usage(self) -> str:
        return f"{self.name:6s}{self.title}: " + " ".join(p.describe().split(":")[0] for p in self.params)


def parse_params(params: tuple[ProblemParam, ...], items, context: str = "") -> dict:
    """KEY=VALUE strings (or a dict of strings) -> {name: value} with every default filled in.

    All problems are reported at once in one AclnnError 161002: malformed items, unknown keys (with the
    key meant: ``unknown key b (did you mean B?)``), bad values and every missing required key.
    """
    pairs = []
    problems = []
    for item in (items.items() if isinstance(items, dict) else items):
        if isinstance(item, tuple):
            key, value = item
            pairs.append((str(key), str(value)))
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            problems.append(f"parameters are KEY=VALUE, got {item!r}")
            continue
        pairs.append((key.strip(), value.strip()))
    by_name = {p.name: p for p in params}
    out = {}
    for key, value in pairs:
        param = by_name.get(key)
        if param is None:
            problems.append(_unknown(key, by_name))
            continue
        if key in out:
            problems.append(f"{key} given twice")
            continue
        try:
            out[key] = param.convert(value)
        except AclnnError as e:
            problems.append(e.message)
    missing = [p.name for p in params if p.required and p.name not in out]
    if missing:
        problems.append(f"missing required {'key' if len(missing) == 1 else 'keys'} "
                        f"{', '.join(m + '=' for m in missing)}")
    if problems:
        prefix = f"{context}: " if context else ""
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, prefix + "; ".join(problems))
    return {p.name: out.get(p.name, p.default) for p in params}


def _unknown(key: str, by_name: dict) -> str:
    same_case = [n for n in by_name if n.lower() == key.lower()]
    close = same_case or difflib.get_close_matches(key, list(by_name), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else f" (known: {', '.join(by_name)})"
    return f"unknown key {key}{hint}"


_CACHE: dict | None = None
_ERRORS: dict[str, str] = {}


def operators(refresh: bool = False) -> dict[str, OperatorEntry]:
    """Every registered operator by CLI name (sorted). Entries that fail to load are left out with a
    warning (see :func:`load_errors`), so one broken plug-in does not take the command line down."""
    global _CACHE
    if _CACHE is None or refresh:
        _CACHE = _discover()
    return dict(_CACHE)


def load_errors() -> dict[str, str]:
    """Entry-point name -> why it was left out, from the last discovery."""
    return dict(_ERRORS)


def get(name: str) -> OperatorEntry:
    """The entry called *name*; AclnnError 161002 listing the known names otherwise."""
    ops = operators()
    if name in ops:
        return ops[name]
    close = [n for n in ops if n.lower() == name.lower()] or difflib.get_close_matches(name, list(ops), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    broken = f"; failed to load: {', '.join(f'{k} ({v})' for k, v in _ERRORS.items())}" if _ERRORS else ""
    raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"unknown operator {name!r}{hint}; registered operators: "
                                              f"{', '.join(ops) or 'none'}{broken}")


def _discover() -> dict[str, OperatorEntry]:
    _ERRORS.clear()
    targets = {ep.name: ep for ep in importlib.metadata.entry_points(group=GROUP)}
    targets.update(_checkout_entry_points())
    found = {}
    for name, ep in targets.items():
        try:
            entry = ep.load()
        except Exception as e:  # a plug-in's import error must not hide the other operators
            _ERRORS[name] = f"{type(e).__name__}: {e}"
            continue
        if not isinstance(entry, OperatorEntry):
            _ERRORS[name] = f"{ep.value} is a {type(entry).__name__}, not an npusim.registry.OperatorEntry"
        elif entry.name != name:
            _ERRORS[name] = f"entry point {name!r} holds an entry named {entry.name!r}"
        else:
            found[name] = entry
    for name, why in _ERRORS.items():
        warnings.warn(f"npusim operator {name!r} left out: {why}", RuntimeWarning, stacklevel=3)
    return dict(sorted(found.items()))


def _checkout_entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """The group as declared by the pyproject.toml of the source tree npusim runs from (if any)."""
    path = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        import tomllib  # Python 3.11+; on 3.10 an installed npusim's metadata is the only source
    except ImportError:
        return {}
    if not path.is_file():
        return {}
    with path.open("rb") as f:
        project = tomllib.load(f).get("project", {})
    if project.get("name") != "npusim":
        return {}
    group = project.get("entry-points", {}).get(GROUP, {})
    return {name: importlib.metadata.EntryPoint(name, value, GROUP) for name, value in group.items()}
