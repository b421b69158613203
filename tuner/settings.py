"""Validated settings, built from the knob table.

Layers, later wins: knob defaults < preset file < STRATA_* environment < CLI flags < live
changes. Every layer goes through the same pydantic model, so a bad value anywhere gives
the same message: the knob, its env alias, the value and what is allowed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tuner.knobs import BY_NAME, KNOBS, Config, Knob, budget_list, lookup


class SettingsError(ValueError):
    """One or more knob values were rejected; `problems` maps knob name to message."""

    def __init__(self, problems: dict[str, str]):
        self.problems = problems
        super().__init__("; ".join(problems.values()))


def _annotation(k: Knob) -> Any:
    if k.choices:
        return Literal[k.choices]  # type: ignore[valid-type]
    return k.type


def _field_defs(with_defaults: bool) -> dict[str, Any]:
    defs = {}
    for k in KNOBS:
        extra = {"ge": k.min, "le": k.max} if k.type in (int, float) else {}
        if k.pattern:
            extra["pattern"] = k.pattern
        default = k.default if with_defaults else None
        defs[k.name] = (
            _annotation(k) if with_defaults else _annotation(k) | None,
            Field(default, alias=k.env, description=k.help, **extra),
        )
    return defs


class _Base(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True
    )

    @model_validator(mode="after")
    def _cross_field(self):
        if self.io_urgent >= self.io_workers:
            raise ValueError(
                f"io_urgent ({self.io_urgent}) must be less than io_workers "
                f"({self.io_workers}): at least one reader must serve speculative reads"
            )
        budgets = budget_list(self.arena_budgets)
        if budgets and self.expert_cache and sum(budgets) != self.expert_cache:
            raise ValueError(
                f"arena_budgets sum to {sum(budgets)} slots but expert_cache is "
                f"{self.expert_cache}: the quotas share the arena, so they must sum to it"
            )
        return self


Settings = create_model("Settings", __base__=_Base, **_field_defs(with_defaults=True))
Settings.__doc__ = "All knob values, validated; immutable (a change makes a new object)."


class _EnvLayer(BaseSettings):
    """Only the STRATA_* variables that are set; pydantic-settings does the parsing."""

    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore")


EnvLayer = create_model("EnvLayer", __base__=_EnvLayer, **_field_defs(with_defaults=False))


def _explain(err: ValidationError, given: Mapping[str, Any]) -> dict[str, str]:
    problems: dict[str, str] = {}
    for e in err.errors():
        loc = e["loc"][0] if e["loc"] else None
        knob = lookup(str(loc)) if loc is not None else None
        if knob is None:
            if e["type"] == "extra_forbidden":
                problems[str(loc)] = f"unknown knob {loc!r}; see `tuner knobs` for the list"
            else:  # a cross-field rule; its message names the fields
                problems["settings"] = e["msg"].removeprefix("Value error, ")
            continue
        value = given.get(knob.name, given.get(knob.env, e.get("input")))
        problems[knob.name] = (
            f"{knob.name} ({knob.env}) = {value!r} is not allowed: expected {knob.allowed()}"
        )
    return problems


def normalise(changes: Mapping[str, Any]) -> dict[str, Any]:
    """Map STRATA_* aliases to knob names; unknown keys are kept so validation names them."""
    out: dict[str, Any] = {}
    for key, value in changes.items():
        knob = lookup(key)
        out[knob.name if knob else key] = value
    return out


def validate(values: Mapping[str, Any]) -> Settings:
    values = normalise(values)
    try:
        return Settings.model_validate(values)
    except ValidationError as err:
        raise SettingsError(_explain(err, values)) from None


def env_values(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The knobs set in `environ` (the process environment when None) under their STRATA_*
    names, parsed by pydantic-settings' rules: an env file read by `tuner presets import`
    goes through exactly what the environment goes through."""
    environ = os.environ if environ is None else environ
    envs = {k.env for k in KNOBS}
    unknown = sorted(k for k in environ if k.startswith("STRATA_") and k not in envs)
    if unknown:
        raise SettingsError({k: f"unknown environment knob {k!r}; see `tuner knobs`"
                             for k in unknown})
    try:
        layer = EnvLayer.model_validate({k: v for k, v in environ.items() if k in envs})
    except ValidationError as err:
        raise SettingsError(_explain(err, dict(environ))) from None
    return layer.model_dump(exclude_unset=True)


def load(preset: Mapping[str, Any] | None = None, cli: Mapping[str, Any] | None = None) -> Settings:
    """Defaults < preset < environment < CLI."""
    return validate({**normalise(preset or {}), **env_values(), **normalise(cli or {})})


def apply(current: Settings, changes: Mapping[str, Any]) -> Settings:
    """A new Settings with `changes` on top of `current`; all or nothing."""
    if not isinstance(changes, Mapping):
        raise SettingsError({"settings": f"expected an object of knob: value, got {changes!r}"})
    return validate({**current.model_dump(), **normalise(changes)})


def non_default(s: Settings) -> dict[str, Any]:
    return {k: v for k, v in s.model_dump().items() if v != BY_NAME[k].default}


def to_config(s: Settings) -> Config:
    return Config(**s.model_dump())


def defaults() -> Settings:
    return Settings()
