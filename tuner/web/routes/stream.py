"""`/ws`: snapshots as JSON at the rate the client picks; settings changes with acks."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, WebSocket
from pydantic import ValidationError

from tuner.control.controller import Controller
from tuner.control.errors import ApplyTimeout, SettingsError
from tuner.control.models import SettingsMessage, problems
from tuner.web.connection import request_error, serve_client
from tuner.web.deps import ControllerDep, HubDep, SteeringDep
from tuner.web.hub import DEFAULT_RATE, MAX_RATE, MIN_RATE, Outbox
from tuner.web.steering import Steering

router = APIRouter(tags=["stream"])

SETTINGS_REQUEST = '{"type": "settings", "id": <any>, "changes": {knob: value}}'


@router.websocket("/ws")
async def stream(ws: WebSocket, hub: HubDep, controller: ControllerDep, steering: SteeringDep,
                 rate: Annotated[float, Query(ge=MIN_RATE, le=MAX_RATE)] = DEFAULT_RATE
                 ) -> None:
    """Sends `{"type": "snapshot", "data": <snapshot>}` at once, then `rate` times a second
    (only the newest snapshot when the client falls behind). Accepts settings requests."""

    async def handle(message: Any, outbox: Outbox) -> None:
        outbox.reply(await settings_request(controller, steering, message))

    await serve_client(ws, hub, Outbox(rate), lambda frame: frame.json, handle)


async def settings_request(controller: Controller, steering: Steering,
                           message: Any) -> dict[str, Any]:
    """`{"type": "ack", "id", "version"}` or `{"type": "error", "id", "problems"}`."""
    request_id = message.get("id") if isinstance(message, dict) else None
    try:
        request = SettingsMessage.model_validate(message)
    except ValidationError as err:  # say what was wrong (an unknown field, ...), then the form
        found = "; ".join(problems(err.errors()).values())
        return request_error(request_id, f"{found}; expected {SETTINGS_REQUEST}")
    try:
        state = await steering.run(controller.change, request.changes.root)
    except SettingsError as err:
        return {"type": "error", "id": request_id, "problems": err.problems}
    except ApplyTimeout as err:
        return request_error(request_id, str(err))
    return {"type": "ack", "id": request_id, "version": state.version}
