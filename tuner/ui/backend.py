"""What the terminal UI needs from an engine, whether it runs in this process or elsewhere.

Every screen talks to one `Backend`; `EmbeddedBackend` (tuner.ui.embedded) steers a
Session in this process through a Controller, `RemoteBackend` (tuner.ui.remote) steers a
`tuner serve` over REST and follows its websocket. The methods are coroutines so that
both fit the app's event loop: the remote one awaits the network, the embedded one runs
the engine's blocking calls on a worker thread.

Snapshots are pulled, not pushed: `latest()` returns the newest snapshot there is and the
UI asks for it at its own repaint rate, so older snapshots are never queued or drawn.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from enum import Enum
from typing import Any, Literal

# {"version": int, "settings": {knob: value}, "state": "running" | "paused" | "error"}
State = dict[str, Any]


class BackendError(RuntimeError):
    """An operation failed; the message is meant for the operator."""


class Rejected(BackendError):
    """The engine's validation refused a settings change; nothing was applied.

    `problems` maps a knob name (or "settings" for a rule across knobs) to the engine's own
    message, which names the knob, its env alias, the value and what is allowed."""

    def __init__(self, problems: Mapping[str, str]):
        self.problems = dict(problems)
        super().__init__("; ".join(self.problems.values()))


class Conflict(BackendError):
    """A save would replace a user preset; nothing was written. Saving again with
    `overwrite` replaces it."""


class Failed(Enum):
    """An operation whose error the operator has already been shown (TunerApp.attempt)."""

    FAILED = "failed"


FAILED: Literal[Failed.FAILED] = Failed.FAILED


class Backend(ABC):
    #: Where the engine is, for the status line: "embedded" or the server's URL.
    where: str = ""

    @property
    def link(self) -> str:
        """The state of the connection in words; empty when there is none to lose."""
        return ""

    async def open(self) -> None:
        """Acquires what the backend needs on the app's event loop."""

    async def close(self) -> None:
        """Releases what `open` acquired."""

    async def follow(self) -> None:
        """Keeps `latest()` fresh until cancelled (runs as a worker of the app)."""

    @abstractmethod
    def latest(self) -> dict[str, Any] | None:
        """The newest snapshot, or None before the first one."""

    @abstractmethod
    async def knobs(self) -> list[dict[str, Any]]:
        """The knob table, one `Knob.as_dict()` per knob, in table order."""

    @abstractmethod
    async def state(self) -> State: ...

    @abstractmethod
    async def change(self, changes: Mapping[str, Any]) -> State:
        """Applies `changes` as a whole at the next token boundary; raises Rejected."""

    @abstractmethod
    async def pause(self) -> None: ...

    @abstractmethod
    async def resume(self) -> None: ...

    @abstractmethod
    async def reset(self) -> None:
        """Zeroes the counters (cumulative and window)."""

    @abstractmethod
    async def window_budgets(self, weights: str) -> dict[str, Any]:
        """Computes per-layer quotas from the window's routings and applies them
        (arena_split = layers); returns what `tuner budgets` prints plus the settings
        `version`. Raises Rejected when the window is empty or the quotas do not fit."""

    @abstractmethod
    async def presets(self) -> list[dict[str, Any]]:
        """Every preset: {name, shipped, meta, knobs, error}."""

    @abstractmethod
    async def save_preset(self, name: str, description: str | None,
                          overwrite: bool = False) -> None:
        """Saves the current settings as a user preset. Raises Conflict when a user preset
        of that name exists and not `overwrite`; BackendError for a shipped name.
        `description` None keeps a replaced preset's description."""

    @abstractmethod
    async def apply_preset(self, name: str) -> State: ...

    @abstractmethod
    async def diff_preset(self, name: str) -> list[dict[str, Any]]:
        """Knobs where preset `name` (a) and the current settings (b) differ:
        [{knob, env, a, b}]."""

    @abstractmethod
    async def start_ab(self, a: str, b: str, pairs: int, tokens: int,
                       workloads: list[str] | None = None, rules: str = "",
                       max_kl: float | None = None, min_agreement: float | None = None
                       ) -> dict[str, Any]:
        """Starts an A/B of presets `a` and `b` in the background, on each of `workloads`
        (none: the live settings' workload) with rule set `rules` and the quality gate's
        limits, the live session paused while it runs; returns the job: {a, b, pairs,
        tokens, total_runs, workloads, rules, max_kl, min_agreement, state, runs, result,
        error}. Raises BackendError for an unknown preset, workload or rule set, a value out
        of range or while another A/B runs; nothing starts then."""

    @abstractmethod
    async def experts(self, window: bool) -> dict[str, Any]:
        """Per layer and expert: routings, sync misses and residency (`Session.experts`)."""

    @abstractmethod
    async def curve(self) -> dict[str, Any] | None:
        """The newest live hit curve (tuner.traces.curve), or None while the first one is
        being computed."""

    @abstractmethod
    async def ab_status(self) -> dict[str, Any] | None:
        """The latest A/B job (as `start_ab` returns it), or None when none was started."""

    @abstractmethod
    async def start_tune(self, trials: int, tokens: int, objective: str, space: str,
                         fix: str, max_kl: float | None = None,
                         min_agreement: float | None = None) -> dict[str, Any]:
        """Starts a tune from the live settings in the background, with the live session
        paused while it runs, lossy trials judged by the quality limits (with a limit the
        lossy knobs are searched too); returns the job (see
        `tuner.tune_job.TuneJob.as_dict`). Raises BackendError for a bad space, fix, count
        or limit, or while a tune or an A/B runs; nothing starts then."""

    @abstractmethod
    async def tune_status(self) -> dict[str, Any] | None:
        """The latest tune job, or None when none was started."""

    @abstractmethod
    async def stop_tune(self) -> dict[str, Any] | None:
        """Ends the tune at the next token; the job, or None when none was started."""
