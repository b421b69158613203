"""An A/B comparison started from a UI: two presets, run in the background through the job
slot (the live session paused meanwhile), with its runs and its result to poll."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from tuner.control.answers import ABStatus
from tuner.control.models import ABRequest
from tuner.control.slot import JobSlot
from tuner.measure.compare import schedule

if TYPE_CHECKING:
    from tuner.settings import Settings

log = logging.getLogger(__name__)


class ABJob(ABStatus):
    """An A/B as it runs: its request, then its progress."""

    kind: ClassVar[str] = "an A/B"

    @property
    def label(self) -> str:
        return f"{self.a} vs {self.b}"

    @property
    def busy(self) -> bool:
        return self.state == "running"

    def status(self) -> ABStatus:
        """The job as the API answers it: a copy, which a run ending cannot change."""
        return ABStatus.model_construct(**self.model_dump())


class ABRunner:
    """A/Bs of one controller's presets, started through its job slot."""

    def __init__(self, slot: JobSlot, preset_settings: Callable[[str], Settings]):
        self.slot = slot
        self.preset_settings = preset_settings  # what applying a preset by name gives
        self._checking = threading.Lock()

    @property
    def job(self) -> ABJob | None:
        """The latest A/B, running or over."""
        job = self.slot.latest.get(ABJob.kind)
        return job if isinstance(job, ABJob) else None

    def start(self, request: ABRequest) -> ABJob:
        """Raises PresetError for a preset that cannot be read, SettingsError for a workload
        file that cannot be run and JobBusy while another job runs; nothing starts then.
        Called off the server's event loop: it reads the workload files, one request's
        files at a time, so concurrent requests hold at most one request's in memory."""
        with self._checking:
            request.check_files()
        sa, sb = self.preset_settings(request.a), self.preset_settings(request.b)
        job = ABJob(**request.model_dump(),
                    total_runs=len(schedule(request.pairs)) * max(1, len(request.workloads)))
        self.slot.start(job, lambda: self._run(job, sa, sb))
        return job

    def _run(self, job: ABJob, sa: Settings, sb: Settings) -> ABJob:
        # Here, not at the top: the terminal UI reads this package's models, and connected
        # to a server it runs no engine, so it never loads torch.
        from tuner.measure.ab import run_ab

        try:
            result = run_ab(sa, sb, job, progress=lambda i, n, run: job.runs.append(run))
            end: dict[str, Any] = {"result": result, "state": "done"}
        except Exception as err:  # the job reports it; the live session carries on
            log.exception("A/B %s failed", job.label)
            end = {"error": f"{type(err).__name__}: {err}", "state": "failed"}
        # A new object: a reader sees the job running or ended, never a verdict in a
        # running job.
        return job.model_copy(update=end)
