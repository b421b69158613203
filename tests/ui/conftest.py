"""Fixtures of the UI tests: an engine on the tiny model behind each kind of backend.

`remote_url` serves that engine through the real `tuner serve` app on a loopback socket, so
the REST client and the websocket client are exercised as they are in use, against the
server they talk to.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tuner.control import Controller
from tuner.engine.session import Session
from tuner.presets import Store
from tuner.settings import load, to_config
from tuner.ui.backend import Backend
from tuner.ui.embedded import EmbeddedBackend
from tuner.ui.remote import RemoteBackend
from tuner.web.app import create_app as create_web_app
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
    controller.close()


@pytest.fixture
def embedded(controller) -> EmbeddedBackend:
    return EmbeddedBackend(controller)


# -- the real server -------------------------------------------------------------------
@pytest.fixture
def remote_url(controller) -> Iterator[str]:
    """The engine behind the real `tuner serve` app, with a token, on a loopback port."""
    with serve_in_thread(create_web_app(controller, TOKEN)) as url:
        yield url


@pytest.fixture
def remote(remote_url) -> RemoteBackend:
    return RemoteBackend(remote_url, token=TOKEN, rate=20)


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
