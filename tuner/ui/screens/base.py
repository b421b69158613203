"""What every mode's screen shares: the status line on top, the key footer below, and
painting from the newest snapshot when the app's repaint timer asks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer

from tuner.ui.widgets.status import StatusLine
from tuner.vocabulary.snapshot import Snapshot

if TYPE_CHECKING:
    from tuner.ui.app import TunerApp


class SnapshotScreen(Screen):
    app: TunerApp

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        """The screen's own widgets, between the status line and the footer. Every mode
        defines it (a Screen's metaclass is not an ABC, so @abstractmethod would not be
        enforced)."""
        raise NotImplementedError

    def paint(self, snap: Snapshot) -> None:
        backend = self.app.backend
        self.query_one(StatusLine).show(snap, backend.where, backend.link)
        self.show(snap)

    def show(self, snap: Snapshot) -> None:
        """Puts the snapshot's figures on the screen (the status line is done)."""

    def waiting(self) -> None:
        backend = self.app.backend
        self.query_one(StatusLine).waiting(backend.where, backend.link)

    def on_mount(self) -> None:
        # Queued: the screen counts as mounted once its mount handlers have all run.
        self.call_later(self.app.repaint, True)

    def on_screen_resume(self) -> None:
        # The first resume can come before the screen is mounted; on_mount paints then.
        if self.is_mounted:
            self.app.repaint(force=True)
