"""The line at the top of every screen: engine state, settings version, model, device."""

from __future__ import annotations

from textual.markup import escape

from tuner.format import figure
from tuner.ui.widgets.readout import Readout
from tuner.vocabulary.snapshot import Snapshot

STATE_COLOURS = {"running": "$success", "paused": "$warning", "error": "$error"}


class StatusLine(Readout):
    def show(self, snap: Snapshot, where: str, link: str) -> None:
        state = snap["state"]
        model = snap["model"]
        arena = snap["arena"]
        version = f"settings v{snap['settings_version']}"
        if snap.get("pending_version"):
            version += f" (v{snap['pending_version']} pending)"
        # Without a link the snapshot's state is only what it last was.
        shown = (f"[b {STATE_COLOURS.get(state, '$foreground')}]● {escape(state)}[/]"
                 if link in ("", "live") else
                 f"[b $error]○ disconnected[/] (last seen {escape(state)})")
        parts = [
            shown,
            version,
            (f"{escape(model['name'])} · {model['layers']} layers × {model['experts']} experts"
             f" · top-{model['top_k']}"),
            escape(snap["device"]),
            f"arena {figure(arena['slots'])} slots {escape(arena['policy'])}",
            f"{figure(snap['tokens'])} tokens",
            self._where(where, link),
        ]
        line = " │ ".join(parts)
        if error := snap.get("error"):
            line += f"\n[$error]{escape(error)}[/]"
        self.show_text(line)

    def waiting(self, where: str, link: str) -> None:
        self.show_text(f"waiting for the first snapshot │ {self._where(where, link)}")

    @staticmethod
    def _where(where: str, link: str) -> str:
        if not link or link == "live":
            return escape(where)
        return f"{escape(where)} [$warning]{escape(link)}[/]"
