"""Dependencies shared by the routers, as `Annotated` aliases."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException
from starlette.requests import HTTPConnection

from tuner.control.controller import Controller
from tuner.control.errors import PresetError
from tuner.control.models import check_name
from tuner.web.hub import Hub
from tuner.web.steering import Steering


def get_controller(conn: HTTPConnection) -> Controller:
    return conn.app.state.controller


def get_hub(conn: HTTPConnection) -> Hub:
    return conn.app.state.hub


def get_steering(conn: HTTPConnection) -> Steering:
    return conn.app.state.steering


ControllerDep = Annotated[Controller, Depends(get_controller)]
HubDep = Annotated[Hub, Depends(get_hub)]
SteeringDep = Annotated[Steering, Depends(get_steering)]


def preset_name(name: str) -> str:
    """The {name} path parameter, checked so it cannot leave the presets folder."""
    try:
        return check_name(name)
    except PresetError as err:
        raise HTTPException(400, str(err)) from None


PresetName = Annotated[str, Depends(preset_name)]
