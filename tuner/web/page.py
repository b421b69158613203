"""The dashboard's live part: a snapshot rendered as HTML fragments that htmx's websocket
extension swaps into the page by id.

Every figure is the snapshot's own, written by the one formatter (`tuner.format.figure`).
The layer table shows one column set at a time, the terminal UI's (one per unit, then all).
Its `<tbody>` goes first in each message, after the `<thead>` when the set changed (the
HTML parser drops table parts that follow other elements; a header swapped with every
update could not be clicked reliably). Its cells carry no ids:
htmx matches every id of swapped content against the page while settling, and with 64 x 33
cell ids (or as many out-of-band cell swaps) one update took seconds in Chromium.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from html import escape
from itertools import groupby
from typing import Any

from tuner.format import COLUMN_SETS, LAYER, columns_of, figure, levels
from tuner.vocabulary.counters import HEADLINES, PHASE_FIGURES, PHASES, TOTAL_BY_NAME

HEAT_LEVELS = 8
VIEWS = ("window", "cumulative")
DEFAULT_COLUMNS = COLUMN_SETS[0]


def heat(values: list[Any]) -> list[int | None]:
    """Each value's place between the column's lowest and highest, in HEAT_LEVELS steps."""
    return levels(values, HEAT_LEVELS)


def layer_rows(snapshot: dict[str, Any], view: str) -> list[dict[str, Any]]:
    return snapshot["window"]["layers"] if view == "window" else snapshot["layers"]


def head_html(column_set: str) -> str:
    """The layer table's header: the layer column, then the set's columns under one cell
    per unit."""
    columns = columns_of(column_set)[1:]
    out = ['<thead id="layers-head"><tr><th rowspan="2" data-col="layer">layer</th>']
    for unit, group in groupby(columns, key=lambda c: c.unit):
        out.append(f'<th class="unit" colspan="{len(list(group))}">{escape(unit)}</th>')
    out.append("</tr><tr>")
    for c in columns:
        out.append(f'<th data-col="{c.name}" title="{escape(c.help)} ({escape(c.unit)})">'
                   f'{c.name}</th>')
    out.append("</tr></thead>")
    return "".join(out)


def body_html(rows: list[dict[str, Any]], column_set: str) -> str:
    """The layer table's rows: each cell written by the one formatter, shaded by its place
    in its column, and carrying its value for sorting."""
    columns = columns_of(column_set)[1:]
    out = ['<tbody id="layers-body">']
    cells = []
    for c in columns:
        values = [row.get(c.name) for row in rows]
        cells.append([(figure(v, c.unit), v, level) for v, level in zip(values, heat(values))])
    for i, row in enumerate(rows):
        layer = row[LAYER.name]
        out.append(f'<tr data-layer="{layer}"><th>{layer}</th>')
        for c, column in zip(columns, cells):
            text, value, level = column[i]
            shade = "" if level is None else f' class="h{level}"'
            raw = "" if value is None else f' data-v="{value}"'
            out.append(f'<td data-col="{c.name}"{shade}{raw}>{escape(text)}</td>')
        out.append("</tr>")
    out.append("</tbody>")
    return "".join(out)


def status_html(snapshot: dict[str, Any], view: str) -> str:
    totals = snapshot["totals"]
    model = snapshot["model"]
    fields = {
        "st-state": snapshot["state"] + (f": {snapshot['error']}" if snapshot["error"] else ""),
        "st-version": str(snapshot["settings_version"]),
        "st-tokens": figure(snapshot["tokens"]),
        "st-toks": figure(totals["tok_s"], "tokens/s"),
        "st-model": f"{model['name']} ({model['layers']} layers x {model['experts']} experts, "
                    f"top-{model['top_k']})",
        "st-device": snapshot["device"],
        "st-arena": f"{snapshot['arena']['slots']} slots, {snapshot['arena']['policy']}",
        "st-workload": f"{snapshot['workload']['name']}, turn {snapshot['workload']['turn']}",
        "st-view": f"{view} ({figure(snapshot['window']['tokens'])} tokens)" if view == "window"
                   else f"{view} ({figure(snapshot['tokens'])} tokens)",
        "st-window": figure(snapshot["window"]["tokens"]),
    }
    classes = {"st-state": f' class="state-{snapshot["state"]}"'}
    return "".join(f'<span id="{k}"{classes.get(k, "")}>{escape(v)}</span>'
                   for k, v in fields.items())


def phases_html(snapshot: dict[str, Any]) -> str:
    """Prefill and decode, cumulative: each its own profile. One line per phase, no table:
    table parts after the layer table's `<tbody>` in one message would be re-parented."""
    lines = "".join(
        f'<p class="phase"><b>{phase}</b> ' + " · ".join(
            f'<span title="{escape(c.help)}">{escape(c.name)} '
            f"{escape(figure(snapshot['phases'][phase][c.name], c.unit))} "
            f"<small>{escape(c.unit)}</small></span>"
            for c in (TOTAL_BY_NAME[key] for key in PHASE_FIGURES)) + "</p>"
        for phase in PHASES)
    return f'<div id="phases">{lines}</div>'


def text_html(text: dict[str, Any] | None) -> str:
    """The current conversation, when the model has a tokenizer."""
    if text is None:
        return '<div id="text" class="none">this model has no tokenizer.json: no text</div>'
    return (f'<div id="text"><p><b>prompt</b> {escape(text["prompt"])}</p>'
            f'<p><b>output</b> {escape(text["output"])}</p></div>')


def notes_html(notes: list[str]) -> str:
    """The engine's notes on the running settings (what is off, how to read a figure)."""
    items = "".join(f"<li>{escape(n)}</li>" for n in notes)
    return f'<ul id="notes" role="status">{items}</ul>'


def chart_point_html(snapshot: dict[str, Any]) -> str:
    totals = snapshot["window"]["totals"]
    point = {"tokens": snapshot["tokens"], "seq": snapshot["seq"], "sent": time.time(),
             "prefetch": snapshot["settings"]["prefetch"],
             **{h.key: totals[h.key] for h in HEADLINES}}
    return f'<div id="chart-point" data-point="{escape(json.dumps(point))}"></div>'


def changes_html(changes: list[dict[str, Any]]) -> str:
    return f'<div id="chart-changes" data-changes="{escape(json.dumps(changes))}"></div>'


class PageView:
    """One page's view of the stream: what it shows and what it was last sent."""

    def __init__(self, knob_panel: Callable[[dict[str, Any]], str], version: int | None):
        self.view = "window"
        self.columns = DEFAULT_COLUMNS
        self._knob_panel = knob_panel
        self._sent_version = version  # the knob panel the page already shows
        self._sent_changes: int | None = None
        self._sent_head: str | None = None  # the column set of the header the page shows

    def set_view(self, view: Any) -> None:
        if view in VIEWS:
            self.view = view

    def set_columns(self, column_set: Any) -> None:
        if column_set in COLUMN_SETS:
            self.columns = column_set

    def render(self, snapshot: dict[str, Any], shared: dict[Any, str] | None = None) -> str:
        """`shared`: the parts every page of a view and column set gets for this snapshot;
        filled by the first page that needs them."""
        shared = {} if shared is None else shared
        key = (self.view, self.columns)
        if key not in shared:
            shared[key] = (body_html(layer_rows(snapshot, self.view), self.columns)
                           + status_html(snapshot, self.view)
                           + phases_html(snapshot)
                           + text_html(snapshot.get("text"))
                           + notes_html(snapshot["notes"]))
        parts = [shared[key]]
        if self._sent_head != self.columns:
            self._sent_head = self.columns
            parts.insert(0, head_html(self.columns))
        changes = snapshot["changes"]
        latest_change = changes[-1]["version"] if changes else 0
        if latest_change != self._sent_changes:
            self._sent_changes = latest_change
            parts.append(changes_html(changes))
        if snapshot["settings_version"] != self._sent_version:
            self._sent_version = snapshot["settings_version"]
            parts.append(self._knob_panel(snapshot["settings"]))
        parts.append(chart_point_html(snapshot))
        return "".join(parts)
