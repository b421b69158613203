"""Following a background job (an A/B, a tune) from its screen."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from textual.screen import Screen

from tuner.control.answers import ABStatus, TuneStatus
from tuner.control.errors import BackendError

J = TypeVar("J", ABStatus, TuneStatus)


async def follow_job(screen: Screen, fetch: Callable[[], Awaitable[J | None]], title: str,
                     over: Callable[[J], bool]) -> None:
    """Polls the job at the repaint rate and hands each reading to `screen.show` until it
    is over. Run as a worker on the event loop, so the remote backend's requests never
    block the UI; a lost server is reported once, not at every poll."""
    reported = None
    while True:
        try:
            job = await fetch()
        except BackendError as err:
            if str(err) != reported:
                reported = str(err)
                screen.notify(reported, title=title, severity="error", markup=False)
            job = None
        if job is not None:
            screen.show(job)
            if over(job):
                return
        await asyncio.sleep(1 / screen.app.refresh_hz)
