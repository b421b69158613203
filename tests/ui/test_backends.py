"""Both backends keep one contract: the same calls give the same effects on the engine,
whether it runs in this process or behind the real `tuner serve` app."""

from __future__ import annotations

import asyncio
import sys

import pytest

from tests.ui.conftest import following, until
from tuner.control.controller import GIL_SWITCH_S
from tuner.control.errors import BackendError, Conflict, Rejected
from tuner.control.remote import RemoteBackend, websocket_url
from tuner.knobs import KNOBS
from tuner.settings import SettingsError, apply
from tuner.ui.app import create_app
from tuner.web.app import create_app as create_web_app
from tuner.web.local import serve_in_thread

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["embedded", "remote"])
def backend(request):
    return request.getfixturevalue(request.param)


async def test_knobs_are_the_knob_table(backend):
    async with following(backend):
        assert [k["name"] for k in await backend.knobs()] == [k.name for k in KNOBS]


async def test_change_is_applied_and_versioned(backend, controller):
    async with following(backend):
        before = await backend.state()
        state = await backend.change({"moce_bonus": 0.85, "cache_policy": "2q"})
        assert state.version == before.version + 1 == controller.version
        assert controller.settings.moce_bonus == 0.85
        assert controller.settings.cache_policy == "2q"
        snap = await until(lambda: (s := backend.latest()) and
                           s["settings_version"] == state.version and s)
        assert snap["settings"]["cache_policy"] == "2q"


async def test_rejected_change_carries_the_engine_message_and_changes_nothing(
        backend, controller):
    with pytest.raises(SettingsError) as engine:
        apply(controller.settings, {"moce_bonus": 99})
    async with following(backend):
        version, settings = controller.version, controller.settings
        with pytest.raises(Rejected) as err:
            await backend.change({"moce_bonus": 99})
        assert err.value.problems == engine.value.problems
        assert "moce_bonus (STRATA_METAL_MOCE_BONUS) = 99" in err.value.problems["moce_bonus"]
        assert controller.version == version and controller.settings == settings


async def test_pause_resume_reset(backend, controller):
    session = controller.session
    async with following(backend):
        await until(lambda: session.tokens > 8)
        await backend.pause()
        assert (await until(backend.latest))["state"] in ("running", "paused")
        await until(lambda: (s := backend.latest()) and s["state"] == "paused")
        await backend.reset()
        await until(lambda: session.tokens == 0)
        await backend.resume()
        await until(lambda: (s := backend.latest()) and s["state"] == "running"
                    and s["tokens"] > 0)


async def test_preset_save_diff_apply(backend, controller):
    async with following(backend):
        await backend.change({"moce_bonus": 0.85})
        await backend.save_preset("mine", "bonus on")
        listed = {p["name"]: p for p in await backend.presets()}
        assert listed["mine"]["knobs"]["moce_bonus"] == 0.85
        assert listed["mine"]["meta"]["description"] == "bonus on"
        await backend.change({"moce_bonus": 0.0})
        diff = await backend.diff_preset("mine")
        assert {"knob": "moce_bonus", "env": "STRATA_METAL_MOCE_BONUS", "a": 0.85,
                "b": 0.0} in diff
        state = await backend.apply_preset("mine")
        assert state.settings["moce_bonus"] == 0.85 == controller.settings.moce_bonus


async def test_saving_over_a_preset_asks_and_keeps_its_description(backend, controller):
    async with following(backend):
        await backend.save_preset("mine", "bonus on")
        await backend.change({"moce_bonus": 0.5})
        with pytest.raises(Conflict, match="overwrite"):
            await backend.save_preset("mine", None)
        assert "moce_bonus" not in controller.store.get("mine").knobs  # not replaced
        await backend.save_preset("mine", None, overwrite=True)
        mine = controller.store.get("mine")
        assert mine.knobs["moce_bonus"] == 0.5 and mine.meta["description"] == "bonus on"
        with pytest.raises(BackendError, match="shipped") as err:
            await backend.save_preset("baseline", "mine now", overwrite=True)
        assert not isinstance(err.value, Conflict)  # never replaced, asked or not


async def test_per_expert_counts_and_the_live_curve(backend, controller):
    session = controller.session
    async with following(backend):
        await until(lambda: session.tokens > 8)
        await backend.pause()
        await until(lambda: session.state == "paused")
        data = await until_async(lambda: backend.experts("window"),
                                 lambda d: d["resident"] is not None)
        snap = session.snapshot()
        L, E = snap["model"]["layers"], snap["model"]["experts"]
        assert (data["layers"], data["experts"], data["tokens"]) == (L, E,
                                                                     snap["window"]["tokens"])
        assert [sum(r) for r in data["routings"]] == [r["routings"]
                                                      for r in snap["window"]["layers"]]
        assert [sum(r) for r in data["misses"]] == [r["sync_misses"]
                                                    for r in snap["window"]["layers"]]
        assert [sum(r) for r in data["resident"]] == [r["resident"] for r in snap["layers"]]
        cumulative = await backend.experts("cumulative")
        assert sum(map(sum, cumulative["routings"])) == snap["totals"]["routings"]
        curve = await until_async(backend.curve, lambda c: c is not None, timeout=60)
        assert curve["arena"] == snap["arena"]["slots"] and curve["arena"] in curve["sizes"]
        assert set(curve["hit_rate"]) == {"lru", "2q", "opt"}


async def until_async(call, check, timeout: float = 15.0):
    """Calls the coroutine function `call` until `check` accepts its answer."""
    async def answered():
        while not check(answer := await call()):
            await asyncio.sleep(0.05)
        return answer

    return await asyncio.wait_for(answered(), timeout)


async def test_bad_preset_name_is_an_error_for_the_operator(backend):
    async with following(backend):
        with pytest.raises(BackendError, match="preset name"):
            await backend.save_preset("no spaces!", "")


# -- remote only -------------------------------------------------------------------------
def test_websocket_url():
    assert websocket_url("http://h:8000/", 10) == "ws://h:8000/ws?rate=10"
    assert websocket_url("https://h", 2.5) == "wss://h/ws?rate=2.5"
    assert websocket_url("127.0.0.1:8000", 10) == "ws://127.0.0.1:8000/ws?rate=10"


async def test_remote_keeps_only_the_newest_frame(remote):
    async with following(remote):
        first = await until(remote.latest)
        assert remote.latest() is first  # no new frame: no new parse
        newer = await until(lambda: (s := remote.latest()) and s["seq"] > first["seq"] and s)
        assert remote.link == "live" and newer["seq"] > first["seq"]


async def test_remote_without_the_token_is_refused(remote_url):
    backend = RemoteBackend(remote_url, token="wrong")
    async with following(backend):
        with pytest.raises(BackendError, match="401"):
            await backend.state()
        await until(lambda: "refused" in backend.link or "disconnected" in backend.link)
        assert backend.latest() is None


async def test_remote_server_gone_is_reported_not_fatal(controller):
    with serve_in_thread(create_web_app(controller)) as url:
        backend = RemoteBackend(url)
        async with following(backend):
            await until(backend.latest)
    # the server has stopped: a new connection fails with a message, the last frame stays
    backend = RemoteBackend(url)
    async with following(backend):
        with pytest.raises(BackendError, match=url):
            await backend.state()
        await until(lambda: "disconnected" in backend.link)


async def test_the_embedded_app_shortens_the_gil_switch_interval_while_it_runs(embedded):
    before = sys.getswitchinterval()
    app = create_app(embedded)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_S)
    assert sys.getswitchinterval() == before


@pytest.mark.parametrize("kind", ["embedded", "remote"])
async def test_window_budgets_are_applied(kind, request, controller):
    backend = request.getfixturevalue(kind)
    async with following(backend):
        await until(lambda: controller.session.tokens >= 8)
        out = await backend.window_budgets("hits", apply=True)
        assert out["version"] == controller.version and sum(out["quotas"]) == 16
        assert controller.settings.arena_split == "layers"
        assert controller.settings.arena_budgets == tuple(out["quotas"])
        snap = await until(lambda: (s := backend.latest()) and
                           s["settings_version"] == out["version"] and s)
        assert [row["quota"] for row in snap["layers"]] == out["quotas"]
        stall = await backend.window_budgets("stall", apply=True)
        # quotas equal to the ones applied change nothing, so they make no new version
        changed = stall["quotas"] != out["quotas"]
        assert stall["weights"] == "stall" and stall["version"] == out["version"] + changed
