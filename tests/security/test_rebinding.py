"""DNS rebinding: a page on evil.example whose name now resolves to this machine sends
requests that name evil.example in their Host (and Origin). Every route refuses them,
websockets included; the names this server does answer to still work."""

from __future__ import annotations

import asyncio
import json
import logging
import socket

import httpx
import pytest
import websockets

from tests.web.live import serve


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def evil(url: str) -> dict[str, str]:
    host = f"evil.example:{port_of(url)}"
    return {"Host": host, "Origin": f"http://{host}"}


@pytest.mark.parametrize("method,path,body", [
    ("PATCH", "/api/settings", {"moce_bonus": 9.25}),
    ("DELETE", "/api/presets/mine", None),
    ("POST", "/api/presets/2q/apply", None),
    ("POST", "/api/session/pause", None),
    ("GET", "/api/settings", None),
    ("GET", "/api/snapshot", None),
    ("GET", "/", None),
    ("GET", "/static/dashboard.js", None),
    ("GET", "/metrics", None),
])
def test_a_rebound_name_is_refused_everywhere(live, method, path, body):
    httpx.post(f"{live.url}/api/presets/mine", json={"description": ""}).raise_for_status()
    before = live.controller.state()
    r = httpx.request(method, f"{live.url}{path}", json=body, headers=evil(live.url))
    assert r.status_code == 403, r.text
    assert "evil.example" in r.json()["detail"] and "--allowed-host" in r.json()["detail"]
    assert live.controller.state() == before and "mine" in live.controller.store.names()


def handshake(url: str, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """A websocket upgrade with the given headers; returns the status and what followed."""
    port = port_of(url)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        lines = [f"GET {path} HTTP/1.1", "Upgrade: websocket", "Connection: Upgrade",
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13",
                 *(f"{k}: {v}" for k, v in headers.items())]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split()[1]), data


@pytest.mark.parametrize("path", ["/ws", "/ui/ws"])
def test_a_rebound_websocket_is_refused_with_one_log_line(live, path, caplog):
    caplog.set_level(logging.INFO, logger="tuner")
    status, _ = handshake(live.url, path, evil(live.url))
    assert status == 403
    lines = [r for r in caplog.records if "refused websocket" in r.getMessage()]
    assert len(lines) == 1 and path in lines[0].getMessage()
    assert "evil.example" in lines[0].getMessage()
    assert not any(r.exc_info for r in caplog.records)
    ok, _ = handshake(live.url, path, {"Host": f"127.0.0.1:{port_of(live.url)}",
                                       "Origin": live.url})
    assert ok == 101


def test_a_rebound_websocket_cannot_change_settings(live):
    """The issue's probe: Origin and Host both evil.example (they matched, so the old check
    passed), then a settings message."""
    async def main():
        async with websockets.connect(f"ws://evil.example:{port_of(live.url)}/ws",
                                      proxy=None, origin=f"http://evil.example:"
                                      f"{port_of(live.url)}", host="127.0.0.1") as ws:
            await ws.send(json.dumps({"type": "settings", "id": 1,
                                      "changes": {"moce_bonus": 9.25}}))
            return await ws.recv()

    with pytest.raises(websockets.InvalidStatus) as err:
        asyncio.run(main())
    assert err.value.response.status_code == 403
    assert live.controller.settings.moce_bonus == 0.0


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "[::1]", "LOCALHOST"])
def test_loopback_names_at_the_bound_port_are_served(live, name):
    headers = {"Host": f"{name}:{port_of(live.url)}"}
    assert httpx.get(f"{live.url}/api/settings", headers=headers).status_code == 200
    r = httpx.patch(f"{live.url}/api/settings", json={"moce_bonus": 0.5},
                    headers={**headers, "Origin": f"http://{name}:{port_of(live.url)}"})
    assert r.status_code == 200


@pytest.mark.parametrize("host", ["127.0.0.1:1", "127.0.0.1", "127.0.0.2:{port}",
                                  "0.0.0.0:{port}", "localhost.evil.example:{port}", "",
                                  "127.0.0.1:{port}@evil.example", "evil.example#@127.0.0.1:{port}",
                                  "127.0.0.1:{port}/x", "null"])
def test_other_hosts_and_ports_are_refused(live, host):
    headers = {"Host": host.format(port=port_of(live.url))}
    assert httpx.get(f"{live.url}/api/settings", headers=headers).status_code == 403


def test_allowed_hosts_add_names(controller):
    for live in serve(controller, allowed_hosts=(("tuner.lan", None), ("proxy.lan", 443))):
        for host, status in (("tuner.lan", 200), (f"tuner.lan:{port_of(live.url)}", 200),
                             ("proxy.lan", 403), ("proxy.lan:443", 200),
                             ("evil.example", 403)):
            r = httpx.get(f"{live.url}/api/settings", headers={"Host": host})
            assert r.status_code == status, host
        r = httpx.patch(f"{live.url}/api/settings", json={"moce_bonus": 0.5},
                        headers={"Host": "tuner.lan", "Origin": "https://proxy.lan"})
        assert r.status_code == 200
