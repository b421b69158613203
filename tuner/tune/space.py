"""The search space of a tune, read from the knob table.

Every knob with a `search` entry is searched by default, a lossy one (moce's bonus,
drop_cold) only when the tune has a quality gate. `--space knob=lo:hi,knob=a|b` replaces a
knob's range or values (any knob with a range or choices may be named, within what the
knob allows); `--fix knob=value` pins a knob and takes it out of the search. The session
group (model, workload, seed, ...) is what every span measures, so it is set for the
baseline and every trial alike with its flag, never searched or pinned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.knobs import ALIAS_OF, BY_NAME, KNOBS, Knob, knob_flag
from tuner.settings import SettingsError, from_text, unaliased

SPACE_FORM = "knob=low:high for a number, knob=a|b|c for a switch or a choice"
SWITCH = ".on"  # suffix of the Optuna parameter that switches an optional knob on


@dataclass(frozen=True)
class Dimension:
    """One searched knob: a numeric range or the values to try. `optional`: a lossy knob
    of the default space, tried off (its exact default) or on at a value of the range, so
    exact settings stay in the search (a continuous range alone almost never picks 0)."""

    knob: Knob
    low: float | None = None
    high: float | None = None
    values: tuple | None = None
    optional: bool = False

    @property
    def name(self) -> str:
        return self.knob.name

    def suggest(self, trial) -> Any:
        """The value an Optuna trial picks for this knob."""
        if self.optional and not trial.suggest_categorical(self.name + SWITCH, (False, True)):
            return self.knob.default
        if self.values is not None:
            return trial.suggest_categorical(self.name, self.values)
        if self.knob.type is int:
            return trial.suggest_int(self.name, int(self.low), int(self.high))
        return trial.suggest_float(self.name, float(self.low), float(self.high))

    def parameters(self, value: Any) -> dict[str, Any]:
        """The Optuna parameters that pick `value` (the baseline's own, for trial 0)."""
        if not self.optional:
            return {self.name: value}
        if value == self.knob.default:
            return {self.name + SWITCH: False}
        return {self.name + SWITCH: True, self.name: value}

    def describe(self) -> str:
        if self.values is not None:
            return "|".join(_text(v) for v in self.values)
        text = f"{_text(self.low)}:{_text(self.high)}"
        return f"off|{text}" if self.optional else text


def knob_values(params: dict[str, Any]) -> dict[str, Any]:
    """A trial's knob values from its Optuna parameters: an optional knob switched off
    is at its default."""
    out = {k: v for k, v in params.items() if not k.endswith(SWITCH)}
    for key, on in params.items():
        if key.endswith(SWITCH) and not on:
            name = key[:-len(SWITCH)]
            out[name] = BY_NAME[name].default
    return out


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def default_dimension(k: Knob) -> Dimension:
    if k.type in (int, float):
        return Dimension(k, low=k.search[0], high=k.search[1], optional=k.lossy)
    return Dimension(k, values=tuple(k.search))


def tunable(lossy: bool = False) -> list[Knob]:
    return [k for k in KNOBS if k.search is not None and (lossy or not k.lossy)]


def _knob(name: str, flag: str) -> Knob:
    knob = BY_NAME.get(name)
    if knob is None:
        names = ", ".join(k.name for k in tunable(lossy=True))
        raise SettingsError({name: f"{flag}: unknown knob {name!r}; searched by default: "
                                   f"{names} (see `tuner knobs`)"})
    if knob.group == "session":
        raise SettingsError({name: f"{flag}: {name} is what every span measures, the same "
                                   f"for the baseline and every trial: it comes from the "
                                   f"baseline's settings ({knob_flag(name)} on the command line, "
                                   f"the live settings on the server), not {flag}"})
    return knob


def _pairs(text: str, flag: str, form: str) -> list[tuple[str, str]]:
    """(knob, value text) pairs; an older knob name (decode_2q=1) as the knob and the
    values it stands for (cache_policy=2q), a|b value by value."""
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise SettingsError({flag: f"{flag}: {part!r} is not {form}"})
        alias = ALIAS_OF.get(name)
        if alias is not None:
            name, value = alias.knob, "|".join(str(unaliased(alias, v))
                                               for v in value.split("|"))
        out.append((name, value))
    return out


def _checked(knob: Knob, text: str, where: str) -> Any:
    """`text` as the knob's value, within what the knob allows on its own (cross-knob rules
    are checked on each trial's whole settings)."""
    try:
        value = from_text(knob, text)
    except SettingsError as err:
        raise SettingsError({knob.name: f"{where}: {err}"}) from None
    inside = ((knob.choices is None or value in knob.choices)
              and (knob.min is None or value == knob.off or value >= knob.min)
              and (knob.max is None or value == knob.off or value <= knob.max))
    if not inside:
        raise SettingsError({knob.name: f"{where}: {knob.name} ({knob.env}) = {text} is not "
                                        f"allowed: expected {knob.allowed()}"})
    return value


def parse_dimension(name: str, text: str) -> Dimension:
    knob = _knob(name, "--space")
    where = f"--space {name}={text}"
    if knob.type in (int, float) and not knob.choices:
        low, sep, high = text.partition(":")
        if not sep:
            raise SettingsError({name: f"{where}: a number is searched as low:high, for "
                                       f"example {name}={_text(knob.min or 0)}:"
                                       f"{_text(knob.max if knob.max is not None else 1)}; "
                                       f"allowed: {knob.allowed()}"})
        lo, hi = _checked(knob, low, where), _checked(knob, high, where)
        if lo >= hi:
            raise SettingsError({name: f"{where}: low {_text(lo)} must be below high "
                                       f"{_text(hi)}; to pin a value use --fix {name}="
                                       f"{_text(lo)}"})
        return Dimension(knob, low=lo, high=hi)
    if knob.type is bool or knob.choices:
        values = tuple(dict.fromkeys(_checked(knob, v, where) for v in text.split("|")))
        if len(values) < 2:
            raise SettingsError({name: f"{where}: give two or more values as a|b; to pin one "
                                       f"use --fix; allowed: {knob.allowed()}"})
        return Dimension(knob, values=values)
    raise SettingsError({name: f"{where}: {name} cannot be searched: it has no range or "
                               f"choices ({knob.allowed()}); pin it with --fix"})


@dataclass(frozen=True)
class Space:
    dimensions: tuple[Dimension, ...]
    fixed: dict[str, Any]

    def suggest(self, trial) -> dict[str, Any]:
        """The knob values an Optuna trial picks, the fixed ones with them."""
        return {**self.fixed, **{d.name: d.suggest(trial) for d in self.dimensions}}

    def describe(self) -> dict[str, str]:
        return {**{d.name: d.describe() for d in self.dimensions},
                **{name: f"={_text(v)}" for name, v in self.fixed.items()}}


def build_space(space: str = "", fix: str = "", lossy: bool = False) -> Space:
    """The default space (with the lossy knobs when `lossy`: the tune has a quality gate)
    with `space` (knob=lo:hi,knob=a|b) replacing ranges and `fix` (knob=value,...) pinning
    knobs. Raises SettingsError naming the knob and what is allowed."""
    dims = {k.name: default_dimension(k) for k in tunable(lossy)}
    for name, text in _pairs(space, "--space", SPACE_FORM):
        dims[name] = parse_dimension(name, text)
    fixed = {}
    for name, text in _pairs(fix, "--fix", "knob=value"):
        knob = _knob(name, "--fix")
        if name in dict(_pairs(space, "--space", SPACE_FORM)):
            raise SettingsError({name: f"{name} is both searched (--space) and pinned "
                                       "(--fix); give it one of the two"})
        fixed[name] = _checked(knob, text, f"--fix {name}={text}")
        dims.pop(name, None)
    if not dims:
        raise SettingsError({"--fix": "every searched knob is pinned: nothing is left to "
                                      "search; name one with --space"})
    return Space(tuple(dims.values()), fixed)
