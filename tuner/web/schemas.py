"""Shapes of the documented errors, for the OpenAPI schema; requests and states are
tuner.control.models, the other answers tuner.control.answers."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tuner.web.limits import MAX_BODY


class Problems(BaseModel):
    problems: dict[str, str] = Field(description="knob name -> what was wrong and what is "
                                                 "allowed")


class ProblemsError(BaseModel):
    detail: Problems


class MessageError(BaseModel):
    detail: str


# A route's documented answers besides its own, by status, as FastAPI takes them
Responses = dict[int | str, dict[str, Any]]

# Answers any route may give.
COMMON: Responses = {
    401: {"model": MessageError, "description": "a token is configured and was not given"},
    403: {"model": MessageError, "description": "refused by the gate: another host name, "
          "another origin, or a state change sent neither as JSON nor from the page"},
    413: {"model": MessageError, "description": f"request body over {MAX_BODY // 1024} KiB"},
}
BAD_JSON: Responses = {400: {"model": MessageError, "description": "the body is not valid JSON"}}
BAD_SETTINGS: Responses = {**BAD_JSON, 422: {"model": ProblemsError, "description": "a value was "
                                  "rejected; nothing was applied"}}
NOT_APPLIED: Responses = {503: {"model": MessageError, "description": "the engine did not take the "
                      "change up in time; nothing was applied"}}
SAVE_CONFLICT: Responses = {
    403: {"model": MessageError, "description": "a shipped preset has that name"},
    409: {"model": MessageError, "description": "a user preset has that name; send "
          "overwrite: true to replace it"},
}
BAD_PRESET: Responses = {
    400: {"model": MessageError, "description": "not a valid preset name"},
    404: {"model": MessageError, "description": "no preset of that name"},
    422: {"model": MessageError, "description": "the preset file is broken (file:line)"},
}
UNWRITABLE: Responses = {
    403: {"model": MessageError, "description": "the presets folder takes no writes"},
    507: {"model": MessageError, "description": "the presets folder is full"},
}
BUSY: Responses = {409: {"model": MessageError, "description": "an A/B or a tune is running"}}
NONE_YET: Responses = {404: {"model": MessageError, "description": "none has been started yet"}}
