"""Following a background job (an A/B, a tune) from its screen."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from textual.screen import Screen

from tuner.control.answers import ABStatus, TuneStatus
from tuner.control.errors import BackendError

if TYPE_CHECKING:
    from tuner.ui.app import TunerApp

J = TypeVar("J", ABStatus, TuneStatus)


class JobScreen(Screen):
    """A screen that follows a job (`follow_job`), typed as this app's."""

    app: TunerApp


async def follow_job(screen: JobScreen, fetch: Callable[[], Awaitable[J | None]],
                     show: Callable[[J], None], title: str, over: Callable[[J], bool]) -> None:
    """Polls the job at the repaint rate and hands each reading to `show` until it is
    over. Run as a worker on the event loop, so the remote backend's requests never
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
            show(job)
            if over(job):
                return
        await asyncio.sleep(1 / screen.app.refresh_hz)
