"""Websocket clients reading snapshots, in a process of their own, as browsers and terminals
are: the telemetry bench measures what serving them costs the engine's process, not what
reading them would cost it too. Light imports only: the process starts in a moment."""

from __future__ import annotations

import asyncio
import multiprocessing
from multiprocessing.connection import Connection

import websockets


def _read(url: str, n: int, stop, results: Connection) -> None:
    """In the child: `n` clients until `stop` is set; sends back (frames per client,
    errors)."""
    frames = [0] * n
    errors: list[str] = []

    async def one(i: int) -> None:
        try:
            async with websockets.connect(url, proxy=None, max_size=2**24) as ws:
                while not stop.is_set():
                    try:
                        await asyncio.wait_for(ws.recv(), 0.5)
                        frames[i] += 1
                    except TimeoutError:
                        continue
        except Exception as err:  # reported with the figures
            errors.append(f"client {i}: {type(err).__name__}: {err}")

    async def main() -> None:
        await asyncio.gather(*(one(i) for i in range(n)))

    asyncio.run(main())
    results.send((frames, errors))


class Clients:
    """`n` websocket clients of `url` in a child process, from `start` to `stop`."""

    def __init__(self, url: str, n: int):
        ctx = multiprocessing.get_context("spawn")  # nothing of the engine's threads
        self._stop = ctx.Event()
        self._results, sender = ctx.Pipe(duplex=False)
        self._process = ctx.Process(target=_read, args=(url, n, self._stop, sender),
                                    daemon=True)

    def start(self) -> None:
        self._process.start()

    def stop(self) -> tuple[list[int], list[str]]:
        """(frames each client received, errors)."""
        self._stop.set()
        answer = self._results.recv() if self._results.poll(30) else ([], ["no answer"])
        self._process.join(timeout=10)
        return answer
