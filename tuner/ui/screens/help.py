"""The help dialog: the keys of every screen and what each layer column counts, both
generated from the tables that define them."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tuner.format import COLUMNS
from tuner.vocabulary.counters import HEADLINES

if TYPE_CHECKING:
    from tuner.ui.app import TunerApp


def key_table(app: TunerApp) -> Table:
    table = Table("where", "key", "does", box=None, padding=(0, 2, 0, 0))
    # Each screen's own keys; the ones every screen inherits from Textual are left out.
    sections = [("everywhere", app.BINDINGS)] + [
        (mode, vars(screen).get("BINDINGS", [])) for mode, screen in app.MODES.items()]
    for where, bindings in sections:
        for b in bindings:
            if isinstance(b, Binding) and b.description:
                keys = ", ".join(app.get_key_display(replace(b, key=key))
                                 for key in b.key.split(","))
                table.add_row(where, keys, b.tooltip or b.description)
                where = ""
    table.add_row("everywhere", app.COMMAND_PALETTE_BINDING,
                  "command palette: knobs, presets, screens")
    return table


def headline_table() -> Table:
    table = Table("figure", "unit", "what it is", box=None, padding=(0, 2, 0, 0))
    for h in HEADLINES:
        table.add_row(h.label, h.column.unit, h.column.help)
    return table


def column_table() -> Table:
    table = Table("column", "unit", "counts", box=None, padding=(0, 2, 0, 0))
    for c in COLUMNS:
        table.add_row(c.name, c.unit or "", c.help)
    return table


class HelpScreen(ModalScreen[None]):
    app: TunerApp
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help", classes="dialog"):
            yield Static("[b]Keys[/]")
            yield Static(key_table(self.app))
            yield Static("\n[b]Headline figures[/] (Overview; the page's charts)")
            yield Static(headline_table())
            yield Static("\n[b]Layer columns[/] (window: the last `window` tokens, "
                         "more while a prefilled prompt straddles its start; "
                         "cumulative: since the last reset; counts are sums over that span, "
                         "/token columns divide them by its tokens; `c` steps through the "
                         "column sets, left and right move the column cursor, `s` sorts by "
                         "its column)")
            yield Static(column_table())
