"""Strict types on every input path: no true/false for numbers, no text for numbers,
switches only true/false/0/1; text inputs (environment, flags, form fields) parsed by the
knob's type with the plain spellings only."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets

from tuner.cli import main as cli
from tuner.knobs import BY_NAME
from tuner.presets import PresetError, parse
from tuner.settings import SettingsError, env_values, from_text, validate

LOOSE = [
    pytest.param("moce_protect", True, id="bool-for-int"),
    pytest.param("moce_bonus", True, id="bool-for-float"),
    pytest.param("moce_bonus", "5", id="text-for-float"),
    pytest.param("prefetch_max", "5", id="text-for-int"),
    pytest.param("prefetch_max", 5.0, id="fraction-for-int"),
    pytest.param("prefetch_touch", "yes", id="yes-for-switch"),
    pytest.param("prefetch_touch", "on", id="on-for-switch"),
    pytest.param("prefetch_touch", "1", id="text-1-for-switch"),
    pytest.param("prefetch_touch", 2, id="2-for-switch"),
    pytest.param("prefetch_touch", 1.0, id="fraction-for-switch"),
    pytest.param("prefetch", 1, id="number-for-choice"),
    pytest.param("model", 5, id="number-for-text"),
    pytest.param("moce_bonus", None, id="null"),
]


@pytest.mark.parametrize("knob,value", LOOSE)
def test_rest_refuses_loose_types(live, knob, value):
    before = live.controller.state()
    r = httpx.patch(f"{live.url}/api/settings", json={knob: value})
    assert r.status_code == 422, r.text
    message = r.json()["detail"]["problems"][knob]
    assert BY_NAME[knob].allowed() in message
    assert live.controller.state() == before


def test_websocket_refuses_loose_types(live):
    async def main():
        answers = []
        async with websockets.connect(live.ws_url, proxy=None) as ws:
            for i, param in enumerate(LOOSE):
                knob, value = param.values
                await ws.send(json.dumps({"type": "settings", "id": i,
                                          "changes": {knob: value}}))
                while True:
                    msg = json.loads(await asyncio.wait_for(ws.recv(), 30))
                    if msg["type"] != "snapshot":
                        answers.append((knob, msg))
                        break
        return answers

    for knob, answer in asyncio.run(main()):
        assert answer["type"] == "error" and knob in answer["problems"], answer
    assert live.session.applied_version == 1


@pytest.mark.parametrize("knob,value,expected", [
    ("prefetch_touch", 1, True), ("prefetch_touch", 0, False), ("prefetch_touch", True, True),
    ("moce_bonus", 1, 1.0), ("prefetch_max", 7, 7),
])
def test_typed_values_of_the_right_kind_pass(knob, value, expected):
    got = getattr(validate({knob: value}), knob)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("knob,text,expected", [
    ("prefetch_touch", "1", True), ("prefetch_touch", "false", False),
    ("prefetch_touch", "TRUE", True),
    ("prefetch_max", "7", 7), ("prefetch_max", "-1", -1), ("moce_bonus", "0.85", 0.85),
    ("moce_bonus", "1e-3", 0.001), ("moce_bonus", ".5", 0.5), ("model", " x ", " x "),
])
def test_text_inputs_take_plain_spellings(knob, text, expected):
    assert from_text(BY_NAME[knob], text) == expected


@pytest.mark.parametrize("knob,text", [
    ("prefetch_touch", "yes"), ("prefetch_touch", "on"), ("prefetch_touch", "2"),
    ("prefetch_touch", ""),
    ("prefetch_max", "5.0"), ("prefetch_max", "1_000"), ("prefetch_max", "0x10"),
    ("moce_bonus", "nan"), ("moce_bonus", "inf"), ("moce_bonus", "1,5"),
    ("seed", "9" * 5000),
])
def test_text_inputs_refuse_other_spellings(knob, text):
    with pytest.raises(SettingsError) as err:
        from_text(BY_NAME[knob], text)
    assert BY_NAME[knob].allowed() in err.value.problems[knob]
    assert len(err.value.problems[knob]) < 200


def test_environment_is_parsed_strictly(monkeypatch):
    monkeypatch.setenv("STRATA_METAL_PREFETCH_TOUCH", "true")
    monkeypatch.setenv("STRATA_PREFETCH_MAX", "6")
    assert env_values() == {"prefetch_touch": True, "prefetch_max": 6}
    monkeypatch.setenv("STRATA_METAL_PREFETCH_TOUCH", "yes")
    monkeypatch.setenv("STRATA_METAL_MOCE_PROTECT", "3.5")
    with pytest.raises(SettingsError) as err:
        env_values()
    assert set(err.value.problems) == {"prefetch_touch", "moce_protect"}


def test_flags_are_parsed_strictly(capsys):
    assert cli(["presets", "save", "x", "--prefetch-touch", "on"]) == 2
    err = capsys.readouterr().err
    assert "prefetch_touch (STRATA_METAL_PREFETCH_TOUCH) = 'on' is not allowed" in err
    assert cli(["presets", "save", "x", "--moce-protect", "2.0"]) == 2
    assert "int in [0, 64]" in capsys.readouterr().err
    assert cli(["presets", "save", "x", "--prefetch-touch", "1", "--moce-bonus", "0.5"]) == 0


@pytest.mark.parametrize("text", ['moce_protect = true', 'moce_bonus = "5"',
                                  'prefetch_touch = "yes"', 'prefetch_touch = 2',
                                  'prefetch_max = 5.0'])
def test_preset_files_are_typed_strictly(text):
    with pytest.raises(PresetError) as err:
        parse(f"[knobs]\n{text}\n", "p.toml")
    assert "p.toml:2" in str(err.value)


def test_form_fields_are_parsed_strictly(live):
    headers = live.page_headers
    r = httpx.post(f"{live.url}/ui/knobs/prefetch_touch", data={"value": "on"}, headers=headers)
    assert "is not allowed" in r.text and live.session.applied_version == 1
    r = httpx.post(f"{live.url}/ui/knobs/prefetch_touch", data={"value": "true"}, headers=headers)
    assert "is not allowed" not in r.text and live.controller.settings.prefetch_touch is True
