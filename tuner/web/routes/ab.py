"""A/B comparisons of two presets, run in the background with the live session paused."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field, field_validator

from tuner.ab_job import DEFAULT_PAIRS, DEFAULT_TOKENS, PAIRS, TOKENS
from tuner.engine.workload import NAMES
from tuner.engine.workload import check as check_workload
from tuner.measure.rules import RULESETS
from tuner.presets import PresetError
from tuner.web.deps import ControllerDep, preset_name
from tuner.web.routes.presets import known
from tuner.web.schemas import BAD_PRESET, MessageError

router = APIRouter(prefix="/api", tags=["ab"])


class ABRequest(BaseModel):
    a: str = Field(description="preset name of arm A (the baseline, also the sentinel)")
    b: str = Field(description="preset name of arm B")
    pairs: int = Field(DEFAULT_PAIRS, ge=PAIRS[0], le=PAIRS[1], description="A B pairs before the "
                       "sentinel A")
    tokens: int = Field(DEFAULT_TOKENS, ge=TOKENS[0], le=TOKENS[1], description="tokens per run")
    workloads: list[str] = Field([], max_length=8, description="workloads to run the pairs "
                                 f"on, each in turn: {', '.join(NAMES)} or a JSON-lines file "
                                 "(empty: the live settings' workload)")
    rules: Literal["", *RULESETS] = Field("", description="rule set deciding the verdict "
                                          "per workload and phase (\"\": timing only)")
    max_kl: float | None = Field(None, ge=0, description="quality gate: reject an arm whose "
                                 "mean KL(exact || served) is above this (nats per token), "
                                 "whatever its speed")
    min_agreement: float | None = Field(None, ge=0, le=100, description="quality gate: "
                                        "reject an arm whose top-1 agreement is below this "
                                        "(%), whatever its speed")

    @field_validator("workloads")
    @classmethod
    def _loadable(cls, names: list[str]) -> list[str]:
        for name in names:
            check_workload(name)  # WorkloadError is a ValueError: a 422 naming the line
        return names


@router.post("/ab", status_code=202, responses={
    400: BAD_PRESET[400], 404: BAD_PRESET[404],
    409: {"model": MessageError, "description": "another A/B is running"}})
def start(body: ABRequest, controller: ControllerDep) -> dict[str, Any]:
    """Starts A B A B ... A on fresh sessions; 409 while another A/B runs."""
    for name in (body.a, body.b):
        known(controller.store, preset_name(name))
    try:
        return controller.ab.start(body.a, body.b, body.pairs, body.tokens, body.workloads,
                                   body.rules, body.max_kl, body.min_agreement).as_dict()
    except PresetError:
        raise  # a broken preset file: the preset error handler names file and line
    except ValueError as err:  # another A/B is running
        raise HTTPException(409, str(err)) from None


@router.get("/ab", responses={404: {"model": MessageError,
                                     "description": "no A/B has been started"}})
def status(controller: ControllerDep) -> dict[str, Any]:
    """The latest A/B: state (running, done, failed), the runs so far, the result."""
    job = controller.ab.job
    if job is None:
        raise HTTPException(404, "no A/B has been started; POST /api/ab")
    return job.as_dict()
