"""The control plane's requests and states, typed once.

The REST API's bodies and answers, the websocket's settings message, the page's forms, the
terminal UI's dialogs, `tuner ab` and the `Backend` operations all read and write these
models, so a field is declared (name, default, range, help) in one place. Text input (a
form field, a dialog field, a command-line value) goes through the same models as JSON: a
count may arrive as "4", an empty quality limit is none, workloads may be "a,b". `parse`
answers what a model refuses with a SettingsError naming each field, its value and what is
allowed, as the server answers a request body it refuses.

Every request is strict and closed, as settings are: a count is a whole number (or its
text), never true/false or 4.0; a switch is true/false or 0/1, never "yes"; a field the
request does not have is refused naming it and the fields it has, never ignored (a
misspelt `trails` would otherwise run the default tune).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    RootModel,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import ErrorDetails, core_schema

from tuner.measure.rules import RULESETS, check_limits
from tuner.presets import BASELINE as BASELINE
from tuner.presets import check_name
from tuner.settings import Settings, SettingsError, from_texts, shown
from tuner.traces.budgets import WEIGHTS
from tuner.tune.worker import DEFAULT_OBJECTIVE, OBJECTIVES
from tuner.vocabulary.workload import NAMES as WORKLOADS
from tuner.vocabulary.workload import WorkloadError
from tuner.vocabulary.workload import check as check_workload
from tuner.vocabulary.workload import check_name as check_workload_name

M = TypeVar("M", bound=BaseModel)
KnobValue = bool | int | float | str  # a knob's value, as its table entry types it

# A view sees the control plane only: what its forms offer and check comes from here, as
# the rooms that own it define it: BASELINE (the shipped preset a UI offers as arm A),
# WORKLOADS and RULESETS (the built-in names), check_name (a preset's name).

# What an A/B or a tune may ask for, on the command line as on a running server (where it
# pauses the live session while it runs, so its runs are bounded).
AB_PAIRS = (1, 8)
RUN_TOKENS = (8, 4096)  # tokens per A/B run, measured tokens per tune trial
TUNE_TRIALS = (1, 500)

_WHOLE = re.compile(r"[+-]?\d{1,20}")


# -- field types that also read text -------------------------------------------------------
def _whole(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        return int(value)
    if type(value) is not int:  # not true/false, not 4.0
        raise ValueError(f"{info.field_name} must be a whole number, not {shown(value)}")
    return value


def _number_or_empty(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{info.field_name} must be a number or empty, not "
                             f"{shown(value)}") from None
    if value is not None and type(value) not in (int, float):  # not true/false
        raise ValueError(f"{info.field_name} must be a number or empty, not {shown(value)}")
    return value


def _switch(value: Any, info: ValidationInfo) -> bool:
    """true/false, or the numbers 0 and 1, as a switch knob takes them."""
    if type(value) is bool:
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    raise ValueError(f"{info.field_name} must be true or false (or 0 or 1), not "
                     f"{shown(value)}")


def _names(value: Any) -> Any:
    """Comma-separated text as a list of names; a list stays as it is."""
    if isinstance(value, str):
        return [n.strip() for n in value.split(",") if n.strip()]
    return value


class _Check(ABC):
    """Field metadata that checks a value with a message naming the field and what is
    allowed, and says what is allowed in the JSON schema (pydantic's own ge/le/enum would
    answer with messages that name neither)."""

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.with_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {**handler(schema), **self.documented()}

    @abstractmethod
    def check(self, value: Any, info: ValidationInfo) -> Any:
        """The value, or ValueError naming the field and what it allows."""

    @abstractmethod
    def documented(self) -> dict[str, Any]:
        """What the JSON schema says is allowed."""


@dataclass(frozen=True)
class Within(_Check):
    """A whole number from `low` to `high` (None: no upper limit)."""

    low: int
    high: int | None = None

    def check(self, value: int, info: ValidationInfo) -> int:
        if value < self.low or (self.high is not None and value > self.high):
            allowed = (f"at least {self.low}" if self.high is None
                       else f"from {self.low} to {self.high}")
            raise ValueError(f"{info.field_name} = {value}: must be {allowed}")
        return value

    def documented(self) -> dict[str, Any]:
        return {"minimum": self.low, **({} if self.high is None else {"maximum": self.high})}


@dataclass(frozen=True)
class OneOf(_Check):
    """A name from `names`."""

    names: tuple[str, ...]

    def check(self, value: str, info: ValidationInfo) -> str:
        if value not in self.names:
            raise ValueError(f"{info.field_name} = {shown(value)}: allowed "
                             f"{', '.join(repr(n) for n in self.names)}")
        return value

    def documented(self) -> dict[str, Any]:
        return {"enum": list(self.names)}


Whole = Annotated[int, BeforeValidator(_whole)]

Limit = Annotated[float | None, BeforeValidator(_number_or_empty)]

Switch = Annotated[bool, BeforeValidator(_switch)]


# -- problems --------------------------------------------------------------------------
def problems(errors: Sequence[ErrorDetails], skip: int = 0) -> dict[str, str]:
    """Each refused field -> one line naming it, its value and what is allowed. `skip`
    drops the first parts of each location (the server's "body" or "query")."""
    out = {}
    for e in errors:
        field = ".".join(str(p) for p in e["loc"][skip:]) or "request"
        if e["type"] == "value_error":  # our own check: its message names the field
            out[field] = str(e.get("ctx", {}).get("error", e["msg"]))
        elif e["type"] == "missing":
            out[field] = f"{field} is required"
        else:
            out[field] = f"{field} = {shown(e.get('input'))}: {e['msg']}"
    return out


def field_order(model: type[BaseModel]) -> list[str]:
    """The model's fields as a form lists them: its own first, then those it shares with
    other requests (the quality gate)."""
    shared = list(QualityGate.model_fields) if issubclass(model, QualityGate) else []
    return [name for name in model.model_fields if name not in shared] + shared


class Request(BaseModel):
    """A request: closed (a field it does not have is refused, naming it and the fields it
    has) and strict (no NaN, no infinity)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _closed(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = [k for k in data if k not in cls.model_fields]
            if unknown:
                raise ValueError(f"unknown field{'s' * (len(unknown) > 1)} "
                                 f"{', '.join(shown(k) for k in unknown[:8])}"
                                 f"{' and more' * (len(unknown) > 8)}; allowed: "
                                 f"{', '.join(field_order(cls))}")
        return data


def parse(model: type[M], data: Mapping[str, Any]) -> M:
    """`data` (JSON, or the text of form fields) as `model`; raises SettingsError."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise SettingsError(problems(err.errors())) from None


# -- requests --------------------------------------------------------------------------
class QualityGate(Request):
    """The quality limits a lossy knob (moce's bonus, drop_cold) must stay within; None is
    not checked."""

    max_kl: Limit = Field(None, title="max KL (empty: off)", json_schema_extra={"minimum": 0},
                          description="quality gate: reject an arm (or a lossy trial) whose "
                                      "mean KL(exact || served) is above this many nats per "
                                      "token, whatever its speed")
    min_agreement: Limit = Field(None, title="min top-1 % (empty: off)",
                                 json_schema_extra={"minimum": 0, "maximum": 100},
                                 description="quality gate: reject an arm (or a lossy trial) "
                                             "whose top-1 agreement with exact routing is "
                                             "below this percentage, whatever its speed")

    @field_validator("max_kl", "min_agreement")
    @classmethod
    def _in_range(cls, value: float | None, info: ValidationInfo) -> float | None:
        check_limits(**{"max_kl": None, "min_agreement": None, str(info.field_name): value})
        return value


class ABSpec(QualityGate):
    """An A/B comparison: A B A B ... A, each run a fresh session, on each workload in
    turn, its verdict by the timings, a rule set and the quality gate (an arm over a
    limit is rejected whatever its speed)."""

    a: str = Field(title="preset A (baseline)", description="arm A, the baseline, also the "
                   "sentinel: a preset name (`tuner ab` also takes a .toml file or "
                   "knob=value pairs)")
    b: str = Field(title="preset B", description="arm B, in the same forms as A")
    pairs: Annotated[Whole, Within(*AB_PAIRS)] = Field(
        4, title="A B pairs", description="A B pairs before the sentinel A, "
        f"{AB_PAIRS[0]} to {AB_PAIRS[1]}")
    tokens: Annotated[Whole, Within(*RUN_TOKENS)] = Field(
        64, title="tokens per run", description=f"tokens per run, {RUN_TOKENS[0]} to "
        f"{RUN_TOKENS[1]}")
    workloads: Annotated[list[str], BeforeValidator(_names)] = Field(
        [], max_length=8, title="workloads (a,b,...)", description="workloads to run the "
        f"pairs on, each in turn: {', '.join(WORKLOADS)} or a JSON-lines file (empty: the "
        "settings' workload)")
    rules: Annotated[str, OneOf(("", *RULESETS))] = Field(
        "", title=f"rules ({', '.join(RULESETS)})", description="rule set deciding the "
        "verdict per workload and phase (\"\": timing only)")

    @field_validator("workloads")
    @classmethod
    def _named(cls, names: list[str]) -> list[str]:
        """Built-ins or paths; the files are read by `check_files`, not here: a request is
        parsed on the server's event loop, where reading eight large files would hold up
        every other request and the websocket frames."""
        for name in names:
            try:
                check_workload_name(name)
            except WorkloadError as err:
                raise ValueError(str(err)) from None
        return names

    def check_files(self) -> None:
        """Reads the workload files and checks every line (each within inputs.WORKLOAD);
        SettingsError naming the file's bad lines. A caller off the event loop runs it
        before the A/B starts."""
        for name in self.workloads:
            try:
                check_workload(name)
            except WorkloadError as err:  # its message names the file's line
                raise SettingsError({"workloads": str(err)}) from None


class ABRequest(ABSpec):
    """An A/B of two presets asked of a running server. It runs in the background while
    the live session is paused."""

    @field_validator("a", "b")
    @classmethod
    def _preset_name(cls, name: str) -> str:
        return check_name(name)  # a PresetError (a ValueError) says what a name may be


class TuneSpec(QualityGate):
    """What a tune measures: its trials, their tokens and objective, the quality gate."""

    trials: Annotated[Whole, Within(*TUNE_TRIALS)] = Field(12, title="trials",
                                                           description="trials to run")
    tokens: Annotated[Whole, Within(*RUN_TOKENS)] = Field(
        32, title="measured tokens per trial",
        description="measured tokens per trial (as many again warm up first)")
    objective: Annotated[str, OneOf(tuple(OBJECTIVES))] = Field(
        DEFAULT_OBJECTIVE, title="objective: ms or stall",
        description="time objective: ms per token or exposed stall per token")


class TuneRequest(TuneSpec):
    """A tune asked of a running server: Optuna trials from the live settings as the
    baseline, with the live session paused while it runs; with a quality limit the lossy
    knobs join the search."""

    space: str = Field("", max_length=2000, title="space: knob=lo:hi,knob=a|b",
                       description="search ranges replacing the knob table's: knob=low:high "
                                   "or knob=a|b, separated by commas")
    fix: str = Field("", max_length=2000, title="fix: knob=value,...",
                     description="knobs pinned for every trial: knob=value, separated by "
                                 "commas")


class SettingsPatch(RootModel[dict[str, Any]]):
    """Knob name (or STRATA_* alias) -> new value; validated as a whole with the current
    settings, applied at the next token boundary."""

    @classmethod
    def of(cls, body: Any) -> SettingsPatch:
        """A request body as a patch; anything but an object is refused as the settings'
        problem (SettingsError), as a bad value is."""
        if not isinstance(body, dict):
            raise SettingsError({"settings": "the body must be a JSON object of knob: value, "
                                             f"got {type(body).__name__}"})
        return cls(body)

    @classmethod
    def of_texts(cls, texts: Mapping[str, KnobValue]) -> SettingsPatch:
        """Values typed as text (a form's field, a dialog's) as their knobs' types; a
        SettingsError names every one that is not. Typed values pass as they are."""
        return cls(from_texts(texts))

    @classmethod
    def documented(cls) -> dict[str, Any]:
        """The patch as the API documents it: any subset of the knobs (STRATA_* aliases
        are taken too), with the table's types and ranges."""
        schema = Settings.model_json_schema(by_alias=False)
        schema.pop("required", None)
        schema["title"] = "SettingsChanges"
        schema["description"] = ("knob name (or STRATA_* alias) -> new value; validated as "
                                 "a whole, applied at the next token boundary")
        return schema


class SettingsMessage(Request):
    """A settings change sent on the websocket; answered with an ack or the problems."""

    type: Literal["settings"]
    id: Any = None
    changes: SettingsPatch


class BudgetsRequest(Request):
    weights: Annotated[str, OneOf(WEIGHTS)] = Field(
        "hits", description="hits: most hits; stall: most stall saved, at the window's stall "
                            "per miss")
    apply: Switch = Field(False, description="run the quotas (arena_split = layers)")


class SaveRequest(Request):
    description: str | None = Field(None, max_length=1000, description="none: a new "
                                    "preset gets none, a replaced one keeps its own")
    overwrite: Switch = Field(False, description="replace a user preset of that name (shipped "
                            "presets are never replaced)")


# -- states ----------------------------------------------------------------------------
class SessionState(BaseModel):
    """The settings the engine runs, read together with their version."""

    version: int = Field(description="settings version the engine runs now")
    settings: dict[str, KnobValue] = Field(description="every knob by name")
    state: str = Field(description="running, paused or error")


class RunState(BaseModel):
    state: str = Field(description="running, paused or error")
