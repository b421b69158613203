"""Settings changes from the web, run off the event loop on threads of their own.

A change blocks until the engine applies or refuses it, so it runs on a worker thread. The
threads come from a small pool of their own: changes queued behind a slow engine can never
take the threads that pages, static files and reads use. A change that gets none of them
within the controller's apply_timeout is answered like one the engine did not take up in
time (503, nothing applied).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from tuner.control.errors import ApplyTimeout

T = TypeVar("T")

THREADS = 4  # changes apply one at a time anyway; a few may wait for their turn


class Steering:
    def __init__(self, timeout: float):
        self.timeout = timeout
        self._turns: anyio.Semaphore | None = None  # made on the server's event loop
        self._threads: anyio.CapacityLimiter | None = None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._turns is None:
            self._turns, self._threads = anyio.Semaphore(THREADS), anyio.CapacityLimiter(THREADS)
        with anyio.move_on_after(self.timeout) as waited:
            await self._turns.acquire()
        if waited.cancelled_caught:
            raise ApplyTimeout(f"{THREADS} settings changes were already waiting for the "
                               f"engine after {self.timeout:g} s; nothing was applied, try "
                               "again")
        try:
            return await anyio.to_thread.run_sync(fn, *args, limiter=self._threads)
        finally:
            self._turns.release()
