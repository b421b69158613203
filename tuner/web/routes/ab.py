"""A/B comparisons of two presets, run in the background with the live session paused."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from tuner.control.answers import ABStatus
from tuner.control.models import ABRequest
from tuner.web.deps import ControllerDep
from tuner.web.schemas import BAD_JSON, BAD_PRESET, BUSY, NONE_YET

router = APIRouter(prefix="/api", tags=["ab"])


@router.post("/ab", status_code=202, responses={**BAD_JSON, 404: BAD_PRESET[404], **BUSY})
def start(request: ABRequest, controller: ControllerDep) -> ABStatus:
    """Starts A B A B ... A on fresh sessions; 409 while an A/B or a tune runs."""
    return controller.start_ab(request)


@router.get("/ab", responses=NONE_YET)
def status(controller: ControllerDep) -> ABStatus:
    """The latest A/B: state (running, done, failed), the runs so far, the result."""
    job = controller.ab_status()
    if job is None:
        raise HTTPException(404, "no A/B has been started; POST /api/ab")
    return job
