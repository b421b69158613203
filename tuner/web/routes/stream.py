"""`/ws`: snapshots as JSON at the rate the client picks; settings changes with acks."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Depends, Query, WebSocket

from tuner.control import Controller
from tuner.settings import SettingsError
from tuner.web.connection import request_error, serve_client
from tuner.web.deps import ControllerDep, HubDep, require_same_origin
from tuner.web.hub import DEFAULT_RATE, MAX_RATE, MIN_RATE, Outbox

router = APIRouter(tags=["stream"])

SETTINGS_REQUEST = '{"type": "settings", "id": <any>, "changes": {knob: value}}'


@router.websocket("/ws", dependencies=[Depends(require_same_origin)])
async def stream(ws: WebSocket, hub: HubDep, controller: ControllerDep,
                 rate: Annotated[float, Query(ge=MIN_RATE, le=MAX_RATE)] = DEFAULT_RATE
                 ) -> None:
    """Sends `{"type": "snapshot", "data": <snapshot>}` at once, then `rate` times a second
    (only the newest snapshot when the client falls behind). Accepts settings requests."""

    async def handle(message: Any, outbox: Outbox) -> None:
        outbox.reply(await settings_request(controller, message))

    await serve_client(ws, hub, Outbox(rate), lambda frame: frame.json, handle)


async def settings_request(controller: Controller, message: Any) -> dict[str, Any]:
    """`{"type": "ack", "id", "version"}` or `{"type": "error", "id", "problems"}`."""
    request_id = message.get("id") if isinstance(message, dict) else None
    if (not isinstance(message, dict) or message.get("type") != "settings"
            or not isinstance(message.get("changes"), dict)):
        return request_error(request_id, f"expected {SETTINGS_REQUEST}")
    try:
        # The change waits for the next token boundary: off the event loop.
        version = await anyio.to_thread.run_sync(controller.change, message["changes"])
    except SettingsError as err:
        return {"type": "error", "id": request_id, "problems": err.problems}
    return {"type": "ack", "id": request_id, "version": version}
