"""One headline figure of the overview: its window and cumulative values and a sparkline."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label

from tuner.format import figure
from tuner.ui.widgets.readout import Readout
from tuner.ui.widgets.spark import Spark
from tuner.vocabulary.counters import Headline


class Trend(Horizontal):
    def __init__(self, headline: Headline, **kwargs):
        super().__init__(classes="trend", **kwargs)
        self.headline = headline

    def compose(self) -> ComposeResult:
        h = self.headline
        yield Label(f"{h.label} ({h.column.unit})", classes="trend-label")
        yield Readout("-", classes="trend-window")
        yield Readout("-", classes="trend-cumulative")
        yield Spark(classes="trend-spark")

    def show(self, window: float | None, cumulative: float | None,
             points: Sequence[float]) -> None:
        unit = self.headline.column.unit
        self.query_one(".trend-window", Readout).show_text(figure(window, unit))
        self.query_one(".trend-cumulative", Readout).show_text(figure(cumulative, unit))
        self.query_one(Spark).show(points)
