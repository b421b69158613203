"""The browser dashboard: the page, its htmx fragments and its websocket of HTML updates.

It sees the control plane only: every figure and setting it shows comes from a Controller
operation, and every fragment is a template's macro given a typed context
(tuner.web.render)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, Depends, HTTPException, Query, Request, WebSocket
from fastapi.responses import HTMLResponse
from pydantic import BaseModel

from tuner.control.answers import PresetInfo
from tuner.control.controller import Controller
from tuner.control.errors import ApplyTimeout, PresetError, PresetExists, SettingsError
from tuner.control.models import (
    AB_PAIRS,
    BASELINE,
    RULESETS,
    RUN_TOKENS,
    TUNE_TRIALS,
    WORKLOADS,
    ABRequest,
    BudgetsRequest,
    SettingsPatch,
    TuneRequest,
    parse,
)
from tuner.control.tune import SENTINEL_EVERY
from tuner.errors import TunerError
from tuner.format import budgets_line
from tuner.knobs import BY_NAME
from tuner.web.connection import serve_client
from tuner.web.deps import ControllerDep, HubDep, PresetName, SteeringDep
from tuner.web.hub import DEFAULT_RATE, MAX_RATE, MIN_RATE, Outbox
from tuner.web.job_charts import JobCharts
from tuner.web.page import PageView
from tuner.web.render import (
    ABForm,
    Confirm,
    Count,
    JobView,
    Page,
    PresetsView,
    TuneForm,
    macros,
    templates,
)

router = APIRouter(include_in_schema=False)


def _macros(name: str, request: Request | WebSocket) -> Any:
    """A template's macros, bound to the page's root path."""
    return macros(name, request.scope.get("root_path", ""))


def _html(markup: str) -> HTMLResponse:
    # Fragments answer 200 even when they carry a rejection: the message is what the page
    # shows, and a 4xx would also be logged as a console error by the browser.
    return HTMLResponse(markup)


def _count(model: type[BaseModel], field: str, bounds: tuple[int, int]) -> Count:
    return Count(model.model_fields[field].default, *bounds)


def _ab_form(presets: list[PresetInfo]) -> ABForm:
    return ABForm(presets, BASELINE, _count(ABRequest, "pairs", AB_PAIRS),
                  _count(ABRequest, "tokens", RUN_TOKENS), WORKLOADS, tuple(RULESETS))


TUNE_FORM = TuneForm(_count(TuneRequest, "trials", TUNE_TRIALS),
                     _count(TuneRequest, "tokens", RUN_TOKENS), SENTINEL_EVERY)


@router.get("/", response_class=HTMLResponse)
def page(request: Request, controller: ControllerDep) -> HTMLResponse:
    token = request.app.state.token
    base = request.scope.get("root_path", "")
    state = controller.state()
    presets = controller.presets()
    # The page is rendered with this settings version: the stream sends the knob panel
    # again only when the version moves on, so a field being edited is not replaced.
    ws_query = {"rate": DEFAULT_RATE, "version": state.version,
                **({"token": token} if token else {})}
    return templates.TemplateResponse(request, "page.html", {"base": base, "page": Page(
        token=token, ws_url=f"{base}/ui/ws?{urlencode(ws_query)}", settings=state.settings,
        presets=PresetsView(presets), ab_form=_ab_form(presets),
        ab=_ab_view(request, controller), tune_form=TUNE_FORM,
        tune=_tune_view(request, controller))})


def _charts(request: Request) -> JobCharts:
    return request.app.state.job_charts


async def form(request: Request) -> dict[str, str]:
    """htmx posts forms urlencoded: decoded here rather than pulling in a multipart parser;
    the fields are read by the request models."""
    return dict(parse_qsl((await request.body()).decode(errors="replace")))


FormDep = Annotated[dict[str, str], Depends(form)]


@router.post("/ui/knobs/{name}", response_class=HTMLResponse)
async def change_knob(name: str, values: FormDep, request: Request, controller: ControllerDep,
                      steering: SteeringDep) -> HTMLResponse:
    """Applies one field; answers the field, with the server's message and the value still
    in force when the change was rejected."""
    knob = BY_NAME.get(name)
    if knob is None:
        raise HTTPException(404, f"unknown knob {name!r}")
    message = None
    try:
        changes = SettingsPatch.of_texts({name: values.get("value", "")}).root
        await steering.run(controller.change, changes)
    except SettingsError as err:
        message = err.problems.get(name) or str(err)
    except ApplyTimeout as err:
        message = str(err)
    field = _macros("knobs.html", request).field
    return _html(field(knob, controller.state().settings[name], message))


def _presets_panel(request: Request, controller: Controller, message: str,
                   error: bool = False, confirm: Confirm | None = None) -> HTMLResponse:
    panel = _macros("presets.html", request).panel
    return _html(panel(PresetsView(controller.presets(), message, error, confirm)))


@router.post("/ui/presets/{name}/apply", response_class=HTMLResponse)
async def apply_preset(name: PresetName, request: Request, controller: ControllerDep,
                       steering: SteeringDep) -> HTMLResponse:
    try:
        state = await steering.run(controller.apply_preset, name)
    except TunerError as err:
        return _presets_panel(request, controller, str(err), error=True)
    return _presets_panel(request, controller, f"applied {name}: settings version "
                          f"{state.version}")


@router.post("/ui/presets", response_class=HTMLResponse)
def save_preset(values: FormDep, request: Request, controller: ControllerDep) -> HTMLResponse:
    """Saves the current settings; a user preset of that name is replaced only once the
    operator confirmed it (the answer asks), and keeps its description when the field was
    left empty."""
    name, description = values.get("name", ""), values.get("description", "")
    try:
        preset = controller.save_preset(name, description or None,
                                        values.get("overwrite") == "1")
    except PresetExists:
        return _presets_panel(request, controller, f"a user preset named {name} exists: "
                              "replace it with the current settings, or save under another "
                              "name", error=True, confirm=Confirm(name, description))
    except PresetError as err:
        return _presets_panel(request, controller, str(err), error=True)
    return _presets_panel(request, controller,
                          f"saved the current settings as {preset['name']}")


@router.post("/ui/budgets", response_class=HTMLResponse)
async def apply_budgets(values: FormDep, request: Request, controller: ControllerDep,
                        steering: SteeringDep) -> HTMLResponse:
    """Per-layer quotas from the window, applied; answers what was applied and the window
    replayed with and without them, or why nothing was."""
    budgets = _macros("live.html", request).budgets
    try:
        asked = parse(BudgetsRequest, {**values, "apply": True})
        out = await steering.run(controller.window_budgets, asked.weights, asked.apply)
    except TunerError as err:
        return _html(budgets(None, str(err)))
    return _html(budgets(budgets_line(out)))


@router.get("/ui/presets/{name}/diff", response_class=HTMLResponse)
def diff_preset(name: PresetName, request: Request, controller: ControllerDep) -> HTMLResponse:
    diff = _macros("presets.html", request).diff
    try:
        return _html(diff(name, controller.diff_preset(name, None)))
    except TunerError as err:
        return _html(diff(name, [], str(err)))


def _ab_view(request: Request, controller: Controller, message: str | None = None,
             error: bool = False) -> JobView:
    job = controller.ab_status()
    return JobView(job, _charts(request).ab(job), message, error)


def _ab_status(request: Request, controller: Controller, message: str | None = None,
               error: bool = False) -> HTMLResponse:
    status = _macros("ab.html", request).status
    return _html(status(_ab_view(request, controller, message, error)))


@router.post("/ui/ab", response_class=HTMLResponse)
def start_ab(values: FormDep, request: Request, controller: ControllerDep) -> HTMLResponse:
    """Starts an A/B of two presets; a rejection comes back as a message above the status
    of the latest A/B, and starts nothing."""
    try:
        controller.start_ab(parse(ABRequest, values))
    except TunerError as err:  # a bad field, a missing or broken preset; a job running
        return _ab_status(request, controller, str(err), error=True)
    return _ab_status(request, controller)


@router.get("/ui/ab", response_class=HTMLResponse)
def ab_status(request: Request, controller: ControllerDep) -> HTMLResponse:
    """The latest A/B's progress and result; it polls itself while the A/B runs."""
    return _ab_status(request, controller)


def _tune_view(request: Request, controller: Controller, message: str | None = None,
               error: bool = False) -> JobView:
    job = controller.tune_status()
    return JobView(job, _charts(request).tune(job), message, error)


def _tune_status(request: Request, controller: Controller, message: str | None = None,
                 error: bool = False) -> HTMLResponse:
    status = _macros("tune.html", request).status
    return _html(status(_tune_view(request, controller, message, error)))


@router.post("/ui/tune", response_class=HTMLResponse)
def start_tune(values: FormDep, request: Request, controller: ControllerDep) -> HTMLResponse:
    """Starts a tune from the live settings; a rejection comes back as a message above the
    status of the latest tune, and starts nothing."""
    try:
        controller.start_tune(parse(TuneRequest, values))
    except TunerError as err:  # a bad field, space or fix; a job running
        return _tune_status(request, controller, str(err), error=True)
    return _tune_status(request, controller)


@router.get("/ui/tune", response_class=HTMLResponse)
def tune_status(request: Request, controller: ControllerDep) -> HTMLResponse:
    """The latest tune's trials, front and best; it polls itself while the tune runs."""
    return _tune_status(request, controller)


@router.post("/ui/tune/stop", response_class=HTMLResponse)
def stop_tune(request: Request, controller: ControllerDep) -> HTMLResponse:
    controller.stop_tune()
    return _tune_status(request, controller)


@router.websocket("/ui/ws")
async def live(ws: WebSocket, hub: HubDep,
               rate: Annotated[float, Query(ge=MIN_RATE, le=MAX_RATE)] = DEFAULT_RATE,
               version: int | None = None) -> None:
    """HTML fragments for htmx's ws extension, one at a time: the page sends {"ready": true}
    when it has swapped one, {"view": ...} to switch the layer table between the sliding
    window and the whole run and {"columns": ...} to pick its column set. `version`: the
    settings version the page's knob panel shows."""
    view = PageView(_macros("live.html", ws), version)

    async def handle(message: Any, outbox: Outbox) -> None:
        if not isinstance(message, dict):
            return
        if message.get("ready"):
            outbox.grant()
        view.set_view(message.get("view"))
        view.set_columns(message.get("columns"))

    await serve_client(ws, hub, Outbox(rate, paced=True),
                       lambda frame: view.render(frame.snapshot, frame.pages), handle)
