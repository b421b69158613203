"""The browser dashboard: the page, its htmx fragments and its websocket of HTML updates."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, Depends, HTTPException, Query, Request, WebSocket
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from pydantic import BaseModel

from tuner.control.controller import Controller
from tuner.control.errors import ApplyTimeout
from tuner.control.models import (
    AB_PAIRS,
    BASELINE,
    RUN_TOKENS,
    TUNE_TRIALS,
    ABRequest,
    BudgetsRequest,
    TuneRequest,
    parse,
)
from tuner.errors import TunerError
from tuner.format import COLUMN_SETS, budgets_line, knob_text
from tuner.knobs import BY_NAME, GROUPS, KNOBS
from tuner.measure.report import repeated_figure
from tuner.measure.rules import RULESETS
from tuner.presets import PresetError, PresetExists
from tuner.settings import SettingsError, from_texts
from tuner.tune.worker import SENTINEL_EVERY
from tuner.vocabulary.counters import HEADLINES
from tuner.vocabulary.workload import NAMES as WORKLOADS
from tuner.web.connection import serve_client
from tuner.web.deps import ControllerDep, HubDep, PresetName, SteeringDep
from tuner.web.hub import DEFAULT_RATE, MAX_RATE, MIN_RATE, Outbox
from tuner.web.job_charts import JobCharts
from tuner.web.page import DEFAULT_COLUMNS, HEAT_LEVELS, PageView

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).resolve().parent.parent / "templates")
# a figure or a knob's value reads as it does everywhere else
templates.env.filters.update(figure=repeated_figure, knob_text=knob_text)
GROUPED = [(g, [k for k in KNOBS if k.group == g]) for g in GROUPS
           if any(k.group == g for k in KNOBS)]


def _macros(name: str, request: Request | WebSocket):
    """A template's macros, bound to what they need from the page."""
    return templates.get_template(name).make_module({"base": request.scope.get("root_path", "")})


def _html(markup: str) -> HTMLResponse:
    # Fragments answer 200 even when they carry a rejection: the message is what the page
    # shows, and a 4xx would also be logged as a console error by the browser.
    return HTMLResponse(markup)


@router.get("/", response_class=HTMLResponse)
def page(request: Request, controller: ControllerDep) -> HTMLResponse:
    token = request.app.state.token
    base = request.scope.get("root_path", "")
    state = controller.state()
    # The page is rendered with this settings version: the stream sends the knob panel
    # again only when the version moves on, so a field being edited is not replaced.
    ws_query = {"rate": DEFAULT_RATE, "version": state.version,
                **({"token": token} if token else {})}
    return templates.TemplateResponse(request, "page.html", {
        "base": base,
        "static": f"{base}/static",
        "token": token,
        "ws_url": f"{base}/ui/ws?{urlencode(ws_query)}",
        "groups": GROUPED,
        "settings": state.settings,
        "preset_list": controller.store.list(),
        "ab_job": controller.ab.job,
        "ab_chart": _charts(request).ab(controller.ab.job),
        "ab_form": (AB_PAIRS, RUN_TOKENS, BASELINE, _default(ABRequest, "pairs"),
                    _default(ABRequest, "tokens"), WORKLOADS, tuple(RULESETS)),
        "headlines": HEADLINES,
        "column_sets": COLUMN_SETS,
        "column_set": DEFAULT_COLUMNS,
        "tune_job": controller.tune_status(),
        "tune_chart": _charts(request).tune(controller.tune.job),
        "tune_form": (TUNE_TRIALS, RUN_TOKENS,
                      _default(TuneRequest, "trials"), _default(TuneRequest, "tokens"),
                      SENTINEL_EVERY),
        "levels": HEAT_LEVELS,
    })


def _charts(request: Request) -> JobCharts:
    return request.app.state.job_charts


def _default(model: type[BaseModel], field: str) -> Any:
    return model.model_fields[field].default


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
    field = _macros("knobs.html", request).field
    try:
        await steering.run(controller.change, from_texts({name: values.get("value", "")}))
    except SettingsError as err:
        message = err.problems.get(name) or str(err)
        return _html(field(knob, getattr(controller.settings, name), message))
    except ApplyTimeout as err:
        return _html(field(knob, getattr(controller.settings, name), str(err)))
    return _html(field(knob, getattr(controller.settings, name)))


def _presets_panel(request: Request, controller: Controller, message: str,
                   error: bool = False, confirm: tuple[str, str] | None = None
                   ) -> HTMLResponse:
    panel = _macros("presets.html", request).panel
    return _html(panel(controller.store.list(), message, error, confirm))


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
                              "name", error=True, confirm=(name, description))
    except PresetError as err:
        return _presets_panel(request, controller, str(err), error=True)
    return _presets_panel(request, controller,
                          f"saved the current settings as {preset['name']}")


@router.post("/ui/budgets", response_class=HTMLResponse)
async def apply_budgets(values: FormDep, controller: ControllerDep,
                        steering: SteeringDep) -> HTMLResponse:
    """Per-layer quotas from the window, applied; answers what was applied and the window
    replayed with and without them, or why nothing was."""
    try:
        asked = parse(BudgetsRequest, {**values, "apply": True})
        out = await steering.run(controller.window_budgets, asked.weights, asked.apply)
    except TunerError as err:
        return _html(f'<span class="error">{escape(str(err))}</span>')
    return _html(escape(budgets_line(out)))


@router.get("/ui/presets/{name}/diff", response_class=HTMLResponse)
def diff_preset(name: PresetName, request: Request, controller: ControllerDep) -> HTMLResponse:
    try:
        rows = controller.diff_preset(name, None)
    except TunerError as err:
        return _html(f'<p class="error">{escape(str(err))}</p>')
    return _html(_macros("presets.html", request).diff(name, rows))


def _ab_status(request: Request, controller: Controller, message: str | None = None,
               error: bool = False) -> HTMLResponse:
    status = _macros("ab.html", request).status
    job = controller.ab.job
    return _html(status(job, _charts(request).ab(job), message, error))


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


def _tune_status(request: Request, controller: Controller, message: str | None = None,
                 error: bool = False) -> HTMLResponse:
    status = _macros("tune.html", request).status
    return _html(status(controller.tune_status(), _charts(request).tune(controller.tune.job),
                        message, error))


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
    knob_panel = _macros("knobs.html", ws).panel
    view = PageView(lambda settings: str(knob_panel(GROUPED, settings)), version)

    async def handle(message: Any, outbox: Outbox) -> None:
        if not isinstance(message, dict):
            return
        if message.get("ready"):
            outbox.grant()
        view.set_view(message.get("view"))
        view.set_columns(message.get("columns"))

    await serve_client(ws, hub, Outbox(rate, paced=True),
                       lambda frame: view.render(frame.snapshot, frame.pages), handle)
