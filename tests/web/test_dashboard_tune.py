"""The dashboard's tune panel without a browser: start through the fragment, poll, read
the trial table, the chart of the trials and the Pareto front and the best so far; stop."""

from __future__ import annotations

import time

import httpx

from tests.charts.test_charts import marks


def poll(url: str, timeout: float = 120.0) -> str:
    """The status fragment once it has stopped polling itself (the tune is over)."""
    deadline = time.monotonic() + timeout
    while True:
        html = httpx.get(f"{url}/ui/tune").text
        if 'hx-trigger="every 1s"' not in html:
            return html
        assert time.monotonic() < deadline, html
        time.sleep(0.2)


def test_page_has_the_tune_form(live):
    html = httpx.get(f"{live.url}/").text
    assert 'hx-post="/ui/tune"' in html and 'id="tune-status"' in html
    assert "The live session is paused during the tune" in html


def test_tune_from_the_panel(live):
    r = httpx.post(f"{live.url}/ui/tune", data={"trials": "3", "tokens": "8", "space": "",
                                                "fix": "", "objective": "ms"},
                   headers=live.page_headers)
    assert r.status_code == 200
    assert 'hx-trigger="every 1s"' in r.text and 'id="tune-stop"' in r.text
    assert "<svg" not in r.text  # no chart drawn while trials are timed
    html = poll(live.url)
    job = live.controller.tune.job
    assert job.state == "done", job.error
    assert html.count('<tr class="') == 3 and 'id="tune-stop"' not in html
    best = job.best
    assert f"best so far: trial {best['number']}" in html
    svg = html[html.index("<svg"):html.index("</svg>") + 6]  # drawn now the tune is over
    assert marks(svg, "tune-front") == len(job.front)
    assert marks(svg, "tune-trials") == sum(r["state"] == "complete" for r in job.rows)
    for r in job.rows:
        assert f"<td>{r['number']}</td>" in html


def test_stop_from_the_panel(live):
    httpx.post(f"{live.url}/ui/tune", data={"trials": "40", "tokens": "8"},
               headers=live.page_headers)
    deadline = time.monotonic() + 60
    while not live.controller.tune.job.rows:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    r = httpx.post(f"{live.url}/ui/tune/stop", headers=live.page_headers)
    assert "stopping" in r.text or "stopped" in r.text
    html = poll(live.url)
    assert live.controller.tune.job.state == "stopped" and "stopped" in html


def test_bad_tune_input_gives_a_message_and_starts_nothing(live):
    for data, message in (({"trials": "0", "tokens": "8"}, "trials = 0"),
                          ({"trials": "2", "tokens": "many"}, "tokens must be"),
                          ({"trials": "2", "tokens": "8", "space": "prefetch=x|y"},
                           "expected one of off, prev, stale")):
        r = httpx.post(f"{live.url}/ui/tune", data=data, headers=live.page_headers)
        assert r.status_code == 200 and 'class="error"' in r.text and message in r.text
    assert live.controller.tune.job is None
    assert live.session.state == "running"
