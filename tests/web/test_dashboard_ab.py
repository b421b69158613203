"""The dashboard's A/B panel without a browser: start through the fragment, poll, read."""

from __future__ import annotations

import time

import httpx


def poll(url: str, timeout: float = 60.0) -> str:
    """The status fragment once it has stopped polling itself (the A/B is over)."""
    deadline = time.monotonic() + timeout
    while True:
        html = httpx.get(f"{url}/ui/ab").text
        if 'hx-trigger="every 1s"' not in html:
            return html
        assert time.monotonic() < deadline, html
        time.sleep(0.2)


def test_page_has_the_ab_form(live):
    html = httpx.get(f"{live.url}/").text
    assert 'hx-post="/ui/ab"' in html
    assert "<option selected>baseline</option>" in html
    assert "the live session is paused during the A/B" in html


def test_ab_from_the_panel(live):
    r = httpx.post(f"{live.url}/ui/ab", data={"a": "baseline", "b": "2q", "pairs": "1",
                                              "tokens": "16"}, headers=live.page_headers)
    assert r.status_code == 200
    assert 'hx-trigger="every 1s"' in r.text and "of 3" in r.text
    assert "the live session is paused" in r.text
    busy = httpx.post(f"{live.url}/ui/ab", data={"a": "baseline", "b": "2q", "pairs": "1",
                                                 "tokens": "16"}, headers=live.page_headers)
    assert "already running" in busy.text
    html = poll(live.url)
    job = live.controller.ab.job
    assert job.state == "done", job.error
    assert 'id="ab-verdict"' in html and job.result["verdict"].split(":")[0] in html
    assert html.count("<td><code title=") == 3  # one row per run, with its output hash
    for run in job.runs:
        assert run["output_hash"] in html
    assert "cache_policy lru -> 2q" in html
    assert f"{job.result['drift']:+.3f}" in html
    # 16 tokens are all the first prompt's: the note says so, and no figure reads "None"
    assert "note: no run decoded a token" in html and "None" not in html


def test_ab_bad_input_gives_a_message_and_starts_nothing(live):
    for data, message in (
            ({"a": "baseline", "b": "nope", "pairs": "1", "tokens": "16"}, "nope: no preset of"),
            ({"a": "../x", "b": "2q", "pairs": "1", "tokens": "16"}, "x"),
            ({"a": "baseline", "b": "2q", "pairs": "99", "tokens": "16"}, "pairs = 99"),
            ({"a": "baseline", "b": "2q", "pairs": "1", "tokens": "many"}, "tokens must be"),
            ({"a": "baseline", "b": "2q", "pairs": "1", "tokens": "16", "max_kl": "low"},
             "max_kl must be a number or empty"),
            ({"a": "baseline", "b": "2q", "pairs": "1", "tokens": "16",
              "min_agreement": "120"}, "min_agreement = 120.0: must be from 0 to 100")):
        r = httpx.post(f"{live.url}/ui/ab", data=data, headers=live.page_headers)
        assert r.status_code == 200 and 'class="error"' in r.text and message in r.text
    assert live.controller.ab.job is None
    assert live.session.state == "running"


def test_the_panel_shows_quality_per_run_and_arm_and_the_gate(live):
    data = {"a": "baseline", "b": "seed001-drop", "pairs": "1", "tokens": "32",
            "max_kl": "0", "min_agreement": ""}
    r = httpx.post(f"{live.url}/ui/ab", data=data, headers=live.page_headers)
    assert "quality gate: max KL 0.0, min top-1 off" in r.text
    html = poll(live.url)
    job = live.controller.ab.job
    assert job.state == "done", job.error
    assert "<th>KL</th><th>top-1 %</th>" in html
    assert html.count("<td>100.00</td>") >= 2  # the baseline's runs agree fully
    assert "reject B: rule quality fails on " in html and 'class="error"><b>verdict' in html
