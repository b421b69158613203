"""A tune on the running server: POST /api/tune starts one from the live settings, GET
reads it, stop ends it at the next token; the live session is paused meanwhile and
an A/B cannot start beside it."""

from __future__ import annotations

import time

import httpx

from tests.control.shapes import assert_shaped
from tuner.control.answers import TuneStatus
from tuner.tune import run


def wait(url: str, until, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = httpx.get(f"{url}/api/tune").json()
        if until(job):
            return job
        assert time.monotonic() < deadline, f"tune not there yet: {job}"
        time.sleep(0.1)


def test_a_tune_runs_on_the_server_and_pauses_the_live_session(live, hold):
    release = hold(run, "tune")  # the tune runs once the test releases it
    assert httpx.get(f"{live.url}/api/tune").status_code == 404
    r = httpx.post(f"{live.url}/api/tune", json={"trials": 3, "tokens": 8,
                                                 "space": "prefetch=off|stale"})
    assert r.status_code == 202, r.text
    assert r.json()["space"]["prefetch"] == "off|stale"
    assert_shaped(r.json(), TuneStatus)
    assert live.session.state == "paused"  # a tune and the live session never measure together
    busy = httpx.post(f"{live.url}/api/ab", json={"a": "baseline", "b": "2q"})
    assert busy.status_code == 409 and "a tune is running" in busy.json()["detail"]
    again = httpx.post(f"{live.url}/api/tune", json={"trials": 1})
    assert again.status_code == 409 and "already running" in again.json()["detail"]
    release.set()
    job = wait(live.url, lambda j: j["state"] != "running")
    assert job["state"] == "done", job
    assert_shaped(live.controller.tune_status(), TuneStatus)  # as the route has it to serve
    assert [r["number"] for r in job["rows"]] == [0, 1, 2]
    assert job["best"]["number"] in job["front"]
    assert all(r["worker"] or r["rejected"] for r in job["rows"])
    deadline = time.monotonic() + 10
    while live.session.state != "running":  # resumed once the tune is over
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_stop_ends_the_tune_after_the_running_trial(live):
    assert httpx.post(f"{live.url}/api/tune/stop").status_code == 404
    r = httpx.post(f"{live.url}/api/tune", json={"trials": 50, "tokens": 8})
    assert r.status_code == 202
    wait(live.url, lambda j: j["rows"])
    stopped = httpx.post(f"{live.url}/api/tune/stop").json()
    assert stopped["state"] in ("stopping", "stopped")
    job = wait(live.url, lambda j: j["state"] == "stopped")
    assert 1 <= len(job["rows"]) < 50 and job["running"] is None


def test_bad_tune_requests_name_what_is_allowed(live):
    api = f"{live.url}/api/tune"
    bad = httpx.post(api, json={"space": "prefetch_max=9:2"})
    assert bad.status_code == 422 and "low 9 must be below high 2" in bad.text
    bad = httpx.post(api, json={"fix": "nope=1"})
    assert bad.status_code == 422 and "unknown knob 'nope'" in bad.text
    assert httpx.post(api, json={"trials": 0}).status_code == 422
    assert httpx.post(api, json={"objective": "fast"}).status_code == 422
    for limits in ({"max_kl": -1}, {"min_agreement": 101}):
        assert httpx.post(api, json=limits).status_code == 422
    bad = httpx.post(api, json={"fix": "workload=chat-cold"})
    assert bad.status_code == 422 and "the live settings on the server" in bad.text
    assert live.session.state == "running"


def test_a_gated_tune_searches_the_lossy_knobs(live):
    r = httpx.post(f"{live.url}/api/tune", json={"trials": 1, "tokens": 8, "max_kl": 0.01,
                                                 "min_agreement": 90})
    assert r.status_code == 202, r.text
    job = r.json()
    assert (job["max_kl"], job["min_agreement"]) == (0.01, 90)
    assert {"moce_bonus", "drop_cold"} <= set(job["space"])
    assert wait(live.url, lambda j: j["state"] != "running")["state"] == "done"
