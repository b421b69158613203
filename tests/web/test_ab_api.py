"""A/B of two presets from the API: runs in the background, pauses the live session."""

from __future__ import annotations

import time

import httpx

from tests.control.shapes import assert_shaped
from tuner.control.answers import ABStatus
from tuner.measure import ab


def wait_done(url: str, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = httpx.get(f"{url}/api/ab").json()
        if job["state"] != "running":
            return job
        assert time.monotonic() < deadline, f"A/B still running: {job}"
        time.sleep(0.2)


def test_ab_of_two_presets(live, hold):
    release = hold(ab, "run_once")  # the A/B runs once the test releases it
    assert httpx.get(f"{live.url}/api/ab").status_code == 404
    r = httpx.post(f"{live.url}/api/ab", json={"a": "baseline", "b": "2q", "pairs": 1,
                                               "tokens": 16})
    assert r.status_code == 202, r.text
    assert r.json()["total_runs"] == 3
    assert_shaped(r.json(), ABStatus)
    assert live.session.state == "paused"  # the runs do not share the machine with it
    busy = httpx.post(f"{live.url}/api/ab", json={"a": "baseline", "b": "2q"})
    assert busy.status_code == 409 and "already running" in busy.json()["detail"]
    release.set()
    job = wait_done(live.url)
    assert job["state"] == "done", job
    assert_shaped(live.controller.ab_status(), ABStatus)  # as the route has it to serve
    assert [run["arm"] for run in job["runs"]] == ["A", "B", "A"]
    result = job["result"]
    assert {"verdict", "drift", "arms", "pairs"} <= result.keys()
    assert result["knob_diff"] == [{"knob": "cache_policy", "env": "STRATA_CACHE_POLICY",
                                    "a": "lru", "b": "2q"}]
    deadline = time.monotonic() + 10
    while live.session.state != "running":  # resumed once the A/B is over
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_ab_bad_input(live):
    api = f"{live.url}/api/ab"
    assert httpx.post(api, json={"a": "baseline", "b": "nope"}).status_code == 404
    assert httpx.post(api, json={"a": "baseline", "b": "../x"}).status_code in (400, 422)
    assert httpx.post(api, json={"a": "baseline", "b": "2q", "pairs": 99}).status_code == 422
    assert httpx.post(api, json={"a": "baseline"}).status_code == 422
    assert live.session.state == "running"


def test_ab_on_workloads_with_rules(live, tmp_path):
    r = httpx.post(f"{live.url}/api/ab", json={
        "a": "baseline", "b": "stale-prefetch", "pairs": 1, "tokens": 24,
        "workloads": ["chat-cold", "shifted"], "rules": "seed000"})
    assert r.status_code == 202, r.text
    assert (r.json()["total_runs"], r.json()["workloads"]) == (6, ["chat-cold", "shifted"])
    job = wait_done(live.url)
    assert job["state"] == "done", job
    result = job["result"]
    assert [w["workload"] for w in result["workloads"]] == ["chat-cold", "shifted"]
    assert {o["rule"] for o in result["outcomes"]} == {"sync-misses", "bonus0-output",
                                                       "exposed-waits"}
    assert result["verdict"].startswith(("reject B: rule", "no rule of seed000"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": 3}\n')
    api = f"{live.url}/api/ab"
    for body, says in (({"workloads": [str(bad)]}, "line 1: prompt must be"),
                       ({"workloads": ["nope"]}, "neither a built-in"),
                       ({"rules": "seed999"}, "seed000")):
        r = httpx.post(api, json={"a": "baseline", "b": "2q", **body})
        assert r.status_code == 422 and says in r.text, r.text
def test_ab_quality_gate_rejects_the_lossy_preset(live):
    r = httpx.post(f"{live.url}/api/ab", json={"a": "baseline", "b": "seed001-drop",
                                               "pairs": 1, "tokens": 32, "max_kl": 0.0})
    assert r.status_code == 202, r.text
    assert (r.json()["max_kl"], r.json()["min_agreement"]) == (0.0, None)
    job = wait_done(live.url)
    assert job["state"] == "done", job
    result = job["result"]
    a, b = result["arms"]["A"], result["arms"]["B"]
    assert (a["quality_kl"], a["top1_agreement"]) == (0.0, 100.0) and b["quality_kl"] > 0
    [gate] = [o for o in result["outcomes"] if o["rule"] == "quality"]
    assert (gate["phase"], gate["status"], gate["arm"]) == ("decode", "reject", "B")
    assert gate["reason"] == f"B: KL {b['quality_kl']:.4g} nats/token > max_kl 0"
    assert result["verdict"].startswith("reject B: rule quality fails on ")
    assert all(run["quality_kl"] is not None for run in job["runs"])


def test_ab_quality_limits_out_of_range_are_refused(live):
    api = f"{live.url}/api/ab"
    for limits in ({"max_kl": -1}, {"min_agreement": 101}):
        r = httpx.post(api, json={"a": "baseline", "b": "2q", **limits})
        assert r.status_code == 422, r.text
    assert live.session.state == "running"
