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
from tuner.tune.study import front, open_study, row, rows, storage_url, study_name
from tuner.tune.worker import SENTINEL_EVERY, Span, TrialWorker
from tuner.vocabulary.judging import DEFAULT_OBJECTIVE


@dataclass(frozen=True)
class Spec:
    """What a tune measures: the baseline's knobs (non-default values; its `workload` knob
    is what every span decodes), the space, the objective, the measured span and the
    quality gate (None: not checked; with a limit the lossy knobs join the search)."""

    base: dict[str, Any]
    tokens: int
    warmup: int
    space: str = ""
    fix: str = ""
    objective: str = DEFAULT_OBJECTIVE
    sentinel_every: int = SENTINEL_EVERY
    max_kl: float | None = None
    min_agreement: float | None = None

    @property
    def span(self) -> Span:
        return Span(self.tokens, self.warmup)

    @property
    def gated(self) -> bool:
        return self.max_kl is not None or self.min_agreement is not None

    @property
    def measured_base(self) -> dict[str, Any]:
        """The baseline's knobs as sessions run them: with a gate, the quality probe on
        every decoded token (off the timed path; the served output is the same). A span
        is short: sampling every 4th token, as an A/B does, left 8 samples of a 32-token
        span, and a trial under the limit on those was over it in a longer A/B."""
        if self.gated:
            return {**self.base, "quality_every": 1}
        return self.base

    def space_of(self) -> Space:
        return build_space(self.space, self.fix, lossy=self.gated)

    def recorded(self, space: Space) -> dict[str, Any]:
        """What the study keeps to refuse a resume that would not be comparable."""
        return {"base": self.base, "space": space.describe(), "objective": self.objective,
                "span": asdict(self.span),
                "gate": {"max_kl": self.max_kl, "min_agreement": self.min_agreement}}


def make_pool(spec: Spec, ray: str | None, workers: int,
              stop: threading.Event | None = None) -> Pool:
    """Ray workers finish their running trials when stopped; the local one stops at once."""
    if ray:
        from tuner.tune.ray_pool import RayPool

        return RayPool(ray, workers, spec)
    return LocalPool(TrialWorker(spec.measured_base, spec.span, spec.sentinel_every,
                                 stop=stop))


def summary(study: optuna.Study, storage: str, complete: bool) -> dict[str, Any]:
    return {"study": study.study_name, "storage": storage, "complete": complete,
            "spec": study.user_attrs["spec"], "trials": rows(study),
            "front": [row(t) for t in front(study)]}


def tune(spec: Spec, trials: int, storage: str | None = None, study: str | None = None,
         seed: int = 0, ray: str | None = None, workers: int = 2,
         guards: list[Guard] | None = None, on_event: Event | None = None,
         stop: threading.Event | None = None, pool: Pool | None = None) -> dict[str, Any]:
    """Runs `trials` trials into study `study` (created or resumed; default: the study of
    this spec, `study_name`) and sums it up. Raises SettingsError for a bad space or
    baseline, TuneError for a study that cannot be resumed with this spec; nothing is
    measured then."""
    space = spec.space_of()
    base = validate(spec.base)
    url = storage_url(storage)
    recorded = spec.recorded(space)
    opened = open_study(url, study or study_name(recorded), recorded, seed)
    if not opened.trials:  # the baseline's own values first: its score is the noise floor
        opened.enqueue_trial({k: v for d in space.dimensions
                              for k, v in d.parameters(getattr(base, d.name)).items()},
                             user_attrs={"baseline_values": True})
    complete = True
    if trials:
        pool = pool or make_pool(spec, ray, workers, stop)
        try:
            complete = run_trials(opened, space, base, pool, trials, spec.objective,
                                  guards if guards is not None
                                  else guards_for(spec.max_kl, spec.min_agreement), on_event,
                                  stop)
        finally:
            pool.close()
    return summary(opened, url, complete)
