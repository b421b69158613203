"""The Optuna study a tune reports into: where it is stored, what it was run with, its
trials as rows, its Pareto front and its best trial as a preset.

Two objectives, both minimised: the trial's time per token against its paired baseline,
in % of the baseline's ms per token (`ms`: the whole token; `stall`: the exposed read
stall only), and bytes read per token. A relative score keeps trials from workers on
different machines on one scale; bytes per token are counted, not timed, so they need no
pairing.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import warnings
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna

from tuner.errors import TunerError
from tuner.knobs import KNOBS
from tuner.presets import Preset, Store, user_dir
from tuner.settings import Settings, apply, non_default, validate
from tuner.tune.space import knob_values
from tuner.vocabulary.judging import OBJECTIVES

BYTES = "bytes/token"
RUNNING = optuna.trial.TrialState.RUNNING


class TuneError(TunerError, ValueError):
    """A study cannot be run or read as asked; the message says what to change."""


def default_path() -> Path:
    """The SQLite file of the default storage, in TUNER_HOME."""
    return user_dir().parent / "tune.db"


def default_storage() -> str:
    path = default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def storage_url(text: str | None) -> str:
    """An Optuna storage URL; a plain path is an SQLite file."""
    if not text:
        return default_storage()
    if "://" in text:
        return text
    return f"sqlite:///{Path(text).resolve()}"


def open_study(storage: str, name: str, spec: dict[str, Any], seed: int) -> optuna.Study:
    """Creates the study or resumes it; a resumed study must have been run with the same
    baseline (its workload knob included), space, objective, span and quality gate, or its
    trials would not be comparable."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    existing = _load(storage, name)
    # A resumed study's sampler starts from another seed, or it would repeat its first picks
    offset = len(existing.trials) if existing else 0
    sampler = optuna.samplers.TPESampler(seed=seed + offset)
    study = optuna.create_study(storage=storage, study_name=name, load_if_exists=True,
                                directions=["minimize", "minimize"], sampler=sampler)
    old = study.user_attrs.get("spec")
    if old is None:
        study.set_user_attr("spec", spec)
        with warnings.catch_warnings():  # experimental since Optuna 3.2, read by the dashboard
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([OBJECTIVES[spec["objective"]][1], BYTES])
    elif old != spec:
        differ = sorted(k for k in spec.keys() | old.keys() if spec.get(k) != old.get(k))
        raise TuneError(f"study {name!r} in {storage} was run with other "
                        + "; other ".join(f"{k} ({_shown(old.get(k))}; now {_shown(spec.get(k))})"
                                          for k in differ)
                        + ": give the same to resume it, or another --study (without one, "
                        "each baseline, space, objective, span and gate has a study of its "
                        "own)")
    fail_abandoned(study)
    return study


def _shown(value: Any) -> str:
    """A recorded value as a line reads it: a mapping as name=value pairs."""
    if isinstance(value, dict):
        return ", ".join(f"{k}={_shown(v)}" for k, v in value.items() if v is not None) \
            or "none"
    return str(value)


def study_name(spec: dict[str, Any]) -> str:
    """The default name of a study: one per recorded spec, so running the same tune again
    resumes it and a tune of other tokens, space or baseline starts its own."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()
    return f"tune-{digest[:8]}"


def latest_study(storage: str) -> str:
    """The name of the tune study run last in `storage`: the one whose newest trial started
    last."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    names = [s.study_name for s in optuna.get_all_study_summaries(storage)
             if "spec" in s.user_attrs]
    if not names:
        raise TuneError(f"no tune study in {storage} yet: run a tune first")

    def started(name: str) -> datetime:
        trials = optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)
        return max((t.datetime_start for t in trials if t.datetime_start),
                   default=datetime.min)

    return max(names, key=started)


def driver() -> str:
    """Who asks for trials: host:pid of the tune's process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def fail_abandoned(study: optuna.Study) -> None:
    """Marks failed the trials still running for a tune process of this host that is gone
    (killed before it could tell the study), with the reason, so they are not left running
    forever; a running trial of another host's tune, or of a live one, is left alone."""
    host = socket.gethostname()
    for t in study.get_trials(deepcopy=False, states=(RUNNING,)):
        owner, _, pid = (t.user_attrs.get("driver") or f"{host}:").partition(":")
        if owner == host and not (pid.isdigit() and _alive(int(pid))):
            _fail(study, t, "abandoned: the tune running it ended before it was measured")


def fail_ours(study: optuna.Study, reason: str) -> None:
    """Marks failed the trials this process still runs, with `reason`: a tune that could
    not end in time, so that none is left running in the study when the process exits."""
    for t in study.get_trials(deepcopy=False, states=(RUNNING,)):
        if t.user_attrs.get("driver") == driver():
            _fail(study, t, reason)


def _fail(study: optuna.Study, t: optuna.trial.FrozenTrial, reason: str) -> None:
    with suppress(optuna.exceptions.UpdateFinishedTrialError):  # told meanwhile: kept so
        optuna.trial.Trial(study, t._trial_id).set_user_attr("rejected", reason)
        study.tell(t.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process of that id
        return True
    return True


def _load(storage: str, name: str) -> optuna.Study | None:
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        return None


def load_study(storage: str, name: str) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = _load(storage, name)
    if study is None or "spec" not in study.user_attrs:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise TuneError(f"no tune study {name!r} in {storage}; studies there: "
                        f"{', '.join(names) or 'none'}")
    return study


def spec_base(study: optuna.Study) -> Settings:
    return validate(study.user_attrs["spec"]["base"])


def row(t: optuna.trial.FrozenTrial) -> dict[str, Any]:
    """A trial as the CLI, the API and the page show it."""
    a = t.user_attrs
    fig, base = a.get("figures") or {}, a.get("baseline") or {}
    return {"number": t.number, "state": t.state.name.lower(), "worker": a.get("worker"),
            "params": knob_values(t.params), "score_pct": t.values[0] if t.values else None,
            "bytes_per_token": fig.get("bytes_per_token"),
            "ms_per_token": fig.get("ms_per_token"),
            "stall_ms_per_token": fig.get("stall_ms_per_token"),
            "hit_rate": fig.get("hit_rate"), "quality_kl": fig.get("quality_kl"),
            "top1_agreement": fig.get("top1_agreement"),
            "baseline_ms_per_token": base.get("ms_per_token"),
            "baseline_index": base.get("index"),
            # trial 0 runs the baseline's own values: its score is the study's noise floor
            "baseline_values": bool(a.get("baseline_values")),
            "rejected": a.get("rejected")}


def rows(study: optuna.Study) -> list[dict[str, Any]]:
    return [row(t) for t in study.get_trials(deepcopy=False)]


def front(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The Pareto front of the finished trials that passed their guards, fastest first."""
    return sorted(study.best_trials, key=lambda t: tuple(t.values))


def best(study: optuna.Study, number: int | None = None) -> optuna.trial.FrozenTrial:
    """Trial `number` (it must have passed), else the fastest of the Pareto front."""
    done = {t.number: t for t in study.get_trials(
        deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))}
    if number is not None:
        if number not in done:
            raise TuneError(f"trial {number} of study {study.study_name!r} did not finish "
                            f"and pass its guards; those that did: {sorted(done) or 'none'}")
        return done[number]
    pareto = front(study)
    if not pareto:
        raise TuneError(f"study {study.study_name!r} has no finished trial that passed its "
                        "guards yet: nothing to save")
    return pareto[0]


def trial_settings(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> Settings:
    return apply(spec_base(study), knob_values(trial.params))


def tuning(settings: Settings) -> Settings:
    """The settings without the session group (model, device, seed, ...): a preset of a
    tune is a tuning that applies to whatever model the session runs."""
    session = {k.name for k in KNOBS if k.group == "session"}
    return validate({k: v for k, v in non_default(settings).items() if k not in session})


def save_best(study: optuna.Study, name: str, number: int | None = None,
              store: Store | None = None, overwrite: bool = False
              ) -> tuple[Preset, optuna.trial.FrozenTrial]:
    trial = best(study, number)
    settings = tuning(trial_settings(study, trial))
    figure = OBJECTIVES[study.user_attrs["spec"]["objective"]][0]
    description = (f"tune study {study.study_name!r}, trial {trial.number}: "
                   f"{trial.values[0]:+.1f} % {figure} against its baseline, "
                   f"{trial.values[1]:.0f} bytes/token")
    return (store or Store()).save(name, settings, description, overwrite=overwrite), trial
