"""Every request is strict and closed, as settings are: a switch is true/false or 0/1, a
count a whole number (or its text, from a form), and a field the request does not have is
refused naming it and the fields it has, never ignored. An A/B's workload files are read
off the event loop: other requests are answered while they are checked."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest
import websockets

from tuner.control import models
from tuner.control.models import ABRequest, SaveRequest, TuneRequest, parse
from tuner.presets import Store
from tuner.settings import SettingsError


@pytest.mark.parametrize("model, body, field, says", [
    (SaveRequest, {"overwrite": "yes"}, "overwrite", "must be true or false (or 0 or 1)"),
    (SaveRequest, {"overwrite": 2}, "overwrite", "must be true or false (or 0 or 1)"),
    (TuneRequest, {"trials": True}, "trials", "must be a whole number"),
    (TuneRequest, {"trials": 4.0}, "trials", "must be a whole number"),
    (TuneRequest, {"max_kl": True}, "max_kl", "must be a number or empty"),
    (ABRequest, {"a": "baseline", "b": "2q", "pairs": "4.5"}, "pairs", "a whole number"),
    (TuneRequest, {"trails": 2, "tokns": 8}, "request",
     "unknown fields 'trails', 'tokns'; allowed: trials, tokens, objective, space, fix, "
     "max_kl, min_agreement"),
    (ABRequest, {"a": "baseline", "b": "2q", "pair": 2}, "request",
     "unknown field 'pair'; allowed: a, b, pairs, tokens, workloads, rules, max_kl, "
     "min_agreement"),
])
def test_loose_or_unknown_fields_are_refused_naming_what_is_allowed(model, body, field, says):
    with pytest.raises(SettingsError) as err:
        parse(model, body)
    assert says in err.value.problems[field]


@pytest.mark.parametrize("model, body, expected", [
    (SaveRequest, {"overwrite": 1}, {"overwrite": True}),
    (SaveRequest, {"overwrite": False}, {"overwrite": False}),
    (TuneRequest, {"trials": "4", "max_kl": ""}, {"trials": 4, "max_kl": None}),  # form text
    (ABRequest, {"a": "baseline", "b": "2q", "workloads": "chat-cold,shifted"},
     {"workloads": ["chat-cold", "shifted"]}),
])
def test_the_spellings_settings_take_still_pass(model, body, expected):
    assert parse(model, body).model_dump(include=set(expected)) == expected


def test_overwrite_yes_does_not_replace_a_user_preset(live):
    api = f"{live.url}/api/presets/mine"
    assert httpx.post(api, json={"description": "first"}).status_code == 201
    r = httpx.post(api, json={"description": "second", "overwrite": "yes"})
    assert r.status_code == 422 and "overwrite" in r.json()["detail"]["problems"]
    assert Store().get("mine").meta["description"] == "first"


def test_apply_yes_does_not_apply_budgets(live):
    live.wait_tokens(8)
    r = httpx.post(f"{live.url}/api/budgets", json={"apply": "yes"}, timeout=60)
    assert r.status_code == 422 and "apply" in r.json()["detail"]["problems"]
    assert live.controller.settings.arena_split != "layers"
    form = httpx.post(f"{live.url}/ui/budgets", headers=live.page_headers,
                      data={"weights": "hits"}, timeout=60)  # the page's form still applies
    assert form.status_code == 200 and "error" not in form.text


def test_a_misspelt_tune_starts_nothing(live):
    r = httpx.post(f"{live.url}/api/tune", json={"trails": 2, "tokns": 8})
    assert r.status_code == 422
    assert "unknown fields 'trails', 'tokns'" in r.json()["detail"]["problems"]["request"]
    assert live.session.state == "running" and live.controller.tune_status() is None
    r = httpx.post(f"{live.url}/api/ab", json={"a": "baseline", "b": "2q", "paris": 2})
    assert r.status_code == 422 and "unknown field 'paris'" in r.text
    assert live.controller.ab_status() is None


def test_a_websocket_settings_message_with_an_unknown_field_is_refused(live):
    async def main() -> dict:
        async with websockets.connect(live.ws_url, proxy=None) as ws:
            await ws.send(json.dumps({"type": "settings", "id": 7, "changes": {},
                                      "chagnes": {"moce_bonus": 1.0}}))
            while (msg := json.loads(await asyncio.wait_for(ws.recv(), 30)))["type"] == \
                    "snapshot":
                pass
            return msg

    answer = asyncio.run(main())
    assert answer["type"] == "error" and answer["id"] == 7
    assert "unknown field 'chagnes'; allowed: type, id, changes" in answer["problems"]["request"]


def test_an_ab_reads_its_workload_files_off_the_event_loop(live, tmp_path, monkeypatch):
    """The files are checked where the A/B starts, on a worker thread: while that check is
    held up, the server answers other requests."""
    reading, release = threading.Event(), threading.Event()

    def slow_check(name: str) -> None:
        reading.set()
        release.wait(60)

    monkeypatch.setattr(models, "check_workload", slow_check)
    workload = tmp_path / "w.jsonl"
    workload.write_text('{"prompt": "hello"}\n')
    answer: list[httpx.Response] = []
    post = threading.Thread(target=lambda: answer.append(httpx.post(
        f"{live.url}/api/ab", json={"a": "baseline", "b": "2q", "pairs": 1, "tokens": 8,
                                    "workloads": [str(workload)]}, timeout=90)))
    post.start()
    try:
        assert reading.wait(60)
        assert httpx.get(f"{live.url}/api/settings", timeout=30).status_code == 200
    finally:
        release.set()
        post.join(90)
    assert answer[0].status_code == 202, answer[0].text


def test_a_workload_file_over_its_limit_is_refused_unread(live, tmp_path):
    huge = tmp_path / "huge.jsonl"
    with open(huge, "wb") as f:
        f.truncate(17 << 20)  # sparse: 17 MiB that were never written
    r = httpx.post(f"{live.url}/api/ab", json={"a": "baseline", "b": "2q",
                                               "workloads": [str(huge)]}, timeout=60)
    assert r.status_code == 422
    assert "over the limit; a workload file is a regular file of at most 16 MiB" in \
        r.json()["detail"]["problems"]["workloads"]
