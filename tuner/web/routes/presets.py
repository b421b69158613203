"""Presets: list, read, save the current settings, apply, delete, diff."""

from __future__ import annotations

from fastapi import APIRouter, Query

from tuner.control.answers import KnobDiff, PresetBody, PresetInfo
from tuner.control.models import SaveRequest, SessionState
from tuner.web.deps import ControllerDep, PresetName, SteeringDep, preset_name
from tuner.web.schemas import (
    BAD_JSON,
    BAD_PRESET,
    NOT_APPLIED,
    SAVE_CONFLICT,
    UNWRITABLE,
    MessageError,
    ProblemsError,
)

router = APIRouter(prefix="/api/presets", tags=["presets"])


@router.get("", response_model=list[PresetInfo])
def list_presets(controller: ControllerDep) -> list[PresetInfo]:
    """Every preset; a broken file is listed with its error instead of failing the list."""
    return controller.presets()


@router.get("/{name}", response_model=PresetBody, responses=BAD_PRESET)
def show(name: PresetName, controller: ControllerDep) -> PresetBody:
    return controller.preset(name)  # PresetNotFound: 404, naming the known ones


@router.post("/{name}", response_model=PresetBody, status_code=201,
             responses={**BAD_JSON, 400: BAD_PRESET[400], **UNWRITABLE, **SAVE_CONFLICT,
                        403: {"model": MessageError, "description": "a shipped preset has "
                              "that name, or the presets folder takes no writes"},
                        422: {"model": ProblemsError}})
def save(name: PresetName, body: SaveRequest, controller: ControllerDep) -> PresetBody:
    """Saves the current settings (only the knobs that differ from the defaults). A user
    preset of that name is replaced only with `overwrite`; a shipped name is refused."""
    return controller.save_preset(name, body.description, body.overwrite)


@router.post("/{name}/apply", response_model=SessionState,
             responses={**BAD_PRESET, **NOT_APPLIED,
                        422: {"model": MessageError | ProblemsError}})
async def apply(name: PresetName, controller: ControllerDep,
                steering: SteeringDep) -> SessionState:
    """The preset's knobs on top of the defaults (the session knobs stay unless it sets
    them), applied at the next token boundary."""
    return await steering.run(controller.apply_preset, name)


@router.delete("/{name}", status_code=204, responses={
    **BAD_PRESET, **UNWRITABLE, 403: {"model": MessageError, "description": "a shipped "
                                      "preset, or a presets folder that takes no writes"}})
def delete(name: PresetName, controller: ControllerDep) -> None:
    controller.delete_preset(name)  # a shipped one: PresetReadOnly, answered 403


@router.get("/{name}/diff", response_model=list[KnobDiff], responses=BAD_PRESET)
def diff(name: PresetName, controller: ControllerDep,
         against: str | None = Query(None, description="another preset; none = the current "
                                     "settings")) -> list[KnobDiff]:
    """Knobs whose values differ: `a` in this preset, `b` in `against`."""
    if against is not None:
        preset_name(against)
    return controller.diff_preset(name, against)
