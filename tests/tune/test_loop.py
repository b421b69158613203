"""The tune loop on a constructed objective: the sentinel's pairing removes the machine's
drift, guards reject a trial that breaks output identity, Ctrl-C keeps finished trials."""

from __future__ import annotations

import optuna
import pytest

from tuner.settings import validate
from tuner.tune.guards import guards_for
from tuner.tune.loop import LocalPool, run_trials
from tuner.tune.run import Spec, tune
from tuner.tune.space import build_space
from tuner.tune.worker import Span, TrialWorker

BASE_MS = 10.0
DRIFT = 0.4  # the machine slows by this fraction of its first speed per measurement


def true_ms(s) -> float:
    """The constructed cost: each speculated expert saves half a millisecond."""
    return BASE_MS - 0.5 * s.prefetch_max


class Drifting:
    """Measures on a machine that gets slower and slower (by 5x over a short tune);
    the 2q policy is made to change the output, as a lossy bug would."""

    def __init__(self):
        self.calls = 0
        self.raw: list[float] = []

    def __call__(self, s) -> dict:
        self.calls += 1
        ms = true_ms(s) * (1 + DRIFT * self.calls)
        self.raw.append(ms)
        return {"tokens": 8, "ms_per_token": ms, "stall_ms_per_token": 0.0,
                "bytes_per_token": 1000 - 10 * s.prefetch_max, "hit_rate": 50.0,
                "output_hash": "changed" if s.cache_policy == "2q" else "exact"}


def study(tmp_path) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(directions=["minimize", "minimize"],
                               storage=f"sqlite:///{tmp_path / 's.db'}",
                               sampler=optuna.samplers.TPESampler(seed=3))


def test_pairing_removes_drift_and_identity_breaks_are_rejected(tmp_path):
    space = build_space("cache_policy=lru|2q",
                        "prefetch=off,prefetch_touch=0,io_workers=8,io_urgent=2,"
                        "arena_split=global,prompt_hot=1")
    measure = Drifting()
    worker = TrialWorker({}, Span(8, 8), sentinel_every=1, measure=measure, name="w")
    s = study(tmp_path)
    assert run_trials(s, space, validate({}), LocalPool(worker), 16, "ms", guards_for())
    done = [t for t in s.trials if t.state == optuna.trial.TrialState.COMPLETE]
    rejected = [t for t in s.trials if t.state == optuna.trial.TrialState.FAIL]
    assert done and rejected and len(done) + len(rejected) == 16
    for t in done:  # the paired score is the true relative difference, whatever the speed
        base = true_ms(validate({}))
        expected = 100 * (true_ms(validate(t.params)) - base) / base
        assert t.values[0] == pytest.approx(expected, abs=1e-3)  # scores keep 3 decimals
    # ... while the raw timings moved by far more than any setting did
    fastest = true_ms(validate({"prefetch_max": 8}))
    assert max(measure.raw) / min(measure.raw) > 3 * BASE_MS / fastest
    for t in rejected:
        assert t.params["cache_policy"] == "2q"
        assert "output differs from the baseline's" in t.user_attrs["rejected"]
        assert "exact arm (moce_bonus, moce_bonus_r1, drop_cold all 0)" in t.user_attrs[
                "rejected"]
    assert all(t.params["cache_policy"] == "lru" for t in s.best_trials)
    assert len(worker.baselines) == 17  # before every trial, and the sentinel after


def test_the_sentinel_is_measured_every_n_trials(tmp_path):
    worker = TrialWorker({}, Span(8, 8), sentinel_every=3, measure=Drifting(), name="w")
    space = build_space("", "cache_policy=lru")
    s = study(tmp_path)
    run_trials(s, space, validate({}), LocalPool(worker), 7, "ms", guards_for())
    assert len(worker.baselines) == 4  # before trials 0, 3 and 6, and after trial 6
    indices = [t.user_attrs["baseline"]["index"] for t in s.trials]
    assert indices == [0, 0, 0, 1, 1, 1, 2]  # each paired with the one before and after it
    assert all(t.user_attrs["baseline"]["after_ms_per_token"] for t in s.trials)


def test_a_lossy_arm_needs_identity_until_a_quality_gate_is_given():
    exact_ = validate({})
    base, changed = {"output_hash": "a"}, {"output_hash": "b"}
    (identity,) = guards_for()
    for knob, value in (("moce_bonus", 0.85), ("moce_bonus_r1", 1.0), ("drop_cold", 0.1)):
        assert "needs a quality gate" in identity(validate({knob: value}), changed, base)
    assert identity(exact_, base, base) is None
    lossy = validate({"drop_cold": 0.1})
    guards = guards_for(max_kl=0.01, min_agreement=90)
    passed = {**changed, "quality_kl": 0.001, "top1_agreement": 95.0}
    assert [g(lossy, passed, base) for g in guards] == [None, None]
    assert [g(lossy, {**passed, "quality_kl": 0.5}, base) for g in guards] == [
        None, "quality gate: KL 0.5 nats/token > max_kl 0.01"]
    assert guards[1](lossy, changed, base).startswith("quality gate: no KL measured")
    assert guards[0](exact_, changed, base).startswith("output differs")


class Interrupting(Drifting):
    def __call__(self, s) -> dict:
        if self.calls == 5:  # warm-up, baseline, trial 0, baseline, trial 1, then this
            raise KeyboardInterrupt
        return super().__call__(s)


def test_ctrl_c_keeps_finished_trials(tmp_path):
    worker = TrialWorker({}, Span(8, 8), sentinel_every=1, measure=Interrupting(),
                         name="w")
    s = study(tmp_path)
    space = build_space("", "cache_policy=lru")
    assert not run_trials(s, space, validate({}), LocalPool(worker), 10, "ms", guards_for())
    states = [t.state.name for t in s.trials]
    assert states == ["COMPLETE", "COMPLETE", "FAIL"]
    # trial 1 was measured: kept, paired with the baseline before it alone
    assert s.trials[1].user_attrs["baseline"]["after_ms_per_token"] is None
    assert s.trials[2].user_attrs["rejected"] == "stopped before its measurement finished"


class InterruptingAt(Drifting):
    """Ctrl-C at the measurement after `calls` of them."""

    def __init__(self, calls: int):
        super().__init__()
        self.at = calls

    def __call__(self, s) -> dict:
        if self.calls == self.at:
            raise KeyboardInterrupt
        return super().__call__(s)


def test_ctrl_c_after_a_sentinel_keeps_the_trials_it_settled(tmp_path):
    """Warm-up, baseline, trials 0-2, the baseline that settles them, then Ctrl-C during
    trial 3: the three are scored against the baselines before and after them."""
    worker = TrialWorker({}, Span(8, 8), sentinel_every=3, measure=InterruptingAt(6),
                         name="w")
    s = study(tmp_path)
    space = build_space("", "cache_policy=lru")
    assert not run_trials(s, space, validate({}), LocalPool(worker), 10, "ms", guards_for())
    assert [t.state.name for t in s.trials] == ["COMPLETE"] * 3 + ["FAIL"]
    assert all(t.user_attrs["baseline"]["after_ms_per_token"] for t in s.trials[:3])


def test_ctrl_c_while_the_study_is_told_keeps_every_settled_trial(tmp_path, monkeypatch):
    from tuner.tune import loop

    judged = []

    def judge(*args) -> None:
        judged.append(args[1].number)
        if len(judged) == 2:  # in the middle of telling trials 0-2
            raise KeyboardInterrupt
        real_judge(*args)

    real_judge = loop.judge
    monkeypatch.setattr(loop, "judge", judge)
    worker = TrialWorker({}, Span(8, 8), sentinel_every=3, measure=Drifting(), name="w")
    s = study(tmp_path)
    space = build_space("", "cache_policy=lru")
    assert not run_trials(s, space, validate({}), LocalPool(worker), 10, "ms", guards_for())
    assert [t.state.name for t in s.trials[:3]] == ["COMPLETE"] * 3
    assert s.trials[3].user_attrs["baseline"]["after_ms_per_token"] is None  # measured


def test_a_study_resumes_only_with_the_same_spec(tmp_path):
    def pool():
        return LocalPool(TrialWorker({}, Span(8, 8), 2, measure=Drifting(), name="w"))

    spec = Spec(base={}, fix="cache_policy=lru", tokens=8, warmup=8)
    storage = str(tmp_path / "t.db")
    first = tune(spec, 3, storage, "s", pool=pool())
    assert len(first["trials"]) == 3 and first["trials"][0]["params"]["prefetch_max"] == 2
    again = tune(spec, 2, storage, "s", pool=pool())
    assert len(again["trials"]) == 5  # resumed: the finished trials kept
    from tuner.tune.study import TuneError

    with pytest.raises(TuneError, match=r"other objective \(ms; now stall\): give the same "
                       "to resume it, or another --study"):
        tune(Spec(base={}, fix="cache_policy=lru", tokens=8, warmup=8, objective="stall"), 1,
             storage, "s", pool=pool())


def test_a_resumed_study_fails_the_trials_a_killed_tune_left_running(tmp_path):
    """A tune killed outright (kill -9) never told the study about its trial in flight; the
    next tune of that study fails it with the reason, so it neither runs forever nor drops
    out of the summary. A trial of a tune still alive is left to it."""
    import os
    import socket

    from tuner.tune.study import open_study

    spec = Spec(base={}, fix="cache_policy=lru", tokens=8, warmup=8)
    storage = f"sqlite:///{tmp_path / 't.db'}"
    recorded = spec.recorded(spec.space_of())
    s = open_study(storage, "s", recorded, 0)
    host = socket.gethostname()
    dead = subprocess_pid_gone()
    for driver in (f"{host}:{dead}", f"{host}:{os.getpid()}", f"elsewhere:{dead}"):
        s.ask().set_user_attr("driver", driver)
    resumed = open_study(storage, "s", recorded, 0)
    states = [t.state.name for t in resumed.trials]
    assert states == ["FAIL", "RUNNING", "RUNNING"]
    assert resumed.trials[0].user_attrs["rejected"].startswith("abandoned: the tune running it")


def subprocess_pid_gone() -> int:
    """The id of a process that has ended."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid
