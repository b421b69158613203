"""Command palette providers: every key of the app, every knob and every preset as a
command, and per-layer budgets computed from the window.

The app's keys (screens, pause, reset, help) are found by their names. A flag can be
toggled and a choice picked from the palette; any knob can be jumped to in the form. Knob
commands go through the Knobs screen, so a rejected value is shown there.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from tuner.control.errors import BackendError

if TYPE_CHECKING:
    from tuner.ui.app import TunerApp

Command = tuple[str, str, Callable[[], object]]  # text, help, callback


class _Commands(Provider):
    @property
    def tuner(self) -> TunerApp:
        """The app: Provider's `app` is typed as an app of any result."""
        return cast("TunerApp", self.app)

    @abstractmethod  # Provider is an ABC: a provider without commands cannot be made
    def commands(self) -> Iterator[Command]:
        """The palette's commands of this provider, each (text, help, callback)."""

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help, callback in self.commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, text=text, help=help)

    async def discover(self) -> Hits:
        for text, help, callback in self.commands():
            yield DiscoveryHit(text, callback, text=text, help=help)


class KeyCommands(_Commands):
    """The app's own keys, named as the footer names them."""

    def commands(self) -> Iterator[Command]:
        app = self.tuner
        for b in app.BINDINGS:
            if isinstance(b, Binding) and b.description:
                yield (b.description.lower(), b.tooltip or b.description,
                       partial(app.run_action, b.action))


class KnobCommands(_Commands):
    def commands(self) -> Iterator[Command]:
        app, settings = self.tuner, self.tuner.state.settings
        for spec in app.knob_specs:
            name, now = spec["name"], settings.get(spec["name"])
            if spec["kind"] == "flag":
                yield (f"toggle {name} (now {'on' if now else 'off'})", spec["help"],
                       partial(app.set_knob, name, not now))
            elif spec["kind"] == "choice":
                for choice in spec["choices"] or ():
                    if choice != now:
                        yield (f"set {name} = {choice}", spec["help"],
                               partial(app.set_knob, name, choice))
            yield f"edit {name} (now {now!r})", spec["help"], partial(app.edit_knob, name)


class BudgetCommands(_Commands):
    def commands(self) -> Iterator[Command]:
        for weights, what in (("hits", "the most hits"), ("stall", "the most stall saved")):
            yield (f"apply per-layer budgets from the window ({weights})",
                   f"quotas for {what}, from the hit curves of the window's routings; "
                   "arena_split = layers", partial(self.tuner.apply_budgets, weights))


class PresetCommands(_Commands):
    async def startup(self) -> None:
        try:
            self.presets = [p for p in await self.tuner.backend.presets() if not p["error"]]
        except BackendError:
            self.presets = []  # the palette still offers the other commands

    def commands(self) -> Iterator[Command]:
        for preset in self.presets:
            name = preset["name"]
            yield (f"apply preset {name}", preset["meta"].get("description", ""),
                   partial(self.tuner.apply_preset, name))
