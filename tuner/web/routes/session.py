"""The session: its snapshot, its per-expert figures, its live hit curves and its run
state."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response

from tuner.control.answers import Curve
from tuner.control.models import RunState
from tuner.vocabulary.snapshot import Experts, Snapshot
from tuner.web.deps import ControllerDep

router = APIRouter(prefix="/api", tags=["session"])


@router.get("/snapshot", response_model=Snapshot)
def snapshot(controller: ControllerDep) -> Snapshot:
    """Everything the engine measured, as sent on the websocket (see `schema`)."""
    return controller.snapshot()


@router.get("/experts", response_model=Experts)
def experts(controller: ControllerDep,
            view: Literal["window", "cumulative"] = "window") -> Experts:
    """Per layer and expert: routings and sync misses over the sliding window or the whole
    run, and which experts are resident (taken at a token boundary, `resident_at_token`;
    null until the decode thread has taken the first map, a moment after the first ask)."""
    return controller.experts(view)


@router.get("/curve", response_model=Curve, responses={
    204: {"description": "no curve yet: the first is being computed; ask again"}})
def curve(controller: ControllerDep) -> Curve | Response:
    """Hit rate over arena sizes for the window's own routing, replayed under LRU, 2Q and
    Belady's bound, with the current arena, the live hit rate, the gap to the bound and
    what the next size up buys. Recomputed in the background once the session moved on."""
    latest = controller.curve()
    return Response(status_code=204) if latest is None else latest


@router.post("/session/{action}", response_model=RunState)
def control(controller: ControllerDep,
            action: Literal["pause", "resume", "reset"]) -> RunState:
    """pause / resume decoding, or reset the counters at the next token boundary (answered
    once that boundary passed, or after the apply timeout with the reset still pending)."""
    return {"pause": controller.pause, "resume": controller.resume,
            "reset": controller.reset}[action]()
