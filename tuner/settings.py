"""Validated settings, built from the knob table.

Layers, later wins: knob defaults < preset file < STRATA_* environment < CLI flags < live
changes. Every layer goes through the same pydantic model, so a bad value anywhere gives
the same message: the knob, its env alias, the value and what is allowed.

Types are strict. Typed inputs (JSON, TOML, Python) must carry the knob's own type: a
number for a number (never a string or true/false), true/false or 0/1 for a switch, text
for text. Inputs that are text by nature (environment, command line, form fields) are
parsed by `from_text`, which accepts only the plain spellings: `5`, `0.85`, `1e-3`, and
`0`/`1`/`true`/`false` for a switch. A tuple knob (`arena_budgets`) is parsed here, once,
from its text ("3,3,2", wherever it comes from) or taken as a list of whole numbers; it is
a tuple of ints from here to the engine, and written back as its text in plain data
(`model_dump(mode="json")`, preset files, `knobs.written`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    create_model,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from tuner.errors import TunerError
from tuner.interplay import refused
from tuner.knobs import (
    ALIAS_OF,
    BY_NAME,
    INPUT_KNOBS,
    KNOBS,
    Alias,
    Config,
    Knob,
    lookup,
    written,
)
from tuner.vocabulary.inputs import check as check_path
from tuner.vocabulary.workload import WorkloadError
from tuner.vocabulary.workload import check as check_workload


class SettingsError(TunerError, ValueError):
    """One or more values were rejected: knob values, or the fields of a request (an A/B,
    a tune); `problems` maps each one's name to its message."""

    def __init__(self, problems: dict[str, str]):
        self.problems = problems
        super().__init__("; ".join(problems.values()))


def _switch(value: Any) -> Any:
    """A switch takes true/false or the numbers 0 and 1 (the seeds write 0/1)."""
    if type(value) is int and value in (0, 1):
        return bool(value)
    return value  # anything else meets the strict bool check and its message


def _off_or_in_range(k: Knob):
    def check(value: Any) -> Any:
        if value != k.off and not k.min <= value <= k.max:
            raise ValueError(k.allowed())
        return value

    return check


def _path(value: str) -> str:
    check_path(value)  # a path no system call can take is refused before any looks at it
    return value


def _whole_numbers(k: Knob):
    """A tuple knob's value from its text ("3,3,2"; empty: none) or a list of numbers."""
    def parse(value: Any) -> Any:
        if isinstance(value, str):
            if not re.fullmatch(k.pattern or "", value):
                raise ValueError(k.allowed())
            return tuple(int(t) for t in value.split(",")) if value else ()
        return tuple(value) if isinstance(value, list) else value  # checked as a tuple

    return parse


def _annotation(k: Knob) -> Any:
    if k.type is tuple:
        text = Annotated[str, Field(pattern=k.pattern)]
        return Annotated[tuple[Annotated[int, Field(ge=k.min, le=k.max)], ...],
                         BeforeValidator(_whole_numbers(k),
                                         json_schema_input_type=text | list[int]),
                         PlainSerializer(written, return_type=str, when_used="json")]
    if k.path:
        return Annotated[str, AfterValidator(_path)]
    if k.choices:
        return Literal[k.choices]  # type: ignore[valid-type]
    if k.type is bool:
        return Annotated[bool, BeforeValidator(_switch)]
    if k.off is not None:  # the range and the off value: ge/le cannot say it
        return Annotated[k.type, AfterValidator(_off_or_in_range(k))]
    return k.type


def _field_defs() -> dict[str, Any]:
    defs = {}
    for k in KNOBS:
        numeric = k.type in (int, float) and k.off is None
        extra = {"ge": k.min, "le": k.max} if numeric else {}
        if k.pattern and k.type is str:
            extra["pattern"] = k.pattern
        defs[k.name] = (_annotation(k),
                        Field(k.default, alias=k.env, description=k.help, **extra))
    return defs


class _Base(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True,
        strict=True, allow_inf_nan=False,
    )

    @model_validator(mode="after")
    def _cross_field(self):
        for problem in refused(self):  # the refusing half of the knobs' interplay
            raise ValueError(problem)
        try:
            check_workload(self.workload)
        except WorkloadError as err:
            raise ValueError(str(err)) from None
        return self


Settings = create_model("Settings", __base__=_Base, **_field_defs())
Settings.__doc__ = "All knob values, validated; immutable (a change makes a new object)."


class _EnvLayer(BaseSettings):
    """Only the STRATA_* variables that are set, as text; `from_text` parses them."""

    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore")


EnvLayer = create_model("EnvLayer", __base__=_EnvLayer,
                        **{k.name: (str | None, Field(None, alias=k.env)) for k in INPUT_KNOBS})

_INT_TEXT = re.compile(r"[+-]?\d{1,20}")
_FLOAT_TEXT = re.compile(r"[+-]?(\d{1,20}(\.\d{0,20})?|\.\d{1,20})([eE][+-]?\d{1,3})?")
_SWITCH_TEXT = {"0": False, "1": True, "false": False, "true": True}


def shown(value: Any, limit: int = 60) -> str:
    """A value as a message quotes it: repr, cut to `limit` characters."""
    try:
        text = repr(value)
    except ValueError:  # an integer too long to print
        text = f"<{type(value).__name__} too long to show>"
    return text if len(text) <= limit else text[:limit - 5] + "...)"


_KINDS = {bool: "true/false", str: "text", list: "a list", dict: "an object",
          type(None): "null", float: "a number with a fraction", int: "a whole number"}


def _not_allowed(knob: Knob, value: Any, wrong_type: bool = False) -> str:
    got = f", not {_KINDS.get(type(value), type(value).__name__)}" if wrong_type else ""
    return (f"{knob.label} = {shown(value)} is not allowed: expected "
            f"{knob.allowed()}{got}")


def _wrong_type(knob: Knob, value: Any) -> bool:
    """True when the value is of a kind the knob never takes (ints pass as floats and as
    switches, where only their value can be wrong)."""
    if knob.type is tuple:  # its text, or a list of numbers
        return not isinstance(value, str | list | tuple)
    if type(value) is int:
        return knob.type is str
    return type(value) is not knob.type


def from_text(knob: Knob, text: str) -> Any:
    """A knob value typed as text (environment, command line, form field) as its type; the
    range is checked by validation. Raises SettingsError naming the knob."""
    if knob.type in (str, tuple):  # a tuple knob's text is parsed by validation
        return text
    word = text.strip().lower()
    if knob.type is bool and word in _SWITCH_TEXT:
        return _SWITCH_TEXT[word]
    if knob.type is int and _INT_TEXT.fullmatch(word):
        return int(word)
    if knob.type is float and _FLOAT_TEXT.fullmatch(word):
        return float(word)
    raise SettingsError({knob.name: _not_allowed(knob, text)})


def _explain(err: ValidationError, given: Mapping[str, Any]) -> dict[str, str]:
    problems: dict[str, str] = {}
    for e in err.errors():
        loc = e["loc"][0] if e["loc"] else None
        knob = lookup(str(loc)) if loc is not None else None
        if knob is None:
            if e["type"] == "extra_forbidden":
                problems[str(loc)] = (f"unknown knob {shown(loc)}; see `tuner knobs` for "
                                      "the list")
            else:  # a cross-field rule; its message names the fields
                problems["settings"] = e["msg"].removeprefix("Value error, ")
            continue
        value = given.get(knob.name, given.get(knob.env, e.get("input")))
        problems[knob.name] = _not_allowed(knob, value, _wrong_type(knob, value))
    return problems


def unaliased(alias: Alias, value: Any) -> Any:
    """The value of the knob that replaced `alias` that the alias's `value` (typed, or text
    as from_text reads it) stands for. Raises SettingsError naming the alias."""
    old = alias.old
    if isinstance(value, str):
        value = from_text(old, value)
    value = _switch(value) if old.type is bool else value
    if type(value) is not old.type or value not in dict(alias.means):
        raise SettingsError({old.name: _not_allowed(old, value, _wrong_type(old, value))})
    return alias.value(value)


def normalise(changes: Mapping[str, Any]) -> dict[str, Any]:
    """Map STRATA_* aliases to knob names, and an older knob name (`ALIASES`) to the knob
    and value it stands for; unknown keys are kept so validation names them. An older name
    and its knob given together must agree."""
    out: dict[str, Any] = {}
    via: dict[str, str] = {}  # knob name -> the older name that set it
    for key, value in changes.items():
        alias = ALIAS_OF.get(key)
        if alias is not None:
            name, value = alias.knob, unaliased(alias, value)
        else:
            knob = lookup(key)
            name = knob.name if knob else key
        older = alias.old.name if alias else via.get(name)
        if older and name in out and out[name] != value:
            raise SettingsError({older: f"{older} (the older name of {name}) and {name} "
                                        f"disagree: {shown(out[name])} against "
                                        f"{shown(value)}; give one of the two"})
        if alias is not None:
            via[name] = alias.old.name
        out[name] = value
    return out


def validate(values: Mapping[str, Any]) -> Settings:
    values = normalise(values)
    try:
        return Settings.model_validate(values)
    except ValidationError as err:
        raise SettingsError(_explain(err, values)) from None


def env_values(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The knobs set in `environ` (the process environment when None) under their STRATA_*
    names, each parsed by `from_text`: an env file read by `tuner presets import` goes
    through exactly what the environment goes through."""
    environ = os.environ if environ is None else environ
    envs = {k.env for k in INPUT_KNOBS}
    unknown = sorted(k for k in environ if k.startswith("STRATA_") and k not in envs)
    if unknown:
        raise SettingsError({k: f"unknown environment knob {k!r}; see `tuner knobs`"
                             for k in unknown})
    layer = EnvLayer.model_validate({k: v for k, v in environ.items() if k in envs})
    return from_texts(layer.model_dump(exclude_unset=True))


def from_texts(changes: Mapping[str, Any]) -> dict[str, Any]:
    """Knob values given as text (command line, form fields, knob=value pairs) as their
    types, every problem at once; typed values and unknown keys are left to validation."""
    out, problems = {}, {}
    for key, value in normalise(changes).items():
        knob = BY_NAME.get(key)
        if knob is not None and isinstance(value, str):
            try:
                value = from_text(knob, value)
            except SettingsError as err:
                problems.update(err.problems)
                continue
        out[key] = value
    if problems:
        raise SettingsError(problems)
    return out


def load(preset: Mapping[str, Any] | None = None, cli: Mapping[str, Any] | None = None) -> Settings:
    """Defaults < preset < environment < CLI (flag values as text, or typed)."""
    return validate({**normalise(preset or {}), **env_values(), **from_texts(cli or {})})


def apply(current: Settings, changes: Mapping[str, Any]) -> Settings:
    """A new Settings with `changes` on top of `current`; all or nothing."""
    if not isinstance(changes, Mapping):
        raise SettingsError({"settings": f"expected an object of knob: value, got {changes!r}"})
    return validate({**current.model_dump(), **normalise(changes)})


def non_default(s: Settings) -> dict[str, Any]:
    """The knobs that differ from their defaults, as plain data (what a preset file holds)."""
    return {k: v for k, v in s.model_dump(mode="json").items()
            if v != written(BY_NAME[k].default)}


def to_config(s: Settings) -> Config:
    return Config(**s.model_dump())


def defaults() -> Settings:
    return Settings()
