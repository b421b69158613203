"""Pictures of the terminal UI for people to look at: its screens rendered to SVG by
Textual, then to PNG by the headless Chromium of the browser tests, in test-output/.
They assert only that each screen has drawn what it exists for."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

from tests.ui.conftest import make_controller, until
from tuner.control.embedded import EmbeddedBackend
from tuner.engine.weights import synth
from tuner.ui.app import create_app
from tuner.ui.widgets.heat_map import HeatMap
from tuner.ui.widgets.readout import Readout

pytestmark = pytest.mark.e2e
OUT = Path("test-output")
SIZE = (160, 50)


@pytest.fixture(scope="module")
def model16(tmp_path_factory) -> Path:
    """The demo model's 16 layers x 64 experts, top-6, in small matrices."""
    recipe = replace(synth.TINY, name="strata-tiny-16x64", num_layers=16, num_experts=64,
                     top_k=6, topics=16)
    return synth.write(recipe, tmp_path_factory.mktemp("models") / "tiny16x64")


def curve_drawn(screen) -> bool:
    return "▶" in str(screen.query_one("#curve-text", Readout).render())


async def take_screenshots(controller) -> list[str]:
    """Each screen as SVG; the names of those taken."""
    shots = []
    app = create_app(EmbeddedBackend(controller), refresh_hz=4)
    async with app.run_test(size=SIZE) as pilot:
        wait = partial(until, pause=pilot.pause)
        await wait(lambda: controller.session.tokens > 150, timeout=60)
        for keys, name in ((("1",), "overview"), (("2", "c", "c"), "layers"),
                           (("5",), "experts")):
            await pilot.press(*keys)
            await wait(lambda name=name: app.current_mode == name)
            if name == "experts":
                await wait(lambda: curve_drawn(app.screen), timeout=60)
                app.screen.query_one(HeatMap).focus()
                await pilot.press("down", "down", "right", "right", "right")
            await pilot.pause(0.6)
            app.save_screenshot(f"tui-{name}.svg", str(OUT.resolve()))
            shots.append(name)
    return shots


def test_screenshots_of_the_terminal_ui(model16, browser):
    controller = make_controller({"model": str(model16), "io_workers": 3, "io_urgent": 1})
    controller.session.start()
    OUT.mkdir(exist_ok=True)
    try:  # on a thread of its own: Playwright's sync API holds this one's event loop
        with ThreadPoolExecutor(1) as pool:
            shots = pool.submit(asyncio.run, take_screenshots(controller)).result()
    finally:
        controller.close()
    page = browser.new_page(viewport={"width": 1800, "height": 1200})
    for name in shots:
        page.goto((OUT / f"tui-{name}.svg").resolve().as_uri())
        page.locator("svg").first.screenshot(path=OUT / f"tui-{name}.png")
    page.close()
    assert all((OUT / f"tui-{name}.png").stat().st_size > 10_000 for name in shots)
