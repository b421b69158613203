"""A real server for the web tests: a session behind uvicorn on a free loopback port, in a
daemon thread."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from fastapi import FastAPI

from tuner.control.compose import open_controller
from tuner.control.controller import Controller
from tuner.engine.session.session import Session
from tuner.settings import load
from tuner.web.app import create_app
from tuner.web.local import listening_socket, serve_in_thread


@dataclass
class Live:
    url: str
    ws_url: str
    controller: Controller
    session: Session
    app: FastAPI

    @property
    def page_headers(self) -> dict[str, str]:
        """What the page's own requests carry: its origin and htmx's header."""
        return {"Origin": self.url, "HX-Request": "true"}

    def wait_tokens(self, n: int, timeout: float = 30.0) -> int:
        """Until the engine has decoded `n` more tokens; returns the token count."""
        start = self.session.tokens
        deadline = time.monotonic() + timeout
        while self.session.tokens < start + n:
            assert time.monotonic() < deadline, f"engine made no {n} tokens in {timeout} s"
            time.sleep(0.01)
        return self.session.tokens


def serve(controller: Controller, token: str | None = None, send_buffer: int | None = None,
          port: int = 0, **app_options) -> Iterator[Live]:
    app = create_app(controller, token, **app_options)
    with serve_in_thread(app, listening_socket(send_buffer, port)) as url:
        yield Live(url, url.replace("http://", "ws://") + "/ws", controller,
                   controller.session, app)


def start_controller(overrides: dict) -> Controller:
    return open_controller(load(cli=overrides))

