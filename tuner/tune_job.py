"""A tune started from a UI: `tuner tune` in the background, from the live settings as the
baseline, while the live session is paused (a tune and the live session never measure at
the same time), with its trials to poll and a stop that ends it at the next token.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from tuner.ab_job import TOKENS
from tuner.measure.rules import check_limits
from tuner.settings import non_default
from tuner.tune.worker import DEFAULT_OBJECTIVE, SENTINEL_EVERY

log = logging.getLogger(__name__)

TRIALS = (1, 500)  # allowed range of trials per tune
# What a UI offers first: 12 trials of 32 measured tokens
DEFAULT_TRIALS, DEFAULT_TOKENS = 12, 32


class TuneBusy(RuntimeError):
    """A tune or an A/B is running already: nothing was started."""


def check_counts(trials: int, tokens: int) -> None:
    for name, value, (least, most) in (("trials", trials, TRIALS), ("tokens", tokens, TOKENS)):
        if not least <= value <= most:
            raise ValueError(f"{name} = {value}: must be from {least} to {most}")


@dataclass
class TuneJob:
    trials: int
    tokens: int
    objective: str
    space: dict[str, str]  # knob -> range, values or =pinned value, as searched
    study: str
    max_kl: float | None = None  # the quality gate of lossy trials; None: not checked
    min_agreement: float | None = None
    sentinel_every: int = SENTINEL_EVERY
    state: str = "running"  # running, stopping, done, stopped or failed
    running: int | None = None  # the trial being measured now
    rows: list[dict[str, Any]] = field(default_factory=list)
    front: list[int] = field(default_factory=list)  # trial numbers on the Pareto front
    storage: str | None = None
    error: str | None = None
    stop: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def best(self) -> dict[str, Any] | None:
        """The fastest trial of the Pareto front so far."""
        on_front = [r for r in self.rows if r["number"] in self.front]
        return min(on_front, key=lambda r: (r["score_pct"], r["bytes_per_token"]),
                   default=None)

    def as_dict(self) -> dict[str, Any]:
        return {"trials": self.trials, "tokens": self.tokens, "objective": self.objective,
                "space": self.space, "study": self.study, "storage": self.storage,
                "sentinel_every": self.sentinel_every, "max_kl": self.max_kl,
                "min_agreement": self.min_agreement,
                "state": self.state, "running": self.running, "done": len(self.rows),
                "rows": self.rows, "front": self.front, "best": self.best,
                "error": self.error}


class TuneRunner:
    """At most one tune at a time, for one controller, and never beside an A/B."""

    def __init__(self, controller):
        self.controller = controller
        self.job: TuneJob | None = None
        self._lock = threading.Lock()

    @property
    def busy(self) -> bool:
        return self.job is not None and self.job.state in ("running", "stopping")

    def start(self, trials: int = DEFAULT_TRIALS, tokens: int = DEFAULT_TOKENS,
              objective: str = DEFAULT_OBJECTIVE, space: str = "", fix: str = "",
              max_kl: float | None = None, min_agreement: float | None = None) -> TuneJob:
        """Raises ValueError for counts or quality limits out of range, SettingsError for a
        bad space, TuneBusy while a tune or an A/B runs; nothing starts then."""
        from tuner.tune.run import Spec
        from tuner.tune.study import storage_url

        check_counts(trials, tokens)
        check_limits(max_kl, min_agreement)
        spec = Spec(base=non_default(self.controller.settings), space=space, fix=fix,
                    objective=objective, tokens=tokens, warmup=tokens, max_kl=max_kl,
                    min_agreement=min_agreement)
        searched = spec.space_of().describe()
        ab = self.controller.ab.job
        with self._lock:
            if self.busy:
                raise TuneBusy(f"a tune is already running (study {self.job.study!r})")
            if ab is not None and ab.state == "running":
                raise TuneBusy(f"an A/B is running ({ab.a} vs {ab.b}); start the tune once "
                               "it is over")
            job = TuneJob(trials, tokens, objective, searched, max_kl=max_kl,
                          min_agreement=min_agreement,
                          study=f"live-{time.strftime('%Y%m%d-%H%M%S')}-{uuid4().hex[:6]}",
                          storage=storage_url(None))
            self.job = job
        # Paused before the reply, so the runs never share the machine with the session.
        was_running = self.controller.session.pause()
        threading.Thread(target=self._run, args=(job, spec, was_running), daemon=True,
                         name="tuner-tune").start()
        return job

    def stop(self) -> TuneJob | None:
        """Ends the tune at the next token: the trial in flight is kept as failed
        ("stopped"), finished trials stay in the study."""
        job = self.job
        if job is not None and job.state == "running":
            job.state = "stopping"
            job.stop.set()
        return job

    def _on(self, job: TuneJob, kind: str, r: dict[str, Any], study) -> None:
        from tuner.tune.study import front

        if kind == "start":
            job.running = r["number"]
            return
        job.rows = [*job.rows, r]  # a new list: readers never see one half-appended
        job.front = [t.number for t in front(study)]
        if job.running == r["number"]:  # trials are told once the baseline after them is in
            job.running = None

    def _run(self, job: TuneJob, spec, was_running: bool) -> None:
        from tuner.tune.run import tune

        session = self.controller.session
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
            if was_running:
                session.resume()
