"""Cross-site requests: what a page on another site can make a browser send (forms,
text/plain and body-less fetches, with that site's Origin or Referer, or with neither) is
refused on every route that changes state, and changes nothing."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.web.live import serve

EVIL = "http://evil.example"
FORM = "application/x-www-form-urlencoded"

# (method, path, body, content type): what the probe sent, and the rest of the
# state-changing routes
ROUTES = [
    ("POST", "/ui/knobs/moce_bonus", "value=9.25", FORM),
    ("POST", "/ui/knobs/expert_cache", "value=64", FORM),
    ("POST", "/ui/presets/2q/apply", "", FORM),
    ("POST", "/ui/presets", "name=planted&description=x", FORM),
    ("POST", "/ui/ab", "a=baseline&b=2q&pairs=1&tokens=8", FORM),
    ("POST", "/ui/tune", "trials=2&tokens=8", FORM),
    ("POST", "/ui/tune/stop", "", FORM),
    ("POST", "/api/presets/seed002-x4/apply", "", None),
    ("POST", "/api/session/pause", "", None),
    ("POST", "/api/session/reset", "", None),
    ("PATCH", "/api/settings", json.dumps({"moce_bonus": 9.25}), "text/plain"),
    ("POST", "/api/presets/planted", json.dumps({"description": "x"}), "text/plain"),
    ("POST", "/api/ab", json.dumps({"a": "baseline", "b": "2q", "pairs": 1}), "text/plain"),
    ("POST", "/api/tune", json.dumps({"trials": 2, "tokens": 8}), "text/plain"),
    ("POST", "/api/tune/stop", "", None),
    ("DELETE", "/api/presets/mine", "", None),
]
IDS = [f"{m} {p}" for m, p, _, _ in ROUTES]


def send(url: str, route, **headers) -> httpx.Response:
    method, path, body, content_type = route
    if content_type:
        headers["Content-Type"] = content_type
    return httpx.request(method, f"{url}{path}", content=body.encode(), headers=headers)


@pytest.fixture
def watched(live):
    """The live server with a user preset to delete, and a way to see that nothing moved."""
    httpx.post(f"{live.url}/api/presets/mine", json={"description": ""},
               timeout=30).raise_for_status()
    before = (live.controller.state(), live.session.snapshot()["tokens"])

    def unchanged() -> None:
        assert live.controller.state() == before[0]
        assert live.controller.ab.job is None
        assert live.controller.tune.job is None
        assert "planted" not in live.controller.store.names()
        assert "mine" in live.controller.store.names()
        assert live.session.state == "running"

    live.unchanged = unchanged
    return live


@pytest.mark.parametrize("route", ROUTES, ids=IDS)
def test_another_sites_origin_is_refused(watched, route):
    r = send(watched.url, route, Origin=EVIL)
    assert r.status_code == 403, r.text
    assert "evil.example" in r.json()["detail"]
    watched.unchanged()


@pytest.mark.parametrize("route", ROUTES, ids=IDS)
def test_another_sites_referer_is_refused(watched, route):
    r = send(watched.url, route, Referer=f"{EVIL}/attack.html")
    assert r.status_code == 403, r.text
    watched.unchanged()


@pytest.mark.parametrize("route", [r for r in ROUTES if r[2] or r[1].startswith("/ui/")],
                         ids=[i for i, r in zip(IDS, ROUTES) if r[2] or r[1].startswith("/ui/")])
def test_forms_without_origin_are_refused(watched, route):
    """A browser that sends no Origin (an old one, or a privacy setting) still cannot post
    a form: the page's routes need an Origin or Referer, the API needs JSON."""
    r = send(watched.url, route)
    assert r.status_code == 403, r.text
    watched.unchanged()


def test_the_pages_own_requests_pass(live):
    """The same requests from the page itself (its Origin, htmx's header) are applied: the
    refusals above are about where a request comes from, not what it asks."""
    r = httpx.post(f"{live.url}/ui/knobs/moce_bonus", data={"value": "9.25"},
                   headers=live.page_headers)
    assert r.status_code == 200 and live.controller.settings.moce_bonus == 9.25
    r = httpx.post(f"{live.url}/ui/presets", data={"name": "kept"}, headers=live.page_headers)
    assert r.status_code == 200 and "kept" in live.controller.store.names()
    r = httpx.patch(f"{live.url}/api/settings", json={"moce_bonus": 1.0},
                    headers={"Origin": live.url})
    assert r.status_code == 200 and r.json()["settings"]["moce_bonus"] == 1.0
    r = httpx.post(f"{live.url}/api/session/pause", headers={"Referer": f"{live.url}/"})
    assert r.json() == {"state": "paused"}


def test_a_token_does_not_let_another_site_in(controller):
    """On a token-protected bind the token is in the page's URL: another site that learnt
    it is still refused by its Origin."""
    for live in serve(controller, token="s3cret"):
        auth = {"Authorization": "Bearer s3cret"}
        for route in ROUTES[:3] + ROUTES[8:9]:
            assert send(live.url, route, Origin=EVIL, **auth).status_code == 403
        r = httpx.patch(f"{live.url}/api/settings", json={"moce_bonus": 1.0},
                        headers={**auth, "Origin": live.url})
        assert r.status_code == 200
