"""Fixtures of the UI tests: an engine on the tiny model behind each kind of backend.

`remote_url` serves that engine through a small stand-in of `tuner serve` that implements
only what the remote backend calls, on a real loopback socket, so the REST client and the
websocket client are exercised as they are in use.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import pytest
from fastapi import Body, Depends, FastAPI, Header, HTTPException, WebSocket, WebSocketDisconnect

from tuner.control import Controller
from tuner.engine.session import Session
from tuner.knobs import KNOBS
from tuner.presets import PresetError, Store
from tuner.settings import SettingsError, load, to_config
from tuner.ui.backend import Backend
from tuner.ui.embedded import EmbeddedBackend
from tuner.ui.remote import RemoteBackend
from tuner.web.local import serve_in_thread

TOKEN = "t0ken"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_controller(overrides: dict[str, Any], store: Store | None = None) -> Controller:
    settings = load(cli=overrides)
    return Controller(Session(to_config(settings)), settings, store or Store())


@pytest.fixture
def controller(tiny_overrides) -> Iterator[Controller]:
    """A running engine on the tiny model."""
    controller = make_controller(tiny_overrides)
    controller.session.start()
    yield controller
    controller.session.stop()


@pytest.fixture
def embedded(controller) -> EmbeddedBackend:
    return EmbeddedBackend(controller)


# -- a stand-in server -------------------------------------------------------------------
def stand_in_server(controller: Controller, token: str | None = None) -> FastAPI:
    """The REST and websocket contract of `tuner serve`, over `controller`."""

    def authorised(authorization: str | None = Header(None)) -> None:
        if token and authorization != f"Bearer {token}":
            raise HTTPException(401, "a valid token is required")

    app = FastAPI(dependencies=[Depends(authorised)])

    @app.get("/api/knobs")
    def knobs() -> list[dict]:
        return [k.as_dict() for k in KNOBS]

    @app.get("/api/settings")
    def state() -> dict:
        return controller.state()

    @app.patch("/api/settings")
    def change(changes: Annotated[dict[str, Any], Body()]) -> dict:
        try:
            controller.change(changes)
        except SettingsError as err:
            raise HTTPException(422, {"problems": err.problems}) from None
        return controller.state()

    @app.post("/api/session/{action}")
    def session(action: str) -> None:
        actions = {"pause": controller.session.pause, "resume": controller.session.resume,
                   "reset": controller.session.reset_counters}
        actions[action]()

    @app.get("/api/presets")
    def presets() -> list[dict]:
        return controller.store.list()

    def preset_call(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except PresetError as err:
            raise HTTPException(400, str(err)) from None

    @app.post("/api/presets/{name}", status_code=201)
    def save(name: str, body: Annotated[dict[str, str], Body()]) -> None:
        preset_call(controller.save_preset, name, body.get("description", ""))

    @app.post("/api/presets/{name}/apply")
    def apply(name: str) -> dict:
        preset_call(controller.apply_preset, name)
        return controller.state()

    @app.get("/api/presets/{name}/diff")
    def diff(name: str) -> list[dict]:
        return preset_call(controller.diff, name)

    @app.websocket("/ws")
    async def stream(ws: WebSocket, rate: float = 10.0) -> None:
        if token and ws.headers.get("authorization") != f"Bearer {token}":
            await ws.close(1008)
            return
        await ws.accept()
        try:
            while True:
                frame = {"type": "snapshot", "data": controller.session.snapshot()}
                await ws.send_text(json.dumps(frame))
                await asyncio.sleep(1 / rate)
        except WebSocketDisconnect:
            pass

    return app


@pytest.fixture
def remote_url(controller) -> Iterator[str]:
    with serve_in_thread(stand_in_server(controller, TOKEN)) as url:
        yield url


@pytest.fixture
def remote(remote_url) -> RemoteBackend:
    return RemoteBackend(remote_url, token=TOKEN, rate=20)


@pytest.fixture
def served(controller) -> Iterator[RemoteBackend]:
    """The remote backend against the real `tuner serve` app."""
    web = pytest.importorskip("tuner.web.app")
    with serve_in_thread(web.create_app(controller, TOKEN)) as url:
        yield RemoteBackend(url, token=TOKEN, rate=20)


# -- helpers -----------------------------------------------------------------------------
@asynccontextmanager
async def following(backend: Backend) -> AsyncIterator[Backend]:
    """The backend opened and following its snapshots, as the app runs it."""
    await backend.open()
    task = asyncio.create_task(backend.follow())
    try:
        yield backend
    finally:
        task.cancel()
        await backend.close()


async def until(check: Callable[[], Any], timeout: float = 15.0, step: float = 0.05,
                pause: Callable[[float], Any] | None = None) -> Any:
    """Polls `check` until it returns something true; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {check}"
        await (pause(step) if pause else asyncio.sleep(step))
    return result
