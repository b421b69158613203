"""A tune on the running server: Optuna trials as live changes of a session of its own,
from the live settings as the baseline, with the live session paused while it runs."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from tuner.control.answers import TuneStatus
from tuner.control.models import TuneRequest
from tuner.web.deps import ControllerDep
from tuner.web.schemas import BAD_JSON, BUSY, NONE_YET

router = APIRouter(prefix="/api", tags=["tune"])


@router.post("/tune", status_code=202, responses={**BAD_JSON, **BUSY})
def start(request: TuneRequest, controller: ControllerDep) -> TuneStatus:
    """Starts a tune from the live settings; 409 while a tune or an A/B runs, 422 for a
    space or fix that names an unknown knob or a value outside what the knob allows."""
    return controller.start_tune(request)


@router.get("/tune", responses=NONE_YET)
def status(controller: ControllerDep) -> TuneStatus:
    """The latest tune: state, every finished trial, the running one, the Pareto front
    and the best so far."""
    return _started(controller.tune_status())


@router.post("/tune/stop", responses=NONE_YET)
def stop(controller: ControllerDep) -> TuneStatus:
    """Stops the tune at the next token: the trial in flight is kept as failed
    ("stopped"), finished trials stay in the study."""
    return _started(controller.stop_tune())


def _started(job: TuneStatus | None) -> TuneStatus:
    if job is None:
        raise HTTPException(404, "no tune has been started; POST /api/tune")
    return job
