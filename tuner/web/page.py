"""The dashboard's live part: a snapshot rendered as HTML fragments that htmx's websocket
extension swaps into the page by id.

Every figure is taken from the snapshot as it is; formatting only shortens (bytes as
KiB/MiB, floats to two decimals). The layer table goes as one `<tbody>`, first in each
message (the HTML parser drops table parts that follow other elements). Its cells carry no
ids: htmx matches every id of swapped content against the page while settling, and with
64 x 33 cell ids (or as many out-of-band cell swaps) one update took seconds in Chromium.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from html import escape
from typing import Any

from tuner.engine.counters import COUNTERS, DERIVED
from tuner.format import levels

COLUMNS = (*COUNTERS, *DERIVED)
HEAT_LEVELS = 8
VIEWS = ("window", "cumulative")

# What the charts plot, from the snapshot's window totals: (key, title, unit).
CHARTS = (
    ("ms_per_token", "ms per token", "ms"),
    ("hit_rate", "hit rate", "%"),
    ("bytes_per_token", "bytes per token", "bytes"),
    ("sync_misses_per_token", "sync misses per token", "experts"),
    ("issue_usefulness", "prefetch usefulness (useful / issued)", "%"),
)


def fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit == "bytes" and value >= 1024:
        for scale, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if value >= scale:
                return f"{value / scale:.1f} {suffix}"
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


def heat(values: list[Any]) -> list[int | None]:
    """Each value's place between the column's lowest and highest, in HEAT_LEVELS steps."""
    return levels(values, HEAT_LEVELS)


def layer_rows(snapshot: dict[str, Any], view: str) -> list[dict[str, Any]]:
    return snapshot["window"]["layers"] if view == "window" else snapshot["layers"]


def table_html(rows: list[dict[str, Any]]) -> str:
    columns = []
    for col in COLUMNS:
        values = [row[col.name] for row in rows]
        columns.append([(fmt(v, col.unit), level) for v, level in zip(values, heat(values))])
    out = ['<tbody id="layers-body">']
    for i, row in enumerate(rows):
        layer = row["layer"]
        out.append(f'<tr data-layer="{layer}"><td>{layer}</td>')
        for col, cells in zip(COLUMNS, columns):
            text, level = cells[i]
            heat_class = "" if level is None else f' class="h{level}"'
            out.append(f'<td data-col="{col.name}"{heat_class}>{escape(text)}</td>')
        out.append("</tr>")
    out.append("</tbody>")
    return "".join(out)


def status_html(snapshot: dict[str, Any], view: str) -> str:
    totals = snapshot["totals"]
    model = snapshot["model"]
    fields = {
        "st-state": snapshot["state"] + (f": {snapshot['error']}" if snapshot["error"] else ""),
        "st-version": str(snapshot["settings_version"]),
        "st-tokens": str(snapshot["tokens"]),
        "st-toks": fmt(totals["tok_s"]),
        "st-model": f"{model['name']} ({model['layers']} layers x {model['experts']} experts, "
                    f"top-{model['top_k']})",
        "st-device": snapshot["device"],
        "st-arena": f"{snapshot['arena']['slots']} slots, {snapshot['arena']['policy']}",
        "st-view": f"{view} ({snapshot['window']['tokens']} tokens)" if view == "window"
                   else f"{view} ({snapshot['tokens']} tokens)",
    }
    classes = {"st-state": f' class="state-{snapshot["state"]}"'}
    return "".join(f'<span id="{k}"{classes.get(k, "")}>{escape(v)}</span>'
                   for k, v in fields.items())


def text_html(text: dict[str, Any] | None) -> str:
    """The current conversation, when the model has a tokenizer."""
    if text is None:
        return '<div id="text" class="none">this model has no tokenizer.json: no text</div>'
    return (f'<div id="text"><p><b>prompt</b> {escape(text["prompt"])}</p>'
            f'<p><b>output</b> {escape(text["output"])}</p></div>')


def chart_point_html(snapshot: dict[str, Any]) -> str:
    totals = snapshot["window"]["totals"]
    point = {"tokens": snapshot["tokens"], "seq": snapshot["seq"], "sent": time.time(),
             **{key: totals[key] for key, _, _ in CHARTS}}
    return f'<div id="chart-point" data-point="{escape(json.dumps(point))}"></div>'


def changes_html(changes: list[dict[str, Any]]) -> str:
    return f'<div id="chart-changes" data-changes="{escape(json.dumps(changes))}"></div>'


class PageView:
    """One page's view of the stream: what it shows and what it was last sent."""

    def __init__(self, knob_panel: Callable[[dict[str, Any]], str], version: int | None):
        self.view = "window"
        self._knob_panel = knob_panel
        self._sent_version = version  # the knob panel the page already shows
        self._sent_changes: int | None = None

    def set_view(self, view: str) -> None:
        if view in VIEWS:
            self.view = view

    def render(self, snapshot: dict[str, Any], shared: dict[str, str] | None = None) -> str:
        """`shared`: the parts every page of a view gets for this snapshot, by view; filled
        by the first page that needs them."""
        shared = {} if shared is None else shared
        if self.view not in shared:
            shared[self.view] = (table_html(layer_rows(snapshot, self.view))
                                 + status_html(snapshot, self.view)
                                 + text_html(snapshot.get("text")))
        parts = [shared[self.view]]
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
