"""The backend of a `tuner serve` elsewhere: its REST API and its snapshot websocket.

Both clients run on the app's event loop. The websocket is read as fast as frames come
and only the newest frame is kept; it is parsed when the UI asks for it, so a server
sending 10 snapshots a second costs one parse per repaint, not ten.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus, WebSocketException

from tuner.control.api import Backend, Operation
from tuner.control.errors import BackendError, Unreachable, backend_error
from tuner.vocabulary.snapshot import Snapshot

log = logging.getLogger(__name__)

MAX_FRAME = 64 * 1024 * 1024  # a 500-layer snapshot is a few MiB; the client default is 1 MiB
RETRY_DELAYS = (0.5, 1.0, 2.0, 5.0)  # seconds between reconnects; the last one repeats
DEFAULT_RATE = 2.0  # snapshots a second asked of the server (the terminal UI's repaint rate)


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
    def __init__(self, url: str, token: str | None = None, rate: float = DEFAULT_RATE,
                 timeout: float = 60.0):
        self.where = base_url(url)
        self.rate = rate
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http: httpx.AsyncClient | None = None
        self._link = "connecting"
        self._frame: str | bytes | None = None  # newest websocket frame, not parsed yet
        self._parsed: str | bytes | None = None
        self._snapshot: Snapshot | None = None

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

    def latest(self) -> Snapshot | None:
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
    async def call(self, operation: Operation, arguments: dict[str, Any]) -> Any:
        route = operation.route
        path = route.path.format(**{name: quote(str(arguments.pop(name)), safe="")
                                    for name in route.path_names})
        query = {name: value for name in route.query
                 if (value := arguments.pop(name)) is not None}
        answer = await self._request(route.method, path, route.none_when, params=query,
                                     json=_body(arguments))
        return _reader(operation).validate_python(answer)

    async def _request(self, method: str, path: str, none_when: int | None,
                       **kwargs: Any) -> Any:
        """The answer's JSON; None for a `none_when` answer (nothing there yet)."""
        if self._http is None:
            raise BackendError("the remote backend is not open")
        try:
            response = await self._http.request(method, path, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout) as err:
            raise Unreachable(f"{self.where}: nothing answers there ({err or type(err).__name__});"
                              " is `tuner serve` running, and on that port (its --port)?"
                              ) from None
        except httpx.HTTPError as err:
            raise BackendError(f"{self.where}{path}: {err or type(err).__name__}") from None
        if response.status_code == none_when:
            return None
        if response.is_error:
            detail = _detail(response)
            problems = detail.get("problems") if isinstance(detail, dict) else None
            message = detail or response.text[:200] or response.reason_phrase
            raise backend_error(response.status_code,
                                f"{method} {path}: HTTP {response.status_code}: {message}",
                                problems if isinstance(problems, dict) else None)
        return response.json() if response.content else None


def _body(arguments: dict[str, Any]) -> Any:
    """The arguments that are neither in the path nor in the query, as the JSON body: a
    single model or mapping is the body itself; none: no body."""
    if len(arguments) == 1:
        [value] = arguments.values()
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json")
        if isinstance(value, Mapping):
            return dict(value)
    return arguments or None


@functools.cache
def _reader(operation: Operation) -> TypeAdapter[Any]:
    """Reads an operation's JSON answer as its declared type."""
    return TypeAdapter(operation.answer())
