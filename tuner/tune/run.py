"""A whole tune: the space from the knob table, the study, the workers, the loop, and a
summary of what the study holds (its trials and Pareto front)."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

import optuna

from tuner.settings import validate
from tuner.tune.guards import Guard, guards_for
from tuner.tune.loop import Event, LocalPool, Pool, run_trials
from tuner.tune.space import Space, build_space
from tuner.tune.study import front, open_study, row, rows, storage_url
from tuner.tune.worker import DEFAULT_OBJECTIVE, SENTINEL_EVERY, TrialWorker, Workload


@dataclass(frozen=True)
class Spec:
    """What a tune measures: the baseline's knobs (non-default values), the space, the
    objective and the workload."""

    base: dict[str, Any]
    tokens: int
    warmup: int
    space: str = ""
    fix: str = ""
    objective: str = DEFAULT_OBJECTIVE
    sentinel_every: int = SENTINEL_EVERY

    @property
    def workload(self) -> Workload:
        return Workload(self.tokens, self.warmup)

    def recorded(self, space: Space) -> dict[str, Any]:
        """What the study keeps to refuse a resume that would not be comparable."""
        return {"base": self.base, "space": space.describe(), "objective": self.objective,
                "workload": asdict(self.workload)}


def make_pool(spec: Spec, ray: str | None, workers: int,
              stop: threading.Event | None = None) -> Pool:
    """Ray workers finish their running trials when stopped; the local one stops at once."""
    if ray:
        from tuner.tune.ray_pool import RayPool

        return RayPool(ray, workers, spec)
    return LocalPool(TrialWorker(spec.base, spec.workload, spec.sentinel_every, stop=stop))


def summary(study: optuna.Study, storage: str, complete: bool) -> dict[str, Any]:
    return {"study": study.study_name, "storage": storage, "complete": complete,
            "spec": study.user_attrs["spec"], "trials": rows(study),
            "front": [row(t) for t in front(study)]}


def tune(spec: Spec, trials: int, storage: str | None = None, study: str = "tune",
         seed: int = 0, ray: str | None = None, workers: int = 2,
         guards: list[Guard] | None = None, on_event: Event | None = None,
         stop: threading.Event | None = None, pool: Pool | None = None) -> dict[str, Any]:
    """Runs `trials` trials into study `study` (created or resumed) and sums it up.
    Raises SettingsError for a bad space or baseline, TuneError for a study that cannot be
    resumed with this spec; nothing is measured then."""
    space = build_space(spec.space, spec.fix)
    base = validate(spec.base)
    url = storage_url(storage)
    opened = open_study(url, study, spec.recorded(space), seed)
    if not opened.trials:  # the baseline's own values first: its score is the noise floor
        opened.enqueue_trial({d.name: getattr(base, d.name) for d in space.dimensions},
                             user_attrs={"baseline_values": True})
    complete = True
    if trials:
        pool = pool or make_pool(spec, ray, workers, stop)
        try:
            complete = run_trials(opened, space, base, pool, trials, spec.objective,
                                  guards if guards is not None else guards_for(), on_event,
                                  stop)
        finally:
            pool.close()
    return summary(opened, url, complete)
