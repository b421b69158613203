"""One headline figure of the overview: its window and cumulative values and a sparkline."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label

from tuner.format import figure
from tuner.ui.history import Series
from tuner.ui.widgets.readout import Readout
from tuner.ui.widgets.spark import Spark


class Trend(Horizontal):
    def __init__(self, series: Series, **kwargs):
        super().__init__(classes="trend", **kwargs)
        self.series = series

    def compose(self) -> ComposeResult:
        yield Label(self.series.label, classes="trend-label")
        yield Readout("-", classes="trend-window")
        yield Readout("-", classes="trend-cumulative")
        yield Spark(classes="trend-spark")

    def show(self, window: float | None, cumulative: float | None,
             points: Sequence[float]) -> None:
        unit = self.series.unit
        self.query_one(".trend-window", Readout).show_text(figure(window, unit))
        self.query_one(".trend-cumulative", Readout).show_text(figure(cumulative, unit))
        self.query_one(Spark).show(points)
