"""The slowest allowed emulation never wedges the session: a change, a pause or a stop
waiting for the token boundary cuts the current token's pacing short, so it takes effect
within that token; the bandwidth floor itself is enforced."""

from __future__ import annotations

import threading
import httpx
import pytest

from tests.web.live import serve, start_controller
from tuner.knobs import BY_NAME, MIN_GBPS

# Each read piece waits up to a second and the store runs at its floor: a token takes
# seconds, far longer than the controller's wait of one second below.
SLOW = {"io_jitter_ms": 1000.0, "ssd_gbps": MIN_GBPS}


@pytest.fixture
def slow(tiny_overrides):
    controller = start_controller(tiny_overrides)
    controller.apply_timeout = 1.0
    controller.change(SLOW)
    yield controller
    controller.session.stop(timeout=10)


def test_a_change_takes_effect_within_the_token_it_arrives_in(slow):
    session = slow.session
    assert session.wait_tokens(session.tokens + 1, 30)
    at = session.tokens
    version = slow.change({"io_jitter_ms": 0.0, "ssd_gbps": 0.0})  # 503s if it waited
    marker = next(c for c in session.snapshot()["changes"] if c["version"] == version)
    assert marker["token"] <= at + 1
    assert slow.state()["settings"]["ssd_gbps"] == 0.0 == session.cfg.ssd_gbps


def test_pause_and_stop_take_effect_within_a_token(slow):
    session = slow.session
    assert session.wait_tokens(session.tokens + 1, 30)
    session.pause()
    at = session.tokens
    version = slow.change({"moce_bonus": 0.5})  # a paused session takes settings at once
    assert session.applied_version == version
    assert session.tokens <= at + 1 and session.state == "paused"
    session.resume()
    assert session.wait_tokens(session.tokens + 1, 30)
    session.stop(timeout=5)
    assert not session._thread.is_alive()


def test_a_change_the_engine_does_not_take_up_is_withdrawn(tiny_overrides):
    """A token that hangs outside the emulation (a stuck disk, say; here the test holds it)
    does not hold the change: it is withdrawn after apply_timeout, answered 503 with
    nothing applied, and no pending version is left behind."""
    controller = start_controller(tiny_overrides)
    controller.apply_timeout = 0.5
    session = controller.session
    held, release = threading.Event(), threading.Event()
    token = session._token

    def hanging() -> None:
        held.set()
        release.wait(30)
        token()

    try:
        for live in serve(controller):
            session._token = hanging
            assert held.wait(30)
            r = httpx.patch(f"{live.url}/api/settings", json={"moce_bonus": 2.0}, timeout=60)
            assert r.status_code == 503, r.text
            assert "did not reach a token boundary" in r.json()["detail"]
            assert "nothing was applied" in r.json()["detail"]
            session._token = token
            release.set()
            assert session.wait_tokens(session.tokens + 2, 30)
            assert session.snapshot()["pending_version"] is None
            assert controller.state()["settings"]["moce_bonus"] == 0.0
            assert session.cfg.moce_bonus == 0.0
    finally:
        release.set()
        session.stop(timeout=10)


@pytest.mark.parametrize("knob", ["ssd_gbps", "link_gbps", "cpu_gbps"])
def test_the_bandwidth_floor_is_enforced(live, knob):
    r = httpx.patch(f"{live.url}/api/settings", json={knob: 0.000001})
    assert r.status_code == 422
    assert BY_NAME[knob].allowed() in r.json()["detail"]["problems"][knob]
    assert "0 (off) or float in [0.01, 10000]" == BY_NAME[knob].allowed()
