"""The server in a background thread on a loopback port, for benchmarks and tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from tuner.web.limits import MAX_BODY

# On SIGTERM or Ctrl-C, open requests and websockets get this long to finish; then the
# server closes them, so the process ends within a few seconds whatever clients do.
GRACE_S = 2


def server_config(app: FastAPI) -> uvicorn.Config:
    """How uvicorn serves the app, for `tuner serve` and here. No permessage-deflate: it
    would compress every snapshot again for every client (and every client would inflate
    it), the largest per-frame cost of telemetry on a small machine; a snapshot is tens of
    KiB, which any link a dashboard is watched over carries ten times a second."""
    return uvicorn.Config(app, log_level="warning", ws_max_size=MAX_BODY,
                          ws_per_message_deflate=False,
                          timeout_graceful_shutdown=GRACE_S)


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


@contextmanager
def serve_in_thread(app: FastAPI, sock: socket.socket | None = None) -> Iterator[str]:
    """Runs `app` on uvicorn in a daemon thread; yields its base URL once it accepts."""
    sock = sock or listening_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(server_config(app))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
