"""A tune as it runs: its state, the best trial so far, the Pareto front and every trial,
the running one on top; `s` stops it."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Static

from tuner.control.answers import KnobValue, TuneStatus, TuneTrial
from tuner.format import fixed
from tuner.ui import run_exclusive
from tuner.ui.screens.follow import JobScreen, follow_job

COLUMNS = (("trial", 6), ("state", 9), ("vs base %", 10), ("ms/token", 10), ("base ms", 10),
           ("bytes/token", 12), ("hit %", 7), ("worker", 16), ("knobs", 60))
OVER = ("done", "stopped", "failed")


def knobs(params: dict[str, KnobValue]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def trial_knobs(r: TuneTrial) -> str:
    """A trial's knobs; trial 0's are the baseline's own, and say so."""
    return ("the baseline's own values: " if r["baseline_values"] else "") + knobs(r["params"])


def progress(job: TuneStatus) -> str:
    head = (f"study {job.study}: {job.done} of {job.trials} trials, {job.tokens} "
            f"measured tokens each, {job.objective} objective; ")
    if job.state == "failed":
        return head + f"failed: {job.error}"
    if job.state == "running":
        running = "-" if job.running is None else job.running
        return head + f"trial {running} running; the live session is paused (s: stop)"
    if job.state == "stopping":
        return head + "stopping"
    return head + job.state


def best(job: TuneStatus) -> str:
    b = job.best
    front = ", ".join(str(n) for n in job.front) or "-"
    if b is None:
        return f"best so far: none yet; Pareto front: {front}"
    return (f"best so far: trial {b['number']}, {fixed(b['score_pct'], '+.1f')} % against its "
            f"baseline ({fixed(b['ms_per_token'])} vs {fixed(b['baseline_ms_per_token'])} "
            f"ms/token), {b['bytes_per_token']} bytes/token: {trial_knobs(b)}\n"
            f"Pareto front (ms/token vs baseline, bytes/token): trials {front}")


def cells(r: TuneTrial, front: list[int]) -> tuple:
    state = "front" if r["number"] in front else ("rejected" if r["rejected"] else r["state"])
    return (r["number"], state, fixed(r["score_pct"], "+.1f"), fixed(r["ms_per_token"]),
            fixed(r["baseline_ms_per_token"]), fixed(r["bytes_per_token"], "d"),
            fixed(r["hit_rate"], ".2f"), r["worker"] or "-",
            r["rejected"] or trial_knobs(r))


class TuneScreen(JobScreen):
    """Follows the latest tune until it ends; closing the screen leaves it running."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Back"),
                                             Binding("s", "stop", "Stop the tune")]

    def __init__(self, job: TuneStatus):
        super().__init__()
        self.job = job

    def compose(self) -> ComposeResult:
        yield Static(progress(self.job), id="tune-progress", markup=False)
        yield Static(best(self.job), id="tune-best", markup=False)
        yield DataTable(id="tune-trials", cursor_type="none")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#tune-trials", DataTable)
        for name, width in COLUMNS:
            table.add_column(name, width=width, key=name)
        self.show(self.job)
        run_exclusive(self, self.follow, "tune")

    async def follow(self) -> None:
        await follow_job(self, self.app.backend.tune_status, self.show, "tune",
                         lambda job: job.state in OVER)

    def show(self, job: TuneStatus) -> None:
        self.job = job
        self.query_one("#tune-progress", Static).update(progress(job))
        self.query_one("#tune-best", Static).update(best(job))
        table = self.query_one("#tune-trials", DataTable)
        with self.app.batch_update():
            keys = {k.value for k in table.rows}
            if "running" in keys and job.running is None:
                table.remove_row("running")
            for r in job.rows:  # keyed rows updated in place: the front moves
                key = str(r["number"])
                if key in keys:
                    for (name, _), value in zip(COLUMNS, cells(r, job.front)):
                        table.update_cell(key, name, value)
                else:
                    table.add_row(*cells(r, job.front), key=key)
            if job.running is not None:
                row = (job.running, "running", *("",) * (len(COLUMNS) - 2))
                if "running" in keys:
                    table.update_cell("running", "trial", job.running)
                else:
                    table.add_row(*row, key="running")

    def action_stop(self) -> None:
        self.run_worker(self._stop(), group="tune-stop")

    async def _stop(self) -> None:
        await self.app.attempt(self.app.backend.stop_tune(), "not stopped")

    def action_close(self) -> None:
        self.dismiss()
