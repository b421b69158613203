"""How figures are written and shaded, and which layer columns are shown together, for the
terminal UI, the page and the command line. Plain functions and tables: no widgets, no
clocks. There is one formatter: a figure reads the same wherever it is shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tuner.knobs import written
from tuner.vocabulary.counters import COUNTERS, DERIVED, Heading, Shown

MISSING = "-"  # a figure the engine did not measure (nothing scored, no prefetch issued)
BINARY = ("B", "KiB", "MiB", "GiB", "TiB")


def figure(value: float | None, unit: str = "") -> str:
    """A snapshot value as text, in the unit the engine counts it in (per token or not:
    "bytes/token" is written as bytes are)."""
    if value is None:
        return MISSING
    base = unit.split("/")[0]
    if base == "bytes":
        return byte_size(value)
    if base == "%":
        return f"{value:.1f}"
    if base == "ms":
        return f"{value:,.2f}"
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.3g}" if abs(value) < 1 else f"{value:,.2f}"


def repeated_figure(value: float | list[float | None] | None, unit: str = "") -> str:
    """An A/B arm's counter: one figure where its runs agree, else each run's ("-" where a
    run measured none)."""
    if isinstance(value, list):
        return " / ".join(figure(v, unit) for v in value)
    return figure(value, unit)


def fixed(value: float | None, spec: str = ".3f") -> str:
    """A number in a fixed format (`spec`, as format() takes it) for tables of figures that
    line up; "-" where there is none."""
    return MISSING if value is None else format(value, spec)


def knob_text(value: Any) -> str:
    """A knob's value as the forms show it: a switch on or off, anything else as typed
    ("3,3,2" for a tuple knob; never a Python repr)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(written(value))


def byte_size(n: float) -> str:
    for unit in BINARY:
        if abs(n) < 1024 or unit == BINARY[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def levels(values: Iterable[float | None], steps: int) -> list[int | None]:
    """Each value's place between the column's smallest and largest, as 0..steps-1
    (None stays None). A column where all values are equal is all level 0."""
    values = list(values)
    present = [v for v in values if v is not None]
    if not present:
        return [None] * len(values)
    lo, hi = min(present), max(present)
    span = hi - lo
    return [None if v is None else
            0 if span == 0 else min(steps - 1, int((v - lo) / span * steps))
            for v in values]


# -- the layer table's columns -----------------------------------------------------------
LAYER = Heading("layer", "", "the layer's index")
COLUMNS: tuple[Shown, ...] = (LAYER, *DERIVED, *COUNTERS)  # rates and per-token figures first
ALL = "all"
# The column sets, in the order their columns come: one per unit, then all of them.
COLUMN_SETS: tuple[str, ...] = (*dict.fromkeys(c.unit for c in COLUMNS[1:]), ALL)


def columns_of(column_set: str) -> tuple[Shown, ...]:
    """The layer and the columns of `column_set` (a unit, or "all")."""
    return tuple(c for c in COLUMNS if c is LAYER or column_set in (ALL, c.unit))

def budgets_line(out: Mapping[str, Any]) -> str:
    """What applying window budgets did, in one line (the page and the terminal UI)."""
    r = out["replay"]
    return (f"settings v{out['version']}: quotas {', '.join(map(str, out['quotas']))} "
            f"({out['weights']}); the window's {out['tokens']} tokens replayed hit "
            f"{r['global']['hit_rate']} % in one shared arena, {r['even']['hit_rate']} % "
            f"split evenly, {r['budgets']['hit_rate']} % with these quotas")
