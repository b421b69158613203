"""Scratch: the throwaway A/B `caption` field in both backends and the terminal's dialog."""
import asyncio

import pytest

from tests.ui.conftest import following
from tuner.control.models import ABRequest
from tuner.ui.app import create_app
from tuner.ui.screens.ab_dialog import ABDialog

pytestmark = pytest.mark.anyio


async def test_backends_and_dialog(remote, embedded, controller):
    for backend in (remote, embedded):
        async with following(backend):
            while (job := await backend.ab_status()) is not None and job.state == "running":
                await asyncio.sleep(0.1)
            job = await backend.start_ab(ABRequest(a="baseline", b="2q", pairs=1, tokens=8,
                                                   caption="tui"))
            assert job.caption == "tui"
    app = create_app(embedded)
    async with app.run_test(size=(140, 44)) as pilot:
        await app.push_screen(ABDialog(b="2q"))
        await pilot.pause()
        assert app.screen.query_one("#ab-caption") is not None
