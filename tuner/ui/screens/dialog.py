"""What the modal dialogs share: escape or Cancel closes with None, the primary button
submits through `_done`; and `Confirm`, a yes-or-cancel question."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

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
