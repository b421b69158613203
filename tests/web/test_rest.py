"""The REST API against a real server: settings, session, metrics, auth, limits, bad input."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.web.live import serve
from tuner.knobs import KNOBS
from tuner.vocabulary.counters import COUNTERS, HEADLINES


def test_knobs_are_the_knob_table(live):
    got = httpx.get(f"{live.url}/api/knobs").json()
    assert got == [k.as_dict() for k in KNOBS]


def test_patch_takes_names_and_env_aliases(live):
    before = httpx.get(f"{live.url}/api/settings").json()
    r = httpx.patch(f"{live.url}/api/settings",
                    json={"moce_bonus": 0.5, "STRATA_METAL_DECODE_2Q": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["version"] == before["version"] + 1
    assert body["settings"]["moce_bonus"] == 0.5 and body["settings"]["cache_policy"] == "2q"
    assert body["state"] == "running"
    assert live.session.applied_version == body["version"]
    assert live.session.cfg.moce_bonus == 0.5


def test_rejection_names_every_bad_knob_and_applies_nothing(live):
    good = httpx.patch(f"{live.url}/api/settings", json={"prefetch": "prev"}).json()
    r = httpx.patch(f"{live.url}/api/settings",
                    json={"moce_bonus": 0.2, "moce_protect": 99, "STRATA_PREFETCH": "all",
                          "no_such_knob": 1})
    assert r.status_code == 422
    problems = r.json()["detail"]["problems"]
    assert set(problems) == {"moce_protect", "prefetch", "no_such_knob"}
    assert "STRATA_METAL_MOCE_PROTECT" in problems["moce_protect"]
    assert "99" in problems["moce_protect"] and "[0, 64]" in problems["moce_protect"]
    assert "off, prev, stale" in problems["prefetch"]
    after = httpx.get(f"{live.url}/api/settings").json()
    assert after == good  # moce_bonus=0.2 was valid but not applied either
    live.wait_tokens(2)  # and the engine keeps decoding


BAD_BODIES = [
    pytest.param({"moce_bonus": "lots"}, 422, "moce_bonus", id="wrong-type"),
    pytest.param({"moce_bonus": -1}, 422, "moce_bonus", id="below-range"),
    pytest.param({"prefetch_max": 513}, 422, "prefetch_max", id="above-range"),
    pytest.param({"decode_2q": "maybe"}, 422, "decode_2q", id="not-a-flag"),
    pytest.param({"STRATA_NOPE": 1}, 422, "STRATA_NOPE", id="unknown-alias"),
    pytest.param({"io_urgent": 3}, 422, "settings", id="cross-field"),
    pytest.param({"model": "/nonexistent/model"}, 422, "model", id="missing-model"),
    pytest.param({"routing": "/nonexistent/trace.npz"}, 422, "routing", id="missing-trace"),
    pytest.param([1, 2], 422, "settings", id="not-an-object"),
    pytest.param("text", 422, "settings", id="a-string"),
]


@pytest.mark.parametrize("body,status,key", BAD_BODIES)
def test_bad_settings_bodies(live, body, status, key):
    before = live.controller.state()
    r = httpx.patch(f"{live.url}/api/settings", json=body)
    assert r.status_code == status, r.text
    assert key in r.json()["detail"]["problems"]
    assert live.controller.state().settings == before.settings
    assert live.session.applied_version == before.version
    live.wait_tokens(2)


@pytest.mark.parametrize("content", [b"{bad", b"\x00", b'{"moce_bonus": 1,}'])
def test_malformed_json_is_400(live, content):
    r = httpx.patch(f"{live.url}/api/settings", content=content,
                    headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert "not valid JSON" in r.json()["detail"]


def test_huge_bodies_are_413(live):
    huge = b'{"moce_bonus": 1' + b" " * 70_000 + b"}"
    r = httpx.patch(f"{live.url}/api/settings", content=huge,
                    headers={"content-type": "application/json"})
    assert r.status_code == 413 and "65536" in r.json()["detail"]

    def chunks():  # no Content-Length: the limit is counted as the body streams in
        for _ in range(100):
            yield b" " * 1024

    r = httpx.patch(f"{live.url}/api/settings", content=chunks(),
                    headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert live.session.applied_version == 1


def test_pause_resume_reset(live):
    url = f"{live.url}/api/session"
    assert httpx.post(f"{url}/pause").json() == {"state": "paused"}
    paused_at = live.session.tokens
    assert httpx.post(f"{url}/reset").json() == {"state": "paused"}
    assert httpx.get(f"{live.url}/api/snapshot").json()["tokens"] == 0 <= paused_at
    assert httpx.post(f"{url}/resume").json() == {"state": "running"}
    live.wait_tokens(3)
    assert httpx.post(f"{url}/stop").status_code == 422


def test_snapshot_is_the_session_snapshot(live):
    snap = httpx.get(f"{live.url}/api/snapshot").json()
    assert snap["schema"] == 1
    assert len(snap["layers"]) == snap["model"]["layers"] == 4
    assert snap["settings"] == live.controller.settings.model_dump(mode="json")


def test_metrics_has_every_counter_per_layer(live):
    live.wait_tokens(5)
    r = httpx.get(f"{live.url}/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    lines = r.text.splitlines()
    for col in COUNTERS:
        name = f"tuner_layer_{col.name}_total"
        assert f"# TYPE {name} counter" in lines
        assert {ln.split("{")[1].split("}")[0] for ln in lines if ln.startswith(name + "{")} \
            == {f'layer="{i}"' for i in range(4)}
    lookups = sum(float(ln.split()[-1]) for ln in lines
                  if ln.startswith("tuner_layer_lookups_total{"))
    assert lookups > 0
    assert "tuner_settings_version 1" in lines
    for name in ("tuner_phase_routings_total", "tuner_phase_tokens"):  # per phase too
        assert {ln.split("{")[1].split("}")[0] for ln in lines if ln.startswith(name + "{")} \
            == {'phase="prefill"', 'phase="decode"'}


def test_token_is_required_everywhere(controller):
    for live in serve(controller, token="s3cret"):
        for path in ("/api/knobs", "/api/settings", "/api/snapshot", "/api/presets", "/metrics",
                     "/openapi.json"):
            r = httpx.get(f"{live.url}{path}")
            assert r.status_code == 401, path
            assert "token" in r.json()["detail"]
            assert httpx.get(f"{live.url}{path}", params={"token": "wrong"}).status_code == 401
            assert httpx.get(f"{live.url}{path}", params={"token": "s3cret"}).status_code == 200
            assert httpx.get(f"{live.url}{path}",
                             headers={"Authorization": "Bearer s3cret"}).status_code == 200
        r = httpx.patch(f"{live.url}/api/settings", json={"moce_bonus": 1.0})
        assert r.status_code == 401 and live.session.applied_version == 1


def test_an_empty_change_makes_no_version(live):
    before = live.controller.state()
    r = httpx.patch(f"{live.url}/api/settings", json={})
    assert r.status_code == 200 and r.json()["version"] == before.version
    same = {"moce_bonus": before.settings["moce_bonus"]}
    assert httpx.patch(f"{live.url}/api/settings", json=same).json()["version"] \
        == before.version
    assert live.session.snapshot()["changes"] == []  # no change marker for no change


def test_metrics_has_the_headline_figures_of_both_spans(live):
    live.wait_tokens(5)
    lines = httpx.get(f"{live.url}/metrics").text.splitlines()
    for h in HEADLINES:
        assert f"# TYPE tuner_{h.key} gauge" in lines
        assert any(ln.startswith(f'tuner_{h.key}{{span="window"}}') for ln in lines) \
            or h.key.endswith("usefulness") or h.key in ("top1_agreement", "quality_kl")
        # none measured with prefetch off or the quality probe off (quality_every = 0)
    assert any(ln.startswith('tuner_hit_rate{span="cumulative"} ') for ln in lines)


def test_experts_and_curve(live):
    live.wait_tokens(10)
    live.session.pause()
    deadline = time.monotonic() + 10
    while (data := httpx.get(f"{live.url}/api/experts").json())["resident"] is None:
        assert time.monotonic() < deadline, "no residency map"
        time.sleep(0.05)
    snap = httpx.get(f"{live.url}/api/snapshot").json()
    assert [sum(row) for row in data["routings"]] == [r["routings"] for r in
                                                      snap["window"]["layers"]]
    assert [sum(row) for row in data["resident"]] == [r["resident"] for r in snap["layers"]]
    whole = httpx.get(f"{live.url}/api/experts", params={"view": "cumulative"}).json()
    assert whole["view"] == "cumulative" and whole["tokens"] == snap["tokens"]
    assert httpx.get(f"{live.url}/api/experts", params={"view": "all"}).status_code == 422
    while (r := httpx.get(f"{live.url}/api/curve")).status_code == 204:
        assert time.monotonic() < deadline + 50, "no curve"
        time.sleep(0.1)
    curve = r.json()
    assert curve["arena"] == 16 and 16 in curve["sizes"] and curve["policy"] == "lru"
    assert len(curve["hit_rate"]["opt"]) == len(curve["sizes"])
    # Belady's MIN is the bound: no online policy beats it at any size
    for policy in ("lru", "2q"):
        assert all(o >= p for o, p in zip(curve["hit_rate"]["opt"],
                                           curve["hit_rate"][policy]))
def test_budgets_from_the_window(live):
    session = live.controller.session
    session.pause()
    assert session.reset_counters(wait=30)
    r = httpx.post(f"{live.url}/api/budgets", json={})
    assert r.status_code == 422
    assert "the window holds no routings yet" in r.json()["detail"]["problems"]["arena_budgets"]
    session.resume()
    assert session.wait_tokens(10, timeout=30)
    r = httpx.post(f"{live.url}/api/budgets", json={"weights": "hits"})
    out = r.json()
    assert r.status_code == 200 and sum(out["quotas"]) == 16 and "version" not in out
    assert out["replay"]["budgets"]["hits"] >= out["replay"]["even"]["hits"]
    assert live.controller.settings.arena_split == "global"  # computed, not applied
    assert httpx.post(f"{live.url}/api/budgets", json={"weights": "most"}).status_code == 422
    r = httpx.post(f"{live.url}/ui/budgets", headers=live.page_headers, data={"weights": "hits"})
    assert r.status_code == 200 and "settings v" in r.text and "with these quotas" in r.text
    settings = live.controller.settings
    assert settings.arena_split == "layers" and sum(settings.arena_budgets) == 16
