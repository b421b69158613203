"""The session: its snapshot and its run state."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter

from tuner.web.deps import ControllerDep
from tuner.web.schemas import SessionState

router = APIRouter(prefix="/api", tags=["session"])


@router.get("/snapshot")
def snapshot(controller: ControllerDep) -> dict[str, Any]:
    """Everything the engine measured, as sent on the websocket (see `schema`)."""
    return controller.session.snapshot()


@router.post("/session/{action}", response_model=SessionState)
def control(controller: ControllerDep,
            action: Literal["pause", "resume", "reset"]) -> dict[str, str]:
    """pause / resume decoding, or reset the counters at the next token boundary."""
    session = controller.session
    {"pause": session.pause, "resume": session.resume, "reset": session.reset_counters}[action]()
    return {"state": session.state}
