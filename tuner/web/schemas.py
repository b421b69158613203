"""Shapes of the answers only the web serves (the curve, presets, errors) and of the
documented errors, for the OpenAPI schema; requests and states are tuner.control.models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tuner.settings import Settings
from tuner.web.limits import MAX_BODY


class NextSize(BaseModel):
    slots: int = Field(description="the next arena size of the curve")
    added: int = Field(description="slots more than now")
    gain_pp: float = Field(description="hit-rate points the running policy gains there")


class Curve(BaseModel):
    """The live hit curves (tuner.traces.curve); `error` alone when the computation
    failed."""

    arena: int | None = Field(None, description="the arena's slots now")
    policy: str | None = Field(None, description="the running cache policy")
    live_hit_rate: float | None = Field(None, description="the engine's own window hit rate")
    settings_version: int | None = None
    at_token: int | None = Field(None, description="tokens decoded when the routing was read")
    window: int | None = Field(None, description="tokens of the window")
    sizes: list[int] = Field([], description="arena sizes replayed")
    working_set: int | None = Field(None, description="one token's routings (layers x top-k)")
    working_sets: list[float] = Field([], description="each size in working sets")
    hit_rate: dict[str, list[float | None]] = Field({}, description="policy (lru, 2q, opt) "
                                                    "-> hit rate % at each size")
    tokens: int | None = Field(None, description="tokens counted (the window's)")
    warmup_tokens: int | None = Field(None, description="older tokens replayed first to "
                                      "warm the arena, not counted")
    at_arena: dict[str, float | None] = Field({}, description="each policy at the current "
                                              "arena")
    gap_pp: float | None = Field(None, description="Belady's bound minus the running policy "
                                 "at the current arena")
    next: NextSize | None = None
    notes: list[str] = []
    seconds: float | None = Field(None, description="time the replays took")
    error: str | None = None


class Problems(BaseModel):
    problems: dict[str, str] = Field(description="knob name -> what was wrong and what is "
                                                 "allowed")


class ProblemsError(BaseModel):
    detail: Problems


class MessageError(BaseModel):
    detail: str


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
    403: {"model": MessageError, "description": "refused by the gate: another host name, "
          "another origin, or a state change sent neither as JSON nor from the page"},
    413: {"model": MessageError, "description": f"request body over {MAX_BODY // 1024} KiB"},
}
BAD_JSON = {400: {"model": MessageError, "description": "the body is not valid JSON"}}
BAD_SETTINGS = {**BAD_JSON, 422: {"model": ProblemsError, "description": "a value was "
                                  "rejected; nothing was applied"}}
NOT_APPLIED = {503: {"model": MessageError, "description": "the engine did not take the "
                      "change up in time; nothing was applied"}}
SAVE_CONFLICT = {
    403: {"model": MessageError, "description": "a shipped preset has that name"},
    409: {"model": MessageError, "description": "a user preset has that name; send "
          "overwrite: true to replace it"},
}
BAD_PRESET = {
    400: {"model": MessageError, "description": "not a valid preset name"},
    404: {"model": MessageError, "description": "no preset of that name"},
    422: {"model": MessageError, "description": "the preset file is broken (file:line)"},
}
UNWRITABLE = {
    403: {"model": MessageError, "description": "the presets folder takes no writes"},
    507: {"model": MessageError, "description": "the presets folder is full"},
}
BUSY = {409: {"model": MessageError, "description": "an A/B or a tune is running"}}
NONE_YET = {404: {"model": MessageError, "description": "none has been started yet"}}
