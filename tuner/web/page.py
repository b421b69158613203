"""The dashboard's live part: a snapshot as HTML fragments (the macros of live.html) that
htmx's websocket extension swaps into the page by id.

The layer table shows one column set at a time, the terminal UI's (one per unit, then all).
Its `<tbody>` goes first in each message, after the `<thead>` when the set changed (the
HTML parser drops table parts that follow other elements; a header swapped with every
update could not be clicked reliably). Its cells carry no ids: htmx matches every id of
swapped content against the page while settling, and with 64 x 33 cell ids (or as many
out-of-band cell swaps) one update took seconds in Chromium.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from itertools import groupby
from typing import Any

from tuner.format import COLUMN_SETS, columns_of, levels
from tuner.vocabulary.counters import HEADLINES, PHASE_FIGURES, PHASES, TOTAL_BY_NAME
from tuner.vocabulary.snapshot import LayerRow, Snapshot
from tuner.web.render import DEFAULT_COLUMNS, HEAT_LEVELS, KNOB_GROUPS, LayerTable, UnitColumns

VIEWS = ("window", "cumulative")
PHASE_COLUMNS = tuple(TOTAL_BY_NAME[key] for key in PHASE_FIGURES)


def heat(values: Iterable[float | None]) -> list[int | None]:
    """Each value's place between the column's lowest and highest, in HEAT_LEVELS steps."""
    return levels(values, HEAT_LEVELS)


def layer_rows(snapshot: Snapshot, view: str) -> list[LayerRow]:
    return snapshot["window"]["layers"] if view == "window" else snapshot["layers"]


def head_units(column_set: str) -> list[UnitColumns]:
    """The set's columns, grouped under one header cell per unit."""
    return [UnitColumns(unit, tuple(group))
            for unit, group in groupby(columns_of(column_set)[1:], key=lambda c: c.unit)]


def layer_table(rows: list[LayerRow], column_set: str) -> LayerTable:
    """The rows with each cell's shade: its place in its column."""
    columns = columns_of(column_set)[1:]
    return LayerTable(columns, rows, {c.name: heat(row.get(c.name) for row in rows)
                                      for c in columns})


def chart_point(snapshot: Snapshot) -> dict[str, Any]:
    """The window's headline figures now, a point of the page's charts."""
    totals = snapshot["window"]["totals"]
    return {"tokens": snapshot["tokens"], "seq": snapshot["seq"], "sent": time.time(),
            "prefetch": snapshot["settings"]["prefetch"],
            **{h.key: totals[h.key] for h in HEADLINES}}


class PageView:
    """One page's view of the stream: what it shows and what it was last sent. `live`:
    the macros of live.html, bound to the page's root path."""

    def __init__(self, live: Any, version: int | None):
        self.view = "window"
        self.columns = DEFAULT_COLUMNS
        self._live = live
        self._sent_version = version  # the knob panel the page already shows
        self._sent_changes: int | None = None
        self._sent_head: str | None = None  # the column set of the header the page shows

    def set_view(self, view: object) -> None:
        if view in VIEWS:
            self.view = str(view)

    def set_columns(self, column_set: object) -> None:
        if column_set in COLUMN_SETS:
            self.columns = str(column_set)

    def render(self, snapshot: Snapshot, shared: dict[tuple[str, str], str] | None = None
               ) -> str:
        """`shared`: the parts every page of a view and column set gets for this snapshot;
        filled by the first page that needs them."""
        live = self._live
        shared = {} if shared is None else shared
        key = (self.view, self.columns)
        if key not in shared:
            table = layer_table(layer_rows(snapshot, self.view), self.columns)
            shared[key] = "".join((live.body(table), live.status(snapshot, self.view),
                                   live.phases(snapshot, PHASES, PHASE_COLUMNS),
                                   live.text(snapshot["text"]),
                                   live.notes(snapshot["notes"])))
        parts = [shared[key]]
        if self._sent_head != self.columns:
            self._sent_head = self.columns
            parts.insert(0, live.head(head_units(self.columns)))
        changes = snapshot["changes"]
        latest_change = changes[-1]["version"] if changes else 0
        if latest_change != self._sent_changes:
            self._sent_changes = latest_change
            parts.append(live.changes(changes))
        if snapshot["settings_version"] != self._sent_version:
            self._sent_version = snapshot["settings_version"]
            parts.append(live.knobs(KNOB_GROUPS, snapshot["settings"]))
        parts.append(live.chart_point(chart_point(snapshot)))
        return "".join(parts)
