"""The dialog that asks for a preset's name and description."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label

from tuner.ui.screens.dialog import Dialog


class SavePresetScreen(Dialog[tuple[str, str] | None]):
    def compose(self) -> ComposeResult:
        with Vertical(id="save-dialog", classes="dialog"):
            yield Label("Save the current settings as a preset", classes="dialog-title")
            yield Input(placeholder="name (letters, digits, . _ -)", id="preset-name")
            yield Input(placeholder="description (optional; empty keeps a replaced preset's)",
                        id="preset-description")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Save", variant="primary", id="save")
                yield Button("Cancel", id="cancel")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "preset-name":
            self.query_one("#preset-description", Input).focus()
        else:
            self._done()

    def _done(self) -> None:
        # The name is checked by the preset store, whose message says what a name may be.
        name = self.query_one("#preset-name", Input).value.strip()
        description = self.query_one("#preset-description", Input).value.strip()
        if not name:
            self.query_one("#preset-name", Input).focus()
            self.notify("a preset needs a name", severity="warning")
            return
        self.dismiss((name, description))
