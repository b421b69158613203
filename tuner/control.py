"""Steering a running session: validated settings changes, session state and presets.

The web server and the embedded terminal UI both steer through a `Controller`, so a change
made from either is validated, versioned and applied the same way. The remote terminal UI
reaches the same operations through the server's REST API.

A change returns once the engine applied it or refused it. Every wait is bounded: a change
that cannot start within `apply_timeout` (another is being applied) or that the engine
does not take up at a token boundary in that time is withdrawn, and nothing is applied.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from tuner.ab_job import ABRunner
from tuner.engine import trace_format
from tuner.engine.inputs import shown
from tuner.engine.model_config import ModelConfig, ModelError
from tuner.engine.session import Session
from tuner.engine.trace_format import Trace, TraceError
from tuner.knobs import BY_NAME, KNOBS, config_dict
from tuner.presets import Preset, Store, knob_diff
from tuner.settings import Settings, SettingsError, apply, to_config
from tuner.traces.budgets import BudgetError, plan
from tuner.traces.curve import LiveCurve
from tuner.tune_job import TuneRunner

# While a UI or the server shares the engine's process, a thread that wants the GIL waits
# at most this long for its holder (Python's default is 5 ms), so the decode thread gets it
# back soon after an event loop took it between two of its torch calls.
GIL_SWITCH_S = 0.001

APPLY_TIMEOUT = 10.0  # seconds a change may wait for its turn, then for a token boundary


class ApplyTimeout(RuntimeError):
    """A settings change was withdrawn before the engine took it up: nothing was applied."""


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
        self.ab = ABRunner(self)
        self.curve = LiveCurve(session)
        self.tune = TuneRunner(self)

    def close(self) -> None:
        """Stops a tune, the session and the curve's worker process."""
        self.tune.stop()
        self.curve.close()
        self.session.stop()

    @property
    def version(self) -> int:
        return self.session.applied_version

    def change(self, changes: Mapping[str, Any]) -> int:
        """Validates `changes` on top of the current settings as a whole and applies them at
        the next token boundary; returns the new settings version (the current one when
        nothing changes). Raises SettingsError and
        changes nothing when any value is bad or the engine refuses the version, and
        ApplyTimeout when the change was withdrawn."""
        with self._turn():
            return self._submit(apply(self.settings, changes))

    def replace(self, settings: Settings) -> int:
        with self._turn():
            return self._submit(settings)

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

    def _submit(self, new: Settings) -> int:
        if new == self.settings:  # no version, and no change marker, for no change
            return self.version
        check_paths(new, self.settings)
        session = self.session
        version = session.submit(to_config(new))
        if not session.wait_applied(version, self.apply_timeout):
            if session.withdraw(version):
                raise ApplyTimeout(
                    f"the engine did not reach a token boundary within "
                    f"{self.apply_timeout:g} s (it is {session.state}, at token "
                    f"{session.tokens}); version {version} was withdrawn, nothing was applied")
            session.wait_applied(version, None)  # taken up: a rebuild under way ends first
        rejected = session.rejection(version)
        if rejected:
            raise SettingsError({"settings": f"version {version} was refused by the engine, "
                                             f"which kept the previous settings: {rejected}"})
        self.settings = new
        return version

    def window_budgets(self, weights: str = "hits", apply: bool = False) -> dict[str, Any]:
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
            out = plan(trace, snap["arena"]["slots"], weights)
        except BudgetError as err:
            raise SettingsError({"arena_budgets": str(err)}) from None
        if apply:
            out["version"] = self.change({"arena_split": "layers", "arena_budgets": ",".join(
                str(q) for q in out["quotas"])})
        return out

    def state(self) -> dict[str, Any]:
        """Version and settings as the engine runs them, read together."""
        version, cfg = self.session.settings_state()
        return {"version": version, "settings": config_dict(cfg), "state": self.session.state}

    # -- presets -----------------------------------------------------------------------
    def preset_settings(self, name: str) -> Settings:
        """What applying preset `name` would give (see apply_preset)."""
        return self.store.get(name).settings(session_base(self.settings))

    def apply_preset(self, name: str) -> int:
        """The preset's knobs on top of the defaults, so a preset is a whole tuning; the
        session group (model, seed, context, window) stays as it is unless the preset
        sets it."""
        return self.replace(self.preset_settings(name))

    def save_preset(self, name: str, description: str | None = None,
                    based_on: str | None = None, overwrite: bool = False) -> Preset:
        """Saves the current settings; see Store.save for shipped names and overwriting."""
        return self.store.save(name, self.settings, description, based_on, overwrite)

    def diff(self, a: str, b: str | None = None) -> list[dict[str, Any]]:
        """Knobs that differ between preset `a` and preset `b` (or the current settings)."""
        sb = self.preset_settings(b) if b else self.settings
        return knob_diff(self.preset_settings(a), sb)
