"""A session's settings versions: each submitted Config gets the next version; the thread
that decodes takes the latest at a token boundary and applies it, live knobs in place and
restart-class knobs (arena size, I/O pool, model) by rebuilding the engine in place, or
refuses it with the reason and keeps the engine it runs.

`SettingsVersions` is that part of a session: it holds the session's lock, which guards
its state, and the session supplies how to hurry the current token, apply live knobs and
rebuild.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import fields
from typing import Any

from tuner.config import Config
from tuner.knobs import KNOBS
from tuner.vocabulary.snapshot import Change

log = logging.getLogger(__name__)

RESTART = frozenset(k.name for k in KNOBS if k.restart)
MAX_CHANGES = 200

Pending = tuple[Config, int]  # settings and the version they carry


def changed_knobs(old: Config, new: Config) -> dict[str, list[Any]]:
    """{knob: [old value, new value]} of the knobs whose values differ."""
    return {f.name: [getattr(old, f.name), getattr(new, f.name)]
            for f in fields(new) if getattr(old, f.name) != getattr(new, f.name)}


class SettingsVersions(ABC):
    def __init__(self, cfg: Config):
        self._lock = threading.Condition()  # the session's
        self.cfg = cfg  # what the engine runs
        self.version = 1  # the latest version submitted
        self.applied_version = 1  # the version the engine runs
        self.settled_version = 1  # the latest version applied, refused or withdrawn
        self.changes: deque[Change] = deque(maxlen=MAX_CHANGES)
        self._pending: Pending | None = None

    # what the session does for a version
    @abstractmethod
    def _hurry(self) -> None:
        """Makes the current token reach its boundary soon (called under the lock)."""

    @abstractmethod
    def _rebuild(self, cfg: Config) -> None:
        """Builds the engine anew for `cfg`, or raises and keeps the running one."""

    @abstractmethod
    def _apply_live(self, cfg: Config) -> None:
        """Takes `cfg`'s live knobs into the running engine, or raises changing nothing."""

    @property
    @abstractmethod
    def tokens(self) -> int:
        """Tokens the running engine has counted."""

    # -- any thread --------------------------------------------------------------------
    def submit(self, cfg: Config) -> int:
        """Queues whole new settings; returns the version they will carry."""
        with self._lock:
            self.version += 1
            self._pending = (cfg, self.version)
            self._hurry()
            self._lock.notify_all()
            return self.version

    def wait_applied(self, version: int, timeout: float = 30.0) -> bool:
        """Until settings `version` was applied or refused (see `rejection`); False when
        `timeout` seconds passed first."""
        with self._lock:
            return self._lock.wait_for(lambda: self.settled_version >= version, timeout)

    def withdraw(self, version: int) -> bool:
        """Takes back settings `version` if the loop has not taken it up yet."""
        with self._lock:
            if self._pending is None or self._pending[1] != version:
                return False
            self._pending = None
            self.settled_version = version
            self._lock.notify_all()
            return True

    def settings_state(self) -> tuple[int, Config]:
        """(version, settings) of what the engine runs, read together."""
        with self._lock:
            return self.applied_version, self.cfg

    def rejection(self, version: int) -> str | None:
        """Why settings `version` was not applied, or None."""
        with self._lock:
            return next((c["rejected"] for c in self.changes if c["version"] == version), None)

    # -- the thread that decodes, at a token boundary ----------------------------------
    def _take_pending(self) -> Pending | None:
        """The settings waiting to be applied, taken (under the lock)."""
        pending, self._pending = self._pending, None
        return pending

    def _apply_version(self, pending: Pending) -> list[str]:
        """Applies or refuses `pending`, whatever building or applying it raises, and logs
        the change; returns the knobs it changed that now run."""
        cfg, version = pending
        changed = changed_knobs(self.cfg, cfg)
        rebuilt, rejected = bool(RESTART & changed.keys()), None
        try:
            if rebuilt:
                self._rebuild(cfg)
            else:
                self._apply_live(cfg)
        except Exception as err:  # whatever it was, the running engine stays
            rejected = f"{type(err).__name__}: {err}"
            log.error("settings version %d refused, kept the running engine: %s",
                      version, rejected)
        with self._lock:
            if rejected is None:
                self.cfg, self.applied_version = cfg, version
            self.settled_version = version
            self.changes.append({"version": version, "token": self.tokens,
                                 "changed": changed, "rebuilt": rebuilt and not rejected,
                                 "rejected": rejected})
            self._lock.notify_all()
        return [] if rejected else list(changed)
