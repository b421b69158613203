"""Limits on what a client sends, enforced before any route reads it: size and, for JSON,
how deeply arrays and objects nest (Python's parser recurses, so a body nested thousands
deep would otherwise exhaust the stack) and that an answer quoting it can be encoded: its
strings Unicode text (JSON's escapes can spell a lone surrogate, "\\ud800", which UTF-8
cannot carry) and its integers within 64 bits (what JSON encoders write). The websocket
applies the same limits."""

from __future__ import annotations

import json
import re
from typing import Any

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


# What may spell a value no answer can carry: a surrogate's escape, or a run of digits as
# long as a 64-bit integer's. A text with neither is parsed no further here.
_SUSPECT = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\d{19}")
INT_RANGE = (-(2**63), 2**64 - 1)  # what JSON encoders write as an integer


def unanswerable(value: Any) -> str | None:
    """What in a parsed JSON value (keys included) no JSON answer quoting it could encode:
    a string holding a lone surrogate (a pair of escapes decodes to one character and is
    fine), or an integer beyond 64 bits; None when there is nothing."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return ("a lone surrogate in a string (an unpaired \\ud800-\\udfff escape); "
                    "strings must be Unicode text")
    elif isinstance(value, int) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
        return "an integer beyond 64 bits; integers must be from -2**63 to 2**64 - 1"
    elif isinstance(value, dict | list):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            problem = unanswerable(key) or unanswerable(item)
            if problem:
                return problem
    return None


def json_problem(text: str) -> str | None:
    """The refusal of a JSON text nested deeper than MAX_DEPTH or holding what no answer
    could carry, or None (also for a text that is not JSON: its reader reports that)."""
    if text.count("[") + text.count("{") > MAX_DEPTH and depth(text) > MAX_DEPTH:
        return f"JSON nested deeper than the limit of {MAX_DEPTH} levels"
    if _SUSPECT.search(text):
        try:
            problem = unanswerable(json.loads(text))
        except ValueError:
            return None
        if problem:
            return f"JSON with {problem}"
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
        problem = json_problem(body.decode(errors="replace"))
        if problem:
            response = JSONResponse({"detail": f"request body is {problem}"}, status_code=400)
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
