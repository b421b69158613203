"""A tune on the running server: Optuna trials as live changes of a session of its own,
from the live settings as the baseline, with the live session paused while it runs."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from tuner.tune.worker import DEFAULT_OBJECTIVE
from tuner.tune_job import DEFAULT_TOKENS, DEFAULT_TRIALS, TOKENS, TRIALS
from tuner.web.deps import ControllerDep
from tuner.web.schemas import BAD_JSON, MessageError

router = APIRouter(prefix="/api", tags=["tune"])


class TuneRequest(BaseModel):
    trials: int = Field(DEFAULT_TRIALS, ge=TRIALS[0], le=TRIALS[1], description="trials to run")
    tokens: int = Field(DEFAULT_TOKENS, ge=TOKENS[0], le=TOKENS[1],
                        description="measured tokens per trial (as many again warm up first)")
    objective: Literal["ms", "stall"] = Field(DEFAULT_OBJECTIVE, description="time objective: "
                                              "ms per token or exposed stall per token")
    space: str = Field("", max_length=2000, description="search ranges replacing the knob "
                       "table's: knob=low:high or knob=a|b, separated by commas")
    fix: str = Field("", max_length=2000, description="knobs pinned for every trial: "
                     "knob=value, separated by commas")
    max_kl: float | None = Field(None, ge=0, description="quality gate of lossy trials: "
                                 "mean KL(exact || served) at most this (nats per token); "
                                 "with a limit the lossy knobs join the search")
    min_agreement: float | None = Field(None, ge=0, le=100, description="quality gate of "
                                        "lossy trials: top-1 agreement at least this (%)")


NONE_YET = {404: {"model": MessageError, "description": "no tune has been started"}}


@router.post("/tune", status_code=202, responses={
    **BAD_JSON, 409: {"model": MessageError, "description": "a tune or an A/B is running"}})
def start(body: TuneRequest, controller: ControllerDep) -> dict[str, Any]:
    """Starts a tune from the live settings; 409 while a tune or an A/B runs, 422 for a
    space or fix that names an unknown knob or a value outside what the knob allows."""
    from tuner.tune_job import TuneBusy

    try:
        job = controller.tune.start(body.trials, body.tokens, body.objective, body.space,
                                    body.fix, body.max_kl, body.min_agreement)
    except TuneBusy as err:
        raise HTTPException(409, str(err)) from None
    return job.as_dict()


@router.get("/tune", responses=NONE_YET)
def status(controller: ControllerDep) -> dict[str, Any]:
    """The latest tune: state, every finished trial, the running one, the Pareto front
    and the best so far."""
    job = controller.tune.job
    if job is None:
        raise HTTPException(404, "no tune has been started; POST /api/tune")
    return job.as_dict()


@router.post("/tune/stop", responses=NONE_YET)
def stop(controller: ControllerDep) -> dict[str, Any]:
    """Stops the tune at the next token: the trial in flight is kept as failed
    ("stopped"), finished trials stay in the study."""
    job = controller.tune.stop()
    if job is None:
        raise HTTPException(404, "no tune has been started; POST /api/tune")
    return job.as_dict()
