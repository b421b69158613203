"""The dialog that asks how long a tune runs and what it searches."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label

from tuner.tune.worker import DEFAULT_OBJECTIVE
from tuner.tune_job import DEFAULT_TOKENS, DEFAULT_TRIALS
from tuner.ui.screens.dialog import Dialog

# (trials, tokens, objective, space, fix, max_kl, min_agreement); a limit of None is off
TuneRequest = tuple[int, int, str, str, str, float | None, float | None]
FIELDS = (("trials", "trials", str(DEFAULT_TRIALS), "integer"),
          ("tokens", "measured tokens per trial", str(DEFAULT_TOKENS), "integer"),
          ("objective", "objective: ms or stall", DEFAULT_OBJECTIVE, "text"),
          ("space", "space: knob=lo:hi,knob=a|b", "", "text"),
          ("fix", "fix: knob=value,...", "", "text"),
          ("max_kl", "max KL of lossy trials (empty: off)", "", "number"),
          ("min_agreement", "min top-1 % of lossy trials (empty: off)", "", "number"))
OPTIONAL = ("tune-space", "tune-fix", "tune-max_kl", "tune-min_agreement")


class TuneDialog(Dialog[TuneRequest | None]):
    def compose(self) -> ComposeResult:
        with Vertical(id="tune-dialog", classes="dialog"):
            yield Label("Tune: Optuna trials as live changes, from the current settings",
                        classes="dialog-title")
            yield Label("the live session is paused while it runs; empty space = the knob "
                        "table's", classes="dialog-note")
            for key, label, value, kind in FIELDS:
                with Horizontal(classes="dialog-field"):
                    yield Label(label)
                    yield Input(value, placeholder=label, type=kind, compact=True,
                                id=f"tune-{key}")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Start", variant="primary", id="start")
                yield Button("Cancel", id="cancel")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._done()

    def _done(self) -> None:
        # Ranges, the objective and the space are checked by the tune runner, whose
        # messages name the knob and what it allows.
        fields = {i.id: i for i in self.query(Input)}
        for field in fields.values():
            value = field.value.strip()
            if field.id in OPTIONAL:
                continue
            if not value or (field.type == "integer" and not value.lstrip("-").isdigit()):
                field.focus()
                self.notify(f"{field.placeholder}: a value is needed", severity="warning",
                            markup=False)
                return
        trials, tokens, objective, space, fix, max_kl, min_agreement = (
            fields[f"tune-{k[0]}"].value.strip() for k in FIELDS)
        self.dismiss((int(trials), int(tokens), objective, space, fix,
                      float(max_kl) if max_kl else None,
                      float(min_agreement) if min_agreement else None))
