"""Text that changes with every snapshot but rarely changes its size."""

from __future__ import annotations

from textual.widgets import Static


class Readout(Static):
    """A Static that is drawn again only when its text changed, and whose updates lay the
    screen out again only when its number of lines changes: a layout pass repaints every
    widget on the screen, the layer table included, which would double the cost of a
    repaint."""

    def __init__(self, text: str = "", **kwargs):
        super().__init__(text, **kwargs)
        self._text: str | None = None
        self._lines = 0

    def show_text(self, text: str) -> None:
        if text == self._text:
            return
        lines = text.count("\n") + 1
        self.update(text, layout=lines != self._lines)
        self._text, self._lines = text, lines
