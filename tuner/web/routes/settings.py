"""The knob table and the live settings."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from tuner.knobs import KNOBS
from tuner.settings import SettingsError
from tuner.web.deps import ControllerDep, SteeringDep
from tuner.web.schemas import (
    BAD_SETTINGS,
    NOT_APPLIED,
    BudgetsRequest,
    SettingsState,
    settings_patch_schema,
)

router = APIRouter(prefix="/api", tags=["settings"])


@router.get("/knobs")
def knobs() -> list[dict[str, Any]]:
    """Every knob: name, env alias, type, default, range, unit, group, live or restart, help."""
    return [k.as_dict() for k in KNOBS]


@router.get("/settings", response_model=SettingsState)
def current(controller: ControllerDep) -> dict[str, Any]:
    return controller.state()


@router.patch("/settings", response_model=SettingsState,
              responses={**BAD_SETTINGS, **NOT_APPLIED},
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": settings_patch_schema()}}}})
async def change(controller: ControllerDep, steering: SteeringDep,
                 changes: Annotated[Any, Body()]) -> dict[str, Any]:
    """Changes some knobs. The whole result is validated first: on any bad value nothing is
    applied and the 422 names every bad knob, its value and the allowed range. Answered
    once the engine applied the change at a token boundary (or refused it: 422)."""
    if not isinstance(changes, dict):
        raise SettingsError({"settings": "the body must be a JSON object of knob: value, "
                                         f"got {type(changes).__name__}"})
    await steering.run(controller.change, changes)
    return controller.state()


@router.post("/budgets", responses={**BAD_SETTINGS, **NOT_APPLIED})
async def budgets(controller: ControllerDep, steering: SteeringDep,
                  request: BudgetsRequest) -> dict[str, Any]:
    """Per-layer quotas for the running arena from the hit curves of the window's routings
    (as `tuner budgets` computes them from a trace), with the window replayed in one shared
    LRU arena, an even split and these quotas; `apply` runs them (arena_split = layers) and
    adds the settings `version`."""
    return await steering.run(controller.window_budgets, request.weights, request.apply)
