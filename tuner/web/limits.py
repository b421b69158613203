"""Limits on what a client sends, enforced before any route reads it: size and, for JSON,
how deeply arrays and objects nest (Python's parser recurses, so a body nested thousands
deep would otherwise exhaust the stack). The websocket applies the same limits."""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY = 64 * 1024
MAX_DEPTH = 32  # a settings change nests 1 deep; no request needs more than a few


def depth(text: str) -> int:
    """How deeply a JSON text nests arrays and objects (brackets in strings do not count)."""
    level = deepest = 0
    in_string = escaped = False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            level += 1
            deepest = max(deepest, level)
        elif c in "]}":
            level -= 1
    return deepest


def too_deep(text: str) -> str | None:
    """The refusal of a JSON text nested deeper than MAX_DEPTH, or None."""
    if text.count("[") + text.count("{") > MAX_DEPTH and depth(text) > MAX_DEPTH:
        return f"JSON nested deeper than the limit of {MAX_DEPTH} levels"
    return None


class BodyLimit:
    """Answers 413 to a body over `limit` bytes, declared (Content-Length) or streamed
    (chunked), and 400 to a JSON body nested too deeply. Bodies under the limit are small,
    so they are read whole and replayed."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY):
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await self._refuse(scope, receive, send)
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            if len(body) > self.limit:
                return await self._refuse(scope, receive, send)
            if not message.get("more_body"):
                break
        deep = too_deep(body.decode(errors="replace"))
        if deep:
            response = JSONResponse({"detail": f"request body is {deep}"}, status_code=400)
            return await response(scope, receive, send)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse(
            {"detail": f"request body over the limit of {self.limit} bytes"}, status_code=413)
        await response(scope, receive, send)
