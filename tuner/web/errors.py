"""Error responses: every 4xx says what was wrong and what is allowed."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError, WebSocketRequestValidationError
from fastapi.responses import JSONResponse
from starlette.websockets import WebSocket

from tuner.control import ApplyTimeout
from tuner.presets import (
    PresetError,
    PresetExists,
    PresetNotFound,
    PresetReadOnly,
    PresetWriteError,
)
from tuner.settings import SettingsError
from tuner.web.gate import POLICY_VIOLATION, who

log = logging.getLogger(__name__)


def problems_response(problems: dict[str, str]) -> JSONResponse:
    return JSONResponse({"detail": {"problems": problems}}, status_code=422)


async def settings_error(_: Request, err: SettingsError) -> JSONResponse:
    return problems_response(err.problems)


def preset_status(err: PresetError) -> int:
    """404 no such preset, 403 a shipped one or a folder that takes no writes, 409 a user
    preset a save did not say to overwrite, 507 a full folder, 422 a preset file that cannot
    be used (its message names file and line)."""
    if isinstance(err, PresetWriteError):
        return 507 if err.full else 403
    return {PresetNotFound: 404, PresetReadOnly: 403, PresetExists: 409}.get(type(err), 422)


async def preset_error(_: Request, err: PresetError) -> JSONResponse:
    return JSONResponse({"detail": str(err)}, status_code=preset_status(err))


async def apply_timeout(_: Request, err: ApplyTimeout) -> JSONResponse:
    return JSONResponse({"detail": str(err)}, status_code=503, headers={"Retry-After": "1"})


async def request_error(_: Request, err: RequestValidationError) -> JSONResponse:
    errors = err.errors()
    bad_json = next((e for e in errors if e["type"] == "json_invalid"), None)
    if bad_json is not None:
        why = bad_json.get("ctx", {}).get("error", "")
        at = bad_json["loc"][-1]
        return JSONResponse({"detail": f"request body is not valid JSON: {why} at "
                                       f"character {at}"}, status_code=400)
    return problems_response(_problems(errors))


async def websocket_request_error(ws: WebSocket, err: WebSocketRequestValidationError) -> None:
    """A bad query on /ws (say rate=100) is refused before the handshake, like the gate's
    refusals: the server answers 403 and the reason goes to the log in one line."""
    problems = "; ".join(_problems(err.errors()).values())
    log.warning("refused websocket %s: %s", who(ws.scope), problems)
    await ws.close(POLICY_VIOLATION)


def _problems(errors) -> dict[str, str]:
    problems = {}
    for e in errors:
        field = ".".join(str(p) for p in e["loc"][1:]) or e["loc"][0]
        problems[field] = f"{field} = {e.get('input')!r}: {e['msg']}"
    return problems


def install(app: FastAPI) -> None:
    app.add_exception_handler(SettingsError, settings_error)
    app.add_exception_handler(PresetError, preset_error)
    app.add_exception_handler(ApplyTimeout, apply_timeout)
    app.add_exception_handler(RequestValidationError, request_error)
    app.add_exception_handler(WebSocketRequestValidationError, websocket_request_error)
