"""The dialog that asks which two presets to compare, and how long."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label

from tuner.control.models import BASELINE, ABRequest
from tuner.ui.screens.dialog import FormDialog


class ABDialog(FormDialog[ABRequest]):
    prefix = "ab"
    model = ABRequest

    def __init__(self, b: str = ""):
        super().__init__(a=BASELINE, b=b)

    def compose(self) -> ComposeResult:
        with Vertical(id="ab-dialog", classes="dialog"):
            yield Label("A/B of two presets: A B A B ... A on fresh sessions",
                        classes="dialog-title")
            yield Label("the live session is paused while it runs", classes="dialog-note")
            yield from self.form()
