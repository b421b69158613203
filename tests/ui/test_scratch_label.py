"""Scratch: the throwaway `label` field reaches every surface."""
import asyncio, time
import httpx
import pytest
from tests.ui.conftest import following, until
from tuner.cli import build_parser
from tuner.control.models import ABRequest
from tuner.ui.app import create_app
from tuner.ui.screens.ab_dialog import ABDialog


@pytest.fixture
def anyio_backend():
    return 'asyncio'

@pytest.mark.anyio
async def test_backends_and_dialog(remote, embedded, controller):
    for backend in (remote, embedded):
        async with following(backend):
            while (await backend.ab_status() or {}).get("state") == "running":
                await asyncio.sleep(0.1)
            job = await backend.start_ab(ABRequest(a="baseline", b="2q", pairs=1, tokens=8, label="tui"))
            assert job["label"] == "tui"
    app = create_app(embedded)
    async with app.run_test(size=(140, 44)) as pilot:
        await app.push_screen(ABDialog(b="2q"))
        await pilot.pause()
        assert app.screen.query_one("#ab-label") is not None
