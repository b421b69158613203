"""Knobs: the settings form, one field per knob of the table, applied live.

Each edit goes to the backend as a change of that one knob: a switch or a choice at once,
a typed value when the field is left (enter, tab or a click elsewhere), so typed text is
never dropped unseen; escape leaves the field and puts back what the engine runs. Once out
of a field the app's keys (1-5, p, r, ...) work again, and tab goes on from the field left.
The screen opens in its first field, so what is typed there is a value, never a key that
switches screens. Accepted: the form takes the settings the engine now runs. Rejected: the
field shows the engine's message and goes back to the value the engine still runs, since
nothing was applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Input, Label, Static

from tuner.control.answers import KnobValue
from tuner.control.errors import BackendError, Rejected, SettingsError
from tuner.control.models import SettingsPatch
from tuner.format import knob_text
from tuner.ui.screens.base import SnapshotScreen
from tuner.ui.widgets.knob_field import KnobField, as_text
from tuner.vocabulary.snapshot import Snapshot


class KnobsScreen(SnapshotScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave_field", "Leave field",
                tooltip="leave a field being typed in, putting back what the engine runs"),
        Binding("tab", "next_field(1)", "Next field", show=False),
        Binding("shift+tab", "next_field(-1)", "Previous field", show=False),
    ]

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.shown_version = 0
        self.left: KnobField | None = None  # the field enter or escape left, for tab

    def compose_body(self) -> ComposeResult:
        settings = self.app.state.settings
        self.shown_version = self.app.state.version
        yield Static(id="form-problem", markup=False)
        with VerticalScroll(id="knob-form"):
            group = None
            for spec in self.app.knob_specs:
                if spec["group"] != group:
                    group = spec["group"]
                    yield Label(group, classes="knob-group")
                yield KnobField(spec, settings.get(spec["name"]))

    def on_mount(self) -> None:
        self._form_problem("")
        self.query(KnobField).first().control.focus()

    def _leave(self, field: KnobField) -> None:
        """Focus to the form, out of the field: the app's keys work; tab goes on from it."""
        self.left = field
        self.query_one("#knob-form").focus()

    def action_next_field(self, step: int) -> None:
        """Tab: the field after the one left by enter or escape, else the next widget."""
        if self.left is None or self.app.focused is not self.query_one("#knob-form"):
            if step > 0:
                self.focus_next()
            else:
                self.focus_previous()
            return
        fields = list(self.query(KnobField))
        field = fields[(fields.index(self.left) + step) % len(fields)]
        field.control.focus()
        field.scroll_visible()

    def fields(self) -> dict[str, KnobField]:
        return {f.knob: f for f in self.query(KnobField)}

    def show(self, snap: Snapshot) -> None:
        # Settings changed elsewhere (another client, a preset) reach the form here.
        if snap["settings_version"] > self.shown_version:
            self.sync(snap["settings"], snap["settings_version"])

    def sync(self, settings: Mapping[str, KnobValue], version: int) -> None:
        self.shown_version = version
        for name, field in self.fields().items():
            if name in settings and not field.editing:
                field.set_value(settings[name])

    def edit(self, knob: str) -> None:
        """Moves the focus to a knob's field (from the command palette)."""
        field = self.fields()[knob]
        field.control.focus()
        field.scroll_visible()

    def on_knob_field_edited(self, event: KnobField.Edited) -> None:
        if isinstance(event.field.control, Input):
            self._leave(event.field)  # leaving the field applies it (below)
            return
        self._edit(event.field, event.value)

    def on_input_blurred(self, event: Input.Blurred) -> None:
        field = event.input.parent
        if isinstance(field, KnobField):
            self._edit(field, event.value)

    def _edit(self, field: KnobField, value: KnobValue) -> None:
        current = self.app.state.settings.get(field.knob)
        if value == current or value == as_text(current):
            field.show_problem(None)
            return
        self.submit({field.knob: value})

    def action_leave_field(self) -> None:
        focused = self.app.focused
        if isinstance(focused, Input) and isinstance(focused.parent, KnobField):
            field = focused.parent
            field.set_value(self.app.state.settings.get(field.knob))
            self._leave(field)

    def submit(self, changes: Mapping[str, KnobValue]) -> None:
        self.run_worker(self._apply(dict(changes)), group="apply")

    async def _apply(self, changes: dict[str, KnobValue]) -> None:
        fields = self.fields()
        try:
            # typed text becomes the knob's type here: the engine takes typed values only
            state = await self.app.backend.change(SettingsPatch.of_texts(changes).root)
        except (Rejected, SettingsError) as err:
            self._reject(changes, err.problems)
            return
        except BackendError as err:
            self._reject(changes, {})
            self.notify(str(err), title="not applied", severity="error", markup=False)
            return
        self.app.state = state
        self._form_problem("")
        for knob in changes:
            if knob in fields:
                fields[knob].show_problem(None)
        self.sync(state.settings, state.version)
        what = ", ".join(f"{k} = {knob_text(state.settings.get(k))}" for k in changes)
        self.notify(f"settings v{state.version}: {what}", title="applied", markup=False)

    def _form_problem(self, text: str) -> None:
        """A problem of several knobs together (such as io_urgent < io_workers)."""
        problem = self.query_one("#form-problem", Static)
        problem.update(text)
        problem.display = bool(text)

    def _reject(self, changes: Mapping[str, KnobValue], problems: Mapping[str, str]) -> None:
        """Shows each problem at its field (or above the form when it concerns several
        knobs) and puts the fields back to the values the engine still runs."""
        fields, settings = self.fields(), self.app.state.settings
        for knob in changes:
            if knob in fields:
                fields[knob].show_problem(problems.get(knob))
                fields[knob].set_value(settings.get(knob))
        others = [msg for knob, msg in problems.items() if knob not in fields]
        self._form_problem("\n".join(others))
        if problems:
            self.notify("\n".join(problems.values()), title="rejected", severity="error",
                        markup=False)
