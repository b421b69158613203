"""The page's charts of the latest A/B and tune (tuner.charts, the same pictures `tuner ab
--plot` and `tuner tune --plot` write), drawn once a job is over and kept until it
changes. Drawing one takes the server's process a second or more; while a job runs, that
time would be taken from the runs it is timing, so the page shows the job's table alone
until then."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tuner import charts
from tuner.control.ab import ABJob
from tuner.control.tune import TuneJob

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class JobCharts:
    def __init__(self) -> None:
        # kind -> (the job it was drawn from, how far that job had got, the SVG)
        self._kept: dict[str, tuple[Any, Any, str]] = {}

    def _drawn(self, kind: str, job: Any, progress: Any, draw: Callable[[], Figure]) -> str:
        kept = self._kept.get(kind)
        if kept is None or kept[0] is not job or kept[1] != progress:
            self._kept[kind] = kept = (job, progress, charts.svg(draw()))
        return kept[2]

    def ab(self, job: ABJob | None) -> str:
        if job is None or job.busy or not job.runs:
            return ""
        return self._drawn("ab", job, len(job.runs),
                           lambda: charts.ab_chart(job.runs, job.result, (job.a, job.b)))

    def tune(self, job: TuneJob | None) -> str:
        if job is None or job.busy or not job.rows:
            return ""
        return self._drawn("tune", job, (job.state, len(job.rows)),
                           lambda: charts.tune_chart(job.rows, job.front))
