"""What the modal dialogs share: escape or Cancel closes with None, the primary button
submits through `_done`."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Button

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
