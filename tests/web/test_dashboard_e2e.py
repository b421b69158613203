"""The dashboard in a real headless Chromium (Debian's, driven by Playwright).

Run on their own: `python -m pytest -m e2e` (Playwright's sync API keeps an event loop on
the main thread). Screenshots go to test-output/. The browser fixtures are in conftest.
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
from pathlib import Path

import pytest

from tests.web.live import serve, start_controller
from tuner.engine.weights import synth

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = pytest.mark.e2e

OUT = Path("test-output")


def shot(page, name: str) -> None:
    OUT.mkdir(exist_ok=True)
    page.screenshot(path=OUT / f"{name}.png", full_page=True)


# the token count the status line shows, as a number (it is written 1,234)
TOKENS_SHOWN = "Number(document.getElementById('st-tokens').textContent.replaceAll(',', ''))"


def number(page, selector: str) -> float:
    return float(page.locator(selector).text_content().replace(",", ""))


def cell(page, layer: int, column: str):
    return page.locator(f'#layers tbody tr[data-layer="{layer}"] td[data-col="{column}"]')


def show_columns(page, column_set: str) -> None:
    page.locator("#view-toggle select[name=columns]").select_option(column_set)
    expect(page.locator("#layers thead th.unit").first).to_have_text(column_set)


def hit_rate_over(live, tokens: int = 128) -> float:
    """The engine's hit rate over `tokens` tokens decoded from here on."""
    session = live.session
    session.pause()
    assert session.reset_counters(wait=10), "the counters were not reset"
    session.resume()
    assert session.wait_tokens(tokens, 40), f"no {tokens} tokens decoded"
    return session.snapshot()["totals"]["hit_rate"]


def test_page_loads_and_the_layer_table_keeps_updating(live, open_page):
    page = open_page(live.url)
    expect(page.locator("#st-state")).to_have_text("running")
    expect(page.locator("#st-model")).to_contain_text("strata-tiny-4x16")
    expect(page.locator("#layers tbody tr")).to_have_count(4)
    expect(cell(page, 3, "hit_rate")).not_to_be_empty()  # the first column set: rates
    show_columns(page, "experts")
    expect(cell(page, 3, "lookups")).not_to_be_empty()
    tokens, lookups = number(page, "#st-tokens"), cell(page, 0, "lookups").text_content()
    live.wait_tokens(20)
    page.wait_for_function(f"{TOKENS_SHOWN} > {tokens}")
    page.locator("#view-toggle input[value=cumulative]").check()
    expect(page.locator("#st-view")).to_contain_text("cumulative")
    expect(cell(page, 0, "lookups")).not_to_have_text(lookups)
    page.locator("#layers th[data-col=hits]").click()  # sorted by hits, descending
    expect(page.locator("#layers th[data-col=hits]")).to_have_attribute("aria-sort",
                                                                       "descending")
    page.get_by_role("button", name="pause").click()
    expect(page.locator("#st-state")).to_have_text("paused")
    page.get_by_role("button", name="resume").click()
    expect(page.locator("#st-state")).to_have_text("running")
    page.wait_for_function("tunerStats.messages > 10")
    # read in one go: cell by cell, an update swapped in between would mix two tables
    texts = page.locator("#layers tbody td[data-col=hits]").evaluate_all(
        "cells => cells.map((c) => c.textContent)")
    hits = [float(t.replace(",", "")) for t in texts]
    assert len(hits) == 4 and hits == sorted(hits, reverse=True)
    shot(page, "dashboard-tiny")


def test_toggling_2q_and_the_bonus_changes_version_and_counters(live, open_page):
    page = open_page(live.url)
    lru = hit_rate_over(live)

    page.locator("#in-cache_policy").select_option("2q")
    expect(page.locator("#st-version")).to_have_text("2")
    expect(page.locator("#st-arena")).to_contain_text("2q")
    assert live.controller.settings.cache_policy == "2q"
    two_q = hit_rate_over(live)

    page.locator("#in-moce_bonus").fill("4")
    page.locator("#in-moce_bonus").press("Tab")  # change fires when the field is left
    expect(page.locator("#st-version")).to_have_text("3")
    expect(page.locator("#in-moce_bonus")).to_have_value("4.0")
    assert live.controller.settings.moce_bonus == 4.0
    bonus = hit_rate_over(live)
    print(f"\nhit rate over 128 tokens: LRU {lru} %, 2Q {two_q} %, 2Q + bonus 4 {bonus} %")
    assert abs(two_q - lru) > 2  # the policy changed what stays resident
    assert bonus > two_q + 5  # residency-aware routing hits more
    hover_change_marker(page, "hit_rate")
    expect(page.locator("#change-info")).to_contain_text("moce_bonus 0 -> 4")
    shot(page, "dashboard-after-changes")


def hover_change_marker(page, chart: str, sweeps: int = 20) -> None:
    """Moves the mouse across a chart until it is over a settings-change marker: sweep
    after sweep, as a loaded machine's page may draw the change's token a while after the
    engine took it up."""
    box = page.locator(f"#chart-{chart} .u-over").bounding_box()
    for _ in range(sweeps):
        for x in range(int(box["width"]) - 1, 0, -3):
            page.mouse.move(box["x"] + x, box["y"] + box["height"] / 2)
            if "moce_bonus" in (page.locator("#change-info").text_content() or ""):
                return
        page.wait_for_timeout(500)


def test_out_of_range_value_shows_the_error_and_changes_nothing(live, open_page):
    page = open_page(live.url)
    before = live.controller.state()
    field = page.locator("#in-moce_protect")
    field.fill("99")
    field.press("Tab")
    error = page.locator("#knob-moce_protect .error")
    expect(error).to_contain_text("moce_protect (STRATA_METAL_MOCE_PROTECT) = 99 ")
    expect(error).to_contain_text("[0, 64]")
    expect(page.locator("#in-moce_protect")).to_have_value("3")  # reverted
    assert live.controller.state().settings == before.settings
    assert live.session.applied_version == before.version
    expect(page.locator("#st-version")).to_have_text(str(before.version))
    shot(page, "dashboard-rejected-value")


def test_presets_panel_applies_saves_and_diffs(live, open_page):
    page = open_page(live.url)
    page.locator("#preset-seed000-route button", has_text="apply").click()
    expect(page.locator("#preset-message")).to_contain_text("applied seed000-route")
    expect(page.locator("#in-moce_bonus")).to_have_value("0.85")
    expect(page.locator("#in-prefetch")).to_have_value("stale")
    expect(page.locator("#in-prefetch_route")).to_be_checked()
    assert live.controller.settings.moce_bonus == 0.85

    page.locator("form.save input[name=name]").fill("from-page")
    page.locator("form.save input[name=description]").fill("saved in the browser")
    page.locator("form.save button").click()
    expect(page.locator("#preset-from-page")).to_contain_text("saved in the browser")

    page.locator("#preset-2q button", has_text="diff").click()
    diff = page.locator("#preset-diff table")
    expect(diff).to_contain_text("moce_bonus")
    expect(diff).to_contain_text("cache_policy")
    shot(page, "dashboard-presets")


# Per table of a job's status: its right edge and its cells', its scrolled-out width, and
# the main view's right edge.
REACH = """(id) => [...document.querySelectorAll(`#${id} table`)].map(table => {
  const right = e => e.getBoundingClientRect().right;
  return {cells: Math.max(...[...table.querySelectorAll('td, th')].map(right)),
          table: right(table), hidden: table.scrollWidth - table.clientWidth,
          view: right(document.getElementById('view'))};
})"""


def in_main_view(page, status: str) -> None:
    """A job's status sits in the main view, not the controls column, and at 1440 pixels
    every table of it shows whole: nothing cut off, nothing to scroll to."""
    assert page.evaluate(f"!!document.querySelector('#view #{status}')")
    assert not page.evaluate(f"!!document.querySelector('#controls #{status}')")
    for reach in page.evaluate(REACH, status):
        assert reach["hidden"] <= 1 and reach["cells"] <= reach["table"] + 1 \
            and reach["table"] <= reach["view"] + 1, reach


def chart_marks(page, chart: str, gid: str) -> int:
    return page.locator(f"#{chart} g[id='{gid}'] use").count()


def test_ab_panel_runs_an_ab_and_shows_the_verdict(live, open_page):
    page = open_page(live.url, width=1440)
    form = page.locator("form.ab-start")
    expect(form.locator("select[name=a]")).to_have_value("baseline")
    form.locator("select[name=b]").select_option("2q")
    form.locator("input[name=pairs]").fill("1")
    form.locator("input[name=tokens]").fill("24")
    form.locator("button").click()
    expect(page.locator("#ab-verdict")).to_contain_text("verdict:", timeout=60_000)
    expect(page.locator("#ab-status table.ab-runs tbody tr")).to_have_count(3)
    expect(page.locator("#ab-status")).not_to_have_attribute("hx-trigger", "every 1s")
    assert "None" not in page.locator("#ab-status").text_content()
    in_main_view(page, "ab-status")
    # the chart, drawn now the A/B is over: a mark per run, a bar for the pair
    expect(page.locator("#ab-chart svg")).to_be_visible()
    assert chart_marks(page, "ab-chart", "ab-runs-A") == 2
    assert chart_marks(page, "ab-chart", "ab-runs-B") == 1
    expect(page.locator("#ab-chart g[id='ab-pair-1']")).to_have_count(1)
    shot(page, "dashboard-ab")


def test_ab_of_a_prompt_alone_says_so(live, open_page):
    """16 tokens are the corpus's first prompt: said so, and nothing reads "None"."""
    page = open_page(live.url, width=1440)
    form = page.locator("form.ab-start")
    form.locator("select[name=b]").select_option("2q")
    form.locator("input[name=pairs]").fill("1")
    form.locator("input[name=tokens]").fill("16")
    form.locator("button").click()
    expect(page.locator("#ab-verdict")).to_contain_text("verdict:", timeout=60_000)
    status = page.locator("#ab-status")
    expect(status).to_contain_text("no run decoded a token")
    assert "None" not in status.text_content()


def test_tune_panel_runs_a_tune_and_shows_its_front(live, open_page):
    page = open_page(live.url, width=1440)
    form = page.locator("form.tune-start")
    form.locator("input[name=trials]").fill("3")
    form.locator("input[name=tokens]").fill("8")
    form.locator("input[name=space]").fill("prefetch=off|stale")
    form.locator("button").click()
    expect(page.locator("#tune-best")).to_contain_text("best so far: trial", timeout=60_000)
    expect(page.locator("#tune-status")).not_to_have_attribute("hx-trigger", "every 1s",
                                                               timeout=60_000)
    expect(page.locator("#tune-trials tbody tr")).to_have_count(3)
    in_main_view(page, "tune-status")
    job = live.controller.tune.job
    expect(page.locator("#tune-chart svg")).to_be_visible()
    assert chart_marks(page, "tune-chart", "tune-front") == len(job.front) > 0
    shot(page, "dashboard-tune")


def test_page_reconnects_after_a_server_restart(controller, open_page):
    servers = serve(controller)
    live = next(servers)
    # while the server is down, each reconnect attempt is refused, and Chromium and the
    # websocket extension log it
    page = open_page(live.url, allowed=(r"ERR_CONNECTION_REFUSED", r"^\[object Event\]$"))
    port = int(live.url.rsplit(":", 1)[1])
    servers.close()  # uvicorn shuts down; the socket closes with 1012
    expect(page.locator("#connection")).to_have_text("disconnected, reconnecting")
    for again in serve(controller, port=port):
        expect(page.locator("#connection")).to_have_text("connected", timeout=20_000)
        tokens = number(page, "#st-tokens")
        again.wait_tokens(10)
        page.wait_for_function(f"{TOKENS_SHOWN} > {tokens}")


@pytest.fixture(scope="module")
def model64(tmp_path_factory) -> Path:
    recipe = dataclasses.replace(synth.TINY, num_layers=64, name="strata-tiny-64x16")
    return synth.write(recipe, tmp_path_factory.mktemp("models") / "tiny64")


@pytest.mark.perf  # its bounds are on rates and latencies this machine reaches
def test_64_layers_at_10_updates_per_second(model64, open_page):
    controller = start_controller({"model": str(model64), "expert_cache": 256,
                                   "io_workers": 3, "io_urgent": 1})
    try:
        for live in serve(controller):
            page = open_page(live.url)
            expect(page.locator("#layers tbody tr")).to_have_count(64)
            show_columns(page, "experts")
            page.locator("#layers th[data-col=sync_misses]").click()  # sorting costs too
            page.wait_for_function("tunerStats.messages >= 5")
            page.evaluate("tunerStats.swapMs = []; tunerStats.latencyMs = [];"
                          "tunerStats.messages = 0")
            seconds = 8
            frames = page.evaluate(f"""() => new Promise(done => {{
                const times = []; const end = performance.now() + {seconds * 1000};
                function tick(t) {{ times.push(t); if (t < end) requestAnimationFrame(tick);
                                    else done(times); }}
                requestAnimationFrame(tick); }})""")
            stats = page.evaluate("({messages: tunerStats.messages, swapMs: tunerStats.swapMs, "
                                  "latencyMs: tunerStats.latencyMs})")
            shot(page, "dashboard-64-layers")
            page.close()  # before its server stops
    finally:
        controller.session.stop()
    gaps = sorted(b - a for a, b in itertools.pairwise(frames))
    swap, latency = sorted(stats["swapMs"]), sorted(stats["latencyMs"])

    def p95(xs):
        return xs[int(0.95 * (len(xs) - 1))]

    rate = stats["messages"] / seconds
    print(f"\n64 layers at 10 updates/s: {rate:.1f} updates/s received; swap time per update "
          f"median {statistics.median(swap):.1f} ms, p95 {p95(swap):.1f} ms; update latency "
          f"(server render -> swapped) median {statistics.median(latency):.1f} ms, p95 "
          f"{p95(latency):.1f} ms; frame time median {statistics.median(gaps):.1f} ms, p95 "
          f"{p95(gaps):.1f} ms, longest {max(gaps):.1f} ms")
    # The page paces the stream (one update in flight), so a slow machine gets fewer
    # updates but never stale ones; the bounds are loose, the print has the figures.
    assert rate > 2
    assert p95(latency) < 1000
