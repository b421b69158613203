"""Presets: the list, what one would change (diff against the current settings), apply,
save the current settings as a new one, and an A/B comparison of two presets."""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from tuner.control.answers import KnobValue
from tuner.control.errors import Conflict
from tuner.control.models import ABRequest
from tuner.format import knob_text
from tuner.ui import FAILED, run_exclusive
from tuner.ui.screens.ab import ABScreen
from tuner.ui.screens.ab_dialog import ABDialog
from tuner.ui.screens.base import SnapshotScreen
from tuner.ui.screens.dialog import Confirm
from tuner.ui.screens.save_preset import SavePresetScreen
from tuner.vocabulary.snapshot import Snapshot


def knob_summary(knobs: dict[str, KnobValue]) -> str:
    return ", ".join(f"{k}={knob_text(v)}" for k, v in knobs.items()) or "(engine defaults)"


class PresetsScreen(SnapshotScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "apply", "Apply", tooltip="apply the selected preset"),
        Binding("d", "diff", "Diff",
                tooltip="what the selected preset would change (also enter)"),
        Binding("s", "save", "Save", tooltip="save the current settings as a preset"),
        Binding("b", "ab", "A/B", tooltip="A/B of baseline (or another preset) and the "
                "selected one; the live session is paused while it runs"),
    ]

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.diffed: tuple[str, int] | None = None  # the preset diffed, at settings version

    def compose_body(self) -> ComposeResult:
        yield DataTable(id="preset-list", cursor_type="row")
        yield Static("select a preset: enter or d shows what it changes", id="diff-title",
                     markup=False)
        yield DataTable(id="preset-diff", cursor_type="none")

    def on_mount(self) -> None:
        presets = self.query_one("#preset-list", DataTable)
        presets.add_column("name", width=20, key="name")
        presets.add_column("source", width=8, key="source")
        presets.add_column("knobs", width=48, key="knobs")
        presets.add_column("description", key="description")
        diff = self.query_one("#preset-diff", DataTable)
        for name, width in (("knob", 20), ("env", 32), ("preset", 16), ("current", 16)):
            diff.add_column(name, width=width, key=name)

    def on_screen_resume(self) -> None:
        # A callable, not a coroutine: an exclusive worker may be cancelled before it starts.
        run_exclusive(self, self.load, "presets")

    @property
    def selected(self) -> str | None:
        presets = self.query_one("#preset-list", DataTable)
        if not presets.row_count:
            return None
        return presets.coordinate_to_cell_key(presets.cursor_coordinate).row_key.value

    async def load(self, select: str | None = None) -> None:
        """Lists the presets; a list, not a live figure, so it is rebuilt whole."""
        presets = await self.app.attempt(self.app.backend.presets(), "presets")
        if presets is FAILED:
            return
        table = self.query_one("#preset-list", DataTable)
        select = select or self.selected
        table.clear()
        for p in presets:
            if p["error"]:
                source, knobs, about = "broken", "", p["error"]
            else:
                source = "shipped" if p["shipped"] else "user"
                knobs, about = knob_summary(p["knobs"]), p["meta"].get("description", "")
            table.add_row(p["name"], source, knobs, about, key=p["name"])
        if select in {p["name"] for p in presets}:
            table.move_cursor(row=table.get_row_index(select))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "preset-list":
            self.action_diff()

    def action_diff(self) -> None:
        if self.selected:
            run_exclusive(self, partial(self.diff, self.selected), "diff")

    def show(self, snap: Snapshot) -> None:
        # The settings moved (an apply, a change anywhere): the diff shown is redone.
        if self.diffed and self.diffed[1] != snap["settings_version"]:
            run_exclusive(self, partial(self.diff, self.diffed[0]), "diff")

    async def diff(self, name: str) -> None:
        version = self.app.state.version
        rows = await self.app.attempt(self.app.backend.diff_preset(name), "diff")
        if rows is FAILED:
            return
        self.diffed = (name, version)
        table = self.query_one("#preset-diff", DataTable)
        table.clear()
        for row in rows:
            table.add_row(row["knob"], row["env"], knob_text(row["a"]), knob_text(row["b"]))
        title = (f"{name} would change {len(rows)} knob{'s' if len(rows) != 1 else ''}:"
                 if rows else f"{name} matches the current settings")
        self.query_one("#diff-title", Static).update(title)

    def action_apply(self) -> None:
        if self.selected:
            self.app.apply_preset(self.selected)

    def action_save(self) -> None:
        self.app.push_screen(SavePresetScreen(), self._save)

    def _save(self, answer: tuple[str, str] | None) -> None:
        if answer:
            self.run_worker(self.save(*answer), group="save")

    async def save(self, name: str, description: str, overwrite: bool = False) -> None:
        """An empty description keeps the one of a preset this replaces."""
        save = self.app.backend.save_preset(name, description or None, overwrite)
        try:
            if await self.app.attempt(save, "not saved", passing=(Conflict,)) is FAILED:
                return
        except Conflict:
            keeps = "" if description else ", keeping its description"
            question = (f"A user preset named {name} exists. Replace it with the current "
                        f"settings{keeps}?")

            def answered(yes: bool | None) -> None:
                if yes:
                    self.run_worker(self.save(name, description, True), group="save")

            self.app.push_screen(Confirm(question, "Replace"), answered)
            return
        self.notify(f"saved the current settings as {name}", title="preset", markup=False)
        await self.load(select=name)
        await self.diff(name)

    def action_ab(self) -> None:
        self.app.push_screen(ABDialog(b=self.selected or ""), self._ab)

    def _ab(self, request: ABRequest | None) -> None:
        if request:
            self.run_worker(self.start_ab(request), group="ab")

    async def start_ab(self, request: ABRequest) -> None:
        job = await self.app.attempt(self.app.backend.start_ab(request), "A/B not started")
        if job is FAILED:
            return
        await self.app.push_screen(ABScreen(job))
