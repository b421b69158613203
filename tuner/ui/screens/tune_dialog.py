"""The dialog that asks how long a tune runs and what it searches."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label

from tuner.control.models import TuneRequest
from tuner.ui.screens.dialog import FormDialog


class TuneDialog(FormDialog[TuneRequest]):
    prefix = "tune"
    model = TuneRequest

    def compose(self) -> ComposeResult:
        with Vertical(id="tune-dialog", classes="dialog"):
            yield Label("Tune: Optuna trials as live changes, from the current settings",
                        classes="dialog-title")
            yield Label("the live session is paused while it runs; empty space = the knob "
                        "table's", classes="dialog-note")
            yield from self.form()
