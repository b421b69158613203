"""An A/B comparison as it runs: progress, each run, then per-arm figures, the pairs, the
drift and the verdict (what `tuner ab` prints)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Static

from tuner.control.answers import ABResult, ABStatus
from tuner.control.report import knob_change, result_lines
from tuner.format import figure
from tuner.ui import run_exclusive
from tuner.ui.screens.follow import JobScreen, follow_job


def heading(job: ABStatus) -> str:
    on = f" on {', '.join(job.workloads)}" if job.workloads else ""
    rules = f", rules {job.rules}" if job.rules else ""
    limits = [f"{name} {limit}" for limit, name in ((job.max_kl, "KL at most"),
                                                   (job.min_agreement, "top-1 % at least"))
              if limit is not None]
    gate = f" Quality gate: {', '.join(limits)}." if limits else ""
    return (f"A/B: A = {job.a}, B = {job.b}; {job.pairs} pairs + sentinel A, "
            f"{job.tokens} tokens per run{on}{rules}, each on a fresh session. The live "
            f"session is paused during the A/B; a running one resumes after it.{gate}")


def progress(job: ABStatus) -> str:
    done, total = len(job.runs), job.total_runs
    if job.state == "failed":
        return f"failed after {done} of {total} runs: {job.error}"
    if job.state == "done":
        return f"done: {total} runs"
    first = " (after a warm-up run of A, not counted)" if not done else ""
    return f"running: run {min(done + 1, total)} of {total}{first}"


def summary(r: ABResult) -> str:
    """The result below the runs, line for line as `tuner ab` prints it."""
    return "\n".join([f"knobs B - A: {knob_change(r)}", *result_lines(r)])


class ABScreen(JobScreen):
    """Follows the latest A/B until it ends; closing the screen leaves the A/B running."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Back")]

    def __init__(self, job: ABStatus):
        super().__init__()
        self.job = job

    def compose(self) -> ComposeResult:
        yield Static(heading(self.job), id="ab-heading", markup=False)
        yield Static(progress(self.job), id="ab-progress", markup=False)
        yield DataTable(id="ab-runs", cursor_type="none")
        yield Static("", id="ab-result", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        runs = self.query_one("#ab-runs", DataTable)
        for name, width in (("run", 4), ("workload", 12), ("arm", 4), ("ms/token", 10),
                            ("hit %", 8), ("bytes/token", 12), ("KL", 10), ("top-1 %", 8),
                            ("output hash", 20)):
            runs.add_column(name, width=width, key=name)
        run_exclusive(self, self.follow, "ab")

    async def follow(self) -> None:
        await follow_job(self, self.app.backend.ab_status, self.show, "A/B",
                         lambda job: job.state != "running")

    def show(self, job: ABStatus) -> None:
        self.job = job
        self.query_one("#ab-progress", Static).update(progress(job))
        table = self.query_one("#ab-runs", DataTable)
        for run in job.runs[table.row_count:]:  # runs only ever get appended
            table.add_row(run["run"], run["workload"], run["arm"],
                          f"{run['ms_per_token']:.3f}",
                          f"{run['hit_rate']:.2f}", run["bytes_per_token"],
                          figure(run["quality_kl"]), figure(run["top1_agreement"], "%"),
                          run["output_hash"])
        if job.result:
            self.query_one("#ab-result", Static).update(summary(job.result))

    def action_close(self) -> None:
        self.dismiss()
