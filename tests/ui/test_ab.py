"""A/B of two presets from the terminal UI: the backends' start_ab and ab_status, and the
Presets screen's dialog and A/B view driven through the Pilot."""

from __future__ import annotations

import asyncio
import time
from functools import partial

import pytest
from textual.widgets import DataTable, Input, Static

from tests.ui.conftest import following, until
from tuner.control.errors import BackendError
from tuner.control.models import ABRequest, parse
from tuner.measure import ab
from tuner.settings import SettingsError
from tuner.ui.app import create_app
from tuner.ui.screens.ab import ABScreen
from tuner.ui.screens.ab_dialog import ABDialog
from tuner.ui.screens.presets import PresetsScreen

pytestmark = pytest.mark.anyio
SIZE = (140, 44)


@pytest.fixture(params=["embedded", "remote"])
def backend(request):
    return request.getfixturevalue(request.param)


async def test_backend_runs_an_ab_and_reports_it(backend, controller, hold):
    release = hold(ab, "run_once")  # the A/B runs once the test releases it
    async with following(backend):
        assert await backend.ab_status() is None
        job = await backend.start_ab(ABRequest(a="baseline", b="2q", pairs=1, tokens=16))
        assert (job.a, job.b, job.total_runs) == ("baseline", "2q", 3)
        with pytest.raises(BackendError, match="already running"):
            await backend.start_ab(ABRequest(a="baseline", b="2q", pairs=1, tokens=16))
        release.set()
        job = await finished(backend)
        assert job.state == "done", job
        assert [run["arm"] for run in job.runs] == ["A", "B", "A"]
        assert job.result["verdict"]
        assert job.result["knob_diff"][0]["knob"] == "cache_policy"


async def finished(backend, timeout: float = 120.0) -> dict:
    """The job once it has ended, polled as the A/B view polls it."""
    deadline = time.monotonic() + timeout
    while (job := await backend.ab_status()).state == "running":
        assert time.monotonic() < deadline, f"A/B still running: {job}"
        await asyncio.sleep(0.05)
    return job


async def test_backend_refuses_bad_input_and_starts_nothing(backend):
    async with following(backend):
        with pytest.raises(BackendError, match="nope"):
            await backend.start_ab(ABRequest(a="baseline", b="nope", pairs=1, tokens=16))
        # counts and limits out of range are refused by the request itself, on either side
        for bad, says in (({"pairs": 99}, "pairs = 99"), ({"max_kl": -1.0}, "max_kl")):
            with pytest.raises(SettingsError, match=says):
                parse(ABRequest, {"a": "baseline", "b": "2q", **bad})
        assert await backend.ab_status() is None


# -- the UI --------------------------------------------------------------------------------
async def fill(pilot, selector: str, text: str) -> None:
    """Replaces a dialog field's text, typing only once it has focus (or keys are lost)."""
    field = pilot.app.screen.query_one(selector, Input)
    field.focus()
    await until(lambda: pilot.app.focused is field, pause=pilot.pause)
    await pilot.press("ctrl+u", *text)


async def open_dialog(pilot, select: str) -> None:
    app = pilot.app
    await pilot.press("4")
    presets = await until(lambda: isinstance(app.screen, PresetsScreen)
                          and (t := app.screen.query_one("#preset-list", DataTable)).row_count
                          and t, pause=pilot.pause)
    presets.move_cursor(row=presets.get_row_index(select))
    await pilot.press("b")
    await until(lambda: isinstance(app.screen, ABDialog)
                and app.focused is app.screen.query_one("#ab-a", Input), pause=pilot.pause)


async def test_an_ab_started_from_the_presets_screen_shows_runs_and_verdict(
        embedded, controller):
    controller.session.pause()  # keys are slow next to a decoding engine (see test_app)
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        wait = partial(until, pause=pilot.pause)
        await open_dialog(pilot, "2q")
        dialog = app.screen
        assert [dialog.query_one(f"#ab-{k}", Input).value for k in ("a", "b", "pairs", "tokens")
                ] == ["baseline", "2q", "4", "64"]
        await fill(pilot, "#ab-pairs", "1")
        await fill(pilot, "#ab-tokens", "32")
        await fill(pilot, "#ab-workloads", "chat-cold")
        await fill(pilot, "#ab-rules", "seed000")
        await pilot.press("enter")

        screen = await wait(lambda: isinstance(app.screen, ABScreen) and app.screen)
        assert "paused during the A/B" in str(screen.query_one("#ab-heading", Static).render())
        result = screen.query_one("#ab-result", Static)
        await wait(lambda: "verdict:" in str(result.render()), timeout=30)
        runs = screen.query_one("#ab-runs", DataTable)
        assert [runs.get_row_at(i)[1:3] for i in range(runs.row_count)] == [
            ["chat-cold", "A"], ["chat-cold", "B"], ["chat-cold", "A"]]
        # quality per run (KL, top-1 %) and per arm: 2q changes no output
        assert [runs.get_row_at(i)[6:8] for i in range(runs.row_count)] == [["0", "100.0"]] * 3
        assert "KL 0 nats/token, top-1 agreement 100.0 %" in str(result.render())
        assert "done: 3 runs" in str(screen.query_one("#ab-progress", Static).render())
        assert "cache_policy lru -> 2q" in str(result.render())
        assert "rules seed000:" in str(result.render())
        assert "on chat-cold, rules seed000" in str(screen.query_one("#ab-heading",
                                                                    Static).render())
        assert controller.ab.job.state == "done"


async def test_an_unknown_preset_is_reported_and_starts_nothing(embedded, controller):
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        shown = []
        notify = app.notify
        app.notify = lambda message, **kw: shown.append(message) or notify(message, **kw)
        await open_dialog(pilot, "2q")
        await fill(pilot, "#ab-b", "nope")
        await pilot.press("enter")
        await until(lambda: any("nope" in m for m in shown), pause=pilot.pause)
        assert "no preset of that name" in next(m for m in shown if "nope" in m)
        assert isinstance(app.screen, PresetsScreen)
        assert controller.ab.job is None


async def test_the_dialog_takes_quality_limits_and_the_screen_shows_the_gate(embedded,
                                                                            controller):
    controller.session.pause()
    app = create_app(embedded)
    async with app.run_test(size=SIZE) as pilot:
        wait = partial(until, pause=pilot.pause)
        await open_dialog(pilot, "seed001-drop")
        await fill(pilot, "#ab-pairs", "1")
        await fill(pilot, "#ab-tokens", "32")
        await fill(pilot, "#ab-max_kl", "0")
        await pilot.press("enter")
        screen = await wait(lambda: isinstance(app.screen, ABScreen) and app.screen)
        assert "Quality gate: KL at most 0.0." in str(
            screen.query_one("#ab-heading", Static).render())
        result = screen.query_one("#ab-result", Static)
        await wait(lambda: "verdict:" in str(result.render()), timeout=30)
        assert "verdict: reject B: rule quality fails on " in str(result.render())
        assert controller.ab.job.min_agreement is None
