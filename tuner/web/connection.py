"""One websocket client: a sender task fed by its outbox, and a receiver for its requests.

A send that takes longer than the app's `send_timeout` means the client stopped reading:
it is closed with 1013 (try again later), which browsers' reconnect logic understands. A
client that leaves without a closing handshake is logged in one line, like a stalled one;
a client leaving is never an error of the server.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

import anyio
from fastapi import WebSocket, WebSocketDisconnect

from tuner.web.gate import who
from tuner.web.hub import Frame, Hub, Outbox, send_loop
from tuner.web.limits import MAX_BODY, json_problem

log = logging.getLogger(__name__)

TRY_AGAIN_LATER = 1013
CLEAN_CLOSE = (1000, 1001, 1012)  # normal closure, going away (a tab), this server stopping
RECEIVER_GRACE_S = 1.0

Handler = Callable[[Any, Outbox], Awaitable[None]]


async def serve_client(ws: WebSocket, hub: Hub, outbox: Outbox,
                       encode: Callable[[Frame], str | None], handle: Handler) -> None:
    """Runs until the client leaves or stalls. `handle(message, outbox)` answers one parsed
    JSON message from the client, replying through the outbox."""
    timeout: float = ws.app.state.send_timeout
    stalled, left = False, None  # left: the close code of a client that went away

    async def send(text: str) -> None:
        with anyio.fail_after(timeout):
            await ws.send_text(text)

    async def sender(cancel: anyio.CancelScope) -> None:
        nonlocal stalled, left
        try:
            await send_loop(outbox, send, encode)
        except TimeoutError:
            stalled = True
            log.info("websocket client %s stopped reading; closing it", who(ws.scope))
        except WebSocketDisconnect as gone:
            # It left while a frame was on its way. A failed send reads 1006 whatever the
            # close was (a server stopping sends 1012); the receiver reports the real code,
            # so it gets a moment to.
            left = gone.code
            cancel.deadline = anyio.current_time() + RECEIVER_GRACE_S
            return
        cancel.cancel()

    await ws.accept()
    await hub.join(outbox)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(sender, tg.cancel_scope)
            left = await _receive(ws, outbox, handle)
            tg.cancel_scope.cancel()
    finally:
        hub.leave(outbox)
    if stalled:
        # The close frame may not get through either, or the client is gone by now.
        with anyio.move_on_after(1.0), suppress(WebSocketDisconnect):
            await ws.close(TRY_AGAIN_LATER, "client too slow: stopped reading")
    elif left not in CLEAN_CLOSE:
        log.info("websocket client %s dropped the connection (code %s)", who(ws.scope), left)


async def _receive(ws: WebSocket, outbox: Outbox, handle: Handler) -> int:
    """Answers the client's messages until it leaves; returns its close code."""
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return message.get("code", 1005)
        text = message.get("text")
        if text is None:
            outbox.reply(request_error(None, "send text frames holding JSON, not binary"))
            continue
        problem = (f"message over the limit of {MAX_BODY} bytes" if len(text) > MAX_BODY
                   else json_problem(text))
        if problem:
            outbox.reply(request_error(None, problem))
            continue
        try:
            parsed = json.loads(text)
        except ValueError as err:
            outbox.reply(request_error(None, f"message is not valid JSON: {err}"))
            continue
        await handle(parsed, outbox)


def request_error(request_id: Any, message: str) -> dict[str, Any]:
    return {"type": "error", "id": request_id, "problems": {"request": message}}
