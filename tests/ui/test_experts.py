"""The Experts screen: the heat map of routings, misses and residency per (layer, expert),
and the live hit curves with the current arena marked."""

from __future__ import annotations

from functools import partial

import pytest

from tests.ui.conftest import make_controller, until
from tuner.control.embedded import EmbeddedBackend
from tuner.format import figure
from tuner.ui.app import create_app
from tuner.ui.screens.experts import ExpertsScreen, bar, curve_text
from tuner.ui.widgets.heat_map import HeatMap
from tuner.ui.widgets.readout import Readout

pytestmark = pytest.mark.anyio
SIZE = (140, 44)


def text(screen, selector: str) -> str:
    return str(screen.query_one(selector, Readout).render())


async def test_the_heat_map_and_the_curve_render_and_update(embedded, controller):
    session = controller.session
    app = create_app(embedded, refresh_hz=4)
    async with app.run_test(size=SIZE) as pilot:
        wait = partial(until, pause=pilot.pause)
        await pilot.press("5")
        await wait(lambda: isinstance(app.screen, ExpertsScreen))
        screen = app.screen
        heat = screen.query_one(HeatMap)
        await wait(lambda: heat.data is not None and heat.data["resident"] is not None)
        first = heat.data
        await wait(lambda: heat.data["routings"] != first["routings"])  # it follows the engine
        await wait(lambda: "hit rate % over arena size" in text(screen, "#curve-text"),
                   timeout=60)
        assert "▶" in text(screen, "#curve-text")  # the current arena, marked

        session.pause()
        await wait(lambda: app.snapshot["state"] == "paused")
        heat.focus()
        await pilot.press("down", "right", "right")
        await wait(lambda: text(screen, "#heat-cell").startswith("layer 1, expert 2:"))
        data = heat.data
        routed, missed = data["routings"][1][2], data["misses"][1][2]
        assert f"{routed} routings, {missed} sync misses" in text(screen, "#heat-cell")
        await pilot.press("m")
        await wait(lambda: "colour: sync misses" in text(screen, "#heat-caption"))
        await pilot.press("w")
        await wait(lambda: heat.data["view"] == "cumulative")
        assert "cumulative" in text(screen, "#heat-caption")


async def test_the_heat_map_the_curve_and_the_layers_count_the_same_window(tiny_overrides):
    """One window, measured, on every screen: 192-token prompts prefilled in one step make
    a window of 32 tokens reach back into a prompt, so it holds more than 32."""
    controller = make_controller({**tiny_overrides, "workload": "long-prompt", "window": 32})
    controller.session.start()
    app = create_app(EmbeddedBackend(controller), refresh_hz=4)
    try:
        async with app.run_test(size=SIZE) as pilot:
            wait = partial(until, pause=pilot.pause)
            await pilot.press("5")
            await wait(lambda: isinstance(app.screen, ExpertsScreen))
            screen = app.screen
            await wait(lambda: "at token" in text(screen, "#curve-text"), timeout=60)
            controller.session.pause()
            await wait(lambda: app.snapshot["state"] == "paused")
            # the token in flight when paused still ends: the curve catches up with it
            await wait(lambda: f"at token {figure(controller.session.tokens)} "
                       in text(screen, "#curve-text"), timeout=60)
            tokens = figure(controller.session.snapshot()["window"]["tokens"])
            assert int(tokens.replace(",", "")) > 32
            await wait(lambda: f"window: the last {tokens} tokens" in text(screen,
                                                                            "#heat-caption"))
            assert f"the window's {tokens} tokens" in text(screen, "#curve-text")
            await pilot.press("2")
            await wait(lambda: f"window: the last {tokens} tokens"
                       in text(app.screen, "#layers-caption"))
    finally:
        controller.close()


def test_the_curve_text_marks_the_arena_and_the_gap():
    curve = {"arena": 20, "policy": "lru", "live_hit_rate": 61.4, "at_token": 900,
             "window": 64, "sizes": [10, 20, 40], "working_set": 16,
             "working_sets": [0.62, 1.25, 2.5], "tokens": 64, "warmup_tokens": 64,
             "hit_rate": {"lru": [10.0, 61.4, 90.0], "2q": [9.0, 47.2, 88.0],
                          "opt": [41.8, 83.4, 95.8]},
             "at_arena": {"lru": 61.4, "2q": 47.2, "opt": 83.4}, "gap_pp": 22.0,
             "next": {"slots": 40, "added": 20, "gain_pp": 28.6}, "notes": [],
             "seconds": 0.5}
    lines = curve_text(curve).splitlines()
    now = next(line for line in lines if line.startswith("▶"))
    assert "20" in now and "1.25" in now and "61.4" in now and "83.4" in now
    assert "live 61.4" in now and "working sets of 16" in lines[1]
    assert "gap to the bound 22.0 pp" in lines[-1] and "20 more slots (40): +28.6 pp" in lines[-1]
    assert bar(50.0, 75.0).count("█") == 20 and bar(50.0, 75.0).count("░") == 10
    assert "computing the first curve" in curve_text(None)
