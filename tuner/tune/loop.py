"""The tune loop: Optuna asks for a candidate, a worker measures it against its own
baseline, the guards judge it, Optuna is told the paired scores.

Workers sit behind a small pool: `LocalPool` runs one worker in this process; the Ray pool
(`tuner.tune.ray_pool`) runs one per Ray actor. The loop keeps every worker busy, tells
the study as trials finish, and stops asking when `stop` is set; on Ctrl-C, or when `stop`
cuts an in-process measurement short, the trials in flight are marked failed ("stopped")
and every finished trial stays in the study.
"""

from __future__ import annotations

import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import optuna

from tuner.settings import Settings, SettingsError, apply
from tuner.tune.guards import Guard, rejection
from tuner.tune.space import Space
from tuner.tune.study import driver, row
from tuner.tune.worker import Stopped, TrialWorker
from tuner.vocabulary.judging import OBJECTIVES

FAIL = optuna.trial.TrialState.FAIL


class Pool(Protocol):
    size: int

    def submit(self, worker: int, number: int, params: dict[str, Any]) -> None: ...

    def next_done(self) -> tuple[int, list[dict[str, Any]]]:
        """A worker that finished its trial, and the trials that settled (TrialWorker)."""

    def finish(self, closing: bool) -> list[dict[str, Any]]:
        """Every worker's waiting trials: `closing`, after a sentinel baseline; else as
        they stand (stopped)."""

    def close(self) -> None: ...


class LocalPool:
    """One worker in this process; a submitted trial runs when its result is asked for."""

    size = 1

    def __init__(self, worker: TrialWorker):
        self.worker = worker
        self._queued: list[tuple[int, int, dict]] = []

    def submit(self, worker: int, number: int, params: dict[str, Any]) -> None:
        self._queued.append((worker, number, params))

    def next_done(self) -> tuple[int, list[dict[str, Any]]]:
        worker, number, params = self._queued.pop(0)
        return worker, self.worker.trial(number, params)

    def finish(self, closing: bool) -> list[dict[str, Any]]:
        return self.worker.settle(closing)

    def close(self) -> None:
        self.worker.close()


def score(objective: str, figures: dict, baseline: dict) -> float:
    """The trial's paired difference from its baselines, in % of their ms/token."""
    key = OBJECTIVES[objective][0]
    return round(100 * (figures[key] - baseline[key]) / baseline["ms_per_token"], 3)


def judge(study: optuna.Study, trial: optuna.Trial, settings: Settings, result: dict,
          objective: str, guards: list[Guard]) -> None:
    """Records what the worker measured on the trial and tells the study."""
    trial.set_user_attr("worker", result["worker"])
    trial.set_user_attr("baseline", result["baseline"])
    reason = result.get("refused")
    if reason is None:
        figures = result["figures"]
        trial.set_user_attr("figures", figures)
        reason = rejection(guards, settings, figures, result["baseline"])
    if reason:
        trial.set_user_attr("rejected", reason)
        study.tell(trial, state=FAIL)
        return
    study.tell(trial, [score(objective, figures, result["baseline"]),
                       figures["bytes_per_token"]])


class Interrupts:
    """Ctrl-C and SIGTERM held back while the study is written and let through while a
    worker measures, where they stop the tune: a storage write cut in half leaves SQLite
    locked to the rest of the process, and the stop's own writes then fail. Off the main
    thread (a server's tune) there are no signals to hold: `stop` ends such a tune."""

    def __init__(self) -> None:
        self.pending = False  # one came while held: raised where they are let through
        self._handlers: dict[int, Any] = {}

    def _note(self, signum: int, frame: Any) -> None:
        self.pending = True

    def hold(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._handlers[sig] = signal.signal(sig, self._note)

    def release(self) -> None:
        for sig, handler in self._handlers.items():
            signal.signal(sig, handler)
        self._handlers = {}

    @contextmanager
    def let_through(self) -> Iterator[None]:
        self.release()
        try:
            if self.pending:
                raise KeyboardInterrupt
            yield
        finally:
            self.hold()


# ("start", {number, params}, study) as a trial is sent to a worker; ("done", its row,
# study) once the study was told
Event = Callable[[str, dict[str, Any], optuna.Study], None]


def run_trials(study: optuna.Study, space: Space, base: Settings, pool: Pool, trials: int,
               objective: str, guards: list[Guard], on_event: Event | None = None,
               stop: threading.Event | None = None) -> bool:
    """Runs `trials` trials (fewer when `stop` is set); True when all ran, False when
    stopped or interrupted. The pool is not closed here."""
    on_event = on_event or (lambda kind, r, study: None)
    stop = stop or threading.Event()
    idle, running = list(range(pool.size)), set()
    waiting: dict[int, tuple[optuna.Trial, Settings]] = {}  # measured or running, not told
    received: list[dict[str, Any]] = []  # settled by a worker, not told yet
    asked = 0

    # A trial stays in `waiting` until the study was told about it, and a settled one in
    # `received`, so a stop while a worker measures finds it there: a settled trial is
    # told, one still running is failed.
    def tell() -> None:
        while received:
            trial, settings = waiting[received[0]["number"]]
            if not study.trials[trial.number].state.is_finished():  # else told already
                judge(study, trial, settings, received[0], objective, guards)
            del waiting[received.pop(0)["number"]]
            on_event("done", row(study.trials[trial.number]), study)

    def fail_waiting(reason: str) -> None:
        for trial, _ in waiting.values():  # kept as failed, never scored
            if study.trials[trial.number].state.is_finished():
                continue  # told just before the stop
            trial.set_user_attr("rejected", reason)
            study.tell(trial, state=FAIL)
            on_event("done", row(study.trials[trial.number]), study)

    interrupts = Interrupts()
    interrupts.hold()
    try:
        while True:
            while idle and asked < trials and not stop.is_set():
                trial, asked = study.ask(), asked + 1
                waiting[trial.number] = (trial, base)
                trial.set_user_attr("driver", driver())
                with warnings.catch_warnings():  # trial 0 runs the baseline's own values,
                    warnings.filterwarnings(  # which may lie outside a range on purpose
                        "ignore", message="Fixed parameter .* is out of range")
                    params = space.suggest(trial)
                try:
                    settings = apply(base, params)
                except SettingsError as err:  # a combination the knobs do not allow
                    trial.set_user_attr("rejected", f"settings: {err}")
                    study.tell(trial, state=FAIL)
                    del waiting[trial.number]
                    on_event("done", row(study.trials[trial.number]), study)
                    continue
                worker = idle.pop(0)
                running.add(worker)
                waiting[trial.number] = (trial, settings)
                pool.submit(worker, trial.number, params)
                on_event("start", {"number": trial.number, "params": params}, study)
            if not running:
                with interrupts.let_through():  # the sentinel after each worker's last
                    received.extend(pool.finish(closing=True))
                tell()
                fail_waiting("its worker failed before its baseline was measured again")
                return asked >= trials and not stop.is_set()
            with interrupts.let_through():
                worker, settled = pool.next_done()
                received.extend(settled)
            running.discard(worker)
            idle.append(worker)
            tell()
    except (KeyboardInterrupt, Stopped):
        received.extend(pool.finish(closing=False))  # paired with the baseline before only
        tell()
        fail_waiting("stopped before its measurement finished")
        return False
    finally:
        interrupts.release()
