"""Prometheus scrape endpoint."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from tuner.web.deps import ControllerDep
from tuner.web.prometheus import CONTENT_TYPE, render

router = APIRouter(tags=["metrics"])


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(controller: ControllerDep) -> PlainTextResponse:
    """Per-layer counters labelled by layer, in the Prometheus text format."""
    return PlainTextResponse(render(controller.snapshot()), media_type=CONTENT_TYPE)
