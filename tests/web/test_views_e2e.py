"""The page's views in a real headless Chromium: the experts heat map, the hit curve, the
layer table's column sets, charts that fit their boxes, and errors that are shown.
Screenshots of the page, 1440 and 800 pixels wide, go to test-output/."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.web.live import Live, serve, start_controller
from tuner.format import figure

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = pytest.mark.e2e
OUT = Path("test-output")
WIDTHS = (1440, 800)


def shot(page, name: str) -> None:
    OUT.mkdir(exist_ok=True)
    page.screenshot(path=OUT / f"{name}.png", full_page=True)


def test_the_heat_map_and_the_curve_render_and_update(live, open_page):
    page = open_page(live.url, width=1440)
    info = page.locator("#heatmap-info")
    expect(info).to_contain_text("window of", timeout=20_000)
    expect(info).to_contain_text("residency at token")
    first = info.text_content()
    live.wait_tokens(30)
    expect(info).not_to_have_text(first, timeout=20_000)  # it follows the engine

    page.locator("#heatmap").scroll_into_view_if_needed()  # below the latest A/B and tune
    canvas = page.locator("#heatmap").bounding_box()
    page.mouse.move(canvas["x"] + 3, canvas["y"] + 3)  # layer 0, expert 0
    expect(info).to_contain_text("layer 0, expert 0:")
    data = live.session.experts(True)
    assert "routings" in info.text_content() and "sync misses" in info.text_content()
    page.locator("#heatmap-controls select").select_option("resident")
    page.mouse.move(canvas["x"] + 3, canvas["y"] + 3)
    expect(info).to_contain_text("resident")
    assert data["layers"] == 4

    curve = page.locator("#curve-info")
    expect(curve).to_contain_text("bound", timeout=60_000)
    expect(curve).to_contain_text(f"now {live.session.engine.slots.n} slots (")
    expect(curve).to_contain_text(re.compile(r"\d working sets? of \d"))  # "1 working set"
    expect(curve).to_contain_text("), lru: live")
    shown = curve.text_content()
    live.wait_tokens(30)
    expect(curve).not_to_have_text(shown, timeout=60_000)  # recomputed as the engine moves
    assert page.locator("#curve canvas").count() >= 1
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 1000})
        page.wait_for_timeout(300)  # the charts follow the resize on their next frame
        shot(page, f"dashboard-{width}")


# Each preset button, in one round trip: inside its panel, and, scrolled to the middle of
# the window, the element at its centre (nothing covers it).
BUTTONS = """() => {
  const panel = document.getElementById('presets');
  return [...panel.querySelectorAll('td.actions button')].map(b => {
    b.scrollIntoView({block: 'center'});
    const r = b.getBoundingClientRect();
    return {inside: r.right <= panel.getBoundingClientRect().right + 1,
            hit: document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === b};
  });
}"""


def test_a_broken_preset_leaves_every_button_clickable(live, tuner_home, open_page):
    folder = tuner_home / "presets"
    folder.mkdir(parents=True)
    (folder / "unknown-knob.toml").write_text("[knobs]\nwarp_drive_engaged_for_ever = 9\n")
    for width in WIDTHS:
        page = open_page(live.url, width=width)
        broken = page.locator("#preset-unknown-knob")
        expect(broken).to_contain_text("unknown-knob.toml")
        buttons = page.evaluate(BUTTONS)
        assert len(buttons) >= 8
        for i, button in enumerate(buttons):
            assert button["inside"] and button["hit"], (width, i)
        page.locator("#preset-2q button", has_text="diff").click(trial=True)
        page.locator("#preset-2q button", has_text="diff").click()
        expect(page.locator("#preset-diff table")).to_contain_text("cache_policy")
        shot(page, f"dashboard-broken-preset-{width}")


def test_charts_fit_their_boxes_after_a_resize(live, open_page):
    page = open_page(live.url, width=1440)
    page.wait_for_function("tunerStats.messages > 3")

    def check() -> None:
        for box_id in ["#curve", *[f"#{f.get_attribute('id')}"
                                   for f in page.locator("#charts figure").all()]]:
            figure_box = page.locator(box_id).bounding_box()
            plot = page.locator(f"{box_id} .uplot").bounding_box()
            assert plot["width"] <= figure_box["width"] + 1, box_id

    check()
    for width in (800, 1900, 1100):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_function(  # every chart redrawn at its box's width
            """() => [...document.querySelectorAll('figure.chart')].every(f => {
                 const u = f.querySelector('.uplot');
                 return u && Math.abs(u.getBoundingClientRect().width - f.clientWidth) <= 2; })""")
        check()
    # a plot area tall enough for several ticks on the y axis (once 53 px, with one tick)
    assert page.locator("#chart-ms_per_token .u-over").bounding_box()["height"] >= 120
    ticks = page.evaluate("tunerStats.charts[0].axes[1]._splits.length")
    assert ticks >= 3


def test_a_change_that_never_reached_the_server_is_shown(controller, open_page):
    servers = serve(controller)
    live = next(servers)
    # while the server is down, each request and reconnect attempt fails, and Chromium,
    # htmx and its websocket extension log it
    page = open_page(live.url, allowed=(r"ERR_CONNECTION_REFUSED", r"^\[object Event\]$",
                                        r"^htmx:"))
    servers.close()  # the server is gone
    expect(page.locator("#connection")).to_have_text("disconnected, reconnecting")
    field = page.locator("#in-moce_bonus")
    field.fill("2")
    field.press("Tab")
    error = page.locator("#knob-moce_bonus .error")
    expect(error).to_contain_text("not applied: the server did not answer")
    assert controller.settings.moce_bonus == 0.0
    page.get_by_role("button", name="pause").click()
    expect(page.locator("#request-error")).to_contain_text("the server did not answer")


def test_the_column_sets_the_sticky_layer_column_and_the_window_subtitle(live, open_page):
    page = open_page(live.url, width=800)
    table = page.locator("#layers")
    expect(table.locator("thead th.unit")).to_have_text(["%"])  # the unit, once
    page.locator("#view-toggle select[name=columns]").select_option("all")
    expect(table.locator("thead th[data-col=lookups]")).to_have_count(1)
    assert table.locator("thead th.unit").count() > 4
    page.locator(".table-wrap").scroll_into_view_if_needed()
    page.evaluate("document.querySelector('.table-wrap').scrollLeft = 2000")
    assert page.evaluate("document.querySelector('.table-wrap').scrollLeft") > 500
    expect(table.locator("tbody tr[data-layer='0'] th")).to_be_visible()
    # the rows are swapped with every update: both boxes are read in one go
    offset = page.evaluate("""() => {
        const wrap = document.querySelector('.table-wrap');
        const layer = document.querySelector('#layers tbody tr th');
        return layer.getBoundingClientRect().left - wrap.getBoundingClientRect().left; }""")
    assert abs(offset) <= 2  # the layer column is still in view
    page.locator("#view-toggle select[name=columns]").select_option("ms/token")
    expect(table.locator("thead th[data-col=layer_ms_per_token]")).to_have_count(1)


@pytest.fixture
def long_prompts(tiny_overrides) -> Iterator[Live]:
    """192-token prompts, each prefilled in one step, and 16 tokens generated: a window of
    32 tokens always reaches back into a prompt."""
    controller = start_controller({**tiny_overrides, "workload": "long-prompt", "window": 32})
    try:
        yield from serve(controller)
    finally:
        controller.close()


def test_the_window_reads_one_token_count_everywhere(long_prompts, open_page):
    """The charts' heading, the layer table, the heat map and the hit curve count the same
    tokens: the engine's window, measured (here a prompt at its start makes it more than
    the knob's 32). Paused, every view settles on the last token's window."""
    live = long_prompts
    page = open_page(live.url, width=1440)
    expect(page.locator("#curve-info")).to_contain_text("bound", timeout=60_000)
    live.controller.pause()
    patterns = {"#st-window": r"^([\d,]+)$", "#st-view": r"^window \(([\d,]+) tokens\)$",
                "#heatmap-info": r"window of ([\d,]+) tokens",
                "#curve-info": r"the window's ([\d,]+) tokens"}
    try:
        deadline = time.monotonic() + 60
        while True:
            snap = live.session.snapshot()
            want = (figure(snap["window"]["tokens"]), figure(snap["tokens"]))
            shown = {sel: re.search(p, page.locator(sel).text_content() or "")
                     for sel, p in patterns.items()}
            found = {sel: m and m.group(1) for sel, m in shown.items()}
            at = re.search(r"at token ([\d,]+),", page.locator("#curve-info").text_content())
            if set(found.values()) == {want[0]} and at and at.group(1) == want[1]:
                break
            assert time.monotonic() < deadline, (want, found, at and at.group(1))
            page.wait_for_timeout(200)  # the heat map and the curve poll the server
    finally:
        live.controller.resume()


def test_the_page_writes_figures_as_the_server_does(live, open_page):
    page = open_page(live.url, width=1440)
    cases = [(None, ""), (1234567, ""), (3.0, ""), (6.5, ""), (0.0862, ""), (61.123, "%"),
             (0.86, "ms"), (1234.5, "ms/token"), (512, "bytes"), (152863, "bytes"),
             (152863.0, "bytes/token"), (3 * 1024**3, "bytes")]
    shown = page.evaluate(f"{json.dumps(cases)}.map(([v, u]) => tunerFigure(v, u))")
    assert shown == [figure(v, u) for v, u in cases]
