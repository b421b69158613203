"""The dialog that asks how long a tune runs and what it searches."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label

from tuner.tune.worker import DEFAULT_OBJECTIVE
from tuner.tune_job import DEFAULT_TOKENS, DEFAULT_TRIALS
from tuner.ui.screens.dialog import FormDialog, number

# (trials, tokens, objective, space, fix, max_kl, min_agreement); a limit of None is off
TuneRequest = tuple[int, int, str, str, str, float | None, float | None]


class TuneDialog(FormDialog[TuneRequest | None]):
    prefix = "tune"
    optional = frozenset({"space", "fix", "max_kl", "min_agreement"})

    def compose(self) -> ComposeResult:
        with Vertical(id="tune-dialog", classes="dialog"):
            yield Label("Tune: Optuna trials as live changes, from the current settings",
                        classes="dialog-title")
            yield Label("the live session is paused while it runs; empty space = the knob "
                        "table's", classes="dialog-note")
            yield from self.form((
                ("trials", "trials", str(DEFAULT_TRIALS), "integer"),
                ("tokens", "measured tokens per trial", str(DEFAULT_TOKENS), "integer"),
                ("objective", "objective: ms or stall", DEFAULT_OBJECTIVE, "text"),
                ("space", "space: knob=lo:hi,knob=a|b", "", "text"),
                ("fix", "fix: knob=value,...", "", "text"),
                ("max_kl", "max KL of lossy trials (empty: off)", "", "number"),
                ("min_agreement", "min top-1 % of lossy trials (empty: off)", "",
                 "number")))

    def _done(self) -> None:
        v = self.values()
        if v is not None:
            self.dismiss((int(v["trials"]), int(v["tokens"]), v["objective"], v["space"],
                          v["fix"], number(v["max_kl"]), number(v["min_agreement"])))
