"""The control plane's operations, each declared once: a method of `Backend` with its REST
route. What a UI (or a bench client) needs from an engine, whether it runs in this process
or behind a `tuner serve` elsewhere.

An operation's signature, answer and route are written here only. `EmbeddedBackend`
(tuner.control.embedded) runs it as the Controller method of the same name, on a worker
thread; `RemoteBackend` (tuner.control.remote) sends it to its route: arguments named in
the path fill it, those listed in `query` go in the query, the rest make the JSON body (a
single model or mapping is the body itself), and the answer is read back as the declared
type. The server (tuner.web) serves each route from the same Controller method; a test
checks that the routes, the Controller and this table agree.

The methods are coroutines so that both backends fit an event loop: the remote one awaits
the network, the embedded one the engine's blocking calls. Snapshots are pulled, not
pushed: `latest()` returns the newest snapshot there is and the UI asks for it at its own
repaint rate, so older snapshots are never queued or drawn. Every operation raises
BackendError (tuner.control.errors), with Rejected and Conflict where they apply.
"""

from __future__ import annotations

import functools
import inspect
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast, get_type_hints

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
from tuner.control.models import ABRequest, RunState, SessionState, TuneRequest
from tuner.vocabulary.snapshot import Experts, Snapshot

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # "{name}" parts are filled from the arguments of that name
    query: tuple[str, ...] = ()  # arguments sent in the query
    none_when: int | None = None  # an answer of this status means "nothing yet": None

    @property
    def path_names(self) -> tuple[str, ...]:
        return tuple(re.findall(r"{(\w+)}", self.path))


@dataclass(frozen=True)
class Operation:
    route: Route
    declared: Callable[..., Any]  # the method as written: name, parameters, answer's type

    @property
    def name(self) -> str:
        return self.declared.__name__

    def answer(self) -> Any:
        """The declared type of the answer."""
        return get_type_hints(self.declared)["return"]


OPERATIONS: dict[str, Operation] = {}  # by name, in declaration order


def route(method: str, path: str, query: tuple[str, ...] = (),
          none_when: int | None = None) -> Callable[[F], F]:
    """Declares the decorated method an operation served at `method path`; its body is
    replaced by a call of the backend's `call` with the arguments by name."""
    def declare(fn: F) -> F:
        operation = Operation(Route(method, path, query, none_when), fn)
        OPERATIONS[fn.__name__] = operation
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        async def call(self: Backend, *args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            return await self.call(operation, dict(list(bound.arguments.items())[1:]))

        return cast(F, call)

    return declare


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
    def latest(self) -> Snapshot | None:
        """The newest snapshot, or None before the first one."""

    @abstractmethod
    async def call(self, operation: Operation, arguments: dict[str, Any]) -> Any:
        """Runs `operation` with its arguments by name; answers its declared type."""

    # -- the operations ------------------------------------------------------------------
    @route("GET", "/api/knobs")
    async def knobs(self) -> list[KnobInfo]:
        """The knob table, one `Knob.as_dict()` per knob, in table order."""

    @route("GET", "/api/settings")
    async def state(self) -> SessionState:
        """The settings the engine runs and their version, read together."""

    @route("PATCH", "/api/settings")
    async def change(self, changes: Mapping[str, Any]) -> SessionState:
        """Applies `changes` as a whole at the next token boundary; raises Rejected."""

    @route("GET", "/api/snapshot")
    async def snapshot(self) -> Snapshot:
        """Everything the engine measured, taken now (the websockets send the same, at
        their rate; `latest()` is the newest a backend has without asking)."""

    @route("POST", "/api/session/pause")
    async def pause(self) -> RunState:
        """Stops decoding at the next token boundary."""

    @route("POST", "/api/session/resume")
    async def resume(self) -> RunState:
        """Decodes again (after an error, on a rebuilt engine)."""

    @route("POST", "/api/session/reset")
    async def reset(self) -> RunState:
        """Zeroes the counters (cumulative and window) at the next token boundary."""

    @route("POST", "/api/budgets")
    async def window_budgets(self, weights: str = "hits", apply: bool = False
                             ) -> Budgets:
        """Per-layer quotas from the window's routings, with `apply` applied (arena_split =
        layers); what `tuner budgets` prints, plus the settings `version` when applied.
        Raises Rejected when the window is empty or the quotas do not fit."""

    @route("GET", "/api/presets")
    async def presets(self) -> list[PresetInfo]:
        """Every preset; a broken file is listed with its error."""

    @route("GET", "/api/presets/{name}")
    async def preset(self, name: str) -> PresetBody:
        """One preset: its [preset] metadata and its knobs. Raises BackendError for an
        unknown name or a broken file."""

    @route("POST", "/api/presets/{name}")
    async def save_preset(self, name: str, description: str | None,
                          overwrite: bool = False) -> PresetBody:
        """Saves the current settings as a user preset. Raises Conflict when a user preset
        of that name exists and not `overwrite`; BackendError for a shipped name.
        `description` None keeps a replaced preset's description."""

    @route("POST", "/api/presets/{name}/apply")
    async def apply_preset(self, name: str) -> SessionState:
        """The preset's knobs on top of the defaults (the session knobs stay unless it sets
        them), applied at the next token boundary."""

    @route("DELETE", "/api/presets/{name}")
    async def delete_preset(self, name: str) -> None:
        """Deletes a user preset. Raises BackendError for a shipped or unknown one."""

    @route("GET", "/api/presets/{name}/diff", query=("against",))
    async def diff_preset(self, name: str, against: str | None = None
                          ) -> list[KnobDiff]:
        """Knobs where preset `name` (a) and preset `against` or the current settings (b)
        differ: [{knob, env, a, b}]."""

    @route("POST", "/api/ab")
    async def start_ab(self, request: ABRequest) -> ABStatus:
        """Starts an A/B of two presets in the background, the live session paused while it
        runs; returns the job: the request, then {total_runs, state, runs, result, error}.
        Raises BackendError for an unknown preset or while a job runs; nothing starts
        then."""

    @route("GET", "/api/ab", none_when=404)
    async def ab_status(self) -> ABStatus | None:
        """The latest A/B job (as `start_ab` returns it), or None when none was started."""

    @route("GET", "/api/experts", query=("view",))
    async def experts(self, view: Literal["window", "cumulative"] = "window") -> Experts:
        """Per layer and expert: routings, sync misses and residency (`Session.experts`)."""

    @route("GET", "/api/curve")
    async def curve(self) -> Curve | None:
        """The newest live hit curve (tuner.traces.curve), or None while the first one is
        being computed."""

    @route("POST", "/api/tune")
    async def start_tune(self, request: TuneRequest) -> TuneStatus:
        """Starts a tune from the live settings in the background, the live session paused
        while it runs; returns the job. Raises BackendError for a bad space or fix, or
        while a job runs; nothing starts then."""

    @route("GET", "/api/tune", none_when=404)
    async def tune_status(self) -> TuneStatus | None:
        """The latest tune job, or None when none was started."""

    @route("POST", "/api/tune/stop", none_when=404)
    async def stop_tune(self) -> TuneStatus | None:
        """Ends the tune at the next token; the job, or None when none was started."""

