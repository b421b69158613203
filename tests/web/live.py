"""A real server for the web tests: a session behind uvicorn on a free loopback port, in a
daemon thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn

from tuner.control import Controller
from tuner.engine.session import Session
from tuner.presets import Store
from tuner.settings import load, to_config
from tuner.web.app import create_app


def listening_socket(send_buffer: int | None = None, port: int = 0) -> socket.socket:
    """A loopback socket (on a free port unless `port` is given). Accepted connections
    inherit `send_buffer`; a small one makes a client that stops reading back up the server
    within a few frames."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart on the same port
    if send_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    return sock


@dataclass
class Live:
    url: str
    ws_url: str
    controller: Controller
    session: Session
    server: uvicorn.Server

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
    sock = listening_socket(send_buffer, port)
    port = sock.getsockname()[1]
    app = create_app(controller, token, **app_options)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws_max_size=64 * 1024))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield Live(f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}/ws", controller,
                   controller.session, server)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def start_controller(overrides: dict) -> Controller:
    settings = load(cli=overrides)
    session = Session(to_config(settings))
    session.start()
    return Controller(session, settings, Store())

