"""The knob table and the live settings."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from tuner.control.answers import Budgets, KnobInfo
from tuner.control.models import BudgetsRequest, SessionState, SettingsPatch
from tuner.web.deps import ControllerDep, SteeringDep
from tuner.web.schemas import BAD_SETTINGS, NOT_APPLIED

router = APIRouter(prefix="/api", tags=["settings"])


@router.get("/knobs")
def knobs(controller: ControllerDep) -> list[KnobInfo]:
    """Every knob: name, env alias, type, default, range, unit, group, live or restart, help."""
    return controller.knobs()


@router.get("/settings", response_model=SessionState)
def current(controller: ControllerDep) -> SessionState:
    return controller.state()


@router.patch("/settings", response_model=SessionState,
              responses={**BAD_SETTINGS, **NOT_APPLIED},
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": SettingsPatch.documented()}}}})
async def change(controller: ControllerDep, steering: SteeringDep,
                 body: Annotated[Any, Body()]) -> SessionState:
    """Changes some knobs. The whole result is validated first: on any bad value nothing is
    applied and the 422 names every bad knob, its value and the allowed range. Answered
    once the engine applied the change at a token boundary (or refused it: 422)."""
    return await steering.run(controller.change, SettingsPatch.of(body).root)


@router.post("/budgets", responses={**BAD_SETTINGS, **NOT_APPLIED})
async def budgets(controller: ControllerDep, steering: SteeringDep,
                  request: BudgetsRequest) -> Budgets:
    """Per-layer quotas for the running arena from the hit curves of the window's routings
    (as `tuner budgets` computes them from a trace), with the window replayed in one shared
    LRU arena, an even split and these quotas; `apply` runs them (arena_split = layers) and
    adds the settings `version`."""
    return await steering.run(controller.window_budgets, request.weights, request.apply)
