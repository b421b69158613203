"""Layers down, experts across: one cell per expert, shaded by its routings, its sync misses
or whether it is resident, drawn with Textual's line API.

Where the experts do not fit the width, a cell stands for a group of neighbouring experts
(the sum of their counts; for residency, how many of them are resident), so the map never
scrolls sideways; many layers scroll under the header. The cursor cell (arrow keys, or the
mouse) is the one whose figures the screen spells out.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal, TypedDict

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tuner.format import levels
from tuner.ui.widgets.shades import shade_styles
from tuner.vocabulary.snapshot import Experts

Metric = Literal["routings", "misses", "resident"]  # the keys of Experts it colours by
METRICS: tuple[Metric, ...] = ("routings", "misses", "resident")
SHADES = 6
LABEL = 6  # "layer " column


class Cell(TypedDict):
    """The figures of one cell: a layer's expert (or neighbouring experts)."""

    layer: int
    first: int
    last: int
    routings: int
    misses: int
    resident: int | None  # how many of its experts are resident; None: no map yet
    experts: int


class HeatMap(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    HeatMap {
        background: $surface;
        color: $foreground;
    }
    HeatMap > .heat-map--header {
        color: $text-muted;
    }
    HeatMap > .heat-map--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"heat-map--header", "heat-map--cursor"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "move(0, -1)", "Expert left", show=False),
        Binding("right", "move(0, 1)", "Expert right", show=False),
        Binding("up", "move(-1, 0)", "Layer up", show=False),
        Binding("down", "move(1, 0)", "Layer down", show=False),
    ]

    cursor: reactive[tuple[int, int]] = reactive((0, 0))  # (layer, cell)

    class CursorMoved(Message):
        """The cursor is on another cell."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.metric = METRICS[0]
        self.data: Experts | None = None
        self._grid: np.ndarray | None = None  # [L, cells] of the metric
        self._levels: list[list[int | None]] = []
        self._styles: list[Style] = []

    # -- what it shows -------------------------------------------------------------------
    def show(self, data: Experts, metric: Metric) -> None:
        """`data`: the backend's `experts()` answer."""
        self.data, self.metric = data, metric
        self._regroup(data)
        self.refresh()

    @property
    def group(self) -> int:
        """Experts per cell."""
        if self.data is None:
            return 1
        room = max(1, self.size.width - LABEL)
        return max(1, math.ceil(self.data["experts"] / room))

    @property
    def cell_width(self) -> int:
        if self.data is None:
            return 1
        return 2 if 2 * self.data["experts"] <= self.size.width - LABEL else 1

    def _regroup(self, data: Experts) -> None:
        values = data[self.metric]
        if values is None:  # no residency map yet
            self._grid, self._levels = None, []
            return
        g, arr = self.group, np.asarray(values)
        pad = (-arr.shape[1]) % g
        arr = np.pad(arr, ((0, 0), (0, pad)))
        self._grid = arr.reshape(arr.shape[0], -1, g).sum(axis=2)
        flat = levels(self._grid.ravel().tolist(), SHADES)
        cells = self._grid.shape[1]
        self._levels = [flat[i * cells:(i + 1) * cells] for i in range(self._grid.shape[0])]
        layer, cell = self.cursor
        self.cursor = (min(layer, self._grid.shape[0] - 1), min(cell, cells - 1))
        self.virtual_size = Size(LABEL + cells * self.cell_width, 1 + self._grid.shape[0])

    def cell(self) -> Cell | None:
        """The figures of the cursor cell: its layer, its experts and their counts."""
        data = self.data
        if data is None:
            return None
        layer, cell = self.cursor
        g = self.group
        experts = range(cell * g, min((cell + 1) * g, data["experts"]))
        resident = data["resident"]
        return {
            "layer": layer, "first": experts.start, "last": experts.stop - 1,
            "routings": sum(data["routings"][layer][e] for e in experts),
            "misses": sum(data["misses"][layer][e] for e in experts),
            "resident": None if resident is None else sum(resident[layer][e] for e in experts),
            "experts": len(experts),
        }

    # -- drawing -------------------------------------------------------------------------
    def on_resize(self) -> None:
        if self.data is not None:
            self._regroup(self.data)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = []  # a new theme: the shades are made again

    def watch_cursor(self) -> None:
        self.refresh()
        self.post_message(self.CursorMoved())

    def render_line(self, y: int) -> Strip:
        if not self._styles:
            self._styles = shade_styles(self, SHADES)
        base, width = self.rich_style, self.size.width
        scroll_y = self.scroll_offset.y
        if self._grid is None:
            text = "waiting for the first counts" if self.data is None else \
                "waiting for the first residency map" if y == 0 else ""
            return Strip([Segment(text.ljust(width), base)], width) if y == 0 else \
                Strip.blank(width, base)
        cw, g = self.cell_width, self.group
        cells = self._grid.shape[1]
        if y == 0:
            header = self.get_component_rich_style("heat-map--header")
            step = max(1, 8 // cw)  # a tick every few cells: the first expert of the cell
            ticks = "".join(f"{c * g:<{step * cw}}" for c in range(0, cells, step))
            strip = Strip([Segment("layer ", header), Segment(ticks[:cells * cw], header)])
        else:
            layer = y - 1 + scroll_y
            if layer >= self._grid.shape[0]:
                return Strip.blank(width, base)
            cursor = self.get_component_rich_style("heat-map--cursor")
            segments = [Segment(f"{layer:>5} ", base)]
            for c, level in enumerate(self._levels[layer]):
                style = base if level is None or not self._grid[layer, c] else \
                    self._styles[level]
                if (layer, c) == self.cursor:
                    style = style + cursor
                mark = "▣" if (layer, c) == self.cursor else " "
                segments.append(Segment(mark.ljust(cw), style))
            strip = Strip(segments)
        return strip.crop_extend(0, width, base)

    # -- input ---------------------------------------------------------------------------
    def action_move(self, layers: int, cells: int) -> None:
        if self._grid is None:
            return
        layer, cell = self.cursor
        layer = max(0, min(self._grid.shape[0] - 1, layer + layers))
        self.cursor = (layer, max(0, min(self._grid.shape[1] - 1, cell + cells)))
        rows = self.size.height - 1  # under the header
        if layer < self.scroll_offset.y:
            self.scroll_to(y=layer, animate=False, immediate=True)
        elif layer >= self.scroll_offset.y + rows:
            self.scroll_to(y=layer - rows + 1, animate=False, immediate=True)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._grid is None or event.y < 1 or event.x < LABEL:
            return
        layer = event.y - 1 + self.scroll_offset.y
        cell = (event.x - LABEL) // self.cell_width
        if layer < self._grid.shape[0] and cell < self._grid.shape[1]:
            self.cursor = (layer, cell)
