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
    controller.change(SLOW)  # under the default timeout: the first token may still warm up
    controller.apply_timeout = 1.0
    yield controller
    controller.session.stop(timeout=10)


def test_a_change_takes_effect_within_the_token_it_arrives_in(slow):
    session = slow.session
    assert session.wait_tokens(session.tokens + 1, 30)
    at = session.tokens
    version = slow.change({"io_jitter_ms": 0.0, "ssd_gbps": 0.0}).version  # 503s if waited
    marker = next(c for c in session.snapshot()["changes"] if c["version"] == version)
    assert marker["token"] <= at + 1
    assert slow.state().settings["ssd_gbps"] == 0.0 == session.cfg.ssd_gbps


def test_pause_and_stop_take_effect_within_a_token(slow):
    session = slow.session
    assert session.wait_tokens(session.tokens + 1, 30)
    session.pause()
    at = session.tokens
    version = slow.change({"moce_bonus": 0.5}).version  # paused, it takes settings at once
    assert session.applied_version == version
    assert session.tokens <= at + 1 and session.state == "paused"
    session.resume()
    assert session.wait_tokens(session.tokens + 1, 30)
    session.stop(timeout=5)
    assert not session._thread.is_alive()


@pytest.fixture
def stuck(tiny_overrides):
    yield from held_server(tiny_overrides, apply_timeout=4.0)


@pytest.fixture
def stuck_long(tiny_overrides):
    """As `stuck`, with changes waiting longer than anything the test does meanwhile."""
    yield from held_server(tiny_overrides, apply_timeout=300.0)


def held_server(tiny_overrides, apply_timeout: float):
    """A live server whose engine hangs inside a token outside the emulation (a stuck disk,
    say; here the test holds it) until `release` is set."""
    controller = start_controller(tiny_overrides)
    controller.apply_timeout = apply_timeout
    session = controller.session
    held, release = threading.Event(), threading.Event()
    advance = session.conversation.advance

    def hanging(cfg, budget=None) -> int:
        if not release.is_set():
            held.set()
            release.wait(60)
        return advance(cfg, budget)

    try:
        for live in serve(controller):
            session.conversation.advance = hanging
            assert held.wait(30)
            live.release = release
            yield live
    finally:
        release.set()
        session.stop(timeout=10)


def test_a_change_the_engine_does_not_take_up_is_withdrawn(stuck):
    """It is answered 503 after apply_timeout with nothing applied, and leaves no pending
    version behind."""
    r = httpx.patch(f"{stuck.url}/api/settings", json={"moce_bonus": 2.0}, timeout=60)
    assert r.status_code == 503, r.text
    assert "did not reach a token boundary" in r.json()["detail"]
    assert "nothing was applied" in r.json()["detail"]
    stuck.release.set()
    session = stuck.session
    assert session.wait_tokens(session.tokens + 2, 30)
    assert session.snapshot()["pending_version"] is None
    assert stuck.controller.state().settings["moce_bonus"] == 0.0
    assert session.cfg.moce_bonus == 0.0


def test_queued_changes_never_starve_the_other_routes(stuck_long):
    """45 changes queued behind the stuck engine hold a few threads of their own: pages,
    static files and reads are answered while every change still waits, and every change
    gets its answer once the engine moves."""
    answers: list[int] = []

    def change(i: int) -> None:
        r = httpx.patch(f"{stuck_long.url}/api/settings", json={"moce_bonus": (i + 1) / 10},
                        timeout=600)
        answers.append(r.status_code)

    threads = [threading.Thread(target=change, args=(i,)) for i in range(45)]
    for t in threads:
        t.start()
    with httpx.Client(base_url=stuck_long.url, timeout=120) as client:
        for path in ("/static/dashboard.js", "/api/settings", "/api/snapshot", "/"):
            assert client.get(path).status_code == 200, path
    assert answers == []  # answered while the changes wait on the held engine
    stuck_long.release.set()
    for t in threads:
        t.join(600)
    assert len(answers) == 45 and set(answers) == {200}
    assert stuck_long.controller.state().settings["moce_bonus"] > 0


def test_closing_leaves_a_token_that_does_not_end_to_its_thread(stuck):
    """The server's shutdown gives the decode thread a bounded time to reach a token
    boundary (`tuner serve`: ENGINE_STOP_S); a token that does not end (a stuck disk) is
    not waited for, and the engine is not closed under it."""
    assert stuck.controller.close(timeout=0.5) is False
    session = stuck.session
    assert session._thread.is_alive()
    stuck.release.set()
    session._thread.join(60)
    # it finished its token on an engine still open, then stopped at the boundary
    assert not session._thread.is_alive() and session.error is None


@pytest.mark.parametrize("knob", ["ssd_gbps", "link_gbps", "cpu_gbps"])
def test_the_bandwidth_floor_is_enforced(live, knob):
    r = httpx.patch(f"{live.url}/api/settings", json={knob: 0.000001})
    assert r.status_code == 422
    assert BY_NAME[knob].allowed() in r.json()["detail"]["problems"][knob]
    assert "0 (off) or float in [0.01, 10000]" == BY_NAME[knob].allowed()
