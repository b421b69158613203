"""The UI's backend for an engine in this process: a Controller over a running Session.

The Controller's calls block (a change waits for the next token boundary, a restart-class
change rebuilds the arena), so each runs on a worker thread and the app's event loop only
awaits it. The session's lifetime belongs to whoever made it, not to the backend.

The UI and the decode thread share the GIL. A thread that wants it waits up to the
interpreter's switch interval (5 ms by default) for its holder to let go, and a repaint
holds it for about 10 ms at a time; at 1 ms the engine keeps decoding in between. On the
64-layer model at 2 Hz, the Layers screen cost the engine 8-10 % of its tokens per second
at 5 ms and 5-6 % at 1 ms (`tuner bench --only ui`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from tuner.control import GIL_SWITCH_S, ApplyTimeout, Controller
from tuner.knobs import KNOBS
from tuner.presets import PresetError, PresetExists
from tuner.settings import SettingsError
from tuner.ui.backend import Backend, BackendError, Conflict, Rejected, State

T = TypeVar("T")


class EmbeddedBackend(Backend):
    where = "embedded"

    def __init__(self, controller: Controller):
        self.controller = controller
        self.session = controller.session
        self._switch_interval = sys.getswitchinterval()

    async def open(self) -> None:
        sys.setswitchinterval(GIL_SWITCH_S)  # while the app runs: see above

    async def close(self) -> None:
        sys.setswitchinterval(self._switch_interval)

    def latest(self) -> dict[str, Any] | None:
        # The session builds a snapshot on request, so the newest is always the one taken.
        return self.session.snapshot()

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.to_thread(fn, *args)
        except SettingsError as err:
            raise Rejected(err.problems) from None
        except PresetExists as err:
            raise Conflict(str(err)) from None
        except (PresetError, ApplyTimeout) as err:
            raise BackendError(str(err)) from None

    async def knobs(self) -> list[dict[str, Any]]:
        return [k.as_dict() for k in KNOBS]

    async def state(self) -> State:
        return self.controller.state()

    async def change(self, changes: Mapping[str, Any]) -> State:
        await self._call(self.controller.change, dict(changes))
        return self.controller.state()

    async def pause(self) -> None:
        self.session.pause()

    async def resume(self) -> None:
        self.session.resume()

    async def reset(self) -> None:
        self.session.reset_counters()

    async def window_budgets(self, weights: str) -> dict[str, Any]:
        return await self._call(self.controller.window_budgets, weights, True)

    async def presets(self) -> list[dict[str, Any]]:
        return await self._call(self.controller.store.list)

    async def save_preset(self, name: str, description: str | None,
                          overwrite: bool = False) -> None:
        await self._call(self.controller.save_preset, name, description, None, overwrite)

    async def apply_preset(self, name: str) -> State:
        await self._call(self.controller.apply_preset, name)
        return self.controller.state()

    async def diff_preset(self, name: str) -> list[dict[str, Any]]:
        return await self._call(self.controller.diff, name)

    async def start_ab(self, a: str, b: str, pairs: int, tokens: int,
                       workloads: list[str] | None = None, rules: str = "",
                       max_kl: float | None = None, min_agreement: float | None = None
                       ) -> dict[str, Any]:
        try:
            job = await self._call(self.controller.ab.start, a, b, pairs, tokens, workloads,
                                   rules, max_kl, min_agreement)
        except ValueError as err:  # a value or name not allowed, or another A/B runs
            raise BackendError(str(err)) from None
        return job.as_dict()

    async def experts(self, window: bool) -> dict[str, Any]:
        return await self._call(self.session.experts, window)

    async def curve(self) -> dict[str, Any] | None:
        return await self._call(self.controller.curve.latest)

    async def ab_status(self) -> dict[str, Any] | None:
        job = self.controller.ab.job
        return None if job is None else job.as_dict()

    async def start_tune(self, trials: int, tokens: int, objective: str, space: str,
                         fix: str, max_kl: float | None = None,
                         min_agreement: float | None = None) -> dict[str, Any]:
        from tuner.tune_job import TuneBusy

        try:
            job = await self._call(self.controller.tune.start, trials, tokens, objective,
                                   space, fix, max_kl, min_agreement)
        except (ValueError, TuneBusy) as err:  # a bad space, count or limit, or one running
            raise BackendError(str(err)) from None
        return job.as_dict()

    async def tune_status(self) -> dict[str, Any] | None:
        job = self.controller.tune.job
        return None if job is None else job.as_dict()

    async def stop_tune(self) -> dict[str, Any] | None:
        job = self.controller.tune.stop()
        return None if job is None else job.as_dict()
