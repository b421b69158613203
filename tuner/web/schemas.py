"""Shapes of request and response bodies, for validation and the OpenAPI schema."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tuner.settings import Settings
from tuner.traces.budgets import WEIGHTS
from tuner.web.limits import MAX_BODY


class SettingsState(BaseModel):
    version: int = Field(description="settings version the engine runs now")
    settings: dict[str, Any] = Field(description="every knob by name")
    state: str = Field(description="running, paused or error")


class SessionState(BaseModel):
    state: str


class Problems(BaseModel):
    problems: dict[str, str] = Field(description="knob name -> what was wrong and what is "
                                                 "allowed")


class ProblemsError(BaseModel):
    detail: Problems


class MessageError(BaseModel):
    detail: str


class SaveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = Field("", max_length=1000)


class BudgetsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    weights: Literal[WEIGHTS] = Field("hits", description="hits: most hits; stall: "
                                              "most stall saved, at the window's stall per miss")
    apply: bool = Field(False, description="run the quotas (arena_split = layers)")


class DiffRow(BaseModel):
    knob: str
    env: str
    a: Any
    b: Any


class PresetInfo(BaseModel):
    name: str
    shipped: bool | None
    meta: dict[str, Any]
    knobs: dict[str, Any]
    error: str | None = Field(None, description="why the file cannot be used, with its line")


class PresetBody(BaseModel):
    name: str
    shipped: bool
    meta: dict[str, Any]
    knobs: dict[str, Any]


def settings_patch_schema() -> dict[str, Any]:
    """The PATCH body as documented: any subset of the knobs (STRATA_* aliases are accepted
    too), with the table's types and ranges."""
    schema = Settings.model_json_schema(by_alias=False)
    schema.pop("required", None)
    schema["title"] = "SettingsChanges"
    schema["description"] = ("knob name (or STRATA_* alias) -> new value; validated as a "
                             "whole, applied at the next token boundary")
    return schema


# Answers any route may give.
COMMON = {
    401: {"model": MessageError, "description": "a token is configured and was not given"},
    413: {"model": MessageError, "description": f"request body over {MAX_BODY // 1024} KiB"},
}
BAD_JSON = {400: {"model": MessageError, "description": "the body is not valid JSON"}}
BAD_SETTINGS = {**BAD_JSON, 422: {"model": ProblemsError, "description": "a value was "
                                  "rejected; nothing was applied"}}
BAD_PRESET = {
    400: {"model": MessageError, "description": "not a valid preset name"},
    404: {"model": MessageError, "description": "no preset of that name"},
    422: {"model": MessageError, "description": "the preset file is broken (file:line)"},
}
