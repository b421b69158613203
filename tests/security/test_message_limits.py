"""Depth and size limits on what clients send, the same on the websocket as on REST: a
message nested thousands deep is answered with an error and the connection stays open."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets

from tuner.web.limits import MAX_BODY, MAX_DEPTH, depth

DEEP = "[" * 20_000 + "]" * 20_000
NESTED = '{"moce_bonus": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}"


@pytest.mark.parametrize("body", [DEEP, NESTED], ids=["20000-deep", "just-too-deep"])
def test_rest_refuses_bodies_nested_too_deeply(live, body):
    r = httpx.patch(f"{live.url}/api/settings", content=body,
                    headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert f"deeper than the limit of {MAX_DEPTH}" in r.json()["detail"]
    assert live.session.applied_version == 1


def test_the_websocket_answers_deep_and_huge_messages_and_stays_open(live):
    async def main():
        async with websockets.connect(live.ws_url, proxy=None, max_size=None) as ws:
            answers = []
            for message in (DEEP, NESTED):
                await ws.send(message)
                answers.append(await reply(ws))
            await ws.send(json.dumps({"type": "settings", "id": "after",
                                      "changes": {"moce_bonus": 0.5}}))
            answers.append(await reply(ws))
            return answers

    async def reply(ws) -> dict:
        while True:
            msg = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if msg["type"] != "snapshot":
                return msg

    deep, nested, after = asyncio.run(main())
    for answer in (deep, nested):
        assert answer["type"] == "error"
        assert f"deeper than the limit of {MAX_DEPTH}" in answer["problems"]["request"]
    assert after == {"type": "ack", "id": "after", "version": 2}


def test_a_websocket_message_over_the_size_limit_closes_with_1009(live):
    async def main():
        async with websockets.connect(live.ws_url, proxy=None, max_size=None) as ws:
            await ws.send(" " * (MAX_BODY + 1))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.recv(), 30)
            return closed.value.rcvd.code

    assert asyncio.run(main()) == 1009  # message too big, as the server's limit says


@pytest.mark.parametrize("text,expected", [
    ("[]", 1), ('{"a": [1, {"b": 2}]}', 3), ('"[[[["', 0), ('["\\\\", "]["]', 1),
    ('["\\"[[["]', 1), ("", 0),
])
def test_depth_ignores_brackets_in_strings(text, expected):
    assert depth(text) == expected
