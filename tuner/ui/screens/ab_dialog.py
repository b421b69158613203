"""The dialog that asks which two presets to compare, and how long."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label

from tuner.ab_job import BASELINE, DEFAULT_PAIRS, DEFAULT_TOKENS
from tuner.measure.rules import RULESETS
from tuner.ui.screens.dialog import FormDialog, number

# (a, b, pairs, tokens, workloads, rules, max_kl, min_agreement); a quality limit of None
# is not checked
ABRequest = tuple[str, str, int, int, list[str], str, float | None, float | None]


class ABDialog(FormDialog[ABRequest | None]):
    prefix = "ab"
    # empty: the live workload, no rule set, that quality limit off
    optional = frozenset({"workloads", "rules", "max_kl", "min_agreement"})

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
            yield from self.form((
                ("a", "preset A (baseline)", a, "text"),
                ("b", "preset B", b, "text"),
                ("pairs", "A B pairs", str(pairs), "integer"),
                ("tokens", "tokens per run", str(tokens), "integer"),
                ("workloads", "workloads (a,b,...)", "", "text"),
                ("rules", f"rules ({', '.join(RULESETS)})", "", "text"),
                ("max_kl", "max KL (empty: off)", "", "number"),
                ("min_agreement", "min top-1 % (empty: off)", "", "number")))

    def _done(self) -> None:
        v = self.values()
        if v is not None:
            self.dismiss((v["a"], v["b"], int(v["pairs"]), int(v["tokens"]),
                          [w.strip() for w in v["workloads"].split(",") if w.strip()],
                          v["rules"], number(v["max_kl"]), number(v["min_agreement"])))
