"""The per-layer counters as a table: one line per layer, drawn with Textual's line API.

Columns come from the engine's counter tables (`DERIVED` rates first, then the raw
`COUNTERS`), with fixed widths. They are shown one unit at a time (rates, expert counts,
times, bytes, predictor routings) or all at once. Each cell is shaded by its place
between the smallest and largest value of its column.

A DataTable renders every cell of every visible row again after any update, which at 64
layers cost the engine a seventh of its speed in the embedded mode. Here each row is kept
as one ready-made strip of segments, a row is rebuilt only when its text or shades
changed, and only the screen lines of changed rows are refreshed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tuner.format import COLUMN_SETS, LAYER, columns_of, figure, levels
from tuner.ui.widgets.shades import shade_styles
from tuner.vocabulary.counters import Shown
from tuner.vocabulary.snapshot import LayerRow, layer_of

SHADES = 6
PAD = 1  # blank cells on each side of a column

Cell = tuple[str, int | None]  # the text shown and its shade (None: not shaded)


def width(column: Shown) -> int:
    return max(len(column.name), 9)  # 9 fits "1,023.9 MiB" minus its unit's space


def fit(text: str, cells: int) -> str:
    """`text` right-aligned in `cells`, cut with an ellipsis when it does not fit."""
    return text.rjust(cells) if len(text) <= cells else text[:cells - 1] + "…"


class LayerTable(ScrollView, can_focus=True):
    """One row per layer of the newest snapshot; the header stays on top when the rows
    scroll. Left and right move the column cursor, which `sort_by` and the screen use."""

    DEFAULT_CSS = """
    LayerTable {
        background: $surface;
        color: $foreground;
    }
    LayerTable > .layer-table--header {
        background: $panel;
        color: $foreground;
        text-style: bold;
    }
    LayerTable > .layer-table--cursor {
        background: $block-cursor-blurred-background;
        text-style: bold;
    }
    LayerTable:focus > .layer-table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"layer-table--header", "layer-table--cursor"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "cursor(-1)", "Column left", show=False),
        Binding("right", "cursor(1)", "Column right", show=False),
    ]

    cursor_column: reactive[int] = reactive(0)

    class HeaderSelected(Message):
        """The header of `column` was clicked."""

        def __init__(self, column: str):
            super().__init__()
            self.column = column

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.sort_column: str | None = None
        self.largest_first = True
        self.column_set = COLUMN_SETS[0]
        self.shown_columns: tuple[Shown, ...] = ()
        self._edges: list[int] = []  # where each shown column starts, and the end
        self._values: dict[int, LayerRow] = {}  # layer -> column -> raw value
        self._cells: dict[int, tuple[Cell, ...]] = {}  # layer -> what its row shows
        self._strips: dict[int, Strip] = {}  # layer -> its row, drawn
        self._order: list[int] = []  # the layers top to bottom
        self._base = Style()  # the widget's own colours, under every cell
        self._shades: list[Style] = []  # empty: to be made from the theme before drawing
        self.show_column_set(self.column_set)

    # -- what the table holds ----------------------------------------------------------
    @property
    def rows(self) -> list[int]:
        """The layers, top to bottom."""
        return list(self._order)

    @property
    def row_count(self) -> int:
        return len(self._order)

    def texts(self, layer: int) -> tuple[str, ...]:
        """What the row of `layer` shows, column by column."""
        return tuple(text for text, _ in self._cells[layer])

    def text(self, layer: int, column: str) -> str:
        names = [c.name for c in self.shown_columns]
        return self._cells[layer][names.index(column)][0]

    @property
    def cursor_column_name(self) -> str:
        return self.shown_columns[self.cursor_column].name

    # -- columns -----------------------------------------------------------------------
    def show_column_set(self, column_set: str) -> None:
        """Shows the layer and the columns of `column_set` (a unit, or "all")."""
        self.column_set = column_set
        self.shown_columns = columns_of(column_set)
        self._edges = [0]
        for column in self.shown_columns:
            self._edges.append(self._edges[-1] + width(column) + 2 * PAD)
        self.cursor_column = min(self.cursor_column, len(self.shown_columns) - 1)
        self._cells.clear()
        self._strips.clear()
        self._resize()
        self.refresh()

    def next_column_set(self) -> None:
        index = COLUMN_SETS.index(self.column_set)
        self.show_column_set(COLUMN_SETS[(index + 1) % len(COLUMN_SETS)])

    def column_at(self, x: int) -> int | None:
        """The index of the shown column at screen offset `x` (the layer column does not
        scroll)."""
        if x >= self._edges[1]:
            x += self.scroll_offset.x
        for index, (start, end) in enumerate(zip(self._edges, self._edges[1:])):
            if start <= x < end:
                return index
        return None

    # -- rows --------------------------------------------------------------------------
    def show(self, rows: list[LayerRow]) -> None:
        """Rows of the snapshot's `layers`; a column the engine did not send (a server of
        another version) shows as not measured."""
        self._values = {layer_of(row): row for row in rows}
        shades = [levels((row.get(c.name) for row in rows), SHADES) if c is not LAYER
                  else [None] * len(rows) for c in self.shown_columns]
        changed = set(self._cells.keys() - self._values.keys())
        for i, row in enumerate(rows):
            cells = tuple((figure(row.get(c.name), c.unit), shade[i])
                          for c, shade in zip(self.shown_columns, shades))
            layer = layer_of(row)
            if self._cells.get(layer) != cells:
                self._cells[layer] = cells
                self._strips.pop(layer, None)
                changed.add(layer)
        for layer in self._cells.keys() - self._values.keys():  # a rebuilt, smaller model
            del self._cells[layer]
            self._strips.pop(layer, None)
        old = self._order
        self._order = self._sorted(self._values)
        if len(old) != len(self._order):
            self._resize()
            self.refresh()
            return
        self._refresh_rows([line for line, (was, now) in enumerate(zip(old, self._order))
                            if was != now or now in changed])

    def _sorted(self, layers: Iterable[int]) -> list[int]:
        if not self.sort_column:
            return sorted(layers)
        column, sign = self.sort_column, -1 if self.largest_first else 1

        def order(layer: int) -> tuple[bool, float, int]:
            value = self._values[layer].get(column)
            return (value is None, 0 if value is None else sign * value, layer)

        return sorted(layers, key=order)

    def sort_by(self, column: str) -> None:
        """Sorts by `column`, largest first; the same column again flips the order."""
        if column == self.sort_column:
            self.largest_first = not self.largest_first
        else:
            self.sort_column, self.largest_first = column, column != LAYER.name
        self._order = self._sorted(self._values)
        self.refresh()

    # -- drawing -----------------------------------------------------------------------
    def _resize(self) -> None:
        self.virtual_size = Size(self._edges[-1], 1 + len(self._order))

    def _refresh_rows(self, lines: list[int]) -> None:
        """Redraws the screen lines from the first to the last of the rows at `lines`."""
        shown = [y for y in (1 + line - self.scroll_offset.y for line in lines)
                 if 1 <= y < self.size.height]  # the header takes the widget's first line
        if shown:
            self.refresh(Region(0, shown[0], self.size.width, shown[-1] - shown[0] + 1))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._shades = []  # a new theme or focus state: every row is drawn again
        self._strips.clear()

    def watch_cursor_column(self) -> None:
        self.refresh(Region(0, 0, self.size.width, 1))

    def _make_styles(self) -> None:
        self._base = self.rich_style
        self._shades = shade_styles(self, SHADES)

    def _header(self) -> Strip:
        header = self.get_component_rich_style("layer-table--header")
        cursor = header + self.get_component_rich_style("layer-table--cursor")
        return Strip([Segment(" " * PAD + fit(c.name, width(c)) + " " * PAD,
                              cursor if i == self.cursor_column else header)
                      for i, c in enumerate(self.shown_columns)], self._edges[-1])

    def _row(self, layer: int) -> Strip:
        strip = self._strips.get(layer)
        if strip is None:
            base, pad = self._base, " " * PAD
            segments = []
            for c, (text, level) in zip(self.shown_columns, self._cells[layer]):
                # the padding stays unshaded, so neighbouring columns stay apart
                segments += [Segment(pad, base),
                             Segment(fit(text, width(c)),
                                     base if level is None else self._shades[level]),
                             Segment(pad, base)]
            strip = self._strips[layer] = Strip(segments, self._edges[-1])
        return strip

    def render_line(self, y: int) -> Strip:
        if not self._shades:
            self._make_styles()
        scroll_x, scroll_y = self.scroll_offset
        line = y - 1 + scroll_y
        if y == 0:
            strip = self._header()
        elif line < len(self._order) and self._order[line] in self._cells:
            strip = self._row(self._order[line])
        else:
            return Strip.blank(self.size.width, self._base)
        # The layer column stays where it is; the others scroll sideways behind it.
        fixed, width = self._edges[1], self.size.width
        return Strip.join([strip.crop(0, min(fixed, width)),
                           strip.crop_extend(fixed + scroll_x, scroll_x + max(fixed, width),
                                             self._base)])

    # -- input -------------------------------------------------------------------------
    def action_cursor(self, step: int) -> None:
        self.cursor_column = max(0, min(len(self.shown_columns) - 1, self.cursor_column + step))
        if not self.cursor_column:
            return  # the layer column is always in view
        # keep the cursor's column in view, right of the layer column
        start, end = self._edges[self.cursor_column], self._edges[self.cursor_column + 1]
        fixed, shown = self._edges[1], self.scrollable_content_region.width
        if start < fixed + self.scroll_offset.x:
            self.scroll_to(x=start - fixed, animate=False, immediate=True)
        elif end > self.scroll_offset.x + shown:
            self.scroll_to(x=end - shown, animate=False, immediate=True)

    def move_cursor(self, column: int) -> None:
        self.cursor_column = max(0, min(len(self.shown_columns) - 1, column))

    def on_click(self, event: events.Click) -> None:
        index = self.column_at(event.x)
        if index is None:
            return
        self.cursor_column = index
        if event.y == 0:
            self.post_message(self.HeaderSelected(self.shown_columns[index].name))
