"""Who may reach and steer the server, checked before any route runs.

* Host allowlist, on every request and websocket: the Host header must name this server,
  as the address the connection arrived at, a loopback name (localhost, 127.0.0.1, [::1])
  when that address is loopback, or a name given with `--allowed-host`, and the port it
  arrived at. A page whose own name was rebound to this machine's address (DNS
  rebinding) still sends its own name, so it is refused.
* The token, when one is configured: `Authorization: Bearer T` or `?token=T` everywhere
  but the page's static assets, which a browser fetches without headers.
* Same origin, on every request that changes state (any method but GET, HEAD and
  OPTIONS) and every websocket (its messages change settings): an Origin header, or
  without one a Referer, must name an allowed host. The page's own routes (/ui/...) must
  carry one, as every browser sends them; API clients outside a browser send neither.
* No cross-site form: a state-changing request with a body must send it as JSON or carry
  htmx's `HX-Request` header. A cross-site form or simple fetch can do neither without a
  CORS preflight, and this server answers no preflight.

A refused request is answered with its reason; a refused websocket is closed before the
handshake, which the server answers with a bare 403 (a denial with a body makes uvicorn's
websockets-sansio log a spurious error for each one), and the reason goes to the log in one
line.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import secrets
from urllib.parse import parse_qsl, urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from tuner.errors import TunerError

log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}
POLICY_VIOLATION = 1008  # a websocket closed before its handshake: the server answers 403
_HOST_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?")
MIN_TOKEN = 16  # characters: a token guards a server that other machines reach
_TOKEN = re.compile(rf"[!-~]{{{MIN_TOKEN},}}")  # printable ASCII: it travels in a header


def who(scope: Scope) -> str:
    """The client and the path of a request, for log lines."""
    client = scope.get("client")
    return f"{client[0]}:{client[1]} on {scope['path']}" if client else scope["path"]


class Refused(TunerError):
    """A request the gate turns away: `status` and the one-line `message` it is answered
    with."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def parse_allowed_host(text: str) -> tuple[str, int | None]:
    """`NAME` (any port) or `NAME:PORT`, as given to --allowed-host; IPv6 in brackets."""
    try:
        parts = urlsplit(f"//{text.strip()}")
        name, port = parts.hostname, parts.port
    except ValueError:
        name = port = None
    if not name or not (_HOST_NAME.fullmatch(name) or _is_address(name)) or parts.path \
            or parts.query or parts.username:
        raise ValueError(f"--allowed-host {text!r}: expected a host name or address, "
                         "optionally with :PORT (such as tuner.lan or tuner.lan:8765)")
    return name, port


def check_token(token: str) -> str:
    """`token`, once it is at least MIN_TOKEN printable ASCII characters with no blank in or
    around it (a blank around it is a copying mistake, and a short one is guessed);
    ValueError saying so, without quoting it."""
    if not _TOKEN.fullmatch(token):
        blank = " (it has blanks in or around it)" if token != "".join(token.split()) else ""
        raise ValueError(f"a token is at least {MIN_TOKEN} printable ASCII characters without "
                         f"blanks; this one has {len(token)}{blank}. Make one with: python -c "
                         "'import secrets; print(secrets.token_urlsafe())'")
    return token


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address `text` spells (an IPv4 client of a dual-stack socket as IPv4), or None."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    return getattr(ip, "ipv4_mapped", None) or ip


def _is_address(name: str) -> bool:
    return _ip(name) is not None


def _is_loopback(address: str) -> bool:
    ip = _ip(address)
    return ip is not None and ip.is_loopback


def _same_address(name: str, address: str) -> bool:
    a, b = _ip(name), _ip(address)
    return a == b if a and b else name == address.lower()


class Gate:
    def __init__(self, app: ASGIApp, token: str | None = None,
                 allowed_hosts: tuple[tuple[str, int | None], ...] = ()):
        self.app, self.token = app, token
        self.allowed_hosts = tuple((name.lower(), port) for name, port in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        try:
            self.check(scope)
        except Refused as no:
            return await self._refuse(no, scope, receive, send)
        await self.app(scope, receive, send)

    # -- the checks ----------------------------------------------------------------------
    def check(self, scope: Scope) -> None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        plain = not any(c in host for c in "/?#@\\")  # a name and a port, nothing else
        if not (plain and self._names_us(f"{scope.get('scheme', 'http')}://{host}", scope)):
            raise Refused(403, f"host {host!r} is not served here: a request must name this "
                               f"server ({self._names(scope)}); give another name to "
                               "`tuner serve --allowed-host`")
        if self.token is not None and not scope["path"].startswith("/static/"):
            self._check_token(scope, headers, self.token)
        changes = scope["type"] == "websocket" or scope["method"] not in SAFE_METHODS
        if changes:
            self._check_origin(scope, headers)
        if changes and scope["type"] == "http":
            self._check_form(headers)

    def _check_token(self, scope: Scope, headers: Headers, token: str) -> None:
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        given = credentials if scheme.lower() == "bearer" else \
            dict(parse_qsl(scope.get("query_string", b"").decode(errors="replace"))).get("token")
        if not given or not secrets.compare_digest(given.encode(), token.encode()):
            raise Refused(401, "a valid token is required: send 'Authorization: Bearer "
                               "<token>' or add ?token=<token>", {"WWW-Authenticate": "Bearer"})

    def _check_origin(self, scope: Scope, headers: Headers) -> None:
        origin = headers.get("origin")
        which, source = ("Origin", origin) if origin is not None else \
            ("Referer", headers.get("referer"))
        if source is None:
            if scope["path"].startswith("/ui/"):
                raise Refused(403, "the page's requests carry an Origin or Referer header; "
                                   "this one has neither")
            return  # not from a browser: the form check below still applies
        if not self._names_us(source, scope):
            raise Refused(403, f"{which} {source!r} is not this server: only pages served "
                               "by this server may change its state")

    @staticmethod
    def _check_form(headers: Headers) -> None:
        media = headers.get("content-type", "").split(";")[0].strip().lower()
        has_body = media or headers.get("content-length", "0") != "0" or \
            "transfer-encoding" in headers
        if has_body and media != "application/json" and "hx-request" not in headers:
            raise Refused(403, f"a request that changes state sends JSON (content-type "
                               f"application/json) or comes from the page (HX-Request); "
                               f"got content-type {media or 'none'!r}")

    # -- names -----------------------------------------------------------------------------
    def _names_us(self, url: str, scope: Scope) -> bool:
        """True when `url` (scheme://host[:port]...) names this server."""
        try:
            parts = urlsplit(url)
            name, port = parts.hostname, parts.port or DEFAULT_PORTS.get(parts.scheme)
        except ValueError:  # a port that is not a number
            return False
        if not name:
            return False
        if any(name == n and p in (None, port) for n, p in self.allowed_hosts):
            return True
        server = scope.get("server")
        if server is None:  # a Unix socket: only the names given are known
            return False
        address, bound_port = server[0], server[1]
        if port != bound_port:
            return False
        return _same_address(name, address) or (_is_loopback(address)
                                                and name in LOOPBACK_NAMES)

    def _names(self, scope: Scope) -> str:
        server = scope.get("server")
        names = []
        if server:
            address, port = server
            shown = f"[{address}]" if ":" in address else address
            names.append(f"{shown}:{port}")
            if _is_loopback(address):
                names += [f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"]
        names += [n if p is None else f"{n}:{p}" for n, p in self.allowed_hosts]
        return ", ".join(dict.fromkeys(names))

    # -- refusing ------------------------------------------------------------------------
    async def _refuse(self, no: Refused, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            log.info("refused %s %s: %s", scope["method"], who(scope), no.message)
            response = JSONResponse({"detail": no.message}, no.status, no.headers)
            return await response(scope, receive, send)
        log.warning("refused websocket %s: %s", who(scope), no.message)
        await WebSocket(scope, receive, send).close(POLICY_VIOLATION)
