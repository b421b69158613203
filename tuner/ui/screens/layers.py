"""Layers: every layer's counters, over the sliding window or the whole run."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType

from tuner.format import ALL, figure
from tuner.ui.screens.base import SnapshotScreen
from tuner.ui.widgets.layer_table import LayerTable
from tuner.ui.widgets.readout import Readout
from tuner.vocabulary.snapshot import Snapshot


class LayersScreen(SnapshotScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("w", "toggle_window", "Window",
                tooltip="counters over the sliding window or since the last reset"),
        Binding("s", "sort", "Sort", tooltip="sort by the cursor's column; again: reverse"),
        Binding("c", "next_columns", "Columns",
                tooltip="the next set of columns: by unit, then all of them"),
    ]

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.windowed = True

    def compose_body(self) -> ComposeResult:
        yield Readout(id="layers-caption")
        yield LayerTable(id="layers")

    def show(self, snap: Snapshot) -> None:
        table = self.query_one(LayerTable)
        if self.windowed:
            span = f"window: the last {figure(snap['window']['tokens'])} tokens"
            table.show(snap["window"]["layers"])
        else:
            span = f"cumulative: {figure(snap['tokens'])} tokens"
            table.show(snap["layers"])
        columns = ("all columns" if table.column_set == ALL
                   else f"columns in {table.column_set}")
        order = "no sort"
        if table.sort_column:
            order = (f"sorted by {table.sort_column}, "
                     f"{'largest' if table.largest_first else 'smallest'} first")
        self.query_one("#layers-caption", Readout).show_text(
            f"{span} · {columns} · {order}")

    def action_toggle_window(self) -> None:
        self.windowed = not self.windowed
        self.app.repaint(force=True)

    def action_next_columns(self) -> None:
        self.query_one(LayerTable).next_column_set()
        self.app.repaint(force=True)

    def action_sort(self) -> None:
        table = self.query_one(LayerTable)
        table.sort_by(table.cursor_column_name)
        self.app.repaint(force=True)

    def on_layer_table_header_selected(self, event: LayerTable.HeaderSelected) -> None:
        self.query_one(LayerTable).sort_by(event.column)
        self.app.repaint(force=True)
