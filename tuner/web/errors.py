"""Error responses: every 4xx says what was wrong and what is allowed.

A TunerError anywhere under a route is answered here, in one place: its status from the
control plane's table (tuner.control.errors), its body the problems by field when it names
them, else its one line as `detail`.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError, WebSocketRequestValidationError
from fastapi.responses import JSONResponse
from starlette.websockets import WebSocket

from tuner.control.errors import SettingsError, http_status
from tuner.control.models import problems
from tuner.errors import TunerError
from tuner.web.gate import POLICY_VIOLATION, who

log = logging.getLogger(__name__)


def problems_response(found: dict[str, str]) -> JSONResponse:
    return JSONResponse({"detail": {"problems": found}}, status_code=422)


async def user_error(_: Request, err: TunerError) -> JSONResponse:
    if isinstance(err, SettingsError):
        return problems_response(err.problems)
    status = http_status(err)
    retry = {"Retry-After": "1"} if status == 503 else None  # nothing applied: try again
    return JSONResponse({"detail": str(err)}, status_code=status, headers=retry)


async def request_error(_: Request, err: RequestValidationError) -> JSONResponse:
    errors = err.errors()
    bad_json = next((e for e in errors if e["type"] == "json_invalid"), None)
    if bad_json is not None:
        why = bad_json.get("ctx", {}).get("error", "")
        at = bad_json["loc"][-1]
        return JSONResponse({"detail": f"request body is not valid JSON: {why} at "
                                       f"character {at}"}, status_code=400)
    return problems_response(problems(errors, skip=1))


async def websocket_request_error(ws: WebSocket, err: WebSocketRequestValidationError) -> None:
    """A bad query on /ws (say rate=100) is refused before the handshake, like the gate's
    refusals: the server answers 403 and the reason goes to the log in one line."""
    found = "; ".join(problems(err.errors(), skip=1).values())
    log.warning("refused websocket %s: %s", who(ws.scope), found)
    await ws.close(POLICY_VIOLATION)


def install(app: FastAPI) -> None:
    # FastAPI's decorator takes a handler of the exception it names (Starlette's
    # add_exception_handler is typed for handlers of any exception)
    app.exception_handler(TunerError)(user_error)
    app.exception_handler(RequestValidationError)(request_error)
    app.exception_handler(WebSocketRequestValidationError)(websocket_request_error)
