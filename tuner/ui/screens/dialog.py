"""What the modal dialogs share: escape or Cancel closes with None, the primary button
submits through `_done`; and `Confirm`, a yes-or-cancel question."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, TypeVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label

R = TypeVar("R")


class Dialog(ModalScreen[R]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.variant == "primary":
            self._done()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def _done(self) -> None:
        """Checks the fields and dismisses with the result, or says what is missing. Every
        dialog defines it (a Screen's metaclass is not an ABC)."""
        raise NotImplementedError


# key, label, initial value, input type ("text", "integer" or "number")
Field = tuple[str, str, str, str]


class FormDialog(Dialog[R]):
    """Labelled inputs, then Start and Cancel; enter in a field submits too. Inputs are
    named `<prefix>-<key>`; keys in `optional` may stay empty."""

    prefix: ClassVar[str]
    optional: ClassVar[frozenset[str]] = frozenset()

    def form(self, fields: Iterable[Field]) -> ComposeResult:
        # A label beside each field: a placeholder is gone once there is a value.
        for key, label, value, kind in fields:
            with Horizontal(classes="dialog-field"):
                yield Label(label)
                yield Input(value, placeholder=label, type=kind, compact=True,
                            id=f"{self.prefix}-{key}")
        with Horizontal(classes="dialog-buttons"):
            yield Button("Start", variant="primary", id="start")
            yield Button("Cancel", id="cancel")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._done()

    def values(self) -> dict[str, str] | None:
        """Each field's text by key; None, with the first missing field focused and
        named, when a required one is empty or an integer is not one. Ranges and names
        are checked where the request goes, whose messages say what is allowed."""
        out = {}
        for field in self.query(Input):
            key, value = field.id.removeprefix(f"{self.prefix}-"), field.value.strip()
            if (not value and key not in self.optional) or (
                    value and field.type == "integer" and not value.lstrip("-").isdigit()):
                field.focus()
                self.notify(f"{field.placeholder}: a value is needed", severity="warning",
                            markup=False)
                return None
            out[key] = value
        return out


def number(text: str) -> float | None:
    """An optional number field: empty is None."""
    return float(text) if text else None


class Confirm(Dialog[bool]):
    """A question with a yes button (primary) and Cancel; dismissed with True or None."""

    def __init__(self, question: str, yes: str):
        super().__init__()
        self.question, self.yes = question, yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question, classes="dialog-title", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.yes, variant="primary", id="yes")
                yield Button("Cancel", id="cancel")

    def _done(self) -> None:
        self.dismiss(True)
