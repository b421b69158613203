"""The dashboard's server side without a browser: page, fragments, live rendering."""

from __future__ import annotations

import asyncio
import re

import httpx
import websockets
from markupsafe import escape as html_escape

from tests.web.live import serve
from tuner.engine.counters import COUNTERS, DERIVED
from tuner.knobs import KNOBS
from tuner.web.page import HEAT_LEVELS, PageView, fmt, heat


def test_page_has_a_field_per_knob_and_a_column_per_counter(live):
    html = httpx.get(f"{live.url}/").text
    for k in KNOBS:
        assert f'id="in-{k.name}"' in html
        assert html_escape(k.help) in html  # shown on hover
    for col in (*COUNTERS, *DERIVED):
        assert f'data-col="{col.name}"' in html
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
    r = httpx.post(f"{live.url}/ui/knobs/decode_2q", data={"value": "true"},
                   headers=live.page_headers)
    assert "checked" in r.text and "error" not in r.text
    assert live.controller.settings.decode_2q is True
    assert httpx.post(f"{live.url}/ui/knobs/warp", data={"value": "1"},
                      headers=live.page_headers).status_code == 404


def test_page_and_fragments_need_the_token_but_assets_do_not(controller):
    for live in serve(controller, token="pg"):
        assert httpx.get(f"{live.url}/").status_code == 401
        html = httpx.get(f"{live.url}/", params={"token": "pg"}).text
        assert "token=pg" in html and "Bearer pg" in html
        assert httpx.post(f"{live.url}/ui/knobs/decode_2q", data={"value": "1"},
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
            await ws.send('{"ready": true, "view": "cumulative"}')
            second = await asyncio.wait_for(ws.recv(), 5)
            return first, held, second

    first, held, second = asyncio.run(main())
    assert held is None
    assert first.startswith('<tbody id="layers-body">') and 'id="knobs"' in first
    assert "window (" in first and "cumulative (" in second
    assert 'id="knobs"' not in second  # the settings version did not move


def test_page_view_sends_the_knob_panel_only_when_the_version_moves(live):
    view = PageView(lambda settings: '<div id="knobs"></div>', version=1)
    snapshot = live.session.snapshot()
    assert 'id="knobs"' not in view.render(snapshot)
    live.controller.change({"moce_bonus": 1.0})
    assert 'id="knobs"' in view.render(live.session.snapshot())
    assert 'id="chart-changes"' not in view.render(live.session.snapshot())


def test_formatting_and_heat():
    assert fmt(None) == "-" and fmt(3) == "3" and fmt(2.5) == "2.5" and fmt(2.0) == "2"
    assert fmt(3 * 2**20, "bytes") == "3.0 MiB" and fmt(512, "bytes") == "512"
    assert heat([0, 5, 10, None]) == [0, HEAT_LEVELS // 2, HEAT_LEVELS - 1, None]
    assert heat([4, 4]) == [0, 0] and heat([None]) == [None]


def test_the_conversation_is_shown_as_text(live):
    live.wait_tokens(3)
    html = PageView(lambda settings: "", None).render(live.session.snapshot())
    text = live.session.snapshot()["text"]
    assert '<div id="text">' in html and html_escape(text["prompt"]) in html
    snap = dict(live.session.snapshot(), text=None)
    assert "no tokenizer.json" in PageView(lambda settings: "", None).render(snap)
