"""The per-layer counters as a table: one keyed row per layer, updated in place.

Columns come from the engine's counter tables (`DERIVED` rates first, then the raw
`COUNTERS`), with fixed widths so an update never re-measures the table. They are shown
one unit at a time (rates, expert counts, times, bytes, predictor routings) or all at
once: a DataTable renders every column of every visible row again after any update, so the
number of columns shown is what a repaint costs. Each cell is shaded by its place between
the smallest and largest value of its column, and only cells whose text or shade changed
are written.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.widgets import DataTable

from tuner.engine.counters import COUNTERS, DERIVED, Column
from tuner.format import figure, levels

LAYER = Column("layer", "", "the layer's index")
COLUMNS: tuple[Column, ...] = (LAYER, *DERIVED, *COUNTERS)
ALL = "all"
# The column sets, in the order the columns come: one per unit, then all of them.
COLUMN_SETS: tuple[str, ...] = (*dict.fromkeys(c.unit for c in COLUMNS[1:]), ALL)
SHADES = 6


def width(column: Column) -> int:
    return max(len(column.name), 9)  # 9 fits "1,023.9 MiB" minus its unit's space


def columns_of(column_set: str) -> tuple[Column, ...]:
    return tuple(c for c in COLUMNS if c is LAYER or column_set in (ALL, c.unit))


class LayerTable(DataTable):
    def __init__(self, **kwargs: Any):
        super().__init__(cursor_type="cell", **kwargs)
        self.sort_column: str | None = None
        self.largest_first = True
        self.column_set = COLUMN_SETS[0]
        self.shown_columns: tuple[Column, ...] = ()
        self._values: dict[int, dict[str, Any]] = {}  # layer -> column -> raw value
        self._shown: dict[tuple[int, str], tuple[str, int | None]] = {}
        self._shades: list[Style] = []
        self.show_column_set(self.column_set)

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._make_shades())

    def _make_shades(self) -> None:
        variables = self.app.theme_variables
        low = Color.parse(variables.get("surface", "black"))
        high = Color.parse(variables.get("accent", "orange"))
        self._shades = [Style(bgcolor=low.blend(high, 0.08 + 0.5 * i / (SHADES - 1)).rich_color)
                        for i in range(SHADES)]
        self._shown.clear()  # every cell is rewritten in the new colours

    def show_column_set(self, column_set: str) -> None:
        """Shows the layer and the columns of `column_set` (a unit, or "all")."""
        self.column_set = column_set
        self.shown_columns = columns_of(column_set)
        self.clear(columns=True)
        self._shown.clear()
        for column in self.shown_columns:
            self.add_column(column.name, width=width(column), key=column.name)

    def next_column_set(self) -> None:
        index = COLUMN_SETS.index(self.column_set)
        self.show_column_set(COLUMN_SETS[(index + 1) % len(COLUMN_SETS)])

    def show(self, rows: list[dict[str, Any]]) -> None:
        """Rows of the snapshot's `layers`; a column the engine did not send (a server of
        another version) shows as not measured."""
        if not self._shades:
            self._make_shades()
        self._values = {row["layer"]: row for row in rows}
        self._match_rows()
        for column in self.shown_columns:
            shade = (levels((row.get(column.name) for row in rows), SHADES)
                     if column is not LAYER else [None] * len(rows))
            for row, level in zip(rows, shade):
                self._write(row["layer"], column, row.get(column.name), level)
        if self.sort_column:
            self._sort()

    def _match_rows(self) -> None:
        """One row per layer of the model (a rebuilt engine may have another model)."""
        present = {int(key.value) for key in self.rows}
        for layer in present - self._values.keys():
            self.remove_row(str(layer))
            self._shown = {k: v for k, v in self._shown.items() if k[0] != layer}
        for layer in sorted(self._values.keys() - present):
            self.add_row(*(Text("") for _ in self.shown_columns), key=str(layer))

    def _write(self, layer: int, column: Column, value: Any, level: int | None) -> None:
        text = figure(value, column.unit)
        if self._shown.get((layer, column.name)) == (text, level):
            return
        self._shown[(layer, column.name)] = (text, level)
        if column is LAYER:  # kept as a number: sorting finds each row's layer through it
            self.update_cell(str(layer), column.name, value)
            return
        style = self._shades[level] if level is not None else Style()
        self.update_cell(str(layer), column.name, Text(text, style=style, justify="right"))

    # -- sorting -----------------------------------------------------------------------
    @property
    def cursor_column_name(self) -> str:
        return self.shown_columns[self.cursor_column].name

    def sort_by(self, column: str) -> None:
        """Sorts by `column`, largest first; the same column again flips the order."""
        if column == self.sort_column:
            self.largest_first = not self.largest_first
        else:
            self.sort_column, self.largest_first = column, column != LAYER.name
        self._sort()

    def _sort(self) -> None:
        column, sign = self.sort_column, -1 if self.largest_first else 1

        def order(layer: int) -> tuple[bool, float]:
            value = self._values[layer].get(column)
            return (value is None, 0 if value is None else sign * value)

        self.sort(LAYER.name, key=order)
