"""A tune started from a UI: `tuner tune` in the background through the job slot, from
the live settings as the baseline, while the live session is paused (a tune and the live
session never measure at the same time), with its trials to poll and a stop that ends it
at the next token.

A server that stops (SIGTERM) stops its tune and waits a moment for it to fail its trial in
flight, as `tuner tune` does on Ctrl-C; a trial still running then is failed from here, so
no trial is left running in the study. A restarted server lists the latest tune a server
ran, as it stood, until it starts another.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, cast
from uuid import uuid4

from pydantic import ConfigDict, Field

from tuner.control.answers import TuneStatus, TuneTrial
from tuner.control.models import TuneRequest, TuneSpec
from tuner.control.slot import JobSlot
from tuner.settings import non_default
from tuner.tune.worker import SENTINEL_EVERY

if TYPE_CHECKING:
    import optuna

    from tuner.settings import Settings
    from tuner.tune.run import Spec

log = logging.getLogger(__name__)

LIVE = "live-"  # the study names of tunes started from a UI: live-<time>-<id>
STOP_WAIT_S = 3.0  # how long a stopping server waits for its tune to end at a token


class TuneJob(TuneStatus):
    """A tune as it runs: its status, kept current, with the request as it was asked (a
    later server lists the tune from it) and the event that stops it."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    kind: ClassVar[str] = "a tune"
    request: TuneRequest = Field(exclude=True)
    stop: threading.Event = Field(default_factory=threading.Event, exclude=True)

    @classmethod
    def of(cls, request: TuneRequest, space: dict[str, str], study: str,
           storage: str) -> TuneJob:
        """The job of `request`, searching `space` in `study`."""
        asked = request.model_dump(include=set(TuneSpec.model_fields))
        return cls(**asked, space=space, study=study, storage=storage,
                   sentinel_every=SENTINEL_EVERY, request=request)

    @property
    def label(self) -> str:
        return f"study {self.study!r}"

    @property
    def busy(self) -> bool:
        return self.state in ("running", "stopping")

    def record(self, rows: list[TuneTrial], front: list[int]) -> None:
        """The trials so far and the numbers of those on the Pareto front; the fastest of
        the front is the best so far. New lists: a reader never sees one half-made."""
        on_front = [r for r in rows if r["number"] in front]
        self.best = min(on_front, key=lambda r: (r["score_pct"], r["bytes_per_token"]),
                        default=None)
        self.rows, self.front, self.done = rows, front, len(rows)

    def status(self) -> TuneStatus:
        """The job as the API answers it: a copy, which a trial ending cannot change."""
        return TuneStatus.model_construct(**self.model_dump())


class TuneRunner:
    """Tunes from one controller's live settings, started through its job slot."""

    def __init__(self, slot: JobSlot, live_settings: Callable[[], Settings]):
        self.slot = slot
        self.live_settings = live_settings
        self._earlier: list[TuneJob | None] = []  # read once: [the last server's tune]

    @property
    def job(self) -> TuneJob | None:
        """The latest tune, running or over; before this server started one, the latest a
        server ran (stopped with it)."""
        if self._started is not None:
            return self._started
        if not self._earlier:
            self._earlier.append(earlier_tune())
        return self._earlier[0]

    @property
    def _started(self) -> TuneJob | None:
        """The latest tune this server started."""
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
        job = TuneJob.of(request, spec.space_of().describe(),
                         f"{LIVE}{time.strftime('%Y%m%d-%H%M%S')}-{uuid4().hex[:6]}",
                         storage_url(None))
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

    def close(self, timeout: float = STOP_WAIT_S) -> None:
        """Stops the tune and waits up to `timeout` for it to end; a trial it still runs
        then is failed in the study from here."""
        from tuner.tune.study import fail_ours, load_study

        job = self._started
        if job is None or not job.busy:
            return
        self.stop()
        if self.slot.join(timeout):
            return
        try:
            fail_ours(load_study(job.storage, job.study), "stopped: the server stopped "
                      "before its measurement finished")
        except Exception as err:  # the study database itself failed: said, not raised
            log.error("tune %s: its running trial could not be failed: %s", job.study,
                      _why(err))

    def _on(self, job: TuneJob, kind: str, r: dict[str, Any], study: optuna.Study) -> None:
        from tuner.tune.study import front

        if kind == "start":
            if "request" not in study.user_attrs:  # for a later server to list the job
                study.set_user_attr("request", job.request.model_dump())
            job.running = r["number"]
            return
        # a "done" event's r is a trial's row
        job.record([*job.rows, cast(TuneTrial, r)], [t.number for t in front(study)])
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
            job.error, job.state = _why(err), "failed"
            log.error("tune %s failed: %s", job.study, job.error)  # one line; -v: the trace
            log.debug("tune %s failed", job.study, exc_info=True)
        finally:
            job.running = None
        return job


def _why(err: Exception) -> str:
    """An error as one line: a database's own message, not the SQL it failed on and the
    chain of exceptions around it."""
    cause = getattr(err, "orig", None)  # SQLAlchemy's wrapper of the driver's error
    if cause is not None:
        return f"the study database failed: {type(cause).__name__}: {cause}"
    return f"{type(err).__name__}: {err}"


def earlier_tune() -> TuneJob | None:
    """The latest tune a server ran into the default study database, as it stood (its
    running trial failed if the server that ran it is gone), or None when there is none
    or it cannot be read (said in one log line)."""
    from tuner.tune.study import default_path

    path = default_path()
    if not path.is_file():
        return None
    try:
        return _read_tune(f"sqlite:///{path}")
    except Exception as err:  # a database another version wrote, or broken: not fatal
        log.warning("the tune study database %s cannot be read: %s", path, _why(err))
        return None


def _read_tune(storage: str) -> TuneJob | None:
    import optuna

    from tuner.tune.study import fail_abandoned, front, load_study, rows

    names = sorted(n for n in optuna.get_all_study_names(storage) if n.startswith(LIVE))
    if not names:
        return None
    study = load_study(storage, names[-1])
    fail_abandoned(study)
    spec, found = study.user_attrs["spec"], rows(study)
    asked = {"trials": max(1, len(found)), "tokens": spec["span"]["tokens"],
             "objective": spec["objective"], **spec["gate"],
             **study.user_attrs.get("request", {})}
    job = TuneJob.of(TuneRequest(**asked), spec["space"], study.study_name, storage)
    job.state, job.error = "stopped", "the server running it stopped before it finished"
    job.record(cast(list[TuneTrial], found), [t.number for t in front(study)])
    return job
