"""`tuner bench`'s telemetry section (c): the engine's tokens per second with websocket
clients reading snapshots against none, measured in one run with the phases alternated; and
the share of a core serving them costs the engine's process with the engine paused. It
drives this package's server, so it lives here (tuner.bench.sections names it)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import FastAPI

from tuner.bench.sections import Options
from tuner.control.compose import open_controller
from tuner.engine.session.session import Session
from tuner.knobs import Config, config_dict
from tuner.settings import validate
from tuner.web.app import create_app
from tuner.web.bench_clients import Clients
from tuner.web.local import serve_in_thread


def _cpu_share(seconds: float) -> float:
    """This process's CPU seconds per second over `seconds`."""
    t0, c0 = time.perf_counter(), time.process_time()
    time.sleep(seconds)
    return (time.process_time() - c0) / (time.perf_counter() - t0)


def _tok_s(session: Session, seconds: float) -> float:
    start, t0 = session.tokens, time.perf_counter()
    time.sleep(seconds)
    return (session.tokens - start) / (time.perf_counter() - t0)


@contextmanager
def _clients(app: FastAPI, ws_url: str, n: int, rate: float, frames: list[float],
             errors: list[str]) -> Iterator[None]:
    """`n` clients reading at `rate` a second while the block runs, once all have joined;
    appends the updates each received a second to `frames` and their errors to `errors`."""
    clients = Clients(f"{ws_url}?rate={rate}", n)
    clients.start()
    hub, deadline = app.state.hub, time.monotonic() + 60
    while hub.clients < n and time.monotonic() < deadline:
        time.sleep(0.05)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        got, failed = clients.stop()
        elapsed = time.perf_counter() - t0
        frames.append(sum(got) / n / elapsed if got else 0.0)
        errors += failed


def telemetry(cfg: Config, seconds: float = 5.0, clients: int = 10, rate: float = 10.0,
              rounds: int = 2) -> dict:
    """Tokens per second with `clients` websocket clients at `rate` updates a second against
    none, alternated none / clients `rounds` times on one running session. Then, with the
    session paused, the share of a core the same clients cost the process: the telemetry's
    own work per frame (snapshots, encoding, sending, and the clients reading, which run
    in this process too), a figure another process's load disturbs far less than a rate
    of tokens."""
    controller = open_controller(validate(config_dict(cfg)))
    session = controller.session
    bare: list[float] = []
    watched: list[float] = []
    frames: list[float] = []
    errors: list[str] = []
    app = create_app(controller)
    try:
        with serve_in_thread(app) as url:
            ws_url = url.replace("http://", "ws://") + "/ws"
            _tok_s(session, 1.0)  # warm
            for _ in range(rounds):
                bare.append(_tok_s(session, seconds))
                with _clients(app, ws_url, clients, rate, frames, errors):
                    watched.append(_tok_s(session, seconds))
            session.pause()
            idle = _cpu_share(seconds)
            with _clients(app, ws_url, clients, rate, [], errors):
                streaming = _cpu_share(seconds)
    finally:
        controller.close()
    none, some = statistics.mean(bare), statistics.mean(watched)
    return {"clients": clients, "rate": rate, "seconds": seconds, "rounds": rounds,
            "tok_s_without": round(none, 2), "tok_s_with": round(some, 2),
            "ratio": round(some / none, 4) if none else None,
            "runs_without": [round(x, 2) for x in bare],
            "runs_with": [round(x, 2) for x in watched],
            "updates_per_client_s": round(statistics.mean(frames), 2),
            "cpu_share_paused": round(100 * idle, 2),
            "cpu_share_paused_with_clients": round(100 * streaming, 2),
            "errors": errors}


def measure(cfg: Config, tokens: int, opts: Options) -> dict:
    return telemetry(cfg)


def text(r: dict) -> str:
    return (f"(c) telemetry: {r['tok_s_with']} tok/s with {r['clients']} websocket clients "
            f"at {r['rate']}/s / {r['tok_s_without']} tok/s without = {r['ratio']} "
            f"({r['updates_per_client_s']} updates per client a second, "
            f"{len(r['errors'])} errors); the clients cost "
            f"{r['cpu_share_paused_with_clients'] - r['cpu_share_paused']:.1f} % of a core "
            "with the engine paused")
