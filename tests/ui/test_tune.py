"""A tune from the terminal UI: the backends' start_tune, tune_status and stop_tune, and the
Tune dialog and screen driven through the Pilot."""

from __future__ import annotations

import asyncio
import time

import pytest
from textual.widgets import DataTable, Input, Static

from tests.ui.conftest import following, until
from tests.ui.test_ab import fill
from tuner.control.errors import BackendError
from tuner.control.models import TuneRequest, parse
from tuner.settings import SettingsError
from tuner.ui.app import create_app
from tuner.ui.screens.ab_dialog import ABDialog
from tuner.ui.screens.tune import TuneScreen, cells
from tuner.ui.screens.tune_dialog import TuneDialog

pytestmark = pytest.mark.anyio
SIZE = (160, 44)


@pytest.fixture(params=["embedded", "remote"])
def backend(request):
    return request.getfixturevalue(request.param)


async def over(backend, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while (job := await backend.tune_status()).state in ("running", "stopping"):
        assert time.monotonic() < deadline, f"tune still running: {job}"
        await asyncio.sleep(0.05)
    return job


async def test_backend_runs_a_tune_and_stops_one(backend, controller):
    async with following(backend):
        assert await backend.tune_status() is None
        assert await backend.stop_tune() is None
        job = await backend.start_tune(TuneRequest(trials=2, tokens=8,
                                                   space="prefetch=off|stale"))
        assert job.state == "running" and job.space["prefetch"] == "off|stale"
        with pytest.raises(BackendError, match="already running"):
            await backend.start_tune(TuneRequest(trials=2, tokens=8))
        job = await over(backend)
        assert job.state == "done" and len(job.rows) == 2, job
        await backend.start_tune(TuneRequest(trials=40, tokens=8))
        deadline = time.monotonic() + 60
        while not (await backend.tune_status()).rows:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        await backend.stop_tune()
        job = await over(backend)
        assert job.state == "stopped" and len(job.rows) < 40


async def test_backend_refuses_a_bad_space_and_starts_nothing(backend):
    async with following(backend):
        with pytest.raises(BackendError, match="low 9 must be below high 2"):
            await backend.start_tune(TuneRequest(trials=2, tokens=8, space="prefetch_max=9:2"))
        with pytest.raises(SettingsError, match="trials = 0"):  # refused by the request
            parse(TuneRequest, {"trials": 0, "tokens": 8})
        assert await backend.tune_status() is None


@pytest.mark.parametrize("dialog", [TuneDialog, ABDialog])
async def test_a_dialog_shows_every_label_whole(embedded, dialog):
    """A label beside each field, none cut: the Tune dialog's were cut at 22 columns."""
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(dialog())
        await until(lambda: isinstance(app.screen, dialog), pause=pilot.pause)
        await pilot.pause()
        labels = app.screen.query(".dialog-field Label")
        assert len(labels) == len(dialog.model.model_fields)
        for label in labels:
            assert label.region.width >= len(str(label.content)), str(label.content)


def test_trial_0_says_it_ran_the_baselines_own_values():
    row = {"number": 0, "state": "complete", "score_pct": 0.4, "ms_per_token": 1.0,
           "baseline_ms_per_token": 1.0, "bytes_per_token": 10, "hit_rate": 50.0,
           "worker": "w", "rejected": None, "params": {"prefetch": "off"},
           "baseline_values": True}
    assert cells(row, [])[-1] == "the baseline's own values: prefetch=off"
    assert cells({**row, "number": 1, "baseline_values": False}, [])[-1] == "prefetch=off"


@pytest.mark.slow
async def test_the_tune_screen_follows_a_tune_started_from_the_dialog(embedded):
    app = create_app(embedded, refresh_hz=8)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("t")
        await until(lambda: isinstance(app.screen, TuneDialog)
                    and app.focused is app.screen.query_one("#tune-trials", Input),
                    pause=pilot.pause)
        await fill(pilot, "#tune-trials", "3")
        await fill(pilot, "#tune-tokens", "8")
        # set, not typed: each key waits for the live engine's share of the GIL
        app.screen.query_one("#tune-space", Input).value = "prefetch=off|stale"
        await pilot.press("enter")
        screen = await until(lambda: isinstance(app.screen, TuneScreen) and app.screen,
                             pause=pilot.pause)
        table = screen.query_one("#tune-trials", DataTable)
        await until(lambda: screen.job.state == "done", pause=pilot.pause, timeout=60)
        await pilot.pause()
        keys = {k.value for k in table.rows}
        assert keys == {"0", "1", "2"}
        front = screen.job.front
        for n in front:
            assert table.get_cell(str(n), "state") == "front"
        text = str(screen.query_one("#tune-best", Static).render())
        assert f"best so far: trial {screen.job.best['number']}" in text
        await pilot.press("t")  # the tune is over: t opens the dialog again
        await until(lambda: isinstance(app.screen, TuneDialog), pause=pilot.pause)
