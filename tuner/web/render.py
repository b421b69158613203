"""The page's HTML, written one way: Jinja templates (tuner/web/templates), each given a
named, typed context (the dataclasses below, the control plane's answers and the
snapshot), every figure and knob value written by the one formatter (tuner.format).

A template's macros render the page's fragments: htmx swaps them in where the page's own
requests and its websocket send them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from fastapi.templating import Jinja2Templates

from tuner.control.answers import ABStatus, KnobValue, PresetInfo, TuneStatus
from tuner.format import COLUMN_SETS, figure, knob_text, repeated_figure
from tuner.knobs import GROUPS, KNOBS, Knob
from tuner.vocabulary.counters import HEADLINES, Headline, Shown
from tuner.vocabulary.snapshot import LayerRow

HEAT_LEVELS = 8  # shades of a layer table's cell: its place in its column
DEFAULT_COLUMNS = COLUMN_SETS[0]

templates = Jinja2Templates(directory=Path(__file__).resolve().parent / "templates")
# a figure or a knob's value reads as it does everywhere else
templates.env.filters.update(figure=figure, figures=repeated_figure, knob_text=knob_text)


def macros(name: str, base: str) -> Any:
    """The macros of template `name`, bound to the page's root path `base` (the URLs of
    the page's own requests start with it)."""
    return templates.get_template(name).make_module({"base": base})


# -- what the templates are given ----------------------------------------------------------
@dataclass(frozen=True)
class KnobGroup:
    name: str
    knobs: tuple[Knob, ...]


KNOB_GROUPS = tuple(KnobGroup(g, tuple(k for k in KNOBS if k.group == g)) for g in GROUPS
                    if any(k.group == g for k in KNOBS))


@dataclass(frozen=True)
class Count:
    """A form's whole-number field: its default and its range."""

    default: int
    low: int
    high: int


@dataclass(frozen=True)
class ABForm:
    presets: list[PresetInfo]  # the arms offered
    baseline: str  # arm A unless changed
    pairs: Count
    tokens: Count
    workloads: tuple[str, ...]  # the built-in ones
    rulesets: tuple[str, ...]


@dataclass(frozen=True)
class TuneForm:
    trials: Count
    tokens: Count
    sentinel_every: int  # trials between two measurements of a worker's baseline


J = TypeVar("J", ABStatus, TuneStatus)


@dataclass(frozen=True)
class JobView(Generic[J]):
    """The latest job of a kind (None: none started), its chart once it is over, and the
    answer to what was just asked of it."""

    job: J | None
    chart: str = ""  # an <svg> element
    message: str | None = None
    error: bool = False


@dataclass(frozen=True)
class Confirm:
    """A save that would replace a user preset, asked about before it is done."""

    name: str
    description: str


@dataclass(frozen=True)
class PresetsView:
    presets: list[PresetInfo]
    message: str | None = None
    error: bool = False
    confirm: Confirm | None = None


@dataclass(frozen=True)
class Page:
    """The whole page (page.html), as first served; the stream fills in the rest."""

    token: str | None
    ws_url: str
    settings: dict[str, KnobValue]  # every knob's running value
    presets: PresetsView
    ab_form: ABForm
    ab: JobView[ABStatus]
    tune_form: TuneForm
    tune: JobView[TuneStatus]
    knob_groups: tuple[KnobGroup, ...] = KNOB_GROUPS
    headlines: tuple[Headline, ...] = HEADLINES
    column_sets: tuple[str, ...] = COLUMN_SETS
    column_set: str = DEFAULT_COLUMNS
    levels: int = HEAT_LEVELS


@dataclass(frozen=True)
class UnitColumns:
    """The layer table's columns of one unit, under one header cell."""

    unit: str
    columns: tuple[Shown, ...]


@dataclass(frozen=True)
class LayerTable:
    columns: tuple[Shown, ...]
    rows: list[LayerRow]
    levels: dict[str, list[int | None]]  # column -> each row's shade, or None
