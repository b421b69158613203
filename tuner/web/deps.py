"""Dependencies shared by the routers, as `Annotated` aliases."""

from __future__ import annotations

import secrets
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, HTTPException, WebSocket
from starlette.requests import HTTPConnection

from tuner.control import Controller
from tuner.presets import PresetError, Store, check_name
from tuner.web.hub import Hub


def get_controller(conn: HTTPConnection) -> Controller:
    return conn.app.state.controller


def get_hub(conn: HTTPConnection) -> Hub:
    return conn.app.state.hub


ControllerDep = Annotated[Controller, Depends(get_controller)]
HubDep = Annotated[Hub, Depends(get_hub)]


def get_store(controller: ControllerDep) -> Store:
    return controller.store


StoreDep = Annotated[Store, Depends(get_store)]

def require_token(conn: HTTPConnection) -> None:
    """With a token configured, every call carries it as a Bearer header or ?token=.
    (Read by hand: FastAPI's HTTPBearer cannot run on websocket routes.)"""
    expected: str | None = conn.app.state.token
    if expected is None:
        return
    scheme, _, credentials = conn.headers.get("authorization", "").partition(" ")
    given = credentials if scheme.lower() == "bearer" else conn.query_params.get("token")
    if not given or not secrets.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(401, "a valid token is required: send 'Authorization: Bearer "
                                 "<token>' or add ?token=<token>",
                            headers={"WWW-Authenticate": "Bearer"})


def require_same_origin(ws: WebSocket) -> None:
    """Browsers send Origin on websocket upgrades and no CORS rule applies there, so a page
    on another site could otherwise drive the engine. Clients that send none are allowed."""
    origin = ws.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != ws.headers.get("host"):
        raise HTTPException(403, f"websocket from origin {origin!r} refused: only pages "
                                 "served by this server may connect")


def preset_name(name: str) -> str:
    """The {name} path parameter, checked so it cannot leave the presets folder."""
    try:
        return check_name(name)
    except PresetError as err:
        raise HTTPException(400, str(err)) from None


PresetName = Annotated[str, Depends(preset_name)]
