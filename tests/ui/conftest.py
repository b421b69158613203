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
import textual.app
import textual.pilot
from textual._wait import SLEEP_GRANULARITY, wait_for_idle
from textual.css.query import NoMatches

from tuner.control.api import Backend
from tuner.control.compose import open_controller
from tuner.control.controller import Controller
from tuner.control.embedded import EmbeddedBackend
from tuner.control.remote import RemoteBackend
from tuner.presets import Store
from tuner.settings import load
from tuner.web.app import create_app as create_web_app
from tuner.web.local import serve_in_thread

TOKEN = "t0ken"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# After every key the Pilot waits until this process looks idle (its CPU time stalls for
# 20 ms), for up to a second, twice. A process whose engine decodes never looks idle, so a
# key cost up to 2 s and a typed palette query half a minute. The tests synchronise on
# state (`until`) and the Pilot still waits for every widget to handle its messages; the
# idle guess is only capped.
IDLE_WAIT_S = 0.1


@pytest.fixture(autouse=True)
def short_idle_wait(monkeypatch) -> None:
    async def wait(min_sleep: float = SLEEP_GRANULARITY, max_sleep: float = 1) -> None:
        await wait_for_idle(min_sleep, min(max_sleep, IDLE_WAIT_S))

    for module in (textual.app, textual.pilot):
        monkeypatch.setattr(module, "wait_for_idle", wait)


def make_controller(overrides: dict[str, Any], store: Store | None = None) -> Controller:
    return open_controller(load(cli=overrides), store, start=False)


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


async def until(check: Callable[[], Any], timeout: float = 60.0, step: float = 0.05,
                pause: Callable[[float], Any] | None = None) -> Any:
    """Polls `check` until it returns something true; a widget it queries that is not
    mounted yet is not there yet. Fails after `timeout` seconds: long, a safety net for a
    loaded machine, not a time the UI must keep."""
    deadline = time.monotonic() + timeout
    while not (result := _checked(check)):
        assert time.monotonic() < deadline, f"timed out waiting for {check}"
        await (pause(step) if pause else asyncio.sleep(step))
    return result


def _checked(check: Callable[[], Any]) -> Any:
    try:
        return check()
    except NoMatches:  # a screen pushed, its widgets still being composed
        return None
