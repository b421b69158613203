"""The UI's backend for a `tuner serve` elsewhere: its REST API and its snapshot websocket.

Both clients run on the app's event loop. The websocket is read as fast as frames come
and only the newest frame is kept; it is parsed when the UI asks for it, so a server
sending 10 snapshots a second costs one parse per repaint, not ten.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus, WebSocketException

from tuner.ui import DEFAULT_REFRESH_HZ
from tuner.ui.backend import Backend, BackendError, Conflict, Rejected, State

log = logging.getLogger(__name__)

MAX_FRAME = 64 * 1024 * 1024  # a 500-layer snapshot is a few MiB; the client default is 1 MiB
RETRY_DELAYS = (0.5, 1.0, 2.0, 5.0)  # seconds between reconnects; the last one repeats


def base_url(url: str) -> str:
    url = url.rstrip("/")
    return url if "://" in url else f"http://{url}"


def websocket_url(url: str, rate: float) -> str:
    scheme, rest = base_url(url).split("://", 1)
    return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/ws?rate={rate:g}"


def _detail(response: httpx.Response) -> Any:
    """FastAPI's error body is {"detail": ...}; None when the body is not that. A request
    validation error's list of problems becomes one line, "field: message; ..."."""
    try:
        body = response.json()
    except ValueError:
        return None
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list) and all(isinstance(d, dict) for d in detail):
        return "; ".join(f"{'.'.join(map(str, d.get('loc', [])[1:]))}: {d.get('msg')}"
                         for d in detail)
    return detail


class RemoteBackend(Backend):
    def __init__(self, url: str, token: str | None = None, rate: float = DEFAULT_REFRESH_HZ,
                 timeout: float = 60.0):
        self.where = base_url(url)
        self.rate = rate
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http: httpx.AsyncClient | None = None
        self._link = "connecting"
        self._frame: str | bytes | None = None  # newest websocket frame, not parsed yet
        self._parsed: str | bytes | None = None
        self._snapshot: dict[str, Any] | None = None

    @property
    def link(self) -> str:
        return self._link

    async def open(self) -> None:
        # trust_env=False, like proxy=None on the websocket: proxy variables are for the
        # internet, and a tuning server is usually on this host or the next one.
        self._http = httpx.AsyncClient(base_url=self.where, headers=self._headers,
                                       timeout=httpx.Timeout(self.timeout, connect=5.0),
                                       trust_env=False)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()

    # -- snapshots ---------------------------------------------------------------------
    async def follow(self) -> None:
        url = websocket_url(self.where, self.rate)
        attempt = 0
        while True:
            try:
                async with connect(url, additional_headers=self._headers, proxy=None,
                                   max_size=MAX_FRAME, open_timeout=5) as ws:
                    self._link, attempt = "live", 0
                    async for frame in ws:
                        self._frame = frame
                self._link = "closed by the server; reconnecting"
            except InvalidStatus as err:
                self._link = f"refused (HTTP {err.response.status_code}); retrying"
            except (OSError, TimeoutError, WebSocketException) as err:
                self._link = f"disconnected ({err or type(err).__name__}); reconnecting"
            log.debug("websocket %s: %s", url, self._link)
            await asyncio.sleep(RETRY_DELAYS[min(attempt, len(RETRY_DELAYS) - 1)])
            attempt += 1

    def latest(self) -> dict[str, Any] | None:
        frame = self._frame
        if frame is not None and frame is not self._parsed:
            self._parsed = frame
            try:
                message = json.loads(frame)
            except ValueError:
                log.warning("ignored a websocket frame that is not JSON")
                return self._snapshot
            if isinstance(message, dict) and message.get("type") == "snapshot":
                self._snapshot = message["data"]
        return self._snapshot

    # -- REST --------------------------------------------------------------------------
    async def _request(self, method: str, path: str, absent: bool = False,
                       **kwargs: Any) -> Any:
        """The answer's JSON; with `absent`, None for a 404 (nothing there yet)."""
        if self._http is None:
            raise BackendError("the remote backend is not open")
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as err:
            raise BackendError(f"{self.where}{path}: {err or type(err).__name__}") from None
        if absent and response.status_code == 404:
            return None
        if response.is_error:
            detail = _detail(response)
            if isinstance(detail, dict) and isinstance(detail.get("problems"), dict):
                raise Rejected(detail["problems"])
            message = detail or response.text[:200] or response.reason_phrase
            error = Conflict if response.status_code == 409 else BackendError
            raise error(f"{method} {path}: HTTP {response.status_code}: {message}")
        return response.json() if response.content else None

    async def knobs(self) -> list[dict[str, Any]]:
        return await self._request("GET", "/api/knobs")

    async def state(self) -> State:
        return await self._request("GET", "/api/settings")

    async def change(self, changes: Mapping[str, Any]) -> State:
        return await self._request("PATCH", "/api/settings", json=dict(changes))

    async def pause(self) -> None:
        await self._request("POST", "/api/session/pause")

    async def resume(self) -> None:
        await self._request("POST", "/api/session/resume")

    async def reset(self) -> None:
        await self._request("POST", "/api/session/reset")

    async def window_budgets(self, weights: str) -> dict[str, Any]:
        return await self._request("POST", "/api/budgets",
                                   json={"weights": weights, "apply": True})

    async def presets(self) -> list[dict[str, Any]]:
        return await self._request("GET", "/api/presets")

    async def save_preset(self, name: str, description: str | None,
                          overwrite: bool = False) -> None:
        await self._request("POST", f"/api/presets/{quote(name, safe='')}",
                            json={"description": description, "overwrite": overwrite})

    async def apply_preset(self, name: str) -> State:
        return await self._request("POST", f"/api/presets/{quote(name, safe='')}/apply")

    async def diff_preset(self, name: str) -> list[dict[str, Any]]:
        return await self._request("GET", f"/api/presets/{quote(name, safe='')}/diff")

    async def start_ab(self, a: str, b: str, pairs: int, tokens: int,
                       workloads: list[str] | None = None, rules: str = "",
                       max_kl: float | None = None, min_agreement: float | None = None
                       ) -> dict[str, Any]:
        return await self._request("POST", "/api/ab", json={
            "a": a, "b": b, "pairs": pairs, "tokens": tokens, "workloads": workloads or [],
            "rules": rules, "max_kl": max_kl, "min_agreement": min_agreement})

    async def experts(self, window: bool) -> dict[str, Any]:
        return await self._request("GET", "/api/experts",
                                   params={"view": "window" if window else "cumulative"})

    async def curve(self) -> dict[str, Any] | None:
        return await self._request("GET", "/api/curve")  # 204 (None) until the first

    async def ab_status(self) -> dict[str, Any] | None:
        return await self._request("GET", "/api/ab", absent=True)

    async def start_tune(self, trials: int, tokens: int, objective: str, space: str,
                         fix: str, max_kl: float | None = None,
                         min_agreement: float | None = None) -> dict[str, Any]:
        return await self._request("POST", "/api/tune", json={
            "trials": trials, "tokens": tokens, "objective": objective, "space": space,
            "fix": fix, "max_kl": max_kl, "min_agreement": min_agreement})

    async def tune_status(self) -> dict[str, Any] | None:
        return await self._request("GET", "/api/tune", absent=True)

    async def stop_tune(self) -> dict[str, Any] | None:
        return await self._request("POST", "/api/tune/stop", absent=True)
