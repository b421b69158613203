"""A tune started from a UI: `tuner tune` in the background through the job slot, from
the live settings as the baseline, while the live session is paused (a tune and the live
session never measure at the same time), with its trials to poll and a stop that ends it
at the next token.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from uuid import uuid4

from pydantic import ConfigDict, Field

from tuner.control.models import TuneRequest
from tuner.control.slot import JobSlot
from tuner.settings import non_default
from tuner.tune.worker import SENTINEL_EVERY

if TYPE_CHECKING:
    import optuna

    from tuner.settings import Settings
    from tuner.tune.run import Spec

log = logging.getLogger(__name__)


class TuneJob(TuneRequest):
    """A tune as it runs: its request, then its trials. Its `space` answers as `searched`:
    what each knob ranged over, pinned knobs included."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    kind: ClassVar[str] = "a tune"
    searched: dict[str, str]  # knob -> range, values or =pinned value
    study: str
    storage: str
    sentinel_every: int = SENTINEL_EVERY
    state: Literal["running", "stopping", "done", "stopped", "failed"] = "running"
    running: int | None = None  # the trial being measured now
    rows: list[dict[str, Any]] = []
    front: list[int] = []  # trial numbers on the Pareto front
    error: str | None = None
    stop: threading.Event = Field(default_factory=threading.Event, exclude=True)

    @property
    def label(self) -> str:
        return f"study {self.study!r}"

    @property
    def busy(self) -> bool:
        return self.state in ("running", "stopping")

    @property
    def best(self) -> dict[str, Any] | None:
        """The fastest trial of the Pareto front so far."""
        on_front = [r for r in self.rows if r["number"] in self.front]
        return min(on_front, key=lambda r: (r["score_pct"], r["bytes_per_token"]),
                   default=None)

    def as_dict(self) -> dict[str, Any]:
        out = self.model_dump(exclude={"space", "fix", "searched"})
        return {**out, "space": self.searched, "done": len(self.rows), "best": self.best}


class TuneRunner:
    """Tunes from one controller's live settings, started through its job slot."""

    def __init__(self, slot: JobSlot, live_settings: Callable[[], Settings]):
        self.slot = slot
        self.live_settings = live_settings

    @property
    def job(self) -> TuneJob | None:
        """The latest tune, running or over."""
        job = self.slot.latest.get(TuneJob.kind)
        return job if isinstance(job, TuneJob) else None

    def start(self, request: TuneRequest) -> TuneJob:
        """Raises SettingsError for a bad space or fix and JobBusy while another job runs;
        nothing starts then."""
        from tuner.tune.run import Spec
        from tuner.tune.study import storage_url

        spec = Spec(base=non_default(self.live_settings()), space=request.space,
                    fix=request.fix, objective=request.objective, tokens=request.tokens,
                    warmup=request.tokens, max_kl=request.max_kl,
                    min_agreement=request.min_agreement)
        job = TuneJob(**request.model_dump(), searched=spec.space_of().describe(),
                      study=f"live-{time.strftime('%Y%m%d-%H%M%S')}-{uuid4().hex[:6]}",
                      storage=storage_url(None))
        self.slot.start(job, lambda: self._run(job, spec))
        return job

    def stop(self) -> TuneJob | None:
        """Ends the tune at the next token: the trial in flight is kept as failed
        ("stopped"), finished trials stay in the study."""
        job = self.job
        if job is not None and job.state == "running":
            job.state = "stopping"
            job.stop.set()
        return job

    def _on(self, job: TuneJob, kind: str, r: dict[str, Any], study: optuna.Study) -> None:
        from tuner.tune.study import front

        if kind == "start":
            job.running = r["number"]
            return
        job.rows = [*job.rows, r]  # a new list: readers never see one half-appended
        job.front = [t.number for t in front(study)]
        if job.running == r["number"]:  # told once the baseline after it is in
            job.running = None

    def _run(self, job: TuneJob, spec: Spec) -> TuneJob:
        from tuner.tune.run import tune

        try:
            result = tune(spec, job.trials, job.storage, job.study,
                          on_event=lambda kind, r, study: self._on(job, kind, r, study),
                          stop=job.stop)
            job.state = "done" if result["complete"] else "stopped"
        except Exception as err:  # the job reports it; the live session carries on
            log.exception("tune %s failed", job.study)
            job.error, job.state = f"{type(err).__name__}: {err}", "failed"
        finally:
            job.running = None
        return job
