"""The documentation's pictures, made again by `python -m tuner.docs --screenshots`.

One session of the demo model at the default settings runs behind the real server; Chromium
(Playwright, /usr/bin/chromium) takes the page, Textual's own screenshots take the terminal
UI's screens (embedded on the same session, as `tuner tui` runs them) and the same Chromium
turns them into PNG; then an A/B and a tune run through the page's forms and their charts
are written by the chart module the page uses. Every figure in them is measured on this
machine at that moment, so they differ from one run to the next; each picture's caption in
the docs names the model and the day. Needs the test extra (Playwright) and Chromium.
Presets and the tune's study go to a scratch folder, not the user's.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update"]
WIDTH, HEIGHT = 1440, 1250  # the page
TERMINAL = (140, 42)  # the terminal UI, columns x rows
WARM_TOKENS = 120  # decoded before the terminal UI's pictures
PAGE_TOKENS = 120  # decoded with the page open, so its charts have a history


def _polls(timeout: float, what: str) -> Iterator[None]:
    """Yields until `timeout` seconds have passed, then raises."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        yield
    raise TimeoutError(f"waited {timeout:.0f} s for {what}")


def _until(check: Callable[[], object], timeout: float, what: str) -> None:
    for _ in _polls(timeout, what):
        if check():
            return
        time.sleep(0.2)


def _terminal_svgs(controller, screens: dict[str, str],
                   ready: dict[str, Callable[[], object]]) -> dict[str, str]:
    """The terminal UI's screens (name -> the key that opens it), as Textual's SVG, each
    taken once its `ready` check (if any) holds: what it shows is computed by then."""
    from tuner.control.embedded import EmbeddedBackend
    from tuner.ui.app import create_app

    svgs: dict[str, str] = {}

    async def shoot() -> None:
        app = create_app(EmbeddedBackend(controller), refresh_hz=2)
        async with app.run_test(size=TERMINAL) as pilot:
            for name, key in screens.items():
                await pilot.press(key)
                for _ in _polls(300, f"the {name} screen's figures"):
                    if name not in ready or ready[name]():
                        break
                    await pilot.pause(0.2)
                await pilot.pause(4.0)  # the newest snapshot, repainted
                svgs[name] = app.export_screenshot(title="tuner tui")

    asyncio.run(shoot())  # before Playwright, whose sync API holds this thread's loop
    return svgs


def _png(page, svg: str, path: Path) -> Path:
    page.set_content(f"<body style='margin:0'>{svg}</body>")
    page.locator("svg").first.screenshot(path=path)
    return path


def make(out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    from tuner import charts
    from tuner.control.compose import open_controller
    from tuner.settings import load
    from tuner.web.app import create_app
    from tuner.web.local import serve_in_thread

    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="tuner-pictures-"))
    if "TUNER_HOME" not in os.environ:  # presets and the tune's study: not the user's
        os.environ["XDG_CONFIG_HOME"] = str(scratch)
    controller = open_controller(load())
    session = controller.session
    written: list[Path] = []
    try:
        _until(lambda: session.tokens >= WARM_TOKENS, 900, f"{WARM_TOKENS} tokens")
        # The experts screen's hit curve is computed in the background once it is asked for.
        svgs = _terminal_svgs(controller, {"overview": "1", "layers": "2", "experts": "5"},
                              ready={"experts": lambda: controller.curve() is not None})
        with serve_in_thread(create_app(controller)) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for name, svg in svgs.items():
                written.append(_png(browser.new_page(), svg, out / f"tui-{name}.png"))
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            page.goto(url)
            opened = session.tokens
            page.locator("#curve-info").filter(has_text="bound").wait_for(timeout=300_000)
            _until(lambda: session.tokens >= opened + PAGE_TOKENS, 900, "the charts' history")
            page.locator("#charts").scroll_into_view_if_needed()
            page.evaluate("window.scrollBy(0, -40)")
            page.screenshot(path=out / "dashboard.png")
            written.append(out / "dashboard.png")

            page.goto(url)
            form = page.locator("form.ab-start")
            form.locator("select[name=b]").select_option("2q")
            form.locator("input[name=pairs]").fill("2")
            form.locator("input[name=tokens]").fill("48")
            form.locator("button").click()
            _until(lambda: controller.ab.job and not controller.ab.job.busy, 900, "the A/B")
            job = controller.ab.job
            chart = charts.ab_chart(job.runs, job.result, (job.a, job.b))
            written.append(charts.write(chart, out / "ab-chart.svg"))
            page.reload()
            page.locator("#ab-chart svg").wait_for()
            page.locator("#jobs").screenshot(path=out / "dashboard-ab.png")
            written.append(out / "dashboard-ab.png")

            form = page.locator("form.tune-start")
            form.locator("input[name=trials]").fill("8")
            form.locator("input[name=tokens]").fill("16")
            form.locator("button").click()
            _until(lambda: controller.tune.job and not controller.tune.job.busy, 1800,
                   "the tune")
            tune = controller.tune.job
            written.append(charts.write(charts.tune_chart(tune.rows, tune.front),
                                        out / "tune-chart.svg"))
            browser.close()
    finally:
        controller.close()
    return written
