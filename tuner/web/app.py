"""The control plane: REST API, websocket stream and /metrics around one Controller."""

from __future__ import annotations

import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from tuner import __version__
from tuner.control.controller import GIL_SWITCH_S, Controller
from tuner.web import errors
from tuner.web.gate import Gate
from tuner.web.hub import Hub
from tuner.web.job_charts import JobCharts
from tuner.web.limits import BodyLimit
from tuner.web.routes import ab, dashboard, metrics, presets, session, settings, stream, tune
from tuner.web.schemas import COMMON
from tuner.web.steering import Steering

STATIC = Path(__file__).resolve().parent / "static"


class TunerAPI(FastAPI):
    def openapi(self) -> dict[str, Any]:
        """FastAPI documents its own 422 shape; request errors are answered in ours."""
        first = self.openapi_schema is None
        schema = super().openapi()  # made once, then kept
        if first:
            schema["components"]["schemas"]["HTTPValidationError"] = {
                "$ref": "#/components/schemas/ProblemsError"}
        return schema


def create_app(controller: Controller, token: str | None = None, *,
               allowed_hosts: tuple[tuple[str, int | None], ...] = (),
               send_timeout: float = 5.0) -> FastAPI:
    """`token`: when set, every call must carry it. `allowed_hosts`: (name, port or None
    for any) that requests may name besides the address they arrived at (see gate).
    `send_timeout`: seconds a websocket send may take before the client counts as stalled
    and is closed."""
    hub = Hub(controller.snapshot)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        switch = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_S)  # the event loop shares the GIL with decoding
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(hub.run)
                yield
                tg.cancel_scope.cancel()
        finally:
            sys.setswitchinterval(switch)

    # No /docs pages: they load their scripts from the internet. The schema is served
    # below, behind the gate like every other call.
    app = TunerAPI(title="tuner", version=__version__, lifespan=lifespan,
                  description="Live control of a MoE expert-streaming engine: knobs, "
                              "settings, presets, counters.", responses=COMMON,
                  openapi_url=None, docs_url=None, redoc_url=None)
    app.state.controller = controller
    app.state.token = token
    app.state.job_charts = JobCharts()
    app.state.hub = hub
    app.state.steering = Steering(controller.apply_timeout)
    app.state.send_timeout = send_timeout
    errors.install(app)
    app.add_middleware(BodyLimit)
    app.add_middleware(Gate, token=token, allowed_hosts=allowed_hosts)  # the outermost
    for module in (settings, session, presets, ab, tune, stream, metrics, dashboard):
        app.include_router(module.router)
    # The page's scripts and styles, vendored: the page works with no internet. Not
    # secret, so the gate serves them without the token.
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/openapi.json", include_in_schema=False)
    def openapi() -> dict[str, Any]:
        return app.openapi()

    return app
