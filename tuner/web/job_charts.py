"""The page's charts of the latest A/B and tune (tuner.charts, the same pictures `tuner ab
--plot` and `tuner tune --plot` write), drawn once a job is over and kept until it
changes. Drawing one takes the server's process a second or more; while a job runs, that
time would be taken from the runs it is timing, so the page shows the job's table alone
until then."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tuner import charts
from tuner.control.answers import ABStatus, TuneStatus

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class JobCharts:
    def __init__(self) -> None:
        # kind -> (what the chart was drawn from, the SVG): a chart is a function of its
        # data, so a job that ended with the same data is the same picture
        self._kept: dict[str, tuple[object, str]] = {}

    def _drawn(self, kind: str, data: object, draw: Callable[[], Figure]) -> str:
        kept = self._kept.get(kind)
        if kept is None or kept[0] != data:
            self._kept[kind] = kept = (data, charts.svg(draw()))
        return kept[1]

    def ab(self, job: ABStatus | None) -> str:
        if job is None or job.state == "running" or not job.runs:
            return ""
        runs, result, labels = job.runs, job.result, (job.a, job.b)
        return self._drawn("ab", (runs, result, labels),
                           lambda: charts.ab_chart(runs, result, labels))

    def tune(self, job: TuneStatus | None) -> str:
        if job is None or job.state in ("running", "stopping") or not job.rows:
            return ""
        rows, front = job.rows, job.front
        return self._drawn("tune", (rows, front), lambda: charts.tune_chart(rows, front))
