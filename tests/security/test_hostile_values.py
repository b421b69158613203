"""Values no file can have and text that is not Unicode, by every way a value comes in:
REST, the websocket, the page's fields, a preset file, an imported env file. Each is one
answer naming the field and what is allowed; the connection stays open, the engine keeps
running on the settings it had, and nothing else breaks."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets

from tuner.cli import main
from tuner.knobs import BY_NAME
from tuner.vocabulary.inputs import ALLOWED, NAME_MAX, PATH_MAX

PATH_KNOBS = ("model", "routing", "workload")
LONG_NAME = "/tmp/" + "a" * (NAME_MAX + 1)  # one name over the limit
LONG_PATH = "/tmp" + "/a" * (PATH_MAX // 2)  # short names, too long a path
LONE = '{"type": "settings", "id": "\\ud800", "changes": {}}'  # JSON escapes, no pair


def refusal(knob: str) -> str:
    return f"{BY_NAME[knob].label} = '/tmp"


async def answers(url: str, messages: list[str]) -> list[dict]:
    """Each message's answer on one connection (snapshots skipped)."""
    async with websockets.connect(url, proxy=None) as ws:
        out = []
        for message in messages:
            await ws.send(message)
            while (msg := json.loads(await asyncio.wait_for(ws.recv(), 30)))["type"] == \
                    "snapshot":
                pass
            out.append(msg)
        return out


@pytest.mark.parametrize("path", [LONG_NAME, LONG_PATH], ids=["long-name", "long-path"])
def test_an_impossible_path_is_refused_everywhere_and_the_engine_runs_on(live, path):
    settings = live.controller.settings
    for knob in PATH_KNOBS:
        r = httpx.patch(f"{live.url}/api/settings", json={knob: path}, timeout=30)
        assert r.status_code == 422
        message = r.json()["detail"]["problems"][knob]
        assert message.startswith(refusal(knob)) and message.endswith(ALLOWED)

        r = httpx.post(f"{live.url}/ui/knobs/{knob}", data={"value": path},
                       headers=live.page_headers, timeout=30)
        assert r.status_code == 200 and ALLOWED in r.text

    changes = [json.dumps({"type": "settings", "id": knob, "changes": {knob: path}})
               for knob in PATH_KNOBS]
    after = json.dumps({"type": "settings", "id": "after", "changes": {"moce_bonus": 0.5}})
    *refused, ack = asyncio.run(answers(live.ws_url, [*changes, after]))
    for knob, answer in zip(PATH_KNOBS, refused):
        assert answer["type"] == "error" and answer["id"] == knob
        assert ALLOWED in answer["problems"][knob]
    assert ack["type"] == "ack"  # the socket stayed open
    assert live.controller.settings == settings.model_copy(update={"moce_bonus": 0.5})
    live.wait_tokens(2)
    assert live.session.state == "running"


def test_a_preset_file_holding_one_is_listed_broken_and_breaks_nothing(live, tuner_home,
                                                                      capsys):
    presets = tuner_home / "presets"
    presets.mkdir(parents=True)
    (presets / "far.toml").write_text(f'[knobs]\nworkload = "{LONG_NAME}"\n')
    assert httpx.get(f"{live.url}/").status_code == 200
    listed = {p["name"]: p for p in httpx.get(f"{live.url}/api/presets").json()}
    assert ALLOWED in listed["far"]["error"] and "far.toml:2" in listed["far"]["error"]
    assert httpx.post(f"{live.url}/api/presets/far/apply", headers=live.page_headers
                      ).status_code == 422
    assert main(["presets", "list"]) == 0
    out = capsys.readouterr().out
    assert "far" in out and "broken" in out and ALLOWED in out


def test_an_env_file_holding_one_is_refused_by_its_line(tmp_path, capsys):
    env = tmp_path / "far.env"
    env.write_text(f"STRATA_METAL_DECODE_2Q=1\nSTRATA_ROUTING={LONG_NAME}\n")
    assert main(["presets", "import", str(env)]) == 2
    err = capsys.readouterr().err
    assert f"{env}:2: {refusal('routing')}" in err and ALLOWED in err


def test_a_nul_in_a_path_is_refused_by_name(live):
    r = httpx.patch(f"{live.url}/api/settings", json={"workload": "a\u0000b"}, timeout=30)
    assert r.status_code == 422 and ALLOWED in r.json()["detail"]["problems"]["workload"]


def test_unencodable_json_is_a_400_and_an_error_frame_not_a_dropped_socket(live):
    for body in ('{"\\ud800": 1}', '{"workload": "x\\udfff"}'):
        r = httpx.patch(f"{live.url}/api/settings", content=body,
                        headers={"content-type": "application/json"}, timeout=30)
        assert r.status_code == 400 and "lone surrogate" in r.json()["detail"]
    paired = '{"type": "settings", "id": "\\ud83d\\ude00", "changes": {}}'  # one character
    huge = '{"type": "settings", "id": ' + str(2**64) + ', "changes": {}}'  # past 64 bits
    lone, big, fine = asyncio.run(answers(live.ws_url, [LONE, huge, paired]))
    assert lone["type"] == "error" and lone["id"] is None
    assert "lone surrogate" in lone["problems"]["request"]
    assert big["type"] == "error" and "integer beyond 64 bits" in big["problems"]["request"]
    assert fine == {"type": "ack", "id": "\U0001f600", "version": 1}
    assert live.session.applied_version == 1


def test_the_page_keeps_serving_after_all_of_it(live):
    asyncio.run(answers(live.ws_url, [LONE]))
    assert httpx.get(f"{live.url}/api/snapshot", timeout=30).status_code == 200
    assert httpx.get(f"{live.url}/metrics", timeout=30).status_code == 200
