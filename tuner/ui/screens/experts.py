"""Experts: which experts are hot (a layers x experts heat map of routings, sync misses or
residency) and whether the miss rate is a capacity or a policy problem (the live hit
curves of LRU, 2Q and Belady's bound over arena sizes, the current arena marked).

Both are asked of the backend at the repaint rate while the screen is shown; the curves
are computed in the background (tuner.traces.curve), so an answer may be a few seconds old
and says which token it was taken at.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.markup import escape

from tuner.control.answers import Curve
from tuner.control.errors import BackendError
from tuner.format import figure
from tuner.ui import run_exclusive
from tuner.ui.screens.base import SnapshotScreen
from tuner.ui.widgets.heat_map import METRICS, Cell, HeatMap
from tuner.ui.widgets.readout import Readout
from tuner.vocabulary.snapshot import Experts

BAR = 40  # cells for a hit rate of 100 %
METRIC_WORDS = {"routings": "routings", "misses": "sync misses", "resident": "resident"}


def cell_text(cell: Cell | None, data: Experts | None) -> str:
    """The figures of the heat map's cursor cell."""
    if cell is None or data is None:
        return "waiting for the first counts"
    experts = (f"expert {cell['first']}" if cell["experts"] == 1
               else f"experts {cell['first']}-{cell['last']}")
    routed, missed = cell["routings"], cell["misses"]
    hit = figure(100 * (routed - missed) / routed, "%") if routed else "-"
    if cell["resident"] is None:
        resident = "residency not taken yet"
    elif cell["experts"] == 1:
        resident = "resident" if cell["resident"] else "not resident"
    else:
        resident = f"{cell['resident']} of {cell['experts']} resident"
    span = (f"window of {figure(data['tokens'])} tokens" if data["view"] == "window"
            else f"whole run, {figure(data['tokens'])} tokens")
    taken = ("" if data["resident_at_token"] is None
             else f", residency at token {figure(data['resident_at_token'])}")
    return (f"layer {cell['layer']}, {experts}: {figure(routed)} routings, {figure(missed)} "
            f"sync misses (hit {hit} %), {resident} · {span}{taken}")


def bar(rate: float | None, bound: float | None) -> str:
    """The running policy's hit rate as a solid bar, the rest up to the bound shaded."""
    if rate is None:
        return ""
    solid = round(rate / 100 * BAR)
    gap = max(0, round((bound or rate) / 100 * BAR) - solid)
    return f"[$primary]{'█' * solid}[/][$error]{'░' * gap}[/]"


def curve_text(c: Curve | None) -> str:
    if c is None:
        return "[b]hit rate over arena size[/]\ncomputing the first curve"
    if c.get("error"):
        return f"[b]hit rate over arena size[/]\n[$error]the curve failed: {escape(c['error'])}[/]"
    policy, rates = c["policy"], c["hit_rate"]
    lines = [f"[b]hit rate % over arena size[/] · the window's {figure(c['tokens'])} tokens "
             f"replayed after {figure(c['warmup_tokens'])} warm-up tokens, at token "
             f"{figure(c['at_token'])} ({figure(c['seconds'])} s) · [$primary]█[/] {policy}, "
             "[$error]░[/] up to the bound",
             f"  {'slots':>7} {'ws':>5} {'lru':>6} {'2q':>6} {'opt':>6}"
             f"   ws: working sets of {figure(c['working_set'])} (layers x top-k)"]
    for i, size in enumerate(c["sizes"]):
        now = size == c["arena"]
        row = " ".join(f"{figure(rates[p][i], '%'):>6}" for p in ("lru", "2q", "opt"))
        live = f"  now, live {figure(c['live_hit_rate'], '%')}" if now else ""
        lines.append(f"{'▶' if now else ' '} {figure(size):>7} {c['working_sets'][i]:>5} {row}  "
                     f"{bar(rates[policy][i], rates['opt'][i])}{live}")
    summary = f"now {figure(c['arena'])} slots, {policy}"
    if c["gap_pp"] is not None:
        summary += f": [$error]gap to the bound {figure(c['gap_pp'], '%')} pp[/]"
    if c["next"]:
        n = c["next"]
        summary += (f" · {figure(n['added'])} more slots ({figure(n['slots'])}): "
                    f"{'+' if n['gain_pp'] >= 0 else ''}{figure(n['gain_pp'], '%')} pp")
    lines.append(summary)
    lines += [f"[$warning]note: {escape(note)}[/]" for note in c["notes"]]
    return "\n".join(lines)


class ExpertsScreen(SnapshotScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("m", "next_metric", "Colour",
                tooltip="colour the heat map by routings, sync misses or residency"),
        Binding("w", "toggle_window", "Window",
                tooltip="counts over the sliding window or since the last reset"),
    ]

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.windowed = True
        self.metric = METRICS[0]
        self.data: Experts | None = None

    def compose_body(self) -> ComposeResult:
        yield Readout(id="heat-caption")
        yield HeatMap(id="heat-map")
        yield Readout(id="heat-cell")
        yield Readout(id="curve-text")

    # (Textual calls these handlers of every class in the MRO: the base's run too.)
    def on_mount(self) -> None:
        run_exclusive(self, self.follow, "experts")

    def on_screen_resume(self) -> None:
        if self.is_mounted:  # else on_mount starts it
            run_exclusive(self, self.follow, "experts")

    def on_screen_suspend(self) -> None:
        self.workers.cancel_group(self, "experts")

    async def follow(self) -> None:
        """Asks for the per-expert counts and the curve at the repaint rate while shown."""
        reported = None
        while True:
            try:
                data = await self.app.backend.experts(
                    "window" if self.windowed else "cumulative")
                curve = await self.app.backend.curve()
            except BackendError as err:
                if str(err) != reported:  # once, not at every poll of a lost server
                    reported = str(err)
                    self.notify(reported, title="experts", severity="error", markup=False)
            else:
                self.data = data
                try:
                    self.query_one(HeatMap).show(data, self.metric)
                    self.query_one("#curve-text", Readout).show_text(curve_text(curve))
                    self._caption()
                except NoMatches:  # the app is closing and took the screen's widgets away
                    return
            await asyncio.sleep(1 / self.app.refresh_hz)

    def _caption(self) -> None:
        data = self.data
        span = "waiting" if data is None else (
            f"window: the last {figure(data['tokens'])} tokens" if self.windowed
            else f"cumulative: {figure(data['tokens'])} tokens")
        heat = self.query_one(HeatMap)
        group = f" · {heat.group} experts a cell" if heat.group > 1 else ""
        self.query_one("#heat-caption", Readout).show_text(
            f"experts across, layers down · colour: {METRIC_WORDS[self.metric]} · {span}"
            f"{group} · arrows or the mouse pick a cell")
        self.query_one("#heat-cell", Readout).show_text(cell_text(heat.cell(), data))

    def on_heat_map_cursor_moved(self) -> None:
        self._caption()

    def action_next_metric(self) -> None:
        self.metric = METRICS[(METRICS.index(self.metric) + 1) % len(METRICS)]
        if self.data is not None:
            self.query_one(HeatMap).show(self.data, self.metric)
        self._caption()

    def action_toggle_window(self) -> None:
        self.windowed = not self.windowed
        run_exclusive(self, self.follow, "experts")
