"""Steering a running session: validated settings changes, session state and presets.

The web server and the embedded terminal UI both steer through a `Controller`, so a change
made from either is validated, versioned and applied the same way. The remote terminal UI
reaches the same operations through the server's REST API.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tuner.ab_job import ABRunner
from tuner.engine.session import Session
from tuner.knobs import KNOBS
from tuner.presets import Preset, Store, knob_diff
from tuner.settings import Settings, SettingsError, apply, to_config
from tuner.traces.budgets import BudgetError, plan
from tuner.traces.format import Trace


def session_base(current: Settings) -> Settings:
    """Defaults, except the session group, which keeps its current values."""
    keep = {k.name: getattr(current, k.name) for k in KNOBS if k.group == "session"}
    return Settings(**keep)


def check_model(folder: str) -> None:
    """Rejects a folder that is not a model before it reaches the engine, so the answer
    names the knob instead of reporting a failed rebuild."""
    if folder and not (Path(folder) / "config.json").is_file():
        raise SettingsError({"model": f"model (STRATA_MODEL) = {folder!r} is not a model "
                                      "folder: it has no config.json"})


class Controller:
    def __init__(self, session: Session, settings: Settings, store: Store | None = None,
                 apply_timeout: float = 60.0):
        self.session = session
        self.settings = settings
        self.store = store or Store()
        self.apply_timeout = apply_timeout
        self._lock = threading.Lock()  # one settings change at a time
        self.ab = ABRunner(self)

    @property
    def version(self) -> int:
        return self.session.applied_version

    def change(self, changes: Mapping[str, Any]) -> int:
        """Validates `changes` on top of the current settings as a whole and applies them at
        the next token boundary; returns the new settings version. Raises SettingsError and
        changes nothing when any value is bad."""
        with self._lock:
            new = apply(self.settings, changes)
            return self._submit(new)

    def replace(self, settings: Settings) -> int:
        with self._lock:
            return self._submit(settings)

    def _submit(self, new: Settings) -> int:
        if new.model != self.settings.model:
            check_model(new.model)
        version = self.session.submit(to_config(new))
        self.session.wait_applied(version, self.apply_timeout)
        rejected = self.session.rejection(version)
        if rejected:
            raise SettingsError({"settings": f"version {version} was rejected by the engine, "
                                             f"which kept the previous settings: {rejected}"})
        self.settings = new
        return version

    def window_budgets(self, weights: str = "hits", apply: bool = False) -> dict[str, Any]:
        """Per-layer quotas for the running arena from the routings of the session's window
        (and, for `weights` stall, the stall per miss it measured), checked by replaying
        the window; with `apply`, runs them (arena_split = layers). Raises SettingsError."""
        snap = self.session.snapshot()
        routes = self.session.engine.counters.window_routes()
        if not routes:
            raise SettingsError({"arena_budgets": "the window holds no routings yet; let the "
                                                  "session decode some tokens first"})
        window = snap["window"]["layers"]
        meta = {"model": snap["model"]["name"], "num_experts": snap["model"]["experts"],
                "layer_stall_ms": [r["stall_ms"] for r in window],
                "layer_sync_misses": [r["sync_misses"] for r in window]}
        trace = Trace(np.array(routes, dtype=np.int32), meta)
        try:
            out = plan(trace, snap["arena"]["slots"], weights)
        except BudgetError as err:
            raise SettingsError({"arena_budgets": str(err)}) from None
        if apply:
            out["version"] = self.change({"arena_split": "layers", "arena_budgets": ",".join(
                str(q) for q in out["quotas"])})
        return out

    def state(self) -> dict[str, Any]:
        return {"version": self.version, "settings": self.settings.model_dump(),
                "state": self.session.state}

    # -- presets -----------------------------------------------------------------------
    def preset_settings(self, name: str) -> Settings:
        """What applying preset `name` would give (see apply_preset)."""
        return self.store.get(name).settings(session_base(self.settings))

    def apply_preset(self, name: str) -> int:
        """The preset's knobs on top of the defaults, so a preset is a whole tuning; the
        session group (model, seed, context, window) stays as it is unless the preset
        sets it."""
        return self.replace(self.preset_settings(name))

    def save_preset(self, name: str, description: str = "", based_on: str | None = None
                    ) -> Preset:
        return self.store.save(name, self.settings, description, based_on)

    def diff(self, a: str, b: str | None = None) -> list[dict[str, Any]]:
        """Knobs that differ between preset `a` and preset `b` (or the current settings)."""
        sb = self.preset_settings(b) if b else self.settings
        return knob_diff(self.preset_settings(a), sb)
