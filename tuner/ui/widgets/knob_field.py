"""One knob of the settings form, built from its entry in the knob table.

A flag is a Switch, a choice a Select, anything else an Input whose text goes to the
engine as typed: the engine's validation, not the form, decides what is allowed, so the
message on a bad value is the engine's own. The field only reports edits; the screen
applies them and tells the field to show a problem or take a value.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Grid, Horizontal
from textual.message import Message
from textual.widgets import Input, Label, Select, Static, Switch

from tuner.control.answers import KnobInfo, KnobValue
from tuner.format import knob_text


def as_text(value: object) -> str:
    return "" if value is None else str(value)


class KnobField(Grid):
    class Edited(Message):
        """The operator set a new value (Switch or Select changed, Input submitted)."""

        def __init__(self, field: KnobField, value: KnobValue):
            super().__init__()
            self.field = field
            self.knob = field.knob
            self.value = value

    def __init__(self, spec: KnobInfo, value: KnobValue | None):
        classes = "knob-field restart" if spec["restart"] else "knob-field"
        super().__init__(id=f"field-{spec['name']}", classes=classes)
        self.spec = spec
        self.knob: str = spec["name"]
        self.control = self._control(value)

    def _control(self, value: KnobValue | None) -> Switch | Select[str] | Input:
        spec, control_id = self.spec, f"knob-{self.knob}"
        if spec["kind"] == "flag":
            return Switch(value=bool(value), id=control_id)
        if spec["kind"] == "choice":
            return Select([(c, c) for c in spec["choices"] or ()], value=as_text(value),
                          allow_blank=False, compact=True, id=control_id)
        return Input(as_text(value), compact=True, select_on_focus=True, id=control_id)

    def compose(self) -> ComposeResult:
        spec = self.spec
        yield Label(self.knob, classes="knob-name", markup=False)
        yield Label("restart" if spec["restart"] else "live", classes="knob-class")
        if isinstance(self.control, Switch):
            with Horizontal(classes="knob-switch"):
                yield self.control
                yield Label(knob_text(self.control.value), classes="switch-state")
        else:
            yield self.control
        allowed = spec["allowed"] + (f" {spec['unit']}" if spec["unit"] else "")
        yield Label(allowed, classes="knob-allowed", markup=False)
        yield Label(spec["help"], classes="knob-help", markup=False)
        yield Static("", classes="knob-problem", markup=False)

    def on_mount(self) -> None:
        self.tooltip = f"{self.spec['env']}: {self.spec['help']}"

    def on_switch_changed(self, event: Switch.Changed) -> None:
        event.stop()
        self.query_one(".switch-state", Label).update(knob_text(event.value))
        self.post_message(self.Edited(self, event.value))

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        if isinstance(event.value, str):  # always: the select has no blank
            self.post_message(self.Edited(self, event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Edited(self, event.value))

    @property
    def editing(self) -> bool:
        """True while the operator is typing in the field: it is not overwritten then."""
        return isinstance(self.control, Input) and self.control.has_focus

    def set_value(self, value: KnobValue | None) -> None:
        """Shows `value` without reporting it as an edit."""
        control = self.control
        with self.prevent(Switch.Changed, Select.Changed):  # a reactive ignores its own value
            if isinstance(control, Switch):
                control.value = bool(value)
            else:  # a choice's name or an input's text
                control.value = as_text(value)
        if isinstance(control, Switch):
            self.query_one(".switch-state", Label).update(knob_text(control.value))

    def show_problem(self, message: str | None) -> None:
        self.query_one(".knob-problem", Static).update(message or "")
        self.set_class(bool(message), "-rejected")
