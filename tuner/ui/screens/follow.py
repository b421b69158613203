"""Following a background job (an A/B, a tune) from its screen."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from textual.screen import Screen

from tuner.control.answers import ABStatus, TuneStatus
from tuner.control.errors import BackendError

if TYPE_CHECKING:
    from tuner.ui.app import TunerApp

J = TypeVar("J", ABStatus, TuneStatus)


class JobScreen(Screen, Generic[J]):
    """A screen that shows a job's readings as `follow_job` hands them over."""

    app: TunerApp

    def show(self, job: J) -> None:
        """Puts the job's latest reading on the screen."""
        raise NotImplementedError


async def follow_job(screen: JobScreen[J], fetch: Callable[[], Awaitable[J | None]],
                     title: str, over: Callable[[J], bool]) -> None:
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
