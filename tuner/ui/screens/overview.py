"""Overview: the headline figures with their trends, and what the engine is running."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.widgets import Label

from tuner.format import figure
from tuner.ui.screens.base import SnapshotScreen
from tuner.ui.widgets.readout import Readout
from tuner.ui.widgets.trend import Trend
from tuner.vocabulary.counters import HEADLINES, PHASE_FIGURES, PHASES, PREDICTORS, TOTAL_BY_NAME
from tuner.vocabulary.snapshot import Snapshot

RECENT_CHANGES = 5


class OverviewScreen(SnapshotScreen):
    def compose_body(self) -> ComposeResult:
        with Vertical(id="trends"):
            with Horizontal(classes="trend trend-head"):
                yield Label("", classes="trend-label")
                yield Label("window", classes="trend-window")
                yield Label("cumulative", classes="trend-cumulative")
                yield Label("window, one point per repaint with new tokens",
                            classes="trend-spark")
            for headline in HEADLINES:
                yield Trend(headline, id=f"trend-{headline.key}")
        with Horizontal(id="facts"):
            yield Readout(id="engine-facts", classes="facts")
            yield Readout(id="predictor-facts", classes="facts")
        yield Readout(id="phase-facts", classes="facts")
        yield Readout(id="changes", classes="facts")
        yield Readout(id="text", classes="facts")

    def show(self, snap: Snapshot) -> None:
        window, cumulative = snap["window"]["totals"], snap["totals"]
        points = self.app.history.points
        for h in HEADLINES:
            self.query_one(f"#trend-{h.key}", Trend).show(
                window.get(h.key), cumulative.get(h.key), points[h.key])
        self.query_one("#engine-facts", Readout).show_text(engine_facts(snap))
        self.query_one("#predictor-facts", Readout).show_text(predictor_facts(snap))
        self.query_one("#phase-facts", Readout).show_text(phase_facts(snap))
        self.query_one("#changes", Readout).show_text(changes(snap))
        self.query_one("#text", Readout).show_text(conversation(snap))


def _rows(title: str, rows: list[tuple[str, str]]) -> str:
    width = max(len(name) for name, _ in rows)
    lines = [f"[b]{title}[/]"] + [f"{name:<{width}}  {value}" for name, value in rows]
    return "\n".join(lines)


def engine_facts(snap: Snapshot) -> str:
    t, w, model, arena = snap["totals"], snap["window"]["totals"], snap["model"], snap["arena"]
    return _rows("engine", [
        ("model", f"{escape(model['name'])} ({escape(model['arch'])})"),
        ("expert size", figure(model["expert_bytes"], "bytes")),
        ("arena", f"{figure(arena['slots'])} slots, {figure(arena['bytes'], 'bytes')}"),
        ("tokens", f"{figure(snap['tokens'])} in {figure(snap['conversations'])} conversations"),
        ("workload", f"{escape(snap['workload']['name'])}, turn {snap['workload']['turn']}"),
        ("tok/s", f"{figure(w['tok_s'])} window, {figure(t['tok_s'])} cumulative"),
        ("read GB/s", f"{figure(w['read_gbps'])} window, {figure(t['read_gbps'])} cumulative"),
        ("spec bytes/token", figure(w["spec_bytes_per_token"], "bytes")),
        ("residency %", figure(t["residency"], "%")),
        ("prefetch in flight", figure(t["pf_pending"])),
        ("output hash", escape(snap["output_hash"])),
    ])


def phase_facts(snap: Snapshot) -> str:
    """Prefill and decode side by side, cumulative: each its own profile."""
    cols = [TOTAL_BY_NAME[key] for key in PHASE_FIGURES]
    width = max(len(c.name) for c in cols)
    lines = ["[b]phases (cumulative)[/]",
             f"{'':<{width}}  {'prefill':>12}  {'decode':>12}  unit"]
    for c in cols:
        values = [figure(snap["phases"][p][c.name], c.unit) for p in PHASES]
        lines.append(f"{c.name:<{width}}  {values[0]:>12}  {values[1]:>12}  {c.unit}")
    return "\n".join(lines)


def predictor_facts(snap: Snapshot) -> str:
    w = snap["window"]["totals"]
    rows = [(p, (f"{figure(w[f'{p}_pct'], '%')} % of slots, "
                 f"{figure(w[f'{p}_whole_pct'], '%')} % whole routings"))
            for p in PREDICTORS]
    return _rows("predictors (window)", rows)


def changes(snap: Snapshot) -> str:
    lines = ["[b]recent settings changes[/]"]
    for change in snap["changes"][-RECENT_CHANGES:][::-1]:
        what = ", ".join(f"{k} {a!r} → {b!r}" for k, (a, b) in change["changed"].items())
        rebuilt = " (rebuilt)" if change["rebuilt"] else ""
        if change.get("rejected"):
            rebuilt = f" (rejected, kept the running engine: {change['rejected']})"
        lines.append(f"v{change['version']} at token {change['token']}: "
                     f"{escape(what) or 'no change'}{rebuilt}")
    if len(lines) == 1:
        lines.append("none yet")
    lines += [f"[$warning]note: {escape(note)}[/]" for note in snap["notes"]]
    return "\n".join(lines)


TEXT_CHARS = 400  # the tail of the output that fits a few lines


def conversation(snap: Snapshot) -> str:
    text = snap.get("text")
    if text is None:
        return "[b]text[/]\nthis model has no tokenizer.json: no text"
    output = text["output"][-TEXT_CHARS:]
    return (f"[b]text[/] (conversation {text['conversation']})\n"
            f"[dim]prompt[/] {escape(text['prompt'])}\n[dim]output[/] {escape(output)}")
