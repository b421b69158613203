"""Steering a running session: validated settings changes, session state, presets and the
background jobs (A/B, tune) of its job slot.

The web server and the embedded terminal UI both steer through a `Controller`, so a change
made from either is validated, versioned and applied the same way. Its public methods under
"the operations" are the control plane's API: each is a `Backend` operation of the same
name and signature (tuner.control.api), which the REST API serves, the embedded backend
calls in this process and the remote backend calls over HTTP.

A change returns once the engine applied it or refused it. Every wait is bounded: a change
that cannot start within `apply_timeout` (another is being applied) or that the engine
does not take up at a token boundary in that time is withdrawn, and nothing is applied.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np

from tuner.control.ab import ABRunner
from tuner.control.answers import (
    ABStatus,
    Budgets,
    Curve,
    KnobDiff,
    KnobInfo,
    PresetBody,
    PresetInfo,
    TuneStatus,
)
from tuner.control.errors import ApplyTimeout
from tuner.control.models import ABRequest, RunState, SessionState, TuneRequest
from tuner.control.slot import JobSlot
from tuner.control.tune import TuneRunner
from tuner.engine.session.session import Session
from tuner.knobs import BY_NAME, KNOBS, config_dict
from tuner.presets import Store, knob_diff
from tuner.settings import Settings, SettingsError, apply, to_config
from tuner.traces.budgets import BudgetError, plan
from tuner.traces.curve import LiveCurve
from tuner.vocabulary import trace_format
from tuner.vocabulary.inputs import shown
from tuner.vocabulary.model_config import ModelConfig, ModelError
from tuner.vocabulary.snapshot import Experts, Snapshot
from tuner.vocabulary.trace_format import Trace, TraceError

# While a UI or the server shares the engine's process, a thread that wants the GIL waits
# at most this long for its holder (Python's default is 5 ms), so the decode thread gets it
# back soon after an event loop took it between two of its torch calls.
GIL_SWITCH_S = 0.001

APPLY_TIMEOUT = 10.0  # seconds a change may wait for its turn, then for a token boundary


def session_base(current: Settings) -> Settings:
    """Defaults, except the session group, which keeps its current values."""
    keep = {k.name: getattr(current, k.name) for k in KNOBS if k.group == "session"}
    return Settings(**keep)


def check_paths(new: Settings, old: Settings) -> None:
    """Rejects a changed model folder that is not a usable model's, or a routing trace that
    is not a trace, before it reaches the engine, so the answer names the knob instead of
    reporting a failed rebuild."""
    problems = {}
    if new.model != old.model and new.model:
        try:
            ModelConfig.read(Path(new.model))
        except ModelError as err:
            problems["model"] = (f"{BY_NAME['model'].label} = {shown(new.model)} is not a "
                                 f"model folder: {err}")
    if new.routing != old.routing and new.routing:
        try:
            trace_format.load(Path(new.routing))
        except TraceError as err:
            problems["routing"] = (f"{BY_NAME['routing'].label} = {shown(new.routing)} is "
                                   f"not a trace: {err}; allowed: a trace (.npz) from tuner "
                                   "trace record or import, or empty")
    if problems:
        raise SettingsError(problems)


class Controller:
    def __init__(self, session: Session, settings: Settings, store: Store | None = None,
                 apply_timeout: float = APPLY_TIMEOUT):
        self.session = session
        self.settings = settings
        self.store = store or Store()
        self.apply_timeout = apply_timeout
        self._lock = threading.Lock()  # one settings change at a time
        self.slot = JobSlot(session)
        self.ab = ABRunner(self.slot, self.preset_settings)
        self.tune = TuneRunner(self.slot, lambda: self.settings)
        self.curve_worker = LiveCurve(session)

    def close(self, timeout: float = 30.0) -> bool:
        """Stops a tune (waiting a moment for it to fail its trial in flight), the curve's
        worker process and the session, waiting at most `timeout` seconds for the decode
        thread to reach a token boundary; False when it did not (Session.stop)."""
        self.tune.close()
        self.curve_worker.close()
        return self.session.stop(timeout)

    @property
    def version(self) -> int:
        return int(self.session.applied_version)

    # -- the operations (tuner.control.api documents each) ----------------------------
    # The rooms below answer plain dicts; they are typed here, at the boundary, as
    # tuner.control.answers declares them (tests/control/test_answers.py checks the keys).
    def knobs(self) -> list[KnobInfo]:
        return [cast(KnobInfo, k.as_dict()) for k in KNOBS]

    def state(self) -> SessionState:
        """Version and settings as the engine runs them, read together."""
        version, cfg = self.session.settings_state()
        return SessionState(version=version, settings=config_dict(cfg),
                            state=self.session.state)

    def change(self, changes: Mapping[str, Any]) -> SessionState:
        """Validates `changes` on top of the current settings as a whole and applies them at
        the next token boundary (no new version when nothing changes). Raises SettingsError
        and changes nothing when any value is bad or the engine refuses the version, and
        ApplyTimeout when the change was withdrawn."""
        with self._turn():  # the state read before another change can start
            self._submit(apply(self.settings, changes))
            return self.state()

    def snapshot(self) -> Snapshot:
        return self.session.snapshot()

    def pause(self) -> RunState:
        self.session.pause()
        return RunState(state=self.session.state)

    def resume(self) -> RunState:
        self.session.resume()
        return RunState(state=self.session.state)

    def reset(self) -> RunState:
        """Zeroes the counters at the next token boundary; answered once that boundary
        passed, or after the apply timeout with the reset still pending."""
        self.session.reset_counters(wait=self.apply_timeout)
        return RunState(state=self.session.state)

    def window_budgets(self, weights: str = "hits", apply: bool = False) -> Budgets:
        """Per-layer quotas for the running arena from the routings of the session's window
        (and, for `weights` stall, the stall per miss it measured), checked by replaying
        the window; with `apply`, runs them (arena_split = layers). Raises SettingsError."""
        snap = self.session.snapshot()
        routes = self.session.engine.counters.window_routings()
        if not len(routes):
            raise SettingsError({"arena_budgets": "the window holds no routings yet; let the "
                                                  "session decode some tokens first"})
        window = snap["window"]["layers"]
        meta = {"model": snap["model"]["name"], "num_experts": snap["model"]["experts"],
                "layer_stall_ms": [r["stall_ms"] for r in window],
                "layer_sync_misses": [r["sync_misses"] for r in window]}
        trace = Trace(routes.astype(np.int32), meta)
        try:
            out = cast(Budgets, plan(trace, snap["arena"]["slots"], weights))
        except BudgetError as err:
            raise SettingsError({"arena_budgets": str(err)}) from None
        if apply:
            out["version"] = self.change({"arena_split": "layers",
                                          "arena_budgets": tuple(out["quotas"])}).version
        return out

    def presets(self) -> list[PresetInfo]:
        return cast(list[PresetInfo], self.store.list())

    def preset(self, name: str) -> PresetBody:
        return cast(PresetBody, self.store.get(name).as_dict())

    def save_preset(self, name: str, description: str | None,
                    overwrite: bool = False) -> PresetBody:
        """Saves the current settings; see Store.save for shipped names and overwriting."""
        saved = self.store.save(name, self.settings, description, None, overwrite)
        return cast(PresetBody, saved.as_dict())

    def delete_preset(self, name: str) -> None:
        self.store.delete(name)

    def apply_preset(self, name: str) -> SessionState:
        """The preset's knobs on top of the defaults, so a preset is a whole tuning; the
        session group (model, seed, context, window) stays as it is unless the preset
        sets it."""
        with self._turn():
            self._submit(self.preset_settings(name))
            return self.state()

    def diff_preset(self, name: str, against: str | None = None) -> list[KnobDiff]:
        """Knobs that differ between preset `name` and preset `against` (or the current
        settings)."""
        b = self.preset_settings(against) if against else self.settings
        return cast(list[KnobDiff], knob_diff(self.preset_settings(name), b))

    def start_ab(self, request: ABRequest) -> ABStatus:
        return self.ab.start(request).status()

    def ab_status(self) -> ABStatus | None:
        job = self.ab.job
        return None if job is None else job.status()

    def experts(self, view: Literal["window", "cumulative"] = "window") -> Experts:
        return self.session.experts(view == "window")

    def curve(self) -> Curve | None:
        return cast(Curve | None, self.curve_worker.latest())

    def start_tune(self, request: TuneRequest) -> TuneStatus:
        return self.tune.start(request).status()

    def tune_status(self) -> TuneStatus | None:
        job = self.tune.job
        return None if job is None else job.status()

    def stop_tune(self) -> TuneStatus | None:
        job = self.tune.stop()
        return None if job is None else job.status()

    # -- presets -----------------------------------------------------------------------
    def preset_settings(self, name: str) -> Settings:
        """What applying preset `name` would give (see apply_preset)."""
        return self.store.get(name).settings(session_base(self.settings))

    # -- one change at a time ----------------------------------------------------------
    @contextmanager
    def _turn(self) -> Iterator[None]:
        """Holds the lock, once it is free within apply_timeout: one change at a time, each
        on top of the one before."""
        if not self._lock.acquire(timeout=self.apply_timeout):
            raise ApplyTimeout(f"another settings change was still being applied after "
                               f"{self.apply_timeout:g} s; nothing was applied, try again")
        try:
            yield
        finally:
            self._lock.release()

    def _submit(self, new: Settings) -> None:
        if new == self.settings:  # no version, and no change marker, for no change
            return
        check_paths(new, self.settings)
        session = self.session
        version = session.submit(to_config(new))
        if not session.wait_applied(version, self.apply_timeout):
            if session.withdraw(version):
                raise ApplyTimeout(
                    f"the engine did not reach a token boundary within "
                    f"{self.apply_timeout:g} s (it is {session.state}, at token "
                    f"{session.tokens}); version {version} was withdrawn, nothing was applied")
            while not session.wait_applied(version, self.apply_timeout):
                pass  # taken up: a rebuild under way ends first, however long it takes
        rejected = session.rejection(version)
        if rejected:
            raise SettingsError({"settings": f"version {version} was refused by the engine, "
                                             f"which kept the previous settings: {rejected}"})
        self.settings = new
