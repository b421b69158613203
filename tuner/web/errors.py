"""Error responses: every 4xx says what was wrong and what is allowed."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError, WebSocketRequestValidationError
from fastapi.responses import JSONResponse
from starlette.websockets import WebSocket

from tuner.presets import PresetError, PresetExists, ReadOnlyPreset
from tuner.settings import SettingsError


def problems_response(problems: dict[str, str]) -> JSONResponse:
    return JSONResponse({"detail": {"problems": problems}}, status_code=422)


async def settings_error(_: Request, err: SettingsError) -> JSONResponse:
    return problems_response(err.problems)


async def preset_error(_: Request, err: PresetError) -> JSONResponse:
    # Missing names and bad names are answered earlier (404, 400); what is left is a
    # preset file that could not be used, reported with its file and line.
    return JSONResponse({"detail": str(err)}, status_code=422)


async def preset_conflict(_: Request, err: PresetError) -> JSONResponse:
    """403: a shipped preset cannot be replaced; 409: a user preset exists and the save did
    not say to overwrite it."""
    return JSONResponse({"detail": str(err)},
                        status_code=403 if isinstance(err, ReadOnlyPreset) else 409)


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
    """A bad query on /ws (say rate=100) is refused in the handshake with the same 422."""
    await ws.send_denial_response(problems_response(_problems(err.errors())))


def _problems(errors) -> dict[str, str]:
    problems = {}
    for e in errors:
        field = ".".join(str(p) for p in e["loc"][1:]) or e["loc"][0]
        problems[field] = f"{field} = {e.get('input')!r}: {e['msg']}"
    return problems


def install(app: FastAPI) -> None:
    app.add_exception_handler(SettingsError, settings_error)
    app.add_exception_handler(PresetError, preset_error)
    app.add_exception_handler(ReadOnlyPreset, preset_conflict)
    app.add_exception_handler(PresetExists, preset_conflict)
    app.add_exception_handler(RequestValidationError, request_error)
    app.add_exception_handler(WebSocketRequestValidationError, websocket_request_error)
