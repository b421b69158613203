"""The snapshot in the Prometheus text exposition format, generated from the counter table.

Per-layer counts (`COUNTERS`) become counters `tuner_layer_<name>_total{layer="i"}`; the
derived per-layer figures (`DERIVED`) become gauges; the headline figures (`HEADLINES`,
the ones the page charts and the terminal leads with) become gauges
`tuner_<name>{span="window"|"cumulative"}`; each phase's sums of the counts and its
`PHASE_FIGURES` carry a `phase="prefill"|"decode"` label. Counts restart from zero when
the counters are reset, which Prometheus treats as a counter reset.
"""

from __future__ import annotations

from collections.abc import Iterable

from tuner.vocabulary.counters import (
    COUNTERS,
    DERIVED,
    HEADLINES,
    PHASE_FIGURES,
    PHASES,
    TOTAL_BY_NAME,
    Shown,
)
from tuner.vocabulary.snapshot import Snapshot

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _family(name: str, kind: str, help_: str, samples: Iterable[tuple[str, float | None]]
            ) -> list[str]:
    help_ = help_.replace("\\", "\\\\").replace("\n", "\\n")
    lines = [f"# HELP {name} {help_}", f"# TYPE {name} {kind}"]
    # None marks a figure with nothing to measure yet (a rate over zero lookups).
    lines += [f"{name}{labels} {value}" for labels, value in samples if value is not None]
    return lines


def _per_layer(snapshot: Snapshot, col: Shown, counter: bool) -> list[str]:
    name = f"tuner_layer_{col.name}" + ("_total" if counter else "")
    samples = [(f'{{layer="{row["layer"]}"}}', row[col.name]) for row in snapshot["layers"]]
    return _family(name, "counter" if counter else "gauge", f"{col.help} ({col.unit})",
                   samples)


def render(snapshot: Snapshot) -> str:
    lines = [
        *_family("tuner_tokens_total", "counter", "tokens decoded since the last reset",
                 [("", snapshot["tokens"])]),
        *_family("tuner_decode_seconds_total", "counter",
                 "seconds spent decoding since the last reset",
                 [("", snapshot["totals"]["seconds"])]),
        *_family("tuner_settings_version", "gauge", "settings version the engine runs",
                 [("", snapshot["settings_version"])]),
        *_family("tuner_state", "gauge", "1 for the session's current state",
                 [(f'{{state="{snapshot["state"]}"}}', 1)]),
    ]
    spans = (("window", snapshot["window"]["totals"]), ("cumulative", snapshot["totals"]))
    for h in HEADLINES:
        lines += _family(f"tuner_{h.key}", "gauge", f"{h.label}: {h.column.help} "
                         f"({h.column.unit})",
                         [(f'{{span="{span}"}}', totals[h.key]) for span, totals in spans])
    phases = snapshot["phases"]
    for col in COUNTERS:
        lines += _family(f"tuner_phase_{col.name}_total", "counter",
                         f"{col.help} ({col.unit}), all layers, per phase",
                         [(f'{{phase="{p}"}}', phases[p][col.name]) for p in PHASES])
    for key in PHASE_FIGURES:
        c = TOTAL_BY_NAME[key]
        lines += _family(f"tuner_phase_{key}", "gauge", f"{c.help} ({c.unit}), per phase",
                         [(f'{{phase="{p}"}}', phases[p][key]) for p in PHASES])
    for col in COUNTERS:
        lines += _per_layer(snapshot, col, counter=True)
    for derived in DERIVED:
        lines += _per_layer(snapshot, derived, counter=False)
    return "\n".join(lines) + "\n"
