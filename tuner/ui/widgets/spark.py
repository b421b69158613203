"""A sparkline as one line of block characters: one point a cell, the newest on the right.

Textual's Sparkline buckets its data over its width and blends a colour for every bar on
every render, which made the overview's six of them cost more than the layer table of 64
rows. Here a point keeps its own cell (the history holds one point a repaint) and the
eight bar heights get their colours once per theme.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

BARS = "▁▂▃▄▅▆▇█"


def heights(points: Sequence[float]) -> list[int]:
    """Each point's bar, 0..7, between the smallest and the largest point."""
    lo, hi = min(points, default=0), max(points, default=0)
    span = hi - lo
    top = len(BARS) - 1
    return [top // 2 if span == 0 else round((p - lo) / span * top) for p in points]


class Spark(Widget):
    DEFAULT_CSS = """
    Spark {
        height: 1;
    }
    Spark > .spark--low {
        color: $primary;
    }
    Spark > .spark--high {
        color: $accent;
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {"spark--low", "spark--high"}

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._points: tuple[float, ...] = ()
        self._styles: list[Style] = []

    def show(self, points: Sequence[float]) -> None:
        points = tuple(points)
        if points != self._points:
            self._points = points
            self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = []  # a new theme: the bar colours are blended again

    def _bar_styles(self) -> list[Style]:
        if not self._styles:
            low = self.get_component_styles("spark--low").color
            high = self.get_component_styles("spark--high").color
            base = self.rich_style
            self._styles = [base + Style(color=low.blend(high, i / (len(BARS) - 1)).rich_color)
                            for i in range(len(BARS))]
        return self._styles

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y or not self._points:
            return Strip.blank(width, self.rich_style)
        styles = self._bar_styles()
        shown = self._points[-width:]
        segments = [Segment(" " * (width - len(shown)), self.rich_style)]
        for h in heights(shown):
            segments.append(Segment(BARS[h], styles[h]))
        return Strip(segments, width).simplify()
