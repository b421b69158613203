"""The dialog that asks which two presets to compare, and how long."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label

from tuner.ab_job import BASELINE, DEFAULT_PAIRS, DEFAULT_TOKENS
from tuner.measure.rules import RULESETS
from tuner.ui.screens.dialog import Dialog

# (a, b, pairs, tokens, workloads, rules, max_kl, min_agreement); a quality limit of None
# is not checked
ABRequest = tuple[str, str, int, int, list[str], str, float | None, float | None]
# empty: the live workload, no rule set, that quality limit off
OPTIONAL = ("ab-workloads", "ab-rules", "ab-max_kl", "ab-min_agreement")


class ABDialog(Dialog[ABRequest | None]):
    def __init__(self, a: str = BASELINE, b: str = "", pairs: int = DEFAULT_PAIRS,
                 tokens: int = DEFAULT_TOKENS):
        super().__init__()
        self.defaults = (a, b, pairs, tokens)

    def compose(self) -> ComposeResult:
        a, b, pairs, tokens = self.defaults
        with Vertical(id="ab-dialog", classes="dialog"):
            yield Label("A/B of two presets: A B A B ... A on fresh sessions",
                        classes="dialog-title")
            yield Label("the live session is paused while it runs", classes="dialog-note")
            # A label beside each field: a placeholder is gone once there is a value.
            for key, label, value, kind in (("a", "preset A (baseline)", a, "text"),
                                            ("b", "preset B", b, "text"),
                                            ("pairs", "A B pairs", str(pairs), "integer"),
                                            ("tokens", "tokens per run", str(tokens),
                                             "integer"),
                                            ("workloads", "workloads (a,b,...)", "", "text"),
                                            ("rules", f"rules ({', '.join(RULESETS)})", "",
                                             "text"),
                                            ("max_kl", "max KL (empty: off)", "", "number"),
                                            ("min_agreement", "min top-1 % (empty: off)", "",
                                             "number")):
                with Horizontal(classes="dialog-field"):
                    yield Label(label)
                    yield Input(value, placeholder=label, type=kind, compact=True,
                                id=f"ab-{key}")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Start", variant="primary", id="start")
                yield Button("Cancel", id="cancel")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._done()

    def _done(self) -> None:
        # Names and ranges are checked by the engine or the server, whose messages say
        # which presets there are and what is allowed.
        fields = {i.id: i for i in self.query(Input)}
        for field in fields.values():
            value = field.value.strip()
            if (not value and field.id not in OPTIONAL) or (
                    field.type == "integer" and not value.lstrip("-").isdigit()):
                field.focus()
                self.notify(f"{field.placeholder}: a value is needed", severity="warning",
                            markup=False)
                return
        a, b, pairs, tokens, workloads, rules = (
            fields[k].value.strip() for k in ("ab-a", "ab-b", "ab-pairs", "ab-tokens",
                                              "ab-workloads", "ab-rules"))
        max_kl, min_agreement = (float(v) if (v := fields[k].value.strip()) else None
                                 for k in ("ab-max_kl", "ab-min_agreement"))
        self.dismiss((a, b, int(pairs), int(tokens),
                      [w.strip() for w in workloads.split(",") if w.strip()], rules, max_kl,
                      min_agreement))
