"""The dashboard's server side without a browser: page, fragments, live rendering."""

from __future__ import annotations

import asyncio
import re

import httpx
import websockets
from markupsafe import escape as html_escape

from tests.web.live import serve
from tuner.format import ALL, COLUMN_SETS, COLUMNS, columns_of, figure
from tuner.knobs import KNOBS
from tuner.vocabulary.counters import HEADLINES
from tuner.web.page import PageView, head_units, heat, layer_table
from tuner.web.render import HEAT_LEVELS, macros

LIVE = macros("live.html", "")


def layer_html(rows, column_set: str) -> str:
    return LIVE.head(head_units(column_set)) + LIVE.body(layer_table(rows, column_set))


def test_page_has_a_field_per_knob_a_chart_per_headline_and_every_column_set(live):
    html = httpx.get(f"{live.url}/").text
    for k in KNOBS:
        assert f'id="in-{k.name}"' in html
        assert html_escape(k.help) in html  # shown on hover
    for h in HEADLINES:
        assert f'data-key="{h.key}" data-title="{h.label}" data-unit="{h.column.unit}"' in html
    for column_set in COLUMN_SETS:
        assert f"<option{' selected' if column_set == COLUMN_SETS[0] else ''}>" \
               f"{html_escape(column_set)}</option>" in html
    assert html.count('class="knob restart"') == sum(k.restart for k in KNOBS)
    assert "ws-connect=\"/ui/ws?rate=10.0&amp;version=1\"" in html
    for asset in re.findall(r'(?:src|href)="(/static/[^"]+)"', html):
        assert httpx.get(f"{live.url}{asset}").status_code == 200, asset


def test_a_rejected_field_comes_back_with_the_message_and_the_old_value(live):
    r = httpx.post(f"{live.url}/ui/knobs/moce_bonus", data={"value": "11"},
                   headers=live.page_headers)
    assert r.status_code == 200
    assert "moce_bonus (STRATA_METAL_MOCE_BONUS) = 11.0 is not allowed" in r.text
    assert 'value="0.0"' in r.text and 'class="knob rejected"' in r.text
    r = httpx.post(f"{live.url}/ui/knobs/prefetch_touch", data={"value": "true"},
                   headers=live.page_headers)
    assert "checked" in r.text and "error" not in r.text
    assert live.controller.settings.prefetch_touch is True
    assert httpx.post(f"{live.url}/ui/knobs/warp", data={"value": "1"},
                      headers=live.page_headers).status_code == 404


def test_a_field_of_numbers_comes_back_as_the_text_it_was_typed_as(live):
    r = httpx.post(f"{live.url}/ui/knobs/arena_budgets", data={"value": "7,3,4,2"},
                   headers=live.page_headers)
    assert 'value="7,3,4,2"' in r.text and "error" not in r.text
    assert live.controller.settings.arena_budgets == (7, 3, 4, 2)


def test_page_and_fragments_need_the_token_but_assets_do_not(controller):
    for live in serve(controller, token="pg"):
        assert httpx.get(f"{live.url}/").status_code == 401
        html = httpx.get(f"{live.url}/", params={"token": "pg"}).text
        assert "token=pg" in html and "Bearer pg" in html
        assert httpx.post(f"{live.url}/ui/knobs/prefetch_touch", data={"value": "1"},
                          headers=live.page_headers).status_code == 401
        assert httpx.get(f"{live.url}/static/htmx-2.0.11.min.js").status_code == 200


def test_live_stream_sends_html_one_update_at_a_time(live):
    async def main():
        async with websockets.connect(f"{live.ws_url.replace('/ws', '/ui/ws')}?rate=30",
                                      proxy=None, origin=live.url) as ws:
            first = await asyncio.wait_for(ws.recv(), 5)
            held = None
            try:  # paced: nothing more until the page says it is ready
                held = await asyncio.wait_for(ws.recv(), 0.5)
            except TimeoutError:
                pass
            await ws.send('{"ready": true, "view": "cumulative", "columns": "ms"}')
            second = await asyncio.wait_for(ws.recv(), 5)
            return first, held, second

    first, held, second = asyncio.run(main())
    assert held is None
    assert 'data-col="hit_rate"' in first and 'data-col="stall_ms"' not in first
    assert second.startswith('<thead id="layers-head">')  # the set changed: a new header
    assert 'data-col="stall_ms"' in second and 'data-col="hit_rate"' not in second
    assert first.startswith('<thead id="layers-head">') and 'id="knobs"' in first
    assert "window (" in first and "cumulative (" in second
    assert 'id="knobs"' not in second  # the settings version did not move


def test_page_view_sends_the_knob_panel_only_when_the_version_moves(live):
    view = PageView(LIVE, version=1)
    snapshot = live.session.snapshot()
    assert 'id="knobs"' not in view.render(snapshot)
    live.controller.change({"moce_bonus": 1.0})
    assert 'id="knobs"' in view.render(live.session.snapshot())
    assert 'id="chart-changes"' not in view.render(live.session.snapshot())


def test_the_layer_table_shows_a_column_set_with_its_unit_once(live):
    live.wait_tokens(3)
    rows = live.session.snapshot()["window"]["layers"]
    bytes_only = layer_html(rows, "bytes")
    names = re.findall(r'<th data-col="(\w+)" title=', bytes_only)
    assert names == [c.name for c in columns_of("bytes")[1:]]
    assert bytes_only.count('<th class="unit"') == 1 and ">bytes</th>" in bytes_only
    # every figure is written by the one formatter, and carries its value for sorting
    first = rows[0]
    cell = f'data-v="{first["bytes_demand"]}">{figure(first["bytes_demand"], "bytes")}</td>'
    assert cell in bytes_only
    everything = layer_html(rows, ALL)
    assert all(f'data-col="{c.name}"' in everything for c in COLUMNS)


def test_heat_levels():
    assert heat([0, 5, 10, None]) == [0, HEAT_LEVELS // 2, HEAT_LEVELS - 1, None]
    assert heat([4, 4]) == [0, 0] and heat([None]) == [None]


def test_the_conversation_is_shown_as_text(live):
    live.wait_tokens(3)
    snap = live.session.snapshot()  # one snapshot: the engine may start a new turn meanwhile
    html = PageView(LIVE, None).render(snap)
    assert '<span id="st-workload">corpus, turn 1</span>' in html
    assert '<div id="phases">' in html and "<b>prefill</b>" in html and "ttft_ms" in html
    assert '<div id="text">' in html and html_escape(snap["text"]["prompt"]) in html
    snap = dict(snap, text=None)
    assert "no tokenizer.json" in PageView(LIVE, None).render(snap)


def test_the_engines_notes_are_shown_and_say_how_to_read_the_predictors_under_drop(live):
    view = PageView(LIVE, None)
    assert '<ul id="notes" role="status"></ul>' in view.render(live.session.snapshot())
    live.controller.change({"drop_cold": 0.1})
    html = view.render(live.session.snapshot())
    assert "read prev and stale against ctrl" in html
    assert html_escape("quality_every > 0 measures") in html
