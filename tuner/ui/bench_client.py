"""The terminal UI's side of the UI benchmark (tuner.ui.bench): the app on one screen, on a
terminal that drops its output, for as long as the measurement needs it.

Run as a module, it is the connected UI: a process of its own that follows a server, as
`tuner tui --connect` would. It reads commands on its standard input, one a line:

    open URL SCREEN   runs the app on URL's server and answers "ready" once SCREEN is
                      built and painted
    probe             answers "CPU CHARS": this process's CPU seconds and the characters
                      written to its terminal so far
    close             closes the app (and its connection) and answers "closed"

and ends when its input does.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable

from textual.drivers.headless_driver import HeadlessDriver

from tuner.control.api import Backend
from tuner.control.remote import RemoteBackend
from tuner.errors import CommandError, run
from tuner.ui.app import TunerApp, create_app


class SinkDriver(HeadlessDriver):
    """A terminal of a fixed size that swallows the app's output and counts it."""

    written = 0  # characters written by all apps on this driver in this process

    @property
    def is_headless(self) -> bool:
        return False  # so the app encodes its updates for a terminal

    def write(self, data: str) -> None:
        SinkDriver.written += len(data)


async def attach(backend: Backend, screen: str, refresh_hz: float, size: tuple[int, int],
                 during: Callable[[], Awaitable[None]]) -> None:
    """Runs the app over `backend` on `screen` and awaits `during()` once the screen is
    built and painted; the app closes when `during` returns."""
    app: TunerApp = create_app(backend, refresh_hz=refresh_hz)
    app.driver_class = SinkDriver
    async with app.run_test(headless=False, size=size) as pilot:
        await app.switch_mode(screen)
        await pilot.pause(2 / refresh_hz)
        await during()


def main() -> None:
    refresh_hz = float(sys.argv[1])
    width, height = (int(n) for n in sys.argv[2].split("x"))
    out = sys.stdout  # taken now: the app takes sys.stdout over while it runs

    def say(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    async def commands() -> None:
        say("ready")
        while (line := (await asyncio.to_thread(sys.stdin.readline)).strip()) == "probe":
            say(f"{time.process_time()} {SinkDriver.written}")
        if line != "close":
            raise CommandError(f"expected probe or close, got {line!r}")

    for line in sys.stdin:
        command, url, screen = line.split()
        if command != "open":
            raise CommandError(f"expected open URL SCREEN, got {line!r}")
        # the snapshot rate `tuner tui --connect` asks for by default: the repaint rate
        asyncio.run(attach(RemoteBackend(url, rate=refresh_hz), screen, refresh_hz,
                           (width, height), commands))
        say("closed")


if __name__ == "__main__":
    sys.exit(run("tuner.ui.bench_client", main))
