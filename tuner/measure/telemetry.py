"""The cost of telemetry: the engine's tokens per second with websocket clients reading
snapshots against none, measured in one run with the phases alternated."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time

import websockets

from tuner.control import Controller
from tuner.engine.session import Session
from tuner.knobs import Config, config_dict
from tuner.settings import validate
from tuner.web.app import create_app
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


class _Clients:
    """`n` websocket clients reading at `rate` a second, on an event loop of their own."""

    def __init__(self, ws_url: str, n: int, rate: float):
        self.url, self.n = f"{ws_url}?rate={rate}", n
        self.frames = [0] * n
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _one(self, i: int) -> None:
        try:
            async with websockets.connect(self.url, proxy=None, max_size=2**24) as ws:
                while not self._stop.is_set():
                    try:
                        await asyncio.wait_for(ws.recv(), 1.0)
                        self.frames[i] += 1
                    except TimeoutError:
                        continue
        except Exception as err:  # reported with the figures
            self.errors.append(f"client {i}: {type(err).__name__}: {err}")

    async def _main(self) -> None:
        await asyncio.gather(*(self._one(i) for i in range(self.n)))

    def __enter__(self):
        self._thread.start()
        time.sleep(0.5)  # connected and past the first snapshot
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)


def telemetry(cfg: Config, seconds: float = 5.0, clients: int = 10, rate: float = 10.0,
              rounds: int = 2) -> dict:
    """Tokens per second with `clients` websocket clients at `rate` updates a second against
    none, alternated none / clients `rounds` times on one running session. Then, with the
    session paused, the share of a core the same clients cost the process: the telemetry's
    own work per frame (snapshots, encoding, sending, and the clients reading, which run
    in this process too), a figure another process's load disturbs far less than a rate
    of tokens."""
    session = Session(cfg)
    session.start()
    controller = Controller(session, validate(config_dict(cfg)))
    bare, watched, frames, errors = [], [], [], []
    try:
        with serve_in_thread(create_app(controller)) as url:
            ws_url = url.replace("http://", "ws://") + "/ws"
            _tok_s(session, 1.0)  # warm
            for _ in range(rounds):
                bare.append(_tok_s(session, seconds))
                with _Clients(ws_url, clients, rate) as c:
                    start = list(c.frames)
                    watched.append(_tok_s(session, seconds))
                    frames.append(sum(c.frames) - sum(start))
                errors += c.errors
            session.pause()
            idle = _cpu_share(seconds)
            with _Clients(ws_url, clients, rate) as c:
                streaming = _cpu_share(seconds)
            errors += c.errors
    finally:
        session.stop()
    none, some = statistics.mean(bare), statistics.mean(watched)
    return {"clients": clients, "rate": rate, "seconds": seconds, "rounds": rounds,
            "tok_s_without": round(none, 2), "tok_s_with": round(some, 2),
            "ratio": round(some / none, 4) if none else None,
            "runs_without": [round(x, 2) for x in bare],
            "runs_with": [round(x, 2) for x in watched],
            "updates_per_client_s": round(statistics.mean(frames) / clients / seconds, 2),
            "cpu_share_paused": round(100 * idle, 2),
            "cpu_share_paused_with_clients": round(100 * streaming, 2),
            "errors": errors}
